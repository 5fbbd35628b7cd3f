//! `netfold serve --shards N`: one netfold stack per queue of a multi-queue TAP, or of an
//! interface's AF_XDP queues (`--link xdp:IFNAME`, below).
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
//! Shared between shards, off the data path: ARP and IPv6 Neighbor Discovery, which the
//! queues of [`netfold_os::mqtap`] copy to each other (a frame without a flow lands on one
//! queue, but every shard's neighbour table needs the kernel's address; see there), and the
//! iperf3 test (its control and data connections are different flows:
//! [`netfold_apps::hub`]). IPv6 flows are steered like IPv4 ones: the kernel's flow hash
//! covers the IPv6 addresses and ports. Each shard runs Duplicate Address Detection for the
//! same addresses on its own; their solicitations are never copied to each other (only what
//! the kernel sends is), so they do not see each other as duplicates.
//!
//! Over `xdp:IFNAME` shard `k` owns the AF_XDP socket of the interface's queue `k`
//! ([`netfold_os::xdpmq`]): the interface must have at least N receive queues (a typed
//! error says how many it has). Which queue a frame arrives on is the driver's choice (a
//! NIC's RSS; on a veth, the queue the peer transmitted on, which the kernel keeps per
//! flow), so a connection the peer opens stays with the shard its SYN reached. ARP and NDP
//! are shared between the queues as on the TAP.

use super::serve::{self, Args, Clock};
use super::CmdResult;
use crate::bench::affinity::{online_cpus, pin_current_thread};
use netfold::iface::{Stack, StackConfig};
use netfold::phy::Device;
use netfold::time::Duration;
use netfold_apps::hub::IperfHub;
use netfold_apps::{ServiceStats, Services, ServicesConfig};
use netfold_os::mqtap::{self, FlowRecord, TapQueue};
use netfold_os::tap::{TapConfig, TapStats};
use netfold_os::xdp::XdpConfig;
use netfold_os::xdpmq::XdpQueue;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// Flows a shard records (to check afterwards that no flow reached two shards); past this
/// many the record stops growing, so a long-running server's memory stays bounded.
const FLOW_RECORD: usize = 1 << 16;

/// What a shard reports when it stops.
struct ShardReport {
    cpu: Option<usize>,
    services: ServiceStats,
    counters: String,
    /// TCP segments in, segments that matched no socket (a frame on the wrong shard would), resets sent.
    tcp: (u64, u64, u64),
    tap: TapStats,
    arp_shared: u64,
    /// Frames that arrived on this queue and were handed to the shard of their hash, and
    /// those dropped because its inbox was full.
    steered: (u64, u64),
    flows: FlowRecord,
}

/// A shard's device: a TAP queue or an AF_XDP queue.
trait ShardDevice: Device + Send + 'static {
    /// The device's counters in the TAP's shape.
    fn link_stats(&self) -> TapStats;
    /// Neighbour frames copied to the other queues.
    fn shared(&self) -> u64;
    /// Frames handed to another queue's shard by software steering, and those dropped
    /// because its inbox was full.
    fn steered(&self) -> (u64, u64) {
        (0, 0)
    }
}

impl ShardDevice for TapQueue {
    fn link_stats(&self) -> TapStats {
        self.tap().stats()
    }
    fn shared(&self) -> u64 {
        TapQueue::shared(self)
    }
}

impl ShardDevice for XdpQueue {
    fn link_stats(&self) -> TapStats {
        // As `Link::stats` shows a single socket's.
        let s = self.socket().stats();
        TapStats {
            rx_frames: s.rx_frames,
            rx_bytes: s.rx_bytes,
            rx_errors: s.rx_bad_desc,
            tx_frames: s.tx_frames,
            tx_bytes: s.tx_bytes,
            tx_dropped: s.tx_dropped,
            offload: Default::default(),
        }
    }
    fn shared(&self) -> u64 {
        XdpQueue::shared(self)
    }
    fn steered(&self) -> (u64, u64) {
        (XdpQueue::steered(self), self.steer_dropped())
    }
}

