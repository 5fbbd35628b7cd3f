//! The `Stack`: one network interface's IPv4 (and, when configured, IPv6) host stack, sans-IO.
//! Its transport (TCP, UDP, sockets) is address-family generic: IPv6 segments and datagrams
//! enter through the same `receive_tcp`/`receive_udp` as IPv4 ones, with an `ip::IpMeta`
//! describing the header, and leave through `IfaceState::send_ipv6`. See
//! docs/ARCHITECTURE.md, "Dual stack".
//!
//! Organised by protocol, not by direction (smoltcp's `iface/interface/`): [`state`] is the
//! interface's shared state (addresses, MTU, pool, transmit queue, neighbour cache, counters);
//! `ethernet`, `arp`, `ipv4` (with [`reassembly`]), `icmp`, [`udp`] and `tcp` (the glue to the
//! TCP engine and to [`crate::offload`]) each hold their protocol's receive and send halves.
//! A receive batch is parsed as an immutable slice of frames beside a separate mutable
//! `Inner` (smoltcp's `Interface`/`InterfaceInner` split), so no frame is taken out of the
//! batch and handed back, and GRO can hold segments borrowed from the batch until it ends.
//!
//! [`Stack::poll`] does one round of work against a [`Device`]: it receives a batch of frames
//! (the OLS 2002 study: work in bunches), runs them through Ethernet/ARP/IPv4/ICMP/UDP and hands
//! verified TCP segments to the [`TcpLayer`]; then it collects everything due for transmission
//! (TCP segments, UDP datagrams, ARP, ICMP) into one batch and gives it to the device. Packet
//! buffers come from, and go back to, one [`Pool`] owned by the stack; the receive and transmit
//! vectors are reused, so steady-state traffic makes no per-packet heap allocation (UDP
//! datagrams are queued in pooled buffers too).
//!
//! Decisions worth knowing:
//! - Fragments: reassembled when `StackConfig::frag_reassembly` (bounded by high and low
//!   byte marks and a per-source share that evict rather than refuse, so a fragment flood
//!   does not lock legitimate senders out; 30 s timeout; overlaps discard the datagram; see
//!   [`reassembly`]); otherwise dropped and counted. On
//!   transmit, UDP and ICMP datagrams up to 65507 bytes of data are fragmented at the path MTU
//!   (RFC 791 §3.2; the path MTU per destination as ICMP reported it, RFC 1191), without DF.
//!   A UDP socket's IP_MTU_DISCOVER mode ([`PmtuDisc`], Linux's default `Want`) sets DF on
//!   datagrams that fit the path, or refuses larger ones (`Do`, `Probe`).
//! - Errors back to sockets: when ARP gives up on a next hop, connections still opening
//!   through it fail with `HostUnreachable` (as Linux, after ~3 s); a connected UDP socket
//!   ([`Stack::udp_connect`]) hears ICMP port/host unreachable once, as Linux reports it.
//!   TCP is never fragmented: its packets carry DF (RFC 1191 path MTU discovery) and its
//!   segments are cut at the MTU instead (software GSO).
//! - ARP: RFC 826 merge rule, one request per second per address, bounded pending queue.
//! - No VLANs (priority-tagged frames, VLAN id 0, are accepted as untagged), no IPv4 multicast,
//!   no forwarding, no loopback to our own address, no IP options on transmit.
//! - IPv6 (`StackConfig::addrs6`, off by default): the network layer — NDP, DAD, ICMPv6,
//!   extension headers, fragmentation and reassembly, path MTU — in `ipv6` and its
//!   neighbours `icmpv6`, `ndp`; TCP and UDP run over it through the same glue as over IPv4
//!   (`tcp`, `udp`, with an `ip::IpMeta`), dual-stack sockets as on Linux.
//! - GRO (`StackConfig::gro`, see [`crate::offload::gro`]): the TCP segments of a flow within one receive
//!   batch reach TCP as one merged segment, its payloads still slices of their frames.
//! - Checksums follow the device's `ChecksumCaps` and the state each received frame carries
//!   ([`crate::buf::Csum`]): each checksum is verified exactly once; on transmit the TCP and UDP payload sums are
//!   taken while the payload is copied into the packet buffer, on UDP receive while it is copied
//!   into the socket queue, on TCP receive while TCP copies the payload into a posted read or
//!   its receive ring (the interface sums the header and leaves the sum open, `tcp/place.rs`).
#![warn(missing_docs)]

mod arp;
pub mod counters;
#[cfg(test)]
mod dual_tests;
mod ethernet;
mod icmp;
mod icmpv6;
mod ip;
mod ipv4;
mod ipv6;
mod ndp;
mod neighbor;
mod pmtu;
pub mod reassembly;
pub mod state;
mod tcp;
pub mod udp;

pub use counters::Counters;
pub use ipv6::AddrState;
pub use state::{DropReason, Emit, FullQueue, TxError};
pub use udp::{PmtuDisc, UdpBindOptions, UdpError, UdpHandle};

use crate::buf::{Csum, PacketBuf, Pool};
use crate::offload::gro::Gro;
use crate::phy::{Device, Medium};
use crate::tcp::TcpLayer;
use crate::time::{Duration, Instant};
use crate::wire::ethernet::EthernetAddress;
use crate::wire::icmpv4::Icmpv4Repr;
use crate::wire::icmpv6::Icmpv6Repr;
use crate::wire::ipv6::Ipv6Cidr;
use crate::wire::{self, IpAddr, Ipv4Addr, Ipv6Addr};
use icmp::RateLimiter;
use neighbor::NeighborCache;
use reassembly::Reassembler;
use state::IfaceState;
use std::collections::VecDeque;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use udp::UdpTable;

