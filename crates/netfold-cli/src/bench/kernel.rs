//! The Linux kernel's TCP/UDP over loopback: real sockets, client and server on separate threads
//! pinned to separate CPUs, the way netperf runs.

use super::affinity::thread_cpu_seconds;
use super::latency::Histogram;
use super::memnet::BoxErr;
use super::pattern::{Pattern, Verifier};
use super::udp::{stamp, Pacer, Receiver, UdpStats};
use super::{Measurement, Params, Test};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn set_int_opt(fd: i32, level: i32, opt: i32, value: usize) {
    let v: libc::c_int = value.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt reads sizeof(c_int) bytes from &v, a live local; a bad fd or option
    // only makes the call fail, which we ignore as netperf does for unsupported sizes.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fn apply_buffers(fd: i32, p: &Params) {
    if let Some(s) = p.send_buffer {
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, s);
    }
    if let Some(r) = p.recv_buffer {
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, r);
    }
}

/// The loopback interface's MTU, as the kernel reports it.
pub fn lo_mtu() -> usize {
    std::fs::read_to_string("/sys/class/net/lo/mtu")
        .ok()
        .and_then(|m| m.trim().parse().ok())
        .unwrap_or(65536)
}

/// What the server thread measured.
struct Side {
    bytes: u64,
    transactions: u64,
    verified: bool,
    cpu_s: f64,
}

fn source(
    s: &mut TcpStream,
    p: &Params,
    pattern: &Pattern,
    start: Instant,
) -> std::io::Result<u64> {
    let msg = p.send_size.max(1);
    let total = p.bytes.unwrap_or(u64::MAX);
    let deadline = p.duration.map(Duration::from_secs_f64);
    let mut sent = 0u64;
    while sent < total && deadline.is_none_or(|d| start.elapsed() < d) {
        let n = ((total - sent) as usize).min(msg);
        s.write_all(pattern.window(sent, n))?;
        sent += n as u64;
    }
    s.shutdown(Shutdown::Write)?;
    Ok(sent)
}

fn sink(s: &mut TcpStream, p: &Params, pattern: &Pattern) -> std::io::Result<(u64, bool)> {
    let mut buf = vec![0u8; p.recv_size.max(1)];
    let mut v = Verifier::new(pattern);
    let mut bytes = 0u64;
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if p.verify {
            v.check(&buf[..n]);
        }
        bytes += n as u64;
    }
    Ok((bytes, v.verified(bytes)))
}

/// Two network namespaces joined by a veth pair (`--link veth`): the client's end is
/// 198.18.2.1/24, the server's 198.18.2.2/24. Dropping it removes both namespaces.
pub struct Veth {
    a: netfold_os::netns::NetNs,
    b: netfold_os::netns::NetNs,
}

pub const VETH_CLIENT: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 18, 2, 1);
pub const VETH_SERVER: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 18, 2, 2);
/// The veth pair's IPv6 addresses (`--family 6`; RFC 5180's prefix).
pub const VETH_CLIENT6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 1);
pub const VETH_SERVER6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 2);

impl Veth {
    pub fn create(mtu: Option<usize>) -> Result<Veth, BoxErr> {
        Self::create_for(mtu, super::Family::V4)
    }

    /// [`Veth::create`], with the IPv6 addresses too for `--family 6`.
    pub fn create_for(mtu: Option<usize>, family: super::Family) -> Result<Veth, BoxErr> {
        if let Some(why) = netfold_os::netns::unavailable_reason() {
            return Err(format!("--link veth needs network namespaces: {why}").into());
        }
        let a = netfold_os::netns::NetNs::create()?;
        let b = netfold_os::netns::NetNs::create()?;
        let (la, lb) = (format!("{}a", a.name()), format!("{}b", a.name()));
        netfold_os::netns::ip(&["link", "add", &la, "type", "veth", "peer", "name", &lb])?;
        a.adopt(&la)?;
        b.adopt(&lb)?;
        if let Some(m) = mtu {
            a.set_mtu(&la, m)?;
            b.set_mtu(&lb, m)?;
        }
        a.configure(&la, VETH_CLIENT, 24)?;
        b.configure(&lb, VETH_SERVER, 24)?;
        if family == super::Family::V6 {
            a.configure6(&la, VETH_CLIENT6, 64)?;
            b.configure6(&lb, VETH_SERVER6, 64)?;
        }
        Ok(Veth { a, b })
    }

