//! The socket calls, in safe Rust: everything below the pointer checks of `lib.rs`. Each call
//! locks the engine, acts on the descriptor table and the stack, announces changes
//! ([`Engine::changed`]) and, for blocking calls, sleeps on the engine's condition variable.

use crate::engine::{deadline_after, Engine, State};
use crate::errno::{io_errno, tcp_errno, udp_errno, R};
use crate::fd::{Kind, Sock, Tcp, Udp, MAX_DATAGRAM, MAX_DATAGRAM_V6};
use netfold_core::iface::{Stack, UdpBindOptions};
use netfold_core::socket::{to_mapped, unmapped, TcpListener, TcpStream};
use netfold_core::tcp;
use netfold_core::time::Instant;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Linux's default somaxconn; larger backlogs are clamped as listen(2) says.
const MAX_BACKLOG: i32 = 4096;
/// RFC 6335 §6 dynamic ports, for bind(port 0) and listen() on an unbound socket.
const EPHEMERAL: std::ops::RangeInclusive<u16> = netfold_core::wire::EPHEMERAL_PORTS;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Rx,
    Tx,
    /// Waiting with an explicit timeout (SO_LINGER), whatever the descriptor's timeouts.
    For(Option<netfold_core::time::Duration>),
}

/// Runs `op` until it stops returning EAGAIN: at once for a non-blocking descriptor (or
/// `dontwait`), else sleeping between attempts until the descriptor's SO_RCVTIMEO/SO_SNDTIMEO
/// (EAGAIN on expiry, as Linux). `op` sets its `bool` when it changed something even though it
/// still has to wait (a partial write): only real changes are announced, so two blocked
/// threads never wake each other in a loop.
pub(crate) fn blocking<T>(
    e: &Engine,
    fd: i32,
    dir: Dir,
    dontwait: bool,
    mut op: impl FnMut(&mut State, Instant, &mut bool) -> R<T>,
) -> R<T> {
    let mut g = e.lock();
    let (nb, timeo) = {
        let s = g.fds.get(fd)?;
        let t = match dir {
            Dir::Rx => s.opts.rcvtimeo,
            Dir::Tx => s.opts.sndtimeo,
            Dir::For(t) => t,
        };
        (s.nonblock || dontwait, t)
    };
    let deadline = deadline_after(e.now(&g), timeo);
    loop {
        if e.stopped() {
            return Err(libc::EBADF);
        }
        let now = e.now(&g);
        let mut progress = false;
        let r = op(&mut g, now, &mut progress);
        let pending = matches!(r, Err(libc::EAGAIN));
        if !pending || progress {
            e.changed(&mut g);
        }
        if !pending || nb {
            return r;
        }
        let (ng, timed_out) = e.wait(g, deadline);
        g = ng;
        if timed_out {
            // One last look: the wake-up that ended the wait may also have made us ready.
            let mut progress = false;
            let now = e.now(&g);
            let r = op(&mut g, now, &mut progress);
            if !matches!(r, Err(libc::EAGAIN)) || progress {
                e.changed(&mut g);
            }
            return r;
        }
    }
}

pub(crate) fn socket(e: &Engine, domain: i32, ty: i32, protocol: i32) -> R<i32> {
    if domain != libc::AF_INET && domain != libc::AF_INET6 {
        return Err(libc::EAFNOSUPPORT);
    }
    let nonblock = ty & libc::SOCK_NONBLOCK != 0;
    // SOCK_CLOEXEC has no meaning for descriptors that exec never sees; accepted and ignored.
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let kind = match base {
        libc::SOCK_STREAM if protocol == 0 || protocol == libc::IPPROTO_TCP => Kind::Tcp(Tcp::Idle),
        libc::SOCK_DGRAM if protocol == 0 || protocol == libc::IPPROTO_UDP => {
            Kind::Udp(Udp::default())
        }
        libc::SOCK_STREAM | libc::SOCK_DGRAM => return Err(libc::EPROTONOSUPPORT),
        _ => return Err(libc::ESOCKTNOSUPPORT),
    };
    let mut g = e.lock();
    let mss = default_mss(&g.stack);
    let mut s = Sock::new(kind, domain, nonblock, mss);
    s.opts.cfg.timestamps = g.tcp_timestamps;
    s.opts.cfg.ecn = g.tcp_ecn;
    s.opts.notsent_lowat_sysctl = g.tcp_notsent_lowat;
    g.fds.insert(s)
}

/// MSS for the interface MTU (RFC 9293 §3.7.1: MTU minus fixed IPv4 and TCP headers). The
/// IPv4 figure for every socket: the engine's MSS setting is one value for both families, and
/// bounds IPv6 connections by the link's IPv6 MSS itself.
fn default_mss(stack: &Stack) -> u16 {
    let mss = stack.tcp_mss(Ipv4Addr::UNSPECIFIED);
    u16::try_from(usize::from(mss).max(88)).unwrap_or(u16::MAX)
}

/// An address as a socket of `family` reports it: IPv4 addresses v4-mapped on AF_INET6
/// (RFC 3493 §3.7; Linux and std report an IPv6 socket's IPv4 peers so).
pub(crate) fn present(family: i32, a: SocketAddr) -> SocketAddr {
    if family == libc::AF_INET6 {
        to_mapped(a)
    } else {
        a
    }
}

/// The unspecified address of the socket's family, port `port`.
pub(crate) fn any_of(family: i32, port: u16) -> SocketAddr {
    if family == libc::AF_INET6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)
    }
}

