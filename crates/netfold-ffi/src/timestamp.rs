//! Software receive timestamps for TCP sockets (socket(7) SO_TIMESTAMP, SO_TIMESTAMPNS;
//! `Documentation/networking/timestamping.rst` SO_TIMESTAMPING with
//! SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE): recvmsg reports the time the
//! last byte it returned arrived, as Linux's `tcp_recv_timestamp` reports the receive time of
//! the last skb the call read.
//!
//! The stack keeps no per-segment arrival times, so the engine samples instead: after every
//! poll that did work it notes, for each socket that asked for timestamps, how many in-order
//! bytes the connection has received by then (`tcpi_bytes_received`) and the poll's time, the
//! moment those frames were processed (Linux stamps a packet when the device hands it to the
//! stack, `netif_receive_skb`). A byte's arrival time is that of the first sample that counts
//! it. Two differences from Linux follow: bytes that arrived out of order are stamped when the
//! hole before them filled (Linux keeps each skb's own time), and frames of one poll share
//! its time.

use crate::engine::State;
use crate::fd::{Kind, Tcp};
use netfold_core::time::Instant;
use std::collections::VecDeque;

/// SOF_TIMESTAMPING_* bits (linux/net_tstamp.h).
pub(crate) const SOF_RX_HARDWARE: u32 = 1 << 2;
pub(crate) const SOF_RX_SOFTWARE: u32 = 1 << 3;
pub(crate) const SOF_SOFTWARE: u32 = 1 << 4;
pub(crate) const SOF_RAW_HARDWARE: u32 = 1 << 6;
pub(crate) const SOF_OPT_RX_FILTER: u32 = 1 << 17;
/// The flags netfold takes: receive timestamps and their reporting (hardware ones are never
/// produced: no device here stamps frames). Transmit timestamps are not offered.
pub(crate) const SOF_SUPPORTED: u32 =
    SOF_RX_HARDWARE | SOF_RX_SOFTWARE | SOF_SOFTWARE | SOF_RAW_HARDWARE | SOF_OPT_RX_FILTER;

/// Most samples kept per socket: past it the oldest goes, and its bytes take the next one's
/// (later) time.
const MAX_SAMPLES: usize = 4096;

/// One socket's arrival samples.
#[derive(Debug, Default)]
pub(crate) struct RxStamps {
    /// (in-order bytes received by then, the poll's time), oldest first.
    samples: VecDeque<(u64, Instant)>,
    seen: u64,
}

/// What the socket asked for (`Opts`): whether arrival times must be recorded.
pub(crate) fn wanted(o: &crate::fd::Opts) -> bool {
    o.rcvtstamp || o.tsflags & SOF_RX_SOFTWARE != 0
}

/// After a poll that did work at `now`: samples every socket that asked for timestamps.
pub(crate) fn after_poll(st: &mut State, now: Instant) {
    if !st.rx_stamping {
        return;
    }
    let State { stack, fds, .. } = st;
    for s in fds.iter_mut() {
        let Some(rx) = s.rx_stamps.as_deref_mut() else {
            continue;
        };
        let Kind::Tcp(Tcp::Stream(ts)) = &s.kind else {
            continue;
        };
        let Ok(info) = stack.tcp().tcp_info(ts.handle(), now) else {
            continue;
        };
        if info.bytes_received > rx.seen {
            rx.seen = info.bytes_received;
            if rx.samples.len() >= MAX_SAMPLES {
                rx.samples.pop_front();
            }
            rx.samples.push_back((info.bytes_received, now));
        }
    }
}

impl RxStamps {
    /// The arrival time of stream byte `last` (0-based count of in-order bytes), then forgets
    /// the samples of bytes before `consumed` (read for good).
    pub(crate) fn stamp(&mut self, last: u64, consumed: u64) -> Option<Instant> {
        let t = self
            .samples
            .iter()
            .find(|(cum, _)| *cum > last)
            .map(|&(_, t)| t);
        while self
            .samples
            .front()
            .is_some_and(|(cum, _)| *cum <= consumed)
        {
            self.samples.pop_front();
        }
        t
    }
}

/// Starts (or stops) sampling for socket `fd` as its options now ask; data already received
/// is stamped `now` (an accepted connection's first bytes came before it could be sampled).
pub(crate) fn enable(st: &mut State, fd: i32, now: Instant) {
    let Ok(s) = st.fds.get_mut(fd) else {
        return;
    };
    if !wanted(&s.opts) {
        s.rx_stamps = None;
        return;
    }
    if s.rx_stamps.is_some() {
        return;
    }
    let mut rx = RxStamps::default();
    if let Kind::Tcp(Tcp::Stream(ts)) = &s.kind {
        if let Ok(info) = st.stack.tcp().tcp_info(ts.handle(), now) {
            rx.seen = info.bytes_received;
            if rx.seen > 0 {
                rx.samples.push_back((rx.seen, now));
            }
        }
    }
    s.rx_stamps = Some(Box::new(rx));
    st.rx_stamping = true;
}

/// The control messages a read of `n` bytes from TCP socket `fd` gets (Linux
/// `tcp_recv_timestamp`): (level, type, data), in Linux's order. `peek`: the bytes stay
/// queued.
pub(crate) fn for_read(
    e: &crate::engine::Engine,
    fd: i32,
    n: usize,
    peek: bool,
) -> Vec<(i32, i32, Vec<u8>)> {
    let mut out = Vec::new();
    if n == 0 {
        return out;
    }
    let mut g = e.lock();
    let now = e.now(&g);
    let st = &mut *g;
    let Ok(s) = st.fds.get_mut(fd) else {
        return out;
    };
    let o = s.opts;
    let (Some(rx), Kind::Tcp(Tcp::Stream(ts))) = (s.rx_stamps.as_deref_mut(), &s.kind) else {
        return out;
    };
    let tcp = st.stack.tcp();
    let (Ok(info), Ok(queued)) = (tcp.tcp_info(ts.handle(), now), tcp.recv_queue(ts.handle()))
    else {
        return out;
    };
    let consumed = info.bytes_received.saturating_sub(queued as u64);
    let last = if peek {
        consumed + n as u64 - 1
    } else {
        consumed.saturating_sub(1)
    };
    let Some(t) = rx.stamp(last, consumed) else {
        return out;
    };
    let (sec, nsec) = e.wall_time(now, t);
    if o.rcvtstamp {
        if o.rcvtstampns {
            out.push((libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, timespec(sec, nsec)));
        } else {
            let mut v = Vec::with_capacity(16);
            v.extend_from_slice(&sec.to_ne_bytes());
            v.extend_from_slice(&(nsec / 1000).to_ne_bytes());
            out.push((libc::SOL_SOCKET, libc::SCM_TIMESTAMP, v));
        }
    }
    if o.tsflags & SOF_SOFTWARE != 0
        && (o.tsflags & SOF_RX_SOFTWARE != 0 || o.tsflags & SOF_OPT_RX_FILTER == 0)
    {
        // struct scm_timestamping: ts[0] software, ts[1] deprecated, ts[2] hardware.
        let mut v = timespec(sec, nsec);
        v.resize(3 * v.len(), 0);
        out.push((libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, v));
    }
    out
}

/// A struct timespec (64-bit time_t and long, as on x86_64 and aarch64 Linux).
fn timespec(sec: i64, nsec: i64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&sec.to_ne_bytes());
    v.extend_from_slice(&nsec.to_ne_bytes());
    v
}
