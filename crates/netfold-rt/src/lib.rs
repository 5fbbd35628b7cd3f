//! netfold's runtime: a thread that drives a stack on real time.
//!
//! A blocking echo: two stacks joined by the in-memory link, each driven by its runtime's
//! thread; the application uses `std::io::Read + Write` (a `netfold_os::tap::Tap` or any other
//! [`netfold::phy::Device`] takes the pipe's place on a real link).
//!
//! ```
//! use netfold::iface::{Stack, StackConfig};
//! use netfold::phy::pipe::{Pipe, PipeConfig};
//! use netfold::wire::{ethernet::EthernetAddress, Ipv4Addr};
//! use netfold_rt::Runtime;
//! use std::io::{Read, Write};
//! use std::net::SocketAddrV4;
//! use std::time::Duration;
//!
//! let config = |last: u8| StackConfig {
//!     addr: Ipv4Addr::new(198, 18, 0, last),
//!     mac: EthernetAddress([2, 0, 0, 0, 0, last]),
//!     ..StackConfig::default()
//! };
//! let (a, b) = Pipe::new(PipeConfig::default());
//! let idle = Duration::from_millis(1);
//! let client = Runtime::start(Stack::new(config(1)), Box::new(a), idle)?;
//! let server = Runtime::start(Stack::new(config(2)), Box::new(b), idle)?;
//! let addr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7);
//! let listener = server.listen(addr, 8, Default::default())?;
//! let echo = std::thread::spawn(move || -> std::io::Result<u64> {
//!     let (mut s, _peer) = listener.accept()?;
//!     std::io::copy(&mut s.try_clone()?, &mut s) // until the client closes
//! });
//! let mut s = client.connect(addr, Default::default(), Some(Duration::from_secs(5)))?;
//! s.write_all(b"hello")?;
//! let mut back = [0u8; 5];
//! s.read_exact(&mut back)?;
//! assert_eq!(&back, b"hello");
//! drop(s);
//! assert_eq!(echo.join().unwrap()?, 5);
//! # Ok::<(), std::io::Error>(())
//! ```
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
