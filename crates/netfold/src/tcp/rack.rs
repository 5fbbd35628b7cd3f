//! RACK-TLP loss detection (RFC 8985): time-based loss inference from ACKs ([`Rack`]) and the
//! tail loss probe ([`Tlp`]), self-contained so the TCB only feeds it events.
//!
//! WIRING (done; the plan below is what the TCB follows, with these differences): the TSecr
//! condition of step 2 is not applied (see `Conn::rack_on_ack`), RACK's RTT samples come from
//! [`Rack::karn_sample`], the PTO keeps `Conn::arm_pto` (Linux `tcp_schedule_loss_probe`),
//! `RxtTracker` is gone (deleted as unused), and RACK-lost ranges are resent outside fast recovery too (`plan_data`).
//!
//! INTEGRATION PLAN (for the restructured TCB; D-SACK parts are in `dsack.rs`):
//! - State: the send part owns `rack: Rack` (`Rack::new(capacity_for(send_buffer, mss))`),
//!   `tlp: Tlp` (`Tlp::new(TLP_MAX_ACK_DELAY)`), `dsack_tx: DsackSender`; the receive part
//!   owns `dsack_rx: DsackReport`; the timer part owns `reo_at: Option<Instant>`.
//! - Send/retransmit (output `commit`, every data segment incl. probes and a FIN, not a SYN):
//!   `rack.on_send(seq, end, now, tsval)`; a retransmission also calls
//!   `dsack_tx.on_retransmit(segs)`; a probe calls `tlp.on_probe_sent(probe, snd_nxt)`.
//! - ACK (input `process_ack`, after the window/acceptability checks): `split_dsack(ack,
//!   blocks)`; the D-SACK goes through `dsack_tx.on_dsack` (0 = dubious: drop it), the rest
//!   to the scoreboard as today; then `rack.on_ack(&Ack {..})` (steps 1-4; pass the RFC 6298
//!   sample just taken), `tlp.on_rtt_sample()` when one was taken, `tlp.on_ack(..)`
//!   (RepairedLoss -> `cc.on_loss` as a fast recovery entered and left at once), then
//!   `rack.detect_loss(..)` (step 5): any newly lost range enters recovery (replacing the
//!   DupThresh/`is_lost` entry and RFC 5827 early retransmit, which RACK's reo_wnd = 0 with
//!   at least DupThresh SACKed segments subsumes); `reo_deadline` arms `reo_at`. Then
//!   `dsack_tx.take_undo(cwnd, ssthresh)` restores cwnd/ssthresh (and `rack.on_undo()`).
//!   Leaving recovery calls `rack.on_recovery_exit()`; entering it `dsack_tx.start_episode`
//!   and `tlp.reset()`.
//! - NextSeg (output `plan_data` in SACK recovery): rule (1) becomes `rack.next_lost(from)`
//!   (trimmed to the scoreboard's holes, as `segment_at` does); pipe = unSACKed flight minus
//!   `rack.lost_bytes()` plus retransmitted bytes. `RxtTracker` (lost-retransmission
//!   detection) is deleted: RACK marks a lost retransmission like any segment
//!   (`LossReport::lost_retransmission` -> one more cwnd reduction, RFC 8985 §9.3).
//! - Timers: `reo_at` expiry -> `rack.on_reorder_timeout(..)` (same as detect_loss); PTO
//!   arm after new data / an ACK advancing SND.UNA when `Tlp::may_schedule` ->
//!   `pto_at = tlp.pto_deadline(..)` (replaces `arm_pto`); PTO expiry -> `tlp.on_pto(ctx)`
//!   decides the probe (replaces `plan_tlp`; `Probe::None` re-arms the RTO); RTO expiry ->
//!   `rack.on_rto(now, snd_una, ..)` marks what to resend and `tlp.reset()` (today's
//!   go-back-N may stay at first; resending only `next_lost` ranges is RFC 8985 §6.3).
//! - Receiver: before storing a segment (and for a wholly old one), `dsack_rx.record(
//!   duplicate_block(seq, end, rcv_nxt, held))`; `output` builds SACK blocks with
//!   `dsack_rx.compose(sack_hist.blocks(), max)` and calls `on_ack_sent()`.

use super::sack::DUP_THRESH;
use super::seq;
use crate::time::{Duration, Instant};
use crate::wire::tcp::SackBlock;
use std::collections::VecDeque;

/// RFC 8985 §6.2 step 4: "Reset the window after 16 DSACK-free recoveries".
pub const REO_WND_PERSIST: u8 = 16;
/// Cap on RACK.reo_wnd_mult. The window is capped at SRTT anyway (step 4); Linux keeps the
/// multiplier (`reo_wnd_steps`) in a u8 capped at 0xFF, which we follow.
pub const REO_WND_MULT_MAX: u32 = 0xFF;
/// Linux's `tcp_max_reordering` default: the cap on `tcpi_reordering`.
pub const LINUX_MAX_REORDERING: u32 = 300;
/// Window of the RACK.min_RTT filter: Linux `tcp_min_rtt_wlen` default (300 s). RFC 8985
/// §6.2 step 1: "The sender SHOULD track a windowed min-filtered estimate of recent RTT
/// measurements that can adapt when migrating to significantly longer paths rather than
/// tracking a simple global minimum of all RTT measurements."
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(300);
/// Linux's `TCP_TIMEOUT_MIN_US` (2 ms): `tcp_rack_mark_lost` arms the reordering timer that
/// much after the RFC's `RACK_detect_loss()` timeout, so that a segment whose window ends
/// just then is judged after the timer, not on the edge (RFC 8985 §6.2 leaves the timer's
/// precision to the implementation; Linux's is what Linux's own tests time).
pub const REO_TIMER_SLACK: Duration = Duration::from_millis(2);

/// The reordering timer's delay for a `RACK_detect_loss()` timeout, as Linux's
/// `usecs_to_jiffies(timeout + TCP_TIMEOUT_MIN_US)` gives it at HZ=1000: the timeout plus
/// [`REO_TIMER_SLACK`], rounded up to a whole millisecond.
pub fn reo_timer_delay(timeout: Duration) -> Duration {
    let us = (timeout + REO_TIMER_SLACK).total_micros();
    Duration::from_millis(us.div_ceil(1000))
}

#[cfg(test)]
/// RFC 8985 §7.2: "when there is no SRTT estimate available, the PTO SHOULD be 1 second."
pub const PTO_WITHOUT_SRTT: Duration = Duration::from_secs(1);
/// TLP.max_ack_delay (the draft's WCDelAckT): the peer's worst-case delayed-ACK time. The RFC
/// leaves it to the implementation; Linux adds `TCP_RTO_MIN` (200 ms, also Linux's
/// `TCP_DELACK_MAX`) when one segment is in flight, covering Linux and BSD receivers.
pub const TLP_MAX_ACK_DELAY: Duration = Duration::from_millis(200);

/// The most records whose storage a recycled control block keeps (see `Rack::adopt_storage`).
pub const RECYCLED_RECORDS_MAX: usize = 64;

/// Record capacity for a connection: one record per segment the send buffer can hold, twice
/// over, because SACK edges and retransmission boundaries may split each segment's record
/// once. Records come from our own transmissions; the cap is what stops a peer's SACK
/// pattern from growing the table (on overflow the table is forgotten, see [`Rack`]).
pub fn capacity_for(send_buffer: usize, mss: u32) -> usize {
    send_buffer
        .div_ceil(mss.max(1) as usize)
        .saturating_mul(2)
        .saturating_add(2)
}

/// RACK.segs_sacked from the scoreboard: SACKed bytes in whole segments.
pub fn segs_sacked(sacked_bytes: u32, mss: u32) -> u32 {
    sacked_bytes.div_ceil(mss.max(1))
}

/// RFC 8985 §6.2 step 2, `RACK_sent_after`: t1 later, or at the same time with a higher
/// sequence number (clock granularity ties are broken by sequence).
pub fn sent_after(t1: Instant, seq1: u32, t2: Instant, seq2: u32) -> bool {
    t1 > t2 || (t1 == t2 && seq::gt(seq1, seq2))
}

/// Timestamp comparison modulo 2^32 (RFC 7323 §5.2 uses the same rule for TSval).
fn ts_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// One transmission of `[start, end)` that is neither cumulatively nor selectively
/// acknowledged (RFC 8985 §5.2 per-segment variables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegRecord {
    pub start: u32,
    pub end: u32,
    /// Segment.xmit_ts: the most recent transmission. For records merged under memory
    /// pressure, the latest of them, so loss is never inferred earlier than for each part.
    pub xmit_ts: Instant,
    /// The earliest transmission time among merged records (equal to `xmit_ts` otherwise):
    /// used when the record is delivered, so RACK.xmit_ts and RACK.rtt err late, never early.
    pub first_ts: Instant,
    /// TSval of the last transmission, for the TSecr check of step 2.
    pub tsval: Option<u32>,
    /// Segment.retransmitted.
    pub retransmitted: bool,
    /// Segment.lost: deemed lost and not yet retransmitted.
    pub lost: bool,
    /// Deemed lost at some point, retransmitted since or not (Linux's `TCPCB_LOST`, which a
    /// retransmission keeps): what `tcpi_lost` (Linux `lost_out`) counts.
    pub was_lost: bool,
    /// The size of the segments the record's bytes left in, counted from `start` (the last
    /// one may be shorter): where [`sack_piece`] may move a SACK edge to. 0 when those
    /// boundaries are not known (the record starts inside a segment, or was merged from
    /// unlike parts): SACK edges are then taken as they come.
    pub seg: u32,
}

impl SegRecord {
    fn len(&self) -> u32 {
        self.end.wrapping_sub(self.start)
    }

    /// Whether the record holds whole segments only, so that what follows it contiguously
    /// in segments of the same size keeps its boundaries at multiples of `seg` from `start`.
    fn whole_segments(&self) -> bool {
        self.seg != 0 && self.len().is_multiple_of(self.seg)
    }

    /// Moves the start to `at` (inside the record), forgetting the segment boundaries when
    /// `at` is not one of them.
    fn rebase(&mut self, at: u32) {
        if self.seg != 0 && !at.wrapping_sub(self.start).is_multiple_of(self.seg) {
            self.seg = 0;
        }
        self.start = at;
    }
}

/// A windowed minimum over [`MIN_RTT_WINDOW`], keeping the best, second-best and third-best
/// samples of successive sub-windows (Kathleen Nichols' algorithm, as Linux `lib/minmax.c`):
/// constant memory, and a stale minimum ages out within one window.
#[derive(Debug, Clone, Copy, Default)]
struct MinFilter {
    s: [(Instant, Duration); 3],
    valid: bool,
}

impl MinFilter {
    fn get(&self) -> Option<Duration> {
        self.valid.then_some(self.s[0].1)
    }

    #[inline]
    fn update(&mut self, now: Instant, v: Duration, win: Duration) {
        let fresh = (now, v);
        if !self.valid || v <= self.s[0].1 || now.saturating_since(self.s[2].0) > win {
            self.s = [fresh; 3];
            self.valid = true;
            return;
        }
        if v <= self.s[1].1 {
            self.s[1] = fresh;
            self.s[2] = fresh;
        } else if v <= self.s[2].1 {
            self.s[2] = fresh;
        }
        let dt = now.saturating_since(self.s[0].0);
        let quarter = Duration::from_micros(win.total_micros() / 4);
        let half = Duration::from_micros(win.total_micros() / 2);
        if dt > win {
            // The best sample expired: promote the others, and again if that one did too.
            self.s = [self.s[1], self.s[2], fresh];
            if now.saturating_since(self.s[0].0) > win {
                self.s = [self.s[1], self.s[2], fresh];
            }
        } else if self.s[1].0 == self.s[0].0 && dt > quarter {
            // A quarter window passed without a second choice: take this one.
            self.s[1] = fresh;
            self.s[2] = fresh;
        } else if self.s[2].0 == self.s[1].0 && dt > half {
            self.s[2] = fresh;
        }
    }
}

