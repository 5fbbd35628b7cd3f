//! The TCP engine (RFC 9293 and friends), sans-IO.
//!
//! CONTRACT (the iface layer and the socket API are written against exactly this surface; the
//! TCP implementation may add to it but must not change these signatures without updating
//! callers):
//!
//! - Addresses are `std::net::IpAddr` / `SocketAddr`, IPv4 or IPv6 (see "Dual stack" below).
//! - [`TcpLayer::input`] takes one received segment, an [`RxSegment`]: its addresses, header,
//!   payload (one slice, or a GRO train's slices) and IP ECN field. It demultiplexes it to a
//!   connection or listener and updates state. Replies it wants sent (ACKs, RSTs, challenge
//!   ACKs, SYN-ACKs) are queued internally and leave through the next [`TcpLayer::output`].
//!   The IP checksum has been verified by the caller; the TCP checksum either too, or it is
//!   still open ([`RxSegment::with_pending`]): per segment the caller has summed
//!   pseudo-header and header only, and the layer completes the sum in the copy that places
//!   the payload (into a posted read or the receive ring, `place.rs`), processing the
//!   segment only if it verifies; what the checks came to is returned for the caller's
//!   counters.
//! - [`TcpLayer::output`] calls `emit` for every segment that is due now, in order. `emit`
//!   returns `false` when the device/queue has no room; the layer then stops and retries on the
//!   next call (nothing is lost). The payload is given as up to two slices (a ring buffer may
//!   wrap) so the caller can copy it straight into a packet buffer and checksum in the same
//!   pass.
//! - [`TcpLayer::poll_at`] is the earliest time any timer (RTO, delayed ACK, persist,
//!   keepalive, TIME_WAIT) needs `output` to run again.
//! - Handles are small copyable ids; a stale handle gives `Error::InvalidHandle`, never a panic.
//!
//! Driving the layer (what `iface` does each poll):
//!
//! ```
//! use netfold::tcp::{Config, TcpLayer};
//! use netfold::time::Instant;
//! use std::net::{Ipv4Addr, SocketAddrV4};
//!
//! let mut tcp = TcpLayer::new(netfold::tcp::Secret::fixed_for_tests([7; 16]));
//! let now = Instant::from_millis(1);
//! let local = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 0);
//! let remote = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 80);
//! let h = tcp.connect(now, local, remote, Config::default()).unwrap();
//! // 1. for each received, checksum-verified segment:
//! //    tcp.input(now, RxSegment::new(src, dst, &repr, &[payload]));
//! // 2. then drain everything due; `emit` copies header + payload slices into a packet:
//! let mut sent = 0;
//! tcp.output(now, &mut |seg| {
//!     assert!(seg.repr.flags.syn());
//!     sent += 1;
//!     true // false = device full: the same segment is offered again next time
//! });
//! assert_eq!(sent, 1);
//! // 3. sleep until tcp.poll_at() (here: the SYN's retransmission timeout).
//! assert_eq!(tcp.poll_at(), Some(Instant::from_millis(1001)));
//! # let _ = h;
//! ```
//!
//! DUAL STACK (Linux semantics, `net.ipv6.bindv6only = 0`): every connection runs in one
//! family and is keyed by its wire addresses; an IPv4 connection owned by an IPv6 socket (one
//! accepted by a `[::]:p` listener without [`Config::v6only`], or connected to a v4-mapped
//! `[::ffff:a.b.c.d]:p`) reports its addresses v4-mapped from `local_addr`/`peer_addr`,
//! as Linux and std do. The rules for binding are on [`TcpLayer::listen`], for connecting on
//! [`TcpLayer::connect`]. Per family: the MSS ([`Config::mss`] is one user MSS, as Linux's;
//! IPv6 connections are bounded by the IPv6 link's MSS, MTU - 60, RFC 8200 §8.3,
//! [`TcpLayer::set_ipv6_link_mss`]), the default MSS without an option (536 / 1220, RFC 9293 §3.7.1),
//! the PMTU floor, the SYN cookie MSS table (Linux's `msstab` for each family) and the
//! hashes of ISN, timestamps, ephemeral ports and cookies (the IPv4 inputs are unchanged).
//! [`OutSegment`]'s `src`/`dst` tell the IP layer which family to send on.
//!
//! IMPLEMENTATION MAP (split by concern like Linux `net/ipv4/tcp_*.c`):
//!
//! | file          | what                                                                   |
//! |---------------|------------------------------------------------------------------------|
//! | `layer/`      | `TcpLayer`: `table.rs` slots + generations and the 4-tuple map,        |
//! |               | `demux.rs` one `input`, listeners, SYN cookies, ICMP errors;           |
//! |               | `sched.rs` the active list, timer heap and output pass; `api.rs` the   |
//! |               | user calls; `diag.rs` statistics and dumps; `pressure.rs` memory       |
//! | `listener.rs` | bounded SYN queue / accept queue; SYN cookies once the SYN queue is full |
//! | `syncookie.rs`| RFC 4987 §3.6 SYN cookies in Linux's layout (MSS index, TS options)    |
//! | `fastopen.rs` | RFC 7413 TCP Fast Open: cookies, the listener's Fast Open queue        |
//! | `secret.rs`   | the per-stack random key; `ephemeral.rs`: RFC 6056 port selection      |
//! | `conn.rs`     | the TCB (RFC 9293 §3.3.1) made of the parts below, user calls          |
//! | `send/`       | `Sender`: SND.UNA/NXT/MAX/WND, ISS, Eff.snd.MSS, send queue, FIN, PSH  |
//! | `recv/`       | `Receiver`: RCV.NXT, RCV.WND as advertised, IRS, ring, ACK policy      |
//! | `input.rs`    | SEGMENT ARRIVES (§3.10.7): one function per check, RFC 5961, PAWS, ACK |
//! | `predict.rs`  | header prediction: the expected segment of an established connection  |
//! |               | by a short path that ends where SEGMENT ARRIVES would                  |
//! | `output.rs`   | plan-then-commit segment generation, NextSeg (RFC 6675), Nagle/SWS     |
//! | `timers.rs`   | `Timers`: RTO (RFC 6298), TLP (RFC 8985), delayed ACK, persist,        |
//! |               | keepalive, 2MSL                                                        |
//! | `place.rs`    | single-pass receive: payload copied (checksum verified in the copy)    |
//! |               | into a posted read or the ring before the checks; borrowing reads      |
//! | `buffer.rs`   | send ring, receive ring with in-place out-of-order assembler; the      |
//! |               | per-stack `RingCache` that recycles ring storage and charges it to the |
//! |               | stack's socket-buffer budget                                           |
//! | `zerocopy.rs` | `SendQueue` (the send ring plus lent application buffers), zero-copy |
//! |               | send (`Conn::send_zc`) and its completions (Linux `MSG_ZEROCOPY`)      |
//! | `autotune.rs` | receive-buffer auto-tuning (Linux DRS) and send-buffer growth          |
//! | `sack.rs`     | RFC 6675 scoreboard (IsLost, pipe, holes), RFC 2018 block history      |
//! | `rack.rs`     | RACK-TLP loss detection and the tail loss probe (RFC 8985)             |
//! | `dsack.rs`    | D-SACK: reporting duplicates, using reports to undo (RFC 2883, 3708)   |
//! | `cc/`         | `CongestionController` trait, NewReno (RFC 5681), CUBIC (RFC 9438) with |
//! |               | Linux's HyStart; `usage.rs`: was cwnd used (Linux `tcp_cwnd_validate`)  |
//! | `rtt.rs`      | RFC 6298 estimator; `isn.rs`: RFC 6528 ISN with hand-written SipHash    |
//!
//! Choices worth knowing (each is commented where it is implemented):
//! - Slow start counts every acknowledged byte (as Linux does), because batched receivers send
//!   stretch ACKs; RFC 5681 would add at most one SMSS per ACK.
//! - cwnd grows only in a window that used it (RFC 7661 §4.3, RFC 9438 §5.8), measured as
//!   Linux `tcp_is_cwnd_limited` does: a transmit round that ended with cwnd full, or in slow
//!   start cwnd below twice the most in flight in the window; it restarts from the initial
//!   window after an idle RTO (RFC 5681 §4.1). CUBIC's slow start ends early by Linux's
//!   HyStart (ACK train, delay increase).
//! - After an RTO, SND.NXT goes back to SND.UNA (go-back-N) but SACKed ranges are skipped,
//!   except the segment at SND.UNA itself, which goes again even if SACKed (RFC 2018 §8).
//! - Loss detection over SACK is RACK-TLP (RFC 8985, `rack.rs`, Linux's default): run on every
//!   ACK, with the reordering window and timer; what is resent in recovery comes from RACK's
//!   lost marks, so a lost retransmission is resent without waiting for the RTO, and tail
//!   losses get a probe (§7). D-SACK (RFC 2883, `dsack.rs`) is sent for duplicates and undoes
//!   a spurious episode's cwnd cut. Connections without SACK keep RFC 5681/6582.
//! - Several segments processed in one batch still owe one ACK per two full-sized segments
//!   (RFC 5681 §4.2): `input` records bounded ACK snapshots that `output` sends in order;
//!   inside a GRO-merged arrival of up to 16 segments the receiver also ACKs every second
//!   segment, and Linux's quick-ACK mode (`tcp_incr_quickack`) ACKs at once at connection
//!   start, after an idle gap and for old data.
//! - Segments carry at most MSS minus the options in that segment (timestamps, SACK blocks),
//!   except that with [`TcpLayer::set_gso_segs`] > 1 new data outside loss recovery may go
//!   as one GSO super-segment of whole segments (up to 64 KiB) that the caller cuts or hands
//!   to a TSO device; `Stats::segments_out` counts the segments it becomes.
//! - Passive opens take their buffers only when data first goes through them (SYN floods and
//!   idle connections cost only a control block); SYN/SYN-ACK retries are capped at 6/5 (Linux defaults); an orphaned
//!   FIN-WAIT-2 is reaped after `Config::time_wait`. Once a listener's SYN queue is full,
//!   SYNs are answered with SYN cookies (RFC 4987 §3.6, Linux's layout, `syncookie.rs`):
//!   a flood costs no memory and real clients keep connecting
//!   ([`TcpLayer::set_syn_cookies`] turns this off: full queue = dropped SYN).
//! - Acceptability (RFC 9293 §3.10.7.4 first check, RFC 5961 §3) is judged against RCV.WND as
//!   last ANNOUNCED, never the free buffer. In TIME-WAIT only a bare ACK or RST exactly at
//!   RCV.NXT is in window; anything else is answered with an ACK (Linux
//!   `tcp_timewait_state_process`).
//! - A pure window update is sent only after the application read data, when the announced
//!   window was at most half the buffer and the new one is at least twice as large (Linux
//!   `tcp_cleanup_rbuf`); in particular none follows a passive open.
//! - SYN+FIN: dropped by a listener (as Linux), a SYN (FIN ignored) in SYN-SENT.
//! - The send MSS is min(max(peer's MSS option or 536, `Config::min_snd_mss` = 48), ours),
//!   lowered by PMTU; GSO super-segments
//!   are whole multiples of it and carry it as `OutSegment::gso_size`, the size to cut at.
//! - Ring storage is recycled through a per-layer `RingCache`; copies into and out of the
//!   rings use the layer's `CopyMode` (`TcpLayer::set_copy_mode`). No thread-local or
//!   process-wide state.
//! - Replies to invalid segments (challenge ACKs, RFC 5961 §7, and ACKs answering
//!   out-of-window or PAWS-rejected segments without data) are limited to one per
//!   `Config::invalid_ratelimit` (500 ms) per connection, as Linux `tcp_oow_rate_limited`;
//!   a layer-wide limit on challenge ACKs with a random quota per second is off by default
//!   (Linux `tcp_challenge_ack_limit` = `INT_MAX`; `TcpLayer::set_challenge_ack_limit`).
//! - Socket buffers are auto-tuned as in Linux unless the application sets a size
//!   (`Config::recv_buffer`/`send_buffer` non-zero, or SO_RCVBUF/SO_SNDBUF in the C API, which
//!   also reports the value doubled as Linux does). The receive buffer starts at 256 KiB
//!   ([`RECV_BUFFER_INITIAL`]) and once per RTT grows to twice what the application read in
//!   that RTT plus 16 segments (`tcp_rcv_space_adjust`), up to `Config::recv_buffer_max`
//!   (6 MiB, Linux `tcp_rmem[2]`); the send buffer starts at 256 KiB and, when the application
//!   filled it and cwnd is not full, grows to twice cwnd (`tcp_sndbuf_expand`), up to
//!   `Config::send_buffer_max` (4 MiB, `tcp_wmem[2]`). Linux starts at 128 KiB / 16 KiB of
//!   accounted memory (about 64 KiB of window); netfold keeps its former 256 KiB because its
//!   rings carry no sk_buff overhead and the low-RTT in-memory link and short connections
//!   then behave as before. Sizes double along a ladder (initial x 2^k, capped at the maximum)
//!   so that recycled rings fit other connections; rings grow by moving their contents,
//!   out-of-order data included, into a bigger ring, and never shrink. Every ring byte is
//!   charged to the stack's budget (`StackConfig::tcp_buffer_budget`, default 1 GiB, the order
//!   of Linux's `tcp_mem[2]`); growth beyond it is refused and counted
//!   (`Stats::buffer_budget_refusals`), never an allocation failure. The window scale is chosen
//!   from the MAXIMUM buffer (RFC 7323 §2.3, Linux `tcp_select_initial_window`): 7 for 6 MiB.
//! - ECN (RFC 3168): negotiated when the peer's SYN asks ([`EcnMode::Passive`], the default,
//!   as Linux `tcp_ecn = 2`) or also asked for ([`EcnMode::On`]). New data goes ECT(0), never
//!   SYNs, pure ACKs, retransmissions or probes (§6.1.1, §6.1.5, §6.1.6); a CE mark is
//!   echoed with ECE until a CWR arrives; an ECE reduces cwnd through the congestion
//!   controller's loss hook at most once per window of data, and the next new data segment
//!   carries CWR. SYN cookies carry the ECN bit in the timestamp. The IP layer hands the CE
//!   mark in with [`RxSegment::with_ecn`] and sets ECT from [`OutSegment::ecn`].
//! - TCP Fast Open (RFC 7413, `fastopen.rs`): a listener with a Fast Open queue
//!   ([`Config::fastopen_queue`]) takes a SYN with a valid cookie and data as a connection
//!   at once, its data readable before the handshake completes; cookies are Linux's
//!   (SipHash of the addresses under a key derived from the stack secret, or set).
//!   [`TcpLayer::connect_fastopen`] opens with the cookie a server gave before, data in the
//!   SYN.
//! - Not implemented: urgent data (URG is ignored), data carried
//!   on a SYN other than by Fast Open (dropped, the peer retransmits it), RFC 6191 TIME-WAIT reuse by SYN, non-zero
//!   `linger` (close never blocks in a sans-IO core), shrinking buffers or changing an
//!   explicit buffer size on a live connection.

