//! The IPv6 network layer end to end: two netfold stacks on the in-memory pipe, in virtual
//! time, resolve each other by Neighbor Discovery, run Duplicate Address Detection and ping
//! over IPv6; hostile input (truncated or overlong extension header chains, overlapping
//! fragments, NDP with a forwarded hop limit, advertisements for unknown targets) ends in
//! counted drops; Packet Too Big lowers the path MTU and the next large echo leaves in
//! fragments.
//!
//! Frames are injected into B by sending them on A's end of the pipe; every frame either
//! stack sends is logged by a thin wrapper device, so tests can look at what went out.

use netfold::buf::{PacketBuf, Pool};
use netfold::iface::{AddrState, Counters, Stack, StackConfig, TxError};
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use netfold::phy::{Device, DeviceCaps, Medium};
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use netfold::wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use netfold::wire::ipv6::{self, Ipv6Addr, Ipv6Cidr, Ipv6Packet, Ipv6Repr};
use netfold::wire::ipv6ext::{self, FragmentRepr};
use netfold::wire::ndp::{na_flags, NdiscOption, NdiscOptions, NdiscRepr};
use netfold::wire::{IpProtocol, Ipv4Addr};
use std::cell::RefCell;
use std::rc::Rc;

const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xa]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xb]);

fn a6() -> Ipv6Addr {
    "2001:2:0:1::a".parse().unwrap()
}
fn b6() -> Ipv6Addr {
    "2001:2:0:1::b".parse().unwrap()
}
/// B's link-local address, from its MAC (RFC 4291 Appendix A).
fn b_ll() -> Ipv6Addr {
    ipv6::link_local(MAC_B.ipv6_interface_id())
}
fn a_ll() -> Ipv6Addr {
    ipv6::link_local(MAC_A.ipv6_interface_id())
}

/// A pipe end that logs every frame its stack sends, and can drop them all (a dead peer).
struct Logged {
    inner: PipeEnd,
    log: Rc<RefCell<Vec<Vec<u8>>>>,
    mute: Rc<RefCell<bool>>,
}

impl Device for Logged {
    fn caps(&self) -> DeviceCaps {
        self.inner.caps()
    }
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        self.inner.recv_batch(now, pool, out, max)
    }
    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        let mut log = self.log.borrow_mut();
        for f in frames.iter() {
            log.push(f.as_slice().to_vec());
        }
        if *self.mute.borrow() {
            for f in frames.drain(..) {
                pool.put(f);
            }
            return;
        }
        self.inner.send_batch(now, pool, frames);
    }
    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }
}

type Net = netfold_testkit::Net<Logged>;

fn config(mac: EthernetAddress, v4: Ipv4Addr, v6: &[Ipv6Addr], last: u8) -> StackConfig {
    StackConfig {
        mac,
        addrs6: v6.iter().map(|&a| Ipv6Cidr::new(a, 64).unwrap()).collect(),
        ..netfold_testkit::config(v4, last)
    }
}

fn net_with(ca: StackConfig, cb: StackConfig, link: PipeConfig) -> Net {
    let (ea, eb) = Pipe::new(link);
    let wrap = |inner| Logged {
        inner,
        log: Rc::default(),
        mute: Rc::default(),
    };
    Net::new(Stack::new(ca), Stack::new(cb), wrap(ea), wrap(eb))
}

fn default_configs() -> (StackConfig, StackConfig) {
    (
        config(MAC_A, Ipv4Addr::new(198, 18, 0, 1), &[a6()], 0xa),
        config(MAC_B, Ipv4Addr::new(198, 18, 0, 2), &[b6()], 0xb),
    )
}

fn net() -> Net {
    let (ca, cb) = default_configs();
    net_with(ca, cb, PipeConfig::default())
}

/// Runs `n` until DAD has finished on both stacks (1 s RetransTimer plus the random delay).
fn after_dad(mut n: Net) -> Net {
    n.run_for(Duration::from_millis(2500));
    for s in [&n.a, &n.b] {
        assert!(
            s.ipv6_addrs().all(|(_, st)| st == AddrState::Preferred),
            "{:?}",
            s.ipv6_addrs().collect::<Vec<_>>()
        );
    }
    n
}

/// Sends `frame` to B, as if A's side of the wire had sent it.
fn inject_to_b(n: &mut Net, frame: Vec<u8>) {
    let mut pool = Pool::new(2048, 4);
    let mut v = vec![PacketBuf::from_slice(&frame)];
    n.ea.inner.send_batch(n.now, &mut pool, &mut v);
}

/// Sends `frame` to A.
fn inject_to_a(n: &mut Net, frame: Vec<u8>) {
    let mut pool = Pool::new(2048, 4);
    let mut v = vec![PacketBuf::from_slice(&frame)];
    n.eb.inner.send_batch(n.now, &mut pool, &mut v);
}

/// An Ethernet frame around an IPv6 packet: `ip` (its payload length is set to
/// `payload.len()`) and `payload` (extension headers and upper layer).
fn frame6(dst_mac: EthernetAddress, mut ip: Ipv6Repr, payload: &[u8]) -> Vec<u8> {
    ip.payload_len = payload.len();
    let eth = EthernetRepr {
        src: MAC_A,
        dst: dst_mac,
        ethertype: EtherType::Ipv6,
        vlan: None,
    };
    let mut f = vec![0u8; 14 + 40 + payload.len()];
    eth.emit(&mut f[..14]).unwrap();
    ip.emit(&mut f[14..54]).unwrap();
    f[54..].copy_from_slice(payload);
    f
}

fn ip6(src: Ipv6Addr, dst: Ipv6Addr, nh: u8, hop_limit: u8) -> Ipv6Repr {
    Ipv6Repr {
        src,
        dst,
        next_header: IpProtocol::from(nh),
        payload_len: 0,
        hop_limit,
        traffic_class: 0,
        flow_label: 0,
    }
}

fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, r: &Icmpv6Repr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(src, dst, &mut b, true).unwrap();
    b
}

fn echo_request(src: Ipv6Addr, dst: Ipv6Addr, seq: u16, data: &[u8]) -> Vec<u8> {
    icmp6(
        src,
        dst,
        &Icmpv6Repr::EchoRequest {
            ident: 0x77,
            seq_no: seq,
            data,
        },
    )
}

/// The IPv6 packets (after the Ethernet header) in `frames`.
fn ipv6_packets(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    frames
        .iter()
        .filter_map(|f| {
            let e = EthernetFrame::new_checked(&f[..]).ok()?;
            (e.ethertype() == EtherType::Ipv6).then(|| e.payload().to_vec())
        })
        .collect()
}

