//! The TPACKET_V3 memory-mapped receive ring of a [`super::packet_socket::PacketSocket`]
//! (Documentation/networking/packet_mmap.rst, "TPACKET_V3").
//!
//! The kernel fills fixed-size *blocks* of a shared mapping with frames and hands a block to
//! user space (status `TP_STATUS_USER`) when it is full or its retire timer expires; user space
//! walks the frames of the block and gives it back (`TP_STATUS_KERNEL`). One block carries many
//! frames, so a busy receiver makes no system call per frame, and none per batch either while
//! blocks keep arriving (the OLS 2002 study: process packets in bunches).
//!
//! Layout read here (linux/if_packet.h), all host byte order:
//! - `struct tpacket_block_desc`: `u32 version; u32 offset_to_priv;` then `tpacket_hdr_v1`:
//!   `u32 block_status` (offset 8), `u32 num_pkts` (12), `u32 offset_to_first_pkt` (16), ...
//! - `struct tpacket3_hdr`: `u32 tp_next_offset` (0), `tp_sec`, `tp_nsec`, `u32 tp_snaplen`
//!   (12), `u32 tp_len` (16), `u32 tp_status` (20), `u16 tp_mac` (24), `u16 tp_net` (26), ...
//! - with `PACKET_VNET_HDR`, the `virtio_net_hdr` sits immediately before the frame
//!   (`tp_mac - 10`), as `tpacket_rcv` writes it.
//!
//! Every offset read from the ring is bounds-checked against the block: the kernel is trusted
//! not to write a block it handed us, but a wrong offset is a counted drop, never a panic.
//!
//! The trade-off of TPACKET_V3: a block is handed over only when full or after
//! `retire_timeout_ms`, so a lone frame can wait up to that long (1 ms by default). Use the
//! plain socket path (`rx_ring: None`) for latency-bound request/response runs.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::vnet::{VnetHdr, VNET_HDR_LEN};

const SOL_PACKET: libc::c_int = 263;
/// `PACKET_RX_RING` socket option.
const PACKET_RX_RING: libc::c_int = 5;
/// `PACKET_VERSION` socket option.
const PACKET_VERSION: libc::c_int = 10;
/// `TPACKET_V3` (enum tpacket_versions).
const TPACKET_V3: libc::c_int = 2;
/// Block owned by the kernel.
const TP_STATUS_KERNEL: u32 = 0;
/// Block (or frame) owned by user space.
const TP_STATUS_USER: u32 = 1;

const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
const PKT_NEXT: usize = 0;
const PKT_SNAPLEN: usize = 12;
const PKT_LEN: usize = 16;
const PKT_MAC: usize = 24;
/// `V3_ALIGNMENT`: frames inside a TPACKET_V3 block start 8-byte aligned
/// (`tp_next_offset` = `ALIGN(len, 8)` in `prb_fill_curr_block`).
const FRAME_ALIGN: usize = 8;

/// Geometry of the receive ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxRingConfig {
    /// Bytes per block: a multiple of the page size, and larger than the largest frame (a
    /// 64 KiB GSO super-frame with offloads on), or such frames arrive truncated and are
    /// dropped.
    pub block_size: usize,
    pub block_nr: usize,
    /// How long the kernel waits before handing over a block that is not full (milliseconds,
    /// at least 1).
    pub retire_timeout_ms: u32,
}

impl Default for RxRingConfig {
    fn default() -> Self {
        RxRingConfig {
            block_size: 256 * 1024,
            block_nr: 16,
            retire_timeout_ms: 1,
        }
    }
}

/// `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
    tp_retire_blk_tov: u32,
    tp_sizeof_priv: u32,
    tp_feature_req_word: u32,
}

/// One frame found in the ring.
#[derive(Debug)]
pub struct RingFrame<'a> {
    /// The vnet header, when the socket has `PACKET_VNET_HDR`.
    pub hdr: VnetHdr,
    pub data: &'a [u8],
}

/// Counters of the ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Blocks consumed and given back.
    pub blocks: u64,
    /// Frames dropped because the kernel truncated them (larger than a block) or because an
    /// offset in the block was out of bounds.
    pub bad_frames: u64,
}

