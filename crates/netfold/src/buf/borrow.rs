//! Frame-level borrowing reads: received payload that stays in the packet
//! buffer it arrived in, handed to the application as an owned [`BorrowedPayload`] instead of
//! being copied into the receive ring. Dropping the handle gives the buffer back.
//!
//! How a dropped handle reaches the pool: the stack's [`Recycler`] is shared (an `Arc` kept
//! by the TCP layer); every handle holds a `Weak` to it. `Drop` puts the buffer on the
//! recycler's return list, and the stack moves that list into its [`Pool`](super::Pool) at
//! the start of its next poll (with the connection it belonged to, whose window may open).
//! When the stack is gone the `Weak` no longer upgrades and the buffer is simply freed, so a
//! handle never keeps memory alive past its own drop and never needs the stack to be there.
//!
//! Bounds: the recycler counts every frame held out of the pool (by a connection or by the
//! application) and the receive path borrows only while that count is below its limit (a
//! share of the pool's size); past it, payload is copied into the ring as before, so the
//! receive path never runs out of buffers because the application sits on them.

use super::PacketBuf;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// What one connection shares with the handles it gave out: the payload bytes the
/// application still holds (they count against the connection's receive window, as ring
/// bytes do) and which connection that is, for the release notice.
#[derive(Debug)]
pub struct ConnShare {
    held: AtomicUsize,
    slot: u32,
    generation: u32,
}

impl ConnShare {
    /// A share for the connection in `slot` of `generation`.
    pub fn new(slot: u32, generation: u32) -> Arc<ConnShare> {
        Arc::new(ConnShare {
            held: AtomicUsize::new(0),
            slot,
            generation,
        })
    }
    /// Payload bytes the application holds now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }
}

/// The stack's return path for borrowed frames (see the module doc).
#[derive(Debug)]
pub struct Recycler {
    /// Frames out of the pool: held by connections (committed data) or by the application.
    outstanding: AtomicUsize,
    limit: AtomicUsize,
    /// Something was released since the stack last looked (cheap check before locking).
    dirty: AtomicBool,
    returned: Mutex<Returned>,
    /// Woken when the first buffer comes back after a drain: a driver asleep on the stack's
    /// deadlines must poll to take it in and reopen the window (the release happens on the
    /// application's thread, where nothing else tells the driver).
    waker: Mutex<Option<std::task::Waker>>,
}

#[derive(Debug, Default)]
struct Returned {
    bufs: Vec<PacketBuf>,
    /// `(slot, generation)` of connections whose application released bytes.
    conns: Vec<(u32, u32)>,
}

impl Recycler {
    /// A recycler that lets at most `limit` frames out of the pool at once.
    pub fn new(limit: usize) -> Arc<Recycler> {
        Arc::new(Recycler {
            outstanding: AtomicUsize::new(0),
            limit: AtomicUsize::new(limit),
            dirty: AtomicBool::new(false),
            returned: Mutex::new(Returned::default()),
            waker: Mutex::new(None),
        })
    }

    /// Sets (or clears) what is woken when a released buffer is waiting to be taken in.
    pub fn set_waker(&self, w: Option<std::task::Waker>) {
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = w;
    }

    /// Changes the bound on frames out of the pool.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// The bound on frames out of the pool.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Frames out of the pool now.
    pub fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Acquire)
    }

    /// Reserves `n` frames if that stays within the limit (the receive path asks before it
    /// borrows; `false`: copy instead).
    pub fn try_reserve(&self, n: usize) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        self.outstanding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                (o + n <= limit).then_some(o + n)
            })
            .is_ok()
    }

    /// Counts one more frame out of the pool whatever the limit (a buffer the ring's bytes
    /// are copied into for a frame read: it comes back through [`Recycler::give_back`]).
    pub fn reserve_forced(&self) {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
    }

    /// Gives back a reservation whose frame never left the batch (a connection freed before
    /// the frame was adopted).
    pub fn unreserve(&self, n: usize) {
        let _ = self
            .outstanding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                Some(o.saturating_sub(n))
            });
    }

    /// A frame comes back (from a connection, or from a dropped handle with its connection).
    pub fn give_back(&self, buf: PacketBuf, conn: Option<(u32, u32)>) {
        self.unreserve(1);
        let mut r = self.returned.lock().unwrap_or_else(|e| e.into_inner());
        r.bufs.push(buf);
        if let Some(c) = conn {
            if r.conns.last() != Some(&c) {
                r.conns.push(c);
            }
        }
        drop(r);
        if !self.dirty.swap(true, Ordering::AcqRel) {
            // Cloned out of the lock: waking may take other locks (a driver's).
            let w = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(w) = w {
                w.wake();
            }
        }
    }

    /// Whether anything came back since the last [`Recycler::drain`].
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Takes what came back: buffers to `bufs`, connections to notify to `conns`.
    pub fn drain(&self, bufs: &mut Vec<PacketBuf>, conns: &mut Vec<(u32, u32)>) {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut r = self.returned.lock().unwrap_or_else(|e| e.into_inner());
        bufs.append(&mut r.bufs);
        conns.append(&mut r.conns);
    }
}

