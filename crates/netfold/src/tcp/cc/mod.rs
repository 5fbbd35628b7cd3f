//! Congestion control behind a small trait. The connection owns loss detection and recovery
//! (RFC 6675 / RFC 6582); an algorithm only says how cwnd and ssthresh move.

pub mod cubic;
pub mod hystart;
pub mod newreno;
pub mod usage;

use crate::time::{Duration, Instant};

pub use cubic::Cubic;
pub use newreno::NewReno;
pub use usage::CwndUsage;

/// RFC 6928 §2: initial window of min(10*MSS, max(2*MSS, 14600)) bytes.
pub fn initial_window(mss: u32) -> u32 {
    (10 * mss).min((2 * mss).max(14600))
}

/// Slow start growth for `acked` newly acknowledged bytes, never past ssthresh.
///
/// RFC 5681 §3.1 limits growth to one SMSS per ACK and RFC 3465 §2.3 to L = 2*SMSS; both
/// assume roughly one ACK per two segments. netfold receivers (and Linux with GRO) acknowledge
/// whole batches with one stretch ACK, so, like Linux `tcp_slow_start`, we count every
/// acknowledged byte: the window still at most doubles per RTT, which is what slow start means.
pub fn slow_start(cwnd: u32, ssthresh: u32, acked: u32) -> u32 {
    cwnd.saturating_add(acked.min(cwnd)).min(ssthresh.max(cwnd))
}

/// What a congestion control algorithm must provide.
pub trait CongestionController {
    fn cwnd(&self) -> u32;
    fn ssthresh(&self) -> u32;
    /// Overrides cwnd (fast-recovery inflation/deflation, RFC 6582, is done by the caller).
    fn set_cwnd(&mut self, cwnd: u32);
    /// New data acknowledged outside loss recovery.
    fn on_ack(&mut self, now: Instant, acked: u32, mss: u32, srtt: Option<Duration>);
    /// A loss was detected by duplicate ACKs/SACK (entering fast recovery): set ssthresh and
    /// cwnd = ssthresh.
    fn on_loss(&mut self, now: Instant, flight: u32, mss: u32);
    /// The retransmission timer expired (RFC 5681 §3.1 eq. 4, loss window 1 MSS).
    fn on_rto(&mut self, now: Instant, flight: u32, mss: u32);
    /// A congestion response turned out to be unnecessary (every retransmission of the
    /// episode was reported as a duplicate, RFC 2883 / RFC 3708): restore cwnd and ssthresh
    /// (Linux `tcp_undo_cwnd_reduction`).
    fn undo(&mut self, cwnd: u32, ssthresh: u32);
    /// A round-trip sample of an ACK, before `on_ack` grows cwnd for it (Linux
    /// `pkts_acked`): `una`/`nxt` are SND.UNA after the ACK and SND.NXT. CUBIC's HyStart
    /// may end slow start here.
    fn on_rtt_sample(&mut self, _s: RttSample) {}
}

/// What [`CongestionController::on_rtt_sample`] gets.
#[derive(Debug, Clone, Copy)]
pub struct RttSample {
    pub now: Instant,
    pub rtt: Duration,
    pub una: u32,
    pub nxt: u32,
    pub mss: u32,
    pub srtt: Option<Duration>,
}

/// The per-socket algorithm, dispatched statically.
#[derive(Debug, Clone)]
pub enum Cc {
    NewReno(NewReno),
    Cubic(Cubic),
}

impl Cc {
    pub fn new(kind: super::CongestionControl, mss: u32) -> Self {
        match kind {
            super::CongestionControl::NewReno => Cc::NewReno(NewReno::new(mss)),
            super::CongestionControl::Cubic => Cc::Cubic(Cubic::new(mss)),
        }
    }
}

/// Calls the algorithm's method by a `match`, not through a `dyn` reference: `cwnd()` is
/// asked several times per segment, and an indirect call is neither inlined nor cheap.
macro_rules! each {
    ($self:expr, $c:ident => $e:expr) => {
        match $self {
            Cc::NewReno($c) => $e,
            Cc::Cubic($c) => $e,
        }
    };
}

/// cwnd never exceeds 1 GiB: far above any window (max 2^30 with scale 14) and well inside
/// the 2^31 limit of sequence-space comparisons.
pub const MAX_CWND: u32 = 1 << 30;

impl CongestionController for Cc {
    #[inline]
    fn cwnd(&self) -> u32 {
        each!(self, c => c.cwnd())
    }
    #[inline]
    fn ssthresh(&self) -> u32 {
        each!(self, c => c.ssthresh())
    }
    fn set_cwnd(&mut self, cwnd: u32) {
        each!(self, c => c.set_cwnd(cwnd.min(MAX_CWND)))
    }
    fn on_ack(&mut self, now: Instant, acked: u32, mss: u32, srtt: Option<Duration>) {
        each!(self, c => c.on_ack(now, acked, mss, srtt));
        if self.cwnd() > MAX_CWND {
            self.set_cwnd(MAX_CWND);
        }
    }
    fn on_loss(&mut self, now: Instant, flight: u32, mss: u32) {
        each!(self, c => c.on_loss(now, flight, mss))
    }
    fn on_rto(&mut self, now: Instant, flight: u32, mss: u32) {
        each!(self, c => c.on_rto(now, flight, mss))
    }
    fn undo(&mut self, cwnd: u32, ssthresh: u32) {
        each!(self, c => c.undo(cwnd.min(MAX_CWND), ssthresh))
    }
    #[inline]
    fn on_rtt_sample(&mut self, s: RttSample) {
        if let Cc::Cubic(c) = self {
            c.on_rtt_sample(s);
        }
    }
}