/// The ICMPv6 messages in `frames` whose packet has no extension header, parsed by `f`.
fn icmpv6_in<T>(frames: &[Vec<u8>], f: impl Fn(&Ipv6Repr, Icmpv6Repr<'_>) -> Option<T>) -> Vec<T> {
    ipv6_packets(frames)
        .iter()
        .filter_map(|p| {
            let pkt = Ipv6Packet::new_checked(&p[..]).ok()?;
            let ip = Ipv6Repr::parse(&pkt).ok()?;
            if ip.next_header != IpProtocol::Icmpv6 {
                return None;
            }
            let m = Icmpv6Packet::new_checked(pkt.payload()).ok()?;
            let r = Icmpv6Repr::parse(&m, ip.src, ip.dst, true).ok()?;
            f(&ip, r)
        })
        .collect()
}

fn logged_a(n: &Net) -> Vec<Vec<u8>> {
    n.ea.log.borrow().clone()
}
fn logged_b(n: &Net) -> Vec<Vec<u8>> {
    n.eb.log.borrow().clone()
}

fn diff(after: Counters, before: Counters) -> impl Fn(fn(&Counters) -> u64) -> u64 {
    move |f| f(&after) - f(&before)
}

#[test]
fn two_stacks_resolve_each_other_by_ndp_and_ping6() {
    let mut n = net();
    // The link-local address is added on Ethernet, first, and every address starts tentative.
    let addrs: Vec<_> = n.a.ipv6_addrs().collect();
    assert_eq!(addrs.len(), 2);
    assert_eq!(addrs[0].0.addr(), a_ll());
    assert_eq!(addrs[1].0.addr(), a6());
    assert!(addrs.iter().all(|(_, s)| *s == AddrState::Tentative));
    // Nothing usable yet: no source address for a ping.
    assert_eq!(n.a.ping(n.now, b6(), 1, 1, b"early"), Err(TxError::NoRoute));
    assert_eq!(n.a.counters().ipv6_no_source, 1);
    let mut n = after_dad(n);
    // DAD sent one solicitation per address from the unspecified address.
    let mut dad_ns = icmpv6_in(&logged_a(&n), |ip, r| match r {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target, lladdr }) => {
            assert!(ip.src.is_unspecified() && lladdr.is_none());
            assert_eq!(ip.dst, ipv6::solicited_node(target));
            assert_eq!(ip.hop_limit, 255);
            Some(target)
        }
        _ => None,
    });
    dad_ns.sort();
    let mut want = vec![a_ll(), a6()];
    want.sort();
    assert_eq!(dad_ns, want);

    let t0 = n.a.counters();
    n.a.ping(n.now, b6(), 0x77, 1, &[0x5a; 100]).unwrap();
    assert_eq!(
        n.a.ndp_pending(),
        1,
        "the echo waits for B's link-layer address"
    );
    n.settle();
    let r = n.a.ping6_recv().expect("echo reply");
    assert_eq!((r.from, r.ident, r.seq_no, r.len), (b6(), 0x77, 1, 100));
    let d = diff(n.a.counters(), t0);
    assert_eq!(d(|c| c.ndp_ns_out), 1);
    assert_eq!(d(|c| c.ndp_na_in), 1);
    assert_eq!(d(|c| c.echo6_replies_in), 1);
    assert_eq!(n.a.neighbor6(n.now, b6()), Some(MAC_B));
    // B learned A from the solicitation's Source Link-Layer Address option (RFC 4861 §7.2.3)
    // and answered without asking.
    assert_eq!(n.b.neighbor6(n.now, a6()), Some(MAC_A));
    assert_eq!(
        n.b.counters().ndp_ns_out,
        2,
        "B's only solicitations were DAD's"
    );
    assert_eq!(n.b.counters().echo6_requests_in, 1);
    // The advertisement was solicited, with Override, and carried B's MAC.
    let nas = icmpv6_in(&logged_b(&n), |ip, r| match r {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags,
            target,
            lladdr,
        }) => Some((ip.src, ip.dst, ip.hop_limit, flags, target, lladdr)),
        _ => None,
    });
    assert_eq!(
        nas,
        vec![(
            b6(),
            a6(),
            255,
            na_flags::SOLICITED | na_flags::OVERRIDE,
            b6(),
            Some(MAC_B)
        )]
    );

    // Link-local to link-local: the source is A's link-local address (RFC 6724 Rule 2).
    n.a.ping(n.now, b_ll(), 0x77, 2, b"ll").unwrap();
    n.settle();
    let r = n.a.ping6_recv().expect("link-local echo reply");
    assert_eq!((r.from, r.seq_no), (b_ll(), 2));
    let reqs = icmpv6_in(&logged_a(&n), |ip, r| match r {
        Icmpv6Repr::EchoRequest { seq_no: 2, .. } => Some(ip.src),
        _ => None,
    });
    assert_eq!(reqs, vec![a_ll()]);

    // IPv4 runs beside it unchanged.
    n.a.ping(n.now, Ipv4Addr::new(198, 18, 0, 2), 1, 1, b"v4")
        .unwrap();
    n.settle();
    assert!(n.a.ping_recv().is_some());
}

#[test]
fn ipv6_off_by_default_drops_and_counts_as_before() {
    let (mut ca, mut cb) = default_configs();
    ca.addrs6.clear();
    cb.addrs6.clear();
    let mut n = net_with(ca, cb, PipeConfig::default());
    assert_eq!(n.b.ipv6_addrs().count(), 0);
    let req = echo_request(a6(), b6(), 1, b"x");
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 58, 64), &req));
    let mc = ipv6::solicited_node(b6());
    let ns = icmp6(
        a6(),
        mc,
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target: b6(),
            lladdr: Some(MAC_A),
        }),
    );
    inject_to_b(
        &mut n,
        frame6(
            EthernetAddress::from_ipv6_multicast(mc),
            ip6(a6(), mc, 58, 255),
            &ns,
        ),
    );
    n.settle();
    let c = n.b.counters();
    assert_eq!((c.unsupported, c.eth_not_for_us), (1, 1));
    assert_eq!((c.ipv6_in, c.ndp_in, c.icmpv6_in), (0, 0, 0));
    assert_eq!(c.frames_out, 0, "nothing answered");
    assert_eq!(n.a.ping(n.now, b6(), 1, 1, b"x"), Err(TxError::NoRoute));
}

#[test]
fn a_tun_medium_runs_ipv6_without_ndp_or_dad() {
    let (mut ca, mut cb) = default_configs();
    ca.medium = Medium::Ip;
    cb.medium = Medium::Ip;
    let mut n = net_with(ca, cb, PipeConfig::default().medium(Medium::Ip));
    // No link-local address without a MAC; usable at the first poll (no DAD on a TUN, as
    // Linux on NOARP devices).
    assert_eq!(n.a.ipv6_addrs().count(), 1);
    n.poll();
    assert!(n.a.ipv6_addrs().all(|(_, s)| s == AddrState::Preferred));
    n.a.ping(n.now, b6(), 1, 9, &[1; 2000]).unwrap();
    n.settle();
    let r = n.a.ping6_recv().expect("echo reply over the IP medium");
    assert_eq!((r.from, r.len), (b6(), 2000));
    for s in [&n.a, &n.b] {
        let c = s.counters();
        assert_eq!((c.ndp_in, c.ndp_ns_out, c.ndp_na_out), (0, 0, 0));
        assert_eq!(
            c.frag6_out, 2,
            "2000 bytes of echo cross a 1500-byte MTU in two fragments"
        );
        assert_eq!(c.frag6_reassembled, 1);
    }
    // IPv4 on the same TUN-like link still works (the first nibble picks the family).
    n.a.ping(n.now, Ipv4Addr::new(198, 18, 0, 2), 1, 1, b"v4")
        .unwrap();
    n.settle();
    assert!(n.a.ping_recv().is_some());
}

