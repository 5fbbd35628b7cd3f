//! A fast monotonic clock on CLOCK_MONOTONIC's scale, for the drivers' `Stack::poll(now, ..)`.
//!
//! Every driver reads the time once per poll, and in a busy TCP_RR loop (a transaction is
//! ~1.3 us) the vDSO's `clock_gettime` plus `std::time::Instant`'s conversions were 7-8% of
//! the profile. On x86_64 with an invariant TSC, and when the kernel itself keeps time with
//! the TSC (its clocksource is `tsc`: it has checked that the TSC is stable and synchronised
//! across CPUs, which on a VM it may not be), this clock reads `rdtsc` instead and converts
//! ticks to nanoseconds with a 32.32 fixed-point multiplier. Otherwise (another architecture,
//! no invariant TSC, another clocksource) it reads `clock_gettime(CLOCK_MONOTONIC)`.
//! `NETFOLD_CLOCK=tsc` or `NETFOLD_CLOCK=monotonic` forces the choice (`tsc` still needs
//! x86_64); any other value is the automatic choice.
//!
//! How the TSC time stays on CLOCK_MONOTONIC's scale: the clock is a line `ns = ns_a +
//! (tsc - tsc_a) * mult >> 32` from an anchor `(tsc_a, ns_a)`. At start it is calibrated over
//! ~1 ms against CLOCK_MONOTONIC. Whenever a reader finds the anchor more than ~50 ms of ticks
//! old it re-anchors: it takes a fresh (tsc, CLOCK_MONOTONIC) pair, re-estimates the rate from
//! the first pair (a baseline that grows with uptime, so the rate error shrinks), and starts a
//! new line at the old line's value at that tick (never lower: the time does not step back),
//! whose slope is slewed (by at most 1/16) so that it meets CLOCK_MONOTONIC one period later;
//! an error of more than 1 ms behind is stepped forward instead. So the clock does not drift
//! from CLOCK_MONOTONIC (which NTP may slew) by more than a few microseconds.
//!
//! The anchor is shared by all threads under a sequence lock; a reader never waits (while
//! another thread re-anchors it reads CLOCK_MONOTONIC). [`now_ns`] is non-decreasing per
//! thread (a thread-local guard also covers a thread moving between CPUs whose TSCs differ by
//! the few cycles the kernel tolerates).
//!
//! Nothing here is vendor-specific: AMD (Zen) and Intel (Nehalem on) both report the
//! invariant TSC in CPUID 0x80000007 EDX bit 8.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where the time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `rdtsc`, converted to CLOCK_MONOTONIC's scale.
    Tsc,
    /// `clock_gettime(CLOCK_MONOTONIC)` (the vDSO).
    Monotonic,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Tsc => "tsc",
            Source::Monotonic => "monotonic",
        }
    }
}

/// The fixed-point shift of the tick-to-nanosecond multiplier.
const SHIFT: u32 = 32;
/// How old (in nanoseconds of clock time) an anchor may get before a reader re-anchors.
const PERIOD_NS: u64 = 50_000_000;
/// An error larger than this behind CLOCK_MONOTONIC is stepped forward, not slewed.
const MAX_SLEW_NS: u64 = 1_000_000;
/// The initial calibration's length.
const CALIBRATION_NS: u64 = 1_000_000;

/// `delta` ticks at `mult` (nanoseconds per tick << 32) in nanoseconds, without
/// overflow for any `delta` (a u128 product; saturates at u64::MAX nanoseconds, 584 years).
#[inline]
pub fn ticks_to_ns(delta: u64, mult: u64) -> u64 {
    let ns = (u128::from(delta) * u128::from(mult)) >> SHIFT;
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// The multiplier for which `ticks` ticks are `ns` nanoseconds (`ticks` > 0), saturating.
pub fn mult_for(ns: u64, ticks: u64) -> u64 {
    let m = (u128::from(ns) << SHIFT) / u128::from(ticks.max(1));
    u64::try_from(m).unwrap_or(u64::MAX)
}

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always supported.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU and has no memory effects; it is only called
    // once `Clock::new` chose the TSC (or on a forced choice, still on x86_64).
    #[allow(unsafe_code)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn rdtsc() -> u64 {
    unreachable!("the TSC clock is only chosen on x86_64")
}

/// CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every P-, C- and T-state
/// (Intel "invariant TSC", AMD "TscInvariant").
#[cfg(target_arch = "x86_64")]
pub fn invariant_tsc() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x80000000 returns the highest
    // extended leaf, and 0x80000007 is only queried when it is within that range. (`__cpuid`
    // is a safe function since Rust 1.87; the block is for the declared rust-version 1.83.)
    #[allow(unsafe_code, unused_unsafe)]
    let max_ext = unsafe { __cpuid(0x8000_0000) }.eax;
    if max_ext < 0x8000_0007 {
        return false;
    }
    // SAFETY: as above; the leaf is supported (checked against the highest extended leaf).
    #[allow(unsafe_code, unused_unsafe)]
    let edx = unsafe { __cpuid(0x8000_0007) }.edx;
    edx & (1 << 8) != 0
}

#[cfg(not(target_arch = "x86_64"))]
pub fn invariant_tsc() -> bool {
    false
}

/// The kernel's current clocksource (`tsc`, `kvm-clock`, `hpet`, ...), if it can be read.
pub fn kernel_clocksource() -> Option<String> {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .ok()
        .map(|s| s.trim().to_string())
}

/// The source for a `NETFOLD_CLOCK` value and the machine's facts: `tsc` forces the TSC on
/// x86_64, `monotonic` forces CLOCK_MONOTONIC; otherwise the TSC only if it is invariant and
/// the kernel's clocksource is `tsc`.
pub fn choose(
    env: Option<&str>,
    x86_64: bool,
    invariant: bool,
    clocksource: Option<&str>,
) -> Source {
    match env.map(str::trim) {
        Some("monotonic") => Source::Monotonic,
        Some("tsc") if x86_64 => Source::Tsc,
        Some("tsc") => Source::Monotonic,
        _ if x86_64 && invariant && clocksource == Some("tsc") => Source::Tsc,
        _ => Source::Monotonic,
    }
}

/// A (tsc, CLOCK_MONOTONIC) pair taken close together: the best of a few tries (the one whose
/// two TSC reads around `clock_gettime` are closest), the TSC at the middle.
fn sample() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = rdtsc();
        let ns = monotonic_ns();
        let b = rdtsc();
        let w = b.wrapping_sub(a);
        if w < best.0 {
            best = (w, a + w / 2, ns);
        }
    }
    (best.1, best.2)
}

/// The TSC line's state, shared by all threads.
struct Tsc {
    /// The first (calibration) pair: the rate is re-estimated from it at every re-anchor.
    tsc0: u64,
    ns0: u64,
    /// Even while the anchor is stable, odd while a thread rewrites it.
    seq: AtomicU64,
    anchor_tsc: AtomicU64,
    anchor_ns: AtomicU64,
    /// The current line's slope (slewed), nanoseconds per tick << SHIFT.
    mult: AtomicU64,
    /// Ticks after the anchor at which a reader re-anchors.
    period_ticks: AtomicU64,
}

impl Tsc {
    fn calibrate() -> Tsc {
        let (t0, n0) = sample();
        let (mut t1, mut n1) = (t0, n0);
        while n1.saturating_sub(n0) < CALIBRATION_NS || t1 <= t0 {
            (t1, n1) = sample();
        }
        let mult = mult_for(n1 - n0, t1 - t0);
        Tsc {
            tsc0: t0,
            ns0: n0,
            seq: AtomicU64::new(0),
            anchor_tsc: AtomicU64::new(t1),
            anchor_ns: AtomicU64::new(n1),
            mult: AtomicU64::new(mult),
            period_ticks: AtomicU64::new(period_ticks(mult)),
        }
    }

