//! One connection's transmission control block (RFC 9293 §3.3.1) and its user-facing calls.
//! Segment arrival is in `input.rs`, segment generation in `output.rs`, timers in `timers.rs`.

use super::buffer::{RecvRing, RingCache};
use super::recv::Receiver;
use super::send::Sender;
use super::timers::Timers;
use super::zerocopy::SendQueue;
use super::{isn, seq, Config, EcnMode, Error, IcmpError, State, Stats};
use crate::mem::CopyMode;
use crate::time::Instant;
use crate::wire::tcp::{
    SackBlock, TcpFlags, TcpRepr, IPV4_DEFAULT_MSS, IPV4_MSS_OVERHEAD, IPV6_DEFAULT_MSS,
    IPV6_MSS_OVERHEAD,
};
use crate::wire::IpAddr;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// RFC 9293 §3.7.1: the MSS assumed when the peer sends no MSS option; also our PMTU floor
/// (RFC 8201 spirit: never trust an ICMP message to push us below the IPv4 default datagram
/// size of 576 bytes minus 40 header bytes). IPv4; see [`default_mss`] for either family.
pub const DEFAULT_MSS: u32 = IPV4_DEFAULT_MSS as u32;
/// The IPv6 counterpart of [`DEFAULT_MSS`]: 1280 - 60 (RFC 9293 §3.7.1 MUST-15; every IPv6
/// link carries 1280 bytes, RFC 8200 §5, so no Packet Too Big may push a path below it,
/// RFC 8201 §4).
pub const DEFAULT_MSS_V6: u32 = IPV6_DEFAULT_MSS as u32;
/// A socket address stored with alignment 2 (as the `SocketAddrV4` it replaced), so the
/// TCB's layout keeps its hot fields where they were; read it with [`PackedAddr::get`].
#[derive(Debug, Clone, Copy)]
#[repr(C, packed(2))]
pub struct PackedAddr(pub SocketAddr);

impl PackedAddr {
    #[inline(always)]
    pub fn get(&self) -> SocketAddr {
        self.0
    }
}

/// RFC 9293 §3.7.1 default send MSS of the family of `remote`.
pub fn default_mss(remote: &SocketAddr) -> u32 {
    if remote.is_ipv6() {
        DEFAULT_MSS_V6
    } else {
        DEFAULT_MSS
    }
}
/// Largest buffer accepted (RFC 7323 §2.3: window scale shift at most 14, windows < 2^30).
pub const MAX_BUFFER: usize = 1 << 30;
/// Bound on the layer's queue of RSTs/replies not tied to a connection.
pub const RST_QUEUE_MAX: usize = 256;

/// Replies the layer queues for segments that have no connection (RSTs).
pub type RstQueue = VecDeque<(IpAddr, IpAddr, TcpRepr)>;

/// Domain tag of the keyed hash the global challenge-ACK quota is drawn from (the other tags
/// under the stack's secret: `isn.rs` 0, `ephemeral.rs` 2, `syncookie.rs` 4 and 5).
const TAG_CHALLENGE: u8 = 6;

/// The layer-wide challenge-ACK limit of RFC 5961 §7: "An implementation SHOULD include an
/// ACK throttling mechanism to be conservative ... a system-wide limit". It comes after the
/// per-connection limit (`Conn::challenge_ack`), as in Linux `tcp_send_challenge_ack`.
///
/// A fixed global count is itself the side channel of CVE-2016-5696 (Cao et al., "Off-Path
/// TCP Exploits", USENIX Security 2016): an off-path attacker who spends the shared budget
/// of 100 per second and counts the challenge ACKs it gets back on a connection of its own
/// learns whether a spoofed segment drew one on the victim's connection, hence whether a
/// guessed 4-tuple is live and where its sequence numbers are. Linux answered in two steps,
/// both followed here: (1) each second's quota is drawn at random, uniform in
/// `[limit/2, limit/2 + limit - 1]`, so the count seen says little
/// (`get_random_u32_inclusive(half, ack_limit + half - 1)`); (2) since 2022 (commit
/// 79e3602caa6f, "tcp: make global challenge ack rate limitation per net-ns and default
/// disabled") the default `tcp_challenge_ack_limit` is `INT_MAX`, which skips the global
/// count altogether: the per-connection limit (one per `invalid_ratelimit`) already bounds
/// what any one connection sends, and a budget shared across connections is exactly what
/// lets one connection observe another. So the default here is no global limit
/// ([`ChallengeLimiter::new`] with `None`); `TcpLayer::set_challenge_ack_limit` sets one.
#[derive(Debug)]
pub struct ChallengeLimiter {
    /// Challenge ACKs per second on average (`None`: no layer-wide limit).
    limit: Option<u32>,
    /// Keys the random quota (the stack's secret: unpredictable without it, reproducible
    /// for a stack made with a fixed test key).
    key: [u8; 16],
    /// The whole second of stack time the quota below belongs to (Linux `jiffies / HZ`).
    second: Option<u64>,
    /// Challenge ACKs left in this second.
    left: u32,
    /// Quotas drawn so far: a second input to the hash, so no two draws repeat.
    draws: u64,
}

impl ChallengeLimiter {
    /// A limiter averaging `limit` challenge ACKs per second (`None`: unlimited), its
    /// quotas drawn under `key`.
    pub fn new(limit: Option<u32>, key: [u8; 16]) -> Self {
        ChallengeLimiter {
            limit,
            key,
            second: None,
            left: 0,
            draws: 0,
        }
    }

    /// The configured average per second.
    pub fn limit(&self) -> Option<u32> {
        self.limit
    }

    /// Changes the limit; the current second's quota is drawn again under the new one.
    pub fn set_limit(&mut self, limit: Option<u32>) {
        self.limit = limit;
        self.second = None;
    }

    /// Takes one challenge ACK from the quota of the second `now` falls in; `false` when it
    /// is spent.
    pub fn allow(&mut self, now: Instant) -> bool {
        let Some(limit) = self.limit else {
            return true;
        };
        let second = now.total_micros() / 1_000_000;
        if self.second != Some(second) {
            self.second = Some(second);
            self.left = self.draw(limit);
        }
        if self.left > 0 {
            self.left -= 1;
            true
        } else {
            false
        }
    }

