//! Steady-state bulk transfer makes no heap allocation per segment (DESIGN: "recycle, don't
//! allocate"; the OLS 2002 study). A counting global allocator watches a 256 MiB transfer between
//! two stacks over the in-memory pipe, in one thread and virtual time, after a warm-up; the
//! number of allocations during the transfer must be a small constant, not proportional to the
//! ~190 000 segments moved. Runs with GRO on (the default) and off, and over IPv6 (the
//! header-template path of `emit_tcp_v6`, NDP's cache, the IPv6 receive path).

use netfold::iface::StackConfig;
use netfold::phy::pipe::PipeConfig;
use netfold::tcp;
use netfold::time::Instant;
use netfold::wire::ethernet::EthernetAddress;
use netfold::wire::Ipv4Addr;
use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY-free: the test only forwards to the system allocator and counts calls; this file is a
// separate crate (an integration test), not covered by the library's deny(unsafe_code).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarding the caller's layout to the system allocator unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was allocated by `System` with layout `l` (see `alloc`/`realloc`).
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `p`/`l` come from this allocator, which forwards to `System`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests in this file must not run concurrently: the counter is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// The kit's two stacks over a pipe, plus the connection and the buffers the pump reuses.
struct Net {
    stacks: netfold_testkit::Net,
    c: tcp::Handle,
    s: tcp::Handle,
    chunk: Vec<u8>,
    buf: Vec<u8>,
}

impl Net {
    /// Two stacks and one connection, over IPv4, or over IPv6 (`v6`: 2001:2::a to
    /// 2001:2::b, DAD off so the addresses are usable at once).
    fn new(gro: bool, v6: bool) -> Net {
        let a6: Ipv6Addr = "2001:2::a".parse().unwrap();
        let b6: Ipv6Addr = "2001:2::b".parse().unwrap();
        let cfg = |addr, six: Ipv6Addr, m| StackConfig {
            addr,
            mac: EthernetAddress([2, 0, 0, 0, 0, m]),
            gro,
            addrs6: if v6 {
                vec![netfold::wire::ipv6::Ipv6Cidr::new(six, 64).unwrap()]
            } else {
                Vec::new()
            },
            dad_transmits: 0,
            ..StackConfig::default()
        };
        let mut stacks =
            netfold_testkit::Net::pipe(cfg(IP_A, a6, 1), cfg(IP_B, b6, 2), PipeConfig::default());
        let (ip_a, ip_b): (IpAddr, IpAddr) = if v6 {
            (a6.into(), b6.into())
        } else {
            (IP_A.into(), IP_B.into())
        };
        let tc = tcp::Config {
            mss: stacks.a.tcp_mss(IP_B),
            ..tcp::Config::default()
        };
        stacks.now = Instant::from_millis(1);
        let l = stacks
            .b
            .tcp_mut()
            .listen(SocketAddr::new(ip_b, 80), 4, tc)
            .unwrap();
        let c = stacks
            .a
            .tcp_mut()
            .connect(
                stacks.now,
                SocketAddr::new(ip_a, 0),
                SocketAddr::new(ip_b, 80),
                tc,
            )
            .unwrap();
        let mut n = Net {
            stacks,
            c,
            s: c,
            chunk: (0..65536u32).map(|i| i as u8).collect(),
            buf: vec![0; 65536],
        };
        for _ in 0..10_000 {
            n.stacks.step();
            if let Ok(s) = n.stacks.b.tcp_mut().accept(l) {
                n.s = s;
                return n;
            }
        }
        panic!("no connection");
    }

    /// Moves `total` bytes from a to b; returns the bytes received.
    fn pump(&mut self, total: u64) -> u64 {
        let mut got = 0u64;
        let mut sent = 0u64;
        let mut idle = 0;
        while got < total && idle < 100_000 {
            if sent < total {
                if let Ok(n) = self.stacks.a.tcp_mut().send(self.c, &self.chunk) {
                    sent += n as u64;
                }
            }
            let moved = self.stacks.step();
            while let Ok(n) = self.stacks.b.tcp_mut().recv(self.s, &mut self.buf) {
                if n == 0 {
                    break;
                }
                got += n as u64;
            }
            idle = if moved { 0 } else { idle + 1 };
        }
        got
    }
}

fn steady_state_allocations(gro: bool) {
    steady_state_allocations_in(gro, false);
}

fn steady_state_allocations_in(gro: bool, v6: bool) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut net = Net::new(gro, v6);
    // Warm-up: fill the pools, grow the queues and the TCP rings to their working sizes.
    assert!(net.pump(32 << 20) >= 32 << 20);
    let before = ALLOCS.load(Ordering::Relaxed);
    let segs_before = net.stacks.b.counters().frames_in;
    let got = net.pump(256 << 20);
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    let frames = net.stacks.b.counters().frames_in - segs_before;
    eprintln!("gro={gro} v6={v6}: {got} bytes, {frames} frames, {allocs} allocations");
    if v6 {
        // The connection really ran over IPv6.
        assert!(net.stacks.b.counters().ipv6_in >= frames, "not over IPv6");
    }
    assert!(got >= 256 << 20, "only {got} bytes moved");
    assert!(frames > 100_000, "{frames} frames");
    // A small constant: a late pool refill or a queue growing once is fine; one allocation per
    // segment (or per 100) is not.
    assert!(
        allocs <= 64,
        "gro={gro}: {allocs} allocations for {frames} frames in steady state\n{}",
        net.stacks.b.counters()
    );
}

#[test]
fn bulk_transfer_allocates_nothing_per_segment_gro_on() {
    steady_state_allocations(true);
}

#[test]
fn bulk_transfer_allocates_nothing_per_segment_gro_off() {
    steady_state_allocations(false);
}

#[test]
fn ipv6_bulk_transfer_allocates_nothing_per_segment_gro_on() {
    steady_state_allocations_in(true, true);
}

#[test]
fn ipv6_bulk_transfer_allocates_nothing_per_segment_gro_off() {
    steady_state_allocations_in(false, true);
}

/// The IPv6 path keeps the same discipline: after NDP resolved and the queues grew, an echo
/// request and its reply (parse, extension header walk, ICMPv6, NDP cache lookup, send) make
/// no heap allocation, in either stack.
#[test]
fn ping6_allocates_nothing_per_echo() {
    use netfold::time::Duration;
    use netfold::wire::ipv6::Ipv6Cidr;
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = |addr, v6: &str, m| StackConfig {
        addr,
        mac: EthernetAddress([2, 0, 0, 0, 0, m]),
        addrs6: vec![Ipv6Cidr::new(v6.parse().unwrap(), 64).unwrap()],
        ..StackConfig::default()
    };
    let mut n = netfold_testkit::Net::pipe(
        cfg(IP_A, "2001:2::a", 1),
        cfg(IP_B, "2001:2::b", 2),
        PipeConfig::default(),
    );
    n.run_for(Duration::from_secs(3));
    let dst: Ipv6Addr = "2001:2::b".parse().unwrap();
    let data = [0x5au8; 1000];
    let ping = |n: &mut netfold_testkit::Net, seq: u16| {
        n.a.ping(n.now, dst, 1, seq, &data).unwrap();
        n.settle();
        assert_eq!(n.a.ping6_recv().map(|r| r.seq_no), Some(seq));
    };
    for seq in 0..100 {
        ping(&mut n, seq);
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    for seq in 100..2100 {
        ping(&mut n, seq);
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    eprintln!("2000 echoes over IPv6: {allocs} allocations");
    assert!(allocs <= 16, "{allocs} allocations for 2000 echoes");
}
