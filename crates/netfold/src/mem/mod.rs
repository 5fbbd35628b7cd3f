//! Copy, checksum and fused copy+checksum, with run-time SIMD dispatch.
//!
//! Why this module exists (the 2002 study of the Linux TCP/IP stack, §3; the 2002 copy_to_user
//! thread; the 1996 merged-system-calls thread; the 2001 zerocopy patch thread): copies and
//! checksums are most of the
//! per-byte cost of a TCP stack. The 2002 study found `movsd` losing more than 2x when the
//! buffers were misaligned (7000 vs 3000 cycles for 1448 bytes, the 2002 copy_to_user thread); on today's CPUs glibc
//! still loses ~35% at 1448 bytes misaligned by 4. netfold's kernels align the DESTINATION and
//! let loads be unaligned, so every (src, dst) alignment pair runs at about the same speed, and
//! the checksum rides along in the same pass (the 1996 merged-system-calls thread: "fold the checksum into the copy").
//!
//! The kernels are chosen ONCE, on first use, by MEASUREMENT ([`calibrate`]): every candidate
//! the CPU can run (AVX2, AVX-512 with and without VBMI, `rep movsb`, the C library's `memcpy`,
//! portable code) is timed per size class and the fastest kept, unless one earlier in
//! preference order (`memcpy` first) is within a margin of it; `NETFOLD_KERNELS` can force a
//! choice. Every kernel is also reachable by name in [`kernels`] for benchmarks and tests.
//!
//! Checksum semantics everywhere: RFC 1071 one's-complement sum of big-endian 16-bit words
//! (a trailing odd byte padded with zero), folded to 16 bits, NOT complemented. It equals
//! smoltcp's `wire::ip::checksum::data`.
#![allow(unsafe_code)]

pub mod calibrate;
mod combine;
pub mod kernels;
mod portable;
#[cfg(target_arch = "x86_64")]
mod x86_copy;
#[cfg(target_arch = "x86_64")]
mod x86_csum;
#[cfg(target_arch = "x86_64")]
mod x86_fused;

pub use combine::{
    checksum_add, checksum_concat, checksum_finish, checksum_update, ipv4_pseudo_header_sum,
    ipv6_pseudo_header_sum,
};

use std::sync::OnceLock;

/// Which copy path a stack uses: netfold's kernels with the checksum folded into the copy, or
/// the 2002 baseline (the C library's `memcpy` and a separate checksum pass) that the
/// benchmark's `--copy baseline` measures inside a running stack (the OLS 2002 study's Figures 5-6). It is
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
    #[inline(always)]
    pub fn copy(self, dst: &mut [u8], src: &[u8]) {
        match self {
            CopyMode::Kernels => copy(dst, src),
            CopyMode::Baseline => dst[..src.len()].copy_from_slice(src),
        }
    }

    /// [`copy_with_checksum`] in this mode: one fused pass, or a copy then a checksum pass.
    ///
    /// Inlined to the size test: a small copy (request/response payloads, a few bytes) is done
    /// in place, without the two calls it cost before the kernel was reached.
    #[inline(always)]
    pub fn copy_with_checksum(self, dst: &mut [u8], src: &[u8]) -> u16 {
        match self {
            CopyMode::Kernels => copy_with_checksum(dst, src),
            CopyMode::Baseline => baseline_copy_with_checksum(dst, src),
        }
    }
}

/// [`CopyMode::Baseline`]'s copy and checksum pass (out of line: a measurement mode).
#[inline(never)]
fn baseline_copy_with_checksum(dst: &mut [u8], src: &[u8]) -> u16 {
    let dst = &mut dst[..src.len()];
    dst.copy_from_slice(src);
    checksum(dst)
}

/// The kernels in use, one per family and size class (see [`calibrate::CLASS_MAX`]).
/// Invariant: only built (in [`calibrate`]) from candidates whose CPU features were detected,
/// so calling its pointers is sound for valid ranges.
pub struct KernelSet {
    chosen: calibrate::Chosen,
    calibration: calibrate::Calibration,
    summary: String,
}

/// Size class of an `n`-byte call: three compares and adds, no branch, no table walk (a few
/// cycles against the tens a 1448-byte copy takes).
#[inline(always)]
fn class_of(n: usize) -> usize {
    let m = calibrate::CLASS_MAX;
    usize::from(n > m[0]) + usize::from(n > m[1]) + usize::from(n > m[2])
}

