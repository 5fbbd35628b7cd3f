//! Shards: two sharded hosts of two stacks each, joined by the multi-queue in-memory
//! link (`netfold::phy::mq`) whose every frame is steered by the Toeplitz hash of its 4-tuple.
//! Every wait is bounded (connect and read timeouts), so a lost wake-up or a connection on the
//! wrong shard fails the test instead of hanging it.

use netfold::phy::mq::{mq_link, MqCounters, MqPort};
use netfold::phy::pipe::PipeConfig;
use netfold::phy::Device;
use netfold::rss::{Rss, MICROSOFT_KEY};
use netfold::wire::Ipv4Addr;
use netfold_rt::shards::{current_shard, ShardConfig, Shards};
use netfold_rt::TcpStream;
use netfold_testkit::{config, Rng};
use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 7;
const WAIT: Option<Duration> = Some(Duration::from_secs(20));

/// Two hosts of `n` shards each over one `n`-queue link, and every port's counters.
struct Hosts {
    rss: Arc<Rss>,
    client: Shards,
    server: Shards,
    counters: Vec<Arc<MqCounters>>,
}

fn hosts(n: usize, pinned: bool) -> Hosts {
    let rss = Arc::new(Rss::new(MICROSOFT_KEY, n));
    let (a, b) = mq_link(PipeConfig::default(), Arc::clone(&rss));
    let counters = a.iter().chain(&b).map(MqPort::counters).collect();
    let devices = |ports: Vec<MqPort>| -> Vec<Box<dyn Device + Send>> {
        ports
            .into_iter()
            .map(|p| Box::new(p) as Box<dyn Device + Send>)
            .collect()
    };
    let mut cfg = ShardConfig::rss(Arc::clone(&rss));
    if !pinned {
        cfg = cfg.unpinned();
    }
    Hosts {
        client: Shards::start(config(CLIENT, 1), devices(a), cfg.clone()).unwrap(),
        server: Shards::start(config(SERVER, 2), devices(b), cfg).unwrap(),
        rss,
        counters,
    }
}

fn server_addr() -> SocketAddr {
    SocketAddrV4::new(SERVER, PORT).into()
}

/// The payload of connection `id`: distinct per connection, so a mix-up shows.
fn payload(id: u32) -> Vec<u8> {
    Rng::new(u64::from(id) + 1).bytes(4096 + id as usize * 97)
}

