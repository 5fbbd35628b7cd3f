//! The glue between the interface and the TCP engine ([`crate::tcp`]): the one entry of
//! received segments into TCP (through GRO when it is on), the one TCP checksum check, and
//! the send half that turns the engine's segments into packets with the one segmenter of
//! [`crate::offload::gso`].
//!
//! Both families: a received segment comes with an [`IpMeta`] (from the IPv4 header here,
//! from the IPv6 one in the IPv6 layer), its checksum is checked against the family's
//! pseudo-header (RFC 9293 §3.1, RFC 8200 §8.1); an outgoing segment goes to IPv4 exactly as
//! before the generalisation (header templates, ARP) or, when its addresses are IPv6, the
//! same way over IPv6 (`emit_tcp_v6`: a template of the Ethernet and IPv6 headers when NDP
//! has the next hop, whole super-segments to a TSO device, else cut to the IPv6 path MTU,
//! MTU - 60 per packet, and handed piece by piece to the IPv6 layer's `send_ipv6`).

use super::counters::{bucket, Counters};
use super::ip::{IpMeta, Payload};
use super::state::{DropReason, Emit, FullQueue, IfaceState};
use super::Inner;
use crate::buf::{Csum, FramePos};
use crate::offload::gro::{
    check, mergeable_flags, verify, Checked, CsumCount, Gro, GroCounters, IpKey, Seg, Train,
};
use crate::offload::gso::{self, IpTemplate, Super, TcpTemplate};
use crate::tcp::{OutSegment, RxSegment, TcpLayer};
use crate::time::Instant;
use crate::wire::checksum::{add, finish, pseudo_header_ip};
use crate::wire::ethernet::VLAN_HEADER_LEN;
use crate::wire::ipv4::{Ecn, Ipv4Repr, HEADER_LEN as IP_LEN};
use crate::wire::ipv6::{Ipv6Repr, HEADER_LEN as IPV6_LEN};
use crate::wire::tcp::{PseudoHeader, TcpPacket, TcpRepr, MAX_HEADER_LEN};
use crate::wire::{IpAddr, IpProtocol, Ipv4Addr, Ipv6Addr};

impl CsumCount for Counters {
    #[inline(always)]
    fn summed_separately(&mut self, n: usize, payload: usize) {
        self.bytes_checksummed += n as u64;
        self.bytes_checksummed_separately += n as u64;
        self.tcp_rx_csum_separate += payload as u64;
    }
    #[inline(always)]
    fn bad_checksum(&mut self) {
        self.tcp_bad_checksum += 1;
    }
}

impl Counters {
    /// Adds what GRO counted in one receive batch.
    fn add_gro(&mut self, g: &GroCounters) {
        let [batch_end, mismatch, psh, short, bytes, count, evict, control] = g.flushes;
        self.gro_flush_batch_end += batch_end;
        self.gro_flush_mismatch += mismatch;
        self.gro_flush_psh += psh;
        self.gro_flush_short += short;
        self.gro_flush_bytes += bytes;
        self.gro_flush_count += count;
        self.gro_flush_evict += evict;
        self.gro_flush_control += control;
        self.gro_merges += g.merges;
        self.summed_separately(g.bytes_checksummed as usize, g.payload_checksummed as usize);
        self.tcp_bad_checksum += g.bad_checksum;
    }
}

/// The one place received segments enter TCP: a segment alone, or a GRO train as its payload
/// slices in order, each with the checksum [`check`] left open (TCP verifies those in its
/// copy and reports back, counted here), with the IP header's ECN field (RFC 3168).
fn enter_tcp(
    tcp: &mut TcpLayer,
    c: &mut Counters,
    now: Instant,
    (src, dst, repr): (IpAddr, IpAddr, &TcpRepr),
    (parts, pending, at): (&[&[u8]], &[Option<u16>], &[FramePos]),
    ecn: Ecn,
) {
    let seg = RxSegment {
        src,
        dst,
        repr,
        parts,
        pending,
        at,
        ecn,
    };
    let r = tcp.input(now, seg);
    c.tcp_bad_checksum += u64::from(r.bad);
    c.bytes_checksummed += r.fused + r.separate;
    c.bytes_checksummed_separately += r.separate;
    c.tcp_rx_csum_separate += r.separate;
}

impl Inner {
    /// Where the payload of the TCP segment `seg` (header `hdr_len` bytes) lies in the
    /// receive batch, if it lies in the frame being parsed (not so a reassembled one).
    #[inline]
    fn frame_pos(&self, seg: &[u8], hdr_len: usize) -> Option<FramePos> {
        let (frame, start, end) = self.rx_frame;
        let a = seg.as_ptr() as usize;
        if a < start || a + seg.len() > end {
            return None;
        }
        Some(FramePos {
            frame,
            offset: u32::try_from(a - start + hdr_len).ok()?,
        })
    }

    /// One finished GRO train into TCP.
    fn enter_train(&mut self, now: Instant, t: &Train<'_>) {
        let c = &mut self.st.c;
        c.gro_flushes += 1;
        c.gro_segs_per_flush[bucket(t.parts().len())] += 1;
        let ip = t.ip();
        let ecn = Ecn::from_tos(ip.tos);
        let seg = (ip.src, ip.dst, t.repr());
        // A lent batch's frames go back to the device after it: no position to keep them by.
        let at = if self.lent { &[][..] } else { t.at() };
        let data = (t.parts(), t.pending(), at);
        enter_tcp(&mut self.tcp, c, now, seg, data, ecn);
    }

