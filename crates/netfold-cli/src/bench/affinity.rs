//! Pinning threads to CPUs (the OLS 2002 study: process affinity) and reading a thread's own CPU time.

// Placement lives in netfold-os, where the sharded runtime uses it too.
pub use netfold_os::cpu::{online_cpus, pin_current_thread};

/// CPU time (user + system) consumed by the calling thread so far, in seconds.
pub fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one rusage struct into the zeroed value we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) != 0 {
            return 0.0;
        }
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time (user + system) consumed by every thread of this process so far, in seconds.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one rusage struct into the zeroed value we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return 0.0;
        }
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Whole-machine CPU time from /proc/stat (netperf's method): (busy, total) jiffies over all
/// CPUs. Busy counts user, nice, system, irq, softirq and steal; total adds idle and iowait.
pub fn proc_stat_jiffies() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 8 {
        return None;
    }
    let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    let total = busy + v[3] + v[4];
    Some((busy, total))
}

/// Percent of the whole machine busy between two /proc/stat samples (any process, so it
/// includes whatever else the machine was doing).
pub fn proc_stat_util(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let busy = after.0.checked_sub(before.0)?;
    let total = after.1.checked_sub(before.1)?;
    (total > 0).then(|| busy as f64 / total as f64 * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_utilization_is_a_percentage() {
        let a = proc_stat_jiffies().expect("/proc/stat readable");
        assert!(a.0 <= a.1);
        assert_eq!(proc_stat_util((10, 100), (60, 200)), Some(50.0));
        assert_eq!(proc_stat_util((10, 100), (10, 100)), None);
        assert_eq!(proc_stat_util((10, 100), (5, 200)), None);
    }

    #[test]
    fn pinning_does_not_shrink_the_cpu_count() {
        let before = online_cpus();
        let t = std::thread::spawn(move || {
            pin_current_thread(0);
            online_cpus()
        });
        assert_eq!(t.join().unwrap(), before);
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let t0 = thread_cpu_seconds();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        assert!(thread_cpu_seconds() > t0, "{x}");
    }
}
