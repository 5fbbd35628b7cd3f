//! Ethernet II frames (IEEE 802.3 "DIX" framing) with an optional IEEE 802.1Q VLAN tag.
//!
//! Layout: destination MAC (6), source MAC (6), EtherType (2), payload. With an 802.1Q tag the
//! EtherType field holds 0x8100, followed by the 16-bit TCI (PCP/DEI/VID) and the real
//! EtherType, so the header is 18 bytes. Only one tag is understood; a second tag (QinQ) leaves
//! `ethertype` as `Vlan` and the caller drops the frame as unsupported.
#![warn(missing_docs)]

use super::{Error, Result};
use core::fmt;

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// Copies the address out of a 6-byte slice; `None` when the slice has another length.
    pub fn from_bytes(b: &[u8]) -> Option<EthernetAddress> {
        <[u8; 6]>::try_from(b).ok().map(EthernetAddress)
    }
    /// The six octets.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }
    /// ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
    /// The I/G bit (least significant bit of the first octet) is set: group address.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }
    /// The I/G bit is clear: an individual address.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
    /// The U/L bit: locally administered address.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }

    /// The MAC an IPv6 multicast packet is sent to. RFC 2464 §7: "An IPv6 packet with a
    /// multicast destination address DST, consisting of the sixteen octets DST\[1\] through
    /// DST\[16\], is transmitted to the Ethernet multicast address whose first two octets are
    /// the value 3333 hexadecimal and whose last four octets are the last four octets of DST."
    pub fn from_ipv6_multicast(dst: std::net::Ipv6Addr) -> EthernetAddress {
        let d = dst.octets();
        EthernetAddress([0x33, 0x33, d[12], d[13], d[14], d[15]])
    }

    /// The modified EUI-64 interface identifier of this MAC (RFC 2464 §4, RFC 4291
    /// Appendix A): FFFE inserted between the third and fourth octets, and the
    /// universal/local bit inverted ("the U/L bit ... is inverted when forming an IPv6
    /// interface identifier").
    pub const fn ipv6_interface_id(&self) -> [u8; 8] {
        let m = self.0;
        [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// The EtherType values netfold dispatches on (IEEE "EtherType" registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// IPv4, 0x0800 (RFC 894).
    Ipv4,
    /// ARP, 0x0806 (RFC 826).
    Arp,
    /// IPv6, 0x86DD (RFC 2464).
    Ipv6,
    /// IEEE 802.1Q customer VLAN tag.
    Vlan,
    /// Any other value.
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(t: EtherType) -> u16 {
        match t {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Vlan => 0x8100,
            EtherType::Unknown(v) => v,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const TCI: Range<usize> = 14..16;
    pub const INNER_ETHERTYPE: Range<usize> = 16..18;
}

/// Untagged Ethernet II header length.
pub const HEADER_LEN: usize = 14;
/// Header length with one 802.1Q tag.
pub const VLAN_HEADER_LEN: usize = 18;

/// The VLAN identifier of an 802.1Q tag control information word: its low 12 bits (IEEE
/// 802.1Q §9.6; the top 4 bits are the priority and DEI). 0 means "priority tag only, no VLAN".
pub const fn vlan_id(tci: u16) -> u16 {
    tci & 0x0fff
}

/// A checked view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` without checking its length (use `new_checked` for untrusted input).
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` after checking it holds the whole header (14 bytes, or 18 when the
    /// EtherType says an 802.1Q tag follows). After this no accessor panics.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks that every accessor is in bounds (what `new_checked` runs).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives back the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[r.start], b[r.start + 1]])
    }

    /// Destination MAC.
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        EthernetAddress(a)
    }
    /// Source MAC.
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        EthernetAddress(a)
    }
    /// The outer EtherType field (0x8100 for a tagged frame).
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(self.u16_at(field::ETHERTYPE))
    }
    /// The 802.1Q TCI when the frame is tagged.
    pub fn vlan_tci(&self) -> Option<u16> {
        match self.ethertype() {
            EtherType::Vlan if self.buffer.as_ref().len() >= VLAN_HEADER_LEN => {
                Some(self.u16_at(field::TCI))
            }
            _ => None,
        }
    }
    /// The EtherType of the payload (after the tag, if any).
    pub fn payload_ethertype(&self) -> EtherType {
        match self.ethertype() {
            EtherType::Vlan if self.buffer.as_ref().len() >= VLAN_HEADER_LEN => {
                EtherType::from(self.u16_at(field::INNER_ETHERTYPE))
            }
            t => t,
        }
    }
    /// 14, or 18 with an 802.1Q tag.
    pub fn header_len(&self) -> usize {
        let b = self.buffer.as_ref();
        if b.len() >= HEADER_LEN && self.ethertype() == EtherType::Vlan {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }
    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(self.header_len()..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }
    /// Sets the source MAC.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }
    /// Sets the outer EtherType field.
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(t).to_be_bytes());
    }
    /// The bytes after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        let b = self.buffer.as_mut();
        let start = h.min(b.len());
        &mut b[start..]
    }
}

/// A parsed Ethernet header. `ethertype` is the payload's type (inside the tag, if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC.
    pub src: EthernetAddress,
    /// Destination MAC.
    pub dst: EthernetAddress,
    /// EtherType of the payload (inside the 802.1Q tag, if any).
    pub ethertype: EtherType,
    /// The 802.1Q tag control information (PCP/DEI/VID) if the frame carried one tag.
    pub vlan: Option<u16>,
}

impl EthernetRepr {
    /// Parses a checked frame, skipping one 802.1Q tag.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src: frame.src_addr(),
            dst: frame.dst_addr(),
            ethertype: frame.payload_ethertype(),
            vlan: frame.vlan_tci(),
        })
    }

    /// The VLAN identifier of the tag (see [`vlan_id`]), if the frame carried one.
    pub fn vlan_id(&self) -> Option<u16> {
        self.vlan.map(vlan_id)
    }

    /// Header bytes `emit` writes.
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header into the first `header_len()` bytes of `buf`.
    #[inline(always)]
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let h = self.header_len();
        let b = buf.get_mut(..h).ok_or(Error::Truncated)?;
        b[field::DST].copy_from_slice(&self.dst.0);
        b[field::SRC].copy_from_slice(&self.src.0);
        match self.vlan {
            Some(tci) => {
                b[field::ETHERTYPE].copy_from_slice(&0x8100u16.to_be_bytes());
                b[field::TCI].copy_from_slice(&tci.to_be_bytes());
                b[field::INNER_ETHERTYPE].copy_from_slice(&u16::from(self.ethertype).to_be_bytes());
            }
            None => {
                b[field::ETHERTYPE].copy_from_slice(&u16::from(self.ethertype).to_be_bytes());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_multicast_mac_and_interface_id() {
        // RFC 2464 §7's own example: FF02::1 -> 33-33-00-00-00-01.
        let all_nodes = "ff02::1".parse().unwrap();
        assert_eq!(
            EthernetAddress::from_ipv6_multicast(all_nodes),
            EthernetAddress([0x33, 0x33, 0, 0, 0, 1])
        );
        let sol = "ff02::1:ff12:3456".parse().unwrap();
        assert_eq!(
            EthernetAddress::from_ipv6_multicast(sol).0,
            [0x33, 0x33, 0xff, 0x12, 0x34, 0x56]
        );
        assert!(EthernetAddress::from_ipv6_multicast(sol).is_multicast());
        // RFC 4291 Appendix A: 34-56-78-9A-BC-DE -> 3656:78FF:FE9A:BCDE (U/L bit inverted).
        let mac = EthernetAddress([0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde]);
        assert_eq!(
            mac.ipv6_interface_id(),
            [0x36, 0x56, 0x78, 0xff, 0xfe, 0x9a, 0xbc, 0xde]
        );
    }

    const A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
    const B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);

    #[test]
    fn untagged_round_trip_and_smoltcp_bytes() {
        let r = EthernetRepr {
            src: A,
            dst: B,
            ethertype: EtherType::Ipv4,
            vlan: None,
        };
        let mut buf = [0u8; 14];
        r.emit(&mut buf).unwrap();
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&f).unwrap(), r);

        use smoltcp::wire as s;
        let sr = s::EthernetRepr {
            src_addr: s::EthernetAddress(A.0),
            dst_addr: s::EthernetAddress(B.0),
            ethertype: s::EthernetProtocol::Ipv4,
        };
        let mut sbuf = [0u8; 14];
        sr.emit(&mut s::EthernetFrame::new_unchecked(&mut sbuf[..]));
        assert_eq!(buf, sbuf);
    }

    #[test]
    fn vlan_tag_is_skipped() {
        let r = EthernetRepr {
            src: A,
            dst: EthernetAddress::BROADCAST,
            ethertype: EtherType::Arp,
            vlan: Some(0x2064),
        };
        let mut buf = [0u8; 20];
        r.emit(&mut buf).unwrap();
        assert_eq!(&buf[12..18], &[0x81, 0x00, 0x20, 0x64, 0x08, 0x06]);
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        assert_eq!(f.header_len(), 18);
        assert_eq!(f.payload().len(), 2);
        assert_eq!(EthernetRepr::parse(&f).unwrap(), r);
        // PCP 1, DEI 0, VID 0x064.
        assert_eq!(r.vlan_id(), Some(0x064));
        assert_eq!(vlan_id(0xf000), 0, "a priority tag carries no VLAN");
        // A tag without room for the TCI is truncated.
        assert_eq!(
            EthernetFrame::new_checked(&buf[..16]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn address_classes() {
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(A.is_unicast() && A.is_local());
        assert_eq!(A.to_string(), "02:00:00:00:00:01");
        for t in [
            EtherType::Ipv4,
            EtherType::Arp,
            EtherType::Ipv6,
            EtherType::Vlan,
        ] {
            assert_eq!(EtherType::from(u16::from(t)), t);
        }
        assert_eq!(u16::from(EtherType::Ipv6), 0x86dd);
        assert_eq!(
            EthernetFrame::new_checked(&[0u8; 13][..]).unwrap_err(),
            Error::Truncated
        );
    }
}
