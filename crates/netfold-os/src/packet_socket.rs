//! An `AF_PACKET` device: raw Ethernet frames on an existing interface of the caller's network
//! namespace (e.g. the root end of a veth pair whose other end is the kernel's, in a netns),
//! with the virtio-net header (`PACKET_VNET_HDR`, packet(7)) where the kernel offers it, so
//! the same offload logic as the TAP applies ([`super::vnet`]).
//!
//! Receive: by default from a TPACKET_V3 memory-mapped ring ([`super::packet_ring`]): no
//! system call per frame, one copy from the ring into a pooled buffer. Without the ring
//! (`rx_ring: None`), a non-blocking read until `EAGAIN` or the batch is full, each frame read
//! straight into a pooled buffer (`readv` of the vnet header and the frame). Our own
//! transmitted frames are excluded with `PACKET_IGNORE_OUTGOING`. Transmit: one system call per
//! batch, `sendmmsg(2)` of up to 64 frames, each with its vnet header.
//!
//! Unlike a TAP, we cannot tell the peer what to offload: a veth peer with TSO on sends GSO
//! super-frames with partial checksums whatever we want. With the vnet header we are told so
//! and, with offloads off, complete the checksums and cut the super-frames in software before
//! the stack sees them. Unsafe code is limited to the syscalls, each with a `// SAFETY:` line.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::packet_ring::{RingStats, RxRing, RxRingConfig};
use crate::tap::{classify, deliver_rx, interface_mtu, read_frame, wait_readable, Io};
use crate::vnet::{self, OffloadStats, VnetHdr, VNET_HDR_LEN};
use netfold::buf::{PacketBuf, Pool};
use netfold::phy::{ChecksumCaps, Device, DeviceCaps, Medium};
use netfold::time::{Duration, Instant};

/// `SOL_PACKET` option: prepend a `virtio_net_hdr` to every frame (linux/if_packet.h).
const PACKET_VNET_HDR: libc::c_int = 15;
/// `SOL_PACKET` option: do not deliver our own transmitted frames back to us (Linux 4.20).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const SOL_PACKET: libc::c_int = 263;
/// `SOL_PACKET` option: read (and reset) the socket's receive/drop counters.
const PACKET_STATISTICS: libc::c_int = 6;
/// Ethernet header plus one 802.1Q tag.
const LINK_OVERHEAD: usize = netfold::wire::ethernet::VLAN_HEADER_LEN;
/// Largest IPv4 packet (total length is 16 bits, RFC 791 §3.1): bounds a GSO frame.
const MAX_IP_PACKET: usize = netfold::wire::ipv4::MAX_PACKET_LEN;

/// How a [`PacketSocket`] is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketSocketConfig {
    /// Offer checksum offload and TSO/GRO to the stack (needs `PACKET_VNET_HDR`; silently off
    /// if the kernel refuses it).
    pub offloads: bool,
    /// With offloads: pass GSO super-frames up whole (`caps.gro`) or split them in software.
    pub gro: bool,
    /// IP MTU; `None` reads the interface's.
    pub mtu: Option<usize>,
    pub max_burst: usize,
    /// Receive through a TPACKET_V3 memory-mapped ring (see [`super::packet_ring`]); `None`
    /// reads one frame per system call instead (lower latency at low rates).
    pub rx_ring: Option<RxRingConfig>,
}

impl Default for PacketSocketConfig {
    fn default() -> Self {
        PacketSocketConfig {
            offloads: true,
            gro: true,
            mtu: None,
            max_burst: 64,
            rx_ring: Some(RxRingConfig::default()),
        }
    }
}

/// The kernel's `PACKET_STATISTICS` for a packet socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames the kernel queued for us (drops included).
    pub packets: u32,
    /// Frames dropped because the socket buffer or the ring was full.
    pub drops: u32,
}

/// Counters of a packet socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketSocketStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub tx_dropped: u64,
    pub offload: OffloadStats,
}

