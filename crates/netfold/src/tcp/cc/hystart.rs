//! HyStart: leaving slow start before the first loss, as Linux's CUBIC does by default
//! (`tcp_cubic.c`: `hystart=1`, `hystart_detect=3`, both detectors). Sangtae Ha and Injong
//! Rhee, "Taming the Elephants: New TCP Slow Start" (2011); RFC 9438 §4.10 allows it ("a
//! CUBIC implementation MAY use ... HyStart++"; this is Linux's HyStart, not RFC 9406's
//! HyStart++, so that cwnd moves as a Linux peer's does).
//!
//! A round starts when an ACK passes the SND.NXT recorded at the last round start. Once cwnd
//! has reached 16 segments, slow start ends (ssthresh = cwnd) when
//! - ACK train: the ACKs of a round keep coming at most 2 ms apart for longer than half the
//!   minimum delay plus a cushion for segmentation offload (`hystart_ack_delay`), i.e. the
//!   window already spans the path; or
//! - delay: the smallest of the first 8 RTT samples of a round exceeds the minimum RTT by
//!   an eighth of it, clamped to 4..16 ms: a queue is building.

use super::RttSample;
use crate::tcp::seq;
use crate::time::{Duration, Instant};

/// `hystart_low_window`: HyStart acts from this many segments of cwnd.
const LOW_WINDOW: u32 = 16;
/// `HYSTART_MIN_SAMPLES`.
const MIN_SAMPLES: u32 = 8;
/// `hystart_ack_delta_us`: ACKs at most this far apart form a train.
const ACK_DELTA_US: u64 = 2000;
/// `HYSTART_DELAY_MIN` / `HYSTART_DELAY_MAX`, microseconds.
const DELAY_MIN_US: u64 = 4000;
const DELAY_MAX_US: u64 = 16000;
/// Linux's `GSO_LEGACY_MAX_SIZE`, the `sk_gso_max_size` of `hystart_ack_delay`.
const GSO_MAX_SIZE: u64 = 65536;

#[derive(Debug, Clone, Copy, Default)]
pub struct HyStart {
    /// Slow start was ended (`ca->found`); cleared only by a reset (start, RTO).
    found: bool,
    round_start: Instant,
    last_ack: Instant,
    /// SND.NXT at the round's start (`ca->end_seq`); `None` before the first round.
    end_seq: Option<u32>,
    /// The round's smallest RTT sample, microseconds (`ca->curr_rtt`, `u32::MAX` = none).
    curr_rtt: u64,
    sample_cnt: u32,
    /// The connection's smallest RTT sample, microseconds (`ca->delay_min`, 0 = none).
    delay_min: u64,
}

impl HyStart {
    pub fn new() -> Self {
        HyStart {
            curr_rtt: u64::MAX,
            ..Default::default()
        }
    }

    /// `bictcp_reset` + `bictcp_hystart_reset` after an RTO (Linux's
    /// `cubictcp_state(TCP_CA_Loss)`): slow start may end again; the next sample starts a
    /// round; the minimum delay is kept.
    pub fn restart(&mut self) {
        self.found = false;
        self.end_seq = None;
    }

    fn new_round(&mut self, now: Instant, snd_nxt: u32) {
        self.round_start = now;
        self.last_ack = now;
        self.end_seq = Some(snd_nxt);
        self.curr_rtt = u64::MAX;
        self.sample_cnt = 0;
    }

    /// An ACK with a round-trip sample (`cubictcp_acked`), before cwnd grows for it. Returns
    /// true when slow start should end now (the caller sets ssthresh = cwnd); `cwnd` in
    /// bytes, `in_slow_start` is cwnd < ssthresh.
    #[inline]
    pub fn on_rtt_sample(&mut self, s: &RttSample, cwnd: u32, in_slow_start: bool) -> bool {
        let RttSample {
            now,
            rtt,
            una,
            nxt,
            mss,
            srtt,
        } = *s;
        let delay = rtt.total_micros().max(1);
        if self.delay_min == 0 || self.delay_min > delay {
            self.delay_min = delay;
        }
        if self.found || !in_slow_start {
            return false;
        }
        // `hystart_update`.
        if self.end_seq.is_none_or(|e| seq::gt(una, e)) {
            self.new_round(now, nxt);
        }
        if cwnd < LOW_WINDOW.saturating_mul(mss.max(1)) {
            return false;
        }
        self.detect(now, delay, cwnd, srtt)
    }

