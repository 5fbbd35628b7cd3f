//! An in-memory point-to-point link: [`Pipe::new`] returns two [`PipeEnd`]s, each a [`Device`].
//! Whatever one end sends, the other end receives, after the link's impairments (loss,
//! duplication, reordering, corruption, one-way delay, serialisation rate) have been applied.
//!
//! # Queues and locking
//!
//! Each direction is a bounded single-producer single-consumer queue behind one
//! `Mutex<VecDeque<_>>`. A lock-free ring would need `unsafe` (lib.rs denies it outside `mem`),
//! so instead the lock is amortised the way the OLS 2002 study amortises per-packet work: every
//! `send_batch` and every `recv_batch` takes the direction's lock exactly ONCE for the whole
//! batch. Measured (release build, 64-byte frames, one send + one recv + pool get/put per
//! frame, 2-core shared machine, single runs so read as ratios): one thread driving both ends
//! costs 66 ns/frame at burst 1, 28 at burst 4, 21 at bursts 32 and 64; a sender and a receiver
//! on two threads cost 276 ns/frame at burst 1 and 49 at burst 32, the lock (and its cache
//! line) being paid once per batch instead of once per frame.
//! Storage for the queues is reserved up front (`capacity` entries), so steady state does not
//! allocate.
//!
//! # Buffer recycling across the link (the OLS 2002 study)
//!
//! A frame's [`PacketBuf`] moves to the peer: the sender's pool loses a buffer and the
//! receiver's pool (once the receiving stack is done with the frame) gains one. To keep a
//! one-directional bulk transfer allocation-free each direction also carries buffers BACK: in
//! `recv_batch` the receiving end moves the idle buffers of its pool beyond a reserve of
//! `2 * max_burst` into the direction's return queue, and in `send_batch` the sending end pulls
//! up to as many returned buffers as it is sending into its own pool.
//!
//! # Impairments
//!
//! All random decisions of one direction come from ONE seeded [`SplitMix64`] owned by that
//! direction's sending end, so a run is reproducible from `PipeConfig::seed`. Per frame, in this
//! order: size check, loss, corruption, duplication (the copy carries the same corruption), then
//! per copy: capacity check and reordering. Lost and oversize frames do not occupy the
//! transmitter; every copy that goes on the link does. Delay and rate decide when a copy becomes
//! deliverable. A reordered copy waits in a holding area until `1..=reorder_gap` later
//! (not themselves held) frames have been queued, or until `reorder_timeout` after it would have
//! been deliverable, whichever comes first. Time is virtual: it is the `now` given to `send_batch` and
//! `recv_batch`, and [`Device::poll_at`] on the receiving end tells when the next held frame
//! becomes deliverable.
//!
//! # Sleeping receivers
//!
//! A thread that drives one end can sleep when it runs out of work instead of busy-polling
//! ([`Device::wake_on_rx`]): it arms its receiving direction with a [`Waker`], polls once more,
//! and sleeps. The arm is one flag per direction, so the sender pays nothing on the fast path
//! but a load of that flag per `send_batch`, and a wake-up (a futex or a socket write,
//! whatever the waker does) only when the receiver actually sleeps. The flag and the queue's
//! frame count are a Dekker pair: the receiver stores the flag, then reads the count (in the
//! poll after arming); the sender stores the count, then reads the flag; a sequentially
//! consistent fence between each store and load guarantees that at least one of them sees the
//! other's store, so a frame is never sent to a sleeper unannounced.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use crate::buf::{Csum, Frags, PacketBuf, Pool};
use crate::phy::{ChecksumCaps, Device, DeviceCaps, Medium};
use crate::time::{Duration, Instant};
use crate::wire::ethernet::EthernetFrame;
use crate::wire::ipv4::{Ecn, Ipv4Packet};

/// Largest IPv4 packet (RFC 791 §3.1: Total Length is 16 bits): what a TSO super-segment may
/// reach before the link header.
const TSO_MAX_IP_LEN: usize = crate::wire::ipv4::MAX_PACKET_LEN;

/// A small deterministic PRNG (SplitMix64, Steele/Lea/Flood 2014): one 64-bit add and a
/// mixing function per draw. Good enough statistically for impairment decisions, and no
/// dependency on the `rand` crate.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)` built from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `true` with probability `p`. Draws nothing when `p <= 0` so that a disabled impairment
    /// does not shift the random sequence of the enabled ones.
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.next_f64() < p
    }

    /// A uniform integer in `0..n` (`0` when `n == 0`). Multiply-high keeps the bias below
    /// 2^-32 for the small ranges used here.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Link impairments of one direction (both directions use the same settings, each with its
/// own random stream). Probabilities are clamped to `[0, 1]`; NaN counts as 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impairments {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a frame is delivered twice (the copy comes from the sender's pool).
    pub duplicate: f64,
    /// Probability that a frame is held back and delivered after later ones.
    pub reorder: f64,
    /// A held frame is released after `1..=reorder_gap` later frames (at least 1).
    pub reorder_gap: u32,
    /// ... or, if that much traffic does not come, this long after it would have been
    /// deliverable, so a held frame is never stranded.
    pub reorder_timeout: Duration,
    /// Probability that one random bit of one random byte after the link header is flipped.
    pub corrupt: f64,
    /// Fixed one-way latency.
    pub delay: Duration,
    /// Serialisation rate in bits per second; 0 means unlimited.
    pub rate_bps: u64,
    /// Probability that a frame meets congestion at an ECN-capable queue (RFC 3168 §5, an
    /// AQM): an IPv4 packet marked ECT(0)/ECT(1) gets CE instead (header checksum refreshed)
    /// and goes on; a Not-ECT one is dropped, as such a router would drop it. Frames that are
    /// not IPv4 pass. Decided after `loss`.
    pub ecn_mark: f64,
}

