//! x86_64 AVX-512 fused copy+checksum kernels: each copy strategy (unaligned loads and aligned
//! stores; the VBMI aligned-both-sides copy; `rep movsb` chunks summed after) is written ONCE as
//! a generic body over an accumulator ([`SumAcc`]), and [`fused_kernel!`] stamps out one kernel
//! per (strategy, accumulator, CPU features). Accumulators: `x86_csum::Acc3Pair` (3 ops per
//! vector; the `avx512` and `avx512-vbmi` fused kernels), [`AccTop`] (2.5 ops; the
//! `*-topm` and `rep-movsb-chunk` kernels), and [`NoSum`], with which the VBMI body is the
//! plain VBMI copy. Calibration times them all on whatever CPU runs them.
//!
//! Summation scheme ([`AccTop`]): a 64-bit add of the whole vector (mod 2^64) plus the exact sum
//! of only the TOP 16-bit word of every 64-bit lane, with the top words of TWO vectors packed
//! into the two 32-bit halves of each lane (a 64-bit shift and a masked 32-bit shift) and added
//! once: 2.5 vector ops per 64 bytes instead of `x86_csum::Acc3`'s 3. Why it is exact: per
//! lane, the true sum of the added words is `T * 2^48 + R` with `T` the sum of top words and
//! `R` the sum of the low 48 bits of every added word; with at most 2^16 words per lane
//! `R < 2^64`, so `R = full - (T << 48)` mod 2^64, and `2^48 = 1 (mod 0xffff)` makes the
//! one's-complement sum `R + T`. Every kernel therefore sums at most [`SEG`] bytes per
//! accumulator life and combines segments with `checksum_add`.
//!
//! Measured on an AMD EPYC Zen 5 (family 26): the scheme beats `Acc3` in the steady state
//! (16 KiB in L1: 191 vs 180 GB/s with the VBMI copy), not at 1448 bytes; calibration decides
//! per size class. Tried and dropped (slower here at every size, see docs/BENCHMARKS.md): the
//! same scheme with a `vpermt2b` pack (2 ops), `vpdpwssd` on words XOR 0x8000 (2 ops), masked
//! loads of the high halves or top words instead of shifts, a store-and-scalar final reduce.
#![allow(unsafe_code)]

use super::combine::checksum_add;
use super::x86_copy::{low_mask, IOTA};
use super::x86_csum::{fold64_short, Acc3Pair, MAX_CHUNK, SWAP16};
use core::arch::x86_64::*;

/// Bytes summed into one pair of accumulators: at most 2^14 + 2 vectors per lane, below the
/// 2^16 words per lane that [`AccTop`] allows.
pub(crate) const SEG: usize = 1 << 20;

/// An exact accumulator of little-endian 16-bit words: the kernel bodies below are written once
/// against this trait and instantiated with each scheme ([`AccTop`], `x86_csum::Acc3Pair`,
/// and [`NoSum`] for the plain VBMI copy).
///
/// # Safety
/// Every method requires the CPU features of the implementation's `target_feature`s; at most
/// [`SumAcc::SEG`] bytes (plus two partial vectors) may be added between `new` and `finish`.
pub(crate) trait SumAcc: Copy {
    /// Bytes one pair of accumulators can sum exactly; kernels split longer inputs into
    /// segments of this size and add the segments' sums.
    const SEG: usize;
    /// False only for [`NoSum`]: a head vector that is not summed need not be zero-masked.
    const SUMS: bool = true;
    /// An empty accumulator.
    unsafe fn new() -> Self;
    /// Adds one vector.
    unsafe fn add1(&mut self, v: __m512i);
    /// Adds two vectors.
    unsafe fn add2(&mut self, a: __m512i, b: __m512i);
    /// Folded 16-bit sum of every word added to `a` and to `b`.
    unsafe fn finish(a: Self, b: Self) -> u16;
}

