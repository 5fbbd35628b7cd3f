//! The tests, written once for any pair of in-memory stacks driven from one thread (netfold and
//! smoltcp): TCP_STREAM, TCP_MAERTS, TCP_RR, TCP_CRR. Each stack supplies a [`MemNet`]: two
//! stacks joined by an in-memory link, with non-blocking socket calls on either side.

use super::clock::Clock;
use super::latency::Histogram;
use super::pattern::{Pattern, Verifier};
use super::udp::{stamp, Pacer, Receiver, UdpStats};
use super::{Measurement, Params, ReadPath, Test};
use std::time::{Duration, Instant as WallInstant};

/// Which end of the link a call acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

pub type BoxErr = Box<dyn std::error::Error>;

/// Two stacks over an in-memory link, polled by the caller.
pub trait MemNet {
    /// A connection on one side.
    type Conn: Copy;

    fn clock(&mut self) -> &mut Clock;
    /// Polls both stacks once at the clock's time; true if either did any work.
    fn poll(&mut self) -> Result<bool, BoxErr>;
    /// Earliest deadline either stack has, if nothing is in flight on the link.
    fn next_deadline(&mut self) -> Option<netfold::time::Instant>;
    /// Both stacks are idle on a real link (frames may be in flight outside them, e.g. in the
    /// link emulator): wait a little for one to arrive or a timer to fall due, and return
    /// true. The default (an in-memory link, nothing in flight elsewhere) returns false, and
    /// the clock fast-forwards to [`MemNet::next_deadline`] instead.
    fn wait_link(&mut self) -> Result<bool, BoxErr> {
        Ok(false)
    }
    fn listen(&mut self, port: u16) -> Result<(), BoxErr>;
    fn connect(&mut self, port: u16) -> Result<Self::Conn, BoxErr>;
    fn accept(&mut self) -> Result<Option<Self::Conn>, BoxErr>;
    /// Ok(true) once the handshake completed on this connection.
    fn established(&mut self, c: Self::Conn) -> Result<bool, BoxErr>;
    /// Bytes taken (0 when the send buffer is full).
    fn write(&mut self, c: Self::Conn, data: &[u8]) -> Result<usize, BoxErr>;
    /// Zero-copy send (`--zerocopy`): lends `data` to the stack; bytes taken (0 when the send
    /// buffer is full). The stack's completions are the implementation's to collect.
    fn write_zc(&mut self, _c: Self::Conn, _data: netfold::buf::ZcBuf) -> Result<usize, BoxErr> {
        Err("--zerocopy is implemented for netfold only".into())
    }
    /// None when nothing is readable now; Some(0) at end of stream.
    fn read(&mut self, c: Self::Conn, buf: &mut [u8]) -> Result<Option<usize>, BoxErr>;
    /// Lends `buf` to the connection as a posted read (single-pass receive); only where
    /// [`MemNet::read_paths`] says so.
    fn post_read(&mut self, _c: Self::Conn, _buf: Vec<u8>) -> Result<(), BoxErr> {
        Err("posted reads are not implemented for this stack".into())
    }
    /// Takes the posted read back: the buffer, and as `read` what it came to.
    fn take_read(&mut self, _c: Self::Conn) -> Result<(Vec<u8>, Option<usize>), BoxErr> {
        Err("posted reads are not implemented for this stack".into())
    }
    /// A borrowing read: `f` is shown the bytes in place and returns how many it consumed;
    /// as `read` otherwise. Only where [`MemNet::read_paths`] says so.
    fn read_in_place(
        &mut self,
        _c: Self::Conn,
        _f: &mut dyn FnMut(&[u8], &[u8]) -> usize,
    ) -> Result<Option<usize>, BoxErr> {
        Err("borrowing reads are not implemented for this stack".into())
    }
    /// Switches the connection to frame reads (see [`MemNet::read_frames`]).
    fn set_borrow_frames(&mut self, _c: Self::Conn) -> Result<(), BoxErr> {
        Err("frame reads are not implemented for this stack".into())
    }
    /// A frame read: `f` is shown each borrowed frame's payload, which is released after it;
    /// as `read` otherwise (the bytes handed out). Only where [`MemNet::read_paths`] says so.
    fn read_frames(
        &mut self,
        _c: Self::Conn,
        _f: &mut dyn FnMut(&[u8]),
    ) -> Result<Option<usize>, BoxErr> {
        Err("frame reads are not implemented for this stack".into())
    }
    /// Whether the stack takes posted and borrowing reads (else every read is a copy).
    fn read_paths(&self) -> bool {
        false
    }
    /// The passes over payload bytes one side's stack has made so far.
    fn payload_passes(&mut self, _side: Side) -> Option<netfold::iface::counters::PayloadPasses> {
        None
    }
    fn shutdown_write(&mut self, c: Self::Conn) -> Result<(), BoxErr>;
    /// Releases the connection (FIN); the stack finishes the close on its own.
    fn close(&mut self, c: Self::Conn) -> Result<(), BoxErr>;
    /// Free resources of connections that have finished closing (smoltcp needs this).
    fn reap(&mut self) {}
    /// UDP_STREAM support: bind a server socket on `port` and a client socket.
    fn udp_open(&mut self, _port: u16) -> Result<(), BoxErr> {
        Err("udp-stream is not implemented for this stack".into())
    }
    /// Client sends one datagram to the server; Ok(false) when its queue is full.
    fn udp_send(&mut self, _data: &[u8]) -> Result<bool, BoxErr> {
        Err("udp-stream is not implemented for this stack".into())
    }
    /// Server receives one datagram; None when nothing is queued.
    fn udp_recv(&mut self, _buf: &mut [u8]) -> Result<Option<usize>, BoxErr> {
        Err("udp-stream is not implemented for this stack".into())
    }
    /// Whether a bulk transfer may end without the sender's FIN once every byte has been
    /// read (see `bulk`). Only for smoltcp, whose lost-FIN defect is documented there; for
    /// netfold a FIN that never arrives is a defect of ours, and the run must say so by
    /// failing on the stall rather than end quietly.
    fn tolerates_lost_fin(&self) -> bool {
        false
    }
    /// Per-run facts to report (counters).
    fn details(&mut self) -> serde_json::Map<String, serde_json::Value> {
        Default::default()
    }
}

