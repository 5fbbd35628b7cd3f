//! Two-host measurements: the control protocol between `netfold <test> -H HOST` and
//! `netfold server`, the server's half of each test, the client's half, and `-P`/`--bidir`/
//! `--interval` (which local kernel runs reach through the same code, with the server half on a
//! thread of this process).
//!
//! # Control protocol, version 1
//!
//! One TCP connection to the server's control port (12866 by default, netserver's), carrying
//! JSON objects, one per line (`\n`-terminated, at most [`MAX_LINE`] bytes):
//!
//! 1. client -> server: a [`Request`] (`{"version":1,"test":"stream","duration_s":2.0,...}`).
//! 2. server -> client: a [`Reply`]: `{"version":1,"ok":true,"data_port":P}`, or
//!    `{"version":1,"ok":false,"error":"..."}` (bad JSON, another version, out-of-range values,
//!    or a test already running: one test at a time), after which the server closes.
//! 3. The client opens the data connections to port P on the same address (TCP), or sends
//!    datagrams to it (UDP). Each TCP data connection of stream/maerts/rr starts with a 3-byte
//!    header: the role (`S` = client sends, `M` = server sends, `R` = request/response) and the
//!    stream index (u16, little-endian). CRR connections carry no header: each is one
//!    transaction, and one that closes without a request ends the test. UDP tests end with an
//!    empty datagram.
//! 4. When its side is done, the server sends a final [`Reply`] with `result`
//!    ([`ServerResult`]: bytes and datagrams it received, per-stream counts, CPU seconds with
//!    `cpu`) and closes. Every wait on the server is bounded by the test's length plus
//!    [`GRACE`], and never longer than the server's `--max-seconds`.

use super::affinity::{process_cpu_seconds, thread_cpu_seconds};
use super::latency::Histogram;
use super::pattern::{Pattern, Verifier};
use super::udp::{stamp, Pacer, Receiver};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub type BoxErr = Box<dyn std::error::Error>;

/// The protocol version this build speaks; a request with another is refused.
pub const PROTOCOL_VERSION: u32 = 1;
/// netserver's control port, so firewalls opened for netperf fit.
pub const CONTROL_PORT: u16 = 12866;
/// Longest control line accepted: a request is a few hundred bytes; anything near this is not
/// a netfold client.
pub const MAX_LINE: usize = 64 * 1024;
/// Slack added to a test's length for connection set-up, draining buffers and the final
/// reply; a peer silent for longer than length + GRACE is gone.
pub const GRACE: Duration = Duration::from_secs(10);
/// How long a connected client may take to send its request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Most parallel streams per direction (`-P`): each is a thread on both hosts.
pub const MAX_STREAMS: usize = 128;
/// udp-rr: how long the client waits for a response before counting the transaction lost
/// and sending the next request (a lost datagram must not end the test).
pub const UDP_RR_WAIT: Duration = Duration::from_millis(200);

/// The tests the server runs.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    Stream,
    Maerts,
    Rr,
    Crr,
    UdpStream,
    UdpRr,
}

impl TestKind {
    pub fn netperf_name(self) -> &'static str {
        match self {
            TestKind::Stream => "TCP_STREAM",
            TestKind::Maerts => "TCP_MAERTS",
            TestKind::Rr => "TCP_RR",
            TestKind::Crr => "TCP_CRR",
            TestKind::UdpStream => "UDP_STREAM",
            TestKind::UdpRr => "UDP_RR",
        }
    }
    pub fn is_transactional(self) -> bool {
        matches!(self, TestKind::Rr | TestKind::Crr | TestKind::UdpRr)
    }
    pub fn is_udp(self) -> bool {
        matches!(self, TestKind::UdpStream | TestKind::UdpRr)
    }
    pub fn from_test(t: super::Test) -> TestKind {
        match t {
            super::Test::Stream => TestKind::Stream,
            super::Test::Maerts => TestKind::Maerts,
            super::Test::Rr => TestKind::Rr,
            super::Test::Crr => TestKind::Crr,
            super::Test::UdpStream => TestKind::UdpStream,
        }
    }
}

/// What the client asks the server to run (control line 1).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Request {
    pub version: u32,
    pub test: TestKind,
    /// Seconds to run (`-l`); None when `bytes` or `transactions` bound the test.
    pub duration_s: Option<f64>,
    /// stream/maerts: bytes per stream (`--bytes` divided over the streams).
    pub bytes: Option<u64>,
    pub transactions: Option<u64>,
    pub send_size: usize,
    pub recv_size: usize,
    pub req_size: usize,
    pub resp_size: usize,
    /// Parallel streams per direction (`-P`).
    pub streams: usize,
    /// Both directions at once (`--bidir`).
    pub bidir: bool,
    pub nodelay: bool,
    pub send_buffer: Option<usize>,
    pub recv_buffer: Option<usize>,
    /// Check received stream bytes against the sender's pattern.
    pub verify: bool,
    /// Report the server's CPU seconds.
    pub cpu: bool,
}

/// One stream's count on the server.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct StreamCount {
    pub index: u16,
    /// "c2s" (client to server) or "s2c".
    pub direction: String,
    /// Bytes the server received (c2s) or sent (s2c) on it.
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verified: Option<bool>,
}

/// The server's side of a finished test (final control line).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct ServerResult {
    pub elapsed_s: f64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub transactions: u64,
    pub datagrams_received: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub jitter_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu_s: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub streams: Vec<StreamCount>,
}

/// Every line the server sends.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Reply {
    pub version: u32,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub result: Option<ServerResult>,
}

impl Reply {
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply {
            version: PROTOCOL_VERSION,
            ok: false,
            error: Some(msg.into()),
            ..Default::default()
        }
    }
}

/// Reads one `\n`-terminated line of at most [`MAX_LINE`] bytes.
pub fn read_line(r: &mut impl BufRead) -> std::io::Result<String> {
    let mut buf = Vec::new();
    let n = r.take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the peer closed the control connection",
        ));
    }
    if buf.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("control line longer than {MAX_LINE} bytes or unterminated"),
        ));
    }
    buf.pop();
    String::from_utf8(buf)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "control line not UTF-8"))
}

