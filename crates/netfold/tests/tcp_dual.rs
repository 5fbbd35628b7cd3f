//! The TCP engine over IPv6 and dual stack, at the `TcpLayer` level (no IPv6 network layer
//! needed): segments are carried between layers by hand, each delivered with the addresses
//! its `OutSegment` names. Covers an IPv6 handshake, data, FIN and RST; SYN cookies over IPv6
//! (Linux's v6 MSS table); a dual-stack `[::]` listener taking IPv4 and IPv6 connections and
//! reporting v4-mapped peers; IPV6_V6ONLY; binds on v4-mapped addresses; connecting to a
//! v4-mapped address; the per-family MSS rules (MTU - 60, default 1220, PMTU floor 1280);
//! and the segments the engine refuses (v4-mapped addresses on the wire).

use netfold::tcp::syncookie::MSS_TABLE_V6;
use netfold::tcp::{
    Config, Error, Handle, IcmpError, OutSegment, RxSegment, Secret, State, TcpLayer,
};
use netfold::time::{Duration, Instant};
use netfold::wire::tcp::{TcpFlags, TcpRepr, Timestamps};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn sa(ip: impl Into<IpAddr>, port: u16) -> SocketAddr {
    SocketAddr::new(ip.into(), port)
}
fn mapped(ip: Ipv4Addr, port: u16) -> SocketAddr {
    sa(ip.to_ipv6_mapped(), port)
}

/// One segment on the "wire".
#[derive(Debug, Clone)]
struct Seg {
    src: IpAddr,
    dst: IpAddr,
    repr: TcpRepr,
    payload: Vec<u8>,
}

/// A client layer and a server layer joined by a lossless wire that carries whatever address
/// family each segment names (IPv4 and IPv6 at once: a dual-stack link).
struct Net {
    a: TcpLayer,
    b: TcpLayer,
    now: Instant,
    /// Every segment carried, in order, with the side that sent it (true: A).
    log: Vec<(bool, Seg)>,
}

impl Net {
    fn new() -> Net {
        Net {
            a: TcpLayer::new(Secret::fixed_for_tests([1; 16])),
            b: TcpLayer::new(Secret::fixed_for_tests([2; 16])),
            now: Instant::from_millis(1),
            log: Vec::new(),
        }
    }

    fn drain(layer: &mut TcpLayer, now: Instant) -> Vec<Seg> {
        let mut out = Vec::new();
        layer.output(now, &mut |s: &OutSegment<'_>| {
            // The engine never mixes families within a segment.
            assert_eq!(s.src.is_ipv4(), s.dst.is_ipv4(), "{s:?}");
            let payload = s.payload.to_vec();
            out.push(Seg {
                src: s.src,
                dst: s.dst,
                repr: s.repr,
                payload,
            });
            true
        });
        out
    }

    /// Carries segments both ways until both sides are quiet (timers are not run).
    fn settle(&mut self) {
        for _ in 0..1000 {
            let from_a = Net::drain(&mut self.a, self.now);
            let from_b = Net::drain(&mut self.b, self.now);
            if from_a.is_empty() && from_b.is_empty() {
                return;
            }
            for s in from_a {
                self.b.input(
                    self.now,
                    RxSegment::new(s.src, s.dst, &s.repr, &[&s.payload]),
                );
                self.log.push((true, s));
            }
            for s in from_b {
                self.a.input(
                    self.now,
                    RxSegment::new(s.src, s.dst, &s.repr, &[&s.payload]),
                );
                self.log.push((false, s));
            }
            self.now += Duration::from_millis(1);
        }
        panic!("the layers never went quiet");
    }

    /// Connects A's `local` to `remote` on B's listener `l`; returns (client, server).
    fn connect(&mut self, local: SocketAddr, remote: SocketAddr, l: Handle) -> (Handle, Handle) {
        self.connect_with(local, remote, l, cfg())
    }

    fn connect_with(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        l: Handle,
        config: Config,
    ) -> (Handle, Handle) {
        let c = self.a.connect(self.now, local, remote, config).unwrap();
        self.settle();
        assert_eq!(self.a.state(c), Ok(State::Established));
        let s = self.b.accept(l).expect("accepted");
        (c, s)
    }
}

