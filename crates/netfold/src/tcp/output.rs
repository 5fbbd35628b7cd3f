//! Segment generation for a connection (the tcp_output.c side): SYN/SYN-ACK, data within
//! min(cwnd, peer window), loss-recovery retransmissions (RFC 6675 NextSeg / RFC 6582),
//! FIN, persist and keepalive probes, pure ACKs and window updates.
//!
//! Every segment is first planned without changing state, then offered to `emit`; only if
//! `emit` accepts it is the plan committed. A refused segment is planned again next time.

use super::cc::CongestionController;
use super::conn::Conn;
use super::rack::{Probe, ProbeCtx};
use super::{seq, Ecn, EcnMode, OutSegment, State, Stats};
use crate::buf::zc::Gather;
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpOptions, TcpRepr, Timestamps};

/// Bound on segments one connection emits per `output` call (fairness between connections).
const MAX_SEGMENTS_PER_CALL: usize = 1024;

/// How an output pass for one connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStatus {
    /// Nothing more is due.
    Done,
    /// `emit` refused a segment; retry this connection first.
    Blocked,
    /// The per-call budget ran out with more to send; let other connections go first.
    Budget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Syn,
    /// New data or go-back-N retransmission from SND.NXT.
    Data,
    /// Loss-recovery retransmission of a range deemed lost (does not move SND.NXT).
    Hole,
    Probe,
    KeepAlive,
    Ack,
    /// A pure ACK from `ack_snaps[0]`.
    SnapAck,
    /// RFC 8985 tail loss probe (new data, or the last segment again).
    Tlp,
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    kind: Kind,
    seq: u32,
    len: u32,
    fin: bool,
}

/// What `commit` needs of the header a segment went out with.
#[derive(Debug, Clone, Copy)]
struct Sent {
    flags: TcpFlags,
    ack: u32,
    window: u16,
    sack_count: u8,
    tsval: Option<u32>,
}

impl Sent {
    #[inline(always)]
    fn of(repr: &TcpRepr) -> Sent {
        Sent {
            flags: repr.flags,
            ack: repr.ack,
            window: repr.window,
            sack_count: repr.options.sack_count,
            tsval: repr.options.timestamps.map(|t| t.tsval),
        }
    }
}