fn write_json(w: &mut impl Write, v: &impl Serialize) -> std::io::Result<()> {
    let mut s = serde_json::to_string(v).map_err(std::io::Error::other)?;
    s.push('\n');
    w.write_all(s.as_bytes())?;
    w.flush()
}

/// Checks a request's values; the message goes back to the client as is.
pub fn validate(r: &Request, max_seconds: f64) -> Result<(), String> {
    if r.version != PROTOCOL_VERSION {
        return Err(format!(
            "protocol version {} not supported (this server speaks {PROTOCOL_VERSION})",
            r.version
        ));
    }
    match r.duration_s {
        Some(d) if !(d > 0.0 && d <= max_seconds) => {
            return Err(format!(
                "duration_s {d} out of range (0, {max_seconds}] (the server's --max-seconds)"
            ))
        }
        None if r.bytes.is_none() && r.transactions.is_none() => {
            return Err("one of duration_s, bytes, transactions is required".into())
        }
        _ => {}
    }
    if !(1..=MAX_STREAMS).contains(&r.streams) {
        return Err(format!(
            "streams {} out of range 1..={MAX_STREAMS}",
            r.streams
        ));
    }
    if (r.streams > 1 || r.bidir) && !matches!(r.test, TestKind::Stream | TestKind::Maerts) {
        return Err("parallel streams and bidir apply to stream and maerts only".into());
    }
    let in_range = |v: usize, hi: usize| (1..=hi).contains(&v);
    let udp_max = 65507;
    let ok = match r.test {
        TestKind::Stream | TestKind::Maerts => {
            in_range(r.send_size, 1 << 30) && in_range(r.recv_size, 1 << 30)
        }
        TestKind::Rr | TestKind::Crr => {
            in_range(r.req_size, 1 << 24) && in_range(r.resp_size, 1 << 24)
        }
        TestKind::UdpStream => in_range(r.send_size, udp_max),
        TestKind::UdpRr => in_range(r.req_size, udp_max) && in_range(r.resp_size, udp_max),
    };
    if !ok {
        return Err("message sizes out of range (TCP: 1..1G, RR: 1..16M, UDP: 1..65507)".into());
    }
    // Every size the server allocates a buffer for is bounded, whichever test uses it.
    let sizes = [r.send_size, r.recv_size, r.req_size, r.resp_size];
    if sizes.iter().any(|&v| v > 1 << 30) {
        return Err("sizes are at most 1G".into());
    }
    for b in [r.send_buffer, r.recv_buffer].into_iter().flatten() {
        if b > 1 << 30 {
            return Err("socket buffer sizes are at most 1G".into());
        }
    }
    Ok(())
}

pub use super::remote_net::set_accept_timeout;
use super::remote_net::{timed_out, ClientNet, ClientUdp, KernelNet, Net, NetStream};

/// The longest a test of `r` may take on the server.
fn test_limit(r: &Request, max_seconds: f64) -> Duration {
    let d = r.duration_s.unwrap_or(max_seconds).min(max_seconds);
    Duration::from_secs_f64(d) + GRACE
}

/// The server's half of one test: opens the data port on `ip`, answers the request on `ctl`,
/// runs its side, sends the result. `stop` (SIGINT/SIGTERM) ends it early.
pub fn serve_test<N: Net>(
    net: &N,
    ctl: &mut impl Write,
    r: &Request,
    ip: std::net::IpAddr,
    max_seconds: f64,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let limit = test_limit(r, max_seconds);
    let start = Instant::now();
    let cpu0 = thread_cpu_seconds();
    let result = if r.test.is_udp() {
        // Short receive waits, so the loop sees the time limit and the stop flag.
        let (s, port) = net.udp_bind(ip, UDP_POLL, (r.send_buffer, r.recv_buffer))?;
        write_json(
            ctl,
            &Reply {
                version: PROTOCOL_VERSION,
                ok: true,
                data_port: Some(port),
                ..Default::default()
            },
        )?;
        udp_server(net, &s, r, start, limit, stop)
    } else {
        let (l, port) = net.listen(ip, 0, limit, (r.send_buffer, r.recv_buffer))?;
        write_json(
            ctl,
            &Reply {
                version: PROTOCOL_VERSION,
                ok: true,
                data_port: Some(port),
                ..Default::default()
            },
        )?;
        tcp_server(net, &l, r, limit, stop)
    };
    let reply = match result {
        Ok(mut res) => {
            res.elapsed_s = start.elapsed().as_secs_f64();
            if r.cpu {
                // The worker threads' CPU is added by tcp_server; this thread's own share here.
                res.cpu_s = Some(res.cpu_s.unwrap_or(0.0) + thread_cpu_seconds() - cpu0);
            }
            Reply {
                version: PROTOCOL_VERSION,
                ok: true,
                result: Some(res),
                ..Default::default()
            }
        }
        Err(e) => Reply::error(format!(
            "{} failed on the server: {e}",
            r.test.netperf_name()
        )),
    };
    write_json(ctl, &reply)
}

/// How long one UDP receive waits on the server before looking at the clock and stop flag.
const UDP_POLL: Duration = Duration::from_millis(100);

