//! `netfold serve`: runs a netfold stack on a TAP device with all services of
//! [`netfold::apps`] (echo 7 TCP+UDP, discard 9, chargen 19, HTTP 8080, iperf3 5201), until
//! SIGINT/SIGTERM; then prints the counters and exits 0.
//!
//! One thread: poll the stack, poll the services, and sleep in poll(2) on the TAP descriptor
//! until a frame arrives or the next timer is due.
//!
//! The TAP device here is a minimal stand-in (plain IFF_TAP | IFF_NO_PI, no offloads) until
//! `netfold::phy::tap::Tap` (with vnet headers, TSO/GRO) lands; swap it in `open_tap`.

use super::CmdResult;
use clap::Parser;
use netfold::apps::{Services, ServicesConfig};
use netfold::buf::{PacketBuf, Pool};
use netfold::iface::{Stack, StackConfig};
use netfold::phy::pcap::PcapWriter;
use netfold::phy::{Device, DeviceCaps, Medium};
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::EthernetAddress;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser, Debug)]
pub struct Args {
    /// The link: `tap:NAME` (attaches to TAP device NAME, creating it if it does not exist).
    #[arg(long)]
    link: String,
    /// Our address and prefix, e.g. 198.18.0.2/24.
    #[arg(long)]
    addr: String,
    /// Default gateway for off-link peers.
    #[arg(long)]
    gateway: Option<Ipv4Addr>,
    /// Write every frame sent and received to this pcap file.
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
    /// IP MTU.
    #[arg(long, default_value_t = 1500)]
    mtu: usize,
    /// Our MAC address (default: a locally administered one).
    #[arg(long, default_value = "02:6e:66:00:00:02")]
    mac: String,
    /// Most connections served at once.
    #[arg(long, default_value_t = 256)]
    max_conns: usize,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Installs SIGINT/SIGTERM handlers that set [`STOP`]. No SA_RESTART, so a poll(2) in progress
/// returns EINTR at once.
fn install_signal_handlers() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is zero-initialisable plain data; we set a handler that only does an
        // atomic store, an empty mask, and pass valid pointers to a live local.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC address {s:?}"));
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC address {s:?}"))?;
    }
    if m[0] & 1 != 0 {
        return Err(format!("{s} is a multicast address"));
    }
    Ok(EthernetAddress(m))
}

fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (a, p) = s.split_once('/').unwrap_or((s, "24"));
    let addr: Ipv4Addr = a.parse().map_err(|_| format!("bad address {a:?}"))?;
    let prefix: u8 = p
        .parse()
        .ok()
        .filter(|&p| p <= 32)
        .ok_or_else(|| format!("bad prefix length {p:?}"))?;
    Ok((addr, prefix))
}

/// A TAP device: Ethernet frames through /dev/net/tun, non-blocking.
pub struct TapDevice {
    fd: OwnedFd,
    mtu: usize,
    /// Frames the kernel refused (queue full) — dropped like a full NIC ring.
    pub tx_dropped: u64,
    pub rx_errors: u64,
}

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;

fn open_tap(name: &str, mtu: usize) -> std::io::Result<TapDevice> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "TAP name must be 1..15 bytes",
        ));
    }
    // SAFETY: open() with a NUL-terminated literal path; the result is checked below.
    let raw = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor we just opened and own exclusively.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // struct ifreq: 16 bytes of name, then the union whose first member here is ifr_flags.
    let mut ifr = [0u8; 40];
    ifr[..name.len()].copy_from_slice(name.as_bytes());
    ifr[16..18].copy_from_slice(&(IFF_TAP | IFF_NO_PI).to_ne_bytes());
    // SAFETY: TUNSETIFF reads and writes one struct ifreq (40 bytes on Linux) at the pointer,
    // which points to our 40-byte buffer.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, ifr.as_mut_ptr()) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(TapDevice {
        fd,
        mtu,
        tx_dropped: 0,
        rx_errors: 0,
    })
}

impl Device for TapDevice {
    fn caps(&self) -> DeviceCaps {
        DeviceCaps {
            medium: Medium::Ethernet,
            mtu: self.mtu,
            ..DeviceCaps::default()
        }
    }

    fn recv_batch(
        &mut self,
        _now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let mut n = 0;
        while n < max {
            let mut b = pool.get();
            // Room for a full frame even if the kernel side's MTU is larger than ours.
            let room = (self.mtu + 18).max(1518);
            b.set_len(room);
            let buf = b.as_mut_slice();
            // SAFETY: read() writes at most `buf.len()` bytes into the live slice.
            let r = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast::<libc::c_void>(),
                    buf.len(),
                )
            };
            if r <= 0 {
                if r < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::WouldBlock
                        && e.kind() != std::io::ErrorKind::Interrupted
                    {
                        self.rx_errors += 1;
                    }
                }
                b.set_len(0);
                pool.put(b);
                break;
            }
            b.truncate(r as usize);
            out.push(b);
            n += 1;
        }
        n
    }

    fn send_batch(&mut self, _now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        for b in frames.drain(..) {
            let f = b.as_slice();
            // SAFETY: write() reads `f.len()` bytes from the live slice.
            let r = unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    f.as_ptr().cast::<libc::c_void>(),
                    f.len(),
                )
            };
            if r < 0 {
                self.tx_dropped += 1;
            }
            pool.put(b);
        }
    }
}

