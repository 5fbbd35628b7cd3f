//! Which shard a flow belongs to: how the devices under a set of shards steer what they
//! receive, and so what a connect must do to get its replies back.

use crate::rss::Rss;
use std::net::IpAddr;
use std::sync::Arc;

/// How the devices steer received frames to shards, which decides how `connect` picks its
/// local port.
#[derive(Debug, Clone)]
pub enum Steering {
    /// By the Toeplitz hash of the 4-tuple through this table, as a NIC's RSS does (and the
    /// in-memory [`crate::phy::mq`] link, and a multi-queue TAP with netfold's eBPF steering
    /// program). `connect` from shard `k` picks a local port whose 4-tuple hashes to `k` both
    /// as the peer's frames carry it (`remote -> local`, which this host's queues steer) and
    /// as ours do (`local -> remote`, which a sharded peer steering by the same key would use,
    /// so that its accept lands on its shard `k` too).
    Rss(Arc<Rss>),
    /// The queue follows the flow's transmit queue: Linux's multi-queue TAP without its eBPF
    /// steering program (`IFF_MULTI_QUEUE`, `tun_automq_select_queue`) records, per flow
    /// hash, the queue a flow's frames were last written on and delivers the flow's frames
    /// from the kernel on that queue. A connection opened from shard `k` writes its SYN on
    /// queue `k`, so its replies come back on queue `k` whatever its port: `connect` takes
    /// any ephemeral port of its own (shards have disjoint ports, see
    /// [`crate::rss::own_ports`]). (A flow the kernel starts — a connection to our listener —
    /// lands on the queue of the kernel's own symmetric flow hash, and stays there because
    /// the shard that accepts it answers on that queue.)
    ///
    /// ARP and NDP frames carry no flow, so the kernel may deliver a shard's neighbour answer
    /// on another shard's queue: each shard's device must share them, as the queues of
    /// `netfold_os::mqtap` do; see docs/SCALING.md.
    FollowTx,
}

impl Steering {
    /// [`Steering::Rss`] with `rss`, or [`Steering::FollowTx`] without one: what a
    /// multi-queue TAP's queues report (their eBPF program's table, or none under automq).
    pub fn from_rss(rss: Option<Arc<Rss>>) -> Steering {
        rss.map_or(Steering::FollowTx, Steering::Rss)
    }

    /// The table the devices hash with, if they do.
    pub fn rss(&self) -> Option<&Arc<Rss>> {
        match self {
            Steering::Rss(rss) => Some(rss),
            Steering::FollowTx => None,
        }
    }

    /// The shard that receives a packet from `src:sport` to `dst:dport`, where the steering
    /// is a function of the packet (RSS); `None` under [`Steering::FollowTx`], where it is
    /// the kernel's record of the flow.
    pub fn shard_of(&self, src: IpAddr, dst: IpAddr, sport: u16, dport: u16) -> Option<usize> {
        self.rss()
            .map(|rss| rss.shard_of_ip(src, dst, sport, dport))
    }

    /// [`Steering::shard_of`] for an Ethernet frame; `None` also for a frame without a
    /// 4-tuple (ARP, NDP, ICMP, fragments).
    pub fn shard_of_frame(&self, frame: &[u8]) -> Option<usize> {
        self.rss()?.shard_of_frame(frame)
    }

    /// Why this steering cannot serve `shards` shards: an RSS table over another number of
    /// queues would send some flows to a shard that does not exist, or starve one.
    pub fn mismatch(&self, shards: usize) -> Option<String> {
        let rss = self.rss()?;
        (rss.shards() != shards).then(|| {
            format!(
                "the RSS table spreads over {} queues, not the {} shards",
                rss.shards(),
                shards
            )
        })
    }
}
