//! Connection timers (the tcp_timer.c side): retransmission (RFC 6298 §5), delayed ACK
//! (RFC 9293 §3.8.6.3), persist (§3.8.6.1), keepalive (§3.8.4) and TIME-WAIT (§3.6.1).

use super::conn::{Conn, Event};
use super::rtt::RTO_MAX;
use super::{seq, Error, State, Stats};
use crate::time::{Duration, Instant};

/// A connection's deadlines and the counters of the timers' backoff and probes.
#[derive(Debug)]
pub struct Timers {
    /// Retransmission timeout (RFC 6298).
    pub rto: Option<Instant>,
    /// Delayed ACK (RFC 9293 §3.8.6.3).
    pub delack: Option<Instant>,
    /// Zero-window probe (RFC 9293 §3.8.6.1).
    pub persist: Option<Instant>,
    /// End of TIME-WAIT (2*MSL, §3.6.1), or of an orphaned FIN-WAIT-2.
    pub time_wait: Option<Instant>,
    /// Tail loss probe timeout (RFC 8985 §7).
    pub pto: Option<Instant>,
    /// RACK reordering timer (RFC 8985 §6.2 step 5, "RACK_detect_loss_and_arm_timer").
    pub reo: Option<Instant>,
    /// Consecutive RTO expirations (RFC 9293 §3.8.3 R2).
    pub retries: u32,
    pub persist_backoff: u32,
    pub probes_unanswered: u32,
    /// When the timer first retransmitted the data still unacknowledged (Linux
    /// `retrans_stamp`): the user timeout counts from here. Cleared when an ACK brings
    /// progress.
    pub retrans_stamp: Option<Instant>,
    /// When zero-window probing began (Linux `icsk_probes_tstamp`); cleared when the window
    /// opens, not by probe answers that keep it shut.
    pub probe_stamp: Option<Instant>,
    /// Keepalive probes sent without an answer, when the last went, and when the peer was
    /// last heard from (RFC 9293 §3.8.4).
    pub ka_probes: u32,
    pub last_ka: Instant,
    pub last_rx: Instant,
    /// The deadline under which this connection sits in the layer's timer heap.
    pub registered: Option<Instant>,
}

impl Timers {
    pub fn new(now: Instant) -> Self {
        Timers {
            rto: None,
            delack: None,
            persist: None,
            time_wait: None,
            pto: None,
            reo: None,
            retries: 0,
            persist_backoff: 0,
            probes_unanswered: 0,
            retrans_stamp: None,
            probe_stamp: None,
            ka_probes: 0,
            last_ka: now,
            last_rx: now,
            registered: None,
        }
    }

    /// The earliest deadline, with the keepalive deadline (derived from the connection's
    /// state) taken into account.
    pub fn earliest(&self, keepalive: Option<Instant>) -> Option<Instant> {
        // Computed after every segment in and out (the layer reschedules the connection), so
        // it is written as a chain of branch-light pairwise minimums rather than an iterator.
        let a = earlier(self.time_wait, self.rto);
        let b = earlier(self.pto, self.delack);
        let c = earlier(self.persist, keepalive);
        earlier(earlier(a, b), earlier(c, self.reo))
    }

    /// Stops every timer (the connection reached CLOSED).
    pub fn stop_all(&mut self) {
        self.rto = None;
        self.delack = None;
        self.persist = None;
        self.time_wait = None;
        self.pto = None;
        self.reo = None;
    }
}

/// The earlier of two optional deadlines (None = not armed).
#[inline]
fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

const SYNACK_RETRIES: u32 = 5;

