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
        assert_eq!(*peer.ip(), A);
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
    c2.set_read_timeout(Some(std::time::Duration::from_millis(50)));
    let mut b = [0u8; 1];
    assert_eq!(c2.read(&mut b).unwrap_err().kind(), ErrorKind::TimedOut);
}
