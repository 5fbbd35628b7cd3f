//! Blocking shards over a real two-queue TAP: the kernel's stack in a throw-away
//! network namespace at 198.18.0.1/24, a 2-shard netfold host at 198.18.0.2/24 in this
//! process on the TAP's two queues. Needs root and /dev/net/tun; without them each test
//! prints `SKIPPED: ...` and passes. Only 198.18.0.0/15 is configured; the namespace is deleted
//! by its guard, also when an assertion fails.

use netfold_os::mqtap::{self, FlowRecord, QueueSteering};
use netfold_os::netns::{self, NetNs};
use netfold_os::tap::TapConfig;
use netfold_rt::shards::{ShardConfig, Shards, Steering};
use netfold_testkit::require_env;
use netfold_testkit::tapns::{self, stack, KERNEL_IP, NETFOLD_IP, SERIAL};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CONNS: usize = 16;
const LEN: usize = 48 << 10;
/// Longer than the kernel's automq keeps an idle flow (`TUN_FLOW_EXPIRE`, 3 s).
const IDLE: Duration = Duration::from_millis(4200);

/// Connection `c`'s bytes: its number first, then a pattern.
fn payload(c: usize) -> Vec<u8> {
    tapns::payload(c, LEN)
}

/// Per-shard TCP counters: (segments that matched no socket, resets sent).
fn strays(shards: &Shards, k: usize) -> (u64, u64) {
    shards.shard(k).with_stack(|s| {
        let t = s.tcp().stats();
        (t.no_socket, t.rst_out)
    })
}

