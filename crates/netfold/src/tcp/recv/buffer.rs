//! The receive buffer: ring storage, memory pressure, auto-tuning, the application's reads.

use super::Receiver;
use crate::mem::CopyMode;
use crate::tcp::buffer::{RecvRing, RingCache};
use crate::tcp::frames::FrameQueue;
use crate::tcp::place::{Posted, Staged};
use crate::time::Instant;

/// The receive buffer: storage, memory pressure, auto-tuning, the application's reads.
impl Receiver {
    /// Takes the ring's storage from `rings` (at the first data).
    pub fn take_ring(&mut self, rings: &mut RingCache) {
        self.ring = RecvRing::from_cache(self.ring_cap(self.buf), rings);
    }

    /// The reassembler's range list storage, emptied, for a recycled control block
    /// (`Conn::renew`).
    pub fn take_asm_storage(&mut self) -> Vec<(usize, usize)> {
        self.ring.asm.take_storage()
    }

    /// Takes `v` as the reassembler's range list storage (`Conn::renew`).
    pub fn adopt_asm_storage(&mut self, v: Vec<(usize, usize)>) {
        self.ring.asm.adopt_storage(v);
    }

    /// Gives the ring's storage back to `rings`.
    #[inline]
    pub fn release_ring(&mut self, rings: &mut RingCache) {
        self.ring.release(rings);
    }

    /// The ring for staging a segment's copy (`place.rs`) and the reassembler's storage;
    /// bytes become data only through [`Receiver::accept_data`].
    #[inline(always)]
    pub fn ring_mut(&mut self) -> &mut RecvRing {
        &mut self.ring
    }

    /// The frame queue, for staging a segment's frames (`place.rs`).
    #[inline(always)]
    pub fn frames_mut(&mut self) -> &mut FrameQueue {
        &mut self.frames
    }

    /// The posted read, for copying a segment into it before its checks (`place.rs`).
    #[inline(always)]
    pub fn posted_mut(&mut self) -> Option<&mut Posted> {
        self.posted.as_mut()
    }

    /// The application posts a read.
    pub fn post(&mut self, p: Posted) {
        self.posted = Some(p);
    }

    /// The application takes its posted read back.
    pub fn take_posted(&mut self) -> Option<Posted> {
        self.posted.take()
    }

    /// Where the segment being processed was copied before its checks (`None`: nowhere).
    #[inline(always)]
    pub fn set_staged(&mut self, s: Option<Staged>) {
        self.staged = s;
    }

    /// After a segment's processing: what was staged for it and not kept stays uncommitted.
    #[inline(always)]
    pub fn drop_staged(&mut self) {
        self.staged = None;
        if !self.frames.staged.is_empty() {
            self.frames.staged.clear();
        }
    }

    /// Frames committed from a receive batch take their buffers (see `FrameQueue::adopt`).
    #[inline]
    pub fn adopt_frames(&mut self, rx: &mut [crate::buf::PacketBuf]) {
        self.frames.adopt(rx);
    }

    /// Turns the borrowing read on (`Some`) or off.
    pub fn set_frame_sharing(
        &mut self,
        share: Option<(
            std::sync::Arc<crate::buf::Recycler>,
            std::sync::Arc<crate::buf::borrow::ConnShare>,
        )>,
    ) {
        self.frames.set(share);
    }

    /// The connection is freed: the posted read's buffer and the held frames go back now.
    pub fn release_reader_buffers(&mut self) {
        self.posted = None;
        self.frames.release_all();
    }

    /// The stack is (`PRESSURE_RCVBUF`) or is not (`u32::MAX`) over its buffer budget.
    #[inline]
    pub fn moderate(&mut self, cap: u32) {
        self.moderated = cap;
    }

    /// Copies queued in-order bytes into `buf`: held frames first, then the ring. `None`
    /// when nothing is queued.
    pub fn read_queued(&mut self, buf: &mut [u8], mode: CopyMode) -> Option<usize> {
        let n = if !self.frames.is_empty() {
            // Held frames come before the ring's bytes (`frames.rs`).
            self.frames.read(buf, mode)
        } else if !self.ring.is_empty() {
            self.ring.read(buf, mode)
        } else {
            return None;
        };
        self.note_read(n);
        Some(n)
    }

