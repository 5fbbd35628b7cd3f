//! `netfold serve --shards N` (issue 14): one netfold stack per queue of a multi-queue TAP.
//!
//! The TAP is opened with `IFF_MULTI_QUEUE`, one descriptor per queue. For frames going from
//! the kernel to us the kernel picks the queue (`tun_automq_select_queue`: the flow's symmetric
//! skb hash, and a flow table that remembers the queue the flow's last frame came *from* us
//! on), so a connection stays on the queue its SYN arrived on as long as the shard that owns
//! that queue answers on it — which it does, because its stack owns the connection. Shard `k`
//! owns queue `k`, runs on its own thread pinned to CPU `k` (mod the CPUs), and has its own
//! stack (same MAC and address on every shard), buffer pool, timers and services, listening on
//! every port (SO_REUSEPORT-like). Each shard records the flows its queue delivered (bounded);
//! at exit `serve` prints how many flows reached more than one shard (`flows_on_two_shards`,
//! which the tests require to be 0).
//!
//! Shared between shards, off the data path: ARP and IPv6 Neighbor Discovery (a frame
//! without a flow lands on one queue, but every shard's neighbour table needs the kernel's
//! address, so each ARP frame and each NDP message (RFC 4861 §4, ICMPv6 types 133-137) a
//! shard receives is copied to the others, woken through an eventfd; every shard answers a
//! solicitation, and the duplicate advertisements are harmless, as the ARP replies are) and
//! the iperf3 test (its control and data connections are different flows:
//! [`netfold_apps::hub`]). IPv6 flows are steered like IPv4 ones: the kernel's flow hash
//! covers the IPv6 addresses and ports. Each shard runs Duplicate Address Detection for the
//! same addresses on its own; their solicitations are never copied to each other (only what
//! the kernel sends is), so they do not see each other as duplicates.

use super::serve::{self, Args, Clock};
use super::CmdResult;
use crate::bench::affinity::{online_cpus, pin_current_thread};
use netfold::buf::{PacketBuf, Pool};
use netfold::iface::{Stack, StackConfig};
use netfold::phy::{Device, DeviceCaps, RawFd};
use netfold::rss::frame_tuple_ip;
use netfold::time::{Duration, Instant};
use netfold_apps::hub::IperfHub;
use netfold_apps::{ServiceStats, Services, ServicesConfig};
use netfold_os::tap::{Tap, TapConfig, TapStats};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::ExitCode;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

/// An eventfd: a shard's wake-up when another shard hands it an ARP frame.
struct Wake(OwnedFd);

impl Wake {
    fn new() -> std::io::Result<Wake> {
        // SAFETY: eventfd takes two integers and returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(Wake(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local to our own descriptor.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
    fn clear(&self) {
        let mut b = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local from our own non-blocking descriptor.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
    }
}

/// Flows a shard records (to check afterwards that no flow reached two shards); past this
/// many the record stops growing, so a long-running server's memory stays bounded.
const FLOW_RECORD: usize = 1 << 16;

/// A received TCP/UDP flow: (peer address, IPv4 as v4-mapped, peer port, our port).
type FlowKey = ([u8; 16], u16, u16);

/// The flow of a received frame: its IPv4 or (extension-free) IPv6 TCP/UDP source address and
/// ports ([`frame_tuple_ip`]).
fn flow_of(f: &[u8]) -> Option<FlowKey> {
    let (src, _, sp, dp) = frame_tuple_ip(f)?;
    let a = match src {
        std::net::IpAddr::V4(a) => a.to_ipv6_mapped(),
        std::net::IpAddr::V6(a) => a,
    };
    Some((a.octets(), sp, dp))
}

/// An IPv6 Neighbor Discovery message (RFC 4861 §4: ICMPv6 types 133 to 137, straight after
/// the fixed header, as NDP sends them), through the wire views.
fn is_ndp(f: &[u8]) -> bool {
    use netfold::wire::ethernet::{EtherType, EthernetFrame};
    use netfold::wire::icmpv6::{msg_type, Icmpv6Packet};
    use netfold::wire::ipv6::Ipv6Packet;
    use netfold::wire::IpProtocol;
    let Ok(eth) = EthernetFrame::new_checked(f) else {
        return false;
    };
    if eth.ethertype() != EtherType::Ipv6 {
        return false;
    }
    let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
        return false;
    };
    if ip.next_header() != IpProtocol::Icmpv6 {
        return false;
    }
    Icmpv6Packet::new_checked(ip.payload())
        .is_ok_and(|m| (msg_type::ROUTER_SOLICIT..=msg_type::REDIRECT).contains(&m.msg_type()))
}