    /// The one entry of received segments into TCP, for both families. With GRO on,
    /// mergeable data segments straight from a frame of the batch go to the GRO table;
    /// anything else first flushes its flow's held train (so TCP sees the flow's segments in
    /// arrival order), then is verified and delivered alone.
    ///
    /// `ip` describes the IP header ([`IpMeta::from_v4`], [`IpMeta::from_v6`]); `payload` is
    /// the TCP segment (after any IPv6 extension headers; [`Payload::Batch`] only when it
    /// follows an option-less IPv4 header or an extension-free IPv6 header, the packets GRO
    /// may merge); `bcast`: the destination was a broadcast (IPv4) or multicast address.
    pub(super) fn receive_tcp<'b>(
        &mut self,
        now: Instant,
        ip: &IpMeta,
        payload: Payload<'b, '_>,
        bcast: bool,
        mut csum: Csum,
        gro: &mut Gro<'b>,
    ) {
        // RFC 9293 §3.9.1 (and RFC 1122 §4.2.3.10): TCP is unicast only.
        if bcast {
            if ip.dst.is_ipv4() {
                self.st.c.ipv4_not_for_us += 1;
            } else {
                self.st.c.ipv6_tcp_not_unicast += 1;
            }
            return;
        }
        let bytes = payload.bytes();
        let c = &mut self.st.c;
        let Ok(pkt) = TcpPacket::new_checked(bytes) else {
            c.tcp_malformed += 1;
            return;
        };
        let hdr_len = pkt.header_len();
        // Without GRO the segment is checked before the header is parsed (a data segment's
        // sum left open for TCP's copy, see `check`); with GRO it is checked lazily below.
        // A batch of one frame has nothing to merge: the segment is checked and delivered at
        // once, as GRO would after its checks (request/response traffic: every poll brings
        // one frame; GRO's bookkeeping was ~250 instructions of each segment's ~2,200).
        let gro_on = self.config.gro && !self.single_frame;
        let mut open = None;
        if !gro_on {
            match check(c, ip.src, ip.dst, bytes, hdr_len, &mut csum) {
                Checked::Bad => return,
                ch => open = ch.open(),
            }
        }
        let ph = PseudoHeader {
            src: ip.src,
            dst: ip.dst,
        };
        let Ok(repr) = TcpRepr::parse(&pkt, &ph, false) else {
            // A segment both corrupt and malformed counts as corrupt: the sum left open is
            // completed here, where no copy will.
            if open.is_some() && !verify(c, ip.src, ip.dst, bytes, &mut csum) {
                return;
            }
            c.tcp_malformed += 1;
            return;
        };
        let key = IpKey {
            src: ip.src,
            dst: ip.dst,
            ttl: ip.hop_limit,
            tos: ip.tos,
            df: ip.df,
            flow_label: ip.flow_label,
        };
        if gro_on {
            if let Payload::Batch(b) = payload {
                let s = Seg {
                    ip: key,
                    repr,
                    bytes: b,
                    hdr_len,
                    csum,
                    at: self.frame_pos(b, hdr_len).unwrap_or_default(),
                };
                if mergeable_flags(repr.flags) && b.len() > hdr_len {
                    for t in gro.receive(&s) {
                        self.enter_train(now, &t);
                    }
                    return;
                }
                if let Some(t) = gro.flush_flow(&s) {
                    self.enter_train(now, &t);
                }
            } else {
                let s = Seg {
                    ip: key,
                    repr,
                    bytes: &[],
                    hdr_len: 0,
                    csum,
                    at: FramePos::default(),
                };
                if let Some(t) = gro.flush_flow(&s) {
                    self.enter_train(now, &t);
                }
            }
            match check(&mut self.st.c, ip.src, ip.dst, bytes, hdr_len, &mut csum) {
                Checked::Bad => return,
                ch => open = ch.open(),
            }
        }
        let data = bytes.get(hdr_len..).unwrap_or(&[]);
        let at = self.frame_pos(bytes, hdr_len);
        let seg = (ip.src, ip.dst, &repr);
        let c = &mut self.st.c;
        let data = (&[data][..], &[open][..], at.as_slice());
        enter_tcp(&mut self.tcp, c, now, seg, data, ip.ecn());
    }

    /// Hands every train GRO still holds to TCP and adds what GRO counted (end of the
    /// receive batch).
    pub(super) fn flush_gro(&mut self, now: Instant, gro: &mut Gro<'_>) {
        // Most polls give GRO nothing (an empty batch, or a batch of one frame, which
        // bypasses it): no call, nothing to add.
        if gro.counters().is_none() {
            return;
        }
        while let Some(t) = gro.take_held() {
            self.enter_train(now, &t);
        }
        if let Some(g) = gro.counters() {
            self.st.c.add_gro(g);
        }
    }

    /// TCP's output into the transmit queue; true if it stopped at the transmit bound.
    pub(super) fn tcp_output(&mut self, now: Instant) -> bool {
        // A poll with no connection to serve and no timer due (half the polls of a
        // request/response exchange) skips the output pass and its callback.
        if self.tcp.output_idle(now) {
            return false;
        }
        let mut stopped = false;
        let Inner { tcp, st, .. } = self;
        tcp.output(now, &mut |seg| match st.emit_tcp(now, seg) {
            Emit::Sent => true,
            // Nothing was queued: the engine offers the segment again (tcp/mod.rs: "nothing
            // is lost").
            Emit::QueueFull(FullQueue::Transmit) => {
                stopped = true;
                false
            }
            // The next hop's queue of frames awaiting ARP is full: dropped and counted
            // (`arp_pending_overflow`), as Linux drops past `unres_qlen`, and recovered by
            // retransmission. Offering it again would stop the whole output loop — every
            // other connection and every queued RST/SYN-ACK behind one unresolvable
            // neighbour (a SYN flood from spoofed on-link sources did exactly that).
            Emit::QueueFull(FullQueue::Neighbor) => true,
            // A segment whose header cannot be built (the engine never plans one; counted in
            // `tcp_malformed`) is dropped, not offered again: retrying it would stall every
            // connection's output behind it.
            Emit::Dropped(DropReason::Malformed) => true,
            Emit::Dropped(DropReason::NoRoute | DropReason::TooBig) => true,
        });
        stopped
    }
}

/// The TCP header every piece of `seg` copies (built once from the engine; each piece sets its
/// own sequence number, flags and checksum, as Linux `tcp_gso_segment` does to the headers of
/// the skb it splits) and the super-segment to cut. `None` for a header that is not one.
#[inline(always)]
fn segment_head<'a>(seg: &OutSegment<'a>) -> Option<(TcpTemplate, Super<'a>)> {
    let mut th = [0u8; MAX_HEADER_LEN];
    let h = th.get_mut(..seg.repr.header_len())?;
    seg.repr.emit(&mut TcpPacket::new_unchecked(&mut *h));
    let tcp = TcpTemplate::new(h)?;
    let sup = Super {
        src: seg.src,
        dst: seg.dst,
        seq: seg.repr.seq,
        flags: seg.repr.flags,
        payload: seg.payload,
    };
    Some((tcp, sup))
}

