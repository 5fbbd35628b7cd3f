//! TCP header (RFC 9293 §3.1) with options: MSS (RFC 9293 §3.2), window scale and timestamps
//! (RFC 7323), SACK-permitted and SACK blocks (RFC 2018), NOP/EOL; unknown options are skipped.
//!
//! The `Repr` types below are the contract between the wire format and the TCP engine
//! (`crate::tcp`), which consumes and produces `TcpRepr` values without touching bytes.

use super::Ipv4Addr;

/// TCP control flags (RFC 9293 §3.1, RFC 3168 for ECE/CWR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;

    pub const fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    pub const fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    pub const fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    pub const fn psh(self) -> bool {
        self.0 & Self::PSH != 0
    }
    pub const fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
    pub const fn urg(self) -> bool {
        self.0 & Self::URG != 0
    }
    pub const fn ece(self) -> bool {
        self.0 & Self::ECE != 0
    }
    pub const fn cwr(self) -> bool {
        self.0 & Self::CWR != 0
    }
    pub const fn contains(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

/// One SACK block: the left (first) and right (one past last) sequence numbers, RFC 2018 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SackBlock {
    pub left: u32,
    pub right: u32,
}

/// RFC 7323 §3 timestamps option: TSval and TSecr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Timestamps {
    pub tsval: u32,
    pub tsecr: u32,
}

/// The options netfold understands. Unknown options are skipped on parse and never emitted.
/// At most 4 SACK blocks fit in 40 option bytes (3 alongside timestamps), RFC 2018 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2); only meaningful on SYN segments.
    pub mss: Option<u16>,
    /// Window scale shift count (kind 3); only meaningful on SYN segments. RFC 7323 §2.3: a value
    /// above 14 is treated as 14 by the receiver (the parser keeps the raw value).
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4); only meaningful on SYN segments.
    pub sack_permitted: bool,
    /// SACK blocks (kind 5): the first `sack_count` entries of `sack` are valid.
    pub sack: [SackBlock; 4],
    pub sack_count: u8,
    /// Timestamps (kind 8).
    pub timestamps: Option<Timestamps>,
}

impl TcpOptions {
    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[SackBlock] {
        &self.sack[..usize::from(self.sack_count.min(4))]
    }
}

/// A parsed TCP header, without payload. `seq`/`ack` are raw 32-bit sequence numbers; the
/// window is the raw 16-bit field (unscaled). Ports are host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    pub urgent: u16,
    pub options: TcpOptions,
}

/// The IPv4 endpoints a TCP/UDP checksum covers (RFC 9293 §3.1 pseudo-header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PseudoHeader {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}
