//! Header prediction: the segment an established connection expects next, processed without
//! the general SEGMENT ARRIVES procedure.
//!
//! Van Jacobson's observation (his 1990 "TCP in 30 instructions" note; RFC 1323 Appendix A,
//! and Linux's `tcp_rcv_established` fast path): on a connection carrying data, nearly every
//! segment is either the next in-order data with nothing unusual in its header, or a pure ACK
//! of new data. For those the eight checks of RFC 9293 §3.10.7.4 all take their first,
//! uneventful branch, and so do SACK, D-SACK, duplicate-ACK counting, ECN, TLP episodes and
//! the zero-window machinery. [`Conn::input_predicted`] tests, cheaply, that a segment is one
//! of those and that the connection is in the state where those branches cannot be taken;
//! then it does exactly what the general procedure would do, in one straight path. Anything
//! else goes the general way. The two paths are checked against each other by replaying
//! lossy, reordering, duplicating exchanges with prediction on and off and comparing every
//! segment on the wire (tests/tcp.rs `header_prediction_changes_nothing_on_the_wire`).
//!
//! Unlike Linux's `pred_flags`, the prediction does not require the peer's window to be
//! unchanged: netfold's general path does nothing with a changed non-zero window but record
//! it (a zero window, which starts the persist machinery, goes the general way), and peers
//! that announce their free space change it on nearly every segment.

use super::conn::{Conn, Ctx};
use super::{seq, Payload, State};
use crate::wire::tcp::{TcpFlags, TcpRepr};

impl Conn {
    /// Processes `seg` if it is predicted (see the module documentation) and returns true;
    /// returns false, having changed nothing, for every other segment.
    #[inline]
    pub(super) fn input_predicted(
        &mut self,
        ctx: &mut Ctx<'_>,
        seg: &TcpRepr,
        payload: Payload<'_>,
    ) -> bool {
        if !self.predictable(seg, payload.len()) {
            return false;
        }
        let now = ctx.now;
        ctx.stats.predicted += 1;
        // The checks in RFC order, each at its uneventful branch: PAWS passed (TSval is not
        // older than TS.Recent), the sequence number is RCV.NXT (acceptable, nothing to trim,
        // no duplicate to report), then RFC 7323 §4.3 TS.Recent, no RST, no SYN.
        self.update_ts_recent(ctx, seg);
        // Fifth check, ACK: SND.UNA =< SEG.ACK =< SND.MAX.
        let acked = seq::dist(self.snd.una(), seg.ack);
        // RACK's microsecond RTT sample (RFC 8985 §6.2 step 1), for data newly acknowledged.
        let rack_rtt = if self.sack_ok && acked > 0 {
            self.snd.rack().karn_sample(now, seg.ack)
        } else {
            None
        };
        if acked > 0 {
            let cwnd_limited = self.cwnd_limited();
            self.take_cumulative_ack(ctx, seg);
            if let Some(rtt) = rack_rtt {
                self.cc_rtt_sample(now, rtt);
            }
            // Not in recovery (predicted): the congestion controller's ACK.
            self.grow_cwnd(now, acked, cwnd_limited);
            self.restart_rto(now);
        }
        // RACK runs on every acceptable ACK (§6.2).
        if self.sack_ok {
            self.rack_on_ack(now, &[], None, rack_rtt);
        }
        // No TLP episode is open (predicted): RFC 8985 §7.4.2 has nothing to end. The probe
        // timer restarts on an ACK of new data (§7.2).
        if acked > 0 {
            self.timers.pto = None;
            self.arm_pto(now);
        }
        // The window update (SND.WL1/SND.WL2 rule); a non-zero window (predicted) leaves the
        // persist machinery idle.
        let wnd = u32::from(seg.window) << self.snd.wscale();
        self.take_window(seg, wnd);
        self.window_open(now);
        // Seventh check, segment text: in order, at RCV.NXT.
        if !payload.is_empty() {
            self.receive_data(ctx, seg.seq, payload, false);
        }
        true
    }

    /// The prediction: an established connection, outside every recovery and probing state,
    /// and a segment carrying only ACK (and PSH) at RCV.NXT, acknowledging nothing older than
    /// SND.UNA and nothing unsent, with a non-zero window, no SACK blocks and a valid
    /// timestamp; data, if any, in order into an empty reassembly queue of an open receiver.
    /// A pure ACK must acknowledge new data (one that does not is a duplicate ACK or a window
    /// probe's answer).
    #[inline]
    fn predictable(&self, seg: &TcpRepr, len: usize) -> bool {
        let ts_ok = match (self.ts.enabled, seg.options.timestamps) {
            (false, _) => true,
            (true, Some(ts)) => !seq::lt(ts.tsval, self.ts.recent),
            (true, None) => false,
        };
        self.config.header_prediction
            && self.state == State::Established
            && seg.flags.0 & !TcpFlags::PSH == TcpFlags::ACK
            && seg.seq == self.rcv.nxt()
            && seq::le(self.snd.una(), seg.ack)
            && seq::le(seg.ack, self.snd.max())
            && (len > 0 || seg.ack != self.snd.una())
            && seg.options.sack_count == 0
            && ts_ok
            && seg.window != 0
            && self.timers.persist.is_none()
            && self.snd.recovery().is_none()
            && !self.in_rto_recovery()
            && self.snd.dupacks() == 0
            && self.snd.tlp().episode().is_none()
            && self.snd.scoreboard().is_empty()
            && !(self.ecn.ok && self.ecn.rx_ce)
            && (len == 0
                || (!self.user_closed
                    && self.rcv.fin().is_none()
                    && self.rcv.ring().asm.is_empty()
                    && self.rcv.announced() > 0))
    }
}
