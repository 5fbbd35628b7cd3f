//! `netfold serve`: runs a netfold stack on a TAP or TUN device (or a packet or AF_XDP socket
//! on an existing interface) with all services of
//! [`netfold_apps`] (echo 7 TCP+UDP, discard 9, chargen 19, HTTP 8080, iperf3 5201), until
//! SIGINT/SIGTERM; then prints the counters and exits 0.
//!
//! One thread: poll the stack, poll the services, and sleep in poll(2) on the link's descriptor
//! until a frame arrives or the next timer is due.
//!
//! `--addr` is repeatable and takes either family: at most one IPv4 address, and any IPv6
//! addresses, which turn the stack's IPv6 network layer on (NDP, ICMPv6 echo, fragments; the
//! services then listen on `[::]`, both families). Without an IPv4 address the stack is
//! IPv6 only (its IPv4 side off). The IPv6 addresses are printed at start, the link-local
//! one (added on a TAP) included.
//!
//! The link is a [`Link`] (TAP: Ethernet; TUN: bare IP, the stack then runs on the IP medium;
//! packet and AF_XDP sockets: Ethernet) with checksum offload and TSO/GRO across the boundary
//! (unless `--no-offloads`; AF_XDP has none, the stack sums and segments); with `--pcap` it is wrapped in a [`PcapWriter`], which fills in the
//! checksums the offload left to the kernel so the capture reads clean.

