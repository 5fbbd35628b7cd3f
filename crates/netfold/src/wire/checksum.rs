//! Internet checksum helpers shared by the TCP and UDP views (RFC 1071, RFC 1624 arithmetic).
//!
//! Every function here works on the *folded, not complemented* 16-bit one's-complement sum that
//! [`crate::mem::checksum`] returns, so partial sums computed elsewhere (for example by a fused
//! copy+checksum kernel while the payload is copied into a packet buffer) can be combined with
//! the header's sum without touching the bytes again. Only [`finish`] complements.
#![warn(missing_docs)]

use super::Ipv4Addr;

/// One's-complement addition of two folded sums (RFC 1071 §2(A): the sum is commutative and
/// associative, so partial sums of even-length, even-offset pieces can be added in any order).
#[inline]
pub fn combine(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    // One end-around carry is enough: 0xffff + 0xffff = 0x1fffe -> 0xfffe + 1 = 0xffff.
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The sum of the IPv4 pseudo-header (RFC 9293 §3.1 for TCP, RFC 768 for UDP): source address,
/// destination address, zero byte, protocol, and the transport length (header + payload).
///
/// `length` is taken as 32 bits so a GSO super-segment longer than 65535 bytes can still be summed
/// (its high half is folded in like any other word); on the wire the field is 16 bits.
pub fn pseudo_header(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u32) -> u16 {
    let s = src.octets();
    let d = dst.octets();
    let words = [
        u16::from_be_bytes([s[0], s[1]]),
        u16::from_be_bytes([s[2], s[3]]),
        u16::from_be_bytes([d[0], d[1]]),
        u16::from_be_bytes([d[2], d[3]]),
        u16::from(protocol),
        (length >> 16) as u16,
        (length & 0xffff) as u16,
    ];
    words.iter().fold(0, |acc, &w| combine(acc, w))
}

/// Turns a folded sum into the value placed in a checksum field: its one's complement
/// (RFC 1071 §1: "the checksum field is the 16-bit one's complement of the one's complement sum").
#[inline]
pub fn finish(sum: u16) -> u16 {
    !sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::checksum;

    #[test]
    fn combine_carries_end_around() {
        assert_eq!(combine(0xffff, 0xffff), 0xffff);
        assert_eq!(combine(0x8000, 0x8000), 0x0001);
        assert_eq!(combine(0x1234, 0), 0x1234);
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
        assert_eq!(pseudo_header(src, dst, 6, 1480), checksum(&bytes));
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 worked example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        let sum = combine(checksum(&data[..4]), checksum(&data[4..]));
        assert_eq!(sum, 0xddf2);
        assert_eq!(finish(sum), 0x220d);
    }
}
