//! `netfold csum`: throughput of the checksum, the copy, the fused copy+checksum (one pass,
//! the copy and checksum "merged" as the 1996 merged-system-calls thread proposed) and
//! copy-then-checksum (two passes), for netfold and
//! for smoltcp's checksum (`smoltcp::wire::checksum::data`, the `ip::checksum` module).
//!
//! Rows: impl "netfold" ops "checksum", "copy", "copy+checksum" (fused), "copy,checksum"
//! (two passes); impl "smoltcp" ops "checksum" and "copy,checksum" (std copy then smoltcp's
//! checksum); impl "std" op "copy" (memcpy) for reference. Before timing, every
//! implementation's sums are compared at every size and several alignments; any disagreement
//! exits with status 1.

use super::timing::{best_ns_per_op_with, parse_sizes, AlignedBuf};
use super::CmdResult;
use netfold::mem;
use serde::Serialize;
use std::hint::black_box;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Sizes in bytes, comma-separated (k/m suffixes accepted).
    #[arg(long, default_value = "64,1448,9000,65536")]
    pub sizes: String,
    /// Source offset from a 64-byte boundary.
    #[arg(long, default_value_t = 0)]
    pub src_align: usize,
    /// Destination offset from a 64-byte boundary.
    #[arg(long, default_value_t = 0)]
    pub dst_align: usize,
    /// Minimum time of one timed repetition, in milliseconds.
    #[arg(long, default_value_t = 5.0)]
    pub min_ms: f64,
    /// Timed repetitions per cell in each pass; the best over all passes is kept.
    #[arg(long, default_value_t = 2)]
    pub reps: usize,
    /// Passes over all (impl, op, size) cells, interleaved to spread out interference.
    #[arg(long, default_value_t = 5)]
    pub passes: usize,
    /// After the benchmark, re-run the kernel calibration as a steady-state reference for
    /// about this many milliseconds (see `netfold copy --steady-ms`). 0 = off.
    #[arg(long, default_value_t = 0.0)]
    pub steady_ms: f64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also time every individual checksum and fused kernel (impl "kernel:NAME").
    #[arg(long)]
    pub all_kernels: bool,
}

#[derive(Serialize)]
struct Entry {
    #[serde(rename = "impl")]
    imp: String,
    op: &'static str,
    size: usize,
    gbps: f64,
    ns: f64,
}

#[derive(Serialize)]
struct Ratio {
    name: &'static str,
    size: usize,
    ratio: f64,
}

#[derive(Serialize)]
struct Report {
    /// Where and with what code this ran.
    machine: crate::bench::machine::Machine,
    kernels: &'static str,
    calibration: super::copy::CalReport,
    /// `--steady-ms`: the reference calibration, if run.
    steady: Option<super::copy::SteadyReport>,
    src_align: usize,
    dst_align: usize,
    results: Vec<Entry>,
    ratios: Vec<Ratio>,
}

/// One timed operation; `run(iters, dst, src)` performs it `iters` times.
enum Op {
    Checksum(fn(&[u8]) -> u16),
    Copy(fn(&mut [u8], &[u8])),
    Fused(fn(&mut [u8], &[u8]) -> u16),
    /// Copy, then checksum the destination: two passes over the data.
    TwoPass(fn(&mut [u8], &[u8]), fn(&[u8]) -> u16),
}

impl Op {
    /// Sums go to `black_box` as `u64` (see `copy::METHODS`: a 2-byte spill can stall the
    /// next 8-byte reload of its slot until all older stores reach the cache).
    fn run(&self, iters: u64, d: &mut [u8], s: &[u8]) {
        match *self {
            Op::Checksum(f) => {
                for _ in 0..iters {
                    black_box(u64::from(f(black_box(s))));
                }
            }
            Op::Copy(f) => {
                for _ in 0..iters {
                    f(black_box(&mut *d), black_box(s));
                }
            }
            Op::Fused(f) => {
                for _ in 0..iters {
                    black_box(u64::from(f(black_box(&mut *d), black_box(s))));
                }
            }
            Op::TwoPass(c, f) => {
                for _ in 0..iters {
                    c(black_box(&mut *d), black_box(s));
                    black_box(u64::from(f(black_box(&*d))));
                }
            }
        }
    }
}

