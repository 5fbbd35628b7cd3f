//! Kernel choice by measurement.
//!
//! Why: kernels tuned on one microarchitecture lose on another (the AVX-512 copy that won on
//! an Intel Xeon loses to the AVX2 one on an AMD Zen 4, whose 512-bit units are two 256-bit
//! halves), and the machines netfold runs on change. Linux picks its xor and RAID-6 routines by
//! timing them at boot (`calibrate_xor_blocks`, `raid6_select_algo`); netfold does the same on
//! first use: every candidate copy, checksum and fused copy+checksum kernel whose CPU features
//! are detected is timed at one size per size class, and per class the kernel kept is the
//! first in the family's preference order (baseline first) within `MARGIN` of the fastest.
//! The C library's `memcpy` is the first copy candidate, so another copy is only used when it
//! measured clearly (more than `MARGIN`) faster than `memcpy`.
//!
//! Timing is built for a noisy shared machine (docs/BENCHMARKS.md, "Stable kernel choice"):
//! - Samples are long (`SAMPLE`, ~1 us: as many calls as fit, counted per candidate in the
//!   warm-up). The clock is `Instant` (vDSO `clock_gettime` on the TSC); on an AMD Zen 5 VM the
//!   TSC advances in 10 ns steps and a clock read costs 20-30 ns, so the old 16 KiB samples (one
//!   ~65 ns call at 16 KiB) carried +-15% of quantization plus the read cost, which compressed
//!   differences: `avx512` over `avx512-vbmi` at 16 KiB measured 1.07x there, 1.20x in a long
//!   reference run of the same harness.
//! - Everything is warmed before any sample counts: the scratch pages are written (no page
//!   faults or zero-page copy-on-write inside a sample), and untimed passes run every candidate
//!   for at least `WARMUP` (first-call costs, instruction cache, and the wide-vector power-up:
//!   Intel's AVX-512 licence change, and on Zen the vector unit waking after idle, slow the
//!   first tens of microseconds of 512-bit code; the old code's warm-up was one batch per
//!   candidate, ~20 us in all).
//! - Candidates are interleaved: every round times every (family, class, candidate) once, in a
//!   rotating order, so a burst of interference or a clock change hits all candidates alike
//!   instead of one candidate's whole block of samples. Each round uses the next of eight
//!   buffer layouts (alignments and page distances, see `LAYOUTS`: which kernel is fastest
//!   depends on the distance between source and destination modulo 4096), and a candidate's
//!   score is the mean over the layouts of its MINIMUM time in that layout (interference only
//!   ever adds time).
//! - Candidates more than `DROP_RATIO` slower than their class's best after two samples per
//!   layout stop being timed (they cannot win under any noise), leaving the budget to the close
//!   ones. The first candidate of a family (the baseline) is always timed.
//! - Rounds stop at `ROUNDS` or when `BUDGET` is spent (warm-up included).
//!
//! `NETFOLD_KERNELS` forces a choice: `copy=NAME,csum=NAME,fused=NAME` (any subset; a family
//! not named is measured). An unknown family or kernel, or one this CPU cannot run, is reported
//! (stderr and [`Calibration::warnings`]) and that family is measured instead.
#![allow(unsafe_code)]

use super::portable;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Raw copy kernel: `(dst, src, n)` over valid, non-overlapping ranges.
pub(crate) type CopyRaw = unsafe fn(*mut u8, *const u8, usize);
/// Raw little-endian-word sum of at most `MAX_CHUNK` valid bytes.
pub(crate) type SumRaw = unsafe fn(*const u8, usize) -> u16;
/// Raw fused copy + little-endian-word sum of at most `MAX_CHUNK` bytes.
pub(crate) type FusedRaw = unsafe fn(*mut u8, *const u8, usize) -> u16;

/// Inclusive upper bounds of the first three size classes; the fourth is everything larger.
/// 256: up to four 64-byte vectors, copied without a loop; 4096: a page, which covers every
/// MTU-1500 segment (the 1448-byte MSS); 32 KiB - 1: below this source plus destination still
/// fit the L1 data cache (32-48 KiB on current x86), above it `rep movsb` avoids reading the
/// destination lines (measured 1.5x faster on an Intel Xeon, see docs/BENCHMARKS.md).
pub const CLASS_MAX: [usize; 3] = [256, 4096, (32 << 10) - 1];

