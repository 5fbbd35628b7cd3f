//! RFC 3168 ECN, segment by segment in virtual time against one `TcpLayer` (the remote end
//! played by hand): negotiation both ways, ECT(0) only on new data, CE -> ECE -> CWR, and one
//! cwnd reduction per window of data.

use netfold::tcp::{Config, Ecn, EcnMode, Handle, RxSegment, TcpLayer};
use netfold::time::{Duration, Instant};
use netfold::wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use std::net::{Ipv4Addr, SocketAddrV4};

const LOCAL: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const LOCAL_PORT: u16 = 8080;
const PEER_PORT: u16 = 40000;
const PEER_ISS: u32 = 1_000_000;
const MSS: u16 = 1000;

#[derive(Debug, Clone, Copy)]
struct Out {
    repr: TcpRepr,
    len: usize,
    ecn: Ecn,
}

struct Peer {
    tcp: TcpLayer,
    now: Instant,
    iss: u32,
    nxt: u32,
}

const ECE: u8 = TcpFlags::ECE;
const CWR: u8 = TcpFlags::CWR;

impl Peer {
    fn new() -> Peer {
        Peer {
            tcp: TcpLayer::new(netfold::tcp::Secret::fixed_for_tests([9; 16])),
            now: Instant::from_millis(1),
            iss: 0,
            nxt: PEER_ISS,
        }
    }

    /// A segment from the peer (no options: no timestamps, no SACK, to keep it small).
    fn seg(&self, flags: u8, ack: u32) -> TcpRepr {
        TcpRepr {
            src_port: PEER_PORT,
            dst_port: LOCAL_PORT,
            seq: self.nxt,
            ack,
            flags: TcpFlags(flags),
            window: 0xffff,
            urgent: 0,
            options: TcpOptions::default(),
        }
    }

    fn inject(&mut self, repr: &TcpRepr, payload: &[u8], ecn: Ecn) {
        self.tcp.input(
            self.now,
            RxSegment::new(PEER, LOCAL, repr, &[payload]).with_ecn(ecn),
        );
    }

    fn flush(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        self.tcp.output(self.now, &mut |s| {
            out.push(Out {
                repr: s.repr,
                len: s.payload.len(),
                ecn: s.ecn,
            });
            true
        });
        out
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
    }

    /// Passive open; the peer's SYN carries `syn_flags` besides SYN. Returns the connection
    /// and the SYN-ACK.
    fn passive(&mut self, cfg: Config, syn_flags: u8) -> (Handle, TcpRepr) {
        let l = self
            .tcp
            .listen(SocketAddrV4::new(LOCAL, LOCAL_PORT), 8, cfg)
            .unwrap();
        let mut syn = self.seg(TcpFlags::SYN | syn_flags, 0);
        syn.options.mss = Some(MSS);
        self.inject(&syn, &[], Ecn::NotEct);
        self.nxt += 1;
        let out = self.flush();
        assert_eq!(out.len(), 1);
        let sa = out[0];
        assert!(sa.repr.flags.syn() && sa.repr.flags.ack());
        assert_eq!(sa.ecn, Ecn::NotEct, "RFC 3168 §6.1.1: a SYN-ACK is not ECT");
        self.iss = sa.repr.seq;
        self.advance(100);
        let ack = self.seg(TcpFlags::ACK, self.iss + 1);
        self.inject(&ack, &[], Ecn::NotEct);
        (self.tcp.accept(l).unwrap(), sa.repr)
    }

    /// Active open; the SYN-ACK carries `synack_flags` besides SYN and ACK. Returns the
    /// connection and our SYN.
    fn active(&mut self, cfg: Config, synack_flags: u8) -> (Handle, TcpRepr) {
        let h = self
            .tcp
            .connect(
                self.now,
                SocketAddrV4::new(LOCAL, LOCAL_PORT),
                SocketAddrV4::new(PEER, PEER_PORT),
                cfg,
            )
            .unwrap();
        let out = self.flush();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].ecn, Ecn::NotEct, "RFC 3168 §6.1.1: a SYN is not ECT");
        let syn = out[0].repr;
        self.iss = syn.seq;
        self.advance(100);
        let mut sa = self.seg(TcpFlags::SYN | TcpFlags::ACK | synack_flags, self.iss + 1);
        sa.options.mss = Some(MSS);
        self.inject(&sa, &[], Ecn::NotEct);
        self.nxt += 1;
        let out = self.flush();
        assert_eq!(out.len(), 1, "the handshake's ACK");
        assert_eq!(out[0].ecn, Ecn::NotEct, "a pure ACK is not ECT");
        (h, syn)
    }

    /// Sends `n` bytes from netfold and returns what goes out now.
    fn send(&mut self, h: Handle, n: usize) -> Vec<Out> {
        assert_eq!(self.tcp.send(h, &vec![1u8; n]), Ok(n));
        self.flush()
    }
}

