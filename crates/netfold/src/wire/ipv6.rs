//! IPv6 fixed header (RFC 8200 §3).
//!
//! This module covers the 40-byte fixed header and the addresses the network layer needs to
//! name (RFC 4291: the all-nodes group, solicited-node groups, link-local unicast, prefixes as
//! [`Ipv6Cidr`]); extension headers are walked, bounded, by [`super::ipv6ext`] after
//! [`Ipv6Repr::parse`] (RFC 8200 §4). `payload_len` bounds the payload, so Ethernet padding
//! after a short packet is ignored. A zero payload length (the RFC 2675 jumbogram marker) is
//! refused: netfold speaks no jumbograms.
#![warn(missing_docs)]

use super::ipv4::Ecn;
use super::{Error, IpProtocol, Result};
pub use std::net::Ipv6Addr;

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// The minimum link MTU every IPv6 link must carry (RFC 8200 §5).
pub const MIN_MTU: usize = 1280;
/// Longest payload the 16-bit Payload Length field describes (RFC 8200 §3).
pub const MAX_PAYLOAD_LEN: usize = 65_535;

/// RFC 4291 §2.7.1: "FF02:0:0:0:0:0:0:1", all nodes on the link.
pub const LINK_LOCAL_ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// RFC 4291 §2.7.1: "FF02:0:0:0:0:0:0:2", all routers on the link.
pub const LINK_LOCAL_ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// The solicited-node multicast group of `addr`. RFC 4291 §2.7.1: "formed by taking the
/// low-order 24 bits of an address (unicast or anycast) and appending those bits to the prefix
/// FF02:0:0:0:0:1:FF00::/104".
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let a = addr.octets();
    let mut g = [0u8; 16];
    g[..2].copy_from_slice(&[0xff, 0x02]);
    g[11] = 0x01;
    g[12] = 0xff;
    g[13..].copy_from_slice(&a[13..]);
    Ipv6Addr::from(g)
}

/// Whether `addr` is a solicited-node multicast group (FF02::1:FF00:0/104).
pub fn is_solicited_node(addr: Ipv6Addr) -> bool {
    let a = addr.octets();
    a[..13] == [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff]
}

/// Link-local unicast, FE80::/10 (RFC 4291 §2.5.6).
pub fn is_link_local(addr: Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// The scope of a multicast address (RFC 4291 §2.7: the low four bits of the second byte;
/// 1 interface-local, 2 link-local, 5 site-local, 0xe global).
pub fn multicast_scope(addr: Ipv6Addr) -> u8 {
    addr.octets()[1] & 0x0f
}

/// The link-local address with interface identifier `iid`: FE80::/64 followed by the 64-bit
/// identifier (RFC 4291 §2.5.6; RFC 4862 §5.3 forms it so).
pub fn link_local(iid: [u8; 8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a[..2].copy_from_slice(&[0xfe, 0x80]);
    a[8..].copy_from_slice(&iid);
    Ipv6Addr::from(a)
}

/// An address with its prefix length (RFC 4291 §2.3: "ipv6-address/prefix-length"): the
/// prefix decides which destinations are on the link (RFC 4861 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Cidr {
    addr: Ipv6Addr,
    prefix_len: u8,
}

impl Ipv6Cidr {
    /// `addr/prefix_len`; `None` when the prefix is longer than 128 bits.
    pub const fn new(addr: Ipv6Addr, prefix_len: u8) -> Option<Ipv6Cidr> {
        if prefix_len > 128 {
            return None;
        }
        Some(Ipv6Cidr { addr, prefix_len })
    }
    /// The address.
    pub const fn addr(&self) -> Ipv6Addr {
        self.addr
    }
    /// The prefix length.
    pub const fn prefix_len(&self) -> u8 {
        self.prefix_len
    }
    /// Whether `other` shares the first `prefix_len` bits with this address.
    pub fn contains(&self, other: Ipv6Addr) -> bool {
        let mask = match self.prefix_len {
            0 => 0,
            n => u128::MAX << (128 - u32::from(n)),
        };
        u128::from(self.addr) & mask == u128::from(other) & mask
    }
}

impl core::fmt::Display for Ipv6Cidr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// A checked view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` without checking its length (use `new_checked` for untrusted input).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Checks: at least 40 bytes and `HEADER_LEN + payload_len` within the buffer. Version is
    /// checked by [`Ipv6Repr::parse`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that every accessor is in bounds (what `new_checked` runs).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word0(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The version field (6 for IPv6).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    /// Traffic class: DSCP and ECN bits (RFC 8200 §7).
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// The ECN codepoint in the traffic class (RFC 3168 §5).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_tos(self.traffic_class())
    }
    /// The 20-bit flow label (RFC 6437).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }
    /// Payload length: bytes after the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::LENGTH.start], b[field::LENGTH.start + 1]])
    }
    /// The first next-header value (an extension header or the upper layer).
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NEXT_HEADER])
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Ipv6Addr::from(a)
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Ipv6Addr::from(a)
    }
    /// The bytes after the fixed header, cut at `payload_len`.
    pub fn payload(&self) -> &[u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        self.buffer.as_ref().get(HEADER_LEN..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the payload length field.
    pub fn set_payload_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&value.to_be_bytes());
    }
    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }
    /// Sets the ECN codepoint, keeping the DSCP and the flow label.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = self.buffer.as_mut();
        // The traffic class straddles bytes 0 and 1: its ECN bits are bits 4-5 of byte 1.
        b[1] = (b[1] & !0x30) | (ecn.bits() << 4);
    }
    /// The bytes after the fixed header, cut at `payload_len`.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..end)
            .unwrap_or(&mut [])
    }
}

