//! Connection data buffers, allocated at connection creation and grown (never shrunk) by
//! auto-tuning (`autotune.rs`) on a live connection:
//! - [`SendRing`]: bytes queued by `send()` from SND.UNA onwards (unacknowledged + unsent).
//! - [`RecvRing`]: in-order bytes waiting for `recv()`, followed (in the same storage) by
//!   out-of-order bytes placed at their window offset; an [`Assembler`] remembers which
//!   out-of-order ranges are filled. Out-of-order data therefore costs no extra memory and is
//!   bounded by the receive window.

use crate::mem::CopyMode;

/// `i % cap` for a ring index: the operands are an in-range index plus a length that is at
/// most the capacity, so one conditional subtraction replaces the division (a 64-bit `div`
/// costs 10-20 cycles of latency on the per-segment path; several run per transaction).
/// The general remainder remains for anything larger, and a zero capacity returns `i`.
#[inline(always)]
fn wrap(i: usize, cap: usize) -> usize {
    if i < cap {
        i
    } else if i - cap < cap {
        i - cap
    } else if cap == 0 {
        i
    } else {
        i % cap
    }
}

/// Idle ring buffers kept by one [`RingCache`], and the most bytes they may hold together.
const CACHE_MAX_BUFFERS: usize = 64;
const CACHE_MAX_BYTES: usize = 64 << 20;

/// Default per-stack budget for socket-buffer bytes (all rings of all connections), which
/// buffer GROWTH may not exceed. Linux's `tcp_mem[2]` (the hard limit) is 3/32 of the
/// machine's free buffer pages, 1.5 GiB on a 16 GiB host; netfold takes no machine size into a
/// sans-IO core, so the default is that order of magnitude, 1 GiB (~170 connections at the
/// 6 MiB receive maximum), and [`StackConfig`](crate::iface::StackConfig) sets it.
pub const DEFAULT_BUFFER_BUDGET: usize = 1 << 30;

/// Ring storage is recycled, not freed (the OLS 2002 study): a connection's rings go back to its
/// stack's cache when it ends and the next connection of that stack takes them. Without it
/// every connection zero-filled two fresh 256 KiB buffers, and TCP_CRR spent over half its time
/// in page faults and memset. Contents are never read beyond what the ring has written, so a
/// recycled buffer needs no clearing.
///
/// The cache is owned by the [`TcpLayer`](super::TcpLayer) (one per stack, no hidden global):
/// rings are taken from it when a connection's buffers are allocated and given back explicitly
/// (`release`); a ring that is simply dropped frees its memory.
///
/// The cache is also the stack's socket-buffer ACCOUNT: every ring taken from it is charged
/// (`in_use`) until it is given back. Rings of any size may be cached (auto-tuned rings grow
/// through a fixed ladder of sizes, so a returned ring fits the next connection that reaches
/// the same step); a request is served only by a buffer of exactly its size.
#[derive(Debug)]
pub struct RingCache {
    idle: Vec<Vec<u8>>,
    bytes: usize,
    /// Bytes of ring storage held by connections now.
    in_use: usize,
    /// The most `in_use` may reach by growth ([`RingCache::take_for_growth`]).
    budget: usize,
    /// Growth steps refused because the budget was exhausted.
    budget_refusals: u64,
}

impl Default for RingCache {
    fn default() -> Self {
        RingCache {
            idle: Vec::new(),
            bytes: 0,
            in_use: 0,
            budget: DEFAULT_BUFFER_BUDGET,
            budget_refusals: 0,
        }
    }
}

impl RingCache {
    pub fn new() -> Self {
        RingCache::default()
    }

    /// A buffer of exactly `cap` bytes: a cached one if any has that size, else a new one.
    /// Charged to the budget but never refused (a connection's initial buffers are its
    /// minimum; only growth is subject to the budget).
    pub fn take(&mut self, cap: usize) -> Vec<u8> {
        if cap == 0 {
            return Vec::new();
        }
        self.in_use += cap;
        match self.idle.iter().position(|b| b.len() == cap) {
            Some(i) => {
                let b = self.idle.swap_remove(i);
                self.bytes -= b.len();
                b
            }
            None => vec![0; cap],
        }
    }

