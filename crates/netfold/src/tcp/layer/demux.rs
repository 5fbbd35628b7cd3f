//! Demultiplexing: one received segment ([`RxSegment`]) to its connection (the hit cache,
//! then the table), to a listener (SYN, SYN-cookie ACK) or to a RST; and ICMP errors and
//! neighbour failures to the connections they concern.

use super::table::{any4, any6, wire_addr, ConnKey};
use super::*;
use crate::buf::FramePos;
use crate::tcp::conn::{Conn, Ctx, Event, RST_QUEUE_MAX};
use crate::tcp::place::{self, RxCheck};
use crate::tcp::syncookie;
use crate::tcp::{Config, Ecn, Error, IcmpError, Payload, State};
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpRepr};
use crate::wire::IpAddr;
use std::net::SocketAddr;

/// The per-segment context of a connection's input, built from the layer's fields (a macro, not
/// a method: a method would borrow the whole layer while `self.table` is borrowed for the
/// connection; the expansion borrows only these fields).
macro_rules! ctx {
    ($layer:ident, $now:expr) => {
        Ctx {
            now: $now,
            stats: &mut $layer.stats,
            rsts: &mut $layer.rsts,
            challenge: &mut $layer.challenge,
            rings: &mut $layer.rings,
            copy: $layer.copy,
        }
    };
}

/// One received TCP segment as [`TcpLayer::input`] takes it: the IP addresses it came from
/// and went to (one family), its header, its payload and the ECN field of its IP header.
///
/// The payload is in `parts`: one slice for a plain segment, or a GRO train's segments'
/// payloads still in their frames (`repr` is then the first segment's header, with PSH from
/// the last; GRO merges only segments of equal IP ECN fields). `pending` says, per part,
/// whether its TCP checksum is still open: `Some(sum)` is the folded sum of the part's
/// pseudo-header and TCP header, to which its payload's sum must add up to 0xffff; `None`
/// (or no entry) means verified already. Open sums are completed while the payload is copied
/// to where it belongs (a posted read or the receive ring), and the segment is processed
/// only if every sum verifies; a train with a bad segment is taken apart and its good
/// segments go in one by one.
#[derive(Debug, Clone, Copy)]
pub struct RxSegment<'a> {
    /// IP source (the peer).
    pub src: IpAddr,
    /// IP destination (us, or any address for a transparent listener).
    pub dst: IpAddr,
    /// The TCP header.
    pub repr: &'a TcpRepr,
    /// The payload, in one or more slices.
    pub parts: &'a [&'a [u8]],
    /// Open checksums per part (empty: all verified).
    pub pending: &'a [Option<u16>],
    /// Where each part lies in the receive batch, when all of them lie in its frames (else
    /// empty): a frame-level borrowing read may then keep the frames instead of copying.
    pub at: &'a [FramePos],
    /// The IP header's ECN field (RFC 3168: a CE mark on data of an ECN connection is
    /// echoed with ECE).
    pub ecn: Ecn,
}

impl<'a> RxSegment<'a> {
    /// A checksum-verified segment from `src` to `dst` without an ECN mark; `parts` is its
    /// payload (`&[payload]` for one slice).
    #[inline]
    pub fn new(
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        repr: &'a TcpRepr,
        parts: &'a [&'a [u8]],
    ) -> Self {
        RxSegment {
            src: src.into(),
            dst: dst.into(),
            repr,
            parts,
            pending: &[],
            at: &[],
            ecn: Ecn::NotEct,
        }
    }

    /// The segment with the IP header's ECN field `ecn`.
    #[inline]
    pub fn with_ecn(self, ecn: Ecn) -> Self {
        RxSegment { ecn, ..self }
    }

    /// The segment with its parts' places in the receive batch (see [`RxSegment::at`]).
    #[inline]
    pub fn with_frames(self, at: &'a [FramePos]) -> Self {
        RxSegment { at, ..self }
    }

    /// The segment with checksums still open (see [`RxSegment`]).
    #[inline]
    pub fn with_pending(self, pending: &'a [Option<u16>]) -> Self {
        RxSegment { pending, ..self }
    }
}

