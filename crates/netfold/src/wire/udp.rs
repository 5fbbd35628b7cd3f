//! UDP header (RFC 768): a checked view [`UdpPacket`] and the plain [`UdpRepr`].
//!
//! RFC 768 "Fields": the length counts header and data and is at least 8; the checksum covers
//! the IPv4 pseudo-header, header and data, and a transmitted 0 means "no checksum". A computed
//! checksum of 0 is therefore sent as all ones (0xffff).
#![warn(missing_docs)]

use super::checksum;
use super::tcp::PseudoHeader;
use super::{Error, IpProtocol, Result};
use crate::mem;

/// Byte ranges of the header (RFC 768 "Format").
mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;
/// Where the checksum field lies in the header (RFC 768), for code that must name it by
/// position (a virtio-net header's `csum_offset`).
pub const CHECKSUM_FIELD: core::ops::Range<usize> = field::CHECKSUM;

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// A read/write view of a UDP datagram in a byte buffer.
///
/// The buffer may be longer than the datagram (e.g. Ethernet padding after a short IPv4
/// packet): the length field bounds [`UdpPacket::payload`] and the checksum. After
/// [`UdpPacket::new_checked`] no accessor can panic; a view from [`UdpPacket::new_unchecked`] may
/// panic in the field accessors and setters if the buffer is shorter than 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` without any length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` after checking that the header fits (`Truncated`), the length field is at
    /// least 8 (`BadLength`) and it does not run past the buffer (`Truncated`).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// The checks of [`UdpPacket::new_checked`].
    pub fn check_len(&self) -> Result<()> {
        let buf_len = self.buffer.as_ref().len();
        if buf_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len > buf_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port (0 = none, RFC 768).
    pub fn src_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SRC_PORT])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::DST_PORT])
    }

    /// Length field: header plus data.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Checksum field as on the wire (0 = not computed).
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// The datagram (header + data) as bounded by the length field, clamped to the buffer so
    /// this stays in bounds even if a setter changed the length after the check.
    fn datagram(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        let end = usize::from(self.len()).min(data.len());
        &data[..end]
    }

    /// The data: bytes 8..length.
    pub fn payload(&self) -> &[u8] {
        self.datagram().get(HEADER_LEN..).unwrap_or(&[])
    }

    /// Verifies the checksum (RFC 768). A checksum field of 0 means the sender computed none
    /// and is accepted.
    pub fn verify_checksum(&self, ph: &PseudoHeader) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let datagram = self.datagram();
        let sum = checksum::add(
            ph.sum(IpProtocol::Udp, u32::from(self.len())),
            mem::checksum(datagram),
        );
        sum == 0xffff
    }

    /// Like [`UdpPacket::verify_checksum`], with the data's folded sum supplied by a caller
    /// that computed it while copying the data out, so the data is read once. The 8-byte header
    /// keeps the data on an even offset (RFC 1071 §2(B)). A zero checksum field is accepted.
    pub fn verify_checksum_with_payload_sum(&self, ph: &PseudoHeader, payload_sum: u16) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let header = self.datagram().get(..HEADER_LEN).unwrap_or(&[]);
        let sum = checksum::add(
            checksum::add(
                ph.sum(IpProtocol::Udp, u32::from(self.len())),
                mem::checksum(header),
            ),
            payload_sum,
        );
        sum == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> UdpPacket<&'a T> {
    /// The data with the lifetime of the underlying buffer rather than of the view.
    pub fn into_payload(self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        let end = data
            .get(field::LENGTH)
            .map_or(0, |b| usize::from(be16(b)))
            .min(data.len());
        data.get(HEADER_LEN..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        self.buffer.as_mut()[field::DST_PORT].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the length field.
    pub fn set_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// The data (bounded by the length field), writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        let data = self.buffer.as_mut();
        let end = len.min(data.len());
        data.get_mut(HEADER_LEN..end).unwrap_or(&mut [])
    }

    /// Computes and stores the checksum over pseudo-header, header and data (as bounded by the
    /// length field). A computed 0 is stored as 0xffff (RFC 768: 0 means "none").
    pub fn fill_checksum(&mut self, ph: &PseudoHeader) {
        self.set_checksum(0);
        let sum = checksum::add(
            ph.sum(IpProtocol::Udp, u32::from(self.len())),
            mem::checksum(self.datagram()),
        );
        self.set_checksum(nonzero(checksum::finish(sum)));
    }
}

/// RFC 768: "If the computed checksum is zero, it is transmitted as all ones".
fn nonzero(csum: u16) -> u16 {
    if csum == 0 {
        0xffff
    } else {
        csum
    }
}

