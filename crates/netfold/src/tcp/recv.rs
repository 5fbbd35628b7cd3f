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

use super::buffer::RecvRing;
use super::frames::FrameQueue;
use super::place::{Posted, Staged};
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
pub struct RecvSeq {
    /// IRS: initial receive sequence number.
    pub irs: u32,
    /// RCV.NXT: next sequence number expected.
    pub nxt: u32,
    /// Right edge of the window we last advertised (RCV.NXT + RCV.WND at that time).
    pub adv: u32,
    /// Last.ACK.sent (RFC 7323 §4.3): the ACK number we last sent.
    pub last_ack_sent: u32,
    /// Rcv.Wind.Shift (RFC 7323 §2): applied to the window field we send.
    pub wscale: u8,
    /// Largest segment seen from the peer (for "ACK every second full-sized segment").
    pub mss: u32,
    /// In-order bytes waiting for the application, then the out-of-order region.
    pub ring: RecvRing,
    /// The receive buffer now (the window basis; the ring holds it plus one window-scale
    /// unit of slack). Grows up to `buf_max` while `autotune`.
    pub buf: usize,
    pub buf_max: usize,
    pub autotune: bool,
    pub space: RcvSpace,
    /// The peer's FIN sequence number, when its FIN arrived (maybe ahead of missing data).
    pub fin: Option<u32>,
    /// The peer's FIN has been received in order (RCV.NXT counts it).
    pub fin_received: bool,
    /// The application read data since we last sent a segment: only then may a pure window
    /// update be owed (Linux `tcp_cleanup_rbuf`).
    pub read_since_ack: bool,
    /// Quick-ACK mode (Linux `icsk_ack.quick`): in-order arrivals still to be acknowledged
    /// at once instead of under the delayed-ACK rule.
    pub quick_acks: u8,
    /// When in-sequence or out-of-order data last arrived (Linux `icsk_ack.lrcvtime`); None
    /// before the first data segment.
    pub last_data_rx: Option<Instant>,
    /// When the handshake completed: Linux starts `icsk_ack.lrcvtime` there (the SYN-ACK's
    /// arrival on an active open, the final ACK's on a passive one), so `tcpi_last_data_recv`
    /// counts from it until data arrives.
    pub synced_at: Option<Instant>,
    /// A read the application posted (`place.rs`): in-order bytes go straight into it.
    pub posted: Option<Posted>,
    /// Where the segment being processed was copied before its checks (`place.rs`).
    pub staged: Option<Staged>,
    /// In-order payload kept in the frames it arrived in (frame-level borrowing read,
    /// `frames.rs`): always before the ring's bytes in the stream.
    pub frames: FrameQueue,
    /// The most the window may offer beyond what is queued, in bytes: the whole buffer
    /// normally, [`PRESSURE_RCVBUF`](crate::tcp::PRESSURE_RCVBUF) while the stack is over its
    /// buffer budget (set by the layer).
    pub moderated: u32,
    /// A Fast Open connection's window edge as its SYN-ACK announced it, after the SYN's data
    /// (`fastopen.rs`): while that is still the last edge announced, reading the SYN's data
    /// owes no window update. Linux's window grows from the SYN-ACK's only as data arrives
    /// (`rcv_ssthresh`), so a Linux server sends none; netfold's would otherwise jump to the
    /// whole buffer.
    pub syn_data_edge: Option<u32>,
}

impl RecvSeq {
    pub fn new(wscale: u8, mss: u32, ring: RecvRing, buf: usize, buf_max: usize) -> Self {
        RecvSeq {
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
    pub fn sync(&mut self, syn_seq: u32) {
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
    /// [`RecvSeq::window`] does, unless that would pass the end of the receive ring: then
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