/// Give up if nothing moves for this long (wall + skipped clock time).
const STALL: Duration = Duration::from_secs(60);
/// How long a bulk transfer whose bytes have all arrived waits for the sender's FIN before it
/// counts as complete anyway (see `bulk`).
const FIN_WAIT: Duration = Duration::from_secs(1);

/// When the run last moved. The wall time of progress is read lazily, at the first idle step
/// after it, not at every step that worked: a busy TCP_RR step is ~1 us and a clock read
/// (vDSO `clock_gettime`, ~25-50 ns on a VM) per step was a measurable share of it. The
/// stall bound is then counted from one poll later, which does not matter against 60 s.
struct Progress {
    last: Option<WallInstant>,
    skipped_at_last: f64,
}

impl Progress {
    fn new() -> Self {
        Progress {
            last: Some(WallInstant::now()),
            skipped_at_last: 0.0,
        }
    }
    fn made(&mut self, skipped: f64) {
        self.last = None;
        self.skipped_at_last = skipped;
    }
    /// Wall time since the first idle step after the last progress.
    fn idle_for(&mut self) -> Duration {
        let now = WallInstant::now();
        now - *self.last.get_or_insert(now)
    }
}

/// Time as the protocol experienced it: wall time plus any idle time the clock skipped (the
/// harness clock's time; only the skips under a virtual clock). Rates are computed from this,
/// so a run that waited on retransmission timers is not flattered by the fast-forward (for
/// clean runs the two are the same).
struct RunTime {
    t0_ns: u64,
}

impl RunTime {
    fn start<N: MemNet>(net: &mut N) -> Self {
        RunTime {
            t0_ns: net.clock().now_ns(),
        }
    }
    /// Nanoseconds since the start, reading the clock.
    fn ns<N: MemNet>(&self, net: &mut N) -> u64 {
        net.clock().now_ns().saturating_sub(self.t0_ns)
    }
    /// Nanoseconds since the start at the last poll (no clock read: the loops that poll on
    /// every step take their time from the poll, one read per step for both stacks alike).
    fn ns_at_poll<N: MemNet>(&self, net: &mut N) -> u64 {
        net.clock().last_ns().saturating_sub(self.t0_ns)
    }
    fn secs<N: MemNet>(&self, net: &mut N) -> f64 {
        self.ns(net) as f64 / 1e9
    }
    fn past<N: MemNet>(&self, net: &mut N, d: Option<Duration>) -> bool {
        d.is_some_and(|d| u128::from(self.ns(net)) >= d.as_nanos())
    }
    /// [`RunTime::past`] at the last poll.
    fn past_at_poll<N: MemNet>(&self, net: &mut N, d: Option<Duration>) -> bool {
        d.is_some_and(|d| u128::from(self.ns_at_poll(net)) >= d.as_nanos())
    }
}