/// A sockaddr of the socket's own family, as Linux's `inet_bind`, `inet6_bind`,
/// `tcp_v4_connect` and `tcp_v6_connect` require (EAFNOSUPPORT otherwise).
fn check_family(family: i32, a: SocketAddr) -> R<()> {
    match (family, a) {
        (libc::AF_INET, SocketAddr::V4(_)) | (libc::AF_INET6, SocketAddr::V6(_)) => Ok(()),
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// A datagram destination on a socket of `family`: Linux's `udpv6_sendmsg` and
/// `ip6_datagram_connect` take a `sockaddr_in` on an AF_INET6 socket as the v4-mapped
/// address (unless IPV6_V6ONLY: `v6only_err`); an AF_INET socket takes only `sockaddr_in`.
fn udp_dest(family: i32, v6only: bool, a: SocketAddr, v6only_err: i32) -> R<SocketAddr> {
    match (family, a) {
        (libc::AF_INET6, SocketAddr::V4(_)) if v6only => Err(v6only_err),
        (libc::AF_INET6, _) => Ok(to_mapped(a)),
        (_, SocketAddr::V4(_)) => Ok(a),
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// bind(2)'s address check: unspecified (`0.0.0.0`, `[::]`) or ours (the IPv4 address, plain
/// or v4-mapped; an IPv6 address of the interface), else EADDRNOTAVAIL, unless the socket set
/// IP_FREEBIND / IPV6_FREEBIND (`freebind`: any address, as Linux's `inet_addr_valid_or_nonlocal`
/// allows). A v4-mapped address on a v6-only socket is EINVAL (Linux `inet6_bind`).
fn check_local_ip(stack: &Stack, a: SocketAddr, v6only: bool, freebind: bool) -> R<()> {
    let mapped = matches!(a, SocketAddr::V6(v) if v.ip().to_ipv4_mapped().is_some());
    if mapped && v6only {
        return Err(libc::EINVAL);
    }
    if freebind {
        return Ok(());
    }
    let ok = match unmapped(a).ip() {
        IpAddr::V4(ip) => ip.is_unspecified() || ip == stack.config().addr,
        IpAddr::V6(ip) => ip.is_unspecified() || stack.has_ipv6_addr(ip),
    };
    if ok {
        Ok(())
    } else {
        Err(libc::EADDRNOTAVAIL)
    }
}

/// The local TCP address a descriptor occupies (wire form: v4-mapped as IPv4), whether it
/// listens, and its IPV6_V6ONLY, for bind conflicts.
fn tcp_port_of(stack: &Stack, s: &Sock) -> Option<(SocketAddr, bool, bool)> {
    let v6only = s.opts.cfg.v6only;
    match &s.kind {
        Kind::Tcp(Tcp::Listening { l, .. }) => l
            .local_addr(stack)
            .ok()
            .map(|a| (unmapped(a), true, v6only)),
        Kind::Tcp(_) => s.bound.map(|a| (unmapped(a), false, v6only)),
        Kind::Udp(_) | Kind::Epoll(_) => None,
    }
}

/// Two bound addresses (wire form) overlap: in one family, equal or one a wildcard; across
/// families, an IPv6 wildcard that is not v6-only covers every IPv4 address (Linux
/// `ipv6_rcv_saddr_equal`).
fn overlaps(a: SocketAddr, a_v6only: bool, b: SocketAddr, b_v6only: bool) -> bool {
    match (a.ip(), b.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
            a.ip().is_unspecified() || b.ip().is_unspecified() || a.ip() == b.ip()
        }
        (IpAddr::V6(x), IpAddr::V4(_)) => x.is_unspecified() && !a_v6only,
        (IpAddr::V4(_), IpAddr::V6(y)) => y.is_unspecified() && !b_v6only,
    }
}

/// Linux's bind rule: a port is taken by any socket bound to it with an overlapping address,
/// unless both set SO_REUSEADDR and neither listens.
fn tcp_port_free(st: &State, want: SocketAddr, want_v6only: bool, reuse: bool) -> bool {
    let want = unmapped(want);
    !st.fds.iter().any(|o| match tcp_port_of(&st.stack, o) {
        Some((a, listening, a_v6only)) => {
            a.port() == want.port()
                && overlaps(a, a_v6only, want, want_v6only)
                && !(reuse && o.opts.reuseaddr && !listening)
        }
        None => false,
    })
}

fn pick_tcp_port(st: &State, ip: IpAddr, v6only: bool, reuse: bool) -> R<SocketAddr> {
    let n = st.fds.iter().count() as u16;
    let span = EPHEMERAL.end() - EPHEMERAL.start() + 1;
    for k in 0..span {
        let p = EPHEMERAL.start() + (n.wrapping_mul(7919).wrapping_add(k)) % span;
        let a = SocketAddr::new(ip, p);
        if tcp_port_free(st, a, v6only, reuse) {
            return Ok(a);
        }
    }
    Err(libc::EADDRINUSE)
}

pub(crate) fn bind(e: &Engine, fd: i32, addr: SocketAddr) -> R<()> {
    let mut g = e.lock();
    let st = &mut *g;
    let s = st.fds.get(fd)?;
    check_family(s.family, addr)?;
    let v6only = s.opts.cfg.v6only;
    check_local_ip(&st.stack, addr, v6only, s.opts.freebind)?;
    let reuse = s.opts.reuseaddr;
    match &s.kind {
        Kind::Tcp(Tcp::Idle) if s.bound.is_none() => {
            let a = if addr.port() == 0 {
                pick_tcp_port(st, addr.ip(), v6only, reuse)?
            } else if tcp_port_free(st, addr, v6only, reuse) {
                addr
            } else {
                return Err(libc::EADDRINUSE);
            };
            st.fds.get_mut(fd)?.bound = Some(a);
            Ok(())
        }
        Kind::Udp(u) if u.h.is_none() => {
            let pmtu_disc = s.opts.pmtu_disc;
            let h = st
                .stack
                .udp_bind_with(addr, UdpBindOptions { v6only })
                .map_err(udp_errno)?;
            st.stack
                .udp_set_pmtu_disc(h, pmtu_disc)
                .map_err(udp_errno)?;
            if let Kind::Udp(u) = &mut st.fds.get_mut(fd)?.kind {
                u.h = Some(h);
            }
            Ok(())
        }
        _ => Err(libc::EINVAL),
    }
}

pub(crate) fn listen(e: &Engine, fd: i32, backlog: i32) -> R<()> {
    let mut g = e.lock();
    let st = &mut *g;
    let s = st.fds.get(fd)?;
    match &s.kind {
        Kind::Tcp(Tcp::Idle) => {}
        // listen() again only changes the backlog on Linux; the engine fixes it at creation.
        Kind::Tcp(Tcp::Listening { .. }) => return Ok(()),
        Kind::Tcp(Tcp::Stream(_)) => return Err(libc::EINVAL),
        Kind::Udp(_) => return Err(libc::EOPNOTSUPP),
        Kind::Epoll(_) => return Err(libc::ENOTSOCK),
    }
    let local = match s.bound {
        Some(a) => a,
        // Linux binds an unbound listener to an ephemeral port (listen(2) "autobind"), on the
        // family's wildcard (`[::]`, dual-stack unless IPV6_V6ONLY, for AF_INET6).
        None => {
            let any = any_of(s.family, 0).ip();
            pick_tcp_port(st, any, s.opts.cfg.v6only, s.opts.reuseaddr)?
        }
    };
    let cfg = s.opts.tcp_config();
    let backlog = usize::try_from(backlog.clamp(1, MAX_BACKLOG)).unwrap_or(1);
    let l = TcpListener::bind(&mut st.stack, local, backlog, cfg).map_err(|e| io_errno(&e))?;
    if let Some(key) = s.opts.fastopen_key {
        let _ = st
            .stack
            .tcp_mut()
            .set_listener_fastopen_key(l.handle(), Some(key));
    }
    let s = st.fds.get_mut(fd)?;
    s.bound = Some(local);
    s.kind = Kind::Tcp(Tcp::Listening {
        l,
        ready: Default::default(),
        backlog,
    });
    e.changed(st);
    Ok(())
}

/// Moves established connections from the engine's accept queue to the descriptor's.
fn drain_accept(stack: &mut Stack, s: &mut Sock) {
    if let Kind::Tcp(Tcp::Listening { l, ready, backlog }) = &mut s.kind {
        while ready.len() < *backlog {
            match l.accept(stack) {
                Ok(c) => ready.push_back(c),
                Err(_) => break,
            }
        }
    }
}

pub(crate) fn accept(e: &Engine, fd: i32) -> R<(i32, SocketAddr)> {
    accept_opt(e, fd, false)
}

/// [`accept`]; `dontwait` returns EAGAIN at once whatever the descriptor's O_NONBLOCK (what
/// `nf_accept_any` needs to look at every shard's listener in turn).
pub(crate) fn accept_opt(e: &Engine, fd: i32, dontwait: bool) -> R<(i32, SocketAddr)> {
    blocking(e, fd, Dir::Rx, dontwait, |st, _now, _| {
        let s = st.fds.get_mut(fd)?;
        if !matches!(s.kind, Kind::Tcp(Tcp::Listening { .. })) {
            return Err(libc::EINVAL);
        }
        drain_accept(&mut st.stack, s);
        let (opts, family) = (s.opts, s.family);
        let Kind::Tcp(Tcp::Listening { ready, .. }) = &mut s.kind else {
            return Err(libc::EINVAL);
        };
        let (ts, peer) = ready.pop_front().ok_or(libc::EAGAIN)?;
        // Accepted sockets inherit the listener's options but not O_NONBLOCK (accept(2)).
        let mut ns = Sock::new(Kind::Tcp(Tcp::Stream(ts)), family, false, opts.cfg.mss);
        ns.opts = opts;
        ns.bound = ts.local_addr(&st.stack).ok();
        match st.fds.insert(ns) {
            Ok(nfd) if crate::timestamp::wanted(&opts) => {
                let now = e.now(st);
                crate::timestamp::enable(st, nfd, now);
                Ok((nfd, present(family, peer)))
            }
            // An AF_INET6 listener's IPv4 peers come v4-mapped from the stack already.
            Ok(nfd) => Ok((nfd, present(family, peer))),
            Err(err) => {
                // Table full: the connection stays queued for a later accept (as on Linux).
                if let Ok(Sock {
                    kind: Kind::Tcp(Tcp::Listening { ready, .. }),
                    ..
                }) = st.fds.get_mut(fd)
                {
                    ready.push_front((ts, peer));
                }
                Err(err)
            }
        }
    })
}

/// Moves a connection error (TCP) or an ICMP error reported to a connected datagram socket
/// (UDP) from the engine into SO_ERROR; returns the TCP connection state.
pub(crate) fn refresh(stack: &mut Stack, s: &mut Sock) -> Option<tcp::State> {
    if let Kind::Udp(Udp { h: Some(h), .. }) = &s.kind {
        if let Ok(Some(err)) = stack.udp_take_error(*h) {
            s.so_error = Some(udp_errno(err));
        }
        return None;
    }
    let Kind::Tcp(Tcp::Stream(ts)) = &s.kind else {
        return None;
    };
    let h = ts.handle();
    if let Ok(Some(err)) = stack.tcp_mut().take_error(h) {
        s.so_error = Some(tcp_errno(err));
    }
    Some(stack.tcp().state(h).unwrap_or(tcp::State::Closed))
}

fn is_synchronized(st: tcp::State) -> bool {
    !matches!(
        st,
        tcp::State::SynSent | tcp::State::SynReceived | tcp::State::Closed | tcp::State::Listen
    )
}

/// The socket's UDP handle, binding it to an ephemeral port first if needed (with the
/// IP_MTU_DISCOVER mode set before the bind).
fn ensure_udp_bound(
    stack: &mut Stack,
    u: &mut Udp,
    family: i32,
    opts: &crate::fd::Opts,
) -> R<netfold_core::iface::UdpHandle> {
    let pmtu_disc = opts.pmtu_disc;
    match u.h {
        Some(h) => Ok(h),
        None => {
            let v6only = opts.cfg.v6only;
            let h = stack
                .udp_bind_with(any_of(family, 0), UdpBindOptions { v6only })
                .map_err(udp_errno)?;
            stack.udp_set_pmtu_disc(h, pmtu_disc).map_err(udp_errno)?;
            u.h = Some(h);
            Ok(h)
        }
    }
}

pub(crate) fn connect(e: &Engine, fd: i32, remote: SocketAddr) -> R<()> {
    {
        let mut g = e.lock();
        let now = e.now(&g);
        let st = &mut *g;
        let s = st.fds.get_mut(fd)?;
        let state = refresh(&mut st.stack, s);
        let family = s.family;
        match &mut s.kind {
            Kind::Udp(u) => {
                let remote = udp_dest(family, s.opts.cfg.v6only, remote, libc::EAFNOSUPPORT)?;
                let h = ensure_udp_bound(&mut st.stack, u, family, &s.opts)?;
                // The engine reports ICMP errors about datagrams to the peer (udp(7)).
                st.stack.udp_connect(h, Some(remote)).map_err(udp_errno)?;
                u.peer = Some(remote);
                return Ok(());
            }
            Kind::Tcp(Tcp::Listening { .. }) => return Err(libc::EISCONN),
            Kind::Tcp(Tcp::Stream(ts)) => match state {
                // Linux `__inet_stream_connect`: a socket still SS_CONNECTING whose handshake
                // completed becomes SS_CONNECTED with this call, which returns 0.
                Some(st) if is_synchronized(st) && s.connect_pending => {
                    s.connect_pending = false;
                    return Ok(());
                }
                Some(st) if is_synchronized(st) => return Err(libc::EISCONN),
                Some(tcp::State::Closed) | None => {
                    // A failed attempt: report its error once, then allow a new attempt.
                    if let Some(err) = s.so_error.take() {
                        return Err(err);
                    }
                    let _ = ts.abort(&mut g.stack);
                    let s = g.fds.get_mut(fd)?;
                    s.kind = Kind::Tcp(Tcp::Idle);
                    drop(g);
                    return connect(e, fd, remote);
                }
                _ if s.nonblock => return Err(libc::EALREADY),
                _ => {}
            },
            Kind::Epoll(_) => return Err(libc::ENOTSOCK),
            // Linux `__inet_stream_connect`: a socket whose TCP_FASTOPEN_CONNECT connect()
            // is deferred (SS_CONNECTING with `defer_connect`) answers EISCONN.
            Kind::Tcp(Tcp::Idle) if s.fastopen_deferred.is_some() => return Err(libc::EISCONN),
            Kind::Tcp(Tcp::Idle) => {
                check_family(family, remote)?;
                if unmapped(remote).ip().is_unspecified() || remote.port() == 0 {
                    return Err(libc::EINVAL);
                }
                // The source: the bound address, or the stack's for the peer's family (an
                // IPv6 peer without an IPv6 address: ENETUNREACH at once, as Linux without a
                // route).
                let local = match s.bound {
                    Some(a) if unmapped(a).ip().is_unspecified() => {
                        let mut l = st.stack.tcp_local_for(remote).map_err(tcp_errno)?;
                        l.set_port(a.port());
                        l
                    }
                    Some(a) => a,
                    None => st.stack.tcp_local_for(remote).map_err(tcp_errno)?,
                };
                let cfg = s.opts.tcp_config();
                // TCP_FASTOPEN_CONNECT (Linux `tcp_fastopen_defer_connect`): with a cookie
                // for the server, connect() returns at once and the SYN leaves with the
                // first write's data; without, the SYN asks for a cookie now.
                if s.opts.fastopen_connect {
                    let tcp = st.stack.tcp();
                    if tcp.fastopen() & netfold_core::tcp::fastopen::CLIENT_ENABLE != 0
                        && tcp.fastopen_cookie_cached(unmapped(remote).ip())
                    {
                        s.fastopen_deferred = Some(remote);
                        e.changed(st);
                        return Ok(());
                    }
                }
                let h = if s.opts.fastopen_connect {
                    st.stack
                        .tcp_mut()
                        .connect_fastopen(now, local, remote, cfg, &[])
                        .map(|(h, _)| h)
                } else {
                    st.stack.tcp_mut().connect(now, local, remote, cfg)
                }
                .map_err(tcp_errno)?;
                s.kind = Kind::Tcp(Tcp::Stream(TcpStream::from_handle(h)));
                let nb = s.nonblock;
                s.connect_pending = nb;
                e.changed(st);
                if nb {
                    return Err(libc::EINPROGRESS);
                }
            }
        }
    }
    let r = blocking(e, fd, Dir::Tx, false, |st, _now, _| {
        let s = st.fds.get_mut(fd)?;
        let state = refresh(&mut st.stack, s);
        if let Some(err) = s.so_error.take() {
            return Err(err);
        }
        match state {
            Some(tcp::State::SynSent | tcp::State::SynReceived) => Err(libc::EAGAIN),
            Some(st) if is_synchronized(st) => Ok(()),
            _ => Err(libc::ECONNABORTED),
        }
    });
    // SO_SNDTIMEO expired: the attempt goes on in the background (Linux says EINPROGRESS).
    r.map_err(|err| {
        if err == libc::EAGAIN {
            libc::EINPROGRESS
        } else {
            err
        }
    })
}

/// `bufs` without the first `skip` bytes.
fn skip_mut<'a>(bufs: &'a mut [&mut [u8]], mut skip: usize) -> Vec<&'a mut [u8]> {
    let mut v = Vec::with_capacity(bufs.len());
    for b in bufs.iter_mut() {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        v.push(&mut b[skip..]);
        skip = 0;
    }
    v
}

fn skip_ref<'a>(bufs: &[&'a [u8]], mut skip: usize) -> Vec<&'a [u8]> {
    let mut v = Vec::with_capacity(bufs.len());
    for b in bufs {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        v.push(&b[skip..]);
        skip = 0;
    }
    v
}

