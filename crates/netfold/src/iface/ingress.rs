//! The receive half of the stack: link demux, ARP, IPv4 checks and reassembly, ICMP, UDP
//! delivery, and the hand-off of checksum-verified segments to TCP. Every drop is counted.

use super::reassembly::FragOutcome;
use super::{EchoReply, Stack};
use crate::phy::Medium;
use crate::tcp::IcmpError;
use crate::time::Instant;
use crate::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetFrame, EthernetRepr};
use crate::wire::icmpv4::{unreach_code, Icmpv4Packet, Icmpv4Repr};
use crate::wire::ipv4::{checksum_combine, pseudo_header_sum, Ipv4Packet, Ipv4Repr};
use crate::wire::{Error, IpProtocol, Ipv4Addr};
use std::net::SocketAddrV4;

/// Largest ICMP error datagram (RFC 1812 §4.3.2.3: no more than 576 bytes in total).
const ICMP_ERROR_MAX: usize = 576;

impl Stack {
    pub(super) fn receive_frame(&mut self, now: Instant, frame: &[u8]) {
        self.eg.c.frames_in += 1;
        self.eg.c.bytes_in += frame.len() as u64;
        if self.eg.medium == Medium::Ip {
            self.receive_ipv4(now, frame, false);
            return;
        }
        let Ok(f) = EthernetFrame::new_checked(frame) else {
            self.eg.c.eth_malformed += 1;
            return;
        };
        let Ok(eth) = EthernetRepr::parse(&f) else {
            self.eg.c.eth_malformed += 1;
            return;
        };
        if eth.vlan.is_some() {
            // No VLAN is configured on this interface; 802.1Q frames are not ours.
            self.eg.c.unsupported += 1;
            return;
        }
        let link_bcast = eth.dst.is_broadcast();
        if eth.dst != self.eg.mac && !link_bcast {
            self.eg.c.eth_not_for_us += 1;
            return;
        }
        match eth.ethertype {
            EtherType::Arp => self.receive_arp(now, f.payload()),
            EtherType::Ipv4 => self.receive_ipv4(now, f.payload(), link_bcast),
            _ => self.eg.c.unsupported += 1,
        }
    }

    fn receive_arp(&mut self, now: Instant, p: &[u8]) {
        let c = &mut self.eg.c;
        c.arp_in += 1;
        let arp = match ArpPacket::new_checked(p).and_then(|p| ArpRepr::parse(&p)) {
            Ok(a) => a,
            Err(Error::Unsupported) => {
                c.unsupported += 1;
                return;
            }
            Err(_) => {
                c.arp_malformed += 1;
                return;
            }
        };
        match arp.op {
            ArpOperation::Request => c.arp_requests_in += 1,
            ArpOperation::Reply => c.arp_replies_in += 1,
        }
        // Another host using our address (RFC 5227 §2.4 conflict): count, never learn from it.
        if arp.source_ip == self.eg.addr {
            c.arp_conflicts += 1;
            return;
        }
        // A sender claiming a group MAC or a broadcast/multicast IP is bogus.
        if !arp.source_hw.is_unicast()
            || arp.source_ip.is_broadcast()
            || arp.source_ip.is_multicast()
        {
            c.arp_malformed += 1;
            return;
        }
        let sender_known = !arp.source_ip.is_unspecified();
        // RFC 826 "Packet Reception": if the sender's protocol address is already in the
        // table, update its hardware address (merge_flag := true) ...
        let merged = sender_known && self.eg.neigh.contains(arp.source_ip);
        if merged {
            self.eg.neigh.fill(now, arp.source_ip, arp.source_hw);
        }
        // ... "?Am I the target protocol address?" Yes: if not merged, add the triplet.
        if arp.target_ip != self.eg.addr {
            if merged {
                self.eg.flush_pending(arp.source_ip, arp.source_hw);
            }
            return;
        }
        if sender_known {
            if !merged {
                self.eg.neigh.fill(now, arp.source_ip, arp.source_hw);
            }
            self.eg.flush_pending(arp.source_ip, arp.source_hw);
        }
        // "?Is the opcode ares_op$REQUEST? Yes: swap fields, put local addresses, send reply."
        if arp.op == ArpOperation::Request {
            let reply = ArpRepr {
                op: ArpOperation::Reply,
                source_hw: self.eg.mac,
                source_ip: self.eg.addr,
                target_hw: arp.source_hw,
                target_ip: arp.source_ip,
            };
            self.eg.send_arp(reply, arp.source_hw);
        }
    }

