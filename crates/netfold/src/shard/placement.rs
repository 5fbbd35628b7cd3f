//! Which CPU each shard runs on: its driver and the application threads or tasks started on
//! it, so that a connection's protocol and application work share one core (the placement
//! `netfold stream|rr|crr --shards N --affinity same` measures best, docs/SCALING.md §2).

/// A CPU per shard, or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    cpus: Vec<usize>,
}

impl Placement {
    /// Shard `k` on CPU `cpus[k % cpus.len()]`; empty: nothing is pinned. The pinning itself
    /// takes the CPU modulo the CPUs online (`netfold_os::cpu::pin_current_thread`).
    pub fn on(cpus: &[usize]) -> Placement {
        Placement {
            cpus: cpus.to_vec(),
        }
    }

    /// Shard `k` on CPU `k`.
    pub fn one_per_shard(shards: usize) -> Placement {
        Placement {
            cpus: (0..shards).collect(),
        }
    }

    /// Nothing pinned (tests, machines shared with other work).
    pub fn unpinned() -> Placement {
        Placement::default()
    }

    /// The CPU shard `k` runs on, if the shards are pinned.
    pub fn cpu(&self, k: usize) -> Option<usize> {
        (!self.cpus.is_empty()).then(|| self.cpus[k % self.cpus.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_repeat_over_the_shards_and_none_pins_nothing() {
        let p = Placement::on(&[3, 5]);
        assert_eq!(
            (0..4).map(|k| p.cpu(k)).collect::<Vec<_>>(),
            [Some(3), Some(5), Some(3), Some(5)]
        );
        assert_eq!(Placement::one_per_shard(3).cpu(2), Some(2));
        assert_eq!(Placement::unpinned().cpu(0), None);
    }
}
