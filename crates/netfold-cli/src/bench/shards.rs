//! `netfold stream|rr|crr --shards N --streams M`: N client stacks and N server stacks, one
//! thread each, joined by a multi-queue in-memory link ([`netfold::phy::mq`]: a queue pair per
//! pair of shards, every frame steered by the Toeplitz hash of its 4-tuple, as a multi-queue
//! NIC steers what it receives), M connections spread round-robin over the shards.
//! Each connection's local port is picked so that the Toeplitz hash of its 4-tuple
//! ([`netfold::rss`]) lands on its shard in both directions; the link then keeps both directions
//! on that shard by itself, and its per-queue counters show whether anything crossed. Every
//! server shard listens on the same port (SO_REUSEPORT-like). Nothing is shared between shards
//! on the data path. TCP_CRR opens each transaction's connection from the next free port of
//! the shard's own port list (the ports whose hash lands on the shard), skipping ports whose
//! previous connection is still in TIME-WAIT.
//!
//! Placement (`--affinity`, alias `--pin`): `same` puts shard k's client and server threads on
//! CPU k (protocol and application work of a connection on one core); `split` puts shard k's
//! client on CPU 2k and its server on CPU 2k+1 (modulo the CPUs: the application on another
//! core); `none` leaves them to the scheduler. `same` is the placement the library's sharded
//! runtime gives an application (`netfold_rt::shards`: a shard's driver and its `spawn_on`
//! threads on the shard's CPU). `--threads 1` runs a shard's client and server
//! stacks and applications on one thread (`ClientSide`), which never sleeps while the
//! other stack may have work; `same` then pins shard k's thread to CPU k.

use super::affinity::{online_cpus, pin_current_thread, thread_cpu_seconds};
use super::latency::Histogram;
use super::memnet::BoxErr;
use super::netfold_pipe::{endpoints, pipe_config, stack_config_ip, tcp_config};
use super::netfold_threads::Node;
use super::pattern::{Pattern, Verifier};
use super::{Measurement, Params, Pin, Test};
use netfold::iface::Stack;
use netfold::phy::mq::{mq_link, MqPort};
use netfold::rss::{Rss, MICROSOFT_KEY};
use netfold::shard::{LocalPorts, Steering};
use netfold::socket::{io_error, TcpListener, TcpStream};
use netfold_os::clock::Epoch;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant as WallInstant};

const PORT: u16 = 12865;
/// The ephemeral port range (RFC 6335 §6: 49152-65535) searched for a port on the shard.
const EPHEMERAL: std::ops::RangeInclusive<u16> = 49152..=65535;

/// The name of a placement as the report and `--affinity` spell it.
pub fn affinity_name(pin: Pin) -> &'static str {
    match pin {
        Pin::Same => "same",
        Pin::Split => "split",
        Pin::None => "none",
    }
}

/// The CPU for shard `k`'s client or server thread under `pin`.
fn cpu_for(pin: Pin, shard: usize, server: bool) -> Option<usize> {
    let n = online_cpus();
    match pin {
        Pin::Same => Some(shard % n),
        Pin::Split => Some((2 * shard + usize::from(server)) % n),
        Pin::None => None,
    }
}

/// Every local port of `EPHEMERAL` whose connection from `c` to the server at `s` hashes to
/// `shard` both ways (either family: the IPv6 4-tuple is hashed as RSS NICs hash it).
/// The same search the sharded runtimes' `connect` makes ([`LocalPorts::candidates`]), run
/// to the end of the range.
fn shard_ports(rss: &Arc<Rss>, shard: usize, (c, s): (IpAddr, IpAddr)) -> Vec<u16> {
    let steering = Steering::Rss(Arc::clone(rss));
    let shards = rss.shards();
    LocalPorts::new(EPHEMERAL, shards)
        .candidates(
            &steering,
            shard,
            shards,
            SocketAddr::new(c, 0),
            SocketAddr::new(s, PORT),
        )
        .collect()
}

/// What one shard's server thread reports.
struct ServerOutcome {
    bytes: u64,
    transactions: u64,
    verified: bool,
    cpu_s: f64,
    /// Client ports of the connections this shard accepted.
    peers: Vec<u16>,
    /// Frames received from each client shard, and frames that crossed shards either way.
    rx_from: Vec<u64>,
    cross: u64,
}

/// What one shard's client thread reports.
struct ClientOutcome {
    bytes: u64,
    transactions: u64,
    cpu_s: f64,
    /// From the start line to the end of the measured work.
    elapsed_s: f64,
    latency: Option<Histogram>,
    /// Local ports of every connection this shard opened.
    ports: Vec<u16>,
    rx_from: Vec<u64>,
    cross: u64,
}

pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    if !matches!(p.test, Test::Stream | Test::Rr | Test::Crr) {
        return Err("--shards runs TCP_STREAM, TCP_RR and TCP_CRR".into());
    }
    let shards = p.shards.max(1);
    let streams = p.streams.max(1);
    let rss = Arc::new(Rss::new(MICROSOFT_KEY, shards));
    let epoch = WallInstant::now();
    let abort = Arc::new(AtomicBool::new(false));
    let tcfg = tcp_config(p);
    let pattern = Arc::new(Pattern::new(p.send_size.max(p.recv_size).max(1)));
    // Connects done on every shard: the clock starts for all of them at once.
    let start_line = Arc::new(Barrier::new(shards + 1));
    // `--threads 1`: one thread per shard runs both its stacks and applications.
    let one_thread = p.threads == 1;
    // Such a thread never sleeps on its link (it only yields), so no send needs to wake a
    // receiver (`PipeConfig::wakeups`).
    let link_config = netfold::phy::pipe::PipeConfig {
        wakeups: !one_thread,
        ..pipe_config(p)
    };
    let (cports, sports) = mq_link(link_config, Arc::clone(&rss));
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    if one_thread && p.pin == Pin::Split {
        return Err(
            "--threads 1 puts a shard's client and server on one thread: \
                    --affinity split needs two (use same or none)"
                .into(),
        );
    }
    for (k, (cport, sport)) in cports.into_iter().zip(sports).enumerate() {
        let count = (0..streams).filter(|j| j % shards == k).count();
        // The client tells its server shard when it is done (end of test, not data path).
        let done = Arc::new(AtomicBool::new(false));
        let mut server = Node::new(
            Stack::new(netfold::iface::StackConfig {
                gro: p.gro,
                ..stack_config_ip(endpoints(p.family).1, 2, p.mtu, p.copy_mode)
            }),
            sport,
            epoch,
            Arc::clone(&abort),
        );
        let listener = TcpListener::bind(
            &mut server.stack,
            SocketAddr::new(endpoints(p.family).1, PORT),
            256,
            tcfg,
        )?;
        let client = Node::new(
            Stack::new(netfold::iface::StackConfig {
                gro: p.gro,
                ..stack_config_ip(endpoints(p.family).0, 1, p.mtu, p.copy_mode)
            }),
            cport,
            epoch,
            Arc::clone(&abort),
        );
        let mut server_half = None;
        if !one_thread {
            let (sp, spat, sdone) = (p.clone(), Arc::clone(&pattern), Arc::clone(&done));
            let mut server = server;
            servers.push(std::thread::spawn(
                move || -> Result<ServerOutcome, String> {
                    if let Some(cpu) = cpu_for(sp.pin, k, true) {
                        pin_current_thread(cpu);
                    }
                    let cpu0 = thread_cpu_seconds();
                    let r = serve_all(&mut server, listener, &sp, &spat, &sdone);
                    r.map(|mut o| {
                        o.cpu_s = thread_cpu_seconds() - cpu0;
                        o.rx_from = server.end.rx_from();
                        o.cross = server.end.cross_shard_frames();
                        o
                    })
                    .map_err(|e| e.to_string())
                },
            ));
        } else {
            server_half = Some((server, listener));
        }
        let ports = shard_ports(&rss, k, endpoints(p.family));
        if ports.len() < count.max(1) {
            return Err(format!("only {} ephemeral ports hash to shard {k}", ports.len()).into());
        }
        let (cp, cpat, line) = (p.clone(), Arc::clone(&pattern), Arc::clone(&start_line));
        let share = (count, streams);
        clients.push(std::thread::spawn(
            move || -> Result<(ClientOutcome, Option<ServerOutcome>), String> {
                if let Some(cpu) = cpu_for(cp.pin, k, false) {
                    pin_current_thread(cpu);
                }
                let buddy = server_half.map(|(sn, l)| (sn, ServerApp::new(l, &cp, &cpat)));
                let mut side = ClientSide {
                    node: client,
                    buddy,
                };
                let n = &mut side;
                let r = match cp.test {
                    Test::Stream => source_all(n, &ports[..count], &cp, tcfg, &cpat, &line),
                    Test::Rr => rr_all(n, &ports[..count], &cp, tcfg, &line, share),
                    _ => crr_all(n, &ports, &cp, tcfg, &line, share),
                };
                done.store(true, Ordering::Release);
                let r = r.and_then(|o| Ok((o, side.finish_server()?)));
                r.map(|(mut o, s)| {
                    o.rx_from = side.node.end.rx_from();
                    o.cross = side.node.end.cross_shard_frames();
                    (o, s)
                })
                .map_err(|e| e.to_string())
            },
        ));
    }
    start_line.wait();
    let mut errors = Vec::new();
    let mut outs = Vec::new();
    let mut souts = Vec::new();
    for c in clients {
        match c.join().map_err(|_| "client thread panicked")? {
            Ok((o, s)) => {
                outs.push(o);
                souts.extend(s);
            }
            Err(e) => errors.push(format!("client: {e}")),
        }
    }
    for s in servers {
        match s.join().map_err(|_| "server thread panicked")? {
            Ok(o) => souts.push(o),
            Err(e) => errors.push(format!("server: {e}")),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; ").into());
    }
    let sent: u64 = outs.iter().map(|o| o.bytes).sum();
    let received: u64 = souts.iter().map(|o| o.bytes).sum();
    let transactions: u64 = outs.iter().map(|o| o.transactions).sum();
    let elapsed = outs.iter().map(|o| o.elapsed_s).fold(0.0, f64::max);
    let cpu_s =
        outs.iter().map(|o| o.cpu_s).sum::<f64>() + souts.iter().map(|o| o.cpu_s).sum::<f64>();
    let verified = souts.iter().all(|o| o.verified) && received == sent;
    let mut latency: Option<Histogram> = None;
    for h in outs.iter().filter_map(|o| o.latency.as_ref()) {
        latency.get_or_insert_with(Histogram::default).merge(h);
    }
    // Per shard: its connections, its work, and what (if anything) crossed shards.
    let mut per = Vec::new();
    let mut cross = 0u64;
    let mut misplaced = 0u64;
    for (k, (c, s)) in outs.iter().zip(&souts).enumerate() {
        cross += c.cross + s.cross;
        // Both directions of every connection hash to the shard that carried it, and the
        // server shard accepted exactly the connections its client shard opened.
        let wrong = c
            .ports
            .iter()
            .chain(&s.peers)
            .filter(|&&port| {
                let (c, s) = endpoints(p.family);
                rss.shard_of_ip(c, s, port, PORT) != k || rss.shard_of_ip(s, c, PORT, port) != k
            })
            .count() as u64;
        misplaced += wrong + (c.ports.len() != s.peers.len()) as u64;
        per.push(serde_json::json!({
            "shard": k,
            "connections": c.ports.len(),
            "accepted": s.peers.len(),
            "bytes": s.bytes,
            "transactions": c.transactions,
            "server_transactions": s.transactions,
            "client_rx_from": c.rx_from,
            "server_rx_from": s.rx_from,
            "cross_shard_frames": c.cross + s.cross,
        }));
    }
    let mut details = serde_json::Map::new();
    details.insert("shards".into(), rss.shards().into());
    details.insert("streams".into(), streams.into());
    details.insert("affinity".into(), affinity_name(p.pin).into());
    details.insert(
        "threads_per_shard".into(),
        if one_thread { 1 } else { 2 }.into(),
    );
    details.insert("cross_shard_frames".into(), cross.into());
    details.insert("misplaced_connections".into(), misplaced.into());
    details.insert("per_shard".into(), per.into());
    let bytes = match p.test {
        Test::Stream => received,
        _ => transactions * (p.req_size + p.resp_size) as u64,
    };
    Ok(Measurement {
        bytes,
        transactions,
        elapsed_s: elapsed,
        verified: (p.verify && p.test == Test::Stream).then_some(verified),
        cpu_s,
        details,
        latency,
        udp: None,
        passes: None,
    })
}

