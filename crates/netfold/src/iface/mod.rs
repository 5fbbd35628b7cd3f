//! The `Stack`: one network interface's IPv4 host stack, sans-IO.
//!
//! [`Stack::poll`] does one round of work against a [`Device`]: it receives a batch of frames
//! (seed 000 §4.2: work in bunches), runs them through Ethernet/ARP/IPv4/ICMP/UDP and hands
//! verified TCP segments to the [`TcpLayer`]; then it collects everything due for transmission
//! (TCP segments, UDP datagrams, ARP, ICMP) into one batch and gives it to the device. Packet
//! buffers come from, and go back to, one [`Pool`] owned by the stack; the receive and transmit
//! vectors are reused, so steady-state traffic makes no per-packet heap allocation (UDP
//! datagrams are queued in pooled buffers too).
//!
//! Decisions worth knowing:
//! - Fragments: reassembled when `StackConfig::frag_reassembly` (bounded, 30 s timeout,
//!   overlaps discard the datagram, see [`reassembly`]); otherwise dropped and counted. We never
//!   fragment on transmit (DF set, RFC 1191 path MTU discovery); TCP segments are cut at the
//!   MTU instead (software GSO), oversized UDP/ICMP is refused.
//! - ARP: RFC 826 merge rule, one request per second per address, bounded pending queue.
//! - No VLANs (priority-tagged frames, VLAN id 0, are accepted as untagged), no multicast, no
//!   forwarding, no loopback to our own address, no IP options on transmit.
//! - GRO (`StackConfig::gro`, see [`gro`]): the TCP segments of a flow within one receive
//!   batch reach TCP as one merged segment; its checksum check is folded into the merging copy.
//! - Checksums follow the device's `ChecksumCaps`; on transmit the TCP and UDP payload sums are
//!   taken while the payload is copied into the packet buffer, on UDP receive while it is copied
//!   into the socket queue.
#![warn(missing_docs)]

pub mod counters;
mod egress;
pub mod gro;
mod ingress;
mod neighbor;
pub mod reassembly;
mod tcp_wire;
pub mod udp;

pub use counters::Counters;
pub use egress::TxError;
pub use udp::{UdpError, UdpHandle};

use crate::buf::{PacketBuf, Pool};
use crate::phy::{Device, Medium};
use crate::tcp::TcpLayer;
use crate::time::{Duration, Instant};
use crate::wire::ethernet::EthernetAddress;
use crate::wire::icmpv4::Icmpv4Repr;
use crate::wire::ipv4::{checksum_combine, pseudo_header_sum};
use crate::wire::{IpProtocol, Ipv4Addr};
use egress::Egress;
use neighbor::NeighborCache;
use reassembly::Reassembler;
use std::collections::VecDeque;
use std::net::SocketAddrV4;
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
    /// Our IPv4 address.
    pub addr: Ipv4Addr,
    /// Subnet prefix length; in-subnet destinations are reached directly.
    pub prefix_len: u8,
    /// Next hop for everything off-subnet.
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU (the device's, if smaller, wins).
    pub mtu: usize,
    /// Keys the TCP ISN function (RFC 6528).
    pub tcp_secret: [u8; 16],
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
    /// Datagrams in reassembly at once.
    pub frag_max_datagrams: usize,
    /// Bytes held by reassembly in total.
    pub frag_max_bytes: usize,
    /// Reassembly timeout from the first fragment (RFC 791; Linux uses 30 s).
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
    /// (see [`gro`]).
    pub gro: bool,
    /// Let TCP build data segments of up to [`GSO_SEGS`] MSS (64 KiB at most), cut to the MTU
    /// at the device boundary (software GSO) or handed whole to a TSO device.
    pub gso: bool,
    /// The copy path: netfold's kernels with the checksum folded in (default), or the 2002
    /// baseline the benchmark's `--copy baseline` measures (see [`crate::mem::CopyMode`]).
    pub copy_mode: crate::mem::CopyMode,
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
            tcp_secret: [0; 16],
            arp_cache_ttl: Duration::from_secs(60),
            arp_pending_limit: 64,
            arp_retry_interval: Duration::from_secs(1),
            arp_max_retries: 3,
            frag_reassembly: true,
            frag_max_datagrams: 16,
            frag_max_bytes: 256 * 1024,
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

/// Token bucket for ICMP errors (RFC 1812 §4.3.2.8).
#[derive(Debug)]
struct RateLimiter {
    tokens: u32,
    burst: u32,
    interval: Duration,
    last: Instant,
}

impl RateLimiter {
    fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_since(self.last).total_micros();
        let per = self.interval.total_micros().max(1);
        let add = elapsed / per;
        if add > 0 {
            let add = u32::try_from(add).unwrap_or(u32::MAX);
            self.tokens = self.tokens.saturating_add(add).min(self.burst);
            self.last += Duration::from_micros(per.saturating_mul(u64::from(add)));
        }
        if self.tokens > 0 {
            self.tokens -= 1;
            true
        } else {
            false
        }
    }
}