/// What a receive returned.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    pub(crate) len: usize,
    pub(crate) from: Option<SocketAddr>,
    /// UDP: the datagram was longer than the buffers (MSG_TRUNC).
    pub(crate) truncated: bool,
    /// UDP: the datagram's full length.
    pub(crate) full_len: usize,
    /// TCP with TCP_INQ on: the bytes left to read after this call, for the TCP_CM_INQ
    /// control message recvmsg adds (Linux `tcp_inq_hint`).
    pub(crate) inq: Option<i32>,
}

/// SO_RCVLOWAT in force on a connection: at most what its receive buffer can hold, since
/// Linux grows the buffer to fit the mark (`tcp_set_rcvlowat`) and netfold does not, so a
/// larger mark could never be reached.
fn rcvlowat(stack: &Stack, s: &Sock) -> usize {
    let cap = match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => stack
            .tcp()
            .conn_info(ts.handle())
            .map_or(usize::MAX, |i| i.recv_buffer),
        _ => usize::MAX,
    };
    s.opts.rcvlowat.min(cap).max(1)
}

/// Linux `tcp_inq_hint`: what is still queued to read; once the peer's FIN has arrived an
/// empty queue reads as 1, so that the application reads on and sees the end of stream.
fn inq_hint(stack: &Stack, s: &Sock) -> Option<i32> {
    use tcp::State as S;
    if !s.opts.inq {
        return None;
    }
    let Kind::Tcp(Tcp::Stream(ts)) = &s.kind else {
        return None;
    };
    let h = ts.handle();
    let tcp = stack.tcp();
    let queued = tcp.recv_queue(h).unwrap_or(0);
    let fin = matches!(
        tcp.state(h),
        Ok(S::CloseWait | S::LastAck | S::Closing | S::TimeWait | S::Closed) | Err(_)
    );
    Some(if queued == 0 && fin {
        1
    } else {
        i32::try_from(queued).unwrap_or(i32::MAX)
    })
}

