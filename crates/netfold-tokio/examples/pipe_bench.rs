//! One bulk TCP transfer over the in-memory link, through the tokio adapter and then through
//! the blocking API (`netfold-rt`), with the same stacks, link, TCP configuration and message
//! size: the cost of the adapter's wake-ups against the blocking driver's.
//!
//! ```text
//! cargo run --release -p netfold-tokio --example pipe_bench -- [BYTES [MESSAGE]]
//! ```
//! BYTES defaults to 1 GiB, MESSAGE (bytes per write and per read) to 64 KiB. The tokio side
//! runs two drivers and both applications on a 2-worker multi-thread runtime; the blocking
//! side runs two driver threads and two application threads. One run each; the receiver
//! checks the byte count.

use netfold::iface::Stack;
use netfold::phy::pipe::{Pipe, PipeConfig};
use netfold::tcp;
use netfold::wire::Ipv4Addr;
use netfold_testkit::config;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 5001;

fn report(label: &str, bytes: u64, dt: Duration) {
    println!(
        "{label:>8}: {} MiB in {:.3} s = {:.2} Gbit/s",
        bytes >> 20,
        dt.as_secs_f64(),
        bytes as f64 * 8.0 / dt.as_secs_f64() / 1e9
    );
}

fn tokio_run(total: u64, msg: usize) -> Duration {
    use netfold_tokio::{pipe, Net, TcpListener, TcpStream};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let (la, lb) = pipe(PipeConfig::default());
        let a = Net::spawn(Stack::new(config(A, 1)), la).expect("driver a");
        let b = Net::spawn(Stack::new(config(B, 2)), lb).expect("driver b");
        let l = TcpListener::bind_with(&b, SocketAddrV4::new(B, PORT), 1, tcp::Config::default())
            .await
            .expect("listen");
        let sink = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.expect("accept");
            let mut buf = vec![0u8; msg];
            let mut got = 0u64;
            loop {
                let n = s.read(&mut buf).await.expect("read");
                if n == 0 {
                    break got;
                }
                got += n as u64;
            }
        });
        let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, PORT))
            .await
            .expect("connect");
        let data = vec![0x5au8; msg];
        let t0 = Instant::now();
        let mut sent = 0u64;
        while sent < total {
            let k = (total - sent).min(msg as u64) as usize;
            c.write_all(&data[..k]).await.expect("write");
            sent += k as u64;
        }
        c.shutdown().await.expect("shutdown");
        let got = sink.await.expect("sink");
        let dt = t0.elapsed();
        assert_eq!(got, total, "tokio: bytes received");
        dt
    })
}

fn blocking_run(total: u64, msg: usize) -> Duration {
    use netfold_rt::Runtime;
    use std::io::{Read, Write};
    let (ea, eb) = Pipe::new(PipeConfig::default());
    // The blocking runtime's documented default for an in-memory link (no descriptor to wait
    // on): the driver looks for frames at least this often.
    let idle = Duration::from_millis(1);
    let ra = Runtime::start(Stack::new(config(A, 1)), Box::new(ea), idle).expect("runtime a");
    let rb = Runtime::start(Stack::new(config(B, 2)), Box::new(eb), idle).expect("runtime b");
    let l = rb
        .listen(SocketAddrV4::new(B, PORT), 1, tcp::Config::default())
        .expect("listen");
    let sink = std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let mut buf = vec![0u8; msg];
        let mut got = 0u64;
        loop {
            let n = s.read(&mut buf).expect("read");
            if n == 0 {
                break got;
            }
            got += n as u64;
        }
    });
    let mut c = ra
        .connect(SocketAddrV4::new(B, PORT), tcp::Config::default(), None)
        .expect("connect");
    let data = vec![0x5au8; msg];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while sent < total {
        let k = (total - sent).min(msg as u64) as usize;
        c.write_all(&data[..k]).expect("write");
        sent += k as u64;
    }
    c.shutdown_write().expect("shutdown");
    let got = sink.join().expect("sink");
    let dt = t0.elapsed();
    assert_eq!(got, total, "blocking: bytes received");
    dt
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let total = args.next().transpose().expect("BYTES").unwrap_or(1 << 30);
    let msg = args
        .next()
        .transpose()
        .expect("MESSAGE")
        .unwrap_or(64 << 10) as usize;
    println!("in-memory pipe, {} MiB, {msg}-byte messages", total >> 20);
    report("tokio", total, tokio_run(total, msg));
    report("blocking", total, blocking_run(total, msg));
}