#[test]
fn dad_finds_a_duplicate_advertised_by_its_owner() {
    let (mut ca, mut cb) = default_configs();
    // B already owns A's global address (no DAD), A checks it.
    cb.addrs6.push(Ipv6Cidr::new(a6(), 64).unwrap());
    cb.dad_transmits = 0;
    let mut n = net_with(ca.clone(), cb, PipeConfig::default());
    n.run_for(Duration::from_millis(2500));
    let st: Vec<_> = n.a.ipv6_addrs().map(|(c, s)| (c.addr(), s)).collect();
    assert_eq!(
        st,
        vec![(a_ll(), AddrState::Preferred), (a6(), AddrState::Duplicate)]
    );
    assert_eq!(n.a.counters().ndp_dad_conflicts, 1);
    // B answered A's DAD solicitation to all nodes, unsolicited (RFC 4861 §7.2.4).
    let na = icmpv6_in(&logged_b(&n), |ip, r| match r {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target, .. }) if target == a6() => {
            Some((ip.dst, flags & na_flags::SOLICITED))
        }
        _ => None,
    });
    assert_eq!(na, vec![(ipv6::LINK_LOCAL_ALL_NODES, 0)]);
    // The duplicate is never a source: a global destination gets the link-local one.
    let before = logged_a(&n).len();
    n.a.ping(n.now, b6(), 1, 1, b"x").unwrap();
    n.settle();
    let src = icmpv6_in(&logged_a(&n)[before..], |ip, r| match r {
        Icmpv6Repr::EchoRequest { .. } => Some(ip.src),
        _ => None,
    });
    assert_eq!(src, vec![a_ll()]);

    // The other way: a solicitation from the unspecified address for our tentative address
    // (another node doing DAD) makes it a duplicate too (RFC 4862 §5.4.3).
    ca.dad_transmits = 3;
    let (_, cb) = default_configs();
    let mut n = net_with(ca, cb, PipeConfig::default());
    n.poll();
    let mc = ipv6::solicited_node(a6());
    let ns = icmp6(
        Ipv6Addr::UNSPECIFIED,
        mc,
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target: a6(),
            lladdr: None,
        }),
    );
    let f = frame6(
        EthernetAddress::from_ipv6_multicast(mc),
        ip6(Ipv6Addr::UNSPECIFIED, mc, 58, 255),
        &ns,
    );
    inject_to_a(&mut n, f);
    n.run_for(Duration::from_secs(5));
    let a: Vec<_> = n.a.ipv6_addrs().map(|(_, s)| s).collect();
    assert_eq!(a, vec![AddrState::Preferred, AddrState::Duplicate]);
    assert_eq!(n.a.counters().ndp_dad_conflicts, 1);
}

#[test]
fn hostile_extension_headers_are_counted_drops() {
    let mut n = after_dad(net());
    let req = echo_request(a6(), b6(), 1, b"x");
    // A Hop-by-Hop header saying 16 bytes in an 8-byte payload: truncated.
    let mut p = vec![58u8, 1, 1, 4, 0, 0, 0, 0];
    let b0 = n.b.counters();
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 0, 64), &p));
    // Nine Destination Options headers, one over the bound.
    p.clear();
    for i in 0..9 {
        let next = if i == 8 {
            58
        } else {
            ipv6ext::DESTINATION_OPTIONS
        };
        p.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
    }
    p.extend_from_slice(&req);
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 60, 64), &p));
    // Eight are within it: answered.
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 60, 64), &p[8..]));
    // An unrecognized option with action 01: discarded silently.
    let mut d = vec![58u8, 0, 0x5e, 4, 0, 0, 0, 0];
    d.extend_from_slice(&req);
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 60, 64), &d));
    // A Hop-by-Hop header after a Destination Options header: Parameter Problem code 1.
    let mut h = vec![0u8, 0, 1, 4, 0, 0, 0, 0, 58, 0, 1, 4, 0, 0, 0, 0];
    h.extend_from_slice(&req);
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 60, 64), &h));
    n.settle();
    let d = diff(n.b.counters(), b0);
    assert_eq!(d(|c| c.ipv6_ext_malformed), 1);
    assert_eq!(d(|c| c.ipv6_ext_limit), 1);
    assert_eq!(d(|c| c.ipv6_ext_discarded), 1);
    assert_eq!(d(|c| c.ipv6_unknown_next_header), 1);
    assert_eq!(
        d(|c| c.echo6_requests_in),
        1,
        "only the chain within bounds reached ICMPv6"
    );
    assert_eq!(n.a.ping6_recv().map(|r| r.seq_no), Some(1));
    let pp = icmpv6_in(&logged_b(&n), |_, r| match r {
        Icmpv6Repr::ParamProblem { code, pointer, .. } => Some((code, pointer)),
        _ => None,
    });
    assert_eq!(
        pp,
        vec![(1, 40)],
        "pointing at the Destination Options' Next Header"
    );
}

#[test]
fn unrecognized_next_headers_and_options_get_parameter_problems_rate_limited() {
    let mut n = after_dad(net());
    let b0 = n.b.counters();
    // Next header 253 (RFC 3692 experimentation): code 1, pointer 6, twenty times; the bucket
    // holds ten.
    for _ in 0..20 {
        inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 253, 64), &[0; 8]));
    }
    n.settle();
    let d = diff(n.b.counters(), b0);
    assert_eq!(d(|c| c.ipv6_unknown_next_header), 20);
    assert_eq!(d(|c| c.icmpv6_errors_out), 10);
    assert_eq!(d(|c| c.icmpv6_rate_limited), 10);
    let pp = icmpv6_in(&logged_b(&n), |ip, r| match r {
        Icmpv6Repr::ParamProblem {
            code,
            pointer,
            header,
            data,
        } => Some((
            ip.src,
            ip.dst,
            code,
            pointer,
            header.next_header,
            data.len(),
        )),
        _ => None,
    });
    assert_eq!(pp.len(), 10);
    assert_eq!(pp[0], (b6(), a6(), 1, 6, IpProtocol::Unknown(253), 8));
    assert_eq!(n.a.counters().icmpv6_errors_in, 10);

    // Options to all nodes (ff02::1): action 10 is reported even to multicast (RFC 4443 §2.4
    // (e.3) exception 2), action 11 is not.
    n.run_for(Duration::from_secs(2));
    let b1 = n.b.counters();
    let all = ipv6::LINK_LOCAL_ALL_NODES;
    let mac = EthernetAddress::from_ipv6_multicast(all);
    for kind in [0x9eu8, 0xde] {
        let mut d = vec![58u8, 0, kind, 4, 0, 0, 0, 0];
        d.extend_from_slice(&echo_request(a6(), all, 5, b"m"));
        inject_to_b(&mut n, frame6(mac, ip6(a6(), all, 60, 64), &d));
    }
    // An echo request to all nodes is answered, from a unicast address (RFC 4443 §4.2).
    inject_to_b(
        &mut n,
        frame6(
            mac,
            ip6(a_ll(), all, 58, 64),
            &echo_request(a_ll(), all, 6, b"m"),
        ),
    );
    // And a TCP segment for B goes to the transport (a zeroed header: malformed there).
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 6, 64), &[0; 20]));
    n.settle();
    let d = diff(n.b.counters(), b1);
    assert_eq!(d(|c| c.ipv6_param_problem), 1);
    assert_eq!(d(|c| c.ipv6_ext_discarded), 1);
    assert_eq!(d(|c| c.icmpv6_errors_out), 1);
    assert_eq!(d(|c| c.tcp_malformed), 1);
    let r = n.a.ping6_recv().expect("reply to the multicast echo");
    assert_eq!((r.from, r.seq_no), (b_ll(), 6));
}