/// The kernel opens `CONNS` echo connections to a 2-shard netfold server; per-shard workers
/// accept only their own shard's connections. Every connection is echoed byte for byte, every
/// flow's frames arrived on one queue only, and each shard accepted exactly the flows its
/// queue delivered.
#[test]
fn kernel_connections_are_served_on_the_queue_the_kernel_picked() {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Declared first, dropped last: after the shards have closed the TAP's queues.
    let ns = NetNs::create().expect("create netns");
    let mut queues = mqtap::open_queues("nfrt%d", 2, TapConfig::default()).expect("open queues");
    let name = queues[0].tap().name().to_string();
    let records: Vec<FlowRecord> = queues.iter_mut().map(|q| q.record_flows(1024)).collect();
    tapns::kernel_side(&ns, &name);
    let shards = Shards::start_tap_queues(stack(), queues, ShardConfig::tap(2).unpinned())
        .expect("start shards");
    let addr = SocketAddrV4::new(NETFOLD_IP, 7);
    let listener = Arc::new(shards.listen(addr, 32, Default::default()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // Per shard: the peers it accepted and echoed.
    let workers: Vec<_> = (0..2)
        .map(|k| {
            let (l, stop) = (Arc::clone(&listener), Arc::clone(&stop));
            shards
                .spawn_on(k, move |_rt| -> std::io::Result<Vec<SocketAddr>> {
                    let mut peers = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let (mut s, peer) = match l.on(k).accept_timeout(Duration::from_millis(50))
                        {
                            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
                            r => r?,
                        };
                        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                        let mut buf = vec![0u8; 16 << 10];
                        loop {
                            let n = s.read(&mut buf)?;
                            if n == 0 {
                                break;
                            }
                            s.write_all(&buf[..n])?;
                        }
                        s.shutdown_write()?;
                        peers.push(peer);
                    }
                    Ok(peers)
                })
                .unwrap()
        })
        .collect();
    // The kernel side: CONNS concurrent clients inside the namespace.
    let results = tapns::kernel_echo_clients(&ns, addr, CONNS, LEN);
    stop.store(true, Ordering::Relaxed);
    let accepted: Vec<Vec<SocketAddr>> = workers
        .into_iter()
        .map(|w| w.join().unwrap().expect("worker"))
        .collect();
    let ports = tapns::echoed_ports(results);
    // Every connection served once, on one shard.
    assert_eq!(accepted[0].len() + accepted[1].len(), CONNS, "{accepted:?}");
    let (flows, split) = mqtap::flows_on_two_queues(&records);
    assert_eq!(split, 0, "a flow's frames arrived on two queues");
    assert_eq!(flows, CONNS, "one recorded flow per connection");
    for (k, peers) in accepted.iter().enumerate() {
        for p in peers {
            assert!(ports.contains(&p.port()));
            assert!(
                records[k].contains(p.ip(), p.port(), 7),
                "shard {k} accepted {p}, which its queue did not deliver"
            );
            assert!(!records[1 - k].contains(p.ip(), p.port(), 7));
        }
        assert_eq!(
            strays(&shards, k),
            (0, 0),
            "shard {k}: a segment on the wrong shard"
        );
    }
    // With 16 flows hashed over 2 queues, both are used (all on one: 2^-15).
    assert!(
        accepted.iter().all(|a| !a.is_empty()),
        "one shard got every connection: {accepted:?}"
    );
    drop(listener);
    let _ = shards.shutdown();
}

/// Each shard of a netfold host on a 2-queue TAP ([`Shards::start_tap`]) connects out to a
/// kernel listener: with the eBPF steering from a port whose 4-tuple hashes to the shard,
/// under the kernel's automq from any port of its own (its SYN leaves on the shard's queue
/// after the queue's steering probe). The kernel's replies come back to that queue (the only
/// shard that has the connection), and the data is echoed byte for byte; no shard sees a
/// segment for a connection it does not have.
#[test]
fn shards_connect_out_and_the_replies_come_back_to_their_queue() {
    connect_out(false);
}

/// [`shards_connect_out_and_the_replies_come_back_to_their_queue`] with the fallback forced:
/// the kernel's automq and the steering probes.
#[test]
fn shards_connect_out_under_automq() {
    connect_out(true);
}

fn connect_out(automq: bool) {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ns = NetNs::create().expect("create netns");
    let tap = format!("nfrc{}", std::process::id() % 100_000);
    let queues = if automq {
        mqtap::open_queues_automq(&tap, 2, TapConfig::default())
    } else {
        mqtap::open_queues(&tap, 2, TapConfig::default())
    }
    .expect("open queues");
    eprintln!("steering: {}", queues[0].steering());
    let shards = Shards::start_tap_queues(stack(), queues, ShardConfig::tap(2).unpinned())
        .expect("start shards");
    if automq {
        assert!(matches!(shards.steering(), Steering::FollowTx));
    }
    tapns::kernel_side(&ns, &tap);
    let server = ns
        .run_in(|| TcpListener::bind((KERNEL_IP, 7007)))
        .expect("enter netns")
        .expect("kernel listener");
    // The kernel's echo server: one connection per shard. Accepted sockets live in the
    // namespace of the listener whatever thread serves them.
    let echo = std::thread::spawn(move || -> std::io::Result<usize> {
        let mut served = 0;
        for _ in 0..2 {
            let (mut s, _) = server.accept()?;
            s.set_read_timeout(Some(Duration::from_secs(20)))?;
            let mut buf = vec![0u8; 16 << 10];
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n])?;
            }
            served += 1;
        }
        Ok(served)
    });
    let remote = SocketAddrV4::new(KERNEL_IP, 7007);
    for k in 0..2 {
        let c = shards.clone();
        let t = shards
            .spawn_on(k, move |_rt| -> std::io::Result<()> {
                let (shard, mut s) =
                    c.connect(remote, Default::default(), Some(Duration::from_secs(10)))?;
                assert_eq!(shard, k);
                let port = s.local_addr()?.port();
                match c.steering() {
                    // The kernel's frames hash to this shard's queue.
                    Steering::Rss(rss) => assert_eq!(
                        rss.shard_of(KERNEL_IP.octets(), NETFOLD_IP.octets(), 7007, port),
                        k
                    ),
                    // Shards share one address, so each takes its own ports (port % 2 == k).
                    Steering::FollowTx => assert_eq!(usize::from(port) % 2, k),
                }
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let data = payload(k);
                let reader = {
                    let mut r = s.try_clone()?;
                    std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
                        let mut back = vec![0u8; LEN];
                        r.read_exact(&mut back)?;
                        Ok(back)
                    })
                };
                s.write_all(&data)?;
                let back = reader.join().unwrap()?;
                assert!(back == data, "shard {k}: the echo differs");
                s.shutdown_write()?;
                Ok(())
            })
            .unwrap();
        t.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("shard {k}: {e}"));
    }
    assert_eq!(echo.join().unwrap().expect("kernel echo"), 2);
    // Under automq without the queues' steering probe the kernel's first SYN-ACK may go by
    // its hash to the other shard, which resets it: then these would not be zero.
    for k in 0..2 {
        assert_eq!(
            strays(&shards, k),
            (0, 0),
            "shard {k}: a segment on the wrong shard"
        );
    }
    let _ = shards.shutdown();
}

