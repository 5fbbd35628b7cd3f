//! Frame-level borrowing read: in-order payload left in the packet buffers it
//! arrived in and handed to the application as owned `BorrowedPayload`s, no copy. Two stacks
//! on the in-memory pipe, in virtual time.

use netfold::buf::BorrowedPayload;
use netfold::iface::counters::PayloadPasses;
use netfold::iface::Stack;
use netfold::phy::pipe::{Impairments, Pipe, PipeConfig, PipeEnd};
use netfold::phy::ChecksumCaps;
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp;
use netfold::time::Duration;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net};
use std::io::ErrorKind;
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MIB: usize = 1 << 20;

fn pattern(i: usize) -> u8 {
    (i % 251) as u8 ^ (i >> 12) as u8
}

fn tcfg() -> tcp::Config {
    tcp::Config {
        time_wait: Duration::from_secs(1),
        ..tcp::Config::default()
    }
}

fn setup(link: PipeConfig) -> (Net<PipeEnd>, TcpStream, TcpStream, usize) {
    let (ea, eb) = Pipe::new(link);
    let mut n = Net::new(Stack::new(config(A, 1)), Stack::new(config(B, 2)), ea, eb);
    let l = TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 80), 4, tcfg()).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 80), tcfg()).unwrap();
    n.settle();
    let mut tries = 0;
    let s = loop {
        match l.accept(&mut n.b) {
            Ok((s, _)) => break s,
            Err(_) if tries < 200 => n.run_for(Duration::from_millis(100)),
            Err(e) => panic!("{e}"),
        }
        tries += 1;
    };
    assert!(c.is_connected(&mut n.a).unwrap());
    s.set_borrow_frames(&mut n.b, true).unwrap();
    let idle0 = n.b.pool_idle();
    (n, c, s, idle0)
}