/// Opens one connection from each of `ports` and waits until all are established.
fn connect_all(
    n: &mut ClientSide,
    ports: &[u16],
    cfg: netfold::tcp::Config,
    (client, server): (IpAddr, IpAddr),
) -> Result<Vec<TcpStream>, BoxErr> {
    let remote = SocketAddr::new(server, PORT);
    let mut streams = Vec::new();
    for &port in ports {
        let now = n.now();
        let local = SocketAddr::new(client, port);
        let h = n
            .stack
            .tcp_mut()
            .connect(now, local, remote, cfg)
            .map_err(io_error)?;
        streams.push(TcpStream::from_handle(h));
    }
    for s in &streams {
        n.until(|st| match s.is_connected(st)? {
            true => Ok(()),
            false => Err(ErrorKind::WouldBlock.into()),
        })?;
    }
    Ok(streams)
}

/// Half-closes every stream, reads each to the server's FIN, closes, lingers.
fn finish(n: &mut ClientSide, streams: &[TcpStream]) -> Result<(), BoxErr> {
    for s in streams {
        n.until(|st| s.shutdown_write(st))?;
    }
    let mut b = [0u8; 64];
    for s in streams {
        while n.until(|st| s.read(st, &mut b))? != 0 {}
        s.close(&mut n.stack)?;
    }
    Ok(())
}

