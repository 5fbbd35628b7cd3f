//! Result rows and their output formats: a netperf-like table (with ratios between stacks),
//! JSON, CSV.

use super::latency::LatencyUs;
use serde::Serialize;

/// One measured configuration (a stack x a message size), after iterations.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Row {
    pub test: String,
    pub stack: String,
    /// The IP family of the connections: "IPv4" or "IPv6" (`--family`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub family: String,
    pub link: String,
    pub mtu: usize,
    /// Streams: bytes per send call; RR/CRR: the request size.
    pub msg_size: usize,
    /// RR/CRR: the response size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resp_size: Option<usize>,
    /// Where the two ends ran: "1 thread" (both ends in one thread, one CPU), "1 CPU" (two
    /// threads on one CPU), "2 CPUs" (one CPU each), "unpinned".
    #[serde(skip_serializing_if = "String::is_empty")]
    pub placement: String,
    pub bytes: u64,
    pub elapsed_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trans_per_s: Option<f64>,
    /// RR/CRR: per-transaction latency (all iterations together).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<LatencyUs>,
    /// RR/CRR: the whole latency distribution (for `--latency-plot`; not in the JSON).
    #[serde(skip)]
    pub latency_hist: Option<super::latency::Histogram>,
    /// UDP_STREAM: datagrams sent by the client and received by the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_datagrams: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_datagrams: Option<u64>,
    /// UDP_STREAM: percent of the datagrams sent that were not received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    /// UDP_STREAM: the sender's rate and the receiver's (the headline is the receiver's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_throughput_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recv_throughput_mbps: Option<f64>,
    /// UDP_STREAM: RFC 3550 interarrival jitter at the receiver, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// Percent of the machine's CPU (all cores) used by the test's threads (`--cpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_util: Option<f64>,
    /// Microseconds of CPU per KiB moved (`--cpu`, streams).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_demand_us_per_kb: Option<f64>,
    /// Microseconds of CPU per transaction (`--cpu`, RR/CRR: netperf's us/Tr).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_demand_us_per_tr: Option<f64>,
    /// Throughput scaled to 100% CPU (`--cpu`): throughput / utilization, the OLS 2002 study's metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaled_throughput_mbps: Option<f64>,
    /// netfold streams: passes over payload bytes (copies plus checksum passes of their
    /// own) per payload byte, at the sending stack and at the receiving stack (the counts
    /// are in `details.payload_passes`). In the table with `--cpu`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes_per_byte_sender: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes_per_byte_receiver: Option<f64>,
    /// "sender" or "receiver": the end whose passes are not counted because it is not a
    /// netfold stack (the Linux kernel across a TAP or TUN); its `passes_per_byte_*` is
    /// absent and the table shows "n/a".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes_not_counted: Option<&'static str>,
    /// Iterations run (`-i`), and whether the confidence interval (`-I`) was met.
    pub iterations: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci_width_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci_met: Option<bool>,
    /// Extra per-stack facts (counters, clock fast-forward, ...).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub details: serde_json::Map<String, serde_json::Value>,
    /// `-P N` / `--bidir`: each stream's bytes and throughput (the row is their aggregate).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<super::remote::StreamRow>,
    /// `--interval S`: periodic reports over the run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<super::remote::Interval>,
}

impl Row {
    /// The headline number: Mbit/s for streams, transactions/s for RR/CRR.
    pub fn headline(&self) -> f64 {
        self.throughput_mbps.or(self.trans_per_s).unwrap_or(0.0)
    }
}

/// Throughput in 10^6 bits per second, netperf's unit.
pub fn mbps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e6
    } else {
        0.0
    }
}

pub fn print_json(rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    println!("{}", serde_json::to_string_pretty(&json_value(rows))?);
    Ok(())
}

/// `--json-stream`'s last line: `{"event": "end", ...}` with everything `--json` prints.
pub fn print_json_end(rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    let mut v = json_value(rows);
    if let Some(m) = v.as_object_mut() {
        m.insert("event".into(), "end".into());
    }
    println!("{}", serde_json::to_string(&v)?);
    Ok(())
}

