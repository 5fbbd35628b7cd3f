//! Devices: where frames enter and leave a stack. A device moves frames in batches (the OLS 2002 study
//! §4.2: process packets in bunches at each layer) and declares what it can offload.
//!
//! Devices compose as middleware, after smoltcp's `phy`: an impairment layer or a pcap writer
//! wraps another device and is itself a device.
//!
//! The core holds only what needs no operating system: the trait, its capabilities, the
//! in-memory [`pipe`] and the multi-queue link of pipes steered by RSS ([`mq`]). The OS
//! devices (TAP, packet socket and its ring, the virtio-net offload header, pcap files,
//! waiting on descriptors) live in the `netfold-os` crate.

use crate::buf::{Frags, PacketBuf, Pool};
use crate::time::Instant;

pub mod mq;
pub mod pipe;

/// Most frames one call of a [`Device::recv_lent`] callback gets (a device with more lends
/// them in several calls).
pub const MAX_LENT: usize = 64;

/// An operating-system descriptor number, as a device hands it to a driver that sleeps in
/// poll(2). The same type as Unix's `std::os::fd::RawFd` (`c_int`, 32 bits on every Unix
/// target), spelled here without `std::os` so that the core builds for any target: the core
/// only passes the number along, it never uses it.
pub type RawFd = i32;

/// What a frame on this device starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Medium {
    /// Ethernet II frames (14-byte header, optional 802.1Q tag).
    Ethernet,
    /// Bare IPv4 packets, no link header (TUN, raw IP links).
    Ip,
}

/// Checksum duties. `true` means the stack must do the work in software; `false` means the
/// device (or the link, e.g. a trusted in-memory pipe in offload mode) takes care of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChecksumCaps {
    /// Compute IPv4/TCP/UDP/ICMP checksums on transmit.
    pub tx: bool,
    /// Verify checksums on receive.
    pub rx: bool,
}

impl Default for ChecksumCaps {
    fn default() -> Self {
        ChecksumCaps { tx: true, rx: true }
    }
}

/// What a device is and can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceCaps {
    pub medium: Medium,
    /// Largest IP packet (not counting the link header) the link carries.
    pub mtu: usize,
    pub checksum: ChecksumCaps,
    /// The device accepts TCP super-segments up to 64 KiB and cuts them itself (TSO).
    pub tso: bool,
    /// The device may hand up already-aggregated TCP segments (GRO/LRO done below us).
    pub gro: bool,
    /// Largest number of frames worth asking for in one `recv_batch`.
    pub max_burst: usize,
}

impl Default for DeviceCaps {
    fn default() -> Self {
        DeviceCaps {
            medium: Medium::Ethernet,
            mtu: 1500,
            checksum: ChecksumCaps::default(),
            tso: false,
            gro: false,
            max_burst: 64,
        }
    }
}

/// A frame-moving device. All methods are non-blocking.
pub trait Device {
    fn caps(&self) -> DeviceCaps;

    /// Appends up to `max` received frames to `out` and returns how many it appended. Buffers
    /// for the frames come from `pool` where the device needs fresh ones; the device may also
    /// take surplus idle buffers from `pool` to recycle them to the peer (the in-memory pipe
    /// does, so that steady-state transfer allocates nothing).
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize;

    /// Lent receive, for devices whose frames arrive in memory they share with the kernel
    /// (AF_XDP's UMEM): calls `f` with received frames that stay where they arrived, up to
    /// `max` in all (in one or more calls of at most [`MAX_LENT`] frames each), and takes
    /// their memory back once `f` returns, so no byte is copied into a pool buffer. Returns
    /// `None` if the device does not lend (the caller uses [`Device::recv_batch`]), else
    /// `Some(frames lent)`.
    ///
    /// The frames are the device's for the next frame it receives: whoever wants to keep
    /// bytes past `f` copies them (the stack's TCP copies payload into its receive ring, as
    /// it does for reassembled segments; a frame-level borrowing read cannot keep a lent
    /// frame). Their checksums are unverified.
    fn recv_lent(
        &mut self,
        _now: Instant,
        _max: usize,
        _f: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<usize> {
        None
    }

    /// Lent transmit, the mirror of [`Device::recv_lent`], for devices that send from memory
    /// they share with the kernel (AF_XDP's UMEM): tops `pool` up with buffers in that memory
    /// ([`Pool::lend`]), so that the stack builds its next frames there and the device sends
    /// them in place, with no copy. The stack calls it before each round of output; frames in
    /// lent buffers reach [`Device::send_batch`] like any other, and the device recognizes
    /// its own ([`PacketBuf::lent_mem`]). Default: nothing is lent (frames are built on the
    /// heap and the device copies them).
    fn tx_lend(&mut self, _pool: &mut Pool) {}

    /// Transmits every frame in `frames` (draining it). Frames the link drops (full queue,
    /// impairment) are counted by the device and their buffers returned to `pool`.
    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>);

    /// When the device next has something to deliver that is waiting on time (a delayed
    /// frame, a rate limiter), if anything.
    fn poll_at(&self) -> Option<Instant> {
        None
    }

    /// A file descriptor that becomes readable when frames are waiting, so that a driver can
    /// sleep in poll(2) instead of waking on a timer (TAP, packet socket). In-memory devices
    /// have none.
    fn readable_fd(&self) -> Option<RawFd> {
        None
    }

    /// Scatter-gather transmit: the device takes frames whose payload continues in fragments
    /// (references to application buffers, zero-copy send) through
    /// [`Device::send_batch_sg`]. Only then does the stack make such frames, and only when the
    /// device also completes transmit checksums (`caps().checksum.tx == false`). Default: no,
    /// every frame is linear.
    fn scatter_gather(&self) -> bool {
        false
    }

    /// [`Device::send_batch`] for a batch in which frame `i` continues on the wire with
    /// `frags.of(i)` (a TAP sends linear bytes and fragments as one `writev`). The device
    /// releases every fragment by the end of the call (the caller clears `frags` after it).
    /// The default copies the fragments into their frames and sends those.
    fn send_batch_sg(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        frames: &mut Vec<PacketBuf>,
        frags: &mut Frags,
    ) {
        frags.linearize(frames);
        self.send_batch(now, pool, frames);
    }

    /// For devices without a descriptor (the in-memory pipe): `Some(waker)` arms a wake-up,
    /// so that `waker` is woken once when the peer next sends frames to this device; `None`
    /// disarms it. Returns whether the device can do this at all (`false`: sleep on
    /// [`Device::readable_fd`] or a timer instead).
    ///
    /// Frames that arrived before the arm are not announced, so a driver arms, polls once
    /// more, and sleeps only if that poll found nothing (the order NAPI uses when it
    /// re-enables an interrupt). A sender pays for the wake-up only while it is armed.
    fn wake_on_rx(&mut self, _waker: Option<&core::task::Waker>) -> bool {
        false
    }
}
