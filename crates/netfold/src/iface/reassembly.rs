//! Fragment reassembly for both address families — IPv4 (RFC 791 §3.2 "reassembly
//! procedure", RFC 815 hole tracking) and IPv6 (RFC 8200 §4.5) — with strict limits, in the
//! spirit of RFC 5722: a fragment that partly overlaps data already received discards the whole
//! datagram (overlaps are an evasion and poisoning vector; honest senders never produce them).
//! Exact duplicates are ignored (RFC 5722 as amended by erratum 3089: "Duplicates, however,
//! should be ignored (i.e., not used to trigger a discard)", as Linux does for both families).
//!
//! Bounds: at most `max_datagrams` datagrams in progress, at most `max_bytes` buffered in total,
//! at most `MAX_FRAGMENTS` fragments per datagram, and a datagram still incomplete `timeout`
//! after its first fragment arrived is discarded (IPv4: RFC 791 suggests a 15 s lower bound for
//! the timer; Linux uses 30 s, as do we by default. IPv6: RFC 8200 §4.5 "within 60 seconds of
//! the reception of the first-arriving fragment").
//!
//! One generic reassembler keyed by `K` (IPv4: source, destination, protocol, identification;
//! IPv6: source, destination, identification) that keeps `H`, the header of the fragment at
//! offset 0 (the IPv4 header; for IPv6 the fixed header and the Fragment header's Next Header,
//! RFC 8200 §4.5: "Only the value from the Offset zero fragment packet is used").

use crate::time::{Duration, Instant};
use crate::wire::ipv4::{self, Ipv4Repr};
use crate::wire::{IpProtocol, Ipv4Addr};

/// Largest number of fragments one datagram may arrive in.
pub const MAX_FRAGMENTS: usize = 64;
/// Largest reassembled IPv4 payload (total length is 16 bits).
const MAX_PAYLOAD: usize = ipv4::MAX_PACKET_LEN - ipv4::HEADER_LEN;

/// What identifies an IPv4 datagram's fragments (RFC 791 §3.2).
pub type V4Key = (Ipv4Addr, Ipv4Addr, IpProtocol, u16);

#[derive(Debug)]
struct Datagram<K, H> {
    key: K,
    deadline: Instant,
    /// The first fragment's header (offset 0), once seen.
    header: Option<H>,
    /// Payload length, known once the last fragment (MF = 0) arrived.
    total: Option<usize>,
    /// Received [start, end) ranges, unsorted, at most MAX_FRAGMENTS.
    ranges: Vec<(usize, usize)>,
    data: Vec<u8>,
}

/// What happened to a fragment.
#[derive(Debug, PartialEq, Eq)]
pub enum FragOutcome<H = Ipv4Repr> {
    /// Stored; the datagram is not complete yet.
    Queued,
    /// An exact duplicate of data already held; ignored.
    Duplicate,
    /// The datagram is complete: its header (IPv4: total payload length set, fragment fields
    /// cleared) and its payload. Give the buffer back with [`Reassembler::recycle`] when done.
    Complete(H, Vec<u8>),
    /// Dropped: limits (too many datagrams/bytes/fragments, bad length).
    DroppedLimit,
    /// Dropped together with the datagram it overlapped.
    DroppedOverlap,
}

#[derive(Debug)]
/// Fragments of datagrams in progress, with their limits.
pub struct Reassembler<K = V4Key, H = Ipv4Repr> {
    slots: Vec<Datagram<K, H>>,
    spare: Vec<Vec<u8>>,
    max_datagrams: usize,
    max_bytes: usize,
    max_payload: usize,
    timeout: Duration,
}

impl<K: Copy + Eq, H: Copy> Reassembler<K, H> {
    /// A reassembler with the given limits (a reassembled payload of at most 65515 bytes, an
    /// IPv4 datagram's; see [`Reassembler::with_max_payload`]).
    pub fn new(max_datagrams: usize, max_bytes: usize, timeout: Duration) -> Self {
        Reassembler {
            slots: Vec::with_capacity(max_datagrams.min(64)),
            spare: Vec::new(),
            max_datagrams,
            max_bytes,
            max_payload: MAX_PAYLOAD,
            timeout,
        }
    }

    /// The largest reassembled payload accepted (IPv6: 65535, the Payload Length's range).
    pub fn with_max_payload(mut self, max_payload: usize) -> Self {
        self.max_payload = max_payload;
        self
    }

