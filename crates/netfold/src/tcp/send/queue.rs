//! The send queue and the FIN: the bytes from SND.UNA on, the ends of records (MSG_EOR), and
//! where the FIN goes.
//!
//! The queue's first byte has sequence number `buf_seq`; the FIN, once queued, occupies the
//! one sequence number after its last byte ([`Sender::fin_seq`]) and is sent once: later
//! segments carrying it again are retransmissions of that one sequence number.

use super::super::buffer::RingCache;
use super::super::seq;
use super::super::zerocopy::{SendQueue, ZcBuf, ZcCompletions, ZcSend};
use super::{Sender, MAX_RECORD_ENDS};
use crate::buf::zc::Gather;
use crate::mem::CopyMode;

impl Sender {
    /// The send queue (copied bytes and lent buffers), from SND.UNA on.
    #[inline]
    pub fn ring(&self) -> &SendQueue {
        &self.ring
    }

    /// Queues what fits of `data` after what is queued; returns the bytes taken.
    #[inline]
    pub fn queue(&mut self, data: &[u8], mode: CopyMode) -> usize {
        self.ring.push(data, mode)
    }

    /// Queues the application's buffer `buf` by reference (`zerocopy.rs`), if it fits.
    #[inline]
    pub fn queue_zc(&mut self, buf: ZcBuf, user: u64) -> Option<ZcSend> {
        self.ring.push_zc(buf, user)
    }

    /// `len` bytes of the queue from sequence number `start` on, for a segment.
    #[inline]
    pub fn gather(&self, start: u32, len: u32) -> Gather<'_> {
        let off = seq::dist(self.buf_seq, start) as usize;
        self.ring.gather(off, len as usize)
    }

    /// The lent buffers whose bytes were all acknowledged since the last call.
    #[inline]
    pub fn completions(&mut self) -> ZcCompletions {
        self.ring.completions()
    }

    /// The first copying send of a passive open gets ring storage of `cap` bytes when it
    /// needs it, unless the queue already has storage or bytes.
    pub fn reserve_ring(&mut self, cap: usize) {
        if self.ring.capacity() == 0 && self.ring.is_empty() {
            self.ring = SendQueue::reserve(cap);
        }
    }

    /// Takes the queue's reserved storage from `rings` now (a send is about to copy into it).
    #[inline]
    pub fn ensure_ring_storage(&mut self, rings: &mut RingCache) {
        self.ring.ensure_storage(rings);
    }

    /// Gives the ring's storage back to `rings` (the connection no longer sends).
    #[inline]
    pub fn release_ring(&mut self, rings: &mut RingCache) {
        self.ring.release(rings);
    }

    /// Grows the ring to `cap` bytes from `rings` (send-buffer growth); false if refused.
    pub fn grow_ring(&mut self, cap: usize, rings: &mut RingCache) -> bool {
        self.ring.grow(cap, rings)
    }

    /// The connection is freed: the queue goes (lent buffers complete now).
    pub fn drop_ring(&mut self) {
        self.ring = SendQueue::with_capacity(0);
    }

    /// A Fast Open SYN-ACK acknowledged the SYN's data up to `upto` (RFC 7413 §4.2.2): those
    /// bytes leave the queue (SND.UNA already moved with [`Sender::on_syn_ack`]).
    pub fn on_syn_data_acked(&mut self, upto: u32) {
        let n = seq::dist(self.buf_seq, upto);
        self.ring.consume(n as usize);
        self.buf_seq = upto;
    }

    /// Unacknowledged record ends (MSG_EOR) are kept.
    #[inline]
    pub fn has_record_ends(&self) -> bool {
        !self.record_ends.is_empty()
    }

    /// As many record ends as one connection keeps are unacknowledged ([`MAX_RECORD_ENDS`]):
    /// a send with MSG_EOR waits.
    #[inline]
    pub fn record_ends_full(&self) -> bool {
        self.record_ends.len() >= MAX_RECORD_ENDS
    }

    /// A record (a send with MSG_EOR) ends with the bytes queued so far: no segment will
    /// cross it.
    pub fn end_record(&mut self) {
        let end = self.fin_seq();
        self.record_ends.push_back(end);
    }

    /// The first record end after `s`, if any (a segment from `s` stops there).
    #[inline]
    pub fn record_end_after(&self, s: u32) -> Option<u32> {
        self.record_ends.iter().copied().find(|&e| seq::gt(e, s))
    }

    /// Forgets the record ends `ack` covers (they can no longer limit a segment).
    #[inline]
    pub(super) fn drop_record_ends(&mut self, ack: u32) {
        while self.record_ends.front().is_some_and(|&e| seq::le(e, ack)) {
            self.record_ends.pop_front();
        }
    }

    /// A record ends exactly at `s`.
    #[inline]
    pub fn record_ends_at(&self, s: u32) -> bool {
        self.record_ends.iter().any(|&e| e == s)
    }

    /// shutdown_write() or close() was called: a FIN follows the queued data (RFC 9293
    /// §3.10.4). Queueing it again changes nothing.
    #[inline]
    pub fn queue_fin(&mut self) {
        self.fin_queued = true;
    }

    /// A FIN follows the queued data.
    #[inline]
    pub fn fin_queued(&self) -> bool {
        self.fin_queued
    }

    /// Our FIN left for the first time (not below SND.MAX), alone in its segment or not.
    #[inline]
    pub fn on_fin_sent(&mut self, alone: bool) {
        self.fin_alone = alone;
    }

    /// Our FIN went in a segment of its own (Linux: its own skb, which a tail loss probe
    /// resends alone).
    #[inline]
    pub fn fin_alone(&self) -> bool {
        self.fin_alone
    }

    /// Sequence number of our FIN (valid once `fin_queued`): right after the queued data.
    #[inline]
    pub fn fin_seq(&self) -> u32 {
        self.buf_seq.wrapping_add(self.ring.len() as u32)
    }

    /// Our FIN was sent and acknowledged.
    #[inline]
    pub fn fin_acked(&self) -> bool {
        self.fin_queued && seq::gt(self.una, self.fin_seq())
    }

    /// Data or a FIN is queued and not yet acknowledged.
    #[inline]
    pub fn pending(&self) -> bool {
        seq::lt(
            self.una,
            self.fin_seq().wrapping_add(u32::from(self.fin_queued)),
        )
    }
}
