//! TCP Fast Open, server side (RFC 7413), on a `TcpLayer` driven segment by segment: cookies,
//! SYN data taken before the handshake completes, the Fast Open queue and its fallback, the
//! layer's switch, and option bytes of every shape (typed results, never a panic).

use netfold::tcp::fastopen::{self, FastOpenKey};
use netfold::tcp::{Config, Error, Handle, OutSegment, RxSegment, Secret, State, TcpLayer};
use netfold::time::Instant;
use netfold::wire::tcp::{FastOpenCookie, FastOpenOption, TcpFlags, TcpOptions, TcpRepr};
use netfold::wire::Ipv4Addr;
use std::net::{IpAddr, SocketAddrV4};

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 80;

struct Server {
    now: Instant,
    tcp: TcpLayer,
    listener: Handle,
}

impl Server {
    fn new(fastopen_queue: usize) -> Server {
        let mut tcp = TcpLayer::new(Secret::fixed_for_tests([3; 16]));
        let config = Config {
            fastopen_queue,
            ..Config::default()
        };
        let listener = tcp
            .listen(SocketAddrV4::new(SERVER, PORT), 256, config)
            .unwrap();
        Server {
            now: Instant::from_secs(10),
            tcp,
            listener,
        }
    }

    fn input(&mut self, repr: &TcpRepr, payload: &[u8]) {
        self.tcp
            .input(self.now, RxSegment::new(CLIENT, SERVER, repr, &[payload]));
    }

    /// Everything the server sends now: (header, payload length).
    fn output(&mut self) -> Vec<(TcpRepr, usize)> {
        let mut out = Vec::new();
        self.tcp.output(self.now, &mut |s: &OutSegment<'_>| {
            out.push((s.repr, s.payload.len()));
            true
        });
        out
    }

    /// The one SYN-ACK the server answers a SYN with.
    fn synack(&mut self) -> TcpRepr {
        let out = self.output();
        assert_eq!(out.len(), 1, "{out:?}");
        let (r, len) = out[0];
        assert!(r.flags.syn() && r.flags.ack(), "{r:?}");
        assert_eq!(len, 0);
        r
    }
}

fn syn(port: u16, seq: u32, fo: Option<FastOpenOption>) -> TcpRepr {
    TcpRepr {
        src_port: port,
        dst_port: PORT,
        seq,
        flags: TcpFlags(TcpFlags::SYN),
        window: 65535,
        options: TcpOptions {
            mss: Some(1460),
            sack_permitted: true,
            fast_open: fo,
            ..TcpOptions::default()
        },
        ..TcpRepr::default()
    }
}

fn ack(port: u16, seq: u32, ack: u32) -> TcpRepr {
    TcpRepr {
        src_port: port,
        dst_port: PORT,
        seq,
        ack,
        flags: TcpFlags(TcpFlags::ACK),
        window: 65535,
        ..TcpRepr::default()
    }
}

fn with_cookie(cookie: FastOpenCookie) -> Option<FastOpenOption> {
    Some(FastOpenOption {
        cookie,
        experimental: false,
    })
}

fn request() -> Option<FastOpenOption> {
    with_cookie(FastOpenCookie::REQUEST)
}

/// The cookie the server gives this client, asked for on `port`, the handshake left open.
fn cookie_from(s: &mut Server, port: u16) -> FastOpenCookie {
    s.input(&syn(port, 5000, request()), &[]);
    let r = s.synack();
    assert_eq!(r.ack, 5001);
    r.options.fast_open.expect("cookie in the SYN-ACK").cookie
}

const DATA: &[u8] = b"GET / HTTP/1.0\r\n\r\n";

