//! The transport entry points the IPv6 network layer calls, exercised the way it calls
//! them: `receive_tcp` and `receive_udp` with an [`IpMeta::from_v6`] header description and
//! the upper-layer bytes. (These tests call them directly, without the IPv6 network layer in
//! front, on the receive side. Nothing here depends on how `send_ipv6` sends.)

use super::ip::{IpMeta, Payload};
use super::{Stack, StackConfig};
use crate::buf::Csum;
use crate::offload::gro::Gro;
use crate::tcp::{Config, OutSegment, State};
use crate::time::Instant;
use crate::wire::ipv6::Ipv6Repr;
use crate::wire::tcp::{PseudoHeader, TcpFlags, TcpRepr};
use crate::wire::udp::UdpRepr;
use crate::wire::{IpAddr, IpProtocol, Ipv4Addr, Ipv6Addr};
use std::net::SocketAddr;

const US: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const PEER: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fn stack() -> Stack {
    Stack::new(StackConfig {
        tcp_secret: crate::tcp::Secret::fixed_for_tests([9; 16]),
        ..StackConfig::default()
    })
}

/// The IPv6 header the network layer would have parsed for `len` upper-layer bytes.
fn meta(next: IpProtocol, len: usize) -> IpMeta {
    IpMeta::from_v6(&Ipv6Repr {
        src: PEER,
        dst: US,
        next_header: next,
        payload_len: len,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 7,
    })
}

/// A TCP segment from PEER to US with a correct IPv6 pseudo-header checksum.
fn tcp_seg(repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; repr.header_len() + payload.len()];
    repr.emit_with_checksum(&mut b, payload, &PseudoHeader::new(PEER, US))
        .unwrap();
    b
}

fn udp_dgram(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let r = UdpRepr { src_port, dst_port };
    let mut b = vec![0u8; r.buffer_len(payload.len())];
    let n = r
        .emit_with_checksum(&mut b, payload, &PseudoHeader::new(PEER, US))
        .unwrap();
    b.truncate(n);
    b
}

fn deliver_tcp(s: &mut Stack, now: Instant, seg: &[u8], csum: Csum) {
    let mut gro = Gro::new();
    let m = meta(IpProtocol::Tcp, seg.len());
    s.inner
        .receive_tcp(now, &m, Payload::Transient(seg), false, csum, &mut gro);
    s.inner.flush_gro(now, &mut gro);
}

/// What the TCP layer has to send (taken from the engine directly, not through an IP layer).
fn engine_output(s: &mut Stack, now: Instant) -> Vec<(IpAddr, IpAddr, TcpRepr)> {
    let mut out = Vec::new();
    s.tcp_mut().output(now, &mut |seg: &OutSegment<'_>| {
        out.push((seg.src, seg.dst, seg.repr));
        true
    });
    out
}

#[test]
fn ipv6_tcp_enters_the_engine_with_its_checksum_checked() {
    let mut s = stack();
    let now = Instant::from_millis(1);
    let l = s
        .tcp_mut()
        .listen(
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 80),
            4,
            Config::default(),
        )
        .unwrap();
    let mut syn = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: 1000,
        flags: TcpFlags(TcpFlags::SYN),
        window: 64000,
        ..TcpRepr::default()
    };
    syn.options.mss = Some(1440);
    // A corrupted SYN is counted and never reaches the engine.
    let mut bad = tcp_seg(&syn, &[]);
    bad[4] ^= 1;
    deliver_tcp(&mut s, now, &bad, Csum::Unverified);
    assert_eq!(s.counters().tcp_bad_checksum, 1);
    assert_eq!(s.counters().tcp.segments_in, 0);
    // The good one: a SYN-ACK from our IPv6 address, announcing MTU - 60.
    deliver_tcp(&mut s, now, &tcp_seg(&syn, &[]), Csum::Unverified);
    let out = engine_output(&mut s, now);
    assert_eq!(out.len(), 1);
    let (src, dst, synack) = out[0];
    assert_eq!((src, dst), (IpAddr::V6(US), IpAddr::V6(PEER)));
    assert!(synack.flags.syn() && synack.flags.ack());
    assert_eq!(synack.options.mss, Some(1460 - 20));
    // The ACK completes it; then two data segments come as one GRO train (Batch payloads).
    let ack = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: 1001,
        ack: synack.seq.wrapping_add(1),
        flags: TcpFlags(TcpFlags::ACK),
        window: 500,
        ..TcpRepr::default()
    };
    deliver_tcp(&mut s, now, &tcp_seg(&ack, &[]), Csum::Unverified);
    let c = s.tcp_mut().accept(l).unwrap();
    assert_eq!(s.tcp().state(c), Ok(State::Established));
    assert_eq!(
        s.tcp().peer_addr(c),
        Ok(SocketAddr::new(IpAddr::V6(PEER), 40000))
    );
    let d1 = tcp_seg(&TcpRepr { seq: 1001, ..ack }, &[b'a'; 1000]);
    let d2 = tcp_seg(
        &TcpRepr {
            seq: 2001,
            flags: TcpFlags(TcpFlags::ACK | TcpFlags::PSH),
            ..ack
        },
        &[b'b'; 500],
    );
    let mut gro = Gro::new();
    let m = meta(IpProtocol::Tcp, d1.len());
    s.inner.receive_tcp(
        now,
        &m,
        Payload::Batch(&d1),
        false,
        Csum::Unverified,
        &mut gro,
    );
    let m = meta(IpProtocol::Tcp, d2.len());
    s.inner.receive_tcp(
        now,
        &m,
        Payload::Batch(&d2),
        false,
        Csum::Unverified,
        &mut gro,
    );
    s.inner.flush_gro(now, &mut gro);
    assert_eq!(
        s.counters().gro_merges,
        1,
        "an IPv6 flow merges like an IPv4 one"
    );
    let mut buf = [0u8; 2000];
    assert_eq!(s.tcp_mut().recv(c, &mut buf), Ok(1500));
    assert!(buf[..1000].iter().all(|&b| b == b'a') && buf[1000..1500].iter().all(|&b| b == b'b'));
}

