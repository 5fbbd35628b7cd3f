//! Differential: the same segment sequence to netfold's `TcpLayer` and to smoltcp 0.14 (both
//! listening on port 80, delayed ACKs off on both, equal receive buffers), after the same
//! handshake. Sequence and acknowledgment numbers are chosen relative to each stack's own ISN,
//! so the two see the same segment up to their ISNs. After every segment the target compares
//! what each one ACCEPTED (bytes its application can read), ACKNOWLEDGED (the ack number and
//! the kind of its answer: nothing, ACK, RST, SYN-ACK) and ADVERTISED (zero vs open window),
//! and the connection state (open vs closed). Each difference class is printed once per process
//! (`DIFF <class>: <detail>`); with NETFOLD_DIFF_PANIC=1 a difference panics, to minimise it.
//! docs/SECURITY.md judges each class found against the RFCs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::tcp::{Config as NfConfig, Handle, OutSegment, RxSegment, State as NfState, TcpLayer};
use netfold::time::{Duration as NfDuration, Instant as NfInstant};
use netfold::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use netfold::wire::tcp::{PseudoHeader, TcpFlags, TcpOptions, TcpPacket, TcpRepr, Timestamps};
use netfold::wire::{IpProtocol, Ipv4Addr};
use netfold_fuzz::Input;
use smoltcp::iface::{Config as SmConfig, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SmInstant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};
use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddrV4;
use std::sync::Mutex;

const US: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PEER_PORT: u16 = 40000;
const PEER_ISN: u32 = 1_000_000;
const RCV_BUF: usize = 64 * 1024;

static SEEN: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

fn report(class: &'static str, detail: String) {
    // NETFOLD_DIFF_PANIC=1 panics on any class, NETFOLD_DIFF_PANIC=<class> on that one.
    if let Some(p) = std::env::var_os("NETFOLD_DIFF_PANIC") {
        if p == "1" || p == class {
            panic!("DIFF {class}: {detail}");
        }
    }
    if SEEN.lock().map(|mut s| s.insert(class)).unwrap_or(false) {
        eprintln!("DIFF {class}: {detail}");
    }
}

/// smoltcp's device: IP packets in, IP packets out.
#[derive(Default)]
struct Q {
    rx: VecDeque<Vec<u8>>,
    tx: Vec<Vec<u8>>,
}
struct Rx(Vec<u8>);
struct Tx<'a>(&'a mut Vec<Vec<u8>>);
impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}
impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut b = vec![0u8; len];
        let r = f(&mut b);
        self.0.push(b);
        r
    }
}
impl phy::Device for Q {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;
    fn receive(&mut self, _: SmInstant) -> Option<(Rx, Tx<'_>)> {
        let p = self.rx.pop_front()?;
        Some((Rx(p), Tx(&mut self.tx)))
    }
    fn transmit(&mut self, _: SmInstant) -> Option<Tx<'_>> {
        Some(Tx(&mut self.tx))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ip;
        c.max_transmission_unit = 1500;
        c
    }
}

/// What one stack answered to one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    None,
    Ack,
    Rst,
    SynAck,
}

#[derive(Debug, Clone, Copy)]
struct Reply {
    answer: Answer,
    /// Relative to PEER_ISN.
    ack: Option<u32>,
    /// Window in bytes (scaled), from the last answer.
    window: Option<u32>,
    seq: u32,
}

fn classify(rs: &[TcpRepr], peer_isn: u32, wscale: u8) -> Reply {
    let mut out = Reply {
        answer: Answer::None,
        ack: None,
        window: None,
        seq: 0,
    };
    for r in rs {
        out.answer = if r.flags.rst() {
            Answer::Rst
        } else if r.flags.syn() {
            Answer::SynAck
        } else {
            Answer::Ack
        };
        out.seq = r.seq;
        if r.flags.0 & TcpFlags::ACK != 0 {
            out.ack = Some(r.ack.wrapping_sub(peer_isn));
            let shift = if r.flags.syn() { 0 } else { wscale };
            out.window = Some(u32::from(r.window) << shift);
        }
    }
    out
}

struct Nf {
    layer: TcpLayer,
    listener: Handle,
    conn: Option<Handle>,
    now: NfInstant,
}

impl Nf {
    fn input(&mut self, r: &TcpRepr, payload: &[u8]) -> Vec<TcpRepr> {
        self.layer
            .input(self.now, RxSegment::new(PEER, US, r, &[payload]));
        self.out()
    }
    fn out(&mut self) -> Vec<TcpRepr> {
        let mut v = Vec::new();
        self.layer.output(self.now, &mut |s: &OutSegment<'_>| {
            v.push(s.repr);
            true
        });
        if self.conn.is_none() {
            self.conn = self.layer.accept(self.listener).ok();
        }
        v
    }
    fn read(&mut self, into: &mut Vec<u8>) {
        let Some(c) = self.conn else { return };
        let mut b = [0u8; 4096];
        while let Ok(n) = self.layer.recv(c, &mut b) {
            if n == 0 {
                break;
            }
            into.extend_from_slice(&b[..n]);
        }
    }
    fn open(&self) -> bool {
        self.conn
            .and_then(|c| self.layer.state(c).ok())
            .is_some_and(|s| !matches!(s, NfState::Closed | NfState::TimeWait))
    }
}

