//! Every copy / checksum / fused kernel as a safe function, so benchmarks and tests can force
//! one. A kernel the CPU cannot run falls back to the portable kernel (check [`has_avx2`] /
//! [`has_avx512`] first if that matters); none of them is ever unsound to call.
//!
//! All copy kernels: copy `src` into the front of `dst`; panic only if `dst` is shorter.
//! All checksum results: RFC 1071 sum, folded, not complemented (see [`super::checksum`]).
#![allow(unsafe_code)]

use super::portable;

/// True if the AVX2 kernels run natively on this CPU.
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True if the AVX-512 (F + BW) kernels run natively on this CPU.
pub fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True if the AVX-512 VBMI copy (aligned loads + `vpermt2b`) runs natively on this CPU.
pub fn has_avx512_vbmi() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx512() && std::arch::is_x86_feature_detected!("avx512vbmi")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Portable 64-bit word copy (safe Rust; the compiler may vectorise it).
pub fn copy_scalar(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    portable::copy_words(&mut dst[..n], src);
}

/// `rep movsb` (x86_64), portable copy elsewhere.
pub fn copy_rep_movsb(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    super::x86_copy::rep_movsb(dst, src);
    #[cfg(not(target_arch = "x86_64"))]
    copy_scalar(dst, src);
}

/// `rep movsq` + `rep movsb` for the remainder (x86_64), portable copy elsewhere.
pub fn copy_rep_movsq(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    super::x86_copy::rep_movsq(dst, src);
    #[cfg(not(target_arch = "x86_64"))]
    copy_scalar(dst, src);
}

/// The 2002 copy_to_user patch's unrolled integer-register loop (64-bit words, 64 bytes per iteration;
/// inline asm on x86_64 so it stays an integer copy), portable copy elsewhere.
pub fn copy_unrolled_int(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    super::x86_copy::unrolled_int(dst, src);
    #[cfg(not(target_arch = "x86_64"))]
    copy_scalar(dst, src);
}

/// SSE2 copy, destination-aligned 16-byte stores.
pub fn copy_sse2(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: both slices hold `n` bytes and cannot overlap (`&mut` vs `&`); SSE2 is part of
    // the x86_64 baseline.
    unsafe {
        super::x86_copy::sse2_raw(dst.as_mut_ptr(), src.as_ptr(), n)
    };
    #[cfg(not(target_arch = "x86_64"))]
    portable::copy_words(dst, src);
}

/// AVX2 copy, destination-aligned 32-byte stores.
pub fn copy_avx2(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 detected just above; slices hold `n` bytes and cannot overlap.
        unsafe { super::x86_copy::avx2_raw(dst.as_mut_ptr(), src.as_ptr(), n) };
        return;
    }
    portable::copy_words(dst, src);
}

/// AVX-512 copy, destination-aligned 64-byte stores (non-temporal at and above
/// [`nt_threshold`]).
pub fn copy_avx512(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: AVX-512 F/BW detected just above; slices hold `n` bytes, no overlap.
        unsafe { super::x86_copy::avx512_raw(dst.as_mut_ptr(), src.as_ptr(), n) };
        return;
    }
    copy_avx2(dst, src);
}

/// AVX-512 VBMI copy: aligned loads AND aligned stores, lines re-assembled with `vpermt2b`
/// when source and destination disagree modulo 64.
pub fn copy_avx512_vbmi(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vbmi() {
        // SAFETY: AVX-512 F/BW/VBMI detected just above; slices hold `n` bytes, no overlap.
        unsafe { super::x86_copy::avx512_vbmi_raw(dst.as_mut_ptr(), src.as_ptr(), n) };
        return;
    }
    copy_avx512(dst, src);
}