/// What `--json` prints: the machine, the links, the rows, their ratios and warnings.
pub fn json_value(rows: &[Row]) -> serde_json::Value {
    serde_json::json!({
        "machine": super::machine::Machine::current(),
        "links": links(rows)
            .into_iter()
            .map(|(link, mtus)| serde_json::json!({
                "link": link,
                "mtu": mtus,
                "description": link_description(&link),
            }))
            .collect::<Vec<_>>(),
        "results": rows,
        "ratios": ratios(rows),
        "warnings": warnings(rows, available_cpus()),
    })
}

/// The number of CPUs this process may run on (1 if unknown).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What a link of the table's Link column is, for the lines above the table.
pub fn link_description(link: &str) -> &'static str {
    match link {
        "pipe" => "in-memory link inside this process: both stacks in user space, frames handed over in memory, no system calls",
        "lo" => "the kernel's loopback: the kernel's TCP at both ends, driven through socket system calls",
        "veth" => "a veth pair between two network namespaces: the kernel's TCP at both ends, through socket system calls",
        "tap" => "a TAP device: the user-space stack in this process at one end, the kernel's TCP at the other",
        "tun" => "a TUN device (bare IP, no Ethernet): the user-space stack in this process at one end, the kernel's TCP at the other",
        "emu" => "two TAPs in two network namespaces joined by netfold's user-space link emulator",
        "xdp" => "a veth pair between two network namespaces: the user-space stack at both ends, each on an AF_XDP socket",
        _ => "",
    }
}

/// Links that carry like traffic: a user-space stack on a TAP or TUN against the kernel, or at
/// both ends of a veth pair on AF_XDP sockets, is compared with the kernel against itself over
/// a veth pair at the same MTU (the kernel's counterpart of `--link tap` and `--link xdp`);
/// every other link only with itself.
fn link_class(link: &str) -> &str {
    match link {
        "tap" | "tun" | "veth" | "xdp" => "device",
        l => l,
    }
}

/// Each link in the rows (in order of appearance) with the MTUs it ran at.
pub fn links(rows: &[Row]) -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<(String, Vec<usize>)> = Vec::new();
    for r in rows.iter().filter(|r| !r.link.is_empty()) {
        match v.iter_mut().find(|(l, _)| *l == r.link) {
            Some((_, m)) if !m.contains(&r.mtu) => m.push(r.mtu),
            Some(_) => {}
            None => v.push((r.link.clone(), vec![r.mtu])),
        }
    }
    v
}

/// One ratio between two rows measured alike, as the table shows it and the JSON carries it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ratio {
    /// "netfold/kernel", "netfold/smoltcp", "zero-copy/copy", "IPv6/IPv4".
    pub name: String,
    pub msg_size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resp_size: Option<usize>,
    pub placement: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub family: String,
    /// The numerator's link and the denominator's (the same, or a TAP/TUN against the
    /// kernel's veth at the same MTU).
    pub link: String,
    pub other_link: String,
    pub mtu: usize,
    /// The numerator's headline over the denominator's (Mbit/s or transactions/s).
    pub ratio: f64,
}

/// Whether two rows were measured alike: same sizes, family, placement, link class and MTU.
fn alike(a: &Row, b: &Row) -> bool {
    a.msg_size == b.msg_size
        && a.resp_size == b.resp_size
        && a.family == b.family
        && a.placement == b.placement
        && a.mtu == b.mtu
        && link_class(&a.link) == link_class(&b.link)
}

/// Same sizes over the same link and MTU: what two rows of one stack must share for a ratio
/// of one setting (zero-copy, family) between them.
fn same_test(a: &Row, b: &Row) -> bool {
    a.msg_size == b.msg_size && a.resp_size == b.resp_size && a.link == b.link && a.mtu == b.mtu
}

fn ratio_of(name: String, a: &Row, b: &Row) -> Option<Ratio> {
    (b.headline() > 0.0).then(|| Ratio {
        name,
        msg_size: a.msg_size,
        resp_size: a.resp_size,
        placement: a.placement.clone(),
        family: a.family.clone(),
        link: a.link.clone(),
        other_link: b.link.clone(),
        mtu: a.mtu,
        ratio: a.headline() / b.headline(),
    })
}

