//! The engine behind an `nf_stack`: one mutex around the stack, its device and the descriptor
//! table, one condition variable every state change is announced on, and the clock.
//!
//! - MANUAL clock: nothing runs between calls. Every call that changes something polls the
//!   stack "until quiescent" ([`Engine::settle`]) before returning, so `nf_inject` has processed
//!   its frame and `nf_write`'s data is already in `nf_take`'s queue. Time moves only through
//!   `nf_clock_set`. A blocking call sleeps on the condition variable until another thread's
//!   call changes something; its timeout is measured on the manual clock too.
//! - REAL clock: the runtime's driver thread ([`netfold_rt::driver`], the same one the blocking
//!   Rust API runs on) polls the stack and sleeps until the stack's next deadline or a kick from
//!   an application call. Blocking calls sleep on the condition variable, which the driver
//!   signals after every poll that did work.
//!
//! The lock, the condition variable and the stop flag are the driver's under both clocks; under
//! MANUAL its thread is simply never started.
//!
//! A REAL-clock stack over a device with a file descriptor (a TAP, a packet socket) can also
//! run INLINE ([`PollMode::Inline`]; the LD_PRELOAD library's default, `NETFOLD_POLL=inline`):
//! the application's own calls poll the stack, so a packet needs no hand-over to another
//! thread.
//! - Every call that changes something ([`Engine::changed`]) polls the stack in the calling
//!   thread without reading the device: its segments leave and timers that came due run; the
//!   frames waiting on the device are taken in by the next wait (or the fallback driver).
//! - A thread that has to wait takes the device ([`Engine::take_device`], one thread at a
//!   time) and sleeps in the kernel's poll(2) on the device's descriptor (beside whatever else
//!   it waits for), for at most the stack's next deadline ([`Engine::poll_inline`] returns
//!   it), then polls the stack itself.
//! - A fallback driver thread runs the stack while nobody does (the application busy
//!   elsewhere): it stands by, waking every [`TICK`], while a thread holds the device or
//!   application calls read the device since its last look, and takes over (polls, sleeps in poll(2) on
//!   the device until the next deadline) when neither happened for a whole tick. A thread
//!   that holds the device for long lets the driver sleep longer and wakes it when it lets
//!   the device go. So a connection whose application stopped calling is served again within
//!   two ticks, and an application that keeps calling pays no thread hand-over per packet.

use crate::device::InjectDevice;
use crate::fd::FdTable;
use netfold_core::iface::Stack;
use netfold_core::phy::{Device, RawFd};
use netfold_core::time::{Duration, Instant};
use netfold_rt::driver::{Driven, Driver};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

/// Poll rounds `settle` runs at most: bounds the work one call can do even if a device or timer
/// keeps reporting work (each round moves at most a burst of frames).
const SETTLE_ROUNDS: usize = 256;
/// Longest single sleep of a REAL-clock waiter or the driver: a safety net against a state
/// change nobody announced (e.g. a timer that ended a connection without sending anything).
/// Not a spin: at most 10 wake-ups a second.
pub(crate) const MAX_SLEEP: StdDuration = StdDuration::from_millis(100);
/// Driver sleep bound while a real device (which cannot wake us) is attached.
const DEVICE_IDLE_WAIT: StdDuration = StdDuration::from_millis(1);

/// INLINE mode: how often the fallback driver looks whether anybody polls the stack, and so
/// half the longest time a connection waits for service when its application stops calling.
pub(crate) const TICK: StdDuration = StdDuration::from_millis(1);