/// 2.5 ops per vector: `f0 += a; f1 += b; top += pack(a >> 48, b's top words)`. Two `full`
/// registers so that a pair's adds do not chain; `top`'s 32-bit halves hold exact sums of top
/// words (< 2^15 * 2^16 per half).
#[derive(Clone, Copy)]
pub(crate) struct AccTop {
    f0: __m512i,
    f1: __m512i,
    top: __m512i,
}

impl SumAcc for AccTop {
    const SEG: usize = SEG;
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn new() -> Self {
        let z = _mm512_setzero_si512();
        AccTop {
            f0: z,
            f1: z,
            top: z,
        }
    }
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add1(&mut self, v: __m512i) {
        self.f0 = _mm512_add_epi64(self.f0, v);
        self.top = _mm512_add_epi64(self.top, _mm512_srli_epi64::<48>(v));
    }
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add2(&mut self, a: __m512i, b: __m512i) {
        self.f0 = _mm512_add_epi64(self.f0, a);
        self.f1 = _mm512_add_epi64(self.f1, b);
        // Even 32-bit halves: a's top word (a >> 48); odd halves: b's high half >> 16, i.e.
        // b's top word.
        let t = _mm512_mask_srli_epi32::<16>(_mm512_srli_epi64::<48>(a), 0xaaaa, b);
        self.top = _mm512_add_epi32(self.top, t);
    }
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn finish(a: Self, b: Self) -> u16 {
        let full = _mm512_add_epi64(_mm512_add_epi64(a.f0, a.f1), _mm512_add_epi64(b.f0, b.f1));
        // Exact: each 32-bit half holds < 2^15 top words (add1 adds into the even halves
        // only, as a 64-bit add of a value < 2^16, which cannot carry into the odd half).
        let top = _mm512_add_epi32(a.top, b.top);
        let m32 = _mm512_set1_epi64(0xffff_ffff);
        let t = _mm512_add_epi64(_mm512_and_si512(top, m32), _mm512_srli_epi64::<32>(top));
        let r = _mm512_sub_epi64(full, _mm512_slli_epi64::<48>(t));
        // r < 2^64 and t < 2^32: fold r's halves so the 8-lane reduce cannot wrap (< 2^37).
        let lanes = _mm512_add_epi64(
            _mm512_add_epi64(_mm512_and_si512(r, m32), _mm512_srli_epi64::<32>(r)),
            t,
        );
        fold64_short(_mm512_reduce_add_epi64(lanes) as u64)
    }
}

/// Sums nothing: [`vbmi_seg`] with this accumulator is the plain VBMI copy
/// (`x86_copy::avx512_vbmi_body`); every method is empty, so no sum instruction is emitted.
#[derive(Clone, Copy)]
pub(crate) struct NoSum;

impl SumAcc for NoSum {
    const SEG: usize = usize::MAX;
    const SUMS: bool = false;
    #[inline(always)]
    unsafe fn new() -> Self {
        NoSum
    }
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add1(&mut self, _: __m512i) {}
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add2(&mut self, _: __m512i, _: __m512i) {}
    #[inline(always)]
    unsafe fn finish(_: Self, _: Self) -> u16 {
        0
    }
}

/// Byte-swaps every 16-bit word of `v` when `odd`: a part that sits an odd number of bytes off
/// the body's word grid is summed swapped (RFC 1071 §2(B)).
///
/// # Safety
/// CPU supports AVX-512 F and BW.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn swap_if(odd: bool, v: __m512i) -> __m512i {
    if odd {
        // SAFETY: SWAP16 is 64 readable bytes.
        _mm512_shuffle_epi8(v, unsafe { _mm512_loadu_si512(SWAP16.as_ptr().cast()) })
    } else {
        v
    }
}

