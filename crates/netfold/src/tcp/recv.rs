//! The receive sequence space of one connection (RFC 9293 §3.3.1, figure 4):
//!
//! ```text
//!     1          2          3
//! ----------|----------|----------
//!        RCV.NXT    RCV.NXT
//!                  +RCV.WND
//! 1 - old sequence numbers that have been acknowledged
//! 2 - sequence numbers allowed for new reception
//! 3 - future sequence numbers that are not yet allowed
//! ```
//!
//! RCV.WND is the window as last ADVERTISED: `adv` is its right edge (RCV.NXT + RCV.WND when
//! it was sent), which never moves left (RFC 9293 §3.8.6). The receive ring (in-order bytes
//! then the out-of-order region) may hold more than was advertised; acceptability is judged
//! against the advertisement.
//!
//! [`Receiver`] owns that sequence space together with everything the receiving half of the
//! connection keeps: the receive ring and its reassembly, the receive buffer and its
//! auto-tuning measurement, the FIN state and the ACK policy's state (quick-ACK mode, a read
//! since the last ACK). Its fields are private: the rest of the stack reads them through
//! getters and changes them through methods named for what happened (`on_syn`,
//! `on_ack_sent`, `accept_data`, `accept_fin`, ...), which keep its invariants — RCV.NXT
//! only advances, the advertised right edge never moves left, Last.ACK.sent never passes
//! RCV.NXT.

use super::buffer::{RecvRing, RingCache};
use super::dsack::{self, DsackReport};
use super::frames::FrameQueue;
use super::place::{Posted, Staged};
use super::sack::SackHistory;
use super::{seq, Payload, Stats};
use crate::mem::CopyMode;
use crate::time::Instant;
use crate::wire::tcp::SackBlock;

/// Receive-buffer auto-tuning state (Linux `tcp_rcv_space_adjust`, "DRS"): how much the
/// application read in the last RTT.
#[derive(Debug, Default)]
pub struct RcvSpace {
    /// Bytes the application has read, ever.
    pub copied: u64,
    /// `copied` when the current measurement began, and when it began.
    pub mark: u64,
    pub since: Option<Instant>,
    /// The most read in one RTT so far (Linux `rcvq_space.space`).
    pub space: usize,
}

#[derive(Debug)]
pub struct Receiver {
    /// IRS: initial receive sequence number.
    irs: u32,
    /// RCV.NXT: next sequence number expected.
    nxt: u32,
    /// Right edge of the window we last advertised (RCV.NXT + RCV.WND at that time).
    adv: u32,
    /// Last.ACK.sent (RFC 7323 §4.3): the ACK number we last sent.
    last_ack_sent: u32,
    /// Rcv.Wind.Shift (RFC 7323 §2): applied to the window field we send.
    wscale: u8,
    /// Largest segment seen from the peer (for "ACK every second full-sized segment").
    mss: u32,
    /// In-order bytes waiting for the application, then the out-of-order region.
    ring: RecvRing,
    /// The receive buffer now (the window basis; the ring holds it plus one window-scale
    /// unit of slack). Grows up to `buf_max` while `autotune`.
    buf: usize,
    buf_max: usize,
    autotune: bool,
    space: RcvSpace,
    /// The peer's FIN sequence number, when its FIN arrived (maybe ahead of missing data).
    fin: Option<u32>,
    /// The peer's FIN has been received in order (RCV.NXT counts it).
    fin_received: bool,
    /// The application read data since we last sent a segment: only then may a pure window
    /// update be owed (Linux `tcp_cleanup_rbuf`).
    read_since_ack: bool,
    /// Quick-ACK mode (Linux `icsk_ack.quick`): in-order arrivals still to be acknowledged
    /// at once instead of under the delayed-ACK rule.
    quick_acks: u8,
    /// When in-sequence or out-of-order data last arrived (Linux `icsk_ack.lrcvtime`); None
    /// before the first data segment.
    last_data_rx: Option<Instant>,
    /// When the handshake completed: Linux starts `icsk_ack.lrcvtime` there (the SYN-ACK's
    /// arrival on an active open, the final ACK's on a passive one), so `tcpi_last_data_recv`
    /// counts from it until data arrives.
    synced_at: Option<Instant>,
    /// A read the application posted (`place.rs`): in-order bytes go straight into it.
    posted: Option<Posted>,
    /// Where the segment being processed was copied before its checks (`place.rs`).
    staged: Option<Staged>,
    /// In-order payload kept in the frames it arrived in (frame-level borrowing read,
    /// `frames.rs`): always before the ring's bytes in the stream.
    frames: FrameQueue,
    /// The most the window may offer beyond what is queued, in bytes: the whole buffer
    /// normally, [`PRESSURE_RCVBUF`](crate::tcp::PRESSURE_RCVBUF) while the stack is over its
    /// buffer budget (set by the layer).
    moderated: u32,
    /// A Fast Open connection's window edge as its SYN-ACK announced it, after the SYN's data
    /// (`fastopen.rs`): while that is still the last edge announced, reading the SYN's data
    /// owes no window update. Linux's window grows from the SYN-ACK's only as data arrives
    /// (`rcv_ssthresh`), so a Linux server sends none; netfold's would otherwise jump to the
    /// whole buffer.
    syn_data_edge: Option<u32>,
    /// The SACK blocks reported recently (RFC 2018 §4), most recent first.
    sack_hist: SackHistory,
    /// The duplicate to report in the next ACK (RFC 2883 D-SACK, receiver side).
    dsack: DsackReport,
    /// An ACK is owed at once (RFC 5681 §4.2: out-of-order data, a gap filled, a FIN, a
    /// duplicate, an unacceptable segment; the delayed-ACK timer's expiry).
    ack_now: bool,
    /// In-order bytes received since the last ACK under the delayed-ACK rule (RFC 5681
    /// §4.2: ACK at least every second full-sized segment).
    unacked_bytes: usize,
}

