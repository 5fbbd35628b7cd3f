//! Tokio shards over a real two-queue TAP ([`Shards::start_tap_queues`]): the kernel's stack
//! in a throw-away network namespace at 198.18.0.1/24, a 2-shard netfold host at
//! 198.18.0.2/24 in this process on the TAP's two queues. Needs root and /dev/net/tun; without
//! them each test prints `SKIPPED: ...` and passes. Only 198.18.0.0/15 is configured; the
//! namespace is deleted by its guard, also when an assertion fails.

use netfold_os::mqtap::{self, FlowRecord};
use netfold_os::netns::NetNs;
use netfold_os::tap::TapConfig;
use netfold_testkit::require_env;
use netfold_testkit::tapns::{self, stack, KERNEL_IP, NETFOLD_IP, SERIAL};
use netfold_tokio::shards::{current_shard, Shards};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONNS: usize = 16;
const LEN: usize = 48 << 10;

/// Connection `c`'s bytes.
fn payload(c: usize) -> Vec<u8> {
    tapns::payload(c, LEN)
}

/// Per-shard TCP counters: (segments that matched no socket, resets sent).
fn strays(shards: &Shards, k: usize) -> (u64, u64) {
    shards.net(k).unwrap().with_stack(|s| {
        let t = s.tcp().stats();
        (t.no_socket, t.rst_out)
    })
}

