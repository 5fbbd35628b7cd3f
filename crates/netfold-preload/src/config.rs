//! The library's configuration, read from the environment once, at the first socket a
//! process opens:
//!
//! - `NETFOLD_LINK`: `tap:NAME`, `tun:NAME` or `packet:IFNAME` (required).
//! - `NETFOLD_ADDR`: the stack's addresses with prefix lengths, comma-separated, at most one
//!   IPv4 and any number of IPv6 (`198.18.29.2/24,2001:2:0:29::2/64`; required). With IPv6
//!   addresses the first socket waits (at most 3 s) for their duplicate address detection.
//! - `NETFOLD_GATEWAY`: the default routers, comma-separated, at most one per family.
//! - `NETFOLD_MTU`: the IP MTU (default: the interface's).
//! - `NETFOLD_REQUIRE=1`: when netfold cannot start, the process exits (status 1) at its
//!   first socket instead of running on the kernel's sockets.
//! - `NETFOLD_LINGER_MS`: at exit, how long closed connections may keep sending what they
//!   still hold (default 2000).
//! - `NETFOLD_OFFLOADS=0`: open the device without checksum, TSO and GRO offloads (default:
//!   with them, as `netfold serve`).
//! - `NETFOLD_POLL`: who runs the stack. `inline` (the default): the application's own calls
//!   poll it (a call that changed something sends its segments at once; a call that has to
//!   wait sleeps in poll(2) on the device itself, until frames or the stack's next timer), and
//!   a fallback thread takes over within about two milliseconds while no call does, so timers
//!   and acknowledgements run while the program is busy elsewhere. `thread`: a driver thread
//!   polls it, and application calls wake it and wait for it. The default is the faster of the
//!   two in most of `scripts/bench-preload.sh`'s measurements (docs/BENCHMARKS.md).
//! - `NETFOLD_VERBOSE=1`: one line on stderr when the stack starts, and the stack's counters
//!   at exit (with `NETFOLD_POLL=inline` also the polls made by application calls and by the
//!   fallback thread).

use crate::engine::PollMode;
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    /// The device spec, as `nf_config.device` takes it.
    pub(crate) link: String,
    /// NF_MEDIUM_ETHERNET (TAP, packet socket) or NF_MEDIUM_IP (TUN).
    pub(crate) medium: i32,
    pub(crate) addr4: Option<String>,
    /// Comma-separated, as `nf_config.address6` takes them.
    pub(crate) addrs6: Option<String>,
    pub(crate) gateway4: Option<String>,
    pub(crate) gateway6: Option<String>,
    pub(crate) mtu: u32,
    pub(crate) linger_ms: i32,
    pub(crate) offloads: bool,
    pub(crate) poll: PollMode,
    pub(crate) verbose: bool,
}

/// Whether `NETFOLD_REQUIRE` asks to fail rather than fall back to the kernel.
pub(crate) fn required() -> bool {
    flag("NETFOLD_REQUIRE")
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Reads the configuration from the environment.
pub(crate) fn from_env() -> Result<Config, String> {
    let mut c = parse(
        var("NETFOLD_LINK").as_deref(),
        var("NETFOLD_ADDR").as_deref(),
        var("NETFOLD_GATEWAY").as_deref(),
        var("NETFOLD_MTU").as_deref(),
        var("NETFOLD_LINGER_MS").as_deref(),
        var("NETFOLD_OFFLOADS").as_deref(),
        flag("NETFOLD_VERBOSE"),
    )?;
    c.poll = poll_mode(var("NETFOLD_POLL").as_deref())?;
    Ok(c)
}

/// The mode without `NETFOLD_POLL`.
pub(crate) const DEFAULT_POLL: PollMode = PollMode::Inline;

/// `NETFOLD_POLL`'s value.
pub(crate) fn poll_mode(v: Option<&str>) -> Result<PollMode, String> {
    match v.map(str::trim) {
        None => Ok(DEFAULT_POLL),
        Some("thread") => Ok(PollMode::Thread),
        Some("inline") => Ok(PollMode::Inline),
        Some(o) => Err(format!("NETFOLD_POLL={o:?}: expected thread or inline")),
    }
}

/// The configuration these variables describe, or what is wrong with them.
pub(crate) fn parse(
    link: Option<&str>,
    addr: Option<&str>,
    gateway: Option<&str>,
    mtu: Option<&str>,
    linger: Option<&str>,
    offloads: Option<&str>,
    verbose: bool,
) -> Result<Config, String> {
    let link = link.ok_or("NETFOLD_LINK is not set (tap:NAME, tun:NAME or packet:IFNAME)")?;
    let link = link.trim();
    let medium = match link.split_once(':') {
        Some(("tap" | "packet", n)) if !n.is_empty() => crate::api::NF_MEDIUM_ETHERNET,
        Some(("tun", n)) if !n.is_empty() => crate::api::NF_MEDIUM_IP,
        _ => {
            return Err(format!(
                "NETFOLD_LINK={link:?}: expected tap:NAME, tun:NAME or packet:IFNAME"
            ))
        }
    };
    let addr = addr.ok_or("NETFOLD_ADDR is not set (e.g. 198.18.29.2/24)")?;
    let (mut addr4, mut addrs6) = (None, Vec::new());
    for a in addr.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let (ip, prefix) = a
            .split_once('/')
            .ok_or_else(|| format!("NETFOLD_ADDR: {a:?} has no prefix length (A/P)"))?;
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| format!("NETFOLD_ADDR: {ip:?} is not an IP address"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        match prefix.parse::<u8>() {
            Ok(p) if p <= max => {}
            _ => return Err(format!("NETFOLD_ADDR: bad prefix length in {a:?}")),
        }
        if ip.is_ipv4() {
            if addr4.replace(a.to_string()).is_some() {
                return Err("NETFOLD_ADDR: at most one IPv4 address".into());
            }
        } else {
            addrs6.push(a.to_string());
        }
    }
    if addr4.is_none() && addrs6.is_empty() {
        return Err("NETFOLD_ADDR names no address".into());
    }
    let (mut gateway4, mut gateway6) = (None, None);
    for g in gateway
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
    {
        let ip: IpAddr = g
            .parse()
            .map_err(|_| format!("NETFOLD_GATEWAY: {g:?} is not an IP address"))?;
        let slot = if ip.is_ipv4() {
            &mut gateway4
        } else {
            &mut gateway6
        };
        if slot.replace(g.to_string()).is_some() {
            return Err("NETFOLD_GATEWAY: at most one gateway per address family".into());
        }
    }
    let mtu = match mtu {
        None => 0,
        Some(m) => match m.trim().parse::<u32>() {
            Ok(v @ 68..=65535) => v,
            _ => return Err(format!("NETFOLD_MTU={m:?}: expected 68..=65535")),
        },
    };
    let linger_ms = match linger {
        None => 2000,
        Some(l) => l
            .trim()
            .parse::<u16>()
            .map(i32::from)
            .map_err(|_| format!("NETFOLD_LINGER_MS={l:?}: expected 0..=65535"))?,
    };
    let offloads = match offloads.map(str::trim) {
        None | Some("1") => true,
        Some("0") => false,
        Some(o) => return Err(format!("NETFOLD_OFFLOADS={o:?}: expected 0 or 1")),
    };
    Ok(Config {
        link: link.to_string(),
        medium,
        addr4,
        addrs6: (!addrs6.is_empty()).then(|| addrs6.join(",")),
        gateway4,
        gateway6,
        mtu,
        linger_ms,
        offloads,
        poll: DEFAULT_POLL,
        verbose,
    })
}
