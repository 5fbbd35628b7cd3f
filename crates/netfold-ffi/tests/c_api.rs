//! Builds libnetfold (static and shared) with cargo, compiles the C tests in `tests/c/` and the
//! C example with gcc against `include/netfold.h`, and runs the tests.
//!
//! The library is built by a nested `cargo build -p netfold-ffi --lib` into its own target
//! directory (`<target>/ffi-ctest`): the outer `cargo test` may still hold the lock on its own
//! target directory, and a fresh clone's `cargo test --workspace` must build everything itself.

use netfold_os::netns;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `<target>/<profile>/deps/c_api-<hash>` -> (`<target>`, profile directory name).
fn target_and_profile() -> (PathBuf, String) {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary lives in <target>/<profile>/deps");
    let target = profile_dir.parent().expect("target dir").to_path_buf();
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_string();
    (target, profile)
}

/// Builds the libraries once per test process; returns the directory holding them.
fn libdir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let (target, profile) = target_and_profile();
        let own_target = target.join("ffi-ctest");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace())
            .args(["build", "-p", "netfold-ffi", "--lib", "--target-dir"])
            .arg(&own_target);
        let out_profile = match profile.as_str() {
            "debug" => "debug".to_string(),
            "release" => {
                cmd.arg("--release");
                "release".to_string()
            }
            other => {
                cmd.args(["--profile", other]);
                other.to_string()
            }
        };
        let st = cmd.status().expect("run cargo build for netfold-ffi");
        assert!(st.success(), "cargo build -p netfold-ffi failed");
        let dir = own_target.join(out_profile);
        assert!(
            dir.join("libnetfold.a").exists(),
            "no libnetfold.a in {dir:?}"
        );
        assert!(
            dir.join("libnetfold.so").exists(),
            "no libnetfold.so in {dir:?}"
        );
        dir
    })
}

fn outdir() -> PathBuf {
    let d = libdir().join("ctests");
    std::fs::create_dir_all(&d).expect("create ctests dir");
    d
}