use super::CmdResult;
use clap::Parser;
use netfold::iface::{Stack, StackConfig};
use netfold::phy::Device;
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::EthernetAddress;
use netfold::wire::ipv6::Ipv6Cidr;
use netfold_apps::{Services, ServicesConfig};
use netfold_os::link::Link;
use netfold_os::pcap::{file_rotation, PcapMode, PcapWriter};
use netfold_os::tap::TapConfig;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser, Debug)]
pub struct Args {
    /// The link: `tap:NAME` or `tun:NAME` (attaches to TAP/TUN device NAME, creating it if it
    /// does not exist); `packet:IFNAME` (an AF_PACKET socket on an existing interface, e.g.
    /// one end of a veth); or `xdp:IFNAME[@QUEUE][:all]` (an AF_XDP socket on queue QUEUE,
    /// default 0, of an existing interface: an XDP program gives netfold the frames for its
    /// addresses and ARP/NDP for them, and the kernel everything else; `:all` gives netfold
    /// the whole queue). Over a veth, the kernel's end needs `ethtool -K PEER tx off`: XDP sees
    /// its frames before their checksums are complete.
    #[arg(long)]
    pub(super) link: String,
    /// Our address and prefix, e.g. 198.18.0.2/24; repeat it for more of either family: at
    /// most one IPv4 address, and IPv6 ones (e.g. 2001:2:0:1::2/64), which turn IPv6 on;
    /// IPv6 addresses alone serve IPv6 only.
    #[arg(long, required = true)]
    pub(super) addr: Vec<String>,
    /// Default gateway for off-link IPv4 peers.
    #[arg(long)]
    pub(super) gateway: Option<Ipv4Addr>,
    /// Default router for off-link IPv6 peers (its address on the link, e.g. fe80::1).
    #[arg(long)]
    pub(super) gateway6: Option<Ipv6Addr>,
    /// Write every frame sent and received to this pcap file (bounded: see --pcap-snaplen,
    /// --pcap-max-size, --pcap-files).
    #[arg(long)]
    pub(super) pcap: Option<std::path::PathBuf>,
    /// Bytes of each frame kept in the capture (longer frames are cut; their original length
    /// is kept). The default is tcpdump's: it holds a whole 64 KiB TSO/GRO super-segment, which
    /// is what crosses the TAP with offloads on, so nothing is lost by default; the size cap,
    /// not the snap length, is what bounds the disk.
    #[arg(long, default_value_t = netfold_os::pcap::DEFAULT_SNAPLEN)]
    pcap_snaplen: u32,
    /// Largest size of one capture file (e.g. 100M, 1G, 64MiB, or bytes); when the next
    /// record would pass it, the capture moves to the next file (FILE, FILE1, FILE2, ... like
    /// tcpdump -C).
    #[arg(long, default_value = "100M", value_parser = parse_size)]
    pcap_max_size: u64,
    /// Capture files kept in rotation; after the last, the first is overwritten (tcpdump -W).
    /// The disk used is at most this times --pcap-max-size (default 1 GB).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pcap_files: u32,
    /// IP MTU (default: the TAP interface's).
    #[arg(long)]
    pub(super) mtu: Option<usize>,
    /// Do not offload checksums and TCP segmentation to the kernel across the TAP.
    #[arg(long)]
    pub(super) no_offloads: bool,
    /// Our MAC address (default: a locally administered one).
    #[arg(long, default_value = "02:6e:66:00:00:02")]
    pub(super) mac: String,
    /// Most connections served at once. Memory is bounded by --mem-budget, not by this
    /// count: an idle connection costs little, and under pressure the connections that hold
    /// buffers without progress (zero-window holds, orphans) are reset first.
    #[arg(long, default_value_t = 8192)]
    pub(super) max_conns: usize,
    /// Socket-buffer budget in MiB (Linux's tcp_mem; with --shards, split among the shards):
    /// buffers grow no further once all connections hold this much, and connections that hold memory without progress are
    /// reset until 7/8 of it is in use.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(8..=65536))]
    pub(super) mem_budget: u64,
    /// Reset a connection that moved no byte in either direction for this many seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub(super) idle_timeout: u64,
    /// Shards: opens N queues of a multi-queue TAP (`IFF_MULTI_QUEUE`), or with
    /// `--link xdp:IFNAME[:all]` one AF_XDP socket on each of the interface's queues 0..N
    /// (it needs at least N receive queues: `ethtool -l`; a veth made with `numrxqueues N
    /// numtxqueues N`), and runs one stack per queue, each with its own services and
    /// listeners on every port, on its own thread pinned to CPU k (mod the CPUs). The kernel
    /// (or the NIC's RSS) picks the queue of each flow; the shard that owns the queue a
    /// connection's SYN arrived on owns the connection. Given (even as 1), the TAP is opened
    /// multi-queue; absent, `serve` runs one stack on one thread over a plain TAP or TUN.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(super) shards: Option<u16>,
    /// At exit, print every counter (the services', the stack's by layer, SYN cookies', the
    /// device's) instead of the short summary.
    #[arg(long)]
    pub(super) counters: bool,
}

/// The addresses the stack answers on, for an AF_XDP link's filter: the IPv4 one (unless
/// IPv4 is off), the IPv6 ones, and with IPv6 on, the link-local address the stack adds
/// from its MAC (RFC 4291 §2.5.6 with the modified EUI-64).
pub(super) fn local_addrs(v4: Ipv4Addr, v6: &[Ipv6Cidr], mac: EthernetAddress) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    if !v4.is_unspecified() {
        out.push(v4.into());
    }
    out.extend(v6.iter().map(|c| IpAddr::V6(c.addr())));
    if !v6.is_empty() {
        let ll = netfold::wire::ipv6::link_local(mac.ipv6_interface_id());
        if !out.contains(&IpAddr::V6(ll)) {
            out.push(ll.into());
        }
    }
    out
}

