//! `TcpLayer`: all TCP state of one stack, by job:
//!
//! - `table.rs`: the slab of slots (connections and listeners, addressed by [`Handle`]s of
//!   index and generation), the 4-tuple map keyed by a compact `ConnKey` (12 bytes of IPv4
//!   tuple, 36 of IPv6, so the IPv4 path hashes and compares what it did before IPv6) with a
//!   two-entry hit cache in front, the one accessor to a slot's connection
//!   (`Table::conn_at`), and the connection lifecycle (entering, freeing, events).
//! - `demux.rs`: the one entry of received segments, [`TcpLayer::input`] taking an
//!   [`RxSegment`]; listeners, SYN cookies, RSTs for segments no one takes; ICMP errors.
//! - `sched.rs`: the active list and the timer heap, and the output pass over them.
//! - `api.rs`: the user calls on handles (listen, connect, send, recv, close, options).
//! - `diag.rs`: statistics, per-connection information and dumps.
//! - `pressure.rs`: socket-memory pressure.
//!
//! Addresses are family-generic (`std::net::SocketAddr`); each connection is kept in the
//! family it runs on (an IPv4 connection of an IPv6 socket has IPv4 addresses and the
//! `mapped` flag, see [`TcpLayer::listen`] for the dual-stack rules).

mod api;
mod demux;
mod diag;
mod fastopen;
mod pressure;
mod sched;
mod table;

pub use demux::RxSegment;
pub use diag::{ConnInfo, RackInfo};
/// Default of [`TcpLayer::set_max_orphans`]: Linux sizes `tcp_max_orphans` from memory (tens
/// of thousands on a machine of a few GiB); each orphan here costs at most its rings, which
/// the buffer budget bounds anyway, so the count is a second, coarse bound.
pub const DEFAULT_MAX_ORPHANS: usize = 16 * 1024;

pub use pressure::{PRESSURE_RCVBUF, PRESSURE_SNDBUF, STALL_PROBES as PRESSURE_STALL_PROBES};
pub(crate) use table::{mapped_addr, wire_addr};

use super::buffer::RingCache;
use super::ephemeral::EphemeralPorts;
use super::secret::Secret;
use super::Stats;
use crate::buf::{PacketBuf, Recycler};
use crate::mem::CopyMode;
use crate::tcp::conn::{ChallengeLimiter, Conn, RstQueue};
use crate::time::Instant;
use crate::wire::Ipv4Addr;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use table::{ConnSlot, Table};