#[test]
fn ipv6_tcp_to_a_multicast_destination_is_dropped_and_counted() {
    let mut s = stack();
    let syn = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        flags: TcpFlags(TcpFlags::SYN),
        ..TcpRepr::default()
    };
    let seg = tcp_seg(&syn, &[]);
    let mut gro = Gro::new();
    let m = meta(IpProtocol::Tcp, seg.len());
    let now = Instant::ZERO;
    s.inner.receive_tcp(
        now,
        &m,
        Payload::Transient(&seg),
        true,
        Csum::Unverified,
        &mut gro,
    );
    assert_eq!(s.counters().ipv6_tcp_not_unicast, 1);
    assert_eq!(s.counters().tcp.segments_in, 0);
}

#[test]
fn ipv6_udp_reaches_ipv6_and_dual_stack_sockets() {
    let mut s = stack();
    let now = Instant::ZERO;
    let dual = s
        .udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 53))
        .unwrap();
    let d = udp_dgram(5353, 53, b"query");
    assert!(!s.inner.receive_udp(
        now,
        &meta(IpProtocol::Udp, d.len()),
        &d,
        false,
        Csum::Unverified
    ));
    let mut buf = [0u8; 16];
    let (n, from) = s.udp_recv_from(dual, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"query");
    assert_eq!(from, SocketAddr::new(IpAddr::V6(PEER), 5353));
    // The original destination as the socket sees it (plain IPv6).
    let d = udp_dgram(5353, 53, b"again");
    s.inner.receive_udp(
        now,
        &meta(IpProtocol::Udp, d.len()),
        &d,
        false,
        Csum::Unverified,
    );
    let (_, _, to) = s.udp_recv_from_to(dual, &mut buf).unwrap();
    assert_eq!(to, SocketAddr::new(IpAddr::V6(US), 53));

    // RFC 8200 §8.1: a zero UDP checksum over IPv6 is discarded (counted as bad).
    let mut zero = udp_dgram(5353, 53, b"nocsum");
    zero[6] = 0;
    zero[7] = 0;
    assert!(!s.inner.receive_udp(
        now,
        &meta(IpProtocol::Udp, zero.len()),
        &zero,
        false,
        Csum::Unverified
    ));
    assert_eq!(s.counters().udp_bad_checksum, 1);
    // A corrupted one too.
    let mut bad = udp_dgram(5353, 53, b"flipped");
    bad[9] ^= 1;
    s.inner.receive_udp(
        now,
        &meta(IpProtocol::Udp, bad.len()),
        &bad,
        false,
        Csum::Unverified,
    );
    assert_eq!(s.counters().udp_bad_checksum, 2);
    assert!(s.udp_recv_from(dual, &mut buf).is_err());

    // No socket: the caller is told to answer port unreachable (ICMPv6 is its business);
    // never for a multicast destination.
    let d = udp_dgram(5353, 54, b"closed");
    let m = meta(IpProtocol::Udp, d.len());
    assert!(s.inner.receive_udp(now, &m, &d, false, Csum::Unverified));
    assert!(!s.inner.receive_udp(now, &m, &d, true, Csum::Unverified));
    assert_eq!(s.counters().udp_no_socket, 2);

    // A v6-only socket on another port, and an IPv4 wildcard sharing that port: IPv6 goes to
    // the first; the IPv4 socket never sees IPv6.
    let v6only = s
        .udp_bind_with(
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 55),
            super::UdpBindOptions { v6only: true },
        )
        .unwrap();
    let v4 = s
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 55))
        .unwrap();
    let d = udp_dgram(5353, 55, b"six");
    s.inner.receive_udp(
        now,
        &meta(IpProtocol::Udp, d.len()),
        &d,
        false,
        Csum::Unverified,
    );
    assert!(s.udp_recv_from(v6only, &mut buf).is_ok());
    assert!(s.udp_recv_from(v4, &mut buf).is_err());
}
