//! IPv4 (RFC 791): the receive half (header checks of RFC 1122 §3.2.1, reassembly, the
//! transport demultiplexer) and the send half (the IPv4 header in front of a transport payload,
//! then the link).

use super::reassembly::FragOutcome;
use super::state::{IfaceState, TxError};
use super::Inner;
use crate::buf::{Csum, PacketBuf};
use crate::offload::gro::Gro;
use crate::time::Instant;
use crate::wire::icmpv4::unreach_code;
use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr, HEADER_LEN as IP_LEN};
use crate::wire::{Error, IpProtocol, Ipv4Addr};

/// Where a transport payload lies: in a frame of the receive batch, straight after an
/// option-less IPv4 header (GRO may hold on to it until the batch ends), or elsewhere
/// (reassembled, or behind IPv4 options), only for the time of the call.
#[derive(Debug, Clone, Copy)]
pub(super) enum Payload<'b, 'p> {
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
        // to us is dropped.
        if !bcast && (ip.dst != our_addr || link_bcast) {
            c.ipv4_not_for_us += 1;
            return;
        }
        // RFC 1122 §3.2.1.7: a host MUST NOT discard a datagram because its TTL is below 2, so
        // there is no TTL check on receive (TTL matters only to forwarders).
        if ip.is_fragment() {
            c.frag_in += 1;
            if !self.config.frag_reassembly {
                c.frag_dropped += 1;
                return;
            }
            match self.reasm.push(now, &ip, ip_payload(p, &pkt)) {
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
                FragOutcome::DroppedOverlap => {
                    self.st.c.frag_overlaps += 1;
                    self.st.c.frag_dropped += 1;
                }
                FragOutcome::DroppedLimit => self.st.c.frag_dropped += 1,
                FragOutcome::Queued | FragOutcome::Duplicate => {}
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
            IpProtocol::Udp => self.receive_udp(now, ip, payload.bytes(), bcast, csum),
            IpProtocol::Tcp => self.receive_tcp(now, ip, payload, bcast, csum, gro),
            IpProtocol::Unknown(_) => {
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
    /// `buf` holds an IP payload; prepends the IPv4 header and hands it to the link.
    pub(super) fn send_ip(
        &mut self,
        now: Instant,
        protocol: IpProtocol,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        mut buf: PacketBuf,
    ) -> Result<(), TxError> {
        if self.tx_full() {
            self.c.tx_queue_full += 1;
            self.pool.put(buf);
            return Err(TxError::QueueFull);
        }
        let tso_ok = self.tso && protocol == IpProtocol::Tcp;
        if (IP_LEN + buf.len() > self.mtu && !tso_ok) || IP_LEN + buf.len() > 65535 {
            self.c.tx_too_big += 1;
            self.pool.put(buf);
            return Err(TxError::TooBig);
        }
        self.ident = self.ident.wrapping_add(1);
        let ip = Ipv4Repr {
            src,
            dst,
            protocol,
            payload_len: buf.len(),
            // RFC 1122 §3.2.1.7: a host must not send TTL 0.
            ttl: self.ttl.max(1),
            dscp_ecn: 0,
            ident: self.ident,
            // We never fragment on transmit; DF lets path MTU discovery (RFC 1191) work.
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        if ip.emit(buf.prepend(IP_LEN), self.csum_tx).is_err() {
            self.c.tx_too_big += 1;
            self.pool.put(buf);
            return Err(TxError::TooBig);
        }
        self.c.ipv4_out += 1;
        self.send_link(now, dst, buf)
    }
}
