//! The socket API over two stacks joined by the in-memory pipe, in virtual time.

use netfold::iface::{Stack, StackConfig};
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp::{self, State};
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::EthernetAddress;
use netfold::wire::Ipv4Addr;
use std::io::ErrorKind;
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

struct Net {
    a: Stack,
    b: Stack,
    ea: PipeEnd,
    eb: PipeEnd,
    now: Instant,
}

fn cfg(addr: Ipv4Addr, last: u8) -> StackConfig {
    StackConfig {
        addr,
        prefix_len: 24,
        mac: EthernetAddress([2, 0, 0, 0, 0, last]),
        tcp_secret: [last; 16],
        ..StackConfig::default()
    }
}

impl Net {
    fn new() -> Net {
        let (ea, eb) = Pipe::new(PipeConfig::default());
        Net {
            a: Stack::new(cfg(A, 1)),
            b: Stack::new(cfg(B, 2)),
            ea,
            eb,
            now: Instant::ZERO,
        }
    }

    /// Polls both stacks until neither has work, advancing virtual time 1 ms per round.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            let x = self.a.poll(self.now, &mut self.ea);
            let y = self.b.poll(self.now, &mut self.eb);
            if !x && !y {
                return;
            }
            self.now += Duration::from_micros(100);
        }
    }

    /// Advances virtual time by `d` in 1 ms steps, polling.
    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.settle();
            self.now += Duration::from_millis(1);
        }
    }
}

fn tcfg() -> tcp::Config {
    tcp::Config {
        time_wait: Duration::from_secs(1),
        ..tcp::Config::default()
    }
}

#[test]
fn data_then_close_in_both_directions_reaches_eof_on_each_side() {
    let mut n = Net::new();
    let l = TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 80), 4, tcfg()).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 80), tcfg()).unwrap();
    n.settle();
    assert!(c.is_connected(&mut n.a).unwrap());
    let (s, peer) = l.accept(&mut n.b).unwrap();
    assert_eq!(*peer.ip(), A);

    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    let mut off = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 8192];
    while got.len() < data.len() {
        if off < data.len() {
            match c.write(&mut n.a, &data[off..]) {
                Ok(k) => off += k,
                Err(e) => assert_eq!(e.kind(), ErrorKind::WouldBlock),
            }
        }
        n.settle();
        loop {
            match s.read(&mut n.b, &mut buf) {
                Ok(0) => panic!("early EOF"),
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert_eq!(got, data);

    // Client half-closes; the server sees EOF, then closes; the client then sees EOF too.
    c.shutdown_write(&mut n.a).unwrap();
    n.settle();
    assert_eq!(s.read(&mut n.b, &mut buf).unwrap(), 0);
    s.close(&mut n.b).unwrap();
    n.settle();
    assert_eq!(
        c.read(&mut n.a, &mut buf).unwrap(),
        0,
        "client must see the server's FIN as EOF"
    );
    assert_eq!(c.state(&n.a).unwrap(), State::TimeWait);
    c.close(&mut n.a).unwrap();
    n.run_for(Duration::from_millis(1500));
    assert!(
        c.state(&n.a).is_err(),
        "closed handle is released after TIME_WAIT"
    );
}

#[test]
fn connect_to_a_closed_port_is_refused() {
    let mut n = Net::new();
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 81), tcfg()).unwrap();
    n.settle();
    let e = c.is_connected(&mut n.a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
}