thread_local! {
    /// Set while the calling thread runs a corked send ([`Engine::corked`]).
    static CORKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Who runs a REAL-clock stack (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PollMode {
    /// A driver thread polls the stack; application calls wake it and wait for it.
    #[default]
    Thread,
    /// Application calls poll the stack; a fallback driver thread takes over while none do.
    #[cfg_attr(not(netfold_preload), allow(dead_code))]
    Inline,
}

/// INLINE mode's shared state: who holds the device, and the fallback driver's wake-up.
pub(crate) struct Inline {
    /// An application thread holds the device (waits in poll(2) on its descriptor).
    held: AtomicBool,
    /// Times the device was taken: tells one long hold from many short ones.
    takes: AtomicU64,
    /// Polls application threads made (the fallback driver's sign that someone is polling).
    app_polls: AtomicU64,
    /// The fallback driver sleeps for longer than a tick: letting the device go wakes it.
    deep: AtomicBool,
    /// When the fallback driver, running the stack, wakes next (stack time, microseconds;
    /// `u64::MAX` for no deadline, 0 while it stands by: then it looks again within a tick, or
    /// the thread holding the device runs the timers): a call that polls and leaves an
    /// earlier deadline wakes it.
    wake_at: AtomicU64,
    /// Polls the fallback driver made, and times it took over from the application.
    driver_polls: AtomicU64,
    takeovers: AtomicU64,
    /// A corked send ([`Engine::corked`]) left segments unsent: the next
    /// [`Engine::uncork`] (or any poll) sends them.
    corked: AtomicBool,
    /// Wakes the fallback driver: a byte on a non-blocking socket pair.
    tx: UnixStream,
    rx: UnixStream,
}

impl Inline {
    fn new() -> std::io::Result<Inline> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Inline {
            held: AtomicBool::new(false),
            takes: AtomicU64::new(0),
            app_polls: AtomicU64::new(0),
            deep: AtomicBool::new(false),
            wake_at: AtomicU64::new(0),
            driver_polls: AtomicU64::new(0),
            takeovers: AtomicU64::new(0),
            corked: AtomicBool::new(false),
            tx,
            rx,
        })
    }

    fn ring(&self) {
        use std::io::Write as _;
        // A full socket already holds a wake-up.
        let _ = (&self.tx).write(&[1]);
    }

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

/// The device, held by one waiting application thread (INLINE mode); let go on drop.
pub(crate) struct DeviceHold<'a>(&'a Inline);

impl Drop for DeviceHold<'_> {
    fn drop(&mut self) {
        // Dekker with the fallback driver's `deep` then `held`.
        self.0.held.store(false, Ordering::SeqCst);
        if self.0.deep.load(Ordering::SeqCst) {
            self.0.ring();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clock {
    Real(netfold_os::clock::Epoch),
    Manual,
}

pub(crate) struct State {
    pub(crate) stack: Stack,
    pub(crate) dev: InjectDevice,
    pub(crate) fds: FdTable,
    pub(crate) manual_now: Instant,
    /// Zero-copy completion queues (`zerocopy.rs`).
    pub(crate) zc: crate::zerocopy::ZcRegistry,
    /// Some socket asked for receive timestamps: polls sample arrivals (`timestamp.rs`).
    pub(crate) rx_stamping: bool,
    /// Some TCP send asked for transmit timestamps: polls look for the bytes' progress.
    pub(crate) tx_stamping: bool,
    /// A shard's: rung after every poll that did work, for `nf_accept_any`, which waits on
    /// the shards of one `nf_shards` at once (`shards.rs`).
    pub(crate) bell: Option<Arc<Bell>>,
    /// Called after every poll that did work (REAL clock), like `bell`: the LD_PRELOAD
    /// library wakes the threads that wait in the kernel's poll(2) on netfold and kernel
    /// descriptors at once (`netfold-preload`).
    pub(crate) on_work: Option<Box<dyn Fn() + Send>>,
    /// Whether new TCP sockets offer timestamps (Linux `net.ipv4.tcp_timestamps`, default 1;
    /// `nf_set_tcp_timestamps`).
    pub(crate) tcp_timestamps: bool,
    /// ECN for new TCP sockets (Linux `net.ipv4.tcp_ecn`; `nf_config.tcp_ecn`,
    /// `nf_set_tcp_ecn`).
    pub(crate) tcp_ecn: netfold_core::tcp::EcnMode,
    /// TCP_NOTSENT_LOWAT of sockets that set none (Linux `net.ipv4.tcp_notsent_lowat`,
    /// default UINT_MAX: no limit; `nf_set_tcp_notsent_lowat`).
    pub(crate) tcp_notsent_lowat: u32,
}

/// One condition variable several engines announce their work on: what a thread waiting for
/// any of them (`nf_accept_any`) sleeps on, since it cannot sleep on every engine's own
/// condition variable at once. Rung only while someone waits, so a shard nobody waits across
/// pays one atomic load per worked poll.
#[derive(Default)]
pub(crate) struct Bell {
    /// How many times it has been rung while someone waited.
    rung: Mutex<u64>,
    cond: Condvar,
    /// Threads between [`Bell::listen`] and the end of their wait.
    waiters: AtomicUsize,
}

/// A thread that waits on a [`Bell`]: counted while it lives.
pub(crate) struct BellWaiter<'a>(&'a Bell);

impl Bell {
    /// Registers the calling thread as a waiter. Register first, then read
    /// [`BellWaiter::generation`], then look at the engines, then [`BellWaiter::wait`]: a
    /// poll that finishes after the look rings (it sees the waiter, SeqCst on `waiters` on
    /// both sides) and the wait returns; one that finished before it was seen by the look.
    pub(crate) fn listen(&self) -> BellWaiter<'_> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        BellWaiter(self)
    }

    pub(crate) fn ring(&self) {
        if self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        *self.rung.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.cond.notify_all();
    }
}

