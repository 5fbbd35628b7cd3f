//! Deterministic byte generators: the body of `GET /bytes/N` and the RFC 864 chargen stream.
//!
//! Both are pure functions of the byte offset, so a sender that could only hand part of a chunk
//! to TCP regenerates the rest later instead of keeping a per-connection copy (bounded memory),
//! and a test can recompute the expected bytes (or their SHA-256) independently.

/// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit word per 8-byte block of the body.
const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `out` with the body bytes starting at `offset`.
///
/// Byte `i` of the body is byte `i % 8` (little-endian) of `splitmix64(i / 8)`. Unlike a short
/// repeating pattern, any misplaced, duplicated or dropped block changes the digest, so a
/// byte-exact comparison of a 100 MB download really checks every position.
pub fn fill_bytes(offset: u64, out: &mut [u8]) {
    let mut pos = offset;
    let mut i = 0;
    while i < out.len() {
        let word = splitmix64(pos / 8).to_le_bytes();
        let start = (pos % 8) as usize;
        let n = (8 - start).min(out.len() - i);
        out[i..i + n].copy_from_slice(&word[start..start + n]);
        i += n;
        pos += n as u64;
    }
}

/// Characters per chargen line, not counting CR LF (RFC 864: "72 chars per line").
pub const CHARGEN_LINE: u64 = 72;
/// A chargen line on the wire: 72 characters then CR LF.
pub const CHARGEN_STRIDE: u64 = CHARGEN_LINE + 2;
/// The 95 printable ASCII characters (space through tilde) cycle through the lines.
const PRINTABLE: u64 = 95;

/// Fills `out` with the chargen stream starting at `offset`.
///
/// RFC 864 ("Character Generator Protocol", the suggested pattern): line `k` holds the 72
/// printable characters starting at printable character `k mod 95`, each line ending in CR LF.
pub fn fill_chargen(offset: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        let pos = offset + i as u64;
        let line = pos / CHARGEN_STRIDE;
        let col = pos % CHARGEN_STRIDE;
        *b = match col {
            c if c < CHARGEN_LINE => b' ' + ((line + c) % PRINTABLE) as u8,
            CHARGEN_LINE => b'\r',
            _ => b'\n',
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_a_function_of_offset_only() {
        let mut whole = vec![0u8; 1000];
        fill_bytes(0, &mut whole);
        // Any split into pieces at odd offsets gives the same bytes.
        let mut pieces = vec![0u8; 1000];
        let mut at = 0;
        for step in [1usize, 7, 8, 13, 64, 3, 500] {
            let end = (at + step).min(1000);
            fill_bytes(at as u64, &mut pieces[at..end]);
            at = end;
        }
        fill_bytes(at as u64, &mut pieces[at..]);
        assert_eq!(whole, pieces);
        // Blocks differ from each other (not a short period).
        assert_ne!(whole[0..8], whole[8..16]);
        assert_eq!(&whole[0..8], &splitmix64(0).to_le_bytes());
    }

    #[test]
    fn chargen_matches_rfc864_lines() {
        let mut buf = vec![0u8; (CHARGEN_STRIDE * 2) as usize];
        fill_chargen(0, &mut buf);
        let first = &buf[..74];
        assert_eq!(first[0], b' ');
        assert_eq!(first[71], b' ' + 71);
        assert_eq!(&first[72..], b"\r\n");
        // The second line starts one character later.
        assert_eq!(buf[74], b'!');
        // Line 95 wraps back to the first line's pattern.
        let mut l95 = [0u8; 74];
        fill_chargen(95 * CHARGEN_STRIDE, &mut l95);
        assert_eq!(&l95[..], first);
        // Only printable characters and CR LF appear.
        assert!(buf
            .iter()
            .all(|&b| (b' '..=b'~').contains(&b) || b == b'\r' || b == b'\n'));
    }
}