/// Compiles `src` (relative to the workspace) into an executable; `shared` links libnetfold.so
/// instead of libnetfold.a.
fn compile(src: &str, name: &str, shared: bool) -> PathBuf {
    let ws = workspace();
    let out = outdir().join(name);
    let mut cmd = Command::new("gcc");
    cmd.args([
        "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread",
    ])
    .arg("-I")
    .arg(ws.join("include"))
    .arg("-I")
    .arg(ws.join("crates/netfold-ffi/tests/c"))
    .arg(ws.join(src))
    .arg("-o")
    .arg(&out);
    if shared {
        cmd.arg("-L").arg(libdir()).arg("-lnetfold");
        cmd.arg(format!("-Wl,-rpath,{}", libdir().display()));
    } else {
        cmd.arg(libdir().join("libnetfold.a"));
    }
    cmd.args(["-lpthread", "-ldl", "-lm"]);
    let o = cmd.output().expect("gcc is needed to build the C tests");
    assert!(
        o.status.success(),
        "gcc {src} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Runs a compiled C test; it must exit 0 within 120 s.
fn run(exe: &Path) {
    run_command(Command::new(exe), exe);
}

/// Runs `cmd` (which runs the C test `exe`); it must exit 0 within 120 s.
fn run_command(mut cmd: Command, exe: &Path) {
    let mut child = cmd
        // cargo points LD_LIBRARY_PATH at the outer target dir, which may hold an older
        // libnetfold.so than the one just built; it would win over the executable's rpath.
        .env("LD_LIBRARY_PATH", libdir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn C test");
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("wait for C test") {
            let o = child.wait_with_output().expect("collect output");
            let out = String::from_utf8_lossy(&o.stdout);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(st.success(), "{exe:?} failed ({st}):\n{out}\n{err}");
            print!("{out}");
            return;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{exe:?} did not finish within 120 s");
        }
        // Polling a child's exit status (a C program may block in pthread_join if broken).
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Why the C tests cannot run here: they compile with gcc.
fn no_gcc() -> bool {
    netns::skip(netns::missing_tools(&["gcc"]))
}

fn c_test(name: &str) {
    if no_gcc() {
        return;
    }
    let exe = compile(&format!("crates/netfold-ffi/tests/c/{name}.c"), name, false);
    run(&exe);
}

#[test]
fn c_layout_and_errors() {
    c_test("layout");
}

#[test]
fn c_layout_against_shared_library() {
    if no_gcc() {
        return;
    }
    let exe = compile("crates/netfold-ffi/tests/c/layout.c", "layout_so", true);
    run(&exe);
}

#[test]
fn c_handshake_and_transfer() {
    c_test("handshake");
}

#[test]
fn c_nonblocking_connect_and_poll() {
    c_test("nbconnect_poll");
}

#[test]
fn c_dual_stack_af_inet6_sockets() {
    c_test("dualstack");
}

#[test]
fn c_ipv6_addresses_through_nf_config() {
    c_test("ipv6");
}

#[test]
fn c_fastopen_server() {
    c_test("fastopen");
}

#[test]
fn c_refused_connect() {
    c_test("refused");
}

#[test]
fn c_blocking_read_woken_by_other_thread() {
    c_test("blocking_thread");
}

#[test]
fn c_manual_clock_retransmission() {
    c_test("retransmit");
}

#[test]
fn c_manual_clock_next_timer() {
    c_test("next_timer");
}

#[test]
fn c_zero_copy_send_and_completions() {
    c_test("zerocopy");
}

#[test]
fn c_linux_msg_zerocopy_and_error_queue() {
    c_test("msg_zerocopy");
}

#[test]
fn c_software_receive_timestamps() {
    c_test("rx_timestamp");
}

#[test]
fn c_software_transmit_timestamps() {
    c_test("tx_timestamp");
}

#[test]
fn c_real_clock_threads() {
    c_test("real_clock");
}

#[test]
fn c_close_and_shutdown_deliver_every_byte_then_reset_what_is_left() {
    c_test("drain");
}

#[test]
fn c_shards_accept_and_connect_on_their_own_shard() {
    c_test("shards");
}

/// `nf_shards_new_tap` on a real 2-queue TAP: the C program runs inside a throw-away network
/// namespace (`ip netns exec`) holding the TAP (made beforehand, `multi_queue`, its kernel
/// side at 198.18.0.1/24), so its kernel clients (plain sockets) and the shards' queues meet
/// there; it checks every echo byte for byte and that each connection was accepted once by
/// one shard's `nf_accept_on`. Needs root and /dev/net/tun: without them `SKIPPED: ...`. Only
/// 198.18.0.0/15 is configured; the namespace (and the TAP in it) is deleted by its guard,
/// also when the test fails.
#[test]
fn c_shards_on_a_multi_queue_tap_in_a_namespace() {
    use netfold_os::netns::NetNs;
    if netns::skip(netns::unavailable_with(&["gcc"])) {
        return;
    }
    let exe = compile(
        "crates/netfold-ffi/tests/c/shards_tap.c",
        "shards_tap",
        false,
    );
    let ns = NetNs::create().expect("create netns");
    // Deleted (before the namespace) also when the C program fails.
    let tap = netfold_testkit::tapns::NsTap::add(&ns, "nfct0", "tap", true);
    let mut cmd = ns.command(exe.to_str().expect("utf-8 path"));
    cmd.arg(tap.name());
    run_command(cmd, &exe);
}

/// `nf_shards_new_device(cfg, "xdp:IFNAME", 2, ...)`: the same C program as the TAP test,
/// its two shards on the AF_XDP queues of one end of a veth pair made with two transmit
/// and two receive queues at each end, the kernel's end (198.18.54.1/24, transmit
/// checksumming off) and its clients in the same throw-away namespace; it also checks that
/// three shards on two queues are refused (EINVAL). Needs root, gcc and ethtool: without
/// them `SKIPPED: ...`; without AF_XDP the program prints SKIPPED itself. The namespace (and
/// the veth in it) is deleted by its guard, also on failure.
#[test]
fn c_shards_on_the_xdp_queues_of_a_veth_in_a_namespace() {
    use netfold_os::netns::NetNs;
    if netns::skip(netns::unavailable_with(&["gcc", "ethtool"])) {
        return;
    }
    let exe = compile(
        "crates/netfold-ffi/tests/c/shards_tap.c",
        "shards_xdp",
        false,
    );
    let ns = NetNs::create().expect("create netns");
    let suffix = &ns.name()[3..9];
    let (k, h) = (format!("nsk{suffix}"), format!("nsh{suffix}"));
    let q = ["numtxqueues", "2", "numrxqueues", "2"];
    let mut args = vec!["link", "add", &k];
    args.extend(q);
    args.extend(["type", "veth", "peer", "name", &h]);
    args.extend(q);
    ns.ip(&args).expect("veth");
    ns.configure(&k, std::net::Ipv4Addr::new(198, 18, 54, 1), 24)
        .expect("address");
    let off = ns
        .run("ethtool", &["-K", &k, "tx", "off"])
        .expect("ethtool");
    assert!(off.status.success(), "ethtool -K {k} tx off");
    let key = format!("net.ipv6.conf.{h}.disable_ipv6=1");
    let _ = ns.run("sysctl", &["-q", "-w", &key]);
    ns.ip(&["link", "set", &h, "up"]).expect("link up");
    let mut cmd = ns.command(exe.to_str().expect("utf-8 path"));
    cmd.arg(format!("xdp:{h}")).arg("198.18.54.2");
    run_command(cmd, &exe);
}

/// `nf_config.device = "xdp:IFNAME"`: the C program (`c/xdp.c`) runs in one throw-away
/// namespace holding one end of a veth pair and echoes through a kernel server in a second
/// one (198.18.53.1/24, transmit checksumming off: XDP sees a veth peer's frames before a
/// checksum it left to the "hardware" is completed). Needs root, gcc, python3 and ethtool:
/// without them `SKIPPED: ...`; without AF_XDP the program prints SKIPPED itself. Both
/// namespaces (and the veth with them) are deleted by their guards, also on failure.
#[test]
fn c_xdp_device_in_a_namespace() {
    use netfold_os::netns::NetNs;
    use std::io::{BufRead, BufReader};
    if netns::skip(netns::unavailable_with(&["gcc", "python3", "ethtool"])) {
        return;
    }
    let exe = compile("crates/netfold-ffi/tests/c/xdp.c", "xdp", false);
    let kernel = NetNs::create().expect("create netns");
    let host = NetNs::create().expect("create netns");
    let suffix = &kernel.name()[3..9];
    let (k, h) = (format!("nck{suffix}"), format!("nch{suffix}"));
    netns::ip(&["link", "add", &k, "type", "veth", "peer", "name", &h]).expect("veth");
    kernel.adopt(&k).expect("adopt");
    host.adopt(&h).expect("adopt");
    kernel
        .configure(&k, std::net::Ipv4Addr::new(198, 18, 53, 1), 24)
        .expect("address");
    let off = kernel
        .run("ethtool", &["-K", &k, "tx", "off"])
        .expect("ethtool");
    assert!(off.status.success(), "ethtool -K {k} tx off");
    let key = format!("net.ipv6.conf.{h}.disable_ipv6=1");
    let _ = host.run("sysctl", &["-q", "-w", &key]);
    host.ip(&["link", "set", &h, "up"]).expect("link up");
    let echo = "import socket\n\
                l=socket.socket(); l.bind(('198.18.53.1',7)); l.listen(1)\n\
                l.settimeout(60); print('ready', flush=True)\n\
                c,_=l.accept(); c.settimeout(30)\n\
                while True:\n    d=c.recv(65536)\n    if not d: break\n    c.sendall(d)\n\
                c.close()\n";
    /// Kills the echo server on drop (before the namespaces go), also on failure.
    struct Reaper(std::process::Child);
    impl Drop for Reaper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut srv = Reaper(
        kernel
            .command("python3")
            .args(["-c", echo])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python echo server"),
    );
    let mut line = String::new();
    BufReader::new(srv.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready");
    assert_eq!(line.trim(), "ready");
    let mut cmd = host.command(exe.to_str().expect("utf-8 path"));
    cmd.arg(&h);
    run_command(cmd, &exe);
    drop(srv);
}

#[test]
fn c_echo_server_example_builds() {
    if no_gcc() {
        return;
    }
    compile("examples/c/echo_server.c", "echo_server", false);
}

/// The header declares exactly the functions the library exports (both directions), with the
/// names the C API fixes.
#[test]
fn header_declares_every_exported_function() {
    let header = std::fs::read_to_string(workspace().join("include/netfold.h")).expect("header");
    let mut declared: Vec<String> = header
        .lines()
        .filter(|l| !l.trim_start().starts_with('*') && !l.trim_start().starts_with("/*"))
        .filter_map(|l| {
            // The identifier right before the first '(' is the declared function.
            let head = &l[..l.find('(')?];
            let start = head
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &head[start..];
            name.starts_with("nf_").then(|| name.to_string())
        })
        .collect();
    declared.sort();
    declared.dedup();
    assert_eq!(declared.len(), 61);
    if netns::skip(netns::missing_tools(&["nm"])) {
        return;
    }
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(libdir().join("libnetfold.so"))
        .output()
        .expect("nm (binutils) is needed for the export check");
    assert!(nm.status.success());
    let mut exported: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| s.starts_with("nf_"))
        .map(str::to_string)
        .collect();
    exported.sort();
    exported.dedup();
    assert_eq!(
        declared, exported,
        "include/netfold.h and libnetfold.so disagree"
    );
}
