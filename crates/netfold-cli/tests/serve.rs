//! `netfold serve` against the Linux kernel as a real peer.
//!
//! Needs root and /dev/net/tun (otherwise each test prints `SKIPPED: ...` and passes). The test creates a network namespace
//! with a persistent TAP device whose kernel side is 198.18.0.1/24, runs the `netfold` binary
//! inside that namespace attached to the TAP at 198.18.0.2, and talks to it with stock tools:
//! ping, curl (100 MB byte-exact), python3 sockets (discard, chargen, echo), iperf3 (-J, -R,
//! -P 2), and tshark on the `--pcap` capture. Everything is removed afterwards, also on failure
//! (Drop guards). Tools: iproute2, iputils-ping, curl, iperf3, tshark, python3, procps
//! (`scripts/install-test-deps.sh`); a test whose tool is missing is SKIPPED.

use netfold_apps::pattern;
use netfold_os::netns::{self, NetNs};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SERVER: &str = "198.18.0.2";
/// netfold's and the kernel's IPv6 addresses (RFC 5180's benchmarking prefix).
const SERVER6: &str = "2001:2:0:1::2";
const KERNEL6: &str = "2001:2:0:1::1";

/// Runs a command to completion; panics with its output if it fails.
fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A namespace (the library's [`NetNs`] guard) with a persistent TAP (or TUN) whose kernel
/// side is 198.18.0.1/24, and files to remove; all removed on drop, also when a check panics.
struct Netns {
    /// "tap" or "tun": the `ip tuntap` mode, and the `--link` prefix.
    mode: &'static str,
    tap: String,
    files: Vec<PathBuf>,
    // Declared last: dropped after `Drop for Netns` has deleted the TAP.
    ns: NetNs,
}

impl Netns {
    fn create() -> Netns {
        Self::create_mode("tap")
    }

    fn create_mode(mode: &'static str) -> Netns {
        Self::create_with(mode, false)
    }

    /// A multi-queue TAP (`ip tuntap add ... multi_queue`) for `serve --shards`.
    fn create_multi_queue() -> Netns {
        Self::create_with("tap", true)
    }

    fn create_with(mode: &'static str, multi_queue: bool) -> Netns {
        let ns = NetNs::create().expect("create netns");
        let n = Netns {
            mode,
            tap: format!("nfs{}", std::process::id() % 1_000_000),
            files: Vec::new(),
            ns,
        };
        netfold_testkit::tapns::add_tap(&n.ns, &n.tap, mode, multi_queue).expect("create tap");
        n
    }

    /// The kernel's side of the link also gets 2001:2:0:1::1/64 (usable at once, no DAD).
    fn add_ipv6(&self) {
        self.ns
            .configure6(&self.tap, KERNEL6.parse().unwrap(), 64)
            .expect("configure ipv6");
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.ns.command(args[0]);
        c.args(&args[1..]);
        c
    }

    fn exec(&self, args: &[&str]) -> String {
        let out = self
            .cmd(args)
            .output()
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(
            out.status.success(),
            "{args:?} failed: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // A persistent TAP outlives its users; delete it before the namespace goes.
        let _ = self
            .ns
            .ip(&["tuntap", "del", "mode", self.mode, "name", &self.tap]);
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// A running `netfold serve`; killed on drop if still running.
struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Server {
    fn start(net: &Netns, pcap: Option<&Path>) -> Server {
        Self::start_with(net, pcap, &[])
    }

    fn start_with(net: &Netns, pcap: Option<&Path>, extra: &[&str]) -> Server {
        let mut args = vec!["--addr", "198.18.0.2/24"];
        args.extend_from_slice(extra);
        Self::start_args(net, pcap, &args)
    }

    /// `serve --link` with `args` alone (no IPv4 `--addr` unless given), printing every
    /// counter at exit (`--counters`), which the tests read.
    fn start_args(net: &Netns, pcap: Option<&Path>, extra: &[&str]) -> Server {
        let mut args = vec!["--counters"];
        args.extend_from_slice(extra);
        Self::spawn(net, pcap, &args)
    }

    fn spawn(net: &Netns, pcap: Option<&Path>, extra: &[&str]) -> Server {
        let exe = env!("CARGO_BIN_EXE_netfold");
        let link = format!("{}:{}", net.mode, net.tap);
        let mut args = vec![exe, "serve", "--link", &link];
        args.extend_from_slice(extra);
        let pcap_s;
        if let Some(p) = pcap {
            pcap_s = p.display().to_string();
            args.push("--pcap");
            args.push(&pcap_s);
        }
        // `ip netns exec` execs the program, so the child's pid is netfold's.
        let mut child = net
            .cmd(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn netfold serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("netfold serve did not start");
        assert!(first.starts_with("netfold serve:"), "{first}");
        Server { child, lines: rx }
    }

    /// SIGINT, then the exit status must be 0 and the counters printed.
    fn stop(self) -> String {
        let out = self.stop_summary();
        assert!(
            out.contains("services:") && out.contains("frames_in"),
            "{out}"
        );
        out
    }

    /// SIGINT, then the exit status must be 0; what it printed after starting.
    fn stop_summary(mut self) -> String {
        run(&["kill", "-INT", &self.child.id().to_string()]);
        let end = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < end, "netfold serve ignored SIGINT");
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut out = String::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            out.push_str(&l);
            out.push('\n');
        }
        assert!(status.success(), "exit status {status}\n{out}");
        out
    }
}

/// `iperf3 -u` is refused with a reason the client prints (this server runs TCP tests only);
/// at exit, without `--counters`, `serve` prints a short summary that counts the refusal.
#[test]
fn serve_refuses_iperf3_udp_and_sums_up_at_exit() {
    if netns::skip(netns::unavailable_with(&["kill", "iperf3", "timeout"])) {
        return;
    }
    let net = Netns::create();
    let server = Server::spawn(&net, None, &["--addr", "198.18.0.2/24"]);
    let out = net
        .cmd(&["timeout", "20", "iperf3", "-u", "-c", SERVER, "-t", "1"])
        .output()
        .expect("iperf3");
    assert!(!out.status.success());
    let err =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        err.contains("unable to start stream listener: Protocol not supported"),
        "{err}"
    );
    iperf3(&net, &[]);
    let out = server.stop_summary();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() <= 10, "{out}");
    for head in ["connections", "bytes", "drops", "retransmits", "iperf3"] {
        assert!(lines.iter().any(|l| l.starts_with(head)), "{head}: {out}");
    }
    assert!(
        out.contains("2 tests: 1 completed, 1 failed (1 UDP/SCTP refused: TCP only)"),
        "{out}"
    );
    assert!(
        out.contains("--counters") && !out.contains("frames_in"),
        "{out}"
    );
    drop(net);
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// SHA-256 (hex) of `len` bytes of the /bytes/N pattern, via sha256sum.
fn expected_sha256(len: u64) -> String {
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    let mut stdin = c.stdin.take().unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < len {
        let n = ((len - off) as usize).min(buf.len());
        pattern::fill_bytes(off, &mut buf[..n]);
        stdin.write_all(&buf[..n]).unwrap();
        off += n as u64;
    }
    drop(stdin);
    let mut out = String::new();
    c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(c.wait().unwrap().success());
    out.split_whitespace().next().unwrap().to_string()
}

/// curl /bytes/N through sha256sum inside the namespace.
fn curl_sha256(net: &Netns, len: u64) -> String {
    curl_sha256_from(net, SERVER, len)
}

/// [`curl_sha256`] from `host` (an IPv6 address goes in brackets, curl -g).
fn curl_sha256_from(net: &Netns, host: &str, len: u64) -> String {
    let h = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let script = format!(
        "set -o pipefail; curl -g -sS --max-time 300 http://{h}:8080/bytes/{len} | sha256sum"
    );
    let out = net.exec(&["timeout", "320", "bash", "-c", &script]);
    out.split_whitespace().next().unwrap().to_string()
}

/// A python3 snippet run in the namespace; returns stdout.
fn py(net: &Netns, code: &str) -> Vec<u8> {
    let out = net
        .cmd(&["timeout", "60", "python3", "-c", code])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn iperf3(net: &Netns, extra: &[&str]) -> serde_json::Value {
    iperf3_to(net, SERVER, extra)
}

/// [`iperf3`] against `host` (either family).
fn iperf3_to(net: &Netns, host: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["timeout", "60", "iperf3", "-c", host, "-t", "2", "-J"];
    args.extend_from_slice(extra);
    let out = net.cmd(&args).output().expect("iperf3");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("iperf3 {extra:?}: not JSON ({e}): {text}"));
    assert!(
        v.get("error").is_none(),
        "iperf3 {extra:?} reported an error: {}",
        v["error"]
    );
    assert!(out.status.success(), "iperf3 {extra:?}: {}", out.status);
    let end = &v["end"];
    let sent = end["sum_sent"]["bytes"].as_u64().unwrap_or(0);
    let recv = end["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(
        sent > 0 && recv > 0,
        "iperf3 {extra:?}: sent {sent} received {recv}"
    );
    eprintln!(
        "iperf3 {extra:?}: {:.0} Mbit/s received",
        end["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0)
            / 1e6
    );
    v
}

#[test]
fn serve_over_tap_talks_to_the_kernel() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "ping",
        "curl",
        "iperf3",
        "tshark",
        "python3",
        "sha256sum",
        "timeout",
    ])) {
        return;
    }
    let mut net = Netns::create();

    // Phase 1, captured: ping, a small download, discard, chargen, echo; then tshark.
    let pcap = std::env::temp_dir().join(format!("netfold-serve-{}.pcap", std::process::id()));
    net.files.push(pcap.clone());
    let server = Server::start(&net, Some(&pcap));
    net.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", SERVER]);
    assert_eq!(curl_sha256(&net, 100_000), expected_sha256(100_000));
    // The kernel sends 1 MB to discard and waits for the server's FIN.
    py(
        &net,
        &format!(
            "import socket\n\
             s=socket.create_connection(('{SERVER}',9),timeout=20)\n\
             s.sendall(bytes(range(256))*4096)\n\
             s.shutdown(socket.SHUT_WR)\n\
             assert s.recv(1)==b''\n"
        ),
    );
    // The kernel receives from chargen.
    let got = py(
        &net,
        &format!(
            "import socket,sys\n\
             s=socket.create_connection(('{SERVER}',19),timeout=20)\n\
             d=b''\n\
             while len(d)<100000:\n\
             \x20   x=s.recv(65536)\n\
             \x20   assert x\n\
             \x20   d+=x\n\
             sys.stdout.buffer.write(d[:100000])\n"
        ),
    );
    let mut want = vec![0u8; 100_000];
    pattern::fill_chargen(0, &mut want);
    assert!(got == want, "chargen bytes differ from RFC 864 pattern");
    // Echo over TCP and UDP.
    py(
        &net,
        &format!(
            "import socket\n\
             s=socket.create_connection(('{SERVER}',7),timeout=20)\n\
             m=b'netfold'*10000\n\
             s.sendall(m); s.shutdown(socket.SHUT_WR)\n\
             d=b''\n\
             while True:\n\
             \x20   x=s.recv(65536)\n\
             \x20   if not x: break\n\
             \x20   d+=x\n\
             assert d==m, len(d)\n\
             u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.settimeout(5)\n\
             u.sendto(b'ping',('{SERVER}',7))\n\
             assert u.recvfrom(64)[0]==b'ping'\n"
        ),
    );
    let out = server.stop();
    assert!(out.contains("discard_bytes=1048576"), "{out}");
    assert!(out.contains("udp_echo_datagrams=1"), "{out}");

    // tshark reads the capture: no complaint on stderr, checksums verified good, nothing
    // malformed at the layers netfold writes.
    let t = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap()])
        .args(["-o", "ip.check_checksum:TRUE"])
        .args(["-o", "tcp.check_checksum:TRUE"])
        .args(["-o", "udp.check_checksum:TRUE"])
        // tcp.checksum 0xffff: see the IPv6 capture check below.
        .args(["-Y", "ip.checksum.status == \"Bad\" || (tcp.checksum.status == \"Bad\" && tcp.checksum != 0xffff) || udp.checksum.status == \"Bad\" || icmp.checksum.status == \"Bad\" || (_ws.malformed && (eth || arp || ip || icmp || tcp || udp || http) && !(tcp.payload && !http))"])
        .output()
        .expect("tshark");
    let stderr = String::from_utf8_lossy(&t.stderr);
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains("Running as user \"root\""))
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(t.status.success(), "tshark failed: {stderr}");
    assert!(complaints.is_empty(), "tshark warnings: {complaints:?}");
    assert!(
        t.stdout.is_empty(),
        "bad or malformed frames:\n{}",
        String::from_utf8_lossy(&t.stdout)
    );
    let frames = run(&[
        "tshark",
        "-r",
        pcap.to_str().unwrap(),
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert!(frames.lines().count() > 100, "capture too small");

    // Phase 2, not captured: 100 MB byte-exact and iperf3.
    let server = Server::start(&net, None);
    let len = 104_857_600;
    assert_eq!(curl_sha256(&net, len), expected_sha256(len));
    // GET / is an index of what the server offers, not a bare 404.
    let index = net.exec(&[
        "curl",
        "-sS",
        "--max-time",
        "10",
        &format!("http://{SERVER}:8080/"),
    ]);
    assert!(
        index.contains("/bytes/N") && index.contains("iperf3"),
        "{index}"
    );
    iperf3(&net, &[]);
    // The server's report comes back, and its CPU figures are measured, not zeros.
    let v = iperf3(&net, &["-R", "--get-server-output"]);
    let text = v["server_output_text"].as_str().unwrap_or("");
    assert!(
        text.contains("Mbits/sec") && text.contains("CPU"),
        "{text:?}"
    );
    let remote = v["end"]["cpu_utilization_percent"]["remote_total"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(remote > 0.0, "{}", v["end"]["cpu_utilization_percent"]);
    let v = iperf3(&net, &["-P", "2"]);
    assert_eq!(v["end"]["streams"].as_array().map(Vec::len), Some(2));
    let out = server.stop();
    // TAP statistics print as a table, not as Rust debug output.
    assert!(!out.contains("TapStats"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().take(2).eq(["tap", "rx_frames"])),
        "{out}"
    );
    assert!(out.contains("iperf_completed=3"), "{out}");
    assert!(out.contains("iperf_failed=0"), "{out}");

    // Phase 3: SIGINT in the middle of an iperf3 test. The server still exits 0 with its
    // counters, and the client is told (SERVER_TERMINATE) instead of hanging.
    let server = Server::start(&net, None);
    let client = net
        .cmd(&["timeout", "60", "iperf3", "-c", SERVER, "-t", "30", "-J"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3");
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    let out = server.stop();
    assert!(out.contains("iperf_tests=1"), "{out}");
    let done = client.wait_with_output().expect("iperf3 output");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "iperf3 client did not notice the server going away"
    );
    let text = String::from_utf8_lossy(&done.stdout);
    let v: serde_json::Value = serde_json::from_str(&text).expect("iperf3 JSON");
    let err = v["error"].as_str().unwrap_or("");
    assert!(err.contains("terminated"), "iperf3 error: {err:?}");
    drop(net);
}

/// A namespace with a veth pair in it: the kernel's end `nfvk...` at 198.18.47.1/24 and
/// 2001:2:0:47::1/64 with transmit checksumming off (XDP sees a veth peer's frames before a
/// checksum left to the "hardware" is complete), netfold's end `nfvn...` up without an
/// address. The kernel reaches netfold's addresses through its end, across the pair.
fn veth_netns(mode: &'static str) -> Netns {
    veth_netns_queues(mode, 1)
}

/// [`veth_netns`] with `queues` transmit and receive queues at both ends of the pair.
fn veth_netns_queues(mode: &'static str, queues: u32) -> Netns {
    let q = queues.to_string();
    let ns = NetNs::create().expect("create netns");
    let id = std::process::id() % 1_000_000;
    let n = Netns {
        mode,
        tap: format!("nfvn{id}"),
        files: Vec::new(),
        ns,
    };
    let kernel_end = format!("nfvk{id}");
    n.ns.ip(&[
        "link",
        "add",
        &kernel_end,
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
        "type",
        "veth",
        "peer",
        "name",
        &n.tap,
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
    ])
    .expect("veth pair");
    n.ns.configure(&kernel_end, Ipv4Addr::new(198, 18, 47, 1), 24)
        .expect("configure veth");
    n.ns.configure6(&kernel_end, XDP_KERNEL6.parse().unwrap(), 64)
        .expect("configure veth ipv6");
    n.ns.ip(&["link", "set", &n.tap, "up"]).expect("veth up");
    n.exec(&["ethtool", "-K", &kernel_end, "tx", "off"]);
    n
}

const XDP_SERVER: &str = "198.18.47.2";
const XDP_SERVER6: &str = "2001:2:0:47::2";
const XDP_KERNEL6: &str = "2001:2:0:47::1";

/// Whether an AF_XDP socket and its program can be opened on `net`'s netfold end (root, a
/// kernel with AF_XDP); the reason if not.
fn xdp_unavailable(net: &Netns) -> Option<String> {
    use netfold_os::xdp::{XdpConfig, XdpError, XdpSocket};
    let ifname = net.tap.clone();
    let r = net
        .ns
        .run_in(move || {
            XdpSocket::open(&ifname, XdpConfig::local(&[XDP_SERVER.parse().unwrap()])).map(drop)
        })
        .expect("enter netns");
    match r {
        Ok(()) => None,
        Err(e @ (XdpError::Permission(..) | XdpError::KernelUnsupported(..))) => {
            Some(format!("AF_XDP unavailable: {e}"))
        }
        Err(e) => panic!("AF_XDP on a veth: {e}"),
    }
}

/// `serve --link xdp:VETH` (and `packet:VETH`, the same over AF_PACKET): the kernel on the
/// veth's other end pings netfold over IPv4 and IPv6 (ARP and NDP go through the XDP
/// program's redirect), downloads 20 MB sha256-checked over both, and runs iperf3 both ways.
/// At exit the device counted no drop and the stack no bad checksum.
#[test]
fn serve_over_xdp_and_packet_sockets_on_a_veth() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "ping",
        "curl",
        "iperf3",
        "sha256sum",
        "timeout",
        "sysctl",
        "ethtool",
    ])) {
        return;
    }
    for mode in ["xdp", "packet"] {
        let net = veth_netns(mode);
        if mode == "xdp" && netns::skip(xdp_unavailable(&net)) {
            continue;
        }
        let addr6 = format!("{XDP_SERVER6}/64");
        let server = Server::spawn(
            &net,
            None,
            &["--counters", "--addr", "198.18.47.2/24", "--addr", &addr6],
        );
        net.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", XDP_SERVER]);
        // netfold's IPv6 address is tentative for about a second (DAD, RFC 4862 §5.4).
        let out = net.exec(&["ping", "-6", "-c", "1", "-w", "15", XDP_SERVER6]);
        assert!(ping_received(&out) >= 1, "{mode}: {out}");
        let len = 20_000_000;
        assert_eq!(
            curl_sha256_from(&net, XDP_SERVER, len),
            expected_sha256(len),
            "{mode}"
        );
        assert_eq!(
            curl_sha256_from(&net, XDP_SERVER6, len),
            expected_sha256(len),
            "{mode} ipv6"
        );
        iperf3_to(&net, XDP_SERVER, &[]);
        iperf3_to(&net, XDP_SERVER, &["-R"]);
        let out = server.stop();
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().take(2).eq([mode, "rx_frames"])),
            "{out}"
        );
        assert!(out.contains("iperf_completed=2"), "{mode}: {out}");
        assert_eq!(counter(&out, mode, "tx_dropped"), 0, "{mode}: {out}");
        assert_eq!(counter(&out, "tcp", "bad_checksum"), 0, "{mode}: {out}");
    }
}

