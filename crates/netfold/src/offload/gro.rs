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
//! receive batch (the batch is immutable while it is parsed, so a train borrows it for the
//! batch's lifetime `'b`), handed through a [`Sink`] to TCP, which copies them once, into the
//! receive ring or a posted read. Each segment is checked before it joins a train, and only if
//! its [`Csum`] state says it still needs it; the first segment is checked lazily: when a
//! second one joins, or when it is delivered alone. The sink does the checking, so the one
//! checksum check of the stack is the only one, and it decides how: a segment without payload
//! is verified in full (a corrupt one is dropped and counted, never merged); for a data
//! segment it sums only the pseudo-header and header and leaves the sum open ([`Checked`]),
//! and TCP completes it while it copies the payload, processing the segment only if it
//! verifies (`tcp/place.rs`). The open sums travel with the train, one per segment.
//!
//! Why not copy into one 64 KiB buffer with the checksum folded into that copy (the first
//! version): measured with `/usr/bin/time netfold stream --bytes 8G` (user CPU, 3 runs each,
//! same build otherwise), copy+checksum merging 1.24-1.27 s, slices with a separate sum pass
//! 1.23-1.25 s — a tie within noise: the sum pass costs about what the extra 64 KiB write and
//! re-read cost. Slices keep no 64 KiB buffers and leave one copy on the receive path, into
//! which the checksum is now folded (`tcp/place.rs`: the ring write, or the copy into a posted
//! read, verifies before anything is committed), which removed the separate read pass.

use crate::buf::Csum;
use crate::wire::tcp::{TcpFlags, TcpPacket, TcpRepr, MAX_OPTIONS_LEN};
use crate::wire::Ipv4Addr;

/// Most segments merged into one: 44 segments of 1448 bytes (MSS 1460 less timestamps) fill
/// a 64 KiB packet, so at MTU 1500 the byte limit and this count agree; with small segments
/// the count bounds the per-flush work and the slice list, with large ones the bytes limit
/// holds (seed 002: a count alone is wrong).
pub const MAX_SEGS: u16 = 44;
/// Flows held at once in one batch (Linux: `MAX_GRO_SKBS` = 8 per NAPI bucket list).
pub const MAX_FLOWS: usize = 8;
/// Largest merged TCP segment payload: the IPv4 total length is 16 bits (RFC 791 §3.1).
const MAX_IP_PACKET: usize = crate::wire::ipv4::MAX_PACKET_LEN;
/// GRO merges only option-less IPv4 (Linux `inet_gro_receive`: ihl must be 5).
const IPV4_HEADER: usize = crate::wire::ipv4::HEADER_LEN;

/// Why a held train was handed to TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// The receive batch ended.
    BatchEnd,
    /// The next segment of the flow did not match (sequence, ACK, window, options, IP).
    Mismatch,
    /// The last merged segment carried PSH.
    Psh,
    /// A segment shorter than the first ended the train.
    Short,
    /// The byte limit (64 KiB IP packet) was reached.
    Bytes,
    /// [`MAX_SEGS`] segments were merged.
    Count,
    /// A new flow needed the slot ([`MAX_FLOWS`]).
    Evict,
    /// A segment GRO does not merge (control flags, no payload) arrived for the flow.
    Control,
}

/// The IP fields that must match for two segments to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpKey {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Time to live.
    pub ttl: u8,
    /// DSCP and ECN.
    pub tos: u8,
    /// Don't fragment.
    pub df: bool,
}

/// One received TCP segment in a frame of the receive batch (header parsed, checksum in the
/// state `csum` says).
#[derive(Debug, Clone, Copy)]
pub struct Seg<'b> {
    /// Its IP fields.
    pub ip: IpKey,
    /// Its parsed header.
    pub repr: TcpRepr,
    /// Header and payload, in the frame.
    pub bytes: &'b [u8],
    /// TCP header length.
    pub hdr_len: usize,
    /// Checksum state (verified at most once, by the sink).
    pub csum: Csum,
}

