//! `-H HOST[:PORT]`, `-P N`, `--bidir` and `--interval S` on the netperf-style tests, and the
//! `udp-rr` test: runs through [`crate::bench::remote`], against a `netfold server` on another
//! host (-H) or, for local kernel runs, against a server half on a thread of this process.

use super::perf::{Args, KernelLink, LinkArg, RrArgs, StackKind};
use super::CmdResult;
use crate::bench::remote::{self, ClientResult, Request, TestKind, CONTROL_PORT};
use crate::bench::remote_net::{netfold_pipe_pair, open_netfold, NetfoldNet};
use crate::bench::report::{self, mbps, Row};
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

/// The options of two-host and multi-stream runs (flattened into every test's options).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RemoteOpts {
    /// Measure against `netfold server` on HOST[:PORT] (port 12866 by default, netserver's):
    /// this host is the client, on kernel sockets, or on netfold with --link tap:NAME,
    /// tun:NAME, packet:IFNAME or xdp:IFNAME[@QUEUE] and --addr.
    #[arg(short = 'H', long = "host", value_name = "HOST[:PORT]")]
    pub host: Option<String>,
    /// With -H and --link tap:NAME|tun:NAME|packet:IFNAME|xdp:IFNAME[@QUEUE]: netfold's address and prefix on
    /// that device, e.g. 198.18.0.2/24 (the prefix decides which servers are on the link).
    #[arg(long = "addr", value_name = "ADDR/PREFIX")]
    pub addr: Option<String>,
    /// With --addr: the next hop for a server off netfold's subnet.
    #[arg(long = "gateway", value_name = "ADDR", requires = "addr")]
    pub gateway: Option<Ipv4Addr>,
    /// Parallel streams (stream, maerts): N connections at once; the row is their aggregate,
    /// the JSON lists each (`streams`).
    #[arg(short = 'P', long = "parallel", value_name = "N", value_parser = parse_streams)]
    pub parallel: Option<usize>,
    /// stream, maerts: both directions at once (N streams each way).
    #[arg(long)]
    pub bidir: bool,
    /// Report every S seconds: a row printed as each interval ends (before the table), a JSON
    /// line with --json-stream, `intervals` in each row with --json.
    #[arg(long = "interval", value_name = "S", value_parser = parse_interval)]
    pub report_interval: Option<f64>,
}

fn parse_streams(s: &str) -> Result<usize, String> {
    let n: usize = s.trim().parse().map_err(|_| {
        format!(
            "{s:?}: expected a number of streams, 1..={}",
            remote::MAX_STREAMS
        )
    })?;
    if !(1..=remote::MAX_STREAMS).contains(&n) {
        return Err(format!("-P {n}: expected 1..={}", remote::MAX_STREAMS));
    }
    Ok(n)
}

fn parse_interval(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    // Below a millisecond the reports would measure the sampler, not the link.
    if !(0.001..86400.0).contains(&v) {
        return Err(format!(
            "--interval {s}: expected seconds between 0.001 and a day"
        ));
    }
    Ok(v)
}

impl RemoteOpts {
    /// Whether a run goes through this module rather than the single-connection runners.
    pub fn applies(&self) -> bool {
        // (--addr alone comes here too, to be refused with a reason.)
        self.host.is_some()
            || self.addr.is_some()
            || self.parallel.is_some_and(|n| n > 1)
            || self.bidir
            || self.report_interval.is_some()
    }
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address -> the control address.
pub fn resolve(host: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = host.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, CONTROL_PORT));
    }
    let with_port = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{CONTROL_PORT}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| format!("-H {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("-H {host}: no address"))
}

/// `netfold udp-rr`.
pub fn udp_rr(a: RrArgs) -> CmdResult {
    run(TestKind::UdpRr, a.into())
}

