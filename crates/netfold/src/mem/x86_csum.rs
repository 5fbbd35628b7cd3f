//! x86_64 checksum and fused copy+checksum kernels (AVX2, AVX-512).
//!
//! Summation scheme (RFC 1071 §2): x86 loads are little-endian, so the kernels sum
//! LITTLE-endian words and byte-swap once at the end (§2(B) byte-order independence). The
//! 16-bit words are summed as 32-bit words (§2(A): they fold to the same 16-bit sum since
//! 2^16 = 1 mod 0xffff) in 64-bit vector lanes (§2(C): the lanes are parallel partial sums).
//! AVX2 splits each 64-bit lane into its two 32-bit halves and adds both (4 ops per vector);
//! AVX-512 uses [`Acc3`] (3 ops per vector). No carry is ever lost: callers feed at most
//! [`MAX_CHUNK`] bytes per call, far below any lane overflow.
//!
//! The AVX2 fused kernel stores to an aligned destination exactly like the AVX2 copy in
//! `x86_copy` (unaligned head and tail vectors, aligned body), but the checksum must count each
//! byte once: the head vector is masked to the bytes before the aligned body, the tail to the
//! bytes after it, and a part that starts at an odd offset is byte-swapped before it is added
//! (RFC 1071 §2(B)). The AVX-512 loops (sum-only here, fused in `x86_fused`) are written once
//! in `x86_fused` over the [`SumAcc`] accumulator defined here ([`Acc3Pair`]); the VNNI sum
//! keeps its own loop (see [`sum_le_avx512_vnni`]).
#![allow(unsafe_code)]

use super::combine::{checksum_concat, fold128};
use super::x86_copy::low_mask;
use super::x86_fused::{sum_le, SumAcc};
use core::arch::x86_64::*;

/// Largest input one kernel call sums: keeps every 64-bit lane accumulator far from overflow
/// (< 2^28 / 32 adds of < 2^32 per lane, and the 8 lanes' total < 2^64 for the reduce; the
/// VNNI kernels' 32-bit lanes gain < 2^10 per 64-byte vector: < 2^32 over 2^22 vectors).
pub(crate) const MAX_CHUNK: usize = 1 << 28;

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
pub(crate) static SWAP16: [u8; 64] = {
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
    fold64_short(s)
}

/// Folds a 64-bit sum to 16 bits with end-around carry in two steps (64 -> 32 -> 16 bits, each
/// one add plus its carry): the same value as `combine::fold64`/`fold128`, in a dependency
/// chain about half as long. At packet sizes the end of a checksum is on the critical path:
/// measured on an AMD Zen 4, the reduction and fold were a quarter of a 1448-byte fused copy.
#[inline(always)]
pub(crate) fn fold64_short(x: u64) -> u16 {
    let (s, c) = (x as u32).overflowing_add((x >> 32) as u32);
    // No overflow: with a carry, s <= 2^32 - 2.
    let s = s + u32::from(c);
    let (t, c) = (s as u16).overflowing_add((s >> 16) as u16);
    // Likewise t <= 2^16 - 2 when there was a carry.
    t + u16::from(c)
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
        checksum_concat(body, tail, 0)
    }
}

/// AVX-512 little-endian-word sum of `n <= MAX_CHUNK` bytes at `s`, three ops per vector
/// ([`Acc3`]).
///
/// # Safety
/// CPU supports AVX-512 F and BW; `s` valid for `n` bytes.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn sum_le_avx512(s: *const u8, n: usize) -> u16 {
    // SAFETY: the features are enabled here; `n <= MAX_CHUNK = Acc3Pair::SEG`.
    unsafe { sum_le::<Acc3Pair>(s, n) }
}

/// AVX2 fused copy and little-endian-word sum of `n <= MAX_CHUNK` bytes.
///
/// Copy side exactly as `x86_copy::avx2_raw` (the copy that measured fastest at 1448 bytes on
/// an AMD Zen 4): first and last 32 bytes with unaligned stores overlapping a 32-aligned body.
/// Sum side: three ops per vector ([`Acc3y`], the AVX2 twin of [`Acc3`]), two accumulators
/// (a vector add has one cycle of latency, so two chains keep the adders busy), and ONE
/// reduction at the end: the head bytes [0, skip) and the tail bytes are masked out of the
/// first and last vectors and summed in the body's word grid (byte-swapped within each word
/// when they sit an odd number of bytes off it, RFC 1071 §2(B)), like the AVX-512 kernel.
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
            return checksum_concat(head, tail, n - 32);
        }
        let skip = (32 - (d as usize & 31)) & 31;
        let swap = _mm256_loadu_si256(SWAP16.as_ptr().cast());
        // Head: bytes [0, skip) of `first`, at offset 0: off the body grid iff skip is odd.
        let hm = _mm256_loadu_si256(HEAD_MASK.as_ptr().add(32 - skip).cast());
        let mut head = _mm256_and_si256(first, hm);
        let odd = skip & 1 == 1;
        if odd {
            head = _mm256_shuffle_epi8(head, swap);
        }
        let mut a0 = Acc3y::new();
        let mut a1 = Acc3y::new();
        a0.add(head);
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
            a0.add(v0);
            a1.add(v1);
            a0.add(v2);
            a1.add(v3);
            i += 128;
        }
        while i + 32 <= n {
            let v = _mm256_loadu_si256(s.add(i).cast());
            _mm256_store_si256(d.add(i).cast(), v);
            a0.add(v);
            i += 32;
        }
        // Tail: bytes [i, n) are the last `rem` bytes of `last`, which starts at offset n-32;
        // i - skip is a multiple of 32, so `last` is off the body grid iff rem is odd.
        let rem = n - i;
        let tm = _mm256_loadu_si256(TAIL_MASK.as_ptr().add(rem).cast());
        let mut tail = _mm256_and_si256(last, tm);
        if rem & 1 == 1 {
            tail = _mm256_shuffle_epi8(tail, swap);
        }
        a1.add(tail);
        _mm256_storeu_si256(d.cast(), first);
        _mm256_storeu_si256(d.add(n - 32).cast(), last);
        let sum = fold256_reg(Acc3y::merge(a0, a1).lanes());
        if odd {
            sum.swap_bytes()
        } else {
            sum
        }
    }
}

