//! The driver: one thread that runs a stack on real time, shared by the blocking API
//! ([`crate::blocking`]) and the C API's REAL clock.
//!
//! The driven state (a stack, its device, and whatever else its users keep beside them) lives
//! behind one mutex. The driver thread polls it while polls find work, keeping the mutex while
//! no application thread waits for it (batching) and handing it over when one does (see
//! [`Driver::lock`]); after an empty poll it
//! backs off as [`crate::backoff`] describes (spin, then yield the CPU between polls for a
//! busy-poll budget, both with the mutex released), then sleeps until its next deadline
//! ([`Driven::poll_at`]), frames, or an application call that changed something ("kick"):
//! - a device with a file descriptor (TAP, packet socket) is waited on with poll(2), together
//!   with a socket pair that kicks write to, with the mutex released;
//! - a device that can arm a wake-up ([`Driven::wake_on_rx`]: the in-memory pipe) is armed
//!   with a waker that writes to that same socket pair, polled once more (frames sent before
//!   the arm are not announced), and the driver sleeps in poll(2) on the socket pair alone;
//! - any other device cannot announce frames, so the driver waits on the condition variable
//!   for at most [`Driven::idle_wait`].
//!
//! A kick writes to the socket pair only while the driver is (about to be) asleep in poll(2),
//! so application calls do not pay a system call per call while the driver is busy.
//!
//! After every poll the driver calls [`Driven::wake_ready`], where the blocking API wakes only
//! the application threads whose socket became ready (per-socket waiters, see
//! [`crate::blocking`]). Callers that prefer one condition variable (the C API) wait on it
//! ([`Driver::wait`], [`Driver::wait_timeout`]); the driver signals it after every poll that
//! did work, and [`Driver::kick`] and [`Driver::notify`] do too, each only while someone
//! waits on it (std's condition variable makes a system call per notify otherwise).

use crate::backoff::{Backoff, BackoffConfig, Step};
use netfold::iface::Stack;
use netfold::phy::RawFd;
use netfold::time::Instant;
use netfold_os::clock::Epoch;
use netfold_os::wait::wait_readable_any;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker as TaskWaker;
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

    /// Arms (`Some`) or disarms (`None`) the device's wake-up on received frames (see
    /// [`netfold::phy::Device::wake_on_rx`]); `false` when the device cannot.
    fn wake_on_rx(&mut self, _waker: Option<&TaskWaker>) -> bool {
        false
    }

    /// After every poll (and after an application call that may have changed readiness): wake
    /// the application threads whose socket became ready. Runs under the lock, so a thread that
    /// found its socket not ready and registered under the same lock is never missed.
    fn wake_ready(&mut self) {}

    /// The driver is stopping: wake every registered application thread (they see the stop).
    fn wake_all(&mut self) {}
}

/// Worked polls the driver makes in a row, holding the lock, while no application thread
/// waits for it, before it yields the CPU once.
const MAX_BATCH: u32 = 16;
/// How long [`Driver::hand_over`] waits for the lock's contenders to take it: spins, then
/// yields, in rounds.
const HAND_OVER_SPINS: u32 = 64;
const HAND_OVER_ROUNDS: u32 = HAND_OVER_SPINS + 4;

/// Wakes a driver sleeping in poll(2): a byte on a non-blocking socket pair.
struct Waker {
    tx: UnixStream,
    rx: UnixStream,
    /// The driver is in, or about to enter, poll(2): kicks must write (see [`Waker::kick`]).
    asleep: AtomicBool,
}

impl Waker {
    fn new() -> io::Result<Waker> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Waker {
            tx,
            rx,
            asleep: AtomicBool::new(false),
        })
    }

    /// A full socket already holds a pending wake-up, so WouldBlock is fine.
    fn ring(&self) {
        use std::io::Write as _;
        let _ = (&self.tx).write(&[1]);
    }

    /// A kick: rings only if the driver is asleep. The kick flag was stored before this
    /// fence and the driver stores `asleep` before its fence and then reads the kick flag,
    /// so either it sees the kick or this sees it asleep (a Dekker pair).
    fn kick(&self) {
        fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::Relaxed) {
            self.ring();
        }
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

/// A device's wake-up (the pipe's sender calls it): always rings, because the device's own
/// arm flag already limits it to a sleeping driver, and the arm comes before `asleep` is set.
impl std::task::Wake for Waker {
    fn wake(self: Arc<Self>) {
        self.ring();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.ring();
    }
}