    /// A buffer of `cap` bytes to replace one of `old` bytes, if the budget allows holding
    /// `cap - old` more bytes; `None` (counted) otherwise: back-pressure, never a failure.
    pub fn take_for_growth(&mut self, cap: usize, old: usize) -> Option<Vec<u8>> {
        if self.in_use.saturating_sub(old) + cap > self.budget {
            self.budget_refusals += 1;
            return None;
        }
        Some(self.take(cap))
    }

    /// Sets the budget for socket-buffer bytes (growth stops at it).
    pub fn set_budget(&mut self, bytes: usize) {
        self.budget = bytes;
    }
    pub fn budget(&self) -> usize {
        self.budget
    }
    /// Ring bytes held by connections now.
    pub fn in_use(&self) -> usize {
        self.in_use
    }
    /// Growth steps refused by the budget so far.
    pub fn budget_refusals(&self) -> u64 {
        self.budget_refusals
    }

    /// Returns a buffer to the cache (dropped if the cache is full) and uncharges it.
    pub fn give(&mut self, buf: Vec<u8>) {
        if buf.is_empty() {
            return;
        }
        self.in_use = self.in_use.saturating_sub(buf.len());
        if self.idle.len() < CACHE_MAX_BUFFERS && self.bytes + buf.len() <= CACHE_MAX_BYTES {
            self.bytes += buf.len();
            self.idle.push(buf);
        }
    }

    /// Buffers held now (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.idle.len()
    }

    pub fn is_empty(&self) -> bool {
        self.idle.is_empty()
    }
}

/// A byte ring of fixed capacity.
#[derive(Debug, Clone)]
pub struct SendRing {
    buf: Vec<u8>,
    head: usize,
    len: usize,
}

impl SendRing {
    /// A ring with fresh (zeroed) storage of `cap` bytes.
    pub fn with_capacity(cap: usize) -> Self {
        SendRing {
            buf: vec![0; cap],
            head: 0,
            len: 0,
        }
    }
    /// A ring with storage of `cap` bytes from `cache`.
    pub fn from_cache(cap: usize, cache: &mut RingCache) -> Self {
        SendRing {
            buf: cache.take(cap),
            head: 0,
            len: 0,
        }
    }
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn free(&self) -> usize {
        self.buf.len() - self.len
    }
    /// Appends as much of `data` as fits, copying with `mode`; returns the count.
    pub fn push(&mut self, data: &[u8], mode: CopyMode) -> usize {
        let cap = self.buf.len();
        let n = data.len().min(self.free());
        if n == 0 {
            return 0;
        }
        let tail = wrap(self.head + self.len, cap);
        let first = n.min(cap - tail);
        mode.copy(&mut self.buf[tail..tail + first], &data[..first]);
        if first < n {
            mode.copy(&mut self.buf[..n - first], &data[first..n]);
        }
        self.len += n;
        n
    }
    /// Up to `len` bytes starting `off` bytes after the head, as two slices (the ring may wrap).
    pub fn slices(&self, off: usize, len: usize) -> (&[u8], &[u8]) {
        let cap = self.buf.len();
        if off >= self.len || cap == 0 {
            return (&[], &[]);
        }
        let len = len.min(self.len - off);
        let start = wrap(self.head + off, cap);
        let first = len.min(cap - start);
        (&self.buf[start..start + first], &self.buf[..len - first])
    }
    /// Drops `n` bytes from the head (they were acknowledged).
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        if self.buf.is_empty() {
            return;
        }
        self.head = wrap(self.head + n, self.buf.len());
        self.len -= n;
        if self.len == 0 {
            self.head = 0;
        }
    }
    /// Releases the storage into `cache` (connection finished; nothing more will be sent).
    pub fn release(&mut self, cache: &mut RingCache) {
        cache.give(std::mem::take(&mut self.buf));
        self.head = 0;
        self.len = 0;
    }
    /// Grows the ring to `cap` bytes on a live connection: the queued bytes move, in order, to
    /// the start of a bigger buffer from `cache` (budget permitting) and the old storage goes
    /// back to the cache. `false` if `cap` is not larger or the budget refused.
    pub fn grow(&mut self, cap: usize, cache: &mut RingCache) -> bool {
        let old = self.buf.len();
        if cap <= old {
            return false;
        }
        let Some(mut new) = cache.take_for_growth(cap, old) else {
            return false;
        };
        let (a, b) = self.slices(0, self.len);
        new[..a.len()].copy_from_slice(a);
        new[a.len()..a.len() + b.len()].copy_from_slice(b);
        cache.give(std::mem::replace(&mut self.buf, new));
        self.head = 0;
        true
    }
}

