//! The harness clock: wall time, plus a fast-forward used only when both stacks are idle and
//! waiting on a timer (e.g. an RTO after an induced loss). Skipping dead time keeps impaired runs
//! short; the skipped amount is reported, and throughput is always computed from wall time.

use netfold::time::Instant;

pub struct Clock {
    start: std::time::Instant,
    skipped_us: u64,
    /// Pure virtual time: wall time does not count, only the fast-forwards.
    virtual_only: bool,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start: std::time::Instant::now(),
            skipped_us: 0,
            virtual_only: false,
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

    pub fn now(&self) -> Instant {
        let wall = if self.virtual_only {
            0
        } else {
            u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
        };
        Instant::from_micros(wall.saturating_add(self.skipped_us))
    }

    /// The clock ignores wall time (see [`Clock::virtual_time`]).
    pub fn is_virtual(&self) -> bool {
        self.virtual_only
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
