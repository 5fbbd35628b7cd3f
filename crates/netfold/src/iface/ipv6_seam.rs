//! PLACEHOLDER for the IPv6 network layer's send half, which another branch implements in
//! `iface/ipv6.rs` with exactly these signatures; this file is deleted when the two branches
//! are merged. Until then IPv6 has no way out: every packet is dropped, counted in
//! `no_route`, and its buffer goes back to the pool.

use super::state::{IfaceState, TxError};
use crate::buf::PacketBuf;
use crate::time::Instant;
use crate::wire::ipv4::Ecn;
use crate::wire::{IpProtocol, Ipv6Addr};

impl IfaceState {
    /// `buf` holds an upper-layer packet (a TCP segment with its checksum, a UDP datagram);
    /// prepends the IPv6 header with `next_header`, `src`, `dst` and the ECN codepoint `ecn`
    /// in the traffic class, and hands it to the link (neighbour discovery, fragmentation of
    /// datagrams larger than the path MTU: the IPv6 layer's business).
    pub(super) fn send_ipv6(
        &mut self,
        now: Instant,
        next_header: IpProtocol,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        buf: PacketBuf,
        ecn: Ecn,
    ) -> Result<(), TxError> {
        let _ = (now, next_header, src, dst, ecn);
        self.c.no_route += 1;
        self.pool.put(buf);
        Err(TxError::NoRoute)
    }

    /// The path MTU towards `dst` as of `now` (RFC 8201): the link MTU lowered by what
    /// ICMPv6 Packet Too Big reported, never below 1280 (RFC 8200 §5).
    pub(super) fn ipv6_path_mtu(&self, now: Instant, dst: Ipv6Addr) -> usize {
        let _ = (now, dst);
        self.mtu
    }
}
