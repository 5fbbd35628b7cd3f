//! Arbitrary bytes into the TCP view and parser: nothing may panic, and a segment that parses
//! must survive emit -> parse unchanged (except SACK blocks our layout cannot fit, which are
//! dropped from the end).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::tcp::{PseudoHeader, TcpPacket, TcpRepr};
use netfold::wire::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    // The first 8 bytes pick the pseudo-header so checksums vary with the input too.
    let (ph, segment) = match data.split_first_chunk::<8>() {
        Some((addrs, rest)) => (
            PseudoHeader::new(
                Ipv4Addr::new(addrs[0], addrs[1], addrs[2], addrs[3]),
                Ipv4Addr::new(addrs[4], addrs[5], addrs[6], addrs[7]),
            ),
            rest,
        ),
        None => return,
    };
    let _ = TcpRepr::parse(&TcpPacket::new_unchecked(segment), &ph, true);
    let Ok(packet) = TcpPacket::new_checked(segment) else {
        return;
    };
    let _ = (packet.src_port(), packet.dst_port(), packet.seq_number());
    let _ = (packet.ack_number(), packet.flags(), packet.window_len());
    let _ = (packet.checksum(), packet.urgent_at(), packet.segment_len());
    let _ = packet.verify_checksum(&ph);
    for option in packet.option_iter() {
        let _ = option;
    }
    let Ok(repr) = TcpRepr::parse(&packet, &ph, false) else {
        return;
    };
    let payload = packet.payload();
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit_with_checksum(&mut buf, payload, &ph).unwrap();
    let again = TcpPacket::new_checked(&buf[..n]).unwrap();
    let reparsed = TcpRepr::parse(&again, &ph, true).unwrap();
    let kept = repr.options.emitted_sack_count();
    assert_eq!(
        reparsed.options.sack_blocks(),
        &repr.options.sack_blocks()[..kept]
    );
    let mut expected = repr;
    expected.options.sack_count = kept as u8;
    for slot in &mut expected.options.sack[kept..] {
        *slot = Default::default();
    }
    assert_eq!(reparsed, expected);
    assert_eq!(again.payload(), payload);
});
