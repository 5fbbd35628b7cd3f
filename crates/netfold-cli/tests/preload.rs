//! Unmodified programs on netfold: `netfold run` (the LD_PRELOAD library libnetfold_preload.so)
//! against the Linux kernel as the peer.
//!
//! Each test creates a network namespace with a TAP whose kernel side is 198.18.29.1/24; the
//! program under `netfold run` is 198.18.29.2 on that TAP, the stock tools on the kernel side
//! talk to it: curl downloading from a kernel `python3 -m http.server` and `python3 -m
//! http.server` serving a kernel curl (both sha256-checked), `iperf3 -s` with a kernel client
//! and `iperf3 -c` against a kernel server (JSON read), and a Python script mixing netfold
//! sockets with loopback sockets, pipes, select, epoll and fork. Everything is removed
//! afterwards, also on failure (Drop guards). Needs root and /dev/net/tun, and the tools
//! (curl, iperf3, python3, sha256sum, timeout); otherwise each test prints `SKIPPED: ...` and
//! passes.
//!
//! The tests run the library's driver thread (`--poll thread`); a subset runs again with
//! `--poll inline` (the default: the program's own calls poll the stack): curl, iperf3 in both
//! directions, redis-benchmark, and a program that sleeps between its calls, whose connection
//! must still be served (its data acknowledged, its timers run) meanwhile.
//!
//! The library is built by a nested `cargo build -p netfold-preload` (same target directory
//! and profile as this test's binary), once per test binary.

use netfold_os::netns::{self, NetNs};
use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

const KERNEL: &str = "198.18.29.1";
const OURS: &str = "198.18.29.2";
const OURS_CIDR: &str = "198.18.29.2/24";
/// The kernel's and the program's IPv6 addresses (RFC 5180's benchmarking prefix).
const KERNEL6: &str = "2001:2:0:29::1";
const OURS6_CIDR: &str = "2001:2:0:29::2/64";

/// The library, built once: `<target>/<profile>/libnetfold_preload.so`.
fn library() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // <target>/<profile>/deps/preload-<hash>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary lives in <target>/<profile>/deps");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut c = Command::new(cargo);
        c.args(["build", "-p", "netfold-preload", "--lib"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        let out = c
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .output()
            .expect("run cargo build -p netfold-preload");
        assert!(
            out.status.success(),
            "cargo build -p netfold-preload: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = profile_dir.join("libnetfold_preload.so");
        assert!(lib.is_file(), "no {}", lib.display());
        lib
    })
}

/// A namespace with a link whose kernel side is 198.18.29.1/24 (a TAP, a TUN, or one end of a
/// veth pair whose other end netfold takes through a packet socket); the link and any files
/// are removed on drop.
struct Net {
    /// The `--link` spec.
    link: String,
    /// What to delete on drop (`ip` arguments).
    del: Vec<String>,
    dir: PathBuf,
    // Declared last: dropped after `Drop for Net` has deleted the TAP.
    ns: NetNs,
}

impl Net {
    fn create() -> Net {
        Self::create_mode("tap")
    }

