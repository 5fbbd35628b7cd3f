//! Neighbor Discovery (RFC 4861) and Duplicate Address Detection (RFC 4862 §5.4): the
//! receive half (solicitations answered, advertisements and Router Advertisements folded into
//! the neighbour cache by the rules of §7.2.3, §7.2.5 and §6.3.4, conflicts found) and the
//! send half (solicitations for address resolution, unreachability probes and DAD;
//! advertisements; the timers of all three).
//!
//! The neighbour cache is the one ARP uses ([`super::neighbor`], with the NUD states), one
//! instance for IPv6. Bounded like ARP's: parked frames (`StackConfig::arp_pending_limit`),
//! addresses resolved at once, entries. Constants are RFC 4861 §10's: RetransTimer
//! (`StackConfig::ndp_retrans_timer`, 1 s), MAX_MULTICAST_SOLICIT and MAX_UNICAST_SOLICIT 3,
//! DELAY_FIRST_PROBE_TIME 5 s, BaseReachableTime (`StackConfig::ndp_reachable_time`, 30 s)
//! randomised per RFC 4861 §6.3.2.
//!
//! Every NDP message received must have come with hop limit 255 (§6.1.1, §6.1.2, §7.1.1,
//! §7.1.2: "the packet could not possibly have been forwarded by a router"), or it is dropped
//! and counted (`ndp_bad_hop_limit`); every one sent carries 255 (§7.1).
//!
//! Not done (see docs/ARCHITECTURE.md): MLD (RFC 3810) reports for the groups we listen to
//! (the TAP and the in-memory pipe deliver every frame, no snooping switch is in the way);
//! router discovery (no Router Solicitations are sent, a Router Advertisement's prefixes and
//! its router are not learned: the default router is configured); SLAAC (RFC 4862 §5.5) and
//! temporary addresses (RFC 8981); Redirects are parsed and ignored; the Enhanced DAD nonce
//! (RFC 7527). On a TUN (the IP medium) there is no link layer: no NDP, no DAD (Linux skips
//! DAD on NOARP devices too).

use super::ipv6::{AddrState, MAX_RTR_SOLICITATION_DELAY};
use super::neighbor::{Event, Nud};
use super::state::IfaceState;
use super::Inner;
use crate::phy::Medium;
use crate::time::Instant;
use crate::wire::ethernet::EthernetAddress;
use crate::wire::icmpv6::Icmpv6Repr;
use crate::wire::ipv6::{self, Ipv6Addr, Ipv6Repr};
use crate::wire::ndp::{na_flags, NdiscOptions, NdiscRepr};

/// MAX_MULTICAST_SOLICIT (RFC 4861 §10): 3 transmissions. MAX_UNICAST_SOLICIT is also 3, and
/// the neighbour cache uses one bound for both.
pub(crate) const MAX_MULTICAST_SOLICIT: u32 = 3;
/// The hop limit of every NDP message (RFC 4861 §7.1).
const NDP_HOP_LIMIT: u8 = 255;

/// What a Neighbor Solicitation is for (RFC 4861 §7.2.2, §7.3.3; RFC 4862 §5.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Solicit {
    /// Address resolution: to the target's solicited-node group, with our link-layer address.
    Resolve,
    /// Unreachability probe: to the target itself.
    Probe,
    /// Duplicate Address Detection: from the unspecified address, no link-layer address.
    Dad,
}

