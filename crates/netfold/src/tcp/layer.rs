//! `TcpLayer`: demultiplexing, listeners, handles, the RST queue and the output loop.
//!
//! Addresses are family-generic (`std::net::SocketAddr`); each connection is kept in the
//! family it runs on (an IPv4 connection of an IPv6 socket has IPv4 addresses and the
//! `mapped` flag, see [`TcpLayer::listen`] for the dual-stack rules). The connection table is
//! keyed by a compact [`ConnKey`] (12 bytes of IPv4 tuple, 36 of IPv6) so the IPv4 path hashes
//! and compares what it did before the generalisation.

use super::buffer::RingCache;
use super::conn::{ChallengeLimiter, Conn, Ctx, Event, RstQueue, RST_QUEUE_MAX};
use super::ephemeral::EphemeralPorts;
use super::listener::Listener;
use super::output::OutputStatus;
use super::place::{self, PostedRead, RxCheck};
use super::secret::Secret;
use super::syncookie;
use super::{Config, Ecn, Error, Handle, IcmpError, OutSegment, Payload, State, Stats};
use crate::buf::borrow::ConnShare;
use crate::buf::{BorrowedPayload, PacketBuf, Recycler};
use crate::mem::CopyMode;
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpRepr};
use crate::wire::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::Arc;

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

/// A connection's 4-tuple as the connection table keys it: both ports in one word and the
/// addresses in their family's width, so an IPv4 lookup hashes 12 bytes and compares a tag, a
/// `u64` and a `u32` (what the `(SocketAddrV4, SocketAddrV4)` key cost before), and an IPv6
/// one 36 bytes. Built from wire addresses only: a v4-mapped IPv6 address never appears in a
/// key (IPv4 connections are keyed as IPv4, see [`wire_addr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnKey {
    /// Local port << 16 | remote port.
    ports: u32,
    addrs: KeyAddrs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyAddrs {
    /// Local address << 32 | remote address.
    V4(u64),
    /// Local address then remote address.
    V6([u8; 32]),
}

impl Hash for ConnKey {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        match &self.addrs {
            KeyAddrs::V4(a) => h.write_u64(*a),
            KeyAddrs::V6(a) => {
                for w in a.chunks_exact(8) {
                    h.write_u64(u64::from_le_bytes(w.try_into().unwrap_or_default()));
                }
            }
        }
        h.write_u32(self.ports);
    }
}

/// The connection table's hasher: SipHash-1-3 with random keys, the function std's
/// `RandomState` computes (so the table stays flood-resistant), written for [`ConnKey`]'s
/// whole words. std's streaming implementation buffers every `write` byte-wise and cost
/// ~190 instructions per lookup; TCP_CRR does about a dozen lookups per transaction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHashBuilder {
    k0: u64,
    k1: u64,
}

impl KeyHashBuilder {
    /// Keys drawn from std's per-process random `RandomState` keys.
    fn random() -> Self {
        use std::hash::BuildHasher;
        let rs = std::collections::hash_map::RandomState::new();
        KeyHashBuilder {
            k0: rs.hash_one(0x6e65_7466_6f6c_6430u64),
            k1: rs.hash_one(0x6e65_7466_6f6c_6431u64),
        }
    }
}

impl std::hash::BuildHasher for KeyHashBuilder {
    type Hasher = KeyHasher;
    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            v: [
                self.k0 ^ 0x736f_6d65_7073_6575,
                self.k1 ^ 0x646f_7261_6e64_6f6d,
                self.k0 ^ 0x6c79_6765_6e65_7261,
                self.k1 ^ 0x7465_6462_7974_6573,
            ],
            tail: 0,
            ntail: 0,
            len: 0,
        }
    }
}

/// SipHash-1-3 state (see [`KeyHashBuilder`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHasher {
    v: [u64; 4],
    /// Bytes not yet compressed (little-endian, `ntail` of them).
    tail: u64,
    ntail: u32,
    len: u64,
}

impl KeyHasher {
    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }

    #[inline(always)]
    fn compress(&mut self, m: u64) {
        self.v[3] ^= m;
        Self::round(&mut self.v);
        self.v[0] ^= m;
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.tail |= u64::from(b) << (8 * self.ntail);
            self.ntail += 1;
            if self.ntail == 8 {
                let m = self.tail;
                self.compress(m);
                self.tail = 0;
                self.ntail = 0;
            }
        }
        self.len += bytes.len() as u64;
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        if self.ntail == 0 {
            self.compress(x);
            self.len += 8;
        } else {
            self.write(&x.to_le_bytes());
        }
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        if self.ntail == 0 {
            self.tail = u64::from(x);
            self.ntail = 4;
            self.len += 4;
        } else {
            self.write(&x.to_le_bytes());
        }
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut v = self.v;
        let m = (self.len & 0xff) << 56 | self.tail;
        v[3] ^= m;
        Self::round(&mut v);
        v[0] ^= m;
        v[2] ^= 0xff;
        Self::round(&mut v);
        Self::round(&mut v);
        Self::round(&mut v);
        v[0] ^ v[1] ^ v[2] ^ v[3]
    }
}

impl ConnKey {
    /// The key of the connection from `local` to `remote` (addresses of one family; a mixed
    /// pair, which no connection has, is keyed as IPv6 with the IPv4 side v4-mapped).
    #[inline]
    pub(crate) fn new(local: IpAddr, local_port: u16, remote: IpAddr, remote_port: u16) -> Self {
        let ports = u32::from(local_port) << 16 | u32::from(remote_port);
        let addrs = match (local, remote) {
            (IpAddr::V4(l), IpAddr::V4(r)) => {
                KeyAddrs::V4(u64::from(u32::from(l)) << 32 | u64::from(u32::from(r)))
            }
            (l, r) => {
                let mut a = [0u8; 32];
                a[..16].copy_from_slice(&v6_of(l).octets());
                a[16..].copy_from_slice(&v6_of(r).octets());
                KeyAddrs::V6(a)
            }
        };
        ConnKey { ports, addrs }
    }

    fn of(local: SocketAddr, remote: SocketAddr) -> Self {
        ConnKey::new(local.ip(), local.port(), remote.ip(), remote.port())
    }
}

/// The last two connections the layer's input found, or entered in the table, newest first:
/// their segments skip the (SipHash-keyed, flood-resistant but slow) table lookup. A bulk
/// flow hits the first entry. Two, because connections overlap: in TCP_CRR the previous
/// connection's FIN exchange crosses the next one's handshake (the client's SYN-ACK arrives
/// after the old FIN, the server's final ACK after the new SYN), and a single entry missed
/// four times a transaction. Every entry is an entry of `conns`: set to each one inserted
/// (which may replace the 4-tuple's older one), dropped when its slot's entry is removed
/// (`unmap`).
#[derive(Debug, Default, Clone, Copy)]
struct HitCache([Option<(ConnKey, u32)>; 2]);

impl HitCache {
    #[inline]
    fn get(&self, key: &ConnKey) -> Option<u32> {
        match &self.0 {
            [Some((k, i)), _] if k == key => Some(*i),
            [_, Some((k, i))] if k == key => Some(*i),
            _ => None,
        }
    }

    /// `key` is (now) slot `i`'s: it becomes the newest entry, the newest the older one
    /// (unless it was the same 4-tuple, whose slot `i` replaces).
    #[inline]
    fn put(&mut self, key: ConnKey, i: u32) {
        if !matches!(self.0[0], Some((k, _)) if k == key) {
            self.0[1] = self.0[0];
        }
        self.0[0] = Some((key, i));
    }

    /// Slot `i` left the table.
    fn forget(&mut self, i: u32) {
        for e in &mut self.0 {
            if matches!(e, Some((_, j)) if *j == i) {
                *e = None;
            }
        }
    }

    #[cfg(test)]
    fn newest(&self) -> Option<(ConnKey, u32)> {
        self.0[0]
    }
}

fn v6_of(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The form an address has on the wire and in the tables: a v4-mapped IPv6 address
/// (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2) is its IPv4 address, and an IPv6 address loses its
/// flow label and scope id (one interface; neither is part of the 4-tuple). The bool says
/// whether the address was v4-mapped.
pub(crate) fn wire_addr(a: SocketAddr) -> (SocketAddr, bool) {
    match a {
        SocketAddr::V4(_) => (a, false),
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => (SocketAddr::V4(SocketAddrV4::new(v4, v6.port())), true),
            None => (
                SocketAddr::V6(SocketAddrV6::new(*v6.ip(), v6.port(), 0, 0)),
                false,
            ),
        },
    }
}

/// How an IPv6 socket sees an IPv4 address: v4-mapped (RFC 3493 §3.7, as Linux and std
/// report IPv4 peers of a dual-stack socket).
pub(crate) fn mapped_addr(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v4) => {
            SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0))
        }
        v6 => v6,
    }
}

/// The IPv6 wildcard `[::]:port`.
fn any6(port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0))
}
/// The IPv4 wildcard `0.0.0.0:port`.
fn any4(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
}

#[derive(Debug)]
enum Sock {
    Conn(Box<Conn>),
    /// Boxed like a connection: slots stay small (a listener holds its address, config and
    /// queues; none of it is on the per-segment path).
    Listener(Box<Listener>),
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    sock: Option<Sock>,
}

/// All TCP state of one stack: connections, listeners, TIME_WAIT, pending replies.
#[derive(Debug)]
pub struct TcpLayer {
    secret: Secret,
    /// Answer SYNs with cookies once a listener's SYN queue is full (default on, as Linux
    /// `tcp_syncookies=1`).
    syn_cookies: bool,
    stats: Stats,
    slots: Vec<Slot>,
    free: Vec<u32>,
    conns: HashMap<ConnKey, u32, KeyHashBuilder>,
    /// The connections `input` found last, or entered in the table last (see [`HitCache`]).
    last_hit: HitCache,
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
    /// The address range of each frame of the receive batch being processed (empty outside
    /// `Stack::poll`'s batch: nothing is borrowed then).
    batch: Vec<(usize, usize)>,
    /// Slots whose connections committed frames of this batch (adopted at its end).
    borrowers: Vec<u32>,
    /// Scratch for `collect_released`.
    released: Vec<(u32, u32)>,
    released_bufs: Vec<PacketBuf>,
}

