//! The ARP neighbour cache (RFC 826) and the queue of packets waiting for a resolution.
//!
//! Bounded everywhere: at most `MAX_ENTRIES` cached addresses, at most `pending_limit` parked
//! frames in total, and at most `MAX_RESOLVING` addresses being resolved at once. Entries expire
//! `ttl` after they were last confirmed; expiry is checked lazily on lookup, so it needs no
//! timer. A request for an address is repeated at most once per `retry_interval` (RFC 1122
//! §2.3.2.1: "a mechanism to prevent ARP flooding ... MUST ... no more than one ARP request per
//! second per destination"); after `max_retries` unanswered requests its parked frames are
//! dropped and counted.

use crate::buf::PacketBuf;
use crate::time::{Duration, Instant};
use crate::wire::ethernet::EthernetAddress;
use crate::wire::Ipv4Addr;
use std::collections::{HashMap, VecDeque};

/// Largest number of cached neighbours.
pub const MAX_ENTRIES: usize = 1024;
/// Largest number of addresses with an outstanding request.
pub const MAX_RESOLVING: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Entry {
    mac: EthernetAddress,
    expires: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Resolving {
    ip: Ipv4Addr,
    last_request: Instant,
    requests: u32,
}

/// Timer output of [`NeighborCache::poll`].
#[derive(Debug)]
pub enum Event {
    /// Send another ARP request for this address.
    Request(Ipv4Addr),
    /// A parked frame whose next hop never answered; recycle it and count the drop.
    Drop(PacketBuf),
    /// This next hop used up its retries without an answer (after its `Drop`s): whoever
    /// waits on it learns that the host is unreachable.
    GaveUp(Ipv4Addr),
}

/// What the caller must do after parking a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Park {
    /// Parked; send an ARP request now.
    SendRequest,
    /// Parked; a request went out recently.
    Waiting,
    /// Not parked (queue or resolver table full); the frame is handed back to be dropped.
    Full,
}

#[derive(Debug)]
pub struct NeighborCache {
    entries: HashMap<Ipv4Addr, Entry>,
    /// The entry used last: bulk traffic goes to one next hop, and this spares a SipHash
    /// lookup per transmitted packet. Always equal to the map's entry for that address.
    hot: Option<(Ipv4Addr, Entry)>,
    resolving: Vec<Resolving>,
    pending: VecDeque<(Ipv4Addr, PacketBuf)>,
    pending_limit: usize,
    ttl: Duration,
    retry_interval: Duration,
    max_retries: u32,
}

impl NeighborCache {
    pub fn new(
        ttl: Duration,
        pending_limit: usize,
        retry_interval: Duration,
        max_retries: u32,
    ) -> Self {
        NeighborCache {
            entries: HashMap::with_capacity(64),
            hot: None,
            resolving: Vec::with_capacity(MAX_RESOLVING),
            pending: VecDeque::with_capacity(pending_limit.min(4096)),
            pending_limit,
            ttl,
            retry_interval,
            max_retries: max_retries.max(1),
        }
    }

    /// The cached MAC for `ip`, if fresh (read-only; see `lookup_hot` for the data path).
    pub fn lookup(&self, now: Instant, ip: Ipv4Addr) -> Option<EthernetAddress> {
        self.entries
            .get(&ip)
            .filter(|e| e.expires > now)
            .map(|e| e.mac)
    }

    /// `lookup` that remembers the hit, so the next packet to the same hop skips the map.
    pub fn lookup_hot(&mut self, now: Instant, ip: Ipv4Addr) -> Option<EthernetAddress> {
        if let Some((hip, e)) = self.hot {
            if hip == ip && e.expires > now {
                return Some(e.mac);
            }
        }
        let e = *self.entries.get(&ip).filter(|e| e.expires > now)?;
        self.hot = Some((ip, e));
        Some(e.mac)
    }

