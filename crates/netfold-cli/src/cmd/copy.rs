//! `netfold copy`: a modern cptimer (the OLS 2002 study's Table 5, the 2002 copy_to_user thread's 1448-byte cycle counts).
//!
//! For each size and each (source, destination) alignment pair it times every selected copy
//! method and reports GB/s: min / median / max over the alignment pairs, the worst-to-best
//! ratio (1.0 = no alignment penalty), and TSC cycles per copy like the study's Table 6.
//!
//! Alignments are offsets from a 64-byte (cache line) boundary. The default `--align-step 4`
//! visits 16 x 16 = 256 pairs (it includes the "+4" case the study and glibc are known to
//! suffer from) and takes ~30-40 s; `--align-step 1` visits all 64 x 64 pairs (~10 min).

use super::timing::{best_ns_per_op_with, median, parse_sizes, tsc_ghz, AlignedBuf};
use super::CmdResult;
use netfold::mem::{self, calibrate, kernels};
use serde::Serialize;
use std::hint::black_box;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

type CopyFn = fn(&mut [u8], &[u8]);

/// What the slice copy in std does: `copy_from_slice`, i.e. libc `memcpy`.
fn std_copy(dst: &mut [u8], src: &[u8]) {
    dst[..src.len()].copy_from_slice(src);
}

/// Every method the command can time, by the name `--methods` takes.
/// The fused methods hand their sum to `black_box` as a `u64`: a `u16` is spilled with a 2-byte
/// store into the slot the closure's 8-byte `push`/`pop` pair uses, and that pop then cannot
/// be forwarded from the store buffer and waits for every older store (the whole copy) to
/// reach the cache. On an AMD Zen 5 that harness artifact alone made a "fused" method that
/// only copies measure 0.91x of the same copy (docs/BENCHMARKS.md).
const METHODS: &[(&str, CopyFn, &str)] = &[
    (
        "netfold",
        mem::copy,
        "netfold::mem::copy (run-time dispatch)",
    ),
    ("std", std_copy, "slice copy_from_slice = libc memcpy"),
    ("rep-movsb", kernels::copy_rep_movsb, "rep movsb"),
    (
        "rep-movsq",
        kernels::copy_rep_movsq,
        "rep movsq + rep movsb tail",
    ),
    (
        "unrolled-int",
        kernels::copy_unrolled_int,
        "the 2002 copy patch's unrolled integer loop",
    ),
    ("scalar", kernels::copy_scalar, "portable 64-bit words"),
    ("sse2", kernels::copy_sse2, "SSE2, dst-aligned"),
    ("avx2", kernels::copy_avx2, "AVX2, dst-aligned"),
    ("avx512", kernels::copy_avx512, "AVX-512, dst-aligned"),
    (
        "avx512-vbmi",
        kernels::copy_avx512_vbmi,
        "AVX-512 VBMI, both sides aligned",
    ),
    (
        "avx512-nt",
        kernels::copy_avx512_nt,
        "AVX-512, non-temporal stores",
    ),
    (
        "copy+checksum",
        |d, s| {
            black_box(u64::from(mem::copy_with_checksum(d, s)));
        },
        "netfold::mem::copy_with_checksum (fused), sum discarded",
    ),
    (
        "fused-avx512",
        |d, s| {
            black_box(u64::from(kernels::copy_with_checksum_avx512(d, s)));
        },
        "fused kernel, AVX-512 unaligned loads",
    ),
    (
        "fused-avx512-vbmi",
        |d, s| {
            black_box(u64::from(kernels::copy_with_checksum_avx512_vbmi(d, s)));
        },
        "fused kernel, AVX-512 VBMI aligned loads",
    ),
];

