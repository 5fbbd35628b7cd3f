//! Frame-level borrowing read: in-order payload kept in the packet buffers
//! it arrived in, as `(buffer, range)` records in stream order, instead of being copied into
//! the receive ring; handed to the application as [`BorrowedPayload`]s.
//!
//! The rule that keeps the stream in order: a segment is borrowed only when it starts exactly
//! at RCV.NXT, the receive ring holds nothing (neither in-order bytes nor out-of-order ones)
//! and no read is posted ([`Conn::place`](super::conn::Conn)). Everything else is copied into
//! the ring as before, so the held frames always come before every byte of the ring, and
//! readers take the frames first.
//!
//! The payload is verified (RFC 9293 §3.1 checksum) before the segment is processed at all,
//! in a pass of its own when the device did not validate it (1 verify pass, 0 copies), not at
//! all when it did (0 passes); a segment that fails is dropped as on every other path.
//!
//! Life of a record: `place` learns where the payload lies in the receive batch (the frame
//! and offset the interface gives with the segment, [`FramePos`]); `receive_data` (RFC 9293 §3.10.7.4, "process the
//! segment text") commits it as `Pending(frame index)` and RCV.NXT advances; at the end of
//! the batch the layer moves the frame's buffer in (`adopt`), before the application can
//! read anything. A connection freed first gives its records back (`release_all`).
//!
//! Window accounting: held bytes (by the connection and by the application) count against
//! the receive buffer like ring bytes, by their payload length. Linux charges `skb->truesize`
//! (payload plus buffer overhead) against `sk_rcvbuf` and advertises from what is left,
//! scaled by `tcp_adv_win_scale` to allow for that overhead; charging the payload keeps
//! netfold's window right edge where it was when the bytes were accepted (it must never move
//! left, RFC 9293 §3.8.6), and the number of frames is bounded separately by the stack's
//! [`Recycler`] limit (a share of the pool): past it, payload is copied into the ring.

use crate::buf::borrow::ConnShare;
use crate::buf::{BorrowedPayload, FramePos, PacketBuf, Recycler};
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Debug)]
enum Buf {
    /// Committed, its frame still in the receive batch at this index.
    Pending(u32),
    Held(PacketBuf),
}

#[derive(Debug)]
struct Rec {
    buf: Buf,
    /// The payload within the frame (`as_slice()[start..end]`).
    start: usize,
    end: usize,
}

/// The frames one connection holds, and its borrowing switch.
#[derive(Debug, Default)]
pub struct FrameQueue {
    recs: VecDeque<Rec>,
    /// Payload bytes in `recs`.
    bytes: usize,
    /// Set by `enable`: the stack's recycler and what the handles share with us.
    home: Option<Arc<Recycler>>,
    share: Option<Arc<ConnShare>>,
    /// The parts `place` found in frames for the segment being processed: (frame index,
    /// start in the frame, length).
    pub(super) staged: Vec<(u32, usize, usize)>,
}

impl FrameQueue {
    /// Turns borrowing on (`home`, `share`) or off (`None`). Held frames stay readable.
    pub fn set(&mut self, on: Option<(Arc<Recycler>, Arc<ConnShare>)>) {
        match on {
            Some((home, share)) => {
                if self.share.is_none() {
                    self.share = Some(share);
                }
                self.home = Some(home);
            }
            None => {
                if self.recs.is_empty() {
                    self.home = None;
                }
                // The share stays: handles out there still charge it.
                self.share = self.share.take().filter(|s| s.held() > 0);
                self.staged.clear();
            }
        }
    }

    /// Whether segments may be borrowed (the application asked for it).
    pub fn on(&self) -> bool {
        self.home.is_some() && self.share.is_some()
    }

