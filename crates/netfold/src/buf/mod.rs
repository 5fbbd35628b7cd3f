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

/// One packet: `data[start..end]` is the frame; `data[..start]` is headroom.
#[derive(Debug, Clone, Default)]
pub struct PacketBuf {
    data: Vec<u8>,
    start: usize,
    end: usize,
    csum: Csum,
}

impl PacketBuf {
    /// A buffer able to hold `capacity` bytes after `DEFAULT_HEADROOM` bytes of headroom.
    pub fn with_capacity(capacity: usize) -> Self {
        PacketBuf {
            data: vec![0; DEFAULT_HEADROOM + capacity],
            start: DEFAULT_HEADROOM,
            end: DEFAULT_HEADROOM,
            csum: Csum::Unverified,
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
        self.data.len() - self.end
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
        &self.data[self.start..self.end]
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data[self.start..self.end]
    }

    /// Whether this is an empty stand-in left where a buffer was moved out (`mem::take`):
    /// no storage, nothing to recycle.
    pub fn is_placeholder(&self) -> bool {
        self.data.is_empty()
    }

    /// Empties the buffer, restores the default headroom (if the storage allows it) and forgets
    /// the checksum state.
    pub fn clear(&mut self) {
        self.start = DEFAULT_HEADROOM.min(self.data.len());
        self.end = self.start;
        self.csum = Csum::Unverified;
    }

    /// Grows the frame by `n` bytes at the end (growing the storage if needed) and returns them.
    pub fn append(&mut self, n: usize) -> &mut [u8] {
        if self.tailroom() < n {
            self.data.resize(self.end + n, 0);
        }
        let at = self.end;
        self.end += n;
        &mut self.data[at..self.end]
    }

    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        crate::mem::copy(self.append(bytes.len()), bytes);
    }

    /// Sets the frame length to `len` bytes from the current start, growing storage if needed.
    pub fn set_len(&mut self, len: usize) {
        if self.data.len() < self.start + len {
            self.data.resize(self.start + len, 0);
        }
        self.end = self.start + len;
    }

    /// Prepends `n` bytes of header space and returns it. Moves the data only when headroom is
    /// short (counted as a slow path by callers that care).
    pub fn prepend(&mut self, n: usize) -> &mut [u8] {
        if self.start < n {
            let len = self.len();
            let shift = n - self.start + DEFAULT_HEADROOM;
            self.data.resize(self.data.len() + shift, 0);
            self.data
                .copy_within(self.start..self.end, self.start + shift);
            self.start += shift;
            self.end = self.start + len;
        }
        self.start -= n;
        &mut self.data[self.start..self.start + n]
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
        match self.free.pop() {
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
    pub fn put(&mut self, buf: PacketBuf) {
        self.stats.puts += 1;
        if self.free.len() < self.max_free && buf.data.len() >= DEFAULT_HEADROOM + self.buf_capacity
        {
            self.free.push(buf);
        } else {
            self.stats.dropped += 1;
        }
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
