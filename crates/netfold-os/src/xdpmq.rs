//! AF_XDP on several queues of one interface, one socket per queue, as the devices of shards
//! (one shard per queue): [`open_queues`].
//!
//! The sockets are [`XdpSocket::open_queues`]'s: each has its own UMEM and rings, one XDP
//! program redirects each queue's frames to that queue's socket (an XDP program can hand a
//! frame only to the socket of the queue it arrived on: `xsk_rcv` refuses any other).
//!
//! Steering: which queue a frame arrives on is the sender's and the driver's choice. A NIC's
//! RSS hashes with its own key; on a veth it is the peer's transmit queue, which Linux picks
//! per flow from the socket's random `sk_txhash` and *changes* whenever it rethinks that hash:
//! after a retransmission timeout (`tcp_write_timeout`, `sk_rethink_txhash`) and when it
//! receives a spurious retransmission (`tcp_rcv_spurious_retrans`, e.g. our tail-loss probe
//! of data it already has). A connection that stayed on the queue its SYN reached would then
//! see its next segments on another shard, which knows no such connection and resets it. So
//! the queues steer in software, as Linux's receive packet steering does (RPS,
//! `get_rps_cpu`): with `n > 1` queues every TCP/UDP frame's 4-tuple is hashed with
//! `Rss::new(MICROSOFT_KEY, n)` ([`XdpQueue::rss`], the table of the multi-queue in-memory
//! link and of the TAP's eBPF steering), and a frame that arrived on another queue than its
//! hash's is copied to that queue's inbox ([`XdpQueue::steered`]) and its driver woken. A
//! flow's shard is then a pure function of its 4-tuple, whatever queue the peer uses:
//! - a connection the peer opens is accepted by the shard of its 4-tuple's hash;
//! - a connection a shard opens picks a local port whose 4-tuple hashes to the shard
//!   ([`netfold::shard::Steering::Rss`], [`netfold::rss::Rss::local_ports`]).
//!
//! The cost is a copy and a cross-core hand-off for each frame that arrives on the wrong
//! queue (on a veth, the flows whose `sk_txhash` disagrees with the Toeplitz hash: about half
//! of them with two queues); one queue steers nothing.
//!
//! What does not steer, as on a multi-queue TAP ([`crate::mqtap`]): ARP frames and IPv6
//! Neighbor Discovery messages (RFC 4861 §4, ICMPv6 types 133-137) belong to no flow and come
//! on whatever queue, e.g. shard 1's neighbour reply on queue 0. Every shard needs the peer's
//! link-layer address in its own neighbour table, so each such frame a queue receives is also
//! copied to every other queue's inbox, and that queue's driver is woken through an eventfd.
//! Other frames without a 4-tuple (ICMP, IP fragments) stay on the queue they arrived on.
//!
//! Inboxes are bounded ([`crate::mqtap`]'s 1,000 frames, Linux's `netdev_max_backlog`): a
//! frame handed to a full one is dropped and counted ([`XdpQueue::steer_dropped`]).
//!
//! Waking: [`Device::readable_fd`] of a queue is an epoll descriptor watching both the
//! socket and the inbox's eventfd (level-triggered).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use crate::mqtap::{drain_inbox, epoll_of, inboxes, share_neighbour_frames, EventFd, Peer};
use crate::xdp::{XdpConfig, XdpError, XdpSocket};
use netfold::buf::{PacketBuf, Pool};
use netfold::phy::{Device, DeviceCaps, RawFd, MAX_LENT};
use netfold::rss::{Rss, MICROSOFT_KEY};
use netfold::shard::Steering;
use netfold::time::Instant;

/// One queue's AF_XDP socket as one shard's device, with the neighbour-discovery frames the
/// other queues received (see the module doc).
pub struct XdpQueue {
    sock: XdpSocket,
    inbox: Receiver<Vec<u8>>,
    wake: Arc<EventFd>,
    /// The other queues and the flows' table (see the module doc).
    steer: Steer,
    /// Watches the socket and `wake`: the descriptor drivers sleep on.
    epoll: OwnedFd,
    /// Neighbour frames copied to the other queues.
    shared: u64,
}

/// One queue's software steering: which queue a frame belongs to, and the hand-off of the
/// frames that belong to another.
struct Steer {
    /// Which queue of the interface this is.
    me: usize,
    /// The table, with more than one queue.
    rss: Option<Arc<Rss>>,
    /// The other queues, in queue order (queue `j` is `peers[j]` below `me`, `peers[j - 1]`
    /// above it).
    peers: Vec<Peer>,
    /// Which peers were handed frames in this receive call (bit `p` for `peers[p]`), so
    /// each is woken once per call, not once per frame.
    handed: u128,
    /// Frames that arrived here and were handed to the queue of their 4-tuple's hash.
    steered: u64,
    /// Frames for another queue dropped because its inbox was full.
    dropped: u64,
}