fn flags(r: &TcpRepr) -> (bool, bool) {
    (r.flags.ece(), r.flags.cwr())
}

#[test]
fn passive_open_accepts_ecn_when_asked_by_default() {
    let mut p = Peer::new();
    let (h, sa) = p.passive(Config::default(), ECE | CWR);
    assert_eq!(flags(&sa), (true, false), "ECE without CWR on the SYN-ACK");
    let out = p.send(h, 3000);
    assert_eq!(out.len(), 3);
    assert!(out
        .iter()
        .all(|o| o.ecn == Ecn::Ect0 && !o.repr.flags.cwr()));
}

#[test]
fn passive_open_without_request_or_with_ecn_off_stays_not_ect() {
    for (cfg, syn_flags) in [
        (Config::default(), 0),
        // Only one of the two bits is not an ECN-setup SYN.
        (Config::default(), ECE),
        (
            Config {
                ecn: EcnMode::Off,
                ..Config::default()
            },
            ECE | CWR,
        ),
    ] {
        let mut p = Peer::new();
        let (h, sa) = p.passive(cfg, syn_flags);
        assert_eq!(flags(&sa), (false, false), "{cfg:?} {syn_flags:#x}");
        let out = p.send(h, 2000);
        assert!(out.iter().all(|o| o.ecn == Ecn::NotEct));
    }
}

#[test]
fn active_open_asks_only_when_configured() {
    // Default (Linux tcp_ecn=2): no ECN-setup SYN, and a stray ECE on the SYN-ACK means nothing.
    let mut p = Peer::new();
    let (h, syn) = p.active(Config::default(), ECE);
    assert_eq!(flags(&syn), (false, false));
    assert!(p.send(h, 1000).iter().all(|o| o.ecn == Ecn::NotEct));

    let on = Config {
        ecn: EcnMode::On,
        ..Config::default()
    };
    let mut p = Peer::new();
    let (h, syn) = p.active(on, ECE);
    assert_eq!(
        flags(&syn),
        (true, true),
        "an ECN-setup SYN has ECE and CWR"
    );
    let out = p.send(h, 1000);
    assert_eq!(out[0].ecn, Ecn::Ect0);

    // A SYN-ACK with ECE and CWR is not an ECN-setup SYN-ACK (§6.1.1); none is plain no.
    for synack in [ECE | CWR, 0] {
        let mut p = Peer::new();
        let (h, _) = p.active(on, synack);
        assert!(p.send(h, 1000).iter().all(|o| o.ecn == Ecn::NotEct));
    }
}

#[test]
fn a_retransmitted_syn_does_not_ask_again() {
    let on = Config {
        ecn: EcnMode::On,
        ..Config::default()
    };
    let mut p = Peer::new();
    p.tcp
        .connect(
            p.now,
            SocketAddrV4::new(LOCAL, LOCAL_PORT),
            SocketAddrV4::new(PEER, PEER_PORT),
            on,
        )
        .unwrap();
    assert!(p.flush()[0].repr.flags.ece());
    p.advance(1100);
    let out = p.flush();
    assert_eq!(out.len(), 1);
    assert!(out[0].repr.flags.syn());
    assert_eq!(
        flags(&out[0].repr),
        (false, false),
        "RFC 3168 §6.1.1.1 fallback"
    );
}

