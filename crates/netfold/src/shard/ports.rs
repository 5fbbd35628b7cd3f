//! The local port of a connection a shard opens: one whose flow the devices steer back to
//! that shard, searched from where the shard's previous search stopped.

use super::Steering;
use crate::rss::own_ports;
use crate::socket::unmapped;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU16, Ordering};

/// The range `connect` takes local ports from and, per shard, where its next search starts.
#[derive(Debug)]
pub struct LocalPorts {
    range: RangeInclusive<u16>,
    /// Per shard: past the last port handed out, so ports in use (or in TIME-WAIT) are not
    /// searched again by every connect, and concurrent connects mostly try different ports.
    cursors: Vec<AtomicU16>,
}

impl LocalPorts {
    /// Ports of `range` for `shards` shards, every search starting at the range's beginning.
    pub fn new(range: RangeInclusive<u16>, shards: usize) -> LocalPorts {
        let start = *range.start();
        LocalPorts {
            cursors: (0..shards.max(1)).map(|_| AtomicU16::new(start)).collect(),
            range,
        }
    }

    /// The range searched.
    pub fn range(&self) -> &RangeInclusive<u16> {
        &self.range
    }

    /// The ports a connection from `local` to `remote` opened by shard `k` of `shards` may
    /// use, in the order to try them, each at most once:
    /// - [`Steering::Rss`]: those whose 4-tuple hashes to `k` both ways
    ///   ([`crate::rss::Rss::local_ports`]), hashed as the addresses go on the wire (a
    ///   v4-mapped address as IPv4);
    /// - [`Steering::FollowTx`]: any port steers (the SYN leaves on queue `k`), but the
    ///   shards share one address, so shard `k` takes only `port % shards == k`
    ///   ([`own_ports`]): two shards must never open the same 4-tuple.
    ///
    /// Each port handed out moves shard `k`'s cursor past it, whatever the caller then makes
    /// of it (the caller skips a port whose bind or connect says it is in use). Panics if `k`
    /// is not below the `shards` given to [`LocalPorts::new`].
    pub fn candidates<'a>(
        &'a self,
        steering: &'a Steering,
        k: usize,
        shards: usize,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Candidates<'a> {
        let cursor = &self.cursors[k];
        let start = cursor.load(Ordering::Relaxed);
        let range = self.range.clone();
        let ports: Box<dyn Iterator<Item = u16> + Send + 'a> = match steering {
            Steering::Rss(rss) => {
                let (local, remote) = (unmapped(local), unmapped(remote));
                Box::new(rss.local_ports(local.ip(), remote.ip(), remote.port(), k, range, start))
            }
            Steering::FollowTx => Box::new(own_ports(range, k, shards, start)),
        };
        Candidates { ports, cursor }
    }
}

/// The iterator of [`LocalPorts::candidates`].
pub struct Candidates<'a> {
    ports: Box<dyn Iterator<Item = u16> + Send + 'a>,
    cursor: &'a AtomicU16,
}

impl Iterator for Candidates<'_> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        let port = self.ports.next()?;
        // The next search starts after this port, whatever becomes of it.
        self.cursor.store(port.wrapping_add(1), Ordering::Relaxed);
        Some(port)
    }
}
