//! Per-transaction latency of RR/CRR runs in fixed memory: a log-linear histogram in the manner
//! of HdrHistogram. Values below 2^SUB_BITS ns are counted exactly; above, each power of two is
//! split into 2^SUB_BITS equal buckets, so any value is known to within 1/2^SUB_BITS (3.1%) of
//! itself, whatever the run length. Percentiles are read from the buckets.

use serde::Serialize;
use std::time::Duration;

/// Linear sub-buckets per power of two: 2^5 = 32, a relative error below 1/32.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
/// Powers of two covered: up to 2^40 ns (about 18 minutes); longer values land in the last
/// bucket (and `max` still says how long).
const MAX_EXP: u32 = 40;
const BUCKETS: usize = SUB + (MAX_EXP - SUB_BITS) as usize * SUB;

/// Transaction latencies in nanoseconds.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Histogram({:?})", self.summary())
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0u64; BUCKETS].into_boxed_slice(),
            total: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

fn index(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros();
    if exp >= MAX_EXP {
        return BUCKETS - 1;
    }
    let shift = exp - SUB_BITS;
    let sub = (ns >> shift) as usize - SUB;
    SUB + shift as usize * SUB + sub
}

/// The range of values [low, high) that bucket `i` holds.
fn bounds(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, i as u64 + 1);
    }
    let shift = ((i - SUB) / SUB) as u32;
    let sub = ((i - SUB) % SUB) as u64;
    let low = (SUB as u64 + sub) << shift;
    (low, low + (1u64 << shift))
}

/// What the JSON carries: microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyUs {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Histogram {
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[index(ns)] += 1;
        self.total += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Adds another run's counts (iterations of one configuration).
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.total += o.total;
        self.sum_ns += o.sum_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// The value at quantile `q` in [0, 1], in ns: the middle of the bucket holding the
    /// ceil(q * n)-th smallest value, never above the largest value seen.
    pub fn quantile_ns(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds(i);
                let mid = (lo as f64 + hi as f64 - 1.0) / 2.0;
                return mid.min(self.max_ns as f64);
            }
        }
        self.max_ns as f64
    }

    /// The cumulative distribution: (upper edge of each non-empty bucket in us, fraction of
    /// transactions at or below it), ascending.
    pub fn cdf_us(&self) -> Vec<(f64, f64)> {
        let mut seen = 0u64;
        let mut out = Vec::new();
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            seen += c;
            let hi = (bounds(i).1 as f64).min(self.max_ns.max(1) as f64);
            out.push((hi / 1e3, seen as f64 / self.total as f64));
        }
        out
    }

    /// None when nothing was recorded.
    pub fn summary(&self) -> Option<LatencyUs> {
        if self.total == 0 {
            return None;
        }
        let us = |ns: f64| ns / 1e3;
        Some(LatencyUs {
            mean: us(self.sum_ns as f64 / self.total as f64),
            p50: us(self.quantile_ns(0.50)),
            p90: us(self.quantile_ns(0.90)),
            p99: us(self.quantile_ns(0.99)),
            p999: us(self.quantile_ns(0.999)),
            max: us(self.max_ns as f64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_without_gaps() {
        let mut prev_hi = 0;
        for i in 0..BUCKETS {
            let (lo, hi) = bounds(i);
            assert_eq!(lo, prev_hi, "bucket {i}");
            assert!(hi > lo);
            assert_eq!(index(lo), i);
            assert_eq!(index(hi - 1), i);
            prev_hi = hi;
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_within_the_bucket_error() {
        let mut h = Histogram::default();
        // 1..=1000 us: p50 = 500 us, p90 = 900 us, p99 = 990 us, max = 1000 us.
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary().unwrap();
        let close = |got: f64, want: f64| (got - want).abs() / want < 1.0 / SUB as f64;
        assert!(close(s.p50, 500.0), "{s:?}");
        assert!(close(s.p90, 900.0), "{s:?}");
        assert!(close(s.p99, 990.0), "{s:?}");
        assert!(close(s.p999, 999.0), "{s:?}");
        assert_eq!(s.max, 1000.0);
        assert!((s.mean - 500.5).abs() < 1e-9);
        assert_eq!(Histogram::default().summary(), None);
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Histogram::default();
        let mut b = Histogram::default();
        a.record(Duration::from_micros(10));
        b.record(Duration::from_millis(10));
        a.merge(&b);
        assert_eq!(a.total, 2);
        assert_eq!(a.summary().unwrap().max, 10_000.0);
        // p50 is the smaller value, p99 the larger.
        assert!(a.summary().unwrap().p50 < 11.0);
        assert!(a.summary().unwrap().p99 > 9_000.0);
        let cdf = a.cdf_us();
        assert_eq!(cdf.len(), 2);
        assert_eq!(cdf[0].1, 0.5);
        assert_eq!(cdf[1], (10_000.0, 1.0));
    }
}
