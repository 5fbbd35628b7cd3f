//! The link layer: Ethernet II demultiplexing on receive, the Ethernet header (and ARP or NDP
//! parking of frames whose next hop is unresolved) on send. On an IP medium (TUN-like devices)
//! frames are bare IP packets and this layer passes them through; with IPv6 on, the first
//! nibble tells IPv4 from IPv6 (RFC 791 §3.1, RFC 8200 §3: the version field), as the kernel's
//! TUN does for a device without packet information (`IFF_NO_PI`).

use super::ipv6::DELAY_FIRST_PROBE_TIME;
use super::ndp::Solicit;
use super::neighbor::Park;
use super::state::{IfaceState, TxError};
use super::Inner;
use crate::buf::{Csum, PacketBuf};
use crate::offload::gro::Gro;
use crate::phy::Medium;
use crate::time::Instant;
use crate::wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use crate::wire::{ip_version, IpAddr, Ipv4Addr, Ipv6Addr};

impl Inner {
    /// Receives one frame of the batch (a pool buffer's bytes, or a frame a device lent),
    /// whose checksum state is `csum`. `gro` holds segments borrowed from the batch.
    pub(super) fn receive_frame<'b>(
        &mut self,
        now: Instant,
        frame: &'b [u8],
        csum: Csum,
        gro: &mut Gro<'b>,
    ) {
        self.st.c.frames_in += 1;
        self.st.c.bytes_in += frame.len() as u64;
        // The checksum state the frame carries (`Verified` or `Partial` when the device said
        // so for this frame); a frame the device said nothing about is verified by us, once,
        // unless the device's caps say it verifies everything.
        let csum = match csum {
            Csum::Unverified if !self.st.csum_rx => Csum::Verified,
            c => c,
        };
        if self.st.medium == Medium::Ip {
            // With IPv6 off, everything goes to IPv4 as before (an IPv6 packet is counted
            // there as malformed).
            if self.st.v6.enabled && ip_version(frame) == Some(6) {
                self.receive_ipv6(now, frame, false, csum, gro);
            } else {
                self.receive_ipv4(now, frame, false, csum, gro);
            }
            return;
        }
        let Ok(f) = EthernetFrame::new_checked(frame) else {
            self.st.c.eth_malformed += 1;
            return;
        };
        let Ok(eth) = EthernetRepr::parse(&f) else {
            self.st.c.eth_malformed += 1;
            return;
        };
        // No VLAN is configured on this interface, so 802.1Q frames are not ours — except
        // priority-tagged ones (VLAN id 0: IEEE 802.1Q §9.6 "the frame does not belong to any
        // VLAN", only the priority is carried), which are received as untagged.
        if eth.vlan_id().is_some_and(|id| id != 0) {
            self.st.c.unsupported += 1;
            return;
        }
        let link_bcast = eth.dst.is_broadcast();
        // Also IPv6 multicast frames (33:33:...) for a group we listen to (RFC 2464 §7); only
        // looked at for frames not to our MAC, and not at all with IPv6 off.
        if eth.dst != self.st.mac
            && !link_bcast
            && !(self.st.v6.enabled && self.st.v6.accepts_mac(eth.dst))
        {
            self.st.c.eth_not_for_us += 1;
            return;
        }
        // The link payload runs to the end of the frame (IPv4 trims padding by its length).
        // (Sliced from `frame` itself so the payload borrows the batch, not the view.)
        let payload = &frame[frame.len() - f.payload().len()..];
        match eth.ethertype {
            EtherType::Arp => self.receive_arp(now, payload),
            EtherType::Ipv4 => self.receive_ipv4(now, payload, link_bcast, csum, gro),
            EtherType::Ipv6 if self.st.v6.enabled => {
                let link_mcast = eth.dst.is_multicast();
                self.receive_ipv6(now, payload, link_mcast, csum, gro)
            }
            _ => self.st.c.unsupported += 1,
        }
    }
}

impl IfaceState {
    /// Puts the link header in front of an IP packet for `dst` and queues it, or parks it
    /// until its next hop resolves (sending an ARP request or a Neighbor Solicitation when one
    /// is due). IPv4: a broadcast destination goes to the broadcast MAC, a unicast one to its
    /// next hop. IPv6: a multicast destination goes to its RFC 2464 §7 MAC; a unicast one to
    /// its next hop (RFC 4861 §5.2), whose cache entry, if STALE, moves to DELAY by being used
    /// (§7.3.3).
    #[inline]
    pub(super) fn send_link(
        &mut self,
        now: Instant,
        dst: IpAddr,
        mut buf: PacketBuf,
    ) -> Result<(), TxError> {
        if self.medium == Medium::Ip {
            self.push(buf);
            return Ok(());
        }
        let hop_mac = match dst {
            IpAddr::V4(d) => self.link_hop_v4(now, d),
            IpAddr::V6(d) => self.link_hop_v6(now, d),
        };
        let Some((hop, mac)) = hop_mac else {
            self.c.no_route += 1;
            self.pool.put(buf);
            return Err(TxError::NoRoute);
        };
        let eth = EthernetRepr {
            src: self.mac,
            dst: mac.unwrap_or_default(),
            ethertype: ethertype_of(dst),
            vlan: None,
        };
        // Cannot fail: the slice is exactly header_len long.
        let _ = eth.emit(buf.prepend(eth.header_len()));
        if mac.is_some() {
            self.push(buf);
            return Ok(());
        }
        let parked = match hop {
            IpAddr::V4(h) => self.neigh.park(now, h, buf),
            IpAddr::V6(h) => self.v6.neigh.park(now, h, buf),
        };
        match parked {
            (Park::SendRequest, _) => {
                match hop {
                    IpAddr::V4(h) => self.send_arp_request(h),
                    IpAddr::V6(h) => self.send_ns(now, h, Solicit::Resolve),
                }
                Ok(())
            }
            (Park::Waiting, _) => Ok(()),
            (Park::Full, back) => {
                match hop {
                    IpAddr::V4(_) => self.c.arp_pending_overflow += 1,
                    IpAddr::V6(_) => self.c.ndp_pending_overflow += 1,
                }
                if let Some(b) = back {
                    self.pool.put(b);
                }
                Err(TxError::PendingFull)
            }
        }
    }