/// `serve --link xdp:VETH --shards 2` on a veth with two queues at each end: one AF_XDP
/// socket and one stack per queue. The kernel's connections (curl downloads, sha256-checked)
/// land on both shards (the shard of each 4-tuple's Toeplitz hash, whichever queue the
/// kernel's transmit hash picked: frames on the other queue are handed over), none on the
/// wrong one. `--shards 3` on the same two queues is
/// refused with the error that says how many queues there are.
#[test]
fn sharded_serve_over_xdp_queues_of_a_veth() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "curl",
        "sha256sum",
        "timeout",
        "ethtool",
    ])) {
        return;
    }
    let net = veth_netns_queues("xdp", 2);
    if netns::skip(xdp_unavailable(&net)) {
        return;
    }
    let link = format!("xdp:{}", net.tap);
    let exe = env!("CARGO_BIN_EXE_netfold");
    let out = net
        .cmd(&[
            exe,
            "serve",
            "--link",
            &link,
            "--addr",
            "198.18.47.2/24",
            "--shards",
            "3",
        ])
        .output()
        .expect("netfold serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "--shards 3 on 2 queues: {err}");
    assert!(
        err.contains("has 2 receive queue(s), fewer than the 3 asked for"),
        "{err}"
    );
    let len = 1_000_000;
    let want = expected_sha256(len);
    // The kernel's transmit hash picks a queue per connection: 8 connections all on one queue
    // has probability 1/128, so up to three runs until both shards accepted some.
    for run in 0..3 {
        let server = Server::spawn(
            &net,
            None,
            &["--counters", "--addr", "198.18.47.2/24", "--shards", "2"],
        );
        for _ in 0..8 {
            assert_eq!(curl_sha256_from(&net, XDP_SERVER, len), want, "run {run}");
        }
        let out = server.stop();
        let shard = |k: usize, name: &str| -> u64 {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("shard {k}: ")))
                .unwrap_or_else(|| panic!("no shard {k} line in:\n{out}"));
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {line}"))
        };
        for k in 0..2 {
            assert_eq!(
                shard(k, "no_socket"),
                0,
                "shard {k}: a frame on the wrong shard\n{out}"
            );
        }
        eprintln!(
            "{}",
            out.lines()
                .filter(|l| l.starts_with("netfold serve: ")
                    || l.starts_with("shard ") && l.contains('='))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let accepted: Vec<u64> = (0..2).map(|k| shard(k, "accepted")).collect();
        assert_eq!(accepted.iter().sum::<u64>(), 8, "{out}");
        // The kernel's queue disagrees with the hash for about half the flows: frames that
        // crossed over (none of 8 flows crossing has probability 1/256, hence the runs).
        let steered: u64 = (0..2).map(|k| shard(k, "steered")).sum();
        for k in 0..2 {
            assert_eq!(shard(k, "steer_dropped"), 0, "shard {k}\n{out}");
        }
        if accepted.iter().all(|&a| a > 0) && steered > 0 {
            assert_eq!(counter(&out, "xdp", "tx_dropped"), 0, "{out}");
            return;
        }
        eprintln!(
            "run {run}: every connection on one shard ({accepted:?}) or none steered \
             ({steered}), again"
        );
    }
    panic!("three runs of 8 connections never used both shards and software steering");
}

