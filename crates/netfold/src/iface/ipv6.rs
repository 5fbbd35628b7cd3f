//! IPv6 (RFC 8200): the interface's IPv6 state (addresses, default router, hop limit,
//! neighbour and path MTU caches), the receive half (the fixed header, the destination rules,
//! the extension header walk, fragment reassembly, the upper-layer demultiplexer) and the send
//! half (`send_ipv6`: the fixed header in front of an upper-layer packet, source fragmentation,
//! then the link).
//!
//! IPv6 is off unless `StackConfig::addrs6` names an address: then frames of EtherType 0x86DD
//! (and, on a TUN, packets whose first nibble is 6) are received here, and on Ethernet the
//! link-local address fe80::/64 + the MAC's modified EUI-64 (RFC 4291 Appendix A, RFC 4862
//! §5.3) is added unless one is configured. With no address the stack drops and counts IPv6
//! exactly as an IPv4-only stack does.
//!
//! Receive, in the order RFC 8200 gives:
//! 1. The fixed header ([`Ipv6Repr::parse`]: version, length, no multicast source).
//! 2. The destination: one of our unicast addresses once Duplicate Address Detection passed
//!    (RFC 4862 §5.4: "packets addressed to a tentative address should be silently discarded",
//!    except the Neighbor Discovery messages DAD needs), the all-nodes group ff02::1, or the
//!    solicited-node group of any of our addresses (RFC 4291 §2.8: the groups a host joins).
//!    No hop-limit check: RFC 8200 §3 has only forwarding nodes decrement and discard on it,
//!    and a host accepts any value (Linux too); NDP checks 255 for itself (RFC 4861 §6.1).
//! 3. The extension headers ([`ipv6ext::walk`], bounded: see `wire/ipv6ext.rs`), with a
//!    Parameter Problem for what RFC 8200 §4 says to report.
//! 4. Fragments to the reassembler (RFC 8200 §4.5; the same bounds as IPv4's — datagrams,
//!    bytes, fragments per datagram — and the RFC's 60 s; overlaps discard the datagram, RFC
//!    5722; an atomic fragment, offset 0 without M, is processed on its own, RFC 6946 §4: "A
//!    host that receives an IPv6 packet that includes a Fragment Header with the 'Fragment
//!    Offset' equal to 0 and the 'M' flag equal to 0 MUST process such packet in isolation
//!    from any other packets/fragments").
//! 5. The upper layer: ICMPv6 (`icmpv6.rs`, NDP in `ndp.rs`), and TCP and UDP through the
//!    family-generic entry points the IPv4 path uses (`receive_tcp`, `receive_udp` with an
//!    `IpMeta`), from [`Inner::receive_transport_v6`]; ICMPv6 errors quoting our segments
//!    and datagrams reach TCP and UDP from `icmpv6.rs`.
//!
//! Send: [`IfaceState::send_ipv6`] is the seam for the transport layer (the IPv6 counterpart
//! of `send_ip`); [`IfaceState::ipv6_path_mtu`] and the family-generic `resolved_link_header`
//! (in `ethernet.rs`) complete it for the TCP template fast path. Source addresses are chosen by
//! [`IfaceState::ipv6_source_for`] (a simple RFC 6724: the same scope first). Datagrams other
//! than TCP larger than the path MTU are fragmented at the source (RFC 8200 §4.5), each
//! datagram with its own 32-bit identification; TCP is never fragmented (path MTU discovery,
//! RFC 8201). No extension headers are sent except Fragment headers.

use super::neighbor::NeighborCache;
use super::pmtu::PathMtuCache;
use super::state::{IfaceState, TxError};
use super::Inner;
use crate::buf::{Csum, PacketBuf};
use crate::offload::gro::Gro;
use crate::phy::Medium;
use crate::time::{Duration, Instant};
use crate::wire::ethernet::EthernetAddress;
use crate::wire::ipv4::Ecn;
use crate::wire::ipv6::{
    self, Ipv6Addr, Ipv6Cidr, Ipv6Packet, Ipv6Repr, HEADER_LEN as IP6_LEN, MIN_MTU,
};
use crate::wire::ipv6ext::{self, param_problem, Chain, FragmentRepr, WalkError, WalkStart};
use crate::wire::{Error, IpProtocol};

/// The state of one of our addresses (RFC 4862 §5.4, §5.5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrState {
    /// Duplicate Address Detection is running: the address is not used as a source and
    /// packets to it are discarded (RFC 4862 §5.4).
    Tentative,
    /// Usable.
    Preferred,
    /// DAD found another node using it: never used (RFC 4862 §5.4.5 "the address MUST NOT
    /// be assigned to the interface").
    Duplicate,
}

/// One of our addresses, with its prefix and state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AddrEntry {
    pub cidr: Ipv6Cidr,
    pub state: AddrState,
    /// DAD: solicitations still to send.
    pub dad_left: u32,
    /// DAD: when the next solicitation, or the end of DAD, is due.
    pub dad_next: Instant,
}

/// What the fragment reassembler keeps of the first fragment of a datagram.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FragHead {
    /// Its fixed header.
    pub ip: Ipv6Repr,
    /// Its Fragment header's Next Header: the reassembled packet's.
    pub next_header: u8,
    /// The datagram's identification.
    pub ident: u32,
}

/// The identification (source, destination, Fragment header Identification) of one
/// datagram's fragments (RFC 8200 §4.5).
pub(crate) type FragKey = (Ipv6Addr, Ipv6Addr, u32);

/// The interface's IPv6 state. See the module documentation.
#[derive(Debug)]
pub(crate) struct Ipv6State {
    /// Any address configured: IPv6 frames are received.
    pub enabled: bool,
    pub addrs: Vec<AddrEntry>,
    /// The default router (RFC 4861 §5.2's Default Router List, of one, configured).
    pub router: Option<Ipv6Addr>,
    /// Hop limit of packets we originate (RFC 4861 CurHopLimit; a Router Advertisement may
    /// set it, RFC 4861 §6.3.4).
    pub hop_limit: u8,
    /// The link MTU for IPv6: the interface's, or lower if a Router Advertisement's MTU option
    /// said so (RFC 4861 §6.3.4).
    pub ra_mtu: Option<usize>,
    pub neigh: NeighborCache<Ipv6Addr>,
    pub pmtu: PathMtuCache<Ipv6Addr>,
    /// Counter added to the keyed hash of each datagram's addresses for its Fragment
    /// Identification (see `next_ident`).
    pub ident: u32,
    /// Key of the identification and reachable-time hashes (the stack's TCP secret).
    pub secret: [u8; 16],
    /// RetransTimer (RFC 4861 §10).
    pub retrans: Duration,
    /// BaseReachableTime (RFC 4861 §10).
    pub base_reachable: Duration,
    /// DupAddrDetectTransmits (RFC 4862 §5.1).
    pub dad_transmits: u32,
    /// DAD has been started (at the first poll, when the medium is known).
    pub dad_started: bool,
    /// DAD is over for every address (none is tentative, and addresses are only configured
    /// at start): `dad_timers` has nothing left to do.
    pub dad_done: bool,
    /// Draws of the reachable-time randomisation.
    pub draws: u64,
    /// Scratch lists of the NDP timers (reused).
    pub due: Vec<Ipv6Addr>,
    pub probes: Vec<(Ipv6Addr, EthernetAddress)>,
}

