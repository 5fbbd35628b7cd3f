//! Parsing of sizes with K/M/G suffixes (powers of 1024, as netperf and iperf3 use).

/// Parses "65536", "64K", "1M", "1G" (case-insensitive, optional trailing "B"/"iB").
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!(
            "{s} is negative: expected a size >= 0 (e.g. 65536, 64K, 1M)"
        ));
    }
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(t);
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1u64 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1u64 << 30),
        Some('t' | 'T') => (&t[..t.len() - 1], 1u64 << 40),
        _ => (t, 1),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid size {s:?} (expected e.g. 65536, 64K, 1M, 1G)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

/// A comma-separated list of sizes, e.g. "1K,4K,64K".
pub fn parse_size_list(s: &str) -> Result<Vec<u64>, String> {
    let v: Result<Vec<u64>, String> = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(parse_size)
        .collect();
    let v = v?;
    if v.is_empty() {
        return Err(format!("empty size list {s:?}"));
    }
    Ok(v)
}

/// A probability given as a fraction in [0, 1].
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("invalid probability {s:?}"))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!(
            "probability {s:?} must be a fraction between 0 and 1 (e.g. 0.01)"
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("x1").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
        assert_eq!(parse_size_list("1K,4K"), Ok(vec![1024, 4096]));
        assert!(parse_size_list(",").is_err());
    }

    #[test]
    fn fractions_are_bounded() {
        assert_eq!(parse_fraction("0.01"), Ok(0.01));
        assert!(parse_fraction("1.5").is_err());
        assert!(parse_fraction("-0.1").is_err());
        assert!(parse_fraction("nan").is_err());
    }
}
