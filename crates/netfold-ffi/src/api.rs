//! The exported C functions and types (see the crate documentation).
// The C entry points: raw pointers in, checked, then handed to the safe modules.
#![allow(unsafe_code)]
#![allow(non_camel_case_types)]
// Every entry point is `unsafe` to call (it takes raw pointers from C); the safety contract
// is the one `include/netfold.h` states for C callers, not repeated on each function.
#![allow(clippy::missing_safety_doc)]

use crate::errno::{set_errno, R};
use crate::{cabi, device, engine, epoll, fd, ops, options, shards};
use core::ffi::c_void;
use engine::{Clock, Engine};
use libc::{
    c_char, c_int, c_long, c_uint, c_ulong, epoll_event, iovec, msghdr, nfds_t, pollfd, size_t,
    sockaddr, socklen_t, ssize_t,
};
use netfold_core::iface::{Stack, StackConfig};
use netfold_core::phy::{DeviceCaps, Medium};
use netfold_core::wire::ethernet::EthernetAddress;
use netfold_core::wire::ipv6::Ipv6Cidr;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;

pub const NF_MEDIUM_ETHERNET: c_int = 0;
pub const NF_MEDIUM_IP: c_int = 1;
pub const NF_CLOCK_REAL: c_int = 0;
pub const NF_CLOCK_MANUAL: c_int = 1;

/// Stack configuration; `include/netfold.h` declares the same layout (checked by a C test
/// against [`nf_config_layout`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_config {
    /// sizeof(nf_config) as the caller compiled it, for ABI evolution.
    pub size: u32,
    pub medium: c_int,
    /// "198.18.0.2/24" (the prefix length is required).
    pub address: *const c_char,
    /// NULL or "198.18.0.1".
    pub gateway: *const c_char,
    /// Ethernet only; all zero means 02:00 followed by the four bytes of the IPv4 address.
    pub mac: [u8; 6],
    /// IP MTU; 0 means 1500.
    pub mtu: u32,
    pub clock: c_int,
    /// NULL: frames only through nf_inject/nf_take. "tap:NAME": a TAP device; "tun:NAME": a
    /// TUN device (NF_MEDIUM_IP); "packet:IFNAME": an AF_PACKET socket on an interface;
    /// "xdp:IFNAME[@QUEUE][:all]": an AF_XDP socket on a queue of an interface (the frames
    /// for the stack's addresses, or with ":all" every frame of the queue).
    pub device: *const c_char,
    /// NULL, or the stack's IPv6 addresses with their prefixes, comma-separated
    /// ("2001:2::2/64,2001:2:1::2/64"): turns IPv6 on (NDP, DAD, ICMPv6; AF_INET6 sockets
    /// reach IPv6 peers). With `address` NULL the stack is IPv6 only. Added after `device`
    /// (callers compiled against the older, shorter struct are still accepted).
    pub address6: *const c_char,
    /// NULL or the default IPv6 router's address on the link (e.g. "fe80::1").
    pub gateway6: *const c_char,
    /// ECN for TCP, as Linux's `net.ipv4.tcp_ecn`: 0 off, 1 ask on connections we open and
    /// accept when asked, 2 accept only (the default, `nf_config_init`). Added after
    /// `gateway6` (a shorter struct gets 2).
    pub tcp_ecn: c_int,
}

/// sizeof(nf_config) before `address6` and `gateway6` were added: a caller compiled then
/// passes this `size`, and gets no IPv6.
const NF_CONFIG_V1_SIZE: usize = core::mem::offset_of!(nf_config, address6);

/// An opaque stack handle for C.
pub struct nf_stack {
    engine: Arc<Engine>,
    driver: Option<JoinHandle<()>>,
    /// A shard of an `nf_shards` (`nf_shards_stack`): owned by it, so `nf_stack_free`
    /// refuses it.
    view: bool,
}

impl nf_stack {
    /// The engine (the LD_PRELOAD library sets its `on_work` hook).
    #[cfg(netfold_preload)]
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }
}

/// Runs an entry point: errors become `fail` plus errno, panics become `fail` plus EIO.
fn ffi<T>(fail: T, f: impl FnOnce() -> R<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_errno(e);
            fail
        }
        Err(_) => {
            set_errno(libc::EIO);
            fail
        }
    }
}

fn int(f: impl FnOnce() -> R<()>) -> c_int {
    ffi(-1, || f().map(|()| 0))
}

/// msg_iovlen is size_t on glibc and int on musl; a negative count is EINVAL via IOV_MAX.
#[allow(clippy::unnecessary_cast)]
fn iovlen(m: &msghdr) -> usize {
    usize::try_from(m.msg_iovlen as i128).unwrap_or(usize::MAX)
}

/// `long` is 32 or 64 bits depending on the target.
#[allow(clippy::useless_conversion)]
fn long(v: c_long) -> i64 {
    i64::from(v)
}

fn len(n: usize) -> ssize_t {
    ssize_t::try_from(n).unwrap_or(ssize_t::MAX)
}

/// The engine behind a stack pointer.
///
/// # Safety
/// `s` must be NULL or a pointer returned by `nf_stack_new` and not yet freed.
unsafe fn engine<'a>(s: *mut nf_stack) -> R<&'a Arc<Engine>> {
    // SAFETY: non-NULL pointers come from Box::into_raw in nf_stack_new and stay valid until
    // nf_stack_free, or are a shard's view (nf_shards_stack), which its nf_shards owns until
    // nf_shards_free (the caller's contract); we only take a shared reference.
    unsafe { s.as_ref() }.map(|s| &s.engine).ok_or(libc::EINVAL)
}

/// "a.b.c.d/len" -> address and prefix length.
fn parse_cidr(s: &str) -> R<(Ipv4Addr, u8)> {
    let (a, p) = s.split_once('/').ok_or(libc::EINVAL)?;
    let addr: Ipv4Addr = a.trim().parse().map_err(|_| libc::EINVAL)?;
    let prefix: u8 = p.trim().parse().map_err(|_| libc::EINVAL)?;
    if prefix > 32 || addr.is_unspecified() || addr.is_broadcast() || addr.is_multicast() {
        return Err(libc::EINVAL);
    }
    Ok((addr, prefix))
}

/// "addr/len[,addr/len...]" -> IPv6 addresses with prefixes (unicast, not loopback).
fn parse_cidrs6(s: &str) -> R<Vec<Ipv6Cidr>> {
    s.split(',')
        .map(|one| {
            let (a, p) = one.trim().split_once('/').ok_or(libc::EINVAL)?;
            let addr: Ipv6Addr = a.trim().parse().map_err(|_| libc::EINVAL)?;
            let prefix: u8 = p.trim().parse().map_err(|_| libc::EINVAL)?;
            if addr.is_unspecified() || addr.is_multicast() || addr.is_loopback() {
                return Err(libc::EINVAL);
            }
            Ipv6Cidr::new(addr, prefix).ok_or(libc::EINVAL)
        })
        .collect()
}

/// Default address for nf_config_init.
static DEFAULT_ADDRESS: &[u8] = b"198.18.0.2/24\0";

/// Fills `cfg` with defaults: Ethernet, 198.18.0.2/24, no gateway, MAC from the address,
/// MTU 1500, real clock, no device.
#[no_mangle]
pub unsafe extern "C" fn nf_config_init(cfg: *mut nf_config) {
    ffi((), || {
        let c = nf_config {
            size: core::mem::size_of::<nf_config>() as u32,
            medium: NF_MEDIUM_ETHERNET,
            address: DEFAULT_ADDRESS.as_ptr().cast(),
            gateway: core::ptr::null(),
            mac: [0; 6],
            mtu: 0,
            clock: NF_CLOCK_REAL,
            device: core::ptr::null(),
            address6: core::ptr::null(),
            gateway6: core::ptr::null(),
            tcp_ecn: 2,
        };
        if cfg.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: non-NULL; the caller passes a writable nf_config. write_unaligned makes no
        // assumption about alignment.
        unsafe { core::ptr::write_unaligned(cfg, c) };
        Ok(())
    })
}

/// An `nf_config` read: the stack's configuration (its MTU the configured one, before a
/// device's is taken into account), the clock and the device spec.
struct Parsed<'a> {
    stack: StackConfig,
    clock: Clock,
    device: Option<&'a str>,
    /// Whether `mtu` was configured (0 means the default, or a device's own).
    mtu_set: bool,
    /// `tcp_ecn` (0, 1, 2).
    tcp_ecn: c_int,
}

