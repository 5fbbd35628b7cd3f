//! Internet checksum arithmetic for the header views (RFC 1071, RFC 1624), under short names.
//!
//! The arithmetic itself lives in one place, [`crate::mem`] (`mem/combine.rs`, beside the
//! summing kernels); this module only re-exports it with names that say what each does and
//! types the pseudo-header's protocol. Every function works on the *folded, not complemented*
//! 16-bit one's-complement sum that [`crate::mem::checksum`] returns, so partial sums computed
//! elsewhere (for example by a fused copy+checksum kernel while the payload is copied into a
//! packet buffer) can be added to the header's sum without touching the bytes again. Only
//! [`finish`] complements.
#![warn(missing_docs)]

use super::{IpProtocol, Ipv4Addr};
use std::net::{IpAddr, Ipv6Addr};

/// One's-complement addition of two folded sums (RFC 1071 §2(A)).
pub use crate::mem::checksum_add as add;
/// Sum of a concatenation `A || B` from the sums of its parts and `A`'s length (RFC 1071 §2(B)).
pub use crate::mem::checksum_concat as concat;
/// Field value from a folded sum: its one's complement (RFC 1071 §1).
pub use crate::mem::checksum_finish as finish;
/// RFC 1624 §3 incremental update of a checksum field.
pub use crate::mem::checksum_update as update;

/// The sum of the IPv4 pseudo-header (RFC 9293 §3.1 for TCP, RFC 768 for UDP): source address,
/// destination address, zero byte, protocol, and the transport length (header + payload).
///
/// `length` is taken as 32 bits so a GSO super-segment longer than 65535 bytes can still be summed
/// (its high half is folded in like any other word); on the wire the field is 16 bits.
#[inline]
pub fn pseudo_header(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, length: u32) -> u16 {
    crate::mem::ipv4_pseudo_header_sum(src, dst, u8::from(protocol), length)
}

/// The sum of the IPv6 pseudo-header (RFC 8200 §8.1) for TCP, UDP and ICMPv6: source,
/// destination, 32-bit upper-layer length, three zero bytes and the next header.
#[inline]
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, protocol: IpProtocol, length: u32) -> u16 {
    crate::mem::ipv6_pseudo_header_sum(src, dst, u8::from(protocol), length)
}

/// The pseudo-header sum for either family, for the transport code that serves both.
///
/// A mixed pair (one v4, one v6 address) has no pseudo-header; it is a caller's bug, and the
/// v4-mapped form of the v4 address is used so the result is at least deterministic.
///
/// Inlined with the IPv4 sum in place and the IPv6 one behind a call, so the IPv4 per-packet
/// paths (GSO pieces, the receive check) cost what `pseudo_header` did.
#[inline(always)]
pub fn pseudo_header_ip(src: IpAddr, dst: IpAddr, protocol: IpProtocol, length: u32) -> u16 {
    if let (IpAddr::V4(s), IpAddr::V4(d)) = (src, dst) {
        return pseudo_header(s, d, protocol, length);
    }
    pseudo_header_other(src, dst, protocol, length)
}

#[inline(never)]
fn pseudo_header_other(src: IpAddr, dst: IpAddr, protocol: IpProtocol, length: u32) -> u16 {
    pseudo_header_v6(to_v6(src), to_v6(dst), protocol, length)
}

fn to_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::checksum;

    #[test]
    fn add_carries_end_around() {
        assert_eq!(add(0xffff, 0xffff), 0xffff);
        assert_eq!(add(0x8000, 0x8000), 0x0001);
        assert_eq!(add(0x1234, 0), 0x1234);
    }

    #[test]
    fn pseudo_header_matches_summing_its_bytes() {
        let src = Ipv4Addr::new(198, 18, 0, 1);
        let dst = Ipv4Addr::new(198, 19, 255, 254);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&[0, 6]);
        bytes.extend_from_slice(&1480u16.to_be_bytes());
        assert_eq!(
            pseudo_header(src, dst, IpProtocol::Tcp, 1480),
            checksum(&bytes)
        );
    }

    #[test]
    fn v6_pseudo_header_matches_summing_its_bytes() {
        let src: Ipv6Addr = "2001:db8:1::2".parse().unwrap();
        let dst: Ipv6Addr = "fe80::ffff:1:8000:fffe".parse().unwrap();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&70_000u32.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 17]);
        assert_eq!(
            pseudo_header_v6(src, dst, IpProtocol::Udp, 70_000),
            checksum(&bytes)
        );
        assert_eq!(
            pseudo_header_ip(src.into(), dst.into(), IpProtocol::Udp, 70_000),
            checksum(&bytes)
        );
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 worked example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        let sum = add(checksum(&data[..4]), checksum(&data[4..]));
        assert_eq!(sum, 0xddf2);
        assert_eq!(finish(sum), 0x220d);
    }
}
