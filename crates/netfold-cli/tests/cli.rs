//! The `netfold` binary as a user runs it: bad arguments fail before any run with a message
//! that names the problem, and short runs carry the fields the JSON documents (latency
//! percentiles for RR/CRR on every stack, loss for UDP, the machine for every output).

use std::process::{Command, Output};

fn netfold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netfold"))
        .args(args)
        .output()
        .expect("run netfold")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let o = netfold(&a);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

#[test]
fn negative_numbers_are_refused_with_a_reason() {
    for args in [
        &["rr", "-l", "-5"][..],
        &["stream", "--mtu", "-5"],
        &["crr", "--transactions", "-5"],
        &["udp-stream", "-b", "-1M"],
    ] {
        let o = netfold(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(!e.contains("unexpected argument"), "{args:?}: {e}");
        assert!(
            e.contains("negative") || e.contains("positive"),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn a_bad_plot_path_fails_before_the_run() {
    let t = std::time::Instant::now();
    // -l 30: were the run to start, the test would take 30 s.
    let o = netfold(&["stream", "-l", "30", "--plot", "/nonexistent/x.svg"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent"), "{}", stderr(&o));
    assert!(t.elapsed().as_secs() < 10);
    let o = netfold(&["stream", "-l", "30", "--plot", "x.png"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("SVG"), "{}", stderr(&o));
}

#[test]
fn link_errors_and_switches_read_as_options() {
    let o = netfold(&["stream", "-l", "0.1", "--link", "lo"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("--link lo") && !e.contains("Lo "), "{e}");
    let help = String::from_utf8_lossy(&netfold(&["stream", "--help"]).stdout).into_owned();
    assert!(help.contains("[possible values: on, off]"), "{help}");
    assert!(!help.contains("true"), "{help}");
}

#[test]
fn each_subcommand_lists_only_its_own_options() {
    let help = |c: &str| String::from_utf8_lossy(&netfold(&[c, "--help"]).stdout).into_owned();
    let rr = help("rr");
    assert!(rr.contains("--rr-size") && rr.contains("--transactions"));
    assert!(!rr.contains("--send-size") && !rr.contains("--bytes") && !rr.contains("--bitrate"));
    let stream = help("stream");
    assert!(stream.contains("--send-size") && stream.contains("--verify"));
    assert!(!stream.contains("--rr-size") && !stream.contains("--transactions"));
    let udp = help("udp-stream");
    assert!(udp.contains("--bitrate") && !udp.contains("--rr-size"));
}

#[test]
fn verify_is_refused_where_it_cannot_apply() {
    for c in ["rr", "crr", "udp-stream"] {
        let o = netfold(&[c, "-l", "0.1", "--verify"]);
        assert_eq!(o.status.code(), Some(2), "{c}");
        assert!(stderr(&o).contains("--verify"), "{c}: {}", stderr(&o));
    }
}

#[test]
fn rr_reports_latency_percentiles_for_every_stack() {
    let v = json(&[
        "rr",
        "--stack",
        "netfold,kernel,smoltcp",
        "--transactions",
        "300",
        "--cpu",
    ]);
    let m = &v["machine"];
    for k in ["cpu_model", "kernel", "commit", "date"] {
        assert!(!m[k].as_str().unwrap_or("").is_empty(), "machine.{k}: {m}");
    }
    assert!(m["cores"].as_u64().unwrap_or(0) >= 1, "{m}");
    let rows = v["results"].as_array().unwrap();
    // Each stack at each placement it has: netfold and the kernel at one and two CPUs,
    // smoltcp (one thread only) at one.
    let placed: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["stack"].as_str().unwrap(),
                r["placement"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            ("netfold", "1 CPU"),
            ("netfold", "2 CPUs"),
            ("kernel", "1 CPU"),
            ("kernel", "2 CPUs"),
            ("smoltcp", "1 CPU")
        ]
    );
    for r in rows {
        let l = &r["latency_us"];
        let g = |k: &str| l[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
        assert!(
            g("p50") > 0.0 && g("p50") <= g("p90") && g("p90") <= g("p99"),
            "{l}"
        );
        assert!(g("p99") <= g("p999") && g("p999") <= g("max") && g("mean") <= g("max"));
        assert!(r["service_demand_us_per_tr"].as_f64().is_some(), "{r}");
        assert!(r.get("service_demand_us_per_kb").is_none(), "{r}");
    }
    let v = json(&[
        "crr",
        "--transactions",
        "50",
        "-r",
        "1,1",
        "-r",
        "64,64",
        "--placement",
        "1cpu",
    ]);
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["msg_size"], 64);
    assert!(rows[1]["latency_us"]["p50"].as_f64().unwrap() > 0.0);
}

#[test]
fn udp_stream_reports_both_sides() {
    let v = json(&[
        "udp-stream",
        "--stack",
        "netfold,kernel",
        "-l",
        "0.3",
        "-b",
        "20M",
    ]);
    for r in v["results"].as_array().unwrap() {
        let sent = r["sent_datagrams"].as_u64().unwrap();
        let got = r["received_datagrams"].as_u64().unwrap();
        assert!(sent > 0 && got <= sent, "{r}");
        let loss = r["loss_pct"].as_f64().unwrap();
        assert!((loss - (sent - got) as f64 * 100.0 / sent as f64).abs() < 1e-9);
        // Paced to 20 Mbit/s: the sender does not exceed it by more than one datagram's worth.
        let rate = r["send_throughput_mbps"].as_f64().unwrap();
        assert!(rate < 21.0 && rate > 10.0, "{r}");
        assert!(r["recv_throughput_mbps"].as_f64().is_some());
        assert!(r["jitter_ms"].as_f64().is_some());
    }
}

#[test]
fn kernel_loopback_runs_at_the_mtu_asked_for() {
    if netfold_os::netns::unavailable_reason().is_some() {
        // Without namespaces the run must refuse, not silently use the host loopback's MTU.
        let o = netfold(&["stream", "--stack", "kernel", "--mtu", "9000", "-l", "0.1"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains("--mtu 9000"));
        return;
    }
    let v = json(&["stream", "--stack", "kernel", "--mtu", "9000", "-l", "0.1"]);
    assert_eq!(v["results"][0]["mtu"], 9000);
}

#[test]
fn rr_draws_its_latency_distribution() {
    let path = std::env::temp_dir().join(format!("netfold-lat-{}.svg", std::process::id()));
    let p = path.to_str().unwrap();
    let o = netfold(&[
        "rr",
        "--transactions",
        "200",
        "--placement",
        "1cpu",
        "--latency-plot",
        p,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&path).expect("plot written");
    let _ = std::fs::remove_file(&path);
    assert!(svg.contains("<svg") && svg.contains("latency distribution"));
    assert!(svg.contains("netfold, 1 CPU"));
}

/// Issue 15: `--family both` measures each test over IPv4 and IPv6 in one run (netfold's two
/// stacks over the in-memory pipe at 2001:2::1 and ::2), the rows carrying their family and
/// the table an IPv6/IPv4 ratio; `--family 6` is refused where it is not implemented.
#[test]
fn family_both_measures_ipv4_and_ipv6_rows_in_one_run() {
    let v = json(&[
        "rr",
        "--stack",
        "netfold",
        "--family",
        "both",
        "-l",
        "0.2",
        "--placement",
        "1cpu",
    ]);
    let rows = v["results"].as_array().unwrap();
    let fams: Vec<&str> = rows.iter().map(|r| r["family"].as_str().unwrap()).collect();
    assert_eq!(fams, ["IPv4", "IPv6"]);
    assert!(rows
        .iter()
        .all(|r| r["trans_per_s"].as_f64().unwrap() > 0.0));
    // The IPv6 row's stacks really talked IPv6.
    let counters = rows[1]["details"]["client_counters"].as_str().unwrap();
    let ipv6_out = counters
        .lines()
        .find_map(|l| l.strip_prefix("ipv6  out"))
        .map(|v| v.trim().parse::<u64>().unwrap())
        .unwrap_or(0);
    assert!(ipv6_out > 100, "{counters}");
    let o = netfold(&[
        "stream",
        "--stack",
        "netfold",
        "--family",
        "both",
        "-l",
        "0.2",
        "--placement",
        "1cpu",
        "-m",
        "64K",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("Family") && table.contains("IPv6/IPv4"),
        "{table}"
    );
    let o = netfold(&["rr", "--stack", "smoltcp", "--family", "6", "-l", "0.1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--family 6"), "{}", stderr(&o));
    let o = netfold(&["rr", "--family", "5"]);
    assert!(!o.status.success());
}

/// Issue 13: netfold stream rows carry the passes over payload bytes per payload byte at the
/// sender and the receiver (copies plus separate checksum passes), with the counts behind
/// them; each --read path verifies byte for byte and has the passes it should.
#[test]
fn stream_reports_passes_per_payload_byte_for_each_read_path() {
    for (read, rx_max) in [("posted", 2.0), ("copy", 2.0), ("in-place", 1.0)] {
        let v = json(&[
            "stream",
            "--stack",
            "netfold",
            "--placement",
            "1cpu",
            "--bytes",
            "8M",
            "--verify",
            "--read",
            read,
        ]);
        let r = &v["results"][0];
        assert_eq!(r["verified"], true, "{read}: {r}");
        assert_eq!(r["details"]["read_path"], read, "{r}");
        let tx = r["passes_per_byte_sender"].as_f64().unwrap();
        let rx = r["passes_per_byte_receiver"].as_f64().unwrap();
        // Two copies at the sender (into the send ring, into the frame with the checksum
        // folded in), nothing else on a clean link.
        assert!((tx - 2.0).abs() < 1e-9, "{read}: sender {tx}");
        assert!((1.0..=rx_max + 1e-9).contains(&rx), "{read}: receiver {rx}");
        let p = &r["details"]["payload_passes"]["receiver"];
        assert_eq!(p["received"], 8 << 20, "{p}");
        assert_eq!(p["checksum_separate"], 0, "{p}");
    }
    // Frame reads: the payload stays in the received buffers; the one pass left is the
    // software checksum verification (the in-memory link offloads nothing), no copy at all.
    let v = json(&[
        "stream",
        "--stack",
        "netfold",
        "--placement",
        "1cpu",
        "--bytes",
        "8M",
        "--verify",
        "--read",
        "frames",
    ]);
    let r = &v["results"][0];
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["details"]["read_path"], "frames", "{r}");
    let p = &r["details"]["payload_passes"]["receiver"];
    assert_eq!(p["received"], 8 << 20, "{p}");
    assert_eq!(p["copy_frame_to_app"], 0, "{p}");
    assert_eq!(p["copy_frame_to_ring"], 0, "{p}");
    assert_eq!(p["copy_ring_to_app"], 0, "{p}");
    assert_eq!(p["borrowed_frames"], 8 << 20, "{p}");
    assert_eq!(r["passes_per_byte_receiver"].as_f64(), Some(1.0), "{r}");
    // The 2002 baseline: a checksum pass of its own at each end on top of the two copies.
    let v = json(&[
        "stream",
        "--stack",
        "netfold",
        "--placement",
        "1cpu",
        "--bytes",
        "8M",
        "--copy",
        "baseline",
        "--read",
        "copy",
    ]);
    let r = &v["results"][0];
    assert_eq!(r["passes_per_byte_sender"].as_f64(), Some(3.0), "{r}");
    assert_eq!(r["passes_per_byte_receiver"].as_f64(), Some(3.0), "{r}");
}