/// Maximum number of out-of-order ranges remembered; a segment that would need more is
/// dropped (and counted by the caller). Bounds per-connection state against hostile peers.
pub const MAX_OOO_RANGES: usize = 32;

/// Filled ranges beyond the in-order data, as (offset, length) pairs with offsets relative to
/// the end of the in-order data (i.e. to RCV.NXT). Sorted, non-overlapping, non-adjacent.
#[derive(Debug, Clone, Default)]
pub struct Assembler {
    ranges: Vec<(usize, usize)>,
}

impl Assembler {
    /// An empty assembler. Its storage is reserved at the first out-of-order range, not
    /// here: most connections (every TCP_CRR one) never see one, and the allocation and
    /// free cost every connection ~200 instructions.
    pub fn new() -> Self {
        Assembler { ranges: Vec::new() }
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    /// The range list's storage, emptied, for a recycled control block (`Conn::renew`).
    pub fn take_storage(&mut self) -> Vec<(usize, usize)> {
        let mut v = std::mem::take(&mut self.ranges);
        v.clear();
        v
    }
    /// Takes `v` (emptied) as the range list's storage if this assembler holds none yet.
    pub fn adopt_storage(&mut self, mut v: Vec<(usize, usize)>) {
        if self.ranges.capacity() == 0 && v.capacity() <= MAX_OOO_RANGES + 1 {
            v.clear();
            self.ranges = v;
        }
    }
    pub fn ranges(&self) -> &[(usize, usize)] {
        &self.ranges
    }
    /// Records `[off, off+len)` as filled. Returns `false` (and changes nothing) if that would
    /// exceed [`MAX_OOO_RANGES`].
    pub fn add(&mut self, off: usize, len: usize) -> bool {
        if len == 0 {
            return true;
        }
        let (mut s, mut e) = (off, off + len);
        // Ranges that overlap or touch [s, e) merge into it.
        let first = self.ranges.partition_point(|&(o, l)| o + l < s);
        let mut last = first;
        while last < self.ranges.len() && self.ranges[last].0 <= e {
            s = s.min(self.ranges[last].0);
            e = e.max(self.ranges[last].0 + self.ranges[last].1);
            last += 1;
        }
        if first == last && self.ranges.len() >= MAX_OOO_RANGES {
            return false;
        }
        if self.ranges.capacity() == 0 {
            self.ranges.reserve_exact(MAX_OOO_RANGES + 1);
        }
        self.ranges.drain(first..last);
        self.ranges.insert(first, (s, e - s));
        true
    }
    /// If a range starts at offset 0, removes it and returns its length; then shifts all other
    /// offsets down by that much (RCV.NXT advanced).
    pub fn pop_front(&mut self) -> usize {
        match self.ranges.first() {
            Some(&(0, l)) => {
                self.ranges.remove(0);
                self.shift(l);
                l
            }
            _ => 0,
        }
    }
    /// RCV.NXT advanced by `n` bytes of in-order data that did not come from the assembler.
    pub fn shift(&mut self, n: usize) {
        // Ranges entirely below the new origin vanish; a straddling one is cut.
        self.ranges.retain_mut(|r| {
            if r.0 + r.1 <= n {
                false
            } else {
                if r.0 < n {
                    r.1 -= n - r.0;
                    r.0 = 0;
                } else {
                    r.0 -= n;
                }
                true
            }
        });
    }
    /// The range containing `off`, if any.
    pub fn containing(&self, off: usize) -> Option<(usize, usize)> {
        self.ranges
            .iter()
            .copied()
            .find(|&(o, l)| o <= off && off < o + l)
    }
    pub fn clear(&mut self) {
        self.ranges.clear();
    }
}

/// Receive storage: in-order bytes, then the window region where out-of-order bytes land.
#[derive(Debug, Clone)]
pub struct RecvRing {
    buf: Vec<u8>,
    head: usize,
    len: usize,
    pub asm: Assembler,
}

impl RecvRing {
    /// A ring with fresh (zeroed) storage of `cap` bytes.
    pub fn with_capacity(cap: usize) -> Self {
        RecvRing {
            buf: vec![0; cap],
            head: 0,
            len: 0,
            asm: Assembler::new(),
        }
    }
    /// A ring with storage of `cap` bytes from `cache`.
    pub fn from_cache(cap: usize, cache: &mut RingCache) -> Self {
        RecvRing {
            buf: cache.take(cap),
            head: 0,
            len: 0,
            asm: Assembler::new(),
        }
    }
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }
    /// In-order bytes readable now.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Writes `data` at `off` bytes past RCV.NXT and returns how many bytes became in-order
    /// (RCV.NXT must advance by that much). `None` if the assembler is full (segment dropped).
    /// The caller trims `data` so that `len + off + data.len() <= capacity`.
    pub fn write_at(&mut self, off: usize, data: &[u8], mode: CopyMode) -> Option<usize> {
        let parts = [data];
        self.write_payload_at(off, super::Payload::new(&parts), mode)
    }

