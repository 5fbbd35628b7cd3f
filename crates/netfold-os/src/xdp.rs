//! An AF_XDP device: raw Ethernet frames on one queue of an existing interface, moved
//! through rings shared with the driver instead of through the kernel's network stack
//! (Documentation/networking/af_xdp.rst).
//!
//! The pieces, as that document names them:
//! - **UMEM**: one anonymous mapping cut into `frames` chunks of [`CHUNK_SIZE`] bytes,
//!   registered with `XDP_UMEM_REG`. Half the chunks receive, half transmit.
//! - **Fill ring** (we produce, the kernel consumes): chunks the kernel may receive into.
//!   Every receive chunk is in it, in the kernel's hands or in the RX ring; each one read is
//!   given back at once.
//! - **RX ring** (kernel produces): descriptors (address, length) of received frames.
//! - **TX ring** (we produce): descriptors of frames to send, written into transmit chunks.
//! - **Completion ring** (kernel produces): transmit chunks the kernel is done with.
//! - **need_wakeup** (`XDP_USE_NEED_WAKEUP`, Linux 5.4): the kernel says in a ring's flags
//!   word when it needs a system call to make progress: `sendto` kicks the transmit side,
//!   `recvfrom` the fill side. In copy mode every transmit needs the kick (the kernel sends
//!   in the system call, 32 frames per call at most, `xsk_generic_xmit`), so a batch is
//!   kicked until the ring is empty; a zero-copy driver that is running asks for none.
//! - **XDP program** ([`super::xdp_prog`]): redirects the frames netfold owns (its addresses,
//!   and ARP/NDP for them; or everything, by option) to the socket through an `XSKMAP`, and
//!   passes the rest to the kernel, so the host keeps working on a shared interface. It is
//!   attached through a BPF link: closing the socket (or the process dying) detaches it.
//!
//! Modes, said at open and by [`XdpSocket::mode`] and [`XdpSocket::attach_mode`]: the socket
//! is bound zero-copy when the driver supports it (`XDP_ZEROCOPY`, the NIC DMAs into the
//! UMEM) and in copy mode otherwise (`XDP_COPY`: the kernel copies between its buffers and
//! the UMEM, as on a veth), unless [`XdpConfig::bind`] forces one; the program is attached
//! native (`XDP_FLAGS_DRV_MODE`, the driver runs it before an skb exists: veth, most 10G+
//! NICs) and generic (`XDP_FLAGS_SKB_MODE`, any driver) otherwise, unless
//! [`XdpConfig::attach`] forces one. Nothing falls back silently: each failure is an
//! [`XdpError`] that says what is missing.
//!
//! Copies between the rings and the stack: none on receive by default. Received frames are
//! lent to the stack where they lie in the UMEM ([`Device::recv_lent`]): it parses the batch
//! in place, TCP copies the payload into its receive ring (the copy any socket stack makes,
//! the kernel's too), and the chunks go back to the fill ring when the batch is done. With
//! [`XdpConfig::lend_rx`] off each frame is copied out of its chunk into a pooled buffer
//! instead, so the chunk goes back at once and the stack may hold the frame as long as it
//! likes (a frame-level borrowing read does). None on transmit either, for frames that fit a
//! chunk: the socket lends free transmit chunks to the stack ([`Device::tx_lend`]) as pool
//! buffers whose storage is the chunk, the stack builds its frames there, and `send_batch`
//! puts each such chunk on the TX ring as it is ([`XdpStats::tx_lent`]). Frames built
//! elsewhere (a buffer of another pool, a frame that outgrew its chunk, multi-buffer frames
//! at a larger MTU, whose pool buffers exceed a chunk so nothing is lent) are copied into a
//! transmit chunk. [`XdpStats::rx_copied_bytes`] and [`XdpStats::tx_copied_bytes`] count
//! the copies.
//! In copy mode (a veth) the kernel itself copies once more each way, between its buffers and
//! the UMEM.
//!
//! Frames larger than a chunk: with an MTU above [`MAX_SINGLE_CHUNK_MTU`] (3,822 bytes with
//! 4 KiB chunks) the socket is bound with `XDP_USE_SG` (multi-buffer, Linux 6.6 in copy mode)
//! and the program loaded with `BPF_F_XDP_HAS_FRAGS`: a frame spans several chunks, every
//! descriptor but its last marked `XDP_PKT_CONTD`, on both rings. Up to [`MAX_SG_MTU`]; above
//! that, or where the kernel refuses multi-buffer, opening fails with a typed error that says
//! the limit ([`XdpError::MtuTooLarge`], [`XdpError::NoMultiBuffer`]). A received multi-buffer
//! frame cannot be lent in place (its pieces lie in separate chunks): it is gathered into one
//! buffer, counted in [`XdpStats::rx_copied_bytes`].
//!
//! Several queues: [`XdpSocket::open_queues`] binds a socket to each queue, each with its own
//! UMEM and rings, behind one program whose XSKMAP has a slot per queue (see
//! [`super::xdpmq`] for them as the devices of shards).
//!
//! Offloads: none. AF_XDP frames carry no checksum or segmentation metadata, so the stack
//! runs with software checksums and segments at the MTU (`DeviceCaps` say so). What leaves
//! is made valid here whatever the stack hands over: a frame with a partial checksum
//! (`Csum::Partial`) has it completed, a TCP super-frame larger than the MTU is cut in
//! software ([`super::vnet::gso_split`], complete checksums per piece), anything else too
//! large for a chunk or the MTU is dropped and counted. What arrives is verified by the
//! stack. A kernel peer on a veth sends frames whose checksum it left to the "hardware"
//! (`CHECKSUM_PARTIAL`); XDP sees them before anything completes it, so such a peer needs
//! transmit checksumming off (`ethtool -K PEER tx off`) or the stack drops its TCP and UDP
//! frames as bad checksums (counted).
//!
//! Own ring code rather than a crate: the rings are four single-producer single-consumer
//! index pairs over shared memory (about 150 lines here), the same bpf(2) calls as the TAP
//! steering program load the XDP program; `xdpilone` does the rings only, and the crates that
//! also load a program (`xsk-rs`, `afxdp`, libxdp through `libxdp-dev`) do it through the C
//! libbpf/libxdp. Measured, there is no speed to win: in a `perf record`
//! of `netfold stream` between two netfold stacks over an AF_XDP veth (copy mode, native XDP,
//! AMD EPYC, 2 vCPUs) the ring code (`recv_batch`, `send_batch`, `queue_tx`) is 0.7% of the
//! samples, the copy into transmit chunks 2.2% (any copy-mode user pays it), the kernel 81%
//! (skb allocation and copies in `__xsk_generic_xmit`, veth, `__xsk_rcv`). The hot path is the
//! same shape in every implementation (read the producer with acquire, copy, store the
//! consumer with release), and a crate would be one more thing to keep up with for it.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::tap::{interface_mtu, wait_readable};
use crate::xdp_prog::{self, XdpFilter, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, XDP_PASS};
use netfold::buf::{Csum, PacketBuf, Pool, TxMem};
use netfold::phy::{ChecksumCaps, Device, DeviceCaps, Medium, MAX_LENT};
use netfold::time::{Duration, Instant};

/// Bytes per UMEM chunk: a page, so a chunk holds any frame a native-XDP driver hands over
/// (they cap the MTU below a page) and the aligned-chunk mode applies.
pub const CHUNK_SIZE: usize = 4096;

