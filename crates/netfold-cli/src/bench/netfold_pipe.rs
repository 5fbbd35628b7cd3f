//! netfold on both ends of the in-memory pipe, one thread: TCP_STREAM.

use super::clock::Clock;
use super::pattern::{Pattern, Verifier};
use super::report::{mbps, Row};
use super::StreamParams;
use netfold::iface::{Stack, StackConfig};
use netfold::phy::pipe::{Pipe, PipeConfig};
use netfold::phy::Device;
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp;
use netfold::time::Duration;
use netfold::wire::ethernet::EthernetAddress;
use netfold::wire::Ipv4Addr;
use std::io::ErrorKind;
use std::net::SocketAddrV4;

pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 12865;

/// Give up if no byte moves for this long (wall + skipped time): a stuck run is a failure, not a
/// hang.
const STALL_LIMIT: Duration = Duration::from_secs(120);

fn stack_config(addr: Ipv4Addr, mac_last: u8, mtu: usize) -> StackConfig {
    StackConfig {
        addr,
        prefix_len: 24,
        mac: EthernetAddress([0x02, 0, 0, 0, 0, mac_last]),
        mtu,
        tcp_secret: [mac_last; 16],
        ..StackConfig::default()
    }
}

pub fn tcp_config(p: &StreamParams) -> tcp::Config {
    let mut c = tcp::Config {
        mss: (p.mtu.saturating_sub(40)).min(65495) as u16,
        nodelay: p.nodelay,
        time_wait: Duration::from_secs(1),
        ..tcp::Config::default()
    };
    if let Some(s) = p.send_buffer {
        c.send_buffer = s;
    }
    if let Some(r) = p.recv_buffer {
        c.recv_buffer = r;
    }
    c
}

fn pipe_config(p: &StreamParams) -> PipeConfig {
    PipeConfig::default()
        .mtu(p.mtu)
        .loss(p.impair.loss)
        .reorder(p.impair.reorder)
        .duplicate(p.impair.duplicate)
        .corrupt(p.impair.corrupt)
        .seed(p.impair.seed)
}

/// Polls both stacks once; true if either did something.
fn poll_both(now: netfold::time::Instant, c: &mut Stack, a: &mut dyn Device, s: &mut Stack, b: &mut dyn Device) -> bool {
    let x = c.poll(now, a);
    let y = s.poll(now, b);
    x | y
}

pub fn run(p: &StreamParams) -> Result<Row, Box<dyn std::error::Error>> {
    let (mut end_c, mut end_s) = Pipe::new(pipe_config(p));
    let mut client = Stack::new(stack_config(CLIENT_ADDR, 1, p.mtu));
    let mut server = Stack::new(stack_config(SERVER_ADDR, 2, p.mtu));
    let tcfg = tcp_config(p);
    let mut clock = Clock::new();

    let listener = TcpListener::bind(&mut server, SocketAddrV4::new(SERVER_ADDR, PORT), 16, tcfg)?;
    let conn = TcpStream::connect(&mut client, clock.now(), SocketAddrV4::new(SERVER_ADDR, PORT), tcfg)?;

    // Handshake.
    let accepted = loop {
        let now = clock.now();
        let worked = poll_both(now, &mut client, &mut end_c, &mut server, &mut end_s);
        match listener.accept(&mut server) {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        conn.is_connected(&mut client)?;
        if !worked {
            idle_skip(&mut clock, &client, &server)?;
        }
    };

    let msg = p.send_size.max(1);
    let pattern = Pattern::new(msg.max(p.recv_size));
    let mut verifier = Verifier::new(&pattern);
    let mut rbuf = vec![0u8; p.recv_size.max(1)];
    let total = p.bytes;
    let deadline = p.duration.map(std::time::Duration::from_secs_f64);

    let start = std::time::Instant::now();
    let mut sent: u64 = 0;
    let mut received: u64 = 0;
    let mut fin_sent = false;
    let mut last_progress = clock.now();
    let mut end_of_stream = false;
    while !end_of_stream {
        // Sender: whole messages as long as the send buffer takes them (a partial write keeps
        // its remainder for the next round, as a blocking send would).
        let time_up = deadline.is_some_and(|d| start.elapsed() >= d);
        let limit = if time_up { sent } else { total.unwrap_or(u64::MAX) };
        while sent < limit {
            let n = ((limit - sent) as usize).min(msg - (sent % msg as u64) as usize);
            match conn.write(&mut client, pattern.window(sent, n)) {
                Ok(k) => sent += k as u64,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        if sent >= limit && !fin_sent {
            conn.shutdown_write(&mut client)?;
            fin_sent = true;
        }
        let now = clock.now();
        let worked = poll_both(now, &mut client, &mut end_c, &mut server, &mut end_s);
        // Receiver.
        let mut got = false;
        loop {
            match accepted.read(&mut server, &mut rbuf) {
                Ok(0) => {
                    end_of_stream = true;
                    break;
                }
                Ok(n) => {
                    if p.verify {
                        verifier.check(&rbuf[..n]);
                    }
                    received += n as u64;
                    got = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        if got || worked {
            last_progress = clock.now();
        } else {
            if clock.now() - last_progress > STALL_LIMIT {
                return Err(format!("transfer stalled at {received} of {sent} bytes").into());
            }
            idle_skip(&mut clock, &client, &server)?;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let _ = conn.close(&mut client);
    let _ = accepted.close(&mut server);

    let mut row = Row {
        test: "TCP_STREAM".into(),
        stack: "netfold".into(),
        link: "pipe".into(),
        mtu: p.mtu,
        msg_size: msg,
        bytes: received,
        elapsed_s: elapsed,
        throughput_mbps: Some(mbps(received, elapsed)),
        verified: p.verify.then(|| verifier.verified(sent) && received == sent),
        ..Default::default()
    };
    row.details.insert("clock_skipped_s".into(), clock.skipped_s().into());
    row.details.insert("client".into(), format!("{}", client.counters()).into());
    row.details.insert("server".into(), format!("{}", server.counters()).into());
    Ok(row)
}

/// Both stacks are idle: jump to the earliest deadline either has.
fn idle_skip(clock: &mut Clock, c: &Stack, s: &Stack) -> Result<(), Box<dyn std::error::Error>> {
    let now = clock.now();
    match [c.poll_at(now), s.poll_at(now)].into_iter().flatten().min() {
        Some(t) => {
            clock.skip_to(t);
            Ok(())
        }
        None => Err("both stacks idle with nothing scheduled: transfer cannot finish".into()),
    }
}
