//! The deterministic byte pattern streams carry, so that a receiver can check every byte
//! (`--verify`) without a side channel. Byte `i` of a stream is `PATTERN[i % PERIOD]`; the period
//! is prime so that it never lines up with message sizes or segment boundaries, which would hide
//! a misplaced segment.

use netfold::buf::ZcBuf;

/// Pattern period in bytes (a prime).
pub const PERIOD: usize = 65521;

/// The pattern, stored with `max_chunk` extra bytes so that any window of up to `max_chunk`
/// bytes starting anywhere in the period is one contiguous slice.
pub struct Pattern {
    /// Shared, so that a zero-copy sender (`--zerocopy`) lends windows of it to the stack
    /// instead of copying them ([`Pattern::window_zc`]).
    bytes: ZcBuf,
    max_chunk: usize,
}

impl Pattern {
    pub fn new(max_chunk: usize) -> Self {
        let mut state: u32 = 0x9e37_79b9;
        let mut bytes = Vec::with_capacity(PERIOD + max_chunk);
        for _ in 0..PERIOD {
            // xorshift32: cheap, and no byte value is favoured.
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            bytes.push((state >> 24) as u8);
        }
        for i in 0..max_chunk {
            let b = bytes[i % PERIOD];
            bytes.push(b);
        }
        Pattern {
            bytes: ZcBuf::from(bytes),
            max_chunk,
        }
    }

    /// The `len` pattern bytes starting at stream offset `offset` (`len <= max_chunk`).
    pub fn window(&self, offset: u64, len: usize) -> &[u8] {
        let len = len.min(self.max_chunk);
        let start = (offset % PERIOD as u64) as usize;
        &self.bytes[start..start + len]
    }

    /// [`Pattern::window`] as a shared buffer for zero-copy send: no byte is copied.
    pub fn window_zc(&self, offset: u64, len: usize) -> ZcBuf {
        let len = len.min(self.max_chunk);
        let start = (offset % PERIOD as u64) as usize;
        self.bytes.slice(start..start + len)
    }
}

/// Checks received bytes against the pattern as they arrive.
pub struct Verifier<'a> {
    pattern: &'a Pattern,
    offset: u64,
    ok: bool,
    first_bad: Option<u64>,
}

impl<'a> Verifier<'a> {
    pub fn new(pattern: &'a Pattern) -> Self {
        Verifier {
            pattern,
            offset: 0,
            ok: true,
            first_bad: None,
        }
    }

    /// Checks the next `data.len()` bytes of the stream.
    pub fn check(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let n = data.len().min(self.pattern.max_chunk);
            let want = self.pattern.window(self.offset, n);
            if want != &data[..n] {
                if self.first_bad.is_none() {
                    let pos = want
                        .iter()
                        .zip(&data[..n])
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    self.first_bad = Some(self.offset + pos as u64);
                }
                self.ok = false;
            }
            self.offset += n as u64;
            data = &data[n..];
        }
    }

    /// True when every byte matched and exactly `expected` bytes arrived.
    pub fn verified(&self, expected: u64) -> bool {
        self.ok && self.offset == expected
    }

    pub fn first_bad(&self) -> Option<u64> {
        self.first_bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_accepts_the_pattern_in_any_chunking_and_catches_one_flipped_bit() {
        let p = Pattern::new(4096);
        let mut stream = Vec::new();
        let mut off = 0u64;
        for n in [1usize, 7, 4096, 1000, 3] {
            stream.extend_from_slice(p.window(off, n));
            off += n as u64;
        }
        // Wrap around the period as well.
        while (stream.len()) < PERIOD + 5000 {
            stream.extend_from_slice(p.window(stream.len() as u64, 4096));
        }
        let mut v = Verifier::new(&p);
        for c in stream.chunks(333) {
            v.check(c);
        }
        assert!(v.verified(stream.len() as u64));
        assert!(!v.verified(stream.len() as u64 + 1));

        stream[70000] ^= 0x10;
        let mut v = Verifier::new(&p);
        v.check(&stream);
        assert!(!v.verified(stream.len() as u64));
        assert_eq!(v.first_bad(), Some(70000));
    }
}
