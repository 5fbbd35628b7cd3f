//! `--link emu` and `netfold emulate`: the kernel, netfold and smoltcp over
//! netfold's user-space link emulator between two network namespaces, with the impairments
//! applied to all three. Needs root, /dev/net/tun and ip(8); skipped (passing) without them. Every namespace and
//! TAP is removed afterwards, also when an assertion fails: the benchmark runs clean up after
//! themselves (their guards), and the `emulate` test's namespaces are `NetNs` guards and its
//! emulator a child process killed on drop.

mod common;

use common::{json, skip};
use netfold_os::netns::NetNs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// No namespace or TAP of ours is left behind (other tests may run concurrently, so only the
/// names this test made are checked by the callers that know them; this checks the TAPs the
/// benchmark names `nfe*`).
fn emu_links_left() -> usize {
    let out = Command::new("ip").args(["-o", "link"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(": nfe"))
        .count()
}

#[test]
fn rr_over_emu_with_5ms_delay_has_a_10ms_p50_on_kernel_netfold_and_smoltcp() {
    if skip() {
        return;
    }
    let v = json(&[
        "rr",
        "--stack",
        "kernel,netfold,smoltcp",
        "--link",
        "emu",
        "--delay",
        "5ms",
        "-l",
        "1",
    ]);
    let rows = v["results"].as_array().expect("results");
    // kernel and netfold at both placements; smoltcp (both interfaces on one thread) at one.
    for stack in ["kernel", "netfold", "smoltcp"] {
        assert!(
            rows.iter().any(|r| r["stack"] == stack),
            "no {stack} row: {v}"
        );
    }
    for r in rows {
        assert_eq!(r["link"], "emu", "{r}");
        let p50_ms = r["latency_us"]["p50"].as_f64().expect("p50") / 1000.0;
        assert!(
            (9.5..=12.0).contains(&p50_ms),
            "{} ({}) p50 {p50_ms} ms, expected about 10 ms (2 x 5 ms)",
            r["stack"],
            r["placement"]
        );
    }
}

#[test]
fn stream_over_emu_with_loss_arrives_verified() {
    if skip() {
        return;
    }
    let v = json(&[
        "stream",
        "--stack",
        "netfold,kernel",
        "--link",
        "emu",
        "--loss",
        "0.01",
        "--verify",
        "--bytes",
        "4M",
        "--placement",
        "2cpu",
    ]);
    for r in v["results"].as_array().expect("results") {
        assert_eq!(r["verified"], true, "{r}");
        let lost = r["details"]["emu_lost"].as_u64().expect("emu_lost");
        assert!(lost > 0, "1% loss dropped nothing: {r}");
        // The segments the model let through were merged back towards the receiver (B).
        let emu = r["details"]["emu"].as_str().expect("emu");
        assert!(merged_towards_b(emu) > 0, "nothing merged: {emu}");
    }
}

/// How many super-frames the emulator merged from segments on the way to TAP B, from its
/// counters ("written to B: N frames (X bytes; M merged from S segments), ...").
fn merged_towards_b(emu: &str) -> u64 {
    let line = emu
        .lines()
        .find(|l| l.starts_with("written to B"))
        .unwrap_or_else(|| panic!("no B counters: {emu}"));
    let before = line.split(" merged from").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn stream_over_emu_with_corruption_is_caught_by_checksums() {
    if skip() {
        return;
    }
    let v = json(&[
        "stream",
        "--stack",
        "netfold,kernel",
        "--link",
        "emu",
        "--corrupt",
        "0.02",
        "--verify",
        "--bytes",
        "2M",
        "--placement",
        "2cpu",
    ]);
    for r in v["results"].as_array().expect("results") {
        assert_eq!(r["verified"], true, "{r}");
        assert!(r["details"]["emu"].as_str().unwrap().contains("corrupted"));
    }
}

#[test]
fn smoltcp_stream_over_emu_with_loss_arrives_verified() {
    if skip() {
        return;
    }
    let v = json(&[
        "stream", "--stack", "smoltcp", "--link", "emu", "--loss", "0.01", "--verify", "--bytes",
        "2M",
    ]);
    let rows = v["results"].as_array().expect("results");
    assert_eq!(rows.len(), 1, "{v}");
    let r = &rows[0];
    assert_eq!(r["link"], "emu", "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["bytes"], 2 << 20, "{r}");
    let lost = r["details"]["emu_lost"].as_u64().expect("emu_lost");
    assert!(lost > 0, "1% loss dropped nothing: {r}");
    // smoltcp's TAPs have no offloads: only wire-sized frames, nothing merged.
    let emu = r["details"]["emu"].as_str().expect("emu");
    assert_eq!(merged_towards_b(emu), 0, "{emu}");
    assert!(emu.contains("0 split into 0 segments"), "{emu}");
}

#[test]
fn smoltcp_runs_every_tcp_test_over_emu() {
    if skip() {
        return;
    }
    for test in ["maerts", "crr"] {
        let v = json(&[
            test, "--stack", "smoltcp", "--link", "emu", "--delay", "1ms", "-l", "0.5",
        ]);
        let r = &v["results"][0];
        assert_eq!(r["link"], "emu", "{r}");
        assert!(r["bytes"].as_u64().unwrap_or(0) > 0, "{test}: {r}");
    }
}

/// Kills the emulator process on drop (a failed assertion must not leave it running).
struct Reaper(Child);
impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `f` on a thread inside namespace `ns`.
fn in_ns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
            // SAFETY: setns with a namespace descriptor we hold open; it changes only this
            // thread's network namespace.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap()
    })
}

