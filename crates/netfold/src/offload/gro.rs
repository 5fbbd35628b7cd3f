//! Generic receive offload (GRO) for TCP over IPv4 and IPv6: within one receive batch, consecutive
//! segments of one flow are merged into one larger segment so that TCP runs its input path once
//! per flow per batch instead of once per frame (the OLS 2002 study "gather-receive"; Linux
//! `tcp_gro_receive` in `net/ipv4/tcp_offload.c`).
//!
//! Only merges that a GSO sender could split back into the same segments are done (the Linux
//! rules): same 4-tuple; contiguous sequence numbers (seq == previous seq + previous length);
//! same ACK number and window; byte-identical TCP options (timestamps included); IPv4 without
//! options or fragmentation, with the same TTL, TOS and DF, or IPv6 without extension headers
//! with the same hop limit, traffic class and flow label (Linux `ipv6_gro_receive` compares
//! the first word of the header, version, traffic class and flow label, and the hop limit;
//! the caller passes only extension-free packets as mergeable); flags ACK only (PSH allowed, and it
//! ends the train after being merged); no segment longer than the first, and a shorter one ends
//! the train. Limits: the merged IP packet stays within 64 KiB (bytes; for IPv6 the 16-bit
//! payload length, which excludes the 40-byte header) and [`MAX_SEGS`]
//! segments (count) — the 2007 LRO review shows why a count alone is wrong: with small segments a count
//! limit lets a "merged" segment stay tiny, with jumbo ones it overflows the 16-bit length.
//!
//! Merging copies nothing: a train is a list of payload slices still in their frames of the
//! receive batch (the batch is immutable while it is parsed, so a train borrows it for the
//! batch's lifetime `'b`). The receive path goes one way: GRO hands nothing on by itself; the
//! trains it finishes are returned to the interface ([`Gro::receive`], [`Gro::flush_flow`],
//! and [`Gro::take_held`] at the end of the batch), which gives them to TCP, which copies them
//! once, into the receive ring or a posted read. What GRO did is counted in its own
//! [`GroCounters`], read once per batch. Each segment is checked before it joins a train, and
//! only if its [`Csum`] state says it still needs it; the first segment is checked lazily:
//! when a second one joins, or when it is delivered alone. The check is the stack's one TCP
//! checksum check ([`check`]): a segment without payload is verified in full (a corrupt one
//! is dropped and counted, never merged); for a data segment it sums only the pseudo-header
//! and header and leaves the sum open ([`Checked`]), and TCP completes it while it copies the
//! payload, processing the segment only if it verifies (`tcp/place.rs`). The open sums travel
//! with the train, one per segment.
//!
//! Why not copy into one 64 KiB buffer with the checksum folded into that copy (the first
//! version): measured with `/usr/bin/time netfold stream --bytes 8G` (user CPU, 3 runs each,
//! same build otherwise), copy+checksum merging 1.24-1.27 s, slices with a separate sum pass
//! 1.23-1.25 s — a tie within noise: the sum pass costs about what the extra 64 KiB write and
//! re-read cost. Slices keep no 64 KiB buffers and leave one copy on the receive path, into
//! which the checksum is now folded (`tcp/place.rs`: the ring write, or the copy into a posted
//! read, verifies before anything is committed), which removed the separate read pass.

use crate::buf::{Csum, FramePos};
use crate::wire::checksum::{add, pseudo_header_ip};
use crate::wire::tcp::{TcpFlags, TcpPacket, TcpRepr, MAX_OPTIONS_LEN};
use crate::wire::{IpAddr, IpProtocol};

