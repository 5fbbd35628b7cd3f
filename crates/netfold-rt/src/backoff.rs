//! Adaptive polling: what a thread that drives a stack does after a poll that found no work.
//!
//! Busy polling is the fastest way to notice a frame when the poller has a core to itself, and
//! the worst when it does not: two busy-polling threads on one core each burn a whole
//! scheduler time slice before the other runs, so every exchange between them waits
//! milliseconds (measured: 173 Mbit/s where two cores give 62 Gbit/s). Linux answers with a
//! budget: NAPI polls a device while it has work and re-enables its interrupt when it has none,
//! and socket busy polling (`net.core.busy_poll`) spins for a bounded time, giving way whenever
//! another task needs the CPU, before sleeping. [`Backoff`] is that policy, on the caller's
//! clock (sans-IO: it decides, the caller spins, yields or sleeps):
//!
//! 1. while polls find work: poll again ([`Backoff::worked`]);
//! 2. the first [`BackoffConfig::spin_polls`] empty polls: spin (a CPU pause hint, no syscall);
//! 3. then, until [`BackoffConfig::busy_poll`] has passed since the first empty poll: yield
//!    the CPU between polls (`sched_yield`: it returns at once when nothing else wants this
//!    core, and runs the other thread when something does — the user-space form of the
//!    kernel's `need_resched()` check in its busy-poll loop);
//! 4. then sleep until the device or a deadline wakes the thread ([`Step::Sleep`]).
//!
//! A yield that did not come back for a long time ([`YIELD_STOLEN`]) means the core went to a
//! task that keeps it for a whole scheduler slice (a CPU hog, another program's busy thread),
//! not to a peer that polls briefly and yields back. Yielding into such a task costs a slice
//! per exchange: under Linux's EEVDF scheduler `sched_yield` moves the caller's deadline one
//! slice later, so it runs again only when the hog's slice ends, and a request/response
//! exchange that needs four such hand-overs per transaction fell from ~300k to 150-1,100
//! transactions/s at 0.2% CPU with one `yes` per core (measured, 2-vCPU AMD EPYC, Linux
//! 6.18), where sleeping at once kept 148k (threads on one core) and 19k (on two); the
//! kernel's own TCP_RR managed 10-44k. So after a stolen yield the thread stops yielding for
//! a hold and sleeps at once after an empty poll: a sleeper that is woken is placed ahead of a
//! hog (it has not used its share), which a yielder is not. The hold starts at
//! [`HOLD_MIN`] and doubles, up to [`HOLD_MAX`], each time a yield after it is stolen again;
//! [`QUICK_TO_FORGET`] yields in a row that come back quickly reset it. (One quick yield is
//! not enough: with a hog and a peer thread on one core, yields alternate between the two.) A fixed long hold was measured worse
//! under intermittent load (other programs' compilers): one stolen yield put a two-core
//! request/response pair into cross-core sleeps and wake-ups for the whole hold, 102k -> 18k
//! transactions/s, where yielding had kept 102k.

use netfold::time::{Duration, Instant};
use std::time::{Duration as StdDuration, Instant as WallInstant};

/// A `sched_yield` that took longer than this gave the core to a task that keeps it for a
/// slice (Linux's smallest base slice is 0.75 ms; a peer netfold thread polls for a few
/// microseconds and yields back).
pub const YIELD_STOLEN: StdDuration = StdDuration::from_micros(250);

/// The first hold without yields after a stolen one.
pub const HOLD_MIN: StdDuration = StdDuration::from_millis(1);

/// The longest hold: with a hog on the core for good, one yield in this long costs a slice
/// (a few percent of the time), and a core that is freed is noticed this soon.
pub const HOLD_MAX: StdDuration = StdDuration::from_millis(64);

/// Yields in a row that come back within [`YIELD_STOLEN`] after which the hold starts again
/// from [`HOLD_MIN`].
pub const QUICK_TO_FORGET: u32 = 16;

/// The budgets of a [`Backoff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// Empty polls spent spinning before the first yield.
    pub spin_polls: u32,
    /// How long after the first empty poll the thread keeps polling (spinning, then yielding)
    /// before it sleeps.
    pub busy_poll: Duration,
}

