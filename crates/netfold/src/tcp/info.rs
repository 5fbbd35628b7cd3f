//! `TCP_INFO`: one connection's state in the units and meanings of Linux's `struct tcp_info`
//! (include/uapi/linux/tcp.h, filled by `tcp_get_info`), so tools and test scripts written
//! against Linux read netfold the same way. Counts of segments are segments of the current
//! send MSS, as Linux's `packets_out`/`sacked_out` count skbs of `mss_cache` bytes.

use super::cc::CongestionController;
use super::conn::Conn;
use super::State;
use crate::time::Instant;

/// Per-connection counters Linux keeps in the socket (RFC 4898 names in parentheses).
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnCounters {
    /// Segments received (`tcpEStatsPerfSegsIn`), and those with data (`DataSegsIn`).
    pub segs_in: u32,
    pub data_segs_in: u32,
    /// Segments sent, a GSO super-segment counting as the segments it becomes
    /// (`tcpEStatsPerfSegsOut`), and those with data (`DataSegsOut`).
    pub segs_out: u32,
    pub data_segs_out: u32,
    /// Segments retransmitted, ever (`tcpEStatsPerfSegsRetrans`), and their bytes
    /// (`tcpEStatsPerfOctetsRetrans`).
    pub total_retrans: u32,
    pub bytes_retrans: u64,
    /// Retransmission timeouts, ever.
    pub total_rto: u16,
    /// Out-of-order segments queued.
    pub rcv_ooopack: u32,
    /// Segments the peer acknowledged, the SYN (or SYN-ACK) and FIN counting one each
    /// (Linux `tp->delivered`).
    pub delivered: u32,
}

/// Linux `tcp_ca_state`.
pub mod ca_state {
    pub const OPEN: u8 = 0;
    pub const DISORDER: u8 = 1;
    pub const CWR: u8 = 2;
    pub const RECOVERY: u8 = 3;
    pub const LOSS: u8 = 4;
}

/// `tcpi_options` bits (Linux `TCPI_OPT_*`).
pub mod options {
    pub const TIMESTAMPS: u8 = 1;
    pub const SACK: u8 = 2;
    pub const WSCALE: u8 = 4;
    pub const ECN: u8 = 8;
    /// The SYN's data was taken by TCP Fast Open (Linux `TCPI_OPT_SYN_DATA`).
    pub const SYN_DATA: u8 = 32;
}

/// Linux's `ssthresh` before any loss (`TCP_INFINITE_SSTHRESH`).
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// One connection as `getsockopt(TCP_INFO)` reports it; see [`super::TcpLayer::tcp_info`].
/// Times are microseconds unless named `_ms`; fields Linux has and netfold does not measure
/// (pacing, delivery rate, busy time) are absent and read as 0 through the C API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Linux's state numbering (`TCP_ESTABLISHED` = 1 ... `TCP_CLOSING` = 11).
    pub state: u8,
    pub ca_state: u8,
    /// Consecutive retransmission timeouts of the current episode (`icsk_retransmits`).
    pub retransmits: u8,
    /// Unanswered zero-window or keepalive probes.
    pub probes: u8,
    /// RTO back-off exponent.
    pub backoff: u8,
    pub options: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub rto: u32,
    /// Delayed-ACK timeout.
    pub ato: u32,
    /// Payload bytes per segment now (MSS less the options every segment carries).
    pub snd_mss: u32,
    /// The peer's segment size as observed.
    pub rcv_mss: u32,
    /// Segments sent and not cumulatively acknowledged, SACKed among them, deemed lost and
    /// not yet retransmitted, and retransmitted and not yet acknowledged.
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub last_data_sent_ms: u32,
    pub last_data_recv_ms: u32,
    pub last_ack_recv_ms: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    /// In segments, [`INFINITE_SSTHRESH`] before the first reduction.
    pub snd_ssthresh: u32,
    /// In segments.
    pub snd_cwnd: u32,
    /// The MSS we announced.
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    /// Bytes queued and not yet sent.
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    /// Segments delivered (Linux `tcpi_delivered`).
    pub delivered: u32,
    /// Bytes sent, retransmissions included, and retransmitted.
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    /// The peer's window (scaled) and the one we announced last (scaled).
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub total_rto: u16,
    /// Linux's chronographs (`tcp_get_info_chrono_stats`), microseconds: time with data
    /// queued or in flight, and of it the time held by the peer's window and by the send
    /// buffer.
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
}

/// Linux's `TCP_*` state numbers (include/net/tcp_states.h).
fn linux_state(s: State) -> u8 {
    match s {
        State::Established => 1,
        State::SynSent => 2,
        State::SynReceived => 3,
        State::FinWait1 => 4,
        State::FinWait2 => 5,
        State::TimeWait => 6,
        State::Closed => 7,
        State::CloseWait => 8,
        State::LastAck => 9,
        State::Listen => 10,
        State::Closing => 11,
    }
}

fn micros(d: crate::time::Duration) -> u32 {
    u32::try_from(d.total_micros()).unwrap_or(u32::MAX)
}

fn since_ms(now: Instant, t: Instant) -> u32 {
    u32::try_from(now.saturating_since(t).total_millis()).unwrap_or(u32::MAX)
}

