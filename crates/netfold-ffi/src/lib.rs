//! The netfold C API: BSD-socket-like calls on a netfold stack (issue 7). Built as
//! `libnetfold.so` and `libnetfold.a`; the declarations are in `include/netfold.h`, which a test
//! keeps in sync with the functions exported here (the `exports!` list) and with `nf_config`'s layout.
//!
//! Boundary rules: every entry point checks its pointers (NULL -> EFAULT, or EINVAL for a NULL
//! stack), runs inside `catch_unwind` (a Rust panic becomes -1/EIO, never an unwind into C) and
//! reports failure as -1 (or NULL) with the C library's `errno` set. The semantics live in safe
//! modules: `engine` (locking, clocks, the driver thread), `ops` (the calls), `options`
//! (getsockopt/setsockopt), `fd` (the descriptor table), `device` (nf_inject/nf_take),
//! `zerocopy` (nf_send_zc, nf_sendfile_zc, nf_zc_completions), `shards` (nf_shards_*: one
//! host as N stacks steered by RSS, issue 14).
// `unsafe` is denied crate-wide and allowed only where the boundary needs it: the entry points
// (api.rs), the C struct accessors (cabi.rs) and errno (errno.rs), each block with a SAFETY
// comment.
#![deny(unsafe_code)]

mod api;
mod cabi;
mod device;
mod engine;
mod errno;
mod fd;
mod ops;
mod options;
mod shards;
mod zerocopy;

pub use api::*;
