//! The driver task: polls the stack over its device, wakes the sockets that became ready, and
//! sleeps until the next thing that can change them (see the crate documentation).

use crate::wakers::Wakers;
use netfold::iface::Stack;
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use netfold::phy::{Device, RawFd};
use netfold::time::Instant;
use netfold_os::clock::Epoch;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration as StdDuration;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

/// The stack, its device and the tasks waiting on its sockets, under one lock. The lock is
/// held only for non-blocking calls, never across an `.await`.
pub(crate) struct State {
    pub(crate) stack: Stack,
    device: Box<dyn Device + Send>,
    pub(crate) wakers: Wakers,
}

impl State {
    /// One poll of the stack over the device at `now`; `true` when it did any work.
    pub(crate) fn poll(&mut self, now: Instant) -> bool {
        self.stack.poll(now, self.device.as_mut())
    }
}

/// What the driver task and every socket share.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Application calls that changed something the stack must act on (data queued, window
    /// opened, a socket opened or closed) announce it here; the driver polls.
    kick: Notify,
    /// The same moment on std's clock (tokio's timers) and on `netfold_os::clock` (the
    /// stack's, the TSC where the kernel trusts it).
    epoch: std::time::Instant,
    clock: Epoch,
    stop: AtomicBool,
    /// Set with `stop` by a draining stop: the driver keeps polling until the connections
    /// the application closed have delivered everything, or until this instant.
    drain_until: Mutex<Option<std::time::Instant>>,
    /// Connections the last drain ended with a RST (`Net::shutdown_timeout`).
    ended: AtomicUsize,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A task that panicked holding the lock left the state as it was; keep using it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The stack's clock: real time since the driver started.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        self.clock.instant()
    }

    /// Wakes the driver. A kick while it is busy is kept (one permit) and runs one more poll.
    pub(crate) fn kick(&self) {
        self.kick.notify_one();
    }

    pub(crate) fn stopped(&self) -> io::Result<()> {
        if self.stop.load(Ordering::Acquire) {
            Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "netfold driver stopped",
            ))
        } else {
            Ok(())
        }
    }

    fn to_tokio(&self, at: Instant) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.epoch + StdDuration::from_micros(at.total_micros()))
    }
}

/// A device and how it tells the driver that frames arrived.
/// The clock every driver of this process reads: real time since the first one started. One
/// epoch for all, because drivers that share an in-memory link (the core's `Pipe`, whose
/// frames carry the sender's time) must agree on the time: with an epoch each, every frame in
/// one direction waited for the gap between the two drivers' starts (netfold-rt's runtimes had
/// the same defect, fixed the same way in `netfold_rt::blocking::epoch`).
fn epoch() -> (std::time::Instant, Epoch) {
    static EPOCH: std::sync::OnceLock<(std::time::Instant, Epoch)> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(|| {
        let e = std::time::Instant::now();
        (e, Epoch::from_std(e))
    })
}

pub struct Link {
    device: Box<dyn Device + Send>,
    /// Signalled by whoever puts frames on an in-memory link (the peer end of [`pipe`]).
    signal: Option<Arc<Notify>>,
    /// Longest sleep for a device that can announce nothing (no descriptor, no signal).
    idle_wait: Option<StdDuration>,
}

impl Link {
    /// A device that announces frames through [`Device::readable_fd`] (TAP, TUN, packet
    /// socket): the driver waits on it with tokio's `AsyncFd`.
    pub fn new(device: impl Device + Send + 'static) -> Link {
        Link {
            device: Box::new(device),
            signal: None,
            idle_wait: None,
        }
    }

    /// Opens the kernel link `spec` names for the stack `config` describes: `tap:NAME`,
    /// `tun:NAME`, `packet:IFNAME` or `xdp:IFNAME[@QUEUE][:all]` (an AF_XDP socket whose
    /// program redirects the frames for the stack's addresses;
    /// [`netfold_os::link::Link::open_for_stack`]), driven through its descriptor. The
    /// interface is looked up in the calling thread's network namespace.
    pub fn open(spec: &str, config: &netfold::iface::StackConfig) -> io::Result<Link> {
        netfold_os::link::Link::open_for_stack(spec, config).map(Link::new)
    }

    /// A device whose sender signals `signal` when it puts frames on it (an in-memory link's
    /// end, as [`pipe`] and [`crate::shards::mq_link`] make).
    pub(crate) fn signalled(device: Box<dyn Device + Send>, signal: Arc<Notify>) -> Link {
        Link {
            device,
            signal: Some(signal),
            idle_wait: None,
        }
    }

