//! TCP engine tests in virtual time: two `TcpLayer`s joined by an in-test network that moves
//! `OutSegment`s as `TcpRepr` + payload with a latency and seeded loss/reorder/duplication.
//! No sockets, no real time.

use netfold::tcp::{Config, CongestionControl, Error, Handle, OutSegment, State, TcpLayer};
use netfold::time::{Duration, Instant};
use netfold::wire::tcp::{TcpFlags, TcpRepr, Timestamps};
use std::collections::BinaryHeap;
use std::net::{Ipv4Addr, SocketAddrV4};

const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// xorshift64*: deterministic, seedable.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pkt {
    at: Instant,
    id: u64,
    to_b: bool,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    repr: TcpRepr,
    payload: Vec<u8>,
}
impl Ord for Pkt {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.id).cmp(&(self.at, self.id)) // min-heap
    }
}
impl PartialOrd for Pkt {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// One logged transmission.
#[derive(Debug, Clone)]
struct Sent {
    at: Instant,
    from_a: bool,
    repr: TcpRepr,
    len: usize,
    dropped: bool,
}

type Filter = Box<dyn FnMut(bool, &TcpRepr, usize) -> bool>;

struct Net {
    now: Instant,
    a: TcpLayer,
    b: TcpLayer,
    q: BinaryHeap<Pkt>,
    next_id: u64,
    rng: Rng,
    latency: Duration,
    loss: f64,
    reorder: f64,
    dup: f64,
    /// Returns true to drop: (from_a, repr, payload len).
    filter: Option<Filter>,
    log: Vec<Sent>,
    keep_log: bool,
}

impl Net {
    fn new(seed: u64) -> Self {
        Net {
            now: Instant::ZERO,
            a: TcpLayer::new([1; 16]),
            b: TcpLayer::new([2; 16]),
            q: BinaryHeap::new(),
            next_id: 0,
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            latency: Duration::from_millis(5),
            loss: 0.0,
            reorder: 0.0,
            dup: 0.0,
            filter: None,
            log: Vec::new(),
            keep_log: true,
        }
    }

    fn emit_from(&mut self, from_a: bool) {
        let mut out: Vec<(Ipv4Addr, Ipv4Addr, TcpRepr, Vec<u8>)> = Vec::new();
        let layer = if from_a { &mut self.a } else { &mut self.b };
        layer.output(self.now, &mut |s: &OutSegment<'_>| {
            let mut p = s.payload.0.to_vec();
            p.extend_from_slice(s.payload.1);
            out.push((s.src, s.dst, s.repr, p));
            true
        });
        for (src, dst, repr, payload) in out {
            let mut dropped = false;
            if let Some(f) = self.filter.as_mut() {
                dropped = f(from_a, &repr, payload.len());
            }
            if !dropped && self.loss > 0.0 && self.rng.unit() < self.loss {
                dropped = true;
            }
            if self.keep_log {
                self.log.push(Sent {
                    at: self.now,
                    from_a,
                    repr,
                    len: payload.len(),
                    dropped,
                });
            }
            if dropped {
                continue;
            }
            let mut copies = 1;
            if self.dup > 0.0 && self.rng.unit() < self.dup {
                copies = 2;
            }
            for _ in 0..copies {
                let mut at = self.now + self.latency;
                if self.reorder > 0.0 && self.rng.unit() < self.reorder {
                    // Held back by up to one more latency: later segments overtake it.
                    at += Duration::from_micros(
                        1 + self.rng.next() % self.latency.total_micros().max(1),
                    );
                }
                self.next_id += 1;
                self.q.push(Pkt {
                    at,
                    id: self.next_id,
                    to_b: from_a,
                    src,
                    dst,
                    repr,
                    payload: payload.clone(),
                });
            }
        }
    }