    /// `write_at` for a payload that may span several slices (GRO-merged segments).
    pub fn write_payload_at(
        &mut self,
        off: usize,
        data: super::Payload<'_>,
        mode: CopyMode,
    ) -> Option<usize> {
        self.write_counted(off, data, mode).0
    }

    /// [`RecvRing::write_payload_at`], also returning how many bytes were copied (the pass
    /// counters: only the gaps are copied when out-of-order data is queued).
    pub fn write_counted(
        &mut self,
        off: usize,
        data: super::Payload<'_>,
        mode: CopyMode,
    ) -> (Option<usize>, usize) {
        let data = data.slice(0, self.room(off));
        let copied = self.copy_gaps(off, data, mode);
        (self.commit(off, data.len()), copied)
    }

    /// Bytes that fit at `off` past RCV.NXT.
    fn room(&self, off: usize) -> usize {
        self.buf.len().saturating_sub(self.len + off)
    }

    /// Copies `data` into the ring at `off` past RCV.NXT where nothing is queued yet (all of
    /// it when no out-of-order data is queued); returns the bytes copied. Nothing is committed.
    pub fn copy_gaps(&mut self, off: usize, data: super::Payload<'_>, mode: CopyMode) -> usize {
        let data = data.slice(0, self.room(off));
        if data.is_empty() {
            return 0;
        }
        if self.asm.ranges().is_empty() {
            self.copy_in(off, data, mode);
            return data.len();
        }
        // First data wins: bytes already queued out of order are never overwritten by a
        // later copy carrying different bytes (a retransmission that overlaps them, or an
        // attacker's); only the gaps are filled. RFC 9293 §3.10.7.4 leaves the choice open;
        // this keeps the receiver from ever mixing two versions of the stream.
        let end = off + data.len();
        let mut pos = off;
        let mut copied = 0;
        for i in 0..self.asm.ranges().len() {
            let (o, l) = self.asm.ranges()[i];
            if o + l <= pos {
                continue;
            }
            if o >= end {
                break;
            }
            if o > pos {
                self.copy_in(pos, data.slice(pos - off, o - off), mode);
                copied += o - pos;
            }
            pos = pos.max(o + l);
            if pos >= end {
                break;
            }
        }
        if pos < end {
            self.copy_in(pos, data.slice(pos - off, end - off), mode);
            copied += end - pos;
        }
        copied
    }