/// Waits until `fd` is readable, a signal arrives, or `timeout` passes.
fn wait_readable(fd: RawFd, timeout: std::time::Duration) {
    let ms = timeout.as_micros().div_ceil(1000).min(1000) as libc::c_int;
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; EINTR (signal) is the expected way out on shutdown.
    unsafe {
        libc::poll(&mut p, 1, ms);
    }
}

/// The stack's clock: microseconds since the Unix epoch (so pcap timestamps are wall time),
/// advancing monotonically.
struct Clock {
    base: u64,
    start: std::time::Instant,
}

impl Clock {
    fn new() -> Clock {
        let base = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Clock {
            base,
            start: std::time::Instant::now(),
        }
    }
    fn now(&self) -> Instant {
        Instant::from_micros(self.base + self.start.elapsed().as_micros() as u64)
    }
}

fn serve_loop(
    dev: &mut dyn Device,
    fd: RawFd,
    stack: &mut Stack,
    services: &mut Services,
    clock: &Clock,
) {
    while !STOP.load(Ordering::SeqCst) {
        let now = clock.now();
        let mut did = stack.poll(now, dev);
        did |= services.poll(stack, now);
        if did {
            continue;
        }
        let next = [stack.poll_at(now), services.poll_at(now)]
            .into_iter()
            .flatten()
            .min();
        let wait = match next {
            Some(at) => (at - now).min(Duration::from_millis(500)),
            None => Duration::from_millis(500),
        };
        if wait > Duration::ZERO {
            wait_readable(fd, wait.into());
        }
    }
    // Tell clients we are going (iperf3 SERVER_TERMINATE, RSTs) and let it reach the wire.
    services.shutdown(stack);
    let until = clock.now() + Duration::from_millis(100);
    while clock.now() < until {
        if !stack.poll(clock.now(), dev) {
            wait_readable(fd, std::time::Duration::from_millis(10));
        }
    }
}

pub fn run(a: Args) -> CmdResult {
    let name = a
        .link
        .strip_prefix("tap:")
        .ok_or_else(|| format!("--link {:?}: only tap:NAME is supported", a.link))?;
    let (addr, prefix_len) = parse_cidr(&a.addr)?;
    let mac = parse_mac(&a.mac)?;
    if !(576..=65535).contains(&a.mtu) {
        return Err(format!("--mtu {} out of range 576..65535", a.mtu).into());
    }
    install_signal_handlers()?;
    let mut tap = open_tap(name, a.mtu).map_err(|e| format!("opening tap {name}: {e}"))?;
    let fd = tap.fd.as_raw_fd();

    let mut secret = [0u8; 16];
    // The ISN key only needs to be unpredictable to off-path attackers; time and pid will do
    // for a measurement tool (RFC 6528 §3 wants a secret; this is one per run).
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
        ^ (u128::from(std::process::id()) << 64);
    secret.copy_from_slice(&seed.to_le_bytes());
    let mut stack = Stack::new(StackConfig {
        medium: Medium::Ethernet,
        mac,
        addr,
        prefix_len,
        gateway: a.gateway,
        mtu: a.mtu,
        tcp_secret: secret,
        ..StackConfig::default()
    });
    let mss = (a.mtu - 40).min(usize::from(u16::MAX)) as u16;
    let cfg = ServicesConfig {
        max_conns: a.max_conns.max(1),
        tcp: netfold::tcp::Config {
            mss,
            time_wait: netfold::time::Duration::from_secs(10),
            ..netfold::tcp::Config::default()
        },
        ..ServicesConfig::default()
    };
    let mut services = Services::bind(&mut stack, cfg)?;
    let clock = Clock::new();

    println!(
        "netfold serve: {addr}/{prefix_len} on tap {name} (mtu {}): echo 7/tcp+udp, discard 9, \
         chargen 19, http 8080, iperf3 5201",
        a.mtu
    );
    let _ = std::io::stdout().flush();

    let mut pcap_records = None;
    match &a.pcap {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| format!("creating {}: {e}", path.display()))?;
            let mut dev = PcapWriter::new(tap, std::io::BufWriter::new(file))?;
            serve_loop(&mut dev, fd, &mut stack, &mut services, &clock);
            dev.flush()?;
            pcap_records = Some((dev.records(), dev.write_errors()));
            let (t, _) = dev.into_parts();
            tap = t;
        }
        None => serve_loop(&mut tap, fd, &mut stack, &mut services, &clock),
    }

    println!("netfold serve: stopping");
    println!("{}", services.stats());
    println!("{}", stack.counters());
    println!(
        "tap: tx_dropped={} rx_errors={}",
        tap.tx_dropped, tap.rx_errors
    );
    if let Some((records, errors)) = pcap_records {
        println!("pcap: records={records} write_errors={errors}");
    }
    let _ = std::io::stdout().flush();
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses() {
        assert_eq!(
            parse_cidr("198.18.0.2/24"),
            Ok((Ipv4Addr::new(198, 18, 0, 2), 24))
        );
        assert!(parse_cidr("198.18.0.2/33").is_err());
        assert!(parse_cidr("x/24").is_err());
        assert_eq!(
            parse_mac("02:6e:66:00:00:02").map(|m| m.0),
            Ok([2, 0x6e, 0x66, 0, 0, 2])
        );
        assert!(parse_mac("01:00:00:00:00:00").is_err());
        assert!(parse_mac("02:00").is_err());
    }
}
