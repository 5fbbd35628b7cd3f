//! Fragment reassembly for both address families — IPv4 (RFC 791 §3.2 "reassembly
//! procedure", RFC 815 hole tracking) and IPv6 (RFC 8200 §4.5) — built to survive a fragment
//! flood (FragmentSmack, CVE-2018-5391) without locking legitimate senders out.
//!
//! What a flood of never-completing fragments does to a reassembler that refuses new
//! datagrams once it is full (Linux since 4.17 returns no queue above `ipfrag_high_thresh`):
//! every legitimate fragmented datagram is dropped until the attacker's queues time out, 30 s
//! later. This one never refuses a new datagram for lack of room; it makes room:
//!
//! - **Bounded memory with watermarks.** The bytes held — the real capacities of the buffers
//!   (data and fragment lists) plus a fixed per-datagram overhead, and the idle spare buffers —
//!   never exceed `high_thresh`. A fragment that would go above it first evicts datagrams
//!   until `low_thresh` (Linux's `ipfrag_high_thresh` / `ipfrag_low_thresh`, 4 MiB / 3 MiB):
//!   the oldest first and, among datagrams begun at the same instant, the least complete first.
//!   Evicting a batch at once, down to the low mark, keeps the sort that picks victims off the
//!   per-fragment path.
//! - **A share per source.** One source (an IPv4 address; an IPv6 /64, see
//!   [`FragKey::source`]) holds at most `source_share_percent` of `high_thresh` and at most
//!   `source_max_queues` datagrams; beyond either, that source's own datagrams are evicted
//!   (oldest, least complete first), not anyone else's. A flood from one source churns through
//!   its own share while another source's datagrams are untouched; a flood from the same
//!   source as a legitimate sender evicts the flood's older queues in favour of the newer
//!   legitimate datagram, and stops mattering as soon as it stops.
//! - **Early drop of what can never complete.** RFC 5722 §4: "when reassembling an IPv6
//!   datagram, if one or more its constituent fragments is determined to be an overlapping
//!   fragment, the entire datagram (and any constituent fragments, including those not yet
//!   received) MUST be silently discarded" (RFC 8200 §4.5 says the same); Linux does the same
//!   for IPv4 since its 2018 fix (`ip_frag_queue`, "overlapping fragments" → `discard_qp`), as
//!   do we. Exact duplicates are ignored (RFC 5722 erratum 3089: "Duplicates, however, should
//!   be ignored (i.e., not used to trigger a discard)"). A fragment past a known end, or a
//!   second, different end, is as inconsistent as an overlap and discards the datagram too. A
//!   datagram arriving in more than `max_fragments` pieces, or one whose end would pass the
//!   largest payload (65515 bytes of IPv4 payload: the Total Length is 16 bits; 65535 for
//!   IPv6: RFC 2675 forbids fragmenting a jumbogram, "The Jumbo Payload option must not be
//!   used in a packet that carries a Fragment header"), is discarded with all it holds.
//! - **Timeouts.** A datagram still incomplete `timeout` after its first fragment arrived is
//!   discarded (IPv4: RFC 791 suggests a 15 s lower bound for the timer; Linux uses 30 s, as
//!   do we by default. IPv6: RFC 8200 §4.5 "within 60 seconds of the reception of the
//!   first-arriving fragment").
//!
//! One generic reassembler keyed by `K` (IPv4: source, destination, protocol, identification;
//! IPv6: source, destination, identification) that keeps `H`, the header of the fragment at
//! offset 0 (the IPv4 header; for IPv6 the fixed header and the Fragment header's Next Header,
//! RFC 8200 §4.5: "Only the value from the Offset zero fragment packet is used").
//!
//! Data is kept compact, in arrival order, so a datagram costs what it was sent (a tiny
//! fragment at offset 65000 costs a few bytes, not 64 KiB); fragments that arrived in order
//! are handed over without a copy.

use crate::time::{Duration, Instant};
use crate::wire::ipv4::{self, Ipv4Repr};
use crate::wire::{IpProtocol, Ipv4Addr, Ipv6Addr};
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Default for the largest number of fragments one datagram may arrive in
/// ([`ReassemblyLimits::max_fragments`]): 64 pieces carry a maximal datagram (64 KiB) on any
/// link whose MTU is 1044 bytes or more — every IPv6 link (at least 1280, RFC 8200 §5: 54
/// fragments of 1232 bytes) and every common IPv4 one (Ethernet: 45 of 1480) — while an
/// attacker's datagram of tiny pieces is cut off before its fragment list costs much.
pub const MAX_FRAGMENTS: usize = 64;
/// Largest reassembled IPv4 payload (total length is 16 bits).
const MAX_PAYLOAD: usize = ipv4::MAX_PACKET_LEN - ipv4::HEADER_LEN;
/// Idle buffers kept for reassembling out-of-order datagrams; counted in the bound.
const MAX_SPARE: usize = 4;

/// What identifies an IPv4 datagram's fragments (RFC 791 §3.2).
pub type V4Key = (Ipv4Addr, Ipv4Addr, IpProtocol, u16);

/// A fragment key, and the source it is charged to.
pub trait FragKey: Copy + Eq + Hash {
    /// The source whose share this datagram counts against.
    ///
    /// IPv4: the source address. IPv6: the source's /64 prefix — a host on a SLAAC network
    /// chooses its own 64-bit interface identifier (RFC 4291 §2.5.1, RFC 8981 temporary
    /// addresses rotate it), so one attacker can send from 2^64 addresses of its /64; charging
    /// per /128 would give it as many shares. A /64 is the smallest block a link hands out
    /// (RFC 4291 §2.5.4), so all of one attacker's addresses share one share; hosts sharing a
    /// /64 with it share it too, as hosts behind one NAT share an IPv4 address.
    fn source(&self) -> u128;
}

