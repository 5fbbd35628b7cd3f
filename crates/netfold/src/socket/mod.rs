//! User-facing sockets: non-blocking handles on the sans-IO core ([`TcpListener`],
//! [`TcpStream`], [`UdpSocket`]). Each call takes the [`Stack`] it lives in and returns
//! `io::ErrorKind::WouldBlock` when it cannot make progress until the stack is polled again.
//!
//! The blocking layer on top (a driver thread that owns a stack and its device, with
//! `std::io::Read + Write` streams and an `accept()`-ing listener) is the `netfold-rt` crate.
//!
//! Addresses are `std::net::SocketAddr`, as in `std::net`: calls take `impl Into<SocketAddr>`
//! (a `SocketAddrV4` or `SocketAddrV6` works too) and return `SocketAddr`. Dual stack as on
//! Linux (`net.ipv6.bindv6only = 0`): a listener or UDP socket on `[::]:p` serves IPv4 and
//! IPv6 (IPv6 only with `tcp::Config::v6only` / `UdpBindOptions::v6only`), and reports IPv4
//! peers as v4-mapped `[::ffff:a.b.c.d]:port`; one on `0.0.0.0:p` is IPv4 only; a stream
//! connecting to a v4-mapped address runs over IPv4 and reports mapped addresses. Until the
//! stack has an IPv6 address, connecting or sending to an IPv6 peer fails at once with
//! `NetworkUnreachable` (counted in `Counters::ipv6_no_source`).

use crate::iface::{Stack, UdpBindOptions, UdpError, UdpHandle};
use crate::tcp;
use crate::time::Instant;
use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Maps a TCP engine error onto the `std::io::ErrorKind` a `std::net` user expects.
pub fn io_error(e: tcp::Error) -> io::Error {
    use io::ErrorKind as K;
    // WouldBlock is the hot path of every non-blocking loop: a bare kind, no heap allocation
    // (io::Error::new with a message allocates).
    if e == tcp::Error::WouldBlock {
        return K::WouldBlock.into();
    }
    let (kind, msg) = match e {
        tcp::Error::WouldBlock => (K::WouldBlock, "operation would block"),
        tcp::Error::InvalidHandle => (K::NotConnected, "socket is closed"),
        tcp::Error::ConnectionRefused => (K::ConnectionRefused, "connection refused"),
        tcp::Error::ConnectionReset => (K::ConnectionReset, "connection reset by peer"),
        tcp::Error::TimedOut => (K::TimedOut, "connection timed out"),
        tcp::Error::NotConnected => (K::NotConnected, "socket is not connected"),
        tcp::Error::BrokenPipe => (K::BrokenPipe, "broken pipe"),
        tcp::Error::AddrInUse => (K::AddrInUse, "address in use"),
        tcp::Error::AddrNotAvailable => (K::AddrNotAvailable, "address not available"),
        tcp::Error::InvalidInput => (K::InvalidInput, "invalid argument"),
        tcp::Error::HostUnreachable => (K::HostUnreachable, "no route to host"),
        tcp::Error::NetworkUnreachable => (K::NetworkUnreachable, "network is unreachable"),
    };
    io::Error::new(kind, msg)
}

/// What a socket can do now without `WouldBlock`, for pollers that sleep until it changes (the
/// tokio adapter's wakers). Computed from the socket's queues and state; takes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readiness {
    /// A read (or accept) returns data, end of stream, or an error.
    pub readable: bool,
    /// A write (or a pending connect's completion) returns progress or an error. For a TCP
    /// stream with data queued, only once the free space is at least half the queued bytes
    /// (Linux's POLLOUT rule, `sk_stream_is_writeable`), so waiters wake for real room.
    pub writable: bool,
}

impl Readiness {
    /// Both directions: the handle is gone or the connection failed, and any call reports it.
    const ALL: Readiness = Readiness {
        readable: true,
        writable: true,
    };
}

/// A listening TCP socket (non-blocking).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpListener {
    handle: tcp::Handle,
}