/// Counters of RACK's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RackStats {
    /// Ranges marked lost by RACK_detect_loss (not counting RTO marks).
    pub marked_lost: u64,
    /// Of those, retransmissions found lost again.
    pub lost_retransmissions: u64,
    /// Times the record table was full and forgotten.
    pub overflows: u64,
    /// ACKs on which a never-retransmitted segment below RACK.fack was delivered.
    pub reordering_events: u64,
}

/// What one ACK did to RACK's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckSummary {
    /// Bytes of recorded segments newly delivered (cumulatively or selectively).
    pub delivered: u32,
    /// RACK.segment moved to a later transmission.
    pub advanced: bool,
}

/// The result of one loss-detection pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossReport {
    pub newly_lost_bytes: u32,
    /// A retransmission was found lost: RFC 8985 §9.3, "In the absence of PRR [RFC6937],
    /// when RACK-TLP detects a lost retransmission, the congestion control MUST trigger an
    /// additional congestion response".
    pub lost_retransmission: bool,
    /// When to run detection again (the RACK reordering timer), if some segment sent before
    /// RACK.segment is still within its reordering window.
    pub reo_deadline: Option<Instant>,
}

/// What the TCB knows about an arriving ACK, already validated (RFC 9293 §3.10.7.4).
#[derive(Debug, Clone, Copy)]
pub struct Ack<'a> {
    pub now: Instant,
    /// The new SND.UNA: SEG.ACK when it advanced, else the old SND.UNA (never lower).
    pub una: u32,
    /// SND.NXT (for RACK.dsack_round).
    pub snd_nxt: u32,
    /// The SACK blocks reporting newly received data: a D-SACK block removed (see
    /// `dsack::split_dsack`).
    pub sack: &'a [SackBlock],
    /// The D-SACK block of this ACK, if `DsackSender::on_dsack` accepted it.
    pub dsack: Option<SackBlock>,
    /// The ACK's TSecr, when timestamps are in use.
    pub tsecr: Option<u32>,
    /// The RFC 6298 / RFC 7323 RTT sample the TCB took from this ACK, if any.
    pub rtt_sample: Option<Duration>,
    /// The segment size the records were cut to (0: SACK pieces are taken as they come,
    /// see [`sack_piece`]).
    pub mss: u32,
}

/// The part of record `[rs, re)` that a SACK of `[ps, pe)` (inside it) acknowledges for
/// RACK, as Linux's `tcp_match_skb_to_sack` cuts an skb: only whole segments of `mss` counted
/// from the record's start, or the record's tail from such a boundary on (`mss` is the
/// record's [`SegRecord::seg`]; 0 takes the piece as it is). A SACK of a few
/// bytes inside a segment (RFC 2018 allows any boundaries) acknowledges nothing here: Linux
/// marks no skb SACKed for it, so it neither advances RACK nor counts as delivered.
pub fn sack_piece(rs: u32, re: u32, ps: u32, pe: u32, mss: u32) -> Option<(u32, u32)> {
    if mss == 0 || (ps == rs && pe == re) {
        return Some((ps, pe));
    }
    let lo = if ps == rs {
        ps
    } else {
        let off = ps.wrapping_sub(rs).div_ceil(mss).saturating_mul(mss);
        seq::min(rs.wrapping_add(off), re)
    };
    let hi = if pe == re {
        pe
    } else {
        rs.wrapping_add(pe.wrapping_sub(rs) / mss * mss)
    };
    seq::lt(lo, hi).then_some((lo, hi))
}

/// Per-connection RACK state (RFC 8985 §5.3) and the record of segments in flight.
///
/// Records are sorted by sequence number, disjoint, and hold only data not yet acknowledged
/// cumulatively or selectively: a SACKed piece is removed (the scoreboard, `sack.rs`, keeps
/// the SACKed ranges for retransmission decisions), so "not acknowledged yet" in the RFC's
/// loops is simply "recorded". At most `capacity` records exist; when a transmission or a
/// SACK split needs a slot and none is left, adjacent records are first merged in pairs
/// (precision lost, see [`SegRecord::first_ts`]), and if that frees nothing the whole table
/// is forgotten: RACK then knows nothing about the data in flight (RFC 6675, the TLP and the
/// RTO still repair it) and starts again from the next transmission.
#[derive(Debug, Clone)]
pub struct Rack {
    segs: VecDeque<SegRecord>,
    capacity: usize,
    /// The segment size transmissions are cut to now ([`Rack::set_segment_size`]), given to
    /// each new record as its [`SegRecord::seg`].
    seg: u32,
    /// Highest sequence number ever passed to `on_send` (our SND.MAX).
    high: Option<u32>,
    lost_bytes: u32,
    /// RACK.xmit_ts / RACK.end_seq: the most recently sent segment delivered so far.
    xmit_ts: Option<Instant>,
    end_seq: u32,
    /// RACK.fack: the highest sequence number selectively or cumulatively acknowledged.
    fack: Option<u32>,
    min_rtt: MinFilter,
    /// RACK.rtt: the RTT of the most recently sent segment delivered.
    rtt: Duration,
    reordering_seen: bool,
    /// The largest distance, in bytes, from RACK.fack down to the start of a segment
    /// delivered out of order (see [`Rack::reordering`]).
    reorder_extent: u32,
    reo_wnd: Duration,
    reo_wnd_mult: u32,
    reo_wnd_persist: u8,
    dsack_round: Option<u32>,
    pub stats: RackStats,
}

impl Rack {
    pub fn new(capacity: usize) -> Self {
        Rack {
            segs: VecDeque::new(),
            capacity: capacity.max(2),
            seg: 0,
            high: None,
            lost_bytes: 0,
            xmit_ts: None,
            end_seq: 0,
            fack: None,
            min_rtt: MinFilter::default(),
            rtt: Duration::ZERO,
            reordering_seen: false,
            reorder_extent: 0,
            reo_wnd: Duration::ZERO,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_round: None,
            stats: RackStats::default(),
        }
    }

    /// The record list's storage, emptied, for a recycled control block (`Conn::renew`).
    pub fn take_storage(&mut self) -> VecDeque<SegRecord> {
        let mut v = std::mem::take(&mut self.segs);
        v.clear();
        v
    }

    /// Takes `v` (emptied) as the record list's storage if this RACK holds none yet and `v`
    /// is small (a bulk connection's list, thousands of records, is not kept for the next
    /// one: the free list of control blocks must stay small).
    pub fn adopt_storage(&mut self, mut v: VecDeque<SegRecord>) {
        if self.segs.capacity() == 0 && v.capacity() <= RECYCLED_RECORDS_MAX {
            v.clear();
            self.segs = v;
        }
    }

    // ---- RFC 8985 §6.1: upon transmitting a data segment -------------------------------

    /// `[start, end)` left at `now` carrying `tsval` (the segment's TSval field, in the
    /// clock the peer echoes in TSecr). `end` includes a FIN if the segment carries one, so
    /// that the highest recorded number stays SND.MAX. Bytes below the highest sequence
    /// number sent so far are a retransmission, the rest new data.
    ///
    /// RFC 8985 §6.1: "Upon transmitting a new segment or retransmitting an old segment,
    /// record the time in Segment.xmit_ts and set Segment.lost to FALSE. Upon retransmitting
    /// a segment, set Segment.retransmitted to TRUE."
    /// The segment size transmissions are cut to from now on (the TCB's effective MSS): new
    /// records remember it so that SACK edges inside one of their segments can be moved to
    /// its boundaries ([`sack_piece`]). 0 (the start): records take SACKs as they come.
    #[inline]
    pub fn set_segment_size(&mut self, seg: u32) {
        self.seg = seg;
    }

    pub fn on_send(&mut self, start: u32, end: u32, now: Instant, tsval: Option<u32>) {
        if !seq::lt(start, end) {
            return;
        }
        let high = self.high.unwrap_or(start);
        if seq::lt(start, high) {
            self.retransmitted(start, seq::min(end, high), now, tsval);
        }
        let new_start = seq::max(start, high);
        if seq::lt(new_start, end) {
            self.append(new_start, end, now, tsval);
        }
        self.high = Some(seq::max(high, end));
    }

    fn append(&mut self, start: u32, end: u32, now: Instant, tsval: Option<u32>) {
        let seg = self.seg;
        if let Some(last) = self.segs.back_mut() {
            // Sent at the same instant and contiguous: one record, as one GSO burst would be
            // (the end-sequence tie-break of RACK_sent_after orders its parts). Only onto
            // whole segments of the same size, so that a SACK edge moved to a multiple of
            // `seg` from the record's start lands on a real segment boundary: short
            // segments sent back to back (MSG_EOR records, small writes) stay records of
            // their own, each SACKable, as each is an skb of its own in Linux.
            if last.end == start
                && last.seg == seg
                && (seg == 0 || last.whole_segments())
                && last.xmit_ts == now
                && last.first_ts == now
                && !last.retransmitted
                && !last.lost
                && last.tsval == tsval
            {
                last.end = end;
                return;
            }
        }
        self.ensure_room(1);
        self.segs.push_back(SegRecord {
            start,
            end,
            xmit_ts: now,
            first_ts: now,
            tsval,
            retransmitted: false,
            lost: false,
            was_lost: false,
            seg,
        });
    }

    fn retransmitted(&mut self, start: u32, end: u32, now: Instant, tsval: Option<u32>) {
        if !self.ensure_room(2) {
            return;
        }
        let mut i = self.segs.partition_point(|r| seq::le(r.end, start));
        if i < self.segs.len() && seq::lt(self.segs[i].start, start) {
            self.split(i, start);
            i += 1;
        }
        while i < self.segs.len() && seq::lt(self.segs[i].start, end) {
            if seq::lt(end, self.segs[i].end) {
                self.split(i, end);
            }
            let r = &mut self.segs[i];
            if r.lost {
                self.lost_bytes = self.lost_bytes.saturating_sub(r.len());
                r.lost = false;
            }
            r.xmit_ts = now;
            r.first_ts = now;
            r.tsval = tsval;
            r.retransmitted = true;
            // The retransmission is cut into segments of the current size from `start`.
            let seg = self.seg;
            r.seg = if seg != 0 && r.start.wrapping_sub(start).is_multiple_of(seg) {
                seg
            } else {
                0
            };
            i += 1;
        }
    }

    /// Splits record `i` at `at` (strictly inside it); the caller ensured room.
    fn split(&mut self, i: usize, at: u32) {
        let mut right = self.segs[i];
        right.rebase(at);
        self.segs[i].end = at;
        self.segs.insert(i + 1, right);
    }

    /// Makes room for `n` more records: merge, else forget. Returns whether the records that
    /// existed before the call are still there.
    #[inline(always)]
    fn ensure_room(&mut self, n: usize) -> bool {
        // Nearly always room (a few records in flight): decided inline, at every send and ACK.
        if self.segs.len() + n <= self.capacity {
            return true;
        }
        self.make_room(n)
    }

    /// `ensure_room` when the table is full (out of line: bulk transfers reach it, the
    /// per-segment path does not).
    #[inline(never)]
    fn make_room(&mut self, n: usize) -> bool {
        self.compact();
        if self.segs.len() + n <= self.capacity {
            return true;
        }
        self.stats.overflows += 1;
        self.segs.clear();
        self.lost_bytes = 0;
        false
    }