    /// Records `len` bytes at `off` past RCV.NXT as received (they are in the ring already:
    /// copied by [`RecvRing::copy_gaps`] or staged by [`RecvRing::stage_copy`]) and returns
    /// how many bytes became in-order. `None` if the assembler is full (nothing recorded).
    pub fn commit(&mut self, off: usize, len: usize) -> Option<usize> {
        let len = len.min(self.room(off));
        if len == 0 {
            return Some(0);
        }
        if off == 0 && self.asm.is_empty() {
            // In order with nothing queued above: every byte becomes in-order, and the
            // assembler has nothing to shift or pop.
            self.len += len;
            return Some(len);
        }
        if off > 0 && !self.asm.add(off, len) {
            return None;
        }
        let advanced = if off == 0 {
            self.asm.shift(len);
            len + self.asm.pop_front()
        } else {
            self.asm.pop_front()
        };
        self.len += advanced;
        Some(advanced)
    }

    /// Whether `len` bytes at `off` past RCV.NXT can be copied in before anything decides
    /// whether to keep them ([`RecvRing::stage_copy`]): they fit, and no byte of that range
    /// is queued already. Only then is writing them harmless if the segment is dropped: the
    /// bytes land in storage that holds nothing received, and stay uncommitted.
    pub fn can_stage(&self, off: usize, len: usize) -> bool {
        len > 0
            && len <= self.room(off)
            && !self
                .asm
                .ranges()
                .iter()
                .any(|&(o, l)| o < off + len && off < o + l)
    }

    /// Copies `src` into the ring at `off` past RCV.NXT without committing it, and returns
    /// the checksum of `src` taken in the same pass when `sum` (0 otherwise). The caller
    /// checked [`RecvRing::can_stage`]; [`RecvRing::commit`] keeps the bytes later.
    #[inline]
    pub fn stage_copy(&mut self, off: usize, src: &[u8], mode: CopyMode, sum: bool) -> u16 {
        let cap = self.buf.len();
        if src.is_empty() || cap == 0 {
            return 0;
        }
        let start = wrap(self.head + self.len + off, cap);
        let first = src.len().min(cap - start);
        let (a, b) = src.split_at(first);
        let dst_a = &mut self.buf[start..start + first];
        if !sum {
            mode.copy(dst_a, a);
            mode.copy(&mut self.buf[..b.len()], b);
            return 0;
        }
        let sa = mode.copy_with_checksum(dst_a, a);
        if b.is_empty() {
            return sa;
        }
        let sb = mode.copy_with_checksum(&mut self.buf[..b.len()], b);
        crate::mem::checksum_concat(sa, sb, a.len())
    }

    /// Copies `data` into the ring at `off` bytes past RCV.NXT (the caller checked the room).
    fn copy_in(&mut self, off: usize, data: super::Payload<'_>, mode: CopyMode) {
        let cap = self.buf.len();
        let start = wrap(self.head + self.len + off, cap);
        let first = data.len().min(cap - start);
        data.slice(0, first)
            .copy_with(mode, &mut self.buf[start..start + first]);
        data.slice(first, data.len())
            .copy_with(mode, &mut self.buf[..data.len() - first]);
    }

    /// A borrowing read: `f` sees the in-order bytes where they lie (two slices, the ring may
    /// wrap) and returns how many it consumed; those are released to the ring without being
    /// copied. Returns the count consumed (at most what `f` was shown).
    pub fn read_in_place(&mut self, f: impl FnOnce(&[u8], &[u8]) -> usize) -> usize {
        let cap = self.buf.len();
        if self.len == 0 || cap == 0 {
            return 0;
        }
        let first = self.len.min(cap - self.head);
        let a = &self.buf[self.head..self.head + first];
        let b = &self.buf[..self.len - first];
        let n = f(a, b).min(self.len);
        self.head = wrap(self.head + n, cap);
        self.len -= n;
        n
    }

