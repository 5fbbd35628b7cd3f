//! The interface's shared state (smoltcp's `InterfaceInner`): addresses, MTU and device
//! capabilities, the packet pool, the transmit queue, the neighbour cache and the counters;
//! the IPv6 part of it (addresses, router, NDP cache, path MTU) is `v6` (`ipv6.rs`).
//! Every protocol module reads and writes it while the receive batch stays immutable beside it;
//! the send halves that every protocol shares (IPv4 in `ipv4.rs`, the link in `ethernet.rs`,
//! ARP in `arp.rs`) are methods on it.

use super::counters::Counters;
use super::ipv6::Ipv6State;
use super::neighbor::NeighborCache;
use super::pmtu::PathMtuCache;
use crate::buf::{Frags, PacketBuf, Pool};
use crate::mem::CopyMode;
use crate::phy::Medium;
use crate::wire::ethernet::EthernetAddress;
use crate::wire::{Ipv4Addr, Ipv6Addr};

/// Why a packet could not be queued for transmission (each case is also counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxError {
    /// The transmit queue is at its bound; retry after the next poll.
    QueueFull,
    /// Off-subnet destination and no gateway.
    NoRoute,
    /// Too large: beyond 64 KiB, or a TCP segment beyond the MTU (TCP is never fragmented).
    TooBig,
    /// The next hop is unresolved and the pending queue is full.
    PendingFull,
}

/// What became of one packet (or one TCP segment) handed to the send path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Emit {
    /// Queued for the device, or parked until its next hop resolves.
    Sent,
    /// Refused whole because a queue is full: nothing was queued and nothing is lost; offer it
    /// again later.
    QueueFull(FullQueue),
    /// Refused for good, and counted under its reason.
    Dropped(DropReason),
}

/// Which queue refused a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FullQueue {
    /// The transmit queue of this poll (`tx_queue_full`): room comes with the next poll.
    Transmit,
    /// The queue of frames waiting for ARP (`arp_pending_overflow`): room comes when the
    /// next hop resolves or is given up.
    Neighbor,
}

/// Why a packet was dropped on the send path (the counter it went to is named beside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// No route to the destination (`no_route`).
    NoRoute,
    /// Too large for the MTU (`tx_too_big`).
    TooBig,
    /// A segment whose header could not be built (`tcp_malformed`).
    Malformed,
}

impl From<Result<(), TxError>> for Emit {
    fn from(r: Result<(), TxError>) -> Emit {
        match r {
            Ok(()) => Emit::Sent,
            Err(TxError::QueueFull) => Emit::QueueFull(FullQueue::Transmit),
            Err(TxError::PendingFull) => Emit::QueueFull(FullQueue::Neighbor),
            Err(TxError::NoRoute) => Emit::Dropped(DropReason::NoRoute),
            Err(TxError::TooBig) => Emit::Dropped(DropReason::TooBig),
        }
    }
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct IfaceState {
    pub medium: Medium,
    pub mac: EthernetAddress,
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU in effect: min(config, device).
    pub mtu: usize,
    /// The device does not compute transmit checksums: we do.
    pub csum_tx: bool,
    /// The device does not verify received checksums: we do (once, see `buf::Csum`).
    pub csum_rx: bool,
    pub tso: bool,
    /// The device takes frames with fragments (`Device::scatter_gather`): zero-copy send
    /// hands it references instead of bytes when it also completes checksums.
    pub sg: bool,
    pub ttl: u8,
    pub ident: u16,
    /// The copy path for payload copies (`StackConfig::copy_mode`).
    pub copy: CopyMode,
    pub pool: Pool,
    pub tx: Vec<PacketBuf>,
    /// Fragments of the frames in `tx` (zero-copy send to a scatter-gather device; empty
    /// otherwise).
    pub tx_frags: Frags,
    pub tx_limit: usize,
    pub neigh: NeighborCache,
    /// Per-destination path MTU learned from ICMP (RFC 1191).
    pub pmtu: PathMtuCache,
    pub c: Counters,
    /// Scratch list of addresses whose ARP retry is due (reused; at most MAX_RESOLVING).
    pub arp_due: Vec<Ipv4Addr>,
    /// IPv6: addresses, default router, neighbour and path MTU caches (off when no address
    /// is configured).
    pub v6: Ipv6State,
}

impl IfaceState {
    pub fn tx_full(&self) -> bool {
        self.tx.len() >= self.tx_limit
    }

    #[inline(always)]
    fn mask(&self) -> u32 {
        // `checked_shl` gives None for a shift of 32 (prefix 0): no network bits.
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix_len.min(32)))
            .unwrap_or(0)
    }

    #[inline(always)]
    pub fn in_subnet(&self, ip: Ipv4Addr) -> bool {
        (u32::from(ip) ^ u32::from(self.addr)) & self.mask() == 0
    }

    /// 255.255.255.255 or the directed broadcast of our subnet (RFC 919/922). /31 and /32
    /// have no broadcast address (RFC 3021).
    #[inline(always)]
    pub fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        let a = u32::from(ip);
        if a == u32::MAX {
            return true;
        }
        if self.prefix_len >= 31 {
            return false;
        }
        // The mask computed once: in the subnet, and every host bit set.
        let m = self.mask();
        (a ^ u32::from(self.addr)) & m == 0 && a | m == u32::MAX
    }

    /// RFC 1122 §3.3.1.1: in-subnet destinations are reached directly, others via the gateway.
    #[inline]
    pub fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if self.in_subnet(dst) {
            Some(dst)
        } else {
            self.gateway
        }
    }

    /// The IPv6 source address for a packet to `dst` (RFC 6724, `ipv6_source_for`), `None`
    /// when the interface has no usable one (IPv6 off, or every address tentative): a connect
    /// or send to an IPv6 peer then fails with `NetworkUnreachable`, counted in
    /// `ipv6_no_source`.
    pub fn ipv6_source(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        self.ipv6_source_for(dst)
    }

    /// `a` is one of our usable IPv6 addresses (what a socket may bind to; Linux refuses a
    /// tentative one with EADDRNOTAVAIL, as `ipv6_chk_addr` skips them).
    pub fn is_own_ipv6(&self, a: Ipv6Addr) -> bool {
        self.v6.state_of(a) == Some(super::ipv6::AddrState::Preferred)
    }

    /// Queues a finished frame for the device.
    #[inline]
    pub fn push(&mut self, buf: PacketBuf) {
        self.c.frames_out += 1;
        self.c.bytes_out += buf.len() as u64;
        self.tx.push(buf);
    }
}
