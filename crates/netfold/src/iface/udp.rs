//! UDP (RFC 768) sockets: a small table of bound endpoints, each with bounded receive and send
//! queues of pooled buffers. The Stack owns the table; user calls go through `Stack::udp_*`.

use crate::buf::{PacketBuf, Pool};
use core::fmt;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

/// UDP header length.
pub const HEADER_LEN: usize = 8;
/// First port handed out when binding to port 0 (IANA dynamic range, RFC 6335 §6).
const EPHEMERAL_FIRST: u16 = 49152;

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
    /// Datagram larger than the MTU allows (netfold does not fragment on transmit).
    MessageTooLarge,
    /// Too many sockets.
    NoBufs,
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
    /// Received datagrams: sender and a buffer holding exactly the payload.
    pub rx: VecDeque<(SocketAddrV4, PacketBuf)>,
    /// Datagrams to send: destination, a buffer holding the payload (headroom in front), and
    /// the payload's checksum, computed while copying it in.
    pub tx: VecDeque<(SocketAddrV4, PacketBuf, u16)>,
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
            for _ in 0..=(u16::MAX - EPHEMERAL_FIRST) {
                let p = self.next_ephemeral;
                self.next_ephemeral = if p == u16::MAX {
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
        };
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
                    for (_, b) in s.rx {
                        pool.put(b);
                    }
                    for (_, b, _) in s.tx {
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
    /// wildcard bind (RFC 1122 §4.1.3.4 leaves the choice to the host; this is the BSD rule).
    pub fn lookup(&mut self, dst: SocketAddrV4) -> Option<&mut UdpSocket> {
        let mut wildcard = None;
        let mut exact = None;
        for (i, (_, s)) in self.slots.iter().enumerate() {
            if let Some(s) = s {
                if s.local.port() == dst.port() {
                    if s.local.ip() == dst.ip() {
                        exact = Some(i);
                        break;
                    } else if s.local.ip().is_unspecified() {
                        wildcard = Some(i);
                    }
                }
            }
        }
        let i = exact.or(wildcard)?;
        self.slots[i].1.as_mut()
    }

    pub fn iter(&self) -> impl Iterator<Item = &UdpSocket> {
        self.slots.iter().filter_map(|(_, s)| s.as_ref())
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut UdpSocket> {
        self.slots.iter_mut().filter_map(|(_, s)| s.as_mut())
    }
}
