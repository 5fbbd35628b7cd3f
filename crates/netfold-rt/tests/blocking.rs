//! The blocking runtime: two driver threads, each owning a stack, joined by the in-memory pipe.

use netfold::iface::Stack;
use netfold::phy::pipe::{Pipe, PipeConfig};
use netfold::tcp;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Rng};
use std::io::ErrorKind;
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn pattern(len: usize, salt: u32) -> Vec<u8> {
    Rng::new(u64::from(salt)).bytes(len)
}

#[test]
fn blocking_runtime_streams_with_read_and_write() {
    use netfold_rt::Runtime;
    use std::io::{Read, Write};
    let (ea, eb) = Pipe::new(PipeConfig::default());
    let ra = Runtime::start(
        Stack::new(config(A, 1)),
        Box::new(ea),
        std::time::Duration::from_millis(1),
    )
    .unwrap();
    let rb = Runtime::start(
        Stack::new(config(B, 2)),
        Box::new(eb),
        std::time::Duration::from_millis(1),
    )
    .unwrap();
    let l = rb
        .listen(SocketAddrV4::new(B, 80), 4, tcp::Config::default())
        .unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, peer) = l.accept().unwrap();
        assert_eq!(peer.ip(), A);
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        s.write_all(&(all.len() as u64).to_be_bytes()).unwrap();
        all
    });
    let data = pattern(3 << 20, 3);
    let mut c = ra
        .connect(
            SocketAddrV4::new(B, 80),
            tcp::Config::default(),
            Some(std::time::Duration::from_secs(10)),
        )
        .unwrap();
    c.write_all(&data).unwrap();
    c.shutdown_write().unwrap();
    let mut len = [0u8; 8];
    c.read_exact(&mut len).unwrap();
    assert_eq!(u64::from_be_bytes(len), data.len() as u64);
    // TCP_INFO: the server has acknowledged every byte and our SYN (an active opener's SYN
    // counts one, as in Linux's tcpi_bytes_acked), and perhaps already our FIN.
    let info = c.tcp_info().unwrap();
    let (acked, n) = (info.bytes_acked, data.len() as u64);
    assert!(acked == n + 1 || acked == n + 2, "{acked}");
    // 8 bytes, and the server's FIN (one, as Linux counts it) if it is in already.
    assert!(
        matches!(info.bytes_received, 8 | 9),
        "{}",
        info.bytes_received
    );
    assert!(info.data_segs_out >= (data.len() / 1448) as u32);
    assert_ne!(info.options & netfold::tcp::info::options::SACK, 0);
    assert_eq!(server.join().unwrap(), data);
    // A refused connection surfaces as ConnectionRefused.
    let e = ra
        .connect(
            SocketAddrV4::new(B, 81),
            tcp::Config::default(),
            Some(std::time::Duration::from_secs(10)),
        )
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    // A read timeout surfaces as TimedOut.
    let l2 = rb
        .listen(SocketAddrV4::new(B, 82), 4, tcp::Config::default())
        .unwrap();
    let mut c2 = ra
        .connect(SocketAddrV4::new(B, 82), tcp::Config::default(), None)
        .unwrap();
    let _s2 = l2.accept().unwrap();
    c2.set_read_timeout(Some(std::time::Duration::from_millis(50)))
        .unwrap();
    let mut b = [0u8; 1];
    assert_eq!(c2.read(&mut b).unwrap_err().kind(), ErrorKind::TimedOut);
}

fn runtimes() -> (netfold_rt::Runtime, netfold_rt::Runtime) {
    use netfold_rt::Runtime;
    let (ea, eb) = Pipe::new(PipeConfig::default());
    let idle = std::time::Duration::from_millis(1);
    (
        Runtime::start(Stack::new(config(A, 1)), Box::new(ea), idle).unwrap(),
        Runtime::start(Stack::new(config(B, 2)), Box::new(eb), idle).unwrap(),
    )
}