/// The size timed for each class: 200 B (a small message or ACK-sized payload), 1448 B (the
/// MSS at MTU 1500), 16 KiB and 64 KiB (the stream benchmark's message size).
pub const CLASS_TIMED_LEN: [usize; 4] = [200, 1448, 16 << 10, 64 << 10];

/// The buffer layouts the rounds cycle through: (source offset from a 64-byte boundary,
/// destination offset, distance of the destination's page from the source's page modulo
/// 4096). Offsets: both aligned; 54 = 14 + 20 + 20, where a TCP payload starts in an Ethernet
/// frame, on either side; and an arbitrary odd pair. Distances: copies run at very different
/// speeds depending on `(dst - src) mod 4096` (4K aliasing: a load whose address matches an
/// older, still buffered store in the low 12 bits waits for it), and the ORDER of the kernels
/// changes with it: on an AMD Zen 5 at 16 KiB, `avx512` 176 GB/s and `avx512-vbmi` 185 at a
/// distance of 144 bytes, 255 and 203 at 2048 (docs/BENCHMARKS.md). The old scratch buffers were
/// two heap blocks whose distance depended on what the process had allocated before, so the
/// choice depended on the heap. The stack copies between buffers at arbitrary distances, so
/// calibration measures at eight distances spread evenly over the page (256 + 512 k), each
/// alignment pair at two of them.
const LAYOUTS: [(usize, usize, usize); 8] = [
    (0, 0, 256),
    (54, 0, 768),
    (0, 54, 1280),
    (13, 41, 1792),
    (0, 0, 2304),
    (54, 0, 2816),
    (0, 54, 3328),
    (13, 41, 3840),
];
const NL: usize = LAYOUTS.len();

/// At most this many timed rounds (each layout timed `ROUNDS / 8` times per candidate).
const ROUNDS: usize = 48;
/// Stop starting rounds after this much time since the start, warm-up included (the task
/// allows 5 ms for the whole choice; one round takes ~40-80 us here).
const BUDGET: Duration = Duration::from_micros(3500);
/// Target length of one timed sample. Long against the clock's 10 ns steps and 20-30 ns read
/// cost (<= 1% and ~2-3%, the latter alike for every candidate), short enough for ~40 rounds
/// of ~70 candidates in the budget: many samples make the minimum a steadier estimate.
const SAMPLE: Duration = Duration::from_nanos(1000);
/// Untimed warm-up passes over every candidate run for at least this long (and at least
/// twice): several times the ~10-50 us an AVX-512 licence or power state change takes.
const WARMUP: Duration = Duration::from_micros(250);
/// Per size class: a candidate replaces one earlier in preference order (the baseline first)
/// only if it is more than this much faster ([`choose`]). Why: repeated start-up calibrations
/// on a busy 2-vCPU machine scatter by a few percent even with long interleaved samples;
/// without a margin two near-equal kernels flip between processes, and a kernel that measured
/// 2% ahead in 4 ms can be behind in steady state. 4% is above that scatter and still takes
/// every real win above 256 bytes (the wins measured are 10-50%). The smallest class gets 15%:
/// a 200-byte call is ~2 ns, and on an AMD Zen 5 glibc `memcpy` timed ~11% slow for tens of
/// milliseconds at a time in about 4 of 10 processes started by `netfold csum` (all layouts,
/// every calibration repeated in that window), while the same processes measured it 2-5%
/// FASTER than the `avx512` copy one second later. The cause was not found: the slowdown was
/// the same in every buffer layout, did not occur with ASLR off (0 of 30), and neither
/// removing the timing loop's stack spills nor a second timing loop at another code address
/// and stack depth changed it.
pub const MARGIN: [f64; 4] = [0.15, 0.04, 0.04, 0.04];
/// Candidates scoring this many times their class's best are dropped from further rounds.
const DROP_RATIO: f64 = 1.3;

/// One candidate kernel.
pub(crate) struct Cand<F> {
    pub(crate) name: &'static str,
    pub(crate) f: F,
    /// Whether this CPU can run it (the kernel's `target_feature`s were detected).
    pub(crate) detected: fn() -> bool,
}

