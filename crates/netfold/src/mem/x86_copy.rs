//! x86_64 copy kernels: string instructions (`rep movsb`, `rep movsq`), the seed patch's unrolled
//! integer loop, and SSE2 / AVX2 / AVX-512 vector copies.
//!
//! The vector kernels follow one plan so that alignment costs nothing (the OLS 2002 study, the 2002 copy_to_user thread):
//! - up to 4 vectors: overlapping unaligned loads/stores from both ends, no loop, no branch on
//!   alignment;
//! - larger: keep the first and last vector in registers, then loop with unaligned LOADS and
//!   ALIGNED STORES (the destination is aligned to the vector size; a store that splits a cache
//!   line costs two L1 writes, a split load is cheaper), four vectors per iteration, and finally
//!   store the first and last vector, which overlap the aligned body.
//! - on AVX-512 VBMI CPUs, loads can be aligned too: when source and destination disagree
//!   modulo 64, each destination line is assembled from two aligned source lines with
//!   `vpermt2b`, and the partial first/last lines use masked stores ([`avx512_vbmi_body`]).
//!
//! Which of these (or `rep movsb`, or the C library's `memcpy`) runs for which size is chosen
//! by measurement in `super::calibrate`.
//!
//! All raw kernels take `(dst, src, n)` pointers: callers guarantee both ranges are valid for
//! `n` bytes and do not overlap (they come from a `&mut [u8]` and a `&[u8]`).
#![allow(unsafe_code)]

use core::arch::asm;
use core::arch::x86_64::*;
use core::ptr::{read_unaligned, write_unaligned};

/// Copies 0..=16 bytes with at most two overlapping loads/stores of one width.
///
/// # Safety
/// `s` valid for reads and `d` for writes of `n <= 16` bytes.
#[inline(always)]
unsafe fn copy_le16(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY (whole body): every access lies in [0, n) of both ranges: for n in [8,16], the
    // 8-byte accesses at 0 and n-8 stay inside; likewise for the 4-, 2- and 1-byte cases.
    unsafe {
        if n >= 8 {
            let a = read_unaligned(s.cast::<u64>());
            let b = read_unaligned(s.add(n - 8).cast::<u64>());
            write_unaligned(d.cast::<u64>(), a);
            write_unaligned(d.add(n - 8).cast::<u64>(), b);
        } else if n >= 4 {
            let a = read_unaligned(s.cast::<u32>());
            let b = read_unaligned(s.add(n - 4).cast::<u32>());
            write_unaligned(d.cast::<u32>(), a);
            write_unaligned(d.add(n - 4).cast::<u32>(), b);
        } else if n >= 2 {
            let a = read_unaligned(s.cast::<u16>());
            let b = read_unaligned(s.add(n - 2).cast::<u16>());
            write_unaligned(d.cast::<u16>(), a);
            write_unaligned(d.add(n - 2).cast::<u16>(), b);
        } else if n == 1 {
            *d = *s;
        }
    }
}

/// One vector register width: the loads and stores the vector copies are written in, so that
/// each copy strategy below exists once and is stamped out per width (16, 32, 64 bytes). Each
/// method carries the `target_feature` its instructions need and is `#[inline]`, so it folds
/// into any caller that enables at least that feature (every kernel below does).
///
/// # Safety
/// Every method requires the CPU features of its `target_feature` (none for `__m128i`: SSE2
/// is x86_64 baseline) and pointers valid for `W` bytes; `store` and `stream` require a
/// `W`-aligned destination.
trait Vector: Copy {
    /// Bytes per vector.
    const W: usize;
    /// Unaligned load.
    unsafe fn loadu(p: *const u8) -> Self;
    /// Unaligned store.
    unsafe fn storeu(p: *mut u8, v: Self);
    /// Aligned store.
    unsafe fn store(p: *mut u8, v: Self);
    /// Aligned non-temporal store (weakly ordered: the caller fences).
    unsafe fn stream(p: *mut u8, v: Self);
}

