//! Shards, the sans-IO part: everything about N stacks of one host (one per device queue)
//! that does not depend on how their threads or tasks run. The blocking runtime
//! (`netfold_rt::shards`), the tokio adapter (`netfold_tokio::shards`) and the C API
//! (`nf_shards_*`) each hold one [`Sharding`] and keep only their own spawning and API surface.
//!
//! - [`steering`]: which shard a flow belongs to ([`Steering`]: the devices' RSS hash, or a
//!   multi-queue TAP's automq following the transmit queue).
//! - [`ports`]: the local port of a connection a shard opens, so that its replies come back
//!   to it ([`LocalPorts`]).
//! - [`placement`]: the CPU each shard runs on ([`Placement`]).
//! - [`accept`]: the order an accept across shards looks at them in ([`AcceptOrder`]).
//! - [`current`]: which shard the calling thread is ([`current::Key`]), so that `connect`
//!   stays on the caller's shard.
//!
//! The hashing itself (Toeplitz, the indirection table, `frame_tuple`, `own_ports`) is
//! [`crate::rss`]'s.

pub mod accept;
pub mod current;
pub mod placement;
pub mod ports;
pub mod steering;

pub use accept::AcceptOrder;
pub use current::{FrontEnd, SetId};
pub use placement::Placement;
pub use ports::{Candidates, LocalPorts};
pub use steering::Steering;

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One host's shards as a front end sees them: how many, how their devices steer, where each
/// runs, which ports their connects take, and which thread is which shard. Shared by the
/// clones of one `Shards` (it is `Sync`).
#[derive(Debug)]
pub struct Sharding {
    shards: usize,
    steering: Steering,
    placement: Placement,
    ports: LocalPorts,
    /// The next shard for a connect from a thread that is on none.
    round_robin: AtomicUsize,
    front_end: FrontEnd,
    set: SetId,
}

impl Sharding {
    /// `shards` shards (at least one) of `front_end`, steered by `steering`, placed by
    /// `placement`, connecting from ports of `ports`. Check [`Steering::mismatch`] first.
    pub fn new(
        front_end: FrontEnd,
        shards: usize,
        steering: Steering,
        placement: Placement,
        ports: RangeInclusive<u16>,
    ) -> Sharding {
        let shards = shards.max(1);
        Sharding {
            shards,
            steering,
            placement,
            ports: LocalPorts::new(ports, shards),
            round_robin: AtomicUsize::new(0),
            front_end,
            set: SetId::new(),
        }
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.shards
    }

    /// Always false: there is at least one shard.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// How the devices steer.
    pub fn steering(&self) -> &Steering {
        &self.steering
    }

    /// The CPU shard `k` runs on, if the shards are pinned.
    pub fn cpu(&self, k: usize) -> Option<usize> {
        self.placement.cpu(k)
    }

    /// The range connects take local ports from.
    pub fn ports(&self) -> &RangeInclusive<u16> {
        self.ports.range()
    }

    /// Marks the calling thread as shard `k` of these shards: first thing in a thread a front
    /// end starts for shard `k`.
    pub fn enter(&self, k: usize) {
        self.key(k).enter();
    }

    /// Shard `k`'s key, for a thread that [`current::Key::enter`]s it before the `Sharding`
    /// can be shared with it (e.g. a shard thread that must run before the rest exists).
    pub fn key(&self, k: usize) -> current::Key {
        current::Key::new(self.front_end, self.set, k)
    }

    /// The calling thread's shard, if it is one of these shards' threads.
    pub fn current(&self) -> Option<usize> {
        current::current_shard_of(self.set)
    }

    /// The shard a connect from the calling thread runs on: its own ([`Sharding::current`]),
    /// or the next one round-robin.
    pub fn pick_shard(&self) -> usize {
        self.current()
            .unwrap_or_else(|| self.round_robin.fetch_add(1, Ordering::Relaxed) % self.shards)
    }

