//! Integration tests for the Stack over an in-test back-to-back link, in virtual time, plus
//! property tests for the Ethernet/ARP/IPv4/ICMPv4 wire formats.

use netfold::buf::{PacketBuf, Pool};
use netfold::iface::{Stack, StackConfig, UdpError};
use netfold::phy::{Device, DeviceCaps, Medium};
use netfold::time::{Duration, Instant};
use netfold::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use netfold::wire::checksum::{add, pseudo_header};
use netfold::wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use netfold::wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use netfold::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use netfold::wire::{IpProtocol, Ipv4Addr};
use netfold_testkit::Rng;
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::rc::Rc;

const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xa]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xb]);
const QUEUE_LIMIT: usize = 4096;

/// Two frame queues between two ends; every frame sent is also logged for inspection.
#[derive(Default)]
struct Wire {
    queues: [VecDeque<Vec<u8>>; 2],
    /// (sending side, frame)
    log: Vec<(usize, Vec<u8>)>,
    /// Drop everything sent by side i (a dead peer).
    mute: [bool; 2],
}

struct End {
    wire: Rc<RefCell<Wire>>,
    side: usize,
    caps: DeviceCaps,
}

impl Device for End {
    fn caps(&self) -> DeviceCaps {
        self.caps
    }
    fn recv_batch(
        &mut self,
        _now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let mut w = self.wire.borrow_mut();
        let mut n = 0;
        while n < max {
            let Some(f) = w.queues[self.side].pop_front() else {
                break;
            };
            let mut b = pool.get();
            b.extend_from_slice(&f);
            out.push(b);
            n += 1;
        }
        n
    }
    fn send_batch(&mut self, _now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        let mut w = self.wire.borrow_mut();
        let peer = 1 - self.side;
        for f in frames.drain(..) {
            w.log.push((self.side, f.as_slice().to_vec()));
            if !w.mute[self.side] && w.queues[peer].len() < QUEUE_LIMIT {
                w.queues[peer].push_back(f.as_slice().to_vec());
            }
            pool.put(f);
        }
    }
}

/// Two stacks on the two ends of one `Wire` (the kit's harness; both ends share the wire).
type Net = netfold_testkit::Net<End>;

fn config(medium: Medium, mac: EthernetAddress, addr: Ipv4Addr) -> StackConfig {
    StackConfig {
        medium,
        mac,
        addr,
        prefix_len: 24,
        ..StackConfig::default()
    }
}

fn net(medium: Medium) -> Net {
    net_with(
        config(medium, MAC_A, IP_A),
        config(medium, MAC_B, IP_B),
        medium,
    )
}

fn net_with(ca: StackConfig, cb: StackConfig, medium: Medium) -> Net {
    let wire = Rc::new(RefCell::new(Wire::default()));
    let caps = DeviceCaps {
        medium,
        ..DeviceCaps::default()
    };
    let end = |side| End {
        wire: wire.clone(),
        side,
        caps,
    };
    Net::new(Stack::new(ca), Stack::new(cb), end(0), end(1))
}

/// What these tests do with the wire between the stacks.
trait WireNet {
    fn advance(&mut self, d: Duration);
    /// Puts a raw frame in B's receive queue (as if sent by A).
    fn inject_to_b(&self, frame: Vec<u8>);
    fn frames_from(&self, side: usize) -> Vec<Vec<u8>>;
}

impl WireNet for Net {
    fn advance(&mut self, d: Duration) {
        self.now += d;
    }
    fn inject_to_b(&self, frame: Vec<u8>) {
        self.ea.wire.borrow_mut().queues[1].push_back(frame);
    }
    fn frames_from(&self, side: usize) -> Vec<Vec<u8>> {
        let w = self.ea.wire.borrow();
        w.log
            .iter()
            .filter(|(s, _)| *s == side)
            .map(|(_, f)| f.clone())
            .collect()
    }
}

fn arp_requests_in(frames: &[Vec<u8>]) -> usize {
    frames
        .iter()
        .filter(|f| {
            let Ok(e) = EthernetFrame::new_checked(&f[..]) else {
                return false;
            };
            e.ethertype() == EtherType::Arp
                && ArpPacket::new_checked(e.payload())
                    .and_then(|p| ArpRepr::parse(&p))
                    .is_ok_and(|r| r.op == ArpOperation::Request)
        })
        .count()
}

#[test]
fn arp_resolves_expires_and_resolves_again() {
    let mut n = net(Medium::Ethernet);
    n.a.ping(n.now, IP_B, 1, 1, b"x").unwrap();
    assert_eq!(n.a.arp_pending(), 1, "echo parked while B resolves");
    n.quiesce();
    assert_eq!(n.a.neighbor(n.now, IP_B), Some(MAC_B));
    // RFC 826: B was the target, so it learned A from the request.
    assert_eq!(n.b.neighbor(n.now, IP_A), Some(MAC_A));
    assert_eq!(n.a.arp_pending(), 0);
    let ca = n.a.counters();
    assert_eq!(ca.arp_requests_out, 1);
    assert_eq!(ca.arp_replies_in, 1);
    assert_eq!(n.b.counters().arp_replies_out, 1);
    assert_eq!(
        n.b.counters().arp_requests_out,
        0,
        "B answered without asking"
    );
    assert!(n.a.ping_recv().is_some());

    // A second ping within the TTL needs no ARP.
    n.advance(Duration::from_secs(30));
    n.a.ping(n.now, IP_B, 1, 2, b"x").unwrap();
    n.quiesce();
    assert_eq!(n.a.counters().arp_requests_out, 1);
    assert!(n.a.ping_recv().is_some());

    // Past the TTL (60 s after the last confirmation) the entry is gone and is resolved again.
    n.advance(Duration::from_secs(61));
    assert_eq!(n.a.neighbor(n.now, IP_B), None);
    n.a.ping(n.now, IP_B, 1, 3, b"x").unwrap();
    n.quiesce();
    assert_eq!(n.a.counters().arp_requests_out, 2);
    assert_eq!(arp_requests_in(&n.frames_from(0)), 2);
    assert_eq!(n.a.ping_recv().map(|r| r.seq_no), Some(3));
}