/// The lock around a driven state, the condition variable every change is announced on, the
/// real-time clock, and the driver thread's stop and kick flags.
pub struct Driver<S> {
    state: Mutex<S>,
    cond: Condvar,
    /// `None` when the socket pair could not be made: the driver then waits on the condition
    /// variable even for a device with a descriptor (bounded by its idle wait).
    waker: Option<Arc<Waker>>,
    /// `waker` as a [`TaskWaker`], for devices that arm one.
    device_waker: Option<TaskWaker>,
    epoch: Epoch,
    stop: AtomicBool,
    kick: AtomicBool,
    backoff: BackoffConfig,
    /// Polls the driver thread made, and times it went to sleep: what tests and diagnostics
    /// read to tell a sleeping driver from a spinning one.
    polls: AtomicU64,
    sleeps: AtomicU64,
    /// Threads waiting on the condition variable (the driver itself when its device cannot
    /// wake it, the C API's blocking calls). Changed and read under the lock, so a notifier
    /// holding the lock (or one that changed the state under it) never misses a waiter; with
    /// none, notifying costs no system call (std's condition variable always makes one).
    cond_waiters: AtomicUsize,
    /// Application threads waiting for the lock ([`Driver::lock`]): the driver hands the lock
    /// over between polls while there are any, and keeps polling (batching) while there are
    /// none.
    contenders: AtomicUsize,
}

impl<S: Driven> Driver<S> {
    /// A driver for `state` whose clock reads the time elapsed since `epoch` (on
    /// `netfold_os::clock`, the TSC where the kernel trusts it).
    pub fn new(state: S, epoch: Epoch) -> Driver<S> {
        let waker = Waker::new().ok().map(Arc::new);
        Driver {
            state: Mutex::new(state),
            cond: Condvar::new(),
            device_waker: waker.clone().map(TaskWaker::from),
            waker,
            epoch,
            stop: AtomicBool::new(false),
            kick: AtomicBool::new(false),
            backoff: BackoffConfig::default(),
            polls: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            cond_waiters: AtomicUsize::new(0),
            contenders: AtomicUsize::new(0),
        }
    }

    /// The same driver with another back-off policy (before [`Driver::spawn`]).
    pub fn with_backoff(mut self, backoff: BackoffConfig) -> Driver<S> {
        self.backoff = backoff;
        self
    }

    /// The back-off policy of the driver thread (application threads waiting for a socket
    /// busy-poll by the same policy before they park).
    pub fn backoff(&self) -> BackoffConfig {
        self.backoff
    }

    /// Polls the driver thread has made so far.
    pub fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    /// Times the driver thread has gone to sleep so far.
    pub fn sleeps(&self) -> u64 {
        self.sleeps.load(Ordering::Relaxed)
    }

    /// Starts the driver thread; it runs until [`Driver::stop`].
    pub fn spawn(self: &Arc<Self>, name: &str) -> io::Result<JoinHandle<()>>
    where
        S: Send + 'static,
    {
        self.spawn_with(name, || {})
    }

