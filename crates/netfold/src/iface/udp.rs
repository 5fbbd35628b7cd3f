//! UDP (RFC 768): a small table of bound endpoints, each with bounded receive and send queues
//! of pooled buffers, and the protocol's receive half (checks, delivery with the checksum
//! verified in the copy to the socket queue) and send half (the header through
//! `wire::udp`, its checksum completed from the payload sum taken while the data was copied
//! in). The Stack owns the table; user calls go through `Stack::udp_*`.

use super::Inner;
use crate::buf::{Csum, PacketBuf, Pool};
use crate::offload::gso::MAX_IP_PACKET;
use crate::time::Instant;
use crate::wire::icmpv4::unreach_code;
use crate::wire::ipv4::{Ipv4Repr, HEADER_LEN as IP_LEN};
use crate::wire::tcp::PseudoHeader;
use crate::wire::udp::{UdpPacket, UdpRepr};
use crate::wire::IpProtocol;
use core::fmt;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

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
    /// Destination port 0 or unspecified address.
    InvalidInput,
    /// Datagram larger than one IPv4 datagram carries (65507 bytes of data).
    MessageTooLarge,
    /// Too many sockets.
    NoBufs,
    /// A connected socket's peer answered with ICMP port (or protocol) unreachable
    /// (reported once, like Linux's `sk_err` for a connected UDP socket).
    ConnectionRefused,
    /// A connected socket's next hop never answered ARP (reported once).
    HostUnreachable,
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
    pub local: SocketAddrV4,
    /// Received datagrams: sender, a buffer holding exactly the payload, and the destination
    /// it was sent to (the original destination, for a transparent socket).
    pub rx: VecDeque<(SocketAddrV4, PacketBuf, SocketAddrV4)>,
    /// Datagrams to send: destination, a buffer holding the payload (headroom in front), the
    /// payload's checksum, computed while copying it in, and the source a transparent socket
    /// sends it from (`None`: the socket's own address).
    pub tx: VecDeque<(SocketAddrV4, PacketBuf, u16, Option<SocketAddrV4>)>,
    /// The peer of a connected socket (connect(2) on a datagram socket): only it may have
    /// ICMP errors reported to the socket (RFC 1122 §4.1.3.3; Linux does the same).
    pub peer: Option<SocketAddrV4>,
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

    fn port_used(&self, port: u16, addr: Ipv4Addr) -> bool {
        self.iter().any(|s| {
            s.local.port() == port
                && (s.local.ip().is_unspecified() || addr.is_unspecified() || *s.local.ip() == addr)
        })
    }

    pub fn bind(&mut self, mut local: SocketAddrV4) -> Result<UdpHandle, UdpError> {
        if local.port() == 0 {
            let mut found = None;
            for _ in EPHEMERAL_PORTS {
                let p = self.next_ephemeral;
                self.next_ephemeral = if p == *EPHEMERAL_PORTS.end() {
                    EPHEMERAL_FIRST
                } else {
                    p + 1
                };
                if !self.port_used(p, *local.ip()) {
                    found = Some(p);
                    break;
                }
            }
            local.set_port(found.ok_or(UdpError::AddrNotAvailable)?);
        } else if self.port_used(local.port(), *local.ip()) {
            return Err(UdpError::AddrInUse);
        }
        let sock = UdpSocket {
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
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
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

    /// The socket a datagram to `dst` is delivered to: an exact address match first, then a
    /// wildcard bind (RFC 1122 §4.1.3.4 leaves the choice to the host; this is the BSD rule),
    /// then the transparent socket. `ours`: `dst` is our address (or a broadcast); a datagram
    /// to a foreign address (transparent mode) goes to the transparent socket only, and a
    /// broadcast never does (`bcast`).
    pub fn lookup(&mut self, dst: SocketAddrV4, ours: bool, bcast: bool) -> Option<&mut UdpSocket> {
        let mut wildcard = None;
        let mut exact = None;
        let mut transparent = None;
        for (i, (_, s)) in self.slots.iter().enumerate() {
            if let Some(s) = s {
                if s.transparent {
                    if !bcast {
                        transparent = Some(i);
                    }
                } else if ours && s.local.port() == dst.port() {
                    if s.local.ip() == dst.ip() {
                        exact = Some(i);
                        break;
                    } else if s.local.ip().is_unspecified() {
                        wildcard = Some(i);
                    }
                }
            }
        }
        let i = exact.or(wildcard).or(transparent)?;
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
    pub(super) fn udp_icmp_error(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        err: UdpError,
    ) {
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
    pub(super) fn udp_host_unreachable(&mut self, next_hop: Ipv4Addr) {
        let st = &self.st;
        for sock in self.udp.iter_mut() {
            if let Some(p) = sock.peer {
                if st.next_hop(*p.ip()) == Some(next_hop) {
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
        peer: Option<SocketAddrV4>,
    ) -> Result<(), UdpError> {
        let sock = self.udp.get_mut(h)?;
        sock.peer = peer;
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

    pub(super) fn udp_bind(&mut self, local: SocketAddrV4) -> Result<UdpHandle, UdpError> {
        if !local.ip().is_unspecified() && *local.ip() != self.st.addr {
            return Err(UdpError::AddrNotAvailable);
        }
        self.udp.bind(local)
    }

    /// Copies the datagram into a pooled buffer (summing it in the same pass) and queues it.
    /// `from`: the source a transparent socket sends from (`None`: the socket's address).
    pub(super) fn udp_send_to(
        &mut self,
        now: Instant,
        h: UdpHandle,
        data: &[u8],
        to: SocketAddrV4,
        from: Option<SocketAddrV4>,
    ) -> Result<(), UdpError> {
        if to.port() == 0 || to.ip().is_unspecified() {
            return Err(UdpError::InvalidInput);
        }
        if let Some(f) = from {
            // Only a transparent socket sends from a foreign address (Linux: IP_TRANSPARENT
            // with an IP_PKTINFO/bind source), and only from a concrete one.
            if !self.udp.get(h)?.transparent {
                return Err(UdpError::AddrNotAvailable);
            }
            if f.port() == 0 || f.ip().is_unspecified() || f.ip().is_multicast() {
                return Err(UdpError::InvalidInput);
            }
        }
        // One IPv4 datagram carries at most 65535 - 20 - 8 = 65507 bytes of UDP data; a larger
        // one than the path MTU is fragmented on its way out (`IfaceState::send_ip`).
        if data.len() + HEADER_LEN + IP_LEN > MAX_IP_PACKET {
            return Err(UdpError::MessageTooLarge);
        }
        let limit = self.udp.queue_limit();
        let sock = self.udp.get_mut(h)?;
        // A pending asynchronous error is the answer to this call (Linux's sock_error()).
        if let Some(e) = sock.error.take() {
            return Err(e);
        }
        // IP_PMTUDISC_DO / PROBE: DF always, so a datagram beyond the MTU that applies could
        // never leave; refuse it now, as Linux's ip_append_data does (EMSGSIZE).
        let mode = sock.pmtu_disc;
        if mode.refuses_fragments()
            && IP_LEN + HEADER_LEN + data.len() > self.st.datagram_mtu(now, *to.ip(), mode)
        {
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
    ) -> Result<(usize, SocketAddrV4, SocketAddrV4), UdpError> {
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
    /// transmit bound with datagrams left.
    pub(super) fn flush_udp(&mut self, now: Instant) -> bool {
        let st = &mut self.st;
        let addr = st.addr;
        for sock in self.udp.iter_mut() {
            while let Some((to, mut buf, sum, from)) = sock.tx.pop_front() {
                // A datagram goes out whole (all its fragments) or waits for the next round;
                // one that could never fit the queue is tried (and counted) when it is empty.
                let mode = sock.pmtu_disc;
                let frames = st.frames_for(now, *to.ip(), HEADER_LEN + buf.len(), mode);
                if st.tx_full() || (st.tx.len() + frames > st.tx_limit && !st.tx.is_empty()) {
                    sock.tx.push_front((to, buf, sum, from));
                    return true;
                }
                let (src, src_port) = match from {
                    Some(f) => (*f.ip(), f.port()),
                    None if sock.local.ip().is_unspecified() => (addr, sock.local.port()),
                    None => (*sock.local.ip(), sock.local.port()),
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
                let ok = if st.csum_tx {
                    let ph = PseudoHeader { src, dst: *to.ip() };
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
                let _ = st.send_ip_pmtu(now, IpProtocol::Udp, src, *to.ip(), buf, mode);
            }
        }
        false
    }

    pub(super) fn receive_udp(
        &mut self,
        now: Instant,
        ip: &Ipv4Repr,
        payload: &[u8],
        bcast: bool,
        csum: Csum,
    ) {
        let c = &mut self.st.c;
        c.udp_in += 1;
        // RFC 768: the length field covers header and data (at least the 8-byte header); bytes
        // beyond it are padding.
        let Ok(pkt) = UdpPacket::new_checked(payload) else {
            c.udp_malformed += 1;
            return;
        };
        let ph = PseudoHeader {
            src: ip.src,
            dst: ip.dst,
        };
        // Destination port 0 is reserved (malformed). The checksum is checked below, once:
        // in the copy to the socket queue, or in a separate pass before an ICMP answer.
        let Ok(repr) = UdpRepr::parse(&pkt, &ph, false) else {
            c.udp_malformed += 1;
            return;
        };
        // RFC 768: an all-zero checksum means the sender computed none.
        let verify = csum.needs_verify() && pkt.checksum() != 0;
        let data = pkt.payload();
        let limit = self.udp.queue_limit();
        let dst = SocketAddrV4::new(ip.dst, repr.dst_port);
        // A foreign destination reached us in transparent mode (see `receive_ipv4`).
        let ours = bcast || ip.dst == self.st.addr;
        match self.udp.lookup(dst, ours, bcast) {
            Some(sock) => {
                if sock.rx.len() >= limit {
                    c.udp_queue_full += 1;
                    return;
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
                    return;
                }
                sock.rx
                    .push_back((SocketAddrV4::new(ip.src, repr.src_port), buf, dst));
            }
            None => {
                // Verify before answering: never send an error about a corrupted datagram.
                if verify {
                    c.bytes_checksummed += data.len() as u64;
                    c.bytes_checksummed_separately += data.len() as u64;
                    if !pkt.verify_checksum(&ph) {
                        c.udp_bad_checksum += 1;
                        return;
                    }
                }
                c.udp_no_socket += 1;
                // RFC 1122 §4.1.3.1: port unreachable for a closed port, but never in answer to
                // a broadcast (RFC 1122 §3.2.2), nor for a foreign destination (transparent
                // mode without a transparent socket: it would come from our own address).
                if !bcast && ours {
                    self.send_icmp_unreachable(now, unreach_code::PORT, ip, payload);
                }
            }
        }
    }
}