impl BellWaiter<'_> {
    pub(crate) fn generation(&self) -> u64 {
        *self.0.rung.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleeps until the bell is rung after `seen` was read, or `timeout` passes.
    pub(crate) fn wait(&self, seen: u64, timeout: StdDuration) {
        let g = self.0.rung.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .0
            .cond
            .wait_timeout_while(g, timeout, |rung| *rung == seen);
    }
}

impl Drop for BellWaiter<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the REAL-clock driver runs: the stack over the inject device.
impl Driven for State {
    fn poll(&mut self, now: Instant) -> bool {
        let worked = self.stack.poll(now, &mut self.dev);
        if worked {
            crate::timestamp::after_poll(self, now);
            if let Some(b) = &self.bell {
                b.ring();
            }
            if let Some(f) = &self.on_work {
                f();
            }
        }
        worked
    }
    /// Injected frames waiting are due now; otherwise the stack's next timer.
    fn poll_at(&self, now: Instant) -> Option<Instant> {
        if self.dev.has_inbound() {
            return Some(now);
        }
        self.stack.poll_at(now)
    }
    /// A TAP can wake the driver itself: it then sleeps in poll(2) on it and the waker.
    fn readable_fd(&self) -> Option<RawFd> {
        self.dev.readable_fd()
    }
    fn idle_wait(&self) -> StdDuration {
        if self.dev.has_inner() {
            DEVICE_IDLE_WAIT
        } else {
            MAX_SLEEP
        }
    }
    fn max_sleep(&self) -> Option<StdDuration> {
        Some(MAX_SLEEP)
    }
    /// An inner device that can wake the driver (a shard's in-memory queue) is armed, so the
    /// driver sleeps until frames arrive rather than waking every `DEVICE_IDLE_WAIT`.
    /// Injected frames wake it through the kick of `nf_inject`.
    fn wake_on_rx(&mut self, waker: Option<&std::task::Waker>) -> bool {
        self.dev.wake_on_rx(waker)
    }
}

pub(crate) struct Engine {
    driver: Arc<Driver<State>>,
    pub(crate) clock: Clock,
    /// `Some` in INLINE mode (REAL clock only).
    inline: Option<Inline>,
}

pub(crate) type Guard<'a> = MutexGuard<'a, State>;

impl Engine {
    pub(crate) fn new(stack: Stack, dev: InjectDevice, clock: Clock) -> Engine {
        Engine::with_mode(stack, dev, clock, PollMode::Thread)
    }

    /// An engine that runs in `mode`. INLINE needs the REAL clock and a device with a
    /// descriptor to wait on; without them (or its socket pair) the engine runs in THREAD mode.
    pub(crate) fn with_mode(
        stack: Stack,
        dev: InjectDevice,
        clock: Clock,
        mode: PollMode,
    ) -> Engine {
        let inline = (mode == PollMode::Inline
            && matches!(clock, Clock::Real(_))
            && dev.readable_fd().is_some())
        .then(Inline::new)
        .and_then(Result::ok);
        let state = State {
            stack,
            dev,
            fds: FdTable::new(),
            manual_now: Instant::ZERO,
            zc: Default::default(),
            rx_stamping: false,
            tx_stamping: false,
            bell: None,
            on_work: None,
            tcp_timestamps: true,
            tcp_ecn: netfold_core::tcp::EcnMode::Passive,
            tcp_notsent_lowat: u32::MAX,
        };
        let epoch = match clock {
            Clock::Real(epoch) => epoch,
            // Unused: MANUAL time is `manual_now`.
            Clock::Manual => netfold_os::clock::Epoch::now(),
        };
        Engine {
            driver: Arc::new(Driver::new(state, epoch)),
            clock,
            inline,
        }
    }

