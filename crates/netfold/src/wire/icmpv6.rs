//! ICMPv6 (RFC 4443): echo request/reply, the four error messages (destination unreachable,
//! packet too big, time exceeded, parameter problem), and the Neighbor Discovery messages of
//! RFC 4861 (their bodies are in [`super::ndp`]). Other types (MLD, RFC 4443 §2.1's private
//! experimentation values, ...) parse as `Error::Unsupported`.
//!
//! Layout (RFC 4443 §2.1): type (1), code (1), checksum (2), message body. The checksum covers
//! the IPv6 pseudo-header (RFC 8200 §8.1: source, destination, upper-layer length, next header
//! 58) and the whole message (RFC 4443 §2.3), so parsing and emitting take the two addresses.
//! An error message's body is a 4-byte field (unused, MTU or pointer) and "as much of invoking
//! packet as possible without the ICMPv6 packet exceeding the minimum IPv6 MTU" (§2.4 (c)):
//! the invoking packet's fixed header is parsed into an [`Ipv6Repr`], the rest is `data`.
#![warn(missing_docs)]

use super::checksum::{add, pseudo_header_v6};
use super::ipv6::{Ipv6Addr, Ipv6Packet, Ipv6Repr, HEADER_LEN as IPV6_HEADER_LEN};
use super::ndp::NdiscRepr;
use super::{Error, IpProtocol, Result};
use crate::mem::checksum;

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const SEQ: Range<usize> = 6..8;
    /// Packet Too Big: MTU; Parameter Problem: Pointer; others: unused.
    pub const WORD: Range<usize> = 4..8;
}

/// Length of the header every message netfold handles has at least: type, code, checksum and
/// one 32-bit word (echo identifier and sequence number, an error's word, NDP's reserved or
/// flags word).
pub const HEADER_LEN: usize = 8;
/// Where the checksum field lies (RFC 4443 §2.1), for code that must name it by position.
pub const CHECKSUM_FIELD: core::ops::Range<usize> = field::CHECKSUM;
/// Largest ICMPv6 error message netfold sends: one that fits the minimum MTU with its IPv6
/// header (RFC 4443 §2.4 (c)).
pub const MAX_ERROR_LEN: usize = super::ipv6::MIN_MTU - IPV6_HEADER_LEN;

/// Message types (RFC 4443 §2.1, RFC 4861 §4).
pub mod msg_type {
    /// Destination Unreachable.
    pub const DST_UNREACHABLE: u8 = 1;
    /// Packet Too Big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time Exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter Problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo Request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo Reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Router Solicitation (RFC 4861 §4.1).
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router Advertisement (RFC 4861 §4.2).
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbor Solicitation (RFC 4861 §4.3).
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor Advertisement (RFC 4861 §4.4).
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect (RFC 4861 §4.5).
    pub const REDIRECT: u8 = 137;

    /// RFC 4443 §2.1: "error messages are identified as such by a zero in the high-order bit
    /// of their message Type field values".
    pub const fn is_error(t: u8) -> bool {
        t < 128
    }
}

/// Destination Unreachable codes (RFC 4443 §3.1).
pub mod unreach_code {
    /// No route to destination.
    pub const NO_ROUTE: u8 = 0;
    /// Communication with destination administratively prohibited.
    pub const PROHIBITED: u8 = 1;
    /// Address unreachable.
    pub const ADDRESS: u8 = 3;
    /// Port unreachable.
    pub const PORT: u8 = 4;
}

/// Time Exceeded codes (RFC 4443 §3.3).
pub mod time_exceeded_code {
    /// Hop limit exceeded in transit.
    pub const HOP_LIMIT: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

/// A checked view of an ICMPv6 message.
#[derive(Debug, Clone)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps `buffer` without checking its length (use `new_checked` for untrusted input).
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }
    /// Checks the buffer holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
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
    /// The second word: Packet Too Big's MTU, Parameter Problem's pointer.
    pub fn word(&self) -> u32 {
        let b = &self.b()[field::WORD];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Everything after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
    /// RFC 4443 §2.3: the checksum is "the 16-bit one's complement of the one's complement
    /// sum of the entire ICMPv6 message, starting with the ICMPv6 message type field, and
    /// prepended with a 'pseudo-header' of IPv6 header fields".
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let b = self.b();
        let Ok(len) = u32::try_from(b.len()) else {
            return false;
        };
        add(
            pseudo_header_v6(src, dst, IpProtocol::Icmpv6, len),
            checksum(b),
        ) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Computes and stores the checksum over the pseudo-header of `src` and `dst`.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let len = b.len() as u32;
        let c = !add(
            pseudo_header_v6(src, dst, IpProtocol::Icmpv6, len),
            checksum(b),
        );
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
}

