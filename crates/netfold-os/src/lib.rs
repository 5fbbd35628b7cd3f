//! netfold's operating-system side: the devices that move frames between a netfold stack and a
//! Linux kernel, and the helpers that set up the kernel's side for tests and benchmarks.
//!
//! Opening the devices (each needs CAP_NET_ADMIN, i.e. root; the kernel's side is yours to
//! configure, e.g. `ip addr add 198.18.0.1/24 dev nf0 && ip link set nf0 up`) and running a
//! stack on one:
//!
//! ```no_run
//! use netfold::iface::{Stack, StackConfig};
//! use netfold::wire::Ipv4Addr;
//! use netfold_os::packet_socket::{PacketSocket, PacketSocketConfig};
//! use netfold_os::tap::{Tap, TapConfig};
//! use netfold_os::tun::Tun;
//! use netfold_rt::Runtime;
//! use std::net::SocketAddrV4;
//! use std::time::Duration;
//!
//! let tap = Tap::open("nf0", TapConfig::default())?; // Ethernet frames, with offloads
//! let tun = Tun::open("nf1", TapConfig::default())?; // bare IP (a stack with Medium::Ip)
//! let veth = PacketSocket::open("veth0", PacketSocketConfig::default())?; // existing link
//! # drop((tun, veth));
//! // Each is a netfold::phy::Device: poll a Stack on it yourself, or let a runtime drive it.
//! let addr = Ipv4Addr::new(198, 18, 0, 2);
//! let config = StackConfig { addr, ..StackConfig::default() };
//! let rt = Runtime::start(Stack::new(config), Box::new(tap), Duration::from_millis(1))?;
//! let listener = rt.listen(SocketAddrV4::new(addr, 7), 8, Default::default())?;
//! let (_stream, _peer) = listener.accept()?; // from the kernel's side: nc 198.18.0.2 7
//! # Ok::<(), std::io::Error>(())
//! ```
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
//! - [`xdp`]: an AF_XDP socket on one queue of an existing interface (UMEM, fill/RX/TX/
//!   completion rings), with the XDP program of [`xdp_prog`] that redirects netfold's frames to
//!   it and passes the rest to the kernel.
//! - [`xdpmq`]: one AF_XDP socket per queue of an interface, behind one program, as the devices
//!   of shards (sharing ARP and NDP frames between the queues).
//! - [`mmap`]: files (and anonymous memory) mapped as zero-copy send buffers (`sendfile`).
//!
//! Every device implements the core's [`netfold::phy::Device`]; the core itself knows no OS.
// `unsafe` is denied crate-wide and allowed only in the modules that make system calls (tap,
// packet_socket, packet_ring, wait, cpu, mmap, clock, mqtap, steer_bpf, xdp, xdp_prog,
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
pub mod xdp;
pub mod xdp_prog;
pub mod xdpmq;
