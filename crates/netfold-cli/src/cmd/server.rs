//! `netfold server`: the measurement daemon `netfold <test> -H HOST` talks to (netperf's
//! netserver, iperf3 -s). Listens on a control port (12866 by default), runs one test at a time
//! on kernel sockets (others are refused with a message saying so), logs each test on stderr,
//! and stops cleanly on SIGINT/SIGTERM. The protocol is documented in
//! [`crate::bench::remote`].

use super::CmdResult;
use crate::bench::remote::{self, CONTROL_PORT};
use crate::bench::remote_net::{
    open_netfold, open_netfold_shards, timed_out, KernelNet, Net, NetStream,
};
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Control port.
    #[arg(short = 'p', long, default_value_t = CONTROL_PORT)]
    port: u16,
    /// Address to listen on (control and data ports); with --link, netfold's address and
    /// prefix, e.g. 198.18.0.2/24.
    #[arg(long, default_value = "0.0.0.0")]
    addr: String,
    /// Serve on netfold instead of the kernel: `tap:NAME` or `tun:NAME` (the device is created
    /// if it does not exist; configure the kernel's side yourself, as for `netfold serve`), or
    /// `packet:IFNAME` (an AF_PACKET socket on an existing interface, e.g. one end of a veth),
    /// or `xdp:IFNAME[@QUEUE][:all]` (an AF_XDP socket on one queue of an existing interface).
    #[arg(
        long,
        value_name = "tap:NAME|tun:NAME|packet:IFNAME|xdp:IFNAME[@QUEUE]"
    )]
    link: Option<String>,
    /// With `--link xdp:IFNAME[:all]`: N netfold stacks, one per AF_XDP queue `0..N` of the
    /// interface (each on its own thread and CPU), every test's listeners on all of them; a
    /// connection is served by the stack whose queue its first segment reached. UDP tests
    /// are refused.
    #[arg(long, value_name = "N")]
    shards: Option<u16>,
    /// Longest test accepted, seconds; every wait of a test is bounded by its length plus a
    /// grace period and never by more than this.
    #[arg(long, default_value_t = 600.0, value_parser = parse_max)]
    max_seconds: f64,
}

fn parse_max(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v > 0.0 && v <= 86400.0) {
        return Err(format!("--max-seconds {s}: expected (0, 86400]"));
    }
    Ok(v)
}

pub(crate) static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set [`STOP`]; without SA_RESTART a blocked accept(2) returns EINTR at once.
pub(crate) fn install_signal_handlers() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is zero-initialisable plain data; the handler only does an atomic
        // store; the mask is emptied and the pointers are to a live local.
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

/// How often the accept loop looks at [`STOP`] when no signal interrupts it (a signal sent to
/// another thread of the process leaves accept(2) blocked).
const STOP_CHECK: Duration = Duration::from_millis(200);

/// How long a netfold server's stack lets its last connections finish once it stops. Every
/// test it ran is over by then (its result went back on the control connection), so what is
/// left is the closing handshake of finished tests, whose peer may be gone already: a second
/// bounds the stop (a runtime's default drain is 5 s), and what is left after it is reset.
const STOP_DRAIN: Duration = Duration::from_secs(1);

pub fn run(a: Args) -> CmdResult {
    install_signal_handlers()?;
    match &a.link {
        Some(link) if a.shards.is_some() => {
            let (ip, prefix) = super::serve::parse_cidr(&a.addr)?;
            let n = a.shards.unwrap_or(1);
            let (net, what) = open_netfold_shards(link, ip, prefix, n, None)?;
            for k in 0..net.shards.len() {
                net.shards.shard(k).set_drop_drain(STOP_DRAIN);
            }
            serve(Arc::new(net), ip.into(), &a, what)
        }
        None if a.shards.is_some() => Err(
            "--shards needs --link xdp:IFNAME (netfold's stacks on the interface's queues)".into(),
        ),
        None => {
            let ip: IpAddr = a.addr.parse().map_err(|_| {
                format!(
                    "--addr {:?}: expected an IP address (a prefix only with --link)",
                    a.addr
                )
            })?;
            serve(Arc::new(KernelNet), ip, &a, "kernel sockets".into())
        }
        Some(link) => {
            let (ip, prefix) = super::serve::parse_cidr(&a.addr)?;
            let (net, what) = open_netfold(link, ip, prefix, None, None)?;
            net.rt.set_drop_drain(STOP_DRAIN);
            serve(Arc::new(net), ip.into(), &a, what)
        }
    }
}

fn serve<N: Net + Send + 'static>(net: Arc<N>, ip: IpAddr, a: &Args, what: String) -> CmdResult
where
    N::Stream: 'static,
{
    let (l, port) = net
        .listen(ip, a.port, STOP_CHECK, (None, None))
        .map_err(|e| format!("cannot listen on {ip}:{}: {e}", a.port))?;
    eprintln!(
        "netfold server: listening on {ip}:{port}, {what} (protocol {}, one test at a time, \
         tests up to {} s)",
        remote::PROTOCOL_VERSION,
        a.max_seconds
    );
    let busy = Arc::new(AtomicBool::new(false));
    let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
    while !STOP.load(Ordering::SeqCst) {
        let conn = match net.accept(&l) {
            Ok(c) => c,
            Err(e) if timed_out(&e) || e.kind() == std::io::ErrorKind::Interrupted => {
                workers.retain(|h| !h.is_finished());
                continue;
            }
            Err(e) => {
                // A transient failure (EMFILE, ECONNABORTED): log it and keep serving.
                eprintln!("netfold server: accept: {e}");
                std::thread::sleep(STOP_CHECK);
                continue;
            }
        };
        let (busy, max, net) = (busy.clone(), a.max_seconds, net.clone());
        // Each control connection on its own thread, so a busy server can still answer
        // "busy" at once; handle_control lets only one of them run a test.
        workers.push(std::thread::spawn(move || {
            let peer = conn.peer().map(|p| p.to_string()).unwrap_or_default();
            // Data ports are opened on the address the client reached us at.
            let ip = conn.local_ip().unwrap_or(ip);
            match remote::handle_control(&*net, conn, ip, max, &busy, &STOP) {
                Ok(Some(r)) => eprintln!("netfold server: {peer}: {} done", r.test.netperf_name()),
                Ok(None) => {}
                Err(e) => eprintln!("netfold server: {e}"),
            }
        }));
        workers.retain(|h| !h.is_finished());
    }
    eprintln!("netfold server: stopping");
    for h in workers {
        let _ = h.join();
    }
    Ok(ExitCode::SUCCESS)
}
