//! A blocking runtime: one thread drives a [`Stack`] and its device; application threads use
//! `std::io::Read + Write` streams and an `accept()`-ing listener on it.
//!
//! Concurrency design: the stack and device live behind the [`Driver`]'s mutex, and its thread
//! polls them (see [`crate::driver`] for how it sleeps and batches).
//!
//! An application call that cannot complete registers what it waits for (its socket and
//! direction: readable, writable, an accepted connection, everything acknowledged) beside the
//! stack, under the same lock, and parks its thread. After every poll the driver asks each
//! registered socket whether it is ready and unparks only the threads whose socket is, like
//! the tokio adapter's per-socket wakers, so threads never wake each other in a herd. Checking
//! and registering under one lock means no wake-up is lost; a waiter still re-checks at least
//! every 50 ms (`SAFETY_NET`) and honours its timeout on its own clock. Before parking, a
//! waiter yields the CPU between looks at its wake flag for the driver's busy-poll budget
//! ([`crate::backoff`], 50 us), so a wake-up within microseconds costs no sleep; it never
//! spins without yielding.
//!
//! ```
//! use netfold::iface::{Stack, StackConfig};
//! use netfold::phy::pipe::{Pipe, PipeConfig};
//! use netfold_rt::Runtime;
//! use netfold::wire::{ethernet::EthernetAddress, Ipv4Addr};
//! use std::io::{Read, Write};
//! use std::net::SocketAddrV4;
//! use std::time::Duration;
//!
//! let stack = |last: u8| {
//!     Stack::new(StackConfig {
//!         addr: Ipv4Addr::new(198, 18, 0, last),
//!         mac: EthernetAddress([2, 0, 0, 0, 0, last]),
//!         tcp_secret: netfold::tcp::Secret::fixed_for_tests([last; 16]),
//!         ..StackConfig::default()
//!     })
//! };
//! let (a, b) = Pipe::new(PipeConfig::default());
//! let client = Runtime::start(stack(1), Box::new(a), Duration::from_millis(1))?;
//! let server = Runtime::start(stack(2), Box::new(b), Duration::from_millis(1))?;
//! let server_addr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7);
//! let listener = server.listen(server_addr, 8, Default::default())?;
//! let echo = std::thread::spawn(move || -> std::io::Result<()> {
//!     let (mut s, _) = listener.accept()?;
//!     let mut buf = [0u8; 5];
//!     s.read_exact(&mut buf)?;
//!     s.write_all(&buf)
//! });
//! let mut s = client.connect(server_addr, Default::default(), Some(Duration::from_secs(5)))?;
//! s.write_all(b"hello")?;
//! let mut back = [0u8; 5];
//! s.read_exact(&mut back)?;
//! assert_eq!(&back, b"hello");
//! echo.join().unwrap()?;
//! # Ok::<(), std::io::Error>(())
//! ```

use crate::backoff::{Backoff, Step};
use crate::driver::{Driven, Driver};
use netfold::iface::Stack;
use netfold::phy::{Device, RawFd};
use netfold::socket::{
    io_error, TcpListener as NbListener, TcpStream as NbStream, UdpSocket as NbUdp,
};
use netfold::tcp;
use netfold::time::Instant;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{JoinHandle, Thread};
use std::time::Duration as StdDuration;

/// Longest single park of a waiting application thread: a safety net against a readiness
/// change nobody announced (it then re-tries its call). Not a spin: 20 wake-ups a second.
const SAFETY_NET: StdDuration = StdDuration::from_millis(50);

/// What a blocked application call waits for.
#[derive(Debug, Clone, Copy)]
enum Interest {
    /// Data, end of stream or an error to read.
    Read(NbStream),
    /// Room to write (or an error); also a connect's completion.
    Write(NbStream),
    /// Everything written acknowledged (or an error).
    Acked(NbStream),
    /// A connection to accept (or an error).
    Accept(NbListener),
    UdpRecv(NbUdp),
    UdpSend(NbUdp),
}

