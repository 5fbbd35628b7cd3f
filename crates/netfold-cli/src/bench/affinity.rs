//! Pinning threads to CPUs (seed 000 §2: process affinity) and reading a thread's own CPU time.

/// Pins the calling thread to `cpu` (modulo the CPUs this process may use). Returns false if
/// the kernel refused (e.g. a restricted cpuset); the run goes on unpinned and says so.
pub fn pin_current_thread(cpu: usize) -> bool {
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cpu = cpu % n;
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set, CPU_SET writes within it
    // (cpu < CPU_SETSIZE since available_parallelism is far below 1024), and
    // sched_setaffinity(0, ...) only reads the set we pass for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