/// A parsed UDP header. The data is `packet.payload()`; the length is implied by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UdpRepr {
    /// Source port (0 = none, RFC 768).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Parses a checked datagram. With `verify_checksum` a nonzero checksum field must verify
    /// (`BadChecksum`); a zero field means "no checksum" (RFC 768) and is accepted. Destination
    /// port 0 is reserved and is `Malformed`; source port 0 is allowed ("no reply port").
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &UdpPacket<&T>,
        ph: &PseudoHeader,
        verify_checksum: bool,
    ) -> Result<UdpRepr> {
        // A view built with new_unchecked must not make the accessors below panic.
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(ph) {
            return Err(Error::BadChecksum);
        }
        if packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
        })
    }

    /// Header bytes: always 8.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus `payload_len`.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes ports and length for a datagram carrying `payload_len` bytes; the checksum field
    /// is set to 0 and the data is untouched. `BadLength` if the datagram would exceed 65535
    /// bytes; `Truncated` if the packet buffer is shorter than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        packet: &mut UdpPacket<&mut T>,
        payload_len: usize,
    ) -> Result<()> {
        let len = u16::try_from(HEADER_LEN + payload_len).map_err(|_| Error::BadLength)?;
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.set_checksum(0);
        Ok(())
    }

    /// Writes header and checksum into the front of `header_buf` for data that lies elsewhere
    /// and whose folded sum (`mem::checksum` or a fused copy+checksum kernel) is known.
    /// Returns 8.
    pub fn emit_with_payload_sum(
        &self,
        header_buf: &mut [u8],
        payload_len: usize,
        payload_sum: u16,
        ph: &PseudoHeader,
    ) -> Result<usize> {
        let header = header_buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        let mut packet = UdpPacket::new_unchecked(&mut *header);
        self.emit(&mut packet, payload_len)?;
        let len = u32::from(packet.len());
        let sum = checksum::add(
            checksum::add(ph.sum(IpProtocol::Udp, len), mem::checksum(header)),
            payload_sum,
        );
        UdpPacket::new_unchecked(header).set_checksum(nonzero(checksum::finish(sum)));
        Ok(HEADER_LEN)
    }

    /// Writes the whole datagram (header, `payload`, checksum) into the front of `buf`, copying
    /// and summing the data in one pass. Returns the datagram length.
    pub fn emit_with_checksum(
        &self,
        buf: &mut [u8],
        payload: &[u8],
        ph: &PseudoHeader,
    ) -> Result<usize> {
        let total = HEADER_LEN + payload.len();
        if total > usize::from(u16::MAX) {
            return Err(Error::BadLength);
        }
        let datagram = buf.get_mut(..total).ok_or(Error::Truncated)?;
        let (header, body) = datagram.split_at_mut(HEADER_LEN);
        let payload_sum = mem::copy_with_checksum(body, payload);
        self.emit_with_payload_sum(header, payload.len(), payload_sum, ph)?;
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{IpAddr, Ipv4Addr};
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire as s;

    const SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    const PH: PseudoHeader = PseudoHeader {
        src: IpAddr::V4(SRC),
        dst: IpAddr::V4(DST),
    };

    fn smoltcp_datagram(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
        let (sa, da) = (s::IpAddress::Ipv4(SRC), s::IpAddress::Ipv4(DST));
        let repr = s::UdpRepr { src_port, dst_port };
        let mut buf = vec![0u8; 8 + payload.len()];
        repr.emit(
            &mut s::UdpPacket::new_unchecked(&mut buf[..]),
            &sa,
            &da,
            payload.len(),
            |p| p.copy_from_slice(payload),
            &ChecksumCapabilities::default(),
        );
        buf
    }

    #[test]
    fn matches_smoltcp_bytes_both_ways() {
        for payload in [&b""[..], b"x", b"ping", b"an odd-length datagram"] {
            let theirs = smoltcp_datagram(5353, 53, payload);
            let repr = UdpRepr {
                src_port: 5353,
                dst_port: 53,
            };
            let mut ours = vec![0u8; repr.buffer_len(payload.len())];
            assert_eq!(
                repr.emit_with_checksum(&mut ours, payload, &PH),
                Ok(theirs.len())
            );
            assert_eq!(ours, theirs);
            let packet = UdpPacket::new_checked(&theirs[..]).unwrap();
            assert_eq!(UdpRepr::parse(&packet, &PH, true), Ok(repr));
            let payload_sum = mem::checksum(packet.payload());
            assert!(packet.verify_checksum_with_payload_sum(&PH, payload_sum));
            assert!(!packet.verify_checksum_with_payload_sum(&PH, payload_sum ^ 0x10));
            assert_eq!(packet.into_payload(), payload);
        }
    }

    #[test]
    fn known_vector() {
        // 198.18.0.1:1234 -> 198.18.0.2:5678 "hi", by hand: pseudo-header
        // 0xc612+0x0001+0xc612+0x0002+0x0011+0x000a = 0x18c42; header 0x04d2+0x162e+0x000a
        // = 0x1b0a; data 0x6869. Total 0x20fb5 folds to 0x0fb7; complement 0xf048.
        let expected = [0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0a, 0xf0, 0x48, b'h', b'i'];
        let repr = UdpRepr {
            src_port: 1234,
            dst_port: 5678,
        };
        let mut buf = [0u8; 10];
        repr.emit_with_checksum(&mut buf, b"hi", &PH).unwrap();
        assert_eq!(buf, expected);
    }

    #[test]
    fn computed_zero_is_sent_as_all_ones() {
        // Choose the source port so that the sum of everything else is 0xffff: the computed
        // checksum is then 0 and must go out as 0xffff (RFC 768).
        let repr = UdpRepr {
            src_port: 0,
            dst_port: 7,
        };
        let mut buf = [0u8; 8];
        repr.emit_with_checksum(&mut buf, &[], &PH).unwrap();
        let partial = checksum::add(
            checksum::pseudo_header(SRC, DST, IpProtocol::Udp, 8),
            mem::checksum(&[0, 0, 0, 7, 0, 8, 0, 0]),
        );
        let src_port = !partial; // partial + src_port = 0xffff
        let repr = UdpRepr {
            src_port,
            dst_port: 7,
        };
        repr.emit_with_checksum(&mut buf, &[], &PH).unwrap();
        let packet = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.checksum(), 0xffff);
        assert!(packet.verify_checksum(&PH));
        assert_eq!(UdpRepr::parse(&packet, &PH, true), Ok(repr));
    }

    #[test]
    fn zero_checksum_means_none() {
        let mut buf = smoltcp_datagram(1, 2, b"data");
        buf[6] = 0;
        buf[7] = 0;
        let packet = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(packet.verify_checksum(&PH));
        assert!(UdpRepr::parse(&packet, &PH, true).is_ok());
        buf[6] = 0x12;
        let packet = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(UdpRepr::parse(&packet, &PH, true), Err(Error::BadChecksum));
        assert!(UdpRepr::parse(&packet, &PH, false).is_ok());
    }

    #[test]
    fn length_field_bounds_payload_and_checksum() {
        let mut buf = smoltcp_datagram(1, 2, b"abc");
        buf.extend_from_slice(&[0xee; 6]); // link-layer padding after the datagram
        let packet = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.len(), 11);
        assert_eq!(packet.payload(), b"abc");
        assert!(packet.verify_checksum(&PH));
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        assert_eq!(p.payload_mut(), b"abc");
        p.fill_checksum(&PH);
        assert_eq!(
            UdpRepr::parse(&UdpPacket::new_unchecked(&buf[..]), &PH, true).map(|r| r.dst_port),
            Ok(2)
        );
    }

    #[test]
    fn rejects_bad_lengths_and_port_zero() {
        let buf = smoltcp_datagram(1, 2, b"abc");
        assert_eq!(
            UdpPacket::new_checked(&buf[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            UdpPacket::new_checked(&buf[..10]).unwrap_err(),
            Error::Truncated
        );
        let mut short = buf.clone();
        short[4] = 0;
        short[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&short[..]).unwrap_err(),
            Error::BadLength
        );
        // An unchecked view is checked again by parse.
        let view = UdpPacket::new_unchecked(&short[..]);
        assert_eq!(UdpRepr::parse(&view, &PH, false), Err(Error::BadLength));
        assert!(view.payload().is_empty());
        assert!(view.into_payload().is_empty());

        let to_zero = smoltcp_datagram(1, 0, b"");
        let packet = UdpPacket::new_checked(&to_zero[..]).unwrap();
        assert_eq!(UdpRepr::parse(&packet, &PH, true), Err(Error::Malformed));
    }

    #[test]
    fn emit_errors_instead_of_panicking() {
        let repr = UdpRepr {
            src_port: 1,
            dst_port: 2,
        };
        let mut small = [0u8; 7];
        assert_eq!(
            repr.emit(&mut UdpPacket::new_unchecked(&mut small[..]), 0),
            Err(Error::Truncated)
        );
        let mut header = [0u8; 8];
        assert_eq!(
            repr.emit(&mut UdpPacket::new_unchecked(&mut header[..]), 65528),
            Err(Error::BadLength)
        );
        assert_eq!(
            repr.emit_with_checksum(&mut header, b"x", &PH),
            Err(Error::Truncated)
        );
        let big = vec![0u8; 65528];
        let mut out = vec![0u8; 65536];
        assert_eq!(
            repr.emit_with_checksum(&mut out, &big, &PH),
            Err(Error::BadLength)
        );
        assert_eq!(repr.emit_with_checksum(&mut out, &big[1..], &PH), Ok(65535));
        assert_eq!(repr.header_len(), 8);
    }
}
