//! The netperf-style tests (`stream`, `maerts`, `rr`, `crr`, `udp-stream`): shared options, the
//! sweep over stacks x message sizes, iterations until the confidence interval is met, CPU
//! figures, and output.

use super::CmdResult;
use crate::bench::report::{self, mbps, Row};
use crate::bench::stats::{self, Iterations};
use crate::bench::units::{parse_fraction, parse_size, parse_size_list};
use crate::bench::{
    kernel, netfold_pipe, smoltcp_pipe, Family, Impair, Measurement, Params, Pin, ReadPath, Test,
};
use std::process::ExitCode;

/// Which stack a run measures.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackKind {
    Netfold,
    Kernel,
    Smoltcp,
}

impl StackKind {
    pub fn name(self) -> &'static str {
        match self {
            StackKind::Netfold => "netfold",
            StackKind::Kernel => "kernel",
            StackKind::Smoltcp => "smoltcp",
        }
    }
}

/// netfold's copy/checksum data path.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CopyMode {
    #[default]
    Netfold,
    Baseline,
}

/// netfold's send path (`--zerocopy`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroCopy {
    /// Copying writes (the default).
    #[default]
    Off,
    /// Zero-copy send: the sender lends its messages to the stack.
    On,
    /// Each netfold row measured both ways in turn, with the zero-copy/copy ratio.
    Both,
}

/// Where a run's two ends execute (`--placement`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Both ends share one CPU.
    #[value(name = "1cpu")]
    OneCpu,
    /// One CPU per end.
    #[value(name = "2cpu")]
    TwoCpus,
}

/// A switch written `on` or `off` on the command line (`--gro on`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnOff {
    #[default]
    On,
    Off,
}

/// Which link each stack runs over.
///
/// | --link | netfold | smoltcp | kernel |
/// |---|---|---|---|
/// | auto (default) | in-memory pipe | in-memory pipe | loopback |
/// | lo | - | - | loopback |
/// | veth | - | - | veth pair between two namespaces |
/// | tap | TAP device, the kernel as peer in a namespace | same, via smoltcp's TunTapInterface | veth pair (the kernel-to-kernel counterpart) |
/// | tun | TUN device (bare IP, no ARP), the kernel as peer in a namespace | refused (not implemented) | veth pair (the kernel-to-kernel counterpart) |
/// | emu | client and server stacks on packet sockets in two namespaces joined by netfold's link emulator | client and server interfaces on one thread, each on a packet socket in its namespace (TAPs without offloads: wire-sized frames) | client and server sockets in the two namespaces, over the emulator |
/// | xdp | client and server stacks on AF_XDP sockets at the two ends of a veth pair between two namespaces | refused (not implemented) | veth pair (the kernel-to-kernel counterpart) |
///
/// `--delay/--rate/--loss/--reorder/--duplicate/--corrupt/--seed` apply to the in-memory pipe
/// (auto) and to the emulator (emu), for every stack that runs there. The emulator carries
/// super-frames whole with only a delay; with per-frame impairments it cuts them into wire
/// frames for the model and merges what it releases together back into super-frames before
/// the TAP (not towards smoltcp, not with --corrupt): the kernel's TCP over it reached medians of
/// 3.1-3.5 Gbit/s at --rate 10G and 0.6-6.3 Gbit/s at --loss 0.01 on 2 vCPUs shared with other
/// work (load average 11-13; 1.2-1.5 and 0.4-1.8 before the merge; docs/BENCHMARKS.md).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelLink {
    #[default]
    Auto,
    Lo,
    Veth,
    Tap,
    Tun,
    Emu,
    Xdp,
}

impl KernelLink {
    /// The name as written on the command line (`--link lo`).
    pub fn name(self) -> &'static str {
        match self {
            KernelLink::Auto => "auto",
            KernelLink::Lo => "lo",
            KernelLink::Veth => "veth",
            KernelLink::Tap => "tap",
            KernelLink::Tun => "tun",
            KernelLink::Emu => "emu",
            KernelLink::Xdp => "xdp",
        }
    }
}

/// `--link`: one of the local links above, or a device netfold runs on as the `-H` client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkArg {
    Local(KernelLink),
    /// `tap:NAME`, `tun:NAME`, `packet:IFNAME` or `xdp:IFNAME[@QUEUE][:all]` (with -H and
    /// --addr).
    Device(String),
}

impl Default for LinkArg {
    fn default() -> Self {
        LinkArg::Local(KernelLink::Auto)
    }
}

impl LinkArg {
    /// The local link (a device counts as auto: [`params`] refuses it for local runs first).
    pub fn local(&self) -> KernelLink {
        match self {
            LinkArg::Local(k) => *k,
            LinkArg::Device(_) => KernelLink::Auto,
        }
    }
    pub fn device(&self) -> Option<&str> {
        match self {
            LinkArg::Local(_) => None,
            LinkArg::Device(d) => Some(d),
        }
    }
}

/// The families of `--family`, in the order measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyList(pub Vec<Family>);

/// `--family`: 4, 6, or both (IPv4 then IPv6, as rows of one run).
pub fn parse_family(s: &str) -> Result<FamilyList, String> {
    match s {
        "4" | "ipv4" => Ok(FamilyList(vec![Family::V4])),
        "6" | "ipv6" => Ok(FamilyList(vec![Family::V6])),
        "both" | "4,6" => Ok(FamilyList(vec![Family::V4, Family::V6])),
        _ => Err(format!("--family {s:?}: expected 4, 6 or both")),
    }
}

/// `auto`, `lo`, `veth`, `tap`, or a device `tap:NAME`, `tun:NAME`, `packet:IFNAME`,
/// `xdp:IFNAME[@QUEUE][:all]`.
pub fn parse_link(s: &str) -> Result<LinkArg, String> {
    use clap::ValueEnum;
    if let Ok(k) = KernelLink::from_str(s, false) {
        return Ok(LinkArg::Local(k));
    }
    if let Some(rest) = s.strip_prefix("xdp:") {
        netfold_os::link::parse_xdp(rest).map_err(|e| e.to_string())?;
        return Ok(LinkArg::Device(s.to_string()));
    }
    for prefix in ["tap:", "tun:", "packet:"] {
        if let Some(name) = s.strip_prefix(prefix) {
            if name.is_empty() || name.len() > 15 || name.contains('/') {
                return Err(format!(
                    "{s:?}: {prefix} needs an interface name of 1 to 15 bytes"
                ));
            }
            return Ok(LinkArg::Device(s.to_string()));
        }
    }
    Err(format!(
        "{s:?}: expected auto, lo, veth, tap, tun or emu (local runs), or tap:NAME, tun:NAME, \
         packet:IFNAME or xdp:IFNAME[@QUEUE][:all] (netfold on that device as the -H client, \
         with --addr)"
    ))
}