#[test]
fn emulate_forwards_between_two_namespaces_with_its_delay() {
    if skip() {
        return;
    }
    let a = NetNs::create().unwrap();
    let b = NetNs::create().unwrap();
    let (ta, tb) = (
        format!("nfx{}a", &a.name()[3..]),
        format!("nfx{}b", &a.name()[3..]),
    );
    let child = Command::new(env!("CARGO_BIN_EXE_netfold"))
        .args([
            "emulate",
            "--a",
            &ta,
            "--b",
            &tb,
            "--a-netns",
            a.name(),
            "--b-netns",
            b.name(),
            "--delay",
            "10ms",
            "--duration",
            "15",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut emu = Reaper(child);
    // Wait until the interfaces have arrived in their namespaces.
    let t = Instant::now();
    while !(a.ip(&["link", "show", &ta]).is_ok() && b.ip(&["link", "show", &tb]).is_ok()) {
        assert!(t.elapsed() < Duration::from_secs(5), "TAPs never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (ip_a, ip_b) = (Ipv4Addr::new(198, 18, 6, 1), Ipv4Addr::new(198, 18, 6, 2));
    a.configure(&ta, ip_a, 24).unwrap();
    b.configure(&tb, ip_b, 24).unwrap();
    let listener = in_ns(b.name(), || TcpListener::bind((ip_b, 0)).unwrap());
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4];
        for _ in 0..3 {
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
    });
    let rtts = in_ns(a.name(), || {
        let t = Instant::now();
        let mut c = TcpStream::connect_timeout(&(ip_b, port).into(), Duration::from_secs(5))
            .expect("connect through the emulator");
        // The SYN/SYN-ACK exchange (after ARP, itself one round trip) is one round trip.
        let mut rtts = vec![t.elapsed()];
        c.set_nodelay(true).unwrap();
        let mut buf = [0u8; 4];
        for _ in 0..3 {
            let t = Instant::now();
            c.write_all(b"ping").unwrap();
            c.read_exact(&mut buf).unwrap();
            rtts.push(t.elapsed());
        }
        rtts
    });
    server.join().unwrap();
    for r in &rtts {
        assert!(
            *r >= Duration::from_millis(20) && *r < Duration::from_millis(200),
            "round trip {r:?} over a 10 ms link (all: {rtts:?})"
        );
    }
    // SIGTERM: the emulator stops and prints its counters.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(emu.0.id() as libc::pid_t, libc::SIGTERM) };
    let mut out = String::new();
    emu.0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = emu.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        out.contains("A->B: read") && out.contains("written to B"),
        "{out}"
    );
    drop(emu);
    drop(a);
    drop(b);
    let left = Command::new("ip").args(["-o", "link"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&left.stdout).contains(&ta));
    let _ = emu_links_left();
}