    /// Whether `ip` has an entry (even an expired one): RFC 826's "is the pair already in my
    /// table" test for the merge rule.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.entries.contains_key(&ip)
    }

    /// Inserts or refreshes `ip -> mac`. When the table is full, expired entries are purged
    /// first, then the entry closest to expiry is evicted.
    pub fn fill(&mut self, now: Instant, ip: Ipv4Addr, mac: EthernetAddress) {
        self.hot = None;
        if !self.entries.contains_key(&ip) && self.entries.len() >= MAX_ENTRIES {
            self.entries.retain(|_, e| e.expires > now);
            if self.entries.len() >= MAX_ENTRIES {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.expires)
                    .map(|(k, _)| *k);
                if let Some(k) = oldest {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(
            ip,
            Entry {
                mac,
                expires: now + self.ttl,
            },
        );
        self.resolving.retain(|r| r.ip != ip);
    }

    /// Parks `frame` (a complete link frame whose destination MAC is still unknown) until `ip`
    /// resolves. On `Full` the frame is returned for the caller to recycle.
    pub fn park(
        &mut self,
        now: Instant,
        ip: Ipv4Addr,
        frame: PacketBuf,
    ) -> (Park, Option<PacketBuf>) {
        if self.pending.len() >= self.pending_limit {
            return (Park::Full, Some(frame));
        }
        let resolving_full = self.resolving.len() >= MAX_RESOLVING;
        let action = match self.resolving.iter_mut().find(|r| r.ip == ip) {
            Some(r) => {
                if now.saturating_since(r.last_request) >= self.retry_interval
                    && r.requests < self.max_retries
                {
                    r.last_request = now;
                    r.requests += 1;
                    Park::SendRequest
                } else {
                    Park::Waiting
                }
            }
            None if resolving_full => return (Park::Full, Some(frame)),
            None => {
                self.resolving.push(Resolving {
                    ip,
                    last_request: now,
                    requests: 1,
                });
                Park::SendRequest
            }
        };
        self.pending.push_back((ip, frame));
        (action, None)
    }

    /// Removes and hands to `f` every parked frame for `ip` (in arrival order).
    pub fn take_pending(&mut self, ip: Ipv4Addr, mut f: impl FnMut(PacketBuf)) {
        for _ in 0..self.pending.len() {
            if let Some((dst, frame)) = self.pending.pop_front() {
                if dst == ip {
                    f(frame);
                } else {
                    self.pending.push_back((dst, frame));
                }
            }
        }
    }

    /// Timer work: an address whose retry is due yields `Event::Request`; one that used up
    /// its retries yields `Event::Drop` for each parked frame and is forgotten.
    pub fn poll(&mut self, now: Instant, mut f: impl FnMut(Event)) {
        let mut i = 0;
        while i < self.resolving.len() {
            let r = self.resolving[i];
            if now.saturating_since(r.last_request) < self.retry_interval {
                i += 1;
                continue;
            }
            if r.requests >= self.max_retries {
                self.resolving.swap_remove(i);
                self.take_pending(r.ip, |b| f(Event::Drop(b)));
                f(Event::GaveUp(r.ip));
            } else {
                self.resolving[i].last_request = now;
                self.resolving[i].requests += 1;
                f(Event::Request(r.ip));
                i += 1;
            }
        }
    }

    /// True when a resolution is outstanding (only then has [`NeighborCache::poll`] work).
    pub fn is_resolving(&self) -> bool {
        !self.resolving.is_empty()
    }

    /// Earliest retry or give-up time of an outstanding resolution.
    pub fn poll_at(&self) -> Option<Instant> {
        self.resolving
            .iter()
            .map(|r| r.last_request + self.retry_interval)
            .min()
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 9);
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 9]);

    #[test]
    fn entries_expire_after_ttl() {
        let mut n = NeighborCache::new(Duration::from_secs(60), 4, Duration::from_secs(1), 3);
        n.fill(Instant::ZERO, IP, MAC);
        assert_eq!(n.lookup(Instant::from_secs(59), IP), Some(MAC));
        assert_eq!(n.lookup(Instant::from_secs(60), IP), None);
    }

    #[test]
    fn hot_entry_follows_updates_and_expiry() {
        let mut n = NeighborCache::new(Duration::from_secs(60), 4, Duration::from_secs(1), 3);
        n.fill(Instant::ZERO, IP, MAC);
        assert_eq!(n.lookup_hot(Instant::ZERO, IP), Some(MAC));
        let other = EthernetAddress([2, 0, 0, 0, 0, 7]);
        n.fill(Instant::from_secs(1), IP, other);
        assert_eq!(n.lookup_hot(Instant::from_secs(1), IP), Some(other));
        assert_eq!(n.lookup_hot(Instant::from_secs(61), IP), None);
    }

    #[test]
    fn requests_are_rate_limited_and_give_up() {
        let mut n = NeighborCache::new(Duration::from_secs(60), 2, Duration::from_secs(1), 2);
        let t0 = Instant::ZERO;
        assert_eq!(n.park(t0, IP, PacketBuf::default()).0, Park::SendRequest);
        assert_eq!(n.park(t0, IP, PacketBuf::default()).0, Park::Waiting);
        assert_eq!(n.park(t0, IP, PacketBuf::default()).0, Park::Full);
        assert_eq!(n.poll_at(), Some(Instant::from_secs(1)));
        let (mut reqs, mut drops, mut gave_up) = (0, 0, vec![]);
        let mut count = |e: Event| match e {
            Event::Request(_) => reqs += 1,
            Event::Drop(_) => drops += 1,
            Event::GaveUp(ip) => gave_up.push(ip),
        };
        n.poll(Instant::from_secs(1), &mut count);
        n.poll(Instant::from_secs(2), &mut count);
        assert_eq!((reqs, drops), (1, 2));
        assert_eq!(gave_up, vec![IP]);
        assert_eq!(n.pending_len(), 0);
        assert_eq!(n.poll_at(), None);
    }
}
