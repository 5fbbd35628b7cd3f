//! Was the congestion window used? A sender limited by its application rather than by cwnd
//! must not grow a window it does not fill (RFC 7661 §4.3, RFC 9438 §5.8: "CUBIC does not
//! raise its congestion window size if the congestion window is not fully utilized").
//!
//! RFC 7661 leaves the measure open; this is Linux's (`tcp_cwnd_validate` in tcp_output.c,
//! `tcp_is_cwnd_limited` in include/net/tcp.h), so that cwnd moves as Linux's does for the same
//! traffic. After each transmit round the sender records whether cwnd stopped it, and the most
//! it had in flight, once per window of data (until SND.UNA passes the SND.NXT of the record):
//!
//! - a round that ended with cwnd full marks the window cwnd-limited;
//! - in slow start (cwnd < ssthresh) the window is also cwnd-limited while cwnd is below twice
//!   the most in flight in it ("ensure cwnd grows to twice what was ACKed"): ten segments
//!   sent on an initial window of ten grow it to twenty, five leave it at ten.
//!
//! Linux counts packets; netfold's cwnd is in bytes, so the flight is too, and "cwnd full"
//! means no room for one more full-sized segment.

use crate::tcp::seq;

/// Linux's `is_cwnd_limited`, `max_packets_out` and `cwnd_usage_seq` (`struct tcp_sock`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CwndUsage {
    /// A round of this window stopped with cwnd full.
    limited: bool,
    /// The most bytes in flight after a round of this window.
    max_flight: u32,
    /// SND.NXT when the record was taken; an ACK at or beyond it starts a new window.
    usage_seq: u32,
}

impl CwndUsage {
    /// A transmit round ended (Linux calls `tcp_cwnd_validate` at the end of `tcp_write_xmit`
    /// "if (likely(sent_pkts || is_cwnd_limited))"): `una`/`nxt` are SND.UNA and SND.NXT,
    /// `in_flight` what counts against cwnd (RFC 6675 pipe), `smss` the segment size, `sent`
    /// whether the round sent data.
    #[inline]
    pub fn on_transmit(
        &mut self,
        una: u32,
        nxt: u32,
        in_flight: u32,
        cwnd: u32,
        smss: u32,
        sent: bool,
    ) {
        // `is_cwnd_limited |= (tcp_packets_in_flight(tp) >= tcp_snd_cwnd(tp))`.
        let limited = in_flight.saturating_add(smss) > cwnd;
        if !sent && !limited {
            return;
        }
        let flight = nxt.wrapping_sub(una);
        if !seq::lt(una, self.usage_seq) || limited || (!self.limited && flight > self.max_flight) {
            self.limited = limited;
            self.max_flight = flight;
            self.usage_seq = nxt;
        }
    }

    /// Linux `tcp_is_cwnd_limited`: may an ACK grow cwnd?
    #[inline]
    pub fn cwnd_limited(&self, cwnd: u32, ssthresh: u32) -> bool {
        if self.limited {
            return true;
        }
        // "If in slow start, ensure cwnd grows to twice what was ACKed."
        cwnd < ssthresh && cwnd < self.max_flight.saturating_mul(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;
    const IW: u32 = 10 * MSS;
    const INF: u32 = u32::MAX;

    #[test]
    fn a_full_initial_window_is_cwnd_limited_for_its_whole_window() {
        // Linux slow_start/slow-start-app-limited: 10 segments on IW10.
        let mut u = CwndUsage::default();
        u.on_transmit(1, 10_001, 10 * MSS, IW, MSS, true);
        assert!(u.cwnd_limited(IW, INF));
        // The ACKs of this window find it limited even as cwnd grows past the flight.
        assert!(u.cwnd_limited(18 * MSS, INF));
    }

    #[test]
    fn half_a_window_does_not_grow_cwnd() {
        // Linux slow_start/slow-start-ack-per-2pkt-send-5pkt: 5 segments on IW10.
        let mut u = CwndUsage::default();
        u.on_transmit(1, 5_001, 5 * MSS, IW, MSS, true);
        assert!(!u.cwnd_limited(IW, INF));
    }

    #[test]
    fn nine_of_ten_in_slow_start_grow_to_twice_the_flight() {
        // Linux slow_start/slow-start-app-limited-9-packets-out.
        let mut u = CwndUsage::default();
        u.on_transmit(1, 9_001, 9 * MSS, IW, MSS, true);
        assert!(u.cwnd_limited(IW, INF));
        assert!(u.cwnd_limited(17 * MSS, INF));
        assert!(!u.cwnd_limited(18 * MSS, INF));
        // In congestion avoidance only a full window counts.
        assert!(!u.cwnd_limited(IW, IW));
    }

    #[test]
    fn the_record_is_kept_for_a_window_then_renewed() {
        let mut u = CwndUsage::default();
        u.on_transmit(1, 10_001, 10 * MSS, IW, MSS, true);
        // A small round within the window does not erase the limited mark.
        u.on_transmit(5_001, 10_501, 5_500, 20 * MSS, MSS, true);
        assert!(u.cwnd_limited(20 * MSS, INF));
        // Once SND.UNA reaches the record's SND.NXT, the next round replaces it.
        u.on_transmit(10_001, 10_501, 500, 20 * MSS, MSS, true);
        assert!(!u.cwnd_limited(20 * MSS, INF));
    }

    #[test]
    fn a_growing_flight_raises_the_record_within_the_window() {
        let mut u = CwndUsage::default();
        u.on_transmit(1, 3_001, 3 * MSS, 20 * MSS, MSS, true);
        assert!(!u.cwnd_limited(IW, INF));
        u.on_transmit(1, 6_001, 6 * MSS, 20 * MSS, MSS, true);
        assert!(u.cwnd_limited(IW, INF));
    }

    #[test]
    fn a_round_that_sent_nothing_with_room_left_changes_nothing() {
        let mut u = CwndUsage::default();
        u.on_transmit(1, 6_001, 6 * MSS, IW, MSS, true);
        // SND.UNA passed the record, but nothing was sent and cwnd has room: Linux does not
        // call tcp_cwnd_validate, so the record stays.
        u.on_transmit(6_001, 6_001, 0, IW, MSS, false);
        assert!(u.cwnd_limited(IW, INF));
    }

    #[test]
    fn works_across_the_sequence_wrap() {
        let mut u = CwndUsage::default();
        let una = u32::MAX - 500;
        u.on_transmit(una, una.wrapping_add(10 * MSS), 10 * MSS, IW, MSS, true);
        u.on_transmit(
            una.wrapping_add(1000),
            una.wrapping_add(10 * MSS),
            9 * MSS,
            IW,
            MSS,
            true,
        );
        assert!(u.cwnd_limited(20 * MSS, INF));
    }
}
