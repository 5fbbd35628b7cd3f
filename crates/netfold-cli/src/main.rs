//! The `netfold` command: netperf-style measurements of netfold, the Linux kernel and smoltcp,
//! plus the copy/checksum micro-benchmarks of the 2002 study (its Tables 5-6, and the 2002 copy_to_user thread).

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod bench;
mod cmd;
mod plot;
mod progress;

#[derive(Parser)]
#[command(
    name = "netfold",
    version = env!("NETFOLD_VERSION"),
    about = "A user-space TCP/IP stack and the benchmark that measures it"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Time copy methods at every source/destination alignment (a modern cptimer, the 2002
    /// copy_to_user thread's tool).
    Copy(cmd::copy::Args),
    /// Throughput of checksum, copy, fused copy+checksum and copy-then-checksum.
    Csum(cmd::csum::Args),
    /// TCP_STREAM: one connection, the client sends, the server receives.
    Stream(cmd::perf::StreamArgs),
    /// TCP_MAERTS: one connection, the server sends, the client receives.
    Maerts(cmd::perf::StreamArgs),
    /// TCP_RR: request/response transactions on one connection (-r REQ,RESP).
    Rr(cmd::perf::RrArgs),
    /// TCP_CRR: connect, request, response, close per transaction.
    Crr(cmd::perf::RrArgs),
    /// UDP_STREAM: datagrams from client to server.
    UdpStream(cmd::perf::UdpArgs),
    /// UDP_RR: request/response datagrams (kernel sockets: --stack kernel, or -H HOST).
    UdpRr(cmd::perf::RrArgs),
    /// Measurement daemon for `netfold <test> -H HOST` (netperf's netserver), control port 12866.
    Server(cmd::server::Args),
    /// Reproduce the 2002 study's experiments and write DIR/report.md with figures.
    Paper(cmd::paper::Args),
    /// Run netfold on a TAP device with echo, discard, chargen, HTTP and iperf3 services
    /// (the iperf3 server runs TCP tests only: `iperf3 -u` is refused).
    Serve(cmd::serve::Args),
    /// Link emulator for your own setups: forwards between two TAP interfaces with delay,
    /// rate, loss, reordering, duplication and corruption, until Ctrl-C or --duration.
    Emulate(cmd::emulate::Args),
    /// Run an unmodified, dynamically linked program with its IPv4/IPv6 sockets on netfold
    /// (through the LD_PRELOAD library libnetfold_preload.so): `netfold run --link tap:nf0
    /// --addr 198.18.0.2/24 -- curl http://198.18.0.1/`.
    Run(cmd::run::Args),
    /// Many verified connections between two netfold stacks over an impaired in-memory link;
    /// prints counters and peak memory, fails on any corruption, error or stuck connection.
    Soak(cmd::soak::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Copy(a)) => cmd::copy::run(a),
        Some(Command::Csum(a)) => cmd::csum::run(a),
        Some(Command::Stream(a)) => cmd::stream::stream(a),
        Some(Command::Maerts(a)) => cmd::stream::maerts(a),
        Some(Command::Rr(a)) => cmd::stream::rr(a),
        Some(Command::Crr(a)) => cmd::stream::crr(a),
        Some(Command::UdpStream(a)) => cmd::stream::udp_stream(a),
        Some(Command::UdpRr(a)) => cmd::remote::udp_rr(a),
        Some(Command::Server(a)) => cmd::server::run(a),
        Some(Command::Paper(a)) => cmd::paper::run_paper(a),
        Some(Command::Serve(a)) => cmd::serve::run(a),
        Some(Command::Soak(a)) => cmd::soak::run(a),
        Some(Command::Run(a)) => cmd::run::run(a),
        Some(Command::Emulate(a)) => cmd::emulate::run(a),
        None => cmd::perf::default_job(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netfold: {e}");
            ExitCode::from(2)
        }
    }
}