impl Impairments {
    /// A perfect link.
    pub const fn none() -> Self {
        Impairments {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_gap: 1,
            reorder_timeout: Duration::from_millis(1),
            corrupt: 0.0,
            delay: Duration::ZERO,
            rate_bps: 0,
            ecn_mark: 0.0,
        }
    }
    /// A perfect link: nothing dropped, duplicated, held, corrupted, marked, delayed or
    /// rate-limited (the frames go straight through; see `PipeEnd::send_batch`).
    pub fn is_none(&self) -> bool {
        self.loss <= 0.0
            && self.duplicate <= 0.0
            && self.reorder <= 0.0
            && self.corrupt <= 0.0
            && self.ecn_mark <= 0.0
            && self.delay == Duration::ZERO
            && self.rate_bps == 0
    }
    pub fn loss(mut self, p: f64) -> Self {
        self.loss = clamp_probability(p);
        self
    }
    pub fn duplicate(mut self, p: f64) -> Self {
        self.duplicate = clamp_probability(p);
        self
    }
    pub fn reorder(mut self, p: f64) -> Self {
        self.reorder = clamp_probability(p);
        self
    }
    pub fn reorder_gap(mut self, frames: u32) -> Self {
        self.reorder_gap = frames.max(1);
        self
    }
    pub fn reorder_timeout(mut self, t: Duration) -> Self {
        self.reorder_timeout = t;
        self
    }
    pub fn corrupt(mut self, p: f64) -> Self {
        self.corrupt = clamp_probability(p);
        self
    }
    pub fn ecn_mark(mut self, p: f64) -> Self {
        self.ecn_mark = clamp_probability(p);
        self
    }
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
    pub fn rate(mut self, bits_per_second: u64) -> Self {
        self.rate_bps = bits_per_second;
        self
    }

    /// The same settings with every probability clamped (fields are public, so they may have
    /// been set to anything).
    fn sanitized(mut self) -> Self {
        self.loss = clamp_probability(self.loss);
        self.duplicate = clamp_probability(self.duplicate);
        self.reorder = clamp_probability(self.reorder);
        self.corrupt = clamp_probability(self.corrupt);
        self.ecn_mark = clamp_probability(self.ecn_mark);
        self.reorder_gap = self.reorder_gap.max(1);
        self
    }
}

impl Default for Impairments {
    fn default() -> Self {
        Impairments::none()
    }
}

fn clamp_probability(p: f64) -> f64 {
    if p.is_nan() {
        0.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

/// How a [`Pipe`] is built. Builder-style: `PipeConfig::default().mtu(9000).loss(0.01).seed(7)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PipeConfig {
    /// IP MTU (the link header comes on top).
    pub mtu: usize,
    pub medium: Medium,
    pub checksum: ChecksumCaps,
    /// TSO mode: frames up to 64 KiB plus link header are carried whole, and both ends report
    /// `gro = true` so the receiving stack accepts the super-segments.
    pub tso: bool,
    /// Frames in flight per direction (queued, delayed or held for reordering).
    pub capacity: usize,
    pub impairments: Impairments,
    pub seed: u64,
    /// Burst size reported in [`DeviceCaps::max_burst`]; also sizes the recycling reserve.
    pub max_burst: usize,
    /// Scatter-gather transmit ([`Device::scatter_gather`]): frames may carry fragments, which
    /// the sending end copies into the frame as it goes on the link (what a NIC's DMA would
    /// read; counted in [`PipeStats::sg_bytes`], not by the stack). For tests of zero-copy send
    /// without a TAP; off by default.
    pub scatter_gather: bool,
    /// Receivers may sleep ([`Device::wake_on_rx`], see "Sleeping receivers"). Each
    /// `send_batch` then pays a sequentially consistent fence to announce its frames to a
    /// sleeper (~5% of a TCP_RR transaction on the in-memory link, measured). A pipe whose two
    /// ends are polled by one thread, or by threads that never sleep, has no sleeper to wake:
    /// `false` drops the fence, and `wake_on_rx` then reports that the pipe cannot wake
    /// anyone. On by default.
    pub wakeups: bool,
}

impl Default for PipeConfig {
    fn default() -> Self {
        PipeConfig {
            mtu: 1500,
            medium: Medium::Ethernet,
            checksum: ChecksumCaps::default(),
            tso: false,
            capacity: 1024,
            impairments: Impairments::none(),
            seed: 0,
            max_burst: DeviceCaps::default().max_burst,
            scatter_gather: false,
            wakeups: true,
        }
    }
}

impl PipeConfig {
    pub fn mtu(mut self, mtu: usize) -> Self {
        self.mtu = mtu;
        self
    }
    pub fn medium(mut self, medium: Medium) -> Self {
        self.medium = medium;
        self
    }
    pub fn checksum(mut self, caps: ChecksumCaps) -> Self {
        self.checksum = caps;
        self
    }
    pub fn tso(mut self, on: bool) -> Self {
        self.tso = on;
        self
    }
    pub fn capacity(mut self, frames: usize) -> Self {
        self.capacity = frames;
        self
    }
    pub fn impairments(mut self, imp: Impairments) -> Self {
        self.impairments = imp;
        self
    }
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    pub fn max_burst(mut self, frames: usize) -> Self {
        self.max_burst = frames;
        self
    }
    pub fn scatter_gather(mut self, on: bool) -> Self {
        self.scatter_gather = on;
        self
    }
    pub fn loss(mut self, p: f64) -> Self {
        self.impairments = self.impairments.loss(p);
        self
    }
    pub fn duplicate(mut self, p: f64) -> Self {
        self.impairments = self.impairments.duplicate(p);
        self
    }
    pub fn reorder(mut self, p: f64) -> Self {
        self.impairments = self.impairments.reorder(p);
        self
    }
    pub fn corrupt(mut self, p: f64) -> Self {
        self.impairments = self.impairments.corrupt(p);
        self
    }
    pub fn ecn_mark(mut self, p: f64) -> Self {
        self.impairments = self.impairments.ecn_mark(p);
        self
    }
    pub fn delay(mut self, d: Duration) -> Self {
        self.impairments = self.impairments.delay(d);
        self
    }
    pub fn rate(mut self, bits_per_second: u64) -> Self {
        self.impairments = self.impairments.rate(bits_per_second);
        self
    }

    /// Length of the link header of `frame` on this medium: 14 for Ethernet, 18 when the frame
    /// carries an 802.1Q tag, 0 for bare IP.
    fn link_header_len(&self, frame: &[u8]) -> usize {
        match self.medium {
            Medium::Ip => 0,
            // The view reads the EtherType only when the frame holds it (a shorter frame counts
            // as untagged).
            Medium::Ethernet => EthernetFrame::new_unchecked(frame).header_len(),
        }
    }

    /// Largest frame (link header included) the link carries.
    fn max_frame_len(&self, frame: &[u8]) -> usize {
        let ip = if self.tso {
            self.mtu.max(TSO_MAX_IP_LEN)
        } else {
            self.mtu
        };
        ip.saturating_add(self.link_header_len(frame))
    }
}

/// Counters of one [`PipeEnd`]. Transmit-side counters describe frames this end sent;
/// `delivered`/`bytes_delivered` describe frames this end received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipeStats {
    /// Frames offered to `send_batch`.
    pub sent: u64,
    /// Frames handed out by `recv_batch`.
    pub delivered: u64,
    /// Frames dropped by the loss impairment.
    pub dropped_loss: u64,
    /// ECT frames marked CE, and Not-ECT frames dropped, by the `ecn_mark` impairment.
    pub ecn_marked: u64,
    pub ecn_dropped: u64,
    /// Frames (or duplicate copies) dropped because the direction already had `capacity`
    /// frames in flight.
    pub dropped_full: u64,
    /// Frames dropped for exceeding MTU + link header.
    pub dropped_oversize: u64,
    /// Extra copies made by the duplication impairment.
    pub duplicated: u64,
    /// Frames (copies) held back for reordering.
    pub reordered: u64,
    /// Frames with one bit flipped.
    pub corrupted: u64,
    /// Bytes of the frames offered to `send_batch`.
    pub bytes: u64,
    /// Bytes of the frames handed out by `recv_batch`.
    pub bytes_delivered: u64,
    /// Buffers the peer sent back that this end put into its pool.
    pub recycled: u64,
    /// Frames that came with fragments (scatter-gather), and the fragment bytes the link
    /// copied into them.
    pub sg_frames: u64,
    pub sg_bytes: u64,
}