impl TcpListener {
    /// Listens on `local` (address 0.0.0.0 means the stack's address; `[::]` is the IPv6
    /// wildcard, dual-stack unless `config.v6only`) with `backlog` pending connections at
    /// most, using `config` for accepted connections.
    pub fn bind(
        stack: &mut Stack,
        local: impl Into<SocketAddr>,
        backlog: usize,
        config: tcp::Config,
    ) -> io::Result<Self> {
        let local = resolve_local(stack, local.into())?;
        let handle = stack
            .tcp_mut()
            .listen(local, backlog, config)
            .map_err(io_error)?;
        Ok(TcpListener { handle })
    }

    /// A transparent listener (Linux's IP_TRANSPARENT listener behind a TPROXY rule, what a
    /// tun2socks-style tool needs): it accepts connections to any destination address and
    /// port that no other socket takes, and each accepted stream's
    /// [`TcpStream::local_addr`] is the original destination, which its replies come from.
    /// Needs transparent mode (`StackConfig::transparent`; `AddrNotAvailable` otherwise).
    /// One per stack (`AddrInUse`).
    pub fn bind_transparent(
        stack: &mut Stack,
        backlog: usize,
        config: tcp::Config,
    ) -> io::Result<Self> {
        if !stack.config().transparent {
            return Err(io_error(tcp::Error::AddrNotAvailable));
        }
        let handle = stack
            .tcp_mut()
            .listen_transparent(backlog, config)
            .map_err(io_error)?;
        Ok(TcpListener { handle })
    }

    /// Wraps a listener handle obtained from the TCP layer directly.
    pub fn from_handle(handle: tcp::Handle) -> Self {
        TcpListener { handle }
    }

    /// The next established connection and its peer (v4-mapped for an IPv4 peer of an IPv6
    /// listener), or `WouldBlock`.
    pub fn accept(&self, stack: &mut Stack) -> io::Result<(TcpStream, SocketAddr)> {
        let handle = stack.tcp_mut().accept(self.handle).map_err(io_error)?;
        let peer = stack.tcp().peer_addr(handle).map_err(io_error)?;
        Ok((TcpStream { handle }, peer))
    }

    pub fn local_addr(&self, stack: &Stack) -> io::Result<SocketAddr> {
        stack.tcp().local_addr(self.handle).map_err(io_error)
    }

    /// Readable when a connection waits in the accept queue (or the handle is gone).
    pub fn readiness(&self, stack: &mut Stack) -> Readiness {
        match stack.tcp_mut().accept_queue_len(self.handle) {
            Ok(n) => Readiness {
                readable: n > 0,
                writable: false,
            },
            Err(_) => Readiness::ALL,
        }
    }

    /// Stops listening; pending connections are reset.
    pub fn close(self, stack: &mut Stack) -> io::Result<()> {
        stack.tcp_mut().close(self.handle).map_err(io_error)
    }

    pub fn handle(&self) -> tcp::Handle {
        self.handle
    }
}

/// A TCP connection (non-blocking).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpStream {
    handle: tcp::Handle,
}

impl TcpStream {
    /// Starts an active open to `remote` from an ephemeral port. Returns at once; the
    /// connection is usable when [`TcpStream::is_connected`] says so (or an error is pending).
    /// A v4-mapped `remote` opens an IPv4 connection reported with mapped addresses; an IPv6
    /// `remote` while the stack has no IPv6 address fails at once (`NetworkUnreachable`).
    pub fn connect(
        stack: &mut Stack,
        now: Instant,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
    ) -> io::Result<Self> {
        let remote = remote.into();
        let local = stack.tcp_local_for(remote).map_err(io_error)?;
        let handle = stack
            .tcp_mut()
            .connect(now, local, remote, config)
            .map_err(io_error)?;
        Ok(TcpStream { handle })
    }

    /// [`TcpStream::connect`] from the explicit local port `local_port` (0 = an ephemeral one),
    /// the source address chosen as `connect` chooses it. A sharded application picks the port
    /// so that the RSS hash of the connection's 4-tuple lands on its shard
    /// ([`crate::rss::Rss::pick_local_port_ip`]). `AddrInUse` if that 4-tuple is taken (also
    /// by a connection in TIME-WAIT): the caller tries another port.
    pub fn connect_from(
        stack: &mut Stack,
        now: Instant,
        local_port: u16,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
    ) -> io::Result<Self> {
        let remote = remote.into();
        let mut local = stack.tcp_local_for(remote).map_err(io_error)?;
        local.set_port(local_port);
        let handle = stack
            .tcp_mut()
            .connect(now, local, remote, config)
            .map_err(io_error)?;
        Ok(TcpStream { handle })
    }