    /// A fresh quota, uniform in `[half, half + limit - 1]` with `half = ceil(limit / 2)`
    /// (Linux: `get_random_u32_inclusive(half, ack_limit + half - 1)`); 0 for a limit of 0.
    /// The randomness is SipHash-2-4 under the stack's secret over a draw counter: the core
    /// reads no OS randomness of its own (it is sans-IO), and a keyed PRF's outputs are
    /// unpredictable to anyone without the key.
    fn draw(&mut self, limit: u32) -> u32 {
        if limit == 0 {
            return 0;
        }
        self.draws = self.draws.wrapping_add(1);
        let mut m = [0u8; 9];
        m[0] = TAG_CHALLENGE;
        m[1..].copy_from_slice(&self.draws.to_le_bytes());
        let r = crate::hash::siphash24(&self.key, &m) % u64::from(limit);
        let half = u64::from(limit).div_ceil(2);
        u32::try_from(half + r).unwrap_or(u32::MAX)
    }
}

/// Layer-wide context handed to a connection while it processes input or timers.
pub struct Ctx<'a> {
    pub now: Instant,
    pub stats: &'a mut Stats,
    pub rsts: &'a mut RstQueue,
    pub challenge: &'a mut ChallengeLimiter,
    /// The stack's ring cache (buffers of connections completing a handshake come from it).
    pub rings: &'a mut RingCache,
    /// The stack's copy path for data entering the receive ring.
    pub copy: CopyMode,
}

impl Ctx<'_> {
    /// Queues a reply segment; a full queue drops it (counted), never grows.
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    pub fn queue_rst(&mut self, src: IpAddr, dst: IpAddr, repr: TcpRepr) {
        if self.rsts.len() >= RST_QUEUE_MAX {
            self.stats.rst_dropped += 1;
            return;
        }
        self.rsts.push_back((src, dst, repr));
    }

    /// RFC 9293 §3.10.7.1 reset for a segment that reached no (usable) connection: never in
    /// answer to a RST; `<SEQ=SEG.ACK><CTL=RST>` if the segment had ACK, otherwise
    /// `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    pub fn reply_rst(&mut self, local: IpAddr, remote: IpAddr, seg: &TcpRepr, len: usize) {
        if let Some(r) = rst_reply(seg, len) {
            self.queue_rst(local, remote, r);
        }
    }
}

pub fn rst_reply(seg: &TcpRepr, len: usize) -> Option<TcpRepr> {
    if seg.flags.rst() {
        return None;
    }
    let mut r = TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        ..TcpRepr::default()
    };
    if seg.flags.ack() {
        r.seq = seg.ack;
        r.flags = TcpFlags(TcpFlags::RST);
    } else {
        let seg_len = len as u32 + u32::from(seg.flags.syn()) + u32::from(seg.flags.fin());
        r.seq = 0;
        r.ack = seg.seq.wrapping_add(seg_len);
        r.flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
    }
    Some(r)
}

/// What the layer must do after a connection processed input or timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    None,
    /// SYN-RECEIVED -> ESTABLISHED on a passive open: move to the accept queue.
    Established,
    /// The connection reached CLOSED (error recorded, if any).
    Closed,
    /// A passive half-open connection was reset: forget it silently (RFC 9293: back to LISTEN).
    Dropped,
}

/// RFC 7323 timestamp state.
#[derive(Debug, Clone, Copy)]
pub struct Timestamps {
    /// Both SYNs carried the option (RFC 7323 §3.2).
    pub enabled: bool,
    /// Per-connection offset added to our clock (RFC 7323 §5.4).
    pub offset: u32,
    /// TS.Recent (RFC 7323 §4.3) and when it was taken (§5.5: invalid after 24 days).
    pub recent: u32,
    pub recent_at: Instant,
    /// Active open: the TSval of our first SYN, the oldest a SYN-ACK may echo (Linux
    /// `retrans_stamp` in `tcp_rcv_synsent_state_process`).
    pub syn_tsval: Option<u32>,
}

/// RFC 3168 ECN state of a connection (Linux `tp->ecn_flags`).
#[derive(Debug, Clone, Copy, Default)]
pub struct EcnState {
    /// Both sides agreed on ECN in the handshake (§6.1.1; Linux TCP_ECN_OK).
    pub ok: bool,
    /// The SYN we last sent was an ECN-setup SYN (ECE and CWR).
    pub syn_asked: bool,
    /// Receiver: a CE-marked segment arrived; every segment we send carries ECE until a
    /// segment with CWR arrives (§6.1.3; Linux TCP_ECN_DEMAND_CWR).
    pub ece: bool,
    /// Sender: cwnd was reduced (for ECE, or a loss); the next new data segment carries CWR
    /// (§6.1.2; Linux TCP_ECN_QUEUE_CWR).
    pub cwr_due: bool,
    /// Sender: SND.NXT when cwnd was last reduced for ECE; an ECE is acted on again only once
    /// the ACK passes it, i.e. at most once per window (§6.1.2; Linux's CWR state, left
    /// when "something *above* high_seq is ACKed"). `None` before the first reduction.
    pub recover: Option<u32>,
    /// The segment being processed arrived with CE in its IP header (set by the layer).
    pub rx_ce: bool,
}

pub use super::send::Recovery;

