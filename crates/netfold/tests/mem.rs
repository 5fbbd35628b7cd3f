//! Exhaustive tests of `netfold::mem`: every kernel, forced one by one, against plain reference
//! implementations and smoltcp's checksum, over every length 0..=300, random lengths up to
//! 70000, every (src, dst) alignment pair 0..=63 and odd offsets; plus properties of the
//! one's-complement helpers. Deterministic: a fixed-seed generator, no clock, no network.

use netfold::mem::{self, kernels};
use netfold_testkit::Rng;
use proptest::prelude::*;

/// The plain reference: RFC 1071 over big-endian words, odd byte padded at the end.
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

fn smoltcp_sum(data: &[u8]) -> u16 {
    smoltcp::wire::checksum::data(data)
}

const CANARY: u8 = 0xa5;

/// Runs `f(dst_window, src_window)` with the windows at the given offsets inside larger
/// buffers and checks the copy landed exactly in the window: bytes around it are untouched.
/// Returns `f`'s result.
fn with_windows<R>(
    src_bytes: &[u8],
    src_off: usize,
    dst_off: usize,
    f: impl FnOnce(&mut [u8], &[u8]) -> R,
) -> R {
    let n = src_bytes.len();
    // Over-allocate so the offsets are relative to a 64-aligned start.
    let mut sbuf = vec![0u8; n + 192];
    let sbase = (64 - (sbuf.as_ptr() as usize & 63)) & 63;
    sbuf[sbase + src_off..sbase + src_off + n].copy_from_slice(src_bytes);
    let mut dbuf = vec![CANARY; n + 192];
    let dbase = (64 - (dbuf.as_ptr() as usize & 63)) & 63;
    let r = {
        let src = &sbuf[sbase + src_off..sbase + src_off + n];
        // The dst window is longer than src by a few bytes: kernels must not write past n.
        let dst = &mut dbuf[dbase + dst_off..dbase + dst_off + n + 7];
        f(dst, src)
    };
    let at = dbase + dst_off;
    assert_eq!(&dbuf[at..at + n], src_bytes, "copied bytes differ");
    assert!(dbuf[..at].iter().all(|&b| b == CANARY), "wrote before dst");
    assert!(
        dbuf[at + n..].iter().all(|&b| b == CANARY),
        "wrote past n bytes"
    );
    r
}

fn check_all_kernels(data: &[u8], src_off: usize, dst_off: usize) {
    let want = reference_sum(data);
    for (_, k) in kernels::COPY_KERNELS {
        with_windows(data, src_off, dst_off, *k);
    }
    with_windows(data, src_off, dst_off, mem::copy);
    for (name, k) in kernels::FUSED_KERNELS {
        let got = with_windows(data, src_off, dst_off, *k);
        assert_eq!(
            got,
            want,
            "fused {name} n={} src+{src_off} dst+{dst_off}",
            data.len()
        );
    }
    let got = with_windows(data, src_off, dst_off, mem::copy_with_checksum);
    assert_eq!(got, want, "copy_with_checksum n={}", data.len());
    // Checksum at the source offset too (loads at every alignment).
    let mut sbuf = vec![0u8; data.len() + 128];
    let base = (64 - (sbuf.as_ptr() as usize & 63)) & 63;
    sbuf[base + src_off..base + src_off + data.len()].copy_from_slice(data);
    let s = &sbuf[base + src_off..base + src_off + data.len()];
    for (name, k) in kernels::CHECKSUM_KERNELS {
        assert_eq!(k(s), want, "checksum {name} n={}", data.len());
    }
    assert_eq!(mem::checksum(s), want);
}

#[test]
fn every_length_up_to_300() {
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    for n in 0..=300 {
        let data = rng.bytes(n);
        check_all_kernels(&data, 0, 0);
        check_all_kernels(&data, 3, 1);
        check_all_kernels(&data, 1, 62);
    }
}

#[test]
fn random_lengths_up_to_70000() {
    let mut rng = Rng::new(0xdead_beef_cafe_f00d);
    for _ in 0..60 {
        let n = (rng.next() % 70_001) as usize;
        let so = (rng.next() % 64) as usize;
        let d_o = (rng.next() % 64) as usize;
        let data = rng.bytes(n);
        check_all_kernels(&data, so, d_o);
    }
}