/// DELAY_FIRST_PROBE_TIME (RFC 4861 §10): 5 seconds.
pub(crate) const DELAY_FIRST_PROBE_TIME: Duration = Duration::from_secs(5);
/// MAX_RTR_SOLICITATION_DELAY (RFC 4861 §10): the first DAD solicitation waits a random
/// time below it (RFC 4862 §5.4.2; Linux draws below `rtr_solicit_delay`, 1 s).
pub(crate) const MAX_RTR_SOLICITATION_DELAY: Duration = Duration::from_secs(1);

impl Ipv6State {
    /// The state of a stack configured with `addrs`; `mac` gives the link-local address on
    /// Ethernet. Every address starts tentative when DAD is on (`dad_transmits` > 0).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        addrs: &[Ipv6Cidr],
        router: Option<Ipv6Addr>,
        hop_limit: u8,
        medium: Medium,
        mac: EthernetAddress,
        secret: [u8; 16],
        retrans: Duration,
        base_reachable: Duration,
        dad_transmits: u32,
        pending_limit: usize,
    ) -> Ipv6State {
        let mut list: Vec<AddrEntry> = Vec::with_capacity(addrs.len() + 1);
        let entry = |cidr: Ipv6Cidr| AddrEntry {
            cidr,
            state: if dad_transmits > 0 {
                AddrState::Tentative
            } else {
                AddrState::Preferred
            },
            dad_left: dad_transmits,
            dad_next: Instant::ZERO,
        };
        // RFC 4862 §5.3: "A node forms a link-local address whenever an interface becomes
        // enabled"; on Ethernet from the MAC (RFC 2464 §5), unless one is configured.
        let has_ll = addrs.iter().any(|c| ipv6::is_link_local(c.addr()));
        if !addrs.is_empty() && !has_ll && medium == Medium::Ethernet {
            let ll = ipv6::link_local(mac.ipv6_interface_id());
            if let Some(c) = Ipv6Cidr::new(ll, 64) {
                list.push(entry(c));
            }
        }
        for &c in addrs {
            // Unusable as our own address: multicast, unspecified, loopback.
            let a = c.addr();
            if a.is_multicast() || a.is_unspecified() || a.is_loopback() {
                continue;
            }
            if !list.iter().any(|e| e.cidr.addr() == a) {
                list.push(entry(c));
            }
        }
        Ipv6State {
            enabled: !list.is_empty(),
            addrs: list,
            router,
            hop_limit: hop_limit.max(1),
            ra_mtu: None,
            neigh: NeighborCache::new(
                base_reachable,
                pending_limit,
                retrans,
                super::ndp::MAX_MULTICAST_SOLICIT,
            ),
            pmtu: PathMtuCache::with_floor(MIN_MTU),
            ident: 0,
            secret,
            retrans,
            base_reachable,
            dad_transmits,
            dad_started: false,
            dad_done: false,
            draws: 0,
            due: Vec::new(),
            probes: Vec::new(),
        }
    }

    /// The state of one of our addresses, if `a` is one.
    pub fn state_of(&self, a: Ipv6Addr) -> Option<AddrState> {
        self.addrs
            .iter()
            .find(|e| e.cidr.addr() == a)
            .map(|e| e.state)
    }

    /// A multicast group we listen to (RFC 4291 §2.8): all-nodes, or the solicited-node
    /// group of any of our addresses (tentative ones too: RFC 4862 §5.4.2 joins it for DAD).
    pub fn in_group(&self, g: Ipv6Addr) -> bool {
        g == ipv6::LINK_LOCAL_ALL_NODES
            || (ipv6::is_solicited_node(g)
                && self.addrs.iter().any(|e| {
                    e.state != AddrState::Duplicate && ipv6::solicited_node(e.cidr.addr()) == g
                }))
    }

    /// Whether a frame to `mac` is for one of our groups (RFC 2464 §7 mapping).
    pub fn accepts_mac(&self, mac: EthernetAddress) -> bool {
        let m = mac.0;
        if m[..2] != [0x33, 0x33] {
            return false;
        }
        m == [0x33, 0x33, 0, 0, 0, 1]
            || (m[2] == 0xff
                && self.addrs.iter().any(|e| {
                    e.state != AddrState::Duplicate && e.cidr.addr().octets()[13..] == m[3..]
                }))
    }

    /// RFC 4861 §5.2 on-link determination: link-local destinations and destinations in one
    /// of our prefixes are on the link and are their own next hop; the rest goes to the
    /// default router. No router: no route (RFC 4943 removed the on-link assumption).
    pub fn next_hop(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if ipv6::is_link_local(dst) || self.addrs.iter().any(|e| e.cidr.contains(dst)) {
            Some(dst)
        } else {
            self.router
        }
    }

    /// RFC 4861 §6.3.2: "ReachableTime ... a uniformly distributed random value between
    /// MIN_RANDOM_FACTOR and MAX_RANDOM_FACTOR times BaseReachableTime", 0.5 and 1.5; drawn
    /// anew at each confirmation from a keyed hash (deterministic under a fixed secret).
    pub fn reachable_time(&mut self) -> Duration {
        self.draws += 1;
        let h = crate::hash::siphash24(&self.secret, &self.draws.to_be_bytes());
        let base = self.base_reachable.total_micros();
        // base/2 + (h mod base): uniform over [0.5, 1.5) x base.
        Duration::from_micros(base / 2 + h % base.max(1))
    }

    /// A random delay below `max`, keyed like `reachable_time`.
    pub fn random_delay(&mut self, max: Duration) -> Duration {
        self.draws += 1;
        let h = crate::hash::siphash24(&self.secret, &self.draws.to_be_bytes());
        Duration::from_micros(h % max.total_micros().max(1))
    }

    /// The next Fragment Identification for a datagram from `src` to `dst`. RFC 7739 §5.2
    /// (per-destination counters started at an unpredictable value, as Linux's
    /// `ipv6_select_ident` keys a hash of the addresses): a keyed hash of the two addresses,
    /// plus a counter of datagrams fragmented.
    pub fn next_ident(&mut self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        let mut b = [0u8; 32];
        b[..16].copy_from_slice(&src.octets());
        b[16..].copy_from_slice(&dst.octets());
        let h = crate::hash::siphash24(&self.secret, &b) as u32;
        self.ident = self.ident.wrapping_add(1);
        h.wrapping_add(self.ident)
    }

    /// The earliest DAD timer.
    pub fn dad_poll_at(&self) -> Option<Instant> {
        if !self.dad_started {
            return if self.addrs.iter().any(|e| e.state == AddrState::Tentative) {
                Some(Instant::ZERO)
            } else {
                None
            };
        }
        self.addrs
            .iter()
            .filter(|e| e.state == AddrState::Tentative)
            .map(|e| e.dad_next)
            .min()
    }
}

