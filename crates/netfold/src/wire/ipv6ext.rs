//! IPv6 extension headers (RFC 8200 §4): the Hop-by-Hop and Destination Options headers with
//! their type-length-value options (§4.2), the Routing header (§4.4) and the Fragment header
//! (§4.5), walked from the fixed header to the upper-layer header by [`walk`], safely and
//! within bounds.
//!
//! RFC 8200 §4: "extension headers (except for the Hop-by-Hop Options header) are not
//! processed, inserted, or deleted by any node along a packet's delivery path, until the
//! packet reaches the node ... identified in the Destination Address field" — so a host walks
//! the whole chain, in order. The walk is a loop over headers that each say how long they are;
//! a hostile chain could be made of thousands of 8-byte headers, so the walk is bounded:
//!
//! - at most [`MAX_EXT_HEADERS`] extension headers per packet (netfold's own bound; RFC 8504
//!   §5.3 lets hosts limit the chain, Linux bounds it only by the packet length);
//! - at most [`MAX_OPTIONS`] options other than padding per options header, at most 7 bytes
//!   of consecutive padding, and PadN carrying only zeros (Linux `ip6_parse_tlv`: the
//!   `max_hbh_opts_number`/`max_dst_opts_number` defaults of 8, RFC 4942 §2.1.9.5);
//! - every header lies inside the packet, or the walk stops with [`WalkError::Truncated`].
//!
//! A packet beyond a bound is dropped without an ICMPv6 error, as Linux drops it.
#![warn(missing_docs)]

use super::{Error, IpProtocol, Result};

/// Next Header value of the Hop-by-Hop Options header (RFC 8200 §4.3).
pub const HOP_BY_HOP: u8 = 0;
/// Next Header value of the Routing header (RFC 8200 §4.4).
pub const ROUTING: u8 = 43;
/// Next Header value of the Fragment header (RFC 8200 §4.5).
pub const FRAGMENT: u8 = 44;
/// "No Next Header" (RFC 8200 §4.7).
pub const NO_NEXT_HEADER: u8 = 59;
/// Next Header value of the Destination Options header (RFC 8200 §4.6).
pub const DESTINATION_OPTIONS: u8 = 60;

/// Extension headers walked per packet at most (see the module documentation).
pub const MAX_EXT_HEADERS: usize = 8;
/// Options other than Pad1/PadN per options header at most (Linux's default of 8).
pub const MAX_OPTIONS: usize = 8;
/// Longest run of padding accepted inside an options header: "the purpose of PadN is to
/// align the containing header to multiples of 8. 7 is therefore the highest valid value"
/// (Linux `ip6_parse_tlv`, RFC 4942 §2.1.9.5).
pub const MAX_PADDING: usize = 7;
/// Length of the Fragment header (RFC 8200 §4.5).
pub const FRAGMENT_HEADER_LEN: usize = 8;

/// Option types netfold knows (RFC 8200 §4.2, IANA "Destination Options and Hop-by-Hop
/// Options").
pub mod option_type {
    /// Pad1: one byte of padding, no length field.
    pub const PAD1: u8 = 0;
    /// PadN: N bytes of padding.
    pub const PADN: u8 = 1;
    /// Router Alert (RFC 2711), Hop-by-Hop only: "the router should examine the datagram"
    /// — nothing for a host to do, but not unrecognized.
    pub const ROUTER_ALERT: u8 = 5;
}

/// Parameter Problem codes (RFC 4443 §3.4, RFC 7112 §4).
pub mod param_problem {
    /// Erroneous header field encountered.
    pub const HEADER_FIELD: u8 = 0;
    /// Unrecognized Next Header type encountered.
    pub const NEXT_HEADER: u8 = 1;
    /// Unrecognized IPv6 option encountered.
    pub const OPTION: u8 = 2;
    /// IPv6 first fragment has incomplete IPv6 header chain (RFC 7112).
    pub const INCOMPLETE_CHAIN: u8 = 3;
}

