//! Copy, checksum and fused copy+checksum, with run-time SIMD dispatch.
//!
//! Why this module exists (seeds 000 §3, 001, 003, 004): copies and checksums are most of the
//! per-byte cost of a TCP stack. The 2002 study found `movsd` losing more than 2x when the
//! buffers were misaligned (7000 vs 3000 cycles for 1448 bytes, seed 001); on today's CPUs glibc
//! still loses ~35% at 1448 bytes misaligned by 4. netfold's kernels align the DESTINATION and
//! let loads be unaligned, so every (src, dst) alignment pair runs at about the same speed, and
//! the checksum rides along in the same pass (seed 003: "fold the checksum into the copy").
//!
//! The kernel set is chosen ONCE, on first use, by CPU feature detection and cached:
//! AVX-512 (F+BW) > AVX2 > SSE2/portable. Every kernel is also reachable by name in [`kernels`]
//! for benchmarks and tests.
//!
//! Checksum semantics everywhere: RFC 1071 one's-complement sum of big-endian 16-bit words
//! (a trailing odd byte padded with zero), folded to 16 bits, NOT complemented. It equals
//! smoltcp's `wire::ip::checksum::data`.
#![allow(unsafe_code)]

mod combine;
pub mod kernels;
mod portable;
#[cfg(target_arch = "x86_64")]
mod x86_copy;
#[cfg(target_arch = "x86_64")]
mod x86_csum;

pub use combine::{
    checksum_add, checksum_concat, checksum_finish, checksum_update, ipv4_pseudo_header_sum,
};

use std::sync::OnceLock;

/// Which copy path a stack uses: netfold's kernels with the checksum folded into the copy, or
/// the 2002 baseline (the C library's `memcpy` and a separate checksum pass) that the
/// benchmark's `--copy baseline` measures inside a running stack (seed 000 Figures 5-6). It is
/// configuration of one stack (`StackConfig::copy_mode`), not a process-wide switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CopyMode {
    /// netfold's copy kernels; checksum computed in the same pass as the copy.
    #[default]
    Kernels,
    /// `memcpy`, then a second pass for the checksum.
    Baseline,
}

impl CopyMode {
    /// [`copy`] in this mode.
    #[inline]
    pub fn copy(self, dst: &mut [u8], src: &[u8]) {
        match self {
            CopyMode::Kernels => copy(dst, src),
            CopyMode::Baseline => dst[..src.len()].copy_from_slice(src),
        }
    }

    /// [`copy_with_checksum`] in this mode: one fused pass, or a copy then a checksum pass.
    #[inline]
    pub fn copy_with_checksum(self, dst: &mut [u8], src: &[u8]) -> u16 {
        match self {
            CopyMode::Kernels => copy_with_checksum(dst, src),
            CopyMode::Baseline => {
                let dst = &mut dst[..src.len()];
                dst.copy_from_slice(src);
                checksum(dst)
            }
        }
    }
}

/// Raw kernel entry points. Invariant: a `Dispatch` is only built (in [`select`]) with kernels
/// whose CPU features were detected, so calling its pointers is sound for valid ranges.
struct Dispatch {
    name: &'static str,
    /// Copies `n` bytes between valid, non-overlapping ranges.
    copy: unsafe fn(*mut u8, *const u8, usize),
    /// Little-endian-word sum of at most `MAX_CHUNK` valid bytes.
    sum_le: unsafe fn(*const u8, usize) -> u16,
    /// Fused copy + little-endian-word sum of at most `MAX_CHUNK` bytes.
    copy_sum_le: unsafe fn(*mut u8, *const u8, usize) -> u16,
}

/// Largest piece handed to one `sum_le` / `copy_sum_le` call (even, so pieces never shift the
/// 16-bit word grid).
#[cfg(target_arch = "x86_64")]
const MAX_CHUNK: usize = x86_csum::MAX_CHUNK;
#[cfg(not(target_arch = "x86_64"))]
const MAX_CHUNK: usize = 1 << 30;

/// # Safety
/// Ranges valid for `n` bytes, non-overlapping.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn portable_copy(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: the caller guarantees both ranges are valid for `n` bytes and disjoint.
    let (dst, src) = unsafe {
        (
            core::slice::from_raw_parts_mut(d, n),
            core::slice::from_raw_parts(s, n),
        )
    };
    portable::copy_words(dst, src);
}

/// # Safety
/// `s` valid for `n` bytes.
unsafe fn portable_sum_le(s: *const u8, n: usize) -> u16 {
    // SAFETY: the caller guarantees the range is valid.
    portable::sum_le(unsafe { core::slice::from_raw_parts(s, n) })
}

/// # Safety
/// Ranges valid for `n` bytes, non-overlapping.
unsafe fn portable_copy_sum_le(d: *mut u8, s: *const u8, n: usize) -> u16 {
    // SAFETY: the caller guarantees both ranges are valid for `n` bytes and disjoint.
    let (dst, src) = unsafe {
        (
            core::slice::from_raw_parts_mut(d, n),
            core::slice::from_raw_parts(s, n),
        )
    };
    portable::copy_with_checksum(dst, src).swap_bytes()
}

