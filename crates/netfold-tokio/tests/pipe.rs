//! The tokio adapter over the in-memory link: two stacks, two drivers, one runtime.

use netfold::iface::Stack;
use netfold::phy::pipe::PipeConfig;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Rng};
use netfold_tokio::{pipe, Net, TcpListener, TcpStream, UdpSocket};
use std::io::ErrorKind;
use std::net::SocketAddrV4;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// Generous bound on every test: a hang fails instead of blocking the suite.
const LIMIT: Duration = Duration::from_secs(60);

fn nets() -> (Net, Net) {
    let (la, lb) = pipe(PipeConfig::default());
    (
        Net::spawn(Stack::new(config(A, 1)), la).unwrap(),
        Net::spawn(Stack::new(config(B, 2)), lb).unwrap(),
    )
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test timed out")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_and_addresses() {
    within(async {
        let (a, b) = nets();
        let l = TcpListener::bind(&b, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7))
            .await
            .unwrap();
        assert_eq!(l.local_addr().unwrap(), SocketAddrV4::new(B, 7).into());
        let server = tokio::spawn(async move {
            let (mut s, peer) = l.accept().await.unwrap();
            assert_eq!(peer.ip(), A);
            let mut buf = vec![0u8; 4096];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).await.unwrap();
            }
            s.shutdown().await.unwrap();
        });
        let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, 7))
            .await
            .unwrap();
        assert_eq!(c.peer_addr().unwrap(), SocketAddrV4::new(B, 7).into());
        assert_eq!(c.local_addr().unwrap().ip(), A);
        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        c.write_all(b"hello, netfold").await.unwrap();
        let mut back = [0u8; 14];
        c.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"hello, netfold");
        let info = c.tcp_info().unwrap();
        assert_eq!(info.state, 1, "TCP_ESTABLISHED");
        assert_eq!(info.bytes_received, 14);
        assert!(info.bytes_sent >= 14);
        // Our FIN ends the server's loop; its FIN is our end of stream.
        c.shutdown().await.unwrap();
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).await.unwrap(), 0);
        server.await.unwrap();
    })
    .await
}

/// 16 MiB each way at once, byte-exact, through owned halves in separate tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_mib_both_ways_with_split_halves_in_two_tasks() {
    within(async {
        const LEN: usize = 16 << 20;
        let (a, b) = nets();
        let l = TcpListener::bind(&b, SocketAddrV4::new(B, 9))
            .await
            .unwrap();
        let up = Rng::new(1).bytes(LEN);
        let down = Rng::new(2).bytes(LEN);
        let (up2, down2) = (up.clone(), down.clone());
        let server = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let (mut r, mut w) = s.into_split();
            let writer = tokio::spawn(async move {
                w.write_all(&down2).await.unwrap();
                w.shutdown().await.unwrap();
            });
            let mut got = Vec::with_capacity(LEN);
            r.read_to_end(&mut got).await.unwrap();
            writer.await.unwrap();
            assert!(got == up2, "server received corrupted data");
        });
        let c = TcpStream::connect(&a, SocketAddrV4::new(B, 9))
            .await
            .unwrap();
        let (mut r, mut w) = c.into_split();
        let writer = tokio::spawn(async move {
            w.write_all(&up).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let mut got = Vec::with_capacity(LEN);
        r.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert!(got == down, "client received corrupted data");
        server.await.unwrap();
    })
    .await
}

/// A client on A reaches an echo server on A through a proxy on B that dials it back and
/// relays with `tokio::io::copy_bidirectional`: client (A) -> proxy (B) -> echo (A).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_bidirectional_through_a_proxy() {
    within(async {
        let (a, b) = nets();
        let echo = TcpListener::bind(&a, SocketAddrV4::new(A, 7))
            .await
            .unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let (mut r, mut w) = s.split();
            tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let front = TcpListener::bind(&b, SocketAddrV4::new(B, 8080))
            .await
            .unwrap();
        let b = std::sync::Arc::new(b);
        let bp = std::sync::Arc::clone(&b);
        let proxy = tokio::spawn(async move {
            let (mut inbound, _) = front.accept().await.unwrap();
            let mut outbound = TcpStream::connect(&bp, SocketAddrV4::new(A, 7))
                .await
                .unwrap();
            tokio::io::copy_bidirectional(&mut inbound, &mut outbound)
                .await
                .unwrap()
        });
        let data = Rng::new(3).bytes(1 << 20);
        let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, 8080))
            .await
            .unwrap();
        let (mut r, mut w) = c.split();
        let ((), got) = tokio::join!(
            async {
                w.write_all(&data).await.unwrap();
                w.shutdown().await.unwrap();
            },
            async {
                let mut got = Vec::new();
                r.read_to_end(&mut got).await.unwrap();
                got
            }
        );
        assert!(got == data, "proxied echo corrupted the data");
        let (to_echo, to_client) = proxy.await.unwrap();
        assert_eq!(to_echo, data.len() as u64);
        assert_eq!(to_client, data.len() as u64);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_round_trip() {
    within(async {
        let (a, b) = nets();
        let server = UdpSocket::bind(&b, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 53))
            .await
            .unwrap();
        let client = UdpSocket::bind(&a, SocketAddrV4::new(A, 0)).await.unwrap();
        let client_addr = client.local_addr().unwrap();
        assert_ne!(client_addr.port(), 0);
        let echo = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            for _ in 0..3 {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                assert_eq!(from, client_addr);
                server.send_to(&buf[..n], from).await.unwrap();
            }
        });
        for i in 0..3u8 {
            let msg = Rng::new(u64::from(i) + 10).bytes(100 + usize::from(i) * 300);
            assert_eq!(
                client
                    .send_to(&msg, SocketAddrV4::new(B, 53))
                    .await
                    .unwrap(),
                msg.len()
            );
            let mut buf = [0u8; 1500];
            let (n, from) = client.recv_from(&mut buf).await.unwrap();
            assert_eq!(from, SocketAddrV4::new(B, 53).into());
            assert_eq!(&buf[..n], &msg[..]);
        }
        echo.await.unwrap();
    })
    .await
}