/// Builds the request for one case.
fn request(test: TestKind, a: &Args, size: u64, rr: (usize, usize)) -> Result<Request, String> {
    let streams = a.remote.parallel.unwrap_or(1);
    if (streams > 1 || a.remote.bidir) && !matches!(test, TestKind::Stream | TestKind::Maerts) {
        return Err(format!(
            "-P and --bidir apply to stream and maerts; {} runs one flow",
            test.netperf_name()
        ));
    }
    if a.verify && !matches!(test, TestKind::Stream | TestKind::Maerts) {
        return Err(format!(
            "--verify applies to stream and maerts only; {} carries no byte stream",
            test.netperf_name()
        ));
    }
    if a.loss + a.reorder + a.duplicate + a.corrupt > 0.0 {
        return Err("impairments apply to the in-memory pipe only, not to kernel sockets".into());
    }
    if a.zerocopy != super::perf::ZeroCopy::Off {
        return Err(
            "--zerocopy is implemented for local runs (stream, maerts), not with -H".into(),
        );
    }
    if test.is_udp() && test == TestKind::UdpStream && size > 65507 {
        return Err("UDP messages are at most 65507 bytes".into());
    }
    let duration = match (a.length, a.bytes, a.transactions) {
        (Some(l), _, _) => Some(l),
        (None, None, None) => Some(2.0),
        _ => None,
    };
    Ok(Request {
        version: remote::PROTOCOL_VERSION,
        test,
        duration_s: duration,
        bytes: a.bytes.map(|b| (b / streams as u64).max(1)),
        transactions: a.transactions,
        send_size: size as usize,
        recv_size: a.recv_size.unwrap_or(size) as usize,
        req_size: rr.0,
        resp_size: rr.1,
        streams,
        bidir: a.remote.bidir,
        nodelay: a.nodelay,
        send_buffer: a.send_buffer.map(|v| v as usize),
        recv_buffer: a.recv_buffer.map(|v| v as usize),
        verify: a.verify,
        cpu: a.cpu,
    })
}

/// The client's side of a -H run: the kernel's sockets, or netfold on a device.
enum Client {
    Kernel,
    /// The stack (opened once for every case of the run), the device spec. Boxed: the TCP
    /// configuration inside makes it several times the size of `Kernel`.
    Netfold(Box<NetfoldNet>, String),
}

/// Checks -H, --link and --addr together and opens netfold's device when --link names one.
fn client(a: &Args, server: Option<SocketAddr>) -> Result<Client, Box<dyn std::error::Error>> {
    let Some(server) = server else {
        if let Some(d) = a.link.device() {
            return Err(format!(
                "--link {d} runs netfold as the client of a `netfold server`: it needs -H HOST \
                 and --addr ADDR/PREFIX (local runs take --link auto, lo, veth or tap)"
            )
            .into());
        }
        if a.remote.addr.is_some() {
            return Err(
                "--addr is netfold's address as the -H client on --link tap:NAME, \
                        tun:NAME, packet:IFNAME or xdp:IFNAME[@QUEUE]; local runs choose their own addresses"
                    .into(),
            );
        }
        return Ok(Client::Kernel);
    };
    match &a.link {
        LinkArg::Local(KernelLink::Auto) => {
            if a.remote.addr.is_some() {
                return Err(
                    "--addr goes with --link tap:NAME, tun:NAME, packet:IFNAME or xdp:IFNAME[@QUEUE] \
                            (netfold as the -H client); -H alone runs on kernel sockets"
                        .into(),
                );
            }
            Ok(Client::Kernel)
        }
        LinkArg::Local(k) => Err(format!(
            "-H with --link {}: that is a local run's link; for netfold as the client name its \
             device, e.g. --link tap:NAME --addr 198.18.0.2/24 (or tun:NAME, packet:IFNAME, xdp:IFNAME); \
             -H without --link runs on kernel sockets",
            k.name()
        )
        .into()),
        LinkArg::Device(dev) => {
            let cidr = a.remote.addr.as_deref().ok_or_else(|| {
                format!(
                    "-H with --link {dev} needs --addr ADDR/PREFIX: netfold's address on that \
                     device, e.g. --addr 198.18.0.2/24"
                )
            })?;
            let (ip, prefix) = super::serve::parse_cidr(cidr)?;
            if !server.is_ipv4() {
                return Err(format!("-H {server}: netfold as the client speaks IPv4 only").into());
            }
            let (mut net, what) =
                open_netfold(dev, ip, prefix, a.remote.gateway, a.mtu.map(|m| m as usize))?;
            // The client closes first in TCP_CRR, so its side holds TIME_WAIT: at 60 s (2 MSL)
            // the 16,384 ephemeral ports ran out within 10 s of crr at ~3,000 connections/s.
            // One second, as benchmark clients do (netfold's own pipe uses 100 ms); the
            // timestamps option (PAWS) guards against old duplicates meanwhile.
            net.tcp.time_wait = netfold::time::Duration::from_secs(1);
            eprintln!("netfold: client at {ip}/{prefix}, {what}");
            Ok(Client::Netfold(Box::new(net), dev.clone()))
        }
    }
}

