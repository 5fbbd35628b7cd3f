//! A transparent TCP and UDP forwarder from a TUN device to the kernel's sockets — the core of
//! a tun2socks-style tool, with the kernel's own stack in place of the SOCKS proxy.
//!
//! netfold runs on the TUN in transparent mode (`StackConfig::transparent`): whatever the
//! kernel routes into the TUN, to any address, reaches netfold's transparent listener and
//! transparent UDP socket with its original destination. Each accepted connection is relayed
//! to that destination through a kernel `TcpStream` (bytes copied both ways, each half-close
//! passed on); each UDP flow (client address, original destination) gets a kernel
//! `UdpSocket` connected to the destination, and its replies go back to the client sent from
//! the original destination.
//!
//! ```text
//! cargo run --release -p netfold-os --example tproxy -- nftp0 198.18.90.2/24
//! # then, in the namespace that should use it (the TUN is created in this one):
//! ip addr add 198.18.90.1/24 dev nftp0 && ip link set nftp0 up
//! ip route add 198.18.91.0/24 dev nftp0      # what the forwarder should carry
//! ```
//!
//! Limits of the example: a destination the kernel cannot connect to gets its netfold
//! connection closed (FIN) rather than reset; UDP flows end after 60 s without a reply.
//! `crates/netfold-os/tests/tproxy.rs` runs it across three network namespaces.

use netfold::iface::{Stack, StackConfig};
use netfold::phy::Device;
use netfold_os::tap::TapConfig;
use netfold_os::tun::Tun;
use netfold_rt::{Runtime, TcpStream as NfStream, UdpSocket as NfUdp};
use std::collections::hash_map::{Entry, HashMap};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the kernel gets to connect to an original destination.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A UDP flow without a reply for this long is forgotten.
const UDP_IDLE: Duration = Duration::from_secs(60);
/// How often the accept and UDP loops look at the stop flag.
const TICK: Duration = Duration::from_millis(100);

