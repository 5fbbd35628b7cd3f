//! Socket-memory pressure: when the ring storage of all connections exceeds the stack's
//! budget ([`TcpLayer::set_buffer_budget`]), the connections that hold memory without making
//! progress are reset, the most expensive first, until the total is back under 7/8 of the
//! budget.
//!
//! A connection's initial buffers are never refused (a new connection, a legitimate client's
//! among them, is always accepted), so without this a peer that opens connections, asks for
//! data and then holds its window shut (sockstress), or a program that closes sockets whose
//! peers never read, could pin memory without bound but the connection count. Linux answers
//! the same pressure (tcp_mem[2] reached) by killing orphans first (`tcp_check_oom`, "out of
//! memory -- consider tuning tcp_mem") and by refusing buffer growth; netfold refuses growth
//! at the budget too (`RingCache::take_for_growth`) and resets, in this order:
//!
//! 1. orphans (closed by the application) that make no progress: [`STALL_PROBES`] zero-window
//!    probes or retransmission timeouts in a row went unanswered by an opening window or a
//!    new acknowledgment;
//! 2. connections whose peer's window has stayed shut for as many probes while data waits
//!    to be sent (the zero-window hold of sockstress-style attacks).
//!
//! Meanwhile every connection's send queue is held at [`PRESSURE_SNDBUF`] (a write gets no
//! more room until it drains below), as Linux moderates `sk_sndbuf` under pressure
//! (`sk_stream_moderate_sndbuf`), and every receive window offers at most
//! [`PRESSURE_RCVBUF`] beyond what is queued (Linux clamps `rcv_ssthresh` under pressure,
//! `tcp_adjust_rcv_ssthresh`; a right edge already announced is never taken back, RFC 9293
//! §3.8.6): what the rings hold in written pages stays bounded while the holds are being
//! found, instead of every connection filling its full rings first. Both end when the rings
//! are back under the budget.
//!
//! Within a class, the one holding the most ring bytes goes first. Idle connections that
//! hold no unsent data are never reset; a connection that has sent and received nothing
//! holds no rings at all (they are taken at first use, `Conn::alloc_buffers`).

use super::*;
use crate::time::Duration;

/// Consecutive zero-window probes (or retransmission timeouts) after which a connection counts
/// as making no progress: with the probe interval starting at the RTO (200 ms and up) and
/// doubling, at least 1.4 s of a window shut, long enough not to mistake a slow reader's
/// moment for a hold.
pub const STALL_PROBES: u32 = 3;

/// Bytes a connection may have queued for sending while the stack is over its budget (16
/// segments of 4 KiB; Linux's floor is SOCK_MIN_SNDBUF, ~4.6 KB, with half the queue kept).
pub const PRESSURE_SNDBUF: usize = 64 * 1024;

/// The most a receive window offers beyond the bytes already queued while the stack is over
/// its budget (as [`PRESSURE_SNDBUF`] for sending).
pub const PRESSURE_RCVBUF: usize = 64 * 1024;

/// The scan runs at most this often while over budget (it visits every connection; a stack
/// over budget with nothing to reclaim must not scan on every poll).
const LOOK_EVERY: Duration = Duration::from_millis(100);

impl TcpLayer {
    /// How many more bytes `c` may queue now: unlimited unless over budget.
    #[inline]
    pub(super) fn pressure_send_room(&self, c: &Conn) -> usize {
        if self.rings.in_use() > self.rings.budget() {
            PRESSURE_SNDBUF.saturating_sub(c.snd.ring().len())
        } else {
            usize::MAX
        }
    }

    /// Called once per output pass: a compare unless over budget.
    #[inline]
    pub(super) fn check_memory_pressure(&mut self, now: Instant) {
        if self.rings.in_use() > self.rings.budget() {
            if now >= self.next_reclaim {
                self.reclaim(now);
            }
        } else if self.rcv_moderated {
            self.moderate_receive_windows(false);
        }
    }

    /// Sets (or lifts) every connection's receive-window moderation.
    #[cold]
    #[inline(never)]
    fn moderate_receive_windows(&mut self, on: bool) {
        self.rcv_moderated = on;
        let cap = if on { PRESSURE_RCVBUF as u32 } else { u32::MAX };
        for c in self.table.conns_mut() {
            c.rcv.moderate(cap);
        }
    }

    #[cold]
    #[inline(never)]
    fn reclaim(&mut self, now: Instant) {
        self.next_reclaim = now + LOOK_EVERY;
        self.stats.memory_pressure += 1;
        // Every scan, so that connections opened since the last one are moderated too.
        self.moderate_receive_windows(true);
        let target = self.rings.budget() / 8 * 7;
        // (class, ring bytes held, slot)
        let mut victims: Vec<(u8, usize, u32)> = Vec::new();
        for (i, c) in self.table.conns() {
            let held = c.snd.ring().allocated() + c.rcv.ring().capacity();
            let stalled =
                c.timers.persist_backoff >= STALL_PROBES || c.timers.retries >= STALL_PROBES;
            if held == 0 || !stalled {
                continue;
            }
            let class = if c.user_closed {
                0
            } else if c.timers.persist_backoff >= STALL_PROBES && !c.snd.ring().is_empty() {
                1
            } else {
                continue;
            };
            victims.push((class, held, i));
        }
        victims.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        for (_, _, i) in victims {
            if self.rings.in_use() <= target {
                break;
            }
            self.abort_index(i);
            self.stats.pressure_resets += 1;
        }
    }
}
