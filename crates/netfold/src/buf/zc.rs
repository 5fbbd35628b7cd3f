//! Zero-copy buffers: bytes the application owns and lends to the stack by reference, so that
//! a TCP segment (and, on a scatter-gather device, the frame itself) points at them instead of
//! holding a copy (the model is Linux `MSG_ZEROCOPY`,
//! `Documentation/networking/msg_zerocopy.rst`, where the pages of a send are pinned and
//! referenced by the skbs until every skb that refers to them is freed).
//!
//! - [`Region`]: anything that owns stable, immutable bytes (a `Vec<u8>`, a `Box<[u8]>`, a
//!   `&'static [u8]`, a file mapping in `netfold-os`, a C buffer behind the C API).
//! - [`ZcBuf`]: a shared, reference-counted window into a region; cloning and slicing are one
//!   atomic increment, never a byte copy. The region is dropped when the last `ZcBuf` that
//!   refers to it is.
//! - [`Gather`]: a payload as the segmenter sees it: the two slices of a send ring (the copying
//!   path, as before) or a window over a [`SpanSource`] (a send queue that holds application
//!   buffers). [`Gather::for_each_span`] walks its bytes in order, saying for each piece which
//!   `ZcBuf` owns it, so that a scatter-gather device can take references ([`Frags`])
//!   instead of bytes.
//! - [`Frags`]: the fragments of one transmit batch, beside the frames (`frames[i]`'s linear
//!   bytes are followed on the wire by `frags.of(i)`, Linux `skb_shinfo(skb)->frags`). They
//!   live beside the batch rather than in [`PacketBuf`] because every frame of every stack
//!   moves through the pool, the pipe and the receive path: one more word in `PacketBuf` cost
//!   the copying path 3-9% of its CPU time (measured with `netfold stream --bytes 8G`), for a
//!   feature only a scatter-gather device uses.

use super::PacketBuf;
use std::fmt;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// Owned, immutable bytes that may be lent to the stack.
///
/// Contract: `bytes()` returns the same slice (address and length) every time it is called,
/// for as long as the value lives, and nothing writes to those bytes meanwhile. The stack
/// never panics if a region breaks this (it reads what is there, clamped to the length it saw
/// first), but what goes on the wire is then unspecified.
pub trait Region: Send + Sync + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
}

impl Region for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl Region for Box<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl Region for &'static [u8] {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl Region for Arc<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// A shared window `off..off + len` into a [`Region`]. Cheap to clone and slice.
#[derive(Clone)]
pub struct ZcBuf {
    region: Arc<dyn Region>,
    off: usize,
    len: usize,
}

impl ZcBuf {
    /// Takes ownership of `region`; the window is all of it.
    pub fn new<R: Region>(region: R) -> ZcBuf {
        ZcBuf::from_arc(Arc::new(region))
    }

    /// A window over all of an already shared region.
    pub fn from_arc(region: Arc<dyn Region>) -> ZcBuf {
        let len = region.bytes().len();
        ZcBuf {
            region,
            off: 0,
            len,
        }
    }

    /// The bytes of the window (empty if the region shrank, which its contract forbids).
    pub fn as_slice(&self) -> &[u8] {
        self.region
            .bytes()
            .get(self.off..self.off + self.len)
            .unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A window over `range` of this one (relative to it), clamped to it: never panics.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> ZcBuf {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        }
        .min(self.len);
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        }
        .clamp(start, self.len);
        ZcBuf {
            region: Arc::clone(&self.region),
            off: self.off + start,
            len: end - start,
        }
    }

    /// Shortens the window to `len` bytes (no-op if already shorter); no reference count
    /// changes.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// How many `ZcBuf`s share this one's region (diagnostics and tests).
    pub fn ref_count(&self) -> usize {
        Arc::strong_count(&self.region)
    }

    /// Whether `self` and `other` are windows into the same region.
    pub fn same_region(&self, other: &ZcBuf) -> bool {
        Arc::ptr_eq(&self.region, &other.region)
    }
}

impl std::ops::Deref for ZcBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for ZcBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for ZcBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZcBuf")
            .field("off", &self.off)
            .field("len", &self.len)
            .finish()
    }
}

