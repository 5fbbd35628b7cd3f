//! ICMP (RFC 792, RFC 1122 §3.2.2): the receive half (echo, errors handed to TCP) and the send
//! half (echo requests and replies, rate-limited destination-unreachable errors).

use super::state::TxError;
use super::{EchoReply, Inner, ECHO_REPLY_QUEUE};
use crate::buf::Csum;
use crate::tcp::IcmpError;
use crate::time::{Duration, Instant};
use crate::wire::icmpv4::{unreach_code, Icmpv4Packet, Icmpv4Repr};
use crate::wire::ipv4::{Ipv4Repr, HEADER_LEN as IP_LEN};
use crate::wire::{Error, IpProtocol, Ipv4Addr};
use std::net::SocketAddrV4;

/// Largest ICMP error datagram (RFC 1812 §4.3.2.3: no more than 576 bytes in total).
const ICMP_ERROR_MAX: usize = 576;
/// ICMP header of an error message (type, code, checksum, unused/MTU word: RFC 792).
const ICMP_ERROR_HEADER: usize = crate::wire::icmpv4::HEADER_LEN;

/// Token bucket for ICMP errors (RFC 1812 §4.3.2.8).
#[derive(Debug)]
pub(super) struct RateLimiter {
    tokens: u32,
    burst: u32,
    interval: Duration,
    last: Instant,
}

impl RateLimiter {
    /// A full bucket of `burst` tokens, one refilled per `interval`.
    pub fn new(burst: u32, interval: Duration) -> RateLimiter {
        RateLimiter {
            tokens: burst,
            burst,
            interval,
            last: Instant::ZERO,
        }
    }

    pub(super) fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_since(self.last).total_micros();
        let per = self.interval.total_micros().max(1);
        let add = elapsed / per;
        if add > 0 {
            let add = u32::try_from(add).unwrap_or(u32::MAX);
            self.tokens = self.tokens.saturating_add(add).min(self.burst);
            self.last += Duration::from_micros(per.saturating_mul(u64::from(add)));
        }
        if self.tokens > 0 {
            self.tokens -= 1;
            true
        } else {
            false
        }
    }
}