#[test]
fn icmp_echo_round_trip() {
    let mut n = net(Medium::Ethernet);
    let data = [0x5au8; 100];
    n.a.ping(n.now, IP_B, 0x77, 9, &data).unwrap();
    n.quiesce();
    let r = n.a.ping_recv().expect("echo reply");
    assert_eq!((r.from, r.ident, r.seq_no, r.len), (IP_B, 0x77, 9, 100));
    assert!(n.a.ping_recv().is_none());
    assert_eq!(n.b.counters().echo_requests_in, 1);
    assert_eq!(n.b.counters().icmp_out, 1);
    // The reply on the wire carries the same data and a valid checksum.
    let replies: Vec<_> = n
        .frames_from(1)
        .into_iter()
        .filter(|f| f.len() > 34 && f[12..14] == [8, 0])
        .collect();
    assert_eq!(replies.len(), 1);
    let ip = Ipv4Packet::new_checked(&replies[0][14..]).unwrap();
    assert!(ip.verify_checksum());
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    match Icmpv4Repr::parse(&icmp, true).unwrap() {
        Icmpv4Repr::EchoReply { data: d, .. } => assert_eq!(d, &data[..]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn udp_round_trip_and_port_unreachable() {
    let mut n = net(Medium::Ethernet);
    let server = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    let client =
        n.a.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
            .unwrap();
    let client_addr = n.a.udp_local_addr(client).unwrap();
    assert!(client_addr.port() >= 49152);
    assert_eq!(
        n.b.udp_bind(SocketAddrV4::new(IP_B, 7)),
        Err(UdpError::AddrInUse)
    );

    n.a.udp_send_to(client, b"hello", SocketAddrV4::new(IP_B, 7))
        .unwrap();
    n.quiesce();
    let mut buf = [0u8; 64];
    let (len, from) = n.b.udp_recv_from(server, &mut buf).unwrap();
    assert_eq!(&buf[..len], b"hello");
    assert_eq!(from, SocketAddrV4::new(IP_A, client_addr.port()).into());
    assert_eq!(
        n.b.udp_recv_from(server, &mut buf),
        Err(UdpError::WouldBlock)
    );

    n.b.udp_send_to(server, b"world!", from).unwrap();
    n.quiesce();
    let (len, from) = n.a.udp_recv_from(client, &mut buf).unwrap();
    assert_eq!(
        (&buf[..len], from),
        (&b"world!"[..], SocketAddrV4::new(IP_B, 7).into())
    );

    // A closed port: B answers port unreachable and A counts it.
    n.a.udp_send_to(client, b"anyone?", SocketAddrV4::new(IP_B, 9))
        .unwrap();
    n.quiesce();
    assert_eq!(n.b.counters().udp_no_socket, 1);
    assert_eq!(n.b.counters().icmp_errors_out, 1);
    assert_eq!(n.a.counters().icmp_port_unreachable_in, 1);

    // Stale handles are errors, not panics.
    n.b.udp_close(server);
    assert_eq!(
        n.b.udp_recv_from(server, &mut buf),
        Err(UdpError::InvalidHandle)
    );
    assert_eq!(
        n.a.udp_send_to(client, &[0; 65508], SocketAddrV4::new(IP_B, 7)),
        Err(UdpError::MessageTooLarge)
    );
}

#[test]
fn udp_receive_queue_is_bounded_and_icmp_errors_rate_limited() {
    let mut cb = config(Medium::Ethernet, MAC_B, IP_B);
    cb.udp_queue_limit = 4;
    cb.icmp_error_burst = 2;
    let mut n = net_with(config(Medium::Ethernet, MAC_A, IP_A), cb, Medium::Ethernet);
    let server = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    let client =
        n.a.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000))
            .unwrap();
    for _ in 0..10 {
        n.a.udp_send_to(client, b"x", SocketAddrV4::new(IP_B, 7))
            .unwrap();
    }
    n.quiesce();
    let c = n.b.counters();
    assert_eq!((c.udp_in, c.udp_queue_full), (10, 6));
    let mut buf = [0u8; 8];
    for _ in 0..4 {
        n.b.udp_recv_from(server, &mut buf).unwrap();
    }
    for _ in 0..5 {
        n.a.udp_send_to(client, b"x", SocketAddrV4::new(IP_B, 9))
            .unwrap();
    }
    n.quiesce();
    let c = n.b.counters();
    assert_eq!((c.icmp_errors_out, c.icmp_rate_limited), (2, 3));
    // The bucket refills with (virtual) time.
    n.advance(Duration::from_secs(1));
    n.a.udp_send_to(client, b"x", SocketAddrV4::new(IP_B, 9))
        .unwrap();
    n.quiesce();
    assert_eq!(n.b.counters().icmp_errors_out, 3);
}

#[test]
fn pending_queue_is_bounded_and_unresolved_frames_are_dropped() {
    let mut ca = config(Medium::Ethernet, MAC_A, IP_A);
    ca.arp_pending_limit = 4;
    let mut n = net_with(ca, config(Medium::Ethernet, MAC_B, IP_B), Medium::Ethernet);
    n.ea.wire.borrow_mut().mute[0] = true; // nobody hears A: B never answers
    for seq in 0..10 {
        let r = n.a.ping(n.now, IP_B, 1, seq, b"x");
        assert_eq!(r.is_ok(), seq < 4);
    }
    assert_eq!(n.a.arp_pending(), 4);
    let c = n.a.counters();
    assert_eq!((c.arp_pending_overflow, c.arp_requests_out), (6, 1));
    n.quiesce();
    // Retries at most once per second (RFC 1122 §2.3.2.1), then give up.
    assert_eq!(n.a.poll_at(n.now), Some(Instant::from_secs(1)));
    for s in 1..=4 {
        n.now = Instant::from_secs(s);
        n.quiesce();
    }
    let c = n.a.counters();
    assert_eq!(c.arp_requests_out, 3);
    assert_eq!(c.arp_unresolved_drops, 4);
    assert_eq!(n.a.arp_pending(), 0);
    assert_eq!(n.a.poll_at(n.now), None);
}

#[test]
fn off_subnet_needs_a_gateway() {
    let mut n = net(Medium::Ethernet);
    let far = Ipv4Addr::new(198, 19, 0, 1);
    assert!(n.a.ping(n.now, far, 1, 1, b"x").is_err());
    assert_eq!(n.a.counters().no_route, 1);
    let mut ca = config(Medium::Ethernet, MAC_A, IP_A);
    ca.gateway = Some(IP_B);
    let mut n = net_with(ca, config(Medium::Ethernet, MAC_B, IP_B), Medium::Ethernet);
    n.a.ping(n.now, far, 1, 1, b"x").unwrap();
    n.quiesce();
    // The gateway's MAC was resolved; B (not a router) drops the packet as not for it.
    assert_eq!(n.a.neighbor(n.now, IP_B), Some(MAC_B));
    assert_eq!(n.b.counters().ipv4_not_for_us, 1);
}

// ---- crafted frames ----

fn eth(dst: EthernetAddress, ethertype: EtherType, payload: &[u8]) -> Vec<u8> {
    let r = EthernetRepr {
        src: MAC_A,
        dst,
        ethertype,
        vlan: None,
    };
    let mut f = vec![0u8; 14 + payload.len()];
    r.emit(&mut f).unwrap();
    f[14..].copy_from_slice(payload);
    f
}

fn ipv4(protocol: IpProtocol, payload: &[u8], ident: u16, more: bool, offset: u16) -> Vec<u8> {
    let r = Ipv4Repr {
        src: IP_A,
        dst: IP_B,
        protocol,
        payload_len: payload.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident,
        dont_frag: false,
        more_frags: more,
        frag_offset: offset,
    };
    let mut p = vec![0u8; 20 + payload.len()];
    r.emit(&mut p, true).unwrap();
    p[20..].copy_from_slice(payload);
    p
}

fn udp_datagram(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let len = 8 + data.len();
    let mut d = vec![0u8; len];
    d[0..2].copy_from_slice(&sport.to_be_bytes());
    d[2..4].copy_from_slice(&dport.to_be_bytes());
    d[4..6].copy_from_slice(&(len as u16).to_be_bytes());
    d[8..].copy_from_slice(data);
    let ph = pseudo_header(IP_A, IP_B, IpProtocol::Udp, len as u32);
    let c = !add(ph, netfold::mem::checksum(&d));
    d[6..8].copy_from_slice(&c.to_be_bytes());
    d
}

#[test]
fn malformed_frames_are_counted_and_never_panic() {
    let mut n = net(Medium::Ethernet);
    let sock = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    // Truncated Ethernet header.
    n.inject_to_b(vec![0xff; 10]);
    // Frame for another MAC.
    n.inject_to_b(eth(MAC_A, EtherType::Ipv4, &[0; 40]));
    // An 802.1Q-tagged frame (no VLAN configured).
    let mut tagged = vec![0u8; 18 + 28];
    EthernetRepr {
        src: MAC_A,
        dst: MAC_B,
        ethertype: EtherType::Ipv4,
        vlan: Some(5),
    }
    .emit(&mut tagged)
    .unwrap();
    n.inject_to_b(tagged);
    // Someone else claiming B's address in ARP.
    let mut claim = [0u8; 28];
    ArpRepr {
        op: ArpOperation::Reply,
        source_hw: MAC_A,
        source_ip: IP_B,
        target_hw: MAC_B,
        target_ip: IP_B,
    }
    .emit(&mut claim)
    .unwrap();
    n.inject_to_b(eth(MAC_B, EtherType::Arp, &claim));
    // Truncated IPv4 header.
    n.inject_to_b(eth(MAC_B, EtherType::Ipv4, &[0x45, 0, 0]));
    // Bad IPv4 header checksum.
    let mut p = ipv4(IpProtocol::Udp, &udp_datagram(1, 7, b"x"), 1, false, 0);
    p[10] ^= 0xff;
    n.inject_to_b(eth(MAC_B, EtherType::Ipv4, &p));
    // Bad UDP checksum.
    let mut d = udp_datagram(1, 7, b"x");
    d[8] ^= 1;
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &d, 2, false, 0),
    ));
    // Bad UDP checksum to a closed port: no ICMP error about a corrupted datagram.
    let mut d = udp_datagram(1, 9, b"x");
    d[8] ^= 1;
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &d, 7, false, 0),
    ));
    // UDP length field beyond the packet.
    let mut d = udp_datagram(1, 7, b"x");
    d[5] = 200;
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &d, 3, false, 0),
    ));
    // Bad ICMP checksum.
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Icmp, &[8, 0, 0, 0, 0, 1, 0, 1], 4, false, 0),
    ));
    // Bad TCP checksum (a zero-filled 20-byte header with ports set).
    let mut t = [0u8; 20];
    t[0..4].copy_from_slice(&[0, 1, 0, 2]);
    t[12] = 5 << 4;
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Tcp, &t, 5, false, 0),
    ));
    // A good datagram with Ethernet padding after it still gets through.
    let mut f = eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &udp_datagram(1, 7, b"ok"), 6, false, 0),
    );
    f.extend_from_slice(&[0xee; 12]);
    n.inject_to_b(f);
    n.quiesce();
    let c = n.b.counters();
    assert_eq!(c.eth_malformed, 1);
    assert_eq!(c.eth_not_for_us, 1);
    assert_eq!((c.unsupported, c.arp_conflicts), (1, 1));
    assert_eq!(c.ipv4_malformed, 1);
    assert_eq!(c.ipv4_bad_checksum, 1);
    assert_eq!(c.udp_bad_checksum, 2);
    assert_eq!((c.udp_no_socket, c.icmp_errors_out), (0, 0));
    assert_eq!(c.udp_malformed, 1);
    assert_eq!(c.icmp_bad_checksum, 1);
    assert_eq!(c.tcp_bad_checksum, 1);
    let mut buf = [0u8; 8];
    let (len, _) = n.b.udp_recv_from(sock, &mut buf).unwrap();
    assert_eq!(&buf[..len], b"ok");

    // Random garbage, raw and behind valid Ethernet/IPv4 headers.
    let mut rng = Rng::new(0x9e3779b97f4a7c15);
    for i in 0..3000 {
        let len = (rng.next() % 120) as usize;
        let junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let frame = match i % 3 {
            0 => junk,
            1 => eth(MAC_B, EtherType::Ipv4, &junk),
            _ => {
                let proto = [IpProtocol::Icmp, IpProtocol::Udp, IpProtocol::Tcp][i % 9 / 3];
                eth(
                    MAC_B,
                    EtherType::Ipv4,
                    &ipv4(proto, &junk, i as u16, false, 0),
                )
            }
        };
        n.inject_to_b(frame);
        n.quiesce();
    }
    let c = n.b.counters();
    assert_eq!(c.frames_in, 12 + 3000);
    println!("{c}");
}

