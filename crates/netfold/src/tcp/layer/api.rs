//! The user API on handles: listen/accept/connect, send and receive in all their forms,
//! shutdown/close/abort, and the per-handle queries and options.

use super::table::{any4, any6, mapped_addr, wire_addr, ConnKey, Sock};
use super::*;
use crate::buf::borrow::ConnShare;
use crate::buf::BorrowedPayload;
use crate::tcp::conn::{Conn, Ctx};
use crate::tcp::listener::Listener;
use crate::tcp::place::PostedRead;
use crate::tcp::{Config, Error, Handle, State};
use crate::time::Instant;
use crate::wire::IpAddr;
use std::collections::hash_map::Entry;
use std::net::SocketAddr;

impl TcpLayer {
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
        let i = self.table.alloc(Sock::Listener(Box::new(l)));
        self.listeners.insert(local, i);
        Ok(self.table.handle_of(i))
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
        let i = self.table.alloc(Sock::Listener(Box::new(l)));
        self.listeners.insert(TRANSPARENT_KEY, i);
        Ok(self.table.handle_of(i))
    }

    /// A fully established connection from the listener's accept queue.
    pub fn accept(&mut self, listener: Handle) -> Result<Handle, Error> {
        let l = self.listener_mut(listener)?;
        let i = l.accept_queue.pop_front().ok_or(Error::WouldBlock)?;
        if let Some(s) = self.table.slot_at_mut(i) {
            s.owned = true;
            s.parent = None;
        }
        Ok(self.table.handle_of(i))
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
        let i = self.table.next_slot();
        let local = if local.port() == 0 {
            self.pick_port(local, remote, i)?
        } else {
            match self.table.conns.entry(ConnKey::of(local, remote)) {
                Entry::Occupied(_) => return Err(Error::AddrInUse),
                Entry::Vacant(v) => {
                    v.insert(i);
                }
            }
            local
        };
        // The next segment for this stack is most likely the SYN-ACK of this connection.
        self.table.last_hit.put(ConnKey::of(local, remote), i);
        let config = crate::tcp::conn::for_family(config, &remote, self.link_mss_v6);
        let c = Conn::new_active(
            now,
            self.secret.bytes(),
            local,
            remote,
            config,
            &mut self.rings,
        );
        let b = self.boxed(c);
        let got = self.table.alloc(Sock::Conn(ConnSlot {
            owned: true,
            mapped,
            ..ConnSlot::new(b)
        }));
        debug_assert_eq!(got, i);
        self.touch(i);
        Ok(self.table.handle_of(i))
    }

    /// RFC 6056 port choice for a connection from `local` to `remote`; the chosen 4-tuple is
    /// entered in the connection table under slot `i` by the same lookup that found it free.
    pub(super) fn pick_port(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        i: u32,
    ) -> Result<SocketAddr, Error> {
        let (conns, listeners) = (&mut self.table.conns, &self.listeners);
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
        self.send_with(h, data, crate::tcp::SendFlags::default())
    }

    /// [`TcpLayer::send`] with send(2)'s MSG_MORE / MSG_EOR ([`crate::tcp::SendFlags`]). A send
    /// with `eor` waits (WouldBlock) while [`crate::tcp::MAX_RECORD_ENDS`] records are
    /// unacknowledged.
    pub fn send_with(
        &mut self,
        h: Handle,
        data: &[u8],
        flags: crate::tcp::SendFlags,
    ) -> Result<usize, Error> {
        let copy = self.copy;
        let room = self.pressure_send_room(self.conn(h)?);
        // The send ring's storage is taken at the first copying send (`alloc_buffers`).
        let rings = &mut self.rings;
        let c = match self.table.slot_of_mut(h) {
            Some(s) if s.owned && !s.conn.user_closed => &mut s.conn,
            _ => return Err(Error::InvalidHandle),
        };
        if !data.is_empty() && room > 0 {
            c.snd.ensure_ring_storage(rings);
        }
        let r = if data.len() > room {
            // Under memory pressure the queue is held at its moderated size: the checks of a
            // send (a pending error, a shut side) still answer first. A record cut short here
            // does not end (the rest follows in a later send, which carries the flag).
            let cut = crate::tcp::SendFlags {
                eor: false,
                ..flags
            };
            match c.send(&data[..room], copy, cut) {
                Ok(0) => Err(Error::WouldBlock),
                r => r,
            }
        } else {
            c.send(data, copy, flags)
        };
        if let Ok(n) = r {
            self.stats.app_bytes_sent += n as u64;
            self.stats.tx_copy_app += n as u64;
        }
        self.touch(h.index);
        r
    }

    /// Sends what is queued at the next output pass as if Nagle and TCP_CORK were off, once
    /// (Linux `tcp_push_pending_frames` with `TCP_NAGLE_PUSH`, as setting TCP_NODELAY does in
    /// `do_tcp_setsockopt`).
    pub fn push(&mut self, h: Handle) -> Result<(), Error> {
        let c = self.conn_mut(h)?;
        c.snd.request_push();
        self.touch(h.index);
        Ok(())
    }

    /// Zero-copy send (`zerocopy.rs`): queues (a prefix of) `buf` by reference, tagged with
    /// `user`; WouldBlock if the send buffer or the completion bound is full.
    pub fn send_zc(
        &mut self,
        h: Handle,
        buf: crate::tcp::zerocopy::ZcBuf,
        user: u64,
    ) -> Result<crate::tcp::ZcSend, Error> {
        let r = self.conn_mut(h)?.send_zc(buf, user);
        if let Ok(z) = &r {
            // Lent, not copied: application bytes sent without a pass.
            self.stats.app_bytes_sent += z.len as u64;
        }
        self.touch(h.index);
        r
    }

    /// The connection's zero-copy completion queue (a handle that outlives the connection).
    pub fn zc_completions(&mut self, h: Handle) -> Result<crate::tcp::ZcCompletions, Error> {
        Ok(self.conn_mut(h)?.snd.completions())
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
        if c.rcv.posted().is_some() {
            return Err(Error::InvalidInput);
        }
        let share = on.then(|| (home, ConnShare::new(h.index, h.generation)));
        c.rcv.set_frame_sharing(share);
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

    /// `n` bytes went from the receive ring to the application by a copy.
    pub(super) fn count_ring_read(&mut self, h: Handle, n: usize) {
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
        if let Some(c) = self.table.conn_at_mut(i) {
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
            || !c.rcv.ring().is_empty()
            || !c.rcv.frames().is_empty()
        {
            return self.abort(h);
        }
        let finished = c.state == State::Closed;
        if !finished && self.orphans >= self.max_orphans {
            // Linux `tcp_close` -> `tcp_check_oom`: "too many orphaned sockets", reset.
            self.stats.orphan_resets += 1;
            return self.abort(h);
        }
        let c = self.conn_mut(h)?;
        let _ = c.shutdown_write();
        c.user_closed = true;
        c.arm_orphan_timer(now);
        let closed = c.state == State::Closed;
        let i = h.index;
        self.orphans += 1;
        if closed {
            self.free_slot(i);
        } else {
            // The handle goes stale now; the connection lives on inside the layer.
            if let Some(c) = self.table.conn_at_mut(i) {
                c.reclaim_buffers(&mut self.rings);
            }
            self.table.invalidate_handles(i);
            self.touch(i);
        }
        Ok(())
    }

    pub(super) fn close_listener(&mut self, i: u32) -> Result<(), Error> {
        let (local, queued) = match self.table.listener_at_mut(i) {
            Some(l) => (l.local, std::mem::take(&mut l.accept_queue)),
            None => return Err(Error::InvalidHandle),
        };
        // Children not yet accepted (established or half-open) are reset.
        let children: Vec<u32> = self
            .table
            .conn_slots()
            .filter(|(_, s)| s.parent == Some(i) && !s.owned)
            .map(|(ci, _)| ci)
            .chain(queued)
            .collect();
        for ci in children {
            self.abort_index(ci);
        }
        self.listeners.remove(&local);
        self.free_slot(i);
        Ok(())
    }

    pub(super) fn abort_index(&mut self, i: u32) {
        let rst = match self.table.conn_at(i) {
            Some(c) if c.abort_needs_rst() => {
                let now = self.last_now;
                Some((c.local.get().ip(), c.remote.get().ip(), c.make_rst(now)))
            }
            Some(_) => None,
            None => return,
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

    /// Whether the connection is still being opened from this side: SYN-SENT, or
    /// SYN-RECEIVED after a simultaneous open (not a passive Fast Open connection, which may
    /// send before its handshake completes). Linux's `tcp_sendmsg_locked` makes a write wait
    /// (`sk_stream_wait_connect`; EAGAIN when non-blocking) in these states.
    pub fn connecting(&self, h: Handle) -> Result<bool, Error> {
        let c = self.conn(h)?;
        Ok(match c.state {
            State::SynSent => true,
            State::SynReceived => !c.passive,
            _ => false,
        })
    }

    /// The application blocks until the handshake of `h` completes, with data to send once
    /// it does (`on`), or no longer (Linux `sk_write_pending`): the SYN-ACK's ACK then rides
    /// on that data and the receiver enters quick-ACK mode, as Linux's
    /// `tcp_rcv_synsent_state_process` does for a blocked writer.
    pub fn set_writer_waiting(&mut self, h: Handle, on: bool) -> Result<(), Error> {
        match self.table.slot_of_mut(h) {
            Some(s) => {
                s.conn.snd.set_writer_waiting(on);
                Ok(())
            }
            None => Err(Error::InvalidHandle),
        }
    }

    pub fn state(&self, h: Handle) -> Result<State, Error> {
        if self.listener(h).is_ok() {
            return Ok(State::Listen);
        }
        Ok(self.conn(h)?.state)
    }

    /// The local address: as bound for a listener (`[::]:p` stays the IPv6 wildcard), the
    /// connection's own for a connection; an IPv4 connection (or listener) of an IPv6 socket
    /// reports it v4-mapped (`[::ffff:a.b.c.d]:p`), as Linux's getsockname does.
    pub fn local_addr(&self, h: Handle) -> Result<SocketAddr, Error> {
        if let Ok(l) = self.listener(h) {
            return Ok(if l.mapped {
                mapped_addr(l.local)
            } else {
                l.local
            });
        }
        let s = self.held(h)?;
        Ok(if s.mapped {
            mapped_addr(s.conn.local.get())
        } else {
            s.conn.local.get()
        })
    }

    /// The peer's address; v4-mapped for an IPv4 peer of an IPv6 socket (see `local_addr`).
    pub fn peer_addr(&self, h: Handle) -> Result<SocketAddr, Error> {
        let s = self.held(h)?;
        Ok(if s.mapped {
            mapped_addr(s.conn.remote.get())
        } else {
            s.conn.remote.get()
        })
    }

    /// The connection runs over IPv6 (false for an IPv4 connection, mapped or not).
    pub fn is_ipv6(&self, h: Handle) -> Result<bool, Error> {
        Ok(self.conn(h)?.remote.get().is_ipv6())
    }

    /// Bytes readable now / bytes queued unsent-or-unacked / free space in the send buffer.
    pub fn recv_queue(&self, h: Handle) -> Result<usize, Error> {
        let r = &self.conn(h)?.rcv;
        Ok(r.ring().len() + r.frames().bytes() + r.posted().map_or(0, |p| p.filled))
    }

    pub fn send_queue(&self, h: Handle) -> Result<usize, Error> {
        Ok(self.conn(h)?.snd.ring().len())
    }

    /// (SND.UNA, SND.MAX, the end of the data written): what transmit timestamps compare a
    /// byte's sequence number with (sent once it is below SND.MAX, acknowledged once below
    /// SND.UNA).
    pub fn send_seqs(&self, h: Handle) -> Result<(u32, u32, u32), Error> {
        let snd = &self.conn(h)?.snd;
        Ok((snd.una(), snd.max(), snd.fin_seq()))
    }

    /// Bytes queued beyond SND.NXT: written but not yet sent once (Linux
    /// `write_seq - snd_nxt`, what TCP_NOTSENT_LOWAT compares).
    pub fn send_unsent(&self, h: Handle) -> Result<usize, Error> {
        let snd = &self.conn(h)?.snd;
        let end = snd.fin_seq();
        Ok(if crate::tcp::seq::lt(snd.nxt(), end) {
            crate::tcp::seq::dist(snd.nxt(), end) as usize
        } else {
            0
        })
    }

    /// How many bytes a write may queue now under TCP_NOTSENT_LOWAT `lowat` (Linux's rule,
    /// see `Conn::notsent_room`). The first call turns on the write-chunk bookkeeping the
    /// rule needs for the connection's later writes; a connection that never asks skips it.
    pub fn notsent_room(&mut self, h: Handle, lowat: u32, limit: usize) -> Result<usize, Error> {
        Ok(self.conn_mut(h)?.notsent_room(lowat, limit))
    }

    pub fn send_space(&self, h: Handle) -> Result<usize, Error> {
        let c = self.conn(h)?;
        Ok(if c.snd.fin_queued() {
            0
        } else {
            c.snd.ring().free().min(self.pressure_send_room(c))
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
        if let Ok(l) = self.listener(h) {
            return Ok(l.config);
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

    /// Ends every connection and listener now, as a stack that is being discarded must, so
    /// that no peer is left waiting: a RST where RFC 9293 §3.10.7 ABORT sends one
    /// (SYN-RECEIVED, ESTABLISHED, FIN-WAIT-1/2, CLOSE-WAIT), nothing for CLOSING, LAST-ACK
    /// and SYN-SENT. Left alone: TIME-WAIT, and a closed connection in FIN-WAIT-2, whose
    /// data and FIN are all delivered (a RST would make the peer discard what it has not
    /// read yet; Linux lets such an orphan expire by tcp_fin_timeout without a RST). Handles
    /// the application still holds go stale. Returns the number of connections ended; the
    /// RSTs leave with the next poll.
    pub fn abort_all(&mut self) -> usize {
        let done =
            |c: &Conn| c.state == State::TimeWait || (c.state == State::FinWait2 && c.user_closed);
        let live = |l: &TcpLayer| l.table.conns().filter(|(_, c)| !done(c)).count();
        let before = live(self);
        for i in 0..self.table.slots.len() as u32 {
            if self.table.listener_at(i).is_some() {
                let _ = self.close_listener(i);
            } else if self.table.conn_at(i).is_some_and(|c| !done(c)) {
                self.abort_index(i);
            }
        }
        before - live(self)
    }
}
