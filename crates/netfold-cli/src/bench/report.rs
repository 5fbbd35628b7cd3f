//! Result rows and their output formats: a netperf-like table (with ratios between stacks),
//! JSON, CSV.

use serde::Serialize;

/// One measured configuration (a stack x a message size), after iterations.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Row {
    pub test: String,
    pub stack: String,
    pub link: String,
    pub mtu: usize,
    pub msg_size: usize,
    pub bytes: u64,
    pub elapsed_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trans_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// Percent of the machine's CPU (all cores) used by the test's threads (`--cpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_util: Option<f64>,
    /// Microseconds of CPU per KiB moved (`--cpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_demand_us_per_kb: Option<f64>,
    /// Throughput scaled to 100% CPU (`--cpu`): throughput / utilization, seed 000's metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaled_throughput_mbps: Option<f64>,
    /// Iterations run (`-i`), and whether the confidence interval (`-I`) was met.
    pub iterations: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci_width_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci_met: Option<bool>,
    /// Extra per-stack facts (counters, clock fast-forward, ...).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub details: serde_json::Map<String, serde_json::Value>,
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
    let v = serde_json::json!({ "results": rows });
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}")).unwrap_or_default()
}

pub fn print_csv(rows: &[Row]) {
    println!("test,stack,link,mtu,msg_size,bytes,elapsed_s,throughput_mbps,trans_per_s,verified,cpu_util,service_demand_us_per_kb,scaled_throughput_mbps,iterations,ci_width_pct,ci_met");
    for r in rows {
        println!(
            "{},{},{},{},{},{},{:.6},{},{},{},{},{},{},{},{},{}",
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
        );
    }
}

/// netperf-style table: the column heads name the same quantities netperf's do. When several
/// stacks were measured, ratios of netfold to each other stack follow, per size.
pub fn print_table(rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    let test = &rows[0].test;
    let transactional = rows[0].trans_per_s.is_some();
    let cpu = rows.iter().any(|r| r.cpu_util.is_some());
    println!("{test} TEST (netfold harness)");
    let unit = if transactional {
        "Trans/s"
    } else {
        "10^6bits/s"
    };
    print!(
        "{:<8} {:<5} {:>6} {:>8} {:>14} {:>8} {:>13}",
        "Stack", "Link", "MTU", "Message", "Bytes", "Elapsed", "Throughput"
    );
    if cpu {
        print!(" {:>7} {:>9} {:>13}", "CPU", "Service", "Scaled");
    }
    println!(" {:>8}", "Verified");
    print!(
        "{:<8} {:<5} {:>6} {:>8} {:>14} {:>8} {:>13}",
        "", "", "bytes", "Size", "", "secs.", unit
    );
    if cpu {
        print!(" {:>7} {:>9} {:>13}", "util %", "us/KB", "to 100% CPU");
    }
    println!();
    for r in rows {
        let ver = r
            .verified
            .map(|v| if v { "yes" } else { "NO" })
            .unwrap_or("-");
        let ci = match r.ci_met {
            Some(false) => " (CI not met)",
            _ => "",
        };
        print!(
            "{:<8} {:<5} {:>6} {:>8} {:>14} {:>8.2} {:>13.2}",
            r.stack,
            r.link,
            r.mtu,
            r.msg_size,
            r.bytes,
            r.elapsed_s,
            r.headline()
        );
        if cpu {
            print!(
                " {:>7} {:>9} {:>13}",
                opt(r.cpu_util, 1),
                opt(r.service_demand_us_per_kb, 3),
                opt(r.scaled_throughput_mbps, 1)
            );
        }
        println!(" {ver:>8}{ci}");
    }
    let others: Vec<&str> = {
        let mut v: Vec<&str> = rows
            .iter()
            .map(|r| r.stack.as_str())
            .filter(|s| *s != "netfold")
            .collect();
        v.dedup();
        v.sort();
        v.dedup();
        v
    };
    if rows.iter().any(|r| r.stack == "netfold") && !others.is_empty() {
        println!();
        print!("{:>8}", "Message");
        for o in &others {
            print!(" {:>16}", format!("netfold/{o}"));
        }
        println!();
        let mut sizes: Vec<usize> = rows.iter().map(|r| r.msg_size).collect();
        sizes.sort();
        sizes.dedup();
        for sz in sizes {
            let nf = rows
                .iter()
                .find(|r| r.stack == "netfold" && r.msg_size == sz);
            print!("{sz:>8}");
            for o in &others {
                let other = rows.iter().find(|r| r.stack == *o && r.msg_size == sz);
                let ratio = match (nf, other) {
                    (Some(a), Some(b)) if b.headline() > 0.0 => {
                        format!("{:.2}x", a.headline() / b.headline())
                    }
                    _ => "-".into(),
                };
                print!(" {ratio:>16}");
            }
            println!();
        }
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
