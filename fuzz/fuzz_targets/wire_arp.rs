//! Arbitrary bytes into the ARP view and parser: nothing may panic, and a packet that parses
//! must survive emit -> parse unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::arp::{ArpPacket, ArpRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = ArpPacket::new_checked(data) else {
        return;
    };
    let Ok(repr) = ArpRepr::parse(&packet) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf).expect("emit into buffer_len bytes");
    let again = ArpPacket::new_checked(&buf[..]).expect("emitted packet is checked");
    assert_eq!(ArpRepr::parse(&again).expect("reparse"), repr);
});