impl Interest {
    /// Would the call now make progress (or fail)?
    fn ready(&self, stack: &mut Stack) -> bool {
        match *self {
            Interest::Read(s) => s.readiness(stack).readable,
            Interest::Write(s) => {
                let tcp = stack.tcp();
                match (
                    tcp.state(s.handle()),
                    tcp.send_queue(s.handle()),
                    tcp.send_space(s.handle()),
                ) {
                    // Like the kernel's sk_stream_is_writeable: wake a blocked writer once at
                    // least a third of the buffer is free (free >= queued / 2), not for every
                    // acknowledged segment, so it writes in large pieces.
                    (Ok(tcp::State::Established), Ok(queued), Ok(space)) => {
                        space > 0 && space >= queued / 2
                    }
                    _ => s.readiness(stack).writable,
                }
            }
            Interest::Acked(s) => stack.tcp().send_queue(s.handle()).map_or(true, |q| q == 0),
            Interest::Accept(l) => l.readiness(stack).readable,
            Interest::UdpRecv(u) => u.readiness(stack).readable,
            Interest::UdpSend(u) => u.readiness(stack).writable,
        }
    }
}

/// One parked application thread: the driver sets `woken` and unparks it.
struct Parker {
    thread: Thread,
    woken: AtomicBool,
}

impl Parker {
    fn new() -> Arc<Parker> {
        Arc::new(Parker {
            thread: std::thread::current(),
            woken: AtomicBool::new(false),
        })
    }

    /// The calling thread's parker (a fresh one while its thread-locals are being destroyed).
    fn current() -> Arc<Parker> {
        PARKER
            .try_with(Arc::clone)
            .unwrap_or_else(|_| Parker::new())
    }
}

thread_local! {
    /// Each thread waits on one call at a time, so one parker per thread serves them all.
    static PARKER: Arc<Parker> = Parker::new();
}

/// The application threads waiting for a socket to become ready.
#[derive(Default)]
struct Waiters(Vec<(Interest, Arc<Parker>)>);

impl Waiters {
    fn register(&mut self, interest: Interest, p: &Arc<Parker>) {
        p.woken.store(false, Ordering::Relaxed);
        self.0.push((interest, Arc::clone(p)));
    }

    /// Forgets `p`'s registration if the driver has not taken it (a timeout, a safety-net
    /// wake-up).
    fn remove(&mut self, p: &Arc<Parker>) {
        self.0.retain(|(_, q)| !Arc::ptr_eq(p, q));
    }

    fn wake(p: &Parker) {
        p.woken.store(true, Ordering::Release);
        p.thread.unpark();
    }

    fn wake_ready(&mut self, stack: &mut Stack) {
        self.0.retain(|(interest, p)| {
            let ready = interest.ready(stack);
            if ready {
                Waiters::wake(p);
            }
            !ready
        });
    }

    fn wake_all(&mut self) {
        for (_, p) in self.0.drain(..) {
            Waiters::wake(&p);
        }
    }
}

/// What the driver runs: the stack and its device, and the threads waiting on its sockets.
struct Inner {
    stack: Stack,
    device: Box<dyn Device + Send>,
    idle_wait: StdDuration,
    waiters: Waiters,
}

impl Driven for Inner {
    fn poll(&mut self, now: Instant) -> bool {
        self.stack.poll(now, self.device.as_mut())
    }
    fn poll_at(&self, now: Instant) -> Option<Instant> {
        [self.stack.poll_at(now), self.device.poll_at()]
            .into_iter()
            .flatten()
            .min()
    }
    fn readable_fd(&self) -> Option<RawFd> {
        self.device.readable_fd()
    }
    fn idle_wait(&self) -> StdDuration {
        self.idle_wait
    }
    fn wake_on_rx(&mut self, waker: Option<&std::task::Waker>) -> bool {
        self.device.wake_on_rx(waker)
    }
    fn wake_ready(&mut self) {
        if !self.waiters.0.is_empty() {
            self.waiters.wake_ready(&mut self.stack);
        }
    }
    fn wake_all(&mut self) {
        self.waiters.wake_all();
    }
}

/// What the runtime and its sockets share: the driver (its thread holds another reference).
struct Shared {
    driver: Arc<Driver<Inner>>,
}

impl Shared {
    fn now(&self) -> Instant {
        self.driver.now()
    }

    fn kick(&self, g: &mut Inner) {
        self.driver.kick(g);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.driver.lock()
    }

