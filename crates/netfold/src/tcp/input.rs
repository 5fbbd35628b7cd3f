//! Segment arrival for a connection, RFC 9293 §3.10.7 (SEGMENT ARRIVES), with RFC 5961
//! (blind in-window attacks), RFC 7323 (PAWS, timestamps) and RFC 2018/6675 (SACK).

use super::cc::CongestionController;
use super::conn::{Conn, Ctx, Event, Recovery};
use super::sack::DUP_THRESH;
use super::{seq, Error, Payload, State};
use crate::time::Duration;
use crate::wire::tcp::{SackBlock, TcpRepr};

/// RFC 7323 §5.5: a TS.Recent older than 24 days is invalid for PAWS.
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);
/// RFC 6298 §5.7 fallback RTO.
const SYN_FALLBACK_RTO: Duration = Duration::from_secs(3);
/// Minimum spacing of ACKs sent in reply to unacceptable segments without data.
const OOW_ACK_INTERVAL: Duration = Duration::from_millis(500);

impl Conn {
    /// One segment for this connection. `ctx.now` is the arrival time.
    pub fn input(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr, payload: Payload<'_>) -> Event {
        self.last_rx = ctx.now;
        self.ka_probes = 0;
        match self.state {
            State::SynSent => return self.input_syn_sent(ctx, seg),
            State::Closed | State::Listen => {
                ctx.reply_rst(*self.local.ip(), *self.remote.ip(), seg, payload.len());
                return Event::None;
            }
            _ => {}
        }
        let now = ctx.now;
        let flags = seg.flags;

        // RFC 7323 §5.3 R1: PAWS.
        if self.ts_enabled && !flags.rst() {
            if let Some(ts) = seg.options.timestamps {
                if seq::lt(ts.tsval, self.ts_recent) {
                    if now.saturating_since(self.ts_recent_at) > PAWS_IDLE {
                        // §5.5: TS.Recent is too old to judge by; forget it.
                        self.ts_recent = ts.tsval;
                    } else {
                        ctx.stats.paws_drops += 1;
                        self.ack_now = true;
                        return Event::None;
                    }
                }
            }
        }

        // A retransmitted SYN in SYN-RECEIVED means our SYN-ACK was lost: send it again.
        if self.state == State::SynReceived
            && flags.syn()
            && !flags.ack()
            && seg.seq == self.irs
            && !flags.rst()
        {
            self.snd_nxt = self.iss;
            return Event::None;
        }

        // Simultaneous open (RFC 9293 §3.5 figure 8): the peer's SYN-ACK repeats its SYN and
        // acknowledges ours; it completes the handshake rather than being a stray SYN.
        if self.state == State::SynReceived
            && flags.syn()
            && flags.ack()
            && !flags.rst()
            && seg.seq == self.irs
            && seq::lt(self.snd_una, seg.ack)
            && seq::le(seg.ack, self.snd_max)
        {
            self.snd_una = seg.ack;
            if seq::lt(self.snd_nxt, self.snd_una) {
                self.snd_nxt = self.snd_una;
            }
            self.snd_wnd = u32::from(seg.window) << self.snd_wscale;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
            self.rto_at = None;
            self.retries = 0;
            self.ack_now = true;
            self.in_syn_queue = false;
            self.alloc_buffers(ctx.rings);
            self.state = if self.fin_queued {
                State::FinWait1
            } else {
                State::Established
            };
            return if self.passive {
                Event::Established
            } else {
                Event::None
            };
        }

        // RFC 5961 §4.2 (RFC 9293 §3.10.7.4 fourth check): a SYN in a synchronized state, at
        // any sequence number, gets a challenge ACK and is otherwise ignored.
        if flags.syn() && !flags.rst() {
            self.challenge_ack(ctx);
            return Event::None;
        }

        // §3.10.7.4 first check: sequence acceptability.
        let seg_len = payload.len() as u32 + u32::from(flags.syn()) + u32::from(flags.fin());
        let wnd = seq::dist(self.rcv_nxt, self.rcv_adv)
            .max((self.config.recv_buffer as u32).saturating_sub(self.rcv.len() as u32));
        let in_wnd =
            |s: u32| seq::le(self.rcv_nxt, s) && seq::lt(s, self.rcv_nxt.wrapping_add(wnd));
        let mut payload = payload;
        let mut fin = flags.fin();
        let acceptable = if seg_len == 0 {
            if wnd == 0 {
                seg.seq == self.rcv_nxt
            } else {
                in_wnd(seg.seq)
            }
        } else if wnd == 0 {
            // Zero window: nothing is acceptable, but ACK/RST information still counts
            // (RFC 9293 §3.10.7.4): keep the header, drop the data.
            if seg.seq == self.rcv_nxt {
                payload = payload.slice(0, 0);
                fin = false;
                self.ack_now = true;
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
                || (seq::lt(seg.seq, self.rcv_nxt) && seq::ge(last, self.rcv_nxt.wrapping_add(wnd)))
        };
        if !acceptable {
            // RFC 9293 §3.10.7.4: answer with an ACK (never to a RST). Replies to unacceptable
            // segments without data are rate limited (like Linux tcp_invalid_ratelimit) so two
            // confused ends cannot ping-pong ACKs forever.
            let pure = seg_len == 0;
            let limited = pure
                && self
                    .last_oow_ack
                    .is_some_and(|t| now.saturating_since(t) < OOW_ACK_INTERVAL);
            if !flags.rst() && !limited {
                if pure {
                    self.last_oow_ack = Some(now);
                }
                self.ack_now = true;
                if self.state == State::TimeWait && fin {
                    // §3.10.7.4: a retransmitted FIN restarts the 2 MSL timeout.
                    self.timewait_at = Some(now + self.config.time_wait);
                }
            }
            return Event::None;
        }

        // Trim to the window: drop what is before RCV.NXT (a SYN counts one) and beyond.
        let mut sseq = seg.seq;
        let mut skip = seq::dist(sseq, self.rcv_nxt);
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

        // RFC 7323 §4.3: update TS.Recent from a segment covering Last.ACK.sent.
        if self.ts_enabled {
            if let Some(ts) = seg.options.timestamps {
                if seq::le(seg.seq, self.last_ack_sent) && seq::ge(ts.tsval, self.ts_recent) {
                    self.ts_recent = ts.tsval;
                    self.ts_recent_at = now;
                }
            }
        }

        // Second check: RST (RFC 5961 §3.2).
        if flags.rst() {
            if seg.seq != self.rcv_nxt {
                self.challenge_ack(ctx);
                return Event::None;
            }
            return match self.state {
                State::SynReceived if self.passive => {
                    self.enter_closed(None);
                    Event::Dropped
                }
                State::SynReceived => {
                    self.enter_closed(Some(Error::ConnectionRefused));
                    Event::Closed
                }
                State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait => {
                    self.enter_closed(Some(Error::ConnectionReset));
                    Event::Closed
                }
                _ => {
                    self.enter_closed(None);
                    Event::Closed
                }
            };
        }

        // Fifth check: ACK.
        if !flags.ack() {
            return Event::None;
        }
        let mut event = Event::None;
        if self.state == State::SynReceived {
            if seq::lt(self.snd_una, seg.ack) && seq::le(seg.ack, self.snd_max) {
                self.state = State::Established;
                self.snd_wnd = u32::from(seg.window) << self.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                self.snd_wl1 = seg.seq;
                self.snd_wl2 = seg.ack;
                if self.fin_queued {
                    self.state = State::FinWait1;
                }
                self.in_syn_queue = false;
                self.alloc_buffers(ctx.rings);
                if self.passive {
                    event = Event::Established;
                }
            } else {
                ctx.reply_rst(*self.local.ip(), *self.remote.ip(), seg, payload.len());
                return Event::None;
            }
        }
        // RFC 5961 §5.2: acceptable iff (SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT.
        if seq::gt(seg.ack, self.snd_max) {
            self.ack_now = true;
            return event;
        }
        if seq::lt(seg.ack, self.snd_una.wrapping_sub(self.max_snd_wnd)) {
            self.challenge_ack(ctx);
            return event;
        }
        self.process_ack(ctx, seg, payload.len(), fin);
        if self.state == State::Closed {
            return Event::Closed;
        }
        // FIN-WAIT/CLOSING/LAST-ACK transitions on our FIN being acknowledged.
        if self.fin_acked() {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    self.arm_orphan_timer(now);
                }
                State::Closing => self.enter_time_wait(now),
                State::LastAck => {
                    self.enter_closed(None);
                    return Event::Closed;
                }
                _ => {}
            }
        }