fn udp_server<N: Net>(
    net: &N,
    s: &N::Udp,
    r: &Request,
    start: Instant,
    limit: Duration,
    stop: &AtomicBool,
) -> std::io::Result<ServerResult> {
    let mut buf = vec![0u8; 65536];
    let mut rcv = Receiver::default();
    let mut res = ServerResult::default();
    let resp = if r.test == TestKind::UdpRr {
        vec![0xa5u8; r.resp_size]
    } else {
        Vec::new()
    };
    let mut out = resp.clone();
    while start.elapsed() < limit && !stop.load(Ordering::Relaxed) {
        let (n, from) = match net.recv_from(s, &mut buf) {
            Ok(x) => x,
            Err(e) if timed_out(&e) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        match r.test {
            TestKind::UdpStream => {
                rcv.on_datagram(&buf[..n], start.elapsed().as_nanos() as u64);
            }
            _ => {
                rcv.on_datagram(&buf[..n], 0);
                // Echo the request's sequence number so the client can match the response.
                out.copy_from_slice(&resp);
                let k = n.min(8).min(out.len());
                out[..k].copy_from_slice(&buf[..k]);
                if net.send_to(s, &out, from).is_ok() {
                    res.transactions += 1;
                    res.bytes_sent += out.len() as u64;
                }
            }
        }
    }
    res.datagrams_received = rcv.datagrams;
    res.bytes_received = rcv.bytes;
    if r.test == TestKind::UdpStream {
        res.jitter_ms = rcv.jitter_ms();
    }
    Ok(res)
}

fn timeout_err(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what.to_string())
}

fn accept<N: Net>(net: &N, l: &N::Listener, stop: &AtomicBool) -> std::io::Result<N::Stream> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "server stopping",
            ));
        }
        match net.accept(l) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if timed_out(&e) => {
                return Err(timeout_err(
                    "no data connection within the test's time limit",
                ))
            }
            Err(e) => return Err(e),
        }
    }
}

/// Bytes of the stream/maerts/rr data connection header: role and stream index.
const HEADER_LEN: usize = 3;

fn tcp_server<N: Net>(
    net: &N,
    l: &N::Listener,
    r: &Request,
    limit: Duration,
    stop: &AtomicBool,
) -> std::io::Result<ServerResult> {
    let mut res = ServerResult::default();
    let deadline = Instant::now() + limit;
    let prep = |s: &N::Stream| -> std::io::Result<()> {
        s.set_nodelay_to(r.nodelay)?;
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        s.set_timeouts(Some(left))
    };
    match r.test {
        TestKind::Crr => {
            let mut req = vec![0u8; r.req_size];
            let resp = vec![0xa5u8; r.resp_size];
            loop {
                let mut s = accept(net, l, stop)?;
                prep(&s)?;
                match s.read_exact(&mut req) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
                res.bytes_received += req.len() as u64;
                s.write_all(&resp)?;
                res.bytes_sent += resp.len() as u64;
                // Wait for the client's close, then close (netperf's CRR server).
                let mut b = [0u8; 1];
                let _ = s.read(&mut b);
                res.transactions += 1;
            }
            Ok(res)
        }
        TestKind::Rr => {
            let mut s = accept(net, l, stop)?;
            prep(&s)?;
            let mut h = [0u8; HEADER_LEN];
            s.read_exact(&mut h)?;
            let mut req = vec![0u8; r.req_size];
            let resp = vec![0xa5u8; r.resp_size];
            loop {
                match s.read_exact(&mut req) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
                res.bytes_received += req.len() as u64;
                s.write_all(&resp)?;
                res.bytes_sent += resp.len() as u64;
                res.transactions += 1;
            }
            Ok(res)
        }
        _ => {
            let (fwd, rev) = directions(r);
            let total = fwd + rev;
            let mut conns = Vec::with_capacity(total);
            for _ in 0..total {
                let mut s = accept(net, l, stop)?;
                prep(&s)?;
                let mut h = [0u8; HEADER_LEN];
                s.read_exact(&mut h)?;
                let idx = u16::from_le_bytes([h[1], h[2]]);
                match h[0] {
                    b'S' | b'M' => conns.push((h[0], idx, s)),
                    other => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("bad data connection role byte {other:#04x}"),
                        ))
                    }
                }
            }
            let pattern = Pattern::new(r.send_size.max(r.recv_size).max(1));
            let cpu = AtomicU64::new(0);
            let counts = std::thread::scope(|scope| {
                let handles: Vec<_> = conns
                    .into_iter()
                    .map(|(role, idx, mut s)| {
                        let (pattern, cpu) = (&pattern, &cpu);
                        scope.spawn(move || -> std::io::Result<StreamCount> {
                            let c0 = thread_cpu_seconds();
                            let counter = AtomicU64::new(0);
                            let out = if role == b'S' {
                                let (bytes, ok) =
                                    sink(&mut s, r.recv_size, r.verify, pattern, &counter, stop)?;
                                StreamCount {
                                    index: idx,
                                    direction: "c2s".into(),
                                    bytes,
                                    verified: r.verify.then_some(ok),
                                }
                            } else {
                                let bytes = source(&mut s, r, pattern, &counter, stop)?;
                                // Wait for the client's close so the last bytes are counted
                                // as delivered before the result goes out.
                                let mut b = [0u8; 1];
                                let _ = s.read(&mut b);
                                StreamCount {
                                    index: idx,
                                    direction: "s2c".into(),
                                    bytes,
                                    verified: None,
                                }
                            };
                            let used = ((thread_cpu_seconds() - c0) * 1e9) as u64;
                            cpu.fetch_add(used, Ordering::Relaxed);
                            Ok(out)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(std::io::Error::other("stream thread panicked"))
                        })
                    })
                    .collect::<std::io::Result<Vec<StreamCount>>>()
            })?;
            for c in &counts {
                if c.direction == "c2s" {
                    res.bytes_received += c.bytes;
                } else {
                    res.bytes_sent += c.bytes;
                }
            }
            res.streams = counts;
            if r.cpu {
                res.cpu_s = Some(cpu.load(Ordering::Relaxed) as f64 / 1e9);
            }
            Ok(res)
        }
    }
}

/// Streams client-to-server and server-to-client a stream/maerts request asks for.
pub fn directions(r: &Request) -> (usize, usize) {
    match (r.test, r.bidir) {
        (_, true) => (r.streams, r.streams),
        (TestKind::Stream, false) => (r.streams, 0),
        _ => (0, r.streams),
    }
}

