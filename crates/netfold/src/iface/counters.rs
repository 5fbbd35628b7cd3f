//! Stack counters: every frame in and out, and every drop by its reason. A drop that is not
//! counted is a bug; the integration tests assert on these.

use crate::buf::PoolStats;
use crate::tcp;
use core::fmt;

/// All counters of one stack; plain fields so callers can diff snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    // Batching (the OLS 2002 study): frames per batch = frames_in / rx_batches.
    /// Calls to `Stack::poll`.
    pub polls: u64,
    /// `recv_batch` calls that returned at least one frame.
    pub rx_batches: u64,
    /// `send_batch` calls (each with at least one frame).
    pub tx_batches: u64,

    // Link layer.
    /// Frames received from the device.
    pub frames_in: u64,
    /// Frames queued to the device.
    pub frames_out: u64,
    /// Bytes received (link frames).
    pub bytes_in: u64,
    /// Bytes queued (link frames).
    pub bytes_out: u64,
    /// Frames too short or otherwise unparsable at the link layer.
    pub eth_malformed: u64,
    /// Unicast frames for another MAC, multicast we did not join.
    pub eth_not_for_us: u64,
    /// Unknown EtherType, VLAN-tagged frames (no VLAN configured), other ARP hardware types.
    pub unsupported: u64,
    /// Frames with no room in the transmit queue.
    pub tx_queue_full: u64,
    /// Outgoing packets dropped because nothing was routable (off-subnet, no gateway).
    pub no_route: u64,
    /// Outgoing datagrams too large for the MTU (TCP segments are split instead).
    pub tx_too_big: u64,

    // ARP.
    /// ARP packets received.
    pub arp_in: u64,
    /// ARP packets too short or with bogus sender fields.
    pub arp_malformed: u64,
    /// ARP packets from another host claiming our IPv4 address.
    pub arp_conflicts: u64,
    /// ARP requests received.
    pub arp_requests_in: u64,
    /// ARP replies received.
    pub arp_replies_in: u64,
    /// ARP requests sent.
    pub arp_requests_out: u64,
    /// ARP replies sent.
    pub arp_replies_out: u64,
    /// Frames dropped because the pending-resolution queue was full.
    pub arp_pending_overflow: u64,
    /// Parked frames dropped when their next hop never answered.
    pub arp_unresolved_drops: u64,

    // IPv4.
    /// IPv4 packets received.
    pub ipv4_in: u64,
    /// IPv4 packets sent.
    pub ipv4_out: u64,
    /// IPv4 header checksum failures.
    pub ipv4_bad_checksum: u64,
    /// IPv4 packets with bad lengths or version.
    pub ipv4_malformed: u64,
    /// Destination not one of our addresses.
    pub ipv4_not_for_us: u64,
    /// Transparent mode: TCP and UDP to a foreign destination taken in (`StackConfig::transparent`).
    pub ipv4_transparent_in: u64,
    /// Source address broadcast, multicast or ours (RFC 1122 §3.2.1.3 martians).
    pub ipv4_bad_src: u64,
    /// Datagrams for a protocol we do not speak.
    pub ipv4_unknown_protocol: u64,
    /// Fragments received.
    pub frag_in: u64,
    /// Datagrams completed by reassembly.
    pub frag_reassembled: u64,
    /// Fragments dropped (reassembly disabled, every reason below) plus datagrams discarded
    /// by timeout or eviction.
    pub frag_dropped: u64,
    /// Datagrams discarded for overlapping fragments, or fragments contradicting the end
    /// (RFC 5722; Linux's "overlapping fragments" discard).
    pub frag_overlaps: u64,
    /// Datagrams discarded incomplete at the timeout.
    pub frag_timeouts: u64,
    /// Fragments empty, or not the last and not a multiple of 8 bytes.
    pub frag_bad_length: u64,
    /// Fragments (and their datagrams) reaching past the largest payload (65515 bytes).
    pub frag_too_big: u64,
    /// Datagrams discarded for arriving in more than `StackConfig::frag_max_fragments`.
    pub frag_too_many: u64,
    /// Fragments whose datagram was evicted while room was made for them.
    pub frag_no_room: u64,
    /// Datagrams evicted at `StackConfig::frag_high_thresh`, down to `frag_low_thresh`.
    pub frag_evicted: u64,
    /// Datagrams evicted because their source passed its share of the bytes.
    pub frag_source_evicted: u64,
    /// Datagrams evicted because their source had `StackConfig::frag_source_max_queues`.
    pub frag_source_queue_evicted: u64,
    /// Datagrams evicted because `StackConfig::frag_max_datagrams` were in reassembly.
    pub frag_queue_evicted: u64,
    /// Fragments sent: UDP and ICMP datagrams larger than the path MTU, cut per RFC 791 §3.2.
    pub frag_out: u64,

    // ICMP.
    /// ICMP messages received.
    pub icmp_in: u64,
    /// ICMP messages sent.
    pub icmp_out: u64,
    /// ICMP checksum failures.
    pub icmp_bad_checksum: u64,
    /// ICMP messages too short or with a bad quote.
    pub icmp_malformed: u64,
    /// Message types we do not handle (counted, ignored).
    pub icmp_unsupported: u64,
    /// Echo requests received.
    pub echo_requests_in: u64,
    /// Echo replies received.
    pub echo_replies_in: u64,
    /// Destination unreachable / time exceeded received.
    pub icmp_errors_in: u64,
    /// Of those, port unreachable (what a UDP sender sees for a closed port).
    pub icmp_port_unreachable_in: u64,
    /// ICMP errors sent (port/protocol unreachable).
    pub icmp_errors_out: u64,
    /// ICMP errors not sent because of the rate limit.
    pub icmp_rate_limited: u64,

    // IPv6 (counted only when IPv6 is on, `StackConfig::addrs6`; otherwise IPv6 frames are
    // `unsupported` at the link, or `ipv4_malformed` on a TUN, as in an IPv4-only stack).
    /// IPv6 packets received.
    pub ipv6_in: u64,
    /// IPv6 packets sent (each fragment counts).
    pub ipv6_out: u64,
    /// IPv6 packets with bad lengths or version.
    pub ipv6_malformed: u64,
    /// Source address multicast or loopback (RFC 4291 §2.7, §2.5.3), or unspecified where a
    /// reply would be needed.
    pub ipv6_bad_src: u64,
    /// Destination neither one of our usable addresses nor a group we listen to (a tentative
    /// address only takes NDP, RFC 4862 §5.4).
    pub ipv6_not_for_us: u64,
    /// Extension headers truncated, or options that do not fit their header.
    pub ipv6_ext_malformed: u64,
    /// Extension header chains beyond the bounds (headers, options, padding; see
    /// `wire::ipv6ext`).
    pub ipv6_ext_limit: u64,
    /// Packets discarded for an unrecognized option whose action says discard (RFC 8200 §4.2).
    pub ipv6_ext_discarded: u64,
    /// Packets discarded with a Parameter Problem code 0 or 2 (erroneous field, unrecognized
    /// option; the answer itself may be suppressed or rate-limited).
    pub ipv6_param_problem: u64,
    /// Packets with an unrecognized Next Header (Parameter Problem code 1).
    pub ipv6_unknown_next_header: u64,
    /// Packets ending in "No Next Header" (RFC 8200 §4.7).
    pub ipv6_no_next_header: u64,
    /// Packets not sent or answered for want of a usable source address (none configured,
    /// or all tentative): ICMPv6 answers, NDP, and TCP connects and UDP sends to IPv6 peers
    /// (refused with `NetworkUnreachable`, Linux ENETUNREACH).
    pub ipv6_no_source: u64,
    /// IPv6 fragments received.
    pub frag6_in: u64,
    /// Atomic fragments (RFC 6946), processed on their own.
    pub frag6_atomic: u64,
    /// IPv6 datagrams completed by reassembly.
    pub frag6_reassembled: u64,
    /// IPv6 fragments dropped: reassembly off, limits, overlaps, bad lengths.
    pub frag6_dropped: u64,
    /// IPv6 datagrams discarded for overlapping fragments (RFC 5722).
    pub frag6_overlaps: u64,
    /// IPv6 datagrams discarded incomplete at the timeout (60 s).
    pub frag6_timeouts: u64,
    /// IPv6 fragments empty, or not the last and not a multiple of 8 bytes (those are
    /// answered with a Parameter Problem, RFC 8200 §4.5).
    pub frag6_bad_length: u64,
    /// IPv6 fragments (and their datagrams) reaching past 65535 bytes of payload (answered
    /// with a Parameter Problem, RFC 8200 §4.5).
    pub frag6_too_big: u64,
    /// IPv6 datagrams discarded for arriving in more than `StackConfig::frag_max_fragments`.
    pub frag6_too_many: u64,
    /// IPv6 fragments whose datagram was evicted while room was made for them.
    pub frag6_no_room: u64,
    /// IPv6 datagrams evicted at `StackConfig::frag_high_thresh`.
    pub frag6_evicted: u64,
    /// IPv6 datagrams evicted because their source /64 passed its share of the bytes.
    pub frag6_source_evicted: u64,
    /// IPv6 datagrams evicted because their source /64 had `frag_source_max_queues`.
    pub frag6_source_queue_evicted: u64,
    /// IPv6 datagrams evicted because `StackConfig::frag_max_datagrams` were in reassembly.
    pub frag6_queue_evicted: u64,
    /// First fragments without the whole header chain (RFC 7112), dropped.
    pub frag6_incomplete_chain: u64,
    /// IPv6 fragments sent (RFC 8200 §4.5 source fragmentation).
    pub frag6_out: u64,

    // ICMPv6.
    /// ICMPv6 messages received.
    pub icmpv6_in: u64,
    /// ICMPv6 messages sent.
    pub icmpv6_out: u64,
    /// ICMPv6 checksum failures.
    pub icmpv6_bad_checksum: u64,
    /// ICMPv6 messages too short, with a bad quote or bad NDP options.
    pub icmpv6_malformed: u64,
    /// ICMPv6 types not handled (MLD, ...), counted and ignored.
    pub icmpv6_unsupported: u64,
    /// ICMPv6 echo requests received.
    pub echo6_requests_in: u64,
    /// ICMPv6 echo replies received.
    pub echo6_replies_in: u64,
    /// ICMPv6 error messages received.
    pub icmpv6_errors_in: u64,
    /// Of those, Packet Too Big.
    pub icmpv6_ptb_in: u64,
    /// Packet Too Big messages ignored: MTU below 1280 (RFC 8201 §4) or not about our packet.
    pub icmpv6_ptb_ignored: u64,
    /// ICMPv6 error messages sent.
    pub icmpv6_errors_out: u64,
    /// ICMPv6 errors not sent because RFC 4443 §2.4 (e) forbids them.
    pub icmpv6_errors_suppressed: u64,
    /// ICMPv6 errors not sent because of the rate limit.
    pub icmpv6_rate_limited: u64,

    // Neighbor Discovery and DAD.
    /// NDP messages received.
    pub ndp_in: u64,
    /// NDP messages with a hop limit other than 255, dropped (RFC 4861 §6.1, §7.1).
    pub ndp_bad_hop_limit: u64,
    /// NDP messages failing the RFC 4861 validity checks the IP header decides.
    pub ndp_invalid: u64,
    /// NDP messages a host ignores (Router Solicitation, Redirect; any on a TUN).
    pub ndp_ignored: u64,
    /// Solicitations for an address that is not ours.
    pub ndp_not_for_us: u64,
    /// Neighbor Solicitations received.
    pub ndp_ns_in: u64,
    /// Neighbor Solicitations sent (resolution, probes, DAD).
    pub ndp_ns_out: u64,
    /// Neighbor Advertisements received.
    pub ndp_na_in: u64,
    /// Neighbor Advertisements sent.
    pub ndp_na_out: u64,
    /// Router Advertisements received.
    pub ndp_ra_in: u64,
    /// Advertisements for a target with no cache entry, discarded (RFC 4861 §7.2.5).
    pub ndp_na_unknown_target: u64,
    /// Tentative addresses found duplicate by DAD (RFC 4862 §5.4.3, §5.4.4).
    pub ndp_dad_conflicts: u64,
    /// Advertisements from another node for an address we use.
    pub ndp_own_addr_advertised: u64,
    /// Frames dropped because the pending-resolution queue was full.
    pub ndp_pending_overflow: u64,
    /// Parked frames dropped when their next hop never answered.
    pub ndp_unresolved_drops: u64,
    /// Address resolutions that failed (MAX_MULTICAST_SOLICIT solicitations unanswered).
    pub ndp_resolution_failed: u64,
    /// Neighbour entries deleted after unanswered unreachability probes (RFC 4861 §7.3.3).
    pub ndp_nud_failed: u64,

    // UDP.
    /// UDP datagrams received.
    pub udp_in: u64,
    /// UDP datagrams sent.
    pub udp_out: u64,
    /// UDP checksum failures.
    pub udp_bad_checksum: u64,
    /// UDP datagrams with bad lengths or port 0.
    pub udp_malformed: u64,
    /// UDP datagrams for a port nobody bound.
    pub udp_no_socket: u64,
    /// UDP datagrams dropped at a full socket queue.
    pub udp_queue_full: u64,

    // TCP (ingress/egress glue; the engine's own counters are in `tcp`).
    /// TCP checksum failures.
    pub tcp_bad_checksum: u64,
    /// TCP segments with bad header lengths, options or ports.
    pub tcp_malformed: u64,
    /// Segments produced by splitting a large TCP segment at the MTU (software GSO).
    pub gso_segments: u64,
    /// The TCP engine's own counters.
    pub tcp: tcp::Stats,

    // Batching and GRO (the OLS 2002 study call-count tables); buckets as in [`BUCKETS`].
    /// Polls by frames received: 1, 2-4, 5-8, 9-16, 17-32, 33-64, 65+.
    pub frames_per_poll: [u64; 7],
    /// GRO flushes by segments merged into the delivered segment (same buckets).
    pub gro_segs_per_flush: [u64; 7],
    /// Segments appended to a held segment (a train of n segments is n - 1 merges).
    pub gro_merges: u64,
    /// Segments handed to TCP by GRO (merged or not).
    pub gro_flushes: u64,
    /// Flushes at the end of a receive batch.
    pub gro_flush_batch_end: u64,
    /// Flushes because the next segment of the flow did not match (seq, ACK, window,
    /// options, IP fields).
    pub gro_flush_mismatch: u64,
    /// Flushes because the segment carried PSH.
    pub gro_flush_psh: u64,
    /// Flushes because a segment was shorter than the first (the end of a send).
    pub gro_flush_short: u64,
    /// Flushes at the byte limit (64 KiB IP packet).
    pub gro_flush_bytes: u64,
    /// Flushes at the segment-count limit.
    pub gro_flush_count: u64,
    /// Flushes to make room in the flow table.
    pub gro_flush_evict: u64,
    /// Flushes before a segment of the flow that cannot be merged (SYN/FIN/RST/URG/ECE/CWR,
    /// no payload, IP options, reassembled).
    pub gro_flush_control: u64,

    // Bytes touched by the stack itself (the TCP engine's ring copies are not counted here).
    /// Copy calls made by the stack (payload into packet, into GRO buffer, into UDP queue).
    pub copies: u64,
    /// Bytes copied by those calls.
    pub bytes_copied: u64,
    /// Bytes summed for TCP/UDP checksums (in a fused copy or a separate pass).
    pub bytes_checksummed: u64,
    /// Of those, bytes summed in a separate pass (not folded into a copy).
    pub bytes_checksummed_separately: u64,
    /// Frames sent with their TCP payload as references to application buffers (zero-copy
    /// send to a scatter-gather device that completes checksums).
    pub zc_frames: u64,
    /// The payload bytes those frames carried: bytes the stack neither copied nor summed.
    pub zc_bytes: u64,

    // Dual-stack transport (TCP and UDP connects and sends without an IPv6 source count in
    // `ipv6_no_source` above).
    /// IPv6 TCP segments handed to the transport with a multicast destination (TCP is
    /// unicast only, RFC 9293 §3.9.1), dropped.
    pub ipv6_tcp_not_unicast: u64,

    // Passes over TCP payload bytes made by the interface; the engine's
    // (ring copies, application bytes) are in `tcp`. [`Counters::payload_passes`] puts them
    // together. Lengths added per call, never per byte.
    /// Payload bytes copied from the send ring into frames (`gso::build`, the checksum summed
    /// in that copy), retransmissions included.
    pub tcp_tx_copy_frame: u64,
    /// Payload bytes summed for sending in a pass of their own (`CopyMode::Baseline`: copy,
    /// then checksum).
    pub tcp_tx_csum_separate: u64,
    /// Payload bytes of received segments verified in a pass of their own (not folded into
    /// the copy that placed them: no copy to ride on, or `CopyMode::Baseline`).
    pub tcp_rx_csum_separate: u64,

    /// The stack's buffer pool.
    pub pool: PoolStats,
}