/// The transmission control block: the connection's identity and settings, then its named
/// parts — the send sequence space ([`Sender`]), the receive sequence space ([`Receiver`]),
/// the timers ([`Timers`]) and the timestamp state ([`Timestamps`]) — followed by ACK
/// bookkeeping. The sender also holds the loss-recovery state: the RTT estimator,
/// congestion control, fast recovery, the SACK scoreboard, D-SACK undo and RACK-TLP. The parts keep
/// the RFC 9293 §3.3.1 names (and the RFCs' names for the loss-recovery state):
///
/// | RFC 9293     | here            | RFC 9293     | here              |
/// |--------------|-----------------|--------------|-------------------|
/// | SND.UNA      | `snd.una()`     | RCV.NXT      | `rcv.nxt()`       |
/// | SND.NXT      | `snd.nxt()`     | RCV.WND      | `rcv.adv() - rcv.nxt()` (as last advertised) |
/// | SND.WND      | `snd.wnd()`     | IRS          | `rcv.irs()`       |
/// | SND.WL1/WL2  | kept by `snd`   | Last.ACK.sent (RFC 7323) | `rcv.last_ack_sent()` |
/// | ISS          | `snd.iss()`     | Rcv.Wind.Shift (RFC 7323) | `rcv.wscale()` |
/// | Eff.snd.MSS  | `snd.mss()`     | Snd.Wind.Shift (RFC 7323) | `snd.wscale()` |
/// | SRTT, RTTVAR, RTO (RFC 6298) | `snd.rtt()` | cwnd, ssthresh (RFC 5681) | `snd.cc()` |
/// | `recover` (RFC 6582) | `snd.recover()` | RecoveryPoint, HighRxt (RFC 6675) | `snd.recovery()` |
/// | DupAcks (RFC 5681) | `snd.dupacks()` | SACK scoreboard (RFC 6675) | `snd.scoreboard()` |
/// | RACK (RFC 8985) | `snd.rack()` | TLP.end_seq, TLP.is_retrans (RFC 8985) | `snd.tlp()` |
#[derive(Debug)]
pub struct Conn {
    /// Segments one transmission may span (GSO, set by the layer from the stack's
    /// [`TcpLayer::set_gso_segs`](super::TcpLayer::set_gso_segs)); 1 = MSS-sized segments.
    /// A stack-wide setting, but kept here rather than in the layer's slot: output's planning
    /// reads it for every segment it sizes (Linux keeps `sk_gso_max_segs` in the socket and
    /// `tcp_tso_segs` reads it there), and a copy in the block spares threading a parameter
    /// through the whole output path.
    pub gso_segs: u32,
    /// The 4-tuple in the family the connection runs on (an IPv4 connection of a dual-stack
    /// socket has IPv4 addresses here; the layer's slot says how the application sees them).
    pub local: PackedAddr,
    pub remote: PackedAddr,
    pub state: State,
    pub config: Config,
    pub passive: bool,
    /// The application called close(): the layer frees the connection when it is done. Kept
    /// in the control block, not the layer's slot, because the TCB's own rules depend on it:
    /// data arriving after close is answered with a RST (RFC 1122 §4.2.2.13, RFC 9293
    /// §3.6.1; Linux `tcp_rcv_state_process` on a socket shut for reading), an orphan in
    /// FIN-WAIT-2 gets its timer (Linux `tcp_fin_timeout`), and the receive paths skip
    /// delivery to an application that is gone.
    pub user_closed: bool,
    /// TCP Fast Open (RFC 7413) state of the handshake (`fastopen.rs`).
    pub fastopen: super::fastopen::ConnFastOpen,

    /// Send sequence space (RFC 9293 §3.3.1) and the send ring.
    pub snd: Sender,
    /// Receive sequence space (RFC 9293 §3.3.1) and the receive ring.
    pub rcv: Receiver,
    /// RTO, delayed ACK, persist, keepalive, TIME-WAIT and TLP deadlines.
    pub timers: Timers,
    /// RFC 7323 timestamps.
    pub ts: Timestamps,

    /// Both SYNs carried a window-scale option (RFC 7323 §2.2).
    pub ws_ok: bool,
    pub sack_ok: bool,

    /// ACKs owed for every second full-sized segment received within one input batch
    /// (RFC 5681 §4.2), as (ACK number, TSecr) snapshots; output sends them in order. Bounded:
    /// when full the newest is overwritten (a stretch ACK, as with GRO).
    pub ack_snaps: [(u32, u32); 8],
    pub n_snaps: usize,
    /// When we last answered an unacceptable segment without data.
    pub last_oow_ack: Option<Instant>,
    pub persist_probe_due: bool,
    pub keepalive_due: bool,
    pub error: Option<Error>,
    /// The pending error has been returned once (Linux's `sock_error` clears `sk_err` when it
    /// reports it); read and set by the TCB's own receive paths, so it stays with `error`.
    pub error_reported: bool,
    /// RFC 3168 ECN.
    pub ecn: EcnState,
    /// What `TCP_INFO` reports beyond the state above (`info.rs`).
    pub counters: super::info::ConnCounters,
    /// A timer aborted the connection and the peer must be told with a RST (keepalive give-up,
    /// Linux `tcp_keepalive_timer`); the layer queues it (`make_rst`) after the timer run.
    /// A report from the TCB's timers to the layer (as an `Event` is), set where the slot is
    /// out of reach, so it stays in the block.
    pub rst_due: bool,
    /// Linux's send chronographs for `TCP_INFO` (`chrono.rs`).
    pub chrono: super::chrono::Chrono,
}

/// The MSS a connection to `remote` announces and uses at most, as Linux: `Config::mss` is
/// the user's one value for both families (TCP_MAXSEG, `tp->rx_opt.user_mss`), and the
/// route's MSS bounds it — MTU - 40 over IPv4 (the caller derives `Config::mss` from the MTU,
/// so nothing more is done for IPv4), MTU - 60 over IPv6 (RFC 8200 §8.3: `link_mss_v6`, the
/// layer's `TcpLayer::set_ipv6_link_mss`). Linux `tcp_v6_syn_recv_sock` / `tcp_mss_clamp`:
/// the advertised MSS is the route's `advmss` clamped by `user_mss`.
pub(super) fn for_family(mut c: Config, remote: &SocketAddr, link_mss_v6: u16) -> Config {
    if remote.is_ipv6() {
        c.mss = c.mss.min(link_mss_v6).max(64);
    }
    c
}

fn sanitize(mut c: Config) -> Config {
    // 0 = auto-tuned (see `Config::recv_buffer`); explicit sizes are clamped.
    c.recv_buffer = c.recv_buffer.min(MAX_BUFFER);
    c.send_buffer = c.send_buffer.min(MAX_BUFFER);
    c.recv_buffer_max = c.recv_buffer_max.min(MAX_BUFFER);
    c.send_buffer_max = c.send_buffer_max.min(MAX_BUFFER);
    c.mss = c.mss.max(64);
    // Linux's bounds on `tcp_min_snd_mss`: [TCP_MIN_SND_MSS, 65535].
    c.min_snd_mss = c.min_snd_mss.max(super::MIN_SND_MSS);
    c
}

/// RFC 7323 §2.3: the smallest shift that lets the 16-bit field cover the buffer, at most 14.
/// Called with the buffer's CEILING (`Config::recv_ceiling`), as Linux
/// `tcp_select_initial_window` does with `tcp_rmem[2]`: the scale is fixed at the SYN, so it
/// must already cover every size auto-tuning may grow the buffer to.
pub fn wscale_for(buf: usize) -> u8 {
    let mut s = 0u8;
    while s < 14 && (buf >> s) > 0xffff {
        s += 1;
    }
    s
}

