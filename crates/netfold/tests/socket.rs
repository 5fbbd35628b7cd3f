//! The socket API over two stacks joined by the in-memory pipe, in virtual time.

use netfold::phy::pipe::PipeConfig;
use netfold::phy::Device;
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp::{self, State};
use netfold::time::Duration;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net, Rng};
use std::io::ErrorKind;
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// Stacks A and B (the kit's `config`) joined by a pipe configured by `link`.
fn net(link: PipeConfig) -> Net {
    Net::pipe(config(A, 1), config(B, 2), link)
}

fn tcfg() -> tcp::Config {
    tcp::Config {
        time_wait: Duration::from_secs(1),
        ..tcp::Config::default()
    }
}

#[test]
fn data_then_close_in_both_directions_reaches_eof_on_each_side() {
    let mut n = net(PipeConfig::default());
    let l = TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 80), 4, tcfg()).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 80), tcfg()).unwrap();
    n.settle();
    assert!(c.is_connected(&mut n.a).unwrap());
    let (s, peer) = l.accept(&mut n.b).unwrap();
    assert_eq!(peer.ip(), A);

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
        n.skip_to_next_timer();
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
    let mut n = net(PipeConfig::default());
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 81), tcfg()).unwrap();
    n.settle();
    let e = c.is_connected(&mut n.a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
}

/// Moves `data` from `tx` to `rx` over the pipe in virtual time, jumping to the next timer when
/// both stacks are idle. Returns what arrived.
fn transfer(n: &mut Net, from_a: bool, data: &[u8]) -> Vec<u8> {
    let l = if from_a {
        TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 9000), 4, tcfg()).unwrap()
    } else {
        TcpListener::bind(&mut n.a, SocketAddrV4::new(A, 9000), 4, tcfg()).unwrap()
    };
    let (dst, srv_ip) = if from_a { (B, A) } else { (A, B) };
    let _ = srv_ip;
    let conn = if from_a {
        TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(dst, 9000), tcfg()).unwrap()
    } else {
        TcpStream::connect(&mut n.b, n.now, SocketAddrV4::new(dst, 9000), tcfg()).unwrap()
    };
    let mut acc = None;
    let mut off = 0;
    let mut fin = false;
    let mut got = Vec::with_capacity(data.len());
    let mut buf = vec![0u8; 65536];
    let deadline = n.now + Duration::from_secs(3600);
    loop {
        assert!(
            n.now < deadline,
            "transfer did not finish in an hour of virtual time"
        );
        let (snd, rcv) = if from_a {
            (&mut n.a, &mut n.b)
        } else {
            (&mut n.b, &mut n.a)
        };
        if acc.is_none() {
            if let Ok((s, _)) = l.accept(rcv) {
                acc = Some(s);
            }
        }
        if conn.is_connected(snd).unwrap() {
            while off < data.len() {
                match conn.write(snd, &data[off..]) {
                    Ok(k) => off += k,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("write: {e}"),
                }
            }
            if off == data.len() && !fin {
                conn.shutdown_write(snd).unwrap();
                fin = true;
            }
        }
        if let Some(s) = acc {
            loop {
                match s.read(rcv, &mut buf) {
                    Ok(0) => return got,
                    Ok(k) => got.extend_from_slice(&buf[..k]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
        }
        if !n.poll() {
            let next = [
                n.a.poll_at(n.now),
                n.b.poll_at(n.now),
                n.ea.poll_at(),
                n.eb.poll_at(),
            ]
            .into_iter()
            .flatten()
            .min();
            n.now = next
                .unwrap_or(n.now + Duration::from_millis(1))
                .max(n.now + Duration::from_micros(1));
        }
    }
}

fn impaired_net(seed: u64) -> Net {
    let cfgp = PipeConfig::default()
        .loss(0.01)
        .reorder(0.01)
        .duplicate(0.005)
        .corrupt(0.001)
        .seed(seed);
    net(cfgp)
}

fn pattern(len: usize, salt: u32) -> Vec<u8> {
    Rng::new(u64::from(salt)).bytes(len)
}

/// The impaired-link acceptance test: 64 MiB byte-exact in each direction through two full stacks
/// over a pipe with 1% loss, 1% reordering, 0.5% duplication and 0.1% corruption, for several
/// seeds.
#[test]
fn sixty_four_mib_each_way_through_an_impaired_pipe() {
    let data = pattern(
        std::env::var("NF_MIB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64usize)
            << 20,
        7,
    );
    for seed in [1u64, 2, 3] {
        let mut n = impaired_net(seed);
        let got = transfer(&mut n, true, &data);
        assert!(
            got == data,
            "seed {seed}: a->b stream differs (len {} vs {})",
            got.len(),
            data.len()
        );
        let got = transfer(&mut n, false, &data);
        assert!(
            got == data,
            "seed {seed}: b->a stream differs (len {} vs {})",
            got.len(),
            data.len()
        );
        let (ca, cb) = (n.a.counters(), n.b.counters());
        // The impairments really happened and were repaired, not avoided.
        assert!(
            ca.tcp.retransmits_fast
                + ca.tcp.retransmits_rto
                + cb.tcp.retransmits_fast
                + cb.tcp.retransmits_rto
                > 0
        );
        assert!(
            ca.tcp_bad_checksum + cb.tcp_bad_checksum + ca.ipv4_bad_checksum + cb.ipv4_bad_checksum
                > 0,
            "corruption was caught by checksums"
        );
        assert!(n.ea.stats().duplicated + n.eb.stats().duplicated > 0);
    }
}