/// One shard's device: its TAP queue, plus the ARP frames and NDP messages other shards hand
/// it.
struct ShardDev {
    /// Every flow whose frames this queue delivered (up to [`FLOW_RECORD`]).
    flows: std::collections::HashSet<FlowKey>,
    tap: Tap,
    inbox: Receiver<Vec<u8>>,
    wake: Arc<Wake>,
    /// The other shards: where their ARP and NDP copies go, and their wake-ups.
    peers: Vec<(Sender<Vec<u8>>, Arc<Wake>)>,
    /// ARP frames and NDP messages copied to the other shards (printed as `arp_shared`).
    arp_shared: u64,
}

fn is_arp(f: &[u8]) -> bool {
    f.get(12..14) == Some(&[0x08, 0x06])
}

impl Device for ShardDev {
    fn caps(&self) -> DeviceCaps {
        self.tap.caps()
    }
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let mut n = 0;
        while n < max {
            let Ok(f) = self.inbox.try_recv() else { break };
            let mut b = pool.get();
            b.extend_from_slice(&f);
            out.push(b);
            n += 1;
        }
        let first = out.len();
        n += self.tap.recv_batch(now, pool, out, max - n);
        if self.flows.len() < FLOW_RECORD {
            for f in &out[first..] {
                if let Some(k) = flow_of(f.as_slice()) {
                    self.flows.insert(k);
                }
            }
        }
        for f in out[first..]
            .iter()
            .filter(|f| is_arp(f.as_slice()) || is_ndp(f.as_slice()))
        {
            for (tx, wake) in &self.peers {
                if tx.send(f.as_slice().to_vec()).is_ok() {
                    wake.signal();
                    self.arp_shared += 1;
                }
            }
        }
        n
    }
    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        self.tap.send_batch(now, pool, frames)
    }
    fn poll_at(&self) -> Option<Instant> {
        self.tap.poll_at()
    }
    fn readable_fd(&self) -> Option<RawFd> {
        Some(self.tap.fd())
    }
}

/// What a shard reports when it stops.
struct ShardReport {
    cpu: Option<usize>,
    services: ServiceStats,
    counters: String,
    /// TCP segments in, segments that matched no socket (a frame on the wrong shard would), resets sent.
    tcp: (u64, u64, u64),
    tap: TapStats,
    arp_shared: u64,
    flows: std::collections::HashSet<FlowKey>,
}

