//! Copy and checksum kernels. Placeholder scalar versions; the mem work replaces them with
//! run-time-dispatched SIMD kernels behind the same names.

/// Copies `src` into the front of `dst`. Panics only if `dst` is shorter than `src`.
pub fn copy(dst: &mut [u8], src: &[u8]) {
    dst[..src.len()].copy_from_slice(src);
}

/// RFC 1071 one's-complement sum of `data`, folded to 16 bits, not complemented.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u64::from(*b) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Copies `src` into `dst` and returns `checksum(src)`.
pub fn copy_with_checksum(dst: &mut [u8], src: &[u8]) -> u16 {
    copy(dst, src);
    checksum(src)
}