fn std_copy(d: &mut [u8], s: &[u8]) {
    d[..s.len()].copy_from_slice(s);
}

fn smoltcp_sum(d: &[u8]) -> u16 {
    smoltcp::wire::checksum::data(d)
}

/// Compares all implementations' sums (and copied bytes) on pseudo-random data.
fn verify(sizes: &[usize]) -> Result<(), String> {
    let max = sizes.iter().copied().max().unwrap_or(0).max(2048);
    let src = AlignedBuf::new(max, |i| (i.wrapping_mul(2_654_435_761) >> 13) as u8);
    let mut dst = AlignedBuf::new(max, |_| 0);
    let mut lens: Vec<usize> = sizes.to_vec();
    lens.extend([0, 1, 2, 3, 63, 65, 1447, 1449]);
    for &n in &lens {
        for (sa, da) in [(0, 0), (1, 0), (0, 1), (4, 0), (3, 61), (62, 5)] {
            let s = src.window(sa, n);
            let want = smoltcp_sum(s);
            let got = mem::checksum(s);
            let fused = mem::copy_with_checksum(dst.window_mut(da, n), s);
            let copied_ok = dst.window(da, n) == s;
            if got != want || fused != want || !copied_ok {
                return Err(format!(
                    "disagreement at size {n} src+{sa} dst+{da}: smoltcp {want:#06x}, netfold \
                     checksum {got:#06x}, copy_with_checksum {fused:#06x}, copy ok: {copied_ok}"
                ));
            }
        }
    }
    Ok(())
}

