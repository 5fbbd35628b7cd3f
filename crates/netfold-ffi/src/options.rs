//! getsockopt/setsockopt. Exactly the options include/netfold.h documents; anything
//! else fails with ENOPROTOOPT instead of pretending to work.

use crate::engine::Engine;
use crate::errno::R;
use crate::fd::{Kind, Sock, Tcp, Udp};
use crate::ops::refresh;
use netfold_core::iface::{PmtuDisc, Stack};
use netfold_core::tcp::fastopen::FastOpenKey;
use netfold_core::tcp::CongestionControl;
use netfold_core::time::Duration;

/// Socket buffer bounds (memory bound per socket; Linux clamps similarly to rmem_max).
const MIN_BUF: usize = 2048;
const MAX_BUF: usize = 16 * 1024 * 1024;
/// Linux's default `net.core.somaxconn`, the bound on TCP_FASTOPEN's queue length.
const SOMAXCONN: usize = 4096;

/// SO_RCVBUF/SO_SNDBUF with Linux's semantics (socket(7)): setting a size turns buffer
/// auto-tuning off for the socket (Linux `SOCK_RCVBUF_LOCK`/`SOCK_SNDBUF_LOCK`) and "the
/// kernel doubles this value (to allow space for bookkeeping overhead) when it is set using
/// setsockopt(2), and this doubled value is returned by getsockopt(2)". The requested value
/// is what netfold's ring holds and what the window covers (the part of Linux's doubled
/// buffer that is window); netfold's rings carry no per-packet overhead, so the other half is
/// never allocated, but getsockopt reports the doubled value as Linux does. Unset, the value
/// reported is twice the auto-tuned buffer now (on a connection) or its initial size.
const LINUX_DOUBLING: usize = 2;

/// Linux's default `tcp_rmem` maximum (6 MiB), which bounds SO_RCVLOWAT on a socket without
/// a fixed SO_RCVBUF.
const RMEM_MAX_DEFAULT: usize = 6 * 1024 * 1024;

fn reported_buf(explicit: usize, live: Option<usize>, initial: usize) -> usize {
    let b = if explicit > 0 {
        explicit
    } else {
        live.unwrap_or(initial)
    };
    b.saturating_mul(LINUX_DOUBLING)
}

/// An option's value as C sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OptVal {
    Int(i32),
    Linger {
        onoff: i32,
        secs: i32,
    },
    Timeval {
        sec: i64,
        usec: i64,
    },
    /// A struct given as its bytes (TCP_INFO).
    Bytes(Vec<u8>),
}

fn timeval_of(d: Option<Duration>) -> OptVal {
    let us = d.map_or(0, |d| d.total_micros());
    OptVal::Timeval {
        sec: i64::try_from(us / 1_000_000).unwrap_or(i64::MAX),
        usec: (us % 1_000_000) as i64,
    }
}

fn int_of(v: OptVal) -> R<i32> {
    match v {
        OptVal::Int(i) => Ok(i),
        _ => Err(libc::EINVAL),
    }
}

/// IP_MTU_DISCOVER values (ip(7); <linux/in.h>: DONT 0, WANT 1, DO 2, PROBE 3,
/// INTERFACE 4, OMIT 5).
fn pmtu_disc_of(v: i32) -> R<PmtuDisc> {
    Ok(match v {
        libc::IP_PMTUDISC_DONT => PmtuDisc::Dont,
        libc::IP_PMTUDISC_WANT => PmtuDisc::Want,
        libc::IP_PMTUDISC_DO => PmtuDisc::Do,
        libc::IP_PMTUDISC_PROBE => PmtuDisc::Probe,
        libc::IP_PMTUDISC_INTERFACE => PmtuDisc::Interface,
        libc::IP_PMTUDISC_OMIT => PmtuDisc::Omit,
        _ => return Err(libc::EINVAL),
    })
}

