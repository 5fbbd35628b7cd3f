//! Single-pass receive: where a received segment's payload is copied, and
//! the checksum verified in that same copy, before TCP acts on the segment's header.
//!
//! The interface leaves the checksum of a data segment open when it still needs verifying
//! (`Csum::Unverified`): it sums only the pseudo-header and the TCP header and hands TCP that
//! partial sum per segment ("pending", `RxSegment::pending`). [`Conn::place`] then copies
//! the payload, summing it in the same pass, to where it belongs, and the segment goes on to
//! SEGMENT ARRIVES only if every sum completes to 0xffff. Where the payload goes:
//!
//! 1. A posted read (the application lent the connection a buffer, [`Posted`]): when the
//!    segment is the next in order (SEG.SEQ = RCV.NXT) and the receive ring is empty (nothing
//!    older waits to be read), whole segments (GRO parts) go straight into the buffer behind
//!    what it holds: frame to application in one pass. This is Linux 2.4's
//!    `tcp_rcv_established` fast path ("direct copy to user": `tcp_copy_to_iovec`, which for
//!    an unverified skb is `skb_copy_and_csum_datagram_iovec`, `csum_error` on failure, and
//!    only then `tcp_ack` and RCV.NXT), without its header prediction: here the segment still
//!    runs every check of `Conn::input` after the copy.
//! 2. Otherwise the receive ring, at the segment's offset past RCV.NXT, when that range of
//!    the ring holds nothing received ([`RecvRing::can_stage`](super::buffer::RecvRing::can_stage)): one fused copy+verify, and
//!    `receive_data` later commits the bytes without copying them again.
//! 3. Anything else (an old or overlapping segment, a connection that does not take data
//!    now, no room) is verified in a pass of its own, then copied as before.
//!
//! Nothing is committed before the checksums are known: bytes copied into the posted buffer
//! beyond its `filled` mark, or into the ring beyond what the assembler records, are not data
//! yet. A segment that fails is dropped as if it had never arrived (counted by the interface,
//! `tcp_bad_checksum`), and the application never sees those bytes as read. A segment that
//! passes its checksum but that `Conn::input` rejects (outside the window, PAWS, ...) leaves
//! them uncommitted the same way ([`Staged`] lives for one `input`).
//!
//! The borrowing read ([`Conn::recv_in_place`]) is the other way to skip the ring-to-
//! application copy: the application reads the ring where it lies and says how much it
//! consumed.

use super::buffer::RingCache;
use super::conn::Conn;
use super::{seq, Error, State, Stats};
use crate::mem::CopyMode;
use crate::tcp::RxSegment;
use crate::wire::checksum::add;

/// A read the application posted: its buffer, lent to the connection until it takes it back
/// (`TcpLayer::post_read` / `take_read`). `buf[..filled]` is data read; the rest is free, and
/// may hold uncommitted bytes of a segment that was dropped.
#[derive(Debug, Default)]
pub struct Posted {
    pub buf: Vec<u8>,
    pub filled: usize,
}

impl Posted {
    fn room(&self) -> usize {
        self.buf.len().saturating_sub(self.filled)
    }
}

/// Where [`Conn::place`] copied the payload of the segment being processed: its first
/// `direct` bytes into the posted read (after `filled`), the next `ring` bytes into the ring
/// at `off` past RCV.NXT. Good for one `Conn::input` only: the layer clears it after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staged {
    pub off: usize,
    pub direct: usize,
    pub ring: usize,
    /// Payload bytes left in their frames (`frames.rs`: the parts are in `frames.staged`).
    pub borrow: usize,
}

/// A posted read taken back ([`TcpLayer::take_read`](super::TcpLayer::take_read)): the
/// buffer, with the data in `buf[..n]` when `result` is `Ok(n)`.
#[derive(Debug)]
pub struct PostedRead {
    pub buf: Vec<u8>,
    pub result: Result<usize, Error>,
}

/// What the checksum checks left to TCP came to; the interface adds them to its counters
/// (`tcp_bad_checksum`, `bytes_checksummed`, `bytes_checksummed_separately` and the payload
/// pass counters), so the one place that counts checksums stays the interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxCheck {
    /// Segments dropped because their checksum did not verify.
    pub bad: u32,
    /// Payload bytes summed inside the copy that placed them (no pass of their own).
    pub fused: u64,
    /// Payload bytes summed in a pass of their own (verification without a copy to ride on,
    /// or `CopyMode::Baseline`, whose "fused" copy is a copy and then a checksum pass).
    pub separate: u64,
}