/// A reader thread and a writer thread share one connection through `try_clone`, 4 MiB each
/// way at once; dropping one clone leaves the connection open for the other.
#[test]
fn try_clone_gives_a_reader_and_a_writer_thread_one_stream() {
    use std::io::{Read, Write};
    const LEN: usize = 4 << 20;
    let (ra, rb) = runtimes();
    let l = rb
        .listen(SocketAddrV4::new(B, 80), 4, tcp::Config::default())
        .unwrap();
    let up = pattern(LEN, 11);
    let down = pattern(LEN, 12);
    let (up2, down2) = (up.clone(), down.clone());
    let server = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            (&w).write_all(&down2).unwrap();
            w.shutdown_write().unwrap();
        });
        let mut got = Vec::new();
        (&s).read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        assert!(got == up2, "server received corrupted data");
    });
    let c = ra
        .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
        .unwrap();
    let mut w = c.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        w.write_all(&up).unwrap();
        w.shutdown_write().unwrap();
        // This clone goes; the reader's keeps the connection open.
    });
    let mut got = Vec::new();
    let mut r = c;
    r.read_to_end(&mut got).unwrap();
    writer.join().unwrap();
    assert!(got == down, "client received corrupted data");
    server.join().unwrap();
}

/// Timeouts set through `&self`, from another thread than the one reading, and shared by
/// clones.
#[test]
fn timeouts_are_set_through_a_shared_reference() {
    use std::io::Read;
    use std::sync::Arc;
    use std::time::Duration;
    let (ra, rb) = runtimes();
    let l = rb
        .listen(SocketAddrV4::new(B, 80), 4, tcp::Config::default())
        .unwrap();
    let c = Arc::new(
        ra.connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
            .unwrap(),
    );
    let _s = l.accept().unwrap();
    assert_eq!(c.read_timeout(), None);
    let c2 = Arc::clone(&c);
    std::thread::spawn(move || c2.set_read_timeout(Some(Duration::from_millis(50))))
        .join()
        .unwrap()
        .unwrap();
    let clone = c.try_clone().unwrap();
    assert_eq!(clone.read_timeout(), Some(Duration::from_millis(50)));
    // As with std's sockets, a zero timeout is refused and leaves the timeout as it was.
    for e in [
        c.set_read_timeout(Some(Duration::ZERO)).unwrap_err(),
        c.set_write_timeout(Some(Duration::ZERO)).unwrap_err(),
    ] {
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }
    assert_eq!(c.read_timeout(), Some(Duration::from_millis(50)));
    assert_eq!(c.write_timeout(), None);
    let t0 = std::time::Instant::now();
    let mut b = [0u8; 1];
    assert_eq!((&*c).read(&mut b).unwrap_err().kind(), ErrorKind::TimedOut);
    assert!(t0.elapsed() >= Duration::from_millis(50));
    c.set_write_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    assert_eq!(clone.write_timeout(), Some(Duration::from_millis(20)));
}

#[test]
fn udp_round_trip_and_receive_timeout() {
    use std::time::Duration;
    let (ra, rb) = runtimes();
    let server = rb
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 53))
        .unwrap();
    let client = ra.udp_bind(SocketAddrV4::new(A, 0)).unwrap();
    let client_addr = client.local_addr().unwrap();
    assert_ne!(client_addr.port(), 0);
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        for _ in 0..3 {
            let (n, from) = server.recv_from(&mut buf).unwrap();
            assert_eq!(from, client_addr);
            server.send_to(&buf[..n], from).unwrap();
        }
        // Nothing more comes: the timeout ends the wait.
        server
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        server.recv_from(&mut buf).unwrap_err().kind()
    });
    for i in 0..3u32 {
        let msg = pattern(100 + i as usize * 400, 20 + i);
        assert_eq!(
            client.send_to(&msg, SocketAddrV4::new(B, 53)).unwrap(),
            msg.len()
        );
        let mut buf = [0u8; 1500];
        let (n, from) = client.recv_from(&mut buf).unwrap();
        assert_eq!(from, SocketAddrV4::new(B, 53).into());
        assert_eq!(&buf[..n], &msg[..]);
    }
    assert_eq!(echo.join().unwrap(), ErrorKind::TimedOut);
}