impl Inner {
    pub(super) fn receive_icmp(
        &mut self,
        now: Instant,
        ip: &Ipv4Repr,
        payload: &[u8],
        bcast: bool,
        csum: Csum,
    ) {
        let c = &mut self.st.c;
        c.icmp_in += 1;
        let Ok(pkt) = Icmpv4Packet::new_checked(payload) else {
            c.icmp_malformed += 1;
            return;
        };
        let repr = match Icmpv4Repr::parse(&pkt, csum.needs_verify()) {
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
                // A failure is counted where it happens (queue full, no route, ...).
                let _ = self.send_icmp(now, ip.src, &reply);
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                c.echo_replies_in += 1;
                if self.echo_replies.len() < ECHO_REPLY_QUEUE {
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
                    unreach_code::FRAG_NEEDED => {
                        let mtu = if next_hop_mtu == 0 {
                            plateau_below(header.payload_len + header.header_len())
                        } else {
                            next_hop_mtu
                        };
                        // RFC 1191 §4: the path to the quoted destination is this narrow, for
                        // whatever we send there (only about packets we sent). A quoted TCP
                        // segment must first pass the connection's RFC 5927 check (below).
                        if header.src == self.st.addr && header.protocol != IpProtocol::Tcp {
                            self.st.pmtu.learn(now, header.dst, usize::from(mtu));
                        }
                        IcmpError::FragNeeded { mtu }
                    }
                    // RFC 1122 §4.2.3.9: protocol and port unreachable are hard errors.
                    unreach_code::PROTOCOL | unreach_code::PORT => IcmpError::Unreachable { code },
                    unreach_code::NET | unreach_code::HOST => IcmpError::RouteUnreachable,
                    _ => IcmpError::Soft,
                };
                // RFC 1122 §4.1.3.3: UDP MUST pass ICMP errors up to the application; a
                // connected socket reports them (Linux's icmp_err_convert: port and protocol
                // unreachable are ECONNREFUSED, host unreachable EHOSTUNREACH).
                let udp_err = match code {
                    unreach_code::PROTOCOL | unreach_code::PORT => {
                        Some(super::UdpError::ConnectionRefused)
                    }
                    unreach_code::HOST => Some(super::UdpError::HostUnreachable),
                    _ => None,
                };
                if let Some(e) = udp_err {
                    self.icmp_error_to_udp(&header, data, e);
                }
                if self.icmp_error_to_tcp(now, &header, data, err) {
                    if let IcmpError::FragNeeded { mtu } = err {
                        self.st.pmtu.learn(now, header.dst, usize::from(mtu));
                    }
                }
            }
            Icmpv4Repr::TimeExceeded { header, data, .. } => {
                c.icmp_errors_in += 1;
                self.icmp_error_to_tcp(now, &header, data, IcmpError::Soft);
            }
        }
    }

    /// Hands an ICMP error quoting one of our TCP segments to the TCP layer. The quote's
    /// source must be us (we sent the quoted packet); the quote starts with the ports and the
    /// sequence number, which must lie in the connection's SND.UNA..SND.NXT (RFC 5927 §4.1).
    /// Returns whether a connection took the error.
    fn icmp_error_to_tcp(
        &mut self,
        now: Instant,
        quoted: &Ipv4Repr,
        data: &[u8],
        err: IcmpError,
    ) -> bool {
        // In transparent mode our connections may send from any address.
        let ours = quoted.src == self.st.addr || self.config.transparent;
        if quoted.protocol != IpProtocol::Tcp || !ours {
            return false;
        }
        let (Some((sport, dport)), Some(seq)) = (
            crate::wire::tcp::quoted_ports(data),
            crate::wire::tcp::quoted_seq(data),
        ) else {
            return false;
        };
        let local = SocketAddrV4::new(quoted.src, sport);
        let remote = SocketAddrV4::new(quoted.dst, dport);
        self.tcp.icmp_error_quoting(now, local, remote, seq, err)
    }

    /// Hands an ICMP error quoting one of our UDP datagrams to the socket connected to its
    /// destination. The quote's source must be us; it starts with the ports.
    fn icmp_error_to_udp(&mut self, quoted: &Ipv4Repr, data: &[u8], err: super::UdpError) {
        if quoted.protocol != IpProtocol::Udp || quoted.src != self.st.addr {
            return;
        }
        let Some((sport, dport)) = crate::wire::tcp::quoted_ports(data) else {
            return;
        };
        let local = SocketAddrV4::new(quoted.src, sport);
        let remote = SocketAddrV4::new(quoted.dst, dport);
        self.udp_icmp_error(local.into(), remote.into(), err);
    }

    /// Emits an ICMP message to `dst` from our address.
    pub(super) fn send_icmp(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        repr: &Icmpv4Repr<'_>,
    ) -> Result<(), TxError> {
        let st = &mut self.st;
        let mut buf = st.pool.get();
        let area = buf.append(repr.buffer_len());
        if repr.emit(area, st.csum_tx).is_err() {
            st.c.icmp_malformed += 1;
            st.pool.put(buf);
            return Err(TxError::TooBig);
        }
        st.c.icmp_out += 1;
        let src = st.addr;
        st.send_ip(now, IpProtocol::Icmp, src, dst, buf)
    }

    /// Destination unreachable quoting `ip` and the start of its payload. RFC 1122 §3.2.2: never
    /// about an ICMP error, a broadcast, a non-initial fragment, or a non-unicast source; and
    /// rate-limited (RFC 1812 §4.3.2.8) with a token bucket.
    pub(super) fn send_icmp_unreachable(
        &mut self,
        now: Instant,
        code: u8,
        ip: &Ipv4Repr,
        payload: &[u8],
    ) {
        if ip.frag_offset != 0 || ip.src.is_unspecified() {
            return;
        }
        if !self.icmp_limiter.take(now) {
            self.st.c.icmp_rate_limited += 1;
            return;
        }
        // The quote is rebuilt from the parsed header (options are not repeated).
        let room = ICMP_ERROR_MAX - IP_LEN - ICMP_ERROR_HEADER - IP_LEN;
        let data = &payload[..payload.len().min(room)];
        let repr = Icmpv4Repr::DstUnreachable {
            code,
            next_hop_mtu: 0,
            header: *ip,
            data,
        };
        if self.send_icmp(now, ip.src, &repr).is_ok() {
            self.st.c.icmp_errors_out += 1;
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
