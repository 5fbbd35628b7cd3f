//! An eBPF program that steers a multi-queue TAP's frames (kernel -> us) by the Toeplitz
//! (RSS) hash of their 4-tuple, exactly as [`netfold::rss::Rss`] does, and the
//! bpf(2) calls that load it, attach it (`TUNSETSTEERINGEBPF`) and run it on test frames
//! (`BPF_PROG_TEST_RUN`).
//!
//! The tun driver runs the program (`BPF_PROG_TYPE_SOCKET_FILTER`) on each frame it is about
//! to hand to a queue and takes `return value % queues` (`tun_ebpf_select_queue`). The frame
//! starts at its Ethernet header (for a TAP; a virtio-net header is only added when the frame
//! is read, it is not in the skb). The program is generated for one key and queue count:
//! - IPv4 (EtherType 0x0800) TCP or UDP, not a later fragment: the Toeplitz hash of (source,
//!   destination, source port, destination port), [`netfold::rss::ipv4_tuple`];
//! - IPv6 (0x86DD) whose next header is TCP or UDP (no extension headers, as
//!   [`netfold::rss::frame_tuple_ip`]): the hash of [`netfold::rss::ipv6_tuple`];
//! - then `table[hash & 127]` of the round-robin indirection table, i.e. `(hash & 127) % n`;
//! - anything else (ARP, NDP, ICMP, later fragments, frames too short: a packet load past
//!   the end ends a socket filter with 0) goes to queue 0.
//!
//! The hash is unrolled over the input bits with the key windows as immediates (the key is
//! known when the program is generated): for input bit `i` of a loaded big-endian word `w`,
//! `hash ^= ((w >> (31 - i)) & 1) * window` — branch-free, so the verifier walks one path.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// One eBPF instruction (`struct bpf_insn`), as the kernel reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub(crate) code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    pub(crate) regs: u8,
    pub(crate) off: i16,
    pub(crate) imm: i32,
}

impl Insn {
    /// An instruction from its fields (`code`, destination and source registers, offset,
    /// immediate).
    pub(crate) const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: dst | (src << 4),
            off,
            imm,
        }
    }
}

// Instruction classes, sizes, modes, operations (include/uapi/linux/bpf_common.h, bpf.h).
const LD: u8 = 0x00;
const ALU: u8 = 0x04;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
const W: u8 = 0x00;
const H: u8 = 0x08;
const B: u8 = 0x10;
const ABS: u8 = 0x20;
const IND: u8 = 0x40;
const K: u8 = 0x00;
const X: u8 = 0x08;
const AND: u8 = 0x50;
const LSH: u8 = 0x60;
const RSH: u8 = 0x70;
const MUL: u8 = 0x20;
const MOD: u8 = 0x90;
const XOR: u8 = 0xa0;
const MOV: u8 = 0xb0;
const JA: u8 = 0x00;
const JEQ: u8 = 0x10;
const JNE: u8 = 0x50;
const EXIT: u8 = 0x90;

/// Registers: r0 (load results, return value), r1 (scratch, the context on entry), r6 (the
/// context, as packet loads need), r7 (the hash), r8 (the word being hashed), r9 (IPv4 header
/// length). Packet loads clobber r1-r5 only.
const R0: u8 = 0;
const R1: u8 = 1;
const R6: u8 = 6;
const R7: u8 = 7;
const R8: u8 = 8;
const R9: u8 = 9;

