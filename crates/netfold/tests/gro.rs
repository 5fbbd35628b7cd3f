//! GRO (offload/gro.rs): which segments merge, which do not, the limits, checksums, VLAN and
//! padding, and an end-to-end transfer with GRO on and off. Frames are injected in one receive
//! batch; what TCP was handed is read from the counters (`tcp.segments_in` counts `input`
//! calls, the gro_* counters say why each train ended). All in virtual time.

use netfold::buf::{PacketBuf, Pool};
use netfold::iface::counters::bucket;
use netfold::iface::{Counters, Stack, StackConfig};
use netfold::phy::pipe::PipeConfig;
use netfold::phy::{Device, DeviceCaps};
use netfold::tcp;
use netfold::time::Instant;
use netfold::wire::ethernet::{EtherType, EthernetAddress, EthernetRepr};
use netfold::wire::ipv4::Ipv4Repr;
use netfold::wire::tcp::{PseudoHeader, TcpFlags, TcpOptions, TcpPacket, TcpRepr, Timestamps};
use netfold::wire::{IpProtocol, Ipv4Addr};
use netfold_testkit::Net;
use std::net::SocketAddrV4;

const IP_US: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MAC_US: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
const MAC_PEER: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);

/// Hands its frames up in one batch; discards what the stack sends.
struct Inject {
    frames: Vec<Vec<u8>>,
    mtu: usize,
}

impl Device for Inject {
    fn caps(&self) -> DeviceCaps {
        DeviceCaps {
            mtu: self.mtu,
            max_burst: 256,
            ..DeviceCaps::default()
        }
    }
    fn recv_batch(
        &mut self,
        _: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let n = self.frames.len().min(max);
        for f in self.frames.drain(..n) {
            let mut b = pool.get();
            b.extend_from_slice(&f);
            out.push(b);
        }
        n
    }
    fn send_batch(&mut self, _: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        for f in frames.drain(..) {
            pool.put(f);
        }
    }
}

/// How to build one test segment.
#[derive(Clone)]
struct Spec {
    sport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    tsval: u32,
    ttl: u8,
    len: usize,
    vlan: Option<u16>,
    /// Ethernet padding bytes after the IP packet (garbage, must be ignored).
    pad: usize,
    corrupt: bool,
}

fn spec(seq: u32, len: usize) -> Spec {
    Spec {
        sport: 5000,
        seq,
        ack: 77,
        flags: TcpFlags::ACK,
        window: 1000,
        tsval: 9,
        ttl: 64,
        len,
        vlan: None,
        pad: 0,
        corrupt: false,
    }
}