const DEFAULT_METHODS: &str = "netfold,std,rep-movsb,rep-movsq,unrolled-int";

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Copy sizes in bytes, comma-separated (k/m suffixes accepted).
    #[arg(long, default_value = "64,1448,4096,65536")]
    pub sizes: String,
    /// Methods to time: netfold, std, rep-movsb, rep-movsq, unrolled-int, scalar, sse2, avx2,
    /// avx512, avx512-vbmi, avx512-nt, copy+checksum (the fused copy, sum discarded),
    /// fused-avx512, fused-avx512-vbmi.
    #[arg(long, default_value = DEFAULT_METHODS)]
    pub methods: String,
    /// Step between alignments 0..=63 for both source and destination (1 = all 4096 pairs).
    #[arg(long, default_value_t = 4)]
    pub align_step: usize,
    /// Rotate over a 256 MiB region (larger than the last-level cache) so copies miss cache.
    #[arg(long)]
    pub uncached: bool,
    /// Minimum time of one timed repetition, in milliseconds.
    #[arg(long, default_value_t = 1.0)]
    pub min_ms: f64,
    /// Timed repetitions per cell in each pass; the best over all passes is kept.
    #[arg(long, default_value_t = 2)]
    pub reps: usize,
    /// Passes over the whole (size, method, alignment) grid. Interleaving spreads bursts of
    /// interference from other processes over different cells instead of one cell's reps.
    #[arg(long, default_value_t = 2)]
    pub passes: usize,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// After the benchmark, re-run the kernel calibration as a steady-state reference for
    /// about this many milliseconds (20 us samples) and report how this process's start-up
    /// choice compares with the fastest and with memcpy there. 0 = off.
    #[arg(long, default_value_t = 0.0)]
    pub steady_ms: f64,
    /// Write an SVG heatmap of GB/s over the (src, dst) alignment matrix.
    #[arg(long, value_name = "FILE.svg")]
    pub heatmap: Option<String>,
    /// Method drawn in the heatmap.
    #[arg(long, default_value = "netfold")]
    pub heatmap_method: String,
    /// Size drawn in the heatmap.
    #[arg(long, default_value_t = 1448)]
    pub heatmap_size: usize,
}

#[derive(Serialize, Clone)]
struct Cell {
    method: String,
    size: usize,
    src_align: usize,
    dst_align: usize,
    gbps: f64,
    ns_per_copy: f64,
    /// TSC ticks per copy (reference cycles), if the TSC rate is known.
    tsc_cycles: Option<f64>,
}

#[derive(Serialize)]
struct Summary {
    method: String,
    size: usize,
    min_gbps: f64,
    median_gbps: f64,
    max_gbps: f64,
    worst_over_best: f64,
    median_tsc_cycles: Option<f64>,
    /// Smallest ratio of this method to `std` at the same alignment pair (if std was timed).
    min_ratio_to_std: Option<f64>,
}

/// One candidate's calibration timing (see `netfold::mem::calibrate`).
#[derive(Serialize)]
pub(super) struct CalTiming {
    name: &'static str,
    /// Mean over the calibration's buffer layouts of the minimum ns per call.
    ns: f64,
    gbps: f64,
    /// Timed samples behind `ns` (fewer than the rounds if dropped as clearly slower).
    samples: usize,
}

/// The choice for one (family, size class).
#[derive(Serialize)]
pub(super) struct CalClass {
    family: &'static str,
    /// Largest length in the class; `null` = unbounded.
    max_len: Option<usize>,
    timed_len: usize,
    chosen: &'static str,
    forced: bool,
    timings: Vec<CalTiming>,
}

/// How `netfold::mem` chose its kernels in this process: by measurement, or forced with
/// `NETFOLD_KERNELS`.
#[derive(Serialize)]
pub(super) struct CalReport {
    summary: String,
    rounds: usize,
    warmup_ms: f64,
    elapsed_ms: f64,
    /// Per size class: a candidate replaces an earlier one in preference order only if this
    /// much faster.
    margin: [f64; 4],
    warnings: Vec<String>,
    classes: Vec<CalClass>,
}

/// The report of calibration `c`.
fn report_of(c: &calibrate::Calibration) -> CalReport {
    let mut classes = Vec::new();
    for f in &c.families {
        for cl in &f.classes {
            classes.push(CalClass {
                family: f.family.name(),
                max_len: cl.max_len,
                timed_len: cl.timed_len,
                chosen: cl.chosen,
                forced: f.forced.is_some(),
                timings: cl
                    .timings
                    .iter()
                    .map(|t| CalTiming {
                        name: t.name,
                        ns: t.ns,
                        gbps: cl.timed_len as f64 / t.ns,
                        samples: t.samples,
                    })
                    .collect(),
            });
        }
    }
    CalReport {
        summary: c.summary(),
        rounds: c.rounds,
        warmup_ms: c.warmup.as_secs_f64() * 1000.0,
        elapsed_ms: c.elapsed.as_secs_f64() * 1000.0,
        margin: c.margin,
        warnings: c.warnings.clone(),
        classes,
    }
}

