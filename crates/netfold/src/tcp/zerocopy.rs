//! Zero-copy send: the application hands the connection owned buffers
//! ([`ZcBuf`]) instead of bytes to copy; segments refer to them, retransmissions re-read them,
//! and the application learns when each one is released.
//!
//! **The send queue** ([`SendQueue`]) is what `Sender::ring` holds: the byte ring of the
//! copying path plus, once the application has used zero-copy, a list of chunks in stream
//! order, each either a run of ring bytes or an application buffer. While no application buffer
//! is queued the chunk list is empty and the queue is exactly the ring (the copying path is
//! unchanged, and pays nothing for this). A segment's payload is a [`Gather`]: two ring slices
//! on the copying path, or a window over the chunks, which `iface` copies into the frame with
//! the checksum folded in (one pass, as before, minus the application-to-ring copy) or, on a
//! scatter-gather device that completes checksums, references without touching a byte
//! (`iface/tcp.rs`, `emit_piece`).
//!
//! **Completions.** Every buffer accepted by `Conn::send_zc` ([`TcpLayer::send_zc`](super::TcpLayer::send_zc)) gets an id
//! (per connection, from 0, in order, as Linux `MSG_ZEROCOPY` numbers its sends) and is
//! wrapped in a ticket that is the region every reference to it goes through: the queue's
//! chunk and every frame fragment made from it. The completion is posted when the last of
//! those references is dropped: that is "released" in Linux's sense (the notification is
//! queued on the error queue when the last skb referring to the pages is freed,
//! `Documentation/networking/msg_zerocopy.rst`), and it happens exactly once because it is
//! the ticket's `Drop`, whatever path leads there: SND.UNA passing the end of the buffer (the
//! completion says `acked`), or the queue being released by a reset, an abort, a timeout, the
//! connection being freed or the whole stack dropped (`acked == false`: the data may or may
//! not have reached the peer, as Linux reports nothing better either). Completions go to a
//! per-connection queue behind a mutex ([`ZcCompletions`]), which the application may read from
//! any thread and keep after the connection is gone.
//!
//! **Bounds.** Zero-copy bytes count against the send buffer like copied ones (the queue's
//! `free()` is capacity minus every queued byte, so SO_SNDBUF and send-buffer auto-tuning
//! bound both, as Linux charges `MSG_ZEROCOPY` skbs to `sk_wmem_queued`); a buffer larger
//! than the room is accepted in part (the returned length says how much, as `write` does).
//! Buffers not yet released plus completions not yet read are bounded by
//! [`ZC_MAX_ENTRIES`] per connection (Linux bounds its notification skbs by `optmem_max`):
//! past it `send_zc` says `WouldBlock` until the application reads completions.

use super::buffer::{RingCache, SendRing};
use super::conn::Conn;
use super::Error;
pub use crate::buf::zc::ZcBuf;
use crate::buf::zc::{Gather, Owner, Region, Share, SpanSource};
use crate::mem::CopyMode;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// Most application buffers a connection holds unreleased plus completions waiting to be
/// read (see the module documentation).
pub const ZC_MAX_ENTRIES: usize = 8192;

/// A buffer the connection has released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZcCompletion {
    /// The id [`ZcSend::id`] returned when the buffer was accepted.
    pub id: u64,
    /// The value the application passed with it (the C API's cookie).
    pub user: u64,
    /// Bytes of the buffer that were accepted.
    pub len: usize,
    /// Every byte was acknowledged by the peer. `false`: the connection ended (reset, abort,
    /// timeout, the socket or the stack dropped) before that; the peer may have some of it.
    pub acked: bool,
}

/// What `send_zc` accepted: the buffer's id and how many of its bytes (from the start) are
/// queued. The rest, if any, is the application's to send again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZcSend {
    pub id: u64,
    pub len: usize,
}

/// Buffers and bytes the connection holds (accepted and not yet released).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZcOutstanding {
    pub buffers: usize,
    pub bytes: usize,
}

/// Bits of [`Shared::count`] that hold bytes; the entries count sits above them.
const BYTES_BITS: u32 = 44;
const ONE_ENTRY: u64 = 1 << BYTES_BITS;
const BYTES_MASK: u64 = ONE_ENTRY - 1;
/// Largest entry bound [`ZcCompletions::set_max_entries`] takes (what the packed count holds).
const MAX_ENTRIES_LIMIT: usize = (1 << (64 - BYTES_BITS)) - 1;