/// Most transmit chunks lent to the stack at once ([`Device::tx_lend`]): a few rounds of
/// output's worth.
const TX_LEND: usize = 256;
/// Transmit chunks never lent, for frames the stack built on the heap (copied).
const TX_KEEP: usize = 16;
/// Where the kernel puts a received frame inside its chunk in copy mode
/// (`XDP_PACKET_HEADROOM`); transmit frames start at the chunk's first byte.
const RX_HEADROOM: usize = 256;
/// Ethernet header plus one 802.1Q tag.
const LINK_OVERHEAD: usize = netfold::wire::ethernet::VLAN_HEADER_LEN;
/// The largest IP MTU of one chunk per frame: a chunk less the receive headroom and the
/// link header.
pub const MAX_SINGLE_CHUNK_MTU: usize = CHUNK_SIZE - RX_HEADROOM - LINK_OVERHEAD;
/// The largest IP MTU with multi-buffer frames (`XDP_USE_SG`): 16 chunks' worth, inside the
/// kernel's 17 fragments per frame (`MAX_SKB_FRAGS`) with room to spare.
pub const MAX_SG_MTU: usize = 16 * (CHUNK_SIZE - RX_HEADROOM) - LINK_OVERHEAD;
/// `XDP_PKT_CONTD` in a descriptor's options: the frame continues in the next descriptor.
const PKT_CONTD: u32 = libc::XDP_PKT_CONTD;
/// Most frames the kernel transmits per `sendto` kick in copy mode, and the bound on kicks
/// per batch (`ceil(TX ring / 32)` plus slack, so a stuck queue cannot hold the thread).
const MAX_KICKS: usize = 128;

/// How the socket is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpBind {
    /// Zero-copy when the driver supports it, copy mode otherwise (the kernel decides).
    #[default]
    Auto,
    /// Copy mode only.
    Copy,
    /// Zero-copy only: an error if the driver cannot.
    ZeroCopy,
}

/// Where the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpAttach {
    /// Native when the driver supports it, generic otherwise.
    #[default]
    Auto,
    /// In the driver (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// On the skb, for any driver (`XDP_FLAGS_SKB_MODE`).
    Generic,
}

/// The data path the socket got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// The NIC reads and writes the UMEM itself.
    ZeroCopy,
    /// The kernel copies between its buffers and the UMEM.
    Copy,
}

impl fmt::Display for XdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XdpMode::ZeroCopy => "zero-copy",
            XdpMode::Copy => "copy",
        })
    }
}

impl fmt::Display for XdpAttach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XdpAttach::Auto => "auto",
            XdpAttach::Native => "native",
            XdpAttach::Generic => "generic",
        })
    }
}

/// How an [`XdpSocket`] is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpConfig {
    /// The interface queue to bind (the program redirects only frames of this queue).
    pub queue: u32,
    /// Which frames the program redirects to the socket.
    pub filter: XdpFilter,
    pub bind: XdpBind,
    pub attach: XdpAttach,
    /// UMEM chunks (half receive, half transmit); rounded to a power of two, at least 64.
    pub frames: u32,
    /// IP MTU; `None` reads the interface's.
    pub mtu: Option<usize>,
    pub max_burst: usize,
    /// Lend received frames to the stack where they lie in the UMEM
    /// ([`Device::recv_lent`]) instead of copying each into a pool buffer; the chunks go
    /// back to the fill ring when the stack has parsed the batch. Off: every frame is copied
    /// out at once (a stack that keeps whole frames, a frame-level borrowing read, wants
    /// that).
    pub lend_rx: bool,
}

impl XdpConfig {
    /// Frames addressed to `addrs` (and ARP/NDP for them) on queue 0, the rest to the kernel.
    pub fn local(addrs: &[IpAddr]) -> XdpConfig {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for a in addrs {
            match a {
                IpAddr::V4(a) if !a.is_unspecified() => v4.push(*a),
                IpAddr::V6(a) if !a.is_unspecified() => v6.push(*a),
                _ => {}
            }
        }
        XdpConfig {
            filter: XdpFilter::Local { v4, v6 },
            ..XdpConfig::all()
        }
    }

    /// Every frame of queue 0 to the socket.
    pub fn all() -> XdpConfig {
        XdpConfig {
            queue: 0,
            filter: XdpFilter::All,
            bind: XdpBind::Auto,
            attach: XdpAttach::Auto,
            frames: 4096,
            mtu: None,
            max_burst: 64,
            lend_rx: true,
        }
    }
}

/// Why an AF_XDP device could not be opened. Each says what is missing; converted to an
/// `io::Error` (kind `PermissionDenied`, `Unsupported`, `NotFound`, `InvalidInput`, `Other`)
/// where callers want one.
#[derive(Debug)]
pub enum XdpError {
    /// No CAP_NET_ADMIN / CAP_BPF (not root).
    Permission(&'static str, io::Error),
    /// The kernel has no AF_XDP sockets, no XSKMAP or no BPF links for XDP (built without
    /// `CONFIG_XDP_SOCKETS`, or older than Linux 5.9).
    KernelUnsupported(&'static str, io::Error),
    /// The interface does not exist.
    NoInterface(String),
    /// The interface has no such queue, or is down.
    NoQueue {
        ifname: String,
        queue: u32,
        err: io::Error,
    },
    /// One socket per queue was asked for on more queues than the interface has (its receive
    /// and combined channels, `ethtool -l`).
    TooFewQueues {
        ifname: String,
        queues: u32,
        wanted: u32,
    },
    /// Zero-copy was required and the driver cannot do it.
    NoZeroCopy(io::Error),
    /// Native XDP was required (or generic failed too) and the driver cannot run it.
    NoDriverSupport(io::Error),
    /// Another XDP program is attached to the interface, or another AF_XDP socket is bound to
    /// the queue.
    Busy(io::Error),
    /// The MTU is beyond what AF_XDP frames here can carry: [`MAX_SG_MTU`], or, where
    /// multi-buffer frames are unavailable, [`MAX_SINGLE_CHUNK_MTU`] (`max` says which).
    MtuTooLarge { mtu: usize, max: usize },
    /// The MTU needs multi-buffer frames (`XDP_USE_SG`, Linux 6.6 in copy mode; a driver's
    /// own support in zero-copy) and the kernel or driver refused them.
    NoMultiBuffer { mtu: usize, err: io::Error },
    /// The filter names no address (it would redirect nothing).
    NoAddresses,
    /// The XDP program was refused (the verifier's log attached).
    Program(io::Error),
    /// Any other failure of the named step.
    Io(&'static str, io::Error),
}

impl fmt::Display for XdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XdpError::Permission(what, e) => {
                write!(
                    f,
                    "{what}: {e}: AF_XDP needs root (CAP_NET_ADMIN and CAP_BPF)"
                )
            }
            XdpError::KernelUnsupported(what, e) => write!(
                f,
                "{what}: {e}: this kernel has no AF_XDP (CONFIG_XDP_SOCKETS, Linux 5.9 or later \
                 for BPF links)"
            ),
            XdpError::NoInterface(n) => write!(f, "no interface {n:?}"),
            XdpError::NoQueue { ifname, queue, err } => write!(
                f,
                "binding queue {queue} of {ifname}: {err} (is it up, and does it have that many \
                 queues?)"
            ),
            XdpError::TooFewQueues {
                ifname,
                queues,
                wanted,
            } => write!(
                f,
                "{ifname} has {queues} receive queue(s), fewer than the {wanted} asked for (one \
                 per shard; `ethtool -L {ifname} combined {wanted}` or a veth made with \
                 numrxqueues {wanted} numtxqueues {wanted})"
            ),
            XdpError::NoZeroCopy(e) => write!(
                f,
                "zero-copy AF_XDP: {e}: the driver does not support it (use copy mode)"
            ),
            XdpError::NoDriverSupport(e) => {
                write!(
                    f,
                    "attaching the XDP program: {e}: the driver cannot run it"
                )
            }
            XdpError::Busy(e) => write!(
                f,
                "{e}: another XDP program is attached to the interface, or another AF_XDP \
                 socket is bound to the queue"
            ),
            XdpError::MtuTooLarge { mtu, max } => {
                write!(f, "MTU {mtu} is too large for AF_XDP here (at most {max})")
            }
            XdpError::NoMultiBuffer { mtu, err } => write!(
                f,
                "MTU {mtu} needs multi-buffer AF_XDP frames (XDP_USE_SG, Linux 6.6): {err}; \
                 without them the MTU is at most {MAX_SINGLE_CHUNK_MTU}"
            ),
            XdpError::NoAddresses => f.write_str(
                "the XDP filter names no local address (give the stack an address, or \
                 redirect everything)",
            ),
            XdpError::Program(e) => write!(f, "loading the XDP program: {e}"),
            XdpError::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for XdpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            XdpError::Permission(_, e)
            | XdpError::KernelUnsupported(_, e)
            | XdpError::NoQueue { err: e, .. }
            | XdpError::NoMultiBuffer { err: e, .. }
            | XdpError::NoZeroCopy(e)
            | XdpError::NoDriverSupport(e)
            | XdpError::Busy(e)
            | XdpError::Program(e)
            | XdpError::Io(_, e) => Some(e),
            _ => None,
        }
    }
}

