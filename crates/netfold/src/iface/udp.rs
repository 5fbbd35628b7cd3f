//! UDP (RFC 768): a small table of bound endpoints, each with bounded receive and send queues
//! of pooled buffers, and the protocol's receive half (checks, delivery with the checksum
//! verified in the copy to the socket queue) and send half (the header through
//! `wire::udp`, its checksum completed from the payload sum taken while the data was copied
//! in). The Stack owns the table; user calls go through `Stack::udp_*`.
//!
//! Dual stack, as Linux with `net.ipv6.bindv6only = 0`: a socket bound to `[::]:p` receives
//! IPv4 and IPv6 datagrams (IPv6 only with [`UdpBindOptions::v6only`]); IPv4 peers of an IPv6
//! socket appear as v4-mapped addresses (`::ffff:a.b.c.d`) in `recv_from` and may be sent to
//! as such; a socket bound to `0.0.0.0:p` or an IPv4 address is IPv4 only. A datagram goes to
//! the exact address's socket first, then the family's wildcard, then (IPv4) a dual-stack
//! `[::]` socket, then the transparent socket. Sockets are kept in wire form (an IPv6 socket
//! bound to `::ffff:a.b.c.d` is an IPv4 binding with the `mapped` flag). Over IPv6 the
//! checksum is mandatory (RFC 8200 §8.1): a zero checksum is dropped and counted as bad.

use super::ip::IpMeta;
use super::state::IfaceState;
use super::Inner;
use crate::buf::{Csum, PacketBuf, Pool};
use crate::offload::gso::MAX_IP_PACKET;
use crate::tcp::{mapped_addr, wire_addr};
use crate::time::Instant;
use crate::wire::ipv4::HEADER_LEN as IP_LEN;
use crate::wire::ipv6::{HEADER_LEN as IPV6_LEN, MAX_PAYLOAD_LEN as IPV6_MAX_PAYLOAD};
use crate::wire::tcp::PseudoHeader;
use crate::wire::udp::{UdpPacket, UdpRepr};
use crate::wire::{IpAddr, IpProtocol};
use core::fmt;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

pub use crate::wire::udp::HEADER_LEN;
pub use crate::wire::EPHEMERAL_PORTS;
/// First port handed out when binding to port 0.
const EPHEMERAL_FIRST: u16 = *EPHEMERAL_PORTS.start();

/// A UDP socket handle; stale handles are `InvalidHandle`, never a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpHandle {
    index: u32,
    generation: u32,
}

/// Why a UDP call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UdpError {
    /// Receive queue empty, or send queue full.
    WouldBlock,
    /// The handle names no open socket.
    InvalidHandle,
    /// Another socket has this port.
    AddrInUse,
    /// Binding to an address that is not ours, or no ephemeral port left.
    AddrNotAvailable,
    /// Destination port 0 or unspecified address, or a destination of a family the socket
    /// cannot send to (an IPv6 peer from an IPv4 socket, an IPv4 one from a socket bound to
    /// a specific IPv6 address).
    InvalidInput,
    /// Datagram larger than one IP datagram carries (65507 bytes of data over IPv4, 65527
    /// over IPv6).
    MessageTooLarge,
    /// Too many sockets.
    NoBufs,
    /// A connected socket's peer answered with ICMP port (or protocol) unreachable
    /// (reported once, like Linux's `sk_err` for a connected UDP socket).
    ConnectionRefused,
    /// A connected socket's next hop never answered ARP (reported once).
    HostUnreachable,
    /// An IPv6 destination while the stack has no IPv6 source address for it, or a
    /// v4-mapped destination from a v6-only socket (Linux: ENETUNREACH).
    NetworkUnreachable,
}

/// Options fixed when a UDP socket is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdpBindOptions {
    /// IPV6_V6ONLY: a socket bound to `[::]` takes IPv6 datagrams only, and v4-mapped
    /// addresses are refused. Off by default (Linux `net.ipv6.bindv6only = 0`).
    pub v6only: bool,
}