/// The server side of one connection: echoes everything back until end of stream, then closes.
fn echo(s: TcpStream) -> std::io::Result<u64> {
    s.set_read_timeout(WAIT).unwrap();
    s.set_write_timeout(WAIT).unwrap();
    let mut buf = [0u8; 2048];
    let mut total = 0;
    loop {
        let n = (&s).read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        (&s).write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// The client side of connection `id`: sends its payload, half-closes, reads the echo to end
/// of stream and checks it byte for byte. Returns the connection's local port.
fn exchange(s: TcpStream, id: u32) -> std::io::Result<u16> {
    s.set_read_timeout(WAIT).unwrap();
    s.set_write_timeout(WAIT).unwrap();
    let data = payload(id);
    (&s).write_all(&data)?;
    s.shutdown_write()?;
    let mut back = Vec::new();
    (&s).read_to_end(&mut back)?;
    assert!(back == data, "connection {id}: the echo differs");
    Ok(s.local_addr()?.port())
}

/// Connects `per_thread` times from each of `threads` application threads on every client
/// shard (started with `spawn_on`, so each connects on its own shard), exchanging data on each.
/// Returns (client shard, local port) for every connection.
fn connect_from_every_shard(h: &Hosts, threads: usize, per_thread: usize) -> Vec<(usize, u16)> {
    let mut handles = Vec::new();
    for k in 0..h.client.len() {
        for t in 0..threads {
            let c = h.client.clone();
            let base = ((k * threads + t) * per_thread) as u32;
            let th = h
                .client
                .spawn_on(k, move |_rt| -> std::io::Result<Vec<(usize, u16)>> {
                    assert_eq!(current_shard(), Some(k));
                    assert_eq!(c.current(), Some(k));
                    let mut done = Vec::new();
                    for i in 0..per_thread {
                        let (shard, s) = c.connect(server_addr(), Default::default(), WAIT)?;
                        assert_eq!(shard, k, "a shard thread connects on its own shard");
                        done.push((shard, exchange(s, base + i as u32)?));
                    }
                    Ok(done)
                })
                .unwrap();
            handles.push(th);
        }
    }
    handles
        .into_iter()
        .flat_map(|t| t.join().expect("client thread").expect("client"))
        .collect()
}

/// No frame crossed between shards on the link, in either direction, and every port carried
/// frames from its own peer shard.
fn assert_no_frame_crossed(h: &Hosts) {
    for c in &h.counters {
        assert_eq!(
            c.cross_shard_frames(),
            0,
            "port of shard {}: rx {:?} tx {:?}",
            c.shard(),
            c.rx_from(),
            c.tx_to()
        );
        assert!(c.rx_from()[c.shard()] > 0, "shard {} idle", c.shard());
    }
}

/// Both directions of a client connection from `lport` hash to `shard`.
fn assert_hashes_to(rss: &Rss, lport: u16, shard: usize) {
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    assert_eq!(rss.shard_of_ip(s, c, PORT, lport), shard, "reply direction");
    assert_eq!(
        rss.shard_of_ip(c, s, lport, PORT),
        shard,
        "request direction"
    );
}

#[test]
fn per_shard_workers_accept_their_own_shards_connections_and_nothing_crosses() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 8;
    let h = hosts(2, true);
    let per_shard = THREADS * PER_THREAD;
    let listener = Arc::new(
        h.server
            .listen(server_addr(), 128, Default::default())
            .unwrap(),
    );
    assert_eq!(listener.len(), 2);
    // One worker per server shard, on the shard's thread, taking only its own connections.
    let workers: Vec<_> = (0..h.server.len())
        .map(|k| {
            let l = Arc::clone(&listener);
            h.server
                .spawn_on(k, move |_rt| -> std::io::Result<Vec<u16>> {
                    assert_eq!(current_shard(), Some(k));
                    let mut peers = Vec::new();
                    for _ in 0..per_shard {
                        let (s, peer) = l.accept_on(k)?;
                        peers.push(peer.port());
                        // The client checks the echoed bytes; here, that there were some.
                        assert!(echo(s)? >= 4096);
                    }
                    Ok(peers)
                })
                .unwrap()
        })
        .collect();
    let conns = connect_from_every_shard(&h, THREADS, PER_THREAD);
    assert_eq!(conns.len(), 2 * per_shard);
    let accepted: Vec<Vec<u16>> = workers
        .into_iter()
        .map(|w| w.join().expect("worker").expect("server"))
        .collect();
    for (k, peers) in accepted.iter().enumerate() {
        // Server shard k accepted exactly the connections client shard k opened.
        let opened: BTreeSet<u16> = conns
            .iter()
            .filter(|&&(s, _)| s == k)
            .map(|&(_, p)| p)
            .collect();
        let got: BTreeSet<u16> = peers.iter().copied().collect();
        assert_eq!(got, opened, "shard {k}");
        assert_eq!(got.len(), per_shard);
        for &p in peers {
            assert_hashes_to(&h.rss, p, k);
        }
    }
    assert_no_frame_crossed(&h);
    // No segment reached a stack without a socket for it (a connection on the wrong shard
    // would have been reset there).
    for shards in [&h.client, &h.server] {
        for k in 0..shards.len() {
            let no_socket = shards.shard(k).with_stack(|st| st.tcp().stats().no_socket);
            assert_eq!(no_socket, 0, "shard {k}");
        }
    }
}

#[test]
fn accept_across_shards_returns_every_connection_of_both_shards_on_its_shard() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 8;
    let h = hosts(2, true);
    let listener = h
        .server
        .listen(server_addr(), 128, Default::default())
        .unwrap();
    let total = 2 * THREADS * PER_THREAD;
    // One acceptor on a thread of no shard, echoing each connection in turn.
    let acceptor = std::thread::spawn(move || -> std::io::Result<Vec<(usize, u16)>> {
        let mut got = Vec::new();
        for _ in 0..total {
            let (k, s, peer) = listener.accept_timeout(Duration::from_secs(20))?;
            assert_eq!(s.local_addr()?, server_addr());
            got.push((k, peer.port()));
            echo(s)?;
        }
        // Nothing more: a bounded accept times out rather than returning something stale.
        let r = listener.accept_timeout(Duration::from_millis(50));
        assert_eq!(r.err().map(|e| e.kind()), Some(ErrorKind::TimedOut));
        Ok(got)
    });
    let conns = connect_from_every_shard(&h, THREADS, PER_THREAD);
    let accepted = acceptor.join().expect("acceptor").expect("accept");
    let opened: BTreeSet<(usize, u16)> = conns.into_iter().collect();
    let got: BTreeSet<(usize, u16)> = accepted.iter().copied().collect();
    // Every connection of both shards, each reported on the shard its client connected from.
    assert_eq!(got, opened);
    for k in 0..2 {
        assert_eq!(accepted.iter().filter(|&&(s, _)| s == k).count(), total / 2);
    }
    assert_no_frame_crossed(&h);
}

