//! `--link xdp`: netfold at both ends of a veth pair between two throw-away namespaces, each
//! stack on an AF_XDP socket (the benchmark's own: 198.18.52.0/24, removed by its guards also
//! on failure), and the kernel at both ends of a veth pair as its counterpart, in one run.
//! Needs root and a kernel with AF_XDP; skipped (passing) without them.

mod common;

use common::{json, netfold, skip};
use serde_json::Value;

/// Runs `netfold ARGS --json`; `None` (after printing SKIPPED) when AF_XDP is unavailable.
fn run(args: &[&str]) -> Option<Value> {
    let mut a = args.to_vec();
    a.push("--json");
    let o = netfold(&a);
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("AF_XDP needs root") || err.contains("this kernel has no AF_XDP") {
        netfold_os::netns::skip(Some(format!("AF_XDP unavailable: {}", err.trim())));
        return None;
    }
    assert!(o.status.success(), "{args:?}: {err}");
    Some(serde_json::from_slice(&o.stdout).expect("JSON on stdout"))
}

#[test]
fn link_xdp_runs_netfold_at_both_ends_and_the_kernel_over_a_veth() {
    if skip() {
        return;
    }
    let Some(v) = run(&[
        "stream",
        "--stack",
        "netfold,kernel",
        "--link",
        "xdp",
        "--placement",
        "1cpu",
        "--bytes",
        "8M",
        "--verify",
        "--cpu",
    ]) else {
        return;
    };
    let rows = v["results"].as_array().expect("results");
    assert_eq!(rows.len(), 2, "{v}");
    let nf = &rows[0];
    assert_eq!(nf["stack"], "netfold", "{nf}");
    assert_eq!(nf["link"], "xdp", "{nf}");
    assert_eq!(nf["verified"], true, "{nf}");
    assert_eq!(nf["bytes"], 8 << 20, "{nf}");
    // A veth binds AF_XDP in copy mode; both sockets say so.
    let modes = nf["details"]["xdp"].as_str().expect("xdp modes");
    assert_eq!(modes.matches("copy mode").count(), 2, "{modes}");
    let k = &rows[1];
    assert_eq!(k["stack"], "kernel", "{k}");
    assert_eq!(k["link"], "veth", "{k}");
    assert_eq!(k["verified"], true, "{k}");
    // The two are alike (a veth pair at the same MTU): the run gives their ratio.
    let ratios = v["ratios"].as_array().expect("ratios");
    assert!(
        ratios
            .iter()
            .any(|r| r["name"] == "netfold/kernel" && r["ratio"].as_f64().unwrap() > 0.0),
        "{v}"
    );

    // AF_XDP is there (the run above used it): this one must succeed.
    let v = json(&[
        "rr",
        "--stack",
        "netfold",
        "--link",
        "xdp",
        "--placement",
        "1cpu",
        "-l",
        "1",
    ]);
    let r = &v["results"][0];
    assert!(
        r["details"]["transactions"].as_u64().unwrap_or(0) > 0,
        "{r}"
    );
}