fn frame(s: &Spec) -> Vec<u8> {
    let payload: Vec<u8> = (0..s.len).map(|i| (s.seq as usize + i) as u8).collect();
    let repr = TcpRepr {
        src_port: s.sport,
        dst_port: 80,
        seq: s.seq,
        ack: s.ack,
        flags: TcpFlags(s.flags),
        window: s.window,
        urgent: 0,
        options: TcpOptions {
            timestamps: Some(Timestamps {
                tsval: s.tsval,
                tsecr: 3,
            }),
            ..TcpOptions::default()
        },
    };
    let hl = repr.header_len();
    let mut seg = vec![0u8; hl + payload.len()];
    seg[hl..].copy_from_slice(&payload);
    {
        let mut p = TcpPacket::new_unchecked(&mut seg[..]);
        repr.emit(&mut p);
        p.fill_checksum(&PseudoHeader::new(IP_PEER, IP_US));
    }
    if s.corrupt {
        let last = seg.len() - 1;
        seg[last] ^= 0x40;
    }
    let ip = Ipv4Repr {
        src: IP_PEER,
        dst: IP_US,
        protocol: IpProtocol::Tcp,
        payload_len: seg.len(),
        ttl: s.ttl,
        dscp_ecn: 0,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    let eth = EthernetRepr {
        src: MAC_PEER,
        dst: MAC_US,
        ethertype: EtherType::Ipv4,
        vlan: s.vlan,
    };
    let el = eth.header_len();
    let mut f = vec![0u8; el + 20 + seg.len()];
    eth.emit(&mut f[..el]).unwrap();
    ip.emit(&mut f[el..el + 20], true).unwrap();
    f[el + 20..].copy_from_slice(&seg);
    f.extend(std::iter::repeat_n(0xa5, s.pad));
    f
}

/// Injects the frames in one batch into a fresh stack (no socket: TCP answers with RSTs, which
/// does not matter here) and returns its counters.
fn run(specs: &[Spec]) -> Counters {
    run_mtu(specs, 1500)
}

fn run_mtu(specs: &[Spec], mtu: usize) -> Counters {
    let mut st = Stack::new(StackConfig {
        mtu,
        ..StackConfig::default()
    });
    let mut dev = Inject {
        frames: specs.iter().map(frame).collect(),
        mtu,
    };
    st.poll(Instant::from_millis(1), &mut dev);
    assert!(dev.frames.is_empty());
    st.counters()
}

/// `n` contiguous segments of `len` bytes from seq 1000.
fn train(n: usize, len: usize) -> Vec<Spec> {
    (0..n).map(|i| spec(1000 + (i * len) as u32, len)).collect()
}

#[test]
fn contiguous_segments_merge_into_one() {
    let c = run(&train(10, 1000));
    assert_eq!(c.tcp.segments_in, 1);
    assert_eq!(c.gro_merges, 9);
    assert_eq!(c.gro_flushes, 1);
    assert_eq!(c.gro_flush_batch_end, 1);
    assert_eq!(c.gro_segs_per_flush[bucket(10)], 1);
    assert_eq!(c.frames_per_poll[bucket(10)], 1);
    assert_eq!(c.tcp_bad_checksum, 0);
    // Merging copies nothing (TCP copies the slices into its ring); each segment, header
    // included (32 bytes with timestamps), was summed once: the header when it joined, the
    // payload by TCP (in a pass of its own here: no connection takes the data, so there is
    // no copy to fold it into).
    assert_eq!(c.copies, 0);
    assert_eq!(c.bytes_checksummed, 10 * 1032);
    assert_eq!(c.bytes_checksummed_separately, c.bytes_checksummed);
    assert_eq!(c.tcp_rx_csum_separate, 10 * 1000);
}

#[test]
fn gro_off_delivers_every_segment() {
    let mut st = Stack::new(StackConfig {
        gro: false,
        ..StackConfig::default()
    });
    let mut dev = Inject {
        frames: train(10, 1000).iter().map(frame).collect(),
        mtu: 1500,
    };
    st.poll(Instant::from_millis(1), &mut dev);
    let c = st.counters();
    assert_eq!(c.tcp.segments_in, 10);
    assert_eq!(c.gro_merges, 0);
}

#[test]
fn a_lone_segment_is_not_copied() {
    let c = run(&train(1, 1000));
    assert_eq!(c.tcp.segments_in, 1);
    assert_eq!((c.copies, c.gro_merges), (0, 0));
    assert_eq!(c.bytes_checksummed_separately, c.bytes_checksummed);
    assert!(c.bytes_checksummed >= 1000);
}

#[test]
fn different_flows_do_not_merge() {
    let mut s = Vec::new();
    for i in 0..6u32 {
        let mut a = spec(1000 + i * 100, 100);
        a.sport = 5000 + (i % 2) as u16;
        // Each flow's own segments are contiguous.
        a.seq = 1000 + (i / 2) * 100;
        s.push(a);
    }
    let c = run(&s);
    assert_eq!(c.tcp.segments_in, 2);
    assert_eq!(c.gro_merges, 4);
    assert_eq!(c.gro_segs_per_flush[bucket(3)], 2);
}

#[test]
fn out_of_order_ends_the_train() {
    let mut s = train(4, 100);
    s.swap(1, 2);
    let c = run(&s);
    // [0] [2] [1] [3]: 0 alone, 2 alone, then 1 (seq goes back), then 3 does not follow 1? It
    // does not: 1's end is 2's start, and 3 follows 2. So 1 and 3 are separate as well.
    assert_eq!(c.gro_merges, 0);
    assert_eq!(c.tcp.segments_in, 4);
    assert_eq!(c.gro_flush_mismatch, 3);
}

#[test]
fn different_ack_window_options_or_ttl_do_not_merge() {
    type Tweak = fn(&mut Spec);
    let tweaks: [Tweak; 4] = [
        |s| s.ack += 1,
        |s| s.window += 1,
        |s| s.tsval += 1,
        |s| s.ttl -= 1,
    ];
    for t in tweaks {
        let mut s = train(3, 100);
        t(&mut s[2]);
        let c = run(&s);
        assert_eq!(c.tcp.segments_in, 2);
        assert_eq!(c.gro_merges, 1);
        assert_eq!(c.gro_flush_mismatch, 1);
    }
}

#[test]
fn flags_psh_merges_then_ends_fin_and_others_do_not_merge() {
    // PSH on the 2nd: 1+2 merge and flush; 3+4 merge.
    let mut s = train(4, 100);
    s[1].flags |= TcpFlags::PSH;
    let c = run(&s);
    assert_eq!(
        (c.tcp.segments_in, c.gro_merges, c.gro_flush_psh),
        (2, 2, 1)
    );

    for bad in [
        TcpFlags::FIN,
        TcpFlags::URG,
        TcpFlags::ECE,
        TcpFlags::CWR,
        TcpFlags::SYN,
    ] {
        let mut s = train(4, 100);
        s[2].flags |= bad;
        let c = run(&s);
        // 1+2 merged, flushed before the odd segment, which goes alone; 4 alone.
        assert_eq!(c.gro_merges, 1, "flag {bad:#x}");
        assert_eq!(c.gro_flush_control, 1, "flag {bad:#x}");
        assert!(c.tcp.segments_in >= 3, "flag {bad:#x}");
    }
}

#[test]
fn shorter_segment_is_merged_and_ends_the_train() {
    let mut s = train(3, 100);
    s[1].len = 60;
    s[2].seq = s[1].seq + 60;
    let c = run(&s);
    assert_eq!((c.gro_merges, c.gro_flush_short), (1, 1));
    assert_eq!(c.tcp.segments_in, 2);
    // A segment longer than the first cannot come from the same GSO send.
    let mut s = train(2, 100);
    s[1].len = 200;
    let c = run(&s);
    assert_eq!((c.gro_merges, c.tcp.segments_in), (0, 2));
}

#[test]
fn count_limit() {
    let c = run(&train(60, 100));
    assert_eq!(c.gro_flush_count, 1);
    assert_eq!(c.gro_segs_per_flush[bucket(44)], 1);
    assert_eq!(c.gro_segs_per_flush[bucket(16)], 1);
    assert_eq!(c.tcp.segments_in, 2);
}

#[test]
fn byte_limit_keeps_the_ip_packet_under_64k() {
    // 16 x 4000 = 64000 bytes; a 17th would pass 65535 - 20 - 32.
    let c = run_mtu(&train(20, 4000), 9000);
    assert_eq!(c.gro_flush_bytes, 1);
    assert_eq!(c.gro_flush_count, 0);
    assert_eq!(c.gro_segs_per_flush[bucket(16)], 1);
    assert_eq!(c.tcp.segments_in, 2);
    assert_eq!(c.gro_merges, 18);
}

#[test]
fn a_bad_checksum_is_found_in_tcps_copy_and_only_that_segment_is_dropped() {
    // GRO leaves a data segment's checksum open (summing only pseudo-header and header) and
    // TCP completes it in the copy that places the payload (`tcp/place.rs`), so a corrupt
    // segment joins its train. TCP finds it before it processes anything of the train, drops
    // it (counted) and takes the train apart: the good segments go in one by one, none lost.
    let mut s = train(5, 100);
    s[2].corrupt = true;
    let c = run(&s);
    assert_eq!(c.tcp_bad_checksum, 1);
    assert_eq!(c.gro_merges, 4);
    assert_eq!(c.tcp.segments_in, 4);

    // A corrupt head: the same.
    let mut s = train(4, 100);
    s[0].corrupt = true;
    let c = run(&s);
    assert_eq!(c.tcp_bad_checksum, 1);
    assert_eq!(c.gro_merges, 3);
    assert_eq!(c.tcp.segments_in, 3);

    // A corrupt lone segment is dropped before TCP counts it.
    let mut s = train(1, 100);
    s[0].corrupt = true;
    let c = run(&s);
    assert_eq!((c.tcp_bad_checksum, c.tcp.segments_in), (1, 0));
}

#[test]
fn priority_tags_and_padding_are_handled() {
    // Tiny segments in minimum-size frames: the padding must not enter the payload (it would
    // also break the checksum), and VLAN id 0 (priority tag) frames are received.
    let mut s = train(3, 4);
    for x in s.iter_mut() {
        x.vlan = Some(0x6000); // priority 3, VLAN id 0
        x.pad = 8;
    }
    let c = run(&s);
    assert_eq!(c.tcp_bad_checksum, 0);
    assert_eq!(c.gro_merges, 2);
    assert_eq!(c.tcp.segments_in, 1);
    assert_eq!(c.bytes_checksummed, 3 * 36);
    // A real VLAN is not configured here: not ours.
    let mut s = train(2, 4);
    s[1].vlan = Some(5);
    let c = run(&s);
    assert_eq!((c.unsupported, c.tcp.segments_in), (1, 1));
}

/// Client sends `total` bytes to a server over the in-memory pipe; returns what the server
/// read and its counters.
fn transfer(gro: bool, total: usize, pipe: PipeConfig) -> (Vec<u8>, Counters, Counters) {
    let mut n = Net::pipe(
        StackConfig {
            addr: IP_PEER,
            mac: MAC_PEER,
            gro,
            ..StackConfig::default()
        },
        StackConfig {
            addr: IP_US,
            mac: MAC_US,
            gro,
            ..StackConfig::default()
        },
        pipe,
    );
    let cfg = tcp::Config {
        mss: n.a.tcp_mss(IP_US),
        ..tcp::Config::default()
    };
    n.now = Instant::from_millis(1);
    let l =
        n.b.tcp_mut()
            .listen(SocketAddrV4::new(IP_US, 80), 4, cfg)
            .unwrap();
    let c =
        n.a.tcp_mut()
            .connect(
                n.now,
                SocketAddrV4::new(IP_PEER, 0),
                SocketAddrV4::new(IP_US, 80),
                cfg,
            )
            .unwrap();
    let data: Vec<u8> = (0..total).map(|i| (i * 31 + (i >> 9)) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::with_capacity(total);
    let mut server = None;
    let mut buf = vec![0u8; 65536];
    for _ in 0..2_000_000 {
        // Polls both stacks, then moves time on (1 us, or to the next timer when idle); the
        // socket calls below do not read the clock.
        n.step();
        if server.is_none() {
            server = n.b.tcp_mut().accept(l).ok();
        }
        if sent < total {
            if let Ok(k) =
                n.a.tcp_mut()
                    .send(c, &data[sent..(sent + 65536).min(total)])
            {
                sent += k;
            }
        }
        if let Some(s) = server {
            while let Ok(k) = n.b.tcp_mut().recv(s, &mut buf) {
                if k == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..k]);
            }
        }
        if got.len() == total {
            break;
        }
    }
    (got, n.b.counters(), n.a.counters())
}