/// Most segments merged into one: 44 segments of 1448 bytes (MSS 1460 less timestamps) fill
/// a 64 KiB packet, so at MTU 1500 the byte limit and this count agree; with small segments
/// the count bounds the per-flush work and the slice list, with large ones the bytes limit
/// holds (the 2007 LRO review: a count alone is wrong).
pub const MAX_SEGS: u16 = 44;
/// Flows held at once in one batch (Linux: `MAX_GRO_SKBS` = 8 per NAPI bucket list).
pub const MAX_FLOWS: usize = 8;
/// Largest merged TCP segment payload: the IPv4 total length is 16 bits (RFC 791 §3.1).
const MAX_IP_PACKET: usize = crate::wire::ipv4::MAX_PACKET_LEN;
/// GRO merges only option-less IPv4 (Linux `inet_gro_receive`: ihl must be 5).
const IPV4_HEADER: usize = crate::wire::ipv4::HEADER_LEN;
/// Largest IPv6 payload (the 16-bit Payload Length, RFC 8200 §3; no jumbograms).
const MAX_IPV6_PAYLOAD: usize = crate::wire::ipv6::MAX_PAYLOAD_LEN;

/// Why a held train was handed to TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// The receive batch ended.
    BatchEnd = 0,
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

impl Flush {
    /// Every reason, in counter order ([`GroCounters::flushes`]).
    pub const ALL: [Flush; 8] = [
        Flush::BatchEnd,
        Flush::Mismatch,
        Flush::Psh,
        Flush::Short,
        Flush::Bytes,
        Flush::Count,
        Flush::Evict,
        Flush::Control,
    ];
}

/// The IP fields that must match for two segments to merge (IPv4: addresses, TTL, TOS, DF;
/// IPv6: addresses, hop limit, traffic class, flow label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address (same family).
    pub dst: IpAddr,
    /// Time to live / hop limit.
    pub ttl: u8,
    /// DSCP and ECN (IPv4 TOS, IPv6 traffic class).
    pub tos: u8,
    /// Don't fragment (IPv4; false for IPv6).
    pub df: bool,
    /// Flow label (IPv6; 0 for IPv4).
    pub flow_label: u32,
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
    /// Checksum state (verified at most once, by [`check`]).
    pub csum: Csum,
    /// Where the payload lies in the receive batch.
    pub at: FramePos,
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

/// What [`check`] of one segment came to.
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

/// Where the checksum check counts its work: the interface's counters for segments it checks
/// itself, [`GroCounters`] for the segments GRO checks.
pub trait CsumCount {
    /// `n` bytes were summed in a pass of their own (not folded into a copy), `payload` of
    /// them TCP payload.
    fn summed_separately(&mut self, n: usize, payload: usize);
    /// A segment failed its checksum (dropped).
    fn bad_checksum(&mut self);
}

/// The one TCP checksum check (RFC 9293 §3.1: pseudo-header, header and data; for IPv6 the
/// RFC 8200 §8.1 pseudo-header), in one read pass, done only if the segment's state says it
/// is still needed; a pass marks the segment verified, a failure is counted.
#[inline(always)]
pub fn verify<C: CsumCount>(
    c: &mut C,
    src: IpAddr,
    dst: IpAddr,
    seg: &[u8],
    csum: &mut Csum,
) -> bool {
    if !csum.needs_verify() {
        return true;
    }
    let hdr = TcpPacket::new_checked(seg).map_or(seg.len(), |p| p.header_len());
    c.summed_separately(seg.len(), seg.len().saturating_sub(hdr));
    let ph = pseudo_header_ip(src, dst, IpProtocol::Tcp, seg.len() as u32);
    if add(ph, crate::mem::checksum(seg)) != 0xffff {
        c.bad_checksum();
        return false;
    }
    *csum = Csum::Verified;
    true
}

/// The check of a received segment whose header (`hdr_len` bytes, parsed) is in `seg`. A data
/// segment that still needs verifying is not verified here: only its pseudo-header and header
/// are summed, and the sum is left open for TCP, which completes it while it copies the
/// payload to where it belongs (`tcp/place.rs`, single-pass receive) and drops the segment if
/// it fails. One pass over the payload fewer than verifying here and copying later. A segment
/// without payload is verified in full ([`verify`]): there is no copy to fold it into.
#[inline]
pub fn check<C: CsumCount>(
    c: &mut C,
    src: IpAddr,
    dst: IpAddr,
    seg: &[u8],
    hdr_len: usize,
    csum: &mut Csum,
) -> Checked {
    if !csum.needs_verify() {
        return Checked::Verified;
    }
    match seg.get(..hdr_len) {
        Some(hdr) if seg.len() > hdr_len => {
            c.summed_separately(hdr_len, 0);
            let ph = pseudo_header_ip(src, dst, IpProtocol::Tcp, seg.len() as u32);
            Checked::Open(add(ph, crate::mem::checksum(hdr)))
        }
        _ if verify(c, src, dst, seg, csum) => Checked::Verified,
        _ => Checked::Bad,
    }
}

