//! P parallel TCP streams between two blocking runtimes over the in-memory pipe, for
//! measuring the runtime: `cargo run --release -p netfold-rt --example rt_stream -- P SECS`.
//! Prints the aggregate throughput and both stacks' TCP counters.
use netfold::iface::{Stack, StackConfig};
use netfold::phy::pipe::{Pipe, PipeConfig};
use netfold::wire::{ethernet::EthernetAddress, Ipv4Addr};
use netfold_rt::Runtime;
use std::io::{Read, Write};
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

fn stack(last: u8) -> Stack {
    Stack::new(StackConfig {
        addr: Ipv4Addr::new(198, 18, 0, last),
        mac: EthernetAddress([2, 0, 0, 0, 0, last]),
        tcp_secret: netfold::tcp::Secret::fixed_for_tests([last; 16]),
        ..StackConfig::default()
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let p: usize = args.next().map_or(2, |a| a.parse().expect("P"));
    let secs: f64 = args.next().map_or(2.0, |a| a.parse().expect("SECS"));
    let (a, b) = Pipe::new(PipeConfig::default());
    let idle = Duration::from_millis(1);
    let client = Runtime::start(stack(1), Box::new(a), idle).unwrap();
    let server = Runtime::start(stack(2), Box::new(b), idle).unwrap();
    let addr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 5001);
    let listener = server.listen(addr, 64, Default::default()).unwrap();
    let dur = Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let total: u64 = std::thread::scope(|sc| {
        for _ in 0..p {
            let s = client.connect(addr, Default::default(), None).unwrap();
            sc.spawn(move || {
                let data = vec![0x5au8; 65536];
                let t = Instant::now();
                while t.elapsed() < dur {
                    (&s).write_all(&data).unwrap();
                }
                s.shutdown_write().unwrap();
            });
        }
        let sinks: Vec<_> = (0..p)
            .map(|_| {
                let (s, _) = listener.accept().unwrap();
                sc.spawn(move || {
                    let mut buf = vec![0u8; 65536];
                    let mut got = 0u64;
                    loop {
                        match (&s).read(&mut buf).unwrap() {
                            0 => break got,
                            n => got += n as u64,
                        }
                    }
                })
            })
            .collect();
        sinks.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let dt = t0.elapsed().as_secs_f64();
    println!("{p} streams: {:.1} Mbit/s", total as f64 * 8.0 / dt / 1e6);
    drop(listener);
    let c = client.shutdown().counters();
    let s = server.shutdown().counters();
    println!("client tcp {:?}", c.tcp);
    println!("server tcp {:?}", s.tcp);
    println!("client polls {} tx_queue_full {}", c.polls, c.tx_queue_full);
    println!("server polls {} tx_queue_full {}", s.polls, s.tx_queue_full);
}