fn cfg() -> Config {
    Config {
        time_wait: Duration::from_secs(1),
        nodelay: true,
        ..Config::default()
    }
}

fn send_all(l: &mut TcpLayer, h: Handle, data: &[u8]) {
    assert_eq!(l.send(h, data), Ok(data.len()));
}

fn recv_all(l: &mut TcpLayer, h: Handle) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = l.recv(h, &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn ipv6_handshake_data_and_orderly_close() {
    let mut n = Net::new();
    let l = n.b.listen(sa(B6, 80), 8, cfg()).unwrap();
    assert_eq!(n.b.local_addr(l), Ok(sa(B6, 80)));
    let (c, s) = n.connect(sa(A6, 0), sa(B6, 80), l);
    // Every segment of the handshake went over IPv6; both SYNs announce MTU - 60 (RFC 8200
    // §8.3): Config::mss 1460 (MTU - 40) is bounded by the IPv6 link's MSS, 1440.
    assert!(n
        .log
        .iter()
        .all(|(_, s)| s.src.is_ipv6() && s.dst.is_ipv6()));
    let syns: Vec<&Seg> = n
        .log
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.repr.flags.syn())
        .collect();
    assert_eq!(syns.len(), 2);
    assert!(syns.iter().all(|s| s.repr.options.mss == Some(1440)));
    assert_eq!(n.a.conn_info(c).unwrap().mss, 1440);
    assert_eq!(n.b.conn_info(s).unwrap().mss, 1440);
    // Addresses are plain IPv6 (nothing mapped), the ephemeral port in the RFC 6335 range.
    let local = n.a.local_addr(c).unwrap();
    assert_eq!(local.ip(), IpAddr::V6(A6));
    assert!(local.port() >= 49152);
    assert_eq!(n.a.peer_addr(c), Ok(sa(B6, 80)));
    assert_eq!(n.b.peer_addr(s), Ok(local));
    assert_eq!(n.b.local_addr(s), Ok(sa(B6, 80)));
    assert_eq!((n.a.is_ipv6(c), n.b.is_ipv6(s)), (Ok(true), Ok(true)));

    // Data both ways, larger than one segment.
    let up: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    let mut got = Vec::new();
    let mut sent = 0;
    while got.len() < up.len() {
        if sent < up.len() {
            sent += n.a.send(c, &up[sent..]).unwrap_or(0);
        }
        n.settle();
        got.extend(recv_all(&mut n.b, s));
    }
    assert_eq!(got, up);
    assert!(n
        .log
        .iter()
        .any(|(from_a, s)| *from_a && s.payload.len() == 1440 - 12));
    send_all(&mut n.b, s, b"reply over IPv6");
    n.settle();
    assert_eq!(recv_all(&mut n.a, c), b"reply over IPv6");

    // FIN each way: the client ends in TIME-WAIT, the server's handle reads end of stream.
    n.a.shutdown_write(c).unwrap();
    n.settle();
    assert_eq!(n.b.state(s), Ok(State::CloseWait));
    let mut buf = [0u8; 8];
    assert_eq!(n.b.recv(s, &mut buf), Ok(0));
    n.b.close(s).unwrap();
    n.settle();
    assert_eq!(n.a.state(c), Ok(State::TimeWait));
    let fins = n.log.iter().filter(|(_, s)| s.repr.flags.fin()).count();
    assert_eq!(fins, 2);
}

#[test]
fn ipv6_closed_port_is_refused_with_an_ipv6_rst() {
    let mut n = Net::new();
    let c = n.a.connect(n.now, sa(A6, 0), sa(B6, 81), cfg()).unwrap();
    n.settle();
    let rst = n
        .log
        .iter()
        .find(|(from_a, s)| !from_a && s.repr.flags.rst())
        .map(|(_, s)| s.clone())
        .expect("a RST");
    assert_eq!((rst.src, rst.dst), (IpAddr::V6(B6), IpAddr::V6(A6)));
    assert_eq!(n.b.stats().no_socket, 1);
    assert_eq!(n.a.take_error(c), Ok(Some(Error::ConnectionRefused)));
}