mod autotune;
pub mod buffer;
pub mod cc;
mod chrono;
mod conn;
mod dsack;
pub mod ephemeral;
pub mod fastopen;
mod frames;
pub mod info;
mod input;
pub mod isn;
mod layer;
mod listener;
pub(crate) mod output;
pub mod payload;
mod place;
mod predict;
mod rack;
mod recv;
pub mod rtt;
pub mod sack;
pub mod secret;
mod send;
pub mod seq;
pub mod syncookie;
mod timers;
pub mod zerocopy;

pub use info::TcpInfo;
pub use send::MAX_RECORD_ENDS;

/// Per-call send flags ([`TcpLayer::send_with`]), the MSG_* flags of send(2) that change how
/// TCP cuts segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// MSG_MORE: more data follows; a short tail is held as under TCP_CORK until the next
    /// send without this flag or the next ACK (Linux `tcp_push` with `TCP_NAGLE_CORK`), and
    /// gets no PSH.
    pub more: bool,
    /// MSG_EOR: the data ends a record; bytes of later sends never share a segment with it
    /// (Linux `TCP_SKB_CB(skb)->eor`), and its last segment carries PSH.
    pub eor: bool,
}
pub(crate) use layer::{mapped_addr, wire_addr};
pub use layer::{
    ConnInfo, RackInfo, RxSegment, TcpLayer, DEFAULT_MAX_ORPHANS, PRESSURE_RCVBUF, PRESSURE_SNDBUF,
    PRESSURE_STALL_PROBES,
};
pub use payload::Payload;
pub use place::{PostedRead, RxCheck};
pub use secret::Secret;
pub use zerocopy::{ZcCompletion, ZcCompletions, ZcOutstanding, ZcSend, ZC_MAX_ENTRIES};

