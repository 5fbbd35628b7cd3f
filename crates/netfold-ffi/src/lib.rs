//! The netfold C API: BSD-socket-like calls on a netfold stack. Built as
//! `libnetfold.so` and `libnetfold.a`; the declarations are in `include/netfold.h`, which a test
//! keeps in sync with the functions exported here (the `exports!` list) and with `nf_config`'s layout.
//!
//! Boundary rules: every entry point checks its pointers (NULL -> EFAULT, or EINVAL for a NULL
//! stack), runs inside `catch_unwind` (a Rust panic becomes -1/EIO, never an unwind into C) and
//! reports failure as -1 (or NULL) with the C library's `errno` set. The semantics live in safe
//! modules: `engine` (locking, clocks, the driver thread), `ops` (the calls), `options`
//! (getsockopt/setsockopt), `fd` (the descriptor table), `device` (nf_inject/nf_take),
//! `zerocopy` (nf_send_zc, nf_sendfile_zc, nf_zc_completions), `shards` (nf_shards_*: one
//! host as N stacks steered by RSS).
// `unsafe` is denied crate-wide and allowed only where the boundary needs it: the entry points
// (api.rs), the C struct accessors (cabi.rs) and errno (errno.rs), each block with a SAFETY
// comment.
#![deny(unsafe_code)]

mod api;
mod cabi;
mod device;
mod engine;
mod epoll;
mod errno;
mod fd;
mod ops;
mod options;
mod shards;
mod tcp_info;
mod timestamp;
mod zerocopy;

pub use api::*;

/// The LD_PRELOAD library: compiled in only when this crate is built as the `netfold-preload`
/// package's `libnetfold_preload.so` (its build script sets `netfold_preload`), which is this
/// C API plus the interposed libc socket calls, in one library.
#[cfg(netfold_preload)]
#[path = "../../netfold-preload/src/preload.rs"]
mod preload;
