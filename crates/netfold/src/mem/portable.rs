//! Portable (safe, any-architecture) kernels: the fallback on CPUs without the SIMD kernels and
//! the reference the SIMD kernels are tested against.

use super::combine::{checksum_concat, fold128, fold64};

/// Copies `src` into `dst` (same length) with 64-bit words, eight per iteration.
pub(crate) fn copy_words(dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (dc, sc) in (&mut d).zip(&mut s) {
        dc.copy_from_slice(sc);
    }
    d.into_remainder().copy_from_slice(s.remainder());
}

/// RFC 1071 sum of `data` as little-endian 64-bit words accumulated in a 128-bit integer (the
/// compiler emits add/adc, the "64-bit add-with-carry" loop), returned in LITTLE-endian word
/// semantics: the caller byte-swaps. RFC 1071 §2(B): the sum is byte-order independent up to a
/// final swap, and §2(A): wider words fold to the same 16-bit sum.
pub(crate) fn sum_le(data: &[u8]) -> u16 {
    let mut acc: u128 = 0;
    let mut chunks = data.chunks_exact(32);
    for c in &mut chunks {
        // Four independent words per iteration; the u128 adds keep every carry.
        let w0 = u64::from_le_bytes(c[0..8].try_into().unwrap_or([0; 8]));
        let w1 = u64::from_le_bytes(c[8..16].try_into().unwrap_or([0; 8]));
        let w2 = u64::from_le_bytes(c[16..24].try_into().unwrap_or([0; 8]));
        let w3 = u64::from_le_bytes(c[24..32].try_into().unwrap_or([0; 8]));
        acc += u128::from(w0) + u128::from(w1) + u128::from(w2) + u128::from(w3);
    }
    acc += u128::from(sum_le_words32(chunks.remainder()));
    fold128(acc)
}

/// Unfolded sum of `data` as little-endian 32-bit words (the last one zero-padded), for short
/// inputs and tails: no memcpy, no 128-bit arithmetic. In little-endian order the pad goes to
/// the high bytes, which after the final byte swap matches RFC 1071's "pad with a zero byte
/// at the end". Exact for any input shorter than 2^34 bytes.
#[inline]
pub(crate) fn sum_le_words32(data: &[u8]) -> u64 {
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    }
    acc += match *words.remainder() {
        [a] => u64::from(a),
        [a, b] => u64::from(u16::from_le_bytes([a, b])),
        [a, b, c] => u64::from(u32::from_le_bytes([a, b, c, 0])),
        _ => 0,
    };
    acc
}

/// RFC 1071 checksum of a short input: 16-bit little-endian words into a 32-bit accumulator
/// (cannot overflow below 2^17 bytes; callers pass <= 64), a shape the compiler vectorises.
#[inline]
pub(crate) fn checksum_small(data: &[u8]) -> u16 {
    debug_assert!(data.len() < 1 << 17);
    let mut acc: u32 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u32::from(u16::from_le_bytes([w[0], w[1]]));
    }
    if let [b] = *words.remainder() {
        acc += u32::from(b);
    }
    fold64(u64::from(acc)).swap_bytes()
}
/// RFC 1071 checksum (big-endian word semantics, folded, not complemented).
pub(crate) fn checksum(data: &[u8]) -> u16 {
    sum_le(data).swap_bytes()
}

/// Copies and sums. Portable code cannot fuse usefully without SIMD, so it copies in
/// cache-sized blocks and sums each block while it is still in L1.
pub(crate) fn copy_with_checksum(dst: &mut [u8], src: &[u8]) -> u16 {
    const BLOCK: usize = 4096; // even, so blocks never shift the word grid
    let mut sum = 0u16;
    let mut done = 0usize;
    for (d, s) in dst.chunks_mut(BLOCK).zip(src.chunks(BLOCK)) {
        copy_words(d, s);
        sum = checksum_concat(sum, checksum(s), done);
        done += s.len();
    }
    sum
}