/// Freed connections' control blocks kept for new ones (`TcpLayer::spare`): enough for a
/// burst of connections ending at once, and a bound on what idle blocks hold (each ~1.5 KiB
/// plus at most ~3.5 KiB of list storage, see `Conn::retire`).
const SPARE_CONNS_MAX: usize = 64;
/// Frames borrowing reads may hold out of the pool until the stack sets its own bound.
const DEFAULT_FRAME_BUDGET: usize = 256;
/// Hard cap on listener backlog (memory bound: every half-open connection owns buffers).
const MAX_BACKLOG: usize = 4096;
/// The key of the transparent listener in `listeners`: port 0, which `listen` refuses.
const TRANSPARENT_KEY: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// All TCP state of one stack: connections, listeners, TIME_WAIT, pending replies.
#[derive(Debug)]
pub struct TcpLayer {
    secret: Secret,
    /// Answer SYNs with cookies once a listener's SYN queue is full (default on, as Linux
    /// `tcp_syncookies=1`).
    syn_cookies: bool,
    /// TCP Fast Open switch and key (`tcp/fastopen.rs`, `fastopen.rs` here).
    fastopen: crate::tcp::fastopen::FastOpen,
    stats: Stats,
    /// Connections and listeners, and the 4-tuple map into them (`table.rs`).
    table: Table,
    /// GSO: segments one transmission may span (see `set_gso_segs`).
    gso_segs: u32,
    /// Listeners by the address they were bound to, in wire form (see [`wire_addr`]):
    /// `0.0.0.0:p`, `a.b.c.d:p` (also for an IPv6 socket bound to `::ffff:a.b.c.d`),
    /// `[::]:p`, `[x:y::z]:p`, and the transparent listener's [`TRANSPARENT_KEY`].
    listeners: HashMap<SocketAddr, u32>,
    rsts: RstQueue,
    challenge: ChallengeLimiter,
    ports: EphemeralPorts,
    last_now: Instant,
    /// Connections that may have something to send (touched by input, user calls or an
    /// expired timer). `output` works through this list only, so idle and TIME-WAIT
    /// connections cost nothing per call.
    active: VecDeque<u32>,
    /// Connection deadlines (lazily invalidated: an entry counts only if it still matches the
    /// connection's `timer_reg`).
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Ring storage of ended connections, reused by new ones (see [`RingCache`]).
    rings: RingCache,
    /// Control blocks of freed connections, reused by new ones (at most
    /// [`SPARE_CONNS_MAX`]): a connection costs no allocation of its box and lists, as a
    /// ring from `rings` costs none of its buffer (TCP_CRR: 6 malloc/free pairs a
    /// transaction). See [`Conn::renew`] for why nothing of the old connection survives.
    // Boxes, not `Conn`s: the point is to keep the allocations the slots hold, moved in
    // and out by pointer.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Conn>>,
    /// How data is copied into the send ring and out of the receive ring (`set_copy_mode`).
    copy: CopyMode,
    /// The MSS of the IPv6 link (MTU - 60): the bound on IPv6 connections' `Config::mss`
    /// (`conn::for_family`); set by the stack from its MTU.
    link_mss_v6: u16,
    /// Frame-level borrowing read (`frames.rs`): where borrowed frames come back, and the
    /// bound on how many may be out of the pool.
    recycler: Arc<Recycler>,
    /// Slots whose connections committed frames of this batch (adopted at its end).
    borrowers: Vec<u32>,
    /// Scratch for `collect_released`.
    released: Vec<(u32, u32)>,
    released_bufs: Vec<PacketBuf>,
    /// When memory pressure may next be looked at (`pressure.rs`).
    next_reclaim: Instant,
    /// Receive windows are moderated (`pressure.rs`): set by a pressure scan, lifted once the
    /// rings are back under the budget.
    rcv_moderated: bool,
    /// Connections the application closed that are still in the table ([`TcpLayer::orphans`]).
    orphans: usize,
    /// [`TcpLayer::set_max_orphans`].
    max_orphans: usize,
}

impl TcpLayer {
    /// `secret` keys the RFC 6528 ISN function, RFC 6056 ephemeral port selection and SYN
    /// cookies ([`Secret::random`] for any stack that faces a network).
    pub fn new(secret: Secret) -> Self {
        TcpLayer {
            secret,
            syn_cookies: true,
            fastopen: crate::tcp::fastopen::FastOpen::new(&secret),
            stats: Stats::default(),
            table: Table::new(),
            gso_segs: 1,
            listeners: HashMap::new(),
            rsts: RstQueue::new(),
            challenge: ChallengeLimiter::new(None, *secret.bytes()),
            ports: EphemeralPorts::new(),
            last_now: Instant::ZERO,
            active: VecDeque::new(),
            timers: BinaryHeap::new(),
            rings: RingCache::new(),
            spare: Vec::new(),
            copy: CopyMode::default(),
            next_reclaim: Instant::ZERO,
            rcv_moderated: false,
            orphans: 0,
            max_orphans: DEFAULT_MAX_ORPHANS,
            link_mss_v6: crate::wire::tcp::ipv6_mss_for_mtu(1500),
            recycler: Recycler::new(DEFAULT_FRAME_BUDGET),
            borrowers: Vec::new(),
            released: Vec::new(),
            released_bufs: Vec::new(),
        }
    }

