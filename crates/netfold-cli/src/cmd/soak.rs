//! `netfold soak`: two netfold stacks in one process, joined by the in-memory pipe with
//! impairments (loss, reordering, duplication, corruption), run many connections for a given
//! wall time: each opens, moves data both ways that is checked byte for byte, and closes. At
//! the end it prints what happened (connections, bytes verified, the pipe's impairment counts,
//! both stacks' counters) and the peak memory: the process's peak resident set (VmHWM in
//! /proc/self/status) and the most bytes the stacks held in socket buffers at once.
//!
//! Exit status 1 on any verification failure (a byte that differs from the pattern, a length
//! that differs, a connection error), on a stuck connection (no progress for `--stall` of stack
//! time), or on sockets left behind once everything has closed; 101 on a panic (Rust's own).
//!
//! Each connection's byte streams are distinct: the client sends a 24-byte header (connection
//! id, bytes up, bytes down) and then `up` bytes of the [`pattern::fill_bytes`] generator
//! starting at an offset derived from its id; the server answers with `down` bytes from another
//! offset of the same id. Data that strays between connections, repeats or goes missing shows.
//!
//! Time: the stacks run on wall time, fast-forwarded to the next timer when both stacks and
//! the pipe are idle (an RTO after a loss), so a run of D seconds covers at least D seconds of
//! stack time. The stall bound is in stack time. Under `--virtual-time` the clock moves a fixed
//! step per round instead, so a run depends only on `--seed` (impairments, sizes) and
//! `--stack-seed` (the stacks' TCP secrets): a failure found that way can be replayed exactly.

use super::CmdResult;
use clap::Parser;
use netfold::iface::{Stack, StackConfig};
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd, PipeStats, SplitMix64};
use netfold::phy::Device;
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp;
use netfold::tcp::Secret;
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::EthernetAddress;
use netfold_apps::pattern;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;

const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 9000;
/// Connection id, bytes up, bytes down: three little-endian u64s.
const HEADER_LEN: usize = 24;
/// Bytes moved per read or write call.
const CHUNK: usize = 64 * 1024;
/// Pattern offsets: each connection owns 2^41 bytes of the generator, up in the first half,
/// down in the second, so no two streams share an offset.
const ID_SHIFT: u32 = 41;
const DOWN_BIT: u64 = 1 << 40;
/// Rounds between memory samples and stall checks: often enough to see every peak that lasts
/// longer than a few polls, rare enough to cost nothing next to the polls themselves.
const SAMPLE_EVERY: u64 = 64;

#[derive(Parser, Debug)]
pub struct Args {
    /// Wall time to keep opening connections (e.g. 30s, 500ms, 2m); then the open ones finish.
    #[arg(long, value_parser = parse_duration)]
    duration: std::time::Duration,
    /// Connections open at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=16384))]
    conns: u32,
    /// Most bytes each way per connection; each connection draws its sizes from 0..=this.
    #[arg(long, default_value_t = 256 * 1024)]
    max_bytes: u64,
    /// Probability that a frame is lost (each direction).
    #[arg(long, default_value_t = 0.01)]
    loss: f64,
    /// Probability that a frame is held back and delivered after later ones.
    #[arg(long, default_value_t = 0.01)]
    reorder: f64,
    /// Probability that a frame is delivered twice.
    #[arg(long, default_value_t = 0.01)]
    duplicate: f64,
    /// Probability that one bit of a frame is flipped (the checksums must catch it).
    #[arg(long, default_value_t = 0.005)]
    corrupt: f64,
    /// Seed of the impairments and of the connection sizes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A connection that makes no progress for this long (stack time) is stuck: the run fails.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    stall: std::time::Duration,
    /// IP MTU of the pipe.
    #[arg(long, default_value_t = 1500)]
    mtu: usize,
    /// Seed of both stacks' TCP secrets (ISNs, ephemeral ports, SYN cookies). Without it each
    /// run draws one at random; the report prints it, so a failed run can be repeated with the
    /// same secrets (and, with `--virtual-time`, exactly).
    #[arg(long)]
    stack_seed: Option<u64>,
    /// Virtual time: the clock advances a fixed 10 µs per round (plus idle skips) instead of
    /// following the wall clock, and `--duration` counts those rounds' time. With `--seed` and
    /// `--stack-seed` a run is then the same every time, whatever the machine's load.
    #[arg(long)]
    virtual_time: bool,
}

