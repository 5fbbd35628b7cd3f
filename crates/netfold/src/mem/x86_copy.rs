//! x86_64 copy kernels: string instructions (`rep movsb`, `rep movsq`), the seed patch's unrolled
//! integer loop, and SSE2 / AVX2 / AVX-512 vector copies.
//!
//! The vector kernels follow one plan so that alignment costs nothing (seed 000 §3, seed 001):
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

/// Copies 16..=32 bytes with two overlapping 16-byte vectors (SSE2 is baseline on x86_64).
///
/// # Safety
/// `16 <= n <= 32`, ranges valid.
#[inline(always)]
unsafe fn copy_16_32(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: accesses at 0 and n-16 lie within [0, n) since n >= 16.
    unsafe {
        let a = _mm_loadu_si128(s.cast());
        let b = _mm_loadu_si128(s.add(n - 16).cast());
        _mm_storeu_si128(d.cast(), a);
        _mm_storeu_si128(d.add(n - 16).cast(), b);
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
    // SAFETY: each branch accesses offsets within [0, n) (overlapping-ends argument).
    unsafe {
        if n <= 16 {
            copy_le16(d, s, n)
        } else if n <= 32 {
            copy_16_32(d, s, n)
        } else {
            let a = _mm_loadu_si128(s.cast());
            let b = _mm_loadu_si128(s.add(16).cast());
            let c = _mm_loadu_si128(s.add(n - 32).cast());
            let e = _mm_loadu_si128(s.add(n - 16).cast());
            _mm_storeu_si128(d.cast(), a);
            _mm_storeu_si128(d.add(16).cast(), b);
            _mm_storeu_si128(d.add(n - 32).cast(), c);
            _mm_storeu_si128(d.add(n - 16).cast(), e);
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

/// The seed 001 patch's unrolled integer copy, in 64-bit registers: 64 bytes per iteration as
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

/// SSE2 copy (16-byte vectors, destination aligned to 16).
///
/// # Safety
/// Ranges valid for `n` bytes and non-overlapping. SSE2 is part of x86_64.
pub(crate) unsafe fn sse2_raw(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY (whole body): every load is at an offset in [0, n-16] of `s` and every store in
    // [0, n-16] of `d` (the loop bound keeps `i + 16 <= n - 16 + 16`); aligned stores are at
    // `d + i` with `(d + i) % 16 == 0` by construction of `skip`.
    unsafe {
        if n <= 16 {
            return copy_le16(d, s, n);
        }
        if n <= 32 {
            return copy_16_32(d, s, n);
        }
        let first = _mm_loadu_si128(s.cast());
        let last = _mm_loadu_si128(s.add(n - 16).cast());
        let skip = (16 - (d as usize & 15)) & 15;
        let end = n - 16;
        let mut i = skip;
        while i + 64 <= end {
            let a = _mm_loadu_si128(s.add(i).cast());
            let b = _mm_loadu_si128(s.add(i + 16).cast());
            let c = _mm_loadu_si128(s.add(i + 32).cast());
            let e = _mm_loadu_si128(s.add(i + 48).cast());
            _mm_store_si128(d.add(i).cast(), a);
            _mm_store_si128(d.add(i + 16).cast(), b);
            _mm_store_si128(d.add(i + 32).cast(), c);
            _mm_store_si128(d.add(i + 48).cast(), e);
            i += 64;
        }
        while i < end {
            _mm_store_si128(d.add(i).cast(), _mm_loadu_si128(s.add(i).cast()));
            i += 16;
        }
        _mm_storeu_si128(d.cast(), first);
        _mm_storeu_si128(d.add(n - 16).cast(), last);
    }
}

/// AVX2 copy (32-byte vectors, destination aligned to 32).
///
/// # Safety
/// CPU supports AVX2; ranges valid for `n` bytes and non-overlapping.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn avx2_raw(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY (whole body): same bounds argument as `sse2_raw` with 32-byte vectors.
    unsafe {
        if n <= 16 {
            return copy_le16(d, s, n);
        }
        if n <= 32 {
            return copy_16_32(d, s, n);
        }
        if n <= 64 {
            let a = _mm256_loadu_si256(s.cast());
            let b = _mm256_loadu_si256(s.add(n - 32).cast());
            _mm256_storeu_si256(d.cast(), a);
            _mm256_storeu_si256(d.add(n - 32).cast(), b);
            return;
        }
        if n <= 128 {
            let a = _mm256_loadu_si256(s.cast());
            let b = _mm256_loadu_si256(s.add(32).cast());
            let c = _mm256_loadu_si256(s.add(n - 64).cast());
            let e = _mm256_loadu_si256(s.add(n - 32).cast());
            _mm256_storeu_si256(d.cast(), a);
            _mm256_storeu_si256(d.add(32).cast(), b);
            _mm256_storeu_si256(d.add(n - 64).cast(), c);
            _mm256_storeu_si256(d.add(n - 32).cast(), e);
            return;
        }
        let first = _mm256_loadu_si256(s.cast());
        let last = _mm256_loadu_si256(s.add(n - 32).cast());
        let skip = (32 - (d as usize & 31)) & 31;
        let end = n - 32;
        let mut i = skip;
        while i + 128 <= end {
            let a = _mm256_loadu_si256(s.add(i).cast());
            let b = _mm256_loadu_si256(s.add(i + 32).cast());
            let c = _mm256_loadu_si256(s.add(i + 64).cast());
            let e = _mm256_loadu_si256(s.add(i + 96).cast());
            _mm256_store_si256(d.add(i).cast(), a);
            _mm256_store_si256(d.add(i + 32).cast(), b);
            _mm256_store_si256(d.add(i + 64).cast(), c);
            _mm256_store_si256(d.add(i + 96).cast(), e);
            i += 128;
        }
        while i < end {
            _mm256_store_si256(d.add(i).cast(), _mm256_loadu_si256(s.add(i).cast()));
            i += 32;
        }
        _mm256_storeu_si256(d.cast(), first);
        _mm256_storeu_si256(d.add(n - 32).cast(), last);
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
    // SAFETY: small sizes stay within [0, n) by the overlapping-ends argument; larger sizes are
    // delegated with the same contract.
    unsafe {
        if n <= 16 {
            return copy_le16(d, s, n);
        }
        if n <= 32 {
            return copy_16_32(d, s, n);
        }
        if n <= 64 {
            let a = _mm256_loadu_si256(s.cast());
            let b = _mm256_loadu_si256(s.add(n - 32).cast());
            _mm256_storeu_si256(d.cast(), a);
            _mm256_storeu_si256(d.add(n - 32).cast(), b);
            return;
        }
        if n <= 128 {
            let a = _mm512_loadu_si512(s.cast());
            let b = _mm512_loadu_si512(s.add(n - 64).cast());
            _mm512_storeu_si512(d.cast(), a);
            _mm512_storeu_si512(d.add(n - 64).cast(), b);
            return;
        }
        if n <= 256 {
            let a = _mm512_loadu_si512(s.cast());
            let b = _mm512_loadu_si512(s.add(64).cast());
            let c = _mm512_loadu_si512(s.add(n - 128).cast());
            let e = _mm512_loadu_si512(s.add(n - 64).cast());
            _mm512_storeu_si512(d.cast(), a);
            _mm512_storeu_si512(d.add(64).cast(), b);
            _mm512_storeu_si512(d.add(n - 128).cast(), c);
            _mm512_storeu_si512(d.add(n - 64).cast(), e);
            return;
        }
        if n >= NT_THRESHOLD {
            return avx512_body::<true>(d, s, n);
        }
        avx512_body::<false>(d, s, n)
    }
}

/// The AVX-512 loop for `n > 256`; `NT` selects non-temporal stores for the aligned body.
///
/// # Safety
/// As [`avx512_raw`], and `n >= 128`.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
#[inline]
pub(crate) unsafe fn avx512_body<const NT: bool>(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY (whole body): loads are at offsets i in [0, n-64] of `s` (the loop conditions keep
    // i + 64 <= n); stores at the same offsets of `d`; `d + i` is 64-aligned for every aligned
    // store because i starts at `skip` and steps by multiples of 64.
    unsafe {
        let first = _mm512_loadu_si512(s.cast());
        let last = _mm512_loadu_si512(s.add(n - 64).cast());
        let skip = (64 - (d as usize & 63)) & 63;
        let end = n - 64;
        let mut i = skip;
        macro_rules! st {
            ($p:expr, $v:expr) => {
                if NT {
                    _mm512_stream_si512($p.cast(), $v)
                } else {
                    _mm512_store_si512($p.cast(), $v)
                }
            };
        }
        while i + 256 <= end {
            let a = _mm512_loadu_si512(s.add(i).cast());
            let b = _mm512_loadu_si512(s.add(i + 64).cast());
            let c = _mm512_loadu_si512(s.add(i + 128).cast());
            let e = _mm512_loadu_si512(s.add(i + 192).cast());
            st!(d.add(i), a);
            st!(d.add(i + 64), b);
            st!(d.add(i + 128), c);
            st!(d.add(i + 192), e);
            i += 256;
        }
        while i < end {
            st!(d.add(i), _mm512_loadu_si512(s.add(i).cast()));
            i += 64;
        }
        if NT {
            // Streaming stores are weakly ordered: fence so later ordinary stores and other
            // threads see the copy complete.
            _mm_sfence();
        }
        _mm512_storeu_si512(d.cast(), first);
        _mm512_storeu_si512(d.add(n - 64).cast(), last);
    }
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
/// # Safety
/// CPU supports AVX-512 F, BW and VBMI; ranges valid for `n > 256` bytes, non-overlapping.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx2")]
pub(crate) unsafe fn avx512_vbmi_body(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY (whole body): let m = source misalignment at the aligned destination offsets.
    // Aligned loads read [s+i-m, s+i-m+64k) only while i >= m and i - m + 64k <= n, so they
    // stay inside `src`; unaligned full loads are at offsets in [0, n-64]; masked loads and
    // stores touch only bytes in [0, n); aligned stores are at d+i with (d+i) % 64 == 0 since
    // i = skip (+ multiples of 64).
    unsafe {
        let skip = (64 - (d as usize & 63)) & 63;
        let m = (s as usize + skip) & 63;
        if skip != 0 {
            // Head [0, skip): inside the destination line before the first aligned one.
            _mm512_mask_storeu_epi8(d.cast(), low_mask(skip), _mm512_loadu_si512(s.cast()));
        }
        let mut i = skip;
        if m == 0 {
            // Same alignment on both sides: plain aligned loads.
            while i + 256 <= n {
                let a = _mm512_load_si512(s.add(i).cast());
                let b = _mm512_load_si512(s.add(i + 64).cast());
                let c = _mm512_load_si512(s.add(i + 128).cast());
                let e = _mm512_load_si512(s.add(i + 192).cast());
                _mm512_store_si512(d.add(i).cast(), a);
                _mm512_store_si512(d.add(i + 64).cast(), b);
                _mm512_store_si512(d.add(i + 128).cast(), c);
                _mm512_store_si512(d.add(i + 192).cast(), e);
                i += 256;
            }
        } else {
            if i < m {
                // The source line holding byte `skip` starts before `src`: one unaligned load.
                _mm512_store_si512(d.add(i).cast(), _mm512_loadu_si512(s.add(i).cast()));
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
                _mm512_store_si512(d.add(i).cast(), _mm512_permutex2var_epi8(a, idx, b0));
                _mm512_store_si512(d.add(i + 64).cast(), _mm512_permutex2var_epi8(b0, idx, b1));
                _mm512_store_si512(d.add(i + 128).cast(), _mm512_permutex2var_epi8(b1, idx, b2));
                _mm512_store_si512(d.add(i + 192).cast(), _mm512_permutex2var_epi8(b2, idx, b3));
                a = b3;
                i += 256;
            }
            while i - m + 128 <= n {
                let b = _mm512_load_si512(s.add(i - m + 64).cast());
                _mm512_store_si512(d.add(i).cast(), _mm512_permutex2var_epi8(a, idx, b));
                a = b;
                i += 64;
            }
        }
        // Remaining whole destination lines (at most a few), then the partial last line.
        while i + 64 <= n {
            _mm512_store_si512(d.add(i).cast(), _mm512_loadu_si512(s.add(i).cast()));
            i += 64;
        }
        if i < n {
            let k = low_mask(n - i);
            _mm512_mask_storeu_epi8(
                d.add(i).cast(),
                k,
                _mm512_maskz_loadu_epi8(k, s.add(i).cast()),
            );
        }
    }
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