fn pmtu_disc_value(m: PmtuDisc) -> i32 {
    match m {
        PmtuDisc::Dont => libc::IP_PMTUDISC_DONT,
        PmtuDisc::Want => libc::IP_PMTUDISC_WANT,
        PmtuDisc::Do => libc::IP_PMTUDISC_DO,
        PmtuDisc::Probe => libc::IP_PMTUDISC_PROBE,
        PmtuDisc::Interface => libc::IP_PMTUDISC_INTERFACE,
        PmtuDisc::Omit => libc::IP_PMTUDISC_OMIT,
    }
}

/// IP_MTU: the path MTU to the connected peer (ip(7): ENOTCONN on an unconnected socket).
fn path_mtu(stack: &Stack, now: netfold_core::time::Instant, s: &Sock) -> R<i32> {
    let peer = match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => ts.peer_addr(stack).map_err(|_| libc::ENOTCONN)?,
        Kind::Udp(Udp { peer: Some(p), .. }) => *p,
        _ => return Err(libc::ENOTCONN),
    };
    let mtu = stack.path_mtu(now, netfold_core::socket::unmapped(peer).ip());
    Ok(i32::try_from(mtu).unwrap_or(i32::MAX))
}

/// Pushes a socket's options into the engine if it has a live connection or listener.
fn apply(stack: &mut Stack, s: &Sock) -> R<()> {
    let h = match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => ts.handle(),
        Kind::Tcp(Tcp::Listening { l, .. }) => l.handle(),
        _ => return Ok(()),
    };
    // A connection the engine already released has nothing left to configure.
    let _ = stack.tcp_mut().set_config(h, s.opts.tcp_config());
    Ok(())
}