    /// The mode the engine runs in.
    #[cfg_attr(not(netfold_preload), allow(dead_code))]
    pub(crate) fn mode(&self) -> PollMode {
        if self.inline.is_some() {
            PollMode::Inline
        } else {
            PollMode::Thread
        }
    }

    pub(crate) fn lock(&self) -> Guard<'_> {
        // A panic while the lock was held (caught at the FFI boundary) leaves the state as it
        // was; later calls keep working on it rather than failing forever.
        self.driver.lock()
    }

    /// Whether the stack is being freed (waiters return EBADF).
    pub(crate) fn stopped(&self) -> bool {
        self.driver.stopped()
    }

    /// Stack time `t` as wall-clock time (seconds, nanoseconds since the Unix epoch), for
    /// timestamps: REAL, the system clock's reading `now - t` ago; MANUAL, the manual clock
    /// itself (its 0 is the epoch: a harness adds its own start).
    pub(crate) fn wall_time(&self, now: Instant, t: Instant) -> (i64, i64) {
        let us = match self.clock {
            Clock::Real(_) => {
                let sys = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_micros() as i64);
                sys - (now.total_micros() as i64 - t.total_micros() as i64)
            }
            Clock::Manual => t.total_micros() as i64,
        };
        (us.div_euclid(1_000_000), us.rem_euclid(1_000_000) * 1000)
    }

    pub(crate) fn now(&self, st: &State) -> Instant {
        match self.clock {
            Clock::Real(_) => self.driver.now(),
            Clock::Manual => st.manual_now,
        }
    }

    /// Announces that an application call changed something: MANUAL runs the stack now, REAL
    /// wakes the driver. Either way, waiters are woken to re-check.
    pub(crate) fn changed(&self, st: &mut State) {
        match (self.clock, &self.inline) {
            (Clock::Manual, _) => self.settle(st),
            (Clock::Real(_), Some(inl)) => {
                // Corked only while the fallback driver stands by (`wake_at` 0: application
                // calls polled within its last tick), so it looks again within a tick; a
                // running one may sleep until its next deadline and would not send them.
                if CORKING.with(std::cell::Cell::get) && inl.wake_at.load(Ordering::Relaxed) == 0 {
                    inl.corked.store(true, Ordering::Relaxed);
                } else {
                    self.poll_tx(st);
                }
                // A timer that came due earlier than the running fallback driver's wake-up
                // (rare: it sleeps until the earliest one it knew of).
                let now = self.now(st);
                if let Some(at) = st.poll_at(now) {
                    if at.total_micros() < inl.wake_at.load(Ordering::Relaxed) {
                        inl.ring();
                    }
                }
            }
            (Clock::Real(_), None) => self.driver.kick(st),
        }
        self.driver.notify();
    }

    /// INLINE mode, after a call that changed something: its segments leave now, from the
    /// calling thread, and timers that came due run; frames on the device are left for the
    /// next wait (or the fallback driver), so a call that finds no frames costs no read(2) on
    /// the device. Not counted as the application's poll: only a poll that takes frames in
    /// keeps the fallback driver standing by.
    fn poll_tx(&self, st: &mut State) {
        if let Some(inl) = &self.inline {
            inl.corked.store(false, Ordering::Relaxed);
        }
        let now = self.now(st);
        let State { stack, dev, .. } = st;
        let worked = stack.poll(now, &mut TxOnly(dev));
        if worked {
            crate::timestamp::after_poll(st, now);
            if let Some(b) = &st.bell {
                b.ring();
            }
            if let Some(f) = &st.on_work {
                f();
            }
        }
    }

    /// INLINE mode: polls the stack in the calling thread while polls find work (bounded),
    /// then announces the work (condition-variable waiters, `on_work`). Returns whether any
    /// poll did work.
    fn poll_here(&self, inl: &Inline, st: &mut State) -> bool {
        inl.app_polls.fetch_add(1, Ordering::Relaxed);
        inl.corked.store(false, Ordering::Relaxed);
        let worked = poll_rounds(&self.driver, st);
        if worked {
            self.driver.notify();
        }
        worked
    }

    /// INLINE mode: polls the stack in the calling thread (as an application call that
    /// changed something does) and returns how long until the stack's next deadline (`None`:
    /// no timer pending). `None` in THREAD mode, without polling.
    #[cfg_attr(not(netfold_preload), allow(dead_code))]
    pub(crate) fn poll_inline(&self) -> Option<Option<StdDuration>> {
        let inl = self.inline.as_ref()?;
        let mut g = self.lock();
        self.poll_here(inl, &mut g);
        let now = self.now(&g);
        Some(
            g.poll_at(now)
                .map(|at| StdDuration::from(at.max(now) - now)),
        )
    }

    /// INLINE mode: runs `f` (a send) corked: the segments the send makes ready are not
    /// transmitted at once but by the next [`Engine::uncork`], poll, or uncorked call that
    /// changes something, so small writes made back to back (an HTTP server's header, then
    /// its body) leave as one segment and one write to the device. Like Linux's TCP
    /// autocorking (`net.ipv4.tcp_autocorking`), which holds a small segment back while an
    /// earlier one is still queued below TCP; here the caller bounds the delay (its next
    /// call on a netfold descriptor uncorks; the fallback driver polls within two ticks
    /// otherwise). [`Engine::uncork`] takes the lock: it must not be called by a thread that
    /// holds it (the stack's own device I/O).
    #[cfg_attr(not(netfold_preload), allow(dead_code))]
    pub(crate) fn corked<T>(&self, f: impl FnOnce() -> T) -> T {
        if self.inline.is_none() {
            return f();
        }
        CORKING.with(|c| c.set(true));
        let r = f();
        CORKING.with(|c| c.set(false));
        r
    }

    /// INLINE mode: sends what corked sends left (see [`Engine::corked`]); one atomic load
    /// when nothing is left.
    #[cfg_attr(not(netfold_preload), allow(dead_code))]
    pub(crate) fn uncork(&self) {
        let Some(inl) = &self.inline else { return };
        if inl.corked.load(Ordering::Relaxed) {
            let mut g = self.lock();
            if inl.corked.load(Ordering::Relaxed) {
                self.poll_tx(&mut g);
            }
        }
    }

    /// INLINE mode: the device for the calling thread to wait on (its descriptor), if no other
    /// thread holds it; it is let go when the returned hold is dropped.
    #[cfg_attr(not(netfold_preload), allow(dead_code))]
    pub(crate) fn take_device(&self) -> Option<(DeviceHold<'_>, RawFd)> {
        let inl = self.inline.as_ref()?;
        if inl.held.swap(true, Ordering::SeqCst) {
            return None;
        }
        inl.takes.fetch_add(1, Ordering::Relaxed);
        let hold = DeviceHold(inl);
        let fd = self.lock().dev.readable_fd()?;
        Some((hold, fd))
    }

    /// INLINE mode's counters, for diagnostics: polls made by application calls and by the
    /// fallback driver, and the driver's take-overs.
    #[cfg_attr(not(netfold_preload), allow(dead_code))]
    pub(crate) fn inline_stats(&self) -> Option<(u64, u64, u64)> {
        let inl = self.inline.as_ref()?;
        Some((
            inl.app_polls.load(Ordering::Relaxed),
            inl.driver_polls.load(Ordering::Relaxed),
            inl.takeovers.load(Ordering::Relaxed),
        ))
    }

    /// Polls until nothing is left to do at the current time (MANUAL clock).
    pub(crate) fn settle(&self, st: &mut State) {
        let now = self.now(st);
        for _ in 0..SETTLE_ROUNDS {
            let State { stack, dev, .. } = st;
            let did = stack.poll(now, dev);
            if did {
                crate::timestamp::after_poll(st, now);
            }
            let State { stack, dev, .. } = st;
            let due = stack.poll_at(now).is_some_and(|t| t <= now) || dev.has_inbound();
            if !did && !due {
                break;
            }
        }
        self.driver.notify();
    }

    /// Sleeps until some call or the driver announces a change, or `deadline` (stack time)
    /// passes. Returns the guard and whether the deadline has passed.
    pub(crate) fn wait<'a>(&self, g: Guard<'a>, deadline: Option<Instant>) -> (Guard<'a>, bool) {
        let now = self.now(&g);
        if deadline.is_some_and(|d| now >= d) {
            return (g, true);
        }
        let g = match self.clock {
            // Manual time only moves through another call, which notifies: no timeout needed.
            Clock::Manual => self.driver.wait(g),
            Clock::Real(_) => {
                let left =
                    deadline.map_or(MAX_SLEEP, |d| StdDuration::from(d - now).min(MAX_SLEEP));
                self.driver.wait_timeout(g, left)
            }
        };
        let now = self.now(&g);
        let timed_out = deadline.is_some_and(|d| now >= d);
        (g, timed_out)
    }

    /// Times the driver thread has gone to sleep (tests: a sleeping driver from a polling one).
    #[cfg(test)]
    pub(crate) fn driver_sleeps(&self) -> u64 {
        self.driver.sleeps()
    }

    /// Closes every descriptor (as `nf_close` would: a FIN after queued data, a RST where
    /// data was left unread), lets the closed connections finish sending for at most
    /// `timeout` while the REAL-clock driver runs, then ends what is left with RSTs
    /// (`Driver::drain`). MANUAL time does not move by itself: what is left is ended at once,
    /// and its RSTs wait in the outbound queue for `nf_take`. Returns the number of
    /// connections ended.
    pub(crate) fn drain(&self, timeout: StdDuration) -> usize {
        {
            let mut g = self.lock();
            let st = &mut *g;
            for sock in st.fds.drain() {
                crate::ops::release(&mut st.stack, sock);
            }
            self.changed(st);
        }
        match self.clock {
            Clock::Real(_) => self.driver.drain(timeout, |st| &mut st.stack),
            Clock::Manual => {
                let mut g = self.lock();
                let ended = g.stack.tcp_mut().abort_all();
                self.settle(&mut g);
                ended
            }
        }
    }

    /// Stops the driver and wakes every waiter (they return EBADF).
    pub(crate) fn stop(&self) {
        self.driver.stop();
        if let Some(inl) = &self.inline {
            inl.ring();
        }
    }

    /// Sets the manual clock and runs everything that became due.
    /// The stack's next deadline (its earliest timer, or now when frames wait to be
    /// processed), never before now; `None` when nothing is pending (`nf_clock_next`).
    pub(crate) fn next_deadline(&self, st: &State) -> Option<Instant> {
        let now = self.now(st);
        st.poll_at(now).map(|t| t.max(now))
    }

    pub(crate) fn set_clock(&self, st: &mut State, usec: u64) -> Result<(), i32> {
        if self.clock != Clock::Manual {
            return Err(libc::EINVAL);
        }
        let t = Instant::from_micros(usec);
        if t < st.manual_now {
            return Err(libc::EINVAL);
        }
        st.manual_now = t;
        self.settle(st);
        Ok(())
    }
}

