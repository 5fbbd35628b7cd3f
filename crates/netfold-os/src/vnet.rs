//! The virtio-net header and the offload logic shared by the TAP device and the packet socket.
//!
//! With `IFF_VNET_HDR` (TAP) or `PACKET_VNET_HDR` (AF_PACKET) every frame crossing the
//! user/kernel boundary is preceded by a `struct virtio_net_hdr` (virtio 1.x spec §5.1.6
//! "Device Operation", legacy layout, 10 bytes, host byte order for legacy devices):
//!
//! ```text
//! u8 flags; u8 gso_type; u16 hdr_len; u16 gso_size; u16 csum_start; u16 csum_offset;
//! ```
//!
//! It carries the two offloads this module implements at the boundary:
//! - checksum: `VIRTIO_NET_HDR_F_NEEDS_CSUM` means "the checksum field at
//!   `csum_start + csum_offset` holds the pseudo-header sum; whoever delivers the frame sums
//!   from `csum_start` to the end and stores the complement" (Linux `CHECKSUM_PARTIAL`);
//!   `VIRTIO_NET_HDR_F_DATA_VALID` means the sender already validated the checksums;
//! - segmentation: `gso_type` TCPV4 (or TCPV6) with `gso_size` (payload bytes per segment)
//!   and `hdr_len` (bytes of Ethernet+IP+TCP header repeated in each segment) marks a TCP
//!   super-segment that the receiver cuts (TSO on our transmit) or that the kernel aggregated
//!   (GRO on our receive).
//!
//! Both IP families: IPv4 (header checksum recomputed here, options allowed) and IPv6 without
//! extension headers (no header checksum, RFC 8200 §3; the transport checksum over the IPv6
//! pseudo-header, RFC 8200 §8.1, ICMPv6's included, RFC 4443 §2.3; a zero UDP checksum is
//! invalid over IPv6, §8.1; TSO as `GSO_TCPV6`, `csum_start` after the 40-byte header, as
//! Linux's `virtio_net_hdr_from_skb`). An IPv6 packet with extension headers is passed
//! without offload on transmit and verified as opaque (trusted only by its flags) on receive.
//!
//! The stack runs with `checksum { tx: false, rx: false }` on such a device, so the device is
//! what guarantees correctness: [`prepare_tx`] fixes up every outgoing frame and [`check_rx`]
//! checks or trusts every incoming one. Each received frame carries what the header said about
//! its checksum to the stack as its [`Csum`] ([`rx_csum`]), as a Linux driver sets
//! `skb->ip_summed`. Malformed frames never panic: they are either passed through without
//! offload (transmit) or dropped and counted (receive).
//!
//! The header fields of the frames (EtherType, IPv4 lengths and protocol, where each transport
//! checksum lies, the TCP header length and CWR) are read through the core's `wire` views and
//! constants: this module knows the virtio-net header's layout, not the protocols'.

use netfold::buf::{Csum, PacketBuf, Pool};
use netfold::mem::checksum;
use netfold::wire::checksum::{add, finish, pseudo_header_ip, pseudo_header_v6};
use netfold::wire::ethernet::{EtherType, EthernetFrame};
use netfold::wire::icmpv4;
use netfold::wire::ipv4::{Ipv4Packet, HEADER_LEN as IPV4_MIN_HEADER};
use netfold::wire::ipv6::{self, Ipv6Packet};
use netfold::wire::ipv6ext;
use netfold::wire::tcp::{self, TcpPacket};
use netfold::wire::udp::{self, UdpPacket};
use netfold::wire::{IpAddr, IpProtocol, Ipv4Addr};

/// Bytes of the legacy `struct virtio_net_hdr` (no `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: checksum is partial (pseudo-header only).
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: checksums already validated.
pub const F_DATA_VALID: u8 = 2;

/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP` (UFO, never produced here).
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_ECN`: the super-segment carries CWR; the segmenter must clear it after
/// the first piece (RFC 3168 §6.1.2).
pub const GSO_ECN: u8 = 0x80;

/// One `struct virtio_net_hdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads a header (host byte order, as legacy virtio and both Linux users of it expect).
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let b = b.get(..VNET_HDR_LEN)?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// The GSO type without the ECN bit.
    pub fn gso_kind(&self) -> u8 {
        self.gso_type & !GSO_ECN
    }
}

/// Offload counters of one device (or one queue).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadStats {
    /// Received frames whose checksum was partial and trusted as the kernel's own.
    pub rx_csum_partial: u64,
    /// Received frames the kernel marked DATA_VALID.
    pub rx_csum_valid: u64,
    /// Received frames without either flag, verified in software.
    pub rx_csum_verified: u64,
    /// Received frames dropped because a software-verified checksum was wrong.
    pub rx_bad_checksum: u64,
    /// Received frames dropped because the vnet header or the headers it points at were bad.
    pub rx_malformed: u64,
    /// Received GSO super-frames (kernel GRO/TSO) passed up whole.
    pub rx_gso_frames: u64,
    /// Segments made by splitting received super-frames in software.
    pub rx_gso_split_segments: u64,
    /// Transmitted frames sent with a partial checksum for the kernel to finish.
    pub tx_csum_partial: u64,
    /// Transmitted frames whose checksums were computed here in software (ICMP, IPv4 header
    /// aside, or frames the partial path could not describe).
    pub tx_csum_software: u64,
    /// Transmitted TCP super-segments marked for kernel segmentation (TSO).
    pub tx_gso_frames: u64,
    /// Transmitted frames whose payload went as fragments (zero-copy send, one `writev` of
    /// headers and the application's buffers), and those payload bytes.
    pub tx_sg_frames: u64,
    pub tx_sg_bytes: u64,
    /// Frames with fragments that had to be copied into one buffer first (headers the
    /// fragment path could not describe; none in normal operation).
    pub tx_sg_linearized: u64,
}

