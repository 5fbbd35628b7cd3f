//! The harness clock: wall time, plus a fast-forward used only when both stacks are idle and
//! waiting on a timer (e.g. an RTO after an induced loss). Skipping dead time keeps impaired runs
//! short; the skipped amount is reported, and throughput is always computed from wall time.

use netfold::time::Instant;

pub struct Clock {
    start: std::time::Instant,
    skipped_us: u64,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start: std::time::Instant::now(),
            skipped_us: 0,
        }
    }

    pub fn now(&self) -> Instant {
        let wall = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        Instant::from_micros(wall.saturating_add(self.skipped_us))
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