    /// The two detectors, once cwnd is large enough (out of line: a connection that stays
    /// below 16 segments, request/response traffic, never gets here).
    #[inline(never)]
    fn detect(&mut self, now: Instant, delay: u64, cwnd: u32, srtt: Option<Duration>) -> bool {
        // ACK train.
        if now.saturating_since(self.last_ack).total_micros() <= ACK_DELTA_US {
            self.last_ack = now;
            // netfold does not pace: Linux halves the threshold then ("if
            // (sk->sk_pacing_status == SK_PACING_NONE) threshold >>= 1").
            let threshold = (self.delay_min + ack_delay_us(cwnd, srtt)) >> 1;
            if now.saturating_since(self.round_start).total_micros() > threshold {
                self.found = true;
                return true;
            }
        }
        // Delay increase.
        self.curr_rtt = self.curr_rtt.min(delay);
        if self.sample_cnt < MIN_SAMPLES {
            self.sample_cnt += 1;
        } else if self.curr_rtt
            > self.delay_min + (self.delay_min >> 3).clamp(DELAY_MIN_US, DELAY_MAX_US)
        {
            self.found = true;
            return true;
        }
        false
    }
}

/// Linux `hystart_ack_delay`: min(1 ms, 4 * gso_max_size / pacing rate), the pacing rate
/// being Linux's slow-start one (`tcp_update_pacing_rate`: 200% of cwnd per SRTT); 0 with
/// no rate yet.
fn ack_delay_us(cwnd: u32, srtt: Option<Duration>) -> u64 {
    let Some(srtt) = srtt else { return 0 };
    let srtt_us = srtt.total_micros().max(1);
    // bytes per second = 2 * cwnd / srtt.
    let rate = 2 * u64::from(cwnd) * 1_000_000 / srtt_us;
    if rate == 0 {
        return 0;
    }
    (GSO_MAX_SIZE * 4 * 1_000_000 / rate).min(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn ms(n: u64) -> Instant {
        Instant::from_micros(n * 1000)
    }

    /// One sample: at `t` ms, RTT `rtt` ms, SND.UNA/SND.NXT `seqs`, SRTT `srtt` ms.
    fn on(
        h: &mut HyStart,
        (t, rtt): (u64, u64),
        (una, nxt): (u32, u32),
        cwnd: u32,
        ss: bool,
        srtt: u64,
    ) -> bool {
        let s = RttSample {
            now: ms(t),
            rtt: Duration::from_millis(rtt),
            una,
            nxt,
            mss: MSS,
            srtt: Some(Duration::from_millis(srtt)),
        };
        h.on_rtt_sample(&s, cwnd, ss)
    }

    #[test]
    fn delay_increase_ends_slow_start_after_eight_samples_of_a_round() {
        // Linux cubic/cubic-hystart-delay-rtt-jumps-upward: min RTT 200 ms, then every
        // sample of the next round at 240 ms (> 200 + 16).
        let mut h = HyStart::new();
        assert!(!on(
            &mut h,
            (400, 200),
            (10_001, 10_001),
            10 * MSS,
            true,
            200
        ));
        // The next round (ACK 12001 passes end_seq 10001) starts with cwnd 20.
        let mut cwnd = 20 * MSS;
        let mut t = 640;
        let mut ack = 12_001;
        let mut ended = None;
        for i in 0..10 {
            if on(&mut h, (t, 240), (ack, 30_001), cwnd, true, 200) {
                ended = Some(i);
                break;
            }
            cwnd += 2 * MSS;
            ack += 2000;
            t += 3; // more than 2 ms apart: no ACK train
        }
        assert_eq!(ended, Some(8), "the 9th sample of the round decides");
    }

    #[test]
    fn no_exit_below_the_low_window_or_after_slow_start() {
        let mut h = HyStart::new();
        assert!(!on(&mut h, (5, 10), (1, 100_000), 15 * MSS, true, 10));
        for i in 0..20u32 {
            let una = 1 + i * 1000;
            let t = 10 + u64::from(i) * 5;
            assert!(!on(&mut h, (t, 50), (una, 100_000), 15 * MSS, true, 10));
            assert!(!on(
                &mut h,
                (t + 1, 50),
                (una, 100_000),
                40 * MSS,
                false,
                10
            ));
        }
    }

    #[test]
    fn an_ack_train_longer_than_half_the_min_delay_ends_slow_start() {
        let mut h = HyStart::new();
        // Min RTT 20 ms; the next round's ACKs come 1 ms apart.
        assert!(!on(&mut h, (20, 20), (16_001, 48_001), 32 * MSS, true, 20));
        let mut found = None;
        for i in 1..40u64 {
            if on(
                &mut h,
                (20 + i, 20),
                (16_001 + i as u32 * 1000, 48_001),
                32 * MSS,
                true,
                20,
            ) {
                found = Some(i);
                break;
            }
        }
        // Threshold (20,000 + cushion) / 2 us: the cushion is min(1 ms, 4 * 64 KiB / (2 *
        // 32,000 B / 20 ms)) = 1 ms, so 10.5 ms: the 11th ACK, 11 ms into the round.
        assert_eq!(found, Some(11));
        // Found stays until a restart.
        assert!(!on(&mut h, (80, 90), (60_001, 60_001), 32 * MSS, true, 20));
        h.restart();
        assert!(!h.found);
    }
}
