//! Network-namespace helpers for tests (and the CLI): a throw-away namespace `nf-<random>` with
//! the kernel's stack on one side of a TAP or veth link, addressed only from the benchmarking
//! range 198.18.0.0/15 (RFC 2544 §C.2.2, RFC 6890) and, for IPv6, the benchmarking prefix
//! 2001:2::/48 (RFC 5180 §8), so a test can never reach another network.
//!
//! Everything is done with `ip(8)` from iproute2, run as a child process: no sockets, no
//! netlink code of our own. [`NetNs`] is a guard: dropping it (also during a panic unwind)
//! deletes the veth links it created and the namespace itself.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command, Output, Stdio};

/// Whether `addr` is in 198.18.0.0/15, the only range these helpers configure.
pub fn in_bench_range(addr: Ipv4Addr) -> bool {
    let o = addr.octets();
    o[0] == 198 && (o[1] & 0xfe) == 18
}

/// Whether `addr` is in 2001:2::/48 (RFC 5180 §8, IPv6 benchmarking), the only IPv6 range
/// these helpers configure.
pub fn in_bench_range6(addr: Ipv6Addr) -> bool {
    let s = addr.segments();
    s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0
}

/// Whether this process runs with effective uid 0 (read from /proc, no libc call needed).
pub fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .map(str::to_owned);
    euid.as_deref() == Some("0")
}

/// Why namespace tests cannot run here, if they cannot: not root, no `ip`, no /dev/net/tun.
pub fn unavailable_reason() -> Option<String> {
    if !is_root() {
        return Some("not running as root".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun is missing".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => {}
        _ => return Some("ip(8) from iproute2 is not installed".into()),
    }
    None
}

/// Whether `program` is an executable file in one of `$PATH`'s directories (or, if it
/// contains a `/`, at that path).
pub fn have_tool(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program))))
}

/// Why a test needing `tools` cannot run: the first of them that is not installed (see
/// [`have_tool`]), with the Debian package that provides it when known.
pub fn missing_tools(tools: &[&str]) -> Option<String> {
    let tool = tools.iter().find(|t| !have_tool(t))?;
    let package = match *tool {
        "ip" | "ss" => Some("iproute2"),
        "ping" => Some("iputils-ping"),
        "tshark" => Some("tshark"),
        "iperf3" => Some("iperf3"),
        "curl" => Some("curl"),
        "python3" => Some("python3"),
        "gcc" => Some("gcc"),
        "nm" => Some("binutils"),
        "unshare" => Some("util-linux"),
        "sysctl" => Some("procps"),
        "sha256sum" | "timeout" => Some("coreutils"),
        "redis-server" => Some("redis-server"),
        "redis-cli" | "redis-benchmark" => Some("redis-tools"),
        "nginx" => Some("nginx-light"),
        _ => None,
    };
    Some(match package {
        Some(p) => format!(
            "`{tool}` is not installed (Debian package {p}; see scripts/install-test-deps.sh)"
        ),
        None => format!("`{tool}` is not installed"),
    })
}

/// Why a namespace test that also runs `tools` cannot run here: [`unavailable_reason`], then
/// [`missing_tools`].
pub fn unavailable_with(tools: &[&str]) -> Option<String> {
    unavailable_reason().or_else(|| missing_tools(tools))
}

/// The tests' one way to skip: with a reason, prints `SKIPPED: <test>: <why>` on stderr and
/// returns true (the caller then returns, passing); without one returns false. The test's
/// name is its thread's (the test harness names each test's thread after it).
///
/// ```
/// # fn a_test() {
/// if netfold_os::netns::skip(netfold_os::netns::unavailable_with(&["ping", "python3"])) {
///     return;
/// }
/// // ... the test proper
/// # }
/// ```
pub fn skip(why: Option<String>) -> bool {
    let Some(why) = why else {
        return false;
    };
    let thread = std::thread::current();
    let line = match thread.name() {
        Some(name) if name != "main" => format!("SKIPPED: {name}: {why}\n"),
        _ => format!("SKIPPED: {why}\n"),
    };
    // Written to the process's stderr itself, past the test harness's capture of `eprintln!`,
    // so that the line shows in `cargo test`'s output although the test passes. A failed
    // write to stderr leaves nothing better to report it on.
    let mut err = io::stderr().lock();
    let _ = io::Write::write_all(&mut err, line.as_bytes());
    let _ = io::Write::flush(&mut err);
    true
}

/// A random-enough suffix (the std hasher's per-process random keys, the pid and the clock).
fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(t);
    format!("{:08x}", h.finish() as u32)
}