/// The shared part of a connection's completions: the queue behind a mutex, taken once per
/// batch of completions; the counts packed in one atomic, so that accepting a buffer costs one
/// atomic addition and no lock (this is per buffer: with 4 KiB buffers on the in-memory link,
/// a lock and a reference count more per buffer were 10-15% of the CPU time).
#[derive(Debug)]
struct Shared {
    done: Mutex<VecDeque<ZcCompletion>>,
    /// Entries (buffers accepted and not yet released, plus completions not yet taken) above
    /// `BYTES_BITS`, bytes accepted and not yet released below.
    count: AtomicU64,
    max_entries: AtomicUsize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, VecDeque<ZcCompletion>> {
        // A panic elsewhere while holding the lock leaves a consistent queue (each push or
        // drain is complete before anything can panic), so a poisoned lock is still usable.
        self.done.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn entries(&self) -> usize {
        (self.count.load(Ordering::Acquire) >> BYTES_BITS) as usize
    }

    /// Posts released buffers' completions (they stay entries until taken).
    fn post(&self, done: impl Iterator<Item = ZcCompletion>) {
        let mut q = self.lock();
        let mut bytes = 0u64;
        for c in done {
            bytes += c.len as u64;
            q.push_back(c);
        }
        self.count.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// `n` completions were taken.
    fn taken(&self, n: usize) {
        if n > 0 {
            self.count.fetch_sub(n as u64 * ONE_ENTRY, Ordering::AcqRel);
        }
    }
}

/// A connection's zero-copy completions: a shared handle, cheap to clone, usable from any
/// thread and after the connection is closed or freed.
#[derive(Debug, Clone)]
pub struct ZcCompletions {
    shared: Arc<Shared>,
}

impl Default for ZcCompletions {
    fn default() -> Self {
        ZcCompletions {
            shared: Arc::new(Shared {
                done: Mutex::new(VecDeque::new()),
                count: AtomicU64::new(0),
                max_entries: AtomicUsize::new(ZC_MAX_ENTRIES),
            }),
        }
    }
}

impl ZcCompletions {
    /// The oldest completion not yet taken.
    pub fn next(&self) -> Option<ZcCompletion> {
        let c = self.shared.lock().pop_front();
        self.shared.taken(usize::from(c.is_some()));
        c
    }

    /// Moves up to `max` completions, oldest first, to `out`; returns how many.
    pub fn take(&self, out: &mut Vec<ZcCompletion>, max: usize) -> usize {
        let n = {
            let mut q = self.shared.lock();
            let n = max.min(q.len());
            out.extend(q.drain(..n));
            n
        };
        self.shared.taken(n);
        n
    }

    /// Completions waiting to be taken.
    pub fn pending(&self) -> usize {
        self.shared.lock().len()
    }

    /// Buffers and bytes accepted and not yet released.
    pub fn outstanding(&self) -> ZcOutstanding {
        let q = self.shared.lock();
        let c = self.shared.count.load(Ordering::Acquire);
        ZcOutstanding {
            buffers: ((c >> BYTES_BITS) as usize).saturating_sub(q.len()),
            bytes: (c & BYTES_MASK) as usize,
        }
    }

    /// Nothing is outstanding and nothing waits to be taken.
    pub fn is_idle(&self) -> bool {
        self.shared.entries() == 0
    }

    /// The bound on unreleased buffers plus untaken completions is reached: `send_zc` says
    /// `WouldBlock` until completions are taken.
    pub fn at_limit(&self) -> bool {
        self.shared.entries() >= self.shared.max_entries.load(Ordering::Relaxed)
    }

    /// Sets the bound on unreleased buffers plus untaken completions (1 to about a million).
    pub fn set_max_entries(&self, n: usize) {
        self.shared
            .max_entries
            .store(n.clamp(1, MAX_ENTRIES_LIMIT), Ordering::Relaxed);
    }

    /// Counts a buffer of `len` bytes in, unless the entry bound is reached. Only the stack
    /// admits (under its own exclusive access), others only lower the count, so the check and
    /// the addition need no lock between them.
    fn admit(&self, len: usize) -> bool {
        if self.at_limit() || len as u64 > BYTES_MASK {
            return false;
        }
        self.shared
            .count
            .fetch_add(ONE_ENTRY + len as u64, Ordering::AcqRel);
        true
    }
}

/// A ticket's state: its completion is posted exactly once, by whoever moves it to `POSTED`.
const PENDING: u8 = 0;
const ACKED: u8 = 1;
const POSTED: u8 = 2;

/// One accepted application buffer, the region every reference to it goes through. When the
/// queue lets it go (acknowledged, or the connection ended) and holds the last reference, the
/// queue posts its completion (with the others of that acknowledgment, under one lock);
/// otherwise (a frame still refers to it, scatter-gather) the queue hands it the completion
/// queue and the last reference's drop posts it.
struct Ticket {
    buf: ZcBuf,
    id: u64,
    user: u64,
    state: AtomicU8,
    /// Set by the queue only when it lets go while frames still hold references.
    sink: OnceLock<ZcCompletions>,
}

impl Ticket {
    fn completion(&self, acked: bool) -> ZcCompletion {
        ZcCompletion {
            id: self.id,
            user: self.user,
            len: self.buf.len(),
            acked,
        }
    }
}

impl Region for Ticket {
    fn bytes(&self) -> &[u8] {
        self.buf.as_slice()
    }
}

/// A frame that takes the buffer by reference refers to it through the ticket, so that the
/// completion waits for the frame too.
impl Share for Arc<Ticket> {
    fn share(&self, off: usize, len: usize) -> ZcBuf {
        let region: Arc<dyn Region> = self.clone();
        ZcBuf::from_arc(region).slice(off..off + len)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let state = self.state.swap(POSTED, Ordering::AcqRel);
        if state != POSTED {
            // The queue set the sink before letting go (see `SendQueue::let_go`); a ticket the
            // queue never let go of is only dropped with the queue, which lets go first.
            if let Some(sink) = self.sink.get() {
                sink.shared
                    .post(std::iter::once(self.completion(state == ACKED)));
            }
        }
    }
}

#[derive(Clone)]
enum Piece {
    /// Ring bytes; `at` is the ring position (ring bytes pushed before) of the first.
    Ring { at: u64 },
    /// An application buffer, held through its ticket.
    App { ticket: Arc<Ticket> },
}

#[derive(Clone)]
struct Chunk {
    /// Stream position (bytes queued since the connection began) of the first byte.
    start: u64,
    len: usize,
    piece: Piece,
}

impl Chunk {
    fn end(&self) -> u64 {
        self.start + self.len as u64
    }
}

/// The send queue: bytes from SND.UNA on, copied into a ring or lent by the application.
/// See the module documentation.
#[derive(Clone)]
pub struct SendQueue {
    ring: SendRing,
    /// Empty while every queued byte is in the ring; else the whole queue, in order.
    chunks: VecDeque<Chunk>,
    /// Application buffers among `chunks`.
    apps: usize,
    /// Bytes queued (ring and application buffers).
    len: usize,
    /// Stream position of the first queued byte.
    head: u64,
    /// Ring position of the ring's first byte.
    ring_head: u64,
    /// Where completions go; made on first use.
    zc: Option<ZcCompletions>,
    /// The next buffer's id (per connection, from 0, as Linux numbers `MSG_ZEROCOPY` sends).
    next_id: u64,
    /// Scratch list of the buffers one acknowledgment releases (kept for its storage).
    released: Vec<Arc<Ticket>>,
    /// The chunk the last span walk started in: a super-segment is walked once per packet
    /// cut from it, each starting in the same chunk or the next (checked, so a stale hint only
    /// costs the binary search it saves).
    hint: std::cell::Cell<usize>,
    /// The send buffer's size while its ring is not allocated yet ([`SendQueue::reserve`]):
    /// the storage is taken at the first copying send ([`SendQueue::ensure_storage`]), so a
    /// connection that never sends holds none. 0 once allocated.
    reserved: usize,
}

impl std::fmt::Debug for SendQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendQueue")
            .field("ring", &self.ring)
            .field("chunks", &self.chunks.len())
            .field("apps", &self.apps)
            .field("len", &self.len)
            .finish()
    }
}