impl Steer {
    /// The queue a received frame belongs to, if not this one: its 4-tuple's under the
    /// table (frames without one stay).
    #[inline]
    fn owner(&self, f: &[u8]) -> Option<usize> {
        let j = self.rss.as_deref()?.shard_of_frame(f)?;
        (j != self.me).then_some(j)
    }

    /// Hands `f` to queue `j` (not this one), counting it; the peer is woken by
    /// [`Steer::wake`] once the receive call ends.
    fn hand(&mut self, j: usize, f: &[u8]) {
        let p = if j < self.me { j } else { j - 1 };
        match self.peers.get(p) {
            Some(peer) if peer.hand(f) => {
                self.handed |= 1 << p;
                self.steered += 1;
            }
            _ => self.dropped += 1,
        }
    }

    /// Wakes each peer handed frames since the last call, once.
    fn wake(&mut self) {
        while self.handed != 0 {
            let p = self.handed.trailing_zeros() as usize;
            self.handed &= self.handed - 1;
            if let Some(peer) = self.peers.get(p) {
                peer.wake.signal();
            }
        }
    }
}

impl std::fmt::Debug for XdpQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpQueue")
            .field("sock", &self.sock)
            .field("index", &self.steer.me)
            .field("shared", &self.shared)
            .field("steered", &self.steer.steered)
            .finish_non_exhaustive()
    }
}