/// Several clients connect at once; each accepted stream answers its own client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepts_several_connections() {
    within(async {
        const CLIENTS: u8 = 8;
        let (a, b) = nets();
        let l = TcpListener::bind(&b, SocketAddrV4::new(B, 80))
            .await
            .unwrap();
        let server = tokio::spawn(async move {
            let mut peers = Vec::new();
            for _ in 0..CLIENTS {
                let (mut s, peer) = l.accept().await.unwrap();
                peers.push(peer);
                tokio::spawn(async move {
                    let mut id = [0u8; 1];
                    s.read_exact(&mut id).await.unwrap();
                    s.write_all(&[id[0], id[0].wrapping_mul(3)]).await.unwrap();
                });
            }
            peers
        });
        let mut clients = Vec::new();
        for id in 0..CLIENTS {
            let c = TcpStream::connect(&a, SocketAddrV4::new(B, 80));
            clients.push(async move {
                let mut c = c.await.unwrap();
                c.write_all(&[id]).await.unwrap();
                let mut back = [0u8; 2];
                c.read_exact(&mut back).await.unwrap();
                assert_eq!(back, [id, id.wrapping_mul(3)]);
                c.local_addr().unwrap()
            });
        }
        let mut locals = Vec::new();
        for c in clients {
            locals.push(c.await);
        }
        let mut peers = server.await.unwrap();
        peers.sort();
        locals.sort();
        assert_eq!(peers, locals);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connection_and_end_of_stream() {
    within(async {
        let (a, b) = nets();
        let e = TcpStream::connect(&a, SocketAddrV4::new(B, 81))
            .await
            .err()
            .expect("connect to a closed port succeeded");
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        // A peer that closes without sending: the first read is end of stream (0), and so is
        // every read after it.
        let l = TcpListener::bind(&b, SocketAddrV4::new(B, 82))
            .await
            .unwrap();
        let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, 82))
            .await
            .unwrap();
        let (s, _) = l.accept().await.unwrap();
        drop(s);
        let mut buf = [0u8; 16];
        assert_eq!(c.read(&mut buf).await.unwrap(), 0);
        assert_eq!(c.read(&mut buf).await.unwrap(), 0);
    })
    .await
}

/// The drivers also run on a current-thread runtime (the task design's point), and dropping
/// the driver fails a waiting call instead of leaving it pending.
#[tokio::test(flavor = "current_thread")]
async fn current_thread_runtime_and_stopped_driver() {
    within(async {
        let (a, b) = nets();
        let l = TcpListener::bind(&b, SocketAddrV4::new(B, 7))
            .await
            .unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(&a, SocketAddrV4::new(B, 7)), l.accept());
        let (mut c, mut s) = (c.unwrap(), s.unwrap().0);
        s.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 4];
            c.read(&mut buf).await
        });
        tokio::task::yield_now().await;
        drop(a);
        let e = reader.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotConnected);
        drop(s);
    })
    .await
}

/// Outside a tokio runtime, starting a driver is an error, not a panic.
#[test]
fn spawn_outside_a_runtime_is_an_error() {
    let (la, _lb) = pipe(PipeConfig::default());
    assert!(Net::spawn(Stack::new(config(A, 1)), la).is_err());
}