impl SendQueue {
    fn with_ring(ring: SendRing) -> Self {
        SendQueue {
            ring,
            chunks: VecDeque::new(),
            apps: 0,
            len: 0,
            head: 0,
            ring_head: 0,
            zc: None,
            next_id: 0,
            released: Vec::new(),
            hint: std::cell::Cell::new(0),
            reserved: 0,
        }
    }

    /// A queue with fresh (zeroed) ring storage of `cap` bytes.
    pub fn with_capacity(cap: usize) -> Self {
        SendQueue::with_ring(SendRing::with_capacity(cap))
    }

    /// A queue with ring storage of `cap` bytes from `cache`.
    pub fn from_cache(cap: usize, cache: &mut RingCache) -> Self {
        SendQueue::with_ring(SendRing::from_cache(cap, cache))
    }

    /// A queue of `cap` bytes whose ring storage is taken only when a copying send needs it
    /// ([`SendQueue::ensure_storage`]): until then it holds no memory, and counts none
    /// against the stack's buffer budget.
    pub fn reserve(cap: usize) -> Self {
        let mut q = SendQueue::with_capacity(0);
        q.reserved = cap;
        q
    }

    /// Takes the reserved ring storage from `cache`, if it was not taken yet (a compare on
    /// every send, the allocation out of line).
    #[inline(always)]
    pub fn ensure_storage(&mut self, cache: &mut RingCache) {
        if self.reserved != 0 {
            self.take_storage(cache);
        }
    }

