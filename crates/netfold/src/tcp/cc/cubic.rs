//! CUBIC congestion control, RFC 9438.

use super::hystart::HyStart;
use super::{initial_window, CongestionController, RttSample};

use crate::time::{Duration, Instant};

/// RFC 9438 §5: C = 0.4, beta_cubic = 0.7.
pub const C: f64 = 0.4;
pub const BETA: f64 = 0.7;

#[derive(Debug, Clone)]
pub struct Cubic {
    cwnd: u32,
    ssthresh: u32,
    /// W_max in segments (§4.1), before fast convergence adjustment.
    w_max: f64,
    /// The previous W_max, for fast convergence (§4.7).
    w_last_max: f64,
    /// K in seconds (§4.2, eq. 2).
    k: f64,
    /// Start of the current congestion-avoidance epoch.
    epoch: Option<Instant>,
    /// Reno-friendly estimate W_est in segments (§4.3).
    w_est: f64,
    /// cwnd at the last ssthresh reduction, in segments (cwnd_prior, §4.3).
    cwnd_prior: f64,
    /// Fractional cwnd growth carried between ACKs (segments).
    frac: f64,
    /// Linux's hybrid slow start (`hystart.rs`).
    hystart: HyStart,
}

impl Cubic {
    pub fn new(mss: u32) -> Self {
        Cubic {
            cwnd: initial_window(mss),
            ssthresh: u32::MAX,
            w_max: 0.0,
            w_last_max: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
            cwnd_prior: 0.0,
            frac: 0.0,
            hystart: HyStart::new(),
        }
    }

    /// RFC 9438 eq. 1: W_cubic(t) = C*(t - K)^3 + W_max, in segments, t in seconds.
    pub fn w_cubic(&self, t: f64) -> f64 {
        C * (t - self.k).powi(3) + self.w_max
    }

    pub fn k(&self) -> f64 {
        self.k
    }
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    fn reduce(&mut self, now: Instant, flight: u32, mss: u32) {
        let m = f64::from(mss.max(1));
        let cwnd_seg = f64::from(self.cwnd) / m;
        // §4.7 fast convergence: if W_max shrank since the last event, release bandwidth.
        if cwnd_seg < self.w_last_max {
            self.w_last_max = cwnd_seg;
            self.w_max = cwnd_seg * (1.0 + BETA) / 2.0;
        } else {
            self.w_last_max = cwnd_seg;
            self.w_max = cwnd_seg;
        }
        self.cwnd_prior = cwnd_seg;
        // §4.6: ssthresh = flight_size * beta_cubic (never below 2 segments).
        let ss = (f64::from(flight) * BETA) as u32;
        self.ssthresh = ss.max(2 * mss);
        self.epoch = None;
        let _ = now;
    }
}

