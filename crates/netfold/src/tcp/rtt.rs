//! Retransmission timeout computation, RFC 6298.

use crate::time::Duration;

/// RFC 6298 §2.4: the RTO is capped; 60 s is the RFC's suggested upper bound.
pub const RTO_MAX: Duration = Duration::from_secs(60);
/// Clock granularity G of RFC 6298 §2 (timestamps tick in milliseconds).
const G_MICROS: u64 = 1000;

/// SRTT/RTTVAR estimator with exponential backoff.
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    srtt: u64,
    rttvar: u64,
    has_sample: bool,
    rto: u64,
    rto_min: u64,
    /// Number of consecutive backoffs (RFC 6298 §5.5).
    pub backoff: u32,
}

impl RttEstimator {
    pub fn new(rto_initial: Duration, rto_min: Duration) -> Self {
        RttEstimator {
            srtt: 0,
            rttvar: 0,
            has_sample: false,
            rto: rto_initial.total_micros().min(RTO_MAX.total_micros()),
            rto_min: rto_min.total_micros(),
            backoff: 0,
        }
    }

    pub fn set_rto_min(&mut self, rto_min: Duration) {
        self.rto_min = rto_min.total_micros();
    }

    /// RFC 6298 §2.2/§2.3: fold in one RTT measurement.
    pub fn sample(&mut self, r: Duration) {
        let r = r.total_micros();
        if !self.has_sample {
            // (2.2) SRTT <- R, RTTVAR <- R/2
            self.srtt = r;
            self.rttvar = r / 2;
            self.has_sample = true;
        } else {
            // (2.3) RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'|, then SRTT <- 7/8 SRTT + 1/8 R'
            let delta = self.srtt.abs_diff(r);
            self.rttvar = (3 * self.rttvar + delta) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        }
        // RTO <- SRTT + max(G, K*RTTVAR), K = 4; (2.5) capped. The lower bound of (2.4) is
        // put on the variance term, as Linux tcp_input.c `tcp_rtt_estimator()` /
        // `__tcp_set_rto()` do (`rttvar_us = max(mdev_max_us, tcp_rto_min_us)`, RTO = SRTT +
        // rttvar_us): RTO >= SRTT + RTO_min, so a short round trip still leaves the peer's
        // delayed ACK time before the timer fires (RFC 6298 leaves the minimum's form open:
        // "(2.4) ... SHOULD be rounded up to 1 second", which Linux and netfold lower).
        let rto = self.srtt + G_MICROS.max(4 * self.rttvar).max(self.rto_min);
        self.rto = rto.min(RTO_MAX.total_micros());
        // §5.7: a new sample after backoff resets the backoff.
        self.backoff = 0;
    }

    /// The current timeout including backoff (RFC 6298 §5.5: doubled per expiration).
    pub fn rto(&self) -> Duration {
        let shift = self.backoff.min(20);
        Duration::from_micros(self.rto.saturating_mul(1 << shift)).min(RTO_MAX)
    }

    /// The lower bound of the RTO (RFC 6298 (2.4); Linux `tcp_rto_min_us`).
    pub fn rto_min(&self) -> Duration {
        Duration::from_micros(self.rto_min)
    }

    /// Base RTO without backoff.
    pub fn base_rto(&self) -> Duration {
        Duration::from_micros(self.rto)
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.has_sample.then(|| Duration::from_micros(self.srtt))
    }

    pub fn rttvar(&self) -> Duration {
        Duration::from_micros(self.rttvar)
    }

    /// Sets the base RTO without a sample (RFC 6298 §5.7).
    pub fn set_base(&mut self, rto: Duration) {
        self.rto = rto.total_micros().min(RTO_MAX.total_micros());
    }

    /// §5.5: back the timer off after an expiration.
    pub fn on_timeout(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_formulas() {
        let mut e = RttEstimator::new(Duration::from_secs(1), Duration::from_millis(200));
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.sample(Duration::from_millis(100));
        assert_eq!(e.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(e.rttvar(), Duration::from_millis(50));
        // 100 + 4*50 = 300 ms
        assert_eq!(e.rto(), Duration::from_millis(300));
        e.sample(Duration::from_millis(200));
        // rttvar = 3/4*50 + 1/4*100 = 62.5; srtt = 7/8*100 + 1/8*200 = 112.5
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(112_500 + 250_000));
    }

    /// Linux `__tcp_set_rto()`: a 10 ms round trip gives SRTT + TCP_RTO_MIN = 210 ms (this
    /// machine's Linux reports tcpi_rto 212 ms for it, its HZ=250 jiffies rounding up).
    #[test]
    fn rto_floor_is_on_the_variance_term() {
        let mut e = RttEstimator::new(Duration::from_secs(1), Duration::from_millis(200));
        e.sample(Duration::from_millis(10));
        assert_eq!(e.rto(), Duration::from_millis(210));
        // A large variance is not floored: 100 + 4*50.
        let mut e = RttEstimator::new(Duration::from_secs(1), Duration::from_millis(200));
        e.sample(Duration::from_millis(100));
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn rto_min_and_backoff_cap() {
        let mut e = RttEstimator::new(Duration::from_secs(1), Duration::from_millis(200));
        e.sample(Duration::from_millis(1));
        // SRTT + RTO_min (Linux's floor on the variance term).
        assert_eq!(e.rto(), Duration::from_millis(201));
        e.on_timeout();
        assert_eq!(e.rto(), Duration::from_millis(402));
        e.on_timeout();
        assert_eq!(e.rto(), Duration::from_millis(804));
        for _ in 0..30 {
            e.on_timeout();
        }
        assert_eq!(e.rto(), RTO_MAX);
        e.sample(Duration::from_millis(1));
        assert_eq!(e.backoff, 0);
    }
}
