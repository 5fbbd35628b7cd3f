//! Every crash the fuzz targets (fuzz/fuzz_targets) found, as a test with the input inline.
//! A test whose fix lies in code owned elsewhere is marked #[ignore] with the reason.

use netfold::wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};

/// fuzz/wire_icmpv4, crash-ee0202803a0133bda7bc40ac63091dcc58a4225b: `Icmpv4Repr::parse` on a
/// 4-byte view built with `new_unchecked` indexed past the end (the echo fields at bytes 4..8)
/// instead of returning `Truncated`.
#[test]
fn icmpv4_parse_of_a_short_unchecked_view_is_an_error() {
    let input: &[u8] = &[0x00, 0x00, 0xff, 0xff];
    assert!(Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(input), true).is_err());
    assert!(Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(input), false).is_err());
    // Every shorter prefix too.
    for n in 0..input.len() {
        assert!(Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(&input[..n]), false).is_err());
    }
}

/// The whole-stack fuzz harness (fuzz/src/lib.rs), compiled here too so that `stack` inputs
/// replay with plain `cargo test` (it uses public APIs only).
#[path = "../../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod harness;

/// fuzz/stack, crash-f6cd98b6a95109ab1832db9314d15b9aaff31ff6 (minimised to 29 bytes): B sends
/// 24,158 + 53,086 bytes, 2.8 s pass and A's application reads nothing. A's receive queue ends at
/// 262,152 bytes, 8 more than its 256 KiB `recv_buffer`: one unit of its window scale (shift 3).
/// By design (tcp/conn.rs): the advertised window is rounded up to the scale unit and the
/// receive ring is sized `recv_buffer + 2^rcv_wscale` for it; the peer may fill it.
const STACK_RECV_QUEUE_OVER_BUFFER: &[u8] = &[
    0x5e, 0x5e, 0x5e, 0x5e, 0xcf, 0x5e, 0xc1, 0xbb, 0x5e, 0x5e, 0x5e, 0xc1, 0xbb, 0x5e, 0x5e, 0x5e,
    0xc1, 0xbb, 0x5e, 0x5e, 0x5e, 0xc1, 0xbb, 0x5e, 0x5e, 0x5e, 0xc1, 0xff, 0xff,
];

/// The bound the fuzz target checks: the configured buffer plus one window-scale unit.
#[test]
fn stack_recv_queue_stays_within_buffer_plus_one_scale_unit() {
    harness::stack_program(STACK_RECV_QUEUE_OVER_BUFFER);
}

/// The bound docs/SECURITY.md would like to state: never more than `recv_buffer`.
#[test]
#[ignore = "by design in tcp/conn.rs (ring = recv_buffer + one window-scale unit, window rounded up): the strict bound needs a change in tcp/, the lead's call after the merge"]
fn stack_recv_queue_never_exceeds_recv_buffer() {
    harness::STRICT_BUFFER_BOUND.with(|s| s.set(true));
    harness::stack_program(STACK_RECV_QUEUE_OVER_BUFFER);
}

/// The harness's IPv6 frames (crafted addresses, extension headers, fragments, NDP and other
/// ICMPv6, TCP to the IPv6 listener and connection, UDP, raw upper layers) from a fixed
/// generator, 20 scenarios of 200 frames each, every frame polled at once: no panic, the
/// memory bounds hold after every frame, and the frames reach IPv6 and ICMPv6 processing
/// (counted) rather than being dropped before it.
#[test]
fn stack_ipv6_frames_hold_the_bounds() {
    let mut x: u64 = 0x6a09_e667_f3bc_c908;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut v6_in, mut icmp6_in, mut refused, mut sent) = (0, 0, 0, 0u64);
    for _ in 0..20 {
        let mut s = harness::Scenario::new(true);
        let base = s.a.counters();
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..1600).map(|_| next() as u8).collect();
            let f = harness::fuzz_ipv6_frame(&mut harness::Input::new(&bytes), s.est6_port);
            s.da.inbox.push_back(f);
            s.a.poll(s.now, &mut s.da);
            s.da.outbox.clear();
            s.check_bounds();
            sent += 1;
        }
        let c = s.a.counters();
        v6_in += c.ipv6_in - base.ipv6_in;
        icmp6_in += c.icmpv6_in - base.icmpv6_in;
        refused += (c.ipv6_malformed + c.ipv6_ext_malformed + c.ipv6_not_for_us + c.ipv6_bad_src)
            - (base.ipv6_malformed
                + base.ipv6_ext_malformed
                + base.ipv6_not_for_us
                + base.ipv6_bad_src);
    }
    eprintln!("{sent} frames: ipv6 in {v6_in}, icmpv6 in {icmp6_in}, refused by IPv6 {refused}");
    assert!(v6_in >= sent / 2, "{v6_in} of {sent} reached IPv6");
    assert!(icmp6_in > sent / 10, "{icmp6_in} of {sent} reached ICMPv6");
    assert!(refused > 0);
}

/// The close-rules harness (fuzz/close_rules) on 400 programs from a fixed generator: every
/// close resets exactly when Linux's rules say it must (linger 0, or bytes of the peer's
/// that the application never read) and otherwise delivers every byte and a FIN.
#[test]
fn close_rules_hold_on_generated_programs() {
    let mut x: u64 = 0xbb67_ae85_84ca_a73b;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut reset, mut graceful) = (0, 0);
    for _ in 0..400 {
        let len = 8 + (next() % 120) as usize;
        let prog: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        match harness::close_program(&prog) {
            harness::CloseOutcome::Reset => reset += 1,
            harness::CloseOutcome::Graceful => graceful += 1,
            harness::CloseOutcome::Unchecked => {}
        }
    }
    eprintln!("close rules: {reset} resets, {graceful} graceful closes checked of 400");
    assert!(
        reset >= 50 && graceful >= 50,
        "{reset} resets, {graceful} graceful"
    );
}
