//! The machine a result came from, carried by every JSON output (`machine`): CPU model, cores,
//! kernel release, the netfold commit and the UTC date, so a number can be traced to where and
//! with what code it was measured.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
    pub commit: String,
    /// How the binary was built: `release`, `release+pgo` (`scripts/pgo-build.sh`), ...
    pub build: String,
    /// UTC, ISO 8601 (`2026-11-25T03:40:00Z`).
    pub date: String,
}

impl Machine {
    pub fn current() -> Machine {
        Machine {
            cpu_model: cpu_model(),
            cores: super::affinity::online_cpus(),
            kernel: kernel_release(),
            commit: commit(),
            build: env!("NETFOLD_BUILD").to_string(),
            date: utc_now(),
        }
    }
}

/// The first `model name` of /proc/cpuinfo (x86), else `Hardware`/`CPU part` lines (Arm).
fn cpu_model() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    for key in ["model name", "Hardware", "Processor", "cpu model"] {
        if let Some(v) = text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        }) {
            if !v.is_empty() {
                return v;
            }
        }
    }
    "unknown".into()
}

/// The running kernel's release, as `uname -r` prints it.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The commit recorded at build time; else `git rev-parse` at run time (a checkout); else
/// "unknown".
fn commit() -> String {
    let built = env!("NETFOLD_COMMIT");
    if !built.is_empty() {
        return built.to_string();
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    iso8601(secs)
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian calendar; the
/// days-to-civil conversion of H. Hinnant's `civil_from_days`).
pub fn iso8601(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_iso8601() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day in a century leap year) 12:34:56.
        assert_eq!(iso8601(951_827_696), "2000-02-29T12:34:56Z");
        assert_eq!(iso8601(1_798_761_599), "2026-12-31T23:59:59Z");
    }

    #[test]
    fn the_machine_is_described() {
        let m = Machine::current();
        assert!(m.cores >= 1);
        assert!(!m.cpu_model.is_empty() && !m.kernel.is_empty() && !m.commit.is_empty());
        assert!(
            m.build.starts_with("release") || m.build.starts_with("debug"),
            "{}",
            m.build
        );
        assert!(m.date.ends_with('Z') && m.date.len() == 20);
    }
}