    /// Merges contiguous neighbours with the same flags, in pairs: the merged record keeps
    /// the later xmit_ts (loss inferred no earlier) and the earlier first_ts (delivery
    /// credited no later).
    fn compact(&mut self) {
        let old = core::mem::take(&mut self.segs);
        let mut it = old.into_iter().peekable();
        while let Some(a) = it.next() {
            match it.peek() {
                Some(b)
                    if a.end == b.start
                        && a.retransmitted == b.retransmitted
                        && a.lost == b.lost
                        && a.was_lost == b.was_lost =>
                {
                    let later = if b.xmit_ts >= a.xmit_ts { *b } else { a };
                    self.segs.push_back(SegRecord {
                        start: a.start,
                        end: b.end,
                        xmit_ts: later.xmit_ts,
                        first_ts: a.first_ts.min(b.first_ts),
                        tsval: later.tsval,
                        retransmitted: a.retransmitted,
                        lost: a.lost,
                        was_lost: a.was_lost,
                        // b's segments continue a's boundaries only if a is whole ones.
                        seg: if a.seg == b.seg && a.whole_segments() {
                            a.seg
                        } else {
                            0
                        },
                    });
                    it.next();
                }
                _ => self.segs.push_back(a),
            }
        }
    }

    // ---- RFC 8985 §6.2: upon receiving an ACK, steps 1-4 --------------------------------

    /// Steps 1 to 4 of RFC 8985 §6.2 for one ACK. Call [`Rack::detect_loss`] (step 5) next.
    pub fn on_ack(&mut self, a: &Ack<'_>) -> AckSummary {
        // Step 1: "Use the RTT measurements obtained via [RFC6298] or [RFC7323] to update the
        // estimated minimum RTT in RACK.min_RTT."
        if let Some(r) = a.rtt_sample {
            self.min_rtt.update(a.now, r, MIN_RTT_WINDOW);
        }
        let high = self.high.unwrap_or(a.una);
        // Every newly acknowledged piece, in ascending sequence order (step 3 wants
        // ascending Segment.end_seq): the cumulative part, then the SACK blocks clipped to
        // (SND.UNA, SND.MAX] and sorted. A block splits at most one record in two.
        let mut ranges = [(0u32, 0u32); 4];
        let mut n = 0;
        for b in a.sack.iter().take(ranges.len()) {
            let l = seq::max(b.left, a.una);
            let r = seq::min(b.right, high);
            if seq::lt(l, r) {
                ranges[n] = (l, r);
                n += 1;
            }
        }
        ranges[..n].sort_unstable_by_key(|&(l, _)| l.wrapping_sub(a.una));
        let mut best: Option<(Instant, u32)> = None;
        // The send times of the last valid piece in Linux's processing order (see step 2
        // below): the cumulatively acknowledged part, and the SACKed part.
        let mut last_cum: Option<Instant> = None;
        let mut last_sacked: Option<Instant> = None;
        let mut delivered = 0u32;
        if self.ensure_room(n) {
            while let Some(&front) = self.segs.front() {
                if !seq::lt(front.start, a.una) {
                    break;
                }
                let piece_end = seq::min(front.end, a.una);
                if self.credit(a, &front, front.start, piece_end, &mut best) {
                    last_cum = Some(front.first_ts);
                }
                delivered = delivered.saturating_add(piece_end.wrapping_sub(front.start));
                self.remove_piece(0, front.start, piece_end);
            }
            for &(l, r) in &ranges[..n] {
                let mut i = self.segs.partition_point(|s| seq::le(s.end, l));
                while i < self.segs.len() && seq::lt(self.segs[i].start, r) {
                    let rec = self.segs[i];
                    let Some((ps, pe)) = sack_piece(
                        rec.start,
                        rec.end,
                        seq::max(rec.start, l),
                        seq::min(rec.end, r),
                        if a.mss == 0 { 0 } else { rec.seg },
                    ) else {
                        i += 1;
                        continue;
                    };
                    if self.credit(a, &rec, ps, pe, &mut best) {
                        last_sacked = Some(rec.first_ts);
                        // Step 1 with Linux's SACK RTT (`tcp_clean_rtx_queue`'s
                        // `sack_rtt_us`, taken into `rtt_min` by `tcp_ack_update_rtt`):
                        // a never-retransmitted segment SACKed now was sent one round trip
                        // ago, an RTT measurement as good as a cumulative ACK's.
                        if !rec.retransmitted {
                            self.min_rtt.update(
                                a.now,
                                a.now.saturating_since(rec.first_ts),
                                MIN_RTT_WINDOW,
                            );
                        }
                    }
                    delivered = delivered.saturating_add(pe.wrapping_sub(ps));
                    i = self.remove_piece(i, ps, pe);
                }
            }
        }
        // Step 2, applied for the most recently sent valid segment of this ACK (the RFC's
        // loop in ascending Segment.xmit_ts order ends with it; where its pseudocode says
        // "Return" for an invalid segment we skip only that one, as Linux
        // `tcp_rack_advance` does, so one ambiguous retransmission does not hide the
        // valid segments sent after it): "Among all
        // the segments newly ACKed or SACKed by this ACK that pass the checks above, update
        // the RACK.rtt to be the RTT sample calculated using this ACK. Furthermore, record
        // the most recent Segment.xmit_ts in RACK.xmit_ts if it is ahead of RACK.xmit_ts."
        //
        // RACK.rtt, though, follows Linux rather than the RFC's "RTT sample calculated using
        // this ACK" for the most recently sent segment: Linux's `tcp_rack_advance` runs for
        // each valid segment, the SACKed ones first (`tcp_sacktag_write_queue`) and then the
        // cumulatively acknowledged ones (`tcp_clean_rtx_queue`), each in sequence order,
        // and each call overwrites `rack.rtt_us`; the last one's RTT stays. When an ACK
        // covers a retransmission and, above it, an original sent before it, RACK.rtt is
        // the original's (longer) RTT, so segments sent with that original are not deemed
        // lost at once: they get RACK.reo_wnd more from its send time (measured against
        // Linux 6.18: Linux's `fast_recovery/prr-ss-ack-below-snd_una-cubic`).
        if let Some(ts) = last_cum.or(last_sacked) {
            self.rtt = a.now.saturating_since(ts);
        }
        let mut advanced = false;
        if let Some((ts, end)) = best {
            if self
                .xmit_ts
                .is_none_or(|x| sent_after(ts, end, x, self.end_seq))
            {
                self.xmit_ts = Some(ts);
                self.end_seq = end;
                advanced = true;
            }
        }
        // RACK.fack never lags the cumulative ACK (keeps it within 2^31 of live numbers).
        self.fack = Some(self.fack.map_or(a.una, |f| seq::max(f, a.una)));
        // Step 4, the D-SACK part:
        //   If RACK.dsack_round is not None AND
        //      SND.UNA >= RACK.dsack_round:
        //       RACK.dsack_round = None
        //   /* Grow the reordering window per round that sees DSACK.
        //      Reset the window after 16 DSACK-free recoveries */
        //   If RACK.dsack_round is None AND
        //      any DSACK option is present on latest received ACK:
        //       RACK.dsack_round = SND.NXT
        //       RACK.reo_wnd_mult += 1
        //       RACK.reo_wnd_persist = 16
        if self.dsack_round.is_some_and(|r| seq::ge(a.una, r)) {
            self.dsack_round = None;
        }
        if self.dsack_round.is_none() && a.dsack.is_some() {
            self.dsack_round = Some(a.snd_nxt);
            self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(REO_WND_MULT_MAX);
            self.reo_wnd_persist = REO_WND_PERSIST;
        }
        AckSummary {
            delivered,
            advanced,
        }
    }

    /// Step 2's validity check and step 3 for one newly acknowledged piece ending at `end`;
    /// returns whether the piece passed step 2's checks.
    fn credit(
        &mut self,
        a: &Ack<'_>,
        rec: &SegRecord,
        start: u32,
        end: u32,
        best: &mut Option<(Instant, u32)>,
    ) -> bool {
        // Step 2: "To avoid spurious inferences, ignore a segment as invalid if any of its
        // sequence range has been retransmitted before and if either of two conditions is
        // true: 1. The Timestamp Echo Reply field (TSecr) of the ACK's timestamp option
        // [RFC7323], if available, indicates the ACK was not acknowledging the last
        // retransmission of the segment. 2. The segment was last retransmitted less than
        // RACK.min_rtt ago."
        let ts = rec.first_ts;
        let valid = !rec.retransmitted || {
            let echo_older = matches!((a.tsecr, rec.tsval), (Some(e), Some(v)) if ts_before(e, v));
            // Without any RTT sample the retransmission cannot be told from the original
            // (Linux: an unknown min_rtt is "infinite").
            let too_soon = self
                .min_rtt
                .get()
                .is_none_or(|m| a.now.saturating_since(ts) < m);
            !echo_older && !too_soon
        };
        if valid && best.is_none_or(|(t, e)| sent_after(ts, end, t, e)) {
            *best = Some((ts, end));
        }
        // Step 3: "If a never-retransmitted segment that's below RACK.fack is (selectively or
        // cumulatively) acknowledged, it has been delivered out of order. The sender sets
        // RACK.reordering_seen to TRUE if such a segment is identified."
        match self.fack {
            Some(f) if seq::lt(end, f) => {
                if !rec.retransmitted {
                    if !self.reordering_seen {
                        self.stats.reordering_events += 1;
                    }
                    self.reordering_seen = true;
                    // Linux `tcp_check_sack_reordering`: how far below the highest
                    // acknowledged byte this delivery was (its `tp->reordering`, in
                    // segments, for `tcpi_reordering`).
                    self.reorder_extent = self.reorder_extent.max(f.wrapping_sub(start));
                }
            }
            _ => self.fack = Some(end),
        }
        valid
    }

    /// Removes `[ps, pe)` (inside record `i`) from the records; returns the index of the
    /// first record after the piece. The caller ensured room for a split.
    fn remove_piece(&mut self, i: usize, ps: u32, pe: u32) -> usize {
        let rec = self.segs[i];
        if rec.lost {
            self.lost_bytes = self.lost_bytes.saturating_sub(pe.wrapping_sub(ps));
        }
        match (ps == rec.start, pe == rec.end) {
            (true, true) => {
                self.segs.remove(i);
                i
            }
            (true, false) => {
                self.segs[i].rebase(pe);
                i
            }
            (false, true) => {
                self.segs[i].end = ps;
                i + 1
            }
            (false, false) => {
                self.split(i, pe);
                self.segs[i].end = ps;
                i + 1
            }
        }
    }

    /// The reordering window of RFC 8985 §6.2 step 4:
    ///
    /// ```text
    ///   If RACK.reordering_seen is FALSE:
    ///       If in Fast or RTO recovery:
    ///           Return 0
    ///       Else if RACK.segs_sacked >= DupThresh:
    ///           Return 0
    ///   Return min(RACK.reo_wnd_mult * RACK.min_RTT / 4, SRTT)
    /// ```
    /// Without an RTT sample yet, SRTT (or 0) stands in for the product, as Linux's
    /// "infinite" unknown min_rtt capped by SRTT gives.
    pub fn reo_wnd(&self, in_recovery: bool, segs_sacked: u32, srtt: Option<Duration>) -> Duration {
        if !self.reordering_seen && (in_recovery || segs_sacked >= DUP_THRESH) {
            return Duration::ZERO;
        }
        let srtt = srtt.unwrap_or(Duration::ZERO);
        match self.min_rtt.get() {
            Some(m) => Duration::from_micros(
                (m.total_micros() / 4).saturating_mul(u64::from(self.reo_wnd_mult)),
            )
            .min(srtt),
            None => srtt,
        }
    }

    /// Step 4's other half: "Else if exiting Fast or RTO recovery: RACK.reo_wnd_persist -= 1;
    /// If RACK.reo_wnd_persist <= 0: RACK.reo_wnd_mult = 1".
    pub fn on_recovery_exit(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
        if self.reo_wnd_persist == 0 {
            self.reo_wnd_mult = 1;
        }
    }