/// Passes over TCP payload bytes at one stack, as bytes: every copy of
/// payload and every checksum pass over payload that is not folded into a copy, on the send
/// side and on the receive side, against the payload bytes the application handed over and
/// received. "Passes per payload byte" is their ratio: 2.0 means each byte was touched twice
/// (e.g. copied in and copied out). A retransmission, a duplicate or a dropped segment adds
/// passes without adding payload bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PayloadPasses {
    /// Bytes the application sent (taken by `send`).
    pub sent: u64,
    /// Send side: application to send ring (`SendRing::push`).
    pub tx_copy_app: u64,
    /// Send side: send ring to frame, checksum folded in (`gso::build`).
    pub tx_copy_frame: u64,
    /// Send side: checksum passes of their own.
    pub tx_csum_separate: u64,
    /// Bytes the application received (read, placed in a posted read, consumed in place).
    pub received: u64,
    /// Receive side: frame to receive ring (the checksum verified in that copy when it was
    /// still open, see `tcp/place.rs`).
    pub rx_copy_ring: u64,
    /// Receive side: frame straight into a posted read (one pass, verified in it).
    pub rx_copy_direct: u64,
    /// Receive side: receive ring to application.
    pub rx_copy_app: u64,
    /// Receive side: checksum passes of their own.
    pub rx_csum_separate: u64,
    /// Receive side: bytes the application consumed in place (a borrowing read, no copy).
    pub rx_in_place: u64,
    /// Receive side: bytes committed while left in their frames and handed out as borrowed
    /// frames (frame-level borrowing read, `tcp/frames.rs`): no copy; their checksum, when
    /// the device did not verify it, is in `rx_csum_separate`.
    pub rx_frames_held: u64,
}

