//! The statistics netperf reports: confidence intervals over iterations (`-i MAX,MIN -I
//! LEVEL,WIDTH`), CPU utilization, service demand and throughput scaled to 100% CPU (the OLS 2002 study's
//! metric).

/// Mean and sample standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Two-sided Student t critical value for `df` degrees of freedom at confidence `level` (95 or
/// 99, the levels netperf accepts). Table values for small df, the normal quantile beyond.
pub fn t_critical(level: u32, df: usize) -> f64 {
    const T95: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    const T99: [f64; 30] = [
        63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012,
        2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779,
        2.771, 2.763, 2.756, 2.750,
    ];
    let (table, z) = if level >= 99 {
        (&T99, 2.576)
    } else {
        (&T95, 1.960)
    };
    match df {
        0 => f64::INFINITY,
        d if d <= 30 => table[d - 1],
        _ => z,
    }
}

/// Width of the confidence interval around the mean, as a percentage of the mean (netperf's
/// "-I 99,5" asks for the interval to be within +-2.5%, i.e. width 5%).
pub fn ci_width_pct(xs: &[f64], level: u32) -> f64 {
    if xs.len() < 2 {
        return f64::INFINITY;
    }
    let (mean, sd) = mean_sd(xs);
    if mean == 0.0 {
        return f64::INFINITY;
    }
    let half = t_critical(level, xs.len() - 1) * sd / (xs.len() as f64).sqrt();
    2.0 * half / mean.abs() * 100.0
}

/// Iteration policy from `-i MAX,MIN -I LEVEL,WIDTH`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iterations {
    pub max: usize,
    pub min: usize,
    pub level: u32,
    pub width_pct: f64,
}

impl Default for Iterations {
    fn default() -> Self {
        Iterations {
            max: 1,
            min: 1,
            level: 99,
            width_pct: 5.0,
        }
    }
}

impl Iterations {
    /// True when another run is needed given the results so far.
    pub fn want_more(&self, xs: &[f64]) -> bool {
        if xs.len() < self.min.max(1) {
            return true;
        }
        if xs.len() >= self.max.max(1) {
            return false;
        }
        ci_width_pct(xs, self.level) > self.width_pct
    }

    /// Whether the confidence target was met (always true for a single requested iteration).
    pub fn met(&self, xs: &[f64]) -> bool {
        self.max <= 1 || ci_width_pct(xs, self.level) <= self.width_pct
    }
}

/// Parses "-i MAX,MIN" (netperf: max 30, min 3).
pub fn parse_iterations(s: &str) -> Result<(usize, usize), String> {
    let mut it = s.split(',');
    let max: usize = it
        .next()
        .unwrap_or("")
        .trim()
        .parse()
        .map_err(|_| format!("-i {s:?}: expected MAX[,MIN]"))?;
    let min: usize = match it.next() {
        Some(m) => m
            .trim()
            .parse()
            .map_err(|_| format!("-i {s:?}: expected MAX[,MIN]"))?,
        None => max.min(3),
    };
    if max == 0 || max > 30 || min == 0 || min > max || it.next().is_some() {
        return Err(format!("-i {s:?}: need 1 <= MIN <= MAX <= 30"));
    }
    Ok((max, min))
}

/// Parses "-I LEVEL,WIDTH" (LEVEL 95 or 99, WIDTH percent).
pub fn parse_interval(s: &str) -> Result<(u32, f64), String> {
    let mut it = s.split(',');
    let level: u32 = it
        .next()
        .unwrap_or("")
        .trim()
        .parse()
        .map_err(|_| format!("-I {s:?}: expected LEVEL,WIDTH"))?;
    let width: f64 = match it.next() {
        Some(w) => w
            .trim()
            .parse()
            .map_err(|_| format!("-I {s:?}: expected LEVEL,WIDTH"))?,
        None => 5.0,
    };
    if !(level == 95 || level == 99) || !(width > 0.0 && width <= 100.0) || it.next().is_some() {
        return Err(format!(
            "-I {s:?}: LEVEL must be 95 or 99 and WIDTH in (0, 100]"
        ));
    }
    Ok((level, width))
}

