//! The SACK scoreboard (`sack.rs`): what the peer holds above SND.UNA.

use super::Sender;
use crate::tcp::sack::Scoreboard;
use crate::tcp::seq;
use crate::wire::tcp::SackBlock;

impl Sender {
    /// The SACK scoreboard.
    #[inline]
    pub fn scoreboard(&self) -> &Scoreboard {
        &self.scoreboard
    }

    /// A SACK block `b` arrived on an ACK of `ack`: the scoreboard takes the part between
    /// max(SND.UNA, `ack`) and SND.MAX. Returns the bytes newly SACKed.
    #[inline]
    pub fn on_sack_block(&mut self, b: SackBlock, ack: u32) -> u32 {
        self.scoreboard.add(b, seq::max(self.una, ack), self.max)
    }

    /// The cumulative ACK reached `ack`: SACKed ranges below it are forgotten.
    #[inline]
    pub fn on_scoreboard_ack(&mut self, ack: u32) {
        self.scoreboard.advance(ack);
    }

    /// The scoreboard's storage, emptied, for a recycled control block (`Conn::renew`).
    pub fn take_scoreboard_storage(&mut self) -> Vec<(u32, u32)> {
        self.scoreboard.take_storage()
    }

    /// Reuses `v`'s allocation for the scoreboard.
    pub fn adopt_scoreboard_storage(&mut self, v: Vec<(u32, u32)>) {
        self.scoreboard.adopt_storage(v);
    }
}