/// AVX-512 copy with non-temporal (cache-bypassing) aligned stores at every size > 256 bytes.
pub fn copy_avx512_nt(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        if n <= 256 {
            return copy_avx512(dst, src);
        }
        // SAFETY: AVX-512 detected; n > 256 >= 128 as `avx512_body` requires; no overlap.
        unsafe { super::x86_copy::avx512_body::<true>(dst.as_mut_ptr(), src.as_ptr(), n) };
        return;
    }
    copy_avx2(dst, src);
}

/// Size at and above which [`copy_avx512`] uses non-temporal stores.
pub fn nt_threshold() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        super::x86_copy::NT_THRESHOLD
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        usize::MAX
    }
}

/// Smallest size of the largest size class: from here up source plus destination outgrow the
/// L1 data cache, where `rep movsb` (ERMS/FSRM) measured ~1.5x faster than vector loops on an
/// Intel Xeon (no read-for-ownership of destination lines). Whether the dispatched
/// [`super::copy`] uses it is decided by measurement ([`super::calibrate`]).
pub fn rep_movsb_threshold() -> usize {
    super::calibrate::CLASS_MAX[2] + 1
}

/// Portable checksum: 64-bit words with add-with-carry (u128 accumulator).
pub fn checksum_scalar(data: &[u8]) -> u16 {
    portable::checksum(data)
}

/// Splits `data` into chunks the vector kernels can sum without overflow (even sizes, so the
/// word grid is preserved) and adds their sums.
#[cfg(target_arch = "x86_64")]
fn chunked_sum(data: &[u8], f: unsafe fn(*const u8, usize) -> u16) -> u16 {
    let mut sum = 0u16;
    for c in data.chunks(super::x86_csum::MAX_CHUNK) {
        // SAFETY: callers pass `f` only after detecting the features it needs; `c` is a valid
        // slice of at most MAX_CHUNK bytes.
        let s = unsafe { f(c.as_ptr(), c.len()) };
        sum = super::combine::checksum_add(sum, s);
    }
    sum.swap_bytes()
}

/// AVX2 checksum.
pub fn checksum_avx2(data: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        return chunked_sum(data, super::x86_csum::sum_le_avx2);
    }
    portable::checksum(data)
}

/// AVX-512 checksum.
pub fn checksum_avx512(data: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        return chunked_sum(data, super::x86_csum::sum_le_avx512);
    }
    checksum_avx2(data)
}

/// True if the AVX-512 VNNI checksum kernels run natively on this CPU.
pub fn has_avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx512() && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// AVX-512 VNNI checksum (`vpdpbusd` byte sums).
pub fn checksum_avx512_vnni(data: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        return chunked_sum(data, super::x86_csum::sum_le_avx512_vnni);
    }
    checksum_avx512(data)
}

/// Portable copy-then-sum in L1-sized blocks.
pub fn copy_with_checksum_scalar(dst: &mut [u8], src: &[u8]) -> u16 {
    let n = src.len();
    portable::copy_with_checksum(&mut dst[..n], src)
}

#[cfg(target_arch = "x86_64")]
fn chunked_copy_sum(
    dst: &mut [u8],
    src: &[u8],
    f: unsafe fn(*mut u8, *const u8, usize) -> u16,
) -> u16 {
    let n = src.len();
    let dst = &mut dst[..n];
    let mut sum = 0u16;
    for (d, s) in dst
        .chunks_mut(super::x86_csum::MAX_CHUNK)
        .zip(src.chunks(super::x86_csum::MAX_CHUNK))
    {
        // SAFETY: callers pass `f` only after detecting its features; `d` and `s` are equal
        // length (same chunking of equal-length slices) and cannot overlap.
        let part = unsafe { f(d.as_mut_ptr(), s.as_ptr(), s.len()) };
        sum = super::combine::checksum_add(sum, part);
    }
    sum.swap_bytes()
}

/// AVX2 fused copy + checksum.
pub fn copy_with_checksum_avx2(dst: &mut [u8], src: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        return chunked_copy_sum(dst, src, super::x86_csum::copy_sum_le_avx2);
    }
    copy_with_checksum_scalar(dst, src)
}