/// One non-blocking TCP receive into `bufs`: Ok(0) only at end of stream (or empty buffers).
///
/// After shutdown(SHUT_RD) what is queued (and what still arrives) is returned as usual, and
/// an empty queue reads as end of file instead of EAGAIN: Linux's RCV_SHUTDOWN stops a read
/// from waiting, not from taking queued data (`tcp_recvmsg_locked`).
fn tcp_recv_once(stack: &mut Stack, s: &mut Sock, bufs: &mut [&mut [u8]]) -> R<usize> {
    let h = match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => ts.handle(),
        // A deferred Fast Open connect has nothing yet, as a connecting socket.
        Kind::Tcp(Tcp::Idle) if s.fastopen_deferred.is_some() => return Err(libc::EAGAIN),
        _ => return Err(libc::ENOTCONN),
    };
    let mut total = 0;
    let mut eof = bufs.iter().all(|b| b.is_empty());
    for b in bufs.iter_mut().filter(|b| !b.is_empty()) {
        match stack.tcp_mut().recv(h, b) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => {
                total += n;
                if n < b.len() {
                    break;
                }
            }
            Err(tcp::Error::WouldBlock) => break,
            Err(err) if total == 0 => return Err(tcp_errno(err)),
            Err(err) => {
                // Data first; the error is reported by the next call.
                s.so_error = Some(tcp_errno(err));
                break;
            }
        }
    }
    // A pending error (SO_ERROR) comes after the data queued before it, as Linux
    // `tcp_recvmsg_locked` reports `sk_err` only when it copied nothing: a connection reset
    // with data unread yields the data, then ECONNRESET, then end of file.
    if total == 0 {
        if let Some(err) = s.so_error.take() {
            return Err(err);
        }
    }
    if total == 0 && !eof && !s.shut_rd {
        return Err(libc::EAGAIN);
    }
    Ok(total)
}

/// One non-blocking TCP peek (recv with MSG_PEEK) into `bufs`: the bytes copied and whether
/// the stream ended after them. Nothing is consumed; EAGAIN when nothing is queued.
fn tcp_peek_once(stack: &mut Stack, s: &mut Sock, bufs: &mut [&mut [u8]]) -> R<(usize, bool)> {
    let h = match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => ts.handle(),
        _ => return Err(libc::ENOTCONN),
    };
    if let Some(err) = s.so_error.take() {
        return Err(err);
    }
    let want: usize = bufs.iter().map(|b| b.len()).sum();
    if want == 0 {
        return Ok((0, false));
    }
    // The engine peeks into one contiguous buffer; scatter it over the caller's.
    let mut tmp = vec![0u8; want.min(stack.tcp().recv_queue(h).unwrap_or(0).max(1))];
    let n = match stack.tcp().peek(h, &mut tmp) {
        Ok(0) => return Ok((0, true)),
        // Shut for reading: an empty queue is the end (as `tcp_recv_once`).
        Err(tcp::Error::WouldBlock) if s.shut_rd => return Ok((0, true)),
        Ok(n) => n,
        Err(err) => return Err(tcp_errno(err)),
    };
    let mut off = 0;
    for b in bufs.iter_mut() {
        let k = (n - off).min(b.len());
        b[..k].copy_from_slice(&tmp[off..off + k]);
        off += k;
        if off == n {
            break;
        }
    }
    // Nothing more can arrive once the peer's FIN is in (or the connection is gone).
    use tcp::State as S;
    let ended = !matches!(
        stack.tcp().state(h),
        Ok(S::SynSent | S::SynReceived | S::Established | S::FinWait1 | S::FinWait2)
    );
    Ok((n, ended))
}

/// Takes the next datagram into the descriptor's stash (if none is there yet).
fn udp_fill_stash(stack: &mut Stack, u: &mut Udp) -> R<()> {
    if u.stash.is_some() {
        return Ok(());
    }
    let h = u.h.ok_or(libc::EAGAIN)?;
    let mut tmp = vec![0u8; MAX_DATAGRAM_V6];
    loop {
        let (n, from) = stack.udp_recv_from(h, &mut tmp).map_err(udp_errno)?;
        // A connected UDP socket only hears its peer (connect(2)).
        if u.peer.is_some_and(|p| p != from) {
            continue;
        }
        tmp.truncate(n);
        // The stash holds one datagram per descriptor; do not keep 64 KiB for a small one.
        tmp.shrink_to_fit();
        u.stash = Some((tmp, from));
        return Ok(());
    }
}