impl<'b> Seg<'b> {
    /// The payload bytes.
    pub fn payload(&self) -> &'b [u8] {
        self.bytes.get(self.hdr_len..).unwrap_or(&[])
    }
    fn options(&self) -> &'b [u8] {
        TcpPacket::new_checked(self.bytes).map_or(&[], TcpPacket::into_options)
    }
}

/// What a [`Sink`]'s check of one segment came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// The checksum failed (counted): the segment is dropped.
    Bad,
    /// Verified now or before (the device's word, or an earlier check).
    Verified,
    /// Left open: the folded sum of pseudo-header and header, to which the payload's sum
    /// (taken by TCP in its copy) must add up to 0xffff.
    Open(u16),
}

impl Checked {
    /// The open sum, if any (what TCP is handed per segment).
    pub fn open(self) -> Option<u16> {
        match self {
            Checked::Open(h) => Some(h),
            _ => None,
        }
    }
}

/// What GRO hands its results to (the interface's TCP glue): the checksum check, the counters,
/// and TCP itself.
pub trait Sink {
    /// Checks segment `seg` (header and payload, the header `hdr_len` bytes) if `csum` says it
    /// still needs it: in full (a bad one is counted) or leaving the payload's part open.
    fn check(&mut self, ip: &IpKey, seg: &[u8], hdr_len: usize, csum: &mut Csum) -> Checked;
    /// A train ended for `why` (counted even if its head then fails its checksum).
    fn flushed(&mut self, why: Flush);
    /// A segment joined a train.
    fn merged(&mut self);
    /// Hands one train to TCP: the header of its first segment, with the last one's PSH, its
    /// payload slices in order and, per slice, the checksum left open ([`Checked::open`]).
    fn deliver(&mut self, ip: &IpKey, repr: &TcpRepr, parts: &[&[u8]], pending: &[Option<u16>]);
}

#[derive(Debug)]
struct Held<'b> {
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
    /// The first segment (header and payload) and its checksum state; whether it has been
    /// checked yet (lazily, see the module doc).
    head: &'b [u8],
    head_csum: Csum,
    head_checked: bool,
    parts: [&'b [u8]; MAX_SEGS as usize],
    /// Per part, the checksum left open by the check.
    pending: [Option<u16>; MAX_SEGS as usize],
}

impl Held<'_> {
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

/// The GRO table of one receive batch: the trains held, in arrival order, each borrowing the
/// batch. It lives on the stack for one poll (fixed size, no heap allocation).
#[derive(Debug)]
pub struct Gro<'b> {
    held: [Option<Held<'b>>; MAX_FLOWS],
    n: usize,
}

/// A segment flags word GRO can merge: ACK, optionally PSH, nothing else (no SYN, FIN, RST,
/// URG, ECE, CWR: Linux `tcp_gro_receive` flushes on all of those).
pub fn mergeable_flags(f: TcpFlags) -> bool {
    f.ack() && f.0 & !(TcpFlags::ACK | TcpFlags::PSH) == 0
}