struct Sm {
    iface: Interface,
    dev: Q,
    set: SocketSet<'static>,
    h: SocketHandle,
    now: SmInstant,
}

impl Sm {
    fn input(&mut self, r: &TcpRepr, payload: &[u8]) -> Vec<TcpRepr> {
        let hl = r.header_len();
        let mut pkt = vec![0u8; 20 + hl + payload.len()];
        let ip = Ipv4Repr {
            src: PEER,
            dst: US,
            protocol: IpProtocol::Tcp,
            payload_len: hl + payload.len(),
            ttl: 64,
            dscp_ecn: 0,
            ident: 1,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        ip.emit(&mut pkt, true).expect("ip header");
        pkt[20 + hl..].copy_from_slice(payload);
        {
            let mut p = TcpPacket::new_unchecked(&mut pkt[20..]);
            r.emit(&mut p);
            p.fill_checksum(&PseudoHeader::new(PEER, US));
        }
        self.dev.rx.push_back(pkt);
        self.out()
    }
    fn out(&mut self) -> Vec<TcpRepr> {
        for _ in 0..4 {
            self.iface.poll(self.now, &mut self.dev, &mut self.set);
        }
        self.dev
            .tx
            .drain(..)
            .filter_map(|p| {
                let ip = Ipv4Packet::new_checked(&p[..]).ok()?;
                let ir = Ipv4Repr::parse(&ip, false).ok()?;
                let seg = &p[ip.header_len()..ip.header_len() + ir.payload_len];
                let tp = TcpPacket::new_checked(seg).ok()?;
                TcpRepr::parse(&tp, &PseudoHeader::new(ir.src, ir.dst), false).ok()
            })
            .collect()
    }
    fn read(&mut self, into: &mut Vec<u8>) {
        let s = self.set.get_mut::<tcp::Socket>(self.h);
        let mut b = [0u8; 4096];
        while let Ok(n) = s.recv_slice(&mut b) {
            if n == 0 {
                break;
            }
            into.extend_from_slice(&b[..n]);
        }
    }
    fn open(&self) -> bool {
        let s = self.set.get::<tcp::Socket>(self.h);
        !matches!(
            s.state(),
            tcp::State::Closed | tcp::State::Listen | tcp::State::TimeWait
        )
    }
}

fn setup() -> (Nf, Sm) {
    let mut layer = TcpLayer::new(netfold::tcp::Secret::fixed_for_tests([3; 16]));
    let listener = layer
        .listen(
            SocketAddrV4::new(US, 80),
            4,
            NfConfig {
                recv_buffer: RCV_BUF,
                delayed_ack: None,
                ..NfConfig::default()
            },
        )
        .expect("listen");
    let nf = Nf {
        layer,
        listener,
        conn: None,
        now: NfInstant::from_millis(1),
    };
    let mut dev = Q::default();
    let mut cfg = SmConfig::new(HardwareAddress::Ip);
    cfg.random_seed = 3;
    let mut iface = Interface::new(cfg, &mut dev, SmInstant::from_millis(1));
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(IpAddress::v4(198, 18, 0, 1), 24));
    });
    let mut sock = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; RCV_BUF]),
        tcp::SocketBuffer::new(vec![0; 4096]),
    );
    sock.set_ack_delay(None);
    sock.listen(80).expect("smoltcp listen");
    let mut set = SocketSet::new(Vec::new());
    let h = set.add(sock);
    let sm = Sm {
        iface,
        dev,
        set,
        h,
        now: SmInstant::from_millis(1),
    };
    (nf, sm)
}