    /// Waits, without the lock, until a driver sets `p`'s flag or `wait` passes. Like Linux's
    /// socket busy polling (`net.core.busy_read`): yield the CPU between looks for the
    /// driver's busy-poll budget, then park; a wake-up that comes within microseconds costs
    /// no sleep and no futex call.
    fn await_wake(&self, p: &Parker, wait: StdDuration) {
        let until = std::time::Instant::now() + wait;
        let mut backoff = Backoff::new(self.driver.backoff());
        while !p.woken.load(Ordering::Acquire) {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            match backoff.idle(self.now()) {
                Step::Sleep => std::thread::park_timeout(left),
                step => {
                    backoff.pause(step);
                }
            }
        }
    }

    /// Registers the calling thread as waiting for `interest`, releases the lock and waits
    /// until the driver wakes it or `wait` passes; returns the lock re-taken.
    fn park<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        interest: Interest,
        wait: StdDuration,
    ) -> MutexGuard<'a, Inner> {
        let p = Parker::current();
        g.waiters.register(interest, &p);
        drop(g);
        self.await_wake(&p, wait);
        let mut g = self.lock();
        if !p.woken.load(Ordering::Acquire) {
            // Timed out (or the safety net): the driver has not taken the registration.
            g.waiters.remove(&p);
        }
        g
    }

    /// Runs `op` against the stack until it stops returning `WouldBlock`, parking (not
    /// spinning) in between until the driver finds `interest` ready, for at most `timeout`.
    fn wait_for<T>(
        &self,
        timeout: Option<StdDuration>,
        interest: Interest,
        mut op: impl FnMut(&mut Stack, Instant) -> io::Result<T>,
    ) -> io::Result<T> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut g = self.lock();
        loop {
            let now = self.now();
            match op(&mut g.stack, now) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => {
                    self.kick(&mut g);
                    return other;
                }
            }
            if self.driver.stopped() {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "runtime stopped",
                ));
            }
            self.kick(&mut g);
            let wait = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "operation timed out",
                        ));
                    }
                    left.min(SAFETY_NET)
                }
                None => SAFETY_NET,
            };
            g = self.park(g, interest, wait);
        }
    }
}

/// The clock every [`Runtime`] of this process reads: real time since the first one started.
/// One epoch for all of them, because runtimes that share an in-memory link (the core's
/// `Pipe`, whose frames carry the sender's clock) must agree on the time: with an epoch each,
/// a frame from the runtime started first is not deliverable at the other until the other's
/// clock catches up, which delayed every frame in that direction by the gap between the two
/// starts (milliseconds on a loaded machine, and so milliseconds of RTT on a link that has
/// none).
fn epoch() -> netfold_os::clock::Epoch {
    static EPOCH: std::sync::OnceLock<netfold_os::clock::Epoch> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(netfold_os::clock::Epoch::now)
}

/// A thread driving one stack over one device.
pub struct Runtime {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// How long dropping the runtime drains, in milliseconds ([`Runtime::set_drop_drain`]).
    drop_drain_ms: std::sync::atomic::AtomicU64,
}

impl Runtime {
    /// Starts the driver thread. `idle_wait` bounds how long the driver sleeps when the device
    /// cannot wake it (1 ms is a good default for in-memory links).
    pub fn start(
        stack: Stack,
        device: Box<dyn Device + Send>,
        idle_wait: StdDuration,
    ) -> io::Result<Runtime> {
        Runtime::start_on(stack, device, idle_wait, None)
    }

    /// Opens the kernel link `spec` names for `stack` and starts the driver on it:
    /// `tap:NAME`, `tun:NAME`, `packet:IFNAME` or `xdp:IFNAME[@QUEUE][:all]` (an AF_XDP
    /// socket whose program redirects the frames for the stack's addresses;
    /// [`netfold_os::link::Link::open_for_stack`]). The interface is looked up in the calling
    /// thread's network namespace; the driver waits on the link's descriptor.
    pub fn open(stack: Stack, spec: &str) -> io::Result<Runtime> {
        let link = netfold_os::link::Link::open_for_stack(spec, stack.config())?;
        Runtime::start(stack, Box::new(link), StdDuration::from_millis(1))
    }