impl Receiver {
    pub fn new(wscale: u8, mss: u32, ring: RecvRing, buf: usize, buf_max: usize) -> Self {
        Receiver {
            buf,
            buf_max,
            autotune: buf_max > buf,
            space: RcvSpace::default(),
            irs: 0,
            nxt: 0,
            adv: 0,
            last_ack_sent: 0,
            wscale,
            mss,
            ring,
            fin: None,
            fin_received: false,
            read_since_ack: false,
            quick_acks: 0,
            last_data_rx: None,
            synced_at: None,
            posted: None,
            staged: None,
            frames: FrameQueue::default(),
            moderated: u32::MAX,
            syn_data_edge: None,
            sack_hist: SackHistory::default(),
            dsack: DsackReport::default(),
            ack_now: false,
            unacked_bytes: 0,
        }
    }

    /// Linux `tcp_incr_quickack`: raise the quick-ACK budget to `rcv_wnd / (2 * rcv_mss)`
    /// ACKs (at least 2), at most `max`. (A budget of one ACK per two segments of the window
    /// covers one window's worth of data acknowledged segment by segment.)
    pub fn incr_quickack(&mut self, max: u8) {
        let per = (2 * self.mss).max(1);
        let q = (self.announced() / per).clamp(2, u32::from(max)) as u8;
        self.quick_acks = self.quick_acks.max(q);
    }

    /// Synchronizes to the peer's SYN: IRS = SEG.SEQ, RCV.NXT = SEG.SEQ + 1.
    pub fn on_syn(&mut self, syn_seq: u32) {
        self.irs = syn_seq;
        self.nxt = syn_seq.wrapping_add(1);
        self.adv = self.nxt;
        self.last_ack_sent = self.nxt;
    }

    /// Ring storage for a buffer of `buf` bytes: one window-scale unit of slack, because the
    /// advertised window is rounded up to it.
    pub fn ring_cap(&self, buf: usize) -> usize {
        buf + (1usize << self.wscale)
    }

    /// Payload bytes held in frames, by the connection and by the application.
    pub fn rcv_frames_charged(&self) -> usize {
        self.frames.charged()
    }

    /// RCV.WND as last advertised (0 once RCV.NXT reached the advertised edge).
    pub fn announced(&self) -> u32 {
        seq::dist(self.nxt, self.adv)
    }

