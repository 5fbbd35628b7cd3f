//! Socket-buffer auto-tuning, after Linux:
//! - RECEIVE (`tcp_rcv_space_adjust`, "dynamic right-sizing"): once per RTT, count what the
//!   application read in that RTT; if it is more than ever before, grow the receive buffer to
//!   twice that plus 16 segments (reordering and losses need room beyond one window), plus
//!   twice the relative increase over the previous maximum (the sender's cwnd may double in
//!   the next RTT during slow start), up to `Config::recv_buffer_max`. A slow
//!   reader reads little per RTT and its buffer stays small.
//! - SEND (`tcp_sndbuf_expand`): when the application found the send ring full and an ACK
//!   arrives while cwnd is not filled, grow the send buffer to twice cwnd (one window in
//!   flight, one queued behind it), up to `Config::send_buffer_max`.
//!
//! Sizes grow along a ladder (the initial size times powers of two, capped at the maximum) so
//! that rings returned to the stack's [`RingCache`] fit the next connection reaching the same
//! step. Every step is charged to the stack's socket-buffer budget (the cache's account):
//! when the budget is exhausted growth stops and `Stats::buffer_budget_refusals` counts it —
//! the connection keeps working with the buffer it has (back-pressure, never an allocation
//! failure). Rings never shrink on a live connection (as in Linux).
//!
//! The RTT used is the connection's smoothed RTT; a receive-only connection has its sample
//! from the handshake, i.e. the unloaded path RTT (Linux's receiver estimate also keeps the
//! minimum). Without any sample the initial RTO stands in.

use super::buffer::RingCache;
use super::cc::CongestionController;
use super::conn::Conn;
use super::{State, Stats};
use crate::time::Instant;

/// Segments of headroom beyond twice the per-RTT read (Linux: `16 * advmss`).
pub(super) const RCV_HEADROOM_SEGS: usize = 16;
/// Linux `TCP_INIT_CWND`: the reference for the first per-RTT measurement.
pub(super) const RCV_INITIAL_SPACE_SEGS: usize = 10;

/// The next size on the ladder `initial * 2^k` that is at least `want`, capped at `max`.
pub fn ladder_step(current: usize, want: usize, max: usize) -> usize {
    let mut size = current.max(1);
    while size < want && size < max {
        size = size.saturating_mul(2);
    }
    size.min(max)
}

impl Conn {
    /// Runs both tuners after input (the layer calls it with the stack's ring cache).
    #[inline]
    pub fn tune_buffers(&mut self, now: Instant, rings: &mut RingCache, stats: &mut Stats) {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait
        ) {
            return;
        }
        self.rcv_space_adjust(now, rings, stats);
        self.sndbuf_expand(rings, stats);
    }

    /// Linux `tcp_rcv_space_adjust`: measure what the application read in the last RTT
    /// (the receiver does the measuring and growing, `Receiver::space_adjust`).
    fn rcv_space_adjust(&mut self, now: Instant, rings: &mut RingCache, stats: &mut Stats) {
        let rtt = self.snd.rtt().srtt().unwrap_or(self.config.rto_initial);
        match self.rcv.space_adjust(now, rtt, rings) {
            Some(true) => stats.rcvbuf_grown += 1,
            Some(false) => stats.buffer_budget_refusals += 1,
            None => {}
        }
    }

    /// Linux `tcp_sndbuf_expand` (from `tcp_new_space`, `tcp_should_expand_sndbuf`).
    fn sndbuf_expand(&mut self, rings: &mut RingCache, stats: &mut Stats) {
        if !self.snd.may_grow() {
            return;
        }
        let cwnd = self.snd.cc().cwnd() as usize;
        // A full cwnd means the network, not the buffer, limits the sender.
        if self.snd.flight() as usize >= cwnd {
            return;
        }
        self.snd.on_growth_check();
        let cap = self.snd.ring().capacity();
        let want = cwnd.saturating_mul(2);
        if want <= cap {
            return;
        }
        let new = ladder_step(cap, want, self.snd.buf_max());
        if new <= cap {
            return;
        }
        if self.snd.grow_ring(new, rings) {
            stats.sndbuf_grown += 1;
        } else {
            stats.buffer_budget_refusals += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ladder_step;

    #[test]
    fn ladder_doubles_to_the_cap() {
        let k = 1024;
        assert_eq!(ladder_step(256 * k, 300 * k, 6144 * k), 512 * k);
        assert_eq!(ladder_step(256 * k, 1500 * k, 6144 * k), 2048 * k);
        assert_eq!(ladder_step(4096 * k, 7000 * k, 6144 * k), 6144 * k);
        assert_eq!(ladder_step(6144 * k, 9000 * k, 6144 * k), 6144 * k);
    }
}
