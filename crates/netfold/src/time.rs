//! Virtual time. The core never reads a clock: callers pass `now` in. An `Instant` is a count of
//! microseconds since an arbitrary epoch chosen by the caller (zero in tests).

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A point in time, in microseconds since the caller's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

/// A span of time with microsecond resolution.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    micros: u64,
}

impl Instant {
    pub const ZERO: Instant = Instant { micros: 0 };

    pub const fn from_micros(micros: u64) -> Self {
        Instant { micros }
    }
    pub const fn from_millis(millis: u64) -> Self {
        Instant {
            micros: millis.saturating_mul(1000),
        }
    }
    pub const fn from_secs(secs: u64) -> Self {
        Instant {
            micros: secs.saturating_mul(1_000_000),
        }
    }
    pub const fn total_micros(self) -> u64 {
        self.micros
    }
    pub const fn total_millis(self) -> u64 {
        self.micros / 1000
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later than `self`.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration {
            micros: self.micros.saturating_sub(earlier.micros),
        }
    }
}

impl Duration {
    pub const ZERO: Duration = Duration { micros: 0 };
    pub const MAX: Duration = Duration { micros: u64::MAX };

    pub const fn from_micros(micros: u64) -> Self {
        Duration { micros }
    }
    pub const fn from_millis(millis: u64) -> Self {
        Duration {
            micros: millis.saturating_mul(1000),
        }
    }
    pub const fn from_secs(secs: u64) -> Self {
        Duration {
            micros: secs.saturating_mul(1_000_000),
        }
    }
    pub const fn total_micros(self) -> u64 {
        self.micros
    }
    pub const fn total_millis(self) -> u64 {
        self.micros / 1000
    }
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration {
            micros: self.micros.saturating_mul(k),
        }
    }
    pub const fn checked_sub(self, rhs: Duration) -> Option<Duration> {
        match self.micros.checked_sub(rhs.micros) {
            Some(micros) => Some(Duration { micros }),
            None => None,
        }
    }
    pub fn min(self, other: Duration) -> Duration {
        if self <= other {
            self
        } else {
            other
        }
    }
    pub fn max(self, other: Duration) -> Duration {
        if self >= other {
            self
        } else {
            other
        }
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_add(rhs.micros),
        }
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_sub(rhs.micros),
        }
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: an `earlier` that is actually later gives zero.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration {
            micros: self.micros.saturating_add(rhs.micros),
        }
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        Duration {
            micros: self.micros.saturating_sub(rhs.micros),
        }
    }
}
impl From<core::time::Duration> for Duration {
    fn from(d: core::time::Duration) -> Self {
        Duration {
            micros: u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
        }
    }
}
impl From<Duration> for core::time::Duration {
    fn from(d: Duration) -> Self {
        core::time::Duration::from_micros(d.micros)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let t = Instant::from_millis(5);
        assert_eq!(t - Instant::from_millis(7), Duration::ZERO);
        assert_eq!(t + Duration::from_micros(1), Instant::from_micros(5001));
        assert_eq!(
            Instant::from_micros(u64::MAX) + Duration::from_secs(1),
            Instant::from_micros(u64::MAX)
        );
        assert_eq!(
            Duration::from_secs(1) - Duration::from_secs(2),
            Duration::ZERO
        );
    }
}