/// A tiny assembler: instructions plus forward jumps to named labels.
#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    /// (instruction index, label) of jumps whose offset is not known yet.
    fixups: Vec<(usize, &'static str)>,
    labels: Vec<(&'static str, usize)>,
}

impl Asm {
    fn emit(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn {
            code,
            regs: dst | (src << 4),
            off,
            imm,
        });
    }
    fn alu32_k(&mut self, op: u8, dst: u8, imm: i32) {
        self.emit(ALU | op | K, dst, 0, 0, imm);
    }
    fn alu32_x(&mut self, op: u8, dst: u8, src: u8) {
        self.emit(ALU | op | X, dst, src, 0, 0);
    }
    fn mov64_x(&mut self, dst: u8, src: u8) {
        self.emit(ALU64 | MOV | X, dst, src, 0, 0);
    }
    /// r0 = the big-endian value of `size` at packet offset `off` (host order).
    fn ld_abs(&mut self, size: u8, off: i32) {
        self.emit(LD | size | ABS, 0, 0, 0, off);
    }
    /// r0 = the big-endian value of `size` at packet offset `src + off`.
    fn ld_ind(&mut self, size: u8, src: u8, off: i32) {
        self.emit(LD | size | IND, 0, src, 0, off);
    }
    /// `if dst op imm goto label`.
    fn jmp_k(&mut self, op: u8, dst: u8, imm: i32, label: &'static str) {
        self.fixups.push((self.insns.len(), label));
        self.emit(JMP | op | K, dst, 0, 0, imm);
    }
    fn ja(&mut self, label: &'static str) {
        self.fixups.push((self.insns.len(), label));
        self.emit(JMP | JA, 0, 0, 0, 0);
    }
    fn label(&mut self, name: &'static str) {
        self.labels.push((name, self.insns.len()));
    }
    fn exit(&mut self) {
        self.emit(JMP | EXIT, 0, 0, 0, 0);
    }
    fn finish(mut self) -> Vec<Insn> {
        for &(at, name) in &self.fixups {
            let target = self
                .labels
                .iter()
                .find(|l| l.0 == name)
                .map(|l| l.1)
                .expect("jump to an undefined label");
            // Forward jumps over at most a few thousand instructions: fits in i16.
            self.insns[at].off = (target - at - 1) as i16;
        }
        self.insns
    }
}

/// The 32 key bits starting at bit `pos` of `key` (bits past its end are zero), as
/// [`netfold::rss::toeplitz`] slides them.
fn window(key: &[u8; 40], pos: usize) -> u32 {
    (0..32).fold(0u32, |w, i| {
        let p = pos + i;
        let bit = key
            .get(p / 8)
            .map_or(0, |b| u32::from((b >> (7 - p % 8)) & 1));
        (w << 1) | bit
    })
}

/// Hashes the 32 bits of r0 as input bits `first..first + 32` into r7.
fn hash_word(a: &mut Asm, key: &[u8; 40], first: usize) {
    a.mov64_x(R8, R0);
    for i in 0..32 {
        a.alu32_x(MOV, R1, R8);
        if i < 31 {
            a.alu32_k(RSH, R1, 31 - i as i32);
        }
        // The bit (0 or 1) times the window. Not `(w << i) s>> 31 & window`: recent
        // verifiers explore an AND of a [-1, 0] value once per value, which doubles the paths
        // at every bit.
        a.alu32_k(AND, R1, 1);
        a.alu32_k(MUL, R1, window(key, first + i) as i32);
        a.alu32_x(XOR, R7, R1);
    }
}

/// The steering program for `queues` queues (clamped to `1..=128`, as [`netfold::rss::Rss`]
/// does) under RSS key `key`: returns `Rss::new(key, queues).shard_of_ip(..)` of the frame's
/// 4-tuple, 0 for frames without one (see the module doc).
pub fn program(key: &[u8; 40], queues: usize) -> Vec<Insn> {
    let queues = queues.clamp(1, netfold::rss::INDIRECTION_ENTRIES) as i32;
    let mut a = Asm::default();
    a.mov64_x(R6, R1);
    a.alu32_k(MOV, R7, 0);
    a.ld_abs(H, 12);
    a.jmp_k(JEQ, R0, 0x0800, "v4");
    a.jmp_k(JEQ, R0, 0x86dd, "v6");
    a.ja("zero");

    a.label("v4");
    a.ld_abs(B, 23);
    a.jmp_k(JEQ, R0, 6, "v4_l4");
    a.jmp_k(JEQ, R0, 17, "v4_l4");
    a.ja("zero");
    a.label("v4_l4");
    // A fragment other than the first carries no ports.
    a.ld_abs(H, 20);
    a.alu32_k(AND, R0, 0x1fff);
    a.jmp_k(JNE, R0, 0, "zero");
    // r9 = the IPv4 header's length in bytes.
    a.ld_abs(B, 14);
    a.alu32_k(AND, R0, 0x0f);
    a.alu32_k(LSH, R0, 2);
    a.mov64_x(R9, R0);
    a.ld_abs(W, 14 + 12);
    hash_word(&mut a, key, 0);
    a.ld_abs(W, 14 + 16);
    hash_word(&mut a, key, 32);
    a.ld_ind(W, R9, 14);
    hash_word(&mut a, key, 64);
    a.ja("table");

    a.label("v6");
    a.ld_abs(B, 14 + 6);
    a.jmp_k(JEQ, R0, 6, "v6_l4");
    a.jmp_k(JEQ, R0, 17, "v6_l4");
    a.ja("zero");
    a.label("v6_l4");
    // Source and destination address (8 words from offset 22), then the two ports.
    for w in 0..9 {
        a.ld_abs(W, 14 + 8 + 4 * w as i32);
        hash_word(&mut a, key, 32 * w);
    }

    a.label("table");
    a.alu32_x(MOV, R0, R7);
    a.alu32_k(AND, R0, (netfold::rss::INDIRECTION_ENTRIES - 1) as i32);
    a.alu32_k(MOD, R0, queues);
    a.exit();

    a.label("zero");
    a.alu32_k(MOV, R0, 0);
    a.exit();
    a.finish()
}

