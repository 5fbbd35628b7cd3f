//! Segment arrival for a connection, RFC 9293 §3.10.7 (SEGMENT ARRIVES), with RFC 5961
//! (blind in-window attacks), RFC 7323 (PAWS, timestamps) and RFC 2018/6675 (SACK).

use super::cc::CongestionController;
use super::conn::{Conn, Ctx, Event};
use super::rack::{self, TlpAck};
use super::sack::DUP_THRESH;
use super::{dsack, seq, Error, Payload, State};
use crate::time::{Duration, Instant};
use crate::wire::tcp::{SackBlock, TcpRepr};
use core::ops::ControlFlow;

/// RFC 7323 §5.5: a TS.Recent older than 24 days is invalid for PAWS.
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);
/// RFC 6298 §5.7 fallback RTO.
const SYN_FALLBACK_RTO: Duration = Duration::from_secs(3);
/// In-order segments acknowledged one by one after a gap was filled (quick-ACK mode).
const QUICK_ACKS: u8 = 2;
/// Linux `TCP_MAX_QUICKACKS`: the largest quick-ACK budget.
pub(super) const MAX_QUICKACKS: u8 = 16;
/// Linux `TCP_DELACK_MAX`: the longest an ACK is held back.
const DELACK_MAX: Duration = Duration::from_millis(200);

/// A segment that passed the first check (sequence number), trimmed to the window.
struct Accepted<'a> {
    /// Sequence number of the first byte of `payload` (after trimming).
    seq: u32,
    payload: Payload<'a>,
    /// The segment's FIN is still to be processed (not trimmed away, not already received).
    fin: bool,
}

impl Conn {
    /// SEGMENT ARRIVES (RFC 9293 §3.10.7) for this connection. `ctx.now` is the arrival time.
    ///
    /// SYN-SENT has its own procedure (§3.10.7.3). In the other states the checks run in the
    /// RFC's order, one function each: first sequence number ([`Conn::check_sequence`]),
    /// second RST ([`Conn::check_rst`]), third security (not applicable: netfold implements no
    /// IP security compartments, RFC 9293 §3.10.7.4 "the third check ... security"), fourth SYN
    /// ([`Conn::check_syn`]), fifth ACK ([`Conn::check_ack`]), sixth URG (urgent data is
    /// not implemented: the URG bit and pointer are ignored), seventh segment text
    /// ([`Conn::check_text`]) and eighth FIN ([`Conn::check_fin`]). Two checks come first:
    /// PAWS (RFC 7323 §5.3, before the sequence test it protects) and the SYN-RECEIVED
    /// handshake repeats; the fourth check runs before the first because RFC 5961 §4.2 makes
    /// it independent of the sequence number.
    pub fn input(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr, payload: Payload<'_>) -> Event {
        self.timers.last_rx = ctx.now;
        self.counters.segs_in = self.counters.segs_in.wrapping_add(1);
        if !payload.is_empty() {
            self.counters.data_segs_in = self.counters.data_segs_in.wrapping_add(1);
        }
        self.timers.ka_probes = 0;
        if self.input_predicted(ctx, seg, payload) {
            return Event::None;
        }
        match self.state {
            State::SynSent => return self.input_syn_sent(ctx, seg, payload),
            State::Closed | State::Listen => {
                ctx.reply_rst(
                    self.local.get().ip(),
                    self.remote.get().ip(),
                    seg,
                    payload.len(),
                );
                return Event::None;
            }
            _ => {}
        }
        match self.input_checks(ctx, seg, payload) {
            ControlFlow::Continue(ev) | ControlFlow::Break(ev) => ev,
        }
    }

    /// The checks of §3.10.7.4 in order; `Break` ends processing of the segment.
    fn input_checks(
        &mut self,
        ctx: &mut Ctx<'_>,
        seg: &TcpRepr,
        payload: Payload<'_>,
    ) -> ControlFlow<Event, Event> {
        self.check_paws(ctx, seg, payload.len())?;
        self.check_handshake_repeat(ctx, seg)?;
        self.check_syn(ctx, seg)?;
        let text = self.check_sequence(ctx, seg, payload)?;
        // RFC 7323 §4.3 updates TS.Recent once the segment passed the sequence test; Linux
        // waits until `tcp_ack` has accepted its ACK too (FLAG_UPDATE_TS_RECENT), so a
        // segment dropped for acknowledging unsent data (or an ACK older than the window,
        // RFC 5961 §5.2) leaves the TSval that the reply echoes unchanged. A RST or a segment
        // without ACK is judged before any ACK test, as the RFC orders it.
        if !seg.flags.ack()
            || seg.flags.rst()
            || (seq::le(seg.ack, self.snd.max())
                && seq::ge(seg.ack, self.snd.una().wrapping_sub(self.snd.max_wnd())))
        {
            self.update_ts_recent(ctx, seg);
        }
        self.check_rst(ctx, seg)?;
        let event = self.check_ack(ctx, seg, &text)?;
        self.check_text(ctx, seg, text)?;
        self.check_fin(ctx.now);
        ControlFlow::Continue(event)
    }