fn always() -> bool {
    true
}

/// The C library's copy: `copy_nonoverlapping` with a run-time length compiles to `memcpy`
/// (it is also what `<[u8]>::copy_from_slice` calls).
///
/// # Safety
/// Ranges valid for `n` bytes, non-overlapping.
unsafe fn libc_copy(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: the caller guarantees both ranges are valid for `n` bytes and disjoint.
    unsafe { core::ptr::copy_nonoverlapping(s, d, n) }
}

/// A candidate only off x86_64 (there, `sse2` is the portable baseline).
///
/// # Safety
/// Ranges valid for `n` bytes, non-overlapping.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
unsafe fn portable_copy(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: the caller guarantees both ranges are valid for `n` bytes and disjoint.
    let (dst, src) = unsafe {
        (
            core::slice::from_raw_parts_mut(d, n),
            core::slice::from_raw_parts(s, n),
        )
    };
    portable::copy_words(dst, src);
}

/// # Safety
/// `s` valid for `n` bytes.
unsafe fn portable_sum_le(s: *const u8, n: usize) -> u16 {
    // SAFETY: the caller guarantees the range is valid.
    portable::sum_le(unsafe { core::slice::from_raw_parts(s, n) })
}

/// # Safety
/// Ranges valid for `n` bytes, non-overlapping.
unsafe fn portable_copy_sum_le(d: *mut u8, s: *const u8, n: usize) -> u16 {
    // SAFETY: the caller guarantees both ranges are valid for `n` bytes and disjoint.
    let (dst, src) = unsafe {
        (
            core::slice::from_raw_parts_mut(d, n),
            core::slice::from_raw_parts(s, n),
        )
    };
    portable::copy_with_checksum(dst, src).swap_bytes()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::{kernels, x86_copy, x86_csum, x86_fused};
    use super::*;

    fn erms() -> bool {
        std::arch::is_x86_feature_detected!("ermsb")
    }

    fn erms_avx512() -> bool {
        erms() && kernels::has_avx512()
    }

    pub(super) static COPY: &[Cand<CopyRaw>] = &[
        Cand {
            name: "memcpy",
            f: libc_copy,
            detected: always,
        },
        Cand {
            name: "rep-movsb",
            f: x86_copy::rep_movsb_raw,
            detected: erms,
        },
        Cand {
            name: "sse2",
            f: x86_copy::sse2_raw,
            detected: always,
        },
        Cand {
            name: "avx2",
            f: x86_copy::avx2_raw,
            detected: kernels::has_avx2,
        },
        Cand {
            name: "avx512",
            f: x86_copy::avx512_raw,
            detected: kernels::has_avx512,
        },
        Cand {
            name: "avx512-vbmi",
            f: x86_copy::avx512_vbmi_raw,
            detected: kernels::has_avx512_vbmi,
        },
    ];

    pub(super) static SUM: &[Cand<SumRaw>] = &[
        Cand {
            name: "portable",
            f: portable_sum_le,
            detected: always,
        },
        Cand {
            name: "avx2",
            f: x86_csum::sum_le_avx2,
            detected: kernels::has_avx2,
        },
        Cand {
            name: "avx512",
            f: x86_csum::sum_le_avx512,
            detected: kernels::has_avx512,
        },
        Cand {
            name: "avx512-vnni",
            f: x86_csum::sum_le_avx512_vnni,
            detected: kernels::has_avx512_vnni,
        },
    ];

    pub(super) static FUSED: &[Cand<FusedRaw>] = &[
        Cand {
            name: "portable",
            f: portable_copy_sum_le,
            detected: always,
        },
        Cand {
            name: "avx2",
            f: x86_csum::copy_sum_le_avx2,
            detected: kernels::has_avx2,
        },
        Cand {
            name: "avx512",
            f: x86_fused::copy_sum_le_avx512,
            detected: kernels::has_avx512,
        },
        Cand {
            name: "avx512-vbmi",
            f: x86_fused::copy_sum_le_avx512_vbmi,
            detected: kernels::has_avx512_vbmi,
        },
        Cand {
            name: "avx512-topm",
            f: x86_fused::copy_sum_avx512_topm,
            detected: kernels::has_avx512,
        },
        Cand {
            name: "vbmi-topm",
            f: x86_fused::copy_sum_vbmi_topm,
            detected: kernels::has_avx512_vbmi,
        },
        Cand {
            name: "rep-movsb-chunk",
            f: x86_fused::copy_sum_rep_movsb_chunk,
            detected: erms_avx512,
        },
    ];
}