/// Polls once; when neither stack worked, fast-forwards the clock to the next deadline. Errors
/// out when the run is stuck.
fn step<N: MemNet>(net: &mut N, progressed: bool, prog: &mut Progress) -> Result<(), BoxErr> {
    let worked = net.poll()?;
    if worked || progressed {
        let s = net.clock().skipped_s();
        prog.made(s);
        return Ok(());
    }
    let idle = prog.idle_for();
    let stuck = idle + Duration::from_secs_f64(net.clock().skipped_s() - prog.skipped_at_last);
    if stuck > STALL {
        let d = serde_json::Value::Object(net.details());
        return Err(format!("no progress for 60 s: the transfer is stuck; state: {d}").into());
    }
    if net.wait_link()? {
        return Ok(());
    }
    match net.next_deadline() {
        Some(t) => net.clock().skip_to(t),
        None => {
            if idle > Duration::from_secs(5) {
                let d = serde_json::Value::Object(net.details());
                return Err(format!(
                    "both stacks idle with nothing scheduled: the test cannot finish; state: {d}"
                )
                .into());
            }
        }
    }
    Ok(())
}

fn handshake<N: MemNet>(net: &mut N, port: u16) -> Result<(N::Conn, N::Conn), BoxErr> {
    let c = net.connect(port)?;
    let mut prog = Progress::new();
    let mut server = None;
    loop {
        if server.is_none() {
            server = net.accept()?;
        }
        if let Some(s) = server {
            if net.established(c)? {
                return Ok((c, s));
            }
        }
        step(net, false, &mut prog)?;
    }
}

/// Runs `p.test` on `net`.
pub fn run<N: MemNet>(net: &mut N, p: &Params) -> Result<Measurement, BoxErr> {
    const PORT: u16 = 12865;
    net.listen(PORT)?;
    match p.test {
        Test::Stream => bulk(net, p, PORT, Side::Client),
        Test::Maerts => bulk(net, p, PORT, Side::Server),
        Test::Rr => rr(net, p, PORT),
        Test::Crr => crr(net, p, PORT),
        Test::UdpStream => udp_stream(net, p, PORT),
    }
}