/// `--link tun:NAME`: the stack runs on the IP medium behind a TUN; it answers ping and serves
/// a 10 MB HTTP download byte-exact.
#[test]
fn serve_over_tun_answers_ping_and_serves_curl() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "ping",
        "curl",
        "sha256sum",
    ])) {
        return;
    }
    let net = Netns::create_mode("tun");
    let server = Server::start(&net, None);
    net.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", SERVER]);
    assert_eq!(curl_sha256(&net, 10_000_000), expected_sha256(10_000_000));
    let out = server.stop();
    // The TUN's statistics, as a table whose rows start with the link kind (like the TAP's).
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().take(2).eq(["tun", "rx_frames"])),
        "{out}"
    );
}

/// IPv6 (the network half): `serve --addr V4 --addr V6` on a TAP. The kernel resolves
/// netfold by Neighbor Discovery and pings it (after netfold's DAD), also a 3000-byte ping6
/// that arrives in fragments and is answered in fragments; netfold's link-local address (from
/// its MAC) answers too. The same over a TUN, where there is no NDP.
#[test]
fn serve_answers_ping6_on_a_tap_and_a_tun() {
    if netns::skip(netns::unavailable_with(&["kill", "ping", "sysctl"])) {
        return;
    }
    for mode in ["tap", "tun"] {
        let net = Netns::create_mode(mode);
        net.add_ipv6();
        let addr6 = format!("{SERVER6}/64");
        let server = Server::start_with(&net, None, &["--addr", &addr6]);
        // -w: netfold's address is tentative for about a second (DAD); ping keeps trying
        // until three answers or the deadline.
        let out = net.exec(&["ping", "-6", "-c", "3", "-i", "0.2", "-w", "15", SERVER6]);
        assert!(ping_received(&out) >= 3, "{mode}: {out}");
        let out = net.exec(&[
            "ping", "-6", "-c", "3", "-i", "0.2", "-w", "15", "-s", "3000", SERVER6,
        ]);
        assert!(out.contains("3008 bytes from"), "{mode}: {out}");
        if mode == "tap" {
            // The kernel resolved netfold by NDP: its neighbour entry has netfold's MAC.
            let neigh = net.exec(&["ip", "-6", "neigh", "show", "dev", &net.tap]);
            assert!(
                neigh
                    .lines()
                    .any(|l| l.starts_with(SERVER6) && l.contains("02:6e:66:00:00:02")),
                "{neigh}"
            );
            // The link-local address netfold formed from that MAC (RFC 4291 Appendix A).
            let ll = format!("fe80::6e:66ff:fe00:2%{}", net.tap);
            let out = net.exec(&["ping", "-6", "-c", "2", "-i", "0.2", "-w", "10", &ll]);
            assert!(ping_received(&out) >= 2, "{out}");
        }
        let out = server.stop();
        // `serve` printed its IPv6 addresses (on the TAP the link-local one too).
        let line = out
            .lines()
            .find(|l| l.starts_with("netfold serve: ipv6 "))
            .unwrap_or_else(|| panic!("{mode}: no ipv6 line in {out}"));
        assert!(line.contains(&format!("{SERVER6}/64")), "{line}");
        assert_eq!(
            line.contains("fe80::6e:66ff:fe00:2/64"),
            mode == "tap",
            "{line}"
        );
        assert!(
            counter(&out, "icmp6", "echo_requests_in") >= 6,
            "{mode}: {out}"
        );
        // 3000 bytes of echo cross the 1500-byte MTU in three fragments each way.
        assert!(
            counter(&out, "ipv6", "frag_reassembled") >= 3,
            "{mode}: {out}"
        );
        assert!(counter(&out, "ipv6", "frag_out") >= 9, "{mode}: {out}");
        assert_eq!(counter(&out, "icmp6", "bad_checksum"), 0, "{mode}: {out}");
        if mode == "tap" {
            assert!(counter(&out, "ndp", "na_out") >= 1, "{out}");
            assert_eq!(counter(&out, "ndp", "dad_conflicts"), 0, "{out}");
        } else {
            assert_eq!(counter(&out, "ndp", "in"), 0, "no NDP on a TUN: {out}");
        }
        drop(net);
    }
}