/// What opening the device failed with, and what it needs when that is a permission or a
/// missing device.
pub(super) fn open_error(link: &str, e: &std::io::Error) -> String {
    let tuntap = link.starts_with("tap:") || link.starts_with("tun:");
    let need = match e.raw_os_error() {
        // AF_XDP errors say what they need themselves.
        Some(libc::EPERM | libc::EACCES) if link.starts_with("packet:") => {
            Some("a packet socket needs root or CAP_NET_RAW".into())
        }
        Some(libc::EPERM | libc::EACCES) if tuntap => Some(format!(
            "opening a TAP or TUN device needs root or CAP_NET_ADMIN (e.g. `sudo netfold \
             serve ...`, or `sudo setcap cap_net_admin+ep {}`), or a persistent device \
             made for your user (`sudo ip tuntap add {} mode {} user $USER`)",
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "netfold".into()),
            link.split_once(':').map_or(link, |(_, n)| n),
            link.split_once(':').map_or("tap", |(k, _)| k),
        )),
        Some(libc::ENOENT | libc::ENODEV) if tuntap => {
            Some("the kernel's TUN/TAP driver (/dev/net/tun) is needed".into())
        }
        _ => None,
    };
    match need {
        Some(n) => format!("opening {link}: {e}: {n}"),
        None => format!("opening {link}: {e}"),
    }
}

/// The exit summary: connections, bytes, drops, retransmits and iperf3 tests, a handful of
/// lines (`--counters` prints every counter instead).
pub(super) fn summary(
    s: &netfold_apps::ServiceStats,
    c: &netfold::iface::Counters,
    dev: &netfold_os::tap::TapStats,
) -> String {
    let t = &c.tcp;
    let malformed = c.eth_malformed
        + c.arp_malformed
        + c.ipv4_bad_checksum
        + c.ipv4_malformed
        + c.icmp_bad_checksum
        + c.icmp_malformed
        + c.ipv6_malformed
        + c.icmpv6_bad_checksum
        + c.icmpv6_malformed
        + c.udp_bad_checksum
        + c.udp_malformed
        + c.tcp_bad_checksum
        + c.tcp_malformed;
    let queue_full = c.tx_queue_full + c.udp_queue_full + t.backlog_drops + s.udp_echo_dropped;
    let unresolved = c.arp_unresolved_drops + c.ndp_unresolved_drops;
    let fragments = c.frag_dropped + c.frag6_dropped;
    format!(
        "connections  {} accepted, {} refused (server full), {} timed out, {} ended by an error\n\
         bytes        TCP payload {} in, {} out; link {} frames ({} bytes) in, {} frames ({} bytes) out\n\
         drops        {malformed} malformed or bad checksum, {queue_full} on a full queue, \
         {unresolved} to unresolved neighbours, {fragments} fragments, {} at the device\n\
         retransmits  {} fast, {} on timeout\n\
         iperf3       {} tests: {} completed, {} failed ({} UDP/SCTP refused: TCP only), {} turned away busy\n\
         (every counter: --counters)\n",
        s.accepted,
        s.refused_full,
        s.timeouts,
        s.errors,
        t.app_bytes_received,
        t.app_bytes_sent,
        c.frames_in,
        c.bytes_in,
        c.frames_out,
        c.bytes_out,
        dev.tx_dropped + dev.rx_errors,
        t.retransmits_fast,
        t.retransmits_rto,
        s.iperf_tests,
        s.iperf_completed,
        s.iperf_failed,
        s.iperf_refused_not_tcp,
        s.iperf_denied,
    )
}

pub(super) static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Installs SIGINT/SIGTERM handlers that set [`STOP`]. No SA_RESTART, so a poll(2) in progress
/// returns EINTR at once.
pub(super) fn install_signal_handlers() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is zero-initialisable plain data; we set a handler that only does an
        // atomic store, an empty mask, and pass valid pointers to a live local.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

pub(super) fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC address {s:?}"));
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC address {s:?}"))?;
    }
    if m[0] & 1 != 0 {
        return Err(format!("{s} is a multicast address"));
    }
    Ok(EthernetAddress(m))
}