impl TcpLayer {
    /// `secret` keys the RFC 6528 ISN function, RFC 6056 ephemeral port selection and SYN
    /// cookies ([`Secret::random`] for any stack that faces a network).
    pub fn new(secret: Secret) -> Self {
        TcpLayer {
            secret,
            syn_cookies: true,
            stats: Stats::default(),
            slots: Vec::new(),
            free: Vec::new(),
            conns: HashMap::with_hasher(KeyHashBuilder::random()),
            last_hit: HitCache::default(),
            gso_segs: 1,
            listeners: HashMap::new(),
            rsts: RstQueue::new(),
            challenge: ChallengeLimiter::default(),
            ports: EphemeralPorts::new(),
            last_now: Instant::ZERO,
            active: VecDeque::new(),
            timers: BinaryHeap::new(),
            rings: RingCache::new(),
            spare: Vec::new(),
            copy: CopyMode::default(),
            link_mss_v6: crate::wire::tcp::ipv6_mss_for_mtu(1500),
            recycler: Recycler::new(DEFAULT_FRAME_BUDGET),
            batch: Vec::new(),
            borrowers: Vec::new(),
            released: Vec::new(),
            released_bufs: Vec::new(),
        }
    }

    /// `c` in a control block of the free list, or a new box.
    #[inline]
    fn boxed(&mut self, c: Conn) -> Box<Conn> {
        match self.spare.pop() {
            Some(mut b) => {
                b.renew(c);
                b
            }
            None => Box::new(c),
        }
    }

    /// A passive connection into a slot and the table under `key`; the lookup cache gets it
    /// too (its next segment, the handshake's ACK, then needs no table lookup).
    fn enter_conn(&mut self, key: ConnKey, c: Conn) -> u32 {
        let b = self.boxed(c);
        let i = self.alloc(Sock::Conn(b));
        self.conns.insert(key, i);
        self.last_hit.put(key, i);
        i
    }

    /// The slot the next `alloc` returns.
    fn next_slot(&self) -> u32 {
        match self.free.last() {
            Some(&i) => i,
            None => self.slots.len() as u32,
        }
    }

    fn alloc(&mut self, sock: Sock) -> u32 {
        if let Some(i) = self.free.pop() {
            self.slots[i as usize].sock = Some(sock);
            i
        } else {
            self.slots.push(Slot {
                generation: 0,
                sock: Some(sock),
            });
            (self.slots.len() - 1) as u32
        }
    }

    fn handle_of(&self, i: u32) -> Handle {
        Handle {
            index: i,
            generation: self.slots[i as usize].generation,
        }
    }

    /// Removes `key` from the connection table if it maps to slot `i`, hashing once (the
    /// entry is put back in the rare case that the 4-tuple already belongs to a newer
    /// connection). The lookup cache is dropped only if it points at `i`: a cached entry of
    /// another slot stays valid, and keeping it saves a table lookup per segment while
    /// TIME-WAIT connections of the same stack keep ending.
    fn unmap(&mut self, key: ConnKey, i: u32) {
        if let Some(j) = self.conns.remove(&key) {
            if j != i {
                self.conns.insert(key, j);
            }
        }
        self.last_hit.forget(i);
    }

    /// Releases a slot; every outstanding handle to it goes stale.
    fn free_slot(&mut self, i: u32) {
        let slot = &mut self.slots[i as usize];
        if let Some(Sock::Conn(mut c)) = slot.sock.take() {
            c.retire(&mut self.rings);
            self.unmap(ConnKey::of(c.local.get(), c.remote.get()), i);
            if let Some(p) = c.parent {
                if let Some(Some(Sock::Listener(l))) =
                    self.slots.get_mut(p as usize).map(|s| s.sock.as_mut())
                {
                    if c.in_syn_queue {
                        l.half_open = l.half_open.saturating_sub(1);
                    }
                    l.accept_queue.retain(|&x| x != i);
                }
            }
            if self.spare.len() < SPARE_CONNS_MAX {
                self.spare.push(c);
            }
        }
        let slot = &mut self.slots[i as usize];
        slot.sock = None;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(i);
    }

    fn conn(&self, h: Handle) -> Result<&Conn, Error> {
        match self.slots.get(h.index as usize) {
            Some(Slot {
                generation,
                sock: Some(Sock::Conn(c)),
            }) if *generation == h.generation && c.owned && !c.user_closed => Ok(c),
            _ => Err(Error::InvalidHandle),
        }
    }

    fn conn_mut(&mut self, h: Handle) -> Result<&mut Conn, Error> {
        match self.slots.get_mut(h.index as usize) {
            Some(Slot {
                generation,
                sock: Some(Sock::Conn(c)),
            }) if *generation == h.generation && c.owned && !c.user_closed => Ok(c),
            _ => Err(Error::InvalidHandle),
        }
    }