/// Largest fused copy+checksum done inline (scalar) instead of by the chosen kernel.
#[cfg(target_arch = "x86_64")]
const SMALL_FUSED: usize = 16;

/// Largest piece handed to one `sum_le` / `copy_sum_le` call (even, so pieces never shift the
/// 16-bit word grid).
#[cfg(target_arch = "x86_64")]
const MAX_CHUNK: usize = x86_csum::MAX_CHUNK;
#[cfg(not(target_arch = "x86_64"))]
const MAX_CHUNK: usize = 1 << 30;

impl KernelSet {
    fn from_parts((calibration, chosen): (calibrate::Calibration, calibrate::Chosen)) -> Self {
        let summary = calibration.summary();
        KernelSet {
            chosen,
            calibration,
            summary,
        }
    }

    /// Chooses by measurement, except what `NETFOLD_KERNELS` forces (see [`calibrate`]).
    /// Rejected `NETFOLD_KERNELS` items are printed to stderr and kept in the calibration's
    /// `warnings`.
    pub fn from_env() -> Self {
        let spec = std::env::var("NETFOLD_KERNELS").unwrap_or_default();
        let (forced, warnings) = calibrate::parse_forced(&spec);
        for w in &warnings {
            eprintln!("netfold: {w}");
        }
        Self::from_parts(calibrate::calibrate_inner(&forced, warnings))
    }

    /// Chooses every kernel by measurement, ignoring `NETFOLD_KERNELS`.
    pub fn measured() -> Self {
        Self::from_parts(calibrate::calibrate_inner(
            &calibrate::Forced::default(),
            Vec::new(),
        ))
    }

    /// The given kernels for every size class (names as in [`calibrate::candidates`]); `None`
    /// if one is unknown or needs CPU features this machine lacks. For tests and benchmarks.
    pub fn forced(copy: &str, checksum: &str, fused: &str) -> Option<Self> {
        calibrate::forced_all(copy, checksum, fused).map(Self::from_parts)
    }

    /// The timings and choices behind this set.
    pub fn calibration(&self) -> &calibrate::Calibration {
        &self.calibration
    }

    /// One-line summary of the choice, e.g. `copy=avx2/avx2/avx2/rep-movsb csum=avx512 ...`.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// [`copy`] with this set's kernels.
    #[inline(always)]
    pub fn copy(&self, dst: &mut [u8], src: &[u8]) {
        let n = src.len();
        let dst = &mut dst[..n];
        #[cfg(target_arch = "x86_64")]
        if n <= 64 {
            // SAFETY: n <= 64; both slices hold `n` bytes and cannot overlap. Baseline x86_64
            // instructions only, so no feature detection is needed.
            unsafe { x86_copy::copy_le64(dst.as_mut_ptr(), src.as_ptr(), n) };
            return;
        }
        let f = self.chosen.copy[class_of(n)];
        // SAFETY: `dst` and `src` hold `n` bytes each and cannot overlap (`&mut` and `&`
        // borrows); the set only holds kernels whose CPU features were detected.
        unsafe { f(dst.as_mut_ptr(), src.as_ptr(), n) }
    }

    /// [`checksum`] with this set's kernels.
    #[inline]
    pub fn checksum(&self, data: &[u8]) -> u16 {
        if data.len() <= 64 {
            // Tiny inputs (headers): the scalar add-with-carry loop beats a dispatched vector
            // kernel's call and horizontal reduction.
            return portable::checksum_small(data);
        }
        let f = self.chosen.sum[class_of(data.len())];
        if data.len() <= MAX_CHUNK {
            // SAFETY: `data` is a valid range of at most MAX_CHUNK bytes; set invariant.
            return unsafe { f(data.as_ptr(), data.len()) }.swap_bytes();
        }
        let mut sum = 0u16;
        for c in data.chunks(MAX_CHUNK) {
            // SAFETY: as above, per chunk. MAX_CHUNK is even, so chunks keep the word grid.
            sum = checksum_add(sum, unsafe { f(c.as_ptr(), c.len()) });
        }
        sum.swap_bytes()
    }