/// A size: bytes, or a number with a decimal (k, M, G: powers of 1000, as tcpdump -C counts)
/// or binary (KiB, MiB, GiB) suffix; a trailing `B` is allowed (`100MB`).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("bad size {s:?}"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "k" | "K" | "kB" | "KB" => 1_000,
        "M" | "MB" => 1_000_000,
        "G" | "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("bad size unit {other:?} in {s:?}")),
    };
    n.checked_mul(mult)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("bad size {s:?}"))
}

/// ADDR/PREFIX. The prefix is required: a guessed one silently decides which peers are on-link.
pub fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let Some((a, p)) = s.split_once('/') else {
        return Err(format!(
            "--addr {s:?} has no prefix length: write ADDR/PREFIX, e.g. {s}/24 (the prefix \
             decides which peers are on the link and which go via --gateway)"
        ));
    };
    let addr: Ipv4Addr = a.parse().map_err(|_| format!("bad address {a:?}"))?;
    let prefix: u8 = p
        .parse()
        .ok()
        .filter(|&p| p <= 32)
        .ok_or_else(|| format!("bad prefix length {p:?}"))?;
    Ok((addr, prefix))
}

/// ADDR/PREFIX of either family (the prefix at most 32 or 128 bits).
pub fn parse_cidr_any(s: &str) -> Result<(IpAddr, u8), String> {
    let Some((a, p)) = s.split_once('/') else {
        return Err(format!(
            "--addr {s:?} has no prefix length: write ADDR/PREFIX, e.g. {s}/24 or {s}/64 (the \
             prefix decides which peers are on the link and which go via a gateway)"
        ));
    };
    let addr: IpAddr = a.parse().map_err(|_| format!("bad address {a:?}"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = p
        .parse()
        .ok()
        .filter(|&p| p <= max)
        .ok_or_else(|| format!("bad prefix length {p:?}"))?;
    Ok((addr, prefix))
}

/// What `--addr` gave: the IPv4 address and prefix (if any), and the IPv6 addresses.
pub type Addrs = (Option<(Ipv4Addr, u8)>, Vec<Ipv6Cidr>);

/// The `--addr` list: at most one IPv4 address with its prefix (none: IPv6 only, the stack's
/// IPv4 address 0.0.0.0, which turns IPv4 off), and every IPv6 one; at least one address.
pub fn parse_addrs(list: &[String]) -> Result<Addrs, String> {
    let mut v4 = None;
    let mut v6 = Vec::new();
    for s in list {
        match parse_cidr_any(s)? {
            (IpAddr::V4(a), p) => {
                if v4.replace((a, p)).is_some() {
                    return Err("--addr: one IPv4 address only".into());
                }
            }
            (IpAddr::V6(a), p) => {
                if a.is_multicast() || a.is_unspecified() || a.is_loopback() {
                    return Err(format!("--addr {s}: not a unicast address"));
                }
                v6.extend(Ipv6Cidr::new(a, p));
            }
        }
    }
    if v4.is_none() && v6.is_empty() {
        return Err(
            "--addr: give at least one address, e.g. --addr 198.18.0.2/24 \
                    --addr 2001:2:0:1::2/64"
                .into(),
        );
    }
    Ok((v4, v6))
}

/// The stack's IPv6 addresses as `serve` prints them: `2001:2:0:1::2/64, fe80::.../64`.
pub(super) fn ipv6_line(stack: &Stack) -> Option<String> {
    let list: Vec<String> = stack.ipv6_addrs().map(|(c, _)| c.to_string()).collect();
    (!list.is_empty()).then(|| list.join(", "))
}

/// The stack's clock: microseconds since the Unix epoch (so pcap timestamps are wall time),
/// advancing monotonically.
pub(super) struct Clock {
    base: u64,
    start: std::time::Instant,
}

impl Clock {
    pub(super) fn new() -> Clock {
        let base = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Clock {
            base,
            start: std::time::Instant::now(),
        }
    }
    pub(super) fn now(&self) -> Instant {
        Instant::from_micros(self.base + self.start.elapsed().as_micros() as u64)
    }
}

/// Polls stack and services until SIGINT/SIGTERM. After an empty poll it backs off as every
/// other netfold polling thread does (`netfold_rt::backoff`: yield for the 50 us busy-poll
/// budget, sleep at once on a core taken by a hog), then `wait` sleeps until the device is
/// readable or the timeout passes: a frame that comes within the budget costs no poll(2).
pub(super) fn serve_loop<D: Device>(
    dev: &mut D,
    wait: impl Fn(&D, Duration),
    stack: &mut Stack,
    services: &mut Services,
    clock: &Clock,
) {
    let mut backoff = netfold_rt::backoff::Backoff::default();
    while !STOP.load(Ordering::SeqCst) {
        let now = clock.now();
        let mut did = stack.poll(now, dev);
        did |= services.poll(stack, now);
        if did {
            backoff.worked();
            continue;
        }
        let step = backoff.idle(now);
        if backoff.pause(step) {
            continue;
        }
        // The sleep below ends the idle run: after it, a fresh busy-poll budget.
        backoff.worked();
        let next = [stack.poll_at(now), services.poll_at(now)]
            .into_iter()
            .flatten()
            .min();
        // Bounded so a lost wake-up costs at most half a second; signals interrupt poll(2).
        let t = match next {
            Some(at) => (at - now).min(Duration::from_millis(500)),
            None => Duration::from_millis(500),
        };
        if t > Duration::ZERO {
            wait(dev, t);
        }
    }
    // Tell clients we are going: iperf3 gets SERVER_TERMINATE while its streams are still
    // drained (so it reads that before any reset), then everything is reset; both given time
    // to reach the wire.
    services.begin_shutdown(stack);
    for (grace, graceful) in [
        (Duration::from_millis(200), true),
        (Duration::from_millis(50), false),
    ] {
        if !graceful {
            services.shutdown(stack);
        }
        let until = clock.now() + grace;
        while clock.now() < until {
            let now = clock.now();
            let mut did = stack.poll(now, dev);
            if graceful {
                did |= services.poll(stack, now);
            }
            if !did {
                wait(dev, Duration::from_millis(5));
            }
        }
    }
}

pub fn run(a: Args) -> CmdResult {
    if let Some(n) = a.shards {
        return super::serve_shards::run(a, n);
    }
    if !["tap:", "tun:", "packet:", "xdp:"]
        .iter()
        .any(|p| a.link.starts_with(p))
    {
        return Err(format!(
            "--link {:?}: expected tap:NAME, tun:NAME, packet:IFNAME or xdp:IFNAME[@QUEUE][:all]",
            a.link
        )
        .into());
    }
    let (v4, addrs6) = parse_addrs(&a.addr)?;
    // IPv6 only: the stack's IPv4 side off (`StackConfig::addr` 0.0.0.0).
    let (addr, prefix_len) = v4.unwrap_or((Ipv4Addr::UNSPECIFIED, 32));
    let mac = parse_mac(&a.mac)?;
    if let Some(m) = a.mtu {
        if !(576..=65535).contains(&m) {
            return Err(format!("--mtu {m} out of range 576..65535").into());
        }
    }
    install_signal_handlers()?;
    let tap_cfg = TapConfig {
        offloads: !a.no_offloads,
        mtu: a.mtu,
        ..TapConfig::default()
    };
    let local = local_addrs(addr, &addrs6, mac);
    let mut link = Link::open_for(&a.link, tap_cfg, &local).map_err(|e| open_error(&a.link, &e))?;
    let mtu = link.mtu();

    let mut stack = Stack::new(StackConfig {
        medium: link.caps().medium,
        mac,
        addr,
        prefix_len,
        gateway: a.gateway,
        mtu,
        addrs6,
        gateway6: a.gateway6,
        tcp_buffer_budget: mem_budget_bytes(a.mem_budget),
        // tcp_secret: the default, a random key from the OS (RFC 6528 §3).
        ..StackConfig::default()
    });
    let mss = netfold::wire::tcp::ipv4_mss_for_mtu(mtu);
    let cfg = ServicesConfig {
        max_conns: a.max_conns.max(1),
        idle_timeout: netfold::time::Duration::from_secs(a.idle_timeout),
        // The clock below counts from the Unix epoch, so HTTP can send Date.
        wall_clock: true,
        tcp: netfold::tcp::Config {
            mss,
            time_wait: netfold::time::Duration::from_secs(10),
            ..netfold::tcp::Config::default()
        },
        ..ServicesConfig::default()
    };
    let mut services = Services::bind(&mut stack, cfg)?;
    let clock = Clock::new();

    let v4_shown = match v4 {
        Some((a, p)) => format!("{a}/{p}"),
        None => "IPv6 only".into(),
    };
    println!(
        "netfold serve: {v4_shown} on {} (mtu {mtu}, offloads {}): echo 7/tcp+udp, \
         discard 9, chargen 19, http 8080, iperf3 5201 (TCP tests)",
        link.describe(),
        if a.no_offloads || matches!(link, Link::Xdp(_)) {
            "off"
        } else {
            "on"
        },
    );
    if let Some(l) = ipv6_line(&stack) {
        // Tentative until Duplicate Address Detection (RFC 4862 §5.4) passes, about a second.
        println!("netfold serve: ipv6 {l} (TCP, UDP, ICMPv6 echo; usable after DAD)");
    }
    let _ = std::io::stdout().flush();

    let mut pcap_records = None;
    match &a.pcap {
        Some(path) => {
            let rotation = file_rotation(path, a.pcap_max_size, a.pcap_files);
            let mut dev = PcapWriter::with_rotation(link, PcapMode::Both, a.pcap_snaplen, rotation)
                .map_err(|e| format!("--pcap {}: {e}", path.display()))?;
            let wait = |d: &PcapWriter<Link, _>, t: Duration| {
                let _ = d.inner().wait(Some(t));
            };
            serve_loop(&mut dev, wait, &mut stack, &mut services, &clock);
            dev.flush()?;
            pcap_records = Some((dev.records(), dev.write_errors(), dev.rotations()));
            let (l, _) = dev.into_parts();
            link = l;
        }
        None => {
            let wait = |d: &Link, t: Duration| {
                let _ = d.wait(Some(t));
            };
            serve_loop(&mut link, wait, &mut stack, &mut services, &clock);
        }
    }

    println!("netfold serve: stopping");
    if !a.counters {
        print!(
            "{}",
            summary(&services.stats(), &stack.counters(), &link.stats())
        );
    } else {
        println!("{}", services.stats());
        println!("{}", stack.counters());
        // SYN cookies (RFC 4987 §3.6): how the listeners rode out SYN queue overflows.
        let t = stack.tcp().stats();
        for (name, v) in [
            ("sent", t.syncookies_sent),
            ("recv", t.syncookies_recv),
            ("failed", t.syncookies_failed),
        ] {
            println!("{:<5} {name:<28} {v:>12}", "cookie");
        }
        print!("{}", tap_table(link.kind(), &link.stats()));
    }
    if let Some((records, errors, rotations)) = pcap_records {
        println!("pcap: records={records} write_errors={errors} rotations={rotations}");
    }
    let _ = std::io::stdout().flush();
    Ok(ExitCode::SUCCESS)
}

/// The TAP device's statistics as a table in the style of the stack's counters: one line per
/// counter, group, name and value.
/// The device's counters as a table, rows prefixed with the link kind (`tap`, `tun`).
pub(super) fn tap_table(kind: &str, t: &netfold_os::tap::TapStats) -> String {
    let o = &t.offload;
    let rows: [(&str, u64); 16] = [
        ("rx_frames", t.rx_frames),
        ("rx_bytes", t.rx_bytes),
        ("rx_errors", t.rx_errors),
        ("tx_frames", t.tx_frames),
        ("tx_bytes", t.tx_bytes),
        ("tx_dropped", t.tx_dropped),
        ("rx_csum_partial", o.rx_csum_partial),
        ("rx_csum_valid", o.rx_csum_valid),
        ("rx_csum_verified", o.rx_csum_verified),
        ("rx_bad_checksum", o.rx_bad_checksum),
        ("rx_malformed", o.rx_malformed),
        ("rx_gso_frames", o.rx_gso_frames),
        ("rx_gso_split_segments", o.rx_gso_split_segments),
        ("tx_csum_partial", o.tx_csum_partial),
        ("tx_csum_software", o.tx_csum_software),
        ("tx_gso_frames", o.tx_gso_frames),
    ];
    let mut out = String::new();
    for (name, v) in rows {
        out.push_str(&format!("{kind:<5} {name:<28} {v:>12}\n"));
    }
    out
}

/// `--mem-budget` (MiB) in bytes.
pub(super) fn mem_budget_bytes(mib: u64) -> usize {
    usize::try_from(mib << 20).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses() {
        assert_eq!(
            parse_cidr("198.18.0.2/24"),
            Ok((Ipv4Addr::new(198, 18, 0, 2), 24))
        );
        assert!(parse_cidr("198.18.0.2/33").is_err());
        assert!(parse_cidr("x/24").is_err());
        // No prefix: an error that shows the fix, not a silent /24.
        let e = parse_cidr("198.18.0.2").unwrap_err();
        assert!(e.contains("198.18.0.2/24"), "{e}");
        assert_eq!(
            parse_mac("02:6e:66:00:00:02").map(|m| m.0),
            Ok([2, 0x6e, 0x66, 0, 0, 2])
        );
        assert!(parse_mac("01:00:00:00:00:00").is_err());
        // Either family; exactly one IPv4 address.
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let (a4, a6) = parse_addrs(&v(&["2001:2:0:1::2/64", "198.18.0.2/24"])).unwrap();
        assert_eq!(a4, Some((Ipv4Addr::new(198, 18, 0, 2), 24)));
        assert_eq!(
            a6,
            vec![Ipv6Cidr::new("2001:2:0:1::2".parse().unwrap(), 64).unwrap()]
        );
        // IPv6 only; nothing at all is an error.
        let (a4, a6) = parse_addrs(&v(&["2001:2::2/64"])).unwrap();
        assert_eq!((a4, a6.len()), (None, 1));
        assert!(parse_addrs(&[]).is_err());
        assert!(parse_addrs(&v(&["198.18.0.2/24", "198.18.0.3/24"])).is_err());
        assert!(parse_addrs(&v(&["198.18.0.2/24", "2001:2::2/129"])).is_err());
        assert!(parse_addrs(&v(&["198.18.0.2/24", "ff02::1/64"])).is_err());
        assert!(parse_cidr_any("2001:2::2").unwrap_err().contains("/64"));
        assert!(parse_mac("02:00").is_err());
    }

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("100M"), Ok(100_000_000));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1_000_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2k"), Ok(2000));
        for bad in ["", "M", "0", "12X", "-1M", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tap_statistics_print_as_a_table() {
        let t = netfold_os::tap::TapStats {
            rx_frames: 7,
            tx_bytes: 1234,
            ..Default::default()
        };
        let s = tap_table("tap", &t);
        assert!(!s.contains('{') && !s.contains("TapStats"), "{s}");
        let line = s.lines().find(|l| l.contains("rx_frames")).unwrap();
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            ["tap", "rx_frames", "7"]
        );
        assert!(s
            .lines()
            .any(|l| l.split_whitespace().last() == Some("1234")));
        assert_eq!(s.lines().count(), 16);
    }
}