/// What GRO did in one receive batch, for the interface's counters (read once, when the
/// batch ends: [`Gro::counters`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GroCounters {
    /// Trains ended, by why (indexed by [`Flush`] as `usize`; counted even if the train's
    /// head then fails its checksum).
    pub flushes: [u64; Flush::ALL.len()],
    /// Segments that joined a train.
    pub merges: u64,
    /// Bytes GRO's checks summed in a pass of their own, and the payload bytes among them.
    pub bytes_checksummed: u64,
    /// See `bytes_checksummed`.
    pub payload_checksummed: u64,
    /// Segments GRO's checks found corrupt (dropped).
    pub bad_checksum: u64,
}

impl CsumCount for GroCounters {
    #[inline]
    fn summed_separately(&mut self, n: usize, payload: usize) {
        self.bytes_checksummed += n as u64;
        self.payload_checksummed += payload as u64;
    }
    #[inline]
    fn bad_checksum(&mut self) {
        self.bad_checksum += 1;
    }
}

/// A finished train: what TCP gets, the header of its first segment (with the last one's
/// PSH), its payload slices in order and, per slice, the checksum left open
/// ([`Checked::open`]).
#[derive(Debug)]
pub struct Train<'b>(TrainOf<'b>);

// Not boxed: the receive path allocates nothing (tests/zero_alloc.rs); a train is moved out
// of the table once and handed to TCP.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum TrainOf<'b> {
    /// A train built in the table.
    Held(Held<'b>),
    /// A segment that ended its train as it arrived (PSH), straight from its frame.
    One {
        ip: IpKey,
        repr: TcpRepr,
        part: [&'b [u8]; 1],
        pending: [Option<u16>; 1],
        at: [FramePos; 1],
    },
}

impl<'b> Train<'b> {
    /// The IP fields of its segments.
    pub fn ip(&self) -> &IpKey {
        match &self.0 {
            TrainOf::Held(h) => &h.ip,
            TrainOf::One { ip, .. } => ip,
        }
    }
    /// The header of the first segment, with the last one's PSH.
    pub fn repr(&self) -> &TcpRepr {
        match &self.0 {
            TrainOf::Held(h) => &h.repr,
            TrainOf::One { repr, .. } => repr,
        }
    }
    /// The payload slices, in order.
    pub fn parts(&self) -> &[&'b [u8]] {
        match &self.0 {
            TrainOf::Held(h) => &h.parts[..usize::from(h.segs).min(h.parts.len())],
            TrainOf::One { part, .. } => part,
        }
    }
    /// Per slice, the checksum left open.
    pub fn pending(&self) -> &[Option<u16>] {
        match &self.0 {
            TrainOf::Held(h) => &h.pending[..usize::from(h.segs).min(h.pending.len())],
            TrainOf::One { pending, .. } => pending,
        }
    }
    /// Per slice, where it lies in the receive batch.
    pub fn at(&self) -> &[FramePos] {
        match &self.0 {
            TrainOf::Held(h) => &h.at[..usize::from(h.segs).min(h.at.len())],
            TrainOf::One { at, .. } => at,
        }
    }
}

/// The trains one [`Gro::receive`] finished, oldest first (at most two: the flow's held train,
/// and the segment's own).
#[derive(Debug)]
pub struct Finished<'b>([Option<Train<'b>>; 2]);