/// How many received echo replies are kept for [`Stack::ping_recv`].
const ECHO_REPLY_QUEUE: usize = 64;
/// Rounds of output per poll when the transmit queue fills (each round ends in a send_batch).
const TX_ROUNDS: usize = 4;

/// Everything a stack needs to know about its interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackConfig {
    /// The medium to assume until the device reports its own in `poll`.
    pub medium: Medium,
    /// Our MAC address (Ethernet medium).
    pub mac: EthernetAddress,
    /// Our IPv4 address. `0.0.0.0` turns IPv4 off (an IPv6-only stack, `addrs6` naming its
    /// addresses): IPv4 packets are dropped (`ipv4_not_for_us`), ARP is not answered, and
    /// connects and sends to IPv4 peers fail with `NetworkUnreachable`.
    pub addr: Ipv4Addr,
    /// Subnet prefix length; in-subnet destinations are reached directly.
    pub prefix_len: u8,
    /// Next hop for everything off-subnet.
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU (the device's, if smaller, wins).
    pub mtu: usize,
    /// Keys TCP's ISNs (RFC 6528), ephemeral ports (RFC 6056) and SYN cookies; random by
    /// default ([`crate::tcp::Secret::fixed_for_tests`] for reproducible tests).
    pub tcp_secret: crate::tcp::Secret,
    /// How long a learned neighbour stays valid.
    pub arp_cache_ttl: Duration,
    /// Frames parked while their next hop resolves, in total.
    pub arp_pending_limit: usize,
    /// Minimum time between two requests for one address (RFC 1122 §2.3.2.1: 1 s).
    pub arp_retry_interval: Duration,
    /// Requests sent for one address before its parked frames are dropped.
    pub arp_max_retries: u32,
    /// Reassemble fragments (`true`) or drop them, counted (`false`).
    pub frag_reassembly: bool,
    /// Datagrams in reassembly at once, all sources together (4096). A new datagram beyond it
    /// evicts the oldest quarter rather than being refused. Linux has no such count (its
    /// bound is bytes only); this one bounds the work of the eviction sort.
    pub frag_max_datagrams: usize,
    /// Bytes reassembly may hold, per address family: buffer capacities plus a fixed
    /// per-datagram overhead (4 MiB, Linux's `net.ipv4.ipfrag_high_thresh` and
    /// `net.ipv6.ip6frag_high_thresh`). A fragment that would pass it first evicts datagrams,
    /// the oldest and least complete first, down to `frag_low_thresh`; a new datagram is
    /// never refused for lack of room (Linux refuses it, which is what lets a fragment flood
    /// lock legitimate senders out until its queues time out).
    pub frag_high_thresh: usize,
    /// Where an eviction at `frag_high_thresh` stops (3 MiB, Linux's
    /// `net.ipv4.ipfrag_low_thresh` and `net.ipv6.ip6frag_low_thresh`).
    pub frag_low_thresh: usize,
    /// Percent of `frag_high_thresh` one source may hold (25; at least one maximal datagram).
    /// A source is an IPv4 address or an IPv6 /64 (a host picks its own interface identifier,
    /// so per-/128 shares would give one attacker 2^64 of them). A source over its share
    /// evicts its own datagrams, never another source's. Linux has no per-source share.
    pub frag_source_share_percent: u8,
    /// Datagrams one source may have in reassembly at once (256); beyond it the source's
    /// oldest quarter is evicted. Linux has no per-source cap (its `ipfrag_max_dist`, 64,
    /// bounds how far apart in a source's packets one datagram's fragments may arrive).
    pub frag_source_max_queues: usize,
    /// Fragments one datagram may arrive in (64: a 64 KiB datagram fits in 64 fragments on
    /// any link with an MTU of 1044 or more, so every IPv6 link and every common IPv4 one);
    /// a datagram with more is discarded whole.
    pub frag_max_fragments: usize,
    /// Reassembly timeout from the first fragment (RFC 791; 30 s, Linux's
    /// `net.ipv4.ipfrag_time`).
    pub frag_timeout: Duration,
    /// TTL of packets we originate (RFC 1700 / Linux default 64).
    pub ttl: u8,
    /// Frames queued for the device per round; TCP output stops at this bound.
    pub tx_queue_limit: usize,
    /// Datagrams queued per UDP socket, per direction.
    pub udp_queue_limit: usize,
    /// UDP sockets at most.
    pub udp_max_sockets: usize,
    /// ICMP error rate limit: a bucket of `icmp_error_burst` tokens, one refilled per interval.
    pub icmp_error_burst: u32,
    /// Refill interval of the ICMP error bucket.
    pub icmp_error_interval: Duration,
    /// Idle packet buffers the pool keeps.
    pub pool_buffers: usize,
    /// Merge the TCP segments of one flow within a receive batch before TCP sees them
    /// (see [`crate::offload::gro`]).
    pub gro: bool,
    /// Let TCP build data segments of up to [`GSO_SEGS`] MSS (64 KiB at most), cut to the MTU
    /// at the device boundary (software GSO) or handed whole to a TSO device.
    pub gso: bool,
    /// The copy path: netfold's kernels with the checksum folded in (default), or the 2002
    /// baseline the benchmark's `--copy baseline` measures (see [`crate::mem::CopyMode`]).
    pub copy_mode: crate::mem::CopyMode,
    /// Total socket-buffer bytes (all TCP rings) that buffer auto-tuning may grow to; growth
    /// beyond it is refused and counted (`tcp::Stats::buffer_budget_refusals`), and above it
    /// connections that hold buffers without progress are reset
    /// ([`TcpLayer::set_buffer_budget`](crate::tcp::TcpLayer::set_buffer_budget)).
    pub tcp_buffer_budget: usize,
    /// Transparent mode (off by default): accept TCP segments and UDP datagrams to any unicast
    /// destination, not only to `addr`, for a transparent listener
    /// ([`crate::socket::TcpListener::bind_transparent`]) and a transparent UDP socket
    /// ([`crate::socket::UdpSocket::bind_transparent`]) that see the original destination and
    /// answer from it. This is Linux's IP_TRANSPARENT socket option with a TPROXY rule, what
    /// tun2socks-style tools behind a TUN need. ARP is unchanged: on Ethernet only our own
    /// address is answered, so foreign destinations reach us only when routed to our MAC.
    pub transparent: bool,
    /// IPv6 addresses with their prefix lengths (RFC 4291 §2.3); the prefixes are on the link
    /// (RFC 4861 §5.2). Empty (the default): IPv6 is off and IPv6 frames are dropped and
    /// counted as in an IPv4-only stack. With any address, on Ethernet the link-local address
    /// fe80::/64 from the MAC (RFC 4291 Appendix A, RFC 4862 §5.3) is added unless one is
    /// listed.
    pub addrs6: Vec<Ipv6Cidr>,
    /// The default router for off-link IPv6 destinations (its address on this link, usually
    /// link-local). None: only on-link destinations are reachable (RFC 4943).
    pub gateway6: Option<Ipv6Addr>,
    /// Hop limit of IPv6 packets we originate (Linux's default 64; a Router Advertisement may
    /// change it, RFC 4861 §6.3.4).
    pub hop_limit6: u8,
    /// DupAddrDetectTransmits (RFC 4862 §5.1): Neighbor Solicitations sent for each address
    /// before it is used; 0 turns Duplicate Address Detection off. Linux's default, 1.
    pub dad_transmits: u32,
    /// RetransTimer (RFC 4861 §10, 1 s): between Neighbor Solicitations, and how long DAD
    /// listens after its last one. Tests shorten it to make DAD quick.
    pub ndp_retrans_timer: Duration,
    /// BaseReachableTime (RFC 4861 §10, 30 s): how long a confirmed neighbour stays
    /// REACHABLE (randomised by 0.5-1.5, §6.3.2).
    pub ndp_reachable_time: Duration,
    /// IPv6 reassembly timeout (RFC 8200 §4.5: 60 s; Linux's `net.ipv6.ip6frag_time`). The
    /// other reassembly bounds are IPv4's (`frag_high_thresh`, `frag_low_thresh`,
    /// `frag_source_*`, `frag_max_*`), applied to IPv6 separately: each family holds at most
    /// `frag_high_thresh`, as in Linux.
    pub frag6_timeout: Duration,
}