fuzz_target!(|data: &[u8]| {
    let (mut nf, mut sm) = setup();
    let mut inp = Input::new(data);
    // The peer's SYN, options chosen by the input (no timestamps: smoltcp without a tsval
    // generator does not negotiate them, and PAWS would be a known, by-design difference).
    let sel = inp.u8();
    let ws = (sel & 2 != 0).then(|| inp.u8() % 16);
    let syn = TcpRepr {
        src_port: PEER_PORT,
        dst_port: 80,
        seq: PEER_ISN,
        ack: 0,
        flags: TcpFlags(TcpFlags::SYN),
        window: inp.u16().max(1),
        urgent: 0,
        options: TcpOptions {
            mss: (sel & 1 != 0).then(|| inp.u16()),
            window_scale: ws,
            sack_permitted: sel & 4 != 0,
            ..TcpOptions::default()
        },
    };
    let n_sa = classify(&nf.input(&syn, &[]), PEER_ISN, 0);
    let s_sa = classify(&sm.input(&syn, &[]), PEER_ISN, 0);
    if n_sa.answer != s_sa.answer {
        report(
            "syn-answer",
            format!("{syn:?}: netfold {n_sa:?} smoltcp {s_sa:?}"),
        );
        return;
    }
    if n_sa.answer != Answer::SynAck {
        return;
    }
    let isn = [n_sa.seq, s_sa.seq];
    // Complete the handshake on both with a plain ACK.
    for (i, ack) in [(0, isn[0]), (1, isn[1])] {
        let r = TcpRepr {
            seq: PEER_ISN.wrapping_add(1),
            ack: ack.wrapping_add(1),
            flags: TcpFlags(TcpFlags::ACK),
            options: TcpOptions::default(),
            ..syn
        };
        if i == 0 {
            nf.input(&r, &[]);
        } else {
            sm.input(&r, &[]);
        }
    }
    if nf.open() != sm.open() {
        report(
            "handshake",
            format!(
                "{syn:?}: netfold open {} smoltcp open {}",
                nf.open(),
                sm.open()
            ),
        );
        return;
    }
    // Windows are compared only as zero vs open, which the scale does not change.
    let wscale = [0u8; 2];
    let mut got = [Vec::new(), Vec::new()];
    let mut step = 0;
    while !inp.is_empty() && step < 64 {
        step += 1;
        let op = inp.u8();
        if op & 0xc0 == 0xc0 {
            // Time passes on both.
            let ms = u64::from(inp.u16());
            nf.now += NfDuration::from_millis(ms);
            sm.now += smoltcp::time::Duration::from_millis(ms);
            let _ = nf.out();
            let _ = sm.out();
            continue;
        }
        let flags = TcpFlags(inp.u8());
        let seq_off = match op & 3 {
            0 => 1 + u32::from(inp.u16() % 4096),
            1 => 1u32.wrapping_add(inp.u32()),
            2 => 1u32.wrapping_sub(u32::from(inp.u8())),
            _ => 1 + got[0].len().max(got[1].len()) as u32,
        };
        let ack_off = match (op >> 2) & 3 {
            0 => 1,
            1 => 1u32.wrapping_add(u32::from(inp.u8())),
            2 => 1u32.wrapping_sub(u32::from(inp.u8())),
            _ => inp.u32(),
        };
        let len = usize::from(inp.u16() % 1461);
        let payload: Vec<u8> = (0..len).map(|i| (seq_off as usize + i) as u8).collect();
        let window = inp.u16();
        let ts = (op & 0x10 != 0).then(|| Timestamps {
            tsval: inp.u32(),
            tsecr: 0,
        });
        let mut reprs = [TcpRepr {
            seq: PEER_ISN.wrapping_add(seq_off),
            ack: 0,
            flags,
            window,
            options: TcpOptions {
                timestamps: ts,
                ..TcpOptions::default()
            },
            ..syn
        }; 2];
        for (i, r) in reprs.iter_mut().enumerate() {
            r.ack = isn[i].wrapping_add(ack_off);
        }
        let open_before = [nf.open(), sm.open()];
        let n = classify(&nf.input(&reprs[0], &payload), PEER_ISN, wscale[0]);
        let s = classify(&sm.input(&reprs[1], &payload), PEER_ISN, wscale[1]);
        let before = [got[0].len(), got[1].len()];
        nf.read(&mut got[0]);
        sm.read(&mut got[1]);
        let what = || {
            format!(
                "flags {:#04x} seq+{} ack+{} len {} ts {:?} open {:?}: netfold {:?} smoltcp {:?}",
                flags.0, seq_off, ack_off, len, ts, open_before, n, s
            )
        };
        if std::env::var_os("NETFOLD_DIFF_TRACE").is_some() {
            eprintln!("step {step}: {}", what());
        }
        let accepted = [got[0].len() - before[0], got[1].len() - before[1]];
        if accepted[0] != accepted[1] {
            report(
                if accepted[0] > accepted[1] {
                    "accept:netfold-more"
                } else {
                    "accept:smoltcp-more"
                },
                format!("accepted {accepted:?} bytes; {}", what()),
            );
            // What follows would only repeat this difference.
            return;
        } else if got[0] != got[1] {
            report("accept:bytes-differ", what());
            return;
        }
        if n.answer != s.answer {
            let class = match (n.answer, s.answer) {
                (Answer::None, Answer::Ack) => "answer:smoltcp-acks-netfold-silent",
                (Answer::Ack, Answer::None) => "answer:netfold-acks-smoltcp-silent",
                (Answer::Rst, _) => "answer:netfold-rst",
                (_, Answer::Rst) => "answer:smoltcp-rst",
                _ => "answer:other",
            };
            report(class, what());
        } else if n.ack != s.ack {
            report("ack-number", what());
            return;
        } else if n.window.map(|w| w == 0) != s.window.map(|w| w == 0) {
            report("window:zero-vs-open", what());
        }
        if nf.open() != sm.open() {
            report(
                if nf.open() {
                    "state:smoltcp-closed"
                } else {
                    "state:netfold-closed"
                },
                what(),
            );
            return;
        }
    }
});
