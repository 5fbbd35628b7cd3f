//! A kernel link named by a string, as the command line and the C API take it: `tap:NAME` or
//! `tun:NAME`. [`Link`] is whichever device that names, itself a [`Device`], so a caller can
//! run either without knowing which.

use std::io;

use crate::tap::{Tap, TapConfig, TapStats};
use crate::tun::Tun;
use netfold::buf::{PacketBuf, Pool};
use netfold::phy::{Device, DeviceCaps, RawFd};
use netfold::time::{Duration, Instant};

/// A TAP (Ethernet frames) or a TUN (bare IP packets) interface.
#[derive(Debug)]
pub enum Link {
    Tap(Tap),
    Tun(Tun),
}

impl Link {
    /// Opens the interface `spec` names: `tap:NAME` or `tun:NAME` (created if it does not
    /// exist; NAME may use the kernel's `%d` pattern). Anything else is `InvalidInput`.
    pub fn open(spec: &str, config: TapConfig) -> io::Result<Link> {
        if let Some(name) = spec.strip_prefix("tap:") {
            return Tap::open(name, config).map(Link::Tap);
        }
        if let Some(name) = spec.strip_prefix("tun:") {
            return Tun::open(name, config).map(Link::Tun);
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{spec:?}: expected tap:NAME or tun:NAME"),
        ))
    }

    /// "tap" or "tun".
    pub fn kind(&self) -> &'static str {
        match self {
            Link::Tap(_) => "tap",
            Link::Tun(_) => "tun",
        }
    }
    /// The interface name the kernel gave (or kept).
    pub fn name(&self) -> &str {
        match self {
            Link::Tap(t) => t.name(),
            Link::Tun(t) => t.name(),
        }
    }
    pub fn mtu(&self) -> usize {
        match self {
            Link::Tap(t) => t.mtu(),
            Link::Tun(t) => t.mtu(),
        }
    }
    pub fn stats(&self) -> TapStats {
        match self {
            Link::Tap(t) => t.stats(),
            Link::Tun(t) => t.stats(),
        }
    }
    /// Sleeps until a frame is readable or `timeout` passes; returns whether one is.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        match self {
            Link::Tap(t) => t.wait(timeout),
            Link::Tun(t) => t.wait(timeout),
        }
    }
}

impl Device for Link {
    fn caps(&self) -> DeviceCaps {
        match self {
            Link::Tap(t) => t.caps(),
            Link::Tun(t) => t.caps(),
        }
    }
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        match self {
            Link::Tap(t) => t.recv_batch(now, pool, out, max),
            Link::Tun(t) => t.recv_batch(now, pool, out, max),
        }
    }
    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        match self {
            Link::Tap(t) => t.send_batch(now, pool, frames),
            Link::Tun(t) => t.send_batch(now, pool, frames),
        }
    }
    fn scatter_gather(&self) -> bool {
        match self {
            Link::Tap(t) => t.scatter_gather(),
            Link::Tun(t) => t.scatter_gather(),
        }
    }
    fn send_batch_sg(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        frames: &mut Vec<PacketBuf>,
        frags: &mut netfold::buf::Frags,
    ) {
        match self {
            Link::Tap(t) => t.send_batch_sg(now, pool, frames, frags),
            Link::Tun(t) => t.send_batch_sg(now, pool, frames, frags),
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        match self {
            Link::Tap(t) => t.poll_at(),
            Link::Tun(t) => t.poll_at(),
        }
    }
    fn readable_fd(&self) -> Option<RawFd> {
        match self {
            Link::Tap(t) => t.readable_fd(),
            Link::Tun(t) => t.readable_fd(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_other_than_tap_and_tun_are_rejected_before_opening() {
        for spec in ["eth0", "tap", "tunnel:x", ""] {
            let e = Link::open(spec, TapConfig::default()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{spec}");
        }
    }
}