/// One interface's IPv4 host stack. See the module documentation.
#[derive(Debug)]
pub struct Stack {
    config: StackConfig,
    eg: Egress,
    csum_rx: bool,
    tcp: TcpLayer,
    udp: UdpTable,
    reasm: Reassembler,
    rx: Vec<PacketBuf>,
    gro: gro::Gro,
    echo_replies: VecDeque<EchoReply>,
    icmp_limiter: RateLimiter,
    /// Index in `rx` of the frame being parsed (GRO remembers where a held segment is).
    cur_frame: usize,
    /// Output stopped at the transmit bound in the last poll: more work is due now.
    tx_backlog: bool,
    dev_poll_at: Option<Instant>,
}

impl Stack {
    /// A stack with `config`; the device's capabilities are applied at each poll.
    pub fn new(config: StackConfig) -> Stack {
        // An IPv4 packet is at most 64 KiB and at least 68 bytes must pass (RFC 791 §3.2).
        let mtu = config.mtu.clamp(68, 65535);
        let mut pool = Pool::new(mtu + 18, config.pool_buffers);
        pool.prefill(config.pool_buffers.min(64));
        let eg = Egress {
            medium: config.medium,
            mac: config.mac,
            addr: config.addr,
            prefix_len: config.prefix_len.min(32),
            gateway: config.gateway,
            mtu,
            csum_tx: true,
            tso: false,
            ttl: config.ttl,
            ident: 0,
            pool,
            tx: Vec::with_capacity(config.tx_queue_limit.min(4096)),
            tx_limit: config.tx_queue_limit.max(1),
            neigh: NeighborCache::new(
                config.arp_cache_ttl,
                config.arp_pending_limit,
                config.arp_retry_interval,
                config.arp_max_retries,
            ),
            c: Counters::default(),
            arp_due: Vec::with_capacity(neighbor::MAX_RESOLVING),
        };
        let mut tcp = TcpLayer::new(config.tcp_secret);
        tcp.set_gso_segs(if config.gso { GSO_SEGS } else { 1 });
        Stack {
            tcp,
            udp: UdpTable::new(config.udp_queue_limit, config.udp_max_sockets),
            reasm: Reassembler::new(
                config.frag_max_datagrams,
                config.frag_max_bytes,
                config.frag_timeout,
            ),
            rx: Vec::with_capacity(64),
            gro: gro::Gro::new(),
            echo_replies: VecDeque::with_capacity(ECHO_REPLY_QUEUE),
            icmp_limiter: RateLimiter {
                tokens: config.icmp_error_burst,
                burst: config.icmp_error_burst,
                interval: config.icmp_error_interval,
                last: Instant::ZERO,
            },
            csum_rx: true,
            cur_frame: 0,
            tx_backlog: false,
            dev_poll_at: None,
            eg,
            config,
        }
    }

    /// The configuration given to `new`.
    pub fn config(&self) -> &StackConfig {
        &self.config
    }
    /// The TCP layer (connections, listeners, statistics).
    pub fn tcp(&self) -> &TcpLayer {
        &self.tcp
    }
    /// The TCP layer, for connect/listen/send/recv.
    pub fn tcp_mut(&mut self) -> &mut TcpLayer {
        &mut self.tcp
    }

    /// The IP MTU in effect (configured, lowered to the device's after the first poll).
    pub fn mtu(&self) -> usize {
        self.eg.mtu
    }

    /// The MSS for TCP connections on this interface: the IP MTU less the IPv4 and TCP fixed
    /// headers (RFC 9293 §3.7.1: "MSS = MTU - 40" for IPv4 without options). Put it in
    /// `tcp::Config::mss` before connect/listen.
    pub fn tcp_mss(&self) -> u16 {
        u16::try_from(self.eg.mtu.saturating_sub(40)).unwrap_or(u16::MAX)
    }

    /// A snapshot of all counters, TCP and buffer-pool statistics included.
    pub fn counters(&self) -> Counters {
        let mut c = self.eg.c;
        c.tcp = self.tcp.stats();
        c.pool = self.eg.pool.stats();
        c
    }

