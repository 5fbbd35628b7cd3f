//! The Linux kernel's TCP over loopback: real sockets, client and server on separate threads
//! pinned to separate CPUs, the way netperf's TCP_STREAM runs.

use super::affinity::{pin_current_thread, thread_cpu_seconds};
use super::pattern::{Pattern, Verifier};
use super::report::{mbps, Row};
use super::StreamParams;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;

fn set_buf(fd: i32, opt: i32, size: usize) {
    let v: libc::c_int = size.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt reads sizeof(c_int) bytes from &v, a live local.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

struct RecvOutcome {
    bytes: u64,
    verified: bool,
    cpu_s: f64,
}

pub fn run(p: &StreamParams) -> Result<Row, Box<dyn std::error::Error>> {
    if p.impair.loss + p.impair.reorder + p.impair.duplicate + p.impair.corrupt > 0.0 {
        return Err("impairments apply to the in-memory pipe only, not to kernel loopback".into());
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    if let Some(r) = p.recv_buffer {
        set_buf(listener.as_raw_fd(), libc::SO_RCVBUF, r);
    }
    let addr = listener.local_addr()?;
    let msg = p.send_size.max(1);
    let pattern = Arc::new(Pattern::new(msg.max(p.recv_size)));
    let rsize = p.recv_size.max(1);
    let verify = p.verify;
    let pat = Arc::clone(&pattern);
    let server = std::thread::spawn(move || -> std::io::Result<RecvOutcome> {
        pin_current_thread(1);
        let (mut s, _) = listener.accept()?;
        let cpu0 = thread_cpu_seconds();
        let mut buf = vec![0u8; rsize];
        let mut v = Verifier::new(&pat);
        let mut bytes = 0u64;
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            if verify {
                v.check(&buf[..n]);
            }
            bytes += n as u64;
        }
        Ok(RecvOutcome {
            bytes,
            verified: v.verified(bytes),
            cpu_s: thread_cpu_seconds() - cpu0,
        })
    });

    pin_current_thread(0);
    let mut c = TcpStream::connect(addr)?;
    if let Some(s) = p.send_buffer {
        set_buf(c.as_raw_fd(), libc::SO_SNDBUF, s);
    }
    c.set_nodelay(p.nodelay)?;
    let deadline = p.duration.map(std::time::Duration::from_secs_f64);
    let total = p.bytes.unwrap_or(u64::MAX);
    let start = std::time::Instant::now();
    let cpu0 = thread_cpu_seconds();
    let mut sent = 0u64;
    while sent < total {
        if deadline.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        let n = ((total - sent) as usize).min(msg);
        c.write_all(pattern.window(sent, n))?;
        sent += n as u64;
    }
    c.shutdown(Shutdown::Write)?;
    let client_cpu = thread_cpu_seconds() - cpu0;
    let out = server
        .join()
        .map_err(|_| "kernel server thread panicked")??;
    let elapsed = start.elapsed().as_secs_f64();
    let mut row = Row {
        test: "TCP_STREAM".into(),
        stack: "kernel".into(),
        link: "lo".into(),
        mtu: std::fs::read_to_string("/sys/class/net/lo/mtu")
            .ok()
            .and_then(|m| m.trim().parse().ok())
            .unwrap_or(65536),
        msg_size: msg,
        bytes: out.bytes,
        elapsed_s: elapsed,
        throughput_mbps: Some(mbps(out.bytes, elapsed)),
        verified: p.verify.then_some(out.verified && out.bytes == sent),
        ..Default::default()
    };
    row.details.insert("client_cpu_s".into(), client_cpu.into());
    row.details.insert("server_cpu_s".into(), out.cpu_s.into());
    Ok(row)
}
