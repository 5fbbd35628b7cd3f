//! netfold's user-space link emulator: two TAP interfaces joined by a forwarding loop that
//! applies the in-memory link's impairment model ([`netfold::phy::pipe`]: delay, rate, loss,
//! reordering, duplication, corruption, one seeded random stream per direction) to every frame
//! crossing between them. Whatever runs on the kernel side of the two interfaces (the kernel's
//! own TCP, netfold or smoltcp over a packet socket, a VM) sees an impaired Ethernet link.
//!
//! # The loop
//!
//! One thread: read a batch of frames from TAP A (non-blocking `readv` until `EAGAIN` or the
//! burst is full) and hand it to pipe end A in one `send_batch`; the same for B; then take what
//! each pipe end releases at the current wall-clock time (`recv_batch`) and write it to the
//! other TAP. When a round moved nothing, it sleeps in `ppoll(2)` on both descriptors with a
//! timeout equal to the pipe's next release time ([`Device::poll_at`]), so it neither spins
//! while idle nor adds latency to a delayed frame (timer slack is set to 1 µs for the thread).
//!
//! # Offloads
//!
//! The TAPs are opened with checksum and TSO offloads, so the kernel hands over TCP
//! super-frames of up to 64 KiB with partial checksums: one read per 64 KiB.
//!
//! With only a delay (or nothing) to apply, a super-frame crosses the pipe whole and goes out
//! the other TAP marked GSO again ([`vnet::prepare_tx`]), so a loop of a few system calls per
//! 64 KiB keeps up with several Gbit/s. A frame of at most one MTU gets its partial checksum
//! completed on the way in and goes out marked `DATA_VALID`.
//!
//! Per-frame impairments (loss, reordering, duplication, corruption) and a rate must act on
//! wire-sized frames, and corruption must be caught by the receiver's checksum check, so with
//! any of them super-frames are cut in software into MTU-sized segments with complete
//! checksums ([`vnet::gso_split`]), partial checksums are completed, and every frame goes out
//! with an empty vnet header, which makes the receiving kernel (or netfold's packet socket)
//! verify every checksum. That costs one write per wire frame: on the 2-vCPU machine of
//! docs/BENCHMARKS.md the loop then carries about 2 Gbit/s, against 10+ Gbit/s without.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant as WallInstant;

use crate::tap::{read_frame, write_frame, Io, Tap, TapConfig};
use crate::vnet::{self, VnetHdr, VNET_HDR_LEN};
use netfold::buf::{PacketBuf, Pool};
use netfold::phy::pipe::{Impairments, Pipe, PipeConfig, PipeEnd, PipeStats};
use netfold::phy::{Device, Medium};
use netfold::time::Instant;

/// Largest frame a TAP read may return: a 64 KiB IPv4 super-frame plus Ethernet and a VLAN tag.
const MAX_FRAME: usize = 65_535 + 18;
/// Longest idle sleep even with nothing due: how often the stop flag is looked at.
const MAX_SLEEP_US: u64 = 50_000;

/// Whether `imp` needs wire-sized frames (see "Offloads" in the module documentation).
pub fn needs_segments(imp: &Impairments) -> bool {
    imp.loss > 0.0
        || imp.reorder > 0.0
        || imp.duplicate > 0.0
        || imp.corrupt > 0.0
        || imp.rate_bps > 0
}

/// How each TAP of an emulated link with IP MTU `mtu` is opened: offloads on whatever the
/// impairments (see "Offloads" above), unless the stacks on the link have none (smoltcp), in
/// which case the kernel hands over and takes only wire-sized frames.
pub fn tap_config(mtu: usize, offloads: bool) -> TapConfig {
    TapConfig {
        offloads,
        gro: offloads,
        mtu: Some(mtu),
        max_burst: 64,
    }
}

/// Counters of one side (one TAP) of the emulator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SideStats {
    /// Frames read from this TAP (a super-frame counts once).
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Reads that failed or returned a malformed frame.
    pub rx_errors: u64,
    /// Super-frames cut in software, and the segments they became.
    pub rx_split: u64,
    pub rx_segments: u64,
    /// Frames written to this TAP.
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Writes the kernel refused (dropped).
    pub tx_dropped: u64,
}

/// Everything the emulator counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EmuStats {
    pub a: SideStats,
    pub b: SideStats,
    /// Pipe end A's counters: `sent`, `dropped_*`, `duplicated`, ... describe the A-to-B
    /// direction; `delivered` counts frames towards A.
    pub pipe_a: PipeStats,
    pub pipe_b: PipeStats,
    /// Rounds of the loop, and how many of them ended in a sleep.
    pub rounds: u64,
    pub sleeps: u64,
    /// CPU seconds (user + system) the forwarding loop used, and the wall-clock seconds it ran.
    pub cpu_s: f64,
    pub wall_s: f64,
}