/// Options every netperf-style test takes.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Stacks to measure, in turn: any of netfold, kernel, smoltcp.
    #[arg(long, value_delimiter = ',', default_value = "netfold")]
    pub stack: Vec<StackKind>,
    /// Test length in seconds (netperf -l). Default: 2, unless the test is given a byte or
    /// transaction count instead.
    #[arg(short = 'l', long = "length", value_parser = parse_seconds)]
    pub length: Option<f64>,
    /// IP MTU of the link [default: 1500 on netfold's and smoltcp's links; the kernel's
    /// loopback keeps its own (65536) unless --mtu is given, then it runs in a private
    /// namespace whose loopback has this MTU].
    #[arg(long, value_parser = parse_count)]
    pub mtu: Option<u64>,
    /// Send buffer (netperf -s).
    #[arg(short = 's', long = "send-buffer", value_parser = parse_size, allow_hyphen_values = true)]
    pub send_buffer: Option<u64>,
    /// Receive buffer (netperf -S).
    #[arg(short = 'S', long = "recv-buffer", value_parser = parse_size, allow_hyphen_values = true)]
    pub recv_buffer: Option<u64>,
    /// Disable Nagle's algorithm.
    #[arg(long)]
    pub nodelay: bool,
    /// Iterations: MAX[,MIN] (netperf -i), run until the confidence interval is met.
    // This doc comment is clap's help text, where "[,MIN]" is literal, not an intra-doc link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(short = 'i', value_parser = stats::parse_iterations)]
    pub iterations: Option<(usize, usize)>,
    /// Confidence LEVEL,WIDTH (netperf -I), e.g. 99,5.
    #[arg(short = 'I', value_parser = stats::parse_interval, default_value = "99,5")]
    pub interval: (u32, f64),
    /// Report CPU utilization, service demand and throughput scaled to 100% CPU.
    #[arg(long)]
    pub cpu: bool,
    /// netfold: merge received TCP segments per flow and batch (GRO).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub gro: OnOff,
    /// netfold: TCP header prediction, the short path for the expected in-order segment of
    /// an established connection (off only to measure what it saves).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub header_prediction: OnOff,
    /// netfold's data path: its copy kernels with the checksum folded into the copy
    /// (netfold), or memcpy and a separate checksum pass (baseline, the 2002 "without the
    /// copy patch" case).
    #[arg(long, value_enum, default_value_t = CopyMode::Netfold)]
    pub copy: CopyMode,
    /// netfold streams: how the receiving application reads: posted (its buffer lent to the
    /// connection, bytes copied from the frames straight into it with the checksum verified
    /// in that copy), copy (read() copies out of the receive ring), in-place (a borrowing
    /// read of the ring), frames (borrowed received frames, no copy: the payload stays in
    /// the packet buffers until the application drops them). The one-thread runner only; the
    /// others read with copy.
    #[arg(long, value_enum, default_value_t = ReadPath::Posted)]
    pub read: ReadPath,
    /// netfold stream and maerts: zero-copy send. The sending side lends each message to the
    /// stack (`TcpStream::send_zc`, windows of one shared buffer) instead of writing a copy,
    /// and takes the completions as they come. `--zerocopy` alone is `on`; `both` measures
    /// each netfold row copying and zero-copy in turn and prints the ratio. Other stacks run
    /// unchanged.
    #[arg(long, value_enum, num_args = 0..=1, default_value_t = ZeroCopy::Off,
          default_missing_value = "on")]
    pub zerocopy: ZeroCopy,
    /// Where each stack's two ends run, one or both of: 1cpu (netfold and smoltcp: both ends
    /// in one thread; the kernel: client and server pinned to CPU 0) and 2cpu (one end per CPU:
    /// netfold --threads 2, the kernel split over CPUs 0 and 1; smoltcp has no such mode).
    /// Default: both, so every ratio compares like with like; --threads or --pin instead fix
    /// one placement by hand.
    #[arg(long, value_enum, value_delimiter = ',', conflicts_with_all = ["threads", "pin"])]
    pub placement: Option<Vec<Placement>>,
    /// netfold: 1 = both stacks on one thread, 2 = one pinned thread per stack [default: 1;
    /// with --shards: threads per shard, default 1, or 2 with --affinity split; see --shards
    /// for why].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub threads: Option<u8>,
    /// Thread placement (alias --affinity): split (client CPU 0, server CPU 1; with --shards:
    /// shard k's client on CPU 2k, its server on 2k+1), same (both on CPU 0; with --shards:
    /// shard k's client and server on CPU k), none (unpinned) [default: split; with --shards:
    /// same].
    #[arg(long, value_enum, visible_alias = "affinity")]
    pub pin: Option<Pin>,
    /// netfold (shards): N client and N server stacks joined by a multi-queue in-memory link
    /// steered by the Toeplitz hash, placed by --affinity. TCP_STREAM, TCP_RR and TCP_CRR.
    /// Alone it runs one thread per shard for both its stacks, shard k on CPU k (--threads 1
    /// --affinity same): no thread switch per transaction and a connection's work on one
    /// core, the placement that does the most per CPU-second and, on idle cores, the most per
    /// second (docs/BENCHMARKS.md, "Shard defaults"). On CPUs busy with other programs,
    /// --threads 2 (a client and a server thread per shard) can take a larger share of them.
    #[arg(long)]
    pub shards: Option<usize>,
    /// netfold --shards: connections, spread over the shards [default: one per shard].
    #[arg(long, requires = "shards")]
    pub streams: Option<usize>,
    /// Link: auto (netfold/smoltcp: in-memory pipe, kernel: loopback), lo, veth (kernel), tap
    /// (netfold on a TAP device with the kernel as peer; the kernel then runs over veth), tun
    /// (the same over a TUN device: bare IP packets, no ARP), emu
    /// (two namespaces joined by netfold's user-space link emulator, which applies --delay,
    /// --rate, --loss and the rest; kernel, netfold and smoltcp). With -H: tap:NAME, tun:NAME or
    /// packet:IFNAME or xdp:IFNAME[@QUEUE] runs this host's side on netfold over that device
    /// (TAP/TUN created if missing; packet: an AF_PACKET socket, xdp: an AF_XDP socket on an
    /// existing interface), at --addr.
    #[arg(long, value_parser = parse_link, default_value = "auto",
          value_name = "auto|lo|veth|tap|tun|emu|tap:NAME|tun:NAME|packet:IFNAME|xdp:IFNAME[@QUEUE]")]
    pub link: LinkArg,
    /// Fraction of frames lost on the link (the in-memory pipe, or the emulator with --link
    /// emu), e.g. 0.01.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    pub loss: f64,
    /// Fraction of frames reordered.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    pub reorder: f64,
    /// Fraction of frames duplicated.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    pub duplicate: f64,
    /// Fraction of frames with one bit flipped.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    pub corrupt: f64,
    /// Seed for the impairment RNG (same seed, same run).
    #[arg(long, default_value = "1", value_parser = parse_count)]
    pub seed: u64,
    /// One-way delay of the link, e.g. 10ms (suffix us, ms or s): a 10ms delay is a 20 ms RTT.
    /// Applies to the in-memory pipe and to --link emu (every stack).
    #[arg(long, value_parser = parse_delay, default_value = "0")]
    pub delay: u64,
    /// Rate of the link in bits/s, e.g. 1G (powers of 1000); the in-memory pipe and --link
    /// emu.
    #[arg(long, value_parser = parse_rate, default_value = "0")]
    pub rate: u64,
    /// IP family of the connections: 4, 6, or both (each test as an IPv4 row and an IPv6 row
    /// in one run, with IPv6/IPv4 ratios). IPv6: netfold over the in-memory pipe (the two
    /// stacks at 2001:2::1/64 and 2001:2::2/64) or a TAP/TUN (2001:2:0:3::2, the kernel at
    /// ::1 of that prefix), the kernel over loopback (::1) or veth (2001:2:0:2::1 and ::2);
    /// TCP tests only.
    #[arg(long, value_parser = parse_family, default_value = "4", value_name = "4|6|both")]
    pub family: FamilyList,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print JSON lines: with --interval one `{"event":"interval",...}` line as each interval
    /// ends, then one `{"event":"end",...}` line with everything --json prints.
    #[arg(long = "json-stream", conflicts_with_all = ["json", "csv"])]
    pub json_stream: bool,
    /// Print CSV.
    #[arg(long)]
    pub csv: bool,
    /// -H, -P, --bidir, --interval (cmd/remote.rs).
    #[command(flatten)]
    pub remote: super::remote::RemoteOpts,
}

