//! The one software segmenter (GSO) for TCP over IPv4 and IPv6, after Linux `tcp_gso_segment`
//! in `net/ipv4/tcp_offload.c` (and `tcp6_gso_segment`, `ipv6_gso_segment` for IPv6): a
//! super-segment (one TCP header, up to 64 KiB of payload) is cut into packets of at most
//! `mss` payload bytes.
//!
//! The headers are built once per super-segment as templates ([`TcpTemplate`], [`IpTemplate`])
//! with the per-packet fields zero, and their sums taken once; each packet copies the
//! templates, sets its own fields through the typed setters of the wire views (sequence
//! number, flags, checksum; IPv4 total length, identification, header checksum; IPv6 payload
//! length only: IPv6 has no identification outside a fragment header and no header checksum,
//! RFC 8200 §3) and adds those fields into the template sums (one's-complement addition is
//! associative, RFC 1071 §2 (A)). The TCP checksum's pseudo-header is the family's (RFC 9293
//! §3.1, RFC 8200 §8.1).
//! The payload is summed while it is copied, so no byte is read twice.
//!
//! As in Linux, FIN and PSH stay on the last piece only and CWR on the first only (RFC 3168
//! §6.1.2), so the receiver sees exactly what a sender without GSO would have sent.
//!
//! Two callers: the stack's egress (`iface/tcp.rs`, segments from the TCP engine, payload in
//! up to two slices of a send ring, through [`build`]) and the virtio-net device code
//! (`netfold_os::vnet::gso_split` in the `netfold-os` crate, kernel super-frames it must cut
//! itself), through [`split_frame`].
#![warn(missing_docs)]

use crate::buf::zc::{Frags, Gather};
use crate::buf::{PacketBuf, Pool};
use crate::mem::CopyMode;
use crate::wire::checksum::{add, concat, finish, pseudo_header_ip};
use crate::wire::ethernet::VLAN_HEADER_LEN;
use crate::wire::ipv4::{self, Ipv4Packet};
use crate::wire::ipv6::{self, Ipv6Packet};
use crate::wire::tcp::{self, seq_number_sum, TcpFlags, TcpPacket, MAX_HEADER_LEN};
use crate::wire::{IpAddr, IpProtocol};

/// Longest IPv4 header (IHL 15, RFC 791 §3.1).
const MAX_IPV4_HEADER: usize = ipv4::MAX_HEADER_LEN;
/// Longest IP packet: the IPv4 total length is 16 bits (RFC 791 §3.1).
pub const MAX_IP_PACKET: usize = ipv4::MAX_PACKET_LEN;
/// Room for the longest network header a template holds: IPv4 with options (60) or the IPv6
/// fixed header (40).
const MAX_L3_HEADER: usize = if MAX_IPV4_HEADER > ipv6::HEADER_LEN {
    MAX_IPV4_HEADER
} else {
    ipv6::HEADER_LEN
};

/// The link and IP headers every packet of one super-segment repeats: for IPv4 with total
/// length, identification and header checksum zero, and the IPv4 header's sum; for IPv6 (a
/// fixed header without extension headers) with the payload length zero.
#[derive(Debug, Clone)]
pub struct IpTemplate {
    bytes: [u8; VLAN_HEADER_LEN + MAX_L3_HEADER],
    len: usize,
    l3: usize,
    sum: u16,
    v6: bool,
}

impl IpTemplate {
    /// From `headers` = a link header of `l3` bytes (0 on an IP medium) followed by an IPv4
    /// header (options included) or an IPv6 fixed header (no extension headers), told apart
    /// by the version field. `None` if they do not fit a template.
    pub fn new(headers: &[u8], l3: usize) -> Option<IpTemplate> {
        let ip = headers.get(l3..)?;
        if crate::wire::ip_version(ip) == Some(6) {
            IpTemplate::ipv6(headers, l3)
        } else {
            IpTemplate::ipv4(headers, l3)
        }
    }

