//! netfold's operating-system side: the devices that move frames between a netfold stack and a
//! Linux kernel, and the helpers that set up the kernel's side for tests and benchmarks.
//!
//! - [`tap`]: a TAP interface, with virtio-net offloads (checksum, TSO, GRO) across it.
//! - [`tun`]: a TUN interface (bare IP packets), with the same offloads.
//! - [`link`]: either of them, named by a `tap:NAME` / `tun:NAME` string.
//! - [`mqtap`]: the queues of a multi-queue TAP as shard devices, sharing ARP and NDP.
//! - [`packet_socket`]: an AF_PACKET socket on an existing interface (e.g. a veth end), receiving
//!   through the TPACKET_V3 memory-mapped ring of [`packet_ring`].
//! - [`vnet`]: the virtio-net header both of them use to pass offloads.
//! - [`pcap`]: capture middleware (a device wrapping a device) and pcap files.
//! - [`cpu`]: the calling thread's CPU time (getrusage).
//! - [`clock`]: the drivers' fast monotonic clock (the TSC where the kernel trusts it).
//! - [`wait`]: sleeping in poll(2) until a descriptor is readable.
//! - [`emu`]: the link emulator, two TAPs joined by the in-memory link's impairment model.
//! - [`netns`]: throw-away network namespaces, addressed only from 198.18.0.0/15.
//! - [`mmap`]: files (and anonymous memory) mapped as zero-copy send buffers (`sendfile`).
//!
//! Every device implements the core's [`netfold::phy::Device`]; the core itself knows no OS.
// `unsafe` is denied crate-wide and allowed only in the modules that make system calls (tap,
// packet_socket, packet_ring, wait, cpu, mmap, clock, mqtap,
// and netns's setns), each block with a SAFETY comment.
#![deny(unsafe_code)]

pub mod clock;
pub mod cpu;
pub mod emu;
pub mod link;
pub mod mmap;
pub mod mqtap;
pub mod netns;
pub mod packet_ring;
pub mod packet_socket;
pub mod pcap;
pub mod steer_bpf;
pub mod tap;
pub mod tun;
pub mod vnet;
pub mod wait;