/// The process's kernel choice (made now if not made yet).
pub(super) fn calibration_report() -> CalReport {
    report_of(mem::calibration())
}

/// A long reference calibration (`--steady-ms`): every candidate measured again with the
/// start-up calibration's harness (same call path, buffers and layouts) but 20 us samples for
/// about `ms` milliseconds, and per class how the start-up choice does in it.
#[derive(Serialize)]
pub(super) struct SteadyReport {
    reference: CalReport,
    classes: Vec<SteadyClass>,
}

/// One class of [`SteadyReport`].
#[derive(Serialize)]
pub(super) struct SteadyClass {
    family: &'static str,
    timed_len: usize,
    /// The start-up choice of this process.
    startup: &'static str,
    /// The fastest in the reference run.
    fastest: &'static str,
    /// Start-up choice's GB/s over the fastest's, in the reference run.
    startup_vs_fastest: f64,
    /// The family's baseline (first candidate: `memcpy` for copies).
    baseline: &'static str,
    /// Start-up choice's GB/s over the baseline's, in the reference run.
    startup_vs_baseline: f64,
}

/// Runs the reference calibration for about `ms` milliseconds (if `ms > 0`).
pub(super) fn steady_report(ms: f64) -> Option<SteadyReport> {
    if ms <= 0.0 {
        return None;
    }
    let startup = mem::calibration();
    let reference = calibrate::calibrate_with(
        &calibrate::Forced::default(),
        &calibrate::Settings::steady(Duration::from_secs_f64(ms / 1000.0)),
    );
    let mut classes = Vec::new();
    for (sf, rf) in startup.families.iter().zip(&reference.families) {
        for (sc, rc) in sf.classes.iter().zip(&rf.classes) {
            let ns = |name: &str| {
                rc.timings
                    .iter()
                    .find(|t| t.name == name)
                    .map_or(f64::NAN, |t| t.ns)
            };
            let Some(fastest) = rc.timings.iter().min_by(|a, b| a.ns.total_cmp(&b.ns)) else {
                continue;
            };
            let baseline = rc.timings[0].name;
            classes.push(SteadyClass {
                family: sf.family.name(),
                timed_len: sc.timed_len,
                startup: sc.chosen,
                fastest: fastest.name,
                startup_vs_fastest: fastest.ns / ns(sc.chosen),
                baseline,
                startup_vs_baseline: ns(baseline) / ns(sc.chosen),
            });
        }
    }
    Some(SteadyReport {
        reference: report_of(&reference),
        classes,
    })
}

/// Prints the reference run of `--steady-ms` for `families` and how the start-up choice fares.
pub(super) fn print_steady(
    r: &SteadyReport,
    families: &[&str],
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "steady-state reference (20 us samples; * = its own choice):"
    )?;
    print_calibration(&r.reference, families, out)?;
    for c in r.classes.iter().filter(|c| families.contains(&c.family)) {
        writeln!(
            out,
            "  {:<5} {:>5} B: start-up choice {} = {:.3}x of the fastest ({}), {:.3}x of {}",
            c.family,
            c.timed_len,
            c.startup,
            c.startup_vs_fastest,
            c.fastest,
            c.startup_vs_baseline,
            c.baseline
        )?;
    }
    Ok(())
}