pub fn run(a: Args) -> CmdResult {
    let sizes = parse_sizes(&a.sizes)?;
    if a.src_align > 63 || a.dst_align > 63 {
        return Err("--src-align/--dst-align must be 0..=63".into());
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
    if !(0.0..=60_000.0).contains(&a.steady_ms) {
        return Err("--steady-ms must be in [0, 60000]".into());
    }
    if let Err(e) = verify(&sizes) {
        eprintln!("netfold csum: CHECKSUM MISMATCH: {e}");
        return Ok(ExitCode::from(1));
    }
    let max = sizes.iter().copied().max().unwrap_or(0);
    let src = AlignedBuf::new(max, |i| (i * 13 + 5) as u8);
    let mut dst = AlignedBuf::new(max, |_| 0);
    let min = Duration::from_secs_f64(a.min_ms / 1000.0);
    let reps = a.reps;
    let mut results = Vec::new();

    // Every (impl, op) to time; each pass times all of them at every size and the best time
    // per cell is kept, so bursts of interference from other processes hit different cells.
    let mut ops: Vec<(String, &'static str, Op)> = vec![
        ("netfold".into(), "checksum", Op::Checksum(mem::checksum)),
        ("netfold".into(), "copy", Op::Copy(mem::copy)),
        (
            "netfold".into(),
            "copy+checksum",
            Op::Fused(mem::copy_with_checksum),
        ),
        (
            "netfold".into(),
            "copy,checksum",
            Op::TwoPass(mem::copy, mem::checksum),
        ),
        ("smoltcp".into(), "checksum", Op::Checksum(smoltcp_sum)),
        (
            "smoltcp".into(),
            "copy,checksum",
            Op::TwoPass(std_copy, smoltcp_sum),
        ),
        ("std".into(), "copy", Op::Copy(std_copy)),
    ];
    if a.all_kernels {
        for &(name, k) in mem::kernels::CHECKSUM_KERNELS {
            ops.push((format!("kernel:{name}"), "checksum", Op::Checksum(k)));
        }
        for &(name, k) in mem::kernels::FUSED_KERNELS {
            ops.push((format!("kernel:{name}"), "copy+checksum", Op::Fused(k)));
        }
    }
    let mut best = vec![vec![(f64::INFINITY, None::<u64>); ops.len()]; sizes.len()];
    for _ in 0..a.passes {
        for (si, &n) in sizes.iter().enumerate() {
            let s = src.window(a.src_align, n);
            let d = dst.window_mut(a.dst_align, n);
            for (oi, (_, _, op)) in ops.iter().enumerate() {
                let (prev, cal) = best[si][oi];
                let (ns, iters) = best_ns_per_op_with(min, reps, cal, |it| op.run(it, d, s));
                best[si][oi] = (prev.min(ns), Some(iters));
            }
        }
    }
    for (si, &n) in sizes.iter().enumerate() {
        for (oi, (imp, op, _)) in ops.iter().enumerate() {
            let ns = best[si][oi].0;
            results.push(Entry {
                imp: imp.clone(),
                op,
                size: n,
                gbps: n as f64 / ns,
                ns,
            });
        }
    }

    let g = |imp: &str, op: &str, n: usize| {
        results
            .iter()
            .find(|e| e.imp == imp && e.op == op && e.size == n)
            .map(|e| e.gbps)
            .unwrap_or(f64::NAN)
    };
    let mut ratios = Vec::new();
    for &n in &sizes {
        ratios.push(Ratio {
            name: "fused / copy",
            size: n,
            ratio: g("netfold", "copy+checksum", n) / g("netfold", "copy", n),
        });
        ratios.push(Ratio {
            name: "fused / copy-then-checksum",
            size: n,
            ratio: g("netfold", "copy+checksum", n) / g("netfold", "copy,checksum", n),
        });
        ratios.push(Ratio {
            name: "checksum netfold / smoltcp",
            size: n,
            ratio: g("netfold", "checksum", n) / g("smoltcp", "checksum", n),
        });
    }

    let mut out = std::io::stdout().lock();
    if a.json {
        let r = Report {
            machine: crate::bench::machine::Machine::current(),
            kernels: mem::selected_kernels(),
            calibration: super::copy::calibration_report(),
            steady: super::copy::steady_report(a.steady_ms),
            src_align: a.src_align,
            dst_align: a.dst_align,
            results,
            ratios,
        };
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "netfold csum: kernels={}, src+{} dst+{}, best of {} passes x {} reps x >= {} ms; all sums agree",
        mem::selected_kernels(),
        a.src_align,
        a.dst_align,
        a.passes,
        a.reps,
        a.min_ms
    );
    super::copy::print_calibration(
        &super::copy::calibration_report(),
        &["copy", "csum", "fused"],
        &mut out,
    )?;
    write!(out, "{:<8} {:<14}", "impl", "op")?;
    for n in &sizes {
        write!(out, " {:>10}", format!("{n} B"))?;
    }
    writeln!(out, "   (GB/s)")?;
    let rows = [
        ("netfold", "checksum"),
        ("netfold", "copy"),
        ("netfold", "copy+checksum"),
        ("netfold", "copy,checksum"),
        ("smoltcp", "checksum"),
        ("smoltcp", "copy,checksum"),
        ("std", "copy"),
    ];
    let mut rows: Vec<(String, &str)> = rows.iter().map(|&(i, o)| (i.to_string(), o)).collect();
    for e in results.iter().filter(|e| e.imp.starts_with("kernel:")) {
        if !rows.iter().any(|r| r.0 == e.imp && r.1 == e.op) {
            rows.push((e.imp.clone(), e.op));
        }
    }
    for (imp, op) in &rows {
        write!(out, "{imp:<8} {op:<14}")?;
        for &n in &sizes {
            write!(out, " {:>10.1}", g(imp.as_str(), op, n))?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    for name in [
        "fused / copy",
        "fused / copy-then-checksum",
        "checksum netfold / smoltcp",
    ] {
        write!(out, "{name:<26}")?;
        for r in ratios.iter().filter(|r| r.name == name) {
            write!(out, " {:>10.3}", r.ratio)?;
        }
        writeln!(out)?;
    }
    if let Some(r) = super::copy::steady_report(a.steady_ms) {
        writeln!(out)?;
        super::copy::print_steady(&r, &["copy", "csum", "fused"], &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}