fn fragment(n_id: u32, offset: usize, more: bool, nh: u8, data: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 8 + data.len()];
    FragmentRepr {
        next_header: nh,
        offset,
        more_frags: more,
        ident: n_id,
    }
    .emit(&mut p)
    .unwrap();
    p[8..].copy_from_slice(data);
    p
}

#[test]
fn fragments_reassemble_and_hostile_ones_are_counted() {
    let mut n = after_dad(net());
    let req = echo_request(a6(), b6(), 3, &[7; 40]); // 48 bytes
    let b0 = n.b.counters();
    let send = |n: &mut Net, p: Vec<u8>| {
        let f = frame6(MAC_B, ip6(a6(), b6(), 44, 64), &p);
        inject_to_b(n, f)
    };
    // In order, out of order, with an exact duplicate: one reply.
    send(&mut n, fragment(1, 0, true, 58, &req[..24]));
    send(&mut n, fragment(1, 0, true, 58, &req[..24]));
    send(&mut n, fragment(1, 24, false, 58, &req[24..]));
    n.settle();
    assert_eq!(n.a.ping6_recv().map(|r| r.seq_no), Some(3));
    // Overlapping: the datagram is discarded (RFC 5722), no reply.
    send(&mut n, fragment(2, 0, true, 58, &req[..24]));
    send(&mut n, fragment(2, 16, false, 58, &req[16..]));
    // An atomic fragment is a whole packet (RFC 6946).
    send(&mut n, fragment(3, 0, false, 58, &req));
    // M set but not a multiple of 8: Parameter Problem pointing at the Payload Length.
    send(&mut n, fragment(4, 0, true, 58, &req[..20]));
    // A first fragment that does not hold the whole header chain (a Destination Options
    // header cut off): Parameter Problem code 3 (RFC 7112).
    send(
        &mut n,
        fragment(5, 0, true, 60, &[58, 1, 1, 12, 0, 0, 0, 0]),
    );
    n.settle();
    let d = diff(n.b.counters(), b0);
    assert_eq!(d(|c| c.frag6_in), 8);
    assert_eq!(d(|c| c.frag6_reassembled), 1);
    assert_eq!(d(|c| c.frag6_overlaps), 1);
    assert_eq!(d(|c| c.frag6_atomic), 1);
    assert_eq!(d(|c| c.frag6_incomplete_chain), 1);
    assert_eq!(d(|c| c.frag6_dropped), 3);
    assert_eq!(
        n.a.ping6_recv().map(|r| r.seq_no),
        Some(3),
        "the atomic one"
    );
    assert!(n.a.ping6_recv().is_none());
    let pp = icmpv6_in(&logged_b(&n), |_, r| match r {
        Icmpv6Repr::ParamProblem { code, pointer, .. } => Some((code, pointer)),
        _ => None,
    });
    assert_eq!(pp, vec![(0, 4), (3, 0)]);

    // A first fragment alone: 60 s later the datagram is dropped and its source hears Time
    // Exceeded code 1 (RFC 8200 §4.5).
    let b1 = n.b.counters();
    send(&mut n, fragment(6, 0, true, 58, &req[..24]));
    n.settle();
    n.run_for(Duration::from_secs(61));
    let d = diff(n.b.counters(), b1);
    assert_eq!(d(|c| c.frag6_timeouts), 1);
    let te = icmpv6_in(&logged_b(&n), |_, r| match r {
        Icmpv6Repr::TimeExceeded { code, header, data } => {
            Some((code, header.next_header, data.len()))
        }
        _ => None,
    });
    assert_eq!(te, vec![(1, IpProtocol::from(44), 32)]);
}

#[test]
fn ndp_with_a_forwarded_hop_limit_or_an_unknown_target_is_dropped() {
    let mut n = after_dad(net());
    let b0 = n.b.counters();
    let mc = ipv6::solicited_node(b6());
    let ns = icmp6(
        a6(),
        mc,
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target: b6(),
            lladdr: Some(MAC_A),
        }),
    );
    let mmac = EthernetAddress::from_ipv6_multicast(mc);
    // Hop limit 64: it could have been forwarded (RFC 4861 §7.1.1).
    inject_to_b(&mut n, frame6(mmac, ip6(a6(), mc, 58, 64), &ns));
    // An advertisement for an address B never asked about (§7.2.5: discarded).
    let stranger: Ipv6Addr = "2001:2:0:1::99".parse().unwrap();
    let na = icmp6(
        stranger,
        b6(),
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags: na_flags::SOLICITED | na_flags::OVERRIDE,
            target: stranger,
            lladdr: Some(MAC_A),
        }),
    );
    inject_to_b(&mut n, frame6(MAC_B, ip6(stranger, b6(), 58, 255), &na));
    // A solicited advertisement to a multicast destination is invalid (§7.1.2).
    let all = ipv6::LINK_LOCAL_ALL_NODES;
    let na_mc = icmp6(
        stranger,
        all,
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags: na_flags::SOLICITED,
            target: stranger,
            lladdr: Some(MAC_A),
        }),
    );
    let amac = EthernetAddress::from_ipv6_multicast(all);
    inject_to_b(&mut n, frame6(amac, ip6(stranger, all, 58, 255), &na_mc));
    // A solicitation for an address that is not B's.
    let ns_other = icmp6(
        a6(),
        ipv6::solicited_node(stranger),
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target: stranger,
            lladdr: Some(MAC_A),
        }),
    );
    let smc = ipv6::solicited_node(stranger);
    // (B is not in that group: the frame is not even for it.)
    inject_to_b(
        &mut n,
        frame6(
            EthernetAddress::from_ipv6_multicast(smc),
            ip6(a6(), smc, 58, 255),
            &ns_other,
        ),
    );
    // Addressed to B's own solicited-node group but for another target.
    let ns_other = icmp6(
        a6(),
        mc,
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target: stranger,
            lladdr: Some(MAC_A),
        }),
    );
    inject_to_b(&mut n, frame6(mmac, ip6(a6(), mc, 58, 255), &ns_other));
    // A bad checksum.
    let mut bad = ns.clone();
    bad[2] ^= 0xff;
    inject_to_b(&mut n, frame6(mmac, ip6(a6(), mc, 58, 255), &bad));
    n.settle();
    let d = diff(n.b.counters(), b0);
    assert_eq!(d(|c| c.ndp_bad_hop_limit), 1);
    assert_eq!(d(|c| c.ndp_na_unknown_target), 1);
    assert_eq!(d(|c| c.ndp_invalid), 1);
    assert_eq!(d(|c| c.eth_not_for_us), 1);
    assert_eq!(d(|c| c.ndp_not_for_us), 1);
    assert_eq!(d(|c| c.icmpv6_bad_checksum), 1);
    assert_eq!(d(|c| c.ndp_na_out), 0, "none of them was answered");
    assert_eq!(n.b.neighbor6(n.now, stranger), None);
    assert_eq!(n.b.neighbor6(n.now, a6()), None);
}