    /// The MAC cached for `ip`, if any and still fresh at `now`.
    pub fn neighbor(&self, now: Instant, ip: Ipv4Addr) -> Option<EthernetAddress> {
        self.eg.neigh.lookup(now, ip)
    }

    /// Frames waiting for an ARP resolution.
    pub fn arp_pending(&self) -> usize {
        self.eg.neigh.pending_len()
    }

    fn apply_caps(&mut self, dev: &dyn Device) -> crate::phy::DeviceCaps {
        let caps = dev.caps();
        self.eg.medium = caps.medium;
        self.eg.mtu = self.config.mtu.min(caps.mtu).clamp(68, 65535);
        self.eg.csum_tx = caps.checksum.tx;
        self.eg.tso = caps.tso;
        self.csum_rx = caps.checksum.rx;
        caps
    }

    /// One round of work; returns whether anything was received or sent.
    pub fn poll(&mut self, now: Instant, dev: &mut dyn Device) -> bool {
        let burst = self.apply_caps(dev).max_burst.max(1);
        self.timers(now);

        dev.recv_batch(now, &mut self.eg.pool, &mut self.rx, burst);
        let n = self.rx.len();
        let mut did = n > 0;
        self.eg.c.polls += 1;
        self.eg.c.rx_batches += u64::from(did);
        if did {
            self.eg.c.frames_per_poll[counters::bucket(n)] += 1;
        }
        // Each frame is taken out of the batch while it is parsed and put back after, so GRO
        // can keep referring to earlier frames of the batch (a held train of one segment
        // stays in its frame until the flush at the end of the batch).
        for i in 0..n {
            let buf = core::mem::take(&mut self.rx[i]);
            self.cur_frame = i;
            self.receive_frame(now, buf.as_slice());
            self.rx[i] = buf;
        }
        let mut sink = gro::Sink {
            now,
            frames: &self.rx,
            cur: (usize::MAX, 0, &[]),
            tcp: &mut self.tcp,
            c: &mut self.eg.c,
            verify: self.csum_rx,
        };
        self.gro.flush_all(&mut sink);
        for buf in self.rx.drain(..) {
            self.eg.pool.put(buf);
        }

        let mut stopped = false;
        for _ in 0..TX_ROUNDS {
            stopped = false;
            let Stack { tcp, eg, .. } = self;
            tcp.output(now, &mut |seg| {
                let ok = eg.emit_tcp(now, seg);
                stopped |= !ok;
                ok
            });
            stopped |= self.flush_udp(now);
            if !self.eg.tx.is_empty() {
                did = true;
                self.eg.c.tx_batches += 1;
                dev.send_batch(now, &mut self.eg.pool, &mut self.eg.tx);
                self.eg.tx.clear();
            }
            if !stopped {
                break;
            }
        }
        self.tx_backlog = stopped;
        self.dev_poll_at = dev.poll_at();
        did
    }

    /// ARP retries and give-ups, reassembly timeouts.
    fn timers(&mut self, now: Instant) {
        self.eg.neighbor_timers(now);
        let expired = self.reasm.expire(now);
        self.eg.c.frag_timeouts += expired as u64;
        self.eg.c.frag_dropped += expired as u64;
    }