    /// [`Runtime::start`] with the driver thread pinned to `cpu` (modulo the CPUs online; see
    /// [`netfold_os::cpu::pin_current_thread`]), or unpinned for `None`. A refused pin (a
    /// cpuset without that CPU) leaves the driver unpinned: slower, not wrong.
    pub fn start_on(
        stack: Stack,
        device: Box<dyn Device + Send>,
        idle_wait: StdDuration,
        cpu: Option<usize>,
    ) -> io::Result<Runtime> {
        let shared = Arc::new(Shared {
            driver: Arc::new(Driver::new(
                Inner {
                    stack,
                    device,
                    idle_wait,
                    waiters: Waiters::default(),
                },
                epoch(),
            )),
        });
        let thread = shared.driver.spawn_with("netfold-driver", move || {
            if let Some(cpu) = cpu {
                netfold_os::cpu::pin_current_thread(cpu);
            }
        })?;
        Ok(Runtime {
            shared,
            thread: Some(thread),
            drop_drain_ms: std::sync::atomic::AtomicU64::new(Self::DEFAULT_DRAIN.as_millis() as u64),
        })
    }

    /// Runs `f` with the stack locked (for counters, configuration, or non-blocking calls).
    pub fn with_stack<T>(&self, f: impl FnOnce(&mut Stack) -> T) -> T {
        let mut g = self.shared.lock();
        let r = f(&mut g.stack);
        self.shared.kick(&mut g);
        r
    }

    /// The runtime's current time (microseconds since the process's first runtime started;
    /// every runtime of the process reads the same clock).
    pub fn now(&self) -> Instant {
        self.shared.now()
    }

    /// Listens on `local` (0.0.0.0 = the stack's address; `[::]:p` is dual-stack unless
    /// `config.v6only`, its IPv4 peers reported v4-mapped, as `std` on Linux).
    pub fn listen(
        &self,
        local: impl Into<SocketAddr>,
        backlog: usize,
        config: tcp::Config,
    ) -> io::Result<TcpListener> {
        let local = local.into();
        let l = self.with_stack(|s| NbListener::bind(s, local, backlog, config))?;
        Ok(TcpListener {
            shared: Arc::clone(&self.shared),
            inner: l,
        })
    }

    /// Connects to `remote`, blocking until established, refused or timed out (`timeout`). An
    /// IPv6 `remote` while the stack has no IPv6 address fails at once (`NetworkUnreachable`).
    pub fn connect(
        &self,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
        timeout: Option<StdDuration>,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        self.connect_with(timeout, |st, now| {
            NbStream::connect(st, now, remote, config)
        })
    }

    /// [`Runtime::connect`] from the explicit local port `local_port` (0 = an ephemeral one),
    /// as `bind` before `connect` does with kernel sockets. Fails at once with `AddrInUse`
    /// if that 4-tuple is taken (also by a connection in TIME-WAIT), so a caller choosing
    /// ports (a shard, [`crate::shards::Shards::connect`]) moves on to the next.
    pub fn connect_from(
        &self,
        local_port: u16,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
        timeout: Option<StdDuration>,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        self.connect_with(timeout, |st, now| {
            NbStream::connect_from(st, now, local_port, remote, config)
        })
    }

    /// Opens a connection with `open` and waits until it is established, refused or timed out.
    fn connect_with(
        &self,
        timeout: Option<StdDuration>,
        open: impl FnOnce(&mut Stack, Instant) -> io::Result<NbStream>,
    ) -> io::Result<TcpStream> {
        let now = self.now();
        let s = self.with_stack(|st| open(st, now))?;
        let r = self.shared.wait_for(timeout, Interest::Write(s), |st, _| {
            match s.is_connected(st)? {
                true => Ok(()),
                false => Err(io::ErrorKind::WouldBlock.into()),
            }
        });
        if let Err(e) = r {
            self.with_stack(|st| {
                let _ = s.abort(st);
            });
            return Err(e);
        }
        Ok(TcpStream::new(&self.shared, s))
    }

    /// Binds a UDP socket on `local` (0.0.0.0 = the stack's address; port 0 picks an ephemeral
    /// one; `[::]` is dual-stack).
    pub fn udp_bind(&self, local: impl Into<SocketAddr>) -> io::Result<UdpSocket> {
        let local = local.into();
        let sock = self.with_stack(|s| NbUdp::bind(s, local))?;
        Ok(UdpSocket {
            shared: Arc::clone(&self.shared),
            sock,
            timeouts: Timeouts::default(),
        })
    }