/// Sends the pattern for the request's length (or byte count), then half-closes.
fn source<S: NetStream>(
    s: &mut S,
    r: &Request,
    pattern: &Pattern,
    counter: &AtomicU64,
    stop: &AtomicBool,
) -> std::io::Result<u64> {
    let msg = r.send_size.max(1);
    let total = r.bytes.unwrap_or(u64::MAX);
    let deadline = r.duration_s.map(Duration::from_secs_f64);
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < total
        && deadline.is_none_or(|d| start.elapsed() < d)
        && !stop.load(Ordering::Relaxed)
    {
        let n = ((total - sent) as usize).min(msg);
        s.write_all(pattern.window(sent, n))?;
        sent += n as u64;
        counter.store(sent, Ordering::Relaxed);
    }
    s.shutdown_write()?;
    Ok(sent)
}

/// Reads to EOF, counting (and with `verify` checking) the bytes.
fn sink<S: NetStream>(
    s: &mut S,
    recv_size: usize,
    verify: bool,
    pattern: &Pattern,
    counter: &AtomicU64,
    stop: &AtomicBool,
) -> std::io::Result<(u64, bool)> {
    let mut buf = vec![0u8; recv_size.max(1)];
    let mut v = Verifier::new(pattern);
    let mut bytes = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if verify {
            v.check(&buf[..n]);
        }
        bytes += n as u64;
        counter.store(bytes, Ordering::Relaxed);
    }
    Ok((bytes, v.verified(bytes)))
}

/// One `--interval` report.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Interval {
    pub start_s: f64,
    pub end_s: f64,
    /// Bytes the client sent (stream, udp-stream) or received (maerts) in the interval; both
    /// with --bidir.
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trans_per_s: Option<f64>,
}

/// One stream of a `-P`/`--bidir` run, as the JSON lists them.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct StreamRow {
    pub index: u16,
    pub direction: String,
    /// Bytes delivered: received by the server (c2s) or by the client (s2c).
    pub bytes: u64,
    pub throughput_mbps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

/// What the client measured, with the server's side.
#[derive(Debug, Clone, Default)]
pub struct ClientResult {
    pub elapsed_s: f64,
    /// Bytes delivered (both directions with --bidir).
    pub bytes: u64,
    pub bytes_c2s: u64,
    pub bytes_s2c: u64,
    pub transactions: u64,
    /// udp-rr: transactions whose request or response was lost.
    pub lost_transactions: u64,
    pub sent_datagrams: u64,
    pub sent_bytes: u64,
    pub latency: Option<Histogram>,
    pub client_cpu_s: f64,
    pub server: ServerResult,
    pub streams: Vec<StreamRow>,
    pub intervals: Vec<Interval>,
    pub verified: Option<bool>,
}

/// What is called with each `--interval` report as its interval ends.
pub type LiveFn = Box<dyn Fn(&Interval) + Send + Sync>;

static LIVE: std::sync::Mutex<Option<LiveFn>> = std::sync::Mutex::new(None);

/// Sets (or with `None` clears) the function each interval report is handed to as soon as
/// its interval ends, from the thread sampling the run (for live output).
pub fn set_live(f: Option<LiveFn>) {
    *LIVE.lock().unwrap_or_else(|e| e.into_inner()) = f;
}

fn report_live(iv: &Interval) {
    if let Some(f) = LIVE.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        f(iv);
    }
}

/// Samples per-worker counters every `every` until all `workers` are done.
struct Sampler {
    counters: Arc<Vec<AtomicU64>>,
    done: Arc<AtomicUsize>,
}

impl Sampler {
    fn run(
        &self,
        workers: usize,
        every: Option<Duration>,
        start: Instant,
        transactional: bool,
    ) -> Vec<Interval> {
        let mut out = Vec::new();
        let Some(every) = every else {
            return out;
        };
        let total = || {
            self.counters
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum::<u64>()
        };
        let (mut last_t, mut last_v) = (0.0f64, 0u64);
        let mut next = every;
        loop {
            let finished = self.done.load(Ordering::Acquire) >= workers;
            let now = start.elapsed();
            if now >= next || finished {
                let v = total();
                let t = now.as_secs_f64();
                let dt = t - last_t;
                // A final sliver shorter than a tenth of the interval is folded into nothing:
                // its rate would be noise.
                if dt > every.as_secs_f64() / 10.0 || !finished {
                    let d = v - last_v.min(v);
                    out.push(if transactional {
                        Interval {
                            start_s: last_t,
                            end_s: t,
                            bytes: 0,
                            throughput_mbps: None,
                            transactions: Some(d),
                            trans_per_s: Some(d as f64 / dt),
                        }
                    } else {
                        Interval {
                            start_s: last_t,
                            end_s: t,
                            bytes: d,
                            throughput_mbps: Some(super::report::mbps(d, dt)),
                            transactions: None,
                            trans_per_s: None,
                        }
                    });
                    if let Some(iv) = out.last() {
                        report_live(iv);
                    }
                }
                last_t = t;
                last_v = v;
                // A late wake-up skips the ticks it slept through rather than report
                // zero-length intervals.
                while next <= now {
                    next += every;
                }
            }
            if finished {
                return out;
            }
            std::thread::sleep(Duration::from_millis(5).min(next.saturating_sub(now)));
        }
    }
}

/// Connects, sends the request, and returns the control connection and the data address.
fn open_test<C: ClientNet>(
    net: &C,
    control: SocketAddr,
    req: &Request,
) -> Result<(BufReader<C::Stream>, SocketAddr), BoxErr> {
    let c = net
        .connect(control, REQUEST_TIMEOUT, (None, None))
        .map_err(|e| format!("cannot reach netfold server at {control}: {e}"))?;
    c.set_timeouts(Some(REQUEST_TIMEOUT))?;
    let mut w = c.clone_stream()?;
    write_json(&mut w, req)?;
    let mut rd = BufReader::new(c);
    let line = read_line(&mut rd).map_err(|e| format!("server {control}: {e}"))?;
    let reply: Reply = serde_json::from_str(&line)
        .map_err(|e| format!("server {control} sent a bad reply ({e}): {line:?}"))?;
    if !reply.ok {
        return Err(format!(
            "server {control} refused the test: {}",
            reply.error.unwrap_or_default()
        )
        .into());
    }
    let port = reply.data_port.ok_or("server reply has no data_port")?;
    Ok((rd, SocketAddr::new(control.ip(), port)))
}

