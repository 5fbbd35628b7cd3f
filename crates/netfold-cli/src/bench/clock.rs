//! The harness clock: wall time, plus a fast-forward used only when both stacks are idle and
//! waiting on a timer (e.g. an RTO after an induced loss). Skipping dead time keeps impaired runs
//! short; the skipped amount is reported, and throughput is always computed from wall time.
//!
//! Wall time is `netfold_os::clock` (the TSC where the kernel trusts it, else
//! CLOCK_MONOTONIC), the clock the blocking runtime, the tokio adapter and the C API give their
//! stacks too. The harness reads it once per poll of both stacks; the measurement loops take
//! the time of the last poll ([`Clock::last_ns`]) rather than read it again.

use netfold::time::Instant;
use netfold_os::clock::Epoch;
use std::cell::Cell;

pub struct Clock {
    start: Epoch,
    skipped_us: u64,
    /// Pure virtual time: wall time does not count, only the fast-forwards.
    virtual_only: bool,
    /// Wall nanoseconds since `start` at the last read.
    last_wall_ns: Cell<u64>,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start: Epoch::now(),
            skipped_us: 0,
            virtual_only: false,
            last_wall_ns: Cell::new(0),
        }
    }

    /// A clock that moves ONLY by `skip_to`: used when the link models a path (`--delay`,
    /// `--rate`). There the run is mostly waiting for frames on the modelled wire, and with
    /// wall time counted, every moment the process is descheduled or slower than the model
    /// (2 cores shared by two stacks and other work) would be added to protocol time and
    /// stretch the path's RTT: the 20 ms, 1 Gbit/s run measured 518 Mbit/s over 4.1 s of
    /// "protocol time" of which 2.0 s were wall time. In virtual time processing is free and
    /// the result is the protocol's on the modelled path, the same on every machine; the CPU
    /// time is reported apart.
    pub fn virtual_time() -> Self {
        Clock {
            virtual_only: true,
            ..Clock::new()
        }
    }

    /// Protocol time now, in nanoseconds: wall time (unless virtual) plus the skipped time.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        let wall = if self.virtual_only {
            0
        } else {
            let w = self.start.elapsed_ns();
            self.last_wall_ns.set(w);
            w
        };
        wall.saturating_add(self.skipped_us.saturating_mul(1_000))
    }

    /// Protocol time at the last read ([`Clock::now`] or [`Clock::now_ns`]), plus anything
    /// skipped since: no clock read.
    #[inline]
    pub fn last_ns(&self) -> u64 {
        let wall = if self.virtual_only {
            0
        } else {
            self.last_wall_ns.get()
        };
        wall.saturating_add(self.skipped_us.saturating_mul(1_000))
    }

    /// Protocol time now, as the stacks' clock.
    #[inline]
    pub fn now(&self) -> Instant {
        Instant::from_micros(self.now_ns() / 1_000)
    }

    /// Jumps forward to `t` if it lies in the future.
    pub fn skip_to(&mut self, t: Instant) {
        let now = self.now();
        if t > now {
            self.skipped_us += (t - now).total_micros();
        }
    }

    /// Seconds of idle time skipped so far.
    pub fn skipped_s(&self) -> f64 {
        self.skipped_us as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_is_the_last_read_plus_skips() {
        let mut c = Clock::new();
        let a = c.now_ns();
        assert_eq!(c.last_ns(), a);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(c.last_ns(), a);
        let b = c.now_ns();
        assert!(b >= a + 2_000_000);
        let t = c.now() + netfold::time::Duration::from_secs(5);
        c.skip_to(t);
        assert!(c.last_ns() >= t.total_micros() * 1_000 && t.total_micros() * 1_000 >= b);
        assert!(c.now() >= t);
        let mut v = Clock::virtual_time();
        assert_eq!(v.now_ns(), 0);
        v.skip_to(Instant::from_micros(7));
        assert_eq!((v.now_ns(), v.last_ns()), (7_000, 7_000));
    }
}