    /// "tap" or "tun": that device; "packet": a veth pair, netfold on one end.
    fn create_mode(mode: &str) -> Net {
        let ns = NetNs::create().expect("create netns");
        let (kernel_side, link, del) = match mode {
            "tap" | "tun" => {
                ns.ip(&["tuntap", "add", "mode", mode, "name", "nfpre0"])
                    .expect("create tap/tun");
                let del = ["tuntap", "del", "mode", mode, "name", "nfpre0"];
                (
                    "nfpre0",
                    format!("{mode}:nfpre0"),
                    del.map(String::from).to_vec(),
                )
            }
            _ => {
                ns.ip(&[
                    "link", "add", "nfprek", "type", "veth", "peer", "name", "nfpren",
                ])
                .expect("create veth");
                ns.ip(&["link", "set", "nfpren", "up"]).expect("veth up");
                let del = ["link", "del", "nfprek"];
                (
                    "nfprek",
                    "packet:nfpren".into(),
                    del.map(String::from).to_vec(),
                )
            }
        };
        ns.configure(kernel_side, Ipv4Addr::new(198, 18, 29, 1), 24)
            .expect("configure link");
        let dir = std::env::temp_dir().join(format!("netfold-preload-{}", ns.name()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Net { link, del, dir, ns }
    }

    /// `netfold run` on this link as 198.18.29.2/24, then `args`, inside the namespace
    /// (bounded by timeout(1)).
    fn on_netfold(&self, args: &[&str]) -> Command {
        self.on_netfold_with(THREAD, args)
    }

    /// `on_netfold` with more `netfold run` options (`extra`, e.g. `--poll inline`).
    fn on_netfold_with(&self, extra: &[&str], args: &[&str]) -> Command {
        let exe = env!("CARGO_BIN_EXE_netfold");
        let mut c = self.ns.command("timeout");
        c.args([
            "120", exe, "run", "--link", &self.link, "--addr", OURS_CIDR, "--lib",
        ])
        .arg(library())
        .args(extra)
        .arg("--")
        .args(args);
        c
    }

    /// `args` in the namespace, on the kernel's sockets (bounded by timeout(1)).
    fn on_kernel(&self, args: &[&str]) -> Command {
        let mut c = self.ns.command("timeout");
        c.arg("120").args(args);
        c
    }

    /// A file of `len` pseudo-random bytes in the test's directory.
    fn blob(&self, name: &str, len: usize) -> PathBuf {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let p = self.dir.join(name);
        std::fs::write(&p, data).expect("write blob");
        p
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let del: Vec<&str> = self.del.iter().map(String::as_str).collect();
        let _ = self.ns.ip(&del);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A background program, killed on drop; its stdout lines arrive on `lines`.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    fn start(mut c: Command) -> Running {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    /// Waits for a stdout line containing `needle`.
    fn wait_for(&self, needle: &str) {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(l) if l.contains(needle) => return,
                Ok(_) => {}
                Err(e) => panic!("no line with {needle:?}: {e}"),
            }
        }
    }

    /// Waits (bounded) for the program to exit by itself; its status.
    fn wait(mut self) -> std::process::ExitStatus {
        for _ in 0..600 {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("program did not exit");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // `ip netns exec` and timeout(1) exec the program: this is its pid.
            let _ = Command::new("kill")
                .arg(self.child.id().to_string())
                .status();
            let _ = self.child.wait();
        }
    }
}

fn output(mut c: Command) -> Output {
    c.stdin(Stdio::null()).output().expect("run")
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn sha256(p: &Path) -> String {
    let o = Command::new("sha256sum")
        .arg(p)
        .output()
        .expect("sha256sum");
    ok(&o, "sha256sum");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn skip(tools: &[&str]) -> bool {
    netns::skip(netns::unavailable_with(tools))
}

/// A kernel-side `python3 -m http.server` on 198.18.29.1:8080 serving `dir`.
fn kernel_http_server(net: &Net, dir: &Path) -> Running {
    let d = dir.display().to_string();
    let s = Running::start(net.on_kernel(&[
        "python3",
        "-u",
        "-m",
        "http.server",
        "8080",
        "--bind",
        KERNEL,
        "--directory",
        &d,
    ]));
    s.wait_for("Serving HTTP");
    s
}

#[test]
fn curl_on_netfold_downloads_from_a_kernel_http_server() {
    curl_download("tap");
}

#[test]
fn curl_on_netfold_over_a_tun_link() {
    curl_download("tun");
}

#[test]
fn curl_on_netfold_over_a_packet_socket_on_a_veth() {
    curl_download("packet");
}

#[test]
fn curl_on_netfold_polling_inline_downloads_byte_exact() {
    curl_download_with("tap", INLINE);
}

/// `netfold run` options for the INLINE mode.
const INLINE: &[&str] = &["--poll", "inline"];
/// And for the THREAD mode.
const THREAD: &[&str] = &["--poll", "thread"];

fn curl_download(mode: &str) {
    curl_download_with(mode, THREAD);
}

fn curl_download_with(mode: &str, extra: &[&str]) {
    if skip(&["curl", "python3", "sha256sum", "timeout"]) {
        return;
    }
    let net = Net::create_mode(mode);
    let blob = net.blob("blob", 8 << 20);
    let _server = kernel_http_server(&net, &net.dir);
    let got = net.dir.join("got");
    let url = format!("http://{KERNEL}:8080/blob");
    let g = got.display().to_string();
    let o =
        output(net.on_netfold_with(extra, &["curl", "-sS", "--max-time", "60", "-o", &g, &url]));
    ok(&o, "curl on netfold");
    assert_eq!(std::fs::metadata(&got).map(|m| m.len()).ok(), Some(8 << 20));
    assert_eq!(sha256(&got), sha256(&blob));
}

#[test]
fn python_http_server_on_netfold_serves_a_kernel_curl() {
    if skip(&["curl", "python3", "sha256sum", "timeout"]) {
        return;
    }
    let net = Net::create();
    let blob = net.blob("blob", 8 << 20);
    let d = net.dir.display().to_string();
    // No --bind: Python's dual-stack server, an AF_INET6 socket on [::] with IPV6_V6ONLY 0,
    // reached over IPv4.
    let server = Running::start(net.on_netfold(&[
        "python3",
        "-u",
        "-m",
        "http.server",
        "8081",
        "--directory",
        &d,
    ]));
    server.wait_for("Serving HTTP");
    let got = net.dir.join("got");
    let g = got.display().to_string();
    let url = format!("http://{OURS}:8081/blob");
    for i in 0..2 {
        let o = output(net.on_kernel(&["curl", "-sS", "--max-time", "60", "-o", &g, &url]));
        ok(&o, &format!("kernel curl #{i}"));
        assert_eq!(sha256(&got), sha256(&blob), "download #{i}");
    }
}

/// Both families on one stack: `--addr` twice, curl over IPv6 to a kernel http.server on
/// the TAP's IPv6 address, then over IPv4 from the same program.
#[test]
fn curl_on_netfold_over_ipv6_and_ipv4() {
    if skip(&["curl", "python3", "sha256sum", "timeout", "sysctl"]) {
        return;
    }
    let net = Net::create();
    net.ns
        .configure6("nfpre0", KERNEL6.parse().unwrap(), 64)
        .expect("configure ipv6");
    let blob = net.blob("blob", 2 << 20);
    let d = net.dir.display().to_string();
    // Dual-stack: [::] takes IPv4 too.
    let server = Running::start(net.on_kernel(&[
        "python3",
        "-u",
        "-m",
        "http.server",
        "8080",
        "--bind",
        "::",
        "--directory",
        &d,
    ]));
    server.wait_for("Serving HTTP");
    let exe = env!("CARGO_BIN_EXE_netfold");
    for (i, url) in [
        format!("http://[{KERNEL6}]:8080/blob"),
        format!("http://{KERNEL}:8080/blob"),
    ]
    .iter()
    .enumerate()
    {
        let got = net.dir.join(format!("got{i}"));
        let g = got.display().to_string();
        let mut c = net.ns.command("timeout");
        c.args(["120", exe, "run", "--link", &net.link, "--addr", OURS_CIDR])
            .args(["--addr", OURS6_CIDR, "--lib"])
            .arg(library())
            .args(["--", "curl", "-sS", "-g", "--max-time", "60", "-o", &g, url]);
        ok(&output(c), url);
        assert_eq!(sha256(&got), sha256(&blob), "{url}");
    }
}

/// `iperf3 -J` output: the bytes the receiver counted, after checking there is no error.
fn iperf_bytes(o: &Output) -> u64 {
    ok(o, "iperf3 client");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("iperf3 -J prints JSON");
    assert!(v.get("error").is_none(), "iperf3 error: {}", v["error"]);
    v["end"]["sum_received"]["bytes"]
        .as_u64()
        .expect("end.sum_received.bytes")
}

#[test]
fn iperf3_server_on_netfold_with_a_kernel_client() {
    iperf3_server(THREAD);
}

#[test]
fn iperf3_server_on_netfold_polling_inline_with_a_kernel_client() {
    iperf3_server(INLINE);
}

fn iperf3_server(extra: &[&str]) {
    if skip(&["iperf3", "timeout"]) {
        return;
    }
    let net = Net::create();
    let server = Running::start(
        net.on_netfold_with(extra, &["iperf3", "-s", "-1", "-p", "5301", "--forceflush"]),
    );
    server.wait_for("Server listening");
    let o = output(net.on_kernel(&["iperf3", "-c", OURS, "-p", "5301", "-t", "2", "-J"]));
    assert!(iperf_bytes(&o) > 0);
    assert!(server.wait().success(), "iperf3 -s -1 on netfold failed");
}

#[test]
fn iperf3_client_on_netfold_against_a_kernel_server() {
    iperf3_client(THREAD);
}

#[test]
fn iperf3_client_on_netfold_polling_inline_sends_and_receives() {
    iperf3_client(INLINE);
}

fn iperf3_client(extra: &[&str]) {
    if skip(&["iperf3", "timeout"]) {
        return;
    }
    let net = Net::create();
    for (port, reverse) in [("5302", false), ("5303", true)] {
        let server = Running::start(net.on_kernel(&[
            "iperf3",
            "-s",
            "-1",
            "-B",
            KERNEL,
            "-p",
            port,
            "--forceflush",
        ]));
        server.wait_for("Server listening");
        let mut args = vec!["iperf3", "-c", KERNEL, "-p", port, "-t", "2", "-J"];
        if reverse {
            args.push("-R");
        }
        let o = output(net.on_netfold_with(extra, &args));
        assert!(iperf_bytes(&o) > 0, "reverse {reverse}");
        assert!(server.wait().success());
    }
}

/// What the script below checks, in one netfold process: a loopback listener and connection
/// stay in the kernel; a UDP exchange with a kernel echo; select and epoll wait on a pipe and
/// a netfold socket at once; a signal interrupts a select and a blocking recv on a netfold
/// socket (EINTR, so Python runs the handler at once); a forked child cannot use the parent's netfold socket
/// (EBADF) but may close it, and the parent's connection still works afterwards; FIONREAD,
/// dup and dup2 (a connection lives while one of its numbers does), O_NONBLOCK by fcntl.
const MIXED: &str = r#"
import errno, os, select, selectors, signal, socket, sys, time
peer = (sys.argv[1], int(sys.argv[2]))

l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
c.sendall(b"ping"); assert a.recv(4) == b"ping"
print("loopback ok", flush=True)

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(5)
for i in range(3):
    msg = b"datagram %d " % i * 50
    u.sendto(msg, (peer[0], int(sys.argv[3])))
    data, src = u.recvfrom(65535)
    assert data == msg and src == (peer[0], int(sys.argv[3])), (data[:20], src)
print("udp ok", flush=True)

class Alarm(Exception):
    pass
def on_alarm(*_):
    raise Alarm()
signal.signal(signal.SIGALRM, on_alarm)
idle = socket.create_connection(peer)
t0 = time.monotonic()
signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    select.select([idle], [], [], 10)
    raise SystemExit("select on a netfold socket was not interrupted")
except Alarm:
    pass
assert time.monotonic() - t0 < 5, time.monotonic() - t0
# A blocking recv on a netfold socket is interrupted too.
t0 = time.monotonic()
signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    idle.recv(10)
    raise SystemExit("a blocking recv on a netfold socket was not interrupted")
except Alarm:
    pass
assert time.monotonic() - t0 < 5, time.monotonic() - t0
print("eintr ok", flush=True)

s = socket.create_connection(peer)
r, w = os.pipe()
os.write(w, b"x")
ready, _, _ = select.select([s, r], [], [], 5)
assert ready == [r], ready
os.read(r, 1)
s.sendall(b"GET /small HTTP/1.0\r\n\r\n")
ready, _, _ = select.select([s, r], [], [], 10)
assert ready == [s], ready
print("select ok", flush=True)

sel = selectors.EpollSelector()
sel.register(s, selectors.EVENT_READ, "sock"); sel.register(r, selectors.EVENT_READ, "pipe")
os.write(w, b"y")
got = sorted(k.data for k, _ in sel.select(5))
assert got == ["pipe", "sock"], got
os.read(r, 1)
sel.unregister(r)
reply = b""
while True:
    for k, _ in sel.select(10):
        pass
    chunk = s.recv(65536)
    if not chunk:
        break
    reply += chunk
assert reply.startswith(b"HTTP/1.0 200"), reply[:40]
assert reply.endswith(b"0123456789" * 100), reply[-40:]
print("epoll ok", flush=True)

import array, fcntl, termios
c2 = socket.create_connection(peer)
c2.sendall(b"GET /small HTTP/1.0\r\n\r\n")
select.select([c2], [], [], 10)
n = array.array("i", [0])
fcntl.ioctl(c2.fileno(), termios.FIONREAD, n)
assert n[0] > 0, n[0]
# socket(fileno=) asks SO_DOMAIN, SO_TYPE and SO_PROTOCOL.
d = socket.socket(fileno=os.dup(c2.fileno()))
assert (d.family, d.type, d.proto) == (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
c2.close()
assert d.recv(12) == b"HTTP/1.0 200"
os.dup2(d.fileno(), 200)
e = socket.socket(fileno=200)
d.close()
fl = fcntl.fcntl(200, fcntl.F_GETFL)
fcntl.fcntl(200, fcntl.F_SETFL, fl | os.O_NONBLOCK)
assert fcntl.fcntl(200, fcntl.F_GETFL) & os.O_NONBLOCK
rest = b""
while not rest.endswith(b"0123456789" * 100):
    select.select([e], [], [], 10)
    rest += e.recv(65536)
e.close()
print("dup ok", flush=True)

t = socket.create_connection(peer)
pid = os.fork()
if pid == 0:
    try:
        t.send(b"x")
        os._exit(1)
    except OSError as e:
        os._exit(0 if e.errno == errno.EBADF else 2)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
t.sendall(b"GET /small HTTP/1.0\r\n\r\n")
assert t.recv(12) == b"HTTP/1.0 200"
print("fork ok", flush=True)
"#;

/// A kernel-side UDP echo (argv: address, port).
const UDP_ECHO: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    d, a = s.recvfrom(65535)
    s.sendto(d, a)
"#;

#[test]
fn netfold_sockets_mix_with_loopback_udp_pipes_select_epoll_signals_and_fork() {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let net = Net::create();
    std::fs::write(net.dir.join("small"), "0123456789".repeat(100)).expect("write");
    let _server = kernel_http_server(&net, &net.dir);
    let echo = Running::start(net.on_kernel(&["python3", "-u", "-c", UDP_ECHO, KERNEL, "9999"]));
    echo.wait_for("ready");
    let o = output(net.on_netfold(&["python3", "-c", MIXED, KERNEL, "8080", "9999"]));
    ok(&o, "mixed script on netfold");
    let out = String::from_utf8_lossy(&o.stdout);
    for step in [
        "loopback ok",
        "udp ok",
        "eintr ok",
        "select ok",
        "epoll ok",
        "dup ok",
        "fork ok",
    ] {
        assert!(out.contains(step), "{step}: {out}");
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not shared across fork"), "{err}");
}

/// Linux's MSG_ZEROCOPY and receive timestamps from an unmodified program (argv: address,
/// port): SO_ZEROCOPY, a request sent with MSG_ZEROCOPY (its buffer kept until the
/// notification), POLLERR, then the notification from recvmsg(MSG_ERRQUEUE) (IP_RECVERR,
/// send 0..0), EAGAIN after it, and the response read by recvmsg with SO_TIMESTAMPNS: its
/// SCM_TIMESTAMPNS lies between the send and the read on the system clock.
const ZEROCOPY: &str = r#"
import errno, select, socket, struct, sys, time
MSG_ZEROCOPY, SO_ZEROCOPY, SO_TIMESTAMPNS, IP_RECVERR = 0x4000000, 60, 35, 11
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
assert s.getsockopt(socket.SOL_SOCKET, SO_ZEROCOPY) == 1
s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
req = bytearray(b"GET /small HTTP/1.0\r\n\r\n")
t0 = time.time()
assert s.send(req, MSG_ZEROCOPY) == len(req)
p = select.poll()
p.register(s, select.POLLIN)
deadline = time.time() + 10
while not any(ev & select.POLLERR for _, ev in p.poll(100)):
    assert time.time() < deadline, "no POLLERR"
_, anc, flags, _ = s.recvmsg(0, 1024, socket.MSG_ERRQUEUE)
assert flags & socket.MSG_ERRQUEUE, flags
assert len(anc) == 1, anc
level, typ, data = anc[0]
assert (level, typ) == (socket.SOL_IP, IP_RECVERR), (level, typ)
ee_errno, origin, _, code, _, lo, hi = struct.unpack("=IBBBBII", data[:16])
assert (ee_errno, origin, lo, hi) == (0, 5, 0, 0), (ee_errno, origin, lo, hi)
try:
    s.recvmsg(0, 1024, socket.MSG_ERRQUEUE)
    assert False, "second notification"
except BlockingIOError:
    pass
print("zerocopy ok", code, flush=True)
got, stamp = b"", None
while len(got) < 12:
    d, anc, _, _ = s.recvmsg(65536, 1024)
    assert d, "EOF"
    got += d
    for level, typ, data in anc:
        if (level, typ) == (socket.SOL_SOCKET, SO_TIMESTAMPNS):
            sec, nsec = struct.unpack("=qq", data)
            stamp = sec + nsec / 1e9
assert got.startswith(b"HTTP/1.0 200"), got
assert stamp is not None, "no SCM_TIMESTAMPNS"
assert t0 - 0.01 <= stamp <= time.time() + 0.01, (t0, stamp, time.time())
print("timestamp ok", flush=True)
"#;

#[test]
fn msg_zerocopy_notifications_and_receive_timestamps_reach_an_unmodified_program() {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let net = Net::create();
    std::fs::write(net.dir.join("small"), "0123456789".repeat(100)).expect("write");
    let _server = kernel_http_server(&net, &net.dir);
    let o = output(net.on_netfold(&["python3", "-c", ZEROCOPY, KERNEL, "8080"]));
    ok(&o, "zerocopy script on netfold");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("zerocopy ok"), "{out}");
    assert!(out.contains("timestamp ok"), "{out}");
}

/// A link that cannot be opened: by default the program is stopped at its first socket, with
/// the reason; with --fallback it runs on the kernel's sockets and says so.
#[test]
fn a_link_that_cannot_open_stops_the_program_or_falls_back() {
    if netns::skip(netns::missing_tools(&["python3"])) {
        return;
    }
    let exe = env!("CARGO_BIN_EXE_netfold");
    let script = "import socket; s = socket.socket(); print('socket', s.fileno())";
    let run = |extra: &[&str]| {
        let mut c = Command::new(exe);
        c.args([
            "run",
            "--link",
            "packet:nfnosuch0",
            "--addr",
            OURS_CIDR,
            "--lib",
        ])
        .arg(library())
        .args(extra)
        .args(["--", "python3", "-c", script]);
        output(c)
    };
    let strict = run(&[]);
    assert_eq!(strict.status.code(), Some(1), "{strict:?}");
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(
        err.contains("cannot start on packet:nfnosuch0") && err.contains("NETFOLD_REQUIRE"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&strict.stdout).contains("socket"));

    let loose = run(&["--fallback"]);
    ok(&loose, "--fallback");
    assert!(String::from_utf8_lossy(&loose.stdout).starts_with("socket "));
    let err = String::from_utf8_lossy(&loose.stderr);
    assert!(err.contains("sockets stay in the kernel"), "{err}");
}

/// Settings the library cannot use are reported at the first socket, naming the variable.
#[test]
fn bad_settings_are_reported_at_the_first_socket() {
    if netns::skip(netns::missing_tools(&["python3"])) {
        return;
    }
    let exe = env!("CARGO_BIN_EXE_netfold");
    let script = "import socket; socket.socket(); print('socket')";
    for (link, addr, says) in [
        ("tap:nf0", "198.18.29.2", "has no prefix length"),
        (
            "tap:nf0",
            "198.18.29.2/24,198.18.29.3/24",
            "at most one IPv4 address",
        ),
        ("tap:nf0", "198.18.29.300/24", "is not an IP address"),
        (
            "xdp:eth0",
            OURS_CIDR,
            "expected tap:NAME, tun:NAME or packet:IFNAME",
        ),
    ] {
        let mut c = Command::new(exe);
        c.args(["run", "--link", link, "--addr", addr, "--lib"])
            .arg(library())
            .args(["--", "python3", "-c", script]);
        let o = output(c);
        assert_eq!(o.status.code(), Some(1), "{link} {addr}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{link} {addr}: {err}");
    }
}

#[test]
fn a_missing_library_is_reported() {
    let o = output({
        let mut c = Command::new(env!("CARGO_BIN_EXE_netfold"));
        c.args([
            "run",
            "--link",
            "tap:nf0",
            "--addr",
            OURS_CIDR,
            "--lib",
            "/nonexistent/libnetfold_preload.so",
            "--",
            "true",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--lib /nonexistent/libnetfold_preload.so"),
        "{err}"
    );
}

#[test]
fn redis_server_on_netfold_serves_redis_cli_and_redis_benchmark() {
    redis(THREAD);
}

#[test]
fn redis_server_on_netfold_polling_inline_serves_redis_benchmark() {
    redis(INLINE);
}

fn redis(extra: &[&str]) {
    if skip(&["redis-server", "redis-cli", "redis-benchmark", "timeout"]) {
        return;
    }
    let net = Net::create();
    let d = net.dir.display().to_string();
    let server = Running::start(net.on_netfold_with(
        extra,
        &[
            "redis-server",
            "--port",
            "6379",
            "--bind",
            OURS,
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            "--dir",
            &d,
        ],
    ));
    server.wait_for("Ready to accept connections");
    // A value larger than one segment, byte-checked through SET and GET.
    let value: String = (0..20_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let cli = |args: &[&str]| {
        let mut a = vec!["redis-cli", "-h", OURS, "-p", "6379"];
        a.extend_from_slice(args);
        let o = output(net.on_kernel(&a));
        ok(&o, "redis-cli");
        String::from_utf8_lossy(&o.stdout).trim_end().to_string()
    };
    assert_eq!(cli(&["SET", "k", &value]), "OK");
    assert_eq!(cli(&["GET", "k"]), value);
    let o = output(net.on_kernel(&[
        "redis-benchmark",
        "-h",
        OURS,
        "-p",
        "6379",
        "-n",
        "2000",
        "-c",
        "4",
        "-t",
        "set,get",
        "--csv",
    ]));
    ok(&o, "redis-benchmark");
    // "test","rps",... one row per test; every one must have run at a positive rate.
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<(String, f64)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split(',').map(|x| x.trim_matches('"'));
            let name = f.next()?.to_string();
            let rps = f.next()?.parse().ok()?;
            Some((name, rps))
        })
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for (name, rps) in &rows {
        assert!(*rps > 0.0, "{name}: {rps}");
    }
    assert_eq!(cli(&["EXISTS", "k"]), "1");
    // A background save forks: the child writes the snapshot without using the parent's
    // netfold sockets (it only closes its copies of them), and the parent keeps serving.
    assert_eq!(cli(&["BGSAVE"]), "Background saving started");
    let mut status = String::new();
    for _ in 0..100 {
        status = cli(&["INFO", "persistence"]);
        if status.contains("rdb_bgsave_in_progress:0") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        status.contains("rdb_bgsave_in_progress:0") && status.contains("rdb_last_bgsave_status:ok"),
        "{status}"
    );
    assert!(net.dir.join("dump.rdb").is_file());
    assert_eq!(cli(&["GET", "k"]), value);
}

#[test]
fn nginx_on_netfold_serves_a_file_to_a_kernel_curl() {
    if skip(&["nginx", "curl", "sha256sum", "timeout"]) {
        return;
    }
    let net = Net::create();
    let www = net.dir.join("www");
    std::fs::create_dir_all(&www).expect("www");
    let blob = {
        let b = net.blob("blob", 6 << 20);
        let to = www.join("blob");
        std::fs::rename(&b, &to).expect("move blob");
        to
    };
    let d = net.dir.display().to_string();
    // One process (no master/worker fork: netfold sockets are per process), sendfile on.
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log stderr notice;\n\
         pid {d}/nginx.pid;\nevents {{ worker_connections 64; }}\nhttp {{\n  access_log off;\n\
         client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;\n\
         uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;\n\
         server {{ listen {OURS}:8083; root {}; sendfile on; }}\n}}\n",
        www.display()
    );
    let conf_path = net.dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).expect("write nginx.conf");
    let c = conf_path.display().to_string();
    let _server = Running::start(net.on_netfold(&["nginx", "-c", &c, "-e", "stderr"]));
    let got = net.dir.join("got");
    let g = got.display().to_string();
    let url = format!("http://{OURS}:8083/blob");
    // curl retries until nginx listens.
    let o = output(net.on_kernel(&[
        "curl",
        "-sS",
        "--retry",
        "20",
        "--retry-connrefused",
        "--retry-delay",
        "1",
        "--max-time",
        "60",
        "-o",
        &g,
        &url,
    ]));
    ok(&o, "kernel curl from nginx on netfold");
    assert_eq!(sha256(&got), sha256(&blob));
}

/// The kernel side of the busy-program test (argv: address, port). It receives 64 KiB from the
/// program, which then sleeps 4 s without calling netfold; meanwhile everything must happen:
/// the 64 KiB arrive in full (the program's stack keeps sending as ACKs come back), one small
/// segment and then 32 KiB sent to the program are acknowledged (SIOCOUTQ drops to 0: the
/// stack took them in and its ACK, delayed by a timer or not, left). Then the program reads
/// both and answers "done".
const BUSY_PEER: &str = r#"
import fcntl, socket, struct, sys, termios, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(); print("ready", flush=True)
c, _ = l.accept()
def pattern(n, k):
    return bytes((i * k + 7) % 251 for i in range(n))
got = b""; t0 = None
while len(got) < 65536:
    d = c.recv(65536)
    assert d, "eof after %d bytes" % len(got)
    t0 = t0 or time.monotonic(); got += d
el = time.monotonic() - t0
assert got == pattern(65536, 3), "received bytes differ"
assert el < 1.5, "64 KiB took %.3f s while the program slept" % el
print("received %.3f" % el, flush=True)
def unacked():
    return struct.unpack("i", fcntl.ioctl(c.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
def acked(what):
    t = time.monotonic()
    while unacked() and time.monotonic() - t < 1.0:
        time.sleep(0.001)
    el = time.monotonic() - t
    assert unacked() == 0, "%s: %d bytes unacknowledged after %.3f s" % (what, unacked(), el)
    print("%s acked %.3f" % (what, el), flush=True)
c.sendall(b"s" * 100); acked("small")
c.sendall(pattern(32768, 5)); acked("bulk")
c.settimeout(20)
assert c.recv(16) == b"done"
print("ok", flush=True)
"#;

/// The program of the busy-program test, on netfold (argv: address, port).
const BUSY_PROGRAM: &str = r#"
import socket, sys, time
def pattern(n, k):
    return bytes((i * k + 7) % 251 for i in range(n))
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(pattern(65536, 3))
time.sleep(4)
want = b"s" * 100 + pattern(32768, 5)
got = b""
while len(got) < len(want):
    d = s.recv(65536)
    assert d, "eof"
    got += d
assert got == want, "bytes differ"
s.sendall(b"done")
s.close()
"#;

fn busy_program(extra: &[&str]) {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let net = Net::create();
    let peer = Running::start(net.on_kernel(&["python3", "-u", "-c", BUSY_PEER, KERNEL, "8090"]));
    peer.wait_for("ready");
    let o = output(net.on_netfold_with(extra, &["python3", "-c", BUSY_PROGRAM, KERNEL, "8090"]));
    ok(&o, "busy program on netfold");
    for step in ["received", "small acked", "bulk acked", "ok"] {
        peer.wait_for(step);
    }
    assert!(peer.wait().success(), "the kernel side failed");
}

/// A program that sleeps between its calls keeps its connection served: by the driver thread
/// in THREAD mode, by the fallback thread in INLINE mode.
#[test]
fn a_sleeping_program_polling_inline_still_gets_its_data_acknowledged() {
    busy_program(INLINE);
}

#[test]
fn a_sleeping_program_on_the_driver_thread_still_gets_its_data_acknowledged() {
    busy_program(THREAD);
}

/// The kernel side of the timeout test (argv: address, port): answers each "ping N" after
/// 20 ms, nothing to "quiet", and stops reading at "stall".
const TIMEO_PEER: &str = r#"
import socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(); print("ready", flush=True)
c, _ = l.accept(); f = c.makefile("rb")
while True:
    line = f.readline()
    if line.startswith(b"ping"):
        time.sleep(0.02); c.sendall(b"pong" + line[4:])
    elif line == b"stall\n":
        time.sleep(30); break
    elif not line:
        break
"#;

/// The program of the timeout test, on netfold (argv: address, port): blocking receives under
/// SO_RCVTIMEO whose data comes during the wait return it; with nothing coming the receive
/// fails with EAGAIN once the timeout has passed, and so does a send under SO_SNDTIMEO once
/// the peer stopped reading. Prints how many timed waits it made.
const TIMEO_PROGRAM: &str = r#"
import errno, socket, struct, sys, time
ROUNDS = 20
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def timeo(name, secs):
    s.setsockopt(socket.SOL_SOCKET, name, struct.pack("ll", int(secs), int(round((secs % 1) * 1e6))))
timeo(socket.SO_RCVTIMEO, 10)
for i in range(ROUNDS):
    s.sendall(b"ping %03d\n" % i)
    want = b"pong %03d\n" % i
    got = b""
    while len(got) < len(want):
        d = s.recv(64)
        assert d, "eof"
        got += d
    assert got == want, (got, want)
timeo(socket.SO_RCVTIMEO, 0.3)
s.sendall(b"quiet\n")
t = time.monotonic()
try:
    s.recv(64)
    raise SystemExit("recv returned although nothing was sent")
except BlockingIOError as e:
    assert e.errno == errno.EAGAIN, e
el = time.monotonic() - t
assert el >= 0.3, "SO_RCVTIMEO fired after %.3f s" % el
timeo(socket.SO_SNDTIMEO, 0.3)
s.sendall(b"stall\n")
blob = b"x" * (1 << 20)
sent = 0
while True:
    t = time.monotonic()
    try:
        sent += s.send(blob)
    except BlockingIOError as e:
        assert e.errno == errno.EAGAIN, e
        break
    assert sent < 1 << 30, "the send buffer never filled"
el = time.monotonic() - t
assert el >= 0.3, "SO_SNDTIMEO fired after %.3f s" % el
print("timed waits %d" % ROUNDS, flush=True)
"#;

/// The "polls by application calls N" of `NETFOLD_VERBOSE`'s exit report.
fn app_polls(stderr: &str) -> u64 {
    stderr
        .split("polls by application calls ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no poll counts in {stderr}"))
}

fn timeouts(extra: &[&str]) -> Output {
    let net = Net::create();
    let peer = Running::start(net.on_kernel(&["python3", "-u", "-c", TIMEO_PEER, KERNEL, "8091"]));
    peer.wait_for("ready");
    let mut c = net.on_netfold_with(extra, &["python3", "-c", TIMEO_PROGRAM, KERNEL, "8091"]);
    c.env("NETFOLD_VERBOSE", "1");
    let o = output(c);
    ok(&o, "timeout program on netfold");
    o
}

/// SO_RCVTIMEO and SO_SNDTIMEO in INLINE mode: the timed waits are the library's own, which
/// take the device and poll the stack when frames come (so each of the program's timed
/// receives is served by its own poll, not by the fallback thread's); the timeouts fire with
/// EAGAIN, never early.
#[test]
fn timed_waits_polling_inline_take_the_device_and_time_out_with_eagain() {
    if skip(&["python3", "timeout"]) {
        return;
    }
    let o = timeouts(INLINE);
    let out = String::from_utf8_lossy(&o.stdout);
    let waits: u64 = out
        .trim()
        .strip_prefix("timed waits ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no wait count in {out:?}"));
    let polls = app_polls(&String::from_utf8_lossy(&o.stderr));
    assert!(
        polls >= waits,
        "{polls} polls by application calls for {waits} timed waits whose data came during \
         the wait: the waits did not poll the stack themselves"
    );
}

#[test]
fn timed_waits_on_the_driver_thread_time_out_with_eagain() {
    if skip(&["python3", "timeout"]) {
        return;
    }
    timeouts(THREAD);
}

/// The kernel side of the threads test (argv: address, port, mode): an echo server for
/// "conns"; for "epoll", each connection's first byte K asks for 256 KiB of pattern K, then
/// the connection closes.
const THREADS_PEER: &str = r#"
import socket, sys, threading
BULK = 256 * 1024
def pat(n, k):
    return bytes((i * (2 * k + 3) + k) % 251 for i in range(n))
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(64); print("ready", flush=True)
def echo(c):
    while True:
        d = c.recv(65536)
        if not d: break
        c.sendall(d)
    c.close()
def bulk(c):
    k = c.recv(1)[0]
    c.sendall(pat(BULK, k)); c.close()
while True:
    c, _ = l.accept()
    threading.Thread(target=echo if sys.argv[3] == "conns" else bulk, args=(c,), daemon=True).start()
"#;

/// Several threads calling netfold at once: tests/preload/threads.c (compiled here with gcc),
/// each thread on its own connection, then threads sharing one epoll; every byte checked.
fn threads(extra: &[&str]) {
    if skip(&["python3", "timeout", "gcc"]) {
        return;
    }
    let net = Net::create();
    let exe = compile(&net, "threads");
    for (mode, port) in [("conns", "8093"), ("epoll", "8094")] {
        let peer = Running::start(net.on_kernel(&[
            "python3",
            "-u",
            "-c",
            THREADS_PEER,
            KERNEL,
            port,
            mode,
        ]));
        peer.wait_for("ready");
        let o = output(net.on_netfold_with(extra, &[&exe, KERNEL, port, mode]));
        ok(&o, &format!("threads.c {mode} on netfold"));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(&format!("{mode} ok")), "{mode}: {out}");
    }
}

#[test]
fn threads_polling_inline_share_the_stack_and_one_epoll() {
    threads(INLINE);
}

#[test]
fn threads_on_the_driver_thread_share_the_stack_and_one_epoll() {
    threads(THREAD);
}

/// Compiles tests/preload/NAME.c with gcc into the test's directory; the executable's path.
fn compile(net: &Net, name: &str) -> String {
    let exe = net.dir.join(name);
    let src = format!("{}/tests/preload/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let cc = Command::new("gcc")
        .args(["-O2", "-Wall", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run gcc");
    ok(&cc, &format!("gcc {name}.c"));
    exe.display().to_string()
}

/// sendmmsg and recvmmsg (MSG_WAITFORONE, MSG_DONTWAIT) on a netfold TCP socket, and splice
/// between it and a pipe both ways, against a kernel echo server (tests/preload/mmsg.c: the
/// same program passes on the kernel's sockets); every byte checked, and Linux's errors for
/// what splice refuses (EINVAL, ESPIPE, EAGAIN).
fn mmsg_and_splice(extra: &[&str]) {
    if skip(&["python3", "timeout", "gcc"]) {
        return;
    }
    let net = Net::create();
    let exe = compile(&net, "mmsg");
    let peer = Running::start(net.on_kernel(&[
        "python3",
        "-u",
        "-c",
        THREADS_PEER,
        KERNEL,
        "8095",
        "conns",
    ]));
    peer.wait_for("ready");
    let o = output(net.on_netfold_with(extra, &[&exe, KERNEL, "8095"]));
    ok(&o, "mmsg.c on netfold");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("mmsg ok"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn sendmmsg_recvmmsg_and_splice_polling_inline() {
    mmsg_and_splice(INLINE);
}

#[test]
fn sendmmsg_recvmmsg_and_splice_on_the_driver_thread() {
    mmsg_and_splice(THREAD);
}