/// `netfold stream` and `netfold maerts`.
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct StreamArgs {
    #[command(flatten)]
    pub common: Common,
    /// Bytes to transfer per run (K/M/G suffixes, powers of 1024).
    #[arg(long, value_parser = parse_size, conflicts_with = "length",
          allow_hyphen_values = true)]
    pub bytes: Option<u64>,
    /// Send size(s) per call (netperf -m); a comma list sweeps, e.g. 1K,4K,64K.
    #[arg(short = 'm', long = "send-size", value_parser = parse_sizes, default_value = "64K",
          allow_hyphen_values = true)]
    pub send_size: SizeList,
    /// Receive size per call (netperf -M); default: the send size.
    #[arg(short = 'M', long = "recv-size", value_parser = parse_size, allow_hyphen_values = true)]
    pub recv_size: Option<u64>,
    /// Check every received byte against the sender's pattern and the exact count.
    #[arg(long)]
    pub verify: bool,
    /// Draw throughput (and scaled throughput with --cpu) vs message size to an SVG file.
    #[arg(long, value_name = "FILE.svg", value_parser = parse_plot_path)]
    pub plot: Option<std::path::PathBuf>,
}

/// `netfold rr` and `netfold crr`.
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct RrArgs {
    #[command(flatten)]
    pub common: Common,
    /// Transactions per run.
    #[arg(long, conflicts_with = "length", value_parser = parse_count)]
    pub transactions: Option<u64>,
    /// Request and response sizes (netperf -r REQ,RESP). Repeat the option to sweep sizes:
    /// `-r 1,1 -r 64,64 -r 1K,16K` runs each pair in turn.
    #[arg(short = 'r', long = "rr-size", value_parser = parse_rr, default_value = "1,1",
          action = clap::ArgAction::Append, allow_hyphen_values = true)]
    pub rr_size: Vec<(usize, usize)>,
    /// Not supported: request/response payloads are a fixed fill, there is no byte stream to
    /// verify. Given, the command refuses to run rather than ignore it.
    #[arg(long, hide = true)]
    pub verify: bool,
    /// Draw transactions/s vs request size to an SVG file.
    #[arg(long, value_name = "FILE.svg", value_parser = parse_plot_path)]
    pub plot: Option<std::path::PathBuf>,
    /// Draw each row's latency distribution (the fraction of transactions done within each
    /// time, log time axis) to an SVG file.
    #[arg(long, value_name = "FILE.svg", value_parser = parse_plot_path)]
    pub latency_plot: Option<std::path::PathBuf>,
}

/// `netfold udp-stream`.
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct UdpArgs {
    #[command(flatten)]
    pub common: Common,
    /// Bytes to send per run (K/M/G suffixes, powers of 1024).
    #[arg(long, value_parser = parse_size, conflicts_with = "length",
          allow_hyphen_values = true)]
    pub bytes: Option<u64>,
    /// Datagram payload size(s) (netperf -m); a comma list sweeps, e.g. 64,1K,1472.
    #[arg(short = 'm', long = "send-size", value_parser = parse_sizes, default_value = "1472",
          allow_hyphen_values = true)]
    pub send_size: SizeList,
    /// Target sending rate in bits per second, as iperf3's -b (K/M/G suffixes, powers of
    /// 1000 here as in iperf3), e.g. 100M; 0 or absent = as fast as the socket takes them.
    #[arg(short = 'b', long = "bitrate", value_parser = parse_rate, allow_hyphen_values = true)]
    pub bitrate: Option<u64>,
    /// Not supported: datagrams are counted, not checked byte by byte. Given, the command
    /// refuses to run rather than ignore it.
    #[arg(long, hide = true)]
    pub verify: bool,
    /// Draw received throughput vs datagram size to an SVG file.
    #[arg(long, value_name = "FILE.svg", value_parser = parse_plot_path)]
    pub plot: Option<std::path::PathBuf>,
}

/// All options of one test, whichever subcommand they came from.
#[derive(Debug, Clone)]
pub struct Args {
    pub common: Common,
    pub bytes: Option<u64>,
    pub transactions: Option<u64>,
    pub send_size: SizeList,
    pub recv_size: Option<u64>,
    pub rr_size: Vec<(usize, usize)>,
    pub bitrate: Option<u64>,
    pub verify: bool,
    pub plot: Option<std::path::PathBuf>,
    pub latency_plot: Option<std::path::PathBuf>,
}

impl std::ops::Deref for Args {
    type Target = Common;
    fn deref(&self) -> &Common {
        &self.common
    }
}

impl From<StreamArgs> for Args {
    fn from(a: StreamArgs) -> Args {
        Args {
            common: a.common,
            bytes: a.bytes,
            transactions: None,
            send_size: a.send_size,
            recv_size: a.recv_size,
            rr_size: vec![(1, 1)],
            bitrate: None,
            verify: a.verify,
            plot: a.plot,
            latency_plot: None,
        }
    }
}

impl From<RrArgs> for Args {
    fn from(a: RrArgs) -> Args {
        Args {
            common: a.common,
            bytes: None,
            transactions: a.transactions,
            send_size: SizeList(vec![1]),
            recv_size: None,
            rr_size: a.rr_size,
            bitrate: None,
            verify: a.verify,
            plot: a.plot,
            latency_plot: a.latency_plot,
        }
    }
}

impl From<UdpArgs> for Args {
    fn from(a: UdpArgs) -> Args {
        Args {
            common: a.common,
            bytes: a.bytes,
            transactions: None,
            send_size: a.send_size,
            recv_size: None,
            rr_size: vec![(1, 1)],
            bitrate: a.bitrate,
            verify: a.verify,
            plot: a.plot,
            latency_plot: None,
        }
    }
}

/// A comma-separated list of sizes (`-m 1K,4K,64K`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeList(pub Vec<u64>);

fn parse_sizes(s: &str) -> Result<SizeList, String> {
    parse_size_list(s).map(SizeList)
}

/// A whole number >= 0; a negative one gets a message that says so (not a parse error).
fn parse_count(s: &str) -> Result<u64, String> {
    if s.trim().starts_with('-') {
        return Err(format!("{s} is negative: expected a whole number >= 0"));
    }
    s.trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))
}

/// Seconds, > 0.
fn parse_seconds(s: &str) -> Result<f64, String> {
    let l: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(l > 0.0 && l < 86400.0) {
        return Err(format!(
            "{s}: expected a positive number of seconds below a day"
        ));
    }
    Ok(l)
}

/// A one-way delay: "10ms", "250us", "0.5s" (a bare number is milliseconds); microseconds out.
pub fn parse_delay(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, us_per_unit) = if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        (t, 1e3)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a delay: expected e.g. 10ms, 250us or 0.5s"))?;
    let us = v * us_per_unit;
    // Below a minute: the pipe holds every frame of a delayed window in memory.
    if !(0.0..=60e6).contains(&us) {
        return Err(format!("{s}: expected a delay from 0 to 60s"));
    }
    Ok(us.round() as u64)
}

