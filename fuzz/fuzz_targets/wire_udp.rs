//! Arbitrary bytes into the UDP view and parser: nothing may panic, and a datagram that parses
//! must survive emit -> parse unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::tcp::PseudoHeader;
use netfold::wire::udp::{UdpPacket, UdpRepr};
use netfold::wire::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    let (ph, datagram) = match data.split_first_chunk::<8>() {
        Some((addrs, rest)) => (
            PseudoHeader::new(
                Ipv4Addr::new(addrs[0], addrs[1], addrs[2], addrs[3]),
                Ipv4Addr::new(addrs[4], addrs[5], addrs[6], addrs[7]),
            ),
            rest,
        ),
        None => return,
    };
    let _ = UdpRepr::parse(&UdpPacket::new_unchecked(datagram), &ph, true);
    let Ok(packet) = UdpPacket::new_checked(datagram) else {
        return;
    };
    let _ = (
        packet.src_port(),
        packet.dst_port(),
        packet.len(),
        packet.checksum(),
    );
    let _ = packet.verify_checksum(&ph);
    let Ok(repr) = UdpRepr::parse(&packet, &ph, false) else {
        return;
    };
    let payload = packet.payload();
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit_with_checksum(&mut buf, payload, &ph).unwrap();
    let again = UdpPacket::new_checked(&buf[..n]).unwrap();
    assert_eq!(UdpRepr::parse(&again, &ph, true).unwrap(), repr);
    assert_eq!(again.payload(), payload);
});
