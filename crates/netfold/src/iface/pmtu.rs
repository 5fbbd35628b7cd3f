//! Per-destination path MTU (RFC 1191): what ICMP "fragmentation needed" messages taught us
//! about the paths to other hosts, so that datagrams we fragment are cut to the path's MTU, not
//! only the link's. TCP keeps its own per-connection estimate (`tcp::IcmpError::FragNeeded`);
//! this cache is the interface's, used by everything the IP layer fragments (UDP, ICMP).

use crate::time::{Duration, Instant};
use crate::wire::Ipv4Addr;

/// Destinations remembered at once; the oldest entry makes room for a new one.
pub const MAX_ENTRIES: usize = 64;
/// How long a lowered estimate stands before the link MTU is tried again (RFC 1191 §6.3:
/// "the timeout should be set to a value of 10 minutes").
pub const TIMEOUT: Duration = Duration::from_secs(600);
/// No path MTU is below 68 bytes (RFC 791 §3.2: every module must forward a 68-byte
/// datagram without further fragmentation; RFC 1191 §3: "never reduce ... below 68").
pub const MIN_MTU: usize = 68;

#[derive(Debug, Clone, Copy)]
struct Entry {
    dst: Ipv4Addr,
    mtu: usize,
    learned: Instant,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct PathMtuCache {
    entries: Vec<Entry>,
}

impl PathMtuCache {
    pub fn new() -> PathMtuCache {
        PathMtuCache {
            entries: Vec::with_capacity(MAX_ENTRIES),
        }
    }

    /// The path MTU to `dst` as of `now`, at most `link_mtu`.
    pub fn get(&self, now: Instant, dst: Ipv4Addr, link_mtu: usize) -> usize {
        self.entries
            .iter()
            .find(|e| e.dst == dst && now.saturating_since(e.learned) < TIMEOUT)
            .map_or(link_mtu, |e| e.mtu.min(link_mtu))
    }

    /// Records a next-hop MTU reported for `dst`. RFC 1191 §3: a report only ever lowers the
    /// estimate (a larger one is ignored while the entry stands), never below [`MIN_MTU`].
    pub fn learn(&mut self, now: Instant, dst: Ipv4Addr, mtu: usize) {
        let mtu = mtu.max(MIN_MTU);
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
