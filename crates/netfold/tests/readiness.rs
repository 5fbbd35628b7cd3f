//! `socket::Readiness`: what a poller (the tokio adapter's wakers) is told a socket can do,
//! through a connection's life, in virtual time.

use netfold::phy::pipe::PipeConfig;
use netfold::socket::{Readiness, TcpListener, TcpStream, UdpSocket};
use netfold::tcp;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net};
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

const NONE: Readiness = Readiness {
    readable: false,
    writable: false,
};
const WRITE: Readiness = Readiness {
    readable: false,
    writable: true,
};
const BOTH: Readiness = Readiness {
    readable: true,
    writable: true,
};

fn net() -> Net {
    Net::pipe(config(A, 1), config(B, 2), PipeConfig::default())
}

#[test]
fn tcp_readiness_through_a_connection() {
    let mut n = net();
    let l = TcpListener::bind(
        &mut n.b,
        SocketAddrV4::new(B, 80),
        4,
        tcp::Config::default(),
    )
    .unwrap();
    assert!(!l.readiness(&mut n.b).readable, "nothing to accept yet");
    let c = TcpStream::connect(
        &mut n.a,
        n.now,
        SocketAddrV4::new(B, 80),
        tcp::Config::default(),
    )
    .unwrap();
    assert_eq!(c.readiness(&n.a), NONE, "handshake running");
    n.settle();
    assert!(l.readiness(&mut n.b).readable, "a connection waits");
    let (s, _) = l.accept(&mut n.b).unwrap();
    assert!(!l.readiness(&mut n.b).readable, "accept queue drained");
    assert_eq!(c.readiness(&n.a), WRITE, "established, nothing to read");
    s.write(&mut n.b, b"hi").unwrap();
    n.settle();
    assert_eq!(c.readiness(&n.a), BOTH, "bytes to read");
    let mut buf = [0u8; 8];
    assert_eq!(c.read(&mut n.a, &mut buf).unwrap(), 2);
    assert_eq!(c.readiness(&n.a), WRITE, "read everything");
    // A full send buffer is not writable.
    let big = vec![0u8; 1 << 20];
    while c.write(&mut n.a, &big).is_ok() {}
    assert!(!c.readiness(&n.a).writable, "send buffer full");
    // The peer's FIN: readable (end of stream) until we read it, and after.
    s.shutdown_write(&mut n.b).unwrap();
    n.settle();
    assert!(c.readiness(&n.a).readable, "end of stream is readable");
    // A stale handle reports everything ready, so a waiter runs and sees the error.
    s.abort(&mut n.b).unwrap();
    assert_eq!(s.readiness(&n.b), BOTH);
}

#[test]
fn udp_readiness() {
    let mut n = net();
    let ua = UdpSocket::bind(&mut n.a, SocketAddrV4::new(A, 0)).unwrap();
    let ub = UdpSocket::bind(&mut n.b, SocketAddrV4::new(B, 53)).unwrap();
    assert_eq!(ub.readiness(&n.b), WRITE, "empty queues");
    ua.send_to(&mut n.a, b"q", SocketAddrV4::new(B, 53))
        .unwrap();
    n.settle();
    assert_eq!(ub.readiness(&n.b), BOTH, "a datagram waits");
    let mut buf = [0u8; 4];
    ub.recv_from(&mut n.b, &mut buf).unwrap();
    assert_eq!(ub.readiness(&n.b), WRITE);
    ub.close(&mut n.b);
    assert_eq!(ub.readiness(&n.b), BOTH, "closed: any call reports it");
}

/// A writer blocked on a full send buffer is told "writable" only once the free space is at
/// least half of what is still queued (Linux `sk_stream_is_writeable`), not for every ACK
/// that frees a few bytes: each wake-up then has a third of the buffer to fill.
#[test]
fn writable_again_only_with_a_third_of_the_buffer_free() {
    let mut n = net();
    let l = TcpListener::bind(
        &mut n.b,
        SocketAddrV4::new(B, 80),
        4,
        tcp::Config::default(),
    )
    .unwrap();
    // A fixed send buffer (SO_SNDBUF): an auto-tuned one may grow on an ACK, which makes
    // the socket writable by growth, not by the space the ACKs free that this test watches.
    let c = TcpStream::connect(
        &mut n.a,
        n.now,
        SocketAddrV4::new(B, 80),
        tcp::Config {
            send_buffer: 256 << 10,
            ..tcp::Config::default()
        },
    )
    .unwrap();
    n.settle();
    let (s, _) = l.accept(&mut n.b).unwrap();
    let big = vec![7u8; 1 << 20];
    // Fill both the peer's receive buffer and our send buffer.
    for _ in 0..64 {
        while c.write(&mut n.a, &big).is_ok() {}
        n.settle();
    }
    assert!(!c.readiness(&n.a).writable, "send buffer full");
    let (mut held_back, mut woke) = (0, false);
    let mut buf = vec![0u8; 4096];
    for _ in 0..100_000 {
        let _ = s.read(&mut n.b, &mut buf);
        n.settle();
        let space = n.a.tcp().send_space(c.handle()).unwrap();
        let queued = n.a.tcp().send_queue(c.handle()).unwrap();
        let writable = c.readiness(&n.a).writable;
        assert_eq!(
            writable,
            space > 0 && space >= queued / 2,
            "space {space} queued {queued}"
        );
        if space > 0 && !writable {
            held_back += 1;
        }
        if writable {
            woke = true;
            break;
        }
    }
    assert!(
        held_back > 0,
        "some ACKs freed space without waking the writer"
    );
    assert!(
        woke,
        "the writer is woken once a third of the buffer is free"
    );
}