    fn receive_ipv4(&mut self, now: Instant, p: &[u8], link_bcast: bool) {
        let c = &mut self.eg.c;
        c.ipv4_in += 1;
        let Ok(pkt) = Ipv4Packet::new_checked(p) else {
            c.ipv4_malformed += 1;
            return;
        };
        let ip = match Ipv4Repr::parse(&pkt, self.csum_rx) {
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
        let src_bcast = self.eg.is_broadcast(ip.src);
        let bcast = self.eg.is_broadcast(ip.dst);
        let c = &mut self.eg.c;
        // RFC 1122 §3.2.1.3: discard datagrams whose source is broadcast or multicast, or in
        // 127/8 ("MUST NOT appear outside a host"); one with our own source address is a
        // reflection or a spoof.
        if src_bcast || ip.src.is_multicast() || ip.src.is_loopback() || ip.src == self.eg.addr {
            c.ipv4_bad_src += 1;
            return;
        }
        // RFC 1122 §3.3.6: a datagram received via link broadcast with a unicast IP destination
        // SHOULD be silently discarded. We are a host (no forwarding): anything not addressed
        // to us is dropped.
        if !bcast && (ip.dst != self.eg.addr || link_bcast) {
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
            match self.reasm.push(now, &ip, pkt.payload()) {
                FragOutcome::Complete(h, data) => {
                    self.eg.c.frag_reassembled += 1;
                    self.receive_transport(now, &h, &data, bcast, true);
                    self.reasm.recycle(data);
                }
                FragOutcome::DroppedOverlap => {
                    self.eg.c.frag_overlaps += 1;
                    self.eg.c.frag_dropped += 1;
                }
                FragOutcome::DroppedLimit => self.eg.c.frag_dropped += 1,
                FragOutcome::Queued | FragOutcome::Duplicate => {}
            }
            return;
        }
        self.receive_transport(now, &ip, pkt.payload(), bcast, true);
    }

    fn receive_transport(
        &mut self,
        now: Instant,
        ip: &Ipv4Repr,
        payload: &[u8],
        bcast: bool,
        may_reply: bool,
    ) {
        match ip.protocol {
            IpProtocol::Icmp => self.receive_icmp(now, ip, payload, bcast),
            IpProtocol::Udp => self.receive_udp(now, ip, payload, bcast),
            IpProtocol::Tcp => {
                // RFC 9293 §3.9.1 (and RFC 1122 §4.2.3.10): TCP is unicast only.
                if bcast {
                    self.eg.c.ipv4_not_for_us += 1;
                    return;
                }
                match super::tcp_wire::parse(payload, ip.src, ip.dst, self.csum_rx) {
                    Ok((repr, hlen)) => {
                        let data = payload.get(hlen..).unwrap_or(&[]);
                        self.tcp.input(now, ip.src, ip.dst, &repr, data);
                    }
                    Err(Error::BadChecksum) => self.eg.c.tcp_bad_checksum += 1,
                    Err(_) => self.eg.c.tcp_malformed += 1,
                }
            }
            IpProtocol::Unknown(_) => {
                self.eg.c.ipv4_unknown_protocol += 1;
                // RFC 1122 §3.2.2.1: protocol unreachable for a protocol we do not speak.
                if may_reply && !bcast {
                    self.send_icmp_unreachable(now, unreach_code::PROTOCOL, ip, payload);
                }
            }
        }
    }

    fn receive_icmp(&mut self, now: Instant, ip: &Ipv4Repr, payload: &[u8], bcast: bool) {
        let c = &mut self.eg.c;
        c.icmp_in += 1;
        let Ok(pkt) = Icmpv4Packet::new_checked(payload) else {
            c.icmp_malformed += 1;
            return;
        };
        let repr = match Icmpv4Repr::parse(&pkt, self.csum_rx) {
            Ok(r) => r,
            Err(Error::BadChecksum) => {
                c.icmp_bad_checksum += 1;
                return;
            }
            Err(Error::Unsupported) => {
                c.icmp_unsupported += 1;
                return;
            }
            Err(_) => {
                c.icmp_malformed += 1;
                return;
            }
        };
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                c.echo_requests_in += 1;
                // RFC 1122 §3.2.2.6: an echo request to a broadcast address MAY be silently
                // discarded; we do, so we cannot be used as a smurf amplifier.
                if bcast {
                    return;
                }
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                let _ = self.send_icmp(now, ip.src, &reply);
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                c.echo_replies_in += 1;
                if self.echo_replies.len() < super::ECHO_REPLY_QUEUE {
                    self.echo_replies.push_back(EchoReply {
                        from: ip.src,
                        ident,
                        seq_no,
                        len: data.len(),
                        at: now,
                    });
                }
            }
            Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu,
                header,
                data,
            } => {
                c.icmp_errors_in += 1;
                if code == unreach_code::PORT {
                    c.icmp_port_unreachable_in += 1;
                }
                let err = match code {
                    unreach_code::FRAG_NEEDED => IcmpError::FragNeeded {
                        mtu: if next_hop_mtu == 0 {
                            plateau_below(header.payload_len + header.header_len())
                        } else {
                            next_hop_mtu
                        },
                    },
                    // RFC 1122 §4.2.3.9: protocol and port unreachable are hard errors.
                    unreach_code::PROTOCOL | unreach_code::PORT => IcmpError::Unreachable { code },
                    _ => IcmpError::Soft,
                };
                self.icmp_error_to_tcp(now, &header, data, err);
            }
            Icmpv4Repr::TimeExceeded { header, data, .. } => {
                c.icmp_errors_in += 1;
                self.icmp_error_to_tcp(now, &header, data, IcmpError::Soft);
            }
        }
    }

    /// Hands an ICMP error quoting one of our TCP segments to the TCP layer. The quote's
    /// source must be us (we sent the quoted packet); the first 4 quoted bytes are the ports.
    fn icmp_error_to_tcp(&mut self, now: Instant, quoted: &Ipv4Repr, data: &[u8], err: IcmpError) {
        if quoted.protocol != IpProtocol::Tcp || quoted.src != self.eg.addr || data.len() < 4 {
            return;
        }
        let sport = u16::from_be_bytes([data[0], data[1]]);
        let dport = u16::from_be_bytes([data[2], data[3]]);
        let local = SocketAddrV4::new(quoted.src, sport);
        let remote = SocketAddrV4::new(quoted.dst, dport);
        self.tcp.icmp_error(now, local, remote, err);
    }

    fn receive_udp(&mut self, now: Instant, ip: &Ipv4Repr, payload: &[u8], bcast: bool) {
        let c = &mut self.eg.c;
        c.udp_in += 1;
        if payload.len() < super::udp::HEADER_LEN {
            c.udp_malformed += 1;
            return;
        }
        // RFC 768: the length field covers header and data; bytes beyond it are padding.
        let len = usize::from(u16::from_be_bytes([payload[4], payload[5]]));
        if len < super::udp::HEADER_LEN || len > payload.len() {
            c.udp_malformed += 1;
            return;
        }
        let dgram = &payload[..len];
        let (header, data) = dgram.split_at(super::udp::HEADER_LEN);
        let csum = u16::from_be_bytes([dgram[6], dgram[7]]);
        // RFC 768: an all-zero checksum means the sender computed none. The data's share of the
        // sum is taken while the data is copied to the socket (one pass over the bytes).
        let verify = self.csum_rx && csum != 0;
        let ph = pseudo_header_sum(ip.src, ip.dst, IpProtocol::Udp, len as u32);
        let head_sum = checksum_combine(ph, crate::mem::checksum(header));
        let sport = u16::from_be_bytes([dgram[0], dgram[1]]);
        let dport = u16::from_be_bytes([dgram[2], dgram[3]]);
        if dport == 0 {
            c.udp_malformed += 1;
            return;
        }
        let limit = self.udp.queue_limit();
        match self.udp.lookup(SocketAddrV4::new(ip.dst, dport)) {
            Some(sock) => {
                if sock.rx.len() >= limit {
                    c.udp_queue_full += 1;
                    return;
                }
                let mut buf = self.eg.pool.get();
                let data_sum = crate::mem::copy_with_checksum(buf.append(data.len()), data);
                if verify && checksum_combine(head_sum, data_sum) != 0xffff {
                    c.udp_bad_checksum += 1;
                    self.eg.pool.put(buf);
                    return;
                }
                sock.rx.push_back((SocketAddrV4::new(ip.src, sport), buf));
            }
            None => {
                // Verify before answering: never send an error about a corrupted datagram.
                if verify && checksum_combine(head_sum, crate::mem::checksum(data)) != 0xffff {
                    c.udp_bad_checksum += 1;
                    return;
                }
                c.udp_no_socket += 1;
                // RFC 1122 §4.1.3.1: port unreachable for a closed port, but never in answer to
                // a broadcast (RFC 1122 §3.2.2).
                if !bcast {
                    self.send_icmp_unreachable(now, unreach_code::PORT, ip, payload);
                }
            }
        }
    }

    /// Emits an ICMP message to `dst` from our address.
    pub(super) fn send_icmp(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        repr: &Icmpv4Repr<'_>,
    ) -> Result<(), super::TxError> {
        let mut buf = self.eg.pool.get();
        let area = buf.append(repr.buffer_len());
        if repr.emit(area, self.eg.csum_tx).is_err() {
            self.eg.c.icmp_malformed += 1;
            self.eg.pool.put(buf);
            return Err(super::TxError::TooBig);
        }
        self.eg.c.icmp_out += 1;
        let src = self.eg.addr;
        self.eg.send_ip(now, IpProtocol::Icmp, src, dst, buf)
    }

    /// Destination unreachable quoting `ip` and the start of its payload. RFC 1122 §3.2.2: never
    /// about an ICMP error, a broadcast, a non-initial fragment, or a non-unicast source; and
    /// rate-limited (RFC 1812 §4.3.2.8) with a token bucket.
    fn send_icmp_unreachable(&mut self, now: Instant, code: u8, ip: &Ipv4Repr, payload: &[u8]) {
        if ip.frag_offset != 0 || ip.src.is_unspecified() {
            return;
        }
        if !self.icmp_limiter.take(now) {
            self.eg.c.icmp_rate_limited += 1;
            return;
        }
        // The quote is rebuilt from the parsed header (options are not repeated).
        let room = ICMP_ERROR_MAX - 20 - 8 - 20;
        let data = &payload[..payload.len().min(room)];
        let repr = Icmpv4Repr::DstUnreachable {
            code,
            next_hop_mtu: 0,
            header: *ip,
            data,
        };
        if self.send_icmp(now, ip.src, &repr).is_ok() {
            self.eg.c.icmp_errors_out += 1;
        }
    }
}

/// RFC 1191 §7: when a router sends next-hop MTU 0, estimate it as the largest plateau below
/// the size of the quoted datagram.
fn plateau_below(len: usize) -> u16 {
    const PLATEAUS: [u16; 10] = [32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68];
    PLATEAUS
        .iter()
        .copied()
        .find(|&p| usize::from(p) < len)
        .unwrap_or(68)
}