/// Whether `next_header` names one of the extension headers [`walk`] steps over (RFC 8200
/// §4.1 lists them; ESP and AH are not among them here: netfold speaks no IPsec, so they are
/// unrecognized upper layers).
pub fn is_walked(next_header: u8) -> bool {
    matches!(
        next_header,
        HOP_BY_HOP | ROUTING | FRAGMENT | DESTINATION_OPTIONS
    )
}

/// RFC 8200 §4.2: what to do with an option whose type is not recognized, from "the
/// highest-order two bits of the Option Type".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownOptionAction {
    /// 00 - "skip over this option and continue processing the header".
    Skip,
    /// 01 - "discard the packet".
    Discard,
    /// 10 - "discard the packet and, regardless of whether or not the packet's Destination
    /// Address was a multicast address, send an ICMP Parameter Problem, Code 2, message".
    DiscardAndReport,
    /// 11 - "discard the packet and, only if the packet's Destination Address was not a
    /// multicast address, send an ICMP Parameter Problem, Code 2, message".
    DiscardAndReportUnicast,
}

impl UnknownOptionAction {
    /// The action encoded in an option type.
    pub const fn of(option_type: u8) -> UnknownOptionAction {
        match option_type >> 6 {
            0 => UnknownOptionAction::Skip,
            1 => UnknownOptionAction::Discard,
            2 => UnknownOptionAction::DiscardAndReport,
            _ => UnknownOptionAction::DiscardAndReportUnicast,
        }
    }
}

/// A checked view of a Hop-by-Hop Options, Destination Options or Routing header: the three
/// share their first two bytes (Next Header, Hdr Ext Len: "length of the ... header in
/// 8-octet units, not including the first 8 octets").
#[derive(Debug, Clone)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// Checks that the buffer holds the whole header its length field describes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < 2 || b.len() < (usize::from(b[1]) + 1) * 8 {
            return Err(Error::Truncated);
        }
        Ok(ExtHeader { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The type of the header that follows.
    pub fn next_header(&self) -> u8 {
        self.b()[0]
    }
    /// The header's length in bytes, `(Hdr Ext Len + 1) * 8`.
    pub fn header_len(&self) -> usize {
        (usize::from(self.b()[1]) + 1) * 8
    }
    /// The header's bytes after Next Header and Hdr Ext Len (the options, or the Routing
    /// header's type-specific fields).
    pub fn data(&self) -> &[u8] {
        &self.b()[2..self.header_len()]
    }
    /// Routing header only: the Routing Type (third byte).
    pub fn routing_type(&self) -> u8 {
        self.b()[2]
    }
    /// Routing header only: Segments Left (fourth byte).
    pub fn segments_left(&self) -> u8 {
        self.b()[3]
    }
}

/// One option of an options header (RFC 8200 §4.2), padding included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Option<'a> {
    /// Option Type.
    pub kind: u8,
    /// Option Data (empty for Pad1).
    pub data: &'a [u8],
    /// Offset of the Option Type byte from the start of the options header.
    pub offset: usize,
}

/// Iterates over the options in `data` (an options header's bytes after its first two).
/// Yields `Err(BadLength)` once, and stops, when an option runs past the end.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    data: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Options<'a> {
    /// The options of an options header whose bytes after the first two are `data`.
    pub fn new(data: &'a [u8]) -> Options<'a> {
        Options {
            data,
            pos: 0,
            done: false,
        }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<Ipv6Option<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.data.len() {
            return None;
        }
        let at = self.pos;
        let kind = self.data[at];
        // Offsets are from the start of the header: two bytes precede the options.
        let offset = at + 2;
        if kind == option_type::PAD1 {
            self.pos += 1;
            return Some(Ok(Ipv6Option {
                kind,
                data: &[],
                offset,
            }));
        }
        let Some(&len) = self.data.get(at + 1) else {
            self.done = true;
            return Some(Err(Error::BadLength));
        };
        let end = at + 2 + usize::from(len);
        let Some(data) = self.data.get(at + 2..end) else {
            self.done = true;
            return Some(Err(Error::BadLength));
        };
        self.pos = end;
        Some(Ok(Ipv6Option { kind, data, offset }))
    }
}