/// Prints the calibration of `families` ("copy", "csum", "fused"): per size class, every
/// candidate's GB/s at the timed length, the chosen one marked with `*`.
pub(super) fn print_calibration(
    r: &CalReport,
    families: &[&str],
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "kernel choice: {} ({} rounds, {:.2} ms with {:.2} ms warm-up, margins {}%; \
         NETFOLD_KERNELS=copy=..,csum=..,fused=.. forces)",
        r.summary,
        r.rounds,
        r.elapsed_ms,
        r.warmup_ms,
        r.margin
            .iter()
            .map(|m| format!("{:.0}", m * 100.0))
            .collect::<Vec<_>>()
            .join("/")
    )?;
    for w in &r.warnings {
        writeln!(out, "  warning: {w}")?;
    }
    for c in r.classes.iter().filter(|c| families.contains(&c.family)) {
        let range = match c.max_len {
            Some(m) => format!("<= {m}"),
            None => "larger".to_string(),
        };
        write!(
            out,
            "  {:<5} {:>8} (timed {:>5} B):",
            c.family, range, c.timed_len
        )?;
        if c.forced {
            write!(out, " {} (forced)", c.chosen)?;
        }
        for t in &c.timings {
            let mark = if t.name == c.chosen { "*" } else { "" };
            write!(out, " {}{mark} {:.1}", t.name, t.gbps)?;
        }
        writeln!(out, "{}", if c.forced { "" } else { "  GB/s" })?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Report {
    /// Where and with what code this ran.
    machine: crate::bench::machine::Machine,
    kernels: &'static str,
    calibration: CalReport,
    /// `--steady-ms`: the reference calibration, if run.
    steady: Option<SteadyReport>,
    tsc_ghz: Option<f64>,
    align_step: usize,
    uncached: bool,
    min_ms: f64,
    reps: usize,
    passes: usize,
    results: Vec<Cell>,
    summary: Vec<Summary>,
}

/// Where the timed copies read and write.
enum Buffers {
    /// One source and one destination buffer, reused (data stays in L1/L2).
    Cached { src: AlignedBuf, dst: AlignedBuf },
    /// Two 128 MiB regions walked slot by slot, so every copy misses the 32 MiB L3.
    Uncached {
        src: AlignedBuf,
        dst: AlignedBuf,
        region: usize,
    },
}

const UNCACHED_REGION: usize = 128 << 20;

/// Times one cell: `f` copying `size` bytes from source offset `sa` to destination offset `da`.
fn time_cell(
    bufs: &mut Buffers,
    f: CopyFn,
    (size, sa, da): (usize, usize, usize),
    min: Duration,
    reps: usize,
    calibrated: Option<u64>,
) -> (f64, u64) {
    let f = black_box(f);
    match bufs {
        Buffers::Cached { src, dst } => {
            let s = src.window(sa, size);
            let d = dst.window_mut(da, size);
            best_ns_per_op_with(min, reps, calibrated, |iters| {
                for _ in 0..iters {
                    f(black_box(&mut *d), black_box(s));
                }
            })
        }
        Buffers::Uncached { src, dst, region } => {
            // Slots are page-multiples apart so each copy touches fresh lines.
            let stride = (size + 64).div_ceil(4096) * 4096;
            let slots = (*region / stride).max(1);
            let mut slot = 0usize;
            best_ns_per_op_with(min, reps, calibrated, |iters| {
                for _ in 0..iters {
                    let off = slot * stride;
                    slot = if slot + 1 == slots { 0 } else { slot + 1 };
                    let s = src.window(off + sa, size);
                    let d = dst.window_mut(off + da, size);
                    f(black_box(d), black_box(s));
                }
            })
        }
    }
}

pub fn run(a: Args) -> CmdResult {
    let sizes = parse_sizes(&a.sizes)?;
    if a.align_step == 0 || a.align_step > 63 {
        return Err(format!("--align-step must be 1..=63, got {}", a.align_step).into());
    }
    if !(a.min_ms > 0.0 && a.min_ms <= 10_000.0) {
        return Err("--min-ms must be in (0, 10000]".into());
    }
    if a.reps == 0 || a.reps > 1000 {
        return Err("--reps must be 1..=1000".into());
    }
    if a.passes == 0 || a.passes > 100 {
        return Err("--passes must be 1..=100".into());
    }
    let mut methods: Vec<(&str, CopyFn)> = Vec::new();
    for name in a
        .methods
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match METHODS.iter().find(|m| m.0 == name) {
            Some(m) => methods.push((m.0, m.1)),
            None => {
                let known: Vec<&str> = METHODS.iter().map(|m| m.0).collect();
                return Err(format!("unknown method {name:?}; known: {}", known.join(", ")).into());
            }
        }
    }
    if methods.is_empty() {
        return Err("no methods selected".into());
    }
    if a.heatmap.is_some() {
        if !methods.iter().any(|m| m.0 == a.heatmap_method) {
            return Err(format!(
                "--heatmap-method {:?} is not among --methods",
                a.heatmap_method
            )
            .into());
        }
        if !sizes.contains(&a.heatmap_size) {
            return Err(format!("--heatmap-size {} is not among --sizes", a.heatmap_size).into());
        }
    }
    if !(0.0..=60_000.0).contains(&a.steady_ms) {
        return Err("--steady-ms must be in [0, 60000]".into());
    }
    if a.uncached && sizes.iter().any(|&s| s > UNCACHED_REGION / 4) {
        return Err("--uncached supports sizes up to 32 MiB".into());
    }

    let aligns: Vec<usize> = (0..64).step_by(a.align_step).collect();
    let max_size = *sizes.iter().max().unwrap_or(&0);
    let mut bufs = if a.uncached {
        Buffers::Uncached {
            src: AlignedBuf::new(UNCACHED_REGION + max_size, |i| (i * 7 + 3) as u8),
            dst: AlignedBuf::new(UNCACHED_REGION + max_size, |_| 0),
            region: UNCACHED_REGION,
        }
    } else {
        Buffers::Cached {
            src: AlignedBuf::new(max_size, |i| (i * 7 + 3) as u8),
            dst: AlignedBuf::new(max_size, |_| 0),
        }
    };
    let tsc = tsc_ghz();
    let min = Duration::from_secs_f64(a.min_ms / 1000.0);
    // The kernels are chosen by timing them at first use (3-5 ms). That first use must not
    // be inside a timed cell: the cell's first repetition would also set the iteration count
    // its later passes reuse, far too small, and `--json` runs (which print nothing before
    // the grid) read the first `netfold` cell at a quarter of its speed (worst/best 0.21).
    let _ = mem::selected_kernels();

    if !a.json {
        eprintln!(
            "netfold copy: kernels={} {} alignments 0..63 step {} ({} pairs), {}, best of {} passes x {} reps x >= {} ms",
            mem::selected_kernels(),
            tsc.map(|g| format!("TSC {g:.3} GHz,")).unwrap_or_default(),
            a.align_step,
            aligns.len() * aligns.len(),
            if a.uncached { "uncached (256 MiB rotation)" } else { "cached" },
            a.passes,
            a.reps,
            a.min_ms
        );
    }

    // Grid of cells; each pass re-times every cell and keeps the best.
    let mut grid: Vec<(usize, usize, usize, usize, f64, Option<u64>)> = Vec::new();
    for &size in &sizes {
        for mi in 0..methods.len() {
            for &sa in &aligns {
                for &da in &aligns {
                    grid.push((size, mi, sa, da, f64::INFINITY, None));
                }
            }
        }
    }
    for _ in 0..a.passes {
        for cell in grid.iter_mut() {
            let (size, mi, sa, da, best, cal) = *cell;
            let (ns, iters) = time_cell(&mut bufs, methods[mi].1, (size, sa, da), min, a.reps, cal);
            *cell = (size, mi, sa, da, best.min(ns), Some(iters));
        }
    }
    let results: Vec<Cell> = grid
        .iter()
        .map(|&(size, mi, sa, da, ns, _)| Cell {
            method: methods[mi].0.to_string(),
            size,
            src_align: sa,
            dst_align: da,
            gbps: size as f64 / ns,
            ns_per_copy: ns,
            tsc_cycles: tsc.map(|g| ns * g),
        })
        .collect();

    let summary = summarize(&results, &sizes, &methods);
    if let Some(path) = &a.heatmap {
        let cells: Vec<&Cell> = results
            .iter()
            .filter(|c| c.method == a.heatmap_method && c.size == a.heatmap_size)
            .collect();
        draw_heatmap(
            path,
            &cells,
            a.align_step,
            &a.heatmap_method,
            a.heatmap_size,
        )?;
        if !a.json {
            eprintln!("heatmap written to {path}");
        }
    }

    if a.json {
        let report = Report {
            machine: crate::bench::machine::Machine::current(),
            kernels: mem::selected_kernels(),
            calibration: calibration_report(),
            steady: steady_report(a.steady_ms),
            tsc_ghz: tsc,
            align_step: a.align_step,
            uncached: a.uncached,
            min_ms: a.min_ms,
            reps: a.reps,
            passes: a.passes,
            results,
            summary,
        };
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        print_calibration(
            &calibration_report(),
            &["copy", "fused"],
            &mut std::io::stdout().lock(),
        )?;
        print_human(&summary, &results, tsc)?;
        if let Some(r) = steady_report(a.steady_ms) {
            print_steady(&r, &["copy", "fused"], &mut std::io::stdout().lock())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn summarize(results: &[Cell], sizes: &[usize], methods: &[(&str, CopyFn)]) -> Vec<Summary> {
    let mut out = Vec::new();
    for &size in sizes {
        let std_cells: Vec<&Cell> = results
            .iter()
            .filter(|c| c.method == "std" && c.size == size)
            .collect();
        for &(name, _) in methods {
            let cells: Vec<&Cell> = results
                .iter()
                .filter(|c| c.method == name && c.size == size)
                .collect();
            let g: Vec<f64> = cells.iter().map(|c| c.gbps).collect();
            let min = g.iter().copied().fold(f64::INFINITY, f64::min);
            let max = g.iter().copied().fold(0.0, f64::max);
            let med = median(&g);
            let min_ratio_to_std = if std_cells.is_empty() {
                None
            } else {
                cells
                    .iter()
                    .filter_map(|c| {
                        std_cells
                            .iter()
                            .find(|s| s.src_align == c.src_align && s.dst_align == c.dst_align)
                            .map(|s| c.gbps / s.gbps)
                    })
                    .min_by(|a, b| a.total_cmp(b))
            };
            let cyc: Vec<f64> = cells.iter().filter_map(|c| c.tsc_cycles).collect();
            out.push(Summary {
                method: name.to_string(),
                size,
                min_gbps: min,
                median_gbps: med,
                max_gbps: max,
                worst_over_best: min / max,
                median_tsc_cycles: (!cyc.is_empty()).then(|| median(&cyc)),
                min_ratio_to_std,
            });
        }
    }
    out
}

fn print_human(summary: &[Summary], results: &[Cell], tsc: Option<f64>) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<13} {:>7} {:>9} {:>9} {:>9} {:>10} {:>11} {:>12}",
        "method", "size", "min GB/s", "median", "max", "worst/best", "min vs std", "TSC cyc/copy"
    )?;
    for s in summary {
        writeln!(
            out,
            "{:<13} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>10.3} {:>11} {:>12}",
            s.method,
            s.size,
            s.min_gbps,
            s.median_gbps,
            s.max_gbps,
            s.worst_over_best,
            s.min_ratio_to_std
                .map(|r| format!("{r:.3}"))
                .unwrap_or_else(|| "-".into()),
            s.median_tsc_cycles
                .map(|c| format!("{c:.0}"))
                .unwrap_or_else(|| "-".into()),
        )?;
    }
    // The OLS 2002 study's Table 6 / the 2002 copy_to_user thread: cycles to copy 1448 bytes, aligned vs not.
    let at = |m: &str, sa: usize, da: usize| {
        results
            .iter()
            .find(|c| c.method == m && c.size == 1448 && c.src_align == sa && c.dst_align == da)
            .and_then(|c| c.tsc_cycles)
    };
    let has_1448 = results.iter().any(|c| c.size == 1448);
    if has_1448 && tsc.is_some() {
        writeln!(out)?;
        writeln!(out, "TSC cycles per 1448-byte copy (cf. Anand & Hartner, OLS 2002, Table 6: movsd 3000 aligned / 7000 not; integer 4000)")?;
        writeln!(
            out,
            "{:<13} {:>12} {:>12} {:>12} {:>12} {:>12}",
            "method", "src0/dst0", "src4/dst0", "src0/dst4", "worst pair", "median"
        )?;
        let mut seen = Vec::new();
        for s in summary.iter().filter(|s| s.size == 1448) {
            if seen.contains(&s.method) {
                continue;
            }
            seen.push(s.method.clone());
            let worst = results
                .iter()
                .filter(|c| c.method == s.method && c.size == 1448)
                .filter_map(|c| c.tsc_cycles)
                .fold(0.0, f64::max);
            let f = |v: Option<f64>| v.map(|c| format!("{c:.0}")).unwrap_or_else(|| "-".into());
            writeln!(
                out,
                "{:<13} {:>12} {:>12} {:>12} {:>12.0} {:>12}",
                s.method,
                f(at(&s.method, 0, 0)),
                f(at(&s.method, 4, 0)),
                f(at(&s.method, 0, 4)),
                worst,
                f(s.median_tsc_cycles)
            )?;
        }
    }
    Ok(())
}

