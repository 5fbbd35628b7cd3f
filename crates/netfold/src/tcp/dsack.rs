//! D-SACK (RFC 2883): reporting duplicate segments as the receiver, recognising the report
//! as the sender, and undoing a congestion response whose retransmissions all turn out to
//! have been unnecessary (RFC 3708 §3's detection, with Linux's `undo_retrans` accounting).
//!
//! Receiver: when a segment arrives, before it is stored, [`duplicate_block`] finds the part
//! of it the receiver already holds; [`DsackReport`] keeps that block until the next ACK
//! leaves and [`DsackReport::compose`] puts it first among the SACK blocks.
//!
//! Sender: [`split_dsack`] separates a D-SACK block from the SACK blocks of an arriving ACK
//! (a D-SACK must not be counted as newly SACKed data); [`DsackSender::on_dsack`] filters
//! dubious reports and counts the rest toward [`DsackSender::take_undo`]; the accepted
//! block also feeds RACK's reordering-window adaptation (`rack::Ack::dsack`) and the tail
//! loss probe's episode end (`rack::Tlp::on_ack`).

use super::seq;
use crate::wire::tcp::SackBlock;

/// RFC 2883 §4: the first SACK block reports the duplicate.
///
/// "When D-SACK is used, the first block of the SACK option should be a D-SACK block
/// specifying the sequence numbers for the duplicate segment that triggers the
/// acknowledgement." and "The left edge of the D-SACK block specifies the first sequence
/// number of the duplicate contiguous sequence, and the right edge of the D-SACK block
/// specifies the sequence number immediately following the last sequence in the duplicate
/// contiguous sequence."
///
/// `[seg_start, seg_end)` is the arriving segment's data, `rcv_nxt` the receiver's RCV.NXT
/// and `held` the out-of-order ranges it holds above RCV.NXT, all *before* this segment is
/// stored. The part below RCV.NXT is reported first (RFC 2883 §4.2 examples 4 and 5: "the
/// receiver reports the first such duplicate segment"); otherwise the lowest overlap with a
/// held range (example 3, and example 6 where the segment holds two duplicate pieces).
/// `None` when nothing in the segment is a duplicate or the range is malformed.
pub fn duplicate_block(
    seg_start: u32,
    seg_end: u32,
    rcv_nxt: u32,
    held: impl IntoIterator<Item = SackBlock>,
) -> Option<SackBlock> {
    if !seq::lt(seg_start, seg_end) {
        return None;
    }
    if seq::lt(seg_start, rcv_nxt) {
        return Some(SackBlock {
            left: seg_start,
            right: seq::min(seg_end, rcv_nxt),
        });
    }
    let mut best: Option<SackBlock> = None;
    for h in held {
        let left = seq::max(h.left, seg_start);
        let right = seq::min(h.right, seg_end);
        if seq::lt(left, right) && best.is_none_or(|b| seq::lt(left, b.left)) {
            best = Some(SackBlock { left, right });
        }
    }
    best
}

/// Receiver-side pending D-SACK block.
///
/// RFC 2883 §4: "each duplicate contiguous sequence of data received is reported in at most
/// one D-SACK block. (I.e., the receiver sends two identical D-SACK blocks in subsequent
/// packets only if the receiver receives two duplicate segments.)"
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DsackReport {
    pending: Option<SackBlock>,
}

impl DsackReport {
    /// A duplicate arrived (the result of [`duplicate_block`]); the newest one is reported,
    /// since the D-SACK describes "the duplicate segment that triggers the acknowledgement".
    pub fn record(&mut self, block: Option<SackBlock>) {
        if block.is_some() {
            self.pending = block;
        }
    }

    #[cfg(test)]
    pub fn pending(&self) -> Option<SackBlock> {
        self.pending
    }

