//! Fragment floods (FragmentSmack, CVE-2018-5391) against reassembly, IPv4 and IPv6, in
//! virtual time: 40 000 never-completing fragments — most opening a datagram that is never
//! finished, every fourth overlapping the one before it — are sent to stack B while A, a
//! legitimate peer, pings B with 3000-byte echoes and sends it 3000-byte UDP datagrams, both
//! fragmented at the 1500-byte MTU. Every legitimate datagram must be reassembled during the
//! flood and right after it; B's reassembly memory must stay under its high mark after every
//! step; the overlapping datagrams must be discarded as they arrive (counted).
//!
//! A reassembler that refuses new datagrams when full (Linux above `ipfrag_high_thresh`)
//! answers none of the legitimate datagrams until the flood's queues time out, 30 s later.

use netfold::buf::{PacketBuf, Pool};
use netfold::iface::reassembly::ReassemblyMemory;
use netfold::iface::{Counters, StackConfig};
use netfold::phy::pipe::PipeConfig;
use netfold::phy::{Device, Medium};
use netfold::wire::ipv4::Ipv4Repr;
use netfold::wire::ipv6::{Ipv6Addr, Ipv6Cidr, Ipv6Repr};
use netfold::wire::ipv6ext::FragmentRepr;
use netfold::wire::{IpAddr, IpProtocol, Ipv4Addr};
use netfold_testkit::Rng;
use std::net::SocketAddr;

type Net = netfold_testkit::Net;

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The flood's source, on the same link (another address than A's).
const X4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 66);
const FLOOD: usize = 40_000;
/// Legitimate rounds during the flood (one echo and one UDP datagram each), and after it.
const ROUNDS: usize = 20;
const AFTER: usize = 3;
const SIZE: usize = 3000;

fn a6() -> Ipv6Addr {
    "2001:2:0:1::a".parse().unwrap()
}
fn b6() -> Ipv6Addr {
    "2001:2:0:1::b".parse().unwrap()
}
/// Another /64 than A's.
fn x6() -> Ipv6Addr {
    "2001:2:0:66::66".parse().unwrap()
}
/// Another address in A's /64: charged to the same source as A.
fn a6_neighbour() -> Ipv6Addr {
    "2001:2:0:1::dead".parse().unwrap()
}

fn config(v4: Ipv4Addr, v6: Ipv6Addr, last: u8) -> StackConfig {
    StackConfig {
        medium: Medium::Ip,
        addrs6: vec![Ipv6Cidr::new(v6, 64).unwrap()],
        ..netfold_testkit::config(v4, last)
    }
}

/// A and B on a TUN-like link (raw IP packets), addresses usable at once (no DAD on a TUN).
fn net(tweak: fn(&mut StackConfig)) -> Net {
    let mut cb = config(B4, b6(), 0xb);
    tweak(&mut cb);
    let mut n = Net::pipe(
        config(A4, a6(), 0xa),
        cb,
        PipeConfig::default().medium(Medium::Ip),
    );
    n.poll();
    n
}

/// One flood fragment from `src`: the `i`th of the flood. Three of every four open a
/// datagram of their own (a random piece of it, never its start and never its end), the
/// fourth overlaps the previous one's datagram, which is then discarded.
fn flood_packet(
    src: IpAddr,
    dst: IpAddr,
    i: usize,
    rng: &mut Rng,
    prev: &mut (u32, usize, usize),
) -> Vec<u8> {
    let (ident, offset, len) = if i % 4 == 3 {
        // Same datagram, same start, longer: an overlap, not a duplicate.
        (prev.0, prev.1, prev.2 + 8)
    } else {
        let ident = 10_000 + i as u32;
        let offset = 8 * (1 + (rng.next() % 7000) as usize);
        // 800 to 1392 bytes: enough that 4096 datagrams pass the byte bound.
        let len = 8 * (100 + (rng.next() % 75) as usize);
        (ident, offset, len)
    };
    *prev = (ident, offset, len);
    let data = vec![0x5a; len];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let r = Ipv4Repr {
                src: s,
                dst: d,
                protocol: IpProtocol::Udp,
                payload_len: len,
                ttl: 64,
                dscp_ecn: 0,
                ident: ident as u16,
                dont_frag: false,
                more_frags: true,
                frag_offset: offset as u16,
            };
            let mut p = vec![0u8; 20 + len];
            r.emit(&mut p, true).unwrap();
            p[20..].copy_from_slice(&data);
            p
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let ip = Ipv6Repr {
                src: s,
                dst: d,
                next_header: IpProtocol::from(44),
                payload_len: 8 + len,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            };
            let mut p = vec![0u8; 40 + 8 + len];
            ip.emit(&mut p[..40]).unwrap();
            FragmentRepr {
                next_header: 17,
                offset,
                more_frags: true,
                ident,
            }
            .emit(&mut p[40..48])
            .unwrap();
            p[48..].copy_from_slice(&data);
            p
        }
        _ => unreachable!(),
    }
}