/// Runs one request on `stack` (locally) or against -H; returns the link and placement labels.
fn run_one(
    stack: StackKind,
    a: &Args,
    req: &Request,
    server: Option<SocketAddr>,
    client: &Client,
) -> Result<(ClientResult, String, String, usize), Box<dyn std::error::Error>> {
    let interval = a.remote.report_interval.map(Duration::from_secs_f64);
    let rate = a.bitrate.filter(|&b| b > 0);
    if let Some(addr) = server {
        return match client {
            Client::Kernel => {
                let r = remote::run_client(addr, req, interval, rate)?;
                // The path MTU to another host is not known here: 0 in the row, "-" nowhere
                // else.
                Ok((r, format!("-H {addr}"), "2 hosts".into(), 0))
            }
            Client::Netfold(net, dev) => {
                let r = remote::run_client_on(&**net, addr, req, interval, rate)?;
                Ok((r, format!("{dev} -H {addr}"), "2 hosts".into(), net.mtu))
            }
        };
    }
    if stack == StackKind::Netfold && a.link.local() == KernelLink::Auto {
        // Two netfold stacks on the in-memory pipe, each on its own driver thread, with the
        // same client and server halves as -H and the kernel's local runs.
        let p = super::perf::params(a, crate::bench::Test::Stream, 1, (1, 1))?;
        let (client, server) = netfold_pipe_pair(&p)?;
        // The server's stack must outlive its half: its last reply is still in the send
        // buffer when the server thread returns, and dropping the runtime would discard it.
        let server = std::sync::Arc::new(server);
        let (addr, h) = remote::local_server_on(
            server.clone(),
            crate::bench::netfold_pipe::SERVER_ADDR.into(),
        )?;
        let r = remote::run_client_on(&client, addr, req, interval, rate);
        let _ = h.join();
        drop(server);
        return Ok((r?, "pipe".into(), "unpinned".into(), p.mtu));
    }
    if stack != StackKind::Kernel {
        return Err(format!(
            "-P, --bidir, --interval and udp-rr run on kernel sockets (--stack kernel), on \
             netfold's stacks over the in-memory pipe (--stack netfold) or against a server \
             (-H); the {} stack's runner carries one connection",
            stack.name()
        )
        .into());
    }
    match a.link.local() {
        KernelLink::Auto | KernelLink::Lo => {
            let (addr, h) = remote::local_server(std::net::Ipv4Addr::LOCALHOST.into(), None)?;
            let r = remote::run_client(addr, req, interval, rate);
            let _ = h.join();
            Ok((
                r?,
                "lo".into(),
                "unpinned".into(),
                crate::bench::kernel::lo_mtu(),
            ))
        }
        KernelLink::Emu => Err(
            "-P, --bidir, --interval and udp-rr do not run over --link emu yet (its namespaces \
             are set up per netperf-style run); use `netfold emulate` with your own namespaces"
                .into(),
        ),
        KernelLink::Xdp => Err(
            "-P, --bidir, --interval and udp-rr do not run over --link xdp yet; run `netfold \
             server --link xdp:IFNAME` and `-H` clients with --link xdp:IFNAME instead"
                .into(),
        ),
        KernelLink::Veth | KernelLink::Tap | KernelLink::Tun => {
            let v = crate::bench::kernel::Veth::create(a.mtu.map(|m| m as usize))?;
            let (addr, h) = remote::local_server(
                crate::bench::kernel::VETH_SERVER.into(),
                Some(v.ns(true).to_string()),
            )?;
            let client_ns = v.ns(false).to_string();
            let req2 = req.clone();
            // The client's threads are created from a thread inside the client's namespace,
            // so their sockets live there too.
            let r = std::thread::spawn(move || -> Result<ClientResult, String> {
                crate::bench::kernel::enter_netns(&client_ns).map_err(|e| e.to_string())?;
                remote::run_client(addr, &req2, interval, rate).map_err(|e| e.to_string())
            })
            .join()
            .map_err(|_| "client thread panicked")?;
            let _ = h.join();
            // A veth pair is created at Ethernet's MTU unless --mtu says otherwise.
            let mtu = a
                .mtu
                .map(|m| m as usize)
                .unwrap_or(super::perf::DEFAULT_MTU);
            Ok((r?, "veth".into(), "unpinned".into(), mtu))
        }
    }
}

