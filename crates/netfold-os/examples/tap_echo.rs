//! A blocking TCP echo server on a TAP or TUN interface: the kernel on one side of the
//! interface, netfold on the other.
//!
//! ```text
//! sudo cargo run -p netfold-os --example tap_echo -- tap:nf0 198.18.0.2/24
//! # in another shell, give the kernel's side an address and talk to netfold:
//! sudo ip addr add 198.18.0.1/24 dev nf0 && sudo ip link set nf0 up
//! echo hello | nc -q1 198.18.0.2 7
//! ```
//!
//! `tun:NAME` works the same (the stack then runs on bare IP packets). An existing interface,
//! such as one end of a veth pair, is opened with `netfold_os::packet_socket::PacketSocket`
//! instead. Opening needs CAP_NET_ADMIN (root).

use netfold::iface::{Stack, StackConfig};
use netfold::phy::Device;
use netfold::wire::Ipv4Addr;
use netfold_os::link::Link;
use netfold_rt::Runtime;
use std::io::{self, Read, Write};
use std::net::SocketAddrV4;
use std::time::Duration;

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [link, cidr] = &args[..] else {
        eprintln!("usage: tap_echo tap:NAME|tun:NAME ADDR/PREFIX");
        std::process::exit(2);
    };
    let (addr, prefix_len) = cidr
        .split_once('/')
        .and_then(|(a, p)| Some((a.parse::<Ipv4Addr>().ok()?, p.parse::<u8>().ok()?)))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "expected ADDR/PREFIX"))?;
    let dev = Link::open(link, Default::default())?;
    eprintln!(
        "tap_echo: {} {}, netfold at {addr}:7",
        dev.kind(),
        dev.name()
    );
    let o = addr.octets();
    let config = StackConfig {
        addr,
        prefix_len,
        // TAP: Ethernet; TUN: bare IP.
        medium: dev.caps().medium,
        mac: netfold::wire::ethernet::EthernetAddress([0x02, 0x6e, 0x66, o[1], o[2], o[3]]),
        ..StackConfig::default()
    };
    // The runtime's driver thread polls the stack on the device; sockets block like std's.
    let rt = Runtime::start(Stack::new(config), Box::new(dev), Duration::from_millis(1))?;
    let listener = rt.listen(SocketAddrV4::new(addr, 7), 64, Default::default())?;
    loop {
        let (mut stream, peer) = listener.accept()?;
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            let mut total = 0u64;
            loop {
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if stream.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        total += n as u64;
                    }
                    Err(e) => {
                        eprintln!("tap_echo: {peer}: {e}");
                        break;
                    }
                }
            }
            // The peer closed its side: close ours (the FIN follows the echoed bytes).
            let _ = stream.shutdown_write();
            eprintln!("tap_echo: {peer} done, {total} bytes echoed");
        });
    }
}