#[test]
fn fragments_reassemble_and_overlaps_drop() {
    let mut n = net(Medium::Ethernet);
    let sock = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let d = udp_datagram(1, 7, &payload);
    // Three fragments, delivered out of order.
    for (off, more) in [(1480usize, true), (0, true), (2960, false)] {
        let end = (off + 1480).min(d.len());
        n.inject_to_b(eth(
            MAC_B,
            EtherType::Ipv4,
            &ipv4(IpProtocol::Udp, &d[off..end], 77, more, off as u16),
        ));
    }
    n.quiesce();
    let mut buf = vec![0u8; 4000];
    let (len, _) = n.b.udp_recv_from(sock, &mut buf).unwrap();
    assert_eq!(&buf[..len], &payload[..]);
    assert_eq!(n.b.counters().frag_reassembled, 1);

    // Overlapping fragment: the whole datagram goes.
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &d[..1480], 78, true, 0),
    ));
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &d[1000..2480], 78, true, 1000),
    ));
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &d[2480..], 78, false, 2480),
    ));
    n.quiesce();
    let c = n.b.counters();
    assert_eq!(c.frag_overlaps, 1);
    assert_eq!(n.b.udp_recv_from(sock, &mut buf), Err(UdpError::WouldBlock));

    // An incomplete datagram times out after 30 s of virtual time.
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &d[..1480], 79, true, 0),
    ));
    n.quiesce();
    let deadline = n.b.poll_at(n.now).expect("reassembly timer");
    assert!(deadline <= n.now + Duration::from_secs(30));
    n.now = deadline;
    n.quiesce();
    assert!(n.b.counters().frag_timeouts >= 1);
}

#[test]
fn fragments_dropped_when_reassembly_is_off() {
    let mut cb = config(Medium::Ethernet, MAC_B, IP_B);
    cb.frag_reassembly = false;
    let mut n = net_with(config(Medium::Ethernet, MAC_A, IP_A), cb, Medium::Ethernet);
    let d = udp_datagram(1, 7, &[0; 100]);
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Udp, &d[..48], 1, true, 0),
    ));
    n.quiesce();
    let c = n.b.counters();
    assert_eq!((c.frag_in, c.frag_dropped), (1, 1));
}

#[test]
fn raw_ip_medium_works_without_arp() {
    let mut n = net(Medium::Ip);
    n.a.ping(n.now, IP_B, 5, 6, b"raw").unwrap();
    let server = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    let client = n.a.udp_bind(SocketAddrV4::new(IP_A, 1234)).unwrap();
    n.a.udp_send_to(client, b"ip", SocketAddrV4::new(IP_B, 7))
        .unwrap();
    n.quiesce();
    assert_eq!(n.a.ping_recv().map(|r| (r.ident, r.seq_no)), Some((5, 6)));
    let mut buf = [0u8; 8];
    let (len, from) = n.b.udp_recv_from(server, &mut buf).unwrap();
    assert_eq!(
        (&buf[..len], from),
        (&b"ip"[..], SocketAddrV4::new(IP_A, 1234).into())
    );
    assert_eq!(n.a.counters().arp_requests_out, 0);
    // Frames on the wire start with the IPv4 header.
    assert!(n.frames_from(0).iter().all(|f| f[0] >> 4 == 4));
    // Random bytes on a raw-IP link never panic either.
    let mut rng = Rng::new(7);
    for _ in 0..500 {
        let len = (rng.next() % 80) as usize;
        let junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        n.inject_to_b(junk);
    }
    n.quiesce();
}

