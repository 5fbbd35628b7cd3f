//! Cost of a small send MSS, measured (not asserted): two `TcpLayer`s joined in memory, the
//! receiver's SYN-ACK rewritten on the way to announce a given MSS (as a peer or middlebox
//! announcing a tiny one would), the sender moves a fixed amount of data, and the thread's
//! CPU time (Linux `/proc/thread-self/schedstat`) per MB is printed. Ignored by default; run
//! with `cargo test --release -p netfold --test mss_cost -- --ignored --nocapture`.

use netfold::tcp::{Config, RxSegment, Secret, State, TcpLayer};
use netfold::time::{Duration, Instant};
use netfold::wire::tcp::TcpRepr;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// Nanoseconds this thread has run on a CPU (None where schedstat is not readable).
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

type Seg = (IpAddr, IpAddr, TcpRepr, Vec<u8>);

fn drain(layer: &mut TcpLayer, now: Instant) -> Vec<Seg> {
    let mut out = Vec::new();
    layer.output(now, &mut |s| {
        out.push((s.src, s.dst, s.repr, s.payload.to_vec()));
        true
    });
    out
}

/// Moves `bytes` from A to B with B announcing `peer_mss`, A building super-segments of up to
/// `gso_segs` segments (1: none; the stack's default with GSO on is
/// `netfold::iface::GSO_SEGS`) that B takes whole (as from a device with GRO); returns
/// (segments A sent, CPU ns).
fn transfer(peer_mss: u16, bytes: usize, gso_segs: u32) -> (u64, Option<u64>) {
    let mut a = TcpLayer::new(Secret::fixed_for_tests([1; 16]));
    a.set_gso_segs(gso_segs);
    let mut b = TcpLayer::new(Secret::fixed_for_tests([2; 16]));
    let cfg = Config {
        nodelay: true,
        ..Config::default()
    };
    let l = b.listen(SocketAddrV4::new(IP_B, 80), 4, cfg).unwrap();
    let mut now = Instant::from_millis(1);
    let c = a
        .connect(
            now,
            SocketAddrV4::new(IP_A, 0),
            SocketAddrV4::new(IP_B, 80),
            cfg,
        )
        .unwrap();
    let chunk = vec![0x5au8; 64 * 1024];
    let mut buf = vec![0u8; 256 * 1024];
    let (mut sent, mut got) = (0usize, 0usize);
    let mut server = None;
    let start = thread_cpu_ns();
    let seg0 = a.stats().segments_out;
    while got < bytes {
        if sent < bytes && a.state(c) == Ok(State::Established) {
            if let Ok(n) = a.send(c, &chunk[..chunk.len().min(bytes - sent)]) {
                sent += n;
            }
        }
        let mut moved = false;
        for (src, dst, repr, p) in drain(&mut a, now) {
            b.input(now, RxSegment::new(src, dst, &repr, &[&p]));
            moved = true;
        }
        for (src, dst, mut repr, p) in drain(&mut b, now) {
            if repr.flags.syn() {
                repr.options.mss = Some(peer_mss);
            }
            a.input(now, RxSegment::new(src, dst, &repr, &[&p]));
            moved = true;
        }
        if server.is_none() {
            server = b.accept(l).ok();
        }
        if let Some(s) = server {
            while let Ok(n) = b.recv(s, &mut buf) {
                if n == 0 {
                    break;
                }
                got += n;
            }
        }
        // Time moves 10 µs a round, or to the next timer when nothing moved.
        let next = now + Duration::from_micros(10);
        now = if moved {
            next
        } else {
            [a.poll_at(), b.poll_at()]
                .into_iter()
                .flatten()
                .min()
                .map_or(next, |t| t.max(next))
        };
    }
    let cpu = start.zip(thread_cpu_ns()).map(|(s, e)| e - s);
    (a.stats().segments_out - seg0, cpu)
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture, in release mode"]
fn cpu_per_mb_by_send_mss() {
    const MB: usize = 1 << 20;
    // Sizes that take each run well past the scheduler tick that schedstat is accounted at.
    for (gso, sizes) in [
        (1, [(1460u16, 256usize), (536, 64), (48, 8)]),
        (
            netfold::iface::GSO_SEGS,
            [(1460, 1024), (536, 512), (48, 128)],
        ),
    ] {
        for (mss, mbs) in sizes {
            // One warm-up run, then three measured.
            transfer(mss, MB, gso);
            for _ in 0..3 {
                let (segs, cpu) = transfer(mss, mbs * MB, gso);
                match cpu {
                    Some(ns) => println!(
                        "gso {gso:>5}, peer MSS {mss:>4}: {mbs:>3} MiB in {segs:>8} segments \
                         from the sender, {:.2} ms CPU per MiB (both stacks, one thread)",
                        ns as f64 / 1e6 / mbs as f64
                    ),
                    None => println!("peer MSS {mss}: {segs} segments (no schedstat)"),
                }
            }
        }
    }
}