impl From<XdpError> for io::Error {
    fn from(e: XdpError) -> io::Error {
        let kind = match &e {
            XdpError::Permission(..) => io::ErrorKind::PermissionDenied,
            XdpError::KernelUnsupported(..)
            | XdpError::NoMultiBuffer { .. }
            | XdpError::NoZeroCopy(_)
            | XdpError::NoDriverSupport(_) => io::ErrorKind::Unsupported,
            XdpError::NoInterface(_) => io::ErrorKind::NotFound,
            XdpError::MtuTooLarge { .. }
            | XdpError::NoAddresses
            | XdpError::NoQueue { .. }
            | XdpError::TooFewQueues { .. } => io::ErrorKind::InvalidInput,
            XdpError::Busy(_) => io::ErrorKind::ResourceBusy,
            XdpError::Program(_) | XdpError::Io(..) => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// Classifies a failed step: permission and missing-kernel-support errors get their own
/// variants, anything else is `Io(what, e)`.
fn classify(what: &'static str, e: io::Error) -> XdpError {
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => XdpError::Permission(what, e),
        Some(libc::EAFNOSUPPORT | libc::ENOSYS | libc::ENOPROTOOPT) => {
            XdpError::KernelUnsupported(what, e)
        }
        _ => XdpError::Io(what, e),
    }
}

/// Counters of an AF_XDP socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// RX descriptors outside the UMEM or their chunk: dropped.
    pub rx_bad_desc: u64,
    /// `recvfrom` calls to wake the fill side (need_wakeup set).
    pub rx_wakeups: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames not sent: no free transmit chunk after a kick, or too large for a chunk.
    pub tx_dropped: u64,
    /// `sendto` kicks of the transmit side.
    pub tx_kicks: u64,
    /// Partial checksums the stack left that were completed here.
    pub tx_csum_completed: u64,
    /// TCP super-frames cut here, and the segments they made.
    pub tx_gso_frames: u64,
    pub tx_gso_segments: u64,
    /// Frames lent to the stack in place ([`Device::recv_lent`]), of `rx_frames`.
    pub rx_lent: u64,
    /// Bytes copied between the rings' chunks and the stack's buffers: received frames
    /// copied out of their chunk into a pool buffer (0 while frames are lent), and frames
    /// copied into a transmit chunk (those not built in a lent chunk: 0 at MTUs whose frames
    /// fit a chunk, while the stack polls the socket).
    pub rx_copied_bytes: u64,
    pub tx_copied_bytes: u64,
    /// Frames sent from the transmit chunk the stack built them in ([`Device::tx_lend`]),
    /// of `tx_frames`: none of their bytes is in `tx_copied_bytes`.
    pub tx_lent: u64,
    /// Multi-buffer frames (larger than a chunk, `XDP_USE_SG`) received and sent. A received
    /// one is gathered into one buffer (its bytes counted in `rx_copied_bytes`) also when
    /// frames are lent.
    pub rx_multi_frames: u64,
    pub tx_multi_frames: u64,
}

/// A socket's copy counters, readable from another thread while the socket runs (updated at
/// the end of each batch): [`XdpSocket::copy_meter`].
#[derive(Debug, Default)]
pub struct XdpCopyMeter {
    rx_copied: AtomicU64,
    tx_copied: AtomicU64,
    rx_lent: AtomicU64,
    rx_frames: AtomicU64,
}

impl XdpCopyMeter {
    /// `(rx_copied_bytes, tx_copied_bytes, rx_lent, rx_frames)` as of the last batch.
    pub fn get(&self) -> (u64, u64, u64, u64) {
        (
            self.rx_copied.load(Ordering::Relaxed),
            self.tx_copied.load(Ordering::Relaxed),
            self.rx_lent.load(Ordering::Relaxed),
            self.rx_frames.load(Ordering::Relaxed),
        )
    }
}

/// The kernel's `XDP_STATISTICS` for the socket (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpKernelStats {
    /// Frames dropped for reasons other than an empty fill ring or a full RX ring.
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty: u64,
    pub tx_ring_empty: u64,
}

/// An anonymous mapping, unmapped on drop.
#[derive(Debug)]
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn anonymous(len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh private anonymous mapping; checked for MAP_FAILED; owned by the
        // returned value, which unmaps it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    fn of_socket(fd: BorrowedFd<'_>, len: usize, pgoff: u64) -> io::Result<Mapping> {
        // SAFETY: maps a ring the kernel allocated for this socket (the offset selects
        // which); checked for MAP_FAILED; owned by the returned value.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }
}

// SAFETY: a `Mapping` is an address range and its ownership (it unmaps on drop); it gives
// no access to the bytes by itself. Who reads or writes them (the socket's rings and UMEM
// accessors, a lent `UmemChunk`) does so under its own rules, whatever thread it is on.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: shared references to a `Mapping` reach only its address and length.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made above; no reference into it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// A transmit chunk of a socket's UMEM lent to the stack ([`Device::tx_lend`]): the stack
/// builds a frame in it and `send_batch` puts the chunk on the TX ring as it is. While the
/// chunk is lent it is on no ring and in no free list, so this value is the only way to its
/// bytes. Dropped by the stack (not sent), it gives the chunk back through `home`.
#[derive(Debug)]
struct UmemChunk {
    /// Keeps the UMEM mapped while the chunk is out (the stack may outlive the socket).
    mem: Arc<Mapping>,
    /// The chunk's start, a multiple of [`CHUNK_SIZE`] inside `mem`.
    addr: u64,
    /// Where a dropped chunk goes back to: the socket's list of chunks to reclaim.
    home: Arc<Mutex<Vec<u64>>>,
    /// Whether the chunk is lent (false once `send_batch` took it back: nothing to return).
    out: bool,
}

impl TxMem for UmemChunk {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `addr..addr + CHUNK_SIZE` is one chunk inside the mapping (`addr` came off
        // the transmit free list), lent to this value alone (see the type), and the mapping
        // lives as long as `mem`.
        unsafe { std::slice::from_raw_parts(self.mem.ptr.add(self.addr as usize), CHUNK_SIZE) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr.add(self.addr as usize), CHUNK_SIZE) }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl Drop for UmemChunk {
    fn drop(&mut self) {
        if self.out {
            if let Ok(mut h) = self.home.lock() {
                h.push(self.addr);
            }
        }
    }
}

/// One mapped ring: a producer index, a consumer index, a flags word and `size` entries of
/// `entry` bytes (`u64` chunk addresses for fill/completion, `struct xdp_desc` for RX/TX).
#[derive(Debug)]
struct Ring {
    map: Mapping,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    size: u32,
    /// Our copy of the index we own (the producer of fill/TX, the consumer of RX/completion).
    local: u32,
}

/// `struct xdp_desc`: u64 addr; u32 len; u32 options.
const DESC_LEN: usize = 16;

impl Ring {
    fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        entry: usize,
        pgoff: u64,
    ) -> io::Result<Ring> {
        let len = off.desc as usize + size as usize * entry;
        let map = Mapping::of_socket(fd, len, pgoff)?;
        let r = Ring {
            map,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            flags: off.flags as usize,
            desc: off.desc as usize,
            size,
            local: 0,
        };
        // Every offset must lie inside the mapping, 4-byte aligned for the index words.
        for at in [r.producer, r.consumer, r.flags] {
            if at + 4 > r.desc || !at.is_multiple_of(4) {
                return Err(io::Error::other("XDP ring offsets out of bounds"));
            }
        }
        if !r.desc.is_multiple_of(8) {
            return Err(io::Error::other("XDP ring descriptors misaligned"));
        }
        Ok(r)
    }