/// Implements [`Vector`] for one width from its four intrinsics.
macro_rules! vector {
    ($t:ty, $w:literal, $feat:literal, $loadu:ident, $storeu:ident, $store:ident, $stream:ident) => {
        impl Vector for $t {
            const W: usize = $w;
            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn loadu(p: *const u8) -> Self {
                // SAFETY: the trait's contract (features present, `p` valid for W bytes).
                unsafe { $loadu(p.cast()) }
            }
            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn storeu(p: *mut u8, v: Self) {
                // SAFETY: as `loadu`.
                unsafe { $storeu(p.cast(), v) }
            }
            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn store(p: *mut u8, v: Self) {
                // SAFETY: as `loadu`, and `p` is W-aligned.
                unsafe { $store(p.cast(), v) }
            }
            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn stream(p: *mut u8, v: Self) {
                // SAFETY: as `store`.
                unsafe { $stream(p.cast(), v) }
            }
        }
    };
}

vector!(
    __m128i,
    16,
    "sse2",
    _mm_loadu_si128,
    _mm_storeu_si128,
    _mm_store_si128,
    _mm_stream_si128
);
vector!(
    __m256i,
    32,
    "avx",
    _mm256_loadu_si256,
    _mm256_storeu_si256,
    _mm256_store_si256,
    _mm256_stream_si256
);
vector!(
    __m512i,
    64,
    "avx512f",
    _mm512_loadu_si512,
    _mm512_storeu_si512,
    _mm512_store_si512,
    _mm512_stream_si512
);

/// Copies `W..=2W` bytes with two overlapping vectors of type `V`.
///
/// `#[inline(always)]` without a `target_feature` (the two cannot be combined): it is only a
/// template, and once inlined into a kernel its `V` methods inline under the kernel's features.
///
/// # Safety
/// `V`'s features present; `V::W <= n <= 2 * V::W`; ranges valid for `n` bytes.
#[inline(always)]
unsafe fn copy_2v<V: Vector>(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: accesses at 0 and n-W lie within [0, n) since n >= W.
    unsafe {
        let a = V::loadu(s);
        let b = V::loadu(s.add(n - V::W));
        V::storeu(d, a);
        V::storeu(d.add(n - V::W), b);
    }
}

/// Copies `2W..=4W` bytes with four overlapping vectors of type `V`.
///
/// # Safety
/// `V`'s features present; `2 * V::W <= n <= 4 * V::W`; ranges valid for `n` bytes.
#[inline(always)]
unsafe fn copy_4v<V: Vector>(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: accesses at 0, W, n-2W and n-W lie within [0, n) since n >= 2W.
    unsafe {
        let w = V::W;
        let a = V::loadu(s);
        let b = V::loadu(s.add(w));
        let c = V::loadu(s.add(n - 2 * w));
        let e = V::loadu(s.add(n - w));
        V::storeu(d, a);
        V::storeu(d.add(w), b);
        V::storeu(d.add(n - 2 * w), c);
        V::storeu(d.add(n - w), e);
    }
}

/// Aligned store of `v` at `p`, non-temporal if `NT` (a constant: no branch remains).
///
/// # Safety
/// As [`Vector::store`].
#[inline(always)]
unsafe fn store_nt<V: Vector, const NT: bool>(p: *mut u8, v: V) {
    // SAFETY: the caller's contract is the store's.
    unsafe {
        if NT {
            V::stream(p, v)
        } else {
            V::store(p, v)
        }
    }
}