#[test]
fn ipv6_abort_sends_a_rst_the_peer_sees() {
    let mut n = Net::new();
    let l = n.b.listen(sa(B6, 80), 8, cfg()).unwrap();
    let (c, s) = n.connect(sa(A6, 0), sa(B6, 80), l);
    n.a.abort(c).unwrap();
    n.settle();
    assert!(n
        .log
        .iter()
        .any(|(a, s)| *a && s.repr.flags.rst() && s.src.is_ipv6()));
    assert_eq!(n.b.take_error(s), Ok(Some(Error::ConnectionReset)));
}

/// A client SYN from `from` (IPv6, port `port`) with timestamps, window scale and SACK.
fn syn6(from: Ipv6Addr, port: u16, seq: u32) -> (IpAddr, TcpRepr) {
    let mut r = TcpRepr {
        src_port: port,
        dst_port: 80,
        seq,
        flags: TcpFlags(TcpFlags::SYN),
        window: 64800,
        ..TcpRepr::default()
    };
    r.options.mss = Some(1440);
    r.options.window_scale = Some(7);
    r.options.sack_permitted = true;
    r.options.timestamps = Some(Timestamps {
        tsval: 1000,
        tsecr: 0,
    });
    (IpAddr::V6(from), r)
}

#[test]
fn ipv6_syn_cookies_rebuild_the_connection() {
    let mut n = Net::new();
    let l = n.b.listen(sa(B6, 80), 1, cfg()).unwrap();
    // One half-open connection fills the SYN queue (its SYN-ACK goes nowhere).
    let spoofed: Ipv6Addr = "2001:db8::66".parse().unwrap();
    let (src, syn) = syn6(spoofed, 4000, 77);
    n.b.input(n.now, RxSegment::new(src, IpAddr::V6(B6), &syn, &[&[]]));
    let _ = Net::drain(&mut n.b, n.now);
    // The next SYN is answered with a cookie; the client's ACK rebuilds the connection.
    let (src, syn) = syn6(A6, 5000, 1_000_000);
    n.b.input(n.now, RxSegment::new(src, IpAddr::V6(B6), &syn, &[&[]]));
    assert_eq!(n.b.stats().syncookies_sent, 1);
    let out = Net::drain(&mut n.b, n.now);
    let synack = out
        .iter()
        .find(|s| s.repr.flags.syn())
        .expect("cookie SYN-ACK");
    assert_eq!((synack.src, synack.dst), (IpAddr::V6(B6), IpAddr::V6(A6)));
    assert_eq!(synack.repr.options.mss, Some(1440), "MTU - 60 announced");
    let ts = synack.repr.options.timestamps.unwrap();
    let ack = TcpRepr {
        src_port: 5000,
        dst_port: 80,
        seq: 1_000_001,
        ack: synack.repr.seq.wrapping_add(1),
        flags: TcpFlags(TcpFlags::ACK),
        window: 506,
        options: netfold::wire::tcp::TcpOptions {
            timestamps: Some(Timestamps {
                tsval: 1001,
                tsecr: ts.tsval,
            }),
            ..Default::default()
        },
        ..TcpRepr::default()
    };
    n.b.input(
        n.now,
        RxSegment::new(IpAddr::V6(A6), IpAddr::V6(B6), &ack, &[b"hi"]),
    );
    assert_eq!(n.b.stats().syncookies_recv, 1);
    let s = n.b.accept(l).expect("the cookie connection");
    assert_eq!(n.b.state(s), Ok(State::Established));
    assert_eq!(n.b.peer_addr(s), Ok(sa(A6, 5000)));
    // The client's MSS 1440 is in Linux's IPv6 table; the options came back in the TSval.
    let info = n.b.conn_info(s).unwrap();
    assert!(MSS_TABLE_V6.contains(&(info.mss as u16)));
    assert_eq!(info.mss, 1440);
    assert!(info.sack && info.timestamps);
    let mut buf = [0u8; 4];
    assert_eq!(n.b.recv(s, &mut buf), Ok(2));
    // A forged ACK from another IPv6 client does not verify.
    let mut forged = ack;
    forged.src_port = 5001;
    n.b.input(
        n.now,
        RxSegment::new(IpAddr::V6(A6), IpAddr::V6(B6), &forged, &[&[]]),
    );
    assert_eq!(n.b.stats().syncookies_failed, 1);
}