    /// The SACK blocks of the next ACK: the D-SACK block first, then `regular` (the RFC 2018
    /// blocks, most recent first), at most `max` in all (4, or 3 with timestamps).
    ///
    /// RFC 2883 §4: "If the D-SACK block reports a duplicate contiguous sequence from a
    /// (possibly larger) block of data in the receiver's data queue above the cumulative
    /// acknowledgement, then the second SACK block in that SACK option should specify that
    /// (possibly larger) block of data." The caller's most recent regular block is that
    /// block (the range the duplicate fell into), so it follows unchanged, even when it
    /// equals the D-SACK block: the sender recognises the D-SACK by that containment.
    pub fn compose(&self, regular: &[SackBlock], max: usize) -> ([SackBlock; 4], usize) {
        let mut out = [SackBlock::default(); 4];
        let max = max.min(out.len());
        let mut n = 0;
        if let Some(d) = self.pending {
            if n < max {
                out[n] = d;
                n += 1;
            }
        }
        for b in regular {
            if n == max {
                break;
            }
            out[n] = *b;
            n += 1;
        }
        (out, n)
    }

    /// A D-SACK block waits for the next ACK.
    #[inline]
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// An ACK carrying the pending block left: it is not repeated.
    pub fn on_ack_sent(&mut self) {
        self.pending = None;
    }
}

/// Sender side, RFC 2883 §4 read from the sender (as Linux `tcp_check_dsack`): the first
/// SACK block is a D-SACK when it lies below the cumulative acknowledgement, or when it is
/// contained in the second block. Returns the D-SACK block, if any, and the blocks that
/// report newly received data (the second block stays a regular SACK block).
pub fn split_dsack(ack: u32, blocks: &[SackBlock]) -> (Option<SackBlock>, &[SackBlock]) {
    let Some(first) = blocks.first() else {
        return (None, blocks);
    };
    if !seq::lt(first.left, first.right) {
        return (None, blocks);
    }
    let below_ack = seq::lt(first.left, ack);
    let inside_second = blocks.get(1).is_some_and(|s| {
        seq::lt(s.left, s.right) && seq::ge(first.left, s.left) && seq::le(first.right, s.right)
    });
    if below_ack || inside_second {
        (Some(*first), &blocks[1..])
    } else {
        (None, blocks)
    }
}

/// One loss-recovery episode whose congestion response may be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Episode {
    /// SND.UNA when the episode began (Linux `undo_marker`): D-SACKs of data above it
    /// report this episode's retransmissions.
    marker: u32,
    /// Retransmissions of this episode not yet reported as duplicates (Linux
    /// `undo_retrans`); `None` before the first retransmission.
    unconfirmed: Option<u64>,
    prior_cwnd: u32,
    prior_ssthresh: u32,
}

/// Counters for D-SACK processing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DsackStats {
    /// D-SACK blocks accepted.
    pub received: u64,
    /// D-SACK blocks ignored as dubious (larger than any window the peer offered, or
    /// reporting more duplicates than we ever retransmitted).
    pub dubious: u64,
    /// Congestion responses undone.
    pub undos: u64,
}

/// Sender-side D-SACK accounting: dubious-report filter and spurious-retransmission undo.
///
/// RFC 3708 §3 detects a spurious retransmission when the D-SACKs "account for all the
/// retransmissions" of a loss episode. As in Linux (`tcp_init_undo`, `tcp_dsack_seen`,
/// `tcp_try_undo_dsack`), the episode counts its retransmitted segments and each D-SACKed
/// segment of the episode cancels one; when none is left, the window reduction is undone.
#[derive(Debug, Clone, Default)]
pub struct DsackSender {
    /// Segments retransmitted over the connection's life, and duplicates reported: a peer
    /// reporting more duplicates than we sent retransmissions is not believed (Linux
    /// `tcp_dsack_seen`: "Skip the DSACK if dup segs weren't retransmitted by sender").
    total_retrans: u64,
    dsack_dups: u64,
    episode: Option<Episode>,
    pub stats: DsackStats,
}

impl DsackSender {
    /// A congestion response begins (fast recovery, RTO, TLP-detected loss): remember what to
    /// restore. A new episode replaces an earlier one that was not undone.
    pub fn start_episode(&mut self, snd_una: u32, prior_cwnd: u32, prior_ssthresh: u32) {
        self.episode = Some(Episode {
            marker: snd_una,
            unconfirmed: None,
            prior_cwnd,
            prior_ssthresh,
        });
    }

