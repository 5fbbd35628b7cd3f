//! Per-frame checksum state (`buf::Csum`, Linux `skb->ip_summed`): a device that checks the
//! checksums of a frame (or knows it never crossed a wire) marks it, and the stack then does
//! not check it again; a frame nobody vouched for is checked once, and a bad one is dropped and
//! counted. The device here has `checksum.rx = true` (the stack verifies), so only the mark
//! decides. Frames are injected in one receive batch, in virtual time.

use netfold::buf::{Csum, PacketBuf, Pool};
use netfold::iface::{Counters, Stack, StackConfig};
use netfold::phy::{Device, DeviceCaps};
use netfold::time::Instant;
use netfold::wire::ethernet::{EtherType, EthernetAddress, EthernetRepr};
use netfold::wire::ipv4::Ipv4Repr;
use netfold::wire::tcp::{PseudoHeader, TcpFlags, TcpOptions, TcpPacket, TcpRepr};
use netfold::wire::udp::{UdpPacket, UdpRepr};
use netfold::wire::{IpProtocol, Ipv4Addr};

const IP_US: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MAC_US: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
const MAC_PEER: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);

/// Hands its frames up in one batch, each marked `csum`; discards what the stack sends.
struct Marking {
    frames: Vec<Vec<u8>>,
    csum: Csum,
}

impl Device for Marking {
    fn caps(&self) -> DeviceCaps {
        let caps = DeviceCaps {
            max_burst: 256,
            ..DeviceCaps::default()
        };
        // The stack verifies what the frame's state does not exempt.
        assert!(caps.checksum.rx);
        caps
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
            b.set_csum(self.csum);
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

/// An Ethernet/IPv4 frame around `l4` (protocol `proto`), IPv4 header checksum correct.
fn ip_frame(proto: IpProtocol, l4: &[u8]) -> Vec<u8> {
    let ip = Ipv4Repr {
        src: IP_PEER,
        dst: IP_US,
        protocol: proto,
        payload_len: l4.len(),
        ttl: 64,
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
        vlan: None,
    };
    let (el, il) = (eth.header_len(), ip.header_len());
    let mut f = vec![0u8; el + il + l4.len()];
    eth.emit(&mut f[..el]).unwrap();
    ip.emit(&mut f[el..el + il], true).unwrap();
    f[el + il..].copy_from_slice(l4);
    f
}

/// A TCP data segment (ACK, `len` bytes from `seq`) to port 80 whose checksum is wrong: it
/// was computed, then one payload bit flipped, as corruption on a link would.
fn corrupt_tcp(seq: u32, len: usize) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: 5000,
        dst_port: 80,
        seq,
        ack: 77,
        flags: TcpFlags(TcpFlags::ACK),
        window: 1000,
        urgent: 0,
        options: TcpOptions::default(),
    };
    let hl = repr.header_len();
    let mut seg = vec![0u8; hl + len];
    for (i, b) in seg[hl..].iter_mut().enumerate() {
        *b = (seq as usize + i) as u8;
    }
    let ph = PseudoHeader::new(IP_PEER, IP_US);
    let mut p = TcpPacket::new_unchecked(&mut seg[..]);
    repr.emit(&mut p);
    p.fill_checksum(&ph);
    assert!(p.verify_checksum(&ph));
    seg[hl + len / 2] ^= 0x10;
    assert!(!TcpPacket::new_unchecked(&seg[..]).verify_checksum(&ph));
    ip_frame(IpProtocol::Tcp, &seg)
}

/// A UDP datagram to closed port 9 whose (nonzero) checksum is wrong.
fn corrupt_udp() -> Vec<u8> {
    let data = b"hello, checksum";
    let mut d = vec![0u8; 8 + data.len()];
    let ph = PseudoHeader::new(IP_PEER, IP_US);
    let repr = UdpRepr {
        src_port: 40000,
        dst_port: 9,
    };
    repr.emit_with_checksum(&mut d, data, &ph).unwrap();
    let last = d.len() - 1;
    d[last] ^= 0x01;
    let p = UdpPacket::new_unchecked(&d[..]);
    assert!(p.checksum() != 0 && !p.verify_checksum(&ph));
    ip_frame(IpProtocol::Udp, &d)
}

/// `n` contiguous corrupt segments of 1000 bytes.
fn corrupt_train(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| corrupt_tcp(1000 + 1000 * i as u32, 1000))
        .collect()
}

fn run(frames: Vec<Vec<u8>>, csum: Csum, gro: bool) -> Counters {
    let mut st = Stack::new(StackConfig {
        gro,
        ..StackConfig::default()
    });
    let mut dev = Marking { frames, csum };
    st.poll(Instant::from_millis(1), &mut dev);
    assert!(dev.frames.is_empty());
    st.counters()
}

const PARTIAL: Csum = Csum::Partial {
    start: 34,
    offset: 16,
};

#[test]
fn a_tcp_segment_the_device_verified_is_not_checked_again() {
    // Linux trusts CHECKSUM_UNNECESSARY (and CHECKSUM_PARTIAL, a frame of the local kernel's):
    // the segment goes to TCP although its checksum is wrong, and no byte is summed.
    for gro in [true, false] {
        for csum in [Csum::Verified, PARTIAL] {
            let c = run(corrupt_train(4), csum, gro);
            let what = format!("gro {gro}, {csum:?}");
            assert_eq!(c.tcp_bad_checksum, 0, "{what}");
            assert_eq!(c.bytes_checksummed, 0, "{what}");
            // With GRO the four merge into one train; without, each enters TCP alone.
            assert_eq!(c.tcp.segments_in, if gro { 1 } else { 4 }, "{what}");
            if gro {
                assert_eq!(c.gro_merges, 3, "{what}");
            }
        }
    }
}

#[test]
fn an_unverified_tcp_segment_with_a_bad_checksum_is_dropped_and_counted() {
    for gro in [true, false] {
        let c = run(corrupt_train(4), Csum::Unverified, gro);
        assert_eq!(c.tcp_bad_checksum, 4, "gro {gro}");
        assert_eq!(c.tcp.segments_in, 0, "gro {gro}");
        // GRO leaves the payload's sum open for TCP (`tcp/place.rs`), so the four merge; TCP
        // drops each before it processes any.
        assert_eq!(c.gro_merges, if gro { 3 } else { 0 }, "gro {gro}");
        // Each segment (20-byte header + 1000 bytes) was summed exactly once, the header by
        // the interface, the payload by TCP (in a pass of its own: no connection to copy to).
        assert_eq!(c.bytes_checksummed, 4 * 1020, "gro {gro}");
        assert_eq!(c.tcp_rx_csum_separate, 4 * 1000, "gro {gro}");
    }
}

#[test]
fn a_udp_datagram_the_device_verified_is_not_checked_again() {
    // No socket on port 9: the stack checks the checksum before answering port unreachable,
    // unless the frame is marked.
    let c = run(vec![corrupt_udp()], Csum::Verified, true);
    assert_eq!((c.udp_bad_checksum, c.udp_no_socket), (0, 1));
    assert_eq!(c.bytes_checksummed, 0);
    let c = run(vec![corrupt_udp()], Csum::Unverified, true);
    assert_eq!((c.udp_bad_checksum, c.udp_no_socket), (1, 0));
}