/// A frame on the link and the time it becomes deliverable.
#[derive(Debug)]
struct InFlight {
    buf: PacketBuf,
    ready_at: Instant,
}

/// A frame held back by the reorder impairment.
#[derive(Debug)]
struct Held {
    frame: InFlight,
    /// Later frames still to be queued before this one is released.
    after: u32,
    /// Released at this time even if no later frame comes.
    deadline: Instant,
}

/// The state of one direction shared by its sender and receiver, behind one lock.
#[derive(Debug)]
struct Link {
    /// Deliverable in order; `ready_at` is non-decreasing front to back.
    queue: VecDeque<InFlight>,
    /// Frames held for reordering, oldest first.
    held: VecDeque<Held>,
    /// Buffers travelling back from the receiver's pool to the sender's.
    returns: Vec<PacketBuf>,
    capacity: usize,
}

impl Link {
    fn new(capacity: usize) -> Self {
        Link {
            queue: VecDeque::with_capacity(capacity),
            held: VecDeque::with_capacity(capacity.min(1024)),
            returns: Vec::with_capacity(capacity),
            capacity,
        }
    }

    fn in_flight(&self) -> usize {
        self.queue.len() + self.held.len()
    }

    fn is_full(&self) -> bool {
        self.in_flight() >= self.capacity
    }

    /// Appends a frame to the deliverable queue, never earlier than the frame before it (a
    /// FIFO link cannot overtake), then releases held frames whose turn has come.
    fn enqueue(&mut self, mut frame: InFlight) {
        self.push_back(&mut frame);
        let ready_at = frame.ready_at;
        self.queue.push_back(frame);
        let mut i = 0;
        while i < self.held.len() {
            let h = &mut self.held[i];
            h.after = h.after.saturating_sub(1);
            if h.after == 0 {
                if let Some(mut h) = self.held.remove(i) {
                    h.frame.ready_at = h.frame.ready_at.max(ready_at);
                    self.queue.push_back(h.frame);
                }
            } else {
                i += 1;
            }
        }
    }

    fn push_back(&self, frame: &mut InFlight) {
        if let Some(last) = self.queue.back() {
            frame.ready_at = frame.ready_at.max(last.ready_at);
        }
    }