#[test]
fn packet_too_big_lowers_the_path_mtu_and_big_echoes_are_fragmented() {
    let mut n = after_dad(net());
    n.a.ping(n.now, b6(), 1, 1, &[1; 1400]).unwrap();
    n.settle();
    assert_eq!(n.a.ping6_recv().map(|r| r.len), Some(1400));
    assert_eq!(n.a.counters().frag6_out, 0, "1448 bytes fit 1500");
    assert_eq!(n.a.path_mtu(n.now, b6()), 1500);

    // A router says the path to B is 1280 wide, quoting A's echo.
    let quoted = ipv6_packets(&logged_a(&n))
        .into_iter()
        .find(|p| p.len() > 1400)
        .unwrap();
    let router: Ipv6Addr = "2001:2:0:1::1".parse().unwrap();
    let ptb = |mtu| {
        let qp = Ipv6Packet::new_checked(&quoted[..]).unwrap();
        let header = Ipv6Repr::parse(&qp).unwrap();
        let r = Icmpv6Repr::PacketTooBig {
            mtu,
            header,
            data: &quoted[40..1232],
        };
        icmp6(router, a6(), &r)
    };
    // Below 1280: discarded (RFC 8201 §4).
    let mut f = frame6(MAC_A, ip6(router, a6(), 58, 64), &ptb(1000));
    f[6..12].copy_from_slice(&MAC_B.0);
    inject_to_a(&mut n, f);
    let mut f = frame6(MAC_A, ip6(router, a6(), 58, 64), &ptb(1280));
    f[6..12].copy_from_slice(&MAC_B.0);
    inject_to_a(&mut n, f);
    n.settle();
    let c = n.a.counters();
    assert_eq!((c.icmpv6_ptb_in, c.icmpv6_ptb_ignored), (2, 1));
    assert_eq!(n.a.path_mtu(n.now, b6()), 1280);
    assert_eq!(n.a.path_mtu(n.now, b_ll()), 1500, "per destination");

    let before = logged_a(&n).len();
    n.a.ping(n.now, b6(), 1, 2, &[2; 1400]).unwrap();
    n.settle();
    assert_eq!(n.a.ping6_recv().map(|r| (r.seq_no, r.len)), Some((2, 1400)));
    let sent = ipv6_packets(&logged_a(&n)[before..]);
    assert_eq!(sent.len(), 2, "one echo in two fragments");
    for p in &sent {
        assert!(p.len() <= 1280, "{}", p.len());
        assert_eq!(p[6], ipv6ext::FRAGMENT);
    }
    assert_eq!(n.a.counters().frag6_out, 2);
    assert_eq!(n.b.counters().frag6_reassembled, 1);

    // A 3000-byte echo: fragmented both ways (B's reply at its 1500-byte MTU).
    n.a.ping(n.now, b6(), 1, 3, &[3; 3000]).unwrap();
    n.settle();
    assert_eq!(n.a.ping6_recv().map(|r| (r.seq_no, r.len)), Some((3, 3000)));
    assert_eq!(n.a.counters().frag6_reassembled, 1);
    assert!(n.b.counters().frag6_out >= 3);
}

#[test]
fn unreachability_detection_probes_a_stale_neighbour() {
    let mut n = after_dad(net());
    n.a.ping(n.now, b6(), 1, 1, b"x").unwrap();
    n.settle();
    assert!(n.a.ping6_recv().is_some());
    let ns0 = n.a.counters().ndp_ns_out;
    // Past the reachable time (at most 1.5 x 30 s) the entry is STALE: still used, it moves
    // to DELAY, and 5 s later one unicast probe confirms it (RFC 4861 §7.3.3).
    n.run_for(Duration::from_secs(46));
    n.a.ping(n.now, b6(), 1, 2, b"x").unwrap();
    n.settle();
    assert!(
        n.a.ping6_recv().is_some(),
        "a stale entry still carries packets"
    );
    n.run_for(Duration::from_secs(6));
    let probes = icmpv6_in(&logged_a(&n), |ip, r| match r {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target, .. }) if ip.dst == target => {
            Some(target)
        }
        _ => None,
    });
    assert_eq!(probes, vec![b6()], "one unicast probe");
    assert_eq!(n.a.counters().ndp_ns_out, ns0 + 1);
    assert_eq!(n.a.neighbor6(n.now, b6()), Some(MAC_B));

    // B goes silent: after the next delay, three probes, then the entry is deleted.
    *n.eb.mute.borrow_mut() = true;
    n.run_for(Duration::from_secs(46));
    n.a.ping(n.now, b6(), 1, 3, b"x").unwrap();
    n.run_for(Duration::from_secs(10));
    assert_eq!(n.a.counters().ndp_nud_failed, 1);
    assert_eq!(n.a.neighbor6(n.now, b6()), None);
    // Resolution starts over and gives up after three solicitations.
    n.a.ping(n.now, b6(), 1, 4, b"x").unwrap();
    n.run_for(Duration::from_secs(5));
    let c = n.a.counters();
    assert_eq!((c.ndp_resolution_failed, c.ndp_unresolved_drops), (1, 1));
    assert_eq!(n.a.ndp_pending(), 0);
}

#[test]
fn off_link_destinations_go_to_the_default_router() {
    let (mut ca, cb) = default_configs();
    let far: Ipv6Addr = "2001:2:99::1".parse().unwrap();
    let mut n = after_dad(net_with(ca.clone(), cb.clone(), PipeConfig::default()));
    assert_eq!(n.a.ping(n.now, far, 1, 1, b"x"), Err(TxError::NoRoute));
    ca.gateway6 = Some(b_ll());
    let mut n = after_dad(net_with(ca, cb, PipeConfig::default()));
    let b0 = n.b.counters();
    n.a.ping(n.now, far, 1, 1, b"x").unwrap();
    n.settle();
    // A resolved the router and sent the echo to its MAC; B (a host) does not forward.
    assert_eq!(n.a.neighbor6(n.now, b_ll()), Some(MAC_B));
    let to_b: Vec<_> = logged_a(&n)
        .into_iter()
        .filter(|f| f[..6] == MAC_B.0 && f[12..14] == [0x86, 0xdd])
        .filter_map(|f| Ipv6Repr::parse(&Ipv6Packet::new_checked(&f[14..]).ok()?).ok())
        .filter(|ip| ip.dst == far)
        .collect();
    assert_eq!(to_b.len(), 1);
    assert_eq!(
        to_b[0].src,
        a6(),
        "a global source for a global destination"
    );
    assert_eq!(diff(n.b.counters(), b0)(|c| c.ipv6_not_for_us), 1);
}

