//! Neighbor Discovery messages (RFC 4861 §4) and their options (§4.6): Router Solicitation,
//! Router Advertisement, Neighbor Solicitation, Neighbor Advertisement and Redirect.
//!
//! These are ICMPv6 messages (types 133-137); [`NdiscRepr`] parses and emits a whole message,
//! its first four bytes (type, code, checksum) included, and leaves the checksum to
//! [`super::icmpv6::Icmpv6Repr::emit`]. What this module checks is what the bytes alone can
//! tell (RFC 4861 §6.1.1, §6.1.2, §7.1.1, §7.1.2): the message is long enough for its type,
//! "all included options have a length that is greater than zero" and lie inside the message,
//! a Target Address is not multicast. The checks that need the IPv6 header (hop limit 255,
//! source and destination rules) are the network layer's.
//!
//! netfold's NDP runs on Ethernet: a link-layer address option must carry one 6-byte MAC in
//! its 8 bytes (RFC 2464 §6); another size makes the message `Malformed` (Linux drops such
//! messages too, "invalid link-layer address length"). Options of other types are kept as
//! bytes and skipped by receivers ("Receivers MUST silently ignore any options they do not
//! recognize and continue processing the message", §4.6).
#![warn(missing_docs)]

use super::ethernet::EthernetAddress;
use super::icmpv6::msg_type;
use super::ipv6::Ipv6Addr;
use super::{Error, Result};

/// Option types (RFC 4861 §4.6).
pub mod option_type {
    /// Source Link-Layer Address.
    pub const SOURCE_LLADDR: u8 = 1;
    /// Target Link-Layer Address.
    pub const TARGET_LLADDR: u8 = 2;
    /// Prefix Information.
    pub const PREFIX_INFO: u8 = 3;
    /// Redirected Header.
    pub const REDIRECTED_HEADER: u8 = 4;
    /// MTU.
    pub const MTU: u8 = 5;
}

/// Neighbor Advertisement flags (RFC 4861 §4.4), in the first byte of the flags word.
pub mod na_flags {
    /// R: the sender is a router.
    pub const ROUTER: u8 = 0x80;
    /// S: sent in response to a Neighbor Solicitation.
    pub const SOLICITED: u8 = 0x40;
    /// O: the advertisement should override an existing cache entry.
    pub const OVERRIDE: u8 = 0x20;
}

/// Router Advertisement flags (RFC 4861 §4.2).
pub mod ra_flags {
    /// M: addresses are available via DHCPv6.
    pub const MANAGED: u8 = 0x80;
    /// O: other configuration is available via DHCPv6.
    pub const OTHER: u8 = 0x40;
}

/// Prefix Information flags (RFC 4861 §4.6.2).
pub mod prefix_flags {
    /// L: the prefix can be used for on-link determination.
    pub const ON_LINK: u8 = 0x80;
    /// A: the prefix can be used for stateless address configuration (RFC 4862).
    pub const AUTONOMOUS: u8 = 0x40;
}

/// The Prefix Information option (RFC 4861 §4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixInfo {
    /// Prefix Length.
    pub prefix_len: u8,
    /// L and A flags (see [`prefix_flags`]).
    pub flags: u8,
    /// Valid Lifetime in seconds (all ones: infinity).
    pub valid_lifetime: u32,
    /// Preferred Lifetime in seconds (all ones: infinity).
    pub preferred_lifetime: u32,
    /// The prefix (bits after `prefix_len` are to be ignored).
    pub prefix: Ipv6Addr,
}

