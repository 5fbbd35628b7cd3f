//! The tokio adapter on an AF_XDP link it opens by name (`Link::open("xdp:IFNAME", ..)`):
//! netfold in one throw-away namespace on its end of a veth pair, the kernel's echo server in
//! another (the `netfold_testkit::vethns` fixture, 198.18.0.0/24), the driver waiting on the
//! socket's descriptor with tokio's `AsyncFd`. Needs root, ethtool and python3, and a kernel
//! with AF_XDP; without them `SKIPPED: ...`.

use netfold::iface::Stack;
use netfold_os::netns;
use netfold_testkit::tapns::{self, KERNEL_IP};
use netfold_testkit::vethns::{xdp_unavailable, KernelVeth};
use netfold_tokio::{Link, Net, TcpStream};
use std::net::SocketAddrV4;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_opens_an_xdp_link_and_echoes_through_the_kernel() {
    netfold_testkit::require_env!();
    let veth = match KernelVeth::create(1) {
        Ok(v) => v,
        Err(why) => {
            netns::skip(Some(why));
            return;
        }
    };
    let _echo = veth.echo_server(7);
    let cfg = tapns::stack();
    let spec = format!("xdp:{}", veth.host_if);
    let link = veth
        .in_host(|| Link::open(&spec, &cfg))
        .expect("enter the host's namespace");
    let link = match link {
        Err(e) if xdp_unavailable(&e) => {
            netns::skip(Some(format!("AF_XDP unavailable: {e}")));
            return;
        }
        r => r.expect("open the xdp link"),
    };
    let net = Net::spawn(Stack::new(cfg), link).expect("driver");
    tokio::time::timeout(Duration::from_secs(60), async {
        let mut s = TcpStream::connect(&net, SocketAddrV4::new(KERNEL_IP, 7))
            .await
            .expect("connect to the kernel's echo server");
        // 256 chunks of 4 KiB, each echoed back before the next, checked byte for byte.
        let mut back = vec![0u8; 4096];
        for k in 0..256usize {
            let chunk = tapns::payload(k, 4096);
            s.write_all(&chunk).await.expect("write");
            s.read_exact(&mut back).await.expect("read the echo");
            assert!(back == chunk, "chunk {k} came back different");
        }
        s.shutdown().await.unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).await.expect("end of stream");
        assert!(rest.is_empty());
    })
    .await
    .expect("echo timed out");
    drop(net);
}