#[test]
fn dual_stack_listener_takes_ipv4_and_ipv6_and_reports_mapped_peers() {
    let mut n = Net::new();
    let l = n.b.listen(sa(Ipv6Addr::UNSPECIFIED, 80), 8, cfg()).unwrap();
    assert_eq!(n.b.local_addr(l), Ok(sa(Ipv6Addr::UNSPECIFIED, 80)));

    // An IPv4 client.
    let (c4, s4) = n.connect(sa(A4, 0), sa(B4, 80), l);
    let c4_local = n.a.local_addr(c4).unwrap();
    assert!(c4_local.is_ipv4(), "the client is an IPv4 socket");
    // The server's view: an IPv6 socket's IPv4 peer, v4-mapped (RFC 4291 §2.5.5.2, as
    // Linux's getpeername/accept report it).
    assert_eq!(n.b.peer_addr(s4), Ok(mapped(A4, c4_local.port())));
    assert_eq!(n.b.local_addr(s4), Ok(mapped(B4, 80)));
    assert_eq!(n.b.is_ipv6(s4), Ok(false), "it runs over IPv4");
    // On the wire it is plain IPv4 with the IPv4 MSS.
    let v4_segs: Vec<&Seg> = n.log.iter().map(|(_, s)| s).collect();
    assert!(v4_segs.iter().all(|s| s.src.is_ipv4()));
    assert_eq!(n.b.conn_info(s4).unwrap().mss, 1460);

    // An IPv6 client to the same listener.
    n.log.clear();
    let (c6, s6) = n.connect(sa(A6, 0), sa(B6, 80), l);
    assert!(n.log.iter().all(|(_, s)| s.src.is_ipv6()));
    assert_eq!(n.b.peer_addr(s6), n.a.local_addr(c6));
    assert_eq!(n.b.local_addr(s6), Ok(sa(B6, 80)));
    assert_eq!(n.b.conn_info(s6).unwrap().mss, 1440);

    // Data on both.
    send_all(&mut n.a, c4, b"via IPv4");
    send_all(&mut n.a, c6, b"via IPv6");
    n.settle();
    assert_eq!(recv_all(&mut n.b, s4), b"via IPv4");
    assert_eq!(recv_all(&mut n.b, s6), b"via IPv6");

    // A second IPv4 listener on the port conflicts with the dual-stack wildcard (Linux
    // inet_csk_bind_conflict: [::] without V6ONLY covers every IPv4 address) ...
    assert_eq!(n.b.listen(sa(B4, 80), 8, cfg()), Err(Error::AddrInUse));
    assert_eq!(
        n.b.listen(sa(Ipv4Addr::UNSPECIFIED, 80), 8, cfg()),
        Err(Error::AddrInUse)
    );
    // ... and so does the IPv6 wildcard itself.
    assert_eq!(
        n.b.listen(sa(Ipv6Addr::UNSPECIFIED, 80), 8, cfg()),
        Err(Error::AddrInUse)
    );
    // An IPv4 wildcard first, then a dual-stack one: the same conflict the other way.
    assert!(n.b.listen(sa(Ipv4Addr::UNSPECIFIED, 90), 8, cfg()).is_ok());
    assert_eq!(
        n.b.listen(sa(Ipv6Addr::UNSPECIFIED, 90), 8, cfg()),
        Err(Error::AddrInUse)
    );
}