/// Reduces four 64-bit lanes (each < 2^56, so their sum cannot wrap) in registers.
#[target_feature(enable = "avx2")]
#[inline]
fn fold256_reg(acc: __m256i) -> u16 {
    let x = _mm_add_epi64(
        _mm256_castsi256_si128(acc),
        _mm256_extracti128_si256::<1>(acc),
    );
    let y = _mm_add_epi64(x, _mm_unpackhi_epi64(x, x));
    fold64_short(_mm_cvtsi128_si64(y) as u64)
}

/// Stamps out the three-op accumulator at one vector width (the same scheme for AVX2 and
/// AVX-512; the intrinsics and the `target_feature` are what differ).
macro_rules! acc3 {
    ($(#[$doc:meta])* $name:ident, $v:ty, $feat:literal, $zero:ident, $add:ident, $sub:ident,
     $srli:ident, $slli:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        struct $name {
            full: $v,
            hi: $v,
        }

        impl $name {
            #[target_feature(enable = $feat)]
            #[inline]
            fn new() -> Self {
                $name {
                    full: $zero(),
                    hi: $zero(),
                }
            }
            #[target_feature(enable = $feat)]
            #[inline]
            fn add(&mut self, v: $v) {
                self.full = $add(self.full, v);
                self.hi = $add(self.hi, $srli::<32>(v));
            }
            /// One accumulator holding the sums of two: `full` and `hi` are plain sums, so
            /// they add (mod 2^64 for `full`, exactly for `hi`), and `lanes()` of the merged
            /// accumulator equals the sum of the two `lanes()`. Two adds per pair instead of
            /// a `lanes()` (three ops) per accumulator: a shorter dependency chain after the
            /// loop, which matters at packet sizes (a 1448-byte sum is only 23 vectors).
            #[target_feature(enable = $feat)]
            #[inline]
            fn merge(a: Self, b: Self) -> Self {
                $name {
                    full: $add(a.full, b.full),
                    hi: $add(a.hi, b.hi),
                }
            }
            /// Per-lane exact sum of all 32-bit halves (each lane < 2^64).
            #[target_feature(enable = $feat)]
            #[inline]
            fn lanes(self) -> $v {
                let lo = $sub(self.full, $slli::<32>(self.hi));
                $add(lo, self.hi)
            }
        }
    };
}

acc3!(
    /// Sum of the 32-bit halves of every 64-bit lane in three ops per vector instead of four:
    /// `full` adds whole 64-bit lanes (the low halves' carries spill into the high half, mod
    /// 2^64), `hi` adds the high halves exactly. Then the low halves' exact sum is
    /// `full - (hi << 32)` (mod 2^64, exact because it is < 2^64 for `n <= MAX_CHUNK`).
    Acc3,
    __m512i,
    "avx512f",
    _mm512_setzero_si512,
    _mm512_add_epi64,
    _mm512_sub_epi64,
    _mm512_srli_epi64,
    _mm512_slli_epi64
);
acc3!(
    /// [`Acc3`] in 256-bit vectors (a lane sums at most 2^23 vectors' halves, < 2^56).
    Acc3y,
    __m256i,
    "avx2",
    _mm256_setzero_si256,
    _mm256_add_epi64,
    _mm256_sub_epi64,
    _mm256_srli_epi64,
    _mm256_slli_epi64
);

/// Two [`Acc3`]s as one [`SumAcc`]: a kernel's two accumulators hold four independent
/// chains, which the generic bodies feed as `a0.add2(v0, v1); a1.add2(v2, v3)` (four vector
/// adds in flight, as the adders need) and merge with ONE reduction at the end.
#[derive(Clone, Copy)]
pub(crate) struct Acc3Pair {
    x: Acc3,
    y: Acc3,
}

impl SumAcc for Acc3Pair {
    /// Exact up to [`MAX_CHUNK`] (see [`Acc3`]), which callers never exceed: one segment.
    const SEG: usize = MAX_CHUNK;
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn new() -> Self {
        Acc3Pair {
            x: Acc3::new(),
            y: Acc3::new(),
        }
    }
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add1(&mut self, v: __m512i) {
        self.x.add(v);
    }
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add2(&mut self, a: __m512i, b: __m512i) {
        self.x.add(a);
        self.y.add(b);
    }
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn finish(a: Self, b: Self) -> u16 {
        fold512(Acc3::merge(Acc3::merge(a.x, a.y), Acc3::merge(b.x, b.y)).lanes())
    }
}

/// `vpdpbusd` weights picking the low (even-offset) byte of every little-endian 16-bit word.
#[target_feature(enable = "avx512f")]
#[inline]
fn w_lo() -> __m512i {
    _mm512_set1_epi32(0x0001_0001)
}

/// `vpdpbusd` weights picking the high (odd-offset) byte of every 16-bit word.
#[target_feature(enable = "avx512f")]
#[inline]
fn w_hi() -> __m512i {
    _mm512_set1_epi32(0x0100_0100)
}

/// AVX-512 VNNI little-endian-word sum: two `vpdpbusd` per vector (unsigned bytes times 0/1
/// weights, four products added into each 32-bit lane) accumulate the even and odd bytes
/// separately; sum = even + 256 * odd. Two vector ops per 64 bytes instead of four. A lane
/// gains at most 510 per op, so `n <= MAX_CHUNK` (2^24 vectors) cannot wrap it.
///
/// Its loop is the shape of `x86_fused::sum_run` but kept written out: as an instance of
/// `sum_le` (a `SumAcc` holding two even/odd pairs) it measured 2-3% slower at 1448 bytes in
/// every alternating A/B on an AMD Zen 5 (0.967, 0.979, 0.967 and 0.968 of this loop, against
/// 0.99-1.01 for the kernels whose code was unchanged), from a different register and block
/// layout of the one-vector loop and the reduction.
///
/// # Safety
/// CPU supports AVX-512 F, BW and VNNI; `s` valid for `n` bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(crate) unsafe fn sum_le_avx512_vnni(s: *const u8, n: usize) -> u16 {
    // SAFETY (whole body): as `sum_le_avx512`.
    unsafe {
        let z = _mm512_setzero_si512();
        let (wl, wh) = (w_lo(), w_hi());
        // Eight independent accumulators: `vpdpbusd` has a multi-cycle latency through its
        // accumulator, so fewer chains would serialise.
        let (mut l0, mut h0, mut l1, mut h1) = (z, z, z, z);
        let (mut l2, mut h2, mut l3, mut h3) = (z, z, z, z);
        let mut i = 0;
        while i + 256 <= n {
            let v0 = _mm512_loadu_si512(s.add(i).cast());
            let v1 = _mm512_loadu_si512(s.add(i + 64).cast());
            let v2 = _mm512_loadu_si512(s.add(i + 128).cast());
            let v3 = _mm512_loadu_si512(s.add(i + 192).cast());
            l0 = _mm512_dpbusd_epi32(l0, v0, wl);
            h0 = _mm512_dpbusd_epi32(h0, v0, wh);
            l1 = _mm512_dpbusd_epi32(l1, v1, wl);
            h1 = _mm512_dpbusd_epi32(h1, v1, wh);
            l2 = _mm512_dpbusd_epi32(l2, v2, wl);
            h2 = _mm512_dpbusd_epi32(h2, v2, wh);
            l3 = _mm512_dpbusd_epi32(l3, v3, wl);
            h3 = _mm512_dpbusd_epi32(h3, v3, wh);
            i += 256;
        }
        while i + 64 <= n {
            let v = _mm512_loadu_si512(s.add(i).cast());
            l0 = _mm512_dpbusd_epi32(l0, v, wl);
            h0 = _mm512_dpbusd_epi32(h0, v, wh);
            i += 64;
        }
        if i < n {
            let v = _mm512_maskz_loadu_epi8(low_mask(n - i), s.add(i).cast());
            l1 = _mm512_dpbusd_epi32(l1, v, wl);
            h1 = _mm512_dpbusd_epi32(h1, v, wh);
        }
        // Lanes < 2^32 each (see MAX_CHUNK); add pairs in 64-bit lanes to stay exact.
        let lo = _mm512_add_epi64(
            _mm512_add_epi64(add_halves512(z, l0), add_halves512(z, l1)),
            _mm512_add_epi64(add_halves512(z, l2), add_halves512(z, l3)),
        );
        let hi = _mm512_add_epi64(
            _mm512_add_epi64(add_halves512(z, h0), add_halves512(z, h1)),
            _mm512_add_epi64(add_halves512(z, h2), add_halves512(z, h3)),
        );
        fold512(_mm512_add_epi64(lo, _mm512_slli_epi64::<8>(hi)))
    }
}
