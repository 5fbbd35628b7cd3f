//! Helpers shared by the integration tests that run the `netfold` binary over real links
//! (`tests/emu.rs`, `tests/tun.rs`).

use netfold_os::netns;
use std::process::{Command, Output};

/// True (with the reason printed) where namespaces, /dev/net/tun or ip(8) are missing: the
/// caller then skips, passing.
pub fn skip() -> bool {
    netns::skip(netns::unavailable_reason())
}

/// Runs the `netfold` binary this test build made.
pub fn netfold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netfold"))
        .args(args)
        .output()
        .expect("run netfold")
}

/// Runs `netfold ARGS --json`, which must succeed, and parses its output.
pub fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let o = netfold(&a);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}