    #[cold]
    #[inline(never)]
    fn take_storage(&mut self, cache: &mut RingCache) {
        if self.ring.capacity() == 0 {
            self.ring = SendRing::from_cache(self.reserved, cache);
        }
        self.reserved = 0;
    }

    /// Bytes of ring storage allocated (what the buffer budget is charged; 0 while reserved).
    pub fn allocated(&self) -> usize {
        self.ring.capacity()
    }

    /// Ring storage or lent application buffers are held: `release` has something to give
    /// back (without either, every queued byte would be in a ring of capacity 0: none is).
    #[inline]
    pub fn holds_storage(&self) -> bool {
        self.ring.capacity() != 0 || !self.chunks.is_empty()
    }

    /// The send buffer size: queued bytes of either kind are bounded by it (allocated or
    /// reserved).
    pub fn capacity(&self) -> usize {
        self.ring.capacity().max(self.reserved)
    }

    /// Bytes queued (unacknowledged and unsent), copied or lent.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room for more bytes of either kind.
    pub fn free(&self) -> usize {
        self.capacity().saturating_sub(self.len)
    }

    /// Bytes of application buffers queued.
    pub fn zc_bytes(&self) -> usize {
        if self.apps == 0 {
            return 0;
        }
        self.chunks
            .iter()
            .filter(|c| matches!(c.piece, Piece::App { .. }))
            .map(|c| c.len)
            .sum()
    }

    /// Ring position one past the last ring byte.
    fn ring_tail(&self) -> u64 {
        self.ring_head + self.ring.len() as u64
    }

    /// Starts tracking chunks: the ring's bytes become the first chunk.
    fn enter_chunks(&mut self) {
        if self.chunks.is_empty() && self.len > 0 {
            self.chunks.push_back(Chunk {
                start: self.head,
                len: self.len,
                piece: Piece::Ring { at: self.ring_head },
            });
        }
    }

    /// Appends as much of `data` as fits, copying with `mode`; returns the count.
    pub fn push(&mut self, data: &[u8], mode: CopyMode) -> usize {
        let data = &data[..data.len().min(self.free())];
        let at = self.ring_tail();
        let n = self.ring.push(data, mode);
        if n > 0 && !self.chunks.is_empty() {
            let start = self.head + self.len as u64;
            match self.chunks.back_mut() {
                Some(c) if matches!(c.piece, Piece::Ring { at: a } if a + c.len as u64 == at) => {
                    c.len += n;
                }
                _ => self.chunks.push_back(Chunk {
                    start,
                    len: n,
                    piece: Piece::Ring { at },
                }),
            }
        }
        self.len += n;
        n
    }

    /// The connection's completion queue (made on first use).
    pub fn completions(&mut self) -> ZcCompletions {
        self.zc.get_or_insert_with(ZcCompletions::default).clone()
    }

    /// Queues (a prefix of) `buf` by reference. `None` if there is no room or the entry bound
    /// is reached; an empty `buf` is not queued (`Some` with length 0 and no id used is not
    /// possible, so the caller refuses it first).
    pub fn push_zc(&mut self, buf: ZcBuf, user: u64) -> Option<ZcSend> {
        let take = buf.len().min(self.free());
        if take == 0 {
            return None;
        }
        if !self
            .zc
            .get_or_insert_with(ZcCompletions::default)
            .admit(take)
        {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut buf = buf;
        buf.truncate(take);
        let ticket = Arc::new(Ticket {
            buf,
            id,
            user,
            state: AtomicU8::new(PENDING),
            sink: OnceLock::new(),
        });
        self.enter_chunks();
        self.chunks.push_back(Chunk {
            start: self.head + self.len as u64,
            len: take,
            piece: Piece::App { ticket },
        });
        self.apps += 1;
        self.len += take;
        Some(ZcSend { id, len: take })
    }

    /// Drops `n` bytes from the head (they were acknowledged). Application buffers whose last
    /// byte is acknowledged are marked so and let go (their completion follows when no frame
    /// refers to them any more, at once on a device that copies).
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        self.len -= n;
        self.head += n as u64;
        if self.chunks.is_empty() {
            self.ring.consume(n);
            self.ring_head += n as u64;
            return;
        }
        // Buffers acknowledged here whose last reference is the queue's: their completions
        // are posted together, under one lock (the common case on a device that copies).
        let mut batch = std::mem::take(&mut self.released);
        while let Some(c) = self.chunks.front() {
            if c.end() > self.head {
                // Partly acknowledged: ring bytes are freed as far as the acknowledgment goes.
                if let Piece::Ring { at } = c.piece {
                    self.consume_ring_to(at + (self.head - c.start));
                }
                break;
            }
            let Some(c) = self.chunks.pop_front() else {
                break;
            };
            match c.piece {
                Piece::Ring { at } => self.consume_ring_to(at + c.len as u64),
                Piece::App { ticket } => {
                    self.apps -= 1;
                    self.let_go(ticket, true, &mut batch);
                }
            }
        }
        self.post(&mut batch);
        self.released = batch;
        if self.apps == 0 {
            // Only ring bytes left: back to the plain ring.
            self.chunks.clear();
        }
    }

