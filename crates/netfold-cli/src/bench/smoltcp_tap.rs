//! smoltcp over a real TAP device against the Linux kernel, set up exactly like
//! `netfold_tap` (namespace, TAP moved into it, kernel at 198.18.3.1, the stack at 198.18.3.2),
//! so that netfold and smoltcp can be compared on the same real link. smoltcp drives the TAP
//! through its own `phy::TunTapInterface` (no offloads: smoltcp computes and verifies every
//! checksum and segments to the MTU) and busy-polls it on one thread, like netfold's runner.

use super::affinity::thread_cpu_seconds;
use super::memnet::BoxErr;
use super::netfold_tap::{KERNEL_ADDR, NETFOLD_ADDR};
use super::pattern::{Pattern, Verifier};
use super::{kernel, Measurement, Params, Test};
use netfold_os::netns::NetNs;
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::phy::{Medium, TunTapInterface};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SInstant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};
use std::net::SocketAddr;
use std::time::{Duration, Instant as WallInstant};

pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    if !matches!(p.test, Test::Stream | Test::Maerts) {
        return Err("smoltcp over tap runs stream and maerts only".into());
    }
    if let Some(why) = netfold_os::netns::unavailable_reason() {
        return Err(format!("--link tap needs root, /dev/net/tun and ip(8): {why}").into());
    }
    let ns = NetNs::create()?;
    let tap_name = format!("nfs{}", &ns.name()[3..]);
    let mut dev = TunTapInterface::new(&tap_name, Medium::Ethernet)?;
    ns.adopt(&tap_name)?;
    ns.set_mtu(&tap_name, p.mtu)?;
    ns.configure(&tap_name, KERNEL_ADDR, 24)?;
    let pattern = Pattern::new(p.send_size.max(p.recv_size).max(1));
    let r = std::thread::scope(|scope| -> Result<Measurement, BoxErr> {
        let (tx, rx) = std::sync::mpsc::channel::<std::io::Result<SocketAddr>>();
        let pat = &pattern;
        let nsname = ns.name().to_owned();
        let server =
            scope.spawn(move || kernel::serve_in_ns(&nsname, KERNEL_ADDR.into(), p, pat, tx));
        let addr = match rx.recv() {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err("kernel server thread died".into()),
        };
        p.pin.apply(false);
        let client = drive(&mut dev, p, addr, pat);
        if client.is_err() {
            drop(dev);
            let _ = server.join();
            return Err(client
                .err()
                .unwrap_or_else(|| "smoltcp client failed".into()));
        }
        let (bytes_c, ok_c, elapsed, cpu) = client?;
        let (sbytes, _, sverified, scpu) = server
            .join()
            .map_err(|_| "kernel server thread panicked")??;
        let (bytes, verified) = match p.test {
            Test::Stream => (sbytes, p.verify.then_some(sverified && sbytes == bytes_c)),
            _ => (bytes_c, p.verify.then_some(ok_c && bytes_c == sbytes)),
        };
        let mut details = serde_json::Map::new();
        details.insert("smoltcp_cpu_s".into(), cpu.into());
        details.insert("kernel_server_cpu_s".into(), scpu.into());
        Ok(Measurement {
            bytes,
            transactions: 0,
            elapsed_s: elapsed,
            verified,
            cpu_s: cpu + scpu,
            details,
            latency: None,
            udp: None,
            passes: None,
        })
    });
    drop(ns);
    r
}

/// The smoltcp client: connect, then send (stream) or receive (maerts) until done, then close.
/// Returns (bytes sent or received, verified, elapsed seconds, CPU seconds).
fn drive(
    dev: &mut TunTapInterface,
    p: &Params,
    server: SocketAddr,
    pattern: &Pattern,
) -> Result<(u64, bool, f64, f64), BoxErr> {
    let epoch = WallInstant::now();
    let now = || SInstant::from_micros(epoch.elapsed().as_micros() as i64);
    let o = NETFOLD_ADDR.octets();
    let cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress([
        0x02, 0, 0, 0, 0, 0x53,
    ])));
    let mut iface = Interface::new(cfg, dev, now());
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(
            IpAddress::Ipv4(Ipv4Address::new(o[0], o[1], o[2], o[3])),
            24,
        ));
    });
    let buf = 256 * 1024;
    let mut sock = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; p.recv_buffer.unwrap_or(buf)]),
        tcp::SocketBuffer::new(vec![0; p.send_buffer.unwrap_or(buf)]),
    );
    sock.set_nagle_enabled(!p.nodelay);
    let mut set = SocketSet::new(Vec::new());
    let h = set.add(sock);
    let SocketAddr::V4(sa) = server else {
        return Err("IPv4 only".into());
    };
    let k = sa.ip().octets();
    set.get_mut::<tcp::Socket>(h).connect(
        iface.context(),
        (
            IpAddress::Ipv4(Ipv4Address::new(k[0], k[1], k[2], k[3])),
            sa.port(),
        ),
        *netfold::wire::EPHEMERAL_PORTS.start(),
    )?;
    let limit_t = Duration::from_secs(30);
    let t0 = WallInstant::now();
    while !set.get::<tcp::Socket>(h).may_send() {
        iface.poll(now(), dev, &mut set);
        if t0.elapsed() > limit_t {
            return Err("smoltcp did not connect over tap".into());
        }
    }
    let msg = p.send_size.max(1);
    let mut rbuf = vec![0u8; p.recv_size.max(1)];
    let mut v = Verifier::new(pattern);
    let deadline = p.duration.map(Duration::from_secs_f64);
    let total = p.bytes.unwrap_or(u64::MAX);
    let cpu0 = thread_cpu_seconds();
    let start = WallInstant::now();
    let mut moved = 0u64;
    let mut closed = false;
    let mut last = WallInstant::now();
    loop {
        iface.poll(now(), dev, &mut set);
        let s = set.get_mut::<tcp::Socket>(h);
        let mut progress = false;
        if p.test == Test::Stream {
            let time_up = deadline.is_some_and(|d| start.elapsed() >= d);
            let limit = if time_up { moved } else { total };
            while moved < limit && s.can_send() {
                let n = ((limit - moved) as usize).min(msg - (moved % msg as u64) as usize);
                let k = s.send_slice(pattern.window(moved, n))?;
                if k == 0 {
                    break;
                }
                moved += k as u64;
                progress = true;
            }
            if moved >= limit && !closed {
                s.close();
                closed = true;
            }
            // Done when the kernel has everything and closed its side.
            if closed && !s.is_open() {
                break;
            }
            if closed && s.state() == tcp::State::TimeWait {
                break;
            }
        } else {
            while s.can_recv() {
                let n = s.recv_slice(&mut rbuf)?;
                if n == 0 {
                    break;
                }
                if p.verify {
                    v.check(&rbuf[..n]);
                }
                moved += n as u64;
                progress = true;
            }
            if !s.may_recv() {
                s.close();
                break;
            }
        }
        if progress {
            last = WallInstant::now();
        } else if last.elapsed() > limit_t {
            return Err(format!("smoltcp over tap stalled after {moved} bytes").into());
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = thread_cpu_seconds() - cpu0;
    // Let the FIN exchange finish so the kernel side returns.
    let t1 = WallInstant::now();
    while t1.elapsed() < Duration::from_millis(200) {
        iface.poll(now(), dev, &mut set);
    }
    Ok((moved, v.verified(moved), elapsed, cpu))
}