fn parse_config(c: &nf_config) -> R<Parsed<'_>> {
    if (c.size as usize) < NF_CONFIG_V1_SIZE {
        return Err(libc::EINVAL);
    }
    let medium = match c.medium {
        NF_MEDIUM_ETHERNET => Medium::Ethernet,
        NF_MEDIUM_IP => Medium::Ip,
        _ => return Err(libc::EINVAL),
    };
    let clock = match c.clock {
        NF_CLOCK_REAL => Clock::Real(netfold_os::clock::Epoch::now()),
        NF_CLOCK_MANUAL => Clock::Manual,
        _ => return Err(libc::EINVAL),
    };
    // SAFETY: the strings are NULL or NUL-terminated (the header's contract for nf_config).
    let (address, gateway, device) = unsafe {
        (
            cabi::opt_cstr(c.address)?,
            cabi::opt_cstr(c.gateway)?,
            cabi::opt_cstr(c.device)?,
        )
    };
    // SAFETY: as above.
    let (address6, gateway6) =
        unsafe { (cabi::opt_cstr(c.address6)?, cabi::opt_cstr(c.gateway6)?) };
    let addrs6 = address6.map(parse_cidrs6).transpose()?.unwrap_or_default();
    let gateway6 = gateway6
        .map(|g| g.trim().parse::<Ipv6Addr>().map_err(|_| libc::EINVAL))
        .transpose()?;
    // No IPv4 address: IPv6 only (`StackConfig::addr` 0.0.0.0 turns IPv4 off), which needs
    // an IPv6 address.
    let (addr, prefix_len) = match address {
        Some(a) => parse_cidr(a)?,
        None if !addrs6.is_empty() => (Ipv4Addr::UNSPECIFIED, 32),
        None => return Err(libc::EINVAL),
    };
    let gateway = gateway
        .map(|g| g.trim().parse::<Ipv4Addr>().map_err(|_| libc::EINVAL))
        .transpose()?;
    let mtu = match c.mtu {
        0 => 1500,
        // RFC 791: every host must handle 68-byte datagrams; the IPv4 total length is 16 bits.
        m @ 68..=65535 => m as usize,
        _ => return Err(libc::EINVAL),
    };
    let mac = if c.mac == [0; 6] {
        // From the IPv4 address, or (IPv6 only) the last four bytes of the first IPv6 one.
        let o = match addrs6.first() {
            Some(a6) if addr.is_unspecified() => {
                let b = a6.addr().octets();
                [b[12], b[13], b[14], b[15]]
            }
            _ => addr.octets(),
        };
        [0x02, 0x00, o[0], o[1], o[2], o[3]]
    } else {
        c.mac
    };
    Ok(Parsed {
        stack: StackConfig {
            medium,
            mac: EthernetAddress(mac),
            addr,
            prefix_len,
            gateway,
            mtu,
            addrs6,
            gateway6,
            // tcp_secret: the default, a random key from the OS (RFC 6528 §3).
            ..StackConfig::default()
        },
        clock,
        device,
        mtu_set: c.mtu != 0,
        tcp_ecn: if (c.size as usize) >= core::mem::offset_of!(nf_config, tcp_ecn) + 4 {
            match c.tcp_ecn {
                e @ 0..=2 => e,
                _ => return Err(libc::EINVAL),
            }
        } else {
            2
        },
    })
}

fn build_stack(c: &nf_config) -> R<nf_stack> {
    build_stack_with(c, false, engine::PollMode::Thread)
}

/// `build_stack`, with the device's checksum, TSO and GRO offloads on if `offloads` (the
/// LD_PRELOAD library's choice: no frame comes through nf_inject there, so nothing needs the
/// stack to check every frame itself), run in `mode` (see [`engine::PollMode`]).
pub(crate) fn build_stack_with(
    c: &nf_config,
    offloads: bool,
    mode: engine::PollMode,
) -> R<nf_stack> {
    let Parsed {
        stack: mut cfg,
        clock,
        device,
        mtu_set,
        tcp_ecn,
    } = parse_config(c)?;
    let (medium, mtu) = (cfg.medium, cfg.mtu);
    // An AF_XDP device redirects the frames for the stack's own addresses.
    let local = netfold_os::link::stack_addrs(&cfg);
    let inner = device::open_device(device, medium, mtu_set.then_some(mtu), offloads, &local)?;
    // With a device attached the stack runs on its MTU (the stack takes the smaller of the
    // configured and the device's); injected frames then use the same.
    let mtu = inner.as_ref().map_or(mtu, |d| d.caps().mtu.min(mtu));
    let caps = match &inner {
        Some(d) if offloads => DeviceCaps { mtu, ..d.caps() },
        _ => DeviceCaps {
            medium,
            mtu,
            ..DeviceCaps::default()
        },
    };
    cfg.mtu = mtu;
    let stack = Stack::new(cfg);
    let engine = Arc::new(Engine::with_mode(
        stack,
        device::InjectDevice::new(caps, inner),
        clock,
        mode,
    ));
    engine.lock().tcp_ecn = ecn_mode(tcp_ecn)?;
    let driver = match clock {
        Clock::Real(_) => {
            Some(engine::spawn_driver(Arc::clone(&engine)).map_err(|_| libc::EAGAIN)?)
        }
        Clock::Manual => None,
    };
    Ok(nf_stack {
        engine,
        driver,
        view: false,
    })
}

/// Copies the caller's `nf_config`, which may be an older, shorter version (its `size` says).
///
/// # Safety
/// `cfg` is non-NULL and points to at least `size` readable bytes, `size` its first field.
unsafe fn read_config(cfg: *const nf_config) -> R<nf_config> {
    // SAFETY: non-NULL; read the `size` field first (always present), then the struct we
    // know, only if the caller's struct is at least that large (build_stack re-checks).
    let size = unsafe { core::ptr::read_unaligned(cfg.cast::<u32>()) } as usize;
    if size < NF_CONFIG_V1_SIZE {
        return Err(libc::EINVAL);
    }
    // A caller's struct may be the first version's (no IPv6 fields): the fields it has
    // over defaults (nf_config_init's: the IPv6 pointers NULL), at most our size.
    let mut c = core::mem::MaybeUninit::<nf_config>::uninit();
    // SAFETY: `c` is writable and sizeof(nf_config) bytes; nf_config_init fills it.
    unsafe { nf_config_init(c.as_mut_ptr()) };
    // SAFETY: nf_config_init initialized every field (it cannot fail on a valid pointer).
    let mut c = unsafe { c.assume_init() };
    let n = size.min(core::mem::size_of::<nf_config>());
    // SAFETY: the caller's struct holds `size` >= `n` readable bytes (its `size` says so);
    // `c` holds sizeof(nf_config) >= `n` writable bytes; they do not overlap. The bytes
    // copied are the caller's fields of the same layout (the header's).
    unsafe {
        core::ptr::copy_nonoverlapping(cfg.cast::<u8>(), (&mut c as *mut nf_config).cast::<u8>(), n)
    };
    Ok(c)
}

/// Creates a stack; NULL with errno on failure (EINVAL for a bad config, the kernel's errno if
/// the device cannot be opened).
#[no_mangle]
pub unsafe extern "C" fn nf_stack_new(cfg: *const nf_config) -> *mut nf_stack {
    ffi(core::ptr::null_mut(), || {
        if cfg.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: non-NULL, and a readable nf_config of its `size` per the API contract.
        let c = unsafe { read_config(cfg)? };
        let s = build_stack(&c)?;
        Ok(Box::into_raw(Box::new(s)))
    })
}

/// How long `nf_stack_free` lets closed connections finish sending (`NF_STACK_DRAIN_MS`).
pub(crate) const STACK_DRAIN: std::time::Duration = std::time::Duration::from_millis(5000);

/// Closes every descriptor, lets the closed connections deliver their data and FIN for at
/// most `timeout_ms`, then resets what is left; returns how many connections were reset.
#[no_mangle]
pub unsafe extern "C" fn nf_stack_shutdown(s: *mut nf_stack, timeout_ms: c_int) -> c_int {
    ffi(-1, || {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        // SAFETY: non-NULL (engine checked it) and live per the contract; only read.
        if unsafe { (*s).view } {
            return Err(libc::EINVAL);
        }
        let ms = u64::try_from(timeout_ms).map_err(|_| libc::EINVAL)?;
        let ended = e.drain(std::time::Duration::from_millis(ms));
        Ok(c_int::try_from(ended).unwrap_or(c_int::MAX))
    })
}

/// Drains like `nf_stack_shutdown(s, NF_STACK_DRAIN_MS)`, stops the stack's thread and
/// frees everything. No other call may be running on `s`. A shard's view
/// (`nf_shards_stack`) belongs to its `nf_shards`: refused (errno EINVAL), nothing freed.
#[no_mangle]
pub unsafe extern "C" fn nf_stack_free(s: *mut nf_stack) {
    ffi((), || {
        if s.is_null() {
            return Ok(());
        }
        // SAFETY: non-NULL, from nf_stack_new or nf_shards_stack and not yet freed (the
        // caller's contract); only read.
        if unsafe { (*s).view } {
            return Err(libc::EINVAL);
        }
        // SAFETY: `s` came from Box::into_raw in nf_stack_new and is freed only here, once
        // (the caller's contract).
        let mut b = unsafe { Box::from_raw(s) };
        b.engine.drain(STACK_DRAIN);
        b.engine.stop();
        if let Some(t) = b.driver.take() {
            let _ = t.join();
        }
        let mut g = b.engine.lock();
        let st = &mut *g;
        for sock in st.fds.drain() {
            ops::release(&mut st.stack, sock);
        }
        Ok(())
    })
}

