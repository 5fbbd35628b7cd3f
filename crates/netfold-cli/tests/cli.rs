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

/// `--family both` measures each test over IPv4 and IPv6 in one run (netfold's two
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
    // Counters are JSON objects of numbers, one per layer.
    let counters = &rows[1]["details"]["client_counters"];
    let ipv6_out = counters["ipv6"]["out"].as_u64().unwrap();
    assert!(ipv6_out > 100, "{counters}");
    assert!(
        counters["tcp"]["segments_in"].as_u64().unwrap() > 0,
        "{counters}"
    );
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

/// netfold stream rows carry the passes over payload bytes per payload byte at the
/// sender and the receiver (copies plus separate checksum passes), with the counts behind
/// The in-memory pipe dropped nothing in either direction of a netfold row (the premise of
/// exact pass counts).
fn assert_clean_link(r: &serde_json::Value) {
    for side in ["pipe_client_tx", "pipe_server_tx"] {
        let s = r["details"][side].as_str().unwrap_or_default();
        assert!(
            s.contains("dropped_full=0 ") && s.contains("dropped_loss=0"),
            "{side}: {s}"
        );
    }
}

/// them; each --read path verifies byte for byte and has the passes it should.
///
/// The pass counts hold on a clean link: a loss costs a retransmission (another copy at the
/// sender) and leaves a hole that later bytes wait behind in the receive ring (a copy at the
/// receiver). The in-memory pipe holds 1,024 frames per direction and drops past that, and
/// receive-buffer autotuning can grow the window beyond it (a preempted poll gives a 1 ms RTT
/// sample; 2 x the bytes read in that RTT is megabytes), so every run here fixes the receive
/// buffer at 1 MiB (-S, which turns autotuning off as SO_RCVBUF does), under what the pipe
/// holds, and checks that the pipe dropped nothing.
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
            "-S",
            "1M",
            "--verify",
            "--read",
            read,
        ]);
        let r = &v["results"][0];
        assert_clean_link(r);
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
        "-S",
        "1M",
        "--verify",
        "--read",
        "frames",
    ]);
    let r = &v["results"][0];
    assert_clean_link(r);
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
        "-S",
        "1M",
        "--copy",
        "baseline",
        "--read",
        "copy",
    ]);
    let r = &v["results"][0];
    assert_clean_link(r);
    assert_eq!(r["passes_per_byte_sender"].as_f64(), Some(3.0), "{r}");
    assert_eq!(r["passes_per_byte_receiver"].as_f64(), Some(3.0), "{r}");
}

/// `netfold --version` names the commit the binary was built from (in a git checkout) and the
/// build profile.
#[test]
fn version_names_the_commit_and_the_build() {
    let o = netfold(&["--version"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("netfold "), "{out}");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        // The binary may predate the newest commit only if cargo did not rebuild it, which the
        // build script's watch on HEAD and its ref prevents.
        Some(commit) => assert!(out.contains(&format!("commit {commit}")), "{out}"),
        None => assert!(!out.contains("commit"), "{out}"),
    }
}

/// The table says what each link is, takes ratios only between rows measured alike (the
/// in-memory pipe against the kernel's loopback is not), and warns about 2-CPU rows on a
/// machine with no more than two CPUs; the JSON carries the same ratios and warnings.
#[test]
fn the_table_describes_its_links_and_only_compares_like_rows() {
    let args = [
        "stream",
        "--stack",
        "netfold,kernel,smoltcp",
        "-m",
        "64K",
        "-l",
        "0.2",
    ];
    let o = netfold(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines[1].starts_with("pipe") && lines[1].contains("MTU 1500"),
        "{t}"
    );
    assert!(
        lines[2].starts_with("lo") && lines[2].contains("system calls"),
        "{t}"
    );
    assert!(
        t.contains("netfold/smoltcp") && t.contains("no netfold/kernel ratio"),
        "{t}"
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        t.contains("warning: this process can use"),
        cpus <= 2,
        "{t}"
    );
    let v = json(&args);
    let names: Vec<&str> = v["ratios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["netfold/smoltcp"], "{}", v["ratios"]);
    assert!(v["ratios"][0]["ratio"].as_f64().unwrap() > 0.0);
    assert_eq!(v["links"][1]["link"], "lo");
    assert_eq!(
        v["warnings"].as_array().unwrap().len(),
        usize::from(cpus <= 2)
    );
}

/// Starts netfold with `args` and returns its first stdout line (read while it still runs),
/// whether it was still running then, and the rest of its output.
fn first_line_live(args: &[&str]) -> (String, bool, Vec<String>) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_netfold"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run netfold");
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").expect("text");
    let running = child.try_wait().expect("wait").is_none();
    let rest: Vec<String> = lines.map(|l| l.expect("text")).collect();
    assert!(child.wait().unwrap().success(), "{args:?}");
    (first, running, rest)
}

