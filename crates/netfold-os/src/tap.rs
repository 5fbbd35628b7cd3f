//! A Linux TAP device (`/dev/net/tun`, `IFF_TAP`): Ethernet frames between netfold and the
//! kernel's own stack, with the virtio-net header so checksums and TCP segmentation can be
//! offloaded across the boundary in both directions (see [`super::vnet`]).
//!
//! Opening: `IFF_TAP | IFF_NO_PI | IFF_VNET_HDR` (plus `IFF_MULTI_QUEUE` for
//! [`Tap::open_queues`]), `TUNSETVNETHDRSZ` = 10, and `TUNSETOFFLOAD` = `TUN_F_CSUM |
//! TUN_F_TSO4 | TUN_F_TSO6` when offloads are on (`vnet` handles both families) (0 when off, so the kernel completes every checksum and
//! segments everything before it reaches us). The descriptor is non-blocking; `recv_batch`
//! reads until `EAGAIN` or the batch is full, and [`Tap::wait`] sleeps in `poll(2)` until a
//! frame is readable, so a runtime need not spin.
//!
//! The kernel side of the interface lives in whatever network namespace the interface is
//! moved to (`ip link set <tap> netns <ns>`); the descriptor stays valid across the move. The
//! interface is not persistent: it disappears when the last descriptor is closed.
//!
//! Unsafe code here is limited to the syscalls (`open`, `ioctl`, `readv`, `writev`, `poll`),
//! each with a `// SAFETY:` comment.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::vnet::{self, OffloadStats, RxVerdict, VnetHdr, VNET_HDR_LEN};
use netfold::buf::{Csum, Frags, PacketBuf, Pool, ZcBuf};
use netfold::phy::{ChecksumCaps, Device, DeviceCaps, Medium};
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::VLAN_HEADER_LEN;
use netfold::wire::ipv4::MAX_PACKET_LEN;

/// Ethernet header plus one 802.1Q tag: link bytes on top of the IP MTU.
const LINK_OVERHEAD: usize = VLAN_HEADER_LEN;
/// Largest IPv4 packet (total length is 16 bits, RFC 791 §3.1): bounds a GSO frame.
const MAX_IP_PACKET: usize = MAX_PACKET_LEN;

/// How a [`Tap`] is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapConfig {
    /// Checksum offload and TSO across the boundary (`TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6`). Off, the
    /// stack computes and verifies every checksum and segments to the MTU itself.
    pub offloads: bool,
    /// With offloads on: hand kernel GSO super-frames to the stack whole (`caps.gro`), or cut
    /// them into MTU-sized segments in software first (`false`).
    pub gro: bool,
    /// IP MTU to report; `None` reads the interface's (SIOCGIFMTU) at open time.
    pub mtu: Option<usize>,
    /// Most frames read per `recv_batch`.
    pub max_burst: usize,
}

impl Default for TapConfig {
    fn default() -> Self {
        TapConfig {
            offloads: true,
            gro: true,
            mtu: None,
            max_burst: 64,
        }
    }
}

/// Counters of one tap queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TapStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Reads that failed with something other than `EAGAIN`, or returned a frame too short
    /// for the vnet header or too long for the buffer.
    pub rx_errors: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames the kernel refused (`EAGAIN`, `ENOBUFS`, `EIO`, short write): dropped.
    pub tx_dropped: u64,
    pub offload: OffloadStats,
}

/// One queue of a TAP interface. See the module documentation.
#[derive(Debug)]
pub struct Tap {
    fd: OwnedFd,
    name: String,
    config: TapConfig,
    mtu: usize,
    stats: TapStats,
}

/// `struct ifreq` with the name filled in (IFNAMSIZ-1 bytes at most).
fn ifreq_for(name: &str) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long or contains NUL",
        ));
    }
    // SAFETY: ifreq is a plain C struct (a name array and a union of integers/addresses) for
    // which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