/// A parsed Fragment header (RFC 8200 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentRepr {
    /// The type of the fragmentable part's first header (in the first fragment).
    pub next_header: u8,
    /// Fragment Offset in bytes (the field counts 8-octet units).
    pub offset: usize,
    /// M flag: more fragments follow.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl FragmentRepr {
    /// Parses the 8-byte header at the front of `b`.
    pub fn parse(b: &[u8]) -> Result<FragmentRepr> {
        let h = b.get(..FRAGMENT_HEADER_LEN).ok_or(Error::Truncated)?;
        let off_m = u16::from_be_bytes([h[2], h[3]]);
        Ok(FragmentRepr {
            next_header: h[0],
            // The offset is the top 13 bits, in 8-octet units: the field with its three low
            // bits (Res, M) cleared is the offset in bytes.
            offset: usize::from(off_m & 0xfff8),
            more_frags: off_m & 1 != 0,
            ident: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        })
    }

    /// "Atomic fragment" (RFC 6946): offset 0 and M clear, the whole packet in one fragment.
    pub fn is_atomic(&self) -> bool {
        self.offset == 0 && !self.more_frags
    }

    /// Writes the header into the front of `b`. `offset` must be a multiple of 8 below 65536.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        if !self.offset.is_multiple_of(8) || self.offset > 0xfff8 {
            return Err(Error::BadLength);
        }
        let h = b.get_mut(..FRAGMENT_HEADER_LEN).ok_or(Error::Truncated)?;
        h[0] = self.next_header;
        h[1] = 0;
        let off_m = self.offset as u16 | u16::from(self.more_frags);
        h[2..4].copy_from_slice(&off_m.to_be_bytes());
        h[4..8].copy_from_slice(&self.ident.to_be_bytes());
        Ok(())
    }
}

/// Where a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    /// The upper-layer header (or one netfold does not recognize: the caller answers
    /// Parameter Problem code 1 pointing at `nh_at`).
    Upper {
        /// Its type.
        protocol: IpProtocol,
        /// Where it starts in the walked bytes.
        offset: usize,
        /// Where the Next Header field naming it lies, in packet coordinates.
        nh_at: usize,
    },
    /// A Fragment header at `offset`; the fragmentable part starts 8 bytes later. The walk
    /// stops there: the headers after it belong to the reassembled packet (RFC 8200 §4.5).
    Fragment {
        /// Where the Fragment header starts in the walked bytes.
        offset: usize,
        /// The header.
        repr: FragmentRepr,
    },
    /// "No Next Header" (RFC 8200 §4.7): nothing follows; octets after it are ignored.
    NoNextHeader,
}

/// Why a walk stopped before the upper layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkError {
    /// A header runs past the end of the packet.
    Truncated,
    /// More than [`MAX_EXT_HEADERS`] extension headers, more than [`MAX_OPTIONS`] options,
    /// too much padding or non-zero PadN (Linux drops these silently).
    Limit,
    /// An options header whose options do not fit it.
    BadOptions,
    /// Discard silently (an unrecognized option whose action says so).
    Discard,
    /// Discard and answer ICMPv6 Parameter Problem (RFC 4443 §3.4) with this code, pointing
    /// at this offset of the invoking packet.
    ParamProblem {
        /// One of [`param_problem`].
        code: u8,
        /// Offset from the start of the IPv6 header.
        pointer: usize,
    },
}

