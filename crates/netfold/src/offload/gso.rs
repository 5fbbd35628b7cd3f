//! The one software segmenter (GSO) for TCP over IPv4, after Linux `tcp_gso_segment` in
//! `net/ipv4/tcp_offload.c`: a super-segment (one TCP header, up to 64 KiB of payload) is cut
//! into packets of at most `mss` payload bytes.
//!
//! The headers are built once per super-segment as templates ([`TcpTemplate`], [`IpTemplate`])
//! with the per-packet fields zero, and their sums taken once; each packet copies the
//! templates, sets its own fields through the typed setters of the wire views (sequence
//! number, flags, checksum; IPv4 total length, identification, header checksum) and adds those
//! fields into the template sums (one's-complement addition is associative, RFC 1071 §2 (A)).
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
use crate::wire::checksum::{add, concat, finish, pseudo_header};
use crate::wire::ethernet::VLAN_HEADER_LEN;
use crate::wire::ipv4::{self, Ipv4Packet};
use crate::wire::tcp::{self, seq_number_sum, TcpFlags, TcpPacket, MAX_HEADER_LEN};
use crate::wire::{IpProtocol, Ipv4Addr};

/// Longest IPv4 header (IHL 15, RFC 791 §3.1).
const MAX_IPV4_HEADER: usize = ipv4::MAX_HEADER_LEN;
/// Longest IP packet: the IPv4 total length is 16 bits (RFC 791 §3.1).
pub const MAX_IP_PACKET: usize = ipv4::MAX_PACKET_LEN;

/// The link and IPv4 headers every packet of one super-segment repeats, with total length,
/// identification and header checksum zero, and the IPv4 header's sum.
#[derive(Debug, Clone)]
pub struct IpTemplate {
    bytes: [u8; VLAN_HEADER_LEN + MAX_IPV4_HEADER],
    len: usize,
    l3: usize,
    sum: u16,
}

impl IpTemplate {
    /// From `headers` = a link header of `l3` bytes (0 on an IP medium) followed by an IPv4
    /// header (options included). `None` if they do not fit a template.
    pub fn new(headers: &[u8], l3: usize) -> Option<IpTemplate> {
        let mut bytes = [0u8; VLAN_HEADER_LEN + MAX_IPV4_HEADER];
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
        })
    }

    /// Bytes of link + IPv4 header.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the IPv4 header alone.
    pub fn ip_header_len(&self) -> usize {
        self.len - self.l3
    }

    /// Always false: a template holds at least an IPv4 header.
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
    /// IPv4 source (pseudo-header).
    pub src: Ipv4Addr,
    /// IPv4 destination (pseudo-header).
    pub dst: Ipv4Addr,
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

/// Appends one packet to `buf`: the link + IPv4 headers of `ip` (with `ident`), if given, then
/// the TCP header of `tcp` with the piece's sequence number and flags, then the piece's payload,
/// copied with `mode` and summed in the same pass. With `csum` the TCP checksum (and the IPv4
/// header checksum) are filled, else left 0 for a device that computes them. Without `ip` the
/// caller prepends the IPv4 header itself (the general send path).
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

/// [`build`] for a scatter-gather device that completes checksums itself (zero-copy send):
/// the link, IPv4 and TCP headers go into `buf` (checksums left to the device, as `build`
/// with `csum == false`), and the piece's payload is recorded in `frags` as fragments of frame
/// `frame` (the index `buf` will have in the transmit batch): references to the application
/// buffers that hold it, no payload byte read or written. Returns `false`, leaving `buf` and
/// `frags` as they were, when some of the payload cannot be shared (bytes copied into a send
/// ring) or it would take more than `max_frags` fragments; the caller then uses `build`.
// Kept out of line: the copying path's `emit_piece` only tests for it, and inlining it there
// measurably slowed that path (code size in the per-packet loop).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn build_sg(
    buf: &mut PacketBuf,
    frags: &mut Frags,
    frame: usize,
    ip: (&IpTemplate, u16),
    tcp: &TcpTemplate,
    sup: &Super<'_>,
    p: &Piece,
    max_frags: usize,
) -> bool {
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
        let ph = pseudo_header(sup.src, sup.dst, IpProtocol::Tcp, (hlen + p.len) as u32);
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

/// Cuts a received TCP/IPv4 super-frame (`frame`: a link header of `l3` bytes, then the IPv4
/// packet) into frames of at most `mss` payload bytes, appended to `out` with buffers from
/// `pool`, checksums complete. Each piece gets its own IPv4 total length, identification (the
/// super-frame's, incremented per piece, as Linux does for DF packets), sequence number and
/// checksums. Returns the number of pieces; 0 (appending nothing) if the frame is not a
/// well-formed, unfragmented TCP/IPv4 frame or `mss` is 0.
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
    let Ok(ip) = Ipv4Packet::new_checked(ip_bytes) else {
        return 0;
    };
    if ip.protocol() != IpProtocol::Tcp || ip.is_fragment() || mss == 0 {
        return 0;
    }
    let Ok(tcp) = TcpPacket::new_checked(ip.payload()) else {
        return 0;
    };
    let (ihl, thl) = (ip.header_len(), tcp.header_len());
    let (Some(ipt), Some(tt)) = (
        IpTemplate::new(&frame[..l3 + ihl], l3),
        TcpTemplate::new(&ip.payload()[..thl]),
    ) else {
        return 0;
    };
    let sup = Super {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        seq: tcp.seq_number(),
        flags: tcp.flags(),
        payload: Gather::slices(tcp.payload(), &[]),
    };
    let id0 = ip.ident();
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
}