impl From<Vec<u8>> for ZcBuf {
    fn from(v: Vec<u8>) -> ZcBuf {
        ZcBuf::new(v)
    }
}

impl From<Box<[u8]>> for ZcBuf {
    fn from(v: Box<[u8]>) -> ZcBuf {
        ZcBuf::new(v)
    }
}

impl From<&'static [u8]> for ZcBuf {
    fn from(v: &'static [u8]) -> ZcBuf {
        ZcBuf::new(v)
    }
}

/// Something whose bytes can be shared by reference: [`Share::share`] makes a [`ZcBuf`] of
/// bytes `off..off + len` of it (one reference count more, no copy). Only a scatter-gather
/// frame asks, so a source that holds its buffers in another form pays for a `ZcBuf` only then.
pub trait Share {
    fn share(&self, off: usize, len: usize) -> ZcBuf;
}

impl Share for ZcBuf {
    fn share(&self, off: usize, len: usize) -> ZcBuf {
        self.slice(off..off + len)
    }
}

/// Who owns one contiguous piece of a payload: something that can share it and the piece's
/// offset in it, or nobody that can be shared (bytes in a ring the source owns, which must be
/// copied).
pub type Owner<'a> = Option<(&'a dyn Share, usize)>;

/// A byte sequence held in pieces (a send queue of ring bytes and application buffers).
pub trait SpanSource {
    /// Calls `f` for each contiguous piece of bytes `off..off + len`, in order (fewer bytes if
    /// the source holds fewer), with the piece's owner.
    fn for_each_span(&self, off: usize, len: usize, f: &mut dyn FnMut(&[u8], Owner<'_>));

    /// Bytes `off..off + len` as one slice, if they are contiguous (the common case: a packet
    /// cut from inside one buffer); `None` otherwise (the caller walks the spans).
    fn contiguous(&self, _off: usize, _len: usize) -> Option<&[u8]> {
        None
    }
}

/// A payload: up to two plain slices (a send ring may wrap), or bytes `off..off + len` of a
/// [`SpanSource`].
#[derive(Clone, Copy)]
pub struct Gather<'a> {
    kind: Kind<'a>,
    len: usize,
}

#[derive(Clone, Copy)]
enum Kind<'a> {
    Two(&'a [u8], &'a [u8]),
    Source(&'a dyn SpanSource, usize),
}

impl<'a> Gather<'a> {
    /// The concatenation `a ++ b`.
    pub fn slices(a: &'a [u8], b: &'a [u8]) -> Gather<'a> {
        Gather {
            kind: Kind::Two(a, b),
            len: a.len() + b.len(),
        }
    }

    /// No bytes.
    pub fn empty() -> Gather<'a> {
        Gather::slices(&[], &[])
    }

    /// Bytes `off..off + len` of `src`.
    pub fn source(src: &'a dyn SpanSource, off: usize, len: usize) -> Gather<'a> {
        Gather {
            kind: Kind::Source(src, off),
            len,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The two slices, when the payload is made of plain slices (the copying path).
    pub fn as_slices(&self) -> Option<(&'a [u8], &'a [u8])> {
        match self.kind {
            Kind::Two(a, b) => Some((a, b)),
            Kind::Source(..) => None,
        }
    }

    /// Calls `f` for each contiguous piece of bytes `off..off + len` of the payload (clamped
    /// to it), in order, with its owner if it can be shared by reference.
    pub fn for_each_span(&self, off: usize, len: usize, f: &mut dyn FnMut(&[u8], Owner<'_>)) {
        let off = off.min(self.len);
        let len = len.min(self.len - off);
        if len == 0 {
            return;
        }
        match self.kind {
            Kind::Two(a, b) => {
                let a_part = a
                    .get(off.min(a.len())..(off + len).min(a.len()))
                    .unwrap_or(&[]);
                if !a_part.is_empty() {
                    f(a_part, None);
                }
                let b_off = off.saturating_sub(a.len());
                let b_len = len - a_part.len();
                let b_part = b
                    .get(b_off.min(b.len())..(b_off + b_len).min(b.len()))
                    .unwrap_or(&[]);
                if !b_part.is_empty() {
                    f(b_part, None);
                }
            }
            Kind::Source(src, base) => src.for_each_span(base + off, len, f),
        }
    }

    /// Bytes `off..off + len` of the payload as one slice, if they lie in one piece.
    pub fn contiguous(&self, off: usize, len: usize) -> Option<&'a [u8]> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        match self.kind {
            Kind::Two(a, b) => a
                .get(off..off + len)
                .or_else(|| b.get(off.checked_sub(a.len())?..off - a.len() + len)),
            Kind::Source(src, base) => src.contiguous(base + off, len),
        }
    }

    /// Copies the payload into `dst` (up to the shorter of the two); returns the count.
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        let mut at = 0;
        self.for_each_span(0, dst.len(), &mut |s, _| {
            let n = s.len().min(dst.len() - at);
            dst[at..at + n].copy_from_slice(&s[..n]);
            at += n;
        });
        at
    }

    /// The payload as one vector (tests, tools).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        self.for_each_span(0, self.len, &mut |s, _| v.extend_from_slice(s));
        v
    }
}