    fn word(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` was checked to lie inside the mapping and be 4-byte aligned (`map`);
        // the kernel accesses these words atomically too (smp_load_acquire /
        // smp_store_release in xsk_queue.h), and the mapping lives as long as `self`.
        unsafe { &*(self.map.ptr.add(at) as *const AtomicU32) }
    }
    fn producer(&self) -> &AtomicU32 {
        self.word(self.producer)
    }
    fn consumer(&self) -> &AtomicU32 {
        self.word(self.consumer)
    }
    fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
    fn slot(&self, idx: u32, entry: usize) -> *mut u8 {
        let i = (idx & (self.size - 1)) as usize;
        // SAFETY: `i < size`, and the mapping holds `size` entries of `entry` bytes from
        // `desc` (`map`), so the pointer stays inside it.
        unsafe { self.map.ptr.add(self.desc + i * entry) }
    }

    // The consumer side (RX, completion).
    /// Entries the kernel has produced that we have not consumed.
    fn available(&self) -> u32 {
        self.producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.local)
    }
    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }

    // The producer side (fill, TX).
    fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.producer().store(self.local, Ordering::Release);
    }
    /// Whether the kernel has consumed everything produced.
    fn drained(&self) -> bool {
        self.consumer().load(Ordering::Acquire) == self.local
    }

    fn read_addr(&self, idx: u32) -> u64 {
        // SAFETY: the slot lies in the mapping (`slot`); entries of fill/completion rings are
        // 8-byte aligned u64s (`desc` is 8-aligned); the kernel produced this entry before
        // the producer index we read with Acquire and does not touch it until we release.
        unsafe { (self.slot(idx, 8) as *const u64).read() }
    }
    fn write_addr(&mut self, idx: u32, addr: u64) {
        // SAFETY: as in `read_addr`; the slot is ours to write until `submit` publishes it.
        unsafe { (self.slot(idx, 8) as *mut u64).write(addr) }
    }
    /// `(addr, len, options)` of descriptor `idx`.
    fn read_desc(&self, idx: u32) -> (u64, u32, u32) {
        let p = self.slot(idx, DESC_LEN);
        // SAFETY: as in `read_addr`, for a 16-byte `struct xdp_desc` (addr at 0, len at 8,
        // options at 12).
        unsafe {
            (
                (p as *const u64).read(),
                (p.add(8) as *const u32).read(),
                (p.add(12) as *const u32).read(),
            )
        }
    }
    fn write_desc(&mut self, idx: u32, addr: u64, len: u32, options: u32) {
        let p = self.slot(idx, DESC_LEN);
        // SAFETY: as in `write_addr`, for a 16-byte `struct xdp_desc`.
        unsafe {
            (p as *mut u64).write(addr);
            (p.add(8) as *mut u32).write(len);
            (p.add(12) as *mut u32).write(options);
        }
    }
}

/// The XDP program of one interface and its XSKMAP, shared by the sockets it redirects to
/// (one per queue): detached when the last of them closes.
#[derive(Debug)]
struct XdpProgram {
    /// Declared first: dropped first, so the program is detached before the map goes.
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
}

/// An AF_XDP socket on one interface queue, with its UMEM, rings and XDP program. See the
/// module documentation.
#[derive(Debug)]
pub struct XdpSocket {
    /// Declared first: dropped first, so the program is detached (when this is its last
    /// socket) before the socket closes.
    program: Option<Arc<XdpProgram>>,
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    fd: OwnedFd,
    /// Declared after the socket: unmapped only once the kernel lets go of it.
    umem: Arc<Mapping>,
    /// Transmit chunks not in the kernel's hands (nor lent to the stack).
    tx_free: Vec<u64>,
    /// Transmit chunks lent to the stack ([`Device::tx_lend`]) and not yet back.
    tx_lent: usize,
    /// Lent chunks the stack dropped unsent, to go back on `tx_free`.
    tx_home: Arc<Mutex<Vec<u64>>>,
    /// Boxes of chunks `send_batch` took back, reused for the next lending.
    #[allow(clippy::vec_box)] // The boxes themselves are what is reused (no allocation).
    tx_boxes: Vec<Box<UmemChunk>>,
    ifname: String,
    ifindex: u32,
    queue: u32,
    mtu: usize,
    mode: XdpMode,
    attach: XdpAttach,
    need_wakeup: bool,
    max_burst: usize,
    stats: XdpStats,
    /// Frames the GSO fallback cut, waiting for chunks (reused between batches).
    split: Vec<PacketBuf>,
    lend_rx: bool,
    meter: Arc<XdpCopyMeter>,
    /// Multi-buffer frames are on (`XDP_USE_SG`).
    sg: bool,
    /// Buffers the pieces of multi-buffer frames are gathered into to be lent (reused).
    gather: Vec<Vec<u8>>,
}

// SAFETY: the mappings are owned by this value alone and every access goes through `&self` or
// `&mut self`; the kernel is the only other party. Moving it to another thread is as safe
// as moving the descriptors it owns.
unsafe impl Send for XdpSocket {}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn set_opt<T>(fd: BorrowedFd<'_>, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: setsockopt reads `size_of::<T>()` bytes from a live value of a `#[repr(C)]`
    // kernel structure (or an int) of exactly that size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(SOL_XDP, opt)` into a zeroed `T`; returns it and the length the kernel wrote.
fn get_opt<T: Copy>(fd: BorrowedFd<'_>, opt: libc::c_int, mut v: T) -> io::Result<(T, usize)> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live local `v`, a plain-data
    // kernel structure, and updates `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (&mut v as *mut T).cast(),
            &mut len,
        )
    })?;
    Ok((v, len as usize))
}

impl XdpSocket {
    /// Opens an AF_XDP socket on queue `config.queue` of interface `ifname` (in the caller's
    /// namespace), attaches the redirecting program and fills the fill ring. The modes it got
    /// are [`XdpSocket::mode`] and [`XdpSocket::attach_mode`].
    pub fn open(ifname: &str, config: XdpConfig) -> Result<XdpSocket, XdpError> {
        let mut s = XdpSocket::open_bound(ifname, &config)?;
        XdpSocket::attach_program(std::slice::from_mut(&mut s), &config)?;
        Ok(s)
    }

    /// One AF_XDP socket on each of queues `0..n` of interface `ifname` (`config.queue` is
    /// ignored), each with its own UMEM and rings, behind one XDP program that redirects
    /// each queue's frames (those `config.filter` names) to that queue's socket: the devices
    /// of `n` shards. The program stays attached until the last socket closes.
    pub fn open_queues(
        ifname: &str,
        n: u32,
        config: XdpConfig,
    ) -> Result<Vec<XdpSocket>, XdpError> {
        // Said up front, in the interface's own terms, rather than as the bind of the first
        // missing queue failing with EINVAL. Where the driver cannot tell (no
        // ETHTOOL_GCHANNELS), binding each queue is the check.
        if let Some(queues) = rx_queues(ifname) {
            if queues < n.max(1) {
                return Err(XdpError::TooFewQueues {
                    ifname: ifname.into(),
                    queues,
                    wanted: n.max(1),
                });
            }
        }
        let mut socks = (0..n.max(1))
            .map(|q| {
                let c = XdpConfig {
                    queue: q,
                    ..config.clone()
                };
                XdpSocket::open_bound(ifname, &c)
            })
            .collect::<Result<Vec<_>, _>>()?;
        XdpSocket::attach_program(&mut socks, &config)?;
        Ok(socks)
    }

