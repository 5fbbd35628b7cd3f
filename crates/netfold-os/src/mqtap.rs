//! The queues of a multi-queue TAP as shard devices: one [`TapQueue`] per shard,
//! each a [`Device`] over its own `IFF_MULTI_QUEUE` descriptor, that share neighbour
//! discovery between them.
//!
//! How the kernel steers, preferably: [`open_queues`] loads the eBPF program of
//! [`crate::steer_bpf`] and attaches it to the TAP (`TUNSETSTEERINGEBPF`), so the tun driver
//! hands each frame to the queue of the Toeplitz (RSS) hash of its 4-tuple through
//! `Rss::new(MICROSOFT_KEY, n)`'s indirection table — the hash the multi-queue in-memory link
//! steers by ([`QueueSteering::Rss`]). A flow's queue is then a pure function of its 4-tuple:
//! - a connection the kernel opens lands on the queue of its 4-tuple's hash (its SYN and
//!   every later frame);
//! - a connection a shard opens picks a local port whose 4-tuple hashes to the shard's queue
//!   (`netfold_rt::shards`, the C API: [`netfold::rss::Rss::local_ports`]), so the kernel's
//!   SYN-ACK and every later frame come to that queue, however long the flow stays idle.
//!
//! The fallback, when the program cannot be loaded or attached (no CAP_BPF/CAP_SYS_ADMIN, an
//! old kernel) or [`open_queues_automq`] asks for it ([`QueueSteering::Automq`] says why): the
//! kernel's own `tun_automq_select_queue`: the flow's symmetric skb hash, through a flow table
//! that remembers the queue the flow's last frame came *from* us on, else the hash scaled
//! over the queues. So
//! - a connection the kernel opens (to a netfold listener) lands on the queue of its SYN's
//!   hash, and stays there because the shard owning that queue answers on it;
//! - a connection a shard opens writes its SYN on the shard's queue, which records the flow
//!   there, so the kernel's replies come back to that queue whatever the local port (shards
//!   take disjoint ports, `port % n == k`). One catch: the kernel processes a written frame
//!   synchronously (`tun_get_user` hands it to the stack before it updates the flow table),
//!   so the SYN-ACK to a *new* flow's SYN is sent before the flow is recorded, by the hash,
//!   maybe to another queue (whose shard, knowing no such connection, would reset it). So
//!   before each SYN (without ACK) the queue writes a *steering probe*: a copy of the SYN
//!   with a wrong TCP checksum and no offload flags, which records the flow on this queue
//!   and which the kernel's TCP then drops (counted in `TcpInCsumErrors`), whatever socket
//!   the 4-tuple has ([`TapQueue::probes`]). With the eBPF steering no probe is sent.
//! - The kernel forgets a flow that has sent it nothing for a few seconds (`TUN_FLOW_EXPIRE`,
//!   3 s): after that, its next frame to us goes by the hash again. For a connection the
//!   kernel opened that is the queue it came in on anyway; for one a shard opened and then
//!   left silent that long it may be another queue, whose shard drops or resets it. This is
//!   what the eBPF steering fixes; the fallback keeps the defect.
//!
//! What does not steer: ARP frames and IPv6 Neighbor Discovery messages (RFC 4861 §4, ICMPv6
//! types 133-137) belong to no flow, and the kernel delivers them on whatever queue it likes,
//! e.g. shard 1's neighbour reply on queue 0. Every shard needs the kernel's link-layer
//! address in its own neighbour table, so each such frame a queue receives is also copied to
//! every other queue's inbox and the other shard is woken through an eventfd. Each shard
//! answers a solicitation; the duplicate answers are harmless. Nothing else is shared.
//!
//! Waking: [`Device::readable_fd`] of a queue is an epoll descriptor watching both the TAP
//! descriptor and the inbox's eventfd (level-triggered), so a driver sleeping in poll(2) on
//! it (the blocking runtime's, the C API's, tokio's `AsyncFd`) wakes for either.
//!
//! Diagnostics: [`TapQueue::record_flows`] keeps, per queue, the flows (peer address, peer
//! port, our port) whose frames it delivered, bounded; [`flows_on_two_queues`] counts the
//! flows that reached more than one queue, which correct steering keeps at 0.
#![allow(unsafe_code)]

