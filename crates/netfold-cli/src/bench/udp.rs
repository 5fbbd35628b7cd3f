//! UDP_STREAM accounting shared by every stack: both sides' datagram counts (so loss shows, as
//! netperf prints both sides), interarrival jitter as RTP defines it, and pacing to a target
//! rate (`-b`, as iperf3's).
//!
//! Each datagram of at least [`STAMP_LEN`] bytes starts with its sequence number and its send
//! time (ns since the run's epoch, both little-endian u64): sender and receiver run in this
//! process and read the same clock, so the receiver can compute transit times directly.

use serde::Serialize;

/// Bytes of the per-datagram stamp: sequence number and send time.
pub const STAMP_LEN: usize = 16;

/// What a UDP_STREAM run counted on each side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct UdpStats {
    pub sent_datagrams: u64,
    pub sent_bytes: u64,
    pub received_datagrams: u64,
    pub received_bytes: u64,
    /// RFC 3550 interarrival jitter in ms; None when datagrams are too small to carry a stamp.
    pub jitter_ms: Option<f64>,
}

impl UdpStats {
    /// Percent of the datagrams sent that never arrived (0 when nothing was sent).
    pub fn loss_pct(&self) -> f64 {
        if self.sent_datagrams == 0 {
            return 0.0;
        }
        let lost = self.sent_datagrams.saturating_sub(self.received_datagrams);
        lost as f64 * 100.0 / self.sent_datagrams as f64
    }
}

/// Writes the stamp into the start of `buf` (no-op when `buf` is shorter than the stamp).
pub fn stamp(buf: &mut [u8], seq: u64, sent_ns: u64) {
    if buf.len() >= STAMP_LEN {
        buf[..8].copy_from_slice(&seq.to_le_bytes());
        buf[8..16].copy_from_slice(&sent_ns.to_le_bytes());
    }
}

/// The receiving side's counts and jitter estimate.
#[derive(Debug, Default)]
pub struct Receiver {
    pub datagrams: u64,
    pub bytes: u64,
    jitter_ns: f64,
    last_transit: Option<i128>,
    stamped: u64,
}

impl Receiver {
    /// Counts one datagram that arrived at `now_ns` (same epoch as the sender's stamps).
    pub fn on_datagram(&mut self, data: &[u8], now_ns: u64) {
        self.datagrams += 1;
        self.bytes += data.len() as u64;
        if data.len() < STAMP_LEN {
            return;
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&data[8..16]);
        let sent = u64::from_le_bytes(t);
        let transit = i128::from(now_ns) - i128::from(sent);
        // RFC 3550 §6.4.1: D(i-1,i) = (Rj - Ri) - (Sj - Si), the difference of transit times;
        // J(i) = J(i-1) + (|D(i-1,i)| - J(i-1)) / 16.
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
        self.stamped += 1;
    }

    /// RFC 3550 jitter in ms, None if no datagram carried a stamp.
    pub fn jitter_ms(&self) -> Option<f64> {
        (self.stamped > 0).then_some(self.jitter_ns / 1e6)
    }
}

/// Paces a sender to `rate_bps` (None = unpaced): how long to wait before the next datagram.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    pub rate_bps: Option<u64>,
}

impl Pacer {
    /// Nanoseconds until `sent_bytes` are allowed by the rate at `elapsed_ns` (0 = send now).
    pub fn wait_ns(&self, sent_bytes: u64, elapsed_ns: u64) -> u64 {
        match self.rate_bps {
            None | Some(0) => 0,
            Some(r) => {
                let due_ns = (u128::from(sent_bytes) * 8 * 1_000_000_000 / u128::from(r)) as u64;
                due_ns.saturating_sub(elapsed_ns)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_counts_both_sides() {
        let s = UdpStats {
            sent_datagrams: 100,
            received_datagrams: 17,
            ..Default::default()
        };
        assert!((s.loss_pct() - 83.0).abs() < 1e-9);
        assert_eq!(UdpStats::default().loss_pct(), 0.0);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        let mut r = Receiver::default();
        let mut buf = [0u8; 64];
        // Constant transit: no jitter.
        for i in 0..10u64 {
            stamp(&mut buf, i, i * 1000);
            r.on_datagram(&buf, i * 1000 + 500);
        }
        assert_eq!(r.jitter_ms(), Some(0.0));
        // One datagram 16 us later than its predecessors: J = 16000/16 ns = 1 us.
        stamp(&mut buf, 10, 10_000);
        r.on_datagram(&buf, 10_000 + 500 + 16_000);
        assert!((r.jitter_ms().unwrap() - 0.001).abs() < 1e-12);
        // Too small to carry a stamp: counted, no jitter.
        let mut small = Receiver::default();
        small.on_datagram(&[0u8; 8], 5);
        assert_eq!((small.datagrams, small.jitter_ms()), (1, None));
    }

    #[test]
    fn pacer_holds_the_rate() {
        let p = Pacer {
            rate_bps: Some(8_000_000),
        };
        // 1 MB at 8 Mbit/s is due at 1 s.
        assert_eq!(p.wait_ns(1_000_000, 0), 1_000_000_000);
        assert_eq!(p.wait_ns(1_000_000, 400_000_000), 600_000_000);
        assert_eq!(p.wait_ns(1_000_000, 2_000_000_000), 0);
        assert_eq!(Pacer { rate_bps: None }.wait_ns(1 << 40, 0), 0);
    }
}