/// Received payload lent to the application: `buf.as_slice()[start..end]`, in the packet
/// buffer it arrived in (or, for bytes that had been queued in the receive ring, a buffer
/// they were copied into). Derefs to `&[u8]`; dropping it returns the buffer to the stack's
/// pool and reopens the connection's window by its length.
pub struct BorrowedPayload {
    buf: PacketBuf,
    start: usize,
    end: usize,
    home: Weak<Recycler>,
    share: Arc<ConnShare>,
}

impl BorrowedPayload {
    /// Hands `buf.as_slice()[start..end]` to the application, charging its length to
    /// `share` (the caller moved the frame's reservation in `home` along with it).
    pub(crate) fn new(
        buf: PacketBuf,
        start: usize,
        end: usize,
        home: Weak<Recycler>,
        share: Arc<ConnShare>,
    ) -> BorrowedPayload {
        let end = end.min(buf.len());
        let start = start.min(end);
        share.held.fetch_add(end - start, Ordering::AcqRel);
        BorrowedPayload {
            buf,
            start,
            end,
            home,
            share,
        }
    }

    /// The payload bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf.as_slice()[self.start..self.end]
    }
}

impl Deref for BorrowedPayload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for BorrowedPayload {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for BorrowedPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BorrowedPayload")
            .field("len", &(self.end - self.start))
            .finish()
    }
}

impl Drop for BorrowedPayload {
    fn drop(&mut self) {
        let n = self.end - self.start;
        let _ = self
            .share
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                Some(h.saturating_sub(n))
            });
        if let Some(home) = self.home.upgrade() {
            let buf = std::mem::take(&mut self.buf);
            home.give_back(buf, Some((self.share.slot, self.share.generation)));
        }
        // Else the stack is gone: the buffer is freed with the handle.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_a_handle_returns_its_buffer_and_its_charge() {
        let r = Recycler::new(2);
        assert!(r.try_reserve(2));
        assert!(!r.try_reserve(1), "the limit holds");
        let share = ConnShare::new(3, 7);
        let h = BorrowedPayload::new(
            PacketBuf::from_slice(b"hdrpayload"),
            3,
            10,
            Arc::downgrade(&r),
            share.clone(),
        );
        assert_eq!((&*h, share.held()), (&b"payload"[..], 7));
        drop(h);
        assert_eq!((share.held(), r.outstanding()), (0, 1));
        let (mut bufs, mut conns) = (Vec::new(), Vec::new());
        r.drain(&mut bufs, &mut conns);
        assert_eq!((bufs.len(), &conns[..]), (1, &[(3, 7)][..]));
    }

    #[test]
    fn the_first_release_after_a_drain_wakes_the_driver_once() {
        struct Count(std::sync::atomic::AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let woken = Arc::new(Count(AtomicUsize::new(0)));
        let r = Recycler::new(8);
        r.set_waker(Some(std::task::Waker::from(woken.clone())));
        let share = ConnShare::new(1, 1);
        let handle = |r: &Arc<Recycler>| {
            assert!(r.try_reserve(1));
            BorrowedPayload::new(
                PacketBuf::from_slice(b"abc"),
                0,
                3,
                Arc::downgrade(r),
                share.clone(),
            )
        };
        let (a, b) = (handle(&r), handle(&r));
        drop(a);
        drop(b);
        // Two releases before the stack looked: one wake-up is enough.
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        let (mut bufs, mut conns) = (Vec::new(), Vec::new());
        r.drain(&mut bufs, &mut conns);
        drop(handle(&r));
        assert_eq!(
            woken.0.load(Ordering::SeqCst),
            2,
            "a release after the drain wakes again"
        );
        r.set_waker(None);
        r.drain(&mut bufs, &mut conns);
        drop(handle(&r));
        assert_eq!(woken.0.load(Ordering::SeqCst), 2, "no waker, no wake-up");
    }

    #[test]
    fn a_handle_outliving_its_stack_frees_its_buffer() {
        let r = Recycler::new(1);
        assert!(r.try_reserve(1));
        let share = ConnShare::new(0, 0);
        let h = BorrowedPayload::new(
            PacketBuf::from_slice(b"x"),
            0,
            1,
            Arc::downgrade(&r),
            share.clone(),
        );
        drop(r);
        drop(h);
        assert_eq!(share.held(), 0);
    }
}