#[test]
fn v6only_listener_refuses_ipv4_and_leaves_the_port_to_an_ipv4_listener() {
    let mut n = Net::new();
    let v6only = Config {
        v6only: true,
        ..cfg()
    };
    let l6 =
        n.b.listen(sa(Ipv6Addr::UNSPECIFIED, 80), 8, v6only)
            .unwrap();
    // IPv4 to port 80: nobody listens (RST, refused).
    let c = n.a.connect(n.now, sa(A4, 0), sa(B4, 80), cfg()).unwrap();
    n.settle();
    assert_eq!(n.a.take_error(c), Ok(Some(Error::ConnectionRefused)));
    assert_eq!(n.b.accept(l6), Err(Error::WouldBlock));
    // An IPv4 listener may share the port, and takes the IPv4 connections.
    let l4 = n.b.listen(sa(Ipv4Addr::UNSPECIFIED, 80), 8, cfg()).unwrap();
    let (c4, s4) = n.connect(sa(A4, 0), sa(B4, 80), l4);
    assert_eq!(
        n.b.peer_addr(s4),
        n.a.local_addr(c4),
        "plain IPv4, not mapped"
    );
    let (_, s6) = n.connect(sa(A6, 0), sa(B6, 80), l6);
    assert_eq!(n.b.local_addr(s6), Ok(sa(B6, 80)));
}

#[test]
fn ipv4_and_ipv6_listeners_on_own_addresses_share_a_port() {
    // Specific addresses of the two families do not overlap (Linux lets both bind).
    let mut n = Net::new();
    let l4 = n.b.listen(sa(B4, 80), 8, cfg()).unwrap();
    let l6 = n.b.listen(sa(B6, 80), 8, cfg()).unwrap();
    let (_, s) = n.connect(sa(A4, 0), sa(B4, 80), l4);
    assert!(n.b.peer_addr(s).unwrap().is_ipv4());
    let (_, s) = n.connect(sa(A6, 0), sa(B6, 80), l6);
    assert!(n.b.peer_addr(s).unwrap().is_ipv6());
}

#[test]
fn listener_on_a_v4_mapped_address_is_an_ipv4_listener_of_an_ipv6_socket() {
    let mut n = Net::new();
    let l = n.b.listen(mapped(B4, 81), 8, cfg()).unwrap();
    assert_eq!(n.b.local_addr(l), Ok(mapped(B4, 81)));
    // It conflicts with the same IPv4 address.
    assert_eq!(n.b.listen(sa(B4, 81), 8, cfg()), Err(Error::AddrInUse));
    let (c, s) = n.connect(sa(A4, 0), sa(B4, 81), l);
    let port = n.a.local_addr(c).unwrap().port();
    assert_eq!(n.b.peer_addr(s), Ok(mapped(A4, port)));
    // IPV6_V6ONLY and a v4-mapped address do not go together (Linux inet6_bind: EINVAL).
    let v6only = Config {
        v6only: true,
        ..cfg()
    };
    assert_eq!(
        n.b.listen(mapped(B4, 82), 8, v6only),
        Err(Error::InvalidInput)
    );
}

#[test]
fn connecting_to_a_v4_mapped_address_runs_over_ipv4() {
    let mut n = Net::new();
    let l = n.b.listen(sa(B4, 80), 8, cfg()).unwrap();
    // An IPv6 socket connecting to ::ffff:198.18.0.2 (Linux tcp_v6_connect hands it to
    // tcp_v4_connect); the source may be given mapped too.
    let (c, s) = n.connect(mapped(A4, 0), mapped(B4, 80), l);
    assert!(n
        .log
        .iter()
        .all(|(_, s)| s.src.is_ipv4() && s.dst.is_ipv4()));
    let local = n.a.local_addr(c).unwrap();
    assert_eq!(local.ip(), IpAddr::V6(A4.to_ipv6_mapped()));
    assert_eq!(n.a.peer_addr(c), Ok(mapped(B4, 80)));
    // The server (an IPv4 listener) sees a plain IPv4 peer.
    assert_eq!(n.b.peer_addr(s), Ok(sa(A4, local.port())));
    assert_eq!(n.a.conn_info(c).unwrap().mss, 1460);
    // The same 4-tuple from an IPv4 socket is taken: one connection, whatever the socket.
    assert_eq!(
        n.a.connect(n.now, sa(A4, local.port()), sa(B4, 80), cfg()),
        Err(Error::AddrInUse)
    );
    // IPV6_V6ONLY forbids it (Linux: ENETUNREACH).
    let v6only = Config {
        v6only: true,
        ..cfg()
    };
    assert_eq!(
        n.a.connect(n.now, mapped(A4, 0), mapped(B4, 80), v6only),
        Err(Error::NetworkUnreachable)
    );
}