    /// The recovery was undone as spurious (D-SACK): it does not count as a D-SACK-free one
    /// (Linux `tcp_try_undo_dsack` gives the persistence back).
    pub fn on_undo(&mut self) {
        self.reo_wnd_persist = (self.reo_wnd_persist + 1).min(REO_WND_PERSIST);
    }

    // ---- RFC 8985 §6.2 step 5 and the reordering timer ---------------------------------

    /// Step 5, `RACK_detect_loss()`; `on_lost(start, end)` receives each newly lost range.
    ///
    /// ```text
    ///   RACK_detect_loss():
    ///       timeout = 0
    ///       RACK.reo_wnd = RACK_update_reo_wnd()
    ///       For each segment, Segment, not acknowledged yet:
    ///           If RACK_sent_after(RACK.xmit_ts, RACK.end_seq,
    ///                              Segment.xmit_ts, Segment.end_seq):
    ///               remaining = Segment.xmit_ts + RACK.rtt +
    ///                           RACK.reo_wnd - Now()
    ///               If remaining <= 0:
    ///                   Segment.lost = TRUE
    ///                   Segment.xmit_ts = INFINITE_TS
    ///               Else:
    ///                   timeout = max(remaining, timeout)
    ///       Return timeout
    /// ```
    /// A lost segment is skipped until retransmitted (the `lost` flag stands for the
    /// infinite timestamp). The returned deadline arms the RACK reordering timer.
    pub fn detect_loss(
        &mut self,
        now: Instant,
        srtt: Option<Duration>,
        in_recovery: bool,
        segs_sacked: u32,
        mut on_lost: impl FnMut(u32, u32),
    ) -> LossReport {
        self.reo_wnd = self.reo_wnd(in_recovery, segs_sacked, srtt);
        let mut report = LossReport::default();
        let Some(rack_ts) = self.xmit_ts else {
            return report;
        };
        // Nothing outstanding (every ACK of request/response traffic that covers all that
        // was sent): no segment to judge and no timer to arm. Linux's
        // `tcp_rack_detect_loss` walks an empty `tsorted_sent_queue` likewise.
        if self.segs.is_empty() {
            return report;
        }
        let mut timeout = Duration::ZERO;
        for r in self.segs.iter_mut() {
            if r.lost || !sent_after(rack_ts, self.end_seq, r.xmit_ts, r.end) {
                continue;
            }
            let deadline = r.xmit_ts + self.rtt + self.reo_wnd;
            if deadline <= now {
                r.lost = true;
                r.was_lost = true;
                self.lost_bytes = self.lost_bytes.saturating_add(r.len());
                report.newly_lost_bytes = report.newly_lost_bytes.saturating_add(r.len());
                self.stats.marked_lost += 1;
                if r.retransmitted {
                    report.lost_retransmission = true;
                    self.stats.lost_retransmissions += 1;
                }
                on_lost(r.start, r.end);
            } else {
                timeout = timeout.max(deadline.saturating_since(now));
            }
        }
        if timeout > Duration::ZERO {
            report.reo_deadline = Some(now + reo_timer_delay(timeout));
        }
        report
    }

    /// The RACK reordering timer fired: "RACK_detect_loss_and_arm_timer()" runs again.
    pub fn on_reorder_timeout(
        &mut self,
        now: Instant,
        srtt: Option<Duration>,
        in_recovery: bool,
        segs_sacked: u32,
        on_lost: impl FnMut(u32, u32),
    ) -> LossReport {
        self.detect_loss(now, srtt, in_recovery, segs_sacked, on_lost)
    }

    // ---- RFC 8985 §6.3: upon RTO expiration ---------------------------------------------

    /// ```text
    ///   RACK_mark_losses_on_RTO():
    ///       For each segment, Segment, not acknowledged yet:
    ///           If SEG.SEQ == SND.UNA OR
    ///              Segment.xmit_ts + RACK.rtt + RACK.reo_wnd - Now() <= 0:
    ///               Segment.lost = TRUE
    /// ```
    /// Segments sent recently (within RACK.rtt + RACK.reo_wnd) are not marked: they may
    /// still be delivered. Returns the bytes newly marked.
    pub fn on_rto(&mut self, now: Instant, snd_una: u32, mut on_lost: impl FnMut(u32, u32)) -> u32 {
        let mut marked = 0u32;
        for r in self.segs.iter_mut() {
            if r.lost {
                continue;
            }
            if seq::le(r.start, snd_una) || r.xmit_ts + self.rtt + self.reo_wnd <= now {
                r.lost = true;
                r.was_lost = true;
                self.lost_bytes = self.lost_bytes.saturating_add(r.len());
                marked = marked.saturating_add(r.len());
                on_lost(r.start, r.end);
            }
        }
        marked
    }

    // ---- What the TCB asks --------------------------------------------------------------

    /// An RTT sample for an ACK moving SND.UNA to `una`, from the send times recorded here:
    /// `now` minus the send time of the most recently sent record it acknowledges that was
    /// never retransmitted (Karn's rule; Linux takes its `seq_rtt_us` the same way from the
    /// acknowledged skbs' microsecond timestamps). `None` when every such record was
    /// retransmitted. Call before [`Rack::on_ack`] removes the records.
    #[inline]
    pub fn karn_sample(&self, now: Instant, una: u32) -> Option<Duration> {
        self.segs
            .iter()
            .take_while(|r| seq::lt(r.start, una))
            .filter(|r| !r.retransmitted)
            .map(|r| r.first_ts)
            .max()
            .map(|ts| now.saturating_since(ts))
    }

    /// An RTT measured outside [`Rack::on_ack`] (the handshake's) for RACK.min_RTT (§6.2
    /// step 1).
    pub fn on_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        self.min_rtt.update(now, rtt, MIN_RTT_WINDOW);
    }

    /// The first range deemed lost and not yet retransmitted that ends after `from`, from
    /// `from` on. It may include bytes the scoreboard knows are SACKed when the table was
    /// compacted: send only the scoreboard's holes.
    pub fn next_lost(&self, from: u32) -> Option<(u32, u32)> {
        // Every marked record is counted in `lost_bytes` (checked by the invariant test):
        // with nothing marked there is nothing to search, the usual case, asked on every
        // output decision.
        if self.lost_bytes == 0 {
            return None;
        }
        let i = self.segs.partition_point(|r| seq::le(r.end, from));
        self.segs
            .iter()
            .skip(i)
            .find(|r| r.lost)
            .map(|r| (seq::max(r.start, from), r.end))
    }

    /// SACK block `b` with its edges moved to the segment boundaries of the records they
    /// fall in ([`sack_piece`]), or `None` when nothing whole is left. Edges outside every
    /// record (data already acknowledged, or a table that forgot) are kept as they are.
    pub fn trim_sack(&self, b: SackBlock, mss: u32) -> Option<SackBlock> {
        if mss == 0 || self.segs.is_empty() {
            return Some(b);
        }
        let mut left = b.left;
        let mut right = b.right;
        let i = self.segs.partition_point(|r| seq::le(r.end, b.left));
        if let Some(r) = self.segs.get(i) {
            if seq::lt(r.start, b.left) {
                let pe = seq::min(r.end, b.right);
                left = sack_piece(r.start, r.end, b.left, pe, r.seg).map_or(pe, |(lo, _)| lo);
                if left == pe && seq::lt(pe, r.end) {
                    // The block ends inside this record without a whole segment.
                    return None;
                }
            }
        }
        let j = self.segs.partition_point(|r| seq::lt(r.end, b.right));
        if let Some(r) = self.segs.get(j) {
            if seq::lt(r.start, b.right) && seq::lt(b.right, r.end) {
                let ps = seq::max(r.start, left);
                right = sack_piece(r.start, r.end, ps, b.right, r.seg).map_or(ps, |(_, hi)| hi);
            }
        }
        seq::lt(left, right).then_some(SackBlock { left, right })
    }

    /// Bytes retransmitted and neither acknowledged nor deemed lost again (Linux
    /// `retrans_out`, for `TCP_INFO`; walks the records, so not for the data path).
    pub fn retransmitted_in_flight(&self) -> u32 {
        self.segs
            .iter()
            .filter(|r| r.retransmitted && !r.lost)
            .fold(0u32, |a, r| a.wrapping_add(r.end.wrapping_sub(r.start)))
    }

    /// Bytes deemed lost and not yet delivered, retransmitted since or not (Linux
    /// `lost_out`, for `TCP_INFO`; walks the records, so not for the data path).
    pub fn lost_out(&self) -> u32 {
        self.segs
            .iter()
            .filter(|r| r.was_lost)
            .fold(0u32, |a, r| a.wrapping_add(r.len()))
    }

    /// Bytes deemed lost and not yet retransmitted (RFC 6675 pipe leaves them out).
    pub fn lost_bytes(&self) -> u32 {
        self.lost_bytes
    }

    #[cfg(test)]
    pub fn records(&self) -> impl Iterator<Item = &SegRecord> + '_ {
        self.segs.iter()
    }
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.get()
    }
    /// RACK.rtt.
    pub fn rtt(&self) -> Duration {
        self.rtt
    }
    /// RACK.reo_wnd as last computed by `detect_loss`.
    pub fn current_reo_wnd(&self) -> Duration {
        self.reo_wnd
    }
    pub fn reo_wnd_mult(&self) -> u32 {
        self.reo_wnd_mult
    }
    #[cfg(test)]
    pub fn reo_wnd_persist(&self) -> u8 {
        self.reo_wnd_persist
    }
    /// Linux's `tp->reordering` as `tcpi_reordering` reports it: the duplicate threshold
    /// (3, `tcp_reordering`) until a delivery out of order spans more segments of `mss`,
    /// then that span, up to `tcp_max_reordering` (300).
    pub fn reordering(&self, mss: u32) -> u32 {
        self.reorder_extent
            .div_ceil(mss.max(1))
            .clamp(DUP_THRESH, LINUX_MAX_REORDERING)
    }
    pub fn reordering_seen(&self) -> bool {
        self.reordering_seen
    }
    #[cfg(test)]
    /// RACK.xmit_ts and RACK.end_seq.
    pub fn segment(&self) -> Option<(Instant, u32)> {
        self.xmit_ts.map(|t| (t, self.end_seq))
    }
}

// ---- RFC 8985 §7: tail loss probe ------------------------------------------------------

/// What to send when the PTO fires (RFC 8985 §7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// No probe: "the sender MUST skip sending a loss probe and MUST proceed to re-arm the
    /// RTO timer".
    None,
    /// The lowest unsent segment, `len` bytes from `seq` (= SND.NXT).
    NewData { seq: u32, len: u32 },
    /// "retransmit the highest-sequence segment sent so far and set TLP.is_retrans to true".
    Retransmit { seq: u32, len: u32 },
}

/// The sender's view when the PTO fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeCtx {
    pub snd_una: u32,
    pub snd_nxt: u32,
    /// Bytes queued but never sent (from SND.NXT on).
    pub unsent: u32,
    /// Bytes the peer's window accepts beyond SND.NXT.
    pub wnd_room: u32,
    /// Payload bytes per segment.
    pub smss: u32,
}

/// How an ACK ended (or not) a loss-probe episode (RFC 8985 §7.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlpAck {
    /// No episode, or this ACK does not decide it.
    Pending,
    /// The episode ended without evidence of a loss.
    Ended,
    /// The probe repaired a loss: "(Invoke congestion control to react to the loss event
    /// the probe has repaired)" — a cwnd reduction as if a fast recovery had been entered and
    /// completed at once.
    RepairedLoss,
}

