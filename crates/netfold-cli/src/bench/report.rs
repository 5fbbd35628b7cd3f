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
    /// Throughput scaled to 100% CPU (`--cpu`): throughput / utilization, seed 000's metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaled_throughput_mbps: Option<f64>,
    /// netfold streams: passes over payload bytes (copies plus checksum passes of their
    /// own) per payload byte, at the sending stack and at the receiving stack (issue 13 item
    /// 5; the counts are in `details.payload_passes`). In the table with `--cpu`.
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
    let v = serde_json::json!({
        "machine": super::machine::Machine::current(),
        "results": rows,
    });
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
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
/// When several stacks were measured, ratios of netfold to each other stack follow, per size
/// and placement: a ratio is only taken between rows placed alike.
pub fn print_table(rows: &[Row]) {
    print!("{}", table(rows));
}

/// The table as text.
pub fn table(rows: &[Row]) -> String {
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
        let ci = match r.ci_met {
            Some(false) => " (CI not met)",
            _ => "",
        };
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
        l.push(format!("{ver}{ci}"));
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
    let others: Vec<&str> = {
        let mut v: Vec<&str> = rows
            .iter()
            .map(|r| r.stack.as_str())
            .filter(|s| *s != "netfold")
            .collect();
        v.sort();
        v.dedup();
        v
    };
    if rows.iter().any(|r| r.stack == "netfold") && !others.is_empty() {
        let _ = writeln!(o);
        let _ = write!(o, "{:>12} {:<10}", "Message", "Placement");
        for x in &others {
            let _ = write!(o, " {:>16}", format!("netfold/{x}"));
        }
        let _ = writeln!(o);
        let mut keys: Vec<(usize, Option<usize>, &str, &str)> = rows
            .iter()
            .filter(|r| r.stack == "netfold")
            .map(|r| {
                (
                    r.msg_size,
                    r.resp_size,
                    r.placement.as_str(),
                    r.family.as_str(),
                )
            })
            .collect();
        keys.dedup();
        let mut unmatched = false;
        for (sz, resp, place, fam) in keys {
            let same = |r: &&Row| r.msg_size == sz && r.resp_size == resp && r.family == fam;
            let nf = rows
                .iter()
                .find(|r| r.stack == "netfold" && same(r) && r.placement == place);
            let label = match resp {
                Some(x) => format!("{sz},{x}"),
                None => sz.to_string(),
            };
            let shown = if families {
                format!("{place} {fam}")
            } else {
                place.to_string()
            };
            let _ = write!(o, "{label:>12} {shown:<10}");
            for x in &others {
                // Like with like: the other stack at the same placement; a row at another
                // placement is shown marked, so the reader sees the ratio is not comparable.
                let exact = rows
                    .iter()
                    .find(|r| r.stack == *x && same(r) && r.placement == place);
                let any = rows.iter().find(|r| r.stack == *x && same(r));
                let ratio = match (nf, exact, any) {
                    (Some(a), Some(b), _) if b.headline() > 0.0 => {
                        format!("{:.2}x", a.headline() / b.headline())
                    }
                    (Some(a), None, Some(b)) if b.headline() > 0.0 => {
                        unmatched = true;
                        format!("{:.2}x*", a.headline() / b.headline())
                    }
                    _ => "-".into(),
                };
                let _ = write!(o, " {ratio:>16}");
            }
            let _ = writeln!(o);
        }
        if unmatched {
            let _ = writeln!(
                o,
                "* the other stack ran at a different placement (see the Placement column): \
                 not a like-for-like ratio"
            );
        }
    }
    // `--zerocopy both`: each netfold zero-copy row against its copying twin.
    let pairs: Vec<(&Row, &Row)> = rows
        .iter()
        .filter(|r| r.stack == "netfold")
        .filter_map(|z| {
            let place = z.placement.strip_suffix(", zc")?;
            let copy = rows.iter().find(|r| {
                r.stack == "netfold"
                    && r.msg_size == z.msg_size
                    && r.link == z.link
                    && r.family == z.family
                    && r.placement == place
            })?;
            Some((z, copy))
        })
        .collect();
    if !pairs.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:>12} {:<10} {:>16}",
            "Message", "Placement", "zero-copy/copy"
        );
        for (z, c) in pairs {
            let ratio = if c.headline() > 0.0 {
                format!("{:.2}x", z.headline() / c.headline())
            } else {
                "-".into()
            };
            let _ = writeln!(o, "{:>12} {:<10} {ratio:>16}", z.msg_size, c.placement);
        }
    }
    if families {
        family_ratios(&mut o, rows, cpu);
    }
    o
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
        // A stack measured only at another placement gets a marked ratio.
        let t = table(&[
            rr_row("netfold", "2 CPUs", 1.0),
            rr_row("smoltcp", "1 CPU", 2.0),
        ]);
        assert!(
            t.contains("0.50x*") && t.contains("not a like-for-like"),
            "{t}"
        );
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
