//! `NETFOLD_CLOCK=monotonic` forces the process clock onto CLOCK_MONOTONIC. Its own test
//! binary (one test): the variable is read once, at the process clock's first use.

use netfold_os::clock::{self, Epoch, Source};

#[test]
fn forced_monotonic() {
    std::env::set_var("NETFOLD_CLOCK", "monotonic");
    assert_eq!(clock::source(), Source::Monotonic);
    let e = Epoch::now();
    let mut last = 0;
    for _ in 0..100_000 {
        let t = e.elapsed_ns();
        assert!(t >= last);
        last = t;
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (a, b, c) = (
        clock::monotonic_ns(),
        clock::now_ns(),
        clock::monotonic_ns(),
    );
    assert!(a <= b && b <= c, "{a} {b} {c}");
}