/// The mapped ring. Owns the mapping (unmapped on drop); the socket must outlive it, which
/// [`super::packet_socket::PacketSocket`] guarantees by declaring the ring before the fd.
#[derive(Debug)]
pub struct RxRing {
    base: *mut u8,
    map_len: usize,
    block_size: usize,
    block_nr: usize,
    vnet: bool,
    /// Block being read.
    cur: usize,
    /// Inside block `cur`: frames left and the offset of the next one (`None` = block not yet
    /// taken from the kernel).
    pos: Option<(u32, usize)>,
    stats: RingStats,
}

// SAFETY: the mapping is private to this value (no aliases are handed out beyond the borrow of
// `next`), so moving it to another thread is as safe as moving a Vec.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Switches `fd` to TPACKET_V3 and maps a receive ring. Must run before `bind` for the ring
    /// to see every frame, and after `PACKET_VNET_HDR` is set.
    pub fn setup(fd: BorrowedFd<'_>, cfg: RxRingConfig, vnet: bool) -> io::Result<RxRing> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let block_size = cfg.block_size.max(page).div_ceil(page) * page;
        let block_nr = cfg.block_nr.max(2);
        let map_len = block_size
            .checked_mul(block_nr)
            .filter(|&l| l <= 1 << 30)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring too large"))?;
        let frame_size = 2048usize;
        let err = |_| io::Error::new(io::ErrorKind::InvalidInput, "ring geometry overflows");
        let req = TpacketReq3 {
            tp_block_size: u32::try_from(block_size).map_err(err)?,
            tp_block_nr: u32::try_from(block_nr).map_err(err)?,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: u32::try_from(map_len / frame_size).map_err(err)?,
            tp_retire_blk_tov: cfg.retire_timeout_ms.max(1),
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        let version: libc::c_int = TPACKET_V3;
        // SAFETY: setsockopt reads one int from a live local.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_VERSION,
                (&version as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: setsockopt reads a tpacket_req3 (repr(C), the kernel's layout) from a live
        // local of exactly the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_RX_RING,
                (&req as *const TpacketReq3).cast(),
                std::mem::size_of::<TpacketReq3>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: maps the ring the kernel just allocated for this socket; the result is
        // checked for MAP_FAILED and owned (unmapped) by the returned value.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RxRing {
            base: p.cast(),
            map_len,
            block_size,
            block_nr,
            vnet,
            cur: 0,
            pos: None,
            stats: RingStats::default(),
        })
    }

    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// A ring over anonymous memory, for testing the block walk without a socket.
    #[cfg(test)]
    fn anonymous(block_size: usize, block_nr: usize, vnet: bool) -> RxRing {
        let map_len = block_size * block_nr;
        // SAFETY: an anonymous private mapping; checked for MAP_FAILED; unmapped by Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        RxRing {
            base: p.cast(),
            map_len,
            block_size,
            block_nr,
            vnet,
            cur: 0,
            pos: None,
            stats: RingStats::default(),
        }
    }

    /// Writable view of a block, for tests playing the kernel.
    #[cfg(test)]
    fn block_mut(&mut self, block: usize) -> &mut [u8] {
        assert!(block < self.block_nr);
        // SAFETY: inside the mapping; the exclusive borrow of `self` rules out other views.
        unsafe {
            std::slice::from_raw_parts_mut(self.base.add(block * self.block_size), self.block_size)
        }
    }
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    fn status(&self, block: usize) -> &AtomicU32 {
        debug_assert!(block < self.block_nr);
        // SAFETY: `block < block_nr`, so the word lies inside the mapping; block starts are
        // page-aligned, so offset 8 is 4-byte aligned as AtomicU32 requires; the kernel
        // accesses this word atomically too (smp_load_acquire/smp_store_release).
        unsafe { &*(self.base.add(block * self.block_size + BLOCK_STATUS) as *const AtomicU32) }
    }

    fn block(&self, block: usize) -> &[u8] {
        // SAFETY: inside the mapping; only called for a block whose status we observed as
        // TP_STATUS_USER (Acquire), which the kernel does not write until we store
        // TP_STATUS_KERNEL, and the slice does not outlive that release (it borrows `self`,
        // and `release` takes `&mut self`).
        unsafe {
            std::slice::from_raw_parts(self.base.add(block * self.block_size), self.block_size)
        }
    }

    fn release(&mut self) {
        self.status(self.cur)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.cur = (self.cur + 1) % self.block_nr;
        self.pos = None;
        self.stats.blocks += 1;
    }

    /// Calls `f` for up to `max` frames in the ring, giving each block back to the kernel as
    /// soon as its last frame has been handled. Returns the number of frames seen.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(RingFrame<'_>)) -> usize {
        let mut seen = 0;
        while seen < max {
            let (left, off) = match self.pos {
                Some(p) => p,
                None => {
                    if self.status(self.cur).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                        break;
                    }
                    let b = self.block(self.cur);
                    let n = rd32(b, BLOCK_NUM_PKTS).unwrap_or(0);
                    let first = rd32(b, BLOCK_FIRST_PKT).unwrap_or(0) as usize;
                    (n, first)
                }
            };
            if left == 0 {
                self.release();
                continue;
            }
            let b = self.block(self.cur);
            let parsed = parse_frame(b, off, self.vnet);
            let next = rd32(b, off + PKT_NEXT).unwrap_or(0) as usize;
            match parsed {
                Some(fr) => f(fr),
                None => self.stats.bad_frames += 1,
            }
            seen += 1;
            let left = left - 1;
            // A zero or misaligned next offset with frames left means the block is not what
            // we think: give it back rather than loop or read garbage.
            if left == 0 || next == 0 || !next.is_multiple_of(FRAME_ALIGN) {
                if left != 0 {
                    self.stats.bad_frames += u64::from(left);
                }
                self.release();
            } else {
                self.pos = Some((left, off + next));
            }
        }
        seen
    }
}

