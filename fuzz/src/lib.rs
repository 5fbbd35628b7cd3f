//! Shared harness for the whole-stack fuzz targets: two `Stack`s joined by an in-memory wire
//! (a honest peer B and the stack under test A), a deterministic scenario that puts A's
//! sockets in several TCP states, and a builder for well-formed frames (checksums right) so the
//! fuzzer reaches TCP instead of the checksum check. Public APIs only: `Stack`, `Device`,
//! `TcpLayer`, the `wire` Reprs.

use netfold::buf::{PacketBuf, Pool};
use netfold::iface::{Stack, StackConfig, UdpHandle};
use netfold::phy::{Device, DeviceCaps};
use netfold::tcp::{Config, Handle, State};
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use netfold::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use netfold::wire::ipv6::{Ipv6Addr, Ipv6Cidr};
use netfold::wire::tcp::{PseudoHeader, TcpFlags, TcpOptions, TcpPacket, TcpRepr};
use netfold::wire::udp::{UdpPacket, UdpRepr};
use netfold::wire::{IpProtocol, Ipv4Addr};
use std::cell::Cell;
use std::collections::VecDeque;
use std::net::{SocketAddr, SocketAddrV4};

thread_local! {
    /// When set, `Scenario::check_bounds` holds each receive queue to the configured buffer
    /// exactly (without the window-scale rounding slack). Per thread: tests run in parallel.
    pub static STRICT_BUFFER_BOUND: Cell<bool> = const { Cell::new(false) };
}

/// The stack under test.
pub const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The honest peer.
pub const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The stack under test's IPv6 address (2001:2::/48 is for benchmarking, RFC 5180).
pub const IP6_A: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1);
/// The honest peer's IPv6 address.
pub const IP6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2);
/// MAC of A.
pub const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
/// MAC of B.
pub const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);
/// A's listening port.
pub const PORT_LISTEN: u16 = 80;
/// A's UDP port.
pub const PORT_UDP: u16 = 53;
/// Backlog of A's listener.
pub const BACKLOG: usize = 8;

/// The byte at offset `i` of the honest stream B sends on the established connection.
pub fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// A device whose receive queue the harness fills and whose transmit queue it drains.
#[derive(Default)]
pub struct Wire {
    /// Frames the stack will receive, in order.
    pub inbox: VecDeque<Vec<u8>>,
    /// Frames the stack sent.
    pub outbox: Vec<Vec<u8>>,
}

impl Wire {
    /// An empty wire.
    pub fn new() -> Self {
        Wire {
            inbox: VecDeque::new(),
            outbox: Vec::new(),
        }
    }
}

impl Device for Wire {
    fn caps(&self) -> DeviceCaps {
        DeviceCaps {
            mtu: 1500,
            max_burst: 64,
            ..DeviceCaps::default()
        }
    }
    fn recv_batch(
        &mut self,
        _: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let n = self.inbox.len().min(max);
        for f in self.inbox.drain(..n) {
            let mut b = pool.get();
            b.extend_from_slice(&f);
            out.push(b);
        }
        n
    }
    fn send_batch(&mut self, _: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        for f in frames.drain(..) {
            self.outbox.push(f.as_slice().to_vec());
            pool.put(f);
        }
    }
}

/// Frames with a TCP header: (ip src, ip dst, repr, payload).
pub fn parse_tcp(frame: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr, TcpRepr, Vec<u8>)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let er = EthernetRepr::parse(&eth).ok()?;
    if er.ethertype != EtherType::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(&frame[er.header_len()..]).ok()?;
    let ir = Ipv4Repr::parse(&ip, false).ok()?;
    if ir.protocol != IpProtocol::Tcp || ir.is_fragment() {
        return None;
    }
    let hl = ip.header_len();
    let seg = frame.get(er.header_len() + hl..er.header_len() + hl + ir.payload_len)?;
    let tp = TcpPacket::new_checked(seg).ok()?;
    let ph = PseudoHeader::new(ir.src, ir.dst);
    let tr = TcpRepr::parse(&tp, &ph, false).ok()?;
    Some((ir.src, ir.dst, tr, tp.payload().to_vec()))
}

/// An IPv4 fragment of a TCP segment (its ports may be in another fragment).
pub fn is_tcp_fragment(frame: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return false;
    };
    let Ok(er) = EthernetRepr::parse(&eth) else {
        return false;
    };
    let Some(rest) = frame.get(er.header_len()..) else {
        return false;
    };
    // Read the header fields without the length checks: a truncated fragment still counts.
    rest.len() >= 20 && rest[9] == 6 && (u16::from_be_bytes([rest[6], rest[7]]) & 0x3fff) != 0
}