impl Conn {
    fn new(
        now: Instant,
        secret: &[u8; 16],
        local: SocketAddr,
        remote: SocketAddr,
        config: Config,
        passive: bool,
        rings: &mut RingCache,
    ) -> Self {
        // `config` comes adapted to the family (`for_family`, by the layer, which knows the
        // IPv6 link MSS).
        let config = sanitize(config);
        let default_mss = default_mss(&remote);
        // One keyed hash gives the ISN and the timestamp offset (`isn::derive`).
        let derived = isn::derive(secret, now, local, remote);
        let iss = derived.iss;
        let rcv_wscale = if config.window_scaling {
            config.announced_wscale()
        } else {
            0
        };
        let mss = u32::from(config.mss);
        Conn {
            gso_segs: 1,
            local: PackedAddr(local),
            remote: PackedAddr(remote),
            state: State::Closed,
            config,
            passive,
            user_closed: false,
            fastopen: super::fastopen::ConnFastOpen::default(),
            snd: Sender::new(
                iss,
                mss.clamp(64, default_mss),
                SendQueue::from_cache(if passive { 0 } else { config.send_initial() }, rings),
                config.send_initial(),
                config.send_ceiling(),
            )
            .with_rto(config.rto_initial, config.rto_min)
            .with_cc(config.congestion, mss)
            .with_rack(
                super::rack::capacity_for(config.send_ceiling(), mss.min(default_mss)),
                now,
            ),
            // Slack of one window-scale unit: the advertised window is rounded up.
            rcv: Receiver::new(
                rcv_wscale,
                default_mss.min(mss),
                RecvRing::from_cache(
                    if passive {
                        0
                    } else {
                        config.recv_initial() + (1usize << rcv_wscale)
                    },
                    rings,
                ),
                config.recv_initial(),
                config.recv_ceiling(),
            ),
            timers: Timers::new(now),
            ts: Timestamps {
                enabled: false,
                offset: derived.ts_offset,
                recent: 0,
                recent_at: now,
                syn_tsval: None,
            },
            ws_ok: false,
            sack_ok: false,
            ack_snaps: [(0, 0); 8],
            n_snaps: 0,
            last_oow_ack: None,
            persist_probe_due: false,
            keepalive_due: false,
            error: None,
            error_reported: false,
            rst_due: false,
            ecn: EcnState::default(),
            counters: super::info::ConnCounters::default(),
            chrono: Default::default(),
        }
    }

    /// Active open: SYN-SENT with the SYN due at the next output.
    pub fn new_active(
        now: Instant,
        secret: &[u8; 16],
        local: SocketAddr,
        remote: SocketAddr,
        config: Config,
        rings: &mut RingCache,
    ) -> Self {
        let mut c = Conn::new(now, secret, local, remote, config, false, rings);
        c.state = State::SynSent;
        c
    }

    /// Passive open from a SYN received by a listener (RFC 9293 §3.10.7.2, LISTEN state).
    pub fn new_passive(
        now: Instant,
        secret: &[u8; 16],
        local: SocketAddr,
        remote: SocketAddr,
        config: Config,
        syn: &TcpRepr,
    ) -> Self {
        let mut c = Conn::new(
            now,
            secret,
            local,
            remote,
            config,
            true,
            &mut RingCache::new(),
        );
        c.state = State::SynReceived;
        c.rcv.on_syn(syn.seq);
        c.negotiate(now, syn);
        // The SYN window field is never scaled (RFC 7323 §2.2).
        c.snd.on_syn(u32::from(syn.window), syn.seq);
        c
    }

    /// Passive opens allocate their buffers only when the handshake completes, so a SYN flood
    /// costs a small control block per half-open connection, not two buffers.
    ///
    /// Even then the storage is taken only when it is first used: the send ring at the first
    /// copying send (`SendQueue::reserve`), the receive ring when the first data arrives
    /// ([`Conn::ensure_recv_ring`]). A connection that is accepted and left idle holds
    /// neither, so idle connections are not charged to the stack's buffer budget (Linux
    /// charges `tcp_mem` by the bytes sockets hold, not by their buffer sizes).
    pub fn alloc_buffers(&mut self, _rings: &mut RingCache) {
        self.snd.reserve_ring(self.config.send_initial());
    }

    /// The receive ring's storage, taken from `rings` when data first needs it (a compare on
    /// every data segment, the allocation out of line).
    #[inline(always)]
    pub(super) fn ensure_recv_ring(&mut self, rings: &mut RingCache) {
        if self.rcv.ring().capacity() == 0 {
            self.take_recv_ring(rings);
        }
    }

    #[cold]
    #[inline(never)]
    fn take_recv_ring(&mut self, rings: &mut RingCache) {
        self.rcv.take_ring(rings);
    }

    /// Gives ring storage nobody can use any more back to the stack's cache: the send ring of
    /// a connection in CLOSED or TIME-WAIT (nothing more will be sent), and the receive ring
    /// once the connection is closed and either the application closed it or an error means
    /// there is nothing left to read. The layer calls this after every input, timer run and
    /// user call, and `release_all` when it frees the connection.
    #[inline]
    pub fn reclaim_buffers(&mut self, rings: &mut RingCache) {
        // Most calls find nothing to do: the connection is open, or its rings went back
        // already (a TIME-WAIT or closed connection still sees segments and timers). Only
        // then is the out-of-line part called (TCP_CRR called it ~10 times per transaction
        // to give back empty buffers).
        if matches!(self.state, State::Closed | State::TimeWait)
            && (self.snd.ring().holds_storage() || self.rcv.ring().capacity() != 0)
        {
            self.reclaim_buffers_held(rings);
        }
    }