/// `30s`, `500ms`, `2m`, `1h`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let ms = match unit {
        "" | "s" => n.checked_mul(1000),
        "ms" => Some(n),
        "m" | "min" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    };
    ms.filter(|&v| v > 0)
        .map(std::time::Duration::from_millis)
        .ok_or_else(|| format!("bad duration {s:?} (e.g. 30s, 500ms, 2m)"))
}

/// Stack time advanced per round under `--virtual-time`: about what one round of this loop
/// takes on the wall clock (a 30 s run does ~2 million rounds).
const VIRTUAL_TICK_US: u64 = 10;

/// Wall time (or, under `--virtual-time`, rounds times [`VIRTUAL_TICK_US`]) plus idle time
/// skipped (see the module comment).
struct Clock {
    start: std::time::Instant,
    /// `Some(busy µs)` under `--virtual-time`.
    virtual_us: Option<u64>,
    skipped_us: u64,
}

impl Clock {
    /// Time that was not skipped: wall time, or the virtual rounds' time.
    fn busy_us(&self) -> u64 {
        match self.virtual_us {
            Some(v) => v,
            None => u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX),
        }
    }
    fn now(&self) -> Instant {
        // Starts at 1 s so no timer sits at zero.
        Instant::from_micros(self.busy_us().saturating_add(self.skipped_us) + 1_000_000)
    }
    /// One round went by (virtual time only; the wall clock moves by itself).
    fn tick(&mut self) {
        if let Some(v) = self.virtual_us.as_mut() {
            *v += VIRTUAL_TICK_US;
        }
    }
    /// Whether the opening phase of `d` is over.
    fn elapsed_at_least(&self, d: std::time::Duration) -> bool {
        u128::from(self.busy_us()) >= d.as_micros()
    }
    fn skip_to(&mut self, t: Instant) {
        let now = self.now();
        if t > now {
            self.skipped_us += (t - now).total_micros();
        }
    }
}

/// What went wrong; any of these fails the run.
#[derive(Debug)]
struct Failure(String);

/// The client side of one connection.
struct Client {
    id: u64,
    sock: TcpStream,
    up: u64,
    down: u64,
    /// Bytes of header + up pattern queued.
    sent: u64,
    shut: bool,
    /// Down bytes received and verified.
    got: u64,
    last_progress: Instant,
}

/// The server side of one connection, before and after its header arrived.
struct Server {
    sock: TcpStream,
    hdr: Vec<u8>,
    /// (id, up, down) once the header is complete.
    plan: Option<(u64, u64, u64)>,
    got: u64,
    sent: u64,
    eof: bool,
    last_progress: Instant,
}

#[derive(Default)]
struct Tally {
    opened: u64,
    completed: u64,
    bytes_up: u64,
    bytes_down: u64,
    connect_retries: u64,
    peak_buffered: usize,
    peak_sockets: usize,
    peak_open: usize,
}

fn would_block<T>(r: std::io::Result<T>) -> std::io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Byte `pos` onwards of a client's outgoing stream (header, then the up pattern) into `out`.
fn fill_up((id, up, down): (u64, u64, u64), pos: u64, out: &mut [u8]) {
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(&id.to_le_bytes());
    header[8..16].copy_from_slice(&up.to_le_bytes());
    header[16..24].copy_from_slice(&down.to_le_bytes());
    let mut i = 0;
    let mut p = pos;
    while i < out.len() && (p as usize) < HEADER_LEN {
        out[i] = header[p as usize];
        i += 1;
        p += 1;
    }
    if i < out.len() {
        pattern::fill_bytes((id << ID_SHIFT) + (p - HEADER_LEN as u64), &mut out[i..]);
    }
}

/// Compares `got` with the pattern at `base`; the first differing offset on a mismatch.
fn verify(base: u64, got: &[u8], scratch: &mut [u8]) -> Result<(), usize> {
    let want = &mut scratch[..got.len()];
    pattern::fill_bytes(base, want);
    match got.iter().zip(want.iter()).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(i),
    }
}