fn name_of(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The IP MTU of interface `name` in the caller's network namespace (SIOCGIFMTU on an unbound
/// datagram socket: the socket sends nothing).
pub fn interface_mtu(name: &str) -> io::Result<usize> {
    let mut req = ifreq_for(name)?;
    // SAFETY: plain syscall with constant arguments; the result is checked.
    let s = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `s` is a descriptor we just opened and own from here on.
    let sock = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: SIOCGIFMTU reads the name from and writes the MTU into the `ifreq` we pass, which
    // lives for the duration of the call.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) })?;
    // SAFETY: after a successful SIOCGIFMTU the union holds `ifru_mtu`.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::other("negative MTU"))
}

/// Sleeps in `poll(2)` until `fd` is readable or `timeout` (None = forever) passes. Returns
/// whether it is readable. `EINTR` counts as a timeout (the caller re-polls anyway).
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let ms = match timeout {
        None => -1,
        // Round up so a 300 us wait does not become a busy 0 ms poll.
        Some(t) => libc::c_int::try_from(t.total_micros().div_ceil(1000)).unwrap_or(i32::MAX),
    };
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, count 1, for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0 && p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}

/// Opens `/dev/net/tun` as interface `name` with `kind` (`IFF_TAP` or `IFF_TUN`, plus
/// `IFF_MULTI_QUEUE` if wanted), always `IFF_NO_PI | IFF_VNET_HDR`, non-blocking; sets the
/// vnet header size and, with `offloads`, `TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6` (else none). Returns the
/// descriptor and the name the kernel chose.
pub(crate) fn open_tun_tap(
    name: &str,
    kind: libc::c_int,
    offloads: bool,
) -> io::Result<(OwnedFd, String)> {
    let mut req = ifreq_for(name)?;
    let path: &CStr = c"/dev/net/tun";
    // SAFETY: a NUL-terminated path literal; the result is checked.
    let raw = cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `raw` was just opened and is owned by this value from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let flags = kind | libc::IFF_NO_PI | libc::IFF_VNET_HDR;
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF reads flags and name from, and writes the chosen name into, the
    // ifreq we pass, valid for the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) })?;
    let hdr_len: libc::c_int = VNET_HDR_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads one int through the pointer, valid for the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &hdr_len) })?;
    let off: libc::c_uint = if offloads {
        libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6
    } else {
        0
    };
    // SAFETY: TUNSETOFFLOAD takes the flag word by value (not a pointer).
    cvt(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            libc::c_ulong::from(off),
        )
    })?;
    Ok((fd, name_of(&req)))
}

impl Tap {
    /// Opens (creating if needed) TAP interface `name` ("nf%d" lets the kernel pick a number).
    pub fn open(name: &str, config: TapConfig) -> io::Result<Tap> {
        Self::open_one(name, config, false)
    }

    /// Opens `n` queues of one multi-queue TAP interface (`IFF_MULTI_QUEUE`), one per shard:
    /// the kernel spreads its transmit flows over the queues by hash.
    pub fn open_queues(name: &str, n: usize, config: TapConfig) -> io::Result<Vec<Tap>> {
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "zero queues"));
        }
        let first = Self::open_one(name, config, true)?;
        let real = first.name.clone();
        let mut v = vec![first];
        for _ in 1..n {
            v.push(Self::open_one(&real, config, true)?);
        }
        Ok(v)
    }

    fn open_one(name: &str, config: TapConfig, multi_queue: bool) -> io::Result<Tap> {
        let mut flags = libc::IFF_TAP;
        if multi_queue {
            flags |= libc::IFF_MULTI_QUEUE;
        }
        let (fd, name) = open_tun_tap(name, flags, config.offloads)?;
        let mtu = match config.mtu {
            Some(m) => m,
            None => interface_mtu(&name).unwrap_or(1500),
        };
        Ok(Tap {
            fd,
            name,
            config,
            mtu: mtu.clamp(68, MAX_IP_PACKET),
            stats: TapStats::default(),
        })
    }

    /// The interface name the kernel gave (or kept).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The descriptor, for poll/epoll.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    pub fn config(&self) -> TapConfig {
        self.config
    }
    pub fn mtu(&self) -> usize {
        self.mtu
    }
    /// Changes the MTU reported in the caps (e.g. after `ip link set mtu` on the kernel side).
    pub fn set_mtu(&mut self, mtu: usize) {
        self.mtu = mtu.clamp(68, MAX_IP_PACKET);
    }
    pub fn stats(&self) -> TapStats {
        self.stats
    }
    /// Sleeps until a frame is readable or `timeout` passes; returns whether one is.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        wait_readable(self.fd.as_fd(), timeout)
    }

    /// Largest frame a read may return: a GSO super-frame with offloads on, else one MTU.
    fn max_frame(&self) -> usize {
        if self.config.offloads {
            MAX_IP_PACKET + LINK_OVERHEAD
        } else {
            self.mtu + LINK_OVERHEAD
        }
    }
}