    /// Wraps a handle obtained from the TCP layer directly.
    pub fn from_handle(handle: tcp::Handle) -> Self {
        TcpStream { handle }
    }

    pub fn handle(&self) -> tcp::Handle {
        self.handle
    }

    /// `Ok(true)` once established (or later states where data may flow), `Ok(false)` while the
    /// handshake runs, `Err` if it failed (refused, timed out, reset).
    pub fn is_connected(&self, stack: &mut Stack) -> io::Result<bool> {
        if let Some(e) = stack.tcp_mut().take_error(self.handle).map_err(io_error)? {
            return Err(io_error(e));
        }
        let st = stack.tcp().state(self.handle).map_err(io_error)?;
        Ok(!matches!(
            st,
            tcp::State::SynSent | tcp::State::SynReceived | tcp::State::Closed | tcp::State::Listen
        ))
    }

    /// Readable with bytes queued, after the peer's FIN, or once the connection ended;
    /// writable with send space in a state that sends, or when a write would fail at once
    /// (after shutdown, once closed). Neither while the handshake runs.
    pub fn readiness(&self, stack: &Stack) -> Readiness {
        use tcp::State as S;
        let tcp = stack.tcp();
        let (Ok(state), Ok(queued), Ok(space), Ok(unsent)) = (
            tcp.state(self.handle),
            tcp.recv_queue(self.handle),
            tcp.send_space(self.handle),
            tcp.send_queue(self.handle),
        ) else {
            return Readiness::ALL;
        };
        // Linux `sk_stream_is_writeable`: writable once the free space is at least half of
        // what is queued (`sk_stream_wspace >= sk_stream_min_wspace`), so a blocked writer is
        // woken for a third of the buffer, not for every ACK that frees a few bytes.
        let space = if space > 0 && space >= unsent / 2 {
            space
        } else {
            0
        };
        match state {
            S::SynSent | S::SynReceived | S::Listen => Readiness::default(),
            S::Established | S::FinWait1 | S::FinWait2 => Readiness {
                readable: queued > 0,
                // After shutdown_write (FIN-WAIT) a write fails with BrokenPipe.
                writable: space > 0 || state != S::Established,
            },
            // The peer's FIN has arrived: a read returns the rest, then end of stream.
            S::CloseWait => Readiness {
                readable: true,
                writable: space > 0,
            },
            S::Closing | S::LastAck | S::TimeWait | S::Closed => Readiness::ALL,
        }
    }

    /// Reads in-order data; `Ok(0)` at end of stream.
    pub fn read(&self, stack: &mut Stack, buf: &mut [u8]) -> io::Result<usize> {
        stack.tcp_mut().recv(self.handle, buf).map_err(io_error)
    }

    /// Posts a read (single-pass receive): `buf` is lent to the connection, and in-order
    /// data arriving while nothing older waits in the receive ring goes from the frames
    /// straight into it, the checksum verified in that copy (one pass per byte instead of a
    /// copy into the ring and one out of it). Take it back with [`TcpStream::take_read`];
    /// meanwhile `read` fails with `InvalidInput`, and the stream is readable once the
    /// buffer holds data. See `TcpLayer::post_read`. An error gives the buffer back.
    pub fn post_read(&self, stack: &mut Stack, buf: Vec<u8>) -> Result<(), (io::Error, Vec<u8>)> {
        stack
            .tcp_mut()
            .post_read(self.handle, buf)
            .map_err(|(e, b)| (io_error(e), b))
    }

    /// Takes the posted read back: the buffer and what the read came to, as `read` reports
    /// it (`Ok(n)`: data in `buf[..n]`; `Ok(0)`: end of stream; `WouldBlock`: nothing yet).
    /// The outer error is `InvalidInput` when no read is posted.
    pub fn take_read(&self, stack: &mut Stack) -> io::Result<(Vec<u8>, io::Result<usize>)> {
        let r = stack.tcp_mut().take_read(self.handle).map_err(io_error)?;
        Ok((r.buf, r.result.map_err(io_error)))
    }