    fn consume_ring_to(&mut self, pos: u64) {
        if pos > self.ring_head {
            let k = (pos - self.ring_head) as usize;
            self.ring.consume(k);
            self.ring_head += k as u64;
        }
    }

    /// Bytes `off..off + len` after the head, as a segment's payload.
    pub fn gather(&self, off: usize, len: usize) -> Gather<'_> {
        let len = len.min(self.len.saturating_sub(off));
        if self.chunks.is_empty() {
            let (a, b) = self.ring.slices(off, len);
            return Gather::slices(a, b);
        }
        Gather::source(self, off, len)
    }

    /// Up to `len` ring bytes starting `off` bytes after the head, as two slices: the copying
    /// path's view, valid only while no application buffer is queued (else empty).
    pub fn slices(&self, off: usize, len: usize) -> (&[u8], &[u8]) {
        if self.chunks.is_empty() {
            self.ring.slices(off, len)
        } else {
            (&[], &[])
        }
    }

    /// Releases the ring storage into `cache` and lets every queued application buffer go
    /// (not acknowledged: the connection ended). Nothing more will be sent.
    pub fn release(&mut self, cache: &mut RingCache) {
        self.ring.release(cache);
        self.reserved = 0;
        self.let_go_all();
        self.head += self.len as u64;
        self.len = 0;
        self.ring_head = 0;
    }

    /// Lets go of every queued buffer, not acknowledged (the connection ended, or the queue is
    /// dropped with the stack).
    fn let_go_all(&mut self) {
        // Empty whenever every queued byte is in the ring (copying sends): nothing is lent.
        // The layer releases a closed connection's queue after every event, so this is the
        // common case.
        if self.chunks.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.released);
        let chunks = std::mem::take(&mut self.chunks);
        for c in chunks {
            if let Piece::App { ticket } = c.piece {
                self.let_go(ticket, false, &mut batch);
            }
        }
        self.apps = 0;
        self.post(&mut batch);
        self.released = batch;
    }

    /// The queue lets go of a buffer: into `batch` (posted by [`SendQueue::post`]) if the
    /// queue holds its last reference; else it gets the completion queue, and whichever
    /// frame drops the last reference posts it (exactly once either way: see `Ticket`).
    fn let_go(&self, t: Arc<Ticket>, acked: bool, batch: &mut Vec<Arc<Ticket>>) {
        t.state
            .store(if acked { ACKED } else { PENDING }, Ordering::Release);
        if Arc::strong_count(&t) == 1 {
            // Only this queue could make another reference, and it will not.
            batch.push(t);
        } else if let Some(z) = &self.zc {
            let _ = t.sink.set(z.clone());
        }
    }

    /// Posts the completions of the buffers in `batch` under one lock and drops them.
    fn post(&self, batch: &mut Vec<Arc<Ticket>>) {
        if batch.is_empty() {
            return;
        }
        if let Some(z) = &self.zc {
            z.shared.post(batch.iter().map(|t| {
                let state = t.state.swap(POSTED, Ordering::AcqRel);
                t.completion(state == ACKED)
            }));
        }
        batch.clear();
    }

    /// Grows the send buffer to `cap` bytes (see [`SendRing::grow`]): ring positions are
    /// counts, not indices, so the chunks stay valid.
    pub fn grow(&mut self, cap: usize, cache: &mut RingCache) -> bool {
        if self.reserved != 0 {
            // Not allocated yet: the storage taken later is the bigger size.
            if cap <= self.reserved {
                return false;
            }
            self.reserved = cap;
            return true;
        }
        self.ring.grow(cap, cache)
    }
}

impl Drop for SendQueue {
    /// Dropped with its connection or its stack: every buffer still queued completes (not
    /// acknowledged).
    fn drop(&mut self) {
        self.let_go_all();
    }
}

