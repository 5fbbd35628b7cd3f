//! Linux's send chronographs (`tcp_chrono_start` / `tcp_chrono_stop`, tcp_output.c), which
//! `TCP_INFO` reports as `tcpi_busy_time`, `tcpi_rwnd_limited` and `tcpi_sndbuf_limited`:
//! how long the connection has had data to deliver, and of that time how long the peer's
//! receive window or the send buffer held it back.
//!
//! One chronograph runs at a time, the most specific condition winning (Linux's enum order:
//! busy < receive-window limited < send-buffer limited); each stop of a condition falls back
//! to busy while data is still queued or in flight, to nothing once all of it is
//! acknowledged. Linux starts and stops them at the points of its send path where the
//! conditions change; netfold evaluates the same conditions after every event that may change
//! them (each input segment, send call and timer run ends with an output pass or the input
//! path's quiet exit, both of which call [`Conn::chrono_update`]).

use super::conn::Conn;
use super::seq;
use crate::time::Instant;

/// A chronograph's condition, in Linux's priority order (`enum tcp_chrono`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Nothing queued or in flight (`TCP_CHRONO_UNSPEC`).
    #[default]
    None,
    /// Data queued or in flight (`TCP_CHRONO_BUSY`).
    Busy,
    /// Queued data the peer's window does not let go (`TCP_CHRONO_RWND_LIMITED`).
    RwndLimited,
    /// Everything written is sent, the window and cwnd have room, and the application found
    /// the send buffer full (`TCP_CHRONO_SNDBUF_LIMITED`).
    SndbufLimited,
}

/// The running chronograph and the time accumulated per condition.
#[derive(Debug, Clone, Copy, Default)]
pub struct Chrono {
    kind: Kind,
    since: Instant,
    /// Microseconds spent busy, receive-window limited and send-buffer limited.
    total: [u64; 3],
    /// Linux's `SOCK_NOSPACE`: a send found the buffer full, and not enough has been freed
    /// since for the socket to count as writable again (`__sk_stream_is_writeable`: free
    /// space at least half of what is queued).
    nospace: bool,
}

impl Chrono {
    fn set(&mut self, now: Instant, kind: Kind) {
        if self.kind != Kind::None {
            let i = self.kind as usize - 1;
            self.total[i] =
                self.total[i].saturating_add(now.saturating_since(self.since).total_micros());
        }
        self.kind = kind;
        self.since = now;
    }

    /// Linux `tcp_chrono_start`: a more specific condition replaces the running one.
    fn start(&mut self, now: Instant, kind: Kind) {
        if kind > self.kind {
            self.set(now, kind);
        }
    }

    /// Linux `tcp_chrono_stop`: nothing once the queues are empty, else back to busy if
    /// `kind` was the one running.
    fn stop(&mut self, now: Instant, kind: Kind, queues_empty: bool) {
        if queues_empty {
            self.set(now, Kind::None);
        } else if kind == self.kind {
            self.set(now, Kind::Busy);
        }
    }

    /// Linux `tcp_get_info_chrono_stats`: (busy time, the total of all three), receive-window
    /// limited and send-buffer limited time, in microseconds, the running one included.
    pub fn times(&self, now: Instant) -> (u64, u64, u64) {
        let mut t = self.total;
        if self.kind != Kind::None {
            let i = self.kind as usize - 1;
            t[i] = t[i].saturating_add(now.saturating_since(self.since).total_micros());
        }
        (t[0].saturating_add(t[1]).saturating_add(t[2]), t[1], t[2])
    }
}