use crate::time::Duration;
pub use crate::wire::ipv4::Ecn;
use crate::wire::tcp::TcpRepr;
use crate::wire::IpAddr;

/// Why a TCP operation failed. Maps onto `std::io::ErrorKind` in the socket API.
///
/// One enum serves every operation; what each [`TcpLayer`] call can return:
///
/// | operation                    | errors                                                     |
/// |------------------------------|------------------------------------------------------------|
/// | `connect`                    | `InvalidInput` (port 0, unspecified/broadcast/multicast address, families differ), `AddrInUse` (4-tuple taken), `AddrNotAvailable` (no ephemeral port), `NetworkUnreachable` (v4-mapped peer with `v6only`) |
/// | `listen`                     | `InvalidInput` (port 0, backlog 0, v4-mapped address with `v6only`), `AddrInUse` |
/// | `accept`                     | `InvalidHandle`, `WouldBlock` (queue empty)               |
/// | `send`                       | `InvalidHandle`, `WouldBlock` (ring full), `NotConnected` (CLOSED/LISTEN), `BrokenPipe` (after shutdown/FIN), or the error that ended the connection: `ConnectionRefused`, `ConnectionReset`, `TimedOut` |
/// | `recv`                       | `InvalidHandle`, `WouldBlock` (nothing yet), `NotConnected` (closed without data or FIN), or the ending error once (`ConnectionRefused`, `ConnectionReset`, `TimedOut`) |
/// | `shutdown_write`             | `InvalidHandle`, `NotConnected`, or the ending error       |
/// | `peek`                       | as `recv`; the ending error is reported but not consumed   |
/// | `close`, `abort`, queries    | `InvalidHandle`                                            |
/// | `take_error`                 | `InvalidHandle` (returns the ending error as `Ok(Some)`)   |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// Nothing can be done now; retry after the stack has been polled.
    WouldBlock,
    /// The handle does not name a live socket.
    InvalidHandle,
    /// The peer answered our SYN with RST.
    ConnectionRefused,
    /// The connection was reset by the peer (or aborted).
    ConnectionReset,
    /// Retransmissions or keepalives ran out (RFC 9293 §3.8.3 R2).
    TimedOut,
    /// The operation needs an established connection.
    NotConnected,
    /// Sending after our side was shut down.
    BrokenPipe,
    /// The local address/port is already bound.
    AddrInUse,
    /// No ephemeral port left.
    AddrNotAvailable,
    /// Invalid argument (e.g. port 0 for listen, backlog 0).
    InvalidInput,
    /// The next hop never answered ARP while the connection was opening (Linux reports the
    /// neighbour failure as EHOSTUNREACH).
    HostUnreachable,
    /// No route to the peer's network: an IPv6 peer while the stack has no IPv6 source
    /// address, or a v4-mapped peer of a v6-only socket (Linux: ENETUNREACH).
    NetworkUnreachable,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            Error::WouldBlock => "operation would block",
            Error::InvalidHandle => "invalid or stale socket handle",
            Error::ConnectionRefused => "connection refused",
            Error::ConnectionReset => "connection reset",
            Error::TimedOut => "connection timed out",
            Error::NotConnected => "not connected",
            Error::BrokenPipe => "broken pipe (sending after shutdown)",
            Error::AddrInUse => "address in use",
            Error::AddrNotAvailable => "no ephemeral port available",
            Error::InvalidInput => "invalid argument",
            Error::HostUnreachable => "no route to host",
            Error::NetworkUnreachable => "network is unreachable",
        };
        f.write_str(s)
    }
}