    fn buffered(&self) -> usize {
        self.slots.iter().map(|d| d.data.len()).sum()
    }

    /// Feeds one fragment of the datagram `key`: `payload` lies at byte `start` of the
    /// datagram's payload, `more` is the more-fragments flag, `header` is kept if `start` is 0.
    pub fn push_fragment(
        &mut self,
        now: Instant,
        key: K,
        header: H,
        start: usize,
        more: bool,
        payload: &[u8],
    ) -> FragOutcome<H> {
        let end = start + payload.len();
        // RFC 791, RFC 8200 §4.5: every fragment but the last carries a multiple of 8 bytes.
        if end > self.max_payload
            || (more && !payload.len().is_multiple_of(ipv4::FRAGMENT_UNIT))
            || payload.is_empty()
        {
            return FragOutcome::DroppedLimit;
        }
        let idx = match self.slots.iter().position(|d| d.key == key) {
            Some(i) => i,
            None => {
                if self.slots.len() >= self.max_datagrams {
                    return FragOutcome::DroppedLimit;
                }
                let mut data = self.spare.pop().unwrap_or_default();
                data.clear();
                self.slots.push(Datagram {
                    key,
                    deadline: now + self.timeout,
                    header: None,
                    total: None,
                    ranges: Vec::with_capacity(8),
                    data,
                });
                self.slots.len() - 1
            }
        };
        let grow = end.saturating_sub(self.slots[idx].data.len());
        if self.buffered() + grow > self.max_bytes {
            self.discard(idx);
            return FragOutcome::DroppedLimit;
        }
        let d = &mut self.slots[idx];
        if d.ranges.contains(&(start, end)) {
            return FragOutcome::Duplicate;
        }
        let overlaps = d.ranges.iter().any(|&(s, e)| start < e && s < end);
        let past_end = d.total.is_some_and(|t| end > t);
        let bad_last = !more && (d.total.is_some_and(|t| t != end) || end < max_end(d));
        if overlaps || past_end || bad_last {
            self.discard(idx);
            return FragOutcome::DroppedOverlap;
        }
        if d.ranges.len() >= MAX_FRAGMENTS {
            self.discard(idx);
            return FragOutcome::DroppedLimit;
        }
        if d.data.len() < end {
            d.data.resize(end, 0);
        }
        d.data[start..end].copy_from_slice(payload);
        d.ranges.push((start, end));
        if !more {
            d.total = Some(end);
        }
        if start == 0 {
            d.header = Some(header);
        }
        let covered: usize = d.ranges.iter().map(|&(s, e)| e - s).sum();
        match (d.total, d.header) {
            // No overlaps are stored, so coverage equal to the total means no holes.
            (Some(t), Some(h)) if covered == t => {
                let d = self.slots.swap_remove(idx);
                let mut data = d.data;
                data.truncate(t);
                FragOutcome::Complete(h, data)
            }
            _ => FragOutcome::Queued,
        }
    }

    fn discard(&mut self, idx: usize) {
        let d = self.slots.swap_remove(idx);
        self.recycle(d.data);
    }

    /// Returns a completed datagram's buffer for reuse (one spare kept per slot, no more).
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < self.max_datagrams.min(8) {
            self.spare.push(buf);
        }
    }

    /// Drops datagrams whose timer ran out; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        self.expire_each(now, |_, _| {})
    }

    /// `expire`, handing each dropped datagram's first-fragment header (if it arrived) and
    /// the data received from offset 0 on to `f` first (IPv6 answers Time Exceeded to the
    /// first fragment's source, RFC 8200 §4.5).
    pub fn expire_each(&mut self, now: Instant, mut f: impl FnMut(Option<H>, &[u8])) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.slots.len() {
            if self.slots[i].deadline <= now {
                let d = &self.slots[i];
                let first = d.ranges.iter().find(|r| r.0 == 0).map_or(0, |&(_, e)| e);
                f(d.header, &d.data[..first.min(d.data.len())]);
                self.discard(i);
                n += 1;
            } else {
                i += 1;
            }
        }
        n
    }

    /// Earliest reassembly timeout.
    pub fn poll_at(&self) -> Option<Instant> {
        self.slots.iter().map(|d| d.deadline).min()
    }

    /// Datagrams being reassembled.
    pub fn in_progress(&self) -> usize {
        self.slots.len()
    }
}

