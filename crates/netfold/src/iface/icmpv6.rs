//! ICMPv6 (RFC 4443): the receive half (echo, Packet Too Big into the path MTU cache, errors
//! quoting our TCP segments and UDP datagrams handed to the transport, RFC 4443 §2.4 (b),
//! Neighbor Discovery handed to `ndp.rs`) and the send half (echo requests and replies,
//! rate-limited error messages under the rules of RFC 4443 §2.4).
//!
//! Checksums: an ICMPv6 message netfold sends always carries its full checksum, whatever the
//! device offers (the virtio-net code of `netfold-os` has no partial checksum for ICMPv6
//! either, and these messages are small); a received one is verified once, when its frame's
//! `Csum` says it needs it (as ICMPv4).

use super::ipv6::{Arrival, DstKind, Invoking};
use super::state::TxError;
use super::{EchoReplyV6, Inner, ECHO_REPLY_QUEUE};
use crate::buf::Csum;
use crate::iface::UdpError;
use crate::tcp::IcmpError;
use crate::time::Instant;
use crate::wire::icmpv6::{msg_type, Icmpv6Packet, Icmpv6Repr, HEADER_LEN, MAX_ERROR_LEN};
use crate::wire::ipv4::Ecn;
use crate::wire::ipv6::{Ipv6Addr, Ipv6Repr, HEADER_LEN as IP6_LEN, MIN_MTU};
use crate::wire::ipv6ext;
use crate::wire::{Error, IpProtocol};
use std::net::SocketAddr;

