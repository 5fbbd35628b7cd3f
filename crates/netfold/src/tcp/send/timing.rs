//! Round-trip timing: the RFC 6298 estimator and the one segment Karn's algorithm times when
//! timestamps are off.

use super::Sender;
use crate::tcp::rtt::RttEstimator;
use crate::time::{Duration, Instant};

impl Sender {
    /// The RTO estimator starting from `initial`, never going below `min` (RFC 6298 (2.1),
    /// (2.4)).
    pub fn with_rto(mut self, initial: Duration, min: Duration) -> Self {
        self.rtt = RttEstimator::new(initial, min);
        self
    }

    /// The SRTT/RTTVAR estimator and its backoff.
    #[inline]
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// The segment being timed (its end sequence number and when it left), if any.
    #[inline]
    pub fn rtt_timing(&self) -> Option<(u32, Instant)> {
        self.rtt_timing
    }

    /// TCP_RTO_MIN (or a route's rto_min) changed.
    pub fn set_rto_min(&mut self, min: Duration) {
        self.rtt.set_rto_min(min);
    }

    /// New data ending at `end` left at `now`: Karn's algorithm times it unless a segment is
    /// timed already (RFC 6298 §3).
    #[inline]
    pub fn on_timed_send(&mut self, end: u32, now: Instant) {
        if self.rtt_timing.is_none() {
            self.rtt_timing = Some((end, now));
        }
    }

    /// The SYN (or SYN-ACK) left at `now` for the first time: it is timed on its own.
    #[inline]
    pub fn on_syn_timed(&mut self, now: Instant) {
        self.rtt_timing = Some((self.iss.wrapping_add(1), now));
    }

    /// A retransmission or a probe left: Karn's algorithm takes no sample across it.
    #[inline]
    pub fn stop_rtt_timing(&mut self) {
        self.rtt_timing = None;
    }

    /// One round-trip measurement `r` (RFC 6298 §2.2/§2.3); the timed segment, if any, is
    /// done.
    #[inline]
    pub fn on_rtt_sample(&mut self, r: Duration) {
        self.rtt.sample(r);
        self.rtt_timing = None;
    }

    /// Our SYN was acknowledged. RFC 6298 §5.7: a SYN that timed out (`syn_timed_out`)
    /// without yielding an RTT sample leaves the RTO at `fallback` once data transfer
    /// begins; the backoff ends.
    pub fn on_syn_acked(&mut self, syn_timed_out: bool, fallback: Duration) {
        if syn_timed_out && self.rtt.srtt().is_none() {
            self.rtt.set_base(fallback);
        }
        self.rtt.backoff = 0;
    }

    /// An ACK acknowledged new data: the RTO backoff ends (RFC 6298 §5.7, Linux
    /// `tcp_ack()` clearing `icsk_backoff`).
    #[inline]
    pub fn on_ack_progress(&mut self) {
        self.rtt.backoff = 0;
    }

    /// The retransmission timer expired: back off (RFC 6298 §5.5) and stop timing (Karn).
    pub fn on_rto(&mut self) {
        self.rtt.on_timeout();
        self.rtt_timing = None;
    }
}
