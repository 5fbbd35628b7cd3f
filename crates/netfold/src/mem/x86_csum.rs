//! x86_64 checksum and fused copy+checksum kernels (AVX2, AVX-512).
//!
//! Summation scheme (RFC 1071 §2): x86 loads are little-endian, so the kernels sum
//! LITTLE-endian words and byte-swap once at the end (§2(B) byte-order independence). Each
//! 64-bit lane of a vector is split into its low and high 32-bit halves, which are added into
//! 64-bit lane accumulators (§2(A): 32-bit words fold to the same 16-bit sum since
//! 2^16 = 1 mod 0xffff; §2(C): the lanes are parallel partial sums). No carry is ever lost:
//! a lane receives < 2^32 per add, and callers feed at most [`MAX_CHUNK`] bytes per call.
//!
//! The fused kernels store to an aligned destination exactly like the copy kernels in
//! `x86_copy` (unaligned head and tail vectors, aligned body), but the checksum must count each
//! byte once: the head vector is masked to the bytes before the aligned body, the tail to the
//! bytes after it, and a part that starts at an odd offset is byte-swapped before it is added
//! (RFC 1071 §2(B)).
#![allow(unsafe_code)]

use super::combine::{checksum_combine, fold128};
use core::arch::x86_64::*;

/// Largest input one kernel call sums: keeps every 64-bit lane accumulator far from overflow
/// (< 2^30 / 32 adds of < 2^32 per lane, and the 8 lanes' total < 2^64 for the reduce).
pub(crate) const MAX_CHUNK: usize = 1 << 30;

/// `len` 0xff bytes then zeros (for `len` in 0..=32), loaded from this table at `32 - len`.
static HEAD_MASK: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 32 {
        t[i] = 0xff;
        i += 1;
    }
    t
};

/// Zeros then `len` 0xff bytes at the end (for `len` in 0..=32), loaded from this table at `len`.
static TAIL_MASK: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 32;
    while i < 64 {
        t[i] = 0xff;
        i += 1;
    }
    t
};

/// `vpshufb` control swapping the two bytes of every 16-bit word (per 128-bit lane).
static SWAP16: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = ((i % 16) ^ 1) as u8;
        i += 1;
    }
    t
};

/// Reduces four 64-bit lanes to a folded 16-bit little-endian-word sum.
#[target_feature(enable = "avx2")]
#[inline]
fn fold256(acc: __m256i) -> u16 {
    let mut lanes = [0u64; 4];
    // SAFETY: `lanes` is 32 writable bytes; unaligned store.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc) };
    fold128(lanes.iter().map(|&l| u128::from(l)).sum())
}

/// Adds the two 32-bit halves of every 64-bit lane of `v` into `acc`.
#[target_feature(enable = "avx2")]
#[inline]
fn add_halves256(acc: __m256i, v: __m256i) -> __m256i {
    let lo = _mm256_and_si256(v, _mm256_set1_epi64x(0xffff_ffff));
    let hi = _mm256_srli_epi64::<32>(v);
    _mm256_add_epi64(acc, _mm256_add_epi64(lo, hi))
}

#[target_feature(enable = "avx512f")]
#[inline]
fn add_halves512(acc: __m512i, v: __m512i) -> __m512i {
    let lo = _mm512_and_si512(v, _mm512_set1_epi64(0xffff_ffff));
    let hi = _mm512_srli_epi64::<32>(v);
    _mm512_add_epi64(acc, _mm512_add_epi64(lo, hi))
}

#[target_feature(enable = "avx512f")]
#[inline]
fn fold512(acc: __m512i) -> u16 {
    // Lanes are < 2^59 each (see MAX_CHUNK), so the wrapping 64-bit reduce cannot wrap.
    let s = _mm512_reduce_add_epi64(acc) as u64;
    fold128(u128::from(s))
}

/// Mask of the low `k` bits, `k` in 0..=64.
#[inline(always)]
fn low_mask(k: usize) -> u64 {
    if k >= 64 {
        u64::MAX
    } else {
        (1u64 << k) - 1
    }
}