#[test]
fn every_alignment_pair() {
    let mut rng = Rng::new(42);
    let lengths = [1usize, 15, 33, 64, 129, 255, 257, 1448];
    let datas: Vec<Vec<u8>> = lengths.iter().map(|&n| rng.bytes(n)).collect();
    for so in 0..64 {
        for d_o in 0..64 {
            for data in &datas {
                check_all_kernels(data, so, d_o);
            }
        }
    }
}

#[test]
fn odd_offsets_and_all_ones() {
    // 0xff data stresses end-around carries in every lane.
    for n in [
        1usize, 2, 3, 63, 64, 65, 1447, 1448, 1449, 9001, 65535, 65536,
    ] {
        let data = vec![0xffu8; n];
        for off in [1usize, 3, 5, 7, 31, 33, 63] {
            check_all_kernels(&data, off, 64 - off);
        }
    }
}

#[test]
fn checksum_equals_smoltcp() {
    let mut rng = Rng::new(7);
    for n in (0..2000).chain([9000, 65535, 65536, 70000]) {
        let data = rng.bytes(n);
        let want = smoltcp_sum(&data);
        assert_eq!(mem::checksum(&data), want, "n={n}");
        for (name, k) in kernels::CHECKSUM_KERNELS {
            assert_eq!(k(&data), want, "{name} n={n}");
        }
        let mut dst = vec![0u8; n];
        assert_eq!(mem::copy_with_checksum(&mut dst, &data), want);
    }
    // Zero and all-ones corner cases.
    for n in [0usize, 1, 2, 64, 1448] {
        assert_eq!(mem::checksum(&vec![0u8; n]), smoltcp_sum(&vec![0u8; n]));
        assert_eq!(
            mem::checksum(&vec![0xffu8; n]),
            smoltcp_sum(&vec![0xffu8; n])
        );
    }
}

#[test]
fn large_copy_takes_non_temporal_path() {
    let n = kernels::nt_threshold().min(8 << 20) + 77;
    let mut rng = Rng::new(99);
    let data = rng.bytes(n);
    let mut dst = vec![0u8; n + 5];
    mem::copy(&mut dst[3..], &data);
    assert_eq!(&dst[3..3 + n], &data[..]);
    assert_eq!(&dst[..3], &[0, 0, 0]);
    let mut dst2 = vec![0u8; n];
    kernels::copy_avx512_nt(&mut dst2, &data);
    assert_eq!(dst2, data);
    assert_eq!(
        mem::copy_with_checksum(&mut dst2, &data),
        reference_sum(&data)
    );
}

#[test]
#[should_panic]
fn copy_panics_when_dst_too_short() {
    let mut dst = [0u8; 3];
    mem::copy(&mut dst, &[1, 2, 3, 4]);
}

#[test]
fn simd_kernels_present_on_this_machine() {
    // Record what was exercised: on the project's machine both must be present, otherwise the
    // forced-kernel tests above silently tested fallbacks.
    if std::env::var_os("NETFOLD_EXPECT_AVX512").is_some() {
        assert!(kernels::has_avx512());
    }
    if kernels::has_avx512() {
        // The kernels are chosen by measurement now: the AVX-512 ones must at least have
        // been candidates.
        use mem::calibrate::{candidates, Family};
        assert!(candidates(Family::Copy).contains(&"avx512"));
        assert!(candidates(Family::Checksum).contains(&"avx512"));
        assert!(candidates(Family::Fused).contains(&"avx512"));
    }
}

