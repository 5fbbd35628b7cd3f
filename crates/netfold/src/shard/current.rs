//! Which shard the calling thread belongs to: set by the thread (or the shard runtime's
//! thread) a front end starts for a shard, read by `connect` to stay on the caller's shard.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A front end's name for its shards (the blocking runtime's, the tokio adapter's, the C
/// API's). Each front end's `current_shard()` answers for threads it started only, so a
/// thread of one kind of shards does not count as a shard of another kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontEnd(pub &'static str);

/// What a shard thread carries: whose shards, which set of them, which shard. Made by
/// [`crate::shard::Sharding::key`] and moved into the thread started for the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    front_end: FrontEnd,
    set: SetId,
    shard: usize,
}

impl Key {
    /// Shard `shard` of `set`, a set of `front_end`'s shards.
    pub fn new(front_end: FrontEnd, set: SetId, shard: usize) -> Key {
        Key {
            front_end,
            set,
            shard,
        }
    }

    /// The shard's index.
    pub fn shard(self) -> usize {
        self.shard
    }

    /// Marks the calling thread as this shard: first thing in a thread started for it.
    pub fn enter(self) {
        CURRENT.with(|c| c.set(Some(self)));
    }
}

thread_local! {
    static CURRENT: Cell<Option<Key>> = const { Cell::new(None) };
}

/// One set of shards (one `Shards` and its clones), unique in the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetId(usize);

impl SetId {
    /// A new identity, never handed out before.
    pub fn new() -> SetId {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        SetId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for SetId {
    fn default() -> SetId {
        SetId::new()
    }
}

/// The calling thread's shard, if `front_end` started it for one of its sets of shards.
pub fn current_shard(front_end: FrontEnd) -> Option<usize> {
    CURRENT
        .with(Cell::get)
        .and_then(|key| (key.front_end == front_end).then_some(key.shard))
}

/// The calling thread's shard, if it is one of `set`'s.
pub fn current_shard_of(set: SetId) -> Option<usize> {
    CURRENT
        .with(Cell::get)
        .and_then(|key| (key.set == set).then_some(key.shard))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_a_shard_of_the_set_and_front_end_that_entered_it_only() {
        const A: FrontEnd = FrontEnd("a");
        const B: FrontEnd = FrontEnd("b");
        let (one, two) = (SetId::new(), SetId::new());
        std::thread::spawn(move || {
            assert_eq!(current_shard(A), None);
            Key::new(A, one, 3).enter();
            assert_eq!(current_shard(A), Some(3));
            assert_eq!(current_shard(B), None);
            assert_eq!(current_shard_of(one), Some(3));
            assert_eq!(current_shard_of(two), None);
        })
        .join()
        .unwrap();
        // Another thread is no shard.
        assert_eq!(current_shard(A), None);
    }
}