/// The stacks other than netfold in the rows, sorted.
fn other_stacks(rows: &[Row]) -> Vec<&str> {
    let mut v: Vec<&str> = rows
        .iter()
        .map(|r| r.stack.as_str())
        .filter(|s| *s != "netfold")
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Every ratio the rows allow, only ever between rows measured alike: netfold over each other
/// stack, netfold's zero-copy rows over their copying twins, IPv6 over IPv4.
pub fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let mut v = Vec::new();
    let others = other_stacks(rows);
    for a in rows.iter().filter(|r| r.stack == "netfold") {
        for x in &others {
            if let Some(b) = rows.iter().find(|b| b.stack == *x && alike(a, b)) {
                v.extend(ratio_of(format!("netfold/{x}"), a, b));
            }
        }
    }
    for z in rows.iter().filter(|r| r.stack == "netfold") {
        let Some(place) = z.placement.strip_suffix(", zc") else {
            continue;
        };
        if let Some(c) = rows.iter().find(|r| {
            r.stack == "netfold" && same_test(r, z) && r.family == z.family && r.placement == place
        }) {
            v.extend(ratio_of("zero-copy/copy".into(), z, c).map(|mut r| {
                r.placement = place.into();
                r
            }));
        }
    }
    for b in rows.iter().filter(|r| r.family == "IPv6") {
        if let Some(a) = rows.iter().find(|a| {
            a.family == "IPv4"
                && a.stack == b.stack
                && same_test(a, b)
                && a.placement == b.placement
        }) {
            v.extend(ratio_of(format!("{} IPv6/IPv4", b.stack), b, a));
        }
    }
    v
}

/// Cautions that belong beside the figures: a two-CPU placement on a machine with no more
/// than two CPUs.
pub fn warnings(rows: &[Row], cpus: usize) -> Vec<String> {
    let mut w = Vec::new();
    let two = |r: &&Row| r.placement.starts_with("2 CPUs");
    if cpus <= 2 && rows.iter().any(|r| two(&r)) {
        let kernel = rows.iter().filter(two).any(|r| r.stack == "kernel");
        let online = netfold_os::cpu::online_cpus();
        w.push(format!(
            "warning: this process can use {cpus} CPU{}{}, so the 2-CPU rows share their \
             cores with everything else running here{}; do not read a ratio at 2 CPUs as a \
             difference between the stacks",
            if cpus == 1 { "" } else { "s" },
            if online != cpus {
                format!(" (of {online} online)")
            } else {
                String::new()
            },
            if kernel {
                ", and the kernel's figure there is depressed by the shared cores"
            } else {
                ""
            }
        ));
    }
    w
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}")).unwrap_or_default()
}

pub fn print_csv(rows: &[Row]) {
    println!("test,stack,link,mtu,msg_size,bytes,elapsed_s,throughput_mbps,trans_per_s,verified,cpu_util,service_demand_us_per_kb,scaled_throughput_mbps,iterations,ci_width_pct,ci_met,placement,resp_size,latency_mean_us,latency_p50_us,latency_p99_us,latency_p999_us,service_demand_us_per_tr,sent_datagrams,received_datagrams,loss_pct,jitter_ms");
    let n = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in rows {
        let lat = |f: fn(&LatencyUs) -> f64| opt(r.latency_us.as_ref().map(f), 3);
        println!(
            "{},{},{},{},{},{},{:.6},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.test,
            r.stack,
            r.link,
            r.mtu,
            r.msg_size,
            r.bytes,
            r.elapsed_s,
            opt(r.throughput_mbps, 2),
            opt(r.trans_per_s, 2),
            r.verified.map(|v| v.to_string()).unwrap_or_default(),
            opt(r.cpu_util, 2),
            opt(r.service_demand_us_per_kb, 4),
            opt(r.scaled_throughput_mbps, 2),
            r.iterations,
            opt(r.ci_width_pct, 2),
            r.ci_met.map(|v| v.to_string()).unwrap_or_default(),
            r.placement,
            n(r.resp_size.map(|x| x as u64)),
            lat(|l| l.mean),
            lat(|l| l.p50),
            lat(|l| l.p99),
            lat(|l| l.p999),
            opt(r.service_demand_us_per_tr, 4),
            n(r.sent_datagrams),
            n(r.received_datagrams),
            opt(r.loss_pct, 3),
            opt(r.jitter_ms, 4),
        );
    }
}