const BPF_PROG_LOAD: libc::c_long = 5;
pub(crate) const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
/// `_IOR('T', 224, int)` (include/uapi/linux/if_tun.h).
const TUNSETSTEERINGEBPF: libc::c_ulong = 0x8004_54e0;

/// The `BPF_PROG_LOAD` part of `union bpf_attr` (the kernel zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The `BPF_PROG_TEST_RUN` part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct TestRunAttr {
    pub(crate) prog_fd: u32,
    pub(crate) retval: u32,
    pub(crate) data_size_in: u32,
    pub(crate) data_size_out: u32,
    pub(crate) data_in: u64,
    pub(crate) data_out: u64,
    pub(crate) repeat: u32,
    pub(crate) duration: u32,
    pub(crate) ctx_size_in: u32,
    pub(crate) ctx_size_out: u32,
    pub(crate) ctx_in: u64,
    pub(crate) ctx_out: u64,
    pub(crate) flags: u32,
    pub(crate) cpu: u32,
}

pub(crate) fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> libc::c_long {
    // SAFETY: `attr` is a live, initialised #[repr(C)] prefix of `union bpf_attr` for `cmd`,
    // of the size passed; the pointers inside it point to live buffers of the sizes it names
    // (the callers keep them alive across the call).
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    }
}

/// Loads `insns` as a socket filter; returns the program's descriptor. On failure the
/// error carries the verifier's log (the load is retried with a log to get it).
pub fn load(insns: &[Insn]) -> io::Result<OwnedFd> {
    load_program(BPF_PROG_TYPE_SOCKET_FILTER, 0, 0, "nf_rss_tx", insns).map_err(|e| {
        if e.raw_os_error().is_some() {
            e
        } else {
            io::Error::new(e.kind(), format!("loading the steering program: {e}"))
        }
    })
}

/// Loads `insns` as a program of type `prog_type` (with `expected_attach_type`, 0 where the
/// type has none, and `prog_flags`, `BPF_F_*`) named `name` (at most 15 bytes kept). On failure the error carries the end
/// of the verifier's log (the load is retried with a log to get it); permission errors
/// (`EPERM`) and a kernel without bpf(2) (`ENOSYS`) come back as they are.
pub(crate) fn load_program(
    prog_type: u32,
    expected_attach_type: u32,
    prog_flags: u32,
    name: &str,
    insns: &[Insn],
) -> io::Result<OwnedFd> {
    let license = b"GPL\0";
    let mut prog_name = [0u8; 16];
    let n = name.len().min(15);
    prog_name[..n].copy_from_slice(&name.as_bytes()[..n]);
    let attr = |log: &mut Vec<u8>, level: u32| ProgLoadAttr {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: level,
        log_size: log.len() as u32,
        log_buf: if log.is_empty() {
            0
        } else {
            log.as_mut_ptr() as u64
        },
        prog_name,
        expected_attach_type,
        prog_flags,
        ..ProgLoadAttr::default()
    };
    let mut none = Vec::new();
    let fd = bpf(BPF_PROG_LOAD, &mut attr(&mut none, 0));
    if fd >= 0 {
        // SAFETY: the syscall returned a fresh descriptor that nothing else owns.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    }
    let err = io::Error::last_os_error();
    // Permission errors have no log to show; anything else may be the verifier's.
    if matches!(err.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)) {
        return Err(err);
    }
    let mut log = vec![0u8; 1 << 20];
    let fd = bpf(BPF_PROG_LOAD, &mut attr(&mut log, 1));
    if fd >= 0 {
        // SAFETY: as above.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    }
    let text =
        String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned();
    // The end of the log says why.
    let tail: String = text
        .lines()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" | ");
    Err(io::Error::new(
        err.kind(),
        format!("{err}; verifier: {tail}"),
    ))
}

