//! netfold against the Linux kernel over a real TAP interface (and a veth pair for the packet
//! socket): the kernel's stack sits in a throw-away network namespace at 198.18.0.1/24, netfold
//! at 198.18.0.2/24 in this process. Needs root and /dev/net/tun; without them every test prints
//! `SKIPPED: ...` and passes. Only 198.18.0.0/15 is ever configured; nothing leaves the namespace.
//!
//! The tests run one at a time (a process-wide lock): they share 2 cores with everything else
//! on the machine, and the throughput they print is only meaningful alone.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use netfold::buf::{Csum, PacketBuf, Pool};
use netfold::iface::{Stack, StackConfig};
use netfold::phy::{Device, Medium};
use netfold::tcp;
use netfold::wire::ethernet::EthernetAddress;
use netfold_os::netns::{self, NetNs};
use netfold_os::packet_socket::{PacketSocket, PacketSocketConfig};
use netfold_os::pcap::PcapWriter;
use netfold_os::tap::{Tap, TapConfig};
use netfold_os::tun::Tun;
use netfold_os::xdp::{XdpAttach, XdpBind, XdpConfig, XdpError, XdpMode, XdpSocket};
use netfold_rt::Runtime;

static SERIAL: Mutex<()> = Mutex::new(());

const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const NETFOLD_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const TEN_MB: usize = 10 * 1024 * 1024;
const IO_TIMEOUT: StdDuration = StdDuration::from_secs(60);

fn skip_reason() -> Option<String> {
    // The kernel-side peers: ping(8) and small python3 socket programs.
    netns::unavailable_with(&["ping", "python3"])
}

macro_rules! require_env {
    () => {
        if netns::skip(skip_reason()) {
            return;
        }
    };
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The byte at offset `i` of every test stream (the Python side builds the same).
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Kills a background process on drop (also when an assertion fails first).
struct Reaper(Child);
impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stack_config() -> StackConfig {
    StackConfig {
        mac: EthernetAddress([0x02, 0x6e, 0x66, 0, 0, 2]),
        addr: NETFOLD_IP,
        prefix_len: 24,
        tcp_secret: netfold::tcp::Secret::fixed_for_tests([7; 16]),
        ..StackConfig::default()
    }
}

thread_local! {
    /// The MSS of this test thread's connections (a suite at a larger MTU raises it).
    static MSS: std::cell::Cell<u16> = std::cell::Cell::new(tcp::Config::default().mss);
}

fn tcp_config() -> tcp::Config {
    tcp::Config {
        recv_buffer: 1 << 20,
        send_buffer: 1 << 20,
        mss: MSS.with(|m| m.get()),
        ..tcp::Config::default()
    }
}

/// A namespace with the kernel side of a fresh TAP in it at 198.18.0.1/24.
fn tap_in_ns(offloads: bool) -> (NetNs, Tap) {
    tap_in_ns_with(TapConfig {
        offloads,
        ..TapConfig::default()
    })
}

fn tap_in_ns_with(cfg: TapConfig) -> (NetNs, Tap) {
    let ns = NetNs::create().expect("create netns");
    let tap = Tap::open("nft%d", cfg).expect("open tap");
    ns.adopt(tap.name()).expect("move tap into netns");
    ns.configure(tap.name(), KERNEL_IP, 24)
        .expect("address tap");
    (ns, tap)
}

fn start(dev: Box<dyn Device + Send>) -> Runtime {
    Runtime::start(
        Stack::new(stack_config()),
        dev,
        StdDuration::from_micros(200),
    )
    .expect("runtime")
}

/// Python: connect to HOST:PORT and send N pattern bytes, then close.
const PY_SEND: &str = r#"
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
block = bytes(range(251)) * 64
s = socket.create_connection((host, port), timeout=30)
sent = 0
while sent < n:
    k = min(len(block), n - sent)
    s.sendall(block[:k])
    sent += k
s.shutdown(socket.SHUT_WR)
s.settimeout(30)
while s.recv(65536):
    pass
s.close()
print("sent", sent)
"#;

/// Python: listen on HOST:PORT, print "ready", accept one connection, send N pattern bytes.
const PY_SERVE: &str = r#"
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
block = bytes(range(251)) * 64
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((host, port))
l.listen(1)
l.settimeout(30)
print("ready", flush=True)
c, _ = l.accept()
c.settimeout(30)
sent = 0
while sent < n:
    k = min(len(block), n - sent)
    c.sendall(block[:k])
    sent += k
c.shutdown(socket.SHUT_WR)
while c.recv(65536):
    pass
c.close()
print("sent", sent, flush=True)
"#;

fn read_all(s: &mut impl Read, expect: usize) -> Vec<u8> {
    let mut got = Vec::with_capacity(expect);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        assert!(got.len() <= expect, "more bytes than sent");
    }
    got
}

fn mbps(bytes: usize, t: std::time::Duration) -> f64 {
    bytes as f64 * 8.0 / t.as_secs_f64() / 1e6
}

