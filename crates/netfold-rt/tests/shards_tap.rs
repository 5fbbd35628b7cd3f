//! Blocking shards over a real two-queue TAP (issue 14): the kernel's stack in a throw-away
//! network namespace at 198.18.0.1/24, a 2-shard netfold host at 198.18.0.2/24 in this
//! process on the TAP's two queues. Needs root and /dev/net/tun; without them each test
//! prints a loud SKIP and passes. Only 198.18.0.0/15 is configured; the namespace is deleted
//! by its guard, also when an assertion fails.

use netfold::iface::StackConfig;
use netfold::wire::ethernet::EthernetAddress;
use netfold_os::mqtap::{self, FlowRecord};
use netfold_os::netns::{self, NetNs};
use netfold_os::tap::TapConfig;
use netfold_rt::shards::{ShardConfig, Shards};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const NETFOLD_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const CONNS: usize = 16;
const LEN: usize = 48 << 10;

/// One namespace test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

macro_rules! require_env {
    () => {
        if let Some(why) = netns::unavailable_reason() {
            eprintln!("\n!!!!!!!! SKIP: sharded TAP test not run: {why} !!!!!!!!\n");
            return;
        }
    };
}

fn stack() -> StackConfig {
    StackConfig {
        mac: EthernetAddress([0x02, 0x6e, 0x66, 0, 0, 2]),
        addr: NETFOLD_IP,
        prefix_len: 24,
        ..StackConfig::default()
    }
}

/// Connection `c`'s bytes: its number first, then a pattern.
fn payload(c: usize) -> Vec<u8> {
    (0..LEN).map(|i| ((i * 7 + c * 13) % 251) as u8).collect()
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
    ns.adopt(&name).expect("move tap into netns");
    ns.configure(&name, KERNEL_IP, 24).expect("address tap");
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
                        s.set_read_timeout(Some(Duration::from_secs(20)));
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
    let results: Vec<std::io::Result<(u16, bool)>> = ns
        .run_in(|| {
            let clients: Vec<_> = (0..CONNS)
                .map(|c| {
                    std::thread::spawn(move || -> std::io::Result<(u16, bool)> {
                        let mut s =
                            TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10))?;
                        s.set_read_timeout(Some(Duration::from_secs(20)))?;
                        let port = s.local_addr()?.port();
                        let data = payload(c);
                        s.write_all(&data)?;
                        s.shutdown(Shutdown::Write)?;
                        let mut back = Vec::new();
                        s.read_to_end(&mut back)?;
                        Ok((port, back == data))
                    })
                })
                .collect();
            clients.into_iter().map(|t| t.join().unwrap()).collect()
        })
        .expect("enter netns");
    stop.store(true, Ordering::Relaxed);
    let accepted: Vec<Vec<SocketAddr>> = workers
        .into_iter()
        .map(|w| w.join().unwrap().expect("worker"))
        .collect();
    let mut ports = Vec::new();
    for (c, r) in results.into_iter().enumerate() {
        let (port, same) = r.unwrap_or_else(|e| panic!("connection {c}: {e}"));
        assert!(same, "connection {c}: the echo differs");
        ports.push(port);
    }
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
/// kernel listener from any local port: its SYN leaves on the shard's queue (after the
/// queue's steering probe), the kernel's replies come back to that queue (the only shard that has the connection), and the data
/// is echoed byte for byte; no shard sees a segment for a connection it does not have.
#[test]
fn shards_connect_out_and_the_replies_come_back_to_their_queue() {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ns = NetNs::create().expect("create netns");
    let tap = format!("nfrc{}", std::process::id() % 100_000);
    let shards = Shards::start_tap(
        &tap,
        2,
        stack(),
        TapConfig::default(),
        ShardConfig::tap(2).unpinned(),
    )
    .expect("start shards");
    ns.adopt(&tap).expect("move tap into netns");
    ns.configure(&tap, KERNEL_IP, 24).expect("address tap");
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
                // Shards share one address, so each takes its own ports (port % 2 == k).
                assert_eq!(usize::from(s.local_addr()?.port()) % 2, k);
                s.set_read_timeout(Some(Duration::from_secs(20)));
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
    // Without the queues' steering probe the kernel's first SYN-ACK may go by its hash to
    // the other shard, which resets it: then these would not be zero.
    for k in 0..2 {
        assert_eq!(
            strays(&shards, k),
            (0, 0),
            "shard {k}: a segment on the wrong shard"
        );
    }
    let _ = shards.shutdown();
}