/// The message column: the send size, or REQ,RESP for RR/CRR.
fn size_label(r: &Row) -> String {
    match r.resp_size {
        Some(resp) => format!("{},{resp}", r.msg_size),
        None => r.msg_size.to_string(),
    }
}

/// netperf-style table: the column heads name the same quantities netperf's do, plus where the
/// two ends ran. RR/CRR rows add latency percentiles, UDP rows both sides' datagram counts.
/// Lines above it say what each link is. When several stacks were measured, ratios of netfold
/// to each other stack follow, only between rows measured alike (size, placement, link class
/// and MTU), after a warning when 2-CPU rows ran on a machine with no more than two CPUs.
pub fn print_table(rows: &[Row]) {
    print!("{}", table(rows));
}

/// The table as text, with the cautions for this machine's CPU count.
pub fn table(rows: &[Row]) -> String {
    table_for(rows, available_cpus())
}

/// The table as text, as it reads on a machine with `cpus` CPUs.
pub fn table_for(rows: &[Row], cpus: usize) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    if rows.is_empty() {
        return o;
    }
    let test = &rows[0].test;
    let transactional = rows[0].trans_per_s.is_some();
    let udp = rows.iter().any(|r| r.sent_datagrams.is_some());
    let cpu = rows.iter().any(|r| r.cpu_util.is_some());
    // Either end: over a TAP in maerts only the receiver (netfold) is counted.
    let passes = cpu
        && rows
            .iter()
            .any(|r| r.passes_per_byte_sender.is_some() || r.passes_per_byte_receiver.is_some());
    let _ = writeln!(o, "{test} TEST (netfold harness)");
    // What each link is: an in-process link and the kernel's loopback are not alike.
    let ls = links(rows);
    let lw = ls.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    for (link, mtus) in &ls {
        let d = link_description(link);
        if d.is_empty() {
            continue;
        }
        let m: Vec<String> = mtus.iter().map(|m| m.to_string()).collect();
        let _ = writeln!(o, "{link:<lw$}  {d}; MTU {}", m.join(", "));
    }
    let ci = rows.iter().any(|r| r.ci_met.is_some());
    let unit = if transactional {
        "Trans/s"
    } else {
        "10^6bits/s"
    };
    let (h1, h2): (Vec<String>, Vec<String>) = {
        let mut h: Vec<(&str, &str)> = vec![
            ("Stack", ""),
            ("Family", ""),
            ("Link", ""),
            ("Placement", ""),
            ("MTU", "bytes"),
            ("Message", "Size"),
            ("Bytes", ""),
            ("Elapsed", "secs."),
            ("Throughput", unit),
        ];
        if transactional {
            h.extend([
                ("Latency", "mean us"),
                ("Latency", "p50 us"),
                ("Latency", "p99 us"),
                ("Latency", "p99.9 us"),
            ]);
        }
        if udp {
            h.extend([
                ("Sent", "datagrams"),
                ("Received", "datagrams"),
                ("Loss", "%"),
                ("Sent", "10^6bits/s"),
                ("Jitter", "ms"),
            ]);
        }
        if cpu {
            h.extend([
                ("CPU", "util %"),
                ("Service", if transactional { "us/Tr" } else { "us/KB" }),
                ("Scaled", "to 100% CPU"),
            ]);
        }
        if passes {
            h.extend([("Passes/B", "sender"), ("Passes/B", "receiver")]);
        }
        if ci {
            h.extend([("CI width", "%"), ("CI", "met")]);
        }
        h.push(("Verified", ""));
        h.into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .unzip()
    };
    let mut lines: Vec<Vec<String>> = vec![h1, h2];
    for r in rows {
        let ver = r
            .verified
            .map(|v| if v { "yes" } else { "NO" })
            .unwrap_or("-");
        let mut l = vec![
            r.stack.clone(),
            if r.family.is_empty() {
                "IPv4".into()
            } else {
                r.family.clone()
            },
            r.link.clone(),
            r.placement.clone(),
            r.mtu.to_string(),
            size_label(r),
            r.bytes.to_string(),
            format!("{:.2}", r.elapsed_s),
            format!("{:.2}", r.headline()),
        ];
        if transactional {
            let lat = |f: fn(&LatencyUs) -> f64| {
                r.latency_us
                    .as_ref()
                    .map(|l| format!("{:.1}", f(l)))
                    .unwrap_or_else(|| "-".into())
            };
            l.extend([
                lat(|l| l.mean),
                lat(|l| l.p50),
                lat(|l| l.p99),
                lat(|l| l.p999),
            ]);
        }
        if udp {
            let n = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
            l.extend([
                n(r.sent_datagrams),
                n(r.received_datagrams),
                opt(r.loss_pct, 2),
                opt(r.send_throughput_mbps, 2),
                opt(r.jitter_ms, 4),
            ]);
        }
        if cpu {
            l.extend([
                opt(r.cpu_util, 1),
                opt(r.service_demand_us_per_tr.or(r.service_demand_us_per_kb), 3),
                opt(r.scaled_throughput_mbps, 1),
            ]);
        }
        if passes {
            let p = |v: Option<f64>, end: &str| match v {
                Some(x) => format!("{x:.2}"),
                None if r.passes_not_counted == Some(end) => "n/a".into(),
                None => "-".into(),
            };
            l.extend([
                p(r.passes_per_byte_sender, "sender"),
                p(r.passes_per_byte_receiver, "receiver"),
            ]);
        }
        if ci {
            l.extend([
                opt(r.ci_width_pct, 2),
                match r.ci_met {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "-".into(),
                },
            ]);
        }
        l.push(ver.into());
        lines.push(l);
    }
    // The Family column only when IPv6 was measured (IPv4-only tables look as before).
    let families = rows.iter().any(|r| r.family == "IPv6");
    if !families {
        for l in &mut lines {
            l.remove(1);
        }
    }
    let left = if families { 4 } else { 3 };
    let ncol = lines[0].len();
    let width: Vec<usize> = (0..ncol)
        .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    for l in &lines {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c < left {
                    format!("{v:<w$}", w = width[c])
                } else {
                    format!("{v:>w$}", w = width[c])
                }
            })
            .collect();
        let _ = writeln!(o, "{}", cells.join("  ").trim_end());
    }
    if passes && rows.iter().any(|r| r.passes_not_counted.is_some()) {
        let _ = writeln!(
            o,
            "Passes/B n/a: the Linux kernel's end of a TAP/TUN run, not netfold's to count"
        );
    }
    for w in warnings(rows, cpus) {
        let _ = writeln!(o, "{w}");
    }
    stack_ratios(&mut o, rows, families);
    // `--zerocopy both`: each netfold zero-copy row against its copying twin.
    let zc: Vec<Ratio> = ratios(rows)
        .into_iter()
        .filter(|r| r.name == "zero-copy/copy")
        .collect();
    if !zc.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:>12} {:<10} {:>16}",
            "Message", "Placement", "zero-copy/copy"
        );
        for r in zc {
            let _ = writeln!(
                o,
                "{:>12} {:<10} {:>16}",
                r.msg_size,
                r.placement,
                format!("{:.2}x", r.ratio)
            );
        }
    }
    if families {
        family_ratios(&mut o, rows, cpu);
    }
    o
}