    #[inline(never)]
    fn reclaim_buffers_held(&mut self, rings: &mut RingCache) {
        match self.state {
            State::Closed => {
                self.snd.release_ring(rings);
                // Data received before a reset stays readable until the application has it
                // or closes (Linux `tcp_reset` purges the write queue, not the receive
                // queue): read returns it, then the error.
                if self.user_closed || (self.error.is_some() && self.rcv.ring().is_empty()) {
                    self.rcv.release_ring(rings);
                }
            }
            State::TimeWait => {
                self.snd.release_ring(rings);
                // Nothing is written to the receive ring in TIME-WAIT (only segments without
                // data are acceptable there), so once the application has closed and read
                // everything, the ring only pins memory for 2 MSL: every TCP_CRR connection
                // allocated a fresh zeroed 256 KiB ring because the closer's one was held in
                // TIME-WAIT. An empty ring announces the same window as a released one.
                if (self.error.is_some() || self.user_closed)
                    && self.rcv.ring().is_empty()
                    && self.rcv.ring().asm.is_empty()
                {
                    self.rcv.release_ring(rings);
                }
            }
            _ => {}
        }
    }

    /// Makes this control block, a freed connection's kept on the layer's free list (see
    /// [`Conn::retire`]), the connection `fresh`. Every field becomes `fresh`'s, so nothing
    /// of the old connection survives except the emptied storage of three lists — the SACK
    /// scoreboard, RACK's segment records and the reassembly ranges — which saves the
    /// connection their allocations (and the layer the box's).
    pub(super) fn renew(&mut self, fresh: Conn) {
        let scoreboard = self.snd.take_scoreboard_storage();
        let rack = self.snd.take_rack_storage();
        let asm = self.rcv.take_asm_storage();
        *self = fresh;
        self.snd.adopt_scoreboard_storage(scoreboard);
        self.snd.adopt_rack_storage(rack);
        self.rcv.adopt_asm_storage(asm);
    }

    /// The connection is freed and its control block goes on the layer's free list: gives
    /// back now what must not wait there for the next connection — both rings (to the
    /// stack's cache), a posted read's buffer (the application's memory), the send queue
    /// (lent buffers complete now, as when a connection is dropped) — and forgets a RACK
    /// record list too long to keep. What stays is plain data and small lists, all
    /// overwritten by [`Conn::renew`].
    pub(super) fn retire(&mut self, rings: &mut RingCache) {
        self.release_all(rings);
        self.rcv.release_reader_buffers();
        self.snd.drop_ring();
        let rack = self.snd.take_rack_storage();
        self.snd.adopt_rack_storage(rack);
    }

    /// Gives both rings back to the stack's cache (the connection is being freed).
    pub fn release_all(&mut self, rings: &mut RingCache) {
        self.snd.release_ring(rings);
        self.rcv.release_ring(rings);
    }

    /// Applies the peer's SYN options (RFC 9293 §3.7.1 MSS, RFC 7323 §2.2/§3.2, RFC 2018 §2).
    pub fn negotiate(&mut self, now: Instant, syn: &TcpRepr) {
        let o = &syn.options;
        // RFC 9293 §3.7.1: without an MSS option the send MSS is the default (536, 1220 over
        // IPv6); an option of 0 is ignored the same way (Linux `tcp_parse_options` takes
        // `in_mss` only if non-zero). A tiny announced MSS is raised to `min_snd_mss` (48):
        // Linux `__tcp_mtu_to_mss` ends with `mss_now = max(mss_now, tcp_min_snd_mss)`, after
        // the clamp to the peer's MSS and before the options are taken off (`seg_mss`), so a
        // peer cannot make this end send segments of a few bytes each (CVE-2019-11479).
        // Never above our own MSS (`Config::mss`, from the MTU or TCP_MAXSEG): Linux lets a
        // raised `tcp_min_snd_mss` exceed the route's MTU, but a segment larger than the
        // link is never delivered.
        let peer_mss = o
            .mss
            .filter(|&m| m != 0)
            .map_or(default_mss(&self.remote.get()), u32::from);
        let mss = peer_mss
            .max(u32::from(self.config.min_snd_mss))
            .min(u32::from(self.config.mss));
        let wscale = match (self.config.window_scaling, o.window_scale) {
            (true, Some(ws)) => {
                // §2.3: a shift above 14 is used as 14.
                self.ws_ok = true;
                ws.min(14)
            }
            _ => {
                self.rcv.disable_window_scaling();
                0
            }
        };
        self.snd.on_syn_options(mss, wscale);
        self.sack_ok = self.config.sack && o.sack_permitted;
        match (self.config.timestamps, o.timestamps) {
            (true, Some(ts)) => {
                self.ts.enabled = true;
                self.ts.recent = ts.tsval;
                self.ts.recent_at = now;
            }
            _ => self.ts.enabled = false,
        }
        // RFC 3168 §6.1.1: an ECN-setup SYN has ECE and CWR; the SYN-ACK agreeing to it has
        // ECE without CWR, and only answers an ECN-setup SYN we sent.
        self.ecn.ok = if syn.flags.ack() {
            self.ecn.syn_asked && syn.flags.ece() && !syn.flags.cwr()
        } else {
            self.passive && self.config.ecn != EcnMode::Off && syn.flags.ece() && syn.flags.cwr()
        };
        // Re-seed the initial window now that the MSS is known (RFC 6928).
        self.snd.on_mss_known(self.config.congestion);
    }

    pub fn is_synchronized(&self) -> bool {
        !matches!(
            self.state,
            State::Closed | State::Listen | State::SynSent | State::SynReceived
        )
    }

    /// Our TSval: milliseconds since the epoch plus the per-connection offset (RFC 7323 §5.4).
    pub fn ts_now(&self, now: Instant) -> u32 {
        (now.total_millis() as u32).wrapping_add(self.ts.offset)
    }

    /// Sequence number of our FIN (valid once `fin_queued`).
    pub fn fin_seq(&self) -> u32 {
        self.snd.fin_seq()
    }

    pub fn fin_acked(&self) -> bool {
        self.snd.fin_acked()
    }

    /// Data or a FIN is queued and not yet acknowledged.
    pub fn send_pending(&self) -> bool {
        self.snd.pending()
    }

    /// Option bytes in a non-SYN segment we send now (RFC 7323 §3.2: timestamps take 10
    /// bytes + 2 NOPs; RFC 2018 §3: SACK takes 2 + 8n bytes + 2 NOPs).
    pub fn option_len(&self) -> u32 {
        let mut n = 0;
        if self.ts.enabled {
            n += 12;
        }
        let blocks = self.sack_blocks_to_send();
        if blocks > 0 {
            n += 4 + 8 * blocks as u32;
        }
        n
    }

