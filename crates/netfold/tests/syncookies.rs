//! SYN cookies (RFC 4987 §3.6) in virtual time: a listener whose SYN queue is flooded with
//! spoofed SYNs keeps accepting real clients, through cookies, with the options the cookie
//! carries; forged and stale cookie ACKs create nothing.

use netfold::tcp::syncookie::MSS_TABLE;
use netfold::tcp::{Config, Handle, OutSegment, RxSegment, Secret, State, Stats, TcpLayer};
use netfold::time::{Duration, Instant};
use netfold::wire::tcp::{TcpFlags, TcpRepr, Timestamps};
use netfold::wire::Ipv4Addr;
use std::collections::VecDeque;
use std::net::SocketAddrV4;

const IP_CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 80;
const LATENCY: Duration = Duration::from_millis(5);

struct Pkt {
    at: Instant,
    to_server: bool,
    src: std::net::IpAddr,
    dst: std::net::IpAddr,
    repr: TcpRepr,
    payload: Vec<u8>,
}

/// A real client and a server on a fixed-latency link; whatever the server sends to any other
/// address (the spoofed sources) is counted and lost.
struct Net {
    now: Instant,
    client: TcpLayer,
    server: TcpLayer,
    /// Constant latency: arrival order = send order.
    q: VecDeque<Pkt>,
    /// SYN-ACKs the server sent to spoofed addresses, and the first of the last output that
    /// sent any (cookie SYN-ACKs leave before those of half-open connections).
    spoofed_synacks: u64,
    first_spoofed: Option<(std::net::IpAddr, TcpRepr)>,
    /// Segments the server sent to spoofed addresses that were RSTs.
    spoofed_rsts: u64,
    /// Spoofed SYNs sent so far (each from a new source).
    flood_sent: u32,
}

impl Net {
    fn new() -> Self {
        Net {
            now: Instant::from_secs(1000),
            client: TcpLayer::new(Secret::fixed_for_tests([1; 16])),
            server: TcpLayer::new(Secret::fixed_for_tests([2; 16])),
            q: VecDeque::new(),
            spoofed_synacks: 0,
            first_spoofed: None,
            spoofed_rsts: 0,
            flood_sent: 0,
        }
    }

    /// `n` more spoofed SYNs, each from a distinct address in 198.19.0.0/16 (inside the
    /// benchmarking range) and port, some with Linux's options and some with none.
    fn flood(&mut self, n: u32) {
        for _ in 0..n {
            let i = self.flood_sent;
            self.flood_sent += 1;
            let src = Ipv4Addr::new(198, 19, (i >> 8) as u8, i as u8);
            let mut syn = TcpRepr {
                src_port: 1024 + (i % 60_000) as u16,
                dst_port: PORT,
                seq: i.wrapping_mul(2_654_435_761),
                flags: TcpFlags(TcpFlags::SYN),
                window: 64240,
                ..TcpRepr::default()
            };
            if i.is_multiple_of(2) {
                syn.options.mss = Some(1460);
                syn.options.window_scale = Some(7);
                syn.options.sack_permitted = true;
                syn.options.timestamps = Some(Timestamps { tsval: i, tsecr: 0 });
            }
            self.server
                .input(self.now, RxSegment::new(src, IP_SERVER, &syn, &[&[]]));
            // The server's replies go out with every output; keep its reply queue drained
            // as a real device would.
            if i % 64 == 63 {
                self.emit(false);
            }
        }
    }