    /// [`IpTemplate::new`] for an IPv4 header (the stack's per-segment path: inlined).
    #[inline(always)]
    pub fn ipv4(headers: &[u8], l3: usize) -> Option<IpTemplate> {
        let mut bytes = [0u8; VLAN_HEADER_LEN + MAX_L3_HEADER];
        let ip_len = headers.len().checked_sub(l3)?;
        if l3 > VLAN_HEADER_LEN || !(ipv4::HEADER_LEN..=MAX_IPV4_HEADER).contains(&ip_len) {
            return None;
        }
        bytes[..headers.len()].copy_from_slice(headers);
        let mut ip = Ipv4Packet::new_unchecked(&mut bytes[l3..headers.len()]);
        ip.set_total_len(0);
        ip.set_ident(0);
        ip.set_header_checksum(0);
        let sum = crate::mem::checksum(&bytes[l3..headers.len()]);
        Some(IpTemplate {
            bytes,
            len: headers.len(),
            l3,
            sum,
            v6: false,
        })
    }

    /// [`IpTemplate::new`] for an IPv6 fixed header (40 bytes, no extension headers). Inlined
    /// into its one per-segment caller, the (out-of-line) IPv6 emit path.
    #[inline]
    pub fn ipv6(headers: &[u8], l3: usize) -> Option<IpTemplate> {
        let mut bytes = [0u8; VLAN_HEADER_LEN + MAX_L3_HEADER];
        let ip_len = headers.len().checked_sub(l3)?;
        if l3 > VLAN_HEADER_LEN || ip_len != ipv6::HEADER_LEN {
            return None;
        }
        bytes[..headers.len()].copy_from_slice(headers);
        Ipv6Packet::new_unchecked(&mut bytes[l3..headers.len()]).set_payload_len(0);
        Some(IpTemplate {
            bytes,
            len: headers.len(),
            l3,
            sum: 0,
            v6: true,
        })
    }

    /// Bytes of link + IPv4 header.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the IP header alone.
    pub fn ip_header_len(&self) -> usize {
        self.len - self.l3
    }

    /// The template is an IPv6 header.
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// Always false: a template holds at least an IP header.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The TCP header every packet of one super-segment repeats, checksum zero, and its sum with
/// the sequence number and flags zero.
#[derive(Debug, Clone)]
pub struct TcpTemplate {
    bytes: [u8; MAX_HEADER_LEN],
    len: usize,
    sum: u16,
}

impl TcpTemplate {
    /// From a complete TCP header (20..=60 bytes, options included). `None` if it is not one.
    pub fn new(header: &[u8]) -> Option<TcpTemplate> {
        if !(tcp::HEADER_LEN..=MAX_HEADER_LEN).contains(&header.len()) {
            return None;
        }
        let mut bytes = [0u8; MAX_HEADER_LEN];
        let len = header.len();
        bytes[..len].copy_from_slice(header);
        TcpPacket::new_unchecked(&mut bytes[..len]).set_checksum(0);
        let mut zeroed = bytes;
        let mut z = TcpPacket::new_unchecked(&mut zeroed[..len]);
        z.set_seq_number(0);
        z.set_flags(TcpFlags(0));
        let sum = crate::mem::checksum(&zeroed[..len]);
        Some(TcpTemplate { bytes, len, sum })
    }

    /// Header bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a TCP header is at least 20 bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One super-segment: addresses for the pseudo-header, the first sequence number, the flags of
/// the whole, and its payload: up to two slices (a send ring may wrap) or a window over a send
/// queue holding application buffers (zero-copy send, `tcp/zerocopy.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Super<'a> {
    /// IP source (pseudo-header), IPv4 or IPv6.
    pub src: IpAddr,
    /// IP destination (pseudo-header), of the source's family.
    pub dst: IpAddr,
    /// Sequence number of the first payload byte.
    pub seq: u32,
    /// Flags of the super-segment.
    pub flags: TcpFlags,
    /// The payload.
    pub payload: Gather<'a>,
}

impl Super<'_> {
    /// Payload bytes in all.
    pub fn len(&self) -> usize {
        self.payload.len()
    }
    /// No payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One packet of a super-segment: its sequence number, flags and payload range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Sequence number of its first payload byte.
    pub seq: u32,
    /// Its flags (FIN/PSH on the last piece only, CWR on the first only).
    pub flags: TcpFlags,
    /// Offset of its payload in the super-segment's.
    pub off: usize,
    /// Payload bytes.
    pub len: usize,
}