    /// A borrowing read: `f` sees the in-order bytes where they lie in the receive ring (two
    /// slices; the ring may wrap) and returns how many it consumed, released without a copy.
    /// `Ok(0)` at end of stream (`f` not called), `WouldBlock` when nothing is queued.
    pub fn read_in_place(
        &self,
        stack: &mut Stack,
        f: impl FnOnce(&[u8], &[u8]) -> usize,
    ) -> io::Result<usize> {
        stack
            .tcp_mut()
            .recv_in_place(self.handle, f)
            .map_err(io_error)
    }

    /// Turns the frame-level borrowing read on or off (`TcpLayer::set_borrow_frames`): while
    /// on, in-order payload stays in the packet buffers it arrived in and
    /// [`TcpStream::read_frames`] hands it out without a copy.
    pub fn set_borrow_frames(&self, stack: &mut Stack, on: bool) -> io::Result<()> {
        stack
            .tcp_mut()
            .set_borrow_frames(self.handle, on)
            .map_err(io_error)
    }

    /// A frame read (`TcpLayer::recv_frames`): up to `max` borrowed frames appended to `out`;
    /// dropping one returns its buffer to the pool (also after the stack is gone). `Ok(0)` at
    /// end of stream, `WouldBlock` when nothing is queued.
    pub fn read_frames(
        &self,
        stack: &mut Stack,
        out: &mut Vec<crate::buf::BorrowedPayload>,
        max: usize,
    ) -> io::Result<usize> {
        stack
            .tcp_mut()
            .recv_frames(self.handle, out, max)
            .map_err(io_error)
    }

    /// Queues data; returns how much was taken, `WouldBlock` if the send buffer is full.
    pub fn write(&self, stack: &mut Stack, data: &[u8]) -> io::Result<usize> {
        stack.tcp_mut().send(self.handle, data).map_err(io_error)
    }

    /// Zero-copy send (`tcp/zerocopy.rs`): queues (a prefix of) `buf` by reference instead of
    /// copying it; returns its id and how many bytes were taken (`WouldBlock` if none: the
    /// send buffer is full, or too many completions wait to be read). The buffer is released
    /// (and its completion posted to [`TcpStream::zc_completions`]) once acknowledged, or once
    /// the connection ends without that.
    pub fn send_zc(&self, stack: &mut Stack, buf: tcp::zerocopy::ZcBuf) -> io::Result<tcp::ZcSend> {
        self.send_zc_with(stack, buf, 0)
    }

    /// [`TcpStream::send_zc`] with a value of the caller's that comes back in the completion.
    pub fn send_zc_with(
        &self,
        stack: &mut Stack,
        buf: tcp::zerocopy::ZcBuf,
        user: u64,
    ) -> io::Result<tcp::ZcSend> {
        stack
            .tcp_mut()
            .send_zc(self.handle, buf, user)
            .map_err(io_error)
    }

    /// The connection's zero-copy completions: a handle to keep (it works from any thread and
    /// after the stream is closed).
    pub fn zc_completions(&self, stack: &mut Stack) -> io::Result<tcp::ZcCompletions> {
        stack
            .tcp_mut()
            .zc_completions(self.handle)
            .map_err(io_error)
    }

    /// shutdown(SHUT_WR): FIN after the queued data.
    pub fn shutdown_write(&self, stack: &mut Stack) -> io::Result<()> {
        stack
            .tcp_mut()
            .shutdown_write(self.handle)
            .map_err(io_error)
    }

    /// close(): the handle is gone; the stack finishes the close in the background.
    pub fn close(self, stack: &mut Stack) -> io::Result<()> {
        stack.tcp_mut().close(self.handle).map_err(io_error)
    }

    /// Abort with RST.
    pub fn abort(self, stack: &mut Stack) -> io::Result<()> {
        stack.tcp_mut().abort(self.handle).map_err(io_error)
    }

