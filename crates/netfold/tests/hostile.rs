//! Hostile peers in virtual time: spoofed SYN floods, blind RST/SYN/data
//! injection (RFC 5961 §3-5), overlapping retransmissions with different bytes, options that
//! overflow the header, shrinking windows, ACKs for data never sent, window-scale abuse — while
//! an honest connection moves data that is checked byte for byte, and the memory each stack
//! holds (socket count, buffered bytes) stays under a stated bound throughout.
//!
//! Public APIs only: two `TcpLayer`s joined by an in-test wire with a fixed latency, the
//! attacker calling `TcpLayer::input` with forged `TcpRepr`s; the header-overflow test goes
//! through `wire::tcp` and a whole `Stack`. The attacker is blind: it guesses sequence numbers
//! with a seeded generator; where a test gives it the window's position it says so.

use netfold::tcp::{Config, Error, Handle, OutSegment, RxSegment, State, TcpLayer};
use netfold::time::{Duration, Instant};
use netfold::wire::tcp::{PseudoHeader, TcpFlags, TcpOptions, TcpPacket, TcpRepr, Timestamps};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const LATENCY: Duration = Duration::from_millis(5);
const BACKLOG: usize = 16;
/// Spoofed SYNs in the flood test.
const FLOOD_SYNS: u32 = 1_000_000;

/// xorshift64*: the attacker's guesses, deterministic per seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
}

struct Pkt {
    at: Instant,
    to_b: bool,
    src: std::net::IpAddr,
    dst: std::net::IpAddr,
    repr: TcpRepr,
    payload: Vec<u8>,
}

type Mutate = Box<dyn FnMut(bool, &mut TcpRepr)>;

/// A (client, 198.18.0.1) and B (server, 198.18.0.2); segments to any other address (the
/// answers to spoofed sources) are counted and dropped.
struct Net {
    now: Instant,
    a: TcpLayer,
    b: TcpLayer,
    q: VecDeque<Pkt>,
    /// Rewrites honest segments in flight (from_a, repr).
    mutate: Option<Mutate>,
    /// Segments B sent to spoofed addresses.
    to_nowhere: u64,
    /// Every segment B sent to A since the last clear.
    b_to_a: Vec<TcpRepr>,
    /// Every segment A sent to B since the last clear.
    a_to_b: Vec<TcpRepr>,
}

impl Net {
    fn new() -> Self {
        Net {
            now: Instant::from_millis(1),
            a: TcpLayer::new(netfold::tcp::Secret::fixed_for_tests([1; 16])),
            b: TcpLayer::new(netfold::tcp::Secret::fixed_for_tests([2; 16])),
            q: VecDeque::new(),
            mutate: None,
            to_nowhere: 0,
            b_to_a: Vec::new(),
            a_to_b: Vec::new(),
        }
    }

    fn emit(&mut self, from_a: bool) {
        let mut out = Vec::new();
        let layer = if from_a { &mut self.a } else { &mut self.b };
        layer.output(self.now, &mut |s: &OutSegment<'_>| {
            let p = s.payload.to_vec();
            out.push((s.src, s.dst, s.repr, p));
            true
        });
        for (src, dst, mut repr, payload) in out {
            if dst != IP_A && dst != IP_B {
                self.to_nowhere += 1;
                continue;
            }
            if let Some(m) = self.mutate.as_mut() {
                m(from_a, &mut repr);
            }
            if from_a {
                self.a_to_b.push(repr);
            } else {
                self.b_to_a.push(repr);
            }
            self.q.push_back(Pkt {
                at: self.now + LATENCY,
                to_b: from_a,
                src,
                dst,
                repr,
                payload,
            });
        }
    }

    /// One round: outputs, then deliveries due; otherwise time moves to the next event.
    fn step(&mut self) {
        self.emit(true);
        self.emit(false);
        let mut delivered = false;
        while self.q.front().is_some_and(|p| p.at <= self.now) {
            let p = self.q.pop_front().expect("front exists");
            let l = if p.to_b { &mut self.b } else { &mut self.a };
            l.input(
                self.now,
                RxSegment::new(p.src, p.dst, &p.repr, &[&p.payload]),
            );
            delivered = true;
        }
        if delivered {
            return;
        }
        let mut next = self.q.front().map(|p| p.at);
        for t in [self.a.poll_at(), self.b.poll_at()].into_iter().flatten() {
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
        }
        let next = next.unwrap_or(self.now + Duration::from_millis(100));
        self.now = if next > self.now {
            next
        } else {
            self.now + Duration::from_micros(1)
        };
    }

    fn run_until(&mut self, limit: Duration, mut cond: impl FnMut(&mut Net) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if cond(self) {
                return true;
            }
            self.step();
        }
        cond(self)
    }

    /// The attacker's segment, delivered to B at once as if from `src`.
    fn forge_to_b(&mut self, src: Ipv4Addr, repr: &TcpRepr, payload: &[u8]) {
        self.b
            .input(self.now, RxSegment::new(src, IP_B, repr, &[payload]));
    }
}