/// Hands one inbound frame to the stack (MANUAL: processed before returning).
#[no_mangle]
pub unsafe extern "C" fn nf_inject(s: *mut nf_stack, frame: *const c_void, len: size_t) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract; `frame` readable for `len` bytes per the contract.
        let (e, f) = unsafe { (engine(s)?, cabi::buf_ref(frame, len)?) };
        if f.is_empty() {
            return Err(libc::EINVAL);
        }
        let mut g = e.lock();
        if f.len() > g.dev.max_frame() {
            return Err(libc::EMSGSIZE);
        }
        if !g.dev.push_inbound(f) {
            return Err(libc::ENOBUFS);
        }
        e.changed(&mut g);
        Ok(())
    })
}

/// Copies out the next outbound frame; -1/EAGAIN if none, -1/EMSGSIZE (frame kept) if `cap`
/// is too small.
#[no_mangle]
pub unsafe extern "C" fn nf_take(s: *mut nf_stack, buf: *mut c_void, cap: size_t) -> ssize_t {
    ffi(-1, || {
        // SAFETY: `s` per the API contract; `buf` writable for `cap` bytes per the contract.
        let (e, out) = unsafe { (engine(s)?, cabi::buf_mut(buf, cap)?) };
        let mut g = e.lock();
        let n = g.dev.peek_outbound_len().ok_or(libc::EAGAIN)?;
        if n > out.len() {
            return Err(libc::EMSGSIZE);
        }
        let f = g.dev.pop_outbound().ok_or(libc::EAGAIN)?;
        out[..n].copy_from_slice(&f);
        g.dev.recycle(f);
        Ok(len(n))
    })
}

/// MANUAL clock: sets the time (microseconds, never backwards) and runs what became due.
#[no_mangle]
pub unsafe extern "C" fn nf_clock_set(s: *mut nf_stack, usec: u64) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        let mut g = e.lock();
        e.set_clock(&mut g, usec)
    })
}

/// TCP Fast Open for the whole stack: Linux's `net.ipv4.tcp_fastopen` bits (negative:
/// EINVAL).
#[no_mangle]
pub unsafe extern "C" fn nf_set_tcp_fastopen(s: *mut nf_stack, flags: c_int) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        let flags = u32::try_from(flags).map_err(|_| libc::EINVAL)?;
        let mut g = e.lock();
        g.stack.tcp_mut().set_fastopen(flags);
        Ok(())
    })
}

/// Whether TCP sockets created from now on offer timestamps (RFC 7323; Linux
/// `net.ipv4.tcp_timestamps`, default on): 0 off, 1 on, else EINVAL.
#[no_mangle]
pub unsafe extern "C" fn nf_set_tcp_timestamps(s: *mut nf_stack, on: c_int) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        let on = match on {
            0 => false,
            1 => true,
            _ => return Err(libc::EINVAL),
        };
        e.lock().tcp_timestamps = on;
        Ok(())
    })
}

/// Linux's `net.ipv4.tcp_ecn` values as netfold's modes: 0 off, 1 ask and accept, 2 accept
/// only; else EINVAL.
fn ecn_mode(v: c_int) -> R<netfold_core::tcp::EcnMode> {
    use netfold_core::tcp::EcnMode;
    Ok(match v {
        0 => EcnMode::Off,
        1 => EcnMode::On,
        2 => EcnMode::Passive,
        _ => return Err(libc::EINVAL),
    })
}

/// ECN for TCP sockets created from now on, as Linux's `net.ipv4.tcp_ecn`: 0 off (an
/// ECN-setup SYN is answered without ECE), 1 our SYNs ask and peers' are accepted, 2 accept
/// only (the default); else -1/EINVAL.
#[no_mangle]
pub unsafe extern "C" fn nf_set_tcp_ecn(s: *mut nf_stack, mode: c_int) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        let m = ecn_mode(mode)?;
        e.lock().tcp_ecn = m;
        Ok(())
    })
}

/// TCP_NOTSENT_LOWAT of TCP sockets created from now on that set none themselves, as
/// Linux's `net.ipv4.tcp_notsent_lowat` (default UINT_MAX: no limit).
#[no_mangle]
pub unsafe extern "C" fn nf_set_tcp_notsent_lowat(s: *mut nf_stack, bytes: u32) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        e.lock().tcp_notsent_lowat = bytes;
        Ok(())
    })
}

/// The stack's Fast Open key (Linux `net.ipv4.tcp_fastopen_key`): 16 bytes, or 32 (primary
/// and backup); other lengths EINVAL, NULL EFAULT.
#[no_mangle]
pub unsafe extern "C" fn nf_set_tcp_fastopen_key(
    s: *mut nf_stack,
    key: *const c_void,
    len: usize,
) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        if key.is_null() {
            return Err(libc::EFAULT);
        }
        if len != 16 && len != 32 {
            return Err(libc::EINVAL);
        }
        // SAFETY: `key` readable for `len` bytes per the API contract.
        let b = unsafe { core::slice::from_raw_parts(key.cast::<u8>(), len) };
        let k = netfold_core::tcp::fastopen::FastOpenKey::from_bytes(b).ok_or(libc::EINVAL)?;
        let mut g = e.lock();
        g.stack.tcp_mut().set_fastopen_key(k);
        Ok(())
    })
}

/// The stack's time in microseconds (0 for a NULL stack).
#[no_mangle]
pub unsafe extern "C" fn nf_clock_now(s: *mut nf_stack) -> u64 {
    ffi(0, || {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        let g = e.lock();
        Ok(e.now(&g).total_micros())
    })
}