    /// When `poll` should next run if nothing arrives: the earliest of TCP timers, ARP retries,
    /// reassembly timeouts and the device's own timer (as of the last poll); `now` if work is
    /// already waiting.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        if self.tx_backlog || self.udp.iter().any(|s| !s.tx.is_empty()) {
            return Some(now);
        }
        [
            self.tcp.poll_at(),
            self.eg.neigh.poll_at(),
            self.reasm.poll_at(),
            self.dev_poll_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    // ---- ICMP echo ----

    /// Sends an ICMP echo request (RFC 792) to `dst`.
    pub fn ping(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> Result<(), TxError> {
        let repr = Icmpv4Repr::EchoRequest {
            ident,
            seq_no,
            data,
        };
        self.send_icmp(now, dst, &repr)
    }

    /// The oldest echo reply received and not yet read (at most 64 are kept).
    pub fn ping_recv(&mut self) -> Option<EchoReply> {
        self.echo_replies.pop_front()
    }

    // ---- UDP ----

    /// Binds a UDP socket. Port 0 picks an ephemeral port (49152..=65535, RFC 6335 §6). The
    /// address must be ours or unspecified (any); a wildcard socket also receives broadcasts.
    pub fn udp_bind(&mut self, local: SocketAddrV4) -> Result<UdpHandle, UdpError> {
        if !local.ip().is_unspecified() && *local.ip() != self.eg.addr {
            return Err(UdpError::AddrNotAvailable);
        }
        self.udp.bind(local)
    }

    /// The bound local address (with the ephemeral port filled in).
    pub fn udp_local_addr(&self, h: UdpHandle) -> Result<SocketAddrV4, UdpError> {
        Ok(self.udp.get(h)?.local)
    }

    /// Queues one datagram for the next poll. `WouldBlock` when the socket's send queue is
    /// full; `MessageTooLarge` beyond one MTU (we do not fragment).
    pub fn udp_send_to(
        &mut self,
        h: UdpHandle,
        data: &[u8],
        to: SocketAddrV4,
    ) -> Result<(), UdpError> {
        if to.port() == 0 || to.ip().is_unspecified() {
            return Err(UdpError::InvalidInput);
        }
        if data.len() + udp::HEADER_LEN + 20 > self.eg.mtu {
            return Err(UdpError::MessageTooLarge);
        }
        let limit = self.udp.queue_limit();
        let sock = self.udp.get_mut(h)?;
        if sock.tx.len() >= limit {
            return Err(UdpError::WouldBlock);
        }
        let mut buf = self.eg.pool.get();
        let sum = crate::mem::copy_with_checksum(buf.append(data.len()), data);
        let c = &mut self.eg.c;
        c.copies += 1;
        c.bytes_copied += data.len() as u64;
        c.bytes_checksummed += data.len() as u64;
        sock.tx.push_back((to, buf, sum));
        Ok(())
    }

    /// Takes the oldest received datagram: copies up to `buf.len()` bytes (the rest is
    /// discarded, as recvfrom does) and returns the datagram length copied and its sender.
    pub fn udp_recv_from(
        &mut self,
        h: UdpHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddrV4), UdpError> {
        let sock = self.udp.get_mut(h)?;
        let (from, data) = sock.rx.pop_front().ok_or(UdpError::WouldBlock)?;
        let n = data.len().min(buf.len());
        crate::mem::copy(&mut buf[..n], &data.as_slice()[..n]);
        self.eg.pool.put(data);
        Ok((n, from))
    }

    /// Readiness of a UDP socket without taking anything: datagrams waiting to be read, and
    /// free places in its send queue (0 means `udp_send_to` would block).
    pub fn udp_queues(&self, h: UdpHandle) -> Result<(usize, usize), UdpError> {
        let sock = self.udp.get(h)?;
        Ok((
            sock.rx.len(),
            self.udp.queue_limit().saturating_sub(sock.tx.len()),
        ))
    }

    /// Closes the socket; queued datagrams are discarded. Stale handles are ignored.
    pub fn udp_close(&mut self, h: UdpHandle) {
        self.udp.close(h, &mut self.eg.pool);
    }

    /// Moves queued UDP datagrams to the transmit queue; returns true if it stopped at the
    /// transmit bound with datagrams left.
    fn flush_udp(&mut self, now: Instant) -> bool {
        let addr = self.eg.addr;
        let eg = &mut self.eg;
        for sock in self.udp.iter_mut() {
            while let Some((to, mut buf, sum)) = sock.tx.pop_front() {
                if eg.tx_full() {
                    sock.tx.push_front((to, buf, sum));
                    return true;
                }
                let src = if sock.local.ip().is_unspecified() {
                    addr
                } else {
                    *sock.local.ip()
                };
                let len = buf.len() + udp::HEADER_LEN;
                let h = buf.prepend(udp::HEADER_LEN);
                h[0..2].copy_from_slice(&sock.local.port().to_be_bytes());
                h[2..4].copy_from_slice(&to.port().to_be_bytes());
                h[4..6].copy_from_slice(&(len as u16).to_be_bytes());
                h[6..8].copy_from_slice(&[0, 0]);
                if eg.csum_tx {
                    let ph = pseudo_header_sum(src, *to.ip(), IpProtocol::Udp, len as u32);
                    let hs = crate::mem::checksum(h);
                    let mut c = !checksum_combine(checksum_combine(ph, hs), sum);
                    // RFC 768: a computed zero is sent as all ones (zero means "no checksum").
                    if c == 0 {
                        c = 0xffff;
                    }
                    h[6..8].copy_from_slice(&c.to_be_bytes());
                }
                eg.c.udp_out += 1;
                let _ = eg.send_ip(now, IpProtocol::Udp, src, *to.ip(), buf);
            }
        }
        false
    }
}