/// A socket's IP_MTU_DISCOVER mode (Linux's `IP_PMTUDISC_*`, ip(7)), for UDP datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PmtuDisc {
    /// Never set DF; fragment at the path MTU.
    Dont,
    /// Linux's default: DF on datagrams that fit the path MTU (so a router's "fragmentation
    /// needed" teaches us the path, RFC 1191); larger ones are fragmented here, without DF.
    #[default]
    Want,
    /// Always DF; a datagram larger than the path MTU is refused (EMSGSIZE).
    Do,
    /// Always DF, measured against the interface MTU (the path MTU is ignored): for
    /// programs that probe the path themselves (RFC 4821).
    Probe,
    /// No DF, fragment at the interface MTU; the path MTU is ignored (Linux's INTERFACE).
    Interface,
    /// Like `Interface` (Linux's OMIT differs only in accepting PMTU updates for other
    /// sockets, which the shared cache does anyway).
    Omit,
}

impl PmtuDisc {
    /// Whether datagrams carry DF (those that are not fragmented here).
    pub fn sets_df(self) -> bool {
        matches!(self, PmtuDisc::Want | PmtuDisc::Do | PmtuDisc::Probe)
    }
    /// Whether a datagram larger than the MTU that applies is refused rather than fragmented.
    pub fn refuses_fragments(self) -> bool {
        matches!(self, PmtuDisc::Do | PmtuDisc::Probe)
    }
}

impl fmt::Display for UdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
impl std::error::Error for UdpError {}

#[derive(Debug)]
pub(crate) struct UdpSocket {
    /// The bound address in wire form (see the module doc).
    pub local: SocketAddr,
    /// An IPv6 socket: IPv4 addresses are reported to it v4-mapped.
    pub mapped: bool,
    /// IPV6_V6ONLY (see [`UdpBindOptions`]).
    pub v6only: bool,
    /// Received datagrams: sender, a buffer holding exactly the payload, and the destination
    /// it was sent to (the original destination, for a transparent socket), as the socket
    /// reports them (v4-mapped for an IPv6 socket).
    pub rx: VecDeque<(SocketAddr, PacketBuf, SocketAddr)>,
    /// Datagrams to send: destination (wire form), a buffer holding the payload (headroom in
    /// front), the payload's checksum, computed while copying it in, and the source a
    /// transparent socket sends it from (`None`: the socket's own address).
    pub tx: VecDeque<(SocketAddr, PacketBuf, u16, Option<SocketAddr>)>,
    /// The peer of a connected socket (connect(2) on a datagram socket), wire form: only it
    /// may have ICMP errors reported to the socket (RFC 1122 §4.1.3.3; Linux does the same).
    pub peer: Option<SocketAddr>,
    /// An asynchronous error for the next call (SO_ERROR), reported once.
    pub error: Option<UdpError>,
    /// IP_MTU_DISCOVER: DF and fragmentation of this socket's datagrams.
    pub pmtu_disc: PmtuDisc,
    /// A transparent socket (`UdpTable::bind_transparent`): it takes datagrams to any
    /// address and port no other socket takes, and may send from any source.
    pub transparent: bool,
}

#[derive(Debug)]
pub(crate) struct UdpTable {
    slots: Vec<(u32, Option<UdpSocket>)>,
    queue_limit: usize,
    max_sockets: usize,
    next_ephemeral: u16,
}

impl UdpTable {
    pub fn new(queue_limit: usize, max_sockets: usize) -> Self {
        UdpTable {
            slots: Vec::new(),
            queue_limit: queue_limit.max(1),
            max_sockets,
            next_ephemeral: EPHEMERAL_FIRST,
        }
    }

    /// Another socket's binding overlaps `addr` on `port` (wire form; `v6only` is the new
    /// socket's): within a family, the same address or a wildcard on either side (Linux
    /// without SO_REUSEADDR); across families, a dual-stack `[::]` (not v6-only) overlaps
    /// every IPv4 binding, as Linux's `ipv6_rcv_saddr_equal` says.
    fn port_used(&self, port: u16, addr: IpAddr, v6only: bool) -> bool {
        self.iter().any(|s| {
            if s.transparent || s.local.port() != port {
                return false;
            }
            let theirs = s.local.ip();
            match (theirs, addr) {
                (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                    theirs.is_unspecified() || addr.is_unspecified() || theirs == addr
                }
                (IpAddr::V6(t), IpAddr::V4(_)) => t.is_unspecified() && !s.v6only,
                (IpAddr::V4(_), IpAddr::V6(a)) => a.is_unspecified() && !v6only,
            }
        })
    }