impl FragKey for V4Key {
    fn source(&self) -> u128 {
        u128::from(u32::from(self.0))
    }
}

impl FragKey for (Ipv6Addr, Ipv6Addr, u32) {
    fn source(&self) -> u128 {
        u128::from(self.0) >> 64
    }
}

/// Test keys: (source, identification).
#[cfg(test)]
impl FragKey for (u32, u32) {
    fn source(&self) -> u128 {
        u128::from(self.0)
    }
}

/// The bounds of one reassembler. See the module documentation for what each buys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblyLimits {
    /// Bytes held at most (Linux `ipfrag_high_thresh`).
    pub high_thresh: usize,
    /// Bytes evicted down to once `high_thresh` would be passed (Linux `ipfrag_low_thresh`).
    pub low_thresh: usize,
    /// Percent of `high_thresh` one source may hold (at least one maximal datagram).
    pub source_share_percent: u8,
    /// Datagrams one source may have in reassembly at once.
    pub source_max_queues: usize,
    /// Datagrams in reassembly at once, all sources together.
    pub max_queues: usize,
    /// Fragments one datagram may arrive in.
    pub max_fragments: usize,
    /// Time from a datagram's first fragment to its discard if still incomplete.
    pub timeout: Duration,
    /// Largest reassembled payload.
    pub max_payload: usize,
}

impl Default for ReassemblyLimits {
    /// Linux's byte bounds (4 MiB / 3 MiB), a quarter of them per source, 256 datagrams per
    /// source, 4096 in all, 64 fragments each, 30 s, an IPv4 payload.
    fn default() -> Self {
        ReassemblyLimits {
            high_thresh: 4 << 20,
            low_thresh: 3 << 20,
            source_share_percent: 25,
            source_max_queues: 256,
            max_queues: 4096,
            max_fragments: MAX_FRAGMENTS,
            timeout: Duration::from_secs(30),
            max_payload: MAX_PAYLOAD,
        }
    }
}

/// Why a fragment was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragDrop {
    /// Empty, or not the last and not a multiple of 8 bytes (RFC 791 §3.2, RFC 8200 §4.5).
    BadLength,
    /// Its end passes the largest payload; its datagram (if any) was discarded.
    TooBig,
    /// It overlapped data already held, or contradicted the datagram's end; the datagram was
    /// discarded (RFC 5722).
    Overlap,
    /// Its datagram reached the fragment limit; the datagram was discarded.
    TooManyFragments,
    /// Its datagram was evicted to make room, or the bounds are smaller than one fragment.
    NoRoom,
}

/// What happened to a fragment.
#[derive(Debug, PartialEq, Eq)]
pub enum FragOutcome<H = Ipv4Repr> {
    /// Stored; the datagram is not complete yet.
    Queued,
    /// An exact duplicate of data already held; ignored.
    Duplicate,
    /// The datagram is complete: its header (IPv4: total payload length set, fragment fields
    /// cleared) and its payload. Give the buffer back with [`Reassembler::recycle`] when done.
    Complete(H, Vec<u8>),
    /// Dropped, for the reason given.
    Dropped(FragDrop),
}

/// Datagrams discarded by the reassembler on its own initiative (not counting the one a
/// dropped fragment belonged to, which its [`FragDrop`] reports), since the last
/// [`Reassembler::take_evictions`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evictions {
    /// Evicted because the total would pass `high_thresh`.
    pub memory: u64,
    /// Evicted because their source would pass its byte share.
    pub source_share: u64,
    /// Evicted because their source had `source_max_queues` datagrams.
    pub source_queues: u64,
    /// Evicted because `max_queues` datagrams were in reassembly.
    pub queues: u64,
}

/// Memory held by a reassembler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReassemblyMemory {
    /// Bytes held now (buffers' capacities plus per-datagram overhead, spares included).
    pub bytes: usize,
    /// The most ever held after a fragment was dealt with.
    pub peak: usize,
    /// Datagrams in reassembly.
    pub queues: usize,
    /// Sources with datagrams in reassembly.
    pub sources: usize,
}

/// One received fragment: payload bytes `[start, end)` stored at `at` in the data buffer.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    at: usize,
}

#[derive(Debug)]
struct Datagram<K, H> {
    key: K,
    created: Instant,
    deadline: Instant,
    /// The first fragment's header (offset 0), once seen.
    header: Option<H>,
    /// Payload length, known once the last fragment (MF = 0) arrived.
    total: Option<usize>,
    /// Payload bytes received (no overlaps are stored, so no double counting).
    covered: usize,
    /// Received pieces, in arrival order, at most `max_fragments`.
    pieces: Vec<Piece>,
    /// The pieces' bytes, compact, in arrival order.
    data: Vec<u8>,
    /// Bytes charged for this datagram (see `Datagram::cost`).
    charged: usize,
}

/// What a datagram costs beyond its buffers: the struct, its index and ordering entries.
const QUEUE_OVERHEAD: usize = 192;

impl<K, H> Datagram<K, H> {
    fn cost(&self) -> usize {
        QUEUE_OVERHEAD
            + self.data.capacity()
            + self.pieces.capacity() * core::mem::size_of::<Piece>()
    }

