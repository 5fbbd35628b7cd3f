//! x86_64 fused copy+checksum kernels with a cheaper exact sum (issue 13), generated from one
//! copy loop per copy strategy and one accumulator type, so that calibration can time them
//! against the `x86_csum` kernels on whatever CPU runs them.
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
use super::x86_csum::fold64_short;
use core::arch::x86_64::*;

/// Bytes summed into one pair of accumulators: at most 2^14 + 2 vectors per lane, below the
/// 2^16 words per lane that [`AccTop`] allows.
pub(crate) const SEG: usize = 1 << 20;

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

/// Mask of the low `k` bits, `k` in 0..=64.
#[inline(always)]
fn low_mask(k: usize) -> u64 {
    if k >= 64 {
        u64::MAX
    } else {
        (1u64 << k) - 1
    }
}

/// An exact accumulator of little-endian 16-bit words (a trait so that the kernel macros can
/// be instantiated with other schemes for experiments).
///
/// # Safety
/// Every method requires the CPU features of the implementation's `target_feature`s; at most
/// [`SEG`] / 64 + 2 vectors may be added between `new` and `finish`.
pub(crate) trait SumAcc: Copy {
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

/// Generates a fused kernel: AVX-512 copy with unaligned loads and aligned stores (masked
/// partial first and last destination lines, like `x86_csum::copy_sum_le_avx512`), summed with
/// accumulator `$acc`, in segments of at most [`SEG`] bytes.
macro_rules! fused_unaligned {
    ($name:ident, $seg:ident, $feat:literal, $acc:ty) => {
        /// Fused copy and little-endian-word sum of `n <= MAX_CHUNK` bytes (see the module
        /// comment for the summation scheme).
        ///
        /// # Safety
        /// CPU supports the `target_feature`s listed; ranges valid for `n` bytes and
        /// non-overlapping.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name(d: *mut u8, s: *const u8, n: usize) -> u16 {
            let mut sum = 0u16;
            let mut off = 0;
            while n - off > SEG {
                // SAFETY: [off, off + SEG) lies inside both ranges. SEG is a multiple of 64,
                // so the segment keeps the word grid and the destination alignment.
                sum = checksum_add(sum, unsafe { $seg(d.add(off), s.add(off), SEG) });
                off += SEG;
            }
            // SAFETY: the rest [off, n) lies inside both ranges.
            checksum_add(sum, unsafe { $seg(d.add(off), s.add(off), n - off) })
        }

        /// One segment of `n <= SEG` bytes.
        ///
        /// # Safety
        /// As the kernel, and `n <= SEG`.
        #[target_feature(enable = $feat)]
        unsafe fn $seg(d: *mut u8, s: *const u8, n: usize) -> u16 {
            // SAFETY (whole body): masked loads/stores touch only the bytes their mask selects,
            // all in [0, n); full loads at offsets in [0, n-64]; aligned stores at 64-aligned
            // addresses d+i with i + 64 <= n; at most n/64 + 2 <= SEG/64 + 2 vectors summed.
            unsafe {
                let mut a0 = <$acc>::new();
                let mut a1 = <$acc>::new();
                if n <= 64 {
                    let k = low_mask(n);
                    let v = _mm512_maskz_loadu_epi8(k, s.cast());
                    _mm512_mask_storeu_epi8(d.cast(), k, v);
                    a0.add1(v);
                    return <$acc>::finish(a0, a1);
                }
                let skip = (64 - (d as usize & 63)) & 63;
                let odd = skip & 1 == 1;
                if skip != 0 {
                    let v = _mm512_maskz_loadu_epi8(low_mask(skip), s.cast());
                    _mm512_mask_storeu_epi8(d.cast(), low_mask(skip), v);
                    // Head bytes [0, skip) summed in the body's word grid (RFC 1071 §2(B)).
                    a0.add1(if odd {
                        _mm512_shuffle_epi8(v, _mm512_loadu_si512(SWAP16.as_ptr().cast()))
                    } else {
                        v
                    });
                }
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
                    a0.add2(v0, v1);
                    a1.add2(v2, v3);
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
                if i + 64 <= n {
                    let v = _mm512_loadu_si512(s.add(i).cast());
                    _mm512_store_si512(d.add(i).cast(), v);
                    a1.add1(v);
                    i += 64;
                }
                if i < n {
                    // Tail [i, n): same word parity as the body (i - skip is a multiple of 64).
                    let k = low_mask(n - i);
                    let v = _mm512_maskz_loadu_epi8(k, s.add(i).cast());
                    _mm512_mask_storeu_epi8(d.add(i).cast(), k, v);
                    a0.add1(v);
                }
                let sum = <$acc>::finish(a0, a1);
                if odd {
                    sum.swap_bytes()
                } else {
                    sum
                }
            }
        }
    };
}