    fn emit(&mut self, from_client: bool) {
        let mut out: Vec<Pkt> = Vec::new();
        let at = self.now + LATENCY;
        let layer = if from_client {
            &mut self.client
        } else {
            &mut self.server
        };
        let (mut synacks, mut rsts, mut first) = (0, 0, None);
        layer.output(self.now, &mut |s: &OutSegment<'_>| {
            if s.dst == IP_CLIENT || s.dst == IP_SERVER {
                let payload = s.payload.to_vec();
                out.push(Pkt {
                    at,
                    to_server: from_client,
                    src: s.src,
                    dst: s.dst,
                    repr: s.repr,
                    payload,
                });
            } else if s.repr.flags.syn() {
                synacks += 1;
                first = first.or(Some((s.dst, s.repr)));
            } else if s.repr.flags.rst() {
                rsts += 1;
            }
            true
        });
        self.spoofed_synacks += synacks;
        self.spoofed_rsts += rsts;
        if first.is_some() {
            self.first_spoofed = first;
        }
        self.q.extend(out);
    }

    /// Both outputs, then every packet due; true if something was delivered.
    fn io(&mut self) -> bool {
        self.emit(true);
        self.emit(false);
        let mut delivered = false;
        while self.q.front().is_some_and(|p| p.at <= self.now) {
            let p = self.q.pop_front().unwrap();
            let layer = if p.to_server {
                &mut self.server
            } else {
                &mut self.client
            };
            layer.input(
                self.now,
                RxSegment::new(p.src, p.dst, &p.repr, &[&p.payload]),
            );
            delivered = true;
        }
        delivered
    }

    fn advance(&mut self) {
        let mut next = self.q.front().map(|p| p.at);
        for t in [self.client.poll_at(), self.server.poll_at()]
            .into_iter()
            .flatten()
        {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        let next = next.unwrap_or(self.now + Duration::from_secs(1));
        self.now = if next > self.now {
            next
        } else {
            self.now + Duration::from_micros(1)
        };
    }

    /// Runs until `cond` holds (false if `limit` passes first); `flood_per_step` spoofed SYNs
    /// arrive at every step.
    fn run_until(
        &mut self,
        limit: Duration,
        flood_per_step: u32,
        mut cond: impl FnMut(&mut Net) -> bool,
    ) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if cond(self) {
                return true;
            }
            self.flood(flood_per_step);
            if !self.io() {
                self.advance();
            }
        }
        cond(self)
    }
}

fn client_addr() -> SocketAddrV4 {
    SocketAddrV4::new(IP_CLIENT, 0)
}
fn server_addr() -> SocketAddrV4 {
    SocketAddrV4::new(IP_SERVER, PORT)
}

fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// Connects the client to a listener (backlog 1) whose SYN queue is already full; returns
/// (client, server, listener).
fn connect_through_cookie(net: &mut Net, client_cfg: Config, flood: u32) -> (Handle, Handle) {
    let l = net
        .server
        .listen(server_addr(), 1, Config::default())
        .unwrap();
    net.flood(flood);
    net.emit(false);
    let before = net.server.stats();
    let c = net
        .client
        .connect(net.now, client_addr(), server_addr(), client_cfg)
        .unwrap();
    let mut s = None;
    let ok = net.run_until(Duration::from_secs(5), 1, |n| {
        s = s.or(n.server.accept(l).ok());
        s.is_some() && n.client.state(c) == Ok(State::Established)
    });
    assert!(ok, "no connection within 5 s: {:?}", net.server.stats());
    let after = net.server.stats();
    assert_eq!(
        after.syncookies_recv - before.syncookies_recv,
        1,
        "the client came in through a cookie"
    );
    (c, s.unwrap())
}

/// Moves `total` bytes from `tx` to `rx` and checks every byte; spoofed SYNs keep arriving.
fn transfer(net: &mut Net, client_sends: bool, tx: Handle, rx: Handle, total: u64) {
    let (mut sent, mut recvd) = (0u64, 0u64);
    let mut buf = vec![0u8; 64 * 1024];
    let end = net.now + Duration::from_secs(120);
    while recvd < total {
        assert!(net.now < end, "stalled at {recvd} of {total} bytes");
        let s = if client_sends {
            &mut net.client
        } else {
            &mut net.server
        };
        while sent < total {
            let n = ((total - sent) as usize)
                .min(buf.len())
                .min(s.send_space(tx).unwrap());
            if n == 0 {
                break;
            }
            for (k, b) in buf[..n].iter_mut().enumerate() {
                *b = pattern(sent + k as u64);
            }
            sent += s.send(tx, &buf[..n]).unwrap() as u64;
        }
        let r = if client_sends {
            &mut net.server
        } else {
            &mut net.client
        };
        while let Ok(n) = r.recv(rx, &mut buf) {
            assert!(n > 0, "early end of stream at {recvd}");
            for (k, &b) in buf[..n].iter().enumerate() {
                assert_eq!(b, pattern(recvd + k as u64), "byte {}", recvd + k as u64);
            }
            recvd += n as u64;
        }
        net.flood(1);
        if !net.io() {
            net.advance();
        }
    }
}