/// One option of an NDP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdiscOption<'a> {
    /// Source Link-Layer Address (§4.6.1).
    SourceLinkAddr(EthernetAddress),
    /// Target Link-Layer Address (§4.6.1).
    TargetLinkAddr(EthernetAddress),
    /// Prefix Information (§4.6.2).
    PrefixInfo(PrefixInfo),
    /// Redirected Header (§4.6.3): the bytes after its 8-byte header.
    RedirectedHeader(&'a [u8]),
    /// MTU (§4.6.4).
    Mtu(u32),
    /// Any other type, with the bytes after its type and length.
    Unknown {
        /// Type.
        kind: u8,
        /// The rest of the option.
        data: &'a [u8],
    },
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn addr_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

impl<'a> NdiscOption<'a> {
    /// Parses the option `b` (exactly its bytes, type and length included).
    fn parse(b: &'a [u8]) -> Result<NdiscOption<'a>> {
        let kind = b[0];
        Ok(match kind {
            option_type::SOURCE_LLADDR | option_type::TARGET_LLADDR => {
                if b.len() != 8 {
                    return Err(Error::Malformed);
                }
                let mac = EthernetAddress::from_bytes(&b[2..8]).ok_or(Error::Malformed)?;
                if kind == option_type::SOURCE_LLADDR {
                    NdiscOption::SourceLinkAddr(mac)
                } else {
                    NdiscOption::TargetLinkAddr(mac)
                }
            }
            // §4.6.2: Length 4 (32 bytes).
            option_type::PREFIX_INFO => {
                if b.len() != 32 {
                    return Err(Error::Malformed);
                }
                NdiscOption::PrefixInfo(PrefixInfo {
                    prefix_len: b[2],
                    flags: b[3],
                    valid_lifetime: be32(&b[4..8]),
                    preferred_lifetime: be32(&b[8..12]),
                    prefix: addr_at(b, 16),
                })
            }
            option_type::REDIRECTED_HEADER => NdiscOption::RedirectedHeader(&b[8..]),
            // §4.6.4: Length 1.
            option_type::MTU => {
                if b.len() != 8 {
                    return Err(Error::Malformed);
                }
                NdiscOption::Mtu(be32(&b[4..8]))
            }
            _ => NdiscOption::Unknown {
                kind,
                data: &b[2..],
            },
        })
    }

    /// Bytes `emit` writes (a multiple of 8).
    pub fn buffer_len(&self) -> usize {
        match self {
            NdiscOption::SourceLinkAddr(_) | NdiscOption::TargetLinkAddr(_) => 8,
            NdiscOption::Mtu(_) => 8,
            NdiscOption::PrefixInfo(_) => 32,
            NdiscOption::RedirectedHeader(d) => (8 + d.len()).div_ceil(8) * 8,
            NdiscOption::Unknown { data, .. } => (2 + data.len()).div_ceil(8) * 8,
        }
    }

    /// Writes the option into the front of `b`, zero-padded to a multiple of 8 bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        let len = self.buffer_len();
        if len > 255 * 8 {
            return Err(Error::BadLength);
        }
        let o = b.get_mut(..len).ok_or(Error::Truncated)?;
        o.fill(0);
        o[1] = (len / 8) as u8;
        match *self {
            NdiscOption::SourceLinkAddr(mac) | NdiscOption::TargetLinkAddr(mac) => {
                o[0] = if matches!(self, NdiscOption::SourceLinkAddr(_)) {
                    option_type::SOURCE_LLADDR
                } else {
                    option_type::TARGET_LLADDR
                };
                o[2..8].copy_from_slice(&mac.0);
            }
            NdiscOption::Mtu(mtu) => {
                o[0] = option_type::MTU;
                o[4..8].copy_from_slice(&mtu.to_be_bytes());
            }
            NdiscOption::PrefixInfo(p) => {
                o[0] = option_type::PREFIX_INFO;
                o[2] = p.prefix_len;
                o[3] = p.flags;
                o[4..8].copy_from_slice(&p.valid_lifetime.to_be_bytes());
                o[8..12].copy_from_slice(&p.preferred_lifetime.to_be_bytes());
                o[16..32].copy_from_slice(&p.prefix.octets());
            }
            NdiscOption::RedirectedHeader(d) => {
                o[0] = option_type::REDIRECTED_HEADER;
                o[8..8 + d.len()].copy_from_slice(d);
            }
            NdiscOption::Unknown { kind, data } => {
                o[0] = kind;
                o[2..2 + data.len()].copy_from_slice(data);
            }
        }
        Ok(())
    }
}

/// The options area of an NDP message, checked when the message is parsed: every option has a
/// non-zero length, lies inside the area and, if of a known type, has that type's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdiscOptions<'a>(&'a [u8]);

impl<'a> NdiscOptions<'a> {
    /// No options.
    pub const EMPTY: NdiscOptions<'static> = NdiscOptions(&[]);

    /// Checks `b` as an options area (RFC 4861 §4.6: "Nodes MUST silently discard an ND packet
    /// that contains an option with length zero").
    pub fn new(b: &'a [u8]) -> Result<NdiscOptions<'a>> {
        let mut rest = b;
        while !rest.is_empty() {
            let len = usize::from(*rest.get(1).ok_or(Error::Truncated)?) * 8;
            if len == 0 {
                return Err(Error::Malformed);
            }
            let opt = rest.get(..len).ok_or(Error::Truncated)?;
            NdiscOption::parse(opt)?;
            rest = &rest[len..];
        }
        Ok(NdiscOptions(b))
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The options, in order.
    pub fn iter(&self) -> impl Iterator<Item = NdiscOption<'a>> + 'a {
        let mut rest = self.0;
        core::iter::from_fn(move || {
            let len = usize::from(*rest.get(1)?) * 8;
            let opt = rest.get(..len).filter(|_| len > 0)?;
            rest = &rest[len..];
            NdiscOption::parse(opt).ok()
        })
    }

    /// The first Source Link-Layer Address option's MAC.
    pub fn source_lladdr(&self) -> Option<EthernetAddress> {
        self.iter().find_map(|o| match o {
            NdiscOption::SourceLinkAddr(m) => Some(m),
            _ => None,
        })
    }

    /// The first Target Link-Layer Address option's MAC.
    pub fn target_lladdr(&self) -> Option<EthernetAddress> {
        self.iter().find_map(|o| match o {
            NdiscOption::TargetLinkAddr(m) => Some(m),
            _ => None,
        })
    }

    /// The first MTU option's value.
    pub fn mtu(&self) -> Option<u32> {
        self.iter().find_map(|o| match o {
            NdiscOption::Mtu(m) => Some(m),
            _ => None,
        })
    }

    /// The Prefix Information options.
    pub fn prefixes(&self) -> impl Iterator<Item = PrefixInfo> + 'a {
        self.iter().filter_map(|o| match o {
            NdiscOption::PrefixInfo(p) => Some(p),
            _ => None,
        })
    }
}

/// A parsed NDP message. Solicitations, advertisements and redirects carry the one
/// link-layer address option that matters to them (`lladdr`: the source's in RS, NS and RA,
/// the target's in NA and Redirect); a Router Advertisement keeps all its options (prefixes,
/// MTU, its source's address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdiscRepr<'a> {
    /// Router Solicitation (§4.1).
    RouterSolicit {
        /// Source Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Router Advertisement (§4.2).
    RouterAdvert {
        /// Cur Hop Limit (0: unspecified by this router).
        hop_limit: u8,
        /// M and O flags (see [`ra_flags`]).
        flags: u8,
        /// Router Lifetime in seconds (0: not a default router).
        router_lifetime: u16,
        /// Reachable Time in milliseconds (0: unspecified).
        reachable_time: u32,
        /// Retrans Timer in milliseconds (0: unspecified).
        retrans_timer: u32,
        /// Its options.
        options: NdiscOptions<'a>,
    },
    /// Neighbor Solicitation (§4.3).
    NeighborSolicit {
        /// "The IP address of the target of the solicitation. It MUST NOT be a multicast
        /// address."
        target: Ipv6Addr,
        /// Source Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Neighbor Advertisement (§4.4).
    NeighborAdvert {
        /// R, S and O flags (see [`na_flags`]).
        flags: u8,
        /// The address whose link-layer address is advertised.
        target: Ipv6Addr,
        /// Target Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Redirect (§4.5); a host may act on it, netfold parses and ignores it.
    Redirect {
        /// A better first hop.
        target: Ipv6Addr,
        /// The destination redirected.
        dst: Ipv6Addr,
        /// Target Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
}

/// Where each message's options begin (RFC 4861 §4.1-§4.5 layouts).
const fn options_at(t: u8) -> usize {
    match t {
        msg_type::ROUTER_ADVERT => 16,
        msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT => 24,
        msg_type::REDIRECT => 40,
        _ => 8,
    }
}

impl<'a> NdiscRepr<'a> {
    /// Parses a whole NDP message `b` (its ICMPv6 type at `b[0]`). Too short for its type is
    /// `Truncated` (§6.1.2 "ICMP length ... is 16 or more octets", §7.1.1 "24 or more", ...),
    /// a bad option or a multicast target is `Malformed`; a type that is not NDP is
    /// `Unsupported`.
    pub fn parse(b: &'a [u8]) -> Result<NdiscRepr<'a>> {
        let t = *b.first().ok_or(Error::Truncated)?;
        if !(msg_type::ROUTER_SOLICIT..=msg_type::REDIRECT).contains(&t) {
            return Err(Error::Unsupported);
        }
        let at = options_at(t);
        let opts = NdiscOptions::new(b.get(at..).ok_or(Error::Truncated)?)?;
        let target_ok = |a: Ipv6Addr| {
            if a.is_multicast() {
                Err(Error::Malformed)
            } else {
                Ok(a)
            }
        };
        Ok(match t {
            msg_type::ROUTER_SOLICIT => NdiscRepr::RouterSolicit {
                lladdr: opts.source_lladdr(),
            },
            msg_type::ROUTER_ADVERT => NdiscRepr::RouterAdvert {
                hop_limit: b[4],
                flags: b[5],
                router_lifetime: u16::from_be_bytes([b[6], b[7]]),
                reachable_time: be32(&b[8..12]),
                retrans_timer: be32(&b[12..16]),
                options: opts,
            },
            msg_type::NEIGHBOR_SOLICIT => NdiscRepr::NeighborSolicit {
                target: target_ok(addr_at(b, 8))?,
                lladdr: opts.source_lladdr(),
            },
            msg_type::NEIGHBOR_ADVERT => NdiscRepr::NeighborAdvert {
                flags: b[4] & (na_flags::ROUTER | na_flags::SOLICITED | na_flags::OVERRIDE),
                target: target_ok(addr_at(b, 8))?,
                lladdr: opts.target_lladdr(),
            },
            _ => NdiscRepr::Redirect {
                target: addr_at(b, 8),
                dst: target_ok(addr_at(b, 24))?,
                lladdr: opts.target_lladdr(),
            },
        })
    }

    fn msg_type(&self) -> u8 {
        match self {
            NdiscRepr::RouterSolicit { .. } => msg_type::ROUTER_SOLICIT,
            NdiscRepr::RouterAdvert { .. } => msg_type::ROUTER_ADVERT,
            NdiscRepr::NeighborSolicit { .. } => msg_type::NEIGHBOR_SOLICIT,
            NdiscRepr::NeighborAdvert { .. } => msg_type::NEIGHBOR_ADVERT,
            NdiscRepr::Redirect { .. } => msg_type::REDIRECT,
        }
    }

    fn lladdr_option(&self) -> Option<NdiscOption<'static>> {
        match *self {
            NdiscRepr::RouterSolicit { lladdr } | NdiscRepr::NeighborSolicit { lladdr, .. } => {
                lladdr.map(NdiscOption::SourceLinkAddr)
            }
            NdiscRepr::NeighborAdvert { lladdr, .. } | NdiscRepr::Redirect { lladdr, .. } => {
                lladdr.map(NdiscOption::TargetLinkAddr)
            }
            NdiscRepr::RouterAdvert { .. } => None,
        }
    }

    /// Bytes `emit` writes: the whole message.
    pub fn buffer_len(&self) -> usize {
        let opts = match self {
            NdiscRepr::RouterAdvert { options, .. } => options.as_bytes().len(),
            _ => self.lladdr_option().map_or(0, |o| o.buffer_len()),
        };
        options_at(self.msg_type()) + opts
    }

    /// Writes the message (type, code 0, checksum field zero, body, options) into the front
    /// of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        let t = self.msg_type();
        let at = options_at(t);
        let b = b.get_mut(..self.buffer_len()).ok_or(Error::Truncated)?;
        b[..at].fill(0);
        b[0] = t;
        match *self {
            NdiscRepr::RouterSolicit { .. } => {}
            NdiscRepr::RouterAdvert {
                hop_limit,
                flags,
                router_lifetime,
                reachable_time,
                retrans_timer,
                options,
            } => {
                b[4] = hop_limit;
                b[5] = flags;
                b[6..8].copy_from_slice(&router_lifetime.to_be_bytes());
                b[8..12].copy_from_slice(&reachable_time.to_be_bytes());
                b[12..16].copy_from_slice(&retrans_timer.to_be_bytes());
                b[at..].copy_from_slice(options.as_bytes());
                return Ok(());
            }
            NdiscRepr::NeighborSolicit { target, .. } => b[8..24].copy_from_slice(&target.octets()),
            NdiscRepr::NeighborAdvert { flags, target, .. } => {
                b[4] = flags;
                b[8..24].copy_from_slice(&target.octets());
            }
            NdiscRepr::Redirect { target, dst, .. } => {
                b[8..24].copy_from_slice(&target.octets());
                b[24..40].copy_from_slice(&dst.octets());
            }
        }
        if let Some(o) = self.lladdr_option() {
            o.emit(&mut b[at..])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};

    const MAC: EthernetAddress = EthernetAddress([0x02, 0x6e, 0x66, 0, 0, 2]);

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn neighbor_solicitation_known_bytes() {
        // A Neighbor Solicitation fe80::1 -> ff02::1:ff00:2 for 2001:2::2 with a Source
        // Link-Layer Address option 02:6e:66:00:00:02, checksum computed independently.
        let (src, dst) = (a("fe80::1"), a("ff02::1:ff00:2"));
        let mut bytes = vec![135u8, 0, 0, 0, 0, 0, 0, 0];
        bytes.extend_from_slice(&a("2001:2::2").octets());
        bytes.extend_from_slice(&[1, 1, 0x02, 0x6e, 0x66, 0, 0, 2]);
        bytes[2..4].copy_from_slice(&[0xf2, 0xa5]);
        let p = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        let r = Icmpv6Repr::parse(&p, src, dst, true).unwrap();
        let want = NdiscRepr::NeighborSolicit {
            target: a("2001:2::2"),
            lladdr: Some(MAC),
        };
        assert_eq!(r, Icmpv6Repr::Ndisc(want));
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(src, dst, &mut out, true).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn advertisement_flags_and_options() {
        let na = NdiscRepr::NeighborAdvert {
            flags: na_flags::SOLICITED | na_flags::OVERRIDE,
            target: a("2001:2::2"),
            lladdr: Some(MAC),
        };
        let mut b = vec![0u8; na.buffer_len()];
        na.emit(&mut b).unwrap();
        assert_eq!(b[4], 0x60);
        assert_eq!(&b[24..], &[2, 1, 0x02, 0x6e, 0x66, 0, 0, 2]);
        assert_eq!(NdiscRepr::parse(&b), Ok(na));
        // A multicast target is malformed (§7.1.2).
        b[8] = 0xff;
        assert_eq!(NdiscRepr::parse(&b), Err(Error::Malformed));
    }

    #[test]
    fn router_advertisement_with_prefix_and_mtu() {
        let pi = PrefixInfo {
            prefix_len: 64,
            flags: prefix_flags::ON_LINK | prefix_flags::AUTONOMOUS,
            valid_lifetime: 86400,
            preferred_lifetime: 14400,
            prefix: a("2001:2:0:1::"),
        };
        let mut opts = [0u8; 48];
        NdiscOption::SourceLinkAddr(MAC).emit(&mut opts).unwrap();
        NdiscOption::Mtu(1400).emit(&mut opts[8..]).unwrap();
        NdiscOption::PrefixInfo(pi).emit(&mut opts[16..]).unwrap();
        assert_eq!(&opts[8..16], &[5, 1, 0, 0, 0, 0, 0x05, 0x78]);
        assert_eq!(opts[16..20], [3, 4, 64, 0xc0]);
        let ra = NdiscRepr::RouterAdvert {
            hop_limit: 64,
            flags: 0,
            router_lifetime: 1800,
            reachable_time: 0,
            retrans_timer: 0,
            options: NdiscOptions::new(&opts).unwrap(),
        };
        let mut b = vec![0u8; ra.buffer_len()];
        ra.emit(&mut b).unwrap();
        assert_eq!(b.len(), 64);
        let NdiscRepr::RouterAdvert {
            options,
            router_lifetime,
            ..
        } = NdiscRepr::parse(&b).unwrap()
        else {
            panic!("not an RA");
        };
        assert_eq!(router_lifetime, 1800);
        assert_eq!(options.source_lladdr(), Some(MAC));
        assert_eq!(options.mtu(), Some(1400));
        assert_eq!(options.prefixes().collect::<Vec<_>>(), vec![pi]);
    }

    #[test]
    fn bad_options_and_short_messages() {
        let mut b = vec![135u8, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&a("2001:2::2").octets());
        assert!(NdiscRepr::parse(&b).is_ok());
        // §4.6: an option with length zero.
        b.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(NdiscRepr::parse(&b), Err(Error::Malformed));
        // An option running past the end.
        b[25] = 2;
        assert_eq!(NdiscRepr::parse(&b), Err(Error::Truncated));
        // A link-layer address option of 16 bytes (not Ethernet's).
        b.extend_from_slice(&[0; 8]);
        assert_eq!(NdiscRepr::parse(&b), Err(Error::Malformed));
        // Unknown options are kept and skipped.
        b[24] = 200;
        assert!(NdiscRepr::parse(&b).is_ok());
        assert_eq!(NdiscRepr::parse(&b[..23]), Err(Error::Truncated));
        assert_eq!(NdiscRepr::parse(&[128, 0, 0, 0]), Err(Error::Unsupported));
        assert_eq!(NdiscRepr::parse(&[]), Err(Error::Truncated));
    }

    #[test]
    fn redirect_is_parsed() {
        let r = NdiscRepr::Redirect {
            target: a("fe80::1"),
            dst: a("2001:2:9::1"),
            lladdr: None,
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b).unwrap();
        assert_eq!(b.len(), 40);
        assert_eq!(NdiscRepr::parse(&b), Ok(r));
        let rs = NdiscRepr::RouterSolicit { lladdr: Some(MAC) };
        let mut b = vec![0u8; rs.buffer_len()];
        rs.emit(&mut b).unwrap();
        assert_eq!(NdiscRepr::parse(&b), Ok(rs));
    }
}