    pub fn bind(&mut self, local: SocketAddr, opts: UdpBindOptions) -> Result<UdpHandle, UdpError> {
        let (mut local, mapped) = wire_addr(local);
        if mapped && opts.v6only {
            // Linux `inet6_bind`: a v6-only socket cannot bind a v4-mapped address (EINVAL).
            return Err(UdpError::InvalidInput);
        }
        if local.port() == 0 {
            let mut found = None;
            for _ in EPHEMERAL_PORTS {
                let p = self.next_ephemeral;
                self.next_ephemeral = if p == *EPHEMERAL_PORTS.end() {
                    EPHEMERAL_FIRST
                } else {
                    p + 1
                };
                if !self.port_used(p, local.ip(), opts.v6only) {
                    found = Some(p);
                    break;
                }
            }
            local.set_port(found.ok_or(UdpError::AddrNotAvailable)?);
        } else if self.port_used(local.port(), local.ip(), opts.v6only) {
            return Err(UdpError::AddrInUse);
        }
        let sock = UdpSocket {
            mapped: mapped || local.is_ipv6(),
            v6only: opts.v6only,
            local,
            rx: VecDeque::with_capacity(self.queue_limit.min(256)),
            tx: VecDeque::with_capacity(self.queue_limit.min(256)),
            peer: None,
            error: None,
            pmtu_disc: PmtuDisc::default(),
            transparent: false,
        };
        self.insert(sock)
    }

    /// The transparent socket (IP_TRANSPARENT behind a TPROXY rule): bound to 0.0.0.0:0, it
    /// receives datagrams to any destination no other socket takes, each with its original
    /// destination. One per table (`AddrInUse` for a second).
    pub fn bind_transparent(&mut self) -> Result<UdpHandle, UdpError> {
        if self.iter().any(|s| s.transparent) {
            return Err(UdpError::AddrInUse);
        }
        let sock = UdpSocket {
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0).into(),
            mapped: false,
            v6only: false,
            rx: VecDeque::with_capacity(self.queue_limit.min(256)),
            tx: VecDeque::with_capacity(self.queue_limit.min(256)),
            peer: None,
            error: None,
            pmtu_disc: PmtuDisc::default(),
            transparent: true,
        };
        self.insert(sock)
    }

    fn insert(&mut self, sock: UdpSocket) -> Result<UdpHandle, UdpError> {
        if let Some(i) = self.slots.iter().position(|(_, s)| s.is_none()) {
            let slot = &mut self.slots[i];
            slot.0 = slot.0.wrapping_add(1);
            slot.1 = Some(sock);
            return Ok(UdpHandle {
                index: i as u32,
                generation: slot.0,
            });
        }
        if self.slots.len() >= self.max_sockets {
            return Err(UdpError::NoBufs);
        }
        self.slots.push((0, Some(sock)));
        Ok(UdpHandle {
            index: (self.slots.len() - 1) as u32,
            generation: 0,
        })
    }

    pub fn get_mut(&mut self, h: UdpHandle) -> Result<&mut UdpSocket, UdpError> {
        match self.slots.get_mut(h.index as usize) {
            Some((g, Some(s))) if *g == h.generation => Ok(s),
            _ => Err(UdpError::InvalidHandle),
        }
    }

    pub fn get(&self, h: UdpHandle) -> Result<&UdpSocket, UdpError> {
        match self.slots.get(h.index as usize) {
            Some((g, Some(s))) if *g == h.generation => Ok(s),
            _ => Err(UdpError::InvalidHandle),
        }
    }

    /// Closes the socket, returning its queued buffers to `pool`.
    pub fn close(&mut self, h: UdpHandle, pool: &mut Pool) {
        if let Some((g, slot)) = self.slots.get_mut(h.index as usize) {
            if *g == h.generation {
                if let Some(s) = slot.take() {
                    for (_, b, _) in s.rx {
                        pool.put(b);
                    }
                    for (_, b, _, _) in s.tx {
                        pool.put(b);
                    }
                }
            }
        }
    }

    pub fn queue_limit(&self) -> usize {
        self.queue_limit
    }

    /// The socket a datagram to `dst` (wire form) is delivered to: an exact address match
    /// first, then a wildcard bind of the family (RFC 1122 §4.1.3.4 leaves the choice to the
    /// host; this is the BSD rule), then for IPv4 a dual-stack `[::]` socket (Linux scores
    /// AF_INET above AF_INET6), then the transparent socket. `ours`: `dst` is our address (or
    /// a broadcast); a datagram to a foreign address (transparent mode) goes to the
    /// transparent socket only, and a broadcast never does (`bcast`).
    pub fn lookup(&mut self, dst: SocketAddr, ours: bool, bcast: bool) -> Option<&mut UdpSocket> {
        let mut wildcard = None;
        let mut dual = None;
        let mut exact = None;
        let mut transparent = None;
        for (i, (_, s)) in self.slots.iter().enumerate() {
            if let Some(s) = s {
                if s.transparent {
                    if !bcast && dst.is_ipv4() {
                        transparent = Some(i);
                    }
                } else if ours && s.local.port() == dst.port() {
                    let ip = s.local.ip();
                    if ip == dst.ip() {
                        exact = Some(i);
                        break;
                    } else if ip.is_unspecified() {
                        if ip.is_ipv4() == dst.is_ipv4() {
                            wildcard = Some(i);
                        } else if dst.is_ipv4() && !s.v6only {
                            dual = Some(i);
                        }
                    }
                }
            }
        }
        let i = exact.or(wildcard).or(dual).or(transparent)?;
        self.slots[i].1.as_mut()
    }

    pub fn iter(&self) -> impl Iterator<Item = &UdpSocket> {
        self.slots.iter().filter_map(|(_, s)| s.as_ref())
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut UdpSocket> {
        self.slots.iter_mut().filter_map(|(_, s)| s.as_mut())
    }
}