impl Inner {
    /// One ICMPv6 message `msg` in the packet `ip`.
    pub(super) fn receive_icmpv6(
        &mut self,
        now: Instant,
        ip: &Ipv6Repr,
        msg: &[u8],
        arrival: Arrival,
        invoking: Invoking<'_>,
        csum: Csum,
    ) {
        let c = &mut self.st.c;
        c.icmpv6_in += 1;
        let Ok(pkt) = Icmpv6Packet::new_checked(msg) else {
            c.icmpv6_malformed += 1;
            return;
        };
        let repr = match Icmpv6Repr::parse(&pkt, ip.src, ip.dst, csum.needs_verify()) {
            Ok(r) => r,
            Err(Error::BadChecksum) => {
                c.icmpv6_bad_checksum += 1;
                return;
            }
            Err(Error::Unsupported) => {
                c.icmpv6_unsupported += 1;
                return;
            }
            Err(_) => {
                c.icmpv6_malformed += 1;
                return;
            }
        };
        if let Icmpv6Repr::Ndisc(nd) = repr {
            self.receive_ndp(now, ip, nd);
            return;
        }
        // Only Neighbor Discovery may reach a tentative address (RFC 4862 §5.4).
        if arrival.dst == DstKind::Tentative {
            c.ipv6_not_for_us += 1;
            return;
        }
        let _ = invoking;
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                c.echo6_requests_in += 1;
                // Nobody to answer: the unspecified source (RFC 4443 §2.4 (e.6) in spirit).
                if ip.src.is_unspecified() {
                    c.ipv6_bad_src += 1;
                    return;
                }
                // RFC 4443 §4.2: "An Echo Reply SHOULD be sent in response to an Echo Request
                // message sent to an IPv6 multicast or anycast address. In this case, the
                // source address of the reply MUST be a unicast address belonging to the
                // interface on which the Echo Request message was received." Linux answers
                // (icmp_echo_ignore_multicast = 0), and so do we. §2.2 (a): to one of our
                // unicast addresses, from that address.
                let src = if arrival.dst == DstKind::Unicast {
                    Some(ip.dst)
                } else {
                    self.st.ipv6_source_for(ip.src)
                };
                let Some(src) = src else {
                    self.st.c.ipv6_no_source += 1;
                    return;
                };
                let reply = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                // A failure is counted where it happens (queue full, no route, ...).
                let _ = self.send_icmpv6(now, src, ip.src, &reply);
            }
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                c.echo6_replies_in += 1;
                if self.echo6_replies.len() < ECHO_REPLY_QUEUE {
                    self.echo6_replies.push_back(EchoReplyV6 {
                        from: ip.src,
                        ident,
                        seq_no,
                        len: data.len(),
                        at: now,
                    });
                }
            }
            Icmpv6Repr::PacketTooBig { mtu, header, data } => {
                c.icmpv6_errors_in += 1;
                c.icmpv6_ptb_in += 1;
                // RFC 8201 §4: "A node MUST NOT reduce its estimate of the Path MTU below the
                // IPv6 minimum link MTU" and "If a node receives a Packet Too Big message
                // reporting a next-hop MTU that is less than the IPv6 minimum link MTU, it
                // must discard it." Only about packets we sent (the quote's source is ours).
                let mtu = usize::try_from(mtu).unwrap_or(usize::MAX);
                if mtu < MIN_MTU || self.st.v6.state_of(header.src).is_none() {
                    c.icmpv6_ptb_ignored += 1;
                    return;
                }
                self.st.v6.pmtu.learn(now, header.dst, mtu);
                // RFC 8201 §5.2: TCP lowers its segment size for the connection too (it is
                // checked against SND.UNA..SND.MAX there, RFC 5927 §4.1).
                let mtu = u16::try_from(mtu).unwrap_or(u16::MAX);
                let tcp = Some(IcmpError::FragNeeded { mtu });
                self.icmpv6_error_to_transport(now, &header, data, tcp, None);
            }
            Icmpv6Repr::DstUnreachable { code, header, data } => {
                c.icmpv6_errors_in += 1;
                // As Linux's `icmpv6_err_convert`: port unreachable and the administrative
                // codes (1, 5, 6) are hard errors (ECONNREFUSED, EACCES), no route and
                // address unreachable soft ones (RFC 1122 §4.2.3.9 in spirit).
                use crate::wire::icmpv6::unreach_code as u;
                let hard = matches!(code, u::PORT | u::PROHIBITED | 5 | 6);
                let tcp = Some(if hard {
                    IcmpError::Unreachable { code }
                } else {
                    IcmpError::Soft
                });
                let udp = match code {
                    u::PORT => Some(UdpError::ConnectionRefused),
                    u::NO_ROUTE | u::ADDRESS => Some(UdpError::HostUnreachable),
                    _ => None,
                };
                self.icmpv6_error_to_transport(now, &header, data, tcp, udp);
            }
            Icmpv6Repr::TimeExceeded { header, data, .. }
            | Icmpv6Repr::ParamProblem { header, data, .. } => {
                // Soft for TCP (Linux makes a Parameter Problem fatal with EPROTO; netfold
                // has no such error to report and keeps trying, as for time exceeded).
                c.icmpv6_errors_in += 1;
                self.icmpv6_error_to_transport(now, &header, data, Some(IcmpError::Soft), None);
            }
            Icmpv6Repr::Ndisc(_) => {}
        }
    }

    /// Sends an ICMPv6 message from `src` to `dst` (hop limit: ours).
    pub(super) fn send_icmpv6(
        &mut self,
        now: Instant,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        repr: &Icmpv6Repr<'_>,
    ) -> Result<(), TxError> {
        let hop_limit = self.st.v6.hop_limit;
        self.st.send_icmpv6_with(now, src, dst, repr, hop_limit)
    }

    /// Parameter Problem (RFC 4443 §3.4) about the invoking packet, with `pointer` its offset
    /// where the problem is.
    pub(super) fn send_param_problem(
        &mut self,
        now: Instant,
        code: u8,
        pointer: usize,
        arrival: Arrival,
        inv: Invoking<'_>,
    ) {
        // RFC 4443 §2.4 (e.3), (e.4): the one Parameter Problem sent about a packet to a
        // multicast address is code 2 for an option whose action bits are 10 (the walk
        // reports action 11 to multicast as a silent discard).
        let mcast_ok = code == ipv6ext::param_problem::OPTION;
        let build = |header: Ipv6Repr, data| Icmpv6Repr::ParamProblem {
            code,
            pointer: u32::try_from(pointer).unwrap_or(u32::MAX),
            header,
            data,
        };
        self.send_icmpv6_error(now, arrival, mcast_ok, inv, build);
    }

    /// An ICMPv6 error message about `inv`, made by `build` from the invoking packet's header
    /// and as much of the rest as fits. RFC 4443 §2.4 (e): never about an ICMPv6 error message
    /// or a Redirect (e.1, e.2), about a packet to a multicast address or in a link-layer
    /// multicast or broadcast frame unless `mcast_ok` (e.3-e.5: Packet Too Big and Parameter
    /// Problem code 2), or about a packet whose source does not identify one node (e.6:
    /// unspecified, multicast); (f): rate-limited, a token bucket like ICMPv4's. §2.2: the
    /// source is the invoking packet's destination if that is one of our unicast addresses,
    /// else our best address for the destination.
    pub(super) fn send_icmpv6_error<'q>(
        &mut self,
        now: Instant,
        arrival: Arrival,
        mcast_ok: bool,
        inv: Invoking<'q>,
        build: impl FnOnce(Ipv6Repr, &'q [u8]) -> Icmpv6Repr<'q>,
    ) {
        let src_ok = !inv.ip.src.is_unspecified()
            && !inv.ip.src.is_multicast()
            && self.st.v6.state_of(inv.ip.src).is_none();
        if !src_ok || (arrival.is_multicast() && !mcast_ok) || is_error_or_redirect(&inv) {
            self.st.c.icmpv6_errors_suppressed += 1;
            return;
        }
        if !self.icmpv6_limiter.take(now) {
            self.st.c.icmpv6_rate_limited += 1;
            return;
        }
        let src = if arrival.dst == DstKind::Unicast {
            Some(inv.ip.dst)
        } else {
            self.st.ipv6_source_for(inv.ip.src)
        };
        let Some(src) = src else {
            self.st.c.ipv6_no_source += 1;
            return;
        };
        // RFC 4443 §2.4 (c): "as much of invoking packet as possible without the ICMPv6
        // packet exceeding the minimum IPv6 MTU".
        let room = MAX_ERROR_LEN - HEADER_LEN - IP6_LEN;
        let data = &inv.rest[..inv.rest.len().min(room)];
        let repr = build(inv.ip, data);
        if self.send_icmpv6(now, src, inv.ip.src, &repr).is_ok() {
            self.st.c.icmpv6_errors_out += 1;
        }
    }
}