    pub fn state(&self, stack: &Stack) -> io::Result<tcp::State> {
        stack.tcp().state(self.handle).map_err(io_error)
    }
    pub fn local_addr(&self, stack: &Stack) -> io::Result<SocketAddr> {
        stack.tcp().local_addr(self.handle).map_err(io_error)
    }
    pub fn peer_addr(&self, stack: &Stack) -> io::Result<SocketAddr> {
        stack.tcp().peer_addr(self.handle).map_err(io_error)
    }
    pub fn set_nodelay(&self, stack: &mut Stack, nodelay: bool) -> io::Result<()> {
        let mut cfg = stack.tcp().config(self.handle).map_err(io_error)?;
        cfg.nodelay = nodelay;
        stack
            .tcp_mut()
            .set_config(self.handle, cfg)
            .map_err(io_error)
    }
}

/// Maps a UDP error onto `std::io::ErrorKind`.
pub fn udp_io_error(e: UdpError) -> io::Error {
    use io::ErrorKind as K;
    if e == UdpError::WouldBlock {
        return K::WouldBlock.into();
    }
    let (kind, msg) = match e {
        UdpError::WouldBlock => (K::WouldBlock, "operation would block"),
        UdpError::InvalidHandle => (K::NotConnected, "socket is closed"),
        UdpError::AddrInUse => (K::AddrInUse, "address in use"),
        UdpError::AddrNotAvailable => (K::AddrNotAvailable, "address not available"),
        UdpError::InvalidInput => (K::InvalidInput, "invalid destination"),
        UdpError::MessageTooLarge => (
            K::InvalidInput,
            "message too long (beyond 65507 bytes, or beyond the path MTU with DF)",
        ),
        UdpError::NoBufs => (K::OutOfMemory, "too many sockets"),
        UdpError::ConnectionRefused => (K::ConnectionRefused, "connection refused"),
        UdpError::HostUnreachable => (K::HostUnreachable, "no route to host"),
        UdpError::NetworkUnreachable => (K::NetworkUnreachable, "network is unreachable"),
    };
    io::Error::new(kind, msg)
}

/// A UDP socket (non-blocking).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSocket {
    handle: UdpHandle,
}

impl UdpSocket {
    /// Binds `local` (an unspecified address means any; port 0 picks an ephemeral one);
    /// `[::]` is dual-stack (see the module doc).
    pub fn bind(stack: &mut Stack, local: impl Into<SocketAddr>) -> io::Result<Self> {
        let handle = stack.udp_bind(local).map_err(udp_io_error)?;
        Ok(UdpSocket { handle })
    }

    /// [`UdpSocket::bind`] with IPV6_V6ONLY and other bind-time options.
    pub fn bind_with(
        stack: &mut Stack,
        local: impl Into<SocketAddr>,
        opts: UdpBindOptions,
    ) -> io::Result<Self> {
        let handle = stack.udp_bind_with(local, opts).map_err(udp_io_error)?;
        Ok(UdpSocket { handle })
    }

    /// The transparent UDP socket (see [`Stack::udp_bind_transparent`]): datagrams to any
    /// destination no other socket takes, read with [`UdpSocket::recv_from_to`], answered with
    /// [`UdpSocket::send_from_to`]. Needs transparent mode (`StackConfig::transparent`).
    pub fn bind_transparent(stack: &mut Stack) -> io::Result<Self> {
        let handle = stack.udp_bind_transparent().map_err(udp_io_error)?;
        Ok(UdpSocket { handle })
    }

    /// Queues one datagram to `to` sent from `from` (a transparent socket only; any unicast
    /// source, typically the original destination of the datagram being answered).
    pub fn send_from_to(
        &self,
        stack: &mut Stack,
        data: &[u8],
        from: impl Into<SocketAddr>,
        to: impl Into<SocketAddr>,
    ) -> io::Result<usize> {
        stack
            .udp_send_from_to(self.handle, data, from, to)
            .map_err(udp_io_error)?;
        Ok(data.len())
    }