/// What a received packet was addressed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DstKind {
    /// One of our usable unicast addresses.
    Unicast,
    /// One of our tentative addresses (only NDP may pass).
    Tentative,
    /// A group we listen to.
    Multicast,
}

/// How a packet arrived, for the rules on answering it (RFC 4443 §2.4 (e)).
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    pub dst: DstKind,
    /// The link frame was multicast or broadcast.
    pub link_mcast: bool,
}

impl Arrival {
    /// RFC 4443 §2.4 (e.3)-(e.5): sent to a multicast address, link multicast or broadcast.
    pub fn is_multicast(&self) -> bool {
        self.dst == DstKind::Multicast || self.link_mcast
    }
}

/// The packet that caused an error message: its fixed header and the bytes after it (as
/// received, or for a reassembled datagram, the reassembled bytes).
#[derive(Debug, Clone, Copy)]
pub(super) struct Invoking<'p> {
    pub ip: Ipv6Repr,
    pub rest: &'p [u8],
}

impl Inner {
    /// Receives one IPv6 packet `p` (from the link header on). `link_mcast`: the frame was
    /// sent to a link multicast or broadcast address.
    pub(super) fn receive_ipv6<'b>(
        &mut self,
        now: Instant,
        p: &'b [u8],
        link_mcast: bool,
        csum: Csum,
        gro: &mut Gro<'b>,
    ) {
        let c = &mut self.st.c;
        c.ipv6_in += 1;
        let Ok(pkt) = Ipv6Packet::new_checked(p) else {
            c.ipv6_malformed += 1;
            return;
        };
        let ip = match Ipv6Repr::parse(&pkt) {
            Ok(ip) => ip,
            // RFC 4291 §2.7: multicast "must not be used as source addresses".
            Err(Error::Malformed) => {
                c.ipv6_bad_src += 1;
                return;
            }
            Err(_) => {
                c.ipv6_malformed += 1;
                return;
            }
        };
        // RFC 4291 §2.5.3: the loopback address "must never be sent outside of a single node".
        if ip.src.is_loopback() {
            c.ipv6_bad_src += 1;
            return;
        }
        let v6 = &self.st.v6;
        let dst = if ip.dst.is_multicast() {
            v6.in_group(ip.dst).then_some(DstKind::Multicast)
        } else {
            match v6.state_of(ip.dst) {
                Some(AddrState::Preferred) => Some(DstKind::Unicast),
                Some(AddrState::Tentative) => Some(DstKind::Tentative),
                _ => None,
            }
        };
        let Some(dst) = dst else {
            self.st.c.ipv6_not_for_us += 1;
            return;
        };
        let arrival = Arrival { dst, link_mcast };
        // Bounded by the payload length, so link padding is left out.
        let payload: &'b [u8] = p.get(IP6_LEN..IP6_LEN + ip.payload_len).unwrap_or(&[]);
        let start = WalkStart {
            next_header: u8::from(ip.next_header),
            base: IP6_LEN,
            nh_at: 6,
            hop_by_hop_allowed: true,
            dst_multicast: ip.dst.is_multicast(),
        };
        let mut budget = ipv6ext::MAX_EXT_HEADERS;
        let invoking = Invoking { ip, rest: payload };
        match ipv6ext::walk(start, payload, &mut budget) {
            Ok(Chain::Upper {
                protocol,
                offset,
                nh_at,
            }) => {
                let body = &payload[offset..];
                // Like IPv4's options, extension headers keep a packet out of GRO.
                let body = if offset == 0 {
                    super::ipv4::Payload::Batch(body)
                } else {
                    super::ipv4::Payload::Transient(body)
                };
                self.receive_transport_v6(
                    now, &ip, protocol, body, nh_at, arrival, invoking, csum, gro,
                );
            }
            Ok(Chain::Fragment { offset, repr }) => {
                self.receive_fragment(now, &ip, payload, offset, repr, arrival, csum, gro)
            }
            Ok(Chain::NoNextHeader) => self.st.c.ipv6_no_next_header += 1,
            Err(e) => self.walk_failed(now, e, arrival, invoking),
        }
    }

    /// Counts a walk that stopped, and answers Parameter Problem where RFC 8200 §4 says so.
    fn walk_failed(&mut self, now: Instant, e: WalkError, arrival: Arrival, inv: Invoking<'_>) {
        let c = &mut self.st.c;
        match e {
            WalkError::Truncated | WalkError::BadOptions => c.ipv6_ext_malformed += 1,
            WalkError::Limit => c.ipv6_ext_limit += 1,
            WalkError::Discard => c.ipv6_ext_discarded += 1,
            WalkError::ParamProblem { code, pointer } => {
                if code == param_problem::NEXT_HEADER {
                    c.ipv6_unknown_next_header += 1;
                } else {
                    c.ipv6_param_problem += 1;
                }
                self.send_param_problem(now, code, pointer, arrival, inv);
            }
        }
    }

    /// A packet with a Fragment header at `frag_at` of its `payload` (RFC 8200 §4.5).
    #[allow(clippy::too_many_arguments)]
    fn receive_fragment<'b>(
        &mut self,
        now: Instant,
        ip: &Ipv6Repr,
        payload: &[u8],
        frag_at: usize,
        frag: FragmentRepr,
        arrival: Arrival,
        csum: Csum,
        gro: &mut Gro<'b>,
    ) {
        self.st.c.frag6_in += 1;
        let data_at = frag_at + ipv6ext::FRAGMENT_HEADER_LEN;
        let data = payload.get(data_at..).unwrap_or(&[]);
        let inv = Invoking {
            ip: *ip,
            rest: payload,
        };
        // The fragmentable part after the Fragment header, as the reassembled packet will
        // carry it: the walk restarts from the Fragment header's Next Header, and a
        // Hop-by-Hop header there is out of place.
        let start = WalkStart {
            next_header: frag.next_header,
            base: IP6_LEN + data_at,
            nh_at: IP6_LEN + frag_at,
            hop_by_hop_allowed: false,
            dst_multicast: ip.dst.is_multicast(),
        };
        if frag.is_atomic() {
            // RFC 6946 §4: processed in isolation, as a whole packet.
            self.st.c.frag6_atomic += 1;
            let mut budget = ipv6ext::MAX_EXT_HEADERS;
            match ipv6ext::walk(start, data, &mut budget) {
                Ok(Chain::Upper {
                    protocol,
                    offset,
                    nh_at,
                }) => {
                    let body = super::ipv4::Payload::Transient(&data[offset..]);
                    self.receive_transport_v6(
                        now, ip, protocol, body, nh_at, arrival, inv, csum, gro,
                    );
                }
                Ok(Chain::Fragment { .. }) => self.st.c.ipv6_ext_malformed += 1,
                Ok(Chain::NoNextHeader) => self.st.c.ipv6_no_next_header += 1,
                Err(e) => self.walk_failed(now, e, arrival, inv),
            }
            return;
        }
        if !self.config.frag_reassembly {
            self.st.c.frag6_dropped += 1;
            return;
        }
        // RFC 8200 §4.5: "If the length of a fragment, as derived from the fragment packet's
        // Payload Length field, is not a multiple of 8 octets and the M flag of that fragment
        // is 1, then that fragment must be discarded and an ICMP Parameter Problem, Code 0,
        // message should be sent to the source of the fragment, pointing to the Payload
        // Length field of the fragment packet."
        if frag.more_frags && !data.len().is_multiple_of(8) {
            self.st.c.frag6_dropped += 1;
            self.st.c.frag6_bad_length += 1;
            self.send_param_problem(now, param_problem::HEADER_FIELD, 4, arrival, inv);
            return;
        }
        // "If the length and offset of a fragment are such that the Payload Length of the
        // packet reassembled from that fragment would exceed 65,535 octets, then that
        // fragment must be discarded and an ICMP Parameter Problem, Code 0, message should be
        // sent to the source of the fragment, pointing to the Fragment Offset field".
        if frag_at + frag.offset + data.len() > ipv6::MAX_PAYLOAD_LEN {
            self.st.c.frag6_dropped += 1;
            self.st.c.frag6_too_big += 1;
            // The datagram can never be delivered: what it already holds goes too.
            self.reasm6.discard(&(ip.src, ip.dst, frag.ident));
            let pointer = IP6_LEN + frag_at + 2;
            self.send_param_problem(now, param_problem::HEADER_FIELD, pointer, arrival, inv);
            return;
        }
        // RFC 8200 §4.5 (RFC 7112): "If the first fragment does not include all headers
        // through an Upper-Layer header, then that fragment should be discarded and an ICMP
        // Parameter Problem, Code 3, message should be sent to the source of the fragment,
        // with the Pointer field set to zero." Linux also wants the upper-layer header's
        // fixed part in it (`ipv6_frag_thdr_truncated`).
        if frag.offset == 0 && !chain_complete(frag.next_header, data) {
            self.st.c.frag6_incomplete_chain += 1;
            self.st.c.frag6_dropped += 1;
            let code = param_problem::INCOMPLETE_CHAIN;
            self.send_param_problem(now, code, 0, arrival, inv);
            return;
        }
        let head = FragHead {
            ip: *ip,
            next_header: frag.next_header,
            ident: frag.ident,
        };
        let key = (ip.src, ip.dst, frag.ident);
        use super::reassembly::FragOutcome;
        // RFC 5722 §4: an overlap discards the whole datagram "silently" — no ICMP.
        let out = self
            .reasm6
            .push_fragment(now, key, head, frag.offset, frag.more_frags, data);
        let drop = match out {
            FragOutcome::Dropped(why) => Some(why),
            _ => None,
        };
        self.st
            .c
            .frag_result(true, drop, self.reasm6.take_evictions());
        match out {
            FragOutcome::Complete(h, data) => {
                self.st.c.frag6_reassembled += 1;
                self.receive_reassembled(now, h, &data, arrival, gro);
                self.reasm6.recycle(data);
            }
            FragOutcome::Dropped(_) | FragOutcome::Queued | FragOutcome::Duplicate => {}
        }
    }

    /// A reassembled datagram: the fixed header of its first fragment with the Fragment
    /// header's Next Header (RFC 8200 §4.5: "The Next Header field of the last header of the
    /// Per-Fragment headers is obtained from the Next Header field of the first fragment's
    /// Fragment header"). The unfragmentable extension headers were processed as each
    /// fragment arrived and are not kept, so pointers and quotes of errors about the
    /// reassembled packet count from a fixed header directly followed by the data.
    fn receive_reassembled<'b>(
        &mut self,
        now: Instant,
        h: FragHead,
        data: &[u8],
        arrival: Arrival,
        gro: &mut Gro<'b>,
    ) {
        let mut ip = h.ip;
        ip.next_header = IpProtocol::from(h.next_header);
        ip.payload_len = data.len();
        // The transport checksum covers the whole datagram: not verified yet.
        let csum = if self.st.csum_rx {
            Csum::Unverified
        } else {
            Csum::Verified
        };
        let start = WalkStart {
            next_header: h.next_header,
            base: IP6_LEN,
            nh_at: 6,
            hop_by_hop_allowed: false,
            dst_multicast: ip.dst.is_multicast(),
        };
        let inv = Invoking { ip, rest: data };
        let mut budget = ipv6ext::MAX_EXT_HEADERS;
        match ipv6ext::walk(start, data, &mut budget) {
            Ok(Chain::Upper {
                protocol,
                offset,
                nh_at,
            }) => {
                let body = super::ipv4::Payload::Transient(&data[offset..]);
                self.receive_transport_v6(now, &ip, protocol, body, nh_at, arrival, inv, csum, gro);
            }
            // A Fragment header inside a fragment: nothing honest sends that.
            Ok(Chain::Fragment { .. }) => self.st.c.ipv6_ext_malformed += 1,
            Ok(Chain::NoNextHeader) => self.st.c.ipv6_no_next_header += 1,
            Err(e) => self.walk_failed(now, e, arrival, inv),
        }
    }

    /// The upper-layer demultiplexer of IPv6 (RFC 8200 §4: "If ... the Next Header value in
    /// the current header is unrecognized by the node, it should discard the packet and send
    /// an ICMP Parameter Problem message to the source of the packet, with an ICMP Code value
    /// of 1 ... and the ICMP Pointer field containing the offset of the unrecognized value
    /// within the original packet").
    ///
    /// `ip` is the fixed header, `protocol` the upper layer and `body` its bytes (header
    /// included); `nh_at` is where the Next Header field naming it lies; `invoking` is what
    /// an error message quotes; `csum` says whether the transport checksum still needs a check.
    ///
    /// TCP and UDP go to the transport glue that IPv4 uses (`receive_tcp`, `receive_udp`, with
    /// [`IpMeta::from_v6`](super::ip::IpMeta::from_v6)); `body` is `Payload::Batch` only
    /// straight after the fixed header, so GRO merges what has no extension headers. A UDP
    /// datagram no socket takes is answered with Destination Unreachable, port unreachable
    /// (RFC 4443 §3.1 code 4; §2.4 (e) rules in `send_icmpv6_error`: never to a multicast
    /// destination).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn receive_transport_v6<'b>(
        &mut self,
        now: Instant,
        ip: &Ipv6Repr,
        protocol: IpProtocol,
        body: super::ipv4::Payload<'b, '_>,
        nh_at: usize,
        arrival: Arrival,
        invoking: Invoking<'_>,
        csum: Csum,
        gro: &mut Gro<'b>,
    ) {
        match protocol {
            IpProtocol::Icmpv6 => {
                self.receive_icmpv6(now, ip, body.bytes(), arrival, invoking, csum);
            }
            // Only NDP may reach a tentative address (RFC 4862 §5.4).
            _ if arrival.dst == DstKind::Tentative => self.st.c.ipv6_not_for_us += 1,
            // RFC 9293 §3.9.1: TCP is unicast only (a multicast destination is counted and
            // dropped by `receive_tcp`).
            IpProtocol::Tcp => {
                let meta = super::ip::IpMeta::from_v6(ip);
                let mcast = arrival.dst == DstKind::Multicast;
                self.receive_tcp(now, &meta, body, mcast, csum, gro);
            }
            IpProtocol::Udp => {
                let meta = super::ip::IpMeta::from_v6(ip);
                let mcast = arrival.dst == DstKind::Multicast;
                if self.receive_udp(now, &meta, body.bytes(), mcast, csum) {
                    let code = crate::wire::icmpv6::unreach_code::PORT;
                    self.send_icmpv6_error(now, arrival, false, invoking, |header, data| {
                        crate::wire::icmpv6::Icmpv6Repr::DstUnreachable { code, header, data }
                    });
                }
            }
            IpProtocol::Icmp | IpProtocol::Unknown(_) => {
                self.st.c.ipv6_unknown_next_header += 1;
                let code = param_problem::NEXT_HEADER;
                self.send_param_problem(now, code, nh_at, arrival, invoking);
            }
        }
    }
}