impl Conn {
    /// Runs every expired timer. May close the connection (TimedOut, end of TIME-WAIT).
    pub fn on_timers(&mut self, now: Instant, stats: &mut Stats) -> Event {
        if let Some(t) = self.timers.time_wait {
            if now >= t {
                self.enter_closed(None);
                return Event::Closed;
            }
        }
        // A probe armed at the RTO's time goes first (RFC 8985 §7.2, Linux, where the two
        // share one timer): its commit re-arms the RTO; when no probe can go the RTO fires
        // on the next run, the PTO being spent.
        let pto_first = matches!(
            (self.timers.pto, self.timers.rto),
            (Some(p), Some(r)) if now >= p && p <= r
        );
        if let Some(t) = self.timers.rto {
            if now >= t && !pto_first {
                if let Some(ev) = self.on_rto(now, stats) {
                    return ev;
                }
            }
        }
        if let Some(t) = self.timers.reo {
            if now >= t {
                // RFC 8985 §6.2: "RACK_detect_loss_and_arm_timer()" runs again when the
                // reordering timer fires.
                self.timers.reo = None;
                let _ = self.rack_detect_loss(now, true);
            }
        }
        if let Some(t) = self.timers.pto {
            if now >= t {
                self.timers.pto = None;
                if self.snd.recovery().is_none() && self.snd.una() != self.snd.max() {
                    self.snd.on_pto_fired();
                }
            }
        }
        if let Some(t) = self.timers.delack {
            if now >= t {
                self.timers.delack = None;
                self.rcv.owe_ack_now();
                // Linux `tcp_delack_timer_handler`: "Delayed ACK missed: leave pingpong mode
                // and deflate ATO" (the reply the ACK waited for did not come).
                // Otherwise "inflate ATO" (`ato << 1`, at most the RTO).
                if self.rcv.pingpong() {
                    self.rcv.leave_pingpong();
                } else {
                    self.rcv.inflate_ato(self.snd.rtt().rto());
                }
            }
        }
        if self.timers.persist.is_some() && !self.send_pending() {
            self.timers.persist = None;
        }
        if self.timers.persist.is_none() {
            self.timers.probe_stamp = None;
        }
        if let Some(t) = self.timers.persist {
            if now >= t {
                self.timers.probes_unanswered += 1;
                // Linux `tcp_probe_timer`: the first expiry starts the clock; with a user
                // timeout, probing that has lasted that long aborts even though the peer
                // answers (RFC 1122's "stay open while it responds" yields to RFC 5482).
                let since = *self.timers.probe_stamp.get_or_insert(now);
                let user_expired = self.config.user_timeout.is_some_and(|ut| now >= since + ut);
                if user_expired || self.timers.probes_unanswered > self.config.max_retransmits {
                    stats.timeouts += 1;
                    self.enter_closed(Some(Error::TimedOut));
                    return Event::Closed;
                }
                self.persist_probe_due = true;
                self.timers.persist_backoff = self.timers.persist_backoff.saturating_add(1);
                let mut d = self
                    .snd
                    .rtt()
                    .base_rto()
                    .saturating_mul(1u64 << self.timers.persist_backoff.min(16))
                    .min(RTO_MAX);
                // Linux `tcp_clamp_probe0_to_user_timeout`: the next probe comes no later
                // than the user timeout's end (but not sooner than TCP_TIMEOUT_MIN), so the
                // abort happens on time.
                if let Some(ut) = self.config.user_timeout {
                    d = d.min(((since + ut) - now).max(Duration::from_millis(2)));
                }
                self.timers.persist = Some(now + d);
            }
        }
        if let Some(t) = self.keepalive_deadline() {
            if now >= t {
                let (_, _, count) = self.config.keepalive.unwrap_or_default();
                if self.timers.ka_probes >= count {
                    stats.timeouts += 1;
                    // Linux `tcp_keepalive_timer` sends an active reset before giving up
                    // (`tcp_send_active_reset`): a peer that is there after all but whose
                    // ACKs are lost must not keep a half-open connection. RFC 9293 §3.8.4 and
                    // RFC 1122 §4.2.3.6 leave the abort's form open; a RST is what ABORT sends.
                    self.rst_due = self.abort_needs_rst();
                    self.enter_closed(Some(Error::TimedOut));
                    return Event::Closed;
                }
                self.timers.ka_probes += 1;
                self.timers.last_ka = now;
                self.keepalive_due = true;
            }
        }
        Event::None
    }