/// AF_XDP sockets on queues `0..n` of `ifname` ([`XdpSocket::open_queues`]), joined so that
/// they share neighbour discovery and, with `n > 1`, steer each flow to the queue of its
/// 4-tuple's hash (see the module doc); queue `k` of the result is the interface's queue `k`.
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
        let (txs, rxs) = inboxes(n);
        // One table for all the queues; none to steer by with one queue. The table has 128
        // entries, and the `handed` mask a bit per peer.
        if n > netfold::rss::INDIRECTION_ENTRIES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{n} AF_XDP queues: at most 128 steer in software"),
            ));
        }
        let rss = (n > 1).then(|| Arc::new(Rss::new(MICROSOFT_KEY, n)));
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
                    steer: Steer {
                        me: k,
                        rss: rss.clone(),
                        peers: (0..n)
                            .filter(|&j| j != k)
                            .map(|j| Peer {
                                tx: txs[j].clone(),
                                wake: Arc::clone(&wakes[j]),
                            })
                            .collect(),
                        handed: 0,
                        steered: 0,
                        dropped: 0,
                    },
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

    /// Which queue of the interface this is.
    pub fn index(&self) -> usize {
        self.steer.me
    }

    /// The table the queues steer flows by (`Rss::new(MICROSOFT_KEY, n)`), with more than
    /// one queue.
    pub fn rss(&self) -> Option<&Arc<Rss>> {
        self.steer.rss.as_ref()
    }

    /// How shards over these queues steer: [`Steering::Rss`] with [`XdpQueue::rss`], so that
    /// a shard's `connect` picks a port of its own hash; [`Steering::FollowTx`] (nothing to
    /// steer) with one queue.
    pub fn steering(&self) -> Steering {
        Steering::from_rss(self.steer.rss.clone())
    }

    /// Frames that arrived on this queue and were handed to the queue of their 4-tuple's
    /// hash (see the module doc).
    pub fn steered(&self) -> u64 {
        self.steer.steered
    }

    /// Frames for another queue dropped because that queue's inbox was full.
    pub fn steer_dropped(&self) -> u64 {
        self.steer.dropped
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
            &self.steer.peers,
            &mut self.shared,
        );
        if self.steer.rss.is_some() {
            // Frames of another queue's flows leave for its inbox and their buffers go back;
            // ours close up in arrival order (TCP would take a reordering for a loss).
            let mut w = first;
            for r in first..out.len() {
                match self.steer.owner(out[r].as_slice()) {
                    Some(j) => self.steer.hand(j, out[r].as_slice()),
                    None => {
                        out.swap(w, r);
                        w += 1;
                    }
                }
            }
            n -= out.len() - w;
            for b in out.drain(w..) {
                pool.put(b);
            }
            self.steer.wake();
        }
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
        let (steer, shared) = (&mut self.steer, &mut self.shared);
        let mut kept = 0;
        let lent = self
            .sock
            .recv_lent(now, max - copies.len(), &mut |frames: &[&[u8]]| {
                share_neighbour_frames(frames.iter().copied(), &steer.peers, shared);
                // The common case, every frame ours: handed on as lent, untouched.
                let Some((at, j)) = frames
                    .iter()
                    .enumerate()
                    .find_map(|(i, fr)| steer.owner(fr).map(|j| (i, j)))
                else {
                    kept += frames.len();
                    f(frames);
                    return;
                };
                // Else the frames before `at` are ours, `at` is queue `j`'s, and each later
                // one is asked once; ours go on in arrival order.
                let mut local: [&[u8]; MAX_LENT] = [&[]; MAX_LENT];
                let mut m = 0;
                for (i, &fr) in frames.iter().enumerate() {
                    let owner = match i.cmp(&at) {
                        std::cmp::Ordering::Less => None,
                        std::cmp::Ordering::Equal => Some(j),
                        std::cmp::Ordering::Greater => steer.owner(fr),
                    };
                    match owner {
                        Some(o) => steer.hand(o, fr),
                        None => {
                            local[m] = fr;
                            m += 1;
                            if m == MAX_LENT {
                                f(&local);
                                kept += m;
                                m = 0;
                            }
                        }
                    }
                }
                if m > 0 {
                    kept += m;
                    f(&local[..m]);
                }
            });
        self.steer.wake();
        // `lends_rx` was checked above, so the socket lent (`lent` is `Some`).
        debug_assert!(lent.is_some());
        Some(copies.len() + kept)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mqtap::INBOX_FRAMES;

    fn tcp_frame(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[14 + 9] = 6;
        f[34 + 12] = 0x50;
        f[14 + 12..14 + 16].copy_from_slice(&src);
        f[14 + 16..14 + 20].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sp.to_be_bytes());
        f[36..38].copy_from_slice(&dp.to_be_bytes());
        f
    }

    /// Every queue's inbox, taken out by the test that reads it.
    type Inboxes = Vec<Option<Receiver<Vec<u8>>>>;

    /// The steering of queue `me` of `n` under `rss`, and every queue's inbox.
    fn steer_of(n: usize, me: usize, rss: Option<Rss>) -> (Steer, Inboxes) {
        let (txs, rxs) = inboxes(n);
        let peers = (0..n)
            .filter(|&j| j != me)
            .map(|j| Peer {
                tx: txs[j].clone(),
                wake: Arc::new(EventFd::new().unwrap()),
            })
            .collect();
        let steer = Steer {
            me,
            rss: rss.map(Arc::new),
            peers,
            handed: 0,
            steered: 0,
            dropped: 0,
        };
        (steer, rxs.into_iter().map(Some).collect())
    }

    #[test]
    fn a_frame_belongs_to_the_queue_of_its_hash_and_others_stay() {
        let rss = Rss::new(MICROSOFT_KEY, 2);
        let (a, b) = ([198, 18, 0, 1], [198, 18, 0, 2]);
        let port_of = |k: usize| {
            (1024u16..)
                .find(|&p| rss.shard_of(a, b, p, 80) == k)
                .unwrap()
        };
        let (p0, p1) = (port_of(0), port_of(1));
        let f0 = tcp_frame(a, b, p0, 80);
        let f1 = tcp_frame(a, b, p1, 80);
        let (q0, _) = steer_of(2, 0, Some(rss.clone()));
        let (q1, _) = steer_of(2, 1, Some(rss));
        assert_eq!(q0.owner(&f0), None);
        assert_eq!(q0.owner(&f1), Some(1));
        assert_eq!(q1.owner(&f0), Some(0));
        // No table (one queue), and frames without a 4-tuple (ARP, a runt), stay.
        let (alone, _) = steer_of(1, 0, None);
        assert_eq!(alone.owner(&f1), None);
        let mut arp = vec![0xff; 12];
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.resize(42, 0);
        assert_eq!(q0.owner(&arp), None);
        assert_eq!(q0.owner(&f1[..20]), None);
    }

    #[test]
    fn handed_frames_reach_their_queue_once_woken_and_a_full_inbox_drops_and_counts() {
        // Queue 1 of 3: peers[0] is queue 0, peers[1] is queue 2.
        let (mut steer, mut rxs) = steer_of(3, 1, None);
        steer.hand(2, b"to two");
        steer.hand(0, b"to zero");
        steer.hand(2, b"two again");
        assert_eq!((steer.handed, steer.steered, steer.dropped), (0b11, 3, 0));
        let two = rxs[2].take().unwrap();
        assert_eq!(two.try_recv().unwrap(), b"to two");
        assert_eq!(two.try_recv().unwrap(), b"two again");
        assert_eq!(rxs[0].take().unwrap().try_recv().unwrap(), b"to zero");
        steer.wake();
        assert_eq!(steer.handed, 0);
        // Each peer was signalled once: its eventfd reads 1.
        for p in &steer.peers {
            let mut v = [0u8; 8];
            // SAFETY: reads 8 bytes into a live local from our own non-blocking eventfd.
            let n = unsafe { libc::read(p.wake.0.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
            assert_eq!((n, u64::from_ne_bytes(v)), (8, 1));
        }
        // Queue 2's inbox holds INBOX_FRAMES; the rest is dropped and counted, never queued.
        let (s0, d0) = (steer.steered, steer.dropped);
        for _ in 0..INBOX_FRAMES + 5 {
            steer.hand(2, b"x");
        }
        assert_eq!(
            (steer.steered - s0, steer.dropped - d0),
            (INBOX_FRAMES as u64, 5)
        );
        assert_eq!(two.try_iter().count(), INBOX_FRAMES);
    }
}