    /// The anchor, or None while a writer holds it.
    #[inline]
    fn anchor(&self) -> Option<(u64, u64, u64, u64)> {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            return None;
        }
        let a = (
            self.anchor_tsc.load(Ordering::Relaxed),
            self.anchor_ns.load(Ordering::Relaxed),
            self.mult.load(Ordering::Relaxed),
            self.period_ticks.load(Ordering::Relaxed),
        );
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == s1).then_some(a)
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        let Some((at, an, mult, period)) = self.anchor() else {
            return monotonic_ns();
        };
        let t = rdtsc();
        // A read ordered before the anchor's (the TSC read is not serialising) counts as at
        // the anchor.
        let d = t.saturating_sub(at);
        if d > period {
            if let Some(ns) = self.reanchor(at, an, mult) {
                return ns;
            }
        }
        an.saturating_add(ticks_to_ns(d, mult))
    }

    /// Starts a new line (see the module documentation); None if another thread is at it.
    #[cold]
    fn reanchor(&self, at: u64, an: u64, mult: u64) -> Option<u64> {
        let s = self.seq.load(Ordering::Relaxed);
        if s & 1 == 1
            || self
                .seq
                .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        fence(Ordering::Release);
        if self.anchor_tsc.load(Ordering::Relaxed) != at {
            // Another thread re-anchored between our read and our lock: keep its line.
            self.seq.store(s + 2, Ordering::Release);
            return None;
        }
        let (t, mono) = sample();
        let ours = an.saturating_add(ticks_to_ns(t.saturating_sub(at), mult));
        let (start, new_mult, period) = next_line(self.tsc0, self.ns0, t, mono, ours, mult);
        self.anchor_tsc.store(t, Ordering::Relaxed);
        self.anchor_ns.store(start, Ordering::Relaxed);
        self.mult.store(new_mult, Ordering::Relaxed);
        self.period_ticks.store(period, Ordering::Relaxed);
        self.seq.store(s + 2, Ordering::Release);
        Some(start)
    }
}

/// Ticks in [`PERIOD_NS`] at `mult`.
fn period_ticks(mult: u64) -> u64 {
    mult_for(PERIOD_NS, 1)
        .checked_div(mult)
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The line that follows the current one at tick `t`, where CLOCK_MONOTONIC reads `mono` and
/// the current line `ours`: its start (never below `ours`), slope and period (in ticks).
/// `(tsc0, ns0)` is the first pair, from which the rate is estimated.
pub fn next_line(tsc0: u64, ns0: u64, t: u64, mono: u64, ours: u64, mult: u64) -> (u64, u64, u64) {
    let rate = if t > tsc0 && mono > ns0 {
        mult_for(mono - ns0, t - tsc0)
    } else {
        mult
    };
    let period = period_ticks(rate);
    if mono > ours.saturating_add(MAX_SLEW_NS) {
        // Far behind (a bad calibration): step forward, which keeps the time monotonic.
        return (mono, rate, period);
    }
    // Meet CLOCK_MONOTONIC one period from now: cover (mono + PERIOD - ours) in `period`
    // ticks, within rate +- rate/16.
    let want = mono.saturating_add(PERIOD_NS).saturating_sub(ours);
    let slewed = mult_for(want, period).clamp(rate - rate / 16, rate.saturating_add(rate / 16));
    (ours, slewed, period)
}

/// A clock of one source. The process's clock is [`now_ns`]; a `Clock` of its own is for
/// tests and for comparing sources.
pub struct Clock {
    tsc: Option<Tsc>,
}

impl Clock {
    /// A clock reading `source` (the TSC is calibrated now, ~1 ms). `Source::Tsc` off x86_64
    /// is CLOCK_MONOTONIC.
    pub fn new(source: Source) -> Clock {
        let tsc = (source == Source::Tsc && cfg!(target_arch = "x86_64")).then(Tsc::calibrate);
        Clock { tsc }
    }

    /// The source [`choose`] picks for this machine and `NETFOLD_CLOCK`.
    pub fn detect() -> Clock {
        let env = std::env::var("NETFOLD_CLOCK").ok();
        let x86 = cfg!(target_arch = "x86_64");
        let cs = if x86 { kernel_clocksource() } else { None };
        let src = choose(env.as_deref(), x86, x86 && invariant_tsc(), cs.as_deref());
        Clock::new(src)
    }

    pub fn source(&self) -> Source {
        if self.tsc.is_some() {
            Source::Tsc
        } else {
            Source::Monotonic
        }
    }

    /// Nanoseconds on CLOCK_MONOTONIC's scale.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        match &self.tsc {
            Some(t) => t.now_ns(),
            None => monotonic_ns(),
        }
    }
}

fn global() -> &'static Clock {
    static CLOCK: OnceLock<Clock> = OnceLock::new();
    CLOCK.get_or_init(Clock::detect)
}

thread_local! {
    static LAST: Cell<u64> = const { Cell::new(0) };
}

/// The process's clock: nanoseconds on CLOCK_MONOTONIC's scale, non-decreasing per thread.
/// The first call chooses the source (and calibrates the TSC, ~1 ms).
#[inline]
pub fn now_ns() -> u64 {
    let t = global().now_ns();
    LAST.with(|l| {
        let v = t.max(l.get());
        l.set(v);
        v
    })
}