impl Inner {
    /// Reassembly timeouts (RFC 8200 §4.5): "reassembly of that packet must be abandoned ...
    /// If the first fragment (i.e., the one with a Fragment Offset of zero) has been received,
    /// an ICMP Time Exceeded -- Fragment Reassembly Time Exceeded message should be sent to
    /// the source of that fragment." The quote is the first fragment rebuilt from what was
    /// kept: its fixed header, a Fragment header and its data (unfragmentable extension
    /// headers are not kept).
    // Out of line, so the per-packet path stays dense in the instruction cache.
    #[inline(never)]
    pub(super) fn expire_fragments6(&mut self, now: Instant) {
        if self.reasm6.poll_at().is_none_or(|t| t > now) {
            return;
        }
        // Rare (a timeout): a small list of what to answer, built outside the reassembler.
        let mut firsts: Vec<(FragHead, Vec<u8>)> = Vec::new();
        let room = crate::wire::icmpv6::MAX_ERROR_LEN - 8 - IP6_LEN - ipv6ext::FRAGMENT_HEADER_LEN;
        let n = self.reasm6.expire_each(now, |h, data| {
            if let Some(h) = h {
                firsts.push((h, data[..data.len().min(room)].to_vec()));
            }
        });
        self.st.c.frag6_timeouts += n as u64;
        self.st.c.frag6_dropped += n as u64;
        for (h, data) in firsts {
            let mut rest = vec![0u8; ipv6ext::FRAGMENT_HEADER_LEN + data.len()];
            let frag = FragmentRepr {
                next_header: h.next_header,
                offset: 0,
                more_frags: true,
                ident: h.ident,
            };
            let _ = frag.emit(&mut rest);
            rest[ipv6ext::FRAGMENT_HEADER_LEN..].copy_from_slice(&data);
            let mut ip = h.ip;
            ip.next_header = IpProtocol::from(ipv6ext::FRAGMENT);
            ip.payload_len = rest.len();
            let dst = if ip.dst.is_multicast() {
                DstKind::Multicast
            } else {
                DstKind::Unicast
            };
            let arrival = Arrival {
                dst,
                link_mcast: false,
            };
            let inv = Invoking { ip, rest: &rest };
            let code = crate::wire::icmpv6::time_exceeded_code::REASSEMBLY;
            self.send_icmpv6_error(now, arrival, false, inv, |header, data| {
                crate::wire::icmpv6::Icmpv6Repr::TimeExceeded { code, header, data }
            });
        }
    }
}