/// Copies the partial first destination line [0, skip) with a masked store and adds it to
/// `acc` in the body's word grid (swapped if `skip` is odd; the kernel swaps its total back).
///
/// # Safety
/// CPU supports AVX-512 F and BW (and `A`'s features); ranges valid for `skip <= 64` bytes.
#[inline(always)]
unsafe fn copy_head<A: SumAcc>(acc: &mut A, d: *mut u8, s: *const u8, skip: usize) {
    // SAFETY: the masked store writes only [0, skip); the masked load reads only [0, skip);
    // the full load (copy only) reads 64 bytes, which callers guarantee are valid (n > 256).
    unsafe {
        let k = low_mask(skip);
        let v = if A::SUMS {
            // The sum must see zeros beyond the head.
            _mm512_maskz_loadu_epi8(k, s.cast())
        } else {
            _mm512_loadu_si512(s.cast())
        };
        _mm512_mask_storeu_epi8(d.cast(), k, v);
        acc.add1(swap_if(skip & 1 == 1, v));
    }
}

/// Copies the partial last destination line [0, r) (`r <= 64`) with a masked load and store
/// and adds it to `acc` (same word parity as the body: the caller's offset is `skip` plus a
/// multiple of 64).
///
/// # Safety
/// CPU supports AVX-512 F and BW (and `A`'s features); ranges valid for `r` bytes.
#[inline(always)]
unsafe fn copy_tail<A: SumAcc>(acc: &mut A, d: *mut u8, s: *const u8, r: usize) {
    // SAFETY: masked accesses touch only [0, r).
    unsafe {
        let k = low_mask(r);
        let v = _mm512_maskz_loadu_epi8(k, s.cast());
        _mm512_mask_storeu_epi8(d.cast(), k, v);
        acc.add1(v);
    }
}

/// Copies one whole destination line to the 64-aligned `d` from `s` (unaligned load) and adds
/// it to `acc`.
///
/// # Safety
/// CPU supports AVX-512 F (and `A`'s features); both valid for 64 bytes, `d` 64-aligned.
#[inline(always)]
unsafe fn copy_line<A: SumAcc>(acc: &mut A, d: *mut u8, s: *const u8) {
    // SAFETY: one unaligned load of [s, s + 64), one aligned store to [d, d + 64).
    unsafe {
        let v = _mm512_loadu_si512(s.cast());
        _mm512_store_si512(d.cast(), v);
        acc.add1(v);
    }
}

/// Stores four whole destination lines at the 64-aligned `d` and adds them, the first two to
/// `a0` and the last two to `a1` (four independent chains with the two-chain accumulators).
///
/// # Safety
/// CPU supports AVX-512 F (and `A`'s features); `d` 64-aligned and valid for 256 bytes.
#[inline(always)]
unsafe fn store4<A: SumAcc>(a0: &mut A, a1: &mut A, d: *mut u8, v: [__m512i; 4]) {
    // SAFETY: four aligned stores inside [d, d + 256).
    unsafe {
        _mm512_store_si512(d.cast(), v[0]);
        _mm512_store_si512(d.add(64).cast(), v[1]);
        _mm512_store_si512(d.add(128).cast(), v[2]);
        _mm512_store_si512(d.add(192).cast(), v[3]);
        a0.add2(v[0], v[1]);
        a1.add2(v[2], v[3]);
    }
}

/// The end of every fused body: the partial last destination line from offset `i`, and the
/// final swap back of a sum taken in a grid one byte off when `skip` is odd (see
/// [`swap_if`]).
///
/// # Safety
/// As the body; `n - i < 64`, `d + i` is 64-aligned and `i - skip` a multiple of 64.
#[inline(always)]
unsafe fn finish_tail<A: SumAcc>(
    mut a0: A,
    a1: A,
    d: *mut u8,
    s: *const u8,
    i: usize,
    n: usize,
    skip: usize,
) -> u16 {
    // SAFETY: the tail's masked accesses touch only [i, n).
    unsafe {
        if i < n {
            copy_tail(&mut a0, d.add(i), s.add(i), n - i);
        }
        let sum = A::finish(a0, a1);
        if skip & 1 == 1 {
            sum.swap_bytes()
        } else {
            sum
        }
    }
}

