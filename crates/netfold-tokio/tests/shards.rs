//! Shards on tokio: two hosts of two shards each over the multi-queue in-memory
//! link (RSS steering at every transmit), each shard a `Net` on its own thread's
//! current-thread runtime. Every wait is bounded (`tokio::time::timeout`), so a lost wake-up
//! or a connection on the wrong shard fails the test instead of hanging it.

use netfold::phy::mq::{mq_link, MqCounters, MqPort};
use netfold::phy::pipe::PipeConfig;
use netfold::rss::{Rss, MICROSOFT_KEY};
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Rng};
use netfold_tokio::shards::{current_shard, mq_links, Shards, EPHEMERAL};
use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 7;
const LIMIT: Duration = Duration::from_secs(30);

struct Hosts {
    rss: Arc<Rss>,
    client: Shards,
    server: Shards,
    counters: Vec<Arc<MqCounters>>,
}

fn hosts(n: usize, cpus: &[usize]) -> Hosts {
    let rss = Arc::new(Rss::new(MICROSOFT_KEY, n));
    let (a, b) = mq_link(PipeConfig::default(), Arc::clone(&rss));
    let counters = a.iter().chain(&b).map(MqPort::counters).collect();
    let (la, lb) = mq_links(a, b, Arc::clone(&rss));
    Hosts {
        client: Shards::start(config(CLIENT, 1), la, Arc::clone(&rss), cpus).unwrap(),
        server: Shards::start(config(SERVER, 2), lb, Arc::clone(&rss), cpus).unwrap(),
        rss,
        counters,
    }
}

fn server_addr() -> SocketAddr {
    SocketAddrV4::new(SERVER, PORT).into()
}

/// A runtime of the test's own, to wait for what the shards' tasks return.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { tokio::time::timeout(LIMIT, f).await.expect("timed out") })
}

fn payload(id: u32) -> Vec<u8> {
    Rng::new(u64::from(id) + 1).bytes(3000 + id as usize * 211)
}

/// Both directions of a client connection from `lport` hash to `shard`.
fn assert_hashes_to(rss: &Rss, lport: u16, shard: usize) {
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    assert_eq!(rss.shard_of_ip(s, c, PORT, lport), shard, "reply direction");
    assert_eq!(
        rss.shard_of_ip(c, s, lport, PORT),
        shard,
        "request direction"
    );
}

#[test]
fn tasks_on_both_shards_echo_and_each_connection_is_accepted_on_its_own_shard() {
    const PER_SHARD: u32 = 16;
    let h = hosts(2, &[0, 1]);
    let listener =
        Arc::new(block_on(h.server.listen(server_addr(), 64, Default::default())).unwrap());
    assert_eq!(listener.len(), 2);
    // A per-shard accept loop on each server shard, echoing each connection in its own task
    // (spawned from the loop: on the same shard's runtime).
    let servers: Vec<_> = (0..2)
        .map(|k| {
            let l = Arc::clone(&listener);
            h.server
                .run_on(k, async move {
                    assert_eq!(current_shard(), Some(k));
                    let mut peers = Vec::new();
                    let mut echoes = Vec::new();
                    for _ in 0..PER_SHARD {
                        let (mut s, peer) = l.accept_on(k).await?;
                        assert_eq!(s.local_addr()?, server_addr());
                        peers.push(peer.port());
                        echoes.push(tokio::spawn(async move {
                            assert_eq!(current_shard(), Some(k));
                            let (mut r, mut w) = s.split();
                            let n = tokio::io::copy(&mut r, &mut w).await?;
                            w.shutdown().await?;
                            std::io::Result::Ok(n)
                        }));
                    }
                    for e in echoes {
                        assert!(e.await.expect("echo task")? >= 3000);
                    }
                    std::io::Result::Ok(peers)
                })
                .unwrap()
        })
        .collect();
    // Client tasks on both client shards, all at once: each connects from its own shard.
    let mut clients = Vec::new();
    for k in 0..2 {
        for i in 0..PER_SHARD {
            let c = h.client.clone();
            let id = k as u32 * PER_SHARD + i;
            clients.push(
                h.client
                    .run_on(k, async move {
                        assert_eq!(c.current(), Some(k));
                        let (shard, mut s) = c.connect(server_addr(), Default::default()).await?;
                        assert_eq!(shard, k, "a shard's task connects on its own shard");
                        let lport = s.local_addr()?.port();
                        let data = payload(id);
                        let (mut r, mut w) = s.split();
                        let send = async {
                            w.write_all(&data).await?;
                            w.shutdown().await
                        };
                        let mut back = Vec::new();
                        let (sent, got) = tokio::join!(send, r.read_to_end(&mut back));
                        sent?;
                        got?;
                        assert!(back == data, "connection {id}: the echo differs");
                        std::io::Result::Ok((shard, lport))
                    })
                    .unwrap(),
            );
        }
    }
    let opened: Vec<(usize, u16)> = block_on(async {
        let mut v = Vec::new();
        for c in clients {
            v.push(c.await.expect("client task").expect("client"));
        }
        v
    });
    let accepted: Vec<Vec<u16>> = block_on(async {
        let mut v = Vec::new();
        for s in servers {
            v.push(s.await.expect("server task").expect("server"));
        }
        v
    });
    assert_eq!(opened.len(), 32);
    for (k, peers) in accepted.iter().enumerate() {
        let from_k: BTreeSet<u16> = opened.iter().filter(|o| o.0 == k).map(|o| o.1).collect();
        let got: BTreeSet<u16> = peers.iter().copied().collect();
        assert_eq!(
            got, from_k,
            "server shard {k} accepted what client shard {k} opened"
        );
        assert_eq!(got.len(), PER_SHARD as usize);
        for &p in peers {
            assert!(EPHEMERAL.contains(&p));
            assert_hashes_to(&h.rss, p, k);
        }
    }
    // Nothing crossed shards on the link, and each queue carried its shard's frames.
    for c in &h.counters {
        assert_eq!(c.cross_shard_frames(), 0, "port of shard {}", c.shard());
        assert!(c.rx_from()[c.shard()] > 0, "shard {} idle", c.shard());
    }
    // No segment reached a stack without a socket for it.
    for shards in [&h.client, &h.server] {
        for k in 0..2 {
            let no_socket = shards
                .net(k)
                .unwrap()
                .with_stack(|st| st.tcp().stats().no_socket);
            assert_eq!(no_socket, 0, "shard {k}");
        }
    }
}