    /// Loads and attaches the redirecting program for `socks` (sockets of one interface,
    /// each put into the XSKMAP at its queue), and gives each a share of it.
    fn attach_program(socks: &mut [XdpSocket], config: &XdpConfig) -> Result<(), XdpError> {
        let Some(first) = socks.first() else {
            return Ok(());
        };
        let ifindex = first.ifindex;
        let sg = socks.iter().any(|s| s.sg);
        let entries = socks.iter().map(|s| s.queue).max().unwrap_or(0) + 1;
        let map =
            xdp_prog::create_xskmap(entries).map_err(|e| classify("creating the XSKMAP", e))?;
        for s in socks.iter() {
            xdp_prog::set_xsk(map.as_fd(), s.queue, s.fd.as_fd())
                .map_err(|e| classify("putting the socket into the XSKMAP", e))?;
        }
        let insns = xdp_prog::program(&config.filter, map.as_raw_fd(), XDP_PASS);
        let prog = xdp_prog::load(&insns, sg).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM | libc::ENOSYS) => classify("loading the XDP program", e),
            _ => XdpError::Program(e),
        })?;
        let try_attach = |flags| xdp_prog::attach(prog.as_fd(), ifindex, flags);
        let attach_err = |e: io::Error| match e.raw_os_error() {
            Some(libc::EBUSY | libc::EEXIST) => XdpError::Busy(e),
            Some(libc::EOPNOTSUPP) => XdpError::NoDriverSupport(e),
            Some(libc::EINVAL) => XdpError::KernelUnsupported("attaching the XDP program", e),
            _ => classify("attaching the XDP program", e),
        };
        let (link, attach) = match config.attach {
            XdpAttach::Native => (
                try_attach(XDP_FLAGS_DRV_MODE).map_err(attach_err)?,
                XdpAttach::Native,
            ),
            XdpAttach::Generic => (
                try_attach(XDP_FLAGS_SKB_MODE).map_err(attach_err)?,
                XdpAttach::Generic,
            ),
            XdpAttach::Auto => match try_attach(XDP_FLAGS_DRV_MODE) {
                Ok(l) => (l, XdpAttach::Native),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EEXIST)) => {
                    return Err(XdpError::Busy(e));
                }
                Err(_) => (
                    try_attach(XDP_FLAGS_SKB_MODE).map_err(attach_err)?,
                    XdpAttach::Generic,
                ),
            },
        };

        let program = Arc::new(XdpProgram {
            _link: link,
            _prog: prog,
            _map: map,
        });
        for s in socks.iter_mut() {
            s.program = Some(Arc::clone(&program));
            s.attach = attach;
        }
        Ok(())
    }

    /// The socket of [`XdpSocket::open`] bound to its queue, its fill ring filled, with no
    /// program yet (frames still go to the kernel).
    fn open_bound(ifname: &str, config: &XdpConfig) -> Result<XdpSocket, XdpError> {
        if config.filter.is_empty() {
            return Err(XdpError::NoAddresses);
        }
        let cname = CString::new(ifname).map_err(|_| XdpError::NoInterface(ifname.into()))?;
        // SAFETY: a NUL-terminated name, read only during the call.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(XdpError::NoInterface(ifname.into()));
        }
        let mtu = match config.mtu {
            Some(m) => m,
            None => interface_mtu(ifname).unwrap_or(1500),
        };
        if mtu > MAX_SG_MTU {
            return Err(XdpError::MtuTooLarge {
                mtu,
                max: MAX_SG_MTU,
            });
        }
        // A frame larger than a chunk spans several (multi-buffer, `XDP_USE_SG`): asked for
        // only when the MTU needs it, so that smaller MTUs work on kernels without it.
        let sg = mtu > MAX_SINGLE_CHUNK_MTU;
        let frames = config.frames.clamp(64, 1 << 20).next_power_of_two();
        let half = frames / 2;

        // SAFETY: plain syscall; the result is checked and owned below.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(classify(
                "opening an AF_XDP socket",
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: `raw` was just opened and is owned from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let umem_len = frames as usize * CHUNK_SIZE;
        let umem = Mapping::anonymous(umem_len).map_err(|e| XdpError::Io("mapping the UMEM", e))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr as u64,
            len: umem_len as u64,
            chunk_size: CHUNK_SIZE as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        set_opt(fd.as_fd(), libc::XDP_UMEM_REG, &reg).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOBUFS) || e.raw_os_error() == Some(libc::ENOMEM) {
                XdpError::Io(
                    "registering the UMEM (locked memory: raise RLIMIT_MEMLOCK or run as root)",
                    e,
                )
            } else {
                classify("registering the UMEM", e)
            }
        })?;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "sizing the fill ring"),
            (libc::XDP_UMEM_COMPLETION_RING, "sizing the completion ring"),
            (libc::XDP_RX_RING, "sizing the RX ring"),
            (libc::XDP_TX_RING, "sizing the TX ring"),
        ] {
            let n: libc::c_int = half as libc::c_int;
            set_opt(fd.as_fd(), opt, &n).map_err(|e| classify(what, e))?;
        }
        // SAFETY: xdp_mmap_offsets is plain data; all-zero is valid.
        let zero: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let (off, len) = get_opt(fd.as_fd(), libc::XDP_MMAP_OFFSETS, zero)
            .map_err(|e| classify("reading the ring offsets", e))?;
        if len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            // A kernel before 5.4: no flags word, so no need_wakeup either.
            return Err(XdpError::KernelUnsupported(
                "reading the ring offsets",
                io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            ));
        }
        let map_err = |what| move |e| XdpError::Io(what, e);
        let rx = Ring::map(
            fd.as_fd(),
            &off.rx,
            half,
            DESC_LEN,
            libc::XDP_PGOFF_RX_RING as u64,
        )
        .map_err(map_err("mapping the RX ring"))?;
        let tx = Ring::map(
            fd.as_fd(),
            &off.tx,
            half,
            DESC_LEN,
            libc::XDP_PGOFF_TX_RING as u64,
        )
        .map_err(map_err("mapping the TX ring"))?;
        let mut fill = Ring::map(fd.as_fd(), &off.fr, half, 8, libc::XDP_UMEM_PGOFF_FILL_RING)
            .map_err(map_err("mapping the fill ring"))?;
        let comp = Ring::map(
            fd.as_fd(),
            &off.cr,
            half,
            8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        )
        .map_err(map_err("mapping the completion ring"))?;

        // The first half of the chunks receives: all of them go to the fill ring now.
        for i in 0..half {
            fill.write_addr(i, u64::from(i) * CHUNK_SIZE as u64);
        }
        fill.submit(half);
        let tx_free: Vec<u64> = (half..frames)
            .map(|i| u64::from(i) * CHUNK_SIZE as u64)
            .collect();

        let mode_flags = match config.bind {
            XdpBind::Auto => 0,
            XdpBind::Copy => libc::XDP_COPY,
            XdpBind::ZeroCopy => libc::XDP_ZEROCOPY,
        };
        let bind = |flags: u16| -> io::Result<()> {
            let sxdp = libc::sockaddr_xdp {
                sxdp_family: libc::AF_XDP as u16,
                sxdp_flags: flags,
                sxdp_ifindex: ifindex,
                sxdp_queue_id: config.queue,
                sxdp_shared_umem_fd: 0,
            };
            // SAFETY: bind reads a sockaddr_xdp of the given size from a live local.
            cvt(unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&sxdp as *const libc::sockaddr_xdp).cast(),
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            })
            .map(drop)
        };
        let mut need_wakeup = true;
        // A socket closed on this queue just before is let go of by a deferred kernel work
        // item (`xp_release_deferred`): until it ran, the queue is busy. Wait for it a while.
        let bind = |flags: u16| -> io::Result<()> {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
            loop {
                match bind(flags) {
                    Err(e)
                        if e.raw_os_error() == Some(libc::EBUSY)
                            && std::time::Instant::now() < until =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    r => return r,
                }
            }
        };
        let mode_flags = if sg {
            mode_flags | libc::XDP_USE_SG
        } else {
            mode_flags
        };
        let bound = match bind(mode_flags | libc::XDP_USE_NEED_WAKEUP) {
            // A kernel before 5.4 refuses the flag: bind without it and kick every time.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                need_wakeup = false;
                bind(mode_flags).map_err(|_| e)
            }
            r => r,
        };
        bound.map_err(|e| match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) if config.bind == XdpBind::ZeroCopy => XdpError::NoZeroCopy(e),
            Some(libc::EINVAL | libc::EOPNOTSUPP) if sg => XdpError::NoMultiBuffer { mtu, err: e },
            Some(libc::EBUSY) => XdpError::Busy(e),
            Some(libc::EINVAL | libc::ENETDOWN | libc::ENXIO) => XdpError::NoQueue {
                ifname: ifname.into(),
                queue: config.queue,
                err: e,
            },
            _ => classify("binding the AF_XDP socket", e),
        })?;
        let (opts, _) = get_opt(
            fd.as_fd(),
            libc::XDP_OPTIONS,
            libc::xdp_options { flags: 0 },
        )
        .map_err(|e| classify("reading the socket's options", e))?;
        let mode = if opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
            XdpMode::ZeroCopy
        } else {
            XdpMode::Copy
        };

        Ok(XdpSocket {
            program: None,
            rx,
            tx,
            fill,
            comp,
            fd,
            umem: Arc::new(umem),
            tx_lent: 0,
            tx_home: Arc::new(Mutex::new(Vec::new())),
            tx_boxes: Vec::new(),
            tx_free,
            ifname: ifname.to_owned(),
            ifindex,
            queue: config.queue,
            mtu: mtu.max(68),
            mode,
            attach: config.attach,
            need_wakeup,
            max_burst: config.max_burst.max(1),
            stats: XdpStats::default(),
            split: Vec::new(),
            lend_rx: config.lend_rx,
            meter: Arc::default(),
            sg,
            gather: (0..MAX_LENT).map(|_| Vec::new()).collect(),
        })
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
    pub fn queue(&self) -> u32 {
        self.queue
    }
    pub fn mtu(&self) -> usize {
        self.mtu
    }
    /// Zero-copy or copy mode, as the kernel bound the socket.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }
    /// Where the program runs: [`XdpAttach::Native`] or [`XdpAttach::Generic`].
    pub fn attach_mode(&self) -> XdpAttach {
        self.attach
    }
    /// Whether the kernel takes `XDP_USE_NEED_WAKEUP` (Linux 5.4): system calls only when a
    /// ring asks for one.
    pub fn need_wakeup(&self) -> bool {
        self.need_wakeup
    }
    pub fn stats(&self) -> XdpStats {
        self.stats
    }
    /// Whether received frames are lent in place ([`XdpConfig::lend_rx`]).
    pub fn lends_rx(&self) -> bool {
        self.lend_rx
    }
    /// The copy counters of [`XdpSocket::stats`], shared: the handle stays readable after
    /// the socket moved to the thread that runs it.
    pub fn copy_meter(&self) -> Arc<XdpCopyMeter> {
        Arc::clone(&self.meter)
    }
    fn publish_meter(&self) {
        let m = &self.meter;
        m.rx_copied
            .store(self.stats.rx_copied_bytes, Ordering::Relaxed);
        m.tx_copied
            .store(self.stats.tx_copied_bytes, Ordering::Relaxed);
        m.rx_lent.store(self.stats.rx_lent, Ordering::Relaxed);
        m.rx_frames.store(self.stats.rx_frames, Ordering::Relaxed);
    }

    /// Gives the chunks of the next `n` RX descriptors back to the fill ring (which has a
    /// slot for every receive chunk) and releases the descriptors.
    fn refill(&mut self, n: u32) {
        let mut refill = 0u32;
        for k in 0..n {
            let (addr, _, _) = self.rx.read_desc(self.rx.local.wrapping_add(k));
            // A bad address is given back as its chunk start if it lies in the UMEM at all
            // (else that chunk is lost to the kernel, not to memory safety).
            let chunk = addr - addr % CHUNK_SIZE as u64;
            if (chunk as usize) < self.umem.len {
                let f = self.fill.local.wrapping_add(refill);
                self.fill.write_addr(f, chunk);
                refill += 1;
            }
        }
        if n > 0 {
            self.rx.release(n);
            self.fill.submit(refill);
        }
    }

    /// The fill-ring wake-up (`recvfrom`), when the kernel asks for it.
    fn wake_fill(&mut self) {
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.stats.rx_wakeups += 1;
            // SAFETY: recvfrom with no buffer on our own socket: the fill-ring wake-up.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }
    /// One line for logs: interface, queue, modes.
    pub fn describe(&self) -> String {
        format!(
            "AF_XDP on {} queue {} ({} mode, {} XDP)",
            self.ifname, self.queue, self.mode, self.attach
        )
    }

    /// The kernel's counters for the socket (`XDP_STATISTICS`).
    pub fn kernel_stats(&self) -> io::Result<XdpKernelStats> {
        // SAFETY: plain data; all-zero is valid.
        let zero: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let (s, _) = get_opt(self.fd.as_fd(), libc::XDP_STATISTICS, zero)?;
        Ok(XdpKernelStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty: s.rx_fill_ring_empty_descs,
            tx_ring_empty: s.tx_ring_empty_descs,
        })
    }

    /// Sleeps until a frame is readable or `timeout` passes.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        wait_readable(self.fd.as_fd(), timeout)
    }

    /// The bytes of chunk data `addr..addr + len`, if they lie inside one chunk of the UMEM.
    fn umem_range(&self, addr: u64, len: usize) -> Option<(usize, usize)> {
        let start = usize::try_from(addr).ok()?;
        let end = start.checked_add(len)?;
        if len == 0 || end > self.umem.len || (end - 1) / CHUNK_SIZE != start / CHUNK_SIZE {
            return None;
        }
        Some((start, end))
    }

    /// Chunks the kernel finished sending, and lent ones the stack dropped, go back to the
    /// free list.
    fn reclaim(&mut self) {
        if let Ok(mut h) = self.tx_home.try_lock() {
            self.tx_lent -= h.len().min(self.tx_lent);
            self.tx_free.append(&mut h);
        }
        let n = self.comp.available();
        for k in 0..n {
            let addr = self.comp.read_addr(self.comp.local.wrapping_add(k));
            // Aligned mode: the chunk is the address rounded down (we gave chunk starts).
            self.tx_free.push(addr - addr % CHUNK_SIZE as u64);
        }
        if n > 0 {
            self.comp.release(n);
        }
    }

    /// Asks the kernel to send what the TX ring holds (`sendto`, the need_wakeup protocol):
    /// in copy mode it sends at most 32 frames per call and returns `EAGAIN` while more are
    /// queued, so this calls again until the ring is drained, a hard error, or the bound.
    fn kick_tx(&mut self) {
        for _ in 0..MAX_KICKS {
            if self.tx.drained() || (self.need_wakeup && !self.tx.needs_wakeup()) {
                return;
            }
            self.stats.tx_kicks += 1;
            // SAFETY: sendto with no buffer and no address on our own socket: a wake-up.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN | libc::EBUSY | libc::EINTR) => {}
                    // ENOBUFS, ENETDOWN, ENXIO...: the kernel gives up for now.
                    _ => return,
                }
            }
        }
    }

    /// Copies `frame` into free transmit chunks (one, or with multi-buffer frames as many as
    /// it needs, every descriptor but the last marked `XDP_PKT_CONTD`) and queues their
    /// descriptors (not yet published). Returns false (counted) if no chunk is free or it does
    /// not fit.
    fn queue_tx(&mut self, frame: &[u8], queued: &mut u32) -> bool {
        let max = if self.sg {
            self.mtu + LINK_OVERHEAD
        } else {
            CHUNK_SIZE
        };
        if frame.len() > max || frame.is_empty() {
            self.stats.tx_dropped += 1;
            return false;
        }
        let pieces = frame.len().div_ceil(CHUNK_SIZE);
        if self.tx_free.len() < pieces {
            // Publish what is queued, let the kernel send it, take the chunks back.
            self.tx.submit(*queued);
            *queued = 0;
            self.kick_tx();
            self.reclaim();
            if self.tx_free.len() < pieces {
                self.stats.tx_dropped += 1;
                return false;
            }
        }
        for (i, piece) in frame.chunks(CHUNK_SIZE).enumerate() {
            let Some(addr) = self.tx_free.pop() else {
                break;
            };
            let Some((start, end)) = self.umem_range(addr, piece.len()) else {
                self.stats.tx_dropped += 1;
                return false;
            };
            // SAFETY: `start..end` lies inside the UMEM (`umem_range`) in a transmit chunk
            // that is on no ring (it came off the free list), so the kernel does not access
            // it until the descriptor is published; no other reference to those bytes exists.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.add(start), end - start) };
            netfold::mem::copy(dst, piece);
            // The TX ring has a slot per transmit chunk, so a free chunk means a free slot.
            let idx = self.tx.local.wrapping_add(*queued);
            let more = if i + 1 < pieces { PKT_CONTD } else { 0 };
            self.tx.write_desc(idx, addr, piece.len() as u32, more);
            *queued += 1;
        }
        self.stats.tx_copied_bytes += frame.len() as u64;
        self.stats.tx_multi_frames += u64::from(pieces > 1);
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        true
    }

    /// Queues a frame the stack built in one of this socket's lent chunks (not yet
    /// published): no copy. Returns `f` back if it is not in one of ours.
    fn queue_lent(&mut self, mut f: PacketBuf, queued: &mut u32) -> Result<(), PacketBuf> {
        let ours = f
            .lent_mem()
            .and_then(|m| m.as_any().downcast_ref::<UmemChunk>())
            .is_some_and(|c| Arc::ptr_eq(&c.mem, &self.umem) && c.out);
        if !ours || f.is_empty() {
            return Err(f);
        }
        let Some((mem, start, end)) = f.take_lent() else {
            return Err(f);
        };
        let Ok(mut c) = mem.into_any().downcast::<UmemChunk>() else {
            return Ok(()); // Not reached: checked above.
        };
        c.out = false;
        self.tx_lent -= 1;
        let addr = c.addr + start as u64;
        self.tx_boxes.push(c);
        // The TX ring has a slot per transmit chunk, lent ones included.
        let idx = self.tx.local.wrapping_add(*queued);
        self.tx.write_desc(idx, addr, (end - start) as u32, 0);
        *queued += 1;
        self.stats.tx_lent += 1;
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += (end - start) as u64;
        Ok(())
    }

    /// The next received frame from RX descriptor `k` on (of `avail`): how many descriptors
    /// it spans (every one but the last has `XDP_PKT_CONTD`), or `None` if its last one has
    /// not arrived yet.
    fn frame_descs(&self, k: u32, avail: u32) -> Option<u32> {
        let mut end = k;
        while end < avail {
            let (_, _, opts) = self.rx.read_desc(self.rx.local.wrapping_add(end));
            end += 1;
            if opts & PKT_CONTD == 0 {
                return Some(end - k);
            }
        }
        None
    }

    /// The bytes of the `n` descriptors from RX descriptor `k` on, each inside one chunk,
    /// the whole at most `max_frame` bytes: the pieces of one frame. `None` (a bad
    /// descriptor) otherwise.
    fn pieces(&self, k: u32, n: u32, max_frame: usize) -> Option<Vec<(usize, usize)>> {
        let mut v = Vec::with_capacity(n as usize);
        let mut total = 0usize;
        for d in k..k + n {
            let (addr, len, _) = self.rx.read_desc(self.rx.local.wrapping_add(d));
            let r = self.umem_range(addr, len as usize)?;
            total += len as usize;
            v.push(r);
        }
        (total <= max_frame).then_some(v)
    }

    /// The bytes `start..end` of the UMEM, as `umem_range` gave them for a received chunk.
    ///
    /// # Safety
    /// `start..end` came from `umem_range` for a descriptor the kernel handed us through the
    /// RX ring and that has not been released (its chunk is not on the fill ring), and the
    /// slice is dropped before `refill` gives the chunk back.
    unsafe fn rx_bytes<'a>(&self, start: usize, end: usize) -> &'a [u8] {
        // SAFETY: the caller's contract: inside the mapping, not written by the kernel while
        // the slice lives.
        unsafe { std::slice::from_raw_parts(self.umem.ptr.add(start), end - start) }
    }
}