    /// `segs` segments were retransmitted (any cause).
    pub fn on_retransmit(&mut self, segs: u32) {
        self.total_retrans = self.total_retrans.saturating_add(u64::from(segs));
        if let Some(e) = self.episode.as_mut() {
            e.unconfirmed = Some(e.unconfirmed.unwrap_or(0).saturating_add(u64::from(segs)));
        }
    }

    /// A D-SACK block arrived (from [`split_dsack`]). Returns how many duplicate segments it
    /// reports, or 0 when it is dubious and must be ignored (also by RACK and TLP).
    ///
    /// Dubious, as in Linux `tcp_dsack_seen`: longer than the largest window the peer ever
    /// offered (it cannot hold that much duplicate data), or pushing the total of reported
    /// duplicates above the retransmissions we made. Either would let a peer inflate the
    /// reordering window or undo congestion responses at will.
    pub fn on_dsack(&mut self, block: SackBlock, mss: u32, max_window: u32) -> u32 {
        if !seq::lt(block.left, block.right) {
            self.stats.dubious += 1;
            return 0;
        }
        let len = block.right.wrapping_sub(block.left);
        if len > max_window {
            self.stats.dubious += 1;
            return 0;
        }
        let dups = len.div_ceil(mss.max(1)).max(1);
        if self.dsack_dups.saturating_add(u64::from(dups)) > self.total_retrans {
            self.stats.dubious += 1;
            return 0;
        }
        self.dsack_dups += u64::from(dups);
        self.stats.received += 1;
        if let Some(e) = self.episode.as_mut() {
            if let Some(u) = e.unconfirmed.as_mut() {
                if seq::gt(block.right, e.marker) {
                    *u = u.saturating_sub(u64::from(dups));
                }
            }
        }
        dups
    }

    /// Whether [`DsackTx::take_undo`] would undo now: an episode whose retransmissions were
    /// all reported as duplicates (Linux `tcp_try_undo_dsack`'s `tp->undo_marker &&
    /// !tp->undo_retrans`). Asked first on every ACK, so that the window is read only then.
    #[inline]
    pub fn undo_due(&self) -> bool {
        matches!(self.episode, Some(e) if e.unconfirmed == Some(0))
    }