#[cfg(target_arch = "x86_64")]
use x86::{COPY, FUSED, SUM};

#[cfg(not(target_arch = "x86_64"))]
static COPY: &[Cand<CopyRaw>] = &[
    Cand {
        name: "memcpy",
        f: libc_copy,
        detected: always,
    },
    Cand {
        name: "portable",
        f: portable_copy,
        detected: always,
    },
];
#[cfg(not(target_arch = "x86_64"))]
static SUM: &[Cand<SumRaw>] = &[Cand {
    name: "portable",
    f: portable_sum_le,
    detected: always,
}];
#[cfg(not(target_arch = "x86_64"))]
static FUSED: &[Cand<FusedRaw>] = &[Cand {
    name: "portable",
    f: portable_copy_sum_le,
    detected: always,
}];

/// A kernel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// [`super::copy`].
    Copy,
    /// [`super::checksum`].
    Checksum,
    /// [`super::copy_with_checksum`].
    Fused,
}

impl Family {
    /// The name `NETFOLD_KERNELS` and the reports use: "copy", "csum" or "fused".
    pub fn name(self) -> &'static str {
        match self {
            Family::Copy => "copy",
            Family::Checksum => "csum",
            Family::Fused => "fused",
        }
    }

    fn names(self) -> Vec<&'static str> {
        match self {
            Family::Copy => COPY.iter().map(|c| c.name).collect(),
            Family::Checksum => SUM.iter().map(|c| c.name).collect(),
            Family::Fused => FUSED.iter().map(|c| c.name).collect(),
        }
    }

    fn detected(self, name: &str) -> Option<bool> {
        let d = match self {
            Family::Copy => COPY.iter().find(|c| c.name == name).map(|c| c.detected),
            Family::Checksum => SUM.iter().find(|c| c.name == name).map(|c| c.detected),
            Family::Fused => FUSED.iter().find(|c| c.name == name).map(|c| c.detected),
        };
        d.map(|f| f())
    }
}

const FAMILIES: [Family; 3] = [Family::Copy, Family::Checksum, Family::Fused];

/// Names of the candidate kernels of `family` this CPU can run (the ones calibration times).
pub fn candidates(family: Family) -> Vec<&'static str> {
    family
        .names()
        .into_iter()
        .filter(|n| family.detected(n) == Some(true))
        .collect()
}

/// Every candidate name of `family`, detected or not.
pub fn all_candidates(family: Family) -> Vec<&'static str> {
    family.names()
}

/// Kernels forced by `NETFOLD_KERNELS` (or by a caller), one optional name per family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forced {
    /// Forced copy kernel.
    pub copy: Option<&'static str>,
    /// Forced checksum kernel.
    pub checksum: Option<&'static str>,
    /// Forced fused kernel.
    pub fused: Option<&'static str>,
}

impl Forced {
    fn get(&self, f: Family) -> Option<&'static str> {
        match f {
            Family::Copy => self.copy,
            Family::Checksum => self.checksum,
            Family::Fused => self.fused,
        }
    }
}

