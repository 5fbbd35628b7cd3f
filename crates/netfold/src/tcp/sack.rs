//! RFC 6675 sender-side SACK scoreboard (conservative SACK-based loss recovery) and the
//! receiver-side choice of SACK blocks (RFC 2018 §4).

use super::seq;
use crate::wire::tcp::SackBlock;

/// RFC 6675 §2: DupThresh.
pub const DUP_THRESH: u32 = 3;
/// Bound on remembered SACKed ranges (hostile peers cannot grow state).
const MAX_RANGES: usize = 64;

/// SACKed sequence ranges above SND.UNA, sorted, disjoint.
#[derive(Debug, Clone, Default)]
pub struct Scoreboard {
    ranges: Vec<(u32, u32)>,
}

/// One unSACKed hole `[start, end)` between SND.UNA and the highest SACKed byte, or the
/// tail above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    pub start: u32,
    pub end: u32,
    /// RFC 6675 IsLost() for every byte of the hole (they share the SACK info above them).
    pub lost: bool,
    /// Whether some SACKed data lies above the hole.
    pub sacked_above: bool,
}

impl Scoreboard {
    /// An empty scoreboard. Its storage is reserved at the first SACKed range, not here:
    /// most connections (every TCP_CRR one) never receive a SACK block, and the allocation
    /// and free cost each of them ~200 instructions.
    pub fn new() -> Self {
        Scoreboard { ranges: Vec::new() }
    }

    /// The list's storage, emptied, for a recycled control block (`Conn::renew`).
    pub fn take_storage(&mut self) -> Vec<(u32, u32)> {
        let mut v = std::mem::take(&mut self.ranges);
        v.clear();
        v
    }

    /// Takes `v` (emptied) as the list's storage if this scoreboard holds none yet.
    pub fn adopt_storage(&mut self, mut v: Vec<(u32, u32)>) {
        if self.ranges.capacity() == 0 && v.capacity() <= MAX_RANGES {
            v.clear();
            self.ranges = v;
        }
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    pub fn clear(&mut self) {
        self.ranges.clear();
    }
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }
    /// Adds one block; blocks outside `(una, max]` are ignored (RFC 2018 §5: only meaningful
    /// above the cumulative ACK). Returns the number of newly SACKed bytes.
    pub fn add(&mut self, b: SackBlock, una: u32, max: u32) -> u32 {
        let (mut l, mut r) = (seq::max(b.left, una), seq::min(b.right, max));
        if !seq::lt(l, r) {
            return 0;
        }
        let before = self.sacked_bytes();
        let mut i = 0;
        while i < self.ranges.len() {
            let (a, z) = self.ranges[i];
            if seq::le(a, r) && seq::le(l, z) {
                l = seq::min(l, a);
                r = seq::max(r, z);
                self.ranges.remove(i);
            } else {
                i += 1;
            }
        }
        let pos = self.ranges.partition_point(|&(a, _)| seq::lt(a, l));
        if self.ranges.len() >= MAX_RANGES {
            // Keep the lowest ranges: they matter for retransmission decisions.
            if pos >= MAX_RANGES {
                return 0;
            }
            self.ranges.pop();
        }
        if self.ranges.capacity() == 0 {
            // Never more than MAX_RANGES: one allocation for the connection's life.
            self.ranges.reserve_exact(MAX_RANGES);
        }
        self.ranges.insert(pos, (l, r));
        self.sacked_bytes().saturating_sub(before)
    }
    /// SND.UNA advanced: forget everything below it.
    pub fn advance(&mut self, una: u32) {
        self.ranges.retain_mut(|r| {
            if seq::le(r.1, una) {
                false
            } else {
                r.0 = seq::max(r.0, una);
                true
            }
        });
    }
    pub fn sacked_bytes(&self) -> u32 {
        self.ranges
            .iter()
            .fold(0u32, |a, &(l, r)| a.wrapping_add(r.wrapping_sub(l)))
    }
    /// The highest SACKed sequence number (exclusive), if any.
    pub fn high_sacked(&self) -> Option<u32> {
        self.ranges.last().map(|r| r.1)
    }
    /// If `s` lies in a SACKed range, that range's end.
    pub fn sacked_end(&self, s: u32) -> Option<u32> {
        self.ranges
            .iter()
            .find(|&&(l, r)| seq::le(l, s) && seq::lt(s, r))
            .map(|r| r.1)
    }
    /// The first SACKed range start strictly above `s`.
    pub fn next_sacked_start(&self, s: u32) -> Option<u32> {
        self.ranges
            .iter()
            .find(|&&(l, _)| seq::gt(l, s))
            .map(|r| r.0)
    }
    /// RFC 6675 §4 IsLost(SeqNum): DupThresh discontiguous SACKed ranges above it, or more
    /// than (DupThresh - 1) * SMSS bytes SACKed above it.
    pub fn is_lost(&self, s: u32, mss: u32) -> bool {
        let mut count = 0u32;
        let mut bytes = 0u32;
        for &(l, r) in self.ranges.iter().rev() {
            if seq::le(r, s) {
                break;
            }
            count += 1;
            bytes = bytes.wrapping_add(r.wrapping_sub(seq::max(l, s)));
            if count >= DUP_THRESH || bytes > (DUP_THRESH - 1) * mss {
                return true;
            }
        }
        false
    }
    /// The holes between `una` and `max`, lowest first (the last one may be the unSACKed tail).
    pub fn holes(&self, una: u32, max: u32, mss: u32) -> impl Iterator<Item = Hole> + '_ {
        let mut cur = una;
        let mut idx = 0;
        let mut done = false;
        core::iter::from_fn(move || loop {
            if done {
                return None;
            }
            if idx < self.ranges.len() {
                let (l, r) = self.ranges[idx];
                idx += 1;
                if seq::lt(cur, l) {
                    let h = Hole {
                        start: cur,
                        end: l,
                        lost: self.is_lost(cur, mss),
                        sacked_above: true,
                    };
                    cur = seq::max(cur, r);
                    return Some(h);
                }
                cur = seq::max(cur, r);
            } else {
                done = true;
                if seq::lt(cur, max) {
                    return Some(Hole {
                        start: cur,
                        end: max,
                        lost: false,
                        sacked_above: false,
                    });
                }
            }
        })
    }
    /// RFC 6675 §4 SetPipe(): unSACKed bytes not deemed lost, plus bytes retransmitted
    /// (below `rxt_next`, our exclusive form of HighRxt).
    pub fn pipe(&self, una: u32, max: u32, rxt_next: u32, mss: u32) -> u32 {
        let mut pipe = 0u32;
        for h in self.holes(una, max, mss) {
            let len = h.end.wrapping_sub(h.start);
            if !h.lost {
                pipe = pipe.saturating_add(len);
            }
            let rxt = seq::dist(h.start, seq::min(h.end, rxt_next));
            pipe = pipe.saturating_add(rxt);
        }
        pipe
    }
}

