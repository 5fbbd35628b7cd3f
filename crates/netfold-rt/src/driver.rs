//! The driver: one thread that runs a stack on real time, shared by the blocking API
//! ([`crate::blocking`]) and the C API's REAL clock.
//!
//! The driven state (a stack, its device, and whatever else its users keep beside them) lives
//! behind one mutex. The driver thread polls it, then sleeps until its next deadline
//! ([`Driven::poll_at`]) or an application call that changed something ("kick"):
//! - a device with a file descriptor (TAP, packet socket) is waited on with poll(2), together
//!   with a socket pair that application calls write to as their kick, with the mutex released;
//! - a device without one (the in-memory pipe) cannot announce frames, so the driver waits on
//!   the condition variable for at most [`Driven::idle_wait`].
//!
//! Application calls that cannot complete wait on the same condition variable
//! ([`Driver::wait`], [`Driver::wait_timeout`]), which the driver signals after every poll that
//! did work; they never spin.

use netfold::phy::RawFd;
use netfold::time::Instant;
use netfold_os::wait::wait_readable_any;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

/// What a driver thread runs: a stack with its device, plus whatever its users keep beside
/// them under the same lock.
pub trait Driven {
    /// Polls the stack over its device once at `now`; `true` when it did any work.
    fn poll(&mut self, now: Instant) -> bool;

    /// When the driver must poll again even if nothing wakes it (the stack's timers, a device's
    /// delayed frames; `now` or earlier for work that is already waiting), if ever.
    fn poll_at(&self, now: Instant) -> Option<Instant>;

    /// A descriptor that becomes readable when the device has frames (see
    /// [`netfold::phy::Device::readable_fd`]); the driver then sleeps in poll(2) on it.
    fn readable_fd(&self) -> Option<RawFd>;

    /// Longest sleep when the device cannot wake the driver (no descriptor).
    fn idle_wait(&self) -> StdDuration;

    /// Longest single sleep in poll(2) on the device's descriptor, as a safety net against a
    /// state change nobody announced; `None` sleeps until the next deadline or a kick.
    fn max_sleep(&self) -> Option<StdDuration> {
        None
    }
}

/// Wakes a driver sleeping in poll(2): one byte per kick on a non-blocking socket pair.
struct Waker {
    tx: UnixStream,
    rx: UnixStream,
}

impl Waker {
    fn new() -> io::Result<Waker> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Waker { tx, rx })
    }

    /// A full socket already holds a pending wake-up, so WouldBlock is fine.
    fn wake(&self) {
        use std::io::Write as _;
        let _ = (&self.tx).write(&[1]);
    }

    /// Empties the socket (each kick wrote one byte).
    fn drain(&self) {
        use std::io::Read as _;
        let mut buf = [0u8; 64];
        while let Ok(n) = (&self.rx).read(&mut buf) {
            if n < buf.len() {
                break;
            }
        }
    }
}

/// The lock around a driven state, the condition variable every change is announced on, the
/// real-time clock, and the driver thread's stop and kick flags.
pub struct Driver<S> {
    state: Mutex<S>,
    cond: Condvar,
    /// `None` when the socket pair could not be made: the driver then waits on the condition
    /// variable even for a device with a descriptor (bounded by its idle wait).
    waker: Option<Waker>,
    epoch: std::time::Instant,
    stop: AtomicBool,
    kick: AtomicBool,
}

impl<S: Driven> Driver<S> {
    /// A driver for `state` whose clock reads the time elapsed since `epoch`.
    pub fn new(state: S, epoch: std::time::Instant) -> Driver<S> {
        Driver {
            state: Mutex::new(state),
            cond: Condvar::new(),
            waker: Waker::new().ok(),
            epoch,
            stop: AtomicBool::new(false),
            kick: AtomicBool::new(false),
        }
    }

    /// Starts the driver thread; it runs until [`Driver::stop`].
    pub fn spawn(self: &Arc<Self>, name: &str) -> io::Result<JoinHandle<()>>
    where
        S: Send + 'static,
    {
        let d = Arc::clone(self);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || d.run())
    }

    /// Real time since the epoch, as the stack's clock.
    pub fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    pub fn lock(&self) -> MutexGuard<'_, S> {
        // A panic while holding the lock leaves the state as it was; the other users keep
        // working on it rather than failing with a second panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Announces a change made by an application call: wakes the driver (the condition
    /// variable for one waiting on it, a byte on the waker for one sleeping in poll(2)) and
    /// every waiter. `_held` is the locked state: kicking under the lock means a driver about
    /// to wait cannot miss it.
    pub fn kick(&self, _held: &S) {
        self.kick.store(true, Ordering::Release);
        self.cond.notify_all();
        if let Some(w) = &self.waker {
            w.wake();
        }
    }

    /// Wakes every waiter without waking the driver (the state changed without the driver's
    /// help, e.g. a MANUAL-clock caller polled the stack itself).
    pub fn notify(&self) {
        self.cond.notify_all();
    }

    /// Sleeps until a change is announced (or a spurious wake-up).
    pub fn wait<'a>(&self, g: MutexGuard<'a, S>) -> MutexGuard<'a, S> {
        self.cond.wait(g).unwrap_or_else(|p| p.into_inner())
    }

    /// Sleeps until a change is announced or `timeout` passes.
    pub fn wait_timeout<'a>(
        &self,
        g: MutexGuard<'a, S>,
        timeout: StdDuration,
    ) -> MutexGuard<'a, S> {
        self.cond
            .wait_timeout(g, timeout)
            .unwrap_or_else(|p| p.into_inner())
            .0
    }

    /// Tells the driver thread to stop and wakes everyone (waiters see [`Driver::stopped`]).
    pub fn stop(&self) {
        let g = self.lock();
        self.stop.store(true, Ordering::Release);
        self.kick(&g);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn kicked(&self) -> bool {
        self.kick.load(Ordering::Acquire)
    }

    /// The driver thread's loop.
    fn run(&self) {
        let mut g = self.lock();
        while !self.stopped() {
            let now = self.now();
            let worked = g.poll(now);
            self.kick.store(false, Ordering::Release);
            if worked {
                self.cond.notify_all();
                // Let application threads in before polling again.
                drop(g);
                std::thread::yield_now();
                g = self.lock();
                continue;
            }
            let until_next: Option<StdDuration> = g.poll_at(now).map(|at| (at - now).into());
            if until_next.is_some_and(|d| d.is_zero()) {
                continue;
            }
            match (g.readable_fd(), &self.waker) {
                (Some(fd), Some(w)) => {
                    // Sleep in poll(2) on the device and the waker, with the lock released so
                    // application calls can run (and kick us).
                    let bound = match (until_next, g.max_sleep()) {
                        (Some(d), Some(m)) => Some(d.min(m)),
                        (d, m) => d.or(m),
                    };
                    drop(g);
                    let _ = wait_readable_any(&[fd, w.rx.as_raw_fd()], bound);
                    w.drain();
                    g = self.lock();
                }
                _ => {
                    let idle = g.idle_wait();
                    let wait = until_next.map_or(idle, |d| d.min(idle));
                    g = self
                        .cond
                        .wait_timeout_while(g, wait, |_| !self.kicked() && !self.stopped())
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }
}
