//! A kernel link named by a string, as the command line and the C API take it: `tap:NAME`,
//! `tun:NAME`, `packet:IFNAME` or `xdp:IFNAME[@QUEUE][:all]`. [`Link`] is whichever device that
//! names, itself a [`Device`], so a caller can run any of them without knowing which.

use std::io;
use std::net::IpAddr;

use crate::packet_socket::{PacketSocket, PacketSocketConfig};
use crate::tap::{Tap, TapConfig, TapStats};
use crate::tun::Tun;
use crate::xdp::{XdpConfig, XdpSocket};
use netfold::buf::{PacketBuf, Pool};
use netfold::phy::{Device, DeviceCaps, RawFd};
use netfold::time::{Duration, Instant};

/// A TAP (Ethernet frames) or a TUN (bare IP packets) interface, an AF_PACKET socket or an
/// AF_XDP socket on an existing interface.
#[derive(Debug)]
pub enum Link {
    Tap(Tap),
    Tun(Tun),
    Packet(PacketSocket),
    Xdp(Box<XdpSocket>),
}

/// What `xdp:IFNAME[@QUEUE][:all]` names: the interface, the queue (0 if not given), and
/// whether every frame of the queue goes to netfold (`:all`) rather than only the frames for
/// its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpSpec {
    pub ifname: String,
    pub queue: u32,
    pub all: bool,
}

/// The addresses of the stack `config` describes: its IPv4 address unless unspecified, and
/// its IPv6 ones (what an `xdp:` link's program redirects).
pub fn stack_addrs(config: &netfold::iface::StackConfig) -> Vec<IpAddr> {
    let v4 = (!config.addr.is_unspecified()).then_some(IpAddr::V4(config.addr));
    v4.into_iter()
        .chain(config.addrs6.iter().map(|c| IpAddr::V6(c.addr())))
        .collect()
}

/// Parses the part of an `xdp:` link after the prefix: `IFNAME[@QUEUE][:all]`.
pub fn parse_xdp(rest: &str) -> io::Result<XdpSpec> {
    let bad = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("xdp:{rest}: {why} (expected xdp:IFNAME[@QUEUE][:all])"),
        )
    };
    let (rest, all) = match rest.strip_suffix(":all") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    let (ifname, queue) = match rest.split_once('@') {
        Some((n, q)) => (n, q.parse::<u32>().map_err(|_| bad("bad queue number"))?),
        None => (rest, 0),
    };
    if ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', ':', ' ', '\0']) {
        return Err(bad("needs an interface name of 1 to 15 bytes"));
    }
    Ok(XdpSpec {
        ifname: ifname.to_owned(),
        queue,
        all,
    })
}

impl Link {
    /// Opens the interface `spec` names: `tap:NAME` or `tun:NAME` (created if it does not
    /// exist; NAME may use the kernel's `%d` pattern), or `packet:IFNAME` (an existing
    /// interface; `config`'s offloads and MTU apply). `xdp:` needs the stack's addresses:
    /// [`Link::open_for`]. Anything else is `InvalidInput`.
    pub fn open(spec: &str, config: TapConfig) -> io::Result<Link> {
        Link::open_for(spec, config, &[])
    }