        // Seventh check: segment text.
        if matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) && (!payload.is_empty() || fin)
        {
            if !payload.is_empty() && self.user_closed {
                // RFC 2525 §2.17 / Linux: data for an application that closed -> reset.
                let rst = self.make_rst();
                ctx.queue_rst(*self.local.ip(), *self.remote.ip(), rst);
                self.enter_closed(None);
                return Event::Closed;
            }
            self.receive_data(ctx, sseq, payload, fin);
        }

        // Eighth check: FIN, once everything before it has arrived.
        if let Some(f) = self.rcv_fin {
            if f == self.rcv_nxt && !self.fin_received {
                self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
                self.fin_received = true;
                self.rcv_fin = None;
                self.ack_now = true;
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
        }
        event
    }

    /// An application that closed cannot read any more: an orphan FIN-WAIT-2 waits at most
    /// `time_wait` for the peer's FIN (Linux `tcp_fin_timeout`), bounding memory.
    pub fn arm_orphan_timer(&mut self, now: crate::time::Instant) {
        if self.user_closed && self.state == State::FinWait2 && self.timewait_at.is_none() {
            self.timewait_at = Some(now + self.config.time_wait);
        }
    }

    fn snapshot_ack(&mut self) {
        self.snapshot_ack_at(self.rcv_nxt);
        self.unacked_bytes = 0;
        self.delack_at = None;
    }

    /// Records an ACK of everything below `ack` (at most RCV.NXT) to be sent by `output`.
    fn snapshot_ack_at(&mut self, ack: u32) {
        let snap = (ack, self.ts_recent);
        if self.n_snaps < self.ack_snaps.len() {
            self.ack_snaps[self.n_snaps] = snap;
            self.n_snaps += 1;
        } else {
            self.ack_snaps[self.n_snaps - 1] = snap;
        }
    }

    fn challenge_ack(&mut self, ctx: &mut Ctx<'_>) {
        // RFC 5961 §7: rate limited.
        if ctx.challenge.allow(ctx.now) {
            ctx.stats.challenge_acks += 1;
            self.ack_now = true;
        }
    }

    /// RFC 9293 §3.10.7.3 SYN-SENT.
    fn input_syn_sent(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr) -> Event {
        let f = seg.flags;
        if f.ack() && (seq::le(seg.ack, self.iss) || seq::gt(seg.ack, self.snd_max)) {
            ctx.reply_rst(*self.local.ip(), *self.remote.ip(), seg, 0);
            return Event::None;
        }
        if f.rst() {
            if f.ack() {
                self.enter_closed(Some(Error::ConnectionRefused));
                return Event::Closed;
            }
            return Event::None;
        }
        if !f.syn() {
            return Event::None;
        }
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq.wrapping_add(1);
        self.rcv_adv = self.rcv_nxt;
        self.last_ack_sent = self.rcv_nxt;
        self.negotiate(ctx.now, seg);
        // RFC 7323 §2.2: the window in a SYN is not scaled.
        self.snd_wnd = u32::from(seg.window);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        self.ack_now = true;
        if f.ack() {
            self.snd_wl2 = seg.ack;
            self.take_rtt_sample(ctx, seg);
            self.snd_una = seg.ack;
            if seq::lt(self.snd_nxt, self.snd_una) {
                self.snd_nxt = self.snd_una;
            }
            // RFC 6298 §5.7: a SYN that timed out without yielding an RTT sample leaves the
            // RTO at 3 s once data transfer begins.
            if self.retries > 0 && self.rtt.srtt().is_none() {
                self.rtt.set_base(SYN_FALLBACK_RTO);
            }
            self.retries = 0;
            self.rtt.backoff = 0;
            self.rto_at = None;
            self.state = State::Established;
            if self.fin_queued {
                self.state = State::FinWait1;
            }
        } else {
            // Simultaneous open (RFC 9293 §3.5 figure 7): resend our SYN as a SYN-ACK.
            self.state = State::SynReceived;
            self.snd_wl2 = self.iss;
            self.snd_nxt = self.iss;
        }
        Event::None
    }

    fn take_rtt_sample(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr) {
        // RFC 7323 §4.1 RTTM: with timestamps, TSecr gives a sample on each new ACK;
        // otherwise Karn's algorithm times one unretransmitted segment at a time.
        if self.ts_enabled {
            if let Some(ts) = seg.options.timestamps {
                if ts.tsecr != 0 {
                    let ms = self.ts_now(ctx.now).wrapping_sub(ts.tsecr);
                    if ms < 1 << 30 {
                        self.rtt.sample(Duration::from_millis(u64::from(ms)));
                        self.rtt_timing = None;
                        return;
                    }
                }
            }
        }
        if let Some((s, t)) = self.rtt_timing {
            if seq::ge(seg.ack, s) {
                self.rtt.sample(ctx.now.saturating_since(t));
                self.rtt_timing = None;
            }
        }
    }

    fn process_ack(&mut self, ctx: &mut Ctx<'_>, seg: &TcpRepr, data_len: usize, fin: bool) {
        let now = ctx.now;
        let ack = seg.ack;
        let mss = self.mss;
        let mut newly_sacked = 0;
        if self.sack_ok {
            for b in seg.options.sack_blocks() {
                ctx.stats.sack_blocks_in += 1;
                newly_sacked += self
                    .scoreboard
                    .add(*b, seq::max(self.snd_una, ack), self.snd_max);
            }
        }
        let new_wnd = u32::from(seg.window) << self.snd_wscale;
        // §3.10.7.4: only an ACK in [SND.UNA, SND.NXT] may update the window.
        let may_update_window = seq::ge(ack, self.snd_una);
        let acked = seq::dist(self.snd_una, ack);
        // Was the window actually used? (Linux tcp_is_cwnd_limited; RFC 7661's concern, and
        // RFC 9438 §5.8: an application-limited sender must not grow cwnd it does not use.)
        let flight_before = self.flight();
        let cwnd_now = self.cc.cwnd();
        let cwnd_limited = if cwnd_now < self.cc.ssthresh() {
            flight_before.saturating_mul(2) >= cwnd_now
        } else {
            flight_before.saturating_add(3 * mss) >= cwnd_now
        };
        if acked > 0 {
            self.take_rtt_sample(ctx, seg);
            // Acknowledged data leaves the send ring (the SYN occupies ISS, the FIN its own).
            let data_end = self.fin_seq();
            let n = seq::dist(self.snd_buf_seq, seq::min(ack, data_end));
            self.snd.consume(n as usize);
            self.snd_buf_seq = self.snd_buf_seq.wrapping_add(n);
            self.snd_una = ack;
            if seq::lt(self.snd_nxt, ack) {
                self.snd_nxt = ack;
            }
            self.scoreboard.advance(ack);
            self.retries = 0;
            self.rtt.backoff = 0;
            self.probes_unanswered = 0;
            match self.recovery {
                Some(rec) if seq::ge(ack, rec.point) => {
                    // Full acknowledgment: leave recovery (RFC 6582 §3.2 step 3, RFC 6675 §5).
                    self.recovery = None;
                    self.dupacks = 0;
                    let ss = self.cc.ssthresh();
                    if rec.sack {
                        self.cc.set_cwnd(ss);
                    } else {
                        self.cc.set_cwnd(ss.min(self.flight().max(mss) + mss));
                    }
                }
                Some(mut rec) => {
                    if rec.sack {
                        // RFC 6675 §5 (C): a partial ACK only updates the scoreboard; NextSeg
                        // picks what to retransmit. (Forcing a retransmission at the new
                        // SND.UNA, NewReno style, resends holes already retransmitted.)
                        rec.rxt_next = seq::max(rec.rxt_next, ack);
                    } else {
                        // RFC 6582 §3.2 step 5: partial ACK -> retransmit the first unacked
                        // segment, deflate cwnd by the amount acked, add back one SMSS.
                        rec.rxt_una = true;
                        rec.rxt_next = ack;
                        let mut c = self.cc.cwnd().saturating_sub(acked);
                        if acked >= mss {
                            c += mss;
                        }
                        self.cc.set_cwnd(c.max(mss));
                    }
                    self.recovery = Some(rec);
                }
                None => {
                    self.dupacks = 0;
                    if cwnd_limited {
                        self.cc.on_ack(now, acked, mss, self.rtt.srtt());
                    }
                }
            }
            // RFC 6298 §5.2/§5.3: stop the timer when all is acked, else restart it.
            self.rto_at = if self.snd_una == self.snd_max {
                None
            } else {
                Some(now + self.rtt.rto())
            };
            // RFC 8985 §7.4: the ACK covering a retransmitted probe ends the episode; without
            // D-SACK we cannot tell whether the probe repaired a loss, so (as the RFC requires
            // then) respond as to a loss. A probe of new data needs no response.
            if let Some((end, rxt)) = self.tlp_end {
                if seq::ge(ack, end) {
                    self.tlp_end = None;
                    if rxt && self.recovery.is_none() {
                        self.cc.on_loss(now, self.flight().max(mss), mss);
                    }
                }
            }
            self.pto_at = None;
            self.arm_pto(now);
        } else if self.snd_max != self.snd_una
            && ack == self.snd_una
            && data_len == 0
            && !fin
            && (newly_sacked > 0 || (!self.sack_ok && new_wnd == self.snd_wnd))
        {
            // RFC 5681 §2 duplicate ACK (RFC 6675 §2: with SACK, one that SACKs new data).
            ctx.stats.dup_acks += 1;
            self.dupacks = self.dupacks.saturating_add(1);
            match self.recovery {
                None => {
                    let lost = self.sack_ok && self.scoreboard.is_lost(self.snd_una, mss);
                    // RFC 5827 early retransmit: with fewer than 4 segments outstanding and
                    // nothing new to send, too few duplicate ACKs can ever arrive; lower the
                    // threshold to (outstanding segments - 1).
                    let smss = self.seg_mss().max(1);
                    let oseg = self.flight().div_ceil(smss);
                    let nothing_new = !seq::lt(self.snd_max, self.fin_seq())
                        || seq::ge(self.snd_max, self.snd_una.wrapping_add(new_wnd));
                    let thresh = if oseg < 4 && nothing_new {
                        oseg.saturating_sub(1).max(1)
                    } else {
                        DUP_THRESH
                    };
                    let lost = lost || (self.dupacks >= thresh);
                    // RFC 6582 §3.2 step 1: no new recovery while the ACK is still within the
                    // data of an earlier one (`recover`).
                    if (self.dupacks >= DUP_THRESH || lost) && seq::gt(ack, self.recover) {
                        self.enter_recovery(ctx);
                    }
                }
                Some(rec) if !rec.sack => {
                    // RFC 6582 §3.2 step 4: inflate by one SMSS per further dup ACK.
                    let c = self.cc.cwnd().saturating_add(mss);
                    self.cc.set_cwnd(c);
                }
                Some(_) => {}
            }
        }

        if matches!(self.recovery, Some(r) if r.sack) {
            self.rxt.update(self.snd_una, &self.scoreboard);
        }

        // Window update (§3.10.7.4, SND.WL1/SND.WL2 rule).
        if may_update_window
            && (seq::lt(self.snd_wl1, seg.seq)
                || (self.snd_wl1 == seg.seq && seq::le(self.snd_wl2, ack)))
        {
            self.snd_wnd = new_wnd;
            self.max_snd_wnd = self.max_snd_wnd.max(new_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
        }
        if self.snd_wnd == 0 {
            // Zero window (§3.8.6.1): data beyond SND.UNA was not accepted; probe instead of
            // retransmitting.
            self.probes_unanswered = 0;
            if self.send_pending() {
                self.snd_nxt = self.snd_una;
                self.recovery = None;
                self.rto_at = None;
                if self.persist_at.is_none() {
                    self.persist_at = Some(now + self.rtt.rto());
                }
            }
        } else {
            self.persist_at = None;
            self.persist_backoff = 0;
            if self.rto_at.is_none() && self.snd_una != self.snd_max {
                self.rto_at = Some(now + self.rtt.rto());
            }
        }
    }

    fn enter_recovery(&mut self, ctx: &mut Ctx<'_>) {
        self.pto_at = None;
        self.tlp_due = false;
        // RFC 6675 §5 steps (1)-(3) / RFC 6582 §3.2 step 2.
        let flight = self.flight();
        let mss = self.mss;
        self.cc.on_loss(ctx.now, flight, mss);
        self.recover = self.snd_max;
        let sack = self.sack_ok;
        if !sack {
            let c = self.cc.ssthresh().saturating_add(3 * mss);
            self.cc.set_cwnd(c);
        }
        self.rxt.clear();
        self.recovery = Some(Recovery {
            point: self.snd_max,
            sack,
            rxt_next: self.snd_una,
            rxt_una: true,
        });
        self.rtt_timing = None;
    }

    fn receive_data(&mut self, ctx: &mut Ctx<'_>, sseq: u32, payload: Payload<'_>, fin: bool) {
        let off = seq::dist(self.rcv_nxt, sseq) as usize;
        // Storage bound: everything must fit in the ring (the advertised window does).
        let room = self.rcv.capacity().saturating_sub(self.rcv.len() + off);
        let mut fin = fin;
        let data = if payload.len() > room {
            fin = false;
            payload.slice(0, room)
        } else {
            payload
        };
        if !data.is_empty() {
            // The peer's segment size, for "ACK every second full-sized segment". Capped at the
            // MSS we announced: GRO-merged segments are larger but stand for several.
            self.rcv_mss = self
                .rcv_mss
                .max(data.len() as u32)
                .min(u32::from(self.config.mss));
            let had_gap = !self.rcv.asm.is_empty();
            match self.rcv.write_payload_at(off, data, ctx.copy) {
                None => {
                    ctx.stats.ooo_drops += 1;
                    self.ack_now = true;
                    return;
                }
                Some(adv) => {
                    self.rcv_nxt = self.rcv_nxt.wrapping_add(adv as u32);
                }
            }
            // Remembered SACK blocks follow the assembler: merged ranges grow, ranges now in
            // order disappear (RFC 2018 §4: report only data actually held above RCV.NXT).
            if self.sack_ok {
                let base = self.rcv_nxt;
                let asm = &self.rcv.asm;
                self.sack_hist.refresh(base, |left| {
                    asm.containing(seq::dist(base, left) as usize)
                        .map(|(o, l)| {
                            let left = base.wrapping_add(o as u32);
                            SackBlock {
                                left,
                                right: left.wrapping_add(l as u32),
                            }
                        })
                });
            }
            if off > 0 {
                // Out of order: ACK at once (RFC 5681 §4.2) with SACK blocks (RFC 2018 §4).
                ctx.stats.ooo_bytes_queued += data.len() as u64;
                if let Some((o, l)) = self.rcv.asm.containing(off) {
                    let left = self.rcv_nxt.wrapping_add(o as u32);
                    self.sack_hist.record(SackBlock {
                        left,
                        right: left.wrapping_add(l as u32),
                    });
                }
                self.ack_now = true;
            } else if had_gap {
                // Filling a gap: ACK at once.
                self.ack_now = true;
            } else {
                self.unacked_bytes += data.len();
                match self.config.delayed_ack {
                    // RFC 5681 §4.2 / RFC 9293 §3.8.6.3: ACK at least every second full segment.
                    Some(d) if self.unacked_bytes < 2 * self.rcv_mss as usize => {
                        if self.delack_at.is_none() {
                            self.delack_at = Some(ctx.now + d);
                        }
                    }
                    Some(_) => {
                        // A GRO-merged segment of 4 or more segments: also acknowledge its
                        // middle. Linux sends one ACK per merged segment; measured on the
                        // pipe with 1% random loss (64 MiB), that single stretch ACK, when
                        // lost, leaves the sender waiting for a tail loss probe (and the probe
                        // for a delayed ACK): 2.6 s vs 1.0 s without GRO. One extra ACK per
                        // ~22 segments removes most of it.
                        let mss = self.rcv_mss.max(1) as usize;
                        if data.len() >= 4 * mss {
                            let mid = sseq.wrapping_add(((data.len() / mss / 2) * mss) as u32);
                            self.snapshot_ack_at(mid);
                        }
                        // Owed now, even if more segments of the same batch follow (a lost
                        // stretch ACK would otherwise silence a whole window).
                        self.snapshot_ack();
                    }
                    None => self.ack_now = true,
                }
            }
        }
        if fin {
            self.rcv_fin = Some(sseq.wrapping_add(data.len() as u32));
        }
    }
}
