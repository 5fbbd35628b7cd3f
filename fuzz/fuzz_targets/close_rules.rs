//! Closing against the rules Linux follows: A's application writes, reads, maybe sets
//! SO_LINGER, maybe shuts down its sending side, then closes; B writes, reads, maybe shuts
//! down (the program comes from the fuzzer). A close with linger 0, or with bytes of B's that
//! A never read, must reset the connection (RFC 1122 §4.2.2.13, RFC 2525 §2.17); any other
//! close must deliver every byte A wrote, then end of file (`netfold_fuzz::close_program`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = netfold_fuzz::close_program(data);
});
