//! Transparent mode (`StackConfig::transparent`, Linux's IP_TRANSPARENT/TPROXY analogue), in
//! virtual time: stack `a` (198.18.0.1) routes everything off-subnet through stack `b`
//! (198.18.0.2), whose transparent listener and UDP socket take connections and datagrams to
//! destinations that are not its own (203.0.113.0/24, a documentation range; nothing leaves
//! the process) and answer from them.

use netfold::iface::StackConfig;
use netfold::phy::pipe::PipeConfig;
use netfold::socket::{TcpListener, TcpStream, UdpSocket};
use netfold::tcp;
use netfold::time::Duration;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net};
use std::io::ErrorKind;
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const FOREIGN: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(203, 0, 113, 5), 443);

fn net(transparent: bool) -> Net {
    let a = StackConfig {
        gateway: Some(B),
        ..config(A, 1)
    };
    let b = StackConfig {
        transparent,
        ..config(B, 2)
    };
    Net::pipe(a, b, PipeConfig::default())
}

fn tcfg() -> tcp::Config {
    tcp::Config::default()
}

/// Settles, polls `f` until it stops blocking (bounded), settling in between.
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
fn transparent_listener_accepts_any_destination_and_answers_from_it() {
    let mut n = net(true);
    let l = TcpListener::bind_transparent(&mut n.b, 8, tcfg()).unwrap();
    // A second one is refused, as a second bind to one address is.
    let e = TcpListener::bind_transparent(&mut n.b, 8, tcfg()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
    let c = TcpStream::connect(&mut n.a, n.now, FOREIGN, tcfg()).unwrap();
    let (s, peer) = until(&mut n, |n| l.accept(&mut n.b));
    assert!(c.is_connected(&mut n.a).unwrap());
    assert_eq!(
        s.local_addr(&n.b).unwrap(),
        FOREIGN.into(),
        "the original destination"
    );
    assert_eq!(peer, c.local_addr(&n.a).unwrap());
    assert_eq!(peer.ip(), A);
    // The client sees the connection as one with the foreign address.
    assert_eq!(c.peer_addr(&n.a).unwrap(), FOREIGN.into());

    // Data both ways.
    let up: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let down: Vec<u8> = (0..70_000u32).map(|i| (i * 13 % 241) as u8).collect();
    let (mut sent_up, mut sent_down) = (0, 0);
    let (mut got_up, mut got_down) = (Vec::new(), Vec::new());
    let mut buf = [0u8; 8192];
    for _ in 0..10_000 {
        if sent_up < up.len() {
            sent_up += c.write(&mut n.a, &up[sent_up..]).unwrap_or(0);
        }
        if sent_down < down.len() {
            sent_down += s.write(&mut n.b, &down[sent_down..]).unwrap_or(0);
        }
        n.settle();
        while let Ok(k @ 1..) = s.read(&mut n.b, &mut buf) {
            got_up.extend_from_slice(&buf[..k]);
        }
        while let Ok(k @ 1..) = c.read(&mut n.a, &mut buf) {
            got_down.extend_from_slice(&buf[..k]);
        }
        if got_up.len() == up.len() && got_down.len() == down.len() {
            break;
        }
        n.now += Duration::from_millis(1);
    }
    assert!(got_up == up, "client -> transparent server");
    assert!(got_down == down, "transparent server -> client");
    assert!(n.b.counters().ipv4_transparent_in > 0);

    // A second connection to another foreign address and port, and the own-address listener
    // still wins for its own port.
    let own = TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 80), 8, tcfg()).unwrap();
    let other = SocketAddrV4::new(Ipv4Addr::new(203, 0, 113, 77), 8080);
    let _c2 = TcpStream::connect(&mut n.a, n.now, other, tcfg()).unwrap();
    let (s2, _) = until(&mut n, |n| l.accept(&mut n.b));
    assert_eq!(s2.local_addr(&n.b).unwrap(), other.into());
    let _c3 = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 80), tcfg()).unwrap();
    let (s3, _) = until(&mut n, |n| own.accept(&mut n.b));
    assert_eq!(
        s3.local_addr(&n.b).unwrap(),
        SocketAddrV4::new(B, 80).into()
    );
    assert!(matches!(
        l.accept(&mut n.b).map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock)
    ));
}