fn bulk<N: MemNet>(
    net: &mut N,
    p: &Params,
    port: u16,
    sender: Side,
) -> Result<Measurement, BoxErr> {
    let (c, s) = handshake(net, port)?;
    let (tx, rx) = if sender == Side::Client {
        (c, s)
    } else {
        (s, c)
    };
    let receiver = match sender {
        Side::Client => Side::Server,
        Side::Server => Side::Client,
    };
    let passes0 = (net.payload_passes(sender), net.payload_passes(receiver));
    let read_path = if net.read_paths() {
        p.read_path
    } else {
        ReadPath::Copy
    };
    let msg = p.send_size.max(1);
    let pattern = Pattern::new(msg.max(p.recv_size));
    let mut verifier = Verifier::new(&pattern);
    let mut buf = vec![0u8; p.recv_size.max(1)];
    let chunk = buf.len();
    if read_path == ReadPath::Posted {
        net.post_read(rx, std::mem::take(&mut buf))?;
    }
    if read_path == ReadPath::Frames {
        net.set_borrow_frames(rx)?;
    }
    let deadline = p.duration.map(Duration::from_secs_f64);
    let total = p.bytes;
    let cpu0 = super::affinity::thread_cpu_seconds();
    let start = RunTime::start(net);
    let (mut sent, mut received) = (0u64, 0u64);
    let mut fin = false;
    let mut eof = false;
    let mut done: Option<(WallInstant, f64)> = None;
    let mut ended = None;
    let mut prog = Progress::new();
    loop {
        let time_up = start.past_at_poll(net, deadline);
        let limit = if time_up {
            sent
        } else {
            total.unwrap_or(u64::MAX)
        };
        let mut moved = false;
        while sent < limit {
            // Whole messages; a partial write keeps its remainder, as a blocking send would.
            let n = ((limit - sent) as usize).min(msg - (sent % msg as u64) as usize);
            let k = if p.zerocopy {
                net.write_zc(tx, pattern.window_zc(sent, n))?
            } else {
                net.write(tx, pattern.window(sent, n))?
            };
            if k == 0 {
                break;
            }
            sent += k as u64;
            moved = true;
        }
        if sent >= limit && !fin {
            net.shutdown_write(tx)?;
            fin = true;
        }
        match read_path {
            ReadPath::Copy => {
                while let Some(n) = net.read(rx, &mut buf)? {
                    if n == 0 {
                        eof = true;
                        break;
                    }
                    if p.verify {
                        verifier.check(&buf[..n]);
                    }
                    received += n as u64;
                    moved = true;
                }
            }
            // The buffer stays posted across polls; whenever it holds data it is taken, and
            // posted again at once (taking it also moves in what waited in the ring), until
            // nothing more is readable: `read` until WouldBlock, as above.
            ReadPath::Posted => loop {
                let (b, r) = net.take_read(rx)?;
                buf = b;
                match r {
                    Some(0) => {
                        eof = true;
                        break;
                    }
                    Some(n) => {
                        if p.verify {
                            verifier.check(&buf[..n]);
                        }
                        received += n as u64;
                        moved = true;
                        net.post_read(rx, std::mem::take(&mut buf))?;
                    }
                    None => {
                        net.post_read(rx, std::mem::take(&mut buf))?;
                        break;
                    }
                }
            },
            ReadPath::Frames => loop {
                let r = net.read_frames(rx, &mut |f: &[u8]| {
                    if p.verify {
                        verifier.check(f);
                    }
                })?;
                match r {
                    Some(0) => {
                        eof = true;
                        break;
                    }
                    Some(n) => {
                        received += n as u64;
                        moved = true;
                    }
                    None => break,
                }
            },
            ReadPath::InPlace => loop {
                let r = net.read_in_place(rx, &mut |a: &[u8], b: &[u8]| {
                    // At most one receive size per call, as a read of -M bytes would.
                    let n = (a.len() + b.len()).min(chunk);
                    let na = n.min(a.len());
                    if p.verify {
                        verifier.check(&a[..na]);
                        verifier.check(&b[..n - na]);
                    }
                    n
                })?;
                match r {
                    Some(0) => {
                        eof = true;
                        break;
                    }
                    Some(n) => {
                        received += n as u64;
                        moved = true;
                    }
                    None => break,
                }
            },
        }
        if eof {
            break;
        }
        // Both ends are the harness's: once the sender has shut down and everything it sent has
        // been read, the transfer is complete, whether or not its FIN has arrived yet. smoltcp
        // 0.14 can fail to deliver a FIN after losses (over `--link emu --loss`): the receiver
        // drops a retransmitted data+FIN segment that ends at its window's left edge (the
        // acceptability test counts payload only, not the FIN), and the sender's fast
        // retransmit with only the FIN outstanding sends nothing and clears the retransmission
        // timer, so the FIN is never sent again. `fin_delivered` in the details says which.
        // netfold and the kernel get no such allowance (`MemNet::tolerates_lost_fin`).
        if fin && received == sent && net.tolerates_lost_fin() {
            let (t, secs) = *done.get_or_insert_with(|| (WallInstant::now(), start.secs(net)));
            if t.elapsed() > FIN_WAIT {
                // The transfer ended when its last byte arrived.
                ended = Some(secs);
                break;
            }
        }
        step(net, moved, &mut prog)?;
    }
    let elapsed = ended.unwrap_or_else(|| start.secs(net));
    let cpu_s = super::affinity::thread_cpu_seconds() - cpu0;
    let passes = match (
        passes0,
        (net.payload_passes(sender), net.payload_passes(receiver)),
    ) {
        ((Some(s0), Some(r0)), (Some(s1), Some(r1))) => Some(super::Passes {
            sender: Some(s1.since(&s0)),
            receiver: Some(r1.since(&r0)),
        }),
        _ => None,
    };
    net.close(c)?;
    net.close(s)?;
    let mut details = net.details();
    if net.read_paths() {
        details.insert("read_path".into(), read_path.name().into());
    }
    details.insert("clock_skipped_s".into(), net.clock().skipped_s().into());
    details.insert("fin_delivered".into(), eof.into());
    if let Some(off) = verifier.first_bad() {
        details.insert("first_bad_byte".into(), off.into());
    }
    Ok(Measurement {
        bytes: received,
        transactions: 0,
        elapsed_s: elapsed,
        verified: p
            .verify
            .then(|| verifier.verified(sent) && received == sent),
        cpu_s,
        details,
        latency: None,
        udp: None,
        passes,
    })
}

