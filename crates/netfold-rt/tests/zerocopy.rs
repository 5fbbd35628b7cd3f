//! Zero-copy send on the blocking runtime (two driver threads over the in-memory pipe): lent
//! buffers and a mapped file arrive byte for byte, every buffer completes once, and the
//! completion bound fails a send at once instead of blocking forever.

use netfold::buf::ZcBuf;
use netfold::iface::Stack;
use netfold::phy::pipe::{Pipe, PipeConfig};
use netfold::tcp;
use netfold::wire::Ipv4Addr;
use netfold_rt::blocking::zerocopy::CompletionsFull;
use netfold_rt::Runtime;
use netfold_testkit::{config, Rng};
use std::io::{Read, Write};
use std::net::SocketAddrV4;
use std::time::Duration;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn runtimes() -> (Runtime, Runtime) {
    let (ea, eb) = Pipe::new(PipeConfig::default());
    let idle = Duration::from_millis(1);
    (
        Runtime::start(Stack::new(config(A, 1)), Box::new(ea), idle).unwrap(),
        Runtime::start(Stack::new(config(B, 2)), Box::new(eb), idle).unwrap(),
    )
}

/// A server on `rb` that reads everything and returns it.
fn sink(rb: &Runtime, port: u16) -> std::thread::JoinHandle<Vec<u8>> {
    let l = rb
        .listen(SocketAddrV4::new(B, port), 4, tcp::Config::default())
        .unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        all
    })
}

#[test]
fn lent_buffers_and_a_mapped_file_arrive_and_complete_once() {
    let (ra, rb) = runtimes();
    let server = sink(&rb, 80);
    let c = ra
        .connect(SocketAddrV4::new(B, 80), tcp::Config::default(), None)
        .unwrap();
    let done = c.zc_completions().unwrap();
    let mut want = Vec::new();
    let mut ids = Vec::new();
    // Buffers of several sizes, one larger than the send buffer.
    for (i, len) in [1usize, 1000, 65536, 3 << 20, 17].into_iter().enumerate() {
        let b = ZcBuf::from(Rng::new(i as u64).bytes(len));
        want.extend_from_slice(&b);
        ids.extend(c.send_zc_all(b).unwrap().into_iter().map(|s| s.id));
    }
    // A copied write in between keeps its place in the stream.
    (&c).write_all(b"--copied--").unwrap();
    want.extend_from_slice(b"--copied--");
    // A file, mapped: sendfile without a user-space copy.
    let path = std::env::temp_dir().join(format!("netfold-rt-zc-{}", std::process::id()));
    let file_bytes = Rng::new(99).bytes(300_000);
    std::fs::write(&path, &file_bytes).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    // SAFETY: the test owns the file and neither truncates nor writes it until the mapping's
    // completion (wait_zc_released below).
    let m = unsafe { netfold_os::mmap::map_file(&f, 1234, 250_000) }.unwrap();
    want.extend_from_slice(&file_bytes[1234..1234 + 250_000]);
    ids.extend(c.send_zc_all(m).unwrap().into_iter().map(|s| s.id));
    c.shutdown_write().unwrap();
    c.wait_zc_released(Some(Duration::from_secs(30))).unwrap();
    std::fs::remove_file(&path).unwrap();
    let got = server.join().unwrap();
    assert!(got == want, "byte-exact");
    let mut all = Vec::new();
    done.take(&mut all, usize::MAX);
    assert_eq!(all.iter().map(|c| c.id).collect::<Vec<_>>(), ids);
    assert!(all.iter().all(|c| c.acked));
    assert!(done.is_idle());
}

#[test]
fn a_full_completion_queue_fails_the_send_instead_of_blocking() {
    let (ra, rb) = runtimes();
    let server = sink(&rb, 81);
    let c = ra
        .connect(SocketAddrV4::new(B, 81), tcp::Config::default(), None)
        .unwrap();
    let done = c.zc_completions().unwrap();
    done.set_max_entries(3);
    let b = ZcBuf::from(vec![5u8; 1000]);
    for _ in 0..3 {
        c.send_zc(b.clone()).unwrap();
    }
    c.wait_zc_released(Some(Duration::from_secs(30))).unwrap();
    let e = c.send_zc(b.clone()).unwrap_err();
    assert!(e
        .get_ref()
        .is_some_and(|i| i.downcast_ref::<CompletionsFull>().is_some()));
    assert_eq!(done.next().map(|c| c.id), Some(0));
    c.send_zc(b.clone()).unwrap();
    drop(c);
    assert_eq!(server.join().unwrap().len(), 4000);
}