    /// Bytes still missing, of the known total or of the largest payload if the end is not
    /// known yet: the "least complete" of the eviction order.
    fn missing(&self, max_payload: usize) -> usize {
        self.total
            .unwrap_or(max_payload)
            .saturating_sub(self.covered)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct SourceUse {
    bytes: usize,
    queues: usize,
}

/// Which bound an eviction serves (for the counters).
#[derive(Clone, Copy)]
enum Why {
    Memory,
    SourceShare,
    SourceQueues,
    Queues,
}

#[derive(Debug)]
/// Fragments of datagrams in progress, with their limits.
pub struct Reassembler<K = V4Key, H = Ipv4Repr> {
    /// Datagrams by creation sequence: oldest first, so the timer and the eviction order
    /// both start at the front.
    queues: BTreeMap<u64, Datagram<K, H>>,
    index: HashMap<K, u64>,
    sources: HashMap<u128, SourceUse>,
    next_seq: u64,
    /// Creation instants never go backwards (so deadlines are in sequence order).
    last_created: Instant,
    spare: Vec<Vec<u8>>,
    bytes: usize,
    peak: usize,
    limits: ReassemblyLimits,
    evictions: Evictions,
}

impl<K: FragKey, H: Copy> Reassembler<K, H> {
    /// A reassembler with the given limits (sanitised: `low_thresh` at most `high_thresh`,
    /// at least one fragment and one datagram per source).
    pub fn new(mut limits: ReassemblyLimits) -> Self {
        limits.low_thresh = limits.low_thresh.min(limits.high_thresh);
        limits.source_share_percent = limits.source_share_percent.clamp(1, 100);
        limits.source_max_queues = limits.source_max_queues.max(1);
        limits.max_queues = limits.max_queues.max(1);
        limits.max_fragments = limits.max_fragments.max(1);
        Reassembler {
            queues: BTreeMap::new(),
            index: HashMap::new(),
            sources: HashMap::new(),
            next_seq: 0,
            last_created: Instant::ZERO,
            spare: Vec::new(),
            bytes: 0,
            peak: 0,
            limits,
            evictions: Evictions::default(),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &ReassemblyLimits {
        &self.limits
    }

    /// The bytes one source may hold: its percentage of `high_thresh`, but never less than
    /// one maximal datagram (else large datagrams could never complete), nor more than all.
    fn source_share(&self) -> usize {
        let l = &self.limits;
        let pct = l.high_thresh / 100 * usize::from(l.source_share_percent);
        let one = QUEUE_OVERHEAD + l.max_payload + l.max_fragments * core::mem::size_of::<Piece>();
        pct.max(one).min(l.high_thresh)
    }

    /// `x` scaled by low/high: where an eviction for bound `x` stops.
    fn low_of(&self, x: usize) -> usize {
        let l = &self.limits;
        if l.high_thresh == 0 {
            return 0;
        }
        // In u128: x * low cannot overflow.
        (x as u128 * l.low_thresh as u128 / l.high_thresh as u128) as usize
    }

    /// Feeds one fragment of the datagram `key`: `payload` lies at byte `start` of the
    /// datagram's payload, `more` is the more-fragments flag, `header` is kept if `start` is 0.
    pub fn push_fragment(
        &mut self,
        now: Instant,
        key: K,
        header: H,
        start: usize,
        more: bool,
        payload: &[u8],
    ) -> FragOutcome<H> {
        let out = self.push_inner(now, key, header, start, more, payload);
        self.peak = self.peak.max(self.bytes);
        out
    }

    fn push_inner(
        &mut self,
        now: Instant,
        key: K,
        header: H,
        start: usize,
        more: bool,
        payload: &[u8],
    ) -> FragOutcome<H> {
        // RFC 791, RFC 8200 §4.5: every fragment but the last carries a multiple of 8 bytes.
        if payload.is_empty() || (more && !payload.len().is_multiple_of(ipv4::FRAGMENT_UNIT)) {
            return FragOutcome::Dropped(FragDrop::BadLength);
        }
        let end = start.saturating_add(payload.len());
        let existing = self.index.get(&key).copied();
        // Ping of Death: a datagram that would reassemble past the largest payload can never
        // be delivered, so nothing it sent is worth keeping.
        if end > self.limits.max_payload {
            if let Some(seq) = existing {
                self.remove(seq);
            }
            return FragOutcome::Dropped(FragDrop::TooBig);
        }
        if let Some(seq) = existing {
            let Some(d) = self.queues.get(&seq) else {
                return FragOutcome::Dropped(FragDrop::NoRoom);
            };
            if d.pieces.iter().any(|p| p.start == start && p.end == end) {
                return FragOutcome::Duplicate;
            }
            let overlaps = d.pieces.iter().any(|p| start < p.end && p.start < end);
            let past_end = d.total.is_some_and(|t| end > t);
            let max_end = d.pieces.iter().map(|p| p.end).max().unwrap_or(0);
            let bad_last = !more && (d.total.is_some_and(|t| t != end) || end < max_end);
            if overlaps || past_end || bad_last {
                self.remove(seq);
                return FragOutcome::Dropped(FragDrop::Overlap);
            }
            // Holes are bounded by pieces (at most one more hole than pieces): the fragment
            // limit bounds both the list and the work per fragment.
            if d.pieces.len() >= self.limits.max_fragments {
                self.remove(seq);
                return FragOutcome::Dropped(FragDrop::TooManyFragments);
            }
        }
        let src = key.source();
        let extra = match existing.and_then(|s| self.queues.get(&s)) {
            Some(d) => grown_cost(d, payload.len(), &self.limits) - d.charged,
            None => {
                // A new datagram's data starts at exactly its first piece: a flood fragment
                // costs what it carries.
                QUEUE_OVERHEAD + payload.len() + 4 * core::mem::size_of::<Piece>()
            }
        };
        if extra > self.limits.high_thresh || extra > self.source_share() {
            if let Some(seq) = existing {
                self.remove(seq);
            }
            return FragOutcome::Dropped(FragDrop::NoRoom);
        }
        if existing.is_none() {
            self.room_for_queue(src);
        }
        self.room_for_bytes(src, extra);
        let seq = match existing {
            Some(seq) if self.queues.contains_key(&seq) => seq,
            // Evicted while making room (it was the oldest): its fragments are gone, so this
            // one cannot complete it either.
            Some(_) => return FragOutcome::Dropped(FragDrop::NoRoom),
            None => self.create(now, key, src, payload.len()),
        };
        let Some(d) = self.queues.get_mut(&seq) else {
            return FragOutcome::Dropped(FragDrop::NoRoom);
        };
        if d.data.capacity() - d.data.len() < payload.len() {
            let cap = grown_capacity(d, payload.len(), &self.limits);
            d.data.reserve_exact(cap - d.data.len());
        }
        if d.pieces.len() == d.pieces.capacity() {
            let add = d.pieces.capacity().max(4);
            d.pieces.reserve_exact(add);
        }
        let at = d.data.len();
        d.data.extend_from_slice(payload);
        d.pieces.push(Piece { start, end, at });
        d.covered += payload.len();
        if !more {
            d.total = Some(end);
        }
        if start == 0 {
            d.header = Some(header);
        }
        let cost = d.cost();
        let charged = d.charged;
        d.charged = cost;
        self.recharge(src, charged, cost);
        if self.bytes > self.limits.high_thresh {
            // Only if the allocator handed out more than asked: restore the bound anyway.
            self.evict(Why::Memory, None, self.limits.low_thresh);
            if !self.queues.contains_key(&seq) {
                return FragOutcome::Dropped(FragDrop::NoRoom);
            }
        }
        let Some(d) = self.queues.get(&seq) else {
            return FragOutcome::Dropped(FragDrop::NoRoom);
        };
        match (d.total, d.header) {
            // No overlaps are stored, so coverage equal to the total means no holes.
            (Some(t), Some(h)) if d.covered == t => {
                let Some(d) = self.remove_keep(seq) else {
                    return FragOutcome::Dropped(FragDrop::NoRoom);
                };
                FragOutcome::Complete(h, self.assemble(d))
            }
            _ => FragOutcome::Queued,
        }
    }

    /// A new datagram's entry, empty, charged nothing yet.
    fn create(&mut self, now: Instant, key: K, src: u128, len: usize) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let created = now.max(self.last_created);
        self.last_created = created;
        let d = Datagram {
            key,
            created,
            deadline: created + self.limits.timeout,
            header: None,
            total: None,
            covered: 0,
            pieces: Vec::with_capacity(4),
            data: Vec::with_capacity(len),
            charged: 0,
        };
        self.queues.insert(seq, d);
        self.index.insert(key, seq);
        self.sources.entry(src).or_default().queues += 1;
        seq
    }

    fn recharge(&mut self, src: u128, old: usize, new: usize) {
        self.bytes = self.bytes - old + new;
        if let Some(s) = self.sources.get_mut(&src) {
            s.bytes = s.bytes - old + new;
        }
    }

    /// Before a new datagram of `src`: its source and the whole table below their counts.
    fn room_for_queue(&mut self, src: u128) {
        let l = self.limits;
        let held = self.sources.get(&src).map_or(0, |s| s.queues);
        if held >= l.source_max_queues {
            // A quarter at once, so a source at its cap does not sort on every datagram.
            let keep = l.source_max_queues - l.source_max_queues.div_ceil(4);
            self.evict_queues(Why::SourceQueues, Some(src), keep);
        }
        if self.queues.len() >= l.max_queues {
            let keep = l.max_queues - l.max_queues.div_ceil(4);
            self.evict_queues(Why::Queues, None, keep);
        }
    }

    /// Before `extra` more bytes of `src`: its share, then the total, evicted down to their
    /// low marks if either would be passed.
    fn room_for_bytes(&mut self, src: u128, extra: usize) {
        let share = self.source_share();
        let held = self.sources.get(&src).map_or(0, |s| s.bytes);
        if held + extra > share {
            let to = self.low_of(share).saturating_sub(extra);
            self.evict(Why::SourceShare, Some(src), to);
        }
        if self.bytes + extra > self.limits.high_thresh {
            // Idle spares go first: they hold no one's data.
            while self.bytes + extra > self.limits.low_thresh {
                let Some(b) = self.spare.pop() else { break };
                self.bytes -= b.capacity();
            }
            let to = self.limits.low_thresh.saturating_sub(extra);
            self.evict(Why::Memory, None, to);
        }
    }

    /// The eviction order: oldest first; among datagrams begun at the same instant the least
    /// complete (most bytes missing) first; then arrival. Of `src`'s datagrams, or all.
    fn victims(&self, src: Option<u128>) -> Vec<u64> {
        let max = self.limits.max_payload;
        let mut v: Vec<(Instant, core::cmp::Reverse<usize>, u64)> = self
            .queues
            .iter()
            .filter(|(_, d)| src.is_none_or(|s| d.key.source() == s))
            .map(|(&seq, d)| (d.created, core::cmp::Reverse(d.missing(max)), seq))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, _, seq)| seq).collect()
    }

    /// Evicts in the eviction order until the bytes held (by `src`, or in all) are at most
    /// `to`.
    fn evict(&mut self, why: Why, src: Option<u128>, to: usize) {
        let held = |r: &Self| match src {
            Some(s) => r.sources.get(&s).map_or(0, |u| u.bytes),
            None => r.bytes,
        };
        if held(self) <= to {
            return;
        }
        for seq in self.victims(src) {
            if held(self) <= to {
                break;
            }
            self.remove(seq);
            self.count(why);
        }
    }

    /// Evicts in the eviction order until at most `keep` datagrams (of `src`, or in all) are
    /// left.
    fn evict_queues(&mut self, why: Why, src: Option<u128>, keep: usize) {
        let held = |r: &Self| match src {
            Some(s) => r.sources.get(&s).map_or(0, |u| u.queues),
            None => r.queues.len(),
        };
        for seq in self.victims(src) {
            if held(self) <= keep {
                break;
            }
            self.remove(seq);
            self.count(why);
        }
    }

    fn count(&mut self, why: Why) {
        let e = &mut self.evictions;
        match why {
            Why::Memory => e.memory += 1,
            Why::SourceShare => e.source_share += 1,
            Why::SourceQueues => e.source_queues += 1,
            Why::Queues => e.queues += 1,
        }
    }

    /// Takes a datagram out of every table and out of the accounting.
    fn remove_keep(&mut self, seq: u64) -> Option<Datagram<K, H>> {
        let d = self.queues.remove(&seq)?;
        self.index.remove(&d.key);
        self.bytes -= d.charged;
        let src = d.key.source();
        if let Some(s) = self.sources.get_mut(&src) {
            s.bytes -= d.charged;
            s.queues -= 1;
            if s.queues == 0 {
                self.sources.remove(&src);
            }
        }
        Some(d)
    }

    /// Discards a datagram; its buffers are freed, not kept as spares: a discard is what
    /// makes room, and spares are only worth keeping at a delivered datagram's size.
    fn remove(&mut self, seq: u64) {
        drop(self.remove_keep(seq));
    }

    /// The payload in offset order: the data buffer itself when the pieces arrived in order
    /// (the common case), else a copy into a spare.
    fn assemble(&mut self, d: Datagram<K, H>) -> Vec<u8> {
        if d.pieces.iter().all(|p| p.at == p.start) {
            return d.data;
        }
        let mut out = self.take_spare();
        out.clear();
        out.resize(d.covered, 0);
        for p in &d.pieces {
            out[p.start..p.end].copy_from_slice(&d.data[p.at..p.at + (p.end - p.start)]);
        }
        out
    }

    fn take_spare(&mut self) -> Vec<u8> {
        match self.spare.pop() {
            Some(b) => {
                self.bytes -= b.capacity();
                b
            }
            None => Vec::new(),
        }
    }

    /// Returns a completed datagram's buffer for reuse: kept as a spare (at most a few, each
    /// no larger than one maximal payload, counted in the bound) if there is room.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if self.spare.len() < MAX_SPARE
            && cap <= self.limits.max_payload
            && self.bytes + cap <= self.limits.low_thresh
        {
            buf.clear();
            self.bytes += cap;
            self.spare.push(buf);
        }
    }

