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

#[cfg(test)]
mod tests {
    //! What reaches the placeholder (deleted with it): TCP segments to an IPv6 peer are cut at
    //! the IPv6 path MTU and handed over piece by piece.
    use super::super::state::{DropReason, Emit};
    use super::super::{Stack, StackConfig};
    use crate::tcp::OutSegment;
    use crate::time::Instant;
    use crate::wire::ipv4::Ecn;
    use crate::wire::tcp::{TcpFlags, TcpRepr};
    use crate::wire::Ipv6Addr;

    #[test]
    fn ipv6_segments_are_cut_at_the_path_mtu_and_handed_to_send_ipv6() {
        let mut s = Stack::new(StackConfig::default());
        let data = vec![7u8; 3000];
        let seg = OutSegment {
            src: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into(),
            dst: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).into(),
            repr: TcpRepr {
                src_port: 1,
                dst_port: 2,
                flags: TcpFlags(TcpFlags::ACK),
                ..TcpRepr::default()
            },
            payload: (&data[..1000], &data[1000..]),
            gso_size: 1440,
            ecn: Ecn::NotEct,
        };
        let before = s.inner.st.pool.stats();
        let r = s.inner.st.emit_tcp(Instant::ZERO, &seg);
        // 1500 - 40 - 20 = 1440 per piece: three pieces, each refused by the placeholder.
        assert_eq!(r, Emit::Dropped(DropReason::NoRoute));
        assert_eq!(s.inner.st.c.gso_segments, 3);
        assert_eq!(s.inner.st.c.no_route, 3);
        let after = s.inner.st.pool.stats();
        assert_eq!(after.gets - before.gets, 3);
        assert_eq!(after.puts - before.puts, 3, "every buffer back in the pool");
        assert!(s.inner.st.tx.is_empty());
    }
}