/// RFC 7112 §5: whether a first fragment's data (from the Fragment header's Next Header on)
/// holds the whole header chain, through the upper-layer header's fixed part for the
/// protocols netfold knows (TCP 20 bytes, UDP 8, ICMPv6 8, as Linux checks them).
fn chain_complete(next_header: u8, data: &[u8]) -> bool {
    match ipv6ext::skip_to_upper(next_header, data) {
        None => false,
        Some((nh, off, _)) => {
            let need = match IpProtocol::from(nh) {
                IpProtocol::Tcp => crate::wire::tcp::HEADER_LEN,
                IpProtocol::Udp => crate::wire::udp::HEADER_LEN,
                IpProtocol::Icmpv6 => crate::wire::icmpv6::HEADER_LEN,
                _ => 0,
            };
            data.len() >= off + need
        }
    }
}

/// The fixed-header fields of an IPv6 packet we send (RFC 8200 §3): upper-layer protocol,
/// addresses, hop limit, and the traffic class as its DSCP bits (the low two ignored) and
/// ECN codepoint.
#[derive(Debug, Clone, Copy)]
pub(super) struct V6Out {
    pub(super) next_header: IpProtocol,
    pub(super) src: Ipv6Addr,
    pub(super) dst: Ipv6Addr,
    pub(super) hop_limit: u8,
    pub(super) dscp: u8,
    pub(super) ecn: Ecn,
}

