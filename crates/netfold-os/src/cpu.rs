//! CPU time of the calling thread (getrusage `RUSAGE_THREAD`), as the iperf3 server of
//! `netfold-apps` reports it (`cpu_util_*`), and CPU placement: pinning the calling thread to
//! one CPU (sched_setaffinity(2)), which the sharded runtime (`netfold_rt::shards`) and the
//! benchmarks use to keep a shard's protocol and application work on one core.
#![allow(unsafe_code)]

/// Pins the calling thread to `cpu` (modulo the CPUs online). Returns false if the kernel
/// refused (e.g. a cpuset that excludes that CPU); the thread then runs unpinned, which is
/// slower but correct, so callers report it rather than fail.
pub fn pin_current_thread(cpu: usize) -> bool {
    let cpu = cpu % online_cpus().min(libc::CPU_SETSIZE as usize);
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set, CPU_SET writes within it
    // (cpu < CPU_SETSIZE by the modulo above), and sched_setaffinity(0, ...) only reads the
    // set we pass, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// CPUs online. Not `available_parallelism`, which follows the calling thread's affinity mask:
/// once a thread is pinned it would report 1 and every later pin would land on CPU 0.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// The CPU the calling thread is running on right now (sched_getcpu(3)); `None` if the
/// kernel cannot say. A pinned thread always reads its pin.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and returns a CPU number or -1.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}
/// User and system seconds of the calling thread at a wall-clock instant.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub user_s: f64,
    pub sys_s: f64,
    pub wall: std::time::Instant,
}

pub fn sample() -> Option<Sample> {
    // SAFETY: rusage is plain data that getrusage fills; we pass a pointer to a live
    // zeroed local and read it only when the call succeeded.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: see above; RUSAGE_THREAD only reads the calling thread's counters.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if rc != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(Sample {
        user_s: secs(ru.ru_utime),
        sys_s: secs(ru.ru_stime),
        wall: std::time::Instant::now(),
    })
}

/// (total, user, system) percent of one CPU between two samples.
pub fn util(a: Sample, b: Sample) -> (f64, f64, f64) {
    let wall = b.wall.saturating_duration_since(a.wall).as_secs_f64();
    if wall <= 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let u = (b.user_s - a.user_s).max(0.0) / wall * 100.0;
    let s = (b.sys_s - a.sys_s).max(0.0) / wall * 100.0;
    (u + s, u, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_does_not_shrink_the_cpu_count_and_lands_on_the_cpu() {
        let before = online_cpus();
        let cpu = before - 1;
        let t = std::thread::spawn(move || (pin_current_thread(cpu), current_cpu(), online_cpus()));
        let (pinned, now_on, after) = t.join().unwrap();
        assert_eq!(after, before);
        // A restricted cpuset may refuse the pin; when it is taken the thread runs there.
        if pinned {
            assert_eq!(now_on, Some(cpu));
        }
    }
}
