//! `InjectDevice`: the device every C stack polls. Frames handed in by `nf_inject` wait in a
//! bounded inbound queue until the next poll; frames the stack transmits wait in a bounded
//! outbound queue for `nf_take`. When a real device is configured (the TAP hook), it sits
//! behind this one: it also feeds the stack and it receives everything the stack sends.

use netfold_core::buf::{PacketBuf, Pool};
use netfold_core::phy::{Device, DeviceCaps, Medium, RawFd};
use netfold_core::time::Instant;
use netfold_os::link::parse_xdp;
use netfold_os::packet_socket::{PacketSocket, PacketSocketConfig};
use netfold_os::tap::{Tap, TapConfig};
use netfold_os::tun::Tun;
use netfold_os::xdp::{XdpConfig, XdpError, XdpSocket};
use std::collections::VecDeque;

/// Frames `nf_inject` may queue ahead of the stack (REAL clock; MANUAL drains at once).
pub(crate) const INBOUND_LIMIT: usize = 1024;
/// Frames waiting for `nf_take`; beyond this the stack's output is dropped and counted, as a
/// full NIC ring would drop it (TCP recovers by retransmission).
pub(crate) const OUTBOUND_LIMIT: usize = 4096;
/// Frame vectors kept for reuse (the OLS 2002 study: recycle buffers instead of freeing them), so the
/// inject/take path does not allocate per frame in steady state.
const SPARE_LIMIT: usize = 256;

pub(crate) struct InjectDevice {
    caps: DeviceCaps,
    inbound: VecDeque<Vec<u8>>,
    outbound: VecDeque<Vec<u8>>,
    /// Frames dropped because the outbound queue was full.
    pub(crate) outbound_drops: u64,
    spare: Vec<Vec<u8>>,
    inner: Option<Box<dyn Device + Send>>,
}

impl InjectDevice {
    pub(crate) fn new(caps: DeviceCaps, inner: Option<Box<dyn Device + Send>>) -> Self {
        InjectDevice {
            caps,
            inbound: VecDeque::new(),
            outbound: VecDeque::new(),
            outbound_drops: 0,
            spare: Vec::new(),
            inner,
        }
    }

    /// Largest frame `nf_inject` accepts: a whole IP datagram (65535 bytes, whatever the MTU)
    /// plus an Ethernet header with one VLAN tag. The MTU bounds what the stack sends; what it
    /// receives may be larger, as a TUN/TAP device with receive offloads (GRO, LRO) delivers
    /// merged segments and Linux accepts them (no receive-side MTU check in `ip_rcv`).
    pub(crate) fn max_frame(&self) -> usize {
        let ip = self.caps.mtu.max(usize::from(u16::MAX));
        match self.caps.medium {
            Medium::Ethernet => ip + netfold_core::wire::ethernet::VLAN_HEADER_LEN,
            Medium::Ip => ip,
        }
    }

    /// Queues one inbound frame; `false` when the queue is full.
    pub(crate) fn push_inbound(&mut self, frame: &[u8]) -> bool {
        if self.inbound.len() >= INBOUND_LIMIT {
            return false;
        }
        let v = self.copy_of(frame);
        self.inbound.push_back(v);
        true
    }

    /// A recycled (or new) vector holding a copy of `frame`.
    fn copy_of(&mut self, frame: &[u8]) -> Vec<u8> {
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(frame);
        v
    }

    /// Gives a frame vector back for reuse.
    pub(crate) fn recycle(&mut self, v: Vec<u8>) {
        if self.spare.len() < SPARE_LIMIT {
            self.spare.push(v);
        }
    }

    pub(crate) fn has_inbound(&self) -> bool {
        !self.inbound.is_empty()
    }

    /// Length of the next outbound frame, if any.
    pub(crate) fn peek_outbound_len(&self) -> Option<usize> {
        self.outbound.front().map(Vec::len)
    }

    pub(crate) fn pop_outbound(&mut self) -> Option<Vec<u8>> {
        self.outbound.pop_front()
    }

    pub(crate) fn inner_poll_at(&self) -> Option<Instant> {
        self.inner.as_ref().and_then(|d| d.poll_at())
    }

    pub(crate) fn has_inner(&self) -> bool {
        self.inner.is_some()
    }
}

impl Device for InjectDevice {
    fn readable_fd(&self) -> Option<RawFd> {
        self.inner.as_ref().and_then(|d| d.readable_fd())
    }

