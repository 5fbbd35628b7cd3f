//! netfold's runtime: a thread that drives a stack on real time.
//!
//! - [`driver`]: the one driver loop (poll the stack, compute the next deadline, sleep on the
//!   device's descriptor and a waker, or on a condition variable, stop), generic over what it
//!   drives. The blocking API below and the C API's REAL clock (`netfold-ffi`) both run on it.
//! - [`blocking`]: a [`Runtime`] that owns a stack and its device, with `std::io::Read + Write`
//!   streams and an `accept()`-ing listener.
//! - [`shards`]: N runtimes, one per device queue, pinned to cores, connections steered to
//!   shards by RSS; listeners on every shard, `connect` on the caller's shard, per-shard
//!   application threads.
#![deny(unsafe_code)]

pub mod backoff;
pub mod blocking;
pub mod driver;
pub mod shards;

pub use blocking::{Runtime, TcpListener, TcpStream, UdpSocket};
pub use driver::{Driven, Driver};
pub use shards::{ShardConfig, ShardedListener, Shards};