#[test]
fn a_requested_cookie_opens_the_next_connection_with_its_data() {
    let mut s = Server::new(4);
    let cookie = cookie_from(&mut s, 40000);
    assert_eq!(cookie.as_bytes().len(), fastopen::COOKIE_LEN);
    // Made under the key derived from the stack secret; the layer checks against the same.
    s.input(&syn(40001, 9000, with_cookie(cookie)), DATA);
    let r = s.synack();
    // RFC 7413 §4.2.2: the SYN-ACK acknowledges the data; no cookie (the client has it).
    assert_eq!(r.ack, 9001 + DATA.len() as u32);
    assert_eq!(r.options.fast_open, None);
    // In the accept queue before the handshake's last ACK, with the data readable.
    let c = s.tcp.accept(s.listener).unwrap();
    assert_eq!(s.tcp.state(c).unwrap(), State::SynReceived);
    let mut buf = [0u8; 64];
    assert_eq!(s.tcp.recv(c, &mut buf).unwrap(), DATA.len());
    assert_eq!(&buf[..DATA.len()], DATA);
    assert!(s.tcp.tcp_info(c, s.now).unwrap().options & netfold::tcp::info::options::SYN_DATA != 0);
    // The last ACK completes it; no second accept of the same connection.
    s.input(&ack(40001, r.ack, r.seq.wrapping_add(1)), &[]);
    assert_eq!(s.tcp.state(c).unwrap(), State::Established);
    assert_eq!(s.tcp.accept(s.listener), Err(Error::WouldBlock));
    let st = s.tcp.stats();
    assert_eq!(
        (
            st.fastopen_cookie_reqd,
            st.fastopen_passive,
            st.fastopen_passive_fail
        ),
        (1, 1, 0)
    );
    // The cookie is the client address's, not a bearer token: from another address it fails.
    s.tcp.input(
        s.now,
        RxSegment::new(
            Ipv4Addr::new(198, 18, 0, 3),
            SERVER,
            &syn(40002, 1, with_cookie(cookie)),
            &[DATA],
        ),
    );
    let r = s.synack();
    assert_eq!(r.ack, 2, "data of an invalid cookie is not acknowledged");
    assert_eq!(s.tcp.stats().fastopen_passive_fail, 1);
}

