//! Ephemeral port selection, RFC 6056 §3.3.4 "Algorithm 4: Double-Hash Port Selection".
//!
//! Why not a global counter (what netfold did before) or Algorithm 3: a counter shared by all
//! destinations lets anyone who talks to us learn how many connections we opened elsewhere and
//! predict the next port (RFC 6056 §2.3); Algorithm 3's single `next_ephemeral` still does.
//! Algorithm 4 keeps one counter per bucket of (local IP, remote IP, remote port), so
//! connections to one destination tell nothing about ports used towards another:
//!
//! ```text
//! offset = F(local_IP, remote_IP, remote_port, secret_key1);
//! index  = G(local_IP, remote_IP, remote_port, secret_key2);
//! do { port = min_ephemeral + (offset + table[index]) % num_ephemeral;
//!      table[index]++;
//!      if (check_suitable_port(port)) return port; } while (--count > 0);
//! ```
//!
//! F and G are the two 32-bit halves of one SipHash-2-4 of (local IP, remote IP, remote port)
//! under the stack's [`Secret`]: the RFC's two keys make F and G independent; one run of a
//! PRF with a 64-bit output gives two independent, equally unpredictable 32-bit values (its
//! output is indistinguishable from uniformly random bits without the key), for half the
//! cost. Linux, too, takes both from one keyed hash (`__inet_hash_connect`: the table index
//! from the low bits of `secure_ipv4_port_ephemeral`'s 32-bit output, the offset from its high
//! 16 bits). Choices, compared with the RFC and Linux:
//! - TABLE_LENGTH is 2^16, Linux's size since 2022: Klein & Pinkas ("Device tracking via
//!   Linux's new TCP source port selection algorithm", USENIX Security 2022) tracked devices
//!   through collisions in the 256-entry table Linux had. The table (128 KiB) is allocated on
//!   the first ephemeral connect, so stacks that never connect do not pay for it.
//! - The table starts at zero rather than random (RFC): the secret per-destination `offset`
//!   already makes the first port unpredictable; the counters only have to move.
//! - Linux's extras (even/odd split between connect and bind, random extra increments) are not
//!   done: netfold binds no ephemeral TCP ports outside connect().

use super::isn::put_ip;
use super::secret::Secret;
use crate::hash::siphash24;
use std::net::{IpAddr, SocketAddr};

/// RFC 6335 §6: the dynamic (ephemeral) port range 49152-65535.
/// (The range itself is defined once, in [`crate::wire::EPHEMERAL_PORTS`].)
pub const FIRST: u16 = *crate::wire::EPHEMERAL_PORTS.start();
/// Ports in the range.
pub const COUNT: u32 = *crate::wire::EPHEMERAL_PORTS.end() as u32 - FIRST as u32 + 1;
/// Counters in the perturbation table (see the module doc).
const TABLE_LEN: usize = 1 << 16;
/// Domain tag of the hash F and G are taken from (other modules use other tags under the same
/// key: `isn.rs` 0, `syncookie.rs` 4 and 5; 1 and 3 are no longer used).
const TAG_PORT: u8 = 2;

/// The per-stack state of Algorithm 4: `table[]`.
#[derive(Debug, Default)]
pub struct EphemeralPorts {
    table: Vec<u16>,
}

/// The keyed hash F and G come from: (tag, local IP, remote IP, remote port), addresses in
/// their family's length (11 bytes of message for IPv4, 35 for IPv6).
fn keyed(secret: &Secret, tag: u8, local: IpAddr, remote: SocketAddr) -> u64 {
    let mut m = [0u8; 35];
    m[0] = tag;
    let mut n = put_ip(&mut m, 1, local);
    n = put_ip(&mut m, n, remote.ip());
    m[n..n + 2].copy_from_slice(&remote.port().to_be_bytes());
    siphash24(secret.bytes(), &m[..n + 2])
}

impl EphemeralPorts {
    pub fn new() -> Self {
        EphemeralPorts::default()
    }