fn udp_recv_once(
    stack: &mut Stack,
    s: &mut Sock,
    bufs: &mut [&mut [u8]],
    peek: bool,
) -> R<Received> {
    refresh(stack, s);
    if let Some(err) = s.so_error.take() {
        return Err(err);
    }
    let shut_rd = s.shut_rd;
    let Kind::Udp(u) = &mut s.kind else {
        return Err(libc::ENOTCONN);
    };
    if shut_rd {
        return Ok(Received::default());
    }
    udp_fill_stash(stack, u)?;
    let Some((data, from)) = u.stash.take() else {
        return Err(libc::EAGAIN);
    };
    let mut off = 0;
    for b in bufs.iter_mut() {
        let n = (data.len() - off).min(b.len());
        b[..n].copy_from_slice(&data[off..off + n]);
        off += n;
        if off == data.len() {
            break;
        }
    }
    let r = Received {
        len: off,
        from: Some(from),
        truncated: off < data.len(),
        full_len: data.len(),
        inq: None,
    };
    if peek {
        u.stash = Some((data, from));
    }
    Ok(r)
}

pub(crate) fn recv(e: &Engine, fd: i32, bufs: &mut [&mut [u8]], flags: i32) -> R<Received> {
    let known = libc::MSG_DONTWAIT | libc::MSG_WAITALL | libc::MSG_PEEK | libc::MSG_TRUNC;
    if flags & !known != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    let peek = flags & libc::MSG_PEEK != 0;
    let is_udp = matches!(e.lock().fds.get(fd)?.kind, Kind::Udp(_));
    if is_udp {
        return blocking(e, fd, Dir::Rx, dontwait, |st, _, _| {
            let s = st.fds.get_mut(fd)?;
            udp_recv_once(&mut st.stack, s, bufs, peek)
        });
    }
    if flags & libc::MSG_TRUNC != 0 {
        // MSG_TRUNC on a stream would mean "discard": refusing beats pretending.
        return Err(libc::EOPNOTSUPP);
    }
    let want: usize = bufs.iter().map(|b| b.len()).sum();
    let waitall = flags & libc::MSG_WAITALL != 0;
    if peek {
        // MSG_PEEK: the bytes stay queued for the next read. With MSG_WAITALL, wait until
        // `want` bytes are there (or end of stream), as Linux's tcp_recvmsg does.
        let len = blocking(e, fd, Dir::Rx, dontwait, |st, _, _| {
            let s = st.fds.get_mut(fd)?;
            match tcp_peek_once(&mut st.stack, s, bufs)? {
                (n, false) if waitall && n < want => Err(libc::EAGAIN),
                (n, _) => Ok(n),
            }
        })?;
        let g = e.lock();
        let inq = inq_hint(&g.stack, g.fds.get(fd)?);
        return Ok(Received {
            len,
            inq,
            ..Received::default()
        });
    }
    let mut done = 0usize;
    // Linux `tcp_recvmsg`: a blocking read returns once `sock_rcvlowat` bytes (all of them
    // with MSG_WAITALL) are copied, or at end of stream, a timeout or a non-blocking call.
    let lowat = {
        let g = e.lock();
        rcvlowat(&g.stack, g.fds.get(fd)?)
    };
    let target = if waitall { want } else { lowat.min(want) };
    let r = blocking(e, fd, Dir::Rx, dontwait, |st, _, progress| {
        let s = st.fds.get_mut(fd)?;
        let mut rest = skip_mut(bufs, done);
        match tcp_recv_once(&mut st.stack, s, &mut rest) {
            Ok(0) => Ok(done),
            Ok(n) => {
                done += n;
                *progress = true;
                if done < target {
                    Err(libc::EAGAIN)
                } else {
                    Ok(done)
                }
            }
            Err(err) if done > 0 && err != libc::EAGAIN => {
                s.so_error = Some(err);
                Ok(done)
            }
            Err(err) => Err(err),
        }
    });
    let len = match r {
        Err(err) if done > 0 && err == libc::EAGAIN => done,
        Err(err) => return Err(err),
        Ok(len) => len,
    };
    let g = e.lock();
    let inq = inq_hint(&g.stack, g.fds.get(fd)?);
    Ok(Received {
        len,
        inq,
        ..Received::default()
    })
}

fn tcp_send_once(
    stack: &mut Stack,
    s: &mut Sock,
    data: &[&[u8]],
    flags: tcp::SendFlags,
) -> R<usize> {
    if let Some(err) = s.so_error.take() {
        return Err(err);
    }
    if s.shut_wr {
        return Err(libc::EPIPE);
    }
    let h = match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => ts.handle(),
        // Never connected, or listening: Linux `sk_stream_wait_connect` answers EPIPE for a
        // socket that is not connecting (RFC 9293 §3.10.2 SEND in CLOSED or LISTEN without a
        // foreign socket: "error: connection does not exist").
        _ => return Err(libc::EPIPE),
    };
    // Linux `tcp_sendmsg_locked` / `sk_stream_wait_connect`: a write on a socket whose
    // handshake (its Fast Open SYN too) is still unanswered waits for it, EAGAIN when
    // non-blocking; the SYN carries only what `sendto(MSG_FASTOPEN)` gave it. An empty write
    // returns 0 as before (Linux's write(2) does not reach TCP for 0 bytes, and netfold's
    // calls do not tell write from send).
    if data.iter().any(|d| !d.is_empty()) && stack.tcp().connecting(h).unwrap_or(false) {
        return Err(libc::EAGAIN);
    }
    // TCP_NOTSENT_LOWAT: a write stops where Linux's would (`Conn::notsent_room`).
    let lowat = s.opts.notsent_lowat();
    let mut budget = if lowat == u32::MAX {
        usize::MAX
    } else {
        let want = data.iter().map(|d| d.len()).sum();
        stack
            .tcp_mut()
            .notsent_room(h, lowat, want)
            .unwrap_or(usize::MAX)
    };
    let mut total = 0;
    let last = data.iter().rposition(|d| !d.is_empty());
    for (i, d) in data.iter().enumerate().filter(|(_, d)| !d.is_empty()) {
        if budget == 0 {
            break;
        }
        let d = &d[..d.len().min(budget)];
        // MSG_EOR ends the record with the message's last byte, not with each iovec's (nor
        // with a write cut short).
        let f = tcp::SendFlags {
            eor: flags.eor && Some(i) == last && d.len() == data[i].len(),
            ..flags
        };
        match stack.tcp_mut().send_with(h, d, f) {
            Ok(n) => {
                total += n;
                budget -= n;
                if n < d.len() {
                    break;
                }
            }
            Err(tcp::Error::WouldBlock) => break,
            Err(err) if total == 0 => return Err(tcp_errno(err)),
            Err(_) => break,
        }
    }
    if total == 0 && data.iter().any(|d| !d.is_empty()) {
        return Err(libc::EAGAIN);
    }
    Ok(total)
}