impl std::error::Error for Error {}

/// Which congestion control algorithm a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CongestionControl {
    /// RFC 5681 + RFC 6582.
    NewReno,
    /// RFC 9438.
    #[default]
    Cubic,
}

/// Explicit Congestion Notification (RFC 3168) for a connection: whether we ask for it in our
/// SYN and whether we accept a peer's request. The default follows Linux's `tcp_ecn = 2`:
/// accept when the peer asks, never ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EcnMode {
    /// No ECN: our SYN does not ask, a peer's ECN-setup SYN is answered without ECE.
    Off,
    /// Accept when asked (an ECN-setup SYN gets ECE on the SYN-ACK), do not ask (Linux
    /// `tcp_ecn = 2`, its default).
    #[default]
    Passive,
    /// Ask (ECE and CWR on our SYN) and accept (Linux `tcp_ecn = 1`).
    On,
}

/// Per-socket settings (set before connect/listen; listeners pass theirs to accepted sockets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Receive buffer bytes (the window we can advertise, RFC 7323 scaled). `0` (the
    /// default) = AUTO-TUNED: starts at [`RECV_BUFFER_INITIAL`] and grows with what the
    /// application reads per RTT up to `recv_buffer_max` (Linux DRS). Any other value fixes
    /// the buffer at that size and turns auto-tuning off (as SO_RCVBUF does on Linux).
    pub recv_buffer: usize,
    /// Send buffer bytes. `0` (the default) = grows with cwnd from [`SEND_BUFFER_INITIAL`] up to
    /// `send_buffer_max` (Linux `tcp_sndbuf_expand`); any other value fixes it (SO_SNDBUF).
    pub send_buffer: usize,
    /// Ceiling of receive-buffer auto-tuning (Linux `tcp_rmem[2]`, 6 MiB); the window scale
    /// is chosen so that this much can be announced (RFC 7323 §2.3).
    pub recv_buffer_max: usize,
    /// Ceiling of send-buffer growth (Linux `tcp_wmem[2]`, 4 MiB).
    pub send_buffer_max: usize,
    /// Largest MSS we announce / use, before PMTU; the caller derives it from the MTU
    /// (MTU - 40, `Stack::tcp_mss`) or sets its own (TCP_MAXSEG). One value for both
    /// families, as Linux's user MSS: an IPv4 connection uses it as given, an IPv6 one at
    /// most the IPv6 link's MSS (MTU - 60, RFC 8200 §8.3; `TcpLayer::set_ipv6_link_mss`,
    /// set by the stack), so the MTU-derived default becomes MTU - 60 over IPv6 and a
    /// smaller user value applies to both families unchanged.
    pub mss: u16,
    /// Disable Nagle (TCP_NODELAY).
    pub nodelay: bool,
    /// TCP_CORK (tcp(7)): "If set, don't send out partial frames. All queued partial frames
    /// are sent when the option is cleared again", with "a ceiling of 200 milliseconds on
    /// the time for which output is corked": a held tail leaves when nothing else is in
    /// flight and the persist timer (at least the 200 ms minimum RTO) fires, as Linux's
    /// probe timer sends it (`tcp_write_wakeup`). A FIN is never held.
    pub cork: bool,
    /// IP_TOS / IPV6_TCLASS (ip(7), ipv6(7)): the DSCP bits every segment of the connection
    /// carries (the two ECN bits are ignored here: ECN sets them, RFC 3168 §6.1.1, as Linux
    /// keeps them out of a stream socket's `inet->tos`). 0 by default; a connection accepted
    /// from a listener starts with the listener's value, as Linux's accepted sockets inherit
    /// it.
    pub tos: u8,
    pub congestion: CongestionControl,
    pub window_scaling: bool,
    pub timestamps: bool,
    pub sack: bool,
    /// 2*MSL, RFC 9293 §3.6.1 (configurable because tests and benchmarks cycle ports fast).
    pub time_wait: Duration,
    /// Keepalive idle time, interval and probe count (RFC 9293 §3.8.4); `None` = off.
    pub keepalive: Option<(Duration, Duration, u32)>,
    /// Delayed-ACK timeout (RFC 9293 §3.8.6.3: < 0.5 s); `None` = ACK every segment.
    pub delayed_ack: Option<Duration>,
    /// Give up after this many consecutive RTO expirations (RFC 9293 §3.8.3 R2).
    pub max_retransmits: u32,
    /// Give up an active open after this many SYN retransmissions (Linux `TCP_SYNCNT`,
    /// default `net.ipv4.tcp_syn_retries` = 6; at most `max_retransmits`).
    pub syn_retries: u32,
    /// RFC 5482 user timeout (Linux TCP_USER_TIMEOUT): when set, retransmission (counted
    /// from the first timer retransmission) or zero-window probing that outlasts it aborts the connection with `TimedOut`, in place
    /// of the `max_retransmits` bound for retransmissions.
    pub user_timeout: Option<Duration>,
    /// Minimum and initial RTO (RFC 6298 §2.1/§2.4).
    pub rto_min: Duration,
    pub rto_initial: Duration,
    /// SO_LINGER: `Some(ZERO)` = close() aborts with RST.
    pub linger: Option<Duration>,
    /// RFC 3168 ECN negotiation (default: accept when asked, as Linux `tcp_ecn = 2`).
    pub ecn: EcnMode,
    /// IPV6_V6ONLY: an IPv6 wildcard listener takes IPv6 only, and a v4-mapped peer or bind
    /// address is refused. Off by default (Linux `net.ipv6.bindv6only = 0`): `[::]:p` takes
    /// IPv4 too. Meaningless for IPv4 sockets.
    pub v6only: bool,
    /// Header prediction (`tcp/predict.rs`): the expected in-order segment of an established
    /// connection takes a short path that does what the full procedure would. On by default;
    /// off only to measure what it saves (`netfold rr --header-prediction off`) and to check
    /// the two paths against each other.
    pub header_prediction: bool,
    /// The least time between two ACKs this connection sends in answer to invalid segments
    /// (Linux `tcp_invalid_ratelimit`, 500 ms): RFC 5961 challenge ACKs (§7: "an ACK
    /// throttling mechanism"), and the duplicate ACKs that answer an out-of-window or PAWS-
    /// rejected segment without data (RFC 9293 §3.10.7.4, RFC 7323 §5.3). One budget for
    /// all of them, as Linux's `last_oow_ack_time`: two confused ends cannot ping-pong ACKs,
    /// and a flood of spoofed segments draws at most one reply per interval. Zero: no limit.
    pub invalid_ratelimit: Duration,
    /// The least send MSS, whatever the peer announces (Linux `tcp_min_snd_mss`, 48, and
    /// never below that: Linux's own bound on the setting). A peer announcing a tiny MSS
    /// (say 1) would otherwise make this end cut everything it sends into tiny segments,
    /// each costing a full header and a trip through both stacks (CVE-2019-11479). As in
    /// Linux `__tcp_mtu_to_mss`, the floor applies to the MSS before TCP options are taken
    /// off each segment: 48 leaves room for the full 40 bytes of options and 8 of data.
    pub min_snd_mss: u16,
    /// TCP Fast Open on a listener (RFC 7413; the C API's `TCP_FASTOPEN`, Linux
    /// `fastopenq.max_qlen`): how many Fast Open connections may wait in SYN-RECEIVED at a
    /// time; 0 (the default) = none, unless [`TcpLayer::set_fastopen`] has
    /// [`fastopen::SERVER_WO_SOCKOPT`]. Meaningless on connections. See [`fastopen`].
    pub fastopen_queue: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            recv_buffer: 0,
            send_buffer: 0,
            recv_buffer_max: RECV_BUFFER_MAX,
            send_buffer_max: SEND_BUFFER_MAX,
            mss: 1460,
            nodelay: false,
            cork: false,
            tos: 0,
            congestion: CongestionControl::Cubic,
            window_scaling: true,
            timestamps: true,
            sack: true,
            time_wait: Duration::from_secs(60),
            keepalive: None,
            delayed_ack: Some(Duration::from_millis(40)),
            max_retransmits: 15,
            syn_retries: 6,
            user_timeout: None,
            rto_min: Duration::from_millis(200),
            rto_initial: Duration::from_secs(1),
            linger: None,
            ecn: EcnMode::Passive,
            v6only: false,
            header_prediction: true,
            invalid_ratelimit: Duration::from_millis(500),
            min_snd_mss: MIN_SND_MSS,
            fastopen_queue: 0,
        }
    }
}