fn finish_test<S: NetStream>(
    rd: &mut BufReader<S>,
    limit: Duration,
) -> Result<ServerResult, BoxErr> {
    rd.get_ref().set_timeouts(Some(limit))?;
    let line = read_line(rd).map_err(|e| format!("waiting for the server's result: {e}"))?;
    let reply: Reply = serde_json::from_str(&line)
        .map_err(|e| format!("server sent a bad result ({e}): {line:?}"))?;
    if !reply.ok {
        return Err(reply.error.unwrap_or_default().into());
    }
    reply.result.ok_or_else(|| "server result missing".into())
}

/// Runs `req` against the server at `control` on kernel sockets: the client's half of every
/// test.
pub fn run_client(
    control: SocketAddr,
    req: &Request,
    interval: Option<Duration>,
    rate_bps: Option<u64>,
) -> Result<ClientResult, BoxErr> {
    run_client_on(&KernelNet, control, req, interval, rate_bps)
}

/// [`run_client`] on the sockets of `net` (the kernel's, or netfold's on a device).
pub fn run_client_on<C: ClientNet>(
    net: &C,
    control: SocketAddr,
    req: &Request,
    interval: Option<Duration>,
    rate_bps: Option<u64>,
) -> Result<ClientResult, BoxErr> {
    validate(req, f64::MAX)?;
    let (mut rd, data) = open_test(net, control, req)?;
    let limit = test_limit(req, 86400.0);
    let stop = AtomicBool::new(false);
    let cpu0 = thread_cpu_seconds();
    let process_cpu0 = process_cpu_seconds();
    let start = Instant::now();
    let mut out = match req.test {
        TestKind::Stream | TestKind::Maerts => tcp_streams(net, data, req, interval, limit, &stop)?,
        TestKind::Rr | TestKind::Crr => tcp_rr(net, data, req, interval, limit)?,
        TestKind::UdpStream => udp_stream(net, data, req, interval, rate_bps)?,
        TestKind::UdpRr => udp_rr(net, data, req, interval)?,
    };
    out.elapsed_s = start.elapsed().as_secs_f64();
    if net.cpu_is_process_wide() {
        // netfold's driver thread does most of the client's work: count the whole process.
        out.client_cpu_s = process_cpu_seconds() - process_cpu0;
    } else {
        out.client_cpu_s += thread_cpu_seconds() - cpu0;
    }
    out.server = finish_test(&mut rd, limit)?;
    match req.test {
        TestKind::Stream | TestKind::Maerts => {
            // Delivered bytes: what the server received, what the client received.
            out.bytes_c2s = out.server.bytes_received;
            out.bytes = out.bytes_c2s + out.bytes_s2c;
            for sc in out.server.streams.iter().filter(|s| s.direction == "c2s") {
                out.streams.push(StreamRow {
                    index: sc.index,
                    direction: sc.direction.clone(),
                    bytes: sc.bytes,
                    throughput_mbps: super::report::mbps(sc.bytes, out.elapsed_s),
                    verified: sc.verified,
                });
            }
            out.streams.sort_by_key(|s| (s.direction.clone(), s.index));
            if req.verify {
                out.verified = Some(out.streams.iter().all(|s| s.verified != Some(false)));
            }
        }
        TestKind::UdpStream => out.bytes = out.server.bytes_received,
        _ => {}
    }
    if req.test == TestKind::Crr || req.test == TestKind::Rr {
        out.bytes = out.transactions * (req.req_size + req.resp_size) as u64;
    }
    Ok(out)
}

fn connect_data<C: ClientNet>(
    net: &C,
    data: SocketAddr,
    req: &Request,
    limit: Duration,
) -> std::io::Result<C::Stream> {
    let c = net.connect(data, REQUEST_TIMEOUT, (req.send_buffer, req.recv_buffer))?;
    c.set_nodelay_to(req.nodelay)?;
    c.set_timeouts(Some(limit))?;
    Ok(c)
}

fn tcp_streams<C: ClientNet>(
    net: &C,
    data: SocketAddr,
    req: &Request,
    interval: Option<Duration>,
    limit: Duration,
    stop: &AtomicBool,
) -> Result<ClientResult, BoxErr> {
    let (fwd, rev) = directions(req);
    let mut conns = Vec::new();
    for (role, n) in [(b'S', fwd), (b'M', rev)] {
        for i in 0..n {
            let mut c = connect_data(net, data, req, limit)?;
            let idx = (i as u16).to_le_bytes();
            c.write_all(&[role, idx[0], idx[1]])?;
            conns.push((role, i as u16, c));
        }
    }
    let workers = conns.len();
    let sampler = Sampler {
        counters: Arc::new((0..workers).map(|_| AtomicU64::new(0)).collect()),
        done: Arc::new(AtomicUsize::new(0)),
    };
    let pattern = Pattern::new(req.send_size.max(req.recv_size).max(1));
    let start = Instant::now();
    let (intervals, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(k, (role, idx, mut c))| {
                let (counters, done, pattern) = (&sampler.counters, &sampler.done, &pattern);
                scope.spawn(
                    move || -> std::io::Result<(u8, u16, u64, Option<bool>, f64)> {
                        let c0 = thread_cpu_seconds();
                        let r = if role == b'S' {
                            source(&mut c, req, pattern, &counters[k], stop).map(|sent| {
                                // Wait for the server to see EOF (it closes after reading all).
                                let mut b = [0u8; 1];
                                let _ = c.read(&mut b);
                                (role, idx, sent, None)
                            })
                        } else {
                            sink(
                                &mut c,
                                req.recv_size,
                                req.verify,
                                pattern,
                                &counters[k],
                                stop,
                            )
                            .map(|(n, ok)| (role, idx, n, req.verify.then_some(ok)))
                        };
                        done.fetch_add(1, Ordering::Release);
                        r.map(|(a, b, c, d)| (a, b, c, d, thread_cpu_seconds() - c0))
                    },
                )
            })
            .collect();
        let iv = sampler.run(workers, interval, start, false);
        let rs: Vec<_> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("stream thread panicked")))
            })
            .collect();
        (iv, rs)
    });
    let mut out = ClientResult {
        intervals,
        ..Default::default()
    };
    let elapsed = start.elapsed().as_secs_f64();
    for r in results {
        let (role, idx, n, verified, cpu) = r?;
        out.client_cpu_s += cpu;
        if role == b'M' {
            out.bytes_s2c += n;
            out.streams.push(StreamRow {
                index: idx,
                direction: "s2c".into(),
                bytes: n,
                throughput_mbps: super::report::mbps(n, elapsed),
                verified,
            });
        }
    }
    Ok(out)
}