impl Reassembler<V4Key, Ipv4Repr> {
    /// Feeds one IPv4 fragment (`ip.is_fragment()`) and its payload.
    pub fn push(&mut self, now: Instant, ip: &Ipv4Repr, payload: &[u8]) -> FragOutcome {
        let key = (ip.src, ip.dst, ip.protocol, ip.ident);
        let start = usize::from(ip.frag_offset);
        match self.push_fragment(now, key, *ip, start, ip.more_frags, payload) {
            FragOutcome::Complete(mut h, data) => {
                h.payload_len = data.len();
                h.more_frags = false;
                h.frag_offset = 0;
                FragOutcome::Complete(h, data)
            }
            other => other,
        }
    }
}

fn max_end<K, H>(d: &Datagram<K, H>) -> usize {
    d.ranges.iter().map(|&(_, e)| e).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(offset: u16, more: bool, len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            protocol: IpProtocol::Udp,
            payload_len: len,
            ttl: 64,
            dscp_ecn: 0,
            ident: 42,
            dont_frag: false,
            more_frags: more,
            frag_offset: offset,
        }
    }

    #[test]
    fn out_of_order_fragments_reassemble() {
        let mut r = Reassembler::new(4, 1 << 20, Duration::from_secs(30));
        let t = Instant::ZERO;
        assert_eq!(r.push(t, &frag(16, false, 4), &[3; 4]), FragOutcome::Queued);
        assert_eq!(r.push(t, &frag(0, true, 8), &[1; 8]), FragOutcome::Queued);
        assert_eq!(
            r.push(t, &frag(0, true, 8), &[1; 8]),
            FragOutcome::Duplicate
        );
        match r.push(t, &frag(8, true, 8), &[2; 8]) {
            FragOutcome::Complete(h, data) => {
                assert_eq!(h.payload_len, 20);
                assert!(!h.is_fragment());
                assert_eq!(
                    &data[..],
                    &[1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3]
                );
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn overlap_drops_datagram_and_limits_hold() {
        let mut r = Reassembler::new(1, 64, Duration::from_secs(30));
        let t = Instant::ZERO;
        assert_eq!(r.push(t, &frag(0, true, 16), &[0; 16]), FragOutcome::Queued);
        assert_eq!(
            r.push(t, &frag(8, true, 16), &[0; 16]),
            FragOutcome::DroppedOverlap
        );
        assert_eq!(r.in_progress(), 0);
        assert_eq!(r.push(t, &frag(0, true, 8), &[0; 8]), FragOutcome::Queued);
        let mut other = frag(0, true, 8);
        other.ident = 43;
        assert_eq!(r.push(t, &other, &[0; 8]), FragOutcome::DroppedLimit);
        assert_eq!(
            r.push(t, &frag(64, true, 8), &[0; 8]),
            FragOutcome::DroppedLimit
        );
        assert_eq!(r.push(t, &frag(0, true, 8), &[0; 8]), FragOutcome::Queued);
        assert_eq!(r.poll_at(), Some(Instant::from_secs(30)));
        assert_eq!(r.expire(Instant::from_secs(30)), 1);
        assert_eq!(r.in_progress(), 0);
    }

    /// The generic core with IPv6's key and header: the first fragment's header comes back,
    /// and an expired datagram hands over what it had from offset 0.
    #[test]
    fn generic_keys_and_expiry_report() {
        let mut r: Reassembler<u32, char> =
            Reassembler::new(4, 1 << 20, Duration::from_secs(60)).with_max_payload(65535);
        let t = Instant::ZERO;
        assert_eq!(
            r.push_fragment(t, 1, 'b', 8, false, &[2; 4]),
            FragOutcome::Queued
        );
        assert_eq!(
            r.push_fragment(t, 1, 'a', 0, true, &[1; 8]),
            FragOutcome::Complete('a', vec![1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2])
        );
        assert_eq!(
            r.push_fragment(t, 2, 'x', 0, true, &[7; 16]),
            FragOutcome::Queued
        );
        assert_eq!(
            r.push_fragment(t, 3, 'y', 16, true, &[7; 8]),
            FragOutcome::Queued
        );
        let mut seen = vec![];
        let n = r.expire_each(Instant::from_secs(60), |h, d| seen.push((h, d.len())));
        assert_eq!(n, 2);
        seen.sort();
        assert_eq!(seen, vec![(None, 0), (Some('x'), 16)]);
        assert_eq!(
            r.push_fragment(t, 4, 'z', 65528, false, &[0; 8]),
            FragOutcome::DroppedLimit
        );
    }
}