impl AsRawFd for Tap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
impl AsFd for Tap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Outcome of one non-blocking read or write.
pub(crate) enum Io {
    Done(usize),
    WouldBlock,
    Failed,
}

/// `readv` of a vnet header and a frame buffer.
pub(crate) fn read_frame(fd: BorrowedFd<'_>, hdr: &mut [u8; VNET_HDR_LEN], frame: &mut [u8]) -> Io {
    let iov = [
        libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: frame.as_mut_ptr().cast(),
            iov_len: frame.len(),
        },
    ];
    // SAFETY: both iovecs describe live, exclusively borrowed buffers of the stated lengths;
    // the kernel writes at most that many bytes into them.
    let n = unsafe { libc::readv(fd.as_raw_fd(), iov.as_ptr(), 2) };
    classify(n)
}

/// `writev` of a vnet header and a frame.
pub(crate) fn write_frame(fd: BorrowedFd<'_>, hdr: &[u8; VNET_HDR_LEN], frame: &[u8]) -> Io {
    let iov = [
        libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: frame.as_ptr() as *mut libc::c_void,
            iov_len: frame.len(),
        },
    ];
    // SAFETY: both iovecs describe live buffers of the stated lengths; writev only reads them
    // (the *mut is what the C signature wants).
    let n = unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), 2) };
    classify(n)
}

/// Most iovecs one frame takes: the vnet header, the linear bytes, and the fragments
/// (`netfold::offload::gso::MAX_FRAGS` at most, which the stack never exceeds).
const MAX_IOV: usize = 2 + netfold::offload::gso::MAX_FRAGS;

/// `writev` of a vnet header, a frame's linear bytes and its fragments (zero-copy send): the
/// kernel reads the application's buffers directly. `None` if there are more fragments than
/// [`MAX_IOV`] allows (the caller copies them in instead).
pub(crate) fn write_frame_sg<'a>(
    fd: BorrowedFd<'_>,
    hdr: &[u8; VNET_HDR_LEN],
    head: &[u8],
    frags: impl Iterator<Item = &'a ZcBuf>,
) -> Option<Io> {
    let empty = libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    };
    let mut iov = [empty; MAX_IOV];
    iov[0] = libc::iovec {
        iov_base: hdr.as_ptr() as *mut libc::c_void,
        iov_len: hdr.len(),
    };
    iov[1] = libc::iovec {
        iov_base: head.as_ptr() as *mut libc::c_void,
        iov_len: head.len(),
    };
    let mut n = 2;
    for f in frags {
        let s = f.as_slice();
        *iov.get_mut(n)? = libc::iovec {
            iov_base: s.as_ptr() as *mut libc::c_void,
            iov_len: s.len(),
        };
        n += 1;
    }
    // SAFETY: the first `n` iovecs describe live buffers of the stated lengths (the vnet
    // header, the frame, and fragments whose `ZcBuf`s the caller holds until this returns);
    // writev only reads them (the *mut is what the C signature wants). `n <= MAX_IOV`, far
    // below IOV_MAX (1024).
    let r = unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), n as libc::c_int) };
    Some(classify(r))
}

pub(crate) fn classify(n: isize) -> Io {
    if n >= 0 {
        return Io::Done(n as usize);
    }
    match io::Error::last_os_error().kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Io::WouldBlock,
        _ => Io::Failed,
    }
}

