//! The engine behind an `nf_stack`: one mutex around the stack, its device and the descriptor
//! table, one condition variable every state change is announced on, and the clock.
//!
//! - MANUAL clock: nothing runs between calls. Every call that changes something polls the
//!   stack "until quiescent" ([`Engine::settle`]) before returning, so `nf_inject` has processed
//!   its frame and `nf_write`'s data is already in `nf_take`'s queue. Time moves only through
//!   `nf_clock_set`. A blocking call sleeps on the condition variable until another thread's
//!   call changes something; its timeout is measured on the manual clock too.
//! - REAL clock: a driver thread polls the stack and sleeps until the stack's next deadline or a
//!   kick from an application call (the design of `socket::blocking`). Blocking calls sleep on
//!   the condition variable, which the driver signals after every poll that did work.

use crate::device::InjectDevice;
use crate::fd::FdTable;
use netfold_core::iface::Stack;
use netfold_core::time::{Duration, Instant};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

/// Poll rounds `settle` runs at most: bounds the work one call can do even if a device or timer
/// keeps reporting work (each round moves at most a burst of frames).
const SETTLE_ROUNDS: usize = 256;
/// Longest single sleep of a REAL-clock waiter or the driver: a safety net against a state
/// change nobody announced (e.g. a timer that ended a connection without sending anything).
/// Not a spin: at most 10 wake-ups a second.
const MAX_SLEEP: StdDuration = StdDuration::from_millis(100);
/// Driver sleep bound while a real device (which cannot wake us) is attached.
const DEVICE_IDLE_WAIT: StdDuration = StdDuration::from_millis(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clock {
    Real(std::time::Instant),
    Manual,
}

pub(crate) struct State {
    pub(crate) stack: Stack,
    pub(crate) dev: InjectDevice,
    pub(crate) fds: FdTable,
    pub(crate) manual_now: Instant,
    pub(crate) stop: bool,
    kick: bool,
}

pub(crate) struct Engine {
    st: Mutex<State>,
    cond: Condvar,
    pub(crate) clock: Clock,
}

pub(crate) type Guard<'a> = MutexGuard<'a, State>;

impl Engine {
    pub(crate) fn new(stack: Stack, dev: InjectDevice, clock: Clock) -> Engine {
        Engine {
            st: Mutex::new(State {
                stack,
                dev,
                fds: FdTable::new(),
                manual_now: Instant::ZERO,
                stop: false,
                kick: false,
            }),
            cond: Condvar::new(),
            clock,
        }
    }

    pub(crate) fn lock(&self) -> Guard<'_> {
        // A panic while the lock was held (caught at the FFI boundary) leaves the state as it
        // was; later calls keep working on it rather than failing forever.
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn now(&self, st: &State) -> Instant {
        match self.clock {
            Clock::Real(epoch) => {
                Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
            }
            Clock::Manual => st.manual_now,
        }
    }

    /// Announces that an application call changed something: MANUAL runs the stack now, REAL
    /// wakes the driver. Either way, waiters are woken to re-check.
    pub(crate) fn changed(&self, st: &mut State) {
        match self.clock {
            Clock::Manual => self.settle(st),
            Clock::Real(_) => st.kick = true,
        }
        self.cond.notify_all();
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
        self.cond.notify_all();
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
            Clock::Manual => self.cond.wait(g).unwrap_or_else(|p| p.into_inner()),
            Clock::Real(_) => {
                let left =
                    deadline.map_or(MAX_SLEEP, |d| StdDuration::from(d - now).min(MAX_SLEEP));
                self.cond
                    .wait_timeout(g, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
        let now = self.now(&g);
        let timed_out = deadline.is_some_and(|d| now >= d);
        (g, timed_out)
    }

    /// Stops the driver and wakes every waiter (they return EBADF).
    pub(crate) fn stop(&self) {
        let mut g = self.lock();
        g.stop = true;
        self.cond.notify_all();
    }

    /// Sets the manual clock and runs everything that became due.
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
    std::thread::Builder::new()
        .name("netfold-ffi-driver".into())
        .spawn(move || drive(&engine))
}

fn drive(e: &Engine) {
    let mut g = e.lock();
    while !g.stop {
        let now = e.now(&g);
        let st = &mut *g;
        let worked = st.stack.poll(now, &mut st.dev);
        g.kick = false;
        if worked {
            e.cond.notify_all();
            // Let application threads in before polling again.
            drop(g);
            std::thread::yield_now();
            g = e.lock();
            continue;
        }
        let mut wait = if g.dev.has_inner() {
            DEVICE_IDLE_WAIT
        } else {
            MAX_SLEEP
        };
        if let Some(at) = g.stack.poll_at(now) {
            wait = wait.min((at - now).into());
        }
        if wait.is_zero() || g.dev.has_inbound() {
            continue;
        }
        g = e
            .cond
            .wait_timeout_while(g, wait, |s| !s.kick && !s.stop)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}