/// RFC 8985 §7 tail-loss-probe state: TLP.end_seq, TLP.is_retrans, TLP.max_ack_delay, and
/// whether an RTT sample was taken since the last probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlp {
    end_seq: Option<u32>,
    is_retrans: bool,
    rtt_sampled: bool,
    max_ack_delay: Duration,
}

impl Tlp {
    pub fn new(max_ack_delay: Duration) -> Self {
        Tlp {
            end_seq: None,
            is_retrans: false,
            rtt_sampled: false,
            max_ack_delay,
        }
    }

    /// §7.1: "Reset TLP.is_retrans and TLP.end_seq when initiating a connection, fast
    /// recovery, or RTO recovery."
    pub fn reset(&mut self) {
        self.end_seq = None;
        self.is_retrans = false;
    }

    /// An RTT sample was taken (RFC 6298 / RFC 7323).
    pub fn on_rtt_sample(&mut self) {
        self.rtt_sampled = true;
    }

    /// TLP.end_seq of the episode in progress.
    pub fn episode(&self) -> Option<u32> {
        self.end_seq
    }

    /// TLP.is_retrans: the probe of the episode in progress was a retransmission.
    pub fn is_retrans(&self) -> bool {
        self.is_retrans
    }

    /// §7.2: "The sender SHOULD start or restart a loss probe PTO timer after transmitting
    /// new data (that was not itself a loss probe) or upon receiving an ACK that cumulatively
    /// acknowledges new data unless it is already in fast recovery, RTO recovery, or
    /// segments have been SACKed (i.e., RACK.segs_sacked is not zero)." RACK-TLP also needs
    /// SACK on the connection (RFC 8985 §4).
    pub fn may_schedule(&self, sack_ok: bool, segs_sacked: u32, in_recovery: bool) -> bool {
        sack_ok && segs_sacked == 0 && !in_recovery
    }

    #[cfg(test)]
    /// §7.2 `TLP_calc_PTO()`, as a deadline:
    ///
    /// ```text
    ///   If SRTT is available:
    ///       PTO = 2 * SRTT
    ///       If FlightSize is one segment:
    ///          PTO += TLP.max_ack_delay
    ///   Else:
    ///       PTO = 1 sec
    ///
    ///   If Now() + PTO > TCP_RTO_expiration():
    ///       PTO = TCP_RTO_expiration() - Now()
    /// ```
    pub fn pto_deadline(
        &self,
        now: Instant,
        srtt: Option<Duration>,
        flight_is_one_segment: bool,
        rto_at: Option<Instant>,
    ) -> Instant {
        let pto = match srtt {
            Some(s) if flight_is_one_segment => s.saturating_mul(2) + self.max_ack_delay,
            Some(s) => s.saturating_mul(2),
            None => PTO_WITHOUT_SRTT,
        };
        let at = now + pto;
        match rto_at {
            Some(r) if at > r => r.max(now),
            _ => at,
        }
    }

    /// §7.3, the PTO fired: choose the probe. "the sender MUST check whether both of the
    /// following conditions are met before sending a loss probe": no earlier probe in flight
    /// (TLP.end_seq is None) and an RTT sample since the last probe. Then "the sender SHOULD
    /// transmit a previously unsent data segment, if one exists and the receive window
    /// allows"; "If such an unsent segment is not available, then the sender SHOULD
    /// retransmit the highest-sequence segment sent so far". After sending, call
    /// [`Tlp::on_probe_sent`] and arm the RTO.
    pub fn on_pto(&self, c: ProbeCtx) -> Probe {
        if self.end_seq.is_some() || !self.rtt_sampled {
            return Probe::None;
        }
        let len = c.unsent.min(c.smss);
        if len > 0 && len <= c.wnd_room {
            return Probe::NewData {
                seq: c.snd_nxt,
                len,
            };
        }
        let flight = seq::dist(c.snd_una, c.snd_nxt);
        if flight == 0 || c.smss == 0 {
            return Probe::None;
        }
        let len = flight.min(c.smss);
        Probe::Retransmit {
            seq: c.snd_nxt.wrapping_sub(len),
            len,
        }
    }

    /// The probe left; `snd_nxt` is SND.NXT after it (TLP.end_seq).
    pub fn on_probe_sent(&mut self, probe: Probe, snd_nxt: u32) {
        if probe == Probe::None {
            return;
        }
        self.end_seq = Some(snd_nxt);
        self.is_retrans = matches!(probe, Probe::Retransmit { .. });
        self.rtt_sampled = false;
    }