/// netfold over each other stack, per size, placement and link, only between rows measured
/// alike; a stack with no such row gets a line saying why there is no ratio.
fn stack_ratios(o: &mut String, rows: &[Row], families: bool) {
    use std::fmt::Write as _;
    if !rows.iter().any(|r| r.stack == "netfold") {
        return;
    }
    let all = ratios(rows);
    let others = other_stacks(rows);
    let (with, without): (Vec<&str>, Vec<&str>) = others
        .iter()
        .partition(|x| all.iter().any(|r| r.name == format!("netfold/{x}")));
    if !with.is_empty() {
        let _ = writeln!(o);
        let _ = write!(o, "{:>12} {:<10} {:<16}", "Message", "Placement", "Link");
        for x in &with {
            let _ = write!(o, " {:>16}", format!("netfold/{x}"));
        }
        let _ = writeln!(o);
        let mut missing = false;
        for a in rows.iter().filter(|r| r.stack == "netfold") {
            let mine: Vec<&Ratio> = all
                .iter()
                .filter(|r| {
                    r.link == a.link
                        && r.mtu == a.mtu
                        && r.msg_size == a.msg_size
                        && r.resp_size == a.resp_size
                        && r.placement == a.placement
                        && r.family == a.family
                        && r.name.starts_with("netfold/")
                })
                .collect();
            if mine.is_empty() {
                continue;
            }
            let shown = if families {
                format!("{} {}", a.placement, a.family)
            } else {
                a.placement.clone()
            };
            let links: Vec<&str> = {
                let mut v = vec![a.link.as_str()];
                for r in &mine {
                    if !v.contains(&r.other_link.as_str()) {
                        v.push(&r.other_link);
                    }
                }
                v
            };
            let link = format!("{} {}", links.join("/"), a.mtu);
            let _ = write!(o, "{:>12} {shown:<10} {link:<16}", size_label(a));
            for x in &with {
                let cell = match mine.iter().find(|r| r.name == format!("netfold/{x}")) {
                    Some(r) => format!("{:.2}x", r.ratio),
                    None => {
                        missing = true;
                        "-".into()
                    }
                };
                let _ = write!(o, " {cell:>16}");
            }
            let _ = writeln!(o);
        }
        if missing {
            let _ = writeln!(
                o,
                "-: that stack has no row at the same placement over a like link and MTU"
            );
        }
    }
    let desc = |s: &str| {
        let v: Vec<String> = links(
            &rows
                .iter()
                .filter(|r| r.stack == s)
                .cloned()
                .collect::<Vec<_>>(),
        )
        .into_iter()
        .map(|(l, m)| {
            let m: Vec<String> = m.iter().map(|m| m.to_string()).collect();
            format!("{l} (MTU {})", m.join(", "))
        })
        .collect();
        v.join(", ")
    };
    for x in without {
        let _ = writeln!(
            o,
            "no netfold/{x} ratio: {x} ran over {}, netfold over {}, which are not alike; \
             `--link tap`, `--link xdp` or `--link emu` (root) runs both over one kind of link",
            desc(x),
            desc("netfold")
        );
    }
}

