//! The veth fixture of the tests that put netfold on an AF_XDP socket with the kernel's
//! stack as its peer: two throw-away network namespaces joined by a veth pair. The kernel's
//! end is at [`KERNEL_IP`](crate::tapns::KERNEL_IP)/24 with transmit checksumming off (XDP
//! sees a veth peer's frames before a checksum left to the "hardware" is completed); the
//! host's end is up with no address and no IPv6, for netfold at
//! [`NETFOLD_IP`](crate::tapns::NETFOLD_IP) to bind. Only 198.18.0.0/15 is configured; both
//! namespaces (and the veth with them) are deleted by their guards, also when a test fails.

use crate::tapns::{KERNEL_IP, PREFIX};
use netfold_os::netns::{self, NetNs};
use std::io::{self, BufRead, BufReader};
use std::process::{Child, Stdio};

/// Kills a background process on drop (also when an assertion fails first), before the
/// namespaces it runs in go.
pub struct Reaper(pub Child);
impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The two namespaces and the veth pair between them.
pub struct KernelVeth {
    /// Holds the kernel's end, addressed.
    pub kernel: NetNs,
    /// Holds the host's end, for netfold.
    pub host: NetNs,
    pub kernel_if: String,
    pub host_if: String,
}

impl KernelVeth {
    /// A veth pair with `queues` receive and transmit queues per end (1: the default), or
    /// `Err(why)` to skip on: `ethtool` or `python3` missing (the caller prints `SKIPPED: why`).
    pub fn create(queues: u32) -> Result<KernelVeth, String> {
        if let Some(why) = netns::missing_tools(&["ethtool", "python3"]) {
            return Err(why);
        }
        let kernel = NetNs::create().expect("create netns");
        let host = NetNs::create().expect("create netns");
        let suffix = &kernel.name()[3..9];
        let (k, h) = (format!("nvk{suffix}"), format!("nvh{suffix}"));
        let q = queues.to_string();
        let mut add = vec!["link", "add", &k];
        if queues > 1 {
            add.extend(["numtxqueues", &q, "numrxqueues", &q]);
        }
        add.extend(["type", "veth", "peer", "name", &h]);
        if queues > 1 {
            add.extend(["numtxqueues", &q, "numrxqueues", &q]);
        }
        netns::ip(&add).expect("veth pair");
        kernel.adopt(&k).expect("adopt");
        host.adopt(&h).expect("adopt");
        kernel
            .configure(&k, KERNEL_IP, PREFIX)
            .expect("address the kernel's end");
        let off = kernel
            .run("ethtool", &["-K", &k, "tx", "off"])
            .expect("run ethtool");
        assert!(off.status.success(), "ethtool -K {k} tx off failed");
        let key = format!("net.ipv6.conf.{h}.disable_ipv6=1");
        let _ = host.run("sysctl", &["-q", "-w", &key]);
        host.ip(&["link", "set", &h, "up"]).expect("link up");
        Ok(KernelVeth {
            kernel,
            host,
            kernel_if: k,
            host_if: h,
        })
    }

    /// A kernel echo server (python3) on [`KERNEL_IP`]:`port` in the kernel's namespace, for
    /// one connection, ready when this returns; killed when the guard drops.
    pub fn echo_server(&self, port: u16) -> Reaper {
        let script = format!(
            "import socket\n\
             l=socket.socket(); l.bind(('{KERNEL_IP}',{port})); l.listen(1)\n\
             l.settimeout(60); print('ready', flush=True)\n\
             c,_=l.accept(); c.settimeout(30)\n\
             while True:\n    d=c.recv(65536)\n    if not d: break\n    c.sendall(d)\n\
             c.close()\n"
        );
        self.python_server(&script)
    }

    /// A kernel echo server (python3) on [`KERNEL_IP`]:`port` for `conns` connections at
    /// once (a thread each), ready when this returns; killed when the guard drops.
    pub fn echo_server_for(&self, port: u16, conns: usize) -> Reaper {
        let script = format!(
            r#"import socket, threading
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("{KERNEL_IP}", {port}))
l.listen({conns})
l.settimeout(60)
print("ready", flush=True)
def echo(c):
    c.settimeout(30)
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
ts = []
for _ in range({conns}):
    c, _ = l.accept()
    t = threading.Thread(target=echo, args=(c,))
    t.start()
    ts.append(t)
for t in ts:
    t.join()
"#
        );
        self.python_server(&script)
    }

    /// Runs python3 `script` in the kernel's namespace and waits for its "ready" line.
    fn python_server(&self, script: &str) -> Reaper {
        let mut child = Reaper(
            self.kernel
                .command("python3")
                .args(["-c", script])
                .stdout(Stdio::piped())
                .spawn()
                .expect("python3 echo server"),
        );
        let mut line = String::new();
        BufReader::new(child.0.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("echo server ready");
        assert_eq!(line.trim(), "ready");
        child
    }

    /// Runs `f` on a thread inside the host's namespace (where the AF_XDP socket is opened;
    /// it keeps working from any thread afterwards).
    pub fn in_host<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        self.host.run_in(f)
    }
}

/// The AF_XDP shard tests' fixture: a [`KernelVeth`] with `queues` queues and an AF_XDP
/// socket on each queue of its host end (one XDP program redirecting the frames for
/// netfold's address, [`netfold_os::xdpmq::open_queues`]). `None`, after printing
/// `SKIPPED: ...`, where the namespaces or AF_XDP are unavailable.
pub fn xdp_queues(queues: u32) -> Option<(KernelVeth, Vec<netfold_os::xdpmq::XdpQueue>)> {
    let veth = match KernelVeth::create(queues) {
        Ok(v) => v,
        Err(why) => {
            netns::skip(Some(why));
            return None;
        }
    };
    let ifname = veth.host_if.clone();
    let local = [crate::tapns::NETFOLD_IP.into()];
    let opened = veth
        .in_host(|| {
            netfold_os::xdpmq::open_queues(
                &ifname,
                queues,
                netfold_os::xdp::XdpConfig::local(&local),
            )
        })
        .expect("enter the host's namespace");
    match opened.map_err(io::Error::from) {
        Err(e) if xdp_unavailable(&e) => {
            netns::skip(Some(format!("AF_XDP unavailable: {e}")));
            None
        }
        r => Some((veth, r.expect("AF_XDP queues"))),
    }
}

/// Whether an open error means AF_XDP is unavailable here (not root, or a kernel without
/// it), the reason to print `SKIPPED: ...` for.
pub fn xdp_unavailable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied | io::ErrorKind::Unsupported
    )
}
