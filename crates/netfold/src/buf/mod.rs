//! Recycled packet buffers (the OLS 2002 study: "the allocated buffers should be recycled instead of
//! freeing and reallocating them again").
//!
//! A [`PacketBuf`] is one frame with headroom in front so that lower layers can prepend headers
//! without moving the payload. A [`Pool`] is a per-stack free list: `get` hands out a recycled
//! buffer when one is available and only allocates when the list is empty; `put` returns one.
//! The counters let benchmarks show "allocations per buffer refill" (the OLS 2002 study's Tables 9-10).

pub mod borrow;
pub mod zc;

pub use borrow::{BorrowedPayload, Recycler};
pub use zc::{Frags, Gather, Region, ZcBuf};

/// Where a slice of received bytes lies in the receive batch: the index of its frame in the
/// batch and its offset in that frame. The interface says so for the payloads it hands TCP
/// straight from a frame, so that a frame-level borrowing read may keep the frame instead of
/// copying (`tcp/frames.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FramePos {
    /// The frame's index in the batch.
    pub frame: u32,
    /// The slice's first byte, from the start of the frame.
    pub offset: u32,
}

/// Default bytes reserved in front of the data for headers to be prepended.
pub const DEFAULT_HEADROOM: usize = 128;

/// What is known about a packet's transport checksum, carried with the packet so that it is
/// verified exactly once (Linux `skb->ip_summed`, gVisor's `PacketBuffer` checksum flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Csum {
    /// Nobody has checked it yet: the stack verifies it (once) if its device asks it to.
    #[default]
    Unverified,
    /// Checked already (by the device, by the kernel, or by the stack earlier on this path).
    Verified,
    /// Linux `CHECKSUM_PARTIAL`: the field at `start + offset` holds only the pseudo-header
    /// sum; whoever hands the packet to a wire sums from `start` to the end and stores the
    /// complement. A received partial packet never crossed a wire and counts as verified.
    Partial {
        /// Where the summed bytes begin (the transport header).
        start: u16,
        /// The checksum field's offset from `start`.
        offset: u16,
    },
}

impl Csum {
    /// Whether the checksum still has to be checked on receive.
    pub fn needs_verify(self) -> bool {
        self == Csum::Unverified
    }
}

/// Frame memory a device lends the stack to build outgoing frames in, so that the device
/// sends them from where they were built (AF_XDP's transmit chunks in its UMEM): a fixed-size
/// region the buffer owns until it is given back. See [`Pool::lend`] and
/// [`crate::phy::Device::tx_lend`].
///
/// Dropping it must give the memory back to its device (the stack drops a lent buffer it
/// cannot keep: a full pool, a frame that outgrew the region).
pub trait TxMem: core::any::Any + Send + Sync + core::fmt::Debug {
    /// The whole region.
    fn bytes(&self) -> &[u8];
    /// The whole region, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// For the device that lent it, to recognize its own memory.
    fn as_any(&self) -> &dyn core::any::Any;
    /// For the device that lent it, to take its own memory back.
    fn into_any(self: Box<Self>) -> Box<dyn core::any::Any>;
}

/// One packet: `data[start..end]` is the frame; `data[..start]` is headroom. The storage is a
/// heap vector, or memory a device lent ([`TxMem`]; then `data` is empty).
#[derive(Debug, Default)]
pub struct PacketBuf {
    data: Vec<u8>,
    lent: Option<Box<dyn TxMem>>,
    start: usize,
    end: usize,
    csum: Csum,
}

impl Clone for PacketBuf {
    /// A copy on the heap (lent memory stays with the original).
    fn clone(&self) -> Self {
        PacketBuf {
            data: self.store().to_vec(),
            lent: None,
            start: self.start,
            end: self.end,
            csum: self.csum,
        }
    }
}

impl PacketBuf {
    /// A buffer able to hold `capacity` bytes after `DEFAULT_HEADROOM` bytes of headroom.
    pub fn with_capacity(capacity: usize) -> Self {
        PacketBuf {
            data: vec![0; DEFAULT_HEADROOM + capacity],
            lent: None,
            start: DEFAULT_HEADROOM,
            end: DEFAULT_HEADROOM,
            csum: Csum::Unverified,
        }
    }

    /// An empty buffer in lent memory `mem`, with the default headroom (or none, if the
    /// region is smaller than that).
    pub fn lent(mem: Box<dyn TxMem>) -> Self {
        let start = DEFAULT_HEADROOM.min(mem.bytes().len());
        PacketBuf {
            data: Vec::new(),
            lent: Some(mem),
            start,
            end: start,
            csum: Csum::Unverified,
        }
    }