    fn listener_mut(&mut self, h: Handle) -> Result<&mut Listener, Error> {
        match self.slots.get_mut(h.index as usize) {
            Some(Slot {
                generation,
                sock: Some(Sock::Listener(l)),
            }) if *generation == h.generation => Ok(l),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// Puts a connection on the active list.
    fn touch(&mut self, i: u32) {
        if let Some(Slot {
            sock: Some(Sock::Conn(c)),
            ..
        }) = self.slots.get_mut(i as usize)
        {
            if !c.in_active {
                c.in_active = true;
                self.active.push_back(i);
            }
        }
    }

    /// Registers the connection's earliest deadline in the heap if it is earlier than the one
    /// already registered.
    fn reschedule(&mut self, i: u32) {
        if let Some(Slot {
            sock: Some(Sock::Conn(c)),
            ..
        }) = self.slots.get_mut(i as usize)
        {
            if let Some(t) = c.next_timer() {
                if !matches!(c.timers.registered, Some(r) if r <= t) {
                    c.timers.registered = Some(t);
                    self.timers.push(Reverse((t, i)));
                }
            }
        }
    }

    /// Reacts to what a connection reported.
    fn handle_event(&mut self, i: u32, ev: Event) {
        match ev {
            Event::None => {}
            Event::Established => {
                let parent = match &self.slots[i as usize].sock {
                    Some(Sock::Conn(c)) => c.parent,
                    _ => None,
                };
                if let Some(p) = parent {
                    if let Some(Some(Sock::Listener(l))) =
                        self.slots.get_mut(p as usize).map(|s| s.sock.as_mut())
                    {
                        l.half_open = l.half_open.saturating_sub(1);
                        l.accept_queue.push_back(i);
                    }
                }
            }
            Event::Closed | Event::Dropped => {
                let (key, keep) = match &self.slots[i as usize].sock {
                    Some(Sock::Conn(c)) => (
                        ConnKey::of(c.local.get(), c.remote.get()),
                        ev == Event::Closed && c.owned && !c.user_closed,
                    ),
                    _ => return,
                };
                if keep {
                    // The application still holds the handle (to read data or the error);
                    // the 4-tuple is free for new connections.
                    self.unmap(key, i);
                } else {
                    self.free_slot(i);
                }
            }
        }
    }

    /// GSO (DESIGN "GSO"): lets `output` hand over data segments of up to `segs` times the
    /// segment size (at most 64 KiB in total), which the caller cuts into MSS-sized packets
    /// (software GSO) or gives whole to a TSO device. Fewer, larger segments mean less
    /// per-segment work in the engine. 1 (the default) = MSS-sized segments.
    /// Sets the stack's budget for socket-buffer bytes: auto-tuning grows no ring beyond it
    /// (see `tcp/autotune.rs`); growth refused is counted in `Stats::buffer_budget_refusals`.
    pub fn set_buffer_budget(&mut self, bytes: usize) {
        self.rings.set_budget(bytes);
    }
    /// Ring bytes held by this stack's connections now.
    pub fn buffer_bytes_in_use(&self) -> usize {
        self.rings.in_use()
    }

    pub fn set_gso_segs(&mut self, segs: u32) {
        self.gso_segs = segs.clamp(1, 64);
    }

    /// SYN cookies on (the default) or off (a full SYN queue drops SYNs, counted in
    /// `backlog_drops`, and the peer retransmits).
    pub fn set_syn_cookies(&mut self, on: bool) {
        self.syn_cookies = on;
    }

    /// RFC 4987 §3.6: the listener `li`'s SYN queue is full, so `syn` is answered statelessly
    /// with a SYN-ACK whose ISN (and TSval) carry a cookie.
    fn send_cookie(
        &mut self,
        now: Instant,
        li: u32,
        local: SocketAddr,
        remote: SocketAddr,
        syn: &TcpRepr,
        config: Config,
    ) {
        if let Some(Sock::Listener(l)) = &mut self.slots[li as usize].sock {
            l.last_overflow = Some(now);
        }
        // The SYN-ACK announces the MSS a connection of this family would (`Config::mss`).
        let config = super::conn::for_family(config, &remote, self.link_mss_v6);
        let (opt, ts) = syncookie::negotiate(syn, &config, &remote);
        let clock = ts.then(|| syncookie::ts_clock(&self.secret, now, local, remote));
        let cookie = syncookie::encode(&self.secret, now, local, remote, syn.seq, &opt, clock);
        let reply = syncookie::syn_ack(syn, &config, &opt, &cookie);
        // Same bound as every other reply not tied to a connection.
        if self.rsts.len() >= RST_QUEUE_MAX {
            self.stats.rst_dropped += 1;
            return;
        }
        self.rsts.push_back((local.ip(), remote.ip(), reply));
        self.stats.syncookies_sent += 1;
    }

    /// An ACK for listener `li` that matches no connection may answer one of our cookies
    /// (only checked within `syncookie::VALID` of the SYN queue's last overflow, as Linux).
    /// `true` = consumed: the connection now exists (ESTABLISHED, in the accept queue, with
    /// the MSS and, if timestamps carried them, the window scale and SACK of the cookie), or
    /// the accept queue was full and the ACK is dropped. `false` = answer with RST as usual.
    fn cookie_ack(
        &mut self,
        now: Instant,
        li: u32,
        local: SocketAddr,
        remote: SocketAddr,
        ack: &TcpRepr,
        payload: Payload<'_>,
    ) -> bool {
        let (config, accept_full, mapped) = match &self.slots[li as usize].sock {
            Some(Sock::Listener(l)) if l.recent_overflow(now) => {
                (l.config, l.accept_queue_full(), l.mapped && local.is_ipv4())
            }
            _ => return false,
        };
        let config = super::conn::for_family(config, &remote, self.link_mss_v6);
        let Some(opt) = syncookie::decode(&self.secret, now, local, remote, ack, &config) else {
            self.stats.syncookies_failed += 1;
            return false;
        };
        self.stats.syncookies_recv += 1;
        if accept_full {
            // Linux drops it too (ListenOverflows); the client's retransmission may find room.
            self.stats.backlog_drops += 1;
            return true;
        }
        let mut c =
            syncookie::conn_from_cookie(now, &self.secret, local, remote, config, ack, &opt);
        c.parent = Some(li);
        c.mapped = mapped;
        // The echoed TSval is the cookie's, up to 63 ms older than the SYN-ACK: as an RTT
        // sample it would overstate the RTT, so this one ACK gives none.
        let mut ack = *ack;
        if let Some(ts) = ack.options.timestamps.as_mut() {
            ts.tsecr = 0;
        }
        let mut ctx = Ctx {
            now,
            stats: &mut self.stats,
            rsts: &mut self.rsts,
            challenge: &mut self.challenge,
            rings: &mut self.rings,
            copy: self.copy,
        };
        if c.input(&mut ctx, &ack, payload) != Event::Established {
            return true;
        }
        let i = self.enter_conn(ConnKey::of(local, remote), c);
        if let Some(Sock::Listener(l)) = &mut self.slots[li as usize].sock {
            l.accept_queue.push_back(i);
        }
        self.touch(i);
        true
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

    /// The listener a SYN to `local` (wire form) goes to: the exact address, then the
    /// family's wildcard, then, for IPv4, a dual-stack `[::]` listener (one without
    /// `Config::v6only`: Linux `net.ipv6.bindv6only = 0`), then the transparent listener.
    /// Linux scores an AF_INET socket above an AF_INET6 one for the same IPv4 segment
    /// (`compute_score`); the order here gives the same answer (though `listen` never lets an
    /// IPv4 listener and a dual-stack one share a port, so only the IPv4 wildcard and the
    /// transparent listener are ever behind it).
    fn find_listener(&self, local: SocketAddr) -> Option<u32> {
        if let Some(&i) = self.listeners.get(&local) {
            return Some(i);
        }
        match local {
            SocketAddr::V4(_) => self
                .listeners
                .get(&any4(local.port()))
                .or_else(|| {
                    self.listeners
                        .get(&any6(local.port()))
                        .filter(|&&i| self.dual_stack(i))
                })
                // Last, the transparent listener: any address and port no other listener has.
                .or_else(|| self.listeners.get(&TRANSPARENT_KEY))
                .copied(),
            SocketAddr::V6(_) => self.listeners.get(&any6(local.port())).copied(),
        }
    }

    /// Listener `i` is an IPv6 wildcard listener that also takes IPv4 (IPV6_V6ONLY off).
    fn dual_stack(&self, i: u32) -> bool {
        matches!(&self.slots[i as usize].sock,
            Some(Sock::Listener(l)) if l.local.is_ipv6() && !l.config.v6only)
    }

    /// One received, checksum-verified segment from `src` to `dst` (IPv4 or IPv6, both of
    /// one family).
    pub fn input(
        &mut self,
        now: Instant,
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        repr: &TcpRepr,
        payload: &[u8],
    ) {
        let (src, dst) = (src.into(), dst.into());
        self.input_payload(now, src, dst, repr, &[payload], &[], Ecn::NotEct);
    }

    /// [`TcpLayer::input_parts`] with the ECN field of the segment's IP header (RFC 3168: a
    /// CE mark on data of an ECN connection is echoed with ECE). A GRO train's segments all
    /// had the same IP ECN field (GRO merges only equal TOS octets).
    pub fn input_ecn(
        &mut self,
        now: Instant,
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        repr: &TcpRepr,
        parts: &[&[u8]],
        ecn: Ecn,
    ) {
        let (src, dst) = (src.into(), dst.into());
        self.input_payload(now, src, dst, repr, parts, &[], ecn);
    }

    /// [`TcpLayer::input_ecn`] for segments whose checksums are still open: `pending[i]` is,
    /// for part `i` (a segment of the GRO train), the folded sum of its pseudo-header and TCP
    /// header, to which its payload's sum must add up to 0xffff; `None` for a part verified
    /// already. The payloads are summed while they are copied to where they belong (a posted
    /// read or the receive ring, `place.rs`), and the segment is processed only if every sum
    /// verifies; a train with a bad segment is taken apart and its good segments go in one
    /// by one. The result says what the checks came to, for the interface's counters.
    #[allow(clippy::too_many_arguments)]
    pub fn input_deferred(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        repr: &TcpRepr,
        parts: &[&[u8]],
        pending: &[Option<u16>],
        ecn: Ecn,
    ) -> RxCheck {
        self.input_payload(now, src, dst, repr, parts, pending, ecn)
    }

    /// [`TcpLayer::input`] for a segment whose data is in several slices: a GRO-merged
    /// segment whose payloads are still in their frames. `repr` is the first segment's
    /// header (with PSH from the last); every slice's checksum has been verified.
    pub fn input_parts(
        &mut self,
        now: Instant,
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        repr: &TcpRepr,
        parts: &[&[u8]],
    ) {
        let (src, dst) = (src.into(), dst.into());
        self.input_payload(now, src, dst, repr, parts, &[], Ecn::NotEct);
    }

    /// A train in which segment `bad` failed its check, taken apart: that one is dropped and
    /// counted, and the others go in one by one (those before it as verified, those after it
    /// with their own check), so the good ones are not lost.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn input_one_by_one(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        repr: &TcpRepr,
        parts: &[&[u8]],
        pending: &[Option<u16>],
        bad: usize,
        ecn: Ecn,
    ) -> RxCheck {
        let mut check = RxCheck {
            bad: 1,
            ..RxCheck::default()
        };
        let mut seq = repr.seq;
        for (i, part) in parts.iter().enumerate() {
            // GRO merged only segments with the same header but for the sequence number and
            // PSH (which the train took from its last segment).
            let mut r = *repr;
            r.seq = seq;
            seq = seq.wrapping_add(part.len() as u32);
            if i + 1 < parts.len() {
                r.flags.0 &= !TcpFlags::PSH;
            }
            let want = match i.cmp(&bad) {
                core::cmp::Ordering::Less => None,
                core::cmp::Ordering::Equal => continue,
                core::cmp::Ordering::Greater => pending.get(i).copied().flatten(),
            };
            check.add(self.input_payload(now, src, dst, &r, &[part], &[want], ecn));
        }
        check
    }

    #[allow(clippy::too_many_arguments)]
    fn input_payload(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        repr: &TcpRepr,
        parts: &[&[u8]],
        pending: &[Option<u16>],
        ecn: Ecn,
    ) -> RxCheck {
        let key = ConnKey::new(dst, repr.dst_port, src, repr.src_port);
        let found = match self.last_hit.get(&key) {
            Some(i) => Some(i),
            None => {
                let f = self.conns.get(&key).copied();
                if let Some(i) = f {
                    self.last_hit.put(key, i);
                }
                f
            }
        };
        // Checksums left open are verified before anything reads the header (the connection
        // only tells where the payload may be copied meanwhile).
        let mut check = RxCheck::default();
        let conn = found.and_then(|i| match &mut self.slots[i as usize].sock {
            Some(Sock::Conn(c)) => Some(c),
            _ => None,
        });
        let verified = match conn {
            Some(c) => c.place(
                repr.seq,
                parts,
                pending,
                self.copy,
                &mut self.stats,
                &mut check,
                &self.batch,
            ),
            None => place::verify_separately(parts, pending, &mut check),
        };
        if let Err(bad) = verified {
            if parts.len() > 1 {
                let more = self.input_one_by_one(now, src, dst, repr, parts, pending, bad, ecn);
                check.add(more);
            } else {
                check.bad += 1;
            }
            return check;
        }
        let payload = Payload::new(parts);
        self.stats.segments_in += 1;
        self.last_now = now;
        let f = repr.flags;
        if repr.src_port == 0 || repr.dst_port == 0 || (f.syn() && f.rst()) {
            // Not a segment any conforming TCP sends; dropped silently.
            self.stats.bad_segments += 1;
            return check;
        }
        if f.rst() {
            self.stats.rst_in += 1;
        }
        if let Some(i) = found {
            let mut ctx = Ctx {
                now,
                stats: &mut self.stats,
                rsts: &mut self.rsts,
                challenge: &mut self.challenge,
                rings: &mut self.rings,
                copy: self.copy,
            };
            let (ev, quiet) = match &mut self.slots[i as usize].sock {
                Some(Sock::Conn(c)) => {
                    c.ecn.rx_ce = ecn == Ecn::Ce;
                    let ev = c.input(&mut ctx, repr, payload);
                    // What `place` staged and `input` did not keep stays uncommitted.
                    c.rcv.staged = None;
                    if !c.rcv.frames.staged.is_empty() {
                        c.rcv.frames.staged.clear();
                    }
                    if c.rcv.frames.has_pending() && self.borrowers.last() != Some(&i) {
                        self.borrowers.push(i);
                    }
                    c.tune_buffers(ctx.now, ctx.rings, ctx.stats);
                    c.reclaim_buffers(ctx.rings);
                    (ev, ev == Event::None && c.nothing_to_send())
                }
                _ => (Event::None, false),
            };
            if quiet {
                // Nothing to send (a segment whose ACK is delayed, an ACK that frees nothing
                // queued): the output pass would only find that out again. Its timers still
                // go in the heap. (Half the segments of request/response traffic.)
                self.reschedule(i);
            } else {
                self.touch(i);
            }
            if ev != Event::None {
                self.handle_event(i, ev);
            }
            return check;
        }
        self.input_no_conn(now, src, dst, repr, payload);
        check
    }

    /// A segment no connection takes: a listener's (SYN, cookie ACK) or answered with a RST.
    /// The family checks live here: no connection is ever keyed by a v4-mapped or mixed
    /// pair, so such a segment never reaches the connection path above.
    #[inline(never)]
    fn input_no_conn(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        repr: &TcpRepr,
        payload: Payload<'_>,
    ) {
        let f = repr.flags;
        if let (IpAddr::V6(s), IpAddr::V6(d)) = (src, dst) {
            // A v4-mapped address on the wire is a spoofing vehicle (RFC 4942 §2.2: an
            // IPv6 packet must not carry one; RFC 4291 §2.5.5.2 reserves the form for the
            // socket API). Linux drops such SYNs (`tcp_v6_conn_request`) and never matches
            // them to an IPv4 connection; netfold drops every such segment, unanswered.
            if s.to_ipv4_mapped().is_some() || d.to_ipv4_mapped().is_some() {
                self.stats.bad_segments += 1;
                return;
            }
        } else if src.is_ipv4() != dst.is_ipv4() {
            self.stats.bad_segments += 1;
            return;
        }
        // Listeners are looked up only for segments no connection takes.
        let local = SocketAddr::new(dst, repr.dst_port);
        let remote = SocketAddr::new(src, repr.src_port);
        let key = ConnKey::new(dst, repr.dst_port, src, repr.src_port);
        let listener = self.find_listener(local);
        let mut ctx = Ctx {
            now,
            stats: &mut self.stats,
            rsts: &mut self.rsts,
            challenge: &mut self.challenge,
            rings: &mut self.rings,
            copy: self.copy,
        };
        let Some(li) = listener else {
            // RFC 9293 §3.10.7.1: CLOSED -> RST (never for a RST).
            ctx.stats.no_socket += 1;
            ctx.reply_rst(dst, src, repr, payload.len());
            return;
        };
        // RFC 9293 §3.10.7.2 LISTEN.
        if f.rst() {
            return;
        }
        if f.ack() {
            if self.syn_cookies
                && !f.syn()
                && self.cookie_ack(now, li, local, remote, repr, payload)
            {
                return;
            }
            let mut ctx = Ctx {
                now,
                stats: &mut self.stats,
                rsts: &mut self.rsts,
                challenge: &mut self.challenge,
                rings: &mut self.rings,
                copy: self.copy,
            };
            ctx.reply_rst(dst, src, repr, payload.len());
            return;
        }
        if !f.syn() {
            return;
        }
        if f.fin() {
            // SYN+FIN is no segment a conforming TCP sends to open a connection; Linux drops
            // it on a listener (tcp_rcv_state_process, "tcp: drop SYN+FIN messages"). On a
            // connection in SYN-SENT it is a SYN (RFC 9293 §3.10.7.3, simultaneous open)
            // whose FIN is ignored, as Linux ignores it there.
            self.stats.bad_segments += 1;
            return;
        }
        let (config, syn_full, accept_full, mapped) = match &self.slots[li as usize].sock {
            Some(Sock::Listener(l)) => (
                l.config,
                l.syn_queue_full(),
                l.accept_queue_full(),
                // An IPv6 listener's IPv4 connections are seen as v4-mapped.
                l.mapped && local.is_ipv4(),
            ),
            _ => return,
        };
        if accept_full || (syn_full && !self.syn_cookies) {
            self.stats.backlog_drops += 1;
            return;
        }
        if syn_full {
            self.send_cookie(now, li, local, remote, repr, config);
            return;
        }
        let config = super::conn::for_family(config, &remote, self.link_mss_v6);
        let mut c = Conn::new_passive(now, self.secret.bytes(), local, remote, config, repr);
        c.parent = Some(li);
        c.in_syn_queue = true;
        c.mapped = mapped;
        let i = self.enter_conn(key, c);
        if let Some(Sock::Listener(l)) = &mut self.slots[li as usize].sock {
            l.half_open += 1;
        }
        self.touch(i);
    }

    /// Emits every segment due at `now`; see the module contract.
    /// Whether `output` would do nothing at `now` (no queued RST or SYN-ACK, no active
    /// connection, no timer due); if so, records `now` as `output` does (application calls
    /// between polls, such as `close`, take their time from it) and the caller may skip it.
    #[inline]
    pub fn output_idle(&mut self, now: Instant) -> bool {
        let idle = self.rsts.is_empty()
            && self.active.is_empty()
            && self.timers.peek().is_none_or(|Reverse((t, _))| *t > now);
        if idle {
            self.last_now = now;
        }
        idle
    }

    pub fn output(&mut self, now: Instant, emit: &mut dyn FnMut(&OutSegment<'_>) -> bool) {
        self.last_now = now;
        while let Some(&(src, dst, repr)) = self.rsts.front() {
            let seg = OutSegment {
                src,
                dst,
                repr,
                payload: crate::buf::zc::Gather::empty(),
                gso_size: 0,
                ecn: Ecn::NotEct,
            };
            if !emit(&seg) {
                return;
            }
            self.rsts.pop_front();
            self.stats.segments_out += 1;
            // The queue also carries SYN cookie SYN-ACKs.
            if repr.flags.rst() {
                self.stats.rst_out += 1;
            }
        }
        // Expired deadlines put their connections on the active list.
        while let Some(&Reverse((t, i))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            if let Some(Slot {
                sock: Some(Sock::Conn(c)),
                ..
            }) = self.slots.get_mut(i as usize)
            {
                if c.timers.registered == Some(t) {
                    c.timers.registered = None;
                    self.touch(i);
                }
            }
        }
        // A connection refused by `emit` stays at the front and goes first next time; one that
        // used up its budget goes to the back. Each entry present now is visited once.
        let mut todo = self.active.len();
        while todo > 0 {
            todo -= 1;
            let Some(&i) = self.active.front() else { break };
            let ev = match &mut self.slots[i as usize].sock {
                Some(Sock::Conn(c)) => {
                    let ev = c.on_timers(now, &mut self.stats);
                    if std::mem::take(&mut c.rst_due) {
                        let rst = (c.local.get().ip(), c.remote.get().ip(), c.make_rst());
                        if self.rsts.len() < RST_QUEUE_MAX {
                            self.rsts.push_back(rst);
                        } else {
                            self.stats.rst_dropped += 1;
                        }
                    }
                    c.reclaim_buffers(&mut self.rings);
                    ev
                }
                _ => {
                    self.active.pop_front();
                    continue;
                }
            };
            if ev != Event::None {
                self.handle_event(i, ev);
            }
            let status = match &mut self.slots[i as usize].sock {
                Some(Sock::Conn(c)) => {
                    c.gso_segs = self.gso_segs;
                    c.poll_output(now, &mut self.stats, emit)
                }
                _ => {
                    self.active.pop_front();
                    continue;
                }
            };
            match status {
                OutputStatus::Blocked => return,
                OutputStatus::Budget => {
                    self.active.pop_front();
                    self.active.push_back(i);
                }
                OutputStatus::Done => {
                    self.active.pop_front();
                    if let Some(Sock::Conn(c)) = &mut self.slots[i as usize].sock {
                        c.in_active = false;
                    }
                    self.reschedule(i);
                }
            }
        }
    }

    pub fn poll_at(&self) -> Option<Instant> {
        if !self.rsts.is_empty() {
            return Some(self.last_now);
        }
        if !self.active.is_empty() {
            return Some(self.last_now);
        }
        // May be a stale (earlier) deadline: an early wake-up costs one empty output pass.
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// An ICMP error about the connection from `local` to `remote`, from a caller that has
    /// no quoted segment to check (a trusted source; the interface uses
    /// [`TcpLayer::icmp_error_quoting`]).
    pub fn icmp_error(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        err: IcmpError,
    ) {
        let (local, remote) = (wire_addr(local.into()).0, wire_addr(remote.into()).0);
        self.icmp_error_inner(now, local, remote, None, err);
    }

    /// An ICMP error quoting a segment we sent from `local` to `remote` whose sequence number
    /// was `quoted_seq`. Returns whether a connection took it: RFC 5927 §4.1, a quoted
    /// sequence number outside SND.UNA..SND.NXT is ignored (as Linux `tcp_v4_err`), so that
    /// a blind attacker cannot shrink the MSS or abort an opening connection.
    pub fn icmp_error_quoting(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        quoted_seq: u32,
        err: IcmpError,
    ) -> bool {
        let (local, remote) = (wire_addr(local.into()).0, wire_addr(remote.into()).0);
        self.icmp_error_inner(now, local, remote, Some(quoted_seq), err)
    }

    fn icmp_error_inner(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        quoted_seq: Option<u32>,
        err: IcmpError,
    ) -> bool {
        self.last_now = now;
        let Some(&i) = self.conns.get(&ConnKey::of(local, remote)) else {
            return false;
        };
        let closed = match &mut self.slots[i as usize].sock {
            Some(Sock::Conn(c)) => {
                if quoted_seq.is_some_and(|s| !c.icmp_seq_acceptable(s)) {
                    return false;
                }
                let closed = c.icmp(err);
                c.reclaim_buffers(&mut self.rings);
                closed
            }
            _ => return false,
        };
        self.touch(i);
        if closed {
            self.handle_event(i, Event::Closed);
        }
        true
    }

    /// The neighbour cache gave up on a next hop (no ARP reply after its retries): every
    /// connection still opening towards a remote address for which `unreachable` holds ends
    /// with [`Error::HostUnreachable`]. Linux does the same: the unresolved SYN is answered
    /// with a local ICMP host unreachable (`ip_link_failure`), which `tcp_v4_err` treats as
    /// fatal in SYN-SENT, so connect(2) fails with EHOSTUNREACH after the ARP retries (~3 s)
    /// instead of ETIMEDOUT after the SYN retries. Synchronized connections keep trying
    /// (RFC 1122 §4.2.3.9: host unreachable is a soft error), as on Linux.
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    pub fn host_unreachable(&mut self, now: Instant, unreachable: impl Fn(IpAddr) -> bool) {
        self.last_now = now;
        let opening: Vec<u32> = self
            .conns
            .values()
            .copied()
            .filter(|&i| {
                matches!(&self.slots[i as usize].sock,
                    Some(Sock::Conn(c)) if c.state == State::SynSent && unreachable(c.remote.get().ip()))
            })
            .collect();
        for i in opening {
            if let Some(Sock::Conn(c)) = &mut self.slots[i as usize].sock {
                c.enter_closed(Some(Error::HostUnreachable));
                c.reclaim_buffers(&mut self.rings);
            }
            self.touch(i);
            self.handle_event(i, Event::Closed);
        }
    }

    /// Listens on `local` with at most `backlog` pending connections; accepted connections
    /// get `config`. Dual-stack rules (Linux's, `net.ipv6.bindv6only = 0`):
    ///
    /// - `0.0.0.0:p` or `a.b.c.d:p`: IPv4 only.
    /// - `[::]:p`: IPv6, and IPv4 too unless `config.v6only` (IPV6_V6ONLY); its IPv4
    ///   connections report v4-mapped addresses (`::ffff:a.b.c.d`). An IPv4 listener on the
    ///   same port is taken first for IPv4 segments (Linux scores AF_INET above AF_INET6).
    /// - `[::ffff:a.b.c.d]:p` (an IPv6 socket on a v4-mapped address): IPv4 only, addresses
    ///   reported v4-mapped; `InvalidInput` with `v6only` (Linux `inet6_bind`: EINVAL).
    /// - `[x:y::z]:p`: IPv6 only.
    ///
    /// `AddrInUse` for the same address twice, and, as Linux (`inet_csk_bind_conflict`),
    /// between a dual-stack `[::]:p` and any IPv4 listener on port `p` (the IPv6 wildcard
    /// covers every IPv4 address unless v6only). Other pairs of one address family coexist,
    /// the exact address taken before the wildcard (netfold's rule before IPv6; Linux
    /// refuses them without SO_REUSEPORT).
    pub fn listen(
        &mut self,
        local: impl Into<SocketAddr>,
        backlog: usize,
        config: Config,
    ) -> Result<Handle, Error> {
        let (local, was_mapped) = wire_addr(local.into());
        if local.port() == 0 || backlog == 0 || (was_mapped && config.v6only) {
            return Err(Error::InvalidInput);
        }
        if self.listeners.contains_key(&local) {
            return Err(Error::AddrInUse);
        }
        let port = local.port();
        let dual_here = local == any6(port) && !config.v6only;
        let conflict = if dual_here {
            self.listeners
                .keys()
                .any(|k| k.is_ipv4() && k.port() == port)
        } else {
            local.is_ipv4()
                && self
                    .listeners
                    .get(&any6(port))
                    .is_some_and(|&i| self.dual_stack(i))
        };
        if conflict {
            return Err(Error::AddrInUse);
        }
        let mut l = Listener::new(local, backlog.min(MAX_BACKLOG), config);
        l.mapped = was_mapped || local.is_ipv6();
        let i = self.alloc(Sock::Listener(Box::new(l)));
        self.listeners.insert(local, i);
        Ok(self.handle_of(i))
    }

    /// A transparent listener (Linux's IP_TRANSPARENT socket behind a TPROXY rule): it takes
    /// SYNs to any destination address and port that no connection or other listener takes,
    /// and each accepted connection's local address is the SYN's original destination, which
    /// its segments are then sent from. One per layer (`AddrInUse` for a second); its own
    /// local address reads 0.0.0.0:0. The interface passes segments to foreign addresses on
    /// only in transparent mode (`iface::StackConfig::transparent`); `socket::TcpListener::
    /// bind_transparent` checks that.
    pub fn listen_transparent(&mut self, backlog: usize, config: Config) -> Result<Handle, Error> {
        if backlog == 0 {
            return Err(Error::InvalidInput);
        }
        if self.listeners.contains_key(&TRANSPARENT_KEY) {
            return Err(Error::AddrInUse);
        }
        let l = Listener::new(TRANSPARENT_KEY, backlog.min(MAX_BACKLOG), config);
        let i = self.alloc(Sock::Listener(Box::new(l)));
        self.listeners.insert(TRANSPARENT_KEY, i);
        Ok(self.handle_of(i))
    }

    /// A fully established connection from the listener's accept queue.
    pub fn accept(&mut self, listener: Handle) -> Result<Handle, Error> {
        let l = self.listener_mut(listener)?;
        let i = l.accept_queue.pop_front().ok_or(Error::WouldBlock)?;
        if let Some(Sock::Conn(c)) = &mut self.slots[i as usize].sock {
            c.owned = true;
            c.parent = None;
        }
        Ok(self.handle_of(i))
    }

    /// Established connections waiting in a listener's accept queue (readiness for accept).
    pub fn accept_queue_len(&mut self, listener: Handle) -> Result<usize, Error> {
        Ok(self.listener_mut(listener)?.accept_queue.len())
    }

    /// Active open from `local` (port 0 = pick an ephemeral port) to `remote`. `local`'s IP must
    /// be the concrete source address (InvalidInput if unspecified), of `remote`'s family.
    ///
    /// A v4-mapped `remote` (`[::ffff:a.b.c.d]:p`, an IPv6 socket connecting to an IPv4
    /// peer) opens an IPv4 connection whose addresses are reported v4-mapped (Linux
    /// `tcp_v6_connect` hands it to `tcp_v4_connect`); `local` is then the IPv4 source, plain
    /// or mapped. With `config.v6only` that is `NetworkUnreachable` (Linux: ENETUNREACH).
    pub fn connect(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        config: Config,
    ) -> Result<Handle, Error> {
        let (remote, mapped) = wire_addr(remote.into());
        let (local, _) = wire_addr(local.into());
        if mapped && config.v6only {
            return Err(Error::NetworkUnreachable);
        }
        // The caller chooses the source address (route lookup is not TCP's business); an
        // unspecified one could never match returning segments in the 4-tuple demux.
        let bad_remote = match remote.ip() {
            IpAddr::V4(r) => r.is_unspecified() || r.is_broadcast() || r.is_multicast(),
            IpAddr::V6(r) => r.is_unspecified() || r.is_multicast(),
        };
        if remote.port() == 0
            || bad_remote
            || local.ip().is_unspecified()
            || local.is_ipv4() != remote.is_ipv4()
        {
            return Err(Error::InvalidInput);
        }
        self.last_now = now;
        // The slot the connection will get: the 4-tuple is entered in the table under it as
        // soon as it is found free, so the table is hashed once per connect (the check that
        // the 4-tuple is unused and the insertion are one `entry`). Nothing below can fail.
        let i = self.next_slot();
        let local = if local.port() == 0 {
            self.pick_port(local, remote, i)?
        } else {
            match self.conns.entry(ConnKey::of(local, remote)) {
                Entry::Occupied(_) => return Err(Error::AddrInUse),
                Entry::Vacant(v) => {
                    v.insert(i);
                }
            }
            local
        };
        // The next segment for this stack is most likely the SYN-ACK of this connection.
        self.last_hit.put(ConnKey::of(local, remote), i);
        let config = super::conn::for_family(config, &remote, self.link_mss_v6);
        let mut c = Conn::new_active(
            now,
            self.secret.bytes(),
            local,
            remote,
            config,
            &mut self.rings,
        );
        c.mapped = mapped;
        let b = self.boxed(c);
        let got = self.alloc(Sock::Conn(b));
        debug_assert_eq!(got, i);
        self.touch(i);
        Ok(self.handle_of(i))
    }

    /// RFC 6056 port choice for a connection from `local` to `remote`; the chosen 4-tuple is
    /// entered in the connection table under slot `i` by the same lookup that found it free.
    fn pick_port(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        i: u32,
    ) -> Result<SocketAddr, Error> {
        let (conns, listeners) = (&mut self.conns, &self.listeners);
        self.ports
            .pick(&self.secret, local.ip(), remote, |p| {
                let cand = SocketAddr::new(local.ip(), p);
                if listeners.contains_key(&cand)
                    || listeners.contains_key(&any4(p))
                    || listeners.contains_key(&any6(p))
                {
                    return false;
                }
                match conns.entry(ConnKey::of(cand, remote)) {
                    Entry::Occupied(_) => false,
                    Entry::Vacant(v) => {
                        v.insert(i);
                        true
                    }
                }
            })
            .map(|p| SocketAddr::new(local.ip(), p))
            .ok_or(Error::AddrNotAvailable)
    }

    /// Queues up to `data.len()` bytes; returns how many were taken (WouldBlock if none fit).
    pub fn send(&mut self, h: Handle, data: &[u8]) -> Result<usize, Error> {
        let copy = self.copy;
        let r = self.conn_mut(h)?.send(data, copy);
        if let Ok(n) = r {
            self.stats.app_bytes_sent += n as u64;
            self.stats.tx_copy_app += n as u64;
        }
        self.touch(h.index);
        r
    }
    /// Zero-copy send (`zerocopy.rs`): queues (a prefix of) `buf` by reference, tagged with
    /// `user`; WouldBlock if the send buffer or the completion bound is full.
    pub fn send_zc(
        &mut self,
        h: Handle,
        buf: super::zerocopy::ZcBuf,
        user: u64,
    ) -> Result<super::ZcSend, Error> {
        let r = self.conn_mut(h)?.send_zc(buf, user);
        if let Ok(z) = &r {
            // Lent, not copied: application bytes sent without a pass (issue 13 item 5).
            self.stats.app_bytes_sent += z.len as u64;
        }
        self.touch(h.index);
        r
    }
    /// The connection's zero-copy completion queue (a handle that outlives the connection).
    pub fn zc_completions(&mut self, h: Handle) -> Result<super::ZcCompletions, Error> {
        Ok(self.conn_mut(h)?.snd.ring.completions())
    }
    /// Reads in-order data; `Ok(0)` means the peer closed (FIN received, all data read).
    /// `InvalidInput` while a read is posted ([`TcpLayer::post_read`]).
    pub fn recv(&mut self, h: Handle, buf: &mut [u8]) -> Result<usize, Error> {
        let copy = self.copy;
        let r = self.conn_mut(h)?.recv(buf, copy);
        if let Ok(n @ 1..) = r {
            self.stats.rx_copy_app += n as u64;
            self.stats.app_bytes_received += n as u64;
            // Reading may open the window enough for an update.
            self.touch(h.index);
        }
        r
    }

    /// Posts a read (single-pass receive, `place.rs`): `buf` is lent to the connection, and
    /// while it is, in-order data arriving with nothing older waiting in the receive ring is
    /// copied from the frames straight into it, the checksum verified in that copy. Bytes
    /// already queued are copied into it now. Take it back with [`TcpLayer::take_read`]; until
    /// then `recv` and `peek` fail with `InvalidInput` (they would reorder the stream), and
    /// the connection counts as readable once the buffer holds data ([`TcpLayer::recv_queue`]).
    /// `InvalidInput` if a read is already posted or `buf` is empty; any error gives the
    /// buffer back. A connection freed while a read is posted drops the buffer.
    pub fn post_read(&mut self, h: Handle, buf: Vec<u8>) -> Result<(), (Error, Vec<u8>)> {
        let copy = self.copy;
        let c = match self.conn_mut(h) {
            Ok(c) => c,
            Err(e) => return Err((e, buf)),
        };
        let n = c.post_read(buf, copy)?;
        self.count_ring_read(h, n);
        Ok(())
    }

    /// Takes back the read posted on `h`: its buffer (data in `buf[..n]`) and the read's
    /// result as [`TcpLayer::recv`] gives it: `Ok(n)` bytes, `Ok(0)` at end of stream,
    /// `WouldBlock` if nothing arrived yet (post it again), or the connection's error. In-order
    /// bytes that waited in the ring (a segment that did not fit) are copied in behind the
    /// placed ones first. `InvalidInput` (the outer error) if no read is posted.
    pub fn take_read(&mut self, h: Handle) -> Result<PostedRead, Error> {
        let copy = self.copy;
        let (read, copied) = self.conn_mut(h)?.take_read(copy)?;
        self.count_ring_read(h, copied);
        Ok(read)
    }

    /// A borrowing read: `f` is shown the in-order bytes where they lie in the receive ring
    /// (two slices, the ring may wrap) and returns how many it consumed, which are released
    /// to the ring without a copy. Otherwise like [`TcpLayer::recv`]: `Ok(0)` at end of
    /// stream (`f` is not called then), `WouldBlock` when nothing is queued.
    pub fn recv_in_place(
        &mut self,
        h: Handle,
        f: impl FnOnce(&[u8], &[u8]) -> usize,
    ) -> Result<usize, Error> {
        let r = self.conn_mut(h)?.recv_in_place(f);
        if let Ok(n @ 1..) = r {
            self.stats.rx_in_place += n as u64;
            self.stats.app_bytes_received += n as u64;
            self.touch(h.index);
        }
        r
    }

    /// Frame-level borrowing read on `h` (`frames.rs`): while on, in-order payload that
    /// arrives with nothing older queued in the receive ring stays in the packet buffer it
    /// arrived in, and [`TcpLayer::recv_frames`] hands it out as owned [`BorrowedPayload`]s
    /// (dropping one returns its buffer to the stack's pool and reopens the window by its
    /// length). `recv`, `peek` and `recv_in_place` still work (held frames first). Excludes
    /// a posted read: `InvalidInput` while one is posted. Turning it off keeps held frames
    /// readable.
    pub fn set_borrow_frames(&mut self, h: Handle, on: bool) -> Result<(), Error> {
        let home = self.recycler.clone();
        let c = self.conn_mut(h)?;
        if c.rcv.posted.is_some() {
            return Err(Error::InvalidInput);
        }
        let share = on.then(|| (home, ConnShare::new(h.index, h.generation)));
        c.rcv.frames.set(share);
        Ok(())
    }

    /// A frame read: up to `max` (at least one) borrowed frames of in-order data appended to
    /// `out`, no copy; with none held, the bytes queued in the receive ring are copied into
    /// one buffer (up to 64 KiB) handed out the same way. Returns the bytes handed out:
    /// `Ok(0)` at end of stream, `WouldBlock` when nothing is queued, the connection's error
    /// as `recv` reports it. `InvalidInput` unless [`TcpLayer::set_borrow_frames`] is on.
    pub fn recv_frames(
        &mut self,
        h: Handle,
        out: &mut Vec<BorrowedPayload>,
        max: usize,
    ) -> Result<usize, Error> {
        let copy = self.copy;
        let (n, copied) = self.conn_mut(h)?.recv_frames(out, max, copy)?;
        if n > 0 {
            self.stats.rx_frames_read += n as u64;
            self.stats.rx_copy_app += copied as u64;
            self.stats.app_bytes_received += n as u64;
            self.touch(h.index);
        }
        Ok(n)
    }

    /// Frames out of the pool now (held by connections or by the application), and the bound
    /// ([`TcpLayer::set_frame_budget`]).
    pub fn frames_outstanding(&self) -> (usize, usize) {
        (self.recycler.outstanding(), self.recycler.limit())
    }

    /// At most `frames` packet buffers may be held out of the pool by borrowing reads at
    /// once; past that, payload is copied into the receive ring (the stack sets half its
    /// pool).
    pub fn set_frame_budget(&mut self, frames: usize) {
        self.recycler.set_limit(frames);
    }

    /// Starts a receive batch: the address ranges of its frames, so that `place` can tell a
    /// payload that lies in one (and may be left there) from any other.
    pub(crate) fn begin_batch<'a>(&mut self, frames: impl Iterator<Item = &'a [u8]>) {
        self.batch.clear();
        self.batch.extend(frames.map(|f| {
            let a = f.as_ptr() as usize;
            (a, a + f.len())
        }));
    }

    /// Ends the receive batch: connections that committed frames of it take their buffers
    /// (leaving empty ones in `rx`, see [`PacketBuf::is_placeholder`]).
    pub(crate) fn end_batch(&mut self, rx: &mut [PacketBuf]) {
        self.batch.clear();
        for i in self.borrowers.drain(..) {
            if let Some(Slot {
                sock: Some(Sock::Conn(c)),
                ..
            }) = self.slots.get_mut(i as usize)
            {
                c.rcv.frames.adopt(rx);
            }
        }
    }

    /// Moves buffers the application gave back into `pool`, and lets the connections whose
    /// window they reopen send an update.
    pub(crate) fn collect_released(&mut self, pool: &mut crate::buf::Pool) {
        if !self.recycler.is_dirty() {
            return;
        }
        let mut conns = std::mem::take(&mut self.released);
        let mut bufs = std::mem::take(&mut self.released_bufs);
        self.recycler.drain(&mut bufs, &mut conns);
        for b in bufs.drain(..) {
            pool.put(b);
        }
        for (i, g) in conns.drain(..) {
            if let Some(Slot {
                generation,
                sock: Some(Sock::Conn(c)),
            }) = self.slots.get_mut(i as usize)
            {
                if *generation == g {
                    c.rcv.read_since_ack = true;
                    self.touch(i);
                }
            }
        }
        self.released = conns;
        self.released_bufs = bufs;
    }

    /// What to wake when the application releases a borrowed frame while the stack is idle
    /// (a driver thread asleep until its next deadline must poll to reopen the window).
    pub fn set_release_waker(&self, w: Option<std::task::Waker>) {
        self.recycler.set_waker(w);
    }

    /// Whether buffers came back since the last poll (a window may have reopened).
    pub(crate) fn released_pending(&self) -> bool {
        self.recycler.is_dirty()
    }

    /// `n` bytes went from the receive ring to the application by a copy.
    fn count_ring_read(&mut self, h: Handle, n: usize) {
        if n > 0 {
            self.stats.rx_copy_app += n as u64;
            self.stats.app_bytes_received += n as u64;
            self.touch(h.index);
        }
    }
    /// Like [`TcpLayer::recv`] but leaves the data queued (recv with MSG_PEEK): proxies and
    /// protocol sniffers look at the first bytes before reading them. The pending error is
    /// reported without being consumed.
    pub fn peek(&self, h: Handle, buf: &mut [u8]) -> Result<usize, Error> {
        self.conn(h)?.peek(buf, self.copy)
    }
    /// Half-close: FIN after queued data (shutdown(SHUT_WR)).
    pub fn shutdown_write(&mut self, h: Handle) -> Result<(), Error> {
        let c = self.conn_mut(h)?;
        let r = c.shutdown_write();
        let i = h.index;
        if let Some(Sock::Conn(c)) = &mut self.slots[i as usize].sock {
            c.reclaim_buffers(&mut self.rings);
        }
        self.touch(i);
        r
    }

    /// close(): FIN (or RST per linger/unread data rules); the handle becomes invalid for the
    /// caller, the layer keeps the connection until it is fully closed.
    pub fn close(&mut self, h: Handle) -> Result<(), Error> {
        let now = self.last_now;
        if self.listener_mut(h).is_ok() {
            return self.close_listener(h.index);
        }
        let c = self.conn_mut(h)?;
        // SO_LINGER 0, or unread data (RFC 9293 §3.6 / RFC 2525 §2.17): abort with RST.
        if c.config.linger == Some(crate::time::Duration::ZERO)
            || !c.rcv.ring.is_empty()
            || !c.rcv.frames.is_empty()
        {
            return self.abort(h);
        }
        let _ = c.shutdown_write();
        c.user_closed = true;
        c.arm_orphan_timer(now);
        let closed = c.state == State::Closed;
        let i = h.index;
        if closed {
            self.free_slot(i);
        } else {
            // The handle goes stale now; the connection lives on inside the layer.
            let slot = &mut self.slots[i as usize];
            if let Some(Sock::Conn(c)) = &mut slot.sock {
                c.reclaim_buffers(&mut self.rings);
            }
            slot.generation = slot.generation.wrapping_add(1);
            self.touch(i);
        }
        Ok(())
    }

    fn close_listener(&mut self, i: u32) -> Result<(), Error> {
        let (local, queued) = match &mut self.slots[i as usize].sock {
            Some(Sock::Listener(l)) => (l.local, std::mem::take(&mut l.accept_queue)),
            _ => return Err(Error::InvalidHandle),
        };
        // Children not yet accepted (established or half-open) are reset.
        let children: Vec<u32> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(ci, s)| match &s.sock {
                Some(Sock::Conn(c)) if c.parent == Some(i) && !c.owned => Some(ci as u32),
                _ => None,
            })
            .chain(queued)
            .collect();
        for ci in children {
            self.abort_index(ci);
        }
        self.listeners.remove(&local);
        self.free_slot(i);
        Ok(())
    }

    fn abort_index(&mut self, i: u32) {
        let rst = match &self.slots[i as usize].sock {
            Some(Sock::Conn(c)) if c.abort_needs_rst() => {
                Some((c.local.get().ip(), c.remote.get().ip(), c.make_rst()))
            }
            Some(Sock::Conn(_)) => None,
            _ => return,
        };
        if let Some((s, d, r)) = rst {
            let mut ctx = Ctx {
                now: self.last_now,
                stats: &mut self.stats,
                rsts: &mut self.rsts,
                challenge: &mut self.challenge,
                rings: &mut self.rings,
                copy: self.copy,
            };
            ctx.queue_rst(s, d, r);
        }
        self.free_slot(i);
    }

    /// Abort with RST and release immediately.
    pub fn abort(&mut self, h: Handle) -> Result<(), Error> {
        self.conn(h)?;
        self.abort_index(h.index);
        Ok(())
    }
    pub fn state(&self, h: Handle) -> Result<State, Error> {
        if let Some(Slot {
            generation,
            sock: Some(Sock::Listener(_)),
        }) = self.slots.get(h.index as usize)
        {
            if *generation == h.generation {
                return Ok(State::Listen);
            }
        }
        Ok(self.conn(h)?.state)
    }
    /// The local address: as bound for a listener (`[::]:p` stays the IPv6 wildcard), the
    /// connection's own for a connection; an IPv4 connection (or listener) of an IPv6 socket
    /// reports it v4-mapped (`[::ffff:a.b.c.d]:p`), as Linux's getsockname does.
    pub fn local_addr(&self, h: Handle) -> Result<SocketAddr, Error> {
        if let Some(Slot {
            generation,
            sock: Some(Sock::Listener(l)),
        }) = self.slots.get(h.index as usize)
        {
            if *generation == h.generation {
                return Ok(if l.mapped {
                    mapped_addr(l.local)
                } else {
                    l.local
                });
            }
        }
        let c = self.conn(h)?;
        Ok(if c.mapped {
            mapped_addr(c.local.get())
        } else {
            c.local.get()
        })
    }
    /// The peer's address; v4-mapped for an IPv4 peer of an IPv6 socket (see `local_addr`).
    pub fn peer_addr(&self, h: Handle) -> Result<SocketAddr, Error> {
        let c = self.conn(h)?;
        Ok(if c.mapped {
            mapped_addr(c.remote.get())
        } else {
            c.remote.get()
        })
    }
    /// The connection runs over IPv6 (false for an IPv4 connection, mapped or not).
    pub fn is_ipv6(&self, h: Handle) -> Result<bool, Error> {
        Ok(self.conn(h)?.remote.get().is_ipv6())
    }
    /// Bytes readable now / bytes queued unsent-or-unacked / free space in the send buffer.
    pub fn recv_queue(&self, h: Handle) -> Result<usize, Error> {
        let r = &self.conn(h)?.rcv;
        Ok(r.ring.len() + r.frames.bytes() + r.posted.as_ref().map_or(0, |p| p.filled))
    }
    pub fn send_queue(&self, h: Handle) -> Result<usize, Error> {
        Ok(self.conn(h)?.snd.ring.len())
    }
    pub fn send_space(&self, h: Handle) -> Result<usize, Error> {
        let c = self.conn(h)?;
        Ok(if c.snd.fin_queued {
            0
        } else {
            c.snd.ring.free()
        })
    }
    /// The pending error (reset, refused, timed out) that ended the connection, if any.
    pub fn take_error(&mut self, h: Handle) -> Result<Option<Error>, Error> {
        let c = self.conn_mut(h)?;
        if c.error_reported {
            return Ok(None);
        }
        c.error_reported = c.error.is_some();
        Ok(c.error)
    }
    pub fn config(&self, h: Handle) -> Result<Config, Error> {
        if let Some(Slot {
            generation,
            sock: Some(Sock::Listener(l)),
        }) = self.slots.get(h.index as usize)
        {
            if *generation == h.generation {
                return Ok(l.config);
            }
        }
        Ok(self.conn(h)?.config)
    }
    /// Changes options that may change on a live socket (nodelay, keepalive, buffers, linger).
    pub fn set_config(&mut self, h: Handle, config: Config) -> Result<(), Error> {
        if let Ok(l) = self.listener_mut(h) {
            l.config = config;
            return Ok(());
        }
        self.conn_mut(h)?.set_config(config);
        self.touch(h.index);
        Ok(())
    }
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Some connection has sent data or a FIN that is not acknowledged yet (its
    /// retransmission timer is running). A program about to drop the stack after `close`
    /// keeps polling while this holds, or a lost FIN is never sent again and the peer waits
    /// for it forever.
    pub fn has_unacked(&self) -> bool {
        self.slots.iter().any(|s| match &s.sock {
            Some(Sock::Conn(c)) => {
                c.snd.una != c.snd.max
                    && !matches!(c.state, State::Closed | State::TimeWait | State::Listen)
            }
            _ => false,
        })
    }

    /// A line per connection with its sequence state, queues and timers, for a tool's
    /// "stuck" report (a liveness failure needs to say which side waits for what), plus the
    /// layer's timer queue: its earliest deadline, its length and the active list's.
    pub fn describe_conns(&self) -> String {
        let mut out = format!(
            "tcp layer: last_now {:?}, timer heap {} (earliest {:?}), active {}\n",
            self.last_now,
            self.timers.len(),
            self.timers.peek().map(|Reverse((t, i))| (*t, *i)),
            self.active.len()
        );
        for (i, slot) in self.slots.iter().enumerate() {
            if let Some(Sock::Conn(c)) = &slot.sock {
                out.push_str(&format!(
                    "conn {i}: {:?} {} -> {} snd una {} nxt {} max {} fin_seq {} fin_queued {} \
                     wnd {} | rcv nxt {} ring {} fin_received {} | recovery {:?} lost {} \
                     in_active {} ack_now {} tlp_due {} | timers rto {:?} pto {:?} \
                     delack {:?} persist {:?} reo {:?} tw {:?} registered {:?} retries {}\n",
                    c.state,
                    c.local.get(),
                    c.remote.get(),
                    c.snd.una,
                    c.snd.nxt,
                    c.snd.max,
                    c.fin_seq(),
                    c.snd.fin_queued,
                    c.snd.wnd,
                    c.rcv.nxt,
                    c.rcv.ring.len(),
                    c.rcv.fin_received,
                    c.recovery,
                    c.rack.lost_bytes(),
                    c.in_active,
                    c.ack_now,
                    c.tlp_due,
                    c.timers.rto,
                    c.timers.pto,
                    c.timers.delack,
                    c.timers.persist,
                    c.timers.reo,
                    c.timers.time_wait,
                    c.timers.registered,
                    c.timers.retries,
                ));
            }
        }
        out
    }

    /// Diagnostics for tests and tools: (cwnd, ssthresh, srtt, rto) of a connection.
    pub fn conn_info(&self, h: Handle) -> Result<ConnInfo, Error> {
        use super::cc::CongestionController;
        let c = self.conn(h)?;
        Ok(ConnInfo {
            cwnd: c.cc.cwnd(),
            ssthresh: c.cc.ssthresh(),
            srtt: c.rtt.srtt(),
            rto: c.rtt.rto(),
            mss: c.snd.mss,
            snd_wnd: c.snd.wnd,
            snd_wscale: c.snd.wscale,
            rcv_wscale: c.rcv.wscale,
            sack: c.sack_ok,
            timestamps: c.ts.enabled,
            recv_buffer: c.rcv.buf,
            send_buffer: c.snd.ring.capacity(),
            rack: RackInfo {
                min_rtt: c.rack.min_rtt(),
                rtt: c.rack.rtt(),
                reo_wnd: c.rack.current_reo_wnd(),
                reo_wnd_mult: c.rack.reo_wnd_mult(),
                reordering_seen: c.rack.reordering_seen(),
                marked_lost: c.rack.stats.marked_lost,
                lost_retransmissions: c.rack.stats.lost_retransmissions,
                dsack_received: c.dsack_tx.stats.received,
                dsack_dubious: c.dsack_tx.stats.dubious,
                dsack_undos: c.dsack_tx.stats.undos,
            },
            ecn: c.ecn.ok,
        })
    }

    /// Number of live slots (connections incl. TIME-WAIT and listeners).
    pub fn socket_count(&self) -> usize {
        self.slots.iter().filter(|s| s.sock.is_some()).count()
    }
}

/// Per-connection diagnostics (see [`TcpLayer::conn_info`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    pub cwnd: u32,
    pub ssthresh: u32,
    pub srtt: Option<crate::time::Duration>,
    pub rto: crate::time::Duration,
    pub mss: u32,
    pub snd_wnd: u32,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub sack: bool,
    pub timestamps: bool,
    /// Receive buffer now (the window basis) and send buffer now (ring bytes); both grow
    /// while auto-tuned.
    pub recv_buffer: usize,
    pub send_buffer: usize,
    /// RACK-TLP and D-SACK state (RFC 8985, RFC 2883) of the sender side.
    pub rack: RackInfo,
    /// ECN (RFC 3168) was negotiated in the handshake.
    pub ecn: bool,
}

/// The RACK (RFC 8985) and D-SACK (RFC 2883) part of [`ConnInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RackInfo {
    /// RACK.min_RTT (µs-precise, from RACK's own send times).
    pub min_rtt: Option<crate::time::Duration>,
    /// RACK.rtt: the RTT of the most recently sent segment delivered.
    pub rtt: crate::time::Duration,
    /// RACK.reo_wnd as last computed, and its multiplier (grown by D-SACKs).
    pub reo_wnd: crate::time::Duration,
    pub reo_wnd_mult: u32,
    pub reordering_seen: bool,
    /// Ranges RACK marked lost, and of those, retransmissions lost again.
    pub marked_lost: u64,
    pub lost_retransmissions: u64,
    /// D-SACK blocks accepted and ignored as dubious, and congestion responses undone.
    pub dsack_received: u64,
    pub dsack_dubious: u64,
    pub dsack_undos: u64,
}

#[cfg(test)]
mod key_hash_tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn word_writes_hash_as_their_bytes() {
        let b = KeyHashBuilder { k0: 1, k1: 2 };
        let (w, p) = (0x0102_0304_0506_0708u64, 0x0a0b_0c0du32);
        let mut h1 = b.build_hasher();
        h1.write_u64(w);
        h1.write_u32(p);
        let mut h2 = b.build_hasher();
        h2.write(&w.to_le_bytes());
        h2.write(&p.to_le_bytes());
        assert_eq!(h1.finish(), h2.finish());
        let mut h3 = b.build_hasher();
        h3.write_u32(p);
        h3.write_u64(w);
        assert_ne!(h1.finish(), h3.finish());
        let other = KeyHashBuilder { k0: 3, k1: 2 };
        let mut h4 = other.build_hasher();
        h4.write_u64(w);
        h4.write_u32(p);
        assert_ne!(h1.finish(), h4.finish());
    }