impl TcpLayer {
    /// One received segment (IPv4 or IPv6): demultiplexed to its connection (the hit cache,
    /// then the table), to a listener, or answered with a RST (RFC 9293 §3.10.7.1). Replies
    /// leave through the next [`TcpLayer::output`]. The result says what the checks of open
    /// checksums came to (all zero for a verified segment), for the interface's counters.
    pub fn input(&mut self, now: Instant, seg: RxSegment<'_>) -> RxCheck {
        let RxSegment {
            src,
            dst,
            repr,
            parts,
            pending,
            at: _,
            ecn,
        } = seg;
        let key = ConnKey::new(dst, repr.dst_port, src, repr.src_port);
        let found = self.table.find(&key);
        // Checksums left open are verified before anything reads the header (the connection
        // only tells where the payload may be copied meanwhile).
        let mut check = RxCheck::default();
        let conn = found.and_then(|i| self.table.conn_at_mut(i));
        let verified = match conn {
            Some(c) => c.place(
                &seg,
                self.copy,
                &mut self.stats,
                &mut check,
                &mut self.rings,
            ),
            None => place::verify_separately(parts, pending, &mut check),
        };
        if let Err(bad) = verified {
            if parts.len() > 1 {
                check.add(self.input_one_by_one(now, seg, bad));
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
            let mut ctx = ctx!(self, now);
            let (ev, quiet) = match self.table.conn_at_mut(i) {
                Some(c) => {
                    c.ecn.rx_ce = ecn == Ecn::Ce;
                    let ev = c.input(&mut ctx, repr, payload);
                    // What `place` staged and `input` did not keep stays uncommitted.
                    c.rcv.drop_staged();
                    if c.rcv.frames().has_pending() && self.borrowers.last() != Some(&i) {
                        self.borrowers.push(i);
                    }
                    c.tune_buffers(ctx.now, ctx.rings, ctx.stats);
                    c.reclaim_buffers(ctx.rings);
                    let quiet = ev == Event::None && c.nothing_to_send();
                    if quiet {
                        // No output pass follows to update them (`chrono.rs`).
                        c.chrono_update(ctx.now);
                    }
                    (ev, quiet)
                }
                None => (Event::None, false),
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

    /// A train in which segment `bad` failed its check, taken apart: that one is dropped and
    /// counted, and the others go in one by one (those before it as verified, those after it
    /// with their own check), so the good ones are not lost.
    #[inline(never)]
    fn input_one_by_one(&mut self, now: Instant, seg: RxSegment<'_>, bad: usize) -> RxCheck {
        let mut check = RxCheck {
            bad: 1,
            ..RxCheck::default()
        };
        let mut seq = seg.repr.seq;
        for (i, part) in seg.parts.iter().enumerate() {
            // GRO merged only segments with the same header but for the sequence number and
            // PSH (which the train took from its last segment).
            let mut r = *seg.repr;
            r.seq = seq;
            seq = seq.wrapping_add(part.len() as u32);
            if i + 1 < seg.parts.len() {
                r.flags.0 &= !TcpFlags::PSH;
            }
            let want = match i.cmp(&bad) {
                core::cmp::Ordering::Less => None,
                core::cmp::Ordering::Equal => continue,
                core::cmp::Ordering::Greater => seg.pending.get(i).copied().flatten(),
            };
            let one = RxSegment {
                repr: &r,
                parts: std::slice::from_ref(part),
                pending: &[want],
                at: seg.at.get(i..=i).unwrap_or(&[]),
                ..seg
            };
            check.add(self.input(now, one));
        }
        check
    }

    /// A segment no connection takes: a listener's (SYN, cookie ACK) or answered with a RST.
    /// The family checks live here: no connection is ever keyed by a v4-mapped or mixed
    /// pair, so such a segment never reaches the connection path above.
    #[inline(never)]
    pub(super) fn input_no_conn(
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
        let mut ctx = ctx!(self, now);
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
            let mut ctx = ctx!(self, now);
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
        let (config, syn_full, accept_full, mapped) = match self.table.listener_at(li) {
            Some(l) => (
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
        let Some(l) = self.table.listener_at(li) else {
            return;
        };
        let tfo = self
            .fastopen
            .on_syn(l, local, remote, repr, payload.len(), &mut self.stats);
        let li_gen = self.table.handle_of(li).generation;
        let config = crate::tcp::conn::for_family(config, &remote, self.link_mss_v6);
        let mut c = Conn::new_passive(now, self.secret.bytes(), local, remote, config, repr);
        let mut ctx = ctx!(self, now);
        // RFC 7413 §4.2.2: a Fast Open connection goes to the accept queue at once.
        let fast_open = c.fastopen_syn(tfo, &mut ctx, repr, payload, (li, li_gen));
        let i = self.enter_conn(key, c, li, !fast_open, mapped);
        if let Some(l) = self.table.listener_at_mut(li) {
            if fast_open {
                l.fastopen_pending += 1;
                l.accept_queue.push_back(i);
            } else {
                l.half_open += 1;
            }
        }
        self.touch(i);
    }

    /// The listener a SYN to `local` (wire form) goes to: the exact address, then the
    /// family's wildcard, then, for IPv4, a dual-stack `[::]` listener (one without
    /// `Config::v6only`: Linux `net.ipv6.bindv6only = 0`), then the transparent listener.
    /// Linux scores an AF_INET socket above an AF_INET6 one for the same IPv4 segment
    /// (`compute_score`); the order here gives the same answer (though `listen` never lets an
    /// IPv4 listener and a dual-stack one share a port, so only the IPv4 wildcard and the
    /// transparent listener are ever behind it).
    pub(super) fn find_listener(&self, local: SocketAddr) -> Option<u32> {
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
    pub(super) fn dual_stack(&self, i: u32) -> bool {
        self.table
            .listener_at(i)
            .is_some_and(|l| l.local.is_ipv6() && !l.config.v6only)
    }

    /// RFC 4987 §3.6: the listener `li`'s SYN queue is full, so `syn` is answered statelessly
    /// with a SYN-ACK whose ISN (and TSval) carry a cookie.
    pub(super) fn send_cookie(
        &mut self,
        now: Instant,
        li: u32,
        local: SocketAddr,
        remote: SocketAddr,
        syn: &TcpRepr,
        config: Config,
    ) {
        if let Some(l) = self.table.listener_at_mut(li) {
            l.last_overflow = Some(now);
        }
        // The SYN-ACK announces the MSS a connection of this family would (`Config::mss`).
        let config = crate::tcp::conn::for_family(config, &remote, self.link_mss_v6);
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
    pub(super) fn cookie_ack(
        &mut self,
        now: Instant,
        li: u32,
        local: SocketAddr,
        remote: SocketAddr,
        ack: &TcpRepr,
        payload: Payload<'_>,
    ) -> bool {
        let (config, accept_full, mapped) = match self.table.listener_at(li) {
            Some(l) if l.recent_overflow(now) => {
                (l.config, l.accept_queue_full(), l.mapped && local.is_ipv4())
            }
            _ => return false,
        };
        let config = crate::tcp::conn::for_family(config, &remote, self.link_mss_v6);
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
        // The echoed TSval is the cookie's, up to 63 ms older than the SYN-ACK: as an RTT
        // sample it would overstate the RTT, so this one ACK gives none.
        let mut ack = *ack;
        if let Some(ts) = ack.options.timestamps.as_mut() {
            ts.tsecr = 0;
        }
        let mut ctx = ctx!(self, now);
        if c.input(&mut ctx, &ack, payload) != Event::Established {
            return true;
        }
        let i = self.enter_conn(ConnKey::of(local, remote), c, li, false, mapped);
        if let Some(l) = self.table.listener_at_mut(li) {
            l.accept_queue.push_back(i);
        }
        self.touch(i);
        true
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

    pub(super) fn icmp_error_inner(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        quoted_seq: Option<u32>,
        err: IcmpError,
    ) -> bool {
        self.last_now = now;
        let Some(&i) = self.table.conns.get(&ConnKey::of(local, remote)) else {
            return false;
        };
        let closed = match self.table.conn_at_mut(i) {
            Some(c) => {
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
            .table
            .conns
            .values()
            .copied()
            .filter(|&i| {
                self.table
                    .conn_at(i)
                    .is_some_and(|c| c.state == State::SynSent && unreachable(c.remote.get().ip()))
            })
            .collect();
        for i in opening {
            if let Some(c) = self.table.conn_at_mut(i) {
                c.enter_closed(Some(Error::HostUnreachable));
                c.reclaim_buffers(&mut self.rings);
            }
            self.touch(i);
            self.handle_event(i, Event::Closed);
        }
    }
}