/// A bit rate as iperf3 writes it: "100M" = 100 * 10^6 bits/s (powers of 1000).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!(
            "{s} is negative: expected a rate in bits/s, e.g. 100M"
        ));
    }
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("invalid rate {s:?} (expected e.g. 500K, 100M, 1G bits/s)"))?;
    if !v.is_finite() || v < 0.0 || v * mult > 1e13 {
        return Err(format!("rate {s:?} out of range"));
    }
    Ok((v * mult) as u64)
}

/// `--plot FILE`: checked before any run, so a bad path does not cost a whole run. Only SVG is
/// written (plotters' bitmap encoder would need an image codec this build does not carry).
fn parse_plot_path(s: &str) -> Result<std::path::PathBuf, String> {
    let p = std::path::PathBuf::from(s);
    match p.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => {}
        Some(e) => {
            return Err(format!(
                "only SVG plots are written; {s:?} asks for .{e} (name it .svg and convert, \
                 e.g. `rsvg-convert -o x.png x.svg`)"
            ))
        }
        None => return Err(format!("{s:?}: the plot file must end in .svg")),
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(format!("directory {} does not exist", dir.display()));
    }
    // Writable? Create and remove a probe file: access(2) would not see read-only mounts.
    let probe = dir.join(format!(".netfold-plot-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
        }
        Err(e) => return Err(format!("cannot write in {}: {e}", dir.display())),
    }
    Ok(p)
}

fn parse_rr(s: &str) -> Result<(usize, usize), String> {
    let mut it = s.split(',');
    let req = parse_size(it.next().unwrap_or(""))?;
    let resp = match it.next() {
        Some(r) => parse_size(r)?,
        None => req,
    };
    if req == 0 || resp == 0 || req > 1 << 24 || resp > 1 << 24 || it.next().is_some() {
        return Err(format!(
            "-r {s:?}: expected REQ,RESP with sizes between 1 and 16M (repeat -r to sweep)"
        ));
    }
    Ok((req as usize, resp as usize))
}

/// The IP MTU of netfold's and smoltcp's links when --mtu is not given (Ethernet's).
pub const DEFAULT_MTU: usize = 1500;

/// Builds the parameters of one run (one message size, one request/response pair) and checks
/// them.
pub fn params(a: &Args, test: Test, send_size: u64, rr: (usize, usize)) -> Result<Params, String> {
    if let Some(d) = a.link.device() {
        return Err(format!(
            "--link {d} runs netfold as the client of a `netfold server`: it needs -H HOST and \
             --addr ADDR/PREFIX (local runs take --link auto, lo, veth, tap, tun or emu)"
        ));
    }
    let mtu = a.mtu.map(|m| m as usize).unwrap_or(DEFAULT_MTU);
    if !(576..=65535).contains(&mtu) {
        return Err(format!("--mtu {mtu} out of range (576..=65535)"));
    }
    if a.verify && !matches!(test, Test::Stream | Test::Maerts) {
        return Err(format!(
            "--verify checks a byte stream against the sender's pattern: it applies to stream \
             and maerts only; {} carries no such stream (refusing rather than ignoring it)",
            test.netperf_name()
        ));
    }
    if send_size == 0 || send_size > 1 << 30 {
        return Err("-m must be between 1 byte and 1G".into());
    }
    let recv = a.recv_size.unwrap_or(send_size);
    if recv == 0 || recv > 1 << 30 {
        return Err("-M must be between 1 byte and 1G".into());
    }
    if test == Test::UdpStream && send_size > 65507 {
        return Err("UDP messages are at most 65507 bytes".into());
    }
    if a.zerocopy != ZeroCopy::Off {
        if !matches!(test, Test::Stream | Test::Maerts) {
            return Err(format!(
                "--zerocopy is a send path for a byte stream: stream and maerts only, not {}",
                test.netperf_name()
            ));
        }
        if a.shards.is_some() {
            return Err("--zerocopy is not implemented for --shards".into());
        }
    }
    let duration = match (a.length, a.bytes, a.transactions) {
        (Some(l), _, _) => Some(l),
        (None, None, None) => Some(2.0),
        _ => None,
    };
    Ok(Params {
        test,
        bytes: a.bytes,
        transactions: a.transactions,
        duration,
        send_size: send_size as usize,
        recv_size: recv as usize,
        req_size: rr.0,
        resp_size: rr.1,
        mtu,
        mtu_given: a.mtu.is_some(),
        nodelay: a.nodelay,
        send_buffer: a.send_buffer.map(|v| v as usize),
        recv_buffer: a.recv_buffer.map(|v| v as usize),
        impair: Impair {
            loss: a.loss,
            reorder: a.reorder,
            duplicate: a.duplicate,
            corrupt: a.corrupt,
            seed: a.seed,
            delay_us: a.delay,
            rate_bps: a.rate,
        },
        verify: a.verify,
        // With --shards the default is the placement that measures best per CPU-second in
        // every condition and in throughput on idle cores: one thread per shard running its
        // client and server stacks, shard k on CPU k (no thread switch per transaction, one
        // connection's work on one core). On a quiet 2-vCPU AMD EPYC, 2 shards x 2 streams:
        // TCP_RR 1.16M trans/s against 0.43M with a client and a server thread per shard,
        // TCP_STREAM 99 against 86 Gbit/s. Under other programs' load two threads per shard
        // get more of the CPUs and can move more, at half the work per CPU-second
        // (docs/BENCHMARKS.md, "Shard defaults").
        // (`--affinity split` asked for by name keeps two threads per shard: it needs them.)
        threads: a.threads.map_or(
            if a.shards.is_some() && a.pin == Some(Pin::Split) {
                2
            } else {
                1
            },
            usize::from,
        ),
        pin: a.pin.unwrap_or(if a.shards.is_some() {
            Pin::Same
        } else {
            Pin::Split
        }),
        gro: a.gro == OnOff::On,
        header_prediction: a.header_prediction == OnOff::On,
        copy_mode: if a.copy == CopyMode::Baseline {
            netfold::mem::CopyMode::Baseline
        } else {
            netfold::mem::CopyMode::Kernels
        },
        rate_bps: a.bitrate.filter(|&b| b > 0),
        // Shards: see bench::shards.
        shards: a.shards.unwrap_or(0),
        streams: a.streams.or(a.shards).unwrap_or(1),
        family: Family::V4,
        read_path: a.read,
        zerocopy: false,
    })
}

/// Runs one configuration on one stack once.
pub fn run_once(
    stack: StackKind,
    link: KernelLink,
    p: &Params,
) -> Result<(Measurement, String, usize), Box<dyn std::error::Error>> {
    // The copy path is configuration of the netfold stacks a run builds
    // (`StackConfig::copy_mode` from `Params::copy_mode`); other stacks ignore it.
    run_stack(stack, link, p)
}