fn empty_outcome(ports: Vec<u16>) -> ClientOutcome {
    ClientOutcome {
        bytes: 0,
        transactions: 0,
        cpu_s: 0.0,
        elapsed_s: 0.0,
        latency: None,
        ports,
        rx_from: Vec::new(),
        cross: 0,
    }
}

/// This shard's part of a transaction limit: `share` = (its connections, all connections).
fn limit_share(p: &Params, (mine, all): (usize, usize)) -> u64 {
    p.transactions
        .map_or(u64::MAX, |t| (t * mine as u64).div_ceil(all.max(1) as u64))
}

/// One shard's TCP_STREAM client: connects from `ports`, waits at the start line, then writes
/// to every connection round-robin (never blocking on one) for `p.duration` or `p.bytes` per
/// stream, then FIN, and waits for the server's.
fn source_all(
    n: &mut ClientSide,
    ports: &[u16],
    p: &Params,
    cfg: netfold::tcp::Config,
    pattern: &Pattern,
    line: &Barrier,
) -> Result<ClientOutcome, BoxErr> {
    let streams = connect_all(n, ports, cfg, endpoints(p.family))?;
    line.wait();
    let cpu0 = thread_cpu_seconds();
    let start = WallInstant::now();
    let msg = p.send_size.max(1);
    let total = p.bytes.unwrap_or(u64::MAX);
    let deadline = p.duration.map(Duration::from_secs_f64);
    let mut sent = vec![0u64; streams.len()];
    while deadline.is_none_or(|d| start.elapsed() < d) && sent.iter().any(|&b| b < total) {
        let mut progressed = false;
        for (s, done) in streams.iter().zip(sent.iter_mut()) {
            if *done >= total {
                continue;
            }
            let len = ((total - *done) as usize).min(msg);
            match s.write(&mut n.stack, pattern.window(*done, len)) {
                Ok(k) => {
                    *done += k as u64;
                    progressed |= k > 0;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
        n.poll(progressed)?;
    }
    // The server closes after reading everything: its FIN ends the measured transfer.
    finish(n, &streams)?;
    let elapsed_s = start.elapsed().as_secs_f64();
    n.linger();
    Ok(ClientOutcome {
        bytes: sent.iter().sum(),
        cpu_s: thread_cpu_seconds() - cpu0,
        elapsed_s,
        ..empty_outcome(ports.to_vec())
    })
}

/// One connection's transaction in progress.
struct Txn {
    s: TcpStream,
    sent: usize,
    got: usize,
    t0: WallInstant,
}

/// Moves one request/response transaction on `t` forward without blocking. Returns
/// (progressed, completed).
fn step_txn(
    stack: &mut Stack,
    t: &mut Txn,
    req: &[u8],
    resp: &mut [u8],
) -> Result<(bool, bool), BoxErr> {
    let mut progressed = false;
    if t.sent < req.len() {
        match t.s.write(stack, &req[t.sent..]) {
            Ok(k) => {
                t.sent += k;
                progressed |= k > 0;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
    }
    while t.sent == req.len() && t.got < resp.len() {
        match t.s.read(stack, &mut resp[t.got..]) {
            Ok(0) => return Err("server closed during a transaction".into()),
            Ok(k) => {
                t.got += k;
                progressed = true;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok((progressed, t.sent == req.len() && t.got == resp.len()))
}

/// One shard's TCP_RR client: one transaction at a time on each of its connections, all of
/// them in flight at once.
fn rr_all(
    n: &mut ClientSide,
    ports: &[u16],
    p: &Params,
    cfg: netfold::tcp::Config,
    line: &Barrier,
    share: (usize, usize),
) -> Result<ClientOutcome, BoxErr> {
    let streams = connect_all(n, ports, cfg, endpoints(p.family))?;
    line.wait();
    let cpu0 = thread_cpu_seconds();
    let start = WallInstant::now();
    // The loop reads the time once per round and per transaction: the fast clock.
    let fast = Epoch::from_std(start);
    let deadline = p.duration.map(Duration::from_secs_f64);
    let limit = limit_share(p, share);
    let req = vec![0x5au8; p.req_size.max(1)];
    let mut resp = vec![0u8; p.resp_size.max(1)];
    let mut lat = Histogram::default();
    let mut txns: Vec<Txn> = streams
        .iter()
        .map(|&s| Txn {
            s,
            sent: 0,
            got: 0,
            t0: start,
        })
        .collect();
    let mut done = 0u64;
    'run: while deadline.is_none_or(|d| fast.elapsed() < d) {
        let mut progressed = false;
        for t in &mut txns {
            let (moved, complete) = step_txn(&mut n.stack, t, &req, &mut resp)?;
            progressed |= moved;
            if complete {
                let now = start + fast.elapsed();
                lat.record(now - t.t0);
                done += 1;
                if done >= limit {
                    break 'run;
                }
                t.sent = 0;
                t.got = 0;
                t.t0 = now;
            }
        }
        n.poll(progressed)?;
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let cpu_s = thread_cpu_seconds() - cpu0;
    finish(n, &streams)?;
    n.linger();
    Ok(ClientOutcome {
        transactions: done,
        cpu_s,
        elapsed_s,
        latency: Some(lat),
        ..empty_outcome(ports.to_vec())
    })
}

/// One shard's TCP_CRR client: `share.0` connections in flight at once, each transaction on a
/// new connection from the next free port of `ports` (all ports that hash to this shard).
fn crr_all(
    n: &mut ClientSide,
    ports: &[u16],
    p: &Params,
    cfg: netfold::tcp::Config,
    line: &Barrier,
    share: (usize, usize),
) -> Result<ClientOutcome, BoxErr> {
    let remote = SocketAddr::new(endpoints(p.family).1, PORT);
    line.wait();
    let cpu0 = thread_cpu_seconds();
    let start = WallInstant::now();
    let deadline = p.duration.map(Duration::from_secs_f64);
    let limit = limit_share(p, share);
    let req = vec![0x5au8; p.req_size.max(1)];
    let mut resp = vec![0u8; p.resp_size.max(1)];
    let mut lat = Histogram::default();
    let mut slots: Vec<Option<Txn>> = (0..share.0.max(1)).map(|_| None).collect();
    let mut used = Vec::new();
    let (mut next, mut done, mut started) = (0usize, 0u64, 0u64);
    loop {
        let over = started >= limit || deadline.is_some_and(|d| start.elapsed() >= d);
        if over && slots.iter().all(Option::is_none) {
            break;
        }
        let mut progressed = false;
        for slot in &mut slots {
            if slot.is_none() && !over {
                // The next port whose last connection has left TIME-WAIT.
                for _ in 0..ports.len() {
                    let port = ports[next];
                    next = (next + 1) % ports.len();
                    let local = SocketAddr::new(endpoints(p.family).0, port);
                    let now = n.now();
                    match n.stack.tcp_mut().connect(now, local, remote, cfg) {
                        Ok(h) => {
                            used.push(port);
                            started += 1;
                            progressed = true;
                            *slot = Some(Txn {
                                s: TcpStream::from_handle(h),
                                sent: 0,
                                got: 0,
                                t0: WallInstant::now(),
                            });
                            break;
                        }
                        Err(netfold::tcp::Error::AddrInUse) => continue,
                        Err(e) => return Err(io_error(e).into()),
                    }
                }
            }
            let Some(t) = slot else { continue };
            if !t.s.is_connected(&mut n.stack)? {
                continue;
            }
            let (moved, complete) = step_txn(&mut n.stack, t, &req, &mut resp)?;
            progressed |= moved;
            if complete {
                lat.record(t.t0.elapsed());
                done += 1;
                if let Some(t) = slot.take() {
                    t.s.close(&mut n.stack)?;
                }
            }
        }
        n.poll(progressed)?;
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let cpu_s = thread_cpu_seconds() - cpu0;
    n.linger();
    Ok(ClientOutcome {
        transactions: done,
        cpu_s,
        elapsed_s,
        latency: Some(lat),
        ..empty_outcome(used)
    })
}

/// One server connection.
struct Served<'a> {
    s: TcpStream,
    v: Verifier<'a>,
    got: u64,
    /// RR/CRR: request bytes received so far, response bytes still to send.
    req_got: usize,
    resp_left: usize,
}

/// One shard's server application: accepts every connection its client shard opens; TCP_STREAM
/// reads each to end of stream, verifying it against the pattern; TCP_RR/CRR answer every
/// `req_size` bytes with `resp_size` bytes. Each connection is closed at its end of stream.
struct ServerApp<'a> {
    l: TcpListener,
    p: &'a Params,
    pattern: &'a Pattern,
    open: Vec<Served<'a>>,
    peers: Vec<u16>,
    buf: Vec<u8>,
    resp: Vec<u8>,
    bytes: u64,
    transactions: u64,
    verified: bool,
}

impl<'a> ServerApp<'a> {
    fn new(l: TcpListener, p: &'a Params, pattern: &'a Pattern) -> Self {
        ServerApp {
            l,
            p,
            pattern,
            open: Vec::new(),
            peers: Vec::new(),
            buf: vec![0u8; p.recv_size.max(p.req_size).max(1)],
            resp: vec![0xa5u8; p.resp_size.max(1)],
            bytes: 0,
            transactions: 0,
            verified: true,
        }
    }

    /// One round over the listener and every connection, without blocking. Returns
    /// (progressed, finished): finished once the client shard is `done` and nothing is open.
    fn step(&mut self, stack: &mut Stack, done: bool) -> Result<(bool, bool), BoxErr> {
        let p = self.p;
        let (req_size, stream) = (p.req_size.max(1), p.test == Test::Stream);
        let mut progressed = false;
        loop {
            match self.l.accept(stack) {
                Ok((s, peer)) => {
                    self.peers.push(peer.port());
                    self.open.push(Served {
                        s,
                        v: Verifier::new(self.pattern),
                        got: 0,
                        req_got: 0,
                        resp_left: 0,
                    });
                    progressed = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        let (buf, resp) = (&mut self.buf, &self.resp);
        let mut i = 0;
        'conns: while i < self.open.len() {
            let c = &mut self.open[i];
            if c.resp_left > 0 {
                let from = resp.len() - c.resp_left;
                match c.s.write(stack, &resp[from..]) {
                    Ok(k) => {
                        c.resp_left -= k;
                        progressed |= k > 0;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e.into()),
                }
                if c.resp_left > 0 {
                    i += 1;
                    continue;
                }
            }
            loop {
                let want = if stream {
                    buf.len()
                } else {
                    req_size - c.req_got
                };
                match c.s.read(stack, &mut buf[..want]) {
                    Ok(0) => {
                        self.verified &= !(stream && p.verify) || c.v.verified(c.got);
                        self.bytes += c.got;
                        let c = self.open.swap_remove(i);
                        c.s.close(stack)?;
                        progressed = true;
                        continue 'conns;
                    }
                    Ok(k) => {
                        progressed = true;
                        c.got += k as u64;
                        if stream {
                            if p.verify {
                                c.v.check(&buf[..k]);
                            }
                            // One read per connection per round: the others get their turn.
                            break;
                        }
                        c.req_got += k;
                        if c.req_got == req_size {
                            c.req_got = 0;
                            self.transactions += 1;
                            match c.s.write(stack, resp) {
                                Ok(w) => c.resp_left = resp.len() - w,
                                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                                    c.resp_left = resp.len()
                                }
                                Err(e) => return Err(e.into()),
                            }
                            if c.resp_left > 0 {
                                break;
                            }
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e.into()),
                }
            }
            i += 1;
        }
        Ok((progressed, done && self.open.is_empty()))
    }

    fn outcome(self) -> ServerOutcome {
        ServerOutcome {
            bytes: self.bytes,
            transactions: self.transactions,
            verified: self.verified,
            cpu_s: 0.0,
            peers: self.peers,
            rx_from: Vec::new(),
            cross: 0,
        }
    }
}

/// One shard's server on its own thread: the application until the client shard is done.
fn serve_all(
    n: &mut Node<MqPort>,
    l: TcpListener,
    p: &Params,
    pattern: &Pattern,
    done: &AtomicBool,
) -> Result<ServerOutcome, BoxErr> {
    let mut app = ServerApp::new(l, p, pattern);
    loop {
        let (progressed, finished) = app.step(&mut n.stack, done.load(Ordering::Acquire))?;
        if finished {
            break;
        }
        n.poll(progressed)?;
    }
    n.linger();
    Ok(app.outcome())
}

/// A shard's client stack, and with one thread per shard (`--threads 1`) its server stack and
/// application too: then every poll of the client also runs a round of the server, and the
/// thread backs off only when both stacks and both applications are idle (`Node::idle_alone`:
/// yields, then sleeps until the earlier deadline of the two stacks — nothing else can wake
/// it, and nothing else needs to).
struct ClientSide<'a> {
    node: Node<MqPort>,
    buddy: Option<(Node<MqPort>, ServerApp<'a>)>,
}

impl std::ops::Deref for ClientSide<'_> {
    type Target = Node<MqPort>;
    fn deref(&self) -> &Node<MqPort> {
        &self.node
    }
}

impl std::ops::DerefMut for ClientSide<'_> {
    fn deref_mut(&mut self) -> &mut Node<MqPort> {
        &mut self.node
    }
}

/// A round of a one-thread shard in which neither stack nor application moved: back off
/// until the earlier deadline of the two stacks (`Node::idle_alone`).
fn idle_round(node: &mut Node<MqPort>, server: &Stack) {
    let now = node.now();
    let due = [node.stack.poll_at(now), server.poll_at(now)]
        .into_iter()
        .flatten()
        .min();
    node.idle_alone(now, due);
}

impl ClientSide<'_> {
    fn poll(&mut self, progressed: bool) -> Result<(), BoxErr> {
        let Some((sn, app)) = &mut self.buddy else {
            return self.node.poll(progressed);
        };
        let a = self.node.poll_spin(progressed)?;
        let (p2, _) = app.step(&mut sn.stack, false)?;
        let b = sn.poll_spin(p2)?;
        if a || b {
            self.node.busy();
        } else {
            idle_round(&mut self.node, &sn.stack);
        }
        Ok(())
    }

    fn until<T>(
        &mut self,
        mut op: impl FnMut(&mut Stack) -> std::io::Result<T>,
    ) -> Result<T, BoxErr> {
        loop {
            match op(&mut self.node.stack) {
                Ok(v) => return Ok(v),
                Err(e) if e.kind() == ErrorKind::WouldBlock => self.poll(false)?,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// With its own thread the client lingers here; sharing one, [`ClientSide::finish_server`]
    /// lingers for both.
    fn linger(&mut self) {
        if self.buddy.is_none() {
            self.node.linger();
        }
    }

    /// One thread per shard: after the client is done, runs the server until every
    /// connection is closed, then polls both stacks until idle for 20 ms (at most 500 ms), so
    /// the last FINs and ACKs leave. Returns the server's outcome.
    fn finish_server(&mut self) -> Result<Option<ServerOutcome>, BoxErr> {
        let Some((mut sn, mut app)) = self.buddy.take() else {
            return Ok(None);
        };
        loop {
            let (p2, finished) = app.step(&mut sn.stack, true)?;
            if finished {
                break;
            }
            let a = self.node.poll_spin(false)?;
            let b = sn.poll_spin(p2)?;
            if a || b {
                self.node.busy();
            } else {
                idle_round(&mut self.node, &sn.stack);
            }
        }
        let t = WallInstant::now();
        let mut idle_since = WallInstant::now();
        while t.elapsed() < Duration::from_millis(500)
            && idle_since.elapsed() < Duration::from_millis(20)
        {
            let a = self.node.poll_spin(false)?;
            let b = sn.poll_spin(false)?;
            if a || b {
                idle_since = WallInstant::now();
                self.node.busy();
            } else {
                idle_round(&mut self.node, &sn.stack);
            }
        }
        let mut o = app.outcome();
        o.rx_from = sn.end.rx_from();
        o.cross = sn.end.cross_shard_frames();
        Ok(Some(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_shards_carry_every_stream_to_the_end() {
        const BYTES: u64 = 1 << 20;
        let p = Params {
            test: Test::Stream,
            bytes: Some(BYTES),
            duration: None,
            verify: true,
            threads: 2,
            pin: Pin::None,
            shards: 2,
            streams: 3,
            ..Params::default()
        };
        let m = run(&p).expect("two shards, three streams");
        assert_eq!(m.bytes, 3 * BYTES);
        assert_eq!(m.verified, Some(true));
        assert_one_shard_per_connection(&m, 2);
    }

    /// Both directions of every connection stayed on its shard: no frame crossed between
    /// shards on the steered link (every frame is steered by the hash of its own 4-tuple, so a
    /// connection whose reverse direction hashed elsewhere would show up here), every 4-tuple
    /// hashes to its shard both ways, and each server shard accepted exactly the connections
    /// its client shard opened.
    fn assert_one_shard_per_connection(m: &Measurement, shards: usize) {
        assert_eq!(m.details["cross_shard_frames"], 0, "{:?}", m.details);
        assert_eq!(m.details["misplaced_connections"], 0, "{:?}", m.details);
        let per = m.details["per_shard"].as_array().unwrap();
        assert_eq!(per.len(), shards);
        for (k, s) in per.iter().enumerate() {
            assert!(s["connections"].as_u64().unwrap() > 0, "shard {k}: {s}");
            assert_eq!(s["connections"], s["accepted"], "shard {k}: {s}");
            // Frames reached each stack only from its own peer shard, in both directions.
            for side in ["client_rx_from", "server_rx_from"] {
                for (j, v) in s[side].as_array().unwrap().iter().enumerate() {
                    let v = v.as_u64().unwrap();
                    if j == k {
                        assert!(v > 0, "shard {k} {side}: {s}");
                    } else {
                        assert_eq!(v, 0, "shard {k} {side} from {j}: {s}");
                    }
                }
            }
        }
    }

    #[test]
    fn rr_on_two_shards_keeps_every_connection_on_its_shard() {
        // A thread per stack, and one thread per shard for both of its stacks.
        for threads in [2, 1] {
            let p = Params {
                test: Test::Rr,
                transactions: Some(2000),
                duration: None,
                req_size: 64,
                resp_size: 512,
                threads,
                pin: Pin::None,
                shards: 2,
                streams: 4,
                ..Params::default()
            };
            let m = run(&p).expect("rr on two shards");
            assert!(m.transactions >= 2000, "{}", m.transactions);
            assert_eq!(m.details["affinity"], "none");
            assert_eq!(m.details["threads_per_shard"], threads);
            assert_one_shard_per_connection(&m, 2);
        }
    }

    /// The same over IPv6 — the multi-queue link steers by the Toeplitz hash of the
    /// IPv6 4-tuple (Microsoft's "IPv6 with TCP"), local ports are chosen for it, and
    /// Neighbor Discovery (no 4-tuple) stays on each shard's own queue as ARP does.
    #[test]
    fn ipv6_rr_and_stream_on_two_shards_keep_every_connection_on_its_shard() {
        for test in [Test::Rr, Test::Stream] {
            let p = Params {
                test,
                transactions: Some(2000),
                bytes: Some(4 << 20),
                duration: None,
                req_size: 64,
                resp_size: 512,
                threads: 2,
                pin: Pin::None,
                shards: 2,
                streams: 4,
                family: crate::bench::Family::V6,
                verify: test == Test::Stream,
                ..Params::default()
            };
            let m = run(&p).expect("IPv6 on two shards");
            if test == Test::Rr {
                assert!(m.transactions >= 2000, "{}", m.transactions);
            } else {
                assert_eq!(m.verified, Some(true));
            }
            assert_one_shard_per_connection(&m, 2);
        }
    }

    #[test]
    fn crr_on_two_shards_opens_every_connection_on_its_shard() {
        let p = Params {
            test: Test::Crr,
            transactions: Some(600),
            duration: None,
            // One thread per shard.
            threads: 1,
            pin: Pin::None,
            shards: 2,
            streams: 2,
            ..Params::default()
        };
        let m = run(&p).expect("crr on two shards");
        assert!(m.transactions >= 600, "{}", m.transactions);
        assert_one_shard_per_connection(&m, 2);
        let per = m.details["per_shard"].as_array().unwrap();
        // One connection per transaction.
        let conns: u64 = per.iter().map(|s| s["connections"].as_u64().unwrap()).sum();
        assert_eq!(conns, m.transactions);
    }

    #[test]
    fn one_thread_per_shard_streams_verified_data() {
        let p = Params {
            test: Test::Stream,
            bytes: Some(1 << 20),
            duration: None,
            verify: true,
            threads: 1,
            pin: Pin::Same,
            shards: 2,
            streams: 2,
            ..Params::default()
        };
        let m = run(&p).expect("two shards, one thread each");
        assert_eq!(m.bytes, 2 << 20);
        assert_eq!(m.verified, Some(true));
        assert_one_shard_per_connection(&m, 2);
        let split = Params {
            pin: Pin::Split,
            ..p
        };
        assert!(run(&split).is_err(), "split needs two threads per shard");
    }

    #[test]
    fn placement_maps_shards_to_cpus() {
        let n = online_cpus();
        assert_eq!(cpu_for(Pin::Same, 1, true), Some(1 % n));
        assert_eq!(cpu_for(Pin::Same, 1, false), Some(1 % n));
        assert_eq!(cpu_for(Pin::Split, 0, true), Some(1 % n));
        assert_eq!(cpu_for(Pin::None, 0, true), None);
    }
}
