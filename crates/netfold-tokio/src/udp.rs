//! UDP on the driver: [`UdpSocket`] with `send_to().await` and `recv_from().await`.

use crate::driver::{Net, Shared};
use crate::wakers::Dir;
use netfold::socket::UdpSocket as NbUdp;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

/// A UDP socket on a netfold stack. Dropping it closes it (queued datagrams are discarded).
pub struct UdpSocket {
    shared: Arc<Shared>,
    sock: NbUdp,
}

impl UdpSocket {
    /// Binds `local` (0.0.0.0 = any of the stack's addresses; port 0 picks an ephemeral one;
    /// `[::]` is dual-stack, IPv4 peers reported v4-mapped).
    pub async fn bind(net: &Net, local: impl Into<SocketAddr>) -> io::Result<UdpSocket> {
        let local = local.into();
        let shared = Arc::clone(&net.shared);
        shared.stopped()?;
        let sock = NbUdp::bind(&mut shared.lock().stack, local)?;
        Ok(UdpSocket { shared, sock })
    }

    /// Queues one datagram to `to`, waiting while the socket's send queue is full. The
    /// datagram leaves on the driver's next poll (kicked now).
    pub async fn send_to(&self, data: &[u8], to: impl Into<SocketAddr>) -> io::Result<usize> {
        let s = self.sock;
        let to = to.into();
        poll_fn(|cx| {
            self.shared.poll_op(
                cx,
                |st| s.send_to(st, data, to),
                |w, waker| w.udp(s, Dir::Write, waker),
                |_| true,
            )
        })
        .await
    }

    /// The next datagram (truncated to `buf`, as recvfrom does) and its sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let s = self.sock;
        poll_fn(|cx| {
            self.shared.poll_op(
                cx,
                |st| s.recv_from(st, buf),
                |w, waker| w.udp(s, Dir::Read, waker),
                |_| false,
            )
        })
        .await
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr(&self.shared.lock().stack)
    }
}

impl Drop for UdpSocket {
    /// A datagram `send_to` accepted still waits in the socket's queue until the next poll,
    /// and closing discards the queue; a kernel socket's sendto has handed it on already. So
    /// the queue is flushed with one poll first (a datagram waiting for ARP then waits in the
    /// neighbour cache, which closing does not touch).
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        let now = self.shared.now();
        g.poll(now);
        self.sock.close(&mut g.stack);
        drop(g);
        self.shared.kick();
    }
}
