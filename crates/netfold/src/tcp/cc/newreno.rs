//! RFC 5681 slow start and congestion avoidance (the window side of RFC 6582 NewReno).

use super::{initial_window, CongestionController};

use crate::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct NewReno {
    cwnd: u32,
    ssthresh: u32,
    /// Bytes acknowledged since cwnd last grew in congestion avoidance (RFC 5681 §3.1,
    /// the byte-counting form of eq. 3).
    bytes_acked: u32,
}

impl NewReno {
    pub fn new(mss: u32) -> Self {
        NewReno {
            cwnd: initial_window(mss),
            // RFC 5681 §3.1: initial ssthresh arbitrarily high.
            ssthresh: u32::MAX,
            bytes_acked: 0,
        }
    }
}

impl CongestionController for NewReno {
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
    fn on_ack(&mut self, _now: Instant, acked: u32, mss: u32, _srtt: Option<Duration>) {
        if self.cwnd < self.ssthresh {
            // Slow start (RFC 5681 §3.1; see `slow_start` for the byte counting).
            self.cwnd = super::slow_start(self.cwnd, self.ssthresh, acked);
        } else {
            // Congestion avoidance: +1 SMSS per cwnd of acknowledged bytes.
            self.bytes_acked = self.bytes_acked.saturating_add(acked);
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
    }
    fn on_loss(&mut self, _now: Instant, flight: u32, mss: u32) {
        // RFC 5681 §3.1 eq. 4: ssthresh = max(FlightSize / 2, 2*SMSS).
        self.ssthresh = (flight / 2).max(2 * mss);
        self.cwnd = self.ssthresh;
        self.bytes_acked = 0;
    }
    fn undo(&mut self, cwnd: u32, ssthresh: u32) {
        self.cwnd = cwnd;
        self.ssthresh = ssthresh;
        self.bytes_acked = 0;
    }
    fn on_rto(&mut self, _now: Instant, flight: u32, mss: u32) {
        self.ssthresh = (flight / 2).max(2 * mss);
        // Loss window LW = 1 SMSS.
        self.cwnd = mss;
        self.bytes_acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_then_avoidance_then_halving() {
        let mss = 1000;
        let now = Instant::ZERO;
        let mut c = NewReno::new(mss);
        assert_eq!(c.cwnd(), 10_000);
        // slow start: every acknowledged byte grows cwnd (stretch ACKs count fully).
        c.on_ack(now, 1000, mss, None);
        assert_eq!(c.cwnd(), 11_000);
        c.on_ack(now, 1000, mss, None);
        assert_eq!(c.cwnd(), 12_000);
        c.on_loss(now, 20_000, mss);
        assert_eq!((c.cwnd(), c.ssthresh()), (10_000, 10_000));
        // avoidance: one MSS per cwnd acknowledged.
        for _ in 0..9 {
            c.on_ack(now, 1000, mss, None);
        }
        assert_eq!(c.cwnd(), 10_000);
        c.on_ack(now, 1000, mss, None);
        assert_eq!(c.cwnd(), 11_000);
        c.on_rto(now, 3000, mss);
        assert_eq!((c.cwnd(), c.ssthresh()), (1000, 2000));
    }
}