proptest! {
    #[test]
    fn combine_is_sum_of_concatenation(a in proptest::collection::vec(any::<u8>(), 0..300),
                                       b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut ab = a.clone();
        ab.extend_from_slice(&b);
        let c = mem::checksum_concat(mem::checksum(&a), mem::checksum(&b), a.len());
        prop_assert_eq!(c, reference_sum(&ab));
    }

    #[test]
    fn add_is_commutative_and_matches_concat(a in proptest::collection::vec(any::<u8>(), 0..100),
                                             b in proptest::collection::vec(any::<u8>(), 0..100)) {
        // Even-length a: checksum_add is the sum of the concatenation.
        let mut a = a;
        if a.len() % 2 == 1 { a.pop(); }
        let (sa, sb) = (mem::checksum(&a), mem::checksum(&b));
        prop_assert_eq!(mem::checksum_add(sa, sb), mem::checksum_add(sb, sa));
        let mut ab = a.clone();
        ab.extend_from_slice(&b);
        prop_assert_eq!(mem::checksum_add(sa, sb), reference_sum(&ab));
        prop_assert_eq!(mem::checksum_with_initial(sa, &b), reference_sum(&ab));
    }

    #[test]
    fn rfc1624_update_equals_recompute(words in proptest::collection::vec(any::<u16>(), 1..40),
                                       idx in any::<usize>(), new in any::<u16>()) {
        // Header = words, plus a checksum field that makes it verify.
        let bytes = |w: &[u16]| w.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
        let field = !reference_sum(&bytes(&words));
        let i = idx % words.len();
        let old = words[i];
        let mut w2 = words.clone();
        w2[i] = new;
        let updated = mem::checksum_update(field, old, new);
        let recomputed = !reference_sum(&bytes(&w2));
        // Both encode the same one's-complement value; RFC 1624 eqn 3 may yield the other
        // representation of zero (0x0000 vs 0xffff) only when the sum is all ones.
        if recomputed == 0 || recomputed == 0xffff {
            prop_assert!(updated == 0 || updated == 0xffff);
        } else {
            prop_assert_eq!(updated, recomputed);
        }
        // And the updated header verifies.
        let mut with_field = bytes(&w2);
        with_field.extend_from_slice(&updated.to_be_bytes());
        let v = reference_sum(&with_field);
        prop_assert!(v == 0xffff || (v == 0 && with_field.iter().all(|&b| b == 0)));
    }

    #[test]
    fn pseudo_header_matches_bytes(s in any::<u32>(), d in any::<u32>(), p in any::<u8>(), len in any::<u16>()) {
        use std::net::Ipv4Addr;
        let mut b = Vec::new();
        b.extend_from_slice(&s.to_be_bytes());
        b.extend_from_slice(&d.to_be_bytes());
        b.extend_from_slice(&[0, p]);
        b.extend_from_slice(&len.to_be_bytes());
        let got = mem::ipv4_pseudo_header_sum(Ipv4Addr::from(s), Ipv4Addr::from(d), p, u32::from(len));
        prop_assert_eq!(got, reference_sum(&b));
    }

    #[test]
    fn copy_any(data in proptest::collection::vec(any::<u8>(), 0..3000), so in 0usize..64, d_o in 0usize..64) {
        check_all_kernels(&data, so, d_o);
    }
}

/// The baseline copy mode changes how, never what: same bytes, same sums.
#[test]
fn baseline_mode_gives_identical_results() {
    use netfold::mem::CopyMode;
    let src: Vec<u8> = (0..5000u32).map(|i| (i * 131 + 7) as u8).collect();
    let mut a = vec![0u8; 5000];
    let mut b = vec![0u8; 5000];
    let fused = CopyMode::Kernels.copy_with_checksum(&mut a[3..], &src[1..4001]);
    let baseline = CopyMode::Baseline;
    assert_eq!(baseline, CopyMode::Baseline);
    let two_pass = baseline.copy_with_checksum(&mut b[3..], &src[1..4001]);
    assert_eq!(fused, two_pass);
    assert_eq!(a, b);
    assert_eq!(fused, netfold::mem::checksum(&src[1..4001]));
}

/// Kernel choice by measurement: whatever the calibration picks, results are the same. Every
/// detected candidate of every family is forced in turn (for every size class) and checked
/// against the reference at lengths spanning all size classes and their boundaries.
#[test]
fn every_choosable_kernel_gives_identical_results() {
    use mem::calibrate::{candidates, Family, CLASS_MAX};
    let (copies, sums, fuseds) = (
        candidates(Family::Copy),
        candidates(Family::Checksum),
        candidates(Family::Fused),
    );
    let rounds = copies.len().max(sums.len()).max(fuseds.len());
    let mut lens: Vec<usize> = (0..=300).collect();
    for &m in &CLASS_MAX {
        lens.extend([m - 1, m, m + 1, m + 2]);
    }
    lens.extend([1448, 9000, 65536, 70001]);
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let data = rng.bytes(70001 + 64);
    for i in 0..rounds {
        let (c, s, f) = (
            copies[i % copies.len()],
            sums[i % sums.len()],
            fuseds[i % fuseds.len()],
        );
        let set = mem::KernelSet::forced(c, s, f).expect("detected candidates can be forced");
        assert_eq!(set.summary(), format!("copy={c} csum={s} fused={f}"));
        for &n in &lens {
            for (sa, da) in [(0, 0), (1, 0), (0, 54), (13, 41), (63, 62)] {
                let src = &data[sa..sa + n];
                let want = reference_sum(src);
                assert_eq!(set.checksum(src), want, "csum={s} n={n} sa={sa}");
                with_windows(src, sa, da, |d, s2| set.copy(d, s2));
                let got = with_windows(src, sa, da, |d, s2| set.copy_with_checksum(d, s2));
                assert_eq!(got, want, "fused={f} n={n} sa={sa} da={da}");
            }
        }
    }
}