    /// The IPv4 next hop of `dst` and its MAC if known (the broadcast MAC for a broadcast
    /// destination); `None` without a route.
    #[inline]
    fn link_hop_v4(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
    ) -> Option<(IpAddr, Option<EthernetAddress>)> {
        if self.is_broadcast(dst) {
            return Some((dst.into(), Some(EthernetAddress::BROADCAST)));
        }
        let hop = self.next_hop(dst)?;
        Some((hop.into(), self.neigh.lookup_hot(now, hop)))
    }

    /// The IPv6 next hop of `dst` and its link-layer address if usable (RFC 4861 §7.3.3: a
    /// STALE entry is used and moves to DELAY); a multicast destination is its own hop with
    /// its RFC 2464 §7 MAC. `None` without a route.
    #[inline(never)]
    fn link_hop_v6(
        &mut self,
        now: Instant,
        dst: Ipv6Addr,
    ) -> Option<(IpAddr, Option<EthernetAddress>)> {
        if dst.is_multicast() {
            return Some((dst.into(), Some(EthernetAddress::from_ipv6_multicast(dst))));
        }
        let hop = self.v6.next_hop(dst)?;
        Some((hop.into(), self.resolved_mac_v6(now, hop)))
    }

    /// The link-layer address of the IPv6 neighbour `hop` if one is usable: REACHABLE, or
    /// STALE/DELAY/PROBE (RFC 4861 §7.3.3: packets keep going to the cached address; the first
    /// use of a STALE entry moves it to DELAY, which starts Neighbor Unreachability Detection).
    #[inline]
    fn resolved_mac_v6(&mut self, now: Instant, hop: Ipv6Addr) -> Option<EthernetAddress> {
        let n = &mut self.v6.neigh;
        n.lookup_hot(now, hop)
            .or_else(|| n.use_stale(now, hop, DELAY_FIRST_PROBE_TIME))
    }

    /// The link header for a unicast packet to `dst` whose next hop is resolved: writes it into
    /// `out` and returns its length (0 on an IP medium). `None` when the packet must take the
    /// general path (`send_link`: IPv4 broadcast, IPv6 multicast, ARP or NDP parking, no
    /// route). For the TCP template and one-packet paths (`iface/tcp.rs`).
    ///
    /// Over IPv6, like `send_link`, it uses an entry that is not REACHABLE (RFC 4861 §7.3.3),
    /// so a bulk transfer keeps its templates and its super-segments while NUD confirms the
    /// neighbour.
    #[inline(always)]
    pub(super) fn resolved_link_header(
        &mut self,
        now: Instant,
        dst: IpAddr,
        out: &mut [u8],
    ) -> Option<usize> {
        match self.medium {
            Medium::Ip => Some(0),
            Medium::Ethernet => {
                let mac = match dst {
                    IpAddr::V4(d) => {
                        if self.is_broadcast(d) {
                            return None;
                        }
                        let hop = self.next_hop(d)?;
                        self.neigh.lookup_hot(now, hop)?
                    }
                    IpAddr::V6(d) => self.resolved_unicast_mac_v6(now, d)?,
                };
                let eth = EthernetRepr {
                    src: self.mac,
                    dst: mac,
                    ethertype: ethertype_of(dst),
                    vlan: None,
                };
                let len = eth.header_len();
                eth.emit(out.get_mut(..len)?).ok()?;
                Some(len)
            }
        }
    }

    /// `resolved_link_header`'s IPv6 next-hop lookup, out of line so that the IPv4 path
    /// stays as short as it was: `None` for a multicast destination or an unresolved hop.
    #[inline(never)]
    fn resolved_unicast_mac_v6(&mut self, now: Instant, dst: Ipv6Addr) -> Option<EthernetAddress> {
        if dst.is_multicast() {
            return None;
        }
        let hop = self.v6.next_hop(dst)?;
        self.resolved_mac_v6(now, hop)
    }
}

/// The EtherType of an IP packet to `dst` (RFC 894, RFC 2464 §3).
#[inline(always)]
fn ethertype_of(dst: IpAddr) -> EtherType {
    match dst {
        IpAddr::V4(_) => EtherType::Ipv4,
        IpAddr::V6(_) => EtherType::Ipv6,
    }
}