    /// Linux `tcp_try_undo_dsack`: every retransmission of the episode was reported as a
    /// duplicate, so the loss that caused it was not real. Returns the (cwnd, ssthresh) to
    /// restore (never lower than now, as Linux `tcp_undo_cwnd_reduction`) and ends the
    /// episode; `None` while some retransmission is unaccounted for.
    pub fn take_undo(&mut self, cwnd_now: u32, ssthresh_now: u32) -> Option<(u32, u32)> {
        let e = self.episode?;
        if e.unconfirmed != Some(0) {
            return None;
        }
        self.episode = None;
        self.stats.undos += 1;
        Some((
            cwnd_now.max(e.prior_cwnd),
            ssthresh_now.max(e.prior_ssthresh),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(l: u32, r: u32) -> SackBlock {
        SackBlock { left: l, right: r }
    }

    /// A receiver model for the RFC 2883 §4 tables: RCV.NXT plus held out-of-order ranges;
    /// `arrive` returns the ACK number and the SACK blocks of the ACK it sends, with RFC 2018
    /// history for the regular blocks (most recent first).
    struct Rx {
        nxt: u32,
        held: Vec<(u32, u32)>,
        hist: Vec<SackBlock>,
        report: DsackReport,
    }

    impl Rx {
        fn new(nxt: u32) -> Self {
            Rx {
                nxt,
                held: vec![],
                hist: vec![],
                report: DsackReport::default(),
            }
        }
        fn arrive(&mut self, s: u32, e: u32) -> (u32, Vec<SackBlock>) {
            let held = self.held.iter().map(|&(l, r)| b(l, r));
            self.report
                .record(duplicate_block(s, e, self.nxt, held.collect::<Vec<_>>()));
            // Store the new bytes, merge, advance RCV.NXT.
            let (s2, e2) = (s.max(self.nxt), e);
            if s2 < e2 {
                self.held.push((s2, e2));
                self.held.sort();
                let mut m: Vec<(u32, u32)> = vec![];
                for (l, r) in self.held.drain(..) {
                    match m.last_mut() {
                        Some(last) if l <= last.1 => last.1 = last.1.max(r),
                        _ => m.push((l, r)),
                    }
                }
                self.held = m;
                if let Some(&(l, r)) = self.held.first() {
                    if l <= self.nxt {
                        self.nxt = self.nxt.max(r);
                        self.held.remove(0);
                    }
                }
                // RFC 2018 §4: the block holding the newest segment first, then history.
                if s2 >= self.nxt || self.held.iter().any(|&(l, r)| l <= s2 && s2 < r) {
                    if let Some(&(l, r)) = self.held.iter().find(|&&(l, r)| l <= s2 && s2 < r) {
                        self.hist.retain(|h| h.right <= l || h.left >= r);
                        self.hist.insert(0, b(l, r));
                    }
                }
            } else if let Some(&(l, r)) = self.held.iter().find(|&&(l, r)| l <= s && s < r) {
                // A duplicate of held data: its block is the most recent.
                self.hist.retain(|h| h.right <= l || h.left >= r);
                self.hist.insert(0, b(l, r));
            }
            let nxt = self.nxt;
            self.hist.retain(|h| h.left >= nxt);
            let held = self.held.clone();
            self.hist
                .retain(|h| held.iter().any(|&(l, r)| l == h.left && r == h.right));
            let (blocks, n) = self.report.compose(&self.hist, 4);
            self.report.on_ack_sent();
            (self.nxt, blocks[..n].to_vec())
        }
    }

    #[test]
    fn rfc2883_example_1_duplicate_segment() {
        // 3000-3499 and 3500-3999 arrive (ACKs dropped); 3000-3499 arrives again.
        let mut rx = Rx::new(3000);
        assert_eq!(rx.arrive(3000, 3500), (3500, vec![]));
        assert_eq!(rx.arrive(3500, 4000), (4000, vec![]));
        assert_eq!(rx.arrive(3000, 3500), (4000, vec![b(3000, 3500)]));
        // Reported once: the next ACK carries no D-SACK.
        assert_eq!(rx.report.pending(), None);
        // The sender sees a block below the cumulative ACK: a D-SACK.
        let blocks = [b(3000, 3500)];
        assert_eq!(split_dsack(4000, &blocks), (Some(b(3000, 3500)), &[][..]));
    }

    #[test]
    fn rfc2883_example_2_out_of_order_and_duplicate() {
        let mut rx = Rx::new(3000);
        rx.arrive(3000, 3500);
        rx.arrive(3500, 4000);
        // 4000-4499 dropped.
        assert_eq!(rx.arrive(4500, 5000), (4000, vec![b(4500, 5000)]));
        assert_eq!(
            rx.arrive(3000, 3500),
            (4000, vec![b(3000, 3500), b(4500, 5000)])
        );
        let blocks = [b(3000, 3500), b(4500, 5000)];
        assert_eq!(
            split_dsack(4000, &blocks),
            (Some(b(3000, 3500)), &[b(4500, 5000)][..])
        );
    }

    #[test]
    fn rfc2883_example_3_duplicate_of_out_of_order_segment() {
        let mut rx = Rx::new(3500);
        assert_eq!(rx.arrive(3500, 4000), (4000, vec![]));
        // 4000-4499 dropped.
        assert_eq!(rx.arrive(4500, 5000), (4000, vec![b(4500, 5000)]));
        assert_eq!(rx.arrive(5000, 5500), (4000, vec![b(4500, 5500)]));
        // The network duplicates 5000-5499.
        assert_eq!(
            rx.arrive(5000, 5500),
            (4000, vec![b(5000, 5500), b(4500, 5500)])
        );
        // Above the ACK but inside the second block: a D-SACK; the second block stays.
        let blocks = [b(5000, 5500), b(4500, 5500)];
        assert_eq!(
            split_dsack(4000, &blocks),
            (Some(b(5000, 5500)), &[b(4500, 5500)][..])
        );
    }

    #[test]
    fn rfc2883_example_4_single_duplicate_subsegment() {
        let mut rx = Rx::new(500);
        assert_eq!(rx.arrive(500, 1000), (1000, vec![]));
        // 1000-1499 delayed, 1500-1999 dropped.
        assert_eq!(rx.arrive(2000, 2500), (1000, vec![b(2000, 2500)]));
        // The delayed 1000-1499 arrives.
        assert_eq!(rx.arrive(1000, 1500), (1500, vec![b(2000, 2500)]));
        // The 1000-byte retransmission 1000-1999: only its first half is a duplicate.
        assert_eq!(rx.arrive(1000, 2000), (2500, vec![b(1000, 1500)]));
    }

    #[test]
    fn rfc2883_example_5_two_duplicates_covered_by_the_ack() {
        let mut rx = Rx::new(500);
        rx.arrive(500, 1000);
        // 1000-1499 delayed, 1500-1999 dropped, 2000-2499 delayed, 2500-2999 dropped.
        assert_eq!(rx.arrive(3000, 3500), (1000, vec![b(3000, 3500)]));
        assert_eq!(rx.arrive(1000, 1500), (1500, vec![b(3000, 3500)]));
        assert_eq!(
            rx.arrive(2000, 2500),
            (1500, vec![b(2000, 2500), b(3000, 3500)])
        );
        // The 1500-byte retransmission 1000-2499: "The receiver reports the first such
        // duplicate segment" (1000-1499), not 2000-2499.
        assert_eq!(
            rx.arrive(1000, 2500),
            (2500, vec![b(1000, 1500), b(3000, 3500)])
        );
    }

    #[test]
    fn rfc2883_example_6_two_duplicates_not_covered_by_the_ack() {
        let mut rx = Rx::new(500);
        rx.arrive(500, 1000);
        // 1000-1499 dropped, 1500-1999 delayed, 2000-2499 dropped, 2500-2999 delayed,
        // 3000-3499 dropped.
        assert_eq!(rx.arrive(3500, 4000), (1000, vec![b(3500, 4000)]));
        // The retransmission of 1000-1499 is dropped; the delayed segments arrive.
        assert_eq!(
            rx.arrive(1500, 2000),
            (1000, vec![b(1500, 2000), b(3500, 4000)])
        );
        assert_eq!(
            rx.arrive(2500, 3000),
            (1000, vec![b(2500, 3000), b(1500, 2000), b(3500, 4000)])
        );
        // The retransmission 1500-2999 holds two duplicate pieces: the first is reported,
        // followed by the (now larger) block that contains it.
        let (ack, blocks) = rx.arrive(1500, 3000);
        assert_eq!(ack, 1000);
        assert_eq!(&blocks[..2], &[b(1500, 2000), b(1500, 3000)]);
        assert!(blocks.contains(&b(3500, 4000)));
        assert_eq!(split_dsack(1000, &blocks).0, Some(b(1500, 2000)));
    }

    #[test]
    fn a_regular_sack_is_not_a_dsack() {
        // RFC 2018: first block above the ACK and not inside the second.
        let blocks = [b(4500, 5000), b(3000, 3500)];
        assert_eq!(split_dsack(2000, &blocks), (None, &blocks[..]));
        assert_eq!(split_dsack(2000, &[]), (None, &[][..]));
        // A malformed first block is not a D-SACK either.
        let bad = [b(5000, 4500), b(4000, 6000)];
        assert_eq!(split_dsack(2000, &bad).0, None);
    }

    #[test]
    fn compose_respects_the_option_space() {
        let mut r = DsackReport::default();
        r.record(Some(b(10, 20)));
        r.record(None); // a non-duplicate does not erase the pending report
        let regular = [b(30, 40), b(50, 60), b(70, 80)];
        let (blocks, n) = r.compose(&regular, 3);
        assert_eq!(&blocks[..n], &[b(10, 20), b(30, 40), b(50, 60)]);
        r.on_ack_sent();
        let (blocks, n) = r.compose(&regular, 3);
        assert_eq!(&blocks[..n], &regular[..]);
    }

    #[test]
    fn all_retransmissions_dsacked_undoes_the_reduction() {
        let mut s = DsackSender::default();
        // Recovery at SND.UNA 1000 cut cwnd from 20000 to 10000.
        s.start_episode(1000, 20000, 30000);
        s.on_retransmit(1);
        s.on_retransmit(1);
        assert_eq!(s.take_undo(10000, 10000), None);
        assert_eq!(s.on_dsack(b(1000, 1500), 500, 65535), 1);
        assert_eq!(
            s.take_undo(10000, 10000),
            None,
            "one retransmission unconfirmed"
        );
        assert_eq!(s.on_dsack(b(1500, 2000), 500, 65535), 1);
        assert_eq!(s.take_undo(10000, 10000), Some((20000, 30000)));
        assert_eq!(s.take_undo(10000, 10000), None, "undone once");
        assert_eq!(s.stats.undos, 1);
    }

    #[test]
    fn dubious_dsacks_are_ignored() {
        let mut s = DsackSender::default();
        s.start_episode(1000, 20000, 30000);
        // No retransmission yet: a D-SACK cannot be believed.
        assert_eq!(s.on_dsack(b(1000, 1500), 500, 65535), 0);
        s.on_retransmit(1);
        // Larger than any window the peer offered.
        assert_eq!(s.on_dsack(b(1000, 100_000), 500, 65535), 0);
        // Reports two segments, only one was retransmitted.
        assert_eq!(s.on_dsack(b(1000, 2000), 500, 65535), 0);
        assert_eq!(s.stats.dubious, 3);
        assert_eq!(s.take_undo(1, 1), None);
        // An episode with no retransmission is never undone.
        let mut t = DsackSender::default();
        t.start_episode(0, 5, 5);
        assert_eq!(t.take_undo(1, 1), None);
    }

    #[test]
    fn dsack_of_an_earlier_episode_does_not_count() {
        let mut s = DsackSender::default();
        s.on_retransmit(1); // before the episode, data 0..500
        s.start_episode(5000, 20000, 30000);
        s.on_retransmit(1);
        assert_eq!(s.on_dsack(b(0, 500), 500, 65535), 1);
        assert_eq!(s.take_undo(1, 1), None);
    }

    /// Reordering makes RACK retransmit P1 needlessly; the receiver reports the duplicate
    /// (RFC 2883 §4), the sender recognises it, undoes the window reduction (RFC 3708 §3 /
    /// Linux `tcp_try_undo_dsack`) and RACK widens its reordering window (RFC 8985 §6.2
    /// step 4).
    #[test]
    fn spurious_retransmission_is_reported_and_undone() {
        use crate::tcp::rack::{Ack, Rack};
        use crate::time::{Duration, Instant};
        let ms = Instant::from_millis;
        let mut rack = Rack::new(64);
        let mut snd = DsackSender::default();
        // An earlier round trip gave min_RTT = 40 ms.
        rack.on_send(0, 1000, ms(0), Some(0));
        rack.on_ack(&Ack {
            now: ms(40),
            una: 1000,
            snd_nxt: 1000,
            sack: &[],
            dsack: None,
            tsecr: Some(0),
            rtt_sample: Some(Duration::from_millis(40)),
            mss: 0,
        });
        // P1..P4 at 100 ms; P1 is delayed by the path, P2..P4 SACKed at 140 ms.
        for p in 1..5u32 {
            rack.on_send(p * 1000, p * 1000 + 1000, ms(100 + u64::from(p)), Some(100));
        }
        let sack = [b(2000, 5000)];
        rack.on_ack(&Ack {
            now: ms(145),
            una: 1000,
            snd_nxt: 5000,
            sack: &sack,
            dsack: None,
            tsecr: Some(100),
            rtt_sample: None,
            mss: 0,
        });
        let mut lost = vec![];
        // Three segments SACKed, no reordering seen yet: reo_wnd = 0, P1 is lost.
        rack.detect_loss(
            ms(145),
            Some(Duration::from_millis(40)),
            false,
            3,
            |s, e| lost.push((s, e)),
        );
        assert_eq!(lost, vec![(1000, 2000)]);
        // Recovery: cwnd 10 -> 5 segments; P1 retransmitted.
        snd.start_episode(1000, 10_000, 20_000);
        rack.on_send(1000, 2000, ms(145), Some(145));
        snd.on_retransmit(1);
        // Receiver: the delayed original arrives first, then the retransmission.
        let mut rx = DsackReport::default();
        let held = [b(2000, 5000)];
        rx.record(duplicate_block(1000, 2000, 1000, held));
        assert_eq!(rx.pending(), None, "the original is not a duplicate");
        rx.record(duplicate_block(1000, 2000, 5000, []));
        let (blocks, n) = rx.compose(&[], 3);
        assert_eq!(&blocks[..n], &[b(1000, 2000)]);
        // Sender: the ACK of the original (TSecr of the original: not a valid RACK sample).
        rack.on_ack(&Ack {
            now: ms(150),
            una: 5000,
            snd_nxt: 5000,
            sack: &[],
            dsack: None,
            tsecr: Some(100),
            rtt_sample: None,
            mss: 0,
        });
        // Then the ACK carrying the D-SACK.
        let (ds, rest) = split_dsack(5000, &blocks[..n]);
        assert!(rest.is_empty());
        let ds = ds.expect("a D-SACK");
        assert_eq!(snd.on_dsack(ds, 1000, 65535), 1);
        let mult = rack.reo_wnd_mult();
        rack.on_ack(&Ack {
            now: ms(185),
            una: 5000,
            snd_nxt: 5000,
            sack: rest,
            dsack: Some(ds),
            tsecr: Some(145),
            rtt_sample: None,
            mss: 0,
        });
        assert_eq!(rack.reo_wnd_mult(), mult + 1);
        assert_eq!(snd.take_undo(5000, 5000), Some((10_000, 20_000)));
        rack.on_undo();
        assert_eq!(rack.reo_wnd_persist(), crate::tcp::rack::REO_WND_PERSIST);
    }

    proptest! {
        #[test]
        fn dsack_functions_never_panic(
            s in any::<u32>(), len in any::<u32>(), nxt in any::<u32>(),
            held in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..8),
            ack in any::<u32>(),
            blocks in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..5),
            mss in any::<u32>(), wnd in any::<u32>(),
        ) {
            let e = s.wrapping_add(len);
            let d = duplicate_block(s, e, nxt, held.iter().map(|&(l, r)| b(l, r)));
            if let Some(d) = d {
                // The reported block lies inside the segment and is not empty.
                prop_assert!(seq::lt(d.left, d.right));
                prop_assert!(seq::le(s, d.left) && seq::le(d.right, e));
            }
            let blocks: Vec<SackBlock> = blocks.iter().map(|&(l, r)| b(l, r)).collect();
            let (first, rest) = split_dsack(ack, &blocks);
            prop_assert!(rest.len() + usize::from(first.is_some()) == blocks.len());
            let mut snd = DsackSender::default();
            snd.start_episode(ack, 1, 1);
            snd.on_retransmit(len % 8);
            if let Some(f) = first {
                let n = snd.on_dsack(f, mss, wnd);
                prop_assert!(u64::from(n) <= u64::from(len % 8));
            }
            let _ = snd.take_undo(mss, wnd);
            let mut r = DsackReport::default();
            r.record(d);
            let (_, n) = r.compose(&blocks, blocks.len());
            prop_assert!(n <= 4);
        }
    }
}