#[test]
fn forcing_rejects_unknown_and_undetected_kernels() {
    use mem::calibrate::{all_candidates, candidates, parse_forced, Family};
    assert!(mem::KernelSet::forced("no-such", "avx2", "avx2").is_none());
    let (f, errs) = parse_forced("copy=memcpy, csum=bogus ,fused,colour=blue,=x");
    assert_eq!(f.copy, Some("memcpy"));
    assert_eq!(f.checksum, None);
    assert_eq!(f.fused, None);
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(
        errs[0].contains("unknown csum kernel \"bogus\""),
        "{errs:?}"
    );
    assert!(errs[1].contains("not FAMILY=KERNEL"), "{errs:?}");
    assert!(errs[2].contains("unknown family \"colour\""), "{errs:?}");
    let (f, errs) = parse_forced("");
    assert_eq!((f, errs.len()), (Default::default(), 0));
    // A kernel this CPU cannot run is refused (if there is one on this machine).
    for fam in [Family::Copy, Family::Checksum, Family::Fused] {
        let runnable = candidates(fam);
        for name in all_candidates(fam) {
            let (f, errs) = parse_forced(&format!("{}={name}", fam.name()));
            if runnable.contains(&name) {
                assert!(errs.is_empty(), "{errs:?}");
            } else {
                assert!(errs[0].contains("lacks"), "{errs:?}");
                assert_eq!(f, Default::default());
            }
        }
    }
}

/// `NETFOLD_KERNELS` forces the process-wide choice: the test re-runs itself in a child
/// process with the variable set (the choice is made once per process) and checks there.
#[test]
fn env_override_forces_the_choice() {
    use mem::calibrate::{candidates, Family};
    const CHILD: &str = "NETFOLD_TEST_ENV_OVERRIDE_CHILD";
    let copy = *candidates(Family::Copy).last().unwrap();
    let sum = *candidates(Family::Checksum).last().unwrap();
    if let Ok(expect) = std::env::var(CHILD) {
        let cal = mem::calibration();
        if expect == "bad" {
            // Bad items are reported and measured instead; good ones still apply.
            assert!(
                cal.warnings.iter().any(|w| w.contains("nonsense")),
                "{cal:?}"
            );
            assert_eq!(cal.family(Family::Copy).forced, Some(copy));
            assert_eq!(cal.family(Family::Fused).forced, None);
            assert!(!cal.family(Family::Fused).classes[0].timings.is_empty());
        } else {
            assert_eq!(
                mem::selected_kernels().split(' ').next(),
                Some(&*format!("copy={copy}"))
            );
            assert_eq!(cal.family(Family::Copy).forced, Some(copy));
            assert_eq!(cal.family(Family::Checksum).forced, Some(sum));
            assert!(cal.family(Family::Copy).classes[1].timings.is_empty());
            assert!(cal.warnings.is_empty());
        }
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 31 + 7) as u8).collect();
        let mut dst = vec![0u8; 5000];
        assert_eq!(mem::copy_with_checksum(&mut dst, &src), reference_sum(&src));
        assert_eq!(dst, src);
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for (value, tag) in [
        (format!("copy={copy},csum={sum}"), "good"),
        (format!("copy={copy},fused=nonsense"), "bad"),
    ] {
        let out = std::process::Command::new(&exe)
            .args(["--exact", "env_override_forces_the_choice", "--nocapture"])
            .env(CHILD, tag)
            .env("NETFOLD_KERNELS", &value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "child with NETFOLD_KERNELS={value} failed:\n{}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        // The child really ran this test (a filter matching nothing would also succeed).
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{stderr}"
        );
        if tag == "bad" {
            assert!(
                stderr.contains("NETFOLD_KERNELS: unknown fused kernel"),
                "{stderr}"
            );
        }
    }
}

