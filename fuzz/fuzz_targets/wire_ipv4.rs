//! Arbitrary bytes into the IPv4 view and parser: nothing may panic, and a header that parses
//! must survive emit -> parse unchanged (emit writes no options, so the options are dropped).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::ipv4::{Ipv4Packet, Ipv4Repr};

fuzz_target!(|data: &[u8]| {
    let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(data), true);
    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = packet.verify_checksum();
    let Ok(repr) = Ipv4Repr::parse(&packet, false) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    if repr.emit(&mut buf, true).is_err() {
        // Only lengths beyond 16 bits or unaligned offsets are refused; neither can parse.
        panic!("a parsed header must be emittable: {repr:?}");
    }
    let again = Ipv4Packet::new_checked(&buf[..]).expect("emitted packet is checked");
    assert_eq!(Ipv4Repr::parse(&again, true).expect("reparse"), repr);
});
