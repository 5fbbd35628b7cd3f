//! Unit tests of the dispatch and the one's-complement helpers; the exhaustive kernel tests are
//! in `crates/netfold/tests/mem.rs`.

use super::combine::{fold128, fold64};
use super::*;

fn reference_sum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        sum += u64::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[test]
fn fold_keeps_end_around_carry() {
    assert_eq!(fold64(0), 0);
    assert_eq!(fold64(0xffff), 0xffff);
    assert_eq!(fold64(0x1_0000), 1);
    assert_eq!(fold64(u64::MAX), 0xffff);
    assert_eq!(fold128(u128::MAX), 0xffff);
    assert_eq!(fold128(1u128 << 64), 1);
}

#[test]
fn rfc1071_example() {
    // RFC 1071 §3 numerical example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(checksum(&data), 0xddf2);
    assert_eq!(reference_sum(&data), 0xddf2);
}

#[test]
fn dispatch_matches_reference_small() {
    let src: Vec<u8> = (0..600u32).map(|i| (i * 37 + 11) as u8).collect();
    for n in 0..=600 {
        let mut dst = vec![0u8; n + 3];
        copy(&mut dst[1..], &src[..n]);
        assert_eq!(&dst[1..=n], &src[..n], "copy n={n}");
        assert_eq!(checksum(&src[..n]), reference_sum(&src[..n]), "sum n={n}");
        let mut dst2 = vec![0u8; n];
        assert_eq!(
            copy_with_checksum(&mut dst2, &src[..n]),
            reference_sum(&src[..n])
        );
        assert_eq!(&dst2[..], &src[..n]);
    }
}

/// The inline paths for tiny fused copies (<= 16 bytes) and header sums (<= 64 bytes) against
/// the reference, on data that makes every word carry (all ones) and on mixed data, at every
/// length they take.
#[test]
fn small_fused_copies_match_reference() {
    for fill in [0xffu8, 0x80, 0x01] {
        for n in 0..=72 {
            let src: Vec<u8> = (0..n).map(|i| fill.wrapping_add((i as u8) & 1)).collect();
            assert_eq!(
                checksum(&src),
                reference_sum(&src),
                "sum fill {fill:#x} n {n}"
            );
        }
        for n in 0..=20 {
            let src: Vec<u8> = (0..n).map(|i| fill.wrapping_add((i as u8) & 1)).collect();
            let mut dst = vec![0u8; n + 2];
            assert_eq!(
                copy_with_checksum(&mut dst[1..], &src),
                reference_sum(&src),
                "fill {fill:#x} n {n}"
            );
            assert_eq!(&dst[1..=n], &src[..]);
            assert_eq!(dst[n + 1], 0, "no write past n");
        }
    }
}

#[test]
fn selected_is_known() {
    // The choice is by measurement now: every chosen kernel is a detected candidate.
    let cal = calibration();
    for f in &cal.families {
        let detected = calibrate::candidates(f.family);
        for c in &f.classes {
            assert!(
                detected.contains(&c.chosen),
                "{}: {}",
                f.family.name(),
                c.chosen
            );
        }
    }
    assert_eq!(selected_kernels(), cal.summary());
}

#[test]
fn rfc1624_update_matches_recompute() {
    // A 20-byte IPv4 header; change the TTL/protocol word and check the incremental update
    // against a full recomputation.
    let mut h = [
        0x45u8, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 0xac, 0x10, 0x0a,
        0x63, 0xac, 0x10, 0x0a, 0x0c,
    ];
    let field = !checksum(&h);
    h[10..12].copy_from_slice(&field.to_be_bytes());
    assert_eq!(checksum(&h), 0xffff);
    let old = u16::from_be_bytes([h[8], h[9]]);
    h[8] = 0x3f; // TTL decrement
    let new = u16::from_be_bytes([h[8], h[9]]);
    let updated = checksum_update(field, old, new);
    h[10..12].copy_from_slice(&[0, 0]);
    assert_eq!(updated, !checksum(&h));
}

#[test]
fn pseudo_header_sum() {
    use std::net::Ipv4Addr;
    let s = ipv4_pseudo_header_sum(
        Ipv4Addr::new(198, 18, 0, 1),
        Ipv4Addr::new(198, 18, 0, 2),
        6,
        20,
    );
    let bytes = [198, 18, 0, 1, 198, 18, 0, 2, 0, 6, 0, 20];
    assert_eq!(s, reference_sum(&bytes));
}

