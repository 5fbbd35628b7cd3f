//! The sockets `netfold server` serves on and `netfold <test> -H` measures with: the kernel's
//! ([`KernelNet`]), or a netfold stack on a TAP/TUN device or a packet socket driven by
//! `netfold-rt`'s blocking runtime ([`NetfoldNet`], `netfold server --link tap:NAME --addr A/P`,
//! `netfold stream -H HOST --link tap:NAME --addr A/P`). The server's half of every test is
//! written once against [`Net`], the client's against [`ClientNet`].

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// A connected byte stream.
pub trait NetStream: Read + Write + Send + Sized {
    fn clone_stream(&self) -> io::Result<Self>;
    /// Read and write timeouts (None: wait forever).
    fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()>;
    fn set_nodelay_to(&self, on: bool) -> io::Result<()>;
    fn shutdown_write(&self) -> io::Result<()>;
    fn peer(&self) -> Option<SocketAddr>;
    /// The address the peer reached us at (data ports are opened there).
    fn local_ip(&self) -> Option<IpAddr>;
}

/// Listening, accepting and datagram sockets.
pub trait Net: Sync {
    type Stream: NetStream;
    type Listener: Send + Sync;
    type Udp: Send + Sync;
    /// Listens on `ip:port` (0 = any free port); [`Net::accept`] then waits at most `wait`.
    fn listen(
        &self,
        ip: IpAddr,
        port: u16,
        wait: Duration,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<(Self::Listener, u16)>;
    /// The next connection; `WouldBlock` or `TimedOut` when none came within the wait.
    fn accept(&self, l: &Self::Listener) -> io::Result<Self::Stream>;
    /// A datagram socket on `ip` (any free port) whose receive waits at most `wait`.
    fn udp_bind(
        &self,
        ip: IpAddr,
        wait: Duration,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<(Self::Udp, u16)>;
    fn recv_from(&self, u: &Self::Udp, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)>;
    fn send_to(&self, u: &Self::Udp, data: &[u8], to: SocketAddr) -> io::Result<usize>;
}

/// Is this error a wait that ran out (rather than a failure)?
pub fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn set_int_opt(fd: i32, opt: i32, value: usize) {
    let v: libc::c_int = value.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt reads sizeof(c_int) bytes from &v, a live local; a bad fd or option
    // only makes the call fail, which we ignore as netperf does for unsupported sizes.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// SO_SNDBUF / SO_RCVBUF as netperf's -s/-S set them.
pub fn apply_buffers(fd: i32, bufs: (Option<usize>, Option<usize>)) {
    if let Some(s) = bufs.0 {
        set_int_opt(fd, libc::SO_SNDBUF, s);
    }
    if let Some(r) = bufs.1 {
        set_int_opt(fd, libc::SO_RCVBUF, r);
    }
}

/// Bounds accept(2) on `l`: Linux applies a listening socket's SO_RCVTIMEO to accept, which
/// then fails with EAGAIN; a vanished client cannot hold the server.
pub fn set_accept_timeout(l: &TcpListener, d: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: setsockopt reads sizeof(timeval) bytes from &tv, a live local; the fd is owned
    // by `l` for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl NetStream for TcpStream {
    fn clone_stream(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(t)?;
        self.set_write_timeout(t)
    }
    fn set_nodelay_to(&self, on: bool) -> io::Result<()> {
        self.set_nodelay(on)
    }
    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }
    fn peer(&self) -> Option<SocketAddr> {
        self.peer_addr().ok()
    }
    fn local_ip(&self) -> Option<IpAddr> {
        self.local_addr().ok().map(|a| a.ip())
    }
}

/// The kernel's sockets.
pub struct KernelNet;

impl Net for KernelNet {
    type Stream = TcpStream;
    type Listener = TcpListener;
    type Udp = UdpSocket;
    fn listen(
        &self,
        ip: IpAddr,
        port: u16,
        wait: Duration,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<(TcpListener, u16)> {
        let l = TcpListener::bind((ip, port))?;
        apply_buffers(l.as_raw_fd(), bufs);
        set_accept_timeout(&l, wait)?;
        let port = l.local_addr()?.port();
        Ok((l, port))
    }
    fn accept(&self, l: &TcpListener) -> io::Result<TcpStream> {
        l.accept().map(|(s, _)| s)
    }
    fn udp_bind(
        &self,
        ip: IpAddr,
        wait: Duration,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<(UdpSocket, u16)> {
        let s = UdpSocket::bind((ip, 0))?;
        apply_buffers(s.as_raw_fd(), bufs);
        s.set_read_timeout(Some(wait))?;
        let port = s.local_addr()?.port();
        Ok((s, port))
    }
    fn recv_from(&self, u: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        u.recv_from(buf)
    }
    fn send_to(&self, u: &UdpSocket, data: &[u8], to: SocketAddr) -> io::Result<usize> {
        u.send_to(data, to)
    }
}

impl NetStream for netfold_rt::blocking::TcpStream {
    fn clone_stream(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(t)?;
        self.set_write_timeout(t)
    }
    fn set_nodelay_to(&self, on: bool) -> io::Result<()> {
        self.set_nodelay(on)
    }
    fn shutdown_write(&self) -> io::Result<()> {
        netfold_rt::blocking::TcpStream::shutdown_write(self)
    }
    fn peer(&self) -> Option<SocketAddr> {
        self.peer_addr().ok()
    }
    fn local_ip(&self) -> Option<IpAddr> {
        self.local_addr().ok().map(|a| a.ip())
    }
}

/// A netfold stack on a device, driven by its own thread (`netfold-rt`).
pub struct NetfoldNet {
    pub rt: Arc<netfold_rt::Runtime>,
    pub tcp: netfold::tcp::Config,
    /// The device's IP MTU.
    pub mtu: usize,
}

/// Backlog of a netfold listener: every parallel stream of a bidirectional test at once.
const BACKLOG: usize = 2 * super::remote::MAX_STREAMS;

/// `listen(port)`, or with port 0 `listen` on a free port: netfold's listeners take an
/// explicit port, so one is picked from the dynamic range (RFC 6335 §6: 49152-65535),
/// starting where the last pick left off.
fn listen_on_port<L>(
    port: u16,
    mut listen: impl FnMut(u16) -> io::Result<L>,
) -> io::Result<(L, u16)> {
    if port != 0 {
        return Ok((listen(port)?, port));
    }
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    const FIRST: u16 = 49152;
    let span = u16::MAX - FIRST + 1;
    let mut last = None;
    for _ in 0..span {
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % span;
        let p = FIRST + k;
        match listen(p) {
            Ok(l) => return Ok((l, p)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrInUse)))
}

impl Net for NetfoldNet {
    type Stream = netfold_rt::blocking::TcpStream;
    type Listener = (netfold_rt::blocking::TcpListener, Duration);
    type Udp = netfold_rt::blocking::UdpSocket;
    fn listen(
        &self,
        ip: IpAddr,
        port: u16,
        wait: Duration,
        _bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<(Self::Listener, u16)> {
        let (l, port) = listen_on_port(port, |p| {
            self.rt.listen(SocketAddr::new(ip, p), BACKLOG, self.tcp)
        })?;
        Ok(((l, wait), port))
    }
    fn accept(&self, l: &Self::Listener) -> io::Result<Self::Stream> {
        l.0.accept_timeout(l.1).map(|(s, _)| s)
    }
    fn udp_bind(
        &self,
        ip: IpAddr,
        wait: Duration,
        _bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<(Self::Udp, u16)> {
        let s = self.rt.udp_bind(SocketAddr::new(ip, 0))?;
        s.set_read_timeout(Some(wait))?;
        let port = s.local_addr()?.port();
        Ok((s, port))
    }
    fn recv_from(&self, u: &Self::Udp, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        u.recv_from(buf)
    }
    fn send_to(&self, u: &Self::Udp, data: &[u8], to: SocketAddr) -> io::Result<usize> {
        // Any family: an IPv6 peer without an IPv6 address is NetworkUnreachable.
        u.send_to(data, to)
    }
}

/// N netfold stacks, one per AF_XDP queue of an interface ([`netfold_rt::Shards`]): a
/// listener listens on every shard and accepts the connections each shard's queue receives.
pub struct ShardedNet {
    pub shards: Arc<netfold_rt::Shards>,
    pub tcp: netfold::tcp::Config,
}

impl Net for ShardedNet {
    type Stream = netfold_rt::blocking::TcpStream;
    type Listener = (netfold_rt::ShardedListener, Duration);
    type Udp = netfold_rt::blocking::UdpSocket;
    fn listen(
        &self,
        ip: IpAddr,
        port: u16,
        wait: Duration,
        _bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<(Self::Listener, u16)> {
        let (l, port) = listen_on_port(port, |p| {
            self.shards
                .listen(SocketAddr::new(ip, p), BACKLOG, self.tcp)
        })?;
        Ok(((l, wait), port))
    }
    fn accept(&self, l: &Self::Listener) -> io::Result<Self::Stream> {
        l.0.accept_timeout(l.1).map(|(_, s, _)| s)
    }
    fn udp_bind(
        &self,
        _ip: IpAddr,
        _wait: Duration,
        _bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<(Self::Udp, u16)> {
        // A datagram socket lives on one shard, but the peer's datagrams may arrive on any
        // queue: refused rather than losing them.
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "UDP tests are not served with --shards (a socket lives on one shard's queue)",
        ))
    }
    fn recv_from(&self, u: &Self::Udp, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        u.recv_from(buf)
    }
    fn send_to(&self, u: &Self::Udp, data: &[u8], to: SocketAddr) -> io::Result<usize> {
        u.send_to(data, to)
    }
}

/// `shards` netfold stacks at `ip/prefix` on the AF_XDP queues `0..shards` of the interface
/// `xdp:IFNAME[:all]` names (one socket per queue behind one XDP program, the queues sharing
/// ARP and NDP frames), each on its own driver thread. Returns them and a description.
pub fn open_netfold_shards(
    link: &str,
    ip: std::net::Ipv4Addr,
    prefix: u8,
    shards: u16,
    mtu: Option<usize>,
) -> Result<(ShardedNet, String), Box<dyn std::error::Error>> {
    let Some(rest) = link.strip_prefix("xdp:") else {
        return Err(format!(
            "--link {link:?}: --shards needs an AF_XDP interface (xdp:IFNAME[:all])"
        )
        .into());
    };
    if rest.contains('@') {
        return Err(format!(
            "--link {link:?}: with --shards every queue 0..{shards} is used; name no queue"
        )
        .into());
    }
    if shards == 0 {
        return Err("--shards: expected at least 1".into());
    }
    let x = netfold_os::link::parse_xdp(rest)?;
    let base = if x.all {
        netfold_os::xdp::XdpConfig::all()
    } else {
        netfold_os::xdp::XdpConfig::local(&[ip.into()])
    };
    let cfg = netfold_os::xdp::XdpConfig { mtu, ..base };
    let queues = netfold_os::xdpmq::open_queues(&x.ifname, u32::from(shards), cfg)
        .map_err(|e| format!("--link {link}: {e}"))?;
    let mtu = queues[0].socket().mtu();
    let modes: Vec<String> = queues.iter().map(|q| q.socket().describe()).collect();
    let stack = netfold::iface::StackConfig {
        medium: netfold::phy::Medium::Ethernet,
        addr: ip,
        prefix_len: prefix,
        mtu,
        ..netfold::iface::StackConfig::default()
    };
    let tcp = netfold::tcp::Config {
        mss: netfold::wire::tcp::ipv4_mss_for_mtu(mtu),
        ..netfold::tcp::Config::default()
    };
    let n = usize::from(shards);
    let sh = netfold_rt::Shards::start_xdp_queues(stack, queues, netfold_rt::ShardConfig::tap(n))?;
    Ok((
        ShardedNet {
            shards: Arc::new(sh),
            tcp,
        },
        format!(
            "netfold on {link}, {n} shards on {n} queues (mtu {mtu}; {})",
            modes.join("; ")
        ),
    ))
}

/// A connected datagram socket (the client's end of a UDP test).
pub trait ClientUdp: Send + Sync {
    /// Sends one datagram to the connected peer.
    fn send(&self, data: &[u8]) -> io::Result<usize>;
    /// The next datagram from the connected peer, waiting at most the read timeout.
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn set_read_timeout_to(&self, t: Option<Duration>) -> io::Result<()>;
}

/// The client's sockets: connecting streams and datagram sockets to the server.
pub trait ClientNet: Sync {
    type Stream: NetStream;
    type Udp: ClientUdp;
    /// Connects to `to` within `timeout`, with SO_SNDBUF/SO_RCVBUF `bufs` where given.
    fn connect(
        &self,
        to: SocketAddr,
        timeout: Duration,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<Self::Stream>;
    /// A datagram socket on any free local port, connected to `to`.
    fn udp_connect(
        &self,
        to: SocketAddr,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<Self::Udp>;
    /// Whether work for this client runs on threads the test does not start (netfold's driver
    /// thread): its CPU is then counted as the whole process's.
    fn cpu_is_process_wide(&self) -> bool {
        false
    }
}

impl ClientUdp for UdpSocket {
    fn send(&self, data: &[u8]) -> io::Result<usize> {
        UdpSocket::send(self, data)
    }
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        UdpSocket::recv(self, buf)
    }
    fn set_read_timeout_to(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(t)
    }
}

impl ClientNet for KernelNet {
    type Stream = TcpStream;
    type Udp = UdpSocket;
    fn connect(
        &self,
        to: SocketAddr,
        timeout: Duration,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<TcpStream> {
        let c = TcpStream::connect_timeout(&to, timeout)?;
        apply_buffers(c.as_raw_fd(), bufs);
        Ok(c)
    }
    fn udp_connect(
        &self,
        to: SocketAddr,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<UdpSocket> {
        let bind: IpAddr = match to {
            SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
        };
        let c = UdpSocket::bind((bind, 0))?;
        apply_buffers(c.as_raw_fd(), bufs);
        c.connect(to)?;
        Ok(c)
    }
}

/// A netfold datagram socket with a fixed peer: what connect(2) gives a kernel UDP socket
/// (datagrams from anyone else are dropped on receive).
pub struct NetfoldConnectedUdp {
    sock: netfold_rt::blocking::UdpSocket,
    peer: SocketAddr,
}

impl ClientUdp for NetfoldConnectedUdp {
    fn send(&self, data: &[u8]) -> io::Result<usize> {
        self.sock.send_to(data, self.peer)
    }
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let (n, from) = self.sock.recv_from(buf)?;
            if from == self.peer {
                return Ok(n);
            }
        }
    }
    fn set_read_timeout_to(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(t)
    }
}

impl ClientNet for NetfoldNet {
    type Stream = netfold_rt::blocking::TcpStream;
    type Udp = NetfoldConnectedUdp;
    fn connect(
        &self,
        to: SocketAddr,
        timeout: Duration,
        bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<Self::Stream> {
        // -s/-S fix the buffers (and turn auto-tuning off), as SO_SNDBUF/SO_RCVBUF do.
        let cfg = netfold::tcp::Config {
            send_buffer: bufs.0.unwrap_or(self.tcp.send_buffer),
            recv_buffer: bufs.1.unwrap_or(self.tcp.recv_buffer),
            ..self.tcp
        };
        self.rt.connect(to, cfg, Some(timeout))
    }
    fn udp_connect(
        &self,
        to: SocketAddr,
        _bufs: (Option<usize>, Option<usize>),
    ) -> io::Result<NetfoldConnectedUdp> {
        // A socket of the peer's family, on any port (`[::]` is dual-stack).
        let any: IpAddr = match to {
            SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
        };
        let sock = self.rt.udp_bind(SocketAddr::new(any, 0))?;
        Ok(NetfoldConnectedUdp { sock, peer: to })
    }
    fn cpu_is_process_wide(&self) -> bool {
        true
    }
}

/// Two netfold stacks joined by the in-memory pipe (`p`'s MTU, GRO, copy mode and
/// impairments), each driven by its own netfold-rt thread; returns (client, server). This is
/// how local `--stack netfold` runs take -P, --bidir, --interval and udp-rr: the one-thread
/// runners of `bench::memnet` carry one connection, while the client and server halves of
/// `bench::remote` (written once over [`ClientNet`] and [`Net`]) carry any number.
pub fn netfold_pipe_pair(p: &super::Params) -> io::Result<(NetfoldNet, NetfoldNet)> {
    use super::netfold_pipe::{pipe_config, stack_config, tcp_config, CLIENT_ADDR, SERVER_ADDR};
    let (end_c, end_s) = netfold::phy::pipe::Pipe::new(pipe_config(p));
    let open = |addr, mac_last, end: netfold::phy::pipe::PipeEnd| -> io::Result<NetfoldNet> {
        let stack = netfold::iface::Stack::new(netfold::iface::StackConfig {
            gro: p.gro,
            ..stack_config(addr, mac_last, p.mtu, p.copy_mode)
        });
        // The pipe wakes a sleeping driver when a frame arrives; 1 ms bounds a lost wake-up.
        let rt = netfold_rt::Runtime::start(stack, Box::new(end), Duration::from_millis(1))?;
        // A measurement's last bytes do not matter once it is over: the runtime stops at
        // once instead of draining (its peer may be gone already, with our data unread).
        rt.set_drop_drain(Duration::ZERO);
        Ok(NetfoldNet {
            rt: Arc::new(rt),
            tcp: tcp_config(p),
            mtu: p.mtu,
        })
    };
    Ok((open(CLIENT_ADDR, 1, end_c)?, open(SERVER_ADDR, 2, end_s)?))
}

/// A netfold stack at `ip/prefix` (next hop `gateway` for off-link peers) on `link` —
/// `tap:NAME` or `tun:NAME` (created if it does not exist), `packet:IFNAME` (an `AF_PACKET`
/// socket on an existing interface) or `xdp:IFNAME[@QUEUE][:all]` (an AF_XDP socket on one
/// queue of an existing interface, its program redirecting the frames for `ip`) — on its own driver thread. Returns the stack and a
/// description for logs.
pub fn open_netfold(
    link: &str,
    ip: std::net::Ipv4Addr,
    prefix: u8,
    gateway: Option<std::net::Ipv4Addr>,
    mtu: Option<usize>,
) -> Result<(NetfoldNet, String), Box<dyn std::error::Error>> {
    let (dev, mtu): (Box<dyn netfold::phy::Device + Send>, usize) =
        if let Some(ifname) = link.strip_prefix("packet:").filter(|n| !n.is_empty()) {
            let cfg = netfold_os::packet_socket::PacketSocketConfig {
                mtu,
                // One read per frame, not the TPACKET_V3 ring: the ring hands over a block only
                // when it fills or its 1 ms retire timer fires, which made a netfold client's
                // TCP_RR p50 1 ms over a veth (820 trans/s against 8300 without it; the
                // stream was no faster with it either).
                rx_ring: None,
                ..Default::default()
            };
            let dev = netfold_os::packet_socket::PacketSocket::open(ifname, cfg)
                .map_err(|e| format!("opening {link}: {e}"))?;
            let mtu = dev.mtu();
            (Box::new(dev), mtu)
        } else if link.starts_with("xdp:") {
            let cfg = netfold_os::tap::TapConfig {
                mtu,
                ..Default::default()
            };
            let dev = netfold_os::link::Link::open_for(link, cfg, &[ip.into()])
                .map_err(|e| format!("opening {link}: {e}"))?;
            eprintln!("netfold: {}", dev.describe());
            let mtu = dev.mtu();
            (Box::new(dev), mtu)
        } else if ["tap:", "tun:"]
            .iter()
            .any(|p| link.strip_prefix(p).is_some_and(|n| !n.is_empty()))
        {
            let cfg = netfold_os::tap::TapConfig {
                mtu,
                ..Default::default()
            };
            let dev = netfold_os::link::Link::open(link, cfg)
                .map_err(|e| format!("opening {link}: {e}"))?;
            let mtu = dev.mtu();
            (Box::new(dev), mtu)
        } else {
            return Err(format!(
                "--link {link:?}: expected tap:NAME, tun:NAME, packet:IFNAME or \
                     xdp:IFNAME[@QUEUE][:all]"
            )
            .into());
        };
    let stack = netfold::iface::Stack::new(netfold::iface::StackConfig {
        medium: dev.caps().medium,
        addr: ip,
        prefix_len: prefix,
        gateway,
        mtu,
        // tcp_secret: the default, a random key from the OS (RFC 6528 §3).
        ..netfold::iface::StackConfig::default()
    });
    let mss = netfold::wire::tcp::ipv4_mss_for_mtu(mtu);
    let tcp = netfold::tcp::Config {
        mss,
        ..netfold::tcp::Config::default()
    };
    // The driver sleeps in poll(2) on the device; this only bounds a lost wake-up.
    let rt = netfold_rt::Runtime::start(stack, dev, Duration::from_millis(1))?;
    Ok((
        NetfoldNet {
            rt: Arc::new(rt),
            tcp,
            mtu,
        },
        format!("netfold on {link} (mtu {mtu})"),
    ))
}