pub(crate) fn get(e: &Engine, fd: i32, level: i32, name: i32) -> R<OptVal> {
    let mut g = e.lock();
    let now = e.now(&g);
    let st = &mut *g;
    let s = st.fds.get_mut(fd)?;
    if matches!(s.kind, Kind::Epoll(_)) {
        return Err(libc::ENOTSOCK);
    }
    let is_tcp = matches!(s.kind, Kind::Tcp(_));
    let o = s.opts;
    let b = |x: bool| OptVal::Int(i32::from(x));
    let n = |x: usize| OptVal::Int(i32::try_from(x).unwrap_or(i32::MAX));
    Ok(match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => b(o.reuseaddr),
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => b(o.keepalive),
        (libc::SOL_SOCKET, libc::SO_ZEROCOPY) => b(o.zerocopy),
        (libc::SOL_SOCKET, libc::SO_MARK) => OptVal::Int(o.mark as i32),
        // Linux `sk_getsockopt`: SO_TIMESTAMP is on when SOCK_RCVTSTAMP is and RCVTSTAMPNS not.
        (libc::SOL_SOCKET, libc::SO_TIMESTAMP) => b(o.rcvtstamp && !o.rcvtstampns),
        (libc::SOL_SOCKET, libc::SO_TIMESTAMPNS) => b(o.rcvtstampns),
        (libc::SOL_SOCKET, libc::SO_TIMESTAMPING) => OptVal::Int(o.tsflags as i32),
        (libc::SOL_SOCKET, libc::SO_LINGER) => OptVal::Linger {
            onoff: i32::from(o.cfg.linger.is_some()),
            secs: o.cfg.linger.map_or(0, |d| {
                i32::try_from(d.total_micros() / 1_000_000).unwrap_or(i32::MAX)
            }),
        },
        (libc::SOL_SOCKET, libc::SO_RCVBUF | libc::SO_SNDBUF) => {
            let live = match &s.kind {
                Kind::Tcp(Tcp::Stream(ts)) => st.stack.tcp().conn_info(ts.handle()).ok(),
                _ => None,
            };
            n(if name == libc::SO_RCVBUF {
                reported_buf(
                    o.cfg.recv_buffer,
                    live.map(|i| i.recv_buffer),
                    o.cfg.recv_initial(),
                )
            } else {
                reported_buf(
                    o.cfg.send_buffer,
                    live.map(|i| i.send_buffer),
                    o.cfg.send_initial(),
                )
            })
        }
        (libc::SOL_SOCKET, libc::SO_ERROR) => {
            refresh(&mut st.stack, s);
            OptVal::Int(s.so_error.take().unwrap_or(0))
        }
        (libc::SOL_SOCKET, libc::SO_RCVLOWAT) => n(o.rcvlowat),
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => timeval_of(o.rcvtimeo),
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => timeval_of(o.sndtimeo),
        (libc::SOL_SOCKET, libc::SO_TYPE) => OptVal::Int(if is_tcp {
            libc::SOCK_STREAM
        } else {
            libc::SOCK_DGRAM
        }),
        // socket(7): the socket's domain and protocol, and whether it listens (read-only);
        // what a program that is handed a descriptor asks (Python's socket(fileno=...)).
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => OptVal::Int(s.family),
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => OptVal::Int(if is_tcp {
            libc::IPPROTO_TCP
        } else {
            libc::IPPROTO_UDP
        }),
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => {
            b(matches!(s.kind, Kind::Tcp(Tcp::Listening { .. })))
        }
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER) => OptVal::Int(pmtu_disc_value(o.pmtu_disc)),
        // ip(7) IP_TOS, ipv6(7) IPV6_TCLASS: a TCP socket's DSCP bits (its ECN bits read 0,
        // as Linux keeps them out of a stream socket's `inet->tos`).
        (libc::IPPROTO_IP, libc::IP_TOS) if is_tcp => OptVal::Int(i32::from(o.cfg.tos)),
        (libc::IPPROTO_IP, libc::IP_FREEBIND) => b(o.freebind),
        (libc::IPPROTO_IPV6, libc::IPV6_FREEBIND) if s.family == libc::AF_INET6 => b(o.freebind),
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if is_tcp && s.family == libc::AF_INET6 => {
            OptVal::Int(i32::from(o.cfg.tos))
        }
        (libc::IPPROTO_IP, libc::IP_MTU) => OptVal::Int(path_mtu(&st.stack, now, s)?),
        // ipv6(7): IPV6_V6ONLY on an AF_INET6 socket (default 0, Linux's bindv6only).
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if s.family == libc::AF_INET6 => b(o.cfg.v6only),
        (libc::IPPROTO_TCP, _) if !is_tcp => return Err(libc::ENOPROTOOPT),
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => b(o.cfg.nodelay),
        (libc::IPPROTO_TCP, libc::TCP_CORK) => b(o.cfg.cork),
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => match &s.kind {
            // On a connection: the MSS in use (after the peer's option and PMTU).
            Kind::Tcp(Tcp::Stream(ts)) => match st.stack.tcp().conn_info(ts.handle()) {
                Ok(i) => OptVal::Int(i32::try_from(i.mss).unwrap_or(i32::MAX)),
                Err(_) => OptVal::Int(i32::from(o.cfg.mss)),
            },
            _ => OptVal::Int(i32::from(o.cfg.mss)),
        },
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => n(o.keepidle as usize),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => n(o.keepintvl as usize),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => n(o.keepcnt as usize),
        (libc::IPPROTO_TCP, libc::TCP_SYNCNT) => n(o.cfg.syn_retries as usize),
        // Linux returns the setting (0 or 1), not a byte count: the count comes with each
        // recvmsg (TCP_CM_INQ) or from FIONREAD.
        (libc::IPPROTO_TCP, libc::TCP_INQ) => b(o.inq),
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => OptVal::Int(
            o.cfg
                .user_timeout
                .map_or(0, |d| i32::try_from(d.total_millis()).unwrap_or(i32::MAX)),
        ),
        // Linux returns the socket's own value (0 while unset), the u32 seen as an int.
        (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => {
            OptVal::Int(i32::from_ne_bytes(o.notsent_lowat.to_ne_bytes()))
        }
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN_CONNECT) => b(o.fastopen_connect),
        // Linux copies the algorithm's name field, `char name[TCP_CA_NAME_MAX]` (16 bytes,
        // NUL-padded), cut to the caller's length.
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            let mut name = congestion_name(o.cfg.congestion).as_bytes().to_vec();
            name.resize(TCP_CA_NAME_MAX, 0);
            OptVal::Bytes(name)
        }
        // Linux returns the Fast Open queue's length limit (`fastopenq.max_qlen`).
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => n(o.cfg.fastopen_queue),
        (libc::IPPROTO_TCP, libc::TCP_INFO) => {
            let info = match &s.kind {
                Kind::Tcp(Tcp::Stream(ts)) => st
                    .stack
                    .tcp()
                    .tcp_info(ts.handle(), now)
                    .unwrap_or_default(),
                // Linux reports a listener as TCP_LISTEN, an unconnected socket as TCP_CLOSE.
                Kind::Tcp(Tcp::Listening { .. }) => netfold_core::tcp::TcpInfo {
                    state: 10,
                    ..Default::default()
                },
                _ => netfold_core::tcp::TcpInfo {
                    state: 7,
                    ..Default::default()
                },
            };
            OptVal::Bytes(crate::tcp_info::encode(&info))
        }
        _ => return Err(libc::ENOPROTOOPT),
    })
}