/// One round of the echo: `data` out, the same bytes back.
fn echo_round<S: Read + Write>(s: &mut S, data: &[u8]) -> std::io::Result<()> {
    s.write_all(data)?;
    let mut back = vec![0u8; data.len()];
    s.read_exact(&mut back)?;
    if back != data {
        return Err(std::io::Error::other("the echo differs"));
    }
    Ok(())
}

/// With the eBPF Toeplitz steering in force (else `SKIPPED: ...`): each shard connects out to a
/// kernel echo listener, and 4 kernel clients connect to a netfold echo listener on both
/// shards; every connection exchanges data, stays idle for longer than the kernel's automq
/// remembers a flow (4.2 s > 3 s), then exchanges again (on the shards' connections the
/// kernel sends first after the idle: under automq its frames would go by the kernel's own
/// hash, to the other shard half the time, which resets the connection). No connection is reset, the bytes
/// are exact, and every frame of every flow arrived on one queue: the one its 4-tuple's RSS
/// hash names, which is the shard that has the connection.
#[test]
fn ebpf_steered_flows_stay_on_their_queue_after_idling() {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ns = NetNs::create().expect("create netns");
    let mut queues = mqtap::open_queues("nfrt%d", 2, TapConfig::default()).expect("open queues");
    if let QueueSteering::Automq(why) = queues[0].steering() {
        netns::skip(Some(format!("eBPF steering not in force: {why}")));
        return;
    }
    let name = queues[0].tap().name().to_string();
    let records: Vec<FlowRecord> = queues.iter_mut().map(|q| q.record_flows(1024)).collect();
    tapns::kernel_side(&ns, &name);
    let shards = Shards::start_tap_queues(stack(), queues, ShardConfig::tap(2).unpinned())
        .expect("start shards");
    let Steering::Rss(rss) = shards.steering().clone() else {
        panic!("the shards do not steer by the queues' table");
    };
    const KERNEL_CLIENTS: usize = 4;
    const ROUND: usize = 16 << 10;
    // The kernel's echo server for the shards' connections.
    let server = ns
        .run_in(|| TcpListener::bind((KERNEL_IP, 7008)))
        .expect("enter netns")
        .expect("kernel listener");
    let kernel_echo = std::thread::spawn(move || -> std::io::Result<()> {
        let mut conns = Vec::new();
        for _ in 0..2 {
            let (mut s, _) = server.accept()?;
            conns.push(std::thread::spawn(move || -> std::io::Result<()> {
                s.set_read_timeout(Some(Duration::from_secs(20)))?;
                let mut buf = vec![0u8; ROUND];
                s.read_exact(&mut buf)?;
                s.write_all(&buf)?;
                // The kernel speaks first after the idle: automq would have forgotten which
                // queue the flow was written on by now.
                std::thread::sleep(IDLE);
                s.write_all(&payload(9)[..ROUND])?;
                loop {
                    let n = s.read(&mut buf)?;
                    if n == 0 {
                        return Ok(());
                    }
                    s.write_all(&buf[..n])?;
                }
            }));
        }
        conns.into_iter().try_for_each(|c| c.join().unwrap())
    });
    // netfold's echo server on both shards for the kernel's connections.
    let addr = SocketAddrV4::new(NETFOLD_IP, 7);
    let listener = Arc::new(shards.listen(addr, 32, Default::default()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|k| {
            let (l, stop) = (Arc::clone(&listener), Arc::clone(&stop));
            shards
                .spawn_on(k, move |_rt| -> std::io::Result<Vec<SocketAddr>> {
                    let mut peers = Vec::new();
                    let mut conns = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let (mut s, peer) = match l.on(k).accept_timeout(Duration::from_millis(50))
                        {
                            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
                            r => r?,
                        };
                        peers.push(peer);
                        conns.push(std::thread::spawn(move || -> std::io::Result<()> {
                            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                            let mut buf = vec![0u8; 16 << 10];
                            loop {
                                let n = s.read(&mut buf)?;
                                if n == 0 {
                                    break;
                                }
                                s.write_all(&buf[..n])?;
                            }
                            s.shutdown_write()
                        }));
                    }
                    for c in conns {
                        c.join().unwrap()?;
                    }
                    Ok(peers)
                })
                .unwrap()
        })
        .collect();
    // The shards' connections out: round, idle, round.
    let remote = SocketAddrV4::new(KERNEL_IP, 7008);
    let outs: Vec<_> = (0..2)
        .map(|k| {
            let c = shards.clone();
            shards
                .spawn_on(k, move |_rt| -> std::io::Result<u16> {
                    let (shard, mut s) =
                        c.connect(remote, Default::default(), Some(Duration::from_secs(10)))?;
                    assert_eq!(shard, k);
                    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    let data = payload(k);
                    echo_round(&mut s, &data[..ROUND])?;
                    // Idle until the kernel speaks.
                    let mut hello = vec![0u8; ROUND];
                    s.read_exact(&mut hello)?;
                    assert!(
                        hello == payload(9)[..ROUND],
                        "shard {k}: the kernel's bytes"
                    );
                    echo_round(&mut s, &data[ROUND..2 * ROUND])?;
                    s.shutdown_write()?;
                    Ok(s.local_addr()?.port())
                })
                .unwrap()
        })
        .collect();
    // The kernel's connections in, at the same time: round, idle, round.
    let ins: Vec<std::io::Result<u16>> = ns
        .run_in(|| {
            let clients: Vec<_> = (0..KERNEL_CLIENTS)
                .map(|c| {
                    std::thread::spawn(move || -> std::io::Result<u16> {
                        let mut s =
                            TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10))?;
                        s.set_read_timeout(Some(Duration::from_secs(20)))?;
                        let data = payload(c + 2);
                        echo_round(&mut s, &data[..ROUND])?;
                        std::thread::sleep(IDLE);
                        echo_round(&mut s, &data[ROUND..2 * ROUND])?;
                        s.shutdown(Shutdown::Write)?;
                        let mut rest = Vec::new();
                        s.read_to_end(&mut rest)?;
                        assert!(rest.is_empty());
                        Ok(s.local_addr()?.port())
                    })
                })
                .collect();
            clients.into_iter().map(|t| t.join().unwrap()).collect()
        })
        .expect("enter netns");
    let out_ports: Vec<u16> = outs
        .into_iter()
        .enumerate()
        .map(|(k, t)| {
            t.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("shard {k}'s connection: {e}"))
        })
        .collect();
    kernel_echo.join().unwrap().expect("kernel echo");
    stop.store(true, Ordering::Relaxed);
    let accepted: Vec<Vec<SocketAddr>> = workers
        .into_iter()
        .map(|w| w.join().unwrap().expect("worker"))
        .collect();
    let in_ports: Vec<u16> = ins
        .into_iter()
        .enumerate()
        .map(|(c, r)| r.unwrap_or_else(|e| panic!("kernel client {c}: {e}")))
        .collect();
    // Every frame of a shard's connection came in on its own queue only.
    for (k, &port) in out_ports.iter().enumerate() {
        assert!(
            records[k].contains(KERNEL_IP.into(), 7008, port),
            "shard {k}"
        );
        assert!(
            !records[1 - k].contains(KERNEL_IP.into(), 7008, port),
            "shard {k}"
        );
    }
    // Every kernel connection: accepted by the shard its hash names, whose queue alone
    // delivered its frames.
    assert_eq!(accepted[0].len() + accepted[1].len(), KERNEL_CLIENTS);
    for &port in &in_ports {
        let k = rss.shard_of(KERNEL_IP.octets(), NETFOLD_IP.octets(), port, 7);
        assert!(
            accepted[k].iter().any(|p| p.port() == port),
            "port {port}: not accepted on shard {k}: {accepted:?}"
        );
        assert!(
            records[k].contains(KERNEL_IP.into(), port, 7),
            "port {port}"
        );
        assert!(
            !records[1 - k].contains(KERNEL_IP.into(), port, 7),
            "port {port}"
        );
    }
    let (flows, split) = mqtap::flows_on_two_queues(&records);
    assert_eq!(split, 0, "a flow's frames arrived on two queues");
    assert_eq!(flows, 2 + KERNEL_CLIENTS);
    for k in 0..2 {
        assert_eq!(
            strays(&shards, k),
            (0, 0),
            "shard {k}: a segment on the wrong shard"
        );
    }
    drop(listener);
    let _ = shards.shutdown();
}