/// When the stack next needs to run: stores the stack time (microseconds, the scale of
/// `nf_clock_set`) of its earliest timer in `*usec` and returns 1, or returns 0 (`*usec`
/// untouched) when no timer is pending. Never earlier than `nf_clock_now`: work due already
/// reads as now. -1 with EINVAL (NULL stack) or EFAULT (NULL `usec`).
#[no_mangle]
pub unsafe extern "C" fn nf_clock_next(s: *mut nf_stack, usec: *mut u64) -> c_int {
    ffi(-1, || {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        if usec.is_null() {
            return Err(libc::EFAULT);
        }
        let g = e.lock();
        match e.next_deadline(&g) {
            Some(t) => {
                // SAFETY: non-NULL, and writable for a u64 per the API contract.
                unsafe { usec.write_unaligned(t.total_micros()) };
                Ok(1)
            }
            None => Ok(0),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_socket(
    s: *mut nf_stack,
    domain: c_int,
    ty: c_int,
    protocol: c_int,
) -> c_int {
    ffi(-1, || {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        ops::socket(e, domain, ty, protocol)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_bind(
    s: *mut nf_stack,
    fd: c_int,
    a: *const sockaddr,
    l: socklen_t,
) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract; `a` readable for `l` bytes.
        let (e, addr) = unsafe { (engine(s)?, cabi::read_sockaddr(a, l)?) };
        ops::bind(e, fd, addr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_listen(s: *mut nf_stack, fd: c_int, backlog: c_int) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        ops::listen(e, fd, backlog)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_accept(
    s: *mut nf_stack,
    fd: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
) -> c_int {
    ffi(-1, || {
        // SAFETY: `s` per the API contract.
        let e = Arc::clone(unsafe { engine(s)? });
        if !a.is_null() && l.is_null() {
            return Err(libc::EFAULT);
        }
        let (nfd, peer) = ops::accept(&e, fd)?;
        // SAFETY: `a`/`l` valid per the contract (NULL `a` stores nothing).
        if let Err(err) = unsafe { cabi::write_sockaddr(a, l, peer) } {
            let _ = ops::close(&e, nfd);
            return Err(err);
        }
        Ok(nfd)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_connect(
    s: *mut nf_stack,
    fd: c_int,
    a: *const sockaddr,
    l: socklen_t,
) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract; `a` readable for `l` bytes.
        let (e, addr) = unsafe { (Arc::clone(engine(s)?), cabi::read_sockaddr(a, l)?) };
        ops::connect(&e, fd, addr)
    })
}

/// Shared body of the receive calls.
///
/// # Safety
/// `s` per the API contract; `a`/`l` as for `write_sockaddr`.
unsafe fn recv_common(
    s: *mut nf_stack,
    fd: c_int,
    bufs: &mut [&mut [u8]],
    flags: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
) -> R<(ops::Received, ssize_t)> {
    // SAFETY: forwarded contract.
    let e = Arc::clone(unsafe { engine(s)? });
    let r = ops::recv(&e, fd, bufs, flags)?;
    if let Some(from) = r.from {
        // SAFETY: forwarded contract.
        unsafe { cabi::write_sockaddr(a, l, from)? };
    } else if !a.is_null() && !l.is_null() {
        // A stream socket has no per-read source address (recvfrom(2)): length 0.
        // SAFETY: `l` is a valid socklen_t per the contract.
        unsafe { core::ptr::write_unaligned(l, 0) };
    }
    // MSG_TRUNC on a datagram socket: return the real length (recv(2), Linux).
    let n = if flags & libc::MSG_TRUNC != 0 && r.from.is_some() {
        r.full_len
    } else {
        r.len
    };
    Ok((r, len(n)))
}

#[no_mangle]
pub unsafe extern "C" fn nf_read(
    s: *mut nf_stack,
    fd: c_int,
    b: *mut c_void,
    n: size_t,
) -> ssize_t {
    // SAFETY: same arguments, same contract.
    unsafe { nf_recvfrom(s, fd, b, n, 0, core::ptr::null_mut(), core::ptr::null_mut()) }
}

#[no_mangle]
pub unsafe extern "C" fn nf_recv(
    s: *mut nf_stack,
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: same arguments, same contract.
    unsafe {
        nf_recvfrom(
            s,
            fd,
            b,
            n,
            flags,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn nf_recvfrom(
    s: *mut nf_stack,
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    flags: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
) -> ssize_t {
    ffi(-1, || {
        // SAFETY: `b` writable for `n` bytes; the rest per the API contract.
        let buf = unsafe { cabi::buf_mut(b, n)? };
        // SAFETY: per the API contract.
        unsafe { recv_common(s, fd, &mut [buf], flags, a, l) }.map(|(_, n)| n)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_readv(
    s: *mut nf_stack,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
) -> ssize_t {
    ffi(-1, || {
        let cnt = usize::try_from(cnt).map_err(|_| libc::EINVAL)?;
        // SAFETY: `iov` holds `cnt` writable, disjoint buffers per the API contract.
        let mut bufs = unsafe { cabi::iov_mut(iov, cnt)? };
        // SAFETY: per the API contract.
        unsafe {
            recv_common(
                s,
                fd,
                &mut bufs,
                0,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
            )
        }
        .map(|(_, n)| n)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_recvmsg(
    s: *mut nf_stack,
    fd: c_int,
    m: *mut msghdr,
    flags: c_int,
) -> ssize_t {
    ffi(-1, || {
        // SAFETY: `m` is NULL or a valid msghdr per the API contract.
        let m = unsafe { m.as_mut() }.ok_or(libc::EFAULT)?;
        if flags & libc::MSG_ERRQUEUE != 0 {
            // SAFETY: `s` per the API contract.
            let e = unsafe { engine(s)? };
            return recv_errqueue(e, fd, m);
        }
        // SAFETY: msg_iov holds msg_iovlen writable, disjoint buffers per the API contract.
        let mut bufs = unsafe { cabi::iov_mut(m.msg_iov, iovlen(m))? };
        let name = m.msg_name.cast::<sockaddr>();
        let namelen: *mut socklen_t = &mut m.msg_namelen;
        // SAFETY: msg_name writable for msg_namelen bytes per the API contract.
        let (r, n) = unsafe { recv_common(s, fd, &mut bufs, flags, name, namelen)? };
        m.msg_flags = if r.truncated { libc::MSG_TRUNC } else { 0 };
        // Linux `tcp_recvmsg`: the receive timestamps, then TCP_CM_INQ.
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        let mut cm = crate::timestamp::for_read(e, fd, r.len, flags & libc::MSG_PEEK != 0);
        if let Some(v) = r.inq {
            cm.push((libc::SOL_TCP, libc::TCP_CM_INQ, v.to_ne_bytes().to_vec()));
        }
        // SAFETY: msg_control writable for msg_controllen bytes per the API contract.
        unsafe { put_cmsgs(m, &cm) };
        Ok(n)
    })
}

/// Writes `list`'s control messages (level, type, data) into `m`'s control buffer, one after
/// the other as Linux's `put_cmsg` does: one that does not fit is left out with MSG_CTRUNC
/// (and so are the ones after it); msg_controllen becomes the bytes used.
///
/// # Safety
/// `m.msg_control` is NULL or writable for `m.msg_controllen` bytes, aligned for a cmsghdr
/// (cmsg(3)).
#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
unsafe fn put_cmsgs(m: &mut msghdr, list: &[(c_int, c_int, Vec<u8>)]) {
    let room = usize::try_from(m.msg_controllen as u64).unwrap_or(0);
    let mut used = 0usize;
    for (level, ty, data) in list {
        let size = u32::try_from(data.len()).unwrap_or(u32::MAX);
        // SAFETY: pure arithmetic on the length.
        let (len, space) = unsafe {
            (
                libc::CMSG_LEN(size) as usize,
                libc::CMSG_SPACE(size) as usize,
            )
        };
        if m.msg_control.is_null() || room.saturating_sub(used) < len {
            m.msg_flags |= libc::MSG_CTRUNC;
            break;
        }
        // SAFETY: bytes used..used+len of the buffer are inside it (checked above) and `used`
        // is a multiple of CMSG_SPACE's alignment, so the header and the data after it are in
        // the caller's buffer; unaligned writes need no more.
        unsafe {
            let c = m.msg_control.cast::<u8>().add(used).cast::<libc::cmsghdr>();
            core::ptr::addr_of_mut!((*c).cmsg_len).write_unaligned(len as _);
            core::ptr::addr_of_mut!((*c).cmsg_level).write_unaligned(*level);
            core::ptr::addr_of_mut!((*c).cmsg_type).write_unaligned(*ty);
            core::ptr::copy_nonoverlapping(data.as_ptr(), libc::CMSG_DATA(c), data.len());
        }
        used += space.min(room - used);
    }
    m.msg_controllen = used as _;
}

/// `SO_EE_ORIGIN_ZEROCOPY` and `SO_EE_CODE_ZEROCOPY_COPIED` (linux/errqueue.h).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// `recvmsg(MSG_ERRQUEUE)`: one `MSG_ZEROCOPY` notification as Linux's `ip_recv_error` /
/// `ipv6_recv_error` give it: no payload (returns 0), MSG_ERRQUEUE in msg_flags, no address,
/// and one control message SOL_IP/IP_RECVERR (SOL_IPV6/IPV6_RECVERR on an AF_INET6 socket)
/// holding a `struct sock_extended_err` followed by the offender address, all zero for this
/// origin (`struct sock_exterr_skb`'s `errhdr`).
fn recv_errqueue(e: &Engine, fd: c_int, m: &mut msghdr) -> R<ssize_t> {
    let note = match crate::zerocopy::take_note(e, fd) {
        Err(libc::EAGAIN) => return recv_tx_timestamp(e, fd, m),
        other => other?,
    };
    let v6 = e.lock().fds.get(fd)?.family == libc::AF_INET6;
    let mut ee = Vec::with_capacity(48);
    ee.extend_from_slice(&0u32.to_ne_bytes()); // ee_errno
    ee.push(SO_EE_ORIGIN_ZEROCOPY); // ee_origin
    ee.push(0); // ee_type
    ee.push(if note.copied {
        SO_EE_CODE_ZEROCOPY_COPIED
    } else {
        0
    }); // ee_code
    ee.push(0); // ee_pad
    ee.extend_from_slice(&note.lo.to_ne_bytes()); // ee_info
    ee.extend_from_slice(&note.hi.to_ne_bytes()); // ee_data
    let offender = if v6 {
        core::mem::size_of::<libc::sockaddr_in6>()
    } else {
        core::mem::size_of::<libc::sockaddr_in>()
    };
    ee.resize(ee.len() + offender, 0);
    m.msg_flags = libc::MSG_ERRQUEUE;
    m.msg_namelen = 0;
    let (level, ty) = if v6 {
        (libc::SOL_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::SOL_IP, libc::IP_RECVERR)
    };
    // SAFETY: msg_control writable for msg_controllen bytes per the API contract.
    unsafe { put_cmsgs(m, &[(level, ty, ee)]) };
    Ok(0)
}

/// `SO_EE_ORIGIN_TIMESTAMPING` (linux/errqueue.h).
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;

/// `recvmsg(MSG_ERRQUEUE)`: one transmit timestamp as Linux's `ip_recv_error` gives it (after
/// the socket's MSG_ZEROCOPY notifications, when it has both): SOL_SOCKET/SCM_TIMESTAMPING
/// (`sock_recv_timestamp`: ts[0] the software time), then SOL_IP/IP_RECVERR
/// (SOL_IPV6/IPV6_RECVERR) with a `sock_extended_err`: ee_errno ENOMSG, ee_origin
/// SO_EE_ORIGIN_TIMESTAMPING, ee_info the SCM_TSTAMP_* kind, ee_data the byte's key. Linux
/// queues a copy of the packet with it unless SOF_TIMESTAMPING_OPT_TSONLY is set; netfold
/// keeps no packet, so the call returns no bytes and says MSG_TRUNC in that case (what Linux
/// says to a caller whose buffer holds none of it). EAGAIN when nothing is queued.
fn recv_tx_timestamp(e: &Engine, fd: c_int, m: &mut msghdr) -> R<ssize_t> {
    let mut g = e.lock();
    let now = e.now(&g);
    let st = &mut *g;
    let v6 = st.fds.get(fd)?.family == libc::AF_INET6;
    let (note, flags) = crate::timestamp::take_tx_note(st, fd).ok_or(libc::EAGAIN)?;
    drop(g);
    let mut cm = Vec::with_capacity(2);
    if let Some(ts) = crate::timestamp::tx_cmsg(e, now, &note, flags) {
        cm.push((libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, ts));
    }
    let mut ee = Vec::with_capacity(48);
    ee.extend_from_slice(&(libc::ENOMSG as u32).to_ne_bytes()); // ee_errno
    ee.push(SO_EE_ORIGIN_TIMESTAMPING); // ee_origin
    ee.push(0); // ee_type
    ee.push(0); // ee_code
    ee.push(0); // ee_pad
    ee.extend_from_slice(&note.kind.to_ne_bytes()); // ee_info
    ee.extend_from_slice(&note.key.to_ne_bytes()); // ee_data
    let offender = if v6 {
        core::mem::size_of::<libc::sockaddr_in6>()
    } else {
        core::mem::size_of::<libc::sockaddr_in>()
    };
    ee.resize(ee.len() + offender, 0);
    cm.push(if v6 {
        (libc::SOL_IPV6, libc::IPV6_RECVERR, ee)
    } else {
        (libc::SOL_IP, libc::IP_RECVERR, ee)
    });
    m.msg_flags = libc::MSG_ERRQUEUE;
    if flags & crate::timestamp::SOF_OPT_TSONLY == 0 {
        m.msg_flags |= libc::MSG_TRUNC;
    }
    m.msg_namelen = 0;
    // SAFETY: msg_control writable for msg_controllen bytes per the API contract.
    unsafe { put_cmsgs(m, &cm) };
    Ok(0)
}

/// Shared body of the send calls.
///
/// # Safety
/// `s` per the API contract; `a` NULL or readable for `l` bytes.
unsafe fn send_common(
    s: *mut nf_stack,
    fd: c_int,
    bufs: &[&[u8]],
    flags: c_int,
    a: *const sockaddr,
    l: socklen_t,
) -> R<ssize_t> {
    // SAFETY: forwarded contract.
    let e = Arc::clone(unsafe { engine(s)? });
    // Linux `tcp_sendmsg_fastopen`: MSG_FASTOPEN to an AF_UNSPEC address on a TCP socket is
    // EOPNOTSUPP (not the EAFNOSUPPORT any other use of that family gets).
    // SAFETY: `a` is readable for `l` >= sizeof(sa_family_t) bytes per the API contract.
    if flags & libc::MSG_FASTOPEN != 0
        && !a.is_null()
        && l as usize >= core::mem::size_of::<libc::sa_family_t>()
        && i32::from(unsafe { core::ptr::read_unaligned(a.cast::<libc::sa_family_t>()) })
            == libc::AF_UNSPEC
        && matches!(e.lock().fds.get(fd)?.kind, fd::Kind::Tcp(_))
    {
        return Err(libc::EOPNOTSUPP);
    }
    let to = if a.is_null() {
        None
    } else {
        // SAFETY: forwarded contract.
        Some(unsafe { cabi::read_sockaddr(a, l)? })
    };
    if flags & libc::MSG_ZEROCOPY != 0 {
        let mut lent = Vec::with_capacity(bufs.len());
        for b in bufs.iter().filter(|b| !b.is_empty()) {
            // SAFETY: a send with MSG_ZEROCOPY promises (include/netfold.h) that its buffers
            // stay readable and unmodified until the send's notification is read.
            lent.push(unsafe { cabi::lend(b.as_ptr().cast(), b.len())? });
        }
        return crate::zerocopy::msg_send(&e, fd, bufs, &lent, flags, to).map(len);
    }
    ops::send(&e, fd, bufs, flags, to).map(len)
}

#[no_mangle]
pub unsafe extern "C" fn nf_write(
    s: *mut nf_stack,
    fd: c_int,
    b: *const c_void,
    n: size_t,
) -> ssize_t {
    // SAFETY: same arguments, same contract.
    unsafe { nf_sendto(s, fd, b, n, 0, core::ptr::null(), 0) }
}

#[no_mangle]
pub unsafe extern "C" fn nf_send(
    s: *mut nf_stack,
    fd: c_int,
    b: *const c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: same arguments, same contract.
    unsafe { nf_sendto(s, fd, b, n, flags, core::ptr::null(), 0) }
}

#[no_mangle]
pub unsafe extern "C" fn nf_sendto(
    s: *mut nf_stack,
    fd: c_int,
    b: *const c_void,
    n: size_t,
    flags: c_int,
    a: *const sockaddr,
    l: socklen_t,
) -> ssize_t {
    ffi(-1, || {
        // SAFETY: `b` readable for `n` bytes; the rest per the API contract.
        let buf = unsafe { cabi::buf_ref(b, n)? };
        // SAFETY: per the API contract.
        unsafe { send_common(s, fd, &[buf], flags, a, l) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_writev(
    s: *mut nf_stack,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
) -> ssize_t {
    ffi(-1, || {
        let cnt = usize::try_from(cnt).map_err(|_| libc::EINVAL)?;
        // SAFETY: `iov` holds `cnt` readable buffers per the API contract.
        let bufs = unsafe { cabi::iov_ref(iov, cnt)? };
        // SAFETY: per the API contract.
        unsafe { send_common(s, fd, &bufs, 0, core::ptr::null(), 0) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_sendmsg(
    s: *mut nf_stack,
    fd: c_int,
    m: *const msghdr,
    flags: c_int,
) -> ssize_t {
    ffi(-1, || {
        // SAFETY: `m` is NULL or a valid msghdr per the API contract.
        let m = unsafe { m.as_ref() }.ok_or(libc::EFAULT)?;
        // SAFETY: msg_iov holds msg_iovlen readable buffers per the API contract.
        let bufs = unsafe { cabi::iov_ref(m.msg_iov, iovlen(m))? };
        // Ancillary data would change meaning if ignored; none is supported.
        if !m.msg_control.is_null() && m.msg_controllen > 0 {
            return Err(libc::EOPNOTSUPP);
        }
        // SAFETY: msg_name readable for msg_namelen bytes per the API contract.
        unsafe {
            send_common(
                s,
                fd,
                &bufs,
                flags,
                m.msg_name.cast::<sockaddr>().cast_const(),
                m.msg_namelen,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_shutdown(s: *mut nf_stack, fd: c_int, how: c_int) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        ops::shutdown(e, fd, how)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_close(s: *mut nf_stack, fd: c_int) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract. Cloned: a lingering close may sleep.
        let e = Arc::clone(unsafe { engine(s)? });
        ops::close(&e, fd)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_getsockopt(
    s: *mut nf_stack,
    fd: c_int,
    level: c_int,
    name: c_int,
    v: *mut c_void,
    l: *mut socklen_t,
) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        if v.is_null() || l.is_null() {
            return Err(libc::EFAULT);
        }
        let val = options::get(e, fd, level, name)?;
        // SAFETY: `v` writable for `*l` bytes per the API contract.
        unsafe { cabi::write_opt(val, v, l) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_setsockopt(
    s: *mut nf_stack,
    fd: c_int,
    level: c_int,
    name: c_int,
    v: *const c_void,
    l: socklen_t,
) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        // SAFETY: `v` readable for `l` bytes per the API contract.
        let val = unsafe { cabi::read_opt(options::shape(level, name), v, l)? };
        options::set(e, fd, level, name, val)
    })
}

/// # Safety
/// As for nf_getsockname.
unsafe fn name_common(
    s: *mut nf_stack,
    fd: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
    peer: bool,
) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        if a.is_null() || l.is_null() {
            return Err(libc::EFAULT);
        }
        let v = ops::sockname(e, fd, peer)?;
        // SAFETY: `a` writable for `*l` bytes per the API contract.
        unsafe { cabi::write_sockaddr(a, l, v) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_getsockname(
    s: *mut nf_stack,
    fd: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
) -> c_int {
    // SAFETY: same arguments, same contract.
    unsafe { name_common(s, fd, a, l, false) }
}

#[no_mangle]
pub unsafe extern "C" fn nf_getpeername(
    s: *mut nf_stack,
    fd: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
) -> c_int {
    // SAFETY: same arguments, same contract.
    unsafe { name_common(s, fd, a, l, true) }
}

#[no_mangle]
pub unsafe extern "C" fn nf_fcntl(s: *mut nf_stack, fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    ffi(-1, || {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        ops::fcntl(e, fd, cmd, long(arg))
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_ioctl(
    s: *mut nf_stack,
    fd: c_int,
    req: c_ulong,
    arg: *mut c_void,
) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        if arg.is_null() {
            return Err(libc::EFAULT);
        }
        let p = arg.cast::<c_int>();
        if req == libc::FIONBIO {
            // SAFETY: FIONBIO takes a readable int* (ioctl_list(2)); non-NULL checked.
            let on = unsafe { core::ptr::read_unaligned(p) } != 0;
            return ops::set_nonblock(e, fd, on);
        }
        let v = ops::ioctl_query(e, fd, req)?;
        // SAFETY: FIONREAD/SIOCOUTQ take a writable int*; non-NULL checked.
        unsafe { core::ptr::write_unaligned(p, v) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_poll(
    s: *mut nf_stack,
    fds: *mut pollfd,
    n: nfds_t,
    timeout_ms: c_int,
) -> c_int {
    ffi(-1, || {
        // SAFETY: `s` per the API contract.
        let e = Arc::clone(unsafe { engine(s)? });
        let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
        // A bound like RLIMIT_NOFILE's: more entries than descriptors can exist is EINVAL.
        if n > 16 * fd::MAX_FDS {
            return Err(libc::EINVAL);
        }
        let fds: &mut [pollfd] = if n == 0 {
            &mut []
        } else if fds.is_null() {
            return Err(libc::EFAULT);
        } else {
            // SAFETY: `fds` points at `n` writable pollfd entries per the API contract.
            unsafe { core::slice::from_raw_parts_mut(fds, n) }
        };
        ops::poll(&e, fds, timeout_ms)
    })
}

/// epoll_create1(2) over netfold descriptors: a new epoll instance (a netfold descriptor).
#[no_mangle]
pub unsafe extern "C" fn nf_epoll_create1(s: *mut nf_stack, flags: c_int) -> c_int {
    ffi(-1, || {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        epoll::create(e, flags)
    })
}

/// epoll_ctl(2): `ev` may be NULL for EPOLL_CTL_DEL.
#[no_mangle]
pub unsafe extern "C" fn nf_epoll_ctl(
    s: *mut nf_stack,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *const epoll_event,
) -> c_int {
    int(|| {
        // SAFETY: `s` per the API contract.
        let e = unsafe { engine(s)? };
        let ev = if ev.is_null() {
            None
        } else {
            // SAFETY: a non-NULL `ev` points at a readable epoll_event per the API contract;
            // read_unaligned because the struct is packed on x86-64.
            let v = unsafe { core::ptr::read_unaligned(ev) };
            Some((v.events, v.u64))
        };
        epoll::ctl(e, epfd, op, fd, ev)
    })
}

/// epoll_wait(2): up to `maxevents` ready descriptors into `events`.
#[no_mangle]
pub unsafe extern "C" fn nf_epoll_wait(
    s: *mut nf_stack,
    epfd: c_int,
    events: *mut epoll_event,
    maxevents: c_int,
    timeout_ms: c_int,
) -> c_int {
    ffi(-1, || {
        // SAFETY: `s` per the API contract.
        let e = Arc::clone(unsafe { engine(s)? });
        // epoll_wait(2): "EINVAL ... maxevents is less than or equal to zero"; Linux also
        // bounds it by EP_MAX_EVENTS (INT_MAX / sizeof(struct epoll_event)).
        let max = usize::try_from(maxevents).map_err(|_| libc::EINVAL)?;
        if max == 0 || max > c_int::MAX as usize / core::mem::size_of::<epoll_event>() {
            return Err(libc::EINVAL);
        }
        if events.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: `events` points at `maxevents` writable entries per the API contract
        // (epoll_event is packed, so any address is aligned for it).
        let out = unsafe { core::slice::from_raw_parts_mut(events, max) };
        let n = epoll::wait(&e, epfd, out, timeout_ms)?;
        Ok(n as c_int)
    })
}

/// Layout self-description for the header test: stores up to `n` field offsets of nf_config
/// (size, medium, address, gateway, mac, mtu, clock, device, address6, gateway6, tcp_ecn) and
/// returns
/// sizeof(nf_config).
#[no_mangle]
pub unsafe extern "C" fn nf_config_layout(offsets: *mut size_t, n: size_t) -> size_t {
    use core::mem::offset_of;
    let offs = [
        offset_of!(nf_config, size),
        offset_of!(nf_config, medium),
        offset_of!(nf_config, address),
        offset_of!(nf_config, gateway),
        offset_of!(nf_config, mac),
        offset_of!(nf_config, mtu),
        offset_of!(nf_config, clock),
        offset_of!(nf_config, device),
        offset_of!(nf_config, address6),
        offset_of!(nf_config, gateway6),
        offset_of!(nf_config, tcp_ecn),
    ];
    if !offsets.is_null() {
        for (i, o) in offs.iter().enumerate().take(n) {
            // SAFETY: `offsets` holds `n` writable entries per the API contract; `i` < `n`.
            unsafe { core::ptr::write_unaligned(offsets.add(i), *o) };
        }
    }
    core::mem::size_of::<nf_config>()
}

/// One released zero-copy buffer (`nf_zc_completions`); `include/netfold.h` declares the same
/// layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct nf_zc_completion {
    /// The cookie given to nf_send_zc / nf_sendfile_zc.
    pub cookie: u64,
    /// Bytes of the buffer the call took.
    pub len: u64,
    /// The descriptor it was sent on (may be closed, or reused, by now).
    pub fd: c_int,
    /// 0: acknowledged by the peer; ECONNABORTED: the connection ended first.
    pub status: c_int,
}

#[no_mangle]
pub unsafe extern "C" fn nf_send_zc(
    s: *mut nf_stack,
    fd: c_int,
    b: *const c_void,
    n: size_t,
    cookie: u64,
    flags: c_int,
) -> ssize_t {
    ffi(-1, || {
        // SAFETY: forwarded contract.
        let e = Arc::clone(unsafe { engine(s)? });
        // SAFETY: `b` stays readable and unmodified for `n` bytes until its completion (the
        // header's contract for nf_send_zc).
        let buf = unsafe { cabi::lend(b, n)? };
        crate::zerocopy::send_zc(&e, fd, buf, cookie, flags).map(len)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_sendfile_zc(
    s: *mut nf_stack,
    fd: c_int,
    file_fd: c_int,
    offset: libc::off_t,
    n: size_t,
    cookie: u64,
    flags: c_int,
) -> ssize_t {
    ffi(-1, || {
        // SAFETY: forwarded contract.
        let e = Arc::clone(unsafe { engine(s)? });
        let offset = u64::try_from(offset).map_err(|_| libc::EINVAL)?;
        if n == 0 {
            return Err(libc::EINVAL);
        }
        if file_fd < 0 {
            return Err(libc::EBADF);
        }
        // SAFETY: `file_fd` is an open kernel descriptor for the duration of this call (the
        // caller's contract); it is only borrowed to duplicate it for the mapping.
        let file = unsafe { std::os::fd::BorrowedFd::borrow_raw(file_fd) }
            .try_clone_to_owned()
            .map(std::fs::File::from)
            .map_err(|err| err.raw_os_error().unwrap_or(libc::EBADF))?;
        // SAFETY: the caller promises (header, nf_sendfile_zc) not to truncate or modify that
        // range of the file until the completion.
        let buf = unsafe { netfold_os::mmap::map_file(&file, offset, n) }
            .map_err(|err| err.raw_os_error().unwrap_or(libc::EINVAL))?;
        crate::zerocopy::send_zc(&e, fd, buf, cookie, flags).map(len)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nf_zc_completions(
    s: *mut nf_stack,
    fd: c_int,
    out: *mut nf_zc_completion,
    max: c_int,
) -> c_int {
    ffi(-1, || {
        // SAFETY: forwarded contract.
        let e = Arc::clone(unsafe { engine(s)? });
        let max = usize::try_from(max).map_err(|_| libc::EINVAL)?;
        if out.is_null() && max > 0 {
            return Err(libc::EFAULT);
        }
        let got = crate::zerocopy::completions(&e, fd, max)?;
        for (i, d) in got.iter().enumerate() {
            let c = nf_zc_completion {
                cookie: d.cookie,
                len: d.len,
                fd: d.fd,
                status: d.status,
            };
            // SAFETY: `out` holds `max` writable entries (the API contract) and `i < max`
            // (`completions` returns at most `max`).
            unsafe { core::ptr::write_unaligned(out.add(i), c) };
        }
        Ok(got.len() as c_int)
    })
}

/// Layout self-description of nf_zc_completion, as `nf_config_layout` does for nf_config.
#[no_mangle]
pub unsafe extern "C" fn nf_zc_completion_layout(offsets: *mut size_t, n: size_t) -> size_t {
    use core::mem::offset_of;
    let offs = [
        offset_of!(nf_zc_completion, cookie),
        offset_of!(nf_zc_completion, len),
        offset_of!(nf_zc_completion, fd),
        offset_of!(nf_zc_completion, status),
    ];
    if !offsets.is_null() {
        for (i, o) in offs.iter().enumerate().take(n) {
            // SAFETY: `offsets` holds `n` writable entries per the API contract; `i` < `n`.
            unsafe { core::ptr::write_unaligned(offsets.add(i), *o) };
        }
    }
    core::mem::size_of::<nf_zc_completion>()
}

// ---------------------------------------------------------------------------------------------
// Shards: N stacks of one host, one per device queue; see `shards.rs`.

/// Pin shard `k`'s driver and its `nf_shards_run_on` threads to CPU `k` (modulo the CPUs
/// online; a cpuset that refuses leaves them unpinned).
pub const NF_SHARDS_PIN: c_int = 1;

/// An opaque handle on one host's shards.
pub struct nf_shards {
    inner: shards::Shards,
    /// Shard `k`'s `nf_stack` (`nf_shards_stack`). Never resized after creation, so the
    /// pointers handed out stay put for the handle's life.
    views: Vec<nf_stack>,
}

/// A listening socket on every shard of an `nf_shards`.
pub struct nf_shards_listener {
    inner: shards::Listener,
}

/// The return value of a C callback, carried back to the joining thread.
struct CPtr(*mut c_void);
// SAFETY: the pointer is only carried from the callback's thread to the one that joins it and
// never dereferenced by Rust; what it points to is the C program's, as with pthread_join.
unsafe impl Send for CPtr {}

/// A thread started by `nf_shards_run_on`.
pub struct nf_shard_thread {
    handle: JoinHandle<CPtr>,
}

/// The `nf_shards` behind a pointer.
///
/// # Safety
/// `sh` must be NULL or a pointer from `nf_shards_new_pair` / `nf_shards_new_tap` not yet
/// freed.
unsafe fn shards_ref<'a>(sh: *mut nf_shards) -> R<&'a nf_shards> {
    // SAFETY: non-NULL pointers come from Box::into_raw in nf_shards_new_* and stay valid
    // until nf_shards_free (the caller's contract); only a shared reference is taken.
    unsafe { sh.as_ref() }.ok_or(libc::EINVAL)
}

fn shard_index(k: c_uint, sh: &nf_shards) -> R<usize> {
    let k = k as usize;
    if k < sh.inner.len() {
        Ok(k)
    } else {
        Err(libc::EINVAL)
    }
}

fn boxed_shards(inner: shards::Shards) -> *mut nf_shards {
    let views = (0..inner.len())
        .map(|k| nf_stack {
            engine: Arc::clone(inner.engine(k).expect("k < len")),
            driver: None,
            view: true,
        })
        .collect();
    Box::into_raw(Box::new(nf_shards { inner, views }))
}

/// Creates two hosts of `shards` shards each, joined by an in-memory multi-queue link that
/// steers every frame by the RSS (Toeplitz) hash of its 4-tuple.
#[no_mangle]
pub unsafe extern "C" fn nf_shards_new_pair(
    a: *const nf_config,
    b: *const nf_config,
    shards: c_uint,
    flags: c_int,
    out_a: *mut *mut nf_shards,
    out_b: *mut *mut nf_shards,
) -> c_int {
    int(|| {
        if a.is_null() || b.is_null() || out_a.is_null() || out_b.is_null() {
            return Err(libc::EFAULT);
        }
        if flags & !NF_SHARDS_PIN != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: non-NULL, readable nf_configs of their `size` per the API contract.
        let (ca, cb) = unsafe { (read_config(a)?, read_config(b)?) };
        let (pa, pb) = (parse_config(&ca)?, parse_config(&cb)?);
        // The link is the shards' device, and only the REAL clock runs a driver thread.
        for p in [&pa, &pb] {
            if p.device.is_some() || matches!(p.clock, Clock::Manual) {
                return Err(libc::EINVAL);
            }
        }
        let pin = flags & NF_SHARDS_PIN != 0;
        let (ha, hb) = shards::Shards::pair(pa.stack, pb.stack, shards as usize, pin)?;
        // SAFETY: non-NULL, writable per the API contract.
        unsafe {
            out_a.write_unaligned(boxed_shards(ha));
            out_b.write_unaligned(boxed_shards(hb));
        }
        Ok(())
    })
}

/// Creates one host of `shards` shards over the queues of multi-queue TAP `ifname` (created
/// if needed; "nf%d" lets the kernel pick the number), shard `k` on queue `k`, the queues
/// sharing ARP and NDP frames. The kernel steers each flow to the queue it last came from.
#[no_mangle]
pub unsafe extern "C" fn nf_shards_new_tap(
    cfg: *const nf_config,
    ifname: *const c_char,
    shards: c_uint,
    flags: c_int,
    out: *mut *mut nf_shards,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        new_shards(cfg, ifname, flags, out, |stack, name, mtu, pin| {
            shards::Shards::tap(stack, name, shards as usize, mtu, pin)
        })
    }
}

/// Creates one host of `shards` shards over the device `spec` names: "tap:NAME" (as
/// `nf_shards_new_tap`) or "xdp:IFNAME[:all]" (one AF_XDP socket on each of the interface's
/// queues `0..shards`, shard `k` on queue `k`, the queues sharing ARP and NDP frames;
/// EINVAL when the interface has fewer receive queues, or the spec names a queue).
#[no_mangle]
pub unsafe extern "C" fn nf_shards_new_device(
    cfg: *const nf_config,
    spec: *const c_char,
    shards: c_uint,
    flags: c_int,
    out: *mut *mut nf_shards,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        new_shards(cfg, spec, flags, out, |stack, spec, mtu, pin| {
            if let Some(name) = spec.strip_prefix("tap:") {
                shards::Shards::tap(stack, name, shards as usize, mtu, pin)
            } else if let Some(rest) = spec.strip_prefix("xdp:") {
                // Every queue 0..shards is used: a spec naming one is refused.
                if rest.contains('@') {
                    return Err(libc::EINVAL);
                }
                let x = netfold_os::link::parse_xdp(rest).map_err(|_| libc::EINVAL)?;
                shards::Shards::xdp(stack, &x.ifname, x.all, shards as usize, mtu, pin)
            } else {
                Err(libc::EINVAL)
            }
        })
    }
}

/// What `nf_shards_new_tap` and `nf_shards_new_device` share: checks the arguments, reads
/// `cfg` (which must name no device of its own and run the real clock, the only one that
/// drives shard threads), and stores in `*out` the shards `make` builds from the stack's
/// configuration, the string `name`, the configured MTU (if set) and whether to pin.
///
/// # Safety
/// `cfg` is NULL or a readable `nf_config` of its `size`; `name` is NULL or NUL-terminated;
/// `out` is NULL or writable.
unsafe fn new_shards(
    cfg: *const nf_config,
    name: *const c_char,
    flags: c_int,
    out: *mut *mut nf_shards,
    make: impl FnOnce(StackConfig, &str, Option<usize>, bool) -> R<shards::Shards>,
) -> c_int {
    int(|| {
        if cfg.is_null() || name.is_null() || out.is_null() {
            return Err(libc::EFAULT);
        }
        if flags & !NF_SHARDS_PIN != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: a non-NULL, readable nf_config of its `size` per the caller's contract.
        let c = unsafe { read_config(cfg)? };
        let p = parse_config(&c)?;
        if p.device.is_some() || matches!(p.clock, Clock::Manual) {
            return Err(libc::EINVAL);
        }
        // SAFETY: non-NULL and NUL-terminated per the caller's contract.
        let name = unsafe { cabi::opt_cstr(name)? }.ok_or(libc::EFAULT)?;
        let mtu = p.mtu_set.then_some(p.stack.mtu);
        let pin = flags & NF_SHARDS_PIN != 0;
        let sh = make(p.stack, name, mtu, pin)?;
        // SAFETY: non-NULL, writable per the caller's contract.
        unsafe { out.write_unaligned(boxed_shards(sh)) };
        Ok(())
    })
}

/// Stops every shard and frees the handle, its `nf_stack` views and their descriptors; -1 with
/// EBUSY (nothing freed) while an `nf_shards_run_on` callback is still running.
#[no_mangle]
pub unsafe extern "C" fn nf_shards_free(sh: *mut nf_shards) -> c_int {
    int(|| {
        if sh.is_null() {
            return Ok(());
        }
        // SAFETY: per the API contract (see shards_ref).
        if unsafe { shards_ref(sh)? }.inner.busy() {
            return Err(libc::EBUSY);
        }
        // SAFETY: from Box::into_raw in nf_shards_new_pair, freed only here, once (the
        // caller's contract: no other call on it or its views is running).
        let b = unsafe { Box::from_raw(sh) };
        b.inner.shutdown();
        Ok(())
    })
}

/// Number of shards (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn nf_shards_count(sh: *mut nf_shards) -> c_uint {
    // SAFETY: per the API contract.
    ffi(0, || Ok(unsafe { shards_ref(sh)? }.inner.len() as c_uint))
}

/// Shard `k` as an `nf_stack`, for every `nf_*` call; owned by `sh`.
#[no_mangle]
pub unsafe extern "C" fn nf_shards_stack(sh: *mut nf_shards, k: c_uint) -> *mut nf_stack {
    ffi(core::ptr::null_mut(), || {
        // SAFETY: per the API contract.
        let sh = unsafe { shards_ref(sh)? };
        let k = shard_index(k, sh)?;
        // The C API takes `nf_stack *` (not const) everywhere, as it always has; every call
        // through it only takes shared references (see `engine`).
        Ok(&sh.views[k] as *const nf_stack as *mut nf_stack)
    })
}

/// Runs `fn(arg)` on a new thread of shard `k`.
#[no_mangle]
pub unsafe extern "C" fn nf_shards_run_on(
    sh: *mut nf_shards,
    k: c_uint,
    f: Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>,
    arg: *mut c_void,
) -> *mut nf_shard_thread {
    ffi(core::ptr::null_mut(), || {
        // SAFETY: per the API contract.
        let sh = unsafe { shards_ref(sh)? };
        let k = shard_index(k, sh)?;
        let f = f.ok_or(libc::EFAULT)?;
        let arg = CPtr(arg);
        let handle = sh.inner.run_on(k, move || {
            let arg = arg;
            // SAFETY: the caller passed a callback valid for `arg` from any thread, as for
            // pthread_create (the API contract).
            CPtr(unsafe { f(arg.0) })
        })?;
        Ok(Box::into_raw(Box::new(nf_shard_thread { handle })))
    })
}

/// Waits for a thread of `nf_shards_run_on` to end, stores its callback's return value in
/// `*ret` (if not NULL) and frees the handle.
#[no_mangle]
pub unsafe extern "C" fn nf_shards_join(t: *mut nf_shard_thread, ret: *mut *mut c_void) -> c_int {
    int(|| {
        if t.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: from Box::into_raw in nf_shards_run_on, joined (freed) only once per the
        // API contract.
        let t = unsafe { Box::from_raw(t) };
        let r = t.handle.join().map_err(|_| libc::EIO)?;
        if !ret.is_null() {
            // SAFETY: non-NULL, writable per the API contract.
            unsafe { ret.write_unaligned(r.0) };
        }
        Ok(())
    })
}

/// The calling thread's shard if `nf_shards_run_on` started it, else -1.
#[no_mangle]
pub extern "C" fn nf_current_shard() -> c_int {
    shards::current_shard().map_or(-1, |k| k as c_int)
}

/// Listens on `a` on every shard.
#[no_mangle]
pub unsafe extern "C" fn nf_shards_listen(
    sh: *mut nf_shards,
    a: *const sockaddr,
    l: socklen_t,
    backlog: c_int,
) -> *mut nf_shards_listener {
    ffi(core::ptr::null_mut(), || {
        // SAFETY: per the API contract; `a` readable for `l` bytes.
        let (sh, addr) = unsafe { (shards_ref(sh)?, cabi::read_sockaddr(a, l)?) };
        let inner = sh.inner.listen(addr, backlog)?;
        Ok(Box::into_raw(Box::new(nf_shards_listener { inner })))
    })
}

/// The listener's descriptor on shard `k` (a descriptor of `nf_shards_stack(sh, k)`).
#[no_mangle]
pub unsafe extern "C" fn nf_shards_listener_fd(l: *mut nf_shards_listener, k: c_uint) -> c_int {
    ffi(-1, || {
        // SAFETY: NULL or from nf_shards_listen and not yet closed (the API contract).
        let l = unsafe { l.as_ref() }.ok_or(libc::EINVAL)?;
        l.inner.fd(k as usize)
    })
}

/// Closes the listening socket of every shard and frees `l`.
#[no_mangle]
pub unsafe extern "C" fn nf_shards_listener_close(l: *mut nf_shards_listener) -> c_int {
    int(|| {
        if l.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: from Box::into_raw in nf_shards_listen, closed only once (the API
        // contract).
        let l = unsafe { Box::from_raw(l) };
        l.inner.close();
        Ok(())
    })
}

/// Accepts the next connection on shard `k`.
#[no_mangle]
pub unsafe extern "C" fn nf_accept_on(
    l: *mut nf_shards_listener,
    k: c_uint,
    a: *mut sockaddr,
    al: *mut socklen_t,
) -> c_int {
    ffi(-1, || {
        // SAFETY: NULL or from nf_shards_listen and not yet closed (the API contract).
        let l = unsafe { l.as_ref() }.ok_or(libc::EINVAL)?;
        if !a.is_null() && al.is_null() {
            return Err(libc::EFAULT);
        }
        let k = k as usize;
        let (fd, peer) = l.inner.accept_on(k)?;
        // SAFETY: `a`/`al` valid per the contract (NULL `a` stores nothing).
        unsafe { write_peer_or_close(&l.inner, k, fd, a, al, peer) }
    })
}

/// Accepts the next connection on any shard: stores the shard in `*shard`.
#[no_mangle]
pub unsafe extern "C" fn nf_accept_any(
    l: *mut nf_shards_listener,
    shard: *mut c_uint,
    a: *mut sockaddr,
    al: *mut socklen_t,
    timeout_ms: c_int,
) -> c_int {
    ffi(-1, || {
        // SAFETY: NULL or from nf_shards_listen and not yet closed (the API contract).
        let l = unsafe { l.as_ref() }.ok_or(libc::EINVAL)?;
        if shard.is_null() || (!a.is_null() && al.is_null()) {
            return Err(libc::EFAULT);
        }
        let timeout = u64::try_from(timeout_ms)
            .ok()
            .map(std::time::Duration::from_millis);
        let (k, fd, peer) = l.inner.accept_any(timeout)?;
        // SAFETY: `a`/`al` valid per the contract (NULL `a` stores nothing).
        let fd = unsafe { write_peer_or_close(&l.inner, k, fd, a, al, peer)? };
        // SAFETY: non-NULL, writable per the API contract.
        unsafe { shard.write_unaligned(k as c_uint) };
        Ok(fd)
    })
}

/// Stores an accepted connection's peer; on failure closes the connection (as `nf_accept`).
///
/// # Safety
/// `a`/`al` as for `cabi::write_sockaddr`.
unsafe fn write_peer_or_close(
    l: &shards::Listener,
    k: usize,
    fd: c_int,
    a: *mut sockaddr,
    al: *mut socklen_t,
    peer: std::net::SocketAddr,
) -> R<c_int> {
    // SAFETY: forwarded contract.
    if let Err(err) = unsafe { cabi::write_sockaddr(a, al, peer) } {
        let _ = l.close_accepted(k, fd);
        return Err(err);
    }
    Ok(fd)
}

/// Connects socket `fd` of shard `k` from a local port that the RSS hash steers to shard `k`.
#[no_mangle]
pub unsafe extern "C" fn nf_connect_on(
    sh: *mut nf_shards,
    k: c_uint,
    fd: c_int,
    a: *const sockaddr,
    l: socklen_t,
) -> c_int {
    int(|| {
        // SAFETY: per the API contract; `a` readable for `l` bytes.
        let (sh, addr) = unsafe { (shards_ref(sh)?, cabi::read_sockaddr(a, l)?) };
        let k = shard_index(k, sh)?;
        sh.inner.connect_on(k, fd, addr)
    })
}

/// Lists every exported function by its C name. Naming each one as a function value makes the
/// list fail to compile if a name is wrong; the header test checks that `include/netfold.h`
/// declares exactly these.
macro_rules! exports {
    ($($f:ident),* $(,)?) => {
        #[cfg(test)]
        pub(crate) fn exported_names() -> Vec<&'static str> {
            $(let _ = $f as *const ();)*
            vec![$(stringify!($f)),*]
        }
    };
}
exports!(
    nf_config_init,
    nf_stack_new,
    nf_stack_free,
    nf_stack_shutdown,
    nf_inject,
    nf_take,
    nf_clock_set,
    nf_clock_now,
    nf_clock_next,
    nf_set_tcp_fastopen,
    nf_set_tcp_fastopen_key,
    nf_set_tcp_timestamps,
    nf_set_tcp_ecn,
    nf_set_tcp_notsent_lowat,
    nf_socket,
    nf_bind,
    nf_listen,
    nf_accept,
    nf_connect,
    nf_read,
    nf_write,
    nf_readv,
    nf_writev,
    nf_recv,
    nf_send,
    nf_recvfrom,
    nf_sendto,
    nf_recvmsg,
    nf_sendmsg,
    nf_shutdown,
    nf_close,
    nf_getsockopt,
    nf_setsockopt,
    nf_getsockname,
    nf_getpeername,
    nf_fcntl,
    nf_ioctl,
    nf_poll,
    nf_epoll_create1,
    nf_epoll_ctl,
    nf_epoll_wait,
    nf_config_layout,
    nf_send_zc,
    nf_sendfile_zc,
    nf_zc_completions,
    nf_zc_completion_layout,
    nf_shards_new_pair,
    nf_shards_new_tap,
    nf_shards_new_device,
    nf_shards_free,
    nf_shards_count,
    nf_shards_stack,
    nf_shards_run_on,
    nf_shards_join,
    nf_current_shard,
    nf_shards_listen,
    nf_shards_listener_fd,
    nf_shards_listener_close,
    nf_accept_on,
    nf_accept_any,
    nf_connect_on,
);

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