    /// A pure window update is owed (Linux `tcp_cleanup_rbuf`, after the application read
    /// data): the window as last announced is at most half the buffer, and the window we
    /// would announce now is at least twice as large. Anything less rides on the next segment
    /// we send anyway; a window update right after the handshake (nothing read yet) is never
    /// owed — no Linux or FreeBSD peer sends one, and it shifts every later segment of a
    /// conformance script by one.
    pub fn window_update_owed(&self, buf: u32) -> bool {
        if !self.read_since_ack || self.syn_data_edge == Some(self.adv) {
            return false;
        }
        let cur = self.announced();
        let (_, edge) = self.window(buf);
        let new = seq::dist(self.nxt, edge);
        new > cur && cur.saturating_mul(2) <= buf && new >= cur.saturating_mul(2)
    }

    /// `(window field, right edge)` to advertise now for a buffer of `buf` bytes (RFC 9293
    /// §3.8.6.2.2 receiver SWS avoidance, RFC 7323 §2.3 scaling; the right edge never moves
    /// left, RFC 9293 §3.8.6).
    pub fn window(&self, buf: u32) -> (u16, u32) {
        // Under memory pressure the buffer counts as its moderated size (the right edge still
        // never moves left: `wnd.max(cur)` below).
        let buf = buf.min(self.moderated);
        // Frames held (by the connection or by the application) count like ring bytes, by
        // their payload (`frames.rs`).
        let held = (self.ring.len() + self.rcv_frames_charged()) as u32;
        let free = buf.saturating_sub(held);
        let cur = seq::dist(self.nxt, self.adv);
        let mut wnd = free;
        let threshold = (buf / 2).min(self.mss).max(1);
        if wnd > cur && wnd - cur < threshold {
            wnd = cur;
        }
        wnd = wnd.max(cur);
        let ws = u32::from(self.wscale);
        // RFC 7323 §2.3: the field counts units of 2^shift, rounded up so that a small free
        // space is not scaled away. Rounded up, keeping the right edge (RFC 9293 §3.8.6:
        // never move it left) after RCV.NXT advanced by a number of bytes that is not a
        // multiple of the unit moves the edge right by up to one unit less a byte, and again
        // with every such ACK while the application reads nothing: with nothing to bound
        // it, the promised edge crept past the end of the receive ring, and segments the
        // peer rightly sent up to it were trimmed (Linux has the same creep; its answer is
        // the `tcp_shrink_window` sysctl). So the field is also capped at what the ring can
        // hold from RCV.NXT. That cap only binds while the old edge is within one unit of
        // the ring's end, and it then shows an edge at most one unit less a byte left of the
        // old one (the retraction RFC 7323 §2.4 describes for scaled windows); `adv` keeps
        // the old edge, so the acceptability test (RFC 9293 §3.10.7.4) still takes, and the
        // ring still holds, everything up to it.
        let field = ((u64::from(wnd) + (1u64 << ws) - 1) >> ws).min(0xffff) as u32;
        let field = field.min((self.ring_room() >> ws).min(0xffff));
        (field as u16, self.nxt.wrapping_add(field << ws))
    }

    /// The window field that announces `edge` in an ACK of `ack` (at or below RCV.NXT: an
    /// ACK snapshot of a merged arrival). Rounded up to the unit (RFC 7323 §2.3), as
    /// [`Receiver::window`] does, unless that would pass the end of the receive ring: then
    /// rounded down, less than one unit short of `edge`. Rounded up regardless, every
    /// snapshot moved the promised edge past what the ring holds by up to one unit less a
    /// byte, and data the peer sent up to it was trimmed (RFC 9293 §3.10.7.4: data in the
    /// window is kept; see `window` for the same creep).
    pub fn field_from(&self, ack: u32, edge: u32) -> u16 {
        let ws = u32::from(self.wscale);
        let span = u64::from(seq::dist(ack, edge));
        let up = (span + (1u64 << ws) - 1) >> ws;
        let limit = u64::from(seq::dist(ack, self.nxt)) + u64::from(self.ring_room());
        let field = if up << ws <= limit { up } else { span >> ws };
        field.min(0xffff) as u16
    }

    /// Bytes the receive ring can hold from RCV.NXT on (in-order bytes already in it take
    /// their share; frames held outside it do not). Before the ring is taken (at the first
    /// data, `Conn::ensure_recv_ring`), the capacity it will have.
    fn ring_room(&self) -> u32 {
        let cap = match self.ring.capacity() {
            0 => self.ring_cap(self.buf),
            c => c,
        };
        cap.saturating_sub(self.ring.len()).min(u32::MAX as usize) as u32
    }
}

