//! The tokio adapter against the Linux kernel over a real TAP: the kernel's stack sits in a
//! throw-away network namespace at 198.18.0.1/24, netfold at 198.18.0.2/24 in this process,
//! its driver waiting on the TAP's descriptor with tokio's `AsyncFd`. The kernel-side peers are
//! small python3 socket programs. Needs root and /dev/net/tun; without them every test prints a
//! loud SKIP and passes. Only 198.18.0.0/15 is configured; nothing leaves the namespace.

use netfold::iface::{Stack, StackConfig};
use netfold::wire::ethernet::EthernetAddress;
use netfold_os::netns::{self, NetNs};
use netfold_os::tap::{Tap, TapConfig};
use netfold_tokio::{Link, Net, TcpListener, TcpStream, UdpSocket};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Child, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const NETFOLD_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const LEN: usize = 4 << 20;
const LIMIT: Duration = Duration::from_secs(60);

/// One namespace test at a time: they share the machine's cores with everything else.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn skip_reason() -> Option<String> {
    netns::unavailable_with(&["python3"])
}

macro_rules! require_env {
    () => {
        if netns::skip(skip_reason()) {
            return;
        }
    };
}

/// Kills a background process on drop (also when an assertion fails first).
struct Reaper(Child);
impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The byte at offset `i` of every test stream (the Python side builds the same).
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A namespace with the kernel side of a fresh TAP at 198.18.0.1/24, and netfold on the
/// other side as a tokio driver.
fn setup() -> (NetNs, Net) {
    let ns = NetNs::create().expect("create netns");
    let tap = Tap::open("nftk%d", TapConfig::default()).expect("open tap");
    ns.adopt(tap.name()).expect("move tap into netns");
    ns.configure(tap.name(), KERNEL_IP, 24)
        .expect("address tap");
    let stack = Stack::new(StackConfig {
        mac: EthernetAddress([0x02, 0x6e, 0x66, 0, 0, 2]),
        addr: NETFOLD_IP,
        prefix_len: 24,
        tcp_secret: netfold::tcp::Secret::fixed_for_tests([7; 16]),
        ..StackConfig::default()
    });
    let net = Net::spawn(stack, Link::new(tap)).expect("driver");
    (ns, net)
}

/// Python: connect to HOST:PORT, send N pattern bytes (from a thread, so that the echo is
/// read while sending: both sides' buffers are smaller than N), half-close, and exit 0 only if
/// exactly the same N bytes come back.
const PY_ECHO_CLIENT: &str = r#"
import socket, sys, threading
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = (bytes(range(251)) * (n // 251 + 1))[:n]
s = socket.create_connection((host, port), timeout=30)
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
got = bytearray()
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
t.join()
sys.exit(0 if bytes(got) == data else 1)
"#;

/// Python: listen on HOST:PORT, print "ready", accept one connection, send N pattern bytes.
const PY_SERVE: &str = r#"
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = (bytes(range(251)) * (n // 251 + 1))[:n]
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((host, port))
l.listen(1)
l.settimeout(30)
print("ready", flush=True)
c, _ = l.accept()
c.settimeout(30)
c.sendall(data)
c.shutdown(socket.SHUT_WR)
while c.recv(65536):
    pass
"#;

/// Python: a UDP echo server on HOST:PORT for three datagrams; prints "ready" first.
const PY_UDP_ECHO: &str = r#"
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((host, port))
s.settimeout(30)
print("ready", flush=True)
for _ in range(3):
    d, a = s.recvfrom(65536)
    s.sendto(d, a)
"#;

/// Starts a Python peer in the namespace and waits (off the runtime's workers) for its
/// "ready" line.
async fn spawn_ready(ns: &NetNs, script: &'static str, args: Vec<String>) -> Reaper {
    let mut child = Reaper(
        ns.command("python3")
            .arg("-c")
            .arg(script)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn python peer"),
    );
    let out = child.0.stdout.take().expect("stdout");
    let line = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .map(|_| line)
    })
    .await
    .unwrap()
    .expect("peer's ready line");
    assert_eq!(line.trim(), "ready", "python peer did not start");
    child
}

async fn exit_ok(child: Reaper) -> bool {
    tokio::task::spawn_blocking(move || {
        let mut child = child;
        child.0.wait().map(|s| s.success())
    })
    .await
    .unwrap()
    .expect("peer exit")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_client_through_netfold_echo() {
    require_env!();
    let _g = SERIAL.lock().await;
    let (ns, net) = setup();
    let l = TcpListener::bind(&net, SocketAddrV4::new(NETFOLD_IP, 7))
        .await
        .unwrap();
    let client = ns
        .command("python3")
        .args(["-c", PY_ECHO_CLIENT, &NETFOLD_IP.to_string(), "7"])
        .arg(LEN.to_string())
        .spawn()
        .expect("spawn python client");
    let client = Reaper(client);
    tokio::time::timeout(LIMIT, async {
        let (mut s, peer) = l.accept().await.unwrap();
        assert_eq!(peer.ip(), KERNEL_IP);
        let (mut r, mut w) = s.split();
        let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
        w.shutdown().await.unwrap();
        assert_eq!(n, LEN as u64);
    })
    .await
    .expect("echo timed out");
    assert!(exit_ok(client).await, "python client saw a different echo");
    drop(net);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netfold_client_reads_from_kernel_server() {
    require_env!();
    let _g = SERIAL.lock().await;
    let (ns, net) = setup();
    let server = spawn_ready(
        &ns,
        PY_SERVE,
        vec![KERNEL_IP.to_string(), "8000".into(), LEN.to_string()],
    )
    .await;
    let got = tokio::time::timeout(LIMIT, async {
        let mut s = TcpStream::connect(&net, SocketAddrV4::new(KERNEL_IP, 8000))
            .await
            .expect("connect to the kernel");
        assert_eq!(
            s.peer_addr().unwrap(),
            SocketAddrV4::new(KERNEL_IP, 8000).into()
        );
        let mut got = Vec::with_capacity(LEN);
        s.read_to_end(&mut got).await.unwrap();
        s.shutdown().await.unwrap();
        got
    })
    .await
    .expect("download timed out");
    assert_eq!(got.len(), LEN);
    assert!(got == pattern(LEN), "bytes differ");
    assert!(exit_ok(server).await, "python server failed");
    drop(net);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_round_trip_with_kernel() {
    require_env!();
    let _g = SERIAL.lock().await;
    let (ns, net) = setup();
    let server = spawn_ready(&ns, PY_UDP_ECHO, vec![KERNEL_IP.to_string(), "5353".into()]).await;
    let sock = UdpSocket::bind(&net, SocketAddrV4::new(NETFOLD_IP, 0))
        .await
        .unwrap();
    tokio::time::timeout(LIMIT, async {
        for i in 0..3usize {
            let msg = &pattern(200 + i * 500)[i..];
            sock.send_to(msg, SocketAddrV4::new(KERNEL_IP, 5353))
                .await
                .unwrap();
            let mut buf = [0u8; 2048];
            let (n, from) = sock.recv_from(&mut buf).await.unwrap();
            assert_eq!(from, SocketAddrV4::new(KERNEL_IP, 5353).into());
            assert_eq!(&buf[..n], msg);
        }
    })
    .await
    .expect("UDP round trips timed out");
    assert!(exit_ok(server).await, "python UDP server failed");
    drop(net);
}
