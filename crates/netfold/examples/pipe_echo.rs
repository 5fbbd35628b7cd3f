//! Two stacks joined by the in-memory link and driven by hand, sans-IO: this program owns the
//! clock (virtual time here) and the loop, and calls `Stack::poll` until `Stack::poll_at`
//! says nothing more is due. The client sends 1 MiB, the server echoes it, the client checks
//! every byte. `cargo run --release -p netfold --example pipe_echo`.

use netfold::iface::{Stack, StackConfig};
use netfold::phy::pipe::{Pipe, PipeConfig};
use netfold::socket::{TcpListener, TcpStream};
use netfold::time::{Duration, Instant};
use netfold::wire::{ethernet::EthernetAddress, Ipv4Addr};
use std::net::SocketAddrV4;

const TOTAL: usize = 1 << 20;

fn byte(i: usize) -> u8 {
    (i * 7 % 251) as u8
}

fn main() -> std::io::Result<()> {
    let config = |last: u8| StackConfig {
        addr: Ipv4Addr::new(198, 18, 0, last),
        mac: EthernetAddress([2, 0, 0, 0, 0, last]),
        ..StackConfig::default()
    };
    let (mut client, mut server) = (Stack::new(config(1)), Stack::new(config(2)));
    let (mut a, mut b) = Pipe::new(PipeConfig::default());
    let addr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7);
    let mut now = Instant::ZERO;
    let listener = TcpListener::bind(&mut server, addr, 8, Default::default())?;
    let stream = TcpStream::connect(&mut client, now, addr, Default::default())?;
    let data: Vec<u8> = (0..TOTAL).map(byte).collect();
    let (mut peer, mut sent, mut echoed) = (None, 0, 0);
    let mut pending = Vec::new(); // what the server read and has not written back yet
    let mut buf = vec![0u8; 64 * 1024];
    while echoed < TOTAL {
        client.poll(now, &mut a);
        server.poll(now, &mut b);
        // Non-blocking calls: WouldBlock until there is room, data or a connection.
        peer = peer.or_else(|| listener.accept(&mut server).ok().map(|(s, _)| s));
        sent += stream.write(&mut client, &data[sent..]).unwrap_or(0);
        if let Some(s) = peer {
            let n = s.read(&mut server, &mut buf).unwrap_or(0);
            pending.extend_from_slice(&buf[..n]);
            let w = s.write(&mut server, &pending).unwrap_or(0);
            pending.drain(..w);
        }
        let n = stream.read(&mut client, &mut buf).unwrap_or(0);
        for (k, &got) in buf[..n].iter().enumerate() {
            assert_eq!(got, byte(echoed + k), "byte {} differs", echoed + k);
        }
        echoed += n;
        // Sleep until the next deadline (in virtual time: jump there).
        let due = [client.poll_at(now), server.poll_at(now)]
            .into_iter()
            .flatten()
            .min();
        now = due.unwrap_or(now).max(now + Duration::from_micros(10));
    }
    println!(
        "echoed {TOTAL} bytes intact in {} us of virtual time",
        now.saturating_since(Instant::ZERO).total_micros()
    );
    Ok(())
}
