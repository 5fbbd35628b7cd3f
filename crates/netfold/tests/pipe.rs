//! Behaviour of `phy::pipe` seen through the `Device` trait only: ordering, impairment rates,
//! virtual-time delay and rate, reproducibility, cross-thread use and buffer recycling.

use std::collections::HashMap;

use netfold::buf::{PacketBuf, Pool};
use netfold::phy::pipe::{Impairments, Pipe, PipeConfig, PipeEnd};
use netfold::phy::{Device, Medium};
use netfold::time::{Duration, Instant};

const T0: Instant = Instant::ZERO;

/// A frame of `len` bytes whose last 4 bytes are `tag` and whose other bytes derive from it.
fn frame_into(mut b: PacketBuf, tag: u32, len: usize) -> PacketBuf {
    let len = len.max(4);
    let d = b.append(len);
    for (i, x) in d.iter_mut().enumerate() {
        *x = (tag as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
    d[len - 4..].copy_from_slice(&tag.to_be_bytes());
    b
}

fn frame(tag: u32, len: usize) -> PacketBuf {
    frame_into(PacketBuf::with_capacity(len), tag, len)
}

fn tag(b: &PacketBuf) -> u32 {
    let s = b.as_slice();
    u32::from_be_bytes(s[s.len() - 4..].try_into().unwrap())
}

/// Sends `n` frames in bursts of `burst`, receiving after each burst and once more at `end`.
/// Returns the received tags in delivery order.
fn exchange(a: &mut PipeEnd, b: &mut PipeEnd, n: u32, burst: u32, end: Instant) -> Vec<u32> {
    let mut pool = Pool::new(256, 4096);
    let mut got = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    while next < n {
        let mut batch: Vec<PacketBuf> = (next..(next + burst).min(n))
            .map(|t| frame(t, 100))
            .collect();
        next += batch.len() as u32;
        a.send_batch(T0, &mut pool, &mut batch);
        b.recv_batch(T0, &mut pool, &mut out, usize::MAX);
        got.extend(out.drain(..).map(|f| tag(&f)));
    }
    b.recv_batch(end, &mut pool, &mut out, usize::MAX);
    got.extend(out.drain(..).map(|f| tag(&f)));
    got
}

#[test]
fn frames_cross_in_order_both_ways() {
    let (mut a, mut b) = Pipe::new(PipeConfig::default());
    let got = exchange(&mut a, &mut b, 1000, 37, T0);
    assert_eq!(got, (0..1000).collect::<Vec<_>>());
    let got = exchange(&mut b, &mut a, 500, 64, T0);
    assert_eq!(got, (0..500).collect::<Vec<_>>());
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!((sa.sent, sa.delivered), (1000, 500));
    assert_eq!((sb.sent, sb.delivered), (500, 1000));
    assert_eq!(sa.bytes, 100_000);
    assert_eq!(sb.bytes_delivered, 100_000);
    assert_eq!(
        sa.dropped_loss + sa.dropped_full + sa.dropped_oversize + sa.duplicated,
        0
    );
    assert_eq!(a.poll_at(), None);
    // Default caps.
    let caps = a.caps();
    assert_eq!(
        (caps.mtu, caps.medium, caps.tso, caps.gro),
        (1500, Medium::Ethernet, false, false)
    );
    assert!(caps.checksum.tx && caps.checksum.rx);
}

#[test]
fn recv_respects_max() {
    let (mut a, mut b) = Pipe::new(PipeConfig::default());
    let mut pool = Pool::new(256, 64);
    let mut frames: Vec<PacketBuf> = (0..10).map(|t| frame(t, 60)).collect();
    a.send_batch(T0, &mut pool, &mut frames);
    let mut out = Vec::new();
    assert_eq!(b.recv_batch(T0, &mut pool, &mut out, 0), 0);
    assert_eq!(b.recv_batch(T0, &mut pool, &mut out, 3), 3);
    assert_eq!(b.recv_batch(T0, &mut pool, &mut out, 100), 7);
    assert_eq!(
        out.iter().map(tag).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
}

#[test]
fn loss_rate_matches_probability() {
    let (mut a, mut b) = Pipe::new(PipeConfig::default().loss(0.01).seed(7));
    let got = exchange(&mut a, &mut b, 100_000, 64, T0);
    let lost = a.stats().dropped_loss;
    assert!((800..=1200).contains(&lost), "lost {lost}");
    assert_eq!(got.len() as u64, 100_000 - lost);
    // Survivors keep their order.
    assert!(got.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn duplication_delivers_adjacent_copies() {
    let (mut a, mut b) = Pipe::new(PipeConfig::default().duplicate(0.05).seed(3));
    let got = exchange(&mut a, &mut b, 20_000, 32, T0);
    let dups = a.stats().duplicated;
    assert!((800..=1200).contains(&dups), "dups {dups}");
    assert_eq!(got.len() as u64, 20_000 + dups);
    let mut counts: HashMap<u32, u32> = HashMap::new();
    for &t in &got {
        *counts.entry(t).or_default() += 1;
    }
    assert_eq!(counts.len(), 20_000);
    assert_eq!(counts.values().filter(|&&c| c == 2).count() as u64, dups);
    assert!(counts.values().all(|&c| c == 1 || c == 2));
    // Without reordering a copy follows its original directly.
    let mut dedup = got.clone();
    dedup.dedup();
    assert_eq!(dedup, (0..20_000).collect::<Vec<_>>());
}

#[test]
fn reorder_delivers_everything_out_of_order() {
    let imp = Impairments::none().reorder(0.1).reorder_gap(4);
    let (mut a, mut b) = Pipe::new(PipeConfig::default().impairments(imp).seed(11));
    let got = exchange(&mut a, &mut b, 10_000, 16, Instant::from_secs(1));
    let reordered = a.stats().reordered;
    assert!((800..=1200).contains(&reordered), "reordered {reordered}");
    assert_ne!(got, (0..10_000).collect::<Vec<_>>());
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..10_000).collect::<Vec<_>>());
    // A held frame is overtaken by at most `reorder_gap` frames while traffic flows.
    let pos: HashMap<u32, usize> = got.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    for t in 0..9_990u32 {
        assert!(
            pos[&t] <= t as usize + 4 * 2 + 16,
            "frame {t} at {}",
            pos[&t]
        );
    }
}

#[test]
fn held_frame_is_released_by_time_alone() {
    let imp = Impairments::none()
        .reorder(1.0)
        .reorder_timeout(Duration::from_millis(5));
    let (mut a, mut b) = Pipe::new(PipeConfig::default().impairments(imp));
    let mut pool = Pool::new(256, 64);
    a.send_batch(T0, &mut pool, &mut vec![frame(9, 60)]);
    let mut out = Vec::new();
    assert_eq!(b.recv_batch(T0, &mut pool, &mut out, 64), 0);
    assert_eq!(b.poll_at(), Some(Instant::from_millis(5)));
    assert_eq!(
        b.recv_batch(Instant::from_micros(4_999), &mut pool, &mut out, 64),
        0
    );
    assert_eq!(
        b.recv_batch(Instant::from_millis(5), &mut pool, &mut out, 64),
        1
    );
    assert_eq!(tag(&out[0]), 9);
    assert_eq!(b.poll_at(), None);
}

/// A payload whose RFC 1071 sum folds to 0xffff, as a valid IPv4 header or TCP segment does.
fn checksummed_payload(seed: u32, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len)
        .map(|i| (seed as usize * 7 + i * 13) as u8)
        .collect();
    p[0] = 0;
    p[1] = 0;
    let sum = netfold::mem::checksum(&p);
    p[..2].copy_from_slice(&(!sum).to_be_bytes());
    assert_eq!(netfold::mem::checksum(&p), 0xffff);
    p
}

#[test]
fn corruption_flips_exactly_one_bit_that_the_checksum_catches() {
    let (mut a, mut b) = Pipe::new(PipeConfig::default().corrupt(0.25).seed(5));
    let mut pool = Pool::new(256, 256);
    let mut originals = Vec::new();
    let mut out = Vec::new();
    for round in 0..100u32 {
        let mut batch = Vec::new();
        for i in 0..20u32 {
            let n = round * 20 + i;
            let mut f = PacketBuf::with_capacity(200);
            f.extend_from_slice(&[0xEE; 14]);
            f.extend_from_slice(&checksummed_payload(n, 100 + (n as usize % 80)));
            originals.push(f.as_slice().to_vec());
            batch.push(f);
        }
        a.send_batch(T0, &mut pool, &mut batch);
        b.recv_batch(T0, &mut pool, &mut out, usize::MAX);
    }
    assert_eq!(out.len(), originals.len());
    let mut corrupted = 0;
    for (got, want) in out.iter().zip(&originals) {
        let got = got.as_slice();
        assert_eq!(got.len(), want.len());
        let bits: u32 = got
            .iter()
            .zip(want)
            .map(|(x, y)| (x ^ y).count_ones())
            .sum();
        assert!(bits <= 1);
        assert_eq!(&got[..14], &want[..14], "link header is never corrupted");
        let ok = netfold::mem::checksum(&got[14..]) == 0xffff;
        assert_eq!(ok, bits == 0, "checksum must catch every single-bit flip");
        corrupted += u64::from(bits);
    }
    assert_eq!(corrupted, a.stats().corrupted);
    assert!((400..=600).contains(&corrupted), "corrupted {corrupted}");
}

#[test]
fn delay_is_honoured_in_virtual_time() {
    let (mut a, mut b) = Pipe::new(PipeConfig::default().delay(Duration::from_millis(10)));
    let mut pool = Pool::new(256, 64);
    let mut out = Vec::new();
    a.send_batch(
        Instant::from_millis(1),
        &mut pool,
        &mut vec![frame(1, 60), frame(2, 60)],
    );
    a.send_batch(Instant::from_millis(3), &mut pool, &mut vec![frame(3, 60)]);
    assert_eq!(b.poll_at(), Some(Instant::from_millis(11)));
    assert_eq!(a.poll_at(), None, "the sender has nothing incoming");
    assert_eq!(
        b.recv_batch(Instant::from_micros(10_999), &mut pool, &mut out, 64),
        0
    );
    assert_eq!(
        b.recv_batch(Instant::from_millis(11), &mut pool, &mut out, 64),
        2
    );
    assert_eq!(b.poll_at(), Some(Instant::from_millis(13)));
    assert_eq!(
        b.recv_batch(Instant::from_millis(12), &mut pool, &mut out, 64),
        0
    );
    assert_eq!(
        b.recv_batch(Instant::from_millis(20), &mut pool, &mut out, 64),
        1
    );
    assert_eq!(out.iter().map(tag).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(b.poll_at(), None);
}

#[test]
fn rate_serialises_frames_back_to_back() {
    // 1 Mbit/s: a 125-byte frame takes exactly 1 ms on the wire.
    let cfg = PipeConfig::default()
        .rate(1_000_000)
        .delay(Duration::from_millis(2));
    let (mut a, mut b) = Pipe::new(cfg);
    let mut pool = Pool::new(256, 64);
    let mut out = Vec::new();
    let mut burst: Vec<PacketBuf> = (0..3).map(|t| frame(t, 125)).collect();
    a.send_batch(T0, &mut pool, &mut burst);
    // Deliverable at 1+2, 2+2, 3+2 ms.
    for (t_ms, expect) in [(3u64, 1usize), (4, 1), (5, 1)] {
        assert_eq!(b.poll_at(), Some(Instant::from_millis(t_ms)));
        let before = Instant::from_millis(t_ms) - Duration::from_micros(1);
        assert_eq!(b.recv_batch(before, &mut pool, &mut out, 64), 0);
        assert_eq!(
            b.recv_batch(Instant::from_millis(t_ms), &mut pool, &mut out, 64),
            expect
        );
    }
    // A frame sent while the transmitter is busy waits for it; one sent after it went idle
    // starts at once.
    a.send_batch(
        Instant::from_micros(500),
        &mut pool,
        &mut vec![frame(9, 125)],
    );
    assert_eq!(b.poll_at(), Some(Instant::from_millis(6)));
    b.recv_batch(Instant::from_millis(6), &mut pool, &mut out, 64);
    a.send_batch(
        Instant::from_millis(100),
        &mut pool,
        &mut vec![frame(10, 125)],
    );
    assert_eq!(b.poll_at(), Some(Instant::from_millis(103)));
    assert_eq!(out.iter().map(tag).collect::<Vec<_>>(), [0, 1, 2, 9]);
}

/// Everything observable about one impaired run: (delivery time, frame bytes) in order.
fn impaired_run(seed: u64) -> Vec<(u64, Vec<u8>)> {
    let cfg = PipeConfig::default()
        .loss(0.05)
        .duplicate(0.05)
        .reorder(0.05)
        .corrupt(0.05)
        .delay(Duration::from_micros(300))
        .rate(100_000_000)
        .seed(seed);
    let (mut a, mut b) = Pipe::new(cfg);
    let mut pool = Pool::new(256, 1024);
    let mut out = Vec::new();
    let mut log = Vec::new();
    for step in 0..400u32 {
        let now = Instant::from_micros(u64::from(step) * 50);
        let mut batch: Vec<PacketBuf> = (0..5).map(|i| frame(step * 5 + i, 200)).collect();
        a.send_batch(now, &mut pool, &mut batch);
        b.recv_batch(now, &mut pool, &mut out, 64);
        log.extend(
            out.drain(..)
                .map(|f| (now.total_micros(), f.as_slice().to_vec())),
        );
    }
    let end = Instant::from_secs(10);
    b.recv_batch(end, &mut pool, &mut out, usize::MAX);
    log.extend(
        out.drain(..)
            .map(|f| (end.total_micros(), f.as_slice().to_vec())),
    );
    log
}

#[test]
fn same_seed_same_run_different_seed_different_run() {
    let one = impaired_run(42);
    assert_eq!(one, impaired_run(42));
    assert_ne!(one, impaired_run(43));
}

#[test]
fn directions_have_independent_random_streams() {
    let (mut a, mut b) = Pipe::new(PipeConfig::default().loss(0.5).seed(1));
    let ab = exchange(&mut a, &mut b, 200, 10, T0);
    let ba = exchange(&mut b, &mut a, 200, 10, T0);
    assert_ne!(ab, ba);
}

#[test]
fn ends_are_send_and_work_across_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<PipeEnd>();

    const N: u32 = 100_000;
    let (mut a, mut b) = Pipe::new(PipeConfig::default().capacity(256));
    // Wall-clock guard so a bug fails the test instead of hanging it (no sleeping).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let sender = std::thread::spawn(move || {
        let mut pool = Pool::new(128, 1024);
        let mut batch = Vec::with_capacity(32);
        let mut next = 0u32;
        while next < N {
            assert!(
                std::time::Instant::now() < deadline,
                "sender stuck at {next}"
            );
            let room = a.tx_space().min(32).min((N - next) as usize);
            if room == 0 {
                std::thread::yield_now();
                continue;
            }
            for _ in 0..room {
                batch.push(frame_into(pool.get(), next, 64));
                next += 1;
            }
            a.send_batch(T0, &mut pool, &mut batch);
        }
        (a.stats(), pool.stats())
    });
    let mut pool = Pool::new(128, 1024);
    let mut out = Vec::with_capacity(64);
    let mut expect = 0u32;
    while expect < N {
        assert!(
            std::time::Instant::now() < deadline,
            "receiver stuck at {expect}"
        );
        if b.recv_batch(T0, &mut pool, &mut out, 64) == 0 {
            std::thread::yield_now();
        }
        for f in out.drain(..) {
            assert_eq!(tag(&f), expect);
            expect += 1;
            pool.put(f);
        }
    }
    let (sent, sender_pool) = sender.join().unwrap();
    assert_eq!(sent.sent, u64::from(N));
    assert_eq!(sent.dropped_full, 0);
    assert_eq!(b.stats().delivered, u64::from(N));
    // Buffers came back across the link: the sender allocated far fewer than it sent.
    assert!(sent.recycled > 0);
    assert!(
        sender_pool.allocations < u64::from(N) / 10,
        "{sender_pool:?}"
    );
}

