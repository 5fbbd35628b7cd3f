//! `--zerocopy` on the in-memory link: `stream` and `maerts` with
//! `--zerocopy both` measure each netfold row copying and zero-copy, both arrive verified, and
//! the zero-copy rows really took the zero-copy path: no copy from the application into the
//! send ring, and completions taken for the lent buffers. Nothing here asserts a speed (the
//! machine is shared and noisy); only the counters, which do not depend on timing.

// This binary needs no namespace, so `common::skip` goes unused here.
#[allow(dead_code)]
mod common;

use common::{json, netfold};
use serde_json::Value;

/// `"completed_acked=197 completed_unacked=0 outstanding_buffers=2"` -> the number for `key`.
fn zc_count(report: &str, key: &str) -> u64 {
    report
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{key} in {report:?}"))
        .parse()
        .unwrap()
}

/// The zero-copy completion report of a row: `zerocopy` when both ends run in one thread
/// (1 CPU), `client_zerocopy` / `server_zerocopy` (the sending side's) with a thread each.
fn zc_report(r: &Value) -> Option<&str> {
    r["details"]
        .as_object()?
        .iter()
        .find(|(k, _)| k.ends_with("zerocopy"))
        .and_then(|(_, v)| v.as_str())
}

/// Checks one `--zerocopy both` run of `test` (8 MiB, verified, both placements).
fn check_both(test: &str) {
    let v = json(&[
        test,
        "--stack",
        "netfold",
        "--zerocopy",
        "both",
        "--verify",
        "--bytes",
        "8M",
    ]);
    let rows = v["results"].as_array().expect("results");
    // Each placement (1 CPU: one thread both ends; 2 CPUs: a thread each, another code path)
    // copying, then zero-copy.
    let placed: Vec<&str> = rows
        .iter()
        .map(|r| r["placement"].as_str().unwrap())
        .collect();
    assert_eq!(
        placed,
        ["1 CPU", "1 CPU, zc", "2 CPUs", "2 CPUs, zc"],
        "{test}"
    );
    for r in rows {
        let place = r["placement"].as_str().unwrap();
        let zc = place.ends_with(", zc");
        assert_eq!(r["verified"], true, "{test} {place}: {r}");
        assert_eq!(r["bytes"], 8 << 20, "{test} {place}: {r}");
        let s = &r["details"]["payload_passes"]["sender"];
        assert_eq!(s["sent"], 8 << 20, "{test} {place}: {s}");
        assert_eq!(s["checksum_separate"], 0, "{test} {place}: {s}");
        let tx = r["passes_per_byte_sender"].as_f64().expect("sender passes");
        if zc {
            // The sender lent its buffers: nothing copied into the send ring. What is left
            // on the in-memory link is the one copy into the frame with the checksum folded
            // in (more than 1.0 only by retransmissions).
            assert_eq!(s["copy_app_to_ring"], 0, "{test} {place}: {s}");
            assert!(tx >= 1.0, "{test} {place}: sender passes {tx}");
            let frame = s["copy_ring_to_frame"].as_u64().unwrap() as f64;
            assert!((tx - frame / (8 << 20) as f64).abs() < 1e-9, "{s}");
            // Lent buffers came back through completions, each after its bytes were acked.
            let z = zc_report(r).unwrap_or_else(|| panic!("{test} {place}: no zerocopy: {r}"));
            assert!(zc_count(z, "completed_acked") > 0, "{test} {place}: {z}");
            assert_eq!(zc_count(z, "completed_unacked"), 0, "{test} {place}: {z}");
        } else {
            // The copying twin copies every byte into the send ring, and has no completions.
            assert_eq!(s["copy_app_to_ring"], 8 << 20, "{test} {place}: {s}");
            assert!(tx >= 2.0, "{test} {place}: sender passes {tx}");
            assert!(zc_report(r).is_none(), "{test} {place}: {r}");
        }
    }
}

#[test]
fn stream_zerocopy_both_is_verified_and_lends_the_buffers() {
    check_both("stream");
}

#[test]
fn maerts_zerocopy_both_is_verified_and_lends_the_buffers() {
    // In maerts the netfold server sends: the zero-copy send is on the other side.
    check_both("maerts");
}

#[test]
fn zerocopy_both_prints_the_ratio_and_the_passes_in_the_table() {
    let o = netfold(&[
        "stream",
        "--stack",
        "netfold",
        "--zerocopy",
        "both",
        "--bytes",
        "8M",
        "--placement",
        "1cpu",
        "--cpu",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("1 CPU, zc") && t.contains("zero-copy/copy"),
        "{t}"
    );
    assert!(t.contains("Passes/B"), "{t}");
}

#[test]
fn zerocopy_is_refused_where_there_is_no_byte_stream_to_send() {
    for test in ["rr", "crr", "udp-stream"] {
        // -l 30: were the run to start, the test would take 30 s.
        let o = netfold(&[test, "--zerocopy", "-l", "30"]);
        assert_eq!(o.status.code(), Some(2), "{test}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains("--zerocopy") && e.contains("stream and maerts only"),
            "{test}: {e}"
        );
    }
}