/// CPU figures of one run, netperf style.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuFigures {
    /// Percent of the whole machine (all CPUs) used by the test's threads.
    pub cpu_util_pct: f64,
    /// Microseconds of CPU per KiB moved (netperf's service demand, "us/KB").
    pub service_demand_us_per_kb: f64,
    /// Throughput if the work had the whole machine: throughput / utilization (the OLS 2002 study).
    pub scaled_throughput_mbps: f64,
}

/// Derives the CPU figures from the CPU seconds the work consumed.
pub fn cpu_figures(
    cpu_seconds: f64,
    elapsed_s: f64,
    ncpus: usize,
    bytes: u64,
    throughput_mbps: f64,
) -> CpuFigures {
    let capacity = elapsed_s * ncpus.max(1) as f64;
    let util = if capacity > 0.0 {
        (cpu_seconds / capacity * 100.0).min(100.0)
    } else {
        0.0
    };
    let kb = bytes as f64 / 1024.0;
    CpuFigures {
        cpu_util_pct: util,
        service_demand_us_per_kb: if kb > 0.0 {
            cpu_seconds * 1e6 / kb
        } else {
            0.0
        },
        scaled_throughput_mbps: if util > 0.0 {
            throughput_mbps * 100.0 / util
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sd_match_hand_computation() {
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((m - 5.0).abs() < 1e-12);
        // Sample (n-1) standard deviation: sqrt(32/7).
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn confidence_interval_width() {
        // Two identical values: zero width.
        assert_eq!(ci_width_pct(&[10.0, 10.0], 99), 0.0);
        // 3 samples 9, 10, 11: sd 1, t(99%, 2) = 9.925, half = 9.925/sqrt(3); width% = 2*half/10*100.
        let w = ci_width_pct(&[9.0, 10.0, 11.0], 99);
        assert!((w - 2.0 * 9.925 / 3f64.sqrt() / 10.0 * 100.0).abs() < 1e-9);
        assert!(ci_width_pct(&[1.0], 95).is_infinite());
        assert_eq!(t_critical(95, 1000), 1.96);
    }

    #[test]
    fn iteration_policy_stops_when_tight_or_at_max() {
        let it = Iterations {
            max: 5,
            min: 3,
            level: 95,
            width_pct: 5.0,
        };
        assert!(it.want_more(&[10.0, 10.0]));
        assert!(!it.want_more(&[10.0, 10.0, 10.0]));
        assert!(it.want_more(&[5.0, 10.0, 15.0]));
        assert!(!it.want_more(&[5.0, 10.0, 15.0, 5.0, 15.0]));
        assert!(!it.met(&[5.0, 10.0, 15.0, 5.0, 15.0]));
    }

    #[test]
    fn option_parsing() {
        assert_eq!(parse_iterations("10,3"), Ok((10, 3)));
        assert_eq!(parse_iterations("5"), Ok((5, 3)));
        assert!(parse_iterations("3,5").is_err());
        assert!(parse_iterations("0").is_err());
        assert!(parse_iterations("31,1").is_err());
        assert_eq!(parse_interval("99,5"), Ok((99, 5.0)));
        assert!(parse_interval("90,5").is_err());
        assert!(parse_interval("99,0").is_err());
    }

    #[test]
    fn cpu_figures_follow_netperf_definitions() {
        // 1 CPU-second over 1 s on 2 CPUs = 50% of the machine; 1 GiB moved.
        let f = cpu_figures(1.0, 1.0, 2, 1 << 30, 8589.934592);
        assert!((f.cpu_util_pct - 50.0).abs() < 1e-9);
        assert!((f.service_demand_us_per_kb - 1e6 / (1 << 20) as f64).abs() < 1e-9);
        assert!((f.scaled_throughput_mbps - 2.0 * 8589.934592).abs() < 1e-6);
        let z = cpu_figures(0.0, 0.0, 2, 0, 0.0);
        assert_eq!(
            (
                z.cpu_util_pct,
                z.service_demand_us_per_kb,
                z.scaled_throughput_mbps
            ),
            (0.0, 0.0, 0.0)
        );
    }
}