/// A parsed IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// The first next-header value.
    pub next_header: IpProtocol,
    /// Bytes after the fixed header (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// The ECN codepoint (RFC 3168 §5).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_tos(self.traffic_class)
    }
    /// Sets the ECN codepoint, keeping the DSCP.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        self.traffic_class = ecn.with_tos(self.traffic_class);
    }

    /// Parses a checked packet. Version != 6 -> `Unsupported`; a zero payload length (a
    /// jumbogram, RFC 2675) -> `Unsupported`. A multicast source is `Malformed`
    /// (RFC 4291 §2.7: "must not be used as source addresses").
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        p.check_len()?;
        if p.version() != 6 {
            return Err(Error::Unsupported);
        }
        if p.src_addr().is_multicast() {
            return Err(Error::Malformed);
        }
        Ok(Ipv6Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: usize::from(p.payload_len()),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }

    /// Header bytes `emit` writes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Bytes `emit` writes plus the payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the 40-byte fixed header into the front of `buf`. Fails with `BadLength` when
    /// the payload length does not fit 16 bits (a GSO super-segment's field is rewritten per
    /// segment by the segmenter, so emit it with a per-segment length).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = u16::try_from(self.payload_len).map_err(|_| Error::BadLength)?;
        let b = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        let w0 =
            (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xf_ffff);
        b[field::VER_TC_FLOW].copy_from_slice(&w0.to_be_bytes());
        b[field::LENGTH].copy_from_slice(&len.to_be_bytes());
        b[field::NEXT_HEADER] = u8::from(self.next_header);
        b[field::HOP_LIMIT] = self.hop_limit;
        b[field::SRC].copy_from_slice(&self.src.octets());
        b[field::DST].copy_from_slice(&self.dst.octets());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src: "2001:2::1".parse().unwrap(),
            dst: "2001:2::2".parse().unwrap(),
            next_header: IpProtocol::Tcp,
            payload_len: 4,
            hop_limit: 64,
            traffic_class: 0xb8 | 0b10,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn emit_then_parse_round_trips() {
        let r = repr();
        let mut buf = vec![0u8; r.buffer_len() + 6]; // trailing Ethernet padding
        r.emit(&mut buf).unwrap();
        assert_eq!(buf[0] >> 4, 6);
        let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p).unwrap(), r);
        assert_eq!(p.payload().len(), 4, "padding is not payload");
        assert_eq!(p.ecn(), Ecn::Ect0);
    }

    #[test]
    fn known_bytes() {
        // Version 6, TC 0, flow 0, length 8, UDP, hop limit 255, ::1 -> ::1.
        let mut b = [0u8; 48];
        b[0] = 0x60;
        b[5] = 8;
        b[6] = 17;
        b[7] = 255;
        b[23] = 1;
        b[39] = 1;
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(r.src, Ipv6Addr::LOCALHOST);
        assert_eq!(r.next_header, IpProtocol::Udp);
        assert_eq!(r.payload_len, 8);
        assert_eq!(r.hop_limit, 255);
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert_eq!(
            Ipv6Packet::new_checked(&[0x60u8; 39][..]).unwrap_err(),
            Error::Truncated
        );
        let mut b = [0u8; 40];
        b[0] = 0x60;
        b[5] = 1; // says one payload byte, has none
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
        b[5] = 0;
        b[0] = 0x40;
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p).unwrap_err(), Error::Unsupported);
        b[0] = 0x60;
        b[8] = 0xff; // ff00::/8 source
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn set_ecn_keeps_dscp_and_flow_label() {
        let r = repr();
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
        p.set_ecn(Ecn::Ce);
        assert_eq!(p.ecn(), Ecn::Ce);
        assert_eq!(p.traffic_class() & !0b11, 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
    }

    #[test]
    fn multicast_groups_and_prefixes() {
        let a: Ipv6Addr = "2001:2:0:1::4567:89ab".parse().unwrap();
        // RFC 4291 §2.7.1: low 24 bits appended to FF02::1:FF00:0/104.
        assert_eq!(
            solicited_node(a),
            "ff02::1:ff67:89ab".parse::<Ipv6Addr>().unwrap()
        );
        assert!(is_solicited_node(solicited_node(a)));
        assert!(!is_solicited_node(LINK_LOCAL_ALL_NODES));
        assert_eq!(multicast_scope(LINK_LOCAL_ALL_NODES), 2);
        assert!(is_link_local("fe80::1".parse().unwrap()));
        assert!(is_link_local("febf::1".parse().unwrap()));
        assert!(!is_link_local("fec0::1".parse().unwrap()));
        assert_eq!(
            link_local([0, 0x6e, 0x66, 0xff, 0xfe, 0, 0, 2]),
            "fe80::6e:66ff:fe00:2".parse::<Ipv6Addr>().unwrap()
        );
        let c = Ipv6Cidr::new(a, 64).unwrap();
        assert!(c.contains("2001:2:0:1::1".parse().unwrap()));
        assert!(!c.contains("2001:2:0:2::1".parse().unwrap()));
        assert!(Ipv6Cidr::new(a, 0).unwrap().contains(Ipv6Addr::LOCALHOST));
        assert!(Ipv6Cidr::new(a, 128).unwrap().contains(a));
        assert!(Ipv6Cidr::new(a, 129).is_none());
        assert_eq!(c.to_string(), "2001:2:0:1::4567:89ab/64");
    }

    #[test]
    fn oversized_payload_is_refused_on_emit() {
        let mut r = repr();
        r.payload_len = 70_000;
        assert_eq!(r.emit(&mut [0u8; 40]).unwrap_err(), Error::BadLength);
    }
}
