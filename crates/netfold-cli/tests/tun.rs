//! `--link tun` for the netperf-style tests: netfold on a TUN device (bare IP packets, no ARP)
//! against the kernel in a throw-away namespace, like `--link tap`. Needs root, /dev/net/tun
//! and ip(8); skipped (passing) without them. Short runs (a few MB or 0.3 s each); the
//! benchmark's namespace and TUN are its guards', removed also on failure.

mod common;

use common::{json, netfold, skip};

/// The one result row of a run on netfold over the TUN.
fn row(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--stack", "netfold", "--link", "tun", "--placement", "1cpu"]);
    let v = json(&a);
    let rows = v["results"].as_array().expect("results");
    assert_eq!(rows.len(), 1, "{v}");
    let r = rows[0].clone();
    assert_eq!(r["link"], "tun", "{r}");
    assert_eq!(r["stack"], "netfold", "{r}");
    r
}

#[test]
fn stream_and_maerts_over_tun_arrive_verified() {
    if skip() {
        return;
    }
    for test in ["stream", "maerts"] {
        let r = row(&[test, "--verify", "--bytes", "8M"]);
        assert_eq!(r["verified"], true, "{test}: {r}");
        assert!(
            r["details"]["tun"].is_string(),
            "TUN counters in details: {r}"
        );
    }
}

#[test]
fn rr_and_crr_over_tun_complete_transactions() {
    if skip() {
        return;
    }
    for test in ["rr", "crr"] {
        let r = row(&[test, "-l", "0.3"]);
        let t = r["trans_per_s"].as_f64().expect("trans_per_s");
        assert!(t > 100.0, "{test}: only {t} transactions/s: {r}");
    }
}

#[test]
fn smoltcp_over_tun_is_refused_with_a_reason() {
    let o = netfold(&["stream", "--stack", "smoltcp", "--link", "tun", "-l", "0.1"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--link tun") && e.contains("smoltcp"), "{e}");
}