/// Where a walk starts and what it may meet.
#[derive(Debug, Clone, Copy)]
pub struct WalkStart {
    /// The type of the first header of `bytes` (the fixed header's Next Header, say).
    pub next_header: u8,
    /// Where `bytes` starts in the packet (40 after the fixed header): pointers of
    /// [`WalkError::ParamProblem`] are in packet coordinates.
    pub base: usize,
    /// Where the Next Header field naming the first header lies in the packet (6 in the
    /// fixed header).
    pub nh_at: usize,
    /// Whether a Hop-by-Hop Options header may come first (only straight after the fixed
    /// header, RFC 8200 §4.1).
    pub hop_by_hop_allowed: bool,
    /// The packet's destination is multicast (decides action 11 of unrecognized options).
    pub dst_multicast: bool,
}

/// Walks the extension headers of `bytes` (RFC 8200 §4) from `start`, counting each header
/// against `budget` (at most [`MAX_EXT_HEADERS`] across the walks of one packet: before and
/// after reassembly). Checks each options header's options (§4.2: unrecognized options by
/// their action bits; Router Alert is recognized in a Hop-by-Hop header) and each Routing
/// header (§4.4: "If Segments Left is zero, the node must ignore the Routing header and
/// proceed to process the next header"; with segments left and a Routing Type netfold does not
/// recognize, which is every type — a host does not forward — "the node must discard the
/// packet and send an ICMP Parameter Problem, Code 0, message ... pointing to the unrecognized
/// Routing Type"). A Hop-by-Hop header anywhere but first is an unrecognized Next Header
/// (Parameter Problem code 1), as in Linux.
pub fn walk(
    start: WalkStart,
    bytes: &[u8],
    budget: &mut usize,
) -> core::result::Result<Chain, WalkError> {
    let mut nh = start.next_header;
    let mut nh_at = start.nh_at;
    let mut off = 0usize;
    let mut first = true;
    loop {
        match nh {
            NO_NEXT_HEADER => return Ok(Chain::NoNextHeader),
            HOP_BY_HOP if !(first && start.hop_by_hop_allowed) => {
                return Err(WalkError::ParamProblem {
                    code: param_problem::NEXT_HEADER,
                    pointer: nh_at,
                });
            }
            HOP_BY_HOP | DESTINATION_OPTIONS | ROUTING | FRAGMENT => {}
            other => {
                return Ok(Chain::Upper {
                    protocol: IpProtocol::from(other),
                    offset: off,
                    nh_at,
                })
            }
        }
        if *budget == 0 {
            return Err(WalkError::Limit);
        }
        *budget -= 1;
        let rest = bytes.get(off..).unwrap_or(&[]);
        if nh == FRAGMENT {
            let repr = FragmentRepr::parse(rest).map_err(|_| WalkError::Truncated)?;
            return Ok(Chain::Fragment { offset: off, repr });
        }
        let h = ExtHeader::new_checked(rest).map_err(|_| WalkError::Truncated)?;
        let at = start.base + off;
        match nh {
            ROUTING => {
                if h.header_len() < 8 {
                    return Err(WalkError::Truncated);
                }
                if h.segments_left() != 0 {
                    return Err(WalkError::ParamProblem {
                        code: param_problem::HEADER_FIELD,
                        pointer: at + 2,
                    });
                }
            }
            _ => check_options(h.data(), nh == HOP_BY_HOP, at, start.dst_multicast)?,
        }
        nh_at = at;
        nh = h.next_header();
        off += h.header_len();
        first = false;
    }
}