impl StackConfig {
    /// The reassembler bounds of one family (IPv6: its timeout and the 65535-byte Payload
    /// Length; RFC 2675 forbids fragmenting a jumbogram).
    fn reassembly_limits(&self, v6: bool) -> reassembly::ReassemblyLimits {
        let base = reassembly::ReassemblyLimits::default();
        reassembly::ReassemblyLimits {
            high_thresh: self.frag_high_thresh,
            low_thresh: self.frag_low_thresh,
            source_share_percent: self.frag_source_share_percent,
            source_max_queues: self.frag_source_max_queues,
            max_queues: self.frag_max_datagrams,
            max_fragments: self.frag_max_fragments,
            timeout: if v6 {
                self.frag6_timeout
            } else {
                self.frag_timeout
            },
            max_payload: if v6 {
                wire::ipv6::MAX_PAYLOAD_LEN
            } else {
                base.max_payload
            },
        }
    }
}

/// Segments one GSO super-segment spans at most (44 x 1448 fills 64 KiB, as in Linux).
pub const GSO_SEGS: u32 = 44;

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            medium: Medium::Ethernet,
            mac: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            addr: Ipv4Addr::new(198, 18, 0, 1),
            prefix_len: 24,
            gateway: None,
            mtu: 1500,
            tcp_secret: crate::tcp::Secret::random(),
            arp_cache_ttl: Duration::from_secs(60),
            arp_pending_limit: 64,
            arp_retry_interval: Duration::from_secs(1),
            arp_max_retries: 3,
            frag_reassembly: true,
            frag_max_datagrams: 4096,
            frag_high_thresh: 4 << 20,
            frag_low_thresh: 3 << 20,
            frag_source_share_percent: 25,
            frag_source_max_queues: 256,
            frag_max_fragments: reassembly::MAX_FRAGMENTS,
            frag_timeout: Duration::from_secs(30),
            ttl: 64,
            tx_queue_limit: 256,
            udp_queue_limit: 64,
            udp_max_sockets: 1024,
            icmp_error_burst: 10,
            icmp_error_interval: Duration::from_millis(100),
            pool_buffers: 512,
            gro: true,
            gso: true,
            copy_mode: crate::mem::CopyMode::Kernels,
            tcp_buffer_budget: crate::tcp::buffer::DEFAULT_BUFFER_BUDGET,
            transparent: false,
            addrs6: Vec::new(),
            gateway6: None,
            hop_limit6: 64,
            dad_transmits: 1,
            ndp_retrans_timer: Duration::from_secs(1),
            ndp_reachable_time: Duration::from_secs(30),
            frag6_timeout: Duration::from_secs(60),
        }
    }
}

/// A received ICMP echo reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReply {
    /// Who answered.
    pub from: Ipv4Addr,
    /// Identifier of the request answered.
    pub ident: u16,
    /// Sequence number of the request answered.
    pub seq_no: u16,
    /// Bytes of echo data.
    pub len: usize,
    /// When it was received (the `now` of that poll).
    pub at: Instant,
}