/// Parses a `NETFOLD_KERNELS` value: comma-separated `FAMILY=KERNEL`, FAMILY one of `copy`,
/// `csum` (or `checksum`), `fused`. Returns what it could use and one message per item it
/// rejected (unknown family, unknown kernel, kernel this CPU cannot run, malformed item);
/// a rejected family is left to measurement. Never panics.
pub fn parse_forced(spec: &str) -> (Forced, Vec<String>) {
    let mut out = Forced::default();
    let mut errs = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((fam, name)) = item.split_once('=') else {
            errs.push(format!(
                "NETFOLD_KERNELS: {item:?} is not FAMILY=KERNEL (e.g. copy=avx2,csum=avx512)"
            ));
            continue;
        };
        let fam = match fam.trim() {
            "copy" => Family::Copy,
            "csum" | "checksum" => Family::Checksum,
            "fused" => Family::Fused,
            other => {
                errs.push(format!(
                    "NETFOLD_KERNELS: unknown family {other:?} (known: copy, csum, fused)"
                ));
                continue;
            }
        };
        let name = name.trim();
        let Some(&known) = fam.names().iter().find(|n| **n == name) else {
            errs.push(format!(
                "NETFOLD_KERNELS: unknown {} kernel {name:?} (known: {}); measuring instead",
                fam.name(),
                fam.names().join(", ")
            ));
            continue;
        };
        if fam.detected(known) != Some(true) {
            errs.push(format!(
                "NETFOLD_KERNELS: {} kernel {known:?} needs CPU features this machine lacks \
                 (runnable: {}); measuring instead",
                fam.name(),
                candidates(fam).join(", ")
            ));
            continue;
        }
        match fam {
            Family::Copy => out.copy = Some(known),
            Family::Checksum => out.checksum = Some(known),
            Family::Fused => out.fused = Some(known),
        }
    }
    (out, errs)
}

/// One candidate's measurement in one size class.
#[derive(Debug, Clone)]
pub struct Timing {
    /// Kernel name.
    pub name: &'static str,
    /// Score: the mean over the buffer layouts (alignments and page distances) of the minimum
    /// nanoseconds per call at [`CLASS_TIMED_LEN`] of the class.
    pub ns: f64,
    /// Timed samples behind the score (fewer than the rounds if it was dropped as too slow).
    pub samples: usize,
}

/// What was chosen for one size class of one family.
#[derive(Debug, Clone)]
pub struct ClassChoice {
    /// Largest length in the class (`None`: unbounded).
    pub max_len: Option<usize>,
    /// Length timed.
    pub timed_len: usize,
    /// Chosen kernel.
    pub chosen: &'static str,
    /// Every candidate timed (empty when the family was forced).
    pub timings: Vec<Timing>,
}

/// The choice for one family.
#[derive(Debug, Clone)]
pub struct FamilyChoice {
    /// The family.
    pub family: Family,
    /// Set if `NETFOLD_KERNELS` (or the caller) forced the kernel for every class.
    pub forced: Option<&'static str>,
    /// One entry per size class, in [`CLASS_MAX`] order.
    pub classes: Vec<ClassChoice>,
}

/// The result of choosing the kernels: per family and size class, the timings and the choice.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// Copy, checksum and fused, in that order.
    pub families: Vec<FamilyChoice>,
    /// Rejected `NETFOLD_KERNELS` items.
    pub warnings: Vec<String>,
    /// Rounds of interleaved timing run (after the warm-up).
    pub rounds: usize,
    /// Wall time of the untimed warm-up (page touching and warm-up passes), part of `elapsed`.
    pub warmup: Duration,
    /// Wall time spent choosing.
    pub elapsed: Duration,
    /// The margin per size class the choice used (see [`MARGIN`]).
    pub margin: [f64; 4],
}

impl Calibration {
    /// The choice of `family`.
    pub fn family(&self, family: Family) -> &FamilyChoice {
        // `families` always holds the three families in FAMILIES order.
        &self.families[FAMILIES.iter().position(|f| *f == family).unwrap_or(0)]
    }