#[test]
fn counters_display_is_a_table() {
    let n = net(Medium::Ethernet);
    let s = n.a.counters().to_string();
    assert!(s.lines().count() > 40);
    assert!(s.contains("arp   pending_overflow"));
}

// ---- property tests of the wire formats ----

fn arb_ip() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn arb_ipv4_repr() -> impl Strategy<Value = Ipv4Repr> {
    (
        arb_ip(),
        arb_ip(),
        any::<u8>(),
        0usize..1000,
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        0u16..8192,
    )
        .prop_map(
            |(src, dst, p, len, ttl, tos, ident, df, mf, off)| Ipv4Repr {
                src,
                dst,
                protocol: IpProtocol::from(p),
                payload_len: len,
                ttl,
                dscp_ecn: tos,
                ident,
                dont_frag: df,
                more_frags: mf,
                frag_offset: off << 3,
            },
        )
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(f) = EthernetFrame::new_checked(&bytes[..]) {
            let _ = EthernetRepr::parse(&f);
            let _ = (f.payload(), f.src_addr(), f.dst_addr(), f.vlan_tci());
        }
        if let Ok(p) = ArpPacket::new_checked(&bytes[..]) {
            let _ = ArpRepr::parse(&p);
        }
        if let Ok(p) = Ipv4Packet::new_checked(&bytes[..]) {
            let _ = Ipv4Repr::parse(&p, true);
            let _ = (p.payload(), p.options(), p.verify_checksum(), p.is_fragment());
        }
        if let Ok(p) = Icmpv4Packet::new_checked(&bytes[..]) {
            let _ = Icmpv4Repr::parse(&p, false);
            let _ = Icmpv4Repr::parse(&p, true);
        }
    }

    #[test]
    fn ipv4_parse_emit_round_trip(r in arb_ipv4_repr()) {
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf, true).unwrap();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Ipv4Repr::parse(&p, true).unwrap(), r);
    }

    #[test]
    fn ethernet_and_arp_round_trip(
        src in any::<[u8; 6]>(), dst in any::<[u8; 6]>(), et in any::<u16>(),
        vlan in proptest::option::of(any::<u16>()), req in any::<bool>(),
        sip in arb_ip(), tip in arb_ip(),
    ) {
        // 0x8100 as a payload type would read as a second tag; it is not a valid inner type.
        prop_assume!(et != 0x8100);
        let r = EthernetRepr {
            src: EthernetAddress(src),
            dst: EthernetAddress(dst),
            ethertype: EtherType::from(et),
            vlan,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&f).unwrap(), r);

        let a = ArpRepr {
            op: if req { ArpOperation::Request } else { ArpOperation::Reply },
            source_hw: EthernetAddress(src),
            source_ip: sip,
            target_hw: EthernetAddress(dst),
            target_ip: tip,
        };
        let mut buf = [0u8; 28];
        a.emit(&mut buf).unwrap();
        prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()).unwrap(), a);
    }

    #[test]
    fn icmp_round_trip(
        ident in any::<u16>(), seq in any::<u16>(),
        data in proptest::collection::vec(any::<u8>(), 0..64),
        quoted in arb_ipv4_repr(), code in 0u8..16, mtu in any::<u16>(), kind in 0u8..4,
    ) {
        let mut quoted = quoted;
        quoted.payload_len = quoted.payload_len.max(8);
        let q = &data[..data.len().max(8).min(data.len())];
        let r = match kind {
            0 => Icmpv4Repr::EchoRequest { ident, seq_no: seq, data: &data },
            1 => Icmpv4Repr::EchoReply { ident, seq_no: seq, data: &data },
            2 if q.len() >= 8 => Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu: if code == 4 { mtu } else { 0 },
                header: quoted,
                data: q,
            },
            _ if q.len() >= 8 => Icmpv4Repr::TimeExceeded { code: code % 2, header: quoted, data: q },
            _ => Icmpv4Repr::EchoRequest { ident, seq_no: seq, data: &data },
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf, true).unwrap();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Icmpv4Repr::parse(&p, true).unwrap(), r);
    }
}

// ---- interoperability with smoltcp over the same in-test link ----

mod smol {
    use super::*;
    use smoltcp::iface::{Config, Interface, SocketSet};
    use smoltcp::phy::{self, DeviceCapabilities};
    use smoltcp::socket::udp;
    use smoltcp::wire::{self as sw, HardwareAddress, IpAddress, IpCidr};

    /// The same `Wire` seen through smoltcp's Device trait.
    pub struct SEnd {
        pub wire: Rc<RefCell<Wire>>,
        pub side: usize,
    }
    pub struct SRx(Vec<u8>);
    pub struct STx(Rc<RefCell<Wire>>, usize);

    impl phy::RxToken for SRx {
        fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
            f(&self.0)
        }
    }
    impl phy::TxToken for STx {
        fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
            let mut b = vec![0u8; len];
            let r = f(&mut b);
            let mut w = self.0.borrow_mut();
            w.log.push((self.1, b.clone()));
            w.queues[1 - self.1].push_back(b);
            r
        }
    }
    impl phy::Device for SEnd {
        type RxToken<'a> = SRx;
        type TxToken<'a> = STx;
        fn capabilities(&self) -> DeviceCapabilities {
            let mut c = DeviceCapabilities::default();
            c.medium = phy::Medium::Ethernet;
            c.max_transmission_unit = 1514;
            c
        }
        fn receive(&mut self, _: smoltcp::time::Instant) -> Option<(SRx, STx)> {
            let f = self.wire.borrow_mut().queues[self.side].pop_front()?;
            Some((SRx(f), STx(self.wire.clone(), self.side)))
        }
        fn transmit(&mut self, _: smoltcp::time::Instant) -> Option<STx> {
            Some(STx(self.wire.clone(), self.side))
        }
    }

    pub fn iface(dev: &mut SEnd) -> Interface {
        let cfg = Config::new(HardwareAddress::Ethernet(sw::EthernetAddress(MAC_B.0)));
        let mut i = Interface::new(cfg, dev, smoltcp::time::Instant::from_micros(0));
        i.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(IP_B), 24)).unwrap();
        });
        i
    }

    pub fn udp_socket() -> udp::Socket<'static> {
        let buf = || udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 8], vec![0u8; 8192]);
        udp::Socket::new(buf(), buf())
    }

    pub fn sockets() -> SocketSet<'static> {
        SocketSet::new(vec![])
    }
}