#[test]
fn calibration_is_fast_and_picks_detected_kernels() {
    // Time a few fresh calibrations (the process-wide one ran already or runs here).
    for _ in 0..3 {
        let cal = calibrate::calibrate(&calibrate::Forced::default());
        eprintln!(
            "calibration: {} rounds in {:?}: {}",
            cal.rounds,
            cal.elapsed,
            cal.summary()
        );
        // No assertion on the wall time: a descheduled test process can take any time. The
        // budget itself is checked by construction (rounds stop once it is spent) and its
        // measured values are in docs/BENCHMARKS.md.
        assert!(cal.rounds >= 8, "every buffer layout timed at least once");
        assert!(cal.warmup <= cal.elapsed);
        for f in &cal.families {
            let detected = calibrate::candidates(f.family);
            assert_eq!(f.classes.len(), 4);
            for (class, c) in f.classes.iter().enumerate() {
                let margin = cal.margin[class];
                assert!(
                    detected.contains(&c.chosen),
                    "{} chose {}",
                    f.family.name(),
                    c.chosen
                );
                let timed: Vec<&str> = c.timings.iter().map(|t| t.name).collect();
                assert_eq!(
                    timed, detected,
                    "every detected candidate timed, nothing else"
                );
                assert!(c
                    .timings
                    .iter()
                    .all(|t| t.ns.is_finite() && t.ns > 0.0 && t.samples >= 1));
                // The baseline is never dropped, so it has a sample per round.
                assert_eq!(c.timings[0].samples, cal.rounds);
                let best = c.timings.iter().map(|t| t.ns).fold(f64::INFINITY, f64::min);
                let pos = c.timings.iter().position(|t| t.name == c.chosen).unwrap();
                assert!(
                    c.timings[pos].ns <= best * (1.0 + margin),
                    "the choice is within the margin of the fastest"
                );
                assert!(
                    c.timings[..pos]
                        .iter()
                        .all(|t| t.ns > best * (1.0 + margin)),
                    "no candidate earlier in preference order is within the margin"
                );
            }
        }
    }
}

#[test]
fn choice_prefers_the_baseline_within_the_margin() {
    use calibrate::choose;
    let m = 0.04;
    // A candidate 3% faster than the baseline does not replace it; 5% faster does.
    assert_eq!(choose(&[100.0, 97.0], m), Some(0));
    assert_eq!(choose(&[100.0, 95.0], m), Some(1));
    // Among the rest, the earliest within the margin of the fastest wins, not the fastest.
    assert_eq!(choose(&[150.0, 100.0, 98.0, 97.0], m), Some(1));
    assert_eq!(choose(&[150.0, 110.0, 98.0, 97.0], m), Some(2));
    // Unmeasured (infinite) or NaN scores never win; nothing finite: no choice.
    assert_eq!(choose(&[f64::INFINITY, 80.0, f64::NAN], m), Some(1));
    assert_eq!(choose(&[f64::INFINITY, f64::NAN], m), None);
    assert_eq!(choose(&[], m), None);
    // No margin: simply the fastest (the first of equals).
    assert_eq!(choose(&[100.0, 99.0, 99.0], 0.0), Some(1));
}

#[test]
fn steady_settings_are_longer_than_startup() {
    let s = calibrate::Settings::steady(std::time::Duration::from_millis(500));
    let st = calibrate::Settings::STARTUP;
    assert!(s.sample > st.sample && s.budget > st.budget && s.max_rounds > st.max_rounds);
    assert_eq!(s.margin, st.margin);
    // The start-up budget leaves room for the last round under the 5 ms allowed.
    assert!(st.budget <= std::time::Duration::from_millis(4));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn short_fold_equals_fold64() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let edge = [
        0,
        1,
        0xffff,
        0x1_0000,
        0xffff_ffff,
        0x1_0000_0000,
        u64::MAX,
        u64::MAX - 1,
    ];
    for v in edge.into_iter().chain((0..100_000).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    })) {
        assert_eq!(super::x86_csum::fold64_short(v), fold64(v), "{v:#x}");
    }
}