    /// The namespace of the server's end (`server`) or the client's.
    pub fn ns(&self, server: bool) -> &str {
        if server {
            self.b.name()
        } else {
            self.a.name()
        }
    }
}

/// A private network namespace whose loopback has a chosen MTU (`--stack kernel --mtu N`):
/// the host's loopback is shared with the rest of the machine and stays as it is.
pub struct PrivateLo {
    ns: netfold_os::netns::NetNs,
}

impl PrivateLo {
    pub fn create(mtu: usize) -> Result<PrivateLo, BoxErr> {
        if let Some(why) = netfold_os::netns::unavailable_reason() {
            return Err(why.into());
        }
        let ns = netfold_os::netns::NetNs::create()?;
        ns.set_mtu("lo", mtu)?;
        Ok(PrivateLo { ns })
    }
}

/// Moves the calling thread into network namespace `name` (sockets it creates live there).
pub fn enter_netns(name: &str) -> std::io::Result<()> {
    let f = std::fs::File::open(format!("/var/run/netns/{name}"))?;
    // SAFETY: setns takes a namespace file descriptor we own for the duration of the call and
    // only changes the calling thread's network namespace.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Where the two threads run: loopback, or the two ends of a veth pair.
#[derive(Clone, Copy)]
pub enum Where<'a> {
    Lo,
    /// Both threads on the loopback of a private namespace.
    PrivateLo(&'a PrivateLo),
    Veth(&'a Veth),
    /// The two namespaces of the link emulator (`--link emu`), impairments applied there.
    Emu(&'a super::emu::EmuLink),
}

impl Where<'_> {
    fn enter(&self, server: bool) -> std::io::Result<()> {
        match self {
            Where::Lo => Ok(()),
            Where::PrivateLo(p) => enter_netns(p.ns.name()),
            Where::Veth(v) => enter_netns(v.ns(server)),
            Where::Emu(e) => enter_netns(e.ns(server)),
        }
    }
    fn server_ip(&self, family: super::Family) -> std::net::IpAddr {
        use std::net::{Ipv4Addr, Ipv6Addr};
        match (self, family) {
            (Where::Lo | Where::PrivateLo(_), super::Family::V4) => Ipv4Addr::LOCALHOST.into(),
            (Where::Lo | Where::PrivateLo(_), super::Family::V6) => Ipv6Addr::LOCALHOST.into(),
            (Where::Veth(_), super::Family::V4) => VETH_SERVER.into(),
            (Where::Veth(_), super::Family::V6) => VETH_SERVER6.into(),
            // `--family 6` is refused over the emulator (cmd/perf.rs `check_family`).
            (Where::Emu(_), _) => super::emu::SERVER.into(),
        }
    }
}

pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    run_on(p, Where::Lo)
}

/// Runs the test with the client and the server each on its own thread (pinned per `p.pin`),
/// in the namespaces `w` says.
pub fn run_on(p: &Params, w: Where<'_>) -> Result<Measurement, BoxErr> {
    // Over the emulator the impairments are the link's; elsewhere there is nothing to apply
    // them to.
    let emu = matches!(w, Where::Emu(_));
    if p.impair.path() && !emu {
        return Err(
            "--delay/--rate model netfold's in-memory pipe; the kernel stack runs on \
                    loopback or veth and this tool sets up no netem qdisc for it (use --link emu, \
                    netfold's own link emulator, or run `tc qdisc add dev <veth> root netem \
                    delay 10ms rate 1gbit` yourself and use --stack kernel without \
                    --delay/--rate)"
                .into(),
        );
    }
    if p.impair.any() && !emu {
        return Err(
            "impairments apply to the in-memory pipe and to --link emu only, not to the \
             kernel's lo/veth links"
                .into(),
        );
    }
    if p.test == Test::UdpStream {
        return udp_stream(p, w);
    }
    let pattern = Arc::new(Pattern::new(p.send_size.max(p.recv_size).max(1)));
    std::thread::scope(|scope| -> Result<Measurement, BoxErr> {
        let (tx, rx) = std::sync::mpsc::channel::<std::io::Result<SocketAddr>>();
        let pat = &pattern;
        let server = scope.spawn(move || -> std::io::Result<Side> {
            p.pin.apply(true);
            let setup = || -> std::io::Result<TcpListener> {
                w.enter(true)?;
                let l = TcpListener::bind((w.server_ip(p.family), 0))?;
                apply_buffers(l.as_raw_fd(), p);
                Ok(l)
            };
            let listener = match setup() {
                Ok(l) => {
                    let _ = tx.send(l.local_addr());
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(std::io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            let cpu0 = thread_cpu_seconds();
            let r = serve(&listener, p, pat)?;
            Ok(Side {
                cpu_s: thread_cpu_seconds() - cpu0,
                ..r
            })
        });
        let addr = rx.recv().map_err(|_| "kernel server thread died")??;
        let client = scope.spawn(move || -> std::io::Result<(ClientRun, f64, f64)> {
            p.pin.apply(false);
            w.enter(false)?;
            let cpu0 = thread_cpu_seconds();
            let start = Instant::now();
            let run = drive_client(addr, p, pat, start)?;
            Ok((
                run,
                start.elapsed().as_secs_f64(),
                thread_cpu_seconds() - cpu0,
            ))
        });
        let client = client.join().map_err(|_| "kernel client thread panicked")?;
        let srv = server
            .join()
            .map_err(|_| "kernel server thread panicked")??;
        let (run, elapsed, client_cpu) = client?;
        let (sent, transactions) = (run.bytes, run.transactions);
        let (bytes, verified) = match p.test {
            Test::Stream => (
                srv.bytes,
                p.verify.then_some(srv.verified && srv.bytes == sent),
            ),
            Test::Maerts => (sent, p.verify.then_some(srv.verified)),
            _ => (transactions * (p.req_size + p.resp_size) as u64, None),
        };
        let mut details = serde_json::Map::new();
        details.insert("client_cpu_s".into(), client_cpu.into());
        details.insert("server_cpu_s".into(), srv.cpu_s.into());
        let _ = srv.transactions;
        Ok(Measurement {
            bytes,
            transactions,
            elapsed_s: elapsed,
            verified,
            cpu_s: client_cpu + srv.cpu_s,
            details,
            latency: run.latency,
            udp: None,
            passes: None,
        })
    })
}

/// The kernel's server half of a test, run on the calling thread inside namespace `ns`:
/// listens on `ip` (port chosen by the kernel), reports the address through `ready`, serves one
/// test as netperf's netserver would. Returns (bytes, transactions, verified, cpu seconds).
pub fn serve_in_ns(
    ns: &str,
    ip: std::net::IpAddr,
    p: &Params,
    pattern: &Pattern,
    ready: std::sync::mpsc::Sender<std::io::Result<SocketAddr>>,
) -> std::io::Result<(u64, u64, bool, f64)> {
    p.pin.apply(true);
    let setup = || -> std::io::Result<TcpListener> {
        enter_netns(ns)?;
        let l = TcpListener::bind((ip, 0))?;
        apply_buffers(l.as_raw_fd(), p);
        Ok(l)
    };
    let listener = match setup() {
        Ok(l) => {
            let _ = ready.send(l.local_addr());
            l
        }
        Err(e) => {
            let _ = ready.send(Err(std::io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
    };
    let cpu0 = thread_cpu_seconds();
    let r = serve(&listener, p, pattern)?;
    Ok((
        r.bytes,
        r.transactions,
        r.verified,
        thread_cpu_seconds() - cpu0,
    ))
}

/// What the client side did.
struct ClientRun {
    /// Bytes sent (stream) or received (maerts).
    bytes: u64,
    transactions: u64,
    latency: Option<Histogram>,
}

/// Client side.
fn drive_client(
    addr: SocketAddr,
    p: &Params,
    pattern: &Pattern,
    start: Instant,
) -> std::io::Result<ClientRun> {
    let done = |bytes, transactions, latency| ClientRun {
        bytes,
        transactions,
        latency,
    };
    let connect = || -> std::io::Result<TcpStream> {
        let c = TcpStream::connect(addr)?;
        apply_buffers(c.as_raw_fd(), p);
        c.set_nodelay(p.nodelay)?;
        Ok(c)
    };
    let deadline = p.duration.map(Duration::from_secs_f64);
    let limit = p.transactions.unwrap_or(u64::MAX);
    let more = |n: u64| n < limit && deadline.is_none_or(|d| start.elapsed() < d);
    match p.test {
        Test::Stream => {
            let mut c = connect()?;
            let sent = source(&mut c, p, pattern, start)?;
            // Wait for the server to see EOF (it closes after reading everything).
            let mut b = [0u8; 1];
            let _ = c.read(&mut b);
            Ok(done(sent, 0, None))
        }
        Test::Maerts => {
            let mut c = connect()?;
            let (bytes, _) = sink(&mut c, p, pattern)?;
            Ok(done(bytes, 0, None))
        }
        Test::Rr => {
            let mut c = connect()?;
            let req = vec![0x5au8; p.req_size];
            let mut resp = vec![0u8; p.resp_size];
            let mut n = 0;
            let mut lat = Histogram::default();
            while more(n) {
                let t0 = Instant::now();
                c.write_all(&req)?;
                c.read_exact(&mut resp)?;
                lat.record(t0.elapsed());
                n += 1;
            }
            c.shutdown(Shutdown::Write)?;
            Ok(done(0, n, Some(lat)))
        }
        Test::Crr => {
            let req = vec![0x5au8; p.req_size];
            let mut resp = vec![0u8; p.resp_size];
            let mut n = 0;
            let mut lat = Histogram::default();
            while more(n) {
                let t0 = Instant::now();
                let mut c = connect()?;
                c.write_all(&req)?;
                c.read_exact(&mut resp)?;
                drop(c);
                lat.record(t0.elapsed());
                n += 1;
            }
            // Tell the server we are done: a connection that sends nothing.
            drop(connect()?);
            Ok(done(0, n, Some(lat)))
        }
        Test::UdpStream => unreachable!("handled before"),
    }
}

fn serve(listener: &TcpListener, p: &Params, pattern: &Pattern) -> std::io::Result<Side> {
    let mut side = Side {
        bytes: 0,
        transactions: 0,
        verified: true,
        cpu_s: 0.0,
    };
    match p.test {
        Test::Stream => {
            let (mut s, _) = listener.accept()?;
            let (bytes, ok) = sink(&mut s, p, pattern)?;
            side.bytes = bytes;
            side.verified = ok;
        }
        Test::Maerts => {
            let (mut s, _) = listener.accept()?;
            s.set_nodelay(p.nodelay)?;
            side.bytes = source(&mut s, p, pattern, Instant::now())?;
        }
        Test::Rr => {
            let (mut s, _) = listener.accept()?;
            s.set_nodelay(p.nodelay)?;
            let mut req = vec![0u8; p.req_size];
            let resp = vec![0xa5u8; p.resp_size];
            loop {
                match s.read_exact(&mut req) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
                s.write_all(&resp)?;
                side.transactions += 1;
            }
        }
        Test::Crr => {
            let mut req = vec![0u8; p.req_size];
            let resp = vec![0xa5u8; p.resp_size];
            loop {
                let (mut s, _) = listener.accept()?;
                s.set_nodelay(p.nodelay)?;
                match s.read_exact(&mut req) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
                s.write_all(&resp)?;
                // Wait for the client's close, then close (netperf's CRR server).
                let mut b = [0u8; 1];
                let _ = s.read(&mut b);
                side.transactions += 1;
            }
        }
        Test::UdpStream => {}
    }
    Ok(side)
}

/// UDP_STREAM: the client sends datagrams for the duration (paced to `-b` if given); the
/// server counts what arrives. Throughput is what the receiver got; both sides' counts are in
/// [`UdpStats`] (a fast sender on loopback can lose most of what it sends).
fn udp_stream(p: &Params, w: Where<'_>) -> Result<Measurement, BoxErr> {
    let msg = p.send_size.clamp(1, 65507);
    // The clock both sides' stamps are read against.
    let epoch = Instant::now();
    let since = move || epoch.elapsed().as_nanos() as u64;
    std::thread::scope(|scope| -> Result<Measurement, BoxErr> {
        let (tx, rx) = std::sync::mpsc::channel::<std::io::Result<SocketAddr>>();
        let rs = scope.spawn(move || -> std::io::Result<(Receiver, f64)> {
            p.pin.apply(true);
            let setup = || -> std::io::Result<UdpSocket> {
                w.enter(true)?;
                let s = UdpSocket::bind((w.server_ip(p.family), 0))?;
                apply_buffers(s.as_raw_fd(), p);
                s.set_read_timeout(Some(Duration::from_millis(200)))?;
                Ok(s)
            };
            let server = match setup() {
                Ok(s) => {
                    let _ = tx.send(s.local_addr());
                    s
                }
                Err(e) => {
                    let _ = tx.send(Err(std::io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            let cpu0 = thread_cpu_seconds();
            let mut buf = vec![0u8; 65536];
            let mut r = Receiver::default();
            loop {
                match server.recv(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => r.on_datagram(&buf[..n], since()),
                    Err(_) if r.datagrams > 0 => break,
                    Err(_) => {}
                }
            }
            Ok((r, thread_cpu_seconds() - cpu0))
        });
        let addr = rx.recv().map_err(|_| "udp receiver thread died")??;
        let cl = scope.spawn(move || -> std::io::Result<(u64, u64, f64, f64)> {
            p.pin.apply(false);
            w.enter(false)?;
            let c = UdpSocket::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))?;
            apply_buffers(c.as_raw_fd(), p);
            c.connect(addr)?;
            let mut data = vec![0x42u8; msg];
            let deadline = Duration::from_secs_f64(p.duration.unwrap_or(1.0));
            let total = p.bytes.unwrap_or(u64::MAX);
            let pacer = Pacer {
                rate_bps: p.rate_bps,
            };
            let cpu0 = thread_cpu_seconds();
            let start = Instant::now();
            let (mut sent, mut sent_n) = (0u64, 0u64);
            while sent < total && start.elapsed() < deadline {
                let wait = pacer.wait_ns(sent, start.elapsed().as_nanos() as u64);
                if wait > 0 {
                    std::thread::sleep(Duration::from_nanos(wait));
                    continue;
                }
                stamp(&mut data, sent_n, since());
                match c.send(&data) {
                    Ok(n) => {
                        sent += n as u64;
                        sent_n += 1;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                    Err(e) => return Err(e),
                }
            }
            let elapsed = start.elapsed().as_secs_f64();
            let cpu = thread_cpu_seconds() - cpu0;
            // An empty datagram tells the receiver to stop (its timeout covers a lost one).
            let _ = c.send(&[]);
            Ok((sent, sent_n, elapsed, cpu))
        });
        let (sent, sent_n, elapsed, client_cpu) =
            cl.join().map_err(|_| "udp sender panicked")??;
        let (r, server_cpu) = rs.join().map_err(|_| "udp receiver panicked")??;
        let mut details = serde_json::Map::new();
        details.insert("sent_bytes".into(), sent.into());
        details.insert("client_cpu_s".into(), client_cpu.into());
        details.insert("server_cpu_s".into(), server_cpu.into());
        Ok(Measurement {
            bytes: r.bytes,
            transactions: 0,
            elapsed_s: elapsed,
            verified: None,
            cpu_s: client_cpu + server_cpu,
            details,
            latency: None,
            udp: Some(UdpStats {
                sent_datagrams: sent_n,
                sent_bytes: sent,
                received_datagrams: r.datagrams,
                received_bytes: r.bytes,
                jitter_ms: r.jitter_ms(),
            }),
            passes: None,
        })
    })
}