impl PayloadPasses {
    /// Send-side bytes touched: copies plus separate checksum passes.
    pub fn tx_bytes(&self) -> u64 {
        self.tx_copy_app + self.tx_copy_frame + self.tx_csum_separate
    }
    /// Receive-side bytes touched: copies plus separate checksum passes.
    pub fn rx_bytes(&self) -> u64 {
        self.rx_copy_ring + self.rx_copy_direct + self.rx_copy_app + self.rx_csum_separate
    }
    /// Passes per payload byte at the sender; `None` before any byte was sent.
    pub fn tx_per_byte(&self) -> Option<f64> {
        (self.sent > 0).then(|| self.tx_bytes() as f64 / self.sent as f64)
    }
    /// Passes per payload byte at the receiver; `None` before any byte was received.
    pub fn rx_per_byte(&self) -> Option<f64> {
        (self.received > 0).then(|| self.rx_bytes() as f64 / self.received as f64)
    }
    /// The passes made since `earlier` (a snapshot of the same stack).
    pub fn since(&self, earlier: &PayloadPasses) -> PayloadPasses {
        PayloadPasses {
            sent: self.sent - earlier.sent,
            tx_copy_app: self.tx_copy_app - earlier.tx_copy_app,
            tx_copy_frame: self.tx_copy_frame - earlier.tx_copy_frame,
            tx_csum_separate: self.tx_csum_separate - earlier.tx_csum_separate,
            received: self.received - earlier.received,
            rx_copy_ring: self.rx_copy_ring - earlier.rx_copy_ring,
            rx_copy_direct: self.rx_copy_direct - earlier.rx_copy_direct,
            rx_copy_app: self.rx_copy_app - earlier.rx_copy_app,
            rx_csum_separate: self.rx_csum_separate - earlier.rx_csum_separate,
            rx_in_place: self.rx_in_place - earlier.rx_in_place,
            rx_frames_held: self.rx_frames_held - earlier.rx_frames_held,
        }
    }
}