/// `--interval` rows print as each interval ends, before the run is over (iperf3's way), and
/// the table follows at the end without repeating them.
#[test]
fn interval_reports_print_while_the_test_runs() {
    let (first, running, rest) = first_line_live(&[
        "stream",
        "--stack",
        "kernel",
        "-l",
        "2",
        "--interval",
        "0.25",
    ]);
    assert!(first.starts_with("Intervals of row 1"), "{first}");
    assert!(
        running,
        "the first interval arrived only after the run ended"
    );
    let table = rest
        .iter()
        .position(|l| l.contains("TCP_STREAM TEST"))
        .expect("table");
    let rows = rest[..table]
        .iter()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert!(rows >= 6, "{rest:?}");
    assert!(
        !rest[table..].iter().any(|l| l.starts_with("Intervals")),
        "{rest:?}"
    );
}

/// `--json-stream`: one JSON line per interval as it ends, then one line with the results.
#[test]
fn json_stream_prints_a_line_per_interval_then_the_results() {
    let (first, running, rest) = first_line_live(&[
        "rr",
        "--stack",
        "kernel",
        "-l",
        "1.5",
        "--interval",
        "0.25",
        "--json-stream",
    ]);
    assert!(
        running,
        "the first interval arrived only after the run ended"
    );
    let v: serde_json::Value = serde_json::from_str(&first).expect("a JSON line");
    assert_eq!(v["event"], "interval", "{v}");
    assert!(v["trans_per_s"].as_f64().unwrap() > 0.0 && v["end_s"].as_f64().unwrap() > 0.0);
    let last: serde_json::Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(last["event"], "end");
    assert_eq!(last["results"][0]["test"], "TCP_RR");
    assert!(
        last["ratios"].is_array() && last["machine"].is_object(),
        "{last}"
    );
    for l in &rest[..rest.len() - 1] {
        let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
        assert_eq!(v["event"], "interval", "{v}");
    }
}

/// `serve` without the right to open a TAP says what it needs (root or CAP_NET_ADMIN), not
/// only "Permission denied". As root it runs as nobody (setpriv) to see it.
#[test]
fn serve_without_root_says_what_it_needs() {
    let exe = env!("CARGO_BIN_EXE_netfold");
    let serve = [
        exe,
        "serve",
        "--link",
        "tap:nfperm0",
        "--addr",
        "198.18.0.2/24",
    ];
    let root = netfold_os::netns::is_root();
    if root && netfold_os::netns::skip(netfold_os::netns::missing_tools(&["setpriv"])) {
        return;
    }
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        c.args(serve);
        c
    } else {
        let mut c = Command::new(exe);
        c.args(&serve[1..]);
        c
    };
    let o = cmd.output().expect("run netfold serve");
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("root or CAP_NET_ADMIN") && e.contains("tap:nfperm0"),
        "{e}"
    );
}

/// `serve --help` says the iperf3 service runs TCP tests only, and offers --counters.
#[test]
fn serve_help_says_iperf3_is_tcp_only() {
    let o = netfold(&["--help"]);
    let top = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(top.contains("TCP tests only"), "{top}");
    let o = netfold(&["serve", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        help.contains("--counters") && help.contains("TCP tests only"),
        "{help}"
    );
}