    /// Releases held frames whose deadline has passed (no later traffic came to overtake).
    fn release_expired(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].deadline <= now {
                if let Some(h) = self.held.remove(i) {
                    let mut frame = h.frame;
                    self.push_back(&mut frame);
                    self.queue.push_back(frame);
                }
            } else {
                i += 1;
            }
        }
    }

    /// When the receiver next has something to take: the front of the queue, or the earliest
    /// held frame's deadline.
    fn next_ready(&self) -> Option<Instant> {
        let front = self.queue.front().map(|f| f.ready_at);
        let held = self.held.iter().map(|h| h.deadline).min();
        match (front, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// One direction of the pipe.
#[derive(Debug)]
struct Direction {
    link: Mutex<Link>,
    /// `Link::in_flight()` as of the last unlock by either end: lets the receiving end see an
    /// empty direction without taking the lock (two-thread runs poll an empty pipe millions of
    /// times a second, and every lock bounces the cache line to the sender's core). Updated
    /// under the lock; read without it, so a stale value only delays a frame by one poll.
    in_flight: AtomicUsize,
    /// The receiving end is (about to be) asleep and wants [`Direction::waker`] woken when
    /// frames come (see "Sleeping receivers" above).
    armed: AtomicBool,
    /// What a sender wakes; only touched when arming and when waking, never per frame.
    waker: Mutex<Option<Waker>>,
}

impl Direction {
    fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Direction {
            link: Mutex::new(Link::new(capacity)),
            in_flight: AtomicUsize::new(0),
            armed: AtomicBool::new(false),
            waker: Mutex::new(None),
        })
    }

    /// Receiver side: arms (`Some`) or disarms (`None`) the wake-up.
    fn set_waker(&self, waker: Option<&Waker>) {
        let Some(w) = waker else {
            self.armed.store(false, Ordering::Relaxed);
            return;
        };
        {
            let mut slot = self.waker.lock().unwrap_or_else(|e| e.into_inner());
            if !slot.as_ref().is_some_and(|old| old.will_wake(w)) {
                *slot = Some(w.clone());
            }
        }
        self.armed.store(true, Ordering::Relaxed);
        // Orders the flag before the frame count the receiver reads next (Dekker, above).
        fence(Ordering::SeqCst);
    }

    /// Sender side, after queueing frames (and publishing `in_flight`) with the link lock
    /// released: wakes an armed receiver, once.
    fn wake_receiver(&self) {
        // Orders the published frame count before the flag (Dekker, above).
        fence(Ordering::SeqCst);
        if !self.armed.load(Ordering::Relaxed) || !self.armed.swap(false, Ordering::AcqRel) {
            return;
        }
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The lock, even if the other end panicked while holding it: the queue's invariants hold
    /// between statements, so a poisoned lock still guards a usable queue.
    fn lock(&self) -> MutexGuard<'_, Link> {
        self.link.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Namespace for [`Pipe::new`].
#[derive(Debug)]
pub struct Pipe;

impl Pipe {
    /// A link and its two ends. The ends are `Send`: each may live on its own thread.
    // `Pipe::new` returning the pair is the agreed API: a pipe only exists as its two ends.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(config: PipeConfig) -> (PipeEnd, PipeEnd) {
        let mut config = config;
        config.impairments = config.impairments.sanitized();
        config.capacity = config.capacity.max(1);
        config.max_burst = config.max_burst.max(1);
        let a_to_b = Direction::new(config.capacity);
        let b_to_a = Direction::new(config.capacity);
        // Two independent streams from one seed: the direction index is mixed in.
        let mut seeder = SplitMix64::new(config.seed);
        let rng_a = SplitMix64::new(seeder.next_u64());
        let rng_b = SplitMix64::new(seeder.next_u64());
        let a = PipeEnd::new(config, a_to_b.clone(), b_to_a.clone(), rng_a);
        let b = PipeEnd::new(config, b_to_a, a_to_b, rng_b);
        (a, b)
    }
}

/// One end of a [`Pipe`].
#[derive(Debug)]
pub struct PipeEnd {
    config: PipeConfig,
    tx: Arc<Direction>,
    rx: Arc<Direction>,
    /// Random stream of the direction this end sends on.
    rng: SplitMix64,
    /// When the transmitter finishes serialising the last frame (rate limiting).
    tx_busy_until: Instant,
    /// Serialisation time not yet counted in `tx_busy_until`, in units of 1/rate µs (the
    /// clock ticks in whole microseconds; a 1514-byte frame at 1 Gbit/s takes 12.112 µs, and
    /// rounding each frame up to 13 µs made the link 7% slower than its rate).
    tx_carry: u128,
    stats: PipeStats,
    /// `config.impairments.is_none()`, fixed at creation.
    clean: bool,
}

impl PipeEnd {
    fn new(config: PipeConfig, tx: Arc<Direction>, rx: Arc<Direction>, rng: SplitMix64) -> Self {
        let clean = config.impairments.is_none();
        PipeEnd {
            config,
            tx,
            rx,
            rng,
            tx_busy_until: Instant::ZERO,
            tx_carry: 0,
            stats: PipeStats::default(),
            clean,
        }
    }

    pub fn stats(&self) -> PipeStats {
        self.stats
    }

    pub fn config(&self) -> &PipeConfig {
        &self.config
    }

    /// Frames this end could still send before the outgoing direction is full. A sender that
    /// must not lose frames (a test, a benchmark) uses this for back-pressure.
    pub fn tx_space(&self) -> usize {
        let link = self.tx.lock();
        link.capacity.saturating_sub(link.in_flight())
    }

    /// Frames travelling towards this end (deliverable or not yet).
    pub fn rx_pending(&self) -> usize {
        self.rx.lock().in_flight()
    }

    /// Serialisation time of `len` bytes at the configured rate, rounded up to a microsecond.
    #[cfg(test)]
    fn serialisation_time(&self, len: usize) -> Duration {
        let rate = u128::from(self.config.impairments.rate_bps);
        if rate == 0 {
            return Duration::ZERO;
        }
        let bits = (len as u128).saturating_mul(8);
        let micros = (bits * 1_000_000).div_ceil(rate);
        Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    /// When a frame of `len` bytes handed over at `now` is deliverable: the transmitter first
    /// finishes the frames before it, then serialises this one, then the link adds its delay.
    /// Back-to-back frames carry the sub-microsecond remainder of their serialisation time
    /// forward, so a busy link runs at exactly its rate.
    fn schedule(&mut self, now: Instant, len: usize) -> Instant {
        let rate = u128::from(self.config.impairments.rate_bps);
        if self.tx_busy_until < now {
            // Idle link: the remainder of the last burst is lost time, not owed time.
            self.tx_busy_until = now;
            self.tx_carry = 0;
        }
        let owed = (len as u128).saturating_mul(8).saturating_mul(1_000_000) + self.tx_carry;
        if let (Some(q), Some(r)) = (owed.checked_div(rate), owed.checked_rem(rate)) {
            self.tx_carry = r;
            self.tx_busy_until += Duration::from_micros(u64::try_from(q).unwrap_or(u64::MAX));
        }
        self.tx_busy_until + self.config.impairments.delay
    }

    /// Flips one random bit in one random byte after the link header (the whole frame when it
    /// is no longer than the header). The model is corruption that a link FCS would not see
    /// (host memory, a buggy middlebox), which the IPv4/TCP/UDP checksums must catch: any
    /// single-bit error changes the RFC 1071 one's-complement sum.
    fn corrupt(&mut self, frame: &mut [u8]) {
        if frame.is_empty() {
            return;
        }
        let header = self.config.link_header_len(frame);
        let from = if frame.len() > header { header } else { 0 };
        let span = (frame.len() - from) as u64;
        let at = from + self.rng.below(span) as usize;
        let bit = self.rng.below(8) as u32;
        if let Some(b) = frame.get_mut(at) {
            *b ^= 1u8 << bit;
        }
    }

    /// Congestion at an ECN-capable queue (RFC 3168 §5): an ECT IPv4 packet is marked CE and
    /// its header checksum refreshed (`true`, it goes on); a Not-ECT one must be dropped
    /// (`false`). A frame that is not IPv4 is left alone (`true`).
    fn ecn_mark(&mut self, frame: &mut [u8]) -> bool {
        let header = self.config.link_header_len(frame);
        let is_ipv4 = match self.config.medium {
            Medium::Ip => true,
            Medium::Ethernet => {
                header >= 2 && frame.get(header - 2..header) == Some(&[0x08, 0x00][..])
            }
        };
        let Some(ip) = frame.get_mut(header..).filter(|_| is_ipv4) else {
            return true;
        };
        let Ok(mut pkt) = Ipv4Packet::new_checked(ip) else {
            return true;
        };
        if !pkt.ecn().is_ect() {
            return false;
        }
        pkt.set_ecn(Ecn::Ce);
        pkt.fill_checksum();
        self.stats.ecn_marked += 1;
        true
    }

    /// Puts one copy on the link: reorder decision, capacity check, queueing.
    fn transmit(&mut self, link: &mut Link, pool: &mut Pool, buf: PacketBuf, ready_at: Instant) {
        if link.is_full() {
            self.stats.dropped_full += 1;
            pool.put(buf);
            return;
        }
        let frame = InFlight { buf, ready_at };
        let imp = self.config.impairments;
        if self.rng.chance(imp.reorder) {
            self.stats.reordered += 1;
            let after = 1 + self.rng.below(u64::from(imp.reorder_gap)) as u32;
            link.held.push_back(Held {
                deadline: ready_at + imp.reorder_timeout,
                after,
                frame,
            });
        } else {
            link.enqueue(frame);
        }
    }
}

impl PipeEnd {
    /// `recv_batch` past its lock-free "nothing here" test, out of line so that the test (most
    /// polls of a request/response exchange) costs a few instructions.
    #[inline(never)]
    fn recv_batch_locked(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
        reserve: usize,
    ) -> usize {
        let mut link = self.rx.lock();
        // Recycling first (the OLS 2002 study): surplus idle buffers go back to the sender.
        while pool.idle() > reserve && link.returns.len() < link.capacity {
            link.returns.push(pool.get());
        }
        link.release_expired(now);
        let mut n = 0;
        while n < max {
            match link.queue.front() {
                Some(f) if f.ready_at <= now => {}
                _ => break,
            }
            let Some(f) = link.queue.pop_front() else {
                break;
            };
            self.stats.delivered += 1;
            self.stats.bytes_delivered += f.buf.len() as u64;
            let mut buf = f.buf;
            // A link carries bytes, not what the sender knew about them: the receiving end
            // says per frame whether its checksums still need a check (Linux: a driver sets
            // `ip_summed`). A pipe configured without receive checksums is a link that
            // guarantees them (offload mode), so its frames arrive verified.
            buf.set_csum(if self.config.checksum.rx {
                Csum::Unverified
            } else {
                Csum::Verified
            });
            out.push(buf);
            n += 1;
        }
        self.rx.in_flight.store(link.in_flight(), Ordering::Release);
        n
    }

    /// `poll_at` past its lock-free "nothing in flight" test, out of line as
    /// `recv_batch_locked` is: the stack asks after every poll, most often with nothing in
    /// flight towards it.
    #[inline(never)]
    fn poll_at_locked(&self) -> Option<Instant> {
        self.rx.lock().next_ready()
    }

    /// `send_batch` on a perfect link: what the general path does when every impairment is
    /// off (no random draws, no serialisation arithmetic, no held frames to release, no
    /// reference count taken on the direction), which is most of a request/response
    /// exchange's link cost (callgrind, `netfold rr`: ~290 -> ~120 instructions a batch).
    fn send_batch_clean(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        let queued = !frames.is_empty();
        // Field by field: the lock guard borrows `tx` while the counters change.
        let PipeEnd {
            config,
            tx,
            stats,
            tx_busy_until,
            ..
        } = self;
        // The general path's `schedule` keeps this (the link's clock) for rate limiting.
        *tx_busy_until = (*tx_busy_until).max(now);
        let mut link = tx.lock();
        let want = frames.len().min(link.returns.len());
        for _ in 0..want {
            if let Some(b) = link.returns.pop() {
                pool.put(b);
                stats.recycled += 1;
            }
        }
        for buf in frames.drain(..) {
            stats.sent += 1;
            stats.bytes += buf.len() as u64;
            if buf.len() > config.max_frame_len(buf.as_slice()) {
                stats.dropped_oversize += 1;
                pool.put(buf);
                continue;
            }
            if link.is_full() {
                stats.dropped_full += 1;
                pool.put(buf);
                continue;
            }
            link.enqueue(InFlight { buf, ready_at: now });
        }
        tx.in_flight.store(link.in_flight(), Ordering::Release);
        drop(link);
        if queued && config.wakeups {
            tx.wake_receiver();
        }
    }
}

impl Device for PipeEnd {
    fn caps(&self) -> DeviceCaps {
        DeviceCaps {
            medium: self.config.medium,
            mtu: self.config.mtu,
            checksum: self.config.checksum,
            tso: self.config.tso,
            // The pipe carries super-segments whole, so the peer receives them aggregated.
            gro: self.config.tso,
            max_burst: self.config.max_burst,
        }
    }

    fn scatter_gather(&self) -> bool {
        self.config.scatter_gather
    }

    fn send_batch_sg(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        frames: &mut Vec<PacketBuf>,
        frags: &mut Frags,
    ) {
        // Fragments are read here, as a NIC reads them by DMA; the frames then hold no
        // reference to the application's buffers.
        let (n, bytes) = frags.linearize(frames);
        self.stats.sg_frames += n as u64;
        self.stats.sg_bytes += bytes as u64;
        self.send_batch(now, pool, frames);
    }

    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let reserve = 2 * self.config.max_burst;
        if self.rx.in_flight.load(Ordering::Acquire) == 0 && pool.idle() <= reserve {
            return 0;
        }
        self.recv_batch_locked(now, pool, out, max, reserve)
    }

    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        if self.clean {
            self.send_batch_clean(now, pool, frames);
            return;
        }
        let imp = self.config.impairments;
        let tx = Arc::clone(&self.tx);
        let queued = !frames.is_empty();
        let mut link = tx.lock();
        // Recycling: take back as many buffers as we are about to give away.
        let want = frames.len().min(link.returns.len());
        for _ in 0..want {
            if let Some(b) = link.returns.pop() {
                pool.put(b);
                self.stats.recycled += 1;
            }
        }
        link.release_expired(now);
        for mut buf in frames.drain(..) {
            self.stats.sent += 1;
            self.stats.bytes += buf.len() as u64;
            if buf.len() > self.config.max_frame_len(buf.as_slice()) {
                self.stats.dropped_oversize += 1;
                pool.put(buf);
                continue;
            }
            if self.rng.chance(imp.loss) {
                self.stats.dropped_loss += 1;
                pool.put(buf);
                continue;
            }
            if self.rng.chance(imp.ecn_mark) && !self.ecn_mark(buf.as_mut_slice()) {
                self.stats.ecn_dropped += 1;
                pool.put(buf);
                continue;
            }
            if self.rng.chance(imp.corrupt) {
                self.stats.corrupted += 1;
                self.corrupt(buf.as_mut_slice());
            }
            let copy = if self.rng.chance(imp.duplicate) {
                self.stats.duplicated += 1;
                let mut c = pool.get();
                c.extend_from_slice(buf.as_slice());
                Some(c)
            } else {
                None
            };
            let ready_at = self.schedule(now, buf.len());
            self.transmit(&mut link, pool, buf, ready_at);
            if let Some(c) = copy {
                let ready_at = self.schedule(now, c.len());
                self.transmit(&mut link, pool, c, ready_at);
            }
        }
        tx.in_flight.store(link.in_flight(), Ordering::Release);
        drop(link);
        if queued && self.config.wakeups {
            tx.wake_receiver();
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        if self.rx.in_flight.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.poll_at_locked()
    }

    fn wake_on_rx(&mut self, waker: Option<&Waker>) -> bool {
        if !self.config.wakeups {
            return false;
        }
        self.rx.set_waker(waker);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u32, len: usize) -> PacketBuf {
        let mut b = PacketBuf::with_capacity(len);
        let d = b.append(len.max(4));
        d.fill(0xAB);
        d[len.max(4) - 4..].copy_from_slice(&tag.to_be_bytes());
        b
    }

    fn tag(b: &PacketBuf) -> u32 {
        let s = b.as_slice();
        u32::from_be_bytes(s[s.len() - 4..].try_into().unwrap())
    }

    #[test]
    fn splitmix_is_deterministic_and_spreads() {
        let mut a = SplitMix64::new(1);
        let mut b = SplitMix64::new(1);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut r = SplitMix64::new(42);
        let mut buckets = [0u32; 8];
        for _ in 0..8000 {
            buckets[r.below(8) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&c| (800..1200).contains(&c)),
            "{buckets:?}"
        );
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn probabilities_are_clamped() {
        let i = Impairments::none()
            .loss(f64::NAN)
            .duplicate(7.0)
            .reorder(-1.0);
        assert_eq!((i.loss, i.duplicate, i.reorder), (0.0, 1.0, 0.0));
        let raw = Impairments {
            corrupt: 3.0,
            reorder_gap: 0,
            ..Impairments::none()
        };
        let s = raw.sanitized();
        assert_eq!((s.corrupt, s.reorder_gap), (1.0, 1));
    }

    #[test]
    fn link_header_len_by_medium_and_vlan() {
        let eth = PipeConfig::default();
        let mut tagged = [0u8; 20];
        tagged[12] = 0x81;
        assert_eq!(eth.link_header_len(&tagged), 18);
        assert_eq!(eth.link_header_len(&[0u8; 20]), 14);
        assert_eq!(eth.link_header_len(&[0u8; 3]), 14);
        let ip = PipeConfig::default().medium(Medium::Ip);
        assert_eq!(ip.link_header_len(&tagged), 0);
        assert_eq!(eth.max_frame_len(&tagged), 1518);
        assert_eq!(eth.tso(true).max_frame_len(&[0u8; 20]), 65_535 + 14);
    }

    #[test]
    fn serialisation_rounds_up() {
        let (a, _b) = Pipe::new(PipeConfig::default().rate(1_000_000));
        // 1 byte at 1 Mbit/s = 8 us; 1500 bytes = 12 ms.
        assert_eq!(a.serialisation_time(1), Duration::from_micros(8));
        assert_eq!(a.serialisation_time(1500), Duration::from_millis(12));
        let (a, _b) = Pipe::new(PipeConfig::default().rate(3));
        assert_eq!(a.serialisation_time(1), Duration::from_micros(2_666_667));
    }

    #[test]
    fn back_to_back_frames_run_at_exactly_the_rate() {
        let (mut a, _b) = Pipe::new(PipeConfig::default().rate(1_000_000_000));
        let now = Instant::ZERO;
        let mut last = now;
        // 1000 frames of 1514 bytes at 1 Gbit/s: 12.112 us each, 12 112 us in all (rounding
        // each frame up to 13 us would make it 13 000).
        for _ in 0..1000 {
            last = a.schedule(now, 1514);
        }
        assert_eq!(last, now + Duration::from_micros(12_112));
        // After an idle gap the remainder is not owed.
        let later = last + Duration::from_millis(1);
        assert_eq!(a.schedule(later, 1514), later + Duration::from_micros(12));
    }

    #[test]
    fn held_frame_released_by_later_frame_or_timeout() {
        let mut link = Link::new(8);
        let t = Instant::ZERO;
        link.held.push_back(Held {
            frame: InFlight {
                buf: frame(1, 8),
                ready_at: t,
            },
            after: 2,
            deadline: Instant::from_millis(1),
        });
        link.enqueue(InFlight {
            buf: frame(2, 8),
            ready_at: t,
        });
        assert_eq!(link.held.len(), 1);
        link.enqueue(InFlight {
            buf: frame(3, 8),
            ready_at: t,
        });
        let order: Vec<u32> = link.queue.iter().map(|f| tag(&f.buf)).collect();
        assert_eq!(order, [2, 3, 1]);

        link.held.push_back(Held {
            frame: InFlight {
                buf: frame(4, 8),
                ready_at: t,
            },
            after: 5,
            deadline: Instant::from_millis(1),
        });
        assert_eq!(link.next_ready(), Some(t));
        link.queue.clear();
        assert_eq!(link.next_ready(), Some(Instant::from_millis(1)));
        link.release_expired(Instant::from_micros(999));
        assert_eq!(link.held.len(), 1);
        link.release_expired(Instant::from_millis(1));
        assert!(link.held.is_empty());
        assert_eq!(link.queue.len(), 1);
    }

    #[test]
    fn corruption_stays_after_link_header() {
        let (mut a, _b) = Pipe::new(PipeConfig::default());
        for _ in 0..200 {
            let mut f = [0u8; 40];
            a.corrupt(&mut f);
            let flipped: Vec<usize> = (0..40).filter(|&i| f[i] != 0).collect();
            assert_eq!(flipped.len(), 1);
            assert!(flipped[0] >= 14);
            assert_eq!(f[flipped[0]].count_ones(), 1);
        }
        // Shorter than the header: anywhere, still one bit; empty: nothing, no panic.
        let mut short = [0u8; 5];
        a.corrupt(&mut short);
        assert_eq!(short.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        a.corrupt(&mut []);
    }

    /// Counts its wake-ups.
    struct CountingWaker(AtomicUsize);

    impl std::task::Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A pipe without wake-ups refuses to arm (drivers then do not sleep on it) and still
    /// carries every frame, with and without impairments.
    #[test]
    fn pipe_without_wakeups_refuses_to_arm_and_delivers() {
        for impaired in [false, true] {
            let mut cfg = PipeConfig {
                wakeups: false,
                ..PipeConfig::default()
            };
            if impaired {
                cfg.impairments.delay = Duration::from_micros(10);
            }
            let (mut a, mut b) = Pipe::new(cfg);
            let mut pool = Pool::new(64, 16);
            let count = Arc::new(CountingWaker(AtomicUsize::new(0)));
            let waker = Waker::from(Arc::clone(&count));
            assert!(!b.wake_on_rx(Some(&waker)));
            a.send_batch(Instant::ZERO, &mut pool, &mut vec![frame(7, 60)]);
            assert_eq!(count.0.load(Ordering::SeqCst), 0);
            let mut out = Vec::new();
            let later = Instant::ZERO + Duration::from_millis(1);
            assert_eq!(b.recv_batch(later, &mut pool, &mut out, 8), 1);
            assert_eq!(out[0].as_slice(), frame(7, 60).as_slice());
        }
    }

    #[test]
    fn armed_receiver_is_woken_once_per_arm() {
        let (mut a, mut b) = Pipe::new(PipeConfig::default());
        let mut pool = Pool::new(64, 16);
        let count = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let wakes = || count.0.load(Ordering::SeqCst);

        // Not armed: sending wakes nobody.
        a.send_batch(Instant::ZERO, &mut pool, &mut vec![frame(0, 60)]);
        assert_eq!(wakes(), 0);

        // Armed: the next send wakes, once; later sends do not until re-armed.
        assert!(b.wake_on_rx(Some(&waker)));
        a.send_batch(Instant::ZERO, &mut pool, &mut vec![frame(1, 60)]);
        assert_eq!(wakes(), 1);
        a.send_batch(Instant::ZERO, &mut pool, &mut vec![frame(2, 60)]);
        assert_eq!(wakes(), 1);

        // An empty batch queues nothing and wakes nobody.
        assert!(b.wake_on_rx(Some(&waker)));
        a.send_batch(Instant::ZERO, &mut pool, &mut Vec::new());
        assert_eq!(wakes(), 1);

        // Disarmed: no wake-up. Sending the other way never wakes this direction's waker.
        assert!(b.wake_on_rx(None));
        a.send_batch(Instant::ZERO, &mut pool, &mut vec![frame(3, 60)]);
        b.send_batch(Instant::ZERO, &mut pool, &mut vec![frame(4, 60)]);
        assert_eq!(wakes(), 1);

        let mut out = Vec::new();
        assert_eq!(b.recv_batch(Instant::ZERO, &mut pool, &mut out, 64), 4);
    }

    #[test]
    fn sleeping_thread_is_woken_by_a_send_from_another_thread() {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let (mut a, mut b) = Pipe::new(PipeConfig::default());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let receiver = std::thread::spawn(move || {
            let mut pool = Pool::new(64, 16);
            let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
            let mut out = Vec::new();
            let start = std::time::Instant::now();
            let mut sleeps = 0u32;
            ready_tx.send(()).unwrap();
            // Arm, check once more, sleep: the protocol `Device::wake_on_rx` documents. The
            // timeout only keeps a broken wake-up from hanging the test.
            while b.recv_batch(Instant::ZERO, &mut pool, &mut out, 64) == 0 {
                b.wake_on_rx(Some(&waker));
                if b.recv_batch(Instant::ZERO, &mut pool, &mut out, 64) > 0 {
                    break;
                }
                sleeps += 1;
                std::thread::park_timeout(std::time::Duration::from_secs(10));
            }
            b.wake_on_rx(None);
            (out.len(), start.elapsed(), sleeps)
        });
        ready_rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut pool = Pool::new(64, 16);
        a.send_batch(Instant::ZERO, &mut pool, &mut vec![frame(7, 60)]);
        let (got, waited, sleeps) = receiver.join().unwrap();
        assert_eq!(got, 1);
        // Woken by the send, not by the 10 s safety timeout.
        assert!(
            waited < std::time::Duration::from_secs(5),
            "{waited:?} {sleeps}"
        );
    }

    #[test]
    fn full_queue_drops_and_counts() {
        let (mut a, mut b) = Pipe::new(PipeConfig::default().capacity(4));
        let mut pool = Pool::new(64, 16);
        let mut frames: Vec<PacketBuf> = (0..6).map(|i| frame(i, 60)).collect();
        a.send_batch(Instant::ZERO, &mut pool, &mut frames);
        assert!(frames.is_empty());
        assert_eq!(a.stats().dropped_full, 2);
        assert_eq!(a.tx_space(), 0);
        assert_eq!(b.rx_pending(), 4);
        let mut out = Vec::new();
        assert_eq!(b.recv_batch(Instant::ZERO, &mut pool, &mut out, 64), 4);
        let tags: Vec<u32> = out.iter().map(tag).collect();
        assert_eq!(tags, [0, 1, 2, 3]);
        // Dropped buffers went back to the sender's pool.
        assert_eq!(pool.stats().puts, 2);
    }

    #[test]
    fn oversize_frames_dropped_unless_tso() {
        let mut pool = Pool::new(64, 16);
        for (tso, medium, len, dropped) in [
            (false, Medium::Ethernet, 1514, 0),
            (false, Medium::Ethernet, 1515, 1),
            (false, Medium::Ip, 1500, 0),
            (false, Medium::Ip, 1501, 1),
            (true, Medium::Ethernet, 65_535 + 14, 0),
            (true, Medium::Ethernet, 65_535 + 15, 1),
        ] {
            let cfg = PipeConfig::default().tso(tso).medium(medium);
            let (mut a, b) = Pipe::new(cfg);
            assert_eq!(b.caps().gro, tso);
            let mut f = vec![frame(0, len)];
            a.send_batch(Instant::ZERO, &mut pool, &mut f);
            assert_eq!(
                a.stats().dropped_oversize,
                dropped,
                "{tso} {medium:?} {len}"
            );
        }
        // A VLAN-tagged Ethernet frame may be 4 bytes longer.
        let (mut a, _b) = Pipe::new(PipeConfig::default());
        let mut f = frame(0, 1518);
        f.as_mut_slice()[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        a.send_batch(Instant::ZERO, &mut pool, &mut vec![f]);
        assert_eq!(a.stats().dropped_oversize, 0);
    }

    #[test]
    fn frames_arrive_marked_as_the_receiving_caps_say() {
        let mut pool = Pool::new(64, 16);
        let off = ChecksumCaps {
            tx: false,
            rx: false,
        };
        for (caps, want) in [
            (ChecksumCaps::default(), Csum::Unverified),
            (off, Csum::Verified),
        ] {
            let (mut a, mut b) = Pipe::new(PipeConfig::default().checksum(caps));
            // Whatever the sender's buffers said does not cross the link.
            let mut f = frame(1, 60);
            f.set_csum(Csum::Partial {
                start: 34,
                offset: 16,
            });
            let mut g = frame(2, 60);
            g.set_csum(Csum::Verified);
            a.send_batch(Instant::ZERO, &mut pool, &mut vec![f, g, frame(3, 60)]);
            let mut out = Vec::new();
            assert_eq!(b.recv_batch(Instant::ZERO, &mut pool, &mut out, 8), 3);
            for r in &out {
                assert_eq!(r.csum(), want, "{caps:?} frame {}", tag(r));
            }
        }
    }
}