#[test]
fn interoperates_with_smoltcp_arp_and_udp() {
    let wire = Rc::new(RefCell::new(Wire::default()));
    let mut da = End {
        wire: wire.clone(),
        side: 0,
        caps: DeviceCaps::default(),
    };
    let mut db = smol::SEnd {
        wire: wire.clone(),
        side: 1,
    };
    let mut a = Stack::new(config(Medium::Ethernet, MAC_A, IP_A));
    let mut b = smol::iface(&mut db);
    let mut sockets = smol::sockets();
    let mut s = smol::udp_socket();
    s.bind(7).unwrap();
    let h = sockets.add(s);
    let now = Instant::ZERO;
    let snow = smoltcp::time::Instant::from_micros(0);
    let mut run = |a: &mut Stack, b: &mut smoltcp::iface::Interface, sockets: &mut _| {
        for _ in 0..20 {
            a.poll(now, &mut da);
            b.poll(snow, &mut db, sockets);
        }
    };

    // UDP both ways: smoltcp verifies our checksums, we verify its.
    let c = a.udp_bind(SocketAddrV4::new(IP_A, 4000)).unwrap();
    a.udp_send_to(c, b"to smoltcp", SocketAddrV4::new(IP_B, 7))
        .unwrap();
    run(&mut a, &mut b, &mut sockets);
    {
        let s = sockets.get_mut::<smoltcp::socket::udp::Socket>(h);
        let (data, meta) = s.recv().expect("smoltcp got the datagram");
        assert_eq!(data, b"to smoltcp");
        let ep = meta.endpoint;
        assert_eq!(ep.port, 4000);
        s.send_slice(b"from smoltcp", ep).unwrap();
    }
    run(&mut a, &mut b, &mut sockets);
    let mut buf = [0u8; 64];
    let (len, from) = a.udp_recv_from(c, &mut buf).unwrap();
    assert_eq!(
        (&buf[..len], from),
        (&b"from smoltcp"[..], SocketAddrV4::new(IP_B, 7).into())
    );
    // smoltcp answered our ARP request, and we had answered nothing it needed to ask.
    assert_eq!(a.counters().arp_replies_in, 1);
    assert_eq!(a.neighbor(now, IP_B), Some(MAC_B));
    // (Echo interop needs smoltcp's `auto-icmp-echo-reply` feature, not enabled here.)
    let cnt = a.counters();
    assert_eq!(
        cnt.udp_bad_checksum + cnt.ipv4_bad_checksum + cnt.icmp_bad_checksum,
        0
    );
}

// ---- TCP over the stack ----

/// Polls both stacks, advancing virtual time to the next timer when idle, until `done` or
/// `limit` of virtual time passes.
fn run_until(n: &mut Net, limit: Duration, mut done: impl FnMut(&mut Net) -> bool) {
    let end = n.now + limit;
    while n.now < end {
        let busy = n.poll();
        if done(n) {
            return;
        }
        if !busy {
            let next = [n.a.poll_at(n.now), n.b.poll_at(n.now)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end);
            n.now = next.max(n.now + Duration::from_micros(1)).min(end);
        }
    }
    panic!("condition not reached in {limit:?}");
}

#[test]
fn tcp_connect_and_transfer_between_two_stacks() {
    let mut n = net(Medium::Ethernet);
    tcp_transfer(&mut n);
    // Every frame fits the MTU (TCP sizes segments to the MSS, and software GSO cuts
    // super-segments to it).
    let biggest = n.frames_from(0).iter().map(Vec::len).max().unwrap_or(0);
    assert!(biggest <= 1514, "frame of {biggest} bytes exceeds the MTU");
}

#[test]
fn tcp_transfer_with_tso_device_needs_no_software_segmentation() {
    let mut n = net(Medium::Ethernet);
    n.ea.caps.tso = true;
    n.eb.caps.tso = true;
    tcp_transfer(&mut n);
    // A TSO device is never handed a frame the stack had to cut in software.
    assert_eq!(n.a.counters().gso_segments, 0);
}

#[test]
fn tcp_transfer_over_raw_ip() {
    let mut n = net(Medium::Ip);
    tcp_transfer(&mut n);
}

fn tcp_transfer(n: &mut Net) {
    use netfold::tcp::{Config, Error as TcpError, State};
    let server = SocketAddrV4::new(IP_B, 80);
    let l = n.b.tcp_mut().listen(server, 4, Config::default()).unwrap();
    let c =
        n.a.tcp_mut()
            .connect(n.now, SocketAddrV4::new(IP_A, 0), server, Config::default())
            .unwrap();
    let mut accepted = None;
    run_until(n, Duration::from_secs(5), |n| {
        if accepted.is_none() {
            accepted = n.b.tcp_mut().accept(l).ok();
        }
        accepted.is_some() && n.a.tcp().state(c) == Ok(State::Established)
    });
    let s = accepted.unwrap();

    // 1 MiB from A to B, in whatever pieces the send buffer takes.
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i ^ (i >> 8)) as u8).collect();
    let (mut sent, mut got) = (0usize, Vec::with_capacity(data.len()));
    let mut buf = vec![0u8; 64 * 1024];
    run_until(n, Duration::from_secs(30), |n| {
        if sent < data.len() {
            if let Ok(k) = n.a.tcp_mut().send(c, &data[sent..]) {
                sent += k;
            }
        }
        loop {
            match n.b.tcp_mut().recv(s, &mut buf) {
                Ok(0) | Err(TcpError::WouldBlock) => break,
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(e) => panic!("recv: {e:?}"),
            }
        }
        got.len() == data.len()
    });
    assert!(got == data, "stream corrupted");

    // Orderly close from A; B sees end of stream.
    n.a.tcp_mut().close(c).unwrap();
    run_until(n, Duration::from_secs(5), |n| {
        matches!(n.b.tcp_mut().recv(s, &mut buf), Ok(0))
    });
    let (ca, cb) = (n.a.counters(), n.b.counters());
    assert_eq!(ca.tcp_bad_checksum + cb.tcp_bad_checksum, 0);
    assert_eq!(ca.tcp_malformed + cb.tcp_malformed, 0);
    assert!(ca.tcp.segments_out >= (1 << 20) / 1460);
    // Steady state recycles buffers: far fewer allocations than frames. (The pool grows to
    // the most frames in flight at once; since the receiver quick-ACKs the start of a
    // connection, as Linux, the window opens sooner, and slow start grows cwnd to twice the
    // most in flight of each window, as Linux's `tcp_is_cwnd_limited`: 1 MiB peaks at 91
    // of 729.)
    assert!(ca.pool.allocations < ca.frames_out / 7, "{}", ca);
}

#[test]
fn tcp_interoperates_with_smoltcp() {
    use netfold::tcp::{Config, State};
    use smoltcp::socket::tcp as stcp;
    let wire = Rc::new(RefCell::new(Wire::default()));
    let mut da = End {
        wire: wire.clone(),
        side: 0,
        caps: DeviceCaps::default(),
    };
    let mut db = smol::SEnd {
        wire: wire.clone(),
        side: 1,
    };
    let mut a = Stack::new(config(Medium::Ethernet, MAC_A, IP_A));
    let mut b = smol::iface(&mut db);
    let mut sockets = smol::sockets();
    let mut ls = stcp::Socket::new(
        stcp::SocketBuffer::new(vec![0u8; 65536]),
        stcp::SocketBuffer::new(vec![0u8; 65536]),
    );
    ls.listen(80).unwrap();
    let h = sockets.add(ls);
    let c = a
        .tcp_mut()
        .connect(
            Instant::ZERO,
            SocketAddrV4::new(IP_A, 0),
            SocketAddrV4::new(IP_B, 80),
            Config::default(),
        )
        .unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (mut sent, mut got) = (0usize, Vec::new());
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 65536];
    let end = Instant::from_secs(60);
    while got.len() < data.len() {
        assert!(now < end, "transfer stalled at {} bytes", got.len());
        if a.tcp().state(c) == Ok(State::Established) && sent < data.len() {
            if let Ok(k) = a.tcp_mut().send(c, &data[sent..]) {
                sent += k;
            }
        }
        let x = a.poll(now, &mut da);
        let snow = smoltcp::time::Instant::from_micros(now.total_micros() as i64);
        b.poll(snow, &mut db, &mut sockets);
        let s = sockets.get_mut::<stcp::Socket>(h);
        while s.can_recv() {
            let k = s.recv_slice(&mut buf).unwrap();
            if k == 0 {
                break;
            }
            got.extend_from_slice(&buf[..k]);
        }
        let idle = !x && wire.borrow().queues.iter().all(|q| q.is_empty());
        if idle {
            // Advance to the next timer of either side (smoltcp's delayed ACK included).
            let t = [
                a.poll_at(now),
                b.poll_delay(snow, &sockets)
                    .map(|d| now + Duration::from_micros(d.total_micros())),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_millis(1));
            now = t.max(now + Duration::from_micros(1));
        }
    }
    assert!(got == data, "stream corrupted");
    let cnt = a.counters();
    assert_eq!(cnt.tcp_bad_checksum + cnt.tcp_malformed, 0);
}

