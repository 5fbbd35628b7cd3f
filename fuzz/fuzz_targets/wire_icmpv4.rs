//! Arbitrary bytes into the ICMPv4 view and parser: nothing may panic, and a message that
//! parses must survive emit -> parse unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};

fuzz_target!(|data: &[u8]| {
    let _ = Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(data), true);
    let Ok(packet) = Icmpv4Packet::new_checked(data) else {
        return;
    };
    let Ok(repr) = Icmpv4Repr::parse(&packet, false) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf, true)
        .expect("emit into buffer_len bytes");
    let again = Icmpv4Packet::new_checked(&buf[..]).expect("emitted message is checked");
    let reparsed = Icmpv4Repr::parse(&again, true).expect("reparse");
    // Re-emitting the reparsed message gives the same bytes (quoted headers lose IP options).
    let mut buf2 = vec![0u8; reparsed.buffer_len()];
    reparsed.emit(&mut buf2, true).expect("emit again");
    assert_eq!(buf, buf2);
});