/// Runs program `prog` once on `frame` (`BPF_PROG_TEST_RUN`) and returns its return value.
/// The kernel strips an Ethernet header from test input before it runs a socket filter
/// (the program then sees the network header at offset 0); the tun driver does not, so a
/// throw-away 14-byte header goes in front, and the program sees `frame` as a TAP hands
/// it over.
pub fn test_run(prog: BorrowedFd<'_>, frame: &[u8]) -> io::Result<u32> {
    let mut data = vec![0u8; 14];
    data[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    // A local experimental EtherType: with an IP one the kernel wants an IP header after it.
    data[12..14].copy_from_slice(&[0x88, 0xb5]);
    data.extend_from_slice(frame);
    test_run_once(prog, &data, 256)
}

/// Runs `prog` once on `data` (`BPF_PROG_TEST_RUN`) with an output buffer `room` bytes larger
/// than the input, and returns the program's return value (shared by the steering and XDP
/// programs' tests).
pub(crate) fn test_run_once(prog: BorrowedFd<'_>, data: &[u8], room: usize) -> io::Result<u32> {
    let mut out = vec![0u8; data.len() + room];
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: data.len() as u32,
        data_size_out: out.len() as u32,
        data_in: data.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: 1,
        ..TestRunAttr::default()
    };
    if bpf(BPF_PROG_TEST_RUN, &mut attr) < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(attr.retval)
}

