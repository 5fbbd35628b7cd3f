//! A multi-queue in-memory link with receive-side scaling (issue 14): `n` queue pairs between
//! `n` client shards and `n` server shards, and a Toeplitz steering step at every transmit.
//!
//! Each side's port `k` (one shard's device) holds one pipe end per peer shard: pipe `(i, j)`
//! joins client shard `i` and server shard `j`. A frame sent by a port goes to the peer shard
//! that the RSS hash of its 4-tuple ([`super::rss::Rss::shard_of_ip`], source and destination
//! as they are in the frame, IPv4 or IPv6) picks, as a multi-queue NIC steers what it
//! receives; frames without a TCP/UDP 4-tuple (ARP, IPv6 Neighbor Discovery) go to the peer
//! shard with the port's own index (queue 0 of a real NIC
//! would do; one neighbour table per shard needs them on its own queue). So nothing forces a
//! connection onto one shard except the hash: a connection whose local port was not chosen
//! for its shard ([`super::rss::Rss::pick_local_port`]) has its frames steered to another
//! shard's stack, which resets them, and the per-queue counters ([`MqPort::rx_from`]) show it.
//!
//! With correct port choice only the `n` pipes `(k, k)` carry frames: the other `n^2 - n`
//! stay empty, cost one atomic load per receive poll each, and share nothing on the data path.

use super::rss::Rss;
use netfold::buf::{PacketBuf, Pool};
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use netfold::phy::{Device, DeviceCaps};
use netfold::time::Instant;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// [`frame_tuple`] for either family: an Ethernet + IPv4 or extension-free IPv6 + TCP/UDP
/// frame's 4-tuple, the IPv6 one read through the wire views; `None` for anything else (ARP,
/// NDP, ICMP, fragments, extension headers).
pub fn frame_tuple_ip(f: &[u8]) -> Option<(IpAddr, IpAddr, u16, u16)> {
    use netfold::wire::ethernet::{EtherType, EthernetFrame};
    use netfold::wire::ipv6::Ipv6Packet;
    use netfold::wire::tcp::TcpPacket;
    use netfold::wire::udp::UdpPacket;
    use netfold::wire::IpProtocol;
    if let Some((s, d, sp, dp)) = frame_tuple(f) {
        return Some((Ipv4Addr::from(s).into(), Ipv4Addr::from(d).into(), sp, dp));
    }
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::Ipv6 {
        return None;
    }
    let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
    let (sp, dp) = match ip.next_header() {
        IpProtocol::Tcp => {
            let t = TcpPacket::new_checked(ip.payload()).ok()?;
            (t.src_port(), t.dst_port())
        }
        IpProtocol::Udp => {
            let u = UdpPacket::new_checked(ip.payload()).ok()?;
            (u.src_port(), u.dst_port())
        }
        _ => return None,
    };
    Some((ip.src_addr().into(), ip.dst_addr().into(), sp, dp))
}

/// One shard's device on a [`mq_link`]: its pipe ends to every peer shard.
pub struct MqPort {
    shard: usize,
    /// `ends[j]`: the pipe to peer shard `j`.
    ends: Vec<PipeEnd>,
    rss: Arc<Rss>,
    /// Frames bucketed per peer shard during one `send_batch`.
    out: Vec<Vec<PacketBuf>>,
    /// TCP/UDP frames sent per peer shard.
    tx_to: Vec<u64>,
}

/// The 4-tuple of an Ethernet + IPv4 + TCP/UDP frame: (source, destination, source port,
/// destination port); `None` for anything else (ARP, ICMP, a later fragment).
pub fn frame_tuple(f: &[u8]) -> Option<([u8; 4], [u8; 4], u16, u16)> {
    const ETH: usize = 14;
    if f.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = f.get(ETH..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    let proto = *ip.get(9)?;
    // A fragment other than the first carries no ports.
    let frag_off = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x1fff;
    if !(proto == 6 || proto == 17) || frag_off != 0 || ihl < 20 {
        return None;
    }
    let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
    let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
    let l4 = ip.get(ihl..ihl + 4)?;
    Some((
        src,
        dst,
        u16::from_be_bytes([l4[0], l4[1]]),
        u16::from_be_bytes([l4[2], l4[3]]),
    ))
}

/// `n` client ports and `n` server ports joined pairwise by `n^2` pipes of `config`, steered by
/// `rss` (which must have `n` shards).
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
        tx_to: vec![0; n],
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
    /// Frames this port received from each peer shard.
    pub fn rx_from(&self) -> Vec<u64> {
        self.ends.iter().map(|e| e.stats().delivered).collect()
    }

    /// TCP/UDP frames this port sent to each peer shard.
    #[cfg(test)]
    pub fn tx_to(&self) -> &[u64] {
        &self.tx_to
    }

    /// Frames received from, plus TCP/UDP frames sent to, shards other than this one.
    pub fn cross_shard_frames(&self) -> u64 {
        let rx: u64 = self
            .rx_from()
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != self.shard)
            .map(|(_, &v)| v)
            .sum();
        let tx: u64 = self
            .tx_to
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != self.shard)
            .map(|(_, &v)| v)
            .sum();
        rx + tx
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
            got += self.ends[j].recv_batch(now, pool, out, max - got);
        }
        got
    }

    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        if self.ends.len() == 1 {
            self.tx_to[0] += frames.len() as u64;
            return self.ends[0].send_batch(now, pool, frames);
        }
        for f in frames.drain(..) {
            let tuple = frame_tuple_ip(f.as_slice());
            let j = match tuple {
                Some((src, dst, sp, dp)) => {
                    let j = self.rss.shard_of_ip(src, dst, sp, dp);
                    self.tx_to[j] += 1;
                    j
                }
                None => self.shard,
            };
            self.out[j].push(f);
        }
        for (j, q) in self.out.iter_mut().enumerate() {
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
    use crate::bench::rss::MICROSOFT_KEY;

    fn tcp_frame(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 6;
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
        assert_eq!(c[1].tx_to(), &[1, 1]);
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
