//! Generic receive offload (GRO) for TCP over IPv4: within one receive batch, consecutive
//! segments of one flow are merged into one larger segment so that TCP runs its input path once
//! per flow per batch instead of once per frame (seed 000 §4.2 "gather-receive"; Linux
//! `tcp_gro_receive` in `net/ipv4/tcp_offload.c`).
//!
//! Only merges that a GSO sender could split back into the same segments are done (the Linux
//! rules): same 4-tuple; contiguous sequence numbers (seq == previous seq + previous length);
//! same ACK number and window; byte-identical TCP options (timestamps included); IPv4 without
//! options or fragmentation, with the same TTL, TOS and DF; flags ACK only (PSH allowed, and it
//! ends the train after being merged); no segment longer than the first, and a shorter one ends
//! the train. Limits: the merged IP packet stays within 64 KiB (bytes) and [`MAX_SEGS`]
//! segments (count) — seed 002 shows why a count alone is wrong: with small segments a count
//! limit lets a "merged" segment stay tiny, with jumbo ones it overflows the 16-bit length.
//!
//! Checksums are verified before a segment joins a train: the payload is summed while it is
//! copied into the train's pooled 64 KiB buffer (`mem::copy_with_checksum`, the checksum folded
//! into the copy), and a segment whose sum is wrong is cut back out of the buffer, dropped and
//! counted — never delivered. A train of one segment is not copied at all: it stays in its
//! frame and is verified with a plain sum when it is delivered.

use super::counters::{bucket, Counters};
use crate::buf::{PacketBuf, Pool};
use crate::tcp::TcpLayer;
use crate::time::Instant;
use crate::wire::ipv4::{checksum_combine, pseudo_header_sum};
use crate::wire::tcp::{TcpFlags, TcpRepr, MAX_OPTIONS_LEN};
use crate::wire::{IpProtocol, Ipv4Addr};

/// Most segments merged into one (Linux caps a GRO packet at `MAX_SKB_FRAGS + 1` = 18 frags
/// of pages, or 64 KiB; 44 MSS-sized segments of 1448 bytes fill 64 KiB).
pub const MAX_SEGS: u16 = 44;
/// Flows held at once in one batch (Linux: `MAX_GRO_SKBS` = 8 per NAPI bucket list).
pub const MAX_FLOWS: usize = 8;
/// Largest merged TCP segment payload: the IPv4 total length is 16 bits (RFC 791 §3.1).
const MAX_IP_PACKET: usize = 65535;
const IPV4_HEADER: usize = 20;

/// Why a held train was handed to TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flush {
    BatchEnd,
    Mismatch,
    Psh,
    Short,
    Bytes,
    Count,
    Evict,
    Control,
}

/// The IP fields that must match for two segments to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IpKey {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    pub tos: u8,
    pub df: bool,
}

/// One segment as parsed by ingress (checksum not yet verified).
#[derive(Debug)]
pub(crate) struct Seg<'a> {
    pub ip: IpKey,
    pub repr: TcpRepr,
    /// Header and payload.
    pub bytes: &'a [u8],
    pub hdr_len: usize,
    /// Index of the frame in the stack's receive batch and the segment's offset in it.
    pub frame: usize,
    pub off: usize,
}

impl Seg<'_> {
    fn payload(&self) -> &[u8] {
        self.bytes.get(self.hdr_len..).unwrap_or(&[])
    }
    fn options(&self) -> &[u8] {
        self.bytes.get(20..self.hdr_len).unwrap_or(&[])
    }
}

#[derive(Debug)]
enum Body {
    /// A train of one: the segment is still in frame `frame` at `off..off + len`, unverified.
    Frame {
        frame: usize,
        off: usize,
        len: usize,
    },
    /// Merged payloads, each verified while it was copied in.
    Merged(PacketBuf),
}

#[derive(Debug)]
struct Held {
    ip: IpKey,
    repr: TcpRepr,
    opts: [u8; MAX_OPTIONS_LEN],
    opt_len: usize,
    hdr_len: usize,
    next_seq: u32,
    /// Payload length of the first segment: the sender's segment size.
    seg_size: usize,
    segs: u16,
    len: usize,
    body: Body,
}

impl Held {
    fn same_flow(&self, s: &Seg<'_>) -> bool {
        self.ip.src == s.ip.src
            && self.ip.dst == s.ip.dst
            && self.repr.src_port == s.repr.src_port
            && self.repr.dst_port == s.repr.dst_port
    }
    fn max_len(&self) -> usize {
        MAX_IP_PACKET - IPV4_HEADER - self.hdr_len
    }
}

/// Per-stack GRO state: the trains held in the current batch and their buffers.
#[derive(Debug)]
pub(crate) struct Gro {
    held: Vec<Held>,
    pool: Pool,
}

/// What flushing needs from the stack (split borrows).
pub(crate) struct Sink<'s> {
    pub now: Instant,
    pub frames: &'s [PacketBuf],
    pub tcp: &'s mut TcpLayer,
    pub c: &'s mut Counters,
    pub verify: bool,
}