impl IfaceState {
    /// `buf` holds an upper-layer packet (`next_header`: TCP, UDP, ICMPv6) with headroom;
    /// prepends the IPv6 fixed header (hop limit: ours; traffic class: `ecn`) and hands it to
    /// the link. A datagram other than TCP larger than the path MTU to `dst` is sent in
    /// fragments (RFC 8200 §4.5); a TCP segment larger than the link MTU is refused (`TooBig`:
    /// `emit_tcp` cuts IPv6 segments to the path MTU itself, and hands TCPv6 super-segments
    /// to a TSO device only through its header template, never through here).
    ///
    /// The IPv6 counterpart of `send_ip`, for the transport layer (`emit_tcp`, `flush_udp`).
    pub(super) fn send_ipv6(
        &mut self,
        now: Instant,
        next_header: IpProtocol,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        buf: PacketBuf,
        ecn: Ecn,
    ) -> Result<(), TxError> {
        let hdr = V6Out {
            next_header,
            src,
            dst,
            hop_limit: self.v6.hop_limit,
            dscp: 0,
            ecn,
        };
        self.send_ipv6_with(now, hdr, buf)
    }

    /// `send_ipv6` with the DSCP bits of `dscp` in the traffic class (a TCP connection's
    /// IPV6_TCLASS; its ECN bits are ignored, `ecn` gives those).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_ipv6_dscp(
        &mut self,
        now: Instant,
        next_header: IpProtocol,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        buf: PacketBuf,
        ecn: Ecn,
        dscp: u8,
    ) -> Result<(), TxError> {
        let hdr = V6Out {
            next_header,
            src,
            dst,
            hop_limit: self.v6.hop_limit,
            dscp,
            ecn,
        };
        self.send_ipv6_with(now, hdr, buf)
    }

    /// `send_ipv6` with every header field given (NDP sends hop limit 255, RFC 4861 §7.1).
    pub(super) fn send_ipv6_with(
        &mut self,
        now: Instant,
        hdr: V6Out,
        mut buf: PacketBuf,
    ) -> Result<(), TxError> {
        let V6Out {
            next_header,
            src,
            dst,
            hop_limit,
            dscp,
            ecn,
        } = hdr;
        if !self.v6.enabled {
            self.c.no_route += 1;
            self.pool.put(buf);
            return Err(TxError::NoRoute);
        }
        if self.tx_full() {
            self.c.tx_queue_full += 1;
            self.pool.put(buf);
            return Err(TxError::QueueFull);
        }
        let len = IP6_LEN + buf.len();
        let tcp = next_header == IpProtocol::Tcp;
        if buf.len() > ipv6::MAX_PAYLOAD_LEN || (tcp && len > self.ipv6_link_mtu()) {
            self.c.tx_too_big += 1;
            self.pool.put(buf);
            return Err(TxError::TooBig);
        }
        if !tcp {
            let mtu = self.ipv6_path_mtu(now, dst);
            if len > mtu {
                return self.send_fragments6(now, hdr, buf, mtu);
            }
        }
        let mut ip = Ipv6Repr {
            src,
            dst,
            next_header,
            payload_len: buf.len(),
            hop_limit,
            traffic_class: dscp & !0b11,
            flow_label: 0,
        };
        ip.set_ecn(ecn);
        // Cannot fail: the payload fits 16 bits (checked above) and the area is 40 bytes.
        let _ = ip.emit(buf.prepend(IP6_LEN));
        self.c.ipv6_out += 1;
        self.send_link(now, dst.into(), buf)
    }

    /// The link MTU for IPv6: the interface's, lowered by a Router Advertisement's MTU option.
    pub(super) fn ipv6_link_mtu(&self) -> usize {
        self.v6.ra_mtu.map_or(self.mtu, |m| m.min(self.mtu))
    }

    /// The path MTU to `dst` as of `now`: the link MTU, lowered by what ICMPv6 Packet Too Big
    /// reported for that destination (RFC 8201), never below 1280 (RFC 8200 §5) unless the
    /// link itself is narrower.
    pub(super) fn ipv6_path_mtu(&self, now: Instant, dst: Ipv6Addr) -> usize {
        self.v6.pmtu.get(now, dst, self.ipv6_link_mtu())
    }

    /// The source address for a packet to `dst`, RFC 6724 §5 kept simple: only usable
    /// addresses (not tentative or duplicate, RFC 4862 §5.4); for a link-local or multicast
    /// destination the link-local address (Rule 2, same scope); otherwise a global address in
    /// the destination's prefix (Rule 8, longest matching prefix, by prefix), else the first
    /// global one, else the link-local one. `None` when no address is usable yet.
    pub(super) fn ipv6_source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let usable = || {
            self.v6
                .addrs
                .iter()
                .filter(|e| e.state == AddrState::Preferred)
        };
        let ll = usable()
            .map(|e| e.cidr.addr())
            .find(|&a| ipv6::is_link_local(a));
        if ipv6::is_link_local(dst) || dst.is_multicast() {
            return ll.or_else(|| usable().map(|e| e.cidr.addr()).next());
        }
        let global = || usable().filter(|e| !ipv6::is_link_local(e.cidr.addr()));
        global()
            .find(|e| e.cidr.contains(dst))
            .or_else(|| global().next())
            .map(|e| e.cidr.addr())
            .or(ll)
    }

    /// RFC 8200 §4.5 "Fragment Header": the packet is cut into "fragments, each of which is
    /// ... the Per-Fragment headers ... followed by the Fragment header ... followed by the
    /// fragment itself", each fragment's data a multiple of 8 bytes but the last's, so that
    /// each fits `mtu`. Our unfragmentable part is the fixed header alone. All fragments are
    /// queued, or none (`QueueFull`). The fragments carry `hdr`'s addresses and hop limit
    /// and a zero traffic class.
    fn send_fragments6(
        &mut self,
        now: Instant,
        hdr: V6Out,
        mut buf: PacketBuf,
        mtu: usize,
    ) -> Result<(), TxError> {
        let V6Out {
            next_header,
            src,
            dst,
            hop_limit,
            ..
        } = hdr;
        // With checksum offload (`csum_tx` off) the UDP layer left the checksum for the
        // device, but no device completes one in a fragment: the checksum covers the whole
        // datagram. Linux `ip6_fragment` finishes it in software (`skb_checksum_help`)
        // first, and so do we; over IPv6 a datagram without one is discarded (RFC 8200
        // §8.1: "IPv6 receivers must discard UDP packets containing a zero checksum").
        if !self.csum_tx && next_header == IpProtocol::Udp {
            let len = buf.len();
            if let Ok(mut u) = crate::wire::udp::UdpPacket::new_checked(buf.as_mut_slice()) {
                let ph = crate::wire::tcp::PseudoHeader {
                    src: src.into(),
                    dst: dst.into(),
                };
                u.fill_checksum(&ph);
                self.c.bytes_checksummed += len as u64;
                self.c.bytes_checksummed_separately += len as u64;
            }
        }
        let head = IP6_LEN + ipv6ext::FRAGMENT_HEADER_LEN;
        let per = mtu.saturating_sub(head) / 8 * 8;
        let pieces = buf.len().div_ceil(per.max(8));
        if per == 0 || self.tx.len() + pieces > self.tx_limit {
            self.c.tx_queue_full += 1;
            self.pool.put(buf);
            return Err(TxError::QueueFull);
        }
        let ident = self.v6.next_ident(src, dst);
        let total = buf.len();
        let mut result = Ok(());
        for (i, chunk) in buf.as_slice().chunks(per).enumerate() {
            let off = i * per;
            let ip = Ipv6Repr {
                src,
                dst,
                next_header: IpProtocol::from(ipv6ext::FRAGMENT),
                payload_len: ipv6ext::FRAGMENT_HEADER_LEN + chunk.len(),
                hop_limit,
                traffic_class: 0,
                flow_label: 0,
            };
            let frag = FragmentRepr {
                next_header: u8::from(next_header),
                offset: off,
                more_frags: off + chunk.len() < total,
                ident,
            };
            let mut f = self.pool.get();
            let area = f.append(head + chunk.len());
            // Cannot fail: 40 + 8 bytes of room, the offset a multiple of 8 below 65536.
            let _ = ip.emit(&mut area[..IP6_LEN]);
            let _ = frag.emit(&mut area[IP6_LEN..head]);
            self.copy.copy(&mut area[head..], chunk);
            self.c.frag6_out += 1;
            self.c.ipv6_out += 1;
            let r = self.send_link(now, dst.into(), f);
            if result.is_ok() {
                result = r;
            }
        }
        self.pool.put(buf);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iface::neighbor::Nud;
    use crate::iface::{Stack, StackConfig};
    use crate::wire::ethernet::{EtherType, EthernetFrame};
    use crate::wire::ipv6ext::FRAGMENT;

    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn stack(medium: Medium, router: Option<Ipv6Addr>) -> Stack {
        Stack::new(StackConfig {
            medium,
            mac: MAC,
            addrs6: vec![
                Ipv6Cidr::new(a("2001:2:0:1::1"), 64).unwrap(),
                Ipv6Cidr::new(a("2001:2:0:2::1"), 64).unwrap(),
            ],
            gateway6: router,
            dad_transmits: 0,
            tcp_secret: crate::tcp::Secret::fixed_for_tests([1; 16]),
            ..StackConfig::default()
        })
    }

    fn payload(st: &mut IfaceState, len: usize) -> PacketBuf {
        let mut b = st.pool.get();
        b.append(len).fill(0xab);
        b
    }

    #[test]
    fn addresses_groups_next_hops_and_sources() {
        let s = stack(Medium::Ethernet, Some(a("fe80::99")));
        let v6 = &s.inner.st.v6;
        let ll = a("fe80::ff:fe00:1");
        assert_eq!(
            v6.addrs[0].cidr.addr(),
            ll,
            "MAC 02:00:00:00:00:01, U/L bit flipped"
        );
        assert!(v6.in_group(ipv6::LINK_LOCAL_ALL_NODES));
        assert!(v6.in_group(ipv6::solicited_node(ll)));
        assert!(!v6.in_group(ipv6::LINK_LOCAL_ALL_ROUTERS));
        assert!(v6.accepts_mac(EthernetAddress([0x33, 0x33, 0xff, 0, 0, 1])));
        assert!(v6.accepts_mac(EthernetAddress([0x33, 0x33, 0, 0, 0, 1])));
        assert!(!v6.accepts_mac(EthernetAddress([0x33, 0x33, 0xff, 0, 0, 2])));
        assert!(!v6.accepts_mac(EthernetAddress([0x01, 0, 0x5e, 0, 0, 1])));
        assert_eq!(v6.next_hop(a("2001:2:0:2::7")), Some(a("2001:2:0:2::7")));
        assert_eq!(v6.next_hop(a("fe80::7")), Some(a("fe80::7")));
        assert_eq!(v6.next_hop(a("2001:2:9::7")), Some(a("fe80::99")));
        let st = &s.inner.st;
        assert_eq!(st.ipv6_source_for(a("fe80::7")), Some(ll));
        assert_eq!(st.ipv6_source_for(a("ff02::1")), Some(ll));
        assert_eq!(
            st.ipv6_source_for(a("2001:2:0:2::7")),
            Some(a("2001:2:0:2::1")),
            "the address in the destination's prefix"
        );
        assert_eq!(
            st.ipv6_source_for(a("2001:2:9::7")),
            Some(a("2001:2:0:1::1")),
            "else the first global one"
        );
        assert_eq!(
            stack(Medium::Ethernet, None)
                .inner
                .st
                .v6
                .next_hop(a("2001:2:9::7")),
            None
        );
    }

    #[test]
    fn reachable_time_is_randomised_around_the_base() {
        let mut s = stack(Medium::Ethernet, None);
        let v6 = &mut s.inner.st.v6;
        let draws: Vec<_> = (0..200)
            .map(|_| v6.reachable_time().total_millis())
            .collect();
        assert!(draws.iter().all(|&t| (15_000..45_000).contains(&t)));
        assert!(draws.iter().any(|&t| t < 25_000) && draws.iter().any(|&t| t > 35_000));
        let (x, y) = (a("2001:2::1"), a("2001:2::2"));
        let i1 = v6.next_ident(x, y);
        assert_eq!(v6.next_ident(x, y), i1.wrapping_add(1));
    }

    /// The transport seam: `send_ipv6` with `resolved_link_header` and `ipv6_path_mtu`.
    #[test]
    fn send_ipv6_parks_resolves_fragments_and_refuses_big_tcp() {
        let mut s = stack(Medium::Ethernet, None);
        let st = &mut s.inner.st;
        let now = Instant::ZERO;
        let (src, dst) = (a("2001:2:0:1::1"), a("2001:2:0:1::2"));
        let mut hdr = [0u8; 18];
        assert_eq!(st.resolved_link_header(now, dst.into(), &mut hdr), None);
        let b = payload(st, 8);
        st.send_ipv6(now, IpProtocol::Udp, src, dst, b, Ecn::Ect0)
            .unwrap();
        assert_eq!(st.v6.neigh.pending_len(), 1, "parked for NDP");
        assert_eq!(st.tx.len(), 1, "the solicitation");
        st.tx.clear();
        st.v6
            .neigh
            .set(now, dst, PEER_MAC, Nud::Reachable, Duration::from_secs(30));
        assert_eq!(st.resolved_link_header(now, dst.into(), &mut hdr), Some(14));
        assert_eq!(&hdr[..6], &PEER_MAC.0);
        assert_eq!(&hdr[12..14], &[0x86, 0xdd]);
        assert_eq!(
            st.resolved_link_header(now, a("ff02::1").into(), &mut hdr),
            None,
            "multicast takes the general path"
        );
        let b = payload(st, 8);
        st.send_ipv6(now, IpProtocol::Udp, src, dst, b, Ecn::Ect0)
            .unwrap();
        let f = st.tx.pop().unwrap();
        let eth = EthernetFrame::new_checked(f.as_slice()).unwrap();
        assert_eq!(eth.ethertype(), EtherType::Ipv6);
        let ip = Ipv6Repr::parse(&Ipv6Packet::new_checked(eth.payload()).unwrap()).unwrap();
        assert_eq!(
            (ip.src, ip.dst, ip.next_header),
            (src, dst, IpProtocol::Udp)
        );
        assert_eq!((ip.payload_len, ip.hop_limit, ip.ecn()), (8, 64, Ecn::Ect0));

        // 3000 bytes at a path MTU of 1280: fragments of 1232 bytes, one identification.
        st.v6.pmtu.learn(now, dst, 1280);
        assert_eq!(st.ipv6_path_mtu(now, dst), 1280);
        let b = payload(st, 3000);
        st.send_ipv6(now, IpProtocol::Udp, src, dst, b, Ecn::NotEct)
            .unwrap();
        let frags: Vec<_> = st.tx.drain(..).collect();
        assert_eq!(frags.len(), 3);
        let mut ids = vec![];
        for (i, f) in frags.iter().enumerate() {
            let p = &f.as_slice()[14..];
            assert!(p.len() <= 1280);
            assert_eq!(p[6], FRAGMENT);
            let fr = FragmentRepr::parse(&p[40..]).unwrap();
            assert_eq!(fr.offset, i * 1232);
            assert_eq!(fr.more_frags, i < 2);
            assert_eq!(fr.next_header, 17);
            ids.push(fr.ident);
        }
        assert!(ids.iter().all(|&x| x == ids[0]));
        assert_eq!(st.c.frag6_out, 3);

        // TCP is never fragmented: a segment over the link MTU is refused.
        let b = payload(st, 1500);
        assert_eq!(
            st.send_ipv6(now, IpProtocol::Tcp, src, dst, b, Ecn::NotEct),
            Err(TxError::TooBig)
        );
        // Off-link without a router: no route.
        let b = payload(st, 8);
        assert_eq!(
            st.send_ipv6(now, IpProtocol::Udp, src, a("2001:2:9::1"), b, Ecn::NotEct),
            Err(TxError::NoRoute)
        );
    }

    /// With checksum offload the UDP checksum is the device's to finish, but no device
    /// finishes one in a fragment: a datagram cut into fragments leaves with its checksum
    /// complete (found over `serve`: the kernel dropped netfold's fragmented UDP echoes).
    #[test]
    fn fragmented_udp_gets_its_checksum_in_software_under_offload() {
        use crate::wire::tcp::PseudoHeader;
        use crate::wire::udp::UdpPacket;
        let mut s = stack(Medium::Ip, None);
        let st = &mut s.inner.st;
        st.csum_tx = false;
        let (src, dst) = (a("2001:2:0:1::1"), a("2001:2:0:1::2"));
        let mut b = st.pool.get();
        let d = b.append(3008);
        for (i, x) in d.iter_mut().enumerate() {
            *x = (i * 7) as u8;
        }
        let mut u = UdpPacket::new_unchecked(&mut d[..]);
        u.set_src_port(7);
        u.set_dst_port(40000);
        u.set_len(3008);
        u.set_checksum(0);
        st.send_ipv6(Instant::ZERO, IpProtocol::Udp, src, dst, b, Ecn::NotEct)
            .unwrap();
        assert_eq!(st.tx.len(), 3);
        let mut whole = Vec::new();
        for f in st.tx.drain(..) {
            whole.extend_from_slice(&f.as_slice()[IP6_LEN + ipv6ext::FRAGMENT_HEADER_LEN..]);
        }
        let u = UdpPacket::new_checked(&whole[..]).unwrap();
        assert_ne!(u.checksum(), 0);
        assert!(u.verify_checksum(&PseudoHeader {
            src: src.into(),
            dst: dst.into()
        }));
    }

    #[test]
    fn the_ip_medium_has_no_link_header() {
        let mut s = stack(Medium::Ip, None);
        let st = &mut s.inner.st;
        st.medium = Medium::Ip;
        let mut hdr = [0u8; 18];
        assert_eq!(
            st.resolved_link_header(Instant::ZERO, a("2001:2:0:1::2").into(), &mut hdr),
            Some(0)
        );
        assert_eq!(st.v6.addrs.len(), 2, "no link-local address without a MAC");
        let b = payload(st, 8);
        let (src, dst) = (a("2001:2:0:1::1"), a("2001:2:0:1::2"));
        st.send_ipv6(Instant::ZERO, IpProtocol::Udp, src, dst, b, Ecn::NotEct)
            .unwrap();
        assert_eq!(
            st.tx.pop().unwrap().as_slice()[0] >> 4,
            6,
            "a bare IPv6 packet"
        );
    }
}