/// Valid frames of every kind the stack handles, mutated (bit flips, truncation, extension)
/// and fed to a stack whose device says checksums were already verified, so that mutations
/// reach every parser and handler instead of stopping at a checksum.
#[test]
fn mutated_frames_reach_deep_and_never_panic() {
    use netfold::tcp::Config;
    use netfold::wire::tcp::{TcpFlags, TcpOptions, TcpRepr, Timestamps};
    let mut n = net(Medium::Ethernet);
    n.eb.caps.checksum.rx = false;
    n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    n.b.tcp_mut()
        .listen(SocketAddrV4::new(IP_B, 80), 4, Config::default())
        .unwrap();

    let arp = {
        let r = ArpRepr {
            op: ArpOperation::Request,
            source_hw: MAC_A,
            source_ip: IP_A,
            target_hw: EthernetAddress::default(),
            target_ip: IP_B,
        };
        let mut b = [0u8; 28];
        r.emit(&mut b).unwrap();
        eth(EthernetAddress::BROADCAST, EtherType::Arp, &b)
    };
    let echo = {
        let r = Icmpv4Repr::EchoRequest {
            ident: 1,
            seq_no: 1,
            data: &[7; 24],
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b, true).unwrap();
        eth(
            MAC_B,
            EtherType::Ipv4,
            &ipv4(IpProtocol::Icmp, &b, 1, false, 0),
        )
    };
    let unreach = {
        let quoted = Ipv4Repr {
            src: IP_B,
            dst: IP_A,
            protocol: IpProtocol::Tcp,
            payload_len: 20,
            ttl: 64,
            dscp_ecn: 0,
            ident: 1,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        let r = Icmpv4Repr::DstUnreachable {
            code: 4,
            next_hop_mtu: 1280,
            header: quoted,
            data: &[0, 80, 0xc3, 0x50, 0, 0, 0, 1],
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b, true).unwrap();
        eth(
            MAC_B,
            EtherType::Ipv4,
            &ipv4(IpProtocol::Icmp, &b, 2, false, 0),
        )
    };
    let udp = eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(
            IpProtocol::Udp,
            &udp_datagram(5, 7, b"payload"),
            3,
            false,
            0,
        ),
    );
    let syn = {
        let r = TcpRepr {
            src_port: 50000,
            dst_port: 80,
            seq: 1000,
            flags: TcpFlags(TcpFlags::SYN),
            window: 65535,
            options: TcpOptions {
                mss: Some(1460),
                window_scale: Some(7),
                sack_permitted: true,
                timestamps: Some(Timestamps { tsval: 1, tsecr: 0 }),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        let mut b = vec![0u8; r.header_len()];
        let ph = netfold::wire::tcp::PseudoHeader::new(IP_A, IP_B);
        r.emit_with_checksum(&mut b, &[], &ph).unwrap();
        eth(
            MAC_B,
            EtherType::Ipv4,
            &ipv4(IpProtocol::Tcp, &b, 4, false, 0),
        )
    };
    let frag = eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(
            IpProtocol::Udp,
            &udp_datagram(5, 7, &[1; 40])[..24],
            5,
            true,
            0,
        ),
    );
    let seeds = [arp, echo, unreach, udp, syn, frag];
    let mut rng = Rng::new(0xdead_beef_cafe_f00d);
    for i in 0..6000 {
        let mut f = seeds[i % seeds.len()].clone();
        match rng.next() % 4 {
            0 => {
                let cut = (rng.next() as usize) % (f.len() + 1);
                f.truncate(cut);
            }
            1 => f.extend((0..rng.next() % 32).map(|_| rng.next() as u8)),
            _ => {}
        }
        for _ in 0..1 + rng.next() % 4 {
            if !f.is_empty() {
                // Mutate mostly past the Ethernet header so the frame stays ours.
                let at = 14 + (rng.next() as usize) % f.len().saturating_sub(14).max(1);
                let at = at.min(f.len() - 1);
                f[at] ^= 1 << (rng.next() % 8);
            }
        }
        n.inject_to_b(f);
        if i % 64 == 0 {
            n.advance(Duration::from_millis(500));
        }
        n.quiesce();
    }
    let c = n.b.counters();
    assert!(c.frames_in >= 6000);
    // Something got through every layer.
    assert!(c.arp_replies_out > 0 && c.icmp_out > 0 && c.udp_in > 0 && c.tcp.segments_in > 0);
}

#[test]
fn smoltcp_client_sends_to_netfold_listener() {
    use netfold::tcp::Config;
    use smoltcp::socket::tcp as stcp;
    let wire = Rc::new(RefCell::new(Wire::default()));
    let mut da = End {
        wire: wire.clone(),
        side: 0,
        caps: DeviceCaps::default(),
    };
    let mut db = smol::SEnd {
        wire: wire.clone(),
        side: 1,
    };
    let mut a = Stack::new(config(Medium::Ethernet, MAC_A, IP_A));
    let l = a
        .tcp_mut()
        .listen(SocketAddrV4::new(IP_A, 5001), 4, Config::default())
        .unwrap();
    let mut b = smol::iface(&mut db);
    let mut sockets = smol::sockets();
    let mut cs = stcp::Socket::new(
        stcp::SocketBuffer::new(vec![0u8; 65536]),
        stcp::SocketBuffer::new(vec![0u8; 65536]),
    );
    cs.connect(b.context(), (IP_A, 5001), 40000).unwrap();
    let h = sockets.add(cs);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    let (mut sent, mut got) = (0usize, Vec::new());
    let mut conn = None;
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 65536];
    while got.len() < data.len() {
        assert!(
            now < Instant::from_secs(60),
            "stalled at {} bytes",
            got.len()
        );
        let snow = smoltcp::time::Instant::from_micros(now.total_micros() as i64);
        {
            let s = sockets.get_mut::<stcp::Socket>(h);
            if s.can_send() && sent < data.len() {
                sent += s.send_slice(&data[sent..]).unwrap();
            }
        }
        b.poll(snow, &mut db, &mut sockets);
        let x = a.poll(now, &mut da);
        if conn.is_none() {
            conn = a.tcp_mut().accept(l).ok();
        }
        if let Some(c) = conn {
            while let Ok(k) = a.tcp_mut().recv(c, &mut buf) {
                if k == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..k]);
            }
        }
        if !x && wire.borrow().queues.iter().all(|q| q.is_empty()) {
            let t = [
                a.poll_at(now),
                b.poll_delay(snow, &sockets)
                    .map(|d| now + Duration::from_micros(d.total_micros())),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_millis(1));
            now = t.max(now + Duration::from_micros(1));
        }
    }
    assert!(got == data, "stream corrupted");
    let c = a.counters();
    assert_eq!(
        c.tcp_bad_checksum + c.tcp_malformed + c.ipv4_bad_checksum,
        0
    );
    // We learned smoltcp's MAC from its ARP request (RFC 826: we were the target).
    assert_eq!(a.neighbor(now, IP_B), Some(MAC_B));
    assert_eq!(c.arp_requests_out, 0);
}