    /// How many SACK blocks the next segment carries: a pending D-SACK block (RFC 2883 §4)
    /// first, then the RFC 2018 blocks while out-of-order data is held.
    #[inline]
    pub fn sack_blocks_to_send(&self) -> usize {
        // Asked for every segment's size (`seg_mss`), several times per segment: the usual
        // answer, none, inline; composing the blocks out of line (it was inlined at each
        // call, ~1 KiB of code between the data path's instructions).
        if !self.sack_ok || !self.rcv.has_sack_report() {
            return 0;
        }
        self.sack_blocks_counted()
    }

    #[cold]
    #[inline(never)]
    fn sack_blocks_counted(&self) -> usize {
        self.sack_blocks().1
    }

    /// The SACK blocks of the next segment (RFC 2018 §3: at most 3 alongside timestamps,
    /// else 4), the D-SACK block first (RFC 2883 §4).
    pub fn sack_blocks(&self) -> ([SackBlock; 4], usize) {
        if !self.sack_ok {
            return ([SackBlock::default(); 4], 0);
        }
        let max = if self.ts.enabled { 3 } else { 4 };
        self.rcv.sack_blocks(max)
    }

    /// The bytes one write chunk holds, Linux's size goal for an skb (`tcp_xmit_size_goal`):
    /// 64 KiB bounded by half the largest window the peer offered (`tcp_bound_to_half_wnd`),
    /// in whole segments, at least one.
    pub fn size_goal(&self) -> u32 {
        let mss = self.seg_mss();
        let maxw = self.snd.max_wnd();
        let cutoff = if maxw > 536 { maxw / 2 } else { maxw };
        let pkt = if cutoff > 0 && cutoff < 65536 {
            cutoff
        } else {
            65536
        };
        (pkt / mss).max(1) * mss
    }

    /// Bytes written and not yet sent once (Linux `write_seq - snd_nxt`).
    fn unsent(&self) -> u32 {
        let end = self.fin_seq();
        if seq::lt(self.snd.nxt(), end) {
            seq::dist(self.snd.nxt(), end)
        } else {
            0
        }
    }

    /// A write of up to `n` bytes cut into chunks as Linux's `tcp_sendmsg_locked` cuts it
    /// into skbs: the tail chunk fills up to the size goal without a check; a new chunk starts
    /// only while fewer than `lowat` bytes are unsent (`sk_stream_memory_free` ->
    /// `tcp_stream_memory_free`); and each chunk that fills is pushed at once
    /// (`tcp_push_one`), so what cwnd and the peer's window let out then no longer counts as
    /// unsent, and the rest of a chunk cut there is the new tail, filled again. Returns the
    /// bytes taken and the tail chunk's length after them. `queued`: bytes of this write the
    /// ring holds already (left out of the queue's state).
    fn write_chunks(&self, n: u64, lowat: u64, queued: u32) -> (u64, u32) {
        let goal = u64::from(self.size_goal());
        let edge = self.send_edge();
        let mut sendable = if seq::lt(self.snd.nxt(), edge) {
            u64::from(seq::dist(self.snd.nxt(), edge))
        } else {
            0
        };
        let mut unsent = u64::from(self.unsent().saturating_sub(queued));
        let mut tail = u64::from(self.snd.tail_chunk()).min(unsent);
        let mut taken = 0u64;
        while taken < n {
            if tail == 0 || tail >= goal {
                if unsent >= lowat {
                    break;
                }
                tail = 0;
            }
            let add = (goal - tail).min(n - taken);
            taken += add;
            unsent += add;
            tail += add;
            if tail == goal {
                let go = sendable.min(unsent);
                sendable -= go;
                unsent -= go;
                tail = tail.min(unsent);
            }
        }
        (taken, tail as u32)
    }

    /// How many bytes (at most `limit`) a write may queue now under TCP_NOTSENT_LOWAT
    /// `lowat`, as Linux takes them (`write_chunks`): a write may leave up to a chunk more
    /// than `lowat` unsent. From the first call on, writes keep the chunk bookkeeping this
    /// needs (`Sender::track_chunks`); before it they skip it. A writer that sets the
    /// option before its first write (or has it from the sysctl) gets Linux's cut exactly;
    /// one that sets it later sees the last earlier write's chunk as full.
    pub fn notsent_room(&mut self, lowat: u32, limit: usize) -> usize {
        self.snd.track_chunks();
        self.write_chunks(limit as u64, u64::from(lowat), 0).0 as usize
    }

    /// Payload bytes per segment: RFC 9293 §3.7.1, Eff.snd.MSS minus the TCP options we add,
    /// so that header + options + data never exceed the peer's MSS + 40 (the MTU).
    pub fn seg_mss(&self) -> u32 {
        // At least 8: the send MSS is at least `min_snd_mss` (48) and the options at most 40
        // (timestamps and three SACK blocks), as Linux reserves in `__tcp_mtu_to_mss`. The
        // floor only guards against a zero length; payload plus options never exceed the MSS
        // (RFC 9293 §3.7.1: "the sender MUST reduce the TCP data length to account for any
        // IP or TCP options that it is including").
        self.snd.mss().saturating_sub(self.option_len()).max(8)
    }

    pub fn flight(&self) -> u32 {
        self.snd.flight()
    }

    /// Moves to CLOSED, recording `err`; timers stop. Buffers go when nobody can read them.
    pub fn enter_closed(&mut self, err: Option<Error>) {
        self.state = State::Closed;
        if err.is_some() {
            self.error = err;
        }
        // The rings go back to the stack's cache through `reclaim_buffers`.
        self.timers.stop_all();
        self.rcv.cancel_ack_now();
        self.n_snaps = 0;
        self.snd.cancel_tlp();
        self.persist_probe_due = false;
        self.keepalive_due = false;
    }