    /// For a device with no descriptor and no signal: the driver wakes at least every
    /// `idle_wait` to look for frames. Without it, such a device is refused by [`Net::spawn`]
    /// (it would never be read).
    pub fn idle_wait(mut self, idle_wait: StdDuration) -> Link {
        self.idle_wait = Some(idle_wait);
        self
    }
}

/// One end of an in-memory link that signals the other end's driver whenever it sends, so
/// two stacks on one tokio runtime wake each other instead of polling.
struct SignallingEnd {
    end: PipeEnd,
    peer: Arc<Notify>,
}

impl Device for SignallingEnd {
    fn caps(&self) -> netfold::phy::DeviceCaps {
        self.end.caps()
    }
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut netfold::buf::Pool,
        out: &mut Vec<netfold::buf::PacketBuf>,
        max: usize,
    ) -> usize {
        self.end.recv_batch(now, pool, out, max)
    }
    fn send_batch(
        &mut self,
        now: Instant,
        pool: &mut netfold::buf::Pool,
        frames: &mut Vec<netfold::buf::PacketBuf>,
    ) {
        if frames.is_empty() {
            return;
        }
        self.end.send_batch(now, pool, frames);
        self.peer.notify_one();
    }
    fn poll_at(&self) -> Option<Instant> {
        self.end.poll_at()
    }
}

/// An in-memory link (the core's [`Pipe`]) whose ends wake each other's driver on every send.
pub fn pipe(config: PipeConfig) -> (Link, Link) {
    let (a, b) = Pipe::new(config);
    let (sa, sb) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let link = |end, own: &Arc<Notify>, peer: &Arc<Notify>| Link {
        device: Box::new(SignallingEnd {
            end,
            peer: Arc::clone(peer),
        }),
        signal: Some(Arc::clone(own)),
        idle_wait: None,
    };
    (link(a, &sa, &sb), link(b, &sb, &sa))
}

/// A device descriptor lent to tokio's reactor; the device keeps ownership (dropping this
/// deregisters it without closing it).
struct BorrowedFd(RawFd);

impl std::os::fd::AsRawFd for BorrowedFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A stack running on a device as a tokio task. Sockets are opened against it
/// ([`crate::TcpStream::connect`], [`crate::TcpListener::bind`], [`crate::UdpSocket::bind`]).
///
/// Closing loses nothing: a dropped stream sends what it had queued and then a FIN, and
/// dropping the `Net` lets the driver task go on in the background until those connections
/// have delivered everything, for at most [`Net::DEFAULT_DRAIN`] (while the tokio runtime
/// runs), then resets what is left so no peer waits for bytes that will not come. Socket
/// calls fail with `NotConnected` from the drop on. [`Net::shutdown`] waits for that drain;
/// [`Net::shutdown_timeout`] chooses its bound.
pub struct Net {
    pub(crate) shared: Arc<Shared>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Net {
    /// Spawns the driver task on the current tokio runtime; outside one it fails (`Other`)
    /// rather than panic. The runtime needs its time driver, and its I/O driver for a device
    /// with a descriptor (`Builder::enable_all`, as `#[tokio::main]` does).
    pub fn spawn(stack: Stack, link: Link) -> io::Result<Net> {
        let rt = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        // Registering the descriptor needs the runtime's reactor as the current one.
        let _entered = rt.enter();
        let fd = match link.device.readable_fd() {
            Some(fd) if link.signal.is_none() => Some(fd),
            _ => None,
        };
        if fd.is_none() && link.signal.is_none() && link.idle_wait.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the device can announce no frames (no descriptor): give the Link an idle_wait",
            ));
        }
        let (epoch, clock) = epoch();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stack,
                device: link.device,
                wakers: Wakers::default(),
            }),
            kick: Notify::new(),
            epoch,
            clock,
            stop: AtomicBool::new(false),
            drain_until: Mutex::new(None),
            ended: AtomicUsize::new(0),
        });
        let fd = match fd {
            None => None,
            // SAFETY: `register_with_interest` needs the descriptor to stay open, and the same
            // file, for as long as the AsyncFd lives. It belongs to the device, which lives in
            // `shared` and is never replaced or dropped before `shared` is; the AsyncFd lives
            // in `Wake` beside an `Arc` of `shared` that is dropped after it (field order), so
            // the device outlives the registration.
            #[allow(unsafe_code)]
            Some(fd) => Some(
                unsafe {
                    AsyncFd::register_with_interest(BorrowedFd(fd), tokio::io::Interest::READABLE)
                }
                .map_err(io::Error::from)?,
            ),
        };
        let task = rt.spawn(run(Wake {
            fd,
            signal: link.signal,
            idle_wait: link.idle_wait,
            shared: Arc::clone(&shared),
        }));
        Ok(Net {
            shared,
            task: Some(task),
        })
    }

    /// Runs `f` with the stack locked (counters, configuration), then lets the driver act on
    /// whatever it changed.
    pub fn with_stack<T>(&self, f: impl FnOnce(&mut Stack) -> T) -> T {
        let r = f(&mut self.shared.lock().stack);
        self.shared.kick();
        r
    }

    /// How long dropping a `Net` (or [`Net::shutdown`]) lets closed connections finish.
    pub const DEFAULT_DRAIN: StdDuration = StdDuration::from_secs(5);

    /// Stops the driver task after a drain of at most [`Net::DEFAULT_DRAIN`] (see
    /// [`Net::shutdown_timeout`]) and waits for it to end; every waiting socket call fails.
    pub async fn shutdown(self) {
        self.shutdown_timeout(Self::DEFAULT_DRAIN).await;
    }

    /// Socket calls fail from now on; the driver task goes on until every connection the
    /// application closed has delivered its data and FIN (as Linux keeps an orphaned socket
    /// sending), for at most `timeout`; then it ends every connection still there, open ones
    /// included, with a RST (none in CLOSING or LAST-ACK: RFC 9293's ABORT), and stops.
    /// Returns the number of connections ended that way (0: everything was delivered).
    pub async fn shutdown_timeout(mut self, timeout: StdDuration) -> usize {
        self.stop_draining(timeout);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.shared.ended.load(Ordering::Acquire)
    }

    fn stop_draining(&self, timeout: StdDuration) {
        *self
            .shared
            .drain_until
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now() + timeout);
        self.stop();
    }

    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.kick();
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.stop_draining(Self::DEFAULT_DRAIN);
        }
    }
}

