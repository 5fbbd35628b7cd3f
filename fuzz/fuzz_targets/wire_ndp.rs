//! Arbitrary bytes as an NDP message (the first byte is mapped onto the five NDP types) and as
//! an NDP options area: nothing may panic; options that check iterate to the end and each
//! re-emits into its own length; a message that parses re-emits and reparses to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::wire::ndp::{NdiscOptions, NdiscRepr};

fuzz_target!(|data: &[u8]| {
    if let Ok(opts) = NdiscOptions::new(data) {
        let mut total = 0;
        for o in opts.iter() {
            let mut b = vec![0u8; o.buffer_len()];
            o.emit(&mut b).expect("an option re-emits into its length");
            total += o.buffer_len();
        }
        assert!(total <= data.len());
        let _ = (opts.source_lladdr(), opts.target_lladdr(), opts.mtu());
        let _ = opts.prefixes().count();
    }
    let Some((&t, rest)) = data.split_first() else {
        return;
    };
    let mut msg = Vec::with_capacity(data.len());
    msg.push(133 + t % 5);
    msg.extend_from_slice(rest);
    let Ok(repr) = NdiscRepr::parse(&msg) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf).expect("emit into buffer_len bytes");
    assert_eq!(NdiscRepr::parse(&buf).expect("reparse"), repr);
});