/// The pieces a super-segment of `total` payload bytes is cut into, `mss` bytes each (the last
/// shorter); an empty payload is one header-only piece. `mss` 0 is taken as "do not cut".
pub fn pieces(seq: u32, flags: TcpFlags, total: usize, mss: usize) -> Pieces {
    Pieces {
        seq,
        flags,
        total,
        mss: if mss == 0 { total.max(1) } else { mss },
        off: 0,
        done: false,
    }
}

/// How many pieces [`pieces`] yields.
pub fn piece_count(total: usize, mss: usize) -> usize {
    if mss == 0 {
        1
    } else {
        total.div_ceil(mss).max(1)
    }
}

/// Iterator of [`pieces`].
#[derive(Debug, Clone)]
pub struct Pieces {
    seq: u32,
    flags: TcpFlags,
    total: usize,
    mss: usize,
    off: usize,
    done: bool,
}

impl Iterator for Pieces {
    type Item = Piece;
    fn next(&mut self) -> Option<Piece> {
        if self.done {
            return None;
        }
        let len = self.mss.min(self.total - self.off);
        let last = self.off + len >= self.total;
        let mut f = self.flags.0;
        if !last {
            f &= !(TcpFlags::FIN | TcpFlags::PSH);
        }
        if self.off > 0 {
            f &= !TcpFlags::CWR;
        }
        let p = Piece {
            seq: self.seq.wrapping_add(self.off as u32),
            flags: TcpFlags(f),
            off: self.off,
            len,
        };
        self.off += len;
        self.done = last;
        Some(p)
    }
}

/// Appends one packet to `buf`: the link + IP headers of `ip` (with `ident`, IPv4 only), if
/// given, then the TCP header of `tcp` with the piece's sequence number and flags, then the
/// piece's payload, copied with `mode` and summed in the same pass. With `csum` the TCP
/// checksum (and the IPv4 header checksum) are filled, else left 0 for a device that computes
/// them. Without `ip` the caller prepends the IP header itself (the general send path).
pub fn build(
    buf: &mut PacketBuf,
    ip: Option<(&IpTemplate, u16)>,
    tcp: &TcpTemplate,
    sup: &Super<'_>,
    p: &Piece,
    mode: CopyMode,
    csum: bool,
) {
    let iplen = ip.map_or(0, |(t, _)| t.len);
    let hlen = tcp.len;
    let area = buf.append(iplen + hlen + p.len);
    let (hdrs, payload) = area.split_at_mut(iplen + hlen);
    // The checksum folded into the copy: the payload is summed while it is copied, and the
    // header's checksum is completed from that sum without reading the payload again.
    let payload_sum = copy_range_with_checksum(payload, sup.payload, p.off, p.len, mode);
    write_headers(hdrs, ip, tcp, sup, p, csum.then_some(payload_sum));
}

/// Most fragments [`build_sg`] attaches to one frame (Linux's `MAX_SKB_FRAGS` is 17 by
/// default; a TAP takes the frame as one `writev`, whose vector is bounded by `IOV_MAX`).
pub const MAX_FRAGS: usize = 64;

/// Where [`build_sg`] records a frame's payload: the transmit batch's fragments, the index
/// the frame will have in the batch, and the most fragments it may take.
#[derive(Debug)]
pub struct SgFrame<'a> {
    /// The fragments of the batch's frames.
    pub frags: &'a mut Frags,
    /// The index the frame will have in the batch.
    pub frame: usize,
    /// The most fragments the frame may take ([`MAX_FRAGS`] or fewer).
    pub max_frags: usize,
}

