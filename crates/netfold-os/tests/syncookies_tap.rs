//! SYN cookies against the Linux kernel over a real TAP: the kernel, in a throw-away network
//! namespace at 198.18.0.1/24, floods netfold's listener (198.18.0.2) with 30,000 SYNs from
//! spoofed sources in 198.18.0.100-199 (addresses nobody owns, so no handshake ever completes),
//! then a real kernel client connects and sends 10 MB. The kernel's TCP must accept our cookie
//! SYN-ACK (options in the TSval) and netfold must rebuild the connection from its ACK.
//! Needs root, /dev/net/tun and python3; without them the test prints `SKIPPED: ...` and passes.
//! Only 198.18.0.0/15 is ever used; nothing leaves the namespace.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Child, Stdio};
use std::time::Duration as StdDuration;

use netfold::iface::{Stack, StackConfig};
use netfold::tcp;
use netfold::wire::ethernet::EthernetAddress;
use netfold_os::netns::{self, NetNs};
use netfold_os::tap::{Tap, TapConfig};
use netfold_rt::Runtime;

const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const NETFOLD_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const FLOOD: usize = 30_000;
const LEN: usize = 10 * 1024 * 1024;
const PORT: u16 = 8080;

/// Python: FLOOD raw SYNs to HOST:PORT from 198.18.0.100-199, each (address, port) new.
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

/// Python: connect to HOST:PORT, send N pattern bytes, close.
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
"#;

fn skip_reason() -> Option<String> {
    netns::unavailable_with(&["python3"])
}

/// Kills a background process on drop (also when an assertion fails first).
struct Reaper(Child);
impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn tap_kernel_client_connects_through_cookies_after_a_30k_syn_flood() {
    if netns::skip(skip_reason()) {
        return;
    }
    let ns = NetNs::create().expect("create netns");
    let tap = Tap::open("nfc%d", TapConfig::default()).expect("open tap");
    ns.adopt(tap.name()).expect("move tap into netns");
    ns.configure(tap.name(), KERNEL_IP, 24)
        .expect("address tap");
    let rt = Runtime::start(
        Stack::new(StackConfig {
            mac: EthernetAddress([0x02, 0x6e, 0x66, 0, 0, 2]),
            addr: NETFOLD_IP,
            prefix_len: 24,
            // tcp_secret: the default, random.
            ..StackConfig::default()
        }),
        Box::new(tap),
        StdDuration::from_micros(200),
    )
    .expect("runtime");
    let cfg = tcp::Config {
        recv_buffer: 1 << 20,
        send_buffer: 1 << 20,
        ..tcp::Config::default()
    };
    let listener = rt
        .listen(SocketAddrV4::new(NETFOLD_IP, PORT), 4, cfg)
        .expect("listen");

    let flood = ns
        .command("python3")
        .args(["-c", PY_FLOOD, &NETFOLD_IP.to_string(), &PORT.to_string()])
        .arg(FLOOD.to_string())
        .stdout(Stdio::null())
        .status()
        .expect("run flood");
    assert!(flood.success(), "flood script failed");
    // Let netfold read what the TAP queue kept of the flood.
    std::thread::sleep(StdDuration::from_millis(300));
    let during = rt.with_stack(|s| s.tcp().stats());
    assert!(during.syncookies_sent > 0, "no cookies: {during:?}");

    let t0 = std::time::Instant::now();
    let client = ns
        .command("python3")
        .args(["-c", PY_SEND, &NETFOLD_IP.to_string(), &PORT.to_string()])
        .arg(LEN.to_string())
        .spawn()
        .expect("spawn python client");
    let mut client = Reaper(client);
    let (mut s, peer) = listener.accept().expect("accept");
    let waited = t0.elapsed();
    assert_eq!(peer.ip(), KERNEL_IP);
    s.set_read_timeout(Some(StdDuration::from_secs(60)))
        .expect("read timeout");
    let mut got = Vec::with_capacity(LEN);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        assert!(got.len() <= LEN, "more bytes than sent");
    }
    assert_eq!(got.len(), LEN);
    assert!(
        got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
        "bytes differ"
    );
    drop(s);
    assert!(client.0.wait().expect("client exit").success());
    let st = rt.with_stack(|s| s.tcp().stats());
    eprintln!(
        "syncookies over TAP: client accepted {waited:.2?} after a {FLOOD}-SYN flood \
         (python start-up included); tcp {st:?}"
    );
    // The kernel client came in through a cookie (its SYN found the SYN queue full).
    assert_eq!(st.syncookies_recv, 1, "{st:?}");
    assert_eq!(st.syncookies_failed, 0, "{st:?}");
    // Without cookies it would wait for the flood's half-open entries to time out (~63 s).
    assert!(waited < StdDuration::from_secs(10), "{waited:?}");
    drop(rt.shutdown());
    let name = ns.name().to_owned();
    drop(ns);
    assert!(
        !netns::list().unwrap_or_default().contains(&name),
        "namespace {name} left behind"
    );
}