use crate::tap::{Tap, TapConfig};
use netfold::buf::{Frags, PacketBuf, Pool};
use netfold::phy::{Device, DeviceCaps, RawFd};
use netfold::rss::{frame_tuple_ip, Rss, MICROSOFT_KEY};
use netfold::time::Instant;
use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

/// A received TCP/UDP flow as a queue records it: (peer address, IPv4 as v4-mapped IPv6,
/// peer port, our port).
pub type FlowKey = ([u8; 16], u16, u16);

/// What steers the kernel's frames to a TAP's queues (see the module doc).
#[derive(Clone, Debug)]
pub enum QueueSteering {
    /// The eBPF program of [`crate::steer_bpf`]: the Toeplitz hash of the 4-tuple through
    /// this table (`Rss::new(MICROSOFT_KEY, queues)`), as the multi-queue in-memory link;
    /// `connect` must pick its local port with it ([`Rss::local_ports`]).
    Rss(Arc<Rss>),
    /// The kernel's automatic steering (the flow table of the transmit queue, plus the
    /// steering probes); the text says why the eBPF program is not in force.
    Automq(String),
}

impl QueueSteering {
    /// The table, when the eBPF steering is in force.
    pub fn rss(&self) -> Option<&Arc<Rss>> {
        match self {
            QueueSteering::Rss(r) => Some(r),
            QueueSteering::Automq(_) => None,
        }
    }

    /// How shards on these queues steer ([`netfold::shard::Steering`], what their `connect`
    /// picks ports by): by the eBPF program's table, or following the transmit queue under
    /// automq. One answer for the blocking, tokio and C shards.
    pub fn for_shards(&self) -> netfold::shard::Steering {
        netfold::shard::Steering::from_rss(self.rss().cloned())
    }
}

impl std::fmt::Display for QueueSteering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueSteering::Rss(r) => write!(
                f,
                "eBPF Toeplitz (RSS) over {} queues, Microsoft's key",
                r.shards()
            ),
            QueueSteering::Automq(why) => {
                write!(
                    f,
                    "the kernel's automq (flow table + steering probes): {why}"
                )
            }
        }
    }
}

/// Detaches the steering program when the last queue of the TAP goes: holds a duplicate of
/// one queue descriptor, so that queue stays attached until then. A TAP the kernel deletes
/// with its last queue loses the program anyway; a persistent one would otherwise keep it.
struct SteerGuard(OwnedFd);

impl Drop for SteerGuard {
    fn drop(&mut self) {
        let _ = crate::steer_bpf::attach(self.0.as_fd(), None);
    }
}

/// Loads the steering program for `taps` and attaches it through the first queue.
fn attach_rss(taps: &[Tap]) -> io::Result<(Arc<Rss>, SteerGuard)> {
    let n = taps.len();
    if n > netfold::rss::INDIRECTION_ENTRIES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "more queues than indirection-table entries",
        ));
    }
    let prog = crate::steer_bpf::load(&crate::steer_bpf::program(&MICROSOFT_KEY, n))?;
    let first = taps[0].as_fd().try_clone_to_owned()?;
    crate::steer_bpf::attach(first.as_fd(), Some(prog.as_fd()))?;
    // The TAP holds its own reference to the program: `prog` may close.
    Ok((Arc::new(Rss::new(MICROSOFT_KEY, n)), SteerGuard(first)))
}

/// An eventfd: a queue's wake-up when another queue hands it a neighbour frame.
pub(crate) struct EventFd(pub(crate) OwnedFd);

impl EventFd {
    pub(crate) fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes two integers and returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(crate) fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local to our own descriptor.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    pub(crate) fn clear(&self) {
        let mut b = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local from our own non-blocking descriptor.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
    }
}