/// [`build`] for a scatter-gather device that completes checksums itself (zero-copy send):
/// the link, IPv4 and TCP headers go into `buf` (checksums left to the device, as `build`
/// with `csum == false`), and the piece's payload is recorded in `sg.frags` as fragments of
/// frame `sg.frame` (the index `buf` will have in the transmit batch): references to the
/// application buffers that hold it, no payload byte read or written. Returns `false`,
/// leaving `buf` and the fragments as they were, when some of the payload cannot be shared
/// (bytes copied into a send ring) or it would take more than `sg.max_frags` fragments; the
/// caller then uses `build`.
// Kept out of line: the copying path's `emit_piece` only tests for it, and inlining it there
// measurably slowed that path (code size in the per-packet loop).
#[inline(never)]
pub fn build_sg(
    buf: &mut PacketBuf,
    sg: SgFrame<'_>,
    ip: (&IpTemplate, u16),
    tcp: &TcpTemplate,
    sup: &Super<'_>,
    p: &Piece,
) -> bool {
    let SgFrame {
        frags,
        frame,
        max_frags,
    } = sg;
    if p.len == 0 || frags.of(frame).next().is_some() {
        return false;
    }
    let mut ok = true;
    let mut n = 0;
    let mut bytes = 0;
    sup.payload
        .for_each_span(p.off, p.len, &mut |s, owner| match owner {
            Some((b, at)) if ok && n < max_frags => {
                frags.push(frame, b.share(at, s.len()));
                n += 1;
                bytes += s.len();
            }
            _ => ok = false,
        });
    if !ok || bytes != p.len {
        frags.forget(frame);
        return false;
    }
    let hdrs = buf.append(ip.0.len + tcp.len);
    write_headers(hdrs, Some(ip), tcp, sup, p, None);
    true
}

/// The headers of one piece into `hdrs` (link + IPv4 of `ip` if given, then TCP): the piece's
/// sequence number, flags, lengths and identification; with `payload_sum` the TCP and IPv4
/// header checksums, else both left for the device.
fn write_headers(
    hdrs: &mut [u8],
    ip: Option<(&IpTemplate, u16)>,
    tcp: &TcpTemplate,
    sup: &Super<'_>,
    p: &Piece,
    payload_sum: Option<u16>,
) {
    let iplen = ip.map_or(0, |(t, _)| t.len);
    let hlen = tcp.len;
    let csum = payload_sum.is_some();
    let (iph, th) = hdrs.split_at_mut(iplen);
    th.copy_from_slice(&tcp.bytes[..hlen]);
    let mut t = TcpPacket::new_unchecked(th);
    t.set_seq_number(p.seq);
    t.set_flags(p.flags);
    if csum {
        // RFC 9293 §3.1: the sum covers the pseudo-header, the header and the data; the header
        // is a multiple of 4 bytes, so the payload's sum adds in directly.
        let ph = pseudo_header_ip(sup.src, sup.dst, IpProtocol::Tcp, (hlen + p.len) as u32);
        // The template was summed with sequence number and flags zero; what the piece's
        // values add to that sum comes from wire::tcp, which knows where they lie.
        let mut sum = add(ph, tcp.sum);
        sum = add(sum, seq_number_sum(p.seq));
        sum = add(sum, p.flags.checksum_word());
        sum = add(sum, payload_sum.unwrap_or(0));
        t.set_checksum(finish(sum));
    }
    if let Some((tmpl, ident)) = ip {
        iph.copy_from_slice(&tmpl.bytes[..tmpl.len]);
        if tmpl.v6 {
            // RFC 8200 §3: the payload length counts what follows the fixed header; there
            // is no identification (outside a fragment header) and no header checksum.
            let len = (hlen + p.len).min(ipv6::MAX_PAYLOAD_LEN) as u16;
            Ipv6Packet::new_unchecked(&mut iph[tmpl.l3..]).set_payload_len(len);
        } else {
            // Callers cut pieces so that a packet fits the 16-bit total length (RFC 791 §3.1).
            let total = (tmpl.ip_header_len() + hlen + p.len).min(MAX_IP_PACKET) as u16;
            let mut v = Ipv4Packet::new_unchecked(&mut iph[tmpl.l3..]);
            v.set_total_len(total);
            v.set_ident(ident);
            if csum {
                v.set_header_checksum(finish(add(add(tmpl.sum, total), ident)));
            }
        }
    }
}

