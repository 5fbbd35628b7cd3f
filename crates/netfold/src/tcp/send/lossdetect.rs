//! RACK-TLP's state (RFC 8985, `rack.rs`): the segment records and reordering window, the
//! tail loss probe episode, and the flags output acts on — a probe due, the segment at
//! SND.UNA due after an RTO — with when data last left (RFC 5681 §4.1).

use std::collections::VecDeque;

use super::Sender;
use crate::tcp::rack::{self, LossReport, Probe, Rack, SegRecord, Tlp, TlpAck};
use crate::time::{Duration, Instant};
use crate::wire::tcp::SackBlock;

impl Sender {
    /// RACK with room for `capacity` segment records; `now` counts as the last data sent.
    pub fn with_rack(mut self, capacity: usize, now: Instant) -> Self {
        self.rack = Rack::new(capacity);
        self.last_data_tx = now;
        self
    }

    /// RACK (RFC 8985): segment records, RACK.rtt, the reordering window.
    #[inline]
    pub fn rack(&self) -> &Rack {
        &self.rack
    }

    /// The tail loss probe episode (RFC 8985 §7: TLP.end_seq, TLP.is_retrans).
    #[inline]
    pub fn tlp(&self) -> &Tlp {
        &self.tlp
    }

    /// The probe timeout fired: a tail loss probe is to be sent.
    #[inline]
    pub fn tlp_due(&self) -> bool {
        self.tlp_due
    }

    /// An RTO rewound SND.NXT: the segment at SND.UNA is to be resent first.
    #[inline]
    pub fn rto_head_due(&self) -> bool {
        self.rto_head_due
    }

    /// When data was last sent (RFC 5681 §4.1 restart after idle).
    #[inline]
    pub fn last_data_tx(&self) -> Instant {
        self.last_data_tx
    }

    /// The probe timeout fired with data outstanding outside recovery.
    #[inline]
    pub fn on_pto_fired(&mut self) {
        self.tlp_due = true;
    }

    /// No tail loss probe is due any more (sent, not allowed, recovery, RTO, close).
    #[inline]
    pub fn cancel_tlp(&mut self) {
        self.tlp_due = false;
    }

    /// An RTO rewound SND.NXT; `due` whether data is outstanding from SND.UNA.
    #[inline]
    pub fn on_rto_rewind(&mut self, due: bool) {
        self.rto_head_due = due;
    }

    /// The segment at SND.UNA left again, or an ACK moved SND.UNA.
    #[inline]
    pub fn on_head_resent(&mut self) {
        self.rto_head_due = false;
    }

    /// Data left at `now` (RFC 5681 §4.1), or an idle restart counted as sending.
    #[inline]
    pub fn on_data_sent_at(&mut self, now: Instant) {
        self.last_data_tx = now;
    }

    /// A segment of `seg` bytes is the size RACK counts in.
    #[inline]
    pub fn on_rack_segment_size(&mut self, seg: u32) {
        self.rack.set_segment_size(seg);
    }

    /// `start..end` left at `now` with TSval `tsval` (RACK's segment record).
    #[inline]
    pub fn on_rack_sent(&mut self, start: u32, end: u32, now: Instant, tsval: Option<u32>) {
        self.rack.on_send(start, end, now, tsval);
    }

    /// RACK.min_RTT takes a round-trip sample `rtt` measured at `now`.
    pub fn on_rack_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        self.rack.on_rtt_sample(now, rtt);
    }

    /// RFC 8985 §6.2 steps 1-4 for one ACK (`rack::Ack` built from SND.UNA and SND.MAX).
    #[inline]
    pub fn on_rack_ack(
        &mut self,
        now: Instant,
        blocks: &[SackBlock],
        dsack: Option<SackBlock>,
        rtt: Option<Duration>,
        mss: u32,
    ) {
        let a = rack::Ack {
            now,
            una: self.una,
            snd_nxt: self.max,
            sack: blocks,
            dsack,
            // RFC 8985 §6.2 step 2's TSecr condition is not applied (as in Linux
            // `tcp_rack_advance`, which keeps only the min_RTT one): a receiver follows RFC 7323
            // §4.3 and does not take the TSval of a segment above a hole into TS.Recent, so the SACK of a
            // retransmission (a tail loss probe above a lost segment, typically) echoes an
            // older TSval and would never count, leaving the hole to the RTO.
            tsecr: None,
            rtt_sample: rtt,
            mss,
        };
        self.rack.on_ack(&a);
    }

    /// RFC 8985 §6.2 step 5 (or the reordering timer firing, `reo_timer`): RACK marks what
    /// is lost.
    #[inline]
    pub fn rack_detect_loss(
        &mut self,
        now: Instant,
        reo_timer: bool,
        in_recovery: bool,
        segs_sacked: u32,
    ) -> LossReport {
        let srtt = self.rtt.srtt();
        if reo_timer {
            self.rack
                .on_reorder_timeout(now, srtt, in_recovery, segs_sacked, |_, _| {})
        } else {
            self.rack
                .detect_loss(now, srtt, in_recovery, segs_sacked, |_, _| {})
        }
    }

    /// RFC 8985 §6.2 step 4: a SACK recovery ended.
    #[inline]
    pub fn on_rack_recovery_exit(&mut self) {
        self.rack.on_recovery_exit();
    }

    /// A D-SACK undo happened (RACK's reordering window grows).
    pub fn on_rack_undo(&mut self) {
        self.rack.on_undo();
    }

    /// RFC 8985 §6.3, RACK_mark_losses_on_RTO().
    pub fn on_rack_rto(&mut self, now: Instant) {
        self.rack.on_rto(now, self.una, |_, _| {});
    }

    /// RACK's record list storage, emptied, for a recycled control block (`Conn::renew`).
    pub fn take_rack_storage(&mut self) -> VecDeque<SegRecord> {
        self.rack.take_storage()
    }

    /// Reuses `v`'s allocation for RACK's records.
    pub fn adopt_rack_storage(&mut self, v: VecDeque<SegRecord>) {
        self.rack.adopt_storage(v);
    }

    /// The TLP episode ends (RFC 8985 §7.1: fast recovery, an RTO, or an ACK that covers it).
    #[inline]
    pub fn end_tlp_episode(&mut self) {
        self.tlp.reset();
    }

    /// RFC 8985 §7.3: an RTT measurement since the last probe.
    #[inline]
    pub fn on_tlp_rtt_sample(&mut self) {
        self.tlp.on_rtt_sample();
    }

    /// The probe `probe` left; TLP.end_seq is SND.MAX after it (RFC 8985 §7.3).
    pub fn on_tlp_sent(&mut self, probe: Probe) {
        self.tlp.on_probe_sent(probe, self.max);
    }

    /// RFC 8985 §7.4.2, TLP_process_ack().
    #[inline]
    pub fn on_tlp_ack(
        &mut self,
        ack: u32,
        dsack: Option<SackBlock>,
        dupack_without_sack: bool,
    ) -> TlpAck {
        self.tlp.on_ack(ack, dsack, dupack_without_sack)
    }
}