impl Inner {
    /// One NDP message in the packet `ip`.
    pub(super) fn receive_ndp(&mut self, now: Instant, ip: &Ipv6Repr, nd: NdiscRepr<'_>) {
        let st = &mut self.st;
        st.c.ndp_in += 1;
        if ip.hop_limit != NDP_HOP_LIMIT {
            st.c.ndp_bad_hop_limit += 1;
            return;
        }
        // No link-layer addresses to discover on a TUN.
        if st.medium == Medium::Ip {
            st.c.ndp_ignored += 1;
            return;
        }
        match nd {
            NdiscRepr::NeighborSolicit { target, lladdr } => st.receive_ns(now, ip, target, lladdr),
            NdiscRepr::NeighborAdvert {
                flags,
                target,
                lladdr,
            } => st.receive_na(now, ip, flags, target, lladdr),
            NdiscRepr::RouterAdvert {
                hop_limit, options, ..
            } => st.receive_ra(now, ip, hop_limit, options),
            // RFC 4861 §6.2.6 is a router's; a host ignores solicitations. Redirects: parsed
            // and ignored (see the module documentation).
            NdiscRepr::RouterSolicit { .. } | NdiscRepr::Redirect { .. } => {
                st.c.ndp_ignored += 1;
            }
        }
    }
}

impl IfaceState {
    /// RFC 4861 §7.1.1 validation, §7.2.3 processing, §7.2.4 answer; RFC 4862 §5.4.3 for a
    /// tentative target.
    fn receive_ns(
        &mut self,
        now: Instant,
        ip: &Ipv6Repr,
        target: Ipv6Addr,
        lladdr: Option<EthernetAddress>,
    ) {
        self.c.ndp_ns_in += 1;
        let from_dad = ip.src.is_unspecified();
        // §7.1.1: "If the IP source address is the unspecified address, the IP destination
        // address is a solicited-node multicast address" and "there is no source link-layer
        // address option in the message".
        if from_dad && (!ipv6::is_solicited_node(ip.dst) || lladdr.is_some()) {
            self.c.ndp_invalid += 1;
            return;
        }
        match self.v6.state_of(target) {
            Some(AddrState::Preferred) => {}
            // RFC 4862 §5.4.3: "If the source address of the Neighbor Solicitation is the
            // unspecified address, the solicitation is from a node performing Duplicate
            // Address Detection" — for our tentative address, so it is a duplicate. From a
            // unicast source, "the solicitation is silently ignored".
            Some(AddrState::Tentative) if from_dad => {
                self.dad_conflict(target);
                return;
            }
            Some(AddrState::Tentative) => {
                self.c.ndp_ignored += 1;
                return;
            }
            None | Some(AddrState::Duplicate) => {
                self.c.ndp_not_for_us += 1;
                return;
            }
        }
        // §7.2.3: "If the Source Address is not the unspecified address and ... the
        // solicitation includes a Source Link-Layer Address option, then the recipient
        // SHOULD create or update the Neighbor Cache entry for the IP Source Address".
        if let (false, Some(mac)) = (from_dad, lladdr) {
            self.ndp_learn_stale(now, ip.src, mac);
        }
        // §7.2.4: "If the source of the solicitation is the unspecified address, the node
        // MUST set the Solicited flag to zero and multicast the advertisement to the all-nodes
        // address. Otherwise, the node MUST set the Solicited flag to one and unicast the
        // advertisement to the Source Address of the solicitation." Override: set, as for
        // every address that is neither anycast nor proxied; Router: clear (a host).
        let (dst, flags) = if from_dad {
            (ipv6::LINK_LOCAL_ALL_NODES, na_flags::OVERRIDE)
        } else {
            (ip.src, na_flags::SOLICITED | na_flags::OVERRIDE)
        };
        self.send_na(now, target, dst, flags);
    }

