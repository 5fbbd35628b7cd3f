//! One connection's transmission control block (RFC 9293 §3.3.1) and its user-facing calls.
//! Segment arrival is in `input.rs`, segment generation in `output.rs`, timers in `timers.rs`.

use super::buffer::{RecvRing, RingCache, SendRing};
use super::cc::Cc;
use super::rtt::RttEstimator;
use super::sack::{RxtTracker, SackHistory, Scoreboard};
use super::{isn, seq, Config, Error, IcmpError, State, Stats};
use crate::mem::CopyMode;
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpRepr};
use crate::wire::Ipv4Addr;
use std::collections::VecDeque;
use std::net::SocketAddrV4;

/// RFC 9293 §3.7.1: the MSS assumed when the peer sends no MSS option; also our PMTU floor
/// (RFC 8201 spirit: never trust an ICMP message to push us below the IPv4 default datagram
/// size of 576 bytes minus 40 header bytes).
pub const DEFAULT_MSS: u32 = 536;
/// Largest buffer accepted (RFC 7323 §2.3: window scale shift at most 14, windows < 2^30).
pub const MAX_BUFFER: usize = 1 << 30;
/// Bound on the layer's queue of RSTs/replies not tied to a connection.
pub const RST_QUEUE_MAX: usize = 256;

/// Replies the layer queues for segments that have no connection (RSTs).
pub type RstQueue = VecDeque<(Ipv4Addr, Ipv4Addr, TcpRepr)>;

/// RFC 5961 §7: a system-wide limit on challenge ACKs per second.
pub const CHALLENGE_ACK_LIMIT: u32 = 1000;

#[derive(Debug, Default)]
pub struct ChallengeLimiter {
    window_start: Instant,
    count: u32,
}