/// The fused kernels added for the fused-copy target (top-word sums, `rep movsb` in chunks).
const NEW_FUSED: &[&str] = &["avx512-topm", "vbmi-topm", "rep-movsb-chunk"];

fn fused_kernel(name: &str) -> kernels::FusedKernel {
    kernels::FUSED_KERNELS
        .iter()
        .find(|k| k.0 == name)
        .map(|k| k.1)
        .unwrap_or_else(|| panic!("fused kernel {name} not listed"))
}

/// `data` landed at `at` in `dbuf` and nothing around it changed from [`CANARY`].
fn check_window(dbuf: &[u8], at: usize, data: &[u8], name: &str) {
    let n = data.len();
    assert_eq!(&dbuf[at..at + n], data, "{name} copy n={n}");
    assert!(dbuf[..at].iter().all(|&b| b == CANARY), "{name} before");
    assert!(
        dbuf[at + n..].iter().all(|&b| b == CANARY),
        "{name} wrote past n={n}"
    );
}

/// Every fused and copy kernel at every (src, dst) alignment 0..64 x every length 0..=300,
/// random and all-0xff data (the latter maximises every lane and every carry), against the
/// plain reference; every checksum kernel at every source alignment x the same lengths.
/// Buffers are reused so the tens of millions of calls stay fast.
#[test]
fn every_kernel_every_alignment_and_length() {
    let mut rng = Rng::new(0x0013_0013);
    let max = 300usize;
    let mut sbuf = vec![0u8; max + 192];
    let mut dbuf = vec![0u8; max + 192];
    let sbase = (64 - (sbuf.as_ptr() as usize & 63)) & 63;
    let dbase = (64 - (dbuf.as_ptr() as usize & 63)) & 63;
    for ones in [false, true] {
        for n in 0..=max {
            let data = if ones { vec![0xffu8; n] } else { rng.bytes(n) };
            let want = reference_sum(&data);
            for so in 0..64 {
                sbuf[sbase + so..sbase + so + n].copy_from_slice(&data);
                let src = &sbuf[sbase + so..sbase + so + n];
                for (name, k) in kernels::CHECKSUM_KERNELS {
                    assert_eq!(k(src), want, "checksum {name} n={n} src+{so} ones={ones}");
                }
                for d_o in 0..64 {
                    let at = dbase + d_o;
                    for (name, k) in kernels::FUSED_KERNELS {
                        dbuf.fill(CANARY);
                        let got = k(&mut dbuf[at..at + n + 7], src);
                        assert_eq!(got, want, "{name} n={n} src+{so} dst+{d_o} ones={ones}");
                        check_window(&dbuf, at, &data, name);
                    }
                    for (name, k) in kernels::COPY_KERNELS {
                        dbuf.fill(CANARY);
                        k(&mut dbuf[at..at + n + 7], src);
                        check_window(&dbuf, at, &data, name);
                    }
                }
            }
        }
    }
}

/// Large inputs: past the 1 MiB accumulator segment of those kernels (the bound their
/// exactness needs), odd lengths and offsets, random and all-0xff data; every fused kernel.
#[test]
fn fused_kernels_large_and_segment_crossing() {
    let mut rng = Rng::new(0x5e61_0013);
    let seg = 1usize << 20;
    for n in [
        1447usize,
        4095,
        4097,
        9001,
        65_535,
        65_536,
        seg - 1,
        seg,
        seg + 1,
        3 * seg + 12_345,
    ] {
        for ones in [false, true] {
            let data = if ones { vec![0xffu8; n] } else { rng.bytes(n) };
            let want = reference_sum(&data);
            for &(name, k) in kernels::FUSED_KERNELS {
                for (so, d_o) in [(0usize, 0usize), (1, 0), (0, 1), (13, 54)] {
                    let got = with_windows(&data, so, d_o, k);
                    assert_eq!(got, want, "{name} n={n} src+{so} dst+{d_o} ones={ones}");
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn new_fused_kernels_match_reference(data in proptest::collection::vec(any::<u8>(), 0..5000),
                                         so in 0usize..64, d_o in 0usize..64) {
        let want = reference_sum(&data);
        for &name in NEW_FUSED {
            let got = with_windows(&data, so, d_o, fused_kernel(name));
            prop_assert_eq!(got, want, "{} n={}", name, data.len());
        }
    }
}