    /// RFC 4861 §7.1.2 validation and §7.2.5 processing; RFC 4862 §5.4.4 for our own target.
    fn receive_na(
        &mut self,
        now: Instant,
        ip: &Ipv6Repr,
        flags: u8,
        target: Ipv6Addr,
        lladdr: Option<EthernetAddress>,
    ) {
        self.c.ndp_na_in += 1;
        let solicited = flags & na_flags::SOLICITED != 0;
        // §7.1.2: "If the IP Destination Address is a multicast address the Solicited flag is
        // zero."
        if ip.dst.is_multicast() && solicited {
            self.c.ndp_invalid += 1;
            return;
        }
        match self.v6.state_of(target) {
            // RFC 4862 §5.4.4: "If the target address is tentative, the tentative address is
            // not unique."
            Some(AddrState::Tentative) => {
                self.dad_conflict(target);
                return;
            }
            // Someone advertises an address we use: a duplicate DAD did not catch; RFC 4862
            // §5.4.4 has the node log it. Counted, the cache is not touched.
            Some(_) => {
                self.c.ndp_own_addr_advertised += 1;
                return;
            }
            None => {}
        }
        let router = flags & na_flags::ROUTER != 0;
        if self.v6.neigh.is_incomplete(target) {
            // §7.2.5: "If the link layer has addresses and no Target Link-Layer Address option
            // is included, the receiving node SHOULD silently discard the received
            // advertisement. Otherwise, the receiving node performs the following steps: It
            // records the link-layer address in the Neighbor Cache entry. If the
            // advertisement's Solicited flag is set, the state of the entry is set to
            // REACHABLE; otherwise, it is set to STALE. It sets the IsRouter flag ... It sends
            // any packets queued for the neighbor awaiting address resolution."
            let Some(mac) = lladdr else {
                self.c.ndp_invalid += 1;
                return;
            };
            let state = if solicited {
                Nud::Reachable
            } else {
                Nud::Stale
            };
            let rt = self.v6.reachable_time();
            self.v6.neigh.set(now, target, mac, state, rt);
            self.v6.neigh.set_router(target, router);
            self.flush_pending6(target, mac);
            return;
        }
        // "If no entry exists, the advertisement SHOULD be silently discarded."
        let Some((old, state, _)) = self.v6.neigh.get(now, target) else {
            self.c.ndp_na_unknown_target += 1;
            return;
        };
        let differs = lladdr.is_some_and(|m| m != old);
        if flags & na_flags::OVERRIDE == 0 && differs {
            // "If the Override flag is clear and the supplied link-layer address differs from
            // that in the cache ... a. If the state of the entry is REACHABLE, set it to STALE,
            // but do not update the entry in any other way. b. Otherwise, the received
            // advertisement should be ignored and MUST NOT update the cache."
            if state == Nud::Reachable {
                self.v6.neigh.mark_stale(now, target);
            }
            return;
        }
        // "If the Override flag is set, or the supplied link-layer address is the same as that
        // in the cache, or no Target Link-Layer Address option was supplied, the received
        // advertisement MUST update the Neighbor Cache entry as follows: The link-layer
        // address ... MUST be inserted in the cache (if one is supplied and differs from the
        // already recorded address). If the Solicited flag is set, the state of the entry MUST
        // be set to REACHABLE. If the Solicited flag is zero and the link-layer address was
        // updated with a different address, the state MUST be set to STALE. Otherwise, the
        // entry's state remains unchanged. ... The IsRouter flag in the cache entry MUST be
        // set based on the Router flag in the received advertisement."
        let mac = lladdr.unwrap_or(old);
        if solicited {
            let rt = self.v6.reachable_time();
            self.v6.neigh.set(now, target, mac, Nud::Reachable, rt);
        } else if differs {
            self.v6
                .neigh
                .set(now, target, mac, Nud::Stale, Default::default());
        }
        self.v6.neigh.set_router(target, router);
    }

