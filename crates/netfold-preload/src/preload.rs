//! `libnetfold_preload.so`: the libc socket calls of an unmodified, dynamically linked
//! program, served by netfold (`LD_PRELOAD=libnetfold_preload.so PROGRAM`, or
//! `netfold run -- PROGRAM`).
//!
//! Each function below has the C library's name and prototype, so the dynamic linker binds
//! the program's calls (and every library's) to it first. A descriptor that is not netfold's
//! goes on to the C library's own function (`real`), found with `dlsym(RTLD_NEXT)`.
//!
//! - Descriptor numbers: a netfold socket's number is a real kernel descriptor, an eventfd
//!   reserved for it, so kernel and netfold numbers never collide and a number is not reused
//!   while the socket lives. `SOCKS[fd]` names the C API descriptor behind it (lock-free: one
//!   atomic load decides for every call).
//! - Which sockets: AF_INET and AF_INET6 stream and datagram sockets start on netfold. One
//!   whose first bind, connect or sendto names a loopback address moves to the kernel before
//!   that call (a kernel socket is made with the same type, the options set so far are set
//!   on it again, and it is `dup3`ed onto the socket's number). AF_UNIX, AF_NETLINK, raw
//!   sockets and everything else stay in the kernel.
//! - Waiting: poll, select and epoll_wait on a mix of kernel and netfold descriptors sleep in
//!   the kernel's poll(2), on the kernel descriptors plus an eventfd of the calling thread that
//!   whoever polled the stack (a driver thread, another call) signals after every poll that
//!   did work while someone waits (the engine's `on_work` hook). So a signal interrupts them (EINTR) as it would on the kernel;
//!   a blocking read, recv, accept, write or send on a netfold socket waits the same way first,
//!   for at most its SO_RCVTIMEO / SO_SNDTIMEO (then EAGAIN, as Linux).
//! - Who runs the stack (`NETFOLD_POLL`, see `config`): INLINE mode (the default), where the
//!   calls above poll it themselves, or THREAD mode, one driver thread per process. INLINE:
//!   a call that changed something sends its segments from the calling thread; every wait
//!   holds the device (one thread at a time) and sleeps in the same poll(2) on the device's
//!   descriptor too, for at most the stack's next deadline, and polls the stack when it wakes;
//!   the other waiting threads sleep on their eventfd as in THREAD mode, and one of them takes
//!   the device when its holder lets it go. A fallback thread runs the stack while no call
//!   does (the engine's INLINE mode). Small sends on non-blocking sockets are corked until
//!   the thread's next call into the library (`cork`).
//! - sendmmsg/recvmmsg loop over sendmsg/recvmsg; splice with a netfold socket at one end and
//!   a pipe at the other goes through a buffer (`splice_ours`).
//! - One stack per process, started at the first socket from the environment (`config`).
//!   Sockets are per process: a child made by fork keeps the numbers
//!   but not the stack; it may close them (the parent's sockets are untouched), any other use
//!   fails with EBADF and a message on stderr, and its new sockets are the kernel's.
//!
//! Not covered: statically linked programs (nothing to interpose), io_uring, raw `syscall(2)`,
//! stdio on a socket (`fdopen`: the C library calls its internal read/write), passing sockets
//! across exec or over AF_UNIX (SCM_RIGHTS), a vfork child that uses a socket.
// The interposed functions are C entry points taking raw pointers; their safety contract is
// the C function's (see the man pages), not repeated on each.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

mod config;
mod real;

use crate::api::{self, nf_stack};
use crate::errno::set_errno;
use core::ffi::c_void;
use libc::{
    c_int, c_long, c_uint, c_ulong, epoll_event, fd_set, iovec, msghdr, nfds_t, off_t, pollfd,
    sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Descriptor numbers the tables cover; a reserved number beyond is refused (EMFILE).
const MAX_FD: usize = 1 << 16;
/// Longest single sleep of a wait on netfold descriptors before it looks again: a safety net
/// for a change no poll announced (the engine's own waiters use the same bound).
const SLICE: Duration = Duration::from_millis(100);
/// Longest wait at start for IPv6 Duplicate Address Detection to end.
const DAD_WAIT: Duration = Duration::from_secs(3);

/// Kernel descriptor -> C API socket descriptor + 1 (0: not netfold's).
static SOCKS: [AtomicI32; MAX_FD] = [const { AtomicI32::new(0) }; MAX_FD];
/// Kernel epoll descriptor -> the C API epoll instance holding its netfold members, + 1.
static EPOLLS: [AtomicI32; MAX_FD] = [const { AtomicI32::new(0) }; MAX_FD];
/// C API descriptors whose blocking calls first wait in the kernel's poll(2) (`after_wait`):
/// the blocking sockets.
static PLAIN: [AtomicBool; NF_FDS] = [const { AtomicBool::new(false) }; NF_FDS];
/// Their SO_RCVTIMEO and SO_SNDTIMEO in milliseconds, rounded up (-1: none), which bound
/// those waits.
static RCVTIMEO: [AtomicI32; NF_FDS] = [const { AtomicI32::new(-1) }; NF_FDS];
static SNDTIMEO: [AtomicI32; NF_FDS] = [const { AtomicI32::new(-1) }; NF_FDS];
const NF_FDS: usize = crate::fd::MAX_FDS + crate::fd::FIRST_FD as usize;
/// C API descriptors that are non-blocking (O_NONBLOCK): their small sends are corked
/// (`cork`).
static NONBLOCK: [AtomicBool; NF_FDS] = [const { AtomicBool::new(false) }; NF_FDS];
/// Sends shorter than this are corked (`cork`): about one full segment at Ethernet's MTU.
const CORK_MAX: usize = 1448;
/// Entries of `SOCKS` in use: 0 lets poll and select skip the look at their descriptors.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Set in a child made by fork (`pthread_atfork`).
static FORKED: AtomicBool = AtomicBool::new(false);
/// The forked child's EBADF was explained once.
static FORK_TOLD: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while the stack starts: its own sockets (the TAP's ioctl socket) are the kernel's.
    static STARTING: Cell<bool> = const { Cell::new(false) };
    /// The calling thread's doorbell (created at its first wait on netfold descriptors).
    static BELL: Bell = Bell::new();
    /// The bell of the calling thread while it waits, or -1.
    static MY_BELL: Cell<c_int> = const { Cell::new(-1) };
}

/// What the library knows about one C API socket beside the C API.
struct Meta {
    /// Kernel numbers naming it (dup, dup2, F_DUPFD).
    refs: u32,
    domain: c_int,
    /// socket()'s type, flags included.
    ty: c_int,
    protocol: c_int,
    nonblock: bool,
    /// Neither bound, connected nor sent from yet: may still move to the kernel.
    undecided: bool,
    /// setsockopt calls made while undecided, replayed on a kernel socket.
    opts: Vec<(c_int, c_int, Vec<u8>)>,
}

static META: LazyLock<Mutex<HashMap<c_int, Meta>>> = LazyLock::new(Default::default);

fn meta() -> MutexGuard<'static, HashMap<c_int, Meta>> {
    META.lock().unwrap_or_else(|p| p.into_inner())
}

/// The process's stack.
struct Proc {
    stack: *mut nf_stack,
    linger_ms: c_int,
    verbose: bool,
}
// SAFETY: the stack lives until the process ends (it is never freed); every C API call on it
// is thread-safe (its engine's mutex) and takes only a shared reference.
unsafe impl Send for Proc {}
// SAFETY: as above.
unsafe impl Sync for Proc {}

static PROC: OnceLock<Option<Proc>> = OnceLock::new();

fn say(msg: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr(), "netfold: {msg}");
}

/// The stack, started at the first call that needs it; `None`: sockets are the kernel's.
fn proc() -> Option<&'static Proc> {
    PROC.get_or_init(|| {
        STARTING.with(|s| s.set(true));
        let r = start();
        STARTING.with(|s| s.set(false));
        match r {
            Ok(p) => Some(p),
            Err(e) if config::required() => {
                say(format_args!("{e}; exiting (NETFOLD_REQUIRE is set)"));
                // SAFETY: exit(3) ends the process as the program's own exit would.
                unsafe { libc::exit(1) }
            }
            Err(e) => {
                say(format_args!("{e}; sockets stay in the kernel"));
                None
            }
        }
    })
    .as_ref()
}

fn stack() -> *mut nf_stack {
    PROC.get()
        .and_then(Option::as_ref)
        .map_or(core::ptr::null_mut(), |p| p.stack)
}