impl<'b> Iterator for Finished<'b> {
    type Item = Train<'b>;
    #[inline]
    fn next(&mut self) -> Option<Train<'b>> {
        // A train is over a kilobyte (its parts, checksum states and frame positions): test
        // before taking, so that the common case (nothing finished) moves nothing. `take` on
        // a `None` still copies the whole option (measured: TCP_STREAM at MTU 1500 lost 10%
        // to it, two such copies per segment).
        if self.0[0].is_some() {
            return self.0[0].take();
        }
        if self.0[1].is_some() {
            return self.0[1].take();
        }
        None
    }
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
    /// Per part, where it lies in the receive batch.
    at: [FramePos; MAX_SEGS as usize],
}

impl Held<'_> {
    fn same_flow(&self, s: &Seg<'_>) -> bool {
        self.ip.src == s.ip.src
            && self.ip.dst == s.ip.dst
            && self.repr.src_port == s.repr.src_port
            && self.repr.dst_port == s.repr.dst_port
    }
    /// Largest merged TCP payload: what one IP packet of the family carries besides the TCP
    /// header (IPv4: total length 65535 with a 20-byte header; IPv6: payload length 65535).
    fn max_len(&self) -> usize {
        match self.ip.src {
            IpAddr::V4(_) => MAX_IP_PACKET - IPV4_HEADER - self.hdr_len,
            IpAddr::V6(_) => MAX_IPV6_PAYLOAD - self.hdr_len,
        }
    }
}