fn config() -> Config {
    Config {
        time_wait: Duration::from_secs(2),
        ..Config::default()
    }
}

/// The stated memory bound: B holds at most its listener, the accepted connection(s) and a
/// full SYN/accept queue, and no connection buffers more than its configured buffers.
fn check_memory(layer: &TcpLayer, conns: &[Handle], extra_sockets: usize) {
    let c = config();
    assert!(
        layer.socket_count() <= 1 + conns.len() + 2 * BACKLOG + extra_sockets,
        "{} sockets",
        layer.socket_count()
    );
    for &h in conns {
        // Buffers are auto-tuned: the bound is the connection's current buffer, which never
        // exceeds the configured maximum.
        let Ok(info) = layer.conn_info(h) else {
            continue;
        };
        assert!(info.recv_buffer <= c.recv_buffer_max && info.send_buffer <= c.send_buffer_max);
        if let Ok(q) = layer.recv_queue(h) {
            assert!(
                q <= info.recv_buffer,
                "receive queue {q} > {}",
                info.recv_buffer
            );
        }
        if let Ok(q) = layer.send_queue(h) {
            assert!(
                q <= info.send_buffer,
                "send queue {q} > {}",
                info.send_buffer
            );
        }
    }
}

/// Connects A to B:80; returns (client, server, listener).
fn establish(net: &mut Net) -> (Handle, Handle, Handle) {
    let l = net
        .b
        .listen(SocketAddrV4::new(IP_B, 80), BACKLOG, config())
        .expect("listen");
    let c = net
        .a
        .connect(
            net.now,
            SocketAddrV4::new(IP_A, 0),
            SocketAddrV4::new(IP_B, 80),
            config(),
        )
        .expect("connect");
    let mut s = None;
    let ok = net.run_until(Duration::from_secs(10), |n| {
        if s.is_none() {
            s = n.b.accept(l).ok();
        }
        s.is_some() && n.a.state(c) == Ok(State::Established)
    });
    assert!(ok, "handshake did not complete");
    (c, s.expect("accepted"), l)
}

fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// An honest transfer A -> B of `total` bytes, verified byte for byte, with `attack` called
/// every round (it may forge segments to B); memory is checked every round.
fn transfer_under_attack(
    net: &mut Net,
    c: Handle,
    s: Handle,
    total: u64,
    limit: Duration,
    mut attack: impl FnMut(&mut Net),
) {
    let (mut sent, mut recvd) = (0u64, 0u64);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut rbuf = vec![0u8; 64 * 1024];
    let end = net.now + limit;
    while recvd < total {
        assert!(net.now < end, "stalled: sent {sent} received {recvd}");
        let space = net.a.send_space(c).unwrap_or(0);
        let n = ((total - sent) as usize).min(chunk.len()).min(space);
        if n > 0 {
            for (k, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(sent + k as u64);
            }
            sent += net.a.send(c, &chunk[..n]).expect("send") as u64;
        }
        loop {
            match net.b.recv(s, &mut rbuf) {
                Ok(0) => panic!("unexpected end of stream at {recvd}"),
                Ok(m) => {
                    for (k, &b) in rbuf[..m].iter().enumerate() {
                        assert_eq!(b, pattern(recvd + k as u64), "byte {}", recvd + k as u64);
                    }
                    recvd += m as u64;
                }
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("recv: {e:?} after {recvd} bytes"),
            }
        }
        attack(net);
        check_memory(&net.b, &[s], 0);
        check_memory(&net.a, &[c], 0);
        net.step();
    }
    assert_eq!(net.b.state(s), Ok(State::Established));
}

