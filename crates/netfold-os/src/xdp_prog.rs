//! The XDP program of an [`super::xdp::XdpSocket`]: it hands the frames netfold owns to the
//! AF_XDP socket and passes every other frame to the kernel, so the host keeps working on the
//! interface it shares with netfold. Plus the bpf(2) calls around it: the `XSKMAP` the program
//! redirects through, loading, attaching with a BPF link, and test runs.
//!
//! What the program redirects (Documentation/networking/af_xdp.rst, "XSKMAP / BPF_MAP_TYPE_XSKMAP":
//! `bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS)`), decided on the frame's
//! first bytes with direct packet access, every load behind a bounds check against
//! `data_end` (a short frame is passed, never read past):
//! - [`XdpFilter::Local`]: IPv4 (EtherType 0x0800) whose destination is one of the local
//!   IPv4 addresses; ARP (0x0806) whose target protocol address is one (requests for us and
//!   replies to us, RFC 826); IPv6 (0x86DD) whose destination is one of the local IPv6
//!   addresses or the solicited-node multicast address of one (Neighbor Solicitations for it,
//!   RFC 4861 §7.2.2, and Duplicate Address Detection, RFC 4862 §5.4.2). Everything else
//!   (other addresses, all-nodes multicast such as Router Advertisements, VLAN-tagged frames,
//!   other EtherTypes) goes to the kernel.
//! - [`XdpFilter::All`]: every frame of the queue.
//!
//! The redirect names the queue the frame arrived on; the map holds our socket at our queue
//! only, so a lookup on any other queue fails and the flags argument's low bits make the
//! program return `XDP_PASS` (the `bpf_redirect_map` contract since Linux 5.3): frames for
//! netfold that the NIC's RSS puts on another queue reach the kernel, which answers them as
//! for an address it does not have.
//!
//! The addresses are immediates of the generated program (it is generated for one address
//! set, as the steering program is for one RSS key): no map lookup per frame.
#![allow(unsafe_code)]

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::steer_bpf::{bpf, load_program, Insn};

/// Which frames of the queue the program gives to the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XdpFilter {
    /// Frames addressed to these addresses, and the ARP and NDP traffic resolving them (see
    /// the module doc); the rest to the kernel.
    Local {
        v4: Vec<Ipv4Addr>,
        v6: Vec<Ipv6Addr>,
    },
    /// Every frame arriving on the queue (an interface netfold has to itself).
    All,
}

impl XdpFilter {
    /// Whether the filter names no address at all (it would redirect nothing).
    pub fn is_empty(&self) -> bool {
        match self {
            XdpFilter::Local { v4, v6 } => v4.is_empty() && v6.is_empty(),
            XdpFilter::All => false,
        }
    }
}

// Instruction classes, sizes, modes and operations (include/uapi/linux/bpf_common.h, bpf.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ALU64: u8 = 0x07;
const JMP: u8 = 0x05;
const JMP32: u8 = 0x06;
const W: u8 = 0x00;
const H: u8 = 0x08;
const DW: u8 = 0x18;
const IMM: u8 = 0x00;
const MEM: u8 = 0x60;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const MOV: u8 = 0xb0;
const JA: u8 = 0x00;
const JEQ: u8 = 0x10;
const JGT: u8 = 0x20;
const JNE: u8 = 0x50;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
/// `src_reg` of a 64-bit immediate load that names a map by descriptor.
const PSEUDO_MAP_FD: u8 = 1;
/// `BPF_FUNC_redirect_map`.
const FUNC_REDIRECT_MAP: i32 = 51;

/// XDP verdicts (`enum xdp_action`).
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_REDIRECT: u32 = 4;

/// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;
const R7: u8 = 7;
const R8: u8 = 8;

/// Ethernet header, and the offsets inside the frame the program reads.
const ETH: usize = 14;
const ETHERTYPE: i16 = 12;
const IPV4_DST: i16 = 14 + 16;
const ARP_TPA: i16 = 14 + 24;
const IPV6_DST: i16 = 14 + 24;