    /// [`Driver::spawn`], running `init` on the new thread before its first poll (e.g. pinning
    /// it to a CPU: a shard's driver, see [`crate::shards`]).
    pub fn spawn_with(
        self: &Arc<Self>,
        name: &str,
        init: impl FnOnce() + Send + 'static,
    ) -> io::Result<JoinHandle<()>>
    where
        S: Send + 'static,
    {
        let d = Arc::clone(self);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                init();
                d.run()
            })
    }

    /// Real time since the epoch, as the stack's clock.
    #[inline]
    pub fn now(&self) -> Instant {
        self.epoch.instant()
    }

    /// Takes the lock as an application thread: counted, so the driver hands the lock over
    /// between polls instead of batching on.
    pub fn lock(&self) -> MutexGuard<'_, S> {
        if let Ok(g) = self.state.try_lock() {
            return g;
        }
        self.contenders.fetch_add(1, Ordering::Relaxed);
        let g = self.lock_uncounted();
        self.contenders.fetch_sub(1, Ordering::Relaxed);
        g
    }

    fn lock_uncounted(&self) -> MutexGuard<'_, S> {
        // A panic while holding the lock leaves the state as it was; the other users keep
        // working on it rather than failing with a second panic.
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Announces a change made by an application call: the driver polls again before it
    /// sleeps (a byte on the waker only if it is asleep in poll(2); nothing but a flag while
    /// it is awake, so a busy driver costs callers no system call), and threads on the
    /// condition variable are notified (only if there are any). The poll that follows wakes
    /// the application threads whose sockets became ready ([`Driven::wake_ready`]). `_held` is
    /// the locked state: kicking under the lock means a driver about to sleep cannot miss it.
    /// A waker that wakes this driver from its sleep (from any thread, without the lock):
    /// for events the device does not announce, such as a borrowed frame released by the
    /// application. `None` when the driver has no wake-up socket.
    pub fn task_waker(&self) -> Option<TaskWaker> {
        self.device_waker.clone()
    }

    pub fn kick(&self, _held: &S) {
        self.kick.store(true, Ordering::Release);
        self.notify();
        if let Some(w) = &self.waker {
            w.kick();
        }
    }

    /// Wakes every condition-variable waiter without waking the driver (the state changed
    /// without the driver's help, e.g. a MANUAL-clock caller polled the stack itself). The
    /// change must have been made under the lock (see `cond_waiters`).
    pub fn notify(&self) {
        if self.cond_waiters.load(Ordering::Acquire) > 0 {
            self.cond.notify_all();
        }
    }

    /// Sleeps until a change is announced (or a spurious wake-up).
    pub fn wait<'a>(&self, g: MutexGuard<'a, S>) -> MutexGuard<'a, S> {
        self.cond_waiters.fetch_add(1, Ordering::AcqRel);
        let g = self.cond.wait(g).unwrap_or_else(|p| p.into_inner());
        self.cond_waiters.fetch_sub(1, Ordering::AcqRel);
        g
    }

    /// Sleeps until a change is announced or `timeout` passes.
    pub fn wait_timeout<'a>(
        &self,
        g: MutexGuard<'a, S>,
        timeout: StdDuration,
    ) -> MutexGuard<'a, S> {
        self.cond_waiters.fetch_add(1, Ordering::AcqRel);
        let g = self
            .cond
            .wait_timeout(g, timeout)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        self.cond_waiters.fetch_sub(1, Ordering::AcqRel);
        g
    }

    /// Before the stack is discarded: lets the connections the application has closed
    /// finish sending (their data and FIN acknowledged) while the driver thread runs, for at
    /// most `timeout`, then ends every connection still there with a RST where RFC 9293's
    /// ABORT sends one, and polls once so those RSTs leave. No peer is left waiting for bytes
    /// that will never come. Returns the number of connections ended that way (still open
    /// ones and orphans that did not finish in time). Call it before [`Driver::stop`].
    pub fn drain(&self, timeout: StdDuration, stack: impl Fn(&mut S) -> &mut Stack) -> usize {
        let deadline = std::time::Instant::now() + timeout;
        let mut g = self.lock();
        loop {
            if stack(&mut g).tcp().orphans_sending() == 0 || self.stopped() {
                break;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                break;
            }
            // The driver announces every poll that did work (an ACK in, a segment out); the
            // bound only guards against a change nobody announced.
            g = self.wait_timeout(g, (deadline - now).min(StdDuration::from_millis(10)));
        }
        let ended = stack(&mut g).tcp_mut().abort_all();
        let now = self.now();
        g.poll(now);
        // Threads blocked on the ended connections see their reset now.
        g.wake_ready();
        self.notify();
        if ended > 0 && !self.stopped() {
            // A RST that does not land exactly on the peer's RCV.NXT (data of ours still in
            // flight) draws a challenge ACK (RFC 5961 §3.2); the stack, the connection gone,
            // answers it with a RST at the ACK's number (RFC 9293 §3.10.7.1), which the peer
            // accepts. The driver thread needs a round trip for that: 200 ms covers a
            // continental one.
            let end = std::time::Instant::now() + StdDuration::from_millis(200);
            loop {
                let now = std::time::Instant::now();
                if now >= end || self.stopped() {
                    break;
                }
                g = self.wait_timeout(g, end - now);
            }
        }
        ended
    }

    /// Tells the driver thread to stop and wakes everyone (waiters see [`Driver::stopped`]).
    pub fn stop(&self) {
        let mut g = self.lock();
        self.stop.store(true, Ordering::Release);
        g.wake_all();
        self.kick(&g);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn kicked(&self) -> bool {
        self.kick.load(Ordering::Acquire)
    }

    /// Releases the lock between polls and lets waiting application threads take it before
    /// re-taking it: std's mutex is not fair, so a driver that unlocked and re-locked at once
    /// would mostly win again. Spins briefly (a contender on the other core takes the lock
    /// within a microsecond), then yields (one on this core needs the CPU), bounded.
    fn hand_over<'a>(&'a self, g: MutexGuard<'a, S>) -> MutexGuard<'a, S> {
        drop(g);
        for i in 0..HAND_OVER_ROUNDS {
            if self.contenders.load(Ordering::Relaxed) == 0 {
                break;
            }
            if i < HAND_OVER_SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        self.lock_uncounted()
    }

    /// The driver thread's loop.
    fn run(&self) {
        let mut backoff = Backoff::new(self.backoff);
        // The device's wake-up is armed: the next empty poll may sleep.
        let mut armed = false;
        // Worked polls since the lock was last released.
        let mut batch = 0u32;
        let mut g = self.lock_uncounted();
        while !self.stopped() {
            let now = self.now();
            let worked = g.poll(now);
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.kick.store(false, Ordering::Release);
            g.wake_ready();
            if worked {
                backoff.worked();
                if armed {
                    g.wake_on_rx(None);
                    armed = false;
                }
                self.notify();
                // Batch: poll on while nobody waits for the lock; hand it over when someone
                // does, and yield now and then so a thread sharing this core (one that was
                // just woken, say) gets to run.
                batch += 1;
                if self.contenders.load(Ordering::Relaxed) > 0 {
                    batch = 0;
                    g = self.hand_over(g);
                } else if batch >= MAX_BATCH {
                    batch = 0;
                    drop(g);
                    std::thread::yield_now();
                    g = self.lock_uncounted();
                }
                continue;
            }
            batch = 0;
            let until_next: Option<StdDuration> = g.poll_at(now).map(|at| (at - now).into());
            if until_next.is_some_and(|d| d.is_zero()) {
                continue;
            }
            let step = backoff.idle(now);
            if step != Step::Sleep {
                // Poll again soon, with the lock released so application calls get in.
                drop(g);
                backoff.pause(step);
                g = self.lock_uncounted();
                continue;
            }
            let bound = match (until_next, g.max_sleep()) {
                (Some(d), Some(m)) => Some(d.min(m)),
                (d, m) => d.or(m),
            };
            match (g.readable_fd(), &self.waker, &self.device_waker) {
                (Some(fd), Some(w), _) => {
                    // Sleep in poll(2) on the device and the waker, with the lock released so
                    // application calls can run (and kick us).
                    g = self.sleep_in_poll(g, w, &[fd, w.rx.as_raw_fd()], bound);
                }
                (None, Some(w), Some(_)) if armed => {
                    g = self.sleep_in_poll(g, w, &[w.rx.as_raw_fd()], bound);
                    g.wake_on_rx(None);
                    armed = false;
                }
                (None, Some(_), Some(dw)) if g.wake_on_rx(Some(dw)) => {
                    // Frames sent before the arm are not announced: poll once more first.
                    armed = true;
                    continue;
                }
                _ => {
                    let idle = g.idle_wait();
                    let wait = until_next.map_or(idle, |d| d.min(idle));
                    self.sleeps.fetch_add(1, Ordering::Relaxed);
                    self.cond_waiters.fetch_add(1, Ordering::AcqRel);
                    g = self
                        .cond
                        .wait_timeout_while(g, wait, |_| !self.kicked() && !self.stopped())
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    self.cond_waiters.fetch_sub(1, Ordering::AcqRel);
                }
            }
            backoff.worked();
        }
        if armed {
            g.wake_on_rx(None);
        }
    }

    /// Sleeps in poll(2) on `fds` (the waker's socket among them) for at most `bound`, with
    /// the lock released; returns it re-taken.
    fn sleep_in_poll<'a>(
        &'a self,
        g: MutexGuard<'a, S>,
        w: &Waker,
        fds: &[RawFd],
        bound: Option<StdDuration>,
    ) -> MutexGuard<'a, S> {
        w.asleep.store(true, Ordering::Relaxed);
        // Dekker with `Waker::kick`: `asleep` before the kick flag is read.
        fence(Ordering::SeqCst);
        if self.kicked() || self.stopped() {
            w.asleep.store(false, Ordering::Relaxed);
            return g;
        }
        self.sleeps.fetch_add(1, Ordering::Relaxed);
        drop(g);
        let _ = wait_readable_any(fds, bound);
        w.asleep.store(false, Ordering::Relaxed);
        w.drain();
        self.lock_uncounted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netfold::buf::{PacketBuf, Pool};
    use netfold::iface::Stack;
    use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
    use netfold::phy::Device;
    use netfold::wire::Ipv4Addr;
    use netfold_testkit::config;

    const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    /// Far longer than any bound below: a driver that only woke on its idle timer would fail.
    const IDLE_WAIT: StdDuration = StdDuration::from_secs(60);

    struct Node {
        stack: Stack,
        end: PipeEnd,
    }

    impl Driven for Node {
        fn poll(&mut self, now: Instant) -> bool {
            self.stack.poll(now, &mut self.end)
        }
        fn poll_at(&self, now: Instant) -> Option<Instant> {
            [self.stack.poll_at(now), self.end.poll_at()]
                .into_iter()
                .flatten()
                .min()
        }
        fn readable_fd(&self) -> Option<RawFd> {
            None
        }
        fn idle_wait(&self) -> StdDuration {
            IDLE_WAIT
        }
        fn wake_on_rx(&mut self, waker: Option<&TaskWaker>) -> bool {
            self.end.wake_on_rx(waker)
        }
    }

    /// An ARP request (RFC 826) from B for A's address, on a broadcast Ethernet frame.
    fn arp_request() -> PacketBuf {
        let mac_b = [2, 0, 0, 0, 0, 2];
        let mut f = Vec::with_capacity(42);
        f.extend_from_slice(&[0xff; 6]);
        f.extend_from_slice(&mac_b);
        f.extend_from_slice(&0x0806u16.to_be_bytes());
        // Ethernet hardware (1), IPv4 protocol (0x0800), lengths 6 and 4, op 1 = request.
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&mac_b);
        f.extend_from_slice(&B.octets());
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&A.octets());
        let mut b = PacketBuf::with_capacity(f.len());
        b.extend_from_slice(&f);
        b
    }

    #[test]
    fn an_idle_driver_sleeps_and_a_frame_from_the_pipe_wakes_it() {
        let (a, mut b) = Pipe::new(PipeConfig::default());
        let node = Node {
            stack: Stack::new(config(A, 1)),
            end: a,
        };
        let d = Arc::new(Driver::new(node, Epoch::now()));
        let h = d.spawn("driver-test").unwrap();

        // Idle: after the busy-poll budget the driver sleeps. A driver that kept polling
        // would make hundreds of thousands of polls in this window; one that sleeps makes
        // one per timer deadline, and an idle stack with no sockets has few.
        std::thread::sleep(StdDuration::from_millis(50));
        let (p0, s0) = (d.polls(), d.sleeps());
        std::thread::sleep(StdDuration::from_millis(200));
        let idle_polls = d.polls() - p0;
        assert!(idle_polls < 20, "{idle_polls} polls while idle");
        assert!(d.sleeps() >= s0, "sleep counter went backwards");
        assert!(d.sleeps() > 0, "the driver never slept");

        // Traffic: a frame sent into the pipe wakes it (long before IDLE_WAIT), and its
        // ARP reply comes back.
        let mut pool = Pool::new(64, 4);
        let t = std::time::Instant::now();
        b.send_batch(Instant::ZERO, &mut pool, &mut vec![arp_request()]);
        let bound = StdDuration::from_secs(10);
        while b.rx_pending() == 0 && t.elapsed() < bound {
            std::thread::sleep(StdDuration::from_millis(1));
        }
        let waited = t.elapsed();
        assert!(b.rx_pending() > 0, "no reply after {waited:?}");
        let mut out = Vec::new();
        assert_eq!(
            b.recv_batch(Instant::from_secs(3600), &mut pool, &mut out, 8),
            1
        );
        assert_eq!(&out[0].as_slice()[12..14], &0x0806u16.to_be_bytes());

        d.stop();
        h.join().unwrap();
    }

    #[test]
    fn a_kick_wakes_a_sleeping_driver() {
        let (a, _b) = Pipe::new(PipeConfig::default());
        let node = Node {
            stack: Stack::new(config(A, 1)),
            end: a,
        };
        let d = Arc::new(Driver::new(node, Epoch::now()));
        let h = d.spawn("driver-test").unwrap();
        std::thread::sleep(StdDuration::from_millis(50));
        let bound = StdDuration::from_secs(10);
        let s0 = d.sleeps();
        let p0 = d.polls();
        let t = std::time::Instant::now();
        {
            let g = d.lock();
            d.kick(&g);
        }
        while d.polls() == p0 && t.elapsed() < bound {
            std::thread::sleep(StdDuration::from_millis(1));
        }
        assert!(d.polls() > p0, "a kick did not wake the driver");
        assert!(s0 > 0, "the driver was not asleep before the kick");
        // stop() is a kick too: the join must not wait for IDLE_WAIT.
        let t = std::time::Instant::now();
        d.stop();
        h.join().unwrap();
        assert!(t.elapsed() < bound);
    }
}
