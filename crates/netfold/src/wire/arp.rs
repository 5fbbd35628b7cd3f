//! ARP for Ethernet/IPv4 (RFC 826). Other hardware or protocol address types are
//! `Error::Unsupported`: netfold only resolves IPv4 next hops on Ethernet.
//!
//! Layout (RFC 826 "Packet format"): ar$hrd (2), ar$pro (2), ar$hln (1), ar$pln (1), ar$op (2),
//! ar$sha (hln), ar$spa (pln), ar$tha (hln), ar$tpa (pln). For Ethernet/IPv4 that is 28 bytes.
#![warn(missing_docs)]

use super::ethernet::EthernetAddress;
use super::{Error, Ipv4Addr, Result};

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// Bytes of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;
const HTYPE_ETHERNET: u16 = 1;
const PTYPE_IPV4: u16 = 0x0800;

/// ARP opcode (RFC 826: ares_op$REQUEST = 1, ares_op$REPLY = 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// ares_op$REQUEST (1).
    Request,
    /// ares_op$REPLY (2).
    Reply,
}

/// A checked view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer` without checking its length (use `new_checked` for untrusted input).
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }
    /// Checks the buffer holds 28 bytes; address types are checked by [`ArpRepr::parse`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        Ok(ArpPacket { buffer })
    }
    /// Gives back the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[r.start], b[r.start + 1]])
    }
    fn ip_at(&self, r: core::ops::Range<usize>) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[r];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    fn mac_at(&self, r: core::ops::Range<usize>) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[r]);
        EthernetAddress(a)
    }
    /// ar$hrd (1 = Ethernet).
    pub fn hardware_type(&self) -> u16 {
        self.u16_at(field::HTYPE)
    }
    /// ar$pro (0x0800 = IPv4).
    pub fn protocol_type(&self) -> u16 {
        self.u16_at(field::PTYPE)
    }
    /// ar$hln.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    /// ar$pln.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    /// ar$op.
    pub fn operation(&self) -> u16 {
        self.u16_at(field::OPER)
    }
    /// ar$sha.
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        self.mac_at(field::SHA)
    }
    /// ar$spa.
    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        self.ip_at(field::SPA)
    }
    /// ar$tha.
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        self.mac_at(field::THA)
    }
    /// ar$tpa.
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        self.ip_at(field::TPA)
    }
}

/// A parsed Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Request or reply.
    pub op: ArpOperation,
    /// Sender hardware address.
    pub source_hw: EthernetAddress,
    /// Sender protocol address.
    pub source_ip: Ipv4Addr,
    /// Target hardware address (zero in requests).
    pub target_hw: EthernetAddress,
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// RFC 826: "?Do I have the hardware type in ar$hrd? ... ?Do I speak the protocol in
    /// ar$pro?" — anything but Ethernet (1) / IPv4 (0x0800) with 6/4-byte addresses is
    /// `Unsupported`; an unknown opcode likewise.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Result<ArpRepr> {
        if p.hardware_type() != HTYPE_ETHERNET
            || p.protocol_type() != PTYPE_IPV4
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        let op = match p.operation() {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            _ => return Err(Error::Unsupported),
        };
        Ok(ArpRepr {
            op,
            source_hw: p.source_hardware_addr(),
            source_ip: p.source_protocol_addr(),
            target_hw: p.target_hardware_addr(),
            target_ip: p.target_protocol_addr(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the 28-byte packet into the front of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..PACKET_LEN).ok_or(Error::Truncated)?;
        b[field::HTYPE].copy_from_slice(&HTYPE_ETHERNET.to_be_bytes());
        b[field::PTYPE].copy_from_slice(&PTYPE_IPV4.to_be_bytes());
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
        let op: u16 = match self.op {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
        };
        b[field::OPER].copy_from_slice(&op.to_be_bytes());
        b[field::SHA].copy_from_slice(&self.source_hw.0);
        b[field::SPA].copy_from_slice(&self.source_ip.octets());
        b[field::THA].copy_from_slice(&self.target_hw.0);
        b[field::TPA].copy_from_slice(&self.target_ip.octets());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr() -> ArpRepr {
        ArpRepr {
            op: ArpOperation::Request,
            source_hw: EthernetAddress([2, 0, 0, 0, 0, 1]),
            source_ip: Ipv4Addr::new(198, 18, 0, 1),
            target_hw: EthernetAddress([0; 6]),
            target_ip: Ipv4Addr::new(198, 18, 0, 2),
        }
    }

    #[test]
    fn round_trip_matches_smoltcp() {
        let r = repr();
        let mut buf = [0u8; 28];
        r.emit(&mut buf).unwrap();
        assert_eq!(
            ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()).unwrap(),
            r
        );
        use smoltcp::wire as s;
        let sr = s::ArpRepr::EthernetIpv4 {
            operation: s::ArpOperation::Request,
            source_hardware_addr: s::EthernetAddress(r.source_hw.0),
            source_protocol_addr: r.source_ip,
            target_hardware_addr: s::EthernetAddress(r.target_hw.0),
            target_protocol_addr: r.target_ip,
        };
        let mut sbuf = [0u8; 28];
        sr.emit(&mut s::ArpPacket::new_unchecked(&mut sbuf[..]));
        assert_eq!(buf, sbuf);
    }

    #[test]
    fn other_types_unsupported_and_short_truncated() {
        let mut buf = [0u8; 28];
        repr().emit(&mut buf).unwrap();
        buf[1] = 6; // IEEE 802 hardware type
        assert_eq!(
            ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()),
            Err(Error::Unsupported)
        );
        assert_eq!(
            ArpPacket::new_checked(&buf[..27]).unwrap_err(),
            Error::Truncated
        );
    }
}