#[test]
fn connect_refuses_mixed_families_and_non_unicast_peers() {
    let mut l = TcpLayer::new(Secret::fixed_for_tests([3; 16]));
    let now = Instant::ZERO;
    assert_eq!(
        l.connect(now, sa(A4, 0), sa(B6, 80), cfg()),
        Err(Error::InvalidInput)
    );
    assert_eq!(
        l.connect(now, sa(A6, 0), sa(B4, 80), cfg()),
        Err(Error::InvalidInput)
    );
    let mcast: Ipv6Addr = "ff02::1".parse().unwrap();
    assert_eq!(
        l.connect(now, sa(A6, 0), sa(mcast, 80), cfg()),
        Err(Error::InvalidInput)
    );
    assert_eq!(
        l.connect(now, sa(Ipv6Addr::UNSPECIFIED, 0), sa(B6, 80), cfg()),
        Err(Error::InvalidInput)
    );
    assert_eq!(
        l.connect(now, sa(A6, 0), sa(Ipv6Addr::UNSPECIFIED, 80), cfg()),
        Err(Error::InvalidInput)
    );
    assert_eq!(l.socket_count(), 0);
}

#[test]
fn v4_mapped_addresses_on_the_wire_are_dropped_unanswered() {
    let mut n = Net::new();
    let _l = n.b.listen(sa(Ipv6Addr::UNSPECIFIED, 80), 8, cfg()).unwrap();
    // An IPv6 SYN whose source is v4-mapped (RFC 4942 §2.2; Linux tcp_v6_conn_request).
    let (_, syn) = syn6(A6, 4000, 1);
    n.b.input(n.now, RxSegment::new(A4.to_ipv6_mapped(), B6, &syn, &[&[]]));
    // ... or whose destination is.
    n.b.input(n.now, RxSegment::new(A6, B4.to_ipv6_mapped(), &syn, &[&[]]));
    // A mixed pair cannot come from any network layer; dropped too.
    n.b.input(
        n.now,
        RxSegment::new(IpAddr::V4(A4), IpAddr::V6(B6), &syn, &[&[]]),
    );
    assert_eq!(n.b.stats().bad_segments, 3);
    assert!(Net::drain(&mut n.b, n.now).is_empty(), "no SYN-ACK, no RST");
    assert_eq!(n.b.socket_count(), 1, "only the listener");
}

#[test]
fn ipv6_syn_without_mss_option_assumes_1220() {
    // RFC 9293 §3.7.1 (MUST-15): 536 for IPv4, 1220 (1280 - 60) for IPv6.
    for (client, server) in [(IpAddr::V6(A6), IpAddr::V6(B6)), (A4.into(), B4.into())] {
        let mut b = TcpLayer::new(Secret::fixed_for_tests([4; 16]));
        let now = Instant::from_millis(5);
        let l = b.listen(SocketAddr::new(server, 80), 8, cfg()).unwrap();
        let syn = TcpRepr {
            src_port: 4000,
            dst_port: 80,
            seq: 10,
            flags: TcpFlags(TcpFlags::SYN),
            window: 8000,
            ..TcpRepr::default()
        };
        b.input(now, RxSegment::new(client, server, &syn, &[&[]]));
        let out = Net::drain(&mut b, now);
        let synack = out.iter().find(|s| s.repr.flags.syn()).unwrap();
        let ack = TcpRepr {
            src_port: 4000,
            dst_port: 80,
            seq: 11,
            ack: synack.repr.seq.wrapping_add(1),
            flags: TcpFlags(TcpFlags::ACK),
            window: 8000,
            ..TcpRepr::default()
        };
        b.input(now, RxSegment::new(client, server, &ack, &[&[]]));
        let s = b.accept(l).unwrap();
        let want = if client.is_ipv6() { 1220 } else { 536 };
        assert_eq!(b.conn_info(s).unwrap().mss, want, "{client}");
    }
}

