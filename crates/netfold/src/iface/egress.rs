//! The transmit half of the stack: IPv4 header, next-hop choice, ARP resolution and parking,
//! the link header, and TCP segment building with the checksum folded into the payload copy
//! and software GSO at the MTU boundary.

use super::counters::Counters;
use super::neighbor::{Event, NeighborCache, Park};
use super::tcp_wire;
use crate::buf::{PacketBuf, Pool};
use crate::phy::Medium;
use crate::tcp::OutSegment;
use crate::time::Instant;
use crate::wire::arp::{ArpOperation, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetAddress, EthernetRepr, HEADER_LEN as ETH_LEN};
use crate::wire::ipv4::{checksum_combine, pseudo_header_sum, Ipv4Repr, HEADER_LEN as IP_LEN};
use crate::wire::tcp::TcpFlags;
use crate::wire::{IpProtocol, Ipv4Addr};

/// Why a packet could not be queued for transmission (each case is also counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxError {
    /// The transmit queue is at its bound; retry after the next poll.
    QueueFull,
    /// Off-subnet destination and no gateway.
    NoRoute,
    /// Larger than the MTU (netfold does not fragment on transmit).
    TooBig,
    /// The next hop is unresolved and the pending queue is full.
    PendingFull,
}

#[derive(Debug)]
pub(crate) struct Egress {
    pub medium: Medium,
    pub mac: EthernetAddress,
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU in effect: min(config, device).
    pub mtu: usize,
    pub csum_tx: bool,
    pub tso: bool,
    pub ttl: u8,
    pub ident: u16,
    pub pool: Pool,
    pub tx: Vec<PacketBuf>,
    pub tx_limit: usize,
    pub neigh: NeighborCache,
    pub c: Counters,
    /// Scratch list of addresses whose ARP retry is due (reused; at most MAX_RESOLVING).
    pub arp_due: Vec<Ipv4Addr>,
}

impl Egress {
    pub fn tx_full(&self) -> bool {
        self.tx.len() >= self.tx_limit
    }

    fn mask(&self) -> u32 {
        match self.prefix_len {
            0 => 0,
            n => u32::MAX << (32 - u32::from(n.min(32))),
        }
    }

