//! Fast recovery (RFC 6675 §5 with SACK, RFC 6582 without): the recovery in progress, the
//! duplicate ACK count and RFC 6582's `recover`.

use super::Sender;
use crate::tcp::cc::CongestionController;
use crate::tcp::seq;
use crate::time::Instant;

/// Loss recovery in progress (RFC 6675 §5 with SACK, RFC 6582 without).
#[derive(Debug, Clone, Copy)]
pub struct Recovery {
    /// RecoveryPoint / "recover": SND.MAX when recovery started.
    pub point: u32,
    pub sack: bool,
    /// One past the highest byte retransmitted in this recovery (HighRxt + 1).
    pub rxt_next: u32,
    /// The segment at SND.UNA must be retransmitted now (entry, or a NewReno partial ACK).
    pub rxt_una: bool,
    /// RFC 6937 (Proportional Rate Reduction, SACK recovery only): bytes the peer received
    /// since recovery began (`prr_delivered`), bytes sent since (`prr_out`), and the
    /// window when it began (RecoverFS; Linux uses `prior_cwnd`).
    pub prr_delivered: u32,
    pub prr_out: u32,
    pub prior_cwnd: u32,
}

impl Sender {
    /// The fast recovery in progress, if any.
    #[inline]
    pub fn recovery(&self) -> Option<Recovery> {
        self.recovery
    }

    /// Duplicate ACKs since the last ACK of new data outside recovery (RFC 5681 §2).
    #[inline]
    pub fn dupacks(&self) -> u32 {
        self.dupacks
    }

    /// RFC 6582 `recover`: no new fast recovery until an ACK passes it.
    #[inline]
    pub fn recover(&self) -> u32 {
        self.recover
    }

    /// A duplicate ACK arrived (RFC 5681 §2).
    #[inline]
    pub fn on_dupack(&mut self) {
        self.dupacks = self.dupacks.saturating_add(1);
    }

    /// An ACK of new data outside recovery: no duplicate ACKs are pending.
    #[inline]
    pub fn clear_dupacks(&mut self) {
        self.dupacks = 0;
    }

    /// Fast retransmit (RFC 6675 §5 steps (1)-(3) / RFC 6582 §3.2 step 2) with `flight`
    /// bytes out; `sack` whether the connection uses SACK.
    pub fn enter_recovery(&mut self, now: Instant, flight: u32, sack: bool) {
        let mss = self.mss;
        let prior_cwnd = self.cc.cwnd();
        self.cc.on_loss(now, flight, mss);
        if !sack {
            // RFC 6582 `recover`. With SACK only an RTO sets it: RACK marks individual
            // segments lost, so a loss right at the previous recovery point is a new loss.
            self.recover = self.max;
            let c = self.cc.ssthresh().saturating_add(3 * mss);
            self.cc.set_cwnd(c);
        }
        self.recovery = Some(Recovery {
            point: self.max,
            sack,
            rxt_next: self.una,
            // With SACK, RACK's marks say what to retransmit (RFC 8985 §6.2); the segment
            // at SND.UNA goes first when it is marked.
            rxt_una: !sack,
            prr_delivered: 0,
            prr_out: 0,
            prior_cwnd: prior_cwnd.max(1),
        });
        self.rtt_timing = None;
    }

    /// Full acknowledgment: leave recovery (RFC 6582 §3.2 step 3, RFC 6675 §5).
    #[inline]
    pub fn exit_recovery(&mut self) {
        self.recovery = None;
        self.dupacks = 0;
    }

    /// The data in flight is to be sent again from SND.UNA (zero window, lowered MSS): the
    /// recovery in progress, if any, ends.
    #[inline]
    pub fn abandon_recovery(&mut self) {
        self.recovery = None;
    }

    /// The retransmission timer expired: any fast recovery ends (returned), and no new one
    /// starts until the ACK passes SND.MAX (RFC 6582 `recover`).
    pub fn exit_recovery_on_rto(&mut self) -> Option<Recovery> {
        let rec = self.recovery.take();
        self.dupacks = 0;
        self.recover = self.max;
        rec
    }

    /// A partial ACK up to `ack` newly acknowledging `acked` bytes during recovery.
    pub fn on_partial_ack(&mut self, ack: u32, acked: u32, mss: u32) {
        let Some(rec) = self.recovery.as_mut() else {
            return;
        };
        if rec.sack {
            // RFC 6675 §5 (C): a partial ACK only updates the scoreboard; NextSeg
            // picks what to retransmit. (Forcing a retransmission at the new
            // SND.UNA, NewReno style, resends holes already retransmitted.)
            rec.rxt_next = seq::max(rec.rxt_next, ack);
        } else {
            // RFC 6582 §3.2 step 5: partial ACK -> retransmit the first unacked
            // segment, deflate cwnd by the amount acked, add back one SMSS.
            rec.rxt_una = true;
            rec.rxt_next = ack;
            let mut c = self.cc.cwnd().saturating_sub(acked);
            if acked >= mss {
                c += mss;
            }
            self.cc.set_cwnd(c.max(mss));
        }
    }

    /// `len` bytes ending at `end` left during recovery: a retransmission (`resend`) of a
    /// hole (`hole`) or of the segment at SND.UNA, or new data.
    #[inline]
    pub fn on_recovery_sent(&mut self, len: u32, end: u32, resend: bool, hole: bool) {
        if let Some(rec) = self.recovery.as_mut() {
            // RFC 6937: "prr_out += (data sent)".
            rec.prr_out = rec.prr_out.saturating_add(len);
            if resend {
                if hole {
                    rec.rxt_next = seq::max(rec.rxt_next, end);
                }
                rec.rxt_una = false;
            }
        }
    }

    /// RFC 6937 Proportional Rate Reduction for one ACK of a SACK recovery that delivered
    /// `delivered` bytes (> 0), with `pipe` bytes in flight and segments of `smss`; see
    /// `Conn::prr_on_ack`.
    pub fn on_prr_ack(
        &mut self,
        delivered: u32,
        una_advanced: bool,
        newly_lost: bool,
        smss: u32,
        pipe: u32,
    ) {
        let Some(rec) = self.recovery.as_mut() else {
            return;
        };
        rec.prr_delivered = rec.prr_delivered.saturating_add(delivered);
        let ssthresh = self.cc.ssthresh();
        let mut sndcnt = if pipe > ssthresh {
            let target = (u64::from(rec.prr_delivered) * u64::from(ssthresh))
                .div_ceil(u64::from(rec.prior_cwnd));
            (target as i64 - i64::from(rec.prr_out)).max(0) as u32
        } else {
            let mut limit = rec.prr_delivered.saturating_sub(rec.prr_out).max(delivered);
            if una_advanced && !newly_lost {
                limit = limit.saturating_add(smss);
            }
            limit.min(ssthresh - pipe)
        };
        if rec.prr_out == 0 {
            sndcnt = sndcnt.max(smss);
        }
        self.cc.set_cwnd(pipe.saturating_add(sndcnt).max(smss));
    }
}