fn udp_send_once(
    stack: &mut Stack,
    s: &mut Sock,
    data: &[&[u8]],
    to: Option<SocketAddr>,
) -> R<usize> {
    // An ICMP error reported to the connected socket answers this call, once (Linux).
    refresh(stack, s);
    if let Some(err) = s.so_error.take() {
        return Err(err);
    }
    if s.shut_wr {
        return Err(libc::EPIPE);
    }
    let family = s.family;
    let Kind::Udp(u) = &mut s.kind else {
        return Err(libc::ENOTCONN);
    };
    let to = match to {
        Some(a) => Some(udp_dest(family, s.opts.cfg.v6only, a, libc::ENETUNREACH)?),
        None => None,
    };
    let dst = to.or(u.peer).ok_or(libc::EDESTADDRREQ)?;
    let len: usize = data.iter().map(|d| d.len()).sum();
    let max = if unmapped(dst).is_ipv4() {
        MAX_DATAGRAM
    } else {
        MAX_DATAGRAM_V6
    };
    if len > max {
        return Err(libc::EMSGSIZE);
    }
    let h = ensure_udp_bound(stack, u, family, &s.opts)?;
    let joined;
    let payload: &[u8] = match data {
        [one] => one,
        _ => {
            joined = data.concat();
            &joined
        }
    };
    stack.udp_send_to(h, payload, dst).map_err(udp_errno)?;
    Ok(len)
}

pub(crate) fn send(
    e: &Engine,
    fd: i32,
    data: &[&[u8]],
    flags: i32,
    to: Option<SocketAddr>,
) -> R<usize> {
    // MSG_NOSIGNAL is accepted: netfold never raises SIGPIPE, EPIPE is always just an errno.
    let known = libc::MSG_DONTWAIT
        | libc::MSG_NOSIGNAL
        | libc::MSG_MORE
        | libc::MSG_EOR
        | libc::MSG_FASTOPEN;
    if flags & !known != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let deferred = e.lock().fds.get(fd)?.fastopen_deferred;
    if let Some(remote) = deferred {
        // TCP_FASTOPEN_CONNECT's deferred SYN takes this first write (MSG_FASTOPEN or not).
        if let Some(r) =
            fastopen_connect(e, fd, data, Some(remote), flags & libc::MSG_DONTWAIT != 0)
        {
            return r;
        }
    } else if flags & libc::MSG_FASTOPEN != 0 {
        if let Some(r) = fastopen_connect(e, fd, data, to, flags & libc::MSG_DONTWAIT != 0) {
            return r;
        }
    }
    // MSG_MORE and MSG_EOR change how TCP cuts segments. A UDP send ignores them: each call
    // is one datagram (Linux would append a MSG_MORE datagram to the next one; netfold's UDP
    // has no pending datagram to append to).
    let tflags = tcp::SendFlags {
        more: flags & libc::MSG_MORE != 0,
        eor: flags & libc::MSG_EOR != 0,
    };
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    let is_udp = matches!(e.lock().fds.get(fd)?.kind, Kind::Udp(_));
    if is_udp {
        return blocking(e, fd, Dir::Tx, dontwait, |st, _, _| {
            let s = st.fds.get_mut(fd)?;
            udp_send_once(&mut st.stack, s, data, to)
        });
    }
    let want: usize = data.iter().map(|d| d.len()).sum();
    let mut done = 0usize;
    let nonblock = dontwait || e.lock().fds.get(fd)?.nonblock;
    let r = blocking(e, fd, Dir::Tx, dontwait, |st, _, progress| {
        let s = st.fds.get_mut(fd)?;
        let rest = skip_ref(data, done);
        let res = match tcp_send_once(&mut st.stack, s, &rest, tflags) {
            Ok(n) => {
                done += n;
                *progress |= n > 0;
                // Blocking send(2) returns when everything is queued; non-blocking takes what fits.
                if done < want && !nonblock {
                    Err(libc::EAGAIN)
                } else {
                    Ok(done)
                }
            }
            // Full send buffer: keep waiting (blocking) or report what fitted (non-blocking).
            Err(libc::EAGAIN) if done > 0 && nonblock => Ok(done),
            Err(libc::EAGAIN) => Err(libc::EAGAIN),
            Err(err) if done > 0 => {
                // Report the bytes queued; the error comes with the next call.
                s.so_error = Some(err);
                Ok(done)
            }
            Err(err) => Err(err),
        };
        // Linux `tcp_tx_timestamp`: once per send, on its last byte.
        if matches!(res, Ok(n) if n > 0) {
            crate::timestamp::on_send(st, fd);
        }
        res
    });
    match r {
        // SO_SNDTIMEO expired after part of the data was queued: a short count, as Linux.
        Err(libc::EAGAIN) if done > 0 => Ok(done),
        other => other,
    }
}

/// `sendto(MSG_FASTOPEN)` on a TCP socket not yet connected (Linux `tcp_sendmsg_fastopen`,
/// RFC 7413 §4.1): connects to `to` with the data in the SYN when a cookie from that server is
/// cached, else with a cookie request. Returns the bytes the SYN carries; a non-blocking call
/// without them fails with EINPROGRESS (the connection is under way), a blocking one waits for
/// the handshake, queues the rest of the data and returns its whole length. `None`: not such a
/// socket (connected already, UDP): an ordinary send, as Linux ignores the flag there.
fn fastopen_connect(
    e: &Engine,
    fd: i32,
    data: &[&[u8]],
    to: Option<SocketAddr>,
    dontwait: bool,
) -> Option<R<usize>> {
    let mut g = e.lock();
    let now = e.now(&g);
    let st = &mut *g;
    let s = match st.fds.get_mut(fd) {
        Ok(s) => s,
        Err(err) => return Some(Err(err)),
    };
    match &s.kind {
        Kind::Tcp(Tcp::Idle) => {}
        // Linux: a Fast Open (or connect) still under way is EALREADY.
        Kind::Tcp(Tcp::Stream(ts))
            if st.stack.tcp().state(ts.handle()) == Ok(tcp::State::SynSent) =>
        {
            return Some(Err(libc::EALREADY));
        }
        _ => return None,
    }
    if st.stack.tcp().fastopen() & netfold_core::tcp::fastopen::CLIENT_ENABLE == 0 {
        return Some(Err(libc::EOPNOTSUPP));
    }
    let Some(remote) = to else {
        return Some(Err(libc::EDESTADDRREQ));
    };
    let r = (|| {
        check_family(s.family, remote)?;
        if unmapped(remote).ip().is_unspecified() || remote.port() == 0 {
            return Err(libc::EINVAL);
        }
        let local = match s.bound {
            Some(a) if unmapped(a).ip().is_unspecified() => {
                let mut l = st.stack.tcp_local_for(remote).map_err(tcp_errno)?;
                l.set_port(a.port());
                l
            }
            Some(a) => a,
            None => st.stack.tcp_local_for(remote).map_err(tcp_errno)?,
        };
        // The SYN carries at most one segment: the first bytes are enough.
        let mut first = Vec::with_capacity(1500);
        for d in data {
            let take = d.len().min(1500 - first.len());
            first.extend_from_slice(&d[..take]);
            if first.len() == 1500 {
                break;
            }
        }
        let cfg = s.opts.tcp_config();
        let (h, n) = st
            .stack
            .tcp_mut()
            .connect_fastopen(now, local, remote, cfg, &first)
            .map_err(tcp_errno)?;
        s.kind = Kind::Tcp(Tcp::Stream(TcpStream::from_handle(h)));
        s.fastopen_deferred = None;
        Ok((n, dontwait || s.nonblock))
    })();
    e.changed(st);
    drop(g);
    Some(match r {
        Err(err) => Err(err),
        Ok((0, true)) => Err(libc::EINPROGRESS),
        Ok((n, true)) => Ok(n),
        Ok((n, false)) => {
            // Blocking (Linux): the call returns once the handshake is over, with the rest
            // of the data queued behind what the SYN carried.
            let want: usize = data.iter().map(|d| d.len()).sum();
            // Linux `sk_write_pending`: the TCB knows data follows the handshake.
            let waiting = |e: &Engine, on: bool| {
                let mut g = e.lock();
                let st = &mut *g;
                if let Ok(s) = st.fds.get_mut(fd) {
                    if let Kind::Tcp(Tcp::Stream(ts)) = &s.kind {
                        let _ = st.stack.tcp_mut().set_writer_waiting(ts.handle(), on);
                    }
                }
            };
            if n < want {
                waiting(e, true);
            }
            let r = connect(e, fd, remote);
            if n < want {
                waiting(e, false);
            }
            match r {
                Ok(()) | Err(libc::EISCONN) => {}
                Err(err) => return Some(Err(err)),
            }
            if n == want {
                Ok(n)
            } else {
                send(e, fd, &skip_ref(data, n), 0, None).map(|m| n + m)
            }
        }
    })
}