fn waiter() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The kernel opens `CONNS` echo connections to a 2-shard tokio server whose per-shard tasks
/// accept only their own shard's connections (`accept_on(k)` in a task on shard `k`). Every
/// connection is echoed byte for byte, served once, on the shard whose queue delivered its
/// frames (each flow's frames arrived on one queue only), both shards get some, and no shard
/// sees a segment for a connection it does not have.
#[test]
fn kernel_connections_are_served_on_the_shard_of_their_queue() {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Declared first, dropped last: after the shards have closed the TAP's queues.
    let ns = NetNs::create().expect("create netns");
    let mut queues = mqtap::open_queues("nftk%d", 2, TapConfig::default()).expect("open queues");
    let name = queues[0].tap().name().to_string();
    eprintln!("steering: {}", queues[0].steering());
    let records: Vec<FlowRecord> = queues.iter_mut().map(|q| q.record_flows(1024)).collect();
    tapns::kernel_side(&ns, &name);
    let shards = Shards::start_tap_queues(stack(), queues, &[]).expect("start shards");
    assert_eq!(shards.len(), 2);
    let addr = SocketAddrV4::new(NETFOLD_IP, 7);
    let rt = waiter();
    let listener = Arc::new(
        rt.block_on(shards.listen(addr, 32, Default::default()))
            .unwrap(),
    );
    // Per shard: the peers it accepted and echoed (pushed once the echo is complete).
    let accepted: Arc<Mutex<Vec<Vec<SocketAddr>>>> = Arc::new(Mutex::new(vec![vec![]; 2]));
    for k in 0..2 {
        let (l, acc) = (Arc::clone(&listener), Arc::clone(&accepted));
        shards
            .run_on(k, async move {
                loop {
                    let (mut s, peer) = l.accept_on(k).await.expect("accept");
                    let acc = Arc::clone(&acc);
                    tokio::spawn(async move {
                        assert_eq!(current_shard(), Some(k), "a task left its shard");
                        let mut buf = vec![0u8; 16 << 10];
                        loop {
                            let n = s.read(&mut buf).await.expect("read");
                            if n == 0 {
                                break;
                            }
                            s.write_all(&buf[..n]).await.expect("write");
                        }
                        s.shutdown().await.expect("shutdown");
                        acc.lock().unwrap()[k].push(peer);
                    });
                }
            })
            .unwrap();
    }
    // The kernel side: CONNS concurrent clients inside the namespace.
    let results = tapns::kernel_echo_clients(&ns, addr, CONNS, LEN);
    let ports = tapns::echoed_ports(results);
    // The server tasks record a peer after their FIN, which the client may see first.
    let deadline = Instant::now() + Duration::from_secs(10);
    let accepted = loop {
        let a = accepted.lock().unwrap().clone();
        if a[0].len() + a[1].len() >= CONNS || Instant::now() > deadline {
            break a;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
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
    shards.shutdown();
}

/// Each shard connects out (from a task on it, `connect`) to a kernel listener in the
/// namespace and exchanges data: the kernel echoes, the bytes come back equal, the connection
/// is on the task's shard, and no shard sees a segment for a connection it does not have
/// (the replies came back to the queue of the shard that connected).
#[test]
fn each_shard_connects_out_to_a_kernel_listener() {
    connect_out(false);
}

/// [`each_shard_connects_out_to_a_kernel_listener`] with the eBPF steering refused: the
/// kernel's automq, where `connect` on shard `k` takes ports with `port % 2 == k`.
#[test]
fn each_shard_connects_out_under_automq() {
    connect_out(true);
}

fn connect_out(automq: bool) {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ns = NetNs::create().expect("create netns");
    let queues = if automq {
        mqtap::open_queues_automq("nftc%d", 2, TapConfig::default())
    } else {
        mqtap::open_queues("nftc%d", 2, TapConfig::default())
    }
    .expect("open queues");
    let name = queues[0].tap().name().to_string();
    eprintln!("steering: {}", queues[0].steering());
    tapns::kernel_side(&ns, &name);
    let shards = Shards::start_tap_queues(stack(), queues, &[]).expect("start shards");
    assert_eq!(shards.rss().is_none(), automq, "the steering found");
    let kernel = ns
        .run_in(|| TcpListener::bind((KERNEL_IP, 7009)))
        .expect("enter netns")
        .expect("kernel listener");
    // The kernel's echo server: two connections, one per shard.
    let echo = std::thread::spawn(move || -> std::io::Result<Vec<SocketAddr>> {
        let mut peers = Vec::new();
        for _ in 0..2 {
            let (mut s, peer) = kernel.accept()?;
            s.set_read_timeout(Some(Duration::from_secs(20)))?;
            let mut buf = vec![0u8; 16 << 10];
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n])?;
            }
            s.shutdown(Shutdown::Write)?;
            peers.push(peer);
        }
        Ok(peers)
    });
    let remote = SocketAddrV4::new(KERNEL_IP, 7009);
    let rt = waiter();
    let mut locals = Vec::new();
    for k in 0..2 {
        let c = shards.clone();
        let task = shards
            .run_on(k, async move {
                let (shard, mut s) = c.connect(remote, Default::default()).await?;
                let local = s.local_addr()?;
                let data = payload(k);
                let (mut r, mut w) = tokio::io::split(&mut s);
                let send = async {
                    w.write_all(&data).await?;
                    w.shutdown().await
                };
                let mut back = Vec::new();
                let recv = r.read_to_end(&mut back);
                let (sent, got) = tokio::join!(send, recv);
                sent?;
                got?;
                std::io::Result::Ok((shard, local, back == data))
            })
            .unwrap();
        let (shard, local, same) = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), task).await })
            .expect("connect-out timed out")
            .unwrap()
            .unwrap_or_else(|e| panic!("shard {k}: {e}"));
        assert_eq!(shard, k, "the connect ran off the task's shard");
        assert!(same, "shard {k}: the echo differs");
        if automq {
            assert_eq!(
                usize::from(local.port()) % 2,
                k,
                "not shard {k}'s port: {local}"
            );
        } else {
            let rss = shards.rss().unwrap();
            assert_eq!(
                rss.shard_of_ip((*remote.ip()).into(), local.ip(), 7009, local.port()),
                k
            );
        }
        locals.push(local);
    }
    let peers = echo.join().unwrap().expect("kernel echo");
    for l in &locals {
        assert!(
            peers.contains(l),
            "{l} not among the kernel's peers {peers:?}"
        );
    }
    for k in 0..2 {
        assert_eq!(strays(&shards, k), (0, 0), "shard {k}: a stray segment");
    }
    shards.shutdown();
}