/// IPv6 end to end, the transport half: against `serve --addr V4 --addr V6` on a TAP
/// (offloads on, then `--no-offloads`) and on a TUN, the kernel fetches 10 MB with
/// `curl -6` byte-exact and runs `iperf3 -6` both ways and with two streams. With the TAP a
/// first, captured phase (1 MB over HTTP, TCP and UDP echo over IPv6) is read by tshark: no
/// bad checksum, nothing malformed; netfold's SYN-ACK announces MSS 1440 (RFC 8200 §8.3:
/// MTU 1500 - 40 - 20) and, without offloads, no segment carries more than that less the
/// 12 bytes of timestamps; with offloads, netfold's IPv6 super-segments went to the TAP
/// whole (TSO6, `tx_gso_frames`).
#[test]
fn serve_over_ipv6_serves_curl_and_iperf3() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "ping",
        "curl",
        "iperf3",
        "tshark",
        "python3",
        "sha256sum",
        "timeout",
        "sysctl",
    ])) {
        return;
    }
    let addr6 = format!("{SERVER6}/64");
    for (mode, offloads) in [("tap", true), ("tap", false), ("tun", true)] {
        let label = format!("{mode}, offloads {}", if offloads { "on" } else { "off" });
        let mut net = Netns::create_mode(mode);
        net.add_ipv6();
        let mut extra = vec!["--addr", addr6.as_str()];
        if !offloads {
            extra.push("--no-offloads");
        }
        let wait_for_dad = |net: &Netns| {
            // netfold's address is tentative for about a second (DAD, RFC 4862 §5.4).
            let out = net.exec(&["ping", "-6", "-c", "1", "-w", "15", SERVER6]);
            assert!(ping_received(&out) >= 1, "{label}: {out}");
        };

        // Phase 1 (TAP), captured: 1 MB over HTTP, TCP and UDP echo, then tshark.
        if mode == "tap" {
            let pcap = std::env::temp_dir().join(format!(
                "netfold-serve6-{}-{offloads}.pcap",
                std::process::id()
            ));
            net.files.push(pcap.clone());
            let server = Server::start_with(&net, Some(&pcap), &extra);
            wait_for_dad(&net);
            assert_eq!(
                curl_sha256_from(&net, SERVER6, 1_000_000),
                expected_sha256(1_000_000),
                "{label}"
            );
            py(
                &net,
                &format!(
                    "import socket\n\
                     s=socket.create_connection(('{SERVER6}',7),timeout=20)\n\
                     assert s.family==socket.AF_INET6\n\
                     m=b'netfold6'*20000\n\
                     s.sendall(m); s.shutdown(socket.SHUT_WR)\n\
                     d=b''\n\
                     while True:\n\
                     \x20   x=s.recv(65536)\n\
                     \x20   if not x: break\n\
                     \x20   d+=x\n\
                     assert d==m, len(d)\n\
                     u=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM); u.settimeout(5)\n\
                     for n in (4, 3000):\n\
                     \x20   b=bytes(i*7%251 for i in range(n))\n\
                     \x20   u.sendto(b,('{SERVER6}',7))\n\
                     \x20   assert u.recvfrom(65536)[0]==b, n\n"
                ),
            );
            let out = server.stop();
            assert!(out.contains("udp_echo_datagrams=2"), "{label}: {out}");
            assert_eq!(counter(&out, "tcp", "bad_checksum"), 0, "{label}: {out}");
            let p = pcap.to_str().unwrap();
            let t = Command::new("tshark")
                .args(["-r", p])
                .args(["-o", "tcp.check_checksum:TRUE"])
                .args(["-o", "udp.check_checksum:TRUE"])
                // A TCP checksum field of 0xffff where 0x0000 is computed is flagged by
                // tshark, but the two are one value in ones' complement (RFC 1624 §3) and
                // every receiver accepts it; seen once in a kernel-side ACK of a CI run.
                .args(["-Y", "(tcp.checksum.status == \"Bad\" && tcp.checksum != 0xffff) || udp.checksum.status == \"Bad\" || icmpv6.checksum.status == \"Bad\" || (_ws.malformed && (eth || ipv6 || icmpv6 || tcp || udp || http) && !(tcp.payload && !http))"])
                .output()
                .expect("tshark");
            let stderr = String::from_utf8_lossy(&t.stderr);
            let complaints: Vec<&str> = stderr
                .lines()
                .filter(|l| !l.contains("Running as user \"root\""))
                .filter(|l| !l.trim().is_empty())
                .collect();
            assert!(t.status.success(), "tshark failed: {stderr}");
            assert!(complaints.is_empty(), "tshark warnings: {complaints:?}");
            assert!(
                t.stdout.is_empty(),
                "{label}: bad or malformed frames:\n{}",
                String::from_utf8_lossy(&t.stdout)
            );
            let fields = |filter: &str, field: &str| -> Vec<u64> {
                run(&["tshark", "-r", p, "-Y", filter, "-T", "fields", "-e", field])
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect()
            };
            let v6_frames = fields("ipv6 && tcp", "frame.number");
            // With offloads on, netfold hands the TAP 64 KiB super-segments and the kernel's
            // ACKs are stretched by its GRO, so 1.16 MB may take only a few dozen frames; the
            // bound only guards against an empty or handshake-only capture (the SYN-ACK and
            // data checks below look at the content).
            assert!(
                v6_frames.len() > 10,
                "{label}: capture too small ({} frames)",
                v6_frames.len()
            );
            let synack = fields(
                &format!("ipv6.src=={SERVER6} && tcp.flags.syn==1 && tcp.flags.ack==1"),
                "tcp.options.mss_val",
            );
            assert!(
                !synack.is_empty() && synack.iter().all(|&m| m == 1440),
                "{label}: netfold's SYN-ACK MSS {synack:?}"
            );
            let from_us = fields(&format!("ipv6.src=={SERVER6} && tcp.len > 0"), "tcp.len");
            let biggest = from_us.iter().copied().max().unwrap_or(0);
            if offloads {
                // TSO6: super-segments handed to the TAP whole, the kernel cuts them.
                assert!(biggest > 1440, "{label}: no super-segment ({biggest})");
            } else {
                // MSS 1440 less the 12 bytes of the timestamp option (RFC 7323 §3.2).
                assert_eq!(biggest, 1428, "{label}: largest segment");
            }
        }

        // Phase 2, not captured: 10 MB byte-exact, iperf3 -6 both ways and -P 2.
        let server = Server::start_with(&net, None, &extra);
        wait_for_dad(&net);
        let len = 10_000_000;
        assert_eq!(
            curl_sha256_from(&net, SERVER6, len),
            expected_sha256(len),
            "{label}"
        );
        iperf3_to(&net, SERVER6, &["-6"]);
        iperf3_to(&net, SERVER6, &["-6", "-R"]);
        let v = iperf3_to(&net, SERVER6, &["-6", "-P", "2"]);
        assert_eq!(v["end"]["streams"].as_array().map(Vec::len), Some(2));
        let v = iperf3_to(&net, SERVER6, &["-6", "-R", "-P", "2"]);
        assert_eq!(v["end"]["streams"].as_array().map(Vec::len), Some(2));
        let out = server.stop();
        assert!(out.contains("iperf_completed=4"), "{label}: {out}");
        assert!(out.contains("iperf_failed=0"), "{label}: {out}");
        assert_eq!(counter(&out, "tcp", "bad_checksum"), 0, "{label}: {out}");
        assert_eq!(counter(&out, mode, "rx_bad_checksum"), 0, "{label}: {out}");
        assert!(counter(&out, "ipv6", "in") > 10_000, "{label}: {out}");
        if offloads {
            assert!(
                counter(&out, mode, "tx_gso_frames") > 0,
                "{label}: no TSO6: {out}"
            );
        } else {
            assert_eq!(counter(&out, mode, "tx_gso_frames"), 0, "{label}: {out}");
        }
        drop(net);
    }
}