/// AVX2 little-endian-word sum of `n <= MAX_CHUNK` bytes at `s`.
///
/// # Safety
/// CPU supports AVX2; `s` valid for `n` bytes.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn sum_le_avx2(s: *const u8, n: usize) -> u16 {
    // SAFETY (whole body): loads at offsets i with i + 32 <= n; the tail is passed to the
    // portable code as a slice built from the same valid range.
    unsafe {
        let z = _mm256_setzero_si256();
        let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
        let mut i = 0;
        while i + 128 <= n {
            a0 = add_halves256(a0, _mm256_loadu_si256(s.add(i).cast()));
            a1 = add_halves256(a1, _mm256_loadu_si256(s.add(i + 32).cast()));
            a2 = add_halves256(a2, _mm256_loadu_si256(s.add(i + 64).cast()));
            a3 = add_halves256(a3, _mm256_loadu_si256(s.add(i + 96).cast()));
            i += 128;
        }
        while i + 32 <= n {
            a0 = add_halves256(a0, _mm256_loadu_si256(s.add(i).cast()));
            i += 32;
        }
        let acc = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
        let body = fold256(acc);
        // `i` is a multiple of 32, so the tail starts on the word grid: plain add.
        let tail = super::portable::sum_le(core::slice::from_raw_parts(s.add(i), n - i));
        checksum_combine(body, tail, 0)
    }
}

/// AVX-512 little-endian-word sum of `n <= MAX_CHUNK` bytes at `s`.
///
/// # Safety
/// CPU supports AVX-512 F and BW; `s` valid for `n` bytes.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn sum_le_avx512(s: *const u8, n: usize) -> u16 {
    // SAFETY (whole body): full loads at offsets i with i + 64 <= n; the last partial vector is
    // a masked load that touches only the `n - i` valid bytes (masked-off bytes do not fault).
    unsafe {
        let z = _mm512_setzero_si512();
        let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
        let mut i = 0;
        while i + 256 <= n {
            a0 = add_halves512(a0, _mm512_loadu_si512(s.add(i).cast()));
            a1 = add_halves512(a1, _mm512_loadu_si512(s.add(i + 64).cast()));
            a2 = add_halves512(a2, _mm512_loadu_si512(s.add(i + 128).cast()));
            a3 = add_halves512(a3, _mm512_loadu_si512(s.add(i + 192).cast()));
            i += 256;
        }
        while i + 64 <= n {
            a0 = add_halves512(a0, _mm512_loadu_si512(s.add(i).cast()));
            i += 64;
        }
        if i < n {
            let v = _mm512_maskz_loadu_epi8(low_mask(n - i), s.add(i).cast());
            a1 = add_halves512(a1, v);
        }
        fold512(_mm512_add_epi64(
            _mm512_add_epi64(a0, a1),
            _mm512_add_epi64(a2, a3),
        ))
    }
}

/// AVX2 fused copy and little-endian-word sum of `n <= MAX_CHUNK` bytes.
///
/// # Safety
/// CPU supports AVX2; ranges valid for `n` bytes and non-overlapping.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn copy_sum_le_avx2(d: *mut u8, s: *const u8, n: usize) -> u16 {
    // SAFETY (whole body): small sizes use the copy kernel's bounds and a slice of the valid
    // source; for n > 64, loads/stores are at offsets in [0, n-32], aligned stores at 32-aligned
    // addresses, and mask-table loads read 32 bytes inside the 64-byte tables (offsets 0..=32).
    unsafe {
        if n < 32 {
            super::x86_copy::avx2_raw(d, s, n);
            return super::portable::sum_le(core::slice::from_raw_parts(s, n));
        }
        let first = _mm256_loadu_si256(s.cast());
        let last = _mm256_loadu_si256(s.add(n - 32).cast());
        if n <= 64 {
            _mm256_storeu_si256(d.cast(), first);
            _mm256_storeu_si256(d.add(n - 32).cast(), last);
            let z = _mm256_setzero_si256();
            let head = fold256(add_halves256(z, first));
            // The last vector's first 64-n bytes were summed with `first`: keep only its last
            // n-32 bytes. It starts at offset n-32.
            let tm = _mm256_loadu_si256(TAIL_MASK.as_ptr().add(n - 32).cast());
            let tail = fold256(add_halves256(z, _mm256_and_si256(last, tm)));
            return checksum_combine(head, tail, n - 32);
        }
        let skip = (32 - (d as usize & 31)) & 31;
        let z = _mm256_setzero_si256();
        // Head: bytes [0, skip), at offset 0.
        let hm = _mm256_loadu_si256(HEAD_MASK.as_ptr().add(32 - skip).cast());
        let head = fold256(add_halves256(z, _mm256_and_si256(first, hm)));
        // Body: [skip, i), aligned stores, summed relative to offset `skip`.
        let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
        let mut i = skip;
        while i + 128 <= n {
            let v0 = _mm256_loadu_si256(s.add(i).cast());
            let v1 = _mm256_loadu_si256(s.add(i + 32).cast());
            let v2 = _mm256_loadu_si256(s.add(i + 64).cast());
            let v3 = _mm256_loadu_si256(s.add(i + 96).cast());
            _mm256_store_si256(d.add(i).cast(), v0);
            _mm256_store_si256(d.add(i + 32).cast(), v1);
            _mm256_store_si256(d.add(i + 64).cast(), v2);
            _mm256_store_si256(d.add(i + 96).cast(), v3);
            a0 = add_halves256(a0, v0);
            a1 = add_halves256(a1, v1);
            a2 = add_halves256(a2, v2);
            a3 = add_halves256(a3, v3);
            i += 128;
        }
        while i + 32 <= n {
            let v = _mm256_loadu_si256(s.add(i).cast());
            _mm256_store_si256(d.add(i).cast(), v);
            a0 = add_halves256(a0, v);
            i += 32;
        }
        let body = fold256(_mm256_add_epi64(
            _mm256_add_epi64(a0, a1),
            _mm256_add_epi64(a2, a3),
        ));
        // Tail: bytes [i, n) are the last `rem` bytes of `last`, which starts at offset n-32.
        let rem = n - i;
        let tm = _mm256_loadu_si256(TAIL_MASK.as_ptr().add(rem).cast());
        let tail = fold256(add_halves256(z, _mm256_and_si256(last, tm)));
        _mm256_storeu_si256(d.cast(), first);
        _mm256_storeu_si256(d.add(n - 32).cast(), last);
        let hb = checksum_combine(head, body, skip);
        checksum_combine(hb, tail, n - 32)
    }
}