    /// §7.4.2, for every ACK:
    ///
    /// ```text
    ///   TLP_process_ack(ACK):
    ///       If TLP.end_seq is not None AND ACK's ack. number >= TLP.end_seq:
    ///           If not TLP.is_retrans:
    ///               TLP.end_seq = None    /* TLP of new data delivered */
    ///           Else if ACK has a DSACK option matching TLP.end_seq:
    ///               TLP.end_seq = None    /* Case 1, above */
    ///           Else If ACK's ack. number > TLP.end_seq:
    ///               TLP.end_seq = None    /* Repaired the single loss */
    ///               (Invoke congestion control to react to
    ///                the loss event the probe has repaired)
    ///           Else If ACK is a DupAck without any SACK option:
    ///               TLP.end_seq = None     /* Case 2, above */
    /// ```
    /// `dsack` is the ACK's accepted D-SACK block; `dupack_without_sack` an ACK that neither
    /// advances SND.UNA nor carries SACK blocks nor data nor a window change.
    pub fn on_ack(
        &mut self,
        ack: u32,
        dsack: Option<SackBlock>,
        dupack_without_sack: bool,
    ) -> TlpAck {
        let Some(end) = self.end_seq else {
            return TlpAck::Pending;
        };
        if !seq::ge(ack, end) {
            return TlpAck::Pending;
        }
        let outcome = if !self.is_retrans || dsack.is_some_and(|d| d.right == end) {
            TlpAck::Ended
        } else if seq::gt(ack, end) {
            TlpAck::RepairedLoss
        } else if dupack_without_sack {
            TlpAck::Ended
        } else {
            return TlpAck::Pending;
        };
        self.end_seq = None;
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1000;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * MS)
    }
    fn d(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }
    fn b(l: u32, r: u32) -> SackBlock {
        SackBlock { left: l, right: r }
    }
    fn ack<'a>(now: Instant, una: u32, sack: &'a [SackBlock]) -> Ack<'a> {
        Ack {
            now,
            una,
            snd_nxt: 0,
            sack,
            dsack: None,
            tsecr: None,
            rtt_sample: None,
            mss: 0,
        }
    }
    fn lost_of(
        r: &mut Rack,
        now: Instant,
        srtt: u64,
        rec: bool,
        sacked: u32,
    ) -> (Vec<(u32, u32)>, LossReport) {
        let mut v = vec![];
        let rep = r.detect_loss(now, Some(d(srtt)), rec, sacked, |s, e| v.push((s, e)));
        (v, rep)
    }
    /// Invariants: sorted, disjoint, non-empty, lost_bytes consistent, bounded.
    fn check(r: &Rack) {
        let v: Vec<_> = r.records().copied().collect();
        assert!(v.len() <= r.capacity());
        for s in &v {
            assert!(seq::lt(s.start, s.end));
        }
        for w in v.windows(2) {
            assert!(seq::le(w[0].end, w[1].start), "{w:?}");
        }
        let lost = v
            .iter()
            .filter(|s| s.lost)
            .map(|s| s.end.wrapping_sub(s.start))
            .fold(0u32, u32::wrapping_add);
        assert_eq!(lost, r.lost_bytes());
    }

    /// RFC 8985 §3.4, Figure 1 ("An Example of RACK-TLP in Action: Fast Recovery"), with an
    /// RTT of 100 ms and 1000-byte segments P0..P3 = [0,1000) .. [3000,4000):
    ///
    /// ```text
    ///   1.     Send P0, P1, P2, P3; [P1, P2, P3 dropped by network]
    ///   2.     Receive P0, ACK P0
    ///   3a/3b. 2RTTs after (2), TLP timer fires; TLP: retransmits P3
    ///   4./5a. Receive SACK for P3; 5b. RACK: marks P1, P2 lost
    ///   5c.    Retransmit P1, P2; [P1 retransmission dropped by network]
    ///   6./7a. Receive SACK P2 & P3; RACK: marks P1 retransmission lost
    ///   7b./8. Retransmit P1; Receive P1, ACK P3
    /// ```
    #[test]
    fn rfc8985_figure_1_fast_recovery() {
        figure_1(0);
    }

    /// The same, with sequence numbers wrapping past 2^32 between P1 and P2.
    #[test]
    fn rfc8985_figure_1_across_the_sequence_wrap() {
        figure_1(u32::MAX - 1500);
    }

    fn figure_1(base: u32) {
        let s = |x: u32| base.wrapping_add(x);
        let mut r = Rack::new(64);
        let mut tlp = Tlp::new(TLP_MAX_ACK_DELAY);
        for p in 0..4u32 {
            r.on_send(s(p * 1000), s(p * 1000 + 1000), t(0), Some(0));
        }
        // 2. ACK of P0 at 100 ms; the TCB's RTT sample is 100 ms.
        let a = Ack {
            rtt_sample: Some(d(100)),
            tsecr: Some(0),
            ..ack(t(100), s(1000), &[])
        };
        assert!(r.on_ack(&a).advanced);
        tlp.on_rtt_sample();
        assert_eq!(r.rtt(), d(100));
        let (lost, rep) = lost_of(&mut r, t(100), 100, false, 0);
        assert!(lost.is_empty() && rep.reo_deadline.is_none());
        // 3a. PTO = 2*SRTT (three segments in flight: no delayed-ACK allowance).
        assert!(tlp.may_schedule(true, 0, false));
        let pto = tlp.pto_deadline(t(100), Some(d(100)), false, Some(t(1100)));
        assert_eq!(pto, t(300));
        // 3b. Nothing unsent: the probe retransmits P3, the highest segment.
        let probe = tlp.on_pto(ProbeCtx {
            snd_una: s(1000),
            snd_nxt: s(4000),
            unsent: 0,
            wnd_room: 60000,
            smss: 1000,
        });
        assert_eq!(
            probe,
            Probe::Retransmit {
                seq: s(3000),
                len: 1000
            }
        );
        r.on_send(s(3000), s(4000), t(300), Some(300));
        tlp.on_probe_sent(probe, s(4000));
        check(&r);
        // 5a. SACK for P3 at 400 ms (echoing the probe's TSval).
        let sack = [b(s(3000), s(4000))];
        let a = Ack {
            tsecr: Some(300),
            rtt_sample: Some(d(100)),
            ..ack(t(400), s(1000), &sack)
        };
        r.on_ack(&a);
        assert_eq!(tlp.on_ack(s(1000), None, false), TlpAck::Pending);
        assert_eq!(r.segment(), Some((t(300), s(4000))));
        // 5b. P1 and P2 were sent before the delivered probe and RACK.rtt + reo_wnd ago.
        let (lost, rep) = lost_of(&mut r, t(400), 100, false, 1);
        assert_eq!(lost, vec![(s(1000), s(3000))]);
        assert_eq!(rep.newly_lost_bytes, 2000);
        assert!(!rep.lost_retransmission);
        assert_eq!(r.lost_bytes(), 2000);
        assert_eq!(r.next_lost(s(1000)), Some((s(1000), s(3000))));
        // The TCB enters fast recovery: the TLP episode is reset (§7.1).
        tlp.reset();
        // 5c. Retransmit P1, P2 at 400 ms.
        r.on_send(s(1000), s(2000), t(400), Some(400));
        r.on_send(s(2000), s(3000), t(400), Some(400));
        assert_eq!(r.lost_bytes(), 0);
        assert_eq!(r.next_lost(s(1000)), None);
        check(&r);
        // 6./7a. SACK of P2 & P3 at 500 ms: the retransmission of P2 (sent at the same time
        // as P1's, higher sequence) is delivered, so P1's retransmission is lost. In
        // recovery without reordering, reo_wnd = 0.
        let sack = [b(s(2000), s(4000))];
        let a = Ack {
            tsecr: Some(400),
            rtt_sample: Some(d(100)),
            ..ack(t(500), s(1000), &sack)
        };
        r.on_ack(&a);
        assert!(
            !r.reordering_seen(),
            "a retransmission below RACK.fack is not reordering"
        );
        let (lost, rep) = lost_of(&mut r, t(500), 100, true, 2);
        assert_eq!(lost, vec![(s(1000), s(2000))]);
        assert!(rep.lost_retransmission);
        assert_eq!(r.current_reo_wnd(), Duration::ZERO);
        // 7b./8. Retransmit P1, then ACK P3.
        r.on_send(s(1000), s(2000), t(500), Some(500));
        r.on_ack(&Ack {
            tsecr: Some(500),
            ..ack(t(600), s(4000), &[])
        });
        assert_eq!(r.records().count(), 0);
        assert_eq!(r.lost_bytes(), 0);
        check(&r);
    }

    /// RFC 8985 §6.3: on RTO only the segment at SND.UNA and segments sent at least
    /// RACK.rtt + RACK.reo_wnd ago are lost; a segment the application wrote just before the
    /// timer fired is left in flight.
    #[test]
    fn rfc8985_rto_marks_only_old_segments() {
        let mut r = Rack::new(64);
        r.on_send(0, 1000, t(0), None);
        r.on_ack(&Ack {
            rtt_sample: Some(d(100)),
            ..ack(t(100), 1000, &[])
        });
        r.on_send(1000, 2000, t(100), None);
        r.on_send(2000, 3000, t(1250), None);
        let _ = lost_of(&mut r, t(1250), 100, false, 0);
        assert_eq!(r.current_reo_wnd(), d(25), "min_RTT / 4");
        let mut v = vec![];
        assert_eq!(r.on_rto(t(1300), 1000, |s, e| v.push((s, e))), 1000);
        assert_eq!(v, vec![(1000, 2000)]);
        // Later the third one is old enough too.
        v.clear();
        r.on_rto(t(1400), 1000, |s, e| v.push((s, e)));
        assert_eq!(v, vec![(2000, 3000)]);
        check(&r);
    }

    #[test]
    fn reordering_window_defers_loss_and_arms_the_timer() {
        let mut r = Rack::new(64);
        r.on_send(0, 1000, t(0), None);
        r.on_ack(&Ack {
            rtt_sample: Some(d(40)),
            ..ack(t(40), 1000, &[])
        });
        r.on_send(1000, 2000, t(100), None);
        r.on_send(2000, 3000, t(101), None);
        // [2000,3000) SACKed at 141: [1000,2000) is due at 100 + 40 + 10 = 150.
        let sack = [b(2000, 3000)];
        r.on_ack(&ack(t(141), 1000, &sack));
        let (lost, rep) = lost_of(&mut r, t(141), 40, false, 1);
        assert!(lost.is_empty());
        assert_eq!(r.current_reo_wnd(), d(10));
        // The RFC's timeout ends at 150; the timer is armed Linux's 2 ms later.
        assert_eq!(rep.reo_deadline, Some(t(150) + REO_TIMER_SLACK));
        // The reordering timer fires: now it is lost.
        let mut v = vec![];
        let rep = r.on_reorder_timeout(t(150), Some(d(40)), false, 1, |s, e| v.push((s, e)));
        assert_eq!(v, vec![(1000, 2000)]);
        assert_eq!(rep.reo_deadline, None);
        // Marked once: another pass reports nothing new.
        let (lost, _) = lost_of(&mut r, t(200), 40, true, 1);
        assert!(lost.is_empty());
    }

    #[test]
    fn reo_timer_delay_adds_linux_slack_and_rounds_up_to_a_millisecond() {
        assert_eq!(reo_timer_delay(d(25)), d(27));
        assert_eq!(reo_timer_delay(Duration::from_micros(1)), d(3));
        assert_eq!(reo_timer_delay(Duration::from_micros(24_001)), d(27));
    }

    /// Linux order for RACK.rtt: an ACK covering a retransmission (sent at 20 ms) and an
    /// original above it (sent at 10 ms) leaves the original's RTT, so a segment sent with
    /// that original, not yet delivered, keeps its reordering window (Linux 6.18 marks it
    /// lost only later; see `RACK.rtt` in `on_ack`).
    #[test]
    fn rack_rtt_is_the_last_valid_segment_in_linux_order() {
        let mut r = Rack::new(64);
        for p in 0..10u32 {
            r.on_send(p * 1000, p * 1000 + 1000, t(10), None);
        }
        // SACKs at 20 ms: [1000,3000) and [8000,9000); three SACKed segments.
        let sack = [b(1000, 3000), b(8000, 9000)];
        r.on_ack(&ack(t(20), 0, &sack));
        assert_eq!(r.min_rtt(), Some(d(10)), "the SACK's RTT sample");
        let (lost, _) = lost_of(&mut r, t(20), 10, false, 3);
        assert_eq!(lost, vec![(0, 1000), (3000, 8000)]);
        r.on_send(0, 1000, t(20), None);
        // At 32 ms the cumulative ACK covers the retransmission (12 ms, valid: not below
        // min_RTT) and [3000,4000), never retransmitted, sent at 10 ms.
        r.on_ack(&ack(t(32), 4000, &[b(8000, 9000)]));
        assert_eq!(
            r.rtt(),
            d(22),
            "the last segment's RTT, not the retransmission's"
        );
        assert_eq!(
            r.segment(),
            Some((t(20), 1000)),
            "RACK.xmit_ts: the most recently sent"
        );
        assert!(r.reordering_seen());
        // [9000,10000), sent at 10 ms: due at 10 + 22 + min_RTT/4 = 34.5 ms.
        let (lost, rep) = lost_of(&mut r, t(32), 10, true, 1);
        assert!(lost.is_empty());
        assert_eq!(
            rep.reo_deadline,
            Some(t(32) + reo_timer_delay(Duration::from_micros(2500)))
        );
    }

    /// `tcpi_lost` and `tcpi_reordering` as Linux counts them: a lost segment stays counted
    /// after its retransmission until delivered; reordering is the span, in segments, from
    /// the highest SACKed byte down to a segment delivered below it.
    #[test]
    fn lost_out_keeps_retransmitted_losses_and_reordering_is_the_span() {
        let mut r = Rack::new(64);
        for p in 0..8u32 {
            r.on_send(p * 1000, p * 1000 + 1000, t(0), None);
        }
        r.on_ack(&Ack {
            rtt_sample: Some(d(50)),
            ..ack(t(50), 0, &[b(6000, 7000)])
        });
        let (lost, _) = lost_of(&mut r, t(70), 50, false, 1);
        assert_eq!(lost, vec![(0, 6000)]);
        assert_eq!((r.lost_out(), r.lost_bytes()), (6000, 6000));
        r.on_send(0, 1000, t(70), None);
        assert_eq!((r.lost_out(), r.lost_bytes()), (6000, 5000));
        assert_eq!(r.reordering(1000), DUP_THRESH);
        r.on_ack(&ack(t(75), 0, &[b(1000, 2000), b(6000, 7000)]));
        assert_eq!(r.lost_out(), 5000);
        assert_eq!(r.reordering(1000), 6, "7000 - 1000 over 1000-byte segments");
        r.on_ack(&ack(t(125), 8000, &[]));
        assert_eq!(r.lost_out(), 0);
        assert_eq!(r.reordering(1000), 6, "Linux keeps tp->reordering");
    }

    /// Linux `tcp_match_skb_to_sack`: SACK edges inside a segment move to its boundaries.
    #[test]
    fn sack_edges_inside_a_segment_move_to_its_boundaries() {
        // A four-segment record [1, 4001), segments of 1000.
        assert_eq!(
            sack_piece(1, 4001, 4000, 4001, 1000),
            None,
            "the last byte alone"
        );
        assert_eq!(sack_piece(1, 4001, 3001, 4001, 1000), Some((3001, 4001)));
        assert_eq!(sack_piece(1, 4001, 1500, 4001, 1000), Some((2001, 4001)));
        assert_eq!(sack_piece(1, 4001, 1, 2500, 1000), Some((1, 2001)));
        assert_eq!(sack_piece(1, 4001, 1, 999, 1000), None);
        assert_eq!(sack_piece(1, 4001, 1, 4001, 1000), Some((1, 4001)));
        let mut r = Rack::new(64);
        r.set_segment_size(1000);
        r.on_send(1, 4001, t(0), None);
        r.on_send(4001, 4501, t(5), None);
        assert_eq!(r.trim_sack(b(4000, 4001), 1000), None);
        assert_eq!(r.trim_sack(b(2500, 4501), 1000), Some(b(3001, 4501)));
        // A short record of its own is SACKed whole.
        assert_eq!(r.trim_sack(b(4001, 4501), 1000), Some(b(4001, 4501)));
        // Without a segment size nothing moves.
        assert_eq!(r.trim_sack(b(4000, 4001), 0), Some(b(4000, 4001)));
        // The byte SACKed alone neither advances RACK nor counts as delivered.
        let s = r.on_ack(&Ack {
            mss: 1000,
            ..ack(t(100), 1, &[b(4000, 4001)])
        });
        assert_eq!((s.delivered, s.advanced), (0, false));
    }

    /// Short segments sent at one instant (MSG_EOR records, small writes) are not merged into
    /// one record whose edges a SACK could not reach: each is SACKable, as each is an skb of
    /// its own in Linux. Whole segments still merge, and keep their boundaries.
    #[test]
    fn short_segments_sent_together_stay_sackable() {
        let mut r = Rack::new(64);
        r.set_segment_size(1000);
        for k in 0..4 {
            r.on_send(k * 100, k * 100 + 100, t(0), None);
        }
        assert_eq!(
            r.records().count(),
            4,
            "short segments are records of their own"
        );
        assert_eq!(r.trim_sack(b(200, 300), 1000), Some(b(200, 300)));
        let s = r.on_ack(&Ack {
            mss: 1000,
            ..ack(t(50), 0, &[b(200, 300)])
        });
        assert_eq!(s.delivered, 100, "the SACKed short segment is delivered");
        // Full segments of one burst are one record; a SACK edge inside one of them moves to
        // its boundary.
        let mut r = Rack::new(64);
        r.set_segment_size(1000);
        r.on_send(0, 1000, t(0), None);
        r.on_send(1000, 2000, t(0), None);
        r.on_send(2000, 2500, t(0), None);
        r.on_send(2500, 2600, t(0), None);
        let recs: Vec<_> = r.records().map(|q| (q.start, q.end)).collect();
        assert_eq!(recs, [(0, 2500), (2500, 2600)]);
        assert_eq!(r.trim_sack(b(1500, 2500), 1000), Some(b(2000, 2500)));
        assert_eq!(r.trim_sack(b(2500, 2600), 1000), Some(b(2500, 2600)));
        // A record cut at a byte that is no boundary forgets its boundaries: the SACK is taken
        // as it comes.
        let _ = r.on_ack(&Ack {
            mss: 1000,
            ..ack(t(50), 300, &[])
        });
        assert_eq!(r.trim_sack(b(1500, 2500), 1000), Some(b(1500, 2500)));
    }

    #[test]
    fn out_of_order_delivery_sets_reordering_seen_and_keeps_a_window_in_recovery() {
        let mut r = Rack::new(64);
        r.on_send(0, 1000, t(0), None);
        r.on_send(1000, 2000, t(1), None);
        let sack = [b(1000, 2000)];
        r.on_ack(&Ack {
            rtt_sample: Some(d(40)),
            ..ack(t(41), 0, &sack)
        });
        assert!(!r.reordering_seen());
        // Without reordering, recovery uses reo_wnd = 0 ...
        assert_eq!(r.reo_wnd(true, 1, Some(d(40))), Duration::ZERO);
        // ... and with DupThresh segments SACKed too.
        assert_eq!(r.reo_wnd(false, DUP_THRESH, Some(d(40))), Duration::ZERO);
        assert_eq!(r.reo_wnd(false, 1, Some(d(40))), d(10));
        // The original [0,1000) arrives late: delivered below RACK.fack, never retransmitted.
        r.on_ack(&ack(t(45), 2000, &[]));
        assert!(r.reordering_seen());
        assert_eq!(r.stats.reordering_events, 1);
        assert_eq!(r.reo_wnd(true, 5, Some(d(40))), d(10));
        // Capped at SRTT.
        assert_eq!(r.reo_wnd(true, 5, Some(d(4))), d(4));
    }

    #[test]
    fn spurious_ack_of_a_retransmission_is_ignored() {
        let mut r = Rack::new(64);
        r.on_send(0, 1000, t(0), Some(0));
        r.on_ack(&Ack {
            rtt_sample: Some(d(100)),
            ..ack(t(100), 1000, &[])
        });
        r.on_send(1000, 2000, t(100), Some(100));
        r.on_send(2000, 3000, t(110), Some(110));
        // [1000,2000) retransmitted at 250 (TSval 250); the ACK echoes the original's
        // TSval 100: it acknowledges the original, not the retransmission.
        r.on_send(1000, 2000, t(250), Some(250));
        r.on_ack(&Ack {
            tsecr: Some(100),
            ..ack(t(260), 2000, &[])
        });
        assert_eq!(r.segment(), Some((t(0), 1000)), "RACK.segment unchanged");
        // Without timestamps: retransmitted less than min_RTT ago -> ignored as well.
        r.on_send(2000, 3000, t(300), None);
        r.on_ack(&ack(t(310), 3000, &[]));
        assert_eq!(r.segment(), Some((t(0), 1000)));
        // A retransmission acknowledged a full RTT later counts.
        r.on_send(3000, 4000, t(320), Some(320));
        r.on_send(3000, 4000, t(400), Some(400));
        r.on_ack(&Ack {
            tsecr: Some(400),
            ..ack(t(500), 4000, &[])
        });
        assert_eq!(r.segment(), Some((t(400), 4000)));
        assert_eq!(r.rtt(), d(100));
    }

    #[test]
    fn dsack_rounds_grow_the_window_and_sixteen_recoveries_reset_it() {
        let mut r = Rack::new(64);
        r.on_send(0, 1000, t(0), None);
        r.on_ack(&Ack {
            rtt_sample: Some(d(40)),
            ..ack(t(40), 1000, &[])
        });
        r.reordering_seen = true;
        let ds = Some(b(0, 500));
        let a = Ack {
            snd_nxt: 5000,
            dsack: ds,
            ..ack(t(50), 1000, &[])
        };
        r.on_ack(&a);
        assert_eq!((r.reo_wnd_mult(), r.reo_wnd_persist()), (2, 16));
        assert_eq!(r.reo_wnd(false, 0, Some(d(100))), d(20));
        // Same round (SND.UNA below the round's SND.NXT): no further growth.
        r.on_ack(&Ack { una: 4000, ..a });
        assert_eq!(r.reo_wnd_mult(), 2);
        // Round over: the next D-SACK grows it again.
        r.on_ack(&Ack {
            una: 5000,
            snd_nxt: 9000,
            ..a
        });
        assert_eq!(r.reo_wnd_mult(), 3);
        for _ in 0..15 {
            r.on_recovery_exit();
        }
        assert_eq!(r.reo_wnd_mult(), 3);
        r.on_undo(); // a spurious recovery does not count
        r.on_recovery_exit();
        assert_eq!(r.reo_wnd_mult(), 3);
        r.on_recovery_exit();
        assert_eq!(r.reo_wnd_mult(), 1, "16 D-SACK-free recoveries");
    }

    #[test]
    fn partial_sacks_split_a_burst_and_the_tie_break_orders_it() {
        // One GSO burst of four segments at the same instant: one record.
        let mut r = Rack::new(64);
        r.on_send(0, 1000, t(0), None);
        r.on_ack(&Ack {
            rtt_sample: Some(d(10)),
            ..ack(t(10), 1000, &[])
        });
        r.on_send(1000, 5000, t(20), None);
        assert_eq!(r.records().count(), 1);
        // The middle two segments SACKed: the record splits around them.
        let sack = [b(2000, 4000)];
        r.on_ack(&ack(t(30), 1000, &sack));
        let v: Vec<_> = r.records().map(|s| (s.start, s.end)).collect();
        assert_eq!(v, vec![(1000, 2000), (4000, 5000)]);
        // Same xmit_ts: [1000,2000) ends below RACK.end_seq (4000) -> lost after reo_wnd
        // (no reordering, 2 SACKed < DupThresh -> min_RTT/4 = 2.5 ms); [4000,5000) is not.
        let (lost, _) = lost_of(&mut r, t(33), 10, false, 2);
        assert_eq!(lost, vec![(1000, 2000)]);
        check(&r);
    }

    #[test]
    fn min_rtt_filter_forgets_after_its_window() {
        let mut f = MinFilter::default();
        let w = d(300_000);
        f.update(t(0), d(100), w);
        f.update(t(10_000), d(150), w);
        assert_eq!(f.get(), Some(d(100)));
        f.update(t(100_000), d(160), w);
        f.update(t(200_000), d(170), w);
        assert_eq!(f.get(), Some(d(100)));
        // 300 s after the minimum it has aged out; the best later sample remains.
        f.update(t(301_000), d(180), w);
        assert!(f.get().unwrap() > d(100), "{:?}", f.get());
        f.update(t(302_000), d(90), w);
        assert_eq!(f.get(), Some(d(90)));
    }

    #[test]
    fn tlp_pto_rules() {
        let tlp = Tlp::new(TLP_MAX_ACK_DELAY);
        // 2*SRTT, + max_ack_delay with one segment in flight, 1 s without SRTT.
        assert_eq!(tlp.pto_deadline(t(0), Some(d(30)), false, None), t(60));
        assert_eq!(tlp.pto_deadline(t(0), Some(d(30)), true, None), t(260));
        assert_eq!(tlp.pto_deadline(t(0), None, false, None), t(1000));
        // Never after the RTO.
        assert_eq!(
            tlp.pto_deadline(t(0), Some(d(30)), true, Some(t(200))),
            t(200)
        );
        assert_eq!(
            tlp.pto_deadline(t(0), Some(d(30)), false, Some(t(200))),
            t(60)
        );
        // Not with SACKed data, in recovery or without SACK.
        assert!(!tlp.may_schedule(true, 1, false));
        assert!(!tlp.may_schedule(true, 0, true));
        assert!(!tlp.may_schedule(false, 0, false));
    }

    #[test]
    fn tlp_probe_choice_and_episode() {
        let mut tlp = Tlp::new(TLP_MAX_ACK_DELAY);
        let c = ProbeCtx {
            snd_una: 0,
            snd_nxt: 3000,
            unsent: 5000,
            wnd_room: 2000,
            smss: 1000,
        };
        // No RTT sample yet since the connection started: no probe.
        assert_eq!(tlp.on_pto(c), Probe::None);
        tlp.on_rtt_sample();
        assert_eq!(
            tlp.on_pto(c),
            Probe::NewData {
                seq: 3000,
                len: 1000
            }
        );
        // The window does not allow new data: the last segment.
        let shut = ProbeCtx { wnd_room: 500, ..c };
        assert_eq!(
            tlp.on_pto(shut),
            Probe::Retransmit {
                seq: 2000,
                len: 1000
            }
        );
        // Less than a segment in flight.
        let short = ProbeCtx {
            snd_nxt: 300,
            unsent: 0,
            ..c
        };
        assert_eq!(tlp.on_pto(short), Probe::Retransmit { seq: 0, len: 300 });
        assert_eq!(
            tlp.on_pto(ProbeCtx {
                snd_nxt: 0,
                unsent: 0,
                ..c
            }),
            Probe::None
        );
        // New-data probe: delivered ends the episode without a response.
        let p = tlp.on_pto(c);
        tlp.on_probe_sent(p, 4000);
        assert_eq!(tlp.episode(), Some(4000));
        tlp.on_rtt_sample();
        assert_eq!(tlp.on_pto(c), Probe::None, "one probe at a time");
        assert_eq!(tlp.on_ack(3000, None, false), TlpAck::Pending);
        assert_eq!(tlp.on_ack(4000, None, false), TlpAck::Ended);
        // Retransmitted probe, ACK beyond it: it repaired a loss.
        tlp.on_rtt_sample();
        tlp.on_probe_sent(
            Probe::Retransmit {
                seq: 3000,
                len: 1000,
            },
            4000,
        );
        assert_eq!(tlp.on_pto(c), Probe::None, "no RTT sample since the probe");
        assert_eq!(tlp.on_ack(4000, None, false), TlpAck::Pending);
        assert_eq!(tlp.on_ack(4500, None, false), TlpAck::RepairedLoss);
        assert_eq!(tlp.episode(), None);
        // D-SACK for the probe: both copies arrived, no loss.
        tlp.on_probe_sent(
            Probe::Retransmit {
                seq: 3000,
                len: 1000,
            },
            4000,
        );
        assert_eq!(tlp.on_ack(4000, Some(b(3000, 4000)), false), TlpAck::Ended);
        // A pure duplicate ACK at TLP.end_seq: the same.
        tlp.on_probe_sent(
            Probe::Retransmit {
                seq: 3000,
                len: 1000,
            },
            4000,
        );
        assert_eq!(tlp.on_ack(4000, None, true), TlpAck::Ended);
        // Reset (entering recovery) ends it silently.
        tlp.on_probe_sent(
            Probe::Retransmit {
                seq: 3000,
                len: 1000,
            },
            4000,
        );
        tlp.reset();
        assert_eq!(tlp.on_ack(9000, None, false), TlpAck::Pending);
    }

    #[test]
    fn overflow_forgets_and_recovers() {
        let mut r = Rack::new(4);
        for i in 0..4u32 {
            r.on_send(i * 100, i * 100 + 100, t(u64::from(i)), None);
        }
        // Contiguous records merge in pairs when a fifth arrives.
        r.on_send(400, 500, t(10), None);
        check(&r);
        assert_eq!(r.stats.overflows, 0);
        let v: Vec<_> = r
            .records()
            .map(|s| (s.start, s.end, s.xmit_ts, s.first_ts))
            .collect();
        assert_eq!(v[0], (0, 200, t(1), t(0)));
        // Records separated by SACKed gaps cannot merge: a retransmission needing two
        // more slots forgets the table, and recording starts again.
        let mut r = Rack::new(2);
        r.on_send(0, 100, t(0), None);
        r.on_send(100, 200, t(1), None);
        r.on_ack(&ack(t(5), 0, &[b(150, 160)]));
        let v: Vec<_> = r.records().map(|s| (s.start, s.end)).collect();
        assert_eq!(v, vec![(0, 150), (160, 200)]);
        r.on_send(0, 50, t(6), None);
        assert_eq!(r.stats.overflows, 1);
        assert_eq!(r.records().count(), 0);
        check(&r);
        r.on_send(200, 300, t(7), None);
        assert_eq!(r.records().count(), 1);
        check(&r);
    }

    /// A whole transfer over a simulated path (20 ms one way, a 10-segment window) wired as
    /// the integration plan says: ACK -> on_ack + detect_loss, reordering timer, PTO -> TLP,
    /// RTO as the last resort. The path drops segment 5 and then its retransmission (only an
    /// RTO repairs that without RACK), segments 20, 30 and 31, and the tail segment 59 (a
    /// job for the TLP). Everything must arrive without a single RTO.
    #[test]
    fn simulated_transfer_repairs_lost_retransmissions_without_rto() {
        use crate::tcp::sack::Scoreboard;
        use std::cmp::Reverse;
        use std::collections::{BinaryHeap, HashMap};

        const MSS: u32 = 1000;
        const SEGS: u32 = 60;
        const WIN: u32 = 10 * MSS;
        const OWD: u64 = 20;
        const RTO: u64 = 1000;
        let total = SEGS * MSS;
        // (segment index, transmission number) dropped by the path.
        let drops = [(5, 1), (5, 2), (20, 1), (30, 1), (31, 1), (59, 1)];
        enum Ev {
            Data(u32, u32, u32),
            Ack(u32, Vec<SackBlock>, u32),
        }
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let mut evs: Vec<Ev> = vec![];
        let mut tx: HashMap<u32, u32> = HashMap::new();
        let mut r = Rack::new(capacity_for(WIN as usize, MSS));
        let mut tlp = Tlp::new(TLP_MAX_ACK_DELAY);
        let mut sb = Scoreboard::new();
        let (mut una, mut nxt) = (0u32, 0u32);
        let (mut rcv_nxt, mut held): (u32, Vec<(u32, u32)>) = (0, vec![]);
        let mut srtt: Option<Duration> = None;
        let (mut rto_at, mut pto_at, mut reo_at): (Option<u64>, Option<u64>, Option<u64>) =
            (None, None, None);
        let mut recovery: Option<u32> = None;
        let (mut rtos, mut probes) = (0, 0);
        let mut now = 0u64;

        // Sends [s, e) at `now` through the lossy path.
        let mut send = |s: u32,
                        e: u32,
                        now: u64,
                        r: &mut Rack,
                        heap: &mut BinaryHeap<_>,
                        evs: &mut Vec<Ev>| {
            let n = tx.entry(s / MSS).or_insert(0);
            *n += 1;
            r.on_send(s, e, t(now), Some(now as u32));
            if !drops.contains(&(s / MSS, *n)) {
                evs.push(Ev::Data(s, e, now as u32));
                heap.push(Reverse((now + OWD, evs.len() - 1)));
            }
        };
        for _ in 0..100_000 {
            if una == total {
                break;
            }
            // Output: lost ranges first (RFC 6675 NextSeg rule 1 via RACK), then new data.
            while let Some((s, e)) = r.next_lost(una) {
                send(s, e.min(s + MSS), now, &mut r, &mut heap, &mut evs);
            }
            while nxt < total && nxt - una < WIN {
                send(nxt, nxt + MSS, now, &mut r, &mut heap, &mut evs);
                nxt += MSS;
            }
            if una != nxt {
                rto_at.get_or_insert(now + RTO);
                let sacked = segs_sacked(sb.sacked_bytes(), MSS);
                if pto_at.is_none()
                    && tlp.episode().is_none()
                    && tlp.may_schedule(true, sacked, recovery.is_some())
                {
                    let at = tlp.pto_deadline(t(now), srtt, nxt - una <= MSS, rto_at.map(t));
                    pto_at = Some(at.total_micros() / MS);
                }
            }
            // The next event: a packet, or a timer.
            let pkt = heap.peek().map(|Reverse((at, _))| *at);
            let next = [pkt, rto_at, pto_at, reo_at].into_iter().flatten().min();
            let Some(next) = next else { break };
            now = next;
            let sacked = segs_sacked(sb.sacked_bytes(), MSS);
            if rto_at == Some(now) {
                rtos += 1;
                r.on_rto(t(now), una, |_, _| {});
                tlp.reset();
                rto_at = None;
                continue;
            }
            if pto_at == Some(now) {
                pto_at = None;
                let c = ProbeCtx {
                    snd_una: una,
                    snd_nxt: nxt,
                    unsent: total - nxt,
                    wnd_room: (una + WIN).saturating_sub(nxt),
                    smss: MSS,
                };
                match tlp.on_pto(c) {
                    Probe::None => {}
                    p @ (Probe::NewData { seq, len } | Probe::Retransmit { seq, len }) => {
                        probes += 1;
                        send(seq, seq + len, now, &mut r, &mut heap, &mut evs);
                        nxt = nxt.max(seq + len);
                        tlp.on_probe_sent(p, nxt);
                        rto_at = Some(now + RTO);
                    }
                }
                continue;
            }
            if reo_at == Some(now) {
                let rep = r.on_reorder_timeout(t(now), srtt, recovery.is_some(), sacked, |_, _| {});
                reo_at = rep.reo_deadline.map(|d| d.total_micros() / MS);
                continue;
            }
            let Some(Reverse((_, i))) = heap.pop() else {
                break;
            };
            match &evs[i] {
                Ev::Data(s, e, tsval) => {
                    // Receiver: store, advance RCV.NXT, ACK with SACK blocks (newest first).
                    let (s, e) = (*s, *e);
                    if e > rcv_nxt {
                        held.push((s.max(rcv_nxt), e));
                        held.sort();
                        let mut m: Vec<(u32, u32)> = vec![];
                        for (l, h) in held.drain(..) {
                            match m.last_mut() {
                                Some(x) if l <= x.1 => x.1 = x.1.max(h),
                                _ => m.push((l, h)),
                            }
                        }
                        held = m;
                        if held.first().is_some_and(|&(l, _)| l <= rcv_nxt) {
                            rcv_nxt = held.remove(0).1;
                        }
                    }
                    let mut blocks: Vec<SackBlock> = held
                        .iter()
                        .filter(|&&(l, h)| l <= s && s < h)
                        .map(|&(l, h)| b(l, h))
                        .collect();
                    for &(l, h) in held.iter().rev() {
                        if blocks.len() < 3 && !blocks.contains(&b(l, h)) {
                            blocks.push(b(l, h));
                        }
                    }
                    evs.push(Ev::Ack(rcv_nxt, blocks, *tsval));
                    heap.push(Reverse((now + OWD, evs.len() - 1)));
                }
                Ev::Ack(ack, blocks, tsecr) => {
                    let (ack, tsecr) = (*ack, *tsecr);
                    let (_, sack) = crate::tcp::dsack::split_dsack(ack, blocks);
                    let mut sample = None;
                    if ack > una {
                        una = ack;
                        sb.advance(una);
                        sample = Some(d(now - u64::from(tsecr)));
                        srtt = sample;
                        tlp.on_rtt_sample();
                        rto_at = (una != nxt).then_some(now + RTO);
                        pto_at = None;
                    }
                    for blk in sack {
                        sb.add(*blk, una, nxt);
                    }
                    r.on_ack(&Ack {
                        now: t(now),
                        una,
                        snd_nxt: nxt,
                        sack,
                        dsack: None,
                        tsecr: Some(tsecr),
                        rtt_sample: sample,
                        mss: 0,
                    });
                    // RepairedLoss would reduce cwnd here; the simulation has no cwnd.
                    let _ = tlp.on_ack(una, None, false);
                    let sacked = segs_sacked(sb.sacked_bytes(), MSS);
                    let rep = r.detect_loss(t(now), srtt, recovery.is_some(), sacked, |_, _| {});
                    reo_at = rep.reo_deadline.map(|d| d.total_micros() / MS);
                    if rep.newly_lost_bytes > 0 && recovery.is_none() {
                        recovery = Some(nxt);
                        tlp.reset();
                        pto_at = None;
                    }
                    if recovery.is_some_and(|p| una >= p) {
                        recovery = None;
                        r.on_recovery_exit();
                    }
                }
            }
        }
        assert_eq!(una, total, "transfer incomplete");
        assert_eq!(rtos, 0, "no RTO needed");
        assert!(r.stats.lost_retransmissions >= 1, "{:?}", r.stats);
        assert!(probes >= 1, "the tail loss needs a probe");
        assert_eq!(tx[&5], 3, "segment 5 sent three times");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Any mix of sends, retransmissions, ACKs with arbitrary (hostile) SACK blocks,
        /// loss detection and RTOs: no panic, memory within the bound, invariants kept.
        #[test]
        fn no_input_panics_or_grows_past_the_bound(
            cap in 2usize..24,
            base in any::<u32>(),
            ops in proptest::collection::vec(
                (0u8..5, any::<u16>(), any::<u16>(), proptest::collection::vec((any::<u16>(), any::<u16>()), 0..5), any::<bool>()),
                1..80),
        ) {
            let mut r = Rack::new(cap);
            let mut tlp = Tlp::new(TLP_MAX_ACK_DELAY);
            let mut now = 0u64;
            let mut nxt = base;
            let mut una = base;
            for (op, x, y, blocks, flag) in ops {
                now += u64::from(x % 50);
                let at = Instant::from_millis(now);
                match op {
                    0 => {
                        let len = u32::from(y % 3000) + 1;
                        r.on_send(nxt, nxt.wrapping_add(len), at, Some(now as u32));
                        nxt = nxt.wrapping_add(len);
                    }
                    1 => {
                        let flight = nxt.wrapping_sub(una);
                        if flight > 0 {
                            let s = una.wrapping_add(u32::from(x) % flight);
                            let e = s.wrapping_add(u32::from(y % 2000) + 1);
                            r.on_send(s, e, at, if flag { Some(now as u32) } else { None });
                            nxt = seq::max(nxt, e);
                        }
                    }
                    2 => {
                        let flight = nxt.wrapping_sub(una);
                        if flight > 0 && flag {
                            una = una.wrapping_add(u32::from(x) % (flight + 1));
                        }
                        let sack: Vec<SackBlock> = blocks
                            .iter()
                            .map(|&(l, len)| {
                                let left = una.wrapping_add(u32::from(l)).wrapping_sub(1000);
                                b(left, left.wrapping_add(u32::from(len)))
                            })
                            .collect();
                        let a = Ack {
                            now: at,
                            una,
                            snd_nxt: nxt,
                            sack: &sack,
                            dsack: sack.first().copied().filter(|_| flag),
                            tsecr: Some(u32::from(y)),
                            rtt_sample: Some(Duration::from_millis(u64::from(y % 300))),
                            mss: u32::from(x % 3) * 500,
                        };
                        r.on_ack(&a);
                        let _ = tlp.on_ack(una, a.dsack, flag);
                    }
                    3 => {
                        let srtt = Some(Duration::from_millis(u64::from(x % 300)));
                        let mut lost = vec![];
                        let _ = r.detect_loss(at, srtt, flag, u32::from(y % 5), |s, e| lost.push((s, e)));
                        // Safety: only segments sent before RACK.segment, and at least
                        // RACK.rtt + RACK.reo_wnd ago, are ever declared lost.
                        let (rts, rend) = r.segment().unwrap_or((at, 0));
                        for (s, e) in lost {
                            let rec = r.records().find(|q| q.start == s && q.end == e);
                            prop_assert!(rec.is_some_and(|q| q.lost
                                && sent_after(rts, rend, q.xmit_ts, q.end)
                                && q.xmit_ts + r.rtt() + r.current_reo_wnd() <= at));
                        }
                        if flag { r.on_recovery_exit(); }
                    }
                    _ => {
                        let _ = r.on_rto(at, una, |_, _| {});
                        let _ = r.next_lost(una);
                        tlp.on_rtt_sample();
                        let p = tlp.on_pto(ProbeCtx { snd_una: una, snd_nxt: nxt, unsent: u32::from(x), wnd_room: u32::from(y), smss: 1448 });
                        tlp.on_probe_sent(p, nxt);
                    }
                }
                check(&r);
                prop_assert!(r.records().count() <= cap.max(2));
                prop_assert!(r.reo_wnd_mult() <= REO_WND_MULT_MAX);
            }
        }
    }
}
