//! `netfold run -- PROGRAM ARGS`: runs an unmodified, dynamically linked program with its
//! AF_INET/AF_INET6 sockets on netfold, through `libnetfold_preload.so` (LD_PRELOAD), as
//! `onload PROGRAM` does for OpenOnload. The options become the library's environment
//! (NETFOLD_LINK, NETFOLD_ADDR, ...); then the program replaces this process.

use super::CmdResult;
use clap::Parser;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The library's file name.
const LIB: &str = "libnetfold_preload.so";

#[derive(Parser, Debug)]
pub struct Args {
    /// The link: `tap:NAME` or `tun:NAME` (created if it does not exist), or `packet:IFNAME`
    /// (an existing Ethernet interface, through an AF_PACKET socket).
    #[arg(long)]
    link: String,
    /// The program's address and prefix, e.g. 198.18.0.2/24; repeat it for more: at most one
    /// IPv4 address, and IPv6 ones (e.g. 2001:2:0:1::2/64).
    #[arg(long, required = true)]
    addr: Vec<String>,
    /// Default gateway (one per address family; repeat for both).
    #[arg(long)]
    gateway: Vec<String>,
    /// IP MTU (default: the interface's).
    #[arg(long)]
    mtu: Option<u32>,
    /// If netfold cannot start (the link cannot be opened, ...), run the program on the
    /// kernel's sockets, with a message on stderr, instead of exiting at its first socket.
    #[arg(long)]
    fallback: bool,
    /// The preload library. Default: libnetfold_preload.so beside this binary, then in
    /// ../lib and ../lib/netfold from it, then in ./target/release and ./target/debug.
    #[arg(long)]
    lib: Option<PathBuf>,
    /// Who runs the stack: `inline` (the program's own calls poll it: a call that has to wait
    /// sleeps on the device itself, and a fallback thread takes over while the program makes
    /// no call, so timers and acknowledgements still run) or `thread` (a driver thread polls
    /// it; the program's calls wake it and wait for it). Sets NETFOLD_POLL; default: the
    /// library's, `inline`.
    #[arg(long, value_name = "MODE", value_parser = ["thread", "inline"])]
    poll: Option<String>,
    /// Print one line on stderr when the program's stack starts, and the stack's counters at
    /// exit (with `--poll inline` also the polls made by the program's calls and by the
    /// fallback thread).
    #[arg(long)]
    verbose: bool,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

/// Where the library is looked for, in order, when --lib is not given.
fn candidates(exe: Option<&Path>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        v.push(dir.join(LIB));
        // A binary in target/debug/deps or target/debug/examples has the library one up.
        if let Some(up) = dir.parent() {
            v.push(up.join(LIB));
            v.push(up.join("lib").join(LIB));
            v.push(up.join("lib").join("netfold").join(LIB));
        }
    }
    v.push(PathBuf::from("target/release").join(LIB));
    v.push(PathBuf::from("target/debug").join(LIB));
    v
}

fn find_lib(a: &Args) -> Result<PathBuf, String> {
    if let Some(p) = &a.lib {
        return if p.is_file() {
            Ok(p.clone())
        } else {
            Err(format!("--lib {}: no such file", p.display()))
        };
    }
    let exe = std::env::current_exe().ok();
    let list = candidates(exe.as_deref());
    list.iter()
        .find(|p| p.is_file())
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .ok_or_else(|| {
            format!(
                "{LIB} not found (looked at {}); build it with `cargo build -p netfold-preload` \
                 or pass --lib",
                list.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// LD_PRELOAD with the library first, then whatever was preloaded already.
fn preload_value(lib: &Path, old: Option<OsString>) -> OsString {
    let mut v = OsString::from(lib);
    if let Some(old) = old.filter(|o| !o.is_empty()) {
        v.push(":");
        v.push(old);
    }
    v
}

pub fn run(a: Args) -> CmdResult {
    let lib = find_lib(&a)?;
    let (prog, args) = a.command.split_first().ok_or("no program given")?;
    let mut c = std::process::Command::new(prog);
    c.args(args)
        .env(
            "LD_PRELOAD",
            preload_value(&lib, std::env::var_os("LD_PRELOAD")),
        )
        .env("NETFOLD_LINK", &a.link)
        .env("NETFOLD_ADDR", a.addr.join(","))
        .env("NETFOLD_GATEWAY", a.gateway.join(","));
    match a.mtu {
        Some(m) => c.env("NETFOLD_MTU", m.to_string()),
        None => c.env_remove("NETFOLD_MTU"),
    };
    if a.fallback {
        c.env_remove("NETFOLD_REQUIRE");
    } else {
        c.env("NETFOLD_REQUIRE", "1");
    }
    if let Some(p) = &a.poll {
        c.env("NETFOLD_POLL", p);
    }
    if a.verbose {
        c.env("NETFOLD_VERBOSE", "1");
    }
    // exec(2) returns only on failure.
    let e = c.exec();
    Err(format!("{}: {e}", Path::new(prog).display()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_looked_for_beside_the_binary_first() {
        let c = candidates(Some(Path::new("/opt/nf/bin/netfold")));
        assert_eq!(c[0], PathBuf::from("/opt/nf/bin").join(LIB));
        assert_eq!(c[1], PathBuf::from("/opt/nf").join(LIB));
        assert!(c.contains(&PathBuf::from("/opt/nf/lib").join(LIB)));
        assert_eq!(c.last(), Some(&PathBuf::from("target/debug").join(LIB)));
    }

    #[test]
    fn an_existing_preload_is_kept_after_ours() {
        let lib = Path::new("/x/libnetfold_preload.so");
        assert_eq!(
            preload_value(lib, None),
            OsString::from("/x/libnetfold_preload.so")
        );
        assert_eq!(
            preload_value(lib, Some("libfoo.so".into())),
            OsString::from("/x/libnetfold_preload.so:libfoo.so")
        );
        assert_eq!(
            preload_value(lib, Some("".into())),
            OsString::from("/x/libnetfold_preload.so")
        );
    }
}