/// Where the IPv4 and transport headers of an Ethernet frame are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Layout {
    /// Offset of the IPv4 header.
    pub l3: usize,
    /// IPv4 header length.
    pub ihl: usize,
    /// Offset of the transport header.
    pub l4: usize,
    /// End of the IP datagram (offset in the frame, `l3 + total length`).
    pub end: usize,
    pub protocol: IpProtocol,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// More-fragments set or non-zero fragment offset.
    pub fragment: bool,
}

/// Where the IP (IPv4, or IPv6 without extension headers) and transport headers of an
/// Ethernet frame are: what the offloads need of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpLayout {
    /// Offset of the IP header.
    pub l3: usize,
    /// IP header length (IPv4: IHL x 4; IPv6: 40).
    pub ihl: usize,
    /// Offset of the transport header.
    pub l4: usize,
    /// End of the IP datagram (offset in the frame).
    pub end: usize,
    /// The transport protocol (IPv6: the fixed header's next header).
    pub protocol: IpProtocol,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4 fragment (IPv6 fragments have a fragment header, which is not located here).
    pub fragment: bool,
    /// The packet is IPv6.
    pub v6: bool,
}

impl From<Ipv4Layout> for IpLayout {
    fn from(l: Ipv4Layout) -> IpLayout {
        IpLayout {
            l3: l.l3,
            ihl: l.ihl,
            l4: l.l4,
            end: l.end,
            protocol: l.protocol,
            src: l.src.into(),
            dst: l.dst.into(),
            fragment: l.fragment,
            v6: false,
        }
    }
}

/// Finds the IP datagram of an untagged Ethernet II frame: IPv4 as [`ipv4_layout`], or IPv6
/// whose fixed header's next header is TCP, UDP or ICMPv6 (RFC 8200 §3; a packet with
/// extension headers, or a jumbogram's zero payload length, is `None`: not offloaded).
pub fn ip_layout(frame: &[u8]) -> Option<IpLayout> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    match eth.ethertype() {
        EtherType::Ipv4 => ipv4_layout(frame).map(IpLayout::from),
        EtherType::Ipv6 => {
            let l3 = eth.header_len();
            // Checks 40 bytes and the payload length within the frame.
            let ip = Ipv6Packet::new_checked(frame.get(l3..)?).ok()?;
            let protocol = ip.next_header();
            let upper = matches!(
                protocol,
                IpProtocol::Tcp | IpProtocol::Udp | IpProtocol::Icmpv6
            );
            if ip.version() != 6 || ip.payload_len() == 0 || !upper {
                return None;
            }
            let l4 = l3 + ipv6::HEADER_LEN;
            Some(IpLayout {
                l3,
                ihl: ipv6::HEADER_LEN,
                l4,
                end: l4 + usize::from(ip.payload_len()),
                protocol,
                src: ip.src_addr().into(),
                dst: ip.dst_addr().into(),
                fragment: false,
                v6: true,
            })
        }
        _ => None,
    }
}

/// Finds the IPv4 datagram of an untagged Ethernet II frame. `None` for anything else (ARP,
/// VLAN, IPv6) or for inconsistent lengths (RFC 791 §3.1: IHL >= 5, total length >= IHL and
/// within the frame).
pub fn ipv4_layout(frame: &[u8]) -> Option<Ipv4Layout> {
    // The outer EtherType: a tagged frame has the VLAN type there and is not ours to offload.
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Ipv4 {
        return None;
    }
    let l3 = eth.header_len();
    // Checks IHL >= 5, total length >= IHL and total length within the frame.
    let ip = Ipv4Packet::new_checked(frame.get(l3..)?).ok()?;
    if ip.version() != 4 {
        return None;
    }
    let ihl = ip.header_len();
    Some(Ipv4Layout {
        l3,
        ihl,
        l4: l3 + ihl,
        end: l3 + usize::from(ip.total_len()),
        protocol: ip.protocol(),
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        fragment: ip.is_fragment(),
    })
}

fn put16(frame: &mut [u8], at: usize, v: u16) {
    if let Some(s) = frame.get_mut(at..at + 2) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

/// The IPv4 header of a located datagram.
fn ipv4_header<'a>(frame: &'a [u8], l: &IpLayout) -> Ipv4Packet<&'a [u8]> {
    Ipv4Packet::new_unchecked(frame.get(l.l3..l.l4).unwrap_or(&[]))
}

/// Recomputes the IPv4 header checksum (RFC 791 §3.1, RFC 1071); IPv6 has none (RFC 8200 §3).
fn fill_ipv4_checksum(frame: &mut [u8], l: &IpLayout) {
    if l.v6 {
        return;
    }
    if let Some(h) = frame.get_mut(l.l3..l.l4) {
        Ipv4Packet::new_unchecked(h).fill_checksum();
    }
}

/// The checksum field's offset inside the transport header (from `wire`), if the protocol has
/// one we handle and the segment is long enough to hold the header (ICMP: the field). ICMPv6
/// has its checksum where ICMPv4 has it (type, code, checksum: RFC 4443 §2.1).
fn l4_csum_offset(frame: &[u8], l: &IpLayout) -> Option<usize> {
    let seg_len = l.end - l.l4;
    let (field, min) = match l.protocol {
        IpProtocol::Tcp => (tcp::CHECKSUM_FIELD, tcp::HEADER_LEN),
        IpProtocol::Udp => (udp::CHECKSUM_FIELD, udp::HEADER_LEN),
        IpProtocol::Icmp if !l.v6 => (icmpv4::CHECKSUM_FIELD, icmpv4::CHECKSUM_FIELD.end),
        IpProtocol::Icmpv6 if l.v6 => (icmpv4::CHECKSUM_FIELD, icmpv4::CHECKSUM_FIELD.end),
        _ => return None,
    };
    if seg_len < min || frame.len() < l.end {
        return None;
    }
    Some(field.start)
}