    /// RFC 7323 §5.3 R1 (PAWS): "If there is a Timestamps option in the arriving segment,
    /// SEG.TSval < TS.Recent, TS.Recent is valid (see later discussion), and if the RST bit
    /// is not set, then treat the arriving segment as not acceptable: Send an acknowledgment
    /// in reply as specified in Section 3.10.7.4 of RFC 9293 and drop the segment."
    ///
    /// As Linux `tcp_validate_incoming`: a SYN that fails PAWS is answered as any SYN in a
    /// synchronized state, with a challenge ACK (RFC 5961 §4.2); the reply to a segment
    /// without data is limited to one per `invalid_ratelimit` (`TCPACKSkippedPAWS`).
    fn check_paws(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr, len: usize) -> ControlFlow<Event> {
        if !self.ts.enabled || seg.flags.rst() {
            return ControlFlow::Continue(());
        }
        if let Some(ts) = seg.options.timestamps {
            if seq::lt(ts.tsval, self.ts.recent) {
                if ctx.now.saturating_since(self.ts.recent_at) > PAWS_IDLE {
                    // §5.5: TS.Recent is too old to judge by; forget it.
                    self.ts.recent = ts.tsval;
                } else {
                    ctx.stats.paws_drops += 1;
                    if seg.flags.syn() && self.is_synchronized() {
                        self.challenge_ack(ctx);
                    } else if len > 0 || seg.flags.fin() || !self.oow_rate_limited(ctx) {
                        self.rcv.owe_ack_now();
                    }
                    return ControlFlow::Break(Event::None);
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// SYN-RECEIVED: the peer repeats its SYN (our SYN-ACK was lost: send it again), or, in a
    /// simultaneous open (RFC 9293 §3.5 figure 8), its SYN-ACK repeats its SYN and
    /// acknowledges ours: that completes the handshake rather than being a stray SYN.
    fn check_handshake_repeat(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr) -> ControlFlow<Event> {
        let flags = seg.flags;
        if self.state != State::SynReceived
            || !flags.syn()
            || flags.rst()
            || seg.seq != self.rcv.irs()
        {
            return ControlFlow::Continue(());
        }
        if !flags.ack() {
            self.snd.rewind_to_syn();
            return ControlFlow::Break(Event::None);
        }
        if !(seq::lt(self.snd.una(), seg.ack) && seq::le(seg.ack, self.snd.max())) {
            return ControlFlow::Continue(());
        }
        self.snd.advance_una(seg.ack);
        self.snd
            .on_handshake_ack(u32::from(seg.window) << self.snd.wscale(), seg.seq, seg.ack);
        self.timers.rto = None;
        self.timers.retries = 0;
        self.timers.retrans_stamp = None;
        self.rcv.owe_ack_now();
        // The repeated SYN is a duplicate: the ACK reports it as one (RFC 2883 §4; Linux's
        // `tcp_data_queue` D-SACKs the SYN's sequence number, below RCV.NXT).
        if self.sack_ok {
            self.rcv.note_duplicate(seg.seq, seg.seq.wrapping_add(1));
        }
        self.alloc_buffers(ctx.rings);
        self.state = if self.snd.fin_queued() {
            State::FinWait1
        } else {
            State::Established
        };
        ControlFlow::Break(if self.passive {
            Event::Established
        } else {
            Event::None
        })
    }

    /// Fourth check, SYN (RFC 9293 §3.10.7.4, RFC 5961 §4.2): "If the SYN bit is set,
    /// irrespective of the sequence number, TCP MUST send an ACK (also referred to as
    /// challenge ACK) to the remote peer ... After sending the acknowledgment, TCP MUST drop
    /// the unacceptable segment and stop processing further."
    fn check_syn(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr) -> ControlFlow<Event> {
        if seg.flags.syn() && !seg.flags.rst() {
            self.challenge_ack(ctx);
            return ControlFlow::Break(Event::None);
        }
        ControlFlow::Continue(())
    }

    /// First check, sequence number (RFC 9293 §3.10.7.4): "Segments are processed in
    /// sequence. ... There are four cases for the acceptability test for an incoming segment:
    /// [SEG.LEN = 0, RCV.WND = 0: SEG.SEQ = RCV.NXT; SEG.LEN = 0, RCV.WND > 0:
    /// RCV.NXT =< SEG.SEQ < RCV.NXT+RCV.WND; SEG.LEN > 0, RCV.WND = 0: not acceptable;
    /// SEG.LEN > 0, RCV.WND > 0: either end of the segment in the window] ... If a segment's
    /// contents straddle the boundary between old and new, only the new parts are
    /// processed. ... If an incoming segment is not acceptable, an acknowledgment should be
    /// sent in reply (unless the RST bit is set, if so drop the segment and return)."
    fn check_sequence<'p>(
        &mut self,
        ctx: &mut Ctx<'_>,
        seg: &TcpRepr,
        payload: Payload<'p>,
    ) -> ControlFlow<Event, Accepted<'p>> {
        let now = ctx.now;
        let flags = seg.flags;
        let seg_len = payload.len() as u32 + u32::from(flags.syn()) + u32::from(flags.fin());
        // RCV.WND is the window as last ANNOUNCED, not the free buffer: a segment (or a RST,
        // RFC 5961 §3) beyond what the peer was told is outside the window, even when the
        // ring could hold it (Linux `tcp_sequence` uses `tcp_receive_window` the same way).
        let wnd = self.rcv.announced();
        self.note_duplicate(seg, payload.len());
        let in_wnd =
            |s: u32| seq::le(self.rcv.nxt(), s) && seq::lt(s, self.rcv.nxt().wrapping_add(wnd));
        let mut payload = payload;
        let mut fin = flags.fin();
        let acceptable = if self.state == State::TimeWait {
            // TIME-WAIT (as Linux `tcp_timewait_state_process`): only a bare ACK or a RST
            // exactly at RCV.NXT is "in window"; everything else — an old or out-of-order
            // ACK, data, a retransmitted FIN — is answered with an ACK (below), which
            // FreeBSD does too. (RFC 9293 §3.10.7.4 leaves the window test as the only rule;
            // an ACK costs nothing and resynchronizes a confused peer.)
            seg.seq == self.rcv.nxt() && (seg_len == 0 || flags.rst())
        } else if seg_len == 0 {
            if wnd == 0 {
                seg.seq == self.rcv.nxt()
            } else {
                in_wnd(seg.seq)
            }
        } else if wnd == 0 {
            // Zero window: nothing is acceptable, but ACK/RST information still counts
            // (RFC 9293 §3.10.7.4): keep the header, drop the data.
            if seg.seq == self.rcv.nxt() {
                ctx.stats.rcv_zero_window_bytes += payload.len() as u64;
                payload = payload.slice(0, 0);
                fin = false;
                self.rcv.owe_ack_now();
                true
            } else {
                false
            }
        } else {
            let last = seg.seq.wrapping_add(seg_len - 1);
            // The RFC's two tests, plus (as Linux tcp_sequence) a segment that covers the whole
            // window from before RCV.NXT: it carries the next expected byte, and is trimmed.
            in_wnd(seg.seq)
                || in_wnd(last)
                || (seq::lt(seg.seq, self.rcv.nxt())
                    && seq::ge(last, self.rcv.nxt().wrapping_add(wnd)))
        };
        if !acceptable {
            if seg_len > 0 && !flags.rst() {
                // Old data (a retransmission of bytes already received) apart from data
                // beyond the window, which a peer that keeps to the window never sends.
                if seq::le(seg.seq.wrapping_add(seg_len), self.rcv.nxt()) {
                    ctx.stats.rcv_duplicates += 1;
                } else {
                    ctx.stats.rcv_out_of_window += 1;
                }
            }
            // Replies to unacceptable segments without data are rate limited per connection
            // (Linux `tcp_oow_rate_limited`, `TCPACKSkippedSeq`), so two confused ends cannot
            // ping-pong ACKs forever and spoofed segments draw at most one per interval.
            // Segments with data (or a FIN) are answered every time: they are not part of an
            // ACK loop ("Data packets without SYNs are not likely part of an ACK loop"), and
            // the reply may be what resynchronizes a sender. (SYNs never get here: the SYN
            // check came first, RFC 5961 §4.2.)
            if !flags.rst() && (seg_len > 0 || !self.oow_rate_limited(ctx)) {
                self.rcv.owe_ack_now();
                if self.state == State::TimeWait && fin {
                    // §3.10.7.4: a retransmitted FIN restarts the 2 MSL timeout.
                    self.timers.time_wait = Some(now + self.config.time_wait);
                }
            }
            return ControlFlow::Break(Event::None);
        }

        // Trim to the window: drop what is before RCV.NXT (a SYN counts one) and beyond.
        let mut sseq = seg.seq;
        let mut skip = seq::dist(sseq, self.rcv.nxt());
        if skip > 0 && flags.syn() {
            skip -= 1;
            sseq = sseq.wrapping_add(1);
        }
        let cut = (skip as usize).min(payload.len());
        payload = payload.slice(cut, payload.len());
        sseq = sseq.wrapping_add(cut as u32);
        if skip as usize > cut {
            fin = false; // the FIN itself was already received
        }
        ControlFlow::Continue(Accepted {
            seq: sseq,
            payload,
            fin,
        })
    }

    /// RFC 2883 §4 (receiver): the part of an arriving segment's data that the receiver
    /// already holds (below RCV.NXT, or inside an out-of-order range it queued) is reported in
    /// a D-SACK block of the next ACK, which goes out at once ("the receiver ... sends an
    /// immediate ACK with a D-SACK block", Linux `tcp_dsack_set` + `tcp_enter_quickack_mode`).
    fn note_duplicate(&mut self, seg: &TcpRepr, len: usize) {
        if !self.sack_ok || len == 0 || !self.is_synchronized() {
            return;
        }
        let start = seg.seq.wrapping_add(u32::from(seg.flags.syn()));
        let end = start.wrapping_add(len as u32);
        let base = self.rcv.nxt();
        if self.rcv.note_duplicate(start, end) {
            self.rcv.owe_ack_now();
        }
        if seq::le(end, base) {
            // Linux `tcp_data_queue` ("A retransmit, 2nd most common case. Force an immediate
            // ack.") and `tcp_send_dupack`: old data means an ACK of ours was lost or the
            // sender timed out, so the receiver enters quick-ACK mode
            // (`tcp_enter_quickack_mode(sk, TCP_MAX_QUICKACKS)`): the next in-order segments
            // are acknowledged one by one instead of waiting for the delayed-ACK timer while
            // the sender's window is small.
            self.rcv.enter_quickack_mode(MAX_QUICKACKS);
        }
    }

    /// RFC 7323 §4.3: "If SEG.TSval >= TS.Recent and SEG.SEQ =< Last.ACK.sent, then SEG.TSval
    /// is copied to TS.Recent; otherwise, it is ignored."
    pub(super) fn update_ts_recent(&mut self, ctx: &Ctx<'_>, seg: &TcpRepr) {
        if !self.ts.enabled {
            return;
        }
        if let Some(ts) = seg.options.timestamps {
            if seq::le(seg.seq, self.rcv.last_ack_sent()) && seq::ge(ts.tsval, self.ts.recent) {
                self.ts.recent = ts.tsval;
                self.ts.recent_at = ctx.now;
            }
        }
    }

    /// Second check, RST (RFC 9293 §3.10.7.4 with RFC 5961 §3.2): "1) If the RST bit is set
    /// and the sequence number is outside the current receive window, silently drop the
    /// segment. 2) If the RST bit is set and the sequence number exactly matches the next
    /// expected sequence number (RCV.NXT), then TCP MUST reset the connection. 3) If the RST
    /// bit is set and the sequence number does not exactly match the next expected sequence
    /// value, yet is within the current receive window, TCP MUST send an acknowledgment
    /// (challenge ACK)." (Case 1 was handled by the first check.)
    fn check_rst(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr) -> ControlFlow<Event> {
        if !seg.flags.rst() {
            return ControlFlow::Continue(());
        }
        if seg.seq != self.rcv.nxt() {
            self.challenge_ack(ctx);
            return ControlFlow::Break(Event::None);
        }
        ControlFlow::Break(match self.state {
            // A Fast Open connection has been in the accept queue since its SYN (RFC 7413
            // §4.2.2): the application may hold it and have read data, so it is reset as a
            // synchronized connection is, its data still readable (Linux: `tcp_reset` of the
            // Fast Open child).
            State::SynReceived if self.passive && self.fastopen.pending_in.is_some() => {
                self.enter_closed(Some(Error::ConnectionReset));
                Event::Closed
            }
            // SYN-RECEIVED from a passive open: back to LISTEN (the layer forgets it).
            State::SynReceived if self.passive => {
                self.enter_closed(None);
                Event::Dropped
            }
            // From an active open: "the connection was refused".
            State::SynReceived => {
                self.enter_closed(Some(Error::ConnectionRefused));
                Event::Closed
            }
            // CLOSING and LAST-ACK too: the RFC only says "enter the CLOSED state", but an
            // application that shut down its side (LAST-ACK after `shutdown(SHUT_WR)`) can
            // still ask SO_ERROR, and Linux `tcp_reset` (and FreeBSD) report ECONNRESET in
            // every state but SYN-SENT. (Linux reports EPIPE in CLOSE-WAIT; netfold keeps
            // ECONNRESET there, as FreeBSD does.)
            State::Established
            | State::FinWait1
            | State::FinWait2
            | State::CloseWait
            | State::Closing
            | State::LastAck => {
                self.enter_closed(Some(Error::ConnectionReset));
                Event::Closed
            }
            // TIME-WAIT: "enter the CLOSED state".
            _ => {
                self.enter_closed(None);
                Event::Closed
            }
        })
    }

    /// Fifth check, ACK (RFC 9293 §3.10.7.4): "if the ACK bit is off, drop the segment and
    /// return". SYN-RECEIVED: "If SND.UNA < SEG.ACK =< SND.NXT, then enter ESTABLISHED state
    /// and continue processing ... If the segment acknowledgment is not acceptable, form a
    /// reset segment". Then RFC 5961 §5.2: the ACK is acceptable only if
    /// (SND.UNA - MAX.SND.WND) =< SEG.ACK =< SND.NXT; "If SEG.ACK > SND.NXT then send an
    /// ACK, drop the segment, and return"; older ones get a challenge ACK. Acceptable ACKs
    /// go to [`Conn::process_ack`], then the FIN-WAIT-1/CLOSING/LAST-ACK transitions.
    fn check_ack(
        &mut self,
        ctx: &mut Ctx<'_>,
        seg: &TcpRepr,
        text: &Accepted<'_>,
    ) -> ControlFlow<Event, Event> {
        if !seg.flags.ack() {
            return ControlFlow::Break(Event::None);
        }
        let now = ctx.now;
        let mut event = Event::None;
        if self.state == State::SynReceived {
            if seq::lt(self.snd.una(), seg.ack) && seq::le(seg.ack, self.snd.max()) {
                self.state = State::Established;
                self.snd.on_handshake_ack(
                    u32::from(seg.window) << self.snd.wscale(),
                    seg.seq,
                    seg.ack,
                );
                if self.snd.fin_queued() {
                    self.state = State::FinWait1;
                }
                self.rcv.on_synced(now);
                // RACK.min_RTT starts from the SYN-ACK's round trip on a passive open too
                // (RFC 8985 §6.2 step 1), as on an active one: Linux's `tcp_ack_update_rtt`
                // takes the handshake's sample into `rtt_min` with the SRTT it seeds.
                if let Some((s, t)) = self.snd.rtt_timing() {
                    if self.sack_ok && seq::ge(seg.ack, s) {
                        self.snd.on_rack_rtt_sample(now, now.saturating_since(t));
                    }
                }
                self.alloc_buffers(ctx.rings);
                if self.passive {
                    event = Event::Established;
                }
            } else {
                ctx.reply_rst(
                    self.local.get().ip(),
                    self.remote.get().ip(),
                    seg,
                    text.payload.len(),
                );
                return ControlFlow::Break(Event::None);
            }
        }
        if seq::gt(seg.ack, self.snd.max()) {
            // "If SEG.ACK > SND.NXT then send an ACK, drop the segment, and return" (RFC 5961
            // §5.2): an ACK answering an invalid segment, throttled as challenge ACKs are
            // (§7), data or not. Linux 6.18 does the same: a second such segment within
            // `tcp_invalid_ratelimit` of the first, with or without data, gets no reply
            // (`conformance/scripts/ack-beyond-snd-nxt-rate-limited.pkt`, checked against it).
            self.challenge_ack(ctx);
            return ControlFlow::Break(event);
        }
        if seq::lt(seg.ack, self.snd.una().wrapping_sub(self.snd.max_wnd())) {
            self.challenge_ack(ctx);
            return ControlFlow::Break(event);
        }
        // FlightSize when the ECE was sent, before this ACK takes data out of flight.
        let flight_before = self.flight();
        self.process_ack(ctx, seg, text.payload.len(), text.fin);
        self.ecn_on_ack(ctx, seg, flight_before);
        if self.state == State::Closed {
            return ControlFlow::Break(Event::Closed);
        }
        // "FIN-WAIT-1: ... if the FIN segment is now acknowledged, then enter FIN-WAIT-2";
        // "CLOSING: ... if the ACK acknowledges our FIN, then enter the TIME-WAIT state";
        // "LAST-ACK: ... If our FIN is now acknowledged, delete the TCB, enter the CLOSED
        // state, and return."
        if self.fin_acked() {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    self.arm_orphan_timer(now);
                }
                State::Closing => self.enter_time_wait(now),
                State::LastAck => {
                    self.enter_closed(None);
                    return ControlFlow::Break(Event::Closed);
                }
                _ => {}
            }
        }
        ControlFlow::Continue(event)
    }