fn tcp_rr<C: ClientNet>(
    net: &C,
    data: SocketAddr,
    req: &Request,
    interval: Option<Duration>,
    limit: Duration,
) -> Result<ClientResult, BoxErr> {
    let sampler = Sampler {
        counters: Arc::new(vec![AtomicU64::new(0)]),
        done: Arc::new(AtomicUsize::new(0)),
    };
    let start = Instant::now();
    let deadline = req.duration_s.map(Duration::from_secs_f64);
    let cap = req.transactions.unwrap_or(u64::MAX);
    let more = |n: u64| n < cap && deadline.is_none_or(|d| start.elapsed() < d);
    let (iv, r) = std::thread::scope(|scope| {
        let counters = &sampler.counters;
        let done = &sampler.done;
        let h = scope.spawn(move || -> std::io::Result<(u64, Histogram, f64)> {
            let c0 = thread_cpu_seconds();
            let body = || -> std::io::Result<(u64, Histogram)> {
                let reqb = vec![0x5au8; req.req_size];
                let mut resp = vec![0u8; req.resp_size];
                let mut lat = Histogram::default();
                let mut n = 0u64;
                if req.test == TestKind::Rr {
                    let mut c = connect_data(net, data, req, limit)?;
                    c.write_all(&[b'R', 0, 0])?;
                    while more(n) {
                        let t0 = Instant::now();
                        c.write_all(&reqb)?;
                        c.read_exact(&mut resp)?;
                        lat.record(t0.elapsed());
                        n += 1;
                        counters[0].store(n, Ordering::Relaxed);
                    }
                    c.shutdown_write()?;
                } else {
                    while more(n) {
                        let t0 = Instant::now();
                        let mut c = connect_data(net, data, req, limit)?;
                        c.write_all(&reqb)?;
                        c.read_exact(&mut resp)?;
                        drop(c);
                        lat.record(t0.elapsed());
                        n += 1;
                        counters[0].store(n, Ordering::Relaxed);
                    }
                    // The end: a connection that sends nothing.
                    drop(connect_data(net, data, req, limit)?);
                }
                Ok((n, lat))
            };
            let r = body();
            done.fetch_add(1, Ordering::Release);
            r.map(|(n, l)| (n, l, thread_cpu_seconds() - c0))
        });
        let iv = sampler.run(1, interval, start, true);
        (
            iv,
            h.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("rr thread panicked"))),
        )
    });
    let (n, lat, cpu) = r?;
    Ok(ClientResult {
        transactions: n,
        latency: Some(lat),
        client_cpu_s: cpu,
        intervals: iv,
        ..Default::default()
    })
}

/// Sends the end-of-test marker: empty datagrams, a few in case one is lost (the server's
/// time limit covers all being lost).
fn udp_end(c: &impl ClientUdp) {
    for _ in 0..3 {
        let _ = c.send(&[]);
    }
}

fn udp_socket<C: ClientNet>(net: &C, data: SocketAddr, req: &Request) -> std::io::Result<C::Udp> {
    net.udp_connect(data, (req.send_buffer, req.recv_buffer))
}

