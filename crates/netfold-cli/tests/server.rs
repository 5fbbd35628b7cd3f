//! `netfold server` and `netfold <test> -H` between two network namespaces joined by a veth pair
//! (198.18.9.1 client, 198.18.9.2 server), with iperf3 between the same namespaces as the
//! yardstick: the target is the netfold figure within 30% of iperf3's.
//!
//! Needs root, `ip netns` and iperf3; otherwise `SKIPPED: ...` and a pass. The namespaces are removed on drop,
//! also when a check panics.

use netfold_os::netns::{self, NetNs};
use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tests of this file move data as fast as they can: run one at a time, so the iperf3
/// comparison does not share the CPUs with another test's traffic.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 9, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 9, 2);

struct Pair {
    client: NetNs,
    server: NetNs,
}

impl Pair {
    fn create() -> Pair {
        let client = NetNs::create().expect("client netns");
        let server = NetNs::create().expect("server netns");
        let (a, b) = (format!("{}c", client.name()), format!("{}s", client.name()));
        // Interface names are at most 15 bytes.
        let (a, b) = (
            a[a.len().saturating_sub(15)..].to_string(),
            b[b.len().saturating_sub(15)..].to_string(),
        );
        netns::ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]).expect("veth");
        client.adopt(&a).unwrap();
        server.adopt(&b).unwrap();
        client.configure(&a, CLIENT, 24).unwrap();
        server.configure(&b, SERVER, 24).unwrap();
        Pair { client, server }
    }
}

