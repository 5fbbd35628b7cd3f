//! The per-stack secret key that makes a stack's sequence numbers (RFC 6528), ephemeral ports
//! (RFC 6056) and SYN cookies (RFC 4987 §3.6) unpredictable to anyone off the path.
//!
//! RFC 6528 §3: "F() MUST NOT be computable from the outside ... secretkey is a secret key".
//! A key known to an attacker (the all-zero key `StackConfig` used to default to) lets anyone
//! compute a netfold stack's ISNs and forge segments into its connections blindly. So:
//!
//! - [`Secret::random`] (the default) draws a fresh key from the operating system;
//! - [`Secret::fixed_for_tests`] is the only way to choose a key, and says by its name that the
//!   caller asks for determinism (virtual-time tests, reproducible traces), not for security.
//!
//! Where the randomness comes from, without adding `libc` to the core (DESIGN: the core has no
//! OS dependency): two sources, XORed together, so the key is as strong as the better one.
//!
//! 1. `/dev/urandom` read through `std::fs` — the OS CSPRNG itself (on Linux the same pool
//!    `getrandom(2)` draws from, never blocking once seeded at boot), 128 independent bits
//!    per key. Absent on some targets (non-Unix, a chroot or sandbox without `/dev`): then the
//!    read fails and this source contributes nothing.
//! 2. `std::collections::hash_map::RandomState`, which std seeds from the OS on every target
//!    that has std (getrandom, BCryptGenRandom, arc4random, ...), hashed (SipHash-1-3 under
//!    those keys) over a process-wide counter and the current time. Available everywhere, but
//!    std documents its keys only as "random", seeds them once per thread and derives later
//!    `RandomState`s by incrementing one key, so alone it is the weaker source: hence the
//!    fallback, not the primary.
//!
//! The counter also guarantees two keys made in the same process at the same instant differ
//! even on a target where both sources were to fail.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// Key length: SipHash-2-4 takes a 128-bit key.
pub const SECRET_LEN: usize = 16;

/// Distinguishes keys made in one process (see the module doc).
static MADE: AtomicU64 = AtomicU64::new(0);

/// A 128-bit secret key. `Debug` never prints it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Secret([u8; SECRET_LEN]);

impl Secret {
    /// A fresh key from the operating system (see the module doc for the sources).
    pub fn random() -> Self {
        let mut key = std_random_key();
        if let Some(os) = urandom_key() {
            for (k, o) in key.iter_mut().zip(os) {
                *k ^= o;
            }
        }
        Secret(key)
    }

    /// A chosen key, for tests and reproducible runs that need the same ISNs, ports and
    /// cookies every time. Never for a stack that faces a network: anyone who knows the key
    /// can predict its sequence numbers.
    pub const fn fixed_for_tests(key: [u8; SECRET_LEN]) -> Self {
        Secret(key)
    }

    /// The key bytes, for the keyed hash functions inside the TCP engine.
    pub(crate) fn bytes(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }
}

impl Default for Secret {
    /// Random, as a secret must be.
    fn default() -> Self {
        Secret::random()
    }
}

impl core::fmt::Debug for Secret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// 16 bytes from `/dev/urandom`, or `None` where it cannot be read.
fn urandom_key() -> Option<[u8; SECRET_LEN]> {
    use std::io::Read;
    let mut key = [0u8; SECRET_LEN];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .ok()?;
    Some(key)
}

/// 16 bytes from two `RandomState` hashers (each seeded from the OS by std) over a
/// process-wide counter and the wall clock.
fn std_random_key() -> [u8; SECRET_LEN] {
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut key = [0u8; SECRET_LEN];
    for (half, chunk) in key.chunks_exact_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u128(t);
        h.write_usize(half);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_keys_differ_and_are_not_zero() {
        let a = Secret::random();
        let b = Secret::random();
        assert_ne!(a, b);
        assert_ne!(a.bytes(), &[0; SECRET_LEN]);
        assert_ne!(Secret::default(), Secret::default());
    }

    #[test]
    fn default_stack_configs_get_different_random_keys() {
        use crate::iface::StackConfig;
        let (a, b) = (StackConfig::default(), StackConfig::default());
        assert_ne!(a.tcp_secret, b.tcp_secret);
        assert_ne!(a.tcp_secret, Secret::fixed_for_tests([0; SECRET_LEN]));
    }

    #[test]
    fn fallback_source_alone_gives_distinct_keys() {
        assert_ne!(std_random_key(), std_random_key());
    }

    #[test]
    fn fixed_key_is_the_given_bytes() {
        let k = [9u8; SECRET_LEN];
        assert_eq!(Secret::fixed_for_tests(k).bytes(), &k);
        assert_eq!(Secret::fixed_for_tests(k), Secret::fixed_for_tests(k));
    }

    #[test]
    fn debug_hides_the_key() {
        let s = format!("{:?}", Secret::fixed_for_tests([0xab; SECRET_LEN]));
        assert!(!s.contains("171") && !s.contains("ab"), "{s}");
    }
}