impl BackoffConfig {
    /// Linux's recommended socket busy-poll time: "Recommended value is 50"
    /// microseconds (Documentation/networking/ip-sysctl.rst, `busy_poll`).
    pub const LINUX_BUSY_POLL: Duration = Duration::from_micros(50);
}

impl Default for BackoffConfig {
    /// The busy-poll time Linux recommends; no pure spinning, because a spin that does not
    /// yield starves a peer thread sharing the core, and `sched_yield` costs well under a
    /// microsecond when it has nothing to hand the core to.
    fn default() -> Self {
        BackoffConfig {
            spin_polls: 0,
            busy_poll: BackoffConfig::LINUX_BUSY_POLL,
        }
    }
}

/// What to do before the next poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Poll again at once, with a CPU pause hint.
    Spin,
    /// Yield the CPU, then poll again.
    Yield,
    /// Sleep until woken (device, waker, deadline).
    Sleep,
}

/// The state of one polling thread's back-off (see the module documentation).
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    /// When the current run of empty polls began.
    idle_since: Option<Instant>,
    /// Empty polls in the current run.
    empty: u32,
}

/// A thread's record of stolen yields (see the module documentation). Per thread, not per
/// [`Backoff`]: it describes the thread's core, and the blocking API makes a fresh `Backoff`
/// for every wait.
#[derive(Debug, Clone, Copy, Default)]
struct Contention {
    /// Yields are skipped until then.
    until: Option<WallInstant>,
    /// The last hold (zero once [`QUICK_TO_FORGET`] quick yields came in a row).
    hold: StdDuration,
    /// Quick yields since the last stolen one.
    quick: u32,
}

thread_local! {
    static CONTENTION: std::cell::Cell<Contention> =
        const { std::cell::Cell::new(Contention { until: None, hold: StdDuration::ZERO, quick: 0 }) };
}

impl Backoff {
    pub fn new(config: BackoffConfig) -> Backoff {
        Backoff {
            config,
            idle_since: None,
            empty: 0,
        }
    }

    pub fn config(&self) -> BackoffConfig {
        self.config
    }

    /// A poll found work (or the thread just woke up): the next empty poll starts a new run.
    pub fn worked(&mut self) {
        self.idle_since = None;
        self.empty = 0;
    }

    /// A poll at `now` found no work: what to do before the next one.
    pub fn idle(&mut self, now: Instant) -> Step {
        let since = *self.idle_since.get_or_insert(now);
        self.empty = self.empty.saturating_add(1);
        if self.empty <= self.config.spin_polls {
            Step::Spin
        } else if now.saturating_since(since) < self.config.busy_poll && !self.contended() {
            Step::Yield
        } else {
            Step::Sleep
        }
    }

    /// Whether the calling thread skips yields because one was stolen (see the module
    /// documentation).
    pub fn contended(&self) -> bool {
        CONTENTION.with(|c| c.get().until.is_some_and(|u| WallInstant::now() < u))
    }

    /// A yield of the calling thread took `took` and returned at `at`. One longer than
    /// [`YIELD_STOLEN`] starts a hold without yields, twice the last one (at least
    /// [`HOLD_MIN`], at most [`HOLD_MAX`]); [`QUICK_TO_FORGET`] short ones in a row forget it.
    pub fn yielded(&self, took: StdDuration, at: WallInstant) {
        CONTENTION.with(|c| {
            let mut s = c.get();
            if took > YIELD_STOLEN {
                s.hold = (s.hold * 2).clamp(HOLD_MIN, HOLD_MAX);
                s.until = Some(at + s.hold);
                s.quick = 0;
            } else {
                s.quick += 1;
                if s.quick >= QUICK_TO_FORGET {
                    s = Contention::default();
                }
            }
            c.set(s);
        });
    }

