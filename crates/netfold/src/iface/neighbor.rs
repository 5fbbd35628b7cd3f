//! The neighbour cache and the queue of packets waiting for a resolution, shared by ARP (RFC
//! 826, for IPv4) and Neighbor Discovery (RFC 4861 §7, for IPv6): one generic cache, one
//! instance per address family.
//!
//! Bounded everywhere: at most `MAX_ENTRIES` cached addresses, at most `pending_limit` parked
//! frames in total, at most `MAX_RESOLVING` addresses being resolved at once and at most
//! `MAX_RESOLVING` entries under reachability probes. A request for an address is repeated at
//! most once per `retry_interval` (RFC 1122 §2.3.2.1: "a mechanism to prevent ARP flooding ...
//! MUST ... no more than one ARP request per second per destination"; RFC 4861 §7.2.2: one
//! Neighbor Solicitation per RetransTimer, 1 s); after `max_retries` unanswered requests
//! (MAX_MULTICAST_SOLICIT, 3) its parked frames are dropped and counted.
//!
//! An address being resolved is RFC 4861's INCOMPLETE state; an entry with a link-layer
//! address is in one of the other four states of RFC 4861 §7.3.2 ([`Nud`]):
//!
//! - ARP uses REACHABLE only: an entry is good for `ttl` after it was last confirmed and is
//!   then gone (expiry is checked lazily on lookup, so it needs no timer).
//! - NDP uses them all. A REACHABLE entry past its reachable time is STALE (lazily, again no
//!   timer); a STALE entry still carries packets, and the first one sent moves it to DELAY
//!   ([`NeighborCache::use_stale`]); DELAY becomes PROBE after DELAY_FIRST_PROBE_TIME, which
//!   sends a unicast solicitation per `retry_interval` ([`Event::Probe`]), up to `max_retries`
//!   (MAX_UNICAST_SOLICIT, 3), after which the entry is deleted ([`Event::Expired`]). What
//!   confirms an entry, and how advertisements change it, is in `ndp.rs`.

use crate::buf::PacketBuf;
use crate::time::{Duration, Instant};
use crate::wire::ethernet::{EthernetAddress, EthernetFrame};
use crate::wire::Ipv4Addr;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Largest number of cached neighbours.
pub const MAX_ENTRIES: usize = 1024;
/// Largest number of addresses with an outstanding request, and of entries being probed.
pub const MAX_RESOLVING: usize = 64;

/// Neighbour Unreachability Detection state of an entry that has a link-layer address (RFC
/// 4861 §7.3.2; INCOMPLETE is an address being resolved, which has no entry yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nud {
    /// "Positive confirmation was received within the last ReachableTime milliseconds."
    Reachable,
    /// "More than ReachableTime milliseconds have elapsed since the last positive
    /// confirmation"; no traffic sent since.
    Stale,
    /// Traffic was sent to a STALE entry; waiting DELAY_FIRST_PROBE_TIME for an upper-layer
    /// confirmation before probing.
    Delay,
    /// "A reachability confirmation is actively sought by retransmitting Neighbor
    /// Solicitations every RetransTimer milliseconds."
    Probe,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    mac: EthernetAddress,
    state: Nud,
    /// REACHABLE: until when; DELAY: when probing starts; PROBE: when the next probe is due.
    timer: Instant,
    /// Unicast probes sent in PROBE.
    probes: u32,
    /// RFC 4861 IsRouter flag (NDP only).
    router: bool,
}