    /// Whether `n` more frames may leave the pool now.
    pub fn has_room(&self, n: usize) -> bool {
        self.home
            .as_ref()
            .is_some_and(|h| h.outstanding() + n <= h.limit())
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// Payload bytes the connection holds (readable).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Payload bytes held by the connection and by the application: what the receive window
    /// is charged for.
    pub fn charged(&self) -> usize {
        self.bytes + self.share.as_ref().map_or(0, |s| s.held())
    }

    /// Frames still to be adopted at the end of the batch.
    pub fn has_pending(&self) -> bool {
        // Pending records are always the newest (the batch's), so the last one tells.
        matches!(
            self.recs.back(),
            Some(Rec {
                buf: Buf::Pending(_),
                ..
            })
        )
    }

    /// Commits the staged parts up to `len` payload bytes (the segment as `receive_data`
    /// accepted it: trimmed to the window, maybe); returns the bytes committed.
    pub(super) fn commit(&mut self, len: usize) -> usize {
        let mut left = len;
        let mut n = 0;
        for &(idx, start, plen) in &self.staged {
            if left == 0 {
                break;
            }
            let take = plen.min(left);
            self.recs.push_back(Rec {
                buf: Buf::Pending(idx),
                start,
                end: start + take,
            });
            left -= take;
            n += take;
            if let Some(h) = &self.home {
                h.reserve_forced();
            }
        }
        self.staged.clear();
        self.bytes += n;
        n
    }

    /// Moves the frames of pending records out of the batch (`rx[i]` becomes an empty buffer
    /// the caller must not recycle).
    pub(super) fn adopt(&mut self, rx: &mut [PacketBuf]) {
        for r in self.recs.iter_mut().rev() {
            let Buf::Pending(i) = r.buf else {
                break;
            };
            if let Some(b) = rx.get_mut(i as usize) {
                r.buf = Buf::Held(std::mem::take(b));
            }
        }
    }

    /// Gives every frame back (the connection is freed, or the application aborted it).
    pub fn release_all(&mut self) {
        for r in self.recs.drain(..) {
            match (r.buf, &self.home) {
                (Buf::Held(b), Some(h)) => h.give_back(b, None),
                // The frame never left the batch: it goes back to the pool with it.
                (Buf::Pending(_), Some(h)) => h.unreserve(1),
                _ => {}
            }
        }
        self.bytes = 0;
        self.staged.clear();
    }

    fn front(&self) -> Option<&[u8]> {
        let r = self.recs.front()?;
        match &r.buf {
            Buf::Held(b) => b.as_slice().get(r.start..r.end),
            Buf::Pending(_) => None,
        }
    }

    /// Drops `n` bytes from the front of the first record (giving its frame back when it is
    /// used up).
    fn consume_front(&mut self, n: usize) {
        let Some(r) = self.recs.front_mut() else {
            return;
        };
        let n = n.min(r.end - r.start);
        r.start += n;
        self.bytes -= n;
        if r.start == r.end {
            if let Some(Rec {
                buf: Buf::Held(b), ..
            }) = self.recs.pop_front()
            {
                if let Some(h) = &self.home {
                    h.give_back(b, None);
                }
            }
        }
    }

    /// Copies held bytes into `dst` (a copying read while frames are held).
    pub(super) fn read(&mut self, dst: &mut [u8], mode: crate::mem::CopyMode) -> usize {
        let mut n = 0;
        while n < dst.len() {
            let Some(src) = self.front() else { break };
            let k = src.len().min(dst.len() - n);
            mode.copy(&mut dst[n..n + k], &src[..k]);
            n += k;
            self.consume_front(k);
        }
        n
    }

    /// Like `read`, consuming nothing.
    pub(super) fn peek(&self, dst: &mut [u8], mode: crate::mem::CopyMode) -> usize {
        let mut n = 0;
        for r in &self.recs {
            let Buf::Held(b) = &r.buf else { break };
            let src = &b.as_slice()[r.start..r.end];
            let k = src.len().min(dst.len() - n);
            mode.copy(&mut dst[n..n + k], &src[..k]);
            n += k;
            if n == dst.len() {
                break;
            }
        }
        n
    }

    /// Shows the first record's bytes to `f`, which says how many it consumed.
    pub(super) fn read_in_place(&mut self, f: impl FnOnce(&[u8], &[u8]) -> usize) -> usize {
        let Some(src) = self.front() else { return 0 };
        let n = f(src, &[]).min(src.len());
        self.consume_front(n);
        n
    }

    /// Hands up to `max` whole records to the application; returns the bytes.
    pub(super) fn take(&mut self, out: &mut Vec<BorrowedPayload>, max: usize) -> usize {
        let (Some(home), Some(share)) = (&self.home, &self.share) else {
            return 0;
        };
        let mut n = 0;
        for _ in 0..max {
            if !matches!(
                self.recs.front(),
                Some(Rec {
                    buf: Buf::Held(_),
                    ..
                })
            ) {
                break;
            }
            let Some(Rec {
                buf: Buf::Held(b),
                start,
                end,
            }) = self.recs.pop_front()
            else {
                break;
            };
            self.bytes -= end - start;
            n += end - start;
            // The frame's reservation moves with it to the handle.
            out.push(BorrowedPayload::new(
                b,
                start,
                end,
                Arc::downgrade(home),
                share.clone(),
            ));
        }
        n
    }

    /// A handle for bytes that were queued in the ring (copied into `buf`).
    pub(super) fn handle_for(&self, buf: PacketBuf) -> Option<BorrowedPayload> {
        let (home, share) = (self.home.as_ref()?, self.share.as_ref()?);
        home.reserve_forced();
        let len = buf.len();
        Some(BorrowedPayload::new(
            buf,
            0,
            len,
            Arc::downgrade(home),
            share.clone(),
        ))
    }
}

/// The records each part would become: `(frame index, start in the frame, length)` from the
/// positions the interface gave (`at`, one per part). `false` if some part has none (a
/// reassembled datagram, a caller outside `Stack::poll`) or is empty.
pub(super) fn stage(parts: &[&[u8]], at: &[FramePos], out: &mut Vec<(u32, usize, usize)>) -> bool {
    out.clear();
    if at.len() != parts.len() {
        return false;
    }
    for (p, pos) in parts.iter().zip(at) {
        if p.is_empty() {
            return false;
        }
        out.push((pos.frame, pos.offset as usize, p.len()));
    }
    true
}