    /// Discards the datagram `key` if it is in reassembly (a fragment of it was found bad
    /// before it got here); whether it was.
    pub fn discard(&mut self, key: &K) -> bool {
        match self.index.get(key).copied() {
            Some(seq) => {
                self.remove(seq);
                true
            }
            None => false,
        }
    }

    /// Drops datagrams whose timer ran out; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        self.expire_each(now, |_, _| {})
    }

    /// `expire`, handing each dropped datagram's first-fragment header (if it arrived) and
    /// the data received from offset 0 on to `f` first (IPv6 answers Time Exceeded to the
    /// first fragment's source, RFC 8200 §4.5).
    pub fn expire_each(&mut self, now: Instant, mut f: impl FnMut(Option<H>, &[u8])) -> usize {
        let mut n = 0;
        // Deadlines follow creation order (one timeout, creation instants never go back).
        while let Some((&seq, d)) = self.queues.first_key_value() {
            if d.deadline > now {
                break;
            }
            let first = d.pieces.iter().find(|p| p.start == 0);
            let data = first.map_or(&[][..], |p| &d.data[p.at..p.at + p.end]);
            f(d.header, data);
            self.remove(seq);
            n += 1;
        }
        n
    }

    /// Earliest reassembly timeout.
    pub fn poll_at(&self) -> Option<Instant> {
        self.queues.first_key_value().map(|(_, d)| d.deadline)
    }

    /// Datagrams being reassembled.
    pub fn in_progress(&self) -> usize {
        self.queues.len()
    }

    /// The memory held, now and at its peak.
    pub fn memory(&self) -> ReassemblyMemory {
        ReassemblyMemory {
            bytes: self.bytes,
            peak: self.peak,
            queues: self.queues.len(),
            sources: self.sources.len(),
        }
    }

    /// The evictions since the last call, and resets them.
    pub fn take_evictions(&mut self) -> Evictions {
        core::mem::take(&mut self.evictions)
    }
}

