//! netfold over a real TAP device against the Linux kernel (`--stack netfold --link tap`): the
//! command creates a network namespace, a TAP interface moved into it with the kernel's side at
//! 198.18.3.1/24, and runs netfold at 198.18.3.2/24 on the TAP's file descriptor in this
//! process. netfold is the client (it sends for TCP_STREAM, receives for TCP_MAERTS); the
//! kernel's side is a netserver-like thread inside the namespace. Everything is removed
//! afterwards, also on failure.
//!
//! `--link tun` is the same over a TUN device (bare IP packets, no ARP, the same virtio-net
//! offloads): the kernel's side of the TUN at 198.18.3.1/24 in the namespace, netfold at
//! 198.18.3.2 on its descriptor.

use super::affinity::thread_cpu_seconds;
use super::memnet::BoxErr;
use super::netfold_pipe::{stack_config, tcp_config};
use super::netfold_threads::{drive, Node};
use super::pattern::Pattern;
use super::{kernel, Family, Measurement, Params, Test};
use netfold::iface::{Stack, StackConfig};
use netfold::phy::Device;
use netfold::wire::ipv6::Ipv6Cidr;
use netfold_os::netns::NetNs;
use netfold_os::tap::{Tap, TapConfig, TapStats};
use netfold_os::tun::Tun;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant as WallInstant;

pub const KERNEL_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 3, 1);
pub const NETFOLD_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 3, 2);
/// `--family 6`: the kernel's and netfold's IPv6 addresses on the link (RFC 5180's prefix).
pub const KERNEL_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 3, 0, 0, 0, 1);
pub const NETFOLD_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 3, 0, 0, 0, 2);

/// The kernel's address and netfold's stack configuration for `p.family`. netfold's IPv6
/// address skips DAD (the namespace is ours; the kernel's side has DAD off too).
fn endpoints(p: &Params) -> (IpAddr, StackConfig) {
    let v4 = stack_config(NETFOLD_ADDR, 2, p.mtu, p.copy_mode);
    match p.family {
        Family::V4 => (KERNEL_ADDR.into(), v4),
        Family::V6 => (
            KERNEL_ADDR6.into(),
            StackConfig {
                addrs6: Ipv6Cidr::new(NETFOLD_ADDR6, 64).into_iter().collect(),
                dad_transmits: 0,
                ..v4
            },
        ),
    }
}

/// `--link tap`.
pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    check(p, "tap")?;
    let ns = NetNs::create()?;
    let tap_name = format!("nft{}", &ns.name()[3..]);
    let tap = Tap::open(&tap_name, tap_config(p))?;
    ns.adopt(&tap_name)?;
    ns.set_mtu(&tap_name, p.mtu)?;
    ns.configure(&tap_name, KERNEL_ADDR, 24)?;
    if p.family == Family::V6 {
        ns.configure6(&tap_name, KERNEL_ADDR6, 64)?;
    }
    let r = run_with(p, &ns, tap, Tap::stats, "tap");
    drop(ns);
    r
}

/// `--link tun`: the same against the kernel over a TUN device.
pub fn run_tun(p: &Params) -> Result<Measurement, BoxErr> {
    check(p, "tun")?;
    let ns = NetNs::create()?;
    let tun_name = format!("nfu{}", &ns.name()[3..]);
    let tun = Tun::open(&tun_name, tap_config(p))?;
    ns.adopt(&tun_name)?;
    ns.set_mtu(&tun_name, p.mtu)?;
    ns.configure(&tun_name, KERNEL_ADDR, 24)?;
    if p.family == Family::V6 {
        ns.configure6(&tun_name, KERNEL_ADDR6, 64)?;
    }
    let r = run_with(p, &ns, tun, Tun::stats, "tun");
    drop(ns);
    r
}