/// The pseudo-header sum for TCP/UDP (RFC 9293 §3.1, RFC 768; IPv6: RFC 8200 §8.1) and
/// ICMPv6 (RFC 4443 §2.3); ICMPv4 has none (RFC 792).
fn pseudo_sum(l: &IpLayout) -> u16 {
    match l.protocol {
        IpProtocol::Tcp | IpProtocol::Udp => {
            pseudo_header_ip(l.src, l.dst, l.protocol, (l.end - l.l4) as u32)
        }
        IpProtocol::Icmpv6 if l.v6 => {
            pseudo_header_ip(l.src, l.dst, l.protocol, (l.end - l.l4) as u32)
        }
        _ => 0,
    }
}

/// Fills the IPv4 header checksum and the complete TCP/UDP/ICMP checksum of `frame` in
/// software (IPv6: the TCP/UDP/ICMPv6 checksum). Returns `false` (touching nothing) for frames
/// whose IP and transport headers cannot be located; fragments get the IP checksum only.
pub fn fill_checksums(frame: &mut [u8]) -> bool {
    let Some(l) = ip_layout(frame) else {
        return false;
    };
    fill_ipv4_checksum(frame, &l);
    if l.fragment {
        return true;
    }
    let Some(off) = l4_csum_offset(frame, &l) else {
        return true;
    };
    let at = l.l4 + off;
    put16(frame, at, 0);
    let sum = add(pseudo_sum(&l), checksum(&frame[l.l4..l.end]));
    let mut c = finish(sum);
    // RFC 768 (and RFC 8200 §8.1): a computed UDP checksum of zero is transmitted as all ones.
    if l.protocol == IpProtocol::Udp && c == 0 {
        c = 0xffff;
    }
    put16(frame, at, c);
    true
}

/// Verifies the IPv4 header checksum and the TCP/UDP/ICMP checksum of `frame` in software
/// (IPv6: the TCP/UDP/ICMPv6 checksum; one with extension headers through
/// [`verify_ipv6_checksum`], which walks them). Frames that are neither (ARP) verify
/// trivially; fragments are checked at the IP layer only (the transport checksum covers the
/// reassembled datagram, which the stack checks after reassembly only when it verifies; we
/// report it as valid IP-wise).
pub fn verify_checksums(frame: &[u8]) -> bool {
    let Some(l) = ip_layout(frame) else {
        return verify_ipv6_checksum(frame).unwrap_or(true);
    };
    if !l.v6 && !ipv4_header(frame, &l).verify_checksum() {
        return false;
    }
    if l.fragment {
        return true;
    }
    if l4_csum_offset(frame, &l).is_none() {
        return true;
    }
    // RFC 768: an all-zero UDP checksum means the sender computed none; over IPv6 that is
    // not allowed and the datagram is invalid (RFC 8200 §8.1).
    if l.protocol == IpProtocol::Udp
        && UdpPacket::new_unchecked(&frame[l.l4..l.end]).checksum() == 0
    {
        return !l.v6;
    }
    add(pseudo_sum(&l), checksum(&frame[l.l4..l.end])) == 0xffff
}

/// The transport checksum of an untagged Ethernet frame carrying IPv6 (RFC 8200 §8.1: TCP,
/// UDP and ICMPv6 over the IPv6 pseudo-header), found past the extension headers:
/// `Some(valid)`, or `None` when the frame is not IPv6, its header chain cannot be followed,
/// it is a fragment (the checksum covers the reassembled datagram), or its upper layer has
/// no checksum netfold knows. A zero UDP checksum is invalid over IPv6 (RFC 8200 §8.1: "IPv6
/// receivers must discard UDP packets containing a zero checksum").
///
/// Without it a frame the kernel marked neither partial nor valid would reach a stack that
/// trusts the device (`checksum.rx = false`) unverified.
pub fn verify_ipv6_checksum(frame: &[u8]) -> Option<bool> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Ipv6 {
        return None;
    }
    let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
    if ip.version() != 6 {
        return None;
    }
    let payload = ip.payload();
    let (nh, off, frag) = ipv6ext::skip_to_upper(u8::from(ip.next_header()), payload)?;
    if frag.is_some_and(|f| !f.is_atomic()) {
        return None;
    }
    let protocol = IpProtocol::from(nh);
    let seg = payload.get(off..)?;
    // Too short for its header: left for the stack to find malformed.
    let min = match protocol {
        IpProtocol::Tcp => tcp::HEADER_LEN,
        IpProtocol::Udp => udp::HEADER_LEN,
        IpProtocol::Icmpv6 => netfold::wire::icmpv6::CHECKSUM_FIELD.end,
        _ => return None,
    };
    if seg.len() < min {
        return None;
    }
    if protocol == IpProtocol::Udp && UdpPacket::new_unchecked(seg).checksum() == 0 {
        return Some(false);
    }
    let len = u32::try_from(seg.len()).ok()?;
    let sum = add(
        pseudo_header_v6(ip.src_addr(), ip.dst_addr(), protocol, len),
        checksum(seg),
    );
    Some(sum == 0xffff)
}

/// Completes a partial checksum (Linux `skb_checksum_help`): sums `frame[start..]` (the field
/// already holds the pseudo-header sum) and stores the complement at `start + offset`.
/// `false` if the offsets do not fit the frame.
pub fn complete_partial(frame: &mut [u8], start: usize, offset: usize) -> bool {
    let at = start.saturating_add(offset);
    if start >= frame.len() || at.saturating_add(2) > frame.len() {
        return false;
    }
    let c = finish(checksum(&frame[start..]));
    put16(frame, at, c);
    true
}