/// Reads: the receive sequence space and the buffer's sizes.
impl Receiver {
    /// IRS: the peer's initial sequence number.
    #[inline]
    pub fn irs(&self) -> u32 {
        self.irs
    }

    /// RCV.NXT: the next sequence number expected.
    #[inline(always)]
    pub fn nxt(&self) -> u32 {
        self.nxt
    }

    /// The right edge of the window last advertised.
    #[inline]
    pub fn adv(&self) -> u32 {
        self.adv
    }

    /// Last.ACK.sent (RFC 7323 §4.3).
    #[inline]
    pub fn last_ack_sent(&self) -> u32 {
        self.last_ack_sent
    }

    /// Rcv.Wind.Shift (RFC 7323 §2).
    #[inline]
    pub fn wscale(&self) -> u8 {
        self.wscale
    }

    /// The largest segment seen from the peer (Linux `rcv_mss`).
    #[inline]
    pub fn mss(&self) -> u32 {
        self.mss
    }

    /// The receive buffer now (the window basis).
    #[inline]
    pub fn buf(&self) -> usize {
        self.buf
    }

    /// The auto-tuning measurement (what the application read, and when).
    #[inline]
    pub fn space(&self) -> &RcvSpace {
        &self.space
    }

    /// The peer's FIN sequence number, while its FIN waits for missing data.
    #[inline]
    pub fn fin(&self) -> Option<u32> {
        self.fin
    }

    /// The peer's FIN was received in order.
    #[inline]
    pub fn fin_received(&self) -> bool {
        self.fin_received
    }

    /// When the handshake completed (see the field).
    #[inline]
    pub fn synced_at(&self) -> Option<Instant> {
        self.synced_at
    }

    /// When data last arrived.
    #[inline]
    pub fn last_data_rx(&self) -> Option<Instant> {
        self.last_data_rx
    }

    /// The receive ring (in-order bytes, then the out-of-order region and its assembler).
    #[inline(always)]
    pub fn ring(&self) -> &RecvRing {
        &self.ring
    }

    /// The frames held for the borrowing read.
    #[inline(always)]
    pub fn frames(&self) -> &FrameQueue {
        &self.frames
    }

    /// The read the application posted, if any.
    #[inline(always)]
    pub fn posted(&self) -> Option<&Posted> {
        self.posted.as_ref()
    }
}

/// Changes to the sequence space: the handshake, ACKs sent, data and FIN accepted.
impl Receiver {
    /// The peer does not scale its windows (RFC 7323 §2.2: then neither side does).
    pub fn disable_window_scaling(&mut self) {
        self.wscale = 0;
    }

    /// The SYN-ACK of a connection created from a SYN cookie advertised `wnd` (unscaled,
    /// RFC 7323 §2.2): its right edge.
    pub fn on_syn_ack_sent(&mut self, wnd: u32) {
        self.adv = self.nxt.wrapping_add(wnd);
    }

    /// A segment acknowledging RCV.NXT left, announcing the right edge `edge`: Last.ACK.sent
    /// is RCV.NXT, the advertised edge moves right only (RFC 9293 §3.8.6), and no read is
    /// owed a window update any more.
    /// It settles every ACK owed.
    #[inline]
    pub fn on_ack_sent(&mut self, edge: u32) {
        self.ack_now = false;
        self.unacked_bytes = 0;
        self.read_since_ack = false;
        self.last_ack_sent = self.nxt;
        self.adv = seq::max(self.adv, edge);
    }

    /// An ACK from a snapshot left (`ack` at or below RCV.NXT, window field `field`).
    #[inline]
    pub fn on_snap_ack_sent(&mut self, ack: u32, field: u16) {
        self.read_since_ack = false;
        self.last_ack_sent = seq::max(self.last_ack_sent, ack);
        let edge = ack.wrapping_add(u32::from(field) << self.wscale);
        self.adv = seq::max(self.adv, edge);
    }

    /// Linux `tcp_measure_rcv_mss`: a data segment of `len` bytes arrived; `full` is the
    /// most a segment can carry.
    #[inline]
    pub fn measure_mss(&mut self, len: usize, full: u32) {
        self.mss = self.mss.max(len as u32).min(full.max(1));
    }

