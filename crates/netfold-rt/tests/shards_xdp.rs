//! Blocking shards over AF_XDP on a two-queue veth: the kernel's stack in one throw-away
//! namespace at 198.18.0.1/24 on its end, a 2-shard netfold host at 198.18.0.2/24 on the
//! other end's two queues, one AF_XDP socket (and shard) per queue
//! ([`netfold_os::xdpmq::open_queues`], [`Shards::start_xdp_queues`]; the
//! `netfold_testkit::vethns` fixture). Needs root, ethtool and python3 and a kernel with
//! AF_XDP; without them `SKIPPED: ...`. Only 198.18.0.0/15 is configured; both namespaces are
//! deleted by their guards, also when an assertion fails.

use netfold::shard::Steering;
use netfold_rt::shards::{ShardConfig, Shards};
use netfold_testkit::require_env;
use netfold_testkit::tapns::{self, stack, NETFOLD_IP, SERIAL};
use netfold_testkit::vethns;
use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CONNS: usize = 16;
const LEN: usize = 48 << 10;

/// Shard `k` saw no segment for a connection it does not have, and reset nothing.
fn assert_no_stray_segments(shards: &Shards, k: usize) {
    let (stray, rst) = shards.shard(k).with_stack(|s| {
        let t = s.tcp().stats();
        (t.no_socket, t.rst_out)
    });
    assert_eq!(
        (stray, rst),
        (0, 0),
        "shard {k}: a segment on the wrong shard"
    );
}

/// The kernel opens `CONNS` echo connections to a 2-shard netfold server on the veth's two
/// queues (the kernel picks each connection's transmit queue, which is the queue it arrives
/// on at our end); per-shard workers accept only their own shard's connections. Every
/// connection is echoed byte for byte and accepted by one shard, both queues carry frames
/// (each lent to its shard in place), and no shard sees a segment for a connection it does
/// not have.
#[test]
fn kernel_connections_are_served_by_the_shard_of_their_queue() {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((veth, queues)) = vethns::xdp_queues(2) else {
        return;
    };
    assert_eq!(queues.len(), 2);
    for (k, q) in queues.iter().enumerate() {
        assert_eq!(q.socket().queue(), k as u32);
    }
    let meters: Vec<_> = queues.iter().map(|q| q.socket().copy_meter()).collect();
    let shards = Shards::start_xdp_queues(stack(), queues, ShardConfig::tap(2).unpinned())
        .expect("start shards");
    let addr = SocketAddrV4::new(NETFOLD_IP, 7);
    let listener = Arc::new(shards.listen(addr, 32, Default::default()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
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
    let results = tapns::kernel_echo_clients(&veth.kernel, addr, CONNS, LEN);
    stop.store(true, Ordering::Relaxed);
    let accepted: Vec<Vec<SocketAddr>> = workers
        .into_iter()
        .map(|w| w.join().unwrap().expect("worker"))
        .collect();
    let ports = tapns::echoed_ports(results);
    assert_eq!(accepted[0].len() + accepted[1].len(), CONNS, "{accepted:?}");
    for (k, peers) in accepted.iter().enumerate() {
        for p in peers {
            assert!(ports.contains(&p.port()), "shard {k} accepted {p}");
        }
        assert_no_stray_segments(&shards, k);
    }
    // With 16 flows over 2 queues, both are used (all on one: 2^-15).
    assert!(
        accepted.iter().all(|a| !a.is_empty()),
        "one shard got every connection: {accepted:?}"
    );
    for (k, m) in meters.iter().enumerate() {
        let (rx_copied, tx_copied, lent, frames) = m.get();
        assert!(frames > 0, "queue {k} received nothing");
        // Received frames are lent in place, and sent ones built in their transmit chunk.
        assert_eq!(
            (rx_copied, tx_copied, lent),
            (0, 0, frames),
            "queue {k}: frames copied"
        );
    }
    drop(listener);
    let _ = shards.shutdown();
}

/// Each of 2 shards opens 4 connections to a kernel echo server across the veth: a shard's
/// `connect` picks a local port whose 4-tuple hashes to it, so the kernel's replies reach it
/// whichever queue the kernel sends them on (the queues steer in software by that hash).
/// Every connection is echoed byte for byte, and no shard sees a segment for a connection it
/// does not have.
#[test]
fn shards_connections_to_the_kernel_come_back_to_their_shard() {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((veth, queues)) = vethns::xdp_queues(2) else {
        return;
    };
    let shards = Arc::new(
        Shards::start_xdp_queues(stack(), queues, ShardConfig::tap(2).unpinned())
            .expect("start shards"),
    );
    let Steering::Rss(rss) = shards.steering().clone() else {
        panic!("two AF_XDP queues steer by the Toeplitz hash")
    };
    const PER_SHARD: usize = 4;
    let port = 7007;
    let _server = veth.echo_server_for(port, 2 * PER_SHARD);
    let remote = SocketAddrV4::new(tapns::KERNEL_IP, port);
    let workers: Vec<_> = (0..2)
        .map(|k| {
            let sh = Arc::clone(&shards);
            shards
                .spawn_on(k, move |_rt| -> std::io::Result<Vec<(usize, SocketAddr)>> {
                    let mut seen = Vec::new();
                    for c in 0..PER_SHARD {
                        let (on, mut s) =
                            sh.connect(remote, Default::default(), Some(Duration::from_secs(10)))?;
                        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                        let data = tapns::payload(k * PER_SHARD + c, LEN);
                        s.write_all(&data)?;
                        let mut back = vec![0u8; LEN];
                        s.read_exact(&mut back)?;
                        assert!(back == data, "shard {k} connection {c}: echo differs");
                        seen.push((on, s.local_addr()?));
                        s.shutdown_write()?;
                    }
                    Ok(seen)
                })
                .unwrap()
        })
        .collect();
    for (k, w) in workers.into_iter().enumerate() {
        let seen = w.join().unwrap().expect("worker");
        assert_eq!(seen.len(), PER_SHARD);
        for (on, local) in seen {
            assert_eq!(on, k, "connect from shard {k}'s thread ran on shard {on}");
            // Both directions of the 4-tuple hash to the shard.
            let back = rss.shard_of_ip(tapns::KERNEL_IP.into(), local.ip(), port, local.port());
            assert_eq!(
                back, k,
                "{local}: the kernel's replies hash to shard {back}"
            );
        }
    }
    for k in 0..2 {
        assert_no_stray_segments(&shards, k);
    }
    let shards = Arc::try_unwrap(shards).unwrap_or_else(|_| panic!("shards still shared"));
    let _ = shards.shutdown();
}
