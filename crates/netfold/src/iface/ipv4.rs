//! IPv4 (RFC 791): the receive half (header checks of RFC 1122 §3.2.1, reassembly, the
//! transport demultiplexer) and the send half (the IPv4 header in front of a transport payload,
//! then the link).

use super::ip::IpMeta;
pub(super) use super::ip::Payload;
use super::reassembly::FragOutcome;
use super::state::{IfaceState, TxError};
use super::udp::PmtuDisc;
use super::Inner;
use crate::buf::{Csum, PacketBuf};
use crate::offload::gro::Gro;
use crate::offload::gso::MAX_IP_PACKET;
use crate::time::Instant;
use crate::wire::icmpv4::unreach_code;
use crate::wire::ipv4::{Ecn, Ipv4Packet, Ipv4Repr, FRAGMENT_UNIT, HEADER_LEN as IP_LEN};
use crate::wire::{Error, IpProtocol, Ipv4Addr};

impl Inner {
    pub(super) fn receive_ipv4<'b>(
        &mut self,
        now: Instant,
        p: &'b [u8],
        link_bcast: bool,
        csum: Csum,
        gro: &mut Gro<'b>,
    ) {
        let c = &mut self.st.c;
        c.ipv4_in += 1;
        // An IPv6-only stack (`StackConfig::addr` 0.0.0.0) takes no IPv4 packet.
        if self.st.addr.is_unspecified() {
            c.ipv4_not_for_us += 1;
            return;
        }
        let Ok(pkt) = Ipv4Packet::new_checked(p) else {
            c.ipv4_malformed += 1;
            return;
        };
        let ip = match Ipv4Repr::parse(&pkt, csum.needs_verify()) {
            Ok(ip) => ip,
            Err(Error::BadChecksum) => {
                c.ipv4_bad_checksum += 1;
                return;
            }
            Err(_) => {
                c.ipv4_malformed += 1;
                return;
            }
        };
        let st = &self.st;
        let src_bcast = st.is_broadcast(ip.src);
        let bcast = st.is_broadcast(ip.dst);
        let our_addr = st.addr;
        let c = &mut self.st.c;
        // RFC 1122 §3.2.1.3: discard datagrams whose source is broadcast or multicast, or in
        // 127/8 ("MUST NOT appear outside a host"); one with our own source address is a
        // reflection or a spoof.
        if src_bcast || ip.src.is_multicast() || ip.src.is_loopback() || ip.src == our_addr {
            c.ipv4_bad_src += 1;
            return;
        }
        // RFC 1122 §3.3.6: a datagram received via link broadcast with a unicast IP destination
        // SHOULD be silently discarded. We are a host (no forwarding): anything not addressed
        // to us is dropped — unless transparent mode (`StackConfig::transparent`, Linux's
        // IP_TRANSPARENT/TPROXY analogue) takes TCP and UDP to any unicast destination, for
        // the transparent listener and UDP socket (ICMP and other protocols to a foreign
        // address are still dropped: we would answer from the wrong address).
        let foreign = !bcast && ip.dst != our_addr;
        let transparent_ok = self.config.transparent
            && !ip.dst.is_multicast()
            && !ip.dst.is_unspecified()
            && matches!(ip.protocol, IpProtocol::Tcp | IpProtocol::Udp);
        if (link_bcast && !bcast) || (foreign && !transparent_ok) {
            c.ipv4_not_for_us += 1;
            return;
        }
        if foreign {
            c.ipv4_transparent_in += 1;
        }
        // RFC 1122 §3.2.1.7: a host MUST NOT discard a datagram because its TTL is below 2, so
        // there is no TTL check on receive (TTL matters only to forwarders).
        if ip.is_fragment() {
            c.frag_in += 1;
            if !self.config.frag_reassembly {
                c.frag_dropped += 1;
                return;
            }
            let out = self.reasm.push(now, &ip, ip_payload(p, &pkt));
            let drop = match out {
                FragOutcome::Dropped(why) => Some(why),
                _ => None,
            };
            self.st
                .c
                .frag_result(false, drop, self.reasm.take_evictions());
            match out {
                FragOutcome::Complete(h, data) => {
                    self.st.c.frag_reassembled += 1;
                    // The transport checksum covers the whole datagram: not verified yet.
                    let csum = if self.st.csum_rx {
                        Csum::Unverified
                    } else {
                        Csum::Verified
                    };
                    self.receive_transport(now, &h, Payload::Transient(&data), bcast, csum, gro);
                    self.reasm.recycle(data);
                }
                FragOutcome::Dropped(_) | FragOutcome::Queued | FragOutcome::Duplicate => {}
            }
            return;
        }
        let payload = ip_payload(p, &pkt);
        // GRO merges only option-less IPv4 (Linux `inet_gro_receive`: ihl must be 5).
        let payload = if pkt.header_len() == IP_LEN {
            Payload::Batch(payload)
        } else {
            Payload::Transient(payload)
        };
        self.receive_transport(now, &ip, payload, bcast, csum, gro);
    }

    /// The transport demultiplexer (RFC 1122 §3.2.2.1 for protocols we do not speak).
    fn receive_transport<'b>(
        &mut self,
        now: Instant,
        ip: &Ipv4Repr,
        payload: Payload<'b, '_>,
        bcast: bool,
        csum: Csum,
        gro: &mut Gro<'b>,
    ) {
        match ip.protocol {
            IpProtocol::Icmp => self.receive_icmp(now, ip, payload.bytes(), bcast, csum),
            IpProtocol::Udp => {
                let meta = IpMeta::from_v4(ip);
                if self.receive_udp(now, &meta, payload.bytes(), bcast, csum) {
                    // RFC 1122 §4.1.3.1: port unreachable for a closed port.
                    let p = payload.bytes();
                    self.send_icmp_unreachable(now, unreach_code::PORT, ip, p);
                }
            }
            IpProtocol::Tcp => {
                self.receive_tcp(now, &IpMeta::from_v4(ip), payload, bcast, csum, gro)
            }
            IpProtocol::Icmpv6 | IpProtocol::Unknown(_) => {
                self.st.c.ipv4_unknown_protocol += 1;
                // RFC 1122 §3.2.2.1: protocol unreachable for a protocol we do not speak.
                if !bcast {
                    let p = payload.bytes();
                    self.send_icmp_unreachable(now, unreach_code::PROTOCOL, ip, p);
                }
            }
        }
    }
}

