//! Passes over payload bytes and single-pass receive (item 2): the pass
//! counters on a known transfer, the posted read (frame to application buffer in one pass,
//! checksum verified in it, committed only if it verifies), the fallback into the receive
//! ring, and the borrowing read. Two stacks on the in-memory pipe, in virtual time.

use netfold::buf::PacketBuf;
use netfold::iface::counters::PayloadPasses;
use netfold::mem::CopyMode;
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use netfold::phy::{Device, DeviceCaps};
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp;
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::EthernetFrame;
use netfold::wire::ipv4::Ipv4Packet;
use netfold::wire::tcp::TcpPacket;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net};
use std::io::ErrorKind;
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MIB: usize = 1 << 20;

/// The stream's bytes repeat every `PERIOD` bytes.
const PERIOD: usize = 4 * MIB;

/// The stream's byte at offset `i` (no two nearby segments alike).
fn pattern(i: usize) -> u8 {
    let i = i % PERIOD;
    (i % 251) as u8 ^ (i >> 12) as u8
}

/// Posts `buf` as a read on `s` (which must take it).
fn post(stack: &mut netfold::iface::Stack, s: &TcpStream, buf: Vec<u8>) {
    if let Err((e, _)) = s.post_read(stack, buf) {
        panic!("post_read: {e}");
    }
}

/// What a test does to the frames a stack receives, batch by batch.
type Hook = Box<dyn FnMut(&mut [PacketBuf])>;

/// A pipe end whose received frames a test may tamper with before the stack sees them.
struct Tamper {
    inner: PipeEnd,
    hook: Option<Hook>,
}

impl Device for Tamper {
    fn caps(&self) -> DeviceCaps {
        self.inner.caps()
    }
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut netfold::buf::Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let start = out.len();
        let n = self.inner.recv_batch(now, pool, out, max);
        if let Some(h) = self.hook.as_mut() {
            h(&mut out[start..]);
        }
        n
    }
    fn send_batch(&mut self, now: Instant, pool: &mut netfold::buf::Pool, f: &mut Vec<PacketBuf>) {
        self.inner.send_batch(now, pool, f)
    }
    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }
}

/// The TCP payload length of a frame (0 for anything else).
fn tcp_payload_len(f: &PacketBuf) -> usize {
    let Ok(eth) = EthernetFrame::new_checked(f.as_slice()) else {
        return 0;
    };
    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
        return 0;
    };
    TcpPacket::new_checked(ip.payload()).map_or(0, |t| t.payload().len())
}

fn tcfg() -> tcp::Config {
    tcp::Config {
        time_wait: Duration::from_secs(1),
        ..tcp::Config::default()
    }
}

/// Stacks A (client) and B (server) with `mode` as their copy path, joined by `link`; B's
/// received frames go through `hook`. Returns the net and the connected pair.
fn setup(
    mode: CopyMode,
    link: PipeConfig,
    hook: Option<Hook>,
) -> (Net<Tamper>, TcpStream, TcpStream) {
    let (ea, eb) = Pipe::new(link);
    let cfg = |addr, last| netfold::iface::StackConfig {
        copy_mode: mode,
        ..config(addr, last)
    };
    let mut n = Net::new(
        netfold::iface::Stack::new(cfg(A, 1)),
        netfold::iface::Stack::new(cfg(B, 2)),
        Tamper {
            inner: ea,
            hook: None,
        },
        Tamper { inner: eb, hook },
    );
    let l = TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 80), 4, tcfg()).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 80), tcfg()).unwrap();
    n.settle();
    let (s, _) = l.accept(&mut n.b).unwrap();
    assert!(c.is_connected(&mut n.a).unwrap());
    (n, c, s)
}

/// How the server reads.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Reader {
    /// `read` into a buffer: copied out of the receive ring.
    Ring,
    /// A posted read, taken back and posted again after every step.
    Posted,
    /// A borrowing read (in place).
    InPlace,
}

