//! The ACK policy: an ACK owed at once, the delayed-ACK count, quick-ACK mode, reads that
//! may owe a window update.

use super::Receiver;
use crate::time::Duration;

/// Linux `TCP_ATO_MIN` (HZ/25): the delayed-ACK engine's least inter-arrival estimate.
pub const ATO_MIN: Duration = Duration::from_millis(40);

/// The ACK policy: quick-ACK mode and window updates owed after reads.
impl Receiver {
    /// An ACK is owed at once.
    #[inline(always)]
    pub fn ack_now(&self) -> bool {
        self.ack_now
    }

    /// Something happened that the peer must hear of at once: the next output sends an ACK.
    #[inline(always)]
    pub fn owe_ack_now(&mut self) {
        self.ack_now = true;
    }

    /// No ACK is owed at once any more (the connection closed, or a segment that carries
    /// the acknowledgment is on its way: a Fast Open SYN-ACK).
    #[inline]
    pub fn cancel_ack_now(&mut self) {
        self.ack_now = false;
    }

    /// An ACK of everything received left (the last snapshot of a merged arrival): nothing
    /// is owed at once, and the delayed-ACK count starts over.
    #[inline]
    pub fn settle_acks(&mut self) {
        self.ack_now = false;
        self.unacked_bytes = 0;
    }

    /// An ACK of everything received is queued (a snapshot): the delayed-ACK count starts
    /// over.
    #[inline]
    pub fn reset_unacked(&mut self) {
        self.unacked_bytes = 0;
    }

    /// In-order `n` bytes arrived under the delayed-ACK rule; returns the bytes now
    /// unacknowledged.
    #[inline]
    pub fn add_unacked(&mut self, n: usize) -> usize {
        self.unacked_bytes += n;
        self.unacked_bytes
    }

    /// Quick-ACK mode for exactly the next `n` in-order arrivals (a CE mark: Linux
    /// `tcp_enter_quickack_mode` via `__tcp_ecn_check_ce`). Like every entry into quick-ACK
    /// mode, it ends interactive mode.
    pub fn enter_quickack(&mut self, n: u8) {
        self.quick_acks = n;
        self.leave_pingpong();
    }

    /// Linux `tcp_enter_quickack_mode(sk, max)`: quick ACKs for about a window
    /// ([`Receiver::incr_quickack`]), interactive mode off, and the delayed-ACK engine
    /// restarted at `TCP_ATO_MIN`.
    pub fn enter_quickack_mode(&mut self, max: u8) {
        self.incr_quickack(max);
        self.leave_pingpong();
    }

    /// Interactive mode off, the inter-arrival estimate back at its minimum (Linux
    /// `inet_csk_exit_pingpong_mode` with `ato = TCP_ATO_MIN`; also what its delayed-ACK
    /// timer does when it fires in interactive mode: "Delayed ACK missed").
    pub fn leave_pingpong(&mut self) {
        self.pingpong = false;
        self.ato = ATO_MIN;
    }

    /// Data of ours left at `now` (Linux `tcp_event_data_sent`): sent within the inter-arrival
    /// estimate of the last data received (or of the handshake's completion), it is a
    /// reply, and the connection is interactive: its ACKs ride on its data, so in-order
    /// arrivals are acknowledged under the delayed-ACK rule rather than at once.
    #[inline]
    pub fn on_data_sent(&mut self, now: crate::time::Instant) {
        if self.pingpong {
            return;
        }
        if let Some(t) = self.last_data_rx.or(self.synced_at) {
            if now.saturating_since(t) < self.ato {
                self.pingpong = true;
            }
        }
    }

    /// The delayed-ACK timer fired outside interactive mode: the inter-arrival estimate
    /// doubles, at most to `rto` (Linux `tcp_delack_timer_handler`).
    pub fn inflate_ato(&mut self, rto: Duration) {
        self.ato = self.ato.saturating_mul(2).min(rto);
    }

    /// The connection is interactive (Linux `inet_csk_in_pingpong_mode`).
    #[inline]
    pub fn pingpong(&self) -> bool {
        self.pingpong
    }

    /// Quick-ACK mode for at least the next `n` in-order arrivals (after a gap was filled).
    #[inline]
    pub fn quickack_at_least(&mut self, n: u8) {
        self.quick_acks = self.quick_acks.max(n);
    }

    /// An in-order arrival in quick-ACK mode: uses one of the quick ACKs; false when the mode
    /// is over (the delayed-ACK rule applies).
    #[inline]
    pub fn use_quickack(&mut self) -> bool {
        // Linux `tcp_in_quickack_mode`: `icsk_ack.quick && !inet_csk_in_pingpong_mode(sk)`
        // (the budget is kept for when interactive mode ends).
        if self.quick_acks > 0 && !self.pingpong {
            self.quick_acks -= 1;
            true
        } else {
            false
        }
    }

    /// The application consumed `n` bytes: counted for auto-tuning, and a window update may
    /// be owed.
    #[inline]
    pub fn note_read(&mut self, n: usize) {
        self.read_since_ack |= n > 0;
        self.space.copied += n as u64;
    }

    /// The application gave back borrowed frames (their payload was counted when read): the
    /// window they held reopens, so a window update may be owed.
    pub fn note_frames_released(&mut self) {
        self.read_since_ack = true;
    }
}