#[test]
fn an_invalid_cookie_gets_the_handshake_and_the_valid_cookie() {
    let mut s = Server::new(4);
    let key = FastOpenKey::from_sysctl("a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4").unwrap();
    s.tcp.set_fastopen_key(key);
    let valid = key.cookie(IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    for (port, bad) in [
        (41000u16, &[0u8; 8][..]),
        (41001, &valid.as_bytes()[..4]),
        (41002, &[0xab; 16][..]),
    ] {
        let bad = FastOpenCookie::new(bad).unwrap();
        s.input(&syn(port, 100, with_cookie(bad)), DATA);
        let r = s.synack();
        assert_eq!(r.ack, 101, "data discarded (RFC 7413 §4.2.2)");
        assert_eq!(r.options.fast_open.map(|f| f.cookie), Some(valid));
        assert_eq!(s.tcp.accept(s.listener), Err(Error::WouldBlock));
    }
    assert_eq!(s.tcp.stats().fastopen_passive_fail, 3);
    // The valid one, in the experimental form, is answered in that form when asked for.
    s.input(
        &syn(
            41003,
            100,
            Some(FastOpenOption {
                cookie: FastOpenCookie::REQUEST,
                experimental: true,
            }),
        ),
        &[],
    );
    let fo = s.synack().options.fast_open.unwrap();
    assert!(fo.experimental);
    assert_eq!(fo.cookie, valid);
    // A listener's own key wins over the layer's.
    let own = FastOpenKey::from_bytes(&[7; 16]).unwrap();
    s.tcp
        .set_listener_fastopen_key(s.listener, Some(own))
        .unwrap();
    let c = cookie_from(&mut s, 41004);
    assert_eq!(c, own.cookie(IpAddr::V4(CLIENT), IpAddr::V4(SERVER)));
    assert_ne!(c, valid);
}

#[test]
fn a_full_fastopen_queue_falls_back_until_a_handshake_completes() {
    let mut s = Server::new(1);
    let cookie = cookie_from(&mut s, 42000);
    s.input(&syn(42001, 0, with_cookie(cookie)), DATA);
    let first = s.synack();
    assert_eq!(first.ack, 1 + DATA.len() as u32);
    // RFC 7413 §5.1: one pending Fast Open connection is the limit; the next valid Fast Open
    // SYN gets the normal handshake, its data unacknowledged and no cookie (Linux checks the
    // queue first).
    s.input(&syn(42002, 0, with_cookie(cookie)), DATA);
    let r = s.synack();
    assert_eq!(r.ack, 1);
    assert_eq!(r.options.fast_open, None);
    assert_eq!(s.tcp.stats().fastopen_listen_overflow, 1);
    // The first completes its handshake: room again.
    s.input(&ack(42001, first.ack, first.seq.wrapping_add(1)), &[]);
    s.input(&syn(42003, 0, with_cookie(cookie)), DATA);
    assert_eq!(s.synack().ack, 1 + DATA.len() as u32);
    assert_eq!(s.tcp.stats().fastopen_passive, 2);
    // A pending Fast Open connection that is reset also stops counting once it is freed.
    let a = s.tcp.accept(s.listener).unwrap();
    let b = s.tcp.accept(s.listener).unwrap();
    assert_eq!(s.tcp.state(b).unwrap(), State::SynReceived);
    s.tcp.abort(b).unwrap();
    let _ = s.output();
    s.input(&syn(42004, 0, with_cookie(cookie)), DATA);
    assert_eq!(s.synack().ack, 1 + DATA.len() as u32);
    assert_eq!(s.tcp.state(a).unwrap(), State::Established);
}

#[test]
fn a_reset_fastopen_connection_keeps_its_data_then_reports_the_reset() {
    let mut s = Server::new(2);
    let cookie = cookie_from(&mut s, 43000);
    s.input(&syn(43001, 0, with_cookie(cookie)), DATA);
    let r = s.synack();
    let mut rst = ack(43001, r.ack, r.seq.wrapping_add(1));
    rst.flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
    s.input(&rst, &[]);
    // Linux: still accepted, the data read, then ECONNRESET.
    let c = s.tcp.accept(s.listener).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(s.tcp.recv(c, &mut buf).unwrap(), DATA.len());
    assert_eq!(s.tcp.recv(c, &mut buf), Err(Error::ConnectionReset));
}

#[test]
fn the_layer_switch_follows_linux_bits() {
    // Server bit off: a queue alone does nothing.
    let mut s = Server::new(4);
    s.tcp.set_fastopen(fastopen::CLIENT_ENABLE);
    s.input(&syn(44000, 0, request()), &[]);
    assert_eq!(s.synack().options.fast_open, None);
    // No queue on the listener: no Fast Open with the default bits...
    let mut s = Server::new(0);
    assert_eq!(s.tcp.fastopen(), fastopen::DEFAULT_FLAGS);
    s.input(&syn(44001, 0, request()), &[]);
    assert_eq!(s.synack().options.fast_open, None);
    // ...but with SERVER_WO_SOCKOPT every listener takes it, its backlog as the queue.
    s.tcp
        .set_fastopen(fastopen::SERVER_ENABLE | fastopen::SERVER_WO_SOCKOPT);
    let cookie = cookie_from(&mut s, 44002);
    s.input(&syn(44003, 0, with_cookie(cookie)), DATA);
    assert_eq!(s.synack().ack, 1 + DATA.len() as u32);
    // SERVER_COOKIE_NOT_REQD: data without any option is taken.
    let mut s = Server::new(4);
    s.tcp
        .set_fastopen(fastopen::SERVER_ENABLE | fastopen::SERVER_COOKIE_NOT_REQD);
    s.input(&syn(44004, 0, None), DATA);
    assert_eq!(s.synack().ack, 1 + DATA.len() as u32);
    assert!(s.tcp.accept(s.listener).is_ok());
    // A SYN with neither option nor data is an ordinary SYN, not a Fast Open one.
    let mut s = Server::new(4);
    s.input(&syn(44005, 0, None), &[]);
    assert_eq!(s.synack().options.fast_open, None);
    assert_eq!(s.tcp.accept(s.listener), Err(Error::WouldBlock));
    assert_eq!(s.tcp.stats().fastopen_passive, 0);
}

/// The option area with one Fast Open option of `data` after kind and length.
fn parse_one(kind: u8, data: &[u8]) -> Result<TcpOptions, netfold::wire::Error> {
    let mut o = vec![kind, (2 + data.len()) as u8];
    o.extend_from_slice(data);
    while o.len() % 4 != 0 {
        o.push(1);
    }
    TcpOptions::parse(&o)
}

#[test]
fn option_bytes_of_any_shape_parse_without_panic() {
    // Both forms round-trip, with Linux's layout (NOP NOP after a 10-byte option).
    for exp in [false, true] {
        for cookie in [&[][..], &[1, 2, 3, 4][..], &[9; 8][..], &[5; 16][..]] {
            let fo = FastOpenOption {
                cookie: FastOpenCookie::new(cookie).unwrap(),
                experimental: exp,
            };
            let o = TcpOptions {
                mss: Some(1460),
                fast_open: Some(fo),
                ..TcpOptions::default()
            };
            let mut buf = [0u8; 40];
            let n = o.emit(&mut buf).unwrap();
            assert_eq!(n % 4, 0);
            assert_eq!(n, o.emitted_len());
            assert_eq!(TcpOptions::parse(&buf[..n]).unwrap(), o);
        }
    }
    let kind34 = |d: &[u8]| parse_one(34, d).unwrap().fast_open;
    // Lengths no cookie has (odd, 2, over 16) are ignored, not errors (Linux ignores them).
    for bad in [&[1u8][..], &[1, 2], &[1, 2, 3], &[1, 2, 3, 4, 5], &[7; 18]] {
        assert_eq!(kind34(bad), None, "{bad:?}");
    }
    assert!(kind34(&[]).unwrap().cookie.is_request());
    // Kind 254 is Fast Open only with its ExID.
    assert!(
        parse_one(254, &[0xf9, 0x89])
            .unwrap()
            .fast_open
            .unwrap()
            .experimental
    );
    assert_eq!(
        parse_one(254, &[0x12, 0x34, 1, 2, 3, 4]).unwrap().fast_open,
        None
    );
    assert_eq!(parse_one(254, &[0xf9]).unwrap().fast_open, None);
    // Every byte string up to 40 bytes: a typed result, never a panic.
    let mut x = 0x1234_5678u32;
    for len in 0..=40usize {
        for _ in 0..500 {
            let mut b = vec![0u8; len];
            for v in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                // Bias towards the Fast Open kinds and short lengths.
                *v = match x % 7 {
                    0 => 34,
                    1 => 254,
                    2 => (x >> 8) as u8 % 20,
                    _ => (x >> 16) as u8,
                };
            }
            if let Ok(o) = TcpOptions::parse(&b) {
                if let Some(fo) = o.fast_open {
                    let n = fo.cookie.as_bytes().len();
                    assert!(n == 0 || ((4..=16).contains(&n) && n % 2 == 0));
                }
            }
        }
    }
}