/// Puts `packets` on the link to B (as if sent from A's end).
fn inject(n: &mut Net, packets: Vec<Vec<u8>>) {
    let mut pool = Pool::new(2048, 4);
    let mut v: Vec<PacketBuf> = packets.iter().map(|p| PacketBuf::from_slice(p)).collect();
    n.ea.send_batch(n.now, &mut pool, &mut v);
}

fn memory(n: &Net, v6: bool) -> ReassemblyMemory {
    if v6 {
        n.b.reassembly6_memory()
    } else {
        n.b.reassembly_memory()
    }
}

/// Settles the link, checking B's reassembly memory against its high mark.
fn settle(n: &mut Net, v6: bool) {
    n.settle();
    let m = memory(n, v6);
    let high = n.b.config().frag_high_thresh;
    assert!(m.bytes <= high && m.peak <= high, "{m:?} above {high}");
}

/// One legitimate round: A sends a 3000-byte echo and a 3000-byte UDP datagram to B (each in
/// three fragments), then the flood chunk goes on; whether the echo reply came back and the
/// datagram arrived.
fn legit_round(
    n: &mut Net,
    v6: bool,
    seq: u16,
    sock: (netfold::iface::UdpHandle, netfold::iface::UdpHandle),
    chunk: Vec<Vec<u8>>,
) -> (bool, bool) {
    let data: Vec<u8> = (0..SIZE).map(|i| (i as u16 ^ seq) as u8).collect();
    let (client, server) = sock;
    let (dst, port): (IpAddr, u16) = if v6 { (b6().into(), 7) } else { (B4.into(), 7) };
    // Half the chunk before the legitimate fragments, half after.
    let mut chunk = chunk;
    let rest = chunk.split_off(chunk.len() / 2);
    inject(n, chunk);
    if v6 {
        n.a.ping(n.now, b6(), 9, seq, &data).unwrap();
    } else {
        n.a.ping(n.now, B4, 9, seq, &data).unwrap();
    }
    n.a.udp_send_to(client, &data, SocketAddr::new(dst, port))
        .unwrap();
    n.a.poll(n.now, &mut n.ea);
    inject(n, rest);
    settle(n, v6);
    let echoed = if v6 {
        std::iter::from_fn(|| n.a.ping6_recv()).any(|r| r.seq_no == seq && r.len == SIZE)
    } else {
        std::iter::from_fn(|| n.a.ping_recv()).any(|r| r.seq_no == seq && r.len == SIZE)
    };
    let mut buf = vec![0u8; 4000];
    let mut got = false;
    while let Ok((len, _)) = n.b.udp_recv_from(server, &mut buf) {
        got |= buf[..len] == data[..];
    }
    (echoed, got)
}

struct Outcome {
    during: (usize, usize),
    after: (usize, usize),
    before: Counters,
    after_counters: Counters,
    memory: ReassemblyMemory,
}