/// One segment of a fused kernel on the AVX-512 copy with unaligned loads and aligned stores
/// (masked partial first and last destination lines), summed with `A`.
///
/// `#[inline(always)]` and no `target_feature` (Rust does not allow both): a template that is
/// only ever inlined into a `#[target_feature]` kernel, whose features its intrinsics then use.
///
/// # Safety
/// CPU supports AVX-512 F and BW and `A`'s features; `n <= A::SEG`; ranges valid for `n`
/// bytes and non-overlapping.
#[inline(always)]
unsafe fn unaligned_seg<A: SumAcc>(d: *mut u8, s: *const u8, n: usize) -> u16 {
    // SAFETY (whole body): masked loads/stores touch only the bytes their mask selects, all in
    // [0, n); full loads at offsets in [0, n-64]; aligned stores at 64-aligned addresses d+i
    // with i + 64 <= n; at most n/64 + 2 vectors summed.
    unsafe {
        let mut a0 = A::new();
        let mut a1 = A::new();
        if n <= 64 {
            copy_tail(&mut a0, d, s, n);
            return A::finish(a0, a1);
        }
        let skip = (64 - (d as usize & 63)) & 63;
        if skip != 0 {
            copy_head(&mut a0, d, s, skip);
        }
        let mut i = skip;
        while i + 256 <= n {
            let p = s.add(i);
            let v = [
                _mm512_loadu_si512(p.cast()),
                _mm512_loadu_si512(p.add(64).cast()),
                _mm512_loadu_si512(p.add(128).cast()),
                _mm512_loadu_si512(p.add(192).cast()),
            ];
            store4(&mut a0, &mut a1, d.add(i), v);
            i += 256;
        }
        if i + 128 <= n {
            let v0 = _mm512_loadu_si512(s.add(i).cast());
            let v1 = _mm512_loadu_si512(s.add(i + 64).cast());
            _mm512_store_si512(d.add(i).cast(), v0);
            _mm512_store_si512(d.add(i + 64).cast(), v1);
            a0.add2(v0, v1);
            i += 128;
        }
        // At most one whole line is left here (`if`, not the VBMI body's `while`).
        if i + 64 <= n {
            copy_line(&mut a1, d.add(i), s.add(i));
            i += 64;
        }
        finish_tail(a0, a1, d, s, i, n, skip)
    }
}

