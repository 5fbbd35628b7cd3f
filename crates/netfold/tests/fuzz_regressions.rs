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