    /// One-line summary, e.g. `copy=avx2/avx2/avx2/rep-movsb csum=avx512 fused=avx2`
    /// (one name per size class, or one name when all classes agree).
    pub fn summary(&self) -> String {
        self.families
            .iter()
            .map(|f| {
                let names: Vec<&str> = f.classes.iter().map(|c| c.chosen).collect();
                let all_same = names.windows(2).all(|w| w[0] == w[1]);
                let body = if all_same {
                    names.first().copied().unwrap_or("-").to_string()
                } else {
                    names.join("/")
                };
                format!("{}={body}", f.family.name())
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The chosen raw kernels, per size class.
pub(crate) struct Chosen {
    pub(crate) copy: [CopyRaw; 4],
    pub(crate) sum: [SumRaw; 4],
    pub(crate) fused: [FusedRaw; 4],
}

/// Scratch memory for the timing: one allocation holding a page-aligned source region and,
/// one region further, the destination, placed per layout (see [`LAYOUTS`]).
struct Scratch {
    buf: Vec<u8>,
    /// Offset of the first page boundary in `buf`.
    base: usize,
}

/// Bytes of a source region: the largest timed length plus an offset, rounded up to pages.
const REGION: usize = (CLASS_TIMED_LEN[3] + 64).div_ceil(4096) * 4096;

impl Scratch {
    fn new() -> Self {
        // Page alignment slack, the source region, the destination region shifted by up to
        // one page.
        let len = 4096 + REGION + 4096 + REGION;
        // Every byte written, not just allocated: a zeroed allocation is mapped to the shared
        // zero page until first written, and the page faults must not land in a timed sample.
        let buf: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let base = (4096 - (buf.as_ptr() as usize & 4095)) & 4095;
        Scratch { buf, base }
    }

    /// (destination, source) for `n <= CLASS_TIMED_LEN[3]` bytes in layout `l`.
    fn ptrs(&mut self, l: usize, n: usize) -> (*mut u8, *const u8) {
        let (sa, da, dist) = LAYOUTS[l];
        let (src, dst) = self.buf[self.base..].split_at_mut(REGION);
        // In bounds: sa, da < 64, dist < 4096, n + 64 <= REGION, and `buf` holds `base`
        // (< 4096) + REGION + 4096 + REGION bytes; the two regions are disjoint.
        (
            dst[dist + da..dist + da + n].as_mut_ptr(),
            src[sa..sa + n].as_ptr(),
        )
    }
}

/// One timed unit: a (family, class, candidate) cell.
struct Cell {
    family: Family,
    class: usize,
    cand: usize,
    /// Calls per sample, set by the warm-up so a sample lasts about [`Settings::sample`].
    iters: usize,
    /// Still timed (not dropped as clearly slower than its class's best).
    live: bool,
    /// Timed samples taken.
    samples: usize,
    /// Minimum ns per call in each layout.
    best: [f64; NL],
}

impl Cell {
    /// Mean over the layouts of the minimum ns per call (infinite until every layout has a
    /// sample).
    fn score(&self) -> f64 {
        self.best.iter().sum::<f64>() / self.best.len() as f64
    }
}

/// How long and how finely to measure. [`Settings::STARTUP`] is what first use runs; longer
/// settings give a steady-state reference to judge the start-up choice against (the same
/// candidates, call path, buffers and layouts, with 20x longer samples and more of them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// No new round is started after this much time (warm-up included).
    pub budget: Duration,
    /// At most this many timed rounds.
    pub max_rounds: usize,
    /// Target length of one timed sample.
    pub sample: Duration,
    /// Minimum length of the untimed warm-up.
    pub warmup: Duration,
    /// Relative margin of the choice per size class ([`choose`]).
    pub margin: [f64; 4],
}

impl Settings {
    /// The start-up calibration: ~3.5 ms plus at most one round.
    pub const STARTUP: Settings = Settings {
        budget: BUDGET,
        max_rounds: ROUNDS,
        sample: SAMPLE,
        warmup: WARMUP,
        margin: MARGIN,
    };

    /// A long reference run of about `budget`: 20 us samples, as many rounds as fit.
    pub fn steady(budget: Duration) -> Settings {
        Settings {
            budget,
            max_rounds: usize::MAX,
            sample: Duration::from_micros(20),
            warmup: Duration::from_millis(5).min(budget / 4),
            margin: MARGIN,
        }
    }
}

/// The index to keep among candidates with scores `ns` (lower is better), listed in
/// preference order (the family's baseline first): the FIRST candidate whose score is within
/// `margin` of the best. Why not simply the fastest: start-up timings scatter by a few percent
/// between processes, so among kernels that close the fastest one flips from process to
/// process; the rule makes the choice stable and only leaves the baseline (for copies, the C
/// library's `memcpy`) for a kernel that is clearly faster. Infinite or NaN scores never win;
/// `None` only if no score is finite.
pub fn choose(ns: &[f64], margin: f64) -> Option<usize> {
    let best = ns
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .min_by(f64::total_cmp)?;
    ns.iter()
        .position(|&v| v.is_finite() && v <= best * (1.0 + margin))
}

/// Calls candidate `cand` of `family` `iters` times on `n` bytes.
///
/// The pointers are not passed through `black_box` per call (a call through a pointer loaded
/// at run time cannot be elided anyway): that spilled them to a stack slot and reloaded them
/// after every call, an extra load that can 4K-alias the destination just written, depending
/// on the stack's offset in its page, which ASLR randomises per process.
///
/// # Safety
/// `d` and `s` valid for `n` bytes, non-overlapping; the candidate's features detected;
/// `n <= MAX_CHUNK` for the sum kernels.
unsafe fn run(family: Family, cand: usize, d: *mut u8, s: *const u8, n: usize, iters: usize) {
    // SAFETY (whole body): contract forwarded from the caller.
    unsafe {
        match family {
            Family::Copy => {
                let f = COPY[cand].f;
                for _ in 0..iters {
                    f(d, s, n);
                }
            }
            Family::Checksum => {
                let f = SUM[cand].f;
                for _ in 0..iters {
                    black_box(u64::from(f(s, n)));
                }
            }
            Family::Fused => {
                let f = FUSED[cand].f;
                for _ in 0..iters {
                    black_box(u64::from(f(d, s, n)));
                }
            }
        }
    }
}

fn index_of(family: Family, name: &str) -> usize {
    family.names().iter().position(|n| *n == name).unwrap_or(0)
}

/// Chooses the kernels: the forced ones as given, the others by timing every detected
/// candidate per size class ([`Settings::STARTUP`]). Total time bounded by the module's time
/// budget (`BUDGET`) plus one round.
pub fn calibrate(forced: &Forced) -> Calibration {
    calibrate_with(forced, &Settings::STARTUP)
}

/// [`calibrate`] with other settings, e.g. [`Settings::steady`] for a reference measurement.
pub fn calibrate_with(forced: &Forced, settings: &Settings) -> Calibration {
    calibrate_inner_with(forced, Vec::new(), settings).0
}

pub(crate) fn calibrate_inner(forced: &Forced, warnings: Vec<String>) -> (Calibration, Chosen) {
    calibrate_inner_with(forced, warnings, &Settings::STARTUP)
}

/// Times one sample of `cell` in layout `l`; ns per call.
fn sample(cell: &Cell, scratch: &mut Scratch, l: usize) -> f64 {
    let n = CLASS_TIMED_LEN[cell.class];
    let (d, s) = scratch.ptrs(l, n);
    let t0 = Instant::now();
    // SAFETY: `d`/`s` come from disjoint `n`-byte slices of the scratch buffer; only detected
    // candidates are in the cells; n <= 64 KiB <= MAX_CHUNK.
    unsafe { run(cell.family, cell.cand, d, s, n, cell.iters) };
    t0.elapsed().as_nanos() as f64 / cell.iters as f64
}

fn calibrate_inner_with(
    forced: &Forced,
    warnings: Vec<String>,
    settings: &Settings,
) -> (Calibration, Chosen) {
    let start = Instant::now();
    let mut cells: Vec<Cell> = Vec::new();
    for fam in FAMILIES {
        if forced.get(fam).is_some() {
            continue;
        }
        for (class, &len) in CLASS_TIMED_LEN.iter().enumerate() {
            for name in candidates(fam) {
                cells.push(Cell {
                    family: fam,
                    class,
                    cand: index_of(fam, name),
                    // About 16 KiB per call batch to start; the warm-up resizes it.
                    iters: ((16 << 10) / len).max(1),
                    live: true,
                    samples: 0,
                    best: [f64::INFINITY; NL],
                });
            }
        }
    }
    let mut scratch = Scratch::new();
    let sample_ns = settings.sample.as_nanos() as f64;

    // Warm-up, not kept: every candidate runs in every pass (first calls, instruction cache,
    // wide-vector power-up), and each pass re-sizes every cell's batch to last about one
    // sample; the last pass, the warmest, sets the sizes the rounds use.
    let mut pass = 0;
    while !cells.is_empty() && (pass < 2 || start.elapsed() < settings.warmup) {
        for cell in cells.iter_mut() {
            let ns = sample(cell, &mut scratch, pass % NL).max(0.1);
            // At most x16 per pass: a sample cut short by the 10 ns clock steps must not
            // blow the batch up.
            let want = (sample_ns / ns).ceil() as usize;
            cell.iters = want.clamp(1, cell.iters.saturating_mul(16));
        }
        pass += 1;
    }
    let warmup = start.elapsed();

    let mut rounds = 0;
    while rounds < settings.max_rounds {
        let l = rounds % NL;
        // Rotate the order each round so no candidate always runs right after another.
        let k = cells.len();
        for j in 0..k {
            let cell = &mut cells[(j + rounds * 7) % k];
            if !cell.live {
                continue;
            }
            let ns = sample(cell, &mut scratch, l);
            cell.best[l] = cell.best[l].min(ns);
            cell.samples += 1;
        }
        rounds += 1;
        // After every second cycle over the layouts (every cell then has two samples in
        // each), stop timing the clearly slow.
        if rounds % (2 * NL) == 0 {
            drop_slow(&mut cells);
        }
        // Every layout measured at least once before the budget may stop us.
        if rounds >= NL && start.elapsed() > settings.budget {
            break;
        }
    }
    let mut families = Vec::new();
    let mut chosen = Chosen {
        copy: [COPY[0].f; 4],
        sum: [SUM[0].f; 4],
        fused: [FUSED[0].f; 4],
    };
    for fam in FAMILIES {
        let mut classes = Vec::new();
        for (class, &timed_len) in CLASS_TIMED_LEN.iter().enumerate() {
            let (name, timings) = if let Some(f) = forced.get(fam) {
                (f, Vec::new())
            } else {
                // Cells were pushed in the family's candidate order, the preference order.
                let timings: Vec<Timing> = cells
                    .iter()
                    .filter(|c| c.family == fam && c.class == class)
                    .map(|c| Timing {
                        name: fam.names()[c.cand],
                        ns: c.score(),
                        samples: c.samples,
                    })
                    .collect();
                let ns: Vec<f64> = timings.iter().map(|t| t.ns).collect();
                let best = choose(&ns, settings.margin[class])
                    .map(|i| timings[i].name)
                    .unwrap_or(fam.names()[0]);
                (best, timings)
            };
            let i = index_of(fam, name);
            match fam {
                Family::Copy => chosen.copy[class] = COPY[i].f,
                Family::Checksum => chosen.sum[class] = SUM[i].f,
                Family::Fused => chosen.fused[class] = FUSED[i].f,
            }
            classes.push(ClassChoice {
                max_len: CLASS_MAX.get(class).copied(),
                timed_len,
                chosen: name,
                timings,
            });
        }
        families.push(FamilyChoice {
            family: fam,
            forced: forced.get(fam),
            classes,
        });
    }
    let cal = Calibration {
        families,
        warnings,
        rounds,
        warmup,
        elapsed: start.elapsed(),
        margin: settings.margin,
    };
    (cal, chosen)
}

/// Marks cells scoring more than `DROP_RATIO` times their class's best as no longer timed,
/// except each family's baseline (its first candidate), which stays as the reference.
fn drop_slow(cells: &mut [Cell]) {
    for i in 0..cells.len() {
        let (fam, class) = (cells[i].family, cells[i].class);
        let best = cells
            .iter()
            .filter(|c| c.family == fam && c.class == class)
            .map(Cell::score)
            .fold(f64::INFINITY, f64::min);
        let c = &mut cells[i];
        if c.cand != 0 && c.score() > best * DROP_RATIO {
            c.live = false;
        }
    }
}

/// Builds the raw table for forced kernels without timing anything. `None` if a name is not
/// a detected candidate of its family.
pub(crate) fn forced_all(copy: &str, sum: &str, fused: &str) -> Option<(Calibration, Chosen)> {
    let (forced, errs) = parse_forced(&format!("copy={copy},csum={sum},fused={fused}"));
    if !errs.is_empty() {
        return None;
    }
    Some(calibrate_inner(&forced, Vec::new()))
}
