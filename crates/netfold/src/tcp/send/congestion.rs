//! Congestion control: the controller (`cc/`) and whether the last window was used
//! (`cc::usage`). The sender asks both; loss recovery and the timers report events here.

use super::Sender;
use crate::tcp::cc::{Cc, CongestionController, RttSample};
use crate::tcp::CongestionControl;
use crate::time::{Duration, Instant};

impl Sender {
    /// The congestion controller `kind`, its initial window sized for `mss`.
    pub fn with_cc(mut self, kind: CongestionControl, mss: u32) -> Self {
        self.cc = Cc::new(kind, mss);
        self
    }

    /// The congestion controller (cwnd, ssthresh).
    #[inline]
    pub fn cc(&self) -> &Cc {
        &self.cc
    }

    /// Was the window actually used? (Linux `tcp_is_cwnd_limited`, kept by `cc::usage` at
    /// the end of each transmit round; RFC 7661's concern, and RFC 9438 §5.8: an
    /// application-limited sender must not grow cwnd it does not use.)
    #[inline]
    pub fn cwnd_limited(&self) -> bool {
        self.cwnd_use
            .cwnd_limited(self.cc.cwnd(), self.cc.ssthresh())
    }

    /// The handshake set the MSS: the controller starts again with the initial window for
    /// it (RFC 6928).
    pub fn on_mss_known(&mut self, kind: CongestionControl) {
        self.cc = Cc::new(kind, self.mss);
    }

    /// TCP_CONGESTION on a live connection (Linux `tcp_reinit_congestion_control`): the new
    /// algorithm starts from its own initial state; cwnd and ssthresh stay.
    pub fn on_cc_changed(&mut self, kind: CongestionControl) {
        let (cwnd, ssthresh) = (self.cc.cwnd(), self.cc.ssthresh());
        self.cc = Cc::new(kind, self.mss);
        self.cc.undo(cwnd, ssthresh);
    }

    /// A transmit round ended with `in_flight` counting against cwnd; `sent` whether it sent
    /// data (`CwndUsage::on_transmit`).
    #[inline]
    pub fn on_round_end(&mut self, in_flight: u32, sent: bool) {
        self.cwnd_use.on_transmit(
            self.una,
            self.max,
            in_flight,
            self.cc.cwnd(),
            self.mss,
            sent,
        );
    }

    /// The congestion controller's view of an ACK's round trip (Linux `pkts_acked`, before
    /// `cong_avoid`).
    #[inline]
    pub fn on_cc_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        self.cc.on_rtt_sample(RttSample {
            now,
            rtt,
            una: self.una,
            nxt: self.max,
            mss: self.mss,
            srtt: self.rtt.srtt(),
        });
    }

    /// `acked` bytes were newly acknowledged while the window was used: the controller
    /// grows cwnd (Linux `tcp_cong_avoid`).
    #[inline]
    pub fn on_cwnd_ack(&mut self, now: Instant, acked: u32) {
        self.cc.on_ack(now, acked, self.mss, self.rtt.srtt());
    }

    /// A congestion signal (fast retransmit, ECE) with `flight` bytes out: the controller's
    /// multiplicative decrease.
    #[inline]
    pub fn on_congestion(&mut self, now: Instant, flight: u32, mss: u32) {
        self.cc.on_loss(now, flight, mss);
    }

    /// The first retransmission timeout of an episode with `flight` bytes out: the
    /// controller's loss window (RFC 5681 §3.1).
    pub fn on_rto_cwnd(&mut self, now: Instant, flight: u32) {
        self.cc.on_rto(now, flight, self.mss);
    }

    /// Loss recovery, the timers or an idle restart put cwnd at `cwnd` (RFC 5681, 6582,
    /// 6675, 6937, 7661: each caller cites its rule).
    #[inline]
    pub fn set_cwnd(&mut self, cwnd: u32) {
        self.cc.set_cwnd(cwnd);
    }
}
