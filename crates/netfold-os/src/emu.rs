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
//! each pipe end releases at the current wall-clock time (`recv_batch`, up to 256 frames) and
//! write it to the other TAP. When a round moved nothing, it sleeps in `ppoll(2)` on both descriptors with a
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
//! checksums ([`vnet::gso_split`]) and cross the pipe one by one. On the way out, consecutive
//! in-order segments of one TCP flow that the pipe released together are merged back into a
//! super-frame (software GRO, as a NIC would hand the receiver's stack: same headers, options
//! and acknowledgment, contiguous sequence numbers, full-sized segments but the last, no
//! SYN/FIN/RST/URG/CWR, up to a PSH) and written once with a GSO vnet header and a partial
//! checksum: one write per run instead of one per 1514-byte frame, and one pass through the
//! receiving kernel's TCP instead of up to 45. What is not merged (ACKs, a segment after a
//! gap, a reordered or duplicated segment) goes out alone with an empty vnet
//! header, which makes the receiving kernel (or netfold's packet socket) verify its checksums.
//! With `--corrupt` nothing is merged: every segment, corrupted or not, reaches the receiver on
//! its own and is checked. A TAP opened without offloads (smoltcp's runs) only ever carries
//! wire-sized frames, and nothing is merged towards it.
//!
//! On the 2-vCPU machine of docs/BENCHMARKS.md (shared, load average 11-13) the merge made the
//! kernel's TCP 1.6-4.7x faster over a 1% loss link and 2-3x over a 10 Gbit/s rate (the
//! figures are there); the emulator thread then spends most of its time in the kernel (TAP
//! copies in and out, and the receiving TCP's processing and wake-ups, which run in the context
//! of its writes).

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
/// Most frames taken from a pipe end per round: enough for a few merged super-frames.
const RELEASE_BURST: usize = 256;

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
    /// Frames written to this TAP (a merged super-frame counts once).
    pub tx_frames: u64,
    /// Super-frames merged from released segments before the write, and the segments in them.
    pub tx_merged: u64,
    pub tx_merged_segments: u64,
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
                "written to {name}: {} frames ({} bytes; {} merged from {} segments), {} refused",
                s.tx_frames, s.tx_bytes, s.tx_merged, s.tx_merged_segments, s.tx_dropped
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
    /// A merged super-frame being built (see [`Emulator::deliver`]).
    merged: Vec<u8>,
    segment: bool,
    /// Released segments may be merged back into super-frames towards a TAP with offloads
    /// (no corruption on the link: a corrupted segment must reach the receiver on its own,
    /// with its bad checksum, to be caught).
    coalesce: bool,
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
        let capacity = config.capacity;
        let coalesce = segment && config.impairments.corrupt == 0.0;
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
            // Enough idle buffers for a full pipe in both directions: a smaller free list made
            // the loop allocate (calloc) a buffer per segment once the queue held more.
            pool: Pool::new(mtu + 18, 2 * capacity.max(1024)),
            scratch: vec![0u8; MAX_FRAME + 1],
            inbox: Vec::with_capacity(burst * 64),
            outbox: Vec::with_capacity(RELEASE_BURST),
            merged: Vec::with_capacity(MAX_FRAME),
            segment,
            coalesce,
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
    ///
    /// In per-frame mode towards a TAP with offloads, consecutive in-order segments of one TCP
    /// flow released together are merged back into one super-frame (software GRO: [`tcp_seg`]
    /// and [`continues`] say which) and written once, marked GSO with the segments' size and a
    /// partial checksum: the impairments have already acted on every wire frame, and the
    /// receiver gets what a NIC with GRO would hand its stack, in one write instead of up to
    /// 45.
    fn deliver(&mut self, from_a: bool, now: Instant) -> bool {
        let dst = if from_a { &mut self.b } else { &mut self.a };
        let n = dst
            .end
            .recv_batch(now, &mut self.pool, &mut self.outbox, RELEASE_BURST);
        if n == 0 {
            return false;
        }
        let merge = self.coalesce && dst.tap.config().offloads;
        let mut i = 0;
        while i < self.outbox.len() {
            let first = if merge {
                tcp_seg(self.outbox[i].as_slice())
            } else {
                None
            };
            let mut j = i + 1;
            if let Some(first) = first {
                let mut last = first;
                let mut ip_len = first.ip_len;
                while j < self.outbox.len() && !last.psh && last.payload == first.payload {
                    let Some(next) = tcp_seg(self.outbox[j].as_slice()) else {
                        break;
                    };
                    if ip_len + next.payload > usize::from(u16::MAX)
                        || next.payload > first.payload
                        || !continues(
                            self.outbox[i].as_slice(),
                            &last,
                            self.outbox[j].as_slice(),
                            &next,
                        )
                    {
                        break;
                    }
                    ip_len += next.payload;
                    last = next;
                    j += 1;
                }
            }
            if j - i > 1 {
                let first = first.unwrap_or_default();
                let buf = &mut self.merged;
                buf.clear();
                buf.extend_from_slice(self.outbox[i].as_slice());
                for f in &self.outbox[i + 1..j] {
                    let f = f.as_slice();
                    buf.extend_from_slice(&f[14 + 20 + usize::from(f[46] >> 4) * 4..]);
                }
                let total = buf.len() - 14;
                buf[16..18].copy_from_slice(&(total as u16).to_be_bytes());
                // PSH of the last segment (the merge ends at a PSH).
                let last_flags = self.outbox[j - 1].as_slice()[47];
                buf[47] |= last_flags & TCP_PSH;
                let mut st = vnet::OffloadStats::default();
                let mut h = vnet::prepare_tx(buf, self.mtu, true, &mut st);
                if h.gso_kind() == vnet::GSO_TCPV4 {
                    h.gso_size = first.payload as u16;
                }
                match write_frame(dst.tap.as_fd(), &h.to_bytes(), buf) {
                    Io::Done(k) if k == VNET_HDR_LEN + buf.len() => {
                        dst.stats.tx_frames += 1;
                        dst.stats.tx_bytes += buf.len() as u64;
                        dst.stats.tx_merged += 1;
                        dst.stats.tx_merged_segments += (j - i) as u64;
                    }
                    _ => dst.stats.tx_dropped += 1,
                }
                i = j;
                continue;
            }
            let f = &mut self.outbox[i];
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
            i += 1;
        }
        for f in self.outbox.drain(..) {
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

/// Ethernet (14) plus an option-less IPv4 header (20) plus the fixed TCP header (20).
const SEG_HDRS: usize = 14 + 20 + 20;
const TCP_PSH: u8 = 0x08;

/// A plain TCP data segment the emulator may merge: untagged Ethernet, IPv4 without options,
/// not a fragment, ACK set, no SYN/FIN/RST/URG/CWR, some payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TcpSeg {
    /// TCP header length.
    thl: usize,
    payload: usize,
    /// IP total length.
    ip_len: usize,
    seq: u32,
    psh: bool,
}

fn tcp_seg(f: &[u8]) -> Option<TcpSeg> {
    if f.len() < SEG_HDRS || f[12..14] != [0x08, 0x00] || f[14] != 0x45 || f[23] != 6 {
        return None;
    }
    // More-fragments or a fragment offset.
    if u16::from_be_bytes([f[20], f[21]]) & 0x3fff != 0 {
        return None;
    }
    let ip_len = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let thl = usize::from(f[46] >> 4) * 4;
    if thl < 20 || 14 + ip_len != f.len() || ip_len < 20 + thl {
        return None;
    }
    let flags = f[47];
    // ACK required; FIN, SYN, RST, URG and CWR end up alone.
    if flags & 0x10 == 0 || flags & (0x01 | 0x02 | 0x04 | 0x20 | 0x80) != 0 {
        return None;
    }
    let payload = ip_len - 20 - thl;
    (payload > 0).then(|| TcpSeg {
        thl,
        payload,
        ip_len,
        seq: u32::from_be_bytes([f[38], f[39], f[40], f[41]]),
        psh: flags & TCP_PSH != 0,
    })
}

/// Whether segment `b` (frame `fb`) continues the run whose first frame is `fa` and whose last
/// segment is `last`: the same Ethernet header, IP TOS, flags, TTL and addresses, the same
/// ports, acknowledgment, window and options (timestamps included, as Linux GRO requires),
/// and `b`'s sequence number right after `last`'s payload.
fn continues(fa: &[u8], last: &TcpSeg, fb: &[u8], b: &TcpSeg) -> bool {
    b.thl == last.thl
        && b.seq == last.seq.wrapping_add(last.payload as u32)
        && fa[..16] == fb[..16]
        && fa[20..24] == fb[20..24]
        && fa[26..38] == fb[26..38]
        && fa[42..46] == fb[42..46]
        // Flags other than PSH (checked by tcp_seg), data offset and window.
        && fa[46] == fb[46]
        && fa[47] & !TCP_PSH == fb[47] & !TCP_PSH
        && fa[48..50] == fb[48..50]
        && fa[SEG_HDRS..SEG_HDRS + b.thl - 20] == fb[SEG_HDRS..SEG_HDRS + b.thl - 20]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tcp_frame` with sequence number `seq` and the checksums left alone (the merge does
    /// not look at them).
    fn seg(payload: usize, flags: u8, seq: u32) -> Vec<u8> {
        let mut f = crate::vnet::tests::tcp_frame(payload, flags);
        f[38..42].copy_from_slice(&seq.to_be_bytes());
        f
    }

    #[test]
    fn consecutive_segments_of_one_flow_merge_and_others_do_not() {
        let a = seg(1448, 0x10, 1000);
        let sa = tcp_seg(&a).expect("a data segment");
        assert_eq!(
            (sa.thl, sa.payload, sa.seq, sa.psh),
            (32, 1448, 1000, false)
        );
        let b = seg(1448, 0x18, 2448);
        let sb = tcp_seg(&b).unwrap();
        assert!(sb.psh);
        assert!(continues(&a, &sa, &b, &sb));
        // A gap, a retransmission, another window or other options: not a continuation.
        let gap = seg(1448, 0x10, 2449);
        assert!(!continues(&a, &sa, &gap, &tcp_seg(&gap).unwrap()));
        let mut win = seg(1448, 0x10, 2448);
        win[48] ^= 1;
        assert!(!continues(&a, &sa, &win, &tcp_seg(&win).unwrap()));
        let mut ts = seg(1448, 0x10, 2448);
        ts[34 + 20 + 4] ^= 1;
        assert!(!continues(&a, &sa, &ts, &tcp_seg(&ts).unwrap()));
        // FIN, SYN, RST, URG, CWR and pure ACKs are never merged.
        for flags in [0x11, 0x12, 0x14, 0x30, 0x90] {
            assert_eq!(tcp_seg(&seg(100, flags, 1)), None, "{flags:#x}");
        }
        assert_eq!(tcp_seg(&seg(0, 0x10, 1)), None);
    }

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
