//! ARP (RFC 826): the receive half (the "Packet Reception" merge rule, conflicts, replies) and
//! the send half (requests, replies, retries and give-ups, flushing frames parked for an
//! address once it resolves).

use super::neighbor::Event;
use super::state::IfaceState;
use super::Inner;
use crate::time::Instant;
use crate::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetAddress, EthernetRepr, HEADER_LEN as ETH_LEN};
use crate::wire::{Error, Ipv4Addr};

impl Inner {
    // Cold: out of line, so the per-packet path stays dense in the instruction cache.
    #[cold]
    #[inline(never)]
    pub(super) fn receive_arp(&mut self, now: Instant, p: &[u8]) {
        let st = &mut self.st;
        let c = &mut st.c;
        c.arp_in += 1;
        // An IPv6-only stack (`StackConfig::addr` 0.0.0.0) has no IPv4 address to resolve.
        if st.addr.is_unspecified() {
            return;
        }
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
        if arp.source_ip == st.addr {
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
        let merged = sender_known && st.neigh.contains(arp.source_ip);
        if merged {
            st.neigh.fill(now, arp.source_ip, arp.source_hw);
        }
        // ... "?Am I the target protocol address?" Yes: if not merged, add the triplet.
        if arp.target_ip != st.addr {
            if merged {
                st.flush_pending(arp.source_ip, arp.source_hw);
            }
            return;
        }
        if sender_known {
            if !merged {
                st.neigh.fill(now, arp.source_ip, arp.source_hw);
            }
            st.flush_pending(arp.source_ip, arp.source_hw);
        }
        // "?Is the opcode ares_op$REQUEST? Yes: swap fields, put local addresses, send reply."
        if arp.op == ArpOperation::Request {
            let reply = ArpRepr {
                op: ArpOperation::Reply,
                source_hw: st.mac,
                source_ip: st.addr,
                target_hw: arp.source_hw,
                target_ip: arp.source_ip,
            };
            st.send_arp(reply, arp.source_hw);
        }
    }
}

impl IfaceState {
    /// Sends an ARP packet in a broadcast (request) or unicast (reply) Ethernet frame.
    pub(super) fn send_arp(&mut self, arp: ArpRepr, dst: EthernetAddress) {
        if self.tx_full() {
            self.c.tx_queue_full += 1;
            return;
        }
        let mut buf = self.pool.get();
        let eth = EthernetRepr {
            src: self.mac,
            dst,
            ethertype: EtherType::Arp,
            vlan: None,
        };
        let area = buf.append(ETH_LEN + arp.buffer_len());
        let _ = eth.emit(&mut area[..ETH_LEN]);
        let _ = arp.emit(&mut area[ETH_LEN..]);
        match arp.op {
            ArpOperation::Request => self.c.arp_requests_out += 1,
            ArpOperation::Reply => self.c.arp_replies_out += 1,
        }
        self.push(buf);
    }

    pub(super) fn send_arp_request(&mut self, target: Ipv4Addr) {
        let arp = ArpRepr {
            op: ArpOperation::Request,
            source_hw: self.mac,
            source_ip: self.addr,
            target_hw: EthernetAddress::default(),
            target_ip: target,
        };
        self.send_arp(arp, EthernetAddress::BROADCAST);
    }

    /// ARP timer work: repeat due requests, drop (counted) frames whose next hop never answered.
    /// Returns the next hops given up on (empty, without allocating, almost always).
    #[inline]
    pub(super) fn neighbor_timers(&mut self, now: Instant) -> Vec<Ipv4Addr> {
        // Every poll comes here; with no resolution outstanding (the steady state) there is
        // nothing to do, and the scratch juggling below was ~4% of a TCP_RR transaction.
        if !self.neigh.has_timers() {
            return Vec::new();
        }
        self.neighbor_timers_due(now)
    }

    #[inline(never)]
    fn neighbor_timers_due(&mut self, now: Instant) -> Vec<Ipv4Addr> {
        let mut due = core::mem::take(&mut self.arp_due);
        let mut gave_up = Vec::new();
        let (pool, c) = (&mut self.pool, &mut self.c);
        self.neigh.poll(now, |e| match e {
            Event::Request(ip) => due.push(ip),
            Event::Drop(b) => {
                c.arp_unresolved_drops += 1;
                pool.put(b);
            }
            Event::GaveUp(ip) => gave_up.push(ip),
            // ARP entries are never probed (only NDP's are).
            Event::Probe(..) | Event::Expired(_) => {}
        });
        for ip in due.drain(..) {
            self.send_arp_request(ip);
        }
        self.arp_due = due;
        gave_up
    }

    /// Moves frames parked for `ip` to the transmit queue with their destination MAC filled.
    fn flush_pending(&mut self, ip: Ipv4Addr, mac: EthernetAddress) {
        let tx = &mut self.tx;
        let c = &mut self.c;
        self.neigh.release(ip, mac, |f| {
            c.frames_out += 1;
            c.bytes_out += f.len() as u64;
            tx.push(f);
        });
    }
}
