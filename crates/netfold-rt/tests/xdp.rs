//! The blocking runtime on an AF_XDP link it opens by name (`Runtime::open("xdp:IFNAME")`):
//! netfold in one throw-away namespace on its end of a veth pair, the kernel's echo server in
//! another (the `netfold_testkit::vethns` fixture, 198.18.0.0/24). Needs root, ethtool and
//! python3, and a kernel with AF_XDP; without them `SKIPPED: ...`.

use netfold::iface::Stack;
use netfold::tcp;
use netfold_os::netns;
use netfold_rt::Runtime;
use netfold_testkit::tapns::{self, KERNEL_IP};
use netfold_testkit::vethns::{xdp_unavailable, KernelVeth};
use std::io::{Read, Write};
use std::net::SocketAddrV4;
use std::time::Duration;

#[test]
fn blocking_runtime_opens_an_xdp_link_and_echoes_through_the_kernel() {
    netfold_testkit::require_env!();
    let veth = match KernelVeth::create(1) {
        Ok(v) => v,
        Err(why) => {
            netns::skip(Some(why));
            return;
        }
    };
    let _echo = veth.echo_server(7);
    let spec = format!("xdp:{}", veth.host_if);
    let rt = veth
        .in_host(|| Runtime::open(Stack::new(tapns::stack()), &spec))
        .expect("enter the host's namespace");
    let rt = match rt {
        Err(e) if xdp_unavailable(&e) => {
            netns::skip(Some(format!("AF_XDP unavailable: {e}")));
            return;
        }
        r => r.expect("open the xdp link"),
    };
    let mut c = rt
        .connect(
            SocketAddrV4::new(KERNEL_IP, 7),
            tcp::Config::default(),
            Some(Duration::from_secs(10)),
        )
        .expect("connect to the kernel's echo server");
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // 256 chunks of 4 KiB, each echoed back before the next, checked byte for byte.
    let mut back = vec![0u8; 4096];
    for k in 0..256u32 {
        let chunk = netfold_testkit::tapns::payload(k as usize, 4096);
        c.write_all(&chunk).expect("write");
        c.read_exact(&mut back).expect("read the echo");
        assert!(back == chunk, "chunk {k} came back different");
    }
    c.shutdown_write().unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).expect("end of stream");
    assert!(rest.is_empty());
    let frames = rt.with_stack(|s| s.counters().frames_in);
    assert!(frames >= 256, "{frames} frames in");
}