/// The last segment A sent B (a template for forgeries on the connection's 4-tuple).
fn template(net: &Net) -> TcpRepr {
    *net.a_to_b.last().expect("A sent something")
}

/// 1,000,000 spoofed SYNs (random sources in 198.18.0.0/15, 200 per millisecond of virtual
/// time) while a real client connects within 1 s and moves 64 MiB byte-exact. Bounded: B never holds more than the listener,
/// the real connection and its SYN/accept queues.
///
/// Without SYN cookies the listener's queue stays full of spoofed half-open entries for as
/// long as the flood lasts, so the real client's SYN is dropped (`backlog_drops`) and the
/// handshake cannot complete until the flood stops.
#[test]
fn syn_flood_1m_while_a_real_client_moves_64mib() {
    let mut net = Net::new();
    let l = net
        .b
        .listen(SocketAddrV4::new(IP_B, 80), BACKLOG, config())
        .expect("listen");
    let mut rng = Rng(0x5eed);
    let mut flood = |net: &mut Net, n: u32| {
        for _ in 0..n {
            let r = rng.next();
            // 198.18.0.0/15 minus the two real hosts.
            let host = 3 + (r as u32 % 0x1_fffc);
            let src = Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + host);
            let syn = TcpRepr {
                src_port: 1024 + (r >> 20) as u16 % 60000,
                dst_port: 80,
                seq: (r >> 32) as u32,
                ack: 0,
                flags: TcpFlags(TcpFlags::SYN),
                window: 65535,
                urgent: 0,
                options: TcpOptions {
                    mss: Some(1460),
                    ..TcpOptions::default()
                },
            };
            net.forge_to_b(src, &syn, &[]);
        }
    };
    // The flood is under way before the client starts.
    let mut floods = 0u32;
    while floods < 20_000 {
        flood(&mut net, 200);
        floods += 200;
        net.now += Duration::from_millis(1);
        net.emit(false);
        check_memory(&net.b, &[], 0);
    }
    let c = net
        .a
        .connect(
            net.now,
            SocketAddrV4::new(IP_A, 0),
            SocketAddrV4::new(IP_B, 80),
            config(),
        )
        .expect("connect");
    let mut s = None;
    let start = net.now;
    let ok = net.run_until(Duration::from_secs(5), |n| {
        if floods < FLOOD_SYNS {
            flood(n, 200);
            floods += 200;
        }
        if s.is_none() {
            s = n.b.accept(l).ok();
        }
        check_memory(&n.b, &[], 1);
        s.is_some() && n.a.state(c) == Ok(State::Established)
    });
    assert!(
        ok,
        "no connection within 5 s of flood (backlog drops {})",
        net.b.stats().backlog_drops
    );
    assert!(
        net.now - start < Duration::from_secs(1),
        "connect took {:?}",
        net.now - start
    );
    let s = s.expect("accepted");
    transfer_under_attack(&mut net, c, s, 64 << 20, Duration::from_secs(600), |n| {
        if floods < FLOOD_SYNS {
            flood(n, 200);
            floods += 200;
        }
    });
}

/// RFC 5961 §3: RSTs with blindly guessed sequence numbers — out of window (ignored) and in
/// window but not exactly RCV.NXT (challenge ACK) — never reset the connection; the transfer
/// completes byte-exact. The in-window guesses give the attacker the window's position (a
/// stronger attacker than a blind one); it still never hits RCV.NXT exactly.
#[test]
fn blind_rsts_never_reset_a_connection() {
    let mut net = Net::new();
    let (c, s, _) = establish(&mut net);
    net.a.send(c, b"x").expect("send");
    net.run_until(Duration::from_secs(1), |n| n.b.recv_queue(s) == Ok(1));
    let mut rng = Rng(3);
    let mut buf = [0u8; 1];
    assert_eq!(net.b.recv(s, &mut buf), Ok(1));
    let (mut forged, mut in_window) = (0u64, 0u64);
    let challenge_before = net.b.stats().challenge_acks;
    transfer_under_attack(&mut net, c, s, 2 << 20, Duration::from_secs(60), |n| {
        let t = template(n);
        for k in 0..200 {
            let mut rst = t;
            rst.flags = TcpFlags(TcpFlags::RST | if k % 2 == 0 { TcpFlags::ACK } else { 0 });
            rst.options = TcpOptions::default();
            rst.seq = if k % 4 == 0 {
                // In window, never exactly RCV.NXT (which is t.seq + its payload at most).
                in_window += 1;
                t.seq.wrapping_add(2000 + rng.u32() % 60_000)
            } else {
                rng.u32()
            };
            rst.ack = rng.u32();
            n.forge_to_b(IP_A, &rst, &[]);
            forged += 1;
        }
    });
    assert!(forged > 10_000, "only {forged} forged RSTs");
    // §3.2: in-window RSTs draw challenge ACKs (rate limited, so at least one, not one each).
    assert!(
        net.b.stats().challenge_acks > challenge_before,
        "{in_window} in-window RSTs, no challenge ACK"
    );
    assert_eq!(net.a.state(c), Ok(State::Established));
}

