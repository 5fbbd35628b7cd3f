//! Zero-copy send (`tcp/zerocopy.rs`) over two stacks joined by the in-memory pipe, in virtual
//! time: byte-exact delivery of application buffers mixed with copied writes under loss,
//! reordering, duplication and corruption; each buffer completed exactly once (acknowledged,
//! or not when the connection is reset, aborted or the stack dropped); the bounds; and the
//! scatter-gather path, on which the sending stack copies and sums no payload byte.

use netfold::buf::ZcBuf;
use netfold::phy::pipe::PipeConfig;
use netfold::phy::ChecksumCaps;
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp::{self, ZcCompletion, ZcCompletions};
use netfold::time::Duration;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net, Rng};
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::SocketAddrV4;

/// A number in `0..n` (`n > 0`).
fn below(rng: &mut Rng, n: u64) -> u64 {
    rng.next() % n
}

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn tcfg() -> tcp::Config {
    tcp::Config {
        time_wait: Duration::from_secs(1),
        ..tcp::Config::default()
    }
}

/// A connected pair: client stream on `a`, server stream on `b`.
fn connected(link: PipeConfig) -> (Net, TcpStream, TcpStream) {
    let mut n = Net::pipe(config(A, 1), config(B, 2), link);
    let l = TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 80), 4, tcfg()).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 80), tcfg()).unwrap();
    for _ in 0..50 {
        n.settle();
        n.skip_to_next_timer();
        if c.is_connected(&mut n.a).unwrap() {
            break;
        }
    }
    let (s, _) = l.accept(&mut n.b).unwrap();
    (n, c, s)
}

fn drain(done: &ZcCompletions) -> Vec<ZcCompletion> {
    let mut v = Vec::new();
    done.take(&mut v, usize::MAX);
    v
}

/// What the sender queued, in stream order: (zero-copy id or None for a copied write, bytes).
struct Sender {
    region: ZcBuf,
    sent: Vec<u8>,
    /// id -> (user value, length) of every accepted buffer.
    ids: BTreeMap<u64, (u64, usize)>,
    copied: usize,
}

impl Sender {
    fn new(rng: &mut Rng) -> Sender {
        let bytes = rng.bytes(200_000);
        Sender {
            region: ZcBuf::from(bytes),
            sent: Vec::new(),
            ids: BTreeMap::new(),
            copied: 0,
        }
    }

    /// Offers the next piece: a zero-copy window of the shared region (most of the time), a
    /// buffer of its own, or a copied write. Returns whether anything was taken.
    fn offer(&mut self, n: &mut Net, c: &TcpStream, rng: &mut Rng) -> bool {
        let len = 1 + below(rng, 20_000) as usize;
        let at = below(rng, (self.region.len() - len) as u64) as usize;
        match below(rng, 8) {
            0 | 1 => {
                let data = self.region.slice(at..at + len).to_vec();
                match c.write(&mut n.a, &data) {
                    Ok(k) => {
                        self.sent.extend_from_slice(&data[..k]);
                        self.copied += k;
                        true
                    }
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::WouldBlock);
                        false
                    }
                }
            }
            k => {
                let buf = if k == 2 {
                    ZcBuf::from(self.region.slice(at..at + len).to_vec())
                } else {
                    self.region.slice(at..at + len)
                };
                let user = below(rng, u64::MAX);
                match c.send_zc_with(&mut n.a, buf.clone(), user) {
                    Ok(s) => {
                        assert!(s.len >= 1 && s.len <= len);
                        assert!(self.ids.insert(s.id, (user, s.len)).is_none());
                        self.sent.extend_from_slice(&buf[..s.len]);
                        true
                    }
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::WouldBlock);
                        false
                    }
                }
            }
        }
    }
}

/// Every accepted buffer completed exactly once, with its user value and length.
fn check_completions(got: &[ZcCompletion], ids: &BTreeMap<u64, (u64, usize)>, acked: bool) {
    let mut seen = BTreeMap::new();
    for c in got {
        assert!(seen.insert(c.id, *c).is_none(), "completion {c:?} twice");
        let (user, len) = ids[&c.id];
        assert_eq!((c.user, c.len), (user, len), "completion {c:?}");
        if acked {
            assert!(c.acked, "{c:?}");
        }
    }
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        ids.keys().collect::<Vec<_>>(),
        "every buffer completed"
    );
}