fn check(out: Output, what: &str) -> io::Result<Output> {
    if out.status.success() {
        Ok(out)
    } else {
        Err(io::Error::other(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Runs `ip ARGS` in the caller's namespace, failing on a non-zero exit.
pub fn ip(args: &[&str]) -> io::Result<Output> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    check(out, &format!("ip {}", args.join(" ")))
}

/// A network namespace that lives as long as this guard.
#[derive(Debug)]
pub struct NetNs {
    name: String,
    /// Links created in the caller's namespace, deleted on drop.
    root_links: Vec<String>,
}

impl NetNs {
    /// Creates `nf-<random>` and brings its loopback up.
    pub fn create() -> io::Result<NetNs> {
        let name = format!("nf-{}", random_suffix());
        ip(&["netns", "add", &name])?;
        let ns = NetNs {
            name,
            root_links: Vec::new(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NS ARGS`.
    pub fn ip(&self, args: &[&str]) -> io::Result<Output> {
        let mut v = vec!["-n", self.name.as_str()];
        v.extend_from_slice(args);
        ip(&v)
    }

    /// Moves link `link` of the caller's namespace into this one (a TAP keeps its descriptor).
    pub fn adopt(&self, link: &str) -> io::Result<()> {
        ip(&["link", "set", link, "netns", &self.name]).map(drop)
    }

    /// Gives `link` (inside the namespace) `addr/prefix` and brings it up. Refuses any address
    /// outside 198.18.0.0/15.
    pub fn configure(&self, link: &str, addr: Ipv4Addr, prefix: u8) -> io::Result<()> {
        if !in_bench_range(addr) || !(15..=32).contains(&prefix) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "only 198.18.0.0/15 addresses are allowed",
            ));
        }
        let cidr = format!("{addr}/{prefix}");
        self.ip(&["addr", "add", &cidr, "dev", link])?;
        self.ip(&["link", "set", link, "up"])?;
        Ok(())
    }

    /// Gives `link` (inside the namespace) the IPv6 address `addr/prefix`, usable at once:
    /// Duplicate Address Detection is switched off on the link (`accept_dad` 0, so the
    /// kernel's own link-local address is usable too) and the address is added `nodad`.
    /// Refuses any address outside 2001:2::/48.
    pub fn configure6(&self, link: &str, addr: Ipv6Addr, prefix: u8) -> io::Result<()> {
        if !in_bench_range6(addr) || !(48..=128).contains(&prefix) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "only 2001:2::/48 addresses are allowed",
            ));
        }
        let key = format!("net.ipv6.conf.{link}.accept_dad=0");
        check(
            self.run("sysctl", &["-q", "-w", &key])?,
            "sysctl accept_dad",
        )?;
        let cidr = format!("{addr}/{prefix}");
        self.ip(&["-6", "addr", "add", &cidr, "dev", link, "nodad"])?;
        Ok(())
    }

    /// Sets the MTU of `link` inside the namespace.
    pub fn set_mtu(&self, link: &str, mtu: usize) -> io::Result<()> {
        self.ip(&["link", "set", link, "mtu", &mtu.to_string()])
            .map(drop)
    }

    /// Creates a veth pair: `outer` stays in the caller's namespace (up, no address), `inner`
    /// moves into this one. Returns nothing; both names must be free.
    pub fn veth_pair(&mut self, outer: &str, inner: &str) -> io::Result<()> {
        ip(&["link", "add", outer, "type", "veth", "peer", "name", inner])?;
        self.root_links.push(outer.to_owned());
        self.adopt(inner)?;
        ip(&["link", "set", outer, "up"])?;
        Ok(())
    }

    /// A command that runs inside the namespace (`ip netns exec NS program ...`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `program args` inside the namespace to completion.
    pub fn run(&self, program: &str, args: &[&str]) -> io::Result<Output> {
        self.command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
    }

    /// Runs `f` on a new thread that has entered this namespace (setns(2) changes that
    /// thread's namespace alone; threads `f` starts inherit it), and returns what `f` returns:
    /// kernel-side `std::net` sockets for in-process tests. A panic in `f` is resumed here.
    #[allow(unsafe_code)]
    pub fn run_in<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(format!("/var/run/netns/{}", self.name))?;
        std::thread::scope(|s| {
            let t = s.spawn(move || {
                // SAFETY: setns with a namespace descriptor held open for the call; it changes
                // only the calling thread's network namespace.
                let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                if r != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(f())
            });
            t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// Starts `program args` inside the namespace in the background.
    pub fn spawn(&self, program: &str, args: &[&str]) -> io::Result<Child> {
        self.command(program).args(args).spawn()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        for l in self.root_links.drain(..) {
            // Deleting one end of a veth deletes both; it may already be gone with the ns.
            let _ = ip(&["link", "del", &l]);
        }
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Names of the namespaces `ip netns list` shows (for leak checks).
pub fn list() -> io::Result<Vec<String>> {
    let out = ip(&["netns", "list"])?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_benchmarking_range_is_allowed() {
        assert!(in_bench_range(Ipv4Addr::new(198, 18, 0, 1)));
        assert!(in_bench_range(Ipv4Addr::new(198, 19, 255, 254)));
        assert!(!in_bench_range(Ipv4Addr::new(198, 20, 0, 1)));
        assert!(!in_bench_range(Ipv4Addr::new(198, 17, 0, 1)));
        assert!(!in_bench_range(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(!in_bench_range(Ipv4Addr::new(192, 168, 1, 1)));
        let v6 = |s: &str| in_bench_range6(s.parse().unwrap());
        assert!(v6("2001:2::1") && v6("2001:2:0:1::2") && v6("2001:2:0:ffff::1"));
        assert!(!v6("2001:2:1::1") && !v6("2001:db8::1") && !v6("fe80::1") && !v6("::1"));
    }

    #[test]
    fn suffixes_differ() {
        assert_ne!(random_suffix(), random_suffix());
    }
}