    /// In-order data arrived at `now` (Linux `tcp_event_data_recv`): quick-ACK mode for the
    /// first data of the connection and after a receive gap longer than `rto`.
    #[inline]
    pub fn on_data_in_order(&mut self, now: Instant, rto: crate::time::Duration, max: u8) {
        let idle = self
            .last_data_rx
            .is_none_or(|t| now.saturating_since(t) > rto);
        if idle {
            self.incr_quickack(max);
        }
        self.last_data_rx = Some(now);
    }

    /// The handshake completed at `now`.
    pub fn on_synced(&mut self, now: Instant) {
        self.synced_at = Some(now);
    }

    /// The peer's FIN is at `f` (maybe ahead of missing data).
    pub fn note_fin(&mut self, f: u32) {
        self.fin = Some(f);
    }

    /// The FIN noted is in order now: RCV.NXT counts it. False if there is none, it is not
    /// at RCV.NXT yet, or it was accepted already.
    pub fn accept_fin(&mut self) -> bool {
        match self.fin {
            Some(f) if f == self.nxt && !self.fin_received => {
                self.nxt = self.nxt.wrapping_add(1);
                self.fin_received = true;
                self.fin = None;
                true
            }
            _ => false,
        }
    }

    /// A Fast Open SYN's data was accepted and the SYN-ACK announces `wnd` (unscaled) past it.
    pub fn mark_syn_data_edge(&mut self, wnd: u32) {
        self.syn_data_edge = Some(self.nxt.wrapping_add(wnd));
    }

    /// Writes the data `receive_data` accepted (`data`, at `off` past RCV.NXT) and advances
    /// RCV.NXT over what is now in order; returns by how much (`None`: the assembler is full,
    /// nothing kept). What [`Conn::place`](super::conn::Conn::place) staged for this segment
    /// is kept without a second copy: the direct bytes become the posted read's, the ring
    /// bytes are committed where they lie; the rest is copied now.
    #[inline]
    pub fn accept_data(
        &mut self,
        off: usize,
        data: Payload<'_>,
        mode: CopyMode,
        stats: &mut Stats,
    ) -> Option<usize> {
        let adv = self.take_data(off, data, mode, stats)?;
        self.nxt = self.nxt.wrapping_add(adv as u32);
        Some(adv)
    }

    fn take_data(
        &mut self,
        off: usize,
        data: Payload<'_>,
        mode: CopyMode,
        stats: &mut Stats,
    ) -> Option<usize> {
        let staged = self.staged.take().filter(|s| s.off == off);
        if staged.is_some_and(|s| s.borrow > 0) {
            // `place` borrows only at RCV.NXT with the ring empty: these are the next bytes
            // of the stream, kept in their frames (`frames.rs`), no copy.
            let n = self.frames.commit(data.len());
            stats.rx_frames_held += n as u64;
            let rest = data.slice(n, data.len());
            if rest.is_empty() {
                return Some(n);
            }
            // Not reached (`data` is at most the staged parts); copied behind them if it were.
            let copied = self.ring.copy_gaps(0, rest, mode);
            stats.rx_copy_ring += copied as u64;
            return Some(n + self.ring.commit(0, rest.len()).unwrap_or(0));
        }
        let (direct, ring) = staged.map_or((0, 0), |s| (s.direct.min(data.len()), s.ring));
        if direct > 0 {
            // `place` stages direct bytes only at RCV.NXT with the ring empty, so they are the
            // next bytes of the stream: they are the application's now. They never occupy the
            // ring, so the window does not shrink for them (Linux: copied to the user, not
            // queued) and no window update is owed for them.
            if let Some(p) = self.posted.as_mut() {
                p.filled += direct;
            }
            self.space.copied += direct as u64;
            stats.app_bytes_received += direct as u64;
        }
        let rest = data.slice(direct, data.len());
        let r = ring.min(rest.len());
        let copied = self
            .ring
            .copy_gaps(off + r, rest.slice(r, rest.len()), mode);
        stats.rx_copy_ring += copied as u64;
        let adv = self.ring.commit(off, rest.len());
        match adv {
            Some(a) => Some(direct + a),
            // The assembler is full only for out-of-order data (off > 0): no direct bytes.
            None if direct == 0 => None,
            None => Some(direct),
        }
    }
}

/// The ACK policy: quick-ACK mode and window updates owed after reads.
impl Receiver {
    /// An ACK is owed at once.
    #[inline(always)]
    pub fn ack_now(&self) -> bool {
        self.ack_now
    }

