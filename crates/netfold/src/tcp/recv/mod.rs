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

mod ack;
mod buffer;
mod sack;
mod space;

use super::buffer::RecvRing;
use super::dsack::DsackReport;
use super::frames::FrameQueue;
use super::place::{Posted, Staged};
use super::sack::SackHistory;
use super::seq;
use crate::time::Instant;

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
    /// Linux's interactive ("pingpong") mode (`icsk_ack.pingpong` at or above
    /// `tcp_pingpong_thresh`, 1 by default): this end sent data within [`Receiver::ato`] of the
    /// last data it received, so its ACKs will likely ride on its replies and quick-ACK mode
    /// is off (`tcp_in_quickack_mode`).
    pingpong: bool,
    /// The delayed-ACK engine's estimate of the peer's inter-arrival time (Linux
    /// `icsk_ack.ato`): zero until the first data (or a quick-ACK entry) starts it at
    /// `TCP_ATO_MIN`; it decides whether data sent counts as a reply.
    ato: crate::time::Duration,
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
            pingpong: false,
            ato: crate::time::Duration::ZERO,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn receiver() -> Receiver {
        let mut r = Receiver::new(0, 1000, RecvRing::with_capacity(4096), 4096, 4096);
        r.on_syn(99);
        r
    }

    #[test]
    fn the_syn_sets_the_sequence_space() {
        let r = receiver();
        assert_eq!(
            (r.irs(), r.nxt(), r.adv(), r.last_ack_sent()),
            (99, 100, 100, 100)
        );
        assert_eq!(r.announced(), 0);
    }

    #[test]
    fn the_advertised_edge_never_moves_left() {
        let mut r = receiver();
        r.on_ack_sent(2100);
        assert_eq!((r.adv(), r.announced()), (2100, 2000));
        r.on_ack_sent(1500);
        assert_eq!(
            r.adv(),
            2100,
            "RFC 9293 §3.8.6: the right edge never moves left"
        );
        r.on_snap_ack_sent(100, 10);
        assert_eq!(r.adv(), 2100);
        assert_eq!(r.last_ack_sent(), 100);
    }

    #[test]
    fn acks_sent_settle_what_was_owed() {
        let mut r = receiver();
        r.owe_ack_now();
        assert_eq!(r.add_unacked(500), 500);
        r.note_read(7);
        assert!(r.ack_now() && r.read_since_ack && r.space().copied == 7);
        r.on_ack_sent(100);
        assert!(!r.ack_now() && !r.read_since_ack);
        assert_eq!(r.add_unacked(1), 1);
    }

    #[test]
    fn a_fin_counts_once_and_only_in_order() {
        let mut r = receiver();
        assert!(!r.accept_fin(), "no FIN noted");
        r.note_fin(200);
        assert!(!r.accept_fin(), "data before the FIN is missing");
        assert_eq!((r.nxt(), r.fin()), (100, Some(200)));
        let mut r = receiver();
        r.note_fin(100);
        assert!(r.accept_fin());
        assert_eq!((r.nxt(), r.fin(), r.fin_received()), (101, None, true));
        r.note_fin(100);
        assert!(
            !r.accept_fin(),
            "a repeated FIN does not advance RCV.NXT again"
        );
        assert_eq!(r.nxt(), 101);
    }

    #[test]
    fn quick_acks_count_down() {
        let mut r = receiver();
        r.enter_quickack(2);
        assert!(r.use_quickack() && r.use_quickack());
        assert!(!r.use_quickack());
        r.quickack_at_least(1);
        r.quickack_at_least(0);
        assert!(r.use_quickack() && !r.use_quickack());
    }
}