fn ip_frame(src: Ipv4Addr, dst: Ipv4Addr, proto: IpProtocol, l4: &[u8]) -> Vec<u8> {
    let (smac, dmac) = if src == IP_A {
        (MAC_A, MAC_B)
    } else {
        (MAC_B, MAC_A)
    };
    let eth = EthernetRepr {
        src: smac,
        dst: dmac,
        ethertype: EtherType::Ipv4,
        vlan: None,
    };
    let ip = Ipv4Repr {
        src,
        dst,
        protocol: proto,
        payload_len: l4.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: 7,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    let el = eth.header_len();
    let mut f = vec![0u8; el + 20 + l4.len()];
    eth.emit(&mut f[..el]).expect("ethernet header fits");
    ip.emit(&mut f[el..], true).expect("ip header fits");
    f[el + 20..].copy_from_slice(l4);
    f
}

/// B's ARP request for A: A learns B's MAC from it (RFC 826 merge), so A's answers need no
/// resolution round.
pub fn arp_request_from_b() -> Vec<u8> {
    use netfold::wire::arp::{ArpOperation, ArpRepr};
    let eth = EthernetRepr {
        src: MAC_B,
        dst: EthernetAddress([0xff; 6]),
        ethertype: EtherType::Arp,
        vlan: None,
    };
    let arp = ArpRepr {
        op: ArpOperation::Request,
        source_hw: MAC_B,
        source_ip: IP_B,
        target_hw: EthernetAddress([0; 6]),
        target_ip: IP_A,
    };
    let el = eth.header_len();
    let mut f = vec![0u8; el + arp.buffer_len()];
    eth.emit(&mut f[..el]).expect("ethernet header fits");
    arp.emit(&mut f[el..]).expect("arp fits");
    f
}

/// An Ethernet/IPv4/TCP frame with correct checksums.
pub fn tcp_frame(src: Ipv4Addr, dst: Ipv4Addr, repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    let hl = repr.header_len();
    let mut seg = vec![0u8; hl + payload.len()];
    seg[hl..].copy_from_slice(payload);
    {
        let mut p = TcpPacket::new_unchecked(&mut seg[..]);
        repr.emit(&mut p);
        p.fill_checksum(&PseudoHeader::new(src, dst));
    }
    ip_frame(src, dst, IpProtocol::Tcp, &seg)
}

/// An Ethernet/IPv4/UDP frame with correct checksums.
pub fn udp_frame(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let repr = UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
    };
    let mut d = vec![0u8; repr.buffer_len(payload.len())];
    let ph = PseudoHeader::new(*src.ip(), *dst.ip());
    let n = repr
        .emit_with_checksum(&mut d, payload, &ph)
        .expect("udp fits");
    d.truncate(n);
    let _ = UdpPacket::new_checked(&d[..]);
    ip_frame(*src.ip(), *dst.ip(), IpProtocol::Udp, &d)
}