/// A received ICMPv6 echo reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReplyV6 {
    /// Who answered.
    pub from: Ipv6Addr,
    /// Identifier of the request answered.
    pub ident: u16,
    /// Sequence number of the request answered.
    pub seq_no: u16,
    /// Bytes of echo data.
    pub len: usize,
    /// When it was received (the `now` of that poll).
    pub at: Instant,
}

/// Everything but the receive batch: the shared interface state and the protocols' own state.
/// The receive path runs as methods on it while the batch is borrowed immutably beside it.
#[derive(Debug)]
pub(crate) struct Inner {
    config: StackConfig,
    st: IfaceState,
    tcp: TcpLayer,
    udp: UdpTable,
    reasm: Reassembler,
    echo_replies: VecDeque<EchoReply>,
    icmp_limiter: RateLimiter,
    /// IPv6 fragment reassembly (RFC 8200 §4.5).
    reasm6: Reassembler<ipv6::FragKey, ipv6::FragHead>,
    echo6_replies: VecDeque<EchoReplyV6>,
    /// ICMPv6 error rate limit (RFC 4443 §2.4 (f)), a bucket of its own.
    icmpv6_limiter: RateLimiter,
    /// The `now` of the latest poll, for calls that take no time but read timed state (the
    /// path MTU a datagram is checked against in `udp_send_to`).
    last_now: Instant,
    /// The receive batch being parsed holds one frame: nothing to merge it with, so TCP takes
    /// it the way it does with GRO off (see `receive_tcp`).
    single_frame: bool,
    /// The frame of the receive batch being parsed: its index and the address range of its
    /// bytes, so that a TCP payload that lies in it can say where ([`crate::buf::FramePos`],
    /// for frame-level borrowing reads); `(0, 0, 0)` outside a batch.
    rx_frame: (u32, usize, usize),
    /// The batch being parsed is lent by the device ([`Device::recv_lent`]): no frame of it
    /// outlives the batch, so TCP is given no frame positions (it copies into the ring).
    lent: bool,
}

/// One interface's IPv4 host stack. See the module documentation.
#[derive(Debug)]
pub struct Stack {
    inner: Inner,
    /// The receive batch of the current poll (reused).
    rx: Vec<PacketBuf>,
    /// Output stopped at the transmit bound in the last poll: more work is due now.
    tx_backlog: bool,
    dev_poll_at: Option<Instant>,
}

impl Stack {
    /// A stack with `config`; the device's capabilities are applied at each poll.
    pub fn new(config: StackConfig) -> Stack {
        // An IPv4 packet is at most 64 KiB and at least 68 bytes must pass (RFC 791 §3.2).
        let mtu = config.mtu.clamp(68, wire::ipv4::MAX_PACKET_LEN);
        // Room for the link header with one VLAN tag on top of the IP MTU.
        let mut pool = Pool::new(mtu + wire::ethernet::VLAN_HEADER_LEN, config.pool_buffers);
        pool.prefill(config.pool_buffers.min(64));
        let st = IfaceState {
            medium: config.medium,
            mac: config.mac,
            addr: config.addr,
            prefix_len: config.prefix_len.min(32),
            gateway: config.gateway,
            mtu,
            csum_tx: true,
            tx_frags: crate::buf::Frags::new(),
            sg: false,
            csum_rx: true,
            tso: false,
            ttl: config.ttl,
            ident: 0,
            copy: config.copy_mode,
            pool,
            tx: Vec::with_capacity(config.tx_queue_limit.min(4096)),
            tx_limit: config.tx_queue_limit.max(1),
            neigh: NeighborCache::new(
                config.arp_cache_ttl,
                config.arp_pending_limit,
                config.arp_retry_interval,
                config.arp_max_retries,
            ),
            pmtu: pmtu::PathMtuCache::new(),
            c: Counters::default(),
            arp_due: Vec::with_capacity(neighbor::MAX_RESOLVING),
            v6: ipv6::Ipv6State::new(
                &config.addrs6,
                config.gateway6,
                config.hop_limit6,
                config.medium,
                config.mac,
                *config.tcp_secret.bytes(),
                config.ndp_retrans_timer,
                config.ndp_reachable_time,
                config.dad_transmits,
                config.arp_pending_limit,
            ),
        };
        let mut tcp = TcpLayer::new(config.tcp_secret);
        tcp.set_gso_segs(if config.gso { GSO_SEGS } else { 1 });
        tcp.set_copy_mode(config.copy_mode);
        // Before the first poll (a connect may come first) the configured MTU; each poll then
        // applies the device's and any Router Advertisement's (`apply_caps`).
        tcp.set_ipv6_link_mss(wire::tcp::ipv6_mss_for_mtu(mtu));
        tcp.set_buffer_budget(config.tcp_buffer_budget);
        // Borrowing reads may hold at most half the pool out of it (`tcp/frames.rs`).
        tcp.set_frame_budget(config.pool_buffers / 2);
        let inner = Inner {
            tcp,
            udp: UdpTable::new(config.udp_queue_limit, config.udp_max_sockets),
            reasm: Reassembler::new(config.reassembly_limits(false)),
            echo_replies: VecDeque::with_capacity(ECHO_REPLY_QUEUE),
            icmp_limiter: RateLimiter::new(config.icmp_error_burst, config.icmp_error_interval),
            reasm6: Reassembler::new(config.reassembly_limits(true)),
            echo6_replies: VecDeque::new(),
            icmpv6_limiter: RateLimiter::new(config.icmp_error_burst, config.icmp_error_interval),
            last_now: Instant::ZERO,
            single_frame: false,
            rx_frame: (0, 0, 0),
            lent: false,
            st,
            config,
        };
        Stack {
            inner,
            rx: Vec::with_capacity(64),
            tx_backlog: false,
            dev_poll_at: None,
        }
    }

