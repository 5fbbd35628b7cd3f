//! The `netfold` command: netperf-style measurements of netfold, the Linux kernel and smoltcp,
//! plus the copy/checksum micro-benchmarks of the 2002 study (seed 000 Tables 5-6, seed 001).

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod bench;
mod cmd;

#[derive(Parser)]
#[command(
    name = "netfold",
    version,
    about = "A user-space TCP/IP stack and the benchmark that measures it"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Time copy methods at every source/destination alignment (a modern cptimer, seed 001).
    Copy(cmd::copy::Args),
    /// Throughput of checksum, copy, fused copy+checksum and copy-then-checksum.
    Csum(cmd::csum::Args),
    /// TCP_STREAM: one connection, the client sends, the server receives (netperf TCP_STREAM).
    Stream(cmd::stream::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Copy(a)) => cmd::copy::run(a),
        Some(Command::Csum(a)) => cmd::csum::run(a),
        Some(Command::Stream(a)) => cmd::stream::run(a),
        None => cmd::copy::run(cmd::copy::Args::default_run()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netfold: {e}");
            ExitCode::from(2)
        }
    }
}
