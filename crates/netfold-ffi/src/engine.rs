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

use crate::device::InjectDevice;
use crate::fd::FdTable;
use netfold_core::iface::Stack;
use netfold_core::phy::{Device, RawFd};
use netfold_core::time::{Duration, Instant};
use netfold_rt::driver::{Driven, Driver};
use std::sync::atomic::{AtomicUsize, Ordering};
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
}

pub(crate) type Guard<'a> = MutexGuard<'a, State>;

impl Engine {
    pub(crate) fn new(stack: Stack, dev: InjectDevice, clock: Clock) -> Engine {
        let state = State {
            stack,
            dev,
            fds: FdTable::new(),
            manual_now: Instant::ZERO,
            zc: Default::default(),
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

    pub(crate) fn now(&self, st: &State) -> Instant {
        match self.clock {
            Clock::Real(_) => self.driver.now(),
            Clock::Manual => st.manual_now,
        }
    }

    /// Announces that an application call changed something: MANUAL runs the stack now, REAL
    /// wakes the driver. Either way, waiters are woken to re-check.
    pub(crate) fn changed(&self, st: &mut State) {
        match self.clock {
            Clock::Manual => self.settle(st),
            Clock::Real(_) => self.driver.kick(st),
        }
        self.driver.notify();
    }

    /// Polls until nothing is left to do at the current time (MANUAL clock).
    pub(crate) fn settle(&self, st: &mut State) {
        let now = self.now(st);
        for _ in 0..SETTLE_ROUNDS {
            let State { stack, dev, .. } = st;
            let did = stack.poll(now, dev);
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

/// Starts the REAL-clock driver thread.
pub(crate) fn spawn_driver(engine: Arc<Engine>) -> std::io::Result<JoinHandle<()>> {
    engine.driver.spawn("netfold-ffi-driver")
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