impl ChallengeLimiter {
    pub fn allow(&mut self, now: Instant) -> bool {
        if now.saturating_since(self.window_start).total_micros() >= 1_000_000 {
            self.window_start = now;
            self.count = 0;
        }
        if self.count < CHALLENGE_ACK_LIMIT {
            self.count += 1;
            true
        } else {
            false
        }
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
    pub fn queue_rst(&mut self, src: Ipv4Addr, dst: Ipv4Addr, repr: TcpRepr) {
        if self.rsts.len() >= RST_QUEUE_MAX {
            self.stats.rst_dropped += 1;
            return;
        }
        self.rsts.push_back((src, dst, repr));
    }

    /// RFC 9293 §3.10.7.1 reset for a segment that reached no (usable) connection: never in
    /// answer to a RST; `<SEQ=SEG.ACK><CTL=RST>` if the segment had ACK, otherwise
    /// `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
    pub fn reply_rst(&mut self, local: Ipv4Addr, remote: Ipv4Addr, seg: &TcpRepr, len: usize) {
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

/// Loss recovery in progress (RFC 6675 §5 with SACK, RFC 6582 without).
#[derive(Debug, Clone, Copy)]
pub struct Recovery {
    /// RecoveryPoint / "recover": SND.MAX when recovery started.
    pub point: u32,
    pub sack: bool,
    /// One past the highest byte retransmitted in this recovery (HighRxt + 1).
    pub rxt_next: u32,
    /// The segment at SND.UNA must be retransmitted now (entry, or a NewReno partial ACK).
    pub rxt_una: bool,
}

#[derive(Debug)]
pub struct Conn {
    /// Segments one transmission may span (GSO, set by the layer from the stack's
    /// [`TcpLayer::set_gso_segs`](super::TcpLayer::set_gso_segs)); 1 = MSS-sized segments.
    pub gso_segs: u32,
    pub local: SocketAddrV4,
    pub remote: SocketAddrV4,
    pub state: State,
    pub config: Config,
    pub passive: bool,
    /// Listener slot this half-open/unaccepted connection belongs to.
    pub parent: Option<u32>,
    /// The application holds a handle (connect(), or accept() returned it).
    pub owned: bool,
    /// The application called close(): the layer frees the connection when it is done.
    pub user_closed: bool,
    /// Counted in the parent listener's SYN queue (half-open).
    pub in_syn_queue: bool,

    // Send sequence space (RFC 9293 §3.3.1).
    pub iss: u32,
    pub snd_una: u32,
    pub snd_nxt: u32,
    /// Highest sequence number sent + 1 (snd_nxt may be rewound by an RTO).
    pub snd_max: u32,
    pub snd_wnd: u32,
    pub max_snd_wnd: u32,
    pub snd_wl1: u32,
    pub snd_wl2: u32,
    /// Peer's window shift (applied to its window field) and ours (RFC 7323 §2).
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    /// Both SYNs carried a window-scale option (RFC 7323 §2.2).
    pub ws_ok: bool,
    /// Sequence number of the first byte in `snd`.
    pub snd_buf_seq: u32,
    pub snd: SendRing,
    /// shutdown_write()/close() was called: a FIN follows the queued data.
    pub fin_queued: bool,

    // Receive sequence space.
    pub irs: u32,
    pub rcv_nxt: u32,
    /// Right edge of the window we last advertised.
    pub rcv_adv: u32,
    pub last_ack_sent: u32,
    pub rcv: RecvRing,
    /// The peer's FIN sequence number, when its FIN arrived (maybe ahead of missing data).
    pub rcv_fin: Option<u32>,
    pub fin_received: bool,

    pub mss: u32,
    /// Largest segment seen from the peer (for "ACK every second full-sized segment").
    pub rcv_mss: u32,

    pub ts_enabled: bool,
    pub ts_offset: u32,
    pub ts_recent: u32,
    pub ts_recent_at: Instant,
    pub sack_ok: bool,

    pub rtt: RttEstimator,
    /// Karn's algorithm without timestamps: (sequence number whose ACK ends the sample, sent at).
    pub rtt_timing: Option<(u32, Instant)>,
    pub cc: Cc,
    pub dupacks: u32,
    pub recovery: Option<Recovery>,
    /// RFC 6582 `recover`: no new fast recovery until the ACK passes it.
    pub recover: u32,
    pub scoreboard: Scoreboard,
    pub rxt: RxtTracker,
    pub sack_hist: SackHistory,

    pub rto_at: Option<Instant>,
    pub delack_at: Option<Instant>,
    pub persist_at: Option<Instant>,
    pub timewait_at: Option<Instant>,
    pub retries: u32,
    pub persist_backoff: u32,
    pub probes_unanswered: u32,
    pub ka_probes: u32,
    pub last_ka: Instant,
    pub last_rx: Instant,
    /// When data was last sent (RFC 5681 §4.1 restart after idle).
    pub last_data_tx: Instant,

    pub ack_now: bool,
    /// ACKs owed for every second full-sized segment received within one input batch
    /// (RFC 5681 §4.2), as (ACK number, TSecr) snapshots; output sends them in order. Bounded:
    /// when full the newest is overwritten (a stretch ACK, as with GRO).
    pub ack_snaps: [(u32, u32); 8],
    pub n_snaps: usize,
    /// When we last answered an unacceptable segment without data.
    pub last_oow_ack: Option<Instant>,
    pub unacked_bytes: usize,
    pub persist_probe_due: bool,
    /// RFC 8985 §7 tail loss probe: probe timeout, probe due, and the episode in progress
    /// (TLP.end_seq, whether the probe was a retransmission).
    pub pto_at: Option<Instant>,
    pub tlp_due: bool,
    pub tlp_end: Option<(u32, bool)>,
    pub keepalive_due: bool,
    pub error: Option<Error>,
    pub error_reported: bool,
    /// Queued on the layer's active list.
    pub in_active: bool,
    /// The deadline under which this connection sits in the layer's timer heap.
    pub timer_reg: Option<Instant>,
}

fn sanitize(mut c: Config) -> Config {
    c.recv_buffer = c.recv_buffer.clamp(1, MAX_BUFFER);
    c.send_buffer = c.send_buffer.clamp(1, MAX_BUFFER);
    c.mss = c.mss.max(64);
    c
}

/// RFC 7323 §2.3: the smallest shift that lets the 16-bit field cover the buffer, at most 14.
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
        local: SocketAddrV4,
        remote: SocketAddrV4,
        config: Config,
        passive: bool,
        rings: &mut RingCache,
    ) -> Self {
        let config = sanitize(config);
        let iss = isn::isn(secret, now, local, remote);
        let rcv_wscale = if config.window_scaling {
            wscale_for(config.recv_buffer)
        } else {
            0
        };
        let mss = u32::from(config.mss);
        Conn {
            gso_segs: 1,
            local,
            remote,
            state: State::Closed,
            config,
            passive,
            parent: None,
            owned: false,
            user_closed: false,
            in_syn_queue: false,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: 0,
            snd_wl2: 0,
            snd_wscale: 0,
            rcv_wscale,
            ws_ok: false,
            snd_buf_seq: iss.wrapping_add(1),
            snd: SendRing::from_cache(if passive { 0 } else { config.send_buffer }, rings),
            fin_queued: false,
            irs: 0,
            rcv_nxt: 0,
            rcv_adv: 0,
            last_ack_sent: 0,
            // Slack of one window-scale unit: the advertised window is rounded up.
            rcv: RecvRing::from_cache(
                if passive {
                    0
                } else {
                    config.recv_buffer + (1usize << rcv_wscale)
                },
                rings,
            ),
            rcv_fin: None,
            fin_received: false,
            mss: mss.clamp(64, DEFAULT_MSS),
            rcv_mss: DEFAULT_MSS.min(mss),
            ts_enabled: false,
            ts_offset: isn::ts_offset(secret, local, remote),
            ts_recent: 0,
            ts_recent_at: now,
            sack_ok: false,
            rtt: RttEstimator::new(config.rto_initial, config.rto_min),
            rtt_timing: None,
            cc: Cc::new(config.congestion, mss),
            dupacks: 0,
            recovery: None,
            recover: iss,
            scoreboard: Scoreboard::new(),
            rxt: RxtTracker::default(),
            sack_hist: SackHistory::default(),
            rto_at: None,
            delack_at: None,
            persist_at: None,
            timewait_at: None,
            retries: 0,
            persist_backoff: 0,
            probes_unanswered: 0,
            ka_probes: 0,
            last_ka: now,
            last_rx: now,
            last_data_tx: now,
            ack_now: false,
            ack_snaps: [(0, 0); 8],
            n_snaps: 0,
            last_oow_ack: None,
            unacked_bytes: 0,
            persist_probe_due: false,
            pto_at: None,
            tlp_due: false,
            tlp_end: None,
            keepalive_due: false,
            error: None,
            error_reported: false,
            in_active: false,
            timer_reg: None,
        }
    }

    /// Active open: SYN-SENT with the SYN due at the next output.
    pub fn new_active(
        now: Instant,
        secret: &[u8; 16],
        local: SocketAddrV4,
        remote: SocketAddrV4,
        config: Config,
        rings: &mut RingCache,
    ) -> Self {
        let mut c = Conn::new(now, secret, local, remote, config, false, rings);
        c.state = State::SynSent;
        c.owned = true;
        c
    }

    /// Passive open from a SYN received by a listener (RFC 9293 §3.10.7.2, LISTEN state).
    pub fn new_passive(
        now: Instant,
        secret: &[u8; 16],
        local: SocketAddrV4,
        remote: SocketAddrV4,
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
        c.irs = syn.seq;
        c.rcv_nxt = syn.seq.wrapping_add(1);
        c.rcv_adv = c.rcv_nxt;
        c.last_ack_sent = c.rcv_nxt;
        c.negotiate(now, syn);
        // The SYN window field is never scaled (RFC 7323 §2.2).
        c.snd_wnd = u32::from(syn.window);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = syn.seq;
        c.snd_wl2 = c.iss;
        c
    }

    /// Passive opens allocate their buffers only when the handshake completes, so a SYN flood
    /// costs a small control block per half-open connection, not two buffers.
    pub fn alloc_buffers(&mut self, rings: &mut RingCache) {
        if self.snd.capacity() == 0 && self.snd.is_empty() {
            self.snd = SendRing::from_cache(self.config.send_buffer, rings);
        }
        if self.rcv.capacity() == 0 {
            self.rcv =
                RecvRing::from_cache(self.config.recv_buffer + (1usize << self.rcv_wscale), rings);
        }
    }

    /// Gives ring storage nobody can use any more back to the stack's cache: the send ring of
    /// a connection in CLOSED or TIME-WAIT (nothing more will be sent), and the receive ring
    /// once the connection is closed and either the application closed it or an error means
    /// there is nothing left to read. The layer calls this after every input, timer run and
    /// user call, and `release_all` when it frees the connection.
    pub fn reclaim_buffers(&mut self, rings: &mut RingCache) {
        match self.state {
            State::Closed => {
                self.snd.release(rings);
                if self.error.is_some() || self.user_closed {
                    self.rcv.release(rings);
                }
            }
            State::TimeWait => self.snd.release(rings),
            _ => {}
        }
    }

    /// Gives both rings back to the stack's cache (the connection is being freed).
    pub fn release_all(&mut self, rings: &mut RingCache) {
        self.snd.release(rings);
        self.rcv.release(rings);
    }

    /// Applies the peer's SYN options (RFC 9293 §3.7.1 MSS, RFC 7323 §2.2/§3.2, RFC 2018 §2).
    pub fn negotiate(&mut self, now: Instant, syn: &TcpRepr) {
        let o = &syn.options;
        let peer_mss = o.mss.map_or(DEFAULT_MSS, u32::from).max(64);
        self.mss = peer_mss.min(u32::from(self.config.mss));
        match (self.config.window_scaling, o.window_scale) {
            (true, Some(ws)) => {
                // §2.3: a shift above 14 is used as 14.
                self.snd_wscale = ws.min(14);
                self.ws_ok = true;
            }
            _ => {
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
            }
        }
        self.sack_ok = self.config.sack && o.sack_permitted;
        match (self.config.timestamps, o.timestamps) {
            (true, Some(ts)) => {
                self.ts_enabled = true;
                self.ts_recent = ts.tsval;
                self.ts_recent_at = now;
            }
            _ => self.ts_enabled = false,
        }
        // Re-seed the initial window now that the MSS is known (RFC 6928).
        self.cc = Cc::new(self.config.congestion, self.mss);
    }

    pub fn is_synchronized(&self) -> bool {
        !matches!(
            self.state,
            State::Closed | State::Listen | State::SynSent | State::SynReceived
        )
    }

    /// Our TSval: milliseconds since the epoch plus the per-connection offset (RFC 7323 §5.4).
    pub fn ts_now(&self, now: Instant) -> u32 {
        (now.total_millis() as u32).wrapping_add(self.ts_offset)
    }

    /// Sequence number of our FIN (valid once `fin_queued`).
    pub fn fin_seq(&self) -> u32 {
        self.snd_buf_seq.wrapping_add(self.snd.len() as u32)
    }

    pub fn fin_acked(&self) -> bool {
        self.fin_queued && seq::gt(self.snd_una, self.fin_seq())
    }

    /// Data or a FIN is queued and not yet acknowledged.
    pub fn send_pending(&self) -> bool {
        seq::lt(
            self.snd_una,
            self.fin_seq().wrapping_add(u32::from(self.fin_queued)),
        )
    }

    /// Option bytes in a non-SYN segment we send now (RFC 7323 §3.2: timestamps take 10
    /// bytes + 2 NOPs; RFC 2018 §3: SACK takes 2 + 8n bytes + 2 NOPs).
    pub fn option_len(&self) -> u32 {
        let mut n = 0;
        if self.ts_enabled {
            n += 12;
        }
        let blocks = self.sack_blocks_to_send();
        if blocks > 0 {
            n += 4 + 8 * blocks as u32;
        }
        n
    }

    /// How many SACK blocks the next segment carries.
    pub fn sack_blocks_to_send(&self) -> usize {
        if !self.sack_ok || self.rcv.asm.is_empty() {
            return 0;
        }
        let max = if self.ts_enabled { 3 } else { 4 };
        self.sack_hist.blocks().len().min(max)
    }

    /// Payload bytes per segment: RFC 9293 §3.7.1, Eff.snd.MSS minus the TCP options we add,
    /// so that header + options + data never exceed the peer's MSS + 40 (the MTU).
    pub fn seg_mss(&self) -> u32 {
        self.mss.saturating_sub(self.option_len()).max(32)
    }

    pub fn flight(&self) -> u32 {
        self.snd_max.wrapping_sub(self.snd_una)
    }

    /// Moves to CLOSED, recording `err`; timers stop. Buffers go when nobody can read them.
    pub fn enter_closed(&mut self, err: Option<Error>) {
        self.state = State::Closed;
        if err.is_some() {
            self.error = err;
        }
        // The rings go back to the stack's cache through `reclaim_buffers`.
        self.rto_at = None;
        self.delack_at = None;
        self.persist_at = None;
        self.timewait_at = None;
        self.ack_now = false;
        self.n_snaps = 0;
        self.pto_at = None;
        self.tlp_due = false;
        self.persist_probe_due = false;
        self.keepalive_due = false;
    }

    /// RFC 9293 §3.6.1: TIME-WAIT for 2*MSL (`Config::time_wait`).
    pub fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timewait_at = Some(now + self.config.time_wait);
        self.rto_at = None;
        self.persist_at = None;
    }