/// The payload bytes per segment that keep each piece of TCP super-frame `frame` within
/// `mtu` (its own IP and TCP header lengths subtracted), `None` if it is not a TCP frame the
/// segmenter takes.
fn tcp_mss(frame: &[u8], mtu: usize) -> Option<usize> {
    let l = crate::vnet::ip_layout(frame)?;
    if l.protocol != netfold::wire::IpProtocol::Tcp || l.fragment {
        return None;
    }
    let t = netfold::wire::tcp::TcpPacket::new_checked(frame.get(l.l4..l.end)?).ok()?;
    mtu.checked_sub(l.ihl + t.header_len()).filter(|&m| m > 0)
}

impl AsRawFd for XdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
impl AsFd for XdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Device for XdpSocket {
    fn readable_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn caps(&self) -> DeviceCaps {
        DeviceCaps {
            medium: Medium::Ethernet,
            mtu: self.mtu,
            // No offload metadata crosses an AF_XDP ring: the stack sums and segments.
            checksum: ChecksumCaps { tx: true, rx: true },
            tso: false,
            gro: false,
            max_burst: self.max_burst,
        }
    }

    fn recv_batch(
        &mut self,
        _now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let avail = self.rx.available();
        let max_frame = self.mtu + LINK_OVERHEAD;
        let mut appended = 0;
        let mut k = 0;
        while k < avail && appended < max {
            // A frame whose last piece has not arrived waits for the next call.
            let Some(n) = self.frame_descs(k, avail) else {
                break;
            };
            match self.pieces(k, n, max_frame) {
                Some(pieces) => {
                    let mut buf = pool.get();
                    for (start, end) in pieces {
                        // SAFETY: a range of a descriptor the kernel handed us and we have
                        // not released; the slice is gone before `refill` below.
                        buf.extend_from_slice(unsafe { self.rx_bytes(start, end) });
                    }
                    let len = buf.len() as u64;
                    self.stats.rx_multi_frames += u64::from(n > 1);
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += len;
                    self.stats.rx_copied_bytes += len;
                    out.push(buf);
                    appended += 1;
                }
                None => self.stats.rx_bad_desc += 1,
            }
            k += n;
        }
        // The chunks go straight back to the fill ring.
        self.refill(k);
        self.wake_fill();
        self.publish_meter();
        appended
    }