/// Copies `n >= W` bytes: first and last vector kept in registers, then unaligned loads and
/// `W`-aligned stores (non-temporal if `NT`), four vectors per iteration, then the first and
/// last vector stored over the aligned body's ragged ends (which also cover all of `n <= 2W`).
///
/// # Safety
/// `V`'s features present; `n >= V::W`; ranges valid for `n` bytes and non-overlapping.
#[inline(always)]
unsafe fn copy_aligned_body<V: Vector, const NT: bool>(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY (whole body): loads are at offsets i in [0, n-W] of `s` (the loop conditions keep
    // i + W <= n); stores at the same offsets of `d`; `d + i` is W-aligned for every aligned
    // store because i starts at `skip` and steps by multiples of W.
    unsafe {
        let w = V::W;
        let first = V::loadu(s);
        let last = V::loadu(s.add(n - w));
        let skip = (w - (d as usize & (w - 1))) & (w - 1);
        let end = n - w;
        let mut i = skip;
        while i + 4 * w <= end {
            let a = V::loadu(s.add(i));
            let b = V::loadu(s.add(i + w));
            let c = V::loadu(s.add(i + 2 * w));
            let e = V::loadu(s.add(i + 3 * w));
            store_nt::<V, NT>(d.add(i), a);
            store_nt::<V, NT>(d.add(i + w), b);
            store_nt::<V, NT>(d.add(i + 2 * w), c);
            store_nt::<V, NT>(d.add(i + 3 * w), e);
            i += 4 * w;
        }
        while i < end {
            store_nt::<V, NT>(d.add(i), V::loadu(s.add(i)));
            i += w;
        }
        if NT {
            // Streaming stores are weakly ordered: fence so later ordinary stores and other
            // threads see the copy complete.
            _mm_sfence();
        }
        V::storeu(d, first);
        V::storeu(d.add(n - w), last);
    }
}

/// Copies 0..=64 bytes with overlapping baseline (SSE2 / general-purpose) loads and stores:
/// used inline by [`super::copy`] before any dispatch, since for tiny copies the indirect
/// call costs as much as the copy.
///
/// # Safety
/// `n <= 64`, ranges valid for `n` bytes and non-overlapping.
#[inline(always)]
pub(crate) unsafe fn copy_le64(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: each branch's helper gets a size in its range; SSE2 is x86_64 baseline.
    unsafe {
        if n <= 16 {
            copy_le16(d, s, n)
        } else if n <= 32 {
            copy_2v::<__m128i>(d, s, n)
        } else {
            copy_4v::<__m128i>(d, s, n)
        }
    }
}

/// `rep movsb`: the CPU's microcoded byte copy (fast with ERMS/FSRM for aligned data).
pub(crate) fn rep_movsb(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    // SAFETY: rdi/rsi point at `n` valid, non-overlapping bytes; rcx = n. The direction flag is
    // clear on function entry by the System V ABI, so the copy runs forward.
    unsafe {
        asm!(
            "rep movsb",
            inout("rcx") n => _,
            inout("rdi") dst.as_mut_ptr() => _,
            inout("rsi") src.as_ptr() => _,
            options(nostack, preserves_flags)
        );
    }
}

/// `rep movsq` for the 8-byte words, then `rep movsb` for the last 0..=7 bytes: the 2002
/// kernel's `movsl` scheme widened to 64 bits.
pub(crate) fn rep_movsq(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    // SAFETY: as in `rep_movsb`; movsq moves 8*(n/8) bytes and advances rdi/rsi, then movsb
    // moves the remaining n%8, so exactly n bytes are written.
    unsafe {
        asm!(
            "rep movsq",
            "mov rcx, {rem}",
            "rep movsb",
            rem = in(reg) n % 8,
            inout("rcx") n / 8 => _,
            inout("rdi") dst.as_mut_ptr() => _,
            inout("rsi") src.as_ptr() => _,
            options(nostack, preserves_flags)
        );
    }
}

/// The 2002 copy_to_user patch's unrolled integer copy, in 64-bit registers: 64 bytes per iteration as
/// eight load/store pairs through two general-purpose registers, then the tail in words.
pub(crate) fn unrolled_int(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    let blocks = n / 64;
    if blocks > 0 {
        // SAFETY: the loop reads and writes exactly `blocks * 64 <= n` bytes from the starts of
        // the two valid, non-overlapping slices. Written in asm so the compiler cannot turn it
        // into vector moves or a memcpy call: it is the method being measured.
        unsafe {
            asm!(
                "2:",
                "mov {a}, qword ptr [{s}]",
                "mov {b}, qword ptr [{s} + 8]",
                "mov qword ptr [{d}], {a}",
                "mov qword ptr [{d} + 8], {b}",
                "mov {a}, qword ptr [{s} + 16]",
                "mov {b}, qword ptr [{s} + 24]",
                "mov qword ptr [{d} + 16], {a}",
                "mov qword ptr [{d} + 24], {b}",
                "mov {a}, qword ptr [{s} + 32]",
                "mov {b}, qword ptr [{s} + 40]",
                "mov qword ptr [{d} + 32], {a}",
                "mov qword ptr [{d} + 40], {b}",
                "mov {a}, qword ptr [{s} + 48]",
                "mov {b}, qword ptr [{s} + 56]",
                "mov qword ptr [{d} + 48], {a}",
                "mov qword ptr [{d} + 56], {b}",
                "add {s}, 64",
                "add {d}, 64",
                "dec {c}",
                "jnz 2b",
                s = inout(reg) src.as_ptr() => _,
                d = inout(reg) dst.as_mut_ptr() => _,
                c = inout(reg) blocks => _,
                a = out(reg) _,
                b = out(reg) _,
                options(nostack)
            );
        }
    }
    let done = blocks * 64;
    super::portable::copy_words(&mut dst[done..], &src[done..]);
}

/// The AVX2 and AVX-512 kernels' first steps: copies of 0..=64 bytes (as [`copy_le64`], but
/// 33..=64 bytes with two 32-byte vectors) and `return`. A macro, not a helper function, so
/// that the kernels keep one flat chain of size tests: behind a helper's single `n <= 64` test
/// the compiler laid the chain out differently.
macro_rules! return_if_le64_avx {
    ($d:expr, $s:expr, $n:expr) => {
        if $n <= 16 {
            return copy_le16($d, $s, $n);
        }
        if $n <= 32 {
            return copy_2v::<__m128i>($d, $s, $n);
        }
        if $n <= 64 {
            return copy_2v::<__m256i>($d, $s, $n);
        }
    };
}

/// SSE2 copy (16-byte vectors, destination aligned to 16).
///
/// # Safety
/// Ranges valid for `n` bytes and non-overlapping. SSE2 is part of x86_64.
pub(crate) unsafe fn sse2_raw(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: each helper gets a size in its range; the caller's ranges are forwarded.
    unsafe {
        if n <= 16 {
            return copy_le16(d, s, n);
        }
        if n <= 32 {
            return copy_2v::<__m128i>(d, s, n);
        }
        copy_aligned_body::<__m128i, false>(d, s, n)
    }
}

/// AVX2 copy (32-byte vectors, destination aligned to 32).
///
/// # Safety
/// CPU supports AVX2; ranges valid for `n` bytes and non-overlapping.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn avx2_raw(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: each helper gets a size in its range and needs at most AVX; ranges forwarded.
    unsafe {
        return_if_le64_avx!(d, s, n);
        if n <= 128 {
            return copy_4v::<__m256i>(d, s, n);
        }
        copy_aligned_body::<__m256i, false>(d, s, n)
    }
}