impl Counters {
    /// Counts a fragment's drop reason (if it was dropped) and the evictions making room for it
    /// caused, for IPv4 (`v6` false) or IPv6.
    pub(crate) fn frag_result(
        &mut self,
        v6: bool,
        drop: Option<super::reassembly::FragDrop>,
        ev: super::reassembly::Evictions,
    ) {
        use super::reassembly::FragDrop;
        let c = if v6 {
            [
                &mut self.frag6_dropped,
                &mut self.frag6_bad_length,
                &mut self.frag6_too_big,
                &mut self.frag6_overlaps,
                &mut self.frag6_too_many,
                &mut self.frag6_no_room,
                &mut self.frag6_evicted,
                &mut self.frag6_source_evicted,
                &mut self.frag6_source_queue_evicted,
                &mut self.frag6_queue_evicted,
            ]
        } else {
            [
                &mut self.frag_dropped,
                &mut self.frag_bad_length,
                &mut self.frag_too_big,
                &mut self.frag_overlaps,
                &mut self.frag_too_many,
                &mut self.frag_no_room,
                &mut self.frag_evicted,
                &mut self.frag_source_evicted,
                &mut self.frag_source_queue_evicted,
                &mut self.frag_queue_evicted,
            ]
        };
        let [dropped, bad_length, too_big, overlaps, too_many, no_room, evicted, source, source_q, queues] =
            c;
        if let Some(d) = drop {
            *dropped += 1;
            match d {
                FragDrop::BadLength => *bad_length += 1,
                FragDrop::TooBig => *too_big += 1,
                FragDrop::Overlap => *overlaps += 1,
                FragDrop::TooManyFragments => *too_many += 1,
                FragDrop::NoRoom => *no_room += 1,
            }
        }
        // Evicted datagrams are discarded datagrams, as timeouts are.
        *evicted += ev.memory;
        *source += ev.source_share;
        *source_q += ev.source_queues;
        *queues += ev.queues;
        *dropped += ev.memory + ev.source_share + ev.source_queues + ev.queues;
    }

