//! `--link xdp`: two network namespaces joined by a veth pair; netfold's client and server
//! stacks each on an AF_XDP socket ([`netfold_os::xdp`]) on its namespace's end, one thread
//! each, the veth ends without kernel addresses (every frame of the run crosses an AF_XDP
//! ring). The kernel's row over `--link xdp` is the kernel at both ends of a veth pair made the
//! same way (`--link veth`), so one run compares the two over the same kind of link.
//!
//! The sockets bind as the kernel lets them (a veth: copy mode; the program native); the modes
//! are in the run's details. Dropping the [`XdpVeth`] deletes both namespaces (and with them
//! the veth pair), also when a run fails.

use super::memnet::BoxErr;
use super::Params;
use netfold_os::netns::NetNs;
use netfold_os::xdp::{XdpConfig, XdpSocket};
use std::net::Ipv4Addr;

pub const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 52, 1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 52, 2);

/// The namespaces and the veth pair between them.
pub struct XdpVeth {
    a: NetNs,
    b: NetNs,
    if_a: String,
    if_b: String,
}

impl XdpVeth {
    /// A veth pair at MTU `mtu`, one end in each of two fresh namespaces, up, no addresses,
    /// no IPv6 (no router solicitations or DAD on the link: only the run's own traffic).
    pub fn create(mtu: usize) -> Result<XdpVeth, BoxErr> {
        if let Some(why) = netfold_os::netns::unavailable_reason() {
            return Err(format!("--link xdp needs network namespaces: {why}").into());
        }
        let a = NetNs::create()?;
        let b = NetNs::create()?;
        let (if_a, if_b) = (
            format!("nfx{}a", &a.name()[3..]),
            format!("nfx{}b", &a.name()[3..]),
        );
        netfold_os::netns::ip(&["link", "add", &if_a, "type", "veth", "peer", "name", &if_b])?;
        a.adopt(&if_a)?;
        b.adopt(&if_b)?;
        for (ns, ifname) in [(&a, &if_a), (&b, &if_b)] {
            let key = format!("net.ipv6.conf.{ifname}.disable_ipv6=1");
            let _ = ns.run("sysctl", &["-q", "-w", &key]);
            ns.set_mtu(ifname, mtu)?;
            ns.ip(&["link", "set", ifname, "up"])?;
        }
        Ok(XdpVeth { a, b, if_a, if_b })
    }

    /// An AF_XDP socket on the client's end (`server` false) or the server's, for `addr`.
    /// The socket stays bound to that namespace's interface whatever thread uses it later.
    pub fn socket(&self, server: bool, addr: Ipv4Addr, mtu: usize) -> Result<XdpSocket, BoxErr> {
        let (ns, ifname) = if server {
            (self.b.name(), self.if_b.as_str())
        } else {
            (self.a.name(), self.if_a.as_str())
        };
        let cfg = XdpConfig {
            mtu: Some(mtu),
            ..XdpConfig::local(&[addr.into()])
        };
        let sock = std::thread::scope(|s| {
            s.spawn(|| -> Result<XdpSocket, String> {
                super::kernel::enter_netns(ns).map_err(|e| format!("entering {ns}: {e}"))?;
                XdpSocket::open(ifname, cfg).map_err(|e| format!("AF_XDP on {ifname} in {ns}: {e}"))
            })
            .join()
            .map_err(|_| "AF_XDP socket thread panicked".to_string())?
        })?;
        Ok(sock)
    }
}

/// netfold client and server stacks, each on an AF_XDP socket in its namespace.
pub fn run_netfold(p: &Params) -> Result<super::Measurement, BoxErr> {
    if p.test == super::Test::UdpStream {
        return Err(
            "udp-stream over --link xdp is not implemented for netfold (its two-thread runner \
             has no UDP_STREAM)"
                .into(),
        );
    }
    if p.shards > 0 {
        return Err("--shards runs over the in-memory pipe only, not --link xdp".into());
    }
    if p.impair.any() {
        return Err("impairments apply to the in-memory pipe and --link emu only".into());
    }
    let link = XdpVeth::create(p.mtu)?;
    let c = link.socket(false, CLIENT, p.mtu)?;
    let s = link.socket(true, SERVER, p.mtu)?;
    let modes = format!("client {}, server {}", c.describe(), s.describe());
    let (cm, sm) = (c.copy_meter(), s.copy_meter());
    let mut m = super::netfold_threads::run_pair(p, c, s, CLIENT.into(), SERVER.into())?;
    m.details.insert("xdp".into(), modes.into());
    // The bytes copied between the rings' chunks and the stacks' buffers, each way.
    let mut line = String::from("xdp copies between ring and stack:");
    for (side, meter) in [("client", &cm), ("server", &sm)] {
        let (rx, tx, lent, frames) = meter.get();
        line += &format!(
            " {side} rx {rx} B copied ({lent} of {frames} frames lent in place), tx {tx} B copied;"
        );
        m.details.insert(
            format!("xdp_{side}_copies"),
            serde_json::json!({
                "rx_copied_bytes": rx,
                "tx_copied_bytes": tx,
                "rx_frames_lent": lent,
                "rx_frames": frames,
            }),
        );
    }
    line.pop();
    eprintln!("{line}");
    drop(link);
    Ok(m)
}