fn start() -> Result<Proc, String> {
    let c = config::from_env()?;
    let cs = |s: &Option<String>| {
        s.as_deref()
            .map(|s| std::ffi::CString::new(s).map_err(|_| "NUL in a setting".to_string()))
            .transpose()
    };
    let (a4, a6, g4, g6) = (
        cs(&c.addr4)?,
        cs(&c.addrs6)?,
        cs(&c.gateway4)?,
        cs(&c.gateway6)?,
    );
    let dev = std::ffi::CString::new(c.link.as_str()).map_err(|_| "NUL in NETFOLD_LINK")?;
    let ptr = |s: &Option<std::ffi::CString>| s.as_ref().map_or(core::ptr::null(), |s| s.as_ptr());
    let mut cfg = core::mem::MaybeUninit::<api::nf_config>::uninit();
    // SAFETY: `cfg` is writable and sized for an nf_config; nf_config_init fills every field.
    unsafe { api::nf_config_init(cfg.as_mut_ptr()) };
    // SAFETY: initialized just above.
    let mut cfg = unsafe { cfg.assume_init() };
    cfg.medium = c.medium;
    cfg.address = ptr(&a4);
    cfg.address6 = ptr(&a6);
    cfg.gateway = ptr(&g4);
    cfg.gateway6 = ptr(&g6);
    cfg.mtu = c.mtu;
    cfg.device = dev.as_ptr();
    let stack = match api::build_stack_with(&cfg, c.offloads, c.poll) {
        Ok(s) => Box::into_raw(Box::new(s)),
        Err(e) => {
            let e = std::io::Error::from_raw_os_error(e);
            return Err(format!("cannot start on {}: {e}", c.link));
        }
    };
    // SAFETY: from Box::into_raw just above, never freed.
    let engine = unsafe { &*stack }.engine();
    engine.lock().on_work = Some(Box::new(ring));
    // RFC 4862 §5.4: an address is not used while Duplicate Address Detection runs (about a
    // second). A program expects its host's addresses ready when it starts, so the first
    // socket waits for DAD to end, at most `DAD_WAIT`.
    let end = Instant::now() + DAD_WAIT;
    while Instant::now() < end
        && engine
            .lock()
            .stack
            .ipv6_addrs()
            .any(|(_, st)| st == netfold_core::iface::AddrState::Tentative)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: registers plain functions; `forked` only stores an atomic, `at_exit` runs the
    // C API's drain on a live stack.
    unsafe {
        libc::pthread_atfork(None, None, Some(forked));
        libc::atexit(at_exit);
    }
    if c.verbose {
        say(format_args!(
            "on {}{}{} as {}",
            c.link,
            if c.offloads { "" } else { " (no offloads)" },
            match engine.mode() {
                crate::engine::PollMode::Thread => ", driver thread",
                crate::engine::PollMode::Inline => ", polled inline",
            },
            [c.addr4.as_deref(), c.addrs6.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    Ok(Proc {
        stack,
        linger_ms: c.linger_ms,
        verbose: c.verbose,
    })
}

extern "C" fn forked() {
    FORKED.store(true, Ordering::SeqCst);
}

/// At exit, closed connections get `NETFOLD_LINGER_MS` to deliver what they hold (their
/// data and FIN are still in netfold's buffers, and the driver thread dies with the process).
extern "C" fn at_exit() {
    if FORKED.load(Ordering::SeqCst) {
        return;
    }
    if let Some(p) = PROC.get().and_then(Option::as_ref) {
        // SAFETY: the live stack of this process.
        unsafe { api::nf_stack_shutdown(p.stack, p.linger_ms) };
        if p.verbose {
            // SAFETY: the live stack of this process (never freed).
            let engine = unsafe { &*p.stack }.engine();
            // The counters that moved, one per line ("group name value").
            let all = engine.lock().stack.counters().to_string();
            let moved: Vec<&str> = all
                .lines()
                .filter(|l| l.split_whitespace().last().is_some_and(|v| v != "0"))
                .collect();
            say(format_args!("counters at exit:\n{}", moved.join("\n")));
            if let Some((app, driver, takeovers)) = engine.inline_stats() {
                say(format_args!(
                    "polls by application calls {app}, by the fallback thread {driver} \
                     ({takeovers} take-overs)"
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Descriptors.

fn slot(fd: c_int) -> Option<usize> {
    usize::try_from(fd).ok().filter(|&i| i < MAX_FD)
}

/// The C API socket behind kernel number `fd`, if it is netfold's.
#[inline]
fn nf_of(fd: c_int) -> Option<c_int> {
    let v = SOCKS[slot(fd)?].load(Ordering::Acquire);
    (v != 0).then_some(v - 1)
}

fn ep_of(fd: c_int) -> Option<c_int> {
    let v = EPOLLS[slot(fd)?].load(Ordering::Acquire);
    (v != 0).then_some(v - 1)
}

enum To {
    Kernel,
    Netfold(c_int),
    /// A netfold socket of the parent process (this is a forked child).
    Parents,
}

#[inline]
fn target(fd: c_int) -> To {
    match nf_of(fd) {
        None => To::Kernel,
        Some(_) if FORKED.load(Ordering::Relaxed) => To::Parents,
        Some(nf) => To::Netfold(nf),
    }
}

/// EBADF for a parent's socket used in a forked child, explained once on stderr.
fn parents(fd: c_int) -> c_int {
    if !FORK_TOLD.swap(true, Ordering::Relaxed) {
        say(format_args!(
            "descriptor {fd} is a netfold socket of the parent process: netfold sockets \
             belong to the process that made them and are not shared across fork (EBADF)"
        ));
    }
    set_errno(libc::EBADF);
    -1
}

/// Gives C API socket `nf` a kernel number (an eventfd, close-on-exec if `cloexec`).
fn install(nf: c_int, m: Meta, cloexec: bool) -> c_int {
    let flags = libc::EFD_NONBLOCK | if cloexec { libc::EFD_CLOEXEC } else { 0 };
    // SAFETY: eventfd(2) takes no pointers.
    let k = unsafe { libc::eventfd(0, flags) };
    let fail = |e: c_int| {
        // SAFETY: our own C API descriptor, not published anywhere.
        unsafe { api::nf_close(stack(), nf) };
        set_errno(e);
        -1
    };
    if k < 0 {
        return fail(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE),
        );
    }
    let Some(i) = slot(k) else {
        // SAFETY: the eventfd just made.
        unsafe { real::close(k) };
        return fail(libc::EMFILE);
    };
    plain(nf, &m);
    if let Some(i) = usize::try_from(nf).ok().filter(|&i| i < NF_FDS) {
        RCVTIMEO[i].store(-1, Ordering::Relaxed);
        SNDTIMEO[i].store(-1, Ordering::Relaxed);
    }
    meta().insert(nf, m);
    SOCKS[i].store(nf + 1, Ordering::Release);
    LIVE.fetch_add(1, Ordering::Relaxed);
    k
}

/// Kernel number `k` (a dup of a netfold socket's) names C API socket `nf` too.
fn alias(k: c_int, nf: c_int) -> c_int {
    let Some(i) = slot(k) else {
        // SAFETY: the number the dup just made.
        unsafe { real::close(k) };
        set_errno(libc::EMFILE);
        return -1;
    };
    if let Some(m) = meta().get_mut(&nf) {
        m.refs += 1;
    }
    SOCKS[i].store(nf + 1, Ordering::Release);
    LIVE.fetch_add(1, Ordering::Relaxed);
    k
}

/// Kernel number `fd` no longer names a netfold socket; the socket closes with its last number.
fn forget(fd: c_int) {
    let Some(i) = slot(fd) else { return };
    let v = SOCKS[i].swap(0, Ordering::AcqRel);
    if v != 0 {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        if FORKED.load(Ordering::Relaxed) {
            return;
        }
        let nf = v - 1;
        let last = {
            let mut m = meta();
            match m.get_mut(&nf) {
                Some(x) if x.refs > 1 => {
                    x.refs -= 1;
                    false
                }
                _ => {
                    // Removed before nf_close: the number is not reused until then.
                    m.remove(&nf);
                    true
                }
            }
        };
        if last {
            // SAFETY: the process's stack; `nf` is ours and now unnamed.
            unsafe { api::nf_close(stack(), nf) };
        }
    }
    let e = EPOLLS[i].swap(0, Ordering::AcqRel);
    if e != 0 && !FORKED.load(Ordering::Relaxed) {
        // SAFETY: as above, for the epoll instance behind a kernel epoll descriptor.
        unsafe { api::nf_close(stack(), e - 1) };
    }
}

fn is_loopback(a: *const sockaddr, l: socklen_t) -> bool {
    // SAFETY: the caller's sockaddr of `l` bytes (bind/connect/sendto's contract).
    match unsafe { crate::cabi::read_sockaddr(a, l) } {
        Ok(s) => match s.ip() {
            std::net::IpAddr::V4(v4) => v4.is_loopback(),
            std::net::IpAddr::V6(v6) => {
                v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
        },
        Err(_) => false,
    }
}

/// Whether socket `nf` is still undecided; marks it decided unless `a` is a loopback address.
/// `true`: the caller moves it to the kernel.
fn decide(nf: c_int, a: *const sockaddr, l: socklen_t) -> bool {
    let mut m = meta();
    let Some(x) = m.get_mut(&nf) else {
        return false;
    };
    if !x.undecided {
        return false;
    }
    if x.refs == 1 && !a.is_null() && is_loopback(a, l) {
        return true;
    }
    x.undecided = false;
    x.opts = Vec::new();
    false
}

/// Moves netfold socket `nf` at number `fd` to a kernel socket of the same type and options
/// (before its first bind/connect/sendto, which named a loopback address). Err: errno.
fn to_kernel(fd: c_int, nf: c_int) -> Result<(), c_int> {
    let m = meta().remove(&nf).ok_or(libc::EBADF)?;
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: socket(2) with socket()'s own arguments.
    let k = unsafe {
        real::socket(
            m.domain,
            m.ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC),
            m.protocol,
        )
    };
    if k < 0 {
        let e = errno();
        meta().insert(nf, m);
        return Err(e);
    }
    // SAFETY: `k` is the socket just made; option values are the bytes the program passed.
    unsafe {
        if m.nonblock {
            real::fcntl(k, libc::F_SETFL, libc::O_NONBLOCK as c_ulong);
        }
        for (level, name, v) in &m.opts {
            real::setsockopt(k, *level, *name, v.as_ptr().cast(), v.len() as socklen_t);
        }
    }
    // SAFETY: F_GETFD of our reserved number; dup3 then replaces it by the kernel socket.
    let r = unsafe {
        let cloexec = real::fcntl(fd, libc::F_GETFD, 0) & libc::FD_CLOEXEC != 0;
        if let Some(i) = slot(fd) {
            SOCKS[i].store(0, Ordering::Release);
            LIVE.fetch_sub(1, Ordering::Relaxed);
        }
        let r = real::dup3(k, fd, if cloexec { libc::O_CLOEXEC } else { 0 });
        let e = errno();
        real::close(k);
        (r, e)
    };
    // SAFETY: the process's stack; `nf` is now unnamed.
    unsafe { api::nf_close(stack(), nf) };
    if r.0 < 0 {
        return Err(r.1);
    }
    Ok(())
}

/// Records whether socket `nf`'s blocking calls wait in the kernel's poll first.
fn plain(nf: c_int, m: &Meta) {
    if let Some(p) = usize::try_from(nf).ok().and_then(|i| PLAIN.get(i)) {
        p.store(!m.nonblock, Ordering::Relaxed);
    }
    if let Some(p) = usize::try_from(nf).ok().and_then(|i| NONBLOCK.get(i)) {
        p.store(m.nonblock, Ordering::Relaxed);
    }
}

/// The process's engine, unless this is a forked child (whose stack is the parent's).
fn engine() -> Option<&'static crate::engine::Engine> {
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: the process's stack, never freed.
    PROC.get()
        .and_then(Option::as_ref)
        .map(|p| &**unsafe { &*p.stack }.engine())
}

/// A send of `n` bytes on C API socket `nf` (`flags` its MSG_ flags), corked in INLINE mode
/// when it is small, does not wait (a non-blocking socket or MSG_DONTWAIT) and no other
/// thread waits on netfold (that thread's sleep would not send it): its segments leave at
/// the calling thread's next call on a netfold descriptor that is not such a send (`uncork`;
/// every wait on netfold descriptors polls the stack first), so an event loop's header-then-body writes leave as
/// one segment (one write to the device, one wake-up of the peer) instead of two. A
/// program that stops calling has them sent by the fallback driver within two of its ticks.
/// Measured with nginx and wrk (docs/BENCHMARKS.md); Linux's TCP autocorking holds small
/// segments back in a similar way.
fn cork(nf: c_int, flags: c_int, n: usize, op: impl FnOnce() -> ssize_t) -> ssize_t {
    let nonblock = flags & libc::MSG_DONTWAIT != 0
        || usize::try_from(nf)
            .ok()
            .and_then(|i| NONBLOCK.get(i))
            .is_some_and(|p| p.load(Ordering::Relaxed));
    match engine() {
        Some(e) if nonblock && n < CORK_MAX && WAITING.load(Ordering::SeqCst) == 0 => e.corked(op),
        _ => op(),
    }
}

/// Sends what corked sends left (`cork`).
#[inline]
fn uncork() {
    if let Some(e) = engine() {
        e.uncork();
    }
}

/// The bytes an iovec array describes (saturating; a bad array counts as large, uncorked).
unsafe fn iov_len(iov: *const iovec, cnt: c_int) -> usize {
    if iov.is_null() || !(0..=libc::UIO_MAXIOV).contains(&cnt) {
        return usize::MAX;
    }
    // SAFETY: the caller's array of `cnt` iovecs (writev's contract).
    unsafe { core::slice::from_raw_parts(iov, cnt as usize) }
        .iter()
        .fold(0usize, |a, v| a.saturating_add(v.iov_len))
}

/// Reads C API socket `nf`'s SO_RCVTIMEO and SO_SNDTIMEO into `RCVTIMEO`/`SNDTIMEO` (at its
/// install, an accepted socket's come from its listener, and after setsockopt).
fn timeouts(nf: c_int) {
    let Some(i) = usize::try_from(nf).ok().filter(|&i| i < NF_FDS) else {
        return;
    };
    for (name, table) in [
        (libc::SO_RCVTIMEO, &RCVTIMEO),
        (libc::SO_SNDTIMEO, &SNDTIMEO),
    ] {
        let mut tv = timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        let mut l = core::mem::size_of::<timeval>() as socklen_t;
        // SAFETY: `tv` is a writable timeval of `l` bytes; the stack is the process's.
        let r = unsafe {
            api::nf_getsockopt(
                stack(),
                nf,
                libc::SOL_SOCKET,
                name,
                (&mut tv as *mut timeval).cast(),
                &mut l,
            )
        };
        // socket(7): zero means no timeout.
        let ms = if r < 0 || (tv.tv_sec == 0 && tv.tv_usec == 0) {
            -1
        } else {
            timeval_ms(&tv).max(1)
        };
        table[i].store(ms, Ordering::Relaxed);
    }
}

/// When a wait of socket `nf` for `events` ends: its SO_RCVTIMEO (POLLIN, accept too, as on
/// Linux) or SO_SNDTIMEO (POLLOUT) from now, if it has one.
fn timeo_deadline(nf: c_int, events: i16) -> Option<Instant> {
    let table = if events & libc::POLLOUT != 0 {
        &SNDTIMEO
    } else {
        &RCVTIMEO
    };
    let ms = usize::try_from(nf)
        .ok()
        .and_then(|i| table.get(i))
        .map_or(-1, |t| t.load(Ordering::Relaxed));
    deadline(ms)
}

fn is_plain(nf: c_int) -> bool {
    usize::try_from(nf)
        .ok()
        .and_then(|i| PLAIN.get(i))
        .is_some_and(|p| p.load(Ordering::Relaxed))
}

/// Waits in the kernel's poll(2) until C API socket `nf` is ready for `events`, until `end`
/// at the latest (the socket's SO_RCVTIMEO/SO_SNDTIMEO, `timeo_deadline`); false (with
/// errno: EINTR for a signal, EAGAIN when `end` passed, as Linux's timed-out calls) if the
/// wait was cut short. In INLINE mode the wait holds the device as every other wait does.
fn wait_for(nf: c_int, events: i16, end: Option<Instant>) -> bool {
    let mut one = [pollfd {
        fd: nf,
        events,
        revents: 0,
    }];
    let ms = end.map_or(-1, |d| {
        d.saturating_duration_since(Instant::now())
            .as_micros()
            .div_ceil(1000)
            .min(c_int::MAX as u128) as c_int
    });
    // SAFETY: `one` is a valid array of one pollfd; the stack is the process's.
    let got = wait(ms, &mut Vec::new(), |_| unsafe {
        api::nf_poll(stack(), one.as_mut_ptr(), 1, 0)
    });
    if got == 0 {
        set_errno(libc::EAGAIN);
    }
    got > 0
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Runs `op`, a call on C API socket `nf` that may block until `events`: on a plainly
/// blocking socket (`PLAIN`) after waiting for them in the kernel's poll(2), so that a signal
/// interrupts the wait (-1, EINTR) as it interrupts a kernel socket's blocking call, and the
/// program's handler runs at once. MSG_DONTWAIT in `flags` never waits.
fn after_wait(nf: c_int, events: i16, flags: c_int, op: impl FnOnce() -> ssize_t) -> ssize_t {
    if is_plain(nf)
        && flags & libc::MSG_DONTWAIT == 0
        && !wait_for(nf, events, timeo_deadline(nf, events))
    {
        return -1;
    }
    op()
}

/// A receive on C API socket `nf` (`op(flags)`): on a plainly blocking socket tried with
/// MSG_DONTWAIT first, and while there is nothing to take, waited for as `after_wait` does.
/// So a receive that finds data costs what it costs without the wait.
fn read_op(nf: c_int, flags: c_int, mut op: impl FnMut(c_int) -> ssize_t) -> ssize_t {
    // MSG_ERRQUEUE never waits (Linux `ip_recv_error`: EAGAIN when the queue is empty).
    if !is_plain(nf) || flags & (libc::MSG_DONTWAIT | libc::MSG_WAITALL | libc::MSG_ERRQUEUE) != 0 {
        return op(flags);
    }
    let mut waited = false;
    let mut end = None;
    loop {
        let r = op(flags | libc::MSG_DONTWAIT);
        if r >= 0 || errno() != libc::EAGAIN {
            return r;
        }
        if waited {
            // Ready by poll but nothing to take: the C API's own wait decides.
            return op(flags);
        }
        let end = *end.get_or_insert_with(|| timeo_deadline(nf, libc::POLLIN));
        if !wait_for(nf, libc::POLLIN, end) {
            return -1;
        }
        waited = true;
    }
}

/// A send of `n` bytes on C API socket `nf` (`op(flags, offset, len)` sends bytes `offset..
/// offset + len`): on a plainly blocking socket with MSG_DONTWAIT, waiting (as `after_wait`)
/// while the send buffer is full, until all `n` are queued. As on Linux, a signal (or an
/// error) after part of the data was queued returns that part.
fn send_op(
    nf: c_int,
    flags: c_int,
    n: usize,
    mut op: impl FnMut(c_int, usize, usize) -> ssize_t,
) -> ssize_t {
    if !is_plain(nf) || flags & libc::MSG_DONTWAIT != 0 {
        return op(flags, 0, n);
    }
    // A MSG_ZEROCOPY send is one call (one notification number, as Linux numbers each
    // call): waited for as `after_wait` does, then left to the C API's own wait.
    if flags & libc::MSG_ZEROCOPY != 0 {
        return after_wait(nf, libc::POLLOUT, flags, || op(flags, 0, n));
    }
    let mut done = 0usize;
    let mut waited = false;
    // SO_SNDTIMEO bounds the whole call, as on Linux (what was queued by then is returned).
    let end = timeo_deadline(nf, libc::POLLOUT);
    loop {
        let r = op(flags | libc::MSG_DONTWAIT, done, n - done);
        if r >= 0 {
            done += r as usize;
            if done >= n {
                return done as ssize_t;
            }
        } else if errno() != libc::EAGAIN {
            return if done > 0 { done as ssize_t } else { -1 };
        } else if waited {
            // Writable by poll but nothing taken (a datagram waiting for its route, ...):
            // the C API's own wait decides, so this never spins.
            let r = op(flags, done, n - done);
            return if r >= 0 {
                (done + r as usize) as ssize_t
            } else if done > 0 {
                done as ssize_t
            } else {
                -1
            };
        }
        if !wait_for(nf, libc::POLLOUT, end) {
            return if done > 0 { done as ssize_t } else { -1 };
        }
        waited = r <= 0;
    }
}

// ---------------------------------------------------------------------------------------------
// Waiting on kernel and netfold descriptors at once.

/// A thread's eventfd, signalled by the driver while the thread waits.
struct Bell(c_int);

impl Bell {
    fn new() -> Bell {
        // SAFETY: eventfd(2) takes no pointers.
        Bell(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })
    }
    fn drain(&self) {
        let mut v = 0u64;
        // SAFETY: reads the 8-byte counter into `v`.
        unsafe { real::read(self.0, (&mut v as *mut u64).cast(), 8) };
    }
}

impl Drop for Bell {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: this thread's own eventfd, closed once.
            unsafe { real::close(self.0) };
        }
    }
}

/// The doorbells of the threads waiting now.
static RINGING: Mutex<Vec<c_int>> = Mutex::new(Vec::new());
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// After a poll that did work (the driver thread, under the engine's lock): wakes every
/// waiting thread. A waiter registers before it looks at its netfold descriptors, so a poll
/// that ends after the look rings its bell (SeqCst on `WAITING` on both sides).
fn ring() {
    if WAITING.load(Ordering::SeqCst) == 0 {
        return;
    }
    ring_others();
}

/// Rings the bells of the waiting threads but the calling thread's own (INLINE mode: a waiting
/// thread that polls the stack itself sees its work without one).
fn ring_others() {
    let own = MY_BELL.with(Cell::get);
    let one = 1u64;
    for &fd in RINGING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|&&fd| fd != own)
    {
        // SAFETY: writes 8 bytes to a waiting thread's eventfd.
        unsafe { real::write(fd, (&one as *const u64).cast(), 8) };
    }
}

/// A registered waiter (removed on drop).
struct Waiter(c_int);

impl Waiter {
    fn new(bell: c_int) -> Waiter {
        RINGING.lock().unwrap_or_else(|p| p.into_inner()).push(bell);
        WAITING.fetch_add(1, Ordering::SeqCst);
        MY_BELL.with(|b| b.set(bell));
        Waiter(bell)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        MY_BELL.with(|b| b.set(-1));
        let mut r = RINGING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = r.iter().position(|&b| b == self.0) {
            r.swap_remove(i);
        }
        WAITING.fetch_sub(1, Ordering::SeqCst);
    }
}

fn deadline(timeout_ms: c_int) -> Option<Instant> {
    (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64))
}

/// How long the next sleep may be (ms): up to the deadline, at most `SLICE`.
fn slice_ms(deadline: Option<Instant>) -> c_int {
    let left = deadline.map_or(SLICE, |d| {
        d.saturating_duration_since(Instant::now()).min(SLICE)
    });
    // Rounded up: a sleep that ends before the deadline looks once more for nothing.
    left.as_micros().div_ceil(1000) as c_int
}

/// The wait of every call below: `look` counts what is ready now (0 = nothing); in between,
/// sleeps in poll(2) on `kernel` plus the thread's bell. Returns `look`'s count, 0 when the
/// deadline passed, -1 with errno (EINTR from a signal, as the kernel's poll).
///
/// INLINE mode: polls the stack before it looks, holds the device if no other thread does and
/// then sleeps on its descriptor too, for at most the stack's next deadline, polling the stack
/// after every wake-up; when it lets the device go, the other waiting threads are rung, so one
/// of them takes it.
fn wait(
    timeout_ms: c_int,
    kernel: &mut Vec<pollfd>,
    mut look: impl FnMut(&mut [pollfd]) -> c_int,
) -> c_int {
    let Some(bell) = BELL.try_with(|b| b.0).ok().filter(|&b| b >= 0) else {
        set_errno(libc::ENOMEM);
        return -1;
    };
    let end = deadline(timeout_ms);
    let _w = Waiter::new(bell);
    // SAFETY: the process's stack (never freed) or none.
    let engine = PROC
        .get()
        .and_then(Option::as_ref)
        .map(|p| unsafe { &*p.stack }.engine());
    // A forked child must not touch the device: its frames are the parent's.
    let inline = engine.is_some_and(|e| e.mode() == crate::engine::PollMode::Inline)
        && !FORKED.load(Ordering::Relaxed);
    let mut hold = None;
    kernel.push(pollfd {
        fd: bell,
        events: libc::POLLIN,
        revents: 0,
    });
    // The device's slot: -1 (ignored by poll(2)) while another thread holds it.
    kernel.push(pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    });
    let n = kernel.len();
    let mut first = true;
    let mut poll_now = inline;
    let r = loop {
        let mut next = None;
        if poll_now {
            if let Some(e) = engine {
                next = e.poll_inline().flatten();
            }
        }
        // The kernel's descriptors are looked at by `look` (with a zero timeout) too.
        let got = look(&mut kernel[..n - 2]);
        if got != 0 {
            break got;
        }
        let expired = timeout_ms == 0 || end.is_some_and(|d| Instant::now() >= d);
        if (expired && !first) || timeout_ms == 0 {
            break 0;
        }
        first = false;
        if inline && hold.is_none() {
            hold = engine.and_then(|e| e.take_device());
            if let Some((_, fd)) = &hold {
                kernel[n - 1].fd = *fd;
                // Polled before we held the device: frames may have come since.
                if !poll_now {
                    poll_now = true;
                    continue;
                }
            }
        }
        for p in kernel.iter_mut() {
            p.revents = 0;
        }
        let mut ms = slice_ms(end);
        if hold.is_some() {
            if let Some(d) = next {
                ms = ms.min(d.as_micros().div_ceil(1000) as c_int);
            }
        }
        // SAFETY: `kernel` is a valid array of `n` pollfds.
        let r = unsafe { real::poll(kernel.as_mut_ptr(), n as nfds_t, ms) };
        if r < 0 {
            break -1;
        }
        if kernel[n - 2].revents != 0 {
            BELL.with(Bell::drain);
        }
        poll_now = hold.is_some();
    };
    let held = hold.take().is_some();
    // Another waiting thread takes the device over (it was asleep on its bell alone).
    if held && WAITING.load(Ordering::SeqCst) > 1 {
        let e = errno();
        ring_others();
        set_errno(e);
    }
    r
}

/// poll(2) over a mix: netfold's through nf_poll, the kernel's through poll(2).
fn poll_mixed(fds: &mut [pollfd], timeout_ms: c_int) -> c_int {
    let mut ours = Vec::new();
    let mut ours_at = Vec::new();
    let mut kernel = Vec::new();
    let mut kernel_at = Vec::new();
    for (i, p) in fds.iter().enumerate() {
        match target(p.fd) {
            To::Netfold(nf) => {
                ours.push(pollfd {
                    fd: nf,
                    events: p.events,
                    revents: 0,
                });
                ours_at.push(i);
            }
            To::Parents => return parents(p.fd),
            To::Kernel => {
                kernel.push(*p);
                kernel_at.push(i);
            }
        }
    }
    let mut out = 0;
    let got = wait(timeout_ms, &mut kernel, |k| {
        // SAFETY: `ours` is a valid array of pollfds; the stack is the process's.
        let a = unsafe { api::nf_poll(stack(), ours.as_mut_ptr(), ours.len() as nfds_t, 0) };
        if a < 0 {
            return -1;
        }
        let b = if k.is_empty() {
            0
        } else {
            // SAFETY: `k` is a valid array of pollfds.
            unsafe { real::poll(k.as_mut_ptr(), k.len() as nfds_t, 0) }
        };
        if b < 0 {
            return -1;
        }
        out = a + b;
        out
    });
    if got < 0 {
        return -1;
    }
    for (p, &i) in ours.iter().zip(&ours_at) {
        fds[i].revents = if got > 0 { p.revents } else { 0 };
    }
    for (p, &i) in kernel.iter().zip(&kernel_at) {
        fds[i].revents = if got > 0 { p.revents } else { 0 };
    }
    got
}

fn has_ours(fds: &[pollfd]) -> bool {
    LIVE.load(Ordering::Relaxed) != 0 && fds.iter().any(|p| nf_of(p.fd).is_some())
}

fn timespec_ms(t: *const timespec) -> c_int {
    // SAFETY: NULL or the caller's timespec.
    match unsafe { t.as_ref() } {
        None => -1,
        Some(t) => t
            .tv_sec
            .saturating_mul(1000)
            .saturating_add((t.tv_nsec + 999_999) / 1_000_000)
            .clamp(0, i64::from(c_int::MAX)) as c_int,
    }
}

fn timeval_ms(t: *const timeval) -> c_int {
    // SAFETY: NULL or the caller's timeval.
    match unsafe { t.as_ref() } {
        None => -1,
        Some(t) => t
            .tv_sec
            .saturating_mul(1000)
            .saturating_add((t.tv_usec + 999) / 1000)
            .clamp(0, i64::from(c_int::MAX)) as c_int,
    }
}

/// select(2) as a poll over the descriptors named in the sets.
unsafe fn select_mixed(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    timeout_ms: c_int,
) -> Option<c_int> {
    let n = n.clamp(0, libc::FD_SETSIZE as c_int);
    // SAFETY: the sets are NULL or the caller's fd_sets; FD_ISSET reads within one.
    let isset = |s: *mut fd_set, fd: c_int| !s.is_null() && unsafe { libc::FD_ISSET(fd, s) };
    let mut fds = Vec::new();
    for fd in 0..n {
        let mut ev = 0;
        if isset(r, fd) {
            ev |= libc::POLLIN;
        }
        if isset(w, fd) {
            ev |= libc::POLLOUT;
        }
        if isset(e, fd) {
            ev |= libc::POLLPRI;
        }
        if ev != 0 {
            fds.push(pollfd {
                fd,
                events: ev,
                revents: 0,
            });
        }
    }
    if !has_ours(&fds) {
        return None;
    }
    let got = poll_mixed(&mut fds, timeout_ms);
    if got < 0 {
        return Some(-1);
    }
    if fds.iter().any(|p| p.revents & libc::POLLNVAL != 0) {
        set_errno(libc::EBADF);
        return Some(-1);
    }
    for s in [r, w, e] {
        if !s.is_null() {
            // SAFETY: the caller's fd_set.
            unsafe { libc::FD_ZERO(s) };
        }
    }
    let mut count = 0;
    let set = |s: *mut fd_set, fd: c_int, count: &mut c_int| {
        if !s.is_null() {
            // SAFETY: the caller's fd_set; fd < FD_SETSIZE.
            unsafe { libc::FD_SET(fd, s) };
            *count += 1;
        }
    };
    for p in &fds {
        let re = p.revents;
        if p.events & libc::POLLIN != 0 && re & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
        {
            set(r, p.fd, &mut count);
        }
        if p.events & libc::POLLOUT != 0 && re & (libc::POLLOUT | libc::POLLERR) != 0 {
            set(w, p.fd, &mut count);
        }
        if p.events & libc::POLLPRI != 0 && re & libc::POLLPRI != 0 {
            set(e, p.fd, &mut count);
        }
    }
    Some(count)
}

// ---------------------------------------------------------------------------------------------
// The interposed calls.
//
// SAFETY (every function below): each is `unsafe` with the contract of the C function of its
// name (see its man page): the pointers are the caller's, valid for the lengths it gives. The
// body is the unsafe context; what it does with them is pass them on unchanged, either to the
// C library's own function (`real`) or to the C API's (`api::nf_*`), which checks them (NULL:
// EFAULT) and never keeps them past the call. The few other unsafe operations have their own
// SAFETY comment.

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let ours = (domain == libc::AF_INET || domain == libc::AF_INET6)
        && match base {
            libc::SOCK_STREAM => protocol == 0 || protocol == libc::IPPROTO_TCP,
            libc::SOCK_DGRAM => protocol == 0 || protocol == libc::IPPROTO_UDP,
            _ => false,
        }
        && !STARTING.with(Cell::get)
        && !FORKED.load(Ordering::Relaxed);
    if !ours {
        return real::socket(domain, ty, protocol);
    }
    let Some(p) = proc() else {
        return real::socket(domain, ty, protocol);
    };
    let nf = api::nf_socket(p.stack, domain, ty, protocol);
    if nf < 0 {
        return -1;
    }
    let m = Meta {
        refs: 1,
        domain,
        ty,
        protocol,
        nonblock: ty & libc::SOCK_NONBLOCK != 0,
        undecided: true,
        opts: Vec::new(),
    };
    install(nf, m, ty & libc::SOCK_CLOEXEC != 0)
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int {
    match target(fd) {
        To::Kernel => real::bind(fd, a, l),
        To::Parents => parents(fd),
        To::Netfold(nf) => {
            if decide(nf, a, l) {
                return match to_kernel(fd, nf) {
                    Ok(()) => real::bind(fd, a, l),
                    Err(e) => {
                        set_errno(e);
                        -1
                    }
                };
            }
            api::nf_bind(stack(), nf, a, l)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int {
    match target(fd) {
        To::Kernel => real::connect(fd, a, l),
        To::Parents => parents(fd),
        To::Netfold(nf) => {
            if decide(nf, a, l) {
                return match to_kernel(fd, nf) {
                    Ok(()) => real::connect(fd, a, l),
                    Err(e) => {
                        set_errno(e);
                        -1
                    }
                };
            }
            api::nf_connect(stack(), nf, a, l)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    match target(fd) {
        To::Kernel => real::listen(fd, backlog),
        To::Parents => parents(fd),
        To::Netfold(nf) => {
            decide(nf, core::ptr::null(), 0);
            api::nf_listen(stack(), nf, backlog)
        }
    }
}

unsafe fn accept_ours(nf: c_int, a: *mut sockaddr, l: *mut socklen_t, flags: c_int) -> c_int {
    let c = after_wait(nf, libc::POLLIN, 0, || {
        api::nf_accept(stack(), nf, a, l) as ssize_t
    }) as c_int;
    if c < 0 {
        return -1;
    }
    let nonblock = flags & libc::SOCK_NONBLOCK != 0;
    if nonblock {
        api::nf_fcntl(stack(), c, libc::F_SETFL, libc::O_NONBLOCK as c_long);
    }
    let domain = meta().get(&nf).map_or(libc::AF_INET, |m| m.domain);
    let m = Meta {
        refs: 1,
        domain,
        ty: libc::SOCK_STREAM | flags,
        protocol: 0,
        nonblock,
        undecided: false,
        opts: Vec::new(),
    };
    let k = install(c, m, flags & libc::SOCK_CLOEXEC != 0);
    // The accepted socket's timeouts are the ones the C API gave it (from its listener).
    let timed = |t: &[AtomicI32; NF_FDS]| {
        usize::try_from(nf)
            .ok()
            .and_then(|i| t.get(i))
            .is_some_and(|v| v.load(Ordering::Relaxed) >= 0)
    };
    if k >= 0 && (timed(&RCVTIMEO) || timed(&SNDTIMEO)) {
        timeouts(c);
    }
    k
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int {
    match target(fd) {
        To::Kernel => real::accept(fd, a, l),
        To::Parents => parents(fd),
        To::Netfold(nf) => accept_ours(nf, a, l, 0),
    }
}

#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
    flags: c_int,
) -> c_int {
    match target(fd) {
        To::Kernel => real::accept4(fd, a, l, flags),
        To::Parents => parents(fd),
        To::Netfold(nf) => {
            if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
                set_errno(libc::EINVAL);
                return -1;
            }
            accept_ours(nf, a, l, flags)
        }
    }
}

/// Routes a call: the kernel's function, EBADF in a forked child, or netfold's, which first
/// sends what corked sends left (`cork`). Only calls on netfold descriptors uncork: the
/// stack's own device I/O (readv, poll, ... on kernel descriptors, under the engine's lock)
/// comes through these functions too and must not take the lock again.
macro_rules! route {
    ($fd:expr, $kernel:expr, |$nf:ident| $ours:expr) => {
        match target($fd) {
            To::Kernel => $kernel,
            To::Parents => parents($fd) as _,
            To::Netfold($nf) => {
                uncork();
                $ours
            }
        }
    };
}

/// `route!` for the sends that may be corked themselves (`cork`): no uncork first.
macro_rules! route_send {
    ($fd:expr, $kernel:expr, |$nf:ident| $ours:expr) => {
        match target($fd) {
            To::Kernel => $kernel,
            To::Parents => parents($fd) as _,
            To::Netfold($nf) => $ours,
        }
    };
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t {
    route!(fd, real::read(fd, b, n), |nf| read_op(nf, 0, |f| {
        api::nf_recv(stack(), nf, b, n, f)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    buflen: size_t,
) -> ssize_t {
    route!(fd, real::__read_chk(fd, b, n, buflen), |nf| {
        if n > buflen {
            // What the C library's check does: the program overflows its buffer.
            libc::abort()
        }
        read_op(nf, 0, |f| api::nf_recv(stack(), nf, b, n, f))
    })
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, b: *const c_void, n: size_t) -> ssize_t {
    route_send!(fd, real::write(fd, b, n), |nf| cork(nf, 0, n, || send_op(
        nf,
        0,
        n,
        |f, off, len| api::nf_send(stack(), nf, b.cast::<u8>().add(off).cast(), len, f)
    )))
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    route!(fd, real::readv(fd, iov, cnt), |nf| after_wait(
        nf,
        libc::POLLIN,
        0,
        || api::nf_readv(stack(), nf, iov, cnt)
    ))
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    route_send!(fd, real::writev(fd, iov, cnt), |nf| cork(
        nf,
        0,
        iov_len(iov, cnt),
        || after_wait(nf, libc::POLLOUT, 0, || api::nf_writev(
            stack(),
            nf,
            iov,
            cnt
        ))
    ))
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, b: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    route!(fd, real::recv(fd, b, n, flags), |nf| read_op(
        nf,
        flags,
        |f| api::nf_recv(stack(), nf, b, n, f)
    ))
}

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
) -> ssize_t {
    route!(fd, real::__recv_chk(fd, b, n, buflen, flags), |nf| {
        if n > buflen {
            libc::abort()
        }
        read_op(nf, flags, |f| api::nf_recv(stack(), nf, b, n, f))
    })
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, b: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    route_send!(fd, real::send(fd, b, n, flags), |nf| cork(
        nf,
        flags,
        n,
        || send_op(nf, flags, n, |f, off, len| api::nf_send(
            stack(),
            nf,
            b.cast::<u8>().add(off).cast(),
            len,
            f
        ))
    ))
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    flags: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
) -> ssize_t {
    route!(fd, real::recvfrom(fd, b, n, flags, a, l), |nf| {
        read_op(nf, flags, |f| api::nf_recvfrom(stack(), nf, b, n, f, a, l))
    })
}

#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
) -> ssize_t {
    route!(
        fd,
        real::__recvfrom_chk(fd, b, n, buflen, flags, a, l),
        |nf| {
            if n > buflen {
                libc::abort()
            }
            read_op(nf, flags, |f| api::nf_recvfrom(stack(), nf, b, n, f, a, l))
        }
    )
}

#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    b: *const c_void,
    n: size_t,
    flags: c_int,
    a: *const sockaddr,
    l: socklen_t,
) -> ssize_t {
    route!(fd, real::sendto(fd, b, n, flags, a, l), |nf| {
        if !a.is_null() && decide(nf, a, l) {
            return match to_kernel(fd, nf) {
                Ok(()) => real::sendto(fd, b, n, flags, a, l),
                Err(e) => {
                    set_errno(e);
                    -1
                }
            };
        }
        send_op(nf, flags, n, |f, off, len| {
            api::nf_sendto(stack(), nf, b.cast::<u8>().add(off).cast(), len, f, a, l)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, m: *mut msghdr, flags: c_int) -> ssize_t {
    route!(fd, real::recvmsg(fd, m, flags), |nf| read_op(
        nf,
        flags,
        |f| api::nf_recvmsg(stack(), nf, m, f)
    ))
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, m: *const msghdr, flags: c_int) -> ssize_t {
    route_send!(fd, real::sendmsg(fd, m, flags), |nf| {
        // SAFETY: NULL or the caller's msghdr.
        if let Some(h) = m.as_ref() {
            let (a, l) = (h.msg_name as *const sockaddr, h.msg_namelen);
            if !a.is_null() && decide(nf, a, l) {
                return match to_kernel(fd, nf) {
                    Ok(()) => real::sendmsg(fd, m, flags),
                    Err(e) => {
                        set_errno(e);
                        -1
                    }
                };
            }
        }
        // SAFETY: NULL or the caller's msghdr (checked again by nf_sendmsg).
        let n = m
            .as_ref()
            .filter(|h| h.msg_name.is_null())
            .map_or(usize::MAX, |h| iov_len(h.msg_iov, h.msg_iovlen as c_int));
        cork(nf, flags, n, || {
            after_wait(nf, libc::POLLOUT, flags, || {
                api::nf_sendmsg(stack(), nf, m, flags)
            })
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if nf_of(fd).is_some() || ep_of(fd).is_some() {
        uncork();
        forget(fd);
    }
    real::close(fd)
}

#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    route!(fd, real::shutdown(fd, how), |nf| api::nf_shutdown(
        stack(),
        nf,
        how
    ))
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    v: *mut c_void,
    l: *mut socklen_t,
) -> c_int {
    route!(fd, real::getsockopt(fd, level, name, v, l), |nf| {
        api::nf_getsockopt(stack(), nf, level, name, v, l)
    })
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    v: *const c_void,
    l: socklen_t,
) -> c_int {
    route!(fd, real::setsockopt(fd, level, name, v, l), |nf| {
        let r = api::nf_setsockopt(stack(), nf, level, name, v, l);
        if r == 0
            && level == libc::SOL_SOCKET
            && (name == libc::SO_RCVTIMEO || name == libc::SO_SNDTIMEO)
        {
            timeouts(nf);
        }
        if let Some(m) = meta().get_mut(&nf).filter(|m| m.undecided) {
            // SAFETY: the caller's option value of `l` bytes.
            if let Ok(b) = crate::cabi::buf_ref(v, l as usize) {
                m.opts.push((level, name, b.to_vec()));
            }
        }
        r
    })
}

#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int {
    route!(fd, real::getsockname(fd, a, l), |nf| api::nf_getsockname(
        stack(),
        nf,
        a,
        l
    ))
}

#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int {
    route!(fd, real::getpeername(fd, a, l), |nf| api::nf_getpeername(
        stack(),
        nf,
        a,
        l
    ))
}

/// fcntl(2) on a netfold socket: O_NONBLOCK through the C API, the descriptor flags and the
/// dups on the reserved kernel number.
unsafe fn fcntl_ours(fd: c_int, nf: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    match cmd {
        libc::F_GETFL => api::nf_fcntl(stack(), nf, cmd, 0),
        libc::F_SETFL => {
            if let Some(m) = meta().get_mut(&nf) {
                m.nonblock = arg & libc::O_NONBLOCK as c_ulong != 0;
                plain(nf, m);
            }
            api::nf_fcntl(stack(), nf, cmd, arg as c_long)
        }
        libc::F_GETFD | libc::F_SETFD => real::fcntl(fd, cmd, arg),
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            let k = real::fcntl(fd, cmd, arg);
            if k < 0 {
                return -1;
            }
            alias(k, nf)
        }
        _ => api::nf_fcntl(stack(), nf, cmd, arg as c_long),
    }
}

// fcntl and ioctl are variadic in C; their one optional argument arrives in the register a
// third argument does (x86-64 and AArch64 Linux calling conventions).
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    route!(fd, real::fcntl(fd, cmd, arg), |nf| fcntl_ours(
        fd, nf, cmd, arg
    ))
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    route!(fd, real::fcntl64(fd, cmd, arg), |nf| fcntl_ours(
        fd, nf, cmd, arg
    ))
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    route!(fd, real::ioctl(fd, req, arg), |nf| {
        match req {
            libc::FIONBIO => {
                // SAFETY: FIONBIO's argument is an int (ioctl_list(2)).
                let Some(&on) = arg.cast::<c_int>().as_ref() else {
                    set_errno(libc::EFAULT);
                    return -1;
                };
                let flags = api::nf_fcntl(stack(), nf, libc::F_GETFL, 0);
                if flags < 0 {
                    return -1;
                }
                let flags = if on != 0 {
                    flags | libc::O_NONBLOCK
                } else {
                    flags & !libc::O_NONBLOCK
                };
                fcntl_ours(fd, nf, libc::F_SETFL, flags as c_ulong)
            }
            libc::FIOCLEX | libc::FIONCLEX => real::ioctl(fd, req, arg),
            _ => api::nf_ioctl(stack(), nf, req, arg),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    if LIVE.load(Ordering::Relaxed) == 0 || fds.is_null() {
        return real::poll(fds, n, timeout);
    }
    // SAFETY: the caller's array of `n` pollfds.
    let s = core::slice::from_raw_parts_mut(fds, n as usize);
    if !has_ours(s) {
        return real::poll(fds, n, timeout);
    }
    poll_mixed(s, timeout)
}

#[no_mangle]
pub unsafe extern "C" fn __poll_chk(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: c_int,
    fdslen: size_t,
) -> c_int {
    if LIVE.load(Ordering::Relaxed) == 0 {
        return real::__poll_chk(fds, n, timeout, fdslen);
    }
    if (n as usize).saturating_mul(core::mem::size_of::<pollfd>()) > fdslen {
        libc::abort()
    }
    poll(fds, n, timeout)
}

#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    t: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    if LIVE.load(Ordering::Relaxed) == 0 || fds.is_null() {
        return real::ppoll(fds, n, t, mask);
    }
    // SAFETY: the caller's array of `n` pollfds.
    let s = core::slice::from_raw_parts_mut(fds, n as usize);
    if !has_ours(s) {
        return real::ppoll(fds, n, t, mask);
    }
    // The signal mask is not applied while netfold descriptors are waited on.
    poll_mixed(s, timespec_ms(t))
}

#[no_mangle]
pub unsafe extern "C" fn select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    t: *mut timeval,
) -> c_int {
    if LIVE.load(Ordering::Relaxed) != 0 {
        if let Some(got) = select_mixed(n, r, w, e, timeval_ms(t)) {
            if got == 0 {
                // Linux reports the time left: none.
                if let Some(t) = t.as_mut() {
                    t.tv_sec = 0;
                    t.tv_usec = 0;
                }
            }
            return got;
        }
    }
    real::select(n, r, w, e, t)
}

#[no_mangle]
pub unsafe extern "C" fn pselect(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    t: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    if LIVE.load(Ordering::Relaxed) != 0 {
        // The signal mask is not applied while netfold descriptors are waited on.
        if let Some(got) = select_mixed(n, r, w, e, timespec_ms(t)) {
            return got;
        }
    }
    real::pselect(n, r, w, e, t, mask)
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    real::epoll_create(size)
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    real::epoll_create1(flags)
}

/// The C API epoll instance holding kernel epoll `epfd`'s netfold members (made at the
/// first).
fn nf_epoll(epfd: c_int) -> Result<c_int, c_int> {
    if let Some(e) = ep_of(epfd) {
        return Ok(e);
    }
    let i = slot(epfd).ok_or(libc::EBADF)?;
    // SAFETY: the process's stack.
    let e = unsafe { api::nf_epoll_create1(stack(), 0) };
    if e < 0 {
        return Err(libc::ENOMEM);
    }
    match EPOLLS[i].compare_exchange(0, e + 1, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ok(e),
        Err(other) => {
            // Another thread made one first.
            // SAFETY: our own, unpublished epoll instance.
            unsafe { api::nf_close(stack(), e) };
            Ok(other - 1)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut epoll_event,
) -> c_int {
    route!(fd, real::epoll_ctl(epfd, op, fd, ev), |nf| {
        match nf_epoll(epfd) {
            Ok(e) => api::nf_epoll_ctl(stack(), e, op, nf, ev),
            Err(err) => {
                set_errno(err);
                -1
            }
        }
    })
}

unsafe fn epoll_wait_mixed(
    epfd: c_int,
    ep: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    if ev.is_null() || max <= 0 {
        set_errno(if ev.is_null() {
            libc::EFAULT
        } else {
            libc::EINVAL
        });
        return -1;
    }
    // The kernel epoll descriptor is readable when one of its members is ready.
    let mut kernel = vec![pollfd {
        fd: epfd,
        events: libc::POLLIN,
        revents: 0,
    }];
    // Alternate which side fills the array first, so a busy side does not starve the other.
    static TURN: AtomicUsize = AtomicUsize::new(0);
    wait(timeout, &mut kernel, |_| {
        let ours_first = TURN.fetch_add(1, Ordering::Relaxed) & 1 == 0;
        // SAFETY: `ev` holds `max` entries (epoll_wait's contract); each side writes at most
        // the room left.
        {
            let (a, b) = if ours_first {
                let a = api::nf_epoll_wait(stack(), ep, ev, max, 0);
                if a < 0 {
                    return -1;
                }
                let b = if a < max {
                    real::epoll_wait(epfd, ev.add(a as usize), max - a, 0)
                } else {
                    0
                };
                (a, b)
            } else {
                let a = real::epoll_wait(epfd, ev, max, 0);
                if a < 0 {
                    return -1;
                }
                let b = if a < max {
                    api::nf_epoll_wait(stack(), ep, ev.add(a as usize), max - a, 0)
                } else {
                    0
                };
                (a, b)
            };
            if b < 0 {
                return -1;
            }
            a + b
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    match ep_of(epfd) {
        Some(ep) if !FORKED.load(Ordering::Relaxed) => epoll_wait_mixed(epfd, ep, ev, max, timeout),
        _ => real::epoll_wait(epfd, ev, max, timeout),
    }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    match ep_of(epfd) {
        // The signal mask is not applied while netfold descriptors are waited on.
        Some(ep) if !FORKED.load(Ordering::Relaxed) => epoll_wait_mixed(epfd, ep, ev, max, timeout),
        _ => real::epoll_pwait(epfd, ev, max, timeout, mask),
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    route!(fd, real::dup(fd), |nf| {
        let k = real::dup(fd);
        if k < 0 {
            return -1;
        }
        alias(k, nf)
    })
}

unsafe fn dup_onto(old: c_int, new: c_int, flags: Option<c_int>) -> c_int {
    let call = || match flags {
        None => real::dup2(old, new),
        Some(f) => real::dup3(old, new, f),
    };
    if old == new {
        return call();
    }
    if let To::Parents = target(old) {
        return parents(old);
    }
    // `new` stops naming what it named (dup2 closes it).
    if nf_of(new).is_some() || ep_of(new).is_some() {
        forget(new);
    }
    let r = call();
    if r < 0 {
        return -1;
    }
    match nf_of(old) {
        Some(nf) => alias(r, nf),
        None => r,
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    dup_onto(old, new, None)
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    dup_onto(old, new, Some(flags))
}

/// sendfile(2) to a netfold socket: up to 64 KiB read from `inp` and written with nf_write;
/// what the socket did not take is left in the file (offset or file position).
unsafe fn sendfile_ours(nf: c_int, inp: c_int, off: *mut off_t, n: size_t) -> ssize_t {
    // Waits for room first (interruptible, see `after_wait`), before taking from the file.
    if after_wait(nf, libc::POLLOUT, 0, || 0) < 0 {
        return -1;
    }
    let mut buf = vec![0u8; n.min(64 * 1024)];
    // SAFETY: `buf` is writable for its length; `off` is NULL or the caller's offset.
    let got = match off.as_ref() {
        Some(&o) => libc::pread(inp, buf.as_mut_ptr().cast(), buf.len(), o),
        None => real::read(inp, buf.as_mut_ptr().cast(), buf.len()),
    };
    if got <= 0 {
        return got;
    }
    // SAFETY: `got` bytes of `buf` are initialized.
    let w = api::nf_write(stack(), nf, buf.as_ptr().cast(), got as usize);
    let taken = w.max(0);
    // SAFETY: `off` as above; lseek moves the file position back over what was not sent.
    {
        match off.as_mut() {
            Some(o) => *o += taken as off_t,
            None if taken < got => {
                let errno = *libc::__errno_location();
                libc::lseek(inp, -((got - taken) as off_t), libc::SEEK_CUR);
                *libc::__errno_location() = errno;
            }
            None => {}
        }
    }
    w
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut off_t, n: size_t) -> ssize_t {
    route_send!(out, real::sendfile(out, inp, off, n), |nf| cork(
        nf,
        0,
        n,
        || sendfile_ours(nf, inp, off, n)
    ))
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, inp: c_int, off: *mut off_t, n: size_t) -> ssize_t {
    // off_t is 64 bits on the 64-bit targets this library is built for.
    sendfile(out, inp, off, n)
}

/// The most messages one sendmmsg/recvmmsg call takes (Linux: UIO_MAXIOV).
const MMSG_MAX: c_uint = libc::UIO_MAXIOV as c_uint;

#[no_mangle]
pub unsafe extern "C" fn sendmmsg(
    fd: c_int,
    v: *mut libc::mmsghdr,
    n: c_uint,
    flags: c_int,
) -> c_int {
    route!(fd, real::sendmmsg(fd, v, n, flags), |_nf| {
        // Linux's __sys_sendmmsg: one sendmsg per message, each message's byte count in
        // msg_len; an error after at least one message was sent ends the call with the count
        // sent so far (the error shows again at the next call).
        if v.is_null() {
            set_errno(libc::EFAULT);
            return -1;
        }
        let n = n.min(MMSG_MAX);
        let mut sent = 0;
        while sent < n {
            // SAFETY: `v` holds `n` mmsghdrs (sendmmsg's contract).
            let m = &mut *v.add(sent as usize);
            let r = sendmsg(fd, &m.msg_hdr, flags);
            if r < 0 {
                if sent == 0 {
                    return -1;
                }
                break;
            }
            m.msg_len = r as c_uint;
            sent += 1;
        }
        sent as c_int
    })
}

#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    v: *mut libc::mmsghdr,
    n: c_uint,
    flags: c_int,
    t: *mut timespec,
) -> c_int {
    route!(fd, real::recvmmsg(fd, v, n, flags, t), |_nf| {
        // Linux's do_recvmmsg: one recvmsg per message; MSG_WAITFORONE makes the ones after
        // the first non-blocking; the timeout is looked at after each message (recvmmsg(2)'s
        // BUGS: it does not bound a blocking receive); an error after at least one message
        // ends the call with the count received.
        if v.is_null() {
            set_errno(libc::EFAULT);
            return -1;
        }
        let end = timespec_ms(t);
        let end = (end >= 0).then(|| Instant::now() + Duration::from_millis(end as u64));
        let n = n.min(MMSG_MAX);
        let mut f = flags & !libc::MSG_WAITFORONE;
        let mut got = 0;
        while got < n {
            // SAFETY: `v` holds `n` mmsghdrs (recvmmsg's contract).
            let m = &mut *v.add(got as usize);
            let r = recvmsg(fd, &mut m.msg_hdr, f);
            if r < 0 {
                if got == 0 {
                    return -1;
                }
                break;
            }
            m.msg_len = r as c_uint;
            got += 1;
            if flags & libc::MSG_WAITFORONE != 0 {
                f |= libc::MSG_DONTWAIT;
            }
            if end.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        if let Some(t) = t.as_mut() {
            // Linux writes back the time left.
            let left = end.map_or(Duration::ZERO, |d| {
                d.saturating_duration_since(Instant::now())
            });
            t.tv_sec = left.as_secs() as libc::time_t;
            t.tv_nsec = left.subsec_nanos() as c_long;
        }
        got as c_int
    })
}

/// The most one emulated splice moves.
const SPLICE_MAX: usize = 64 * 1024;

/// splice(2) with a netfold socket at one end and (as Linux requires) a pipe at the other,
/// emulated through a buffer: socket to pipe peeks at the socket's data, writes it to the
/// pipe and then takes from the socket what the pipe accepted, so nothing is lost; pipe to
/// socket waits until the socket is writable, reads from the pipe and queues all of it on the
/// socket (waiting for room if need be, even on a non-blocking socket, rather than drop what
/// was read). As on Linux, whether the socket side waits follows the socket's O_NONBLOCK and
/// SPLICE_F_NONBLOCK is about the pipe (EAGAIN when the pipe is full or empty at the start).
/// Offsets must be NULL (ESPIPE, as for a socket or a pipe on Linux).
unsafe fn splice_ours(
    fd_in: c_int,
    off_in: *mut libc::loff_t,
    fd_out: c_int,
    off_out: *mut libc::loff_t,
    n: size_t,
    flags: c_uint,
) -> ssize_t {
    let (src, dst) = (target(fd_in), target(fd_out));
    if matches!(src, To::Parents) {
        return parents(fd_in) as ssize_t;
    }
    if matches!(dst, To::Parents) {
        return parents(fd_out) as ssize_t;
    }
    if !off_in.is_null() || !off_out.is_null() {
        set_errno(libc::ESPIPE);
        return -1;
    }
    let is_pipe = |fd: c_int| {
        let mut st = core::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstat(2) fills `st`.
        libc::fstat(fd, st.as_mut_ptr()) == 0
            && st.assume_init().st_mode & libc::S_IFMT == libc::S_IFIFO
    };
    // SPLICE_F_NONBLOCK: the pipe must be ready now.
    let pipe_ready = |fd: c_int, events: i16| {
        let mut p = [pollfd {
            fd,
            events,
            revents: 0,
        }];
        flags & libc::SPLICE_F_NONBLOCK == 0 || real::poll(p.as_mut_ptr(), 1, 0) > 0
    };
    let mut buf = vec![0u8; n.min(SPLICE_MAX)];
    match (src, dst) {
        (To::Netfold(nf), To::Kernel) if is_pipe(fd_out) => {
            if !pipe_ready(fd_out, libc::POLLOUT) {
                set_errno(libc::EAGAIN);
                return -1;
            }
            let got = read_op(nf, libc::MSG_PEEK, |f| {
                api::nf_recv(stack(), nf, buf.as_mut_ptr().cast(), buf.len(), f)
            });
            if got <= 0 {
                return got;
            }
            let w = real::write(fd_out, buf.as_ptr().cast(), got as usize);
            if w <= 0 {
                return w;
            }
            // What the pipe took leaves the socket (at most what was peeked: it is still
            // there, nobody else read in between unless the program races itself).
            api::nf_recv(
                stack(),
                nf,
                buf.as_mut_ptr().cast(),
                w as usize,
                libc::MSG_DONTWAIT,
            )
        }
        (To::Kernel, To::Netfold(nf)) if is_pipe(fd_in) => {
            if !pipe_ready(fd_in, libc::POLLIN) {
                set_errno(libc::EAGAIN);
                return -1;
            }
            if !is_plain(nf) {
                let mut p = [pollfd {
                    fd: nf,
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                if api::nf_poll(stack(), p.as_mut_ptr(), 1, 0) == 0 {
                    set_errno(libc::EAGAIN);
                    return -1;
                }
            } else if !wait_for(nf, libc::POLLOUT, timeo_deadline(nf, libc::POLLOUT)) {
                return -1;
            }
            let got = real::read(fd_in, buf.as_mut_ptr().cast(), buf.len());
            if got <= 0 {
                return got;
            }
            let mut done = 0usize;
            while done < got as usize {
                let w = api::nf_send(
                    stack(),
                    nf,
                    buf.as_ptr().add(done).cast(),
                    got as usize - done,
                    libc::MSG_DONTWAIT,
                );
                if w > 0 {
                    done += w as usize;
                } else if w < 0 && errno() == libc::EAGAIN {
                    if !wait_for(nf, libc::POLLOUT, None) && errno() != libc::EINTR {
                        break;
                    }
                } else {
                    break;
                }
            }
            if done == 0 {
                -1
            } else {
                done as ssize_t
            }
        }
        // Linux: one end must be a pipe.
        _ => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut libc::loff_t,
    fd_out: c_int,
    off_out: *mut libc::loff_t,
    n: size_t,
    flags: c_uint,
) -> ssize_t {
    if LIVE.load(Ordering::Relaxed) == 0 || (nf_of(fd_in).is_none() && nf_of(fd_out).is_none()) {
        return real::splice(fd_in, off_in, fd_out, off_out, n, flags);
    }
    uncork();
    splice_ours(fd_in, off_in, fd_out, off_out, n, flags)
}