/// The Internet checksum field over `parts` (RFC 1071), starting from the folded sum `init`.
fn inet_checksum(init: u16, parts: &[&[u8]]) -> u16 {
    let mut sum = u32::from(init);
    let mut odd: Option<u8> = None;
    for p in parts {
        for &b in p.iter() {
            match odd.take() {
                Some(hi) => sum += u32::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u32::from(hi) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet/IPv6 frame from B's MAC to A's (or to a multicast MAC for a multicast `dst`):
/// the fixed header, then `rest` (extension headers and the upper layer) as given.
pub fn ip6_frame(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop_limit: u8, rest: &[u8]) -> Vec<u8> {
    let o = dst.octets();
    let dmac = if o[0] == 0xff {
        EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
    } else {
        MAC_A
    };
    let eth = EthernetRepr {
        src: MAC_B,
        dst: dmac,
        ethertype: EtherType::Ipv6,
        vlan: None,
    };
    let el = eth.header_len();
    let mut f = vec![0u8; el + 40 + rest.len()];
    eth.emit(&mut f[..el]).expect("ethernet header fits");
    let len = u16::try_from(rest.len()).unwrap_or(u16::MAX);
    f[el] = 0x60;
    f[el + 4..el + 6].copy_from_slice(&len.to_be_bytes());
    f[el + 6] = next;
    f[el + 7] = hop_limit;
    f[el + 8..el + 24].copy_from_slice(&src.octets());
    f[el + 24..el + 40].copy_from_slice(&dst.octets());
    f[el + 40..].copy_from_slice(rest);
    f
}

/// An upper-layer message (TCP, UDP or ICMPv6) with its checksum filled for `src` -> `dst`
/// (RFC 8200 §8.1); `csum_at` is where the field sits in `l4`.
fn with_checksum6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    proto: u8,
    mut l4: Vec<u8>,
    csum_at: usize,
) -> Vec<u8> {
    if l4.len() < csum_at + 2 {
        return l4;
    }
    l4[csum_at] = 0;
    l4[csum_at + 1] = 0;
    let len = (l4.len() as u32).to_be_bytes();
    let c = inet_checksum(
        0,
        &[&src.octets(), &dst.octets(), &len, &[0, 0, 0, proto], &l4],
    );
    l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    l4
}

/// The solicited-node multicast address of `a` (RFC 4291 §2.7.1).
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// An IPv6 frame to A chosen by the fuzzer: source and destination among the interesting ones
/// (B, link-local, unspecified, multicast, A, anything), up to three extension headers
/// (hop-by-hop, routing, destination options, fragment) with fuzzer bytes, then an ICMPv6
/// message (NDP included: solicitations, advertisements, redirects, router advertisements with
/// options), a TCP segment to A's IPv6 listener or connection, a UDP datagram, or raw bytes;
/// upper-layer checksums right unless the fuzzer asks otherwise.
pub fn fuzz_ipv6_frame(inp: &mut Input, est6_port: u16) -> Vec<u8> {
    let pick6 = |inp: &mut Input, a: Ipv6Addr| -> Ipv6Addr {
        match inp.u8() % 16 {
            0..=8 => a,
            9 => Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, u16::from(inp.u8())),
            10 => Ipv6Addr::UNSPECIFIED,
            11 => Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
            12 => solicited_node(IP6_A),
            13 => IP6_B,
            14 => IP6_A,
            _ => Ipv6Addr::from(inp.u32() as u128 | (u128::from(inp.u32()) << 96)),
        }
    };
    let src = pick6(inp, IP6_B);
    let dst = pick6(inp, IP6_A);
    let flags = inp.u8();
    let hop_limit = if flags & 1 == 0 { 255 } else { inp.u8() };
    let bad_csum = flags & 2 != 0 && flags & 4 != 0;
    // The upper layer first (its checksum covers only itself and the pseudo-header).
    let (proto, l4) = match inp.u8() % 5 {
        0 | 1 => {
            // ICMPv6: echo request, NDP (133-137), errors (1-4), MLD, or any type.
            let ty = match inp.u8() % 8 {
                0 => 128,
                1 => 135,
                2 => 136,
                3 => 134,
                4 => 137,
                5 => 133,
                6 => 1 + inp.u8() % 4,
                _ => inp.u8(),
            };
            let code = if inp.u8() & 3 == 0 { inp.u8() } else { 0 };
            let len = usize::from(inp.u16() % 1200);
            let mut m = vec![ty, code, 0, 0];
            m.extend_from_slice(inp.bytes(len));
            if matches!(ty, 135..=137) && m.len() >= 24 && inp.u8() & 1 == 0 {
                // The target address field: A's address, as a real solicitation would carry.
                m[8..24].copy_from_slice(&IP6_A.octets());
            }
            (58u8, with_checksum6(src, dst, 58, m, 2))
        }
        2 => {
            let dport = if inp.u8() & 1 == 0 {
                PORT_LISTEN
            } else {
                inp.u16()
            };
            let sport = match inp.u8() % 3 {
                0 => est6_port,
                _ => inp.u16(),
            };
            let repr = TcpRepr {
                src_port: sport,
                dst_port: dport,
                seq: inp.u32(),
                ack: inp.u32(),
                flags: TcpFlags(inp.u8()),
                window: inp.u16(),
                urgent: 0,
                options: inp.options(),
            };
            let len = usize::from(inp.u16() % 1400);
            let payload = inp.bytes(len).to_vec();
            let hl = repr.header_len();
            if hl > 60 {
                (6u8, payload)
            } else {
                let mut seg = vec![0u8; hl + payload.len()];
                seg[hl..].copy_from_slice(&payload);
                {
                    let mut p = TcpPacket::new_unchecked(&mut seg[..]);
                    repr.emit(&mut p);
                    p.fill_checksum(&PseudoHeader::new(src, dst));
                }
                (6u8, seg)
            }
        }
        3 => {
            let len = usize::from(inp.u16() % 1400);
            let mut d = vec![0u8; 8];
            d[0..2].copy_from_slice(&inp.u16().to_be_bytes());
            d[2..4].copy_from_slice(&PORT_UDP.to_be_bytes());
            d.extend_from_slice(inp.bytes(len));
            let l = (d.len() as u16).to_be_bytes();
            d[4..6].copy_from_slice(&l);
            (17u8, with_checksum6(src, dst, 17, d, 6))
        }
        _ => {
            let len = usize::from(inp.u16() % 1400);
            (inp.u8(), inp.bytes(len).to_vec())
        }
    };
    let mut l4 = l4;
    if bad_csum && l4.len() > 3 {
        l4[2] ^= 0x5a;
    }
    // Extension headers, innermost first, each naming what follows it.
    let mut next = proto;
    let mut rest = l4;
    for _ in 0..(inp.u8() % 8).saturating_sub(4) {
        let kind = match inp.u8() % 5 {
            0 => 0u8,
            1 => 43,
            2 => 60,
            3 => 44,
            _ => inp.u8(),
        };
        let mut h = Vec::new();
        if kind == 44 {
            // Fragment header: offset, M flag and identification from the fuzzer.
            h.extend_from_slice(&[next, 0]);
            h.extend_from_slice(&inp.u16().to_be_bytes());
            h.extend_from_slice(&inp.u32().to_be_bytes());
        } else {
            let units = inp.u8() % 4;
            h.push(next);
            h.push(units);
            let body = 6 + 8 * usize::from(units);
            let b = inp.bytes(body);
            h.extend_from_slice(b);
            h.resize(8 + 8 * usize::from(units), 0);
        }
        h.extend_from_slice(&rest);
        rest = h;
        next = kind;
    }
    ip6_frame(src, dst, next, hop_limit, &rest)
}

/// A's TCP configuration in the scenario (recv/send buffers bound the memory checks).
pub fn tcp_config() -> Config {
    Config {
        time_wait: Duration::from_secs(2),
        ..Config::default()
    }
}

/// Two stacks and the wire between them, with A's sockets in several states.
pub struct Scenario {
    /// Virtual time.
    pub now: Instant,
    /// The stack under test.
    pub a: Stack,
    /// The honest peer.
    pub b: Stack,
    /// A's device.
    pub da: Wire,
    /// B's device.
    pub db: Wire,
    /// Frames from B to A held back ("in flight").
    pub held: VecDeque<Vec<u8>>,
    /// A's listener.
    pub listener: Handle,
    /// A's established connection (server side).
    pub est: Handle,
    /// B's end of it.
    pub est_peer: Handle,
    /// A's connection that A closed: FIN-WAIT-1/2.
    pub fin: Handle,
    /// B's end of it (left in CLOSE-WAIT).
    pub fin_peer: Handle,
    /// A's UDP socket.
    pub udp: UdpHandle,
    /// A's IPv6 listener (same port as the IPv4 one).
    pub listener6: Handle,
    /// A's established IPv6 connection (server side), and B's end of it.
    pub est6: Handle,
    pub est6_peer: Handle,
    /// B's port of the IPv6 connection.
    pub est6_port: u16,
    /// B's port of the established connection.
    pub est_port: u16,
    /// B's initial sequence number on the established connection.
    pub b_isn: u32,
    /// A's initial sequence number on the established connection.
    pub a_isn: u32,
    /// The highest sequence number A has sent on it (what an acceptable ACK may reach).
    pub a_snd_nxt: u32,
    /// The last timestamp value B sent on it (what passes PAWS).
    pub b_tsval: u32,
    /// The last timestamp value A sent on it (what B echoes).
    pub a_tsval: u32,
    /// Bytes B's application handed to TCP on `est_peer`.
    pub sent: u64,
    /// Bytes A's application read from `est`.
    pub recvd: u64,
    /// Set when A delivered a byte that B never sent at that offset.
    pub mixed: Option<u64>,
}

impl Scenario {
    /// Builds the scenario; `gro` sets A's GRO.
    pub fn new(gro: bool) -> Scenario {
        let a = Stack::new(StackConfig {
            addr: IP_A,
            mac: MAC_A,
            tcp_secret: netfold::tcp::Secret::fixed_for_tests([0xa5; 16]),
            gro,
            addrs6: vec![Ipv6Cidr::new(IP6_A, 64).expect("prefix")],
            dad_transmits: 0,
            ..StackConfig::default()
        });
        let mut a = a;
        let udp = a
            .udp_bind(SocketAddrV4::new(IP_A, PORT_UDP))
            .expect("udp bind");
        let none = Handle {
            index: u32::MAX,
            generation: 0,
        };
        let b = Stack::new(StackConfig {
            addr: IP_B,
            mac: MAC_B,
            tcp_secret: netfold::tcp::Secret::fixed_for_tests([0x5a; 16]),
            addrs6: vec![Ipv6Cidr::new(IP6_B, 64).expect("prefix")],
            dad_transmits: 0,
            ..StackConfig::default()
        });
        let mut s = Scenario {
            now: Instant::from_millis(1),
            a,
            b,
            da: Wire::new(),
            db: Wire::new(),
            held: VecDeque::new(),
            listener: none,
            est: none,
            est_peer: none,
            fin: none,
            fin_peer: none,
            udp,
            listener6: none,
            est6: none,
            est6_peer: none,
            est6_port: 0,
            est_port: 0,
            b_isn: 0,
            a_isn: 0,
            a_snd_nxt: 0,
            b_tsval: 0,
            a_tsval: 0,
            sent: 0,
            recvd: 0,
            mixed: None,
        };
        let la = SocketAddrV4::new(IP_A, PORT_LISTEN);
        s.listener =
            s.a.tcp_mut()
                .listen(la, BACKLOG, tcp_config())
                .expect("listen");
        let now = s.now;
        s.est_peer =
            s.b.tcp_mut()
                .connect(now, SocketAddrV4::new(IP_B, 0), la, tcp_config())
                .expect("connect");
        s.est_port = s.b.tcp().local_addr(s.est_peer).expect("addr").port();
        s.est = s.accept_one();
        s.fin_peer =
            s.b.tcp_mut()
                .connect(s.now, SocketAddrV4::new(IP_B, 0), la, tcp_config())
                .expect("connect");
        s.fin = s.accept_one();
        s.a.tcp_mut().close(s.fin).expect("close");
        // The same over IPv6: a listener and an established connection (NDP resolves B).
        let la6 = SocketAddr::new(IP6_A.into(), PORT_LISTEN);
        s.listener6 =
            s.a.tcp_mut()
                .listen(la6, BACKLOG, tcp_config())
                .expect("listen6");
        s.est6_peer =
            s.b.tcp_mut()
                .connect(s.now, SocketAddr::new(IP6_B.into(), 0), la6, tcp_config())
                .expect("connect6");
        s.est6_port = s.b.tcp().local_addr(s.est6_peer).expect("addr6").port();
        s.est6 = s.accept_from(s.listener6);
        s.settle(Duration::from_millis(50));
        // Data in flight: B sends, A receives part of it, the rest is held back.
        s.b_send(40_000);
        s.exchange_held(4);
        s
    }

    fn accept_one(&mut self) -> Handle {
        self.accept_from(self.listener)
    }

    fn accept_from(&mut self, listener: Handle) -> Handle {
        for _ in 0..1000 {
            self.exchange(false);
            if let Ok(h) = self.a.tcp_mut().accept(listener) {
                self.settle(Duration::from_millis(20));
                return h;
            }
            self.now += Duration::from_millis(1);
        }
        panic!("scenario: handshake did not complete");
    }

    /// One round: both stacks poll and their frames cross. With `hold`, B's frames to A are
    /// held back instead of delivered.
    pub fn exchange(&mut self, hold: bool) {
        self.a.poll(self.now, &mut self.da);
        self.b.poll(self.now, &mut self.db);
        for f in self.da.outbox.drain(..) {
            if let Some((_, _, r, p)) = parse_tcp(&f) {
                if r.flags.syn()
                    && r.flags.0 & TcpFlags::ACK != 0
                    && r.dst_port == self.est_port
                    && self.a_isn == 0
                {
                    self.a_isn = r.seq;
                }
                if r.dst_port == self.est_port {
                    let end = r
                        .seq
                        .wrapping_add(p.len() as u32)
                        .wrapping_add(u32::from(r.flags.syn()) + u32::from(r.flags.fin()));
                    if end.wrapping_sub(self.a_snd_nxt) as i32 > 0 || self.a_snd_nxt == 0 {
                        self.a_snd_nxt = end;
                    }
                    if let Some(ts) = r.options.timestamps {
                        self.a_tsval = ts.tsval;
                    }
                }
            }
            self.db.inbox.push_back(f);
        }
        for f in self.db.outbox.drain(..) {
            if let Some((_, _, r, _)) = parse_tcp(&f) {
                if r.flags.syn()
                    && r.flags.0 & TcpFlags::ACK == 0
                    && r.src_port == self.est_port
                    && self.b_isn == 0
                {
                    self.b_isn = r.seq;
                }
                if r.src_port == self.est_port {
                    if let Some(ts) = r.options.timestamps {
                        self.b_tsval = ts.tsval;
                    }
                }
            }
            if hold {
                self.held.push_back(f);
            } else {
                self.da.inbox.push_back(f);
            }
        }
    }

    /// Rounds for `d` of virtual time, 1 ms apart.
    pub fn settle(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.exchange(false);
            self.now += Duration::from_millis(1);
        }
    }

    /// Runs `rounds` rounds with B's output held back.
    pub fn exchange_held(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.exchange(true);
            self.now += Duration::from_millis(1);
        }
    }

    /// B's application sends up to `n` more bytes of the pattern on the established connection.
    pub fn b_send(&mut self, n: usize) {
        let space = self.b.tcp().send_space(self.est_peer).unwrap_or(0).min(n);
        let chunk: Vec<u8> = (0..space as u64).map(|k| pattern(self.sent + k)).collect();
        if let Ok(m) = self.b.tcp_mut().send(self.est_peer, &chunk) {
            self.sent += m as u64;
        }
    }

    /// A's application reads from the established connection; every byte is checked against
    /// what B sent at that offset.
    pub fn a_recv(&mut self) -> Vec<u8> {
        let mut buf = vec![0u8; 16 * 1024];
        let mut got = Vec::new();
        while let Ok(n) = self.a.tcp_mut().recv(self.est, &mut buf) {
            if n == 0 {
                break;
            }
            for (k, &byte) in buf[..n].iter().enumerate() {
                let off = self.recvd + k as u64;
                if off >= self.sent || byte != pattern(off) {
                    self.mixed.get_or_insert(off);
                }
            }
            self.recvd += n as u64;
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    /// The stream offset of sequence number `seq` on B's side of the established connection.
    pub fn b_seq(&self, off: u64) -> u32 {
        self.b_isn.wrapping_add(1).wrapping_add(off as u32)
    }

    /// Memory bounds that must hold after any input: buffered bytes under the configured
    /// buffers, sockets under listener + accepted + backlog, ARP queue under its limit.
    pub fn check_bounds(&self) {
        let cfg = tcp_config();
        let tcp = self.a.tcp();
        for h in [self.est, self.fin, self.est6] {
            let Ok(info) = tcp.conn_info(h) else {
                continue;
            };
            // Buffers are auto-tuned (tcp/autotune.rs): the bound is the connection's current
            // buffer, itself never above the configured maximum.
            assert!(
                info.recv_buffer <= cfg.recv_buffer_max,
                "recv buffer above its maximum"
            );
            assert!(
                info.send_buffer <= cfg.send_buffer_max,
                "send buffer above its maximum"
            );
            // Known (docs/SECURITY.md): the advertised window is rounded up to the window-scale
            // unit, so a peer may fill the receive queue up to 2^rcv_wscale bytes past the
            // buffer. STRICT_BUFFER_BOUND asks for the buffer bound exactly.
            let slack = if STRICT_BUFFER_BOUND.with(Cell::get) {
                0
            } else {
                1usize << info.rcv_wscale.min(14)
            };
            if let Ok(q) = tcp.recv_queue(h) {
                assert!(
                    q <= info.recv_buffer + slack,
                    "recv queue {q} > {} + {slack}",
                    info.recv_buffer
                );
            }
            if let Ok(q) = tcp.send_queue(h) {
                assert!(
                    q <= info.send_buffer,
                    "send queue {q} > {}",
                    info.send_buffer
                );
            }
        }
        // Per family a listener with a full accept queue and a full SYN queue; the three
        // accepted connections.
        let bound = 3 + 2 * (1 + 2 * BACKLOG);
        assert!(
            tcp.socket_count() <= bound,
            "{} sockets > {bound}",
            tcp.socket_count()
        );
        assert!(self.a.arp_pending() <= self.a.config().arp_pending_limit);
    }

    /// State of A's sockets (for diagnostics).
    pub fn states(
        &self,
    ) -> (
        Result<State, netfold::tcp::Error>,
        Result<State, netfold::tcp::Error>,
    ) {
        (self.a.tcp().state(self.est), self.a.tcp().state(self.fin))
    }
}

/// Reads fuzz input as a stream of small integers.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// Wraps `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }
    /// True when nothing is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// Next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    /// Next big-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    /// Next big-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Up to `n` next bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
    /// TCP options chosen by the input.
    pub fn options(&mut self) -> TcpOptions {
        let sel = self.u8();
        let mut o = TcpOptions::default();
        if sel & 1 != 0 {
            o.mss = Some(self.u16());
        }
        if sel & 2 != 0 {
            o.window_scale = Some(self.u8());
        }
        o.sack_permitted = sel & 4 != 0;
        if sel & 8 != 0 {
            o.timestamps = Some(netfold::wire::tcp::Timestamps {
                tsval: self.u32(),
                tsecr: self.u32(),
            });
        }
        o.sack_count = (sel >> 4) % 5;
        for i in 0..usize::from(o.sack_count) {
            o.sack[i].left = self.u32();
            o.sack[i].right = self.u32();
        }
        o
    }
}

/// The `stack` fuzz target's body (see fuzz_targets/stack.rs): builds the scenario, runs the
/// program `data` encodes, and panics if a bound or the no-mixing rule breaks. A function here
/// so that crates/netfold/tests/fuzz_regressions.rs can replay crashing inputs with plain
/// `cargo test`.
pub fn stack_program(data: &[u8]) {
    run_stack_program(data);
}

/// [`stack_program`], returning the scenario at its end (for tests that look at counters).
pub fn run_stack_program(data: &[u8]) -> Scenario {
    let mut s = Scenario::new(true);
    let mut inp = Input::new(data);
    let mut ops = 0;
    while !inp.is_empty() && ops < 256 {
        ops += 1;
        // Op bytes 250-255 are the IPv6 operations; below, `% 10` keeps the meaning the
        // recorded inputs (crates/netfold/tests/fuzz_regressions.rs) were found with.
        let op = inp.u8();
        if op >= 250 {
            match op {
                250..=253 => {
                    let f = fuzz_ipv6_frame(&mut inp, s.est6_port);
                    s.da.inbox.push_back(f);
                }
                254 => {
                    // Raw bytes after a well-formed IPv6 Ethernet header.
                    let len = usize::from(inp.u16() % 1600);
                    let body = inp.bytes(len).to_vec();
                    let mut f = ip6_frame(IP6_B, IP6_A, 59, 64, &[]);
                    f.truncate(14);
                    f.extend_from_slice(&body);
                    s.da.inbox.push_back(f);
                }
                _ => {
                    // Honest IPv6 traffic both ways on the v6 connection.
                    let n = usize::from(inp.u16());
                    let _ = s.b.tcp_mut().send(s.est6_peer, &vec![0x66; n]);
                    let _ = s.a.tcp_mut().send(s.est6, &vec![0x99; n / 2]);
                    let mut buf = [0u8; 4096];
                    let _ = s.a.tcp_mut().recv(s.est6, &mut buf);
                    let _ = s.b.tcp_mut().recv(s.est6_peer, &mut buf);
                }
            }
            s.check_bounds();
            continue;
        }
        match op % 10 {
            0 => {
                // A raw frame, as the fuzzer wrote it. Frames that would reach the established
                // connection with a valid checksum are left to op 1 (they could carry bytes B
                // never sent, which no TCP can tell from B's).
                let len = usize::from(inp.u16() % 1600);
                let f = inp.bytes(len).to_vec();
                if let Some((_, _, r, _)) = parse_tcp(&f) {
                    if r.src_port == s.est_port && r.dst_port == PORT_LISTEN {
                        continue;
                    }
                }
                if is_tcp_fragment(&f) {
                    continue;
                }
                s.da.inbox.push_back(f);
            }
            1 => {
                // A well-formed segment from B's address. Target: 0 = the established
                // connection, 1 = the FIN-WAIT one, 2 = a fresh port to the listener, 3 = any.
                let target = inp.u8() % 4;
                let flags = TcpFlags(inp.u8());
                let mode = inp.u8();
                let (src_port, dst_port) = match target {
                    0 => (s.est_port, PORT_LISTEN),
                    1 => (
                        s.b.tcp().local_addr(s.fin_peer).map_or(1, |a| a.port()),
                        PORT_LISTEN,
                    ),
                    2 => (inp.u16(), PORT_LISTEN),
                    _ => (inp.u16(), inp.u16()),
                };
                // Sequence number: near the stream (offset from B's ISN) or anywhere.
                let off = u64::from(inp.u32() % 200_000);
                let seq = if mode & 1 == 0 {
                    s.b_seq(off)
                } else {
                    inp.u32()
                };
                // ACK: just below A's SND.NXT (acceptable, as an honest peer's), relative to
                // A's ISN, or anywhere.
                let ack = match (mode >> 1) & 3 {
                    0 => s.a_snd_nxt.wrapping_sub(u32::from(inp.u8())),
                    1 => s
                        .a_isn
                        .wrapping_add(1)
                        .wrapping_add(u32::from(inp.u16()))
                        .wrapping_sub(1024),
                    _ => inp.u32(),
                };
                let len = usize::from(inp.u16() % 1461);
                let payload: Vec<u8> = if target == 0 {
                    // B's true bytes at that offset (the stream is only defined up to what B
                    // sent; beyond it a segment carries what B *will* send there).
                    let start = u64::from(seq.wrapping_sub(s.b_seq(0)));
                    let end = start + len as u64;
                    while s.sent < end && s.sent < 1 << 22 {
                        s.b_send(64 * 1024);
                        if s.b.tcp().send_space(s.est_peer).unwrap_or(0) == 0 {
                            break;
                        }
                    }
                    if end > s.sent {
                        Vec::new()
                    } else {
                        (start..end).map(pattern).collect()
                    }
                } else {
                    inp.bytes(len).to_vec()
                };
                let mut options = inp.options();
                if mode & 8 == 0 {
                    // A timestamp that passes PAWS, as the honest peer's next one would.
                    options.timestamps = Some(netfold::wire::tcp::Timestamps {
                        tsval: s.b_tsval.wrapping_add(u32::from(inp.u8())),
                        tsecr: s.a_tsval,
                    });
                }
                let repr = TcpRepr {
                    src_port,
                    dst_port,
                    seq,
                    ack,
                    flags,
                    window: inp.u16(),
                    urgent: inp.u16(),
                    options,
                };
                if repr.header_len() <= 60 {
                    s.da.inbox.push_back(tcp_frame(IP_B, IP_A, &repr, &payload));
                }
            }
            2 => {
                let len = usize::from(inp.u16() % 1472);
                let p = inp.bytes(len).to_vec();
                let src = SocketAddrV4::new(IP_B, inp.u16());
                s.da.inbox
                    .push_back(udp_frame(src, SocketAddrV4::new(IP_A, PORT_UDP), &p));
            }
            3 => {
                // Time passes; honest traffic flows (B's output may be held back).
                let ms = u64::from(inp.u8()) * u64::from(inp.u8() % 16 + 1);
                let hold = inp.u8() & 1 == 1;
                let end = s.now + Duration::from_millis(ms);
                let mut rounds = 0;
                while s.now < end && rounds < 64 {
                    s.exchange(hold);
                    let step =
                        s.a.poll_at(s.now)
                            .map_or(Duration::from_millis(200), |t| t.saturating_since(s.now));
                    s.now += step.max(Duration::from_millis(1));
                    rounds += 1;
                }
                s.exchange(hold);
            }
            4 => {
                let n = usize::from(inp.u16());
                s.b_send(n);
            }
            5 => {
                s.a_recv();
                let mut buf = [0u8; 2048];
                let _ = s.a.tcp_mut().recv(s.fin, &mut buf);
                let _ = s.a.udp_recv_from(s.udp, &mut buf);
                let _ = s.b.tcp_mut().recv(s.est_peer, &mut buf);
            }
            6 => {
                let _ = s.a.tcp_mut().accept(s.listener);
                let n = usize::from(inp.u16());
                let _ = s.a.tcp_mut().send(s.est, &vec![0x33; n]);
            }
            7 => {
                // Release or drop the frames held back.
                if inp.u8() & 1 == 0 {
                    s.da.inbox.extend(s.held.drain(..));
                } else {
                    s.held.clear();
                }
            }
            8 => match inp.u8() % 4 {
                0 => {
                    let _ = s.b.tcp_mut().close(s.fin_peer);
                }
                1 => {
                    let _ = s.a.tcp_mut().shutdown_write(s.est);
                }
                2 => {
                    let _ = s.a.udp_send_to(s.udp, b"x", SocketAddrV4::new(IP_B, 9));
                }
                _ => {
                    let _ = s.b.tcp_mut().shutdown_write(s.est_peer);
                }
            },
            _ => {
                // A polls what was injected.
                s.a.poll(s.now, &mut s.da);
                s.da.outbox.clear();
            }
        }
        s.check_bounds();
        assert_eq!(
            s.mixed,
            None,
            "A delivered bytes B never sent there: {:?}",
            s.states()
        );
    }
    // Let everything drain, then read: still a prefix.
    for _ in 0..32 {
        s.exchange(false);
        s.now += Duration::from_millis(5);
        s.a_recv();
    }
    s.check_bounds();
    assert_eq!(s.mixed, None, "A delivered bytes B never sent there");
    s
}

/// Two stacks on the in-memory wire for the close-rules target: A (under test) and B.
pub struct Pair {
    /// Virtual time.
    pub now: Instant,
    /// The stack under test.
    pub a: Stack,
    /// Its peer.
    pub b: Stack,
    da: Wire,
    db: Wire,
}

impl Pair {
    /// Both stacks, fresh.
    pub fn new() -> Pair {
        let cfg = |addr, mac, key| StackConfig {
            addr,
            mac,
            tcp_secret: netfold::tcp::Secret::fixed_for_tests([key; 16]),
            ..StackConfig::default()
        };
        Pair {
            now: Instant::from_millis(1),
            a: Stack::new(cfg(IP_A, MAC_A, 0xa5)),
            b: Stack::new(cfg(IP_B, MAC_B, 0x5a)),
            da: Wire::new(),
            db: Wire::new(),
        }
    }

    /// One round: both stacks poll and their frames cross.
    pub fn exchange(&mut self) {
        self.a.poll(self.now, &mut self.da);
        self.b.poll(self.now, &mut self.db);
        self.db.inbox.extend(self.da.outbox.drain(..));
        self.da.inbox.extend(self.db.outbox.drain(..));
    }

    /// Runs for `d` of virtual time, jumping to the next deadline (at least 1 ms, at most
    /// 200 ms per step) and stopping early once both stacks are quiet with nothing due.
    pub fn run(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.exchange();
            self.exchange();
            let due = [self.a.poll_at(self.now), self.b.poll_at(self.now)]
                .into_iter()
                .flatten()
                .min();
            let Some(due) = due else { break };
            let step = due
                .saturating_since(self.now)
                .max(Duration::from_millis(1))
                .min(Duration::from_millis(200));
            self.now += step;
        }
    }
}

