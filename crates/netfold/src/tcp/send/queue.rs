//! The send queue and the FIN: record ends (MSG_EOR) and where the FIN goes.

use super::super::seq;
use super::Sender;

impl Sender {
    /// The first record end after `s`, if any (a segment from `s` stops there).
    pub fn record_end_after(&self, s: u32) -> Option<u32> {
        self.record_ends.iter().copied().find(|&e| seq::gt(e, s))
    }

    /// Forgets the record ends `ack` covers (they can no longer limit a segment).
    pub fn drop_record_ends(&mut self, ack: u32) {
        while self.record_ends.front().is_some_and(|&e| seq::le(e, ack)) {
            self.record_ends.pop_front();
        }
    }

    /// A record ends exactly at `s`.
    pub fn record_ends_at(&self, s: u32) -> bool {
        self.record_ends.iter().any(|&e| e == s)
    }

    /// Sequence number of our FIN (valid once `fin_queued`).
    pub fn fin_seq(&self) -> u32 {
        self.buf_seq.wrapping_add(self.ring.len() as u32)
    }

    /// Our FIN was sent and acknowledged.
    pub fn fin_acked(&self) -> bool {
        self.fin_queued && seq::gt(self.una, self.fin_seq())
    }

    /// Data or a FIN is queued and not yet acknowledged.
    pub fn pending(&self) -> bool {
        seq::lt(
            self.una,
            self.fin_seq().wrapping_add(u32::from(self.fin_queued)),
        )
    }
}
