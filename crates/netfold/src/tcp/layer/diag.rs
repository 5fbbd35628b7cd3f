//! Diagnostics: statistics, per-connection information (`conn_info`, `tcp_info`), the
//! textual dump a stuck test prints, and the counts a program that winds down polls for.

use super::*;
use crate::tcp::{Error, Handle, State, Stats, TcpInfo};
use crate::time::Instant;
use std::cmp::Reverse;

impl TcpLayer {
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Some connection has sent data or a FIN that is not acknowledged yet (its
    /// retransmission timer is running). A program about to drop the stack after `close`
    /// keeps polling while this holds, or a lost FIN is never sent again and the peer waits
    /// for it forever.
    pub fn has_unacked(&self) -> bool {
        self.table.conns().any(|(_, c)| {
            c.snd.una() != c.snd.max()
                && !matches!(c.state, State::Closed | State::TimeWait | State::Listen)
        })
    }

    /// A line per connection with its sequence state, queues and timers, for a tool's
    /// "stuck" report (a liveness failure needs to say which side waits for what), plus the
    /// layer's timer queue: its earliest deadline, its length and the active list's.
    pub fn describe_conns(&self) -> String {
        let mut out = format!(
            "tcp layer: last_now {:?}, timer heap {} (earliest {:?}), active {}\n",
            self.last_now,
            self.timers.len(),
            self.timers.peek().map(|Reverse((t, i))| (*t, *i)),
            self.active.len()
        );
        for (i, s) in self.table.conn_slots() {
            let c = &s.conn;
            out.push_str(&format!(
                "conn {i}: {:?} {} -> {} snd una {} nxt {} max {} fin_seq {} fin_queued {} \
                 wnd {} | rcv nxt {} ring {} fin_received {} | recovery {:?} lost {} \
                 in_active {} ack_now {} tlp_due {} | timers rto {:?} pto {:?} \
                 delack {:?} persist {:?} reo {:?} tw {:?} registered {:?} retries {}\n",
                c.state,
                c.local.get(),
                c.remote.get(),
                c.snd.una(),
                c.snd.nxt(),
                c.snd.max(),
                c.fin_seq(),
                c.snd.fin_queued(),
                c.snd.wnd(),
                c.rcv.nxt(),
                c.rcv.ring().len(),
                c.rcv.fin_received(),
                c.snd.recovery(),
                c.snd.rack().lost_bytes(),
                s.in_active,
                c.rcv.ack_now(),
                c.snd.tlp_due(),
                c.timers.rto,
                c.timers.pto,
                c.timers.delack,
                c.timers.persist,
                c.timers.reo,
                c.timers.time_wait,
                c.timers.registered,
                c.timers.retries,
            ));
        }
        out
    }

    /// Diagnostics for tests and tools: (cwnd, ssthresh, srtt, rto) of a connection.
    pub fn conn_info(&self, h: Handle) -> Result<ConnInfo, Error> {
        use crate::tcp::cc::CongestionController;
        let c = self.conn(h)?;
        Ok(ConnInfo {
            cwnd: c.snd.cc().cwnd(),
            ssthresh: c.snd.cc().ssthresh(),
            srtt: c.snd.rtt().srtt(),
            rto: c.snd.rtt().rto(),
            mss: c.snd.mss(),
            snd_wnd: c.snd.wnd(),
            snd_wscale: c.snd.wscale(),
            rcv_wscale: c.rcv.wscale(),
            sack: c.sack_ok,
            timestamps: c.ts.enabled,
            recv_buffer: c.rcv.buf(),
            send_buffer: c.snd.ring().capacity(),
            rack: RackInfo {
                min_rtt: c.snd.rack().min_rtt(),
                rtt: c.snd.rack().rtt(),
                reo_wnd: c.snd.rack().current_reo_wnd(),
                reo_wnd_mult: c.snd.rack().reo_wnd_mult(),
                reordering_seen: c.snd.rack().reordering_seen(),
                marked_lost: c.snd.rack().stats.marked_lost,
                lost_retransmissions: c.snd.rack().stats.lost_retransmissions,
                dsack_received: c.snd.dsack_tx().stats.received,
                dsack_dubious: c.snd.dsack_tx().stats.dubious,
                dsack_undos: c.snd.dsack_tx().stats.undos,
            },
            ecn: c.ecn.ok,
        })
    }

    /// `getsockopt(TCP_INFO)`: the connection in Linux's `struct tcp_info` terms, at `now`.
    pub fn tcp_info(&self, h: Handle, now: Instant) -> Result<TcpInfo, Error> {
        Ok(self.conn(h)?.info(now))
    }

    /// Connections the application has closed whose data or FIN the peer has not all
    /// acknowledged yet: orphans still sending. A program about to discard the stack keeps
    /// driving it until this is 0 (or its patience ends, then [`TcpLayer::abort_all`]), as
    /// Linux keeps orphaned sockets sending after their process is gone. FIN-WAIT-2 (all
    /// delivered, the peer's FIN outstanding) and TIME-WAIT are not counted.
    pub fn orphans_sending(&self) -> usize {
        self.table
            .conns()
            .filter(|(_, c)| {
                c.user_closed
                    && matches!(
                        c.state,
                        State::SynReceived
                            | State::Established
                            | State::CloseWait
                            | State::FinWait1
                            | State::Closing
                            | State::LastAck
                    )
            })
            .count()
    }

    /// Number of live slots (connections incl. TIME-WAIT and listeners).
    pub fn socket_count(&self) -> usize {
        self.table.len()
    }
}

/// Per-connection diagnostics (see [`TcpLayer::conn_info`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    pub cwnd: u32,
    pub ssthresh: u32,
    pub srtt: Option<crate::time::Duration>,
    pub rto: crate::time::Duration,
    pub mss: u32,
    pub snd_wnd: u32,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub sack: bool,
    pub timestamps: bool,
    /// Receive buffer now (the window basis) and send buffer now (ring bytes); both grow
    /// while auto-tuned.
    pub recv_buffer: usize,
    pub send_buffer: usize,
    /// RACK-TLP and D-SACK state (RFC 8985, RFC 2883) of the sender side.
    pub rack: RackInfo,
    /// ECN (RFC 3168) was negotiated in the handshake.
    pub ecn: bool,
}

/// The RACK (RFC 8985) and D-SACK (RFC 2883) part of [`ConnInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RackInfo {
    /// RACK.min_RTT (µs-precise, from RACK's own send times).
    pub min_rtt: Option<crate::time::Duration>,
    /// RACK.rtt: the RTT of the most recently sent segment delivered.
    pub rtt: crate::time::Duration,
    /// RACK.reo_wnd as last computed, and its multiplier (grown by D-SACKs).
    pub reo_wnd: crate::time::Duration,
    pub reo_wnd_mult: u32,
    pub reordering_seen: bool,
    /// Ranges RACK marked lost, and of those, retransmissions lost again.
    pub marked_lost: u64,
    pub lost_retransmissions: u64,
    /// D-SACK blocks accepted and ignored as dubious, and congestion responses undone.
    pub dsack_received: u64,
    pub dsack_dubious: u64,
    pub dsack_undos: u64,
}