impl Default for Pair {
    fn default() -> Self {
        Pair::new()
    }
}

/// The byte at offset `i` of the stream B sends (A's is [`pattern`]).
pub fn pattern_b(i: u64) -> u8 {
    pattern(i ^ 0x5555_5555)
}

/// What closing does, by the rules Linux follows (RFC 1122 §4.2.2.13, RFC 2525 §2.17,
/// RFC 9293 §3.10.4): A's application writes and reads, maybe sets SO_LINGER, maybe shuts
/// down its sending side, then closes; B writes, reads, maybe shuts down. Then:
///
/// - a close with SO_LINGER 0, or with bytes of B's that A's application never read (unread
///   in A's queue at the close, still in flight, or sent by B after it), while A's side is
///   ESTABLISHED, CLOSE-WAIT or FIN-WAIT, resets the connection: B sees ECONNRESET and at
///   most a prefix of what A wrote (netfold reports ECONNRESET in CLOSE-WAIT too, as
///   FreeBSD does, where Linux says EPIPE);
/// - any other close is graceful however long the linger: B reads every byte A's
///   application handed to TCP, in order, then end of file, and no error.
///
/// Either way every byte either side delivers is one the other sent at that offset.
pub fn close_program(data: &[u8]) -> CloseOutcome {
    let mut inp = Input::new(data);
    let mut p = Pair::new();
    let linger = match inp.u8() % 4 {
        0 => Some(Duration::ZERO),
        1 => Some(Duration::from_millis(u64::from(inp.u8()) * 10 + 1)),
        _ => None,
    };
    let a_cfg = Config {
        linger,
        ..tcp_config()
    };
    let a_is_client = inp.u8() & 1 == 0;
    // Establish: A connects to B's listener or B to A's.
    let (ha, hb) = {
        let (srv, cli, srv_addr) = if a_is_client {
            (&mut p.b, &mut p.a, SocketAddrV4::new(IP_B, PORT_LISTEN))
        } else {
            (&mut p.a, &mut p.b, SocketAddrV4::new(IP_A, PORT_LISTEN))
        };
        let (srv_cfg, cli_cfg) = if a_is_client {
            (tcp_config(), a_cfg)
        } else {
            (a_cfg, tcp_config())
        };
        let l = srv.tcp_mut().listen(srv_addr, 4, srv_cfg).expect("listen");
        let from = SocketAddrV4::new(cli.config().addr, 0);
        let c = cli
            .tcp_mut()
            .connect(p.now, from, srv_addr, cli_cfg)
            .expect("connect");
        let mut accepted = None;
        for _ in 0..200 {
            p.exchange();
            let srv = if a_is_client { &mut p.b } else { &mut p.a };
            if let Ok(h) = srv.tcp_mut().accept(l) {
                accepted = Some(h);
                break;
            }
            p.now += Duration::from_millis(1);
        }
        let s = accepted.expect("handshake");
        if a_is_client {
            (c, s)
        } else {
            (s, c)
        }
    };
    let (mut a_written, mut b_written, mut a_read, mut b_read) = (0u64, 0u64, 0u64, 0u64);
    let mut a_read_at_close: Option<u64> = None;
    let mut a_state_at_close = None;
    let mut b_eof = false;
    let mut buf = vec![0u8; 8192];
    // The error B's application was told (by a read, a write or SO_ERROR: it is reported once).
    let mut b_error: Option<netfold::tcp::Error> = None;
    let read_b = |p: &mut Pair,
                  b_read: &mut u64,
                  b_eof: &mut bool,
                  b_error: &mut Option<netfold::tcp::Error>,
                  buf: &mut [u8],
                  max: usize| {
        let max = max.min(buf.len());
        loop {
            match p.b.tcp_mut().recv(hb, &mut buf[..max]) {
                Ok(0) => {
                    *b_eof = true;
                    break;
                }
                Ok(n) => {
                    for (k, &x) in buf[..n].iter().enumerate() {
                        assert_eq!(
                            x,
                            pattern(*b_read + k as u64),
                            "B read a byte A never sent there"
                        );
                    }
                    *b_read += n as u64;
                }
                Err(netfold::tcp::Error::WouldBlock) => break,
                Err(e) => {
                    b_error.get_or_insert(e);
                    break;
                }
            }
        }
    };
    let mut ops = 0;
    while !inp.is_empty() && ops < 64 {
        ops += 1;
        match inp.u8() % 8 {
            0 if a_read_at_close.is_none() => {
                let n = usize::from(inp.u16() % 20_000);
                let chunk: Vec<u8> = (0..n as u64).map(|k| pattern(a_written + k)).collect();
                if let Ok(m) = p.a.tcp_mut().send(ha, &chunk) {
                    a_written += m as u64;
                }
            }
            1 => {
                let n = usize::from(inp.u16() % 20_000);
                let chunk: Vec<u8> = (0..n as u64).map(|k| pattern_b(b_written + k)).collect();
                match p.b.tcp_mut().send(hb, &chunk) {
                    Ok(m) => b_written += m as u64,
                    // EPIPE after B's own shutdown says nothing about A's close.
                    Err(netfold::tcp::Error::WouldBlock | netfold::tcp::Error::BrokenPipe) => {}
                    Err(e) => {
                        b_error.get_or_insert(e);
                    }
                }
            }
            2 => {
                let max = usize::from(inp.u16()) + 1;
                read_b(&mut p, &mut b_read, &mut b_eof, &mut b_error, &mut buf, max);
            }
            3 if a_read_at_close.is_none() => {
                let max = (usize::from(inp.u16()) + 1).min(buf.len());
                while let Ok(n @ 1..) = p.a.tcp_mut().recv(ha, &mut buf[..max]) {
                    for (k, &x) in buf[..n].iter().enumerate() {
                        assert_eq!(
                            x,
                            pattern_b(a_read + k as u64),
                            "A read a byte B never sent there"
                        );
                    }
                    a_read += n as u64;
                }
            }
            4 => {
                let ms = u64::from(inp.u8() % 64);
                p.run(Duration::from_millis(ms));
            }
            5 if a_read_at_close.is_none() => {
                let _ = p.a.tcp_mut().shutdown_write(ha);
            }
            6 if a_read_at_close.is_none() => {
                a_read_at_close = Some(a_read);
                a_state_at_close = p.a.tcp().state(ha).ok();
                p.a.tcp_mut().close(ha).expect("close");
            }
            7 => {
                let _ = p.b.tcp_mut().shutdown_write(hb);
            }
            _ => {}
        }
    }
    if a_read_at_close.is_none() {
        a_read_at_close = Some(a_read);
        a_state_at_close = p.a.tcp().state(ha).ok();
        p.a.tcp_mut().close(ha).expect("close");
    }
    // Let everything finish (FIN-WAIT-2 and TIME-WAIT timers included); B reads all.
    for _ in 0..40 {
        p.run(Duration::from_secs(3));
        read_b(
            &mut p,
            &mut b_read,
            &mut b_eof,
            &mut b_error,
            &mut buf,
            usize::MAX,
        );
    }
    if let Ok(Some(e)) = p.b.tcp_mut().take_error(hb) {
        b_error.get_or_insert(e);
    }
    // Linux `tcp_close`: unread data resets; so does SO_LINGER 0 (`tcp_disconnect`) in the
    // states `tcp_need_reset` names. Once A has received B's FIN and sent its own (CLOSING,
    // LAST-ACK, TIME-WAIT, CLOSED) B's connection is finishing or gone: nothing to assert.
    let live = matches!(
        a_state_at_close,
        Some(State::Established | State::CloseWait | State::FinWait1 | State::FinWait2)
    );
    let unread = b_written > a_read_at_close.unwrap_or(0);
    let linger0 = linger == Some(Duration::ZERO);
    assert!(b_read <= a_written, "B read {b_read} of {a_written}");
    let outcome = if live && (linger0 || unread) {
        CloseOutcome::Reset
    } else if !linger0 && !unread {
        CloseOutcome::Graceful
    } else {
        CloseOutcome::Unchecked
    };
    if outcome == CloseOutcome::Reset {
        assert_eq!(
            b_error,
            Some(netfold::tcp::Error::ConnectionReset),
            "expected a reset (linger {linger:?}, B wrote {b_written}, A read {a_read_at_close:?}, A was {a_state_at_close:?}); B read {b_read} of {a_written}, eof {b_eof}, B is {:?}", p.b.tcp().state(hb)
        );
    } else if outcome == CloseOutcome::Graceful {
        assert_eq!(b_error, None, "a graceful close reset B");
        assert_eq!(b_read, a_written, "B missed bytes of a graceful close");
        assert!(b_eof, "no end of file after a graceful close");
    }
    outcome
}

/// Which rule [`close_program`] checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseOutcome {
    /// The close had to reset the connection, and did.
    Reset,
    /// The close had to deliver everything and a FIN, and did.
    Graceful,
    /// Linger 0 or unread data after A's side had finished: only the byte check applies.
    Unchecked,
}