/// IPv4 datagrams of `frames` (Ethernet), parsed: (DF, MF, offset, total length).
fn ip_frag_fields(frames: &[Vec<u8>], proto: IpProtocol) -> Vec<(bool, bool, u16, usize)> {
    frames
        .iter()
        .filter_map(|f| {
            let e = EthernetFrame::new_checked(&f[..]).ok()?;
            let p = Ipv4Packet::new_checked(e.payload()).ok()?;
            let r = Ipv4Repr::parse(&p, true).ok()?;
            (r.protocol == proto).then_some((
                r.dont_frag,
                r.more_frags,
                r.frag_offset,
                r.payload_len + r.header_len(),
            ))
        })
        .collect()
}

#[test]
fn udp_datagrams_up_to_65507_bytes_are_fragmented_on_send() {
    let mut n = net(Medium::Ethernet);
    let server = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    let client = n.a.udp_bind(SocketAddrV4::new(IP_A, 0)).unwrap();
    let mut buf = vec![0u8; 70000];
    for size in [1473usize, 4000, 65507] {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 + size) as u8).collect();
        n.a.udp_send_to(client, &data, SocketAddrV4::new(IP_B, 7))
            .unwrap();
        n.settle();
        let (len, from) = n.b.udp_recv_from(server, &mut buf).expect("datagram");
        assert_eq!(from.ip(), IP_A);
        assert_eq!(&buf[..len], &data[..], "size {size}");
    }
    let frags = ip_frag_fields(&n.frames_from(0), IpProtocol::Udp);
    // RFC 791 §3.2: every piece fits the MTU, carries no DF, and all but the last of a
    // datagram have MF and a length that is a multiple of 8.
    assert!(frags.iter().all(|&(df, _, _, len)| !df && len <= 1500));
    assert!(frags
        .iter()
        .filter(|f| f.1)
        .all(|&(_, _, _, len)| (len - 20) % 8 == 0));
    let c = n.a.counters();
    assert_eq!(c.frag_out, frags.len() as u64);
    assert_eq!(c.frag_out, 2 + 3 + 45);
    assert_eq!(n.b.counters().frag_reassembled, 3);
}

#[test]
fn ping_larger_than_the_mtu_is_answered_in_fragments() {
    let mut n = net(Medium::Ethernet);
    let data = vec![0x5a; 3000];
    n.a.ping(n.now, IP_B, 9, 1, &data).unwrap();
    n.settle();
    let r = n.a.ping_recv().expect("echo reply");
    assert_eq!((r.from, r.seq_no, r.len), (IP_B, 1, 3000));
    // 3008 bytes of ICMP in 1480-byte pieces: three fragments each way.
    assert_eq!(n.a.counters().frag_out, 3);
    assert_eq!(n.b.counters().frag_out, 3);
    assert_eq!(n.b.counters().frag_reassembled, 1);
}

#[test]
fn path_mtu_from_icmp_narrows_the_fragments_to_that_destination() {
    let mut n = net(Medium::Ethernet);
    let sock = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    n.a.udp_bind(SocketAddrV4::new(IP_A, 9)).unwrap();
    // Resolve the neighbours both ways first.
    n.b.ping(n.now, IP_A, 1, 1, b"x").unwrap();
    n.settle();
    // "Fragmentation needed, next-hop MTU 576" about a datagram B sent to A.
    let quoted = Ipv4Repr {
        src: IP_B,
        dst: IP_A,
        protocol: IpProtocol::Udp,
        payload_len: 1400,
        ttl: 64,
        dscp_ecn: 0,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    let r = Icmpv4Repr::DstUnreachable {
        code: 4,
        next_hop_mtu: 576,
        header: quoted,
        data: &[0, 7, 0, 9, 0, 0, 0, 0],
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b, true).unwrap();
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Icmp, &b, 3, false, 0),
    ));
    n.settle();
    assert_eq!(n.b.path_mtu(n.now, IP_A), 576);
    assert_eq!(n.b.path_mtu(n.now, Ipv4Addr::new(198, 18, 0, 9)), 1500);
    let before = n.frames_from(1).len();
    n.b.udp_send_to(sock, &[7; 1400], SocketAddrV4::new(IP_A, 9))
        .unwrap();
    n.settle();
    let frags = ip_frag_fields(&n.frames_from(1)[before..], IpProtocol::Udp);
    assert_eq!(frags.len(), 3);
    assert!(frags.iter().all(|&(_, _, _, len)| len <= 576));
}

#[test]
fn tcp_is_never_fragmented_and_keeps_df() {
    use netfold::tcp::Config;
    let mut n = net(Medium::Ethernet);
    let server = SocketAddrV4::new(IP_B, 80);
    n.b.tcp_mut().listen(server, 4, Config::default()).unwrap();
    n.a.tcp_mut()
        .connect(n.now, SocketAddrV4::new(IP_A, 0), server, Config::default())
        .unwrap();
    n.settle();
    let tcp = ip_frag_fields(&n.frames_from(0), IpProtocol::Tcp);
    assert!(!tcp.is_empty());
    assert!(tcp.iter().all(|&(df, mf, off, _)| df && !mf && off == 0));
    assert_eq!(n.a.counters().frag_out, 0);
}

#[test]
fn fragmented_datagrams_wait_for_queue_room_instead_of_being_lost() {
    let mut ca = config(Medium::Ethernet, MAC_A, IP_A);
    ca.tx_queue_limit = 10;
    let mut n = net_with(ca, config(Medium::Ethernet, MAC_B, IP_B), Medium::Ethernet);
    let server = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    let client = n.a.udp_bind(SocketAddrV4::new(IP_A, 0)).unwrap();
    // Resolve B first, so the fragments go straight to the queue.
    n.a.ping(n.now, IP_B, 1, 1, b"x").unwrap();
    n.settle();
    // 7 fragments each: the second does not fit beside the first in a queue of 10.
    for fill in [1u8, 2] {
        n.a.udp_send_to(client, &[fill; 10000], SocketAddrV4::new(IP_B, 7))
            .unwrap();
    }
    n.settle();
    let mut buf = vec![0u8; 20000];
    for fill in [1u8, 2] {
        let (len, _) = n.b.udp_recv_from(server, &mut buf).expect("datagram");
        assert_eq!(len, 10000);
        assert!(buf[..len].iter().all(|&b| b == fill));
    }
    assert_eq!(n.a.counters().tx_queue_full, 0);
    // One that can never fit (14 fragments) is tried alone and counted, not kept forever.
    n.a.udp_send_to(client, &[3; 20000], SocketAddrV4::new(IP_B, 7))
        .unwrap();
    n.settle();
    assert_eq!(n.a.counters().tx_queue_full, 1);
    assert!(n.b.udp_recv_from(server, &mut buf).is_err());
}

// ---- Errors a BSD program expects (defect 7) ----

#[test]
fn connect_to_a_host_that_never_answers_arp_fails_with_host_unreachable() {
    use netfold::socket::TcpStream;
    use std::io::ErrorKind;
    let mut n = net(Medium::Ethernet);
    n.ea.wire.borrow_mut().mute[0] = true; // nobody hears A: B never answers ARP
    let s = TcpStream::connect(
        &mut n.a,
        n.now,
        SocketAddrV4::new(IP_B, 80),
        netfold::tcp::Config::default(),
    )
    .unwrap();
    let mut err = None;
    run_until(&mut n, Duration::from_secs(10), |n| {
        match s.is_connected(&mut n.a) {
            Ok(_) => false,
            Err(e) => {
                err = Some(e);
                true
            }
        }
    });
    // Linux: 3 ARP probes 1 s apart, then EHOSTUNREACH (not ETIMEDOUT after the SYN retries).
    let cfg = StackConfig::default();
    let give_up = Duration::from_micros(
        cfg.arp_retry_interval.total_micros() * u64::from(cfg.arp_max_retries),
    );
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::HostUnreachable));
    assert!(n.now <= Instant::ZERO + give_up, "gave up at {:?}", n.now);
    assert_eq!(
        n.a.counters().arp_requests_out,
        u64::from(cfg.arp_max_retries)
    );
}

