//! `netfold server`: the measurement daemon `netfold <test> -H HOST` talks to (netperf's
//! netserver, iperf3 -s). Listens on a control port (12866 by default), runs one test at a time
//! on kernel sockets (others are refused with a message saying so), logs each test on stderr,
//! and stops cleanly on SIGINT/SIGTERM. The protocol is documented in
//! [`crate::bench::remote`].

use super::CmdResult;
use crate::bench::remote::{self, CONTROL_PORT};
use std::net::{IpAddr, TcpListener};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Control port.
    #[arg(short = 'p', long, default_value_t = CONTROL_PORT)]
    port: u16,
    /// Address to listen on (control and data ports).
    #[arg(long, default_value = "0.0.0.0")]
    addr: IpAddr,
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

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set [`STOP`]; without SA_RESTART a blocked accept(2) returns EINTR at once.
fn install_signal_handlers() -> std::io::Result<()> {
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

pub fn run(a: Args) -> CmdResult {
    install_signal_handlers()?;
    let l = TcpListener::bind((a.addr, a.port))
        .map_err(|e| format!("cannot listen on {}:{}: {e}", a.addr, a.port))?;
    remote::set_accept_timeout(&l, STOP_CHECK)?;
    eprintln!(
        "netfold server: listening on {} (protocol {}, one test at a time, tests up to {} s)",
        l.local_addr()?,
        remote::PROTOCOL_VERSION,
        a.max_seconds
    );
    let busy = Arc::new(AtomicBool::new(false));
    let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
    while !STOP.load(Ordering::SeqCst) {
        let conn = match l.accept() {
            Ok((c, _)) => c,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
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
        let (busy, ip, max) = (busy.clone(), a.addr, a.max_seconds);
        // Each control connection on its own thread, so a busy server can still answer
        // "busy" at once; handle_control lets only one of them run a test.
        workers.push(std::thread::spawn(move || {
            let peer = conn.peer_addr().map(|p| p.to_string()).unwrap_or_default();
            // Data ports are opened on the address the client reached us at.
            let ip = conn.local_addr().map(|l| l.ip()).unwrap_or(ip);
            match remote::handle_control(conn, ip, max, &busy, &STOP) {
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
