//! netfold with client and server stacks on two threads pinned to separate CPUs, joined by the
//! in-memory pipe (which is a cross-thread queue). Each thread polls its own stack, the way
//! poll-mode user-space stacks run, but adaptively ([`netfold_rt::backoff`]): it busy-polls
//! while polls find work, then yields the CPU between polls for a busy-poll budget, then sleeps
//! until the device wakes it (the pipe's armed wake-up, a TAP's descriptor) or a timer is due,
//! so two threads sharing one core take turns instead of starving each other. There is no
//! clock fast-forward here, timers run in real time.

use super::affinity::thread_cpu_seconds;
use super::latency::Histogram;
use super::memnet::BoxErr;
use super::netfold_pipe::{endpoints, pipe_config, stack_config_ip, tcp_config};
use super::pattern::{Pattern, Verifier};
use super::{Measurement, Params, Test};
use netfold::iface::Stack;
use netfold::phy::pipe::Pipe;
use netfold::phy::Device;
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp;
use netfold::time::Instant;
use netfold_os::clock::Epoch;
use netfold_os::wait::wait_readable_any;
use netfold_rt::backoff::Backoff;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant as WallInstant};

const PORT: u16 = 12865;
/// A thread that sees no progress for this long gives up (and tells the other to).
const STALL: Duration = Duration::from_secs(30);
/// Longest sleep of an idle thread even when no deadline is due: a safety net against a state
/// change nobody announced (the other thread's abort), at most 10 wake-ups a second like the
/// C API's driver (`netfold-ffi`'s `MAX_SLEEP`).
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// The pipe's wake-up for a sleeping thread: unpark it (a futex wake, paid only when the thread
/// armed the pipe before parking).
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// How often a [`Node`] polled and slept: an idle node must sleep, not spin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollStats {
    pub polls: u64,
    pub empty_polls: u64,
    pub sleeps: u64,
}

/// One stack and its device (an end of the pipe, a TAP), on one thread.
pub struct Node<D: Device> {
    pub stack: Stack,
    pub end: D,
    wall: WallInstant,
    reuse: u32,
    worked: bool,
    epoch: WallInstant,
    /// `epoch` on `netfold_os::clock` (the TSC where the kernel trusts it): what the polls
    /// read, at ~10 ns instead of a vDSO `clock_gettime`'s ~25.
    fast: Epoch,
    abort: Arc<AtomicBool>,
    last_progress: WallInstant,
    backoff: Backoff,
    /// Unparks the thread that polls the node (made at the first arm on that thread: a node
    /// may be built on one thread and driven on another).
    waker: Option<(std::thread::ThreadId, Waker)>,
    /// The device's wake-up is armed: the next empty poll parks.
    armed: bool,
    /// Longest idle sleep ([`MAX_SLEEP`]; tests lengthen it to show that a wake-up, not the
    /// timeout, ended a sleep).
    max_sleep: Duration,
    pub poll_stats: PollStats,
    /// A zero-copy sender's completion counts (`--zerocopy`), for the run's details.
    pub zc_report: Option<String>,
}

impl<D: Device> Node<D> {
    pub fn new(stack: Stack, end: D, epoch: WallInstant, abort: Arc<AtomicBool>) -> Self {
        Node {
            stack,
            end,
            wall: WallInstant::now(),
            reuse: 0,
            worked: false,
            epoch,
            fast: Epoch::from_std(epoch),
            abort,
            last_progress: WallInstant::now(),
            backoff: Backoff::default(),
            waker: None,
            armed: false,
            max_sleep: MAX_SLEEP,
            poll_stats: PollStats::default(),
            zc_report: None,
        }
    }

    /// The wake-up that unparks the calling thread.
    fn thread_waker(&mut self) -> Waker {
        let me = std::thread::current();
        match &self.waker {
            Some((id, w)) if *id == me.id() => w.clone(),
            _ => {
                let w = Waker::from(Arc::new(Unpark(me.clone())));
                self.waker = Some((me.id(), w.clone()));
                w
            }
        }
    }

    pub(crate) fn now(&self) -> Instant {
        self.fast.instant()
    }