/// Writes what fits of `total` pattern bytes (from `*sent`).
fn pump(n: &mut Net<PipeEnd>, c: &TcpStream, src: &[u8], sent: &mut usize) {
    while *sent < src.len() {
        match c.write(&mut n.a, &src[*sent..]) {
            Ok(k) => *sent += k,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Sends `total` bytes A -> B, reading with frame reads and dropping each handle after
/// checking it; returns the bytes read.
fn transfer(n: &mut Net<PipeEnd>, c: &TcpStream, s: &TcpStream, total: usize) -> usize {
    let src: Vec<u8> = (0..total).map(pattern).collect();
    let (mut sent, mut got, mut idle) = (0, 0, 0);
    let mut out: Vec<BorrowedPayload> = Vec::new();
    while got < total {
        pump(n, c, &src, &mut sent);
        if !n.step() {
            idle += 1;
            assert!(idle < 200_000, "stuck at {got} of {total}");
        }
        loop {
            match s.read_frames(&mut n.b, &mut out, 16) {
                Ok(0) => panic!("early EOF"),
                Ok(_) => {
                    for p in out.drain(..) {
                        assert_eq!(&p[..], &src[got..got + p.len()], "at {got}");
                        got += p.len();
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    got
}

fn passes(n: &Net<PipeEnd>, before: &PayloadPasses) -> PayloadPasses {
    n.b.counters().payload_passes().since(before)
}

/// Closes both ends and runs until the stack is quiet; every frame is back in the pool.
fn close_and_check_no_leak(mut n: Net<PipeEnd>, c: TcpStream, s: TcpStream, idle0: usize) {
    c.close(&mut n.a).unwrap();
    n.run_for(Duration::from_millis(100));
    // Drain the FIN (end of stream) so that closing is not an abort.
    let mut out = Vec::new();
    while let Ok(k @ 1..) = s.read_frames(&mut n.b, &mut out, 64) {
        let _ = k;
        out.clear();
    }
    s.close(&mut n.b).unwrap();
    n.run_for(Duration::from_secs(3));
    assert_eq!(n.b.tcp().frames_outstanding().0, 0, "frames still out");
    // Frames move between the two stacks' pools through the pipe, so B's pool may end with
    // more than it had; with fewer, buffers would be missing.
    assert!(
        n.b.pool_idle() >= idle0,
        "pool: {} idle, {idle0} at the start",
        n.b.pool_idle()
    );
}

#[test]
fn one_mib_of_borrowed_frames_is_one_verify_pass_and_no_copy() {
    let (mut n, c, s, idle0) = setup(PipeConfig::default());
    let before = n.b.counters().payload_passes();
    assert_eq!(transfer(&mut n, &c, &s, MIB), MIB);
    let b = passes(&n, &before);
    let m = MIB as u64;
    assert_eq!(n.a.counters().tcp.retransmits_rto, 0);
    assert_eq!(b.received, m);
    // No copy of any kind at the receiver; each byte verified once, in a pass of its own.
    assert_eq!(
        (b.rx_copy_ring, b.rx_copy_direct, b.rx_copy_app),
        (0, 0, 0),
        "{b:?}"
    );
    assert_eq!((b.rx_frames_held, b.rx_csum_separate), (m, m), "{b:?}");
    assert_eq!(b.rx_per_byte(), Some(1.0));
    close_and_check_no_leak(n, c, s, idle0);
}

#[test]
fn with_receive_checksum_offload_borrowed_frames_cost_no_pass() {
    let link = PipeConfig {
        checksum: ChecksumCaps {
            tx: true,
            rx: false,
        },
        ..PipeConfig::default()
    };
    let (mut n, c, s, idle0) = setup(link);
    let before = n.b.counters().payload_passes();
    assert_eq!(transfer(&mut n, &c, &s, MIB), MIB);
    let b = passes(&n, &before);
    assert_eq!((b.received, b.rx_frames_held), (MIB as u64, MIB as u64));
    assert_eq!(b.rx_per_byte(), Some(0.0), "{b:?}");
    close_and_check_no_leak(n, c, s, idle0);
}

#[test]
fn impaired_link_bytes_exact_corrupt_segments_dropped_no_leak() {
    for seed in 1..=4 {
        let link = PipeConfig {
            impairments: Impairments {
                loss: 0.02,
                duplicate: 0.02,
                reorder: 0.05,
                corrupt: 0.02,
                ..Impairments::none()
            },
            seed,
            ..PipeConfig::default()
        };
        let (mut n, c, s, idle0) = setup(link);
        let before = n.b.counters().payload_passes();
        assert_eq!(transfer(&mut n, &c, &s, MIB), MIB, "seed {seed}");
        let b = passes(&n, &before);
        let cb = n.b.counters();
        assert!(cb.tcp_bad_checksum > 0, "seed {seed}: no corruption seen");
        // Out-of-order data went through the ring, the rest stayed in frames; every byte
        // reached the application once.
        assert_eq!(b.received, MIB as u64);
        assert!(b.rx_frames_held > 0 && b.rx_copy_ring > 0, "{b:?}");
        assert!(b.rx_frames_held + b.rx_copy_ring >= MIB as u64, "{b:?}");
        close_and_check_no_leak(n, c, s, idle0);
    }
}

#[test]
fn held_frames_close_the_window_and_release_reopens_it() {
    let (mut n, c, s, idle0) = setup(PipeConfig::default());
    let total = 4 * MIB;
    let src: Vec<u8> = (0..total).map(pattern).collect();
    let mut sent = 0;
    let mut held: Vec<BorrowedPayload> = Vec::new();
    // The application takes frames and keeps them all.
    for _ in 0..20_000 {
        pump(&mut n, &c, &src, &mut sent);
        n.step();
        let _ = s.read_frames(&mut n.b, &mut held, 64);
    }
    let kept: usize = held.iter().map(|p| p.len()).sum();
    let (out, limit) = n.b.tcp().frames_outstanding();
    assert!(kept > 0 && kept < total, "kept {kept}");
    assert!(out <= limit, "{out} frames out, limit {limit}");
    // The sender stalled: nothing more arrives while the application holds the window.
    n.run_for(Duration::from_secs(2));
    pump(&mut n, &c, &src, &mut sent);
    n.run_for(Duration::from_secs(2));
    let more = s.read_frames(&mut n.b, &mut held, 1 << 20).unwrap_or(0);
    let kept2: usize = held.iter().map(|p| p.len()).sum();
    assert_eq!(
        more, 0,
        "data arrived beyond the window: {kept} then {kept2}"
    );
    assert!(
        kept <= 1 << 20,
        "held {kept} bytes, more than the receive buffer"
    );
    // Bytes so far are exact.
    let mut at = 0;
    for p in &held {
        assert_eq!(&p[..], &src[at..at + p.len()]);
        at += p.len();
    }
    // Release: the window reopens and the transfer completes.
    held.clear();
    let mut got = at;
    let mut idle = 0;
    let mut out = Vec::new();
    while got < total {
        pump(&mut n, &c, &src, &mut sent);
        if !n.step() {
            idle += 1;
            assert!(idle < 200_000, "stuck at {got}");
        }
        while let Ok(k @ 1..) = s.read_frames(&mut n.b, &mut out, 64) {
            let _ = k;
            for p in out.drain(..) {
                assert_eq!(&p[..], &src[got..got + p.len()]);
                got += p.len();
            }
        }
    }
    close_and_check_no_leak(n, c, s, idle0);
}

#[test]
fn abort_with_frames_held_frees_them_and_handles_outlive_the_stack() {
    let (mut n, c, s, _idle0) = setup(PipeConfig::default());
    let src: Vec<u8> = (0..256 << 10).map(pattern).collect();
    let mut sent = 0;
    let mut app: Vec<BorrowedPayload> = Vec::new();
    for _ in 0..2000 {
        pump(&mut n, &c, &src, &mut sent);
        n.step();
    }
    // Some frames to the application, the rest left with the connection.
    let _ = s.read_frames(&mut n.b, &mut app, 4).unwrap();
    assert!(!app.is_empty());
    let (out, _) = n.b.tcp().frames_outstanding();
    assert!(out > app.len(), "the connection holds frames too: {out}");
    s.abort(&mut n.b).unwrap();
    assert_eq!(
        n.b.tcp().frames_outstanding().0,
        app.len(),
        "the connection's frames went back"
    );
    n.run_for(Duration::from_millis(10));
    let b_stack = std::mem::replace(&mut n.b, Stack::new(config(B, 2)));
    drop(b_stack);
    // The stack is gone; the handles still read and free their buffers when dropped.
    assert_eq!(&app[0][..], &src[..app[0].len()]);
    app.clear();
}