impl Conn {
    /// `tcp_get_info` for this connection at `now`.
    pub fn info(&self, now: Instant) -> TcpInfo {
        let smss = self.seg_mss().max(1);
        let segs = |bytes: u32| bytes.div_ceil(smss);
        let synced = self.is_synchronized();
        let ca_state = if self.in_rto_recovery() {
            ca_state::LOSS
        } else if self.snd.recovery().is_some() {
            ca_state::RECOVERY
        } else if self.snd.dupacks() > 0 || self.snd.scoreboard().sacked_bytes() > 0 {
            ca_state::DISORDER
        } else {
            ca_state::OPEN
        };
        let mut options = 0;
        if self.ts.enabled {
            options |= options::TIMESTAMPS;
        }
        if self.sack_ok {
            options |= options::SACK;
        }
        if self.ws_ok {
            options |= options::WSCALE;
        }
        if self.ecn.ok {
            options |= options::ECN;
        }
        if self.fastopen.syn_data {
            options |= options::SYN_DATA;
        }
        let ssthresh = self.snd.cc().ssthresh();
        let snd_ssthresh = if ssthresh >= u32::MAX / 2 {
            INFINITE_SSTHRESH
        } else {
            ssthresh / self.snd.mss().max(1)
        };
        // Bytes acknowledged / received as Linux counts them (tcp_snd_una_update and
        // tcp_rcv_nxt_update add every advance of SND.UNA / RCV.NXT): FINs count one each, and
        // so does our SYN when we opened actively (the SYN-ACK's acknowledgment goes through
        // tcp_ack; a passive opener's SYN-ACK does not). Checked against Linux 6.18: a fresh
        // client reads bytes_acked 1, the server 0; after 100 bytes and a FIN, 102 and 101.
        let bytes_acked = if synced {
            let syn = u32::from(self.passive);
            u64::from(
                self.snd
                    .una()
                    .wrapping_sub(self.snd.iss())
                    .saturating_sub(syn),
            )
        } else {
            0
        };
        let bytes_received = if synced {
            u64::from(
                self.rcv
                    .nxt()
                    .wrapping_sub(self.rcv.irs())
                    .saturating_sub(1),
            )
        } else {
            0
        };
        let sent = self
            .snd
            .max()
            .wrapping_sub(self.snd.iss())
            .saturating_sub(1);
        let flight = if synced { self.flight() } else { 0 };
        let k = &self.counters;
        let (busy_time, rwnd_limited, sndbuf_limited) = self.chrono_times(now);
        TcpInfo {
            state: linux_state(self.state),
            ca_state,
            retransmits: u8::try_from(self.timers.retries).unwrap_or(u8::MAX),
            probes: u8::try_from(self.timers.probes_unanswered.max(self.timers.ka_probes))
                .unwrap_or(u8::MAX),
            backoff: u8::try_from(self.snd.rtt().backoff).unwrap_or(u8::MAX),
            options,
            snd_wscale: self.snd.wscale(),
            rcv_wscale: self.rcv.wscale(),
            rto: micros(self.snd.rtt().rto()),
            ato: self.config.delayed_ack.map_or(0, micros),
            snd_mss: smss,
            rcv_mss: self.rcv.mss(),
            unacked: segs(flight),
            sacked: segs(self.snd.scoreboard().sacked_bytes()),
            // Linux `lost_out`: segments marked lost and not delivered, retransmitted or not.
            lost: segs(self.snd.rack().lost_out()),
            retrans: segs(self.snd.rack().retransmitted_in_flight()),
            last_data_sent_ms: since_ms(now, self.snd.last_data_tx()),
            last_data_recv_ms: self
                .rcv
                .last_data_rx()
                .or(self.rcv.synced_at())
                .map_or(u32::MAX, |t| since_ms(now, t)),
            last_ack_recv_ms: since_ms(now, self.timers.last_rx),
            pmtu: self.snd.mss() + if self.remote.get().is_ipv6() { 60 } else { 40 },
            rcv_ssthresh: self.rcv.buf() as u32,
            rtt: self.snd.rtt().srtt().map_or(0, micros),
            rttvar: micros(self.snd.rtt().rttvar()),
            snd_ssthresh,
            snd_cwnd: self.snd.cc().cwnd() / self.snd.mss().max(1),
            advmss: u32::from(self.config.mss),
            // Linux's `tp->reordering`: 3 (`tcp_reordering`) until a delivery out of order
            // spans more segments (RACK's loss detection does not use it).
            reordering: self.snd.rack().reordering(smss),
            rcv_space: self.rcv.space().space as u32,
            total_retrans: k.total_retrans,
            bytes_acked,
            bytes_received,
            segs_out: k.segs_out,
            segs_in: k.segs_in,
            notsent_bytes: if super::seq::lt(self.snd.nxt(), self.fin_seq()) {
                super::seq::dist(self.snd.nxt(), self.fin_seq())
            } else {
                0
            },
            min_rtt: self.snd.rack().min_rtt().map_or(u32::MAX, micros),
            data_segs_in: k.data_segs_in,
            data_segs_out: k.data_segs_out,
            delivered: k.delivered,
            bytes_sent: u64::from(sent) + k.bytes_retrans,
            bytes_retrans: k.bytes_retrans,
            dsack_dups: self.snd.dsack_tx().stats.received as u32,
            reord_seen: self.snd.rack().stats.reordering_events as u32,
            rcv_ooopack: k.rcv_ooopack,
            snd_wnd: self.snd.wnd(),
            rcv_wnd: super::seq::dist(self.rcv.nxt(), self.rcv.adv()),
            total_rto: k.total_rto,
            busy_time,
            rwnd_limited,
            sndbuf_limited,
        }
    }
}