    /// RFC 4861 §6.1.2 validation (beyond the wire checks: a link-local source) and the host
    /// side of §6.3.4 netfold does: the router's link-layer address into the cache, its
    /// IsRouter flag, Cur Hop Limit and the MTU option (Linux's defaults, `accept_ra` on a
    /// host). Its prefixes, Reachable Time and Retrans Timer are not applied (no SLAAC; the
    /// timers are configuration).
    fn receive_ra(&mut self, now: Instant, ip: &Ipv6Repr, hop_limit: u8, options: NdiscOptions) {
        self.c.ndp_ra_in += 1;
        // §6.1.2: "IP Source Address is a link-local address."
        if !ipv6::is_link_local(ip.src) {
            self.c.ndp_invalid += 1;
            return;
        }
        // §6.3.4: "If the advertisement contains a Source Link-Layer Address option, the
        // link-layer address SHOULD be recorded in the Neighbor Cache entry for the router
        // (creating an entry if necessary) and the IsRouter flag in the Neighbor Cache entry
        // MUST be set to TRUE."
        if let Some(mac) = options.source_lladdr() {
            self.ndp_learn_stale(now, ip.src, mac);
            self.v6.neigh.set_router(ip.src, true);
        }
        // "If the received Cur Hop Limit value is non-zero, the host SHOULD set its
        // CurHopLimit variable to the received value."
        if hop_limit != 0 {
            self.v6.hop_limit = hop_limit;
        }
        // "If the MTU option is present, hosts SHOULD copy the option's value into LinkMTU so
        // long as the value is greater than or equal to the minimum link MTU [IPv6] and does
        // not exceed the maximum LinkMTU value specified in the link-type-specific document".
        if let Some(m) = options.mtu().and_then(|m| usize::try_from(m).ok()) {
            if (ipv6::MIN_MTU..=self.mtu).contains(&m) {
                self.v6.ra_mtu = Some(m);
            }
        }
    }

    /// §7.2.3 and §6.3.4: a neighbour's link-layer address from a solicitation or a Router
    /// Advertisement. A new entry is STALE; a changed address replaces the old one and makes
    /// the entry STALE; the same address changes nothing. Frames parked for it leave.
    fn ndp_learn_stale(&mut self, now: Instant, ip: Ipv6Addr, mac: EthernetAddress) {
        let same = self.v6.neigh.get(now, ip).is_some_and(|e| e.0 == mac);
        if !same {
            self.v6
                .neigh
                .set(now, ip, mac, Nud::Stale, Default::default());
        }
        self.flush_pending6(ip, mac);
    }

    /// Moves frames parked for `ip` to the transmit queue with their destination MAC filled.
    fn flush_pending6(&mut self, ip: Ipv6Addr, mac: EthernetAddress) {
        let tx = &mut self.tx;
        let c = &mut self.c;
        self.v6.neigh.release(ip, mac, |f| {
            c.frames_out += 1;
            c.bytes_out += f.len() as u64;
            tx.push(f);
        });
    }

    /// A duplicate of our tentative address `a` (RFC 4862 §5.4.5: "the address MUST NOT be
    /// assigned to the interface"). Linux's default (`accept_dad` 1) keeps IPv6 running on the
    /// interface even when the duplicate is the MAC-derived link-local address.
    fn dad_conflict(&mut self, a: Ipv6Addr) {
        self.c.ndp_dad_conflicts += 1;
        if let Some(e) = self.v6.addrs.iter_mut().find(|e| e.cidr.addr() == a) {
            e.state = AddrState::Duplicate;
        }
    }

