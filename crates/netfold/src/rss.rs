//! Steering flows to shards: the Toeplitz hash that receive-side scaling (RSS) NICs
//! compute over a packet's addresses and ports, the indirection table that maps a hash to a
//! queue (a shard), and the choice of a local port whose hash lands on the caller's shard, so
//! that both directions of a connection stay on one shard.
//!
//! Sans-IO like the rest of the core: plain functions of bytes and addresses. The users are the
//! multi-queue in-memory link ([`crate::phy::mq`], which steers every frame by [`Rss`]), the
//! sharded runtime (`netfold_rt::shards`, which picks `connect`'s local port with
//! [`Rss::pick_local_port_ip`]) and the benchmark harness (`netfold stream|rr|crr --shards`).
//! Linux's equivalent is the NIC's RSS plus `ethtool -X` (the indirection table); the hash is
//! the one in Microsoft's RSS specification, which Linux drivers and DPDK implement too.
//!
//! The hash is the one Microsoft's "Verifying the RSS Hash Calculation" specifies, tested
//! below against its published verification vectors: for every set bit of the input, XOR
//! the 32 bits of the key that start at that bit's position into the result.

use std::net::IpAddr;

/// The RSS key Microsoft's verification vectors use (40 bytes: room for an IPv6 4-tuple,
/// 36 bytes of input, plus the 4 bytes of the initial window).
pub const MICROSOFT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Entries in the indirection table: Microsoft's RSS allows up to 128 and indexes the table
/// with the hash's low 7 bits.
pub const INDIRECTION_ENTRIES: usize = 128;

/// The Toeplitz hash of `input` under `key`. Key bits past the end of `key` count as zero,
/// so a short key hashes long input without panicking (real keys are 40 bytes).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |pos: usize| -> u32 {
        key.get(pos / 8)
            .map_or(0, |b| u32::from((b >> (7 - pos % 8)) & 1))
    };
    // The 32 key bits starting at the current input bit's position.
    let mut window = (0..32).fold(0u32, |w, i| (w << 1) | key_bit(i));
    let mut hash = 0u32;
    for (i, byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                hash ^= window;
            }
            window = (window << 1) | key_bit(i * 8 + bit + 32);
        }
    }
    hash
}