/// What the driver task sleeps on. Fields drop in order: the descriptor's registration goes
/// before the `Arc` that keeps its device alive.
struct Wake {
    fd: Option<AsyncFd<BorrowedFd>>,
    signal: Option<Arc<Notify>>,
    idle_wait: Option<StdDuration>,
    shared: Arc<Shared>,
}

/// The driver loop. Each round polls the stack once and wakes the sockets it made ready; after
/// a poll that did work it yields to the application tasks and goes again, otherwise it
/// sleeps until the first of: the stack's or the device's deadline (`poll_at`), a kick from an
/// application call, the device's descriptor turning readable or the link's signal, or (for a
/// device that can announce nothing) the idle wait.
/// How long after its last useful poll the driver keeps polling (yielding to the other tasks
/// between polls) before it sleeps: Linux's recommended socket busy-poll time ("Recommended
/// value is 50" microseconds, Documentation/networking/ip-sysctl.rst `busy_poll`), the same
/// budget as netfold-rt's driver. A frame or a kick that comes within it costs no sleep and
/// no wake-up through the runtime. Measured with `examples/pipe_bench.rs` (1 GiB, 64 KiB
/// messages, AMD EPYC, loaded machine, 3 runs each): 21.7-25.1 Gbit/s without, 26.3-28.5 with.
const BUSY_POLL: StdDuration = StdDuration::from_micros(50);

/// How long a stopping driver goes on after it reset connections: a RST that does not land
/// exactly on the peer's RCV.NXT (data of ours still in flight) draws a challenge ACK (RFC
/// 5961 §3.2), which the stack, the connection gone, answers with a RST at the ACK's number
/// (RFC 9293 §3.10.7.1) that the peer accepts. One round trip is needed; 200 ms covers a
/// continental one.
pub(crate) const RESET_GRACE: StdDuration = StdDuration::from_millis(200);