impl Inner {
    /// An ICMP error quoting a UDP datagram we sent from `local` to `remote`: a socket
    /// connected to `remote` gets `err` for its next call. Unconnected sockets hear nothing
    /// (Linux without IP_RECVERR: a datagram socket cannot tell which send failed).
    pub(super) fn udp_icmp_error(&mut self, local: SocketAddr, remote: SocketAddr, err: UdpError) {
        for sock in self.udp.iter_mut() {
            let addr_ok = sock.local.ip().is_unspecified() || sock.local.ip() == local.ip();
            if sock.local.port() == local.port() && addr_ok && sock.peer == Some(remote) {
                sock.error = Some(err);
            }
        }
    }

    /// The neighbour cache gave up on `next_hop`: connected sockets whose peer is reached
    /// through it get EHOSTUNREACH (Linux: `ip_link_failure` answers the dropped packet with
    /// a local ICMP host unreachable).
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    pub(super) fn udp_host_unreachable(&mut self, next_hop: Ipv4Addr) {
        let st = &self.st;
        for sock in self.udp.iter_mut() {
            if let Some(SocketAddr::V4(p)) = sock.peer {
                if st.next_hop(*p.ip()) == Some(next_hop) {
                    sock.error = Some(UdpError::HostUnreachable);
                }
            }
        }
    }

    /// `udp_host_unreachable` for an IPv6 neighbour whose resolution failed (RFC 4861
    /// §7.2.2).
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    pub(super) fn udp_host_unreachable6(&mut self, next_hop: Ipv6Addr) {
        let v6 = &self.st.v6;
        for sock in self.udp.iter_mut() {
            if let Some(SocketAddr::V6(p)) = sock.peer {
                if v6.next_hop(*p.ip()) == Some(next_hop) {
                    sock.error = Some(UdpError::HostUnreachable);
                }
            }
        }
    }

    /// connect(2) on a datagram socket: remembers the peer (None disconnects), and clears a
    /// pending error.
    pub(super) fn udp_connect(
        &mut self,
        h: UdpHandle,
        peer: Option<SocketAddr>,
    ) -> Result<(), UdpError> {
        let sock = self.udp.get_mut(h)?;
        sock.peer = peer.map(|p| wire_addr(p).0);
        sock.error = None;
        Ok(())
    }

