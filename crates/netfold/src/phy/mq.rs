//! A multi-queue in-memory link with receive-side scaling: `n` queue pairs between
//! the `n` shards of one side and the `n` shards of the other, and a Toeplitz steering step at
//! every transmit — what a pair of multi-queue NICs with RSS would do, in memory.
//!
//! Each side's port `k` (one shard's device) holds one pipe end per peer shard: pipe `(i, j)`
//! joins shard `i` of side A and shard `j` of side B. A frame sent by a port goes to the peer
//! shard that the RSS hash of its 4-tuple ([`Rss::shard_of_ip`], source and destination as
//! they are in the frame, IPv4 or IPv6) picks, as a multi-queue NIC steers what it receives;
//! frames without a TCP/UDP 4-tuple (ARP, IPv6 Neighbor Discovery) go to the peer shard with
//! the port's own index (queue 0 of a real NIC would do; one neighbour table per shard needs
//! them on its own queue). So nothing forces a connection onto one shard except the hash: a
//! connection whose local port was not chosen for its shard ([`Rss::pick_local_port_ip`]) has
//! its frames steered to another shard's stack, which resets them, and the per-queue counters
//! ([`MqCounters`]) show it.
//!
//! With correct port choice only the `n` pipes `(k, k)` carry frames: the other `n^2 - n`
//! stay empty, cost one atomic load per receive poll each, and share nothing on the data path.
//!
//! ```
//! use netfold::phy::mq::mq_link;
//! use netfold::phy::pipe::PipeConfig;
//! use netfold::rss::{Rss, MICROSOFT_KEY};
//! use std::sync::Arc;
//!
//! let rss = Arc::new(Rss::new(MICROSOFT_KEY, 2));
//! let (a, b) = mq_link(PipeConfig::default(), rss);
//! assert_eq!((a.len(), b.len()), (2, 2));
//! // Each port is a `Device`: hand a[k] to side A's shard k, b[k] to side B's.
//! let counters = a[1].counters(); // still readable once the port has moved to its stack
//! assert_eq!(counters.cross_shard_frames(), 0);
//! ```

use crate::buf::{PacketBuf, Pool};
use crate::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use crate::phy::{Device, DeviceCaps};
use crate::rss::Rss;
use crate::time::Instant;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One shard's device on a [`mq_link`]: its pipe ends to every peer shard.
pub struct MqPort {
    shard: usize,
    /// `ends[j]`: the pipe to peer shard `j`.
    ends: Vec<PipeEnd>,
    rss: Arc<Rss>,
    /// Frames bucketed per peer shard during one `send_batch`.
    out: Vec<Vec<PacketBuf>>,
    /// TCP/UDP frames per peer shard during one `send_batch` (ARP and NDP are not counted),
    /// added to the shared counters once per batch.
    steered: Vec<u64>,
    counters: Arc<MqCounters>,
}

/// One port's frame counters, shared with whoever holds [`MqPort::counters`] (a test, a
/// benchmark's report) so that they stay readable after the port has moved into a stack's
/// driver thread. Only the port writes them (a load and a store, no locked instruction: one
/// writer), once per batch and peer queue.
#[derive(Debug)]
pub struct MqCounters {
    shard: usize,
    /// `rx_from[j]`: frames received from peer shard `j`.
    rx_from: Vec<AtomicU64>,
    /// `tx_to[j]`: TCP/UDP frames sent to peer shard `j` (every frame on a one-queue link).
    tx_to: Vec<AtomicU64>,
}