fn run_stack(
    stack: StackKind,
    link: KernelLink,
    p: &Params,
) -> Result<(Measurement, String, usize), Box<dyn std::error::Error>> {
    match (stack, link) {
        // Shards: see bench::shards.
        (StackKind::Netfold, KernelLink::Auto) if p.shards > 0 => {
            Ok((crate::bench::shards::run(p)?, "pipe".into(), p.mtu))
        }
        (StackKind::Netfold, KernelLink::Auto) => Ok((netfold_pipe::run(p)?, "pipe".into(), p.mtu)),
        (StackKind::Netfold, KernelLink::Tap) => {
            Ok((crate::bench::netfold_tap::run(p)?, "tap".into(), p.mtu))
        }
        (StackKind::Netfold, KernelLink::Tun) => {
            Ok((crate::bench::netfold_tap::run_tun(p)?, "tun".into(), p.mtu))
        }
        (StackKind::Smoltcp, KernelLink::Tun) => Err(
            "--link tun is not implemented for smoltcp (its TunTapInterface in TUN mode is not \
             set up by this tool); use --link tap, or --stack kernel,netfold"
                .into(),
        ),
        (StackKind::Netfold, KernelLink::Emu) => {
            Ok((crate::bench::emu::run_netfold(p)?, "emu".into(), p.mtu))
        }
        (StackKind::Netfold, KernelLink::Xdp) => {
            Ok((crate::bench::xdp::run_netfold(p)?, "xdp".into(), p.mtu))
        }
        (StackKind::Smoltcp, KernelLink::Xdp) => Err(
            "--link xdp is not implemented for smoltcp (its phy has no AF_XDP device); use \
             --stack netfold,kernel"
                .into(),
        ),
        (StackKind::Kernel, KernelLink::Emu) => {
            Ok((crate::bench::emu::run_kernel(p)?, "emu".into(), p.mtu))
        }
        (StackKind::Smoltcp, KernelLink::Emu) => {
            Ok((crate::bench::smoltcp_emu::run(p)?, "emu".into(), p.mtu))
        }
        (StackKind::Smoltcp, KernelLink::Auto) => Ok((smoltcp_pipe::run(p)?, "pipe".into(), p.mtu)),
        (StackKind::Smoltcp, KernelLink::Tap) => {
            Ok((crate::bench::smoltcp_tap::run(p)?, "tap".into(), p.mtu))
        }
        (StackKind::Kernel, KernelLink::Auto | KernelLink::Lo) if p.mtu_given => {
            // The host's loopback is shared with everything else on the machine: rather than
            // change it, run on the loopback of a private namespace set to the asked MTU.
            let ns = kernel::PrivateLo::create(p.mtu).map_err(|e| {
                format!(
                    "--mtu {} on the kernel's loopback needs a private network namespace \
                     (the host's loopback stays at {}): {e}",
                    p.mtu,
                    kernel::lo_mtu()
                )
            })?;
            let m = kernel::run_on(p, kernel::Where::PrivateLo(&ns))?;
            Ok((m, "lo".into(), p.mtu))
        }
        (StackKind::Kernel, KernelLink::Auto | KernelLink::Lo) => {
            Ok((kernel::run(p)?, "lo".into(), kernel::lo_mtu()))
        }
        (
            StackKind::Kernel,
            KernelLink::Veth | KernelLink::Tap | KernelLink::Tun | KernelLink::Xdp,
        ) => {
            let v = kernel::Veth::create_for(Some(p.mtu), p.family)?;
            let m = kernel::run_on(p, kernel::Where::Veth(&v))?;
            Ok((m, "veth".into(), p.mtu))
        }
        (s, l) => Err(format!(
            "--link {} is not available for the {} stack: netfold and smoltcp run over the \
             in-memory pipe (--link auto) or a TAP or TUN device (--link tap, tun); lo and veth are the \
             kernel's links",
            l.name(),
            s.name()
        )
        .into()),
    }
}