fn udp_stream<C: ClientNet>(
    net: &C,
    data: SocketAddr,
    req: &Request,
    interval: Option<Duration>,
    rate_bps: Option<u64>,
) -> Result<ClientResult, BoxErr> {
    let c = udp_socket(net, data, req)?;
    let sampler = Sampler {
        counters: Arc::new(vec![AtomicU64::new(0)]),
        done: Arc::new(AtomicUsize::new(0)),
    };
    let start = Instant::now();
    let (iv, r) = std::thread::scope(|scope| {
        let (counters, done, c) = (&sampler.counters, &sampler.done, &c);
        let h = scope.spawn(move || -> std::io::Result<(u64, u64, f64)> {
            let c0 = thread_cpu_seconds();
            let mut buf = vec![0x42u8; req.send_size];
            let deadline = Duration::from_secs_f64(req.duration_s.unwrap_or(86400.0));
            let total = req.bytes.unwrap_or(u64::MAX);
            let pacer = Pacer { rate_bps };
            let (mut sent, mut n) = (0u64, 0u64);
            let mut err = None;
            while sent < total && start.elapsed() < deadline {
                let wait = pacer.wait_ns(sent, start.elapsed().as_nanos() as u64);
                if wait > 0 {
                    std::thread::sleep(Duration::from_nanos(wait));
                    continue;
                }
                // The stamp's clock is this host's: the server only uses differences of
                // transit times (RFC 3550 jitter), where the clocks' offset cancels.
                stamp(&mut buf, n, start.elapsed().as_nanos() as u64);
                match c.send(&buf) {
                    Ok(k) => {
                        sent += k as u64;
                        n += 1;
                        counters[0].store(sent, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                    // The server's port may bounce a datagram (ICMP): counted as lost.
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            udp_end(c);
            done.fetch_add(1, Ordering::Release);
            match err {
                Some(e) => Err(e),
                None => Ok((sent, n, thread_cpu_seconds() - c0)),
            }
        });
        let iv = sampler.run(1, interval, start, false);
        (
            iv,
            h.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("udp thread panicked"))),
        )
    });
    let (sent, n, cpu) = r?;
    Ok(ClientResult {
        sent_bytes: sent,
        sent_datagrams: n,
        client_cpu_s: cpu,
        intervals: iv,
        ..Default::default()
    })
}

fn udp_rr<C: ClientNet>(
    net: &C,
    data: SocketAddr,
    req: &Request,
    interval: Option<Duration>,
) -> Result<ClientResult, BoxErr> {
    let c = udp_socket(net, data, req)?;
    c.set_read_timeout_to(Some(UDP_RR_WAIT))?;
    let sampler = Sampler {
        counters: Arc::new(vec![AtomicU64::new(0)]),
        done: Arc::new(AtomicUsize::new(0)),
    };
    let start = Instant::now();
    let deadline = req.duration_s.map(Duration::from_secs_f64);
    let cap = req.transactions.unwrap_or(u64::MAX);
    let (iv, r) = std::thread::scope(|scope| {
        let (counters, done, c) = (&sampler.counters, &sampler.done, &c);
        let h = scope.spawn(
            move || -> std::io::Result<(u64, u64, u64, Histogram, f64)> {
                let c0 = thread_cpu_seconds();
                let mut reqb = vec![0x5au8; req.req_size];
                let mut resp = vec![0u8; req.resp_size.max(8) + 1];
                let mut lat = Histogram::default();
                let (mut n, mut lost, mut seq) = (0u64, 0u64, 0u64);
                let mut err = None;
                while n < cap && deadline.is_none_or(|d| start.elapsed() < d) {
                    seq += 1;
                    // Requests of 8 bytes or more carry a sequence number the server echoes, so a
                    // late response to an earlier (counted lost) request is not taken for this one.
                    let tag = seq.to_le_bytes();
                    let k = reqb.len().min(8);
                    reqb[..k].copy_from_slice(&tag[..k]);
                    let t0 = Instant::now();
                    if let Err(e) = c.send(&reqb) {
                        if e.kind() != std::io::ErrorKind::ConnectionRefused {
                            err = Some(e);
                            break;
                        }
                    }
                    let got = loop {
                        match c.recv(&mut resp) {
                            Ok(m) if k < 8 || (m >= 8 && resp[..8] == tag) => break true,
                            Ok(_) => continue,
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock
                                        | std::io::ErrorKind::TimedOut
                                        | std::io::ErrorKind::ConnectionRefused
                                ) =>
                            {
                                break false
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) => {
                                err = Some(e);
                                break false;
                            }
                        }
                    };
                    if err.is_some() {
                        break;
                    }
                    if got {
                        lat.record(t0.elapsed());
                        n += 1;
                        counters[0].store(n, Ordering::Relaxed);
                    } else {
                        lost += 1;
                    }
                }
                udp_end(c);
                done.fetch_add(1, Ordering::Release);
                match err {
                    Some(e) => Err(e),
                    None => Ok((n, lost, seq, lat, thread_cpu_seconds() - c0)),
                }
            },
        );
        let iv = sampler.run(1, interval, start, true);
        (
            iv,
            h.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("udp-rr thread panicked"))),
        )
    });
    let (n, lost, sent, lat, cpu) = r?;
    Ok(ClientResult {
        transactions: n,
        lost_transactions: lost,
        sent_datagrams: sent,
        sent_bytes: sent * req.req_size as u64,
        bytes: n * (req.req_size + req.resp_size) as u64,
        latency: Some(lat),
        client_cpu_s: cpu,
        intervals: iv,
        ..Default::default()
    })
}

/// Handles one control connection on a server: reads and checks the request, refuses it when
/// `busy` is already set, else runs it. Never panics on bad input: every failure is an error
/// reply (when the connection still works) and a log line.
pub fn handle_control<N: Net>(
    net: &N,
    mut ctl: N::Stream,
    ip: std::net::IpAddr,
    max_seconds: f64,
    busy: &AtomicBool,
    stop: &AtomicBool,
) -> Result<Option<Request>, String> {
    let peer = ctl
        .peer()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "?".into());
    let _ = ctl.set_timeouts(Some(REQUEST_TIMEOUT));
    let mut rd = match ctl.clone_stream() {
        Ok(c) => BufReader::new(c),
        Err(e) => return Err(format!("{peer}: {e}")),
    };
    let mut refuse = |msg: String| {
        let _ = write_json(&mut ctl, &Reply::error(msg.clone()));
        Err(format!("{peer}: refused: {msg}"))
    };
    let line = match read_line(&mut rd) {
        Ok(l) => l,
        Err(e) => return refuse(format!("bad control line: {e}")),
    };
    let req: Request = match serde_json::from_str(&line) {
        Ok(r) => r,
        Err(e) => {
            return refuse(format!(
                "bad request ({e}); expected one JSON object per line, protocol version \
                 {PROTOCOL_VERSION}"
            ))
        }
    };
    if let Err(e) = validate(&req, max_seconds) {
        return refuse(e);
    }
    if busy.swap(true, Ordering::AcqRel) {
        return refuse("busy: this server runs one test at a time; try again when it ends".into());
    }
    // Cleared on every way out, a panic included, so the server never stays "busy".
    struct Release<'a>(&'a AtomicBool);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    let _release = Release(busy);
    let limit = test_limit(&req, max_seconds) + GRACE;
    let _ = ctl.set_timeouts(Some(limit));
    let r = serve_test(net, &mut ctl, &req, ip, max_seconds, stop);
    r.map(|()| Some(req.clone()))
        .map_err(|e| format!("{peer}: {} ended: {e}", req.test.netperf_name()))
}

