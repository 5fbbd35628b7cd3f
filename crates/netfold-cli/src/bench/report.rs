//! Result rows and their output formats: a netperf-like table, JSON, CSV.

use serde::Serialize;

/// One measured configuration (a stack x a message size).
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
    /// Extra per-stack facts (counters, clock fast-forward, ...).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub details: serde_json::Map<String, serde_json::Value>,
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

pub fn print_csv(rows: &[Row]) {
    println!("test,stack,link,mtu,msg_size,bytes,elapsed_s,throughput_mbps,trans_per_s,verified");
    for r in rows {
        println!(
            "{},{},{},{},{},{},{:.6},{},{},{}",
            r.test,
            r.stack,
            r.link,
            r.mtu,
            r.msg_size,
            r.bytes,
            r.elapsed_s,
            r.throughput_mbps
                .map(|v| format!("{v:.2}"))
                .unwrap_or_default(),
            r.trans_per_s.map(|v| format!("{v:.2}")).unwrap_or_default(),
            r.verified.map(|v| v.to_string()).unwrap_or_default(),
        );
    }
}

/// netperf-style table: the column heads name the same quantities netperf's do.
pub fn print_table(rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    let test = &rows[0].test;
    println!("{test} TEST (netfold harness)");
    println!(
        "{:<9} {:<5} {:>6} {:>9} {:>13} {:>8} {:>14} {:>9}",
        "Stack", "Link", "MTU", "Message", "Bytes", "Elapsed", "Throughput", "Verified"
    );
    println!(
        "{:<9} {:<5} {:>6} {:>9} {:>13} {:>8} {:>14} {:>9}",
        "", "", "bytes", "Size", "moved", "secs.", "10^6bits/sec", ""
    );
    for r in rows {
        let tput = match (r.throughput_mbps, r.trans_per_s) {
            (Some(t), _) => format!("{t:.2}"),
            (None, Some(t)) => format!("{t:.2}/s"),
            _ => "-".into(),
        };
        let ver = r
            .verified
            .map(|v| if v { "yes" } else { "NO" })
            .unwrap_or("-");
        println!(
            "{:<9} {:<5} {:>6} {:>9} {:>13} {:>8.2} {:>14} {:>9}",
            r.stack, r.link, r.mtu, r.msg_size, r.bytes, r.elapsed_s, tput, ver
        );
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
        ] {
            assert!(e.get(k).is_some(), "missing {k}");
        }
        assert!(e.get("trans_per_s").is_none());
    }
}