impl Conn {
    /// Emits everything due (up to a per-call budget).
    ///
    /// Never inlined into `TcpLayer::output`: kept one function, as it was before the layer
    /// became dual-stack; inlined, the rr transaction took 3% more CPU at the same instruction
    /// count (measured, alternating binaries).
    #[inline(never)]
    pub fn poll_output(
        &mut self,
        now: Instant,
        stats: &mut Stats,
        emit: &mut dyn FnMut(&OutSegment<'_>) -> bool,
    ) -> OutputStatus {
        if self.nothing_to_send() {
            return OutputStatus::Done;
        }
        self.restart_after_idle(now);
        self.snd.on_output_pass();
        let mut sent_data = false;
        for _ in 0..MAX_SEGMENTS_PER_CALL {
            let Some(plan) = self.plan(now) else {
                // A push (`TcpLayer::push`) covers what could go when it was asked for.
                self.snd.on_output_stopped();
                self.arm_persist_if_stuck(now);
                self.end_round(sent_data);
                return OutputStatus::Done;
            };
            let ecn = if self.ecn_new_data(&plan) {
                Ecn::Ect0
            } else {
                Ecn::NotEct
            };
            let payload = if plan.len > 0 {
                // A Fast Open SYN's data starts after the SYN's sequence number.
                let start = plan.seq.wrapping_add(u32::from(plan.kind == Kind::Syn));
                self.snd.gather(start, plan.len)
            } else {
                Gather::empty()
            };
            // The segment size is asked once per segment, here, and handed to `commit` (it
            // changes within `commit` only when a D-SACK block goes out).
            let smss = self.seg_mss();
            // The header is built in place, in the segment handed to `emit`; `commit` takes
            // the few fields it needs from it, not a copy of the whole header.
            let seg = OutSegment {
                src: self.local.get().ip(),
                dst: self.remote.get().ip(),
                repr: self.build_repr(&plan, now),
                payload,
                gso_size: smss.min(u32::from(u16::MAX)) as u16,
                ecn,
                dscp: self.config.tos & !0b11,
            };
            if !emit(&seg) {
                self.end_round(sent_data);
                return OutputStatus::Blocked;
            }
            let sent = Sent::of(&seg.repr);
            sent_data |= plan.len > 0;
            self.commit(&plan, &sent, smss, now, stats);
            if self.nothing_to_send() {
                self.end_round(sent_data);
                return OutputStatus::Done;
            }
        }
        self.end_round(sent_data);
        OutputStatus::Budget
    }

    /// The end of a transmit round: record whether cwnd was used (Linux calls
    /// `tcp_cwnd_validate` at the end of `tcp_write_xmit` "if (likely(sent_pkts ||
    /// is_cwnd_limited))"; see `cc::usage`).
    #[inline]
    fn end_round(&mut self, sent_data: bool) {
        if self.snd.una() == self.snd.max() && !sent_data {
            return;
        }
        let in_flight = if self.snd.recovery().is_some() || self.sack_ok {
            self.pipe()
        } else {
            self.flight()
        };
        self.snd.on_round_end(in_flight, sent_data);
    }

    /// A cheap "`plan` would return `None`" for the common case of an established connection
    /// with everything sent and nothing owed: no ACK due, no window update, no probe, no
    /// loss to repair, no queued data or FIN. Request/response traffic asks twice per
    /// transaction (after each segment it sends, and after each segment it receives), and
    /// the full decision costs several hundred instructions; `false` just means "ask
    /// `plan`". In this state `restart_after_idle` and `arm_persist_if_stuck` (which act only
    /// on unsent data) have nothing to do either.
    #[inline]
    pub(super) fn nothing_to_send(&self) -> bool {
        self.state == State::Established
            && !self.rcv.ack_now()
            && self.n_snaps == 0
            && !self.snd.tlp_due()
            && !self.persist_probe_due
            && !self.keepalive_due
            && self.snd.recovery().is_none()
            && self.snd.rack().lost_bytes() == 0
            && !self.snd.fin_queued()
            && self.snd.nxt() == self.fin_seq()
            && !self.window_update_needed()
    }

    /// RFC 3168 §6.1.1: an ECN connection sends new data ECT; not SYNs, pure ACKs (§5.1),
    /// retransmissions (§6.1.5) or window probes (§6.1.6) (Linux `tcp_ecn_send`: data at or
    /// above SND.NXT only). A tail loss probe carrying new data is new data.
    fn ecn_new_data(&self, p: &Plan) -> bool {
        self.ecn.ok
            && p.len > 0
            && matches!(p.kind, Kind::Data | Kind::Tlp)
            && !seq::lt(p.seq, self.snd.max())
    }

    fn build_repr(&self, p: &Plan, now: Instant) -> TcpRepr {
        let mut flags = 0u8;
        let mut options = TcpOptions::default();
        let (mut window, _) = self.rcv_window();
        match p.kind {
            Kind::Syn => (flags, options, window) = self.syn_header(now),
            _ => {
                flags |= TcpFlags::ACK;
                if self.ecn.ok {
                    // §6.1.3: ECE on every segment until the peer's CWR arrives.
                    if self.ecn.ece {
                        flags |= TcpFlags::ECE;
                    }
                    // §6.1.2: CWR on the first new data segment after a reduction.
                    if self.ecn.cwr_due && self.ecn_new_data(p) {
                        flags |= TcpFlags::CWR;
                    }
                }
                if self.ts.enabled {
                    options.timestamps = Some(Timestamps {
                        tsval: self.ts_now(now),
                        tsecr: self.ts.recent,
                    });
                }
                // RFC 2018 §3: at most 3 blocks alongside timestamps, else 4; a D-SACK block
                // (RFC 2883 §4) first.
                let (blocks, n) = self.sack_blocks();
                if n > 0 {
                    options.sack[..n].copy_from_slice(&blocks[..n]);
                    options.sack_count = n as u8;
                }
            }
        }
        if p.fin {
            flags |= TcpFlags::FIN;
        }
        if self.push(p) {
            flags |= TcpFlags::PSH;
        }
        let seq = if p.kind == Kind::KeepAlive || (p.kind == Kind::Probe && p.len == 0 && !p.fin) {
            // RFC 9293 §3.8.4: SEG.SEQ = SND.NXT - 1 elicits an ACK (keepalives and
            // zero-window probes).
            self.snd.una().wrapping_sub(1)
        } else {
            p.seq
        };
        let mut ack = if flags & TcpFlags::ACK != 0 {
            self.rcv.nxt()
        } else {
            0
        };
        if p.kind == Kind::SnapAck {
            let (snap_ack, tsecr) = self.ack_snaps[0];
            ack = snap_ack;
            if let Some(ts) = options.timestamps.as_mut() {
                ts.tsecr = tsecr;
            }
            // Same right edge as a current ACK, expressed from the older ACK number.
            let (_, edge) = self.rcv_window();
            window = self.rcv.field_from(snap_ack, edge);
        }
        TcpRepr {
            src_port: self.local.get().port(),
            dst_port: self.remote.get().port(),
            seq,
            ack,
            flags: TcpFlags(flags),
            window,
            urgent: 0,
            options,
        }
    }

    /// Whether a data segment carries PSH. RFC 9293 §3.9.1 leaves PSH to the sender ("the
    /// sending TCP ... sets the PUSH flag in the last TCP segment" of the data a push
    /// covers); netfold sets it where Linux does:
    /// - on the segment that ends what the application queued (Linux `tcp_push` marks the
    ///   last skb of each write), unless the send had MSG_MORE (no mark then);
    /// - on the segment that ends a record (MSG_EOR: the end of a write too);
    /// - on new data more than half the largest window the peer offered past the last
    ///   segment that had PSH (Linux `forced_push` in `tcp_sendmsg_locked` and `tcp_push`),
    ///   so that a long write still gets pushes while it streams;
    /// - on new data that ends an even number of segments since the output pass began
    ///   (Linux's `tcp_write_xmit` sends them as GSO packets of `tcp_tso_segs` segments, two
    ///   at the rates its scripts run at, and `__tcp_transmit_skb` sets PSH on every packet
    ///   of more than one segment): a burst that cwnd, the peer's window or the write's end
    ///   stops after an even number of segments has PSH on its last one, and without GSO
    ///   every second segment has it; a burst of seven after a recovery does not end with
    ///   it, nor does a single segment that RFC 3042 limited transmit or fast recovery lets
    ///   out (Linux's fast_recovery, limited_transmit and nagle scripts,
    ///   `psh-limited-transmit-none.pkt`, `psh-odd-burst-none.pkt`,
    ///   `psh-even-burst-uncut.pkt`);
    /// - on a window probe carrying data, also one that lets a MSG_MORE tail out after the
    ///   probe timer (Linux `tcp_write_wakeup` sets it).
    ///
    /// Retransmissions of segments that had none get none (Linux's `tcp_fragment` keeps PSH
    /// on the tail piece only).
    fn push(&self, p: &Plan) -> bool {
        if p.len == 0 {
            return false;
        }
        if p.kind == Kind::Probe {
            // Linux `tcp_write_wakeup` marks every probe that carries data, a MSG_MORE tail
            // that the probe timer lets out too.
            return true;
        }
        let end = p.seq.wrapping_add(p.len);
        let fin_seq = self.fin_seq();
        if end == fin_seq {
            return !self.snd.more_tail() || self.snd.fin_queued();
        }
        if self.snd.has_record_ends() && self.snd.record_ends_at(end) {
            return true;
        }
        match p.kind {
            Kind::Data if !seq::lt(p.seq, self.snd.max()) => {
                if self.snd.max_wnd() > 0 {
                    // Linux tests `forced_push` when a write's skb fills: skbs of the size
                    // goal follow the last push, and the first whose end is more than half
                    // the max window past it gets PSH.
                    let goal = self.size_goal();
                    let k = self.snd.max_wnd() / 2 / goal + 1;
                    let boundary = self.snd.pushed().wrapping_add(k.saturating_mul(goal));
                    if seq::ge(end, boundary) {
                        return true;
                    }
                }
                // Linux sends the pass's new data as GSO packets of `tcp_tso_segs` segments
                // from SND.NXT (`tcp_write_xmit`; `tcp_min_tso_segs`, 2, at the rates its
                // scripts run at) and `__tcp_transmit_skb` sets PSH on every packet of more
                // than one segment: a plan that ends an even count since the pass began ends
                // such a packet; an odd one ends in a packet of one, without PSH.
                let start = if seq::lt(self.snd.burst_start(), p.seq) {
                    self.snd.burst_start()
                } else {
                    p.seq
                };
                seq::dist(start, end)
                    .div_ceil(self.seg_mss())
                    .is_multiple_of(2)
            }
            _ => false,
        }
    }

    /// The right edge of what may be sent now: SND.UNA plus min(cwnd (with RFC 3042 limited
    /// transmit), the peer's window). Both limits are byte counts from SND.UNA, then one
    /// edge: comparing two edges in sequence space would misorder them once cwnd exceeds
    /// 2^31.
    pub(super) fn send_edge(&self) -> u32 {
        let lt = if self.snd.recovery().is_none() && self.snd.dupacks() < 3 {
            self.snd.dupacks() * self.snd.mss()
        } else {
            0
        };
        let wnd_edge = self.snd.una().wrapping_add(self.snd.wnd());
        let allowed = self
            .snd
            .cc()
            .cwnd()
            .saturating_add(lt)
            .min(seq::dist(self.snd.una(), wnd_edge));
        self.snd.una().wrapping_add(allowed)
    }

    /// The flags, options and window of a SYN or SYN-ACK (cold: once per connection; out of
    /// line so the data path's `build_repr` stays dense in the instruction cache).
    #[cold]
    #[inline(never)]
    fn syn_header(&self, now: Instant) -> (u8, TcpOptions, u16) {
        let mut flags = TcpFlags::SYN;
        let mut options = TcpOptions::default();
        if self.state == State::SynReceived {
            flags |= TcpFlags::ACK;
        }
        // Options go on the wire in Linux's layout (`TcpOptions::emit`, after Linux
        // `tcp_options_write`): `mss, sackOK,TS val ecr, nop,wscale` — MSS(4), then
        // SACK_PERM(2)+TS(10) packed in 12 bytes, then NOP+WS(3) — or without
        // timestamps `mss, nop,nop,sackOK, nop,wscale`. The order is free (RFC 9293
        // §3.2), Linux's is the one TCP scripts and tools expect
        // (tests/tcp_peer.rs `syn_and_syn_ack_options_use_linux_layout`).
        // RFC 7323 §2.2: SYN windows are unscaled.
        let window = (self.rcv.buf().min(0xffff)) as u16;
        options.mss = Some(self.config.mss);
        let passive = self.state == State::SynReceived;
        // Options in a SYN-ACK only if the peer offered them (RFC 7323 §1.3, RFC 2018 §2).
        if self.config.window_scaling && (!passive || self.ws_ok) {
            options.window_scale = Some(self.rcv.wscale());
        }
        if self.config.sack && (!passive || self.sack_ok) {
            options.sack_permitted = true;
        }
        // RFC 3168 §6.1.1: an ECN-setup SYN carries ECE and CWR (only when configured
        // to ask, and not on retransmissions: a SYN may be dropped for its ECN bits,
        // §6.1.1.1, Linux `tcp_ecn_clear_syn`); the SYN-ACK agreeing carries ECE.
        if passive {
            if self.ecn.ok {
                flags |= TcpFlags::ECE;
            }
        } else if self.config.ecn == EcnMode::On && self.snd.max() == self.snd.iss() {
            flags |= TcpFlags::ECE | TcpFlags::CWR;
        }
        if self.config.timestamps && (!passive || self.ts.enabled) {
            options.timestamps = Some(Timestamps {
                tsval: self.ts_now(now),
                tsecr: if passive { self.ts.recent } else { 0 },
            });
        }
        // RFC 7413 §4.2.1: the cookie a Fast Open client asked for (or the right one for an
        // invalid cookie, as Linux `tcp_try_fastopen` answers); §4.1.3: our cookie or cookie
        // request. On the first transmission only: Linux retransmits a SYN or SYN-ACK
        // without it (`tcp_rtx_synack` passes no cookie; the client's Fast Open request is
        // gone once the first SYN left).
        if self.snd.max() == self.snd.iss() {
            options.fast_open = self.fastopen.syn_option;
        }
        (flags, options, window)
    }

    /// `smss`: `seg_mss()` as the segment was built.
    fn commit(&mut self, p: &Plan, repr: &Sent, mut smss: u32, now: Instant, stats: &mut Stats) {
        // A GSO super-segment counts as the segments it becomes on the wire (Linux
        // `tcp_skb_pcount`, as its segs_out does).
        let segs = p.len.div_ceil(smss).max(1);
        stats.segments_out += u64::from(segs);
        self.counters.segs_out = self.counters.segs_out.wrapping_add(segs);
        if p.len > 0 {
            self.counters.data_segs_out = self.counters.data_segs_out.wrapping_add(segs);
        }
        stats.sack_blocks_out += u64::from(repr.sack_count);
        if repr.sack_count > 0 && !repr.flags.syn() {
            // RFC 2883 §4: "each duplicate contiguous sequence of data received is reported
            // in at most one D-SACK block".
            self.rcv.on_sack_sent();
            // The D-SACK block is spent: the segments after this one carry fewer options.
            smss = self.seg_mss();
        }
        if p.kind == Kind::SnapAck {
            self.commit_snap_ack(repr);
            return;
        }
        if repr.flags.ack() {
            self.timers.delack = None;
            let edge = if !repr.flags.syn() {
                self.rcv_window().1
            } else {
                self.rcv.nxt().wrapping_add(u32::from(repr.window))
            };
            self.rcv.on_ack_sent(edge);
        }
        let end = p
            .seq
            .wrapping_add(p.len)
            .wrapping_add(u32::from(p.fin) + u32::from(p.kind == Kind::Syn));
        if repr.flags.cwr() && !repr.flags.syn() {
            self.ecn.cwr_due = false;
        }
        if p.fin && !seq::lt(p.seq.wrapping_add(p.len), self.snd.max()) {
            self.snd.on_fin_sent(p.len == 0);
        }
        if p.len > 0 && p.kind != Kind::Syn && !seq::lt(p.seq, self.snd.max()) {
            if repr.flags.psh() {
                self.snd.on_pushed(end);
            }
            // Linux `tcp_minshall_update`: a segment shorter than the MSS (the last piece of
            // a GSO plan) is the new "last small segment".
            if !p.len.is_multiple_of(smss) {
                self.snd.on_short_sent(p.seq.wrapping_add(p.len));
            }
        }
        match p.kind {
            Kind::Syn => self.commit_syn(repr, end, now, stats),
            Kind::Tlp => self.commit_tlp(p, repr, end, now, stats),
            Kind::Data | Kind::Hole => {
                if p.seq == self.snd.una() {
                    self.snd.on_head_resent();
                }
                self.snd.on_data_sent_at(now);
                self.rcv.on_data_sent(now);
                let rexmit = seq::lt(p.seq, self.snd.max());
                self.rack_record_send(p, end, repr, smss, now);
                if rexmit {
                    self.snd.stop_rtt_timing();
                    self.counters.total_retrans = self.counters.total_retrans.wrapping_add(segs);
                    self.counters.bytes_retrans += u64::from(p.len);
                    // A RACK-marked range resent outside fast recovery (see `plan_data`) was
                    // found lost by ACKs, not by the timer.
                    if self.snd.recovery().is_some() || p.kind == Kind::Hole {
                        stats.retransmits_fast += 1;
                    } else {
                        stats.retransmits_rto += 1;
                    }
                } else if !self.ts.enabled {
                    self.snd.on_timed_send(end, now);
                }
                self.snd
                    .on_recovery_sent(p.len, end, p.kind != Kind::Data, p.kind == Kind::Hole);
                if p.kind != Kind::Data {
                    self.snd.on_resent(end);
                } else {
                    self.snd.on_sent(end);
                }
                if self.timers.rto.is_none() {
                    self.timers.rto = Some(now + self.snd.rtt().rto());
                }
                self.timers.persist = None;
                self.timers.persist_backoff = 0;
                if p.kind == Kind::Data && !rexmit {
                    self.arm_pto_sized(now, smss);
                }
            }
            Kind::Probe | Kind::KeepAlive => self.commit_probe(p, end, stats),
            Kind::Ack | Kind::SnapAck => {}
        }
    }

    /// `commit` for a SYN or SYN-ACK (cold: out of the data path's way).
    #[cold]
    #[inline(never)]
    fn commit_syn(&mut self, repr: &Sent, end: u32, now: Instant, stats: &mut Stats) {
        self.ecn.syn_asked = !repr.flags.ack() && repr.flags.ece() && repr.flags.cwr();
        if self.snd.max() == self.snd.iss() && self.state == State::SynSent {
            self.ts.syn_tsval = repr.tsval;
        }
        if self.snd.max() == self.snd.iss() {
            // The SYN is timed on its own, not with the data a Fast Open SYN carries: an
            // ACK of the SYN alone (or of part of the data) is a round-trip sample too
            // (Linux keeps the SYN and its data as two skbs, `tcp_send_syn_data`).
            if !self.ts.enabled || self.state == State::SynSent {
                self.snd.on_syn_timed(now);
            }
        } else {
            self.snd.stop_rtt_timing();
            stats.retransmits_rto += 1;
        }
        self.snd.on_sent(end);
        self.timers.rto.get_or_insert(now + self.snd.rtt().rto());
    }

    /// `commit` for a tail loss probe (cold).
    #[cold]
    #[inline(never)]
    fn commit_tlp(&mut self, p: &Plan, repr: &Sent, end: u32, now: Instant, stats: &mut Stats) {
        self.snd.cancel_tlp();
        let rxt = seq::lt(p.seq, self.snd.max());
        stats.tlp_probes += 1;
        self.rcv.on_data_sent(now);
        if !rxt {
            self.snd.on_data_sent_at(now);
        }
        self.rack_record_send(p, end, repr, self.seg_mss(), now);
        if rxt {
            self.snd.on_probe_resent(end);
        } else {
            self.snd.on_sent(end);
        }
        // RFC 8985 §7.3: "TLP.end_seq = SND.NXT" after the probe, and TLP.is_retrans.
        let probe = if rxt {
            Probe::Retransmit {
                seq: p.seq,
                len: p.len,
            }
        } else {
            Probe::NewData {
                seq: p.seq,
                len: p.len,
            }
        };
        self.snd.on_tlp_sent(probe);
        self.snd.stop_rtt_timing();
        // §7.3: after the probe, the RTO guards the tail.
        self.timers.rto = Some(now + self.snd.rtt().rto());
    }

    /// `commit` for a window probe or a keepalive probe (cold).
    #[cold]
    #[inline(never)]
    fn commit_probe(&mut self, p: &Plan, end: u32, stats: &mut Stats) {
        if p.kind == Kind::KeepAlive {
            self.keepalive_due = false;
            stats.keepalive_probes += 1;
            return;
        }
        self.persist_probe_due = false;
        stats.persist_probes += 1;
        self.snd.on_resent(end);
    }

    /// `commit` for an ACK from a snapshot (GRO-merged arrivals; out of line, not cold).
    #[inline(never)]
    fn commit_snap_ack(&mut self, repr: &Sent) {
        self.ack_snaps.copy_within(1..self.n_snaps, 0);
        self.n_snaps -= 1;
        self.rcv.on_snap_ack_sent(repr.ack, repr.window);
        if self.n_snaps == 0 && repr.ack == self.rcv.nxt() {
            // The last snapshot acknowledges everything received, with the current window
            // and SACK/D-SACK blocks (built now): it is the ACK that `ack_now` or the
            // delayed-ACK timer still owe. Another one with the same number and window would
            // be a duplicate ACK (RFC 5681 §2) where §4.2 asks for one (e.g. a segment that
            // fills the hole and repeats received bytes: D-SACK noted, then the gap-fill
            // snapshot).
            self.rcv.settle_acks();
            self.timers.delack = None;
        }
    }

    /// Bytes in the network for SACK recovery: SND.MAX - SND.UNA, less what is SACKed, less
    /// what RACK deems lost and has not been retransmitted yet.
    pub(super) fn pipe(&self) -> u32 {
        self.flight()
            .saturating_sub(self.snd.scoreboard().sacked_bytes())
            .saturating_sub(self.snd.rack().lost_bytes())
    }

    /// The first range RACK marks lost and not yet retransmitted, trimmed to unSACKed data
    /// (the scoreboard is authoritative for what the peer holds).
    fn next_lost(&self) -> Option<(u32, u32)> {
        let mut from = self.snd.una();
        while let Some((s, e)) = self.snd.rack().next_lost(from) {
            let s = match self.snd.scoreboard().sacked_end(s) {
                Some(se) => se,
                None => s,
            };
            if seq::lt(s, e) && self.snd.scoreboard().sacked_end(s).is_none() {
                let e = self
                    .snd
                    .scoreboard()
                    .next_sacked_start(s)
                    .map_or(e, |n| seq::min(n, e));
                return Some((s, e));
            }
            from = seq::max(e, from.wrapping_add(1));
        }
        None
    }

    /// RFC 8985 §6.1: "Upon transmitting a new segment or retransmitting an old segment,
    /// record the time in Segment.xmit_ts and set Segment.lost to FALSE. Upon retransmitting
    /// a segment, set Segment.retransmitted to TRUE." (SACK connections only: RACK needs
    /// SACK, RFC 8985 §4.) Retransmitted segments also count toward D-SACK undo.
    fn rack_record_send(&mut self, p: &Plan, end: u32, repr: &Sent, smss: u32, now: Instant) {
        if !self.sack_ok {
            return;
        }
        let rxt_end = seq::min(end, self.snd.max());
        if seq::lt(p.seq, rxt_end) {
            let segs = seq::dist(p.seq, rxt_end).div_ceil(smss.max(1));
            self.snd.on_dsack_retransmit(segs.max(1));
        }
        let tsval = repr.tsval;
        self.snd.on_rack_segment_size(smss);
        self.snd.on_rack_sent(p.seq, end, now, tsval);
    }

    /// Decides the next segment, if any, without changing state.
    fn plan(&mut self, now: Instant) -> Option<Plan> {
        let _ = now;
        if matches!(
            self.state,
            State::Closed | State::Listen | State::SynSent | State::SynReceived | State::TimeWait
        ) && !self.fastopen_sends()
        {
            return self.plan_unsynchronized();
        }
        if self.n_snaps > 0 {
            return Some(Plan {
                kind: Kind::SnapAck,
                seq: self.ack_seq(),
                len: 0,
                fin: false,
            });
        }
        if self.snd.tlp_due() || self.persist_probe_due {
            if let Some(p) = self.plan_probe() {
                return Some(p);
            }
        }
        if let Some(p) = self.plan_data() {
            return Some(p);
        }
        if self.keepalive_due {
            return Some(Plan {
                kind: Kind::KeepAlive,
                seq: self.snd.una(),
                len: 0,
                fin: false,
            });
        }
        if self.rcv.ack_now() || self.window_update_needed() {
            return Some(self.ack_plan());
        }
        None
    }

    /// `plan` outside the synchronized states (RFC 9293 §3.3.2): the SYN or SYN-ACK, the ACK
    /// of a handshake repeat, TIME-WAIT's ACKs (cold: out of the data path's way).
    #[cold]
    #[inline(never)]
    fn plan_unsynchronized(&self) -> Option<Plan> {
        match self.state {
            State::Closed | State::Listen => None,
            State::SynSent | State::SynReceived => {
                if self.snd.nxt() == self.snd.iss() {
                    // RFC 7413 §4.1.3: a Fast Open SYN carries data the first time only; a
                    // retransmitted SYN goes without (Linux), the data after the handshake.
                    let len = if self.state == State::SynSent && self.snd.max() == self.snd.iss() {
                        self.fastopen.syn_data_len
                    } else {
                        0
                    };
                    return Some(Plan {
                        kind: Kind::Syn,
                        seq: self.snd.iss(),
                        len,
                        fin: false,
                    });
                }
                if self.state == State::SynSent || !self.rcv.ack_now() {
                    return None;
                }
                Some(self.ack_plan())
            }
            State::TimeWait => self.rcv.ack_now().then(|| self.ack_plan()),
            _ => None,
        }
    }

    /// `plan` when a tail loss probe or a window probe is due (cold).
    #[cold]
    #[inline(never)]
    fn plan_probe(&mut self) -> Option<Plan> {
        if self.snd.tlp_due() {
            if self.tlp_allowed() {
                if let Some(p) = self.plan_tlp() {
                    return Some(p);
                }
            }
            self.snd.cancel_tlp();
        }
        if self.persist_probe_due {
            let fin_seq = self.fin_seq();
            if seq::lt(self.snd.una(), fin_seq) && self.snd.wnd() == 0 {
                // A zero window gets a probe without data at SND.UNA - 1, which the peer must
                // answer with an ACK carrying its window (RFC 9293 §3.8.4 / §3.10.7.4), as
                // Linux `tcp_write_wakeup` → `tcp_xmit_probe_skb`. RFC 1122 §4.2.2.17 also
                // allows one octet of data; the octet costs a retransmission later when the
                // probe is dropped by the full receiver, and TCP scripts expect Linux's form.
                return Some(Plan {
                    kind: Kind::Probe,
                    seq: self.snd.una(),
                    len: 0,
                    fin: false,
                });
            }
            if seq::lt(self.snd.una(), fin_seq) {
                // A window too small for the sender SWS rule gets what fits (the
                // §3.8.6.2.1 override timeout), as Linux sends the part that fits.
                let len = self
                    .snd
                    .wnd()
                    .min(self.seg_mss())
                    .min(seq::dist(self.snd.una(), fin_seq))
                    .max(1);
                return Some(Plan {
                    kind: Kind::Probe,
                    seq: self.snd.una(),
                    len,
                    fin: false,
                });
            }
            self.persist_probe_due = false;
            if self.snd.fin_queued() && self.snd.una() == fin_seq {
                return Some(Plan {
                    kind: Kind::Probe,
                    seq: fin_seq,
                    len: 0,
                    fin: true,
                });
            }
        }
        None
    }

    /// RFC 5681 §4.1: after an idle period longer than the RTO, cwnd restarts from
    /// min(IW, cwnd) — the ACK clock is gone and a full-window burst would hit the network.
    fn restart_after_idle(&mut self, now: Instant) {
        if self.snd.una() == self.snd.max()
            && self.is_synchronized()
            && seq::lt(self.snd.nxt(), self.fin_seq())
            && now.saturating_since(self.snd.last_data_tx()) > self.snd.rtt().rto()
        {
            let iw = super::cc::initial_window(self.snd.mss());
            if self.snd.cc().cwnd() > iw {
                self.snd.set_cwnd(iw);
            }
            // Only once per idle period.
            self.snd.on_data_sent_at(now);
        }
    }

    /// Nothing in flight, data waiting, but the peer's window (zero, or too small to satisfy
    /// sender SWS avoidance) stops us: the persist timer must run or nothing ever moves.
    fn arm_persist_if_stuck(&mut self, now: Instant) {
        let can_send = self.state.may_send();
        if can_send
            && self.timers.persist.is_none()
            && self.timers.rto.is_none()
            && self.snd.una() == self.snd.max()
            && seq::lt(self.snd.nxt(), self.fin_seq())
        {
            self.timers.persist = Some(now + self.snd.rtt().rto());
        }
    }

    /// RFC 8985 §7.3: "the sender MUST check whether both of the following conditions are met
    /// before sending a loss probe: 1. (TLP.end_seq is None) ... 2. The sender has obtained
    /// an RTT measurement since the last loss probe transmission or the start of the
    /// connection". If not, "the sender MUST skip sending a loss probe and MUST proceed to
    /// re-arm the RTO timer" (it is still armed). Connections without SACK keep probing as
    /// before (they have no RTT tracking per probe).
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    fn tlp_allowed(&self) -> bool {
        if !self.sack_ok {
            return true;
        }
        let c = ProbeCtx {
            snd_una: self.snd.una(),
            snd_nxt: self.snd.max(),
            unsent: seq::dist(self.snd.max(), self.fin_seq()),
            wnd_room: seq::dist(self.snd.max(), self.snd.una().wrapping_add(self.snd.wnd())),
            smss: self.seg_mss(),
        };
        self.snd.tlp().on_pto(c) != Probe::None
    }

    /// RFC 8985 §7.3: one new segment if the peer's window allows, else the last segment sent
    /// again (with the FIN if that was last).
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    fn plan_tlp(&self) -> Option<Plan> {
        let fin_seq = self.fin_seq();
        let smss = self.seg_mss();
        let wnd_edge = self.snd.una().wrapping_add(self.snd.wnd());
        if self.snd.nxt() == self.snd.max() && seq::lt(self.snd.nxt(), fin_seq) {
            let room = seq::dist(self.snd.nxt(), wnd_edge);
            if room > 0 {
                let len = seq::dist(self.snd.nxt(), fin_seq).min(smss).min(room);
                let fin = self.snd.fin_queued() && self.snd.nxt().wrapping_add(len) == fin_seq;
                return Some(Plan {
                    kind: Kind::Tlp,
                    seq: self.snd.nxt(),
                    len,
                    fin,
                });
            }
        }
        if self.snd.una() == self.snd.max() {
            return None;
        }
        let fin_sent = self.snd.fin_queued() && seq::gt(self.snd.max(), fin_seq);
        if fin_sent && self.snd.fin_alone() {
            // The last segment sent was the FIN alone: the probe is that FIN (Linux
            // `tcp_send_loss_probe` resends the last skb of the retransmit queue).
            return Some(Plan {
                kind: Kind::Tlp,
                seq: fin_seq,
                len: 0,
                fin: true,
            });
        }
        let data_end = seq::min(self.snd.max(), fin_seq);
        let len = seq::dist(self.snd.una(), data_end).min(smss);
        Some(Plan {
            kind: Kind::Tlp,
            seq: data_end.wrapping_sub(len),
            len,
            fin: fin_sent,
        })
    }

    fn ack_plan(&self) -> Plan {
        Plan {
            kind: Kind::Ack,
            seq: self.ack_seq(),
            len: 0,
            fin: false,
        }
    }

    /// Sequence number for a segment without data: SND.NXT may have been rewound by an RTO
    /// below what the peer already holds, and a zero-window probe may have gone past the
    /// window; either would make the ACK unacceptable to the peer (RFC 9293 §3.10.7.4) and the
    /// information in it lost. Use SND.MAX, clamped to the window's right edge (as Linux
    /// `tcp_acceptable_seq`).
    fn ack_seq(&self) -> u32 {
        let edge = self.snd.una().wrapping_add(self.snd.wnd());
        seq::max(self.snd.una(), seq::min(self.snd.max(), edge))
    }

    /// A segment starting at `s`, at most `max` bytes, not crossing SACKed data, with FIN
    /// if it reaches the end of the queued data after close.
    fn segment_at(&self, kind: Kind, s: u32, max: u32) -> Option<Plan> {
        self.segment_upto(kind, s, max, self.seg_mss())
    }

    /// `segment_at` with a size cap of `cap` bytes (a GSO super-segment when above the MSS).
    fn segment_upto(&self, kind: Kind, s: u32, max: u32, cap: u32) -> Option<Plan> {
        let fin_seq = self.fin_seq();
        let mut len = seq::dist(s, fin_seq).min(max).min(cap);
        if let Some(n) = self.snd.scoreboard().next_sacked_start(s) {
            len = len.min(seq::dist(s, n));
        }
        if self.snd.has_record_ends() {
            // MSG_EOR: no segment crosses a record's end (Linux `tcp_skb_can_collapse_to`
            // keeps the next write out of the record's skb).
            if let Some(e) = self.snd.record_end_after(s) {
                len = len.min(seq::dist(s, e));
            }
        }
        let fin = self.snd.fin_queued() && s.wrapping_add(len) == fin_seq;
        if len == 0 && !fin {
            return None;
        }
        Some(Plan {
            kind,
            seq: s,
            len,
            fin,
        })
    }

    /// `plan_data` in fast recovery (RFC 6675 / RFC 6582): `Some(decision)` ends planning
    /// with it, `None` goes on to normal transmission (NewReno with its inflated cwnd). Cold:
    /// out of the data path's way.
    #[cold]
    #[inline(never)]
    fn plan_recovery(
        &mut self,
        rec: super::conn::Recovery,
        cwnd: u32,
        smss: u32,
        data_end: u32,
        wnd_edge: u32,
    ) -> Option<Option<Plan>> {
        let fin_seq = self.fin_seq();
        if rec.rxt_una {
            // Entry or partial ACK: retransmit the first unacknowledged segment.
            if let Some(p) = self.segment_at(Kind::Hole, self.snd.una(), smss) {
                return Some(Some(p));
            }
        }
        if rec.sack {
            // RFC 6675 §5 step (C): send while cwnd - pipe >= 1 SMSS, with pipe counted as
            // Linux `tcp_packets_in_flight` does under RACK: data sent and neither
            // acknowledged (cumulatively or selectively) nor deemed lost and still
            // waiting for its retransmission.
            if cwnd.saturating_sub(self.pipe()) < smss.min(cwnd) {
                return Some(None);
            }
            // NextSeg rule (1), with RACK's marks for "lost" (RFC 8985 §6.2: a segment is
            // lost once a segment sent after it was delivered and its reordering window
            // passed; that includes a retransmission lost again).
            if let Some((s, e)) = self.next_lost() {
                return Some(self.segment_at(Kind::Hole, s, seq::dist(s, e)));
            }
            // Rule (2): new data within the peer's window. (Rules (3) and (4), the
            // retransmission of data not deemed lost, are left to RACK's reordering
            // timer and the tail loss probe, RFC 8985 §3.)
            if seq::lt(self.snd.nxt(), data_end) {
                let room = seq::dist(self.snd.nxt(), wnd_edge);
                if room > 0 || self.snd.nxt() == fin_seq {
                    if let Some(p) = self.segment_at(Kind::Data, self.snd.nxt(), room) {
                        return Some(Some(p));
                    }
                }
            }
            return Some(None);
        }
        None
    }

    fn plan_data(&mut self) -> Option<Plan> {
        if !self.state.may_send() && !self.fastopen_sends() {
            return None;
        }
        if self.snd.wnd() == 0 && self.snd.una() == self.snd.nxt() && self.timers.persist.is_some()
        {
            // Zero window: only probes go out.
            return None;
        }
        let fin_seq = self.fin_seq();
        let data_end = if self.snd.fin_queued() {
            fin_seq.wrapping_add(1)
        } else {
            fin_seq
        };
        // Congestion accounting is in units of the negotiated MSS (RFC 5681 SMSS); segments
        // are cut to `seg_mss()` (MSS minus options).
        let smss = self.seg_mss();
        let cwnd = self.snd.cc().cwnd();
        let wnd_edge = self.snd.una().wrapping_add(self.snd.wnd());

        if let Some(rec) = self.snd.recovery() {
            if let Some(decided) = self.plan_recovery(rec, cwnd, smss, data_end, wnd_edge) {
                return decided;
            }
        }
        if self.sack_ok
            && self.snd.rack().lost_bytes() > 0
            && cwnd.saturating_sub(self.pipe()) >= smss.min(cwnd)
        {
            // (`next_lost` has nothing to find without lost bytes; tested first, it spares
            // every segment the scoreboard's pipe sum.)
            // Outside fast recovery RACK may still hold lost ranges below SND.NXT: a resent
            // segment of RTO recovery (go-back-N from SND.UNA) found lost again, or a range
            // marked during a recovery that ended (SND.UNA reached its RecoveryPoint) before
            // it was retransmitted. They go before new data instead of waiting for the RTO.
            if let Some((s, e)) = self
                .next_lost()
                .filter(|&(s, _)| seq::lt(s, self.snd.nxt()))
            {
                return self.segment_at(Kind::Hole, s, seq::dist(s, e));
            }
        }

        if self.snd.rto_head_due() {
            // RFC 2018 §8: "The data sender MUST retransmit the segment at the left edge of
            // the window after a retransmit timeout, whether or not the SACKed bit is on for
            // that segment" (Linux `tcp_retransmit_timer` resends the head of the retransmit
            // queue). A receiver that reneged needs it; one that holds it answers with the
            // cumulative ACK that was lost. Skipping it, as below, deadlocked a connection
            // whose whole flight was SACKed, whose cumulative ACK was lost and whose
            // remaining data Nagle held back: nothing was sent until the RTOs ran out. A flag
            // of the RTO, not a change to the skip loop below: that loop also serves the other
            // rewinds (persist, zero window) and the window checks; never skipping SND.UNA
            // there made a seeded exchange time out (`header_prediction_changes_nothing_on_the_
            // wire`, seed 638), while this passed 3,000 seeds.
            let end = seq::min(self.snd.max(), fin_seq);
            let len = seq::dist(self.snd.una(), end).min(smss);
            if len > 0 {
                return Some(Plan {
                    kind: Kind::Data,
                    seq: self.snd.una(),
                    len,
                    fin: false,
                });
            }
        }
        // Normal transmission (and NewReno recovery with its inflated cwnd).
        // Skip data the peer already SACKed (after an RTO rewind).
        while seq::lt(self.snd.nxt(), self.snd.max()) {
            match self.snd.scoreboard().sacked_end(self.snd.nxt()) {
                Some(e) => self.snd.skip_sacked(e),
                None => break,
            }
        }
        if !seq::lt(self.snd.nxt(), data_end) {
            return None;
        }
        // RFC 3042 limited transmit is in `send_edge`: one extra SMSS per early duplicate ACK.
        let edge = self.send_edge();
        let room = seq::dist(self.snd.nxt(), edge);
        if self.snd.nxt() == fin_seq {
            // A lone FIN is not held back by the windows.
            return self.segment_at(Kind::Data, fin_seq, 0);
        }
        // GSO: one plan may span several segments when nothing is being recovered; it is
        // trimmed to whole segments so the cut never leaves a short piece mid-stream (the tail
        // goes as its own segment, under Nagle/SWS below).
        let gso_cap = if self.snd.recovery().is_none() && self.gso_segs > 1 {
            let cap = (smss * self.gso_segs).min(65535 - 120);
            cap - cap % smss
        } else {
            smss
        };
        if seq::lt(self.snd.nxt(), self.snd.max())
            && room < smss
            && room < seq::dist(self.snd.nxt(), self.snd.max())
        {
            // A resend cut short by cwnd alone (cwnd counts MSS, the segment carries MSS -
            // options: 1460 vs 1448) would leave a runt of a few bytes after each full
            // segment of the RTO's go-back-N; wait for the window instead (Linux counts
            // cwnd in whole segments).
            return None;
        }
        let mut p = self.segment_upto(Kind::Data, self.snd.nxt(), room, gso_cap)?;
        if p.len > smss && p.len % smss != 0 {
            p.len -= p.len % smss;
            p.fin = false;
        }
        if p.len == 0 {
            return None;
        }
        let rexmit = seq::lt(p.seq, self.snd.max());
        if !rexmit && p.len < smss && !p.fin {
            let remaining = seq::dist(p.seq, fin_seq);
            // A Fast Open connection's SYN-ACK is not data in flight (Linux keeps it off the
            // child's queue): Nagle lets its first short segment go.
            // Nagle as Linux applies it (`tcp_nagle_check` with Minshall's variant,
            // `tcp_minshall_check`): a short segment waits only while an earlier short
            // segment is unacknowledged, not behind any data in flight; full segments ahead
            // of it do not delay it (RFC 9293 §3.7.4 allows this refinement: "a TCP SHOULD
            // implement the Nagle algorithm"; Minshall's keeps its goal, at most one small
            // segment in flight).
            let small_in_flight = self.snd.short_in_flight();
            let idle = !small_in_flight
                || (self.fastopen_sends() && self.snd.nxt() == self.snd.iss().wrapping_add(1));
            // TCP_CORK and MSG_MORE hold every short segment but the one with the FIN (Linux
            // `tcp_nagle_check` with `TCP_NAGLE_CORK`; a FIN passes `tcp_nagle_test`).
            let corked = self.config.cork || self.snd.more();
            let push_ok = self.snd.fin_queued()
                || self.snd.push_now()
                || (!corked && (self.config.nodelay || idle));
            // A record's end (MSG_EOR) is the end of what that write queued.
            let record_end =
                self.snd.has_record_ends() && self.snd.record_ends_at(p.seq.wrapping_add(p.len));
            // RFC 9293 §3.8.6.2.1 sender SWS avoidance and §3.7.4 Nagle: a short segment goes
            // only if it is all we have and nothing is unacknowledged (or Nagle is off), or it
            // fills at least half the largest window the peer offered.
            // A record's end with more queued after it is not the queue's last piece, and
            // Linux tests Nagle and TCP_CORK on the last skb only (`tcp_write_xmit` passes
            // TCP_NAGLE_PUSH for the others): it goes at once.
            let all = if record_end && p.len < remaining {
                true
            } else {
                p.len == remaining && (push_ok || self.snd.push_now())
            };
            let half = p.len >= self.snd.max_wnd() / 2 && push_ok;
            if !(all || half) {
                return None;
            }
        }
        Some(p)
    }
}