/// Sum of the pseudo-header and TCP header of a segment of `seg_len` bytes.
fn header_sum(ip: &IpKey, header: &[u8], seg_len: usize) -> u16 {
    let ph = pseudo_header_sum(ip.src, ip.dst, IpProtocol::Tcp, seg_len as u32);
    checksum_combine(ph, crate::mem::checksum(header))
}

/// A segment flags word GRO can merge: ACK, optionally PSH, nothing else (no SYN, FIN, RST,
/// URG, ECE, CWR: Linux `tcp_gro_receive` flushes on all of those).
pub(crate) fn mergeable_flags(f: TcpFlags) -> bool {
    f.ack() && f.0 & !(TcpFlags::ACK | TcpFlags::PSH) == 0
}

impl Gro {
    pub fn new() -> Gro {
        Gro {
            held: Vec::with_capacity(MAX_FLOWS),
            // A handful of 64 KiB buffers: at most MAX_FLOWS trains are merged at once.
            pool: Pool::new(MAX_IP_PACKET, MAX_FLOWS),
        }
    }

    /// Hands the held train of the flow `s` belongs to (if any) to TCP, so that a segment GRO
    /// does not merge is delivered after the data before it.
    pub fn flush_flow(&mut self, sink: &mut Sink<'_>, s: &Seg<'_>) {
        if let Some(i) = self.held.iter().position(|h| h.same_flow(s)) {
            let h = self.held.remove(i);
            self.deliver(sink, h, Flush::Control);
        }
    }

    /// Flushes everything held (end of the receive batch).
    pub fn flush_all(&mut self, sink: &mut Sink<'_>) {
        while let Some(h) = (!self.held.is_empty()).then(|| self.held.remove(0)) {
            self.deliver(sink, h, Flush::BatchEnd);
        }
    }

    /// Takes one mergeable data segment (ACK/PSH only, payload non-empty, plain IPv4).
    pub fn receive(&mut self, sink: &mut Sink<'_>, s: &Seg<'_>) {
        let plen = s.payload().len();
        if let Some(i) = self.held.iter().position(|h| h.same_flow(s)) {
            match self.check(&self.held[i], s) {
                None => {
                    self.merge(sink, i, s);
                    return;
                }
                Some(why) => {
                    let h = self.held.remove(i);
                    self.deliver(sink, h, why);
                }
            }
        } else if self.held.len() >= MAX_FLOWS {
            let h = self.held.remove(0);
            self.deliver(sink, h, Flush::Evict);
        }
        // A new train. One that must end at once (PSH) is delivered straight from the frame.
        if s.repr.flags.psh() {
            sink.c.gro_flush_psh += 1;
            deliver_single(sink, &s.ip, &s.repr, s.hdr_len, s.bytes);
            return;
        }
        let h = self.start(s);
        debug_assert_eq!(h.len, plen);
        self.held.push(h);
    }

    fn start(&self, s: &Seg<'_>) -> Held {
        let o = s.options();
        let mut opts = [0u8; MAX_OPTIONS_LEN];
        let opt_len = o.len().min(MAX_OPTIONS_LEN);
        opts[..opt_len].copy_from_slice(&o[..opt_len]);
        let len = s.payload().len();
        Held {
            ip: s.ip,
            repr: s.repr,
            opts,
            opt_len,
            hdr_len: s.hdr_len,
            next_seq: s.repr.seq.wrapping_add(len as u32),
            seg_size: len,
            segs: 1,
            len,
            body: Body::Frame {
                frame: s.frame,
                off: s.off,
                len: s.bytes.len(),
            },
        }
    }

    /// `None` if `s` may join `h`, else why the train ends before it.
    fn check(&self, h: &Held, s: &Seg<'_>) -> Option<Flush> {
        let plen = s.payload().len();
        let same = s.repr.seq == h.next_seq
            && s.repr.ack == h.repr.ack
            && s.repr.window == h.repr.window
            && s.hdr_len == h.hdr_len
            && s.options() == &h.opts[..h.opt_len]
            && s.ip == h.ip
            // A segment longer than the first cannot come from one GSO send.
            && plen <= h.seg_size;
        if !same {
            return Some(Flush::Mismatch);
        }
        if h.len + plen > h.max_len() {
            return Some(Flush::Bytes);
        }
        None
    }