    pub(super) fn udp_set_pmtu_disc(
        &mut self,
        h: UdpHandle,
        mode: PmtuDisc,
    ) -> Result<(), UdpError> {
        self.udp.get_mut(h)?.pmtu_disc = mode;
        Ok(())
    }

    /// Takes the socket's pending asynchronous error (SO_ERROR): reported once, then cleared.
    pub(super) fn udp_take_error(&mut self, h: UdpHandle) -> Result<Option<UdpError>, UdpError> {
        Ok(self.udp.get_mut(h)?.error.take())
    }

    /// Binds `local`: the address must be unspecified (`0.0.0.0`, `[::]`, `[::ffff:0.0.0.0]`)
    /// or ours (the IPv4 address, plain or v4-mapped; an IPv6 address of the interface).
    pub(super) fn udp_bind(
        &mut self,
        local: SocketAddr,
        opts: UdpBindOptions,
    ) -> Result<UdpHandle, UdpError> {
        let ours = match wire_addr(local).0.ip() {
            IpAddr::V4(a) => a.is_unspecified() || a == self.st.addr,
            IpAddr::V6(a) => a.is_unspecified() || self.st.is_own_ipv6(a),
        };
        if !ours {
            return Err(UdpError::AddrNotAvailable);
        }
        self.udp.bind(local, opts)
    }

    /// The bound address as the socket reports it (v4-mapped for an IPv6 socket bound to an
    /// IPv4 address).
    pub(super) fn udp_local_addr(&self, h: UdpHandle) -> Result<SocketAddr, UdpError> {
        let s = self.udp.get(h)?;
        Ok(if s.mapped {
            mapped_addr(s.local)
        } else {
            s.local
        })
    }

    /// Copies the datagram into a pooled buffer (summing it in the same pass) and queues it.
    /// `from`: the source a transparent socket sends from (`None`: the socket's address).
    pub(super) fn udp_send_to(
        &mut self,
        now: Instant,
        h: UdpHandle,
        data: &[u8],
        to: SocketAddr,
        from: Option<SocketAddr>,
    ) -> Result<(), UdpError> {
        let (to, to_mapped) = wire_addr(to);
        if to.port() == 0 || to.ip().is_unspecified() {
            return Err(UdpError::InvalidInput);
        }
        let from = from.map(|f| wire_addr(f).0);
        if let Some(f) = from {
            // Only a transparent socket sends from a foreign address (Linux: IP_TRANSPARENT
            // with an IP_PKTINFO/bind source), and only from a concrete one (IPv4: the
            // transparent socket is IPv4 only).
            if !self.udp.get(h)?.transparent {
                return Err(UdpError::AddrNotAvailable);
            }
            if f.port() == 0 || f.ip().is_unspecified() || f.ip().is_multicast() || f.is_ipv6() {
                return Err(UdpError::InvalidInput);
            }
        }
        {
            let sock = self.udp.get(h)?;
            // Which destinations the socket's family and binding can reach (Linux
            // `udpv6_sendmsg`): an IPv4 socket only IPv4; an IPv6 socket IPv6, and IPv4
            // (v4-mapped) unless v6-only (ENETUNREACH) or bound to a specific IPv6 address.
            let local = sock.local.ip();
            let ok = match to.ip() {
                IpAddr::V4(_) => {
                    if to_mapped && sock.v6only {
                        return Err(UdpError::NetworkUnreachable);
                    }
                    local.is_ipv4() || (local.is_unspecified() && !sock.v6only)
                }
                IpAddr::V6(_) => local.is_ipv6(),
            };
            if !ok {
                return Err(UdpError::InvalidInput);
            }
        }
        // One IPv4 datagram carries at most 65535 - 20 - 8 = 65507 bytes of UDP data, one
        // IPv6 datagram 65535 - 8 = 65527 (its payload length excludes the fixed header); a
        // larger one than the path MTU is fragmented on its way out (`IfaceState::send_ip`,
        // or the IPv6 layer's `send_ipv6`).
        let too_big = match to {
            SocketAddr::V4(_) => data.len() + HEADER_LEN + IP_LEN > MAX_IP_PACKET,
            SocketAddr::V6(_) => data.len() + HEADER_LEN > IPV6_MAX_PAYLOAD,
        };
        if too_big {
            return Err(UdpError::MessageTooLarge);
        }
        // An IPv6-only stack (`StackConfig::addr` 0.0.0.0) has no IPv4 source.
        if to.is_ipv4() && self.st.addr.is_unspecified() {
            return Err(UdpError::NetworkUnreachable);
        }
        if let SocketAddr::V6(t) = to {
            if self.st.ipv6_source(*t.ip()).is_none()
                && self.udp.get(h)?.local.ip().is_unspecified()
            {
                // No IPv6 address to send from: fail now rather than drop later.
                self.st.c.ipv6_no_source += 1;
                return Err(UdpError::NetworkUnreachable);
            }
        }
        let limit = self.udp.queue_limit();
        let sock = self.udp.get_mut(h)?;
        // A pending asynchronous error is the answer to this call (Linux's sock_error()).
        if let Some(e) = sock.error.take() {
            return Err(e);
        }
        // IP_PMTUDISC_DO / PROBE: DF always, so a datagram beyond the MTU that applies could
        // never leave; refuse it now, as Linux's ip_append_data does (EMSGSIZE). IPv6 the
        // same with its MTU and header (IPV6_MTU_DISCOVER).
        let mode = sock.pmtu_disc;
        let too_big_for_path = match to {
            SocketAddr::V4(t) => {
                IP_LEN + HEADER_LEN + data.len() > self.st.datagram_mtu(now, *t.ip(), mode)
            }
            SocketAddr::V6(t) => {
                IPV6_LEN + HEADER_LEN + data.len() > self.st.datagram_mtu_v6(now, *t.ip(), mode)
            }
        };
        if mode.refuses_fragments() && too_big_for_path {
            return Err(UdpError::MessageTooLarge);
        }
        if sock.tx.len() >= limit {
            return Err(UdpError::WouldBlock);
        }
        let st = &mut self.st;
        let mut buf = st.pool.get();
        let sum = st.copy.copy_with_checksum(buf.append(data.len()), data);
        st.c.copies += 1;
        st.c.bytes_copied += data.len() as u64;
        st.c.bytes_checksummed += data.len() as u64;
        sock.tx.push_back((to, buf, sum, from));
        Ok(())
    }