/// An `AF_PACKET` socket bound to one interface. See the module documentation.
#[derive(Debug)]
pub struct PacketSocket {
    /// Declared before `fd`: unmapped before the socket is closed.
    ring: Option<RxRing>,
    fd: OwnedFd,
    ifname: String,
    ifindex: u32,
    config: PacketSocketConfig,
    /// The kernel accepted `PACKET_VNET_HDR`: every frame carries a vnet header.
    vnet_hdr: bool,
    mtu: usize,
    stats: PacketSocketStats,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn set_int_opt(fd: BorrowedFd<'_>, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live local int.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

impl PacketSocket {
    /// Opens a packet socket on interface `ifname` of the caller's namespace.
    pub fn open(ifname: &str, config: PacketSocketConfig) -> io::Result<PacketSocket> {
        let cname = CString::new(ifname)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
        // SAFETY: a NUL-terminated name, read only during the call.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain syscall; the result is checked.
        let raw = cvt(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            )
        })?;
        // SAFETY: `raw` was just opened and is owned from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Must be set before bind; a kernel without it cannot do offloads with us.
        // Wanted with offloads off too: it is how we learn that a frame is partial or GSO.
        let vnet_hdr = set_int_opt(fd.as_fd(), PACKET_VNET_HDR, 1).is_ok();
        // Best effort: older kernels show us our own frames, which the stack then drops as
        // not addressed to it (their source is our MAC).
        let _ = set_int_opt(fd.as_fd(), PACKET_IGNORE_OUTGOING, 1);
        // The ring goes in before bind, so no frame reaches the socket's plain queue first.
        let ring = match config.rx_ring {
            Some(rc) => Some(RxRing::setup(fd.as_fd(), rc, vnet_hdr)?),
            None => None,
        };
        // SAFETY: sockaddr_ll is plain data; all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: bind reads a sockaddr_ll of the given size from a live local.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        let mtu = match config.mtu {
            Some(m) => m,
            None => interface_mtu(ifname).unwrap_or(1500),
        };
        Ok(PacketSocket {
            ring,
            fd,
            ifname: ifname.to_owned(),
            ifindex,
            config,
            vnet_hdr,
            mtu: mtu.clamp(68, MAX_IP_PACKET),
            stats: PacketSocketStats::default(),
        })
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    pub fn mtu(&self) -> usize {
        self.mtu
    }
    /// Whether frames carry the vnet header (the kernel accepted `PACKET_VNET_HDR`).
    pub fn has_vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }
    /// Whether offloads are in effect (asked for and possible).
    pub fn offloads(&self) -> bool {
        self.config.offloads && self.vnet_hdr
    }
    pub fn stats(&self) -> PacketSocketStats {
        self.stats
    }
    /// Sleeps until a frame is readable or `timeout` passes.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        wait_readable(self.fd.as_fd(), timeout)
    }

    /// The kernel's counters for this socket since the last call (`PACKET_STATISTICS`, which
    /// resets them): frames received and frames dropped because the socket queue or ring was
    /// full.
    pub fn kernel_stats(&self) -> io::Result<KernelStats> {
        // struct tpacket_stats_v3 { tp_packets, tp_drops, tp_freeze_q_cnt } (a TPACKET_V1/V2
        // socket fills only the first two).
        let mut v = [0u32; 3];
        let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into the live local array and updates
        // `len`.
        cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                v.as_mut_ptr().cast(),
                &mut len,
            )
        })?;
        Ok(KernelStats {
            packets: v[0],
            drops: v[1],
        })
    }

    /// Counters of the receive ring, if there is one.
    pub fn ring_stats(&self) -> Option<RingStats> {
        self.ring.as_ref().map(RxRing::stats)
    }

    fn max_frame(&self) -> usize {
        // With the vnet header the kernel may hand us GSO super-frames even with our offloads
        // off (we split them); without it, only what fits the MTU is expected.
        if self.vnet_hdr {
            MAX_IP_PACKET + LINK_OVERHEAD
        } else {
            self.mtu + LINK_OVERHEAD
        }
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// `read` of one frame without a vnet header.
fn read_plain(fd: BorrowedFd<'_>, frame: &mut [u8]) -> Io {
    // SAFETY: the buffer is live and exclusively borrowed for `frame.len()` bytes.
    let n = unsafe { libc::read(fd.as_raw_fd(), frame.as_mut_ptr().cast(), frame.len()) };
    classify(n)
}

impl Device for PacketSocket {
    fn readable_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn caps(&self) -> DeviceCaps {
        let off = self.offloads();
        DeviceCaps {
            medium: Medium::Ethernet,
            mtu: self.mtu,
            checksum: ChecksumCaps { tx: !off, rx: !off },
            tso: off,
            gro: off && self.config.gro,
            max_burst: self.config.max_burst.max(1),
        }
    }

    fn recv_batch(
        &mut self,
        _now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let offloads = self.offloads();
        if let Some(ring) = self.ring.as_mut() {
            let (gro, st) = (self.config.gro, &mut self.stats);
            let mut appended = 0;
            ring.drain(max, |fr| {
                let mut buf = pool.get();
                buf.extend_from_slice(fr.data);
                st.rx_frames += 1;
                st.rx_bytes += fr.data.len() as u64;
                appended += deliver_rx(&fr.hdr, buf, offloads, gro, pool, &mut st.offload, out);
            });
            return appended;
        }
        let max_frame = self.max_frame();
        let mut appended = 0;
        let mut reads = 0;
        while reads < max {
            let mut buf = pool.get();
            buf.set_len(max_frame + 1);
            let mut hdr = [0u8; VNET_HDR_LEN];
            let r = if self.vnet_hdr {
                read_frame(self.fd.as_fd(), &mut hdr, buf.as_mut_slice())
            } else {
                read_plain(self.fd.as_fd(), buf.as_mut_slice())
            };
            let n = match r {
                Io::Done(n) => n,
                Io::WouldBlock => {
                    pool.put(buf);
                    break;
                }
                Io::Failed => {
                    self.stats.rx_errors += 1;
                    pool.put(buf);
                    break;
                }
            };
            reads += 1;
            let hlen = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
            let (Some(h), Some(len)) = (VnetHdr::parse(&hdr), n.checked_sub(hlen)) else {
                self.stats.rx_errors += 1;
                pool.put(buf);
                continue;
            };
            if len > max_frame {
                self.stats.rx_errors += 1;
                pool.put(buf);
                continue;
            }
            buf.truncate(len);
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += len as u64;
            appended += deliver_rx(
                &h,
                buf,
                self.offloads(),
                self.config.gro,
                pool,
                &mut self.stats.offload,
                out,
            );
        }
        appended
    }

    fn send_batch(&mut self, _now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        let off = self.offloads();
        let mut i = 0;
        while i < frames.len() {
            let chunk = (frames.len() - i).min(TX_BATCH);
            let mut hdrs = [[0u8; VNET_HDR_LEN]; TX_BATCH];
            for (h, f) in hdrs.iter_mut().zip(frames[i..i + chunk].iter_mut()) {
                // Idempotent, so frames retried after a partial send are prepared again safely.
                let vh = if off {
                    vnet::prepare_tx(f.as_mut_slice(), self.mtu, true, &mut self.stats.offload)
                } else {
                    VnetHdr::default()
                };
                *h = vh.to_bytes();
            }
            let sent = send_mmsg(
                self.fd.as_fd(),
                self.vnet_hdr,
                &hdrs[..chunk],
                &frames[i..i + chunk],
            );
            match sent {
                Some(0) | None => {
                    // Socket buffer full or a hard error: this frame is lost (as a full NIC
                    // queue would lose it); carry on with the next, so the loop always ends.
                    self.stats.tx_dropped += 1;
                    i += 1;
                }
                Some(n) => {
                    for f in &frames[i..i + n] {
                        self.stats.tx_frames += 1;
                        self.stats.tx_bytes += f.len() as u64;
                    }
                    i += n;
                }
            }
        }
        for f in frames.drain(..) {
            pool.put(f);
        }
    }
}

/// Most frames per `sendmmsg(2)`.
const TX_BATCH: usize = 64;

/// Sends `frames` (each after its vnet header when `vnet`) with one `sendmmsg` on the bound
/// socket. Returns how many went out (a prefix), `None` on an error.
fn send_mmsg(
    fd: BorrowedFd<'_>,
    vnet: bool,
    hdrs: &[[u8; VNET_HDR_LEN]],
    frames: &[PacketBuf],
) -> Option<usize> {
    let n = frames.len().min(hdrs.len()).min(TX_BATCH);
    // SAFETY: iovec and mmsghdr are plain C structs for which all-zero (null pointers, zero
    // lengths) is a valid value.
    let mut iov: [[libc::iovec; 2]; TX_BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; TX_BATCH] = unsafe { std::mem::zeroed() };
    for k in 0..n {
        iov[k][0] = libc::iovec {
            iov_base: hdrs[k].as_ptr() as *mut libc::c_void,
            iov_len: VNET_HDR_LEN,
        };
        let f = frames[k].as_slice();
        iov[k][1] = libc::iovec {
            iov_base: f.as_ptr() as *mut libc::c_void,
            iov_len: f.len(),
        };
    }
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()).take(n) {
        let first = if vnet { 0 } else { 1 };
        m.msg_hdr.msg_iov = v[first..].as_mut_ptr();
        m.msg_hdr.msg_iovlen = 2 - first;
    }
    // SAFETY: `msgs[..n]` point at iovecs in `iov`, which describe the live header array and
    // frame buffers borrowed for this call; sendmmsg only reads them (no msg_name: the socket
    // is bound to its interface).
    let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, 0) };
    if r < 0 {
        return None;
    }
    // A message the kernel cut short (msg_len below the frame) counts as not sent.
    let expect = |k: usize| frames[k].len() + if vnet { VNET_HDR_LEN } else { 0 };
    let ok = (0..r as usize)
        .take_while(|&k| msgs[k].msg_len as usize == expect(k))
        .count();
    Some(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_interface_names_are_errors() {
        assert!(PacketSocket::open("nul\0", PacketSocketConfig::default()).is_err());
        // Either no such interface, or (unprivileged) no permission: an error, not a panic.
        assert!(PacketSocket::open("nf-no-such-if", PacketSocketConfig::default()).is_err());
    }
}