/// AVX-512 fused copy + checksum.
pub fn copy_with_checksum_avx512(dst: &mut [u8], src: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        return chunked_copy_sum(dst, src, super::x86_fused::copy_sum_le_avx512);
    }
    copy_with_checksum_avx2(dst, src)
}

/// AVX-512 VBMI fused copy + checksum (both sides aligned, `vpermt2b`).
pub fn copy_with_checksum_avx512_vbmi(dst: &mut [u8], src: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vbmi() {
        return chunked_copy_sum(dst, src, super::x86_fused::copy_sum_le_avx512_vbmi);
    }
    copy_with_checksum_avx512(dst, src)
}

/// Safe wrappers of the `x86_fused` kernels: the kernel when `$detected()`, else the AVX-512
/// (or further down, portable) fused kernel.
macro_rules! fused_wrappers {
    ($($(#[$doc:meta])* $name:ident => $raw:ident if $detected:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(dst: &mut [u8], src: &[u8]) -> u16 {
            #[cfg(target_arch = "x86_64")]
            if $detected() {
                return chunked_copy_sum(dst, src, super::x86_fused::$raw);
            }
            copy_with_checksum_avx512(dst, src)
        }
    )*};
}

fused_wrappers! {
    /// AVX-512 fused copy (as [`copy_with_checksum_avx512`]) with the 2.5-op exact sum
    /// (top words of two vectors packed by shifts, `x86_fused`).
    copy_with_checksum_avx512_topm => copy_sum_avx512_topm if has_avx512;
    /// AVX-512 VBMI fused copy (as [`copy_with_checksum_avx512_vbmi`]) with the 2.5-op sum.
    copy_with_checksum_vbmi_topm => copy_sum_vbmi_topm if has_avx512_vbmi;
    /// Two passes in L1-sized steps: `rep movsb` copies 4 KiB (no read-for-ownership of the
    /// destination), then the 4 KiB just read are summed from cache, and so on.
    copy_with_checksum_rep_movsb_chunk => copy_sum_rep_movsb_chunk if has_avx512;
}

/// A copy kernel: copies `src` into the front of `dst`.
pub type CopyKernel = fn(&mut [u8], &[u8]);
/// A checksum kernel: RFC 1071 sum, folded, not complemented.
pub type ChecksumKernel = fn(&[u8]) -> u16;
/// A fused kernel: copies `src` into `dst` and returns its checksum.
pub type FusedKernel = fn(&mut [u8], &[u8]) -> u16;

/// Every copy kernel by name (for benchmarks and exhaustive tests).
pub const COPY_KERNELS: &[(&str, CopyKernel)] = &[
    ("scalar", copy_scalar),
    ("rep-movsb", copy_rep_movsb),
    ("rep-movsq", copy_rep_movsq),
    ("unrolled-int", copy_unrolled_int),
    ("sse2", copy_sse2),
    ("avx2", copy_avx2),
    ("avx512", copy_avx512),
    ("avx512-vbmi", copy_avx512_vbmi),
    ("avx512-nt", copy_avx512_nt),
];

/// Every checksum kernel by name.
pub const CHECKSUM_KERNELS: &[(&str, ChecksumKernel)] = &[
    ("scalar", checksum_scalar),
    ("avx2", checksum_avx2),
    ("avx512", checksum_avx512),
    ("avx512-vnni", checksum_avx512_vnni),
];

/// Every fused copy+checksum kernel by name.
pub const FUSED_KERNELS: &[(&str, FusedKernel)] = &[
    ("scalar", copy_with_checksum_scalar),
    ("avx2", copy_with_checksum_avx2),
    ("avx512", copy_with_checksum_avx512),
    ("avx512-vbmi", copy_with_checksum_avx512_vbmi),
    ("avx512-topm", copy_with_checksum_avx512_topm),
    ("vbmi-topm", copy_with_checksum_vbmi_topm),
    ("rep-movsb-chunk", copy_with_checksum_rep_movsb_chunk),
];
