//! IPv4 header (RFC 791 §3.1).
//!
//! Options (IHL > 5) are skipped on parse and never emitted. `total_length` bounds the payload,
//! so Ethernet padding after a short packet is ignored. The fragment offset in [`Ipv4Repr`] is in
//! bytes (the wire field counts 8-byte units).
#![warn(missing_docs)]

use super::{Error, IpProtocol, Ipv4Addr, Result};
use crate::mem::checksum;

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// Longest IPv4 header: IHL is 4 bits of 32-bit words (RFC 791 §3.1).
pub const MAX_HEADER_LEN: usize = 60;
/// Longest IPv4 packet: Total Length is 16 bits (RFC 791 §3.1).
pub const MAX_PACKET_LEN: usize = 65_535;
/// Fragment offsets count 8-byte blocks (RFC 791 §3.1 "Fragment Offset"), so every fragment
/// but the last carries a multiple of this many payload bytes.
pub const FRAGMENT_UNIT: usize = 8;

/// A checked view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` without checking its length (use `new_checked` for untrusted input).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Checks: at least 20 bytes; IHL >= 5 and the header fits; total_length >= header length
    /// and <= the buffer. Version is checked by [`Ipv4Repr::parse`].
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
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::BadLength);
        }
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(Error::BadLength);
        }
        if len < hl || len < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives back the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        u16::from_be_bytes([self.b()[r.start], self.b()[r.start + 1]])
    }

    /// Version field (4).
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0f) * 4
    }
    /// DSCP and ECN bits (the former TOS octet).
    pub fn dscp_ecn(&self) -> u8 {
        self.b()[field::DSCP_ECN]
    }
    /// The ECN codepoint (RFC 3168 §5: the two low bits of the former TOS octet).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_tos(self.dscp_ecn())
    }
    /// Total length: header plus payload.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }
    /// DF flag.
    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x4000 != 0
    }
    /// MF flag.
    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x2000 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLG_OFF) & 0x1fff) << 3
    }
    /// RFC 791: a packet is a fragment if MF is set or the offset is non-zero.
    pub fn is_fragment(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x3fff != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }
    /// Payload protocol.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.b()[field::PROTOCOL])
    }
    /// The checksum field as received.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    /// The options bytes (empty when IHL = 5).
    pub fn options(&self) -> &[u8] {
        self.b().get(HEADER_LEN..self.header_len()).unwrap_or(&[])
    }
    /// RFC 791 §3.1 "Header Checksum": the one's-complement sum over the header, checksum
    /// field included, is all ones.
    pub fn verify_checksum(&self) -> bool {
        match self.b().get(..self.header_len()) {
            Some(h) => checksum(h) == 0xffff,
            None => false,
        }
    }
    /// The payload, bounded by total_length (trailing link padding excluded).
    pub fn payload(&self) -> &[u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        self.b().get(h..t).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Recomputes the header checksum.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len().min(self.buffer.as_ref().len());
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = !checksum(&b[..hl]);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
    /// Sets the ECN codepoint, keeping the DSCP (the checksum must be refilled).
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = ecn.with_tos(*b);
    }
    /// Sets the TTL (the checksum must be refilled).
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }
    /// Sets the total length (header + payload, RFC 791 §3.1); the checksum must be refilled.
    pub fn set_total_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&value.to_be_bytes());
    }
    /// Sets the identification (RFC 791 §3.1, RFC 6864); the checksum must be refilled.
    pub fn set_ident(&mut self, value: u16) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&value.to_be_bytes());
    }
    /// Sets the header checksum field as given (already complemented).
    pub fn set_header_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }
    /// The bytes after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        self.buffer.as_mut().get_mut(h..t).unwrap_or(&mut [])
    }
}

/// The ECN field of the IP header (RFC 3168 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// 00: the sender does not use ECN.
    #[default]
    NotEct,
    /// 01: ECN-capable transport, ECT(1).
    Ect1,
    /// 10: ECN-capable transport, ECT(0) (what RFC 3168 senders use).
    Ect0,
    /// 11: congestion experienced (set by a router instead of dropping an ECT packet).
    Ce,
}

