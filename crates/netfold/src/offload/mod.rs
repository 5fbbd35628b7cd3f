//! Segmentation offloads for TCP over IPv4, in software (after Linux `net/ipv4/tcp_offload.c`
//! and gVisor's GSO): one place that knows how a TCP byte stream may be cut into segments and
//! glued back together without changing what either end sees.
//!
//! - [`gro`]: receive. The merge rules: which segments of a receive batch become one larger
//!   segment before TCP sees them, and why a train ends.
//! - [`gso`]: transmit. The one segmenter: a super-segment (up to 64 KiB of payload) is cut into
//!   MTU-sized packets from header templates, each packet's checksums computed while its
//!   payload is copied. The stack's egress and the virtio-net device code both call it.
//!
//! Checksum state travels with the packet ([`Csum`], like Linux's `skb->ip_summed`), so a
//! checksum is verified once, wherever the packet is first touched in full, and never again.
#![warn(missing_docs)]

pub mod gro;
pub mod gso;

pub use crate::buf::Csum;