/// A seed for the stack secrets when `--stack-seed` is not given: from the OS-seeded hasher
/// std uses for `HashMap` (no extra dependency), mixed with the time.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Peak resident set size of this process in bytes (VmHWM in /proc/self/status).
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

struct Soak {
    a: Args,
    clock: Clock,
    client: Stack,
    server: Stack,
    end_c: PipeEnd,
    end_s: PipeEnd,
    listener: TcpListener,
    tcfg: tcp::Config,
    rng: SplitMix64,
    stack_seed: u64,
    clients: Vec<Client>,
    servers: Vec<Server>,
    next_id: u64,
    tally: Tally,
    failures: Vec<Failure>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
}

impl Soak {
    fn new(a: Args) -> Result<Soak, Box<dyn std::error::Error>> {
        if !(576..=65535).contains(&a.mtu) {
            return Err(format!("--mtu {} out of range 576..65535", a.mtu).into());
        }
        if a.max_bytes >= DOWN_BIT {
            return Err(format!("--max-bytes {} must be below {DOWN_BIT}", a.max_bytes).into());
        }
        for (name, p) in [
            ("loss", a.loss),
            ("reorder", a.reorder),
            ("duplicate", a.duplicate),
            ("corrupt", a.corrupt),
        ] {
            if !(0.0..1.0).contains(&p) {
                return Err(format!("--{name} {p}: a probability in [0, 1)").into());
            }
        }
        let pipe = PipeConfig::default()
            .mtu(a.mtu)
            .loss(a.loss)
            .reorder(a.reorder)
            .duplicate(a.duplicate)
            .corrupt(a.corrupt)
            .seed(a.seed);
        let (end_c, end_s) = Pipe::new(pipe);
        let stack_seed = a.stack_seed.unwrap_or_else(random_seed);
        let mut secrets = SplitMix64::new(stack_seed);
        let mut stack = |addr, last| {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&secrets.next_u64().to_le_bytes());
            key[8..].copy_from_slice(&secrets.next_u64().to_le_bytes());
            Stack::new(StackConfig {
                addr,
                prefix_len: 24,
                mac: EthernetAddress([0x02, 0, 0, 0, 0, last]),
                mtu: a.mtu,
                // Reproducible runs: the secret comes from `--stack-seed` (printed in the
                // report). Both stacks face only this in-memory pipe, never a network.
                tcp_secret: Secret::fixed_for_tests(key),
                ..StackConfig::default()
            })
        };
        let client = stack(CLIENT_ADDR, 1);
        let mut server = stack(SERVER_ADDR, 2);
        let tcfg = tcp::Config {
            mss: (a.mtu - netfold::wire::tcp::IPV4_MSS_OVERHEAD).min(usize::from(u16::MAX)) as u16,
            // Many short connections from one address: with 16384 ephemeral ports, TIME_WAIT
            // bounds the open rate at 16384 / time_wait. The pipe's RTT is microseconds and its
            // reordering holds a frame for milliseconds at most, so 500 ms is still far longer
            // than any old duplicate can live (RFC 9293 §3.4.2's purpose of 2*MSL).
            time_wait: Duration::from_millis(500),
            ..tcp::Config::default()
        };
        let listener = TcpListener::bind(
            &mut server,
            SocketAddrV4::new(SERVER_ADDR, PORT),
            a.conns as usize,
            tcfg,
        )?;
        Ok(Soak {
            rng: SplitMix64::new(a.seed ^ 0x5eed_50a4),
            clock: Clock {
                start: std::time::Instant::now(),
                virtual_us: a.virtual_time.then_some(0),
                skipped_us: 0,
            },
            stack_seed,
            client,
            server,
            end_c,
            end_s,
            listener,
            tcfg,
            clients: Vec::new(),
            servers: Vec::new(),
            next_id: 1,
            tally: Tally::default(),
            failures: Vec::new(),
            buf: vec![0; CHUNK],
            scratch: vec![0; CHUNK],
            a,
        })
    }

    fn fail(&mut self, msg: String) {
        // The first few as they happen; all are counted, and the report lists the first 20.
        if self.failures.len() < 20 {
            eprintln!("netfold soak: FAIL: {msg}");
        }
        self.failures.push(Failure(msg));
    }

    fn open(&mut self, now: Instant) -> bool {
        let mut did = false;
        while self.clients.len() < self.a.conns as usize {
            let remote = SocketAddrV4::new(SERVER_ADDR, PORT);
            match TcpStream::connect(&mut self.client, now, remote, self.tcfg) {
                Ok(sock) => {
                    let id = self.next_id;
                    self.next_id += 1;
                    let up = self.rng.below(self.a.max_bytes + 1);
                    let down = self.rng.below(self.a.max_bytes + 1);
                    self.clients.push(Client {
                        id,
                        sock,
                        up,
                        down,
                        sent: 0,
                        shut: false,
                        got: 0,
                        last_progress: now,
                    });
                    self.tally.opened += 1;
                    did = true;
                }
                // Every ephemeral port busy (TIME_WAIT): try again after some close.
                Err(e) if e.kind() == ErrorKind::AddrInUse || e.kind() == ErrorKind::WouldBlock => {
                    self.tally.connect_retries += 1;
                    break;
                }
                Err(e) => {
                    self.fail(format!("connect: {e}"));
                    break;
                }
            }
        }
        did
    }

    fn accept(&mut self, now: Instant) -> bool {
        let mut did = false;
        loop {
            match would_block(self.listener.accept(&mut self.server)) {
                Ok(Some((sock, _))) => {
                    self.servers.push(Server {
                        sock,
                        hdr: Vec::with_capacity(HEADER_LEN),
                        plan: None,
                        got: 0,
                        sent: 0,
                        eof: false,
                        last_progress: now,
                    });
                    did = true;
                }
                Ok(None) => return did,
                Err(e) => {
                    self.fail(format!("accept: {e}"));
                    return did;
                }
            }
        }
    }

    /// Moves one client on; `Ok(true)` when it finished and was closed.
    fn drive_client(&mut self, i: usize, now: Instant) -> Result<(bool, bool), String> {
        let st = &mut self.client;
        let c = &mut self.clients[i];
        let id = c.id;
        if !c
            .sock
            .is_connected(st)
            .map_err(|e| format!("conn {id}: {e}"))?
        {
            return Ok((false, false));
        }
        let mut did = false;
        let total_up = HEADER_LEN as u64 + c.up;
        while c.sent < total_up {
            let n = ((total_up - c.sent) as usize).min(CHUNK);
            fill_up((c.id, c.up, c.down), c.sent, &mut self.buf[..n]);
            match would_block(c.sock.write(st, &self.buf[..n])) {
                Ok(Some(k)) if k > 0 => {
                    c.sent += k as u64;
                    did = true;
                }
                Ok(_) => break,
                Err(e) => return Err(format!("conn {id}: write: {e}")),
            }
        }
        if c.sent == total_up && !c.shut {
            c.sock
                .shutdown_write(st)
                .map_err(|e| format!("conn {id}: shutdown: {e}"))?;
            c.shut = true;
            did = true;
        }
        loop {
            match would_block(c.sock.read(st, &mut self.buf)) {
                Ok(Some(0)) => {
                    if c.got != c.down {
                        return Err(format!(
                            "conn {id}: end of stream after {} of {} bytes down",
                            c.got, c.down
                        ));
                    }
                    if !c.shut {
                        return Err(format!("conn {id}: server closed before the upload ended"));
                    }
                    let sock = c.sock;
                    self.tally.bytes_down += c.down;
                    sock.close(st)
                        .map_err(|e| format!("conn {id}: close: {e}"))?;
                    return Ok((true, true));
                }
                Ok(Some(n)) => {
                    if c.got + n as u64 > c.down {
                        return Err(format!(
                            "conn {id}: {} bytes down, more than the {} sent",
                            c.got + n as u64,
                            c.down
                        ));
                    }
                    let base = (id << ID_SHIFT) | DOWN_BIT;
                    if let Err(at) = verify(base + c.got, &self.buf[..n], &mut self.scratch) {
                        return Err(format!(
                            "conn {id}: down byte {} differs from the pattern",
                            c.got + at as u64
                        ));
                    }
                    c.got += n as u64;
                    did = true;
                }
                Ok(None) => break,
                Err(e) => return Err(format!("conn {id}: read: {e}")),
            }
        }
        if did {
            c.last_progress = now;
        }
        Ok((did, false))
    }

    /// Moves one server connection on; `Ok(true)` when it finished and was closed.
    fn drive_server(&mut self, i: usize, now: Instant) -> Result<(bool, bool), String> {
        let st = &mut self.server;
        let s = &mut self.servers[i];
        let mut did = false;
        while !s.eof {
            match would_block(s.sock.read(st, &mut self.buf)) {
                Ok(Some(0)) => {
                    s.eof = true;
                    did = true;
                    match s.plan {
                        Some((id, up, _)) if s.got != up => {
                            return Err(format!(
                                "conn {id}: end of stream after {} of {up} bytes up",
                                s.got
                            ))
                        }
                        None => return Err("end of stream inside the header".into()),
                        _ => {}
                    }
                }
                Ok(Some(n)) => {
                    did = true;
                    let mut data = &self.buf[..n];
                    if s.plan.is_none() {
                        let k = (HEADER_LEN - s.hdr.len()).min(data.len());
                        s.hdr.extend_from_slice(&data[..k]);
                        data = &data[k..];
                        if s.hdr.len() == HEADER_LEN {
                            let word = |j: usize| {
                                let mut w = [0u8; 8];
                                w.copy_from_slice(&s.hdr[j * 8..j * 8 + 8]);
                                u64::from_le_bytes(w)
                            };
                            let (id, up, down) = (word(0), word(1), word(2));
                            if id == 0 || up > self.a.max_bytes || down > self.a.max_bytes {
                                return Err(format!("corrupt header {:?}", s.hdr));
                            }
                            s.plan = Some((id, up, down));
                        }
                    }
                    if let Some((id, up, _)) = s.plan {
                        if s.got + data.len() as u64 > up {
                            return Err(format!("conn {id}: more than the {up} bytes up"));
                        }
                        if let Err(at) = verify((id << ID_SHIFT) + s.got, data, &mut self.scratch) {
                            return Err(format!(
                                "conn {id}: up byte {} differs from the pattern",
                                s.got + at as u64
                            ));
                        }
                        s.got += data.len() as u64;
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(format!("server side: read: {e}")),
            }
        }
        if let Some((id, up, down)) = s.plan {
            while s.sent < down {
                let n = ((down - s.sent) as usize).min(CHUNK);
                pattern::fill_bytes(((id << ID_SHIFT) | DOWN_BIT) + s.sent, &mut self.buf[..n]);
                match would_block(s.sock.write(st, &self.buf[..n])) {
                    Ok(Some(k)) if k > 0 => {
                        s.sent += k as u64;
                        did = true;
                    }
                    Ok(_) => break,
                    Err(e) => return Err(format!("conn {id}: server write: {e}")),
                }
            }
            if s.eof && s.sent == down {
                self.tally.bytes_up += up;
                // close(): FIN after the queued bytes; the layer finishes in the background.
                s.sock
                    .close(st)
                    .map_err(|e| format!("conn {id}: server close: {e}"))?;
                return Ok((true, true));
            }
        }
        if did {
            s.last_progress = now;
        }
        Ok((did, false))
    }

    fn drive_all(&mut self, now: Instant) -> bool {
        let mut did = false;
        let mut i = 0;
        while i < self.clients.len() {
            match self.drive_client(i, now) {
                Ok((d, done)) => {
                    did |= d;
                    if done {
                        self.clients.swap_remove(i);
                        self.tally.completed += 1;
                        continue;
                    }
                }
                Err(m) => {
                    self.fail(m);
                    let c = self.clients.swap_remove(i);
                    let _ = c.sock.abort(&mut self.client);
                    continue;
                }
            }
            i += 1;
        }
        let mut i = 0;
        while i < self.servers.len() {
            match self.drive_server(i, now) {
                Ok((d, done)) => {
                    did |= d;
                    if done {
                        self.servers.swap_remove(i);
                        continue;
                    }
                }
                Err(m) => {
                    self.fail(m);
                    let s = self.servers.swap_remove(i);
                    let _ = s.sock.abort(&mut self.server);
                    continue;
                }
            }
            i += 1;
        }
        did
    }

    /// Fails every connection that made no progress for `--stall`.
    fn check_stalls(&mut self, now: Instant) {
        let stall = Duration::from_micros(self.a.stall.as_micros() as u64);
        let mut stuck = Vec::new();
        self.clients.retain(|c| {
            let keep = now - c.last_progress <= stall;
            if !keep {
                stuck.push((
                    c.sock,
                    true,
                    format!(
                        "conn {} stuck: no progress for {} ms (sent {} of {}, received {} of {})",
                        c.id,
                        (now - c.last_progress).total_millis(),
                        c.sent,
                        HEADER_LEN as u64 + c.up,
                        c.got,
                        c.down
                    ),
                ));
            }
            keep
        });
        self.servers.retain(|s| {
            let keep = now - s.last_progress <= stall;
            if !keep {
                stuck.push((s.sock, false, format!(
                    "server side of conn {:?} stuck: no progress for {} ms (received {}, sent {}, eof {})",
                    s.plan.map(|p| p.0),
                    (now - s.last_progress).total_millis(),
                    s.got,
                    s.sent,
                    s.eof
                )));
            }
            keep
        });
        for (sock, client, m) in stuck {
            let state = if client {
                sock.state(&self.client)
            } else {
                sock.state(&self.server)
            };
            self.fail(format!("{m}, state {state:?}"));
            let _ = if client {
                sock.abort(&mut self.client)
            } else {
                sock.abort(&mut self.server)
            };
        }
    }

    fn sample_memory(&mut self) {
        let mut buffered = 0usize;
        for c in &self.clients {
            let h = c.sock.handle();
            let t = self.client.tcp();
            buffered += t.recv_queue(h).unwrap_or(0) + t.send_queue(h).unwrap_or(0);
        }
        for s in &self.servers {
            let h = s.sock.handle();
            let t = self.server.tcp();
            buffered += t.recv_queue(h).unwrap_or(0) + t.send_queue(h).unwrap_or(0);
        }
        let t = &mut self.tally;
        t.peak_buffered = t.peak_buffered.max(buffered);
        let socks = self.client.tcp().socket_count() + self.server.tcp().socket_count();
        t.peak_sockets = t.peak_sockets.max(socks);
        t.peak_open = t.peak_open.max(self.clients.len() + self.servers.len());
    }

    /// One round: both stacks, then the applications. Idle: time jumps to the next timer.
    fn step(&mut self, opening: bool) -> bool {
        let now = self.clock.now();
        let mut did = self.client.poll(now, &mut self.end_c);
        did |= self.server.poll(now, &mut self.end_s);
        if opening {
            did |= self.open(now);
        }
        did |= self.accept(now);
        did |= self.drive_all(now);
        if !did {
            let next = [
                self.client.poll_at(now),
                self.server.poll_at(now),
                self.end_c.poll_at(),
                self.end_s.poll_at(),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_millis(1));
            self.clock.skip_to(next);
        }
        self.clock.tick();
        did
    }

    fn run(&mut self) {
        let mut rounds = 0u64;
        while !self.clock.elapsed_at_least(self.a.duration) {
            self.step(true);
            rounds += 1;
            if rounds.is_multiple_of(SAMPLE_EVERY) {
                self.sample_memory();
                self.check_stalls(self.clock.now());
            }
        }
        // Let the open connections finish (each bounded by the stall check).
        while !self.clients.is_empty() || !self.servers.is_empty() {
            self.step(false);
            rounds += 1;
            if rounds.is_multiple_of(SAMPLE_EVERY) {
                self.sample_memory();
                self.check_stalls(self.clock.now());
            }
        }
        // Then TIME_WAIT and the last retransmissions: every socket but the listener must go.
        let limit = self.clock.now() + Duration::from_micros(self.a.stall.as_micros() as u64);
        while self.client.tcp().socket_count() + self.server.tcp().socket_count() > 1
            && self.clock.now() < limit
        {
            self.step(false);
        }
        let left = self.client.tcp().socket_count() + self.server.tcp().socket_count();
        if left > 1 {
            self.fail(format!(
                "{} sockets left after every connection closed (only the listener should be)",
                left - 1
            ));
        }
    }

    fn report(&self, wall: std::time::Duration) {
        let t = &self.tally;
        let stack_s =
            (self.clock.now() - Instant::from_micros(1_000_000)).total_micros() as f64 / 1e6;
        println!(
            "soak: wall {:.1} s, stack time {:.1} s ({:.1} s idle skipped{}), seed {}, stack seed {}",
            wall.as_secs_f64(),
            stack_s,
            self.clock.skipped_us as f64 / 1e6,
            if self.a.virtual_time { ", virtual" } else { "" },
            self.a.seed,
            self.stack_seed
        );
        println!(
            "soak: impairments loss {} reorder {} duplicate {} corrupt {}",
            self.a.loss, self.a.reorder, self.a.duplicate, self.a.corrupt
        );
        let rows: [(&str, u64); 8] = [
            ("connections_opened", t.opened),
            ("connections_completed", t.completed),
            ("bytes_up_verified", t.bytes_up),
            ("bytes_down_verified", t.bytes_down),
            ("connect_retries", t.connect_retries),
            ("peak_open_connections", t.peak_open as u64),
            ("peak_sockets", t.peak_sockets as u64),
            ("failures", self.failures.len() as u64),
        ];
        for (name, v) in rows {
            println!("soak  {name:<28} {v:>12}");
        }
        println!(
            "soak  {:<28} {:>12}",
            "peak_buffered_bytes", t.peak_buffered
        );
        println!(
            "soak  {:<28} {:>12}",
            "peak_rss_bytes",
            peak_rss_bytes().map_or("unknown".to_string(), |b| b.to_string())
        );
        for (name, s) in [("c->s", self.end_c.stats()), ("s->c", self.end_s.stats())] {
            print_pipe(name, &s);
        }
        println!("client stack:\n{}", self.client.counters());
        println!("server stack:\n{}", self.server.counters());
    }
}

fn print_pipe(dir: &str, s: &PipeStats) {
    let rows: [(&str, u64); 7] = [
        ("sent", s.sent),
        ("dropped_loss", s.dropped_loss),
        ("dropped_full", s.dropped_full),
        ("duplicated", s.duplicated),
        ("reordered", s.reordered),
        ("corrupted", s.corrupted),
        ("bytes", s.bytes),
    ];
    for (name, v) in rows {
        println!("pipe  {:<28} {v:>12}", format!("{dir}_{name}"));
    }
}

pub fn run(a: Args) -> CmdResult {
    let mut soak = Soak::new(a)?;
    let start = std::time::Instant::now();
    soak.run();
    soak.report(start.elapsed());
    if soak.failures.is_empty() {
        println!("soak: PASS");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("soak: FAIL ({} failures)", soak.failures.len());
        println!(
            "soak: same impairments and secrets again: --seed {} --stack-seed {}{}",
            soak.a.seed,
            soak.stack_seed,
            if soak.a.virtual_time {
                " --virtual-time (exactly this run)"
            } else {
                ""
            }
        );
        for f in soak.failures.iter().take(20) {
            println!("  {}", f.0);
        }
        Ok(ExitCode::from(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(
            parse_duration("30s"),
            Ok(std::time::Duration::from_secs(30))
        );
        assert_eq!(parse_duration("3"), Ok(std::time::Duration::from_secs(3)));
        assert_eq!(
            parse_duration("500ms"),
            Ok(std::time::Duration::from_millis(500))
        );
        assert_eq!(
            parse_duration("2m"),
            Ok(std::time::Duration::from_secs(120))
        );
        for bad in ["", "s", "0s", "1x", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn streams_of_different_connections_differ() {
        let mk = |id| (id, 100, 100);
        let (mut x, mut y) = (vec![0u8; 124], vec![0u8; 124]);
        fill_up(mk(1), 0, &mut x);
        fill_up(mk(2), 0, &mut y);
        assert_eq!(&x[0..8], &1u64.to_le_bytes());
        assert_ne!(x[HEADER_LEN..], y[HEADER_LEN..]);
        // A stream regenerated from a later offset matches the tail of the whole.
        let mut tail = vec![0u8; 100];
        fill_up(mk(1), 24, &mut tail);
        assert_eq!(tail[..], x[24..]);
        let mut scratch = vec![0u8; 124];
        assert_eq!(verify(1 << ID_SHIFT, &x[24..], &mut scratch), Ok(()));
        x[30] ^= 1;
        assert_eq!(verify(1 << ID_SHIFT, &x[24..], &mut scratch), Err(6));
    }
}