/// Prepares an outgoing frame for a device with checksum offload on, and returns the vnet
/// header to send it with. The stack left the checksums of the frame unset (its device caps
/// say `checksum.tx = false`), so this:
/// - recomputes the IPv4 header checksum (20-60 bytes; the kernel verifies it on ingress);
/// - TCP/UDP: writes the pseudo-header sum into the checksum field and asks the kernel to
///   finish it (`F_NEEDS_CSUM`, `csum_start` = transport header, `csum_offset` = field), the
///   Linux CHECKSUM_PARTIAL convention;
/// - ICMP: computes the checksum in software (small, and the kernel offers no partial ICMP);
/// - TCP frames whose IP packet exceeds `mtu` (`tso` on): marks them GSO TCPV4 (TCPV6 for
///   IPv6) with `gso_size` = payload bytes per segment so each piece fits the MTU, `hdr_len`
///   = headers through TCP, and the ECN bit when CWR is set.
///
/// IPv6 (without extension headers) the same, with no header checksum to compute and the
/// ICMPv6 checksum (it covers a pseudo-header) computed in software like ICMP's. Frames whose
/// headers are not located (ARP, IPv6 with extension headers), fragments, and frames carrying
/// bytes after the IP datagram (the kernel would sum those into a partial checksum) are given
/// complete software checksums or left as they are, and sent with an empty header.
pub fn prepare_tx(frame: &mut [u8], mtu: usize, tso: bool, stats: &mut OffloadStats) -> VnetHdr {
    let Some(l) = ip_layout(frame) else {
        return VnetHdr::default();
    };
    let partial_ok = !l.fragment
        && l.end == frame.len()
        && matches!(l.protocol, IpProtocol::Tcp | IpProtocol::Udp);
    let Some(off) = l4_csum_offset(frame, &l).filter(|_| partial_ok) else {
        fill_checksums(frame);
        stats.tx_csum_software += 1;
        return VnetHdr::default();
    };
    fill_ipv4_checksum(frame, &l);
    put16(frame, l.l4 + off, pseudo_sum(&l));
    stats.tx_csum_partial += 1;
    let mut h = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        // Both fit in u16: the frame's IP header starts at 14 and is at most 60 bytes.
        csum_start: l.l4 as u16,
        csum_offset: off as u16,
    };
    let ip_len = l.end - l.l3;
    let tcp = (l.protocol == IpProtocol::Tcp && ip_len > mtu && tso)
        .then(|| TcpPacket::new_checked(&frame[l.l4..l.end]).ok())
        .flatten();
    if let Some(t) = tcp {
        let thl = t.header_len();
        let hdrs = l.ihl + thl;
        if mtu > hdrs {
            h.gso_type = if l.v6 { GSO_TCPV6 } else { GSO_TCPV4 };
            // RFC 3168 §6.1.2: CWR only on the first segment; the kernel's segmenter does this
            // when told the super-segment is ECN-marked.
            if t.flags().cwr() {
                h.gso_type |= GSO_ECN;
            }
            h.gso_size = (mtu - hdrs).min(usize::from(u16::MAX)) as u16;
            h.hdr_len = (l.l4 + thl) as u16;
            stats.tx_gso_frames += 1;
        }
    }
    h
}

/// [`prepare_tx`] for a TCP frame whose linear part `head` is exactly its Ethernet, IPv4 and
/// TCP headers and whose `payload_len` payload bytes follow in fragments (zero-copy send on a
/// scatter-gather device): the checksums are left to the kernel (`F_NEEDS_CSUM`; the
/// pseudo-header sum goes into the field, the IPv4 header checksum is computed from the
/// header), super-segments are marked for TSO, and no payload byte is read. `None` (nothing
/// touched) when the headers do not describe such a frame: untagged IPv4, TCP, not a
/// fragment, the IPv4 total length equal to headers plus `payload_len`; the caller then
/// copies the fragments in and uses [`prepare_tx`].
pub fn prepare_tx_sg(
    head: &mut [u8],
    payload_len: usize,
    mtu: usize,
    tso: bool,
    stats: &mut OffloadStats,
) -> Option<VnetHdr> {
    let eth = EthernetFrame::new_checked(&*head).ok()?;
    if eth.ethertype() != EtherType::Ipv4 {
        return None;
    }
    let l3 = eth.header_len();
    let ip_bytes = head.get(l3..)?;
    if ip_bytes.len() < IPV4_MIN_HEADER {
        return None;
    }
    let ip = Ipv4Packet::new_unchecked(ip_bytes);
    let ihl = ip.header_len();
    if ip.version() != 4
        || ihl < IPV4_MIN_HEADER
        || ip_bytes.len() < ihl
        || ip.protocol() != IpProtocol::Tcp
        || ip.is_fragment()
        || usize::from(ip.total_len()) != ip_bytes.len() + payload_len
    {
        return None;
    }
    let l4 = l3 + ihl;
    // Checks the data offset against the bytes present: the header must be all of them.
    let t = TcpPacket::new_checked(head.get(l4..)?).ok()?;
    let thl = t.header_len();
    let cwr = t.flags().cwr();
    if l4 + thl != head.len() {
        return None;
    }
    let l: IpLayout = Ipv4Layout {
        l3,
        ihl,
        l4,
        end: l3 + usize::from(ip.total_len()),
        protocol: IpProtocol::Tcp,
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        fragment: false,
    }
    .into();
    fill_ipv4_checksum(head, &l);
    put16(head, l4 + tcp::CHECKSUM_FIELD.start, pseudo_sum(&l));
    stats.tx_csum_partial += 1;
    stats.tx_sg_frames += 1;
    stats.tx_sg_bytes += payload_len as u64;
    let mut h = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: l4 as u16,
        csum_offset: tcp::CHECKSUM_FIELD.start as u16,
    };
    let hdrs = ihl + thl;
    if tso && l.end - l3 > mtu && mtu > hdrs {
        h.gso_type = GSO_TCPV4;
        if cwr {
            h.gso_type |= GSO_ECN;
        }
        h.gso_size = (mtu - hdrs).min(usize::from(u16::MAX)) as u16;
        h.hdr_len = (l4 + thl) as u16;
        stats.tx_gso_frames += 1;
    }
    Some(h)
}