    /// [`copy_with_checksum`] with this set's kernels.
    #[inline(always)]
    pub fn copy_with_checksum(&self, dst: &mut [u8], src: &[u8]) -> u16 {
        let n = src.len();
        let dst = &mut dst[..n];
        #[cfg(target_arch = "x86_64")]
        if n <= SMALL_FUSED {
            // Tiny payloads (request/response traffic: TCP_RR sends 1 byte): the inline copy
            // and the scalar sum beat an indirect call to a vector kernel and its horizontal
            // reduction (callgrind, `netfold rr`: 120 -> ~30 instructions per call).
            // SAFETY: n <= 16 <= 64; both slices hold `n` bytes and cannot overlap.
            unsafe { x86_copy::copy_le64(dst.as_mut_ptr(), src.as_ptr(), n) };
            return portable::checksum_small(src);
        }
        self.copy_with_checksum_kernel(dst, src)
    }

    /// `copy_with_checksum` past the small-copy test: the chosen kernel, chunked (out of
    /// line, so the inlined small path stays small at each call site).
    #[inline(never)]
    fn copy_with_checksum_kernel(&self, dst: &mut [u8], src: &[u8]) -> u16 {
        let n = src.len();
        let dst = &mut dst[..n];
        let f = self.chosen.fused[class_of(n)];
        if n <= MAX_CHUNK {
            // SAFETY: equal-length, non-overlapping valid ranges of at most MAX_CHUNK bytes;
            // set invariant.
            return unsafe { f(dst.as_mut_ptr(), src.as_ptr(), n) }.swap_bytes();
        }
        let mut sum = 0u16;
        for (dc, sc) in dst.chunks_mut(MAX_CHUNK).zip(src.chunks(MAX_CHUNK)) {
            // SAFETY: as above, per chunk pair (same chunking of equal-length slices).
            let part = unsafe { f(dc.as_mut_ptr(), sc.as_ptr(), sc.len()) };
            sum = checksum_add(sum, part);
        }
        sum.swap_bytes()
    }
}

/// The process-wide set, chosen on first use ([`KernelSet::from_env`]).
#[inline]
fn dispatch() -> &'static KernelSet {
    static D: OnceLock<KernelSet> = OnceLock::new();
    D.get_or_init(KernelSet::from_env)
}

/// Summary of the kernels [`copy`], [`checksum`] and [`copy_with_checksum`] use, e.g.
/// `copy=avx2/avx2/avx2/rep-movsb csum=avx512 fused=avx2` (one name per size class of
/// [`calibrate::CLASS_MAX`], or one when all agree). Triggers the choice if not made yet.
pub fn selected_kernels() -> &'static str {
    dispatch().summary()
}

/// The timings and choices behind [`selected_kernels`] (triggers the choice if not made yet).
pub fn calibration() -> &'static calibrate::Calibration {
    dispatch().calibration()
}

/// Copies `src` into the front of `dst`. Panics only if `dst` is shorter than `src`.
///
/// Up to 64 bytes: overlapping loads/stores from both ends, inline. Larger: the kernel that
/// measured fastest for the size class on this CPU ([`calibrate`], with a margin in favour of
/// `memcpy`): a destination-aligned vector loop (AVX2, AVX-512, or AVX-512 VBMI with source
/// lines re-assembled by `vpermt2b`), `rep movsb`, or the C library's `memcpy`.
#[inline(always)]
pub fn copy(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    dispatch().copy(dst, src)
}

/// RFC 1071 checksum of `data`: one's-complement sum of big-endian 16-bit words (odd trailing
/// byte padded with zero), folded, NOT complemented. Equals smoltcp's
/// `wire::ip::checksum::data(data)`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    dispatch().checksum(data)
}

/// `checksum_add(initial, checksum(data))`: continues a sum (e.g. a pseudo-header sum) over
/// `data`, which must start on an even offset of the checksummed whole (else use
/// [`checksum_concat`]).
#[inline]
pub fn checksum_with_initial(initial: u16, data: &[u8]) -> u16 {
    checksum_add(initial, checksum(data))
}

/// Copies `src` into the front of `dst` and returns `checksum(src)`, in ONE pass over the data
/// (the 1996 merged-system-calls thread, the OLS 2002 study). Panics only if `dst` is shorter than `src`.
#[inline(always)]
pub fn copy_with_checksum(dst: &mut [u8], src: &[u8]) -> u16 {
    let n = src.len();
    let dst = &mut dst[..n];
    dispatch().copy_with_checksum(dst, src)
}

#[cfg(test)]
mod tests;