/// Converts a `timeout` into a stack-time deadline.
pub(crate) fn deadline_after(now: Instant, timeout: Option<Duration>) -> Option<Instant> {
    timeout.map(|t| now + t)
}

/// The device for a poll that only sends: receives nothing (the frames wait on the device).
struct TxOnly<'a>(&'a mut InjectDevice);

impl Device for TxOnly<'_> {
    fn caps(&self) -> netfold_core::phy::DeviceCaps {
        self.0.caps()
    }
    fn recv_batch(
        &mut self,
        _now: Instant,
        _pool: &mut netfold_core::buf::Pool,
        _out: &mut Vec<netfold_core::buf::PacketBuf>,
        _max: usize,
    ) -> usize {
        0
    }
    fn send_batch(
        &mut self,
        now: Instant,
        pool: &mut netfold_core::buf::Pool,
        frames: &mut Vec<netfold_core::buf::PacketBuf>,
    ) {
        self.0.send_batch(now, pool, frames);
    }
    fn poll_at(&self) -> Option<Instant> {
        self.0.poll_at()
    }
    fn readable_fd(&self) -> Option<RawFd> {
        self.0.readable_fd()
    }
}

/// Polls `st` while polls find work, at most `SETTLE_ROUNDS` times; announces the work once
/// (`bell`, `on_work`). Returns whether any poll did work.
fn poll_rounds(driver: &Driver<State>, st: &mut State) -> bool {
    let mut worked = false;
    for _ in 0..SETTLE_ROUNDS {
        let now = driver.now();
        let State { stack, dev, .. } = st;
        let did = stack.poll(now, dev);
        if did {
            crate::timestamp::after_poll(st, now);
        }
        if !did && !st.dev.has_inbound() {
            break;
        }
        worked = true;
    }
    if worked {
        if let Some(b) = &st.bell {
            b.ring();
        }
        if let Some(f) = &st.on_work {
            f();
        }
    }
    worked
}