/// The RSS input of an IPv4 TCP/UDP packet: source address, destination address, source
/// port, destination port, all in network byte order.
pub fn ipv4_tuple(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> [u8; 12] {
    let mut t = [0u8; 12];
    t[..4].copy_from_slice(&src);
    t[4..8].copy_from_slice(&dst);
    t[8..10].copy_from_slice(&sport.to_be_bytes());
    t[10..].copy_from_slice(&dport.to_be_bytes());
    t
}

/// The RSS input of an IPv6 TCP/UDP packet (Microsoft's "IPv6 with TCP" hash type): source
/// address, destination address, source port, destination port, in network byte order.
pub fn ipv6_tuple(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16) -> [u8; 36] {
    let mut t = [0u8; 36];
    t[..16].copy_from_slice(&src);
    t[16..32].copy_from_slice(&dst);
    t[32..34].copy_from_slice(&sport.to_be_bytes());
    t[34..].copy_from_slice(&dport.to_be_bytes());
    t
}

/// A key and an indirection table over `shards` queues, filled round-robin as drivers do
/// by default (Linux's `ethtool_rxfh_indir_default`: entry `i` -> queue `i % n`).
#[derive(Debug, Clone)]
pub struct Rss {
    table: [u16; INDIRECTION_ENTRIES],
    shards: usize,
    /// `lut[i][b]`: what byte value `b` at position `i` of a 12-byte IPv4 tuple XORs into the
    /// hash (the Toeplitz hash is linear in its input bits), so a device steering every frame
    /// pays 12 table reads instead of 96 bit steps.
    lut: Box<[[u32; 256]; 12]>,
    /// The same for the 36 bytes of an IPv6 tuple (36 KiB).
    lut6: Box<[[u32; 256]; 36]>,
}

impl Rss {
    /// `shards` is clamped to `1..=INDIRECTION_ENTRIES`.
    pub fn new(key: [u8; 40], shards: usize) -> Rss {
        let shards = shards.clamp(1, INDIRECTION_ENTRIES);
        let mut table = [0u16; INDIRECTION_ENTRIES];
        for (i, e) in table.iter_mut().enumerate() {
            // Lossless: shards <= INDIRECTION_ENTRIES = 128.
            *e = (i % shards) as u16;
        }
        let mut lut = Box::new([[0u32; 256]; 12]);
        for (i, row) in lut.iter_mut().enumerate() {
            for (b, e) in row.iter_mut().enumerate() {
                let mut input = [0u8; 12];
                input[i] = b as u8;
                *e = toeplitz(&key, &input);
            }
        }
        let mut lut6 = Box::new([[0u32; 256]; 36]);
        for (i, row) in lut6.iter_mut().enumerate() {
            for (b, e) in row.iter_mut().enumerate() {
                let mut input = [0u8; 36];
                input[i] = b as u8;
                *e = toeplitz(&key, &input);
            }
        }
        Rss {
            table,
            shards,
            lut,
            lut6,
        }
    }

    /// The Toeplitz hash of a 4-tuple of either family (IPv4 as [`Rss::hash`], IPv6 over
    /// [`ipv6_tuple`]); a mixed pair (no packet has one) hashes to 0.
    pub fn hash_ip(&self, src: IpAddr, dst: IpAddr, sport: u16, dport: u16) -> u32 {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.hash(s.octets(), d.octets(), sport, dport),
            (IpAddr::V6(s), IpAddr::V6(d)) => ipv6_tuple(s.octets(), d.octets(), sport, dport)
                .iter()
                .zip(self.lut6.iter())
                .fold(0, |h, (&b, row)| h ^ row[usize::from(b)]),
            _ => 0,
        }
    }

    /// [`Rss::shard_of`] for either family.
    pub fn shard_of_ip(&self, src: IpAddr, dst: IpAddr, sport: u16, dport: u16) -> usize {
        let h = self.hash_ip(src, dst, sport, dport);
        usize::from(self.table[h as usize % INDIRECTION_ENTRIES])
    }

    /// The shard that receives an Ethernet frame: its 4-tuple's ([`frame_tuple_ip`]), `None`
    /// for a frame without one (ARP, NDP, ICMP, fragments), which the device steers by some
    /// other rule. What the multi-queue link and every RSS-steered shard front end use.
    #[inline]
    pub fn shard_of_frame(&self, frame: &[u8]) -> Option<usize> {
        let (src, dst, sp, dp) = frame_tuple_ip(frame)?;
        Some(self.shard_of_ip(src, dst, sp, dp))
    }

    /// [`Rss::pick_local_port`] for either family: the first port of `ports` whose 4-tuple hashes
    /// to `shard` both ways (as the peer's frames carry it, `remote:rport -> local:lport`, and
    /// as this end's do). About one port in `shards` qualifies each way, so with a symmetric
    /// table the search is short; `None` if the range holds none.
    pub fn pick_local_port_ip(
        &self,
        local: IpAddr,
        remote: IpAddr,
        rport: u16,
        shard: usize,
        ports: std::ops::RangeInclusive<u16>,
    ) -> Option<u16> {
        ports.into_iter().find(|&lport| {
            self.shard_of_ip(remote, local, rport, lport) == shard
                && self.shard_of_ip(local, remote, lport, rport) == shard
        })
    }

    /// Every port of `ports` that [`Rss::pick_local_port_ip`] would accept for `shard`, in
    /// order from `start` (wrapping around to the range's beginning), each at most once.
    /// Connecting callers start where the previous connect on the shard stopped, so ports in
    /// use (or in TIME-WAIT) are skipped without searching them again every time.
    pub fn local_ports(
        &self,
        local: IpAddr,
        remote: IpAddr,
        rport: u16,
        shard: usize,
        ports: std::ops::RangeInclusive<u16>,
        start: u16,
    ) -> impl Iterator<Item = u16> + '_ {
        let (lo, hi) = (*ports.start(), *ports.end());
        let start = start.clamp(lo, hi.max(lo));
        (start..=hi).chain(lo..start).filter(move |&p| {
            self.pick_local_port_ip(local, remote, rport, shard, p..=p)
                .is_some()
        })
    }

    /// The Toeplitz hash of an IPv4 4-tuple under this key (table-driven; equal to
    /// [`toeplitz`] of [`ipv4_tuple`]).
    pub fn hash(&self, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> u32 {
        let t = ipv4_tuple(src, dst, sport, dport);
        t.iter()
            .zip(self.lut.iter())
            .fold(0, |h, (&b, row)| h ^ row[usize::from(b)])
    }

    /// Queues (shards) the indirection table spreads over.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The shard that receives an IPv4 packet from `src:sport` to `dst:dport`.
    pub fn shard_of(&self, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> usize {
        let h = self.hash(src, dst, sport, dport);
        usize::from(self.table[h as usize % INDIRECTION_ENTRIES])
    }

    /// A local port in `ports` for a connection from `local` to `remote:rport` such that both
    /// directions hash to `shard`: the packets the peer sends back (its receive side steered
    /// by the same key at this end) and the packets this end sends (steered at the peer's).
    /// `None` if no port in the range does. [`Rss::pick_local_port_ip`] is the same for either
    /// family.
    pub fn pick_local_port(
        &self,
        local: [u8; 4],
        remote: [u8; 4],
        rport: u16,
        shard: usize,
        ports: std::ops::RangeInclusive<u16>,
    ) -> Option<u16> {
        ports.into_iter().find(|&lport| {
            self.shard_of(remote, local, rport, lport) == shard
                && self.shard_of(local, remote, lport, rport) == shard
        })
    }
}

/// The 4-tuple of an Ethernet + IPv4 + TCP/UDP frame: (source, destination, source port,
/// destination port); `None` for anything else (ARP, ICMP, a later fragment). What a NIC's RSS
/// hashes ("IPv4 with TCP" / "with UDP"); fragments other than the first carry no ports.
pub fn frame_tuple(f: &[u8]) -> Option<([u8; 4], [u8; 4], u16, u16)> {
    use crate::wire::ethernet::{EtherType, EthernetFrame};
    use crate::wire::ipv4::Ipv4Packet;
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    // A fragment other than the first carries no ports.
    if ip.frag_offset() != 0 {
        return None;
    }
    let (sp, dp) = l4_ports(ip.protocol(), ip.payload())?;
    Some((ip.src_addr().octets(), ip.dst_addr().octets(), sp, dp))
}

/// The ports of a TCP or UDP header, read through the wire views; `None` for other protocols.
fn l4_ports(proto: crate::wire::IpProtocol, l4: &[u8]) -> Option<(u16, u16)> {
    use crate::wire::tcp::TcpPacket;
    use crate::wire::udp::UdpPacket;
    use crate::wire::IpProtocol;
    match proto {
        IpProtocol::Tcp => {
            let t = TcpPacket::new_checked(l4).ok()?;
            Some((t.src_port(), t.dst_port()))
        }
        IpProtocol::Udp => {
            let u = UdpPacket::new_checked(l4).ok()?;
            Some((u.src_port(), u.dst_port()))
        }
        _ => None,
    }
}

/// [`frame_tuple`] for either family: an Ethernet + IPv4 or extension-free IPv6 + TCP/UDP
/// frame's 4-tuple, the IPv6 one read through the wire views; `None` for anything else (ARP,
/// NDP, ICMP, fragments, extension headers).
pub fn frame_tuple_ip(f: &[u8]) -> Option<(IpAddr, IpAddr, u16, u16)> {
    use crate::wire::ethernet::{EtherType, EthernetFrame};
    use crate::wire::ipv6::Ipv6Packet;
    use std::net::Ipv4Addr;
    if let Some((s, d, sp, dp)) = frame_tuple(f) {
        return Some((Ipv4Addr::from(s).into(), Ipv4Addr::from(d).into(), sp, dp));
    }
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::Ipv6 {
        return None;
    }
    let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
    let (sp, dp) = l4_ports(ip.next_header(), ip.payload())?;
    Some((ip.src_addr().into(), ip.dst_addr().into(), sp, dp))
}

/// The ports of `range` that are shard `k`'s of `n` (`port % n == k`), from `start` on,
/// wrapping once round the range. Where steering follows the transmit queue (a TAP under the
/// kernel's automq) the shards share one address, so their connections must not share a
/// local port, or two shards would open the same 4-tuple (the second's SYN would meet the
/// first's connection in the kernel). One definition for the blocking, C and async shards.
pub fn own_ports(
    range: std::ops::RangeInclusive<u16>,
    k: usize,
    n: usize,
    start: u16,
) -> impl Iterator<Item = u16> + Send {
    let (lo, hi) = (*range.start(), *range.end());
    let start = start.clamp(lo, hi);
    (start..=hi)
        .chain(lo..start)
        .filter(move |&p| usize::from(p) % n.max(1) == k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Microsoft's RSS verification vectors for IPv4 ("Verifying the RSS Hash Calculation"):
    /// destination, destination port, source, source port, IPv4-only hash, IPv4+TCP hash.
    /// They are hash inputs, not addresses any test talks to.
    type Vector = ([u8; 4], u16, [u8; 4], u16, u32, u32);
    const VECTORS: [Vector; 5] = [
        (
            [161, 142, 100, 80],
            1766,
            [66, 9, 149, 187],
            2794,
            0x323e_8fc2,
            0x51cc_c178,
        ),
        (
            [65, 69, 140, 83],
            4739,
            [199, 92, 111, 2],
            14230,
            0xd718_262a,
            0xc626_b0ea,
        ),
        (
            [12, 22, 207, 184],
            38024,
            [24, 19, 198, 95],
            12898,
            0xd2d0_a5de,
            0x5c2b_394a,
        ),
        (
            [209, 142, 163, 6],
            2217,
            [38, 27, 205, 30],
            48228,
            0x8298_9176,
            0xafc7_327f,
        ),
        (
            [202, 188, 127, 2],
            1303,
            [153, 39, 163, 191],
            44251,
            0x5d18_09c5,
            0x10e8_28a2,
        ),
    ];

    #[test]
    fn toeplitz_matches_microsofts_verification_vectors() {
        for (dst, dport, src, sport, ip_only, with_tcp) in VECTORS {
            let mut addrs = [0u8; 8];
            addrs[..4].copy_from_slice(&src);
            addrs[4..].copy_from_slice(&dst);
            assert_eq!(
                toeplitz(&MICROSOFT_KEY, &addrs),
                ip_only,
                "{src:?} -> {dst:?}"
            );
            assert_eq!(
                toeplitz(&MICROSOFT_KEY, &ipv4_tuple(src, dst, sport, dport)),
                with_tcp,
                "{src:?}:{sport} -> {dst:?}:{dport}"
            );
        }
    }

    #[test]
    fn the_table_driven_hash_equals_the_bitwise_one() {
        let rss = Rss::new(MICROSOFT_KEY, 4);
        for (dst, dport, src, sport, _, with_tcp) in VECTORS {
            assert_eq!(rss.hash(src, dst, sport, dport), with_tcp);
        }
        for port in (0..=u16::MAX).step_by(997) {
            let (a, b) = ([198, 18, 0, 1], [198, 19, 255, 254]);
            assert_eq!(
                rss.hash(a, b, port, 5201),
                toeplitz(&MICROSOFT_KEY, &ipv4_tuple(a, b, port, 5201))
            );
        }
    }

    /// Microsoft's IPv6 verification vectors (the same page): destination, destination port,
    /// source, source port, IPv6-only hash (addresses), IPv6-with-TCP hash (the 4-tuple). Hash
    /// inputs, not addresses any test talks to.
    const VECTORS6: [(&str, u16, &str, u16, u32, u32); 3] = [
        (
            "3ffe:2501:200:3::1",
            1766,
            "3ffe:2501:200:1fff::7",
            2794,
            0x2cc1_8cd5,
            0x4020_7d3d,
        ),
        (
            "ff02::1",
            4739,
            "3ffe:501:8::260:97ff:fe40:efab",
            14230,
            0x0f0c_461c,
            0xdde5_1bbf,
        ),
        (
            "fe80::200:f8ff:fe21:67cf",
            38024,
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            0x4b61_e985,
            0x02d1_feef,
        ),
    ];

    #[test]
    fn ipv6_hashes_match_microsofts_verification_vectors() {
        let rss = Rss::new(MICROSOFT_KEY, 4);
        for (dst, dport, src, sport, ip_only, with_tcp) in VECTORS6 {
            let (d, s): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
                (dst.parse().unwrap(), src.parse().unwrap());
            let mut addrs = [0u8; 32];
            addrs[..16].copy_from_slice(&s.octets());
            addrs[16..].copy_from_slice(&d.octets());
            assert_eq!(toeplitz(&MICROSOFT_KEY, &addrs), ip_only, "{src} -> {dst}");
            let t = ipv6_tuple(s.octets(), d.octets(), sport, dport);
            assert_eq!(
                toeplitz(&MICROSOFT_KEY, &t),
                with_tcp,
                "{src}:{sport} -> {dst}"
            );
            // The table-driven hash agrees.
            assert_eq!(rss.hash_ip(s.into(), d.into(), sport, dport), with_tcp);
        }
        // And for IPv4 through the family-generic entry.
        for (dst, dport, src, sport, _, with_tcp) in VECTORS {
            let (s, d) = (std::net::Ipv4Addr::from(src), std::net::Ipv4Addr::from(dst));
            assert_eq!(rss.hash_ip(s.into(), d.into(), sport, dport), with_tcp);
        }
    }

    #[test]
    fn arbitrary_frames_give_a_tuple_or_none_never_a_panic() {
        // The multi-queue link steers every frame it carries by these, hostile ones too.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..400usize {
            for _ in 0..8 {
                let mut f: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                // Half of them claim IPv4 or IPv6 so the parsers below the Ethernet header run.
                if len >= 14 && x & 1 == 0 {
                    f[12..14].copy_from_slice(if x & 2 == 0 { &[8, 0] } else { &[0x86, 0xdd] });
                    if len > 14 {
                        f[14] = if x & 2 == 0 { 0x45 } else { 0x60 };
                    }
                }
                let t = frame_tuple(&f);
                let t6 = frame_tuple_ip(&f);
                // Too short for Ethernet + IPv4 + the ports: nothing to steer by.
                if len < 14 + 20 + 4 {
                    assert!(t.is_none() && t6.is_none(), "len {len}");
                }
                // An IPv4 tuple is also the family-generic one.
                if let Some((s, d, sp, dp)) = t {
                    assert_eq!(
                        t6,
                        Some((
                            std::net::Ipv4Addr::from(s).into(),
                            std::net::Ipv4Addr::from(d).into(),
                            sp,
                            dp
                        ))
                    );
                }
            }
        }
    }

    #[test]
    fn short_keys_and_empty_input_do_not_panic() {
        assert_eq!(toeplitz(&MICROSOFT_KEY, &[]), 0);
        assert_eq!(toeplitz(&[], &[0xff; 12]), 0);
        assert_eq!(toeplitz(&[0xff; 4], &[0x80]), u32::MAX);
    }

    #[test]
    fn the_table_spreads_flows_and_stays_in_range() {
        let rss = Rss::new(MICROSOFT_KEY, 2);
        let (a, b) = ([198, 18, 0, 1], [198, 18, 0, 2]);
        let mut per = [0usize; 2];
        for port in 49152..=50175u16 {
            per[rss.shard_of(a, b, port, 12865)] += 1;
        }
        // 1024 flows over 2 shards: neither shard is starved (a uniform hash gives 512 each;
        // 400 is more than six standard deviations below).
        assert!(per.iter().all(|&n| n > 400), "{per:?}");
        assert_eq!(Rss::new(MICROSOFT_KEY, 0).shards(), 1);
        assert_eq!(Rss::new(MICROSOFT_KEY, 1000).shards(), INDIRECTION_ENTRIES);
    }

    #[test]
    fn a_picked_port_keeps_both_directions_of_a_connection_on_its_shard() {
        let (client, server, sport) = ([198, 18, 0, 1], [198, 18, 0, 2], 12865);
        for shards in 1..=4 {
            let rss = Rss::new(MICROSOFT_KEY, shards);
            for shard in 0..shards {
                let lport = rss
                    .pick_local_port(client, server, sport, shard, 49152..=65535)
                    .expect("some ephemeral port lands on every shard");
                assert_eq!(rss.shard_of(server, client, sport, lport), shard);
                assert_eq!(rss.shard_of(client, server, lport, sport), shard);
            }
        }
        let rss = Rss::new(MICROSOFT_KEY, 2);
        // The iterator form yields exactly the ports the picker accepts, from where it starts.
        let all: Vec<u16> = (49152..=65535u16)
            .filter(|&p| {
                rss.pick_local_port(client, server, sport, 1, p..=p)
                    .is_some()
            })
            .collect();
        let (c, s) = (
            std::net::Ipv4Addr::from(client),
            std::net::Ipv4Addr::from(server),
        );
        let from_mid: Vec<u16> = rss
            .local_ports(c.into(), s.into(), sport, 1, 49152..=65535, 60000)
            .collect();
        assert_eq!(from_mid.len(), all.len());
        assert!(from_mid[0] >= 60000);
        let mut sorted = from_mid.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, all);
        // A range with no fitting port says so.
        let p = rss
            .pick_local_port(client, server, sport, 1, 49152..=65535)
            .unwrap();
        let other = rss.pick_local_port(client, server, sport, 0, p..=p);
        assert_eq!(other, None);
    }
}
