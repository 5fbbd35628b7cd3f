//! The namespace and TAP fixture of the tests that put netfold on a TAP with the kernel's
//! stack as its peer: a throw-away network namespace holding the TAP's kernel side at
//! [`KERNEL_IP`]/24, netfold at [`NETFOLD_IP`]/24 in the test process. Only 198.18.0.0/15 is
//! configured. The namespace is `netfold_os::netns::NetNs`, deleted by its guard also when a
//! test fails; without root or `/dev/net/tun` a test prints `SKIPPED: ...` and passes
//! ([`require_env!`](crate::require_env)).
//!
//! Two ways to get the TAP there:
//! - opened in this process (e.g. the queues of a multi-queue TAP, `netfold_os::mqtap`),
//!   then moved into the namespace: [`kernel_side`];
//! - made inside the namespace by `ip tuntap` for a program that runs there (a C test under
//!   `ip netns exec`, `netfold serve`): [`add_tap`], or the [`NsTap`] guard that deletes it.

use netfold::iface::StackConfig;
use netfold::wire::ethernet::EthernetAddress;
use netfold_os::netns::NetNs;
use std::io;
use std::net::Ipv4Addr;
use std::sync::Mutex;

/// The kernel's side of the TAP, in the namespace.
pub const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// netfold's address on the TAP.
pub const NETFOLD_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The prefix both sides use.
pub const PREFIX: u8 = 24;

/// One namespace test at a time per test binary: each starts a kernel peer, shards and
/// threads of its own, and the tests' time limits assume no other such test shares the CPUs.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// Returns from the calling test, after printing `SKIPPED: <why>`, when network namespaces
/// cannot be made here (not root, no `ip`, no `/dev/net/tun`).
#[macro_export]
macro_rules! require_env {
    () => {
        if $crate::tapns::skip_without_netns() {
            return;
        }
    };
}

/// Whether namespaces are unavailable (then it has printed `SKIPPED: <why>`).
pub fn skip_without_netns() -> bool {
    netfold_os::netns::skip(netfold_os::netns::unavailable_reason())
}

/// netfold's stack on the TAP: [`NETFOLD_IP`]/24, a locally administered MAC.
pub fn stack() -> StackConfig {
    StackConfig {
        mac: EthernetAddress([0x02, 0x6e, 0x66, 0, 0, 2]),
        addr: NETFOLD_IP,
        prefix_len: PREFIX,
        ..StackConfig::default()
    }
}

/// Connection `c`'s `len` bytes: a pattern that differs per connection, so bytes delivered
/// on the wrong connection show.
pub fn payload(c: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + c * 13) % 251) as u8).collect()
}

/// Moves TAP `name`, opened in this process, into `ns` and gives its kernel side
/// [`KERNEL_IP`]/24 (up). Panics on failure: the test cannot go on.
pub fn kernel_side(ns: &NetNs, name: &str) {
    ns.adopt(name).expect("move tap into netns");
    ns.configure(name, KERNEL_IP, PREFIX).expect("address tap");
}

/// Makes a persistent TAP (`mode` "tap" or "tun"; `multi_queue` for one queue per shard)
/// named `name` inside `ns`, its kernel side at [`KERNEL_IP`]/24 (up). A persistent device
/// outlives its users: delete it before the namespace goes ([`NsTap`] does).
pub fn add_tap(ns: &NetNs, name: &str, mode: &str, multi_queue: bool) -> io::Result<()> {
    let mut add = vec!["tuntap", "add", "mode", mode, "name", name];
    if multi_queue {
        add.push("multi_queue");
    }
    ns.ip(&add)?;
    ns.configure(name, KERNEL_IP, PREFIX)
}

/// A persistent TAP made in a namespace by [`add_tap`], deleted on drop (also when the test
/// fails); declared after the namespace, so dropped before it.
pub struct NsTap<'a> {
    ns: &'a NetNs,
    name: String,
    mode: &'static str,
}

impl<'a> NsTap<'a> {
    /// [`add_tap`] as a guard. Panics on failure.
    pub fn add(ns: &'a NetNs, name: &str, mode: &'static str, multi_queue: bool) -> NsTap<'a> {
        add_tap(ns, name, mode, multi_queue).expect("create tap in the namespace");
        NsTap {
            ns,
            name: name.to_string(),
            mode,
        }
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for NsTap<'_> {
    fn drop(&mut self) {
        let _ = self
            .ns
            .ip(&["tuntap", "del", "mode", self.mode, "name", &self.name]);
    }
}

/// The kernel side of the shard echo tests: `conns` concurrent kernel TCP clients inside `ns`,
/// client `c` sending [`payload`]`(c, len)` to `addr`, closing its sending side and reading
/// the echo to the end. Returns each client's local port and whether its echo was the bytes
/// it sent (or the error that stopped it).
pub fn kernel_echo_clients(
    ns: &NetNs,
    addr: std::net::SocketAddrV4,
    conns: usize,
    len: usize,
) -> Vec<io::Result<(u16, bool)>> {
    use std::io::{Read, Write};
    use std::time::Duration;
    ns.run_in(|| {
        let clients: Vec<_> = (0..conns)
            .map(|c| {
                std::thread::spawn(move || -> io::Result<(u16, bool)> {
                    let mut s = std::net::TcpStream::connect_timeout(
                        &addr.into(),
                        Duration::from_secs(10),
                    )?;
                    s.set_read_timeout(Some(Duration::from_secs(20)))?;
                    let port = s.local_addr()?.port();
                    let data = payload(c, len);
                    s.write_all(&data)?;
                    s.shutdown(std::net::Shutdown::Write)?;
                    let mut back = Vec::new();
                    s.read_to_end(&mut back)?;
                    Ok((port, back == data))
                })
            })
            .collect();
        clients.into_iter().map(|t| t.join().unwrap()).collect()
    })
    .expect("enter the kernel's namespace")
}

/// The local ports of [`kernel_echo_clients`]' results, panicking on a connection that
/// failed or whose echo differs.
pub fn echoed_ports(results: Vec<io::Result<(u16, bool)>>) -> Vec<u16> {
    let mut ports = Vec::new();
    for (c, r) in results.into_iter().enumerate() {
        let (port, same) = r.unwrap_or_else(|e| panic!("connection {c}: {e}"));
        assert!(same, "connection {c}: the echo differs");
        ports.push(port);
    }
    ports
}
