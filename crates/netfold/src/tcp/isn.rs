//! Initial sequence numbers per RFC 6528 §3: `ISN = M + F(localip, localport, remoteip,
//! remoteport, secretkey)`, where M is a timer ticking every 4 microseconds and F is a keyed
//! pseudo-random function. F here is SipHash-2-4 (Aumasson & Bernstein, 2012), from the crate's
//! one hash module ([`crate::hash`]).

use crate::hash::siphash24;
use crate::time::Instant;
use std::net::{IpAddr, SocketAddr};

/// Appends `a`'s octets (4 for IPv4, 16 for IPv6) to `m` at `at`; returns the new end.
pub(crate) fn put_ip(m: &mut [u8], at: usize, a: IpAddr) -> usize {
    match a {
        IpAddr::V4(v4) => {
            m[at..at + 4].copy_from_slice(&v4.octets());
            at + 4
        }
        IpAddr::V6(v6) => {
            m[at..at + 16].copy_from_slice(&v6.octets());
            at + 16
        }
    }
}

/// The keyed hash of a connection's 4-tuple, with a one-byte domain tag so the same secret can
/// derive independent values (tag 0: the ISN offset and timestamp offset, see [`derive`](fn@derive)). The message is the tag, local
/// address and port, remote address and port, addresses in their own family's length (13
/// bytes for IPv4, 37 for IPv6: RFC 6528 §3 hashes "the connection-id", whatever its family).
pub fn tuple_hash(secret: &[u8; 16], tag: u8, local: SocketAddr, remote: SocketAddr) -> u64 {
    let mut m = [0u8; 37];
    m[0] = tag;
    let mut n = put_ip(&mut m, 1, local.ip());
    m[n..n + 2].copy_from_slice(&local.port().to_be_bytes());
    n = put_ip(&mut m, n + 2, remote.ip());
    m[n..n + 2].copy_from_slice(&remote.port().to_be_bytes());
    siphash24(secret, &m[..n + 2])
}

/// What a new connection derives from its 4-tuple under the stack's secret: the RFC 6528 §3
/// initial send sequence number and the RFC 7323 §7.1 timestamp offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Derived {
    pub iss: u32,
    pub ts_offset: u32,
}

/// One keyed hash of the 4-tuple gives both per-connection secrets: its low 32 bits are F()
/// of RFC 6528 §3 ("ISN = M + F(localip, localport, remoteip, remoteport, secretkey)"), its
/// high 32 bits the timestamp offset. Linux runs two SipHash computations under two keys
/// (`secure_tcp_seq`, `secure_tcp_ts_off`); one is enough here: SipHash-2-4 is a PRF with a
/// 64-bit output, so without the key its output is indistinguishable from 64 uniformly random
/// bits, and its two 32-bit halves are two independent, equally unpredictable values. An
/// observer who learns the offset (from TSvals) learns nothing about F(), and the reverse.
/// (This saves one SipHash-2-4 run, ~170 instructions, per connection opened or accepted.)
pub fn derive(secret: &[u8; 16], now: Instant, local: SocketAddr, remote: SocketAddr) -> Derived {
    let h = tuple_hash(secret, 0, local, remote);
    Derived {
        iss: isn_clock(now).wrapping_add(h as u32),
        ts_offset: (h >> 32) as u32,
    }
}

/// RFC 6528 §3 M: a timer that ticks every 4 microseconds.
fn isn_clock(now: Instant) -> u32 {
    (now.total_micros() / 4) as u32
}

/// RFC 6528 §3 ISN: a 4-microsecond clock plus the keyed hash of the 4-tuple (see [`derive`](fn@derive)).
pub fn isn(secret: &[u8; 16], now: Instant, local: SocketAddr, remote: SocketAddr) -> u32 {
    derive(secret, now, local, remote).iss
}

