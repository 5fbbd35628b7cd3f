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
pub(crate) const SOF_TX_SOFTWARE: u32 = 1 << 1;
pub(crate) const SOF_OPT_ID: u32 = 1 << 7;
pub(crate) const SOF_TX_SCHED: u32 = 1 << 8;
pub(crate) const SOF_TX_ACK: u32 = 1 << 9;
pub(crate) const SOF_OPT_TSONLY: u32 = 1 << 11;
/// SOF_TIMESTAMPING_TX_RECORD_MASK's software part: a send asks for transmit timestamps.
const SOF_TX_RECORD: u32 = SOF_TX_SOFTWARE | SOF_TX_SCHED | SOF_TX_ACK;
/// The flags netfold takes: receive timestamps and their reporting (hardware ones are never
/// produced: no device here stamps frames), and software transmit timestamps of TCP sends.
pub(crate) const SOF_SUPPORTED: u32 = SOF_RX_HARDWARE
    | SOF_RX_SOFTWARE
    | SOF_SOFTWARE
    | SOF_RAW_HARDWARE
    | SOF_OPT_RX_FILTER
    | SOF_TX_RECORD
    | SOF_OPT_ID
    | SOF_OPT_TSONLY;
/// linux/errqueue.h: SCM_TSTAMP_SND, SCM_TSTAMP_SCHED, SCM_TSTAMP_ACK (ee_info).
pub(crate) const SCM_TSTAMP_SND: u32 = 0;
pub(crate) const SCM_TSTAMP_SCHED: u32 = 1;
pub(crate) const SCM_TSTAMP_ACK: u32 = 2;
/// Most transmit timestamp notifications queued per socket (Linux bounds the error queue by
/// the receive buffer): past it new ones are dropped.
const MAX_TX_NOTES: usize = 4096;

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
    if st.tx_stamping {
        tx_sweep(st, now);
    }
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

// ---- Transmit timestamps -----------------------------------------------------------------
//
// `Documentation/networking/timestamping.rst`, as Linux gives them for TCP: a send on a socket
// whose SO_TIMESTAMPING holds SOF_TIMESTAMPING_TX_SCHED, TX_SOFTWARE or TX_ACK asks for
// timestamps of its last byte (Linux `tcp_tx_timestamp`, which marks the send's last skb with
// `tskey` = that byte's sequence number). The stack keeps no per-byte send times, so, as for
// receive timestamps, the engine samples: after every poll that did work it compares each
// asked-for byte with SND.MAX and SND.UNA. The first poll after which the byte has been sent
// queues SCM_TSTAMP_SCHED and SCM_TSTAMP_SND (Linux stamps them when the segment enters the
// queueing layer and when the device takes it; here both are the poll that sent it, and a
// retransmission is not stamped again), the first after which it is acknowledged queues
// SCM_TSTAMP_ACK. With SOF_TIMESTAMPING_OPT_ID, ee_data is the byte's number counted from
// SND.UNA when the option was turned on (Linux `sk_tskey`), else 0.

/// One byte a send asked timestamps for.
#[derive(Debug, Clone, Copy)]
struct TxReq {
    /// Its sequence number.
    seq: u32,
    /// The SOF_TIMESTAMPING_TX_* flags of the send.
    flags: u32,
    /// SCHED/SND are queued.
    sent: bool,
}

/// One notification on the error queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxNote {
    /// SCM_TSTAMP_SND, SCM_TSTAMP_SCHED or SCM_TSTAMP_ACK.
    pub(crate) kind: u32,
    /// ee_data.
    pub(crate) key: u32,
    pub(crate) at: Instant,
}

/// One socket's transmit timestamp state, made by the first send that asks.
#[derive(Debug, Default)]
pub(crate) struct TxStamps {
    /// `sk_tskey`: the sequence number OPT_ID counts from.
    pub(crate) base: u32,
    reqs: VecDeque<TxReq>,
    notes: VecDeque<TxNote>,
}

impl TxStamps {
    /// A notification is waiting (POLLERR).
    pub(crate) fn pending(&self) -> bool {
        !self.notes.is_empty()
    }
}