    /// Sends a Neighbor Solicitation for `target` (RFC 4861 §4.3, §7.2.2; RFC 4862 §5.4.2).
    pub(super) fn send_ns(&mut self, now: Instant, target: Ipv6Addr, why: Solicit) {
        let (src, dst, lladdr) = match why {
            Solicit::Dad => (Ipv6Addr::UNSPECIFIED, ipv6::solicited_node(target), None),
            Solicit::Resolve | Solicit::Probe => {
                // §7.2.2: the source is one of our addresses ("any one of the addresses
                // assigned to the interface should be used"), the best for the target.
                let Some(src) = self.ipv6_source_for(target) else {
                    self.c.ipv6_no_source += 1;
                    return;
                };
                let dst = if why == Solicit::Probe {
                    target
                } else {
                    ipv6::solicited_node(target)
                };
                (src, dst, Some(self.mac))
            }
        };
        let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target, lladdr });
        if self
            .send_icmpv6_with(now, src, dst, &ns, NDP_HOP_LIMIT)
            .is_ok()
        {
            self.c.ndp_ns_out += 1;
        }
    }

    /// Sends a Neighbor Advertisement for our `target` to `dst` (RFC 4861 §7.2.4), with our
    /// link-layer address.
    fn send_na(&mut self, now: Instant, target: Ipv6Addr, dst: Ipv6Addr, flags: u8) {
        let na = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags,
            target,
            lladdr: Some(self.mac),
        });
        if self
            .send_icmpv6_with(now, target, dst, &na, NDP_HOP_LIMIT)
            .is_ok()
        {
            self.c.ndp_na_out += 1;
        }
    }

    /// NDP timer work: repeat due solicitations, probe entries in PROBE, drop (counted)
    /// frames whose next hop never answered, forget entries whose probes went unanswered.
    /// Returns the neighbours whose resolution failed (empty, without allocating, almost
    /// always), for the transport to fail what was opening towards them.
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    pub(super) fn ndp_timers(&mut self, now: Instant) -> Vec<Ipv6Addr> {
        let mut gave_up = Vec::new();
        if !self.v6.neigh.timers_due(now) {
            return gave_up;
        }
        let mut due = core::mem::take(&mut self.v6.due);
        let mut probes = core::mem::take(&mut self.v6.probes);
        let (pool, c) = (&mut self.pool, &mut self.c);
        self.v6.neigh.poll(now, |e| match e {
            Event::Request(ip) => due.push(ip),
            Event::Probe(ip, mac) => probes.push((ip, mac)),
            Event::Drop(b) => {
                c.ndp_unresolved_drops += 1;
                pool.put(b);
            }
            // RFC 4861 §7.2.2 would send Address Unreachable for each queued packet: they are
            // ours, so they are counted (`ndp_unresolved_drops`) instead, and the transport
            // hears of it directly (`Inner::timers`: connections opening through the
            // neighbour fail with EHOSTUNREACH, as IPv4's do after ARP gives up).
            Event::GaveUp(ip) => {
                c.ndp_resolution_failed += 1;
                gave_up.push(ip);
            }
            Event::Expired(_) => c.ndp_nud_failed += 1,
        });
        for ip in due.drain(..) {
            self.send_ns(now, ip, Solicit::Resolve);
        }
        for (ip, _) in probes.drain(..) {
            self.send_ns(now, ip, Solicit::Probe);
        }
        self.v6.due = due;
        self.v6.probes = probes;
        gave_up
    }

    /// Duplicate Address Detection (RFC 4862 §5.4): each tentative address sends
    /// DupAddrDetectTransmits solicitations RetransTimer apart, and becomes usable RetransTimer
    /// after the last one unless a conflict was seen. The first solicitation waits a random
    /// delay (§5.4.2: "the node SHOULD delay joining the solicited-node multicast address by a
    /// random delay between 0 and MAX_RTR_SOLICITATION_DELAY"; Linux draws below 1 s), here
    /// capped at the RetransTimer so a short configured timer keeps DAD short.
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    pub(super) fn dad_timers(&mut self, now: Instant) {
        if !self.v6.enabled || self.v6.dad_done {
            return;
        }
        if !self.v6.dad_started {
            self.v6.dad_started = true;
            let no_dad = self.medium == Medium::Ip || self.v6.dad_transmits == 0;
            let max = MAX_RTR_SOLICITATION_DELAY.min(self.v6.retrans);
            for i in 0..self.v6.addrs.len() {
                if self.v6.addrs[i].state != AddrState::Tentative {
                    continue;
                }
                if no_dad {
                    self.v6.addrs[i].state = AddrState::Preferred;
                } else {
                    let d = self.v6.random_delay(max);
                    self.v6.addrs[i].dad_next = now + d;
                }
            }
        }
        for i in 0..self.v6.addrs.len() {
            let e = self.v6.addrs[i];
            if e.state != AddrState::Tentative || e.dad_next > now {
                continue;
            }
            if e.dad_left == 0 {
                self.v6.addrs[i].state = AddrState::Preferred;
                continue;
            }
            self.v6.addrs[i].dad_left -= 1;
            self.v6.addrs[i].dad_next = now + self.v6.retrans;
            self.send_ns(now, e.cidr.addr(), Solicit::Dad);
        }
        self.v6.dad_done = self
            .v6
            .addrs
            .iter()
            .all(|e| e.state != AddrState::Tentative);
    }
}