impl std::fmt::Display for EmuStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, s, p) in [("A->B", self.a, self.pipe_a), ("B->A", self.b, self.pipe_b)] {
            writeln!(
                f,
                "{name}: read {} frames ({} bytes, {} split into {} segments, {} errors); \
                 link: {} sent, {} lost, {} dropped full, {} oversize, {} duplicated, \
                 {} reordered, {} corrupted",
                s.rx_frames,
                s.rx_bytes,
                s.rx_split,
                s.rx_segments,
                s.rx_errors,
                p.sent,
                p.dropped_loss,
                p.dropped_full,
                p.dropped_oversize,
                p.duplicated,
                p.reordered,
                p.corrupted
            )?;
        }
        for (name, s) in [("A", self.a), ("B", self.b)] {
            writeln!(
                f,
                "written to {name}: {} frames ({} bytes), {} refused",
                s.tx_frames, s.tx_bytes, s.tx_dropped
            )?;
        }
        write!(
            f,
            "loop: {} rounds, {} sleeps, {:.3} CPU s in {:.3} s",
            self.rounds, self.sleeps, self.cpu_s, self.wall_s
        )
    }
}

struct Side {
    tap: Tap,
    end: PipeEnd,
    stats: SideStats,
}

/// Two TAPs and the pipe between them. See the module documentation.
pub struct Emulator {
    a: Side,
    b: Side,
    pool: Pool,
    scratch: Vec<u8>,
    inbox: Vec<PacketBuf>,
    outbox: Vec<PacketBuf>,
    segment: bool,
    mtu: usize,
    burst: usize,
    epoch: WallInstant,
    rounds: u64,
    sleeps: u64,
    cpu_s: f64,
    wall_s: f64,
}

impl Emulator {
    /// Joins TAPs `a` and `b` (opened with [`tap_config`]) by a pipe
    /// with `config`'s impairments, seed, MTU and capacity. The pipe's medium is Ethernet and it
    /// carries super-frames whole.
    pub fn new(a: Tap, b: Tap, config: PipeConfig) -> Emulator {
        let segment = needs_segments(&config.impairments);
        let mtu = config.mtu;
        let burst = 64;
        let (end_a, end_b) = Pipe::new(config.medium(Medium::Ethernet).tso(true).max_burst(burst));
        let side = |tap, end| Side {
            tap,
            end,
            stats: SideStats::default(),
        };
        Emulator {
            a: side(a, end_a),
            b: side(b, end_b),
            pool: Pool::new(mtu + 18, 1024),
            scratch: vec![0u8; MAX_FRAME + 1],
            inbox: Vec::with_capacity(burst * 64),
            outbox: Vec::with_capacity(burst),
            segment,
            mtu,
            burst,
            epoch: WallInstant::now(),
            rounds: 0,
            sleeps: 0,
            cpu_s: 0.0,
            wall_s: 0.0,
        }
    }

    /// The two interfaces' names.
    pub fn names(&self) -> (&str, &str) {
        (self.a.tap.name(), self.b.tap.name())
    }