/// Never a polling loop: with a connection open, a reader waiting and nothing sent, the
/// drivers poll only for the stack's own deadlines. A busy loop would poll thousands of times
/// in the idle window, a 1 ms timer (the blocking runtime's idle wait on this link) once per
/// millisecond; the bound allows one poll per 10 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_drivers_sleep() {
    const IDLE: Duration = Duration::from_millis(300);
    within(async {
        let (a, b) = nets();
        let l = TcpListener::bind(&b, SocketAddrV4::new(B, 7))
            .await
            .unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(&a, SocketAddrV4::new(B, 7)), l.accept());
        let (mut c, _s) = (c.unwrap(), s.unwrap());
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 1];
            let _ = c.read(&mut buf).await;
        });
        // Let the handshake's last ACKs and any delayed ACK settle first.
        tokio::time::sleep(IDLE).await;
        let polls = |n: &Net| n.with_stack(|s| s.counters().polls);
        let before = polls(&a) + polls(&b);
        tokio::time::sleep(IDLE).await;
        let during = polls(&a) + polls(&b) - before;
        eprintln!("idle polls in {IDLE:?}: {during}");
        assert!(
            (during as u128) < IDLE.as_millis() / 10,
            "{during} polls in {IDLE:?} of idle time"
        );
        reader.abort();
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_stack_listener_and_ipv6_without_an_address() {
    use std::net::{IpAddr, Ipv6Addr, SocketAddr};
    within(async {
        let (a, b) = nets();
        let any6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 7);
        let l = TcpListener::bind(&b, any6).await.unwrap();
        assert_eq!(l.local_addr().unwrap(), any6);
        let server = tokio::spawn(async move {
            let (mut s, peer) = l.accept().await.unwrap();
            let mut buf = [0u8; 2];
            s.read_exact(&mut buf).await.unwrap();
            peer
        });
        let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, 7))
            .await
            .unwrap();
        c.write_all(b"hi").await.unwrap();
        let peer = server.await.unwrap();
        let me = c.local_addr().unwrap();
        assert_eq!(
            peer,
            SocketAddr::new(IpAddr::V6(A.to_ipv6_mapped()), me.port())
        );
        // An IPv6 peer without an IPv6 address fails at once.
        let far: SocketAddr = "[2001:db8::2]:7".parse().unwrap();
        let e = TcpStream::connect(&a, far).await.err().unwrap();
        assert_eq!(e.kind(), ErrorKind::NetworkUnreachable);
        // UDP on [::] hears IPv4, mapped.
        let u = UdpSocket::bind(&b, SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 53))
            .await
            .unwrap();
        let cu = UdpSocket::bind(&a, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
            .await
            .unwrap();
        cu.send_to(b"q", SocketAddrV4::new(B, 53)).await.unwrap();
        let mut buf = [0u8; 4];
        let (n, from) = u.recv_from(&mut buf).await.unwrap();
        assert_eq!((n, from.ip()), (1, IpAddr::V6(A.to_ipv6_mapped())));
    })
    .await;
}

/// Closing loses nothing: bytes written just before the stream and then the `Net` are
/// dropped still reach the peer with a FIN (the dropped driver drains in the background),
/// and `shutdown_timeout` waits for the same and says nothing had to be reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_net_delivers_what_closed_streams_wrote() {
    within(async {
        for round in 0..2u32 {
            let (a, b) = nets();
            let l = TcpListener::bind(&b, SocketAddrV4::new(B, 7))
                .await
                .unwrap();
            let server = tokio::spawn(async move {
                let (mut s, _) = l.accept().await.unwrap();
                let mut all = Vec::new();
                s.read_to_end(&mut all).await.map(|_| all)
            });
            let data = Rng::new(u64::from(round) + 40).bytes(200_000);
            let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, 7))
                .await
                .unwrap();
            c.write_all(&data).await.unwrap();
            drop(c);
            if round == 0 {
                drop(a);
            } else {
                assert_eq!(a.shutdown_timeout(Duration::from_secs(10)).await, 0);
            }
            let got = server.await.unwrap().unwrap();
            assert_eq!(got.len(), data.len(), "round {round}");
            assert!(got == data, "round {round}: corrupted");
            drop(b);
        }
    })
    .await
}

/// A closed connection that cannot finish (the peer's window stays shut) is reset when the
/// drain's time is up, and so is a stream still open: no peer is left waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_timeout_resets_what_cannot_finish() {
    within(async {
        let (a, b) = nets();
        let l = TcpListener::bind(&b, SocketAddrV4::new(B, 7))
            .await
            .unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(&a, SocketAddrV4::new(B, 7)), l.accept());
        let (mut c, mut s) = (c.unwrap(), s.unwrap().0);
        let (c2, s2) = tokio::join!(TcpStream::connect(&a, SocketAddrV4::new(B, 7)), l.accept());
        let (_c2, mut s2) = (c2.unwrap(), s2.unwrap().0);
        // 1 MiB into a 256 KiB receive buffer nobody reads: it cannot all be delivered.
        let data = vec![9u8; 1 << 20];
        let writer = tokio::spawn(async move {
            let _ = c.write_all(&data).await;
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.abort();
        let _ = writer.await;
        assert_eq!(a.shutdown_timeout(Duration::from_millis(300)).await, 2);
        let mut all = Vec::new();
        let e = s.read_to_end(&mut all).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
        assert!(all.len() < 1 << 20);
        let mut one = [0u8; 1];
        let e = s2.read(&mut one).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    })
    .await
}
