//! AF_XDP on several queues of one interface, one socket per queue, as the devices of shards
//! (one shard per queue): [`open_queues`].
//!
//! The sockets are [`XdpSocket::open_queues`]'s: each has its own UMEM and rings, one XDP
//! program redirects each queue's frames to that queue's socket. Which queue a frame arrives on
//! is the sender's and the driver's choice (a NIC's RSS hash; on a veth, the peer's transmit
//! queue, which the kernel picks per flow from the socket's hash), so the shards steer by
//! following the queues ([`netfold::shard::Steering::FollowTx`]): a connection the peer
//! opens is accepted by the shard its SYN reached, and stays there because the peer keeps the
//! flow on one queue.
//!
//! What does not steer, as on a multi-queue TAP ([`crate::mqtap`]): ARP frames and IPv6
//! Neighbor Discovery messages (RFC 4861 §4, ICMPv6 types 133-137) belong to no flow and come
//! on whatever queue, e.g. shard 1's neighbour reply on queue 0. Every shard needs the peer's
//! link-layer address in its own neighbour table, so each such frame a queue receives is also
//! copied to every other queue's inbox, and that queue's driver is woken through an eventfd.
//!
//! Waking: [`Device::readable_fd`] of a queue is an epoll descriptor watching both the
//! socket and the inbox's eventfd (level-triggered).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;

use crate::mqtap::{drain_inbox, epoll_of, share_neighbour_frames, EventFd, Peer};
use crate::xdp::{XdpConfig, XdpError, XdpSocket};
use netfold::buf::{PacketBuf, Pool};
use netfold::phy::{Device, DeviceCaps, RawFd, MAX_LENT};
use netfold::time::Instant;

/// One queue's AF_XDP socket as one shard's device, with the neighbour-discovery frames the
/// other queues received (see the module doc).
pub struct XdpQueue {
    sock: XdpSocket,
    inbox: Receiver<Vec<u8>>,
    wake: Arc<EventFd>,
    peers: Vec<Peer>,
    /// Watches the socket and `wake`: the descriptor drivers sleep on.
    epoll: OwnedFd,
    /// Neighbour frames copied to the other queues.
    shared: u64,
}

impl std::fmt::Debug for XdpQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpQueue")
            .field("sock", &self.sock)
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

/// AF_XDP sockets on queues `0..n` of `ifname` ([`XdpSocket::open_queues`]), joined so that
/// they share neighbour discovery; queue `k` of the result is the interface's queue `k`.
pub fn open_queues(ifname: &str, n: u32, config: XdpConfig) -> Result<Vec<XdpQueue>, XdpError> {
    let socks = XdpSocket::open_queues(ifname, n, config)?;
    XdpQueue::join(socks).map_err(|e| XdpError::Io("joining the queues", e))
}

impl XdpQueue {
    fn join(socks: Vec<XdpSocket>) -> io::Result<Vec<XdpQueue>> {
        let n = socks.len();
        let wakes: Vec<Arc<EventFd>> = (0..n)
            .map(|_| EventFd::new().map(Arc::new))
            .collect::<io::Result<_>>()?;
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| channel::<Vec<u8>>()).unzip();
        socks
            .into_iter()
            .zip(rxs)
            .enumerate()
            .map(|(k, (sock, inbox))| {
                let epoll = epoll_of(&[sock.as_raw_fd(), wakes[k].0.as_raw_fd()])?;
                Ok(XdpQueue {
                    sock,
                    inbox,
                    wake: Arc::clone(&wakes[k]),
                    peers: (0..n)
                        .filter(|&j| j != k)
                        .map(|j| Peer {
                            tx: txs[j].clone(),
                            wake: Arc::clone(&wakes[j]),
                        })
                        .collect(),
                    epoll,
                    shared: 0,
                })
            })
            .collect()
    }

    /// The queue's socket (queue number, modes, counters).
    pub fn socket(&self) -> &XdpSocket {
        &self.sock
    }

    /// Neighbour-discovery frames this queue received and copied to the other queues.
    pub fn shared(&self) -> u64 {
        self.shared
    }
}

impl Device for XdpQueue {
    fn caps(&self) -> DeviceCaps {
        self.sock.caps()
    }

    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let mut n = drain_inbox(&self.wake, &self.inbox, pool, out, max);
        let first = out.len();
        n += self.sock.recv_batch(now, pool, out, max - n);
        share_neighbour_frames(
            out[first..].iter().map(PacketBuf::as_slice),
            &self.peers,
            &mut self.shared,
        );
        n
    }

    /// The copies from the other queues (lent from their own buffers), then the socket's
    /// lent frames, the neighbour frames among them copied to the other queues.
    fn recv_lent(
        &mut self,
        now: Instant,
        max: usize,
        f: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<usize> {
        if !self.sock.lends_rx() {
            return None;
        }
        // Cleared before the inbox is drained: a copy queued after the drain signals again.
        self.wake.clear();
        let mut copies = Vec::new();
        while copies.len() < max.min(MAX_LENT) {
            let Ok(c) = self.inbox.try_recv() else { break };
            copies.push(c);
        }
        if !copies.is_empty() {
            let refs: Vec<&[u8]> = copies.iter().map(Vec::as_slice).collect();
            f(&refs);
        }
        let (peers, shared) = (&self.peers, &mut self.shared);
        let lent = self
            .sock
            .recv_lent(now, max - copies.len(), &mut |frames: &[&[u8]]| {
                share_neighbour_frames(frames.iter().copied(), peers, shared);
                f(frames);
            });
        Some(copies.len() + lent.unwrap_or(0))
    }

    fn tx_lend(&mut self, pool: &mut Pool) {
        self.sock.tx_lend(pool)
    }

    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        self.sock.send_batch(now, pool, frames)
    }

    /// The epoll descriptor over the socket and the inbox's eventfd.
    fn readable_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }
}