/// Whether the invoking packet is an ICMPv6 error message or a Redirect (RFC 4443 §2.4 (e.1),
/// (e.2)), found as Linux's `is_ineligible` finds it: by stepping over extension headers; a
/// chain that cannot be followed, or a later fragment, is not known to be one.
fn is_error_or_redirect(inv: &Invoking<'_>) -> bool {
    let Some((nh, off, frag)) = ipv6ext::skip_to_upper(u8::from(inv.ip.next_header), inv.rest)
    else {
        return false;
    };
    if IpProtocol::from(nh) != IpProtocol::Icmpv6 || frag.is_some_and(|f| f.offset != 0) {
        return false;
    }
    match inv.rest.get(off) {
        Some(&t) => msg_type::is_error(t) || t == msg_type::REDIRECT,
        // An ICMPv6 header cut off: treat it as an error message, as Linux does.
        None => true,
    }
}

impl Inner {
    /// An ICMPv6 error quoting `header` + `quote` (RFC 4443 §2.4 (b): "an ICMPv6 error
    /// message MUST be passed to the upper-layer process that originated the packet"): the
    /// quoted packet must be ours (its source one of our addresses); extension headers in the
    /// quote are stepped over; a quote of a later fragment carries no transport header. TCP
    /// takes `tcp` if the quoted sequence number is one it sent (RFC 5927 §4.1), a connected
    /// UDP socket `udp`.
    fn icmpv6_error_to_transport(
        &mut self,
        now: Instant,
        header: &Ipv6Repr,
        quote: &[u8],
        tcp: Option<IcmpError>,
        udp: Option<UdpError>,
    ) {
        if self.st.v6.state_of(header.src).is_none() {
            return;
        }
        let Some((nh, off, frag)) = ipv6ext::skip_to_upper(u8::from(header.next_header), quote)
        else {
            return;
        };
        if frag.is_some_and(|f| f.offset != 0) {
            return;
        }
        let upper = quote.get(off..).unwrap_or(&[]);
        let Some((sport, dport)) = crate::wire::tcp::quoted_ports(upper) else {
            return;
        };
        let local = SocketAddr::new(header.src.into(), sport);
        let remote = SocketAddr::new(header.dst.into(), dport);
        match (IpProtocol::from(nh), tcp, udp) {
            (IpProtocol::Tcp, Some(err), _) => {
                if let Some(seq) = crate::wire::tcp::quoted_seq(upper) {
                    self.tcp.icmp_error_quoting(now, local, remote, seq, err);
                }
            }
            (IpProtocol::Udp, _, Some(err)) => self.udp_icmp_error(local, remote, err),
            _ => {}
        }
    }
}

impl super::state::IfaceState {
    /// Emits an ICMPv6 message from `src` to `dst` with `hop_limit`, its checksum always
    /// computed here (see the module documentation).
    pub(super) fn send_icmpv6_with(
        &mut self,
        now: Instant,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        repr: &Icmpv6Repr<'_>,
        hop_limit: u8,
    ) -> Result<(), TxError> {
        let mut buf = self.pool.get();
        let area = buf.append(repr.buffer_len());
        if repr.emit(src, dst, area, true).is_err() {
            self.c.icmpv6_malformed += 1;
            self.pool.put(buf);
            return Err(TxError::TooBig);
        }
        self.c.icmpv6_out += 1;
        let hdr = super::ipv6::V6Out {
            next_header: IpProtocol::Icmpv6,
            src,
            dst,
            hop_limit,
            dscp: 0,
            ecn: Ecn::NotEct,
        };
        self.send_ipv6_with(now, hdr, buf)
    }
}
