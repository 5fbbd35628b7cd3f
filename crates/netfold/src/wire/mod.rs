//! Zero-copy checked packet views and `Repr` parse/emit for each header netfold speaks.
//!
//! Every header follows one pattern (after smoltcp's `wire`): `Packet<T: AsRef<[u8]>>` wraps a
//! byte buffer; `Packet::new_checked` validates lengths once, after which no accessor can panic;
//! `Repr::parse` turns a checked packet into a plain struct, `Repr::emit` writes one back, and
//! `Repr::buffer_len`/`header_len` says how many bytes that takes. Malformed input is a typed
//! [`Error`], never a panic.

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod ndp;
pub mod tcp;
pub mod udp;

pub use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The dynamic ("ephemeral") port range, RFC 6335 §6: 49152 through 65535. The one definition
/// for TCP's and UDP's port choice.
pub const EPHEMERAL_PORTS: core::ops::RangeInclusive<u16> = 49152..=u16::MAX;

/// The IP version of a packet: the first four bits of an IPv4 or IPv6 header (RFC 791 §3.1,
/// RFC 8200 §3). `None` for an empty buffer.
pub fn ip_version(packet: &[u8]) -> Option<u8> {
    packet.first().map(|b| b >> 4)
}

use core::fmt;

/// Why a packet could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field says).
    Truncated,
    /// A length field is inconsistent (e.g. IPv4 IHL < 5, TCP data offset < 5, option overrun).
    BadLength,
    /// A checksum did not verify.
    BadChecksum,
    /// A version or type field has a value this implementation does not handle.
    Unsupported,
    /// A field holds a value the standard forbids (e.g. broadcast source address).
    Malformed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "truncated packet",
            Error::BadLength => "inconsistent length field",
            Error::BadChecksum => "bad checksum",
            Error::Unsupported => "unsupported version or type",
            Error::Malformed => "malformed field",
        };
        f.write_str(s)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = core::result::Result<T, Error>;

/// IP protocol numbers netfold dispatches on (IANA "Assigned Internet Protocol Numbers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    Icmp,
    Tcp,
    Udp,
    /// ICMP for IPv6 (RFC 4443), next header 58.
    Icmpv6,
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            58 => IpProtocol::Icmpv6,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(p: IpProtocol) -> u8 {
        match p {
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Unknown(v) => v,
        }
    }
}