/// Per-socket waiters: a reader parked on an idle connection is not disturbed by a busy one
/// on the same runtimes (it times out on time), and is woken by its own data, by its peer's
/// close, and by the runtime stopping.
#[test]
fn parked_readers_wake_for_their_own_socket_only() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    const LEN: usize = 8 << 20;
    let (ra, rb) = runtimes();
    let l = rb
        .listen(SocketAddrV4::new(B, 80), 4, tcp::Config::default())
        .unwrap();
    let busy = ra
        .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
        .unwrap();
    let (busy_srv, _) = l.accept().unwrap();
    let quiet = ra
        .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
        .unwrap();
    let (quiet_srv, _) = l.accept().unwrap();
    let data = pattern(LEN, 21);
    let want = data.clone();
    let sink = std::thread::spawn(move || {
        let mut got = Vec::new();
        (&busy_srv).read_to_end(&mut got).unwrap();
        assert!(got == want, "busy connection corrupted");
    });
    let source = std::thread::spawn(move || {
        (&busy).write_all(&data).unwrap();
        busy.shutdown_write().unwrap();
        busy
    });
    // The quiet reader times out on time while the busy connection moves 8 MiB.
    quiet_srv
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut b = [0u8; 16];
    let t0 = Instant::now();
    assert_eq!(
        (&quiet_srv).read(&mut b).unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    let busy = source.join().unwrap();
    sink.join().unwrap();
    drop(busy);

    // Its own data wakes it, long before the timeout.
    quiet_srv
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let quiet2 = quiet.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        (&quiet2).write_all(b"ping").unwrap();
        quiet2
    });
    let t0 = Instant::now();
    assert_eq!((&quiet_srv).read(&mut b).unwrap(), 4);
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(&b[..4], b"ping");
    // The peer's close (FIN) wakes it with end of stream.
    let quiet2 = writer.join().unwrap();
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        drop(quiet2);
        drop(quiet);
    });
    assert_eq!((&quiet_srv).read(&mut b).unwrap(), 0);
    closer.join().unwrap();

    // Stopping the runtime wakes a reader parked without a timeout.
    let c = ra
        .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
        .unwrap();
    let (_s, _) = l.accept().unwrap();
    let reader = std::thread::spawn(move || {
        let mut b = [0u8; 1];
        (&c).read(&mut b).map(|_| ()).unwrap_err().kind()
    });
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    drop(ra);
    assert_eq!(reader.join().unwrap(), ErrorKind::NotConnected);
    assert!(t0.elapsed() < Duration::from_secs(10));
}