impl Entry {
    /// The state as of `now`: a REACHABLE entry past its time is STALE.
    fn state(&self, now: Instant) -> Nud {
        match self.state {
            Nud::Reachable if self.timer <= now => Nud::Stale,
            s => s,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Resolving<A> {
    ip: A,
    last_request: Instant,
    requests: u32,
}

/// Timer output of [`NeighborCache::poll`].
#[derive(Debug)]
pub enum Event<A> {
    /// Send another broadcast request (ARP) or multicast solicitation (NDP) for this address.
    Request(A),
    /// NDP: send a unicast Neighbor Solicitation to this address at this MAC (PROBE state).
    Probe(A, EthernetAddress),
    /// A parked frame whose next hop never answered; recycle it and count the drop.
    Drop(PacketBuf),
    /// This next hop used up its retries without an answer (after its `Drop`s): whoever
    /// waits on it learns that the host is unreachable.
    GaveUp(A),
    /// NDP: an entry's unicast probes went unanswered and it was deleted (RFC 4861 §7.3.3).
    Expired(A),
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

/// See the module documentation. `A` is the protocol address (IPv4 for ARP, IPv6 for NDP).
#[derive(Debug)]
pub struct NeighborCache<A = Ipv4Addr> {
    entries: HashMap<A, Entry>,
    /// The entry used last: bulk traffic goes to one next hop, and this spares a SipHash
    /// lookup per transmitted packet. Always equal to the map's entry for that address.
    hot: Option<(A, Entry)>,
    resolving: Vec<Resolving<A>>,
    /// Entries in DELAY or PROBE (NDP), whose timers `poll` runs.
    timed: Vec<A>,
    /// No retry, give-up or probe is due before this (computed by `poll`; reset to ZERO when
    /// a resolution or a timed entry is added). Spares `poll` a walk and a SipHash lookup
    /// per timed entry on every stack poll while an entry waits out DELAY's 5 seconds.
    quiet_until: Instant,
    pending: VecDeque<(A, PacketBuf)>,
    pending_limit: usize,
    ttl: Duration,
    retry_interval: Duration,
    max_retries: u32,
}

impl<A: Copy + Eq + Hash> NeighborCache<A> {
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
            timed: Vec::new(),
            quiet_until: Instant::ZERO,
            pending: VecDeque::with_capacity(pending_limit.min(4096)),
            pending_limit,
            ttl,
            retry_interval,
            max_retries: max_retries.max(1),
        }
    }

    /// The cached MAC for `ip`, if REACHABLE at `now` (read-only; see `lookup_hot` for the
    /// data path). For ARP this is "cached and fresh".
    pub fn lookup(&self, now: Instant, ip: A) -> Option<EthernetAddress> {
        self.entries
            .get(&ip)
            .filter(|e| e.state(now) == Nud::Reachable)
            .map(|e| e.mac)
    }

    /// The entry for `ip` in any state: its MAC, its state as of `now`, its IsRouter flag.
    pub fn get(&self, now: Instant, ip: A) -> Option<(EthernetAddress, Nud, bool)> {
        self.entries
            .get(&ip)
            .map(|e| (e.mac, e.state(now), e.router))
    }

    /// `lookup` that remembers the hit, so the next packet to the same hop skips the map.
    #[inline]
    pub fn lookup_hot(&mut self, now: Instant, ip: A) -> Option<EthernetAddress> {
        if let Some((hip, e)) = self.hot {
            if hip == ip && e.state(now) == Nud::Reachable {
                return Some(e.mac);
            }
        }
        self.lookup_cold(now, ip)
    }

    /// `lookup_hot` past the remembered hit: the map (out of line).
    #[inline(never)]
    fn lookup_cold(&mut self, now: Instant, ip: A) -> Option<EthernetAddress> {
        let e = *self
            .entries
            .get(&ip)
            .filter(|e| e.state(now) == Nud::Reachable)?;
        self.hot = Some((ip, e));
        Some(e.mac)
    }

    /// NDP, on sending to `ip` when `lookup_hot` found no REACHABLE entry (RFC 4861 §7.3.3):
    /// "The first time a node sends a packet to a neighbor whose entry is STALE, the sender
    /// changes the state to DELAY and sets a timer to expire in DELAY_FIRST_PROBE_TIME
    /// seconds." An entry in DELAY or PROBE keeps carrying packets. `None`: no entry (resolve).
    pub fn use_stale(&mut self, now: Instant, ip: A, delay: Duration) -> Option<EthernetAddress> {
        // An entry in DELAY or PROBE stays what it is until `poll` moves it (which clears
        // `hot`): the hot copy answers without a SipHash lookup per packet.
        if let Some((hip, e)) = self.hot {
            if hip == ip && matches!(e.state, Nud::Delay | Nud::Probe) {
                return Some(e.mac);
            }
        }
        let timed_full = self.timed.len() >= MAX_RESOLVING;
        let e = self.entries.get_mut(&ip)?;
        // With the probe list full the entry stays STALE and is still used: bounded work
        // wins over a timely probe.
        if e.state(now) == Nud::Stale && !timed_full {
            self.hot = None;
            e.state = Nud::Delay;
            e.timer = now + delay;
            e.probes = 0;
            self.timed.push(ip);
            self.quiet_until = Instant::ZERO;
        }
        if matches!(e.state, Nud::Delay | Nud::Probe) {
            self.hot = Some((ip, *e));
        }
        Some(e.mac)
    }

    /// Whether `ip` has an entry (in any state): RFC 826's "is the pair already in my table"
    /// test for the merge rule.
    pub fn contains(&self, ip: A) -> bool {
        self.entries.contains_key(&ip)
    }

    /// Whether `ip` is being resolved (RFC 4861 INCOMPLETE).
    pub fn is_incomplete(&self, ip: A) -> bool {
        self.resolving.iter().any(|r| r.ip == ip)
    }

    /// Inserts or refreshes `ip -> mac` as REACHABLE for the cache's `ttl` (ARP).
    pub fn fill(&mut self, now: Instant, ip: A, mac: EthernetAddress) {
        self.set(now, ip, mac, Nud::Reachable, self.ttl);
    }

    /// Inserts or replaces `ip -> mac` in `state` (REACHABLE for `reachable` from `now`, or
    /// STALE); an address being resolved stops being resolved, an entry being probed stops
    /// being probed. The IsRouter flag of an existing entry is kept. When the table is full,
    /// entries that are not REACHABLE are purged first, then the one closest to its timer
    /// is evicted.
    pub fn set(
        &mut self,
        now: Instant,
        ip: A,
        mac: EthernetAddress,
        state: Nud,
        reachable: Duration,
    ) {
        self.hot = None;
        if !self.entries.contains_key(&ip) && self.entries.len() >= MAX_ENTRIES {
            self.entries.retain(|_, e| e.state(now) == Nud::Reachable);
            if self.entries.len() >= MAX_ENTRIES {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.timer)
                    .map(|(k, _)| *k);
                if let Some(k) = oldest {
                    self.entries.remove(&k);
                }
            }
        }
        let router = self.entries.get(&ip).is_some_and(|e| e.router);
        let (state, timer) = match state {
            Nud::Reachable => (Nud::Reachable, now + reachable),
            _ => (Nud::Stale, now),
        };
        self.entries.insert(
            ip,
            Entry {
                mac,
                state,
                timer,
                probes: 0,
                router,
            },
        );
        self.resolving.retain(|r| r.ip != ip);
        self.timed.retain(|&t| t != ip);
    }

    /// Moves an existing entry to STALE, keeping its MAC (RFC 4861 §7.2.5: an advertisement
    /// without Override whose address differs from a REACHABLE entry's).
    pub fn mark_stale(&mut self, now: Instant, ip: A) {
        if let Some(e) = self.entries.get_mut(&ip) {
            self.hot = None;
            e.state = Nud::Stale;
            e.timer = now;
            self.timed.retain(|&t| t != ip);
        }
    }

    /// Sets an existing entry's IsRouter flag.
    pub fn set_router(&mut self, ip: A, router: bool) {
        if let Some(e) = self.entries.get_mut(&ip) {
            self.hot = None;
            e.router = router;
        }
    }

    /// Parks `frame` (a complete link frame whose destination MAC is still unknown) until `ip`
    /// resolves. On `Full` the frame is returned for the caller to recycle.
    pub fn park(&mut self, now: Instant, ip: A, frame: PacketBuf) -> (Park, Option<PacketBuf>) {
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
                self.quiet_until = Instant::ZERO;
                Park::SendRequest
            }
        };
        self.pending.push_back((ip, frame));
        (action, None)
    }

    /// Removes and hands to `f` every parked frame for `ip` (in arrival order).
    pub fn take_pending(&mut self, ip: A, mut f: impl FnMut(PacketBuf)) {
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

    /// Removes every frame parked for `ip` (in arrival order), writes `mac` as its Ethernet
    /// destination, and hands it to `f`: the address resolved.
    pub fn release(&mut self, ip: A, mac: EthernetAddress, mut f: impl FnMut(PacketBuf)) {
        self.take_pending(ip, |mut frame| {
            let mut eth = EthernetFrame::new_unchecked(frame.as_mut_slice());
            if eth.check_len().is_ok() {
                eth.set_dst_addr(mac);
            }
            f(frame)
        });
    }

    /// Timer work: an address whose retry is due yields `Event::Request`; one that used up
    /// its retries yields `Event::Drop` for each parked frame and is forgotten. NDP entries
    /// in DELAY or PROBE whose timer ran out yield `Event::Probe`, or `Event::Expired` when
    /// their probes are used up.
    pub fn poll(&mut self, now: Instant, mut f: impl FnMut(Event<A>)) {
        if now < self.quiet_until {
            return;
        }
        self.poll_due(now, &mut f);
        // Timers only move later between polls unless an entry or a resolution is added
        // (which resets this), so nothing is due before the earliest one now pending.
        self.quiet_until = self.poll_at().unwrap_or(Instant::from_micros(u64::MAX));
    }

    fn poll_due(&mut self, now: Instant, mut f: impl FnMut(Event<A>)) {
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
        let mut i = 0;
        while i < self.timed.len() {
            let ip = self.timed[i];
            let Some(e) = self.entries.get_mut(&ip) else {
                self.timed.swap_remove(i);
                continue;
            };
            if !matches!(e.state, Nud::Delay | Nud::Probe) {
                self.timed.swap_remove(i);
                continue;
            }
            if e.timer > now {
                i += 1;
                continue;
            }
            self.hot = None;
            // RFC 4861 §7.3.3: "If the entry is still in the DELAY state when the timer
            // expires, the entry's state changes to PROBE"; in PROBE, MAX_UNICAST_SOLICIT
            // solicitations RetransTimer apart, then "retransmissions cease and the entry
            // SHOULD be deleted".
            if e.state == Nud::Probe && e.probes >= self.max_retries {
                self.entries.remove(&ip);
                self.timed.swap_remove(i);
                f(Event::Expired(ip));
                continue;
            }
            e.state = Nud::Probe;
            e.probes += 1;
            e.timer = now + self.retry_interval;
            f(Event::Probe(ip, e.mac));
            i += 1;
        }
    }

    /// True when a resolution or a probe is outstanding (only then has
    /// [`NeighborCache::poll`] work).
    pub fn has_timers(&self) -> bool {
        !self.resolving.is_empty() || !self.timed.is_empty()
    }

    /// [`NeighborCache::has_timers`], and one of them may be due at `now` (`poll` would do
    /// something): the cheap test a stack makes on every poll.
    pub fn timers_due(&self, now: Instant) -> bool {
        self.has_timers() && now >= self.quiet_until
    }

    /// Earliest retry, give-up or probe time.
    pub fn poll_at(&self) -> Option<Instant> {
        let resolve = self
            .resolving
            .iter()
            .map(|r| r.last_request + self.retry_interval);
        let probe = self
            .timed
            .iter()
            .filter_map(|ip| self.entries.get(ip))
            .map(|e| e.timer);
        resolve.chain(probe).min()
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
        assert!(n.is_incomplete(IP));
        assert_eq!(n.poll_at(), Some(Instant::from_secs(1)));
        let (mut reqs, mut drops, mut gave_up) = (0, 0, vec![]);
        let mut count = |e: Event<Ipv4Addr>| match e {
            Event::Request(_) => reqs += 1,
            Event::Drop(_) => drops += 1,
            Event::GaveUp(ip) => gave_up.push(ip),
            Event::Probe(..) | Event::Expired(_) => unreachable!("ARP never probes"),
        };
        n.poll(Instant::from_secs(1), &mut count);
        n.poll(Instant::from_secs(2), &mut count);
        assert_eq!((reqs, drops), (1, 2));
        assert_eq!(gave_up, vec![IP]);
        assert_eq!(n.pending_len(), 0);
        assert_eq!(n.poll_at(), None);
    }

    /// RFC 4861 §7.3.3 through the states: REACHABLE, STALE after the reachable time, DELAY
    /// on use, PROBE after the delay, three probes, deleted.
    #[test]
    fn nud_reachable_stale_delay_probe_expired() {
        let retrans = Duration::from_secs(1);
        let mut n: NeighborCache<u32> = NeighborCache::new(Duration::from_secs(30), 4, retrans, 3);
        let t0 = Instant::ZERO;
        n.set(t0, 7, MAC, Nud::Reachable, Duration::from_secs(30));
        assert_eq!(n.get(t0, 7), Some((MAC, Nud::Reachable, false)));
        let t = Instant::from_secs(30);
        assert_eq!(n.get(t, 7).map(|e| e.1), Some(Nud::Stale));
        assert_eq!(n.lookup_hot(t, 7), None, "stale is not reachable");
        assert!(!n.has_timers(), "staleness needs no timer");
        assert_eq!(n.use_stale(t, 7, Duration::from_secs(5)), Some(MAC));
        assert_eq!(n.get(t, 7).map(|e| e.1), Some(Nud::Delay));
        assert_eq!(n.poll_at(), Some(Instant::from_secs(35)));
        let mut probes = 0;
        let mut expired = vec![];
        for s in 35..40 {
            n.poll(Instant::from_secs(s), |e| match e {
                Event::Probe(7, m) => {
                    assert_eq!(m, MAC);
                    probes += 1
                }
                Event::Expired(ip) => expired.push(ip),
                other => panic!("{other:?}"),
            });
        }
        assert_eq!(probes, 3);
        assert_eq!(expired, vec![7]);
        assert_eq!(n.get(Instant::from_secs(40), 7), None);
        assert!(!n.has_timers());
        // A confirmation in PROBE ends the probing.
        n.set(t, 8, MAC, Nud::Stale, Duration::ZERO);
        n.use_stale(t, 8, Duration::ZERO);
        n.poll(t, |_| {});
        assert_eq!(n.get(t, 8).map(|e| e.1), Some(Nud::Probe));
        n.set(t, 8, MAC, Nud::Reachable, Duration::from_secs(30));
        assert!(!n.has_timers());
        n.set_router(8, true);
        assert_eq!(n.get(t, 8), Some((MAC, Nud::Reachable, true)));
        n.mark_stale(t, 8);
        assert_eq!(n.get(t, 8), Some((MAC, Nud::Stale, true)));
    }
}