/// RFC 5961 §4: SYNs with any sequence number on an established connection draw a challenge
/// ACK and never reset it.
#[test]
fn blind_syns_never_reset_a_connection() {
    let mut net = Net::new();
    let (c, s, _) = establish(&mut net);
    net.a.send(c, b"x").expect("send");
    net.run_until(Duration::from_secs(1), |n| n.b.recv_queue(s) == Ok(1));
    let mut buf = [0u8; 1];
    assert_eq!(net.b.recv(s, &mut buf), Ok(1));
    let mut rng = Rng(4);
    let before = net.b.stats().challenge_acks;
    transfer_under_attack(&mut net, c, s, 2 << 20, Duration::from_secs(60), |n| {
        let t = template(n);
        for k in 0..10 {
            let mut syn = t;
            syn.flags = TcpFlags(TcpFlags::SYN | if k % 2 == 0 { TcpFlags::ACK } else { 0 });
            syn.seq = if k % 3 == 0 {
                t.seq.wrapping_add(rng.u32() % 65_536)
            } else {
                rng.u32()
            };
            syn.ack = rng.u32();
            syn.options.mss = Some(536);
            n.forge_to_b(IP_A, &syn, &[]);
        }
    });
    assert!(net.b.stats().challenge_acks > before);
    assert_eq!(net.a.state(c), Ok(State::Established));
}

/// RFC 5961 §5: data with a blindly guessed ACK. Sequence numbers are placed in the receive
/// window (the attacker knows where the window is); the ACK field is random, so it is almost
/// never in SND.UNA - MAX.SND.WND .. SND.NXT and §5.2 says to drop the segment. The honest
/// bytes must arrive unmixed.
#[test]
fn blind_data_with_unacceptable_acks_is_dropped() {
    let mut net = Net::new();
    let (c, s, _) = establish(&mut net);
    let mut rng = Rng(5);
    let junk = [0xeeu8; 1000];
    transfer_under_attack(&mut net, c, s, 2 << 20, Duration::from_secs(60), |n| {
        let t = template(n);
        for _ in 0..4 {
            let mut d = t;
            d.flags = TcpFlags(TcpFlags::ACK | TcpFlags::PSH);
            // Ahead of RCV.NXT, inside the window: would sit in the out-of-order queue and win
            // against the honest bytes if accepted.
            d.seq = t.seq.wrapping_add(1448 * (2 + rng.u32() % 30));
            d.ack = rng.u32();
            let len = 1 + (rng.u32() % 1000) as usize;
            n.forge_to_b(IP_A, &d, &junk[..len]);
        }
    });
}

/// Forges, to B, segments over the same sequence space with different bytes: 100..300 as
/// 'a' and 50..250 as 'b' (both out of order), then `fill` (0..`fill.1`) as 'c', then 0..400
/// as 'd' (a retransmission of what is by then delivered). Returns what B's application reads.
fn overlap_run(fill_len: usize) -> Vec<u8> {
    let mut net = Net::new();
    let (c, s, _) = establish(&mut net);
    net.a.send(c, b"x").expect("send");
    net.run_until(Duration::from_secs(1), |n| n.b.recv_queue(s) == Ok(1));
    let mut one = [0u8; 1];
    assert_eq!(net.b.recv(s, &mut one), Ok(1));
    let t = template(&net);
    let nxt = t.seq.wrapping_add(1);
    let mut seg = t;
    seg.flags = TcpFlags(TcpFlags::ACK);
    seg.seq = nxt.wrapping_add(100);
    net.forge_to_b(IP_A, &seg, &[b'a'; 200]);
    seg.seq = nxt.wrapping_add(50);
    net.forge_to_b(IP_A, &seg, &[b'b'; 200]);
    seg.seq = nxt;
    net.forge_to_b(IP_A, &seg, &vec![b'c'; fill_len]);
    let mut got = vec![0u8; 1000];
    let n = net.b.recv(s, &mut got).expect("data");
    got.truncate(n);
    // Retransmission of delivered bytes with other contents: nothing more is delivered except
    // what lies beyond what was delivered.
    net.forge_to_b(IP_A, &seg, &[b'd'; 400]);
    let mut more = vec![0u8; 1000];
    if let Ok(m) = net.b.recv(s, &mut more) {
        got.extend_from_slice(&more[..m]);
    }
    check_memory(&net.b, &[s], 0);
    got
}