    fn caps(&self) -> DeviceCaps {
        self.caps
    }

    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let mut n = 0;
        while n < max {
            let Some(frame) = self.inbound.pop_front() else {
                break;
            };
            let mut b = pool.get();
            if b.tailroom() >= frame.len() {
                b.append(frame.len()).copy_from_slice(&frame);
            } else {
                // A frame larger than the pool's buffers (a merged segment beyond the MTU,
                // see `max_frame`) gets a buffer of its own.
                b = PacketBuf::from_slice(&frame);
            }
            self.recycle(frame);
            out.push(b);
            n += 1;
        }
        if let Some(inner) = self.inner.as_mut() {
            if n < max {
                n += inner.recv_batch(now, pool, out, max - n);
            }
        }
        n
    }

    /// The inner device's lent frames (AF_XDP), while nothing injected waits (injected
    /// frames come first, through `recv_batch`).
    fn recv_lent(
        &mut self,
        now: Instant,
        max: usize,
        f: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<usize> {
        if !self.inbound.is_empty() {
            return None;
        }
        self.inner.as_mut()?.recv_lent(now, max, f)
    }

    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        if let Some(inner) = self.inner.as_mut() {
            inner.send_batch(now, pool, frames);
            return;
        }
        for b in frames.drain(..) {
            if self.outbound.len() < OUTBOUND_LIMIT {
                let v = self.copy_of(b.as_slice());
                self.outbound.push_back(v);
            } else {
                self.outbound_drops += 1;
            }
            pool.put(b);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner_poll_at()
    }
    /// The inner device's wake-up (the in-memory link's queues have one); without an inner
    /// device nothing but `nf_inject` brings frames, and it kicks the driver itself.
    fn wake_on_rx(&mut self, waker: Option<&core::task::Waker>) -> bool {
        self.inner.as_mut().is_some_and(|d| d.wake_on_rx(waker))
    }
}

/// Opens the device named in `nf_config.device`, or `None` for "frames only through
/// nf_inject/nf_take".
///
/// "tap:NAME" opens (creating if needed) a Linux TAP interface and "tun:NAME" a TUN one (the
/// IP medium); NAME may use the kernel's "%d" pattern. "packet:IFNAME" attaches to an existing
/// Ethernet interface through an AF_PACKET socket. "xdp:IFNAME[@QUEUE][:all]" binds an
/// AF_XDP socket to a queue of an existing Ethernet interface, its program redirecting the
/// frames for the stack's addresses `local` (or, with ":all", the whole queue). Every device
/// is opened without checksum/TSO offloads, so the stack checks every frame the same way
/// whether it came from the device or from nf_inject. `mtu` is the configured IP MTU
/// (`None`: the interface's own). Open errors keep the kernel's errno (EPERM without
/// CAP_NET_ADMIN, ENOENT without /dev/net/tun, ENODEV for an unknown interface, ...).
pub(crate) fn open_device(
    spec: Option<&str>,
    medium: Medium,
    mtu: Option<usize>,
    offloads: bool,
    local: &[std::net::IpAddr],
) -> Result<Option<Box<dyn Device + Send>>, i32> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    if let Some(rest) = spec.strip_prefix("xdp:") {
        if medium != Medium::Ethernet {
            return Err(libc::EINVAL);
        }
        return open_xdp(rest, mtu, local).map(Some);
    }
    let (kind, name) = spec.split_once(':').ok_or(libc::EINVAL)?;
    // IFNAMSIZ bounds the name.
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(libc::EINVAL);
    }
    let cfg = TapConfig {
        offloads,
        gro: offloads,
        mtu,
        ..TapConfig::default()
    };
    let os = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    match (kind, medium) {
        // A TAP and a packet socket carry Ethernet frames, a TUN bare IP packets.
        ("tap", Medium::Ethernet) => Ok(Some(Box::new(Tap::open(name, cfg).map_err(os)?))),
        ("tun", Medium::Ip) => Ok(Some(Box::new(Tun::open(name, cfg).map_err(os)?))),
        ("packet", Medium::Ethernet) => {
            let pcfg = PacketSocketConfig {
                offloads,
                gro: offloads,
                mtu,
                ..PacketSocketConfig::default()
            };
            Ok(Some(Box::new(PacketSocket::open(name, pcfg).map_err(os)?)))
        }
        _ => Err(libc::EINVAL),
    }
}

