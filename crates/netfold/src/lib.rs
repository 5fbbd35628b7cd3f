//! netfold: a user-space TCP/IP stack whose data path is built from the fixes the 2002 Linux
//! TCP/IP performance study pointed at — alignment-aware copies, the checksum folded into the
//! copy, receive work done in batches, buffers recycled instead of freed.
//!
//! The protocol core is sans-IO: it never reads a clock or touches a socket. Time comes in as an
//! argument (`poll(now)`), so every test runs in virtual time and the same core can be driven by
//! a thread, an event loop, a C caller or a test that injects frames one at a time.
//!
//! Module map:
//! - [`wire`]: zero-copy checked packet views and `Repr` parse/emit for each header.
//! - [`mem`]: copy, checksum and fused copy+checksum kernels with run-time SIMD dispatch.
//! - [`buf`]: recycled packet buffers.
//! - [`phy`]: the `Device` trait and the in-memory pipe with impairments.
//! - [`tcp`]: the TCP connection engine (state machine, timers, SACK, congestion control).
//! - [`offload`]: GRO merge rules and the one software TCP segmenter (GSO).
//! - [`iface`]: the `Stack`: neighbours, IPv4, ICMP, UDP, dispatch to TCP.
//! - [`socket`]: non-blocking socket handles on a `Stack`.
//! - [`time`]: the virtual-time `Instant` and `Duration` the core runs on.
//!
//! This crate depends on no OS crate. Around it: `netfold-os` (TAP, packet socket, pcap files,
//! waiting, namespaces), `netfold-rt` (the driver thread and the blocking API), `netfold-apps`
//! (the services of `netfold serve`).
#![deny(unsafe_code)]

pub mod buf;
pub mod iface;
pub mod mem;
pub mod offload;
pub mod phy;
pub mod socket;
pub mod tcp;
pub mod time;
pub mod wire;