/// The policy asked for: where segments overlap, the first bytes received for a sequence
/// number are the ones delivered, and a retransmission never changes delivered bytes.
fn first_wins(fill_len: usize) -> Vec<u8> {
    let mut want = vec![b'd'; 400];
    want[..fill_len].fill(b'c');
    want[100..300].fill(b'a');
    want[50..100].fill(b'b');
    want
}

/// The 'c' segment fills only the hole (0..50) plus a little: every later byte was first
/// received in 'b' or 'a' and must come from there; the 'd' retransmission only adds 300..400.
/// netfold today: later bytes overwrite queued ones ('b' replaces 'a' on 100..250, 'c'
/// replaces 'b' on 50..120): "last data wins", never a mix within one sequence number.
#[test]
fn overlapping_retransmissions_partial_fill_first_data_wins() {
    let got = overlap_run(120);
    let mut want = first_wins(120);
    want[..50].fill(b'c');
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
}

/// The 'c' segment covers all queued out-of-order data. The policy above asks that the
/// first data win; netfold delivers the whole in-order segment and discards the queued bytes it covers
/// (never a mix within one segment; Linux's tcp_ofo_queue does the same, and RFC 9293 §3.10.7.4
/// leaves it open). A policy change in tcp/ (reassembly), so it is recorded, not fixed here.
#[test]
fn overlapping_retransmissions_covering_fill_first_data_wins() {
    let got = overlap_run(400);
    let mut want = first_wins(400);
    want[..50].fill(b'c');
    want[300..].fill(b'c');
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
}

/// Whatever the policy, no byte is ever something no segment carried at that offset, and
/// delivered bytes never change.
#[test]
fn overlapping_retransmissions_never_invent_or_rewrite_bytes() {
    for fill in [50, 120, 260, 400] {
        let got = overlap_run(fill);
        assert_eq!(got.len(), 400, "fill {fill}");
        for (i, &b) in got.iter().enumerate() {
            let carried = (i < fill && b == b'c')
                || ((100..300).contains(&i) && b == b'a')
                || ((50..250).contains(&i) && b == b'b')
                || (i >= fill.max(300) && b == b'd');
            assert!(carried, "fill {fill}: byte {i} is {:?}", b as char);
        }
        // The delivered prefix from 'c' is never rewritten by 'd'.
        assert_eq!(got[0], b'c');
    }
}