/// `--family both`: for each stack, size and placement measured over both families, IPv6's
/// headline over IPv4's, and (with `--cpu`) IPv6's service demand over IPv4's.
fn family_ratios(o: &mut String, rows: &[Row], cpu: bool) {
    use std::fmt::Write as _;
    let v6: Vec<&Row> = rows.iter().filter(|r| r.family == "IPv6").collect();
    let pairs: Vec<(&Row, &Row)> = v6
        .iter()
        .filter_map(|b| {
            rows.iter()
                .find(|a| {
                    a.family == "IPv4"
                        && a.stack == b.stack
                        && a.msg_size == b.msg_size
                        && a.resp_size == b.resp_size
                        && a.placement == b.placement
                })
                .map(|a| (a, *b))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let _ = writeln!(o);
    let _ = write!(
        o,
        "{:<8} {:>12} {:<10} {:>16}",
        "Stack", "Message", "Placement", "IPv6/IPv4"
    );
    if cpu {
        let _ = write!(o, " {:>20}", "service IPv6/IPv4");
    }
    let _ = writeln!(o);
    for (a, b) in pairs {
        let ratio = |x: f64, y: f64| {
            if y > 0.0 {
                format!("{:.3}x", x / y)
            } else {
                "-".into()
            }
        };
        let _ = write!(
            o,
            "{:<8} {:>12} {:<10} {:>16}",
            b.stack,
            size_label(b),
            b.placement,
            ratio(b.headline(), a.headline())
        );
        if cpu {
            let sd = |r: &Row| {
                r.service_demand_us_per_tr
                    .or(r.service_demand_us_per_kb)
                    .unwrap_or(0.0)
            };
            let _ = write!(o, " {:>20}", ratio(sd(b), sd(a)));
        }
        let _ = writeln!(o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_is_in_megabits() {
        assert_eq!(mbps(125_000_000, 1.0), 1000.0);
        assert_eq!(mbps(1, 0.0), 0.0);
    }

    fn rr_row(stack: &str, placement: &str, tps: f64) -> Row {
        Row {
            test: "TCP_RR".into(),
            stack: stack.into(),
            placement: placement.into(),
            msg_size: 1,
            resp_size: Some(1),
            trans_per_s: Some(tps),
            latency_us: Some(LatencyUs {
                mean: 10.0,
                p50: 9.0,
                p90: 12.0,
                p99: 20.0,
                p999: 40.0,
                max: 50.0,
            }),
            service_demand_us_per_tr: Some(3.5),
            cpu_util: Some(50.0),
            ..Default::default()
        }
    }

    #[test]
    fn ratios_pair_rows_at_the_same_placement() {
        let rows = [
            rr_row("netfold", "1 CPU", 100_000.0),
            rr_row("netfold", "2 CPUs", 20_000.0),
            rr_row("kernel", "1 CPU", 200_000.0),
            rr_row("kernel", "2 CPUs", 10_000.0),
        ];
        let t = table(&rows);
        let line = |p: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with("1,1") && l.contains(p))
                .unwrap_or_else(|| panic!("no ratio line for {p}: {t}"))
                .to_string()
        };
        // 100k/200k at one CPU, 20k/10k at two: never 100k/10k.
        assert!(line("1 CPU").ends_with("0.50x"), "{t}");
        assert!(line("2 CPUs").ends_with("2.00x"), "{t}");
        assert!(!t.contains("10.00x"), "{t}");
        // Latency and us/Tr columns are in the table.
        assert!(
            t.contains("p99 us") && t.contains("us/Tr") && t.contains("3.500"),
            "{t}"
        );
        // A stack measured only at another placement gets no ratio, and a line saying so.
        let t = table(&[
            rr_row("netfold", "2 CPUs", 1.0),
            rr_row("smoltcp", "1 CPU", 2.0),
        ]);
        assert!(
            !t.contains("0.50x") && t.contains("no netfold/smoltcp ratio"),
            "{t}"
        );
    }

    fn stream_row(stack: &str, link: &str, mtu: usize, placement: &str, mbps: f64) -> Row {
        Row {
            test: "TCP_STREAM".into(),
            stack: stack.into(),
            link: link.into(),
            mtu,
            msg_size: 1024,
            placement: placement.into(),
            throughput_mbps: Some(mbps),
            ..Default::default()
        }
    }

    #[test]
    fn links_are_described_and_ratios_only_join_like_links() {
        let rows = [
            stream_row("netfold", "pipe", 1500, "1 CPU", 3000.0),
            stream_row("kernel", "lo", 65536, "1 CPU", 1000.0),
            stream_row("smoltcp", "pipe", 1500, "1 CPU", 1500.0),
        ];
        let t = table_for(&rows, 8);
        let head: Vec<&str> = t.lines().take(3).collect();
        assert!(
            head[1].starts_with("pipe") && head[1].contains("MTU 1500"),
            "{t}"
        );
        assert!(
            head[2].starts_with("lo") && head[2].contains("MTU 65536"),
            "{t}"
        );
        assert!(head[2].contains("system calls"), "{t}");
        // pipe against pipe: a ratio; pipe against lo: none, and a line saying why.
        assert!(t.contains("netfold/smoltcp") && t.contains("2.00x"), "{t}");
        assert!(!t.contains("3.00x"), "{t}");
        assert!(
            t.contains("no netfold/kernel ratio: kernel ran over lo (MTU 65536)"),
            "{t}"
        );
        let r = ratios(&rows);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].name.as_str(), r[0].ratio), ("netfold/smoltcp", 2.0));
        // A TAP against the kernel's veth at the same MTU is the like pair of --link tap.
        let rows = [
            stream_row("netfold", "tap", 1500, "2 CPUs", 900.0),
            stream_row("kernel", "veth", 1500, "2 CPUs", 300.0),
        ];
        assert_eq!(ratios(&rows)[0].ratio, 3.0);
        assert!(table_for(&rows, 8).contains("tap/veth 1500"));
    }

    #[test]
    fn two_cpu_rows_on_a_two_cpu_machine_carry_a_warning() {
        let rows = [
            rr_row("netfold", "2 CPUs", 20_000.0),
            rr_row("kernel", "2 CPUs", 10_000.0),
        ];
        let t = table_for(&rows, 2);
        assert!(
            t.contains("warning: this process can use 2 CPUs")
                && t.contains("kernel's figure there is depressed"),
            "{t}"
        );
        assert!(!table_for(&rows, 4).contains("warning"));
        assert!(warnings(&rows[..1], 1)[0].contains("use 1 CPU"));
        let one = [
            rr_row("netfold", "1 CPU", 1.0),
            rr_row("kernel", "1 CPU", 1.0),
        ];
        assert!(warnings(&one, 2).is_empty());
    }

    #[test]
    fn the_confidence_interval_has_its_own_columns() {
        let mut r = stream_row("netfold", "pipe", 1500, "1 CPU", 1.0);
        r.iterations = 3;
        r.ci_width_pct = Some(7.5);
        r.ci_met = Some(false);
        r.verified = Some(true);
        let t = table_for(&[r], 8);
        let last: Vec<&str> = t.lines().nth(4).unwrap().split_whitespace().collect();
        assert!(
            t.contains("CI width") && last.ends_with(&["7.50", "NO", "yes"]),
            "{t}"
        );
        assert!(!t.contains("CI not met"), "{t}");
    }

    #[test]
    fn udp_rows_show_both_sides() {
        let r = Row {
            test: "UDP_STREAM".into(),
            stack: "kernel".into(),
            msg_size: 1472,
            throughput_mbps: Some(200.0),
            sent_datagrams: Some(100),
            received_datagrams: Some(17),
            loss_pct: Some(83.0),
            send_throughput_mbps: Some(1000.0),
            recv_throughput_mbps: Some(200.0),
            ..Default::default()
        };
        let t = table(std::slice::from_ref(&r));
        assert!(
            t.contains("Loss") && t.contains("83.00") && t.contains("1000.00"),
            "{t}"
        );
        let v = serde_json::to_value(&r).unwrap();
        for k in [
            "sent_datagrams",
            "received_datagrams",
            "loss_pct",
            "recv_throughput_mbps",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
    }

    #[test]
    fn json_has_the_documented_fields() {
        let r = Row {
            test: "TCP_STREAM".into(),
            stack: "netfold".into(),
            link: "pipe".into(),
            bytes: 10,
            elapsed_s: 1.0,
            throughput_mbps: Some(8e-5),
            verified: Some(true),
            cpu_util: Some(50.0),
            service_demand_us_per_kb: Some(1.0),
            scaled_throughput_mbps: Some(1.6e-4),
            ..Default::default()
        };
        let v = serde_json::to_value(serde_json::json!({ "results": [r] })).unwrap();
        let e = &v["results"][0];
        for k in [
            "test",
            "stack",
            "link",
            "bytes",
            "elapsed_s",
            "throughput_mbps",
            "verified",
            "mtu",
            "msg_size",
            "cpu_util",
            "service_demand_us_per_kb",
            "scaled_throughput_mbps",
        ] {
            assert!(e.get(k).is_some(), "missing {k}");
        }
        assert!(e.get("trans_per_s").is_none());
    }
}