/// The checksum state a frame received with vnet header `h` carries into the stack (Linux
/// `virtio_net_hdr_to_skb` sets `skb->ip_summed` the same way):
/// - `F_NEEDS_CSUM` → [`Csum::Partial`] at `csum_start`/`csum_offset` (`CHECKSUM_PARTIAL`: the
///   frame comes from the local kernel's transmit path, never crossed a wire, and is taken as
///   verified on receive);
/// - `F_DATA_VALID` → [`Csum::Verified`] (`CHECKSUM_UNNECESSARY`);
/// - neither → [`Csum::Unverified`] (`CHECKSUM_NONE`: somebody must check it, once).
pub fn rx_csum(h: &VnetHdr) -> Csum {
    if h.flags & F_NEEDS_CSUM != 0 {
        Csum::Partial {
            start: h.csum_start,
            offset: h.csum_offset,
        }
    } else if h.flags & F_DATA_VALID != 0 {
        Csum::Verified
    } else {
        Csum::Unverified
    }
}

/// What [`check_rx`] decided about a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxVerdict {
    /// Deliver the frame as it is.
    Deliver,
    /// Deliver, but it is a TCP super-segment larger than the MTU (kernel GRO/TSO).
    DeliverGso,
    /// Drop it (counted in the stats).
    Drop,
}

/// Decides what to do with a frame received with vnet header `h` on a device whose stack
/// trusts it (`checksum.rx = false`):
/// - `F_NEEDS_CSUM`: the frame comes from the kernel's own transmit path and never crossed a
///   wire; its checksum is partial by design. The offsets are bounds-checked and the frame is
///   trusted (Linux treats CHECKSUM_PARTIAL as verified on receive too). Capture copies get
///   their checksum completed by the pcap writer.
/// - `F_DATA_VALID`: trusted.
/// - neither: verified in software, dropped and counted if wrong.
///
/// A GSO type other than TCPV4 and TCPV6 (UDP fragmentation or segmentation offload) is not
/// something we asked for and is dropped as malformed. A delivered frame's checksum state is [`rx_csum`], or
/// [`Csum::Verified`] when this verified it (neither flag).
pub fn check_rx(h: &VnetHdr, frame: &[u8], stats: &mut OffloadStats) -> RxVerdict {
    if h.flags & F_NEEDS_CSUM != 0 {
        let at = usize::from(h.csum_start).saturating_add(usize::from(h.csum_offset));
        if at.saturating_add(2) > frame.len() {
            stats.rx_malformed += 1;
            return RxVerdict::Drop;
        }
        stats.rx_csum_partial += 1;
    } else if h.flags & F_DATA_VALID != 0 {
        stats.rx_csum_valid += 1;
    } else {
        stats.rx_csum_verified += 1;
        if !verify_checksums(frame) {
            stats.rx_bad_checksum += 1;
            return RxVerdict::Drop;
        }
    }
    match h.gso_kind() {
        GSO_NONE => RxVerdict::Deliver,
        GSO_TCPV4 | GSO_TCPV6 => {
            stats.rx_gso_frames += 1;
            RxVerdict::DeliverGso
        }
        _ => {
            stats.rx_malformed += 1;
            RxVerdict::Drop
        }
    }
}