#[test]
fn recycling_makes_steady_state_allocation_free() {
    let (mut a, mut b) = Pipe::new(PipeConfig::default());
    let mut pool_a = Pool::new(1600, 1024);
    let mut pool_b = Pool::new(1600, 1024);
    let mut batch = Vec::with_capacity(64);
    let mut out = Vec::with_capacity(64);
    let mut round = |pool_a: &mut Pool, pool_b: &mut Pool, n: u32| {
        for i in 0..n {
            let burst = 1 + (i % 48) as usize;
            for j in 0..burst {
                batch.push(frame_into(pool_a.get(), j as u32, 1514));
            }
            a.send_batch(T0, pool_a, &mut batch);
            b.recv_batch(T0, pool_b, &mut out, 64);
            // The receiving stack consumes the frames and frees their buffers into its pool.
            for f in out.drain(..) {
                pool_b.put(f);
            }
        }
    };
    round(&mut pool_a, &mut pool_b, 200);
    let warm = pool_a.stats();
    round(&mut pool_a, &mut pool_b, 2_000);
    let after = pool_a.stats();
    assert!(after.gets - warm.gets > 40_000);
    assert_eq!(
        after.allocations, warm.allocations,
        "sender allocated after warm-up"
    );
    // The receiver keeps only a bounded reserve of idle buffers.
    assert!(
        pool_b.idle() <= 2 * 64 + 48,
        "receiver hoards {}",
        pool_b.idle()
    );
    assert_eq!(pool_b.stats().dropped, 0);
}