/// Kernel client -> netfold listener, `len` bytes, checked byte for byte.
fn kernel_to_netfold(ns: &NetNs, rt: &Runtime, port: u16, len: usize, label: &str) {
    let listener = rt
        .listen(SocketAddrV4::new(NETFOLD_IP, port), 4, tcp_config())
        .expect("listen");
    let client = ns
        .command("python3")
        .args(["-c", PY_SEND, &NETFOLD_IP.to_string(), &port.to_string()])
        .arg(len.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python client");
    let mut client = Reaper(client);
    let (mut s, peer) = listener.accept().expect("accept");
    // Timed from the accept: Python's start-up is not the link's.
    let t0 = std::time::Instant::now();
    assert_eq!(peer.ip(), KERNEL_IP);
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let got = read_all(&mut s, len);
    let dt = t0.elapsed();
    assert_eq!(got.len(), len, "{label}: length");
    assert!(got == pattern(len), "{label}: bytes differ");
    drop(s);
    let status = client.0.wait().expect("client exit");
    assert!(status.success(), "{label}: python client failed");
    eprintln!(
        "{label}: kernel -> netfold {} KiB in {:.2?} = {:.0} Mbit/s",
        len >> 10,
        dt,
        mbps(len, dt)
    );
}

/// netfold client -> kernel listener in the namespace, which sends `len` bytes.
fn netfold_from_kernel(ns: &NetNs, rt: &Runtime, port: u16, len: usize, label: &str) {
    let server = ns
        .command("python3")
        .args(["-c", PY_SERVE, &KERNEL_IP.to_string(), &port.to_string()])
        .arg(len.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python server");
    let mut server = Reaper(server);
    let mut line = String::new();
    let out = server.0.stdout.take().expect("stdout");
    let mut out = BufReader::new(out);
    out.read_line(&mut line).expect("server ready line");
    assert_eq!(line.trim(), "ready", "{label}: server did not start");
    let t0 = std::time::Instant::now();
    let mut s = rt
        .connect(
            SocketAddrV4::new(KERNEL_IP, port),
            tcp_config(),
            Some(StdDuration::from_secs(10)),
        )
        .expect("connect to kernel");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let got = read_all(&mut s, len);
    let dt = t0.elapsed();
    assert_eq!(got.len(), len, "{label}: length");
    assert!(got == pattern(len), "{label}: bytes differ");
    s.shutdown_write().expect("shutdown");
    drop(s);
    let status = server.0.wait().expect("server exit");
    assert!(status.success(), "{label}: python server failed");
    eprintln!(
        "{label}: netfold <- kernel {} KiB in {:.2?} = {:.0} Mbit/s",
        len >> 10,
        dt,
        mbps(len, dt)
    );
}

/// Python: listen on HOST:PORT, print "ready", accept one connection, read until EOF and
/// exit 0 only if exactly N pattern bytes arrived.
const PY_SINK: &str = r#"
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((host, port))
l.listen(1)
l.settimeout(30)
print("ready", flush=True)
c, _ = l.accept()
c.settimeout(30)
block = bytes(range(251))
got = 0
ok = True
while True:
    d = c.recv(1 << 20)
    if not d:
        break
    # The pattern restarts every 251 bytes: compare against the block rotated to `got`.
    r = got % 251
    ref = (block[r:] + block[:r]) * (len(d) // 251 + 2)
    if d != ref[:len(d)]:
        ok = False
    got += len(d)
c.close()
print("got", got, ok, flush=True)
sys.exit(0 if ok and got == n else 1)
"#;

/// netfold client -> kernel listener in the namespace, netfold sends `len` bytes (the
/// transmit path: TSO with offloads on, software GSO off).
fn netfold_to_kernel(ns: &NetNs, rt: &Runtime, port: u16, len: usize, label: &str) {
    let server = ns
        .command("python3")
        .args(["-c", PY_SINK, &KERNEL_IP.to_string(), &port.to_string()])
        .arg(len.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python sink");
    let mut server = Reaper(server);
    let out = server.0.stdout.take().expect("stdout");
    let mut out = BufReader::new(out);
    let mut line = String::new();
    out.read_line(&mut line).expect("sink ready line");
    assert_eq!(line.trim(), "ready", "{label}: sink did not start");
    let mut s = rt
        .connect(
            SocketAddrV4::new(KERNEL_IP, port),
            tcp_config(),
            Some(StdDuration::from_secs(10)),
        )
        .expect("connect to kernel");
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let t0 = std::time::Instant::now();
    let data = pattern(len);
    s.write_all(&data).expect("write");
    s.shutdown_write().expect("shutdown");
    s.flush_acked(Some(IO_TIMEOUT))
        .expect("all data acknowledged");
    let dt = t0.elapsed();
    drop(s);
    let status = server.0.wait().expect("sink exit");
    line.clear();
    let _ = out.read_line(&mut line);
    assert!(
        status.success(),
        "{label}: kernel received wrong data: {line}"
    );
    eprintln!(
        "{label}: netfold -> kernel {} KiB in {:.2?} = {:.0} Mbit/s",
        len >> 10,
        dt,
        mbps(len, dt)
    );
}

/// Zero-copy send to the kernel over a TAP with offloads: the stack hands the
/// TAP headers and references to the application's buffers (one `writev` per frame, the kernel
/// copies and sums the payload), so netfold itself copies and checksums no payload byte; the
/// kernel receives the stream intact and every buffer completes, acknowledged.
#[test]
fn tap_zero_copy_send_touches_no_payload_byte() {
    require_env!();
    let _g = lock();
    let label = "tap zero-copy";
    let (ns, tap) = tap_in_ns(true);
    let tap = Arc::new(Mutex::new(tap));
    let rt = start(Box::new(SharedDev(tap.clone())));
    let port = 5011;
    let server = ns
        .command("python3")
        .args(["-c", PY_SINK, &KERNEL_IP.to_string(), &port.to_string()])
        .arg(TEN_MB.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python sink");
    let mut server = Reaper(server);
    let mut out = BufReader::new(server.0.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("sink ready line");
    assert_eq!(line.trim(), "ready");
    let s = rt
        .connect(
            SocketAddrV4::new(KERNEL_IP, port),
            tcp_config(),
            Some(StdDuration::from_secs(10)),
        )
        .expect("connect to kernel");
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let before = rt.with_stack(|st| st.counters());
    let data = netfold::buf::ZcBuf::from(pattern(TEN_MB));
    let t0 = std::time::Instant::now();
    // 64 KiB buffers, each its own completion.
    let mut ids = 0;
    for off in (0..TEN_MB).step_by(65536) {
        ids += s
            .send_zc_all(data.slice(off..off + 65536))
            .expect("send_zc")
            .len();
    }
    s.shutdown_write().expect("shutdown");
    s.wait_zc_released(Some(IO_TIMEOUT)).expect("released");
    let dt = t0.elapsed();
    let done = s.zc_completions().unwrap();
    let mut all = Vec::new();
    done.take(&mut all, usize::MAX);
    assert_eq!(all.len(), ids);
    assert!(all.iter().all(|c| c.acked));
    drop(s);
    let status = server.0.wait().expect("sink exit");
    line.clear();
    let _ = out.read_line(&mut line);
    assert!(
        status.success(),
        "{label}: kernel received wrong data: {line}"
    );
    let c = rt.shutdown().counters();
    let st = tap.lock().unwrap().stats();
    eprintln!(
        "{label}: {} KiB in {dt:.2?} = {:.0} Mbit/s; zc_frames {} zc_bytes {} bytes_copied {} \
         bytes_checksummed {}; device {:?}",
        TEN_MB >> 10,
        mbps(TEN_MB, dt),
        c.zc_frames,
        c.zc_bytes,
        c.bytes_copied - before.bytes_copied,
        c.bytes_checksummed - before.bytes_checksummed,
        st.offload
    );
    assert_eq!(
        c.bytes_copied, before.bytes_copied,
        "no payload byte copied"
    );
    assert_eq!(c.bytes_checksummed, before.bytes_checksummed, "nor summed");
    assert!(c.zc_bytes >= TEN_MB as u64);
    assert_eq!(st.offload.tx_sg_bytes, c.zc_bytes);
    assert_eq!(st.offload.tx_sg_linearized, 0);
    assert_eq!(st.tx_dropped, 0);
    assert_eq!(data.ref_count(), 1, "no reference left");
}

fn ping(ns: &NetNs, label: &str) {
    let out = ns
        .run(
            "ping",
            &["-c", "3", "-i", "0.2", "-W", "2", &NETFOLD_IP.to_string()],
        )
        .expect("run ping");
    assert!(
        out.status.success(),
        "{label}: ping failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn assert_ns_gone(name: &str) {
    let left = netns::list().expect("ip netns list");
    assert!(!left.iter().any(|n| n == name), "namespace {name} leaked");
}

fn tap_suite(cfg: TapConfig, label: &str) {
    let name;
    {
        let (ns, tap) = tap_in_ns_with(cfg);
        name = ns.name().to_owned();
        let tap = Arc::new(Mutex::new(tap));
        let rt = start(Box::new(SharedDev(tap.clone())));
        ping(&ns, label);
        kernel_to_netfold(&ns, &rt, 5001, TEN_MB, label);
        netfold_from_kernel(&ns, &rt, 5002, TEN_MB, label);
        netfold_to_kernel(&ns, &rt, 5007, TEN_MB, label);
        let c = rt.shutdown().counters();
        let st = tap.lock().unwrap().stats();
        eprintln!("{label}: device {st:?}\n{label}: stack tcp {:?}", c.tcp);
        assert_eq!(st.rx_errors, 0);
        assert_eq!(st.tx_dropped, 0);
        assert_eq!(st.offload.rx_bad_checksum, 0);
        assert_eq!(st.offload.rx_malformed, 0);
        if cfg.offloads {
            assert!(st.offload.tx_csum_partial > 0, "no partial checksums sent");
            if cfg.gro {
                assert!(st.offload.rx_gso_frames > 0, "kernel sent no GSO frames");
            } else {
                assert!(st.offload.rx_gso_split_segments > 0, "nothing split");
            }
        } else {
            assert_eq!(
                st.offload,
                Default::default(),
                "offload path used with offloads off"
            );
        }
    }
    assert_ns_gone(&name);
}

/// The TAP suite over a TUN (IP medium, no link header): ping and 10 MB each way, with the
/// same offload expectations.
fn tun_suite(cfg: TapConfig, label: &str) {
    let name;
    {
        let ns = NetNs::create().expect("create netns");
        let tun = Tun::open("nfu%d", cfg).expect("open tun");
        ns.adopt(tun.name()).expect("move tun into netns");
        ns.configure(tun.name(), KERNEL_IP, 24)
            .expect("address tun");
        name = ns.name().to_owned();
        let tun = Arc::new(Mutex::new(tun));
        let stack = Stack::new(StackConfig {
            medium: Medium::Ip,
            ..stack_config()
        });
        let rt = Runtime::start(
            stack,
            Box::new(SharedDev(tun.clone())),
            StdDuration::from_micros(200),
        )
        .expect("runtime");
        ping(&ns, label);
        kernel_to_netfold(&ns, &rt, 5011, TEN_MB, label);
        netfold_from_kernel(&ns, &rt, 5012, TEN_MB, label);
        netfold_to_kernel(&ns, &rt, 5017, TEN_MB, label);
        let c = rt.shutdown().counters();
        let st = tun.lock().unwrap().stats();
        eprintln!("{label}: device {st:?}\n{label}: stack tcp {:?}", c.tcp);
        assert_eq!(st.rx_errors, 0);
        assert_eq!(st.tx_dropped, 0);
        assert_eq!(st.offload.rx_bad_checksum, 0);
        assert_eq!(st.offload.rx_malformed, 0);
        if cfg.offloads {
            assert!(st.offload.tx_csum_partial > 0, "no partial checksums sent");
            assert!(st.offload.tx_gso_frames > 0, "no TSO super-packets sent");
            if cfg.gro {
                assert!(st.offload.rx_gso_frames > 0, "kernel sent no GSO packets");
            } else {
                assert!(st.offload.rx_gso_split_segments > 0, "nothing split");
            }
        } else {
            assert_eq!(
                st.offload,
                Default::default(),
                "offload path used with offloads off"
            );
        }
    }
    assert_ns_gone(&name);
}

#[test]
fn tun_ping_and_10mb_both_ways_offloads_on() {
    require_env!();
    let _g = lock();
    tun_suite(tap_cfg(true, true), "tun offloads on");
}

#[test]
fn tun_ping_and_10mb_both_ways_offloads_off() {
    require_env!();
    let _g = lock();
    tun_suite(tap_cfg(false, false), "tun offloads off");
}

#[test]
fn tun_offloads_on_with_software_gso_split() {
    require_env!();
    let _g = lock();
    tun_suite(tap_cfg(true, false), "tun offloads on, no gro");
}

fn tap_cfg(offloads: bool, gro: bool) -> TapConfig {
    TapConfig {
        offloads,
        gro,
        ..TapConfig::default()
    }
}

#[test]
fn tap_ping_and_10mb_both_ways_offloads_on() {
    require_env!();
    let _g = lock();
    tap_suite(tap_cfg(true, true), "tap offloads on");
}

#[test]
fn tap_ping_and_10mb_both_ways_offloads_off() {
    require_env!();
    let _g = lock();
    tap_suite(tap_cfg(false, false), "tap offloads off");
}

/// Offloads on but GRO refused: kernel super-frames are cut in software (gso_split) before
/// the stack sees them.
#[test]
fn tap_offloads_on_with_software_gso_split() {
    require_env!();
    let _g = lock();
    tap_suite(tap_cfg(true, false), "tap offloads on, no gro");
}

/// No runtime thread: a manual loop polls the stack and sleeps in `Tap::wait` (poll(2) on the
/// descriptor) between rounds, as an event loop would.
#[test]
fn tap_manual_poll_loop_sleeps_in_wait() {
    require_env!();
    let _g = lock();
    let (ns, mut tap) = tap_in_ns(true);
    let mut stack = Stack::new(stack_config());
    let ping = ns
        .command("ping")
        .args(["-c", "3", "-i", "0.2", "-W", "2", &NETFOLD_IP.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn ping");
    let mut ping = Reaper(ping);
    let epoch = std::time::Instant::now();
    let mut wakeups = 0u32;
    let status = loop {
        if let Some(st) = ping.0.try_wait().expect("try_wait") {
            break st;
        }
        assert!(
            epoch.elapsed() < StdDuration::from_secs(20),
            "ping never finished"
        );
        let now = netfold::time::Instant::from_micros(epoch.elapsed().as_micros() as u64);
        stack.poll(now, &mut tap);
        if tap
            .wait(Some(netfold::time::Duration::from_millis(20)))
            .expect("wait")
        {
            wakeups += 1;
        }
    };
    assert!(status.success(), "ping failed");
    let c = stack.counters();
    assert_eq!(c.echo_requests_in, 3);
    assert_eq!(c.icmp_out, 3);
    // Woken by the frames themselves (ARP + 3 echo requests), not only by timeouts.
    assert!(wakeups >= 4, "wakeups {wakeups}");
}

#[test]
fn tap_multi_queue_opens_one_interface() {
    require_env!();
    let _g = lock();
    let qs = Tap::open_queues("nfq%d", 2, TapConfig::default()).expect("multi-queue tap");
    assert_eq!(qs.len(), 2);
    assert_eq!(qs[0].name(), qs[1].name());
    assert_ne!(qs[0].fd(), qs[1].fd());
    let mut qs = qs;
    // Nothing is readable on a fresh, down interface: wait() times out.
    let mut pool = netfold::buf::Pool::new(2048, 4);
    let mut out = Vec::new();
    let now = netfold::time::Instant::ZERO;
    assert_eq!(qs[0].recv_batch(now, &mut pool, &mut out, 8), 0);
    assert!(!qs[1]
        .wait(Some(netfold::time::Duration::from_millis(1)))
        .unwrap());
}

/// tshark reads a capture of offloaded traffic with no errors or warnings.
#[test]
fn pcap_of_offloaded_tap_traffic_is_clean_for_tshark() {
    require_env!();
    let _g = lock();
    if netns::skip(netns::missing_tools(&["tshark"])) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("netfold-tap-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // First as the writer does by default for an offloading device (checksums filled), then
    // with filling off: the second capture must show the partial checksums as errors, which
    // proves the first check can fail.
    for fill in [true, false] {
        let path = dir.join(format!("tap-{fill}.pcap"));
        {
            let (ns, tap) = tap_in_ns(true);
            let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            let mut dev = PcapWriter::new(tap, file).unwrap();
            assert!(dev.fills_checksums());
            dev.set_fill_checksums(fill);
            let rt = start(Box::new(dev));
            ping(&ns, "pcap");
            kernel_to_netfold(&ns, &rt, 5003, 256 * 1024, "pcap");
            netfold_from_kernel(&ns, &rt, 5004, 256 * 1024, "pcap");
            netfold_to_kernel(&ns, &rt, 5009, 256 * 1024, "pcap");
            // Shutting down drops the device, which flushes the BufWriter.
            let _ = rt.shutdown();
        }
        let out = std::process::Command::new("tshark")
            .args(["-r"])
            .arg(&path)
            .args([
                "-o",
                "tcp.check_checksum:TRUE",
                "-o",
                "ip.check_checksum:TRUE",
                "-o",
                "udp.check_checksum:TRUE",
                "-z",
                "expert",
                "-q",
            ])
            .output()
            .expect("run tshark");
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "tshark failed: {err}");
        assert!(!err.contains("cut short"), "{err}");
        if fill {
            eprintln!("tshark expert summary:\n{text}");
            assert!(!text.contains("Errors ("), "tshark errors:\n{text}");
            assert!(!text.contains("Warnings ("), "tshark warnings:\n{text}");
            assert!(
                text.contains("Chats ("),
                "tshark saw no TCP at all:\n{text}"
            );
        } else {
            assert!(
                text.contains("Errors (") && text.contains("hecksum"),
                "unfilled capture should show bad checksums:\n{text}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A device shared with the test, so its counters can be read after the runtime stops.
struct SharedDev<D>(Arc<Mutex<D>>);
impl<D: Device> Device for SharedDev<D> {
    fn caps(&self) -> netfold::phy::DeviceCaps {
        self.0.lock().unwrap().caps()
    }
    fn recv_batch(
        &mut self,
        now: netfold::time::Instant,
        pool: &mut netfold::buf::Pool,
        out: &mut Vec<netfold::buf::PacketBuf>,
        max: usize,
    ) -> usize {
        self.0.lock().unwrap().recv_batch(now, pool, out, max)
    }
    fn recv_lent(
        &mut self,
        now: netfold::time::Instant,
        max: usize,
        f: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<usize> {
        self.0.lock().unwrap().recv_lent(now, max, f)
    }
    fn send_batch(
        &mut self,
        now: netfold::time::Instant,
        pool: &mut netfold::buf::Pool,
        frames: &mut Vec<netfold::buf::PacketBuf>,
    ) {
        self.0.lock().unwrap().send_batch(now, pool, frames)
    }
    fn tx_lend(&mut self, pool: &mut netfold::buf::Pool) {
        self.0.lock().unwrap().tx_lend(pool)
    }
    fn scatter_gather(&self) -> bool {
        self.0.lock().unwrap().scatter_gather()
    }
    fn send_batch_sg(
        &mut self,
        now: netfold::time::Instant,
        pool: &mut netfold::buf::Pool,
        frames: &mut Vec<netfold::buf::PacketBuf>,
        frags: &mut netfold::buf::Frags,
    ) {
        self.0
            .lock()
            .unwrap()
            .send_batch_sg(now, pool, frames, frags)
    }
}

/// AF_PACKET on the root end of a veth pair whose other end is the kernel's, in a namespace.
fn packet_socket_suite(offloads: bool, ring: bool) {
    let label = match (offloads, ring) {
        (true, true) => "packet socket (ring) offloads on",
        (false, true) => "packet socket (ring) offloads off",
        (true, false) => "packet socket (no ring) offloads on",
        (false, false) => "packet socket (no ring) offloads off",
    };
    let name;
    {
        let mut ns = NetNs::create().expect("netns");
        name = ns.name().to_owned();
        let suffix = &name[3..9];
        let outer = format!("nfo{suffix}");
        // Both names unique: the pair is created in the root namespace, where concurrent runs
        // of this test (other worktrees) make theirs too.
        let inner = format!("nfk{suffix}");
        ns.veth_pair(&outer, &inner).expect("veth pair");
        ns.configure(&inner, KERNEL_IP, 24).expect("address veth");
        let sock = PacketSocket::open(
            &outer,
            PacketSocketConfig {
                offloads,
                rx_ring: if ring {
                    PacketSocketConfig::default().rx_ring
                } else {
                    None
                },
                ..PacketSocketConfig::default()
            },
        )
        .expect("packet socket");
        assert!(sock.has_vnet_hdr(), "kernel refused PACKET_VNET_HDR");
        eprintln!("{label}: {outer} mtu {}", sock.mtu());
        assert_eq!(sock.ring_stats().is_some(), ring);
        let sock = Arc::new(Mutex::new(sock));
        let rt = start(Box::new(SharedDev(sock.clone())));
        ping(&ns, label);
        kernel_to_netfold(&ns, &rt, 5005, TEN_MB, label);
        netfold_from_kernel(&ns, &rt, 5006, TEN_MB, label);
        netfold_to_kernel(&ns, &rt, 5008, TEN_MB, label);
        let c = rt.shutdown().counters();
        let sock = sock.lock().unwrap();
        eprintln!(
            "{label}: kernel {:?}, ring {:?}, device {:?}, stack tcp {:?}",
            sock.kernel_stats(),
            sock.ring_stats(),
            sock.stats(),
            c.tcp
        );
    }
    assert_ns_gone(&name);
}

#[test]
fn packet_socket_over_veth_offloads_on() {
    require_env!();
    let _g = lock();
    packet_socket_suite(true, true);
}

#[test]
fn packet_socket_over_veth_without_ring() {
    require_env!();
    let _g = lock();
    packet_socket_suite(true, false);
}

#[test]
fn packet_socket_over_veth_offloads_off() {
    require_env!();
    let _g = lock();
    packet_socket_suite(false, true);
}

/// AF_XDP on the root end of a veth pair whose other end is the kernel's, in a namespace:
/// the program redirects the frames for netfold's address (and ARP for it) to the socket.
/// The kernel's end has transmit checksumming off: XDP sees a veth peer's frames before
/// anything completes a checksum the peer left to the "hardware". `bind` and `attach` pick
/// the modes (the kernel's default first; a veth has no zero-copy). Without AF_XDP or
/// ethtool: `SKIPPED: ...`. `lend`: [`XdpConfig::lend_rx`]; `mtu`: both ends' and the
/// stack's (beyond a chunk, frames span several: multi-buffer).
fn xdp_suite(bind: XdpBind, attach: XdpAttach, lend: bool, mtu: usize, label: &str) {
    if netns::skip(netns::missing_tools(&["ethtool"])) {
        return;
    }
    let name;
    {
        let mut ns = NetNs::create().expect("netns");
        name = ns.name().to_owned();
        let suffix = &name[3..9];
        let outer = format!("nfx{suffix}");
        let inner = format!("nfy{suffix}");
        ns.veth_pair(&outer, &inner).expect("veth pair");
        ns.configure(&inner, KERNEL_IP, 24).expect("address veth");
        let off = ns
            .run("ethtool", &["-K", &inner, "tx", "off"])
            .expect("run ethtool");
        assert!(off.status.success(), "ethtool -K {inner} tx off failed");
        ns.set_mtu(&inner, mtu).expect("mtu");
        let m = mtu.to_string();
        netns::ip(&["link", "set", &outer, "mtu", &m]).expect("mtu");
        let cfg = XdpConfig {
            bind,
            attach,
            lend_rx: lend,
            ..XdpConfig::local(&[NETFOLD_IP.into()])
        };
        let sock = match XdpSocket::open(&outer, cfg) {
            Err(e @ (XdpError::Permission(..) | XdpError::KernelUnsupported(..))) => {
                netns::skip(Some(format!("AF_XDP unavailable: {e}")));
                return;
            }
            r => r.expect("AF_XDP socket"),
        };
        eprintln!("{label}: {} mtu {}", sock.describe(), sock.mtu());
        // A veth has no zero-copy AF_XDP; native XDP it has.
        assert_eq!(sock.mode(), XdpMode::Copy, "{label}");
        let want = if attach == XdpAttach::Auto {
            XdpAttach::Native
        } else {
            attach
        };
        assert_eq!(sock.attach_mode(), want, "{label}");
        let sock = Arc::new(Mutex::new(sock));
        // The MSS of an IPv4 connection at this MTU (MTU - 40).
        MSS.with(|m| m.set(u16::try_from(mtu - 40).expect("mtu")));
        let rt = Runtime::start(
            Stack::new(StackConfig {
                mtu,
                ..stack_config()
            }),
            Box::new(SharedDev(sock.clone())),
            StdDuration::from_micros(200),
        )
        .expect("runtime");
        ping(&ns, label);
        kernel_to_netfold(&ns, &rt, 5005, TEN_MB, label);
        netfold_from_kernel(&ns, &rt, 5006, TEN_MB, label);
        netfold_to_kernel(&ns, &rt, 5008, TEN_MB, label);
        let c = rt.shutdown().counters();
        let sock = sock.lock().unwrap();
        let st = sock.stats();
        eprintln!(
            "{label}: kernel {:?}, device {st:?}, stack tcp {:?}",
            sock.kernel_stats(),
            c.tcp
        );
        // Every frame netfold sent went out whole: nothing dropped, none partial or oversize.
        assert_eq!(st.tx_dropped, 0, "{label}: {st:?}");
        assert_eq!(st.rx_bad_desc, 0, "{label}: {st:?}");
        assert!(
            st.rx_frames > 2 * (TEN_MB as u64) / mtu as u64,
            "{label}: {st:?}"
        );
        assert!(
            st.tx_frames > (TEN_MB as u64) / mtu as u64,
            "{label}: {st:?}"
        );
        assert_eq!(sock.mtu(), mtu, "{label}");
        // Received frames were parsed where they arrived (no byte copied out of the UMEM)
        // but for multi-buffer ones (gathered into one buffer), or, not lent, each was
        // copied out whole. Frames fitting a chunk were built by the stack in the transmit
        // chunk they left from (no byte copied); larger ones were copied into chunks.
        MSS.with(|m| m.set(tcp::Config::default().mss));
        let multi = mtu > netfold_os::xdp::MAX_SINGLE_CHUNK_MTU;
        assert_eq!(st.rx_multi_frames > 0, multi, "{label}: {st:?}");
        assert_eq!(st.tx_multi_frames > 0, multi, "{label}: {st:?}");
        if lend && !multi {
            assert_eq!(st.rx_copied_bytes, 0, "{label}: {st:?}");
            assert_eq!(st.rx_lent, st.rx_frames, "{label}: {st:?}");
        } else if lend {
            assert_eq!(
                st.rx_lent + st.rx_multi_frames,
                st.rx_frames,
                "{label}: {st:?}"
            );
            assert!(st.rx_copied_bytes > 0, "{label}: {st:?}");
            assert!(st.rx_copied_bytes < st.rx_bytes, "{label}: {st:?}");
        } else {
            assert_eq!(st.rx_copied_bytes, st.rx_bytes, "{label}: {st:?}");
            assert_eq!(st.rx_lent, 0, "{label}: {st:?}");
        }
        if multi {
            assert_eq!(st.tx_copied_bytes, st.tx_bytes, "{label}: {st:?}");
            assert_eq!(st.tx_lent, 0, "{label}: {st:?}");
        } else {
            assert_eq!(st.tx_copied_bytes, 0, "{label}: {st:?}");
            assert_eq!(st.tx_lent, st.tx_frames, "{label}: {st:?}");
        }
        let meter = sock.copy_meter().get();
        assert_eq!(
            meter,
            (
                st.rx_copied_bytes,
                st.tx_copied_bytes,
                st.rx_lent,
                st.rx_frames
            ),
            "{label}"
        );
    }
    assert_ns_gone(&name);
}

#[test]
fn xdp_socket_over_veth() {
    require_env!();
    let _g = lock();
    xdp_suite(XdpBind::Auto, XdpAttach::Auto, true, 1500, "af_xdp native");
}

#[test]
fn xdp_socket_over_veth_multi_buffer_frames() {
    require_env!();
    let _g = lock();
    xdp_suite(
        XdpBind::Auto,
        XdpAttach::Auto,
        true,
        9000,
        "af_xdp, MTU 9000",
    );
}

#[test]
fn xdp_socket_over_veth_copying_frames_out() {
    require_env!();
    let _g = lock();
    xdp_suite(
        XdpBind::Auto,
        XdpAttach::Auto,
        false,
        1500,
        "af_xdp native, copied out",
    );
}

#[test]
fn xdp_socket_over_veth_generic() {
    require_env!();
    let _g = lock();
    xdp_suite(
        XdpBind::Copy,
        XdpAttach::Generic,
        true,
        1500,
        "af_xdp generic",
    );
}

/// The program passes what is not netfold's: with netfold (198.18.0.2) and the host's own
/// kernel address (198.18.0.3) on the same veth end in namespace H, the kernel in namespace
/// K (198.18.0.1) on the other end pings both and talks TCP to both: ARP and IPv4 for .2 go
/// to the AF_XDP socket, ARP and IPv4 for .3 to H's kernel.
#[test]
fn xdp_shares_the_interface_with_the_host() {
    require_env!();
    let _g = lock();
    let (host_name, kernel_name);
    {
        let host = NetNs::create().expect("host netns");
        let kernel = NetNs::create().expect("kernel netns");
        host_name = host.name().to_owned();
        kernel_name = kernel.name().to_owned();
        let suffix = &host_name[3..9];
        let (h, k) = (format!("nfh{suffix}"), format!("nfk{suffix}"));
        netns::ip(&["link", "add", &h, "type", "veth", "peer", "name", &k]).expect("veth");
        host.adopt(&h).expect("adopt");
        kernel.adopt(&k).expect("adopt");
        let host_ip = Ipv4Addr::new(198, 18, 0, 3);
        host.configure(&h, host_ip, 24).expect("address host");
        kernel.configure(&k, KERNEL_IP, 24).expect("address kernel");
        if netns::skip(netns::missing_tools(&["ethtool"])) {
            return;
        }
        let off = kernel
            .run("ethtool", &["-K", &k, "tx", "off"])
            .expect("ethtool");
        assert!(off.status.success());
        let ifname = h.clone();
        let sock = host
            .run_in(move || XdpSocket::open(&ifname, XdpConfig::local(&[NETFOLD_IP.into()])))
            .expect("enter netns");
        let sock = match sock {
            Err(e @ (XdpError::Permission(..) | XdpError::KernelUnsupported(..))) => {
                netns::skip(Some(format!("AF_XDP unavailable: {e}")));
                return;
            }
            r => r.expect("AF_XDP socket"),
        };
        let rt = start(Box::new(sock));
        ping(&kernel, "xdp shared");
        let out = kernel
            .run(
                "ping",
                &["-c", "2", "-i", "0.2", "-W", "2", &host_ip.to_string()],
            )
            .expect("ping");
        assert!(
            out.status.success(),
            "the host's own address stopped answering"
        );
        kernel_to_netfold(&kernel, &rt, 5005, 1 << 20, "xdp shared");
        // A kernel listener in H, the kernel's client in K.
        let py_listen = "import socket\n\
                         l=socket.socket(); l.bind(('198.18.0.3',5009)); l.listen(1)\n\
                         l.settimeout(20); print('ready', flush=True)\n\
                         c,_=l.accept(); c.sendall(b'host'*1000); c.close()\n";
        let mut srv = Reaper(
            host.command("python3")
                .args(["-c", py_listen])
                .stdout(Stdio::piped())
                .spawn()
                .expect("python listener"),
        );
        let mut line = String::new();
        BufReader::new(srv.0.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("ready");
        assert_eq!(line.trim(), "ready");
        let got = kernel
            .run(
                "python3",
                &[
                    "-c",
                    "import socket\n\
                     s=socket.create_connection(('198.18.0.3',5009),timeout=20)\n\
                     d=b''\n\
                     while True:\n\
                     \x20   x=s.recv(65536)\n\
                     \x20   if not x: break\n\
                     \x20   d+=x\n\
                     assert d==b'host'*1000, len(d)\n",
                ],
            )
            .expect("python client");
        assert!(
            got.status.success(),
            "TCP to the host's address: {}",
            String::from_utf8_lossy(&got.stderr)
        );
        let c = rt.shutdown().counters();
        assert_eq!(c.tcp.bad_segments, 0);
    }
    assert_ns_gone(&host_name);
    assert_ns_gone(&kernel_name);
}

/// Python: capture (AF_PACKET) the IPv4 frames from MAC 02:6e:66:00:00:99 arriving on IFNAME
/// and print per frame `proto frame_len payload_len checksums_valid`, until a UDP one came.
const PY_CAPTURE: &str = r#"
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
s.settimeout(0.2)
print("ready", flush=True)
def csum(b):
    if len(b) % 2:
        b += b"\0"
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while t >> 16:
        t = (t & 0xffff) + (t >> 16)
    return t
end = time.time() + 10
while time.time() < end:
    try:
        f = s.recv(65536)
    except socket.timeout:
        continue
    if f[6:12] != bytes.fromhex("026e66000099") or f[12:14] != b"\x08\x00":
        continue
    ihl = (f[14] & 15) * 4
    tot = struct.unpack("!H", f[16:18])[0]
    proto = f[23]
    l4 = f[14 + ihl:14 + tot]
    ph = f[26:34] + struct.pack("!BBH", 0, proto, len(l4))
    ok = csum(f[14:14 + ihl]) == 0xffff and csum(ph + l4) == 0xffff
    name = {6: "tcp", 17: "udp"}.get(proto, "other")
    pay = len(l4) - ((l4[12] >> 4) * 4 if proto == 6 else 8)
    print(name, len(f), pay, ok, flush=True)
    if name == "udp":
        break
"#;

/// Ethernet + IPv4 from 198.18.0.2 (MAC ...:99) to 198.18.0.1, protocol `proto`, around
/// transport bytes `l4`; the IPv4 header checksum filled.
fn ipv4_frame(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0x6e, 0x66, 0, 0, 0x99, 0x08, 0x00]);
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 7, 0x40, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&NETFOLD_IP.octets());
    f.extend_from_slice(&KERNEL_IP.octets());
    let c = netfold::wire::checksum::finish(netfold::mem::checksum(&f[14..34]));
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(l4);
    f
}

/// What leaves an AF_XDP socket is a valid frame whatever the stack hands it: a TCP frame
/// larger than the MTU is cut into segments that fit (each with complete checksums), a frame
/// whose checksum was left partial (`Csum::Partial`, the pseudo-header sum in the field) is
/// completed. The kernel's end captures them and checks every checksum.
#[test]
fn xdp_transmit_finishes_what_the_stack_left() {
    require_env!();
    let _g = lock();
    let name;
    {
        let mut ns = NetNs::create().expect("netns");
        name = ns.name().to_owned();
        let suffix = &name[3..9];
        let (outer, inner) = (format!("nfx{suffix}"), format!("nfy{suffix}"));
        ns.veth_pair(&outer, &inner).expect("veth pair");
        ns.configure(&inner, KERNEL_IP, 24).expect("address veth");
        let mut sock = match XdpSocket::open(&outer, XdpConfig::local(&[NETFOLD_IP.into()])) {
            Err(e @ (XdpError::Permission(..) | XdpError::KernelUnsupported(..))) => {
                netns::skip(Some(format!("AF_XDP unavailable: {e}")));
                return;
            }
            r => r.expect("AF_XDP socket"),
        };
        let mut cap = Reaper(
            ns.command("python3")
                .args(["-c", PY_CAPTURE, &inner])
                .stdout(Stdio::piped())
                .spawn()
                .expect("python capture"),
        );
        let mut out = BufReader::new(cap.0.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("ready");
        assert_eq!(line.trim(), "ready");

        // A 9000-byte TCP segment (ACK|PSH, seq 1000) on a 1500-byte link.
        let payload: Vec<u8> = (0..9000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut tcp = vec![
            0x30, 0x39, 0x13, 0x89, 0, 0, 0x03, 0xe8, 0, 0, 0, 1, 0x50, 0x18,
        ];
        tcp.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        tcp.extend_from_slice(&payload);
        let big = PacketBuf::from_slice(&ipv4_frame(6, &tcp));
        // A UDP datagram whose checksum field holds only the pseudo-header sum.
        let mut udp = vec![0x30, 0x39, 0x00, 0x07, 0, 108, 0, 0];
        udp.extend_from_slice(&[0x5a; 100]);
        let ph = netfold::wire::checksum::pseudo_header(
            NETFOLD_IP,
            KERNEL_IP,
            netfold::wire::IpProtocol::Udp,
            108,
        );
        udp[6..8].copy_from_slice(&ph.to_be_bytes());
        let mut partial = PacketBuf::from_slice(&ipv4_frame(17, &udp));
        partial.set_csum(Csum::Partial {
            start: 34,
            offset: 6,
        });
        let mut pool = Pool::new(2048, 64);
        let mut frames = vec![big, partial];
        sock.send_batch(
            netfold::time::Instant::from_micros(0),
            &mut pool,
            &mut frames,
        );
        assert!(frames.is_empty());

        let mut seen = Vec::new();
        for l in out.lines().map_while(Result::ok) {
            seen.push(l);
        }
        let st = sock.stats();
        assert_eq!(st.tx_gso_frames, 1, "{st:?}");
        assert_eq!(st.tx_csum_completed, 1, "{st:?}");
        assert_eq!(st.tx_dropped, 0, "{st:?}");
        let tcp_lines: Vec<Vec<&str>> = seen
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|w| w[0] == "tcp")
            .collect();
        // 9000 bytes at 1460 per segment: 7 segments, all within the MTU, all valid.
        assert_eq!(tcp_lines.len(), 7, "{seen:?}");
        assert_eq!(st.tx_gso_segments, 7, "{st:?}");
        let mut total = 0;
        for w in &tcp_lines {
            assert!(w[1].parse::<usize>().unwrap() <= 1514, "{w:?}");
            assert_eq!(w[3], "True", "bad checksum: {w:?}");
            total += w[2].parse::<usize>().unwrap();
        }
        assert_eq!(total, 9000);
        assert!(
            seen.iter().any(|l| l.starts_with("udp 142 100 True")),
            "{seen:?}"
        );
    }
    assert_ns_gone(&name);
}

/// Zero-copy forced on a veth (which has none) is a typed error, not a copy-mode socket.
#[test]
fn xdp_zero_copy_on_a_veth_is_refused() {
    require_env!();
    let _g = lock();
    let name;
    {
        let mut ns = NetNs::create().expect("netns");
        name = ns.name().to_owned();
        let suffix = &name[3..9];
        let outer = format!("nfx{suffix}");
        ns.veth_pair(&outer, &format!("nfy{suffix}"))
            .expect("veth pair");
        let cfg = XdpConfig {
            bind: XdpBind::ZeroCopy,
            ..XdpConfig::local(&[NETFOLD_IP.into()])
        };
        match XdpSocket::open(&outer, cfg) {
            Err(e @ (XdpError::Permission(..) | XdpError::KernelUnsupported(..))) => {
                netns::skip(Some(format!("AF_XDP unavailable: {e}")));
            }
            Err(XdpError::NoZeroCopy(_)) => {}
            Err(e) => panic!("expected NoZeroCopy, got {e}"),
            Ok(s) => panic!("zero-copy on a veth: {}", s.describe()),
        }
    }
    assert_ns_gone(&name);
}

#[test]
fn namespace_guard_cleans_up_on_panic() {
    require_env!();
    let _g = lock();
    let name = std::sync::Arc::new(Mutex::new(String::new()));
    let n2 = name.clone();
    let r = std::thread::spawn(move || {
        let ns = NetNs::create().unwrap();
        *n2.lock().unwrap() = ns.name().to_owned();
        assert!(ns.configure("lo", Ipv4Addr::new(10, 0, 0, 1), 8).is_err());
        panic!("deliberate");
    })
    .join();
    assert!(r.is_err());
    let name = name.lock().unwrap().clone();
    assert!(name.starts_with("nf-"));
    assert_ns_gone(&name);
    let _ = Write::flush(&mut std::io::stderr());
}