/// Above this size the AVX-512 copy streams its aligned stores past the caches (non-temporal):
/// a copy this large would evict the whole per-core L2 anyway. See docs/BENCHMARKS.md.
pub(crate) const NT_THRESHOLD: usize = 4 << 20;

/// AVX-512 copy (64-byte vectors, destination aligned to 64, i.e. one store per cache line).
///
/// # Safety
/// CPU supports AVX-512 F and BW; ranges valid for `n` bytes and non-overlapping.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
pub(crate) unsafe fn avx512_raw(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: each helper gets a size in its range; larger sizes are delegated with the same
    // contract.
    unsafe {
        return_if_le64_avx!(d, s, n);
        if n <= 128 {
            return copy_2v::<__m512i>(d, s, n);
        }
        if n <= 256 {
            return copy_4v::<__m512i>(d, s, n);
        }
        if n >= NT_THRESHOLD {
            return avx512_body::<true>(d, s, n);
        }
        avx512_body::<false>(d, s, n)
    }
}

/// The AVX-512 loop for `n > 256`; `NT` selects non-temporal stores for the aligned body.
///
/// Out of line (a tail jump from [`avx512_raw`], as the compiler chose when this loop was
/// written out here): inlined, it would double [`avx512_raw`], which then is no longer
/// inlined into [`avx512_vbmi_raw`] and costs the VBMI copy's small sizes an extra jump.
///
/// # Safety
/// As [`avx512_raw`], and `n >= 128`.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
#[inline(never)]
pub(crate) unsafe fn avx512_body<const NT: bool>(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: n >= 128 >= 64 as the body requires; AVX-512 F present; ranges forwarded.
    unsafe { copy_aligned_body::<__m512i, NT>(d, s, n) }
}