/// RFC 8200 §4.2 for one options header (its bytes after the first two), with Linux's
/// bounds. `at` is the header's offset in the packet.
fn check_options(
    data: &[u8],
    hop_by_hop: bool,
    at: usize,
    dst_multicast: bool,
) -> core::result::Result<(), WalkError> {
    let mut padding = 0usize;
    let mut count = 0usize;
    for opt in Options::new(data) {
        let opt = opt.map_err(|_| WalkError::BadOptions)?;
        match opt.kind {
            option_type::PAD1 | option_type::PADN => {
                padding += if opt.kind == option_type::PAD1 {
                    1
                } else {
                    opt.data.len() + 2
                };
                if padding > MAX_PADDING || opt.data.iter().any(|&b| b != 0) {
                    return Err(WalkError::Limit);
                }
                continue;
            }
            _ => padding = 0,
        }
        count += 1;
        if count > MAX_OPTIONS {
            return Err(WalkError::Limit);
        }
        if hop_by_hop && opt.kind == option_type::ROUTER_ALERT {
            continue;
        }
        let report = WalkError::ParamProblem {
            code: param_problem::OPTION,
            pointer: at + opt.offset,
        };
        match UnknownOptionAction::of(opt.kind) {
            UnknownOptionAction::Skip => {}
            UnknownOptionAction::Discard => return Err(WalkError::Discard),
            UnknownOptionAction::DiscardAndReport => return Err(report),
            UnknownOptionAction::DiscardAndReportUnicast if dst_multicast => {
                return Err(WalkError::Discard)
            }
            UnknownOptionAction::DiscardAndReportUnicast => return Err(report),
        }
    }
    Ok(())
}

/// Steps over extension headers by their lengths alone, without checking their options
/// (Linux `ipv6_skip_exthdr`), at most [`MAX_EXT_HEADERS`] of them, to the header a packet
/// carries: its type, its offset in `bytes`, and the Fragment header passed on the way, if
/// any (with a non-zero offset the bytes are not the start of that header; in any fragment
/// but an atomic one a transport checksum covers more than these bytes). For deciding what
/// a packet is when it is not processed further (RFC 4443 §2.4 (e): no ICMPv6 error about an
/// ICMPv6 error; a device checking checksums). `None` if a header runs past the end or the
/// chain is longer than the bound.
pub fn skip_to_upper(next_header: u8, bytes: &[u8]) -> Option<(u8, usize, Option<FragmentRepr>)> {
    let (mut nh, mut off, mut frag) = (next_header, 0usize, None);
    for _ in 0..=MAX_EXT_HEADERS {
        if !is_walked(nh) {
            return Some((nh, off, frag));
        }
        let rest = bytes.get(off..)?;
        if nh == FRAGMENT {
            let f = FragmentRepr::parse(rest).ok()?;
            frag = Some(f);
            nh = f.next_header;
            off += FRAGMENT_HEADER_LEN;
            continue;
        }
        let h = ExtHeader::new_checked(rest).ok()?;
        nh = h.next_header();
        off += h.header_len();
    }
    None
}