/// One segment on the VBMI copy (aligned loads AND aligned stores; destination lines
/// assembled with `vpermt2b` from the two aligned source lines they straddle when source and
/// destination disagree modulo 64), summed with `A` over the assembled vectors, which are
/// exactly the bytes stored. With [`NoSum`] it is the plain VBMI copy.
///
/// # Safety
/// CPU supports AVX-512 F, BW and VBMI and `A`'s features; `256 < n <= A::SEG`; ranges valid
/// for `n` bytes and non-overlapping.
#[inline(always)]
pub(crate) unsafe fn vbmi_seg<A: SumAcc>(d: *mut u8, s: *const u8, n: usize) -> u16 {
    // SAFETY (whole body): let m = source misalignment at the aligned destination offsets.
    // Aligned loads read [s+i-m, s+i-m+64k) only while i >= m and i - m + 64k <= n, so they
    // stay inside `src`; unaligned full loads are at offsets in [0, n-64]; masked loads and
    // stores touch only bytes in [0, n); aligned stores are at d+i with (d+i) % 64 == 0 since
    // i = skip (+ multiples of 64).
    unsafe {
        let skip = (64 - (d as usize & 63)) & 63;
        let m = (s as usize + skip) & 63;
        let mut a0 = A::new();
        let mut a1 = A::new();
        if skip != 0 {
            copy_head(&mut a1, d, s, skip);
        }
        let mut i = skip;
        if m == 0 {
            // Same alignment on both sides: plain aligned loads.
            while i + 256 <= n {
                let p = s.add(i);
                let v = [
                    _mm512_load_si512(p.cast()),
                    _mm512_load_si512(p.add(64).cast()),
                    _mm512_load_si512(p.add(128).cast()),
                    _mm512_load_si512(p.add(192).cast()),
                ];
                store4(&mut a0, &mut a1, d.add(i), v);
                i += 256;
            }
        } else {
            if i < m {
                // The source line holding byte `skip` starts before `src`: one unaligned load.
                copy_line(&mut a0, d.add(i), s.add(i));
                i += 64;
            }
            let idx = _mm512_add_epi8(
                _mm512_loadu_si512(IOTA.as_ptr().cast()),
                _mm512_set1_epi8(m as i8),
            );
            // Aligned source line holding byte i. i - m + 64 <= 127 + 64 < n.
            let mut a = _mm512_load_si512(s.add(i - m).cast());
            while i - m + 320 <= n {
                let p = s.add(i - m);
                let b0 = _mm512_load_si512(p.add(64).cast());
                let b1 = _mm512_load_si512(p.add(128).cast());
                let b2 = _mm512_load_si512(p.add(192).cast());
                let b3 = _mm512_load_si512(p.add(256).cast());
                let v = [
                    _mm512_permutex2var_epi8(a, idx, b0),
                    _mm512_permutex2var_epi8(b0, idx, b1),
                    _mm512_permutex2var_epi8(b1, idx, b2),
                    _mm512_permutex2var_epi8(b2, idx, b3),
                ];
                store4(&mut a0, &mut a1, d.add(i), v);
                a = b3;
                i += 256;
            }
            while i - m + 128 <= n {
                let b = _mm512_load_si512(s.add(i - m + 64).cast());
                let v = _mm512_permutex2var_epi8(a, idx, b);
                _mm512_store_si512(d.add(i).cast(), v);
                a0.add1(v);
                a = b;
                i += 64;
            }
        }
        // Remaining whole destination lines (at most a few), then the partial last line.
        while i + 64 <= n {
            copy_line(&mut a1, d.add(i), s.add(i));
            i += 64;
        }
        finish_tail(a0, a1, d, s, i, n, skip)
    }
}

/// Adds the `len` bytes at `p` to `a0`/`a1` (64-byte vectors; a masked load for the last
/// partial one): the loop of every AVX-512 sum-only pass.
///
/// # Safety
/// CPU supports AVX-512 F and BW and `A`'s features; `p` valid for `len` bytes; the
/// accumulators' [`SumAcc::SEG`] not exceeded.
#[inline(always)]
pub(crate) unsafe fn sum_run<A: SumAcc>(a0: &mut A, a1: &mut A, p: *const u8, len: usize) {
    // SAFETY (whole body): full loads read [p + j, p + j + 64) with j + 64 <= len; the masked
    // tail load only bytes in [p + j, p + len) (masked-off bytes do not fault).
    unsafe {
        let mut j = 0;
        while j + 256 <= len {
            let v0 = _mm512_loadu_si512(p.add(j).cast());
            let v1 = _mm512_loadu_si512(p.add(j + 64).cast());
            let v2 = _mm512_loadu_si512(p.add(j + 128).cast());
            let v3 = _mm512_loadu_si512(p.add(j + 192).cast());
            a0.add2(v0, v1);
            a1.add2(v2, v3);
            j += 256;
        }
        while j + 64 <= len {
            a0.add1(_mm512_loadu_si512(p.add(j).cast()));
            j += 64;
        }
        if j < len {
            a1.add1(_mm512_maskz_loadu_epi8(low_mask(len - j), p.add(j).cast()));
        }
    }
}