/// Writes all of `data` to `c` and reads exactly `want` bytes from `r`, polling as needed.
fn exchange<N: MemNet>(
    net: &mut N,
    c: N::Conn,
    data: &[u8],
    r: N::Conn,
    want: usize,
    buf: &mut [u8],
    prog: &mut Progress,
) -> Result<(), BoxErr> {
    let mut off = 0;
    let mut got = 0;
    while got < want {
        let mut moved = false;
        while off < data.len() {
            let k = net.write(c, &data[off..])?;
            if k == 0 {
                break;
            }
            off += k;
            moved = true;
        }
        while got < want {
            let cap = (want - got).min(buf.len());
            match net.read(r, &mut buf[..cap])? {
                Some(0) => return Err("peer closed in the middle of a transaction".into()),
                Some(n) => {
                    got += n;
                    moved = true;
                }
                None => break,
            }
        }
        if got < want {
            step(net, moved, prog)?;
        }
    }
    Ok(())
}

fn rr<N: MemNet>(net: &mut N, p: &Params, port: u16) -> Result<Measurement, BoxErr> {
    let (c, s) = handshake(net, port)?;
    let req = vec![0x5au8; p.req_size];
    let resp = vec![0xa5u8; p.resp_size];
    let mut buf = vec![0u8; p.req_size.max(p.resp_size).max(1)];
    let deadline = p.duration.map(Duration::from_secs_f64);
    let limit = p.transactions.unwrap_or(u64::MAX);
    let cpu0 = super::affinity::thread_cpu_seconds();
    let start = RunTime::start(net);
    let mut n = 0u64;
    let mut prog = Progress::new();
    let mut lat = Histogram::default();
    // No clock read of its own: a transaction ends at the poll that delivered its response
    // (each exchange polls at least once, and that poll read the clock for both stacks); its
    // end is the next one's start and the deadline check.
    let deadline_ns = deadline.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut t0 = start.ns_at_poll(net);
    while n < limit && deadline_ns.is_none_or(|d| t0 < d) {
        exchange(net, c, &req, s, req.len(), &mut buf, &mut prog)?;
        exchange(net, s, &resp, c, resp.len(), &mut buf, &mut prog)?;
        let t1 = start.ns_at_poll(net);
        lat.record(Duration::from_nanos(t1.saturating_sub(t0)));
        t0 = t1;
        n += 1;
    }
    let elapsed = start.secs(net);
    let cpu_s = super::affinity::thread_cpu_seconds() - cpu0;
    net.close(c)?;
    net.close(s)?;
    let mut details = net.details();
    details.insert("clock_skipped_s".into(), net.clock().skipped_s().into());
    Ok(Measurement {
        bytes: n * (p.req_size + p.resp_size) as u64,
        transactions: n,
        elapsed_s: elapsed,
        verified: None,
        cpu_s,
        details,
        latency: Some(lat),
        udp: None,
        passes: None,
    })
}