/// A parsed ICMPv6 message. Error messages carry the invoking packet's fixed header and the
/// bytes quoted after it (extension headers and upper-layer bytes, as much as was quoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Echo Request (type 128, RFC 4443 §4.1).
    EchoRequest {
        /// Identifier chosen by the sender.
        ident: u16,
        /// Sequence number chosen by the sender.
        seq_no: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Echo Reply (type 129, RFC 4443 §4.2).
    EchoReply {
        /// Identifier of the request answered.
        ident: u16,
        /// Sequence number of the request answered.
        seq_no: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Destination Unreachable (type 1, RFC 4443 §3.1).
    DstUnreachable {
        /// Code (see [`unreach_code`]).
        code: u8,
        /// The invoking packet's fixed header.
        header: Ipv6Repr,
        /// What was quoted after it.
        data: &'a [u8],
    },
    /// Packet Too Big (type 2, RFC 4443 §3.2).
    PacketTooBig {
        /// "The Maximum Transmission Unit of the next-hop link."
        mtu: u32,
        /// The invoking packet's fixed header.
        header: Ipv6Repr,
        /// What was quoted after it.
        data: &'a [u8],
    },
    /// Time Exceeded (type 3, RFC 4443 §3.3).
    TimeExceeded {
        /// Code (see [`time_exceeded_code`]).
        code: u8,
        /// The invoking packet's fixed header.
        header: Ipv6Repr,
        /// What was quoted after it.
        data: &'a [u8],
    },
    /// Parameter Problem (type 4, RFC 4443 §3.4).
    ParamProblem {
        /// Code (see [`super::ipv6ext::param_problem`]).
        code: u8,
        /// "Identifies the octet offset within the invoking packet where the error was
        /// detected."
        pointer: u32,
        /// The invoking packet's fixed header.
        header: Ipv6Repr,
        /// What was quoted after it.
        data: &'a [u8],
    },
    /// A Neighbor Discovery message (RFC 4861 §4).
    Ndisc(NdiscRepr<'a>),
}

/// Parses an error message's quote: the invoking packet's fixed header, then what follows.
/// The quoted Payload Length describes the original packet, not the quote, so it is not
/// checked against what was quoted.
fn parse_quote(data: &[u8]) -> Result<(Ipv6Repr, &[u8])> {
    let h = data.get(..IPV6_HEADER_LEN).ok_or(Error::Truncated)?;
    let p = Ipv6Packet::new_unchecked(h);
    if p.version() != 6 {
        return Err(Error::Unsupported);
    }
    let header = Ipv6Repr {
        src: p.src_addr(),
        dst: p.dst_addr(),
        next_header: p.next_header(),
        payload_len: usize::from(p.payload_len()),
        hop_limit: p.hop_limit(),
        traffic_class: p.traffic_class(),
        flow_label: p.flow_label(),
    };
    Ok((header, &data[IPV6_HEADER_LEN..]))
}

impl<'a> Icmpv6Repr<'a> {
    /// Parses a checked message sent from `src` to `dst`; with `verify_checksum` a bad
    /// checksum is `BadChecksum`. NDP messages with a code other than 0 are `Malformed`
    /// (RFC 4861 §6.1, §7.1: "ICMP Code is 0").
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Icmpv6Packet<&'a T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        verify_checksum: bool,
    ) -> Result<Icmpv6Repr<'a>> {
        let b: &'a [u8] = p.buffer.as_ref();
        // A view made with `new_unchecked` may be shorter than the header.
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if verify_checksum && !p.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let data: &'a [u8] = &b[HEADER_LEN..];
        let code = p.msg_code();
        match p.msg_type() {
            msg_type::ECHO_REQUEST => Ok(Icmpv6Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            }),
            msg_type::ECHO_REPLY => Ok(Icmpv6Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            }),
            msg_type::DST_UNREACHABLE => {
                let (header, data) = parse_quote(data)?;
                Ok(Icmpv6Repr::DstUnreachable { code, header, data })
            }
            msg_type::PACKET_TOO_BIG => {
                let (header, data) = parse_quote(data)?;
                Ok(Icmpv6Repr::PacketTooBig {
                    mtu: p.word(),
                    header,
                    data,
                })
            }
            msg_type::TIME_EXCEEDED => {
                let (header, data) = parse_quote(data)?;
                Ok(Icmpv6Repr::TimeExceeded { code, header, data })
            }
            msg_type::PARAM_PROBLEM => {
                let (header, data) = parse_quote(data)?;
                Ok(Icmpv6Repr::ParamProblem {
                    code,
                    pointer: p.word(),
                    header,
                    data,
                })
            }
            msg_type::ROUTER_SOLICIT..=msg_type::REDIRECT => {
                if code != 0 {
                    return Err(Error::Malformed);
                }
                NdiscRepr::parse(b).map(Icmpv6Repr::Ndisc)
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. } => HEADER_LEN + IPV6_HEADER_LEN + data.len(),
            Icmpv6Repr::Ndisc(n) => n.buffer_len(),
        }
    }

    /// Whether this is an error message (RFC 4443 §2.1).
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            Icmpv6Repr::DstUnreachable { .. }
                | Icmpv6Repr::PacketTooBig { .. }
                | Icmpv6Repr::TimeExceeded { .. }
                | Icmpv6Repr::ParamProblem { .. }
        )
    }

    /// Writes the message from `src` to `dst` into the front of `buf` (which must hold
    /// `buffer_len()` bytes). With `fill_checksum` the checksum is computed, otherwise left
    /// zero.
    pub fn emit(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        buf: &mut [u8],
        fill_checksum: bool,
    ) -> Result<()> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        match *self {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                b[..HEADER_LEN].fill(0);
                b[field::TYPE] = if matches!(self, Icmpv6Repr::EchoRequest { .. }) {
                    msg_type::ECHO_REQUEST
                } else {
                    msg_type::ECHO_REPLY
                };
                b[field::IDENT].copy_from_slice(&ident.to_be_bytes());
                b[field::SEQ].copy_from_slice(&seq_no.to_be_bytes());
                crate::mem::copy(&mut b[HEADER_LEN..], data);
            }
            Icmpv6Repr::DstUnreachable { code, header, data } => {
                emit_error(b, msg_type::DST_UNREACHABLE, code, 0, &header, data)?
            }
            Icmpv6Repr::PacketTooBig { mtu, header, data } => {
                emit_error(b, msg_type::PACKET_TOO_BIG, 0, mtu, &header, data)?
            }
            Icmpv6Repr::TimeExceeded { code, header, data } => {
                emit_error(b, msg_type::TIME_EXCEEDED, code, 0, &header, data)?
            }
            Icmpv6Repr::ParamProblem {
                code,
                pointer,
                header,
                data,
            } => emit_error(b, msg_type::PARAM_PROBLEM, code, pointer, &header, data)?,
            Icmpv6Repr::Ndisc(n) => n.emit(b)?,
        }
        if fill_checksum {
            Icmpv6Packet::new_unchecked(&mut *b).fill_checksum(src, dst);
        } else {
            b[field::CHECKSUM].fill(0);
        }
        Ok(())
    }
}