/// The GRO table of one receive batch: the trains held, in arrival order, each borrowing the
/// batch. It lives on the stack for one poll (fixed size, no heap allocation).
#[derive(Debug)]
pub struct Gro<'b> {
    held: [Option<Held<'b>>; MAX_FLOWS],
    n: usize,
    /// What this batch's GRO did; `None` until a segment comes (most batches bring GRO
    /// nothing: none is zeroed for them).
    counters: Option<GroCounters>,
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
            counters: None,
        }
    }

    /// What GRO did in this batch so far; `None` if no segment was given to
    /// [`Gro::receive`] (then nothing is held and nothing was counted).
    #[inline]
    pub fn counters(&self) -> Option<&GroCounters> {
        self.counters.as_ref()
    }

    fn c(&mut self) -> &mut GroCounters {
        self.counters.get_or_insert_with(GroCounters::default)
    }

    /// The oldest train still held, finished because the receive batch ends (whose head
    /// passes its check; a corrupt head is dropped and counted, and the next train comes).
    /// Call until `None` when the batch ends.
    pub fn take_held(&mut self) -> Option<Train<'b>> {
        while let Some(mut h) = self.remove(0) {
            self.flushed(Flush::BatchEnd);
            if self.check_head(&mut h) {
                return Some(Train(TrainOf::Held(h)));
            }
        }
        None
    }

    fn flushed(&mut self, why: Flush) {
        self.c().flushes[why as usize] += 1;
    }

    /// No train is held.
    pub fn is_empty(&self) -> bool {
        self.n == 0
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

    /// Ends the held train of the flow `s` belongs to (if any) and returns it for TCP, so
    /// that a segment GRO does not merge is delivered after the data before it.
    pub fn flush_flow(&mut self, s: &Seg<'_>) -> Option<Train<'b>> {
        if self.n == 0 {
            return None;
        }
        let h = self.position(s).and_then(|i| self.remove(i))?;
        self.deliver(h, Flush::Control)
    }

    /// Takes one mergeable data segment (ACK/PSH only, payload non-empty, plain IPv4 or IPv6
    /// without extension headers). Returns the trains it finished, in the order TCP must get
    /// them: the flow's held train it did not fit (or an evicted one), then its own train if
    /// it ended it.
    pub fn receive(&mut self, s: &Seg<'b>) -> Finished<'b> {
        self.c();
        let mut out = Finished([None, None]);
        let found = if self.n == 0 { None } else { self.position(s) };
        if let Some(i) = found {
            match self.held[i].as_ref().and_then(|h| may_join(h, s)) {
                None => {
                    // Only a train that ends is moved into `out`: a train is over a
                    // kilobyte, and moving an empty option of one per merged segment cost
                    // TCP_STREAM at MTU 1500 a tenth of its throughput.
                    if let Some(why) = self.merge(i, s) {
                        if let Some(h) = self.remove(i) {
                            out.0[0] = self.deliver(h, why);
                        }
                    }
                    return out;
                }
                Some(why) => {
                    if let Some(h) = self.remove(i) {
                        out.0[0] = self.deliver(h, why);
                    }
                }
            }
        } else if self.n >= MAX_FLOWS {
            if let Some(h) = self.remove(0) {
                out.0[0] = self.deliver(h, Flush::Evict);
            }
        }
        // A new train. One that must end at once (PSH) is delivered straight from the frame.
        if s.repr.flags.psh() {
            self.flushed(Flush::Psh);
            let mut csum = s.csum;
            let (src, dst) = (s.ip.src, s.ip.dst);
            match check(self.c(), src, dst, s.bytes, s.hdr_len, &mut csum) {
                Checked::Bad => {}
                c => {
                    out.0[1] = Some(Train(TrainOf::One {
                        ip: s.ip,
                        repr: s.repr,
                        part: [s.payload()],
                        pending: [c.open()],
                        at: [s.at],
                    }))
                }
            }
            return out;
        }
        self.push(start(s));
        out
    }

    /// Appends `s` to train `i` once it (and the head) passed the check; why the train ends
    /// now, if it does (the caller delivers it).
    fn merge(&mut self, i: usize, s: &Seg<'b>) -> Option<Flush> {
        let c = self.counters.get_or_insert_with(GroCounters::default);
        let h = self.held[i].as_mut()?;
        if !check_head(c, h) {
            // The head was corrupt: it is dropped (counted) and `s` starts the train.
            *h = start(s);
            return None;
        }
        let mut csum = s.csum;
        let open = match check(c, s.ip.src, s.ip.dst, s.bytes, s.hdr_len, &mut csum) {
            Checked::Bad => return None,
            c => c.open(),
        };
        let plen = s.payload().len();
        h.parts[usize::from(h.segs)] = s.payload();
        h.pending[usize::from(h.segs)] = open;
        h.at[usize::from(h.segs)] = s.at;
        h.len += plen;
        h.segs += 1;
        h.next_seq = h.next_seq.wrapping_add(plen as u32);
        c.merges += 1;
        // The merged segment carries the last segment's PSH (Linux: flags of the last skb).
        if s.repr.flags.psh() {
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
        }
    }

    /// Finishes one train and counts why; `None` if its head fails its check.
    fn deliver(&mut self, mut h: Held<'b>, why: Flush) -> Option<Train<'b>> {
        self.flushed(why);
        self.check_head(&mut h).then_some(Train(TrainOf::Held(h)))
    }

    fn check_head(&mut self, h: &mut Held<'_>) -> bool {
        check_head(self.c(), h)
    }
}

/// Checks the head of a train once (see the module doc); false if it is corrupt.
fn check_head(c: &mut GroCounters, h: &mut Held<'_>) -> bool {
    if h.head_checked {
        return true;
    }
    match check(c, h.ip.src, h.ip.dst, h.head, h.hdr_len, &mut h.head_csum) {
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
    let mut at = [FramePos::default(); MAX_SEGS as usize];
    at[0] = s.at;
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
        at,
    }
}

/// `None` if `s` may join `h`, else why the train ends before it.
fn may_join(h: &Held<'_>, s: &Seg<'_>) -> Option<Flush> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tcp::{PseudoHeader, TcpOptions, Timestamps};
    use crate::wire::Ipv6Addr;

    /// What GRO handed on, taken as the interface takes it: after each call, and what is
    /// held when the batch ends.
    #[derive(Default)]
    struct Rec {
        delivered: Vec<(IpKey, u32, Vec<u8>, bool)>,
        /// Per delivered slice: its payload and the checksum left open.
        opened: Vec<(Vec<u8>, Option<u16>)>,
    }

    impl Rec {
        fn push(&mut self, t: &Train<'_>) {
            let r = t.repr();
            self.delivered
                .push((*t.ip(), r.seq, t.parts().concat(), r.flags.psh()));
            for (p, o) in t.parts().iter().zip(t.pending()) {
                self.opened.push((p.to_vec(), *o));
            }
        }
        fn receive<'b>(&mut self, gro: &mut Gro<'b>, s: &Seg<'b>) {
            for t in gro.receive(s) {
                self.push(&t);
            }
        }
        fn end(&mut self, gro: &mut Gro<'_>) {
            while let Some(t) = gro.take_held() {
                self.push(&t);
            }
        }
    }

    /// The flush counters `whys` add up to.
    fn flushes(whys: &[Flush]) -> [u64; Flush::ALL.len()] {
        let mut f = [0; Flush::ALL.len()];
        for w in whys {
            f[*w as usize] += 1;
        }
        f
    }

    fn v6(last: u16) -> IpAddr {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last))
    }

    fn key6() -> IpKey {
        IpKey {
            src: v6(2),
            dst: v6(1),
            ttl: 64,
            tos: 0,
            df: false,
            flow_label: 0xabcde,
        }
    }

    /// A TCP segment (header with timestamps, checksum over `ip`'s pseudo-header).
    fn seg(ip: &IpKey, seq: u32, len: usize, psh: bool) -> Vec<u8> {
        let repr = TcpRepr {
            src_port: 5000,
            dst_port: 80,
            seq,
            ack: 1,
            flags: TcpFlags(TcpFlags::ACK | if psh { TcpFlags::PSH } else { 0 }),
            window: 1000,
            urgent: 0,
            options: TcpOptions {
                timestamps: Some(Timestamps { tsval: 7, tsecr: 3 }),
                ..TcpOptions::default()
            },
        };
        let payload: Vec<u8> = (0..len).map(|i| (seq as usize + i) as u8).collect();
        let mut b = vec![0u8; repr.header_len() + len];
        repr.emit_with_checksum(&mut b, &payload, &PseudoHeader::new(ip.src, ip.dst))
            .unwrap();
        b
    }

    fn as_seg<'b>(ip: IpKey, bytes: &'b [u8]) -> Seg<'b> {
        let p = TcpPacket::new_checked(bytes).unwrap();
        let repr = TcpRepr::parse(&p, &PseudoHeader::new(ip.src, ip.dst), false).unwrap();
        Seg {
            ip,
            repr,
            bytes,
            hdr_len: p.header_len(),
            csum: Csum::Unverified,
            at: FramePos::default(),
        }
    }

    #[test]
    fn ipv6_segments_of_one_flow_merge_and_keep_order() {
        let k = key6();
        let frames: Vec<Vec<u8>> = (0..4)
            .map(|i| seg(&k, 1000 + 1200 * i, 1200, i == 3))
            .collect();
        let segs: Vec<Seg<'_>> = frames.iter().map(|f| as_seg(k, f)).collect();
        let mut rec = Rec::default();
        let mut gro = Gro::new();
        for s in &segs {
            rec.receive(&mut gro, s);
        }
        rec.end(&mut gro);
        assert_eq!(gro.counters().unwrap().merges, 3);
        assert_eq!(gro.counters().unwrap().flushes, flushes(&[Flush::Psh]));
        assert_eq!(rec.delivered.len(), 1);
        let (ip, seq, data, psh) = &rec.delivered[0];
        assert_eq!((*ip, *seq, data.len(), *psh), (k, 1000, 4800, true));
        let want: Vec<u8> = (0..4)
            .flat_map(|i| (0..1200).map(move |j| ((1000 + 1200 * i) as usize + j) as u8))
            .collect();
        assert_eq!(*data, want);
        // Every checksum was checked over the IPv6 pseudo-header, once: each segment's sum of
        // pseudo-header and header was left open, and completes to 0xffff with its payload's.
        assert_eq!(rec.opened.len(), 4);
        for (payload, open) in &rec.opened {
            let open = open.expect("left open");
            assert_eq!(add(open, crate::mem::checksum(payload)), 0xffff);
        }
        let hdr = segs[0].hdr_len as u64;
        assert_eq!(gro.counters().unwrap().bytes_checksummed, 4 * hdr);
        assert_eq!(gro.counters().unwrap().bad_checksum, 0);
    }

    #[test]
    fn ipv6_flow_label_hop_limit_and_traffic_class_must_match() {
        // Linux `ipv6_gro_receive` compares the first word (traffic class, flow label) and the
        // hop limit; a difference ends the train.
        let base = key6();
        for other in [
            IpKey {
                flow_label: 1,
                ..base
            },
            IpKey { ttl: 63, ..base },
            IpKey { tos: 0x02, ..base },
        ] {
            let a = seg(&base, 0, 1000, false);
            let b = seg(&other, 1000, 1000, false);
            let mut rec = Rec::default();
            let mut gro = Gro::new();
            let (sa, sb) = (as_seg(base, &a), as_seg(other, &b));
            rec.receive(&mut gro, &sa);
            rec.receive(&mut gro, &sb);
            // The first train ended at the mismatch, before the batch did.
            assert_eq!(rec.delivered.len(), 1);
            rec.end(&mut gro);
            assert_eq!(gro.counters().unwrap().merges, 0, "{other:?}");
            assert_eq!(
                gro.counters().unwrap().flushes,
                flushes(&[Flush::Mismatch, Flush::BatchEnd])
            );
            assert_eq!(rec.delivered.len(), 2);
        }
    }

    #[test]
    fn ipv4_and_ipv6_flows_are_kept_apart() {
        // The same ports, and IPv6 addresses that are the v4-mapped forms of the IPv4 ones:
        // two different flows.
        let k4 = IpKey {
            src: IpAddr::V4(crate::wire::Ipv4Addr::new(198, 18, 0, 2)),
            dst: IpAddr::V4(crate::wire::Ipv4Addr::new(198, 18, 0, 1)),
            ttl: 64,
            tos: 0,
            df: true,
            flow_label: 0,
        };
        let to6 = |a: IpAddr| match a {
            IpAddr::V4(v) => IpAddr::V6(v.to_ipv6_mapped()),
            x => x,
        };
        let k6 = IpKey {
            src: to6(k4.src),
            dst: to6(k4.dst),
            df: false,
            ..k4
        };
        let a = seg(&k4, 0, 1000, false);
        let b = seg(&k6, 1000, 1000, false);
        let c = seg(&k4, 1000, 1000, false);
        let mut rec = Rec::default();
        let mut gro = Gro::new();
        let (sa, sb, sc) = (as_seg(k4, &a), as_seg(k6, &b), as_seg(k4, &c));
        rec.receive(&mut gro, &sa);
        rec.receive(&mut gro, &sb);
        rec.receive(&mut gro, &sc);
        rec.end(&mut gro);
        // The IPv4 flow merged around the IPv6 segment; the IPv6 one stood alone.
        assert_eq!(gro.counters().unwrap().merges, 1);
        let by_len: Vec<(bool, usize)> = rec
            .delivered
            .iter()
            .map(|(ip, _, d, _)| (ip.src.is_ipv6(), d.len()))
            .collect();
        assert!(by_len.contains(&(false, 2000)) && by_len.contains(&(true, 1000)));
    }

    #[test]
    fn ipv6_byte_limit_is_the_payload_length_field() {
        // IPv6's payload length excludes its 40-byte header: a train may hold up to
        // 65535 - TCP header bytes, 20 more than over IPv4.
        let k = key6();
        let f = seg(&k, 0, 100, false);
        let s = as_seg(k, &f);
        let h = start(&s);
        assert_eq!(h.max_len(), 65535 - s.hdr_len);
        let k4 = IpKey {
            src: IpAddr::V4(crate::wire::Ipv4Addr::new(198, 18, 0, 2)),
            dst: IpAddr::V4(crate::wire::Ipv4Addr::new(198, 18, 0, 1)),
            ..k
        };
        let f4 = seg(&k4, 0, 100, false);
        let s4 = as_seg(k4, &f4);
        assert_eq!(start(&s4).max_len(), 65535 - 20 - s4.hdr_len);
    }
}
