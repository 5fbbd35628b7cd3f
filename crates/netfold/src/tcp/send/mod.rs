//! The send sequence space of one connection (RFC 9293 §3.3.1, figure 3):
//!
//! ```text
//!      1         2          3          4
//! ----------|----------|----------|----------
//!        SND.UNA    SND.NXT    SND.UNA
//!                             +SND.WND
//! 1 - old sequence numbers that have been acknowledged
//! 2 - sequence numbers of unacknowledged data
//! 3 - sequence numbers allowed for new data transmission
//! 4 - future sequence numbers that are not yet allowed
//! ```
//!
//! Plus what netfold keeps beside it: SND.MAX (SND.NXT may be rewound by an RTO), the largest
//! window the peer ever offered (RFC 5961 §5.2's MAX.SND.WND), the effective send MSS, and the
//! send queue whose first byte has sequence number `buf_seq`.
//!
//! [`Sender`] owns that sequence space together with everything the sending half of the
//! connection keeps, one concern per file: the sequence space and the peer's window
//! (`space.rs`), the send queue, the record ends and the FIN (`queue.rs`), what decides when
//! data leaves and which segment gets PSH — MSG_MORE, a push asked for, the last PSH and
//! short segment (`push.rs`) — send-buffer growth (`buffer.rs`), and the loss-recovery
//! state: the RTT estimator and Karn's timed segment (`timing.rs`), the congestion controller
//! and cwnd usage (`congestion.rs`), fast recovery with the duplicate ACK count and RFC
//! 6582's `recover` (`loss.rs`), the SACK scoreboard (`sacked.rs`) and D-SACK undo
//! (`undo.rs`), and RACK-TLP's state (`lossdetect.rs`). Its fields are private:
//! the rest of the stack reads them through getters and changes them through methods named
//! for what happened (`on_syn_ack`, `on_ack`, `on_window_update`, `on_sent`, `rewind`,
//! `queue_fin`, ...), which keep its invariants — SND.UNA =< SND.NXT =< SND.MAX, the window
//! taken from the newest segment only (RFC 9293 §3.10.7.4), MAX.SND.WND never shrinking, the
//! FIN one sequence number after the data. The algorithms stay in their modules (`rtt.rs`,
//! `cc/`, `sack.rs`, `dsack.rs`, `rack.rs`).

mod buffer;
mod congestion;
mod loss;
mod lossdetect;
mod push;
mod queue;
mod sacked;
mod space;
#[cfg(test)]
mod tests;
mod timing;
mod undo;

use std::collections::VecDeque;

pub use loss::Recovery;

use super::cc::{Cc, CwndUsage};
use super::dsack::DsackSender;
use super::rack::{Rack, Tlp, TLP_MAX_ACK_DELAY};
use super::rtt::RttEstimator;
use super::sack::Scoreboard;
use super::zerocopy::SendQueue;
use super::CongestionControl;
use crate::time::{Duration, Instant};

/// The most record ends (`send` with MSG_EOR) one connection keeps unacknowledged; a send
/// asking for one more waits (WouldBlock) until ACKs free some, as Linux's record skbs wait
/// for send-buffer memory. Bounds the memory a writer of tiny records can pin.
pub const MAX_RECORD_ENDS: usize = 4096;