/// Kills a child (its own pid only) when dropped.
struct Guard(Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn skip_reason() -> Option<String> {
    netns::unavailable_with(&["iperf3"])
}

fn json(ns: &NetNs, args: &[&str]) -> serde_json::Value {
    let out = ns
        .command(env!("CARGO_BIN_EXE_netfold"))
        .args(args)
        .output()
        .expect("run netfold");
    assert!(
        out.status.success(),
        "netfold {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("netfold JSON")
}

fn start_server(p: &Pair) -> Guard {
    let mut c = p
        .server
        .command(env!("CARGO_BIN_EXE_netfold"))
        .args(["server", "--addr", &SERVER.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start netfold server");
    let mut line = String::new();
    BufReader::new(c.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening"), "{line}");
    Guard(c)
}

fn iperf3_mbps(p: &Pair) -> f64 {
    let _s = Guard(
        p.server
            .command("iperf3")
            .args(["-s", "-1", "-B", &SERVER.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .expect("iperf3 -s"),
    );
    let t0 = Instant::now();
    loop {
        let out = p
            .client
            .command("iperf3")
            .args(["-c", &SERVER.to_string(), "-t", "2", "-J"])
            .output()
            .unwrap();
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if let Some(bps) = v["end"]["sum_received"]["bits_per_second"].as_f64() {
                return bps / 1e6;
            }
            // iperf3 -s may not be listening yet (it exits 0 with an "error" field then).
            let refused = v["error"].as_str().is_some_and(|e| e.contains("refused"));
            assert!(
                refused && t0.elapsed() < Duration::from_secs(10),
                "iperf3 -c: {v}"
            );
        } else {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "iperf3 -c failed: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn server_and_dash_h_agree_with_iperf3() {
    let _one_at_a_time = serial();
    if netns::skip(skip_reason()) {
        return;
    }
    let p = Pair::create();
    let h = SERVER.to_string();
    let mut server = start_server(&p);

    // The target: netfold stream -H within 30% of iperf3 between the same
    // namespaces. One retry: the machine is shared, and a burst of other work during one of
    // the two 2 s runs is not a property of either tool.
    let mut ratio = 0.0;
    for attempt in 0..2 {
        // Like with like: iperf3 writes 128 KiB blocks by default (its -l), netperf and netfold
        // 64 KiB. On a quiet machine the send size alone made a 30% gap over this veth
        // (netfold -m 64K 15.0 Gbit/s, -m 128K 20.0, iperf3 20.2), which the test must not
        // mistake for a difference between the tools.
        let v = json(
            &p.client,
            &["stream", "-H", &h, "-l", "2", "-m", "128K", "--json"],
        );
        let nf = v["results"][0]["throughput_mbps"].as_f64().unwrap();
        let ip = iperf3_mbps(&p);
        ratio = nf / ip;
        eprintln!("attempt {attempt}: netfold stream -H {nf:.0} Mbit/s, iperf3 {ip:.0} Mbit/s, ratio {ratio:.3}");
        if (0.7..=1.3).contains(&ratio) {
            break;
        }
    }
    assert!((0.7..=1.3).contains(&ratio), "netfold/iperf3 = {ratio:.3}");

    let v = json(&p.client, &["rr", "-H", &h, "-l", "1", "--json"]);
    let r = &v["results"][0];
    assert!(r["trans_per_s"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["details"]["transactions"].as_u64().unwrap() > 0, "{r}");
    assert!(r["latency_us"]["p99"].as_f64().unwrap() > 0.0, "{r}");

    let v = json(
        &p.client,
        &["udp-stream", "-H", &h, "-l", "1", "-b", "100M", "--json"],
    );
    let r = &v["results"][0];
    assert!(r["received_datagrams"].as_u64().unwrap() > 0, "{r}");
    assert!(r["loss_pct"].as_f64().is_some(), "{r}");

    let v = json(&p.client, &["udp-rr", "-H", &h, "-l", "1", "--json"]);
    let r = &v["results"][0];
    assert!(r["details"]["transactions"].as_u64().unwrap() > 0, "{r}");
    assert!(r["latency_us"]["p50"].as_f64().unwrap() > 0.0, "{r}");

    let v = json(&p.client, &["crr", "-H", &h, "-l", "1", "--json"]);
    assert!(v["results"][0]["details"]["transactions"].as_u64().unwrap() > 0);

    let v = json(
        &p.client,
        &[
            "stream",
            "-H",
            &h,
            "-l",
            "1",
            "-P",
            "2",
            "--bidir",
            "--interval",
            "0.25",
            "--json",
        ],
    );
    let r = &v["results"][0];
    let streams = r["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4, "{r}");
    assert!(
        streams.iter().all(|s| s["bytes"].as_u64().unwrap() > 0),
        "{r}"
    );
    let sum: u64 = streams.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, r["bytes"].as_u64().unwrap());
    assert!(r["intervals"].as_array().unwrap().len() >= 3, "{r}");

    let v = json(
        &p.client,
        &["maerts", "-H", &h, "-l", "1", "--verify", "--json"],
    );
    assert_eq!(v["results"][0]["verified"], true);

    // SIGTERM: the server stops and exits 0.
    // SAFETY: kill(2) on the pid of the child this test started and still owns.
    unsafe {
        libc::kill(server.0.id() as i32, libc::SIGTERM);
    }
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = server.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "server did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn a_server_refuses_to_start_on_a_busy_port() {
    let _one_at_a_time = serial();
    if netns::skip(netns::unavailable_reason()) {
        return;
    }
    let ns = NetNs::create().unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let _first = start_server_in(&ns);
    let out = ns
        .command(env!("CARGO_BIN_EXE_netfold"))
        .args(["server", "--addr", "127.0.0.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
}

fn start_server_in(ns: &NetNs) -> Guard {
    let mut c = ns
        .command(env!("CARGO_BIN_EXE_netfold"))
        .args(["server", "--addr", "127.0.0.1"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening"), "{line}");
    Guard(c)
}

fn netfold(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_netfold"))
        .args(args)
        .output()
        .expect("run netfold")
}

#[test]
fn parallel_streams_and_intervals_run_locally_on_the_kernel() {
    let _one_at_a_time = serial();
    let o = netfold(&[
        "stream",
        "--stack",
        "kernel",
        "-P",
        "3",
        "--interval",
        "0.1",
        "-l",
        "0.5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["results"][0];
    let streams = r["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 3, "{r}");
    let sum: u64 = streams.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, r["bytes"].as_u64().unwrap());
    let iv = r["intervals"].as_array().unwrap();
    assert!(iv.len() >= 3, "{r}");
    // Back to back: each interval starts where the last ended.
    for w in iv.windows(2) {
        assert_eq!(w[0]["end_s"], w[1]["start_s"]);
    }
    // The table shows the streams and intervals as rows.
    let o = netfold(&[
        "maerts",
        "--stack",
        "kernel",
        "-P",
        "2",
        "--interval",
        "0.2",
        "-l",
        "0.4",
    ]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("Streams of row 1") && t.contains("Intervals of row 1"),
        "{t}"
    );

    let o = netfold(&["udp-rr", "--stack", "kernel", "-l", "0.3", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["test"], "UDP_RR");
    assert!(v["results"][0]["latency_us"]["p50"].as_f64().unwrap() > 0.0);
}

/// The same client and server halves on two netfold stacks over the in-memory pipe, each on
/// a netfold-rt driver thread: -P with --bidir, intervals, and udp-rr.
#[test]
fn parallel_streams_bidir_and_udp_rr_run_locally_on_netfold() {
    let _one_at_a_time = serial();
    let o = netfold(&[
        "stream",
        "--stack",
        "netfold",
        "-P",
        "2",
        "--bidir",
        "--interval",
        "0.1",
        "-l",
        "0.5",
        "--verify",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["stack"], "netfold", "{r}");
    assert_eq!(r["link"], "pipe", "{r}");
    let streams = r["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4, "{r}");
    for dir in ["c2s", "s2c"] {
        assert_eq!(
            streams.iter().filter(|s| s["direction"] == dir).count(),
            2,
            "{r}"
        );
    }
    assert!(
        streams.iter().all(|s| s["bytes"].as_u64().unwrap() > 0),
        "{r}"
    );
    let sum: u64 = streams.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, r["bytes"].as_u64().unwrap());
    assert_eq!(r["verified"], true, "{r}");
    assert!(r["intervals"].as_array().unwrap().len() >= 3, "{r}");

    let o = netfold(&["udp-rr", "--stack", "netfold", "-l", "0.3", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["stack"], "netfold");
    assert!(v["results"][0]["latency_us"]["p50"].as_f64().unwrap() > 0.0);
}

#[test]
fn options_that_cannot_apply_are_refused_with_a_reason() {
    let _one_at_a_time = serial();
    for (args, want) in [
        (
            &["rr", "--stack", "kernel", "-P", "2", "-l", "0.1"][..],
            "stream and maerts",
        ),
        // netfold runs these locally since its stacks got the runtime path (test above);
        // smoltcp's runner still carries one connection.
        (
            &["udp-rr", "--stack", "smoltcp", "-l", "0.1"][..],
            "--stack kernel",
        ),
        (
            &["stream", "--stack", "smoltcp", "-P", "2", "-l", "0.1"][..],
            "--stack kernel",
        ),
        (&["stream", "-P", "0"][..], "1..=128"),
        (&["stream", "--interval", "0"][..], "--interval"),
        (&["udp-rr", "--stack", "kernel", "-i", "3"][..], "-i"),
        (
            &[
                "stream",
                "-H",
                "198.18.9.9",
                "--stack",
                "smoltcp",
                "-l",
                "0.1",
            ][..],
            "-H",
        ),
    ] {
        let o = netfold(args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
    }
}

/// Sends SIGTERM to the server and checks it exits 0 within a few seconds.
fn stop(server: &mut Guard) {
    // SAFETY: kill(2) on the pid of the child this test started and still owns.
    unsafe {
        libc::kill(server.0.id() as i32, libc::SIGTERM);
    }
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = server.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "server did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn netfold_serves_on_a_tap_to_kernel_clients() {
    let _one_at_a_time = serial();
    if netns::skip(netns::unavailable_reason()) {
        return;
    }
    let ns = NetNs::create().unwrap();
    let tap = format!("nfh{}", std::process::id() % 1_000_000);
    ns.ip(&["tuntap", "add", "mode", "tap", "name", &tap])
        .unwrap();
    ns.configure(&tap, Ipv4Addr::new(198, 18, 10, 1), 24)
        .unwrap();
    let mut c = ns
        .command(env!("CARGO_BIN_EXE_netfold"))
        .args([
            "server",
            "--link",
            &format!("tap:{tap}"),
            "--addr",
            "198.18.10.2/24",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut server = Guard(c);
    assert!(
        line.contains("listening") && line.contains("netfold on tap:"),
        "{line}"
    );
    let h = "198.18.10.2";
    let v = json(&ns, &["stream", "-H", h, "-l", "1", "--verify", "--json"]);
    let r = &v["results"][0];
    assert!(r["throughput_mbps"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    eprintln!(
        "kernel -> netfold server on TAP: {} Mbit/s",
        r["throughput_mbps"]
    );
    let v = json(&ns, &["maerts", "-H", h, "-l", "1", "-P", "2", "--json"]);
    assert_eq!(v["results"][0]["streams"].as_array().unwrap().len(), 2);
    assert!(v["results"][0]["bytes"].as_u64().unwrap() > 0);
    let v = json(&ns, &["rr", "-H", h, "-l", "1", "--json"]);
    assert!(v["results"][0]["details"]["transactions"].as_u64().unwrap() > 0);
    let v = json(
        &ns,
        &["udp-stream", "-H", h, "-l", "1", "-b", "50M", "--json"],
    );
    assert!(v["results"][0]["received_datagrams"].as_u64().unwrap() > 0);
    let v = json(&ns, &["udp-rr", "-H", h, "-l", "1", "--json"]);
    assert!(v["results"][0]["details"]["transactions"].as_u64().unwrap() > 0);
    stop(&mut server);
    let _ = ns.ip(&["link", "del", &tap]);
}

/// `netfold server` on kernel sockets at `addr` in `ns`, its stderr kept for the log lines.
fn start_kernel_server(ns: &NetNs, addr: &str) -> (Guard, BufReader<std::process::ChildStderr>) {
    let mut c = ns
        .command(env!("CARGO_BIN_EXE_netfold"))
        .args(["server", "--addr", addr])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start netfold server");
    let mut log = BufReader::new(c.stderr.take().unwrap());
    let mut line = String::new();
    log.read_line(&mut line).unwrap();
    assert!(
        line.contains("listening") && line.contains("kernel sockets"),
        "{line}"
    );
    (Guard(c), log)
}

/// Stops the server and returns the peers of the tests it logged as done.
fn stop_and_read_peers(
    server: &mut Guard,
    mut log: BufReader<std::process::ChildStderr>,
) -> Vec<String> {
    stop(server);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut log, &mut rest).unwrap();
    rest.lines()
        .filter(|l| l.ends_with(" done"))
        .map(|l| {
            l.trim_start_matches("netfold server: ")
                .split(": ")
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// A counter of `link` inside `ns` (`/sys/class/net/LINK/statistics/NAME`).
fn link_counter(ns: &NetNs, link: &str, name: &str) -> u64 {
    let out = ns
        .run(
            "cat",
            &[&format!("/sys/class/net/{link}/statistics/{name}")],
        )
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// netfold as the -H client: `--link tap:NAME --addr 198.18.11.2/24` puts the
/// client's control and data connections on a netfold stack over the TAP's descriptor; the
/// TAP's kernel side (198.18.11.1) and `netfold server` on kernel sockets are in a namespace.
/// The client process runs in that namespace too (a TAP is opened by name in the opener's
/// namespace), but 198.18.11.2 is no kernel address there: the server logging that peer, and
/// the TAP's receive counter covering the bytes, show the traffic went through netfold.
#[test]
fn netfold_is_the_dash_h_client_on_a_tap() {
    let _one_at_a_time = serial();
    if netns::skip(netns::unavailable_reason()) {
        return;
    }
    let ns = NetNs::create().unwrap();
    let tap = format!("nfk{}", std::process::id() % 1_000_000);
    ns.ip(&["tuntap", "add", "mode", "tap", "name", &tap])
        .unwrap();
    ns.configure(&tap, Ipv4Addr::new(198, 18, 11, 1), 24)
        .unwrap();
    let (mut server, log) = start_kernel_server(&ns, "198.18.11.1");
    let dev = format!("tap:{tap}");
    let client = |test: &[&str]| {
        let mut args = test.to_vec();
        args.extend([
            "-H",
            "198.18.11.1",
            "--link",
            &dev,
            "--addr",
            "198.18.11.2/24",
            "-l",
            "1",
            "--json",
        ]);
        json(&ns, &args)
    };
    let rx0 = link_counter(&ns, &tap, "rx_bytes");

    let v = client(&["stream", "--verify"]);
    let r = &v["results"][0];
    let mbps = r["throughput_mbps"].as_f64().unwrap();
    assert!(mbps > 0.0, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["stack"], "netfold", "{r}");
    assert!(r["link"].as_str().unwrap().starts_with(&dev), "{r}");
    let bytes = r["bytes"].as_u64().unwrap();
    let rx = link_counter(&ns, &tap, "rx_bytes") - rx0;
    assert!(
        rx >= bytes,
        "the kernel got {rx} bytes from the TAP, the server {bytes}"
    );
    eprintln!("netfold client on TAP -> kernel netfold server: {mbps:.0} Mbit/s");

    let v = client(&["rr"]);
    let r = &v["results"][0];
    assert!(r["trans_per_s"].as_f64().unwrap() > 0.0, "{r}");
    for p in ["p50", "p99", "p999"] {
        assert!(r["latency_us"][p].as_f64().unwrap() > 0.0, "{p}: {r}");
    }

    let v = client(&["udp-stream", "-b", "50M"]);
    let r = &v["results"][0];
    assert!(r["sent_datagrams"].as_u64().unwrap() > 0, "{r}");
    assert!(r["received_datagrams"].as_u64().unwrap() > 0, "{r}");
    let loss = r["loss_pct"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&loss), "{r}");

    let peers = stop_and_read_peers(&mut server, log);
    assert_eq!(peers.len(), 3, "{peers:?}");
    assert!(
        peers.iter().all(|p| p.starts_with("198.18.11.2:")),
        "every control connection came from netfold's address: {peers:?}"
    );
}

/// The same over `tun:NAME` (netfold on the IP medium) and `packet:IFNAME` (an AF_PACKET
/// socket on the client's end of a veth pair that has no kernel address: two namespaces, as
/// two hosts).
#[test]
fn netfold_is_the_dash_h_client_on_a_tun_and_a_packet_socket() {
    let _one_at_a_time = serial();
    if netns::skip(netns::unavailable_reason()) {
        return;
    }
    let server_ns = NetNs::create().unwrap();
    let client_ns = NetNs::create().unwrap();
    let id = std::process::id() % 1_000_000;
    let (tun, vs, vc) = (format!("nfu{id}"), format!("nfs{id}"), format!("nfc{id}"));
    server_ns
        .ip(&["tuntap", "add", "mode", "tun", "name", &tun])
        .unwrap();
    server_ns
        .configure(&tun, Ipv4Addr::new(198, 18, 12, 1), 24)
        .unwrap();
    server_ns
        .ip(&[
            "link",
            "add",
            &vs,
            "type",
            "veth",
            "peer",
            "name",
            &vc,
            "netns",
            client_ns.name(),
        ])
        .unwrap();
    server_ns
        .configure(&vs, Ipv4Addr::new(198, 18, 13, 1), 24)
        .unwrap();
    client_ns.ip(&["link", "set", &vc, "up"]).unwrap();
    let (mut server, log) = start_kernel_server(&server_ns, "0.0.0.0");

    let tun_dev = format!("tun:{tun}");
    let v = json(
        &server_ns,
        &[
            "stream",
            "-H",
            "198.18.12.1",
            "--link",
            &tun_dev,
            "--addr",
            "198.18.12.2/24",
            "-l",
            "1",
            "--verify",
            "--json",
        ],
    );
    let r = &v["results"][0];
    assert!(r["throughput_mbps"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["verified"], true, "{r}");

    let pkt_dev = format!("packet:{vc}");
    let v = json(
        &client_ns,
        &[
            "stream",
            "-H",
            "198.18.13.1",
            "--link",
            &pkt_dev,
            "--addr",
            "198.18.13.2/24",
            "-l",
            "1",
            "--verify",
            "--json",
        ],
    );
    let r = &v["results"][0];
    assert!(r["throughput_mbps"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    let v = json(
        &client_ns,
        &[
            "rr",
            "-H",
            "198.18.13.1",
            "--link",
            &pkt_dev,
            "--addr",
            "198.18.13.2/24",
            "-l",
            "1",
            "--json",
        ],
    );
    let r = &v["results"][0];
    assert!(r["details"]["transactions"].as_u64().unwrap() > 0, "{r}");
    assert!(r["latency_us"]["p50"].as_f64().unwrap() > 0.0, "{r}");

    let peers = stop_and_read_peers(&mut server, log);
    assert_eq!(peers.len(), 3, "{peers:?}");
    assert!(peers[0].starts_with("198.18.12.2:"), "{peers:?}");
    assert!(
        peers[1..].iter().all(|p| p.starts_with("198.18.13.2:")),
        "{peers:?}"
    );
}

/// netfold at both ends of a veth pair over AF_XDP: `netfold server --link xdp:S` in one
/// namespace at 198.18.48.2, `netfold stream|rr -H ... --link xdp:C` in the other at
/// 198.18.48.1. Neither veth end has a kernel address: every frame went through an AF_XDP
/// socket (the server logs the client's netfold address as the peer). Without AF_XDP (not
/// root, a kernel without it): `SKIPPED: ...`.
#[test]
fn netfold_at_both_ends_of_an_af_xdp_veth() {
    let _one_at_a_time = serial();
    if netns::skip(netns::unavailable_reason()) {
        return;
    }
    let client = NetNs::create().expect("client netns");
    let server = NetNs::create().expect("server netns");
    let id = std::process::id() % 1_000_000;
    let (c, s) = (format!("nfxc{id}"), format!("nfxs{id}"));
    netns::ip(&["link", "add", &c, "type", "veth", "peer", "name", &s]).expect("veth");
    client.adopt(&c).unwrap();
    server.adopt(&s).unwrap();
    client.ip(&["link", "set", &c, "up"]).unwrap();
    server.ip(&["link", "set", &s, "up"]).unwrap();
    let mut child = server
        .command(env!("CARGO_BIN_EXE_netfold"))
        .args([
            "server",
            "--link",
            &format!("xdp:{s}"),
            "--addr",
            "198.18.48.2/24",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start netfold server");
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let mut guard = Guard(child);
    let mut line = String::new();
    log.read_line(&mut line).unwrap();
    if line.contains("AF_XDP needs root") || line.contains("this kernel has no AF_XDP") {
        netns::skip(Some(format!("AF_XDP unavailable: {}", line.trim())));
        return;
    }
    // The device's modes first, then the listening line.
    assert!(
        line.contains("AF_XDP on") && line.contains("copy mode"),
        "{line}"
    );
    line.clear();
    log.read_line(&mut line).unwrap();
    assert!(
        line.contains("listening") && line.contains("netfold on xdp:"),
        "{line}"
    );
    let dev = format!("xdp:{c}");
    let args = |test: &'static str| {
        vec![
            test,
            "-H",
            "198.18.48.2",
            "--link",
            dev.as_str(),
            "--addr",
            "198.18.48.1/24",
            "-l",
            "1",
            "--json",
        ]
    };
    let mut stream = args("stream");
    stream.push("--verify");
    let v = json(&client, &stream);
    let r = &v["results"][0];
    assert!(r["throughput_mbps"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    eprintln!(
        "netfold -> netfold over AF_XDP: {} Mbit/s",
        r["throughput_mbps"]
    );
    let v = json(&client, &args("rr"));
    let r = &v["results"][0];
    assert!(r["details"]["transactions"].as_u64().unwrap() > 0, "{r}");
    eprintln!(
        "netfold <-> netfold over AF_XDP: rr p50 {} us",
        r["latency_us"]["p50"]
    );
    let peers = stop_and_read_peers(&mut guard, log);
    assert_eq!(peers.len(), 2, "{peers:?}");
    assert!(
        peers.iter().all(|p| p.starts_with("198.18.48.1:")),
        "{peers:?}"
    );
}

#[test]
fn dash_h_with_a_local_link_or_without_addr_is_refused() {
    let _one_at_a_time = serial();
    // Every case fails before a device is opened or a packet sent.
    for (args, want) in [
        (
            &["stream", "-H", "198.18.9.9", "--link", "tap"][..],
            "local run's link",
        ),
        (
            &["stream", "-H", "198.18.9.9", "--link", "tap:nfz0"][..],
            "needs --addr",
        ),
        (
            &[
                "stream",
                "-H",
                "198.18.9.9",
                "--link",
                "tap:nfz0",
                "--addr",
                "198.18.9.2",
            ][..],
            "no prefix length",
        ),
        (
            &["stream", "--link", "tap:nfz0", "-l", "0.1"][..],
            "needs -H HOST",
        ),
        (
            &["stream", "-H", "198.18.9.9", "--addr", "198.18.9.2/24"][..],
            "-H alone runs on kernel sockets",
        ),
    ] {
        let o = netfold(args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
    }
    let o = netfold(&["stream", "-H", "198.18.9.9", "--link", "eth0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("tap:NAME, tun:NAME, packet:IFNAME or xdp:IFNAME[@QUEUE][:all]"));
}

/// `netfold server --shards 2 --link xdp:VETH`: two netfold stacks, one per AF_XDP queue of
/// a two-queue veth end, serve kernel `-H` clients on the other end (same namespace):
/// a verified stream, parallel maerts streams and request/response. UDP tests are refused.
#[test]
fn netfold_server_shards_on_af_xdp_queues() {
    let _one_at_a_time = serial();
    if netns::skip(netns::unavailable_with(&["ethtool"])) {
        return;
    }
    let ns = NetNs::create().unwrap();
    let id = std::process::id() % 1_000_000;
    let (kernel_end, nf_end) = (format!("nfsk{id}"), format!("nfsn{id}"));
    let q = ["numtxqueues", "2", "numrxqueues", "2"];
    let mut add = vec!["link", "add", kernel_end.as_str()];
    add.extend(q);
    add.extend(["type", "veth", "peer", "name", nf_end.as_str()]);
    add.extend(q);
    ns.ip(&add).unwrap();
    ns.configure(&kernel_end, Ipv4Addr::new(198, 18, 12, 1), 24)
        .unwrap();
    ns.ip(&["link", "set", &nf_end, "up"]).unwrap();
    // XDP sees the veth peer's frames before anything completes a checksum left to hardware.
    let off = ns
        .run("ethtool", &["-K", &kernel_end, "tx", "off"])
        .unwrap();
    assert!(off.status.success(), "ethtool -K {kernel_end} tx off");
    let mut c = ns
        .command(env!("CARGO_BIN_EXE_netfold"))
        .args([
            "server",
            "--shards",
            "2",
            "--link",
            &format!("xdp:{nf_end}"),
            "--addr",
            "198.18.12.2/24",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(c.stderr.take().unwrap());
    let mut line = String::new();
    log.read_line(&mut line).unwrap();
    let mut server = Guard(c);
    if line.contains("AF_XDP") && !line.contains("listening") {
        netns::skip(Some(format!("AF_XDP unavailable: {line}")));
        return;
    }
    assert!(
        line.contains("listening") && line.contains("2 shards on 2 queues"),
        "{line}"
    );
    let h = "198.18.12.2";
    let v = json(&ns, &["stream", "-H", h, "-l", "1", "--verify", "--json"]);
    let r = &v["results"][0];
    assert!(r["throughput_mbps"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    eprintln!(
        "kernel -> netfold server, 2 shards on AF_XDP: {} Mbit/s",
        r["throughput_mbps"]
    );
    let v = json(&ns, &["maerts", "-H", h, "-l", "1", "-P", "4", "--json"]);
    assert_eq!(v["results"][0]["streams"].as_array().unwrap().len(), 4);
    assert!(v["results"][0]["bytes"].as_u64().unwrap() > 0);
    let v = json(&ns, &["rr", "-H", h, "-l", "1", "--json"]);
    assert!(v["results"][0]["details"]["transactions"].as_u64().unwrap() > 0);
    stop(&mut server);
    let _ = ns.ip(&["link", "del", &kernel_end]);
}