/// RFC 7323 §7.1 recommends a random per-connection offset for TSval, so timestamps do not
/// leak the host clock: the other half of the keyed hash [`derive`](fn@derive) takes the ISN from.
pub fn ts_offset(secret: &[u8; 16], local: SocketAddr, remote: SocketAddr) -> u32 {
    derive(secret, Instant::ZERO, local, remote).ts_offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4, SocketAddrV6};

    fn key() -> [u8; 16] {
        let mut k = [0u8; 16];
        for (i, b) in k.iter_mut().enumerate() {
            *b = i as u8;
        }
        k
    }

    #[test]
    fn siphash_reference_vectors() {
        // From the SipHash paper, appendix A: key 00..0f, message 00..0e.
        let msg: Vec<u8> = (0u8..15).collect();
        assert_eq!(siphash24(&key(), &msg), 0xa129_ca61_49be_45e5);
        // vectors.h entry 0: empty message.
        assert_eq!(siphash24(&key(), &[]), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn isn_monotonic_in_time_and_distinct_per_tuple() {
        let k = key();
        let l = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 1000);
        let r = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 80);
        let r2 = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 81);
        let (l, r, r2) = (l.into(), r.into(), r2.into());
        let a = isn(&k, Instant::from_micros(0), l, r);
        let b = isn(&k, Instant::from_micros(400), l, r);
        assert_eq!(b.wrapping_sub(a), 100, "M ticks every 4 us");
        assert_ne!(isn(&k, Instant::ZERO, l, r), isn(&k, Instant::ZERO, l, r2));
        let mut k2 = k;
        k2[0] ^= 1;
        assert_ne!(isn(&k, Instant::ZERO, l, r), isn(&k2, Instant::ZERO, l, r));
    }

    #[test]
    fn isn_and_ts_offset_are_the_two_halves_of_one_keyed_hash() {
        let k = key();
        let l = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 1000).into();
        let r = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 80).into();
        let h = tuple_hash(&k, 0, l, r);
        let d = derive(&k, Instant::from_micros(400), l, r);
        assert_eq!(d.iss, 100u32.wrapping_add(h as u32));
        assert_eq!(d.ts_offset, (h >> 32) as u32);
        assert_eq!(d.iss, isn(&k, Instant::from_micros(400), l, r));
        assert_eq!(d.ts_offset, ts_offset(&k, l, r));
        // The halves are not tied to each other (one key, two different values).
        assert_ne!(d.ts_offset, h as u32);
        let mut k2 = k;
        k2[15] ^= 1;
        assert_ne!(derive(&k2, Instant::ZERO, l, r).ts_offset, d.ts_offset);
    }

    #[test]
    fn ipv4_hash_is_the_13_byte_message() {
        // The IPv4 message is unchanged by the dual-stack generalisation: tag, local ip+port,
        // remote ip+port.
        let k = key();
        let l = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 1000);
        let r = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 80);
        let mut m = vec![3u8];
        m.extend_from_slice(&l.ip().octets());
        m.extend_from_slice(&l.port().to_be_bytes());
        m.extend_from_slice(&r.ip().octets());
        m.extend_from_slice(&r.port().to_be_bytes());
        assert_eq!(tuple_hash(&k, 3, l.into(), r.into()), siphash24(&k, &m));
    }

    #[test]
    fn ipv6_tuples_hash_all_address_bits() {
        let k = key();
        let l = SocketAddrV6::new("2001:db8::1".parse().unwrap(), 1000, 0, 0);
        let r = SocketAddrV6::new("2001:db8::2".parse().unwrap(), 80, 0, 0);
        let r_low = SocketAddrV6::new("2001:db8::3".parse().unwrap(), 80, 0, 0);
        let r_high = SocketAddrV6::new("3001:db8::2".parse().unwrap(), 80, 0, 0);
        let base = isn(&k, Instant::ZERO, l.into(), r.into());
        assert_ne!(base, isn(&k, Instant::ZERO, l.into(), r_low.into()));
        assert_ne!(base, isn(&k, Instant::ZERO, l.into(), r_high.into()));
        // A v4-mapped address is a different tuple from the IPv4 one (the layer never hashes
        // mapped addresses: it keys IPv4 connections by their IPv4 addresses).
        let l4 = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 1000);
        let r4 = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 80);
        let lm = SocketAddrV6::new(l4.ip().to_ipv6_mapped(), 1000, 0, 0);
        let rm = SocketAddrV6::new(r4.ip().to_ipv6_mapped(), 80, 0, 0);
        assert_ne!(
            tuple_hash(&k, 0, l4.into(), r4.into()),
            tuple_hash(&k, 0, lm.into(), rm.into())
        );
    }
}