pub(crate) fn shutdown(e: &Engine, fd: i32, how: i32) -> R<()> {
    let (rd, wr) = match how {
        libc::SHUT_RD => (true, false),
        libc::SHUT_WR => (false, true),
        libc::SHUT_RDWR => (true, true),
        _ => return Err(libc::EINVAL),
    };
    let mut g = e.lock();
    let st = &mut *g;
    let s = st.fds.get_mut(fd)?;
    match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => {
            if wr && !s.shut_wr {
                ts.shutdown_write(&mut st.stack).map_err(|e| io_errno(&e))?;
            }
        }
        Kind::Udp(u) if u.peer.is_some() => {}
        _ => return Err(libc::ENOTCONN),
    }
    s.shut_rd |= rd;
    s.shut_wr |= wr;
    e.changed(st);
    Ok(())
}

/// Releases whatever the socket holds in the stack.
pub(crate) fn release(stack: &mut Stack, s: Sock) {
    match s.kind {
        Kind::Tcp(Tcp::Idle) | Kind::Epoll(_) => {}
        Kind::Tcp(Tcp::Listening { l, ready, .. }) => {
            // Connections nobody accepted are reset, as the engine does for its own queue.
            for (ts, _) in ready {
                let _ = ts.abort(stack);
            }
            let _ = l.close(stack);
        }
        Kind::Tcp(Tcp::Stream(ts)) => {
            let _ = ts.close(stack);
        }
        Kind::Udp(u) => {
            if let Some(h) = u.h {
                stack.udp_close(h);
            }
        }
    }
}

pub(crate) fn close(e: &Engine, fd: i32) -> R<()> {
    // socket(7) SO_LINGER with a positive time: a blocking close sends the FIN and waits until
    // everything up to it is acknowledged, or the time runs out; the close then goes on in the
    // background as usual. (Zero means abort, which the engine's close does itself.)
    let linger = {
        let g = e.lock();
        let s = g.fds.get(fd)?;
        match (&s.kind, s.opts.cfg.linger) {
            (Kind::Tcp(Tcp::Stream(_)), Some(d))
                if d > netfold_core::time::Duration::ZERO && !s.nonblock =>
            {
                Some(d)
            }
            _ => None,
        }
    };
    if let Some(d) = linger {
        let mut fin_sent = false;
        let _ = blocking(e, fd, Dir::For(Some(d)), false, |st, _, progress| {
            let s = st.fds.get_mut(fd)?;
            let Kind::Tcp(Tcp::Stream(ts)) = &s.kind else {
                return Ok(());
            };
            let h = ts.handle();
            if !fin_sent {
                fin_sent = true;
                s.shut_wr = true;
                *progress = st.stack.tcp_mut().shutdown_write(h).is_ok();
            }
            match st.stack.tcp().state(h) {
                // Our FIN is acknowledged (RFC 9293 §3.6), or the connection is gone.
                Ok(tcp::State::FinWait2 | tcp::State::TimeWait | tcp::State::Closed) | Err(_) => {
                    Ok(())
                }
                _ => Err(libc::EAGAIN),
            }
        });
    }
    let mut g = e.lock();
    let st = &mut *g;
    let s = st.fds.remove(fd)?;
    release(&mut st.stack, s);
    e.changed(st);
    Ok(())
}

/// getsockname / getpeername, as the socket's family reports addresses (v4-mapped on
/// AF_INET6).
pub(crate) fn sockname(e: &Engine, fd: i32, peer: bool) -> R<SocketAddr> {
    let mut g = e.lock();
    let st = &mut *g;
    let s = st.fds.get_mut(fd)?;
    let family = s.family;
    let any = any_of(family, 0);
    let state = refresh(&mut st.stack, s);
    let r = match (&s.kind, peer) {
        (Kind::Tcp(Tcp::Stream(ts)), true) => match state {
            Some(x) if is_synchronized(x) => ts.peer_addr(&st.stack).map_err(|e| io_errno(&e)),
            _ => Err(libc::ENOTCONN),
        },
        (Kind::Tcp(Tcp::Stream(ts)), false) => {
            Ok(ts.local_addr(&st.stack).ok().or(s.bound).unwrap_or(any))
        }
        (Kind::Tcp(Tcp::Listening { l, .. }), false) => {
            l.local_addr(&st.stack).map_err(|e| io_errno(&e))
        }
        (Kind::Tcp(Tcp::Idle), false) => Ok(s.bound.unwrap_or(any)),
        (Kind::Tcp(_), true) => Err(libc::ENOTCONN),
        (Kind::Udp(u), true) => u.peer.ok_or(libc::ENOTCONN),
        (Kind::Udp(u), false) => Ok(u
            .h
            .and_then(|h| st.stack.udp_local_addr(h).ok())
            .unwrap_or(any)),
        (Kind::Epoll(_), _) => Err(libc::ENOTSOCK),
    };
    r.map(|a| present(family, a))
}

pub(crate) fn fcntl(e: &Engine, fd: i32, cmd: i32, arg: i64) -> R<i32> {
    let mut g = e.lock();
    let s = g.fds.get_mut(fd)?;
    match cmd {
        libc::F_GETFL => Ok(libc::O_RDWR | if s.nonblock { libc::O_NONBLOCK } else { 0 }),
        libc::F_SETFL => {
            s.nonblock = arg & i64::from(libc::O_NONBLOCK) != 0;
            Ok(0)
        }
        // FD_CLOEXEC: these descriptors are not the kernel's; exec never sees them.
        libc::F_GETFD => Ok(0),
        libc::F_SETFD => Ok(0),
        _ => Err(libc::EINVAL),
    }
}

