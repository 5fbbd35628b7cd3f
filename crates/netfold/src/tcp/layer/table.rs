//! The connection table: a slab of slots (connections and listeners, addressed by index and
//! generation through [`Handle`]s), the 4-tuple map keyed by [`ConnKey`] with its two-entry
//! [`HitCache`], and the lifecycle around them: entering a connection, freeing a slot (its
//! control block kept for reuse), reacting to what a connection reports ([`Event`]).
//! A connection's slot is a [`ConnSlot`]: its control block and what the layer keeps about
//! it (which listener it belongs to, whether the application holds it, ...), as Linux keeps
//! such things in `struct sock` and not in the TCB. [`Table::slot_at`] / [`Table::slot_at_mut`]
//! (and [`Table::conn_at`] / [`Table::conn_at_mut`] for the control block alone) are the one
//! way to reach a connection's slot.

use super::*;
use crate::hash::SipHash13Builder;
use crate::tcp::conn::{Conn, Event};
use crate::tcp::listener::Listener;
use crate::tcp::{Error, Handle};
use crate::wire::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};

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
pub(super) enum KeyAddrs {
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

    pub(super) fn of(local: SocketAddr, remote: SocketAddr) -> Self {
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
pub(super) struct HitCache([Option<(ConnKey, u32)>; 2]);

impl HitCache {
    #[inline]
    pub(super) fn get(&self, key: &ConnKey) -> Option<u32> {
        match &self.0 {
            [Some((k, i)), _] if k == key => Some(*i),
            [_, Some((k, i))] if k == key => Some(*i),
            _ => None,
        }
    }

    /// `key` is (now) slot `i`'s: it becomes the newest entry, the newest the older one
    /// (unless it was the same 4-tuple, whose slot `i` replaces).
    #[inline]
    pub(super) fn put(&mut self, key: ConnKey, i: u32) {
        if !matches!(self.0[0], Some((k, _)) if k == key) {
            self.0[1] = self.0[0];
        }
        self.0[0] = Some((key, i));
    }

    /// Slot `i` left the table.
    pub(super) fn forget(&mut self, i: u32) {
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

/// A connection's slot: the control block (boxed, recycled through the layer's free list)
/// and the layer's bookkeeping about it, none of which the TCB reads.
#[derive(Debug)]
pub(super) struct ConnSlot {
    pub(super) conn: Box<Conn>,
    /// Listener slot this half-open/unaccepted connection belongs to.
    pub(super) parent: Option<u32>,
    /// The application holds a handle (connect(), or accept() returned it).
    pub(super) owned: bool,
    /// Counted in the parent listener's SYN queue (its `half_open`): set when a SYN enters
    /// it, cleared when the handshake completes (`Event::Established`) or the slot is freed.
    pub(super) in_syn_queue: bool,
    /// Queued on the layer's active list (`sched.rs`).
    pub(super) in_active: bool,
    /// An IPv4 connection owned by an IPv6 socket (accepted by a dual-stack `[::]` listener,
    /// or connected to a v4-mapped address): its addresses are reported as v4-mapped IPv6
    /// addresses `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2, RFC 3493 §3.7), as Linux does. How the
    /// socket sees the connection; the TCB runs on the wire addresses.
    pub(super) mapped: bool,
}

impl ConnSlot {
    /// A slot for `conn`, held by no one and in no listener's queue.
    pub(super) fn new(conn: Box<Conn>) -> Self {
        ConnSlot {
            conn,
            parent: None,
            owned: false,
            in_syn_queue: false,
            in_active: false,
            mapped: false,
        }
    }
}

#[derive(Debug)]
pub(super) enum Sock {
    Conn(ConnSlot),
    /// Boxed like a connection: slots stay small (a listener holds its address, config and
    /// queues; none of it is on the per-segment path).
    Listener(Box<Listener>),
}

impl Sock {
    /// The connection's slot, if this is a connection.
    #[inline(always)]
    fn conn(&self) -> Option<&ConnSlot> {
        match self {
            Sock::Conn(s) => Some(s),
            Sock::Listener(_) => None,
        }
    }

    /// [`Sock::conn`], mutable.
    #[inline(always)]
    fn conn_mut(&mut self) -> Option<&mut ConnSlot> {
        match self {
            Sock::Conn(s) => Some(s),
            Sock::Listener(_) => None,
        }
    }
}

#[derive(Debug)]
pub(super) struct Slot {
    generation: u32,
    sock: Option<Sock>,
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
pub(super) fn any6(port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0))
}
/// The IPv4 wildcard `0.0.0.0:port`.
pub(super) fn any4(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
}

/// The slab of slots and the 4-tuple map into it.
#[derive(Debug)]
pub(super) struct Table {
    pub(super) slots: Vec<Slot>,
    pub(super) free: Vec<u32>,
    pub(super) conns: HashMap<ConnKey, u32, SipHash13Builder>,
    /// The connections `input` found last, or entered in the table last (see [`HitCache`]).
    pub(super) last_hit: HitCache,
}

impl Table {
    pub(super) fn new() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            conns: HashMap::with_hasher(SipHash13Builder::random()),
            last_hit: HitCache::default(),
        }
    }

    /// The connection slot `i`, if it holds a connection.
    #[inline(always)]
    pub(super) fn slot_at(&self, i: u32) -> Option<&ConnSlot> {
        self.slots.get(i as usize)?.sock.as_ref()?.conn()
    }

    /// [`Table::slot_at`], mutable.
    #[inline(always)]
    pub(super) fn slot_at_mut(&mut self, i: u32) -> Option<&mut ConnSlot> {
        self.slots.get_mut(i as usize)?.sock.as_mut()?.conn_mut()
    }

    /// The connection in slot `i`, if it holds one.
    #[inline(always)]
    pub(super) fn conn_at(&self, i: u32) -> Option<&Conn> {
        self.slot_at(i).map(|s| &*s.conn)
    }

    /// [`Table::conn_at`], mutable.
    #[inline(always)]
    pub(super) fn conn_at_mut(&mut self, i: u32) -> Option<&mut Conn> {
        self.slot_at_mut(i).map(|s| &mut *s.conn)
    }

    /// The listener in slot `i`, if it holds one.
    #[inline]
    pub(super) fn listener_at(&self, i: u32) -> Option<&Listener> {
        match self.slots.get(i as usize) {
            Some(Slot {
                sock: Some(Sock::Listener(l)),
                ..
            }) => Some(l),
            _ => None,
        }
    }

    /// [`Table::listener_at`], mutable.
    #[inline]
    pub(super) fn listener_at_mut(&mut self, i: u32) -> Option<&mut Listener> {
        match self.slots.get_mut(i as usize) {
            Some(Slot {
                sock: Some(Sock::Listener(l)),
                ..
            }) => Some(l),
            _ => None,
        }
    }

    /// The socket `h` names, if the handle is current (its slot not freed since).
    #[inline(always)]
    pub(super) fn sock(&self, h: Handle) -> Option<&Sock> {
        match self.slots.get(h.index as usize) {
            Some(Slot {
                generation,
                sock: Some(s),
            }) if *generation == h.generation => Some(s),
            _ => None,
        }
    }

    /// [`Table::sock`], mutable.
    #[inline(always)]
    pub(super) fn sock_mut(&mut self, h: Handle) -> Option<&mut Sock> {
        match self.slots.get_mut(h.index as usize) {
            Some(Slot {
                generation,
                sock: Some(s),
            }) if *generation == h.generation => Some(s),
            _ => None,
        }
    }

    /// Live slots (connections, TIME-WAIT included, and listeners).
    pub(super) fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.sock.is_some()).count()
    }

    /// The connection slot `h` names, if the handle is current (held by the application or
    /// not).
    #[inline(always)]
    pub(super) fn slot_of(&self, h: Handle) -> Option<&ConnSlot> {
        self.sock(h)?.conn()
    }

    /// [`Table::slot_of`], mutable.
    #[inline(always)]
    pub(super) fn slot_of_mut(&mut self, h: Handle) -> Option<&mut ConnSlot> {
        self.sock_mut(h)?.conn_mut()
    }

    /// The connection `h` names, if the handle is current (held by the application or not).
    #[inline]
    pub(super) fn conn_of_mut(&mut self, h: Handle) -> Option<&mut Conn> {
        self.slot_of_mut(h).map(|s| &mut *s.conn)
    }

    /// Every connection.
    pub(super) fn conns_mut(&mut self) -> impl Iterator<Item = &mut Conn> + '_ {
        self.slots
            .iter_mut()
            .filter_map(|s| s.sock.as_mut()?.conn_mut().map(|s| &mut *s.conn))
    }

    /// Every connection slot with its index.
    pub(super) fn conn_slots(&self) -> impl Iterator<Item = (u32, &ConnSlot)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i as u32, s.sock.as_ref()?.conn()?)))
    }

    /// Every connection with its slot's index.
    pub(super) fn conns(&self) -> impl Iterator<Item = (u32, &Conn)> + '_ {
        self.conn_slots().map(|(i, s)| (i, &*s.conn))
    }

    /// The slot of the connection `key` names: the hit cache, then the table (whose answer
    /// the cache then keeps).
    #[inline(always)]
    pub(super) fn find(&mut self, key: &ConnKey) -> Option<u32> {
        match self.last_hit.get(key) {
            Some(i) => Some(i),
            None => {
                let f = self.conns.get(key).copied();
                if let Some(i) = f {
                    self.last_hit.put(*key, i);
                }
                f
            }
        }
    }

    /// The slot the next `alloc` returns.
    pub(super) fn next_slot(&self) -> u32 {
        match self.free.last() {
            Some(&i) => i,
            None => self.slots.len() as u32,
        }
    }

    /// Puts `sock` in a free slot (or a new one) and returns its index.
    pub(super) fn alloc(&mut self, sock: Sock) -> u32 {
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

    /// Every outstanding handle to slot `i` goes stale (its socket stays).
    pub(super) fn invalidate_handles(&mut self, i: u32) {
        if let Some(slot) = self.slots.get_mut(i as usize) {
            slot.generation = slot.generation.wrapping_add(1);
        }
    }

    /// The handle of slot `i` as it is now.
    pub(super) fn handle_of(&self, i: u32) -> Handle {
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
    pub(super) fn unmap(&mut self, key: ConnKey, i: u32) {
        if let Some(j) = self.conns.remove(&key) {
            if j != i {
                self.conns.insert(key, j);
            }
        }
        self.last_hit.forget(i);
    }
}

impl TcpLayer {
    /// `c` in a control block of the free list, or a new box.
    #[inline]
    pub(super) fn boxed(&mut self, mut c: Conn) -> Box<Conn> {
        if self.rcv_moderated {
            // Born under memory pressure: moderated from its first window (`pressure.rs`).
            c.rcv.moderate(super::PRESSURE_RCVBUF as u32);
        }
        match self.spare.pop() {
            Some(mut b) => {
                b.renew(c);
                b
            }
            None => Box::new(c),
        }
    }

    /// A passive connection of listener `parent` into a slot and the table under `key`
    /// (counted in the listener's SYN queue if `in_syn_queue`; seen v4-mapped if `mapped`);
    /// the lookup cache gets it too (its next segment, the handshake's ACK, then needs no
    /// table lookup).
    pub(super) fn enter_conn(
        &mut self,
        key: ConnKey,
        c: Conn,
        parent: u32,
        in_syn_queue: bool,
        mapped: bool,
    ) -> u32 {
        let b = self.boxed(c);
        let i = self.table.alloc(Sock::Conn(ConnSlot {
            parent: Some(parent),
            in_syn_queue,
            mapped,
            ..ConnSlot::new(b)
        }));
        self.table.conns.insert(key, i);
        self.table.last_hit.put(key, i);
        i
    }

    /// Whether connection `i` waits in the accept queue of listener `parent`. A connection
    /// reset (or timed out) there stays until accepted, as on Linux (`tcp_reset` leaves the
    /// child queued): `accept` returns it, its data is readable, then the error is reported.
    /// The queue's backlog bounds how many such connections are held.
    pub(super) fn in_accept_queue(&self, parent: Option<u32>, i: u32) -> bool {
        let Some(p) = parent else { return false };
        self.table
            .listener_at(p)
            .is_some_and(|l| l.accept_queue.contains(&i))
    }

    /// Releases a slot; every outstanding handle to it goes stale.
    pub(super) fn free_slot(&mut self, i: u32) {
        self.fastopen_release(i);
        let slot = &mut self.table.slots[i as usize];
        if let Some(Sock::Conn(s)) = slot.sock.take() {
            let mut c = s.conn;
            if c.user_closed {
                self.orphans = self.orphans.saturating_sub(1);
            }
            c.retire(&mut self.rings);
            self.table
                .unmap(ConnKey::of(c.local.get(), c.remote.get()), i);
            if let Some(p) = s.parent {
                if let Some(l) = self.table.listener_at_mut(p) {
                    if s.in_syn_queue {
                        l.half_open = l.half_open.saturating_sub(1);
                    }
                    l.accept_queue.retain(|&x| x != i);
                }
            }
            if self.spare.len() < SPARE_CONNS_MAX {
                self.spare.push(c);
            }
        }
        let slot = &mut self.table.slots[i as usize];
        slot.sock = None;
        slot.generation = slot.generation.wrapping_add(1);
        self.table.free.push(i);
    }

    /// The connection slot `h` names, if the handle is current and the application holds
    /// the connection.
    #[inline]
    pub(super) fn held(&self, h: Handle) -> Result<&ConnSlot, Error> {
        match self.table.slot_of(h) {
            Some(s) if s.owned && !s.conn.user_closed => Ok(s),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// The connection `h` names, if the handle is current and the application holds it.
    #[inline]
    pub(super) fn conn(&self, h: Handle) -> Result<&Conn, Error> {
        self.held(h).map(|s| &*s.conn)
    }

    /// [`TcpLayer::conn`], mutable.
    #[inline]
    pub(super) fn conn_mut(&mut self, h: Handle) -> Result<&mut Conn, Error> {
        match self.table.slot_of_mut(h) {
            Some(s) if s.owned && !s.conn.user_closed => Ok(&mut s.conn),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// The listener `h` names, if the handle is current.
    pub(super) fn listener(&self, h: Handle) -> Result<&Listener, Error> {
        match self.table.sock(h) {
            Some(Sock::Listener(l)) => Ok(l),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// [`TcpLayer::listener`], mutable.
    pub(super) fn listener_mut(&mut self, h: Handle) -> Result<&mut Listener, Error> {
        match self.table.sock_mut(h) {
            Some(Sock::Listener(l)) => Ok(l),
            _ => Err(Error::InvalidHandle),
        }
    }

    /// Reacts to what a connection reported.
    pub(super) fn handle_event(&mut self, i: u32, ev: Event) {
        match ev {
            Event::None => {}
            Event::Established => {
                let parent = match self.table.slot_at_mut(i) {
                    // The handshake is done: the connection leaves the SYN queue.
                    Some(s) => {
                        s.in_syn_queue = false;
                        s.parent
                    }
                    _ => None,
                };
                if self.fastopen_release(i) {
                    // A Fast Open connection, in the accept queue since its SYN.
                    return;
                }
                if let Some(p) = parent {
                    if let Some(l) = self.table.listener_at_mut(p) {
                        l.half_open = l.half_open.saturating_sub(1);
                        l.accept_queue.push_back(i);
                    }
                }
            }
            Event::Closed | Event::Dropped => {
                let (key, keep) = match self.table.slot_at(i) {
                    Some(s) => (
                        ConnKey::of(s.conn.local.get(), s.conn.remote.get()),
                        ev == Event::Closed
                            && !s.conn.user_closed
                            && (s.owned || self.in_accept_queue(s.parent, i)),
                    ),
                    _ => return,
                };
                if keep {
                    // The application still holds the handle (to read data or the error);
                    // the 4-tuple is free for new connections.
                    self.table.unmap(key, i);
                } else {
                    self.free_slot(i);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::buffer::RingCache;
    use crate::tcp::place;
    use crate::tcp::secret::Secret;
    use crate::tcp::seq;
    use crate::tcp::{Config, OutSegment, RxSegment, State};
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
                    to.input(now, RxSegment::new(src, dst, &repr, &[&p]));
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn block_of(l: &TcpLayer, h: Handle) -> *const Conn {
        match l.table.conn_at(h.index) {
            Some(c) => c as *const Conn,
            None => panic!("no connection"),
        }
    }

    /// The connection's state with its ring storage given back (ring contents are not state:
    /// a recycled ring holds old bytes beyond its length, as a ring from the cache always has).
    fn state_of(l: &mut TcpLayer, h: Handle) -> String {
        let c = l.conn_mut(h).unwrap();
        let caps = (c.snd.ring().capacity(), c.rcv.ring().capacity());
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
            let (una, max) = (c.snd.una(), c.snd.max());
            assert!(seq::lt(una.wrapping_add(2000), max));
            let sack = SackBlock {
                left: una.wrapping_add(1000),
                right: una.wrapping_add(2000),
            };
            assert!(c.snd.on_sack_block(sack, una) > 0);
            c.snd.on_rack_sent(max, max.wrapping_add(100), t, Some(5));
            assert!(c.snd.rack().records().count() > 0);
            assert!(c.rcv.ring_mut().asm.add(100, 10));
            c.rcv.post(place::Posted {
                buf: vec![9; 64],
                filled: 3,
            });
            c.error = Some(Error::ConnectionReset);
            c.ecn.ok = true;
            for _ in 0..7 {
                c.snd.on_dupack();
            }
            c.ts.recent = 12345;
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
            assert!(c.snd.scoreboard().is_empty() && c.rcv.ring().asm.is_empty());
            assert_eq!(c.snd.rack().records().count(), 0);
            assert!(c.rcv.posted().is_none() && c.error.is_none());
            // The slot (not the recycled block) says how the socket sees the addresses.
            assert!(!a.table.slot_at(h1.index).is_some_and(|s| s.mapped));
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
        assert_eq!(a.table.last_hit.newest(), Some((key, h.index)));
        assert_eq!(a.table.conns.get(&key), Some(&h.index));
        // A second connect to the same 4-tuple is refused and leaves the table as it was.
        assert_eq!(
            a.connect(Instant::ZERO, local, sa, Config::default()),
            Err(Error::AddrInUse)
        );
        assert_eq!(a.table.conns.len(), 1);
        // Freed: the table entry and the cached one go.
        a.abort(h).unwrap();
        assert!(a.table.conns.is_empty() && a.table.last_hit.get(&key).is_none());
    }

    #[test]
    fn keys_of_both_families_hash_consistently() {
        use std::hash::BuildHasher;
        let b = SipHash13Builder::random();
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
