//! Per-destination path MTU (RFC 1191 for IPv4, RFC 8201 for IPv6): what ICMP "fragmentation
//! needed" and ICMPv6 "packet too big" messages taught us about the paths to other hosts, so
//! that datagrams we fragment are cut to the path's MTU, not only the link's. TCP keeps its
//! own per-connection estimate (`tcp::IcmpError::FragNeeded`); this cache is the interface's,
//! used by everything the IP layer fragments (UDP, ICMP). One generic cache, one instance per
//! address family, each with its family's floor.

use crate::time::{Duration, Instant};
use crate::wire::Ipv4Addr;
use std::hash::Hash;

/// Destinations remembered at once; the oldest entry makes room for a new one.
pub const MAX_ENTRIES: usize = 64;
/// How long a lowered estimate stands before the link MTU is tried again (RFC 1191 §6.3:
/// "the timeout should be set to a value of 10 minutes"; RFC 8201 §4 "The recommended
/// setting for this timer is twice its minimum value (10 minutes)", Linux's
/// `mtu_expires` for both families).
pub const TIMEOUT: Duration = Duration::from_secs(600);
/// No path MTU is below 68 bytes (RFC 791 §3.2: every module must forward a 68-byte
/// datagram without further fragmentation; RFC 1191 §3: "never reduce ... below 68").
pub const MIN_MTU: usize = 68;

#[derive(Debug, Clone, Copy)]
struct Entry<A> {
    dst: A,
    mtu: usize,
    learned: Instant,
}

/// See the module documentation. `A` is the destination address type.
#[derive(Debug)]
pub(crate) struct PathMtuCache<A = Ipv4Addr> {
    entries: Vec<Entry<A>>,
    /// The floor: [`MIN_MTU`] for IPv4, 1280 for IPv6.
    min_mtu: usize,
}

impl PathMtuCache<Ipv4Addr> {
    /// The IPv4 cache (floor [`MIN_MTU`]).
    pub fn new() -> PathMtuCache<Ipv4Addr> {
        PathMtuCache::with_floor(MIN_MTU)
    }
}

impl<A: Copy + Eq + Hash> PathMtuCache<A> {
    /// A cache that never goes below `min_mtu`.
    pub fn with_floor(min_mtu: usize) -> PathMtuCache<A> {
        PathMtuCache {
            entries: Vec::with_capacity(MAX_ENTRIES),
            min_mtu,
        }
    }

    /// The path MTU to `dst` as of `now`, at most `link_mtu`.
    pub fn get(&self, now: Instant, dst: A, link_mtu: usize) -> usize {
        self.entries
            .iter()
            .find(|e| e.dst == dst && now.saturating_since(e.learned) < TIMEOUT)
            .map_or(link_mtu, |e| e.mtu.min(link_mtu))
    }

    /// Records a next-hop MTU reported for `dst`. RFC 1191 §3 (and RFC 8201 §4): a report only
    /// ever lowers the estimate (a larger one is ignored while the entry stands), never below
    /// the floor.
    pub fn learn(&mut self, now: Instant, dst: A, mtu: usize) {
        let mtu = mtu.max(self.min_mtu);
        if let Some(e) = self.entries.iter_mut().find(|e| e.dst == dst) {
            if now.saturating_since(e.learned) >= TIMEOUT || mtu < e.mtu {
                e.mtu = mtu;
                e.learned = now;
            }
            return;
        }
        let e = Entry {
            dst,
            mtu,
            learned: now,
        };
        if self.entries.len() < MAX_ENTRIES {
            self.entries.push(e);
        } else if let Some(old) = self.entries.iter_mut().min_by_key(|e| e.learned) {
            *old = e;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowers_only_expires_and_stays_bounded() {
        let mut c = PathMtuCache::new();
        let d = Ipv4Addr::new(198, 18, 1, 1);
        let t0 = Instant::ZERO;
        assert_eq!(c.get(t0, d, 1500), 1500);
        c.learn(t0, d, 1200);
        assert_eq!(c.get(t0, d, 1500), 1200);
        c.learn(t0, d, 1400);
        assert_eq!(c.get(t0, d, 1500), 1200);
        c.learn(t0, d, 10);
        assert_eq!(c.get(t0, d, 1500), MIN_MTU);
        assert_eq!(c.get(t0 + TIMEOUT, d, 1500), 1500);
        for i in 0..(MAX_ENTRIES as u32 + 5) {
            c.learn(t0, Ipv4Addr::from(0xc612_0000 + i), 1000);
        }
        assert!(c.entries.len() <= MAX_ENTRIES);
    }
}