    /// Sets the stack's budget for socket-buffer bytes (Linux's tcp_mem): auto-tuning grows
    /// no ring beyond it (see `tcp/autotune.rs`; growth refused is counted in
    /// `Stats::buffer_budget_refusals`), and once the connections' rings exceed it (initial
    /// buffers are never refused), connections holding memory without progress are reset,
    /// orphans first, then zero-window holds, until 7/8 of it is in use
    /// (`Stats::pressure_resets`; see
    /// [`PRESSURE_STALL_PROBES`](crate::tcp::PRESSURE_STALL_PROBES)).
    pub fn set_buffer_budget(&mut self, bytes: usize) {
        self.rings.set_budget(bytes);
    }

    /// The most connections closed by the application that may still be finishing (sending
    /// what was queued, its FIN, waiting in FIN-WAIT) at once; a close beyond it resets the
    /// connection instead (Linux `tcp_max_orphans`, "too many orphaned sockets":
    /// `Stats::orphan_resets`, Linux's TCPAbortOnMemory). Default [`DEFAULT_MAX_ORPHANS`].
    pub fn set_max_orphans(&mut self, n: usize) {
        self.max_orphans = n;
    }

    /// Connections closed by the application and still in the table (finishing, or in
    /// TIME-WAIT).
    pub fn orphans(&self) -> usize {
        self.orphans
    }

    /// Ring bytes held by this stack's connections now.
    pub fn buffer_bytes_in_use(&self) -> usize {
        self.rings.in_use()
    }

    /// GSO (DESIGN "GSO"): lets `output` hand over data segments of up to `segs` times the
    /// segment size (at most 64 KiB in total), which the caller cuts into MSS-sized packets
    /// (software GSO) or gives whole to a TSO device. Fewer, larger segments mean less
    /// per-segment work in the engine. 1 (the default) = MSS-sized segments.
    pub fn set_gso_segs(&mut self, segs: u32) {
        self.gso_segs = segs.clamp(1, 64);
    }

    /// The layer-wide limit on RFC 5961 challenge ACKs (§7): `Some(n)` allows on average
    /// `n` per second, each second's quota drawn at random between `n/2` and `3n/2 - 1`
    /// (Linux `tcp_challenge_ack_limit`); `None`, the default, sets no layer-wide limit, as
    /// Linux's default (`INT_MAX`) does. Each connection is limited on its own either way,
    /// to one ACK for invalid segments per
    /// [`Config::invalid_ratelimit`](super::Config::invalid_ratelimit). A shared budget lets an
    /// off-path attacker who exhausts it and counts the challenge ACKs on a connection of its
    /// own see whether another connection sent one (CVE-2016-5696).
    pub fn set_challenge_ack_limit(&mut self, limit: Option<u32>) {
        self.challenge.set_limit(limit);
    }

    /// The layer-wide challenge-ACK limit ([`TcpLayer::set_challenge_ack_limit`]).
    pub fn challenge_ack_limit(&self) -> Option<u32> {
        self.challenge.limit()
    }

    /// SYN cookies on (the default) or off (a full SYN queue drops SYNs, counted in
    /// `backlog_drops`, and the peer retransmits).
    pub fn set_syn_cookies(&mut self, on: bool) {
        self.syn_cookies = on;
    }

    /// The copy path for TCP's data copies (the application's bytes into the send ring, the
    /// receive ring out to the application, received payloads into the receive ring): netfold's
    /// kernels (the default) or the 2002 baseline (`StackConfig::copy_mode`).
    pub fn set_copy_mode(&mut self, mode: CopyMode) {
        self.copy = mode;
    }

    /// The MSS an IPv6 connection announces and uses at most: the IPv6 link's MTU less 60
    /// (RFC 8200 §8.3); the stack sets it from its MTU (default 1440, for 1500). With it,
    /// `Config::mss` is one user MSS for both families, as Linux's TCP_MAXSEG: IPv6
    /// connections use `min(Config::mss, this)`.
    pub fn set_ipv6_link_mss(&mut self, mss: u16) {
        self.link_mss_v6 = mss;
    }

    /// The copy path set by [`TcpLayer::set_copy_mode`].
    pub fn copy_mode(&self) -> CopyMode {
        self.copy
    }

    /// Ring buffers held for reuse by new connections (diagnostics).
    pub fn cached_rings(&self) -> usize {
        self.rings.len()
    }
}
