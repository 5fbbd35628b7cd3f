//! What decides when queued data leaves and which segment gets PSH: MSG_MORE and a push
//! asked for (TCP_NODELAY), the last PSH and the last short segment (Linux `pushed_seq`,
//! `snd_sml`), where the output pass began, and the write chunks TCP_NOTSENT_LOWAT counts.
//! TCP_CORK and Nagle themselves are settings of the connection (`output.rs`).

use super::super::seq;
use super::Sender;

impl Sender {
    /// The last send had MSG_MORE, and no ACK came since: the queue's short tail waits.
    #[inline]
    pub fn more(&self) -> bool {
        self.more
    }

    /// The last send had MSG_MORE: the queue's end gets no PSH when it leaves.
    #[inline]
    pub fn more_tail(&self) -> bool {
        self.more_tail
    }

    /// The application queued bytes, with MSG_MORE or without (Linux `tcp_push` with
    /// `TCP_NAGLE_CORK` for that call only).
    #[inline]
    pub fn on_queued(&mut self, more: bool) {
        self.more = more;
        self.more_tail = more;
    }

    /// A push was asked for (Linux `TCP_NAGLE_PUSH`, which setting TCP_NODELAY raises): what
    /// is queued and unsent goes at the next output pass whatever Nagle and TCP_CORK say.
    #[inline]
    pub fn request_push(&mut self) {
        self.push_now = seq::lt(self.nxt, self.fin_seq());
    }

    /// A push is pending ([`Sender::request_push`]).
    #[inline]
    pub fn push_now(&self) -> bool {
        self.push_now
    }

    /// An output pass begins: its new data starts at SND.MAX (where Linux's
    /// `tcp_write_xmit` starts cutting GSO packets).
    #[inline]
    pub fn on_output_pass(&mut self) {
        self.burst_start = self.max;
    }

    /// SND.MAX when the current output pass began.
    #[inline]
    pub fn burst_start(&self) -> u32 {
        self.burst_start
    }

    /// The output pass sent all it could: a pending push is spent.
    #[inline]
    pub fn on_output_stopped(&mut self) {
        self.push_now = false;
    }

    /// New data left with PSH, ending at `end` (Linux `tp->pushed_seq`, never moving back).
    #[inline]
    pub fn on_pushed(&mut self, end: u32) {
        if seq::gt(end, self.pushed) {
            self.pushed = end;
        }
    }

    /// The end of the last segment sent with PSH.
    #[inline]
    pub fn pushed(&self) -> u32 {
        self.pushed
    }

    /// New data left in a segment shorter than the MSS, ending at `end` (Linux
    /// `tcp_minshall_update`).
    #[inline]
    pub fn on_short_sent(&mut self, end: u32) {
        self.sml = end;
    }

    /// A short segment is unacknowledged (Linux `tcp_minshall_check`): the end of the last
    /// one sent is past SND.UNA and not past SND.MAX.
    #[inline]
    pub fn short_in_flight(&self) -> bool {
        seq::gt(self.sml, self.una) && seq::le(self.sml, self.max)
    }

    /// The writer applies TCP_NOTSENT_LOWAT: from now on writes keep the tail chunk.
    #[inline]
    pub fn track_chunks(&mut self) {
        self.track_chunks = true;
    }

    /// Writes keep the tail chunk ([`Sender::track_chunks`] was called).
    #[inline]
    pub fn tracks_chunks(&self) -> bool {
        self.track_chunks
    }

    /// A write left its last chunk `len` bytes long.
    #[inline]
    pub fn on_write_chunk(&mut self, len: u32) {
        self.tail_chunk = len;
    }

    /// Bytes in the last write chunk.
    #[inline]
    pub fn tail_chunk(&self) -> u32 {
        self.tail_chunk
    }
}
