//! Two stacks joined by a link, in virtual time.

use netfold::iface::{Stack, StackConfig};
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use netfold::phy::Device;
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::EthernetAddress;
use netfold::wire::Ipv4Addr;

/// A stack at `addr`/24 whose MAC (02:00:00:00:00:`last`) and TCP secret derive from `last`, so
/// two stacks built with different bytes never collide and every run is the same.
pub fn config(addr: Ipv4Addr, last: u8) -> StackConfig {
    StackConfig {
        addr,
        prefix_len: 24,
        mac: EthernetAddress([2, 0, 0, 0, 0, last]),
        tcp_secret: netfold::tcp::Secret::fixed_for_tests([last; 16]),
        ..StackConfig::default()
    }
}

/// Stack `a` on device `ea`, stack `b` on device `eb`, and the virtual clock both run on. The
/// fields are public: tests reach into the stacks and devices between polls.
pub struct Net<D = PipeEnd> {
    pub a: Stack,
    pub b: Stack,
    pub ea: D,
    pub eb: D,
    pub now: Instant,
}

impl Net<PipeEnd> {
    /// Stacks for `a` and `b` joined by an in-memory pipe configured by `link`, at time zero.
    pub fn pipe(a: StackConfig, b: StackConfig, link: PipeConfig) -> Net {
        let (ea, eb) = Pipe::new(link);
        Net::new(Stack::new(a), Stack::new(b), ea, eb)
    }
}

impl<D: Device> Net<D> {
    /// The two stacks on their devices, at time zero.
    pub fn new(a: Stack, b: Stack, ea: D, eb: D) -> Net<D> {
        Net {
            a,
            b,
            ea,
            eb,
            now: Instant::ZERO,
        }
    }

    /// Polls both stacks once at the current time (both, always); whether either did work.
    pub fn poll(&mut self) -> bool {
        let x = self.a.poll(self.now, &mut self.ea);
        let y = self.b.poll(self.now, &mut self.eb);
        x || y
    }

    /// The earliest deadline either stack has (a retransmission, a delayed ACK, a probe).
    pub fn next_deadline(&self) -> Option<Instant> {
        [self.a.poll_at(self.now), self.b.poll_at(self.now)]
            .into_iter()
            .flatten()
            .min()
    }

    /// One event-driven step: polls both, then advances 1 us if anything happened, else jumps
    /// to the next deadline (at least 1 us, so time always moves). Returns whether work was
    /// done. Allocates nothing (the zero-allocation test runs on it).
    pub fn step(&mut self) -> bool {
        let did = self.poll();
        self.now = if did {
            self.now + Duration::from_micros(1)
        } else {
            self.next_deadline()
                .unwrap_or(self.now)
                .max(self.now + Duration::from_micros(1))
        };
        did
    }

    /// Polls both stacks until neither has work, advancing virtual time 100 us per busy round
    /// (bounded: 10 000 rounds, one virtual second).
    pub fn settle(&mut self) {
        for _ in 0..10_000 {
            if !self.poll() {
                return;
            }
            self.now += Duration::from_micros(100);
        }
    }

    /// Polls both stacks at the current instant until neither does any work; panics if they
    /// are still busy after 100 rounds (frames bouncing forever would be a bug).
    pub fn quiesce(&mut self) {
        for _ in 0..100 {
            if !self.poll() {
                return;
            }
        }
        panic!("link did not settle");
    }

    /// Jumps virtual time to the earliest deadline either stack has (at least 1 us ahead).
    pub fn skip_to_next_timer(&mut self) {
        if let Some(t) = self.next_deadline() {
            self.now = t.max(self.now + Duration::from_micros(1));
        }
    }

    /// Advances virtual time by `d` in 1 ms steps, settling at each.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.settle();
            self.now += Duration::from_millis(1);
        }
    }
}