pub(crate) fn set(e: &Engine, fd: i32, level: i32, name: i32, v: OptVal) -> R<()> {
    let mut g = e.lock();
    let st = &mut *g;
    let s = st.fds.get_mut(fd)?;
    let is_tcp = matches!(s.kind, Kind::Tcp(_));
    // Bound (or past bind: listening, connected): IPV6_V6ONLY can no longer change (Linux
    // `do_ipv6_setsockopt`: EINVAL once the socket has a local port).
    let bound = match &s.kind {
        Kind::Tcp(Tcp::Idle) => s.bound.is_some(),
        Kind::Tcp(_) => true,
        Kind::Udp(u) => u.h.is_some(),
        Kind::Epoll(_) => return Err(libc::ENOTSOCK),
    };
    let family = s.family;
    let o = &mut s.opts;
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr = int_of(v)? != 0,
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => o.keepalive = int_of(v)? != 0,
        // Linux `sock_set_timestamp`: SO_TIMESTAMP on clears RCVTSTAMPNS, SO_TIMESTAMPNS on
        // sets both flags, either off clears both.
        (libc::SOL_SOCKET, libc::SO_TIMESTAMP | libc::SO_TIMESTAMPNS) => {
            if int_of(v)? != 0 {
                o.rcvtstamp = true;
                o.rcvtstampns = name == libc::SO_TIMESTAMPNS;
            } else {
                o.rcvtstamp = false;
                o.rcvtstampns = false;
            }
        }
        // Receive timestamps and their reporting, software transmit timestamps
        // (`timestamp.rs`); other flags (hardware transmit stamps, OPT_STATS, ...) are EINVAL.
        (libc::SOL_SOCKET, libc::SO_TIMESTAMPING) => {
            let f = int_of(v)? as u32;
            if f & !crate::timestamp::SOF_SUPPORTED != 0 {
                return Err(libc::EINVAL);
            }
            let old = o.tsflags;
            crate::timestamp::set_tx_flags(st, fd, old, f)?;
            st.fds.get_mut(fd)?.opts.tsflags = f;
        }
        // The mark is the socket's own (Linux `sk->sk_mark`): nothing here routes by it.
        (libc::SOL_SOCKET, libc::SO_MARK) => o.mark = int_of(v)? as u32,
        // Linux `sk_setsockopt`: TCP and UDP sockets only (both are), 0 or 1, else EINVAL.
        (libc::SOL_SOCKET, libc::SO_ZEROCOPY) => {
            o.zerocopy = match int_of(v)? {
                0 => false,
                1 => true,
                _ => return Err(libc::EINVAL),
            }
        }
        (libc::SOL_SOCKET, libc::SO_LINGER) => match v {
            OptVal::Linger { onoff, secs } => {
                o.cfg.linger = (onoff != 0)
                    .then(|| Duration::from_secs(u64::try_from(secs.max(0)).unwrap_or(0)));
            }
            _ => return Err(libc::EINVAL),
        },
        (libc::SOL_SOCKET, libc::SO_RCVBUF | libc::SO_SNDBUF) => {
            // A non-zero size in the config = fixed buffer, auto-tuning off (see
            // `LINUX_DOUBLING`); the ring is the requested size, getsockopt shows twice it.
            let want = usize::try_from(int_of(v)?.max(0)).unwrap_or(0);
            let size = want.clamp(MIN_BUF, MAX_BUF);
            if name == libc::SO_RCVBUF {
                o.cfg.recv_buffer = size;
            } else {
                o.cfg.send_buffer = size;
            }
        }
        // Linux `sk_setsockopt`/`tcp_set_rcvlowat`: negative means INT_MAX, 0 means 1, and
        // the mark is capped at half the receive buffer's ceiling (the fixed SO_RCVBUF size,
        // which getsockopt reports doubled, or half of tcp_rmem's default maximum, 3 MiB).
        (libc::SOL_SOCKET, libc::SO_RCVLOWAT) => {
            let v = int_of(v)?;
            let want = usize::try_from(v).unwrap_or(i32::MAX as usize).max(1);
            let cap = if o.cfg.recv_buffer > 0 {
                o.cfg.recv_buffer
            } else {
                RMEM_MAX_DEFAULT / 2
            };
            o.rcvlowat = want.min(cap);
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO | libc::SO_SNDTIMEO) => {
            let OptVal::Timeval { sec, usec } = v else {
                return Err(libc::EINVAL);
            };
            // socket(7): an out-of-range tv_usec is EDOM; a negative time is EDOM too.
            if !(0..1_000_000).contains(&usec) || sec < 0 {
                return Err(libc::EDOM);
            }
            let us = u64::try_from(sec)
                .unwrap_or(0)
                .saturating_mul(1_000_000)
                .saturating_add(u64::try_from(usec).unwrap_or(0));
            let t = (us > 0).then(|| Duration::from_micros(us));
            if name == libc::SO_RCVTIMEO {
                o.rcvtimeo = t;
            } else {
                o.sndtimeo = t;
            }
        }
        // UDP: DF and fragmentation of the socket's datagrams (see `PmtuDisc`). TCP keeps the
        // value for getsockopt but always sets DF: its segments are cut at the path MTU and
        // never fragmented (RFC 1191), whatever the mode.
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER) => {
            o.pmtu_disc = pmtu_disc_of(int_of(v)?)?;
            if let Kind::Udp(Udp { h: Some(h), .. }) = &s.kind {
                let _ = st.stack.udp_set_pmtu_disc(*h, s.opts.pmtu_disc);
            }
        }
        // ip(7) IP_FREEBIND, ipv6(7) IPV6_FREEBIND (one flag, as Linux's `inet->freebind`):
        // bind() then accepts an address that is not the interface's (yet); packets leave from
        // it, and arrive for it once it is configured.
        (libc::IPPROTO_IP, libc::IP_FREEBIND) => o.freebind = int_of(v)? != 0,
        (libc::IPPROTO_IPV6, libc::IPV6_FREEBIND) if family == libc::AF_INET6 => {
            o.freebind = int_of(v)? != 0;
        }
        // ip(7) IP_TOS on a TCP socket: the DSCP bits of every segment it sends from now on
        // (Linux `__ip_sock_set_tos`: on a stream socket the ECN bits are dropped, ECN sets
        // them per segment); an accepted connection starts with its listener's value.
        (libc::IPPROTO_IP, libc::IP_TOS) if is_tcp => {
            o.cfg.tos = (int_of(v)? as u8) & !0b11;
        }
        // ipv6(7) IPV6_TCLASS: the same for an AF_INET6 TCP socket; -1 is the default (0),
        // other values outside 0..=255 are EINVAL (Linux `do_ipv6_setsockopt`).
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if is_tcp && family == libc::AF_INET6 => {
            let tc = int_of(v)?;
            if !(-1..=255).contains(&tc) {
                return Err(libc::EINVAL);
            }
            o.cfg.tos = (tc.max(0) as u8) & !0b11;
        }
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if family == libc::AF_INET6 => {
            if bound {
                return Err(libc::EINVAL);
            }
            o.cfg.v6only = int_of(v)? != 0;
        }
        (libc::IPPROTO_TCP, _) if !is_tcp => return Err(libc::ENOPROTOOPT),
        // Setting TCP_NODELAY (even to its current value) or clearing TCP_CORK pushes what is
        // queued (Linux `do_tcp_setsockopt` → `tcp_push_pending_frames`): the new setting
        // reaches the connection below and the engine's output pass that follows sends.
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => o.cfg.nodelay = int_of(v)? != 0,
        (libc::IPPROTO_TCP, libc::TCP_CORK) => o.cfg.cork = int_of(v)? != 0,
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
            // tcp(7): values outside 88..=32767 are EINVAL; it only lowers what MTU allows.
            let mss = int_of(v)?;
            if !(88..=32767).contains(&mss) {
                return Err(libc::EINVAL);
            }
            let cap = usize::from(st.stack.tcp_mss(std::net::Ipv4Addr::UNSPECIFIED));
            o.cfg.mss = u16::try_from((mss as usize).min(cap)).unwrap_or(u16::MAX);
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL) => {
            let secs = int_of(v)?;
            if !(1..=32767).contains(&secs) {
                return Err(libc::EINVAL);
            }
            if name == libc::TCP_KEEPIDLE {
                o.keepidle = secs as u32;
            } else {
                o.keepintvl = secs as u32;
            }
        }
        // Linux `do_tcp_setsockopt`: 1..=MAX_TCP_SYNCNT (127).
        (libc::IPPROTO_TCP, libc::TCP_SYNCNT) => {
            let n = int_of(v)?;
            if !(1..=127).contains(&n) {
                return Err(libc::EINVAL);
            }
            o.cfg.syn_retries = n as u32;
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => {
            let n = int_of(v)?;
            if !(1..=127).contains(&n) {
                return Err(libc::EINVAL);
            }
            o.keepcnt = n as u32;
        }
        // Linux `do_tcp_setsockopt`: only 0 and 1 are valid.
        (libc::IPPROTO_TCP, libc::TCP_INQ) => {
            o.inq = match int_of(v)? {
                0 => false,
                1 => true,
                _ => return Err(libc::EINVAL),
            };
        }
        // Milliseconds, 0 = off; Linux refuses a negative value with EINVAL.
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => {
            let ms = u64::try_from(int_of(v)?).map_err(|_| libc::EINVAL)?;
            o.cfg.user_timeout = (ms > 0).then(|| Duration::from_millis(ms));
        }
        // Linux stores any int as the u32 threshold (a negative one is a huge limit).
        (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => {
            o.notsent_lowat = u32::from_ne_bytes(int_of(v)?.to_ne_bytes());
        }
        // TCP Fast Open's queue on a listener (RFC 7413 §5.1; Linux `fastopen_queue_tune`:
        // a non-negative value on a socket not yet connected, capped at somaxconn, else
        // EINVAL).
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => {
            let n = int_of(v)?;
            if n < 0 || matches!(s.kind, Kind::Tcp(Tcp::Stream(_))) {
                return Err(libc::EINVAL);
            }
            o.cfg.fastopen_queue = usize::try_from(n).unwrap_or(0).min(SOMAXCONN);
        }
        // Linux `do_tcp_setsockopt`: 0 or 1 (else EINVAL), EOPNOTSUPP with the client side
        // of Fast Open off, EINVAL once the socket is connecting or connected.
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN_CONNECT) => {
            let on = match int_of(v)? {
                0 => false,
                1 => true,
                _ => return Err(libc::EINVAL),
            };
            if st.stack.tcp().fastopen() & netfold_core::tcp::fastopen::CLIENT_ENABLE == 0 {
                return Err(libc::EOPNOTSUPP);
            }
            if !matches!(s.kind, Kind::Tcp(Tcp::Idle)) {
                return Err(libc::EINVAL);
            }
            o.fastopen_connect = on;
        }
        // Linux `do_tcp_setsockopt` → `tcp_set_congestion_control`: the name up to its NUL,
        // at most TCP_CA_NAME_MAX - 1 bytes; ENOENT for an algorithm it does not have. A
        // live connection switches at once (`tcp_reinit_congestion_control`: cwnd and
        // ssthresh stay, the new algorithm's own state starts fresh; `Conn::set_config`).
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            let OptVal::Bytes(b) = v else {
                return Err(libc::EINVAL);
            };
            let b = &b[..b.len().min(TCP_CA_NAME_MAX - 1)];
            let name = b.split(|&c| c == 0).next().unwrap_or(&[]);
            o.cfg.congestion = congestion_of(name).ok_or(libc::ENOENT)?;
        }
        // The socket's own Fast Open key, 16 bytes (or 32: primary and backup), Linux
        // `tcp_fastopen_reset_cipher` on the socket; any other length is EINVAL.
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN_KEY) => {
            let OptVal::Bytes(b) = v else {
                return Err(libc::EINVAL);
            };
            let key = FastOpenKey::from_bytes(&b).ok_or(libc::EINVAL)?;
            o.fastopen_key = Some(key);
            if let Kind::Tcp(Tcp::Listening { l, .. }) = &s.kind {
                let _ = st
                    .stack
                    .tcp_mut()
                    .set_listener_fastopen_key(l.handle(), Some(key));
            }
        }
        // SO_ERROR, SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN and IP_MTU are read-only.
        _ => return Err(libc::ENOPROTOOPT),
    }
    if level == libc::SOL_SOCKET {
        let now = e.now(st);
        crate::timestamp::enable(st, fd, now);
    }
    let s = st.fds.get(fd)?;
    if is_tcp {
        apply(&mut st.stack, s)?;
        if (level, name) == (libc::IPPROTO_TCP, libc::TCP_NODELAY) && s.opts.cfg.nodelay {
            if let Kind::Tcp(Tcp::Stream(ts)) = &s.kind {
                let _ = st.stack.tcp_mut().push(ts.handle());
            }
        }
    }
    e.changed(st);
    Ok(())
}

