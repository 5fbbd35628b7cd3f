//! Timing helpers shared by the `copy` and `csum` micro-benchmarks: best-of-N wall-clock timing
//! with self-calibrating iteration counts, the TSC rate (to express time as cycles, as the 2002
//! study's Table 6 did), aligned buffers, and list parsing for arguments.

use std::time::{Duration, Instant};

/// Times `run(iters)` (which must perform `iters` operations) and returns the best nanoseconds
/// per operation over `reps` repetitions, each lasting at least `min_time`, and the iteration
/// count used. A previously calibrated count can be passed back in to skip calibration.
///
/// Best-of rather than mean: the machine is shared and noisy, and interference only ever makes
/// a run slower, so the minimum is the best estimate of the undisturbed cost.
pub fn best_ns_per_op_with(
    min_time: Duration,
    reps: usize,
    calibrated: Option<u64>,
    mut run: impl FnMut(u64),
) -> (f64, u64) {
    let iters = match calibrated {
        Some(i) => i,
        None => calibrate(min_time, &mut run),
    };
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        run(iters);
        let ns = t.elapsed().as_nanos() as f64 / iters as f64;
        best = best.min(ns);
    }
    (best, iters)
}

/// Doubles (or jumps) the iteration count until one run lasts at least `min_time`.
fn calibrate(min_time: Duration, run: &mut impl FnMut(u64)) -> u64 {
    let mut iters: u64 = 1;
    loop {
        let t = Instant::now();
        run(iters);
        let el = t.elapsed();
        if el >= min_time || iters >= 1 << 40 {
            return iters;
        }
        let grow = if el.as_nanos() > 10_000 {
            (min_time.as_nanos() as f64 / el.as_nanos() as f64 * 1.1).ceil() as u64
        } else {
            8
        };
        iters = iters.saturating_mul(grow.clamp(2, 1024));
    }
}

/// Time-stamp counter ticks per nanosecond, measured against the OS clock over ~20 ms.
/// On this CPU class the TSC is invariant (constant rate), so "TSC cycles" are comparable
/// across runs; they are reference cycles, not necessarily core clock cycles.
pub fn tsc_ghz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        #[allow(unsafe_code)]
        fn rdtsc() -> u64 {
            // SAFETY: RDTSC has no memory effects and exists on every x86_64 CPU.
            unsafe { core::arch::x86_64::_rdtsc() }
        }
        let t0 = Instant::now();
        let c0 = rdtsc();
        while t0.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let c1 = rdtsc();
        let ns = t0.elapsed().as_nanos() as f64;
        Some((c1.wrapping_sub(c0)) as f64 / ns)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// A byte buffer from which windows at a chosen offset from a 64-byte boundary can be taken.
pub struct AlignedBuf {
    data: Vec<u8>,
    base: usize,
}

impl AlignedBuf {
    /// Room for `len` bytes at any offset 0..64 from a 64-byte boundary.
    pub fn new(len: usize, fill: impl Fn(usize) -> u8) -> Self {
        let data: Vec<u8> = (0..len + 128).map(fill).collect();
        let base = (64 - (data.as_ptr() as usize & 63)) & 63;
        AlignedBuf { data, base }
    }
    /// `len` bytes starting `align` bytes past a 64-byte boundary.
    pub fn window(&self, align: usize, len: usize) -> &[u8] {
        &self.data[self.base + align..self.base + align + len]
    }
    pub fn window_mut(&mut self, align: usize, len: usize) -> &mut [u8] {
        &mut self.data[self.base + align..self.base + align + len]
    }
}

/// Parses a comma-separated list of unsigned integers ("64,1448,64k,1m" accepted).
pub fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (num, mul) = match part.to_ascii_lowercase() {
            p if p.ends_with('k') => (p[..p.len() - 1].to_string(), 1024),
            p if p.ends_with('m') => (p[..p.len() - 1].to_string(), 1024 * 1024),
            p => (p, 1),
        };
        let n: usize = num
            .parse()
            .map_err(|_| format!("invalid size {part:?} (expected e.g. 64,1448,64k)"))?;
        let n = n
            .checked_mul(mul)
            .filter(|&n| n <= 1 << 30)
            .ok_or_else(|| format!("size {part:?} too large (max 1 GiB)"))?;
        v.push(n);
    }
    if v.is_empty() {
        return Err("empty size list".into());
    }
    Ok(v)
}

/// Median of a non-empty slice (sorted copy).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}
