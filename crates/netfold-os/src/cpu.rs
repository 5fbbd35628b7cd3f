//! CPU time of the calling thread (getrusage `RUSAGE_THREAD`), as the iperf3 server of
//! `netfold-apps` reports it (`cpu_util_*`).
#![allow(unsafe_code)]
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
