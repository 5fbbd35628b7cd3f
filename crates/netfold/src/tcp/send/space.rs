//! The send sequence space and the peer's window (RFC 9293 §3.3.1, §3.10.7.4).
//!
//! SND.UNA =< SND.NXT =< SND.MAX in sequence space at all times: SND.NXT moves back (to
//! SND.UNA or ISS) only by [`Sender::rewind`] and [`Sender::rewind_to_syn`], forward only over
//! what was sent, and SND.UNA catches SND.NXT up when an ACK covers more than a rewound
//! SND.NXT.

use super::super::seq;
use super::Sender;

/// What an ACK of new data acknowledges ([`Sender::acked_by`]), for [`Sender::on_ack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acked {
    ack: u32,
    bytes: u32,
    ctl: u32,
}

impl Acked {
    /// Data bytes acknowledged (they leave the send queue).
    #[inline]
    pub fn bytes(&self) -> u32 {
        self.bytes
    }

    /// How many of our SYN and FIN were acknowledged (0, 1 or 2).
    #[inline]
    pub fn ctl(&self) -> u32 {
        self.ctl
    }
}

impl Sender {
    /// ISS: the initial send sequence number (our SYN's).
    #[inline]
    pub fn iss(&self) -> u32 {
        self.iss
    }

    /// SND.UNA: the oldest unacknowledged sequence number.
    #[inline]
    pub fn una(&self) -> u32 {
        self.una
    }

    /// SND.NXT: the next sequence number to send.
    #[inline]
    pub fn nxt(&self) -> u32 {
        self.nxt
    }

    /// SND.MAX: the highest sequence number sent + 1 (SND.NXT may be behind it after an
    /// RTO rewound it).
    #[inline]
    pub fn max(&self) -> u32 {
        self.max
    }

    /// SND.WND: the peer's window, scaled.
    #[inline]
    pub fn wnd(&self) -> u32 {
        self.wnd
    }

    /// MAX.SND.WND (RFC 5961 §5.2): the largest window the peer ever offered.
    #[inline]
    pub fn max_wnd(&self) -> u32 {
        self.max_wnd
    }

    /// Snd.Wind.Shift (RFC 7323 §2): the shift applied to the peer's window field.
    #[inline]
    pub fn wscale(&self) -> u8 {
        self.wscale
    }

    /// Eff.snd.MSS before options (RFC 9293 §3.7.1).
    #[inline]
    pub fn mss(&self) -> u32 {
        self.mss
    }

    /// Bytes sent and not yet acknowledged (SND.MAX - SND.UNA).
    #[inline]
    pub fn flight(&self) -> u32 {
        self.max.wrapping_sub(self.una)
    }

    /// The peer's SYN options (RFC 9293 §3.7.1, RFC 7323 §2.2): the effective send MSS and
    /// the shift for its window fields (0 when window scaling is off).
    pub fn on_syn_options(&mut self, mss: u32, wscale: u8) {
        self.mss = mss;
        self.wscale = wscale;
    }

    /// A path MTU lower than the current MSS allows (RFC 1191 §6.3, RFC 8201): the MSS
    /// becomes `mss` if that is smaller. Returns whether it did.
    pub fn lower_mss(&mut self, mss: u32) -> bool {
        if mss < self.mss {
            self.mss = mss;
            true
        } else {
            false
        }
    }

    /// A SYN without ACK arrived (a passive open, or a simultaneous open, RFC 9293 §3.5
    /// figure 7): its window is the peer's first (a SYN's window field is never scaled,
    /// RFC 7323 §2.2), and our SYN goes (again) from ISS, as a SYN-ACK.
    pub fn on_syn(&mut self, wnd: u32, seg_seq: u32) {
        self.take_window(wnd, seg_seq, self.iss);
        self.nxt = self.iss;
    }

    /// The peer's SYN-ACK acknowledged our SYN (SYN-SENT, RFC 9293 §3.10.7.3): its window
    /// (unscaled) is the first, and SND.UNA moves to SEG.ACK.
    pub fn on_syn_ack(&mut self, wnd: u32, seg_seq: u32, seg_ack: u32) {
        self.take_window(wnd, seg_seq, seg_ack);
        self.una = seg_ack;
        if seq::lt(self.nxt, seg_ack) {
            self.nxt = seg_ack;
        }
    }

    /// The connection was rebuilt from a SYN cookie (`syncookie.rs`): our SYN-ACK had ISS
    /// `iss`, was sent once and is never retransmitted, so SND.NXT = SND.MAX = ISS + 1 and
    /// the data starts there.
    pub fn restart(&mut self, iss: u32) {
        self.iss = iss;
        self.una = iss;
        self.wl2 = iss;
        self.nxt = iss.wrapping_add(1);
        self.max = self.nxt;
        self.buf_seq = self.nxt;
        self.recover = iss;
    }

    /// RFC 9293 §3.10.7.4 fifth check: the window is updated from a segment only if it is
    /// newer than the last update (SND.WL1 < SEG.SEQ, or SND.WL1 = SEG.SEQ and
    /// SND.WL2 =< SEG.ACK).
    #[inline]
    pub fn window_update_allowed(&self, seg_seq: u32, seg_ack: u32) -> bool {
        seq::lt(self.wl1, seg_seq) || (self.wl1 == seg_seq && seq::le(self.wl2, seg_ack))
    }

