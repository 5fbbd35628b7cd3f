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
//! Merging copies nothing: a train is a list of payload slices still in their frames of the
//! receive batch, handed to [`TcpLayer::input_parts`], which copies them once, into the
//! receive ring. Checksums are verified before a segment joins a train (one read pass over
//! the segment; a segment whose sum is wrong is dropped and counted, never merged). The first
//! segment is verified lazily: when a second one joins, or when it is delivered alone.
//!
//! Why not copy into one 64 KiB buffer with the checksum folded into that copy (the first
//! version): measured with `/usr/bin/time netfold stream --bytes 8G` (user CPU, 3 runs each,
//! same build otherwise), copy+checksum merging 1.24-1.27 s, slices with a separate sum pass
//! 1.23-1.25 s — a tie within noise: the sum pass costs about what the extra 64 KiB write and
//! re-read cost. Slices keep no 64 KiB buffers and leave one copy on the receive path, into
//! which the checksum can later be folded (the ring write would verify before it commits);
//! that would remove the remaining read pass.

use super::counters::{bucket, Counters};
use crate::buf::PacketBuf;
use crate::tcp::TcpLayer;
use crate::time::Instant;
use crate::wire::ipv4::{checksum_combine, pseudo_header_sum};
use crate::wire::tcp::{TcpFlags, TcpRepr, MAX_OPTIONS_LEN};
use crate::wire::{IpProtocol, Ipv4Addr};

/// Most segments merged into one: 44 segments of 1448 bytes (MSS 1460 less timestamps) fill
/// a 64 KiB packet, so at MTU 1500 the byte limit and this count agree; with small segments
/// the count bounds the per-flush work and the slice list, with large ones the bytes limit
/// holds (seed 002: a count alone is wrong).
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

/// Where a merged segment's payload is: frame index in the batch, offset, length.
type Part = (u32, u32, u32);

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
    /// The first segment (frame, offset, length of header + payload), checksum unverified
    /// while `head_unverified`.
    head: (usize, usize, usize),
    head_unverified: bool,
    parts: [Part; MAX_SEGS as usize],
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
}

/// What flushing needs from the stack (split borrows).
pub(crate) struct Sink<'s> {
    pub now: Instant,
    /// The batch; the frame being parsed is taken out of it and given in `cur` instead.
    pub frames: &'s [PacketBuf],
    /// `(index, offset, bytes)`: bytes `offset..` of frame `index`, the one being parsed.
    pub cur: (usize, usize, &'s [u8]),
    pub tcp: &'s mut TcpLayer,
    pub c: &'s mut Counters,
    pub verify: bool,
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
            head: (s.frame, s.off, s.bytes.len()),
            head_unverified: true,
            parts: {
                let mut p = [(0, 0, 0); MAX_SEGS as usize];
                p[0] = part(s.frame, s.off + s.hdr_len, len);
                p
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

    /// Appends `s` to train `i` once its checksum (and the head's) is verified.
    fn merge(&mut self, sink: &mut Sink<'_>, i: usize, s: &Seg<'_>) {
        if self.held[i].head_unverified {
            let (frame, off, len) = self.held[i].head;
            let head = bytes(sink, frame, off, len);
            let ok = head.is_some_and(|seg| verify(sink, &self.held[i].ip, seg));
            if !ok {
                // The head was corrupt: it is dropped (counted) and `s` starts the train.
                self.held[i] = self.start(s);
                return;
            }
            self.held[i].head_unverified = false;
        }
        if !verify(sink, &s.ip, s.bytes) {
            return;
        }
        let h = &mut self.held[i];
        let plen = s.payload().len();
        h.parts[usize::from(h.segs)] = part(s.frame, s.off + s.hdr_len, plen);
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
        if h.segs == 1 {
            let (frame, off, len) = h.head;
            if let Some(seg) = bytes(sink, frame, off, len) {
                if h.head_unverified {
                    deliver_single(sink, &h.ip, &h.repr, h.hdr_len, seg);
                } else {
                    sink.c.gro_flushes += 1;
                    sink.c.gro_segs_per_flush[bucket(1)] += 1;
                    let payload = seg.get(h.hdr_len..).unwrap_or(&[]);
                    sink.tcp
                        .input(sink.now, h.ip.src, h.ip.dst, &h.repr, payload);
                }
            }
            return;
        }
        let mut parts: [&[u8]; MAX_SEGS as usize] = [&[]; MAX_SEGS as usize];
        let n = usize::from(h.segs).min(parts.len());
        for (dst, &(frame, off, len)) in parts.iter_mut().zip(&h.parts[..n]) {
            *dst = bytes(sink, frame as usize, off as usize, len as usize).unwrap_or(&[]);
        }
        let c = &mut *sink.c;
        c.gro_flushes += 1;
        c.gro_segs_per_flush[bucket(n)] += 1;
        sink.tcp
            .input_parts(sink.now, h.ip.src, h.ip.dst, &h.repr, &parts[..n]);
    }
}

fn part(frame: usize, off: usize, len: usize) -> Part {
    // Frames, offsets and lengths are bounded by the batch and by 64 KiB frames.
    (frame as u32, off as u32, len as u32)
}

/// Bytes `off..off + len` of frame `idx` of the batch.
fn bytes<'s>(sink: &Sink<'s>, idx: usize, off: usize, len: usize) -> Option<&'s [u8]> {
    let (ci, coff, cur) = sink.cur;
    if idx == ci {
        let at = off.checked_sub(coff)?;
        return cur.get(at..at + len);
    }
    sink.frames.get(idx)?.as_slice().get(off..off + len)
}

/// Checks a segment's checksum (RFC 9293 §3.1: pseudo-header, header and data) in one read
/// pass; a bad one is counted.
fn verify(sink: &mut Sink<'_>, ip: &IpKey, seg: &[u8]) -> bool {
    if !sink.verify {
        return true;
    }
    let c = &mut *sink.c;
    c.bytes_checksummed += seg.len() as u64;
    c.bytes_checksummed_separately += seg.len() as u64;
    let ph = pseudo_header_sum(ip.src, ip.dst, IpProtocol::Tcp, seg.len() as u32);
    if checksum_combine(ph, crate::mem::checksum(seg)) != 0xffff {
        c.tcp_bad_checksum += 1;
        return false;
    }
    true
}

/// Verifies (one read pass) and delivers a train of one segment.
fn deliver_single(sink: &mut Sink<'_>, ip: &IpKey, repr: &TcpRepr, hdr_len: usize, seg: &[u8]) {
    if !verify(sink, ip, seg) {
        return;
    }
    sink.c.gro_flushes += 1;
    sink.c.gro_segs_per_flush[bucket(1)] += 1;
    let payload = seg.get(hdr_len..).unwrap_or(&[]);
    sink.tcp.input(sink.now, ip.src, ip.dst, repr, payload);
}
