//! D-SACK undo (RFC 2883 §5, RFC 3708; Linux `tcp_try_undo_dsack`): the window before a
//! reduction, restored when D-SACKs show every retransmission of the episode was
//! unnecessary (`dsack.rs`).

use super::Sender;
use crate::tcp::cc::CongestionController;
use crate::tcp::dsack::DsackSender;
use crate::wire::tcp::SackBlock;

impl Sender {
    /// The D-SACK undo state and its counters.
    #[inline]
    pub fn dsack_tx(&self) -> &DsackSender {
        &self.dsack_tx
    }

    /// A window reduction begins (fast recovery or the first RTO of a SACK connection):
    /// what an undo would restore is the window and ssthresh now.
    pub fn start_undo_episode(&mut self) {
        self.dsack_tx
            .start_episode(self.una, self.cc.cwnd(), self.cc.ssthresh());
    }

    /// `segs` segments were retransmitted: each needs a D-SACK before an undo.
    #[inline]
    pub fn on_dsack_retransmit(&mut self, segs: u32) {
        self.dsack_tx.on_retransmit(segs);
    }

    /// A D-SACK block `block` arrived (segments of `mss`). Returns the retransmitted
    /// segments it reports as duplicates (0 when it is not believed).
    #[inline]
    pub fn on_dsack(&mut self, block: SackBlock, mss: u32) -> u32 {
        self.dsack_tx.on_dsack(block, mss, self.max_wnd)
    }

    /// Linux `tcp_try_undo_dsack`: every retransmission of the episode was reported as a
    /// duplicate, so cwnd and ssthresh go back to before the reduction. Returns whether
    /// they did.
    #[inline]
    pub fn undo(&mut self) -> bool {
        if !self.dsack_tx.undo_due() {
            return false;
        }
        self.undo_now()
    }

    #[cold]
    fn undo_now(&mut self) -> bool {
        match self.dsack_tx.take_undo(self.cc.cwnd(), self.cc.ssthresh()) {
            Some((c, s)) => {
                self.cc.undo(c, s);
                true
            }
            None => false,
        }
    }
}