impl RxCheck {
    /// Adds the checks of another delivery.
    pub fn add(&mut self, o: RxCheck) {
        self.bad += o.bad;
        self.fused += o.fused;
        self.separate += o.separate;
    }

    /// Counts `n` bytes summed: in the copy (fused) or, in the baseline mode, by a second pass.
    fn summed_in_copy(&mut self, mode: CopyMode, n: usize) {
        match mode {
            CopyMode::Kernels => self.fused += n as u64,
            CopyMode::Baseline => self.separate += n as u64,
        }
    }
}

/// Verifies every checksum `pending` leaves open, each summed in a pass of its own: for a
/// segment no connection can place (a listener's, no socket). `Err(i)`: part `i` is the first
/// that failed (the ones before it verified, the ones after it were not looked at).
pub(super) fn verify_separately(
    parts: &[&[u8]],
    pending: &[Option<u16>],
    check: &mut RxCheck,
) -> Result<(), usize> {
    for (i, (p, want)) in parts.iter().zip(pending).enumerate() {
        if let Some(h) = want {
            check.separate += p.len() as u64;
            if add(*h, crate::mem::checksum(p)) != 0xffff {
                return Err(i);
            }
        }
    }
    Ok(())
}

/// Copies `src` into `dst` with `mode`, and returns the sum taken in the same pass when `sum`.
fn copy_sum(mode: CopyMode, dst: &mut [u8], src: &[u8], sum: bool) -> u16 {
    if sum {
        mode.copy_with_checksum(dst, src)
    } else {
        mode.copy(dst, src);
        0
    }
}