/// Linux `TCP_MIN_SND_MSS`: the default and the least value of [`Config::min_snd_mss`] (the
/// full 40 bytes of TCP options plus 8 bytes of data).
pub const MIN_SND_MSS: u16 = 48;

/// Initial auto-tuned receive buffer. Linux starts at `tcp_rmem[1]` = 128 KiB of which about
/// half is window (the rest covers sk_buff overhead); netfold's rings carry no per-packet
/// overhead, and it keeps the 256 KiB it used before auto-tuning existed so that short
/// connections and the low-RTT in-memory link behave and measure as before.
pub const RECV_BUFFER_INITIAL: usize = 256 * 1024;
/// Initial send buffer. Linux starts at `tcp_wmem[1]` = 16 KiB and expands to 2 x cwnd at
/// once; netfold keeps 256 KiB for the same reason as [`RECV_BUFFER_INITIAL`].
pub const SEND_BUFFER_INITIAL: usize = 256 * 1024;
/// Linux's default `tcp_rmem[2]`: 6 MiB.
pub const RECV_BUFFER_MAX: usize = 6 << 20;
/// The receive space an auto-tuned connection's window scale is chosen for, at least
/// ([`Config::announced_wscale`]): Linux's `tcp_rmem[2]` in the settings of its own TCP test
/// suite (15 MiB), for which Linux announces window scale 8.
pub const WSCALE_SPACE: usize = 15 << 20;
/// Linux's default `tcp_wmem[2]`: 4 MiB.
pub const SEND_BUFFER_MAX: usize = 4 << 20;