/// Software GSO: cuts an Ethernet/IPv4/TCP or Ethernet/IPv6/TCP (no extension headers)
/// super-frame into segments carrying at most `mss` payload bytes each, appended to `out`
/// with buffers from `pool`, by the stack's one segmenter
/// ([`netfold::offload::gso::split_frame`]: per-piece IP length, IPv4 id, sequence number and
/// complete checksums; FIN and PSH on the last piece only, CWR on the first only). Returns
/// the number of segments, 0 (appending nothing) if the frame is not a well-formed untagged
/// TCP frame of either family or `mss` is 0.
pub fn gso_split(frame: &[u8], mss: usize, pool: &mut Pool, out: &mut Vec<PacketBuf>) -> usize {
    match ip_layout(frame) {
        Some(l) if l.protocol == IpProtocol::Tcp => {
            netfold::offload::gso::split_frame(&frame[..l.end], l.l3, mss, pool, out)
        }
        _ => 0,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // The tests build frames byte by byte, independently of the views under test.
    const ETHERTYPE_IPV4: u16 = 0x0800;
    const PROTO_ICMP: u8 = 1;
    const PROTO_TCP: u8 = 6;

    /// An Ethernet/IPv4/TCP frame with `payload_len` bytes of payload, complete checksums.
    pub(crate) fn tcp_frame(payload_len: usize, flags: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 32 + payload_len];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip_len = (20 + 32 + payload_len) as u16;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        f[18..20].copy_from_slice(&7u16.to_be_bytes());
        f[20] = 0x40; // DF
        f[22] = 64;
        f[23] = PROTO_TCP;
        f[26..30].copy_from_slice(&[198, 18, 0, 2]);
        f[30..34].copy_from_slice(&[198, 18, 0, 1]);
        let t = 34;
        f[t..t + 2].copy_from_slice(&5000u16.to_be_bytes());
        f[t + 2..t + 4].copy_from_slice(&80u16.to_be_bytes());
        f[t + 4..t + 8].copy_from_slice(&0xffff_ff00u32.to_be_bytes());
        f[t + 8..t + 12].copy_from_slice(&1u32.to_be_bytes());
        f[t + 12] = 8 << 4; // 32-byte header (timestamps)
        f[t + 13] = flags;
        f[t + 14..t + 16].copy_from_slice(&512u16.to_be_bytes());
        f[t + 20..t + 32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        for (i, b) in f[t + 32..].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        assert!(fill_checksums(&mut f));
        f
    }

    #[test]
    fn header_round_trips() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::parse(&h.to_bytes()), Some(h));
        assert_eq!(h.gso_kind(), GSO_TCPV4);
        assert_eq!(VnetHdr::parse(&[0; 9]), None);
    }

    #[test]
    fn prepare_tx_leaves_a_partial_checksum_the_kernel_can_finish() {
        let good = tcp_frame(100, 0x18);
        let mut f = good.clone();
        // The stack with checksum.tx = false leaves both checksums unset.
        f[24..26].fill(0);
        f[34 + 16..34 + 18].fill(0);
        let mut st = OffloadStats::default();
        let h = prepare_tx(&mut f, 1500, true, &mut st);
        assert_eq!((h.flags, h.gso_type), (F_NEEDS_CSUM, GSO_NONE));
        assert_eq!((h.csum_start, h.csum_offset), (34, 16));
        assert_eq!(&f[24..26], &good[24..26], "IPv4 header checksum filled");
        // What the kernel does with CHECKSUM_PARTIAL gives the true checksum.
        assert!(complete_partial(&mut f, 34, 16));
        assert_eq!(f, good);
        assert_eq!(st.tx_csum_partial, 1);
    }

    #[test]
    fn prepare_tx_marks_super_segments_for_tso() {
        let mut f = tcp_frame(4000, 0x80 | 0x10);
        let mut st = OffloadStats::default();
        let h = prepare_tx(&mut f, 1500, true, &mut st);
        assert_eq!(h.gso_type, GSO_TCPV4 | GSO_ECN);
        assert_eq!(h.gso_size, 1500 - 20 - 32);
        assert_eq!(h.hdr_len, 14 + 20 + 32);
        assert_eq!(st.tx_gso_frames, 1);
        // Without TSO the same frame gets no GSO marking.
        let mut g = tcp_frame(4000, 0x10);
        assert_eq!(prepare_tx(&mut g, 1500, false, &mut st).gso_type, GSO_NONE);
    }

    #[test]
    fn prepare_tx_computes_icmp_and_passes_other_frames() {
        let mut f = tcp_frame(10, 0);
        f[23] = PROTO_ICMP;
        f[34..38].fill(0);
        let mut st = OffloadStats::default();
        assert_eq!(prepare_tx(&mut f, 1500, true, &mut st), VnetHdr::default());
        assert!(verify_checksums(&f));
        assert_eq!(st.tx_csum_software, 1);
        // ARP and garbage pass untouched with an empty header.
        let mut arp = vec![0xffu8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp.clone();
        assert_eq!(
            prepare_tx(&mut arp, 1500, true, &mut st),
            VnetHdr::default()
        );
        assert_eq!(arp, before);
        for n in 0..60 {
            let mut junk = vec![0x45u8; n];
            let _ = prepare_tx(&mut junk, 1500, true, &mut st);
        }
    }

    #[test]
    fn check_rx_trusts_flags_and_verifies_the_rest() {
        let mut st = OffloadStats::default();
        let good = tcp_frame(50, 0x10);
        let none = VnetHdr::default();
        assert_eq!(check_rx(&none, &good, &mut st), RxVerdict::Deliver);
        let mut bad = good.clone();
        bad[80] ^= 1;
        assert_eq!(check_rx(&none, &bad, &mut st), RxVerdict::Drop);
        assert_eq!(st.rx_bad_checksum, 1);
        let valid = VnetHdr {
            flags: F_DATA_VALID,
            ..none
        };
        assert_eq!(check_rx(&valid, &bad, &mut st), RxVerdict::Deliver);
        let partial = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..none
        };
        assert_eq!(check_rx(&partial, &bad, &mut st), RxVerdict::Deliver);
        let wild = VnetHdr {
            csum_start: 60000,
            ..partial
        };
        assert_eq!(check_rx(&wild, &good, &mut st), RxVerdict::Drop);
        let gso = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            ..valid
        };
        assert_eq!(check_rx(&gso, &good, &mut st), RxVerdict::DeliverGso);
        let ufo = VnetHdr {
            gso_type: GSO_UDP,
            ..valid
        };
        assert_eq!(check_rx(&ufo, &good, &mut st), RxVerdict::Drop);
        assert_eq!((st.rx_malformed, st.rx_gso_frames), (2, 1));
    }

    #[test]
    fn the_header_flags_become_the_frames_checksum_state() {
        let none = VnetHdr::default();
        assert_eq!(rx_csum(&none), Csum::Unverified);
        let valid = VnetHdr {
            flags: F_DATA_VALID,
            ..none
        };
        assert_eq!(rx_csum(&valid), Csum::Verified);
        let partial = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..none
        };
        assert_eq!(
            rx_csum(&partial),
            Csum::Partial {
                start: 34,
                offset: 16
            }
        );
        // Both flags: the checksum is partial (the kernel sets only one; NEEDS_CSUM wins, as
        // in `check_rx`).
        let both = VnetHdr {
            flags: F_NEEDS_CSUM | F_DATA_VALID,
            ..partial
        };
        assert_eq!(rx_csum(&both), rx_csum(&partial));
        // What each state means to the stack: only an unverified frame is checked there.
        assert!(rx_csum(&none).needs_verify());
        assert!(!rx_csum(&valid).needs_verify() && !rx_csum(&partial).needs_verify());
    }

    #[test]
    fn checksum_fields_are_where_the_views_put_them() {
        // The offsets vnet hands the kernel come from wire; check them against the frame
        // built by hand: TCP's field at 16, UDP's at 6, ICMP's at 2 from the transport header.
        let f = tcp_frame(10, 0x10);
        let l = ipv4_layout(&f).unwrap();
        assert_eq!((l.l3, l.ihl, l.l4, l.end), (14, 20, 34, f.len()));
        assert_eq!(l.protocol, IpProtocol::Tcp);
        assert_eq!(l4_csum_offset(&f, &l.into()), Some(16));
        let mut u = f.clone();
        u[23] = 17;
        assert_eq!(
            l4_csum_offset(&u, &ipv4_layout(&u).unwrap().into()),
            Some(6)
        );
        u[23] = PROTO_ICMP;
        assert_eq!(
            l4_csum_offset(&u, &ipv4_layout(&u).unwrap().into()),
            Some(2)
        );
        // A tagged frame, a non-IPv4 version and a short IPv4 header are not located.
        let mut t = f.clone();
        t[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        assert_eq!(ipv4_layout(&t), None);
        let mut v = f.clone();
        v[14] = 0x65;
        assert_eq!(ipv4_layout(&v), None);
        let mut s = f.clone();
        s[14] = 0x44;
        assert_eq!(ipv4_layout(&s), None);
    }

    #[test]
    fn gso_split_rebuilds_the_segments_a_sender_would_have_sent() {
        let payload = 3000;
        let big = tcp_frame(payload, 0x80 | 0x10 | 0x08 | 0x01); // CWR ACK PSH FIN
        let mut pool = Pool::new(2048, 8);
        let mut out = Vec::new();
        assert_eq!(gso_split(&big, 1000, &mut pool, &mut out), 3);
        let mut data = Vec::new();
        for (i, seg) in out.iter().enumerate() {
            let s = seg.as_slice();
            assert!(verify_checksums(s), "segment {i} checksums");
            let l = ipv4_layout(s).unwrap();
            assert_eq!(l.end, s.len());
            assert_eq!(u16::from_be_bytes([s[18], s[19]]), 7 + i as u16);
            let seq = u32::from_be_bytes([s[38], s[39], s[40], s[41]]);
            assert_eq!(seq, 0xffff_ff00u32.wrapping_add(1000 * i as u32));
            let fl = s[47];
            assert_eq!(fl & 0x80 != 0, i == 0, "CWR on the first only");
            assert_eq!(fl & 0x09 == 0x09, i == 2, "FIN+PSH on the last only");
            assert!(fl & 0x10 != 0);
            data.extend_from_slice(&s[66..]);
        }
        assert_eq!(data, big[66..]);
        assert_eq!(gso_split(&big[..40], 1000, &mut pool, &mut out), 0);
        assert_eq!(gso_split(&big, 0, &mut pool, &mut out), 0);
    }

    #[test]
    fn no_panics_on_arbitrary_bytes() {
        let mut st = OffloadStats::default();
        let mut pool = Pool::new(256, 4);
        let mut out = Vec::new();
        for base in [tcp_frame(20, 0x10), tcp6_frame(20, 0x10)] {
            for cut in 0..base.len() {
                for flip in [0usize, 14, 16, 17, 18, 19, 20, 23, 46, 66] {
                    let mut f = base[..cut].to_vec();
                    if let Some(b) = f.get_mut(flip) {
                        *b = b.wrapping_add(0x55);
                    }
                    let h = VnetHdr {
                        flags: F_NEEDS_CSUM,
                        gso_type: GSO_TCPV4,
                        csum_start: 34,
                        csum_offset: 16,
                        ..Default::default()
                    };
                    let _ = check_rx(&h, &f, &mut st);
                    let _ = verify_checksums(&f);
                    let _ = gso_split(&f, 7, &mut pool, &mut out);
                    let _ = prepare_tx(&mut f, 60, true, &mut st);
                    let _ = fill_checksums(&mut f);
                    let _ = complete_partial(&mut f, 34, 16);
                    let h6 = VnetHdr {
                        gso_type: GSO_TCPV6,
                        csum_start: 54,
                        ..h
                    };
                    let _ = check_rx(&h6, &f, &mut st);
                    let _ = ip_layout(&f);
                }
            }
        }
    }

    // ---- IPv6 ----

    const ETHERTYPE_IPV6: u16 = 0x86dd;

    /// An Ethernet/IPv6/`next` frame whose fixed header comes from `wire::ipv6::Ipv6Repr::emit`
    /// and whose upper-layer bytes are `l4` (checksum left as given).
    fn ip6_frame(next: IpProtocol, l4: &[u8]) -> Vec<u8> {
        use netfold::wire::ipv6::Ipv6Repr;
        let mut f = vec![0u8; 14 + 40 + l4.len()];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        let ip = Ipv6Repr {
            src: "2001:db8::2".parse().unwrap(),
            dst: "2001:db8::1".parse().unwrap(),
            next_header: next,
            payload_len: l4.len(),
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0x12345,
        };
        ip.emit(&mut f[14..54]).unwrap();
        f[54..].copy_from_slice(l4);
        f
    }

    /// An Ethernet/IPv6/TCP frame with `payload_len` bytes of payload (32-byte TCP header
    /// with timestamps), complete checksums.
    pub(crate) fn tcp6_frame(payload_len: usize, flags: u8) -> Vec<u8> {
        let mut t = vec![0u8; 32 + payload_len];
        t[0..2].copy_from_slice(&5000u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[4..8].copy_from_slice(&0xffff_ff00u32.to_be_bytes());
        t[8..12].copy_from_slice(&1u32.to_be_bytes());
        t[12] = 8 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&512u16.to_be_bytes());
        t[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        for (i, b) in t[32..].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let mut f = ip6_frame(IpProtocol::Tcp, &t);
        assert!(fill_checksums(&mut f));
        f
    }

    /// The one's-complement check of an IPv6 frame's upper layer, summed by hand (pseudo-header
    /// of RFC 8200 §8.1 from the frame's bytes, independently of `wire`).
    fn v6_sum_ok(f: &[u8], next: u8) -> bool {
        let l4 = &f[54..];
        let mut ph = Vec::new();
        ph.extend_from_slice(&f[22..54]);
        ph.extend_from_slice(&(l4.len() as u32).to_be_bytes());
        ph.extend_from_slice(&[0, 0, 0, next]);
        add(checksum(&ph), checksum(l4)) == 0xffff
    }

    #[test]
    fn ipv6_layout_and_software_checksums() {
        let f = tcp6_frame(100, 0x18);
        let l = ip_layout(&f).unwrap();
        assert!(l.v6);
        assert_eq!((l.l3, l.ihl, l.l4, l.end), (14, 40, 54, f.len()));
        assert_eq!(l.protocol, IpProtocol::Tcp);
        assert_eq!(ipv4_layout(&f), None);
        assert!(
            v6_sum_ok(&f, 6),
            "fill_checksums used the IPv6 pseudo-header"
        );
        assert!(verify_checksums(&f));
        let mut bad = f.clone();
        bad[100] ^= 1;
        assert!(!verify_checksums(&bad));
        // An extension header (hop-by-hop, next header 0) in front of TCP: not located, so
        // neither offloaded nor verified here.
        let mut ext = f.clone();
        ext[20] = 0;
        assert_eq!(ip_layout(&ext), None);
        let mut st = OffloadStats::default();
        assert_eq!(
            prepare_tx(&mut ext, 1500, true, &mut st),
            VnetHdr::default()
        );
        assert_eq!(st, OffloadStats::default());
    }

    #[test]
    fn ipv6_udp_zero_checksum_is_invalid_and_never_sent() {
        let mut u = vec![0u8; 8 + 5];
        u[0..2].copy_from_slice(&53u16.to_be_bytes());
        u[2..4].copy_from_slice(&5353u16.to_be_bytes());
        u[4..6].copy_from_slice(&13u16.to_be_bytes());
        u[8..].copy_from_slice(b"hello");
        let zero = ip6_frame(IpProtocol::Udp, &u);
        // RFC 8200 §8.1: IPv6 receivers must discard a zero UDP checksum.
        assert!(!verify_checksums(&zero));
        let mut f = zero.clone();
        assert!(fill_checksums(&mut f));
        assert!(v6_sum_ok(&f, 17));
        assert_ne!(u16::from_be_bytes([f[60], f[61]]), 0);
        assert!(verify_checksums(&f));
        // The same datagram over IPv4 with a zero checksum is fine (RFC 768).
    }

    #[test]
    fn ipv6_icmp_checksum_covers_the_pseudo_header() {
        // An echo request: type 128, code 0, checksum, id, seq, data.
        let mut m = vec![128u8, 0, 0, 0, 0, 7, 0, 1];
        m.extend_from_slice(b"ping");
        let mut f = ip6_frame(IpProtocol::Icmpv6, &m);
        let mut st = OffloadStats::default();
        // ICMPv6 has no partial offload: computed here, sent with an empty header.
        assert_eq!(prepare_tx(&mut f, 1500, true, &mut st), VnetHdr::default());
        assert_eq!(st.tx_csum_software, 1);
        assert!(v6_sum_ok(&f, 58));
        assert!(verify_checksums(&f));
    }

    #[test]
    fn ipv6_prepare_tx_partial_checksum_and_tso6() {
        let mut st = OffloadStats::default();
        let mut f = tcp6_frame(100, 0x18);
        let h = prepare_tx(&mut f, 1500, true, &mut st);
        assert_eq!(h.flags, F_NEEDS_CSUM);
        // Linux virtio_net_hdr_from_skb: csum_start is the TCP header (14 + 40), the
        // offset its checksum field.
        assert_eq!((h.csum_start, h.csum_offset), (54, 16));
        assert_eq!(h.gso_type, GSO_NONE);
        assert_eq!(st.tx_csum_partial, 1);
        // The field holds the IPv6 pseudo-header sum: completing it (what the kernel does)
        // gives a valid segment.
        assert!(complete_partial(&mut f, 54, 16));
        assert!(v6_sum_ok(&f, 6));

        // A super-segment beyond the MTU with CWR: TSO6 with ECN, pieces of MTU - 40 - 32.
        let mut big = tcp6_frame(4000, 0x80 | 0x10);
        let h = prepare_tx(&mut big, 1500, true, &mut st);
        assert_eq!(h.gso_type, GSO_TCPV6 | GSO_ECN);
        assert_eq!(h.gso_kind(), GSO_TCPV6);
        assert_eq!(h.gso_size, 1500 - 40 - 32);
        assert_eq!(h.hdr_len, 14 + 40 + 32);
        assert_eq!(st.tx_gso_frames, 1);
        // Without TSO: no GSO marking.
        let mut big = tcp6_frame(4000, 0x10);
        assert_eq!(
            prepare_tx(&mut big, 1500, false, &mut st).gso_type,
            GSO_NONE
        );
    }

    #[test]
    fn ipv6_gso_frames_are_received_and_split() {
        let mut st = OffloadStats::default();
        let big = tcp6_frame(3000, 0x80 | 0x10 | 0x08 | 0x01);
        let h = VnetHdr {
            flags: F_DATA_VALID,
            gso_type: GSO_TCPV6,
            hdr_len: 14 + 40 + 32,
            gso_size: 1000,
            ..Default::default()
        };
        assert_eq!(check_rx(&h, &big, &mut st), RxVerdict::DeliverGso);
        assert_eq!(st.rx_gso_frames, 1);
        // UDP segmentation offload (gso_type 5, VIRTIO_NET_HDR_GSO_UDP_L4) is not asked for.
        let udp_l4 = VnetHdr { gso_type: 5, ..h };
        assert_eq!(check_rx(&udp_l4, &big, &mut st), RxVerdict::Drop);

        let mut pool = Pool::new(2048, 8);
        let mut out = Vec::new();
        assert_eq!(gso_split(&big, 1000, &mut pool, &mut out), 3);
        let mut data = Vec::new();
        for (i, seg) in out.iter().enumerate() {
            let s = seg.as_slice();
            let l = ip_layout(s).unwrap();
            assert!(l.v6 && l.end == s.len());
            // The payload length was rewritten per piece; no IP id, no header checksum.
            let plen = u16::from_be_bytes([s[18], s[19]]) as usize;
            assert_eq!(plen, s.len() - 54);
            assert!(
                v6_sum_ok(s, 6),
                "segment {i} checksum over the IPv6 pseudo-header"
            );
            // Traffic class, flow label, hop limit and addresses repeat the super-frame's.
            assert_eq!(&s[14..18], &big[14..18]);
            assert_eq!(&s[20..54], &big[20..54]);
            let seq = u32::from_be_bytes([s[58], s[59], s[60], s[61]]);
            assert_eq!(seq, 0xffff_ff00u32.wrapping_add(1000 * i as u32));
            let fl = s[67];
            assert_eq!(fl & 0x80 != 0, i == 0, "CWR on the first only");
            assert_eq!(fl & 0x09 == 0x09, i == 2, "FIN+PSH on the last only");
            data.extend_from_slice(&s[86..]);
        }
        assert_eq!(data, big[86..]);
    }
}