    /// The time for this poll. Reading the clock is a vDSO call (~20 ns) that showed up as a
    /// fifth of a busy two-thread profile, so while polls keep finding work the last reading
    /// is reused for up to `CLOCK_REUSE` polls (a few microseconds — timers here are
    /// milliseconds); an idle poll always reads it, like a kernel's jiffies but finer.
    fn poll_time(&mut self, worked_last: bool) -> (WallInstant, Instant) {
        const CLOCK_REUSE: u32 = 8;
        if worked_last && self.reuse < CLOCK_REUSE {
            self.reuse += 1;
        } else {
            self.reuse = 0;
            self.wall = self.epoch + self.fast.elapsed();
        }
        let t = self.wall;
        (
            t,
            Instant::from_micros(t.saturating_duration_since(self.epoch).as_micros() as u64),
        )
    }

    /// One poll; errors out if the other side gave up or nothing moved for too long.
    pub(crate) fn poll(&mut self, progressed: bool) -> Result<(), BoxErr> {
        let (wall, now) = self.poll_time(self.worked);
        self.worked = self.poll_once(now);
        if self.worked || progressed {
            self.last_progress = wall;
            self.backoff.worked();
        } else if wall.saturating_duration_since(self.last_progress) > STALL {
            self.abort.store(true, Ordering::Relaxed);
            return Err(format!(
                "no progress for 30 s; connections:\n{}counters:\n{}",
                self.stack.tcp().describe_conns(),
                self.stack.counters()
            )
            .into());
        } else {
            self.back_off(now, self.max_sleep);
        }
        if self.abort.load(Ordering::Relaxed) {
            return Err(format!(
                "the other side failed; connections here:\n{}",
                self.stack.tcp().describe_conns()
            )
            .into());
        }
        Ok(())
    }

    /// One poll that never backs off (a thread that polls two stacks backs off itself, only
    /// when both are idle). Returns whether the stack worked or the caller progressed; errors
    /// out like [`Node::poll`].
    pub(crate) fn poll_spin(&mut self, progressed: bool) -> Result<bool, BoxErr> {
        let (wall, now) = self.poll_time(self.worked);
        self.worked = self.poll_once(now);
        if self.worked || progressed {
            self.last_progress = wall;
        } else if wall.saturating_duration_since(self.last_progress) > STALL {
            self.abort.store(true, Ordering::Relaxed);
            return Err(format!(
                "no progress for 30 s; connections:\n{}counters:\n{}",
                self.stack.tcp().describe_conns(),
                self.stack.counters()
            )
            .into());
        }
        if self.abort.load(Ordering::Relaxed) {
            return Err(format!(
                "the other side failed; connections here:\n{}",
                self.stack.tcp().describe_conns()
            )
            .into());
        }
        Ok(self.worked || progressed)
    }

    /// Polls the stack once; disarms the device's wake-up when the poll found work.
    fn poll_once(&mut self, now: Instant) -> bool {
        let worked = self.stack.poll(now, &mut self.end);
        self.poll_stats.polls += 1;
        if worked {
            if self.armed {
                self.end.wake_on_rx(None);
                self.armed = false;
            }
        } else {
            self.poll_stats.empty_polls += 1;
        }
        worked
    }