/// `a` before `b` in sequence space.
fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// setsockopt(SO_TIMESTAMPING) on socket `fd`, from flags `old` to `new`: OPT_ID turned on
/// starts the byte count at SND.UNA, as Linux `sock_set_timestamping` (which refuses it,
/// EINVAL, on a TCP socket that is closed or listening).
pub(crate) fn set_tx_flags(st: &mut State, fd: i32, old: u32, new: u32) -> Result<(), i32> {
    if new & SOF_OPT_ID == 0 || old & SOF_OPT_ID != 0 {
        return Ok(());
    }
    let s = st.fds.get_mut(fd)?;
    let una = match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => match st.stack.tcp().send_seqs(ts.handle()) {
            Ok((una, _, _)) => una,
            Err(_) => return Err(libc::EINVAL),
        },
        Kind::Tcp(_) => return Err(libc::EINVAL),
        _ => 0,
    };
    s.tx_stamps.get_or_insert_with(Default::default).base = una;
    Ok(())
}

/// After a send on TCP socket `fd` queued at least one byte: its last byte gets the
/// timestamps the socket's flags ask for.
pub(crate) fn on_send(st: &mut State, fd: i32) {
    let Ok(s) = st.fds.get_mut(fd) else {
        return;
    };
    let flags = s.opts.tsflags & SOF_TX_RECORD;
    if flags == 0 {
        return;
    }
    let Kind::Tcp(Tcp::Stream(ts)) = &s.kind else {
        return;
    };
    let Ok((_, _, end)) = st.stack.tcp().send_seqs(ts.handle()) else {
        return;
    };
    let tx = s.tx_stamps.get_or_insert_with(Default::default);
    tx.reqs.push_back(TxReq {
        seq: end.wrapping_sub(1),
        flags,
        sent: false,
    });
    st.tx_stamping = true;
}

/// Queues the notifications every socket's asked-for bytes earned by `now`.
fn tx_sweep(st: &mut State, now: Instant) {
    let State { stack, fds, .. } = st;
    for s in fds.iter_mut() {
        let Some(tx) = s.tx_stamps.as_deref_mut() else {
            continue;
        };
        if tx.reqs.is_empty() {
            continue;
        }
        let opt_id = s.opts.tsflags & SOF_OPT_ID != 0;
        let seqs = match &s.kind {
            Kind::Tcp(Tcp::Stream(ts)) => stack.tcp().send_seqs(ts.handle()).ok(),
            _ => None,
        };
        let Some((una, max, _)) = seqs else {
            tx.reqs.clear();
            continue;
        };
        let TxStamps { base, reqs, notes } = tx;
        let mut push = |kind, seq: u32| {
            if notes.len() < MAX_TX_NOTES {
                let key = if opt_id { seq.wrapping_sub(*base) } else { 0 };
                notes.push_back(TxNote { kind, key, at: now });
            }
        };
        for r in reqs.iter_mut() {
            if !r.sent && seq_lt(r.seq, max) {
                r.sent = true;
                if r.flags & SOF_TX_SCHED != 0 {
                    push(SCM_TSTAMP_SCHED, r.seq);
                }
                if r.flags & SOF_TX_SOFTWARE != 0 {
                    push(SCM_TSTAMP_SND, r.seq);
                }
            }
        }
        while let Some(r) = reqs.front().copied() {
            if !(r.sent && seq_lt(r.seq, una)) {
                break;
            }
            reqs.pop_front();
            if r.flags & SOF_TX_ACK != 0 {
                push(SCM_TSTAMP_ACK, r.seq);
            }
        }
    }
}

/// The oldest transmit timestamp notification of socket `fd`, with the socket's flags.
pub(crate) fn take_tx_note(st: &mut State, fd: i32) -> Option<(TxNote, u32)> {
    let s = st.fds.get_mut(fd).ok()?;
    let flags = s.opts.tsflags;
    let note = s.tx_stamps.as_deref_mut()?.notes.pop_front()?;
    Some((note, flags))
}

/// The SCM_TIMESTAMPING data of a transmit notification: ts[0] the software time when the
/// socket reports software timestamps (SOF_TIMESTAMPING_SOFTWARE), else nothing.
pub(crate) fn tx_cmsg(
    e: &crate::engine::Engine,
    now: Instant,
    note: &TxNote,
    flags: u32,
) -> Option<Vec<u8>> {
    if flags & SOF_SOFTWARE == 0 {
        return None;
    }
    let (sec, nsec) = e.wall_time(now, note.at);
    let mut v = timespec(sec, nsec);
    v.resize(3 * v.len(), 0);
    Some(v)
}