/// Receiver-side memory of recently reported SACK blocks (RFC 2018 §4: the first block holds
/// the most recently received segment, the rest repeat the most recently reported blocks).
#[derive(Debug, Clone, Copy, Default)]
pub struct SackHistory {
    blocks: [SackBlock; 4],
    count: usize,
}

impl SackHistory {
    /// Remembers `latest` (the range containing the newest out-of-order segment) first.
    pub fn record(&mut self, latest: SackBlock) {
        let mut out = [SackBlock::default(); 4];
        out[0] = latest;
        let mut n = 1;
        for b in &self.blocks[..self.count] {
            let overlaps = seq::le(b.left, latest.right) && seq::le(latest.left, b.right);
            if !overlaps && n < 4 {
                out[n] = *b;
                n += 1;
            }
        }
        self.blocks = out;
        self.count = n;
    }
    /// Drops blocks that are now at or below RCV.NXT or no longer match what the assembler
    /// holds; `current(left)` maps a remembered block to the range now containing its left
    /// edge, or `None`.
    pub fn refresh(&mut self, rcv_nxt: u32, current: impl Fn(u32) -> Option<SackBlock>) {
        let mut out = [SackBlock::default(); 4];
        let mut n = 0;
        for b in &self.blocks[..self.count] {
            if seq::le(b.right, rcv_nxt) {
                continue;
            }
            if let Some(c) = current(seq::max(b.left, rcv_nxt)) {
                if !out[..n].contains(&c) {
                    out[n] = c;
                    n += 1;
                }
            }
        }
        self.blocks = out;
        self.count = n;
    }
    pub fn blocks(&self) -> &[SackBlock] {
        &self.blocks[..self.count]
    }
    /// Nothing remembered (`refresh` would find nothing to keep).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn clear(&mut self) {
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(l: u32, r: u32) -> SackBlock {
        SackBlock { left: l, right: r }
    }

    #[test]
    fn scoreboard_merges_and_finds_lost_holes() {
        let mut s = Scoreboard::new();
        let mss = 100;
        assert_eq!(s.add(b(200, 300), 0, 1000), 100);
        assert_eq!(s.add(b(400, 500), 0, 1000), 100);
        assert_eq!(s.add(b(450, 600), 0, 1000), 100);
        assert_eq!(s.ranges(), &[(200, 300), (400, 600)]);
        // 300 bytes SACKed above 0 > 2*MSS -> lost.
        assert!(s.is_lost(0, mss));
        assert!(!s.is_lost(300, mss));
        let holes: Vec<_> = s.holes(0, 1000, mss).collect();
        assert_eq!(holes.len(), 3);
        assert_eq!(
            (holes[0].start, holes[0].end, holes[0].lost),
            (0, 200, true)
        );
        assert_eq!(
            (holes[1].start, holes[1].end, holes[1].lost),
            (300, 400, false)
        );
        assert_eq!((holes[2].start, holes[2].end), (600, 1000));
        // pipe: hole0 lost (0) + hole1 100 + tail 400; nothing retransmitted.
        assert_eq!(s.pipe(0, 1000, 0, mss), 500);
        // after retransmitting [0,100): +100
        assert_eq!(s.pipe(0, 1000, 100, mss), 600);
        s.advance(450);
        assert_eq!(s.ranges(), &[(450, 600)]);
        // blocks outside (una, max] ignored
        assert_eq!(s.add(b(0, 100), 450, 1000), 0);
    }

    #[test]
    fn sack_history_most_recent_first() {
        let mut h = SackHistory::default();
        h.record(b(10, 20));
        h.record(b(30, 40));
        h.record(b(50, 60));
        assert_eq!(h.blocks(), &[b(50, 60), b(30, 40), b(10, 20)]);
        h.record(b(30, 45));
        assert_eq!(h.blocks(), &[b(30, 45), b(50, 60), b(10, 20)]);
        h.refresh(25, |l| Some(if l < 30 { b(l, 20) } else { b(l, l + 5) }));
        assert_eq!(h.blocks(), &[b(30, 35), b(50, 55)]);
    }
}
