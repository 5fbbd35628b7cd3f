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
    // What `netfold --version` prints after the name: "0.1.0 (commit 1234abcd5678, release)".
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let version = if value.is_empty() {
        format!("{version} ({build})")
    } else {
        format!("{version} (commit {value}, {build})")
    };
    println!("cargo:rustc-env=NETFOLD_VERSION={version}");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    // Rebuild when HEAD moves (a commit, a checkout, a reset): watch HEAD, the ref it points
    // to, packed-refs and HEAD's reflog, never the index (`git status` rewrites it, which
    // would relink the binary on the next `cargo run`). In a worktree the git dir is not .git
    // and the refs live in the common dir: git resolves each path (`--git-path`).
    for path in watched_git_files() {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

/// The existing files whose change means HEAD names another commit (a missing file would make
/// cargo rerun this script on every build).
fn watched_git_files() -> Vec<String> {
    let git_path = |p: &str| -> Option<std::path::PathBuf> {
        let path = std::path::PathBuf::from(git(&["rev-parse", "--git-path", p])?);
        Some(if path.is_relative() {
            std::env::current_dir().ok()?.join(path)
        } else {
            path
        })
    };
    let Some(head) = git_path("HEAD") else {
        return Vec::new();
    };
    let mut files = vec![head.clone()];
    // `ref: refs/heads/main` on a branch; a commit id when detached.
    let target = std::fs::read_to_string(&head).unwrap_or_default();
    if let Some(name) = target.trim().strip_prefix("ref: ") {
        files.extend(git_path(name));
    }
    files.extend(git_path("packed-refs"));
    files.extend(git_path("logs/HEAD"));
    files
        .into_iter()
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect()
}