/// A small assembler with numbered labels (a label per address comparison).
#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    fixups: Vec<(usize, u32)>,
    labels: Vec<(u32, usize)>,
    next: u32,
}

impl Asm {
    fn new_label(&mut self) -> u32 {
        self.next += 1;
        self.next
    }
    fn emit(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn::new(code, dst, src, off, imm));
    }
    /// `dst = *(size *)(src + off)`.
    fn ldx(&mut self, size: u8, dst: u8, src: u8, off: i16) {
        self.emit(LDX | size | MEM, dst, src, off, 0);
    }
    fn mov64_x(&mut self, dst: u8, src: u8) {
        self.emit(ALU64 | MOV | X, dst, src, 0, 0);
    }
    fn mov64_k(&mut self, dst: u8, imm: i32) {
        self.emit(ALU64 | MOV | K, dst, 0, 0, imm);
    }
    fn add64_k(&mut self, dst: u8, imm: i32) {
        self.emit(ALU64 | ADD | K, dst, 0, 0, imm);
    }
    /// `if (u32)dst op imm goto label` (32-bit compare: the immediate is not sign-extended
    /// against a zero-extended load).
    fn jmp32_k(&mut self, op: u8, dst: u8, imm: u32, label: u32) {
        self.fixups.push((self.insns.len(), label));
        self.emit(JMP32 | op | K, dst, 0, 0, imm as i32);
    }
    /// `if dst op src goto label` (64-bit).
    fn jmp_x(&mut self, op: u8, dst: u8, src: u8, label: u32) {
        self.fixups.push((self.insns.len(), label));
        self.emit(JMP | op | X, dst, src, 0, 0);
    }
    fn ja(&mut self, label: u32) {
        self.fixups.push((self.insns.len(), label));
        self.emit(JMP | JA, 0, 0, 0, 0);
    }
    fn label(&mut self, l: u32) {
        self.labels.push((l, self.insns.len()));
    }
    /// `dst = map` (the two-slot 64-bit immediate load of a map descriptor).
    fn ld_map_fd(&mut self, dst: u8, fd: RawFd) {
        self.emit(LD | DW | IMM, dst, PSEUDO_MAP_FD, 0, fd);
        self.emit(0, 0, 0, 0, 0);
    }
    fn call(&mut self, func: i32) {
        self.emit(JMP | CALL, 0, 0, 0, func);
    }
    fn exit(&mut self) {
        self.emit(JMP | EXIT, 0, 0, 0, 0);
    }
    /// `if data + need > data_end goto pass` with the frame start in r7 and its end in r8.
    fn need(&mut self, need: usize, pass: u32) {
        self.mov64_x(R4, R7);
        self.add64_k(R4, need as i32);
        self.jmp_x(JGT, R4, R8, pass);
    }
    fn finish(mut self) -> Vec<Insn> {
        for &(at, l) in &self.fixups {
            let target = self
                .labels
                .iter()
                .find(|x| x.0 == l)
                .map(|x| x.1)
                .expect("jump to an undefined label");
            // Forward jumps only, over a program of at most a few thousand instructions.
            self.insns[at].off = (target - at - 1) as i16;
        }
        self.insns
    }
}

/// The solicited-node multicast address of `a` (RFC 4291 §2.7.1: ff02::1:ff00:0/104 with the
/// address's low 24 bits).
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// A 32-bit word of the frame as a little- or big-endian load sees it: the immediate that
/// compares equal to those bytes loaded with `ldx w`.
fn word(b: [u8; 4]) -> u32 {
    u32::from_ne_bytes(b)
}