/// Byte indices 0..=63, the base of the `vpermt2b` shuffle control.
pub(crate) static IOTA: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = i as u8;
        i += 1;
    }
    t
};

/// AVX-512 VBMI copy body for `n > 256`: when source and destination disagree modulo 64,
/// unaligned loads split a cache line on every vector (measured ~10-20% slower at 1448 bytes).
/// Here both sides are aligned: each destination line is assembled from the two aligned source
/// lines it straddles with one `vpermt2b` (two-table byte permute), and each source line is
/// loaded once. The partial first and last destination lines are written with masked stores,
/// so every destination cache line is written exactly once. Source lines only partly inside
/// `src` are never loaded with full-width loads (masked loads touch only valid bytes).
///
/// The loop is the VBMI fused kernels' loop ([`super::x86_fused::vbmi_seg`]) with an
/// accumulator that sums nothing: one body for the copy and every fused variant, and with no
/// sum the compiler drops the sum's work entirely.
///
/// # Safety
/// CPU supports AVX-512 F, BW and VBMI; ranges valid for `n > 256` bytes, non-overlapping.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx2")]
pub(crate) unsafe fn avx512_vbmi_body(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: the caller's contract is the body's; `NoSum` sums nothing, so any `n` is within
    // its segment limit.
    unsafe {
        super::x86_fused::vbmi_seg::<super::x86_fused::NoSum>(d, s, n);
    }
}

/// Mask of the low `k` bits, `k` in 0..=64.
#[inline(always)]
pub(crate) fn low_mask(k: usize) -> u64 {
    if k >= 64 {
        u64::MAX
    } else {
        (1u64 << k) - 1
    }
}

/// `rep movsb` on raw pointers.
///
/// # Safety
/// Ranges valid for `n` bytes and non-overlapping.
#[inline]
pub(crate) unsafe fn rep_movsb_raw(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: the caller guarantees the ranges; the direction flag is clear by the ABI.
    unsafe {
        asm!(
            "rep movsb",
            inout("rcx") n => _,
            inout("rdi") d => _,
            inout("rsi") s => _,
            options(nostack, preserves_flags)
        );
    }
}

/// AVX-512 copy with the VBMI aligned-both-sides body (see [`avx512_vbmi_body`]).
///
/// # Safety
/// CPU supports AVX-512 F, BW and VBMI; ranges valid for `n` bytes and non-overlapping.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx2")]
pub(crate) unsafe fn avx512_vbmi_raw(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: same contract forwarded; the VBMI body requires n > 256.
    unsafe {
        if n <= 256 || n >= NT_THRESHOLD {
            return avx512_raw(d, s, n);
        }
        avx512_vbmi_body(d, s, n)
    }
}