    /// Copies in-order bytes out to `out` with `mode` without consuming them (MSG_PEEK);
    /// returns the count.
    pub fn peek(&self, out: &mut [u8], mode: CopyMode) -> usize {
        let cap = self.buf.len();
        let n = out.len().min(self.len);
        if n == 0 {
            return 0;
        }
        let first = n.min(cap - self.head);
        mode.copy(&mut out[..first], &self.buf[self.head..self.head + first]);
        if first < n {
            mode.copy(&mut out[first..n], &self.buf[..n - first]);
        }
        n
    }

    /// Copies in-order bytes out to `out` with `mode`; returns the count.
    pub fn read(&mut self, out: &mut [u8], mode: CopyMode) -> usize {
        let cap = self.buf.len();
        let n = out.len().min(self.len);
        if n == 0 {
            return 0;
        }
        let first = n.min(cap - self.head);
        mode.copy(&mut out[..first], &self.buf[self.head..self.head + first]);
        if first < n {
            mode.copy(&mut out[first..n], &self.buf[..n - first]);
        }
        self.head = wrap(self.head + n, cap);
        self.len -= n;
        n
    }
    /// Releases the storage into `cache` (nobody will read any more).
    pub fn release(&mut self, cache: &mut RingCache) {
        cache.give(std::mem::take(&mut self.buf));
        self.head = 0;
        self.len = 0;
        self.asm.clear();
    }
    /// Grows the ring to `cap` bytes on a live connection. The in-order bytes AND the
    /// out-of-order region behind them move to the start of a bigger buffer (from `cache`,
    /// budget permitting), keeping their offsets from the head, so the assembler's ranges stay
    /// valid and nothing is lost or reordered. `false` if `cap` is not larger or the budget
    /// refused.
    pub fn grow(&mut self, cap: usize, cache: &mut RingCache) -> bool {
        let old = self.buf.len();
        if cap <= old {
            return false;
        }
        let Some(mut new) = cache.take_for_growth(cap, old) else {
            return false;
        };
        // Bytes from the head up to the end of the last out-of-order range.
        let used = self.len + self.asm.ranges().last().map_or(0, |&(o, l)| o + l);
        let used = used.min(old);
        if used > 0 {
            let first = used.min(old - self.head);
            new[..first].copy_from_slice(&self.buf[self.head..self.head + first]);
            new[first..used].copy_from_slice(&self.buf[..used - first]);
        }
        cache.give(std::mem::replace(&mut self.buf, new));
        self.head = 0;
        true
    }
}

#[cfg(test)]
mod tests {

    /// The ring index helper equals the remainder for every sum the rings form (index plus
    /// at most the capacity) and for larger ones.
    #[test]
    fn wrap_is_the_remainder() {
        for cap in [1usize, 2, 7, 4096, 65536] {
            for i in (0..3 * cap).step_by((cap / 97).max(1)) {
                assert_eq!(super::wrap(i, cap), i % cap, "i {i} cap {cap}");
            }
        }
        assert_eq!(super::wrap(5, 0), 5);
    }
    use super::*;

    #[test]
    fn send_ring_wraps() {
        let mut r = SendRing::with_capacity(8);
        assert_eq!(r.push(b"abcdef", CopyMode::Kernels), 6);
        r.consume(4);
        assert_eq!(r.push(b"ghijklmn", CopyMode::Kernels), 6);
        let (a, b) = r.slices(0, 8);
        let mut v = a.to_vec();
        v.extend_from_slice(b);
        assert_eq!(v, b"efghijkl");
        let (a, b) = r.slices(3, 2);
        assert_eq!([a, b].concat(), b"hi");
        assert_eq!(r.slices(8, 1), (&[][..], &[][..]));
    }