    /// The oldest datagram: length copied, sender, and the destination it was sent to.
    pub(super) fn udp_recv_from(
        &mut self,
        h: UdpHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddr, SocketAddr), UdpError> {
        let sock = self.udp.get_mut(h)?;
        if let Some(e) = sock.error.take() {
            return Err(e);
        }
        let (from, data, to) = sock.rx.pop_front().ok_or(UdpError::WouldBlock)?;
        let n = data.len().min(buf.len());
        self.st.copy.copy(&mut buf[..n], &data.as_slice()[..n]);
        self.st.pool.put(data);
        Ok((n, from, to))
    }

    /// Moves queued UDP datagrams to the transmit queue; returns true if it stopped at the
    /// transmit bound with datagrams left. Runs every poll: the test for queued datagrams is
    /// inline, the work out of line (instruction-cache density of a TCP-only poll).
    #[inline]
    pub(super) fn flush_udp(&mut self, now: Instant) -> bool {
        if self.udp.iter().all(|s| s.tx.is_empty()) {
            return false;
        }
        self.flush_udp_queued(now)
    }

    #[inline(never)]
    fn flush_udp_queued(&mut self, now: Instant) -> bool {
        let st = &mut self.st;
        let addr = st.addr;
        for sock in self.udp.iter_mut() {
            while let Some((to, mut buf, sum, from)) = sock.tx.pop_front() {
                // A datagram goes out whole (all its fragments) or waits for the next round;
                // one that could never fit the queue is tried (and counted) when it is empty.
                let mode = sock.pmtu_disc;
                let frames = match to {
                    SocketAddr::V4(t) => st.frames_for(now, *t.ip(), HEADER_LEN + buf.len(), mode),
                    SocketAddr::V6(t) => {
                        st.frames_for_v6(now, *t.ip(), HEADER_LEN + buf.len(), mode)
                    }
                };
                if st.tx_full() || (st.tx.len() + frames > st.tx_limit && !st.tx.is_empty()) {
                    sock.tx.push_front((to, buf, sum, from));
                    return true;
                }
                let src_port = from.map_or(sock.local.port(), |f| f.port());
                let src: IpAddr = match (from, to) {
                    (Some(f), _) => f.ip(),
                    (None, SocketAddr::V4(_)) => match sock.local.ip() {
                        // A dual-stack `[::]` socket sends IPv4 from our IPv4 address.
                        IpAddr::V4(a) if !a.is_unspecified() => a.into(),
                        _ => addr.into(),
                    },
                    (None, SocketAddr::V6(t)) => match sock.local.ip() {
                        IpAddr::V6(a) if !a.is_unspecified() => a.into(),
                        _ => match st.ipv6_source(*t.ip()) {
                            Some(a) => a.into(),
                            None => {
                                // The source went away after `udp_send_to` checked it.
                                st.c.ipv6_no_source += 1;
                                st.pool.put(buf);
                                continue;
                            }
                        },
                    },
                };
                let repr = UdpRepr {
                    src_port,
                    dst_port: to.port(),
                };
                let len = buf.len();
                let header = buf.prepend(HEADER_LEN);
                // The length fits: `udp_send_to` bounded the datagram by the MTU. RFC 768: the
                // checksum covers pseudo-header, header and data; the data's share was summed
                // while it was copied in.
                // IPv6: the checksum is mandatory (RFC 8200 §8.1); a computed 0 is sent as
                // 0xffff by `emit_with_payload_sum`, as over IPv4.
                let ok = if st.csum_tx {
                    let ph = PseudoHeader { src, dst: to.ip() };
                    repr.emit_with_payload_sum(header, len, sum, &ph).is_ok()
                } else {
                    repr.emit(&mut UdpPacket::new_unchecked(header), len)
                        .is_ok()
                };
                if !ok {
                    st.c.tx_too_big += 1;
                    st.pool.put(buf);
                    continue;
                }
                st.c.udp_out += 1;
                // A refusal is counted where it happens (queue full, no route, ...).
                let _ = match (src, to.ip()) {
                    (IpAddr::V4(s), IpAddr::V4(d)) => {
                        st.send_ip_pmtu(now, IpProtocol::Udp, s, d, buf, mode)
                    }
                    (IpAddr::V6(s), IpAddr::V6(d)) => st.send_ipv6(
                        now,
                        IpProtocol::Udp,
                        s,
                        d,
                        buf,
                        crate::wire::ipv4::Ecn::NotEct,
                    ),
                    _ => {
                        st.c.udp_malformed += 1;
                        st.pool.put(buf);
                        Ok(())
                    }
                };
            }
        }
        false
    }