impl Conn {
    /// Queues (a prefix of) `buf` by reference (see the module documentation). The same
    /// checks as `send` (errors reported once, EPIPE after shutdown, not before SYN-SENT);
    /// an empty buffer is `InvalidInput` (it would have nothing to complete).
    pub fn send_zc(&mut self, buf: ZcBuf, user: u64) -> Result<ZcSend, Error> {
        // `send` of nothing runs every check and queues nothing.
        self.send(&[], CopyMode::Kernels, super::SendFlags::default())?;
        if buf.is_empty() {
            return Err(Error::InvalidInput);
        }
        let want = buf.len();
        let r = self.snd.queue_zc(buf, user);
        // As `send`: a writer that wants more room than it got may make the buffer grow.
        self.snd
            .note_write(r.is_none_or(|s| s.len < want) || self.snd.ring().free() == 0);
        r.ok_or(Error::WouldBlock)
    }
}

impl SendQueue {
    /// Index of the chunk holding stream position `pos` (`chunks.len()` if none), starting
    /// from the hint.
    fn chunk_at(&self, pos: u64) -> usize {
        let holds = |i: usize| {
            self.chunks
                .get(i)
                .is_some_and(|c| c.start <= pos && pos < c.end())
        };
        let h = self.hint.get();
        let i = if holds(h) {
            h
        } else if holds(h + 1) {
            h + 1
        } else {
            self.chunks.partition_point(|c| c.end() <= pos)
        };
        self.hint.set(i);
        i
    }
}