    /// The next datagram, its sender and the address it was sent to (the original
    /// destination, on a transparent socket); `WouldBlock` when none is queued.
    pub fn recv_from_to(
        &self,
        stack: &mut Stack,
        buf: &mut [u8],
    ) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        stack
            .udp_recv_from_to(self.handle, buf)
            .map_err(udp_io_error)
    }

    /// Queues one datagram to `to`; `WouldBlock` when the send queue is full.
    pub fn send_to(
        &self,
        stack: &mut Stack,
        data: &[u8],
        to: impl Into<SocketAddr>,
    ) -> io::Result<usize> {
        stack
            .udp_send_to(self.handle, data, to)
            .map_err(udp_io_error)?;
        Ok(data.len())
    }

    /// The next datagram (truncated to `buf`) and its sender; `WouldBlock` when none is queued.
    pub fn recv_from(&self, stack: &mut Stack, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        stack.udp_recv_from(self.handle, buf).map_err(udp_io_error)
    }

    /// Readable with a datagram queued, writable with room in the send queue.
    pub fn readiness(&self, stack: &Stack) -> Readiness {
        match stack.udp_queues(self.handle) {
            Ok((rx, tx_space)) => Readiness {
                readable: rx > 0,
                writable: tx_space > 0,
            },
            Err(_) => Readiness::ALL,
        }
    }

    pub fn local_addr(&self, stack: &Stack) -> io::Result<SocketAddr> {
        stack.udp_local_addr(self.handle).map_err(udp_io_error)
    }

    /// connect(2): ICMP errors about datagrams to `peer` (port unreachable, a next hop that
    /// never answers ARP) are reported once, by the next `send_to`/`recv_from` or by
    /// [`UdpSocket::take_error`], as `ConnectionRefused` / `HostUnreachable`.
    pub fn connect(&self, stack: &mut Stack, peer: impl Into<SocketAddr>) -> io::Result<()> {
        stack
            .udp_connect(self.handle, Some(peer.into()))
            .map_err(udp_io_error)
    }

    /// The pending asynchronous error (SO_ERROR), cleared by reading it.
    pub fn take_error(&self, stack: &mut Stack) -> io::Result<Option<io::Error>> {
        Ok(stack
            .udp_take_error(self.handle)
            .map_err(udp_io_error)?
            .map(udp_io_error))
    }

    pub fn close(self, stack: &mut Stack) {
        stack.udp_close(self.handle);
    }

    pub fn handle(&self) -> UdpHandle {
        self.handle
    }
}

/// The address to listen on: 0.0.0.0 means the stack's own; any other IPv4 address must be
/// it (bind(2) and listen(2) on an address that is not local fail with EADDRNOTAVAIL, and such
/// a listener could never accept). The same for a v4-mapped address (the listener stays an
/// IPv6 socket: it is passed on mapped). `[::]` stays the IPv6 wildcard (dual-stack); another
/// IPv6 address must be one of the interface's.
pub fn resolve_local(stack: &Stack, local: SocketAddr) -> io::Result<SocketAddr> {
    let ours = stack.config().addr;
    let v4 = |ip: std::net::Ipv4Addr| {
        if ip.is_unspecified() || ip == ours {
            Ok(ours)
        } else {
            Err(io_error(tcp::Error::AddrNotAvailable))
        }
    };
    match local {
        SocketAddr::V4(l) => Ok(SocketAddrV4::new(v4(*l.ip())?, l.port()).into()),
        SocketAddr::V6(l) => match l.ip().to_ipv4_mapped() {
            Some(m) => Ok(SocketAddrV6::new(v4(m)?.to_ipv6_mapped(), l.port(), 0, 0).into()),
            None if l.ip().is_unspecified() || stack.has_ipv6_addr(*l.ip()) => {
                Ok(SocketAddrV6::new(*l.ip(), l.port(), 0, 0).into())
            }
            None => Err(io_error(tcp::Error::AddrNotAvailable)),
        },
    }
}

/// `a` as an IPv6 socket reports it: IPv4 addresses v4-mapped (RFC 3493 §3.7).
pub fn to_mapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v4) => SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0).into(),
        v6 => v6,
    }
}

/// `a` with a v4-mapped IPv6 address turned back into IPv4 (what `std` calls
/// `Ipv6Addr::to_ipv4_mapped`), for code that wants to print or compare the IPv4 peer of a
/// dual-stack socket.
pub fn unmapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => a,
        },
        v4 => v4,
    }
}