#[test]
fn accept_across_shards_reports_each_connection_on_its_shard_and_round_robin_connects() {
    let h = hosts(2, &[]);
    let listener = block_on(h.server.listen(server_addr(), 64, Default::default())).unwrap();
    assert_eq!(listener.local_addr().unwrap(), server_addr());
    block_on(async {
        // From a thread of no shard: round-robin, and accept() names the shard.
        assert_eq!(current_shard(), None);
        let mut shards = Vec::new();
        for _ in 0..4 {
            let (k, mut c) = h
                .client
                .connect(server_addr(), Default::default())
                .await
                .unwrap();
            let lport = c.local_addr().unwrap().port();
            assert_hashes_to(&h.rss, lport, k);
            let (ks, mut s, peer) = listener.accept().await.unwrap();
            assert_eq!(
                (ks, peer.port()),
                (k, lport),
                "accepted on the client's shard"
            );
            c.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ping");
            shards.push(k);
        }
        assert_eq!(shards, vec![0, 1, 0, 1]);
        // A task already waiting in accept() is woken by a connection on either shard.
        for k in [1, 0] {
            let waiting = async { listener.accept().await.unwrap() };
            let connecting = h.client.connect_on(k, server_addr(), Default::default());
            let ((ks, _s, peer), c) = tokio::join!(waiting, connecting);
            let c = c.unwrap();
            assert_eq!((ks, peer.port()), (k, c.local_addr().unwrap().port()));
        }
    });
    // Out-of-range shards are errors, not panics.
    assert!(h.client.run_on(2, async {}).is_err());
    let r = block_on(h.client.connect_on(2, server_addr(), Default::default()));
    assert_eq!(r.err().map(|e| e.kind()), Some(ErrorKind::InvalidInput));
    let r = block_on(listener.accept_on(2));
    assert_eq!(r.err().map(|e| e.kind()), Some(ErrorKind::InvalidInput));
}

#[test]
fn shutdown_stops_the_shards_and_cancels_their_tasks() {
    let h = hosts(2, &[]);
    let listener =
        Arc::new(block_on(h.server.listen(server_addr(), 8, Default::default())).unwrap());
    let l = Arc::clone(&listener);
    // A task that would wait for ever, holding a clone of the shards.
    let server = h.server.clone();
    let waiting = h
        .server
        .run_on(0, async move {
            let _keep = server;
            l.accept_on(0).await
        })
        .unwrap();
    h.server.shutdown();
    let r = block_on(waiting);
    assert!(r.is_err_and(|e| e.is_cancelled()), "the task was cancelled");
    // The listeners' driver is gone: accepting fails instead of hanging.
    let r = block_on(listener.accept_on(1));
    assert_eq!(r.err().map(|e| e.kind()), Some(ErrorKind::NotConnected));
    // Spawning on a stopped shard gives a handle that reports the cancellation.
    let t = h.server.run_on(1, async {}).unwrap();
    assert!(block_on(t).is_err());
}