/// Cuts a received TCP super-frame (`frame`: a link header of `l3` bytes, then an IPv4 packet
/// or an IPv6 packet without extension headers) into frames of at most `mss` payload bytes,
/// appended to `out` with buffers from `pool`, checksums complete. Each piece gets its own IP
/// length (IPv4 total length, IPv6 payload length), sequence number and checksums, and for
/// IPv4 its own identification (the super-frame's, incremented per piece, as Linux does for
/// DF packets; IPv6 has none to set). Returns the number of pieces; 0 (appending nothing) if
/// the frame is not a well-formed, unfragmented TCP/IPv4 or extension-free TCP/IPv6 frame,
/// or `mss` is 0.
pub fn split_frame(
    frame: &[u8],
    l3: usize,
    mss: usize,
    pool: &mut Pool,
    out: &mut Vec<PacketBuf>,
) -> usize {
    let Some(ip_bytes) = frame.get(l3..) else {
        return 0;
    };
    if mss == 0 {
        return 0;
    }
    // The network header: its length, the addresses, the TCP bytes and the first ident.
    let (ihl, src, dst, seg, id0): (usize, IpAddr, IpAddr, &[u8], u16) =
        if crate::wire::ip_version(ip_bytes) == Some(6) {
            let Ok(ip) = Ipv6Packet::new_checked(ip_bytes) else {
                return 0;
            };
            // Extension headers (a fragment header above all) are not cut here (Linux
            // `ipv6_gso_segment` walks them; nothing netfold talks to sends them with TSO).
            if ip.version() != 6 || ip.next_header() != IpProtocol::Tcp {
                return 0;
            }
            let (s, d) = (ip.src_addr().into(), ip.dst_addr().into());
            let payload = &ip_bytes[ipv6::HEADER_LEN..ipv6::HEADER_LEN + ip.payload().len()];
            (ipv6::HEADER_LEN, s, d, payload, 0)
        } else {
            let Ok(ip) = Ipv4Packet::new_checked(ip_bytes) else {
                return 0;
            };
            if ip.protocol() != IpProtocol::Tcp || ip.is_fragment() {
                return 0;
            }
            let (s, d) = (ip.src_addr().into(), ip.dst_addr().into());
            let hl = ip.header_len();
            let total = usize::from(ip.total_len()).min(ip_bytes.len());
            let Some(payload) = ip_bytes.get(hl..total) else {
                return 0;
            };
            (hl, s, d, payload, ip.ident())
        };
    let Ok(tcp) = TcpPacket::new_checked(seg) else {
        return 0;
    };
    let thl = tcp.header_len();
    let (Some(ipt), Some(tt)) = (
        IpTemplate::new(&frame[..l3 + ihl], l3),
        TcpTemplate::new(&seg[..thl]),
    ) else {
        return 0;
    };
    let sup = Super {
        src,
        dst,
        seq: tcp.seq_number(),
        flags: tcp.flags(),
        payload: Gather::slices(tcp.payload(), &[]),
    };
    let mut n = 0usize;
    for p in pieces(sup.seq, sup.flags, sup.len(), mss) {
        let mut b = pool.get();
        let ident = id0.wrapping_add(n as u16);
        build(
            &mut b,
            Some((&ipt, ident)),
            &tt,
            &sup,
            &p,
            CopyMode::Kernels,
            true,
        );
        out.push(b);
        n += 1;
    }
    n
}