fn emit_error(
    b: &mut [u8],
    t: u8,
    code: u8,
    word: u32,
    header: &Ipv6Repr,
    data: &[u8],
) -> Result<()> {
    b[field::TYPE] = t;
    b[field::CODE] = code;
    b[field::WORD].copy_from_slice(&word.to_be_bytes());
    header.emit(&mut b[HEADER_LEN..])?;
    crate::mem::copy(&mut b[HEADER_LEN + IPV6_HEADER_LEN..], data);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn echo_request_known_bytes() {
        // An echo request ::1 -> ::1, ident 0x1234, seq 1, data "hi", checksum computed by
        // hand: pseudo-header words (::1 twice, length 10, next header 58) sum to 0x0046, the
        // message words 0x8000 0x0000 0x1234 0x0001 0x6869 to 0xfa9e; !(0xfa9e + 0x46) = 0x051b.
        let bytes = [0x80, 0, 0x05, 0x1b, 0x12, 0x34, 0, 1, b'h', b'i'];
        let lo = Ipv6Addr::LOCALHOST;
        let p = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert!(p.verify_checksum(lo, lo));
        let r = Icmpv6Repr::parse(&p, lo, lo, true).unwrap();
        assert_eq!(
            r,
            Icmpv6Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: b"hi"
            }
        );
        let mut out = [0u8; 10];
        r.emit(lo, lo, &mut out, true).unwrap();
        assert_eq!(out, bytes);
        // The checksum covers the pseudo-header: another destination fails it.
        assert_eq!(
            Icmpv6Repr::parse(&p, lo, a("::2"), true),
            Err(Error::BadChecksum)
        );
    }

    fn quoted() -> Ipv6Repr {
        Ipv6Repr {
            src: a("2001:2::1"),
            dst: a("2001:2::2"),
            next_header: IpProtocol::Udp,
            payload_len: 1452,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 7,
        }
    }

    #[test]
    fn errors_round_trip() {
        let q = [1u8, 2, 3, 4, 5, 6, 7, 8];
        for r in [
            Icmpv6Repr::PacketTooBig {
                mtu: 1280,
                header: quoted(),
                data: &q,
            },
            Icmpv6Repr::ParamProblem {
                code: 1,
                pointer: 6,
                header: quoted(),
                data: &q,
            },
            Icmpv6Repr::TimeExceeded {
                code: time_exceeded_code::REASSEMBLY,
                header: quoted(),
                data: &q,
            },
            Icmpv6Repr::DstUnreachable {
                code: unreach_code::PORT,
                header: quoted(),
                data: &q,
            },
        ] {
            let (s, d) = (a("2001:2::9"), a("2001:2::1"));
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(s, d, &mut buf, true).unwrap();
            let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(Icmpv6Repr::parse(&p, s, d, true).unwrap(), r);
            assert!(r.is_error());
            // A quote shorter than the fixed header is truncated.
            let mut short = buf[..HEADER_LEN + 39].to_vec();
            Icmpv6Packet::new_unchecked(&mut short[..]).fill_checksum(s, d);
            let p = Icmpv6Packet::new_checked(&short[..]).unwrap();
            assert_eq!(Icmpv6Repr::parse(&p, s, d, true), Err(Error::Truncated));
        }
    }

    #[test]
    fn packet_too_big_known_bytes() {
        let r = Icmpv6Repr::PacketTooBig {
            mtu: 1280,
            header: quoted(),
            data: &[],
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(a("::1"), a("::1"), &mut buf, false).unwrap();
        assert_eq!(&buf[..8], &[2, 0, 0, 0, 0, 0, 0x05, 0x00]);
        assert_eq!(buf[8] >> 4, 6);
        assert_eq!(&buf[12..14], &1452u16.to_be_bytes());
    }

    #[test]
    fn unsupported_and_malformed() {
        let lo = Ipv6Addr::LOCALHOST;
        // MLDv2 report (143): not handled.
        let mut b = [143u8, 0, 0, 0, 0, 0, 0, 0];
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&p, lo, lo, false),
            Err(Error::Unsupported)
        );
        // A Neighbor Solicitation with code 1 is malformed (RFC 4861 §7.1.1).
        b[0] = msg_type::NEIGHBOR_SOLICIT;
        b[1] = 1;
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p, lo, lo, false), Err(Error::Malformed));
        assert_eq!(
            Icmpv6Packet::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_unchecked(&b[..3]), lo, lo, true),
            Err(Error::Truncated)
        );
    }
}