/// Options that claim more bytes than the header holds: the parser refuses them or stops at the
/// header's end, never reads into the payload, never panics; a whole stack fed such segments
/// (to a listener and to a closed port) keeps working.
#[test]
fn options_that_overflow_the_header() {
    use netfold::wire::Ipv4Addr as A;
    let ph = PseudoHeader::new(A::new(198, 18, 0, 2), A::new(198, 18, 0, 1));
    // Data offset 6 (4 option bytes) with options whose length runs past them.
    let cases: [&[u8]; 7] = [
        &[2, 4, 5],        // MSS cut by the end of the header
        &[8, 10, 0, 0],    // timestamps: 10 bytes claimed, 4 present
        &[5, 34, 0, 0],    // SACK: 4 blocks claimed
        &[3, 0, 0, 0],     // length 0 (would loop forever)
        &[3, 1, 0, 0],     // length 1 (shorter than kind + length)
        &[254, 255, 0, 0], // unknown kind, 255 bytes
        &[1, 1, 1, 3],     // NOPs then a window scale cut in half
    ];
    for opts in cases {
        let mut seg = [0u8; 24 + 8];
        seg[0..2].copy_from_slice(&5000u16.to_be_bytes());
        seg[2..4].copy_from_slice(&80u16.to_be_bytes());
        seg[12] = 6 << 4;
        seg[13] = TcpFlags::SYN;
        seg[14..16].copy_from_slice(&1000u16.to_be_bytes());
        seg[20..20 + opts.len()].copy_from_slice(opts);
        // The payload looks like valid options: a parser that overran would pick them up.
        seg[24..32].copy_from_slice(&[2, 4, 0x12, 0x34, 3, 3, 9, 0]);
        {
            let mut p = TcpPacket::new_unchecked(&mut seg[..]);
            p.fill_checksum(&ph);
        }
        let p = TcpPacket::new_checked(&seg[..]).expect("20+ bytes");
        if let Ok(r) = TcpRepr::parse(&p, &ph, true) {
            assert_ne!(
                r.options.mss,
                Some(0x1234),
                "{opts:?}: read past the header"
            );
            assert_ne!(
                r.options.window_scale,
                Some(9),
                "{opts:?}: read past the header"
            );
        }
    }
}

/// The peer shrinks its window below what is in flight (RFC 9293 §3.8.6.2.1 discourages it
/// but a sender must cope), closes it to zero for a while, then reopens: no data is lost or
/// corrupted, and the sender never has more than its send buffer queued.
#[test]
fn shrinking_windows_lose_nothing() {
    let mut net = Net::new();
    let (c, s, _) = establish(&mut net);
    // B's advertised windows are scaled by its receive shift: 1 KiB in window units.
    let shift = net.b.conn_info(s).expect("info").rcv_wscale;
    let kib = (1024u16 >> shift).max(1);
    let rounds = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let seen = rounds.clone();
    net.mutate = Some(Box::new(move |from_a, r| {
        if !from_a {
            let round = seen.get() + 1;
            seen.set(round);
            // Periods of 40 segments from B: 20 open, 10 shrunk to 1 KiB, 2 closed (zero
            // window; the sender must probe), then open again.
            r.window = match round % 40 {
                0..20 => r.window,
                20..30 => r.window.min(kib),
                30..32 => 0,
                _ => r.window,
            };
        }
    }));
    transfer_under_attack(&mut net, c, s, 4 << 20, Duration::from_secs(600), |_| {});
    assert!(
        rounds.get() > 80,
        "only {} segments from B: the phases did not run",
        rounds.get()
    );
}

/// ACKs for data never sent (RFC 9293 §3.10.7.4: "If the ACK acks something not yet sent
/// (SEG.ACK > SND.NXT) then send an ACK, drop the segment, and return"): the sender's state does
/// not move, the transfer completes byte-exact.
#[test]
fn acks_for_data_never_sent_are_dropped() {
    let mut net = Net::new();
    let (c, s, _) = establish(&mut net);
    let mut rng = Rng(9);
    let before = net.a.stats().segments_out;
    // Forged to A (the sender) from B's 4-tuple.
    transfer_under_attack(&mut net, c, s, 2 << 20, Duration::from_secs(60), |n| {
        let Some(mut t) = n.b_to_a.last().copied() else {
            return;
        };
        t.flags = TcpFlags(TcpFlags::ACK);
        t.ack = t.ack.wrapping_add(100_000 + rng.u32() % 1_000_000);
        n.a.input(n.now, RxSegment::new(IP_B, IP_A, &t, &[&[]]));
    });
    assert!(net.a.stats().segments_out > before);
    assert_eq!(net.a.state(c), Ok(State::Established));
}

