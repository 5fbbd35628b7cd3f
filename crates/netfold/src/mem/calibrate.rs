//! Kernel choice by measurement (Step 10 item 3).
//!
//! Why: kernels tuned on one microarchitecture lose on another (the AVX-512 copy that won on
//! an Intel Xeon loses to the AVX2 one on an AMD Zen 4, whose 512-bit units are two 256-bit
//! halves), and the machines netfold runs on change. Linux picks its xor and RAID-6 routines by
//! timing them at boot (`calibrate_xor_blocks`, `raid6_select_algo`); netfold does the same on
//! first use: every candidate copy, checksum and fused copy+checksum kernel whose CPU features
//! are detected is timed at one size per size class, and the fastest per class is kept. The
//! C library's `memcpy` is a copy candidate, so the copy is never slower than it as measured.
//!
//! Timing is built for a noisy shared machine: candidates are interleaved (every round times
//! every (family, class, candidate) once, in a rotating order, so a burst of interference hits
//! all candidates alike), each round uses the next of a few (source, destination) alignment
//! pairs, and a candidate's score is the sum over the pairs of its MINIMUM time at that pair
//! (interference only ever adds time). Rounds stop at `ROUNDS` or when `BUDGET` is spent.
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

/// (source, destination) offsets from a 64-byte boundary the rounds cycle through: both
/// aligned; 54 = 14 + 20 + 20, where a TCP payload starts in an Ethernet frame, on either side;
/// and an arbitrary odd pair.
const ALIGN_PAIRS: [(usize, usize); 4] = [(0, 0), (54, 0), (0, 54), (13, 41)];

/// At most this many rounds (each alignment pair timed `ROUNDS / 4` times per candidate).
const ROUNDS: usize = 64;
/// Stop starting rounds after this much time (the task allows 5 ms for the whole choice).
const BUDGET: Duration = Duration::from_micros(3500);
/// Bytes processed per timed batch (at least one call): enough that the clock read (~20-30 ns
/// through the vDSO) is a few percent of a batch (~0.3-1 us), small enough for many rounds in
/// the budget: more, shorter samples make the minimum a steadier estimate on a busy machine.
const BATCH_BYTES: usize = 16 << 10;

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
    /// Score: the sum over the alignment pairs of the minimum nanoseconds per call at
    /// [`CLASS_TIMED_LEN`] of the class, divided by the number of pairs (a mean of minima).
    pub ns: f64,
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
    /// Rounds of interleaved timing run.
    pub rounds: usize,
    /// Wall time spent choosing.
    pub elapsed: Duration,
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

/// 64-byte-aligned scratch buffers for the timing.
struct Scratch {
    src: Vec<u8>,
    dst: Vec<u8>,
}

impl Scratch {
    fn new(len: usize) -> Self {
        let mut src = vec![0u8; len + 128];
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        Scratch {
            src,
            dst: vec![0u8; len + 128],
        }
    }
    fn ptrs(&mut self, sa: usize, da: usize) -> (*mut u8, *const u8) {
        let sbase = (64 - (self.src.as_ptr() as usize & 63)) & 63;
        let dbase = (64 - (self.dst.as_ptr() as usize & 63)) & 63;
        // In bounds: base < 64, offsets < 64, and the buffers have 128 spare bytes.
        (
            self.dst[dbase + da..].as_mut_ptr(),
            self.src[sbase + sa..].as_ptr(),
        )
    }
}

/// One timed unit: a (family, class, candidate) cell.
struct Cell {
    family: Family,
    class: usize,
    cand: usize,
    /// Minimum ns per call at each alignment pair.
    best: [f64; 4],
}

/// Calls candidate `cand` of `family` `iters` times on `n` bytes.
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
                    f(black_box(d), black_box(s), n);
                }
            }
            Family::Checksum => {
                let f = SUM[cand].f;
                for _ in 0..iters {
                    black_box(u64::from(f(black_box(s), n)));
                }
            }
            Family::Fused => {
                let f = FUSED[cand].f;
                for _ in 0..iters {
                    black_box(u64::from(f(black_box(d), black_box(s), n)));
                }
            }
        }
    }
}

fn index_of(family: Family, name: &str) -> usize {
    family.names().iter().position(|n| *n == name).unwrap_or(0)
}

/// Chooses the kernels: the forced ones as given, the others by timing every detected
/// candidate per size class. Total time bounded by the module's time budget (`BUDGET`) plus
/// one round.
pub fn calibrate(forced: &Forced) -> Calibration {
    calibrate_inner(forced, Vec::new()).0
}

pub(crate) fn calibrate_inner(forced: &Forced, warnings: Vec<String>) -> (Calibration, Chosen) {
    let start = Instant::now();
    let mut cells: Vec<Cell> = Vec::new();
    for fam in FAMILIES {
        if forced.get(fam).is_some() {
            continue;
        }
        for class in 0..4 {
            for name in candidates(fam) {
                cells.push(Cell {
                    family: fam,
                    class,
                    cand: index_of(fam, name),
                    best: [f64::INFINITY; 4],
                });
            }
        }
    }
    let mut scratch = Scratch::new(CLASS_TIMED_LEN[3]);
    let mut rounds = 0;
    // Round 0 is a warm-up (page faults, instruction cache, AVX-512 clock licence), not kept.
    while !cells.is_empty() && rounds <= ROUNDS {
        let pair = rounds % ALIGN_PAIRS.len();
        let (sa, da) = ALIGN_PAIRS[pair];
        let (d, s) = scratch.ptrs(sa, da);
        // Rotate the order each round so no candidate always runs right after another.
        let k = cells.len();
        for j in 0..k {
            let cell = &mut cells[(j + rounds * 7) % k];
            let n = CLASS_TIMED_LEN[cell.class];
            let iters = (BATCH_BYTES / n).max(1);
            let t0 = Instant::now();
            // SAFETY: `d`/`s` point into distinct scratch buffers with at least
            // `CLASS_TIMED_LEN[3] >= n` bytes after them; only detected candidates are in
            // `cells`; n <= 64 KiB <= MAX_CHUNK.
            unsafe { run(cell.family, cell.cand, d, s, n, iters) };
            let ns = t0.elapsed().as_nanos() as f64 / iters as f64;
            if rounds > 0 {
                cell.best[pair] = cell.best[pair].min(ns);
            }
        }
        rounds += 1;
        // Every pair measured at least once (rounds 1..=4) before the budget may stop us.
        if rounds > ALIGN_PAIRS.len() && start.elapsed() > BUDGET {
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
                let timings: Vec<Timing> = cells
                    .iter()
                    .filter(|c| c.family == fam && c.class == class)
                    .map(|c| {
                        let measured: Vec<f64> =
                            c.best.iter().copied().filter(|v| v.is_finite()).collect();
                        Timing {
                            name: fam.names()[c.cand],
                            ns: if measured.is_empty() {
                                f64::INFINITY
                            } else {
                                measured.iter().sum::<f64>() / measured.len() as f64
                            },
                        }
                    })
                    .collect();
                let best = timings
                    .iter()
                    .min_by(|a, b| a.ns.total_cmp(&b.ns))
                    .map(|t| t.name)
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
        rounds: rounds.saturating_sub(1),
        elapsed: start.elapsed(),
    };
    (cal, chosen)
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