    /// The local ports, in order, for a connection to `remote` on shard `k`
    /// ([`LocalPorts::candidates`]); the caller tries each and skips those in use. `local` is
    /// the stack's source address for `remote`, asked for only where the steering hashes it
    /// (its error is returned as it is). Panics if `k` is out of range.
    pub fn local_ports<E>(
        &self,
        k: usize,
        remote: SocketAddr,
        local: impl FnOnce() -> Result<SocketAddr, E>,
    ) -> Result<Candidates<'_>, E> {
        let local = match self.steering {
            Steering::Rss(_) => local()?,
            // Not hashed: any address does.
            Steering::FollowTx => remote,
        };
        Ok(self
            .ports
            .candidates(&self.steering, k, self.shards, local, remote))
    }

    /// What a connect on shard `k` reports when [`Sharding::local_ports`] ran out.
    pub fn no_port_left(&self, k: usize) -> String {
        format!(
            "no free local port in {:?} hashes to shard {k}",
            self.ports()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rss::{own_ports, Rss, MICROSOFT_KEY};
    use crate::wire::EPHEMERAL_PORTS;
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;

    const TEST: FrontEnd = FrontEnd("test");

    fn addr(last: u8, port: u16) -> SocketAddr {
        SocketAddr::new(Ipv4Addr::new(198, 18, 0, last).into(), port)
    }

    #[test]
    fn rss_ports_hash_to_their_shard_both_ways_and_the_search_resumes_past_the_last() {
        let rss = Arc::new(Rss::new(MICROSOFT_KEY, 2));
        let s = Sharding::new(
            TEST,
            2,
            Steering::Rss(Arc::clone(&rss)),
            Placement::unpinned(),
            EPHEMERAL_PORTS,
        );
        let (local, remote) = (addr(1, 0), addr(2, 5201));
        for k in 0..2 {
            let first: Vec<u16> = s
                .local_ports(k, remote, || Ok::<_, ()>(local))
                .unwrap()
                .take(3)
                .collect();
            for &p in &first {
                assert_eq!(
                    s.steering().shard_of(remote.ip(), local.ip(), 5201, p),
                    Some(k)
                );
                assert_eq!(
                    s.steering().shard_of(local.ip(), remote.ip(), p, 5201),
                    Some(k)
                );
            }
            // The next search starts past the ports handed out.
            let next = s
                .local_ports(k, remote, || Ok::<_, ()>(local))
                .unwrap()
                .next()
                .unwrap();
            assert!(next > first[2], "{next} after {first:?}");
        }
    }

    #[test]
    fn a_v4_mapped_peer_is_hashed_as_ipv4() {
        let rss = Arc::new(Rss::new(MICROSOFT_KEY, 2));
        let steer = Steering::Rss(rss);
        let ports = |remote: SocketAddr| -> Vec<u16> {
            let s = Sharding::new(
                TEST,
                2,
                steer.clone(),
                Placement::unpinned(),
                EPHEMERAL_PORTS,
            );
            s.local_ports(1, remote, || Ok::<_, ()>(addr(1, 0)))
                .unwrap()
                .take(8)
                .collect()
        };
        let mapped = SocketAddr::new(
            IpAddr::V6(Ipv4Addr::new(198, 18, 0, 2).to_ipv6_mapped()),
            5201,
        );
        assert_eq!(ports(mapped), ports(addr(2, 5201)));
    }

    #[test]
    fn follow_tx_ports_are_the_shards_own() {
        let s = Sharding::new(
            TEST,
            3,
            Steering::FollowTx,
            Placement::unpinned(),
            100..=130,
        );
        let got: Vec<u16> = s
            .local_ports(2, addr(2, 7), || Err("not asked"))
            .unwrap()
            .collect();
        assert_eq!(got, own_ports(100..=130, 2, 3, 100).collect::<Vec<_>>());
        assert!(s.no_port_left(2).contains("100..=130"));
    }

    #[test]
    fn connects_from_no_shard_go_round_robin_and_a_shard_thread_stays_home() {
        let s = Arc::new(Sharding::new(
            TEST,
            2,
            Steering::FollowTx,
            Placement::on(&[0]),
            EPHEMERAL_PORTS,
        ));
        assert_eq!(
            (0..4).map(|_| s.pick_shard()).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
        assert_eq!(s.cpu(1), Some(0));
        let t = Arc::clone(&s);
        std::thread::spawn(move || {
            t.enter(1);
            assert_eq!(
                (0..3).map(|_| t.pick_shard()).collect::<Vec<_>>(),
                [1, 1, 1]
            );
            assert_eq!(current::current_shard(TEST), Some(1));
        })
        .join()
        .unwrap();
        assert_eq!(s.current(), None);
    }

    #[test]
    fn steering_reports_a_table_over_another_number_of_shards() {
        let steer = Steering::from_rss(Some(Arc::new(Rss::new(MICROSOFT_KEY, 2))));
        assert_eq!(steer.mismatch(2), None);
        assert!(steer.mismatch(3).is_some());
        assert!(Steering::from_rss(None).mismatch(3).is_none());
    }
}