/// Little-endian-word sum of `n <= A::SEG` bytes at `s` with accumulator `A`.
///
/// # Safety
/// As [`sum_run`].
#[inline(always)]
pub(crate) unsafe fn sum_le<A: SumAcc>(s: *const u8, n: usize) -> u16 {
    // SAFETY: the caller's contract is `sum_run`'s.
    unsafe {
        let mut a0 = A::new();
        let mut a1 = A::new();
        sum_run(&mut a0, &mut a1, s, n);
        A::finish(a0, a1)
    }
}

/// One segment of the chunked two-pass kernel: `rep movsb` copies `CHUNK` bytes at a time (no
/// read-for-ownership of destination lines, which a vector store loop pays once the buffers
/// outgrow L1), and each chunk is then summed from the copy while it is still cached.
/// `FROM_DST` chooses whether the destination or the source chunk is summed (both hold the
/// same bytes).
///
/// # Safety
/// As [`sum_run`], `n <= A::SEG`, `CHUNK` a multiple of 64; ranges valid for `n` bytes and
/// non-overlapping.
#[inline(always)]
unsafe fn chunk_seg<A: SumAcc, const CHUNK: usize, const FROM_DST: bool>(
    d: *mut u8,
    s: *const u8,
    n: usize,
) -> u16 {
    // SAFETY (whole body): `rep movsb` copies [c, c + len) within both ranges and the sum
    // reads the same range of one of them.
    unsafe {
        let mut a0 = A::new();
        let mut a1 = A::new();
        let mut c = 0;
        while c < n {
            let len = (n - c).min(CHUNK);
            super::x86_copy::rep_movsb_raw(d.add(c), s.add(c), len);
            let p: *const u8 = if FROM_DST { d.add(c) } else { s.add(c) };
            // A partial vector only in the last chunk (CHUNK is a multiple of 64).
            sum_run(&mut a0, &mut a1, p, len);
            c += len;
        }
        A::finish(a0, a1)
    }
}

/// A fused kernel's segment function: `(dst, src, n)`, ranges valid and non-overlapping.
type SegFn = unsafe fn(*mut u8, *const u8, usize) -> u16;

/// Runs a fused kernel over `n <= MAX_CHUNK` bytes in segments of at most `seg_len` bytes
/// (each within one accumulator's exact range; a multiple of 64, so each segment keeps the
/// word grid and the destination alignment) and adds their sums. A last segment `<= min`
/// bytes goes to `small`, for bodies that need more than `min` bytes.
///
/// # Safety
/// `small` and `seg` are callable on this CPU; ranges valid for `n` bytes and non-overlapping.
#[inline(always)]
unsafe fn segments(
    d: *mut u8,
    s: *const u8,
    n: usize,
    seg_len: usize,
    min: usize,
    small: SegFn,
    seg: SegFn,
) -> u16 {
    // SAFETY (whole body): every call gets a sub-range [off, off + len) of both ranges.
    unsafe {
        let mut sum = 0u16;
        let mut off = 0;
        while n - off > seg_len {
            sum = checksum_add(sum, seg(d.add(off), s.add(off), seg_len));
            off += seg_len;
        }
        let rest = n - off;
        let part = if rest <= min {
            small(d.add(off), s.add(off), rest)
        } else {
            seg(d.add(off), s.add(off), rest)
        };
        checksum_add(sum, part)
    }
}