/// The program for `filter`, redirecting through the `XSKMAP` `map` (a descriptor, patched in
/// as a 64-bit immediate). `on_miss` is what the program returns when the map has no socket
/// at the frame's queue: [`XDP_PASS`] in use; a test gives another verdict to see which
/// frames the filter chose.
pub fn program(filter: &XdpFilter, map: RawFd, on_miss: u32) -> Vec<Insn> {
    let mut a = Asm::default();
    let pass = a.new_label();
    let redirect = a.new_label();
    a.mov64_x(R6, R1);
    if let XdpFilter::Local { v4, v6 } = filter {
        let (l_v4, l_arp, l_v6) = (a.new_label(), a.new_label(), a.new_label());
        a.ldx(W, R7, R6, MD_DATA);
        a.ldx(W, R8, R6, MD_DATA_END);
        a.need(ETH, pass);
        a.ldx(H, R5, R7, ETHERTYPE);
        // EtherTypes as a 16-bit load of their network-order bytes reads them.
        let et = |t: u16| u32::from(u16::from_ne_bytes(t.to_be_bytes()));
        a.jmp32_k(JEQ, R5, et(0x0800), l_v4);
        a.jmp32_k(JEQ, R5, et(0x0806), l_arp);
        a.jmp32_k(JEQ, R5, et(0x86dd), l_v6);
        a.ja(pass);

        // IPv4: the destination address (RFC 791 §3.1).
        a.label(l_v4);
        a.need(IPV4_DST as usize + 4, pass);
        a.ldx(W, R5, R7, IPV4_DST);
        for addr in v4 {
            a.jmp32_k(JEQ, R5, word(addr.octets()), redirect);
        }
        a.ja(pass);

        // ARP over Ethernet for IPv4 (28 bytes): the target protocol address.
        a.label(l_arp);
        a.need(ARP_TPA as usize + 4, pass);
        a.ldx(W, R5, R7, ARP_TPA);
        for addr in v4 {
            a.jmp32_k(JEQ, R5, word(addr.octets()), redirect);
        }
        a.ja(pass);

        // IPv6: the destination address (RFC 8200 §3), ours or our solicited-node group.
        a.label(l_v6);
        a.need(IPV6_DST as usize + 16, pass);
        let mut targets: Vec<Ipv6Addr> = Vec::new();
        for &addr in v6 {
            for t in [addr, solicited_node(addr)] {
                if !targets.contains(&t) {
                    targets.push(t);
                }
            }
        }
        for t in targets {
            let next = a.new_label();
            let o = t.octets();
            for w in 0..4 {
                a.ldx(W, R5, R7, IPV6_DST + 4 * w as i16);
                let b = [o[4 * w], o[4 * w + 1], o[4 * w + 2], o[4 * w + 3]];
                a.jmp32_k(JNE, R5, word(b), next);
            }
            a.ja(redirect);
            a.label(next);
        }
        a.ja(pass);
    }

    a.label(redirect);
    a.ld_map_fd(R1, map);
    a.ldx(W, R2, R6, MD_RX_QUEUE_INDEX);
    a.mov64_k(R3, on_miss as i32);
    a.call(FUNC_REDIRECT_MAP);
    a.exit();

    // (`All` never passes: the verifier refuses unreachable code.)
    if !matches!(filter, XdpFilter::All) {
        a.label(pass);
        a.mov64_k(R0, XDP_PASS as i32);
        a.exit();
    }
    a.finish()
}

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` (enum bpf_attach_type).
const BPF_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`: generic XDP, run on the skb (any driver).
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP, run by the driver before an skb exists.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The `BPF_MAP_CREATE` part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// The `BPF_MAP_*_ELEM` part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// The `BPF_LINK_CREATE` part of `union bpf_attr` (the XDP case: the target is an ifindex).
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

fn fresh_fd(r: libc::c_long) -> io::Result<OwnedFd> {
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// Creates an `XSKMAP` with `entries` slots (queue indices `0..entries`).
pub fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut name = [0u8; 16];
    name[..7].copy_from_slice(b"nf_xsks");
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: entries.max(1),
        map_name: name,
        ..MapCreateAttr::default()
    };
    fresh_fd(bpf(BPF_MAP_CREATE, &mut attr))
}