    /// The configuration given to `new`.
    pub fn config(&self) -> &StackConfig {
        &self.inner.config
    }
    /// The TCP layer (connections, listeners, statistics).
    pub fn tcp(&self) -> &TcpLayer {
        &self.inner.tcp
    }
    /// The TCP layer, for connect/listen/send/recv.
    pub fn tcp_mut(&mut self) -> &mut TcpLayer {
        &mut self.inner.tcp
    }

    /// The IP MTU in effect (configured, lowered to the device's after the first poll).
    pub fn mtu(&self) -> usize {
        self.inner.st.mtu
    }

    /// The MSS for TCP connections to `peer` on this interface: the IP MTU less the IP and TCP
    /// fixed headers, 40 bytes for IPv4 (RFC 9293 §3.7.1: "MSS = MTU - 40" for IPv4 without
    /// options; also for a v4-mapped peer, which is IPv4 on the wire) and 60 for IPv6 (RFC
    /// 8200 §8.3, [`wire::tcp::ipv6_mss_for_mtu`]). `tcp::Config::mss` is one value for both
    /// families, as Linux's: give it the IPv4 figure before connect/listen; IPv6 connections
    /// use `min(tcp::Config::mss, the IPv6 figure)` (Linux: the route's advmss clamped by the
    /// user's TCP_MAXSEG).
    pub fn tcp_mss(&self, peer: impl Into<IpAddr>) -> u16 {
        let overhead = match peer.into() {
            IpAddr::V6(a) if a.to_ipv4_mapped().is_none() => wire::tcp::IPV6_MSS_OVERHEAD,
            _ => wire::tcp::IPV4_MSS_OVERHEAD,
        };
        u16::try_from(self.inner.st.mtu.saturating_sub(overhead)).unwrap_or(u16::MAX)
    }

    /// The IPv6 source address for a packet to `dst`, if the interface has one (see
    /// `IfaceState::ipv6_source`: none until the IPv6 network layer configures addresses).
    pub fn ipv6_source(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        self.inner.st.ipv6_source(dst)
    }

    /// `a` is one of the interface's IPv6 addresses.
    pub fn has_ipv6_addr(&self, a: Ipv6Addr) -> bool {
        self.inner.st.is_own_ipv6(a)
    }

    /// The local address for a TCP connection to `remote` (port 0: the engine picks an
    /// ephemeral port): our IPv4 address for an IPv4 peer (v4-mapped when `remote` is, so the
    /// connection reports mapped addresses), our IPv6 source for an IPv6 peer. An IPv6 peer
    /// without an IPv6 source is `NetworkUnreachable` at once, counted in `ipv6_no_source`
    /// (Linux: ENETUNREACH without a route), so a connect never waits for a SYN that cannot
    /// leave.
    pub fn tcp_local_for(&mut self, remote: SocketAddr) -> Result<SocketAddr, crate::tcp::Error> {
        let v4_off = self.inner.config.addr.is_unspecified();
        match remote {
            SocketAddr::V4(_) if v4_off => Err(crate::tcp::Error::NetworkUnreachable),
            SocketAddr::V4(_) => Ok(SocketAddrV4::new(self.inner.config.addr, 0).into()),
            SocketAddr::V6(r) => match r.ip().to_ipv4_mapped() {
                Some(_) if v4_off => Err(crate::tcp::Error::NetworkUnreachable),
                Some(_) => {
                    Ok(SocketAddrV6::new(self.inner.config.addr.to_ipv6_mapped(), 0, 0, 0).into())
                }
                None => match self.inner.st.ipv6_source(*r.ip()) {
                    Some(src) => Ok(SocketAddrV6::new(src, 0, 0, 0).into()),
                    None => {
                        self.inner.st.c.ipv6_no_source += 1;
                        Err(crate::tcp::Error::NetworkUnreachable)
                    }
                },
            },
        }
    }

    /// Idle buffers in the packet pool now.
    pub fn pool_idle(&self) -> usize {
        self.inner.st.pool.idle()
    }

    /// The memory IPv4 reassembly holds now and held at most (bounded by
    /// `StackConfig::frag_high_thresh`).
    pub fn reassembly_memory(&self) -> reassembly::ReassemblyMemory {
        self.inner.reasm.memory()
    }

    /// The memory IPv6 reassembly holds now and held at most (bounded by
    /// `StackConfig::frag_high_thresh`, separately from IPv4's).
    pub fn reassembly6_memory(&self) -> reassembly::ReassemblyMemory {
        self.inner.reasm6.memory()
    }

    /// A snapshot of all counters, TCP and buffer-pool statistics included.
    pub fn counters(&self) -> Counters {
        let mut c = self.inner.st.c;
        c.tcp = self.inner.tcp.stats();
        c.pool = self.inner.st.pool.stats();
        c
    }

    /// The MAC cached for `ip`, if any and still fresh at `now`.
    pub fn neighbor(&self, now: Instant, ip: Ipv4Addr) -> Option<EthernetAddress> {
        self.inner.st.neigh.lookup(now, ip)
    }

    /// The path MTU to `dst` as of `now`. IPv4: the interface MTU, lowered by what ICMP
    /// "fragmentation needed" reported for that destination (RFC 1191). IPv6 (RFC 8201): the
    /// link MTU, lowered by what ICMPv6 Packet Too Big reported, not below 1280. UDP and ICMP
    /// datagrams larger than it are fragmented (RFC 791 §3.2, RFC 8200 §4.5).
    pub fn path_mtu(&self, now: Instant, dst: impl Into<IpAddr>) -> usize {
        let st = &self.inner.st;
        match dst.into() {
            IpAddr::V4(d) => st.pmtu.get(now, d, st.mtu),
            IpAddr::V6(d) => st.ipv6_path_mtu(now, d),
        }
    }

