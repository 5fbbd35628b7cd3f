//! `netfold emulate`: netfold's user-space link emulator for your own setups. Creates (or
//! attaches to persistent) TAP interfaces A and B, optionally moves each into a network
//! namespace, and forwards Ethernet frames between them with `--delay/--rate/--loss/...`
//! applied (the in-memory link's seeded model, [`netfold_os::emu`]) until SIGINT/SIGTERM or
//! `--duration`; then prints the counters. Configure the interfaces' kernel side (addresses,
//! up) yourself, e.g. with `ip -n NS addr add 198.18.6.1/24 dev A; ip -n NS link set A up`.

use super::perf::{parse_delay, parse_rate};
use super::CmdResult;
use crate::bench::units::parse_fraction;
use netfold::phy::pipe::{Impairments, PipeConfig};
use netfold::time::Duration;
use netfold_os::emu::{self, Emulator};
use netfold_os::tap::Tap;
use std::process::ExitCode;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// TAP interface of side A (created if it does not exist; a persistent TAP made with
    /// `ip tuntap add NAME mode tap vnet_hdr` is attached to).
    #[arg(long = "a", value_name = "TAP")]
    pub a: String,
    /// TAP interface of side B.
    #[arg(long = "b", value_name = "TAP")]
    pub b: String,
    /// Move interface A into this network namespace (`ip link set A netns NS`).
    #[arg(long, value_name = "NS")]
    pub a_netns: Option<String>,
    /// Move interface B into this network namespace.
    #[arg(long, value_name = "NS")]
    pub b_netns: Option<String>,
    /// IP MTU of the link: set on both interfaces while they are still in this namespace
    /// [default: the interfaces' own, 1500 for new ones].
    #[arg(long)]
    pub mtu: Option<usize>,
    /// One-way delay, e.g. 10ms (suffix us, ms or s; a bare number is ms).
    #[arg(long, value_parser = parse_delay, default_value = "0")]
    pub delay: u64,
    /// Rate in bits/s, e.g. 100M (powers of 1000); 0 = unlimited.
    #[arg(long, value_parser = parse_rate, default_value = "0")]
    pub rate: u64,
    /// Fraction of frames lost, e.g. 0.01.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    pub loss: f64,
    /// Fraction of frames reordered.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    pub reorder: f64,
    /// Fraction of frames duplicated.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    pub duplicate: f64,
    /// Fraction of frames with one bit flipped (after the Ethernet header; the receiver's
    /// checksums must catch it).
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    pub corrupt: f64,
    /// Seed of the impairment RNG (same seed, same decisions for the same frames).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Frames in flight per direction before the link drops [default: 4096, more when
    /// rate x delay needs it].
    #[arg(long)]
    pub queue: Option<usize>,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
}

pub fn run(a: Args) -> CmdResult {
    if let Some(d) = a.duration {
        if !(d > 0.0 && d < 86400.0 * 365.0) {
            return Err(format!("--duration {d}: expected a positive number of seconds").into());
        }
    }
    if a.a == a.b {
        return Err("--a and --b must be two different interfaces".into());
    }
    let imp = Impairments::none()
        .loss(a.loss)
        .reorder(a.reorder)
        .duplicate(a.duplicate)
        .corrupt(a.corrupt)
        .delay(Duration::from_micros(a.delay))
        .rate(a.rate);
    let mut tcfg = emu::tap_config(1500, true);
    tcfg.mtu = a.mtu;
    let tap_a = Tap::open(&a.a, tcfg).map_err(|e| format!("opening TAP {}: {e}", a.a))?;
    let tap_b = Tap::open(&a.b, tcfg).map_err(|e| format!("opening TAP {}: {e}", a.b))?;
    let mtu = match a.mtu {
        Some(m) => {
            for n in [tap_a.name(), tap_b.name()] {
                netfold_os::netns::ip(&["link", "set", n, "mtu", &m.to_string()])?;
            }
            m
        }
        None => tap_a.mtu().min(tap_b.mtu()),
    };
    for (tap, ns) in [(&tap_a, &a.a_netns), (&tap_b, &a.b_netns)] {
        if let Some(ns) = ns {
            netfold_os::netns::ip(&["link", "set", tap.name(), "netns", ns])?;
        }
    }
    // The same capacity rule as the benchmark's in-memory link (wire share of rate x delay plus
    // a bottleneck queue), at least `--queue` or 4096 frames.
    let frame_bits = (mtu as u128 + 14) * 8;
    let on_wire = usize::try_from(
        (u128::from(a.rate) * u128::from(a.delay) / 1_000_000).div_ceil(frame_bits),
    )
    .unwrap_or(usize::MAX / 4);
    let capacity = a
        .queue
        .unwrap_or_else(|| on_wire.saturating_mul(3).max(4096))
        .max(1);
    let cfg = PipeConfig::default()
        .mtu(mtu)
        .impairments(imp)
        .seed(a.seed)
        .capacity(capacity);
    let mut em = Emulator::new(tap_a, tap_b, cfg);
    let (na, nb) = em.names();
    eprintln!(
        "netfold emulate: {na} <-> {nb}, MTU {mtu}, delay {} us, rate {} bit/s, loss {}, \
         reorder {}, duplicate {}, corrupt {}, seed {}, queue {capacity}; {}",
        a.delay,
        a.rate,
        a.loss,
        a.reorder,
        a.duplicate,
        a.corrupt,
        a.seed,
        match a.duration {
            Some(d) => format!("running {d} s"),
            None => "Ctrl-C to stop".into(),
        }
    );
    super::server::install_signal_handlers()?;
    let until = a
        .duration
        .map(|d| std::time::Instant::now() + std::time::Duration::from_secs_f64(d));
    let started = std::time::Instant::now();
    em.run(&super::server::STOP, until)?;
    let st = em.stats();
    println!(
        "netfold emulate: stopped after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!("{st}");
    Ok(ExitCode::SUCCESS)
}