impl Ecn {
    /// The codepoint in a TOS/traffic-class octet (its two low bits).
    pub fn from_tos(tos: u8) -> Ecn {
        match tos & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
    /// The two bits of this codepoint.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }
    /// `tos` with its ECN bits replaced by this codepoint (the DSCP is kept).
    pub fn with_tos(self, tos: u8) -> u8 {
        (tos & !0b11) | self.bits()
    }
    /// ECT(0) or ECT(1): a router may mark it CE instead of dropping it.
    pub fn is_ect(self) -> bool {
        matches!(self, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// A parsed IPv4 header (options dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// Bytes after the header, as given by total_length.
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP and ECN bits.
    pub dscp_ecn: u8,
    /// Identification (groups the fragments of one datagram).
    pub ident: u16,
    /// DF: do not fragment.
    pub dont_frag: bool,
    /// MF: more fragments follow.
    pub more_frags: bool,
    /// Offset of this fragment's data in the original datagram, in bytes (multiple of 8).
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// The ECN codepoint (RFC 3168 §5).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_tos(self.dscp_ecn)
    }
    /// Sets the ECN codepoint, keeping the DSCP.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        self.dscp_ecn = ecn.with_tos(self.dscp_ecn);
    }

    /// Parses a checked packet. Version != 4 -> `Unsupported`; with `verify_checksum`, a bad
    /// header checksum -> `BadChecksum`. The reserved flag bit (RFC 791: "must be zero") is
    /// ignored, as Linux does.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>, verify_checksum: bool) -> Result<Ipv4Repr> {
        p.check_len()?;
        if p.version() != 4 {
            return Err(Error::Unsupported);
        }
        if verify_checksum && !p.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        Ok(Ipv4Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: usize::from(p.total_len()) - p.header_len(),
            ttl: p.ttl(),
            dscp_ecn: p.dscp_ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
        })
    }

    /// MF set or a non-zero offset (RFC 791 §2.3).
    pub fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// Header bytes `emit` writes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the 20-byte header (no options) into the front of `buf`. With `fill_checksum`
    /// the header checksum is computed, otherwise left zero (offload). Fails with `BadLength`
    /// when the total length does not fit 16 bits or the offset is not a multiple of 8.
    #[inline(always)]
    pub fn emit(&self, buf: &mut [u8], fill_checksum: bool) -> Result<()> {
        let total = u16::try_from(HEADER_LEN + self.payload_len).map_err(|_| Error::BadLength)?;
        if self.frag_offset & 7 != 0 {
            return Err(Error::BadLength);
        }
        let b = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        b[field::VER_IHL] = 0x45;
        b[field::DSCP_ECN] = self.dscp_ecn;
        b[field::LENGTH].copy_from_slice(&total.to_be_bytes());
        b[field::IDENT].copy_from_slice(&self.ident.to_be_bytes());
        let mut ff = self.frag_offset >> 3;
        if self.dont_frag {
            ff |= 0x4000;
        }
        if self.more_frags {
            ff |= 0x2000;
        }
        b[field::FLG_OFF].copy_from_slice(&ff.to_be_bytes());
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = u8::from(self.protocol);
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        b[field::SRC].copy_from_slice(&self.src.octets());
        b[field::DST].copy_from_slice(&self.dst.octets());
        if fill_checksum {
            let c = !checksum(b);
            b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            protocol: IpProtocol::Udp,
            payload_len: 8,
            ttl: 64,
            dscp_ecn: 0,
            ident: 0x1234,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    #[test]
    fn round_trip_and_checksum() {
        let r = repr();
        let mut buf = [0u8; 28];
        r.emit(&mut buf, true).unwrap();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p, true).unwrap(), r);
        buf[8] = 63;
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p, true), Err(Error::BadChecksum));
        assert!(Ipv4Repr::parse(&p, false).is_ok());
    }

    #[test]
    fn matches_smoltcp_bytes() {
        use smoltcp::phy::ChecksumCapabilities;
        use smoltcp::wire as s;
        let r = repr();
        let sr = s::Ipv4Repr {
            src_addr: r.src,
            dst_addr: r.dst,
            next_header: s::IpProtocol::Udp,
            payload_len: 8,
            hop_limit: 64,
        };
        let mut sbuf = [0u8; 28];
        sr.emit(
            &mut s::Ipv4Packet::new_unchecked(&mut sbuf[..]),
            &ChecksumCapabilities::default(),
        );
        // smoltcp picks its own ident/DF; copy those so the rest of the header is compared.
        let sp = s::Ipv4Packet::new_checked(&sbuf[..]).unwrap();
        let mut mine = r;
        mine.ident = sp.ident();
        mine.dont_frag = sp.dont_frag();
        let mut buf = [0u8; 28];
        mine.emit(&mut buf, true).unwrap();
        assert_eq!(&buf[..20], &sbuf[..20]);
    }

    #[test]
    fn options_padding_and_bad_lengths() {
        // IHL = 6 (4 option bytes), total 28, plus 4 bytes of link padding.
        let mut buf = [0u8; 32];
        repr().emit(&mut buf, false).unwrap();
        buf[0] = 0x46;
        buf[2..4].copy_from_slice(&28u16.to_be_bytes());
        let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        let r = Ipv4Repr::parse(&p, true).unwrap();
        assert_eq!(r.payload_len, 4);
        assert_eq!(p.payload().len(), 4);
        assert_eq!(p.options().len(), 4);

        let mut bad = buf;
        bad[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::BadLength
        );
        let mut bad = buf;
        bad[2..4].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::BadLength
        );
        let mut bad = buf;
        bad[2..4].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = buf;
        bad[0] = 0x65;
        let p = Ipv4Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p, false), Err(Error::Unsupported));
    }

    #[test]
    fn fragment_fields() {
        let mut r = repr();
        r.dont_frag = false;
        r.more_frags = true;
        r.frag_offset = 1480;
        let mut buf = [0u8; 28];
        r.emit(&mut buf, true).unwrap();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(p.is_fragment());
        assert_eq!(Ipv4Repr::parse(&p, true).unwrap(), r);
        r.frag_offset = 3;
        assert_eq!(r.emit(&mut buf, true), Err(Error::BadLength));
    }

    #[test]
    fn pseudo_header_sum_known_value() {
        // Sum of 198.18.0.1 + 198.18.0.2 + 17 + 8, computed by hand.
        let s = crate::wire::checksum::pseudo_header(
            Ipv4Addr::new(198, 18, 0, 1),
            Ipv4Addr::new(198, 18, 0, 2),
            IpProtocol::Udp,
            8,
        );
        let expect: u32 = 0xc612 + 0x0001 + 0xc612 + 0x0002 + 17 + 8;
        let folded = ((expect & 0xffff) + (expect >> 16)) as u16;
        assert_eq!(s, folded);
        assert_eq!(crate::wire::checksum::add(0xffff, 1), 1);
    }
}
