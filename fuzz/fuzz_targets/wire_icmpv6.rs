//! Arbitrary bytes into the ICMPv6 view and parser (NDP messages included): nothing may panic,
//! and a message that parses must survive emit -> parse unchanged, its checksum over the
//! pseudo-header of two fixed addresses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use netfold::wire::Ipv6Addr;

fuzz_target!(|data: &[u8]| {
    let src = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1);
    let dst = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
    let _ = Icmpv6Repr::parse(&Icmpv6Packet::new_unchecked(data), src, dst, true);
    let Ok(packet) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    let _ = packet.verify_checksum(src, dst);
    let Ok(repr) = Icmpv6Repr::parse(&packet, src, dst, false) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(src, dst, &mut buf, true)
        .expect("emit into buffer_len bytes");
    let again = Icmpv6Packet::new_checked(&buf[..]).expect("emitted message is checked");
    let reparsed = Icmpv6Repr::parse(&again, src, dst, true).expect("reparse");
    // NDP messages keep only their link-layer address option (a Router Advertisement all its
    // options), so compare the re-emitted bytes of the reparsed message, not the input.
    let mut buf2 = vec![0u8; reparsed.buffer_len()];
    reparsed
        .emit(src, dst, &mut buf2, true)
        .expect("emit again");
    assert_eq!(buf, buf2);
});