    /// [`Receiver::read_queued`] without consuming.
    pub fn peek_queued(&self, buf: &mut [u8], mode: CopyMode) -> Option<usize> {
        if !self.frames.is_empty() {
            Some(self.frames.peek(buf, mode))
        } else if !self.ring.is_empty() {
            Some(self.ring.peek(buf, mode))
        } else {
            None
        }
    }

    /// A borrowing read of the queued bytes: `f` sees them (two slices) and returns how many
    /// it consumed. `None` when nothing is queued.
    pub fn read_queued_in_place(&mut self, f: impl FnOnce(&[u8], &[u8]) -> usize) -> Option<usize> {
        let n = if !self.frames.is_empty() {
            self.frames.read_in_place(f)
        } else if !self.ring.is_empty() {
            self.ring.read_in_place(f)
        } else {
            return None;
        };
        self.note_read(n);
        Some(n)
    }

    /// Copies in-order bytes waiting in the ring into the posted read, behind what it holds.
    /// Returns how many.
    pub fn fill_posted(&mut self, mode: CopyMode) -> usize {
        let Some(p) = self.posted.as_mut() else {
            return 0;
        };
        let n = self.ring.read(&mut p.buf[p.filled..], mode);
        p.filled += n;
        self.note_read(n);
        n
    }

    /// Linux `tcp_rcv_space_adjust`: measures what the application read in the last `rtt`
    /// and grows the buffer (and ring) to match. `Some(true)`: grown; `Some(false)`: the
    /// stack's budget refused the growth; `None`: no growth wanted.
    pub fn space_adjust(
        &mut self,
        now: Instant,
        rtt: crate::time::Duration,
        rings: &mut RingCache,
    ) -> Option<bool> {
        use crate::tcp::autotune::{ladder_step, RCV_HEADROOM_SEGS, RCV_INITIAL_SPACE_SEGS};
        if !self.autotune || self.ring.capacity() == 0 || self.fin_received {
            return None;
        }
        let sp = &mut self.space;
        let Some(since) = sp.since else {
            sp.since = Some(now);
            sp.mark = sp.copied;
            return None;
        };
        if now.saturating_since(since) < rtt {
            return None;
        }
        let copied = usize::try_from(sp.copied - sp.mark).unwrap_or(usize::MAX);
        sp.since = Some(now);
        sp.mark = sp.copied;
        let mss = self.mss.max(1) as usize;
        // Linux `tcp_init_buffer_space`: the first measurement is compared with an initial
        // window's worth (`TCP_INIT_CWND * advmss`).
        let prev = if sp.space == 0 {
            RCV_INITIAL_SPACE_SEGS * mss
        } else {
            sp.space
        };
        if copied <= prev {
            return None;
        }
        sp.space = copied;
        // Linux `tcp_rcv_space_adjust`: "minimal window to cope with packet losses, assuming
        // steady state" (twice the per-RTT read plus 16 segments), then "Accommodate for
        // sender rate increase (eg. slow start)": grow by twice the relative increase of the
        // per-RTT read ("the ACK we are sending now is for the next RTT, not the current
        // one"). Without this term the window merely doubled per RTT, one RTT behind a sender
        // in slow start, which then waited on the window (256 MiB over 10 ms at 1 Gbit/s: the
        // flight sat at the advertised window for four RTTs on its way to the 2.5 MB BDP).
        let rcvwin = copied
            .saturating_mul(2)
            .saturating_add(RCV_HEADROOM_SEGS * mss);
        let grow = (rcvwin as u128 * (copied - prev) as u128 / prev as u128) as usize;
        let want = rcvwin.saturating_add(grow.saturating_mul(2));
        if want <= self.buf {
            return None;
        }
        let new = ladder_step(self.buf, want, self.buf_max);
        if new <= self.buf {
            return None;
        }
        let cap = self.ring_cap(new);
        if self.ring.grow(cap, rings) {
            self.buf = new;
            Some(true)
        } else {
            Some(false)
        }
    }
}