    /// The passes over TCP payload bytes this stack made (the interface's and the engine's
    /// counters together).
    pub fn payload_passes(&self) -> PayloadPasses {
        let t = &self.tcp;
        PayloadPasses {
            sent: t.app_bytes_sent,
            tx_copy_app: t.tx_copy_app,
            tx_copy_frame: self.tcp_tx_copy_frame,
            tx_csum_separate: self.tcp_tx_csum_separate,
            received: t.app_bytes_received,
            rx_copy_ring: t.rx_copy_ring,
            rx_copy_direct: t.rx_copy_direct,
            rx_copy_app: t.rx_copy_app,
            rx_csum_separate: self.tcp_rx_csum_separate,
            rx_in_place: t.rx_in_place,
            rx_frames_held: t.rx_frames_held,
        }
    }
}

/// Upper bounds of the histogram buckets (the last bucket is open).
pub const BUCKETS: [u64; 6] = [1, 4, 8, 16, 32, 64];

/// The histogram bucket for a count `n >= 1`.
pub fn bucket(n: usize) -> usize {
    BUCKETS
        .iter()
        .position(|&b| n as u64 <= b)
        .unwrap_or(BUCKETS.len())
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.tcp;
        let pp = self.payload_passes();
        let rows: &[(&str, &[(&str, u64)])] = &[
            (
                "batch",
                &[
                    ("polls", self.polls),
                    ("rx_batches", self.rx_batches),
                    ("tx_batches", self.tx_batches),
                ],
            ),
            (
                "link",
                &[
                    ("frames_in", self.frames_in),
                    ("frames_out", self.frames_out),
                    ("bytes_in", self.bytes_in),
                    ("bytes_out", self.bytes_out),
                    ("malformed", self.eth_malformed),
                    ("not_for_us", self.eth_not_for_us),
                    ("unsupported", self.unsupported),
                    ("tx_queue_full", self.tx_queue_full),
                    ("no_route", self.no_route),
                    ("tx_too_big", self.tx_too_big),
                ],
            ),
            (
                "arp",
                &[
                    ("in", self.arp_in),
                    ("malformed", self.arp_malformed),
                    ("conflicts", self.arp_conflicts),
                    ("requests_in", self.arp_requests_in),
                    ("replies_in", self.arp_replies_in),
                    ("requests_out", self.arp_requests_out),
                    ("replies_out", self.arp_replies_out),
                    ("pending_overflow", self.arp_pending_overflow),
                    ("unresolved_drops", self.arp_unresolved_drops),
                ],
            ),
            (
                "ipv4",
                &[
                    ("in", self.ipv4_in),
                    ("out", self.ipv4_out),
                    ("bad_checksum", self.ipv4_bad_checksum),
                    ("malformed", self.ipv4_malformed),
                    ("not_for_us", self.ipv4_not_for_us),
                    ("transparent_in", self.ipv4_transparent_in),
                    ("bad_src", self.ipv4_bad_src),
                    ("unknown_protocol", self.ipv4_unknown_protocol),
                    ("frag_in", self.frag_in),
                    ("frag_reassembled", self.frag_reassembled),
                    ("frag_dropped", self.frag_dropped),
                    ("frag_overlaps", self.frag_overlaps),
                    ("frag_timeouts", self.frag_timeouts),
                    ("frag_bad_length", self.frag_bad_length),
                    ("frag_too_big", self.frag_too_big),
                    ("frag_too_many", self.frag_too_many),
                    ("frag_no_room", self.frag_no_room),
                    ("frag_evicted", self.frag_evicted),
                    ("frag_source_evicted", self.frag_source_evicted),
                    ("frag_source_queue_evicted", self.frag_source_queue_evicted),
                    ("frag_queue_evicted", self.frag_queue_evicted),
                    ("frag_out", self.frag_out),
                ],
            ),
            (
                "icmp",
                &[
                    ("in", self.icmp_in),
                    ("out", self.icmp_out),
                    ("bad_checksum", self.icmp_bad_checksum),
                    ("malformed", self.icmp_malformed),
                    ("unsupported", self.icmp_unsupported),
                    ("echo_requests_in", self.echo_requests_in),
                    ("echo_replies_in", self.echo_replies_in),
                    ("errors_in", self.icmp_errors_in),
                    ("port_unreachable_in", self.icmp_port_unreachable_in),
                    ("errors_out", self.icmp_errors_out),
                    ("rate_limited", self.icmp_rate_limited),
                ],
            ),
            (
                "ipv6",
                &[
                    ("in", self.ipv6_in),
                    ("out", self.ipv6_out),
                    ("malformed", self.ipv6_malformed),
                    ("bad_src", self.ipv6_bad_src),
                    ("not_for_us", self.ipv6_not_for_us),
                    ("ext_malformed", self.ipv6_ext_malformed),
                    ("ext_limit", self.ipv6_ext_limit),
                    ("ext_discarded", self.ipv6_ext_discarded),
                    ("param_problem", self.ipv6_param_problem),
                    ("unknown_next_header", self.ipv6_unknown_next_header),
                    ("no_next_header", self.ipv6_no_next_header),
                    ("no_source", self.ipv6_no_source),
                    ("frag_in", self.frag6_in),
                    ("frag_atomic", self.frag6_atomic),
                    ("frag_reassembled", self.frag6_reassembled),
                    ("frag_dropped", self.frag6_dropped),
                    ("frag_overlaps", self.frag6_overlaps),
                    ("frag_timeouts", self.frag6_timeouts),
                    ("frag_bad_length", self.frag6_bad_length),
                    ("frag_too_big", self.frag6_too_big),
                    ("frag_too_many", self.frag6_too_many),
                    ("frag_no_room", self.frag6_no_room),
                    ("frag_evicted", self.frag6_evicted),
                    ("frag_source_evicted", self.frag6_source_evicted),
                    ("frag_source_queue_evicted", self.frag6_source_queue_evicted),
                    ("frag_queue_evicted", self.frag6_queue_evicted),
                    ("frag_incomplete", self.frag6_incomplete_chain),
                    ("frag_out", self.frag6_out),
                ],
            ),
            (
                "icmp6",
                &[
                    ("in", self.icmpv6_in),
                    ("out", self.icmpv6_out),
                    ("bad_checksum", self.icmpv6_bad_checksum),
                    ("malformed", self.icmpv6_malformed),
                    ("unsupported", self.icmpv6_unsupported),
                    ("echo_requests_in", self.echo6_requests_in),
                    ("echo_replies_in", self.echo6_replies_in),
                    ("errors_in", self.icmpv6_errors_in),
                    ("ptb_in", self.icmpv6_ptb_in),
                    ("ptb_ignored", self.icmpv6_ptb_ignored),
                    ("errors_out", self.icmpv6_errors_out),
                    ("errors_suppressed", self.icmpv6_errors_suppressed),
                    ("rate_limited", self.icmpv6_rate_limited),
                ],
            ),
            (
                "ndp",
                &[
                    ("in", self.ndp_in),
                    ("bad_hop_limit", self.ndp_bad_hop_limit),
                    ("invalid", self.ndp_invalid),
                    ("ignored", self.ndp_ignored),
                    ("not_for_us", self.ndp_not_for_us),
                    ("ns_in", self.ndp_ns_in),
                    ("ns_out", self.ndp_ns_out),
                    ("na_in", self.ndp_na_in),
                    ("na_out", self.ndp_na_out),
                    ("ra_in", self.ndp_ra_in),
                    ("na_unknown_target", self.ndp_na_unknown_target),
                    ("dad_conflicts", self.ndp_dad_conflicts),
                    ("own_addr_advertised", self.ndp_own_addr_advertised),
                    ("pending_overflow", self.ndp_pending_overflow),
                    ("unresolved_drops", self.ndp_unresolved_drops),
                    ("resolution_failed", self.ndp_resolution_failed),
                    ("nud_failed", self.ndp_nud_failed),
                ],
            ),
            (
                "udp",
                &[
                    ("in", self.udp_in),
                    ("out", self.udp_out),
                    ("bad_checksum", self.udp_bad_checksum),
                    ("malformed", self.udp_malformed),
                    ("no_socket", self.udp_no_socket),
                    ("queue_full", self.udp_queue_full),
                ],
            ),
            (
                "tcp",
                &[
                    ("segments_in", t.segments_in),
                    ("segments_out", t.segments_out),
                    ("bad_checksum", self.tcp_bad_checksum),
                    ("malformed", self.tcp_malformed),
                    ("gso_segments", self.gso_segments),
                    ("retransmits_fast", t.retransmits_fast),
                    ("retransmits_rto", t.retransmits_rto),
                    ("dup_acks", t.dup_acks),
                    ("sack_blocks_in", t.sack_blocks_in),
                    ("sack_blocks_out", t.sack_blocks_out),
                    ("ooo_bytes_queued", t.ooo_bytes_queued),
                    ("rst_in", t.rst_in),
                    ("rst_out", t.rst_out),
                    ("no_socket", t.no_socket),
                    ("challenge_acks", t.challenge_acks),
                    ("challenge_acks_skipped_conn", t.challenge_acks_skipped_conn),
                    (
                        "challenge_acks_skipped_global",
                        t.challenge_acks_skipped_global,
                    ),
                    ("oow_acks_skipped", t.oow_acks_skipped),
                    ("paws_drops", t.paws_drops),
                    ("bad_segments", t.bad_segments),
                    ("backlog_drops", t.backlog_drops),
                    ("ooo_drops", t.ooo_drops),
                    ("rcv_out_of_window", t.rcv_out_of_window),
                    ("rcv_duplicates", t.rcv_duplicates),
                    ("rcv_no_room_bytes", t.rcv_no_room_bytes),
                    ("rcv_zero_window_bytes", t.rcv_zero_window_bytes),
                    ("rcvbuf_grown", t.rcvbuf_grown),
                    ("sndbuf_grown", t.sndbuf_grown),
                    ("buffer_budget_refusals", t.buffer_budget_refusals),
                    ("memory_pressure", t.memory_pressure),
                    ("pressure_resets", t.pressure_resets),
                    ("orphan_resets", t.orphan_resets),
                ],
            ),
            (
                "gro",
                &[
                    ("merges", self.gro_merges),
                    ("flushes", self.gro_flushes),
                    ("flush_batch_end", self.gro_flush_batch_end),
                    ("flush_mismatch", self.gro_flush_mismatch),
                    ("flush_psh", self.gro_flush_psh),
                    ("flush_short", self.gro_flush_short),
                    ("flush_bytes", self.gro_flush_bytes),
                    ("flush_count", self.gro_flush_count),
                    ("flush_evict", self.gro_flush_evict),
                    ("flush_control", self.gro_flush_control),
                ],
            ),
            (
                "mem",
                &[
                    ("copies", self.copies),
                    ("bytes_copied", self.bytes_copied),
                    ("bytes_checksummed", self.bytes_checksummed),
                    ("csum_separate", self.bytes_checksummed_separately),
                    ("zc_frames", self.zc_frames),
                    ("zc_bytes", self.zc_bytes),
                ],
            ),
            (
                "dual",
                &[("ipv6_tcp_not_unicast", self.ipv6_tcp_not_unicast)],
            ),
            (
                "pass",
                &[
                    ("sent", pp.sent),
                    ("tx_copy_app", pp.tx_copy_app),
                    ("tx_copy_frame", pp.tx_copy_frame),
                    ("tx_csum_separate", pp.tx_csum_separate),
                    ("received", pp.received),
                    ("rx_copy_ring", pp.rx_copy_ring),
                    ("rx_copy_direct", pp.rx_copy_direct),
                    ("rx_copy_app", pp.rx_copy_app),
                    ("rx_csum_separate", pp.rx_csum_separate),
                    ("rx_in_place", pp.rx_in_place),
                    ("rx_frames_held", pp.rx_frames_held),
                ],
            ),
            (
                "pool",
                &[
                    ("gets", self.pool.gets),
                    ("allocations", self.pool.allocations),
                    ("puts", self.pool.puts),
                    ("dropped", self.pool.dropped),
                ],
            ),
        ];
        for (layer, fields) in rows {
            for (name, v) in fields.iter() {
                writeln!(f, "{layer:<5} {name:<20} {v:>14}")?;
            }
        }
        let names = ["1", "2-4", "5-8", "9-16", "17-32", "33-64", "65+"];
        for (name, h) in [
            ("frames_per_poll", &self.frames_per_poll),
            ("segs_per_flush", &self.gro_segs_per_flush),
        ] {
            for (b, v) in names.iter().zip(h.iter()) {
                writeln!(f, "hist  {:<20} {v:>14}", format!("{name}[{b}]"))?;
            }
        }
        Ok(())
    }
}