    /// Runs outputs, delivers what is due, then advances time to the next event.
    fn step(&mut self) {
        self.emit_from(true);
        self.emit_from(false);
        let mut delivered = false;
        while self.q.peek().is_some_and(|p| p.at <= self.now) {
            let p = self.q.pop().unwrap();
            let layer = if p.to_b { &mut self.b } else { &mut self.a };
            layer.input(self.now, p.src, p.dst, &p.repr, &p.payload);
            delivered = true;
        }
        if delivered {
            return;
        }
        let mut next = self.q.peek().map(|p| p.at);
        for t in [self.a.poll_at(), self.b.poll_at()].into_iter().flatten() {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        let next = next.unwrap_or(self.now + Duration::from_secs(1));
        self.now = if next > self.now {
            next
        } else {
            self.now + Duration::from_micros(1)
        };
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.step();
        }
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

    fn inject_to_b(&mut self, repr: TcpRepr, payload: &[u8]) {
        self.b.input(self.now, IP_A, IP_B, &repr, payload);
    }
}

fn addr_a(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(IP_A, port)
}
fn addr_b(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(IP_B, port)
}

fn test_config() -> Config {
    Config {
        time_wait: Duration::from_secs(2),
        ..Config::default()
    }
}

/// Connects A (client) to B (server, port 80); returns (client, server, listener).
fn establish(net: &mut Net, ca: Config, cb: Config) -> (Handle, Handle, Handle) {
    let l = net.b.listen(addr_b(80), 16, cb).unwrap();
    let c = net.a.connect(net.now, addr_a(0), addr_b(80), ca).unwrap();
    let mut server = None;
    let ok = net.run_until(Duration::from_secs(30), |n| {
        if server.is_none() {
            server = n.b.accept(l).ok();
        }
        server.is_some() && n.a.state(c) == Ok(State::Established)
    });
    assert!(ok, "handshake did not complete");
    (c, server.unwrap(), l)
}

fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// Sends `total` bytes from `tx` to `rx` (tx on A if `a_sends`), verifying every byte.
fn transfer(net: &mut Net, a_sends: bool, tx: Handle, rx: Handle, total: u64, limit: Duration) {
    let mut sent = 0u64;
    let mut recvd = 0u64;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut rbuf = vec![0u8; 64 * 1024];
    let end = net.now + limit;
    while recvd < total {
        assert!(
            net.now < end,
            "transfer stalled: sent {sent} received {recvd} of {total}"
        );
        {
            let s = if a_sends { &mut net.a } else { &mut net.b };
            while sent < total {
                let n = ((total - sent) as usize).min(chunk.len());
                for (k, b) in chunk[..n].iter_mut().enumerate() {
                    *b = pattern(sent + k as u64);
                }
                match s.send(tx, &chunk[..n]) {
                    Ok(m) => sent += m as u64,
                    Err(Error::WouldBlock) => break,
                    Err(e) => panic!("send: {e:?}"),
                }
            }
        }
        {
            let r = if a_sends { &mut net.b } else { &mut net.a };
            loop {
                match r.recv(rx, &mut rbuf) {
                    Ok(0) => panic!("unexpected EOF at {recvd}"),
                    Ok(n) => {
                        for (k, &b) in rbuf[..n].iter().enumerate() {
                            assert_eq!(
                                b,
                                pattern(recvd + k as u64),
                                "byte {} differs",
                                recvd + k as u64
                            );
                        }
                        recvd += n as u64;
                    }
                    Err(Error::WouldBlock) => break,
                    Err(e) => panic!("recv: {e:?}"),
                }
            }
        }
        net.step();
    }
}

#[test]
fn handshake_negotiates_options() {
    let mut net = Net::new(1);
    let (c, s, _) = establish(&mut net, test_config(), test_config());
    assert_eq!(net.b.state(s), Ok(State::Established));
    let ia = net.a.conn_info(c).unwrap();
    let ib = net.b.conn_info(s).unwrap();
    assert!(ia.sack && ib.sack && ia.timestamps && ib.timestamps);
    assert_eq!(ia.mss, 1460);
    assert_eq!(net.a.peer_addr(c), Ok(addr_b(80)));
    assert_eq!(net.b.local_addr(s), Ok(addr_b(80)));
    let port = net.a.local_addr(c).unwrap().port();
    assert!(port >= 49152, "ephemeral port {port}");
    // Exactly SYN, SYN-ACK, ACK on the wire.
    let syn = &net.log[0];
    assert!(syn.from_a && syn.repr.flags.syn() && !syn.repr.flags.ack());
    assert_eq!(syn.repr.options.mss, Some(1460));
    assert!(syn.repr.options.sack_permitted && syn.repr.options.timestamps.is_some());
    let synack = &net.log[1];
    assert!(!synack.from_a && synack.repr.flags.syn() && synack.repr.flags.ack());
    assert_eq!(synack.repr.ack, syn.repr.seq.wrapping_add(1));
}

#[test]
fn bulk_transfer_both_directions_byte_exact() {
    let mut net = Net::new(2);
    let (c, s, _) = establish(&mut net, test_config(), test_config());
    net.keep_log = false;
    transfer(&mut net, true, c, s, 4 << 20, Duration::from_secs(60));
    transfer(&mut net, false, s, c, 4 << 20, Duration::from_secs(60));
    let st = net.a.stats();
    assert_eq!(
        st.retransmits_rto + st.retransmits_fast,
        0,
        "no loss, no retransmission"
    );
}

#[test]
fn bulk_transfer_newreno_no_sack_no_timestamps() {
    let mut net = Net::new(3);
    let cfg = Config {
        congestion: CongestionControl::NewReno,
        sack: false,
        timestamps: false,
        ..test_config()
    };
    net.loss = 0.01;
    net.keep_log = false;
    let (c, s, _) = establish(&mut net, cfg, cfg);
    transfer(&mut net, true, c, s, 2 << 20, Duration::from_secs(300));
    assert!(net.a.stats().retransmits_fast > 0);
}

fn lossy_transfer(seed: u64, total: u64) {
    let mut net = Net::new(seed);
    net.keep_log = false;
    let (c, s, _) = establish(&mut net, test_config(), test_config());
    net.loss = 0.01;
    net.reorder = 0.01;
    net.dup = 0.005;
    transfer(&mut net, true, c, s, total, Duration::from_secs(3600));
    // Close cleanly under loss as well.
    net.a.close(c).unwrap();
    let ok = net.run_until(Duration::from_secs(120), |n| {
        let mut b = [0u8; 16];
        n.b.recv(s, &mut b) == Ok(0)
    });
    assert!(ok, "FIN not delivered");
    let st = net.a.stats();
    eprintln!("seed {seed} t={:?} a={st:?} b={:?}", net.now, net.b.stats());
    assert!(st.retransmits_fast > 0, "{st:?}");
}

#[test]
fn bulk_64mib_under_loss_reorder_duplication() {
    lossy_transfer(42, 64 << 20);
}

#[test]
fn lossy_seed_sweep() {
    for seed in [7, 8, 9, 10] {
        lossy_transfer(seed, 4 << 20);
    }
}