    /// A RST for this connection, to be queued by the layer (abort, data after close).
    pub fn make_rst(&self) -> TcpRepr {
        TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq: self.snd_nxt,
            ack: self.rcv_nxt,
            flags: TcpFlags(TcpFlags::RST | TcpFlags::ACK),
            ..TcpRepr::default()
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

    pub fn send(&mut self, data: &[u8], mode: CopyMode) -> Result<usize, Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.fin_queued {
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
        let n = self.snd.push(data, mode);
        if n == 0 {
            return Err(Error::WouldBlock);
        }
        Ok(n)
    }

    pub fn recv(&mut self, buf: &mut [u8], mode: CopyMode) -> Result<usize, Error> {
        if !self.rcv.is_empty() {
            let n = self.rcv.read(buf, mode);
            return Ok(n);
        }
        if self.fin_received {
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

    /// RFC 9293 §3.10.4 CLOSE as a half-close: FIN after queued data.
    pub fn shutdown_write(&mut self) -> Result<(), Error> {
        match self.state {
            State::SynSent => self.enter_closed(None),
            State::SynReceived | State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
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

    /// An ICMP error about this connection (RFC 1122 §4.2.3.9, RFC 1191 for PMTU).
    pub fn icmp(&mut self, err: IcmpError) -> bool {
        match err {
            IcmpError::FragNeeded { mtu } => {
                // RFC 1191 §6.3 / RFC 8201: lower the MSS to the path MTU minus 40 header bytes,
                // floored at DEFAULT_MSS (forged ICMP must not shrink segments to nothing), and
                // resend what is outstanding in the new size.
                let new = u32::from(mtu).saturating_sub(40).max(DEFAULT_MSS);
                if new < self.mss {
                    self.mss = new;
                    if self.is_synchronized() && self.snd_max != self.snd_una {
                        self.snd_nxt = self.snd_una;
                        self.recovery = None;
                    }
                }
                false
            }
            IcmpError::Unreachable { .. } => {
                // Hard errors abort a connection that is still opening.
                if self.state == State::SynSent {
                    self.enter_closed(Some(Error::ConnectionRefused));
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
        let buf = self.config.recv_buffer as u32;
        let free = buf.saturating_sub(self.rcv.len() as u32);
        let cur = seq::dist(self.rcv_nxt, self.rcv_adv);
        let mut wnd = free;
        let threshold = (buf / 2).min(self.rcv_mss).max(1);
        if wnd > cur && wnd - cur < threshold {
            wnd = cur;
        }
        wnd = wnd.max(cur);
        let ws = u32::from(self.rcv_wscale);
        let field = ((u64::from(wnd) + (1u64 << ws) - 1) >> ws).min(0xffff) as u32;
        (field as u16, self.rcv_nxt.wrapping_add(field << ws))
    }

    /// A window update is worth a segment: the edge would move right substantially and the
    /// currently advertised space is at most half the buffer.
    pub fn window_update_needed(&self) -> bool {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) || self.fin_received
        {
            return false;
        }
        let (_, edge) = self.rcv_window();
        let grow = seq::dist(self.rcv_adv, edge);
        let cur = seq::dist(self.rcv_nxt, self.rcv_adv);
        grow > 0 && cur <= self.config.recv_buffer as u32 / 2
    }

    pub fn set_config(&mut self, c: Config) {
        let c = sanitize(c);
        // Buffers are allocated at creation; sizes cannot change on a live connection.
        self.config.nodelay = c.nodelay;
        self.config.keepalive = c.keepalive;
        self.config.delayed_ack = c.delayed_ack;
        self.config.max_retransmits = c.max_retransmits;
        self.config.rto_min = c.rto_min;
        self.config.linger = c.linger;
        self.config.time_wait = c.time_wait;
        self.rtt.set_rto_min(c.rto_min);
    }
}