    /// Whether the buffer's storage is lent memory ([`PacketBuf::lent`]).
    #[inline]
    pub fn is_lent(&self) -> bool {
        self.lent.is_some()
    }

    /// The lent memory, if the storage is lent (for the device to see whether it is its own).
    pub fn lent_mem(&self) -> Option<&dyn TxMem> {
        self.lent.as_deref()
    }

    /// Takes the lent memory out with the frame's place in it (`start..end`), leaving an empty
    /// placeholder; `None` (buffer unchanged) if the storage is not lent.
    pub fn take_lent(&mut self) -> Option<(Box<dyn TxMem>, usize, usize)> {
        let mem = self.lent.take()?;
        let at = (self.start, self.end);
        self.start = 0;
        self.end = 0;
        Some((mem, at.0, at.1))
    }

    #[inline]
    fn store(&self) -> &[u8] {
        match &self.lent {
            None => &self.data,
            Some(m) => m.bytes(),
        }
    }

    #[inline]
    fn store_mut(&mut self) -> &mut [u8] {
        match &mut self.lent {
            None => &mut self.data,
            Some(m) => m.bytes_mut(),
        }
    }

    /// Makes the storage at least `len` bytes: grows the vector, or moves a frame that
    /// outgrew its lent region to the heap (dropping the region gives it back).
    #[cold]
    fn grow(&mut self, len: usize) {
        if let Some(m) = self.lent.take() {
            self.data = m.bytes().to_vec();
        }
        if self.data.len() < len {
            self.data.resize(len, 0);
        }
    }

    /// A buffer holding a copy of `frame`.
    pub fn from_slice(frame: &[u8]) -> Self {
        let mut b = Self::with_capacity(frame.len());
        b.extend_from_slice(frame);
        b
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
    /// Bytes that can still be appended without reallocating.
    pub fn tailroom(&self) -> usize {
        self.store().len() - self.end
    }
    pub fn headroom(&self) -> usize {
        self.start
    }
    /// The packet's checksum state (see [`Csum`]); `Unverified` for a fresh buffer.
    pub fn csum(&self) -> Csum {
        self.csum
    }
    /// Records what is known about the packet's checksum (a device that validated it, say).
    pub fn set_csum(&mut self, csum: Csum) {
        self.csum = csum;
    }
    pub fn as_slice(&self) -> &[u8] {
        &self.store()[self.start..self.end]
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let (start, end) = (self.start, self.end);
        &mut self.store_mut()[start..end]
    }

    /// Whether this is an empty stand-in left where a buffer was moved out (`mem::take`):
    /// no storage, nothing to recycle.
    pub fn is_placeholder(&self) -> bool {
        self.data.is_empty() && self.lent.is_none()
    }

    /// Empties the buffer, restores the default headroom (if the storage allows it) and forgets
    /// the checksum state.
    pub fn clear(&mut self) {
        self.start = DEFAULT_HEADROOM.min(self.store().len());
        self.end = self.start;
        self.csum = Csum::Unverified;
    }

    /// Grows the frame by `n` bytes at the end (growing the storage if needed) and returns them.
    #[inline]
    pub fn append(&mut self, n: usize) -> &mut [u8] {
        let at = self.end;
        let end = at + n;
        // A heap buffer with the room (every frame the stack builds in a pool buffer): one
        // look at the storage, the code of a heap-only buffer.
        if self.lent.is_none() && end <= self.data.len() {
            self.end = end;
            return &mut self.data[at..end];
        }
        self.append_slow(n)
    }

    /// `append` into lent memory or past the storage's end.
    #[inline(never)]
    fn append_slow(&mut self, n: usize) -> &mut [u8] {
        if self.tailroom() < n {
            self.grow(self.end + n);
        }
        let at = self.end;
        self.end += n;
        let end = self.end;
        &mut self.store_mut()[at..end]
    }

    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        crate::mem::copy(self.append(bytes.len()), bytes);
    }

    /// Sets the frame length to `len` bytes from the current start, growing storage if needed.
    pub fn set_len(&mut self, len: usize) {
        if self.store().len() < self.start + len {
            self.grow(self.start + len);
        }
        self.end = self.start + len;
    }

    /// Prepends `n` bytes of header space and returns it. Moves the data only when headroom is
    /// short (counted as a slow path by callers that care).
    pub fn prepend(&mut self, n: usize) -> &mut [u8] {
        if self.start < n {
            let len = self.len();
            let shift = n - self.start + DEFAULT_HEADROOM;
            let total = self.store().len() + shift;
            self.grow(0);
            self.data.resize(total, 0);
            self.data
                .copy_within(self.start..self.end, self.start + shift);
            self.start += shift;
            self.end = self.start + len;
        }
        self.start -= n;
        let start = self.start;
        &mut self.store_mut()[start..start + n]
    }