/// Linux's `TCP_CA_NAME_MAX`: the size of an algorithm's name field.
const TCP_CA_NAME_MAX: usize = 16;

/// The name Linux gives the algorithm (its "reno" is NewReno: RFC 6582's partial-ACK rule is
/// in `tcp_input.c`, not in the module).
fn congestion_name(c: CongestionControl) -> &'static str {
    match c {
        CongestionControl::Cubic => "cubic",
        CongestionControl::NewReno => "reno",
    }
}

fn congestion_of(name: &[u8]) -> Option<CongestionControl> {
    match name {
        b"cubic" => Some(CongestionControl::Cubic),
        b"reno" => Some(CongestionControl::NewReno),
        _ => None,
    }
}

/// What C type an option takes (for validating `optlen` before reading the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Int,
    Linger,
    Timeval,
    /// A byte string of the given length (TCP_FASTOPEN_KEY).
    Bytes,
    /// An int, or a single unsigned byte when the length is 1 to 3 (IPPROTO_IP options).
    IntOrByte,
}

pub(crate) fn shape(level: i32, name: i32) -> Shape {
    match (level, name) {
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN_KEY | libc::TCP_CONGESTION) => Shape::Bytes,
        (libc::SOL_SOCKET, libc::SO_LINGER) => Shape::Linger,
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO | libc::SO_SNDTIMEO) => Shape::Timeval,
        // Linux `do_ip_setsockopt` reads its integer options (IP_TOS, IP_MTU_DISCOVER, ...)
        // as an int, or as one byte when the caller passes less than an int.
        (libc::IPPROTO_IP, _) => Shape::IntOrByte,
        _ => Shape::Int,
    }
}