/// `serve` with IPv6 addresses only: the kernel pings it and downloads 1 MB over IPv6
/// byte-exact and runs iperf3 -6; its IPv4 side is off, so the kernel's IPv4 ping (to the
/// address an IPv4 `--addr` would have had) gets no answer and ARP is not answered.
#[test]
fn serve_ipv6_only() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "ping",
        "curl",
        "iperf3",
        "sha256sum",
        "timeout",
        "sysctl",
    ])) {
        return;
    }
    let net = Netns::create();
    net.add_ipv6();
    let addr6 = format!("{SERVER6}/64");
    let server = Server::start_args(&net, None, &["--addr", &addr6]);
    let out = net.exec(&["ping", "-6", "-c", "2", "-i", "0.2", "-w", "15", SERVER6]);
    assert!(ping_received(&out) >= 2, "{out}");
    assert_eq!(
        curl_sha256_from(&net, SERVER6, 1_000_000),
        expected_sha256(1_000_000)
    );
    iperf3_to(&net, SERVER6, &["-6", "-t", "1"]);
    let v4 = net
        .cmd(&["ping", "-c", "1", "-W", "1", SERVER])
        .output()
        .expect("ping");
    assert!(!v4.status.success(), "IPv4 answered on an IPv6-only stack");
    let out = server.stop();
    // The kernel asked for the IPv4 address by ARP; nobody answered.
    assert!(counter(&out, "arp", "in") >= 1, "{out}");
    assert_eq!(counter(&out, "arp", "replies_out"), 0, "{out}");
    assert!(out.contains("iperf_completed=1"), "{out}");
    drop(net);
}

/// The "N received" of ping's summary line.
fn ping_received(out: &str) -> u32 {
    out.split(',')
        .find_map(|p| p.trim().strip_suffix(" received")?.parse().ok())
        .unwrap_or(0)
}

/// Datagrams larger than the MTU both ways. The kernel's 3000-byte ping
/// arrives in fragments and netfold's reply leaves in fragments; a 4 KiB (and a 65507-byte,
/// the largest) UDP datagram comes back from the echo service whole.
#[test]
fn serve_answers_pings_and_udp_echo_larger_than_the_mtu() {
    if netns::skip(netns::unavailable_with(&[
        "kill", "ping", "python3", "timeout",
    ])) {
        return;
    }
    let net = Netns::create();
    let server = Server::start(&net, None);
    let out = net.exec(&[
        "ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", "3000", SERVER,
    ]);
    assert!(out.contains("3008 bytes from"), "{out}");
    py(
        &net,
        &format!(
            "import socket\n\
             u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.settimeout(5)\n\
             for n in (4096, 65507):\n\
             \x20   m=bytes(i*7%251 for i in range(n))\n\
             \x20   u.sendto(m,('{SERVER}',7))\n\
             \x20   d,a=u.recvfrom(65536)\n\
             \x20   assert d==m, (n, len(d))\n"
        ),
    );
    let out = server.stop();
    assert!(out.contains("udp_echo_datagrams=2"), "{out}");
}

/// The peer's MSS is honoured (conformance defect D1): the kernel clamps the MSS it announces to 1000
/// (`advmss 1000` on its route); during a download no TCP segment from netfold in the
/// capture carries more than 1000 bytes of payload, and full-sized ones carry exactly 1000.
/// Over IPv4 and over IPv6.
#[test]
fn serve_never_exceeds_the_mss_the_kernel_announced() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "curl",
        "tshark",
        "sha256sum",
        "ping",
        "sysctl",
    ])) {
        return;
    }
    // IPv4, then IPv6 (the kernel's IPv6 route announces 1000 too; netfold's offloads on, so
    // this also checks that no TSO6 super-segment is handed over when the MSS cuts finer).
    for v6 in [false, true] {
        mss_clamp(v6);
    }
}

fn mss_clamp(v6: bool) {
    let mut net = Netns::create();
    let tap = net.tap.clone();
    let (host, route, ipsrc) = if v6 {
        net.add_ipv6();
        // A host route: the connected /64 the kernel made (metric 256) would otherwise win
        // over a replaced one (IPv6's default metric 1024).
        (SERVER6, "2001:2:0:1::2/128", "ipv6.src")
    } else {
        (SERVER, "198.18.0.0/24", "ip.src")
    };
    let family = if v6 { "-6" } else { "-4" };
    net.exec(&[
        "ip", family, "route", "replace", route, "dev", &tap, "advmss", "1000",
    ]);
    let pcap = std::env::temp_dir().join(format!("netfold-mss-{}-{v6}.pcap", std::process::id()));
    net.files.push(pcap.clone());
    let addr6 = format!("{SERVER6}/64");
    let extra: Vec<&str> = if v6 { vec!["--addr", &addr6] } else { vec![] };
    let server = Server::start_with(&net, Some(&pcap), &extra);
    if v6 {
        let out = net.exec(&["ping", "-6", "-c", "1", "-w", "15", SERVER6]);
        assert!(ping_received(&out) >= 1, "{out}");
    }
    let len = 2_000_000;
    assert_eq!(curl_sha256_from(&net, host, len), expected_sha256(len));
    server.stop();
    let p = pcap.to_str().unwrap();
    let lens = |filter: &str| -> Vec<u64> {
        run(&[
            "tshark", "-r", p, "-Y", filter, "-T", "fields", "-e", "tcp.len",
        ])
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
    };
    // The kernel's SYN announced 1000.
    let syn_mss = run(&[
        "tshark",
        "-r",
        p,
        "-Y",
        "tcp.flags.syn==1 && tcp.flags.ack==0",
        "-T",
        "fields",
        "-e",
        "tcp.options.mss_val",
    ]);
    assert_eq!(syn_mss.trim(), "1000", "v6={v6}: {syn_mss}");
    let from_us = lens(&format!("{ipsrc}=={host} && tcp.len > 0"));
    assert!(
        from_us.iter().sum::<u64>() >= len,
        "v6={v6}: capture holds {} bytes of payload",
        from_us.iter().sum::<u64>()
    );
    let too_big: Vec<u64> = from_us.iter().copied().filter(|&l| l > 1000).collect();
    assert!(
        too_big.is_empty(),
        "v6={v6}: segments beyond the MSS: {:?}",
        &too_big[..too_big.len().min(10)]
    );
    // Full-sized segments are the MSS less the timestamp option (12 bytes, RFC 7323 §3.2;
    // Linux counts it the same way), so the clamp really was what limited them.
    let biggest = from_us.iter().copied().max().unwrap_or(0);
    assert!(
        biggest > 1000 - 40,
        "v6={v6}: largest segment {biggest}: not limited by the MSS"
    );
}

/// Python: N raw SYNs to HOST:PORT from spoofed 198.18.0.100-199 (in the TAP's subnet, owned
/// by nobody, so no handshake ever completes), each (address, port) new.
const PY_FLOOD: &str = r#"
import socket, struct, sys, random
dst, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
def csum(b):
    t = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while t >> 16:
        t = (t & 0xffff) + (t >> 16)
    return ~t & 0xffff
d = socket.inet_aton(dst)
for i in range(n):
    src = socket.inet_aton('198.18.0.%d' % (100 + i % 100))
    sport = 1024 + i % 60000
    tcp = struct.pack('!HHIIBBHHHBBH', sport, port, random.getrandbits(32), 0, 6 << 4, 0x02,
                      64240, 0, 0, 2, 4, 1460)
    c = csum(src + d + struct.pack('!BBH', 0, 6, len(tcp)) + tcp)
    tcp = tcp[:16] + struct.pack('!H', c) + tcp[18:]
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(tcp), i & 0xffff, 0, 64, 6, 0, src, d)
    s.sendto(ip + tcp, (dst, 0))
print("flooded", n, flush=True)
"#;

/// Python: connect to HOST:PORT with a 1 s limit right after the flood, fetch 1000 bytes over
/// HTTP; prints the connect time in ms.
const PY_CONNECT_FAST: &str = r#"
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
t = time.monotonic()
s = socket.create_connection((host, port), timeout=1.0)
ms = (time.monotonic() - t) * 1000
s.settimeout(10)
s.sendall(b'GET /bytes/1000 HTTP/1.0\r\nHost: x\r\n\r\n')
d = b''
while True:
    x = s.recv(65536)
    if not x: break
    d += x
head, _, body = d.partition(b'\r\n\r\n')
assert head.startswith(b'HTTP/1.'), head[:80]
assert len(body) == 1000, len(body)
print('%.1f' % ms)
"#;

/// Python: N bytes through the echo service (a sender thread, the main thread checks every
/// byte that comes back against what was sent), then a half-close and the server's EOF.
const PY_ECHO: &str = r#"
import socket, sys, threading, random
host, n = sys.argv[1], int(sys.argv[2])
block = random.Random(12).randbytes(1 << 20)
s = socket.create_connection((host, 7), timeout=60)
def send():
    sent = 0
    while sent < n:
        k = min(len(block), n - sent)
        off = sent % len(block)
        k = min(k, len(block) - off)
        s.sendall(block[off:off + k])
        sent += k
    s.shutdown(socket.SHUT_WR)
th = threading.Thread(target=send)
th.start()
got = 0
while True:
    x = s.recv(1 << 16)
    if not x: break
    off = got % len(block)
    i = 0
    while i < len(x):
        k = min(len(x) - i, len(block) - off)
        assert x[i:i + k] == block[off:off + k], 'echo differs at byte %d' % (got + i)
        i += k
        off = 0
    got += len(x)
th.join()
assert got == n, (got, n)
print('echo ok', got, flush=True)
"#;

