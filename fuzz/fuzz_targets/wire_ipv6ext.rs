//! Arbitrary bytes as an IPv6 packet's payload, walked as an extension header chain: the first
//! byte is the first Next Header value, the second picks the walk's options, the rest are the
//! headers. Nothing may panic; the walk never steps over more than `MAX_EXT_HEADERS` headers;
//! an offset it returns lies inside the bytes; a pointer it reports lies inside the packet;
//! the lenient skip (`skip_to_upper`) agrees on where a clean chain ends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::ipv6ext::{self, Chain, FragmentRepr, WalkError, WalkStart};

fuzz_target!(|data: &[u8]| {
    let [nh, flags, rest @ ..] = data else {
        return;
    };
    let start = WalkStart {
        next_header: *nh,
        base: 40,
        nh_at: 6,
        hop_by_hop_allowed: flags & 1 != 0,
        dst_multicast: flags & 2 != 0,
    };
    let mut budget = ipv6ext::MAX_EXT_HEADERS;
    let r = ipv6ext::walk(start, rest, &mut budget);
    assert!(budget <= ipv6ext::MAX_EXT_HEADERS);
    match r {
        Ok(Chain::Upper { offset, nh_at, .. }) => {
            assert!(offset <= rest.len());
            assert!(nh_at < 40 + rest.len().max(1));
            // Where the strict walk ends, the lenient skip ends too.
            let (up, off, _) = ipv6ext::skip_to_upper(*nh, rest).expect("a clean chain skips");
            assert_eq!(off, offset);
            assert!(!ipv6ext::is_walked(up));
        }
        Ok(Chain::Fragment { offset, repr }) => {
            assert!(offset + ipv6ext::FRAGMENT_HEADER_LEN <= rest.len());
            let mut b = [0u8; 8];
            repr.emit(&mut b)
                .expect("a parsed fragment header re-emits");
            assert_eq!(FragmentRepr::parse(&b).unwrap(), repr);
        }
        Ok(Chain::NoNextHeader) => {}
        Err(WalkError::ParamProblem { pointer, code }) => {
            assert!(code <= 2);
            assert!(pointer < 40 + rest.len());
        }
        Err(_) => {}
    }
    let _ = ipv6ext::skip_to_upper(*nh, rest);
    for opt in ipv6ext::Options::new(rest) {
        let Ok(o) = opt else { break };
        assert!(o.offset + o.data.len() <= rest.len() + 2);
    }
});