fn check(p: &Params, link: &str) -> Result<(), BoxErr> {
    if p.test == Test::UdpStream {
        return Err(format!("udp-stream over {link} is not implemented").into());
    }
    if p.impair.any() {
        return Err("impairments apply to the in-memory pipe only".into());
    }
    if p.zerocopy && p.test == Test::Maerts {
        return Err(format!(
            "--zerocopy over {link}: in maerts the kernel sends and netfold receives, so there \
             is no netfold send to make zero-copy (use stream)"
        )
        .into());
    }
    if let Some(why) = netfold_os::netns::unavailable_reason() {
        return Err(format!("--link {link} needs root, /dev/net/tun and ip(8): {why}").into());
    }
    Ok(())
}

fn tap_config(p: &Params) -> TapConfig {
    TapConfig {
        offloads: true,
        gro: true,
        mtu: Some(p.mtu),
        max_burst: 64,
    }
}

fn run_with<D: Device>(
    p: &Params,
    ns: &NetNs,
    dev: D,
    stats: fn(&D) -> TapStats,
    link: &str,
) -> Result<Measurement, BoxErr> {
    let pattern = Pattern::new(p.send_size.max(p.recv_size).max(1));
    let abort = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| -> Result<Measurement, BoxErr> {
        let (tx, rx) = std::sync::mpsc::channel::<std::io::Result<SocketAddr>>();
        let pat = &pattern;
        let nsname = ns.name().to_owned();
        let (kernel_ip, stack_cfg) = endpoints(p);
        let server = scope.spawn(move || kernel::serve_in_ns(&nsname, kernel_ip, p, pat, tx));
        let addr: SocketAddr = match rx.recv() {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err("kernel server thread died".into()),
        };
        p.pin.apply(false);
        let mut node = Node::new(
            Stack::new(stack_cfg),
            dev,
            WallInstant::now(),
            Arc::clone(&abort),
        );
        let cpu0 = thread_cpu_seconds();
        let start = WallInstant::now();
        let client = drive(&mut node, p, tcp_config(p), addr, pat, start);
        let elapsed = start.elapsed().as_secs_f64();
        let cpu = thread_cpu_seconds() - cpu0;
        if client.is_err() {
            // Unblock the kernel side: closing our device resets nothing by itself, so drop the
            // namespace link by stopping the stack; the server's accept/read then fails or EOFs.
            drop(node);
            let _ = server.join();
            return Err(client
                .err()
                .unwrap_or_else(|| "netfold client failed".into()));
        }
        let cl = client?;
        let (sbytes, _strans, sverified, scpu) = server
            .join()
            .map_err(|_| "kernel server thread panicked")??;
        let (bytes, verified) = match p.test {
            Test::Stream => (sbytes, p.verify.then_some(sverified && sbytes == cl.bytes)),
            Test::Maerts => (
                cl.bytes,
                p.verify.then_some(cl.verified && cl.bytes == sbytes),
            ),
            _ => (cl.transactions * (p.req_size + p.resp_size) as u64, None),
        };
        // netfold's stack is new for this run and the handshake moves no payload, so its pass
        // counters are the transfer's. Only netfold's end is counted: the other end is the
        // Linux kernel, whose copies and checksums netfold has no counters for.
        let ours = node.stack.counters().payload_passes();
        let passes = match p.test {
            Test::Stream => Some(super::Passes {
                sender: Some(ours),
                receiver: None,
            }),
            Test::Maerts => Some(super::Passes {
                sender: None,
                receiver: Some(ours),
            }),
            _ => None,
        };
        let mut details = serde_json::Map::new();
        details.insert("netfold_cpu_s".into(), cpu.into());
        details.insert("kernel_server_cpu_s".into(), scpu.into());
        details.insert(
            "netfold_counters".into(),
            super::counters_json(&node.stack.counters()),
        );
        details.insert(link.into(), format!("{:?}", stats(&node.end)).into());
        if let Some(z) = node.zc_report.take() {
            details.insert("zerocopy".into(), z.into());
        }
        Ok(Measurement {
            bytes,
            transactions: cl.transactions,
            elapsed_s: elapsed,
            verified,
            cpu_s: cpu + scpu,
            details,
            latency: cl.latency,
            udp: None,
            passes,
        })
    })
}