/// Python, AF_PACKET on the TAP's kernel side: until STOPFILE exists, blind segments to the
/// 4-tuples of the established connections to the server (found with `ss`): RST, SYN and data
/// with random sequence and acknowledgement numbers, data with bad TCP checksums and options
/// with bogus lengths; and malformed frames: bad IPv4 header checksums, IPv4 headers cut short,
/// IPv4 total lengths past the frame, TCP headers cut short, TCP data offsets below 5 or past
/// the segment. Prints what it sent as JSON.
const PY_INJECT: &str = r#"
import socket, struct, sys, random, os, subprocess, time, json
ifn, smac, dmac, server, stop, marker = sys.argv[1:7]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifn, 0))
mac = lambda x: bytes.fromhex(x.replace(':', ''))
eth = mac(dmac) + mac(smac) + b'\x08\x00'
SRC, DST = socket.inet_aton('198.18.0.1'), socket.inet_aton(server)
r = random.getrandbits
def csum(b):
    if len(b) % 2: b += b'\0'
    t = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while t >> 16: t = (t & 0xffff) + (t >> 16)
    return ~t & 0xffff
def ip(plen, bad=False, tot=None):
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + plen if tot is None else tot, r(16), 0, 64, 6, 0, SRC, DST)
    c = csum(h) ^ (0x5a5a if bad else 0)
    return h[:10] + struct.pack('!H', c) + h[12:]
def tcp(sp, dp, flags, data=b'', opts=b'', doff=None, bad=False):
    d = (20 + len(opts)) // 4 if doff is None else doff
    h = struct.pack('!HHIIBBHHH', sp, dp, r(32), r(32), d << 4, flags, 65535, 0, 0) + opts
    c = csum(SRC + DST + struct.pack('!BBH', 0, 6, len(h) + len(data)) + h + data) ^ (0x1234 if bad else 0)
    return h[:16] + struct.pack('!H', c) + h[18:] + data
counts = {}
def send(kind, frame):
    s.send(eth + frame)
    counts[kind] = counts.get(kind, 0) + 1
BOGUS = [b'\x02\x00\x05\xb4', b'\x03\x01\x07\x00', b'\x05\x03\x00\x00', b'\x08\xff\x00\x00',
         b'\x04\x00\x01\x00', b'\x01\x01\x02\x28', b'\x1e\x02\x00\x00', b'\x08\x0a\x00\x00']
tuples, last, end = [], 0, time.time() + 240
while not os.path.exists(stop) and time.time() < end:
    if time.time() - last > 0.2:
        out = subprocess.run(['ss', '-Htn', 'state', 'established', 'dst', server],
                             capture_output=True, text=True).stdout
        tuples = []
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 4:
                tuples.append((int(f[-2].rsplit(':', 1)[1]), int(f[-1].rsplit(':', 1)[1])))
        last = time.time()
    for sp, dp in tuples:
        p = tcp(sp, dp, 0x04); send('blind_rst', ip(len(p)) + p)
        p = tcp(sp, dp, 0x02); send('blind_syn', ip(len(p)) + p)
        p = tcp(sp, dp, 0x18, os.urandom(100)); send('blind_data', ip(len(p)) + p)
        p = tcp(sp, dp, 0x18, os.urandom(100), opts=random.choice(BOGUS)); send('bogus_options', ip(len(p)) + p)
        p = tcp(sp, dp, 0x18, os.urandom(100), bad=True); send('bad_tcp_checksum', ip(len(p)) + p)
    # Enough of every kind has hit live connections: let the holder (below) finish.
    if counts.get('blind_rst', 0) >= 200 and not os.path.exists(marker):
        open(marker, 'w').close()
    p = tcp(40000, 8080, 0x10)
    send('bad_ip_checksum', ip(len(p), bad=True) + p)
    send('short_ip_header', bytes([0x45]) + os.urandom(9))
    send('ip_length_past_frame', ip(len(p), tot=20 + len(p) + 400) + p)
    send('short_tcp_header', ip(10) + p[:10])
    q = tcp(40000, 8080, 0x10, doff=15); send('tcp_offset_past_segment', ip(len(q)) + q)
    q = tcp(40000, 8080, 0x10, doff=2); send('tcp_offset_below_5', ip(len(q)) + q)
    time.sleep(0.0005)
print(json.dumps(counts), flush=True)
"#;

/// A connection kept established (an echo every 20 ms, checked) until the injector has hit
/// live connections with enough blind frames: the transfers alone can end before the
/// injector's first look at the connection table (a 300 MB download takes well under a
/// second), which made "no blind_rst injected" fail now and then. It must also survive the
/// injection (RFC 5961: blind RSTs, SYNs and data get challenge ACKs, not a reset).
const PY_HOLD: &str = r#"
import socket, sys, os, time, random
host, marker = sys.argv[1], sys.argv[2]
s = socket.create_connection((host, 7), timeout=30)
rnd, n, end = random.Random(5), 0, time.time() + 150
while not os.path.exists(marker):
    assert time.time() < end, 'the injector never reported enough injections'
    b = rnd.randbytes(64)
    s.sendall(b)
    got = b''
    while len(got) < len(b):
        x = s.recv(len(b) - len(got))
        assert x, 'connection closed under injection'
        got += x
    assert got == b, 'echo differs'
    n += 1
    time.sleep(0.02)
s.close()
print('hold ok', n, flush=True)
"#;

/// `netfold serve --shards 2` on a two-queue TAP. iperf3 -P 4 from the kernel
/// completes, and both shards carried connections. Each connection lands on the queue the
/// kernel picks for its flow; if the kernel ever moved a connection's frames to the other
/// queue, the other shard's stack would find no socket for them (`no_socket`) and reset it
/// (`rst_out`), and iperf3 would fail: both must stay zero while the data flows.
#[test]
fn sharded_serve_on_a_multi_queue_tap_spreads_iperf3_streams_over_shards() {
    if netns::skip(netns::unavailable_with(&[
        "kill", "iperf3", "ping", "timeout", "sysctl",
    ])) {
        return;
    }
    // IPv4, then IPv6 (the kernel's flow hash covers IPv6 addresses and ports the
    // same way, and Neighbor Discovery is shared between the shards like ARP).
    for v6 in [false, true] {
        sharded_iperf3(v6);
    }
}

fn sharded_iperf3(v6: bool) {
    let net = Netns::create_multi_queue();
    let addr6 = format!("{SERVER6}/64");
    let mut args = vec!["--shards", "2"];
    let (host, iperf_extra) = if v6 {
        net.add_ipv6();
        args.extend(["--addr", addr6.as_str()]);
        (SERVER6, vec!["-6", "-P", "4"])
    } else {
        (SERVER, vec!["-P", "4"])
    };
    // The kernel's flow hash picks a queue per connection: all 5 connections of a run (the
    // control and 4 streams) on one queue has probability 1/16, so up to three runs (each on
    // a fresh server, whose per-shard counters are read when it stops) until both shards
    // carried iperf3 data.
    for run in 0..3 {
        let server = Server::start_with(&net, None, &args);
        if v6 {
            // Every shard's address is tentative for about a second (DAD, each on its own).
            let out = net.exec(&["ping", "-6", "-c", "1", "-w", "15", SERVER6]);
            assert!(ping_received(&out) >= 1, "{out}");
            std::thread::sleep(Duration::from_millis(1200));
        }
        let v = iperf3_to(&net, host, &iperf_extra);
        let streams = v["end"]["streams"].as_array().map_or(0, Vec::len);
        assert_eq!(streams, 4, "run {run}");
        let out = server.stop();
        // Which steering is in force (the eBPF Toeplitz program, or the kernel's automq
        // and why) is said at start.
        assert!(out.contains("queue steering: "), "{out}");
        eprintln!(
            "{}",
            out.lines()
                .filter(|l| l.contains("queue steering: ")
                    || l.starts_with("shard ") && l.contains('='))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let shard = |k: usize, name: &str| -> u64 {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("shard {k}: ")))
                .unwrap_or_else(|| panic!("no shard {k} line in:\n{out}"));
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {line}"))
        };
        for k in 0..2 {
            assert_eq!(
                shard(k, "no_socket"),
                0,
                "shard {k}: a frame on the wrong shard\n{out}"
            );
        }
        assert!(
            out.contains("flows_on_two_shards=0"),
            "v6={v6}: a flow reached two shards\n{out}"
        );
        let bytes: Vec<u64> = (0..2).map(|k| shard(k, "iperf_bytes_in")).collect();
        if bytes.iter().all(|&b| b > 0) {
            for k in 0..2 {
                assert!(
                    shard(k, "accepted") > 0,
                    "shard {k} accepted nothing:\n{out}"
                );
            }
            return;
        }
        eprintln!("run {run}: iperf3 data on one shard only ({bytes:?}), again");
    }
    panic!("v6={v6}: three iperf3 -P 4 runs never used both shards");
}