fn select() -> Dispatch {
    #[cfg(target_arch = "x86_64")]
    {
        // `rep movsb` is only used for large copies where ERMS makes it fast.
        let erms = std::arch::is_x86_feature_detected!("ermsb");
        if kernels::has_avx512() {
            let copy: unsafe fn(*mut u8, *const u8, usize) =
                match (kernels::has_avx512_vbmi(), erms) {
                    (true, true) => x86_copy::dispatch_avx512_vbmi,
                    (false, true) => x86_copy::dispatch_avx512,
                    (_, false) => x86_copy::avx512_raw,
                };
            return Dispatch {
                name: if kernels::has_avx512_vbmi() {
                    "avx512-vbmi"
                } else {
                    "avx512"
                },
                copy,
                sum_le: x86_csum::sum_le_avx512,
                copy_sum_le: if kernels::has_avx512_vbmi() {
                    x86_csum::copy_sum_le_avx512_vbmi
                } else {
                    x86_csum::copy_sum_le_avx512
                },
            };
        }
        if kernels::has_avx2() {
            return Dispatch {
                name: "avx2",
                copy: if erms {
                    x86_copy::dispatch_avx2
                } else {
                    x86_copy::avx2_raw
                },
                sum_le: x86_csum::sum_le_avx2,
                copy_sum_le: x86_csum::copy_sum_le_avx2,
            };
        }
        Dispatch {
            name: "sse2",
            copy: x86_copy::sse2_raw,
            sum_le: portable_sum_le,
            copy_sum_le: portable_copy_sum_le,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    Dispatch {
        name: "portable",
        copy: portable_copy,
        sum_le: portable_sum_le,
        copy_sum_le: portable_copy_sum_le,
    }
}

#[inline]
fn dispatch() -> &'static Dispatch {
    static D: OnceLock<Dispatch> = OnceLock::new();
    D.get_or_init(select)
}

/// Name of the kernel set [`copy`], [`checksum`] and [`copy_with_checksum`] use on this CPU
/// ("avx512-vbmi", "avx512", "avx2", "sse2" or "portable").
pub fn selected_kernels() -> &'static str {
    dispatch().name
}

/// Copies `src` into the front of `dst`. Panics only if `dst` is shorter than `src`.
///
/// Sizes up to 4 vectors are copied with overlapping loads/stores from both ends; larger ones
/// with a destination-aligned body (on AVX-512 VBMI CPUs also source-aligned: lines are
/// re-assembled with `vpermt2b`, so no load splits a cache line); from 32 KiB up with
/// `rep movsb`, which then beats vector loops (no read-for-ownership of destination lines).
#[inline]
pub fn copy(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    #[cfg(target_arch = "x86_64")]
    if n <= 64 {
        // SAFETY: n <= 64; both slices hold `n` bytes and cannot overlap. Baseline x86_64
        // instructions only, so no feature detection is needed.
        unsafe { x86_copy::copy_le64(dst.as_mut_ptr(), src.as_ptr(), n) };
        return;
    }
    // SAFETY: `dst` and `src` hold `n` bytes each and cannot overlap (`&mut` and `&` borrows);
    // the dispatch only holds kernels whose CPU features were detected.
    unsafe { (dispatch().copy)(dst.as_mut_ptr(), src.as_ptr(), n) }
}

/// RFC 1071 checksum of `data`: one's-complement sum of big-endian 16-bit words (odd trailing
/// byte padded with zero), folded, NOT complemented. Equals smoltcp's
/// `wire::ip::checksum::data(data)`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    if data.len() <= 64 {
        // Tiny inputs (headers): the scalar add-with-carry loop beats a dispatched vector
        // kernel's call and horizontal reduction.
        return portable::checksum_small(data);
    }
    let d = dispatch();
    if data.len() <= MAX_CHUNK {
        // SAFETY: `data` is a valid range of at most MAX_CHUNK bytes; dispatch invariant.
        return unsafe { (d.sum_le)(data.as_ptr(), data.len()) }.swap_bytes();
    }
    let mut sum = 0u16;
    for c in data.chunks(MAX_CHUNK) {
        // SAFETY: as above, per chunk. MAX_CHUNK is even, so chunks keep the word grid.
        sum = checksum_add(sum, unsafe { (d.sum_le)(c.as_ptr(), c.len()) });
    }
    sum.swap_bytes()
}

/// `checksum_add(initial, checksum(data))`: continues a sum (e.g. a pseudo-header sum) over
/// `data`, which must start on an even offset of the checksummed whole (else use
/// [`checksum_concat`]).
#[inline]
pub fn checksum_with_initial(initial: u16, data: &[u8]) -> u16 {
    checksum_add(initial, checksum(data))
}

/// Copies `src` into the front of `dst` and returns `checksum(src)`, in ONE pass over the data
/// (seed 003, seed 000 §2.3). Panics only if `dst` is shorter than `src`.
#[inline]
pub fn copy_with_checksum(dst: &mut [u8], src: &[u8]) -> u16 {
    let n = src.len();
    let dst = &mut dst[..n];
    let d = dispatch();
    if n <= MAX_CHUNK {
        // SAFETY: equal-length, non-overlapping valid ranges of at most MAX_CHUNK bytes;
        // dispatch invariant.
        return unsafe { (d.copy_sum_le)(dst.as_mut_ptr(), src.as_ptr(), n) }.swap_bytes();
    }
    let mut sum = 0u16;
    for (dc, sc) in dst.chunks_mut(MAX_CHUNK).zip(src.chunks(MAX_CHUNK)) {
        // SAFETY: as above, per chunk pair (same chunking of equal-length slices).
        let part = unsafe { (d.copy_sum_le)(dc.as_mut_ptr(), sc.as_ptr(), sc.len()) };
        sum = checksum_add(sum, part);
    }
    sum.swap_bytes()
}

#[cfg(test)]
mod tests;