/// An epoll descriptor readable when any descriptor added to it is (level-triggered).
pub(crate) fn epoll_of(fds: &[RawFd]) -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `ep` is a fresh descriptor that nothing else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for &fd in fds {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `ep` and `fd` are open descriptors; `ev` is a live epoll_event the kernel
        // only reads during the call.
        let r = unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(ep)
}

/// The flows one queue delivered, shared with whoever reads them ([`TapQueue::record_flows`]).
#[derive(Clone, Debug, Default)]
pub struct FlowRecord {
    flows: Arc<Mutex<HashSet<FlowKey>>>,
    limit: usize,
}

impl FlowRecord {
    /// The flows recorded so far.
    pub fn flows(&self) -> HashSet<FlowKey> {
        self.lock().clone()
    }

    /// How many flows were recorded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether flow `(peer, peer_port, our_port)` is among them.
    pub fn contains(&self, peer: std::net::IpAddr, peer_port: u16, our_port: u16) -> bool {
        self.lock()
            .contains(&(mapped(peer).octets(), peer_port, our_port))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<FlowKey>> {
        self.flows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn mapped(a: std::net::IpAddr) -> std::net::Ipv6Addr {
    match a {
        std::net::IpAddr::V4(a) => a.to_ipv6_mapped(),
        std::net::IpAddr::V6(a) => a,
    }
}

/// Over the records of one TAP's queues: (distinct flows, flows that reached more than one
/// queue). Correct steering keeps the second at 0.
pub fn flows_on_two_queues(records: &[FlowRecord]) -> (usize, usize) {
    let mut seen: HashMap<FlowKey, usize> = HashMap::new();
    for r in records {
        for f in r.lock().iter() {
            *seen.entry(*f).or_default() += 1;
        }
    }
    let split = seen.values().filter(|&&n| n > 1).count();
    (seen.len(), split)
}

/// The flow of a received frame ([`frame_tuple_ip`]: IPv4 or extension-free IPv6, TCP or
/// UDP).
fn flow_of(f: &[u8]) -> Option<FlowKey> {
    let (src, _, sp, dp) = frame_tuple_ip(f)?;
    Some((mapped(src).octets(), sp, dp))
}

fn is_arp(f: &[u8]) -> bool {
    f.get(12..14) == Some(&[0x08, 0x06])
}

/// An IPv6 Neighbor Discovery message (RFC 4861 §4: ICMPv6 types 133 to 137, straight after
/// the fixed header, as NDP sends them), through the wire views.
fn is_ndp(f: &[u8]) -> bool {
    use netfold::wire::ethernet::{EtherType, EthernetFrame};
    use netfold::wire::icmpv6::{msg_type, Icmpv6Packet};
    use netfold::wire::ipv6::Ipv6Packet;
    use netfold::wire::IpProtocol;
    let Ok(eth) = EthernetFrame::new_checked(f) else {
        return false;
    };
    if eth.ethertype() != EtherType::Ipv6 {
        return false;
    }
    let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
        return false;
    };
    if ip.next_header() != IpProtocol::Icmpv6 {
        return false;
    }
    Icmpv6Packet::new_checked(ip.payload())
        .is_ok_and(|m| (msg_type::ROUTER_SOLICIT..=msg_type::REDIRECT).contains(&m.msg_type()))
}

/// Whether a frame is neighbour discovery (ARP or NDP): what the queues share.
pub fn is_neighbour_discovery(f: &[u8]) -> bool {
    is_arp(f) || is_ndp(f)
}

/// Frames one queue's inbox holds for its shard, at most: what another queue hands over
/// beyond that while the shard is not draining is dropped and counted, as Linux's receive
/// packet steering drops beyond a CPU's backlog (`enqueue_to_backlog`, `netdev_max_backlog`,
/// 1,000 by default). Bounds the memory a stalled shard can pin.
pub(crate) const INBOX_FRAMES: usize = 1000;

/// Where a queue's copies go in, and where its shard takes them out.
pub(crate) type Inboxes = (Vec<SyncSender<Vec<u8>>>, Vec<Receiver<Vec<u8>>>);

/// The inboxes of `n` queues: one bounded channel each ([`INBOX_FRAMES`]).
pub(crate) fn inboxes(n: usize) -> Inboxes {
    (0..n)
        .map(|_| sync_channel::<Vec<u8>>(INBOX_FRAMES))
        .unzip()
}

/// Another queue: where its copies go, and its wake-up (shared with `xdpmq`'s queues).
pub(crate) struct Peer {
    pub(crate) tx: SyncSender<Vec<u8>>,
    pub(crate) wake: Arc<EventFd>,
}

impl Peer {
    /// Queues a copy of `f` in this queue's inbox without waking its driver; `false` if the
    /// inbox is full (or its queue is gone), and the copy is dropped.
    pub(crate) fn hand(&self, f: &[u8]) -> bool {
        self.tx.try_send(f.to_vec()).is_ok()
    }
}

/// Copies the neighbour-discovery frames among `frames` to every peer's inbox.
pub(crate) fn share_neighbour_frames<'a>(
    frames: impl Iterator<Item = &'a [u8]>,
    peers: &[Peer],
    shared: &mut u64,
) {
    for f in frames.filter(|f| is_neighbour_discovery(f)) {
        for p in peers {
            if p.hand(f) {
                p.wake.signal();
                *shared += 1;
            }
        }
    }
}

/// Moves up to `max` copies from the other queues into pool buffers at the end of `out`.
/// The wake-up is cleared before the inbox is drained: a copy queued after the drain signals
/// again.
pub(crate) fn drain_inbox(
    wake: &EventFd,
    inbox: &Receiver<Vec<u8>>,
    pool: &mut Pool,
    out: &mut Vec<PacketBuf>,
    max: usize,
) -> usize {
    wake.clear();
    let mut n = 0;
    while n < max {
        let Ok(f) = inbox.try_recv() else { break };
        let mut b = pool.get();
        b.extend_from_slice(&f);
        out.push(b);
        n += 1;
    }
    n
}

/// One queue of a multi-queue TAP, as one shard's device: its TAP descriptor plus the
/// neighbour-discovery frames the other queues received (see the module doc).
pub struct TapQueue {
    tap: Tap,
    index: usize,
    inbox: Receiver<Vec<u8>>,
    wake: Arc<EventFd>,
    peers: Vec<Peer>,
    /// Watches `tap` and `wake`: the descriptor drivers sleep on.
    epoll: OwnedFd,
    /// Neighbour frames copied to the other queues.
    shared: u64,
    /// Steering probes written before SYNs.
    probes: u64,
    flows: Option<FlowRecord>,
    /// The record reached its limit: stop locking it.
    flows_full: bool,
    steering: QueueSteering,
    /// Shared by the queues; detaches the eBPF program after the last one.
    _guard: Option<Arc<SteerGuard>>,
}

/// Opens `n` queues of multi-queue TAP `name` (`IFF_MULTI_QUEUE`; "nf%d" lets the kernel
/// pick the number; an existing TAP must have been made `multi_queue`), one per shard:
/// [`Tap::open_queues`], then [`TapQueue::from_taps`] (the eBPF Toeplitz steering if it
/// loads, else the kernel's automq: [`TapQueue::steering`]).
pub fn open_queues(name: &str, n: usize, config: TapConfig) -> io::Result<Vec<TapQueue>> {
    TapQueue::from_taps(Tap::open_queues(name, n, config)?)
}

/// [`open_queues`] left to the kernel's automatic steering (no eBPF program; steering
/// probes before SYNs): the fallback, on purpose.
pub fn open_queues_automq(name: &str, n: usize, config: TapConfig) -> io::Result<Vec<TapQueue>> {
    TapQueue::from_taps_automq(Tap::open_queues(name, n, config)?)
}

impl TapQueue {
    /// Joins the queues of one TAP ([`Tap::open_queues`]) so that they share neighbour
    /// discovery; queue `k` of the result is `taps[k]`. Steers by the eBPF Toeplitz program
    /// if it can be loaded and attached, else by the kernel's automq (the reason is in
    /// [`TapQueue::steering`]).
    pub fn from_taps(taps: Vec<Tap>) -> io::Result<Vec<TapQueue>> {
        if taps.is_empty() {
            return Ok(Vec::new());
        }
        let steering = match attach_rss(&taps) {
            Ok((rss, guard)) => (QueueSteering::Rss(rss), Some(Arc::new(guard))),
            Err(e) => (
                QueueSteering::Automq(format!("no eBPF steering: {e}")),
                None,
            ),
        };
        Self::join(taps, steering)
    }