#[test]
fn garbage_cookies_on_syns_never_make_connections() {
    let mut s = Server::new(64);
    let mut x = 99u32;
    for port in 0..200u16 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let len = [4usize, 6, 8, 10, 16][(x % 5) as usize];
        let bytes: Vec<u8> = (0..len).map(|i| (x >> (i % 24)) as u8).collect();
        s.input(
            &syn(
                50000 + port,
                x,
                with_cookie(FastOpenCookie::new(&bytes).unwrap()),
            ),
            DATA,
        );
        let r = s.synack();
        assert_eq!(r.ack, x.wrapping_add(1));
    }
    assert_eq!(s.tcp.accept(s.listener), Err(Error::WouldBlock));
    assert_eq!(s.tcp.stats().fastopen_passive, 0);
    assert_eq!(s.tcp.stats().fastopen_passive_fail, 200);
}

#[test]
fn ipv6_fastopen_uses_the_128_bit_addresses() {
    use std::net::{Ipv6Addr, SocketAddrV6};
    let (srv, cli) = (
        "2001:2::1".parse::<Ipv6Addr>().unwrap(),
        "2001:2::2".parse::<Ipv6Addr>().unwrap(),
    );
    let mut tcp = TcpLayer::new(Secret::fixed_for_tests([4; 16]));
    let key = FastOpenKey::from_bytes(&[5; 16]).unwrap();
    tcp.set_fastopen_key(key);
    let config = Config {
        fastopen_queue: 2,
        ..Config::default()
    };
    let l = tcp
        .listen(SocketAddrV6::new(srv, PORT, 0, 0), 16, config)
        .unwrap();
    let now = Instant::from_secs(1);
    let cookie = key.cookie(IpAddr::V6(cli), IpAddr::V6(srv));
    // The IPv4 cookie of the same key is another one.
    assert_ne!(cookie, key.cookie(IpAddr::V4(CLIENT), IpAddr::V4(SERVER)));
    tcp.input(
        now,
        RxSegment::new(cli, srv, &syn(45000, 7, with_cookie(cookie)), &[DATA]),
    );
    let mut acks = Vec::new();
    tcp.output(now, &mut |s: &OutSegment<'_>| {
        acks.push(s.repr.ack);
        true
    });
    assert_eq!(acks, [8 + DATA.len() as u32]);
    let c = tcp.accept(l).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(tcp.recv(c, &mut buf).unwrap(), DATA.len());
}

