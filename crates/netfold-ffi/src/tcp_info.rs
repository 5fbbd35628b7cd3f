//! `getsockopt(IPPROTO_TCP, TCP_INFO)`: netfold's [`TcpInfo`] in the byte layout of Linux's
//! `struct tcp_info` (include/uapi/linux/tcp.h, 280 bytes since Linux 6.18), native byte
//! order. A caller's shorter struct (glibc's `<netinet/tcp.h>` one, an older kernel's) gets
//! its prefix, as Linux copies `min(len, sizeof(info))`. Fields netfold does not measure
//! (pacing and delivery rates, `rcv_rtt`, CE and Accurate ECN counts) are 0;
//! `tcpi_max_pacing_rate` is Linux's "unlimited" (~0).

use netfold_core::tcp::TcpInfo;

/// `sizeof(struct tcp_info)` as written here.
pub(crate) const LEN: usize = 280;

/// Writes `info` at Linux's offsets.
pub(crate) fn encode(info: &TcpInfo) -> Vec<u8> {
    let mut b = Vec::with_capacity(LEN);
    let u8s = [
        info.state,
        info.ca_state,
        info.retransmits,
        info.probes,
        info.backoff,
        info.options,
        // `__u8 tcpi_snd_wscale : 4, tcpi_rcv_wscale : 4;` (first field in the low bits).
        (info.snd_wscale & 0xf) | (info.rcv_wscale << 4),
        // tcpi_delivery_rate_app_limited, tcpi_fastopen_client_fail.
        0,
    ];
    b.extend_from_slice(&u8s);
    let u32s = |b: &mut Vec<u8>, xs: &[u32]| {
        for x in xs {
            b.extend_from_slice(&x.to_ne_bytes());
        }
    };
    let u64s = |b: &mut Vec<u8>, xs: &[u64]| {
        for x in xs {
            b.extend_from_slice(&x.to_ne_bytes());
        }
    };
    u32s(
        &mut b,
        &[
            info.rto,
            info.ato,
            info.snd_mss,
            info.rcv_mss,
            info.unacked,
            info.sacked,
            info.lost,
            info.retrans,
            0, // tcpi_fackets (always 0 since Linux 4.15)
            info.last_data_sent_ms,
            0, // tcpi_last_ack_sent ("not remembered", 0 on Linux too)
            info.last_data_recv_ms,
            info.last_ack_recv_ms,
            info.pmtu,
            info.rcv_ssthresh,
            info.rtt,
            info.rttvar,
            info.snd_ssthresh,
            info.snd_cwnd,
            info.advmss,
            info.reordering,
            0, // tcpi_rcv_rtt
            info.rcv_space,
            info.total_retrans,
        ],
    );
    u64s(
        &mut b,
        &[0, u64::MAX, info.bytes_acked, info.bytes_received],
    );
    u32s(
        &mut b,
        &[
            info.segs_out,
            info.segs_in,
            info.notsent_bytes,
            info.min_rtt,
            info.data_segs_in,
            info.data_segs_out,
        ],
    );
    // tcpi_delivery_rate (not measured: 0), tcpi_busy_time, tcpi_rwnd_limited,
    // tcpi_sndbuf_limited.
    u64s(
        &mut b,
        &[0, info.busy_time, info.rwnd_limited, info.sndbuf_limited],
    );
    // tcpi_delivered, tcpi_delivered_ce (not counted: 0).
    u32s(&mut b, &[info.delivered, 0]);
    u64s(&mut b, &[info.bytes_sent, info.bytes_retrans]);
    u32s(
        &mut b,
        &[
            info.dsack_dups,
            info.reord_seen,
            info.rcv_ooopack,
            info.snd_wnd,
            info.rcv_wnd,
            0, // tcpi_rehash
        ],
    );
    b.extend_from_slice(&info.total_rto.to_ne_bytes());
    // tcpi_total_rto_recoveries (u16), then tcpi_total_rto_time, tcpi_received_ce and the
    // six Accurate ECN byte counters.
    b.extend_from_slice(&0u16.to_ne_bytes());
    u32s(&mut b, &[0; 8]);
    // `__u32 tcpi_ecn_mode:2, tcpi_accecn_opt_seen:2, tcpi_accecn_fail_mode:4,
    // tcpi_options2:24`: ECN mode 1 (RFC 3168) when negotiated, else 0 (disabled).
    u32s(&mut b, &[u32::from(info.options & 8 != 0)]);
    debug_assert_eq!(b.len(), LEN);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_u32(b: &[u8], off: usize) -> u32 {
        u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
    }
    fn at_u64(b: &[u8], off: usize) -> u64 {
        u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
    }

    /// Offsets from Linux's struct (pahole of include/uapi/linux/tcp.h).
    #[test]
    fn fields_sit_at_linux_offsets() {
        let info = TcpInfo {
            state: 1,
            ca_state: 3,
            snd_wscale: 7,
            rcv_wscale: 8,
            rto: 204_000,
            snd_mss: 1448,
            unacked: 10,
            rtt: 1234,
            snd_cwnd: 7,
            total_retrans: 5,
            bytes_acked: 1 << 33,
            segs_out: 77,
            min_rtt: 999,
            bytes_retrans: 4344,
            snd_wnd: 65535,
            rcv_wnd: 4242,
            total_rto: 2,
            ..TcpInfo::default()
        };
        let b = encode(&info);
        assert_eq!(b.len(), LEN);
        assert_eq!((b[0], b[1], b[6]), (1, 3, 0x87));
        assert_eq!(at_u32(&b, 8), 204_000);
        assert_eq!(at_u32(&b, 16), 1448);
        assert_eq!(at_u32(&b, 24), 10);
        assert_eq!(at_u32(&b, 68), 1234);
        assert_eq!(at_u32(&b, 80), 7);
        assert_eq!(at_u32(&b, 100), 5);
        assert_eq!(at_u64(&b, 112), u64::MAX);
        assert_eq!(at_u64(&b, 120), 1 << 33);
        assert_eq!(at_u32(&b, 136), 77);
        assert_eq!(at_u32(&b, 148), 999);
        assert_eq!(at_u64(&b, 208), 4344);
        assert_eq!(at_u32(&b, 228), 65535);
        assert_eq!(at_u32(&b, 232), 4242);
        assert_eq!(u16::from_ne_bytes([b[240], b[241]]), 2);
        assert_eq!(at_u32(&b, 276) & 3, 0, "tcpi_ecn_mode: disabled");
    }
}