/// Stamps out one fused kernel `$name` (any `n <= MAX_CHUNK`) and its segment function `$seg`
/// from the generic body `$body` with accumulator `$acc`, under the CPU features `$feat`: the
/// one thing that differs per kernel and that a generic function cannot take. Sizes `<= $min`
/// go to `$small`, a kernel needing a subset of `$feat` (without them: the body takes every
/// size). An accumulator exact over all of MAX_CHUNK gets the body inline in the kernel, with
/// no segment loop and no call: at packet sizes a call is a measurable part of the time.
macro_rules! fused_kernel {
    ($name:ident, $seg:ident, $feat:literal, $acc:ty, $body:expr) => {
        fused_kernel!($name, $seg, $feat, $acc, $body, small: $seg, min: 0);
    };
    ($name:ident, $seg:ident, $feat:literal, $acc:ty, $body:expr, small: $small:ident, min: $min:expr) => {
        /// Fused copy and little-endian-word sum of `n <= MAX_CHUNK` bytes (see the module
        /// comment and the body's).
        ///
        /// # Safety
        /// CPU supports the `target_feature`s listed; ranges valid for `n` bytes and
        /// non-overlapping.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name(d: *mut u8, s: *const u8, n: usize) -> u16 {
            // `$min` is a constant: without a `$small`, no test remains.
            if $min > 0 && n <= $min {
                // SAFETY: same contract; `$small` needs a subset of these features.
                return unsafe { $small(d, s, n) };
            }
            if <$acc as SumAcc>::SEG >= MAX_CHUNK {
                // SAFETY: one segment (n <= MAX_CHUNK), above `$min`; features enabled here.
                return unsafe { $body(d, s, n) };
            }
            /// The segment loop, out of line (with a `$small`) so that the small sizes' exit
            /// above is a jump taken before any register is saved (inline, the `rep movsb` kernel saved six
            /// registers first and ran 0.86x at 64 bytes).
            ///
            /// # Safety
            /// As the kernel.
            #[target_feature(enable = $feat)]
            #[inline(never)]
            unsafe fn segmented(d: *mut u8, s: *const u8, n: usize) -> u16 {
                // SAFETY: `$small` and `$seg` need at most the features enabled here; the
                // ranges are the caller's.
                unsafe { segments(d, s, n, <$acc as SumAcc>::SEG, $min, $small, $seg) }
            }
            if $min == 0 {
                // No early exit to keep cheap: the loop inline saves a jump.
                // SAFETY: as in `segmented`.
                return unsafe { segments(d, s, n, <$acc as SumAcc>::SEG, $min, $small, $seg) };
            }
            // SAFETY: the caller's contract; the features are enabled here.
            unsafe { segmented(d, s, n) }
        }

        /// One segment (see [`segments`]).
        ///
        /// # Safety
        /// As the kernel, and within the body's size range.
        #[target_feature(enable = $feat)]
        unsafe fn $seg(d: *mut u8, s: *const u8, n: usize) -> u16 {
            // SAFETY: the caller's contract is the body's; the features are enabled here.
            unsafe { $body(d, s, n) }
        }
    };
}

// The `x86_csum` scheme ([`Acc3Pair`]: 3 ops per vector, one segment up to MAX_CHUNK).
fused_kernel!(
    copy_sum_le_avx512,
    seg_le_avx512,
    "avx512f,avx512bw,avx2",
    Acc3Pair,
    unaligned_seg::<Acc3Pair>
);
fused_kernel!(
    copy_sum_le_avx512_vbmi,
    seg_le_avx512_vbmi,
    "avx512f,avx512bw,avx512vbmi,avx2",
    Acc3Pair,
    vbmi_seg::<Acc3Pair>,
    small: copy_sum_le_avx512,
    min: 256
);
// The 2.5-op scheme ([`AccTop`], segments of SEG bytes).
fused_kernel!(
    copy_sum_avx512_topm,
    seg_avx512_topm,
    "avx512f,avx512bw,avx2",
    AccTop,
    unaligned_seg::<AccTop>
);
fused_kernel!(
    copy_sum_vbmi_topm,
    seg_vbmi_topm,
    "avx512f,avx512bw,avx512vbmi,avx2",
    AccTop,
    vbmi_seg::<AccTop>,
    small: copy_sum_avx512_topm,
    min: 256
);
fused_kernel!(
    copy_sum_rep_movsb_chunk,
    seg_rep_movsb_chunk,
    "avx512f,avx512bw,avx2",
    AccTop,
    chunk_seg::<AccTop, 4096, false>,
    small: copy_sum_avx512_topm,
    min: 256
);