#[test]
fn end_to_end_transfer_is_byte_exact_with_gro_on_and_off() {
    let total = 3 << 20;
    let (on, c_on, a_on) = transfer(true, total, PipeConfig::default());
    let (off, c_off, a_off) = transfer(false, total, PipeConfig::default());
    let want: Vec<u8> = (0..total).map(|i| (i * 31 + (i >> 9)) as u8).collect();
    assert!(on == want, "GRO on: {} bytes, mismatch", on.len());
    assert!(off == want, "GRO off: {} bytes, mismatch", off.len());
    assert!(c_on.gro_merges > 0);
    assert_eq!(c_off.gro_merges, 0);
    // GRO hands TCP fewer, larger segments.
    assert!(c_on.tcp.segments_in * 2 < c_off.tcp.segments_in);
    // On a clean link nothing may go missing between GRO and TCP: no retransmission at all.
    for a in [a_on, a_off] {
        assert_eq!(a.tcp.retransmits_fast + a.tcp.retransmits_rto, 0, "{a}");
        assert_eq!(a.tcp.tlp_probes, 0, "{a}");
    }
}

#[test]
fn end_to_end_transfer_survives_impairments_with_gro() {
    let total = 1 << 20;
    let pipe = PipeConfig::default()
        .loss(0.01)
        .reorder(0.01)
        .duplicate(0.005)
        .corrupt(0.002)
        .seed(42);
    let (got, c, _) = transfer(true, total, pipe);
    let want: Vec<u8> = (0..total).map(|i| (i * 31 + (i >> 9)) as u8).collect();
    assert!(got == want, "{} of {total} bytes, mismatch", got.len());
    assert!(c.gro_merges > 0);
}