#[derive(Debug)]
pub struct Sender {
    /// ISS: initial send sequence number.
    iss: u32,
    /// SND.UNA: oldest unacknowledged sequence number.
    una: u32,
    /// SND.NXT: next sequence number to be sent.
    nxt: u32,
    /// Highest sequence number sent + 1 (`nxt` may be rewound by an RTO).
    max: u32,
    /// SND.WND: the peer's window, scaled.
    wnd: u32,
    /// MAX.SND.WND (RFC 5961 §5.2): the largest window the peer ever offered.
    max_wnd: u32,
    /// SND.WL1 / SND.WL2: segment sequence and acknowledgment numbers of the last window update.
    wl1: u32,
    wl2: u32,
    /// Snd.Wind.Shift (RFC 7323 §2): applied to the peer's window field.
    wscale: u8,
    /// Eff.snd.MSS before options (RFC 9293 §3.7.1): min(peer's MSS, ours), lowered by PMTU.
    mss: u32,
    /// Sequence number of the first byte in `ring`.
    buf_seq: u32,
    /// Bytes from SND.UNA on (unacknowledged and unsent): copied into a ring or lent by the
    /// application (`zerocopy.rs`).
    ring: SendQueue,
    /// shutdown_write()/close() was called: a FIN follows the queued data.
    fin_queued: bool,
    /// Send-buffer growth (Linux `tcp_sndbuf_expand`): the ceiling, whether it is on, and
    /// whether the application found the ring full since the last growth check (Linux
    /// `SOCK_NOSPACE`: only a writer that wants more space gets it).
    buf_max: usize,
    autotune: bool,
    app_blocked: bool,
    /// The last send had MSG_MORE: the queue's short tail waits for more data (Linux
    /// `tcp_push` with `TCP_NAGLE_CORK` for that call). Cleared by a send without it and by
    /// the next ACK, as Linux's push at ACK time uses the socket's own Nagle setting.
    more: bool,
    /// The last send had MSG_MORE: the queue's end gets no PSH when it leaves (Linux
    /// `tcp_push` marks the tail skb only without MSG_MORE). Unlike `more`, an ACK leaves it.
    more_tail: bool,
    /// Ends of records (sends with MSG_EOR) not yet acknowledged, oldest first: no segment
    /// crosses one (Linux `TCP_SKB_CB(skb)->eor`, `tcp_skb_can_collapse_to`).
    record_ends: VecDeque<u32>,
    /// Send what is queued at the next output pass whatever Nagle and TCP_CORK say, once
    /// (Linux `TCP_NAGLE_PUSH`, which setting TCP_NODELAY raises).
    push_now: bool,
    /// The end of the last segment sent with PSH (Linux `tp->pushed_seq`): new data more
    /// than half the largest window past it gets PSH (Linux `forced_push`).
    pushed: u32,
    /// SND.MAX when the current output pass began: where Linux's `tcp_write_xmit` starts
    /// cutting the pass's new data into GSO packets (PSH placement, `Conn::push`).
    burst_start: u32,
    /// The end of the last segment sent shorter than the MSS (Linux `tp->snd_sml`, for
    /// Minshall's Nagle check).
    sml: u32,
    /// Bytes in the last write chunk (Linux's tail skb of the write queue, at most one size
    /// goal): what a write may still append without the TCP_NOTSENT_LOWAT check, which
    /// Linux makes only before it starts a new skb. Kept only while `track_chunks`.
    tail_chunk: u32,
    /// The writer applies TCP_NOTSENT_LOWAT (it asked for [`Conn::notsent_room`]): writes
    /// keep `tail_chunk`. Off until then, so a connection without the option pays nothing
    /// for the bookkeeping on a write.
    ///
    /// [`Conn::notsent_room`]: super::conn::Conn::notsent_room
    track_chunks: bool,
    /// Our FIN went in a segment of its own (Linux: its own skb, which a tail loss probe
    /// resends alone).
    fin_alone: bool,
    /// The RTO estimator (RFC 6298) and its backoff (`timing.rs`).
    rtt: RttEstimator,
    /// The segment Karn's algorithm times without timestamps: its end and when it left.
    rtt_timing: Option<(u32, Instant)>,
    /// The congestion controller (`congestion.rs`, `cc/`).
    cc: Cc,
    /// Whether the last window used cwnd (`cc::usage`, Linux `tcp_cwnd_validate`).
    cwnd_use: CwndUsage,
    /// The fast recovery in progress (`loss.rs`).
    recovery: Option<Recovery>,
    /// Duplicate ACKs counted (RFC 5681 §2).
    dupacks: u32,
    /// RFC 6582 `recover`: no new fast recovery until the ACK passes it.
    recover: u32,
    /// The SACK scoreboard (`sacked.rs`, `sack.rs`).
    scoreboard: Scoreboard,
    /// D-SACK undo (`undo.rs`, `dsack.rs`).
    dsack_tx: DsackSender,
    /// RFC 8985 RACK: time-based loss detection over SACK (`lossdetect.rs`, `rack.rs`).
    rack: Rack,
    /// RFC 8985 §7 tail loss probe episode (TLP.end_seq, TLP.is_retrans).
    tlp: Tlp,
    /// When data was last sent (RFC 5681 §4.1 restart after idle).
    last_data_tx: Instant,
    /// RFC 8985 §7 tail loss probe: the PTO fired and a probe is due.
    tlp_due: bool,
    /// The RTO fired: the segment at SND.UNA goes again even if SACKed (RFC 2018 §8).
    rto_head_due: bool,
    /// A blocked writer waits for the handshake with data to send (Linux `sk_write_pending`,
    /// a blocking `sendto(MSG_FASTOPEN)` whose data did not all fit in the SYN).
    writer_waiting: bool,
}

impl Sender {
    /// A writer starts (`true`) or stops waiting for the handshake with data to send.
    pub fn set_writer_waiting(&mut self, on: bool) {
        self.writer_waiting = on;
    }

    /// A blocked writer waits for the handshake with data to send.
    pub fn writer_waiting(&self) -> bool {
        self.writer_waiting
    }

    /// A send space starting at `iss` (the SYN occupies `iss`, data starts after it).
    pub fn new(iss: u32, mss: u32, ring: SendQueue, buf: usize, buf_max: usize) -> Self {
        Sender {
            buf_max,
            autotune: buf_max > buf,
            app_blocked: false,
            writer_waiting: false,
            iss,
            una: iss,
            nxt: iss,
            max: iss,
            wnd: 0,
            max_wnd: 0,
            wl1: 0,
            wl2: 0,
            wscale: 0,
            mss,
            buf_seq: iss.wrapping_add(1),
            ring,
            fin_queued: false,
            more: false,
            more_tail: false,
            record_ends: VecDeque::new(),
            push_now: false,
            pushed: iss.wrapping_add(1),
            burst_start: iss,
            sml: iss,
            tail_chunk: 0,
            track_chunks: false,
            fin_alone: false,
            rtt: RttEstimator::new(Duration::from_secs(1), Duration::from_millis(200)),
            rtt_timing: None,
            cc: Cc::new(CongestionControl::Cubic, mss),
            cwnd_use: CwndUsage::default(),
            recovery: None,
            dupacks: 0,
            recover: iss,
            scoreboard: Scoreboard::new(),
            dsack_tx: DsackSender::default(),
            rack: Rack::new(0),
            tlp: Tlp::new(TLP_MAX_ACK_DELAY),
            last_data_tx: Instant::ZERO,
            tlp_due: false,
            rto_head_due: false,
        }
    }
}
