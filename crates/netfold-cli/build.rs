//! Records the git commit the binary was built from (NETFOLD_COMMIT), so every JSON result can
//! say which code produced it. Outside a git checkout the variable is empty and the binary asks
//! git at run time, or says "unknown". Also how it was built (NETFOLD_BUILD: `release`,
//! `release+pgo` for `scripts/pgo-build.sh`'s binary, `release+pgo-instrumented`, `debug`):
//! profile-guided layout moves TCP_RR by ~1.9x, so a number must say which build it is from.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .map(|s| !s.is_empty())
        .unwrap_or(false);
    let value = if commit.is_empty() {
        String::new()
    } else if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    };
    println!("cargo:rustc-env=NETFOLD_COMMIT={value}");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let has = |f: &str| flags.split('\x1f').any(|x| x.starts_with(f));
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into());
    let build = if has("-Cprofile-use") {
        format!("{profile}+pgo")
    } else if has("-Cprofile-generate") {
        format!("{profile}+pgo-instrumented")
    } else {
        profile
    };
    println!("cargo:rustc-env=NETFOLD_BUILD={build}");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    // Rebuild when HEAD moves (a commit, a checkout); in a worktree the git dir is not .git.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        for f in ["HEAD", "logs/HEAD", "index"] {
            println!("cargo:rerun-if-changed={dir}/{f}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