/// Puts socket `xsk` into slot `queue` of `map`.
pub fn set_xsk(map: BorrowedFd<'_>, queue: u32, xsk: BorrowedFd<'_>) -> io::Result<()> {
    let key = queue;
    let value: u32 = xsk.as_raw_fd() as u32;
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        flags: 0,
    };
    if bpf(BPF_MAP_UPDATE_ELEM, &mut attr) < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `BPF_F_XDP_HAS_FRAGS` (Linux 5.18): the program takes multi-buffer frames (it reads only
/// the first buffer's headers, which is all this one does), so a driver lets the interface's
/// MTU exceed a page with it attached.
pub const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// Loads `insns` as an XDP program; `frags`: it takes multi-buffer frames
/// ([`BPF_F_XDP_HAS_FRAGS`]).
pub fn load(insns: &[Insn], frags: bool) -> io::Result<OwnedFd> {
    let flags = if frags { BPF_F_XDP_HAS_FRAGS } else { 0 };
    load_program(BPF_PROG_TYPE_XDP, BPF_XDP, flags, "nf_xsk_redirect", insns)
}

/// Attaches XDP program `prog` to interface `ifindex` through a BPF link (Linux 5.9) with
/// `flags` ([`XDP_FLAGS_DRV_MODE`] or [`XDP_FLAGS_SKB_MODE`]). The program stays attached as
/// long as the returned descriptor is open: a process that exits, even by a crash, leaves
/// no program behind.
pub fn attach(prog: BorrowedFd<'_>, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    fresh_fd(bpf(BPF_LINK_CREATE, &mut attr))
}

/// Runs XDP program `prog` once on `frame` (`BPF_PROG_TEST_RUN`, queue 0) and returns its
/// verdict.
pub fn test_run(prog: BorrowedFd<'_>, frame: &[u8]) -> io::Result<u32> {
    crate::steer_bpf::test_run_once(prog, frame, 512)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    fn ipv4_to(dst: Ipv4Addr) -> Vec<u8> {
        let mut f = eth(0x0800);
        f.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[198, 18, 47, 1]);
        f.extend_from_slice(&dst.octets());
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x07, 0, 8, 0, 0]);
        f
    }

    fn arp_for(target: Ipv4Addr) -> Vec<u8> {
        let mut f = eth(0x0806);
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 198, 18, 47, 1]);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&target.octets());
        f
    }

    fn ipv6_to(dst: Ipv6Addr) -> Vec<u8> {
        let mut f = eth(0x86dd);
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 8, 17, 64]);
        f.extend_from_slice(&"2001:2:0:47::1".parse::<Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&dst.octets());
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x07, 0, 8, 0, 0]);
        f
    }

    #[test]
    fn solicited_node_addresses_keep_the_low_24_bits() {
        let a: Ipv6Addr = "2001:2:0:47::12:3456".parse().unwrap();
        assert_eq!(
            solicited_node(a),
            "ff02::1:ff12:3456".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn jumps_land_inside_the_program() {
        let f = XdpFilter::Local {
            v4: vec![Ipv4Addr::new(198, 18, 47, 2)],
            v6: vec!["2001:2:0:47::2".parse().unwrap()],
        };
        for filter in [f, XdpFilter::All] {
            let p = program(&filter, 3, XDP_PASS);
            for (i, insn) in p.iter().enumerate() {
                let class = insn.code & 0x07;
                if (class == JMP || class == JMP32)
                    && insn.code != JMP | EXIT
                    && insn.code != JMP | CALL
                {
                    let to = i as i64 + 1 + i64::from(insn.off);
                    assert!((0..p.len() as i64).contains(&to), "insn {i}");
                }
            }
            assert_eq!(p.last().map(|i| i.code), Some(JMP | EXIT));
        }
    }

    /// The kernel runs the program (`BPF_PROG_TEST_RUN`, its map empty, so a frame the filter
    /// picks comes back as the miss verdict, `XDP_DROP` here) on frames for us and for others:
    /// IPv4 to each local address, ARP for each, IPv6 to each and to its solicited-node group
    /// are picked; other addresses, all-nodes multicast, other EtherTypes and frames cut
    /// short anywhere pass to the kernel; with `All` everything is picked. Needs CAP_BPF
    /// (root); without it `SKIPPED: ...`.
    #[test]
    fn the_kernel_runs_the_filter_on_frames_for_us_and_for_others() {
        let map = match create_xskmap(1) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)) => {
                crate::netns::skip(Some(format!("cannot create BPF maps: {e}")));
                return;
            }
            r => r.expect("XSKMAP"),
        };
        let ours4 = [
            Ipv4Addr::new(198, 18, 47, 2),
            Ipv4Addr::new(198, 18, 47, 200),
        ];
        let ours6: [Ipv6Addr; 2] = [
            "2001:2:0:47::2".parse().unwrap(),
            "fe80::6e:66ff:fe00:2".parse().unwrap(),
        ];
        let filter = XdpFilter::Local {
            v4: ours4.to_vec(),
            v6: ours6.to_vec(),
        };
        let prog = load(&program(&filter, map.as_raw_fd(), XDP_DROP), false).expect("load");
        let run = |f: &[u8]| test_run(prog.as_fd(), f).expect("test run");
        for a in ours4 {
            assert_eq!(run(&ipv4_to(a)), XDP_DROP, "{a}");
            assert_eq!(run(&arp_for(a)), XDP_DROP, "arp {a}");
        }
        for a in ours6 {
            assert_eq!(run(&ipv6_to(a)), XDP_DROP, "{a}");
            assert_eq!(run(&ipv6_to(solicited_node(a))), XDP_DROP, "{a}");
        }
        let others4 = [Ipv4Addr::new(198, 18, 47, 1), Ipv4Addr::new(198, 18, 47, 3)];
        for a in others4 {
            assert_eq!(run(&ipv4_to(a)), XDP_PASS, "{a}");
            assert_eq!(run(&arp_for(a)), XDP_PASS, "arp {a}");
        }
        for a in [
            "2001:2:0:47::1",
            "2001:2:0:47::3",
            "ff02::1",
            "ff02::1:ff00:1",
        ] {
            assert_eq!(run(&ipv6_to(a.parse().unwrap())), XDP_PASS, "{a}");
        }
        // One byte differs in each word of an IPv6 address in turn.
        for w in 0..4 {
            let mut o = ours6[0].octets();
            o[4 * w + 1] ^= 0x40;
            assert_eq!(run(&ipv6_to(Ipv6Addr::from(o))), XDP_PASS, "word {w}");
        }
        // The right address behind another EtherType (802.1Q, IPX) or cut short.
        let mut tagged = ipv4_to(ours4[0]);
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(run(&tagged), XDP_PASS);
        for full in [ipv4_to(ours4[0]), arp_for(ours4[0]), ipv6_to(ours6[0])] {
            // The kernel refuses test input shorter than an Ethernet header.
            let need = if full[12..14] == [0x86, 0xdd] {
                54
            } else if full[12..14] == [0x08, 0x06] {
                42
            } else {
                34
            };
            for len in (14..need).step_by(3) {
                assert_eq!(run(&full[..len]), XDP_PASS, "len {len}");
            }
            assert_eq!(run(&full[..need]), XDP_DROP, "len {need}");
        }
        // Everything, by option.
        let all = load(&program(&XdpFilter::All, map.as_raw_fd(), XDP_DROP), false).expect("load");
        for f in [ipv4_to(others4[0]), tagged, eth(0x88b5)] {
            let mut f = f;
            f.resize(60, 0);
            assert_eq!(test_run(all.as_fd(), &f).unwrap(), XDP_DROP);
        }
        // In use the miss verdict is XDP_PASS: with no socket at the queue, frames for us
        // reach the kernel too.
        let prod = load(&program(&filter, map.as_raw_fd(), XDP_PASS), false).expect("load");
        assert_eq!(
            test_run(prod.as_fd(), &ipv4_to(ours4[0])).unwrap(),
            XDP_PASS
        );
    }
}
