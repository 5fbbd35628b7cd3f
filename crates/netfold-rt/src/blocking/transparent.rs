//! The blocking API of transparent mode (`StackConfig::transparent`, Linux's IP_TRANSPARENT
//! behind a TPROXY rule): a listener that accepts connections to any destination, and a UDP
//! socket that receives datagrams to any destination and answers from it. What a
//! tun2socks-style forwarder on a TUN device needs (see
//! `crates/netfold-os/examples/tproxy.rs`).

use super::{Interest, Runtime, TcpListener, Timeouts, UdpSocket};
use netfold::socket::{TcpListener as NbListener, UdpSocket as NbUdp};
use netfold::tcp;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

impl Runtime {
    /// The transparent listener ([`NbListener::bind_transparent`]): each accepted stream's
    /// `local_addr()` is the original destination of its SYN. The stack must be in
    /// transparent mode (`AddrNotAvailable` otherwise).
    pub fn listen_transparent(
        &self,
        backlog: usize,
        config: tcp::Config,
    ) -> io::Result<TcpListener> {
        let l = self.with_stack(|s| NbListener::bind_transparent(s, backlog, config))?;
        Ok(TcpListener {
            shared: Arc::clone(&self.shared),
            inner: l,
        })
    }

    /// The transparent UDP socket ([`NbUdp::bind_transparent`]): read with
    /// [`UdpSocket::recv_from_to`], answer with [`UdpSocket::send_from_to`].
    pub fn udp_bind_transparent(&self) -> io::Result<UdpSocket> {
        let sock = self.with_stack(NbUdp::bind_transparent)?;
        Ok(UdpSocket {
            shared: Arc::clone(&self.shared),
            sock,
            timeouts: Timeouts::default(),
        })
    }
}

impl UdpSocket {
    /// The next datagram, its sender and the address it was sent to (the original
    /// destination on a transparent socket), waiting at most the read timeout.
    pub fn recv_from_to(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        let s = self.sock;
        self.shared.wait_for(
            Timeouts::get(&self.timeouts.read),
            Interest::UdpRecv(s),
            |st, _| s.recv_from_to(st, buf),
        )
    }

    /// Queues one datagram to `to` sent from `from` (a transparent socket only), waiting
    /// while the send queue is full, at most the write timeout.
    pub fn send_from_to(
        &self,
        data: &[u8],
        from: impl Into<SocketAddr>,
        to: impl Into<SocketAddr>,
    ) -> io::Result<usize> {
        let s = self.sock;
        let (from, to) = (from.into(), to.into());
        self.shared.wait_for(
            Timeouts::get(&self.timeouts.write),
            Interest::UdpSend(s),
            |st, _| s.send_from_to(st, data, from, to),
        )
    }
}