    /// One received UDP datagram, for either family (`ip` from [`IpMeta::from_v4`] or
    /// [`IpMeta::from_v6`], `payload` the UDP header and data after any IPv6 extension
    /// headers). Returns true when no socket took it and the caller should answer with a port
    /// unreachable (RFC 1122 §4.1.3.1; ICMPv6 Destination Unreachable code 4, RFC 4443 §3.1):
    /// never for a broadcast or multicast (`bcast`), a foreign destination, or a corrupt
    /// datagram.
    pub(super) fn receive_udp(
        &mut self,
        now: Instant,
        ip: &IpMeta,
        payload: &[u8],
        bcast: bool,
        csum: Csum,
    ) -> bool {
        let _ = now;
        let c = &mut self.st.c;
        c.udp_in += 1;
        // RFC 768: the length field covers header and data (at least the 8-byte header); bytes
        // beyond it are padding.
        let Ok(pkt) = UdpPacket::new_checked(payload) else {
            c.udp_malformed += 1;
            return false;
        };
        let ph = PseudoHeader {
            src: ip.src,
            dst: ip.dst,
        };
        // Destination port 0 is reserved (malformed). The checksum is checked below, once:
        // in the copy to the socket queue, or in a separate pass before an ICMP answer.
        let Ok(repr) = UdpRepr::parse(&pkt, &ph, false) else {
            c.udp_malformed += 1;
            return false;
        };
        // RFC 8200 §8.1: over IPv6 the checksum is not optional; "IPv6 receivers must discard
        // UDP packets containing a zero checksum" (Linux `udp6_csum_init` too).
        if ip.dst.is_ipv6() && pkt.checksum() == 0 {
            c.udp_bad_checksum += 1;
            return false;
        }
        // RFC 768: an all-zero checksum means the sender computed none.
        let verify = csum.needs_verify() && pkt.checksum() != 0;
        let data = pkt.payload();
        let limit = self.udp.queue_limit();
        let dst = SocketAddr::new(ip.dst, repr.dst_port);
        let src = SocketAddr::new(ip.src, repr.src_port);
        // A foreign destination reached us in transparent mode (see `receive_ipv4`); the
        // IPv6 layer passes up only what is addressed to us.
        let ours = match ip.dst {
            IpAddr::V4(d) => bcast || d == self.st.addr,
            IpAddr::V6(_) => true,
        };
        match self.udp.lookup(dst, ours, bcast) {
            Some(sock) => {
                if sock.rx.len() >= limit {
                    c.udp_queue_full += 1;
                    return false;
                }
                let mut buf = self.st.pool.get();
                let data_sum = self
                    .st
                    .copy
                    .copy_with_checksum(buf.append(data.len()), data);
                c.copies += 1;
                c.bytes_copied += data.len() as u64;
                c.bytes_checksummed += data.len() as u64;
                if verify && !pkt.verify_checksum_with_payload_sum(&ph, data_sum) {
                    c.udp_bad_checksum += 1;
                    self.st.pool.put(buf);
                    return false;
                }
                // An IPv6 socket sees IPv4 addresses v4-mapped (RFC 3493 §3.7).
                let (src, dst) = if sock.mapped {
                    (mapped_addr(src), mapped_addr(dst))
                } else {
                    (src, dst)
                };
                sock.rx.push_back((src, buf, dst));
                false
            }
            None => {
                // Verify before answering: never send an error about a corrupted datagram.
                if verify {
                    c.bytes_checksummed += data.len() as u64;
                    c.bytes_checksummed_separately += data.len() as u64;
                    if !pkt.verify_checksum(&ph) {
                        c.udp_bad_checksum += 1;
                        return false;
                    }
                }
                c.udp_no_socket += 1;
                // RFC 1122 §4.1.3.1: port unreachable for a closed port, but never in answer to
                // a broadcast (RFC 1122 §3.2.2), nor for a foreign destination (transparent
                // mode without a transparent socket: it would come from our own address).
                !bcast && ours
            }
        }
    }
}

