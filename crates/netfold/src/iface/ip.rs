//! What the transport glue (`tcp.rs`, `udp.rs`) needs from the IP header, for either family:
//! [`IpMeta`], built by the IPv4 receive path from an [`Ipv4Repr`] and by the IPv6 one from
//! an [`Ipv6Repr`], and [`Payload`], where the transport payload lies.
//!
//! The IPv6 network layer hands transport payloads to the same entry points as IPv4:
//! `Inner::receive_tcp(now, &IpMeta::from_v6(&ip6), payload, multicast_dst, csum, gro)` and
//! `Inner::receive_udp(now, &IpMeta::from_v6(&ip6), bytes, multicast_dst, csum)`, after its
//! extension headers (RFC 8200 §4), with the upper-layer bytes only.

use crate::wire::ipv4::{Ecn, Ipv4Repr};
use crate::wire::ipv6::Ipv6Repr;
use crate::wire::IpAddr;

/// Where a transport payload lies: in a frame of the receive batch, straight after an
/// option-less IPv4 header or an IPv6 fixed header without extension headers (GRO may hold
/// on to it until the batch ends), or elsewhere (reassembled, or behind IPv4 options or IPv6
/// extension headers), only for the time of the call.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload<'b, 'p> {
    /// In the batch.
    Batch(&'b [u8]),
    /// Anywhere else.
    Transient(&'p [u8]),
}

impl<'b: 'p, 'p> Payload<'b, 'p> {
    /// The bytes, for as long as the call.
    pub fn bytes(&self) -> &'p [u8] {
        match *self {
            Payload::Batch(b) => b,
            Payload::Transient(b) => b,
        }
    }
}

/// The fields of a received packet's IP header that TCP and UDP use: the addresses (the
/// pseudo-header, RFC 9293 §3.1 / RFC 8200 §8.1; the socket lookup), the ECN codepoint
/// (RFC 3168) and what GRO compares (Linux `inet_gro_receive` / `ipv6_gro_receive`: TTL or
/// hop limit, TOS or traffic class, DF, flow label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IpMeta {
    /// Source address.
    pub src: IpAddr,
    /// Destination address (same family as `src`).
    pub dst: IpAddr,
    /// IPv4 TTL or IPv6 hop limit.
    pub hop_limit: u8,
    /// IPv4 DSCP/ECN octet or IPv6 traffic class.
    pub tos: u8,
    /// IPv4 DF (always false for IPv6, which has no such bit).
    pub df: bool,
    /// IPv6 flow label (0 for IPv4).
    pub flow_label: u32,
}

impl IpMeta {
    /// From a parsed IPv4 header.
    #[inline]
    pub fn from_v4(ip: &Ipv4Repr) -> IpMeta {
        IpMeta {
            src: IpAddr::V4(ip.src),
            dst: IpAddr::V4(ip.dst),
            hop_limit: ip.ttl,
            tos: ip.dscp_ecn,
            df: ip.dont_frag,
            flow_label: 0,
        }
    }

    /// From a parsed IPv6 fixed header.
    #[inline]
    pub fn from_v6(ip: &Ipv6Repr) -> IpMeta {
        IpMeta {
            src: IpAddr::V6(ip.src),
            dst: IpAddr::V6(ip.dst),
            hop_limit: ip.hop_limit,
            tos: ip.traffic_class,
            df: false,
            flow_label: ip.flow_label,
        }
    }

    /// The ECN codepoint (RFC 3168 §5; the same two bits in both families).
    #[inline]
    pub fn ecn(&self) -> Ecn {
        Ecn::from_tos(self.tos)
    }
}