    /// Does `step` on the calling thread, unless it is [`Step::Sleep`] (which needs the
    /// caller's device and deadlines). Returns whether it did. A yield is timed (two vDSO
    /// clock reads beside a system call) to notice a core taken by a hog.
    pub fn pause(&self, step: Step) -> bool {
        match step {
            Step::Spin => {
                std::hint::spin_loop();
                true
            }
            Step::Yield => {
                let t0 = WallInstant::now();
                std::thread::yield_now();
                let t1 = WallInstant::now();
                self.yielded(t1.saturating_duration_since(t0), t1);
                true
            }
            Step::Sleep => false,
        }
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(BackoffConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_then_yields_then_sleeps_and_work_resets() {
        let mut b = Backoff::new(BackoffConfig {
            spin_polls: 2,
            busy_poll: Duration::from_micros(50),
        });
        let t = Instant::from_micros(1_000);
        assert_eq!(b.idle(t), Step::Spin);
        assert_eq!(b.idle(t + Duration::from_micros(1)), Step::Spin);
        assert_eq!(b.idle(t + Duration::from_micros(2)), Step::Yield);
        assert_eq!(b.idle(t + Duration::from_micros(49)), Step::Yield);
        assert_eq!(b.idle(t + Duration::from_micros(50)), Step::Sleep);
        assert_eq!(b.idle(t + Duration::from_micros(60)), Step::Sleep);
        // Work (or a wake-up) starts the budget over, from the next empty poll's time.
        b.worked();
        let t2 = t + Duration::from_millis(5);
        assert_eq!(b.idle(t2), Step::Spin);
        assert_eq!(b.idle(t2), Step::Spin);
        assert_eq!(b.idle(t2 + Duration::from_micros(49)), Step::Yield);
        assert_eq!(b.idle(t2 + Duration::from_micros(50)), Step::Sleep);
    }

    #[test]
    fn a_zero_budget_sleeps_at_the_first_empty_poll() {
        let mut b = Backoff::new(BackoffConfig {
            spin_polls: 0,
            busy_poll: Duration::ZERO,
        });
        assert_eq!(b.idle(Instant::ZERO), Step::Sleep);
        assert!(!b.pause(Step::Sleep));
        assert!(b.pause(Step::Yield));
        assert!(b.pause(Step::Spin));
    }

    #[test]
    fn a_stolen_yield_skips_yields_for_a_hold_that_doubles_while_yields_are_stolen() {
        let mut b = Backoff::default();
        let t = Instant::from_micros(1_000);
        assert_eq!(b.idle(t), Step::Yield);
        // A short yield (a peer thread polled and yielded back) changes nothing.
        b.yielded(StdDuration::from_micros(20), WallInstant::now());
        assert_eq!(b.idle(t + Duration::from_micros(1)), Step::Yield);
        // A yield that lasted a scheduler slice: sleep at once, in this run and the next.
        let now = WallInstant::now();
        b.yielded(StdDuration::from_millis(3), now);
        assert_eq!(CONTENTION.with(|c| c.get().hold), HOLD_MIN);
        assert_eq!(b.idle(t + Duration::from_micros(2)), Step::Sleep);
        b.worked();
        assert_eq!(b.idle(t + Duration::from_micros(3)), Step::Sleep);
        assert!(b.contended());
        // Stolen again after the hold: twice as long, up to the cap.
        b.yielded(StdDuration::from_millis(3), now);
        assert_eq!(CONTENTION.with(|c| c.get().hold), HOLD_MIN * 2);
        for _ in 0..20 {
            b.yielded(StdDuration::from_millis(3), now);
        }
        assert_eq!(CONTENTION.with(|c| c.get().hold), HOLD_MAX);
        // A hold that ended lets yields back; quick yields in a row forget the escalation,
        // a stolen one among them does not.
        b.yielded(StdDuration::from_millis(3), now - HOLD_MAX);
        b.worked();
        assert!(!b.contended());
        assert_eq!(b.idle(t + Duration::from_micros(4)), Step::Yield);
        for _ in 1..QUICK_TO_FORGET {
            b.yielded(StdDuration::from_micros(5), WallInstant::now());
        }
        assert_eq!(CONTENTION.with(|c| c.get().hold), HOLD_MAX);
        b.yielded(StdDuration::from_micros(5), WallInstant::now());
        assert_eq!(CONTENTION.with(|c| c.get().hold), StdDuration::ZERO);
        assert!(!b.contended());
    }

    #[test]
    fn spin_polls_still_spin_while_contended() {
        let mut b = Backoff::new(BackoffConfig {
            spin_polls: 1,
            busy_poll: Duration::from_micros(50),
        });
        b.yielded(StdDuration::from_millis(3), WallInstant::now());
        let t = Instant::from_micros(1_000);
        assert_eq!(b.idle(t), Step::Spin);
        assert_eq!(b.idle(t), Step::Sleep);
    }
}