/// TCP payload per piece of a `total`-byte segment, 0 when it goes whole. Pieces carry at most
/// the engine's `gso_size` (the effective send MSS, RFC 9293 §3.7.1) and fit `mtu_max`; with
/// `tso` the device cuts, so the piece is a whole IP packet's worth beside `headers` (IP + TCP
/// header bytes). A SYN is never cut (its options say what the segments after it may carry).
#[inline(always)]
fn piece_size(
    total: usize,
    headers: usize,
    tso: bool,
    mtu_max: usize,
    gso_size: usize,
    syn: bool,
) -> usize {
    let max = if tso {
        gso::MAX_IP_PACKET - headers
    } else {
        mtu_max.min(if gso_size == 0 { mtu_max } else { gso_size })
    };
    if total <= max || syn || max == 0 {
        0
    } else {
        max
    }
}

impl IfaceState {
    /// Turns one segment from the TCP engine into packets on the transmit queue.
    ///
    /// Software GSO: a segment whose payload exceeds what one MTU-sized packet carries is cut
    /// by the one segmenter ([`crate::offload::gso`]) into MTU-sized packets, each with its own
    /// sequence number and checksums; a TSO device gets it whole (up to 64 KiB). IPv6
    /// segments go to [`IfaceState::emit_tcp_v6`].
    #[inline]
    pub(super) fn emit_tcp(&mut self, now: Instant, seg: &OutSegment<'_>) -> Emit {
        if self.tx_full() {
            return Emit::QueueFull(FullQueue::Transmit);
        }
        // An if-let, not a three-armed match: the IPv4 path is one compare and a branch, no
        // jump table (measured: the match cost an indirect branch per segment).
        if let (IpAddr::V4(s), IpAddr::V4(d)) = (seg.src, seg.dst) {
            return self.emit_tcp_v4(now, seg, s, d);
        }
        self.emit_tcp_other(now, seg)
    }

    /// `emit_tcp` for what is not IPv4: IPv6, or a mixed pair (a bug: the engine keeps each
    /// connection in one family), dropped and counted.
    #[inline(never)]
    fn emit_tcp_other(&mut self, now: Instant, seg: &OutSegment<'_>) -> Emit {
        match (seg.src, seg.dst) {
            (IpAddr::V6(s), IpAddr::V6(d)) => self.emit_tcp_v6(now, seg, s, d),
            _ => {
                self.c.tcp_malformed += 1;
                Emit::Dropped(DropReason::Malformed)
            }
        }
    }

    /// `emit_tcp` for an IPv4 segment: what `emit_tcp` was before IPv6 (kept inlined, the
    /// per-segment cost of the IPv4 path did not change).
    #[inline(always)]
    fn emit_tcp_v4(
        &mut self,
        now: Instant,
        seg: &OutSegment<'_>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Emit {
        let (hlen, total) = (seg.repr.header_len(), seg.payload.len());
        // Pieces carry at most the engine's `gso_size` (the effective send MSS, RFC 9293
        // §3.7.1) and fit the MTU; a TSO device cuts at its MTU, so it only gets super-segments
        // whose size the MTU already bounds.
        let mtu_max = self.mtu.saturating_sub(IP_LEN + hlen);
        let gso_size = usize::from(seg.gso_size);
        let tso = self.tso && gso_size >= mtu_max;
        let mss = piece_size(
            total,
            IP_LEN + hlen,
            tso,
            mtu_max,
            gso_size,
            seg.repr.flags.syn(),
        );
        if mss == 0 && !(self.sg && !self.csum_tx && total > 0) {
            if let Some(sent) = self.emit_whole_v4(now, seg, src, dst, hlen) {
                return sent;
            }
        }
        self.emit_v4_templated(now, seg, src, dst, mss)
    }

    /// The general IPv4 path: header templates, then the segment cut into pieces of `mss`
    /// payload bytes (whole when 0), each built by `gso::build` (or `build_sg`).
    #[inline(always)]
    fn emit_v4_templated(
        &mut self,
        now: Instant,
        seg: &OutSegment<'_>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        mss: usize,
    ) -> Emit {
        let Some((tcp, sup)) = segment_head(seg) else {
            self.c.tcp_malformed += 1;
            return Emit::Dropped(DropReason::Malformed);
        };
        let total = sup.len();
        let ip = self.tcp_ip_template(now, src, dst, seg.ecn, seg.dscp);
        self.emit_pieces(&sup, total, mss, |st, p| {
            st.emit_piece(now, ip.as_ref(), &tcp, &sup, p, seg.ecn, seg.dscp)
        })
    }