    /// [`TapQueue::from_taps`] without trying the eBPF program: the kernel's automq.
    pub fn from_taps_automq(taps: Vec<Tap>) -> io::Result<Vec<TapQueue>> {
        let why = QueueSteering::Automq("asked for".into());
        Self::join(taps, (why, None))
    }

    fn join(
        taps: Vec<Tap>,
        (steering, guard): (QueueSteering, Option<Arc<SteerGuard>>),
    ) -> io::Result<Vec<TapQueue>> {
        let n = taps.len();
        let wakes: Vec<Arc<EventFd>> = (0..n)
            .map(|_| EventFd::new().map(Arc::new))
            .collect::<io::Result<_>>()?;
        let (txs, rxs) = inboxes(n);
        taps.into_iter()
            .zip(rxs)
            .enumerate()
            .map(|(k, (tap, inbox))| {
                let epoll = epoll_of(&[tap.fd(), wakes[k].0.as_raw_fd()])?;
                Ok(TapQueue {
                    tap,
                    index: k,
                    inbox,
                    wake: Arc::clone(&wakes[k]),
                    peers: (0..n)
                        .filter(|&j| j != k)
                        .map(|j| Peer {
                            tx: txs[j].clone(),
                            wake: Arc::clone(&wakes[j]),
                        })
                        .collect(),
                    epoll,
                    shared: 0,
                    probes: 0,
                    flows: None,
                    flows_full: false,
                    steering: steering.clone(),
                    _guard: guard.clone(),
                })
            })
            .collect()
    }