/// The receiver: a CE mark is echoed with ECE at once and on every segment until a CWR
/// arrives; then ECE stops (until the next CE).
#[test]
fn ce_is_echoed_until_cwr() {
    let mut p = Peer::new();
    let (_h, _) = p.passive(Config::default(), ECE | CWR);
    let ack = p.iss + 1;
    p.advance(10);
    let d = p.seg(TcpFlags::ACK | TcpFlags::PSH, ack);
    p.inject(&d, &[0; 500], Ecn::Ce);
    p.nxt += 500;
    let out = p.flush();
    assert_eq!(out.len(), 1, "an immediate ACK for the first CE: {out:?}");
    assert_eq!(flags(&out[0].repr), (true, false));
    assert_eq!(out[0].ecn, Ecn::NotEct);
    assert_eq!(p.tcp.stats().ecn_ce_in, 1);

    // Unmarked data without CWR: still ECE.
    for _ in 0..2 {
        p.advance(10);
        let d = p.seg(TcpFlags::ACK, ack);
        p.inject(&d, &[0; 1000], Ecn::Ect0);
        p.nxt += 1000;
    }
    p.advance(50);
    let out = p.flush();
    assert!(!out.is_empty() && out.iter().all(|o| o.repr.flags.ece()));

    // CWR: the echo stops.
    p.advance(10);
    let d = p.seg(TcpFlags::ACK | TcpFlags::CWR, ack);
    p.inject(&d, &[0; 1000], Ecn::Ect0);
    p.nxt += 1000;
    let d = p.seg(TcpFlags::ACK, ack);
    p.inject(&d, &[0; 1000], Ecn::Ect0);
    p.nxt += 1000;
    p.advance(50);
    let out = p.flush();
    assert!(!out.is_empty());
    assert!(out.iter().all(|o| !o.repr.flags.ece()), "{out:?}");
}

/// CE on a connection that did not negotiate ECN is ignored.
#[test]
fn ce_without_ecn_is_ignored() {
    let mut p = Peer::new();
    let (_h, _) = p.passive(Config::default(), 0);
    let d = p.seg(TcpFlags::ACK | TcpFlags::PSH, p.iss + 1);
    p.inject(&d, &[0; 500], Ecn::Ce);
    p.advance(50);
    let out = p.flush();
    assert!(out.iter().all(|o| !o.repr.flags.ece()));
    assert_eq!(p.tcp.stats().ecn_ce_in, 0);
}

/// The sender: ECE halves (CUBIC: x0.7) cwnd once per window of data, whatever the number
/// of ECE ACKs; the next new data segment, and only it, carries CWR; retransmissions are
/// not ECT.
#[test]
fn ece_reduces_cwnd_once_per_window_and_sets_cwr() {
    let mut p = Peer::new();
    let (h, _) = p.passive(Config::default(), ECE | CWR);
    let una = p.iss + 1;
    let out = p.send(h, 10_000);
    assert_eq!(out.len(), 10, "initial window: 10 segments");
    let cwnd0 = p.tcp.conn_info(h).unwrap().cwnd;
    // Every ACK of this window echoes ECE (one CE mark upstream).
    p.advance(100);
    for i in 1..=5u32 {
        let a = p.seg(TcpFlags::ACK | TcpFlags::ECE, una + 2000 * i);
        p.inject(&a, &[], Ecn::NotEct);
        if i == 1 {
            let c = p.tcp.conn_info(h).unwrap();
            assert!(c.cwnd < cwnd0, "reduced: {} -> {}", cwnd0, c.cwnd);
            assert_eq!(c.ssthresh, c.cwnd);
        }
    }
    assert_eq!(p.tcp.stats().ecn_cwnd_reductions, 1, "once per window");
    assert_eq!(
        p.tcp.stats().retransmits_fast + p.tcp.stats().retransmits_rto,
        0
    );
    // New data: the first segment carries CWR, the others do not; all are ECT(0).
    let out = p.send(h, 3000);
    assert!(!out.is_empty());
    assert!(out[0].repr.flags.cwr(), "{:?}", out[0]);
    assert!(out[1..].iter().all(|o| !o.repr.flags.cwr()));
    assert!(out.iter().all(|o| o.ecn == Ecn::Ect0 && o.len > 0));
    let snd_max = una + 10_000 + out.iter().map(|o| o.len as u32).sum::<u32>();
    // The ACK for the window of the reduction (still echoing ECE: the receiver has not seen
    // the CWR yet) does not reduce again ...
    p.advance(100);
    let a = p.seg(TcpFlags::ACK | TcpFlags::ECE, una + 10_000);
    p.inject(&a, &[], Ecn::NotEct);
    assert_eq!(p.tcp.stats().ecn_cwnd_reductions, 1);
    // ... an ECE beyond it (a new CE mark) does.
    let a = p.seg(TcpFlags::ACK | TcpFlags::ECE, snd_max);
    p.inject(&a, &[], Ecn::NotEct);
    assert_eq!(p.tcp.stats().ecn_cwnd_reductions, 2);

    // A retransmission (RTO) is not ECT (RFC 3168 §6.1.5).
    let _ = p.send(h, 1000);
    p.advance(5000);
    let out = p.flush();
    assert!(!out.is_empty());
    assert!(out.iter().all(|o| o.ecn == Ecn::NotEct), "{out:?}");
}