impl Conn {
    /// Places the payload of arriving segment `seg` (its GRO parts in order, the first at
    /// the header's sequence number) and verifies the checksums its `pending` leaves open (one
    /// per part: the sum of pseudo-header and header, to which the payload's sum must add up
    /// to 0xffff; `None` for a part already verified). `Ok` when all of them verified: only then
    /// may the segment be processed. `Err(i)`: part `i` is the first that failed (the parts
    /// before it verified; nothing is staged). See the module doc for where bytes go.
    pub(super) fn place(
        &mut self,
        seg: &RxSegment<'_>,
        mode: CopyMode,
        stats: &mut Stats,
        check: &mut RxCheck,
        rings: &mut RingCache,
    ) -> Result<(), usize> {
        let (seg_seq, parts, pending, at) = (seg.repr.seq, seg.parts, seg.pending, seg.at);
        self.rcv.set_staged(None);
        let open = pending.iter().any(Option::is_some);
        let len: usize = parts.iter().map(|p| p.len()).sum();
        // Only where `receive_data` would write the bytes as they are: a synchronized state
        // that takes data, the segment at or after RCV.NXT (nothing trimmed off its front).
        let takes_data = matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) && seq::ge(seg_seq, self.rcv.nxt());
        if takes_data && len > 0 {
            // The receive ring is taken when the first data arrives (`alloc_buffers`), here,
            // so that even the first segment is copied and verified in one pass.
            self.ensure_recv_ring(rings);
        }
        let off = if takes_data {
            seq::dist(self.rcv.nxt(), seg_seq) as usize
        } else {
            0
        };
        let mut direct_room = match self.rcv.posted() {
            Some(p)
                if takes_data
                    && off == 0
                    && self.rcv.ring().is_empty()
                    && self.rcv.ring().asm.is_empty() =>
            {
                p.room()
            }
            _ => 0,
        };
        // Frame-level borrowing read (`frames.rs`): the same rule as a posted read (next in
        // order, nothing older waiting in the ring), and every part inside a frame of the
        // batch, and the stack's frame budget not spent. Verified in a pass of its own when
        // the device did not (no copy to fold it into); committed by `take_data`.
        if len > 0
            && self.rcv.posted().is_none()
            && self.rcv.frames().on()
            && !self.user_closed
            && takes_data
            && off == 0
            && self.rcv.ring().is_empty()
            && self.rcv.ring().asm.is_empty()
            && self.rcv.frames().has_room(parts.len())
            && super::frames::stage(parts, at, &mut self.rcv.frames_mut().staged)
        {
            if let Err(i) = verify_separately(parts, pending, check) {
                self.rcv.frames_mut().staged.clear();
                return Err(i);
            }
            self.rcv.set_staged(Some(Staged {
                off: 0,
                direct: 0,
                ring: 0,
                borrow: len,
            }));
            return Ok(());
        }
        if len == 0 || (!open && direct_room == 0) {
            // Nothing to verify and nothing to gain: `receive_data` copies into the ring.
            return verify_separately(parts, pending, check);
        }
        let mut st = Staged {
            off,
            direct: 0,
            ring: 0,
            borrow: 0,
        };
        let mut ring_ok = takes_data;
        for (i, part) in parts.iter().enumerate() {
            let want = pending.get(i).copied().flatten();
            let need = want.is_some();
            let n = part.len();
            let posted = self.rcv.posted_mut().filter(|_| n <= direct_room);
            let sum = if let Some(p) = posted {
                // Whole parts only, in order: a part that does not fit ends the direct run,
                // and what follows goes to the ring behind it.
                let at = p.filled + st.direct;
                let Some(dst) = p.buf.get_mut(at..at + n) else {
                    // Not reached (`n <= direct_room`); a safe answer if it were.
                    return verify_separately(parts, pending, check);
                };
                let s = copy_sum(mode, dst, part, need);
                st.direct += n;
                direct_room -= n;
                stats.rx_copy_direct += n as u64;
                if need {
                    check.summed_in_copy(mode, n);
                }
                s
            } else if ring_ok && self.rcv.ring().can_stage(off + st.ring, n) {
                direct_room = 0;
                let s = self
                    .rcv
                    .ring_mut()
                    .stage_copy(off + st.ring, part, mode, need);
                st.ring += n;
                stats.rx_copy_ring += n as u64;
                if need {
                    check.summed_in_copy(mode, n);
                }
                s
            } else {
                // From here on the bytes are copied by `receive_data` after the checks (the
                // staged ring range stays one run from `off`).
                direct_room = 0;
                ring_ok = false;
                if need {
                    check.separate += n as u64;
                    crate::mem::checksum(part)
                } else {
                    0
                }
            };
            if let Some(h) = want {
                if add(h, sum) != 0xffff {
                    return Err(i);
                }
            }
        }
        if st.direct + st.ring > 0 {
            self.rcv.set_staged(Some(st));
        }
        Ok(())
    }

    /// Lends `buf` to the connection as a posted read. In-order bytes already in the ring are
    /// copied into it at once (they come first); returns how many. `InvalidInput` (with the
    /// buffer back) if a read is already posted or `buf` is empty.
    pub(super) fn post_read(
        &mut self,
        buf: Vec<u8>,
        mode: CopyMode,
    ) -> Result<usize, (Error, Vec<u8>)> {
        // A posted read and frame borrowing exclude each other: held frames come first in
        // the stream, and the posted read would be filled from the ring behind them.
        if self.rcv.posted().is_some()
            || buf.is_empty()
            || self.rcv.frames().on()
            || !self.rcv.frames().is_empty()
        {
            return Err((Error::InvalidInput, buf));
        }
        self.rcv.post(Posted { buf, filled: 0 });
        Ok(self.fill_posted_from_ring(mode))
    }

    /// Copies in-order bytes waiting in the ring into the posted read, behind what it holds
    /// (the ring's bytes are always later in the stream than the posted read's: bytes go
    /// straight to the posted read only while the ring is empty, and nothing but this empties
    /// the ring while a read is posted). Returns how many.
    fn fill_posted_from_ring(&mut self, mode: CopyMode) -> usize {
        self.rcv.fill_posted(mode)
    }

    /// Takes the posted read back: its buffer, what the read came to as `recv` reports it
    /// (bytes read; 0 at end of stream; `WouldBlock` if nothing yet; the connection's error),
    /// and how many of those bytes were copied out of the ring now (the rest were placed
    /// directly or copied when the read was posted). `InvalidInput` (outer) if no read is
    /// posted.
    pub(super) fn take_read(&mut self, mode: CopyMode) -> Result<(PostedRead, usize), Error> {
        if self.rcv.posted().is_none() {
            return Err(Error::InvalidInput);
        }
        let copied = self.fill_posted_from_ring(mode);
        let p = self.rcv.take_posted().ok_or(Error::InvalidInput)?;
        let r = if p.filled > 0 {
            Ok(p.filled)
        } else {
            // Nothing read, and the ring is empty (the buffer had room): what `recv` says.
            self.recv(&mut [], mode)
        };
        Ok((
            PostedRead {
                buf: p.buf,
                result: r,
            },
            copied,
        ))
    }

    /// A borrowing read: `f` sees the in-order bytes in the ring (two slices) and returns how
    /// many it consumed. The same results as `recv` otherwise (0 at end of stream, ...).
    pub(super) fn recv_in_place(
        &mut self,
        f: impl FnOnce(&[u8], &[u8]) -> usize,
    ) -> Result<usize, Error> {
        if self.rcv.posted().is_some() {
            return Err(Error::InvalidInput);
        }
        if let Some(n) = self.rcv.read_queued_in_place(f) {
            return Ok(n);
        }
        self.recv(&mut [], CopyMode::Kernels)
    }
}