fn make_row(
    stack: StackKind,
    a: &Args,
    req: &Request,
    r: ClientResult,
    link: String,
    placement: String,
) -> Row {
    let t = req.test;
    let mut row = Row {
        test: t.netperf_name().into(),
        stack: match (&a.remote.host, a.link.device()) {
            (Some(_), Some(_)) => "netfold".into(),
            (Some(_), None) => "kernel".into(),
            (None, _) => stack.name().into(),
        },
        link,
        mtu: a.mtu.unwrap_or(0) as usize,
        msg_size: if t.is_transactional() {
            req.req_size
        } else {
            req.send_size
        },
        resp_size: t.is_transactional().then_some(req.resp_size),
        placement,
        bytes: r.bytes,
        elapsed_s: r.elapsed_s,
        verified: r.verified,
        iterations: 1,
        streams: r.streams.clone(),
        intervals: r.intervals.clone(),
        ..Default::default()
    };
    if t.is_transactional() {
        row.trans_per_s = Some(if r.elapsed_s > 0.0 {
            r.transactions as f64 / r.elapsed_s
        } else {
            0.0
        });
        row.details
            .insert("transactions".into(), r.transactions.into());
        row.latency_us = r.latency.as_ref().and_then(|h| h.summary());
        row.latency_hist = r.latency.clone();
    } else {
        row.throughput_mbps = Some(mbps(r.bytes, r.elapsed_s));
    }
    if req.bidir {
        row.details
            .insert("c2s_mbps".into(), mbps(r.bytes_c2s, r.elapsed_s).into());
        row.details
            .insert("s2c_mbps".into(), mbps(r.bytes_s2c, r.elapsed_s).into());
    }
    if t == TestKind::UdpStream {
        let u = crate::bench::udp::UdpStats {
            sent_datagrams: r.sent_datagrams,
            sent_bytes: r.sent_bytes,
            received_datagrams: r.server.datagrams_received,
            received_bytes: r.server.bytes_received,
            jitter_ms: r.server.jitter_ms,
        };
        row.sent_datagrams = Some(u.sent_datagrams);
        row.received_datagrams = Some(u.received_datagrams);
        row.loss_pct = Some(u.loss_pct());
        row.send_throughput_mbps = Some(mbps(u.sent_bytes, r.elapsed_s));
        row.recv_throughput_mbps = Some(mbps(u.received_bytes, r.elapsed_s));
        row.jitter_ms = u.jitter_ms;
    }
    if t == TestKind::UdpRr {
        row.sent_datagrams = Some(r.sent_datagrams);
        row.received_datagrams = Some(r.server.datagrams_received);
        row.details
            .insert("lost_transactions".into(), r.lost_transactions.into());
        // Transactions whose request or response was lost, of all requests sent.
        row.loss_pct = Some(if r.sent_datagrams > 0 {
            r.lost_transactions as f64 * 100.0 / r.sent_datagrams as f64
        } else {
            0.0
        });
    }
    row.details
        .insert("server_elapsed_s".into(), r.server.elapsed_s.into());
    if a.cpu {
        let ncpus = crate::bench::affinity::online_cpus();
        let headline = row.headline();
        let f =
            crate::bench::stats::cpu_figures(r.client_cpu_s, r.elapsed_s, ncpus, r.bytes, headline);
        // The client's (this host's) CPU, netperf's "local"; the server's is in details.
        row.cpu_util = Some(f.cpu_util_pct);
        row.scaled_throughput_mbps = Some(f.scaled_throughput_mbps);
        row.details
            .insert("client_cpu_s".into(), r.client_cpu_s.into());
        if let Some(s) = r.server.cpu_s {
            row.details.insert("server_cpu_s".into(), s.into());
        }
        if t.is_transactional() {
            row.service_demand_us_per_tr = Some(if r.transactions > 0 {
                r.client_cpu_s * 1e6 / r.transactions as f64
            } else {
                0.0
            });
        } else {
            row.service_demand_us_per_kb = Some(f.service_demand_us_per_kb);
        }
    }
    row
}

