//! `netfold stream --shards N --streams M`: N client stacks and N server stacks, one thread
//! each, shard `k`'s two stacks joined by their own in-memory pipe (a multi-queue link with one
//! queue pair per shard, a first step), M connections spread round-robin over the shards.
//! Each connection's local port is picked so that the Toeplitz hash of its 4-tuple
//! ([`super::rss`]) lands on its shard in both directions, as a multi-queue NIC using that key
//! would steer it. Every server shard listens on the same port (SO_REUSEPORT-like). Nothing is
//! shared between shards on the data path.
//!
//! Placement (`--pin`): `same` puts shard k's client and server threads on CPU k (a shard and
//! its application on one core); `split` puts shard k's client on CPU 2k and its server on
//! CPU 2k+1 (modulo the CPUs); `none` leaves them to the scheduler.

use super::affinity::{online_cpus, pin_current_thread, thread_cpu_seconds};
use super::memnet::BoxErr;
use super::netfold_pipe::{pipe_config, stack_config, tcp_config, CLIENT_ADDR, SERVER_ADDR};
use super::netfold_threads::Node;
use super::pattern::{Pattern, Verifier};
use super::rss::{Rss, MICROSOFT_KEY};
use super::{Measurement, Params, Pin, Test};
use netfold::iface::Stack;
use netfold::phy::pipe::{Pipe, PipeEnd};
use netfold::socket::{io_error, TcpListener, TcpStream};
use std::io::ErrorKind;
use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant as WallInstant};

const PORT: u16 = 12865;
/// The ephemeral port range (RFC 6335 §6: 49152-65535) searched for a port on the shard.
const EPHEMERAL: std::ops::RangeInclusive<u16> = 49152..=65535;

/// The CPU for shard `k`'s client or server thread under `pin`.
fn cpu_for(pin: Pin, shard: usize, server: bool) -> Option<usize> {
    let n = online_cpus();
    match pin {
        Pin::Same => Some(shard % n),
        Pin::Split => Some((2 * shard + usize::from(server)) % n),
        Pin::None => None,
    }
}

/// What one shard's server thread reports.
struct ShardOutcome {
    bytes: u64,
    verified: bool,
    cpu_s: f64,
}

pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    if p.test != Test::Stream {
        return Err("--shards runs TCP_STREAM only so far".into());
    }
    let shards = p.shards.max(1);
    let streams = p.streams.max(1);
    let rss = Rss::new(MICROSOFT_KEY, shards);
    let epoch = WallInstant::now();
    let abort = Arc::new(AtomicBool::new(false));
    let tcfg = tcp_config(p);
    let pattern = Arc::new(Pattern::new(p.send_size.max(p.recv_size).max(1)));
    // Connects done on every shard: the clock starts for all of them at once.
    let start_line = Arc::new(Barrier::new(shards + 1));
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for k in 0..shards {
        let count = (0..streams).filter(|j| j % shards == k).count();
        let (end_c, end_s) = Pipe::new(pipe_config(p));
        let mut server = Node::new(
            Stack::new(netfold::iface::StackConfig {
                gro: p.gro,
                ..stack_config(SERVER_ADDR, 2, p.mtu, p.copy_mode)
            }),
            end_s,
            epoch,
            Arc::clone(&abort),
        );
        let listener = TcpListener::bind(
            &mut server.stack,
            SocketAddrV4::new(SERVER_ADDR, PORT),
            64,
            tcfg,
        )?;
        let (sp, spat) = (p.clone(), Arc::clone(&pattern));
        servers.push(std::thread::spawn(
            move || -> Result<ShardOutcome, String> {
                if let Some(cpu) = cpu_for(sp.pin, k, true) {
                    pin_current_thread(cpu);
                }
                let cpu0 = thread_cpu_seconds();
                let r = sink_all(&mut server, listener, count, &sp, &spat);
                r.map(|(bytes, verified)| ShardOutcome {
                    bytes,
                    verified,
                    cpu_s: thread_cpu_seconds() - cpu0,
                })
                .map_err(|e| e.to_string())
            },
        ));
        let client = Node::new(
            Stack::new(netfold::iface::StackConfig {
                gro: p.gro,
                ..stack_config(CLIENT_ADDR, 1, p.mtu, p.copy_mode)
            }),
            end_c,
            epoch,
            Arc::clone(&abort),
        );
        let ports: Vec<u16> = (0..count)
            .map(|i| {
                // The i-th port on this shard: search after the previous one.
                let mut from = *EPHEMERAL.start();
                let mut port = None;
                for _ in 0..=i {
                    port = rss.pick_local_port(
                        CLIENT_ADDR.octets(),
                        SERVER_ADDR.octets(),
                        PORT,
                        k,
                        from..=*EPHEMERAL.end(),
                    );
                    from = port.map_or(u16::MAX, |q| q.saturating_add(1));
                }
                port.ok_or("no ephemeral port hashes to this shard")
            })
            .collect::<Result<_, _>>()?;
        let (cp, cpat, line) = (p.clone(), Arc::clone(&pattern), Arc::clone(&start_line));
        let mut client = client;
        clients.push(std::thread::spawn(move || -> Result<(u64, f64), String> {
            if let Some(cpu) = cpu_for(cp.pin, k, false) {
                pin_current_thread(cpu);
            }
            let r = source_all(&mut client, &ports, &cp, tcfg, &cpat, &line);
            r.map_err(|e| e.to_string())
        }));
    }
    start_line.wait();
    let start = WallInstant::now();
    let mut sent = 0u64;
    let mut cpu_s = 0.0;
    let mut errors = Vec::new();
    for c in clients {
        match c.join().map_err(|_| "client thread panicked")? {
            Ok((b, cpu)) => {
                sent += b;
                cpu_s += cpu;
            }
            Err(e) => errors.push(format!("client: {e}")),
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (mut bytes, mut verified) = (0u64, true);
    for s in servers {
        match s.join().map_err(|_| "server thread panicked")? {
            Ok(o) => {
                bytes += o.bytes;
                verified &= o.verified;
                cpu_s += o.cpu_s;
            }
            Err(e) => errors.push(format!("server: {e}")),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; ").into());
    }
    let mut details = serde_json::Map::new();
    details.insert("shards".into(), rss.shards().into());
    details.insert("streams".into(), streams.into());
    Ok(Measurement {
        bytes,
        transactions: 0,
        elapsed_s: elapsed,
        verified: p.verify.then_some(verified && bytes == sent),
        cpu_s,
        details,
        latency: None,
        udp: None,
    })
}

/// One shard's client: connects from `ports`, waits at the start line, then writes to every
/// connection round-robin (never blocking on one) for `p.duration` or `p.bytes` per stream,
/// then FIN, and waits for the server's. Returns (bytes sent, CPU seconds of the sending).
fn source_all(
    n: &mut Node<PipeEnd>,
    ports: &[u16],
    p: &Params,
    cfg: netfold::tcp::Config,
    pattern: &Pattern,
    line: &Barrier,
) -> Result<(u64, f64), BoxErr> {
    let remote = SocketAddrV4::new(SERVER_ADDR, PORT);
    let mut streams = Vec::new();
    for &port in ports {
        let now = n.now();
        let local = SocketAddrV4::new(CLIENT_ADDR, port);
        let h = n
            .stack
            .tcp_mut()
            .connect(now, local, remote, cfg)
            .map_err(io_error)?;
        let s = TcpStream::from_handle(h);
        n.until(|st| match s.is_connected(st)? {
            true => Ok(()),
            false => Err(ErrorKind::WouldBlock.into()),
        })?;
        streams.push(s);
    }
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
    for s in &streams {
        n.until(|st| s.shutdown_write(st))?;
    }
    let mut b = [0u8; 1];
    for s in &streams {
        while n.until(|st| s.read(st, &mut b))? != 0 {}
        s.close(&mut n.stack)?;
    }
    n.linger();
    Ok((sent.iter().sum(), thread_cpu_seconds() - cpu0))
}

/// One shard's server: accepts `count` connections, reads all of them round-robin to end of
/// stream, verifying each against the pattern. Returns (bytes, verified).
fn sink_all(
    n: &mut Node<PipeEnd>,
    l: TcpListener,
    count: usize,
    p: &Params,
    pattern: &Pattern,
) -> Result<(u64, bool), BoxErr> {
    let mut open = Vec::new();
    while open.len() < count {
        let (s, _) = n.until(|st| l.accept(st))?;
        open.push((s, Verifier::new(pattern), 0u64));
    }
    let mut buf = vec![0u8; p.recv_size.max(1)];
    let (mut bytes, mut verified) = (0u64, true);
    while !open.is_empty() {
        let mut progressed = false;
        let mut i = 0;
        while i < open.len() {
            let (s, v, got) = &mut open[i];
            match s.read(&mut n.stack, &mut buf) {
                Ok(0) => {
                    verified &= !p.verify || v.verified(*got);
                    bytes += *got;
                    s.close(&mut n.stack)?;
                    open.swap_remove(i);
                    progressed = true;
                    continue;
                }
                Ok(k) => {
                    if p.verify {
                        v.check(&buf[..k]);
                    }
                    *got += k as u64;
                    progressed = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
            i += 1;
        }
        n.poll(progressed)?;
    }
    n.linger();
    Ok((bytes, verified))
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