/// The receive half shared by the tap and the packet socket: applies the offload verdict to a
/// frame just read and appends it (or its software-GSO pieces) to `out`, each marked with its
/// checksum state ([`Csum`], from the header's flags: [`vnet::rx_csum`]) so that the stack
/// verifies only what nobody has. Returns the number of frames appended.
pub(crate) fn deliver_rx(
    hdr: &VnetHdr,
    mut buf: PacketBuf,
    offloads: bool,
    gro: bool,
    pool: &mut Pool,
    stats: &mut OffloadStats,
    out: &mut Vec<PacketBuf>,
) -> usize {
    if !offloads {
        // The stack verifies every checksum itself (caps.checksum.rx = true) and expects
        // MTU-sized frames: whatever the kernel left partial or aggregated is made whole here,
        // so the stack sees exactly what a wire would carry. (A TAP opened without offloads
        // never gets either; a packet socket may, from a peer with TSO on.)
        if hdr.gso_kind() != vnet::GSO_NONE {
            // The split writes checksums computed from each piece's bytes, which nobody could
            // check afterwards: a super-frame the header vouches for in no way is checked
            // here, before it is cut (the one check of its bytes).
            if vnet::rx_csum(hdr).needs_verify() {
                stats.rx_csum_verified += 1;
                if !vnet::verify_checksums(buf.as_slice()) {
                    stats.rx_bad_checksum += 1;
                    pool.put(buf);
                    return 0;
                }
            }
            return split_rx(hdr, buf, pool, stats, out);
        }
        let csum = if hdr.flags & vnet::F_NEEDS_CSUM != 0 {
            let (start, off) = (usize::from(hdr.csum_start), usize::from(hdr.csum_offset));
            if !vnet::complete_partial(buf.as_mut_slice(), start, off) {
                stats.rx_malformed += 1;
                pool.put(buf);
                return 0;
            }
            stats.rx_csum_partial += 1;
            // Completed from the bytes themselves, on a frame of the local kernel's: there is
            // nothing left to check.
            Csum::Verified
        } else {
            // DATA_VALID: the kernel checked it (Linux trusts CHECKSUM_UNNECESSARY); neither
            // flag: the stack checks it (caps.checksum.rx = true here).
            let c = vnet::rx_csum(hdr);
            if c == Csum::Verified {
                stats.rx_csum_valid += 1;
            }
            c
        };
        buf.set_csum(csum);
        out.push(buf);
        return 1;
    }
    // `check_rx` trusted the flags or verified the frame itself.
    let checked = match vnet::rx_csum(hdr) {
        Csum::Unverified => Csum::Verified,
        c => c,
    };
    match vnet::check_rx(hdr, buf.as_slice(), stats) {
        RxVerdict::Deliver => {
            buf.set_csum(checked);
            out.push(buf);
            1
        }
        RxVerdict::DeliverGso if gro => {
            buf.set_csum(checked);
            out.push(buf);
            1
        }
        RxVerdict::DeliverGso => split_rx(hdr, buf, pool, stats, out),
        RxVerdict::Drop => {
            pool.put(buf);
            0
        }
    }
}

/// Software GSO of a received super-frame into `gso_size`-payload segments. The super-frame
/// was trusted or verified before (see [`deliver_rx`]) and each piece's checksums are computed
/// from its bytes, so the pieces are marked verified.
fn split_rx(
    hdr: &VnetHdr,
    buf: PacketBuf,
    pool: &mut Pool,
    stats: &mut OffloadStats,
    out: &mut Vec<PacketBuf>,
) -> usize {
    let first = out.len();
    let n = if matches!(hdr.gso_kind(), vnet::GSO_TCPV4 | vnet::GSO_TCPV6) {
        vnet::gso_split(buf.as_slice(), usize::from(hdr.gso_size), pool, out)
    } else {
        0
    };
    for p in &mut out[first..] {
        p.set_csum(Csum::Verified);
    }
    if n == 0 {
        stats.rx_malformed += 1;
    }
    stats.rx_gso_split_segments += n as u64;
    pool.put(buf);
    n
}

impl Tap {
    /// Writes one linear frame (with the vnet header `prepare_tx` makes) and recycles it.
    fn send_one(&mut self, mut f: PacketBuf, pool: &mut Pool) {
        let h = if self.config.offloads {
            vnet::prepare_tx(f.as_mut_slice(), self.mtu, true, &mut self.stats.offload)
        } else {
            VnetHdr::default()
        };
        match write_frame(self.fd.as_fd(), &h.to_bytes(), f.as_slice()) {
            Io::Done(n) if n == VNET_HDR_LEN + f.len() => {
                self.stats.tx_frames += 1;
                self.stats.tx_bytes += f.len() as u64;
            }
            _ => self.stats.tx_dropped += 1,
        }
        pool.put(f);
    }
}

