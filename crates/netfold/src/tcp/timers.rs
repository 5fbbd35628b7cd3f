//! Connection timers (the tcp_timer.c side): retransmission (RFC 6298 §5), delayed ACK
//! (RFC 9293 §3.8.6.3), persist (§3.8.6.1), keepalive (§3.8.4) and TIME-WAIT (§3.6.1).

use super::cc::CongestionController;
use super::conn::{Conn, Event};
use super::rtt::RTO_MAX;
use super::{Error, State, Stats};
use crate::time::Instant;

const SYN_RETRIES: u32 = 6;
const SYNACK_RETRIES: u32 = 5;

impl Conn {
    /// Runs every expired timer. May close the connection (TimedOut, end of TIME-WAIT).
    pub fn on_timers(&mut self, now: Instant, stats: &mut Stats) -> Event {
        if let Some(t) = self.timewait_at {
            if now >= t {
                self.enter_closed(None);
                return Event::Closed;
            }
        }
        if let Some(t) = self.rto_at {
            if now >= t {
                if let Some(ev) = self.on_rto(now, stats) {
                    return ev;
                }
            }
        }
        if let Some(t) = self.pto_at {
            if now >= t {
                self.pto_at = None;
                if self.recovery.is_none() && self.snd_una != self.snd_max {
                    self.tlp_due = true;
                }
            }
        }
        if let Some(t) = self.delack_at {
            if now >= t {
                self.delack_at = None;
                self.ack_now = true;
            }
        }
        if self.persist_at.is_some() && !self.send_pending() {
            self.persist_at = None;
        }
        if let Some(t) = self.persist_at {
            if now >= t {
                self.probes_unanswered += 1;
                if self.probes_unanswered > self.config.max_retransmits {
                    stats.timeouts += 1;
                    self.enter_closed(Some(Error::TimedOut));
                    return Event::Closed;
                }
                self.persist_probe_due = true;
                self.persist_backoff = self.persist_backoff.saturating_add(1);
                let d = self
                    .rtt
                    .base_rto()
                    .saturating_mul(1u64 << self.persist_backoff.min(16))
                    .min(RTO_MAX);
                self.persist_at = Some(now + d);
            }
        }
        if let Some(t) = self.keepalive_deadline() {
            if now >= t {
                let (_, _, count) = self.config.keepalive.unwrap_or_default();
                if self.ka_probes >= count {
                    stats.timeouts += 1;
                    self.enter_closed(Some(Error::TimedOut));
                    return Event::Closed;
                }
                self.ka_probes += 1;
                self.last_ka = now;
                self.keepalive_due = true;
            }
        }
        Event::None
    }

    /// RFC 8985 §7.2: arm the probe timeout (PTO = 2*SRTT, plus a delayed-ACK allowance when
    /// one segment is in flight) if it fires before the RTO and no probe is outstanding.
    pub fn arm_pto(&mut self, now: Instant) {
        if self.recovery.is_some()
            || self.tlp_end.is_some()
            || self.snd_una == self.snd_max
            || self.snd_wnd == 0
            || !matches!(
                self.state,
                State::Established
                    | State::CloseWait
                    | State::FinWait1
                    | State::Closing
                    | State::LastAck
            )
        {
            return;
        }
        let Some(srtt) = self.rtt.srtt() else { return };
        let mut pto = srtt.saturating_mul(2);
        if self.flight() <= self.seg_mss() {
            pto = pto + self.config.delayed_ack.unwrap_or_default();
        }
        let pto = pto.max(crate::time::Duration::from_millis(10));
        let at = now + pto;
        if self.rto_at.is_some_and(|r| r <= at) {
            self.pto_at = None;
            return;
        }
        self.pto_at = Some(at);
    }

    fn keepalive_deadline(&self) -> Option<Instant> {
        let (idle, intvl, _) = self.config.keepalive?;
        if !matches!(self.state, State::Established | State::CloseWait)
            || self.snd_una != self.snd_max
            || self.persist_at.is_some()
        {
            return None;
        }
        Some(if self.ka_probes == 0 {
            self.last_rx + idle
        } else {
            self.last_ka + intvl
        })
    }

    fn on_rto(&mut self, now: Instant, stats: &mut Stats) -> Option<Event> {
        self.retries += 1;
        // Handshakes give up sooner (Linux tcp_syn_retries = 6, tcp_synack_retries = 5):
        // half-open state is what SYN floods consume.
        let limit = match self.state {
            State::SynSent => self.config.max_retransmits.min(SYN_RETRIES),
            State::SynReceived => self.config.max_retransmits.min(SYNACK_RETRIES),
            _ => self.config.max_retransmits,
        };
        if self.retries > limit {
            // RFC 9293 §3.8.3 R2: give up.
            stats.timeouts += 1;
            self.enter_closed(Some(Error::TimedOut));
            return Some(Event::Closed);
        }
        // An RTO ends any tail-loss-probe episode (RFC 8985 §7.3).
        self.pto_at = None;
        self.tlp_due = false;
        self.tlp_end = None;
        // RFC 6298 §5.5: back off; §5.6: restart the timer.
        self.rtt.on_timeout();
        self.rtt_timing = None;
        match self.state {
            State::SynSent | State::SynReceived => {
                self.snd_nxt = self.iss;
            }
            _ => {
                // RFC 5681 §3.1 eq. 4 and loss window; go back to SND.UNA (SACKed data is
                // skipped when resending). RFC 6582: no fast recovery until `recover`.
                // RFC 5681 §3.1: when the segment was already retransmitted by the timer,
                // ssthresh is held constant; only cwnd falls back to the loss window.
                let flight = self.flight();
                if self.retries == 1 {
                    self.cc.on_rto(now, flight, self.mss);
                } else {
                    self.cc.set_cwnd(self.mss);
                }
                self.recovery = None;
                self.dupacks = 0;
                self.recover = self.snd_max;
                self.snd_nxt = self.snd_una;
            }
        }
        self.rto_at = Some(now + self.rtt.rto());
        None
    }

    /// The earliest timer of this connection.
    pub fn next_timer(&self) -> Option<Instant> {
        [
            self.timewait_at,
            self.rto_at,
            self.pto_at,
            self.delack_at,
            self.persist_at,
            self.keepalive_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