    /// Removes `n` bytes from the front (a parsed header), clamped to the length.
    pub fn advance(&mut self, n: usize) {
        self.start += n.min(self.len());
    }

    /// Shortens the frame to `len` bytes (no-op if already shorter).
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.end = self.start + len;
        }
    }
}

/// Counters of a [`Pool`]; see the OLS 2002 study's Tables 9-10 (alloc_skb vs ReceiveBufferFill).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers handed out by `get`.
    pub gets: u64,
    /// Of those, how many needed a fresh heap allocation.
    pub allocations: u64,
    /// Buffers returned with `put`.
    pub puts: u64,
    /// Returned buffers dropped because the pool was full.
    pub dropped: u64,
}

/// A free list of packet buffers of one size class.
#[derive(Debug)]
pub struct Pool {
    free: Vec<PacketBuf>,
    /// Buffers in memory the device lent ([`Pool::lend`]): handed out first.
    lent: Vec<PacketBuf>,
    buf_capacity: usize,
    max_free: usize,
    stats: PoolStats,
}

impl Pool {
    /// A pool of buffers that hold `buf_capacity` bytes (plus headroom), keeping at most
    /// `max_free` idle buffers.
    pub fn new(buf_capacity: usize, max_free: usize) -> Self {
        Pool {
            free: Vec::with_capacity(max_free),
            lent: Vec::new(),
            buf_capacity,
            max_free,
            stats: PoolStats::default(),
        }
    }

    /// Pre-allocates `n` buffers (bounded by `max_free`), so steady state starts warm.
    pub fn prefill(&mut self, n: usize) {
        while self.free.len() < n.min(self.max_free) {
            self.free.push(PacketBuf::with_capacity(self.buf_capacity));
        }
    }

    /// An empty buffer with default headroom and at least the pool's capacity.
    #[inline]
    pub fn get(&mut self) -> PacketBuf {
        self.stats.gets += 1;
        if !self.lent.is_empty() {
            return self.get_lent();
        }
        match self.free.pop() {
            Some(mut b) => {
                // A heap buffer of at least the pool's size (`put` keeps no other): the
                // default headroom fits, with no look at the storage.
                b.start = DEFAULT_HEADROOM;
                b.end = DEFAULT_HEADROOM;
                b.csum = Csum::Unverified;
                b
            }
            None => self.allocate(),
        }
    }

    /// `get` when the device lent buffers (out of line: heap-only devices never come here).
    #[inline(never)]
    fn get_lent(&mut self) -> PacketBuf {
        match self.lent.pop() {
            Some(mut b) => {
                b.clear();
                b
            }
            None => self.allocate(),
        }
    }

    /// `get` with no idle buffer: a new one (out of line; the steady state reuses).
    #[inline(never)]
    fn allocate(&mut self) -> PacketBuf {
        self.stats.allocations += 1;
        PacketBuf::with_capacity(self.buf_capacity)
    }

    /// Returns a buffer for reuse.
    #[inline]
    pub fn put(&mut self, buf: PacketBuf) {
        self.stats.puts += 1;
        // A lent buffer's vector is empty, so the size test alone keeps heap buffers of the
        // pool's size on the fast path and sends lent ones to `put_other`.
        if self.free.len() < self.max_free && buf.data.len() >= DEFAULT_HEADROOM + self.buf_capacity
        {
            self.free.push(buf);
        } else {
            self.put_other(buf);
        }
    }

    /// `put` of a lent buffer, or of a heap buffer the pool does not keep (full, too small).
    #[inline(never)]
    fn put_other(&mut self, buf: PacketBuf) {
        if buf.is_lent() {
            // Kept whatever `max_free` says: the device lent no more than it wants lent.
            self.lent.push(buf);
        } else {
            self.stats.dropped += 1;
        }
    }

    /// Adds a buffer in memory the device lent ([`PacketBuf::lent`], at least the pool's
    /// capacity plus headroom): `get` hands such buffers out before its own, so that frames
    /// are built where the device sends them from.
    pub fn lend(&mut self, buf: PacketBuf) {
        debug_assert!(buf.is_lent());
        self.lent.push(buf);
    }

    /// Lent buffers idle in the pool.
    pub fn lent_idle(&self) -> usize {
        self.lent.len()
    }