/// AVX-512 fused copy and little-endian-word sum of `n <= MAX_CHUNK` bytes.
///
/// # Safety
/// CPU supports AVX-512 F and BW; ranges valid for `n` bytes and non-overlapping.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
pub(crate) unsafe fn copy_sum_le_avx512(d: *mut u8, s: *const u8, n: usize) -> u16 {
    // SAFETY (whole body): masked loads/stores touch only the bytes their mask selects, all in
    // [0, n); full loads/stores at offsets in [0, n-64]; aligned stores at 64-aligned addresses.
    unsafe {
        let z = _mm512_setzero_si512();
        if n <= 64 {
            let k = low_mask(n);
            let v = _mm512_maskz_loadu_epi8(k, s.cast());
            _mm512_mask_storeu_epi8(d.cast(), k, v);
            return fold512(add_halves512(z, v));
        }
        let first = _mm512_loadu_si512(s.cast());
        let last = _mm512_loadu_si512(s.add(n - 64).cast());
        let skip = (64 - (d as usize & 63)) & 63;
        // Head bytes [0, skip) are summed in the body's word grid: if skip is odd the body
        // is off the whole's grid by one byte, so the head is byte-swapped within each 16-bit
        // word here and the final sum swapped back (RFC 1071 §2(B)). One reduction in total.
        let mut head = _mm512_maskz_mov_epi8(low_mask(skip), first);
        let odd = skip & 1 == 1;
        if odd {
            head = _mm512_shuffle_epi8(head, _mm512_loadu_si512(SWAP16.as_ptr().cast()));
        }
        let (mut a0, mut a1, mut a2, mut a3) = (add_halves512(z, head), z, z, z);
        let mut i = skip;
        while i + 256 <= n {
            let v0 = _mm512_loadu_si512(s.add(i).cast());
            let v1 = _mm512_loadu_si512(s.add(i + 64).cast());
            let v2 = _mm512_loadu_si512(s.add(i + 128).cast());
            let v3 = _mm512_loadu_si512(s.add(i + 192).cast());
            _mm512_store_si512(d.add(i).cast(), v0);
            _mm512_store_si512(d.add(i + 64).cast(), v1);
            _mm512_store_si512(d.add(i + 128).cast(), v2);
            _mm512_store_si512(d.add(i + 192).cast(), v3);
            a0 = add_halves512(a0, v0);
            a1 = add_halves512(a1, v1);
            a2 = add_halves512(a2, v2);
            a3 = add_halves512(a3, v3);
            i += 256;
        }
        while i + 64 <= n {
            let v = _mm512_loadu_si512(s.add(i).cast());
            _mm512_store_si512(d.add(i).cast(), v);
            a0 = add_halves512(a0, v);
            i += 64;
        }
        if i < n {
            // Tail bytes [i, n): same word parity as the body (i - skip is a multiple of 64).
            let v = _mm512_maskz_loadu_epi8(low_mask(n - i), s.add(i).cast());
            a1 = add_halves512(a1, v);
        }
        _mm512_storeu_si512(d.cast(), first);
        _mm512_storeu_si512(d.add(n - 64).cast(), last);
        let sum = fold512(_mm512_add_epi64(
            _mm512_add_epi64(a0, a1),
            _mm512_add_epi64(a2, a3),
        ));
        if odd {
            sum.swap_bytes()
        } else {
            sum
        }
    }
}