#[test]
fn flooded_listener_serves_a_real_client_through_cookies() {
    let mut net = Net::new();
    let (c, s) = connect_through_cookie(&mut net, Config::default(), 10_000);
    let st = net.server.stats();
    // One spoofed SYN took the only SYN-queue slot; every later one, and the client's, got
    // a cookie.
    assert_eq!(st.syncookies_sent, u64::from(net.flood_sent));
    assert_eq!(st.backlog_drops, 0);
    assert_eq!(st.rst_dropped, 0);
    assert!(net.spoofed_synacks >= 10_000 - 1, "{}", net.spoofed_synacks);
    // The cookie brought back the client's MSS, window scale, SACK and timestamps.
    let si = net.server.conn_info(s).unwrap();
    let ci = net.client.conn_info(c).unwrap();
    assert_eq!(si.mss, 1460);
    assert!(si.sack && si.timestamps && ci.sack && ci.timestamps);
    assert_eq!(
        (si.snd_wscale, si.rcv_wscale),
        (ci.rcv_wscale, ci.snd_wscale)
    );
    assert!(si.snd_wscale > 0);
    // 1 MiB each way, byte-exact, while spoofed SYNs keep coming.
    transfer(&mut net, true, c, s, 1 << 20);
    transfer(&mut net, false, s, c, 1 << 20);
    let st = net.server.stats();
    assert_eq!(st.syncookies_recv, 1);
    assert_eq!(st.syncookies_failed, 0);
    // Memory stays bounded: the listener, one half-open entry, the accepted connection.
    assert!(
        net.server.socket_count() <= 3,
        "{}",
        net.server.socket_count()
    );

    // A forged ACK (random sequence numbers) from a spoofed source: no connection, a RST.
    let sockets = net.server.socket_count();
    let rsts = net.spoofed_rsts;
    let forged = TcpRepr {
        src_port: 33333,
        dst_port: PORT,
        seq: 0x1234_5678,
        ack: 0x9abc_def0,
        flags: TcpFlags(TcpFlags::ACK),
        window: 1000,
        ..TcpRepr::default()
    };
    net.server.input(
        net.now,
        RxSegment::new(Ipv4Addr::new(198, 19, 200, 1), IP_SERVER, &forged, &[&[]]),
    );
    net.emit(false);
    assert_eq!(net.server.stats().syncookies_failed, 1);
    assert_eq!(net.server.stats().syncookies_recv, 1);
    assert_eq!(net.server.socket_count(), sockets);
    assert_eq!(net.spoofed_rsts, rsts + 1);
}

#[test]
fn without_timestamps_the_cookie_carries_only_the_mss() {
    let mut net = Net::new();
    let cfg = Config {
        timestamps: false,
        mss: 1400,
        ..Config::default()
    };
    let (c, s) = connect_through_cookie(&mut net, cfg, 100);
    let si = net.server.conn_info(s).unwrap();
    let ci = net.client.conn_info(c).unwrap();
    // 1400 rounds down to the table's 1300; no window scaling or SACK on either side.
    assert_eq!(si.mss, u32::from(MSS_TABLE[1]));
    assert!(!si.timestamps && !si.sack && !ci.sack);
    assert_eq!(
        (si.snd_wscale, si.rcv_wscale, ci.snd_wscale, ci.rcv_wscale),
        (0, 0, 0, 0)
    );
    transfer(&mut net, true, c, s, 256 * 1024);
    transfer(&mut net, false, s, c, 256 * 1024);
}

/// RFC 3168 through a cookie: the client's ECN-setup SYN is agreed to in the cookie SYN-ACK,
/// the cookie's ECN bit (in the timestamp) brings it back, and both ends do ECN; without
/// timestamps the cookie cannot carry it and neither does.
#[test]
fn the_cookie_carries_ecn() {
    let mut net = Net::new();
    let cfg = Config {
        ecn: netfold::tcp::EcnMode::On,
        ..Config::default()
    };
    let (c, s) = connect_through_cookie(&mut net, cfg, 100);
    assert!(net.server.conn_info(s).unwrap().ecn);
    assert!(net.client.conn_info(c).unwrap().ecn);
    transfer(&mut net, true, c, s, 64 * 1024);

    let mut net = Net::new();
    let cfg = Config {
        timestamps: false,
        ..cfg
    };
    let (c, s) = connect_through_cookie(&mut net, cfg, 100);
    assert!(!net.server.conn_info(s).unwrap().ecn);
    assert!(!net.client.conn_info(c).unwrap().ecn);
}

