//! The whole stack under hostile input: stack A holds IPv4 and IPv6 listeners, an established
//! connection with data in flight, an established IPv6 connection, a connection in FIN-WAIT
//! and a UDP socket (built deterministically by `Scenario::new`); then the input is a program
//! of operations — raw frames, well-formed TCP segments on any of A's connections (fields
//! chosen by the fuzzer, checksums right), IPv6 frames with extension headers, fragments, NDP
//! and other ICMPv6, TCP and UDP (`fuzz_ipv6_frame`), UDP datagrams, time advances, socket calls on both sides, held frames released. After every
//! operation: no panic, memory within the configured bounds, and the bytes A's application
//! read on the established connection are a prefix of what the honest peer B sent. Injected
//! segments on that connection carry B's true bytes for the sequence numbers they claim, so a
//! mix can only come from TCP placing bytes at the wrong offset.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    netfold_fuzz::stack_program(data);
});