impl Conn {
    /// Brings the chronographs up to date with the connection's state at `now` (see the
    /// module documentation).
    ///
    /// The states request/response traffic moves between are decided inline: nothing
    /// queued (no chronograph, or the busy one stopping), and data queued with everything
    /// written already sent (the busy one starting or running), both while the send buffer
    /// has not been found full. In these, the receive-window and send-buffer conditions of
    /// `chrono_update_slow` neither start nor stop, so only the busy clock moves.
    #[inline]
    pub fn chrono_update(&mut self, now: Instant) {
        if !self.chrono.nospace && !self.snd.app_blocked() {
            let queued = self.is_synchronized() && self.snd.pending();
            match (self.chrono.kind, queued) {
                (Kind::None, false) => return,
                // `tcp_chrono_stop` with the queues empty.
                (Kind::Busy, false) => {
                    self.chrono.set(now, Kind::None);
                    return;
                }
                // `tcp_chrono_start(TCP_CHRONO_BUSY)`; nothing unsent, so no window limit.
                (Kind::None | Kind::Busy, true) if !seq::lt(self.snd.nxt(), self.fin_seq()) => {
                    if self.chrono.kind == Kind::None {
                        self.chrono.set(now, Kind::Busy);
                    }
                    return;
                }
                _ => {}
            }
        }
        self.chrono_update_slow(now);
    }

    /// [`Conn::chrono_update`] in full.
    #[inline(never)]
    fn chrono_update_slow(&mut self, now: Instant) {
        // The handshake does not count: Linux's clocks start with the first data queued on
        // an established socket (a SYN is not in its write queue's accounting here).
        let queues_empty = !self.is_synchronized() || !self.snd.pending();
        if queues_empty {
            self.chrono.nospace = false;
            self.chrono.stop(now, Kind::Busy, true);
            return;
        }
        // `tcp_add_write_queue_tail`: data entering an empty queue starts the busy clock.
        self.chrono.start(now, Kind::Busy);
        // `tcp_write_xmit`: the next segment does not fit the peer's window.
        let end = self.fin_seq();
        let unsent = if seq::lt(self.snd.nxt(), end) {
            seq::dist(self.snd.nxt(), end)
        } else {
            0
        };
        let next = unsent.min(self.seg_mss()).max(u32::from(unsent > 0));
        let wnd_end = self.snd.una().wrapping_add(self.snd.wnd());
        if unsent > 0 && seq::gt(self.snd.nxt().wrapping_add(next), wnd_end) {
            self.chrono.start(now, Kind::RwndLimited);
        } else {
            self.chrono.stop(now, Kind::RwndLimited, false);
        }
        // `tcp_cwnd_validate`: "1) just sent some data, 2) not cwnd limited, 3) no more data
        // to send, 4) application is hitting buffer limit (SOCK_NOSPACE)"; the socket is
        // writable again once free space reaches half of what is queued (`tcp_check_space`
        // stops the chronograph then).
        if self.snd.app_blocked() {
            self.chrono.nospace = true;
        }
        let ring = &self.snd.ring();
        if self.chrono.nospace && ring.free() >= ring.len() / 2 && ring.free() > 0 {
            self.chrono.nospace = false;
        }
        if !self.chrono.nospace {
            self.chrono.stop(now, Kind::SndbufLimited, false);
        } else if unsent == 0 && !self.cwnd_limited() {
            self.chrono.start(now, Kind::SndbufLimited);
        }
    }

    /// (busy, receive-window limited, send-buffer limited) microseconds, for `TCP_INFO`.
    pub fn chrono_times(&self, now: Instant) -> (u64, u64, u64) {
        self.chrono.times(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// Linux's rules: the most specific condition runs, a stop falls back to busy while data
    /// is queued, and busy time is the total of all three.
    #[test]
    fn one_chronograph_runs_and_busy_is_the_total() {
        let mut c = Chrono::default();
        c.start(t(0), Kind::Busy);
        c.start(t(10), Kind::RwndLimited);
        // A less specific start changes nothing.
        c.start(t(15), Kind::Busy);
        assert_eq!(c.times(t(30)), (30_000, 20_000, 0));
        // Stopping a condition that is not running changes nothing either.
        c.stop(t(30), Kind::SndbufLimited, false);
        c.stop(t(40), Kind::RwndLimited, false);
        c.start(t(50), Kind::SndbufLimited);
        c.stop(t(55), Kind::SndbufLimited, false);
        assert_eq!(c.times(t(60)), (60_000, 30_000, 5_000));
        // Empty queues stop the clock altogether.
        c.stop(t(70), Kind::Busy, true);
        assert_eq!(c.times(t(1000)), (70_000, 30_000, 5_000));
    }
}
