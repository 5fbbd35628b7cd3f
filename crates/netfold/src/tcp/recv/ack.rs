//! The ACK policy: an ACK owed at once, the delayed-ACK count, quick-ACK mode, reads that
//! may owe a window update.

use super::Receiver;

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
    /// `tcp_enter_quickack_mode` via `__tcp_ecn_check_ce`).
    pub fn enter_quickack(&mut self, n: u8) {
        self.quick_acks = n;
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
        if self.quick_acks > 0 {
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