pub fn run(a: Args, shards: u16) -> CmdResult {
    let Some(name) = a.link.strip_prefix("tap:") else {
        return Err(format!(
            "--shards needs a multi-queue TAP (--link tap:NAME), not {:?}",
            a.link
        )
        .into());
    };
    if a.pcap.is_some() {
        return Err("--pcap is not supported with --shards".into());
    }
    let (v4, addrs6) = serve::parse_addrs(&a.addr)?;
    // IPv6 only: the IPv4 side off (`StackConfig::addr` 0.0.0.0), as `serve` does.
    let (addr, prefix_len) = v4.unwrap_or((std::net::Ipv4Addr::UNSPECIFIED, 32));
    let mac = serve::parse_mac(&a.mac)?;
    if let Some(m) = a.mtu {
        if !(576..=65535).contains(&m) {
            return Err(format!("--mtu {m} out of range 576..65535").into());
        }
    }
    serve::install_signal_handlers()?;
    let n = usize::from(shards);
    let tap_cfg = TapConfig {
        offloads: !a.no_offloads,
        mtu: a.mtu,
        ..TapConfig::default()
    };
    let queues = Tap::open_queues(name, n, tap_cfg)
        .map_err(|e| format!("opening {n} queues of TAP {name} (IFF_MULTI_QUEUE): {e}"))?;
    let mtu = queues[0].mtu();
    let real = queues[0].name().to_string();
    let hub = Arc::new(IperfHub::new());
    let wakes: Vec<Arc<Wake>> = (0..n)
        .map(|_| Wake::new().map(Arc::new))
        .collect::<Result<_, _>>()?;
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| channel::<Vec<u8>>()).unzip();
    let mss = netfold::wire::tcp::ipv4_mss_for_mtu(mtu);
    let scfg = ServicesConfig {
        max_conns: a.max_conns.max(1),
        wall_clock: true,
        tcp: netfold::tcp::Config {
            mss,
            time_wait: netfold::time::Duration::from_secs(10),
            ..netfold::tcp::Config::default()
        },
        ..ServicesConfig::default()
    };
    let clock = Arc::new(Clock::new());
    let mut threads = Vec::new();
    for (k, (tap, inbox)) in queues.into_iter().zip(rxs).enumerate() {
        let dev = ShardDev {
            tap,
            inbox,
            wake: Arc::clone(&wakes[k]),
            peers: (0..n)
                .filter(|&j| j != k)
                .map(|j| (txs[j].clone(), Arc::clone(&wakes[j])))
                .collect(),
            arp_shared: 0,
            flows: Default::default(),
        };
        let mut stack = Stack::new(StackConfig {
            medium: dev.caps().medium,
            mac,
            addr,
            prefix_len,
            gateway: a.gateway,
            mtu,
            addrs6: addrs6.clone(),
            gateway6: a.gateway6,
            ..StackConfig::default()
        });
        let services = Services::bind(&mut stack, scfg.clone())?.with_hub(Arc::clone(&hub), k);
        let clock = Arc::clone(&clock);
        threads.push(std::thread::spawn(move || {
            shard_main(k, dev, stack, services, &clock)
        }));
    }
    drop(txs);
    let v4_shown = match v4 {
        Some((a, p)) => format!("{a}/{p}"),
        None => "IPv6 only".into(),
    };
    println!(
        "netfold serve: {v4_shown} on tap {real} (mtu {mtu}, offloads {}), {n} shards \
         on {n} queues: echo 7/tcp+udp, discard 9, chargen 19, http 8080, iperf3 5201",
        if a.no_offloads { "off" } else { "on" },
    );
    if !addrs6.is_empty() {
        let list: Vec<String> = addrs6.iter().map(|c| c.to_string()).collect();
        println!(
            "netfold serve: ipv6 {} on every shard (TCP, UDP, ICMPv6 echo; usable after DAD)",
            list.join(", ")
        );
    }
    let _ = std::io::stdout().flush();
    let mut reports = Vec::new();
    for t in threads {
        reports.push(t.join().map_err(|_| "a shard thread panicked")?);
    }
    println!("netfold serve: stopping");
    // Every flow's received frames came through one queue: no flow may show up on two shards.
    let mut seen: std::collections::HashMap<FlowKey, usize> = Default::default();
    for r in &reports {
        for f in &r.flows {
            *seen.entry(*f).or_default() += 1;
        }
    }
    let split_flows = seen.values().filter(|&&n| n > 1).count();
    println!(
        "netfold serve: flows={} flows_on_two_shards={split_flows}",
        seen.len()
    );
    let mut total = ServiceStats::default();
    for (k, r) in reports.iter().enumerate() {
        let s = &r.services;
        println!(
            "shard {k}: cpu={} segments_in={} no_socket={} rst_out={} accepted={} iperf_tests={} \
             iperf_remote_streams={} iperf_bytes_in={} iperf_bytes_out={} rx_frames={} \
             tx_frames={} arp_shared={} flows={}",
            r.cpu.map_or("-".into(), |c| c.to_string()),
            r.tcp.0,
            r.tcp.1,
            r.tcp.2,
            s.accepted,
            s.iperf_tests,
            s.iperf_remote_streams,
            s.iperf_bytes_in,
            s.iperf_bytes_out,
            r.tap.rx_frames,
            r.tap.tx_frames,
            r.arp_shared,
            r.flows.len(),
        );
        total.accepted += s.accepted;
        total.iperf_tests += s.iperf_tests;
        total.iperf_completed += s.iperf_completed;
        total.iperf_failed += s.iperf_failed;
        total.iperf_denied += s.iperf_denied;
        total.iperf_bytes_in += s.iperf_bytes_in;
        total.iperf_bytes_out += s.iperf_bytes_out;
        total.iperf_remote_streams += s.iperf_remote_streams;
        total.echo_bytes += s.echo_bytes;
        total.discard_bytes += s.discard_bytes;
        total.chargen_bytes += s.chargen_bytes;
        total.http_requests += s.http_requests;
    }
    println!("{total}");
    for (k, r) in reports.iter().enumerate() {
        println!("shard {k} counters:");
        println!("{}", r.counters);
        print!("{}", serve::tap_table("tap", &r.tap));
    }
    let _ = std::io::stdout().flush();
    Ok(ExitCode::SUCCESS)
}

fn shard_main(
    k: usize,
    mut dev: ShardDev,
    mut stack: Stack,
    mut services: Services,
    clock: &Clock,
) -> ShardReport {
    let cpu = k % online_cpus();
    let pinned = pin_current_thread(cpu);
    let wait = |d: &ShardDev, t: Duration| {
        let _ = netfold_os::wait::wait_readable_any(
            &[d.tap.fd(), d.wake.0.as_raw_fd()],
            Some(std::time::Duration::from_micros(t.total_micros())),
        );
        d.wake.clear();
    };
    serve::serve_loop(&mut dev, wait, &mut stack, &mut services, clock);
    ShardReport {
        cpu: pinned.then_some(cpu),
        services: services.stats(),
        counters: format!("{}", stack.counters()),
        tcp: {
            let t = stack.tcp().stats();
            (t.segments_in, t.no_socket, t.rst_out)
        },
        tap: dev.tap.stats(),
        arp_shared: dev.arp_shared,
        flows: std::mem::take(&mut dev.flows),
    }
}