fn crr<N: MemNet>(net: &mut N, p: &Params, port: u16) -> Result<Measurement, BoxErr> {
    let req = vec![0x5au8; p.req_size];
    let resp = vec![0xa5u8; p.resp_size];
    let mut buf = vec![0u8; p.req_size.max(p.resp_size).max(1)];
    let deadline = p.duration.map(Duration::from_secs_f64);
    let limit = p.transactions.unwrap_or(u64::MAX);
    let cpu0 = super::affinity::thread_cpu_seconds();
    let start = RunTime::start(net);
    let mut n = 0u64;
    let mut prog = Progress::new();
    let mut lat = Histogram::default();
    while n < limit && !start.past(net, deadline) {
        let t0 = start.ns(net);
        let (c, s) = handshake(net, port)?;
        exchange(net, c, &req, s, req.len(), &mut buf, &mut prog)?;
        exchange(net, s, &resp, c, resp.len(), &mut buf, &mut prog)?;
        // netperf's TCP_CRR: the client closes after the response; the server closes on EOF.
        net.close(c)?;
        loop {
            match net.read(s, &mut buf)? {
                Some(0) => break,
                Some(_) => return Err("unexpected data after the response".into()),
                None => step(net, false, &mut prog)?,
            }
        }
        // The client's view: connect until it has the response and has closed.
        lat.record(Duration::from_nanos(start.ns(net).saturating_sub(t0)));
        net.close(s)?;
        net.poll()?;
        net.reap();
        n += 1;
    }
    let elapsed = start.secs(net);
    let cpu_s = super::affinity::thread_cpu_seconds() - cpu0;
    let mut details = net.details();
    details.insert("clock_skipped_s".into(), net.clock().skipped_s().into());
    Ok(Measurement {
        bytes: n * (p.req_size + p.resp_size) as u64,
        transactions: n,
        elapsed_s: elapsed,
        verified: None,
        cpu_s,
        details,
        latency: Some(lat),
        udp: None,
        passes: None,
    })
}

/// UDP_STREAM: the client sends datagrams as fast as its socket takes them (or paced to
/// `-b`); the server counts what arrives. Throughput is what was received; both sides' counts
/// are in [`UdpStats`].
fn udp_stream<N: MemNet>(net: &mut N, p: &Params, port: u16) -> Result<Measurement, BoxErr> {
    net.udp_open(port)?;
    let mut data = vec![0x42u8; p.send_size.max(1)];
    let mut buf = vec![0u8; 65536];
    let deadline = Some(Duration::from_secs_f64(p.duration.unwrap_or(1.0)));
    let total = p.bytes.unwrap_or(u64::MAX);
    let pacer = Pacer {
        rate_bps: p.rate_bps,
    };
    let cpu0 = super::affinity::thread_cpu_seconds();
    let start = RunTime::start(net);
    let ns = |net: &mut N| start.ns(net);
    let (mut sent, mut sent_n) = (0u64, 0u64);
    let mut rx = Receiver::default();
    while sent < total && !start.past(net, deadline) {
        while sent < total {
            let now = ns(net);
            if pacer.wait_ns(sent, now) > 0 {
                break;
            }
            stamp(&mut data, sent_n, now);
            if !net.udp_send(&data)? {
                break;
            }
            sent += data.len() as u64;
            sent_n += 1;
        }
        let worked = net.poll()?;
        while let Some(n) = net.udp_recv(&mut buf)? {
            let now = ns(net);
            rx.on_datagram(&buf[..n], now);
        }
        let wait = pacer.wait_ns(sent, ns(net));
        if !worked && wait > 0 {
            // Ahead of the target rate with nothing in flight: let wall time pass.
            std::thread::sleep(Duration::from_nanos(wait.min(1_000_000)));
        }
    }
    let elapsed = start.secs(net);
    // Drain what is still in flight (not counted in the elapsed time, as a receiver would
    // still take what was sent before the end).
    for _ in 0..64 {
        if !net.poll()? {
            break;
        }
        while let Some(n) = net.udp_recv(&mut buf)? {
            let now = ns(net);
            rx.on_datagram(&buf[..n], now);
        }
    }
    let cpu_s = super::affinity::thread_cpu_seconds() - cpu0;
    let mut details = net.details();
    details.insert("sent_bytes".into(), sent.into());
    Ok(Measurement {
        bytes: rx.bytes,
        transactions: 0,
        elapsed_s: elapsed,
        verified: None,
        cpu_s,
        details,
        latency: None,
        udp: Some(UdpStats {
            sent_datagrams: sent_n,
            sent_bytes: sent,
            received_datagrams: rx.datagrams,
            received_bytes: rx.bytes,
            jitter_ms: rx.jitter_ms(),
        }),
        passes: None,
    })
}