    /// How long dropping the runtime lets closed connections finish sending.
    pub const DEFAULT_DRAIN: StdDuration = StdDuration::from_secs(5);

    /// How long dropping this runtime drains ([`Runtime::drain`]); zero stops it at once, as
    /// [`Runtime::shutdown`] does (a benchmark whose connections' last bytes do not matter).
    /// Default [`Runtime::DEFAULT_DRAIN`].
    pub fn set_drop_drain(&self, d: StdDuration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.drop_drain_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Lets every connection the application has closed (its streams dropped) finish sending
    /// its data and FIN, for at most `timeout`, as Linux keeps an orphaned socket sending after
    /// its process has gone; then ends every connection still there, open ones included, with
    /// a RST (none for one in CLOSING or LAST-ACK: RFC 9293's ABORT), so that no peer waits
    /// for bytes that will not come. Returns the number of connections ended that way (0: all
    /// delivered). The runtime stays usable for new connections. Dropping the runtime does
    /// this with [`Runtime::DEFAULT_DRAIN`]; [`Runtime::shutdown`] does not.
    pub fn drain(&self, timeout: StdDuration) -> usize {
        self.shared.driver.drain(timeout, |inner| &mut inner.stack)
    }

    /// Stops the driver thread at once, without [`Runtime::drain`], and returns the stack
    /// (e.g. to read its counters).
    pub fn shutdown(mut self) -> Stack {
        self.stop_thread();
        let shared = Arc::clone(&self.shared);
        drop(self);
        let mut g = shared.lock();
        std::mem::replace(&mut g.stack, Stack::new(Default::default()))
    }

    fn stop_thread(&mut self) {
        self.shared.driver.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Runtime {
    /// Drains for up to [`Runtime::DEFAULT_DRAIN`] (or what [`Runtime::set_drop_drain`] set;
    /// see [`Runtime::drain`]), then stops the driver thread: bytes written to a stream that was dropped before the runtime still
    /// reach the peer, with a FIN.
    fn drop(&mut self) {
        let ms = self
            .drop_drain_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        if self.thread.is_some() && ms > 0 {
            self.drain(StdDuration::from_millis(ms));
        }
        self.stop_thread();
    }
}

/// A blocking listener.
pub struct TcpListener {
    shared: Arc<Shared>,
    inner: NbListener,
}

impl TcpListener {
    /// Waits for the next connection.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, peer) = self
            .shared
            .wait_for(None, Interest::Accept(self.inner), |st, _| {
                self.inner.accept(st)
            })?;
        Ok((TcpStream::new(&self.shared, s), peer))
    }

    /// Waits for the next connection for at most `timeout` (then `TimedOut`), so a server
    /// can look at a stop flag between waits.
    pub fn accept_timeout(&self, timeout: StdDuration) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, peer) =
            self.shared
                .wait_for(Some(timeout), Interest::Accept(self.inner), |st, _| {
                    self.inner.accept(st)
                })?;
        Ok((TcpStream::new(&self.shared, s), peer))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let g = self.shared.lock();
        self.inner.local_addr(&g.stack)
    }