    #[test]
    fn keys_of_both_families_hash_consistently() {
        let b = KeyHashBuilder::random();
        let v4 = |p| {
            ConnKey::of(
                "10.0.0.1:80".parse().unwrap(),
                SocketAddr::from(([10, 0, 0, 2], p)),
            )
        };
        let v6 = |p| {
            ConnKey::of(
                "[fd00::1]:80".parse().unwrap(),
                SocketAddr::new("fd00::2".parse().unwrap(), p),
            )
        };
        assert_eq!(b.hash_one(v4(1000)), b.hash_one(v4(1000)));
        assert_ne!(b.hash_one(v4(1000)), b.hash_one(v4(1001)));
        assert_eq!(b.hash_one(v6(1000)), b.hash_one(v6(1000)));
        assert_ne!(b.hash_one(v6(1000)), b.hash_one(v6(1001)));
    }
}

#[cfg(test)]
mod recycle_tests {
    use super::*;
    use crate::tcp::seq;
    use crate::time::Duration;
    use crate::wire::tcp::SackBlock;

    /// Moves every segment between `a` and `b` until both are quiet (no loss, no delay).
    fn pump(now: Instant, a: &mut TcpLayer, b: &mut TcpLayer) {
        for _ in 0..16 {
            let mut moved = false;
            for a_to_b in [true, false] {
                let (from, to) = if a_to_b {
                    (&mut *a, &mut *b)
                } else {
                    (&mut *b, &mut *a)
                };
                let mut segs = Vec::new();
                from.output(now, &mut |s: &OutSegment<'_>| {
                    segs.push((s.src, s.dst, s.repr, s.payload.to_vec()));
                    true
                });
                moved |= !segs.is_empty();
                for (src, dst, repr, p) in segs {
                    to.input(now, src, dst, &repr, &p);
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn block_of(l: &TcpLayer, h: Handle) -> *const Conn {
        match &l.slots[h.index as usize].sock {
            Some(Sock::Conn(c)) => &**c as *const Conn,
            _ => panic!("no connection"),
        }
    }

    /// The connection's state with its ring storage given back (ring contents are not state:
    /// a recycled ring holds old bytes beyond its length, as a ring from the cache always has).
    fn state_of(l: &mut TcpLayer, h: Handle) -> String {
        let c = l.conn_mut(h).unwrap();
        let caps = (c.snd.ring.capacity(), c.rcv.ring.capacity());
        c.release_all(&mut RingCache::new());
        format!("{caps:?} {c:?}")
    }

    #[test]
    fn a_recycled_control_block_carries_nothing_of_its_previous_connection() {
        let secret = Secret::fixed_for_tests([7; 16]);
        let ca = SocketAddr::from(([198, 18, 0, 1], 40000));
        let sa = SocketAddr::from(([198, 18, 0, 2], 80));
        let cfg = Config::default();
        let mut a = TcpLayer::new(secret);
        let mut b = TcpLayer::new(Secret::fixed_for_tests([8; 16]));
        let l = b.listen(sa, 8, cfg).unwrap();
        let t0 = Instant::from_millis(1000);
        let h = a.connect(t0, ca, sa, cfg).unwrap();
        pump(t0, &mut a, &mut b);
        let s = b.accept(l).unwrap();
        // A life: data both ways, then every list and many fields dirtied by hand (SACK
        // scoreboard, RACK records, reassembly ranges, a posted read, an error, ECN ...).
        let t = t0 + Duration::from_millis(3);
        a.send(h, &[1; 5000]).unwrap();
        b.send(s, &[2; 700]).unwrap();
        pump(t, &mut a, &mut b);
        let mut buf = [0u8; 700];
        assert_eq!(a.recv(h, &mut buf).unwrap(), 700);
        a.send(h, &[3; 3000]).unwrap();
        a.output(t, &mut |_: &OutSegment<'_>| true); // sent, never delivered
        {
            let c = a.conn_mut(h).unwrap();
            let (una, max) = (c.snd.una, c.snd.max);
            assert!(seq::lt(una.wrapping_add(2000), max));
            let sack = SackBlock {
                left: una.wrapping_add(1000),
                right: una.wrapping_add(2000),
            };
            assert!(c.scoreboard.add(sack, una, max) > 0);
            c.rack.on_send(max, max.wrapping_add(100), t, Some(5));
            assert!(c.rack.records().count() > 0);
            assert!(c.rcv.ring.asm.add(100, 10));
            c.rcv.posted = Some(place::Posted {
                buf: vec![9; 64],
                filled: 3,
            });
            c.error = Some(Error::ConnectionReset);
            c.ecn.ok = true;
            c.dupacks = 7;
            c.ts.recent = 12345;
            c.mapped = true;
            c.gso_segs = 9;
        }
        let old = block_of(&a, h);
        a.abort(h).unwrap();
        assert_eq!(a.spare.len(), 1, "the freed block waits on the free list");

        // The same connection opened again, on the recycled block and on a fresh layer with
        // the same key: their control blocks must be identical.
        let t1 = t0 + Duration::from_millis(50);
        let h1 = a.connect(t1, ca, sa, cfg).unwrap();
        assert!(a.spare.is_empty());
        assert_eq!(block_of(&a, h1), old, "the block was reused");
        {
            let c = a.conn(h1).unwrap();
            assert!(c.scoreboard.is_empty() && c.rcv.ring.asm.is_empty());
            assert_eq!(c.rack.records().count(), 0);
            assert!(c.rcv.posted.is_none() && c.error.is_none() && !c.mapped);
        }
        let mut fresh = TcpLayer::new(secret);
        let h2 = fresh.connect(t1, ca, sa, cfg).unwrap();
        assert_eq!(state_of(&mut a, h1), state_of(&mut fresh, h2));

        // And it works: a new connection on a recycled block talks to the server.
        let mut a = TcpLayer::new(secret);
        let h = a.connect(t1, ca, sa, cfg).unwrap();
        a.abort(h).unwrap();
        let t2 = t1 + Duration::from_millis(50);
        let c = SocketAddr::from(([198, 18, 0, 1], 40001));
        let h = a.connect(t2, c, sa, cfg).unwrap();
        assert!(a.spare.is_empty());
        pump(t2, &mut a, &mut b);
        assert_eq!(a.state(h).unwrap(), State::Established);
        let s = b.accept(l).unwrap();
        b.send(s, b"pong").unwrap();
        pump(t2, &mut a, &mut b);
        let mut buf = [0u8; 8];
        assert_eq!(a.recv(h, &mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"pong");
    }

    #[test]
    fn the_hit_cache_holds_two_connections_and_only_live_entries() {
        let k = |p: u16| {
            ConnKey::of(
                SocketAddr::from(([10, 0, 0, 1], p)),
                SocketAddr::from(([10, 0, 0, 2], 80)),
            )
        };
        let mut c = HitCache::default();
        c.put(k(1), 1);
        c.put(k(2), 2);
        // The older connection's last segments and the newer one's first both hit.
        assert_eq!((c.get(&k(1)), c.get(&k(2))), (Some(1), Some(2)));
        // The same 4-tuple in a new slot replaces its old entry, wherever it was.
        c.put(k(1), 5);
        assert_eq!((c.get(&k(1)), c.get(&k(2))), (Some(5), Some(2)));
        c.put(k(1), 6);
        assert_eq!((c.get(&k(1)), c.get(&k(2))), (Some(6), Some(2)));
        // A third pushes the oldest out; a freed slot's entry goes.
        c.put(k(3), 3);
        assert_eq!((c.get(&k(2)), c.get(&k(3))), (None, Some(3)));
        c.forget(3);
        assert_eq!((c.get(&k(1)), c.get(&k(3))), (Some(6), None));
    }

    #[test]
    fn the_free_list_is_bounded() {
        let mut a = TcpLayer::new(Secret::fixed_for_tests([1; 16]));
        let sa = SocketAddr::from(([198, 18, 0, 2], 80));
        let hs: Vec<Handle> = (0..SPARE_CONNS_MAX as u16 + 10)
            .map(|p| {
                let ca = SocketAddr::from(([198, 18, 0, 1], 40000 + p));
                a.connect(Instant::ZERO, ca, sa, Config::default()).unwrap()
            })
            .collect();
        for h in hs {
            a.abort(h).unwrap();
        }
        assert_eq!(a.spare.len(), SPARE_CONNS_MAX);
    }

    #[test]
    fn the_first_segment_of_a_new_connection_finds_it_without_a_lookup() {
        let mut a = TcpLayer::new(Secret::fixed_for_tests([1; 16]));
        let ca = SocketAddr::from(([198, 18, 0, 1], 0));
        let sa = SocketAddr::from(([198, 18, 0, 2], 80));
        let h = a.connect(Instant::ZERO, ca, sa, Config::default()).unwrap();
        let local = a.local_addr(h).unwrap();
        let key = ConnKey::of(local, sa);
        assert_eq!(a.last_hit.newest(), Some((key, h.index)));
        assert_eq!(a.conns.get(&key), Some(&h.index));
        // A second connect to the same 4-tuple is refused and leaves the table as it was.
        assert_eq!(
            a.connect(Instant::ZERO, local, sa, Config::default()),
            Err(Error::AddrInUse)
        );
        assert_eq!(a.conns.len(), 1);
        // Freed: the table entry and the cached one go.
        a.abort(h).unwrap();
        assert!(a.conns.is_empty() && a.last_hit.get(&key).is_none());
    }
}