/// Starts the REAL-clock driver thread (INLINE mode: the fallback driver).
pub(crate) fn spawn_driver(engine: Arc<Engine>) -> std::io::Result<JoinHandle<()>> {
    if engine.inline.is_some() {
        return std::thread::Builder::new()
            .name("netfold-fallback".into())
            .spawn(move || fallback(&engine));
    }
    engine.driver.spawn("netfold-ffi-driver")
}

/// INLINE mode's fallback driver (see the module documentation): stands by while an
/// application thread holds the device or application calls polled within the last tick;
/// otherwise runs the stack as the THREAD-mode driver would, sleeping in poll(2) on the device
/// and its wake-up until the next deadline.
fn fallback(e: &Engine) {
    let Some(inl) = e.inline.as_ref() else {
        return;
    };
    let mut seen_polls = inl.app_polls.load(Ordering::Relaxed);
    let mut seen_takes = u64::MAX;
    let mut standby = TICK;
    let mut running = false;
    while !e.stopped() {
        let polls = inl.app_polls.load(Ordering::Relaxed);
        let held = inl.held.load(Ordering::SeqCst);
        if held || polls != seen_polls {
            running = false;
            inl.wake_at.store(0, Ordering::Relaxed);
            seen_polls = polls;
            // One long hold (the application waiting for a while): sleep longer, and have the
            // thread that lets the device go wake us.
            let takes = inl.takes.load(Ordering::Relaxed);
            standby = if held && takes == seen_takes {
                (standby * 2).min(MAX_SLEEP)
            } else {
                TICK
            };
            seen_takes = takes;
            if standby > TICK {
                inl.deep.store(true, Ordering::SeqCst);
                if !inl.held.load(Ordering::SeqCst) {
                    inl.deep.store(false, Ordering::SeqCst);
                    continue;
                }
            }
            let _ = netfold_os::wait::wait_readable_any(&[inl.rx.as_raw_fd()], Some(standby));
            inl.deep.store(false, Ordering::SeqCst);
            inl.drain();
            continue;
        }
        if !running {
            running = true;
            inl.takeovers.fetch_add(1, Ordering::Relaxed);
        }
        let (fd, wait) = {
            let mut g = e.lock();
            inl.corked.store(false, Ordering::Relaxed);
            if poll_rounds(&e.driver, &mut g) {
                e.driver.notify();
            }
            inl.driver_polls.fetch_add(1, Ordering::Relaxed);
            let now = e.now(&g);
            let next = g.poll_at(now);
            inl.wake_at.store(
                next.map_or(u64::MAX, |t| t.total_micros()),
                Ordering::Relaxed,
            );
            let wait = next.map_or(MAX_SLEEP, |t| {
                StdDuration::from(t.max(now) - now).min(MAX_SLEEP)
            });
            (g.dev.readable_fd(), wait)
        };
        // Our own polls are not the application's.
        seen_polls = inl.app_polls.load(Ordering::Relaxed);
        if wait.is_zero() {
            continue;
        }
        let mut fds = vec![inl.rx.as_raw_fd()];
        fds.extend(fd);
        let _ = netfold_os::wait::wait_readable_any(&fds, Some(wait));
        inl.drain();
    }
}

/// Starts a shard's REAL-clock driver thread, pinned to `cpu` if given (a refused pin leaves
/// it unpinned: slower, not wrong).
pub(crate) fn spawn_shard_driver(
    engine: &Engine,
    k: usize,
    cpu: Option<usize>,
) -> std::io::Result<JoinHandle<()>> {
    engine
        .driver
        .spawn_with(&format!("netfold-ffi-shard-{k}"), move || {
            if let Some(cpu) = cpu {
                netfold_os::cpu::pin_current_thread(cpu);
            }
        })
}