/// A zero-window probe is not ECT (RFC 3168 §6.1.6).
#[test]
fn window_probes_are_not_ect() {
    let mut p = Peer::new();
    let (h, _) = p.passive(Config::default(), ECE | CWR);
    let mut z = p.seg(TcpFlags::ACK, p.iss + 1);
    z.window = 0;
    p.inject(&z, &[], Ecn::NotEct);
    assert!(p.send(h, 500).is_empty());
    let mut probes = Vec::new();
    for _ in 0..2000 {
        p.advance(1);
        probes.extend(p.flush());
    }
    assert!(!probes.is_empty());
    assert!(probes.iter().all(|o| o.ecn == Ecn::NotEct));
}

// ---- end to end over the in-memory pipe with an ECN-marking queue -------------------------

/// Two stacks over a pipe whose queue marks 1% of the frames (RFC 3168 §5: CE on ECT, drop on
/// Not-ECT), 1 MiB from the client: with ECN negotiated the congestion is signalled by marks,
/// not losses: CE arrives, cwnd is reduced for ECE, and nothing is retransmitted (the pure
/// ACKs, Not-ECT, are dropped now and then, which ACKs do not need repairing). Without ECN the
/// same queue drops data and it is retransmitted.
#[test]
fn pipe_ecn_marking_signals_congestion_without_loss() {
    use netfold::iface::StackConfig;
    use netfold::phy::pipe::PipeConfig;
    use netfold::tcp::Stats as TcpStats;
    use netfold_testkit::Net;

    fn run(ecn: EcnMode) -> (TcpStats, TcpStats, u64, bool) {
        let mut n = Net::pipe(
            StackConfig {
                addr: PEER,
                ..StackConfig::default()
            },
            StackConfig {
                addr: LOCAL,
                ..StackConfig::default()
            },
            PipeConfig::default().ecn_mark(0.01).seed(3),
        );
        let cfg = Config {
            mss: n.a.tcp_mss(LOCAL),
            ecn,
            ..Config::default()
        };
        n.now = Instant::from_millis(1);
        let l =
            n.b.tcp_mut()
                .listen(SocketAddrV4::new(LOCAL, 80), 4, cfg)
                .unwrap();
        let c =
            n.a.tcp_mut()
                .connect(
                    n.now,
                    SocketAddrV4::new(PEER, 0),
                    SocketAddrV4::new(LOCAL, 80),
                    cfg,
                )
                .unwrap();
        let total = 1usize << 20;
        let data = vec![0x5au8; 65536];
        let (mut sent, mut got) = (0, 0);
        let mut server = None;
        let mut buf = vec![0u8; 65536];
        for _ in 0..5_000_000 {
            n.step();
            if server.is_none() {
                server = n.b.tcp_mut().accept(l).ok();
            }
            if sent < total {
                let k = (total - sent).min(data.len());
                if let Ok(k) = n.a.tcp_mut().send(c, &data[..k]) {
                    sent += k;
                }
            }
            if let Some(s) = server {
                while let Ok(k) = n.b.tcp_mut().recv(s, &mut buf) {
                    if k == 0 {
                        break;
                    }
                    got += k;
                }
            }
            if got == total {
                break;
            }
        }
        assert_eq!(got, total, "transfer incomplete");
        let negotiated = n.a.tcp_mut().conn_info(c).unwrap().ecn;
        (
            n.a.counters().tcp,
            n.b.counters().tcp,
            n.ea.stats().ecn_marked,
            negotiated,
        )
    }

    let (tx, rx, marked, ok) = run(EcnMode::On);
    assert!(ok, "ECN negotiated");
    assert!(
        marked > 0 && rx.ecn_ce_in > 0,
        "{marked} marked, {} CE in",
        rx.ecn_ce_in
    );
    assert!(tx.ecn_cwnd_reductions > 0);
    assert!(tx.ecn_cwnd_reductions <= rx.ecn_ce_in);
    assert_eq!(tx.retransmits_fast + tx.retransmits_rto, 0, "{tx:?}");

    let (tx, rx, marked, ok) = run(EcnMode::Passive);
    assert!(!ok, "neither side asked");
    assert_eq!((marked, rx.ecn_ce_in, tx.ecn_cwnd_reductions), (0, 0, 0));
    assert!(tx.retransmits_fast + tx.retransmits_rto > 0, "{tx:?}");
}