/// The value of a `GROUP NAME VALUE` counter row in `serve`'s output.
/// Frames the kernel dropped on their way into netfold through the TAP: the device's
/// tx_dropped (its queue to the reader was full) plus the drops of its qdisc.
fn kernel_tx_drops(net: &Netns) -> u64 {
    let dev = net
        .exec(&[
            "cat",
            &format!("/sys/class/net/{}/statistics/tx_dropped", net.tap),
        ])
        .trim()
        .parse::<u64>()
        .unwrap_or(0);
    let tc = net.exec(&["tc", "-s", "qdisc", "show", "dev", &net.tap]);
    let qdisc: u64 = tc
        .split("dropped ")
        .skip(1)
        .filter_map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    dev + qdisc
}

fn counter(out: &str, group: &str, name: &str) -> u64 {
    out.lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 3 && w[0] == group && w[1] == name)
                .then(|| w[2].parse().ok())
                .flatten()
        })
        .unwrap_or_else(|| panic!("no counter {group} {name} in:\n{out}"))
}

/// Peak resident set of a process in bytes (VmHWM in /proc/PID/status).
fn vm_hwm(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("VmHWM");
    kb * 1024
}

/// Kills a helper process on drop (also when a check fails first).
struct Reaper(Option<Child>);
impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Hostile traffic over a real TAP: after a 30,000-SYN spoofed flood a new client is
/// served within 1 s; then a verified echo and a large download (sha256) stay intact while
/// blind segments and malformed frames are injected from the kernel side; the server's
/// resident memory stays under 512 MiB and the junk shows in its drop counters.
#[test]
fn serve_survives_syn_flood_blind_injection_and_malformed_frames() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "curl",
        "python3",
        "sha256sum",
        "ss",
        "timeout",
    ])) {
        return;
    }
    /// Flood size and the resident-memory bound the server must stay under.
    const FLOOD: usize = 30_000;
    const RSS_LIMIT: u64 = 512 << 20;
    /// Download and echo sizes.
    const DOWNLOAD: u64 = 300_000_000;
    const ECHO: u64 = 32 << 20;
    let started = Instant::now();
    let mut net = Netns::create();
    let server = Server::start(&net, None);
    let pid = server.child.id();

    // 1. The flood, then a new client within 1 s.
    net.exec(&[
        "python3",
        "-c",
        PY_FLOOD,
        SERVER,
        "8080",
        &FLOOD.to_string(),
    ]);
    let ms: f64 = String::from_utf8_lossy(&py_args(&net, PY_CONNECT_FAST, &[SERVER, "8080"]))
        .trim()
        .parse()
        .expect("connect time");
    eprintln!("connect after {FLOOD}-SYN flood: {ms:.1} ms");
    assert!(ms < 1000.0, "connect took {ms} ms");

    // 2. Echo and download, with injection running alongside.
    let stop = std::env::temp_dir().join(format!("netfold-inject-stop-{}", std::process::id()));
    let _ = std::fs::remove_file(&stop);
    net.files.push(stop.clone());
    let marker = std::env::temp_dir().join(format!("netfold-inject-enough-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    net.files.push(marker.clone());
    let hold = net
        .cmd(&[
            "timeout",
            "200",
            "python3",
            "-c",
            PY_HOLD,
            SERVER,
            marker.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("holder");
    let mut hold = Reaper(Some(hold));
    let script = format!(
        "set -o pipefail; curl -sS --max-time 200 http://{SERVER}:8080/bytes/{DOWNLOAD} | sha256sum"
    );
    let curl = net
        .cmd(&["timeout", "220", "bash", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl");
    let mut curl = Reaper(Some(curl));
    let echo = net
        .cmd(&[
            "timeout",
            "220",
            "python3",
            "-c",
            PY_ECHO,
            SERVER,
            &ECHO.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("echo");
    let mut echo = Reaper(Some(echo));
    let kernel_mac = std::fs::read_to_string(format!("/sys/class/net/{}/address", net.tap));
    // The TAP lives in the namespace: read its MAC there.
    let kernel_mac = match kernel_mac {
        Ok(m) => m,
        Err(_) => net.exec(&["cat", &format!("/sys/class/net/{}/address", net.tap)]),
    };
    std::thread::sleep(Duration::from_millis(300));
    let inject = net
        .cmd(&[
            "timeout",
            "260",
            "python3",
            "-c",
            PY_INJECT,
            &net.tap,
            kernel_mac.trim(),
            "02:6e:66:00:00:02",
            SERVER,
            stop.to_str().unwrap(),
            marker.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("injector");
    let mut inject = Reaper(Some(inject));
    let want = expected_sha256(DOWNLOAD);
    let curl_out = curl.0.take().unwrap().wait_with_output().expect("curl");
    let transfer_s = started.elapsed().as_secs_f64();
    let echo_out = echo.0.take().unwrap().wait_with_output().expect("echo");
    let hold_out = hold.0.take().unwrap().wait_with_output().expect("holder");
    std::fs::write(&stop, b"").expect("stop file");
    let inj = inject
        .0
        .take()
        .unwrap()
        .wait_with_output()
        .expect("injector");
    assert!(
        inj.status.success(),
        "injector: {}",
        String::from_utf8_lossy(&inj.stderr)
    );
    assert!(
        curl_out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&curl_out.stderr)
    );
    let got = String::from_utf8_lossy(&curl_out.stdout);
    assert_eq!(
        got.split_whitespace().next(),
        Some(want.as_str()),
        "download corrupted"
    );
    assert!(
        echo_out.status.success(),
        "echo: {}{}",
        String::from_utf8_lossy(&echo_out.stdout),
        String::from_utf8_lossy(&echo_out.stderr)
    );
    assert!(
        hold_out.status.success(),
        "holder: {}{}",
        String::from_utf8_lossy(&hold_out.stdout),
        String::from_utf8_lossy(&hold_out.stderr)
    );
    let sent: serde_json::Value = serde_json::from_slice(&inj.stdout).expect("injector JSON");
    eprintln!("injected: {sent}");
    let n = |k: &str| sent[k].as_u64().unwrap_or(0);
    for k in [
        "blind_rst",
        "blind_syn",
        "blind_data",
        "bogus_options",
        "bad_tcp_checksum",
    ] {
        assert!(n(k) > 0, "no {k} injected while the transfers ran: {sent}");
    }

    // 3. Memory, then the counters.
    let hwm = vm_hwm(pid);
    eprintln!("serve VmHWM {} MiB", hwm >> 20);
    assert!(hwm < RSS_LIMIT, "serve peak RSS {hwm} bytes");
    // An AF_PACKET send succeeds once the kernel has queued the frame; when the TAP's queue
    // to netfold is full the kernel drops it there (the TAP's tx_dropped, or the qdisc's), so
    // netfold never sees it. Those drops are read from the kernel and allowed for.
    let kernel_dropped = kernel_tx_drops(&net);
    let out = server.stop();
    // Every frame broken below TCP's port demultiplexing is dropped and counted once, by the
    // TAP's offload layer or by the stack.
    let malformed = n("bad_ip_checksum")
        + n("short_ip_header")
        + n("ip_length_past_frame")
        + n("short_tcp_header")
        + n("tcp_offset_past_segment")
        + n("tcp_offset_below_5")
        + n("bad_tcp_checksum");
    let counted = counter(&out, "ipv4", "bad_checksum")
        + counter(&out, "ipv4", "malformed")
        + counter(&out, "tcp", "bad_checksum")
        + counter(&out, "tcp", "malformed")
        + counter(&out, "tap", "rx_bad_checksum")
        + counter(&out, "tap", "rx_malformed");
    eprintln!(
        "malformed sent {malformed}, counted {counted}, dropped by the kernel {kernel_dropped}"
    );
    assert!(
        counted + kernel_dropped >= malformed,
        "{malformed} malformed frames sent, {counted} counted, {kernel_dropped} dropped by the kernel before netfold:\n{out}"
    );
    // The flood overflowed the SYN queue and was answered with cookies.
    assert!(counter(&out, "cookie", "sent") > 0, "{out}");
    assert_eq!(counter(&out, "tcp", "backlog_drops"), 0, "{out}");
    // Blind SYNs on synchronized connections get challenge ACKs (RFC 5961 §4).
    assert!(counter(&out, "tcp", "challenge_acks") > 0, "{out}");
    assert!(counter(&out, "tcp", "rst_in") > 0, "{out}");
    eprintln!(
        "whole test {:.1} s (transfers done at {transfer_s:.1} s)",
        started.elapsed().as_secs_f64()
    );
    drop(net);
}

/// A python3 snippet with arguments, run in the namespace; returns stdout.
fn py_args(net: &Netns, code: &str, args: &[&str]) -> Vec<u8> {
    let mut a = vec!["timeout", "60", "python3", "-c", code];
    a.extend_from_slice(args);
    let out = net.cmd(&a).output().expect("python3");
    assert!(
        out.status.success(),
        "python failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// sockstress from the kernel side: connections that ask chargen for endless data and then
/// hold their window shut (a 4 KiB receive buffer nobody reads), 600 of them against a
/// 64 MiB buffer budget. All are accepted (more than the old 256-connection cap), the
/// server's memory stays bounded by the budget (the holds without progress are reset), and
/// a legitimate client is served every byte, every time, during the attack.
const PY_SOCKSTRESS: &str = r#"
import socket, sys, time
host, n, hold, marker = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
socks = []
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect((host, 19))
    socks.append(s)
open(marker, "w").write(str(len(socks)))
time.sleep(hold)
"#;

#[test]
fn serve_under_sockstress_stays_in_its_budget_and_serves_a_new_client() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "curl",
        "python3",
        "sha256sum",
        "timeout",
    ])) {
        return;
    }
    const HOLDS: usize = 600;
    const BUDGET_MIB: u64 = 64;
    const DOWNLOAD: u64 = 20_000_000;
    let mut net = Netns::create();
    let server = Server::start_with(&net, None, &["--mem-budget", &BUDGET_MIB.to_string()]);
    let pid = server.child.id();
    let marker = std::env::temp_dir().join(format!("netfold-sockstress-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    net.files.push(marker.clone());
    let attack = net
        .cmd(&[
            "timeout",
            "120",
            "python3",
            "-c",
            PY_SOCKSTRESS,
            SERVER,
            &HOLDS.to_string(),
            "40",
            marker.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sockstress");
    let _attack = Reaper(Some(attack));
    let end = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        assert!(Instant::now() < end, "the holds did not all connect");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), HOLDS.to_string());
    // The holds fill their send rings at once; they stall after three unanswered probes.
    let want = expected_sha256(DOWNLOAD);
    for round in 0..3 {
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(curl_sha256(&net, DOWNLOAD), want, "round {round}");
    }
    let hwm = vm_hwm(pid);
    eprintln!(
        "sockstress: {HOLDS} holds, budget {BUDGET_MIB} MiB, peak RSS {} MiB",
        hwm >> 20
    );
    // The budget, plus the process's own (pools, code): bounded, where 600 full send rings
    // would be 150 MiB more (measured before send queues were moderated under pressure:
    // 171 MiB; with: 77 MiB).
    assert!(hwm < (BUDGET_MIB + 40) << 20, "peak RSS {} MiB", hwm >> 20);
    let out = server.stop();
    assert!(
        counter(&out, "tcp", "pressure_resets") > 0,
        "no hold was reset:\n{out}"
    );
}

/// Handshakes that go silent, from the kernel side: N connections to the HTTP service that
/// complete the three-way handshake and then send nothing (a file-descriptor limit raised
/// for them first). Prints how many connected.
const PY_SILENT: &str = r#"
import socket, sys, time, resource
host, n, hold, marker = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 256, n + 256))
socks = []
for i in range(n):
    s = socket.socket()
    s.settimeout(5)
    s.connect((host, 8080))
    socks.append(s)
open(marker, "w").write(str(len(socks)))
time.sleep(hold)
"#;

/// 5,000 connections that finish the handshake and go silent, against `serve` with its
/// default flags: every one is accepted and held (no connection cap below what memory
/// allows), a legitimate client is served every byte, every time, while they are held, the
/// server stays under 512 MiB, and the idle connections (no rings taken) never put it under
/// memory pressure.
#[test]
fn serve_holds_5000_silent_connections_and_serves_a_new_client() {
    if netns::skip(netns::unavailable_with(&[
        "kill",
        "curl",
        "python3",
        "sha256sum",
        "timeout",
    ])) {
        return;
    }
    const SILENT: usize = 5000;
    const DOWNLOAD: u64 = 20_000_000;
    let mut net = Netns::create();
    let server = Server::start(&net, None);
    let pid = server.child.id();
    let marker = std::env::temp_dir().join(format!("netfold-silent-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    net.files.push(marker.clone());
    let attack = net
        .cmd(&[
            "timeout",
            "150",
            "python3",
            "-c",
            PY_SILENT,
            SERVER,
            &SILENT.to_string(),
            "40",
            marker.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("silent handshakes");
    let mut attack = Reaper(Some(attack));
    let end = Instant::now() + Duration::from_secs(90);
    while !marker.exists() {
        if let Some(st) = attack.0.as_mut().unwrap().try_wait().expect("wait") {
            let out = attack.0.take().unwrap().wait_with_output().expect("output");
            panic!(
                "the silent connections failed ({st}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            Instant::now() < end,
            "the silent connections did not all connect"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        SILENT.to_string()
    );
    let want = expected_sha256(DOWNLOAD);
    for round in 0..3 {
        assert_eq!(curl_sha256(&net, DOWNLOAD), want, "round {round}");
        std::thread::sleep(Duration::from_secs(1));
    }
    let hwm = vm_hwm(pid);
    eprintln!(
        "silent handshakes: {SILENT} held, peak RSS {} MiB",
        hwm >> 20
    );
    assert!(hwm < 512 << 20, "peak RSS {} MiB", hwm >> 20);
    let out = server.stop();
    assert_eq!(counter(&out, "tcp", "backlog_drops"), 0, "{out}");
    assert!(
        out.contains("refused_full=0"),
        "a connection was refused:\n{out}"
    );
    let accepted: usize = out
        .split("accepted=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .expect("services line");
    assert!(accepted > SILENT, "accepted {accepted}:\n{out}");
    // Connections that sent and received nothing hold no ring storage (it is taken at first
    // use): 5,000 of them put the stack nowhere near its buffer budget.
    assert_eq!(counter(&out, "tcp", "memory_pressure"), 0, "{out}");
}

/// FragmentSmack (CVE-2018-5391) from the kernel side through a raw socket: N IPv4
/// fragments that never complete, from a spoofed neighbour (198.18.0.66), most opening a
/// datagram that is never finished and every fourth overlapping the one before, paced over
/// a few seconds; touches MARKER after the first 2,000. Prints the count sent.
const PY_FRAG_FLOOD: &str = r#"
import socket, struct, sys, random, os, time
dst, n, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
src, d = socket.inet_aton('198.18.0.66'), socket.inet_aton(dst)
def frag(ident, off8, data, more=True):
    flags = (0x2000 if more else 0) | off8
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(data), ident, flags, 64, 17, 0, src, d)
    s.sendto(h + data, (dst, 0))
sent, last = 0, None
for i in range(n):
    if i % 4 == 3 and last:
        ident, off8, ln = last
        frag(ident, off8 + 1, os.urandom(ln))
    else:
        ident = random.getrandbits(16)
        off8 = random.randrange(0, 7000)
        ln = random.choice([8, 64, 512, 1400]) // 8 * 8
        frag(ident, off8, os.urandom(ln))
        last = (ident, off8, ln)
    sent += 1
    if sent == 2000:
        open(marker, 'w').close()
    if sent % 200 == 0:
        time.sleep(0.02)
print(sent, flush=True)
"#;

/// A fragmented ping (3000 bytes: three fragments each way at MTU 1500) is answered every
/// time during a 40,000-fragment flood and right after it, over a real TAP from the
/// kernel's ping; the flood's overlapping datagrams are discarded as they come.
#[test]
fn serve_answers_fragmented_pings_during_a_fragment_flood() {
    if netns::skip(netns::unavailable_with(&[
        "kill", "ping", "python3", "timeout",
    ])) {
        return;
    }
    const FLOOD: usize = 40_000;
    let mut net = Netns::create();
    let server = Server::start(&net, None);
    let marker = std::env::temp_dir().join(format!("netfold-fragflood-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    net.files.push(marker.clone());
    let flood = net
        .cmd(&[
            "timeout",
            "120",
            "python3",
            "-c",
            PY_FRAG_FLOOD,
            SERVER,
            &FLOOD.to_string(),
            marker.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fragment flood");
    let mut flood = Reaper(Some(flood));
    let end = Instant::now() + Duration::from_secs(30);
    while !marker.exists() {
        assert!(Instant::now() < end, "the flood did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let during = net.exec(&[
        "ping", "-c", "20", "-i", "0.05", "-W", "2", "-s", "3000", SERVER,
    ]);
    let still_flooding = flood
        .0
        .as_mut()
        .unwrap()
        .try_wait()
        .expect("wait")
        .is_none();
    let out = flood.0.take().unwrap().wait_with_output().expect("flood");
    assert!(
        out.status.success(),
        "flood: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        FLOOD.to_string()
    );
    let after = net.exec(&[
        "ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", "3000", SERVER,
    ]);
    eprintln!(
        "fragment flood: {} of 20 fragmented pings answered during ({}), {} of 3 after",
        ping_received(&during),
        if still_flooding {
            "the flood outlasted them"
        } else {
            "the flood ended first"
        },
        ping_received(&after)
    );
    assert!(still_flooding, "the pings did not overlap the flood");
    assert_eq!(ping_received(&during), 20, "{during}");
    assert_eq!(ping_received(&after), 3, "{after}");
    let out = server.stop();
    assert!(counter(&out, "ipv4", "frag_overlaps") > 0, "{out}");
    assert!(counter(&out, "ipv4", "frag_reassembled") >= 23, "{out}");
}