/// The flood from `flood_src` (one source, or many when `sources` > 1: the flood's `i`th
/// fragment comes from the `i % sources`th address after `flood_src`) with A's legitimate
/// rounds interleaved, then rounds after it.
fn run(v6: bool, flood_src: IpAddr, sources: usize, tweak: fn(&mut StackConfig)) -> Outcome {
    let mut n = net(tweak);
    let (client, server) = if v6 {
        (
            n.a.udp_bind(SocketAddr::new(a6().into(), 0)).unwrap(),
            n.b.udp_bind(SocketAddr::new(b6().into(), 7)).unwrap(),
        )
    } else {
        (
            n.a.udp_bind(SocketAddr::new(A4.into(), 0)).unwrap(),
            n.b.udp_bind(SocketAddr::new(B4.into(), 7)).unwrap(),
        )
    };
    let dst: IpAddr = if v6 { b6().into() } else { B4.into() };
    let before = n.b.counters();
    let mut rng = Rng::new(0x5eed_f00d);
    let mut prev = (0, 0, 0);
    let per_round = FLOOD / ROUNDS;
    let mut during = (0, 0);
    let mut i = 0;
    for round in 0..ROUNDS {
        // The flood in chunks the link carries (its queue holds 1024 frames), the last one
        // of the round around the legitimate traffic.
        let mut chunk = Vec::new();
        for _ in 0..per_round {
            let src = if sources > 1 {
                nth_source(flood_src, i % sources)
            } else {
                flood_src
            };
            chunk.push(flood_packet(src, dst, i, &mut rng, &mut prev));
            i += 1;
            if chunk.len() == 400 && i % per_round != 0 {
                inject(&mut n, std::mem::take(&mut chunk));
                settle(&mut n, v6);
            }
        }
        let (e, u) = legit_round(&mut n, v6, round as u16, (client, server), chunk);
        during.0 += usize::from(e);
        during.1 += usize::from(u);
    }
    assert_eq!(i, FLOOD);
    let mut after = (0, 0);
    for round in 0..AFTER {
        let (e, u) = legit_round(
            &mut n,
            v6,
            (ROUNDS + round) as u16,
            (client, server),
            Vec::new(),
        );
        after.0 += usize::from(e);
        after.1 += usize::from(u);
    }
    Outcome {
        during,
        after,
        before,
        after_counters: n.b.counters(),
        memory: memory(&n, v6),
    }
}

fn nth_source(base: IpAddr, k: usize) -> IpAddr {
    match base {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) + k as u32)),
        // A /64 each.
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) + ((k as u128) << 64))),
    }
}

/// What the flood's drops look like in B's counters, for one family.
struct FragCounters {
    overlaps: u64,
    source_evicted: u64,
    evicted: u64,
    reassembled: u64,
}

fn frag_counters(o: &Outcome, v6: bool) -> FragCounters {
    let (a, b) = (&o.after_counters, &o.before);
    if v6 {
        FragCounters {
            overlaps: a.frag6_overlaps - b.frag6_overlaps,
            source_evicted: (a.frag6_source_evicted - b.frag6_source_evicted)
                + (a.frag6_source_queue_evicted - b.frag6_source_queue_evicted),
            evicted: a.frag6_evicted - b.frag6_evicted,
            reassembled: a.frag6_reassembled - b.frag6_reassembled,
        }
    } else {
        FragCounters {
            overlaps: a.frag_overlaps - b.frag_overlaps,
            source_evicted: (a.frag_source_evicted - b.frag_source_evicted)
                + (a.frag_source_queue_evicted - b.frag_source_queue_evicted),
            evicted: a.frag_evicted - b.frag_evicted,
            reassembled: a.frag_reassembled - b.frag_reassembled,
        }
    }
}