/// Bytes of the ring copied into one buffer for a frame read, at most.
const RING_CHUNK: usize = 64 * 1024;

impl Conn {
    /// A frame read (`frames.rs`): up to `max` held frames go to `out` as owned handles, no
    /// copy; with none held, the in-order bytes queued in the ring (out-of-order data filled
    /// in later, segments that arrived while the frame budget was spent) are copied into one
    /// buffer (up to 64 KiB) handed over the same way. Returns the bytes and how many of them
    /// were copied out of the ring. Otherwise as `recv`: `Ok(0)` at end of stream,
    /// `WouldBlock`, the connection's error. `InvalidInput` unless borrowing is on.
    pub(super) fn recv_frames(
        &mut self,
        out: &mut Vec<crate::buf::BorrowedPayload>,
        max: usize,
        mode: CopyMode,
    ) -> Result<(usize, usize), Error> {
        if self.rcv.posted().is_some() || (!self.rcv.frames().on() && self.rcv.frames().is_empty())
        {
            return Err(Error::InvalidInput);
        }
        let mut n = 0;
        let mut copied = 0;
        if !self.rcv.frames().is_empty() {
            n = self.rcv.frames_mut().take(out, max.max(1));
        } else if !self.rcv.ring().is_empty() && max > 0 {
            let k = self.rcv.ring().len().min(RING_CHUNK);
            let mut b = crate::buf::PacketBuf::with_capacity(k);
            let got = self.rcv.ring_mut().read(b.append(k), mode);
            b.truncate(got);
            if let Some(h) = self.rcv.frames().handle_for(b) {
                out.push(h);
                n = got;
                copied = got;
            }
        }
        if n > 0 {
            self.rcv.note_read(n);
            return Ok((n, copied));
        }
        self.recv(&mut [], mode).map(|r| (r, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::super::buffer::RecvRing;
    use super::*;

    #[test]
    fn staged_bytes_are_committed_without_a_second_copy() {
        let mut r = RecvRing::with_capacity(16);
        assert!(r.can_stage(2, 4));
        assert_eq!(r.stage_copy(2, b"cdef", CopyMode::Kernels, false), 0);
        // Staged, not committed: nothing readable, nothing recorded.
        assert!(r.is_empty() && r.asm.is_empty());
        assert_eq!(r.commit(2, 4), Some(0));
        assert!(!r.can_stage(3, 2), "the range now holds received bytes");
        assert_eq!(r.write_at(0, b"ab", CopyMode::Kernels), Some(6));
        let mut out = [0u8; 8];
        assert_eq!(r.read(&mut out, CopyMode::Kernels), 6);
        assert_eq!(&out[..6], b"abcdef");
    }

    #[test]
    fn a_staged_copy_across_the_wrap_sums_like_one_pass() {
        let mut r = RecvRing::with_capacity(8);
        assert_eq!(r.write_at(0, b"xxxxx", CopyMode::Kernels), Some(5));
        let mut out = [0u8; 5];
        r.read(&mut out, CopyMode::Kernels); // head at 5: a 5-byte copy wraps after 3
        let src = b"\x12\x34\x56\x78\x9a";
        for mode in [CopyMode::Kernels, CopyMode::Baseline] {
            let s = r.stage_copy(0, src, mode, true);
            assert_eq!(s, crate::mem::checksum(src), "{mode:?}");
        }
        assert_eq!(r.commit(0, 5), Some(5));
        let mut out = [0u8; 5];
        assert_eq!(r.read(&mut out, CopyMode::Kernels), 5);
        assert_eq!(&out, src);
    }

    #[test]
    fn in_place_reads_consume_what_the_reader_says() {
        let mut r = RecvRing::with_capacity(8);
        assert_eq!(r.write_at(0, b"abcdef", CopyMode::Kernels), Some(6));
        let mut out = [0u8; 4];
        r.read(&mut out, CopyMode::Kernels);
        assert_eq!(r.write_at(2, b"ij", CopyMode::Kernels), Some(0));
        assert_eq!(r.write_at(0, b"gh", CopyMode::Kernels), Some(4)); // "efghij", wrapping
        let mut seen = Vec::new();
        let n = r.read_in_place(|a, b| {
            seen.extend_from_slice(a);
            seen.extend_from_slice(b);
            3
        });
        assert_eq!((n, &seen[..]), (3, &b"efghij"[..]));
        // A reader claiming more than it was shown consumes only what there was.
        let n = r.read_in_place(|a, b| {
            assert_eq!([a, b].concat(), b"hij");
            100
        });
        assert_eq!((n, r.len()), (3, 0));
    }
}