impl fmt::Debug for Gather<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Two(..) => "slices",
            Kind::Source(..) => "source",
        };
        f.debug_struct("Gather")
            .field("kind", &kind)
            .field("len", &self.len)
            .finish()
    }
}

/// The fragments of the frames of one transmit batch: (frame index, fragment) in frame order.
/// Only a scatter-gather device ([`crate::phy::Device::scatter_gather`]) is handed a batch with
/// fragments ([`crate::phy::Device::send_batch_sg`]); it releases them by the end of the call.
#[derive(Debug, Default, Clone)]
pub struct Frags {
    list: Vec<(usize, ZcBuf)>,
}

impl Frags {
    pub fn new() -> Frags {
        Frags::default()
    }

    /// Appends a fragment to frame `frame` (frames are filled in order: `frame` is at least
    /// the last one given).
    pub fn push(&mut self, frame: usize, frag: ZcBuf) {
        debug_assert!(self.list.last().is_none_or(|l| l.0 <= frame));
        self.list.push((frame, frag));
    }

    /// Removes frame `frame`'s fragments (it was not sent after all); they must be the last.
    pub fn forget(&mut self, frame: usize) {
        while self.list.last().is_some_and(|l| l.0 == frame) {
            self.list.pop();
        }
    }

    /// Frame `frame`'s fragments, in order.
    pub fn of(&self, frame: usize) -> impl Iterator<Item = &ZcBuf> + '_ {
        let a = self.list.partition_point(|e| e.0 < frame);
        let b = self.list.partition_point(|e| e.0 <= frame);
        self.list[a..b].iter().map(|e| &e.1)
    }

    /// Bytes in frame `frame`'s fragments.
    pub fn len_of(&self, frame: usize) -> usize {
        self.of(frame).map(ZcBuf::len).sum()
    }

    /// Fragments held (all frames).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Releases every fragment.
    pub fn clear(&mut self) {
        self.list.clear();
    }

    /// Copies each frame's fragments after its bytes (what a device without scatter-gather
    /// DMA must do) and releases them. Returns (frames that had fragments, bytes copied).
    pub fn linearize(&mut self, frames: &mut [PacketBuf]) -> (usize, usize) {
        let (mut nframes, mut bytes) = (0, 0);
        let mut last = None;
        for (i, f) in self.list.drain(..) {
            let Some(buf) = frames.get_mut(i) else {
                continue;
            };
            if last != Some(i) {
                nframes += 1;
                last = Some(i);
            }
            bytes += append(buf, &f);
        }
        (nframes, bytes)
    }

    /// Copies frame `frame`'s fragments after the bytes of `buf` (that frame, taken out of
    /// the batch); returns the bytes copied. The fragments stay until `clear`.
    pub fn copy_into(&self, frame: usize, buf: &mut PacketBuf) -> usize {
        self.of(frame).map(|f| append(buf, f)).sum()
    }
}