/// Writes an 8-byte Hop-by-Hop or Destination Options header that holds nothing but a PadN
/// of six bytes (the smallest options header), followed by `next_header`: what a sender or a
/// test needs to build a chain.
pub fn emit_empty_options_header(next_header: u8, b: &mut [u8]) -> Result<()> {
    let h = b.get_mut(..8).ok_or(Error::Truncated)?;
    h.copy_from_slice(&[next_header, 0, option_type::PADN, 4, 0, 0, 0, 0]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(nh: u8) -> WalkStart {
        WalkStart {
            next_header: nh,
            base: 40,
            nh_at: 6,
            hop_by_hop_allowed: true,
            dst_multicast: false,
        }
    }

    fn walk_all(nh: u8, b: &[u8]) -> core::result::Result<Chain, WalkError> {
        let mut budget = MAX_EXT_HEADERS;
        walk(start(nh), b, &mut budget)
    }

    #[test]
    fn known_bytes_hop_by_hop_then_destination_options_then_udp() {
        // HBH: next = 60, len 0 (8 bytes), Router Alert (05 02 00 00) + PadN(0) (01 00).
        // DstOpts: next = 17, len 0, PadN of 4 (01 04 00 00 00 00).
        let b = [
            60, 0, 5, 2, 0, 0, 1, 0, //
            17, 0, 1, 4, 0, 0, 0, 0, //
            0xaa, 0xbb, // the UDP header starts here
        ];
        assert_eq!(
            walk_all(HOP_BY_HOP, &b),
            Ok(Chain::Upper {
                protocol: IpProtocol::Udp,
                offset: 16,
                nh_at: 48,
            })
        );
    }

    #[test]
    fn hop_by_hop_only_first() {
        // DstOpts then HBH: Parameter Problem code 1 at the DstOpts' Next Header field.
        let b = [0, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
        assert_eq!(
            walk_all(DESTINATION_OPTIONS, &b),
            Err(WalkError::ParamProblem {
                code: param_problem::NEXT_HEADER,
                pointer: 40
            })
        );
        let mut budget = MAX_EXT_HEADERS;
        let s = WalkStart {
            hop_by_hop_allowed: false,
            ..start(HOP_BY_HOP)
        };
        assert_eq!(
            walk(s, &b[8..], &mut budget),
            Err(WalkError::ParamProblem {
                code: param_problem::NEXT_HEADER,
                pointer: 6
            })
        );
    }

    #[test]
    fn unrecognized_options_follow_their_action_bits() {
        let with = |kind: u8| [58u8, 0, kind, 0, 1, 2, 0, 0];
        // 00: skipped.
        assert!(matches!(
            walk_all(DESTINATION_OPTIONS, &with(0x1e)),
            Ok(Chain::Upper { .. })
        ));
        assert_eq!(
            walk_all(DESTINATION_OPTIONS, &with(0x5e)),
            Err(WalkError::Discard)
        );
        let pp = Err(WalkError::ParamProblem {
            code: param_problem::OPTION,
            pointer: 42,
        });
        assert_eq!(walk_all(DESTINATION_OPTIONS, &with(0x9e)), pp);
        assert_eq!(walk_all(DESTINATION_OPTIONS, &with(0xde)), pp);
        // To a multicast destination: 10 still reports, 11 only discards.
        let mc = WalkStart {
            dst_multicast: true,
            ..start(DESTINATION_OPTIONS)
        };
        let mut budget = MAX_EXT_HEADERS;
        assert_eq!(walk(mc, &with(0x9e), &mut budget), pp);
        assert_eq!(walk(mc, &with(0xde), &mut budget), Err(WalkError::Discard));
        // Router Alert is known in a Hop-by-Hop header only; in Destination Options it is an
        // unknown option with action 00, skipped.
        assert!(matches!(
            walk_all(DESTINATION_OPTIONS, &[58, 0, 5, 2, 0, 0, 1, 0]),
            Ok(Chain::Upper { .. })
        ));
    }

    #[test]
    fn bounds_hold() {
        // Nine Destination Options headers: one over the bound.
        let mut b = Vec::new();
        for i in 0..9 {
            let next = if i == 8 { 58 } else { DESTINATION_OPTIONS };
            b.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
        }
        assert_eq!(walk_all(DESTINATION_OPTIONS, &b), Err(WalkError::Limit));
        assert!(matches!(
            walk_all(DESTINATION_OPTIONS, &b[8..]),
            Ok(Chain::Upper { .. })
        ));
        // Eight bytes of padding in a row, non-zero PadN, nine options.
        assert_eq!(
            walk_all(
                DESTINATION_OPTIONS,
                &[58, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
            ),
            Err(WalkError::Limit)
        );
        assert_eq!(
            walk_all(DESTINATION_OPTIONS, &[58, 0, 1, 4, 0, 0, 9, 0]),
            Err(WalkError::Limit)
        );
        let mut many = vec![58u8, 2];
        for _ in 0..9 {
            many.extend_from_slice(&[0x1e, 0]);
        }
        many.extend_from_slice(&[1, 2, 0, 0]);
        assert_eq!(many.len(), 24);
        assert_eq!(walk_all(DESTINATION_OPTIONS, &many), Err(WalkError::Limit));
    }

    #[test]
    fn truncated_and_malformed_chains() {
        assert_eq!(walk_all(HOP_BY_HOP, &[]), Err(WalkError::Truncated));
        assert_eq!(
            walk_all(HOP_BY_HOP, &[58, 1, 1, 4, 0, 0, 0, 0]),
            Err(WalkError::Truncated)
        );
        assert_eq!(walk_all(FRAGMENT, &[58, 0, 0]), Err(WalkError::Truncated));
        // An option whose length runs past the header.
        assert_eq!(
            walk_all(DESTINATION_OPTIONS, &[58, 0, 0x1e, 9, 0, 0, 0, 0]),
            Err(WalkError::BadOptions)
        );
        assert_eq!(
            walk_all(NO_NEXT_HEADER, &[1, 2, 3]),
            Ok(Chain::NoNextHeader)
        );
    }

    #[test]
    fn routing_header_with_segments_left_is_a_parameter_problem() {
        // Type 0 (deprecated, RFC 5095), segments left 1.
        let mut b = [58u8, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(
            walk_all(ROUTING, &b),
            Err(WalkError::ParamProblem {
                code: param_problem::HEADER_FIELD,
                pointer: 42
            })
        );
        b[3] = 0;
        assert_eq!(
            walk_all(ROUTING, &b),
            Ok(Chain::Upper {
                protocol: IpProtocol::Icmpv6,
                offset: 8,
                nh_at: 40
            })
        );
    }

    #[test]
    fn fragment_header_known_bytes() {
        // Next header UDP, offset 185 units (1480 bytes), M set, ident 0x12345678.
        let b = [17, 0, 0x05, 0xc9, 0x12, 0x34, 0x56, 0x78, 0xde, 0xad];
        let r = FragmentRepr {
            next_header: 17,
            offset: 1480,
            more_frags: true,
            ident: 0x1234_5678,
        };
        assert_eq!(
            walk_all(FRAGMENT, &b),
            Ok(Chain::Fragment { offset: 0, repr: r })
        );
        let mut out = [0u8; 8];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b[..8]);
        assert!(!r.is_atomic());
        assert!(FragmentRepr {
            offset: 0,
            more_frags: false,
            ..r
        }
        .is_atomic());
        assert_eq!(
            FragmentRepr { offset: 3, ..r }.emit(&mut out),
            Err(Error::BadLength)
        );
    }

    #[test]
    fn skipping_finds_the_upper_layer_without_checking_options() {
        // An unknown option with action 01 (discard) does not stop the skip.
        let b = [44u8, 0, 0x5e, 0, 1, 2, 0, 0, 58, 0, 0, 8, 0, 0, 0, 1, 1, 0];
        let frag = FragmentRepr {
            next_header: 58,
            offset: 8,
            more_frags: false,
            ident: 1,
        };
        assert_eq!(
            skip_to_upper(DESTINATION_OPTIONS, &b),
            Some((58, 16, Some(frag)))
        );
        assert_eq!(skip_to_upper(58, &[]), Some((58, 0, None)));
        assert_eq!(skip_to_upper(DESTINATION_OPTIONS, &b[..7]), None);
    }

    #[test]
    fn empty_options_headers_walk_clean() {
        let mut b = [0u8; 24];
        emit_empty_options_header(DESTINATION_OPTIONS, &mut b).unwrap();
        emit_empty_options_header(58, &mut b[8..]).unwrap();
        assert_eq!(
            walk_all(HOP_BY_HOP, &b),
            Ok(Chain::Upper {
                protocol: IpProtocol::Icmpv6,
                offset: 16,
                nh_at: 48
            })
        );
        assert_eq!(
            emit_empty_options_header(58, &mut [0u8; 7]),
            Err(Error::Truncated)
        );
    }
}