    fn recv_lent(
        &mut self,
        _now: Instant,
        max: usize,
        f: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<usize> {
        if !self.lend_rx {
            return None;
        }
        let max_frame = self.mtu + LINK_OVERHEAD;
        let mut lent = 0;
        let mut gather = std::mem::take(&mut self.gather);
        while lent < max {
            let avail = self.rx.available();
            let want = (max - lent).min(MAX_LENT);
            let mut frames: [&[u8]; MAX_LENT] = [&[]; MAX_LENT];
            let mut spare = gather.iter_mut();
            let mut got = 0;
            let mut in_place = 0;
            let mut k = 0;
            while k < avail && got < want {
                let Some(n) = self.frame_descs(k, avail) else {
                    break;
                };
                if n == 1 {
                    let (addr, len, _) = self.rx.read_desc(self.rx.local.wrapping_add(k));
                    let len = len as usize;
                    match self.umem_range(addr, len).filter(|_| len <= max_frame) {
                        Some((start, end)) => {
                            // SAFETY: a range of a descriptor the kernel handed us and we
                            // have not released. The slice lives only in `frames`, which `f`
                            // sees for its call alone (it cannot keep a reference: the
                            // callback's lifetimes are its own) and which ends with this
                            // round, before `refill` puts the chunk on the fill ring.
                            frames[got] = unsafe { self.rx_bytes(start, end) };
                            got += 1;
                            in_place += 1;
                            self.stats.rx_frames += 1;
                            self.stats.rx_bytes += len as u64;
                        }
                        None => self.stats.rx_bad_desc += 1,
                    }
                } else {
                    // A multi-buffer frame: its pieces lie in separate chunks, so it is
                    // gathered into one buffer of ours (counted as copied) and lent from
                    // there.
                    match (self.pieces(k, n, max_frame), spare.next()) {
                        (Some(pieces), Some(g)) => {
                            g.clear();
                            for (start, end) in pieces {
                                // SAFETY: as above; the slice is gone after this copy.
                                g.extend_from_slice(unsafe { self.rx_bytes(start, end) });
                            }
                            let len = g.len() as u64;
                            self.stats.rx_multi_frames += 1;
                            self.stats.rx_frames += 1;
                            self.stats.rx_bytes += len;
                            self.stats.rx_copied_bytes += len;
                            let g: &Vec<u8> = g;
                            frames[got] = g;
                            got += 1;
                        }
                        _ => self.stats.rx_bad_desc += 1,
                    }
                }
                k += n;
            }
            if k == 0 {
                break;
            }
            self.stats.rx_lent += in_place;
            f(&frames[..got]);
            lent += got;
            // The stack is done with the frames: their chunks go back to the kernel.
            self.refill(k);
        }
        self.gather = gather;
        self.wake_fill();
        self.publish_meter();
        Some(lent)
    }

    /// Lends free transmit chunks to the stack, up to `TX_LEND` out at once and leaving
    /// a few for frames built elsewhere (copied).
    fn tx_lend(&mut self, pool: &mut Pool) {
        if pool.buf_capacity() + netfold::buf::DEFAULT_HEADROOM > CHUNK_SIZE {
            return;
        }
        self.reclaim();
        while self.tx_lent < TX_LEND && self.tx_free.len() > TX_KEEP {
            let Some(addr) = self.tx_free.pop() else {
                break;
            };
            let chunk = match self.tx_boxes.pop() {
                Some(mut b) => {
                    b.addr = addr;
                    b.out = true;
                    b
                }
                None => Box::new(UmemChunk {
                    mem: self.umem.clone(),
                    addr,
                    home: self.tx_home.clone(),
                    out: true,
                }),
            };
            self.tx_lent += 1;
            pool.lend(PacketBuf::lent(chunk));
        }
    }

    fn send_batch(&mut self, _now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        self.reclaim();
        let max_frame = self.mtu + LINK_OVERHEAD;
        let mut queued = 0u32;
        let mut split = std::mem::take(&mut self.split);
        for mut f in frames.drain(..) {
            // What leaves must be a valid frame: finish what the stack left to a device.
            if let Csum::Partial { start, offset } = f.csum() {
                if crate::vnet::complete_partial(
                    f.as_mut_slice(),
                    usize::from(start),
                    usize::from(offset),
                ) {
                    self.stats.tx_csum_completed += 1;
                    f.set_csum(Csum::Unverified);
                }
            }
            if f.len() > max_frame {
                let segs = match tcp_mss(f.as_slice(), self.mtu) {
                    Some(mss) => crate::vnet::gso_split(f.as_slice(), mss, pool, &mut split),
                    None => 0,
                };
                if segs == 0 {
                    self.stats.tx_dropped += 1;
                } else {
                    self.stats.tx_gso_frames += 1;
                    self.stats.tx_gso_segments += segs as u64;
                    for s in split.drain(..) {
                        self.queue_tx(s.as_slice(), &mut queued);
                        pool.put(s);
                    }
                }
                pool.put(f);
                continue;
            }
            let f = match self.queue_lent(f, &mut queued) {
                Ok(()) => continue,
                Err(f) => f,
            };
            self.queue_tx(f.as_slice(), &mut queued);
            pool.put(f);
        }
        self.split = split;
        if queued > 0 {
            self.tx.submit(queued);
        }
        self.kick_tx();
        self.reclaim();
        self.publish_meter();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_interfaces_and_empty_filters_are_typed_errors() {
        let e = XdpSocket::open("nf-no-such-if", XdpConfig::all()).unwrap_err();
        assert!(matches!(e, XdpError::NoInterface(_)), "{e}");
        let e = XdpSocket::open("nul\0", XdpConfig::all()).unwrap_err();
        assert!(matches!(e, XdpError::NoInterface(_)), "{e}");
        let e = XdpSocket::open("lo", XdpConfig::local(&[])).unwrap_err();
        assert!(matches!(e, XdpError::NoAddresses), "{e}");
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::InvalidInput);
        // Beyond what even multi-buffer frames carry: refused before any socket.
        let cfg = XdpConfig {
            mtu: Some(MAX_SG_MTU + 1),
            ..XdpConfig::all()
        };
        let e = XdpSocket::open("lo", cfg).unwrap_err();
        assert!(
            matches!(e, XdpError::MtuTooLarge { mtu, max: MAX_SG_MTU } if mtu == MAX_SG_MTU + 1),
            "{e}"
        );
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn local_configs_keep_the_addresses_of_each_family() {
        let c = XdpConfig::local(&[
            "198.18.47.2".parse().unwrap(),
            "0.0.0.0".parse().unwrap(),
            "2001:2:0:47::2".parse().unwrap(),
        ]);
        assert_eq!(
            c.filter,
            XdpFilter::Local {
                v4: vec!["198.18.47.2".parse().unwrap()],
                v6: vec!["2001:2:0:47::2".parse().unwrap()],
            }
        );
    }
}

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// The receive queues `ifname` has in use (`ethtool -l`: receive-only plus combined
/// channels), or `None` where the driver does not say (or the interface is unknown: binding
/// reports that).
pub fn rx_queues(ifname: &str) -> Option<u32> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    if ifname.len() >= libc::IFNAMSIZ {
        return None;
    }
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    // SAFETY: an all-zero `ifreq` is a valid value (plain integers, arrays and a union of them).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&mut ch as *mut EthtoolChannels).cast();
    // SAFETY: socket(2) with constant arguments; the descriptor is owned right after.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: SIOCETHTOOL reads the name from `ifr` and writes at most a `struct
    // ethtool_channels` through `ifru_data`, which points at `ch`, alive for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut ifr) };
    if r < 0 {
        return None;
    }
    Some(ch.rx_count + ch.combined_count)
}
