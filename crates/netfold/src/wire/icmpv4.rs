//! ICMPv4 (RFC 792): echo request/reply, destination unreachable (with the RFC 1191 next-hop
//! MTU for code 4) and time exceeded. Other message types parse as `Error::Unsupported`.
//!
//! Layout: type (1), code (1), checksum (2), 4 bytes whose meaning depends on the type
//! (ident/seq for echo; unused + next-hop MTU for unreachable), then data. For error messages
//! the data is the offending IP header plus at least its first 8 payload bytes (RFC 792; RFC
//! 1812 §4.3.2.3 allows more).
#![warn(missing_docs)]

use super::ipv4::{Ipv4Packet, Ipv4Repr};
use super::{Error, Result};
use crate::mem::checksum;

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const SEQ: Range<usize> = 6..8;
    pub const MTU: Range<usize> = 6..8;
}

/// ICMP header length (type, code, checksum, rest-of-header).
pub const HEADER_LEN: usize = 8;
/// Where the checksum field lies in the header (RFC 792), for code that must name it by
/// position.
pub const CHECKSUM_FIELD: core::ops::Range<usize> = field::CHECKSUM;

/// Message types this module handles (RFC 792).
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
}

/// Destination-unreachable codes (RFC 792, RFC 1122 §3.2.2.1).
pub mod unreach_code {
    /// Net unreachable.
    pub const NET: u8 = 0;
    /// Host unreachable.
    pub const HOST: u8 = 1;
    /// Protocol unreachable.
    pub const PROTOCOL: u8 = 2;
    /// Port unreachable.
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set (RFC 1191 adds the next-hop MTU).
    pub const FRAG_NEEDED: u8 = 4;
}

/// A checked view of an ICMPv4 message.
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps `buffer` without checking its length (use `new_checked` for untrusted input).
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }
    /// Checks the buffer holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Icmpv4Packet { buffer })
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
    /// Type field.
    pub fn msg_type(&self) -> u8 {
        self.b()[field::TYPE]
    }
    /// Code field.
    pub fn msg_code(&self) -> u8 {
        self.b()[field::CODE]
    }
    /// The checksum field as received.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }
    /// Echo identifier.
    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }
    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::SEQ)
    }
    /// RFC 1191 §4: next-hop MTU in the low 16 bits of the second word (code 4 only).
    pub fn next_hop_mtu(&self) -> u16 {
        self.u16_at(field::MTU)
    }
    /// Everything after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
    /// RFC 792: "The checksum is the 16-bit ones's complement of the one's complement sum of
    /// the ICMP message starting with the ICMP Type."
    pub fn verify_checksum(&self) -> bool {
        checksum(self.b()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Computes and stores the checksum (RFC 1071).
    pub fn fill_checksum(&mut self) {
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = !checksum(b);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
}

/// A parsed ICMPv4 message. Error messages carry the quoted IPv4 header and the quoted payload
/// bytes (at least 8; enough for TCP/UDP ports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo request (type 8).
    EchoRequest {
        /// Identifier chosen by the sender.
        ident: u16,
        /// Sequence number chosen by the sender.
        seq_no: u16,
        /// Echo data, or the quoted payload bytes of an error.
        data: &'a [u8],
    },
    /// Echo reply (type 0).
    EchoReply {
        /// Identifier chosen by the sender.
        ident: u16,
        /// Sequence number chosen by the sender.
        seq_no: u16,
        /// Echo data, or the quoted payload bytes of an error.
        data: &'a [u8],
    },
    /// Destination unreachable (type 3).
    DstUnreachable {
        /// Code field.
        code: u8,
        /// RFC 1191 next-hop MTU; meaningful for code 4, 0 otherwise (old routers send 0).
        next_hop_mtu: u16,
        /// Header of the quoted (offending) datagram.
        header: Ipv4Repr,
        /// Echo data, or the quoted payload bytes of an error.
        data: &'a [u8],
    },
    /// Time exceeded (type 11; code 0 in transit, 1 reassembly).
    TimeExceeded {
        /// Code field.
        code: u8,
        /// Header of the quoted (offending) datagram.
        header: Ipv4Repr,
        /// Echo data, or the quoted payload bytes of an error.
        data: &'a [u8],
    },
}

/// Parses the quoted datagram of an error message: a full IPv4 header then >= 8 bytes. The
/// quoted total_length describes the original datagram, so it is not checked against what is
/// quoted; `header.payload_len` keeps the original value, `data` is what was quoted.
fn parse_quote(data: &[u8]) -> Result<(Ipv4Repr, &[u8])> {
    if data.len() < super::ipv4::HEADER_LEN {
        return Err(Error::Truncated);
    }
    let ip = Ipv4Packet::new_unchecked(data);
    if ip.version() != 4 {
        return Err(Error::Unsupported);
    }
    let hl = ip.header_len();
    if hl < super::ipv4::HEADER_LEN {
        return Err(Error::BadLength);
    }
    let quoted = data.get(hl..).ok_or(Error::Truncated)?;
    if quoted.len() < 8 {
        return Err(Error::Truncated);
    }
    let header = Ipv4Repr {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        protocol: ip.protocol(),
        payload_len: usize::from(ip.total_len()).saturating_sub(hl),
        ttl: ip.ttl(),
        dscp_ecn: ip.dscp_ecn(),
        ident: ip.ident(),
        dont_frag: ip.dont_frag(),
        more_frags: ip.more_frags(),
        frag_offset: ip.frag_offset(),
    };
    Ok((header, quoted))
}

impl<'a> Icmpv4Repr<'a> {
    /// Parses a checked message; with `verify_checksum` a bad checksum is `BadChecksum`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Icmpv4Packet<&'a T>,
        verify_checksum: bool,
    ) -> Result<Icmpv4Repr<'a>> {
        // A view made with `new_unchecked` may be shorter than the header: refuse it here
        // rather than panic in the field accessors (found by fuzz/wire_icmpv4).
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if verify_checksum && !p.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let data: &'a [u8] = p.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[]);
        match (p.msg_type(), p.msg_code()) {
            (msg_type::ECHO_REQUEST, 0) => Ok(Icmpv4Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            }),
            (msg_type::ECHO_REPLY, 0) => Ok(Icmpv4Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            }),
            (msg_type::DST_UNREACHABLE, code) if code <= 15 => {
                let (header, data) = parse_quote(data)?;
                let next_hop_mtu = if code == unreach_code::FRAG_NEEDED {
                    p.next_hop_mtu()
                } else {
                    0
                };
                Ok(Icmpv4Repr::DstUnreachable {
                    code,
                    next_hop_mtu,
                    header,
                    data,
                })
            }
            (msg_type::TIME_EXCEEDED, code) if code <= 1 => {
                let (header, data) = parse_quote(data)?;
                Ok(Icmpv4Repr::TimeExceeded { code, header, data })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Icmpv4Repr::DstUnreachable { header, data, .. }
            | Icmpv4Repr::TimeExceeded { header, data, .. } => {
                HEADER_LEN + header.header_len() + data.len()
            }
        }
    }

    /// Writes the message into the front of `buf` (which must hold `buffer_len()` bytes). With
    /// `fill_checksum` the checksum is computed, otherwise left zero.
    pub fn emit(&self, buf: &mut [u8], fill_checksum: bool) -> Result<()> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        b[..HEADER_LEN].fill(0);
        match *self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                b[field::TYPE] = if matches!(self, Icmpv4Repr::EchoRequest { .. }) {
                    msg_type::ECHO_REQUEST
                } else {
                    msg_type::ECHO_REPLY
                };
                b[field::IDENT].copy_from_slice(&ident.to_be_bytes());
                b[field::SEQ].copy_from_slice(&seq_no.to_be_bytes());
                crate::mem::copy(&mut b[HEADER_LEN..], data);
            }
            Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu,
                header,
                data,
            } => {
                b[field::TYPE] = msg_type::DST_UNREACHABLE;
                b[field::CODE] = code;
                b[field::MTU].copy_from_slice(&next_hop_mtu.to_be_bytes());
                emit_quote(&mut b[HEADER_LEN..], &header, data)?;
            }
            Icmpv4Repr::TimeExceeded { code, header, data } => {
                b[field::TYPE] = msg_type::TIME_EXCEEDED;
                b[field::CODE] = code;
                emit_quote(&mut b[HEADER_LEN..], &header, data)?;
            }
        }
        if fill_checksum {
            Icmpv4Packet::new_unchecked(&mut *b).fill_checksum();
        }
        Ok(())
    }
}