    /// Frames waiting for an ARP resolution.
    pub fn arp_pending(&self) -> usize {
        self.inner.st.neigh.pending_len()
    }

    fn apply_caps(&mut self, dev: &dyn Device) -> crate::phy::DeviceCaps {
        let caps = dev.caps();
        let st = &mut self.inner.st;
        st.medium = caps.medium;
        st.mtu = self.inner.config.mtu.min(caps.mtu).clamp(68, 65535);
        st.csum_tx = caps.checksum.tx;
        st.tso = caps.tso;
        st.sg = dev.scatter_gather();
        st.csum_rx = caps.checksum.rx;
        if st.v6.enabled {
            // The bound on IPv6 connections' MSS (MTU - 60, RFC 8200 §8.3), after any
            // Router Advertisement's MTU: `tcp::Config::mss` is one user MSS for both
            // families, as Linux's.
            let mss = wire::tcp::ipv6_mss_for_mtu(st.ipv6_link_mtu());
            self.inner.tcp.set_ipv6_link_mss(mss);
        }
        caps
    }

    /// One round of work; returns whether anything was received or sent.
    pub fn poll(&mut self, now: Instant, dev: &mut dyn Device) -> bool {
        let burst = self.apply_caps(dev).max_burst.max(1);
        // Frame memory the device sends from in place, if it lends any: what timers and
        // received segments make (ACKs, replies) is built there too.
        dev.tx_lend(&mut self.inner.st.pool);
        self.inner.timers(now);
        // Buffers the application released (borrowing reads) go back to the pool first.
        self.inner.tcp.collect_released(&mut self.inner.st.pool);

        let Stack { inner, rx, .. } = self;
        // A device that lends its frames (AF_XDP) has them parsed where they arrived, batch
        // by batch, and takes them back after each: nothing is copied into pool buffers, and
        // no frame outlives the call (the frame position stays unset, so TCP copies payload
        // into its ring instead of keeping the frame).
        let lent = dev.recv_lent(now, burst, &mut |frames: &[&[u8]]| {
            let n = frames.len();
            if n == 0 {
                return;
            }
            inner.st.c.rx_batches += 1;
            inner.st.c.frames_per_poll[counters::bucket(n)] += 1;
            inner.single_frame = n == 1;
            inner.lent = true;
            let mut gro = Gro::new();
            for f in frames {
                inner.receive_frame(now, f, Csum::Unverified, &mut gro);
            }
            inner.flush_gro(now, &mut gro);
            inner.lent = false;
        });
        if let Some(n) = lent {
            inner.st.c.polls += 1;
            return self.transmit(now, dev, n > 0);
        }
        dev.recv_batch(now, &mut inner.st.pool, rx, burst);
        let did = !rx.is_empty();
        inner.st.c.polls += 1;
        // An empty batch (most polls of request/response traffic) has no frame to parse, no
        // GRO table to set up or flush, and no frame for a connection to adopt. That work is
        // out of line, so that an empty poll does not pay for the registers and stack frame
        // the batch loop needs.
        inner.single_frame = false;
        if did {
            self.receive_batch(now);
        }
        self.transmit(now, dev, did)
    }

    /// The receiving half of [`Stack::poll`] for a non-empty batch in `rx`: parses every
    /// frame, flushes GRO, lets connections adopt frames, and returns the buffers to the pool.
    #[inline(never)]
    fn receive_batch(&mut self, now: Instant) {
        let Stack { inner, rx, .. } = self;
        let n = rx.len();
        inner.st.c.rx_batches += 1;
        inner.st.c.frames_per_poll[counters::bucket(n)] += 1;
        inner.single_frame = n == 1;
        // The batch is parsed in place, immutable, beside the mutable inner state; GRO
        // holds segments borrowed from it until the batch ends.
        let mut gro = Gro::new();
        for (i, buf) in rx.iter().enumerate() {
            let f = buf.as_slice();
            let start = f.as_ptr() as usize;
            inner.rx_frame = (i as u32, start, start + f.len());
            inner.receive_frame(now, f, buf.csum(), &mut gro);
        }
        inner.rx_frame = (0, 0, 0);
        inner.flush_gro(now, &mut gro);
        // Frame-level borrowing reads (`tcp/frames.rs`): connections that kept payload in
        // frames of the batch (placed by `FramePos`) take those buffers now.
        inner.tcp.adopt_frames(rx);
        // Last frame first (the pool is a stack either way); `pop` leaves no drained
        // remainder to drop.
        while let Some(buf) = rx.pop() {
            if !buf.is_placeholder() {
                inner.st.pool.put(buf);
            }
        }
    }

    /// The sending half of [`Stack::poll`]: output rounds to `dev`; returns `did` or whether
    /// anything was sent.
    fn transmit(&mut self, now: Instant, dev: &mut dyn Device, mut did: bool) -> bool {
        let mut stopped = false;
        for round in 0..TX_ROUNDS {
            if round > 0 {
                // More lent frame memory, for what the previous round used (`poll` lent the
                // first).
                dev.tx_lend(&mut self.inner.st.pool);
            }
            stopped = self.inner.output(now);
            if !self.inner.st.tx.is_empty() {
                did = true;
                let st = &mut self.inner.st;
                st.c.tx_batches += 1;
                if st.tx_frags.is_empty() {
                    dev.send_batch(now, &mut st.pool, &mut st.tx);
                } else {
                    dev.send_batch_sg(now, &mut st.pool, &mut st.tx, &mut st.tx_frags);
                    st.tx_frags.clear();
                }
                // The device drains what it sends; clearing an empty batch would still
                // call the buffers' drop code.
                if !st.tx.is_empty() {
                    st.tx.clear();
                }
            }
            if !stopped {
                break;
            }
        }
        self.tx_backlog = stopped;
        self.dev_poll_at = dev.poll_at();
        did
    }