    /// Waits for the next connection on any of `listeners` (which may belong to different
    /// runtimes, e.g. one per shard) for at most `timeout` (`None`: forever), looking at them
    /// in order from index `first` (a caller rotating `first` is fair to all of them). Returns
    /// the index of the listener that had it, the connection and its peer.
    ///
    /// No spinning: the calling thread registers its one parker with every listener's
    /// runtime and parks until any driver finds its listener ready, exactly as
    /// [`TcpListener::accept`] waits on one (the wake flag is cleared once per sweep, before
    /// the first registration, so a wake-up from a runtime registered early is not lost
    /// while later ones register).
    pub fn accept_any(
        listeners: &[&TcpListener],
        first: usize,
        timeout: Option<StdDuration>,
    ) -> io::Result<(usize, TcpStream, SocketAddr)> {
        if listeners.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "accept_any on no listeners",
            ));
        }
        let n = listeners.len();
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let p = Parker::current();
        let mut first = first % n;
        loop {
            p.woken.store(false, Ordering::Relaxed);
            let mut registered = Vec::with_capacity(n);
            let mut found = None;
            for k in (0..n).map(|i| (first + i) % n) {
                let l = listeners[k];
                let mut g = l.shared.lock();
                if l.shared.driver.stopped() {
                    found = Some((
                        k,
                        Err(io::Error::new(
                            io::ErrorKind::NotConnected,
                            "runtime stopped",
                        )),
                    ));
                    break;
                }
                match l.inner.accept(&mut g.stack) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        g.waiters
                            .0
                            .push((Interest::Accept(l.inner), Arc::clone(&p)));
                        l.shared.kick(&mut g);
                        registered.push(k);
                    }
                    other => {
                        l.shared.kick(&mut g);
                        found = Some((k, other));
                        break;
                    }
                }
            }
            if found.is_none() {
                let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
                if left.is_some_and(|l| l.is_zero()) {
                    found = Some((
                        first,
                        Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "operation timed out",
                        )),
                    ));
                } else {
                    let wait = left.map_or(SAFETY_NET, |l| l.min(SAFETY_NET));
                    listeners[first].shared.await_wake(&p, wait);
                }
            }
            // Forget the registrations no driver has taken (a driver that woke us removed its
            // own), before returning or sweeping again.
            for &k in &registered {
                listeners[k].shared.lock().waiters.remove(&p);
            }
            if let Some((k, r)) = found {
                return r.map(|(s, peer)| (k, TcpStream::new(&listeners[k].shared, s), peer));
            }
            // Next sweep starts after the listener looked at first, so a listener with a
            // steady stream of connections cannot hide the others.
            first = (first + 1) % n;
        }
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        let _ = self.inner.close(&mut g.stack);
        self.shared.kick(&mut g);
    }
}

/// Read and write timeouts, settable through `&self` (a clone of a stream shares them, as
/// `std::net` clones share the descriptor's).
#[derive(Default)]
struct Timeouts {
    read: Mutex<Option<StdDuration>>,
    write: Mutex<Option<StdDuration>>,
}

impl Timeouts {
    fn get(m: &Mutex<Option<StdDuration>>) -> Option<StdDuration> {
        *m.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Sets a timeout; like std's sockets, a zero `Duration` is an `InvalidInput` error (and
    /// leaves the timeout as it was), since it cannot mean "wait forever" (`None` does).
    fn set(m: &Mutex<Option<StdDuration>>, t: Option<StdDuration>) -> io::Result<()> {
        if t == Some(StdDuration::ZERO) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot set a 0 duration timeout",
            ));
        }
        *m.lock().unwrap_or_else(|p| p.into_inner()) = t;
        Ok(())
    }
}

/// What the clones of one stream share; the last one dropped closes the connection.
struct Conn {
    shared: Arc<Shared>,
    sock: NbStream,
    timeouts: Timeouts,
}

impl Drop for Conn {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        let _ = self.sock.close(&mut g.stack);
        self.shared.kick(&mut g);
    }
}

/// A blocking TCP connection. Dropping it (its last clone) closes it (FIN), like
/// `std::net::TcpStream`. `&TcpStream` reads and writes too, and [`TcpStream::try_clone`]
/// gives a reader thread and a writer thread each a handle on the same connection.
pub struct TcpStream {
    conn: Arc<Conn>,
}

impl TcpStream {
    fn new(shared: &Arc<Shared>, sock: NbStream) -> TcpStream {
        TcpStream {
            conn: Arc::new(Conn {
                shared: Arc::clone(shared),
                sock,
                timeouts: Timeouts::default(),
            }),
        }
    }

    fn shared(&self) -> &Shared {
        &self.conn.shared
    }