/// Copies bytes `off..off + len` of `parts` into `dst` and returns their one's-complement
/// sum. A piece that starts at an odd offset within `dst` has its sum byte-swapped (RFC 1071
/// §2 (B), byte-order independence), so the pieces combine.
pub fn copy_range_with_checksum(
    dst: &mut [u8],
    parts: Gather<'_>,
    off: usize,
    len: usize,
    mode: CopyMode,
) -> u16 {
    let Some((a, b)) = parts.as_slices() else {
        if let Some(s) = parts.contiguous(off, len) {
            // Inside one buffer: one fused pass, no span walk.
            let n = s.len().min(dst.len());
            return mode.copy_with_checksum(&mut dst[..n], &s[..n]);
        }
        // A send queue with application buffers: as many pieces as chunks, each copied and
        // summed in one pass, the sums combined at their offsets.
        let mut sum = 0u16;
        let mut at = 0;
        parts.for_each_span(off, len, &mut |s, _| {
            let n = s.len().min(dst.len() - at);
            let part = mode.copy_with_checksum(&mut dst[at..at + n], &s[..n]);
            sum = concat(sum, part, at);
            at += n;
        });
        // Only a region that broke its contract (shrank) leaves bytes unfilled: zeros, which
        // the sum already counts correctly.
        dst[at..].fill(0);
        return sum;
    };
    let a_part = a
        .get(off.min(a.len())..(off + len).min(a.len()))
        .unwrap_or(&[]);
    let b_off = off.saturating_sub(a.len());
    let b_len = len - a_part.len();
    let b_part = b
        .get(b_off.min(b.len())..(b_off + b_len).min(b.len()))
        .unwrap_or(&[]);
    let n1 = a_part.len();
    let s1 = mode.copy_with_checksum(&mut dst[..n1], a_part);
    if b_part.is_empty() {
        // The usual case: the range does not cross the ring's wrap.
        return s1;
    }
    let s2 = mode.copy_with_checksum(&mut dst[n1..n1 + b_part.len()], b_part);
    concat(s1, s2, n1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_copy_checksum_matches_flat_checksum() {
        let data: Vec<u8> = (0..101u8).map(|i| i.wrapping_mul(37)).collect();
        for cut in [0, 1, 2, 33, 50, 100, 101] {
            let (a, b) = data.split_at(cut);
            for (off, len) in [(0, 101), (1, 60), (7, 33), (40, 61)] {
                let mut dst = vec![0u8; len];
                let s = copy_range_with_checksum(
                    &mut dst,
                    Gather::slices(a, b),
                    off,
                    len,
                    CopyMode::Kernels,
                );
                assert_eq!(&dst[..], &data[off..off + len]);
                let flat = crate::mem::checksum(&data[off..off + len]);
                // 0x0000 and 0xffff are the same value in one's complement.
                assert!(s == flat || (s == 0xffff && flat == 0) || (s == 0 && flat == 0xffff));
            }
        }
    }

    #[test]
    fn pieces_move_fin_psh_to_the_last_and_cwr_to_the_first() {
        let all = TcpFlags(TcpFlags::ACK | TcpFlags::PSH | TcpFlags::FIN | TcpFlags::CWR);
        let ps: Vec<Piece> = pieces(u32::MAX - 1, all, 2500, 1000).collect();
        assert_eq!(ps.len(), piece_count(2500, 1000));
        assert_eq!(ps.len(), 3);
        assert_eq!(ps[1].seq, 998);
        assert!(ps[0].flags.cwr() && !ps[0].flags.fin() && !ps[0].flags.psh());
        assert!(!ps[2].flags.cwr() && ps[2].flags.fin() && ps[2].flags.psh());
        assert_eq!(ps[2].len, 500);
        let empty: Vec<Piece> = pieces(7, all, 0, 1000).collect();
        assert_eq!(empty.len(), 1);
        assert_eq!(empty[0].flags, all);
    }

    /// An Ethernet + IPv6 (from `Ipv6Repr::emit`) + TCP super-frame with complete checksums.
    fn v6_super_frame(payload: &[u8], flags: TcpFlags) -> Vec<u8> {
        use crate::wire::ipv6::Ipv6Repr;
        use crate::wire::tcp::{PseudoHeader, TcpRepr};
        let (src, dst): (crate::wire::Ipv6Addr, crate::wire::Ipv6Addr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        let repr = TcpRepr {
            src_port: 443,
            dst_port: 50000,
            seq: u32::MAX - 100,
            ack: 9,
            flags,
            window: 700,
            ..TcpRepr::default()
        };
        let mut tcp = vec![0u8; repr.header_len() + payload.len()];
        repr.emit_with_checksum(&mut tcp, payload, &PseudoHeader::new(src, dst))
            .unwrap();
        let ip = Ipv6Repr {
            src,
            dst,
            next_header: IpProtocol::Tcp,
            payload_len: tcp.len(),
            hop_limit: 63,
            traffic_class: 0x28,
            flow_label: 0x54321,
        };
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let mut h = [0u8; 40];
        ip.emit(&mut h).unwrap();
        f.extend_from_slice(&h);
        f.extend_from_slice(&tcp);
        f
    }

    #[test]
    fn split_frame_cuts_an_ipv6_super_segment() {
        use crate::wire::ipv6::Ipv6Repr;
        use crate::wire::tcp::{PseudoHeader, TcpRepr};
        let data: Vec<u8> = (0..2900u32).map(|i| (i * 13) as u8).collect();
        let all = TcpFlags(TcpFlags::ACK | TcpFlags::PSH | TcpFlags::FIN | TcpFlags::CWR);
        let f = v6_super_frame(&data, all);
        let mut pool = Pool::new(2048, 4);
        let mut out = Vec::new();
        assert_eq!(split_frame(&f, 14, 1000, &mut pool, &mut out), 3);
        let mut joined = Vec::new();
        for (i, b) in out.iter().enumerate() {
            let ip6 = Ipv6Packet::new_checked(&b.as_slice()[14..]).unwrap();
            let r = Ipv6Repr::parse(&ip6).unwrap();
            // Payload length per piece; hop limit, traffic class and flow label kept.
            assert_eq!(r.payload_len, b.len() - 14 - 40);
            assert_eq!(
                (r.hop_limit, r.traffic_class, r.flow_label),
                (63, 0x28, 0x54321)
            );
            let t = TcpPacket::new_checked(ip6.payload()).unwrap();
            let ph = PseudoHeader::new(r.src, r.dst);
            assert!(
                t.verify_checksum(&ph),
                "piece {i}: IPv6 pseudo-header checksum"
            );
            let tr = TcpRepr::parse(&t, &ph, true).unwrap();
            assert_eq!(tr.seq, (u32::MAX - 100).wrapping_add(joined.len() as u32));
            assert_eq!(tr.flags.cwr(), i == 0);
            assert_eq!(tr.flags.fin() && tr.flags.psh(), i == 2);
            joined.extend_from_slice(t.payload());
        }
        assert_eq!(joined, data);
        // An extension header (hop-by-hop) in front of TCP: not cut here.
        let mut ext = f.clone();
        ext[14 + 6] = 0;
        assert_eq!(split_frame(&ext, 14, 1000, &mut pool, &mut out), 0);
    }

    #[test]
    fn ipv6_template_rewrites_only_the_payload_length() {
        let f = v6_super_frame(&[1, 2, 3], TcpFlags(TcpFlags::ACK));
        let t = IpTemplate::new(&f[..54], 14).unwrap();
        assert!(t.is_ipv6() && t.ip_header_len() == 40 && t.len() == 54);
        assert!(
            IpTemplate::ipv6(&f[..50], 14).is_none(),
            "a short IPv6 header"
        );
        // `new` goes by the version field: 20 bytes of an IPv6 header are no template (an
        // IPv4 header's length would have passed).
        assert!(IpTemplate::new(&f[..34], 14).is_none());
    }
}
