//! netfold: a user-space TCP/IP stack whose data path is built from the fixes the 2002 Linux
//! TCP/IP performance study pointed at — alignment-aware copies, the checksum folded into the
//! copy, receive work done in batches, buffers recycled instead of freed.
//!
//! Two stacks joined by the in-memory link, driven by hand: the caller owns the clock and the
//! loop (a thread, an event loop, or virtual time as here), and calls [`iface::Stack::poll`]
//! until [`iface::Stack::poll_at`] says nothing more is due.
//!
//! ```
//! use netfold::iface::{Stack, StackConfig};
//! use netfold::phy::pipe::{Pipe, PipeConfig};
//! use netfold::socket::{TcpListener, TcpStream};
//! use netfold::time::{Duration, Instant};
//! use netfold::wire::{ethernet::EthernetAddress, Ipv4Addr};
//! use std::net::SocketAddrV4;
//!
//! let config = |last: u8| StackConfig {
//!     addr: Ipv4Addr::new(198, 18, 0, last),
//!     mac: EthernetAddress([2, 0, 0, 0, 0, last]),
//!     ..StackConfig::default()
//! };
//! let (mut client, mut server) = (Stack::new(config(1)), Stack::new(config(2)));
//! let (mut a, mut b) = Pipe::new(PipeConfig::default());
//! let addr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7);
//! let mut now = Instant::ZERO;
//! let listener = TcpListener::bind(&mut server, addr, 8, Default::default())?;
//! let stream = TcpStream::connect(&mut client, now, addr, Default::default())?;
//! let (mut peer, mut sent, mut got) = (None, 0, Vec::new());
//! while got.len() < 5 {
//!     client.poll(now, &mut a);
//!     server.poll(now, &mut b);
//!     // Non-blocking calls: WouldBlock until the handshake is done.
//!     peer = peer.or_else(|| listener.accept(&mut server).ok().map(|(s, _)| s));
//!     sent += stream.write(&mut client, &b"hello"[sent..]).unwrap_or(0);
//!     if let Some(s) = peer {
//!         let mut buf = [0u8; 16];
//!         let n = s.read(&mut server, &mut buf).unwrap_or(0);
//!         got.extend_from_slice(&buf[..n]);
//!     }
//!     // Sleep until the next deadline (in virtual time: jump there).
//!     let due = [client.poll_at(now), server.poll_at(now)].into_iter().flatten().min();
//!     now = due.unwrap_or(now).max(now + Duration::from_micros(10));
//! }
//! assert_eq!(got, b"hello");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The protocol core is sans-IO: it never reads a clock for protocol time (only to seed a
//! random key and to time its copy kernels once) and never touches a socket. Time comes in as an
//! argument (`poll(now)`), so every test runs in virtual time and the same core can be driven by
//! a thread, an event loop, a C caller or a test that injects frames one at a time.
//!
//! Module map (from the bottom up; each imports only modules above it in this list, see
//! `docs/ARCHITECTURE.md`):
//! - [`time`]: the virtual-time `Instant` and `Duration` the core runs on.
//! - [`mem`]: copy, checksum and fused copy+checksum kernels, chosen by measurement on first
//!   use; the checksum arithmetic (`mem/combine.rs`).
//! - [`wire`]: zero-copy checked packet views and `Repr` parse/emit for each header; the only
//!   place the protocol code learns header byte offsets from (the few exceptions are listed in
//!   `docs/ARCHITECTURE.md`); [`wire::checksum`] is the one checksum module.
//! - [`rss`]: receive-side scaling: the Toeplitz hash of a 4-tuple, the indirection table that
//!   maps it to a shard, and the local-port choice that keeps a connection on its shard.
//! - [`shard`]: what every front end's shards share, sans IO: steering, the port a shard
//!   connects from, CPU placement and which shard the calling thread is.
//! - [`buf`]: recycled packet buffers, each carrying its checksum state ([`buf::Csum`]).
//! - [`phy`]: the `Device` trait, the in-memory pipe with impairments, and the multi-queue
//!   in-memory link steered by [`rss`] ([`phy::mq`]).
//! - [`offload`]: GRO merge rules and the one software TCP segmenter (GSO).
//! - [`tcp`]: the TCP connection engine (state machine, timers, SACK, congestion control).
//! - [`iface`]: the `Stack`, by protocol: Ethernet, ARP, IPv4 (+ reassembly), ICMP, UDP and
//!   the glue to TCP and to the offloads.
//! - [`socket`]: non-blocking socket handles on a `Stack`.
//!
//! This crate depends on no OS crate. Around it: `netfold-os` (TAP, TUN, packet socket,
//! virtio-net offloads, pcap files, waiting, namespaces), `netfold-rt` (the driver thread and
//! the blocking API), `netfold-tokio` (the async adapter), `netfold-apps` (the services of
//! `netfold serve`), `netfold-ffi` (the C API).
#![deny(unsafe_code)]

pub mod buf;
pub mod hash;
pub mod iface;
pub mod mem;
pub mod offload;
pub mod phy;
pub mod rss;
pub mod shard;
pub mod socket;
pub mod tcp;
pub mod time;
pub mod wire;