/// Appends `f`'s bytes to `buf`; a region that shrank (its contract forbids it) leaves zeros,
/// not a panic.
fn append(buf: &mut PacketBuf, f: &ZcBuf) -> usize {
    let s = f.as_slice();
    let at = buf.len();
    buf.set_len(at + f.len());
    let k = s.len().min(f.len());
    let dst = &mut buf.as_mut_slice()[at..];
    crate::mem::copy(&mut dst[..k], &s[..k]);
    dst[k..].fill(0);
    f.len()
}

impl Frags {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slicing_shares_and_clamps() {
        let b = ZcBuf::from((0u8..100).collect::<Vec<u8>>());
        let s = b.slice(10..20);
        assert_eq!(s.as_slice(), &(10u8..20).collect::<Vec<u8>>()[..]);
        assert_eq!(b.ref_count(), 2);
        assert!(s.same_region(&b));
        let t = s.slice(5..);
        assert_eq!(t.as_slice(), &[15, 16, 17, 18, 19]);
        assert_eq!(s.slice(8..1000).as_slice(), &[18, 19]);
        assert!(s.slice(50..60).is_empty());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = s.slice(7..3);
        assert!(reversed.is_empty());
        assert_eq!(b.slice(..=1).as_slice(), &[0, 1]);
        drop((s, t, reversed));
        assert_eq!(b.ref_count(), 1);
    }

    struct Pieces(Vec<ZcBuf>);
    impl SpanSource for Pieces {
        fn for_each_span(&self, off: usize, len: usize, f: &mut dyn FnMut(&[u8], Owner<'_>)) {
            let (mut pos, end) = (0, off + len);
            for p in &self.0 {
                let (s, e) = (pos.max(off), (pos + p.len()).min(end));
                if s < e {
                    f(&p.as_slice()[s - pos..e - pos], Some((p, s - pos)));
                }
                pos += p.len();
            }
        }
    }

    #[test]
    fn gather_walks_both_kinds_in_order() {
        let data: Vec<u8> = (0..50u8).collect();
        let (a, b) = data.split_at(17);
        let g = Gather::slices(a, b);
        assert_eq!(g.to_vec(), data);
        let src = Pieces(vec![
            ZcBuf::from(a.to_vec()),
            ZcBuf::from(Vec::new()),
            ZcBuf::from(b.to_vec()),
        ]);
        for (off, len) in [(0, 50), (3, 20), (17, 5), (40, 100), (60, 5)] {
            let want = &data[off.min(50)..(off + len).min(50)];
            let g2 = Gather::source(&src, 0, 50);
            let mut got = Vec::new();
            let mut owners = 0;
            g2.for_each_span(off, len, &mut |s, o| {
                got.extend_from_slice(s);
                owners += usize::from(o.is_some());
            });
            assert_eq!(got, want);
            let mut got = Vec::new();
            g.for_each_span(off, len, &mut |s, o| {
                assert!(o.is_none());
                got.extend_from_slice(s);
            });
            assert_eq!(got, want);
        }
        let mut out = [0u8; 10];
        assert_eq!(Gather::source(&src, 15, 10).copy_to(&mut out), 10);
        assert_eq!(out, data[15..25]);
    }

    #[test]
    fn frags_follow_their_frames_and_linearize() {
        let region = ZcBuf::from(b"0123456789".to_vec());
        let mut frames = vec![
            PacketBuf::from_slice(b"a"),
            PacketBuf::from_slice(b"b"),
            PacketBuf::from_slice(b"c"),
        ];
        let mut f = Frags::new();
        f.push(0, region.slice(0..2));
        f.push(0, region.slice(5..6));
        f.push(2, region.slice(8..));
        f.push(2, region.slice(3..4));
        f.forget(2);
        f.push(2, region.slice(9..));
        assert_eq!(f.len_of(0), 3);
        assert_eq!(f.len_of(1), 0);
        assert_eq!(f.of(2).count(), 1);
        assert_eq!(region.ref_count(), 4);
        assert_eq!(f.linearize(&mut frames), (2, 4));
        assert!(f.is_empty());
        assert_eq!(region.ref_count(), 1);
        assert_eq!(frames[0].as_slice(), b"a015");
        assert_eq!(frames[1].as_slice(), b"b");
        assert_eq!(frames[2].as_slice(), b"c9");
    }
}