    /// RFC 9293 §3.6.1: TIME-WAIT for 2*MSL (`Config::time_wait`).
    pub fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timers.time_wait = Some(now + self.config.time_wait);
        self.timers.rto = None;
        self.timers.persist = None;
    }

    /// A RST for this connection, to be queued by the layer (abort, data after close).
    /// RFC 7323 §3.2: "Once TSopt has been successfully negotiated ... the TSopt MUST be sent
    /// in every non-<RST> segment"; and for a <RST> "it is RECOMMENDED" to carry it (SHOULD):
    /// Linux `tcp_send_active_reset` does, so the peer's PAWS check can place it.
    pub fn make_rst(&self, now: Instant) -> TcpRepr {
        let mut options = crate::wire::tcp::TcpOptions::default();
        if self.ts.enabled {
            options.timestamps = Some(crate::wire::tcp::Timestamps {
                tsval: self.ts_now(now),
                tsecr: self.ts.recent,
            });
        }
        TcpRepr {
            src_port: self.local.get().port(),
            dst_port: self.remote.get().port(),
            seq: self.acceptable_seq(),
            ack: self.rcv.nxt(),
            flags: TcpFlags(TcpFlags::RST | TcpFlags::ACK),
            options,
            ..TcpRepr::default()
        }
    }

    /// The sequence number of a RST or bare ACK we originate: SND.NXT, unless that lies
    /// beyond the right edge of the peer's window (a probe into a closed window, a window
    /// the peer shrank); then the edge. A peer with a closed window accepts a RST only at
    /// exactly RCV.NXT (RFC 9293 §3.10.7.4, RFC 5961 §3.2) and would answer one at SND.NXT
    /// with a challenge ACK, to a stack that may be gone. Linux's tcp_acceptable_seq, whose
    /// slack of one receive-scale unit is kept.
    pub fn acceptable_seq(&self) -> u32 {
        let wnd_end = self.snd.una().wrapping_add(self.snd.wnd());
        let beyond = self.snd.nxt().wrapping_sub(wnd_end) as i32;
        if beyond <= 0 || (self.rcv.wscale() > 0 && (beyond as u32) < (1u32 << self.rcv.wscale())) {
            self.snd.nxt()
        } else {
            wnd_end
        }
    }

    /// RFC 9293 ABORT: a RST is sent only in synchronized states and SYN-RECEIVED.
    pub fn abort_needs_rst(&self) -> bool {
        matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
        )
    }

    // ---- user calls -------------------------------------------------------------------

    pub fn send(
        &mut self,
        data: &[u8],
        mode: CopyMode,
        flags: super::SendFlags,
    ) -> Result<usize, Error> {
        if let Some(e) = self.error {
            // The error that ended the connection is reported once (by whichever of send,
            // recv or take_error comes first); after that the connection is just closed for
            // sending: EPIPE. Linux `sk_stream_error` / `sock_error` consume `sk_err` the same
            // way (write after RST: ECONNRESET, then EPIPE).
            if !self.error_reported {
                self.error_reported = true;
                return Err(e);
            }
            return Err(Error::BrokenPipe);
        }
        if self.snd.fin_queued() {
            return Err(Error::BrokenPipe);
        }
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait => {}
            State::Closed | State::Listen => return Err(Error::NotConnected),
            _ => return Err(Error::BrokenPipe),
        }
        if data.is_empty() {
            return Ok(0);
        }
        if flags.eor && self.snd.record_ends_full() {
            return Err(Error::WouldBlock);
        }
        let n = self.snd.queue(data, mode);
        if n > 0 {
            // The write's chunks (see `write_chunks`), for a later TCP_NOTSENT_LOWAT check;
            // computed as if the bytes were not queued yet. Only for a writer that applies
            // the option: the rest never look at them.
            if self.snd.tracks_chunks() {
                let tail = self.write_chunks(n as u64, u64::MAX, n as u32).1;
                self.snd.on_write_chunk(tail);
            }
            self.snd.on_queued(flags.more);
            // Linux marks the record's end only once the whole message is queued
            // (`tcp_sendmsg_locked`: `if (!msg_data_left(msg)) ... eor = 1`).
            if flags.eor && n == data.len() {
                self.snd.end_record();
            }
        }
        // The writer filled the ring or wants more space than it has (Linux SOCK_NOSPACE): the send
        // buffer may grow at the next ACK (`autotune.rs`).
        self.snd
            .note_write(n < data.len() || self.snd.ring().free() == 0);
        if n == 0 {
            return Err(Error::WouldBlock);
        }
        Ok(n)
    }

    pub fn recv(&mut self, buf: &mut [u8], mode: CopyMode) -> Result<usize, Error> {
        if self.rcv.posted().is_some() {
            // The posted read's bytes come before the ring's: reading the ring now would
            // reorder the stream. The application takes the posted read back first.
            return Err(Error::InvalidInput);
        }
        if let Some(n) = self.rcv.read_queued(buf, mode) {
            return Ok(n);
        }
        if self.rcv.fin_received() {
            return Ok(0);
        }
        if let Some(e) = self.error {
            if !self.error_reported {
                self.error_reported = true;
                return Err(e);
            }
            return Ok(0);
        }
        match self.state {
            State::Closed => Err(Error::NotConnected),
            _ => Err(Error::WouldBlock),
        }
    }

    /// `recv` without consuming (MSG_PEEK): the same results, the data stays queued.
    pub fn peek(&self, buf: &mut [u8], mode: CopyMode) -> Result<usize, Error> {
        if self.rcv.posted().is_some() {
            return Err(Error::InvalidInput);
        }
        if let Some(n) = self.rcv.peek_queued(buf, mode) {
            return Ok(n);
        }
        if self.rcv.fin_received() {
            return Ok(0);
        }
        if let Some(e) = self.error {
            return if self.error_reported { Ok(0) } else { Err(e) };
        }
        match self.state {
            State::Closed => Err(Error::NotConnected),
            _ => Err(Error::WouldBlock),
        }
    }

    /// RFC 9293 §3.10.4 CLOSE as a half-close: FIN after queued data.
    pub fn shutdown_write(&mut self) -> Result<(), Error> {
        match self.state {
            State::SynSent => self.enter_closed(None),
            State::SynReceived | State::Established => {
                self.snd.queue_fin();
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.snd.queue_fin();
                self.state = State::LastAck;
            }
            State::Closed => {
                if let Some(e) = self.error {
                    return Err(e);
                }
                return Err(Error::NotConnected);
            }
            _ => {}
        }
        Ok(())
    }

    /// RFC 5927 §4.1: an ICMP error is about this connection only if the TCP sequence
    /// number it quotes is one we sent and the peer has not acknowledged, SND.UNA =< SEG.SEQ
    /// < SND.NXT (SND.MAX here: after an RTO rewinds SND.NXT, a quote of a segment sent
    /// before it is still genuine). Anything else is a blind attack or stale, and ignored
    /// (Linux `tcp_v4_err`: "OutOfWindowIcmps").
    pub fn icmp_seq_acceptable(&self, quoted_seq: u32) -> bool {
        seq::le(self.snd.una(), quoted_seq) && seq::lt(quoted_seq, self.snd.max())
    }

    /// An ICMP error about this connection (RFC 1122 §4.2.3.9, RFC 1191 for PMTU).
    pub fn icmp(&mut self, err: IcmpError) -> bool {
        match err {
            IcmpError::FragNeeded { mtu } => {
                // RFC 1191 §6.3 / RFC 8201: lower the MSS to the path MTU minus 40 header bytes
                // (IPv4) or 60 (IPv6, RFC 8200 §8.3), floored at the family's default MSS
                // (forged ICMP must not shrink segments to nothing; RFC 8201 §4: an IPv6 path
                // is never below 1280), and resend what is outstanding in the new size.
                let overhead = if self.remote.get().is_ipv6() {
                    IPV6_MSS_OVERHEAD
                } else {
                    IPV4_MSS_OVERHEAD
                };
                let new = u32::from(mtu)
                    .saturating_sub(overhead as u32)
                    .max(default_mss(&self.remote.get()));
                if self.state == State::SynSent {
                    // Before the handshake the path's MTU bounds what we announce too (Linux
                    // `tcp_advertise_mss`: the route's advmss after the PMTU update lowers
                    // `tp->advmss`), and the MSS the SYN-ACK then gives is clamped to it. A
                    // SYN whose data did not fit goes again at once, without the data (Linux
                    // `tcp_simple_retransmit`: a Fast Open SYN in SYN-SENT marks everything
                    // lost); the data follows the handshake.
                    let cap = u16::try_from(new).unwrap_or(u16::MAX);
                    if cap < self.config.mss {
                        self.config.mss = cap;
                        if self.fastopen.syn_data_len > 0 && self.snd.max() != self.snd.iss() {
                            self.snd.rewind_to_syn();
                        }
                    }
                }
                if self.snd.lower_mss(new)
                    && self.is_synchronized()
                    && self.snd.max() != self.snd.una()
                {
                    self.snd.rewind();
                    self.snd.abandon_recovery();
                }
                false
            }
            IcmpError::Unreachable { .. } => {
                // Hard errors abort a connection that is still opening.
                if self.state == State::SynSent {
                    self.enter_closed(Some(Error::ConnectionRefused));
                    return true;
                }
                // Linux `tcp_v6_err`: a hard ICMPv6 error drops a request still in
                // SYN-RECEIVED (`tcp_req_err`); over IPv4 only net/host unreachable do
                // (`RouteUnreachable`).
                if self.state == State::SynReceived && self.passive && self.remote.get().is_ipv6() {
                    self.enter_closed(None);
                    return true;
                }
                false
            }
            IcmpError::RouteUnreachable => {
                if self.state == State::SynReceived && self.passive {
                    self.enter_closed(None);
                    return true;
                }
                false
            }
            IcmpError::Soft => false,
        }
    }

    /// `(window field, right edge)` to advertise now (RFC 9293 §3.8.6.2.2 receiver SWS
    /// avoidance, RFC 7323 §2.3 scaling; the right edge never moves left, RFC 9293 §3.8.6).
    pub fn rcv_window(&self) -> (u16, u32) {
        self.rcv.window(self.rcv.buf() as u32)
    }

    /// A pure window update is worth a segment (see [`Receiver::window_update_owed`]).
    pub fn window_update_needed(&self) -> bool {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) || self.rcv.fin_received()
        {
            return false;
        }
        self.rcv.window_update_owed(self.rcv.buf() as u32)
    }

    pub fn set_config(&mut self, c: Config) {
        let c = sanitize(c);
        // Buffer sizes and ceilings are fixed at creation (the window scale depends on them);
        // auto-tuning grows the buffers of a live connection.
        self.config.nodelay = c.nodelay;
        self.config.cork = c.cork;
        self.config.tos = c.tos;
        self.config.keepalive = c.keepalive;
        self.config.delayed_ack = c.delayed_ack;
        self.config.max_retransmits = c.max_retransmits;
        self.config.syn_retries = c.syn_retries;
        self.config.user_timeout = c.user_timeout;
        self.config.rto_min = c.rto_min;
        self.config.linger = c.linger;
        self.config.time_wait = c.time_wait;
        self.snd.set_rto_min(c.rto_min);
        if c.congestion != self.config.congestion {
            // Linux `tcp_reinit_congestion_control` (TCP_CONGESTION on a live socket): the
            // new algorithm starts from its own initial state; cwnd and ssthresh stay.
            self.snd.on_cc_changed(c.congestion);
            self.config.congestion = c.congestion;
        }
    }
}