    #[test]
    fn assembler_merges_overlaps_and_bounds() {
        let mut a = Assembler::new();
        assert!(a.add(10, 5));
        assert!(a.add(20, 5));
        assert!(a.add(12, 10)); // bridges both
        assert_eq!(a.ranges(), &[(10, 15)]);
        assert!(a.add(10, 2)); // duplicate
        assert_eq!(a.ranges(), &[(10, 15)]);
        a.shift(12);
        assert_eq!(a.ranges(), &[(0, 13)]);
        assert_eq!(a.pop_front(), 13);
        for i in 0..MAX_OOO_RANGES {
            assert!(a.add(i * 10 + 1, 1));
        }
        assert!(!a.add(1000, 1));
        assert!(
            a.add(2, 1),
            "merging into an existing range is always possible"
        );
    }

    #[test]
    fn rings_grow_without_losing_or_reordering() {
        let mut cache = RingCache::new();
        let mut r = RecvRing::from_cache(10, &mut cache);
        assert_eq!(r.write_at(0, b"abcdef", CopyMode::Kernels), Some(6));
        let mut out = [0u8; 4];
        assert_eq!(r.read(&mut out, CopyMode::Kernels), 4); // head 4, "ef" queued
        assert_eq!(r.write_at(2, b"ijk", CopyMode::Kernels), Some(0)); // wraps, out of order
        assert!(r.grow(32, &mut cache));
        assert_eq!(r.capacity(), 32);
        assert_eq!(cache.in_use(), 32);
        assert_eq!(cache.len(), 1, "the old ring went back to the cache");
        assert_eq!(r.write_at(0, b"gh", CopyMode::Kernels), Some(5));
        assert_eq!(
            r.write_at(0, b"lmnopqrstuvwxyz", CopyMode::Kernels),
            Some(15)
        );
        let mut out = [0u8; 32];
        assert_eq!(r.read(&mut out, CopyMode::Kernels), 22);
        assert_eq!(&out[..22], b"efghijklmnopqrstuvwxyz");

        let mut s = SendRing::from_cache(8, &mut cache);
        assert_eq!(
            cache.len(),
            1,
            "the cached 10-byte ring does not serve an 8-byte one"
        );
        assert_eq!(s.push(b"abcdef", CopyMode::Kernels), 6);
        s.consume(5);
        assert_eq!(s.push(b"ghijklm", CopyMode::Kernels), 7); // wraps
        assert!(s.grow(16, &mut cache));
        assert_eq!(s.push(b"nop", CopyMode::Kernels), 3);
        let (a, b) = s.slices(0, 16);
        assert_eq!([a, b].concat(), b"fghijklmnop");
        assert!(!s.grow(16, &mut cache), "not larger");
    }

    #[test]
    fn growth_stops_at_the_budget() {
        let mut cache = RingCache::new();
        cache.set_budget(40);
        let mut r = RecvRing::from_cache(16, &mut cache);
        let mut s = SendRing::from_cache(16, &mut cache);
        assert!(!r.grow(32, &mut cache), "16 + 32 > 40");
        assert_eq!(cache.budget_refusals(), 1);
        assert!(r.grow(24, &mut cache));
        assert_eq!(cache.in_use(), 40);
        assert_eq!(r.capacity(), 24);
        s.release(&mut cache);
        assert_eq!(cache.in_use(), 24);
        assert!(r.grow(40, &mut cache));
    }

    #[test]
    fn recv_ring_reassembles() {
        let mut r = RecvRing::with_capacity(10);
        assert_eq!(r.write_at(3, b"def", CopyMode::Kernels), Some(0));
        assert_eq!(r.write_at(0, b"abc", CopyMode::Kernels), Some(6));
        let mut out = [0u8; 4];
        assert_eq!(r.read(&mut out, CopyMode::Kernels), 4);
        assert_eq!(&out, b"abcd");
        // wraps: 2 in-order bytes at head 4; write 8 more (capacity 10)
        assert_eq!(r.write_at(4, b"ijkl", CopyMode::Kernels), Some(0));
        assert_eq!(r.write_at(0, b"ghXX", CopyMode::Kernels), Some(8)); // overlap rewrites same position
        let mut out = [0u8; 10];
        assert_eq!(r.read(&mut out, CopyMode::Kernels), 10);
        assert_eq!(&out, b"efghXXijkl");
    }
}
