//! The order an accept across all shards looks at them in: each call starts one shard further
//! than the previous call did, so a busy shard does not hide the others' connections.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Where the next accept across shards starts looking.
#[derive(Debug, Default)]
pub struct AcceptOrder {
    next: AtomicUsize,
}

impl AcceptOrder {
    /// The first call starts at shard 0.
    pub fn new() -> AcceptOrder {
        AcceptOrder::default()
    }

    /// The shard this call starts at (any count: callers take it modulo their shards).
    pub fn first(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The `shards` shard indices in this call's order: from [`AcceptOrder::first`], wrapping.
    pub fn order(&self, shards: usize) -> impl Iterator<Item = usize> {
        let first = self.first();
        (0..shards).map(move |i| (first + i) % shards)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_starts_one_shard_further() {
        let o = AcceptOrder::new();
        assert_eq!(o.order(3).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(o.order(3).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(o.first(), 2);
    }
}