impl CongestionController for Cubic {
    #[inline]
    fn cwnd(&self) -> u32 {
        self.cwnd
    }
    #[inline]
    fn ssthresh(&self) -> u32 {
        self.ssthresh
    }
    fn set_cwnd(&mut self, cwnd: u32) {
        self.cwnd = cwnd;
    }
    fn on_ack(&mut self, now: Instant, acked: u32, mss: u32, srtt: Option<Duration>) {
        if self.cwnd < self.ssthresh {
            // Slow start as in RFC 5681, ended early by HyStart (`on_rtt_sample`).
            self.cwnd = super::slow_start(self.cwnd, self.ssthresh, acked);
            return;
        }
        let m = f64::from(mss.max(1));
        let cwnd_seg = f64::from(self.cwnd) / m;
        let epoch = match self.epoch {
            Some(e) => e,
            None => {
                // §4.2: a new epoch starts; K from eq. 2 with cwnd_epoch = cwnd.
                self.epoch = Some(now);
                if self.w_max <= cwnd_seg {
                    self.w_max = cwnd_seg;
                    self.k = 0.0;
                } else {
                    self.k = ((self.w_max - cwnd_seg) / C).cbrt();
                }
                self.w_est = cwnd_seg;
                now
            }
        };
        let t = (now - epoch).total_micros() as f64 / 1e6;
        let rtt = srtt.map_or(0.1, |d| d.total_micros() as f64 / 1e6);
        let segs_acked = f64::from(acked) / m;
        // §4.3 Reno-friendly region: alpha_cubic = 3(1-beta)/(1+beta) until W_est reaches
        // cwnd_prior, then 1.
        let alpha = if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            3.0 * (1.0 - BETA) / (1.0 + BETA)
        };
        self.w_est += alpha * segs_acked / cwnd_seg;
        let w_cubic_now = self.w_cubic(t);
        let new_seg = if w_cubic_now < self.w_est {
            // Reno-friendly region: cwnd = W_est.
            self.w_est
        } else {
            // §4.4/§4.5: target = W_cubic(t + RTT) clamped to [cwnd, 1.5 cwnd];
            // cwnd grows by (target - cwnd)/cwnd per acknowledged segment.
            let target = self.w_cubic(t + rtt).clamp(cwnd_seg, 1.5 * cwnd_seg);
            cwnd_seg + (target - cwnd_seg) / cwnd_seg * segs_acked
        };
        let grow = (new_seg - cwnd_seg).max(0.0) + self.frac;
        let whole = grow.floor();
        self.frac = grow - whole;
        let add = (whole * m) as u32;
        // Growth in bytes is added whole-segment-free: fractional segments accumulate.
        self.cwnd = self.cwnd.saturating_add(add);
    }
    fn on_loss(&mut self, now: Instant, flight: u32, mss: u32) {
        self.reduce(now, flight, mss);
        self.cwnd = self.ssthresh;
        self.frac = 0.0;
    }
    fn undo(&mut self, cwnd: u32, ssthresh: u32) {
        // The reduction is taken back; the cubic epoch restarts from the restored window
        // (W_max stays: it only shapes the growth curve).
        self.cwnd = cwnd;
        self.ssthresh = ssthresh;
        self.epoch = None;
        self.frac = 0.0;
    }
    #[inline]
    fn on_rtt_sample(&mut self, s: RttSample) {
        // Linux `cubictcp_acked`: "Discard delay samples right after fast recovery" (within
        // a second of the avoidance epoch's start).
        if self
            .epoch
            .is_some_and(|e| s.now.saturating_since(e) < Duration::from_secs(1))
        {
            return;
        }
        if self
            .hystart
            .on_rtt_sample(&s, self.cwnd, self.cwnd < self.ssthresh)
        {
            self.ssthresh = self.cwnd;
        }
    }
    fn on_rto(&mut self, now: Instant, flight: u32, mss: u32) {
        self.hystart.restart();
        self.reduce(now, flight, mss);
        // §4.8: cwnd = 1 segment after a timeout; the epoch restarts when avoidance resumes.
        self.cwnd = mss;
        self.frac = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_function_matches_rfc9438() {
        let mss = 1000;
        let mut c = Cubic::new(mss);
        c.set_cwnd(100_000); // 100 segments
        let t0 = Instant::ZERO;
        c.on_loss(t0, 100_000, mss);
        assert_eq!(c.cwnd(), 70_000);
        assert_eq!(c.ssthresh(), 70_000);
        // First ACK in avoidance starts the epoch: K = cbrt((W_max - cwnd)/C)
        c.on_ack(t0, 1000, mss, Some(Duration::from_millis(100)));
        let k = ((100.0 - 70.0) / C).cbrt();
        assert!((c.k() - k).abs() < 1e-9);
        assert!((c.w_cubic(k) - 100.0).abs() < 1e-9, "W_cubic(K) = W_max");
        assert!(
            (c.w_cubic(0.0) - 70.0).abs() < 1e-9,
            "W_cubic(0) = cwnd_epoch"
        );
        let t = 2.0;
        assert!((c.w_cubic(t) - (C * (t - k).powi(3) + 100.0)).abs() < 1e-9);
        // Concave growth: approaching W_max the window grows, but stays near W_max at K.
        let mut now = t0;
        for _ in 0..(k * 10.0) as u32 {
            now += Duration::from_millis(100);
            for _ in 0..(c.cwnd() / mss) {
                c.on_ack(now, mss, mss, Some(Duration::from_millis(100)));
            }
        }
        let w = f64::from(c.cwnd()) / 1000.0;
        assert!(w > 90.0 && w < 110.0, "cwnd near W_max at t=K, got {w}");
    }

    #[test]
    fn fast_convergence_and_timeout() {
        let mss = 1000;
        let mut c = Cubic::new(mss);
        c.set_cwnd(100_000);
        c.on_loss(Instant::ZERO, 100_000, mss);
        assert!((c.w_max() - 100.0).abs() < 1e-9);
        // Second loss below the previous W_max: W_max = cwnd * (1 + beta) / 2.
        c.on_loss(Instant::ZERO, 70_000, mss);
        assert!((c.w_max() - 70.0 * 1.7 / 2.0).abs() < 1e-9);
        c.on_rto(Instant::ZERO, 40_000, mss);
        assert_eq!(c.cwnd(), mss);
        assert_eq!(c.ssthresh(), 28_000);
    }

    #[test]
    fn reno_friendly_region_when_cubic_is_slower() {
        // Small W_max, long RTT: W_est dominates early in the epoch.
        let mss = 1000;
        let mut c = Cubic::new(mss);
        c.set_cwnd(10_000);
        c.on_loss(Instant::ZERO, 10_000, mss);
        let start = c.cwnd();
        let mut now = Instant::ZERO;
        for _ in 0..20 {
            now += Duration::from_millis(1);
            c.on_ack(now, mss, mss, Some(Duration::from_millis(1)));
        }
        assert!(c.cwnd() >= start, "never shrinks on ACK");
    }
}
