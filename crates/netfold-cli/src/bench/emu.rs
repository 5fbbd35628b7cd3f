//! `--link emu`: two network namespaces joined through netfold's user-space link emulator
//! ([`netfold_os::emu`]): a TAP in each namespace, the emulator holding both descriptors and
//! forwarding between them on its own thread with `--delay/--rate/--loss/...` applied.
//!
//! - The kernel: the TAPs get 198.18.5.1/24 (client side, namespace A) and 198.18.5.2/24
//!   (server side, B); client and server sockets are made in their namespace.
//! - netfold: the TAPs get no address (IPv6 off, ARP off), so the kernel in the namespaces stays
//!   silent; each netfold stack (client 198.18.5.1 in A, server 198.18.5.2 in B) runs on an
//!   `AF_PACKET` socket bound to its namespace's TAP interface, one thread each.
//! - smoltcp: like netfold (no addresses on the TAPs, ARP and IPv6 off), both interfaces on one
//!   thread over packet sockets (`super::smoltcp_emu`), and the TAPs opened without offloads:
//!   smoltcp has none, so every frame it receives is wire-sized with complete checksums.
//!
//! Dropping an [`EmuLink`] stops the emulator (closing the TAPs) and deletes both namespaces,
//! also when a run fails.

use super::memnet::BoxErr;
use super::netfold_pipe::pipe_config;
use super::Params;
use netfold_os::emu::{self, EmuStats, Emulator, Running};
use netfold_os::netns::NetNs;
use netfold_os::tap::Tap;
use std::net::Ipv4Addr;

pub const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 5, 1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 5, 2);

/// What the emulator's pipe is built from: the same [`pipe_config`] as the in-memory link
/// (impairments, seed, MTU, capacity from rate x delay), at least 4096 frames in flight per
/// direction so an unimpaired multi-Gbit/s path is not cut short by the queue.
pub fn emu_pipe_config(p: &Params) -> netfold::phy::pipe::PipeConfig {
    let c = pipe_config(p);
    let cap = c.capacity.max(4096);
    c.capacity(cap)
}

/// The two namespaces, their TAP interfaces and the running emulator.
pub struct EmuLink {
    // Field order is drop order: the emulator (and the TAPs) go first, then the namespaces.
    running: Option<Running>,
    a: NetNs,
    b: NetNs,
    if_a: String,
    if_b: String,
}

