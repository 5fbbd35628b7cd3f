//! The crate's keyed hashes, all SipHash (Aumasson & Bernstein, 2012) under the stack's
//! secret or per-process random keys, written out so the crate needs no dependency for them:
//!
//! - [`siphash24`]: SipHash-2-4 of a byte string, the PRF behind the RFC 6528 ISN and
//!   timestamp offset (`tcp::isn`), RFC 6056 port choice (`tcp::ephemeral`), SYN cookies
//!   (`tcp::syncookie`), RFC 5961 challenge-ACK quotas and IPv6's keyed draws (RFC 4861
//!   reachable time, random delays, RFC 7739 fragment identifications; `iface::ipv6`).
//! - `SipHash13Builder`: SipHash-1-3 with random keys as a `BuildHasher`, what std's
//!   `RandomState` computes, for the connection table (flood-resistant), with word-sized
//!   writes that do not go through a byte buffer.

use std::hash::Hasher;

/// One SipRound (Aumasson & Bernstein, "SipHash: a fast short-input PRF", §2).
#[inline(always)]
fn sipround(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// The initial state for the key `(k0, k1)`.
#[inline(always)]
fn init(k0: u64, k1: u64) -> [u64; 4] {
    [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ]
}

/// SipHash-2-4 of `data` under the 128-bit `key` (reference algorithm, little-endian words).
pub fn siphash24(key: &[u8; 16], data: &[u8]) -> u64 {
    let mut k0 = [0u8; 8];
    let mut k1 = [0u8; 8];
    k0.copy_from_slice(&key[..8]);
    k1.copy_from_slice(&key[8..]);
    let (k0, k1) = (u64::from_le_bytes(k0), u64::from_le_bytes(k1));
    let mut v = init(k0, k1);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let m = u64::from_le_bytes(w);
        v[3] ^= m;
        sipround(&mut v);
        sipround(&mut v);
        v[0] ^= m;
    }
    // Last block: remaining bytes, zero padded, with the message length (mod 256) in the top byte.
    let mut last = [0u8; 8];
    let rem = chunks.remainder();
    last[..rem.len()].copy_from_slice(rem);
    last[7] = data.len() as u8;
    let m = u64::from_le_bytes(last);
    v[3] ^= m;
    sipround(&mut v);
    sipround(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..4 {
        sipround(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// The connection table's hasher: SipHash-1-3 with random keys, the function std's
/// `RandomState` computes (so the table stays flood-resistant), written for the table key's
/// whole words (the connection key writes a `u64` per 8 address bytes and a `u32` of ports).
/// std's streaming implementation buffers every `write` byte-wise and cost ~190 instructions
/// per lookup; TCP_CRR does about a dozen lookups per transaction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SipHash13Builder {
    k0: u64,
    k1: u64,
}

impl SipHash13Builder {
    /// Keys drawn from std's per-process random `RandomState` keys.
    pub(crate) fn random() -> Self {
        use std::hash::BuildHasher;
        let rs = std::collections::hash_map::RandomState::new();
        SipHash13Builder {
            k0: rs.hash_one(0x6e65_7466_6f6c_6430u64),
            k1: rs.hash_one(0x6e65_7466_6f6c_6431u64),
        }
    }
}

impl std::hash::BuildHasher for SipHash13Builder {
    type Hasher = SipHasher13;
    #[inline]
    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13 {
            v: init(self.k0, self.k1),
            tail: 0,
            ntail: 0,
            len: 0,
        }
    }
}

/// SipHash-1-3 state (see [`SipHash13Builder`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SipHasher13 {
    v: [u64; 4],
    /// Bytes not yet compressed (little-endian, `ntail` of them).
    tail: u64,
    ntail: u32,
    len: u64,
}

impl SipHasher13 {
    #[inline(always)]
    fn compress(&mut self, m: u64) {
        self.v[3] ^= m;
        sipround(&mut self.v);
        self.v[0] ^= m;
    }
}

impl Hasher for SipHasher13 {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.tail |= u64::from(b) << (8 * self.ntail);
            self.ntail += 1;
            if self.ntail == 8 {
                let m = self.tail;
                self.compress(m);
                self.tail = 0;
                self.ntail = 0;
            }
        }
        self.len += bytes.len() as u64;
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        if self.ntail == 0 {
            self.compress(x);
            self.len += 8;
        } else {
            self.write(&x.to_le_bytes());
        }
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        if self.ntail == 0 {
            self.tail = u64::from(x);
            self.ntail = 4;
            self.len += 4;
        } else {
            self.write(&x.to_le_bytes());
        }
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut v = self.v;
        let m = (self.len & 0xff) << 56 | self.tail;
        v[3] ^= m;
        sipround(&mut v);
        v[0] ^= m;
        v[2] ^= 0xff;
        sipround(&mut v);
        sipround(&mut v);
        sipround(&mut v);
        v[0] ^ v[1] ^ v[2] ^ v[3]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn word_writes_hash_as_their_bytes() {
        let b = SipHash13Builder { k0: 1, k1: 2 };
        let (w, p) = (0x0102_0304_0506_0708u64, 0x0a0b_0c0du32);
        let mut h1 = b.build_hasher();
        h1.write_u64(w);
        h1.write_u32(p);
        let mut h2 = b.build_hasher();
        h2.write(&w.to_le_bytes());
        h2.write(&p.to_le_bytes());
        assert_eq!(h1.finish(), h2.finish());
        let mut h3 = b.build_hasher();
        h3.write_u32(p);
        h3.write_u64(w);
        assert_ne!(h1.finish(), h3.finish());
        let other = SipHash13Builder { k0: 3, k1: 2 };
        let mut h4 = other.build_hasher();
        h4.write_u64(w);
        h4.write_u32(p);
        assert_ne!(h1.finish(), h4.finish());
    }
}