impl Default for Gro<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'b> Gro<'b> {
    /// An empty table.
    pub fn new() -> Gro<'b> {
        Gro {
            held: Default::default(),
            n: 0,
        }
    }

    fn position(&self, s: &Seg<'_>) -> Option<usize> {
        self.held[..self.n]
            .iter()
            .position(|h| h.as_ref().is_some_and(|h| h.same_flow(s)))
    }

    /// Takes train `i` out, keeping the others in arrival order.
    fn remove(&mut self, i: usize) -> Option<Held<'b>> {
        if i >= self.n {
            return None;
        }
        self.held[i..self.n].rotate_left(1);
        self.n -= 1;
        self.held[self.n].take()
    }

    fn push(&mut self, h: Held<'b>) {
        if let Some(slot) = self.held.get_mut(self.n) {
            *slot = Some(h);
            self.n += 1;
        }
    }

    /// Hands the held train of the flow `s` belongs to (if any) to TCP, so that a segment GRO
    /// does not merge is delivered after the data before it.
    pub fn flush_flow(&mut self, sink: &mut dyn Sink, s: &Seg<'_>) {
        if let Some(h) = self.position(s).and_then(|i| self.remove(i)) {
            self.deliver(sink, h, Flush::Control);
        }
    }

    /// Flushes everything held (end of the receive batch).
    pub fn flush_all(&mut self, sink: &mut dyn Sink) {
        while let Some(h) = self.remove(0) {
            self.deliver(sink, h, Flush::BatchEnd);
        }
    }

    /// Takes one mergeable data segment (ACK/PSH only, payload non-empty, plain IPv4).
    pub fn receive(&mut self, sink: &mut dyn Sink, s: &Seg<'b>) {
        if let Some(i) = self.position(s) {
            match self.held[i].as_ref().and_then(|h| check(h, s)) {
                None => {
                    self.merge(sink, i, s);
                    return;
                }
                Some(why) => {
                    if let Some(h) = self.remove(i) {
                        self.deliver(sink, h, why);
                    }
                }
            }
        } else if self.n >= MAX_FLOWS {
            if let Some(h) = self.remove(0) {
                self.deliver(sink, h, Flush::Evict);
            }
        }
        // A new train. One that must end at once (PSH) is delivered straight from the frame.
        if s.repr.flags.psh() {
            sink.flushed(Flush::Psh);
            let mut csum = s.csum;
            match sink.check(&s.ip, s.bytes, s.hdr_len, &mut csum) {
                Checked::Bad => {}
                c => sink.deliver(&s.ip, &s.repr, &[s.payload()], &[c.open()]),
            }
            return;
        }
        self.push(start(s));
    }

    /// Appends `s` to train `i` once it (and the head) passed the sink's check.
    fn merge(&mut self, sink: &mut dyn Sink, i: usize, s: &Seg<'b>) {
        let Some(h) = self.held[i].as_mut() else {
            return;
        };
        if !check_head(sink, h) {
            // The head was corrupt: it is dropped (counted) and `s` starts the train.
            *h = start(s);
            return;
        }
        let mut csum = s.csum;
        let open = match sink.check(&s.ip, s.bytes, s.hdr_len, &mut csum) {
            Checked::Bad => return,
            c => c.open(),
        };
        let plen = s.payload().len();
        h.parts[usize::from(h.segs)] = s.payload();
        h.pending[usize::from(h.segs)] = open;
        h.len += plen;
        h.segs += 1;
        h.next_seq = h.next_seq.wrapping_add(plen as u32);
        sink.merged();
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
            if let Some(h) = self.remove(i) {
                self.deliver(sink, h, why);
            }
        }
    }

    /// Hands one train to TCP and counts why.
    fn deliver(&mut self, sink: &mut dyn Sink, mut h: Held<'b>, why: Flush) {
        sink.flushed(why);
        if !check_head(sink, &mut h) {
            return;
        }
        let n = usize::from(h.segs).min(h.parts.len());
        sink.deliver(&h.ip, &h.repr, &h.parts[..n], &h.pending[..n]);
    }
}

/// Checks the head of a train once (see the module doc); false if it is corrupt.
fn check_head(sink: &mut dyn Sink, h: &mut Held<'_>) -> bool {
    if h.head_checked {
        return true;
    }
    match sink.check(&h.ip, h.head, h.hdr_len, &mut h.head_csum) {
        Checked::Bad => false,
        c => {
            h.pending[0] = c.open();
            h.head_checked = true;
            true
        }
    }
}

fn start<'b>(s: &Seg<'b>) -> Held<'b> {
    let o = s.options();
    let mut opts = [0u8; MAX_OPTIONS_LEN];
    let opt_len = o.len().min(MAX_OPTIONS_LEN);
    opts[..opt_len].copy_from_slice(&o[..opt_len]);
    let len = s.payload().len();
    let mut parts: [&'b [u8]; MAX_SEGS as usize] = [&[]; MAX_SEGS as usize];
    parts[0] = s.payload();
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
        head: s.bytes,
        head_csum: s.csum,
        head_checked: false,
        parts,
        pending: [None; MAX_SEGS as usize],
    }
}

/// `None` if `s` may join `h`, else why the train ends before it.
fn check(h: &Held<'_>, s: &Seg<'_>) -> Option<Flush> {
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