    /// The IPv4 header of a TCP packet (the one-packet path's, or the template's with ident
    /// and length zero).
    #[inline(always)]
    fn tcp_ipv4_header(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ecn: Ecn,
        dscp: u8,
        ident: u16,
        payload_len: usize,
    ) -> Ipv4Repr {
        let mut ip = Ipv4Repr {
            src,
            dst,
            protocol: IpProtocol::Tcp,
            payload_len,
            // RFC 1122 §3.2.1.7: a host must not send TTL 0.
            ttl: self.ttl.max(1),
            // IP_TOS's DSCP; the ECN bits are ECN's (`set_ecn` below).
            dscp_ecn: dscp & !0b11,
            ident,
            // We never fragment on transmit; DF lets path MTU discovery (RFC 1191) work.
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        ip.set_ecn(ecn);
        ip
    }

    /// Counts `len` payload bytes copied into a frame with their sum folded in (the
    /// baseline's "fused" copy is a copy and then a checksum pass).
    #[inline(always)]
    fn count_payload_copy(&mut self, len: usize) {
        if len == 0 {
            return;
        }
        let n = len as u64;
        self.c.copies += 1;
        self.c.bytes_copied += n;
        self.c.bytes_checksummed += n;
        self.c.tcp_tx_copy_frame += n;
        if self.copy == crate::mem::CopyMode::Baseline {
            self.c.bytes_checksummed_separately += n;
            self.c.tcp_tx_csum_separate += n;
        }
    }

    /// A segment that goes out as one packet to a resolved next hop, written straight into
    /// its frame: link header, IPv4 header, the TCP header emitted in place, the payload
    /// copied with its sum folded in, the checksums completed from that sum. The general path
    /// (`segment_head`, the templates, `gso::build`) builds the same bytes through two header
    /// templates made for cutting super-segments, which a single packet does not need: for
    /// request/response traffic (every segment one packet) that was ~600 of the ~1300
    /// instructions a segment took from the engine to the transmit queue (callgrind,
    /// `netfold rr`). `None`, having queued nothing, sends the segment the general way (next
    /// hop unresolved or broadcast, too big: the general path parks, drops and counts).
    /// Zero-copy frames to a scatter-gather device take the general path (`build_sg`).
    #[inline(always)]
    fn emit_whole_v4(
        &mut self,
        now: Instant,
        seg: &OutSegment<'_>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        hlen: usize,
    ) -> Option<Emit> {
        let len = seg.payload.len();
        let ip_total = IP_LEN + hlen + len;
        if ip_total > gso::MAX_IP_PACKET || (ip_total > self.mtu && !self.tso) {
            return None;
        }
        let mut link = [0u8; VLAN_HEADER_LEN];
        let l3 = self.resolved_link_header(now, IpAddr::V4(dst), &mut link)?;
        self.ident = self.ident.wrapping_add(1);
        let ip = self.tcp_ipv4_header(src, dst, seg.ecn, seg.dscp, self.ident, hlen + len);
        let mut buf = self.pool.get();
        let frame = buf.append(l3 + ip_total);
        let (lh, rest) = frame.split_at_mut(l3);
        lh.copy_from_slice(&link[..l3]);
        let (iph, rest) = rest.split_at_mut(IP_LEN);
        // Cannot fail: the header slice is 20 bytes and the total length fits 16 bits.
        let _ = ip.emit(iph, self.csum_tx);
        let (th, payload) = rest.split_at_mut(hlen);
        // The usual header (timestamps only) comes with its sum, computed as it is written.
        let header_sum = seg.repr.emit_summed(th);
        let payload_sum = gso::copy_range_with_checksum(payload, seg.payload, 0, len, self.copy);
        if self.csum_tx {
            // RFC 9293 §3.1: pseudo-header, header and data; the header is a multiple of 4
            // bytes, so the payload's sum adds in directly. Without `csum_tx` the device
            // completes both checksums (left zero, as the general path leaves them).
            let ph = pseudo_header_ip(
                IpAddr::V4(src),
                IpAddr::V4(dst),
                IpProtocol::Tcp,
                (hlen + len) as u32,
            );
            let header_sum = header_sum.unwrap_or_else(|| crate::mem::checksum(th));
            let sum = add(add(ph, header_sum), payload_sum);
            TcpPacket::new_unchecked(&mut *th).set_checksum(finish(sum));
        }
        self.count_payload_copy(len);
        self.c.ipv4_out += 1;
        self.push(buf);
        Some(Emit::Sent)
    }

    /// Cuts one super-segment into the pieces `mss` gives (one piece when 0) and hands each to
    /// `emit`, the family's piece builder. The whole segment goes into one transmit queue or
    /// none (unless it could never fit); once one piece is out the segment counts as sent: a
    /// later piece refused (counted) is a loss TCP recovers like any other, not a reason to
    /// send the first again.
    #[inline(always)]
    fn emit_pieces(
        &mut self,
        sup: &Super<'_>,
        total: usize,
        mss: usize,
        mut emit: impl FnMut(&mut Self, &gso::Piece) -> Emit,
    ) -> Emit {
        let pieces = gso::piece_count(total, mss);
        if pieces > 1 && self.tx.len() + pieces > self.tx_limit && !self.tx.is_empty() {
            return Emit::QueueFull(FullQueue::Transmit);
        }
        let mut first_refusal = None;
        let mut sent_any = false;
        for p in gso::pieces(sup.seq, sup.flags, total, mss) {
            if pieces > 1 {
                self.c.gso_segments += 1;
            }
            match emit(self, &p) {
                Emit::Sent => sent_any = true,
                refused => {
                    first_refusal.get_or_insert(refused);
                }
            }
        }
        match first_refusal {
            Some(refused) if !sent_any => refused,
            _ => Emit::Sent,
        }
    }

    /// Link and IPv4 headers shared by every packet of one TCP segment to a resolved unicast
    /// next hop. `None` sends the packets the general way (`send_ip`: ARP parking, broadcast,
    /// errors).
    fn tcp_ip_template(
        &mut self,
        now: Instant,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ecn: Ecn,
        dscp: u8,
    ) -> Option<IpTemplate> {
        let mut t = [0u8; VLAN_HEADER_LEN + IP_LEN];
        let l3 = self.resolved_link_header(now, IpAddr::V4(dst), &mut t)?;
        let ip = self.tcp_ipv4_header(src, dst, ecn, dscp, 0, 0);
        ip.emit(&mut t[l3..l3 + IP_LEN], false).ok()?;
        IpTemplate::ipv4(&t[..l3 + IP_LEN], l3)
    }

    /// One packet of a segment, IPv4 or IPv6 (the family of `sup`'s addresses); its link and
    /// IP headers come from `ip` when given (see `tcp_ip_template`, `tcp_ip6_template`), else
    /// from the family's IP layer (`send_ip` / `send_ipv6`: parking, no route, errors).
    /// IPv4 pieces get an identification each; IPv6 has none (RFC 8200 §3).
    #[allow(clippy::too_many_arguments)]
    fn emit_piece(
        &mut self,
        now: Instant,
        ip: Option<&IpTemplate>,
        tcp: &TcpTemplate,
        sup: &Super<'_>,
        p: &gso::Piece,
        ecn: Ecn,
        dscp: u8,
    ) -> Emit {
        let v6 = sup.dst.is_ipv6();
        let mut buf = self.pool.get();
        // The checks `send_ip` / `send_ipv6` make: queue room, size (pieces are cut to the
        // (path) MTU, or to 64 KiB for a TSO device).
        let total = if v6 { IPV6_LEN } else { IP_LEN } + tcp.len() + p.len;
        let direct = ip.filter(|_| {
            !(self.tx_full()
                || total > gso::MAX_IP_PACKET
                || (!self.tso && total > if v6 { self.ipv6_link_mtu() } else { self.mtu }))
        });
        let ident = match direct {
            Some(_) if !v6 => {
                self.ident = self.ident.wrapping_add(1);
                self.ident
            }
            _ => 0,
        };
        if let Some(t) = direct.filter(|_| self.sg && !self.csum_tx && p.len > 0) {
            let sg = gso::SgFrame {
                frame: self.tx.len(),
                frags: &mut self.tx_frags,
                max_frags: gso::MAX_FRAGS,
            };
            if gso::build_sg(&mut buf, sg, (t, ident), tcp, sup, p) {
                // Zero-copy send on a scatter-gather device that completes checksums: the
                // frame refers to the application's buffers and netfold reads no payload byte
                // (nothing is added to `bytes_copied` or `bytes_checksummed`).
                self.c.zc_frames += 1;
                self.c.zc_bytes += p.len as u64;
                self.count_ip_out(v6);
                self.c.bytes_out += p.len as u64;
                self.push(buf);
                return Emit::Sent;
            }
        }
        gso::build(
            &mut buf,
            direct.map(|t| (t, ident)),
            tcp,
            sup,
            p,
            self.copy,
            self.csum_tx,
        );
        self.count_payload_copy(p.len);
        if direct.is_none() {
            return match (sup.src, sup.dst) {
                (IpAddr::V4(src), IpAddr::V4(dst)) => self
                    .send_ip_ecn(now, IpProtocol::Tcp, src, dst, buf, ecn, dscp)
                    .into(),
                (IpAddr::V6(src), IpAddr::V6(dst)) => self
                    .send_ipv6_dscp(now, IpProtocol::Tcp, src, dst, buf, ecn, dscp)
                    .into(),
                _ => {
                    // `emit_tcp` sends each segment in one family.
                    self.pool.put(buf);
                    self.c.tcp_malformed += 1;
                    Emit::Dropped(DropReason::Malformed)
                }
            };
        }
        self.count_ip_out(v6);
        self.push(buf);
        Emit::Sent
    }

    /// Counts one IP packet out of the family's counter.
    #[inline(always)]
    fn count_ip_out(&mut self, v6: bool) {
        if v6 {
            self.c.ipv6_out += 1;
        } else {
            self.c.ipv4_out += 1;
        }
    }

    /// `emit_tcp` for an IPv6 segment, the IPv4 path's counterpart: when the next hop is
    /// resolved (`resolved_link_header`) the link and IPv6 headers are a template
    /// (`tcp_ip6_template`) that every piece copies, with only its payload length set (RFC
    /// 8200 §3: no identification, no header checksum), and a TSO device gets the segment
    /// whole, up to 64 KiB (the device cuts it at `MTU - 40 - header`, `GSO_TCPV6`), if the
    /// path MTU is the link's. Otherwise it is cut by the one segmenter at the IPv6 path MTU
    /// (each packet at most `ipv6_path_mtu - 40` bytes of TCP, RFC 8200 §8.3; the engine's
    /// `gso_size` already bounds the payload by the MSS), and the pieces without a template
    /// go to the IPv6 layer (`send_ipv6`: NDP parking, no route). Each piece's checksum is
    /// over the IPv6 pseudo-header (RFC 8200 §8.1). Kept out of line so that the IPv4 path
    /// costs what it did.
    #[inline(never)]
    fn emit_tcp_v6(
        &mut self,
        now: Instant,
        seg: &OutSegment<'_>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Emit {
        let Some((tcp, sup)) = segment_head(seg) else {
            self.c.tcp_malformed += 1;
            return Emit::Dropped(DropReason::Malformed);
        };
        let (hlen, total) = (tcp.len(), sup.len());
        let path_mtu = self.ipv6_path_mtu(now, dst);
        let mtu_max = path_mtu.saturating_sub(IPV6_LEN + hlen);
        let gso_size = usize::from(seg.gso_size);
        let ip = self.tcp_ip6_template(now, src, dst, seg.ecn, seg.dscp);
        // A TSO device cuts at its own MTU: it gets super-segments only when that is the
        // path MTU (no Packet Too Big lowered it) and the MSS does not cut finer, and only
        // through the template (`send_ipv6` refuses a TCP packet beyond the link MTU).
        let tso = self.tso && ip.is_some() && path_mtu >= self.mtu && gso_size >= mtu_max;
        let mss = piece_size(
            total,
            IPV6_LEN + hlen,
            tso,
            mtu_max,
            gso_size,
            seg.repr.flags.syn(),
        );
        self.emit_pieces(&sup, total, mss, |st, p| {
            st.emit_piece(now, ip.as_ref(), &tcp, &sup, p, seg.ecn, seg.dscp)
        })
    }

    /// Link and IPv6 headers shared by every packet of one TCP segment to a resolved unicast
    /// next hop (`resolved_link_header`); `None` sends the packets the general way
    /// (`send_ipv6`).
    fn tcp_ip6_template(
        &mut self,
        now: Instant,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        ecn: Ecn,
        dscp: u8,
    ) -> Option<IpTemplate> {
        if !self.v6.enabled {
            return None;
        }
        let mut t = [0u8; VLAN_HEADER_LEN + IPV6_LEN];
        let l3 = self.resolved_link_header(now, IpAddr::V6(dst), &mut t)?;
        let mut ip = Ipv6Repr {
            src,
            dst,
            next_header: IpProtocol::Tcp,
            payload_len: 0,
            hop_limit: self.v6.hop_limit,
            // IPV6_TCLASS's DSCP; the ECN bits are ECN's (`set_ecn` below).
            traffic_class: dscp & !0b11,
            // Linux hashes a flow label per connection (RFC 6437); netfold sends 0 (see the
            // deviations index).
            flow_label: 0,
        };
        ip.set_ecn(ecn);
        ip.emit(&mut t[l3..l3 + IPV6_LEN]).ok()?;
        IpTemplate::ipv6(&t[..l3 + IPV6_LEN], l3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;
    use crate::iface::neighbor::NeighborCache;
    use crate::mem::CopyMode;
    use crate::phy::Medium;
    use crate::time::Duration;
    use crate::wire::ethernet::EthernetAddress;
    use crate::wire::ipv4::Ipv4Packet;
    use crate::wire::tcp::{SackBlock, TcpFlags, TcpOptions, Timestamps};
    use crate::wire::{Error, Result};

    // The stack parses and emits TCP headers through `wire::tcp` directly; these helpers give
    // the tests the shapes they were written against (parse from an IP payload; emit a header
    // in front of a payload whose sum is known).
    fn parse(
        seg: &[u8],
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        verify: bool,
    ) -> Result<(TcpRepr, usize)> {
        let packet = TcpPacket::new_checked(seg)?;
        let repr = TcpRepr::parse(&packet, &PseudoHeader::new(src, dst), verify)?;
        Ok((repr, packet.header_len()))
    }
    fn header_len(r: &TcpRepr) -> usize {
        r.header_len()
    }
    fn emit(r: &TcpRepr, b: &mut [u8], csum: Option<(PseudoHeader, usize, u16)>) -> Result<usize> {
        match csum {
            Some((ph, len, sum)) => r.emit_with_payload_sum(b, len, sum, &ph),
            None => {
                let h = r.header_len();
                let hdr = b.get_mut(..h).ok_or(Error::Truncated)?;
                r.emit(&mut TcpPacket::new_unchecked(hdr));
                Ok(h)
            }
        }
    }

    fn egress(tx_limit: usize) -> IfaceState {
        IfaceState {
            medium: Medium::Ip,
            mac: EthernetAddress::default(),
            addr: Ipv4Addr::new(198, 18, 0, 1),
            prefix_len: 24,
            gateway: None,
            mtu: 1500,
            csum_tx: true,
            sg: false,
            csum_rx: true,
            tso: false,
            ttl: 64,
            ident: 0,
            copy: CopyMode::Kernels,
            pool: Pool::new(1518, 16),
            tx: Vec::new(),
            tx_frags: crate::buf::Frags::new(),
            tx_limit,
            neigh: NeighborCache::new(Duration::from_secs(60), 4, Duration::from_secs(1), 3),
            pmtu: crate::iface::pmtu::PathMtuCache::new(),
            c: Counters::default(),
            arp_due: Vec::new(),
            v6: crate::iface::ipv6::Ipv6State::new(
                &[],
                None,
                64,
                Medium::Ip,
                EthernetAddress::default(),
                [0; 16],
                Duration::from_secs(1),
                Duration::from_secs(30),
                0,
                4,
            ),
        }
    }

    /// `emit_tcp` as the engine's callback sees it: true when the segment went out.
    fn emit_tcp(eg: &mut IfaceState, now: Instant, seg: &OutSegment<'_>) -> bool {
        eg.emit_tcp(now, seg) == Emit::Sent
    }

    /// The direct one-packet path (`emit_whole_v4`) writes the same bytes as the templated
    /// path it short-cuts, for every shape a one-packet segment takes: no payload, odd and
    /// even lengths, a payload split across two slices (a wrapped send ring), options
    /// (timestamps, SACK blocks), ECN, checksums by us or left to the device, an IP and an
    /// Ethernet medium.
    #[test]
    fn one_packet_path_matches_the_templated_path() {
        let data: Vec<u8> = (0..1448u32).map(|i| (i * 13 + 5) as u8).collect();
        let peer = Ipv4Addr::new(198, 18, 0, 2);
        let peer_mac = EthernetAddress([2, 0, 0, 0, 0, 2]);
        for ethernet in [false, true] {
            for csum_tx in [true, false] {
                for (len, split) in [(0, 0), (1, 0), (7, 3), (100, 60), (1447, 1000), (1448, 0)] {
                    for opts in 0..3 {
                        let mut options = TcpOptions::default();
                        if opts >= 1 {
                            options.timestamps = Some(Timestamps {
                                tsval: 0x0102_0304,
                                tsecr: 0xfffe_fdfc,
                            });
                        }
                        if opts == 2 {
                            options.sack[0] = SackBlock {
                                left: 10,
                                right: 20,
                            };
                            options.sack_count = 1;
                        }
                        let repr = TcpRepr {
                            src_port: 40000,
                            dst_port: 80,
                            seq: 0xffff_fff0,
                            ack: 77,
                            flags: TcpFlags(TcpFlags::ACK | TcpFlags::PSH),
                            window: 501,
                            options,
                            ..TcpRepr::default()
                        };
                        if 20 + repr.header_len() + len > 1500 {
                            continue; // two packets: not this path's case
                        }
                        let (a, b) = data[..len].split_at(split);
                        let frames = [true, false].map(|direct| {
                            let mut eg = egress(16);
                            eg.csum_tx = csum_tx;
                            eg.ident = 41;
                            if ethernet {
                                eg.medium = Medium::Ethernet;
                                eg.mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
                                eg.neigh.fill(Instant::ZERO, peer, peer_mac);
                            }
                            let seg = OutSegment {
                                src: eg.addr.into(),
                                dst: peer.into(),
                                repr,
                                payload: crate::buf::Gather::slices(a, b),
                                gso_size: 1448,
                                ecn: Ecn::Ect0,
                                dscp: 0,
                            };
                            let sent = if direct {
                                // Called directly: `None` (fallen back) would fail here.
                                let (src, h) = (eg.addr, repr.header_len());
                                eg.emit_whole_v4(Instant::ZERO, &seg, src, peer, h)
                                    .expect("one packet, resolved: the direct path")
                            } else {
                                eg.emit_v4_templated(Instant::ZERO, &seg, eg.addr, peer, 0)
                            };
                            assert_eq!(sent, Emit::Sent);
                            assert_eq!(eg.tx.len(), 1);
                            assert_eq!(eg.c.ipv4_out, 1);
                            assert_eq!(eg.c.bytes_copied, len as u64);
                            eg.tx[0].as_slice().to_vec()
                        });
                        assert_eq!(
                            frames[0], frames[1],
                            "ethernet {ethernet} csum_tx {csum_tx} len {len} opts {opts}"
                        );
                        if csum_tx {
                            let l3 = if ethernet { 14 } else { 0 };
                            let ip = Ipv4Packet::new_checked(&frames[0][l3..]).unwrap();
                            assert!(ip.verify_checksum());
                            let (t, hl) =
                                parse(ip.payload(), Ipv4Addr::new(198, 18, 0, 1), peer, true)
                                    .unwrap();
                            assert_eq!(t.seq, repr.seq);
                            assert_eq!(&ip.payload()[hl..], &data[..len]);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn gso_splits_at_mtu_with_flags_seq_and_checksums() {
        let mut eg = egress(16);
        let data: Vec<u8> = (0..3001u32).map(|i| (i * 7) as u8).collect();
        let (a, b) = data.split_at(1001);
        let repr = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq: u32::MAX - 10,
            ack: 5,
            flags: TcpFlags(TcpFlags::ACK | TcpFlags::PSH | TcpFlags::FIN | TcpFlags::CWR),
            window: 100,
            ..TcpRepr::default()
        };
        let seg = OutSegment {
            src: eg.addr.into(),
            dst: Ipv4Addr::new(198, 18, 0, 2).into(),
            repr,
            payload: crate::buf::Gather::slices(a, b),
            gso_size: 1460,
            ecn: Ecn::NotEct,
            dscp: 0,
        };
        assert!(emit_tcp(&mut eg, Instant::ZERO, &seg));
        assert_eq!(eg.tx.len(), 3);
        let mut joined = Vec::new();
        for (i, f) in eg.tx.iter().enumerate() {
            assert!(f.len() <= 1500);
            let ip = Ipv4Packet::new_checked(f.as_slice()).unwrap();
            assert!(ip.verify_checksum());
            let (t, hl) = parse(ip.payload(), seg.src, seg.dst, true).unwrap();
            assert_eq!(t.seq, repr.seq.wrapping_add(joined.len() as u32));
            let last = i == 2;
            assert_eq!(t.flags.fin(), last);
            assert_eq!(t.flags.psh(), last);
            assert_eq!(t.flags.cwr(), i == 0);
            assert!(t.flags.ack());
            joined.extend_from_slice(&ip.payload()[hl..]);
        }
        assert_eq!(joined, data);
        assert_eq!(eg.c.gso_segments, 3);
    }

    #[test]
    fn full_queue_refuses_segments() {
        let mut eg = egress(1);
        let seg = OutSegment {
            src: eg.addr.into(),
            dst: Ipv4Addr::new(198, 18, 0, 2).into(),
            repr: TcpRepr {
                src_port: 1,
                dst_port: 2,
                ..TcpRepr::default()
            },
            payload: crate::buf::Gather::slices(&[1, 2, 3], &[]),
            gso_size: 1460,
            ecn: Ecn::NotEct,
            dscp: 0,
        };
        assert!(emit_tcp(&mut eg, Instant::ZERO, &seg));
        assert!(!emit_tcp(&mut eg, Instant::ZERO, &seg));
        assert_eq!(eg.tx.len(), 1);
    }

    #[test]
    fn no_route_is_counted_and_reported() {
        let mut eg = egress(4);
        eg.medium = Medium::Ethernet;
        let seg = OutSegment {
            src: eg.addr.into(),
            dst: Ipv4Addr::new(198, 19, 0, 2).into(),
            repr: TcpRepr {
                src_port: 1,
                dst_port: 2,
                ..TcpRepr::default()
            },
            payload: crate::buf::Gather::slices(&[1, 2, 3], &[]),
            gso_size: 1460,
            ecn: Ecn::NotEct,
            dscp: 0,
        };
        assert_eq!(
            eg.emit_tcp(Instant::ZERO, &seg),
            Emit::Dropped(DropReason::NoRoute)
        );
        assert_eq!(eg.c.no_route, 1);
        assert!(eg.tx.is_empty());
    }

    /// A stack with IPv6 on (no DAD) and the peer 2001:2:0:1::2 in its neighbour cache as
    /// `nud` (or absent).
    fn v6_stack(nud: Option<crate::iface::neighbor::Nud>) -> crate::iface::Stack {
        use crate::iface::{Stack, StackConfig};
        use crate::wire::ipv6::Ipv6Cidr;
        let mut s = Stack::new(StackConfig {
            medium: Medium::Ethernet,
            mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            addrs6: vec![Ipv6Cidr::new("2001:2:0:1::1".parse().unwrap(), 64).unwrap()],
            dad_transmits: 0,
            tcp_secret: crate::tcp::Secret::fixed_for_tests([1; 16]),
            ..StackConfig::default()
        });
        if let Some(nud) = nud {
            s.inner.st.v6.neigh.set(
                Instant::ZERO,
                "2001:2:0:1::2".parse().unwrap(),
                EthernetAddress([2, 0, 0, 0, 0, 2]),
                nud,
                Duration::from_secs(30),
            );
        }
        s
    }

    /// An IPv6 segment of `len` bytes of data (with CWR and FIN, ECT(0)).
    fn v6_segment(data: &[u8]) -> OutSegment<'_> {
        let src: Ipv6Addr = "2001:2:0:1::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:2:0:1::2".parse().unwrap();
        OutSegment {
            src: src.into(),
            dst: dst.into(),
            repr: TcpRepr {
                src_port: 8080,
                dst_port: 40000,
                seq: 1000,
                ack: 5,
                flags: TcpFlags(TcpFlags::ACK | TcpFlags::FIN | TcpFlags::CWR),
                window: 100,
                ..TcpRepr::default()
            },
            payload: {
                let (a, b) = data.split_at(data.len() / 3);
                crate::buf::Gather::slices(a, b)
            },
            gso_size: 1440,
            ecn: Ecn::Ect0,
            dscp: 0,
        }
    }

    /// IPV6_TCLASS: every packet of a segment carries the connection's DSCP bits beside the
    /// segment's ECN codepoint (the template path, neighbour known).
    #[test]
    fn ipv6_segments_carry_the_dscp() {
        use crate::iface::neighbor::Nud;
        use crate::wire::ethernet::EthernetFrame;
        use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr};
        let data: Vec<u8> = (0..3001u32).map(|i| (i * 7) as u8).collect();
        let mut s = v6_stack(Some(Nud::Reachable));
        let st = &mut s.inner.st;
        let mut seg = v6_segment(&data);
        seg.dscp = 0xb8;
        assert_eq!(st.emit_tcp(Instant::ZERO, &seg), Emit::Sent);
        assert_eq!(st.tx.len(), 3);
        for f in st.tx.iter() {
            let eth = EthernetFrame::new_checked(f.as_slice()).unwrap();
            let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
            let r = Ipv6Repr::parse(&ip).unwrap();
            assert_eq!(r.traffic_class, 0xb8 | 0b10, "DSCP 0xb8 and ECT(0)");
        }
    }

    /// The IPv6 TCP fast path: with the neighbour known, every piece gets the template's
    /// Ethernet and IPv6 headers (payload length its own, hop limit, ECN), a valid checksum
    /// over the IPv6 pseudo-header, and together they carry the data; a STALE neighbour is
    /// used (and moved to DELAY, RFC 4861 §7.3.3) rather than dropping to the general path.
    #[test]
    fn ipv6_segments_use_the_header_template() {
        use crate::iface::neighbor::Nud;
        use crate::wire::ethernet::{EtherType, EthernetFrame};
        use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr};
        let data: Vec<u8> = (0..3001u32).map(|i| (i * 13) as u8).collect();
        for nud in [Nud::Reachable, Nud::Stale] {
            let mut s = v6_stack(Some(nud));
            let st = &mut s.inner.st;
            let seg = v6_segment(&data);
            assert_eq!(st.emit_tcp(Instant::ZERO, &seg), Emit::Sent);
            assert_eq!(st.tx.len(), 3, "{nud:?}");
            assert_eq!(st.c.ipv6_out, 3);
            let mut joined = Vec::new();
            for (i, f) in st.tx.iter().enumerate() {
                assert!(f.len() <= 1514);
                let eth = EthernetFrame::new_checked(f.as_slice()).unwrap();
                assert_eq!(eth.ethertype(), EtherType::Ipv6);
                assert_eq!(eth.dst_addr(), EthernetAddress([2, 0, 0, 0, 0, 2]));
                let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
                let r = Ipv6Repr::parse(&ip).unwrap();
                assert_eq!((r.next_header, r.hop_limit), (IpProtocol::Tcp, 64));
                assert_eq!(r.ecn(), Ecn::Ect0);
                assert_eq!(r.payload_len, ip.payload().len());
                let (t, hl) = parse(ip.payload(), seg.src, seg.dst, true).unwrap();
                assert_eq!(t.seq, 1000 + joined.len() as u32);
                assert_eq!(t.flags.fin(), i == 2);
                assert_eq!(t.flags.cwr(), i == 0);
                joined.extend_from_slice(&ip.payload()[hl..]);
            }
            assert_eq!(joined, data);
            let hop = "2001:2:0:1::2".parse().unwrap();
            let state = st.v6.neigh.get(Instant::ZERO, hop).map(|e| e.1);
            let want = if nud == Nud::Stale { Nud::Delay } else { nud };
            assert_eq!(state, Some(want));
        }
    }

    /// A TSO device gets an IPv6 super-segment whole (the device cuts it, `GSO_TCPV6`),
    /// checksum left to it; not when a Packet Too Big lowered the path MTU below the link's
    /// (the device would cut at its own MTU), nor without a resolved neighbour (the general
    /// path refuses TCP beyond the MTU): then it is cut here.
    #[test]
    fn ipv6_super_segments_go_whole_to_a_tso_device() {
        use crate::iface::neighbor::Nud;
        let data = vec![7u8; 20_000];
        let dst: Ipv6Addr = "2001:2:0:1::2".parse().unwrap();
        let mut s = v6_stack(Some(Nud::Reachable));
        let st = &mut s.inner.st;
        st.tso = true;
        st.csum_tx = false;
        assert_eq!(st.emit_tcp(Instant::ZERO, &v6_segment(&data)), Emit::Sent);
        assert_eq!(st.tx.len(), 1);
        assert_eq!(st.tx[0].len(), 14 + 40 + 20 + 20_000);
        assert_eq!(st.c.gso_segments, 0);
        st.tx.clear();
        // A smaller path MTU: cut to it in software.
        st.v6.pmtu.learn(Instant::ZERO, dst, 1280);
        assert_eq!(st.emit_tcp(Instant::ZERO, &v6_segment(&data)), Emit::Sent);
        assert_eq!(st.tx.len(), 20_000usize.div_ceil(1280 - 60));
        assert!(st.tx.iter().all(|f| f.len() <= 14 + 1280));
        // No neighbour: the general path, cut to the MTU, parked for NDP.
        let mut s = v6_stack(None);
        let st = &mut s.inner.st;
        st.tso = true;
        st.csum_tx = false;
        assert_eq!(st.emit_tcp(Instant::ZERO, &v6_segment(&data)), Emit::Sent);
        assert_eq!(st.v6.neigh.pending_len(), 20_000usize.div_ceil(1440));
    }

    fn full() -> TcpRepr {
        let mut options = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some(Timestamps { tsval: 1, tsecr: 2 }),
            ..TcpOptions::default()
        };
        options.sack_count = 1;
        options.sack[0] = SackBlock {
            left: 10,
            right: 20,
        };
        TcpRepr {
            src_port: 1000,
            dst_port: 80,
            seq: 7,
            ack: 9,
            flags: TcpFlags(TcpFlags::ACK | TcpFlags::PSH),
            window: 512,
            urgent: 0,
            options,
        }
    }

    #[test]
    fn round_trip_with_options_and_checksum() {
        let r = full();
        let hl = header_len(&r);
        assert_eq!(hl % 4, 0);
        assert!(hl <= 60);
        let mut buf = vec![0u8; hl + 3];
        buf[hl..].copy_from_slice(b"abc");
        let (a, b) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        let sum = crate::mem::checksum(b"abc");
        let ph = PseudoHeader::new(a, b);
        emit(&r, &mut buf, Some((ph, 3, sum))).unwrap();
        let (p, l) = parse(&buf, a, b, true).unwrap();
        assert_eq!(l, hl);
        assert_eq!(p, r);
        buf[hl] ^= 1;
        assert_eq!(parse(&buf, a, b, true), Err(Error::BadChecksum));
    }

    #[test]
    fn too_many_sack_blocks_are_trimmed() {
        let mut r = full();
        r.options.sack_count = 4;
        let hl = header_len(&r);
        assert!(hl <= 60);
        let mut buf = vec![0u8; hl];
        emit(&r, &mut buf, None).unwrap();
        let (p, _) = parse(&buf, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, false).unwrap();
        assert!(p.options.sack_count < 4);
    }

    #[test]
    fn bad_option_length_is_an_error() {
        let mut buf = [0u8; 24];
        buf[0..4].copy_from_slice(&[0, 1, 0, 2]);
        buf[12] = 6 << 4;
        buf[20..22].copy_from_slice(&[2, 9]);
        let e = parse(&buf, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, false);
        assert_eq!(e, Err(Error::BadLength));
    }
}