    /// The queue's TAP (name, MTU, counters).
    pub fn tap(&self) -> &Tap {
        &self.tap
    }

    /// Which queue of the TAP this is.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Neighbour-discovery frames this queue received and copied to the other queues.
    pub fn shared(&self) -> u64 {
        self.shared
    }

    /// Steering probes written (one before each SYN this queue sent under the kernel's
    /// automq; none with the eBPF steering; see the module doc).
    pub fn probes(&self) -> u64 {
        self.probes
    }

    /// What steers the kernel's frames to the queues (the same for every queue of the TAP).
    pub fn steering(&self) -> &QueueSteering {
        &self.steering
    }

    /// Before each SYN without ACK of `frames` (an active open), writes its steering probe:
    /// the same frame with correct IP and wrong TCP checksum, with a vnet header that asks
    /// for nothing (so the kernel verifies the checksum, and drops it).
    fn probe_syns<'a>(&mut self, frames: impl Iterator<Item = &'a PacketBuf>) {
        if let QueueSteering::Rss(_) = self.steering {
            // The 4-tuple alone decides the queue: nothing to record.
            return;
        }
        for f in frames {
            let b = f.as_slice();
            let Some(l) = crate::vnet::ip_layout(b) else {
                continue;
            };
            let flags = b.get(l.l4 + 13).copied().unwrap_or(0);
            if l.protocol != netfold::wire::IpProtocol::Tcp
                || l.fragment
                || flags & 0x12 != 0x02
                || l.end > b.len()
            {
                continue;
            }
            let mut probe = b[..l.end].to_vec();
            if !crate::vnet::fill_checksums(&mut probe) {
                continue;
            }
            // XOR with 0x5555 never turns one representation of zero into the other: the
            // checksum is wrong for sure.
            probe[l.l4 + 16] ^= 0x55;
            probe[l.l4 + 17] ^= 0x55;
            let h = crate::vnet::VnetHdr::default().to_bytes();
            if let crate::tap::Io::Done(_) = crate::tap::write_frame(self.tap.as_fd(), &h, &probe) {
                self.probes += 1;
            }
        }
    }