impl MqCounters {
    fn new(shard: usize, n: usize) -> MqCounters {
        MqCounters {
            shard,
            rx_from: (0..n).map(|_| AtomicU64::new(0)).collect(),
            tx_to: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The single writer's add (see the type's comment).
    fn add(c: &AtomicU64, n: u64) {
        c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// The port's own shard index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Frames received from each peer shard.
    pub fn rx_from(&self) -> Vec<u64> {
        self.rx_from
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// TCP/UDP frames sent to each peer shard.
    pub fn tx_to(&self) -> Vec<u64> {
        self.tx_to
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// Frames received from, plus TCP/UDP frames sent to, shards other than this one: 0 when
    /// both directions of every connection stayed on their shard.
    pub fn cross_shard_frames(&self) -> u64 {
        let other = |v: Vec<u64>| -> u64 {
            v.iter()
                .enumerate()
                .filter(|&(j, _)| j != self.shard)
                .map(|(_, &x)| x)
                .sum()
        };
        other(self.rx_from()) + other(self.tx_to())
    }
}

/// `n` ports of side A and `n` ports of side B joined pairwise by `n^2` pipes of `config`
/// (each with its own impairment stream, seeded from `config.seed`), steered by `rss`, where
/// `n = rss.shards()`. Port `k` of each side is shard `k`'s device.
pub fn mq_link(config: PipeConfig, rss: Arc<Rss>) -> (Vec<MqPort>, Vec<MqPort>) {
    let n = rss.shards();
    let mut client: Vec<Vec<Option<PipeEnd>>> = (0..n).map(|_| Vec::new()).collect();
    let mut server: Vec<Vec<Option<PipeEnd>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for (i, c) in client.iter_mut().enumerate() {
        for (j, s) in server.iter_mut().enumerate() {
            // A different impairment stream per pipe, reproducible from the seed.
            let seed = config.seed.wrapping_add((i * n + j) as u64);
            let (a, b) = Pipe::new(config.seed(seed));
            c.push(Some(a));
            s[i] = Some(b);
        }
    }
    let port = |shard: usize, ends: Vec<Option<PipeEnd>>| MqPort {
        shard,
        ends: ends.into_iter().flatten().collect(),
        rss: Arc::clone(&rss),
        out: (0..n).map(|_| Vec::new()).collect(),
        steered: vec![0; n],
        counters: Arc::new(MqCounters::new(shard, n)),
    };
    let c = client
        .into_iter()
        .enumerate()
        .map(|(k, e)| port(k, e))
        .collect();
    let s = server
        .into_iter()
        .enumerate()
        .map(|(k, e)| port(k, e))
        .collect();
    (c, s)
}

impl MqPort {
    /// This port's shard index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// The port's counters, readable from any thread while the port runs elsewhere.
    pub fn counters(&self) -> Arc<MqCounters> {
        Arc::clone(&self.counters)
    }

    /// Frames this port received from each peer shard.
    pub fn rx_from(&self) -> Vec<u64> {
        self.counters.rx_from()
    }

    /// TCP/UDP frames this port sent to each peer shard.
    pub fn tx_to(&self) -> Vec<u64> {
        self.counters.tx_to()
    }

    /// Frames received from, plus TCP/UDP frames sent to, shards other than this one.
    pub fn cross_shard_frames(&self) -> u64 {
        self.counters.cross_shard_frames()
    }
}

impl Device for MqPort {
    fn caps(&self) -> DeviceCaps {
        self.ends[self.shard].caps()
    }

    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        // The shard's own queue first: with every connection on its shard, the only one.
        let n = self.ends.len();
        let mut got = 0;
        for j in (0..n).map(|i| (self.shard + i) % n) {
            if got >= max {
                break;
            }
            let k = self.ends[j].recv_batch(now, pool, out, max - got);
            if k > 0 {
                MqCounters::add(&self.counters.rx_from[j], k as u64);
            }
            got += k;
        }
        got
    }

    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        if self.ends.len() == 1 {
            MqCounters::add(&self.counters.tx_to[0], frames.len() as u64);
            return self.ends[0].send_batch(now, pool, frames);
        }
        let steered = &mut self.steered;
        for f in frames.drain(..) {
            let j = match self.rss.shard_of_frame(f.as_slice()) {
                Some(j) => {
                    steered[j] += 1;
                    j
                }
                None => self.shard,
            };
            self.out[j].push(f);
        }
        for (j, q) in self.out.iter_mut().enumerate() {
            if steered[j] > 0 {
                MqCounters::add(&self.counters.tx_to[j], steered[j]);
                steered[j] = 0;
            }
            if !q.is_empty() {
                self.ends[j].send_batch(now, pool, q);
            }
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.ends.iter().filter_map(|e| e.poll_at()).min()
    }

    fn wake_on_rx(&mut self, waker: Option<&core::task::Waker>) -> bool {
        let mut all = true;
        for e in &mut self.ends {
            all &= e.wake_on_rx(waker);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rss::{frame_tuple, MICROSOFT_KEY};

    fn tcp_frame(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        // Total length, as the wire views check it, and TCP's data offset (5 words).
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[14 + 9] = 6;
        f[34 + 12] = 0x50;
        f[14 + 12..14 + 16].copy_from_slice(&src);
        f[14 + 16..14 + 20].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sp.to_be_bytes());
        f[36..38].copy_from_slice(&dp.to_be_bytes());
        f
    }

    #[test]
    fn frames_are_steered_by_the_hash_of_their_tuple() {
        let rss = Arc::new(Rss::new(MICROSOFT_KEY, 2));
        let (mut c, mut s) = mq_link(PipeConfig::default(), Arc::clone(&rss));
        let (a, b) = ([198, 18, 0, 1], [198, 18, 0, 2]);
        let mut pool = Pool::new(2048, 16);
        // A port chosen for shard 1, and one whose outbound hash lands on shard 0.
        let good = rss.pick_local_port(a, b, 80, 1, 49152..=65535).unwrap();
        let bad = (49152..=65535u16)
            .find(|&p| rss.shard_of(a, b, p, 80) == 0)
            .unwrap();
        for port in [good, bad] {
            let mut buf = PacketBuf::with_capacity(64);
            buf.extend_from_slice(&tcp_frame(a, b, port, 80));
            c[1].send_batch(Instant::ZERO, &mut pool, &mut vec![buf]);
        }
        let mut out = Vec::new();
        assert_eq!(s[1].recv_batch(Instant::ZERO, &mut pool, &mut out, 8), 1);
        assert_eq!(frame_tuple(out[0].as_slice()).unwrap().2, good);
        out.clear();
        assert_eq!(s[0].recv_batch(Instant::ZERO, &mut pool, &mut out, 8), 1);
        assert_eq!(frame_tuple(out[0].as_slice()).unwrap().2, bad);
        assert_eq!(c[1].tx_to(), vec![1, 1]);
        assert_eq!(c[1].cross_shard_frames(), 1);
        assert_eq!(s[1].rx_from(), vec![0, 1]);
        assert_eq!(s[0].rx_from(), vec![0, 1]);
        assert_eq!(s[0].cross_shard_frames(), 1);
        // Not TCP/UDP (an ARP frame): the port's own shard.
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(frame_tuple(&arp), None);
    }
}
