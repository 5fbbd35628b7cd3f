//! The receive sequence space's changes: the handshake, ACKs sent, data and FIN accepted.

use super::Receiver;
use crate::mem::CopyMode;
use crate::tcp::{seq, Payload, Stats};
use crate::time::Instant;

/// Changes to the sequence space: the handshake, ACKs sent, data and FIN accepted.
impl Receiver {
    /// The peer does not scale its windows (RFC 7323 §2.2: then neither side does).
    pub fn disable_window_scaling(&mut self) {
        self.wscale = 0;
    }

    /// The SYN-ACK of a connection created from a SYN cookie advertised `wnd` (unscaled,
    /// RFC 7323 §2.2): its right edge.
    pub fn on_syn_ack_sent(&mut self, wnd: u32) {
        self.adv = self.nxt.wrapping_add(wnd);
    }

    /// A segment acknowledging RCV.NXT left, announcing the right edge `edge`: Last.ACK.sent
    /// is RCV.NXT, the advertised edge moves right only (RFC 9293 §3.8.6), and no read is
    /// owed a window update any more.
    /// It settles every ACK owed.
    #[inline]
    pub fn on_ack_sent(&mut self, edge: u32) {
        self.ack_now = false;
        self.unacked_bytes = 0;
        self.read_since_ack = false;
        self.last_ack_sent = self.nxt;
        self.adv = seq::max(self.adv, edge);
    }

    /// An ACK from a snapshot left (`ack` at or below RCV.NXT, window field `field`).
    #[inline]
    pub fn on_snap_ack_sent(&mut self, ack: u32, field: u16) {
        self.read_since_ack = false;
        self.last_ack_sent = seq::max(self.last_ack_sent, ack);
        let edge = ack.wrapping_add(u32::from(field) << self.wscale);
        self.adv = seq::max(self.adv, edge);
    }

    /// Linux `tcp_measure_rcv_mss`: a data segment of `len` bytes arrived; `full` is the
    /// most a segment can carry.
    #[inline]
    pub fn measure_mss(&mut self, len: usize, full: u32) {
        self.mss = self.mss.max(len as u32).min(full.max(1));
    }

    /// In-order data arrived at `now` (Linux `tcp_event_data_recv`): quick-ACK mode for the
    /// first data of the connection and after a receive gap longer than `rto`, and the
    /// inter-arrival estimate (`icsk_ack.ato`) follows the gaps between arrivals.
    #[inline]
    pub fn on_data_in_order(&mut self, now: Instant, rto: crate::time::Duration, max: u8) {
        use super::ack::ATO_MIN;
        if self.ato == crate::time::Duration::ZERO {
            // "The _first_ data packet received, initialize delayed ACK engine."
            self.incr_quickack(max);
            self.ato = ATO_MIN;
        } else {
            let m = self
                .last_data_rx
                .or(self.synced_at)
                .map_or(crate::time::Duration::MAX, |t| now.saturating_since(t));
            let half = crate::time::Duration::from_micros(ATO_MIN.total_micros() / 2);
            let ato_half = crate::time::Duration::from_micros(self.ato.total_micros() / 2);
            if m <= half {
                self.ato = ato_half + half;
            } else if m < self.ato {
                self.ato = (ato_half + m).min(rto);
            } else if m > rto {
                self.incr_quickack(max);
            }
        }
        self.last_data_rx = Some(now);
    }

    /// The handshake completed at `now`.
    pub fn on_synced(&mut self, now: Instant) {
        self.synced_at = Some(now);
    }

    /// The peer's FIN is at `f` (maybe ahead of missing data).
    pub fn note_fin(&mut self, f: u32) {
        self.fin = Some(f);
    }

    /// The FIN noted is in order now: RCV.NXT counts it. False if there is none, it is not
    /// at RCV.NXT yet, or it was accepted already.
    pub fn accept_fin(&mut self) -> bool {
        match self.fin {
            Some(f) if f == self.nxt && !self.fin_received => {
                self.nxt = self.nxt.wrapping_add(1);
                self.fin_received = true;
                self.fin = None;
                true
            }
            _ => false,
        }
    }

    /// A Fast Open SYN's data was accepted and the SYN-ACK announces `wnd` (unscaled) past it.
    pub fn mark_syn_data_edge(&mut self, wnd: u32) {
        self.syn_data_edge = Some(self.nxt.wrapping_add(wnd));
    }

    /// Writes the data `receive_data` accepted (`data`, at `off` past RCV.NXT) and advances
    /// RCV.NXT over what is now in order; returns by how much (`None`: the assembler is full,
    /// nothing kept). What [`Conn::place`](crate::tcp::conn::Conn::place) staged for this segment
    /// is kept without a second copy: the direct bytes become the posted read's, the ring
    /// bytes are committed where they lie; the rest is copied now.
    #[inline]
    pub fn accept_data(
        &mut self,
        off: usize,
        data: Payload<'_>,
        mode: CopyMode,
        stats: &mut Stats,
    ) -> Option<usize> {
        let adv = self.take_data(off, data, mode, stats)?;
        self.nxt = self.nxt.wrapping_add(adv as u32);
        Some(adv)
    }

    fn take_data(
        &mut self,
        off: usize,
        data: Payload<'_>,
        mode: CopyMode,
        stats: &mut Stats,
    ) -> Option<usize> {
        let staged = self.staged.take().filter(|s| s.off == off);
        if staged.is_some_and(|s| s.borrow > 0) {
            // `place` borrows only at RCV.NXT with the ring empty: these are the next bytes
            // of the stream, kept in their frames (`frames.rs`), no copy.
            let n = self.frames.commit(data.len());
            stats.rx_frames_held += n as u64;
            let rest = data.slice(n, data.len());
            if rest.is_empty() {
                return Some(n);
            }
            // Not reached (`data` is at most the staged parts); copied behind them if it were.
            let copied = self.ring.copy_gaps(0, rest, mode);
            stats.rx_copy_ring += copied as u64;
            return Some(n + self.ring.commit(0, rest.len()).unwrap_or(0));
        }
        let (direct, ring) = staged.map_or((0, 0), |s| (s.direct.min(data.len()), s.ring));
        if direct > 0 {
            // `place` stages direct bytes only at RCV.NXT with the ring empty, so they are the
            // next bytes of the stream: they are the application's now. They never occupy the
            // ring, so the window does not shrink for them (Linux: copied to the user, not
            // queued) and no window update is owed for them.
            if let Some(p) = self.posted.as_mut() {
                p.filled += direct;
            }
            self.space.copied += direct as u64;
            stats.app_bytes_received += direct as u64;
        }
        let rest = data.slice(direct, data.len());
        let r = ring.min(rest.len());
        let copied = self
            .ring
            .copy_gaps(off + r, rest.slice(r, rest.len()), mode);
        stats.rx_copy_ring += copied as u64;
        let adv = self.ring.commit(off, rest.len());
        match adv {
            Some(a) => Some(direct + a),
            // The assembler is full only for out-of-order data (off > 0): no direct bytes.
            None if direct == 0 => None,
            None => Some(direct),
        }
    }
}