/// Makes `prog` the queue selector of the TAP that `queue` (any of its queue descriptors)
/// belongs to; `None` detaches it (back to the kernel's automatic steering).
pub fn attach(queue: BorrowedFd<'_>, prog: Option<BorrowedFd<'_>>) -> io::Result<()> {
    let fd: libc::c_int = prog.map_or(-1, |p| p.as_raw_fd());
    // SAFETY: TUNSETSTEERINGEBPF reads one int (a BPF program descriptor or -1) from the
    // live local `fd`; `queue` is an open tun descriptor.
    let r = unsafe { libc::ioctl(queue.as_raw_fd(), TUNSETSTEERINGEBPF as _, &fd) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netfold::rss::{Rss, MICROSOFT_KEY};
    use std::net::IpAddr;
    use std::os::fd::AsFd;

    /// A xorshift generator: reproducible frames without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn bytes<const N: usize>(&mut self) -> [u8; N] {
            let mut b = [0u8; N];
            for x in b.iter_mut() {
                *x = self.next() as u8;
            }
            b
        }
    }

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    /// An Ethernet + IPv4 frame with `options` words of IP options, protocol `proto`, a TCP
    /// or UDP header and some payload.
    fn v4(r: &mut Rng, proto: u8, options: usize, frag: u16) -> Vec<u8> {
        let mut f = eth(0x0800);
        let l4 = if proto == 6 { 20 } else { 8 };
        let total = 20 + options * 4 + l4 + 10;
        f.push(0x45 + options as u8);
        f.push(0);
        f.extend_from_slice(&(total as u16).to_be_bytes());
        f.extend_from_slice(&[0, 1]);
        f.extend_from_slice(&frag.to_be_bytes());
        f.extend_from_slice(&[64, proto, 0, 0]);
        f.extend_from_slice(&r.bytes::<8>());
        f.extend(std::iter::repeat_n(1u8, options * 4));
        let mut h = vec![0u8; l4];
        h[..4].copy_from_slice(&r.bytes::<4>());
        if proto == 6 {
            h[12] = 0x50;
        } else {
            h[4..6].copy_from_slice(&((8 + 10) as u16).to_be_bytes());
        }
        f.extend_from_slice(&h);
        f.extend_from_slice(&[7u8; 10]);
        f
    }

    fn v6(r: &mut Rng, proto: u8) -> Vec<u8> {
        let mut f = eth(0x86dd);
        let l4 = if proto == 6 { 20 } else { 8 };
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&((l4 + 10) as u16).to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        f.extend_from_slice(&r.bytes::<32>());
        let mut h = vec![0u8; l4];
        h[..4].copy_from_slice(&r.bytes::<4>());
        if proto == 6 {
            h[12] = 0x50;
        } else {
            h[4..6].copy_from_slice(&((8 + 10) as u16).to_be_bytes());
        }
        f.extend_from_slice(&h);
        f.extend_from_slice(&[7u8; 10]);
        f
    }

    fn expected(rss: &Rss, f: &[u8]) -> Option<usize> {
        let (s, d, sp, dp) = netfold::rss::frame_tuple_ip(f)?;
        Some(rss.shard_of_ip(s, d, sp, dp))
    }

    #[test]
    fn windows_reproduce_the_toeplitz_hash() {
        let mut r = Rng(0x1234_5678_9abc_def1);
        for _ in 0..100 {
            let input = r.bytes::<36>();
            let mut h = 0u32;
            for (i, byte) in input.iter().enumerate() {
                for bit in 0..8 {
                    if byte & (0x80 >> bit) != 0 {
                        h ^= window(&MICROSOFT_KEY, i * 8 + bit);
                    }
                }
            }
            assert_eq!(h, netfold::rss::toeplitz(&MICROSOFT_KEY, &input));
        }
    }

    #[test]
    fn jumps_land_inside_the_program() {
        let p = program(&MICROSOFT_KEY, 4);
        for (i, insn) in p.iter().enumerate() {
            if insn.code & 0x07 == JMP && insn.code != JMP | EXIT {
                let to = i as i64 + 1 + i64::from(insn.off);
                assert!((0..p.len() as i64).contains(&to), "insn {i}");
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(JMP | EXIT));
    }

    /// The kernel runs the generated program (`BPF_PROG_TEST_RUN`) on random IPv4 and IPv6
    /// TCP and UDP frames (IPv4 with and without options) for 1 to 5 queues: each result is
    /// [`Rss::shard_of_ip`] of the frame's 4-tuple. Frames without one (ARP, ICMP, later
    /// fragments, truncated) get queue 0 or at least a valid queue. Needs CAP_BPF (root);
    /// without it `SKIPPED: ...`.
    #[test]
    fn the_kernel_runs_the_program_to_rss_shard_of() {
        for n in 1..=5 {
            let prog = match load(&program(&MICROSOFT_KEY, n)) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)) => {
                    crate::netns::skip(Some(format!("cannot load BPF programs: {e}")));
                    return;
                }
                r => r.expect("load"),
            };
            let rss = Rss::new(MICROSOFT_KEY, n);
            let mut r = Rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
            let mut hit = vec![0usize; n];
            for i in 0..600 {
                let f = match i % 6 {
                    0 => v4(&mut r, 6, 0, 0),
                    1 => v4(&mut r, 17, 0, 0x2000), // first fragment: has ports
                    2 => v4(&mut r, 6, (i / 6) % 11, 0),
                    3 => v6(&mut r, 6),
                    4 => v6(&mut r, 17),
                    _ => v4(&mut r, 17, 1, 0),
                };
                let want = expected(&rss, &f).expect("a frame with a 4-tuple");
                let got = test_run(prog.as_fd(), &f).expect("test run");
                assert_eq!(got as usize, want, "n={n} frame {i}: {f:02x?}");
                hit[want] += 1;
            }
            assert!(hit.iter().all(|&h| h > 0), "n={n}: {hit:?}");
            // No 4-tuple: queue 0.
            let mut arp = eth(0x0806);
            arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
            arp.resize(42, 0);
            let mut icmp = v4(&mut r, 1, 0, 0);
            let later_fragment = v4(&mut r, 6, 0, 0x00b9);
            assert_eq!(test_run(prog.as_fd(), &arp).unwrap(), 0);
            assert_eq!(test_run(prog.as_fd(), &icmp).unwrap(), 0);
            assert_eq!(test_run(prog.as_fd(), &later_fragment).unwrap(), 0);
            icmp.truncate(30);
            assert_eq!(test_run(prog.as_fd(), &icmp).unwrap(), 0);
            // Truncated frames: any valid queue, no error.
            let full = v6(&mut r, 6);
            for len in [0, 1, 13, 14, 20, 21, 40, 57, 58] {
                let q = test_run(prog.as_fd(), &full[..len])
                    .unwrap_or_else(|e| panic!("len {len}: {e}"));
                assert!((q as usize) < n, "n={n} len {len}: {q}");
            }
            let full = v4(&mut r, 6, 2, 0);
            for len in [15, 24, 30, 34, 36, 40, 45] {
                let q = test_run(prog.as_fd(), &full[..len])
                    .unwrap_or_else(|e| panic!("len {len}: {e}"));
                assert!((q as usize) < n, "n={n} len {len}: {q}");
            }
            // An IPv4 address pair checked against a known hash, not only frame_tuple_ip.
            let f = v4(&mut r, 6, 0, 0);
            let (s, d, sp, dp) = netfold::rss::frame_tuple_ip(&f).unwrap();
            assert!(matches!(s, IpAddr::V4(_)) && matches!(d, IpAddr::V4(_)));
            assert_eq!(
                test_run(prog.as_fd(), &f).unwrap() as usize,
                rss.shard_of_ip(s, d, sp, dp)
            );
        }
    }
}