/// Window-scale abuse (RFC 7323 §2.3: "If a Window Scale option is received with a shift.cnt
/// value larger than 14, the TCP SHOULD log the error but MUST use 14 instead"): a SYN and a
/// SYN-ACK with shifts 15..=255 give a connection whose send scale is 14.
#[test]
fn window_scale_above_14_is_clamped_to_14() {
    for shift in [15u8, 16, 30, 255] {
        // Passive side: a SYN with the abusive shift.
        let mut b = TcpLayer::new(netfold::tcp::Secret::fixed_for_tests([2; 16]));
        let l = b
            .listen(SocketAddrV4::new(IP_B, 80), BACKLOG, config())
            .expect("listen");
        let now = Instant::from_millis(1);
        let syn = TcpRepr {
            src_port: 5000,
            dst_port: 80,
            seq: 1000,
            ack: 0,
            flags: TcpFlags(TcpFlags::SYN),
            window: 65535,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                window_scale: Some(shift),
                ..TcpOptions::default()
            },
        };
        b.input(now, RxSegment::new(IP_A, IP_B, &syn, &[&[]]));
        let mut synack = None;
        b.output(now, &mut |s: &OutSegment<'_>| {
            synack = Some(s.repr);
            true
        });
        let synack = synack.expect("SYN-ACK");
        let ack = TcpRepr {
            seq: 1001,
            ack: synack.seq.wrapping_add(1),
            flags: TcpFlags(TcpFlags::ACK),
            options: TcpOptions::default(),
            ..syn
        };
        b.input(now, RxSegment::new(IP_A, IP_B, &ack, &[&[]]));
        let h = b.accept(l).expect("accepted");
        let info = b.conn_info(h).expect("info");
        assert_eq!(info.snd_wscale, 14, "passive side, shift {shift}");
        // The peer's window (65535 << 14) must not overflow anything: send fits the buffer.
        assert_eq!(b.send(h, &[1u8; 1000]), Ok(1000));

        // Active side: a SYN-ACK with the abusive shift.
        let mut a = TcpLayer::new(netfold::tcp::Secret::fixed_for_tests([1; 16]));
        let c = a
            .connect(
                now,
                SocketAddrV4::new(IP_A, 0),
                SocketAddrV4::new(IP_B, 80),
                config(),
            )
            .expect("connect");
        let mut syn = None;
        a.output(now, &mut |s: &OutSegment<'_>| {
            syn = Some(s.repr);
            true
        });
        let syn = syn.expect("SYN");
        let synack = TcpRepr {
            src_port: 80,
            dst_port: syn.src_port,
            seq: 7000,
            ack: syn.seq.wrapping_add(1),
            flags: TcpFlags(TcpFlags::SYN | TcpFlags::ACK),
            window: 65535,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                window_scale: Some(shift),
                timestamps: syn.options.timestamps.map(|t| Timestamps {
                    tsval: 1,
                    tsecr: t.tsval,
                }),
                sack_permitted: syn.options.sack_permitted,
                ..TcpOptions::default()
            },
        };
        a.input(now, RxSegment::new(IP_B, IP_A, &synack, &[&[]]));
        assert_eq!(a.state(c), Ok(State::Established));
        assert_eq!(
            a.conn_info(c).expect("info").snd_wscale,
            14,
            "active side, shift {shift}"
        );
    }
}

/// Found by fuzz/diff_smoltcp: a segment that starts before RCV.NXT and ends after it is
/// acceptable (RFC 9293 §3.3 "RCV.NXT =< SEG.SEQ+SEG.LEN-1 < RCV.NXT+RCV.WND" with the old part
/// trimmed, §3.10.7.4); its new bytes must be delivered and acknowledged.
#[test]
fn segment_straddling_rcv_nxt_delivers_its_new_bytes() {
    for back in [1u32, 500, 1077, 1078, 1093] {
        let mut net = Net::new();
        let (c, s, _) = establish(&mut net);
        let first: Vec<u8> = (0..1078u64).map(pattern).collect();
        net.a.send(c, &first).expect("send");
        net.run_until(Duration::from_secs(1), |n| n.b.recv_queue(s) == Ok(1078));
        let mut buf = vec![0u8; 4000];
        assert_eq!(net.b.recv(s, &mut buf), Ok(1078));
        let t = template(&net);
        let rcv_nxt = t.seq.wrapping_add(1078);
        let mut seg = t;
        seg.flags = TcpFlags(TcpFlags::ACK);
        seg.seq = rcv_nxt.wrapping_sub(back);
        let payload: Vec<u8> = (0..u64::from(back) + 286)
            .map(|i| pattern((1078 + i).wrapping_sub(u64::from(back))))
            .collect();
        net.forge_to_b(IP_A, &seg, &payload);
        assert_eq!(
            net.b.recv(s, &mut buf),
            Ok(286),
            "{back} bytes before RCV.NXT"
        );
        assert_eq!(
            &buf[..286],
            &(1078..1364u64).map(pattern).collect::<Vec<_>>()[..]
        );
    }
}