/// `xdp:REST` (see [`open_device`]), its failures as the errno of the step that failed.
fn open_xdp(
    rest: &str,
    mtu: Option<usize>,
    local: &[std::net::IpAddr],
) -> Result<Box<dyn Device + Send>, i32> {
    let x = parse_xdp(rest).map_err(|_| libc::EINVAL)?;
    let base = if x.all {
        XdpConfig::all()
    } else {
        XdpConfig::local(local)
    };
    let cfg = XdpConfig {
        queue: x.queue,
        mtu,
        ..base
    };
    let sock = XdpSocket::open(&x.ifname, cfg).map_err(xdp_errno)?;
    Ok(Box::new(sock))
}

/// The errno an AF_XDP failure stands for: that of the step that failed.
pub(crate) fn xdp_errno(e: XdpError) -> i32 {
    match e {
        XdpError::NoInterface(_) => libc::ENODEV,
        XdpError::MtuTooLarge { .. } => libc::EMSGSIZE,
        XdpError::NoAddresses | XdpError::NoQueue { .. } | XdpError::TooFewQueues { .. } => {
            libc::EINVAL
        }
        XdpError::Permission(_, e) => e.raw_os_error().unwrap_or(libc::EPERM),
        XdpError::KernelUnsupported(_, e) => e.raw_os_error().unwrap_or(libc::EAFNOSUPPORT),
        XdpError::Busy(_) => libc::EBUSY,
        XdpError::NoZeroCopy(_) | XdpError::NoDriverSupport(_) | XdpError::NoMultiBuffer { .. } => {
            libc::EOPNOTSUPP
        }
        XdpError::Program(e) | XdpError::Io(_, e) => e.raw_os_error().unwrap_or(libc::EIO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netfold_core::phy::Medium;

    fn caps() -> DeviceCaps {
        DeviceCaps {
            medium: Medium::Ip,
            mtu: 1500,
            ..DeviceCaps::default()
        }
    }

    #[test]
    fn inbound_and_outbound_are_bounded() {
        let mut d = InjectDevice::new(caps(), None);
        for _ in 0..INBOUND_LIMIT {
            assert!(d.push_inbound(&[1, 2, 3]));
        }
        assert!(!d.push_inbound(&[1]));
        let mut pool = Pool::new(1518, 8);
        let mut out = Vec::new();
        assert_eq!(d.recv_batch(Instant::ZERO, &mut pool, &mut out, 10), 10);
        assert_eq!(out[0].as_slice(), &[1, 2, 3]);
        // The delivered frames' vectors wait for reuse, and are reused.
        assert_eq!(d.spare.len(), 10);
        let mut d2 = InjectDevice::new(caps(), None);
        d2.recycle(Vec::with_capacity(64));
        assert!(d2.push_inbound(&[9; 10]));
        assert!(d2.spare.is_empty());

        let mut frames: Vec<PacketBuf> = (0..OUTBOUND_LIMIT + 5)
            .map(|i| PacketBuf::from_slice(&[i as u8]))
            .collect();
        d.send_batch(Instant::ZERO, &mut pool, &mut frames);
        assert!(frames.is_empty());
        assert_eq!(d.outbound_drops, 5);
        assert_eq!(d.peek_outbound_len(), Some(1));
        assert_eq!(d.pop_outbound(), Some(vec![0]));
    }

    #[test]
    fn device_specs_are_checked_before_anything_is_opened() {
        let e = |spec, medium| open_device(Some(spec), medium, None, false, &[]).err();
        assert_eq!(e("tap:", Medium::Ethernet), Some(libc::EINVAL));
        assert_eq!(
            e("tap:waytoolonginterfacename", Medium::Ethernet),
            Some(libc::EINVAL)
        );
        assert_eq!(e("tap:nf0", Medium::Ip), Some(libc::EINVAL));
        assert_eq!(e("tun:nf0", Medium::Ethernet), Some(libc::EINVAL));
        assert_eq!(e("packet:eth0", Medium::Ip), Some(libc::EINVAL));
        assert_eq!(e("xdp:eth0", Medium::Ethernet), Some(libc::EINVAL));
        assert_eq!(e("eth0", Medium::Ethernet), Some(libc::EINVAL));
        assert!(matches!(
            open_device(None, Medium::Ip, None, false, &[]),
            Ok(None)
        ));
    }
}