    /// RFC 8985 §7.2: arm the probe timeout (PTO = 2*SRTT, plus a delayed-ACK allowance when
    /// one segment is in flight, at most until the RTO) when no probe is outstanding.
    #[inline]
    pub fn arm_pto(&mut self, now: Instant) {
        // Nothing in flight (an ACK of everything, the usual case of request/response
        // traffic): no probe to schedule, decided before any of the checks below.
        if self.snd.una() == self.snd.max() {
            return;
        }
        self.arm_pto_in_flight(now, None);
    }

    /// `arm_pto` after sending a segment, with its size (`seg_mss()`) already known.
    #[inline]
    pub(super) fn arm_pto_sized(&mut self, now: Instant, smss: u32) {
        if self.snd.una() == self.snd.max() {
            return;
        }
        self.arm_pto_in_flight(now, Some(smss));
    }

    /// `arm_pto` with data in flight; `smss`: `seg_mss()`, if the caller has it.
    #[inline(never)]
    fn arm_pto_in_flight(&mut self, now: Instant, smss: Option<u32>) {
        // RFC 8985 §7.2: "The sender SHOULD start or restart a loss probe PTO timer after
        // transmitting new data (that was not itself a loss probe) or upon receiving an ACK
        // that cumulatively acknowledges new data unless it is already in fast recovery, RTO
        // recovery, or segments have been SACKed (i.e., RACK.segs_sacked is not zero)." (A
        // connection without SACK keeps the probe: it has no RACK to fall back on.)
        let segs_sacked =
            super::rack::segs_sacked(self.snd.scoreboard().sacked_bytes(), self.snd.mss());
        let in_recovery = self.snd.recovery().is_some() || self.in_rto_recovery();
        if (self.sack_ok && !self.snd.tlp().may_schedule(true, segs_sacked, in_recovery))
            || self.snd.recovery().is_some()
            || self.snd.tlp().episode().is_some()
            || self.snd.wnd() == 0
            || !self.state.may_send()
        {
            return;
        }
        let Some(srtt) = self.snd.rtt().srtt() else {
            return;
        };
        // Linux tcp_output.c `tcp_schedule_loss_probe()`: PTO = 2*SRTT, plus the minimum RTO
        // (TCP_RTO_MIN, 200 ms: the peer's delayed ACK) when one segment is in flight, else
        // plus TCP_TIMEOUT_MIN (2 ms) rather than a floor (with a sub-millisecond SRTT a
        // 10 ms floor made every probe wait 10 ms). RFC 8985 §7.2 leaves TLP.max_ack_delay to
        // the sender ("RECOMMENDED ... 200 ms").
        let smss = smss.unwrap_or_else(|| self.seg_mss());
        let extra = if self.flight() <= smss {
            self.snd.rtt().rto_min()
        } else {
            crate::time::Duration::from_millis(2)
        };
        let mut at = now + srtt.saturating_mul(2) + extra;
        // RFC 8985 §7.2: "If Now() + PTO > TCP_RTO_expiration(): PTO = TCP_RTO_expiration() -
        // Now()"; Linux (`tcp_rto_delta_us`) likewise arms the probe at the RTO's time, and the
        // probe goes instead of the RTO's retransmission (`on_timers` runs it first).
        if let Some(r) = self.timers.rto {
            if r > now && r < at {
                at = r;
            }
        }
        self.timers.pto = Some(at);
    }