/// The ACK a client would send for the cookie SYN-ACK `sa` it received.
fn answer(sa: &TcpRepr) -> TcpRepr {
    let mut a = TcpRepr {
        src_port: sa.dst_port,
        dst_port: sa.src_port,
        seq: sa.ack,
        ack: sa.seq.wrapping_add(1),
        flags: TcpFlags(TcpFlags::ACK),
        window: 502,
        ..TcpRepr::default()
    };
    a.options.timestamps = sa.options.timestamps.map(|t| Timestamps {
        tsval: t.tsecr.wrapping_add(1),
        tsecr: t.tsval,
    });
    a
}

#[test]
fn cookies_expire_after_two_minutes_and_other_keys_fail() {
    let mut net = Net::new();
    let l = net
        .server
        .listen(server_addr(), 1, Config::default())
        .unwrap();
    net.flood(2);
    net.emit(false);
    let (dst, sa) = net.first_spoofed.expect("a cookie SYN-ACK");
    assert_eq!(net.server.stats().syncookies_sent, 1);
    let ack = answer(&sa);

    // The same valid ACK arriving at a stack with another key (whose SYN queue overflowed
    // too) fails.
    let mut other = TcpLayer::new(Secret::fixed_for_tests([3; 16]));
    let ol = other.listen(server_addr(), 1, Config::default()).unwrap();
    for last in 1..=2 {
        let from = Ipv4Addr::new(198, 19, 250, last);
        other.input(
            net.now,
            RxSegment::new(from, IP_SERVER, &sa_to_syn(&sa), &[&[]]),
        );
    }
    assert_eq!(other.stats().syncookies_sent, 1);
    other.input(net.now, RxSegment::new(dst, IP_SERVER, &ack, &[&[]]));
    assert_eq!(other.stats().syncookies_failed, 1);
    assert_eq!(other.stats().syncookies_recv, 0);
    assert_eq!(other.accept(ol).ok(), None);

    // Two minutes later (the SYN queue overflowing all along) the cookie is stale.
    net.now += Duration::from_secs(121);
    net.flood(1);
    let before = net.server.socket_count();
    net.server
        .input(net.now, RxSegment::new(dst, IP_SERVER, &ack, &[&[]]));
    assert_eq!(net.server.stats().syncookies_failed, 1);
    assert_eq!(net.server.stats().syncookies_recv, 0);
    assert_eq!(net.server.socket_count(), before);

    // A fresh cookie answered at once becomes an ESTABLISHED connection in the accept queue.
    net.emit(false);
    net.flood(1);
    net.emit(false);
    let (dst, sa) = net.first_spoofed.unwrap();
    net.server.input(
        net.now,
        RxSegment::new(dst, IP_SERVER, &answer(&sa), &[&[]]),
    );
    assert_eq!(net.server.stats().syncookies_recv, 1);
    let s = net.server.accept(l).expect("cookie connection accepted");
    assert_eq!(net.server.state(s), Ok(State::Established));
    assert_eq!(net.server.peer_addr(s).unwrap().ip(), dst);

    // Once no SYN has overflowed the queue for two minutes, ACKs are not checked at all.
    let quiet = net.server.stats();
    net.now += Duration::from_secs(121);
    let forged = TcpRepr {
        src_port: 4444,
        seq: 7,
        ack: 9,
        ..answer(&sa)
    };
    net.server
        .input(net.now, RxSegment::new(dst, IP_SERVER, &forged, &[&[]]));
    let after = net.server.stats();
    assert_eq!(
        (after.syncookies_failed, after.syncookies_recv),
        (quiet.syncookies_failed, quiet.syncookies_recv)
    );
}

/// The SYN that a cookie SYN-ACK `sa` answered (to replay it at another stack).
fn sa_to_syn(sa: &TcpRepr) -> TcpRepr {
    let mut syn = TcpRepr {
        src_port: sa.dst_port,
        dst_port: sa.src_port,
        seq: sa.ack.wrapping_sub(1),
        flags: TcpFlags(TcpFlags::SYN),
        window: 64240,
        ..TcpRepr::default()
    };
    syn.options.mss = Some(1460);
    syn
}

#[test]
fn cookies_off_restores_drop_the_syn() {
    let mut net = Net::new();
    net.server.set_syn_cookies(false);
    let _l = net
        .server
        .listen(server_addr(), 1, Config::default())
        .unwrap();
    net.flood(1000);
    net.emit(false);
    let st: Stats = net.server.stats();
    assert_eq!((st.syncookies_sent, st.backlog_drops), (0, 999));
    assert_eq!(net.spoofed_synacks, 1);
}