impl Device for Tap {
    fn readable_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn caps(&self) -> DeviceCaps {
        let off = self.config.offloads;
        DeviceCaps {
            medium: Medium::Ethernet,
            mtu: self.mtu,
            // With offloads on, the device guarantees checksums at the boundary (vnet.rs).
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
        let max_frame = self.max_frame();
        let mut appended = 0;
        let mut reads = 0;
        while reads < max {
            let mut buf = pool.get();
            // One byte more than the largest frame, so a truncated read is detectable.
            buf.set_len(max_frame + 1);
            let mut hdr = [0u8; VNET_HDR_LEN];
            let n = match read_frame(self.fd.as_fd(), &mut hdr, buf.as_mut_slice()) {
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
            let (Some(h), Some(len)) = (VnetHdr::parse(&hdr), n.checked_sub(VNET_HDR_LEN)) else {
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
                self.config.offloads,
                self.config.gro,
                pool,
                &mut self.stats.offload,
                out,
            );
        }
        appended
    }

    fn send_batch(&mut self, _now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        for f in frames.drain(..) {
            self.send_one(f, pool);
        }
    }

    /// With offloads on (checksums and TSO left to the kernel), the TAP takes frames with
    /// fragments: headers and the application's buffers go out in one `writev`, and the kernel
    /// copies the payload straight from them (zero-copy send: netfold reads no payload byte).
    fn scatter_gather(&self) -> bool {
        self.config.offloads
    }

    fn send_batch_sg(
        &mut self,
        _now: Instant,
        pool: &mut Pool,
        frames: &mut Vec<PacketBuf>,
        frags: &mut Frags,
    ) {
        for (i, mut f) in frames.drain(..).enumerate() {
            let payload = frags.len_of(i);
            if payload == 0 {
                self.send_one(f, pool);
                continue;
            }
            let h = self
                .config
                .offloads
                .then(|| {
                    vnet::prepare_tx_sg(
                        f.as_mut_slice(),
                        payload,
                        self.mtu,
                        true,
                        &mut self.stats.offload,
                    )
                })
                .flatten();
            let sent = h.and_then(|h| {
                write_frame_sg(self.fd.as_fd(), &h.to_bytes(), f.as_slice(), frags.of(i))
            });
            match sent {
                Some(Io::Done(n)) if n == VNET_HDR_LEN + f.len() + payload => {
                    self.stats.tx_frames += 1;
                    self.stats.tx_bytes += (f.len() + payload) as u64;
                    pool.put(f);
                }
                Some(_) => {
                    self.stats.tx_dropped += 1;
                    pool.put(f);
                }
                None => {
                    // Not describable as headers + fragments: one buffer, the ordinary way.
                    self.stats.offload.tx_sg_linearized += 1;
                    frags.copy_into(i, &mut f);
                    self.send_one(f, pool);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_not_truncated() {
        assert!(ifreq_for("a-name-that-is-far-too-long").is_err());
        assert!(ifreq_for("nul\0").is_err());
        let r = ifreq_for("nf0").unwrap();
        assert_eq!(name_of(&r), "nf0");
    }

    #[test]
    fn caps_follow_the_offload_switch() {
        // Caps are pure functions of the config; building a Tap needs /dev/net/tun, so check
        // the logic through a descriptor-less stand-in: /dev/null opened read-only.
        let f = std::fs::File::open("/dev/null").unwrap();
        let mut t = Tap {
            fd: OwnedFd::from(f),
            name: "x".into(),
            config: TapConfig {
                offloads: true,
                ..TapConfig::default()
            },
            mtu: 1500,
            stats: TapStats::default(),
        };
        let c = t.caps();
        assert_eq!(
            c.checksum,
            ChecksumCaps {
                tx: false,
                rx: false
            }
        );
        assert!(c.tso && c.gro);
        t.config.offloads = false;
        let c = t.caps();
        assert_eq!(c.checksum, ChecksumCaps { tx: true, rx: true });
        assert!(!c.tso && !c.gro);
        assert_eq!(t.max_frame(), 1518);
        t.set_mtu(10);
        assert_eq!(t.mtu(), 68);
    }

    use crate::vnet::tests::tcp_frame;
    use crate::vnet::{F_DATA_VALID, F_NEEDS_CSUM, GSO_TCPV4};

    /// Runs one frame through `deliver_rx`; returns the checksum states of what came out.
    fn deliver(
        h: VnetHdr,
        frame: &[u8],
        offloads: bool,
        gro: bool,
        st: &mut OffloadStats,
    ) -> Vec<(Csum, Vec<u8>)> {
        let mut pool = Pool::new(2048, 8);
        let mut out = Vec::new();
        let n = deliver_rx(
            &h,
            PacketBuf::from_slice(frame),
            offloads,
            gro,
            &mut pool,
            st,
            &mut out,
        );
        assert_eq!(n, out.len());
        out.iter()
            .map(|b| (b.csum(), b.as_slice().to_vec()))
            .collect()
    }

    const VALID: VnetHdr = VnetHdr {
        flags: F_DATA_VALID,
        gso_type: vnet::GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };
    const PARTIAL: VnetHdr = VnetHdr {
        flags: F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 16,
        ..VALID
    };
    const NONE: VnetHdr = VnetHdr { flags: 0, ..VALID };

    #[test]
    fn with_offloads_each_frame_carries_what_its_header_said() {
        let good = tcp_frame(100, 0x10);
        let mut bad = good.clone();
        bad[90] ^= 1;
        let mut st = OffloadStats::default();
        // DATA_VALID: trusted, even with a wrong checksum (Linux CHECKSUM_UNNECESSARY).
        let out = deliver(VALID, &bad, true, true, &mut st);
        assert_eq!(out, vec![(Csum::Verified, bad.clone())]);
        // NEEDS_CSUM: the kernel's own frame, left partial.
        let out = deliver(PARTIAL, &bad, true, true, &mut st);
        let partial = Csum::Partial {
            start: 34,
            offset: 16,
        };
        assert_eq!(out, vec![(partial, bad.clone())]);
        // Neither: checked here (the stack's caps say the device checks), once.
        assert_eq!(
            deliver(NONE, &good, true, true, &mut st),
            vec![(Csum::Verified, good.clone())]
        );
        assert!(deliver(NONE, &bad, true, true, &mut st).is_empty());
        assert_eq!((st.rx_csum_verified, st.rx_bad_checksum), (2, 1));
        assert_eq!((st.rx_csum_valid, st.rx_csum_partial), (1, 1));
    }

    #[test]
    fn without_offloads_only_unvouched_frames_are_left_to_the_stack() {
        let good = tcp_frame(100, 0x10);
        let mut bad = good.clone();
        bad[90] ^= 1;
        let mut st = OffloadStats::default();
        // DATA_VALID: the kernel checked it; the stack need not.
        let out = deliver(VALID, &bad, false, false, &mut st);
        assert_eq!(out, vec![(Csum::Verified, bad.clone())]);
        assert_eq!(st.rx_csum_valid, 1);
        // Neither flag: the stack (caps.checksum.rx = true) checks it.
        let out = deliver(NONE, &bad, false, false, &mut st);
        assert_eq!(out, vec![(Csum::Unverified, bad.clone())]);
        // NEEDS_CSUM: completed here, so the frame is what a wire would carry, and verified.
        let mut partial = good.clone();
        let sum = netfold::wire::checksum::pseudo_header(
            std::net::Ipv4Addr::new(198, 18, 0, 2),
            std::net::Ipv4Addr::new(198, 18, 0, 1),
            netfold::wire::IpProtocol::Tcp,
            (good.len() - 34) as u32,
        );
        partial[50..52].copy_from_slice(&sum.to_be_bytes());
        assert_ne!(partial, good);
        let out = deliver(PARTIAL, &partial, false, false, &mut st);
        assert_eq!(out, vec![(Csum::Verified, good.clone())]);
        assert_eq!(st.rx_csum_partial, 1);
        assert_eq!(st.rx_csum_verified, 0);
    }

    #[test]
    fn software_gso_pieces_are_verified_and_an_unvouched_bad_super_frame_is_dropped() {
        let big = tcp_frame(3000, 0x10);
        let mut bad = big.clone();
        bad[200] ^= 1;
        for offloads in [true, false] {
            let mut st = OffloadStats::default();
            let gso = VnetHdr {
                gso_type: GSO_TCPV4,
                gso_size: 1000,
                hdr_len: 66,
                ..VALID
            };
            let out = deliver(gso, &big, offloads, false, &mut st);
            assert_eq!(out.len(), 3, "offloads {offloads}");
            assert!(out
                .iter()
                .all(|(c, f)| *c == Csum::Verified && vnet::verify_checksums(f)));
            // No flag and a wrong checksum: checked before the split, and dropped.
            let unvouched = VnetHdr { flags: 0, ..gso };
            assert!(deliver(unvouched, &bad, offloads, false, &mut st).is_empty());
            assert_eq!(st.rx_bad_checksum, 1, "offloads {offloads}");
            // No flag and a right one: split, the pieces verified.
            let out = deliver(unvouched, &big, offloads, false, &mut st);
            assert_eq!(out.len(), 3, "offloads {offloads}");
            assert!(out.iter().all(|(c, _)| *c == Csum::Verified));
        }
    }
}