    pub fn in_subnet(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.addr) & self.mask()
    }

    /// 255.255.255.255 or the directed broadcast of our subnet (RFC 919/922). /31 and /32
    /// have no broadcast address (RFC 3021).
    pub fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        ip.is_broadcast()
            || (self.prefix_len < 31
                && self.in_subnet(ip)
                && u32::from(ip) | self.mask() == u32::MAX)
    }

    /// RFC 1122 §3.3.1.1: in-subnet destinations are reached directly, others via the gateway.
    fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if self.in_subnet(dst) {
            Some(dst)
        } else {
            self.gateway
        }
    }

    fn push(&mut self, buf: PacketBuf) {
        self.c.frames_out += 1;
        self.c.bytes_out += buf.len() as u64;
        self.tx.push(buf);
    }

    /// `buf` holds an IP payload; prepends the IPv4 header and hands it to the link.
    pub fn send_ip(
        &mut self,
        now: Instant,
        protocol: IpProtocol,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        mut buf: PacketBuf,
    ) -> Result<(), TxError> {
        if self.tx_full() {
            self.c.tx_queue_full += 1;
            self.pool.put(buf);
            return Err(TxError::QueueFull);
        }
        let tso_ok = self.tso && protocol == IpProtocol::Tcp;
        if (IP_LEN + buf.len() > self.mtu && !tso_ok) || IP_LEN + buf.len() > 65535 {
            self.c.tx_too_big += 1;
            self.pool.put(buf);
            return Err(TxError::TooBig);
        }
        self.ident = self.ident.wrapping_add(1);
        let ip = Ipv4Repr {
            src,
            dst,
            protocol,
            payload_len: buf.len(),
            // RFC 1122 §3.2.1.7: a host must not send TTL 0.
            ttl: self.ttl.max(1),
            dscp_ecn: 0,
            ident: self.ident,
            // We never fragment on transmit; DF lets path MTU discovery (RFC 1191) work.
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        if ip.emit(buf.prepend(IP_LEN), self.csum_tx).is_err() {
            self.c.tx_too_big += 1;
            self.pool.put(buf);
            return Err(TxError::TooBig);
        }
        self.c.ipv4_out += 1;
        self.send_link(now, dst, buf)
    }

    fn send_link(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        mut buf: PacketBuf,
    ) -> Result<(), TxError> {
        if self.medium == Medium::Ip {
            self.push(buf);
            return Ok(());
        }
        let (hop, mac) = if self.is_broadcast(dst) {
            (dst, Some(EthernetAddress::BROADCAST))
        } else {
            match self.next_hop(dst) {
                Some(hop) => (hop, self.neigh.lookup_hot(now, hop)),
                None => {
                    self.c.no_route += 1;
                    self.pool.put(buf);
                    return Err(TxError::NoRoute);
                }
            }
        };
        let eth = EthernetRepr {
            src: self.mac,
            dst: mac.unwrap_or_default(),
            ethertype: EtherType::Ipv4,
            vlan: None,
        };
        // Cannot fail: the slice is exactly header_len long.
        let _ = eth.emit(buf.prepend(ETH_LEN));
        if mac.is_some() {
            self.push(buf);
            return Ok(());
        }
        match self.neigh.park(now, hop, buf) {
            (Park::SendRequest, _) => {
                self.send_arp_request(hop);
                Ok(())
            }
            (Park::Waiting, _) => Ok(()),
            (Park::Full, back) => {
                self.c.arp_pending_overflow += 1;
                if let Some(b) = back {
                    self.pool.put(b);
                }
                Err(TxError::PendingFull)
            }
        }
    }

    /// Sends an ARP packet in a broadcast (request) or unicast (reply) Ethernet frame.
    pub fn send_arp(&mut self, arp: ArpRepr, dst: EthernetAddress) {
        if self.tx_full() {
            self.c.tx_queue_full += 1;
            return;
        }
        let mut buf = self.pool.get();
        let eth = EthernetRepr {
            src: self.mac,
            dst,
            ethertype: EtherType::Arp,
            vlan: None,
        };
        let area = buf.append(ETH_LEN + arp.buffer_len());
        let _ = eth.emit(&mut area[..ETH_LEN]);
        let _ = arp.emit(&mut area[ETH_LEN..]);
        match arp.op {
            ArpOperation::Request => self.c.arp_requests_out += 1,
            ArpOperation::Reply => self.c.arp_replies_out += 1,
        }
        self.push(buf);
    }

    pub fn send_arp_request(&mut self, target: Ipv4Addr) {
        let arp = ArpRepr {
            op: ArpOperation::Request,
            source_hw: self.mac,
            source_ip: self.addr,
            target_hw: EthernetAddress::default(),
            target_ip: target,
        };
        self.send_arp(arp, EthernetAddress::BROADCAST);
    }

    /// ARP timer work: repeat due requests, drop (counted) frames whose next hop never answered.
    pub fn neighbor_timers(&mut self, now: Instant) {
        let mut due = core::mem::take(&mut self.arp_due);
        let (pool, c) = (&mut self.pool, &mut self.c);
        self.neigh.poll(now, |e| match e {
            Event::Request(ip) => due.push(ip),
            Event::Drop(b) => {
                c.arp_unresolved_drops += 1;
                pool.put(b);
            }
        });
        for ip in due.drain(..) {
            self.send_arp_request(ip);
        }
        self.arp_due = due;
    }

    /// Moves frames parked for `ip` to the transmit queue with their destination MAC filled.
    pub fn flush_pending(&mut self, ip: Ipv4Addr, mac: EthernetAddress) {
        let tx = &mut self.tx;
        let c = &mut self.c;
        self.neigh.take_pending(ip, |mut f| {
            if let Some(d) = f.as_mut_slice().get_mut(..6) {
                d.copy_from_slice(&mac.0);
            }
            c.frames_out += 1;
            c.bytes_out += f.len() as u64;
            tx.push(f);
        });
    }

    /// Link and IPv4 headers shared by every packet of one TCP segment to a resolved unicast
    /// next hop: `(bytes, len)`, with total length, identification and checksum left to fill.
    /// `None` sends the packets the general way (`send_ip`: ARP parking, broadcast, errors).
    fn tcp_headers(
        &mut self,
        now: Instant,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Option<([u8; 34], usize)> {
        let mut t = [0u8; ETH_LEN + IP_LEN];
        let eth_len = match self.medium {
            Medium::Ip => 0,
            Medium::Ethernet => {
                if self.is_broadcast(dst) {
                    return None;
                }
                let hop = self.next_hop(dst)?;
                let mac = self.neigh.lookup_hot(now, hop)?;
                let eth = EthernetRepr {
                    src: self.mac,
                    dst: mac,
                    ethertype: EtherType::Ipv4,
                    vlan: None,
                };
                eth.emit(&mut t[..ETH_LEN]).ok()?;
                ETH_LEN
            }
        };
        let ip = Ipv4Repr {
            src,
            dst,
            protocol: IpProtocol::Tcp,
            payload_len: 0,
            ttl: self.ttl.max(1),
            dscp_ecn: 0,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        ip.emit(&mut t[eth_len..eth_len + IP_LEN], false).ok()?;
        // Total length is per packet (and so not part of the template's sum).
        t[eth_len + 2..eth_len + 4].fill(0);
        Some((t, eth_len))
    }

    /// The `emit` callback of `TcpLayer::output`: `false` when the transmit queue is full.
    ///
    /// Software GSO: a segment whose payload exceeds what one MTU-sized packet carries is cut
    /// into MTU-sized segments here, each with its own sequence number and checksums. As in
    /// Linux's `tcp_gso_segment`, FIN and PSH stay on the last piece only and CWR on the first
    /// only, so the receiver sees exactly what a sender without GSO would have sent.
    pub fn emit_tcp(&mut self, now: Instant, seg: &OutSegment<'_>) -> bool {
        if self.tx_full() {
            return false;
        }
        let hlen = tcp_wire::header_len(&seg.repr);
        let total = seg.payload.0.len() + seg.payload.1.len();
        // Pieces carry at most the engine's `gso_size` (the effective send MSS, RFC 9293
        // §3.7.1) and fit the MTU; a TSO device cuts at its MTU, so it only gets super-segments
        // whose size the MTU already bounds.
        let mtu_max = self.mtu.saturating_sub(IP_LEN + hlen);
        let gso_size = usize::from(seg.gso_size);
        let max = if self.tso && gso_size >= mtu_max {
            65535 - IP_LEN - hlen
        } else {
            mtu_max.min(if gso_size == 0 { mtu_max } else { gso_size })
        };
        // The header is built once per segment from the engine; each GSO piece copies it and
        // patches sequence number, flags and checksum (Linux `tcp_gso_segment` does the same
        // to the headers of the skb it splits).
        let mut tmpl = [0u8; 60];
        if hlen > tmpl.len() || tcp_wire::emit(&seg.repr, &mut tmpl[..hlen], None).is_err() {
            self.c.tcp_malformed += 1;
            return true;
        }
        // Sums of the templates with the per-packet fields zero; each packet adds its own
        // fields in (one's-complement addition is associative, RFC 1071 §2 (A)), so no header
        // is summed per packet.
        let mut zeroed = tmpl;
        zeroed[4..8].fill(0);
        zeroed[13] = 0;
        let tmpl = &tmpl[..hlen];
        let link = self.tcp_headers(now, seg.src, seg.dst);
        let link = link.as_ref().map(|(t, l)| {
            let t = &t[..l + IP_LEN];
            (t, crate::mem::checksum(&t[*l..]))
        });
        let hdrs = Hdrs {
            tcp: tmpl,
            tcp_sum: crate::mem::checksum(&zeroed[..hlen]),
            link,
        };
        if total <= max || seg.repr.flags.syn() || max == 0 {
            self.emit_tcp_one(now, seg, &hdrs, seg.repr.seq, seg.repr.flags, 0, total);
            return true;
        }
        let pieces = total.div_ceil(max);
        // Keep a super-segment whole in one queue (unless it could never fit).
        if self.tx.len() + pieces > self.tx_limit && !self.tx.is_empty() {
            return false;
        }
        let mut off = 0;
        while off < total {
            let len = max.min(total - off);
            let seq = seg.repr.seq.wrapping_add(off as u32);
            let mut flags = seg.repr.flags.0;
            if off + len < total {
                flags &= !(TcpFlags::FIN | TcpFlags::PSH);
            }
            if off > 0 {
                flags &= !TcpFlags::CWR;
            }
            self.emit_tcp_one(now, seg, &hdrs, seq, TcpFlags(flags), off, len);
            self.c.gso_segments += 1;
            off += len;
        }
        true
    }

    /// One packet: TCP header `hdrs.tcp` with `seq` and `flags` patched in, payload bytes
    /// `off..off + len` of the segment, checksums computed in the copy; the link and IPv4
    /// headers come from `hdrs.link` when given (see `tcp_headers`), else from `send_ip`.
    #[allow(clippy::too_many_arguments)]
    fn emit_tcp_one(
        &mut self,
        now: Instant,
        seg: &OutSegment<'_>,
        hdrs: &Hdrs<'_>,
        seq: u32,
        flags: TcpFlags,
        off: usize,
        len: usize,
    ) {
        let mut buf = self.pool.get();
        let hlen = hdrs.tcp.len();
        let area = buf.append(hlen + len);
        // The checksum folded into the copy: the payload is summed while it is copied, and the
        // header's checksum is completed from that sum without reading the payload again.
        let payload_sum = copy_range_with_checksum(&mut area[hlen..], seg.payload, off, len);
        if len > 0 {
            self.c.copies += 1;
            self.c.bytes_copied += len as u64;
            self.c.bytes_checksummed += len as u64;
        }
        let h = &mut area[..hlen];
        h.copy_from_slice(hdrs.tcp);
        h[4..8].copy_from_slice(&seq.to_be_bytes());
        h[13] = flags.0;
        if self.csum_tx {
            // RFC 9293 §3.1: the sum covers the pseudo-header, the header and the data; the
            // header is a multiple of 4 bytes, so the payload's sum adds in directly.
            let ph = pseudo_header_sum(seg.src, seg.dst, IpProtocol::Tcp, (hlen + len) as u32);
            let mut sum = checksum_combine(ph, hdrs.tcp_sum);
            sum = checksum_combine(sum, (seq >> 16) as u16);
            sum = checksum_combine(sum, seq as u16);
            // Byte 13 (flags) is the low byte of the 16-bit word at 12.
            sum = checksum_combine(sum, u16::from(flags.0));
            sum = checksum_combine(sum, payload_sum);
            h[16..18].copy_from_slice(&(!sum).to_be_bytes());
        }
        let Some((link, link_sum)) = hdrs.link else {
            let _ = self.send_ip(now, IpProtocol::Tcp, seg.src, seg.dst, buf);
            return;
        };
        // The checks `send_ip` makes: queue room, size (pieces are cut to the MTU, or to
        // 64 KiB for a TSO device).
        let total = IP_LEN + buf.len();
        if self.tx_full() || total > 65535 || (total > self.mtu && !self.tso) {
            let _ = self.send_ip(now, IpProtocol::Tcp, seg.src, seg.dst, buf);
            return;
        }
        self.ident = self.ident.wrapping_add(1);
        let eth_len = link.len() - IP_LEN;
        let h = buf.prepend(link.len());
        h.copy_from_slice(link);
        let ip = &mut h[eth_len..];
        // RFC 791 §3.1: total length, identification, header checksum.
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&self.ident.to_be_bytes());
        if self.csum_tx {
            let sum = checksum_combine(checksum_combine(link_sum, total as u16), self.ident);
            ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
        }
        self.c.ipv4_out += 1;
        self.push(buf);
    }
}

/// Header templates shared by the packets of one TCP segment (see `Egress::emit_tcp`).
struct Hdrs<'a> {
    /// The TCP header, checksum 0.
    tcp: &'a [u8],
    /// Its sum with sequence number and flags zero.
    tcp_sum: u16,
    /// Link + IPv4 headers (total length, ident, checksum 0) and the IPv4 header's sum.
    link: Option<(&'a [u8], u16)>,
}

/// Copies bytes `off..off + len` of the concatenation `parts.0 ++ parts.1` into `dst` and
/// returns their one's-complement sum. A piece that starts at an odd offset within `dst` has
/// its sum byte-swapped (RFC 1071 §2 (B), byte-order independence), so the pieces combine.
pub fn copy_range_with_checksum(
    dst: &mut [u8],
    parts: (&[u8], &[u8]),
    off: usize,
    len: usize,
) -> u16 {
    let (a, b) = parts;
    let a_part = a
        .get(off.min(a.len())..(off + len).min(a.len()))
        .unwrap_or(&[]);
    let b_off = off.saturating_sub(a.len());
    let b_len = len - a_part.len();
    let b_part = b
        .get(b_off.min(b.len())..(b_off + b_len).min(b.len()))
        .unwrap_or(&[]);
    let n1 = a_part.len();
    let s1 = crate::mem::copy_with_checksum(&mut dst[..n1], a_part);
    let mut s2 = crate::mem::copy_with_checksum(&mut dst[n1..n1 + b_part.len()], b_part);
    if n1 % 2 == 1 {
        s2 = s2.swap_bytes();
    }
    checksum_combine(s1, s2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;
    use crate::wire::ipv4::Ipv4Packet;
    use crate::wire::tcp::TcpRepr;

    fn egress(tx_limit: usize) -> Egress {
        Egress {
            medium: Medium::Ip,
            mac: EthernetAddress::default(),
            addr: Ipv4Addr::new(198, 18, 0, 1),
            prefix_len: 24,
            gateway: None,
            mtu: 1500,
            csum_tx: true,
            tso: false,
            ttl: 64,
            ident: 0,
            pool: Pool::new(1518, 16),
            tx: Vec::new(),
            tx_limit,
            neigh: NeighborCache::new(Duration::from_secs(60), 4, Duration::from_secs(1), 3),
            c: Counters::default(),
            arp_due: Vec::new(),
        }
    }

    #[test]
    fn gso_splits_at_mtu_with_flags_seq_and_checksums() {
        let mut eg = egress(16);
        let data: Vec<u8> = (0..3001u32).map(|i| (i * 7) as u8).collect();
        let (a, b) = data.split_at(1001);
        let repr = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq: u32::MAX - 10,
            ack: 5,
            flags: TcpFlags(TcpFlags::ACK | TcpFlags::PSH | TcpFlags::FIN | TcpFlags::CWR),
            window: 100,
            ..TcpRepr::default()
        };
        let seg = OutSegment {
            src: eg.addr,
            dst: Ipv4Addr::new(198, 18, 0, 2),
            repr,
            payload: (a, b),
            gso_size: 1460,
        };
        assert!(eg.emit_tcp(Instant::ZERO, &seg));
        assert_eq!(eg.tx.len(), 3);
        let mut joined = Vec::new();
        for (i, f) in eg.tx.iter().enumerate() {
            assert!(f.len() <= 1500);
            let ip = Ipv4Packet::new_checked(f.as_slice()).unwrap();
            assert!(ip.verify_checksum());
            let (t, hl) = tcp_wire::parse(ip.payload(), seg.src, seg.dst, true).unwrap();
            assert_eq!(t.seq, repr.seq.wrapping_add(joined.len() as u32));
            let last = i == 2;
            assert_eq!(t.flags.fin(), last);
            assert_eq!(t.flags.psh(), last);
            assert_eq!(t.flags.cwr(), i == 0);
            assert!(t.flags.ack());
            joined.extend_from_slice(&ip.payload()[hl..]);
        }
        assert_eq!(joined, data);
        assert_eq!(eg.c.gso_segments, 3);
    }

    #[test]
    fn full_queue_refuses_segments() {
        let mut eg = egress(1);
        let seg = OutSegment {
            src: eg.addr,
            dst: Ipv4Addr::new(198, 18, 0, 2),
            repr: TcpRepr {
                src_port: 1,
                dst_port: 2,
                ..TcpRepr::default()
            },
            payload: (&[1, 2, 3], &[]),
            gso_size: 1460,
        };
        assert!(eg.emit_tcp(Instant::ZERO, &seg));
        assert!(!eg.emit_tcp(Instant::ZERO, &seg));
        assert_eq!(eg.tx.len(), 1);
    }

    #[test]
    fn split_copy_checksum_matches_flat_checksum() {
        let data: Vec<u8> = (0..101u8).map(|i| i.wrapping_mul(37)).collect();
        for cut in [0, 1, 2, 33, 50, 100, 101] {
            let (a, b) = data.split_at(cut);
            for (off, len) in [(0, 101), (1, 60), (7, 33), (40, 61)] {
                let mut dst = vec![0u8; len];
                let s = copy_range_with_checksum(&mut dst, (a, b), off, len);
                assert_eq!(&dst[..], &data[off..off + len]);
                let flat = crate::mem::checksum(&data[off..off + len]);
                // 0x0000 and 0xffff are the same value in one's complement.
                assert!(s == flat || (s == 0xffff && flat == 0) || (s == 0 && flat == 0xffff));
            }
        }
    }
}