#[test]
fn a_connected_udp_socket_hears_port_unreachable_once() {
    use netfold::socket::UdpSocket;
    use std::io::ErrorKind;
    let mut n = net(Medium::Ethernet);
    let closed = SocketAddrV4::new(IP_B, 9);
    let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
    let connected = UdpSocket::bind(&mut n.a, any).unwrap();
    connected.connect(&mut n.a, closed).unwrap();
    let unconnected = UdpSocket::bind(&mut n.a, any).unwrap();
    connected.send_to(&mut n.a, b"anyone?", closed).unwrap();
    unconnected.send_to(&mut n.a, b"anyone?", closed).unwrap();
    n.quiesce();
    assert_eq!(n.a.counters().icmp_port_unreachable_in, 2);
    // The error is reported once (by the next call), then cleared, as on Linux.
    let mut buf = [0u8; 16];
    let e = connected.recv_from(&mut n.a, &mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    let e = connected.recv_from(&mut n.a, &mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
    connected.send_to(&mut n.a, b"again", closed).unwrap();
    n.quiesce();
    let e = connected.send_to(&mut n.a, b"third", closed).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    assert!(connected.take_error(&mut n.a).unwrap().is_none());
    // An unconnected socket cannot tell which datagram failed: no error (Linux without
    // IP_RECVERR).
    assert!(unconnected.take_error(&mut n.a).unwrap().is_none());
    let e = unconnected.recv_from(&mut n.a, &mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
}

#[test]
fn a_connected_udp_socket_hears_that_its_next_hop_never_answered() {
    use netfold::socket::UdpSocket;
    use std::io::ErrorKind;
    let mut n = net(Medium::Ethernet);
    n.ea.wire.borrow_mut().mute[0] = true;
    let peer = SocketAddrV4::new(IP_B, 7);
    let s = UdpSocket::bind(&mut n.a, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    s.connect(&mut n.a, peer).unwrap();
    s.send_to(&mut n.a, b"x", peer).unwrap();
    run_until(&mut n, Duration::from_secs(10), |n| {
        n.a.arp_pending() == 0 && n.now.total_millis() > 0
    });
    let e = s.take_error(&mut n.a).unwrap().expect("an error");
    assert_eq!(e.kind(), ErrorKind::HostUnreachable);
}

#[test]
fn binding_or_listening_on_an_address_that_is_not_ours_fails() {
    use netfold::socket::{TcpListener, UdpSocket};
    use std::io::ErrorKind;
    let mut n = net(Medium::Ethernet);
    let cfg = netfold::tcp::Config::default();
    let e = TcpListener::bind(&mut n.a, SocketAddrV4::new(IP_B, 80), 4, cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    let e = UdpSocket::bind(&mut n.a, SocketAddrV4::new(IP_B, 80)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    // 0.0.0.0 and our own address are fine.
    TcpListener::bind(
        &mut n.a,
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80),
        4,
        cfg,
    )
    .unwrap();
    TcpListener::bind(&mut n.a, SocketAddrV4::new(IP_A, 81), 4, cfg).unwrap();
}

/// "Fragmentation needed, next-hop MTU `mtu`" about a UDP datagram B sent to A, injected to B.
fn frag_needed_to_b(n: &Net, mtu: u16) {
    let quoted = Ipv4Repr {
        src: IP_B,
        dst: IP_A,
        protocol: IpProtocol::Udp,
        payload_len: 1400,
        ttl: 64,
        dscp_ecn: 0,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    let r = Icmpv4Repr::DstUnreachable {
        code: 4,
        next_hop_mtu: mtu,
        header: quoted,
        data: &[0, 7, 0, 9, 0, 0, 0, 0],
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b, true).unwrap();
    n.inject_to_b(eth(
        MAC_B,
        EtherType::Ipv4,
        &ipv4(IpProtocol::Icmp, &b, 3, false, 0),
    ));
}

#[test]
fn ip_mtu_discover_modes_set_df_and_refuse_or_fragment_like_linux() {
    use netfold::iface::PmtuDisc;
    let mut n = net(Medium::Ethernet);
    let sock = n.b.udp_bind(SocketAddrV4::new(IP_B, 7)).unwrap();
    n.a.udp_bind(SocketAddrV4::new(IP_A, 9)).unwrap();
    let to = SocketAddrV4::new(IP_A, 9);
    n.b.ping(n.now, IP_A, 1, 1, b"x").unwrap();
    n.settle();
    // Linux's default is IP_PMTUDISC_WANT: DF on what fits, fragments (no DF) beyond.
    assert_eq!(n.b.udp_pmtu_disc(sock), Ok(PmtuDisc::Want));
    let sent = |n: &mut Net, len: usize| {
        let before = n.frames_from(1).len();
        let r = n.b.udp_send_to(sock, &vec![7; len], to);
        n.settle();
        (
            r,
            ip_frag_fields(&n.frames_from(1)[before..], IpProtocol::Udp),
        )
    };
    assert_eq!(sent(&mut n, 100), (Ok(()), vec![(true, false, 0, 128)]));
    let (r, f) = sent(&mut n, 3000);
    assert!(r.is_ok() && f.len() == 3 && f.iter().all(|x| !x.0), "{f:?}");
    // DONT: never DF.
    n.b.udp_set_pmtu_disc(sock, PmtuDisc::Dont).unwrap();
    assert_eq!(sent(&mut n, 100), (Ok(()), vec![(false, false, 0, 128)]));
    // DO: DF, and a datagram beyond the path MTU is refused (EMSGSIZE), here and after the
    // path narrowed.
    n.b.udp_set_pmtu_disc(sock, PmtuDisc::Do).unwrap();
    assert_eq!(sent(&mut n, 1472), (Ok(()), vec![(true, false, 0, 1500)]));
    assert_eq!(sent(&mut n, 1473), (Err(UdpError::MessageTooLarge), vec![]));
    frag_needed_to_b(&n, 1000);
    n.settle();
    assert_eq!(sent(&mut n, 1000), (Err(UdpError::MessageTooLarge), vec![]));
    assert_eq!(sent(&mut n, 972), (Ok(()), vec![(true, false, 0, 1000)]));
    // PROBE: DF, measured against the interface MTU (the learned path MTU is ignored).
    n.b.udp_set_pmtu_disc(sock, PmtuDisc::Probe).unwrap();
    assert_eq!(sent(&mut n, 1472), (Ok(()), vec![(true, false, 0, 1500)]));
    assert_eq!(sent(&mut n, 1473), (Err(UdpError::MessageTooLarge), vec![]));
    // WANT again: beyond the learned path MTU, fragments at it.
    n.b.udp_set_pmtu_disc(sock, PmtuDisc::Want).unwrap();
    let (r, f) = sent(&mut n, 1400);
    assert!(
        r.is_ok() && f.len() == 2 && f.iter().all(|x| !x.0 && x.3 <= 1000),
        "{f:?}"
    );
}