/// Generates a fused kernel on the VBMI copy (aligned loads and aligned stores, destination
/// lines assembled with `vpermt2b`, as `x86_csum::copy_sum_le_avx512_vbmi`), summed with
/// `$acc` over the assembled vectors. Sizes <= 256 go to `$small`.
macro_rules! fused_vbmi {
    ($name:ident, $seg:ident, $small:ident, $feat:literal, $acc:ty) => {
        /// Fused copy and little-endian-word sum of `n <= MAX_CHUNK` bytes on the VBMI copy.
        ///
        /// # Safety
        /// CPU supports the `target_feature`s listed; ranges valid for `n` bytes and
        /// non-overlapping.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name(d: *mut u8, s: *const u8, n: usize) -> u16 {
            if n <= 256 {
                // SAFETY: same contract; `$small` needs a subset of these features.
                return unsafe { $small(d, s, n) };
            }
            let mut sum = 0u16;
            let mut off = 0;
            while n - off > SEG {
                // SAFETY: as in `fused_unaligned`.
                sum = checksum_add(sum, unsafe { $seg(d.add(off), s.add(off), SEG) });
                off += SEG;
            }
            let rest = n - off;
            // SAFETY: the rest [off, n) lies inside both ranges; the body needs > 256 bytes.
            let part = unsafe {
                if rest <= 256 {
                    $small(d.add(off), s.add(off), rest)
                } else {
                    $seg(d.add(off), s.add(off), rest)
                }
            };
            checksum_add(sum, part)
        }

        /// One segment of `256 < n <= SEG` bytes.
        ///
        /// # Safety
        /// As the kernel, and `256 < n <= SEG`.
        #[target_feature(enable = $feat)]
        unsafe fn $seg(d: *mut u8, s: *const u8, n: usize) -> u16 {
            // SAFETY (whole body): as `x86_copy::avx512_vbmi_body` (aligned loads only while
            // i >= m and i - m + 64k <= n; masked accesses only touch bytes in [0, n); aligned
            // stores at 64-aligned d+i with i + 64 <= n).
            unsafe {
                let skip = (64 - (d as usize & 63)) & 63;
                let m = (s as usize + skip) & 63;
                let odd = skip & 1 == 1;
                let mut a0 = <$acc>::new();
                let mut a1 = <$acc>::new();
                if skip != 0 {
                    let v = _mm512_maskz_loadu_epi8(low_mask(skip), s.cast());
                    _mm512_mask_storeu_epi8(d.cast(), low_mask(skip), v);
                    a1.add1(if odd {
                        _mm512_shuffle_epi8(v, _mm512_loadu_si512(SWAP16.as_ptr().cast()))
                    } else {
                        v
                    });
                }
                let mut i = skip;
                if m == 0 {
                    while i + 256 <= n {
                        let v0 = _mm512_load_si512(s.add(i).cast());
                        let v1 = _mm512_load_si512(s.add(i + 64).cast());
                        let v2 = _mm512_load_si512(s.add(i + 128).cast());
                        let v3 = _mm512_load_si512(s.add(i + 192).cast());
                        _mm512_store_si512(d.add(i).cast(), v0);
                        _mm512_store_si512(d.add(i + 64).cast(), v1);
                        _mm512_store_si512(d.add(i + 128).cast(), v2);
                        _mm512_store_si512(d.add(i + 192).cast(), v3);
                        a0.add2(v0, v1);
                        a1.add2(v2, v3);
                        i += 256;
                    }
                } else {
                    if i < m {
                        let v = _mm512_loadu_si512(s.add(i).cast());
                        _mm512_store_si512(d.add(i).cast(), v);
                        a0.add1(v);
                        i += 64;
                    }
                    let idx = _mm512_add_epi8(
                        _mm512_loadu_si512(super::x86_copy::IOTA.as_ptr().cast()),
                        _mm512_set1_epi8(m as i8),
                    );
                    let mut a = _mm512_load_si512(s.add(i - m).cast());
                    while i - m + 320 <= n {
                        let p = s.add(i - m);
                        let b0 = _mm512_load_si512(p.add(64).cast());
                        let b1 = _mm512_load_si512(p.add(128).cast());
                        let b2 = _mm512_load_si512(p.add(192).cast());
                        let b3 = _mm512_load_si512(p.add(256).cast());
                        let v0 = _mm512_permutex2var_epi8(a, idx, b0);
                        let v1 = _mm512_permutex2var_epi8(b0, idx, b1);
                        let v2 = _mm512_permutex2var_epi8(b1, idx, b2);
                        let v3 = _mm512_permutex2var_epi8(b2, idx, b3);
                        _mm512_store_si512(d.add(i).cast(), v0);
                        _mm512_store_si512(d.add(i + 64).cast(), v1);
                        _mm512_store_si512(d.add(i + 128).cast(), v2);
                        _mm512_store_si512(d.add(i + 192).cast(), v3);
                        a0.add2(v0, v1);
                        a1.add2(v2, v3);
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
                while i + 64 <= n {
                    let v = _mm512_loadu_si512(s.add(i).cast());
                    _mm512_store_si512(d.add(i).cast(), v);
                    a1.add1(v);
                    i += 64;
                }
                if i < n {
                    let k = low_mask(n - i);
                    let v = _mm512_maskz_loadu_epi8(k, s.add(i).cast());
                    _mm512_mask_storeu_epi8(d.add(i).cast(), k, v);
                    a0.add1(v);
                }
                let sum = <$acc>::finish(a0, a1);
                if odd {
                    sum.swap_bytes()
                } else {
                    sum
                }
            }
        }
    };
}

/// Generates a chunked two-pass kernel: `rep movsb` copies `$chunk` bytes at a time (no
/// read-for-ownership of destination lines, which a vector store loop pays once the buffers
/// outgrow L1), and each chunk is then summed from the copy while it is still cached, with
/// accumulator `$acc`. `$from_dst` chooses whether the destination or the source chunk is
/// summed (both hold the same bytes).
macro_rules! chunked {
    ($name:ident, $seg:ident, $small:ident, $feat:literal, $acc:ty, $chunk:expr, $from_dst:expr) => {
        /// Copy with `rep movsb` in chunks, each summed right after it is copied.
        ///
        /// # Safety
        /// CPU supports the `target_feature`s listed; ranges valid for `n` bytes and
        /// non-overlapping.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name(d: *mut u8, s: *const u8, n: usize) -> u16 {
            if n <= 256 {
                // SAFETY: same contract; `$small` needs a subset of these features.
                return unsafe { $small(d, s, n) };
            }
            let mut sum = 0u16;
            let mut off = 0;
            while off < n {
                let len = (n - off).min(SEG);
                // SAFETY: [off, off + len) lies inside both ranges; SEG is even.
                sum = checksum_add(sum, unsafe { $seg(d.add(off), s.add(off), len) });
                off += len;
            }
            sum
        }

        /// # Safety
        /// As the kernel, and `n <= SEG`.
        #[target_feature(enable = $feat)]
        unsafe fn $seg(d: *mut u8, s: *const u8, n: usize) -> u16 {
            // SAFETY (whole body): `rep movsb` copies [c, c + len) within both ranges; loads
            // read [c + j, c + j + 64) with c + j + 64 <= n, the masked tail load only bytes
            // in [c + j, n).
            unsafe {
                let mut a0 = <$acc>::new();
                let mut a1 = <$acc>::new();
                let mut c = 0;
                while c < n {
                    let len = (n - c).min($chunk);
                    super::x86_copy::rep_movsb_raw(d.add(c), s.add(c), len);
                    let p: *const u8 = if $from_dst { d.add(c) } else { s.add(c) };
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
                        // Only in the last chunk ($chunk is a multiple of 64).
                        a1.add1(_mm512_maskz_loadu_epi8(low_mask(len - j), p.add(j).cast()));
                    }
                    c += len;
                }
                <$acc>::finish(a0, a1)
            }
        }
    };
}

fused_unaligned!(
    copy_sum_avx512_topm,
    seg_avx512_topm,
    "avx512f,avx512bw,avx2",
    AccTop
);
fused_vbmi!(
    copy_sum_vbmi_topm,
    seg_vbmi_topm,
    copy_sum_avx512_topm,
    "avx512f,avx512bw,avx512vbmi,avx2",
    AccTop
);
chunked!(
    copy_sum_rep_movsb_chunk,
    seg_rep_movsb_chunk,
    copy_sum_avx512_topm,
    "avx512f,avx512bw,avx2",
    AccTop,
    4096,
    false
);
