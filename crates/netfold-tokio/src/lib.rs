//! netfold on tokio: a driver task that runs a [`netfold::iface::Stack`] on a device, and
//! sockets for async code — [`TcpStream`] (`AsyncRead + AsyncWrite`, [`TcpStream::split`] and
//! [`TcpStream::into_split`] halves), [`TcpListener`] and [`UdpSocket`] — that work with
//! everything in `tokio::io`, `copy_bidirectional` included.
//!
//! An echo over two stacks joined by the in-memory link ([`pipe`]; on a real link,
//! `Link::new(tap)` with a `netfold_os::tap::Tap`, TUN or packet socket):
//!
//! ```
//! use netfold::iface::{Stack, StackConfig};
//! use netfold::phy::pipe::PipeConfig;
//! use netfold::wire::{ethernet::EthernetAddress, Ipv4Addr};
//! use netfold_tokio::{pipe, Net, TcpListener, TcpStream};
//! use std::net::SocketAddrV4;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> std::io::Result<()> {
//!     let config = |last: u8| StackConfig {
//!         addr: Ipv4Addr::new(198, 18, 0, last),
//!         mac: EthernetAddress([2, 0, 0, 0, 0, last]),
//!         ..StackConfig::default()
//!     };
//!     let (a, b) = pipe(PipeConfig::default());
//!     let client = Net::spawn(Stack::new(config(1)), a)?;
//!     let server = Net::spawn(Stack::new(config(2)), b)?;
//!     let addr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7);
//!     let listener = TcpListener::bind(&server, addr).await?;
//!     tokio::spawn(async move {
//!         while let Ok((mut s, _peer)) = listener.accept().await {
//!             tokio::spawn(async move {
//!                 let (mut r, mut w) = s.split();
//!                 tokio::io::copy(&mut r, &mut w).await
//!             });
//!         }
//!     });
//!     let mut s = TcpStream::connect(&client, addr).await?;
//!     s.write_all(b"hello").await?;
//!     let mut back = [0u8; 5];
//!     s.read_exact(&mut back).await?;
//!     assert_eq!(&back, b"hello");
//!     Ok(())
//! }
//! ```
//!
//! # Design: a tokio task, not a thread
//!
//! The driver is a task on the application's runtime ([`Net::spawn`]) rather than a dedicated
//! thread bridged to tokio (as `netfold-rt` does for blocking code), because:
//! - a poll of the stack never blocks (the device calls are non-blocking), so it may run on a
//!   runtime worker; a thread would add a cross-thread hand-off (and a context switch) to every
//!   wake-up in both directions;
//! - tokio already has every wait the driver needs: `AsyncFd` on the device's descriptor, a
//!   timer for the stack's deadline, `Notify` for kicks; the task needs no second event loop;
//! - it works on a current-thread runtime, and in tests two stacks and their applications run
//!   in one runtime.
//!
//! # Never a polling loop
//!
//! Each round the driver polls the stack once and wakes the sockets it made ready. After a
//! poll that did work it yields and goes again; for 50 us after its last useful poll it keeps
//! polling between yields (Linux's recommended busy-poll budget: work that comes back within
//! microseconds, as in a bulk transfer, costs no sleep); otherwise it sleeps until the first of:
//! - the stack's or the device's deadline (`poll_at`: retransmission, delayed ACK, a delayed
//!   frame on an impaired link);
//! - the device's descriptor becoming readable ([`netfold::phy::Device::readable_fd`], waited
//!   on with tokio's `AsyncFd`: TAP, TUN, packet socket);
//! - the link's signal: the ends of the in-memory link from [`pipe`] signal each other's driver
//!   on every send;
//! - a kick from an application call that gave the stack work (data written, window opened by a
//!   read, a connect, a close).
//!
//! A device that can announce nothing (no descriptor, no signal) must be given
//! [`Link::idle_wait`], the longest it may go unread; [`Net::spawn`] refuses it otherwise.
//!
//! # Wakers: woken by the stack's readiness
//!
//! A socket call that cannot complete registers its task's waker for that socket and direction
//! (read / accept / `recv_from`; write / connect / `send_to`) under the stack's lock. After every
//! poll the driver asks each socket that has waiters for its
//! [`netfold::socket::Readiness`] (bytes to read or end of stream, send space, a connection to
//! accept, an error) and wakes the waiters whose direction is ready. Registering and checking
//! under the same lock means no wake-up is lost; a socket nobody waits on costs nothing.
//!
//! Dropping the [`Net`] stops the driver: waiting calls fail with `NotConnected`.
//!
//! # Shards
//!
//! [`Shards`] runs one [`Net`] per device queue, each on a current-thread runtime
//! in its own pinned thread, with RSS-steered connects and a listener on every shard; see
//! [`shards`].
//!
//! Examples: `examples/echo.rs` (an echo server, in memory or on `tap:NAME`/`tun:NAME`) and
//! `examples/pipe_bench.rs` (one bulk transfer through this adapter and through the blocking
//! API, same link and message size).
#![deny(unsafe_code)]

mod driver;
pub mod shards;
mod tcp;
mod udp;
mod wakers;

/// The Rust code blocks of the repository's README.md, compiled (and, unless `no_run`, run)
/// as doc tests so that they stay correct.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}

pub use driver::{pipe, Link, Net};
pub use shards::{ShardedListener, Shards};
pub use tcp::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, TcpListener, TcpStream, WriteHalf};
pub use udp::UdpSocket;