/// Runs one configuration on one stack, iterating per -i/-I, and makes the row.
pub fn measure(stack: StackKind, a: &Args, p: &Params) -> Result<Row, Box<dyn std::error::Error>> {
    let (max, min) = a.iterations.unwrap_or((1, 1));
    let it = Iterations {
        max,
        min,
        level: a.interval.0,
        width_pct: a.interval.1,
    };
    let mut runs: Vec<Measurement> = Vec::new();
    let mut headline: Vec<f64> = Vec::new();
    let mut link = String::new();
    let mut mtu = 0;
    while it.want_more(&headline) {
        let before = crate::bench::affinity::proc_stat_jiffies();
        let (mut m, l, u) = run_once(stack, a.link.local(), p)?;
        if let (Some(b), Some(e)) = (before, crate::bench::affinity::proc_stat_jiffies()) {
            // Cross-check of the per-thread (getrusage) figure: the whole machine's busy share
            // from /proc/stat over the run, as netperf measures it.
            if let Some(u) = crate::bench::affinity::proc_stat_util(b, e) {
                m.details.insert("proc_stat_cpu_util".into(), u.into());
            }
        }
        headline.push(if p.test.is_transactional() {
            rate(m.transactions, m.elapsed_s)
        } else {
            mbps(m.bytes, m.elapsed_s)
        });
        link = l;
        mtu = u;
        runs.push(m);
    }
    Ok(make_row(
        stack,
        a.link.local(),
        p,
        &runs,
        &headline,
        &it,
        link,
        mtu,
        a.cpu,
    ))
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

#[allow(clippy::too_many_arguments)]
fn make_row(
    stack: StackKind,
    klink: KernelLink,
    p: &Params,
    runs: &[Measurement],
    headline: &[f64],
    it: &Iterations,
    link: String,
    mtu: usize,
    cpu: bool,
) -> Row {
    let n = runs.len().max(1) as f64;
    let bytes: u64 = runs.iter().map(|m| m.bytes).sum::<u64>() / runs.len().max(1) as u64;
    let elapsed = runs.iter().map(|m| m.elapsed_s).sum::<f64>() / n;
    let (mean, _) = stats::mean_sd(headline);
    let cpu_s = runs.iter().map(|m| m.cpu_s).sum::<f64>() / n;
    let last = runs.last().cloned().unwrap_or_default();
    let mut row = Row {
        test: p.test.netperf_name().into(),
        stack: stack.name().into(),
        link,
        mtu,
        msg_size: if p.test.is_transactional() {
            p.req_size
        } else {
            p.send_size
        },
        resp_size: p.test.is_transactional().then_some(p.resp_size),
        family: p.family.name().into(),
        placement: match (stack, klink) {
            (StackKind::Netfold, KernelLink::Auto) if p.shards > 0 => format!(
                "{} shards x {} streams, {}{}",
                p.shards,
                p.streams,
                crate::bench::shards::affinity_name(p.pin),
                if p.threads == 1 { ", 1 thread" } else { "" }
            ),
            _ if p.zerocopy => format!("{}, zc", placement(stack, klink, p)),
            _ => placement(stack, klink, p).into(),
        },
        bytes,
        elapsed_s: elapsed,
        verified: if runs.iter().any(|m| m.verified.is_some()) {
            Some(runs.iter().all(|m| m.verified == Some(true)))
        } else {
            None
        },
        iterations: runs.len(),
        details: last.details,
        ..Default::default()
    };
    let tx = runs.iter().map(|m| m.transactions).sum::<u64>() as f64 / n;
    if p.test.is_transactional() {
        row.trans_per_s = Some(mean);
        row.details
            .insert("transactions".into(), (tx as u64).into());
        let mut h = crate::bench::latency::Histogram::default();
        for l in runs.iter().filter_map(|m| m.latency.as_ref()) {
            h.merge(l);
        }
        row.latency_us = h.summary();
        row.latency_hist = Some(h);
    } else {
        row.throughput_mbps = Some(mean);
    }
    if let Some(u) = udp_totals(runs) {
        row.sent_datagrams = Some(u.sent_datagrams);
        row.received_datagrams = Some(u.received_datagrams);
        row.loss_pct = Some(u.loss_pct());
        row.send_throughput_mbps = Some(mbps(u.sent_bytes / runs.len() as u64, elapsed));
        row.recv_throughput_mbps = Some(mbps(u.received_bytes / runs.len() as u64, elapsed));
        row.jitter_ms = u.jitter_ms;
    }
    if let Some(pp) = passes_total(runs) {
        row.passes_per_byte_sender = pp.sender.and_then(|s| s.tx_per_byte());
        row.passes_per_byte_receiver = pp.receiver.and_then(|r| r.rx_per_byte());
        row.passes_not_counted = match (pp.sender, pp.receiver) {
            (None, Some(_)) => Some("sender"),
            (Some(_), None) => Some("receiver"),
            _ => None,
        };
        row.details
            .insert("payload_passes".into(), passes_json(&pp));
    }
    if runs.len() > 1 {
        row.ci_width_pct = Some(stats::ci_width_pct(headline, it.level));
        row.ci_met = Some(it.met(headline));
    }
    if cpu {
        let ncpus = crate::bench::affinity::online_cpus();
        // Scaled to 100% CPU: the headline (Mbit/s, or transactions/s for RR/CRR) divided by
        // the utilization.
        let f = stats::cpu_figures(cpu_s, elapsed, ncpus, bytes, mean);
        row.cpu_util = Some(f.cpu_util_pct);
        row.scaled_throughput_mbps = Some(f.scaled_throughput_mbps);
        row.details.insert("cpu_s".into(), cpu_s.into());
        if p.test.is_transactional() {
            // netperf's unit for transactions: CPU microseconds per transaction (us/Tr).
            row.service_demand_us_per_tr = Some(if tx > 0.0 { cpu_s * 1e6 / tx } else { 0.0 });
        } else {
            row.service_demand_us_per_kb = Some(f.service_demand_us_per_kb);
        }
    }
    row
}

/// The passes over payload bytes summed over the iterations (None where not counted).
fn passes_total(runs: &[Measurement]) -> Option<crate::bench::Passes> {
    let mut it = runs.iter().filter_map(|m| m.passes);
    let mut t = it.next()?;
    for p in it {
        // Every iteration of a row runs over the same link, so an end not counted (`None`)
        // is not counted in any of them.
        for (a, b) in [(&mut t.sender, p.sender), (&mut t.receiver, p.receiver)] {
            let (Some(a), Some(b)) = (a.as_mut(), b) else {
                continue;
            };
            a.sent += b.sent;
            a.tx_copy_app += b.tx_copy_app;
            a.tx_copy_frame += b.tx_copy_frame;
            a.tx_csum_separate += b.tx_csum_separate;
            a.received += b.received;
            a.rx_copy_ring += b.rx_copy_ring;
            a.rx_copy_direct += b.rx_copy_direct;
            a.rx_copy_app += b.rx_copy_app;
            a.rx_csum_separate += b.rx_csum_separate;
            a.rx_in_place += b.rx_in_place;
            a.rx_frames_held += b.rx_frames_held;
        }
    }
    Some(t)
}

/// What the JSON says for an end whose passes are not counted.
const NOT_COUNTED: &str = "n/a: the Linux kernel's end, not netfold's to count";

/// The pass counts for the JSON: the sender's send side and the receiver's receive side.
fn passes_json(p: &crate::bench::Passes) -> serde_json::Value {
    let sender = p.sender.map_or_else(
        || NOT_COUNTED.into(),
        |s| {
            serde_json::json!({
                "sent": s.sent,
                "copy_app_to_ring": s.tx_copy_app,
                "copy_ring_to_frame": s.tx_copy_frame,
                "checksum_separate": s.tx_csum_separate,
                "passes_per_byte": s.tx_per_byte(),
            })
        },
    );
    let receiver = p.receiver.map_or_else(
        || NOT_COUNTED.into(),
        |r| {
            serde_json::json!({
                "received": r.received,
                "copy_frame_to_ring": r.rx_copy_ring,
                "copy_frame_to_app": r.rx_copy_direct,
                "copy_ring_to_app": r.rx_copy_app,
                "checksum_separate": r.rx_csum_separate,
                "read_in_place": r.rx_in_place,
                "borrowed_frames": r.rx_frames_held,
                "passes_per_byte": r.rx_per_byte(),
            })
        },
    );
    serde_json::json!({ "sender": sender, "receiver": receiver })
}

/// Both sides' UDP counts summed over the iterations (None for TCP tests).
fn udp_totals(runs: &[Measurement]) -> Option<crate::bench::udp::UdpStats> {
    let mut it = runs.iter().filter_map(|m| m.udp);
    let mut t = it.next()?;
    let mut jitters: Vec<f64> = t.jitter_ms.into_iter().collect();
    for u in it {
        t.sent_datagrams += u.sent_datagrams;
        t.sent_bytes += u.sent_bytes;
        t.received_datagrams += u.received_datagrams;
        t.received_bytes += u.received_bytes;
        jitters.extend(u.jitter_ms);
    }
    t.jitter_ms = (!jitters.is_empty()).then(|| stats::mean_sd(&jitters).0);
    Some(t)
}

/// The placements a test is measured at: `--placement` if given; else both, unless
/// --threads/--pin fix one by hand (None: use those as given).
fn placements(a: &Args) -> Vec<Option<Placement>> {
    match &a.placement {
        Some(list) => list.iter().map(|&p| Some(p)).collect(),
        // Sharded runs are placed by --affinity alone.
        None if a.shards.is_some() => vec![None],
        None if a.threads.is_none() && a.pin.is_none() => {
            vec![Some(Placement::OneCpu), Some(Placement::TwoCpus)]
        }
        None => vec![None],
    }
}

/// Sets `p`'s threads and pinning for `stack` at placement `pl`; None when the stack cannot
/// run there (smoltcp over the in-memory pipe is one thread only; netfold's two-thread runner
/// has no UDP_STREAM).
fn place(stack: StackKind, link: KernelLink, pl: Placement, mut p: Params) -> Option<Params> {
    // smoltcp over emu: both interfaces on one thread, as over the in-memory pipe.
    let two_threads = stack == StackKind::Kernel
        || matches!(link, KernelLink::Tap | KernelLink::Tun)
        || (matches!(link, KernelLink::Emu | KernelLink::Xdp) && stack == StackKind::Netfold);
    match (pl, two_threads, stack) {
        (Placement::OneCpu, true, _) => p.pin = Pin::Same,
        (Placement::TwoCpus, true, _) => p.pin = Pin::Split,
        (Placement::OneCpu, false, _) => p.threads = 1,
        (Placement::TwoCpus, false, StackKind::Netfold) if p.test != Test::UdpStream => {
            p.threads = 2;
            p.pin = Pin::Split;
        }
        (Placement::TwoCpus, false, _) => return None,
    }
    Some(p)
}

/// Where the two ends of a run were placed, as the table reports it.
pub fn placement(stack: StackKind, link: KernelLink, p: &Params) -> &'static str {
    let threads = match (stack, link) {
        // Over a TAP the peer is a kernel thread in a namespace: two threads.
        (StackKind::Kernel, _)
        | (_, KernelLink::Tap | KernelLink::Tun)
        | (StackKind::Netfold, KernelLink::Emu | KernelLink::Xdp) => 2,
        (StackKind::Netfold, _) => p.threads,
        (StackKind::Smoltcp, _) => 1,
    };
    if threads == 1 {
        return "1 CPU";
    }
    match p.pin {
        Pin::Split => "2 CPUs",
        Pin::Same => "1 CPU",
        Pin::None => "unpinned",
    }
}