    pub fn stats(&self) -> EmuStats {
        EmuStats {
            a: self.a.stats,
            b: self.b.stats,
            pipe_a: self.a.end.stats(),
            pipe_b: self.b.end.stats(),
            rounds: self.rounds,
            sleeps: self.sleeps,
            cpu_s: self.cpu_s,
            wall_s: self.wall_s,
        }
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.epoch.elapsed().as_micros() as u64)
    }

    /// Forwards until `stop` is set or `until` passes.
    pub fn run(&mut self, stop: &AtomicBool, until: Option<WallInstant>) -> io::Result<()> {
        let t0 = crate::cpu::sample();
        let r = self.forward(stop, until);
        if let (Some(a), Some(b)) = (t0, crate::cpu::sample()) {
            self.cpu_s += (b.user_s - a.user_s) + (b.sys_s - a.sys_s);
            self.wall_s += b.wall.saturating_duration_since(a.wall).as_secs_f64();
        }
        r
    }

    fn forward(&mut self, stop: &AtomicBool, until: Option<WallInstant>) -> io::Result<()> {
        crate::wait::set_timer_slack_ns(1_000);
        let fds = [self.a.tap.as_raw_fd(), self.b.tap.as_raw_fd()];
        loop {
            if stop.load(Ordering::Relaxed) || until.is_some_and(|u| WallInstant::now() >= u) {
                return Ok(());
            }
            self.rounds += 1;
            let mut worked = false;
            let now = self.now();
            worked |= self.ingest(true, now);
            worked |= self.ingest(false, now);
            let now = self.now();
            worked |= self.deliver(true, now);
            worked |= self.deliver(false, now);
            if worked {
                continue;
            }
            let due = [self.a.end.poll_at(), self.b.end.poll_at()]
                .into_iter()
                .flatten()
                .min();
            let now = self.now();
            let wait_us = due.map_or(MAX_SLEEP_US, |t| {
                t.saturating_since(now).total_micros().min(MAX_SLEEP_US)
            });
            if wait_us == 0 {
                continue;
            }
            self.sleeps += 1;
            crate::wait::wait_readable_any_precise(
                &fds,
                std::time::Duration::from_micros(wait_us),
            )?;
        }
    }

    /// Reads up to a burst of frames from one TAP (`a`: TAP A) into its pipe end.
    fn ingest(&mut self, a: bool, now: Instant) -> bool {
        let side = if a { &mut self.a } else { &mut self.b };
        let mut reads = 0;
        while reads < self.burst {
            let mut hdr = [0u8; VNET_HDR_LEN];
            let n = match read_frame(side.tap.as_fd(), &mut hdr, &mut self.scratch) {
                Io::Done(n) => n,
                Io::WouldBlock => break,
                Io::Failed => {
                    side.stats.rx_errors += 1;
                    break;
                }
            };
            reads += 1;
            let (Some(h), Some(len)) = (VnetHdr::parse(&hdr), n.checked_sub(VNET_HDR_LEN)) else {
                side.stats.rx_errors += 1;
                continue;
            };
            if len > MAX_FRAME {
                side.stats.rx_errors += 1;
                continue;
            }
            side.stats.rx_frames += 1;
            side.stats.rx_bytes += len as u64;
            let frame = &mut self.scratch[..len];
            if h.gso_kind() != vnet::GSO_NONE {
                if self.segment || h.gso_kind() != vnet::GSO_TCPV4 {
                    // Wire-sized frames with complete checksums.
                    let k = vnet::gso_split(
                        frame,
                        usize::from(h.gso_size),
                        &mut self.pool,
                        &mut self.inbox,
                    );
                    if k == 0 {
                        side.stats.rx_errors += 1;
                    } else {
                        side.stats.rx_split += 1;
                        side.stats.rx_segments += k as u64;
                    }
                    continue;
                }
                // Carried whole; its partial checksum is redone on the way out.
            } else if h.flags & vnet::F_NEEDS_CSUM != 0
                && !vnet::complete_partial(
                    frame,
                    usize::from(h.csum_start),
                    usize::from(h.csum_offset),
                )
            {
                side.stats.rx_errors += 1;
                continue;
            }
            let mut b = self.pool.get();
            b.extend_from_slice(frame);
            self.inbox.push(b);
        }
        if self.inbox.is_empty() {
            return reads > 0;
        }
        side.end.send_batch(now, &mut self.pool, &mut self.inbox);
        true
    }

    /// Writes what the pipe releases towards one side (`a`: towards TAP B, from A) at `now`.
    fn deliver(&mut self, from_a: bool, now: Instant) -> bool {
        let dst = if from_a { &mut self.b } else { &mut self.a };
        let n = dst
            .end
            .recv_batch(now, &mut self.pool, &mut self.outbox, self.burst);
        if n == 0 {
            return false;
        }
        for mut f in self.outbox.drain(..) {
            let h = if self.segment {
                // The receiver verifies every checksum (a corrupted frame must be caught).
                VnetHdr::default()
            } else if f.len() > self.mtu + 14 {
                // A super-frame: partial checksum and GSO again, the kernel cuts it.
                let mut st = vnet::OffloadStats::default();
                vnet::prepare_tx(f.as_mut_slice(), self.mtu, true, &mut st)
            } else {
                // Checksums were completed on the way in and nothing on this link corrupts.
                VnetHdr {
                    flags: vnet::F_DATA_VALID,
                    ..VnetHdr::default()
                }
            };
            match write_frame(dst.tap.as_fd(), &h.to_bytes(), f.as_slice()) {
                Io::Done(k) if k == VNET_HDR_LEN + f.len() => {
                    dst.stats.tx_frames += 1;
                    dst.stats.tx_bytes += f.len() as u64;
                }
                _ => dst.stats.tx_dropped += 1,
            }
            self.pool.put(f);
        }
        true
    }

    /// Runs the loop on its own thread until [`Running::stop`] (or the handle's drop).
    pub fn spawn(mut self) -> io::Result<Running> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("netfold-emu".into())
            .spawn(move || -> io::Result<EmuStats> {
                self.run(&flag, None)?;
                Ok(self.stats())
            })?;
        Ok(Running {
            stop,
            thread: Some(thread),
        })
    }
}

/// An emulator running on its own thread.
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<io::Result<EmuStats>>>,
}

impl Running {
    /// Stops the loop and returns its counters; the TAPs close with it.
    pub fn stop(mut self) -> io::Result<EmuStats> {
        self.finish()
    }

    fn finish(&mut self) -> io::Result<EmuStats> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("emulator thread panicked"))?,
            None => Err(io::Error::other("emulator already stopped")),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_per_frame_impairments_and_rate_need_segments() {
        let none = Impairments::none();
        assert!(!needs_segments(&none));
        assert!(tap_config(1500, true).offloads);
        assert!(!tap_config(1500, false).offloads);
        let d = none.delay(netfold::time::Duration::from_millis(5));
        assert!(!needs_segments(&d));
        for imp in [
            none.loss(0.01),
            none.reorder(0.01),
            none.duplicate(0.01),
            none.corrupt(0.01),
            none.rate(1_000_000),
        ] {
            assert!(needs_segments(&imp), "{imp:?}");
        }
    }
}