fn flood_from_another_source(v6: bool) {
    let src = if v6 { x6().into() } else { X4.into() };
    let o = run(v6, src, 1, |_| {});
    assert_eq!(
        o.during,
        (ROUNDS, ROUNDS),
        "legitimate datagrams lost during the flood"
    );
    assert_eq!(
        o.after,
        (AFTER, AFTER),
        "legitimate datagrams lost after the flood"
    );
    let c = frag_counters(&o, v6);
    // Every fourth flood fragment overlapped its datagram, discarded at once.
    assert_eq!(c.overlaps, (FLOOD / 4) as u64);
    // The one source paid for its flood out of its own share; the total never needed it.
    assert!(c.source_evicted > 1000, "{}", c.source_evicted);
    assert_eq!(c.evicted, 0);
    // Echoes and UDP datagrams, B's side.
    assert_eq!(c.reassembled, 2 * (ROUNDS + AFTER) as u64);
    // The flood holds no more than its share (a quarter of 4 MiB) while its queues wait out
    // their timeout.
    assert!(o.memory.bytes <= 1 << 20, "{:?}", o.memory);
    println!(
        "v6={v6}: peak {} bytes, {} datagrams held at the end, {} overlaps, {} evicted",
        o.memory.peak, o.memory.queues, c.overlaps, c.source_evicted
    );
}

/// With the per-source datagram cap out of the way, the byte share is what holds the flood:
/// a quarter of the high mark.
#[test]
fn the_byte_share_holds_a_flood_without_the_datagram_cap() {
    for v6 in [false, true] {
        let src = if v6 { x6().into() } else { X4.into() };
        let o = run(v6, src, 1, |c| c.frag_source_max_queues = 100_000);
        assert_eq!(o.during, (ROUNDS, ROUNDS), "v6={v6}");
        assert_eq!(o.after, (AFTER, AFTER), "v6={v6}");
        let (a, b) = (&o.after_counters, &o.before);
        let share = if v6 {
            a.frag6_source_evicted - b.frag6_source_evicted
        } else {
            a.frag_source_evicted - b.frag_source_evicted
        };
        assert!(share > 1000, "v6={v6}: {share}");
        // The flood's quarter, plus A's datagrams in progress and the idle spare buffers.
        assert!(o.memory.peak <= (1 << 20) + (64 << 10), "{:?}", o.memory);
        assert!(o.memory.peak > 3 << 18, "{:?}", o.memory);
    }
}

#[test]
fn ipv4_flood_from_another_source_loses_no_legitimate_datagram() {
    flood_from_another_source(false);
}

#[test]
fn ipv6_flood_from_another_source_loses_no_legitimate_datagram() {
    flood_from_another_source(true);
}

/// The flood comes from A's own address (IPv4) or A's /64 (IPv6): it shares A's share, yet
/// A's newer datagrams evict the flood's older ones, so A is never locked out — in particular
/// not after the flood stops (no waiting for the flood's queues to time out).
fn flood_from_the_same_source(v6: bool) {
    let src = if v6 { a6_neighbour().into() } else { A4.into() };
    let o = run(v6, src, 1, |_| {});
    assert_eq!(o.after, (AFTER, AFTER), "locked out after the flood");
    assert_eq!(o.during, (ROUNDS, ROUNDS), "locked out during the flood");
    let c = frag_counters(&o, v6);
    assert_eq!(c.overlaps, (FLOOD / 4) as u64);
    assert!(c.source_evicted > 1000);
    assert!(o.memory.peak <= 4 << 20);
}

#[test]
fn ipv4_flood_from_the_same_source_does_not_lock_it_out() {
    flood_from_the_same_source(false);
}

#[test]
fn ipv6_flood_from_the_same_slash_64_does_not_lock_it_out() {
    flood_from_the_same_source(true);
}

/// A flood spread over 64 sources fills the whole bound, not one share: the high mark evicts
/// down to the low one, oldest first, and the legitimate datagrams, always the newest, pass.
#[test]
fn distributed_flood_evicts_at_the_high_mark_and_loses_nothing_legitimate() {
    for v6 in [false, true] {
        let src = if v6 { x6().into() } else { X4.into() };
        let o = run(v6, src, 64, |_| {});
        assert_eq!(o.during, (ROUNDS, ROUNDS), "v6={v6}");
        assert_eq!(o.after, (AFTER, AFTER), "v6={v6}");
        let c = frag_counters(&o, v6);
        assert!(c.evicted > 1000, "v6={v6}: {}", c.evicted);
        assert!(
            o.memory.peak <= 4 << 20 && o.memory.peak > 3 << 20,
            "{:?}",
            o.memory
        );
    }
}