/// Runs `cmd` with `sh -c` inside namespace `ns`, failing on a non-zero exit.
fn sh_in(ns: &NetNs, cmd: &str) -> Result<(), BoxErr> {
    let out = ns.run("sh", &["-c", cmd])?;
    if !out.status.success() {
        return Err(format!(
            "`{cmd}` in {}: {}",
            ns.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(())
}

impl EmuLink {
    /// Sets the link up for `p` (MTU, impairments). `kernel_addrs`: give the interfaces the
    /// kernel's addresses (the kernel runs over it); otherwise leave them address-less for
    /// stacks on packet sockets. `offloads`: open the TAPs with checksum offload and TSO
    /// (super-frames cross the emulator); without, every frame is wire-sized.
    pub fn create(p: &Params, kernel_addrs: bool, offloads: bool) -> Result<EmuLink, BoxErr> {
        if let Some(why) = netfold_os::netns::unavailable_reason() {
            return Err(
                format!("--link emu needs network namespaces and TAP devices: {why}").into(),
            );
        }
        let a = NetNs::create()?;
        let b = NetNs::create()?;
        let (if_a, if_b) = (
            format!("nfe{}a", &a.name()[3..]),
            format!("nfe{}b", &a.name()[3..]),
        );
        let cfg = emu_pipe_config(p);
        let tcfg = emu::tap_config(p.mtu, offloads);
        let tap_a = Tap::open(&if_a, tcfg)?;
        let tap_b = Tap::open(&if_b, tcfg)?;
        for (ns, ifname) in [(&a, &if_a), (&b, &if_b)] {
            ns.adopt(ifname)?;
            // No IPv6 (router solicitations, DAD) on the link: only the run's own traffic.
            sh_in(
                ns,
                &format!(
                    "for c in all default {ifname}; do \
                     echo 1 > /proc/sys/net/ipv6/conf/$c/disable_ipv6; done"
                ),
            )?;
            ns.set_mtu(ifname, p.mtu)?;
        }
        let mut link = EmuLink {
            running: None,
            a,
            b,
            if_a,
            if_b,
        };
        if kernel_addrs {
            link.a.configure(&link.if_a, CLIENT, 24)?;
            link.b.configure(&link.if_b, SERVER, 24)?;
        } else {
            for (ns, ifname) in [(&link.a, &link.if_a), (&link.b, &link.if_b)] {
                ns.ip(&["link", "set", ifname, "arp", "off"])?;
                ns.ip(&["link", "set", ifname, "up"])?;
            }
        }
        link.running = Some(Emulator::new(tap_a, tap_b, cfg).spawn()?);
        Ok(link)
    }

    /// The client's namespace (A) or the server's (B).
    pub fn ns(&self, server: bool) -> &str {
        if server {
            self.b.name()
        } else {
            self.a.name()
        }
    }

    /// The TAP interface in the client's namespace or the server's.
    pub fn ifname(&self, server: bool) -> &str {
        if server {
            &self.if_b
        } else {
            &self.if_a
        }
    }

    /// Stops the emulator and returns its counters (the namespaces go when `self` drops).
    pub fn stop(&mut self) -> Result<EmuStats, BoxErr> {
        match self.running.take() {
            Some(r) => Ok(r.stop()?),
            None => Err("emulator not running".into()),
        }
    }
}

/// Opens a packet socket on `ifname` inside namespace `ns` (the socket stays bound to that
/// namespace's interface whatever thread uses it later), with or without offloads.
pub fn packet_socket_in(
    ns: &str,
    ifname: &str,
    mtu: usize,
    offloads: bool,
) -> Result<netfold_os::packet_socket::PacketSocket, BoxErr> {
    let cfg = netfold_os::packet_socket::PacketSocketConfig {
        offloads,
        gro: offloads,
        mtu: Some(mtu),
        max_burst: 64,
        // One read per frame: the ring hands over a partly filled block only after its
        // retire timeout (1 ms), which would add a millisecond to every RR turn.
        rx_ring: None,
    };
    let sock = std::thread::scope(|s| {
        s.spawn(|| -> Result<_, String> {
            super::kernel::enter_netns(ns).map_err(|e| format!("entering {ns}: {e}"))?;
            netfold_os::packet_socket::PacketSocket::open(ifname, cfg)
                .map_err(|e| format!("packet socket on {ifname} in {ns}: {e}"))
        })
        .join()
        .map_err(|_| "packet socket thread panicked".to_string())?
    })?;
    // The default receive queue (rmem_default, ~208 KiB) holds three 64 KiB super-frames: a
    // delayed link releases a window's worth of frames at once, and the socket would drop most
    // of them while the stack's thread wakes up. Root may exceed rmem_max with the FORCE option.
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        let v: libc::c_int = 32 << 20;
        // SAFETY: setsockopt reads one c_int from a live local; the descriptor is the socket we
        // own; failure (no CAP_NET_ADMIN) leaves the default, which is only slower.
        unsafe {
            libc::setsockopt(
                sock.fd(),
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    Ok(sock)
}

/// The emulator's counters as a run's details.
pub fn add_stats(m: &mut super::Measurement, st: &EmuStats) {
    m.details.insert("emu".into(), st.to_string().into());
    m.details.insert(
        "emu_lost".into(),
        (st.pipe_a.dropped_loss + st.pipe_b.dropped_loss).into(),
    );
    m.details.insert("emu_cpu_s".into(), st.cpu_s.into());
    m.details.insert(
        "emu_dropped_full".into(),
        (st.pipe_a.dropped_full + st.pipe_b.dropped_full).into(),
    );
}

/// The kernel's TCP/UDP over the emulated link.
pub fn run_kernel(p: &Params) -> Result<super::Measurement, BoxErr> {
    let mut link = EmuLink::create(p, true, true)?;
    let mut m = super::kernel::run_on(p, super::kernel::Where::Emu(&link))?;
    let st = link.stop()?;
    add_stats(&mut m, &st);
    Ok(m)
}

/// netfold client and server stacks, each on a packet socket in its namespace, over the
/// emulated link.
pub fn run_netfold(p: &Params) -> Result<super::Measurement, BoxErr> {
    if p.test == super::Test::UdpStream {
        return Err(
            "udp-stream over --link emu is not implemented for netfold (its two-thread \
                    runner has no UDP_STREAM)"
                .into(),
        );
    }
    if p.shards > 0 {
        return Err("--shards runs over the in-memory pipe only, not --link emu".into());
    }
    let mut link = EmuLink::create(p, false, true)?;
    let c = packet_socket_in(link.ns(false), link.ifname(false), p.mtu, true)?;
    let s = packet_socket_in(link.ns(true), link.ifname(true), p.mtu, true)?;
    let mut m = super::netfold_threads::run_pair(p, c, s, CLIENT.into(), SERVER.into())?;
    let st = link.stop()?;
    add_stats(&mut m, &st);
    Ok(m)
}
