//! Dual-stack sockets (`socket::{TcpListener, TcpStream, UdpSocket}` on `SocketAddr`) between
//! two IPv4 stacks over the in-memory pipe, in virtual time: an IPv6 socket bound to `[::]`
//! serves IPv4 peers and reports them v4-mapped, a stream connecting to a v4-mapped address
//! runs over IPv4, IPV6_V6ONLY, bind conflicts across families, and the stack without an IPv6
//! address failing IPv6 connects and sends at once (counted), never hanging.

use netfold::iface::{StackConfig, UdpBindOptions};
use netfold::phy::pipe::PipeConfig;
use netfold::socket::{unmapped, TcpListener, TcpStream, UdpSocket};
use netfold::tcp;
use netfold::time::Duration;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net};
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn net() -> Net {
    let (a, b): (StackConfig, StackConfig) = (config(A, 1), config(B, 2));
    Net::pipe(a, b, PipeConfig::default())
}

fn any6(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)
}
fn mapped(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), port)
}
fn v4(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(ip), port)
}

/// Settles, polls `f` until it stops blocking (bounded).
fn until<T>(n: &mut Net, mut f: impl FnMut(&mut Net) -> std::io::Result<T>) -> T {
    for _ in 0..2000 {
        n.settle();
        match f(n) {
            Ok(v) => return v,
            Err(e) if e.kind() == ErrorKind::WouldBlock => n.now += Duration::from_millis(1),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    panic!("no progress");
}

#[test]
fn ipv6_listener_on_any_accepts_ipv4_with_mapped_addresses() {
    let mut n = net();
    let l = TcpListener::bind(&mut n.b, any6(80), 8, tcp::Config::default()).unwrap();
    assert_eq!(l.local_addr(&n.b).unwrap(), any6(80));
    let c = TcpStream::connect(&mut n.a, n.now, v4(B, 80), tcp::Config::default()).unwrap();
    let (s, peer) = until(&mut n, |n| l.accept(&mut n.b));
    assert!(c.is_connected(&mut n.a).unwrap());
    let client = c.local_addr(&n.a).unwrap();
    assert_eq!(peer, mapped(A, client.port()));
    assert_eq!(unmapped(peer), client);
    assert_eq!(s.peer_addr(&n.b).unwrap(), peer);
    assert_eq!(s.local_addr(&n.b).unwrap(), mapped(B, 80));
    c.write(&mut n.a, b"over IPv4").unwrap();
    let mut buf = [0u8; 32];
    let k = until(&mut n, |n| s.read(&mut n.b, &mut buf));
    assert_eq!(&buf[..k], b"over IPv4");
    // No IPv6 traffic was involved: nothing counted as unreachable.
    assert_eq!(n.a.counters().ipv6_no_source, 0);
}

#[test]
fn stream_to_a_mapped_address_runs_over_ipv4() {
    let mut n = net();
    let l = TcpListener::bind(
        &mut n.b,
        v4(Ipv4Addr::UNSPECIFIED, 81),
        8,
        Default::default(),
    )
    .unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, mapped(B, 81), Default::default()).unwrap();
    let (s, peer) = until(&mut n, |n| l.accept(&mut n.b));
    let local = c.local_addr(&n.a).unwrap();
    assert_eq!(local.ip(), IpAddr::V6(A.to_ipv6_mapped()));
    assert_eq!(c.peer_addr(&n.a).unwrap(), mapped(B, 81));
    assert_eq!(peer, v4(A, local.port()), "the IPv4 server sees IPv4");
    s.write(&mut n.b, b"hi").unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(until(&mut n, |n| c.read(&mut n.a, &mut buf)), 2);
}

#[test]
fn ipv6_peers_fail_at_once_without_an_ipv6_address() {
    let mut n = net();
    let far: SocketAddr = "[2001:db8::2]:80".parse().unwrap();
    let e = TcpStream::connect(&mut n.a, n.now, far, Default::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NetworkUnreachable);
    assert_eq!(n.a.counters().ipv6_no_source, 1);
    assert_eq!(
        n.a.tcp().socket_count(),
        0,
        "nothing left behind to retransmit"
    );
    // Binding a specific IPv6 address the stack does not have.
    let e = TcpListener::bind(&mut n.a, far, 8, Default::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    let e = UdpSocket::bind(&mut n.a, far).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    // A dual-stack UDP socket sending to an IPv6 peer.
    let u = UdpSocket::bind(&mut n.a, any6(0)).unwrap();
    let e = u.send_to(&mut n.a, b"x", far).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NetworkUnreachable);
    assert_eq!(n.a.counters().ipv6_no_source, 2);
    // An IPv4 socket cannot send to an IPv6 address at all.
    let u4 = UdpSocket::bind(&mut n.a, v4(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    let e = u4.send_to(&mut n.a, b"x", far).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[test]
fn dual_stack_udp_socket_hears_ipv4_peers_mapped_and_answers_them() {
    let mut n = net();
    let server = UdpSocket::bind(&mut n.b, any6(53)).unwrap();
    assert_eq!(server.local_addr(&n.b).unwrap(), any6(53));
    let client = UdpSocket::bind(&mut n.a, v4(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    client.send_to(&mut n.a, b"query", v4(B, 53)).unwrap();
    let mut buf = [0u8; 32];
    let (k, from) = until(&mut n, |n| server.recv_from(&mut n.b, &mut buf));
    assert_eq!(&buf[..k], b"query");
    let cport = client.local_addr(&n.a).unwrap().port();
    assert_eq!(from, mapped(A, cport));
    // Answered to the mapped address: leaves over IPv4 from our IPv4 address.
    server.send_to(&mut n.b, b"answer", from).unwrap();
    let (k, back) = until(&mut n, |n| client.recv_from(&mut n.a, &mut buf));
    assert_eq!((&buf[..k], back), (&b"answer"[..], v4(B, 53)));
    // Answered to the plain IPv4 address works too.
    server.send_to(&mut n.b, b"plain", v4(A, cport)).unwrap();
    let (k, _) = until(&mut n, |n| client.recv_from(&mut n.a, &mut buf));
    assert_eq!(&buf[..k], b"plain");
}

#[test]
fn v6only_udp_socket_leaves_ipv4_alone_and_bind_conflicts_follow_linux() {
    let mut n = net();
    let v6only = UdpBindOptions { v6only: true };
    let s6 = UdpSocket::bind_with(&mut n.b, any6(53), v6only).unwrap();
    // The IPv4 wildcard on the same port is allowed beside a v6-only [::] ...
    let s4 = UdpSocket::bind(&mut n.b, v4(Ipv4Addr::UNSPECIFIED, 53)).unwrap();
    // ... but not beside a dual-stack one, in either order (Linux without SO_REUSEADDR).
    let _d = UdpSocket::bind(&mut n.b, any6(54)).unwrap();
    let e = UdpSocket::bind(&mut n.b, v4(B, 54)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
    let _w = UdpSocket::bind(&mut n.b, v4(Ipv4Addr::UNSPECIFIED, 55)).unwrap();
    let e = UdpSocket::bind(&mut n.b, any6(55)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
    assert!(UdpSocket::bind_with(&mut n.b, any6(55), v6only).is_ok());
    // A v4-mapped address on a v6-only socket is EINVAL (Linux inet6_bind).
    let e = UdpSocket::bind_with(&mut n.b, mapped(B, 56), v6only).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // IPv4 to port 53 reaches the IPv4 socket, not the v6-only one.
    let client = UdpSocket::bind(&mut n.a, v4(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    client.send_to(&mut n.a, b"v4", v4(B, 53)).unwrap();
    let mut buf = [0u8; 8];
    let (_, from) = until(&mut n, |n| s4.recv_from(&mut n.b, &mut buf));
    assert!(from.is_ipv4());
    assert_eq!(
        s6.recv_from(&mut n.b, &mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // And the v6-only socket refuses a mapped destination (Linux: ENETUNREACH).
    let e = s6.send_to(&mut n.b, b"x", mapped(A, 9)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NetworkUnreachable);
}

#[test]
fn v6only_tcp_listener_refuses_ipv4() {
    let mut n = net();
    let cfg = tcp::Config {
        v6only: true,
        ..Default::default()
    };
    let l = TcpListener::bind(&mut n.b, any6(80), 8, cfg).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, v4(B, 80), Default::default()).unwrap();
    n.settle();
    let e = c.is_connected(&mut n.a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    assert_eq!(
        l.accept(&mut n.b).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // The port stays free for an IPv4 listener (the v6-only wildcard does not cover IPv4).
    assert!(TcpListener::bind(
        &mut n.b,
        v4(Ipv4Addr::UNSPECIFIED, 80),
        8,
        Default::default()
    )
    .is_ok());
}
