//! The seeded generator.

/// xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators,
/// scrambled", 2016): deterministic, seedable, fast, and good enough for loss decisions and
/// test data. Not for anything secret.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`. Any seed works (0 included): it is spread over the state with
    /// the 64-bit golden ratio and forced odd, so nearby seeds give unrelated streams.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// A generator starting from exactly `state`, for tests that pinned a stream before the
    /// kit existed. xorshift stays at zero forever, so zero is replaced by one.
    pub fn from_state(state: u64) -> Rng {
        Rng(state.max(1))
    }

    /// The next 64 random bits. Named like the test files' own generators were (`rng.next()`),
    /// though it is not an `Iterator`: the stream never ends.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A fair coin.
    pub fn coin(&mut self) -> bool {
        self.next() & 1 == 0
    }

    /// Uniform in [0, 1): the top 53 bits, as many as an f64 mantissa holds.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = (self.next() >> 56) as u8;
        }
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(1);
                move |_| r.next()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(1);
                move |_| r.next()
            })
            .collect();
        let c: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(2);
                move |_| r.next()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn zero_seed_and_state_do_not_stick_at_zero() {
        assert_ne!(Rng::new(0).next(), 0);
        assert_ne!(Rng::from_state(0).next(), 0);
    }

    #[test]
    fn unit_is_in_range_and_bytes_vary() {
        let mut r = Rng::new(7);
        for _ in 0..1000 {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        let v = r.bytes(256);
        assert!(v.iter().any(|&b| b != v[0]));
    }
}