    /// Appends `s` to train `i`, verifying its checksum in the copy.
    fn merge(&mut self, sink: &mut Sink<'_>, i: usize, s: &Seg<'_>) {
        // The head is still in its frame: move it into a 64 KiB buffer, verifying it.
        if let Body::Frame { frame, off, len } = self.held[i].body {
            let mut buf = self.pool.get();
            let frames = sink.frames;
            let ok = match frames
                .get(frame)
                .and_then(|f| f.as_slice().get(off..off + len))
            {
                Some(seg) => {
                    let h = &self.held[i];
                    append_verified(sink, &mut buf, &h.ip, seg, h.hdr_len)
                }
                None => false,
            };
            if !ok {
                // The head was corrupt: it is dropped (counted) and `s` starts the train.
                self.pool.put(buf);
                self.held[i] = self.start(s);
                return;
            }
            self.held[i].body = Body::Merged(buf);
        }
        let h = &mut self.held[i];
        let Body::Merged(buf) = &mut h.body else {
            return;
        };
        if !append_verified(sink, buf, &s.ip, s.bytes, s.hdr_len) {
            return;
        }
        let plen = s.payload().len();
        h.len += plen;
        h.segs += 1;
        h.next_seq = h.next_seq.wrapping_add(plen as u32);
        sink.c.gro_merges += 1;
        // The merged segment carries the last segment's PSH (Linux: flags of the last skb).
        let why = if s.repr.flags.psh() {
            h.repr.flags.0 |= TcpFlags::PSH;
            Some(Flush::Psh)
        } else if plen < h.seg_size {
            Some(Flush::Short)
        } else if h.segs >= MAX_SEGS {
            Some(Flush::Count)
        } else if h.len + h.seg_size > h.max_len() {
            Some(Flush::Bytes)
        } else {
            None
        };
        if let Some(why) = why {
            let h = self.held.remove(i);
            self.deliver(sink, h, why);
        }
    }

    /// Hands one train to TCP and counts why.
    fn deliver(&mut self, sink: &mut Sink<'_>, h: Held, why: Flush) {
        let c = &mut *sink.c;
        match why {
            Flush::BatchEnd => c.gro_flush_batch_end += 1,
            Flush::Mismatch => c.gro_flush_mismatch += 1,
            Flush::Psh => c.gro_flush_psh += 1,
            Flush::Short => c.gro_flush_short += 1,
            Flush::Bytes => c.gro_flush_bytes += 1,
            Flush::Count => c.gro_flush_count += 1,
            Flush::Evict => c.gro_flush_evict += 1,
            Flush::Control => c.gro_flush_control += 1,
        }
        match h.body {
            Body::Frame { frame, off, len } => {
                let frames = sink.frames;
                if let Some(seg) = frames
                    .get(frame)
                    .and_then(|f| f.as_slice().get(off..off + len))
                {
                    deliver_single(sink, &h.ip, &h.repr, h.hdr_len, seg);
                }
            }
            Body::Merged(buf) => {
                c.gro_flushes += 1;
                c.gro_segs_per_flush[bucket(usize::from(h.segs))] += 1;
                sink.tcp
                    .input(sink.now, h.ip.src, h.ip.dst, &h.repr, buf.as_slice());
                self.pool.put(buf);
            }
        }
    }
}

/// Verifies (with a plain sum: nothing is copied) and delivers a train of one segment.
fn deliver_single(sink: &mut Sink<'_>, ip: &IpKey, repr: &TcpRepr, hdr_len: usize, seg: &[u8]) {
    let c = &mut *sink.c;
    if sink.verify {
        let ph = pseudo_header_sum(ip.src, ip.dst, IpProtocol::Tcp, seg.len() as u32);
        c.bytes_checksummed += seg.len() as u64;
        c.bytes_checksummed_separately += seg.len() as u64;
        if checksum_combine(ph, crate::mem::checksum(seg)) != 0xffff {
            c.tcp_bad_checksum += 1;
            return;
        }
    }
    c.gro_flushes += 1;
    c.gro_segs_per_flush[bucket(1)] += 1;
    let payload = seg.get(hdr_len..).unwrap_or(&[]);
    sink.tcp.input(sink.now, ip.src, ip.dst, repr, payload);
}

/// Copies the payload of `seg` (header `hdr_len` bytes) onto the end of `buf`, summing it in
/// the same pass, and checks the segment's checksum (RFC 9293 §3.1) from that sum and the
/// header's. A bad segment is cut back out of `buf`, counted, and `false` returned.
fn append_verified(
    sink: &mut Sink<'_>,
    buf: &mut PacketBuf,
    ip: &IpKey,
    seg: &[u8],
    hdr_len: usize,
) -> bool {
    let (Some(header), Some(payload)) = (seg.get(..hdr_len), seg.get(hdr_len..)) else {
        sink.c.tcp_malformed += 1;
        return false;
    };
    let before = buf.len();
    let c = &mut *sink.c;
    c.copies += 1;
    c.bytes_copied += payload.len() as u64;
    if !sink.verify {
        crate::mem::copy(buf.append(payload.len()), payload);
        return true;
    }
    c.bytes_checksummed += seg.len() as u64;
    let psum = crate::mem::copy_with_checksum(buf.append(payload.len()), payload);
    // The header is a multiple of 4 bytes, so the payload's sum adds in at an even offset
    // (RFC 1071 §2 (B)).
    if checksum_combine(header_sum(ip, header, seg.len()), psum) != 0xffff {
        c.tcp_bad_checksum += 1;
        buf.truncate(before);
        return false;
    }
    true
}