/// FIONREAD and SIOCOUTQ (both read-only queries; FIONBIO is handled by the caller).
pub(crate) fn ioctl_query(e: &Engine, fd: i32, req: libc::c_ulong) -> R<i32> {
    let mut g = e.lock();
    let st = &mut *g;
    let s = st.fds.get_mut(fd)?;
    let clamp = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    match (&mut s.kind, req) {
        (Kind::Tcp(Tcp::Stream(ts)), libc::FIONREAD) => {
            Ok(clamp(st.stack.tcp().recv_queue(ts.handle()).unwrap_or(0)))
        }
        (Kind::Tcp(Tcp::Stream(ts)), libc::TIOCOUTQ) => {
            Ok(clamp(st.stack.tcp().send_queue(ts.handle()).unwrap_or(0)))
        }
        (Kind::Tcp(_), libc::FIONREAD | libc::TIOCOUTQ) => Err(libc::EINVAL),
        (Kind::Udp(u), libc::FIONREAD) => {
            // Linux: the size of the next datagram (udp(7)).
            let _ = udp_fill_stash(&mut st.stack, u);
            Ok(clamp(u.stash.as_ref().map_or(0, |(d, _)| d.len())))
        }
        // Datagrams leave at the next poll, which the call that queued them already ran or
        // kicked: nothing stays queued from the application's point of view.
        (Kind::Udp(_), libc::TIOCOUTQ) => Ok(0),
        _ => Err(libc::ENOTTY),
    }
}

pub(crate) fn set_nonblock(e: &Engine, fd: i32, on: bool) -> R<()> {
    e.lock().fds.get_mut(fd)?.nonblock = on;
    Ok(())
}

/// poll(2) readiness of one descriptor.
pub(crate) fn readiness(st: &mut State, fd: i32) -> i16 {
    // Released MSG_ZEROCOPY buffers become error-queue notifications, which raise POLLERR.
    crate::zerocopy::pump(st, fd);
    let Ok(s) = st.fds.get_mut(fd) else {
        return libc::POLLNVAL;
    };
    let state = refresh(&mut st.stack, s);
    let mut r = 0;
    let (shut_rd, shut_wr) = (s.shut_rd, s.shut_wr);
    drain_accept(&mut st.stack, s);
    match &mut s.kind {
        // A deferred Fast Open connect (TCP_FASTOPEN_CONNECT) is writable: the first write
        // sends the SYN.
        Kind::Tcp(Tcp::Idle) if s.fastopen_deferred.is_some() => r |= libc::POLLOUT,
        // An unconnected stream socket: Linux reports it writable and hung up.
        Kind::Tcp(Tcp::Idle) => r |= libc::POLLOUT | libc::POLLHUP,
        // poll(2) on an epoll instance is not offered: it never reads as ready.
        Kind::Epoll(_) => {}
        Kind::Tcp(Tcp::Listening { ready, .. }) => {
            if !ready.is_empty() {
                r |= libc::POLLIN;
            }
        }
        Kind::Tcp(Tcp::Stream(ts)) => {
            use tcp::State as S;
            let h = ts.handle();
            let tcp = st.stack.tcp();
            let readable = tcp.recv_queue(h).unwrap_or(0) >= rcvlowat(&st.stack, s);
            // TCP_NOTSENT_LOWAT (Linux `tcp_stream_memory_free(sk, 1)` in `tcp_poll`):
            // writable only while twice the written bytes waiting to be sent for the first
            // time stay below the threshold (a wake-up then finds room for a chunk).
            let lowat = s.opts.notsent_lowat();
            let space = tcp.send_space(h).unwrap_or(0) > 0
                && (lowat == u32::MAX
                    || (tcp.send_unsent(h).unwrap_or(0) as u64) * 2 < u64::from(lowat));
            match state.unwrap_or(S::Closed) {
                S::SynSent | S::SynReceived | S::Listen => {}
                S::Established => {
                    r |= if readable { libc::POLLIN } else { 0 };
                    r |= if space || shut_wr { libc::POLLOUT } else { 0 };
                }
                // Peer's FIN: a read returns 0 at once. POLLRDHUP (here and below) as
                // Linux `tcp_poll` with RCV_SHUTDOWN (the FIN, a reset, or SHUT_RD).
                S::CloseWait => {
                    r |= libc::POLLIN | libc::POLLRDHUP;
                    r |= if space || shut_wr { libc::POLLOUT } else { 0 };
                }
                // Our side is shut: a write fails at once (EPIPE), so it "does not block".
                S::FinWait1 | S::FinWait2 => {
                    r |= libc::POLLOUT | if readable { libc::POLLIN } else { 0 };
                }
                S::Closing | S::LastAck | S::TimeWait | S::Closed => {
                    r |= libc::POLLIN | libc::POLLOUT | libc::POLLHUP | libc::POLLRDHUP;
                }
            }
            if shut_rd {
                r |= libc::POLLIN | libc::POLLRDHUP;
            }
            if shut_rd && shut_wr {
                r |= libc::POLLHUP;
            }
        }
        Kind::Udp(u) => {
            let _ = udp_fill_stash(&mut st.stack, u);
            if u.stash.is_some() || shut_rd {
                r |= libc::POLLIN;
            }
            r |= libc::POLLOUT;
        }
    }
    // Linux `tcp_poll`/`datagram_poll`: EPOLLERR while sk_err is set or the error queue
    // (MSG_ZEROCOPY notifications, transmit timestamps) is not empty.
    if s.so_error.is_some()
        || s.msg_zc.as_ref().is_some_and(|z| z.pending())
        || s.tx_stamps.as_ref().is_some_and(|t| t.pending())
    {
        r |= libc::POLLERR;
    }
    r
}

/// The wait of poll(2) and epoll_wait(2): `look` reports how many descriptors are ready
/// (writing them where its caller wants them); the wait returns as soon as one is, at once
/// for `timeout_ms` 0, and after one last look when `timeout_ms` (> 0) passes; < 0 waits
/// without limit. EBADF once the stack is being freed.
pub(crate) fn wait_ready(
    e: &Engine,
    timeout_ms: i32,
    mut look: impl FnMut(&mut State, Instant) -> R<usize>,
) -> R<usize> {
    let mut g = e.lock();
    let deadline = (timeout_ms >= 0).then(|| {
        e.now(&g) + netfold_core::time::Duration::from_millis(u64::from(timeout_ms.unsigned_abs()))
    });
    loop {
        if e.stopped() {
            return Err(libc::EBADF);
        }
        let now = e.now(&g);
        let n = look(&mut g, now)?;
        if n > 0 || timeout_ms == 0 {
            return Ok(n);
        }
        let (ng, timed_out) = e.wait(g, deadline);
        g = ng;
        if timed_out {
            let now = e.now(&g);
            return look(&mut g, now);
        }
    }
}

/// poll(2): `fds` as (fd, events, revents) triples.
pub(crate) fn poll(e: &Engine, fds: &mut [libc::pollfd], timeout_ms: i32) -> R<i32> {
    let n = wait_ready(e, timeout_ms, |st, _| {
        let mut n = 0;
        for p in fds.iter_mut() {
            p.revents = 0;
            if p.fd < 0 {
                continue;
            }
            let ready = readiness(st, p.fd);
            // POLLERR, POLLHUP and POLLNVAL are reported whether asked for or not (poll(2)).
            p.revents = ready & (p.events | libc::POLLERR | libc::POLLHUP | libc::POLLNVAL);
            n += usize::from(p.revents != 0);
        }
        Ok(n)
    })?;
    Ok(i32::try_from(n).unwrap_or(i32::MAX))
}

/// Undoes a `bind` of a TCP socket that has not connected or listened yet (the shards'
/// connect tried a port whose 4-tuple turned out taken, and tries the next).
pub(crate) fn unbind(e: &Engine, fd: i32) -> R<()> {
    let mut g = e.lock();
    let s = g.fds.get_mut(fd)?;
    match s.kind {
        Kind::Tcp(Tcp::Idle) => {
            s.bound = None;
            Ok(())
        }
        _ => Err(libc::EINVAL),
    }
}