async fn run(wake: Wake) {
    let Wake {
        ref fd,
        ref signal,
        idle_wait,
        ref shared,
    } = wake;
    let mut last_work = std::time::Instant::now();
    // When a draining stop ended the connections left: until when the driver goes on.
    let mut aborted: Option<std::time::Instant> = None;
    loop {
        let stopping = shared.stopped().is_err();
        if stopping {
            let mut g = shared.lock();
            g.wakers.wake_all();
            let until = *shared.drain_until.lock().unwrap_or_else(|p| p.into_inner());
            let t = std::time::Instant::now();
            match aborted {
                None => {
                    let draining =
                        until.is_some_and(|d| t < d) && g.stack.tcp().orphans_sending() > 0;
                    if !draining {
                        let ended = if until.is_some() {
                            g.stack.tcp_mut().abort_all()
                        } else {
                            0
                        };
                        shared.ended.store(ended, Ordering::Release);
                        aborted = Some(
                            t + if ended > 0 {
                                RESET_GRACE
                            } else {
                                StdDuration::ZERO
                            },
                        );
                    }
                }
                Some(end) if t >= end => {
                    // The RSTs (and the answers to challenge ACKs) leave with a last poll.
                    g.poll(shared.now());
                    return;
                }
                Some(_) => {}
            }
        }
        let next = {
            let mut g = shared.lock();
            let now = shared.now();
            let st = &mut *g;
            let worked = st.poll(now);
            st.wakers.wake_ready(&mut st.stack);
            if worked {
                None
            } else {
                Some(
                    [st.stack.poll_at(now), st.device.poll_at()]
                        .into_iter()
                        .flatten()
                        .min(),
                )
            }
        };
        let Some(deadline) = next else {
            last_work = std::time::Instant::now();
            // More may be waiting (a full batch, queued output): let the woken tasks run,
            // then poll again.
            tokio::task::yield_now().await;
            continue;
        };
        let now = shared.now();
        if deadline.is_some_and(|d| d <= now) {
            tokio::task::yield_now().await;
            continue;
        }
        if last_work.elapsed() < BUSY_POLL {
            tokio::task::yield_now().await;
            continue;
        }
        let mut sleep_until = deadline.map(|d| shared.to_tokio(d));
        if stopping {
            // Draining: look at the closed connections' progress at least every 10 ms.
            let cap = tokio::time::Instant::now() + StdDuration::from_millis(10);
            sleep_until = Some(sleep_until.map_or(cap, |d| d.min(cap)));
        }
        if let Some(idle) = idle_wait {
            let cap = tokio::time::Instant::now() + idle;
            sleep_until = Some(sleep_until.map_or(cap, |d| d.min(cap)));
        }
        let mut kick = pin!(shared.kick.notified());
        let mut signalled = pin!(signal.as_ref().map(|s| s.notified()));
        let mut sleep = pin!(sleep_until.map(tokio::time::sleep_until));
        poll_fn(|cx| {
            let mut ready = kick.as_mut().poll(cx).is_ready();
            if let Some(s) = signalled.as_mut().as_pin_mut() {
                ready |= s.poll(cx).is_ready();
            }
            if let Some(s) = sleep.as_mut().as_pin_mut() {
                ready |= s.poll(cx).is_ready();
            }
            if let Some(fd) = fd {
                match fd.poll_read_ready(cx) {
                    Poll::Ready(Ok(mut guard)) => {
                        // Cleared before the poll that drains the device: a frame arriving
                        // after this raises a new edge, so none is slept through.
                        guard.clear_ready();
                        ready = true;
                    }
                    Poll::Ready(Err(_)) => ready = true,
                    Poll::Pending => {}
                }
            }
            if ready {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

impl Shared {
    /// One attempt at a socket call from a task: `op` runs under the lock; on `WouldBlock`
    /// the task's waker is registered (`register`, same lock) and the call is pending until
    /// the stack makes that socket ready. `kick` decides, from the result, whether the driver
    /// must act on what the call changed.
    pub(crate) fn poll_op<T>(
        &self,
        cx: &mut std::task::Context<'_>,
        op: impl FnOnce(&mut Stack) -> io::Result<T>,
        register: impl FnOnce(&mut Wakers, &std::task::Waker),
        kick: impl FnOnce(&T) -> bool,
    ) -> Poll<io::Result<T>> {
        let mut g = self.lock();
        match op(&mut g.stack) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Checked under the lock the driver takes to wake everyone when it stops.
                if let Err(e) = self.stopped() {
                    return Poll::Ready(Err(e));
                }
                register(&mut g.wakers, cx.waker());
                Poll::Pending
            }
            Ok(v) => {
                drop(g);
                if kick(&v) {
                    self.kick();
                }
                Poll::Ready(Ok(v))
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}