    /// An acceptable ACK's window (`wnd` already scaled): taken if the segment is newer than
    /// the last window update ([`Sender::window_update_allowed`]). Returns whether it was.
    #[inline]
    pub fn on_window_update(&mut self, wnd: u32, seg_seq: u32, seg_ack: u32) -> bool {
        let newer = self.window_update_allowed(seg_seq, seg_ack);
        if newer {
            self.take_window(wnd, seg_seq, seg_ack);
        }
        newer
    }

    /// The ACK that completes a passive handshake (SYN-RECEIVED, RFC 9293 §3.10.7.4): "set
    /// SND.WND <- SEG.WND, set SND.WL1 <- SEG.SEQ, and set SND.WL2 <- SEG.ACK" whatever the
    /// last update was (`wnd` already scaled).
    pub fn on_handshake_ack(&mut self, wnd: u32, seg_seq: u32, seg_ack: u32) {
        self.take_window(wnd, seg_seq, seg_ack);
    }

    /// Takes a window: SND.WND, SND.WL1, SND.WL2; MAX.SND.WND only grows.
    #[inline]
    fn take_window(&mut self, wnd: u32, seg_seq: u32, seg_ack: u32) {
        self.wnd = wnd;
        self.max_wnd = self.max_wnd.max(wnd);
        self.wl1 = seg_seq;
        self.wl2 = seg_ack;
    }

    /// SND.UNA advances to `ack` (SND.NXT with it, if an RTO had rewound it below), with
    /// nothing leaving the send queue (the ACK of a SYN).
    pub fn advance_una(&mut self, ack: u32) {
        self.una = ack;
        self.drop_record_ends(ack);
        if seq::lt(self.nxt, ack) {
            self.nxt = ack;
        }
    }

    /// What an ACK of new data, SND.UNA < `ack` =< SND.MAX, acknowledges: the data bytes
    /// it takes off the send queue and how many of our SYN and FIN it covers for the first
    /// time (each occupies one sequence number). [`Sender::on_ack`] takes it.
    #[inline]
    pub fn acked_by(&self, ack: u32) -> Acked {
        let data_end = self.fin_seq();
        let ctl = u32::from(self.una == self.iss)
            + u32::from(self.fin_queued && seq::gt(ack, data_end) && !seq::gt(self.una, data_end));
        Acked {
            ack,
            bytes: seq::dist(self.buf_seq, seq::min(ack, data_end)),
            ctl,
        }
    }

    /// An ACK of new data (RFC 9293 §3.10.7.4: "set SND.UNA <- SEG.ACK. Any segments on the
    /// retransmission queue that are thereby entirely acknowledged are removed"), as
    /// [`Sender::acked_by`] measured it: the acknowledged bytes leave the send queue, SND.NXT
    /// catches up if an RTO had rewound it below, the record ends the ACK covers are
    /// forgotten, and MSG_MORE's hold on the tail ends (at an ACK Linux pushes with the
    /// socket's own Nagle setting, `tcp_data_snd_check`).
    #[inline]
    pub fn on_ack(&mut self, acked: Acked) {
        let Acked { ack, bytes, .. } = acked;
        self.ring.consume(bytes as usize);
        self.buf_seq = self.buf_seq.wrapping_add(bytes);
        self.una = ack;
        if seq::lt(self.nxt, ack) {
            self.nxt = ack;
        }
        if !self.record_ends.is_empty() {
            self.drop_record_ends(ack);
        }
        self.more = false;
    }

    /// A segment of new data (or our SYN, or new data as a tail loss probe) left, ending at
    /// `end`: SND.NXT moves there, SND.MAX with it.
    #[inline]
    pub fn on_sent(&mut self, end: u32) {
        self.nxt = end;
        self.max = seq::max(self.max, end);
    }

    /// A retransmission or a window probe left, ending at `end`: SND.NXT moves there unless
    /// it is already past it, SND.MAX covers it.
    #[inline]
    pub fn on_resent(&mut self, end: u32) {
        if seq::lt(self.nxt, end) {
            self.nxt = end;
        }
        self.max = seq::max(self.max, end);
    }

    /// A tail loss probe retransmitted data below SND.MAX, ending at `end` (RFC 8985 §7.3):
    /// SND.NXT stays where it is.
    #[inline]
    pub fn on_probe_resent(&mut self, end: u32) {
        self.max = seq::max(self.max, end);
    }

    /// The peer SACKed what follows SND.NXT up to `end` (after an RTO rewound it): SND.NXT
    /// skips it, never past SND.MAX.
    #[inline]
    pub fn skip_sacked(&mut self, end: u32) {
        self.nxt = seq::min(end, self.max);
    }

    /// SND.NXT goes back to SND.UNA: what is outstanding is sent again from there (an RTO,
    /// RFC 6298 §5.4; a zero window; a window that opened while probing; a lowered MSS;
    /// Fast Open data the SYN-ACK did not acknowledge).
    #[inline]
    pub fn rewind(&mut self) {
        self.nxt = self.una;
    }

    /// SND.NXT goes back to ISS: our SYN (or SYN-ACK) is sent again.
    pub fn rewind_to_syn(&mut self) {
        self.nxt = self.iss;
    }
}