/// A server on a thread of this process, on `ip` (inside namespace `ns` if given), answering
/// exactly one control connection: how local kernel runs use this module.
/// The server half of one local run on `net`'s sockets at `ip` (netfold's stacks on the
/// in-memory pipe): listens, takes one control connection, runs its test, and ends.
pub fn local_server_on<N>(
    net: Arc<N>,
    ip: std::net::IpAddr,
) -> Result<(SocketAddr, std::thread::JoinHandle<()>), BoxErr>
where
    N: Net + Send + 'static,
    N::Stream: 'static,
    N::Listener: 'static,
{
    let (l, port) = net.listen(ip, 0, REQUEST_TIMEOUT, (None, None))?;
    let h = std::thread::spawn(move || match net.accept(&l) {
        Ok(c) => {
            let busy = AtomicBool::new(false);
            let stop = AtomicBool::new(false);
            if let Err(e) = handle_control(&*net, c, ip, 86400.0, &busy, &stop) {
                eprintln!("netfold: local server: {e}");
            }
        }
        Err(e) => eprintln!("netfold: local server: no client came: {e}"),
    });
    Ok((SocketAddr::new(ip, port), h))
}

pub fn local_server(
    ip: std::net::IpAddr,
    ns: Option<String>,
) -> Result<(SocketAddr, std::thread::JoinHandle<()>), BoxErr> {
    let (tx, rx) = std::sync::mpsc::channel::<std::io::Result<SocketAddr>>();
    let h = std::thread::spawn(move || {
        let setup = || -> std::io::Result<TcpListener> {
            if let Some(ns) = &ns {
                super::kernel::enter_netns(ns)?;
            }
            let l = TcpListener::bind((ip, 0))?;
            set_accept_timeout(&l, REQUEST_TIMEOUT)?;
            Ok(l)
        };
        let l = match setup() {
            Ok(l) => l,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let _ = tx.send(l.local_addr());
        if let Ok((c, _)) = l.accept() {
            let busy = AtomicBool::new(false);
            let stop = AtomicBool::new(false);
            if let Err(e) = handle_control(&KernelNet, c, ip, 86400.0, &busy, &stop) {
                eprintln!("netfold: local server: {e}");
            }
        }
    });
    let addr = rx.recv().map_err(|_| "local server thread died")??;
    Ok((addr, h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    fn req(test: TestKind) -> Request {
        Request {
            version: PROTOCOL_VERSION,
            test,
            duration_s: Some(0.2),
            bytes: None,
            transactions: None,
            send_size: 16384,
            recv_size: 16384,
            req_size: 1,
            resp_size: 1,
            streams: 1,
            bidir: false,
            nodelay: false,
            send_buffer: None,
            recv_buffer: None,
            verify: true,
            cpu: true,
        }
    }

    fn local(r: &Request) -> ClientResult {
        let (addr, h) = local_server(std::net::Ipv4Addr::LOCALHOST.into(), None).unwrap();
        let out = run_client(addr, r, Some(Duration::from_millis(50)), None).unwrap();
        h.join().unwrap();
        out
    }

    #[test]
    fn every_test_runs_over_loopback() {
        let mut r = req(TestKind::Stream);
        r.streams = 2;
        let o = local(&r);
        assert!(o.bytes > 0 && o.streams.len() == 2, "{o:?}");
        assert_eq!(o.bytes, o.streams.iter().map(|s| s.bytes).sum::<u64>());
        assert_eq!(o.verified, Some(true));
        assert!(!o.intervals.is_empty());
        assert!(o.server.cpu_s.is_some());
        r.bidir = true;
        let o = local(&r);
        assert!(
            o.bytes_c2s > 0 && o.bytes_s2c > 0 && o.streams.len() == 4,
            "{o:?}"
        );
        let o = local(&req(TestKind::Maerts));
        assert!(o.bytes_s2c > 0 && o.bytes_c2s == 0);
        for t in [TestKind::Rr, TestKind::Crr, TestKind::UdpRr] {
            let o = local(&req(t));
            assert!(o.transactions > 0, "{t:?}");
            assert!(o.latency.as_ref().and_then(|l| l.summary()).is_some());
            if t != TestKind::UdpRr {
                assert_eq!(o.server.transactions, o.transactions, "{t:?}");
            }
        }
        let mut u = req(TestKind::UdpStream);
        u.send_size = 1472;
        let o = local(&u);
        assert!(o.sent_datagrams > 0 && o.server.datagrams_received > 0);
    }

    #[test]
    fn bad_requests_get_error_replies() {
        let (addr, h) = local_server(std::net::Ipv4Addr::LOCALHOST.into(), None).unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"{\"version\":1,\"test\":\"nonsense\"}\n")
            .unwrap();
        let line = read_line(&mut BufReader::new(c)).unwrap();
        let r: Reply = serde_json::from_str(&line).unwrap();
        assert!(!r.ok && r.error.unwrap().contains("bad request"));
        h.join().unwrap();
        let mut bad = req(TestKind::Rr);
        bad.version = 99;
        assert!(validate(&bad, 60.0).unwrap_err().contains("version"));
        let mut bad = req(TestKind::Rr);
        bad.streams = 4;
        assert!(validate(&bad, 60.0).is_err());
        let mut bad = req(TestKind::UdpStream);
        bad.resp_size = 1 << 40;
        assert!(validate(&bad, 60.0).is_err());
        let mut bad = req(TestKind::Stream);
        bad.duration_s = Some(120.0);
        assert!(validate(&bad, 60.0).unwrap_err().contains("max-seconds"));
    }

    #[test]
    fn a_busy_server_refuses_a_second_test() {
        let l = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut w = c.try_clone().unwrap();
        write_json(&mut w, &req(TestKind::Stream)).unwrap();
        let busy = AtomicBool::new(true);
        let stop = AtomicBool::new(false);
        let e = handle_control(&KernelNet, s, addr.ip(), 60.0, &busy, &stop).unwrap_err();
        assert!(e.contains("busy"), "{e}");
        let r: Reply = serde_json::from_str(&read_line(&mut BufReader::new(c)).unwrap()).unwrap();
        assert!(!r.ok && r.error.unwrap().contains("one test at a time"));
    }
}