    /// Something happened that the peer must hear of at once: the next output sends an ACK.
    #[inline(always)]
    pub fn owe_ack_now(&mut self) {
        self.ack_now = true;
    }

    /// No ACK is owed at once any more (the connection closed, or a segment that carries
    /// the acknowledgment is on its way: a Fast Open SYN-ACK).
    #[inline]
    pub fn cancel_ack_now(&mut self) {
        self.ack_now = false;
    }

    /// An ACK of everything received left (the last snapshot of a merged arrival): nothing
    /// is owed at once, and the delayed-ACK count starts over.
    #[inline]
    pub fn settle_acks(&mut self) {
        self.ack_now = false;
        self.unacked_bytes = 0;
    }

    /// An ACK of everything received is queued (a snapshot): the delayed-ACK count starts
    /// over.
    #[inline]
    pub fn reset_unacked(&mut self) {
        self.unacked_bytes = 0;
    }

    /// In-order `n` bytes arrived under the delayed-ACK rule; returns the bytes now
    /// unacknowledged.
    #[inline]
    pub fn add_unacked(&mut self, n: usize) -> usize {
        self.unacked_bytes += n;
        self.unacked_bytes
    }

    /// Quick-ACK mode for exactly the next `n` in-order arrivals (a CE mark: Linux
    /// `tcp_enter_quickack_mode` via `__tcp_ecn_check_ce`).
    pub fn enter_quickack(&mut self, n: u8) {
        self.quick_acks = n;
    }

    /// Quick-ACK mode for at least the next `n` in-order arrivals (after a gap was filled).
    #[inline]
    pub fn quickack_at_least(&mut self, n: u8) {
        self.quick_acks = self.quick_acks.max(n);
    }

    /// An in-order arrival in quick-ACK mode: uses one of the quick ACKs; false when the mode
    /// is over (the delayed-ACK rule applies).
    #[inline]
    pub fn use_quickack(&mut self) -> bool {
        if self.quick_acks > 0 {
            self.quick_acks -= 1;
            true
        } else {
            false
        }
    }

    /// The application consumed `n` bytes: counted for auto-tuning, and a window update may
    /// be owed.
    #[inline]
    pub fn note_read(&mut self, n: usize) {
        self.read_since_ack |= n > 0;
        self.space.copied += n as u64;
    }

    /// The application gave back borrowed frames (their payload was counted when read): the
    /// window they held reopens, so a window update may be owed.
    pub fn note_frames_released(&mut self) {
        self.read_since_ack = true;
    }
}

/// The receive buffer: storage, memory pressure, auto-tuning, the application's reads.
impl Receiver {
    /// Takes the ring's storage from `rings` (at the first data).
    pub fn take_ring(&mut self, rings: &mut RingCache) {
        self.ring = RecvRing::from_cache(self.ring_cap(self.buf), rings);
    }

    /// Gives the ring's storage back to `rings`.
    #[inline]
    pub fn release_ring(&mut self, rings: &mut RingCache) {
        self.ring.release(rings);
    }

    /// The ring for staging a segment's copy (`place.rs`) and the reassembler's storage;
    /// bytes become data only through [`Receiver::accept_data`].
    #[inline(always)]
    pub fn ring_mut(&mut self) -> &mut RecvRing {
        &mut self.ring
    }

    /// The frame queue, for staging a segment's frames (`place.rs`).
    #[inline(always)]
    pub fn frames_mut(&mut self) -> &mut FrameQueue {
        &mut self.frames
    }

    /// The posted read, for copying a segment into it before its checks (`place.rs`).
    #[inline(always)]
    pub fn posted_mut(&mut self) -> Option<&mut Posted> {
        self.posted.as_mut()
    }

    /// The application posts a read.
    pub fn post(&mut self, p: Posted) {
        self.posted = Some(p);
    }

    /// The application takes its posted read back.
    pub fn take_posted(&mut self) -> Option<Posted> {
        self.posted.take()
    }

    /// Where the segment being processed was copied before its checks (`None`: nowhere).
    #[inline(always)]
    pub fn set_staged(&mut self, s: Option<Staged>) {
        self.staged = s;
    }

    /// After a segment's processing: what was staged for it and not kept stays uncommitted.
    #[inline(always)]
    pub fn drop_staged(&mut self) {
        self.staged = None;
        if !self.frames.staged.is_empty() {
            self.frames.staged.clear();
        }
    }