    /// A port in 49152..=65535 for a connection from `local` to `remote` that `suitable`
    /// accepts (not in use towards `remote`, not a listener), or `None` when every port of
    /// the range was tried.
    pub fn pick(
        &mut self,
        secret: &Secret,
        local: IpAddr,
        remote: SocketAddr,
        mut suitable: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        if self.table.is_empty() {
            self.table = vec![0; TABLE_LEN];
        }
        // F: the low half; G: the high half (see the module doc).
        let h = keyed(secret, TAG_PORT, local, remote);
        let offset = h as u32;
        let index = (h >> 32) as usize % TABLE_LEN;
        for _ in 0..COUNT {
            let t = &mut self.table[index];
            let port = FIRST + (offset.wrapping_add(u32::from(*t)) % COUNT) as u16;
            *t = t.wrapping_add(1);
            if suitable(port) {
                return Some(port);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> Secret {
        Secret::fixed_for_tests([b; 16])
    }
    use std::net::{Ipv4Addr, SocketAddrV4};
    const L: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    fn r(port: u16) -> SocketAddr {
        SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), port).into()
    }

    #[test]
    fn ports_are_in_range_and_successive_per_destination() {
        let mut p = EphemeralPorts::new();
        let a = p.pick(&key(1), L, r(80), |_| true).unwrap();
        let b = p.pick(&key(1), L, r(80), |_| true).unwrap();
        assert!(a >= FIRST && b >= FIRST);
        // Same destination: the bucket's counter moved by one.
        assert_eq!(u32::from(b - FIRST), (u32::from(a - FIRST) + 1) % COUNT);
    }

    #[test]
    fn other_destinations_do_not_move_the_sequence() {
        let mut p = EphemeralPorts::new();
        let mut q = EphemeralPorts::new();
        let first = p.pick(&key(1), L, r(80), |_| true).unwrap();
        assert_eq!(q.pick(&key(1), L, r(80), |_| true), Some(first));
        // Many connections elsewhere on `q` ...
        for port in 1000..1100 {
            q.pick(&key(1), L, r(port), |_| true).unwrap();
        }
        // ... leave port 80's next choice where it was (barring a bucket collision, which
        // these keys do not have: checked by the equality itself).
        assert_eq!(
            p.pick(&key(1), L, r(80), |_| true),
            q.pick(&key(1), L, r(80), |_| true)
        );
    }

    #[test]
    fn the_key_decides_the_port() {
        let a = EphemeralPorts::new().pick(&key(1), L, r(80), |_| true);
        let b = EphemeralPorts::new().pick(&key(2), L, r(80), |_| true);
        assert_ne!(a, b);
    }

    #[test]
    fn skips_unsuitable_ports_and_reports_exhaustion() {
        let mut p = EphemeralPorts::new();
        let first = p.pick(&key(3), L, r(80), |_| true).unwrap();
        let mut p = EphemeralPorts::new();
        let next = p.pick(&key(3), L, r(80), |x| x != first).unwrap();
        assert_ne!(next, first);
        let mut tried = 0u32;
        assert_eq!(
            EphemeralPorts::new().pick(&key(3), L, r(80), |_| {
                tried += 1;
                false
            }),
            None
        );
        assert_eq!(tried, COUNT);
    }

    #[test]
    fn ipv6_destinations_get_ports_in_range_and_their_own_sequence() {
        let l6: IpAddr = "2001:db8::1".parse().unwrap();
        let r6 = |port| SocketAddr::new("2001:db8::2".parse().unwrap(), port);
        let mut p = EphemeralPorts::new();
        let a = p.pick(&key(1), l6, r6(80), |_| true).unwrap();
        let b = p.pick(&key(1), l6, r6(80), |_| true).unwrap();
        assert!(a >= FIRST && b >= FIRST);
        assert_eq!(u32::from(b - FIRST), (u32::from(a - FIRST) + 1) % COUNT);
        // The IPv4 sequence towards another destination is a separate bucket.
        let mut q = EphemeralPorts::new();
        let v4 = q.pick(&key(1), L, r(80), |_| true).unwrap();
        assert_eq!(
            EphemeralPorts::new().pick(&key(1), L, r(80), |_| true),
            Some(v4)
        );
    }
}