impl Config {
    /// The receive buffer is auto-tuned (no explicit size was set).
    pub fn recv_autotune(&self) -> bool {
        self.recv_buffer == 0
    }
    /// The send buffer grows with cwnd (no explicit size was set).
    pub fn send_autotune(&self) -> bool {
        self.send_buffer == 0
    }
    /// The receive buffer a new connection starts with.
    pub fn recv_initial(&self) -> usize {
        let b = if self.recv_autotune() {
            RECV_BUFFER_INITIAL.min(self.recv_buffer_max)
        } else {
            self.recv_buffer
        };
        b.clamp(1, conn::MAX_BUFFER)
    }
    /// The window scale our SYN or SYN-ACK announces (RFC 7323 §2.3), as Linux
    /// `tcp_select_initial_window`: a buffer fixed by the user (SO_RCVBUF, which locks the
    /// window clamp) gets the smallest shift that covers it; an auto-tuned one
    /// `ilog2(max(ceiling, WSCALE_SPACE)) - 15`, so that with the default 6 MiB ceiling netfold
    /// announces 8, as Linux does under the receive-memory limits its own TCP tests run with
    /// (`tcp_rmem[2]` 15 MiB). A larger shift than the ceiling needs costs only window
    /// granularity (256 bytes), and leaves room to raise `recv_buffer_max` later.
    pub fn announced_wscale(&self) -> u8 {
        if self.recv_autotune() {
            let space = self.recv_ceiling().max(WSCALE_SPACE);
            let linux = (space.ilog2().saturating_sub(15)).min(14) as u8;
            // `ilog2` rounds down: never less than what covers the ceiling itself.
            linux.max(conn::wscale_for(self.recv_ceiling()))
        } else {
            conn::wscale_for(self.recv_ceiling())
        }
    }
    /// The largest receive buffer this connection may reach (the window scale covers it).
    pub fn recv_ceiling(&self) -> usize {
        if self.recv_autotune() {
            self.recv_buffer_max
                .clamp(self.recv_initial(), conn::MAX_BUFFER)
        } else {
            self.recv_initial()
        }
    }
    /// The send buffer a new connection starts with.
    pub fn send_initial(&self) -> usize {
        let b = if self.send_autotune() {
            SEND_BUFFER_INITIAL.min(self.send_buffer_max)
        } else {
            self.send_buffer
        };
        b.clamp(1, conn::MAX_BUFFER)
    }
    /// The largest send buffer this connection may reach.
    pub fn send_ceiling(&self) -> usize {
        if self.send_autotune() {
            self.send_buffer_max
                .clamp(self.send_initial(), conn::MAX_BUFFER)
        } else {
            self.send_initial()
        }
    }
}