/// Maps t in [0, 1] to a dark-blue -> teal -> yellow ramp (viridis-like anchors).
fn ramp(t: f64) -> plotters::style::RGBColor {
    const ANCHORS: [(f64, [u8; 3]); 5] = [
        (0.0, [68, 1, 84]),
        (0.25, [59, 82, 139]),
        (0.5, [33, 145, 140]),
        (0.75, [94, 201, 98]),
        (1.0, [253, 231, 37]),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    for w in ANCHORS.windows(2) {
        let ((t0, c0), (t1, c1)) = (w[0], w[1]);
        if t <= t1 {
            let u = (t - t0) / (t1 - t0);
            let mix =
                |i: usize| (f64::from(c0[i]) + u * (f64::from(c1[i]) - f64::from(c0[i]))) as u8;
            return plotters::style::RGBColor(mix(0), mix(1), mix(2));
        }
    }
    plotters::style::RGBColor(253, 231, 37)
}

/// Axis ticks of the heatmap on cell boundaries: every cell edge when cells are 8 bytes or
/// wider, else every 8 bytes (a multiple of the cell width when the step divides 8).
fn cell_ticks(step: usize) -> Vec<usize> {
    let every = if step >= 8 || 8 % step.max(1) != 0 {
        step.max(1)
    } else {
        8
    };
    (0..=64).step_by(every).collect()
}

fn draw_heatmap(
    path: &str,
    cells: &[&Cell],
    step: usize,
    method: &str,
    size: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::coord::combinators::BindKeyPoints;
    use plotters::prelude::*;
    if cells.is_empty() {
        return Err("no cells to draw".into());
    }
    let lo = cells.iter().map(|c| c.gbps).fold(f64::INFINITY, f64::min);
    let hi = cells.iter().map(|c| c.gbps).fold(0.0, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    // The legend panel is wide enough for the bar, its tick labels and its title, with a
    // margin on the right so nothing touches the edge of the image.
    let root = SVGBackend::new(path, (960, 720)).into_drawing_area();
    root.fill(&WHITE)?;
    let (main, legend) = root.split_horizontally(780);
    let mut chart = ChartBuilder::on(&main)
        .caption(
            format!(
                "{method} copy, {size} bytes: GB/s by alignment (min {lo:.1}, max {hi:.1}, worst/best {:.3})",
                lo / hi
            ),
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(
            (0usize..64usize).with_key_points(cell_ticks(step)),
            (0usize..64usize).with_key_points(cell_ticks(step)),
        )?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("source offset from 64-byte boundary")
        .y_desc("destination offset")
        .draw()?;
    chart.draw_series(cells.iter().map(|c| {
        let col = ramp((c.gbps - lo) / span);
        Rectangle::new(
            [
                (c.src_align, c.dst_align),
                ((c.src_align + step).min(64), (c.dst_align + step).min(64)),
            ],
            col.filled(),
        )
    }))?;
    // Colour legend: 20 bands from min (bottom) to max (top).
    let mut lg = ChartBuilder::on(&legend)
        .margin_top(40)
        .margin_bottom(50)
        .margin_left(10)
        .margin_right(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0f64..1.0f64, lo..(lo + span))?;
    lg.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_desc("GB/s")
        .y_label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;
    lg.draw_series((0..20).map(|i| {
        let y0 = lo + span * i as f64 / 20.0;
        let y1 = lo + span * (i + 1) as f64 / 20.0;
        Rectangle::new([(0.0, y0), (1.0, y1)], ramp(i as f64 / 19.0).filled())
    }))?;
    root.present()?;
    Ok(())
}