    pub fn buf_capacity(&self) -> usize {
        self.buf_capacity
    }
    pub fn idle(&self) -> usize {
        self.free.len()
    }
    pub fn stats(&self) -> PoolStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lent memory for the tests: a fixed region that counts its returns.
    #[derive(Debug)]
    struct Region(Vec<u8>, std::sync::Arc<std::sync::atomic::AtomicUsize>);
    impl TxMem for Region {
        fn bytes(&self) -> &[u8] {
            &self.0
        }
        fn bytes_mut(&mut self) -> &mut [u8] {
            &mut self.0
        }
        fn as_any(&self) -> &dyn core::any::Any {
            self
        }
        fn into_any(self: Box<Self>) -> Box<dyn core::any::Any> {
            self
        }
    }
    impl Drop for Region {
        fn drop(&mut self) {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn lent_buffers_are_handed_out_first_and_given_back_when_outgrown() {
        let back = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut pool = Pool::new(64, 4);
        pool.prefill(2);
        pool.lend(PacketBuf::lent(Box::new(Region(
            vec![0; 256],
            back.clone(),
        ))));
        let mut b = pool.get();
        assert!(b.is_lent());
        assert_eq!(pool.lent_idle(), 0);
        b.extend_from_slice(b"payload");
        b.prepend(4).copy_from_slice(b"head");
        assert_eq!(b.as_slice(), b"headpayload");
        let c = b.clone();
        assert!(!c.is_lent());
        assert_eq!(c.as_slice(), b"headpayload");
        // Back to the pool: kept as lent, whatever max_free says, and handed out first.
        pool.put(b);
        assert_eq!(pool.lent_idle(), 1);
        let mut b = pool.get();
        assert!(b.is_lent() && b.is_empty());
        b.extend_from_slice(b"abc");
        // Growing past the region moves the frame to the heap and gives the region back.
        b.append(300);
        assert!(!b.is_lent());
        assert_eq!(&b.as_slice()[..3], b"abc");
        assert_eq!(b.len(), 303);
        assert_eq!(back.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Taking the region out leaves a placeholder.
        let mut d = PacketBuf::lent(Box::new(Region(vec![0; 256], back.clone())));
        d.extend_from_slice(b"xy");
        let (mem, start, end) = d.take_lent().expect("lent");
        assert_eq!(&mem.bytes()[start..end], b"xy");
        assert!(d.is_placeholder());
        assert!(d.take_lent().is_none());
        // Headroom shortfall on lent memory: moved to the heap, bytes kept.
        let mut e = PacketBuf::lent(Box::new(Region(vec![0; 256], back.clone())));
        e.extend_from_slice(b"zz");
        e.prepend(DEFAULT_HEADROOM + 8);
        assert!(!e.is_lent());
        assert_eq!(&e.as_slice()[DEFAULT_HEADROOM + 8..], b"zz");
    }

    #[test]
    fn pool_recycles_instead_of_allocating() {
        let mut pool = Pool::new(2048, 8);
        let a = pool.get();
        pool.put(a);
        let _b = pool.get();
        let s = pool.stats();
        assert_eq!((s.gets, s.allocations, s.puts), (2, 1, 1));
    }

    #[test]
    fn recycled_heap_buffers_come_back_empty_with_default_headroom() {
        let mut pool = Pool::new(64, 4);
        let mut a = pool.get();
        a.extend_from_slice(b"data");
        a.prepend(20).fill(7);
        a.advance(3);
        a.set_csum(Csum::Verified);
        pool.put(a);
        let b = pool.get();
        assert!(b.is_empty() && !b.is_lent());
        assert_eq!(b.headroom(), DEFAULT_HEADROOM);
        assert_eq!(b.tailroom(), 64);
        assert_eq!(b.csum(), Csum::Unverified);
        // Too small for the pool (and full): dropped, counted.
        pool.put(PacketBuf::with_capacity(8));
        assert_eq!(pool.stats().dropped, 1);
        let mut c = pool.get();
        c.append(100).fill(1);
        assert_eq!(c.len(), 100);
        assert!(c.as_slice().iter().all(|&x| x == 1));
    }

    #[test]
    fn prepend_and_advance_round_trip() {
        let mut b = PacketBuf::from_slice(b"payload");
        b.prepend(4).copy_from_slice(b"hdr:");
        assert_eq!(b.as_slice(), b"hdr:payload");
        b.advance(4);
        assert_eq!(b.as_slice(), b"payload");
        // Prepending more than the headroom moves the data but keeps it intact.
        let big = DEFAULT_HEADROOM + 10;
        b.prepend(big).fill(1);
        assert_eq!(b.len(), big + 7);
        assert_eq!(&b.as_slice()[big..], b"payload");
        b.advance(usize::MAX);
        assert!(b.is_empty());
    }
}