/// `read_posted`: the driver thread copies the frames' bytes straight into the reader's
/// buffer (single-pass receive); 8 MiB byte-exact, then end of stream; most bytes took the
/// one-pass path, and a timeout gives the buffer back.
#[test]
fn posted_reads_take_bytes_straight_from_the_frames() {
    use std::io::Write;
    const LEN: usize = 8 << 20;
    let (ra, rb) = runtimes();
    let l = rb
        .listen(SocketAddrV4::new(B, 80), 4, tcp::Config::default())
        .unwrap();
    let data = pattern(LEN, 21);
    let want = data.clone();
    // The client writes only once the server is about to wait in its first posted read, so
    // at least the first bytes find a read posted and the ring empty (later ones may arrive
    // while the reader is busy and go through the ring).
    let (posting, ready) = std::sync::mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        let mut c = ra
            .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
            .unwrap();
        ready.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.write_all(&data).unwrap();
        c.shutdown_write().unwrap();
        c.flush_acked(None).unwrap();
        ra
    });
    let (s, _) = l.accept().unwrap();
    let mut got = Vec::with_capacity(LEN);
    let mut buf = vec![0u8; 256 << 10];
    posting.send(()).unwrap();
    loop {
        let (b, r) = s.read_posted(buf);
        buf = b;
        match r.unwrap() {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    assert!(
        got == want,
        "received {} bytes, not the ones sent",
        got.len()
    );
    // The stack is new and this is its only connection, so its counters are this transfer's
    // (a snapshot at accept would miss bytes that arrived before it).
    let p = rb.with_stack(|st| st.counters().payload_passes());
    assert_eq!(p.received, LEN as u64);
    // Every byte came from a frame once (more only if retransmitted): straight into the
    // reader's buffer while a read was posted and nothing older waited, else into the ring
    // and from there into the next posted buffer. How many take the one-pass path depends on
    // how much arrives while the reader is away (here it copies each buffer out and posts
    // again: the driver keeps receiving meanwhile, into the ring).
    assert!(p.rx_copy_direct + p.rx_copy_ring >= LEN as u64, "{p:?}");
    assert_eq!(p.received, p.rx_copy_direct + p.rx_copy_app, "{p:?}");
    assert!(p.rx_copy_direct > 0, "{p:?}");
    let _ra = client.join().unwrap();

    // Nothing arrives: the read times out and the buffer comes back untouched in size.
    let l2 = rb
        .listen(SocketAddrV4::new(B, 81), 4, tcp::Config::default())
        .unwrap();
    let c2 = _ra
        .connect(SocketAddrV4::new(B, 81), tcp::Config::default(), None)
        .unwrap();
    let (s2, _) = l2.accept().unwrap();
    s2.set_read_timeout(Some(std::time::Duration::from_millis(50)))
        .unwrap();
    let (b, r) = s2.read_posted(vec![0u8; 4096]);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(b.len(), 4096);
    // The stream is usable afterwards: the read was taken back.
    use std::io::Read;
    (&c2).write_all(b"late").unwrap();
    let mut four = [0u8; 4];
    (&s2).read_exact(&mut four).unwrap();
    assert_eq!(&four, b"late");
}

#[test]
fn blocking_runtime_dual_stack_listener_and_ipv6_without_an_address() {
    use netfold_rt::Runtime;
    use std::io::{Read, Write};
    use std::net::{IpAddr, Ipv6Addr, SocketAddr};
    let (ea, eb) = Pipe::new(PipeConfig::default());
    let tick = std::time::Duration::from_millis(1);
    let ra = Runtime::start(Stack::new(config(A, 1)), Box::new(ea), tick).unwrap();
    let rb = Runtime::start(Stack::new(config(B, 2)), Box::new(eb), tick).unwrap();
    // `[::]:80` takes the IPv4 client; the server sees it v4-mapped, as std on Linux does.
    let any6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 80);
    let l = rb.listen(any6, 4, tcp::Config::default()).unwrap();
    assert_eq!(l.local_addr().unwrap(), any6);
    let server = std::thread::spawn(move || {
        let (mut s, peer) = l.accept().unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        (peer, s.local_addr().unwrap(), b)
    });
    let timeout = Some(std::time::Duration::from_secs(10));
    let mut c = ra
        .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), timeout)
        .unwrap();
    c.write_all(b"hello").unwrap();
    let (peer, local, got) = server.join().unwrap();
    let me = c.local_addr().unwrap();
    assert_eq!(
        peer,
        SocketAddr::new(IpAddr::V6(A.to_ipv6_mapped()), me.port())
    );
    assert_eq!(local, SocketAddr::new(IpAddr::V6(B.to_ipv6_mapped()), 80));
    assert_eq!(&got, b"hello");
    // An IPv6 peer: the stack has no IPv6 address, so the blocking connect fails at once
    // (not after the SYN retries).
    let start = std::time::Instant::now();
    let far: SocketAddr = "[2001:db8::2]:80".parse().unwrap();
    let e = ra
        .connect(far, tcp::Config::default(), timeout)
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::NetworkUnreachable);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    // UDP on [::] hears an IPv4 datagram with the mapped sender.
    let u = rb
        .udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 53))
        .unwrap();
    let cu = ra
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    u.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    cu.send_to(b"q", SocketAddrV4::new(B, 53)).unwrap();
    let mut buf = [0u8; 4];
    let (n, from) = u.recv_from(&mut buf).unwrap();
    assert_eq!(n, 1);
    assert_eq!(from.ip(), IpAddr::V6(A.to_ipv6_mapped()));
}