#[test]
fn router_advertisements_set_the_router_entry_hop_limit_and_mtu() {
    let mut n = after_dad(net());
    let router: Ipv6Addr = "fe80::99".parse().unwrap();
    let rmac = EthernetAddress([2, 0, 0, 0, 0, 0x99]);
    let mut opts = [0u8; 16];
    NdiscOption::SourceLinkAddr(rmac).emit(&mut opts).unwrap();
    NdiscOption::Mtu(1400).emit(&mut opts[8..]).unwrap();
    let ra = icmp6(
        router,
        ipv6::LINK_LOCAL_ALL_NODES,
        &Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
            hop_limit: 32,
            flags: 0,
            router_lifetime: 1800,
            reachable_time: 0,
            retrans_timer: 0,
            options: NdiscOptions::new(&opts).unwrap(),
        }),
    );
    let all = ipv6::LINK_LOCAL_ALL_NODES;
    let f = frame6(
        EthernetAddress::from_ipv6_multicast(all),
        ip6(router, all, 58, 255),
        &ra,
    );
    inject_to_b(&mut n, f);
    // From a global source: invalid (RFC 4861 §6.1.2).
    let f = frame6(
        EthernetAddress::from_ipv6_multicast(all),
        ip6(a6(), all, 58, 255),
        &icmp6(
            a6(),
            all,
            &Icmpv6Repr::Ndisc(NdiscRepr::parse(&ra).unwrap()),
        ),
    );
    inject_to_b(&mut n, f);
    n.settle();
    let c = n.b.counters();
    assert_eq!((c.ndp_ra_in, c.ndp_invalid), (2, 1));
    assert_eq!(n.b.neighbor6(n.now, router), Some(rmac));
    assert_eq!(n.b.path_mtu(n.now, a6()), 1400);
    let before = logged_b(&n).len();
    n.b.ping(n.now, a6(), 1, 1, &[0; 1400]).unwrap();
    n.settle();
    let sent = ipv6_packets(&logged_b(&n)[before..]);
    let echo: Vec<_> = sent.iter().filter(|p| p[6] == ipv6ext::FRAGMENT).collect();
    assert_eq!(echo.len(), 2, "1448 bytes over a 1400-byte link MTU");
    assert!(echo.iter().all(|p| p[7] == 32), "the advertised hop limit");
}

#[test]
fn advertisements_update_the_cache_by_the_override_rules() {
    let mut n = after_dad(net());
    n.a.ping(n.now, b6(), 1, 1, b"x").unwrap();
    n.settle();
    assert_eq!(n.a.neighbor6(n.now, b6()), Some(MAC_B));
    let other = EthernetAddress([2, 0, 0, 0, 0, 0xc]);
    let na = |flags| {
        let m = icmp6(
            b6(),
            a6(),
            &Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
                flags,
                target: b6(),
                lladdr: Some(other),
            }),
        );
        let mut f = frame6(MAC_A, ip6(b6(), a6(), 58, 255), &m);
        f[6..12].copy_from_slice(&MAC_B.0);
        f
    };
    // RFC 4861 §7.2.5: without Override, another address does not replace the cached one.
    inject_to_a(&mut n, na(0));
    n.settle();
    assert_eq!(n.a.neighbor6(n.now, b6()), Some(MAC_B));
    // With Override it does.
    inject_to_a(&mut n, na(na_flags::OVERRIDE));
    n.settle();
    assert_eq!(n.a.neighbor6(n.now, b6()), Some(other));
    assert_eq!(n.a.counters().ndp_na_in, 3);
}

#[test]
fn no_error_answers_an_error_and_the_pending_queue_is_bounded() {
    let (mut ca, cb) = default_configs();
    ca.arp_pending_limit = 2;
    let mut n = after_dad(net_with(ca, cb, PipeConfig::default()));
    // An ICMPv6 error (Destination Unreachable) behind an option whose action asks for a
    // Parameter Problem: RFC 4443 §2.4 (e.1) forbids answering it.
    let quoted = Ipv6Repr {
        payload_len: 8,
        ..ip6(b6(), a6(), 17, 64)
    };
    let err = icmp6(
        a6(),
        b6(),
        &Icmpv6Repr::DstUnreachable {
            code: 4,
            header: quoted,
            data: &[0; 8],
        },
    );
    let mut p = vec![58u8, 0, 0x9e, 4, 0, 0, 0, 0];
    p.extend_from_slice(&err);
    let b0 = n.b.counters();
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 60, 64), &p));
    // The same option in front of an echo request is answered.
    let mut q = p[..8].to_vec();
    q.extend_from_slice(&echo_request(a6(), b6(), 1, b"x"));
    inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 60, 64), &q));
    n.settle();
    let d = diff(n.b.counters(), b0);
    assert_eq!(d(|c| c.ipv6_param_problem), 2);
    assert_eq!(d(|c| c.icmpv6_errors_suppressed), 1);
    assert_eq!(d(|c| c.icmpv6_errors_out), 1);

    // B goes silent: A parks at most two frames for it, refuses the third, and after three
    // solicitations a second apart drops the two.
    *n.eb.mute.borrow_mut() = true;
    let ns0 = n.a.counters().ndp_ns_out;
    let far_b: Ipv6Addr = "2001:2:0:1::bb".parse().unwrap();
    n.a.ping(n.now, far_b, 1, 1, b"x").unwrap();
    n.a.ping(n.now, far_b, 1, 2, b"x").unwrap();
    assert_eq!(
        n.a.ping(n.now, far_b, 1, 3, b"x"),
        Err(TxError::PendingFull)
    );
    n.run_for(Duration::from_secs(5));
    let c = n.a.counters();
    assert_eq!(c.ndp_pending_overflow, 1);
    assert_eq!(c.ndp_ns_out - ns0, 3, "MAX_MULTICAST_SOLICIT");
    assert_eq!((c.ndp_resolution_failed, c.ndp_unresolved_drops), (1, 2));
}

// ---- TCP and UDP over IPv6 (the transport wired to the network layer) ----

mod transport {
    use super::*;
    use netfold::iface::UdpBindOptions;
    use netfold::socket::{TcpListener, TcpStream, UdpSocket};
    use netfold::tcp;
    use netfold::wire::tcp::{PseudoHeader, TcpPacket, TcpRepr};
    use std::io::ErrorKind;
    use std::net::{IpAddr, SocketAddr};