/// RFC 9293 §3.3.2 connection states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Closed,
    Listen,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

impl State {
    /// Synchronized states in which our side may still have data or a FIN to send or in
    /// flight (RFC 9293 §3.3.2): where data goes out, is retransmitted, probed and its loss
    /// detected. FIN-WAIT-2 and TIME-WAIT have nothing left to send.
    pub fn may_send(self) -> bool {
        matches!(
            self,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        )
    }
}

/// A connection (or listener) handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    pub index: u32,
    pub generation: u32,
}

/// An ICMP error relevant to a TCP connection (RFC 9293 §3.9 / RFC 1122 §4.2.3.9,
/// RFC 1191 for fragmentation-needed, RFC 8201 / RFC 4443 §3.2 for IPv6 Packet Too Big).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcmpError {
    /// Destination unreachable, code 4 (fragmentation needed and DF set), with next-hop MTU;
    /// for an IPv6 connection, ICMPv6 Packet Too Big with its MTU (at most 65535 matters).
    FragNeeded { mtu: u16 },
    /// Port/protocol unreachable ("hard" errors; abort in SYN-SENT, RFC 1122 §4.2.3.9).
    Unreachable { code: u8 },
    /// IPv4 net or host unreachable (codes 0 and 1): soft for a connection (RFC 1122
    /// §4.2.3.9), but it drops a passive connection still in SYN-RECEIVED, as Linux
    /// `tcp_v4_err` → `tcp_req_err` does (the SYN-ACK cannot reach the peer; a retransmitted
    /// SYN makes a new one).
    RouteUnreachable,
    /// Time exceeded and other unreachable codes ("soft" errors: remembered, not fatal).
    Soft,
}

/// One segment to transmit. `payload` is the data: two send-ring slices on the copying path,
/// or a window over the send queue's chunks when application buffers are queued
/// (`zerocopy.rs`).
#[derive(Debug, Clone, Copy)]
pub struct OutSegment<'a> {
    /// Source and destination, both IPv4 or both IPv6: the family the IP layer sends on.
    pub src: IpAddr,
    pub dst: IpAddr,
    pub repr: TcpRepr,
    pub payload: crate::buf::zc::Gather<'a>,
    /// Payload bytes per packet when the segment is larger (a GSO super-segment, see
    /// [`TcpLayer::set_gso_segs`]): the effective send MSS minus this segment's options
    /// (RFC 9293 §3.7.1), like Linux's `gso_size`. Whoever cuts the segment (software GSO or
    /// a TSO device) MUST cut at this size, not at one derived from its own MTU: the peer may
    /// have announced a smaller MSS. Segments no larger than it go whole.
    pub gso_size: u16,
    /// The IP header's ECN field for every packet of this segment (RFC 3168 §6.1.1: ECT(0)
    /// on new data of an ECN connection, Not-ECT on everything else).
    pub ecn: Ecn,
    /// The DSCP bits of the IP header (IPv4 TOS / IPv6 traffic class) for every packet of
    /// this segment: the connection's [`Config::tos`] with its ECN bits cleared.
    pub dscp: u8,
}