fn rd32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn rd16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes([s[0], s[1]]))
}

/// The frame at `off` in a block, `None` if truncated by the kernel or out of bounds.
fn parse_frame(block: &[u8], off: usize, vnet: bool) -> Option<RingFrame<'_>> {
    let snaplen = rd32(block, off.checked_add(PKT_SNAPLEN)?)? as usize;
    let len = rd32(block, off.checked_add(PKT_LEN)?)? as usize;
    let mac = usize::from(rd16(block, off.checked_add(PKT_MAC)?)?);
    if snaplen != len {
        return None;
    }
    let start = off.checked_add(mac)?;
    let data = block.get(start..start.checked_add(snaplen)?)?;
    let hdr = if vnet {
        VnetHdr::parse(block.get(start.checked_sub(VNET_HDR_LEN)?..start)?)?
    } else {
        VnetHdr::default()
    };
    Some(RingFrame { hdr, data })
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `setup`; no borrow of it can outlive
        // `self`.
        unsafe {
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_at(block: &mut [u8], off: usize, next: u32, mac: u16, data: &[u8]) {
        block[off..off + 4].copy_from_slice(&next.to_ne_bytes());
        let n = data.len() as u32;
        block[off + PKT_SNAPLEN..off + PKT_SNAPLEN + 4].copy_from_slice(&n.to_ne_bytes());
        block[off + PKT_LEN..off + PKT_LEN + 4].copy_from_slice(&n.to_ne_bytes());
        block[off + PKT_MAC..off + PKT_MAC + 2].copy_from_slice(&mac.to_ne_bytes());
        let s = off + usize::from(mac);
        block[s..s + data.len()].copy_from_slice(data);
    }

    /// Plays the kernel: fills block `i` with `frames` and hands it to user space.
    fn fill_block(ring: &mut RxRing, i: usize, frames: &[&[u8]]) {
        let b = ring.block_mut(i);
        b.fill(0);
        let first = 48usize;
        let mut off = first;
        for (k, f) in frames.iter().enumerate() {
            let mac = 66u16;
            let len = usize::from(mac) + f.len();
            let next = if k + 1 == frames.len() {
                0
            } else {
                len.div_ceil(FRAME_ALIGN) * FRAME_ALIGN
            };
            frame_at(b, off, next as u32, mac, f);
            off += next;
        }
        b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        b[BLOCK_FIRST_PKT..BLOCK_FIRST_PKT + 4].copy_from_slice(&(first as u32).to_ne_bytes());
        ring.status(i).store(TP_STATUS_USER, Ordering::Release);
    }

    #[test]
    fn ring_walks_blocks_in_order_and_gives_them_back() {
        let mut ring = RxRing::anonymous(4096, 3, false);
        let mut got: Vec<Vec<u8>> = Vec::new();
        // Nothing handed over yet.
        assert_eq!(ring.drain(8, |f| got.push(f.data.to_vec())), 0);
        fill_block(&mut ring, 0, &[b"a", b"bbbbbbbbb", b"cc"]);
        fill_block(&mut ring, 1, &[b"d"]);
        // A batch limit in the middle of a block resumes where it stopped.
        assert_eq!(ring.drain(2, |f| got.push(f.data.to_vec())), 2);
        assert_eq!(ring.status(0).load(Ordering::Acquire), TP_STATUS_USER);
        assert_eq!(ring.drain(8, |f| got.push(f.data.to_vec())), 2);
        assert_eq!(got, [&b"a"[..], b"bbbbbbbbb", b"cc", b"d"]);
        assert_eq!(ring.status(0).load(Ordering::Acquire), TP_STATUS_KERNEL);
        assert_eq!(ring.status(1).load(Ordering::Acquire), TP_STATUS_KERNEL);
        assert_eq!(ring.stats().blocks, 2);
        // Wrap-around: blocks 2 then 0 again.
        fill_block(&mut ring, 2, &[b"e"]);
        fill_block(&mut ring, 0, &[b"f"]);
        got.clear();
        assert_eq!(ring.drain(8, |f| got.push(f.data.to_vec())), 2);
        assert_eq!(got, [&b"e"[..], b"f"]);
        assert_eq!(ring.stats().bad_frames, 0);
    }

    #[test]
    fn ring_survives_garbage_offsets() {
        let mut ring = RxRing::anonymous(4096, 2, true);
        fill_block(&mut ring, 0, &[b"x", b"y", b"z"]);
        // Corrupt: the first frame's next offset points outside, with frames left.
        let b = ring.block_mut(0);
        b[48..52].copy_from_slice(&0x7fff_fff8u32.to_ne_bytes());
        let mut n = 0;
        ring.drain(8, |_| n += 1);
        assert!(n <= 1);
        assert!(ring.stats().bad_frames >= 2);
        assert_eq!(ring.status(0).load(Ordering::Acquire), TP_STATUS_KERNEL);
        // A block claiming a huge packet count with a first offset past the end.
        fill_block(&mut ring, 1, &[b"w"]);
        let b = ring.block_mut(1);
        b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        b[BLOCK_FIRST_PKT..BLOCK_FIRST_PKT + 4].copy_from_slice(&5000u32.to_ne_bytes());
        ring.drain(usize::MAX, |_| panic!("no frame should parse"));
        assert_eq!(ring.status(1).load(Ordering::Acquire), TP_STATUS_KERNEL);
    }

    #[test]
    fn frames_parse_with_and_without_vnet_header() {
        let mut b = vec![0u8; 4096];
        let h = VnetHdr {
            flags: 1,
            csum_start: 34,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        b[48 + 82 - 10..48 + 82].copy_from_slice(&h.to_bytes());
        frame_at(&mut b, 48, 256, 82, b"frame-one");
        let f = parse_frame(&b, 48, true).unwrap();
        assert_eq!((f.hdr, f.data), (h, &b"frame-one"[..]));
        let f = parse_frame(&b, 48, false).unwrap();
        assert_eq!(f.hdr, VnetHdr::default());
    }

    #[test]
    fn truncated_or_out_of_bounds_frames_are_refused() {
        let mut b = vec![0u8; 512];
        frame_at(&mut b, 0, 0, 64, &[1; 100]);
        // Kernel truncation: snaplen < len.
        b[PKT_LEN..PKT_LEN + 4].copy_from_slice(&200u32.to_ne_bytes());
        assert!(parse_frame(&b, 0, false).is_none());
        // Data running past the block.
        frame_at(&mut b, 0, 0, 500, &[]);
        b[PKT_SNAPLEN..PKT_SNAPLEN + 4].copy_from_slice(&100u32.to_ne_bytes());
        b[PKT_LEN..PKT_LEN + 4].copy_from_slice(&100u32.to_ne_bytes());
        assert!(parse_frame(&b, 0, false).is_none());
        // Header past the block, vnet header before the block start.
        assert!(parse_frame(&b, 510, false).is_none());
        assert!(parse_frame(&b, usize::MAX - 3, false).is_none());
        frame_at(&mut b, 0, 0, 4, &[1, 2]);
        assert!(parse_frame(&b, 0, true).is_none());
    }
}