fn emit_quote(b: &mut [u8], header: &Ipv4Repr, data: &[u8]) -> Result<()> {
    let hl = header.header_len();
    header.emit(b, true)?;
    crate::mem::copy(&mut b[hl..], data);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{IpProtocol, Ipv4Addr};

    fn quoted() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            protocol: IpProtocol::Udp,
            payload_len: 20,
            ttl: 64,
            dscp_ecn: 0,
            ident: 7,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    #[test]
    fn echo_round_trip_matches_smoltcp() {
        let r = Icmpv4Repr::EchoRequest {
            ident: 0x1234,
            seq_no: 5,
            data: b"hello",
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf, true).unwrap();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Icmpv4Repr::parse(&p, true).unwrap(), r);

        use smoltcp::phy::ChecksumCapabilities;
        use smoltcp::wire as s;
        let sr = s::Icmpv4Repr::EchoRequest {
            ident: 0x1234,
            seq_no: 5,
            data: b"hello",
        };
        let mut sbuf = vec![0u8; sr.buffer_len()];
        sr.emit(
            &mut s::Icmpv4Packet::new_unchecked(&mut sbuf[..]),
            &ChecksumCapabilities::default(),
        );
        assert_eq!(buf, sbuf);
    }

    #[test]
    fn frag_needed_round_trip() {
        let r = Icmpv4Repr::DstUnreachable {
            code: unreach_code::FRAG_NEEDED,
            next_hop_mtu: 1280,
            header: quoted(),
            data: &[1, 2, 3, 4, 5, 6, 7, 8],
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf, true).unwrap();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, true).unwrap(), r);
        // A quote shorter than header + 8 bytes is truncated.
        let mut short = buf[..buf.len() - 1].to_vec();
        Icmpv4Packet::new_unchecked(&mut short[..]).fill_checksum();
        let p = Icmpv4Packet::new_checked(&short[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, true), Err(Error::Truncated));
    }

    #[test]
    fn time_exceeded_and_unsupported() {
        let r = Icmpv4Repr::TimeExceeded {
            code: 0,
            header: quoted(),
            data: &[0; 8],
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf, true).unwrap();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, true).unwrap(), r);
        buf[0] = 13; // timestamp request
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, false), Err(Error::Unsupported));
        buf[0] = 11;
        buf[5] ^= 1;
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, true), Err(Error::BadChecksum));
    }
}