/// Frame reads through the blocking API: held frames close the window (the sender stops
/// short of the whole transfer), dropping them on the application's thread wakes the receiving
/// driver to reopen it, and every byte arrives in order.
#[test]
fn frame_reads_hold_the_window_and_release_it_on_drop() {
    use netfold_rt::Runtime;
    use std::io::Write;
    let (ea, eb) = Pipe::new(PipeConfig::default());
    let idle = std::time::Duration::from_millis(1);
    let ra = Runtime::start(Stack::new(config(A, 1)), Box::new(ea), idle).unwrap();
    let rb = Runtime::start(Stack::new(config(B, 2)), Box::new(eb), idle).unwrap();
    // A fixed 256 KiB receive buffer (no auto-tuning), so what the application holds can
    // fill it long before the 4 MiB are through.
    let small = tcp::Config {
        recv_buffer: 256 << 10,
        recv_buffer_max: 256 << 10,
        ..tcp::Config::default()
    };
    let l = rb.listen(SocketAddrV4::new(B, 80), 4, small).unwrap();
    let data = pattern(4 << 20, 9);
    let sent = data.clone();
    let client = std::thread::spawn(move || {
        let mut c = ra
            .connect(
                SocketAddrV4::new(B, 80),
                tcp::Config::default(),
                Some(std::time::Duration::from_secs(10)),
            )
            .unwrap();
        c.write_all(&sent).unwrap();
        c.shutdown_write().unwrap();
        c.flush_acked(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        ra
    });
    let (s, _) = l.accept().unwrap();
    s.set_borrow_frames(true).unwrap();
    // Phase 1: hold every frame until nothing more comes for 300 ms.
    s.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let mut held = Vec::new();
    let mut got = Vec::new();
    loop {
        let before = held.len();
        match s.read_frames(&mut held, 64) {
            Ok(0) => panic!("end of stream while holding frames"),
            Ok(_) => {
                for f in &held[before..] {
                    got.extend_from_slice(f);
                }
            }
            Err(e) if e.kind() == ErrorKind::TimedOut => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(!held.is_empty());
    assert!(
        got.len() < data.len(),
        "held frames must close the window: {} of {} bytes arrived",
        got.len(),
        data.len()
    );
    // Phase 2: let them go; the rest arrives.
    drop(held);
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut frames = Vec::new();
    loop {
        frames.clear();
        match s.read_frames(&mut frames, 64).unwrap() {
            0 => break,
            _ => {
                for f in &frames {
                    got.extend_from_slice(f);
                }
            }
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    drop(frames);
    let _ra = client.join().unwrap();
    // Every buffer came back to the receiver's pool: none is still lent out.
    rb.with_stack(|st| assert_eq!(st.tcp().frames_outstanding().0, 0));
}

/// What a program wrote just before dropping its stream and then its runtime still reaches
/// the peer, every byte and a FIN: dropping the runtime lets closed connections finish, as
/// the kernel keeps an exited process's sockets sending.
#[test]
fn dropping_the_runtime_delivers_what_closed_streams_wrote() {
    use std::io::{Read, Write};
    for round in 0..3 {
        let (ra, rb) = runtimes();
        let l = rb
            .listen(SocketAddrV4::new(B, 80), 4, tcp::Config::default())
            .unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut all = Vec::new();
            // read_to_end ends only at the FIN; a reset or a lost tail fails below.
            let r = s.read_to_end(&mut all).map(|_| ());
            (r, all)
        });
        let data = pattern(200_000, 20 + round);
        let mut c = ra
            .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
            .unwrap();
        c.write_all(&data).unwrap();
        drop(c);
        drop(ra);
        let (r, got) = server.join().unwrap();
        r.unwrap();
        assert_eq!(got.len(), data.len(), "round {round}");
        assert!(got == data, "round {round}: corrupted");
    }
}

/// A closed connection that cannot finish (the peer reads nothing, its window stays shut)
/// is reset when the drain's time is up, and the peer sees the reset after the bytes it
/// took; an open stream is reset too.
#[test]
fn drain_resets_connections_that_cannot_finish_in_time() {
    use std::io::{Read, Write};
    let (ra, rb) = runtimes();
    let small = tcp::Config {
        recv_buffer: 4096,
        ..tcp::Config::default()
    };
    let l = rb.listen(SocketAddrV4::new(B, 80), 4, small).unwrap();
    let mut c = ra
        .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
        .unwrap();
    let (mut s, _) = l.accept().unwrap();
    c.write_all(&pattern(50_000, 7)).unwrap();
    drop(c);
    let open = ra
        .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
        .unwrap();
    let (mut s2, _) = l.accept().unwrap();
    assert_eq!(ra.drain(std::time::Duration::from_millis(300)), 2);
    let mut got = Vec::new();
    let e = s.read_to_end(&mut got).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    assert!(
        got.len() <= 4096 + 1448,
        "only what the window let in: {}",
        got.len()
    );
    let mut b = [0u8; 8];
    assert_eq!(
        s2.read(&mut b).unwrap_err().kind(),
        ErrorKind::ConnectionReset
    );
    drop(open);
}
