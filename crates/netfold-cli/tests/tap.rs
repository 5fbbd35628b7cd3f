//! Passes over payload bytes with `--link tap`: netfold on a TAP against the
//! Linux kernel in a throw-away namespace (the benchmark's own: 198.18.3.0/24, removed by its
//! guards also on failure). Only netfold's end is counted; the kernel's end is reported as not
//! counted. The target "0 passes per payload byte on zero-copy send to a TAP with offloads"
//! is checked here. Needs root, /dev/net/tun and ip(8); skipped (passing) without them.

mod common;

use common::{json, netfold, skip};
use serde_json::Value;

/// `"TapStats { ..., tx_sg_frames: 140, ... }"` -> the number for `key`.
fn tap_count(stats: &str, key: &str) -> u64 {
    let at = stats
        .find(&format!(" {key}: "))
        .unwrap_or_else(|| panic!("{key} in {stats}"));
    stats[at + key.len() + 3..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn rows(v: &Value) -> &Vec<Value> {
    v["results"].as_array().expect("results")
}

#[test]
fn zerocopy_send_to_a_tap_with_offloads_touches_no_payload_byte() {
    if skip() {
        return;
    }
    let v = json(&[
        "stream",
        "--stack",
        "netfold",
        "--link",
        "tap",
        "--placement",
        "1cpu",
        "--bytes",
        "8M",
        "--verify",
        "--zerocopy",
        "both",
        "--cpu",
    ]);
    let rows = rows(&v);
    assert_eq!(rows.len(), 2, "copying and zero-copy: {v}");
    for r in rows {
        let place = r["placement"].as_str().unwrap();
        assert_eq!(r["link"], "tap", "{r}");
        assert_eq!(r["verified"], true, "{place}: {r}");
        // The receiver is the kernel: not counted, and said so.
        assert_eq!(r["passes_not_counted"], "receiver", "{place}: {r}");
        assert!(r.get("passes_per_byte_receiver").is_none(), "{place}: {r}");
        let pp = &r["details"]["payload_passes"];
        assert!(
            pp["receiver"]
                .as_str()
                .is_some_and(|s| s.starts_with("n/a")),
            "{pp}"
        );
        assert_eq!(pp["sender"]["sent"], 8 << 20, "{pp}");
        let tx = r["passes_per_byte_sender"]
            .as_f64()
            .unwrap_or_else(|| panic!("{place}: sender passes counted: {r}"));
        let tap = r["details"]["tap"].as_str().expect("TAP counters");
        // The offloads the target assumes: checksums left to the device (CHECKSUM_PARTIAL on
        // every TCP frame, none completed in software).
        assert!(tap_count(tap, "tx_csum_partial") > 0, "{tap}");
        assert_eq!(tap_count(tap, "tx_csum_software"), 0, "{tap}");
        if place.ends_with(", zc") {
            // Scatter-gather: the frames went out as header + the application's own pages, so
            // netfold copied and checksummed no payload byte.
            assert_eq!(tap_count(tap, "tx_sg_bytes"), 8 << 20, "{tap}");
            assert_eq!(tx, 0.0, "{place}: {pp}");
        } else {
            // Copying: into the send ring and into the frame.
            assert!(tx > 0.0, "{place}: {pp}");
            assert_eq!(tap_count(tap, "tx_sg_frames"), 0, "{tap}");
        }
    }
}

#[test]
fn maerts_over_a_tap_counts_netfold_as_the_receiver() {
    if skip() {
        return;
    }
    let args = [
        "maerts",
        "--stack",
        "netfold",
        "--link",
        "tap",
        "--placement",
        "1cpu",
        "--bytes",
        "8M",
        "--verify",
        "--cpu",
    ];
    let v = json(&args);
    let r = &rows(&v)[0];
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["passes_not_counted"], "sender", "{r}");
    assert!(r.get("passes_per_byte_sender").is_none(), "{r}");
    // At least one copy to the application (checksums verified by the device or in a copy).
    let rx = r["passes_per_byte_receiver"]
        .as_f64()
        .expect("receiver passes");
    assert!(rx >= 1.0, "{r}");
    assert_eq!(
        r["details"]["payload_passes"]["receiver"]["received"],
        8 << 20
    );
    // The table shows the columns, with "n/a" for the kernel's end and a note saying why.
    let o = netfold(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8_lossy(&o.stdout);
    let row = t
        .lines()
        .find(|l| l.starts_with("netfold"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(row.contains(" n/a "), "{t}");
    assert!(t.contains("Passes/B n/a: the Linux kernel's end"), "{t}");
}
