//! Connection data buffers, allocated once at connection creation and never grown:
//! - [`SendRing`]: bytes queued by `send()` from SND.UNA onwards (unacknowledged + unsent).
//! - [`RecvRing`]: in-order bytes waiting for `recv()`, followed (in the same storage) by
//!   out-of-order bytes placed at their window offset; an [`Assembler`] remembers which
//!   out-of-order ranges are filled. Out-of-order data therefore costs no extra memory and is
//!   bounded by the receive window.

use crate::mem::CopyMode;

/// Idle ring buffers kept by one [`RingCache`], and the most bytes they may hold together.
const CACHE_MAX_BUFFERS: usize = 64;
const CACHE_MAX_BYTES: usize = 64 << 20;

/// Ring storage is recycled, not freed (seed 000 §4.2): a connection's rings go back to its
/// stack's cache when it ends and the next connection of that stack takes them. Without it
/// every connection zero-filled two fresh 256 KiB buffers, and TCP_CRR spent over half its time
/// in page faults and memset. Contents are never read beyond what the ring has written, so a
/// recycled buffer needs no clearing.
///
/// The cache is owned by the [`TcpLayer`](super::TcpLayer) (one per stack, no hidden global):
/// rings are taken from it when a connection's buffers are allocated and given back explicitly
/// (`release`); a ring that is simply dropped frees its memory.
#[derive(Debug, Default)]
pub struct RingCache {
    idle: Vec<Vec<u8>>,
    bytes: usize,
}

impl RingCache {
    pub fn new() -> Self {
        RingCache::default()
    }

    /// A buffer of exactly `cap` bytes: a cached one if any has that size, else a new one.
    pub fn take(&mut self, cap: usize) -> Vec<u8> {
        if cap == 0 {
            return Vec::new();
        }
        match self.idle.iter().position(|b| b.len() == cap) {
            Some(i) => {
                let b = self.idle.swap_remove(i);
                self.bytes -= b.len();
                b
            }
            None => vec![0; cap],
        }
    }

    /// Returns a buffer to the cache (dropped if the cache is full).
    pub fn give(&mut self, buf: Vec<u8>) {
        if buf.is_empty() {
            return;
        }
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
        let tail = (self.head + self.len) % cap;
        let first = n.min(cap - tail);
        mode.copy(&mut self.buf[tail..tail + first], &data[..first]);
        mode.copy(&mut self.buf[..n - first], &data[first..n]);
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
        let start = (self.head + off) % cap;
        let first = len.min(cap - start);
        (&self.buf[start..start + first], &self.buf[..len - first])
    }
    /// Drops `n` bytes from the head (they were acknowledged).
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        if self.buf.is_empty() {
            return;
        }
        self.head = (self.head + n) % self.buf.len();
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
    pub fn new() -> Self {
        Assembler {
            ranges: Vec::with_capacity(MAX_OOO_RANGES + 1),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
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
        let cap = self.buf.len();
        let data = data.slice(0, cap.saturating_sub(self.len + off));
        if data.is_empty() {
            return Some(0);
        }
        if off > 0 && !self.asm.add(off, data.len()) {
            return None;
        }
        let start = (self.head + self.len + off) % cap;
        let first = data.len().min(cap - start);
        data.slice(0, first)
            .copy_with(mode, &mut self.buf[start..start + first]);
        data.slice(first, data.len())
            .copy_with(mode, &mut self.buf[..data.len() - first]);
        let advanced = if off == 0 {
            self.asm.shift(data.len());
            data.len() + self.asm.pop_front()
        } else {
            self.asm.pop_front()
        };
        self.len += advanced;
        Some(advanced)
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
        mode.copy(&mut out[first..n], &self.buf[..n - first]);
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
        mode.copy(&mut out[first..n], &self.buf[..n - first]);
        self.head = (self.head + n) % cap;
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
}

#[cfg(test)]
mod tests {
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
