//! `netfold soak` as a user runs it: a short run passes with every connection verified and its
//! figures printed; a run whose link loses almost everything fails (exit 1) instead of hanging
//! or passing. The 30 s run is in .ci/run.

use std::process::Command;

fn soak(args: &[&str]) -> (Option<i32>, String, std::time::Duration) {
    let t = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_netfold"))
        .arg("soak")
        .args(args)
        .output()
        .expect("run netfold soak");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text, t.elapsed())
}

/// The value of a `soak  NAME  VALUE` row.
fn row(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("soak") && w.next() == Some(name))
                .then(|| w.next().and_then(|v| v.parse().ok()))
                .flatten()
        })
        .unwrap_or_else(|| panic!("no row {name}:\n{text}"))
}

#[test]
fn a_short_soak_passes_with_every_connection_verified() {
    let (code, text, _) = soak(&["--duration", "3s", "--conns", "32", "--seed", "7"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("soak: PASS"), "{text}");
    let opened = row(&text, "connections_opened");
    assert!(opened > 32, "{text}");
    assert_eq!(row(&text, "connections_completed"), opened, "{text}");
    assert_eq!(row(&text, "failures"), 0);
    assert!(row(&text, "bytes_up_verified") > 0 && row(&text, "bytes_down_verified") > 0);
    assert!(row(&text, "peak_rss_bytes") > 0);
    // The impairments really happened, and the stacks caught the corrupted frames.
    for l in [
        "c->s_dropped_loss",
        "c->s_duplicated",
        "c->s_reordered",
        "c->s_corrupted",
    ] {
        let v = text
            .lines()
            .find(|x| x.split_whitespace().nth(1) == Some(l))
            .and_then(|x| x.split_whitespace().nth(2))
            .and_then(|v| v.parse::<u64>().ok());
        assert!(v.is_some_and(|v| v > 0), "{l}: {text}");
    }
}

#[test]
fn a_link_that_loses_almost_everything_fails_the_soak() {
    let (code, text, took) = soak(&["--duration", "1s", "--loss", "0.95", "--stall", "3s"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("soak: FAIL"), "{text}");
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
}

/// `--virtual-time` with both seeds fixed is a replay: the same connections, bytes and
/// impairments every time (a failure found this way can be studied at leisure).
#[test]
fn a_virtual_time_run_is_the_same_every_time() {
    let args = [
        "--duration",
        "300ms",
        "--conns",
        "8",
        "--seed",
        "3",
        "--stack-seed",
        "5",
        "--virtual-time",
    ];
    let (code, first, _) = soak(&args);
    assert_eq!(code, Some(0), "{first}");
    assert!(first.contains("stack seed 5"), "{first}");
    let (code, second, _) = soak(&args);
    assert_eq!(code, Some(0), "{second}");
    for name in [
        "connections_opened",
        "bytes_up_verified",
        "bytes_down_verified",
        "peak_buffered_bytes",
    ] {
        assert_eq!(row(&first, name), row(&second, name), "{name}");
    }
    let pipe = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("pipe "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(pipe(&first), pipe(&second));
}