    /// When `poll` should next run if nothing arrives: the earliest of TCP timers, ARP retries,
    /// reassembly timeouts and the device's own timer (as of the last poll); `now` if work is
    /// already waiting.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        let inner = &self.inner;
        if self.tx_backlog
            || inner.udp.iter().any(|s| !s.tx.is_empty())
            || inner.tcp.released_pending()
        {
            return Some(now);
        }
        [
            inner.tcp.poll_at(),
            inner.st.neigh.poll_at(),
            inner.reasm.poll_at(),
            inner.st.v6.neigh.poll_at(),
            inner.st.v6.dad_poll_at(),
            inner.reasm6.poll_at(),
            self.dev_poll_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    // ---- ICMP echo ----

    /// Sends an ICMP echo request to `dst`: ICMP (RFC 792) to an IPv4 address, ICMPv6 (RFC
    /// 4443 §4.1) to an IPv6 one, from the source address RFC 6724 picks. Replies arrive in
    /// [`Stack::ping_recv`] and [`Stack::ping6_recv`]. Over IPv6, `NoRoute` when IPv6 is off,
    /// no address is usable yet (DAD still running) or `dst` is off-link without a default
    /// router.
    pub fn ping(
        &mut self,
        now: Instant,
        dst: impl Into<IpAddr>,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> Result<(), TxError> {
        match dst.into() {
            IpAddr::V4(dst) => {
                let repr = Icmpv4Repr::EchoRequest {
                    ident,
                    seq_no,
                    data,
                };
                self.inner.send_icmp(now, dst, &repr)
            }
            IpAddr::V6(dst) => {
                let Some(src) = self.inner.st.ipv6_source_for(dst) else {
                    self.inner.st.c.ipv6_no_source += 1;
                    return Err(TxError::NoRoute);
                };
                let repr = Icmpv6Repr::EchoRequest {
                    ident,
                    seq_no,
                    data,
                };
                self.inner.send_icmpv6(now, src, dst, &repr)
            }
        }
    }

    /// The oldest echo reply received and not yet read (at most 64 are kept).
    pub fn ping_recv(&mut self) -> Option<EchoReply> {
        self.inner.echo_replies.pop_front()
    }

    // ---- IPv6 ----

    /// Our IPv6 addresses with their prefixes and states (the link-local one first when it
    /// was added automatically); empty when IPv6 is off.
    pub fn ipv6_addrs(&self) -> impl Iterator<Item = (Ipv6Cidr, AddrState)> + '_ {
        self.inner.st.v6.addrs.iter().map(|e| (e.cidr, e.state))
    }

    /// The link-layer address cached for the IPv6 neighbour `ip`, in any reachability state
    /// but INCOMPLETE (RFC 4861 §7.3.2).
    pub fn neighbor6(&self, now: Instant, ip: Ipv6Addr) -> Option<EthernetAddress> {
        self.inner.st.v6.neigh.get(now, ip).map(|e| e.0)
    }

    /// Frames waiting for a Neighbor Discovery resolution.
    pub fn ndp_pending(&self) -> usize {
        self.inner.st.v6.neigh.pending_len()
    }

    /// The oldest ICMPv6 echo reply received and not yet read (at most 64 are kept).
    pub fn ping6_recv(&mut self) -> Option<EchoReplyV6> {
        self.inner.echo6_replies.pop_front()
    }

    // ---- UDP ----

    /// Binds a UDP socket. Port 0 picks an ephemeral port (RFC 6335 §6, see
    /// [`udp::EPHEMERAL_PORTS`]). The address must be ours or unspecified (any); a wildcard
    /// socket also receives broadcasts. IPv4 or IPv6: `[::]:p` is dual-stack (IPv4 peers
    /// appear v4-mapped), see [`udp`] and [`Stack::udp_bind_with`] for IPV6_V6ONLY.
    pub fn udp_bind(&mut self, local: impl Into<SocketAddr>) -> Result<UdpHandle, UdpError> {
        self.inner.udp_bind(local.into(), UdpBindOptions::default())
    }

    /// [`Stack::udp_bind`] with options fixed at bind time (IPV6_V6ONLY).
    pub fn udp_bind_with(
        &mut self,
        local: impl Into<SocketAddr>,
        opts: UdpBindOptions,
    ) -> Result<UdpHandle, UdpError> {
        self.inner.udp_bind(local.into(), opts)
    }

    /// The bound local address (with the ephemeral port filled in; v4-mapped for an IPv6
    /// socket bound to an IPv4 address).
    pub fn udp_local_addr(&self, h: UdpHandle) -> Result<SocketAddr, UdpError> {
        self.inner.udp_local_addr(h)
    }

    /// Queues one datagram for the next poll. `WouldBlock` when the socket's send queue is
    /// full; `MessageTooLarge` beyond 65507 bytes (what one IPv4 datagram carries; 65527 over
    /// IPv6). A datagram larger than the path MTU leaves in fragments. `to` may be v4-mapped
    /// (from a dual-stack socket); an IPv6 `to` without an IPv6 source address is
    /// `NetworkUnreachable`.
    pub fn udp_send_to(
        &mut self,
        h: UdpHandle,
        data: &[u8],
        to: impl Into<SocketAddr>,
    ) -> Result<(), UdpError> {
        let now = self.inner.last_now;
        self.inner.udp_send_to(now, h, data, to.into(), None)
    }

    /// Binds the transparent UDP socket (transparent mode only, else `AddrNotAvailable`; one
    /// per stack, else `AddrInUse`): it receives datagrams to any unicast address and port
    /// that no other socket is bound to, each with its original destination
    /// ([`Stack::udp_recv_from_to`]), and sends from any source
    /// ([`Stack::udp_send_from_to`]). Linux: IP_TRANSPARENT + IP_RECVORIGDSTADDR behind a
    /// TPROXY rule.
    pub fn udp_bind_transparent(&mut self) -> Result<UdpHandle, UdpError> {
        if !self.inner.config.transparent {
            return Err(UdpError::AddrNotAvailable);
        }
        self.inner.udp.bind_transparent()
    }

    /// `udp_send_to` from the source `from` (any unicast address and port): a transparent
    /// socket's reply from the original destination. `AddrNotAvailable` on a socket that is
    /// not transparent.
    pub fn udp_send_from_to(
        &mut self,
        h: UdpHandle,
        data: &[u8],
        from: impl Into<SocketAddr>,
        to: impl Into<SocketAddr>,
    ) -> Result<(), UdpError> {
        let now = self.inner.last_now;
        self.inner
            .udp_send_to(now, h, data, to.into(), Some(from.into()))
    }

    /// `udp_recv_from` that also returns the address the datagram was sent to (its original
    /// destination on a transparent socket; IP_RECVORIGDSTADDR).
    pub fn udp_recv_from_to(
        &mut self,
        h: UdpHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddr, SocketAddr), UdpError> {
        self.inner.udp_recv_from(h, buf)
    }

    /// Takes the oldest received datagram: copies up to `buf.len()` bytes (the rest is
    /// discarded, as recvfrom does) and returns the datagram length copied and its sender.
    pub fn udp_recv_from(
        &mut self,
        h: UdpHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddr), UdpError> {
        let (n, from, _) = self.inner.udp_recv_from(h, buf)?;
        Ok((n, from))
    }

    /// Readiness of a UDP socket without taking anything: datagrams waiting to be read, and
    /// free places in its send queue (0 means `udp_send_to` would block).
    pub fn udp_queues(&self, h: UdpHandle) -> Result<(usize, usize), UdpError> {
        let sock = self.inner.udp.get(h)?;
        Ok((
            sock.rx.len(),
            self.inner.udp.queue_limit().saturating_sub(sock.tx.len()),
        ))
    }

    /// connect(2) on a datagram socket: `Some(peer)` makes ICMP errors about datagrams to
    /// `peer` (port unreachable, an unresolved next hop) reach the socket, reported once by
    /// its next send or receive or by [`Stack::udp_take_error`]; `None` disconnects. Sending
    /// to other destinations stays possible (the C API's connected send uses the peer).
    pub fn udp_connect(&mut self, h: UdpHandle, peer: Option<SocketAddr>) -> Result<(), UdpError> {
        self.inner.udp_connect(h, peer)
    }

    /// IP_MTU_DISCOVER for a UDP socket: whether its datagrams carry DF and which are
    /// refused instead of fragmented (see [`PmtuDisc`]; the default is Linux's, `Want`).
    pub fn udp_set_pmtu_disc(&mut self, h: UdpHandle, mode: PmtuDisc) -> Result<(), UdpError> {
        self.inner.udp_set_pmtu_disc(h, mode)
    }

    /// The socket's IP_MTU_DISCOVER mode.
    pub fn udp_pmtu_disc(&self, h: UdpHandle) -> Result<PmtuDisc, UdpError> {
        Ok(self.inner.udp.get(h)?.pmtu_disc)
    }

    /// The socket's pending asynchronous error (SO_ERROR), cleared by reading it.
    pub fn udp_take_error(&mut self, h: UdpHandle) -> Result<Option<UdpError>, UdpError> {
        self.inner.udp_take_error(h)
    }

    /// Closes the socket; queued datagrams are discarded. Stale handles are ignored.
    pub fn udp_close(&mut self, h: UdpHandle) {
        self.inner.udp.close(h, &mut self.inner.st.pool);
    }
}

impl Inner {
    /// ARP retries and give-ups (which fail the sockets waiting on that next hop),
    /// reassembly timeouts.
    fn timers(&mut self, now: Instant) {
        self.last_now = now;
        for hop in self.st.neighbor_timers(now) {
            // Everything routed through the silent next hop is unreachable.
            let st = &self.st;
            self.tcp.host_unreachable(now, |dst| match dst {
                IpAddr::V4(d) => st.next_hop(d) == Some(hop),
                IpAddr::V6(_) => false,
            });
            self.udp_host_unreachable(hop);
        }
        let expired = self.reasm.expire(now);
        self.st.c.frag_timeouts += expired as u64;
        self.st.c.frag_dropped += expired as u64;
        if self.st.v6.enabled {
            // Both gated here: this runs on every poll, and after DAD with no neighbour
            // timer due (the steady state) neither has work.
            if !self.st.v6.dad_done {
                self.st.dad_timers(now);
            }
            let hops = if self.st.v6.neigh.timers_due(now) {
                self.st.ndp_timers(now)
            } else {
                Vec::new()
            };
            for hop in hops {
                // As for ARP above: TCP connections still opening through the neighbour
                // fail with HostUnreachable (Linux: the unresolved SYN's local Address
                // Unreachable is fatal in SYN-SENT), connected UDP sockets hear it once.
                let v6 = &self.st.v6;
                self.tcp.host_unreachable(now, |dst| match dst {
                    IpAddr::V6(d) => v6.next_hop(d) == Some(hop),
                    IpAddr::V4(_) => false,
                });
                self.udp_host_unreachable6(hop);
            }
            self.expire_fragments6(now);
        }
    }

    /// One round of output: TCP segments, then queued UDP datagrams, into the transmit queue.
    /// Returns true if it stopped at the transmit bound with work left.
    fn output(&mut self, now: Instant) -> bool {
        let stopped = self.tcp_output(now);
        self.flush_udp(now) | stopped
    }
}