/// Runs every stack x case through the remote path and prints the result.
pub fn run(test: TestKind, a: Args) -> CmdResult {
    if a.iterations.is_some() {
        return Err(
            "-i: -H, -P, --bidir, --interval and udp-rr make one run per row \
                    (iterating to a confidence interval is not built for them); refusing \
                    rather than ignoring it"
                .into(),
        );
    }
    if a.remote.host.is_some()
        && a.stack
            .iter()
            .any(|&s| s != StackKind::Netfold && s != StackKind::Kernel)
    {
        return Err(
            "-H runs this host's kernel sockets against the server (or netfold's with --link \
             tap:NAME, tun:NAME, packet:IFNAME or xdp:IFNAME[@QUEUE]): --stack has no effect there"
                .into(),
        );
    }
    let server = match &a.remote.host {
        Some(h) => Some(resolve(h)?),
        None => None,
    };
    let client = client(&a, server)?;
    let cases: Vec<(u64, (usize, usize))> = if test.is_transactional() {
        a.rr_size.iter().map(|&rr| (1, rr)).collect()
    } else {
        a.send_size.0.iter().map(|&m| (m, (1, 1))).collect()
    };
    let stacks: Vec<StackKind> = if a.remote.host.is_some() {
        vec![StackKind::Kernel]
    } else {
        a.stack.clone()
    };
    let mut rows = Vec::new();
    for (size, rr) in cases {
        for &s in &stacks {
            let req = request(test, &a, size, rr)?;
            let name = match client {
                Client::Netfold(..) => "netfold",
                Client::Kernel => s.name(),
            };
            // Interval reports print as each interval ends (iperf3's way): rows under a
            // heading, or JSON lines with --json-stream; --json and --csv keep them for the end.
            let live = a.remote.report_interval.is_some() && (a.json_stream || !a.json && !a.csv);
            if live {
                remote::set_live(Some(live_printer(
                    rows.len() + 1,
                    name,
                    test,
                    &req,
                    a.json_stream,
                )));
            }
            let r = run_one(s, &a, &req, server, &client);
            remote::set_live(None);
            let (r, link, placement, mtu) =
                r.map_err(|e| format!("{name} {}: {e}", test.netperf_name()))?;
            let mut row = make_row(s, &a, &req, r, link, placement);
            row.mtu = mtu;
            rows.push(row);
        }
    }
    if a.json_stream {
        report::print_json_end(&rows)?;
    } else if a.json {
        report::print_json(&rows)?;
    } else if a.csv {
        report::print_csv(&rows);
    } else {
        // The interval rows were printed as they came.
        print!("{}", table_with(&rows, false));
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

/// The heading of a row's interval reports.
fn interval_heading(label: &str, transactional: bool) -> String {
    format!(
        "Intervals of {label}:\n{:>15}  {:>14}  {:>12}",
        "Interval secs",
        if transactional {
            "Transactions"
        } else {
            "Bytes"
        },
        if transactional {
            "Trans/s"
        } else {
            "10^6bits/s"
        }
    )
}

/// One interval report as a row under [`interval_heading`].
fn interval_line(iv: &remote::Interval, transactional: bool) -> String {
    let span = format!("{:.2}-{:.2}", iv.start_s, iv.end_s);
    let (n, rate) = if transactional {
        (iv.transactions.unwrap_or(0), iv.trans_per_s.unwrap_or(0.0))
    } else {
        (iv.bytes, iv.throughput_mbps.unwrap_or(0.0))
    };
    format!("{span:>15}  {n:>14}  {rate:>12.2}")
}

/// Prints each interval report of row `index` as its interval ends: under a heading (the
/// first time), or as a JSON line.
fn live_printer(
    index: usize,
    stack: &str,
    test: TestKind,
    req: &Request,
    json: bool,
) -> remote::LiveFn {
    let transactional = test.is_transactional();
    let size = if transactional {
        req.req_size
    } else {
        req.send_size
    };
    let label = format!("row {index} ({stack} {size})");
    let (stack, name) = (stack.to_string(), test.netperf_name());
    let first = std::sync::atomic::AtomicBool::new(true);
    Box::new(move |iv: &remote::Interval| {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        if json {
            let mut v = serde_json::json!({
                "event": "interval",
                "row": index,
                "test": name,
                "stack": stack,
                "msg_size": size,
            });
            if let (Some(m), Ok(serde_json::Value::Object(i))) =
                (v.as_object_mut(), serde_json::to_value(iv))
            {
                m.extend(i);
            }
            let _ = writeln!(out, "{v}");
        } else {
            if first.swap(false, std::sync::atomic::Ordering::Relaxed) {
                let _ = writeln!(out, "{}", interval_heading(&label, transactional));
            }
            let _ = writeln!(out, "{}", interval_line(iv, transactional));
        }
        let _ = out.flush();
    })
}

/// The usual table, then each row's streams and, with `intervals`, its interval reports as
/// rows of their own (left out when they were printed live).
pub fn table_with(rows: &[Row], intervals: bool) -> String {
    use std::fmt::Write as _;
    let mut o = report::table(rows);
    for (i, r) in rows.iter().enumerate() {
        let label = format!("row {} ({} {})", i + 1, r.stack, r.msg_size);
        if r.streams.len() > 1 {
            let _ = writeln!(o, "\nStreams of {label}:");
            let _ = writeln!(
                o,
                "{:>6}  {:<9}  {:>14}  {:>12}",
                "Stream", "Direction", "Bytes", "10^6bits/s"
            );
            for s in &r.streams {
                let _ = writeln!(
                    o,
                    "{:>6}  {:<9}  {:>14}  {:>12.2}",
                    s.index, s.direction, s.bytes, s.throughput_mbps
                );
            }
        }
        if intervals && !r.intervals.is_empty() {
            let transactional = r.trans_per_s.is_some();
            let _ = writeln!(o, "\n{}", interval_heading(&label, transactional));
            for iv in &r.intervals {
                let _ = writeln!(o, "{}", interval_line(iv, transactional));
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_resolve_with_the_default_port() {
        assert_eq!(resolve("198.18.0.1").unwrap().port(), CONTROL_PORT);
        assert_eq!(resolve("198.18.0.1:5000").unwrap().port(), 5000);
        assert_eq!(resolve("[::1]:7").unwrap().port(), 7);
        assert_eq!(resolve("::1").unwrap().port(), CONTROL_PORT);
    }

    #[test]
    fn stream_options_are_checked() {
        assert!(parse_streams("0").is_err());
        assert!(parse_streams("129").is_err());
        assert_eq!(parse_streams("4"), Ok(4));
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("-1").is_err());
        assert_eq!(parse_interval("0.5"), Ok(0.5));
    }
}