    fn sa(ip: Ipv6Addr, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V6(ip), port)
    }

    fn until<T>(n: &mut Net, mut f: impl FnMut(&mut Net) -> std::io::Result<T>) -> T {
        for _ in 0..5000 {
            n.settle();
            match f(n) {
                Ok(v) => return v,
                Err(e) if e.kind() == ErrorKind::WouldBlock => n.now += Duration::from_millis(1),
                Err(e) => panic!("unexpected error: {e}"),
            }
        }
        panic!("no progress");
    }

    /// The TCP segments (IPv6, no extension headers) in `frames`: header and payload length.
    fn tcp6_segments(frames: &[Vec<u8>]) -> Vec<(Ipv6Repr, TcpRepr, usize)> {
        ipv6_packets(frames)
            .iter()
            .filter_map(|p| {
                let pkt = Ipv6Packet::new_checked(&p[..]).ok()?;
                let ip = Ipv6Repr::parse(&pkt).ok()?;
                if ip.next_header != IpProtocol::Tcp {
                    return None;
                }
                let t = TcpPacket::new_checked(pkt.payload()).ok()?;
                // Every segment's checksum is right over the IPv6 pseudo-header.
                let r = TcpRepr::parse(&t, &PseudoHeader::new(ip.src, ip.dst), true).ok()?;
                Some((ip, r, t.payload().len()))
            })
            .collect()
    }

    #[test]
    fn tcp_over_ipv6_end_to_end_beside_ipv4_on_one_dual_stack_listener() {
        let mut n = after_dad(net());
        let any = sa(Ipv6Addr::UNSPECIFIED, 80);
        let l = TcpListener::bind(&mut n.b, any, 8, tcp::Config::default()).unwrap();
        let c6 = TcpStream::connect(&mut n.a, n.now, sa(b6(), 80), tcp::Config::default()).unwrap();
        let (s6, peer6) = until(&mut n, |n| l.accept(&mut n.b));
        assert!(c6.is_connected(&mut n.a).unwrap());
        let local6 = c6.local_addr(&n.a).unwrap();
        assert_eq!(local6.ip(), IpAddr::V6(a6()), "RFC 6724: the global source");
        assert_eq!(peer6, local6);
        assert_eq!(s6.local_addr(&n.b).unwrap(), sa(b6(), 80));
        // An IPv4 client on the same listener: a v4-mapped peer.
        let c4 = TcpStream::connect(
            &mut n.a,
            n.now,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), 80),
            tcp::Config::default(),
        )
        .unwrap();
        let (s4, peer4) = until(&mut n, |n| l.accept(&mut n.b));
        let p4 = c4.local_addr(&n.a).unwrap().port();
        let a4 = Ipv4Addr::new(198, 18, 0, 1).to_ipv6_mapped();
        assert_eq!(peer4, sa(a4, p4));

        // 1 MB up over IPv6 and 300 kB down, 50 kB over IPv4 alongside; every byte checked.
        let up: Vec<u8> = (0..1_000_000u32).map(|i| (i * 31 % 253) as u8).collect();
        let down: Vec<u8> = (0..300_000u32).map(|i| (i * 17 % 241) as u8).collect();
        let four: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 239) as u8).collect();
        let (mut su, mut sd, mut s4n) = (0, 0, 0);
        let (mut gu, mut gd, mut g4) = (Vec::new(), Vec::new(), Vec::new());
        let mut buf = vec![0u8; 65536];
        for _ in 0..20_000 {
            if su < up.len() {
                su += c6.write(&mut n.a, &up[su..]).unwrap_or(0);
            }
            if sd < down.len() {
                sd += s6.write(&mut n.b, &down[sd..]).unwrap_or(0);
            }
            if s4n < four.len() {
                s4n += c4.write(&mut n.a, &four[s4n..]).unwrap_or(0);
            }
            n.settle();
            while let Ok(k) = s6.read(&mut n.b, &mut buf) {
                if k == 0 {
                    break;
                }
                gu.extend_from_slice(&buf[..k]);
            }
            while let Ok(k) = c6.read(&mut n.a, &mut buf) {
                if k == 0 {
                    break;
                }
                gd.extend_from_slice(&buf[..k]);
            }
            while let Ok(k) = s4.read(&mut n.b, &mut buf) {
                if k == 0 {
                    break;
                }
                g4.extend_from_slice(&buf[..k]);
            }
            if gu.len() == up.len() && gd.len() == down.len() && g4.len() == four.len() {
                break;
            }
            n.now += Duration::from_millis(1);
        }
        assert!(gu == up, "IPv6 upstream: {} of {}", gu.len(), up.len());
        assert!(gd == down, "IPv6 downstream");
        assert!(g4 == four, "IPv4 alongside");

        // On the wire: IPv6 segments of at most MTU - 60 payload bytes (minus timestamps),
        // none larger than the MTU, the SYN announcing 1440.
        let segs = tcp6_segments(&logged_a(&n));
        assert!(!segs.is_empty());
        let syn = segs.iter().find(|(_, t, _)| t.flags.syn()).unwrap();
        assert_eq!(syn.1.options.mss, Some(1440));
        let biggest = segs
            .iter()
            .map(|(_, t, len)| t.header_len() + len)
            .max()
            .unwrap();
        assert_eq!(
            biggest,
            1500 - 40,
            "full-sized segments fill the MTU exactly"
        );
        assert!(
            n.a.counters().gso_segments > 0,
            "super-segments cut at the IPv6 MTU"
        );
        assert_eq!(n.a.counters().tx_too_big, 0);
        let d = n.b.counters();
        assert!(d.gro_merges > 0, "IPv6 segments merged by GRO");
        assert_eq!(d.tcp_bad_checksum, 0);

        // Orderly close over IPv6.
        c6.shutdown_write(&mut n.a).unwrap();
        n.settle();
        assert_eq!(s6.read(&mut n.b, &mut buf).unwrap(), 0);
        let fin = tcp6_segments(&logged_a(&n))
            .into_iter()
            .any(|(ip, t, _)| t.flags.fin() && ip.dst == b6());
        assert!(fin);
    }

    #[test]
    fn tcp_over_ipv6_refused_and_reset() {
        let mut n = after_dad(net());
        let c = TcpStream::connect(&mut n.a, n.now, sa(b6(), 81), tcp::Config::default()).unwrap();
        n.settle();
        let e = c.is_connected(&mut n.a).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        let rst = tcp6_segments(&logged_b(&n))
            .into_iter()
            .find(|(_, t, _)| t.flags.rst())
            .expect("an IPv6 RST");
        assert_eq!((rst.0.src, rst.0.dst), (b6(), a6()));
        // A v6-only listener on B's port 82 takes IPv6 only.
        let cfg = tcp::Config {
            v6only: true,
            ..Default::default()
        };
        let l = TcpListener::bind(&mut n.b, sa(Ipv6Addr::UNSPECIFIED, 82), 4, cfg).unwrap();
        let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), 82);
        let c4 = TcpStream::connect(&mut n.a, n.now, v4, Default::default()).unwrap();
        n.settle();
        assert_eq!(
            c4.is_connected(&mut n.a).unwrap_err().kind(),
            ErrorKind::ConnectionRefused
        );
        let _c6 = TcpStream::connect(&mut n.a, n.now, sa(b6(), 82), Default::default()).unwrap();
        let (_s, peer) = until(&mut n, |n| l.accept(&mut n.b));
        assert_eq!(peer.ip(), IpAddr::V6(a6()));
    }

    #[test]
    fn udp_over_ipv6_and_port_unreachable_to_a_connected_socket() {
        let mut n = after_dad(net());
        let server = UdpSocket::bind(&mut n.b, sa(Ipv6Addr::UNSPECIFIED, 53)).unwrap();
        let client = UdpSocket::bind(&mut n.a, sa(Ipv6Addr::UNSPECIFIED, 0)).unwrap();
        let big: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        client.send_to(&mut n.a, &big, sa(b6(), 53)).unwrap();
        let mut buf = vec![0u8; 4000];
        let (k, from) = until(&mut n, |n| server.recv_from(&mut n.b, &mut buf));
        // Larger than the MTU: fragmented by the IPv6 layer and reassembled.
        assert_eq!(&buf[..k], &big[..]);
        assert_eq!(from.ip(), IpAddr::V6(a6()));
        assert!(n.a.counters().frag6_out > 0);
        server.send_to(&mut n.b, b"answer", from).unwrap();
        let (k, back) = until(&mut n, |n| client.recv_from(&mut n.a, &mut buf));
        assert_eq!((&buf[..k], back), (&b"answer"[..], sa(b6(), 53)));

        // A closed port: B answers ICMPv6 port unreachable; A's socket connected to it hears
        // ECONNREFUSED once (RFC 4443 §2.4 (b); Linux's connected-socket rule).
        let t0 = n.b.counters();
        client.connect(&mut n.a, sa(b6(), 54)).unwrap();
        client.send_to(&mut n.a, b"knock", sa(b6(), 54)).unwrap();
        n.settle();
        assert_eq!(n.b.counters().udp_no_socket, t0.udp_no_socket + 1);
        let unreach = icmpv6_in(&logged_b(&n), |_, r| match r {
            Icmpv6Repr::DstUnreachable { code, .. } => Some(code),
            _ => None,
        });
        assert_eq!(unreach, vec![4]);
        let e = client.take_error(&mut n.a).unwrap().expect("an error");
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);

        // A zero UDP checksum over IPv6 is dropped (RFC 8200 §8.1).
        let t0 = n.b.counters();
        let mut d = vec![0u8; 8 + 2];
        d[0..2].copy_from_slice(&4000u16.to_be_bytes());
        d[2..4].copy_from_slice(&53u16.to_be_bytes());
        d[4..6].copy_from_slice(&10u16.to_be_bytes());
        inject_to_b(&mut n, frame6(MAC_B, ip6(a6(), b6(), 17, 64), &d));
        n.settle();
        assert_eq!(n.b.counters().udp_bad_checksum, t0.udp_bad_checksum + 1);

        // A v6-only socket and IPv4: not delivered.
        let only = UdpSocket::bind_with(
            &mut n.b,
            sa(Ipv6Addr::UNSPECIFIED, 55),
            UdpBindOptions { v6only: true },
        )
        .unwrap();
        let c4 = UdpSocket::bind(
            &mut n.a,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        )
        .unwrap();
        let to4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), 55);
        c4.send_to(&mut n.a, b"v4", to4).unwrap();
        n.settle();
        assert_eq!(
            only.recv_from(&mut n.b, &mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
    }

    #[test]
    fn packet_too_big_lowers_the_connections_segments() {
        let mut n = after_dad(net());
        let l = TcpListener::bind(&mut n.b, sa(b6(), 80), 4, tcp::Config::default()).unwrap();
        let c = TcpStream::connect(&mut n.a, n.now, sa(b6(), 80), tcp::Config::default()).unwrap();
        let (s, _) = until(&mut n, |n| l.accept(&mut n.b));
        let local = c.local_addr(&n.a).unwrap();
        // Data in flight, then a Packet Too Big from "a router" quoting A's segment.
        c.write(&mut n.a, &[1u8; 4000]).unwrap();
        n.a.poll(n.now, &mut n.ea);
        let sent = tcp6_segments(&logged_a(&n));
        let (_, first, _) = sent
            .iter()
            .rev()
            .find(|(_, t, len)| *len > 0 && t.src_port == local.port())
            .copied()
            .expect("a data segment");
        let quoted = {
            let mut t = vec![0u8; first.header_len()];
            first.emit(&mut TcpPacket::new_unchecked(&mut t[..]));
            t
        };
        let mut qip = ip6(a6(), b6(), 6, 64);
        qip.payload_len = 1500 - 40;
        let ptb = icmp6(
            b6(),
            a6(),
            &Icmpv6Repr::PacketTooBig {
                mtu: 1300,
                header: qip,
                data: &quoted,
            },
        );
        inject_to_a(&mut n, {
            let mut f = frame6(MAC_A, ip6(b6(), a6(), 58, 64), &ptb);
            f[0..6].copy_from_slice(&MAC_A.0);
            f[6..12].copy_from_slice(&MAC_B.0);
            f
        });
        n.settle();
        assert_eq!(n.a.counters().icmpv6_ptb_in, 1);
        // RFC 8201: the path MTU is 1300 for B, and the connection's MSS 1300 - 60.
        assert_eq!(n.a.path_mtu(n.now, b6()), 1300);
        let info = n.a.tcp().conn_info(c.handle()).unwrap();
        assert_eq!(info.mss, 1240);
        // What follows fits 1300-byte packets.
        let before = logged_a(&n).len();
        c.write(&mut n.a, &[2u8; 5000]).unwrap();
        let mut buf = vec![0u8; 20000];
        let mut got = 0;
        for _ in 0..2000 {
            n.settle();
            got += s.read(&mut n.b, &mut buf).unwrap_or(0);
            if got >= 9000 {
                break;
            }
            n.now += Duration::from_millis(1);
        }
        assert_eq!(got, 9000);
        let later = tcp6_segments(&logged_a(&n)[before..]);
        assert!(later
            .iter()
            .all(|(_, t, len)| 40 + t.header_len() + len <= 1300));
    }

    #[test]
    fn connect_to_a_silent_neighbour_fails_with_host_unreachable() {
        // RFC 4861 §7.2.2: resolution gives up after MAX_MULTICAST_SOLICIT solicitations;
        // the opening connection fails as an IPv4 one does after ARP (Linux: EHOSTUNREACH).
        let mut n = after_dad(net());
        let silent: Ipv6Addr = "2001:2:0:1::99".parse().unwrap();
        let c =
            TcpStream::connect(&mut n.a, n.now, sa(silent, 80), tcp::Config::default()).unwrap();
        n.run_for(Duration::from_secs(5));
        assert_eq!(n.a.counters().ndp_resolution_failed, 1);
        let e = c.is_connected(&mut n.a).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::HostUnreachable);
    }

    /// An IPv6-only stack (`StackConfig::addr` 0.0.0.0, what `serve` runs without an IPv4
    /// `--addr`): TCP and UDP over IPv6 work; IPv4 packets and ARP are not taken (the peer's
    /// ping and its connect to a made-up IPv4 address get nothing back), and its own connects
    /// and sends to IPv4 peers fail at once with NetworkUnreachable.
    #[test]
    fn an_ipv6_only_stack_serves_ipv6_and_refuses_ipv4() {
        let (ca, mut cb) = default_configs();
        cb.addr = Ipv4Addr::UNSPECIFIED;
        let mut n = after_dad(net_with(ca, cb, PipeConfig::default()));
        let l = TcpListener::bind(
            &mut n.b,
            sa(Ipv6Addr::UNSPECIFIED, 80),
            8,
            Default::default(),
        )
        .unwrap();
        let c = TcpStream::connect(&mut n.a, n.now, sa(b6(), 80), Default::default()).unwrap();
        let (s, _) = until(&mut n, |n| l.accept(&mut n.b));
        c.write(&mut n.a, b"v6 only").unwrap();
        let mut buf = [0u8; 16];
        let k = until(&mut n, |n| s.read(&mut n.b, &mut buf));
        assert_eq!(&buf[..k], b"v6 only");
        // A's IPv4 traffic to B's subnet: ARP goes unanswered, nothing is delivered.
        let before = n.b.counters();
        n.a.ping(n.now, Ipv4Addr::new(198, 18, 0, 2), 1, 1, b"x")
            .unwrap();
        n.run_for(Duration::from_millis(3500));
        assert!(n.a.ping_recv().is_none());
        let after = n.b.counters();
        assert!(after.arp_in > before.arp_in, "the requests arrived");
        assert_eq!(after.arp_replies_out, before.arp_replies_out);
        assert_eq!(n.a.counters().arp_unresolved_drops, 1);
        // B's own IPv4 connects and sends fail at once.
        let e = TcpStream::connect(
            &mut n.b,
            n.now,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 80),
            Default::default(),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NetworkUnreachable);
        let mapped = SocketAddr::new(
            IpAddr::V6(Ipv4Addr::new(198, 18, 0, 1).to_ipv6_mapped()),
            80,
        );
        let e = TcpStream::connect(&mut n.b, n.now, mapped, Default::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NetworkUnreachable);
        let u = UdpSocket::bind(&mut n.b, sa(Ipv6Addr::UNSPECIFIED, 9)).unwrap();
        let e = u
            .send_to(
                &mut n.b,
                b"x",
                SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 9),
            )
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NetworkUnreachable);
    }
}