#[test]
fn without_transparent_mode_foreign_destinations_are_dropped_and_refused() {
    let mut n = net(false);
    let e = TcpListener::bind_transparent(&mut n.b, 8, tcfg()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    let e = UdpSocket::bind_transparent(&mut n.b).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    // Binding a listener or a UDP socket to an address that is not the stack's fails
    // (EADDRNOTAVAIL), transparent mode or not.
    let e = TcpListener::bind(&mut n.b, FOREIGN, 8, tcfg()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    let e = UdpSocket::bind(&mut n.b, FOREIGN).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    // A listener on the port of the foreign destination changes nothing: the packet is not
    // for us.
    let _l = TcpListener::bind(
        &mut n.b,
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 443),
        8,
        tcfg(),
    )
    .unwrap();

    let c = TcpStream::connect(&mut n.a, n.now, FOREIGN, tcfg()).unwrap();
    let u = UdpSocket::bind(&mut n.a, SocketAddrV4::new(A, 0)).unwrap();
    u.send_to(
        &mut n.a,
        b"hello",
        SocketAddrV4::new(Ipv4Addr::new(203, 0, 113, 9), 53),
    )
    .unwrap();
    n.run_for(Duration::from_millis(50));
    assert!(!c.is_connected(&mut n.a).unwrap(), "no answer to the SYN");
    let cb = n.b.counters();
    assert!(
        cb.ipv4_not_for_us >= 2,
        "SYN and datagram dropped: {}",
        cb.ipv4_not_for_us
    );
    assert_eq!(cb.ipv4_transparent_in, 0);
    assert_eq!(cb.tcp.segments_in, 0);
    assert_eq!(cb.udp_in, 0);
}

#[test]
fn transparent_mode_without_a_transparent_socket_resets_tcp_and_drops_udp() {
    let mut n = net(true);
    let c = TcpStream::connect(&mut n.a, n.now, FOREIGN, tcfg()).unwrap();
    let u = UdpSocket::bind(&mut n.a, SocketAddrV4::new(A, 0)).unwrap();
    let to = SocketAddrV4::new(Ipv4Addr::new(203, 0, 113, 9), 53);
    u.send_to(&mut n.a, b"hello", to).unwrap();
    n.run_for(Duration::from_millis(50));
    let e = c.is_connected(&mut n.a).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::ConnectionRefused,
        "RST from the foreign address"
    );
    let cb = n.b.counters();
    assert_eq!(cb.udp_no_socket, 1);
    // No ICMP port unreachable from our own address about a datagram to someone else.
    assert_eq!(cb.icmp_errors_out, 0);
}

#[test]
fn transparent_udp_socket_reports_the_original_destination_and_replies_from_it() {
    let mut n = net(true);
    let t = UdpSocket::bind_transparent(&mut n.b).unwrap();
    assert_eq!(
        UdpSocket::bind_transparent(&mut n.b).unwrap_err().kind(),
        ErrorKind::AddrInUse
    );
    // An ordinary socket on our own address keeps its datagrams.
    let own = UdpSocket::bind(&mut n.b, SocketAddrV4::new(B, 5353)).unwrap();
    let u = UdpSocket::bind(&mut n.a, SocketAddrV4::new(A, 0)).unwrap();
    let ua = u.local_addr(&n.a).unwrap();
    let dst = SocketAddrV4::new(Ipv4Addr::new(203, 0, 113, 9), 53);
    u.send_to(&mut n.a, b"query", dst).unwrap();
    u.send_to(&mut n.a, b"mine", SocketAddrV4::new(B, 5353))
        .unwrap();
    n.settle();
    let mut buf = [0u8; 64];
    let (k, from, to) = t.recv_from_to(&mut n.b, &mut buf).unwrap();
    assert_eq!(&buf[..k], b"query");
    assert_eq!(from, ua);
    assert_eq!(to, dst.into(), "the original destination");
    let (k, from) = own.recv_from(&mut n.b, &mut buf).unwrap();
    assert_eq!((&buf[..k], from), (&b"mine"[..], ua));
    assert_eq!(
        t.recv_from(&mut n.b, &mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );

    // The answer comes from the original destination.
    t.send_from_to(&mut n.b, b"answer", dst, from).unwrap();
    n.settle();
    let (k, src) = u.recv_from(&mut n.a, &mut buf).unwrap();
    assert_eq!(&buf[..k], b"answer");
    assert_eq!(src, dst.into());

    // Only a transparent socket sends from a foreign source.
    assert_eq!(
        own.send_from_to(&mut n.b, b"x", dst, ua)
            .unwrap_err()
            .kind(),
        ErrorKind::AddrNotAvailable
    );
}
