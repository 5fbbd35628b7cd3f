//! An echo server on netfold under tokio.
//!
//! ```text
//! cargo run -p netfold-tokio --example echo                          # in-memory demo
//! sudo cargo run -p netfold-tokio --example echo -- tap:nf0 198.18.0.2/24
//! ```
//!
//! With a link (`tap:NAME` or `tun:NAME`, see `netfold_os::link`), it serves TCP echo on port 7
//! and UDP echo on port 7 at the given address until interrupted: from the kernel's side,
//! `nc 198.18.0.2 7` once the interface is up with an address in the same subnet. Without one,
//! it joins two stacks by the in-memory link, echoes a few lines from a client, and exits.

use netfold::iface::{Stack, StackConfig};
use netfold::phy::pipe::PipeConfig;
use netfold::wire::Ipv4Addr;
use netfold_tokio::{pipe, Link, Net, TcpListener, TcpStream, UdpSocket};
use std::io;
use std::net::SocketAddrV4;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const ECHO_PORT: u16 = 7;

/// Binds TCP and UDP echo on `addr`.
async fn bind(net: &Net, addr: Ipv4Addr) -> io::Result<(TcpListener, UdpSocket)> {
    let l = TcpListener::bind(net, SocketAddrV4::new(addr, ECHO_PORT)).await?;
    let udp = UdpSocket::bind(net, SocketAddrV4::new(addr, ECHO_PORT)).await?;
    Ok((l, udp))
}

/// Echoes one TCP connection until the peer closes its side, then closes ours.
async fn echo(mut s: TcpStream) -> io::Result<u64> {
    let (mut r, mut w) = s.split();
    let n = tokio::io::copy(&mut r, &mut w).await?;
    w.shutdown().await?;
    Ok(n)
}

/// Serves TCP echo (one task per connection) and UDP echo.
async fn serve(l: TcpListener, udp: UdpSocket) -> io::Result<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = udp.recv_from(&mut buf).await {
            let _ = udp.send_to(&buf[..n], from).await;
        }
    });
    loop {
        let (s, peer) = l.accept().await?;
        eprintln!("echo: connection from {peer}");
        tokio::spawn(async move {
            match echo(s).await {
                Ok(n) => eprintln!("echo: {peer} done ({n} bytes)"),
                Err(e) => eprintln!("echo: {peer} ended: {e}"),
            }
        });
    }
}

fn config(addr: Ipv4Addr, prefix_len: u8) -> StackConfig {
    let o = addr.octets();
    StackConfig {
        addr,
        prefix_len,
        mac: netfold::wire::ethernet::EthernetAddress([0x02, 0x6e, 0x66, o[1], o[2], o[3]]),
        ..StackConfig::default()
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [link, cidr] = &args[..] {
        let (addr, prefix) = cidr
            .split_once('/')
            .and_then(|(a, p)| Some((a.parse::<Ipv4Addr>().ok()?, p.parse::<u8>().ok()?)))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "expected ADDR/PREFIX"))?;
        let dev = netfold_os::link::Link::open(link, Default::default())?;
        eprintln!("echo: {} {} at {addr}:{ECHO_PORT}", dev.kind(), dev.name());
        let net = Net::spawn(Stack::new(config(addr, prefix)), Link::new(dev))?;
        let (l, udp) = bind(&net, addr).await?;
        return serve(l, udp).await;
    }
    let (server_ip, client_ip) = (Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 1));
    let (ls, lc) = pipe(PipeConfig::default());
    let server = Net::spawn(Stack::new(config(server_ip, 24)), ls)?;
    let client = Net::spawn(Stack::new(config(client_ip, 24)), lc)?;
    let (l, _udp) = bind(&server, server_ip).await?;
    // One connection, served to its end before the stacks are shut down.
    let served = tokio::spawn(async move {
        let (s, peer) = l.accept().await?;
        eprintln!("echo: connection from {peer}");
        let n = echo(s).await?;
        eprintln!("echo: {peer} done ({n} bytes)");
        io::Result::Ok(())
    });
    let mut s = TcpStream::connect(&client, SocketAddrV4::new(server_ip, ECHO_PORT)).await?;
    let (r, mut w) = s.split();
    let mut lines = BufReader::new(r).lines();
    for line in ["hello", "from netfold", "on tokio"] {
        w.write_all(format!("{line}\n").as_bytes()).await?;
        let back = lines.next_line().await?.unwrap_or_default();
        println!("sent {line:?}, echoed {back:?}");
    }
    // Close our side and read to the end: the server echoes everything, then closes too.
    w.shutdown().await?;
    while lines.next_line().await?.is_some() {}
    drop(lines);
    drop(s);
    served
        .await
        .map_err(|e| io::Error::other(format!("echo task: {e}")))??;
    client.shutdown().await;
    server.shutdown().await;
    Ok(())
}
