//! Arbitrary bytes into the Ethernet view and parser: nothing may panic, and a header that
//! parses must survive emit -> parse unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::ethernet::{EthernetFrame, EthernetRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = EthernetFrame::new_checked(data) else {
        return;
    };
    let Ok(repr) = EthernetRepr::parse(&frame) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf).expect("emit into buffer_len bytes");
    let again = EthernetFrame::new_checked(&buf[..]).expect("emitted header is checked");
    assert_eq!(EthernetRepr::parse(&again).expect("reparse"), repr);
});