    /// Starts recording the flows this queue delivers, at most `limit` of them (so a
    /// long-running server's memory stays bounded); returns the record, readable from any
    /// thread while the queue runs. Costs one uncontended lock per received batch until full.
    pub fn record_flows(&mut self, limit: usize) -> FlowRecord {
        let r = FlowRecord {
            flows: Arc::default(),
            limit,
        };
        self.flows = Some(r.clone());
        self.flows_full = limit == 0;
        r
    }
}

/// What [`TapQueue::recv_batch`] does with the frames its TAP queue delivered: records their
/// flows (while `record` has room) and copies the neighbour frames to the other queues.
fn inspect(
    frames: &[PacketBuf],
    record: Option<&FlowRecord>,
    record_full: &mut bool,
    peers: &[Peer],
    shared: &mut u64,
) {
    if let (Some(r), false) = (record, *record_full) {
        let mut set = r.lock();
        for f in frames {
            if set.len() >= r.limit {
                break;
            }
            if let Some(k) = flow_of(f.as_slice()) {
                set.insert(k);
            }
        }
        *record_full = set.len() >= r.limit;
    }
    share_neighbour_frames(frames.iter().map(PacketBuf::as_slice), peers, shared);
}

impl Device for TapQueue {
    fn caps(&self) -> DeviceCaps {
        self.tap.caps()
    }

    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let mut n = drain_inbox(&self.wake, &self.inbox, pool, out, max);
        let first = out.len();
        n += self.tap.recv_batch(now, pool, out, max - n);
        if out.len() > first {
            inspect(
                &out[first..],
                self.flows.as_ref(),
                &mut self.flows_full,
                &self.peers,
                &mut self.shared,
            );
        }
        n
    }

    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        self.probe_syns(frames.iter());
        self.tap.send_batch(now, pool, frames)
    }

    fn poll_at(&self) -> Option<Instant> {
        self.tap.poll_at()
    }

    /// The epoll descriptor over the TAP queue and the inbox's eventfd.
    fn readable_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }

    fn scatter_gather(&self) -> bool {
        self.tap.scatter_gather()
    }

    fn send_batch_sg(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        frames: &mut Vec<PacketBuf>,
        frags: &mut Frags,
    ) {
        // A SYN carries no application bytes: only fragment-free frames can be one.
        self.probe_syns(
            frames
                .iter()
                .enumerate()
                .filter(|(i, _)| frags.len_of(*i) == 0)
                .map(|(_, f)| f),
        );
        self.tap.send_batch_sg(now, pool, frames, frags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_steer_by_the_ebpf_table_or_follow_the_transmit_queue() {
        use netfold::shard::Steering;
        let rss = Arc::new(Rss::new(MICROSOFT_KEY, 2));
        match QueueSteering::Rss(Arc::clone(&rss)).for_shards() {
            Steering::Rss(r) => assert!(Arc::ptr_eq(&r, &rss)),
            Steering::FollowTx => panic!("the eBPF table was lost"),
        }
        let automq = QueueSteering::Automq("no CAP_BPF".into()).for_shards();
        assert!(matches!(automq, Steering::FollowTx));
    }

    fn arp() -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x08, 0x06]);
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
        f.resize(42, 0);
        f
    }

    #[test]
    fn neighbour_frames_are_recognised() {
        assert!(is_neighbour_discovery(&arp()));
        let mut ip = arp();
        ip[12..14].copy_from_slice(&[0x08, 0x00]);
        assert!(!is_neighbour_discovery(&ip));
        assert!(!is_neighbour_discovery(&[]));
    }

    #[test]
    fn flows_on_two_queues_counts_shared_flows() {
        let a = FlowRecord {
            flows: Arc::default(),
            limit: 8,
        };
        let b = a.clone();
        let b = FlowRecord {
            flows: Arc::default(),
            ..b
        };
        a.lock().insert(([1; 16], 1, 2));
        a.lock().insert(([1; 16], 3, 2));
        b.lock().insert(([1; 16], 3, 2));
        assert_eq!(flows_on_two_queues(&[a, b]), (2, 1));
    }
}
