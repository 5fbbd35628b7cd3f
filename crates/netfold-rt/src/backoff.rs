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

use netfold::time::{Duration, Instant};

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
        } else if now.saturating_since(since) < self.config.busy_poll {
            Step::Yield
        } else {
            Step::Sleep
        }
    }

    /// Does `step` on the calling thread, unless it is [`Step::Sleep`] (which needs the
    /// caller's device and deadlines). Returns whether it did.
    pub fn pause(step: Step) -> bool {
        match step {
            Step::Spin => {
                std::hint::spin_loop();
                true
            }
            Step::Yield => {
                std::thread::yield_now();
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
        assert!(!Backoff::pause(Step::Sleep));
        assert!(Backoff::pause(Step::Yield));
        assert!(Backoff::pause(Step::Spin));
    }
}