    /// Frames committed from a receive batch take their buffers (see `FrameQueue::adopt`).
    #[inline]
    pub fn adopt_frames(&mut self, rx: &mut [crate::buf::PacketBuf]) {
        self.frames.adopt(rx);
    }

    /// Turns the borrowing read on (`Some`) or off.
    pub fn set_frame_sharing(
        &mut self,
        share: Option<(
            std::sync::Arc<crate::buf::Recycler>,
            std::sync::Arc<crate::buf::borrow::ConnShare>,
        )>,
    ) {
        self.frames.set(share);
    }

    /// The connection is freed: the posted read's buffer and the held frames go back now.
    pub fn release_reader_buffers(&mut self) {
        self.posted = None;
        self.frames.release_all();
    }

    /// The stack is (`PRESSURE_RCVBUF`) or is not (`u32::MAX`) over its buffer budget.
    #[inline]
    pub fn moderate(&mut self, cap: u32) {
        self.moderated = cap;
    }

    /// Copies queued in-order bytes into `buf`: held frames first, then the ring. `None`
    /// when nothing is queued.
    pub fn read_queued(&mut self, buf: &mut [u8], mode: CopyMode) -> Option<usize> {
        let n = if !self.frames.is_empty() {
            // Held frames come before the ring's bytes (`frames.rs`).
            self.frames.read(buf, mode)
        } else if !self.ring.is_empty() {
            self.ring.read(buf, mode)
        } else {
            return None;
        };
        self.note_read(n);
        Some(n)
    }

    /// [`Receiver::read_queued`] without consuming.
    pub fn peek_queued(&self, buf: &mut [u8], mode: CopyMode) -> Option<usize> {
        if !self.frames.is_empty() {
            Some(self.frames.peek(buf, mode))
        } else if !self.ring.is_empty() {
            Some(self.ring.peek(buf, mode))
        } else {
            None
        }
    }

    /// A borrowing read of the queued bytes: `f` sees them (two slices) and returns how many
    /// it consumed. `None` when nothing is queued.
    pub fn read_queued_in_place(&mut self, f: impl FnOnce(&[u8], &[u8]) -> usize) -> Option<usize> {
        let n = if !self.frames.is_empty() {
            self.frames.read_in_place(f)
        } else if !self.ring.is_empty() {
            self.ring.read_in_place(f)
        } else {
            return None;
        };
        self.note_read(n);
        Some(n)
    }

    /// Copies in-order bytes waiting in the ring into the posted read, behind what it holds.
    /// Returns how many.
    pub fn fill_posted(&mut self, mode: CopyMode) -> usize {
        let Some(p) = self.posted.as_mut() else {
            return 0;
        };
        let n = self.ring.read(&mut p.buf[p.filled..], mode);
        p.filled += n;
        self.note_read(n);
        n
    }

    /// Linux `tcp_rcv_space_adjust`: measures what the application read in the last `rtt`
    /// and grows the buffer (and ring) to match. `Some(true)`: grown; `Some(false)`: the
    /// stack's budget refused the growth; `None`: no growth wanted.
    pub fn space_adjust(
        &mut self,
        now: Instant,
        rtt: crate::time::Duration,
        rings: &mut RingCache,
    ) -> Option<bool> {
        use super::autotune::{ladder_step, RCV_HEADROOM_SEGS, RCV_INITIAL_SPACE_SEGS};
        if !self.autotune || self.ring.capacity() == 0 || self.fin_received {
            return None;
        }
        let sp = &mut self.space;
        let Some(since) = sp.since else {
            sp.since = Some(now);
            sp.mark = sp.copied;
            return None;
        };
        if now.saturating_since(since) < rtt {
            return None;
        }
        let copied = usize::try_from(sp.copied - sp.mark).unwrap_or(usize::MAX);
        sp.since = Some(now);
        sp.mark = sp.copied;
        let mss = self.mss.max(1) as usize;
        // Linux `tcp_init_buffer_space`: the first measurement is compared with an initial
        // window's worth (`TCP_INIT_CWND * advmss`).
        let prev = if sp.space == 0 {
            RCV_INITIAL_SPACE_SEGS * mss
        } else {
            sp.space
        };
        if copied <= prev {
            return None;
        }
        sp.space = copied;
        // Linux `tcp_rcv_space_adjust`: "minimal window to cope with packet losses, assuming
        // steady state" (twice the per-RTT read plus 16 segments), then "Accommodate for
        // sender rate increase (eg. slow start)": grow by twice the relative increase of the
        // per-RTT read ("the ACK we are sending now is for the next RTT, not the current
        // one"). Without this term the window merely doubled per RTT, one RTT behind a sender
        // in slow start, which then waited on the window (256 MiB over 10 ms at 1 Gbit/s: the
        // flight sat at the advertised window for four RTTs on its way to the 2.5 MB BDP).
        let rcvwin = copied
            .saturating_mul(2)
            .saturating_add(RCV_HEADROOM_SEGS * mss);
        let grow = (rcvwin as u128 * (copied - prev) as u128 / prev as u128) as usize;
        let want = rcvwin.saturating_add(grow.saturating_mul(2));
        if want <= self.buf {
            return None;
        }
        let new = ladder_step(self.buf, want, self.buf_max);
        if new <= self.buf {
            return None;
        }
        let cap = self.ring_cap(new);
        if self.ring.grow(cap, rings) {
            self.buf = new;
            Some(true)
        } else {
            Some(false)
        }
    }
}