    /// Seventh check, segment text (RFC 9293 §3.10.7.4): "ESTABLISHED, FIN-WAIT-1, FIN-WAIT-2:
    /// Once in the ESTABLISHED state, it is possible to deliver segment data to user RECEIVE
    /// buffers. ... CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT: This should not occur since a
    /// FIN has been received from the remote side. Ignore the segment text."
    fn check_text(
        &mut self,
        ctx: &mut Ctx<'_>,
        seg: &TcpRepr,
        text: Accepted<'_>,
    ) -> ControlFlow<Event> {
        self.ecn_receive(ctx, seg, &text);
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) || (text.payload.is_empty() && !text.fin)
        {
            return ControlFlow::Continue(());
        }
        if !text.payload.is_empty() && self.user_closed {
            // RFC 1122 §4.2.2.13 / RFC 2525 §2.17: data for an application that closed ->
            // reset, in the form RFC 9293 §3.10.7.1 gives a reset answering a segment:
            // <SEQ=SEG.ACK><CTL=RST> (the segment has passed the ACK check, so SEG.ACK is
            // one we sent). Linux answers the same way (`tcp_rcv_state_process` returns 1 or
            // `tcp_timewait_state_process` TCP_TW_RST, then `tcp_v4_send_reset`).
            ctx.reply_rst(
                self.local.get().ip(),
                self.remote.get().ip(),
                seg,
                text.payload.len(),
            );
            self.enter_closed(None);
            return ControlFlow::Break(Event::Closed);
        }
        self.receive_data(ctx, text.seq, text.payload, text.fin);
        ControlFlow::Continue(())
    }

    /// RFC 3168 §6.1.3, the receiver's half of ECN, for an acceptable segment: a CWR ends the
    /// ECE echo (the sender has reduced its window); a CE mark on data starts it (Linux
    /// `tcp_ecn_accept_cwr` then `tcp_ecn_check_ce`, in that order), with an immediate ACK
    /// the first time and for the next in-order segments, so the sender learns of the
    /// congestion without a delayed-ACK wait (Linux enters quick-ACK mode).
    fn ecn_receive(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr, text: &Accepted<'_>) {
        if !self.ecn.ok {
            return;
        }
        if seg.flags.cwr() {
            self.ecn.ece = false;
        }
        if self.ecn.rx_ce && !text.payload.is_empty() {
            ctx.stats.ecn_ce_in += 1;
            if !self.ecn.ece {
                self.ecn.ece = true;
                // This segment's ACK and the next two go at once (`receive_data`).
                self.rcv.enter_quickack(QUICK_ACKS + 1);
            }
        }
    }

    /// RFC 3168 §6.1.2, the sender's half of ECN, for an acceptable ACK: ECE means a router
    /// marked a packet of ours; respond as to a loss (cwnd and ssthresh through the
    /// congestion controller's loss hook) but without retransmitting, at most once per window
    /// of data (until SND.UNA passes SND.NXT of the reduction), and send CWR on the next new
    /// data. In loss recovery the window was already reduced for this window of data: only CWR
    /// is queued (Linux queues CWR whenever it reduces cwnd, `tcp_init_cwnd_reduction`).
    fn ecn_on_ack(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr, flight: u32) {
        if !self.ecn.ok || !seg.flags.ece() || seg.flags.syn() {
            return;
        }
        if self.ecn.recover.is_some_and(|r| !seq::gt(seg.ack, r)) {
            return;
        }
        self.ecn.recover = Some(self.snd.max());
        self.ecn.cwr_due = true;
        if self.snd.recovery().is_some() || self.in_rto_recovery() {
            return;
        }
        let mss = self.snd.mss();
        self.snd.on_congestion(ctx.now, flight.max(mss), mss);
        ctx.stats.ecn_cwnd_reductions += 1;
    }

    /// Eighth check, FIN (RFC 9293 §3.10.7.4), once everything before it has arrived: "If the
    /// FIN bit is set, signal the user "connection closing" ..., advance RCV.NXT over the FIN,
    /// and send an acknowledgment for the FIN. ... SYN-RECEIVED, ESTABLISHED: Enter the
    /// CLOSE-WAIT state. FIN-WAIT-1: If our FIN has been ACKed (perhaps in this segment), then
    /// enter TIME-WAIT, start the time-wait timer, turn off the other timers; otherwise, enter
    /// the CLOSING state. FIN-WAIT-2: Enter the TIME-WAIT state."
    pub(super) fn check_fin(&mut self, now: crate::time::Instant) {
        if !self.rcv.accept_fin() {
            return;
        }
        self.rcv.owe_ack_now();
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// An application that closed cannot read any more: an orphan FIN-WAIT-2 waits at most
    /// `time_wait` for the peer's FIN (Linux `tcp_fin_timeout`), bounding memory.
    pub fn arm_orphan_timer(&mut self, now: crate::time::Instant) {
        if self.user_closed && self.state == State::FinWait2 && self.timers.time_wait.is_none() {
            self.timers.time_wait = Some(now + self.config.time_wait);
        }
    }

    /// ACKs inside one GRO-merged arrival of `len` bytes from `sseq`, before the ACK of its
    /// end. RFC 5681 §4.2: "an ACK SHOULD be generated for at least every second full-sized
    /// segment": a merged arrival of up to `2 * ack_snaps.len()` segments is acknowledged
    /// every second segment, as the segments would have been one by one. (The last ACK of a
    /// window, when lost, otherwise leaves the sender nothing but its timers: with one ACK
    /// per merged arrival and a window of a few segments that ACK covers the whole flight.)
    /// A larger merged arrival gets one ACK at its middle: Linux acknowledges each GRO
    /// packet once, and a stretch ACK per ~22 segments costs far less to process.
    fn ack_inside_batch(&mut self, sseq: u32, len: usize) {
        let mss = self.rcv.mss().max(1) as usize;
        let segs = len / mss;
        if segs < 3 {
            return;
        }
        if segs <= 2 * self.ack_snaps.len() {
            let mut k = 2;
            while k < segs {
                self.snapshot_ack_at(sseq.wrapping_add((k * mss) as u32));
                k += 2;
            }
        } else if segs >= 4 {
            self.snapshot_ack_at(sseq.wrapping_add(((segs / 2) * mss) as u32));
        }
    }

    fn snapshot_ack(&mut self) {
        self.snapshot_ack_at(self.rcv.nxt());
        self.rcv.reset_unacked();
        self.timers.delack = None;
    }

    /// Records an ACK of everything below `ack` (at most RCV.NXT) to be sent by `output`.
    fn snapshot_ack_at(&mut self, ack: u32) {
        let snap = (ack, self.ts.recent);
        if self.n_snaps < self.ack_snaps.len() {
            self.ack_snaps[self.n_snaps] = snap;
            self.n_snaps += 1;
        } else {
            self.ack_snaps[self.n_snaps - 1] = snap;
        }
    }

    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    fn challenge_ack(&mut self, ctx: &mut Ctx<'_>) {
        // RFC 5961 §7: "An implementation SHOULD include an ACK throttling mechanism to be
        // conservative." Two limits, in Linux `tcp_send_challenge_ack`'s order: first this
        // connection's (one ACK for invalid segments per `invalid_ratelimit`, shared with
        // the out-of-window ACKs), then the layer-wide quota (none by default, see
        // `ChallengeLimiter`). The per-connection one is what keeps a connection's replies
        // from telling an off-path attacker anything about other connections.
        if self.oow_limited_at(ctx.now) {
            ctx.stats.challenge_acks_skipped_conn += 1;
            return;
        }
        if ctx.challenge.allow(ctx.now) {
            ctx.stats.challenge_acks += 1;
            self.rcv.owe_ack_now();
        } else {
            ctx.stats.challenge_acks_skipped_global += 1;
        }
    }

    /// The per-connection limit on ACKs answering out-of-window and PAWS-rejected segments
    /// without data; counted in `oow_acks_skipped` when it holds the ACK back.
    fn oow_rate_limited(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let limited = self.oow_limited_at(ctx.now);
        if limited {
            ctx.stats.oow_acks_skipped += 1;
        }
        limited
    }

    /// Linux `__tcp_oow_rate_limited`: `true` (send nothing) if this connection answered an
    /// invalid segment less than `invalid_ratelimit` ago; otherwise `now` becomes the time of
    /// the last such answer and the caller may send one.
    fn oow_limited_at(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last_oow_ack {
            if now.saturating_since(last) < self.config.invalid_ratelimit {
                return true;
            }
        }
        self.last_oow_ack = Some(now);
        false
    }

    /// RFC 9293 §3.10.7.3 SYN-SENT.
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    fn input_syn_sent(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr, payload: Payload<'_>) -> Event {
        let f = seg.flags;
        if f.ack() && (seq::le(seg.ack, self.snd.iss()) || seq::gt(seg.ack, self.snd.max())) {
            ctx.reply_rst(self.local.get().ip(), self.remote.get().ip(), seg, 0);
            return Event::None;
        }
        // Linux `tcp_rcv_synsent_state_process` (PAWSActiveRejected): a SYN-ACK echoing a
        // timestamp we never sent (older than our first SYN, or from the future) is not an
        // answer to our SYN: reset it, as an unacceptable ACK.
        if let (true, Some(first), Some(ts)) = (f.ack(), self.ts.syn_tsval, seg.options.timestamps)
        {
            let now_ts = self.ts_now(ctx.now);
            if ts.tsecr != 0 && ts.tsecr.wrapping_sub(first) > now_ts.wrapping_sub(first) {
                ctx.reply_rst(self.local.get().ip(), self.remote.get().ip(), seg, 0);
                return Event::None;
            }
        }
        if f.rst() {
            if f.ack() {
                self.enter_closed(Some(Error::ConnectionRefused));
                return Event::Closed;
            }
            return Event::None;
        }
        // "fourth check the SYN bit": a SYN with an acceptable ACK completes the handshake,
        // a SYN without ACK starts a simultaneous open. A FIN on it is ignored (as Linux's
        // tcp_rcv_synsent_state_process ignores it): the peer retransmits it once its SYN is
        // acknowledged.
        if !f.syn() {
            return Event::None;
        }
        self.rcv.on_syn(seg.seq);
        self.negotiate(ctx.now, seg);
        self.rcv.owe_ack_now();
        if f.ack() {
            // RFC 7323 §2.2: the window in a SYN is not scaled.
            self.snd.on_syn_ack(u32::from(seg.window), seg.seq, seg.ack);
            // RACK.min_RTT starts from the SYN's round trip in microseconds (RFC 8985 §6.2
            // step 1); the timestamp echo would give whole milliseconds.
            if let Some((s, t)) = self.snd.rtt_timing() {
                if self.sack_ok && seq::ge(seg.ack, s) {
                    self.snd
                        .on_rack_rtt_sample(ctx.now, ctx.now.saturating_since(t));
                }
            }
            self.take_rtt_sample(ctx, seg);
            self.rcv.on_synced(ctx.now);
            // Linux `tp->delivered`: the SYN counts one.
            self.counters.delivered = self.counters.delivered.wrapping_add(1);
            // RFC 6298 §5.7: a SYN that timed out without yielding an RTT sample leaves the
            // RTO at 3 s once data transfer begins.
            self.snd
                .on_syn_acked(self.timers.retries > 0, SYN_FALLBACK_RTO);
            self.timers.retries = 0;
            self.timers.retrans_stamp = None;
            self.timers.rto = None;
            self.state = State::Established;
            if self.snd.fin_queued() {
                self.state = State::FinWait1;
            }
            if self.fastopen.syn_option.is_some() || self.fastopen.syn_data_len > 0 {
                return self.fastopen_synack(ctx, seg, payload);
            }
            self.quickack_if_write_pending(ctx.now);
        } else {
            // Simultaneous open (RFC 9293 §3.5 figure 7): resend our SYN as a SYN-ACK.
            self.state = State::SynReceived;
            // RFC 7323 §2.2: the window in a SYN is not scaled.
            self.snd.on_syn(u32::from(seg.window), seg.seq);
        }
        Event::None
    }

    /// Linux `tcp_rcv_synsent_state_process`: when the SYN-ACK finds data waiting to be sent
    /// ("Save one ACK. Data will be ready after several ticks, if write_pending is set"), the
    /// ACK rides on that data and the receiver enters quick-ACK mode
    /// (`tcp_enter_quickack_mode`), which starts its inter-arrival estimate: the data then
    /// sent at once counts as a reply, and the connection is interactive
    /// (`Receiver::on_data_sent`).
    pub(super) fn quickack_if_write_pending(&mut self, now: Instant) {
        if self.send_pending() || self.snd.writer_waiting() {
            self.rcv.enter_quickack_mode(MAX_QUICKACKS);
            // "Save one ACK": none goes on its own; the delayed-ACK timer (TCP_DELACK_MAX)
            // sends it if the data does not come.
            self.rcv.cancel_ack_now();
            self.timers.delack = Some(now + DELACK_MAX);
        }
    }

    #[inline]
    fn take_rtt_sample(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr) {
        // RFC 7323 §4.1 RTTM: with timestamps, TSecr gives a sample on each new ACK;
        // otherwise Karn's algorithm times one unretransmitted segment at a time.
        if self.ts.enabled {
            if let Some(ts) = seg.options.timestamps {
                if ts.tsecr != 0 {
                    let ms = self.ts_now(ctx.now).wrapping_sub(ts.tsecr);
                    if ms < 1 << 30 {
                        self.snd.on_rtt_sample(Duration::from_millis(u64::from(ms)));
                        // RFC 8985 §7.3: a probe needs "an RTT measurement since the last
                        // loss probe transmission or the start of the connection".
                        self.snd.on_tlp_rtt_sample();
                        return;
                    }
                }
            }
        }
        if let Some((s, t)) = self.snd.rtt_timing() {
            if seq::ge(seg.ack, s) {
                self.snd.on_rtt_sample(ctx.now.saturating_since(t));
                self.snd.on_tlp_rtt_sample();
            }
        }
    }

    fn process_ack(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr, data_len: usize, fin: bool) {
        let now = ctx.now;
        let ack = seg.ack;
        let mss = self.snd.mss();
        let mut newly_sacked = 0;
        // RFC 2883 §4 (read from the sender, as Linux `tcp_check_dsack`): a first SACK block
        // below the cumulative ACK or inside the second block reports a duplicate, not newly
        // received data; a dubious one (longer than any window, or more duplicates than we
        // ever retransmitted) is ignored altogether.
        let (dsack, blocks) = if self.sack_ok {
            dsack::split_dsack(ack, seg.options.sack_blocks())
        } else {
            (None, &[][..])
        };
        let dsack = dsack.filter(|b| self.snd.on_dsack(*b, mss) > 0);
        // SACK edges inside a segment are moved to its boundaries, as Linux's
        // `tcp_match_skb_to_sack` cuts skbs (see `rack::sack_piece`): a block of a few bytes
        // inside one segment acknowledges nothing, and the segment goes again whole.
        let mut trimmed = [SackBlock { left: 0, right: 0 }; 4];
        let mut n_trimmed = 0;
        for b in blocks.iter().take(trimmed.len()) {
            if let Some(t) = self.snd.rack().trim_sack(*b, self.seg_mss()) {
                trimmed[n_trimmed] = t;
                n_trimmed += 1;
            }
        }
        let blocks = &trimmed[..n_trimmed];
        // PRR's DeliveredData needs the SACKed bytes before this ACK; only recovery (or an
        // ACK with SACK blocks, which may start one) asks, so the common ACK skips the sum.
        let sacked_before = if self.sack_ok && (self.snd.recovery().is_some() || !blocks.is_empty())
        {
            Some(self.snd.scoreboard().sacked_bytes())
        } else {
            None
        };
        if self.sack_ok {
            ctx.stats.sack_blocks_in += seg.options.sack_blocks().len() as u64;
            for b in blocks {
                newly_sacked += self.snd.on_sack_block(*b, ack);
            }
        }
        // RACK's RTT sample (RFC 8985 §6.2 step 1) comes from the send times RACK recorded,
        // in microseconds, for data never retransmitted (Karn): the RFC 7323 timestamps tick
        // in milliseconds, far coarser than this path's RTT can be.
        let rack_rtt = if self.sack_ok && seq::gt(ack, self.snd.una()) {
            self.snd.rack().karn_sample(now, ack)
        } else {
            None
        };
        let new_wnd = u32::from(seg.window) << self.snd.wscale();
        // §3.10.7.4: only an ACK in [SND.UNA, SND.NXT] may update the window.
        let may_update_window = seq::ge(ack, self.snd.una());
        let acked = seq::dist(self.snd.una(), ack);
        let cwnd_limited = self.cwnd_limited();
        if acked > 0 {
            // What this ACK delivers for cwnd growth, as Linux counts it (`tcp_slow_start`
            // and `tcp_cong_avoid` take the newly delivered segments): bytes SACKed before
            // (or, without SACK, the segments duplicate ACKs already reported) were
            // delivered then, not now. (RFC 5681 §3.1 counts "bytes acknowledged"; Linux's
            // reading keeps limited transmit and reordering from inflating cwnd.)
            let sacked_pre = if self.sack_ok && !self.snd.scoreboard().is_empty() {
                self.snd.scoreboard().sacked_bytes()
            } else {
                0
            };
            let dup_segs = if self.sack_ok { 0 } else { self.snd.dupacks() };
            self.take_cumulative_ack(ctx, seg);
            if let Some(rtt) = rack_rtt {
                self.cc_rtt_sample(now, rtt);
            }
            let delivered = if self.sack_ok {
                let post = if self.snd.scoreboard().is_empty() {
                    0
                } else {
                    self.snd.scoreboard().sacked_bytes()
                };
                acked.saturating_sub(sacked_pre.saturating_sub(post))
            } else {
                acked.saturating_sub(dup_segs.saturating_mul(mss))
            }
            .max(acked.min(mss));
            match self.snd.recovery() {
                Some(rec) if seq::ge(ack, rec.point) => {
                    // Full acknowledgment: leave recovery (RFC 6582 §3.2 step 3, RFC 6675 §5).
                    self.snd.exit_recovery();
                    let ss = self.snd.cc().ssthresh();
                    if rec.sack {
                        // RFC 8985 §6.2 step 4: "Else if exiting Fast or RTO recovery:
                        // RACK.reo_wnd_persist -= 1".
                        self.snd.on_rack_recovery_exit();
                        self.snd.set_cwnd(ss);
                    } else {
                        self.snd.set_cwnd(ss.min(self.flight().max(mss) + mss));
                    }
                }
                Some(_) => self.snd.on_partial_ack(ack, acked, mss),
                None => self.grow_cwnd(now, delivered, cwnd_limited),
            }
            self.restart_rto(now);
        } else if self.snd.max() != self.snd.una()
            && ack == self.snd.una()
            && data_len == 0
            && !fin
            && (newly_sacked > 0 || (!self.sack_ok && new_wnd == self.snd.wnd()))
        {
            // RFC 5681 §2 duplicate ACK (RFC 6675 §2: with SACK, one that SACKs new data).
            ctx.stats.dup_acks += 1;
            self.snd.on_dupack();
            match self.snd.recovery() {
                // With SACK, RACK (below) decides what is lost, on every ACK.
                None if self.sack_ok => {}
                None => {
                    let lost = self.sack_ok && self.snd.scoreboard().is_lost(self.snd.una(), mss);
                    // RFC 5827 early retransmit: with fewer than 4 segments outstanding and
                    // nothing new to send, too few duplicate ACKs can ever arrive; lower the
                    // threshold to (outstanding segments - 1).
                    let smss = self.seg_mss().max(1);
                    let oseg = self.flight().div_ceil(smss);
                    let nothing_new = !seq::lt(self.snd.max(), self.fin_seq())
                        || seq::ge(self.snd.max(), self.snd.una().wrapping_add(new_wnd));
                    let thresh = if oseg < 4 && nothing_new {
                        oseg.saturating_sub(1).max(1)
                    } else {
                        DUP_THRESH
                    };
                    let lost = lost || (self.snd.dupacks() >= thresh);
                    // RFC 6582 §3.2 step 1: no new recovery while the ACK is still within the
                    // data of an earlier one (`recover`).
                    if (self.snd.dupacks() >= DUP_THRESH || lost)
                        && seq::gt(ack, self.snd.recover())
                    {
                        self.enter_recovery(now);
                    }
                }
                Some(rec) if !rec.sack => {
                    // RFC 6582 §3.2 step 4: inflate by one SMSS per further dup ACK.
                    let c = self.snd.cc().cwnd().saturating_add(mss);
                    self.snd.set_cwnd(c);
                }
                Some(_) => {}
            }
        }

        let dupack_without_sack = acked == 0
            && seg.options.sack_blocks().is_empty()
            && data_len == 0
            && !fin
            && new_wnd == self.snd.wnd();
        if self.sack_ok {
            let newly_lost = self.rack_on_ack(now, blocks, dsack, rack_rtt);
            if let Some(before) = sacked_before {
                // RFC 6937 §3: "DeliveredData = (change in snd.una) + (change in SACKed)".
                let delivered = (i64::from(acked) + i64::from(self.snd.scoreboard().sacked_bytes())
                    - i64::from(before))
                .max(0) as u32;
                self.prr_on_ack(delivered, acked > 0, newly_lost > 0);
            }
        }
        // RFC 8985 §7.4.2, TLP_process_ack().
        let outcome = if self.sack_ok {
            self.snd.on_tlp_ack(ack, dsack, dupack_without_sack)
        } else {
            // Without SACK (hence without D-SACK) a retransmitted probe cannot be told from a
            // repair: the ACK covering it ends the episode and, "if the sender cannot
            // determine whether the probe repaired a loss", it responds as to one.
            match self.snd.tlp().episode() {
                Some(end) if seq::ge(ack, end) => {
                    let rxt = self.snd.tlp().is_retrans();
                    self.snd.end_tlp_episode();
                    if rxt {
                        TlpAck::RepairedLoss
                    } else {
                        TlpAck::Ended
                    }
                }
                _ => TlpAck::Pending,
            }
        };
        if outcome == TlpAck::RepairedLoss && self.snd.recovery().is_none() {
            // "(Invoke congestion control to react to the loss event the probe has
            // repaired)": a fast recovery entered and left at once.
            self.snd.on_congestion(now, self.flight().max(mss), mss);
        }
        if acked > 0 {
            self.timers.pto = None;
            self.arm_pto(now);
        }

        // Window update (§3.10.7.4, SND.WL1/SND.WL2 rule).
        if may_update_window {
            self.take_window(seg, new_wnd);
        }
        if self.snd.wnd() == 0 {
            // Zero window (§3.8.6.1): data beyond SND.UNA was not accepted; probe instead of
            // retransmitting.
            self.timers.probes_unanswered = 0;
            if self.send_pending() {
                self.snd.rewind();
                self.snd.abandon_recovery();
                self.timers.rto = None;
                if self.timers.persist.is_none() {
                    self.timers.persist = Some(now + self.snd.rtt().rto());
                }
            }
        } else {
            self.timers.probe_stamp = None;
            if self.timers.persist.take().is_some() && seq::lt(self.snd.una(), self.snd.nxt()) {
                // The window opened while probing: what is outstanding is window-probe data
                // the peer did not acknowledge (a zero window drops it), so it is sent again
                // with what follows instead of being waited for. Left outstanding, it made
                // Nagle hold the rest of the data until the RTO (RFC 9293 §3.8.6.1 wants
                // data to flow as soon as the window opens; Linux probes without data).
                self.snd.rewind();
            }
            self.window_open(now);
        }
    }

    /// Was the window actually used? (Linux `tcp_is_cwnd_limited`, kept by `cc::usage` at
    /// the end of each transmit round; RFC 7661's concern, and RFC 9438 §5.8: an
    /// application-limited sender must not grow cwnd it does not use.)
    #[inline]
    pub(super) fn cwnd_limited(&self) -> bool {
        self.snd.cwnd_limited()
    }

    /// An ACK of new data (SEG.ACK > SND.UNA, at most SND.MAX): RFC 9293 §3.10.7.4 "If
    /// SND.UNA < SEG.ACK =< SND.NXT, then set SND.UNA <- SEG.ACK. Any segments on the
    /// retransmission queue that are thereby entirely acknowledged are removed", with the
    /// RTT sample it gives and the backoff it ends (RFC 6298 §5.7 / Karn).
    #[inline]
    pub(super) fn take_cumulative_ack(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr) {
        let ack = seg.ack;
        self.take_rtt_sample(ctx, seg);
        // Linux `tp->delivered` (`tcp_clean_rtx_queue`): the SYN and the FIN count one
        // segment each, data its segments (here when cumulatively acknowledged, SACKed or
        // not).
        let acked = self.snd.acked_by(ack);
        self.counters.delivered = self
            .counters
            .delivered
            .wrapping_add(acked.ctl() + acked.bytes().div_ceil(self.seg_mss()));
        // Acknowledged data leaves the send ring (the SYN occupies ISS, the FIN its own).
        self.snd.on_ack(acked);
        self.snd.on_scoreboard_ack(ack);
        self.snd.on_head_resent();
        self.timers.retries = 0;
        self.timers.retrans_stamp = None;
        self.snd.on_ack_progress();
        self.timers.probes_unanswered = 0;
    }

    /// The congestion controller's view of an ACK's round trip (Linux `pkts_acked`, before
    /// `cong_avoid`): RACK's microsecond sample of the newest segment it acknowledged
    /// (SACK connections; without SACK no per-ACK sample is kept and HyStart does not act).
    #[inline]
    pub(super) fn cc_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        self.snd.on_cc_rtt_sample(now, rtt);
    }

    /// Outside recovery: no duplicate ACKs are pending, and the congestion controller grows
    /// cwnd if the window was used.
    #[inline]
    pub(super) fn grow_cwnd(&mut self, now: Instant, acked: u32, cwnd_limited: bool) {
        self.snd.clear_dupacks();
        if cwnd_limited {
            self.snd.on_cwnd_ack(now, acked);
        }
    }

    /// RFC 6298 §5.2/§5.3: stop the timer when all is acked, else restart it.
    #[inline]
    pub(super) fn restart_rto(&mut self, now: Instant) {
        self.timers.rto = if self.snd.una() == self.snd.max() {
            None
        } else {
            Some(now + self.snd.rtt().rto())
        };
    }

    /// The window update of §3.10.7.4 (SND.WL1/SND.WL2 rule) for an ACK not below SND.UNA;
    /// `wnd` is SEG.WND scaled.
    #[inline]
    pub(super) fn take_window(&mut self, seg: &TcpRepr, wnd: u32) {
        self.snd.on_window_update(wnd, seg.seq, seg.ack);
    }

    /// A non-zero window: the persist backoff ends, and data in flight is guarded by the RTO.
    #[inline]
    pub(super) fn window_open(&mut self, now: Instant) {
        self.timers.persist_backoff = 0;
        if self.timers.rto.is_none() && self.snd.una() != self.snd.max() {
            self.timers.rto = Some(now + self.snd.rtt().rto());
        }
    }

    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    fn enter_recovery(&mut self, now: Instant) {
        self.timers.pto = None;
        self.snd.cancel_tlp();
        // RFC 8985 §7.1: "Reset TLP.is_retrans and TLP.end_seq when initiating ... fast
        // recovery".
        self.snd.end_tlp_episode();
        // RFC 6675 §5 steps (1)-(3) / RFC 6582 §3.2 step 2.
        let flight = self.flight();
        let sack = self.sack_ok;
        if sack {
            // What D-SACK undo restores if every retransmission turns out unnecessary.
            self.snd.start_undo_episode();
        }
        self.snd.enter_recovery(now, flight, sack);
    }

    /// RFC 8985 §6.2 steps 1-4 for one acceptable ACK of a SACK connection, then step 5
    /// (loss detection) and the D-SACK undo check.
    /// RFC 6937 Proportional Rate Reduction, as Linux `tcp_cwnd_reduction` applies it on
    /// every ACK of a SACK recovery: what may be sent follows what the peer received, so the
    /// window comes down to ssthresh over one round trip instead of in a burst at entry
    /// (RFC 6675's `cwnd - pipe` alone let the entry ACK release every segment RACK had
    /// marked lost at once). While pipe > ssthresh the reduction is proportional
    /// (`sndcnt = ceil(prr_delivered * ssthresh / RecoverFS) - prr_out`); at or below it,
    /// PRR-SSRB grows pipe back toward ssthresh by at most what was delivered, plus one
    /// segment when SND.UNA advanced and nothing new was found lost (Linux's variant of the
    /// RFC's "+ MSS"). The first ACK always releases the fast retransmit.
    fn prr_on_ack(&mut self, delivered: u32, una_advanced: bool, newly_lost: bool) {
        if !self.snd.recovery().is_some_and(|r| r.sack) || delivered == 0 {
            return;
        }
        let smss = self.seg_mss().max(1);
        let pipe = self.pipe();
        self.snd
            .on_prr_ack(delivered, una_advanced, newly_lost, smss, pipe);
    }

    /// RFC 8985 §6.2 for one ACK; returns the bytes newly marked lost.
    pub(super) fn rack_on_ack(
        &mut self,
        now: Instant,
        blocks: &[SackBlock],
        dsack: Option<SackBlock>,
        rtt: Option<Duration>,
    ) -> u32 {
        self.snd
            .on_rack_ack(now, blocks, dsack, rtt, self.seg_mss());
        let newly_lost = self.rack_detect_loss(now, false);
        // Linux `tcp_try_undo_dsack`: every retransmission of the episode was reported as a
        // duplicate, so the loss that caused the reduction was not real. (Asked before the
        // window is read: nearly every ACK has no episode to undo.)
        if self.snd.undo() {
            self.snd.on_rack_undo();
        }
        newly_lost
    }

    /// A SACK connection is repairing an RTO (go-back-N from SND.UNA up to `recover`).
    pub fn in_rto_recovery(&self) -> bool {
        self.sack_ok && seq::lt(self.snd.una(), self.snd.recover())
    }

    /// RFC 8985 §6.2 step 5, `RACK_detect_loss_and_arm_timer()`: mark what is lost, arm the
    /// reordering timer for what may still be in flight, and start fast recovery (RFC 8985
    /// §3.4: "RACK-TLP ... initiates fast recovery ... upon detecting a loss") unless a
    /// recovery is already under way.
    pub fn rack_detect_loss(&mut self, now: Instant, reo_timer: bool) -> u32 {
        if !self.sack_ok || !self.state.may_send() {
            return 0;
        }
        let rto_recovery = self.in_rto_recovery();
        let in_recovery = self.snd.recovery().is_some() || rto_recovery;
        let sacked = rack::segs_sacked(self.snd.scoreboard().sacked_bytes(), self.snd.mss());
        let report = self
            .snd
            .rack_detect_loss(now, reo_timer, in_recovery, sacked);
        self.timers.reo = report.reo_deadline;
        if report.newly_lost_bytes == 0 {
            return 0;
        }
        // RFC 8985 §9.3: "In the absence of PRR [RFC6937], when RACK-TLP detects a lost
        // retransmission, the congestion control MUST trigger an additional congestion
        // response"; SACK recovery runs PRR (`prr_on_ack`), which already holds sending to
        // what is delivered, so a lost retransmission is only repaired, as Linux does (one
        // reduction per recovery episode).
        if self.snd.recovery().is_none() && !rto_recovery && self.snd.wnd() > 0 {
            self.enter_recovery(now);
            if reo_timer {
                // No ACK brought this loss, so no ACK's PRR step sets the window: Linux's
                // `tcp_rack_reo_timeout` runs `tcp_cwnd_reduction(sk, 1, lost, 0)`, PRR for
                // one delivered segment, which releases the first retransmission only (RFC
                // 6675's fast retransmit; the others follow the ACKs, as PRR intends), not
                // `ssthresh - pipe` at once. Measured on Linux 6.18 with CUBIC: one
                // retransmission at the timer (BBR, which sets cwnd itself, sends more).
                self.prr_on_ack(self.seg_mss(), false, true);
            }
        }
        report.newly_lost_bytes
    }

    pub(super) fn receive_data(
        &mut self,
        ctx: &mut Ctx<'_>,
        sseq: u32,
        payload: Payload<'_>,
        fin: bool,
    ) {
        let off = seq::dist(self.rcv.nxt(), sseq) as usize;
        if !payload.is_empty() {
            // The receive ring is taken when the first data arrives (`alloc_buffers`).
            self.ensure_recv_ring(ctx.rings);
        }
        // Storage bound: everything must fit in the ring (the advertised window does).
        let room = self
            .rcv
            .ring()
            .capacity()
            .saturating_sub(self.rcv.ring().len() + off);
        let mut fin = fin;
        let data = if payload.len() > room {
            ctx.stats.rcv_no_room_bytes += (payload.len() - room) as u64;
            fin = false;
            payload.slice(0, room)
        } else {
            payload
        };
        if !data.is_empty() {
            // The peer's segment size, for "ACK every second full-sized segment". Capped at the
            // MSS we announced less the options every segment of the peer carries (RFC 7323
            // §3.2: 12 bytes of timestamps): GRO-merged segments are larger but stand for
            // several, and a full-sized timestamped segment holds MSS - 12 bytes. Capping at
            // the bare MSS made two full segments (2 x 1448) fall short of "two full-sized
            // segments" (2 x 1460), so every pair waited for the delayed-ACK timer (Linux
            // `tcp_measure_rcv_mss` takes the GRO `gso_size`, the payload per segment).
            let full =
                u32::from(self.config.mss).saturating_sub(if self.ts.enabled { 12 } else { 0 });
            self.rcv.measure_mss(data.len(), full);
            let had_gap = !self.rcv.ring().asm.is_empty();
            if off == 0 {
                // Linux `tcp_event_data_recv`: quick-ACK mode for the first data segment of
                // the connection ("initialize delayed ACK engine") and after a receive gap
                // longer than the RTO ("Apparently sender failed to restart window, so that
                // we send ACKs quickly"), with `tcp_incr_quickack(sk, TCP_MAX_QUICKACKS)`.
                self.rcv
                    .on_data_in_order(ctx.now, self.snd.rtt().rto(), MAX_QUICKACKS);
            }
            // Bytes `place.rs` already copied (into a posted read, or into the ring while
            // their checksum was verified) are kept where they are, not copied again.
            if self
                .rcv
                .accept_data(off, data, ctx.copy, ctx.stats)
                .is_none()
            {
                ctx.stats.ooo_drops += 1;
                self.rcv.owe_ack_now();
                return;
            }
            // Data that reaches a FIN held out of order: that FIN's ACK (eighth check) covers
            // this data too, one ACK as for a FIN on the segment itself.
            let fin = fin || (off == 0 && self.rcv.fin() == Some(self.rcv.nxt()));
            // Remembered SACK blocks follow the assembler: merged ranges grow, ranges now in
            // order disappear (RFC 2018 §4: report only data actually held above RCV.NXT).
            // With none remembered (in-order traffic) there is nothing to refresh.
            if self.sack_ok {
                self.rcv.refresh_sack_report();
            }
            if off > 0 {
                // Out of order: ACK at once (RFC 5681 §4.2) with SACK blocks (RFC 2018 §4).
                ctx.stats.ooo_bytes_queued += data.len() as u64;
                self.counters.rcv_ooopack = self.counters.rcv_ooopack.wrapping_add(1);
                self.rcv.report_out_of_order(off);
                self.rcv.owe_ack_now();
            } else if had_gap {
                // Filling a gap: ACK at once (RFC 5681 §4.2: "an immediate ACK ... when an
                // incoming segment fills in all or part of a gap"), with an ACK of its own,
                // and the next in-order segments too (Linux's quick-ACK mode after
                // out-of-order data): the segment that fills the hole is usually a
                // retransmission sent together with new data, and one ACK for both, if lost,
                // left the sender with nothing in flight to clock it but the RTO. With a
                // FIN the FIN's ACK (eighth check) covers this data: one ACK, not two.
                if fin {
                    self.rcv.owe_ack_now();
                } else {
                    self.snapshot_ack();
                }
                self.rcv.quickack_at_least(QUICK_ACKS);
            } else if self.rcv.use_quickack() {
                // One ACK per arrival, a GRO-merged one included, as Linux acknowledges each
                // GRO packet once (`__tcp_ack_snd_check` runs per skb): in quick-ACK mode, the
                // connection's first data, the sender is in slow start with a small window
                // and gets an ACK at once for everything that arrived. (Delayed-ACK mode
                // below keeps ACKs inside a merged arrival, measured to recover from a lost
                // stretch ACK faster.)
                if fin {
                    // The FIN's ACK (eighth check) covers this data too: one ACK, as Linux.
                    self.rcv.owe_ack_now();
                } else {
                    self.snapshot_ack();
                }
            } else {
                let unacked = self.rcv.add_unacked(data.len());
                match self.config.delayed_ack {
                    // RFC 5681 §4.2 / RFC 9293 §3.8.6.3: ACK at least every second full segment.
                    Some(d) if unacked < 2 * self.rcv.mss() as usize => {
                        if self.timers.delack.is_none() {
                            self.timers.delack = Some(ctx.now + d);
                        }
                    }
                    Some(_) => {
                        // A GRO-merged segment: ACKs inside it too (see `ack_inside_batch`).
                        // Linux sends one ACK per merged segment; measured on the pipe with 1%
                        // random loss (64 MiB), that single stretch ACK, when lost, leaves the
                        // sender waiting for a tail loss probe (and the probe for a delayed
                        // ACK): 2.6 s vs 1.0 s without GRO.
                        self.ack_inside_batch(sseq, data.len());
                        // Owed now, even if more segments of the same batch follow (a lost
                        // stretch ACK would otherwise silence a whole window).
                        self.snapshot_ack();
                    }
                    None => self.rcv.owe_ack_now(),
                }
            }
        }
        if fin {
            let f = sseq.wrapping_add(data.len() as u32);
            self.rcv.note_fin(f);
            // A FIN beyond RCV.NXT with no data is out of order too: a duplicate ACK at once
            // names the hole (RFC 5681 §4.2), as Linux's `tcp_data_queue_ofo` answers it.
            if data.is_empty() && f != self.rcv.nxt() {
                self.rcv.owe_ack_now();
            }
        }
    }
}