    /// Another handle on the same connection (sharing its timeouts); the connection closes
    /// when the last handle is dropped.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(TcpStream {
            conn: Arc::clone(&self.conn),
        })
    }

    /// `None` waits forever; a read that waits longer fails with `TimedOut`. As with
    /// [`std::net::TcpStream::set_read_timeout`], `Some(Duration::ZERO)` is an `InvalidInput`
    /// error. Shared by the stream's clones.
    pub fn set_read_timeout(&self, t: Option<StdDuration>) -> io::Result<()> {
        Timeouts::set(&self.conn.timeouts.read, t)
    }
    /// `None` waits forever; a write that waits longer fails with `TimedOut`;
    /// `Some(Duration::ZERO)` is an `InvalidInput` error, as with std.
    pub fn set_write_timeout(&self, t: Option<StdDuration>) -> io::Result<()> {
        Timeouts::set(&self.conn.timeouts.write, t)
    }
    pub fn read_timeout(&self) -> Option<StdDuration> {
        Timeouts::get(&self.conn.timeouts.read)
    }
    pub fn write_timeout(&self) -> Option<StdDuration> {
        Timeouts::get(&self.conn.timeouts.write)
    }
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        let mut g = self.shared().lock();
        self.conn.sock.set_nodelay(&mut g.stack, nodelay)
    }
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        let g = self.shared().lock();
        self.conn.sock.peer_addr(&g.stack)
    }
    /// The connection's state, options, RTT, congestion window and counters in the terms of
    /// Linux's `struct tcp_info` (getsockopt TCP_INFO).
    pub fn tcp_info(&self) -> io::Result<netfold::tcp::TcpInfo> {
        let now = self.shared().now();
        let g = self.shared().lock();
        g.stack
            .tcp()
            .tcp_info(self.conn.sock.handle(), now)
            .map_err(netfold::socket::io_error)
    }
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let g = self.shared().lock();
        self.conn.sock.local_addr(&g.stack)
    }
    /// shutdown(SHUT_WR).
    pub fn shutdown_write(&self) -> io::Result<()> {
        let s = self.conn.sock;
        self.shared()
            .wait_for(None, Interest::Write(s), |st, _| s.shutdown_write(st))
    }
    /// A posted read (single-pass receive) with an owned buffer, as completion-based I/O
    /// takes one: `buf` is lent to the connection while this call waits, and the driver
    /// thread copies in-order bytes from the frames straight into it, the checksum verified
    /// in that copy (one pass per byte; `read` makes two, into the receive ring and out of
    /// it). Returns the buffer and what the read came to, as `read` reports it: `Ok(n)` with
    /// the data in `buf[..n]` (at least one byte; whatever had arrived by the time this
    /// thread ran again, up to `buf.len()`), `Ok(0)` at end of stream, or an error
    /// (`TimedOut` after the read timeout; `InvalidInput` for an empty buffer or while
    /// another read is posted on the connection). `Read::read` stays the copying path:
    /// a borrowed `&mut [u8]` cannot be lent to the driver thread.
    pub fn read_posted(&self, buf: Vec<u8>) -> (Vec<u8>, io::Result<usize>) {
        let s = self.conn.sock;
        let sh = self.shared();
        let deadline = self.read_timeout().map(|t| std::time::Instant::now() + t);
        let mut buf = buf;
        loop {
            {
                let mut g = sh.lock();
                if let Err((e, b)) = s.post_read(&mut g.stack, buf) {
                    return (b, Err(e));
                }
                sh.kick(&mut g);
            }
            // Readable once the posted buffer holds data (or at end of stream, or an error).
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            let waited = sh.wait_for(left, Interest::Read(s), |st, _| {
                if s.readiness(st).readable {
                    Ok(())
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                }
            });
            let mut g = sh.lock();
            let taken = s.take_read(&mut g.stack);
            sh.kick(&mut g);
            match (taken, waited) {
                // Nothing after all (readiness said yes for a state change that brought no
                // data): post it again and wait on.
                (Ok((b, Err(e))), Ok(())) if e.kind() == io::ErrorKind::WouldBlock => buf = b,
                // Timed out (or the runtime stopped) with nothing read.
                (Ok((b, Err(e))), Err(w)) if e.kind() == io::ErrorKind::WouldBlock => {
                    return (b, Err(w))
                }
                // Data (also data that came in with the timeout), end of stream, an error.
                (Ok((b, r)), _) => return (b, r),
                // The handle went away under the read (not while this handle lives: it keeps
                // the connection); the buffer went with it.
                (Err(e), _) => return (Vec::new(), Err(e)),
            }
        }
    }

    /// Switches the connection to frame reads (see [`TcpStream::read_frames`]) or back.
    pub fn set_borrow_frames(&self, on: bool) -> io::Result<()> {
        let s = self.conn.sock;
        let sh = self.shared();
        let mut g = sh.lock();
        s.set_borrow_frames(&mut g.stack, on)?;
        if on {
            // A frame the application drops returns its buffer on the application's thread;
            // the driver, maybe asleep until a deadline, is woken to take it in and reopen
            // the window.
            g.stack.tcp().set_release_waker(sh.driver.task_waker());
        }
        sh.kick(&mut g);
        Ok(())
    }

    /// A frame read (no copy): blocks until in-order data, end of stream or an error, then
    /// appends up to `max` borrowed frames to `out` and returns their bytes (`Ok(0)` at end of
    /// stream). Each `BorrowedPayload` derefs to the payload where it arrived and returns its
    /// buffer to the stack's pool when dropped; frames held count against the receive
    /// window. Needs [`TcpStream::set_borrow_frames`].
    pub fn read_frames(
        &self,
        out: &mut Vec<netfold::buf::BorrowedPayload>,
        max: usize,
    ) -> io::Result<usize> {
        let s = self.conn.sock;
        self.shared()
            .wait_for(self.read_timeout(), Interest::Read(s), |st, _| {
                s.read_frames(st, out, max)
            })
    }

    /// Waits until every byte written has been acknowledged by the peer.
    pub fn flush_acked(&self, timeout: Option<StdDuration>) -> io::Result<()> {
        let s = self.conn.sock;
        self.shared()
            .wait_for(timeout, Interest::Acked(s), |st, _| {
                match st.tcp().send_queue(s.handle()).map_err(io_error)? {
                    0 => Ok(()),
                    _ => Err(io::ErrorKind::WouldBlock.into()),
                }
            })
    }
}

