//! `netfold stream`: TCP_STREAM between two netfold stacks over the in-memory pipe.

use super::CmdResult;
use crate::bench::units::{parse_fraction, parse_size};
use crate::bench::{kernel, report, smoltcp_pipe, Impair, StreamParams};
use std::process::ExitCode;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Bytes to transfer (K/M/G suffixes, powers of 1024). Default 256M unless -l is given.
    #[arg(long, value_parser = parse_size, conflicts_with = "length")]
    pub bytes: Option<u64>,
    /// Test length in seconds (netperf -l).
    #[arg(short = 'l', long = "length")]
    pub length: Option<f64>,
    /// Send size per call (netperf -m).
    #[arg(short = 'm', long = "send-size", value_parser = parse_size, default_value = "64K")]
    pub send_size: u64,
    /// Receive size per call (netperf -M).
    #[arg(short = 'M', long = "recv-size", value_parser = parse_size, default_value = "64K")]
    pub recv_size: u64,
    /// IP MTU of the link.
    #[arg(long, default_value_t = 1500)]
    pub mtu: usize,
    /// Send buffer (netperf -s).
    #[arg(short = 's', long = "send-buffer", value_parser = parse_size)]
    pub send_buffer: Option<u64>,
    /// Receive buffer (netperf -S).
    #[arg(short = 'S', long = "recv-buffer", value_parser = parse_size)]
    pub recv_buffer: Option<u64>,
    /// Disable Nagle's algorithm.
    #[arg(long)]
    pub nodelay: bool,
    /// Fraction of frames lost on the link, e.g. 0.01.
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
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Check every received byte against the sender's pattern and the exact count.
    #[arg(long)]
    pub verify: bool,
    /// Stacks to measure, in turn: any of netfold, kernel, smoltcp.
    #[arg(long, value_delimiter = ',', default_value = "netfold")]
    pub stack: Vec<StackKind>,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV.
    #[arg(long)]
    pub csv: bool,
}

pub fn params(a: &Args) -> Result<StreamParams, String> {
    if !(68..=65535).contains(&a.mtu) {
        return Err(format!("--mtu {} out of range (68..=65535)", a.mtu));
    }
    if a.send_size == 0 || a.recv_size == 0 || a.send_size > 1 << 30 || a.recv_size > 1 << 30 {
        return Err("-m/-M must be between 1 byte and 1G".into());
    }
    if let Some(l) = a.length {
        if !(l > 0.0 && l < 86400.0) {
            return Err(format!("-l {l}: expected a positive number of seconds"));
        }
    }
    Ok(StreamParams {
        bytes: match (a.bytes, a.length) {
            (Some(b), _) => Some(b),
            (None, Some(_)) => None,
            (None, None) => Some(256 << 20),
        },
        duration: a.length,
        send_size: a.send_size as usize,
        recv_size: a.recv_size as usize,
        mtu: a.mtu,
        nodelay: a.nodelay,
        send_buffer: a.send_buffer.map(|v| v as usize),
        recv_buffer: a.recv_buffer.map(|v| v as usize),
        impair: Impair {
            loss: a.loss,
            reorder: a.reorder,
            duplicate: a.duplicate,
            corrupt: a.corrupt,
            seed: a.seed,
        },
        verify: a.verify,
    })
}

/// Which stack a run measures.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackKind {
    Netfold,
    Kernel,
    Smoltcp,
}

pub fn run(a: Args) -> CmdResult {
    let p = params(&a)?;
    let mut rows = Vec::new();
    for s in &a.stack {
        let row = match s {
            StackKind::Netfold => {
                return Err("the netfold stack runner lands with the Stack".into())
            }
            StackKind::Kernel => kernel::run(&p)?,
            StackKind::Smoltcp => smoltcp_pipe::run(&p)?,
        };
        rows.push(row);
    }
    let failed = rows.iter().any(|r| r.verified == Some(false));
    if a.json {
        report::print_json(&rows)?;
    } else if a.csv {
        report::print_csv(&rows);
    } else {
        report::print_table(&rows);
    }
    if failed {
        eprintln!("netfold: verification FAILED");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