/// The SACK report (RFC 2018 §4) and the D-SACK block (RFC 2883 §4) the next ACK carries;
/// the caller checks that SACK was negotiated.
impl Receiver {
    /// The next segment carries SACK blocks: out-of-order data is held, or a D-SACK block is
    /// pending.
    #[inline(always)]
    pub fn has_sack_report(&self) -> bool {
        !self.ring.asm.is_empty() || self.dsack.is_pending()
    }

    /// The SACK blocks of the next segment, at most `max`, the D-SACK block first (RFC 2883
    /// §4), then the remembered blocks while out-of-order data is held.
    pub fn sack_blocks(&self, max: usize) -> ([SackBlock; 4], usize) {
        let regular = if self.ring.asm.is_empty() {
            &[][..]
        } else {
            self.sack_hist.blocks()
        };
        self.dsack.compose(regular, max)
    }

    /// A segment carrying SACK blocks left (not a SYN): RFC 2883 §4, "each duplicate
    /// contiguous sequence of data received is reported in at most one D-SACK block".
    #[inline]
    pub fn on_sack_sent(&mut self) {
        self.dsack.on_ack_sent();
    }

    /// The data `[start, end)` of an arriving segment, before it is stored: the part already
    /// held (below RCV.NXT, or inside a queued out-of-order range) becomes the D-SACK block
    /// to report (`dsack::duplicate_block`). True if there was one.
    pub fn note_duplicate(&mut self, start: u32, end: u32) -> bool {
        let base = self.nxt;
        let held = self.ring.asm.ranges().iter().map(|&(o, l)| {
            let left = base.wrapping_add(o as u32);
            SackBlock {
                left,
                right: left.wrapping_add(l as u32),
            }
        });
        let dup = dsack::duplicate_block(start, end, base, held);
        self.dsack.record(dup);
        dup.is_some()
    }

    /// Remembered SACK blocks follow the assembler: merged ranges grow, ranges now in order
    /// disappear (RFC 2018 §4: report only data actually held above RCV.NXT). With none
    /// remembered (in-order traffic) there is nothing to refresh.
    #[inline]
    pub fn refresh_sack_report(&mut self) {
        if self.sack_hist.is_empty() {
            return;
        }
        let base = self.nxt;
        let asm = &self.ring.asm;
        self.sack_hist.refresh(base, |left| {
            asm.containing(seq::dist(base, left) as usize)
                .map(|(o, l)| {
                    let left = base.wrapping_add(o as u32);
                    SackBlock {
                        left,
                        right: left.wrapping_add(l as u32),
                    }
                })
        });
    }

    /// Out-of-order data was queued at `off` past RCV.NXT: the range now holding it is
    /// reported first (RFC 2018 §4: "the first SACK block ... MUST specify the contiguous
    /// block of data containing the segment which triggered this ACK").
    pub fn report_out_of_order(&mut self, off: usize) {
        if let Some((o, l)) = self.ring.asm.containing(off) {
            let left = self.nxt.wrapping_add(o as u32);
            self.sack_hist.record(SackBlock {
                left,
                right: left.wrapping_add(l as u32),
            });
        }
    }
}