#[test]
fn connect_from_a_thread_of_no_shard_goes_round_robin() {
    let h = hosts(2, false);
    assert_eq!(current_shard(), None);
    assert_eq!(h.client.current(), None);
    let listener = h
        .server
        .listen(server_addr(), 8, Default::default())
        .unwrap();
    let mut shards = Vec::new();
    for i in 0..4u32 {
        let (k, s) = h
            .client
            .connect(server_addr(), Default::default(), WAIT)
            .unwrap();
        let lport = s.local_addr().unwrap().port();
        assert_hashes_to(&h.rss, lport, k);
        let (ks, srv, peer) = listener.accept_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(
            (ks, peer.port()),
            (k, lport),
            "accepted on the client's shard"
        );
        let t = std::thread::spawn(move || echo(srv));
        assert_eq!(exchange(s, i).unwrap(), lport);
        t.join().unwrap().unwrap();
        shards.push(k);
    }
    assert_eq!(shards, vec![0, 1, 0, 1]);
    // connect_on names the shard; the port it picks hashes there, for both shards.
    for k in [1, 0] {
        let s = h
            .client
            .connect_on(k, server_addr(), Default::default(), WAIT)
            .unwrap();
        assert_hashes_to(&h.rss, s.local_addr().unwrap().port(), k);
        let (ks, _srv, _) = listener.accept_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(ks, k);
    }
    assert_no_frame_crossed(&h);
}

#[test]
fn the_port_picker_lands_every_port_on_its_shard_and_skips_ports_in_use() {
    let h = hosts(2, false);
    let _listener = h
        .server
        .listen(server_addr(), 64, Default::default())
        .unwrap();
    let mut seen = BTreeSet::new();
    // Many open connections per shard at once: each picked port is new (the picker moves past
    // ports whose 4-tuple is taken) and hashes to the shard both ways.
    let mut open = Vec::new();
    for i in 0..24 {
        let k = i % 2;
        let s = h
            .client
            .connect_on(k, server_addr(), Default::default(), WAIT)
            .unwrap();
        let p = s.local_addr().unwrap().port();
        assert!(netfold_rt::shards::EPHEMERAL.contains(&p));
        assert_hashes_to(&h.rss, p, k);
        assert!(seen.insert(p), "port {p} picked twice while in use");
        open.push(s);
    }
    // The plain functions agree with what connect did.
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    for k in 0..2 {
        for p in h
            .rss
            .local_ports(c, s, PORT, k, netfold_rt::shards::EPHEMERAL, 50000)
            .take(100)
        {
            assert_hashes_to(&h.rss, p, k);
        }
    }
    // Out of range shards are errors, not panics.
    let r = h
        .client
        .connect_on(2, server_addr(), Default::default(), WAIT);
    assert_eq!(r.err().map(|e| e.kind()), Some(ErrorKind::InvalidInput));
    assert!(h.client.spawn_on(2, |_| ()).is_err());
}

#[test]
fn shard_threads_and_drivers_are_pinned_to_their_cpu() {
    let h = hosts(2, true);
    let online = netfold_os::cpu::online_cpus();
    // Pins hold only where the process may run on every CPU (a cpuset may refuse them, and
    // the shard then runs unpinned, as documented).
    let all = format!("0-{}", online - 1);
    let free = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Cpus_allowed_list:") && l.ends_with(&all))
    });
    for k in 0..2 {
        assert_eq!(h.client.cpu(k), Some(k));
        let on = h
            .client
            .spawn_on(k, |_| netfold_os::cpu::current_cpu())
            .unwrap()
            .join()
            .unwrap();
        if free && online > 1 {
            assert_eq!(on, Some(k % online), "shard {k}'s thread runs on its CPU");
        }
    }
    // Unpinned shards report no CPU.
    let u = hosts(1, false);
    assert_eq!(u.client.cpu(0), None);
}

#[test]
fn one_port_on_every_shard_and_shutdown_returns_the_stacks() {
    let h = hosts(2, false);
    let l = h
        .server
        .listen(SocketAddrV4::new(SERVER, 80), 8, Default::default())
        .unwrap();
    assert_eq!(l.local_addr().unwrap().port(), 80);
    for k in 0..2 {
        assert_eq!(l.on(k).local_addr().unwrap().port(), 80);
    }
    drop(l);
    let Hosts { client, server, .. } = h;
    let extra = client.clone();
    let Err(client) = client.shutdown() else {
        panic!("shut down while a clone is still held");
    };
    drop(extra);
    assert_eq!(client.shutdown().ok().map(|s| s.len()), Some(2));
    assert_eq!(server.shutdown().ok().map(|s| s.len()), Some(2));
}