/// The main job (`netfold` with no subcommand, i.e. README's `cargo run --release`): a short
/// TCP_STREAM sweep over 1K..64K messages on netfold, kernel loopback and smoltcp, with the
/// netfold/kernel and netfold/smoltcp ratios.
pub const DEFAULT_JOB: &[&str] = &[
    "--stack",
    "netfold,kernel,smoltcp",
    "-m",
    "1K,4K,16K,64K",
    "-l",
    "1",
];

pub fn default_job() -> CmdResult {
    #[derive(clap::Parser)]
    struct Default {
        #[command(flatten)]
        a: StreamArgs,
    }
    let mut argv = vec!["netfold"];
    argv.extend_from_slice(DEFAULT_JOB);
    let d = <Default as clap::Parser>::try_parse_from(argv)?;
    eprintln!(
        "netfold: default job = `netfold stream {}` (see `netfold --help` for more)",
        DEFAULT_JOB.join(" ")
    );
    run(Test::Stream, d.a.into())
}

/// Runs `test` for every stack x message size (x request/response pair); the rows in plan
/// order.
pub fn collect(test: Test, a: &Args) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    let mut plan = Vec::new();
    let cases: Vec<(u64, (usize, usize))> = if test.is_transactional() {
        a.rr_size.iter().map(|&rr| (1, rr)).collect()
    } else {
        a.send_size.0.iter().map(|&m| (m, (1, 1))).collect()
    };
    let families = a.family.0.clone();
    for (size, rr) in cases {
        for &s in &a.stack {
            for &family in &families {
                let mut base = params(a, test, size, rr)?;
                base.family = family;
                check_family(s, a.link.local(), &base)?;
                for pl in placements(a) {
                    let placed = match pl {
                        None => Some(base.clone()),
                        Some(pl) => place(s, a.link.local(), pl, base.clone()),
                    };
                    let Some(placed) = placed else { continue };
                    // --zerocopy: netfold's rows copying, zero-copy, or both in turn.
                    let zc: &[bool] = match (s, a.zerocopy) {
                        (StackKind::Netfold, ZeroCopy::On) => &[true],
                        (StackKind::Netfold, ZeroCopy::Both) => &[false, true],
                        _ => &[false],
                    };
                    for &z in zc {
                        plan.push((
                            s,
                            Params {
                                zerocopy: z,
                                ..placed.clone()
                            },
                        ));
                    }
                }
            }
        }
    }
    let progress = crate::progress::Progress::new(
        &plan
            .iter()
            .map(|(_, p)| p.duration.unwrap_or(0.0))
            .collect::<Vec<_>>(),
    );
    let mut rows = Vec::new();
    for (s, p) in &plan {
        progress.start(&if test.is_transactional() {
            format!(
                "{} {} r={},{}",
                s.name(),
                test.netperf_name(),
                p.req_size,
                p.resp_size
            )
        } else {
            format!("{} {} m={}", s.name(), test.netperf_name(), p.send_size)
        });
        let r = measure(*s, a, p).map_err(|e| format!("{} {}: {e}", s.name(), test.netperf_name()));
        progress.done();
        match r {
            Ok(row) => rows.push(row),
            Err(e) => {
                progress.finish();
                return Err(e.into());
            }
        }
    }
    progress.finish();
    Ok(rows)
}

/// Where IPv6 runs: netfold's stacks over the in-memory pipe (one thread, `--threads 2`, or
/// `--shards`, steered by the Toeplitz hash of the IPv6 4-tuple) and over a TAP or TUN against the kernel, the kernel over loopback (::1) or veth (also
/// the kernel-to-kernel counterpart of `--link tap`). Elsewhere `--family 6` is refused
/// rather than silently measured over IPv4.
fn check_family(stack: StackKind, link: KernelLink, p: &Params) -> Result<(), String> {
    if p.family == Family::V4 {
        return Ok(());
    }
    let tcp = p.test != Test::UdpStream;
    match (stack, link) {
        (StackKind::Netfold, KernelLink::Auto) if tcp => Ok(()),
        (StackKind::Netfold, KernelLink::Tap | KernelLink::Tun) if tcp => Ok(()),
        (StackKind::Kernel, KernelLink::Auto | KernelLink::Lo | KernelLink::Veth) if tcp => Ok(()),
        (StackKind::Kernel, KernelLink::Tap | KernelLink::Tun) if tcp => Ok(()),
        _ => Err(format!(
            "--family 6 runs the TCP tests of netfold over the in-memory pipe (--shards \
             included) or a TAP/TUN, and of the kernel over lo or veth; not implemented for \
             {} over --link {}",
            stack.name(),
            link.name(),
        )),
    }
}