/// Client and server layers joined by a lossless, zero-latency link; every segment seen is
/// recorded as (from client, header, payload length).
struct Pair {
    now: Instant,
    client: TcpLayer,
    server: TcpLayer,
    seen: Vec<(bool, TcpRepr, usize)>,
}

impl Pair {
    fn new(server_queue: usize) -> (Pair, Handle) {
        let mut server = TcpLayer::new(Secret::fixed_for_tests([6; 16]));
        let config = Config {
            fastopen_queue: server_queue,
            ..Config::default()
        };
        let l = server
            .listen(SocketAddrV4::new(SERVER, PORT), 16, config)
            .unwrap();
        let p = Pair {
            now: Instant::from_secs(1),
            client: TcpLayer::new(Secret::fixed_for_tests([7; 16])),
            server,
            seen: Vec::new(),
        };
        (p, l)
    }

    fn pump(&mut self) {
        for _ in 0..20 {
            let mut moved = false;
            for from_client in [true, false] {
                let mut out = Vec::new();
                let (a, b) = if from_client {
                    (&mut self.client, &mut self.server)
                } else {
                    (&mut self.server, &mut self.client)
                };
                a.output(self.now, &mut |s: &OutSegment<'_>| {
                    out.push((s.src, s.dst, s.repr, s.payload.to_vec()));
                    true
                });
                for (src, dst, r, pl) in out {
                    self.seen.push((from_client, r, pl.len()));
                    b.input(self.now, RxSegment::new(src, dst, &r, &[&pl]));
                    moved = true;
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn connect(&mut self, data: &[u8]) -> (Handle, usize) {
        self.seen.clear();
        self.client
            .connect_fastopen(
                self.now,
                SocketAddrV4::new(CLIENT, 0),
                SocketAddrV4::new(SERVER, PORT),
                Config::default(),
                data,
            )
            .unwrap()
    }

    fn first_syn(&self) -> (TcpRepr, usize) {
        let (from_client, r, len) = self.seen[0];
        assert!(from_client && r.flags.syn() && !r.flags.ack());
        (r, len)
    }
}

#[test]
fn a_client_asks_for_a_cookie_then_sends_data_in_its_syn() {
    let (mut p, l) = Pair::new(4);
    // No cookie yet: the SYN asks for one and takes no data (Linux: EINPROGRESS, 0 bytes).
    let (c1, n) = p.connect(DATA);
    assert_eq!(n, 0);
    p.pump();
    let (syn1, len) = p.first_syn();
    assert_eq!(len, 0);
    assert!(syn1.options.fast_open.unwrap().cookie.is_request());
    assert_eq!(p.client.state(c1).unwrap(), State::Established);
    let s1 = p.server.accept(l).unwrap();
    let _ = (c1, s1);
    // The cached cookie opens the next connection with data in the SYN.
    let (c2, n) = p.connect(DATA);
    assert_eq!(n, DATA.len());
    p.pump();
    let (syn2, len) = p.first_syn();
    assert_eq!(len, DATA.len());
    assert_eq!(syn2.options.fast_open.unwrap().cookie.as_bytes().len(), 8);
    // The server took it (one SYN-ACK acknowledging the data, nothing sent again).
    assert_eq!(p.server.stats().fastopen_passive, 1);
    let synack = p
        .seen
        .iter()
        .find(|(fc, r, _)| !fc && r.flags.syn())
        .unwrap()
        .1;
    assert_eq!(synack.ack, syn2.seq.wrapping_add(1 + DATA.len() as u32));
    assert_eq!(
        p.seen.iter().filter(|(fc, _, len)| *fc && *len > 0).count(),
        1
    );
    let s2 = p.server.accept(l).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(p.server.recv(s2, &mut buf).unwrap(), DATA.len());
    assert_eq!(&buf[..DATA.len()], DATA);
    let info = p.client.tcp_info(c2, p.now).unwrap();
    assert!(info.options & netfold::tcp::info::options::SYN_DATA != 0);
    assert_eq!(
        p.client.send_queue(c2).unwrap(),
        0,
        "the SYN's data is acknowledged"
    );
}

#[test]
fn syn_data_the_server_does_not_take_is_sent_again_after_the_handshake() {
    let (mut p, l) = Pair::new(4);
    let (_c, _) = p.connect(b"");
    p.pump();
    let _ = p.server.accept(l).unwrap();
    // The server stops taking Fast Open: the SYN-ACK acknowledges only the SYN.
    p.server.set_fastopen(fastopen::CLIENT_ENABLE);
    let (c, n) = p.connect(DATA);
    assert_eq!(n, DATA.len());
    p.pump();
    let (syn, len) = p.first_syn();
    assert_eq!(len, DATA.len());
    let synack = p
        .seen
        .iter()
        .find(|(fc, r, _)| !fc && r.flags.syn())
        .unwrap()
        .1;
    assert_eq!(synack.ack, syn.seq.wrapping_add(1));
    // RFC 7413 §4.1.3: the data goes again right after the handshake, and arrives once.
    let again = p
        .seen
        .iter()
        .filter(|(fc, r, len)| *fc && !r.flags.syn() && *len == DATA.len())
        .count();
    assert_eq!(again, 1);
    let s = p.server.accept(l).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(p.server.recv(s, &mut buf).unwrap(), DATA.len());
    assert_eq!(&buf[..DATA.len()], DATA);
    assert_eq!(p.client.send_queue(c).unwrap(), 0);
    let info = p.client.tcp_info(c, p.now).unwrap();
    assert_eq!(info.options & netfold::tcp::info::options::SYN_DATA, 0);
}

#[test]
fn a_client_with_fastopen_off_connects_plainly() {
    let (mut p, _l) = Pair::new(4);
    p.client.set_fastopen(fastopen::SERVER_ENABLE);
    let (c, n) = p.connect(DATA);
    assert_eq!(n, 0);
    p.pump();
    assert_eq!(p.first_syn().0.options.fast_open, None);
    assert_eq!(p.client.state(c).unwrap(), State::Established);
}

#[test]
fn the_servers_mss_cached_with_its_cookie_bounds_the_syn_data() {
    let mut server = TcpLayer::new(Secret::fixed_for_tests([8; 16]));
    let config = Config {
        fastopen_queue: 4,
        mss: 1000,
        ..Config::default()
    };
    let l = server
        .listen(SocketAddrV4::new(SERVER, PORT), 16, config)
        .unwrap();
    let mut p = Pair {
        now: Instant::from_secs(1),
        client: TcpLayer::new(Secret::fixed_for_tests([9; 16])),
        server,
        seen: Vec::new(),
    };
    let big = [0x5au8; 1400];
    let (_, n) = p.connect(&big);
    assert_eq!(n, 0);
    p.pump();
    let _ = p.server.accept(l).unwrap();
    assert!(p.client.fastopen_cookie_cached(IpAddr::V4(SERVER)));
    // RFC 7413 §4.1.3: the SYN's data fits the server's MSS (1000) less 40 bytes of options.
    let (c, n) = p.connect(&big);
    assert_eq!(n, 960);
    p.pump();
    assert_eq!(p.first_syn().1, 960);
    let s = p.server.accept(l).unwrap();
    let mut buf = [0u8; 2000];
    assert_eq!(p.server.recv(s, &mut buf).unwrap(), 960);
    assert_eq!(p.client.send_queue(c).unwrap(), 0);
}

/// RFC 8201 / RFC 4443 §3.2 with Linux `tcp_v6_mtu_reduced` -> `tcp_simple_retransmit`: a
/// Packet Too Big for a Fast Open SYN that carries data makes the SYN go again at once,
/// without the data and announcing the path's MSS (MTU - 60); the data follows the
/// handshake in segments of that size. (The IPv6 twin of the IPv4 packetdrill script
/// `tfo-syn-data-frag-needed.pkt`.)
#[test]
fn ipv6_packet_too_big_for_syn_data_resends_the_syn_with_the_path_mss() {
    use netfold::tcp::IcmpError;
    use std::net::{Ipv6Addr, SocketAddrV6};
    let (srv, cli) = (
        "2001:2::1".parse::<Ipv6Addr>().unwrap(),
        "2001:2::2".parse::<Ipv6Addr>().unwrap(),
    );
    let mut tcp = TcpLayer::new(Secret::fixed_for_tests([10; 16]));
    let mut now = Instant::from_secs(1);
    let out = |tcp: &mut TcpLayer, now: Instant| {
        let mut v = Vec::new();
        tcp.output(now, &mut |s: &OutSegment<'_>| {
            v.push((s.repr, s.payload.len()));
            true
        });
        v
    };
    let synack = |dst_port: u16, ack: u32, fo: Option<FastOpenOption>| TcpRepr {
        src_port: PORT,
        dst_port,
        seq: 9000,
        ack,
        flags: TcpFlags(TcpFlags::SYN | TcpFlags::ACK),
        window: 65535,
        options: TcpOptions {
            mss: Some(1440),
            sack_permitted: true,
            fast_open: fo,
            ..TcpOptions::default()
        },
        ..TcpRepr::default()
    };
    // A cookie request, answered with a cookie.
    let cookie = FastOpenCookie::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let (_, n) = tcp
        .connect_fastopen(
            now,
            SocketAddrV6::new(cli, 0, 0, 0),
            SocketAddrV6::new(srv, PORT, 0, 0),
            Config::default(),
            DATA,
        )
        .unwrap();
    assert_eq!(n, 0);
    let s = out(&mut tcp, now);
    let (syn1, _) = s[0];
    tcp.input(
        now,
        RxSegment::new(
            srv,
            cli,
            &synack(syn1.src_port, syn1.seq.wrapping_add(1), with_cookie(cookie)),
            &[],
        ),
    );
    let _ = out(&mut tcp, now);
    assert!(tcp.fastopen_cookie_cached(IpAddr::V6(srv)));
    // The next SYN carries 1400 bytes (the server's 1440 less 40).
    now += netfold::time::Duration::from_millis(10);
    let big = [0x33u8; 3000];
    let (h, n) = tcp
        .connect_fastopen(
            now,
            SocketAddrV6::new(cli, 0, 0, 0),
            SocketAddrV6::new(srv, PORT, 0, 0),
            Config::default(),
            &big,
        )
        .unwrap();
    assert_eq!(n, 1400);
    let s = out(&mut tcp, now);
    let (syn2, len) = s[0];
    assert_eq!(len, 1400);
    let local = SocketAddrV6::new(cli, syn2.src_port, 0, 0);
    let remote = SocketAddrV6::new(srv, PORT, 0, 0);
    assert!(tcp.icmp_error_quoting(
        now,
        local,
        remote,
        syn2.seq,
        IcmpError::FragNeeded { mtu: 1400 }
    ));
    let s = out(&mut tcp, now);
    assert_eq!(s.len(), 1, "{s:?}");
    let (again, len) = s[0];
    assert!(again.flags.syn() && !again.flags.ack());
    assert_eq!((again.seq, len), (syn2.seq, 0));
    assert_eq!(again.options.mss, Some(1340));
    assert!(again.options.fast_open.is_none());
    // The SYN-ACK acknowledges only the SYN: the data goes in segments of the path's MSS.
    now += netfold::time::Duration::from_millis(10);
    tcp.input(
        now,
        RxSegment::new(
            srv,
            cli,
            &synack(syn2.src_port, syn2.seq.wrapping_add(1), None),
            &[],
        ),
    );
    assert_eq!(tcp.state(h).unwrap(), State::Established);
    let s = out(&mut tcp, now);
    let data: Vec<usize> = s.iter().map(|&(_, l)| l).filter(|&l| l > 0).collect();
    assert!(!data.is_empty(), "{s:?}");
    assert!(
        data[0] == 1340 && data.iter().all(|&l| l <= 1340),
        "{data:?}"
    );
    assert_eq!(s[0].0.seq, syn2.seq.wrapping_add(1));
}
