//! `netfold copy` and `netfold csum`: besides their own tables they print how
//! `netfold::mem` chose its kernels in this process, every candidate's timing per size class
//! and the choice, and `NETFOLD_KERNELS` forces a choice or is reported when it names something
//! this build or CPU cannot use. Runs are short (one pass, 0.1 ms per cell) and nothing here
//! asserts a speed: the machine is shared and noisy, and which kernel wins differs between
//! CPUs, so only the structure and the choice's consistency with the candidates are checked.

use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Command, Output};

const COPY: &[&str] = &[
    "copy",
    "--sizes",
    "1448",
    "--align-step",
    "32",
    "--passes",
    "1",
    "--reps",
    "1",
    "--min-ms",
    "0.1",
];
const CSUM: &[&str] = &[
    "csum", "--sizes", "1448", "--passes", "1", "--reps", "1", "--min-ms", "0.1",
];

/// Runs the binary with `NETFOLD_KERNELS` set to `kernels`, or removed (None) so that a value
/// in the environment running the tests does not change what is measured.
fn run(args: &[&str], kernels: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_netfold"));
    c.args(args);
    match kernels {
        Some(k) => c.env("NETFOLD_KERNELS", k),
        None => c.env_remove("NETFOLD_KERNELS"),
    };
    let o = c.output().expect("run netfold");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn run_json(args: &[&str], kernels: Option<&str>) -> (Value, String) {
    let mut a = args.to_vec();
    a.push("--json");
    let o = run(&a, kernels);
    let v = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    (v, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The calibration's classes of `family` ("copy", "csum", "fused").
fn classes<'a>(v: &'a Value, family: &str) -> Vec<&'a Value> {
    v["calibration"]["classes"]
        .as_array()
        .expect("calibration.classes")
        .iter()
        .filter(|c| c["family"] == family)
        .collect()
}

/// The candidates timed in a class.
fn timed(c: &Value) -> Vec<&str> {
    c["timings"]
        .as_array()
        .expect("timings")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// Checks the calibration block of a run that forced nothing (or only `forced_family`): every
/// family has its size classes, each measured class names a chosen kernel that is one of the
/// candidates it timed, each with a time, and the one-line summary names every choice.
fn check_measured(v: &Value, forced_family: Option<&str>) {
    let cal = &v["calibration"];
    let summary = cal["summary"].as_str().expect("summary");
    assert_eq!(v["kernels"], summary, "the header and the block agree");
    for fam in ["copy", "csum", "fused"] {
        let cs = classes(v, fam);
        // Four size classes per family, the last unbounded (`max_len` null).
        assert_eq!(cs.len(), 4, "{fam}: {cal}");
        assert!(cs[3]["max_len"].is_null(), "{fam}: {cal}");
        assert!(summary.contains(&format!("{fam}=")), "{summary}");
        for c in cs {
            let chosen = c["chosen"].as_str().unwrap();
            assert!(summary.contains(chosen), "{chosen} not in {summary}");
            if Some(fam) == forced_family {
                continue;
            }
            assert_eq!(c["forced"], false, "{c}");
            assert!(timed(c).contains(&chosen), "{fam}: {chosen} not timed: {c}");
            for t in c["timings"].as_array().unwrap() {
                let ns = t["ns"].as_f64().unwrap_or(f64::NAN);
                assert!(ns.is_finite() && ns > 0.0, "{t}");
            }
        }
    }
}

/// A class forced to `name`: chosen, marked forced, and (what forcing is for) not timed.
fn check_forced(v: &Value, family: &str, name: &str) {
    for c in classes(v, family) {
        assert_eq!(c["chosen"], name, "{c}");
        assert_eq!(c["forced"], true, "{c}");
    }
    assert!(
        v["calibration"]["warnings"].as_array().unwrap().is_empty(),
        "{}",
        v["calibration"]
    );
}

#[test]
fn copy_json_lists_every_method_and_alignment_pair_and_the_choice() {
    let methods = ["netfold", "std", "rep-movsb", "scalar", "copy+checksum"];
    let mut args = COPY.to_vec();
    let list = methods.join(",");
    args.extend(["--methods", &list]);
    let (v, _) = run_json(&args, None);
    // Alignment step 32: source and destination offsets 0 and 32, four pairs per method.
    let got: BTreeSet<(String, u64, u64, u64)> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|c| {
            let gbps = c["gbps"].as_f64().unwrap_or(f64::NAN);
            assert!(gbps.is_finite() && gbps > 0.0, "a time measured: {c}");
            let n = |k: &str| c[k].as_u64().unwrap();
            (
                c["method"].as_str().unwrap().to_owned(),
                n("size"),
                n("src_align"),
                n("dst_align"),
            )
        })
        .collect();
    let want: BTreeSet<(String, u64, u64, u64)> = methods
        .iter()
        .flat_map(|m| {
            [(0, 0), (0, 32), (32, 0), (32, 32)].map(|(s, d)| (m.to_string(), 1448, s, d))
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        v["results"].as_array().unwrap().len(),
        want.len(),
        "no doubles"
    );
    let summarized: Vec<&str> = v["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["method"].as_str().unwrap())
        .collect();
    assert_eq!(summarized, methods);
    check_measured(&v, None);
    assert!(v["calibration"]["warnings"].as_array().unwrap().is_empty());
}

#[test]
fn copy_prints_the_candidates_and_the_choice_in_its_table() {
    let o = run(COPY, None);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("kernel choice: copy="), "{t}");
    // `copy` shows the copy and fused families (csum shows all three): a line per size class
    // with every candidate's GB/s, the chosen one starred.
    for fam in ["copy", "fused"] {
        let lines: Vec<&str> = t
            .lines()
            .filter(|l| l.trim_start().starts_with(&format!("{fam} ")))
            .collect();
        assert_eq!(lines.len(), 4, "{fam}: {t}");
        for l in lines {
            assert!(l.contains("(timed") && l.ends_with("GB/s"), "{l}");
            assert_eq!(l.matches('*').count(), 1, "one choice per class: {l}");
        }
    }
}

#[test]
fn netfold_kernels_forces_the_copy_kernel_when_the_cpu_has_it() {
    let (measured, _) = run_json(COPY, None);
    // Whether this CPU can run the AVX2 copy: calibration times only what it can run.
    if !classes(&measured, "copy")
        .iter()
        .any(|c| timed(c).contains(&"avx2"))
    {
        eprintln!("skipped: this CPU cannot run the avx2 copy kernel");
        return;
    }
    let (v, err) = run_json(COPY, Some("copy=avx2"));
    check_forced(&v, "copy", "avx2");
    check_measured(&v, Some("copy"));
    assert!(v["kernels"].as_str().unwrap().contains("copy=avx2"), "{v}");
    assert!(!err.contains("NETFOLD_KERNELS"), "no warning: {err}");
    // The table says so too.
    let o = run(COPY, Some("copy=avx2"));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("avx2 (forced)"), "{t}");
}

#[test]
fn netfold_kernels_forces_the_checksum_kernel_in_csum() {
    let (measured, _) = run_json(CSUM, None);
    if !classes(&measured, "csum")
        .iter()
        .any(|c| timed(c).contains(&"avx2"))
    {
        eprintln!("skipped: this CPU cannot run the avx2 checksum kernel");
        return;
    }
    // `checksum` is the long spelling of the family.
    let (v, _) = run_json(CSUM, Some("checksum=avx2"));
    check_forced(&v, "csum", "avx2");
    check_measured(&v, Some("csum"));
}

#[test]
fn csum_json_has_every_operation_and_the_choice() {
    let (v, _) = run_json(CSUM, None);
    let ops: BTreeSet<(&str, &str)> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|e| {
            assert_eq!(e["size"], 1448, "{e}");
            let gbps = e["gbps"].as_f64().unwrap_or(f64::NAN);
            assert!(gbps.is_finite() && gbps > 0.0, "{e}");
            (e["impl"].as_str().unwrap(), e["op"].as_str().unwrap())
        })
        .collect();
    for want in [
        ("netfold", "checksum"),
        ("netfold", "copy"),
        ("netfold", "copy+checksum"),
        ("netfold", "copy,checksum"),
        ("smoltcp", "checksum"),
        ("std", "copy"),
    ] {
        assert!(ops.contains(&want), "{want:?} in {ops:?}");
    }
    let ratios: Vec<&str> = v["ratios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        ratios,
        [
            "fused / copy",
            "fused / copy-then-checksum",
            "checksum netfold / smoltcp"
        ]
    );
    check_measured(&v, None);
    // The table prints all three families' choices.
    let o = run(CSUM, None);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("kernel choice:"), "{t}");
    for fam in ["copy", "csum", "fused"] {
        let n = t
            .lines()
            .filter(|l| l.trim_start().starts_with(&format!("{fam} ")) && l.contains("(timed"))
            .count();
        assert_eq!(n, 4, "{fam}: {t}");
    }
}

#[test]
fn bad_netfold_kernels_items_are_reported_and_measured_instead() {
    // An unknown kernel, an unknown family and an item that is not FAMILY=KERNEL: each is
    // named in a warning (stderr and the JSON), and the run goes on choosing by measurement.
    let (v, err) = run_json(COPY, Some("copy=nosuch,bogus=avx2,avx2"));
    let w: Vec<&str> = v["calibration"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].contains("unknown copy kernel \"nosuch\""), "{w:?}");
    assert!(w[1].contains("unknown family \"bogus\""), "{w:?}");
    assert!(w[2].contains("\"avx2\" is not FAMILY=KERNEL"), "{w:?}");
    for x in &w {
        assert!(err.contains(x), "on stderr too: {err}");
    }
    check_measured(&v, None);
    // The table repeats them under the kernel choice.
    let o = run(CSUM, Some("copy=nosuch"));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("warning: NETFOLD_KERNELS: unknown copy kernel"),
        "{t}"
    );
}
