//! Tokio shards over AF_XDP on a two-queue veth ([`Shards::start_xdp_queues`]): the kernel's
//! stack in one throw-away namespace at 198.18.0.1/24 on its end, a 2-shard netfold host at
//! 198.18.0.2/24 on the other end's two queues (the `netfold_testkit::vethns` fixture). Needs
//! root, ethtool and python3 and a kernel with AF_XDP; without them `SKIPPED: ...`. Only
//! 198.18.0.0/15 is configured; both namespaces are deleted by their guards, also when an
//! assertion fails.

use netfold_testkit::require_env;
use netfold_testkit::tapns::{self, stack, NETFOLD_IP, SERIAL};
use netfold_testkit::vethns;
use netfold_tokio::shards::{current_shard, Shards};
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONNS: usize = 16;
const LEN: usize = 48 << 10;

/// The kernel opens `CONNS` echo connections to a 2-shard tokio server whose per-shard tasks
/// accept only their own shard's connections. Every connection is echoed byte for byte and
/// served once, both shards get some, both queues' frames are lent to their shard in place,
/// and no shard sees a segment for a connection it does not have.
#[test]
fn kernel_connections_are_served_by_the_shard_of_their_queue() {
    require_env!();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((veth, queues)) = vethns::xdp_queues(2) else {
        return;
    };
    let meters: Vec<_> = queues.iter().map(|q| q.socket().copy_meter()).collect();
    let shards = Shards::start_xdp_queues(stack(), queues, &[]).expect("start shards");
    assert_eq!(shards.len(), 2);
    let addr = SocketAddrV4::new(NETFOLD_IP, 7);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = Arc::new(
        rt.block_on(shards.listen(addr, 32, Default::default()))
            .unwrap(),
    );
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
    let results = tapns::kernel_echo_clients(&veth.kernel, addr, CONNS, LEN);
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
    for (k, peers) in accepted.iter().enumerate() {
        for p in peers {
            assert!(ports.contains(&p.port()), "shard {k} accepted {p}");
        }
        let (stray, rst) = shards.net(k).unwrap().with_stack(|s| {
            let t = s.tcp().stats();
            (t.no_socket, t.rst_out)
        });
        assert_eq!(
            (stray, rst),
            (0, 0),
            "shard {k}: a segment on the wrong shard"
        );
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
}