/// Sends `total` pattern bytes from A to B and reads them with `reader` in `chunk`-byte reads,
/// checking every byte; returns the bytes read.
fn transfer(
    n: &mut Net<Tamper>,
    c: &TcpStream,
    s: &TcpStream,
    total: usize,
    reader: Reader,
) -> usize {
    let chunk = 64 << 10;
    let src: Vec<u8> = (0..total.min(PERIOD)).map(pattern).collect();
    let mut buf = vec![0u8; chunk];
    let (mut sent, mut got) = (0usize, 0usize);
    let mut posted = false;
    let mut idle = 0;
    while got < total {
        while sent < total {
            // `pattern` repeats, so the source is one period.
            let at = sent % PERIOD;
            let end = (at + (total - sent)).min(src.len());
            match c.write(&mut n.a, &src[at..end]) {
                Ok(k) => sent += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        if reader == Reader::Posted && !posted {
            post(&mut n.b, s, std::mem::take(&mut buf));
            posted = true;
        }
        if !n.step() {
            idle += 1;
            assert!(idle < 100_000, "stuck at {got} of {total}");
        }
        let check = |bytes: &[u8], got: &mut usize| {
            for (i, &b) in bytes.iter().enumerate() {
                assert_eq!(b, pattern(*got + i), "byte {}", *got + i);
            }
            *got += bytes.len();
        };
        match reader {
            Reader::Ring => loop {
                match s.read(&mut n.b, &mut buf) {
                    Ok(0) => panic!("early EOF"),
                    Ok(k) => check(&buf[..k], &mut got),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            },
            // Like `read` until WouldBlock: a full buffer is taken and posted again at once,
            // so what waits in the ring (bytes that did not fit) is read before the next
            // poll, and the next bytes find the ring empty and go straight in.
            Reader::Posted => loop {
                let (b, r) = s.take_read(&mut n.b).unwrap();
                buf = b;
                posted = false;
                match r {
                    Ok(0) => panic!("early EOF"),
                    Ok(k) => check(&buf[..k], &mut got),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
                if n.b.tcp().recv_queue(s.handle()).unwrap() == 0 {
                    break;
                }
                // Posted again here and taken at the top of the loop.
                post(&mut n.b, s, std::mem::take(&mut buf));
            },
            Reader::InPlace => loop {
                let r = s.read_in_place(&mut n.b, |a, b| {
                    // Consume at most one chunk per call, across the wrap.
                    let k = (a.len() + b.len()).min(chunk);
                    let ka = k.min(a.len());
                    check(&a[..ka], &mut got);
                    check(&b[..k - ka], &mut got);
                    k
                });
                match r {
                    Ok(0) => panic!("early EOF"),
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            },
        }
    }
    got
}

/// The passes of A (sender) and B (receiver) since `before`.
fn passes(
    n: &Net<Tamper>,
    before: (PayloadPasses, PayloadPasses),
) -> (PayloadPasses, PayloadPasses) {
    (
        n.a.counters().payload_passes().since(&before.0),
        n.b.counters().payload_passes().since(&before.1),
    )
}

fn snapshot(n: &Net<Tamper>) -> (PayloadPasses, PayloadPasses) {
    (
        n.a.counters().payload_passes(),
        n.b.counters().payload_passes(),
    )
}

/// On a clean link nothing is sent twice, so every stage's count is exact.
fn assert_clean(n: &Net<Tamper>) {
    let (a, b) = (n.a.counters(), n.b.counters());
    assert_eq!(
        a.tcp.retransmits_fast + a.tcp.retransmits_rto + a.tcp.tlp_probes,
        0,
        "{a}"
    );
    assert_eq!(a.tcp.persist_probes, 0, "{a}");
    assert_eq!(b.tcp_bad_checksum, 0);
}

#[test]
fn one_mib_through_the_ring_is_two_passes_per_byte_at_each_end() {
    let (mut n, c, s) = setup(CopyMode::Kernels, PipeConfig::default(), None);
    let before = snapshot(&n);
    assert_eq!(transfer(&mut n, &c, &s, MIB, Reader::Ring), MIB);
    assert_clean(&n);
    let (a, b) = passes(&n, before);
    let m = MIB as u64;
    // Sender: application -> send ring, send ring -> frame with the checksum folded in.
    assert_eq!(
        (a.sent, a.tx_copy_app, a.tx_copy_frame, a.tx_csum_separate),
        (m, m, m, 0)
    );
    assert_eq!(a.tx_per_byte(), Some(2.0));
    // Receiver: frame -> ring with the checksum verified in that copy, ring -> application.
    assert_eq!((b.received, b.rx_copy_ring, b.rx_copy_app), (m, m, m));
    assert_eq!(
        (b.rx_copy_direct, b.rx_csum_separate, b.rx_in_place),
        (0, 0, 0)
    );
    assert_eq!(b.rx_per_byte(), Some(2.0));
    // Nothing flowed the other way.
    assert_eq!((a.received, b.sent), (0, 0));
    // The interface summed only the headers on its own: every payload byte was verified in
    // the copy into the ring.
    let cb = n.b.counters();
    assert_eq!(cb.tcp_rx_csum_separate, 0);
    assert!(
        cb.bytes_checksummed >= m && cb.bytes_checksummed_separately < m / 20,
        "{cb}"
    );
}

#[test]
fn the_2002_baseline_adds_a_checksum_pass_at_each_end() {
    let (mut n, c, s) = setup(CopyMode::Baseline, PipeConfig::default(), None);
    let before = snapshot(&n);
    assert_eq!(transfer(&mut n, &c, &s, MIB, Reader::Ring), MIB);
    assert_clean(&n);
    let (a, b) = passes(&n, before);
    let m = MIB as u64;
    assert_eq!(
        (a.tx_copy_app, a.tx_copy_frame, a.tx_csum_separate),
        (m, m, m)
    );
    assert_eq!(
        (b.rx_copy_ring, b.rx_copy_app, b.rx_csum_separate),
        (m, m, m)
    );
    assert_eq!((a.tx_per_byte(), b.rx_per_byte()), (Some(3.0), Some(3.0)));
}

#[test]
fn a_posted_read_takes_most_bytes_straight_from_the_frames() {
    let (mut n, c, s) = setup(CopyMode::Kernels, PipeConfig::default(), None);
    let before = snapshot(&n);
    assert_eq!(transfer(&mut n, &c, &s, MIB, Reader::Posted), MIB);
    assert_clean(&n);
    let (_, b) = passes(&n, before);
    let m = MIB as u64;
    // Every byte arrived once: straight into the posted buffer or, when it did not fit
    // there, into the ring (and from there into the next posted buffer).
    assert_eq!(b.received, m);
    assert_eq!(b.rx_copy_direct + b.rx_copy_ring, m, "{b:?}");
    assert_eq!(b.rx_copy_app, b.rx_copy_ring, "{b:?}");
    assert_eq!(b.rx_csum_separate, 0);
    assert!(b.rx_copy_direct > m / 2, "{b:?}");
    let per = b.rx_per_byte().unwrap();
    assert!((1.0..1.5).contains(&per), "{per} passes per byte: {b:?}");
}

#[test]
fn a_borrowing_read_makes_one_pass_per_byte() {
    let (mut n, c, s) = setup(CopyMode::Kernels, PipeConfig::default(), None);
    let before = snapshot(&n);
    assert_eq!(transfer(&mut n, &c, &s, MIB, Reader::InPlace), MIB);
    assert_clean(&n);
    let (_, b) = passes(&n, before);
    let m = MIB as u64;
    assert_eq!((b.received, b.rx_in_place, b.rx_copy_ring), (m, m, m));
    assert_eq!(
        (b.rx_copy_app, b.rx_copy_direct, b.rx_csum_separate),
        (0, 0, 0)
    );
    assert_eq!(b.rx_per_byte(), Some(1.0));
}

/// A hook that flips the last byte (payload) of the first `count` TCP data frames it sees.
fn corrupt_first_data_frames(count: usize) -> Hook {
    let mut left = count;
    Box::new(move |frames| {
        for f in frames.iter_mut() {
            if left > 0 && tcp_payload_len(f) > 0 {
                let s = f.as_mut_slice();
                let last = s.len() - 1;
                s[last] ^= 0x5a;
                left -= 1;
            }
        }
    })
}

#[test]
fn a_corrupt_segment_is_not_committed_to_a_posted_read() {
    let (mut n, c, s) = setup(
        CopyMode::Kernels,
        PipeConfig::default(),
        Some(corrupt_first_data_frames(1)),
    );
    let data: Vec<u8> = (0..1000).map(pattern).collect();
    post(&mut n.b, &s, vec![0u8; 8192]);
    assert_eq!(c.write(&mut n.a, &data).unwrap(), 1000);
    n.settle();
    let cb = n.b.counters();
    assert_eq!(cb.tcp_bad_checksum, 1, "{cb}");
    let p = cb.payload_passes();
    // The bytes were copied into the posted buffer (the one pass) and the checksum failed in
    // that copy: nothing is committed, nothing reported as read.
    assert_eq!((p.rx_copy_direct, p.received), (1000, 0));
    assert_eq!(
        s.read(&mut n.b, &mut [0u8; 8]).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let (buf, r) = s.take_read(&mut n.b).unwrap();
    assert_eq!(r.unwrap_err().kind(), ErrorKind::WouldBlock);
    // What the buffer holds beyond what was reported is the corrupt copy, never data.
    let diff = buf[..1000]
        .iter()
        .zip(&data)
        .filter(|(x, y)| x != y)
        .count();
    assert_eq!(diff, 1, "the corrupt copy landed there, uncommitted");
    // RCV.NXT did not move: the sender's retransmission is taken, exactly once.
    post(&mut n.b, &s, buf);
    let mut got = Vec::new();
    for _ in 0..50 {
        n.skip_to_next_timer();
        n.settle();
        let (buf, r) = s.take_read(&mut n.b).unwrap();
        match r {
            Ok(k) => {
                got.extend_from_slice(&buf[..k]);
                break;
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::WouldBlock),
        }
        post(&mut n.b, &s, buf);
    }
    assert_eq!(got, data);
    let p = n.b.counters().payload_passes();
    assert_eq!(p.received, 1000);
    assert_eq!(
        p.rx_copy_direct, 2000,
        "the retransmission went straight in too"
    );
}

#[test]
fn a_corrupt_segment_in_a_train_costs_only_that_segment() {
    // 4 segments arrive in one batch (one GRO train) with the third corrupt: TCP finds it
    // in its copy, drops it and takes the others one by one; the last one is out of order
    // then and waits in the ring.
    let mut seen = 0;
    let hook: Hook = Box::new(move |frames| {
        for f in frames.iter_mut() {
            if tcp_payload_len(f) > 0 {
                seen += 1;
                if seen == 3 {
                    let s = f.as_mut_slice();
                    let last = s.len() - 1;
                    s[last] ^= 1;
                }
            }
        }
    });
    let (mut n, c, s) = setup(CopyMode::Kernels, PipeConfig::default(), Some(hook));
    let mss = 1448;
    let data: Vec<u8> = (0..4 * mss).map(pattern).collect();
    post(&mut n.b, &s, vec![0u8; 64 << 10]);
    assert_eq!(c.write(&mut n.a, &data).unwrap(), data.len());
    n.quiesce();
    let cb = n.b.counters();
    assert_eq!((cb.tcp_bad_checksum, cb.gro_merges), (1, 3), "{cb}");
    assert_eq!(cb.tcp.ooo_bytes_queued, mss as u64, "{cb}");
    // The two before the bad one are readable (the sender may have repaired the hole
    // already: the out-of-order segment is SACKed at once).
    let (buf, r) = s.take_read(&mut n.b).unwrap();
    let k = r.unwrap();
    assert!(k >= 2 * mss, "{k}");
    let mut got = buf[..k].to_vec();
    post(&mut n.b, &s, buf);
    for _ in 0..50 {
        if got.len() == data.len() {
            break;
        }
        n.skip_to_next_timer();
        n.settle();
        let (buf, r) = s.take_read(&mut n.b).unwrap();
        if let Ok(k) = r {
            got.extend_from_slice(&buf[..k]);
        }
        post(&mut n.b, &s, buf);
    }
    assert_eq!(got, data);
}

#[test]
fn out_of_order_segments_go_to_the_ring_not_the_posted_read() {
    // The first two data frames of a batch swapped: the later one arrives first.
    let mut done = false;
    let hook: Hook = Box::new(move |frames| {
        if done {
            return;
        }
        let idx: Vec<usize> = (0..frames.len())
            .filter(|&i| tcp_payload_len(&frames[i]) > 0)
            .collect();
        if idx.len() >= 2 {
            frames.swap(idx[0], idx[1]);
            done = true;
        }
    });
    let (mut n, c, s) = setup(CopyMode::Kernels, PipeConfig::default(), Some(hook));
    let mss = 1448;
    let data: Vec<u8> = (0..2 * mss).map(pattern).collect();
    post(&mut n.b, &s, vec![0u8; 64 << 10]);
    assert_eq!(c.write(&mut n.a, &data).unwrap(), data.len());
    n.quiesce();
    let cb = n.b.counters();
    assert_eq!(cb.tcp.ooo_bytes_queued, mss as u64, "{cb}");
    let p = cb.payload_passes();
    // The out-of-order segment went into the ring at its offset; the one that filled the gap
    // went in behind it (data was waiting ahead of it in the ring, so not to the posted
    // read), each with its checksum verified in that copy.
    assert_eq!(
        (p.rx_copy_direct, p.rx_copy_ring, p.rx_csum_separate),
        (0, 2 * mss as u64, 0)
    );
    let (buf, r) = s.take_read(&mut n.b).unwrap();
    assert_eq!(r.unwrap(), 2 * mss);
    assert_eq!(&buf[..2 * mss], &data[..]);
    let p = n.b.counters().payload_passes();
    assert_eq!(
        (p.rx_copy_app, p.received),
        (2 * mss as u64, 2 * mss as u64)
    );
}

#[test]
fn a_posted_read_reports_end_of_stream_and_refuses_a_second_post() {
    let (mut n, c, s) = setup(CopyMode::Kernels, PipeConfig::default(), None);
    assert_eq!(
        s.take_read(&mut n.b).unwrap_err().kind(),
        ErrorKind::InvalidInput,
        "nothing posted"
    );
    post(&mut n.b, &s, vec![0u8; 16]);
    let (again, back) = s.post_read(&mut n.b, vec![7u8; 16]).unwrap_err();
    assert_eq!(again.kind(), ErrorKind::InvalidInput);
    assert_eq!(back, vec![7u8; 16], "a refused buffer comes back");
    // 40 bytes, then FIN: the posted 16 bytes fill, the rest waits in the ring.
    let data: Vec<u8> = (0..40).map(pattern).collect();
    c.write(&mut n.a, &data).unwrap();
    c.shutdown_write(&mut n.a).unwrap();
    n.settle();
    let mut got = Vec::new();
    loop {
        let (buf, r) = s.take_read(&mut n.b).unwrap();
        match r.unwrap() {
            0 => break,
            k => got.extend_from_slice(&buf[..k]),
        }
        post(&mut n.b, &s, buf);
    }
    assert_eq!(got, data);
}

#[test]
fn sixty_four_mib_through_posted_reads_with_loss_reorder_and_corruption_is_byte_exact() {
    let link = PipeConfig::default()
        .loss(0.01)
        .reorder(0.01)
        .duplicate(0.005)
        .corrupt(0.002)
        .seed(13);
    let (mut n, c, s) = setup(CopyMode::Kernels, link, None);
    let total = 64 * MIB;
    assert_eq!(transfer(&mut n, &c, &s, total, Reader::Posted), total);
    let cb = n.b.counters();
    let p = cb.payload_passes();
    assert_eq!(p.received, total as u64);
    // Corrupt segments were caught (the pipe corrupts past the link header: some land in
    // IPv4 headers, the rest in TCP) and out-of-order data went through the ring.
    assert!(cb.tcp_bad_checksum > 0, "{cb}");
    assert!(cb.tcp.ooo_bytes_queued > 0, "{cb}");
    assert!(p.rx_copy_direct > 0 && p.rx_copy_ring > 0, "{p:?}");
}

#[test]
fn zero_copy_send_and_a_posted_read_make_one_pass_per_byte_at_the_sender() {
    // The sender lends its bytes (`send_zc`): the only pass at the sender is the copy into
    // the frame with the checksum folded in.
    let (mut n, c, s) = setup(CopyMode::Kernels, PipeConfig::default(), None);
    let before = snapshot(&n);
    let region = netfold::buf::ZcBuf::from((0..MIB).map(pattern).collect::<Vec<u8>>());
    let (mut off, mut got) = (0usize, Vec::new());
    let mut buf = vec![0u8; 256 << 10];
    while got.len() < MIB {
        if off < MIB {
            if let Ok(z) = c.send_zc(&mut n.a, region.slice(off..MIB)) {
                off += z.len;
            }
        }
        post(&mut n.b, &s, std::mem::take(&mut buf));
        n.step();
        let (b, r) = s.take_read(&mut n.b).unwrap();
        buf = b;
        if let Ok(k) = r {
            got.extend_from_slice(&buf[..k]);
        }
    }
    assert!(got[..] == region[..]);
    assert_clean(&n);
    let (a, b) = passes(&n, before);
    let m = MIB as u64;
    assert_eq!((a.sent, a.tx_copy_app, a.tx_copy_frame), (m, 0, m));
    assert_eq!(a.tx_per_byte(), Some(1.0));
    assert_eq!(b.received, m);
    assert!(b.rx_per_byte().unwrap() < 2.0, "{b:?}");
}