impl io::Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let s = self.conn.sock;
        self.shared()
            .wait_for(self.read_timeout(), Interest::Read(s), |st, _| {
                s.read(st, buf)
            })
    }
}

impl io::Write for &TcpStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let s = self.conn.sock;
        self.shared()
            .wait_for(self.write_timeout(), Interest::Write(s), |st, _| {
                s.write(st, data)
            })
    }
    /// Data is handed to the stack by `write`; there is no user-space buffer to flush.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl io::Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl io::Write for TcpStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        (&*self).write(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A blocking UDP socket. `&self` methods: it may be shared between threads (in an `Arc`).
/// Dropping it closes it.
pub struct UdpSocket {
    shared: Arc<Shared>,
    sock: NbUdp,
    timeouts: Timeouts,
}

impl UdpSocket {
    /// Queues one datagram to `to` (waiting while the send queue is full, at most the write
    /// timeout); the driver sends it on its next poll.
    pub fn send_to(&self, data: &[u8], to: impl Into<SocketAddr>) -> io::Result<usize> {
        let s = self.sock;
        let to = to.into();
        self.shared.wait_for(
            Timeouts::get(&self.timeouts.write),
            Interest::UdpSend(s),
            |st, _| s.send_to(st, data, to),
        )
    }

    /// The next datagram (truncated to `buf`, as recvfrom does) and its sender, waiting at
    /// most the read timeout.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let s = self.sock;
        self.shared.wait_for(
            Timeouts::get(&self.timeouts.read),
            Interest::UdpRecv(s),
            |st, _| s.recv_from(st, buf),
        )
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let g = self.shared.lock();
        self.sock.local_addr(&g.stack)
    }

    /// `None` waits forever; a receive that waits longer fails with `TimedOut`. As with
    /// [`std::net::UdpSocket::set_read_timeout`], `Some(Duration::ZERO)` is an `InvalidInput`
    /// error.
    pub fn set_read_timeout(&self, t: Option<StdDuration>) -> io::Result<()> {
        Timeouts::set(&self.timeouts.read, t)
    }
    /// `None` waits forever; a send that waits longer fails with `TimedOut`;
    /// `Some(Duration::ZERO)` is an `InvalidInput` error, as with std.
    pub fn set_write_timeout(&self, t: Option<StdDuration>) -> io::Result<()> {
        Timeouts::set(&self.timeouts.write, t)
    }
}

impl Drop for UdpSocket {
    /// A datagram `send_to` accepted waits in the socket's queue until the driver's next poll,
    /// and closing discards that queue; a kernel socket's sendto has handed it on already. So
    /// the queue is flushed with one poll first.
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        let now = self.shared.now();
        g.poll(now);
        self.sock.close(&mut g.stack);
        self.shared.kick(&mut g);
    }
}

// Transparent mode (a listener and a UDP socket for any destination), in its own file.
mod transparent;
pub mod zerocopy;