#[test]
fn ipv6_packet_too_big_lowers_the_mss_but_not_below_1220() {
    let mut n = Net::new();
    let l = n.b.listen(sa(B6, 80), 8, cfg()).unwrap();
    let (c, _) = n.connect(sa(A6, 0), sa(B6, 80), l);
    let local = n.a.local_addr(c).unwrap();
    // RFC 8201: MTU 1400 -> MSS 1340 (MTU - 60).
    n.a.icmp_error(
        n.now,
        local,
        sa(B6, 80),
        IcmpError::FragNeeded { mtu: 1400 },
    );
    assert_eq!(n.a.conn_info(c).unwrap().mss, 1340);
    // Below the IPv6 minimum MTU (a forged or broken report): floored at 1280 - 60.
    n.a.icmp_error(n.now, local, sa(B6, 80), IcmpError::FragNeeded { mtu: 600 });
    assert_eq!(n.a.conn_info(c).unwrap().mss, 1220);
    // An IPv4 connection keeps IPv4's floor of 536.
    let l4 = n.b.listen(sa(B4, 80), 8, cfg()).unwrap();
    let (c4, _) = n.connect(sa(A4, 0), sa(B4, 80), l4);
    let local4 = n.a.local_addr(c4).unwrap();
    n.a.icmp_error(
        n.now,
        local4,
        sa(B4, 80),
        IcmpError::FragNeeded { mtu: 300 },
    );
    assert_eq!(n.a.conn_info(c4).unwrap().mss, 536);
}

#[test]
fn host_unreachable_reaches_only_the_family_it_names() {
    let mut a = TcpLayer::new(Secret::fixed_for_tests([5; 16]));
    let now = Instant::from_millis(1);
    let c4 = a.connect(now, sa(A4, 0), sa(B4, 80), cfg()).unwrap();
    let c6 = a.connect(now, sa(A6, 0), sa(B6, 80), cfg()).unwrap();
    a.host_unreachable(now, |ip| ip == IpAddr::V4(B4));
    assert_eq!(a.take_error(c4), Ok(Some(Error::HostUnreachable)));
    assert_eq!(a.state(c6), Ok(State::SynSent));
}

/// `Config::mss` is one user MSS for both families, as Linux's TCP_MAXSEG: a value below the
/// link's MSS applies to IPv4 and IPv6 connections alike (1000 announced and used over both;
/// before, IPv6 took 20 bytes less), and the IPv6 link's MSS (`set_ipv6_link_mss`, MTU - 60)
/// is the bound for IPv6 (a 9000-byte link: 8940 with Config::mss 8960).
#[test]
fn config_mss_is_one_user_mss_for_both_families() {
    let mut n = Net::new();
    let small = Config { mss: 1000, ..cfg() };
    let l = n.b.listen(sa(Ipv6Addr::UNSPECIFIED, 80), 8, small).unwrap();
    let (c4, s4) = n.connect_with(sa(A4, 0), sa(B4, 80), l, small);
    let (c6, s6) = n.connect_with(sa(A6, 0), sa(B6, 80), l, small);
    for (layer, h) in [(&n.a, c4), (&n.b, s4), (&n.a, c6), (&n.b, s6)] {
        assert_eq!(layer.conn_info(h).unwrap().mss, 1000);
    }
    assert!(n
        .log
        .iter()
        .filter(|(_, s)| s.repr.flags.syn())
        .all(|(_, s)| s.repr.options.mss == Some(1000)));

    // A jumbo link: the IPv6 link's MSS bounds IPv6 connections.
    let mut n = Net::new();
    for layer in [&mut n.a, &mut n.b] {
        layer.set_ipv6_link_mss(8940);
    }
    let jumbo = Config { mss: 8960, ..cfg() };
    let l = n.b.listen(sa(Ipv6Addr::UNSPECIFIED, 80), 8, jumbo).unwrap();
    let (c6, s6) = n.connect_with(sa(A6, 0), sa(B6, 80), l, jumbo);
    assert_eq!(n.a.conn_info(c6).unwrap().mss, 8940);
    assert_eq!(n.b.conn_info(s6).unwrap().mss, 8940);
    let (c4, _) = n.connect_with(sa(A4, 0), sa(B4, 80), l, jumbo);
    assert_eq!(n.a.conn_info(c4).unwrap().mss, 8960);
}