/// Runs `test` for every stack x message size and prints the result.
pub fn run(test: Test, a: Args) -> CmdResult {
    // Two hosts, parallel streams, both directions, interval reports: cmd/remote.rs.
    if a.remote.applies() {
        return super::remote::run(crate::bench::remote::TestKind::from_test(test), a);
    }
    let rows = collect(test, &a)?;
    if a.json_stream {
        report::print_json_end(&rows)?;
    } else if a.json {
        report::print_json(&rows)?;
    } else if a.csv {
        report::print_csv(&rows);
    } else {
        report::print_table(&rows);
    }
    if let Some(path) = &a.plot {
        crate::plot::throughput_vs_size(path, &rows)?;
    }
    if let Some(path) = &a.latency_plot {
        crate::plot::latency_cdf(path, &rows)?;
    }
    if rows.iter().any(|r| r.verified == Some(false)) {
        eprintln!("netfold: verification FAILED");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct S {
        #[command(flatten)]
        a: StreamArgs,
    }
    #[derive(Parser)]
    struct R {
        #[command(flatten)]
        a: RrArgs,
    }
    #[derive(Parser)]
    struct U {
        #[command(flatten)]
        a: UdpArgs,
    }

    fn argv<'a>(args: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        v
    }
    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        S::try_parse_from(argv(args)).map(|t| t.a.into())
    }
    fn parse_rr_args(args: &[&str]) -> Result<Args, clap::Error> {
        R::try_parse_from(argv(args)).map(|t| t.a.into())
    }
    fn parse_udp(args: &[&str]) -> Result<Args, clap::Error> {
        U::try_parse_from(argv(args)).map(|t| t.a.into())
    }

    /// `--shards N` alone: one thread per shard on the shard's CPU; what is asked for by name
    /// wins, and `--affinity split` brings its second thread.
    #[test]
    fn shards_alone_get_one_thread_per_shard_on_its_cpu() {
        let p = |args: &[&str]| {
            let a = parse_rr_args(args).unwrap();
            let p = params(&a, Test::Rr, 1, (1, 1)).unwrap();
            (p.threads, p.pin)
        };
        assert_eq!(p(&["--shards", "1", "--streams", "2"]), (1, Pin::Same));
        assert_eq!(p(&["--shards", "2", "--streams", "2"]), (1, Pin::Same));
        assert_eq!(p(&["--shards", "2", "--affinity", "none"]), (1, Pin::None));
        assert_eq!(
            p(&["--shards", "1", "--affinity", "split"]),
            (2, Pin::Split)
        );
        assert_eq!(p(&["--shards", "2", "--threads", "2"]), (2, Pin::Same));
        // Without --shards nothing changes.
        assert_eq!(p(&[]), (1, Pin::Split));
    }

    #[test]
    fn options_parse_like_netperf() {
        let a = parse(&[
            "--stack",
            "netfold,kernel,smoltcp",
            "-m",
            "1K,64K",
            "-i",
            "10,3",
            "-I",
            "95,2",
            "--cpu",
        ])
        .unwrap();
        assert_eq!(
            a.stack,
            vec![StackKind::Netfold, StackKind::Kernel, StackKind::Smoltcp]
        );
        assert_eq!(a.send_size.0, vec![1024, 65536]);
        assert_eq!(a.iterations, Some((10, 3)));
        assert_eq!(a.interval, (95, 2.0));
        let r = parse_rr_args(&["-r", "64,1K", "--cpu"]).unwrap();
        assert_eq!(r.rr_size, vec![(64, 1024)]);
        let p = params(&a, Test::Stream, 1024, (1, 1)).unwrap();
        assert_eq!(
            (p.send_size, p.recv_size, p.duration),
            (1024, 1024, Some(2.0))
        );
        let b = parse(&["--bytes", "1G", "--loss", "0.01"]).unwrap();
        let p = params(&b, Test::Stream, 65536, (1, 1)).unwrap();
        assert_eq!(
            (p.bytes, p.duration, p.impair.loss),
            (Some(1 << 30), None, 0.01)
        );
    }

    #[test]
    fn bad_options_are_errors_not_panics() {
        assert!(parse(&["--stack", "lwip"]).is_err());
        assert!(parse(&["--loss", "2"]).is_err());
        assert!(parse(&["-i", "0"]).is_err());
        assert!(parse(&["-I", "80,5"]).is_err());
        assert!(parse(&["--threads", "3"]).is_err());
        assert!(parse_rr_args(&["-r", "0,1"]).is_err());
        assert!(parse(&["--bytes", "1G", "-l", "3"]).is_err());
        let a = parse(&["--mtu", "100"]).unwrap();
        assert!(params(&a, Test::Stream, 1024, (1, 1)).is_err());
        let a = parse_udp(&[]).unwrap();
        assert!(params(&a, Test::UdpStream, 70000, (1, 1)).is_err());
    }

    /// The message clap gives for a rejected value, as the user sees it.
    fn message(r: Result<Args, clap::Error>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn negative_numbers_get_a_clear_error() {
        for (opt, v) in [("-l", "-5"), ("--mtu", "-5"), ("--seed", "-1")] {
            let m = message(parse(&[opt, v]));
            assert!(!m.contains("unexpected argument"), "{opt} {v}: {m}");
            assert!(
                m.contains("negative") || m.contains("positive"),
                "{opt} {v}: {m}"
            );
        }
        let m = message(parse_rr_args(&["--transactions", "-5"]));
        assert!(m.contains("negative"), "{m}");
        let m = message(parse(&["-m", "-1K"]));
        assert!(m.contains("negative"), "{m}");
        let m = message(parse_udp(&["-b", "-5M"]));
        assert!(m.contains("negative"), "{m}");
    }

    #[test]
    fn plot_path_is_checked_before_the_run() {
        let m = message(parse(&["--plot", "/nonexistent/x.svg"]));
        assert!(m.contains("does not exist"), "{m}");
        let m = message(parse(&["--plot", "x.png"]));
        assert!(m.contains("only SVG"), "{m}");
        let dir = std::env::temp_dir();
        let ok = dir.join("netfold-plot-test.svg");
        let a = parse(&["--plot", ok.to_str().unwrap()]).unwrap();
        assert_eq!(a.plot.as_deref(), Some(ok.as_path()));
        // The probe file is gone again.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name().to_string_lossy()
                    == format!(".netfold-plot-probe-{}", std::process::id())
            })
            .collect();
        assert!(left.is_empty());
    }

    #[test]
    fn gro_is_on_or_off() {
        assert_eq!(parse(&["--gro", "off"]).unwrap().gro, OnOff::Off);
        assert_eq!(parse(&[]).unwrap().gro, OnOff::On);
        let m = message(parse(&["--gro", "true"]));
        assert!(
            m.contains("on") && m.contains("off") && !m.contains("false"),
            "{m}"
        );
    }

    #[test]
    fn each_test_takes_only_its_own_options() {
        // rr has no byte count or send size; stream has no request/response sizes.
        assert!(parse_rr_args(&["--bytes", "1M"]).is_err());
        assert!(parse_rr_args(&["-m", "1K"]).is_err());
        assert!(parse(&["-r", "1,1"]).is_err());
        assert!(parse(&["--transactions", "5"]).is_err());
        assert!(parse(&["-b", "1M"]).is_err());
        assert!(parse_udp(&["-r", "1,1"]).is_err());
        let help = R::try_parse_from(["t", "--help"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            help.contains("--rr-size") && !help.contains("--send-size"),
            "{help}"
        );
        assert!(!help.contains("--verify"), "{help}");
    }

    #[test]
    fn rr_sizes_sweep_and_verify_is_refused_where_it_cannot_apply() {
        let a = parse_rr_args(&["-r", "1,1", "-r", "64,1K"]).unwrap();
        assert_eq!(a.rr_size, vec![(1, 1), (64, 1024)]);
        assert_eq!(parse_rr_args(&[]).unwrap().rr_size, vec![(1, 1)]);
        let a = parse_rr_args(&["--verify"]).unwrap();
        let e = params(&a, Test::Rr, 1, (1, 1)).unwrap_err();
        assert!(e.contains("--verify") && e.contains("stream"), "{e}");
        let a = parse_udp(&["--verify"]).unwrap();
        assert!(params(&a, Test::UdpStream, 1472, (1, 1)).is_err());
        let a = parse(&["--verify"]).unwrap();
        assert!(params(&a, Test::Stream, 1024, (1, 1)).unwrap().verify);
    }

    #[test]
    fn udp_rate_parses_like_iperf3() {
        assert_eq!(parse_delay("10ms"), Ok(10_000));
        assert_eq!(parse_delay("250us"), Ok(250));
        assert_eq!(parse_delay("0.5s"), Ok(500_000));
        assert_eq!(parse_delay("3"), Ok(3_000));
        assert!(parse_delay("-1ms").is_err());
        assert!(parse_delay("fast").is_err());
        assert_eq!(parse_rate("100M"), Ok(100_000_000));
        assert_eq!(parse_rate("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_rate("500k"), Ok(500_000));
        assert!(parse_rate("x").is_err());
        let a = parse_udp(&["-b", "10M"]).unwrap();
        assert_eq!(
            params(&a, Test::UdpStream, 1472, (1, 1)).unwrap().rate_bps,
            Some(10_000_000)
        );
    }

    #[test]
    fn link_errors_name_the_option_value() {
        let a = parse(&["--link", "lo"]).unwrap();
        let p = params(&a, Test::Stream, 1024, (1, 1)).unwrap();
        let e = run_stack(StackKind::Netfold, a.link.local(), &p)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--link lo") && !e.contains("Lo "), "{e}");
    }

    #[test]
    fn explicit_mtu_reaches_the_kernel_or_is_refused() {
        let a = parse(&["--mtu", "9000"]).unwrap();
        let p = params(&a, Test::Stream, 1024, (1, 1)).unwrap();
        assert!(p.mtu_given && p.mtu == 9000);
        assert!(
            !params(&parse(&[]).unwrap(), Test::Stream, 1024, (1, 1))
                .unwrap()
                .mtu_given
        );
    }
}