/// The payload of `pkt` (a view of `p`), bounded by the total length so that link padding is
/// left out, borrowed from `p` itself (the batch) rather than from the view.
fn ip_payload<'b>(p: &'b [u8], pkt: &Ipv4Packet<&[u8]>) -> &'b [u8] {
    p.get(pkt.header_len()..usize::from(pkt.total_len()))
        .unwrap_or(&[])
}

impl IfaceState {
    /// `buf` holds an IP payload; prepends the IPv4 header and hands it to the link. A UDP or
    /// ICMP datagram larger than the path MTU is sent in fragments; TCP never is (DF).
    pub(super) fn send_ip(
        &mut self,
        now: Instant,
        protocol: IpProtocol,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        buf: PacketBuf,
    ) -> Result<(), TxError> {
        self.send_ip_pmtu(now, protocol, src, dst, buf, PmtuDisc::Dont)
    }

    /// `send_ip` with the ECN field `ecn` in the IPv4 header (a TCP segment of an ECN
    /// connection, RFC 3168 §6.1.1) and the DSCP bits of `dscp` (the connection's IP_TOS;
    /// its ECN bits are ignored).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_ip_ecn(
        &mut self,
        now: Instant,
        protocol: IpProtocol,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        buf: PacketBuf,
        ecn: Ecn,
        dscp: u8,
    ) -> Result<(), TxError> {
        self.send_ip_inner(now, protocol, src, dst, buf, PmtuDisc::Dont, ecn, dscp)
    }

    /// `send_ip` for a UDP or ICMP datagram under a socket's IP_MTU_DISCOVER `mode` (see
    /// [`PmtuDisc`]): whether DF is set, and which MTU decides fragmentation. A datagram the
    /// mode forbids to fragment is refused as `TooBig` (the socket refused it earlier).
    pub(super) fn send_ip_pmtu(
        &mut self,
        now: Instant,
        protocol: IpProtocol,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        buf: PacketBuf,
        mode: PmtuDisc,
    ) -> Result<(), TxError> {
        self.send_ip_inner(now, protocol, src, dst, buf, mode, Ecn::NotEct, 0)
    }

    #[allow(clippy::too_many_arguments)]
    fn send_ip_inner(
        &mut self,
        now: Instant,
        protocol: IpProtocol,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        mut buf: PacketBuf,
        mode: PmtuDisc,
        ecn: Ecn,
        dscp: u8,
    ) -> Result<(), TxError> {
        if self.tx_full() {
            self.c.tx_queue_full += 1;
            self.pool.put(buf);
            return Err(TxError::QueueFull);
        }
        let tcp = protocol == IpProtocol::Tcp;
        let len = IP_LEN + buf.len();
        if len > MAX_IP_PACKET || (tcp && len > self.mtu && !self.tso) {
            self.c.tx_too_big += 1;
            self.pool.put(buf);
            return Err(TxError::TooBig);
        }
        if !tcp {
            let mtu = self.datagram_mtu(now, dst, mode);
            if len > mtu {
                if mode.refuses_fragments() {
                    self.c.tx_too_big += 1;
                    self.pool.put(buf);
                    return Err(TxError::TooBig);
                }
                return self.send_fragments(now, protocol, src, dst, buf, mtu);
            }
        }
        self.ident = self.ident.wrapping_add(1);
        let mut ip = Ipv4Repr {
            src,
            dst,
            protocol,
            payload_len: buf.len(),
            // RFC 1122 §3.2.1.7: a host must not send TTL 0.
            ttl: self.ttl.max(1),
            dscp_ecn: dscp & !0b11,
            ident: self.ident,
            // DF belongs to TCP, whose path MTU discovery (RFC 1191) needs it, and to
            // datagrams whose socket asked for path MTU discovery (IP_MTU_DISCOVER, Linux's
            // default IP_PMTUDISC_WANT sets DF on what fits the path); ICMP goes without.
            dont_frag: tcp || mode.sets_df(),
            more_frags: false,
            frag_offset: 0,
        };
        ip.set_ecn(ecn);
        if ip.emit(buf.prepend(IP_LEN), self.csum_tx).is_err() {
            self.c.tx_too_big += 1;
            self.pool.put(buf);
            return Err(TxError::TooBig);
        }
        self.c.ipv4_out += 1;
        self.send_link(now, dst.into(), buf)
    }

    /// The MTU a datagram to `dst` is measured against under `mode`: the path MTU, or the
    /// interface MTU for the modes that ignore what ICMP reported (Linux's PROBE, INTERFACE,
    /// OMIT).
    pub(super) fn datagram_mtu(&self, now: Instant, dst: Ipv4Addr, mode: PmtuDisc) -> usize {
        match mode {
            PmtuDisc::Probe | PmtuDisc::Interface | PmtuDisc::Omit => self.mtu,
            PmtuDisc::Dont | PmtuDisc::Want | PmtuDisc::Do => self.pmtu.get(now, dst, self.mtu),
        }
    }

    /// Frames a UDP or ICMP datagram of `len` bytes (IP payload) to `dst` takes: 1, or its
    /// fragment count when it exceeds the MTU that applies under `mode` (see
    /// `send_fragments`).
    pub(super) fn frames_for(
        &self,
        now: Instant,
        dst: Ipv4Addr,
        len: usize,
        mode: PmtuDisc,
    ) -> usize {
        let mtu = self.datagram_mtu(now, dst, mode);
        if IP_LEN + len <= mtu {
            return 1;
        }
        len.div_ceil(fragment_payload(mtu).max(FRAGMENT_UNIT))
    }

    /// RFC 791 §3.2 "Fragmentation": the payload of `buf` is cut into pieces of a multiple of
    /// 8 bytes (the last one shorter) that fit `mtu` with their header, each sent as a
    /// fragment with the datagram's identification, its offset in 8-byte units and MF on all
    /// but the last. All of them are queued, or none (`QueueFull`).
    fn send_fragments(
        &mut self,
        now: Instant,
        protocol: IpProtocol,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        buf: PacketBuf,
        mtu: usize,
    ) -> Result<(), TxError> {
        let per = fragment_payload(mtu);
        let pieces = buf.len().div_ceil(per.max(FRAGMENT_UNIT));
        if per == 0 || self.tx.len() + pieces > self.tx_limit {
            self.c.tx_queue_full += 1;
            self.pool.put(buf);
            return Err(TxError::QueueFull);
        }
        self.ident = self.ident.wrapping_add(1);
        let mut result = Ok(());
        let total = buf.len();
        for (i, chunk) in buf.as_slice().chunks(per).enumerate() {
            let off = i * per;
            let ip = Ipv4Repr {
                src,
                dst,
                protocol,
                payload_len: chunk.len(),
                ttl: self.ttl.max(1),
                dscp_ecn: 0,
                ident: self.ident,
                dont_frag: false,
                more_frags: off + chunk.len() < total,
                frag_offset: off as u16,
            };
            let mut f = self.pool.get();
            let area = f.append(IP_LEN + chunk.len());
            let (h, data) = area.split_at_mut(IP_LEN);
            // Cannot fail: the offset is a multiple of 8 and the datagram fits 64 KiB.
            let _ = ip.emit(h, self.csum_tx);
            self.copy.copy(data, chunk);
            self.c.frag_out += 1;
            self.c.ipv4_out += 1;
            let r = self.send_link(now, dst.into(), f);
            if result.is_ok() {
                result = r;
            }
        }
        self.pool.put(buf);
        result
    }
}

/// Payload bytes per fragment at `mtu`: NFB, the number of 8-byte blocks that fit beside the
/// header, times 8 (RFC 791 §3.2: "NFB <- (MTU-IHL*4)/8").
fn fragment_payload(mtu: usize) -> usize {
    mtu.saturating_sub(IP_LEN) / FRAGMENT_UNIT * FRAGMENT_UNIT
}
