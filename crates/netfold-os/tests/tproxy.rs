//! The transparent forwarder example (`examples/tproxy.rs`) across three throw-away network
//! namespaces, addresses only from 198.18.0.0/15:
//!
//! ```text
//!  client ns                 forwarder ns                       server ns
//!  kernel 198.18.80.1/24 --TUN--> netfold 198.18.80.2 (transparent)
//!  route 198.18.81.0/24 -> TUN    kernel sockets: veth 198.18.81.1 --- veth 198.18.81.2/24
//!                                                                  TCP echo :7000, UDP echo :7001
//! ```
//!
//! The client connects to 198.18.81.2 as if directly; the packets go into the TUN, netfold's
//! transparent listener accepts them (the original destination as local address), and the
//! forwarder relays them through the forwarder namespace's kernel to the server. Needs root
//! and /dev/net/tun (else `SKIPPED: ...`). Everything is removed on drop, also on failure.

#[allow(dead_code)]
#[path = "../examples/tproxy.rs"]
mod tproxy;

use netfold_os::netns::{self, NetNs};
use netfold_os::tap::TapConfig;
use netfold_os::tun::Tun;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 80, 1);
const NETFOLD_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 80, 2);
const FWD_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 81, 1);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 81, 2);
const TCP_PORT: u16 = 7000;
const UDP_PORT: u16 = 7001;
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Moves the calling thread into namespace `name` (threads it spawns inherit it).
fn enter(name: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{name}")).expect("open netns");
    // SAFETY: setns with a namespace descriptor we hold open; it changes only this thread's
    // network namespace.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
}

/// TCP echo and UDP echo servers in namespace `ns`, on detached threads (they die with the
/// process; their namespace is deleted by its guard).
fn start_servers(ns: &str) {
    let (tx, rx) = std::sync::mpsc::channel();
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        enter(&ns);
        let l = TcpListener::bind(SocketAddrV4::new(SERVER_IP, TCP_PORT)).expect("tcp bind");
        let u = UdpSocket::bind(SocketAddrV4::new(SERVER_IP, UDP_PORT)).expect("udp bind");
        tx.send(()).unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = u.recv_from(&mut buf) {
                let _ = u.send_to(&buf[..n], from);
            }
        });
        for s in l.incoming() {
            let Ok(mut s) = s else { break };
            std::thread::spawn(move || {
                let mut r = s.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut s);
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    rx.recv_timeout(IO_TIMEOUT).expect("servers ready");
}

#[test]
fn tcp_and_udp_reach_the_original_destination_through_the_forwarder() {
    if netns::skip(netns::unavailable_reason()) {
        return;
    }
    let client = NetNs::create().expect("client ns");
    let fwd = NetNs::create().expect("forwarder ns");
    let server = NetNs::create().expect("server ns");

    // Forwarder <-> server: a veth pair created inside the forwarder namespace, one end moved
    // straight into the server's (nothing in this namespace).
    fwd.ip(&[
        "link",
        "add",
        "nftpf",
        "type",
        "veth",
        "peer",
        "name",
        "nftps",
        "netns",
        server.name(),
    ])
    .expect("veth");
    fwd.configure("nftpf", FWD_IP, 24).expect("fwd veth");
    server
        .configure("nftps", SERVER_IP, 24)
        .expect("server veth");

    // Client <-> netfold: a TUN whose kernel side is in the client namespace.
    let tun = Tun::open(
        "nftp%d",
        TapConfig {
            offloads: true,
            ..TapConfig::default()
        },
    )
    .expect("open tun");
    let tun_name = tun.name().to_owned();
    client.adopt(&tun_name).expect("move tun");
    client
        .configure(&tun_name, CLIENT_IP, 24)
        .expect("tun addr");
    client
        .ip(&["route", "add", "198.18.81.0/24", "dev", &tun_name])
        .expect("route into the tun");

    start_servers(server.name());

    // The forwarder, its kernel sockets in the forwarder namespace.
    let fwd_name = fwd.name().to_owned();
    let forwarder = std::thread::spawn(move || {
        enter(&fwd_name);
        tproxy::start(tun, NETFOLD_IP, 24)
    })
    .join()
    .unwrap()
    .expect("forwarder");

    // The client, in its namespace, talks to the server's address as if directly.
    let client_name = client.name().to_owned();
    let result = std::thread::spawn(move || {
        enter(&client_name);
        let dst = SocketAddrV4::new(SERVER_IP, TCP_PORT);
        let mut s = TcpStream::connect_timeout(&dst.into(), IO_TIMEOUT).expect("connect");
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        assert_eq!(s.peer_addr().unwrap(), dst.into());
        let data: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let mut w = s.try_clone().unwrap();
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            w.write_all(&sent).expect("write");
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut back = Vec::with_capacity(data.len());
        s.read_to_end(&mut back).expect("read echo");
        writer.join().unwrap();
        assert_eq!(back.len(), data.len(), "echo length");
        assert!(back == data, "echo is byte-exact");

        // UDP echo, with a few tries (the first datagram opens the flow).
        let u = UdpSocket::bind(SocketAddrV4::new(CLIENT_IP, 0)).unwrap();
        u.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let udst = SocketAddrV4::new(SERVER_IP, UDP_PORT);
        let mut buf = [0u8; 2048];
        let mut answered = 0;
        for i in 0..10u32 {
            let msg = format!("datagram {i}");
            u.send_to(msg.as_bytes(), udst).unwrap();
            if let Ok((n, from)) = u.recv_from(&mut buf) {
                assert_eq!(from, udst.into(), "reply from the original destination");
                assert!(buf[..n].starts_with(b"datagram "));
                answered += 1;
                if answered == 3 {
                    break;
                }
            }
        }
        assert_eq!(answered, 3, "UDP echo through the forwarder");
    })
    .join();

    let stack = forwarder.stop();
    let c = stack.counters();
    eprintln!(
        "forwarder: transparent_in {} tcp segments_in {} udp_in {}",
        c.ipv4_transparent_in, c.tcp.segments_in, c.udp_in
    );
    drop((client, fwd, server));
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
    assert!(c.ipv4_transparent_in > 0);
}