pub fn run(a: Args, shards: u16) -> CmdResult {
    if let Some(rest) = a.link.strip_prefix("xdp:") {
        return run_xdp(&a, shards, rest);
    }
    let Some(name) = a.link.strip_prefix("tap:") else {
        return Err(format!(
            "--shards needs a multi-queue TAP (--link tap:NAME) or an AF_XDP interface \
             (--link xdp:IFNAME), not {:?}",
            a.link
        )
        .into());
    };
    check_args(&a)?;
    let n = usize::from(shards);
    let tap_cfg = TapConfig {
        offloads: !a.no_offloads,
        mtu: a.mtu,
        ..TapConfig::default()
    };
    let mut queues = mqtap::open_queues(name, n, tap_cfg).map_err(|e| {
        format!(
            "{} ({n} queues, IFF_MULTI_QUEUE)",
            serve::open_error(&a.link, &e)
        )
    })?;
    let mtu = queues[0].tap().mtu();
    let real = queues[0].tap().name().to_string();
    // Which steering is in force: the eBPF Toeplitz program, or the kernel's automq and why.
    let steering = queues[0].steering().to_string();
    let flows: Vec<FlowRecord> = queues
        .iter_mut()
        .map(|q| q.record_flows(FLOW_RECORD))
        .collect();
    let offloads = if a.no_offloads { "off" } else { "on" };
    serve_shards(
        &a,
        "tap",
        queues,
        Some(flows),
        mtu,
        &format!("tap {real} (mtu {mtu}, offloads {offloads})"),
        &steering,
    )
}

/// What every kind of shard link refuses.
fn check_args(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if a.pcap.is_some() {
        return Err("--pcap is not supported with --shards".into());
    }
    if let Some(m) = a.mtu {
        if !(576..=65535).contains(&m) {
            return Err(format!("--mtu {m} out of range 576..65535").into());
        }
    }
    Ok(())
}

/// `--link xdp:IFNAME[:all] --shards N`: one AF_XDP socket per queue `0..N`.
fn run_xdp(a: &Args, shards: u16, rest: &str) -> CmdResult {
    let x = netfold_os::link::parse_xdp(rest)?;
    if rest.contains('@') {
        return Err(format!(
            "--link {:?}: with --shards every queue 0..{shards} is used; name no queue",
            a.link
        )
        .into());
    }
    check_args(a)?;
    let (v4, addrs6) = serve::parse_addrs(&a.addr)?;
    let addr = v4.map_or(std::net::Ipv4Addr::UNSPECIFIED, |(a, _)| a);
    let mac = serve::parse_mac(&a.mac)?;
    let local = serve::local_addrs(addr, &addrs6, mac);
    let base = if x.all {
        XdpConfig::all()
    } else {
        XdpConfig::local(&local)
    };
    let cfg = XdpConfig { mtu: a.mtu, ..base };
    let queues = netfold_os::xdpmq::open_queues(&x.ifname, u32::from(shards), cfg)
        .map_err(|e| format!("--link {}: {e}", a.link))?;
    let mtu = queues[0].socket().mtu();
    let modes: Vec<String> = queues.iter().map(|q| q.socket().describe()).collect();
    let queues_steer = queues[0].rss().is_some();
    serve_shards(
        a,
        "xdp",
        queues,
        None,
        mtu,
        &format!("{} (mtu {mtu})", modes.join("; ")),
        if queues_steer {
            "software Toeplitz (RSS) over the queues, Microsoft's key: a frame that arrives on \
             another queue than its 4-tuple's hash is handed to that queue's shard"
        } else {
            "one queue: nothing to steer"
        },
    )
}