    /// [`Link::open`], with the stack's addresses `local` for an `xdp:IFNAME[@QUEUE][:all]`
    /// link: its program redirects the frames for them (and ARP/NDP for them) to netfold and
    /// passes the rest to the kernel, or, with `:all`, redirects the whole queue. The modes
    /// it got are in [`Link::describe`].
    pub fn open_for(spec: &str, config: TapConfig, local: &[IpAddr]) -> io::Result<Link> {
        if let Some(name) = spec.strip_prefix("tap:") {
            return Tap::open(name, config).map(Link::Tap);
        }
        if let Some(name) = spec.strip_prefix("tun:") {
            return Tun::open(name, config).map(Link::Tun);
        }
        if let Some(name) = spec.strip_prefix("packet:").filter(|n| !n.is_empty()) {
            let cfg = PacketSocketConfig {
                offloads: config.offloads,
                mtu: config.mtu,
                // One read per frame: the ring's 1 ms block timer costs request/response runs.
                rx_ring: None,
                ..PacketSocketConfig::default()
            };
            return PacketSocket::open(name, cfg).map(Link::Packet);
        }
        if let Some(rest) = spec.strip_prefix("xdp:") {
            let x = parse_xdp(rest)?;
            let base = if x.all {
                XdpConfig::all()
            } else {
                XdpConfig::local(local)
            };
            let cfg = XdpConfig {
                queue: x.queue,
                mtu: config.mtu,
                ..base
            };
            return XdpSocket::open(&x.ifname, cfg)
                .map(|s| Link::Xdp(Box::new(s)))
                .map_err(io::Error::from);
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{spec:?}: expected tap:NAME, tun:NAME, packet:IFNAME or \
                 xdp:IFNAME[@QUEUE][:all]"
            ),
        ))
    }

    /// [`Link::open_for`] with the addresses of the stack `config` describes (its IPv4
    /// address, if any, and its IPv6 ones) and the interface's own MTU: what a runtime that
    /// opens a link for a stack by name uses.
    pub fn open_for_stack(spec: &str, config: &netfold::iface::StackConfig) -> io::Result<Link> {
        Link::open_for(spec, TapConfig::default(), &stack_addrs(config))
    }

    /// "tap", "tun", "packet" or "xdp".
    pub fn kind(&self) -> &'static str {
        match self {
            Link::Tap(_) => "tap",
            Link::Tun(_) => "tun",
            Link::Packet(_) => "packet",
            Link::Xdp(_) => "xdp",
        }
    }
    /// The interface name the kernel gave (or kept).
    pub fn name(&self) -> &str {
        match self {
            Link::Tap(t) => t.name(),
            Link::Tun(t) => t.name(),
            Link::Packet(p) => p.ifname(),
            Link::Xdp(x) => x.ifname(),
        }
    }
    /// The kind and name, and for AF_XDP the queue and the modes the socket got.
    pub fn describe(&self) -> String {
        match self {
            Link::Xdp(x) => x.describe(),
            _ => format!("{} {}", self.kind(), self.name()),
        }
    }
    pub fn mtu(&self) -> usize {
        match self {
            Link::Tap(t) => t.mtu(),
            Link::Tun(t) => t.mtu(),
            Link::Packet(p) => p.mtu(),
            Link::Xdp(x) => x.mtu(),
        }
    }
    /// The device's counters, in the TAP's shape (AF_XDP: its bad descriptors as receive
    /// errors; the rest of its counters are [`XdpSocket::stats`]).
    pub fn stats(&self) -> TapStats {
        match self {
            Link::Tap(t) => t.stats(),
            Link::Tun(t) => t.stats(),
            Link::Packet(p) => {
                let s = p.stats();
                TapStats {
                    rx_frames: s.rx_frames,
                    rx_bytes: s.rx_bytes,
                    rx_errors: s.rx_errors,
                    tx_frames: s.tx_frames,
                    tx_bytes: s.tx_bytes,
                    tx_dropped: s.tx_dropped,
                    offload: s.offload,
                }
            }
            Link::Xdp(x) => {
                let s = x.stats();
                TapStats {
                    rx_frames: s.rx_frames,
                    rx_bytes: s.rx_bytes,
                    rx_errors: s.rx_bad_desc,
                    tx_frames: s.tx_frames,
                    tx_bytes: s.tx_bytes,
                    tx_dropped: s.tx_dropped,
                    offload: Default::default(),
                }
            }
        }
    }
    /// Sleeps until a frame is readable or `timeout` passes; returns whether one is.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        match self {
            Link::Tap(t) => t.wait(timeout),
            Link::Tun(t) => t.wait(timeout),
            Link::Packet(p) => p.wait(timeout),
            Link::Xdp(x) => x.wait(timeout),
        }
    }
}

/// Calls `$body` with `$d` bound to the device inside whichever variant `$link` is.
macro_rules! each {
    ($link:expr, $d:ident => $body:expr) => {
        match $link {
            Link::Tap($d) => $body,
            Link::Tun($d) => $body,
            Link::Packet($d) => $body,
            Link::Xdp($d) => $body,
        }
    };
}

impl Device for Link {
    fn caps(&self) -> DeviceCaps {
        each!(self, d => d.caps())
    }
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        each!(self, d => d.recv_batch(now, pool, out, max))
    }
    fn recv_lent(
        &mut self,
        now: Instant,
        max: usize,
        f: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<usize> {
        each!(self, d => d.recv_lent(now, max, f))
    }
    fn tx_lend(&mut self, pool: &mut Pool) {
        each!(self, d => d.tx_lend(pool))
    }
    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        each!(self, d => d.send_batch(now, pool, frames))
    }
    fn scatter_gather(&self) -> bool {
        each!(self, d => d.scatter_gather())
    }
    fn send_batch_sg(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        frames: &mut Vec<PacketBuf>,
        frags: &mut netfold::buf::Frags,
    ) {
        each!(self, d => d.send_batch_sg(now, pool, frames, frags))
    }
    fn poll_at(&self) -> Option<Instant> {
        each!(self, d => d.poll_at())
    }
    fn readable_fd(&self) -> Option<RawFd> {
        each!(self, d => d.readable_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_other_than_tap_and_tun_are_rejected_before_opening() {
        for spec in [
            "eth0", "tap", "tunnel:x", "", "packet:", "xdp:", "xdp:@1", "xdp:a@x",
        ] {
            let e = Link::open(spec, TapConfig::default()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{spec}");
        }
        // An xdp link without addresses would redirect nothing: refused before any socket.
        let e = Link::open("xdp:lo", TapConfig::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn xdp_specs_name_interface_queue_and_filter() {
        let x = |ifname: &str, queue, all| XdpSpec {
            ifname: ifname.into(),
            queue,
            all,
        };
        assert_eq!(parse_xdp("veth0").unwrap(), x("veth0", 0, false));
        assert_eq!(parse_xdp("eth1@3").unwrap(), x("eth1", 3, false));
        assert_eq!(parse_xdp("eth1@3:all").unwrap(), x("eth1", 3, true));
        assert_eq!(parse_xdp("eth1:all").unwrap(), x("eth1", 0, true));
        for bad in ["", "@1", "a@", "a@-1", "a:b", "sixteen-bytes-xx", "a/b"] {
            assert!(parse_xdp(bad).is_err(), "{bad}");
        }
    }
}