fn read_all(n: &mut Net, s: &TcpStream, got: &mut Vec<u8>) -> bool {
    let mut buf = vec![0u8; 65536];
    loop {
        match s.read(&mut n.b, &mut buf) {
            Ok(0) => return true,
            Ok(k) => got.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Sends `total` bytes of mixed zero-copy and copied data, reads them back, closes; returns
/// the completions, the sender's record and the client stack's counters.
fn transfer(
    link: PipeConfig,
    seed: u64,
    total: usize,
) -> (Vec<ZcCompletion>, Sender, netfold::iface::Counters) {
    let (mut n, c, s) = connected(link);
    let mut rng = Rng::new(seed);
    let mut tx = Sender::new(&mut rng);
    let done = c.zc_completions(&mut n.a).unwrap();
    let mut got = Vec::new();
    let mut completions = Vec::new();
    let mut fin = false;
    for _ in 0..2_000_000 {
        while tx.sent.len() < total && tx.offer(&mut n, &c, &mut rng) {}
        if tx.sent.len() >= total && !fin {
            c.shutdown_write(&mut n.a).unwrap();
            fin = true;
        }
        if !n.step() {
            n.skip_to_next_timer();
        }
        completions.extend(drain(&done));
        if read_all(&mut n, &s, &mut got) {
            break;
        }
    }
    assert_eq!(got.len(), tx.sent.len(), "everything arrived");
    assert!(got == tx.sent, "byte-exact");
    // Our FIN acknowledged: every buffer is released, acknowledged.
    for _ in 0..1000 {
        if done.outstanding().buffers == 0 {
            break;
        }
        n.settle();
        n.skip_to_next_timer();
    }
    completions.extend(drain(&done));
    let counters = n.a.counters();
    c.close(&mut n.a).unwrap();
    s.close(&mut n.b).unwrap();
    n.run_for(Duration::from_secs(3));
    assert!(drain(&done).is_empty(), "nothing completes twice");
    (completions, tx, counters)
}

#[test]
fn mixed_stream_is_byte_exact_and_each_buffer_completes_once_acknowledged() {
    let (done, tx, c) = transfer(PipeConfig::default(), 1, 3_000_000);
    check_completions(&done, &tx.ids, true);
    assert!(
        tx.ids.len() > 100 && tx.copied > 100_000,
        "both kinds were sent"
    );
    let ids: Vec<u64> = done.iter().map(|c| c.id).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "released in order on a clean link");
    // The in-memory link: one fused copy per payload byte, as on the copying path.
    assert!(c.bytes_copied >= 3_000_000 && c.zc_frames == 0);
}

#[test]
fn impairments_retransmit_the_same_bytes_and_complete_exactly_once() {
    for seed in [2, 3, 4] {
        let link = PipeConfig::default()
            .seed(seed)
            .loss(0.02)
            .reorder(0.02)
            .duplicate(0.01)
            .corrupt(0.005);
        let (done, tx, c) = transfer(link, seed, 1_500_000);
        check_completions(&done, &tx.ids, true);
        assert!(
            c.tcp.retransmits_fast + c.tcp.retransmits_rto > 0,
            "seed {seed}: the loss was recovered by retransmission"
        );
    }
    // The same over a scatter-gather link (frames referring to the buffers are lost,
    // duplicated and held back; retransmissions refer to them again).
    // (With TSO a frame is a 64 KiB super-segment: fewer frames, so more loss per frame.)
    for (seed, tso, loss) in [(5, false, 0.02), (6, true, 0.1)] {
        let link = sg_link()
            .tso(tso)
            .seed(seed)
            .loss(loss)
            .reorder(0.02)
            .duplicate(0.01);
        let (done, tx, c) = transfer(link, seed, 1_500_000);
        check_completions(&done, &tx.ids, true);
        assert!(
            c.zc_frames > 0 && c.tcp.retransmits_fast + c.tcp.retransmits_rto > 0,
            "{} {} {}",
            c.zc_frames,
            c.tcp.retransmits_fast,
            c.tcp.retransmits_rto
        );
    }
}

/// A link that takes fragments and guarantees checksums (offload mode): the sender builds
/// headers only; the pipe reads the application's bytes as a NIC's DMA would.
fn sg_link() -> PipeConfig {
    PipeConfig::default()
        .checksum(ChecksumCaps {
            tx: false,
            rx: false,
        })
        .scatter_gather(true)
}

/// [`connected`] over IPv6: both stacks also at 2001:2::1 and ::2 (DAD off), the connection
/// to [2001:2::2]:80.
fn connected6(link: PipeConfig) -> (Net, TcpStream, TcpStream) {
    use netfold::wire::ipv6::{Ipv6Addr, Ipv6Cidr};
    let (a6, b6): (Ipv6Addr, Ipv6Addr) =
        ("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap());
    let cfg = |v4, v6, last| netfold::iface::StackConfig {
        addrs6: vec![Ipv6Cidr::new(v6, 64).unwrap()],
        dad_transmits: 0,
        ..config(v4, last)
    };
    let mut n = Net::pipe(cfg(A, a6, 1), cfg(B, b6, 2), link);
    let to = std::net::SocketAddr::new(b6.into(), 80);
    let l = TcpListener::bind(&mut n.b, to, 4, tcfg()).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, to, tcfg()).unwrap();
    for _ in 0..50 {
        n.settle();
        n.skip_to_next_timer();
        if c.is_connected(&mut n.a).unwrap() {
            break;
        }
    }
    let (s, _) = l.accept(&mut n.b).unwrap();
    (n, c, s)
}

#[test]
fn scatter_gather_sends_references_and_touches_no_payload_byte() {
    for (tso, v6) in [(false, false), (true, false), (false, true), (true, true)] {
        let (mut n, c, s) = if v6 {
            // Over IPv6 the same (the IPv6 header template path).
            connected6(sg_link().tso(tso))
        } else {
            connected(sg_link().tso(tso))
        };
        let done = c.zc_completions(&mut n.a).unwrap();
        let region = ZcBuf::from(
            (0..1_000_000u32)
                .map(|i| (i * 13 % 251) as u8)
                .collect::<Vec<u8>>(),
        );
        let mut off = 0;
        let mut got = Vec::new();
        while got.len() < region.len() {
            if off < region.len() {
                let end = (off + 40_000).min(region.len());
                if let Ok(sent) = c.send_zc(&mut n.a, region.slice(off..end)) {
                    off += sent.len;
                }
            }
            n.settle();
            n.skip_to_next_timer();
            read_all(&mut n, &s, &mut got);
        }
        assert!(got[..] == region[..]);
        for _ in 0..100 {
            if done.outstanding().buffers == 0 {
                break;
            }
            n.skip_to_next_timer();
            n.settle();
        }
        let k = n.a.counters();
        if v6 {
            assert!(k.ipv6_out > 0 && k.ipv4_out == 0, "over IPv6");
        }
        assert_eq!(
            k.bytes_copied, 0,
            "tso {tso} v6 {v6}: no payload byte copied by the sender"
        );
        assert_eq!(k.bytes_checksummed, 0, "tso {tso}: nor summed");
        assert!(k.zc_frames > 0 && k.zc_bytes >= region.len() as u64);
        assert_eq!(n.ea.stats().sg_bytes, k.zc_bytes, "the link read them");
        assert_eq!(done.outstanding().buffers, 0);
        let all = drain(&done);
        assert!(!all.is_empty() && all.iter().all(|c| c.acked));
        assert_eq!(region.ref_count(), 1, "no reference left anywhere");
    }
}

#[test]
fn reset_completes_outstanding_buffers_unacknowledged() {
    let (mut n, c, s) = connected(PipeConfig::default());
    let done = c.zc_completions(&mut n.a).unwrap();
    let region = ZcBuf::from(vec![7u8; 4_000_000]);
    // The server never reads: its window closes and buffers stay queued.
    let mut ids = BTreeMap::new();
    let mut off = 0;
    for _ in 0..100 {
        if let Ok(sent) = c.send_zc_with(&mut n.a, region.slice(off..off + 30_000), off as u64) {
            ids.insert(sent.id, (off as u64, sent.len));
            off += sent.len;
        }
        n.settle();
    }
    let early = drain(&done);
    assert!(early.iter().all(|c| c.acked));
    let out = done.outstanding();
    assert!(
        out.buffers > 0 && out.bytes > 0,
        "some are still queued: {out:?}"
    );
    // The server aborts: RST.
    s.abort(&mut n.b).unwrap();
    n.settle();
    let late = drain(&done);
    assert_eq!(late.len(), out.buffers);
    assert!(late.iter().all(|c| !c.acked), "reset: not acknowledged");
    let mut all = early;
    all.extend(late);
    check_completions(&all, &ids, false);
    assert_eq!(done.outstanding(), Default::default());
    // The error is reported once; sending again is refused and completes nothing.
    let e = c.send_zc(&mut n.a, region.slice(..10)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    assert!(c.send_zc(&mut n.a, region.slice(..10)).is_err());
    assert!(drain(&done).is_empty());
    assert_eq!(region.ref_count(), 1);
}

/// A pipe end whose every frame is lost (swapped in for a connected client's device).
fn black_hole() -> netfold::phy::pipe::PipeEnd {
    netfold::phy::pipe::Pipe::new(PipeConfig::default().loss(1.0)).0
}

#[test]
fn local_abort_and_dropping_the_stack_complete_everything() {
    // Abort, with the data lost on the way.
    let (mut n, c, _s) = connected(PipeConfig::default());
    n.ea = black_hole();
    let done = c.zc_completions(&mut n.a).unwrap();
    let region = ZcBuf::from(vec![1u8; 100_000]);
    let sent = c.send_zc(&mut n.a, region.slice(..50_000)).unwrap();
    n.settle();
    c.abort(&mut n.a).unwrap();
    n.settle();
    assert_eq!(
        drain(&done),
        vec![ZcCompletion {
            id: sent.id,
            user: 0,
            len: sent.len,
            acked: false
        }]
    );
    // Drop of the whole stack with buffers queued and frames in flight.
    let (mut n, c, _s) = connected(PipeConfig::default());
    n.ea = black_hole();
    let done = c.zc_completions(&mut n.a).unwrap();
    for i in 0..5 {
        c.send_zc(&mut n.a, region.slice(i * 1000..(i + 1) * 1000))
            .unwrap();
    }
    n.settle();
    assert_eq!(done.pending(), 0);
    drop(n);
    let all = drain(&done);
    assert_eq!(
        all.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert!(all.iter().all(|c| !c.acked));
    assert_eq!(region.ref_count(), 1);
    // A graceful close with a peer that vanished: the retransmission timeout gives up.
    let (mut n, c, _s) = connected(PipeConfig::default());
    let done = c.zc_completions(&mut n.a).unwrap();
    c.send_zc(&mut n.a, region.slice(..10)).unwrap();
    n.ea = black_hole();
    c.close(&mut n.a).unwrap();
    for _ in 0..200 {
        if done.pending() > 0 {
            break;
        }
        n.skip_to_next_timer();
        n.settle();
    }
    assert_eq!(drain(&done).len(), 1);
}

#[test]
fn bounds_and_refusals() {
    let (mut n, c, s) = connected(PipeConfig::default());
    let done = c.zc_completions(&mut n.a).unwrap();
    let big = ZcBuf::from(vec![3u8; 64 << 20]);
    // Larger than the send buffer: a prefix is taken, as write takes what fits.
    let first = c.send_zc(&mut n.a, big.clone()).unwrap();
    assert!(first.len < big.len() && first.len <= 4 << 20);
    // Full: WouldBlock (the copying path sees the same buffer full).
    let e = c.send_zc(&mut n.a, big.slice(first.len..)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
    assert_eq!(
        c.write(&mut n.a, b"x").unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // Empty buffers are refused.
    let e = c.send_zc(&mut n.a, ZcBuf::from(Vec::new())).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // The entry bound: completions not taken count until taken.
    let mut got = Vec::new();
    while got.len() < first.len {
        n.settle();
        read_all(&mut n, &s, &mut got);
    }
    n.settle();
    assert_eq!(done.pending(), 1);
    done.set_max_entries(2);
    c.send_zc(&mut n.a, big.slice(..100)).unwrap();
    let e = c.send_zc(&mut n.a, big.slice(..100)).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::WouldBlock,
        "1 untaken + 1 outstanding = 2"
    );
    assert_eq!(done.next().map(|c| c.id), Some(0));
    c.send_zc(&mut n.a, big.slice(..100)).unwrap();
    // After shutdown: EPIPE.
    c.shutdown_write(&mut n.a).unwrap();
    let e = c.send_zc(&mut n.a, big.slice(..100)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BrokenPipe);
}