impl SpanSource for SendQueue {
    fn contiguous(&self, off: usize, len: usize) -> Option<&[u8]> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        if self.chunks.is_empty() {
            let (a, b) = self.ring.slices(off, len);
            return b.is_empty().then_some(a);
        }
        let from = self.head + off as u64;
        let c = self.chunks.get(self.chunk_at(from))?;
        let rel = (from - c.start) as usize;
        if rel + len > c.len {
            return None;
        }
        match &c.piece {
            Piece::Ring { at } => {
                let ring_off = (at + rel as u64).checked_sub(self.ring_head)? as usize;
                let (a, b) = self.ring.slices(ring_off, len);
                (b.is_empty() && a.len() == len).then_some(a)
            }
            Piece::App { ticket, .. } => ticket.buf.as_slice().get(rel..rel + len),
        }
    }

    fn for_each_span(&self, off: usize, len: usize, f: &mut dyn FnMut(&[u8], Owner<'_>)) {
        if self.chunks.is_empty() {
            let (a, b) = self.ring.slices(off, len);
            for s in [a, b] {
                if !s.is_empty() {
                    f(s, None);
                }
            }
            return;
        }
        let from = self.head + off as u64;
        let to = from + len.min(self.len.saturating_sub(off)) as u64;
        let first = self.chunk_at(from);
        for c in self.chunks.range(first..) {
            if c.start >= to {
                break;
            }
            let s = from.max(c.start);
            let e = to.min(c.end());
            let (rel, n) = ((s - c.start) as usize, (e - s) as usize);
            match &c.piece {
                Piece::Ring { at } => {
                    let ring_off = (at + rel as u64).saturating_sub(self.ring_head) as usize;
                    let (a, b) = self.ring.slices(ring_off, n);
                    for s in [a, b] {
                        if !s.is_empty() {
                            f(s, None);
                        }
                    }
                }
                Piece::App { ticket } => {
                    if let Some(bytes) = ticket.buf.as_slice().get(rel..rel + n) {
                        f(bytes, Some((ticket, rel)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(g: Gather<'_>) -> Vec<u8> {
        g.to_vec()
    }

    #[test]
    fn ring_only_queue_is_the_ring() {
        let mut q = SendQueue::with_capacity(8);
        assert_eq!(q.push(b"abcdef", CopyMode::Kernels), 6);
        q.consume(4);
        assert_eq!(q.push(b"ghijklmn", CopyMode::Kernels), 6);
        assert!(q.gather(0, 8).as_slices().is_some());
        assert_eq!(bytes(q.gather(0, 8)), b"efghijkl");
        assert_eq!(bytes(q.gather(3, 2)), b"hi");
        assert!(q.gather(8, 1).is_empty());
    }

    #[test]
    fn mixed_queue_reads_consumes_and_completes() {
        let mut q = SendQueue::with_capacity(32);
        let done = q.completions();
        assert_eq!(q.push(b"ab", CopyMode::Kernels), 2);
        let s = q.push_zc(ZcBuf::from(b"CDEF".to_vec()), 7).unwrap();
        assert_eq!(s, ZcSend { id: 0, len: 4 });
        assert_eq!(q.push(b"gh", CopyMode::Kernels), 2);
        assert_eq!(q.push(b"ij", CopyMode::Kernels), 2);
        let s = q.push_zc(ZcBuf::from(b"KL".to_vec()), 8).unwrap();
        assert_eq!(s.id, 1);
        assert_eq!(q.len(), 12);
        assert_eq!(q.zc_bytes(), 6);
        assert_eq!(bytes(q.gather(0, 12)), b"abCDEFghijKL");
        for off in 0..12 {
            for len in 0..13 {
                let want = &b"abCDEFghijKL"[off..(off + len).min(12)];
                assert_eq!(bytes(q.gather(off, len)), want, "{off} {len}");
                // One piece when it lies in one chunk ("ab", "CDEF", "ghij", "KL").
                let one = [(0, 2), (2, 6), (6, 10), (10, 12)]
                    .iter()
                    .any(|&(s, e)| s <= off && off + len <= e);
                let c = q.gather(0, 12).contiguous(off, len);
                if off + len <= 12 {
                    assert_eq!(c.is_some(), one || len == 0, "{off} {len}");
                    if let Some(c) = c {
                        assert_eq!(c, want);
                    }
                }
            }
        }
        // Which pieces are shareable.
        let mut owned = Vec::new();
        q.gather(1, 10).for_each_span(0, 10, &mut |s, o| {
            owned.push((s.to_vec(), o.map(|(_, at)| at)))
        });
        assert_eq!(
            owned,
            vec![
                (b"b".to_vec(), None),
                (b"CDEF".to_vec(), Some(0)),
                (b"ghij".to_vec(), None),
                (b"K".to_vec(), Some(0)),
            ]
        );
        q.consume(3); // into the first buffer
        assert_eq!(done.pending(), 0);
        assert_eq!(bytes(q.gather(0, 3)), b"DEF");
        q.consume(3); // its end
        assert_eq!(
            done.next(),
            Some(ZcCompletion {
                id: 0,
                user: 7,
                len: 4,
                acked: true
            })
        );
        assert_eq!(bytes(q.gather(0, 6)), b"ghijKL");
        // The ring bytes before the second buffer free up as they are acknowledged.
        q.consume(1);
        assert_eq!(q.push(b"mnopqrstuvwxyz", CopyMode::Kernels), 14);
        assert_eq!(bytes(q.gather(0, 100)), b"hijKLmnopqrstuvwxyz");
        let mut cache = RingCache::new();
        q.release(&mut cache);
        assert_eq!(
            done.next(),
            Some(ZcCompletion {
                id: 1,
                user: 8,
                len: 2,
                acked: false
            })
        );
        assert!(done.is_idle());
    }

    #[test]
    fn bounded_by_the_send_buffer_and_the_entry_cap() {
        let mut q = SendQueue::with_capacity(10);
        let done = q.completions();
        done.set_max_entries(2);
        assert_eq!(q.push(b"abcd", CopyMode::Kernels), 4);
        let s = q.push_zc(ZcBuf::from(vec![1u8; 100]), 0).unwrap();
        assert_eq!(s.len, 6, "a prefix, as write takes what fits");
        assert!(q.push_zc(ZcBuf::from(vec![1u8; 1]), 0).is_none());
        assert_eq!(q.push(b"x", CopyMode::Kernels), 0);
        q.consume(10);
        assert_eq!(done.pending(), 1);
        assert!(q.push_zc(ZcBuf::from(vec![2u8; 3]), 0).is_some());
        assert!(
            q.push_zc(ZcBuf::from(vec![3u8; 3]), 0).is_none(),
            "one released but untaken + one outstanding = the cap"
        );
        assert_eq!(done.next().map(|c| c.id), Some(0));
        assert!(q.push_zc(ZcBuf::from(vec![3u8; 3]), 0).is_some());
        assert_eq!(
            done.outstanding(),
            ZcOutstanding {
                buffers: 2,
                bytes: 6
            }
        );
    }

    #[test]
    fn a_reference_held_elsewhere_delays_the_completion() {
        let mut q = SendQueue::with_capacity(16);
        let done = q.completions();
        q.push_zc(ZcBuf::from(b"abcdef".to_vec()), 1).unwrap();
        let mut frag = None;
        q.gather(0, 6).for_each_span(2, 3, &mut |s, o| {
            assert_eq!(s, b"cde");
            let (b, at) = o.unwrap();
            frag = Some(b.share(at, s.len()));
        });
        let frag = frag.unwrap();
        q.consume(6);
        assert_eq!(done.pending(), 0, "a frame still refers to it");
        assert_eq!(frag.as_slice(), b"cde");
        drop(frag);
        assert_eq!(done.next().map(|c| (c.id, c.acked)), Some((0, true)));
    }

    /// Random pushes (copied and lent), acknowledgments, growth and reads against a plain
    /// byte vector: the queue always holds exactly the model's bytes, and each lent buffer
    /// completes once, acknowledged, when the model says its last byte was consumed.
    #[test]
    fn matches_a_byte_vector_model() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        let mut cache = RingCache::new();
        let mut q = SendQueue::from_cache(64, &mut cache);
        let done = q.completions();
        let mut model: std::collections::VecDeque<u8> = Default::default();
        let mut ends: std::collections::VecDeque<(u64, u64)> = Default::default(); // (id, end)
        let (mut consumed, mut queued) = (0u64, 0u64);
        let mut next = 0u8;
        for step in 0..20_000 {
            match rnd(10) {
                0..=2 => {
                    let data: Vec<u8> = (0..rnd(40))
                        .map(|_| {
                            next = next.wrapping_add(1);
                            next
                        })
                        .collect();
                    let n = q.push(&data, CopyMode::Kernels);
                    model.extend(&data[..n]);
                    queued += n as u64;
                    next = next.wrapping_sub((data.len() - n) as u8);
                }
                3..=5 => {
                    let data: Vec<u8> = (0..1 + rnd(40))
                        .map(|_| {
                            next = next.wrapping_add(1);
                            next
                        })
                        .collect();
                    match q.push_zc(ZcBuf::from(data.clone()), step) {
                        Some(s) => {
                            model.extend(&data[..s.len]);
                            queued += s.len as u64;
                            ends.push_back((s.id, queued));
                            next = next.wrapping_sub((data.len() - s.len) as u8);
                        }
                        None => next = next.wrapping_sub(data.len() as u8),
                    }
                }
                6 | 7 => {
                    let n = rnd(model.len() as u64 + 1) as usize;
                    q.consume(n);
                    model.drain(..n);
                    consumed += n as u64;
                    while ends.front().is_some_and(|&(_, e)| e <= consumed) {
                        let (id, _) = ends.pop_front().unwrap();
                        let c = done.next().expect("completed");
                        assert_eq!((c.id, c.acked), (id, true));
                    }
                    assert_eq!(done.pending(), 0);
                }
                8 => {
                    let cap = q.capacity();
                    if cap < 4096 {
                        assert!(q.grow(cap * 2, &mut cache));
                    }
                }
                _ => {}
            }
            assert_eq!(q.len(), model.len());
            let off = rnd(model.len() as u64 + 1) as usize;
            let len = rnd(100) as usize;
            let want: Vec<u8> = model.iter().skip(off).take(len).copied().collect();
            assert_eq!(bytes(q.gather(off, len)), want, "step {step}");
            if let Some(c) = q.gather(0, model.len()).contiguous(off, want.len()) {
                assert_eq!(c, &want[..]);
            }
        }
        q.release(&mut cache);
        assert_eq!(done.outstanding(), ZcOutstanding::default());
        assert!(ends.iter().all(|_| done.next().is_some_and(|c| !c.acked)));
    }

    #[test]
    fn dropping_the_queue_completes_everything_once() {
        let mut q = SendQueue::with_capacity(64);
        let done = q.completions();
        q.push_zc(ZcBuf::from(b"abc".to_vec()), 1).unwrap();
        q.push_zc(ZcBuf::from(b"def".to_vec()), 2).unwrap();
        // One is still referred to by a frame when the queue goes.
        let mut frag = None;
        q.gather(0, 6).for_each_span(4, 1, &mut |_, o| {
            let (b, at) = o.unwrap();
            frag = Some(b.share(at, 1));
        });
        q.consume(3);
        assert_eq!(done.take(&mut Vec::new(), 10), 1);
        drop(q);
        assert_eq!(done.pending(), 0, "the frame holds the second");
        drop(frag);
        let c = done.next().unwrap();
        assert_eq!((c.id, c.user, c.acked), (1, 2, false));
        assert!(done.next().is_none() && done.is_idle());
    }

    #[test]
    fn growth_keeps_chunks_valid() {
        let mut cache = RingCache::new();
        let mut q = SendQueue::from_cache(8, &mut cache);
        q.push(b"abcdef", CopyMode::Kernels);
        q.consume(5);
        q.push_zc(ZcBuf::from(b"XY".to_vec()), 0).unwrap();
        q.push(b"ghi", CopyMode::Kernels); // wraps in the ring
        assert!(q.grow(32, &mut cache));
        q.push(b"jk", CopyMode::Kernels);
        assert_eq!(bytes(q.gather(0, 100)), b"fXYghijk");
        q.consume(4);
        assert_eq!(bytes(q.gather(0, 100)), b"hijk");
        assert!(q.chunks.is_empty(), "back to the plain ring");
        assert_eq!(q.free(), 28);
    }
}