impl IfaceState {
    /// The MTU an IPv6 datagram to `dst` is measured against under `mode` (the same modes
    /// as IPV6_MTU_DISCOVER): the IPv6 path MTU (RFC 8201), or the link MTU for the modes
    /// that ignore what ICMPv6 reported.
    pub(super) fn datagram_mtu_v6(&self, now: Instant, dst: Ipv6Addr, mode: PmtuDisc) -> usize {
        match mode {
            PmtuDisc::Probe | PmtuDisc::Interface | PmtuDisc::Omit => self.mtu,
            PmtuDisc::Dont | PmtuDisc::Want | PmtuDisc::Do => self.ipv6_path_mtu(now, dst),
        }
    }

    /// Frames a UDP datagram of `len` bytes (upper-layer payload) to `dst` takes over IPv6:
    /// 1, or as many fragments as the IPv6 layer cuts it into at the path MTU (RFC 8200 §4.5:
    /// each fragment carries a multiple of 8 bytes after the fixed header and an 8-byte
    /// fragment header), for the transmit-queue bound.
    pub(super) fn frames_for_v6(
        &self,
        now: Instant,
        dst: Ipv6Addr,
        len: usize,
        mode: PmtuDisc,
    ) -> usize {
        let mtu = self.datagram_mtu_v6(now, dst, mode);
        if IPV6_LEN + len <= mtu {
            return 1;
        }
        let per = mtu.saturating_sub(IPV6_LEN + 8) / 8 * 8;
        len.div_ceil(per.max(8))
    }
}