/// Counters for the TCP layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub segments_in: u64,
    /// Segments taken by header prediction (`tcp/predict.rs`), of `segments_in`.
    pub predicted: u64,
    pub segments_out: u64,
    pub retransmits_fast: u64,
    pub retransmits_rto: u64,
    pub dup_acks: u64,
    pub sack_blocks_in: u64,
    pub sack_blocks_out: u64,
    pub ooo_bytes_queued: u64,
    pub rst_in: u64,
    pub rst_out: u64,
    pub no_socket: u64,
    /// RFC 5961 challenge ACKs sent (Linux `TCPChallengeACK`).
    pub challenge_acks: u64,
    /// Challenge ACKs not sent because the connection had answered an invalid segment within
    /// `Config::invalid_ratelimit` (Linux `TCPACKSkippedChallenge`).
    pub challenge_acks_skipped_conn: u64,
    /// Challenge ACKs not sent because the layer-wide quota of the second was spent
    /// (`TcpLayer::set_challenge_ack_limit`).
    pub challenge_acks_skipped_global: u64,
    /// ACKs not sent in answer to out-of-window or PAWS-rejected segments without data,
    /// because of the same per-connection limit (Linux `TCPACKSkippedSeq`, `TCPACKSkippedPAWS`).
    pub oow_acks_skipped: u64,
    pub paws_drops: u64,
    pub bad_segments: u64,
    pub backlog_drops: u64,
    /// Out-of-order segments dropped because the assembler's range table was full.
    pub ooo_drops: u64,
    /// Segments carrying data or a FIN that failed the acceptability test (RFC 9293
    /// §3.10.7.4: none of their bytes inside the receive window) and were dropped: beyond
    /// the announced window (`rcv_out_of_window`), or entirely below RCV.NXT, data received
    /// already (`rcv_duplicates`: a retransmission, answered with a D-SACK when SACK is on).
    pub rcv_out_of_window: u64,
    pub rcv_duplicates: u64,
    /// Received payload bytes dropped because the receive ring had no room for them: bytes
    /// beyond the announced window (the window never passes the end of the ring).
    pub rcv_no_room_bytes: u64,
    /// Received payload bytes dropped because they arrived while the window was zero.
    pub rcv_zero_window_bytes: u64,
    /// Replies (RSTs) dropped because the reply queue was full.
    pub rst_dropped: u64,
    /// Looks at the connections because their buffers exceeded the stack's budget, and
    /// connections reset then for holding memory without progress (`set_buffer_budget`).
    pub memory_pressure: u64,
    pub pressure_resets: u64,
    /// Closes answered with a reset because [`TcpLayer::set_max_orphans`] connections were
    /// still finishing (Linux TCPAbortOnMemory).
    pub orphan_resets: u64,
    pub persist_probes: u64,
    pub keepalive_probes: u64,
    /// RFC 8985 tail loss probes sent.
    pub tlp_probes: u64,
    /// Connections ended by retransmission/keepalive/persist timeouts.
    pub timeouts: u64,
    /// SYN-ACKs carrying a SYN cookie, sent because a listener's SYN queue was full (Linux
    /// `SyncookiesSent`).
    pub syncookies_sent: u64,
    /// ACKs that carried a valid cookie and became connections (`SyncookiesRecv`).
    pub syncookies_recv: u64,
    /// ACKs to a listener that had overflowed recently whose cookie did not verify: forged,
    /// too old, or for another key (`SyncookiesFailed`). They are answered with RST.
    pub syncookies_failed: u64,
    /// Receive / send buffers grown by auto-tuning (Linux `TCPRcvSpaceGrow`-like).
    pub rcvbuf_grown: u64,
    pub sndbuf_grown: u64,
    /// Growth steps refused because the stack's socket-buffer budget was exhausted.
    pub buffer_budget_refusals: u64,
    /// Segments of ECN connections that arrived marked CE (RFC 3168; Linux `TCPECNCe`-like).
    pub ecn_ce_in: u64,
    /// cwnd reductions in response to ECE (RFC 3168 §6.1.2, once per window).
    pub ecn_cwnd_reductions: u64,
    /// TCP Fast Open (RFC 7413, [`fastopen`]), Linux's counters: connections created from a
    /// SYN with a valid cookie (or none needed, `TCPFastOpenPassive`); SYNs whose cookie did
    /// not verify (`TCPFastOpenPassiveFail`); SYNs that asked for a cookie
    /// (`TCPFastOpenCookieReqd`); Fast Open SYNs that found the listener's Fast Open queue full
    /// and got the normal handshake (`TCPFastOpenListenOverflow`).
    pub fastopen_passive: u64,
    pub fastopen_passive_fail: u64,
    pub fastopen_cookie_reqd: u64,
    pub fastopen_listen_overflow: u64,

    // Passes over payload bytes made by the engine (the interface counts the
    // ones it makes itself, see `iface::Counters::payload_passes`). Each adds a length per
    // call, never per byte.
    /// Bytes the application handed to `send` (copied) or lent to `send_zc` (not copied) and
    /// the engine took.
    pub app_bytes_sent: u64,
    /// Bytes copied from the application into the send ring (`SendRing::push`).
    pub tx_copy_app: u64,
    /// Bytes the application received: read out of the receive ring, placed straight into a
    /// posted read, or consumed in place by a borrowing read.
    pub app_bytes_received: u64,
    /// Bytes copied from frames into the receive ring (`RecvRing` writes), whether or not the
    /// checksum was verified in that copy.
    pub rx_copy_ring: u64,
    /// Bytes copied from frames straight into a posted read's buffer (one pass, checksum
    /// verified in it when it was still open).
    pub rx_copy_direct: u64,
    /// Bytes copied from the receive ring into the application's buffer (`recv`, and the
    /// ring's backlog when a read is posted).
    pub rx_copy_app: u64,
    /// Bytes the application consumed in place from the receive ring (`recv_in_place`): no
    /// copy.
    pub rx_in_place: u64,
    /// Payload bytes committed while left in the frames they arrived in (frame-level
    /// borrowing read, `frames.rs`): no copy.
    pub rx_frames_held: u64,
    /// Bytes the application took as borrowed frames (`recv_frames`), those copied out of
    /// the ring for it included (counted in `rx_copy_app` too).
    pub rx_frames_read: u64,
}