/// Runs one shard per device of `queues` until SIGINT/SIGTERM, then prints the report.
fn serve_shards<D: ShardDevice>(
    a: &Args,
    link_kind: &str,
    queues: Vec<D>,
    flows: Option<Vec<FlowRecord>>,
    mtu: usize,
    link_shown: &str,
    steering: &str,
) -> CmdResult {
    let (v4, addrs6) = serve::parse_addrs(&a.addr)?;
    // IPv6 only: the IPv4 side off (`StackConfig::addr` 0.0.0.0), as `serve` does.
    let (addr, prefix_len) = v4.unwrap_or((std::net::Ipv4Addr::UNSPECIFIED, 32));
    let mac = serve::parse_mac(&a.mac)?;
    serve::install_signal_handlers()?;
    let n = queues.len();
    let record = flows.is_some();
    let mut flows = flows.unwrap_or_default().into_iter();
    let hub = Arc::new(IperfHub::new());
    let mss = netfold::wire::tcp::ipv4_mss_for_mtu(mtu);
    let scfg = ServicesConfig {
        max_conns: a.max_conns.max(1),
        idle_timeout: netfold::time::Duration::from_secs(a.idle_timeout),
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
    for (k, dev) in queues.into_iter().enumerate() {
        let flows = flows.next().unwrap_or_default();
        let mut stack = Stack::new(StackConfig {
            medium: dev.caps().medium,
            mac,
            addr,
            prefix_len,
            gateway: a.gateway,
            mtu,
            addrs6: addrs6.clone(),
            gateway6: a.gateway6,
            // Each shard is a stack with its own budget: the total is split among them.
            tcp_buffer_budget: serve::mem_budget_bytes(a.mem_budget) / n,
            ..StackConfig::default()
        });
        let services = Services::bind(&mut stack, scfg.clone())?.with_hub(Arc::clone(&hub), k);
        let clock = Arc::clone(&clock);
        threads.push(std::thread::spawn(move || {
            shard_main(k, dev, flows, stack, services, &clock)
        }));
    }
    let v4_shown = match v4 {
        Some((a, p)) => format!("{a}/{p}"),
        None => "IPv6 only".into(),
    };
    println!(
        "netfold serve: {v4_shown} on {link_shown}, {n} shards on {n} queues: echo \
         7/tcp+udp, discard 9, chargen 19, http 8080, iperf3 5201 (TCP tests)",
    );
    println!("netfold serve: queue steering: {steering}");
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
    let records: Vec<FlowRecord> = reports.iter().map(|r| r.flows.clone()).collect();
    if record {
        let (flows, split_flows) = mqtap::flows_on_two_queues(&records);
        println!("netfold serve: flows={flows} flows_on_two_shards={split_flows}");
    }
    let mut total = ServiceStats::default();
    for (k, r) in reports.iter().enumerate() {
        let s = &r.services;
        println!(
            "shard {k}: cpu={} segments_in={} no_socket={} rst_out={} accepted={} iperf_tests={} \
             iperf_remote_streams={} iperf_bytes_in={} iperf_bytes_out={} rx_frames={} \
             tx_frames={} arp_shared={} steered={} steer_dropped={} flows={}",
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
            r.steered.0,
            r.steered.1,
            r.flows.len(),
        );
        total.accepted += s.accepted;
        total.iperf_tests += s.iperf_tests;
        total.iperf_completed += s.iperf_completed;
        total.iperf_failed += s.iperf_failed;
        total.iperf_refused_not_tcp += s.iperf_refused_not_tcp;
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
    if !a.counters {
        println!("(every counter of every shard: --counters)");
    }
    for (k, r) in reports.iter().enumerate().filter(|_| a.counters) {
        println!("shard {k} counters:");
        println!("{}", r.counters);
        print!("{}", serve::tap_table(link_kind, &r.tap));
    }
    let _ = std::io::stdout().flush();
    Ok(ExitCode::SUCCESS)
}

fn shard_main<D: ShardDevice>(
    k: usize,
    mut dev: D,
    flows: FlowRecord,
    mut stack: Stack,
    mut services: Services,
    clock: &Clock,
) -> ShardReport {
    let cpu = k % online_cpus();
    let pinned = pin_current_thread(cpu);
    // The queue's descriptor covers its TAP queue and the neighbour frames other shards hand
    // it (`netfold_os::mqtap`).
    let wait = |d: &D, t: Duration| {
        if let Some(fd) = d.readable_fd() {
            let _ = netfold_os::wait::wait_readable_any(
                &[fd],
                Some(std::time::Duration::from_micros(t.total_micros())),
            );
        }
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
        tap: dev.link_stats(),
        arp_shared: dev.shared(),
        steered: dev.steered(),
        flows,
    }
}