/// A running forwarder; [`Forwarder::stop`] ends it (connections in flight are cut).
pub struct Forwarder {
    rt: Option<Runtime>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Starts netfold at `addr/prefix_len` on `tun` in transparent mode, and the TCP and UDP
/// forwarding loops. Kernel sockets are opened in the network namespace of the calling
/// thread (the threads started here inherit it).
pub fn start(tun: Tun, addr: Ipv4Addr, prefix_len: u8) -> io::Result<Forwarder> {
    let caps = tun.caps();
    let stack = Stack::new(StackConfig {
        medium: caps.medium,
        addr,
        prefix_len,
        mtu: tun.mtu(),
        transparent: true,
        ..StackConfig::default()
    });
    let rt = Runtime::start(stack, Box::new(tun), Duration::from_millis(1))?;
    let tcp = netfold::tcp::Config {
        recv_buffer: 1 << 20,
        send_buffer: 1 << 20,
        ..netfold::tcp::Config::default()
    };
    let listener = rt.listen_transparent(128, tcp)?;
    let udp = Arc::new(rt.udp_bind_transparent()?);
    udp.set_read_timeout(Some(TICK))?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let st = Arc::clone(&stop);
    threads.push(std::thread::spawn(move || {
        while !st.load(Ordering::Relaxed) {
            match listener.accept_timeout(TICK) {
                Ok((s, _peer)) => {
                    std::thread::spawn(move || relay_tcp(s));
                }
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
        }
    }));
    let st = Arc::clone(&stop);
    threads.push(std::thread::spawn(move || forward_udp(udp, st)));
    Ok(Forwarder {
        rt: Some(rt),
        stop,
        threads,
    })
}

impl Forwarder {
    /// Stops the loops and the runtime; returns the stack (for its counters).
    pub fn stop(mut self) -> Stack {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.rt.take().expect("runtime").shutdown()
    }
}

/// One accepted connection: a kernel connection to its original destination, then bytes
/// copied both ways until both directions have ended.
fn relay_tcp(nf: NfStream) {
    let Ok(dst) = nf.local_addr() else {
        return;
    };
    let Ok(k) = TcpStream::connect_timeout(&dst, CONNECT_TIMEOUT) else {
        // Closing answers the client with FIN; a tun2socks would reset instead.
        return;
    };
    let _ = k.set_nodelay(true);
    let (Ok(nf2), Ok(k2)) = (nf.try_clone(), k.try_clone()) else {
        return;
    };
    // Client -> destination in a second thread; destination -> client here.
    let up = std::thread::spawn(move || {
        let r = copy(&mut &nf2, &mut &k2);
        // The client's FIN becomes ours to the destination; an error ends both directions.
        let _ = k2.shutdown(if r.is_ok() {
            Shutdown::Write
        } else {
            Shutdown::Both
        });
    });
    if copy(&mut &k, &mut &nf).is_ok() {
        let _ = nf.shutdown_write();
    }
    let _ = up.join();
}

/// `io::copy` with a fixed 64 KiB buffer; `Ok` at end of stream.
fn copy(from: &mut impl Read, to: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// The UDP side: one kernel socket per flow (client, original destination), connected to
/// the destination; a thread per flow sends its replies back from the original destination.
fn forward_udp(udp: Arc<NfUdp>, stop: Arc<AtomicBool>) {
    let mut flows: HashMap<(SocketAddr, SocketAddr), (UdpSocket, JoinHandle<()>)> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let (n, client, dst) = match udp.recv_from_to(&mut buf) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                // Forget the flows whose reply thread has ended (idle, or an error).
                flows.retain(|_, (_, t)| !t.is_finished());
                continue;
            }
            Err(_) => break,
        };
        let key = (client, dst);
        if flows.get(&key).is_some_and(|(_, t)| t.is_finished()) {
            flows.remove(&key);
        }
        let (k, _) = match flows.entry(key) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                let Ok(k) = open_flow(dst) else { continue };
                let Ok(k2) = k.try_clone() else { continue };
                let (u, st) = (Arc::clone(&udp), Arc::clone(&stop));
                let t = std::thread::spawn(move || udp_replies(k2, u, client, dst, st));
                v.insert((k, t))
            }
        };
        let _ = k.send(&buf[..n]);
    }
}

fn open_flow(dst: SocketAddr) -> io::Result<UdpSocket> {
    let k = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    k.connect(dst)?;
    k.set_read_timeout(Some(TICK))?;
    Ok(k)
}

/// Replies from `dst` on the kernel socket `k`, sent to `client` from `dst`.
fn udp_replies(
    k: UdpSocket,
    udp: Arc<NfUdp>,
    client: SocketAddr,
    dst: SocketAddr,
    stop: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 65536];
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) && last.elapsed() < UDP_IDLE {
        match k.recv(&mut buf) {
            Ok(n) => {
                last = Instant::now();
                if udp.send_from_to(&buf[..n], dst, client).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            // ICMP port unreachable from the destination (ECONNREFUSED) and the like: the
            // next datagram opens a new flow.
            Err(_) => return,
        }
    }
}

/// `tproxy TUN_NAME ADDR/PREFIX`: creates the TUN and forwards until killed.
#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(name), Some(cidr)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: {} TUN_NAME ADDR/PREFIX", args[0]);
        std::process::exit(2);
    };
    let (addr, prefix) = cidr.split_once('/').ok_or("ADDR/PREFIX expected")?;
    let (addr, prefix): (Ipv4Addr, u8) = (addr.parse()?, prefix.parse()?);
    let tun = Tun::open(
        name,
        TapConfig {
            offloads: true,
            ..TapConfig::default()
        },
    )?;
    println!(
        "tproxy: netfold at {addr}/{prefix} on {} in transparent mode; route traffic into it",
        tun.name()
    );
    let _fwd = start(tun, addr, prefix)?;
    loop {
        std::thread::park();
    }
}