    fn keepalive_deadline(&self) -> Option<Instant> {
        let (idle, intvl, _) = self.config.keepalive?;
        if !matches!(self.state, State::Established | State::CloseWait)
            || self.snd.una() != self.snd.max()
            || self.timers.persist.is_some()
        {
            return None;
        }
        Some(if self.timers.ka_probes == 0 {
            self.timers.last_rx + idle
        } else {
            self.timers.last_ka + intvl
        })
    }

    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    fn on_rto(&mut self, now: Instant, stats: &mut Stats) -> Option<Event> {
        // RFC 5482 / Linux `tcp_write_timeout`: with a user timeout, the time since the first
        // retransmission decides, not the retry count. The first expiry never aborts (Linux
        // `retransmits_timed_out` with no retransmission yet) and starts the clock: Linux
        // stamps `retrans_stamp` once the first timer retransmission has gone out (tail loss
        // probes do not count).
        let user_deadline = self
            .config
            .user_timeout
            .map(|ut| *self.timers.retrans_stamp.get_or_insert(now) + ut);
        let user_expired = user_deadline.is_some_and(|d| now >= d) && self.timers.retries > 0;
        self.timers.retries += 1;
        self.counters.total_rto = self.counters.total_rto.saturating_add(1);
        // Handshakes give up sooner (Linux tcp_syn_retries = 6, tcp_synack_retries = 5):
        // half-open state is what SYN floods consume.
        let limit = match self.state {
            State::SynSent => self.config.max_retransmits.min(self.config.syn_retries),
            State::SynReceived => self.config.max_retransmits.min(SYNACK_RETRIES),
            _ => self.config.max_retransmits,
        };
        if user_expired || (user_deadline.is_none() && self.timers.retries > limit) {
            // RFC 9293 §3.8.3 R2: give up.
            stats.timeouts += 1;
            self.enter_closed(Some(Error::TimedOut));
            return Some(Event::Closed);
        }
        // An RTO ends any tail-loss-probe episode (RFC 8985 §7.1: "Reset TLP.is_retrans and
        // TLP.end_seq when initiating ... RTO recovery").
        self.timers.pto = None;
        self.timers.reo = None;
        self.snd.cancel_tlp();
        self.snd.end_tlp_episode();
        // RFC 6298 §5.5: back off; §5.6: restart the timer.
        self.snd.on_rto();
        match self.state {
            State::SynSent | State::SynReceived => {
                self.snd.rewind_to_syn();
            }
            _ => {
                // RFC 5681 §3.1 eq. 4 and loss window; go back to SND.UNA (SACKed data is
                // skipped when resending). RFC 6582: no fast recovery until `recover`.
                // RFC 5681 §3.1: when the segment was already retransmitted by the timer,
                // ssthresh is held constant; only cwnd falls back to the loss window.
                let flight = self.flight();
                if self.timers.retries == 1 {
                    // The reduction may be undone if D-SACKs show every retransmission of
                    // the episode was unnecessary (RFC 2883 §5, RFC 3708).
                    if self.sack_ok {
                        self.snd.start_undo_episode();
                    }
                    self.snd.on_rto_cwnd(now, flight);
                } else {
                    self.snd.set_cwnd(self.snd.mss());
                }
                if let Some(rec) = self.snd.exit_recovery_on_rto() {
                    if rec.sack {
                        self.snd.on_rack_recovery_exit();
                    }
                }
                self.snd.rewind();
                self.snd
                    .on_rto_rewind(seq::lt(self.snd.una(), self.snd.max()));
                // RFC 8985 §6.3, RACK_mark_losses_on_RTO(): the segment at SND.UNA and every
                // segment sent more than RACK.rtt + RACK.reo_wnd ago is lost. (The
                // retransmission itself stays go-back-N from SND.UNA, skipping SACKed data.)
                if self.sack_ok {
                    self.snd.on_rack_rto(now);
                }
            }
        }
        let mut rto = self.snd.rtt().rto();
        // Linux `tcp_clamp_rto_to_user_timeout`: fire at the user timeout's end at the
        // latest (at once if it has passed), so the abort is not late by a backed-off RTO.
        if let Some(d) = user_deadline {
            rto = rto.min((d - now).max(Duration::from_millis(1)));
        }
        self.timers.rto = Some(now + rto);
        None
    }

    /// The earliest timer of this connection.
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.earliest(self.keepalive_deadline())
    }
}