#[cfg(test)]
mod challenge_tests {
    use super::*;

    /// Quotas follow Linux's `get_random_u32_inclusive(half, ack_limit + half - 1)`: inside
    /// the range, not one fixed value, and spent one per challenge ACK within a second.
    #[test]
    fn quota_is_random_in_linux_range() {
        let mut l = ChallengeLimiter::new(Some(1000), [9; 16]);
        let mut seen = std::collections::BTreeSet::new();
        for sec in 0..200u64 {
            let now = Instant::from_micros(sec * 1_000_000 + 17);
            let mut n = 0u32;
            while l.allow(now) {
                n += 1;
                assert!(n <= 1499);
            }
            assert!((500..=1499).contains(&n), "quota {n}");
            seen.insert(n);
        }
        assert!(seen.len() > 150, "quotas barely vary: {seen:?}");
        // Odd limits: half rounds up, as `(ack_limit + 1) >> 1`.
        let mut l = ChallengeLimiter::new(Some(1), [3; 16]);
        assert!(l.allow(Instant::ZERO));
        assert!(!l.allow(Instant::ZERO));
        let mut l = ChallengeLimiter::new(Some(u32::MAX), [3; 16]);
        assert!(l.allow(Instant::ZERO));
        // No limit, and limit 0.
        let mut l = ChallengeLimiter::new(None, [3; 16]);
        assert!((0..10_000).all(|_| l.allow(Instant::ZERO)));
        l.set_limit(Some(0));
        assert!(!l.allow(Instant::ZERO));
    }
}
