//! netfold's TCP conformance suite (`conformance/` at the repository root): every packetdrill
//! script there runs against netfold through the `--so_filename` shim, each in its own network
//! namespace. The packetdrill binary lives outside the repository (`../shared/tools/packetdrill`
//! beside the checkout, or `$PACKETDRILL`); without it, `unshare`, gcc or root the test is
//! SKIPPED (`SKIPPED: ...` on stderr, passing). Scripts listed in `conformance/known-failures.txt` may fail (known netfold
//! defects); any other failing script fails this test.
//!
//! libnetfold.so is built by a nested `cargo build -p netfold-ffi --lib` into
//! `<target>/ffi-ctest`, the directory the C API tests (tests/c_api.rs) use, so one build
//! serves both.

use netfold_os::netns;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes to the real stderr, past libtest's output capture: the suite's per-script lines,
/// its known failures and the skip notice belong in the log even when the test passes.
fn loud(text: &str) {
    let mut err = std::io::stderr();
    // A failed write to stderr leaves nothing better to report it on.
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `<target>/<profile>/deps/conformance-<hash>` -> (`<target>`, profile directory name).
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

fn build_library() -> PathBuf {
    let (target, profile) = target_and_profile();
    let own_target = target.join("ffi-ctest");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace())
        .args(["build", "-p", "netfold-ffi", "--lib", "--target-dir"])
        .arg(&own_target);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let st = cmd.status().expect("run cargo build for netfold-ffi");
    assert!(st.success(), "cargo build -p netfold-ffi failed");
    let dir = own_target.join(&profile);
    assert!(
        dir.join("libnetfold.so").exists(),
        "no libnetfold.so in {dir:?}"
    );
    dir
}

fn packetdrill() -> PathBuf {
    match std::env::var_os("PACKETDRILL") {
        Some(p) => PathBuf::from(p),
        None => workspace().join("../shared/tools/packetdrill"),
    }
}

/// The reason the suite cannot run here, if any.
fn skip_reason() -> Option<String> {
    let pd = packetdrill();
    if !pd.exists() {
        return Some(format!(
            "no packetdrill binary at {} (set PACKETDRILL to one)",
            pd.display()
        ));
    }
    if let Some(why) = netns::missing_tools(&["unshare", "gcc", "bash"]) {
        return Some(why);
    }
    if !netns::is_root() {
        return Some("not root: `unshare -n` needs CAP_SYS_ADMIN".into());
    }
    None
}

/// Exit status conformance/run.sh uses for "cannot run here".
const SKIPPED: i32 = 77;

#[test]
fn packetdrill_conformance_suite() {
    if netns::skip(skip_reason()) {
        return;
    }
    let libdir = build_library();
    let out = Command::new("bash")
        .arg(workspace().join("conformance/run.sh"))
        .env("PACKETDRILL", packetdrill())
        .env("NETFOLD_LIBDIR", &libdir)
        .output()
        .expect("run conformance/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    loud(&format!(
        "\n--- conformance suite ---\n{stdout}{stderr}-------------------------\n"
    ));
    if out.status.code() == Some(SKIPPED) {
        netns::skip(Some(
            "conformance/run.sh cannot run here (see above)".into(),
        ));
        return;
    }
    let summary = stdout
        .lines()
        .find(|l| l.contains(" passed, "))
        .unwrap_or("no summary line");
    assert!(
        out.status.success(),
        "conformance suite: a script not in known-failures.txt failed: {summary}"
    );
    assert!(
        stdout.contains(" passed, "),
        "conformance/run.sh printed no summary"
    );
}