/// The data capacity after adding `len` bytes: exact if the datagram's size is known (the
/// last fragment arrived), else doubling (amortised copies), never above one maximal payload.
fn grown_capacity<K, H>(d: &Datagram<K, H>, len: usize, l: &ReassemblyLimits) -> usize {
    let need = d.data.len() + len;
    if d.data.capacity() >= need {
        return d.data.capacity();
    }
    let want = match d.total {
        Some(t) => t.saturating_sub(d.covered).saturating_add(d.data.len()),
        None => d.data.capacity().saturating_mul(2),
    };
    want.min(l.max_payload).max(need)
}

/// What a datagram will cost after taking `len` more bytes in one more piece.
fn grown_cost<K, H>(d: &Datagram<K, H>, len: usize, l: &ReassemblyLimits) -> usize {
    let pieces = if d.pieces.len() == d.pieces.capacity() {
        d.pieces.capacity() + d.pieces.capacity().max(4)
    } else {
        d.pieces.capacity()
    };
    QUEUE_OVERHEAD + grown_capacity(d, len, l) + pieces * core::mem::size_of::<Piece>()
}

impl Reassembler<V4Key, Ipv4Repr> {
    /// Feeds one IPv4 fragment (`ip.is_fragment()`) and its payload.
    pub fn push(&mut self, now: Instant, ip: &Ipv4Repr, payload: &[u8]) -> FragOutcome {
        let key = (ip.src, ip.dst, ip.protocol, ip.ident);
        let start = usize::from(ip.frag_offset);
        match self.push_fragment(now, key, *ip, start, ip.more_frags, payload) {
            FragOutcome::Complete(mut h, data) => {
                h.payload_len = data.len();
                h.more_frags = false;
                h.frag_offset = 0;
                FragOutcome::Complete(h, data)
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(offset: u16, more: bool, len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            protocol: IpProtocol::Udp,
            payload_len: len,
            ttl: 64,
            dscp_ecn: 0,
            ident: 42,
            dont_frag: false,
            more_frags: more,
            frag_offset: offset,
        }
    }

    fn limits(high: usize, low: usize) -> ReassemblyLimits {
        ReassemblyLimits {
            high_thresh: high,
            low_thresh: low,
            ..ReassemblyLimits::default()
        }
    }

    type Test = Reassembler<(u32, u32), char>;

    fn test_reasm(l: ReassemblyLimits) -> Test {
        Reassembler::new(l)
    }

    #[test]
    fn out_of_order_fragments_reassemble() {
        let mut r = Reassembler::new(ReassemblyLimits::default());
        let t = Instant::ZERO;
        assert_eq!(r.push(t, &frag(16, false, 4), &[3; 4]), FragOutcome::Queued);
        assert_eq!(r.push(t, &frag(0, true, 8), &[1; 8]), FragOutcome::Queued);
        assert_eq!(
            r.push(t, &frag(0, true, 8), &[1; 8]),
            FragOutcome::Duplicate
        );
        match r.push(t, &frag(8, true, 8), &[2; 8]) {
            FragOutcome::Complete(h, data) => {
                assert_eq!(h.payload_len, 20);
                assert!(!h.is_fragment());
                assert_eq!(
                    &data[..],
                    &[1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3]
                );
                r.recycle(data);
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(r.in_progress(), 0);
        // Only the spare is left, counted.
        assert_eq!(r.memory().queues, 0);
        assert!(r.memory().bytes <= 64);
    }

    #[test]
    fn in_order_fragments_are_handed_over_without_a_copy() {
        let mut r = test_reasm(ReassemblyLimits::default());
        let t = Instant::ZERO;
        let key = (1, 1);
        assert_eq!(
            r.push_fragment(t, key, 'a', 0, true, &[1; 16]),
            FragOutcome::Queued
        );
        let FragOutcome::Complete('a', data) = r.push_fragment(t, key, 'b', 16, false, &[2; 3])
        else {
            panic!()
        };
        assert_eq!(data.len(), 19);
        assert_eq!(&data[14..], &[1, 1, 2, 2, 2]);
        assert_eq!(r.memory().bytes, 0);
    }

    #[test]
    fn overlaps_inconsistent_ends_and_limits_discard_the_datagram() {
        let mut r = Reassembler::new(ReassemblyLimits {
            max_fragments: 3,
            ..ReassemblyLimits::default()
        });
        let t = Instant::ZERO;
        assert_eq!(r.push(t, &frag(0, true, 16), &[0; 16]), FragOutcome::Queued);
        assert_eq!(
            r.push(t, &frag(8, true, 16), &[0; 16]),
            FragOutcome::Dropped(FragDrop::Overlap)
        );
        assert_eq!(r.in_progress(), 0);
        // A second, different end.
        assert_eq!(r.push(t, &frag(8, false, 8), &[0; 8]), FragOutcome::Queued);
        assert_eq!(
            r.push(t, &frag(16, false, 8), &[0; 8]),
            FragOutcome::Dropped(FragDrop::Overlap)
        );
        assert_eq!(r.in_progress(), 0);
        // Too many pieces.
        for i in 0..3u16 {
            assert_eq!(
                r.push(t, &frag(16 * i + 8, true, 8), &[0; 8]),
                FragOutcome::Queued
            );
        }
        assert_eq!(
            r.push(t, &frag(64, true, 8), &[0; 8]),
            FragOutcome::Dropped(FragDrop::TooManyFragments)
        );
        assert_eq!(r.in_progress(), 0);
        // Past 65515 bytes of payload: the datagram holding data goes with the fragment.
        assert_eq!(r.push(t, &frag(0, true, 8), &[0; 8]), FragOutcome::Queued);
        assert_eq!(
            r.push(t, &frag(65512, false, 8), &[0; 8]),
            FragOutcome::Dropped(FragDrop::TooBig)
        );
        assert_eq!(r.in_progress(), 0);
        assert_eq!(
            r.push(t, &frag(0, true, 7), &[0; 7]),
            FragOutcome::Dropped(FragDrop::BadLength)
        );
        assert_eq!(r.memory().bytes, 0);
        assert_eq!(r.take_evictions(), Evictions::default());
    }

    #[test]
    fn timeouts_follow_creation_order() {
        let mut r = Reassembler::new(ReassemblyLimits::default());
        assert_eq!(
            r.push(Instant::ZERO, &frag(0, true, 8), &[0; 8]),
            FragOutcome::Queued
        );
        let mut g = frag(0, true, 8);
        g.ident = 7;
        assert_eq!(
            r.push(Instant::from_secs(1), &g, &[0; 8]),
            FragOutcome::Queued
        );
        assert_eq!(r.poll_at(), Some(Instant::from_secs(30)));
        assert_eq!(r.expire(Instant::from_secs(30)), 1);
        assert_eq!(r.poll_at(), Some(Instant::from_secs(31)));
        assert_eq!(r.expire(Instant::from_secs(31)), 1);
        assert_eq!((r.in_progress(), r.memory().bytes), (0, 0));
    }

    /// The generic core with IPv6's key and header: the first fragment's header comes back,
    /// and an expired datagram hands over what it had from offset 0.
    #[test]
    fn generic_keys_and_expiry_report() {
        let mut r = test_reasm(ReassemblyLimits {
            timeout: Duration::from_secs(60),
            max_payload: 65535,
            ..ReassemblyLimits::default()
        });
        let t = Instant::ZERO;
        assert_eq!(
            r.push_fragment(t, (0, 1), 'b', 8, false, &[2; 4]),
            FragOutcome::Queued
        );
        assert_eq!(
            r.push_fragment(t, (0, 1), 'a', 0, true, &[1; 8]),
            FragOutcome::Complete('a', vec![1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2])
        );
        assert_eq!(
            r.push_fragment(t, (0, 3), 'y', 16, true, &[7; 8]),
            FragOutcome::Queued
        );
        assert_eq!(
            r.push_fragment(t, (0, 2), 'x', 16, true, &[8; 16]),
            FragOutcome::Queued
        );
        assert_eq!(
            r.push_fragment(t, (0, 2), 'x', 0, true, &[7; 16]),
            FragOutcome::Queued
        );
        let mut seen = vec![];
        let n = r.expire_each(Instant::from_secs(60), |h, d| seen.push((h, d.to_vec())));
        assert_eq!(n, 2);
        seen.sort();
        assert_eq!(seen, vec![(None, vec![]), (Some('x'), vec![7; 16])]);
        assert_eq!(
            r.push_fragment(t, (0, 4), 'z', 65528, false, &[0; 8]),
            FragOutcome::Dropped(FragDrop::TooBig)
        );
    }

    /// Above the high mark the oldest datagrams go first, down to the low mark; the one the
    /// fragment belongs to, and every newer one, stay.
    #[test]
    fn eviction_takes_the_oldest_first_down_to_the_low_mark() {
        // One datagram of 1000 bytes costs 1288 (overhead and fragment list): room for 7.
        let mut l = limits(10_000, 5_000);
        l.source_share_percent = 100;
        let mut r = test_reasm(l);
        for i in 0..7u32 {
            let t = Instant::from_millis(u64::from(i));
            assert_eq!(
                r.push_fragment(t, (i, i), 'x', 0, true, &[0; 1000]),
                FragOutcome::Queued
            );
        }
        assert_eq!(r.take_evictions(), Evictions::default());
        let t = Instant::from_millis(7);
        assert_eq!(
            r.push_fragment(t, (7, 7), 'x', 0, true, &[0; 1000]),
            FragOutcome::Queued
        );
        let m = r.memory();
        // Down to 5000 with the new one's 1288 counted: 2 old ones and the new one are left.
        assert_eq!(m.bytes, 3 * 1288, "{m:?}");
        assert!(m.peak <= 10_000, "{m:?}");
        assert_eq!(r.take_evictions().memory, 5);
        // The survivors are the newest, in order.
        let left: Vec<u32> = r.queues.values().map(|d| d.key.0).collect();
        assert_eq!(left, vec![5, 6, 7]);
    }

    /// Among datagrams begun at the same instant, the least complete goes first.
    #[test]
    fn eviction_among_equals_takes_the_least_complete_first() {
        let mut l = limits(12_000, 9_000);
        l.source_share_percent = 100;
        let mut r = test_reasm(l);
        let t = Instant::from_secs(1);
        // (1, 1): 2000 of a known 2008 bytes; (2, 2): 1000 of an unknown total; (3, 3): 2000
        // of an unknown total.
        assert_eq!(
            r.push_fragment(t, (1, 1), 'a', 8, false, &[0; 2000]),
            FragOutcome::Queued
        );
        assert_eq!(
            r.push_fragment(t, (2, 2), 'a', 0, true, &[0; 1000]),
            FragOutcome::Queued
        );
        assert_eq!(
            r.push_fragment(t, (3, 3), 'a', 0, true, &[0; 2000]),
            FragOutcome::Queued
        );
        assert_eq!(r.victims(None), vec![1, 2, 0]);
        // An older one, even complete but for a byte, goes before all of them.
        let mut r2 = test_reasm(l);
        assert_eq!(
            r2.push_fragment(Instant::ZERO, (9, 9), 'a', 8, false, &[0; 4000]),
            FragOutcome::Queued
        );
        assert_eq!(
            r2.push_fragment(t, (2, 2), 'a', 0, true, &[0; 8]),
            FragOutcome::Queued
        );
        assert_eq!(r2.victims(None), vec![0, 1]);
        // Over the mark (5864 held, 6288 more): (2, 2) and (3, 3) make room for the fourth;
        // the nearly complete one is kept.
        assert_eq!(
            r.push_fragment(t, (4, 4), 'a', 0, true, &[0; 6000]),
            FragOutcome::Queued
        );
        let left: Vec<u32> = r.queues.values().map(|d| d.key.0).collect();
        assert_eq!(left, vec![1, 4]);
        assert_eq!(r.take_evictions().memory, 2);
    }

    /// A source over its share evicts its own datagrams, never another's; so does one over
    /// its datagram count.
    #[test]
    fn a_source_over_its_share_evicts_only_its_own() {
        let mut l = limits(400_000, 300_000);
        l.source_share_percent = 25; // 100 000 bytes
        l.source_max_queues = 1000;
        let mut r = test_reasm(l);
        let t = Instant::ZERO;
        // The victim's datagram, begun first (the oldest of all).
        assert_eq!(
            r.push_fragment(t, (7, 0), 'v', 0, true, &[1; 1480]),
            FragOutcome::Queued
        );
        for id in 0..2000 {
            let out = r.push_fragment(t, (6, id), 'a', 8, true, &[0; 1000]);
            assert_eq!(out, FragOutcome::Queued);
            let m = r.memory();
            assert!(m.peak <= l.high_thresh);
            let own = r.sources.get(&6).map_or(0, |s| s.bytes);
            assert!(own <= 100_000, "{own}");
        }
        let ev = r.take_evictions();
        assert!(ev.source_share > 1000, "{ev:?}");
        assert_eq!(ev.memory, 0);
        let FragOutcome::Complete('v', data) =
            r.push_fragment(t, (7, 0), 'w', 1480, false, &[2; 20])
        else {
            panic!("the other source's datagram was lost")
        };
        assert_eq!(data.len(), 1500);

        // The datagram count: a quarter of the source's go at once, the oldest.
        let mut r = test_reasm(ReassemblyLimits {
            source_max_queues: 8,
            ..ReassemblyLimits::default()
        });
        assert_eq!(
            r.push_fragment(t, (7, 0), 'v', 0, true, &[1; 8]),
            FragOutcome::Queued
        );
        for id in 0..9 {
            let t = Instant::from_millis(u64::from(id));
            assert_eq!(
                r.push_fragment(t, (6, id), 'a', 8, true, &[0; 8]),
                FragOutcome::Queued
            );
        }
        assert_eq!(r.take_evictions().source_queues, 2);
        let left: Vec<(u32, u32)> = r.queues.values().map(|d| d.key).collect();
        let mut want = vec![(7, 0)];
        want.extend((2..9).map(|id| (6, id)));
        assert_eq!(left, want);
    }

    /// The total datagram count evicts the oldest quarter instead of refusing the new one.
    #[test]
    fn the_datagram_count_evicts_instead_of_refusing() {
        let mut r = test_reasm(ReassemblyLimits {
            max_queues: 4,
            ..ReassemblyLimits::default()
        });
        for id in 0..5u32 {
            let t = Instant::from_millis(u64::from(id));
            assert_eq!(
                r.push_fragment(t, (id, id), 'a', 8, true, &[0; 8]),
                FragOutcome::Queued
            );
        }
        assert_eq!(r.take_evictions().queues, 1);
        assert_eq!(r.in_progress(), 4);
        assert_eq!(r.victims(None).len(), 4);
        assert!(!r.index.contains_key(&(0, 0)));
    }

    /// Bounds smaller than one fragment refuse it without disturbing anything; sloppy limits
    /// are sanitised.
    #[test]
    fn tiny_bounds_refuse_without_panicking() {
        let mut r = test_reasm(limits(100, 1_000));
        assert_eq!(r.limits().low_thresh, 100);
        let t = Instant::ZERO;
        assert_eq!(
            r.push_fragment(t, (1, 1), 'a', 0, true, &[0; 800]),
            FragOutcome::Dropped(FragDrop::NoRoom)
        );
        assert_eq!(r.memory(), ReassemblyMemory::default());
        let mut r = test_reasm(limits(0, 0));
        assert_eq!(
            r.push_fragment(t, (1, 1), 'a', 0, false, &[0; 1]),
            FragOutcome::Dropped(FragDrop::NoRoom)
        );
    }

    /// IPv6 sources are charged per /64.
    #[test]
    fn ipv6_sources_are_slash_64s() {
        let a: Ipv6Addr = "2001:db8:1:2::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: Ipv6Addr = "2001:db8:1:3::1".parse().unwrap();
        let d = Ipv6Addr::UNSPECIFIED;
        assert_eq!((a, d, 1).source(), (b, d, 2).source());
        assert_ne!((a, d, 1).source(), (c, d, 1).source());
    }

    /// Random fragments from a few sources under small bounds: no panic, the accounting
    /// matches the buffers held, and the high mark is never passed.
    #[test]
    fn random_fragments_keep_the_accounting_and_the_bound() {
        let mut rng = netfold_testkit::Rng::new(7);
        let l = ReassemblyLimits {
            high_thresh: 40_000,
            low_thresh: 30_000,
            source_max_queues: 6,
            max_queues: 20,
            max_fragments: 8,
            max_payload: 4000,
            ..ReassemblyLimits::default()
        };
        let mut r = test_reasm(l);
        let mut t = Instant::ZERO;
        for _ in 0..50_000 {
            t += Duration::from_micros(rng.next() % 3000);
            let key = ((rng.next() % 5) as u32, (rng.next() % 12) as u32);
            let start = 8 * (rng.next() % 400) as usize;
            let len = 8 * (rng.next() % 64) as usize + (rng.next() % 2) as usize;
            let more = rng.coin();
            let data = vec![key.1 as u8; len];
            if let FragOutcome::Complete(_, d) = r.push_fragment(t, key, 'x', start, more, &data) {
                r.recycle(d);
            }
            if rng.next().is_multiple_of(100) {
                r.expire(t);
            }
            let held: usize = r.queues.values().map(|d| d.charged).sum::<usize>()
                + r.spare.iter().map(|b| b.capacity()).sum::<usize>();
            assert_eq!(r.bytes, held);
            assert!(r.bytes <= l.high_thresh);
            for d in r.queues.values() {
                assert_eq!(d.charged, d.cost());
            }
            let per: usize = r.sources.values().map(|s| s.queues).sum();
            assert_eq!(per, r.queues.len());
            assert_eq!(r.index.len(), r.queues.len());
        }
        assert!(r.memory().peak <= l.high_thresh);
    }
}