    /// After an empty poll at `now`: spin, yield or sleep as the back-off says. A sleep lasts
    /// until the device wakes the thread or the stack's (or device's) next deadline, at most
    /// `longest`. A pipe is armed first and polled once more before the thread parks (see
    /// `Device::wake_on_rx`); a device with neither a descriptor nor a wake-up only yields.
    fn back_off(&mut self, now: Instant, longest: Duration) {
        let step = self.backoff.idle(now);
        if self.backoff.pause(step) {
            return;
        }
        let due = [self.stack.poll_at(now), self.end.poll_at()]
            .into_iter()
            .flatten()
            .min();
        let bound = due.map_or(longest, |at| {
            Duration::from(at.saturating_since(now)).min(longest)
        });
        if bound.is_zero() {
            return;
        }
        if let Some(fd) = self.end.readable_fd() {
            self.poll_stats.sleeps += 1;
            let _ = wait_readable_any(&[fd], Some(bound));
            self.backoff.worked();
        } else if self.armed {
            self.poll_stats.sleeps += 1;
            std::thread::park_timeout(bound);
            self.end.wake_on_rx(None);
            self.armed = false;
            self.backoff.worked();
        } else {
            let w = self.thread_waker();
            if self.end.wake_on_rx(Some(&w)) {
                // The next poll looks once more; if it finds nothing, the thread parks.
                self.armed = true;
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// For a thread that runs every party of its connections (both stacks and both
    /// applications: the `--threads 1` shards), after a round in which nothing moved: yield
    /// within the busy-poll budget as [`Backoff`] says, else sleep until `due` (the earliest
    /// deadline of its stacks), at most 1 ms. Nothing but a timer can make progress then: no
    /// other thread sends to it. It used to yield without end, which on a core shared with a
    /// CPU hog gave the hog a whole scheduler slice per idle round: `crr --shards 1
    /// --threads 1` ran ~200-450 transactions/s at 0.5% CPU while other programs compiled.
    pub(crate) fn idle_alone(&mut self, now: Instant, due: Option<Instant>) {
        let step = self.backoff.idle(now);
        if self.backoff.pause(step) {
            return;
        }
        let longest = Duration::from_millis(1);
        let bound = due.map_or(longest, |at| {
            Duration::from(at.saturating_since(now)).min(longest)
        });
        if !bound.is_zero() {
            self.poll_stats.sleeps += 1;
            std::thread::sleep(bound);
        }
        self.backoff.worked();
    }

    /// A round moved something: the next idle round starts a fresh busy-poll budget.
    pub(crate) fn busy(&mut self) {
        self.backoff.worked();
    }

    /// Retries `op` (which returns WouldBlock when it cannot complete yet) while polling.
    pub(crate) fn until<T>(
        &mut self,
        mut op: impl FnMut(&mut Stack) -> std::io::Result<T>,
    ) -> Result<T, BoxErr> {
        loop {
            match op(&mut self.stack) {
                Ok(v) => return Ok(v),
                Err(e) if e.kind() == ErrorKind::WouldBlock => self.poll(false)?,
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn write_all(&mut self, s: TcpStream, mut data: &[u8]) -> Result<(), BoxErr> {
        while !data.is_empty() {
            let n = self.until(|st| s.write(st, data))?;
            data = &data[n..];
        }
        Ok(())
    }

    fn read_exact(&mut self, s: TcpStream, buf: &mut [u8]) -> Result<bool, BoxErr> {
        let mut got = 0;
        while got < buf.len() {
            let n = self.until(|st| s.read(st, &mut buf[got..]))?;
            if n == 0 {
                return Ok(false);
            }
            got += n;
        }
        Ok(true)
    }

    /// After close(): keeps polling so the FIN (and its retransmissions) leave before the
    /// thread drops the stack — until the stack has been idle for 20 ms with nothing
    /// unacknowledged, at most 3 s. Idleness alone is not enough: on a lossy link a lost FIN
    /// is sent again only when the retransmission timer fires (200 ms at least), and a
    /// thread that had already left made the peer wait for that FIN until its 30 s stall
    /// check (`stream --link emu --loss 0.01`, about one run in 50: the peer in FIN-WAIT-2
    /// with everything acknowledged, this side gone). 3 s covers four retransmissions.
    pub(crate) fn linger(&mut self) {
        const IDLE: Duration = Duration::from_millis(20);
        const MAX: Duration = Duration::from_secs(3);
        let t = WallInstant::now();
        let mut idle_since = WallInstant::now();
        while t.elapsed() < MAX && (idle_since.elapsed() < IDLE || self.stack.tcp().has_unacked()) {
            let now = self.now();
            if self.poll_once(now) {
                idle_since = WallInstant::now();
                self.backoff.worked();
            } else {
                // Waiting for a retransmission timer: sleep until it (at most 50 ms).
                let longest = if self.stack.tcp().has_unacked() {
                    Duration::from_millis(50)
                } else {
                    IDLE.saturating_sub(idle_since.elapsed())
                };
                self.back_off(now, longest);
            }
        }
        if self.armed {
            self.end.wake_on_rx(None);
            self.armed = false;
        }
    }
}

pub struct Outcome {
    pub counters: String,
    pub bytes: u64,
    pub transactions: u64,
    pub verified: bool,
    pub cpu_s: f64,
    /// RR/CRR client: per-transaction times.
    pub latency: Option<Histogram>,
    /// The server thread's polls and sleeps.
    pub poll_stats: PollStats,
    /// The server stack's passes over payload bytes.
    pub passes: netfold::iface::counters::PayloadPasses,
    /// The server's zero-copy completion counts (maerts `--zerocopy`).
    pub zc: Option<String>,
}

pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    if p.test == Test::UdpStream {
        return Err("udp-stream is not implemented for netfold --threads 2".into());
    }
    let (end_c, end_s) = Pipe::new(pipe_config(p));
    let (client_ip, server_ip) = endpoints(p.family);
    run_pair(p, end_c, end_s, client_ip, server_ip)
}

/// Runs the test between a netfold client stack on `end_c` (address `client_ip`) and a server
/// stack on `end_s` (address `server_ip`), one thread each: the in-memory pipe's two ends, or two
/// packet sockets on the link emulator's interfaces (`--link emu`).
pub fn run_pair<D: Device + Send + 'static>(
    p: &Params,
    end_c: D,
    end_s: D,
    client_ip: std::net::IpAddr,
    server_ip: std::net::IpAddr,
) -> Result<Measurement, BoxErr> {
    let epoch = WallInstant::now();
    let abort = Arc::new(AtomicBool::new(false));
    let tcfg = tcp_config(p);
    let pattern = Arc::new(Pattern::new(p.send_size.max(p.recv_size).max(1)));
    let mut server_node = Node::new(
        Stack::new(netfold::iface::StackConfig {
            gro: p.gro,
            ..stack_config_ip(server_ip, 2, p.mtu, p.copy_mode)
        }),
        end_s,
        epoch,
        Arc::clone(&abort),
    );
    let listener = TcpListener::bind(
        &mut server_node.stack,
        SocketAddr::new(server_ip, PORT),
        64,
        tcfg,
    )?;
    let sp = p.clone();
    let spat = Arc::clone(&pattern);
    let server = std::thread::spawn(move || -> Result<Outcome, String> {
        sp.pin.apply(true);
        let cpu0 = thread_cpu_seconds();
        let r = serve(&mut server_node, listener, &sp, &spat).map_err(|e| e.to_string());
        if r.is_err() {
            server_node.abort.store(true, Ordering::Relaxed);
        }
        r.map(|o| Outcome {
            cpu_s: thread_cpu_seconds() - cpu0,
            counters: format!("{}", server_node.stack.counters()),
            poll_stats: server_node.poll_stats,
            passes: server_node.stack.counters().payload_passes(),
            zc: server_node.zc_report.take(),
            ..o
        })
    });

    p.pin.apply(false);
    let mut node = Node::new(
        Stack::new(netfold::iface::StackConfig {
            gro: p.gro,
            ..stack_config_ip(client_ip, 1, p.mtu, p.copy_mode)
        }),
        end_c,
        epoch,
        Arc::clone(&abort),
    );
    let cpu0 = thread_cpu_seconds();
    let start = WallInstant::now();
    let client = drive(
        &mut node,
        p,
        tcfg,
        SocketAddr::new(server_ip, PORT),
        &pattern,
        start,
    );
    if client.is_err() {
        abort.store(true, Ordering::Relaxed);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let client_cpu = thread_cpu_seconds() - cpu0;
    let srv = server
        .join()
        .map_err(|_| "netfold server thread panicked")?;
    let (cl, srv) = match (client, srv) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(c), Err(s)) => return Err(format!("client: {c}; server: {s}").into()),
        (Err(c), Ok(_)) => return Err(format!("client: {c}").into()),
        (Ok(_), Err(s)) => return Err(format!("server: {s}").into()),
    };
    let (bytes, verified) = match p.test {
        Test::Stream => (
            srv.bytes,
            p.verify.then_some(srv.verified && srv.bytes == cl.bytes),
        ),
        Test::Maerts => (
            cl.bytes,
            p.verify.then_some(cl.verified && cl.bytes == srv.bytes),
        ),
        _ => (cl.transactions * (p.req_size + p.resp_size) as u64, None),
    };
    // Both stacks are new for this run and the handshake moves no payload: their pass
    // counters are the transfer's.
    let client_passes = node.stack.counters().payload_passes();
    let passes = match p.test {
        Test::Stream => Some(super::Passes {
            sender: Some(client_passes),
            receiver: Some(srv.passes),
        }),
        Test::Maerts => Some(super::Passes {
            sender: Some(srv.passes),
            receiver: Some(client_passes),
        }),
        _ => None,
    };
    let mut details = serde_json::Map::new();
    details.insert("threads".into(), 2.into());
    details.insert("client_cpu_s".into(), client_cpu.into());
    details.insert("server_cpu_s".into(), srv.cpu_s.into());
    details.insert(
        "client_counters".into(),
        super::counters_json(&node.stack.counters()),
    );
    details.insert(
        "server_counters".into(),
        super::counters_json(&srv.counters),
    );
    for (side, z) in [
        ("client", node.zc_report.take()),
        ("server", srv.zc.clone()),
    ] {
        if let Some(z) = z {
            details.insert(format!("{side}_zerocopy"), z.into());
        }
    }
    for (side, st) in [("client", node.poll_stats), ("server", srv.poll_stats)] {
        details.insert(format!("{side}_polls"), st.polls.into());
        details.insert(format!("{side}_empty_polls"), st.empty_polls.into());
        details.insert(format!("{side}_sleeps"), st.sleeps.into());
    }
    Ok(Measurement {
        bytes,
        transactions: cl.transactions,
        elapsed_s: elapsed,
        verified,
        cpu_s: client_cpu + srv.cpu_s,
        details,
        latency: cl.latency,
        udp: None,
        passes,
    })
}

fn connect<D: Device>(
    n: &mut Node<D>,
    cfg: tcp::Config,
    server: SocketAddr,
) -> Result<TcpStream, BoxErr> {
    let now = n.now();
    let s = TcpStream::connect(&mut n.stack, now, server, cfg)?;
    n.until(|st| match s.is_connected(st)? {
        true => Ok(()),
        false => Err(ErrorKind::WouldBlock.into()),
    })?;
    Ok(s)
}

/// Sends `p.bytes` or for `p.duration`, then FIN. Returns the bytes sent.
fn source<D: Device>(
    n: &mut Node<D>,
    s: TcpStream,
    p: &Params,
    pattern: &Pattern,
    start: WallInstant,
) -> Result<u64, BoxErr> {
    let msg = p.send_size.max(1);
    let total = p.bytes.unwrap_or(u64::MAX);
    let deadline = p.duration.map(Duration::from_secs_f64);
    let mut sent = 0u64;
    let mut zc = super::netfold_pipe::ZcTally::default();
    while sent < total && deadline.is_none_or(|d| start.elapsed() < d) {
        let len = ((total - sent) as usize).min(msg);
        if p.zerocopy {
            // Zero-copy: the message is lent to the stack (a window of the shared pattern),
            // as many times as it takes to be taken whole; completions are taken as they come.
            let mut buf = pattern.window_zc(sent, len);
            while !buf.is_empty() {
                let k = n.until(|st| s.send_zc(st, buf.clone()))?.len;
                buf = buf.slice(k..);
                zc.collect(&mut n.stack, s)?;
            }
        } else {
            n.write_all(s, pattern.window(sent, len))?;
        }
        sent += len as u64;
    }
    n.until(|st| s.shutdown_write(st))?;
    if let Some(z) = zc.describe() {
        n.zc_report = Some(z);
    }
    Ok(sent)
}

/// Reads to end of stream. Returns (bytes, verified).
fn sink<D: Device>(
    n: &mut Node<D>,
    s: TcpStream,
    p: &Params,
    pattern: &Pattern,
) -> Result<(u64, bool), BoxErr> {
    let mut buf = vec![0u8; p.recv_size.max(1)];
    let mut v = Verifier::new(pattern);
    let mut bytes = 0u64;
    loop {
        let k = n.until(|st| s.read(st, &mut buf))?;
        if k == 0 {
            break;
        }
        if p.verify {
            v.check(&buf[..k]);
        }
        bytes += k as u64;
    }
    Ok((bytes, v.verified(bytes)))
}

pub fn drive<D: Device>(
    n: &mut Node<D>,
    p: &Params,
    cfg: tcp::Config,
    server: SocketAddr,
    pattern: &Pattern,
    start: WallInstant,
) -> Result<Outcome, BoxErr> {
    let mut out = Outcome {
        counters: String::new(),
        bytes: 0,
        transactions: 0,
        verified: true,
        cpu_s: 0.0,
        latency: None,
        poll_stats: PollStats::default(),
        passes: Default::default(),
        zc: None,
    };
    let deadline = p.duration.map(Duration::from_secs_f64);
    let limit = p.transactions.unwrap_or(u64::MAX);
    match p.test {
        Test::Stream => {
            let s = connect(n, cfg, server)?;
            out.bytes = source(n, s, p, pattern, start)?;
            // The server closes after reading everything; wait for its FIN.
            let mut b = [0u8; 1];
            while n.until(|st| s.read(st, &mut b))? != 0 {}
            s.close(&mut n.stack)?;
            n.linger();
        }
        Test::Maerts => {
            let s = connect(n, cfg, server)?;
            let (bytes, ok) = sink(n, s, p, pattern)?;
            out.bytes = bytes;
            out.verified = ok;
            s.close(&mut n.stack)?;
            n.linger();
        }
        Test::Rr => {
            let s = connect(n, cfg, server)?;
            let req = vec![0x5au8; p.req_size];
            let mut resp = vec![0u8; p.resp_size];
            let mut lat = Histogram::default();
            while out.transactions < limit && deadline.is_none_or(|d| start.elapsed() < d) {
                let t0 = WallInstant::now();
                n.write_all(s, &req)?;
                if !n.read_exact(s, &mut resp)? {
                    return Err("server closed during TCP_RR".into());
                }
                lat.record(t0.elapsed());
                out.transactions += 1;
            }
            out.latency = Some(lat);
            n.until(|st| s.shutdown_write(st))?;
            let mut b = [0u8; 1];
            while n.until(|st| s.read(st, &mut b))? != 0 {}
            s.close(&mut n.stack)?;
            n.linger();
        }
        Test::Crr => {
            let req = vec![0x5au8; p.req_size];
            let mut resp = vec![0u8; p.resp_size];
            let mut lat = Histogram::default();
            while out.transactions < limit && deadline.is_none_or(|d| start.elapsed() < d) {
                let t0 = WallInstant::now();
                let s = connect(n, cfg, server)?;
                n.write_all(s, &req)?;
                if !n.read_exact(s, &mut resp)? {
                    return Err("server closed during TCP_CRR".into());
                }
                s.close(&mut n.stack)?;
                lat.record(t0.elapsed());
                out.transactions += 1;
            }
            out.latency = Some(lat);
            // A connection that sends nothing tells the server we are done.
            let s = connect(n, cfg, server)?;
            s.close(&mut n.stack)?;
            n.linger();
        }
        Test::UdpStream => unreachable!("rejected in run"),
    }
    Ok(out)
}

fn accept<D: Device>(n: &mut Node<D>, l: TcpListener) -> Result<TcpStream, BoxErr> {
    n.until(|st| l.accept(st)).map(|(s, _)| s)
}

fn serve<D: Device>(
    n: &mut Node<D>,
    l: TcpListener,
    p: &Params,
    pattern: &Pattern,
) -> Result<Outcome, BoxErr> {
    let mut out = Outcome {
        counters: String::new(),
        bytes: 0,
        transactions: 0,
        verified: true,
        cpu_s: 0.0,
        latency: None,
        poll_stats: PollStats::default(),
        passes: Default::default(),
        zc: None,
    };
    match p.test {
        Test::Stream => {
            let s = accept(n, l)?;
            let (bytes, ok) = sink(n, s, p, pattern)?;
            out.bytes = bytes;
            out.verified = ok;
            s.close(&mut n.stack)?;
            n.linger();
        }
        Test::Maerts => {
            let s = accept(n, l)?;
            out.bytes = source(n, s, p, pattern, WallInstant::now())?;
            let mut b = [0u8; 1];
            while n.until(|st| s.read(st, &mut b))? != 0 {}
            s.close(&mut n.stack)?;
            n.linger();
        }
        Test::Rr => {
            let s = accept(n, l)?;
            let mut req = vec![0u8; p.req_size];
            let resp = vec![0xa5u8; p.resp_size];
            while n.read_exact(s, &mut req)? {
                n.write_all(s, &resp)?;
                out.transactions += 1;
            }
            s.close(&mut n.stack)?;
            n.linger();
        }
        Test::Crr => {
            let mut req = vec![0u8; p.req_size];
            let resp = vec![0xa5u8; p.resp_size];
            loop {
                let s = accept(n, l)?;
                if !n.read_exact(s, &mut req)? {
                    s.close(&mut n.stack)?;
                    n.linger();
                    break;
                }
                n.write_all(s, &resp)?;
                let mut b = [0u8; 1];
                while n.until(|st| s.read(st, &mut b))? != 0 {}
                s.close(&mut n.stack)?;
                out.transactions += 1;
            }
        }
        Test::UdpStream => unreachable!("rejected in run"),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::affinity::pin_current_thread;
    use crate::bench::netfold_pipe::{stack_config, CLIENT_ADDR};
    use crate::bench::Pin;
    use netfold::phy::pipe::PipeConfig;

    /// Whether this process may pin a thread to CPU 0 (a restricted cpuset may refuse).
    fn can_pin() -> bool {
        std::thread::spawn(|| pin_current_thread(0))
            .join()
            .unwrap_or(false)
    }

    #[test]
    fn two_threads_pinned_to_one_core_move_all_the_data() {
        if !can_pin() {
            netfold_os::netns::skip(Some("cannot pin threads to CPU 0".into()));
            return;
        }
        const BYTES: u64 = 4 << 20;
        let p = Params {
            test: Test::Stream,
            bytes: Some(BYTES),
            duration: None,
            verify: true,
            threads: 2,
            pin: Pin::Same,
            ..Params::default()
        };
        let m = run(&p).expect("stream between two threads on one core");
        assert_eq!(m.bytes, BYTES);
        assert_eq!(m.verified, Some(true));
        // Both threads ran out of work at some point (each waits for the other) and slept
        // instead of spinning out their time slices.
        let sleeps = |side: &str| m.details[&format!("{side}_sleeps")].as_u64().unwrap();
        assert!(sleeps("client") + sleeps("server") > 0);
    }

    #[test]
    fn an_idle_node_sleeps_instead_of_spinning() {
        let (end, _peer) = Pipe::new(PipeConfig::default());
        let stack = Stack::new(stack_config(CLIENT_ADDR, 1, 1500, Default::default()));
        let mut n = Node::new(
            stack,
            end,
            WallInstant::now(),
            Arc::new(AtomicBool::new(false)),
        );
        const IDLE: Duration = Duration::from_millis(200);
        let t = WallInstant::now();
        n.until(|_| match t.elapsed() >= IDLE {
            true => Ok(()),
            false => Err(ErrorKind::WouldBlock.into()),
        })
        .unwrap();
        let st = n.poll_stats;
        // A busy poller makes hundreds of thousands of polls in 200 ms. One that backs off
        // polls during its 50 us busy-poll budget (a yield per poll), then once per wake-up:
        // at least two sleeps (MAX_SLEEP is 100 ms), and far fewer polls.
        assert!(st.sleeps >= 2, "{st:?}");
        assert!(st.polls < 2_000, "{st:?}");
    }

    #[test]
    fn a_parked_node_wakes_when_the_peer_sends() {
        let (end, mut peer) = Pipe::new(PipeConfig::default());
        let stack = Stack::new(stack_config(CLIENT_ADDR, 1, 1500, Default::default()));
        let mut n = Node::new(
            stack,
            end,
            WallInstant::now(),
            Arc::new(AtomicBool::new(false)),
        );
        n.max_sleep = Duration::from_secs(60);
        // The peer sends a frame 30 ms from now; the node must notice it through the pipe's
        // wake-up: its safety-net sleep is made far longer than the bound below.
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            let mut pool = netfold::buf::Pool::new(64, 4);
            let mut b = netfold::buf::PacketBuf::with_capacity(60);
            b.extend_from_slice(&[0xffu8; 60]);
            peer.send_batch(Instant::ZERO, &mut pool, &mut vec![b]);
            (WallInstant::now(), peer)
        });
        let t = WallInstant::now();
        let frames = |n: &Node<netfold::phy::pipe::PipeEnd>| n.end.stats().delivered;
        while frames(&n) == 0 && t.elapsed() < Duration::from_secs(10) {
            n.poll(false).unwrap();
        }
        let woke = WallInstant::now();
        let (sent_at, _peer) = sender.join().unwrap();
        assert_eq!(frames(&n), 1);
        assert!(n.poll_stats.sleeps > 0, "{:?}", n.poll_stats);
        let lag = woke.saturating_duration_since(sent_at);
        assert!(lag < Duration::from_secs(10), "woke {lag:?} after the send");
    }
}
