//! Scheduling: the active list (connections that may have something to send), the timer
//! heap (lazily invalidated deadlines), the output pass over both, and the receive-batch
//! bookkeeping of frame-level borrowing reads.

use super::*;
use crate::buf::PacketBuf;
use crate::tcp::conn::{Event, RST_QUEUE_MAX};
use crate::tcp::output::OutputStatus;
use crate::tcp::{Ecn, Handle, OutSegment};
use crate::time::Instant;
use std::cmp::Reverse;

impl TcpLayer {
    /// Puts a connection on the active list.
    pub(super) fn touch(&mut self, i: u32) {
        if let Some(s) = self.table.slot_at_mut(i) {
            if !s.in_active {
                s.in_active = true;
                self.active.push_back(i);
            }
        }
    }

    /// Registers the connection's earliest deadline in the heap if it is earlier than the one
    /// already registered.
    pub(super) fn reschedule(&mut self, i: u32) {
        if let Some(c) = self.table.conn_at_mut(i) {
            if let Some(t) = c.next_timer() {
                if !matches!(c.timers.registered, Some(r) if r <= t) {
                    c.timers.registered = Some(t);
                    self.timers.push(Reverse((t, i)));
                }
            }
        }
    }

    /// Emits every segment due at `now`; see the module contract.
    /// Whether `output` would do nothing at `now` (no queued RST or SYN-ACK, no active
    /// connection, no timer due); if so, records `now` as `output` does (application calls
    /// between polls, such as `close`, take their time from it) and the caller may skip it.
    #[inline]
    pub fn output_idle(&mut self, now: Instant) -> bool {
        let idle = self.rsts.is_empty()
            && self.active.is_empty()
            && self.timers.peek().is_none_or(|Reverse((t, _))| *t > now);
        if idle {
            self.last_now = now;
        }
        idle
    }

    pub fn output(&mut self, now: Instant, emit: &mut dyn FnMut(&OutSegment<'_>) -> bool) {
        self.last_now = now;
        self.check_memory_pressure(now);
        while let Some(&(src, dst, repr)) = self.rsts.front() {
            let seg = OutSegment {
                src,
                dst,
                repr,
                payload: crate::buf::zc::Gather::empty(),
                gso_size: 0,
                ecn: Ecn::NotEct,
                dscp: 0,
            };
            if !emit(&seg) {
                return;
            }
            self.rsts.pop_front();
            self.stats.segments_out += 1;
            // The queue also carries SYN cookie SYN-ACKs.
            if repr.flags.rst() {
                self.stats.rst_out += 1;
            }
        }
        // Expired deadlines put their connections on the active list.
        while let Some(&Reverse((t, i))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            if let Some(c) = self.table.conn_at_mut(i) {
                if c.timers.registered == Some(t) {
                    c.timers.registered = None;
                    self.touch(i);
                }
            }
        }
        // A connection refused by `emit` stays at the front and goes first next time; one that
        // used up its budget goes to the back. Each entry present now is visited once.
        let mut todo = self.active.len();
        while todo > 0 {
            todo -= 1;
            let Some(&i) = self.active.front() else { break };
            let ev = match self.table.conn_at_mut(i) {
                Some(c) => {
                    let ev = c.on_timers(now, &mut self.stats);
                    if std::mem::take(&mut c.rst_due) {
                        let rst = (c.local.get().ip(), c.remote.get().ip(), c.make_rst(now));
                        if self.rsts.len() < RST_QUEUE_MAX {
                            self.rsts.push_back(rst);
                        } else {
                            self.stats.rst_dropped += 1;
                        }
                    }
                    c.reclaim_buffers(&mut self.rings);
                    ev
                }
                _ => {
                    self.active.pop_front();
                    continue;
                }
            };
            if ev != Event::None {
                self.handle_event(i, ev);
            }
            let status = match self.table.conn_at_mut(i) {
                Some(c) => {
                    c.gso_segs = self.gso_segs;
                    let status = c.poll_output(now, &mut self.stats, emit);
                    c.chrono_update(now);
                    status
                }
                _ => {
                    self.active.pop_front();
                    continue;
                }
            };
            match status {
                OutputStatus::Blocked => return,
                OutputStatus::Budget => {
                    self.active.pop_front();
                    self.active.push_back(i);
                }
                OutputStatus::Done => {
                    self.active.pop_front();
                    if let Some(s) = self.table.slot_at_mut(i) {
                        s.in_active = false;
                    }
                    self.reschedule(i);
                }
            }
        }
    }

    pub fn poll_at(&self) -> Option<Instant> {
        if !self.rsts.is_empty() {
            return Some(self.last_now);
        }
        if !self.active.is_empty() {
            return Some(self.last_now);
        }
        // May be a stale (earlier) deadline: an early wake-up costs one empty output pass.
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// At the end of a receive batch: connections that committed frames of it (payload the
    /// interface placed with [`RxSegment::at`](super::RxSegment::at)) take those frames'
    /// buffers, leaving empty ones in `rx` (see [`PacketBuf::is_placeholder`]).
    pub(crate) fn adopt_frames(&mut self, rx: &mut [PacketBuf]) {
        for i in self.borrowers.drain(..) {
            if let Some(c) = self.table.conn_at_mut(i) {
                c.rcv.adopt_frames(rx);
            }
        }
    }

    /// Moves buffers the application gave back into `pool`, and lets the connections whose
    /// window they reopen send an update.
    pub(crate) fn collect_released(&mut self, pool: &mut crate::buf::Pool) {
        if !self.recycler.is_dirty() {
            return;
        }
        let mut conns = std::mem::take(&mut self.released);
        let mut bufs = std::mem::take(&mut self.released_bufs);
        self.recycler.drain(&mut bufs, &mut conns);
        for b in bufs.drain(..) {
            pool.put(b);
        }
        for (i, g) in conns.drain(..) {
            let h = Handle {
                index: i,
                generation: g,
            };
            if let Some(c) = self.table.conn_of_mut(h) {
                c.rcv.note_frames_released();
                self.touch(i);
            }
        }
        self.released = conns;
        self.released_bufs = bufs;
    }

    /// What to wake when the application releases a borrowed frame while the stack is idle
    /// (a driver thread asleep until its next deadline must poll to reopen the window).
    pub fn set_release_waker(&self, w: Option<std::task::Waker>) {
        self.recycler.set_waker(w);
    }

    /// Whether buffers came back since the last poll (a window may have reopened).
    pub(crate) fn released_pending(&self) -> bool {
        self.recycler.is_dirty()
    }
}