/// The source the process's clock reads.
pub fn source() -> Source {
    global().source()
}

/// A starting point on the process's clock, for times since then (a driver's epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    ns: u64,
}

impl Epoch {
    /// Now.
    pub fn now() -> Epoch {
        Epoch { ns: now_ns() }
    }

    /// The moment `at` (a `std::time::Instant`, CLOCK_MONOTONIC on Linux) on this clock.
    pub fn from_std(at: std::time::Instant) -> Epoch {
        let (ns, std_now) = (now_ns(), std::time::Instant::now());
        let ago = std_now.saturating_duration_since(at).as_nanos();
        Epoch {
            ns: ns.saturating_sub(u64::try_from(ago).unwrap_or(u64::MAX)),
        }
    }

    /// Nanoseconds since the epoch (0 before it).
    #[inline]
    pub fn elapsed_ns(&self) -> u64 {
        now_ns().saturating_sub(self.ns)
    }

    /// Microseconds since the epoch.
    #[inline]
    pub fn elapsed_us(&self) -> u64 {
        self.elapsed_ns() / 1_000
    }

    /// Time since the epoch.
    pub fn elapsed(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.elapsed_ns())
    }

    /// Time since the epoch as a stack's clock reading.
    #[inline]
    pub fn instant(&self) -> netfold::time::Instant {
        netfold::time::Instant::from_micros(self.elapsed_us())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_large_values() {
        // 2.6 GHz: 1/2.6 ns per tick.
        let mult = mult_for(1_000_000_000, 2_600_000_000);
        assert_eq!(ticks_to_ns(2_600_000_000, mult), 999_999_999);
        // Ten years of uptime at 2.6 GHz (8.2e17 ticks): no overflow, within 1 ppm.
        let ten_years_ticks = 2_600_000_000u64 * 86_400 * 3_650;
        let ns = ticks_to_ns(ten_years_ticks, mult);
        let want = 1_000_000_000u64 * 86_400 * 3_650;
        assert!(ns <= want && want - ns < want / 1_000_000, "{ns} vs {want}");
        // The largest tick count: saturates, does not wrap.
        assert_eq!(ticks_to_ns(u64::MAX, u64::MAX), u64::MAX);
        let big = ticks_to_ns(u64::MAX, mult);
        assert!(big > u64::MAX / 4, "{big}");
        // Monotonic in the tick count at any magnitude.
        for base in [0u64, 1 << 40, 1 << 60, u64::MAX - 10] {
            let mut last = 0;
            for d in 0..10 {
                let v = ticks_to_ns(base + d, mult);
                assert!(v >= last);
                last = v;
            }
        }
        assert_eq!(mult_for(5, 0), 5 << 32);
        assert_eq!(mult_for(u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn next_line_is_continuous_and_converges() {
        let mult = mult_for(1, 3); // 3 GHz
                                   // On time: the new line starts where the old one is.
        let (s, m, p) = next_line(0, 0, 3_000_000_000, 1_000_000_000, 1_000_000_000, mult);
        assert_eq!(s, 1_000_000_000);
        assert!(p > 0);
        assert!(m.abs_diff(mult) <= mult / 1_000, "{m} {mult}");
        // 10 us ahead of CLOCK_MONOTONIC: starts at our value (no step back), slower slope
        // that meets it one period later.
        let (s, m, p) = next_line(0, 0, 3_000_000_000, 1_000_000_000, 1_000_010_000, mult);
        assert_eq!(s, 1_000_010_000);
        let at_next = s + ticks_to_ns(p, m);
        let mono_next = 1_000_000_000 + ticks_to_ns(p, mult);
        assert!(at_next.abs_diff(mono_next) < 1_000, "{at_next} {mono_next}");
        // 10 us behind: faster.
        let (s, m, p) = next_line(0, 0, 3_000_000_000, 1_000_010_000, 1_000_000_000, mult);
        assert_eq!(s, 1_000_000_000);
        assert!(m > mult);
        let at_next = s + ticks_to_ns(p, m);
        let mono_next = 1_000_010_000 + ticks_to_ns(p, mult);
        assert!(at_next.abs_diff(mono_next) < 1_000, "{at_next} {mono_next}");
        // 5 ms behind: stepped forward.
        let (s, _, _) = next_line(0, 0, 3_000_000_000, 1_005_000_000, 1_000_000_000, mult);
        assert_eq!(s, 1_005_000_000);
        // 40 ms ahead: slewed at the bounded rate, never stepped back.
        let (s, m, _) = next_line(0, 0, 3_000_000_000, 1_000_000_000, 1_040_000_000, mult);
        assert_eq!(s, 1_040_000_000);
        assert!(m >= mult - mult / 16 - 1);
        // Large uptimes: no overflow.
        let t = 3_000_000_000u64 * 86_400 * 3_650;
        let mono = 1_000_000_000u64 * 86_400 * 3_650;
        let (s, m, _) = next_line(0, 0, t, mono, mono, mult);
        assert_eq!(s, mono);
        assert!(m.abs_diff(mult) <= mult / 1_000);
    }

    #[test]
    fn choice() {
        assert_eq!(choose(None, true, true, Some("tsc")), Source::Tsc);
        assert_eq!(
            choose(None, true, true, Some("kvm-clock")),
            Source::Monotonic
        );
        assert_eq!(choose(None, true, false, Some("tsc")), Source::Monotonic);
        assert_eq!(choose(None, false, true, Some("tsc")), Source::Monotonic);
        assert_eq!(
            choose(Some("monotonic"), true, true, Some("tsc")),
            Source::Monotonic
        );
        assert_eq!(choose(Some("tsc"), true, false, Some("hpet")), Source::Tsc);
        assert_eq!(choose(Some("tsc"), false, false, None), Source::Monotonic);
        assert_eq!(choose(Some("bogus"), true, true, Some("tsc")), Source::Tsc);
    }

    fn check_clock(c: &Clock) {
        // Monotonic over many reads.
        let mut last = c.now_ns();
        for _ in 0..2_000_000 {
            let t = c.now_ns();
            assert!(t >= last, "went back: {last} -> {t}");
            last = t;
        }
        // Agrees with CLOCK_MONOTONIC, across sleeps that cross re-anchors (50 ms each).
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(60));
            let (a, b, c2) = (monotonic_ns(), c.now_ns(), monotonic_ns());
            // Generous: a VM may deschedule us between the reads.
            let tol = 2_000_000;
            assert!(
                b + tol >= a && b <= c2 + tol,
                "clock {b} vs CLOCK_MONOTONIC {a}..{c2} ({:?})",
                c.source()
            );
        }
        // Elapsed time over a sleep is the sleep's.
        let (m0, t0) = (monotonic_ns(), c.now_ns());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (m1, t1) = (monotonic_ns(), c.now_ns());
        let (dm, dt) = (m1 - m0, t1 - t0);
        assert!(dt.abs_diff(dm) < 2_000_000, "{dt} vs {dm}");
        assert!(dt >= 49_000_000, "{dt}");
    }

    #[test]
    fn tsc_clock_tracks_monotonic() {
        let c = Clock::new(Source::Tsc);
        if !cfg!(target_arch = "x86_64") {
            assert_eq!(c.source(), Source::Monotonic);
        }
        check_clock(&c);
    }

    #[test]
    fn monotonic_clock() {
        let c = Clock::new(Source::Monotonic);
        assert_eq!(c.source(), Source::Monotonic);
        check_clock(&c);
    }

    #[test]
    fn shared_across_threads() {
        let c = std::sync::Arc::new(Clock::new(Source::Tsc));
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let c = std::sync::Arc::clone(&c);
                std::thread::spawn(move || {
                    let end = monotonic_ns() + 150_000_000;
                    let mut n = 0u64;
                    while monotonic_ns() < end {
                        let (a, b, c2) = (monotonic_ns(), c.now_ns(), monotonic_ns());
                        assert!(b + 2_000_000 >= a && b <= c2 + 2_000_000, "{a} {b} {c2}");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().unwrap() > 0);
        }
    }

    #[test]
    fn process_clock_and_epoch() {
        let e = Epoch::now();
        let mut last = 0;
        for _ in 0..100_000 {
            let t = e.elapsed_ns();
            assert!(t >= last);
            last = t;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(e.elapsed() >= std::time::Duration::from_millis(19));
        let s = std::time::Instant::now();
        let e2 = Epoch::from_std(s);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (a, b) = (s.elapsed(), e2.elapsed());
        assert!(
            a.as_nanos().abs_diff(b.as_nanos()) < 2_000_000,
            "{a:?} {b:?}"
        );
        let _ = source();
    }
}
