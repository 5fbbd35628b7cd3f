//! Shards for C (`nf_shards_*`): N stacks of one host, each a REAL-clock engine
//! (the same as an `nf_stack`'s: lock, descriptor table, driver thread) over one queue of a
//! multi-queue device, its driver optionally pinned to a CPU, and application threads started
//! on a shard (`nf_shards_run_on`) pinned beside it.
//!
//! The model is `netfold_rt::shards` (see there and docs/SCALING.md), rebuilt on the C API's
//! engine rather than wrapping `netfold_rt::Shards`: a blocking `Runtime` keeps no descriptor
//! table, and an `nf_stack` view of a shard (`nf_shards_stack`) has to be a whole C stack so
//! that every `nf_*` call works on it. What is shared with the Rust side is everything that
//! does not depend on threads, [`netfold_core::shard::Sharding`]: the steering, the port
//! search, the placement and the current-shard key (`nf_current_shard`), over the ephemeral
//! range ([`netfold_rt::shards::EPHEMERAL`]).
//!
//! - Listening: [`Shards::listen`] opens one listening socket per shard on the same address
//!   (`SO_REUSEPORT`-like); shard `k` accepts the connections whose SYN its queue received.
//! - Connecting: [`Shards::connect_on`] binds the socket to a local port whose 4-tuple hashes
//!   to shard `k` both ways before connecting, so the replies come back to shard `k` and a
//!   sharded peer (steering by the same key) accepts it on its shard `k`. On a multi-queue
//!   TAP ([`Shards::tap`]) the queues' eBPF program steers by the same hash, so the same
//!   search applies; under the kernel's automq fallback the kernel sends a flow's frames to
//!   the queue it last came from, so any port steers; shard `k` takes ports with
//!   `port % n == k` (one address, disjoint ports).
//! - Accepting across shards: [`Listener::accept_any`] sleeps on a [`Bell`] every shard's
//!   driver rings after a poll that did work, since one thread cannot sleep on N engines'
//!   condition variables.

use crate::device::InjectDevice;
use crate::engine::{self, Bell, Clock, Engine, MAX_SLEEP};
use crate::errno::R;
use crate::fd::{Kind, Tcp};
use crate::ops;
use netfold_core::iface::{Stack, StackConfig};
use netfold_core::phy::mq::{mq_link, MqPort};
use netfold_core::phy::pipe::PipeConfig;
use netfold_core::phy::{Device, DeviceCaps, Medium};
use netfold_core::rss::{Rss, MICROSOFT_KEY};
use netfold_core::shard::{current, AcceptOrder, FrontEnd, Placement, Sharding, Steering};
use netfold_os::clock::Epoch;
use netfold_os::mqtap;
use netfold_os::tap::TapConfig;
use netfold_rt::shards::EPHEMERAL;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration as StdDuration, Instant as StdInstant};

/// Most shards one `nf_shards` may have: the RSS indirection table's entries
/// ([`netfold_core::rss::INDIRECTION_ENTRIES`]); beyond, some shard would get no flows.
pub(crate) const MAX_SHARDS: usize = netfold_core::rss::INDIRECTION_ENTRIES;

/// The C API's shards, for [`current_shard`].
const FRONT_END: FrontEnd = FrontEnd("netfold-ffi");

/// The calling thread's shard, if [`Shards::run_on`] started it (`nf_current_shard`).
pub(crate) fn current_shard() -> Option<usize> {
    current::current_shard(FRONT_END)
}

/// One host's shards.
pub(crate) struct Shards {
    engines: Vec<Arc<Engine>>,
    /// The driver threads, joined by [`Shards::shutdown`].
    drivers: Mutex<Vec<JoinHandle<()>>>,
    /// The steering ([`Steering::Rss`] for an in-memory link or a multi-queue TAP with its
    /// eBPF steering program, [`Steering::FollowTx`] on a TAP under the kernel's automq), the
    /// port search, the placement (shard `k` on CPU `k`, modulo the CPUs online, when
    /// pinned) and the current-shard key.
    sharding: Sharding,
    bell: Arc<Bell>,
    /// `run_on` callbacks still running: `nf_shards_free` refuses (EBUSY) while any is, since
    /// they use the shards' `nf_stack` views.
    running: Arc<AtomicUsize>,
}

impl Shards {
    /// Two hosts of `n` shards each (configurations `a` and `b`, the same address on every
    /// shard of a host) joined by an in-memory multi-queue link steered by one RSS key:
    /// what a pair of multi-queue NICs with RSS does. REAL clock, one epoch for both hosts
    /// (the link's frames carry the sender's time, so the two must read one clock).
    pub(crate) fn pair(
        a: StackConfig,
        b: StackConfig,
        n: usize,
        pinned: bool,
    ) -> R<(Shards, Shards)> {
        if n == 0 || n > MAX_SHARDS || a.medium != Medium::Ethernet || b.medium != a.medium {
            return Err(libc::EINVAL);
        }
        let rss = Arc::new(Rss::new(MICROSOFT_KEY, n));
        // Each stack keeps its own MTU (it takes the smaller of its own and the link's).
        let link = PipeConfig::default().mtu(a.mtu.max(b.mtu));
        let (pa, pb) = mq_link(link, Arc::clone(&rss));
        let epoch = Epoch::now();
        let boxed = |ports: Vec<MqPort>| -> Vec<Box<dyn Device + Send>> {
            ports
                .into_iter()
                .map(|p| Box::new(p) as Box<dyn Device + Send>)
                .collect()
        };
        let a = Shards::start(a, boxed(pa), Steering::Rss(Arc::clone(&rss)), epoch, pinned)?;
        let b = Shards::start(b, boxed(pb), Steering::Rss(rss), epoch, pinned)?;
        Ok((a, b))
    }

    /// One host of `n` shards over the `n` queues of multi-queue TAP `name`
    /// ([`netfold_os::mqtap`]: the queues share ARP and NDP frames). The TAP is opened without
    /// offloads, as `nf_config.device` "tap:NAME" is; `mtu`: the configured IP MTU (`None`:
    /// the interface's). Open errors keep the kernel's errno.
    pub(crate) fn tap(
        cfg: StackConfig,
        name: &str,
        n: usize,
        mtu: Option<usize>,
        pinned: bool,
    ) -> R<Shards> {
        if n == 0 || n > MAX_SHARDS || cfg.medium != Medium::Ethernet {
            return Err(libc::EINVAL);
        }
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(libc::EINVAL);
        }
        let tap = TapConfig {
            offloads: false,
            gro: false,
            mtu,
            ..TapConfig::default()
        };
        let queues =
            mqtap::open_queues(name, n, tap).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        let mut cfg = cfg;
        cfg.mtu = cfg.mtu.min(queues[0].tap().mtu());
        // The queues' eBPF Toeplitz steering, if in force: connect picks ports by its table.
        let steering = queues[0].steering().for_shards();
        let devices = queues
            .into_iter()
            .map(|q| Box::new(q) as Box<dyn Device + Send>)
            .collect();
        Shards::start(cfg, devices, steering, Epoch::now(), pinned)
    }

    /// One host of `n` shards on AF_XDP queues `0..n` of `ifname`
    /// ([`netfold_os::xdpmq::open_queues`]), redirecting the frames for the stack's addresses
    /// (or with `all` every frame). Which queue a frame arrives on is the sender's and the
    /// driver's choice, so the queues steer each frame to the queue of its 4-tuple's hash in
    /// software and the shards steer by the same table
    /// ([`netfold_os::xdpmq::XdpQueue::steering`]).
    pub(crate) fn xdp(
        cfg: StackConfig,
        ifname: &str,
        all: bool,
        n: usize,
        mtu: Option<usize>,
        pinned: bool,
    ) -> R<Shards> {
        if n == 0 || n > MAX_SHARDS || cfg.medium != Medium::Ethernet {
            return Err(libc::EINVAL);
        }
        let local = netfold_os::link::stack_addrs(&cfg);
        let base = if all {
            netfold_os::xdp::XdpConfig::all()
        } else {
            netfold_os::xdp::XdpConfig::local(&local)
        };
        let xcfg = netfold_os::xdp::XdpConfig { mtu, ..base };
        let queues = netfold_os::xdpmq::open_queues(ifname, n as u32, xcfg)
            .map_err(crate::device::xdp_errno)?;
        let mut cfg = cfg;
        cfg.mtu = cfg.mtu.min(queues[0].socket().mtu());
        let steering = queues[0].steering();
        let devices = queues
            .into_iter()
            .map(|q| Box::new(q) as Box<dyn Device + Send>)
            .collect();
        Shards::start(cfg, devices, steering, Epoch::now(), pinned)
    }

    fn start(
        cfg: StackConfig,
        devices: Vec<Box<dyn Device + Send>>,
        steering: Steering,
        epoch: Epoch,
        pinned: bool,
    ) -> R<Shards> {
        let bell = Arc::new(Bell::default());
        let caps = DeviceCaps {
            medium: cfg.medium,
            mtu: cfg.mtu,
            ..DeviceCaps::default()
        };
        let engines: Vec<Arc<Engine>> = devices
            .into_iter()
            .map(|d| {
                let dev = InjectDevice::new(caps, Some(d));
                let e = Engine::new(Stack::new(cfg.clone()), dev, Clock::Real(epoch));
                e.lock().bell = Some(Arc::clone(&bell));
                Arc::new(e)
            })
            .collect();
        let n = engines.len();
        let placement = if pinned {
            Placement::one_per_shard(n)
        } else {
            Placement::unpinned()
        };
        let shards = Shards {
            drivers: Mutex::new(Vec::with_capacity(n)),
            sharding: Sharding::new(FRONT_END, n, steering, placement, EPHEMERAL),
            engines,
            bell,
            running: Arc::new(AtomicUsize::new(0)),
        };
        for (k, e) in shards.engines.iter().enumerate() {
            // On failure `shards` is dropped: the drivers started so far are stopped.
            let t = engine::spawn_shard_driver(e, k, shards.cpu(k)).map_err(|_| libc::EAGAIN)?;
            shards.lock_drivers().push(t);
        }
        Ok(shards)
    }

    fn lock_drivers(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.drivers.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn len(&self) -> usize {
        self.engines.len()
    }

    pub(crate) fn engine(&self, k: usize) -> R<&Arc<Engine>> {
        self.engines.get(k).ok_or(libc::EINVAL)
    }

    fn cpu(&self, k: usize) -> Option<usize> {
        self.sharding.cpu(k)
    }

    /// Starts a thread for shard `k`'s application work: pinned to the shard's CPU (when the
    /// shards are pinned), with [`current_shard`] = `k`, running `f`.
    pub(crate) fn run_on<T: Send + 'static>(
        &self,
        k: usize,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> R<JoinHandle<T>> {
        self.engine(k)?;
        /// Counts the callback as finished however it ends (a panic included).
        struct Running(Arc<AtomicUsize>);
        impl Drop for Running {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.running.fetch_add(1, Ordering::AcqRel);
        let running = Running(Arc::clone(&self.running));
        let (cpu, key) = (self.cpu(k), self.sharding.key(k));
        std::thread::Builder::new()
            .name(format!("netfold-ffi-shard-app-{k}"))
            .spawn(move || {
                let _running = running;
                if let Some(cpu) = cpu {
                    netfold_os::cpu::pin_current_thread(cpu);
                }
                key.enter();
                f()
            })
            // The closure (and `running` with it) was dropped: the count is back.
            .map_err(|_| libc::EAGAIN)
    }

    /// Connects TCP socket `fd` of shard `k` to `remote` (as `nf_connect`: blocking or not
    /// per the descriptor) from a local port whose 4-tuple hashes to shard `k` in both
    /// directions. Ports another socket of the shard has bound (EADDRINUSE from bind) or whose
    /// 4-tuple is taken (a connection in TIME-WAIT: EADDRINUSE from connect) are skipped;
    /// EADDRNOTAVAIL when no port of the ephemeral range is left. A socket that is already
    /// bound, or not an idle TCP socket, is connected as it is (`nf_connect`): the
    /// application chose its port.
    pub(crate) fn connect_on(&self, k: usize, fd: i32, remote: SocketAddr) -> R<()> {
        let e = self.engine(k)?;
        let (family, local) = {
            let mut g = e.lock();
            let s = g.fds.get(fd)?;
            if !matches!(s.kind, Kind::Tcp(Tcp::Idle)) || s.bound.is_some() {
                drop(g);
                return ops::connect(e, fd, remote);
            }
            let family = s.family;
            // The stack's source address for `remote`. If it has none (no address of that
            // family), nf_connect's own checks report it with the errno they always do.
            match g.stack.tcp_local_for(remote) {
                Ok(l) => (family, l),
                Err(_) => {
                    drop(g);
                    return ops::connect(e, fd, remote);
                }
            }
        };
        // RSS (also a TAP with the eBPF steering): a port whose 4-tuple hashes to k. A TAP
        // under automq: any port steers (the SYN leaves on queue k), but shards share one
        // address, so shard k takes only ports % n == k.
        for port in self.sharding.local_ports(k, remote, || R::Ok(local))? {
            match ops::bind(e, fd, ops::any_of(family, port)) {
                Err(libc::EADDRINUSE) => continue,
                Err(err) => return Err(err),
                Ok(()) => {}
            }
            match ops::connect(e, fd, remote) {
                Err(libc::EADDRINUSE) => ops::unbind(e, fd)?,
                r => return r,
            }
        }
        Err(libc::EADDRNOTAVAIL)
    }

    /// Listens on `local` on every shard: one TCP socket per shard, bound to the same
    /// address (`SO_REUSEPORT`-like). All or nothing: on a failure the sockets made are closed.
    pub(crate) fn listen(&self, local: SocketAddr, backlog: i32) -> R<Listener> {
        let family = match local {
            SocketAddr::V4(_) => libc::AF_INET,
            SocketAddr::V6(_) => libc::AF_INET6,
        };
        let mut fds = Vec::with_capacity(self.len());
        for e in &self.engines {
            let r = ops::socket(e, family, libc::SOCK_STREAM, 0).and_then(|fd| {
                let r = ops::bind(e, fd, local).and_then(|()| ops::listen(e, fd, backlog));
                match r {
                    Ok(()) => Ok(fd),
                    Err(err) => {
                        let _ = ops::close(e, fd);
                        Err(err)
                    }
                }
            });
            match r {
                Ok(fd) => fds.push(fd),
                Err(err) => {
                    for (e, &fd) in self.engines.iter().zip(&fds) {
                        let _ = ops::close(e, fd);
                    }
                    return Err(err);
                }
            }
        }
        Ok(Listener {
            engines: self.engines.clone(),
            fds,
            bell: Arc::clone(&self.bell),
            next: AcceptOrder::new(),
        })
    }

    /// Whether a `run_on` callback is still running.
    pub(crate) fn busy(&self) -> bool {
        self.running.load(Ordering::Acquire) > 0
    }

    /// Stops every driver, closes every descriptor and wakes every waiter (their calls, and
    /// later calls through a listener, fail with EBADF). Idempotent.
    pub(crate) fn shutdown(&self) {
        // Closing loses nothing (as `nf_stack_free`): every shard lets its closed connections
        // finish, all at once, within one bound.
        std::thread::scope(|sc| {
            for e in &self.engines {
                sc.spawn(move || e.drain(crate::api::STACK_DRAIN));
            }
        });
        for e in &self.engines {
            e.stop();
        }
        // An accept_any asleep on the bell looks again, and finds the engines stopped.
        self.bell.ring();
        for t in self.lock_drivers().drain(..) {
            let _ = t.join();
        }
        for e in &self.engines {
            let mut g = e.lock();
            let st = &mut *g;
            for sock in st.fds.drain() {
                ops::release(&mut st.stack, sock);
            }
        }
    }
}

impl Drop for Shards {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A listening socket on every shard ([`Shards::listen`]).
pub(crate) struct Listener {
    engines: Vec<Arc<Engine>>,
    fds: Vec<i32>,
    bell: Arc<Bell>,
    /// Where the next `accept_any` starts looking: each call starts at the next shard, so a
    /// busy shard does not hide the others.
    next: AcceptOrder,
}

impl Listener {
    /// Shard `k`'s listening descriptor (valid with shard `k`'s `nf_stack` view).
    pub(crate) fn fd(&self, k: usize) -> R<i32> {
        self.fds.get(k).copied().ok_or(libc::EINVAL)
    }

    /// Shard `k`'s next connection (as `nf_accept` on its descriptor: blocking unless the
    /// descriptor is O_NONBLOCK, SO_RCVTIMEO honoured). The descriptor returned is shard
    /// `k`'s.
    pub(crate) fn accept_on(&self, k: usize) -> R<(i32, SocketAddr)> {
        let e = self.engines.get(k).ok_or(libc::EINVAL)?;
        ops::accept(e, self.fds[k])
    }

    /// The next connection on any shard: (shard, descriptor, peer). `timeout` `None` waits
    /// for ever, zero not at all; EAGAIN when it passes.
    pub(crate) fn accept_any(&self, timeout: Option<StdDuration>) -> R<(usize, i32, SocketAddr)> {
        let deadline = timeout.map(|t| StdInstant::now() + t);
        let n = self.engines.len();
        let first = self.next.first();
        // Registered before the first look (see `Bell::listen`).
        let waiter = self.bell.listen();
        loop {
            let seen = waiter.generation();
            for i in 0..n {
                let k = (first + i) % n;
                match ops::accept_opt(&self.engines[k], self.fds[k], true) {
                    Ok((fd, peer)) => return Ok((k, fd, peer)),
                    Err(libc::EAGAIN) => {}
                    Err(err) => return Err(err),
                }
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(StdInstant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return Err(libc::EAGAIN),
                },
                None => MAX_SLEEP,
            };
            // MAX_SLEEP: the same safety net as every REAL-clock wait of the C API.
            waiter.wait(seen, left.min(MAX_SLEEP));
        }
    }

    /// Closes a connection accepted on shard `k` (its peer address could not be stored).
    pub(crate) fn close_accepted(&self, k: usize, fd: i32) -> R<()> {
        ops::close(self.engines.get(k).ok_or(libc::EINVAL)?, fd)
    }

    /// Closes every shard's listening socket.
    pub(crate) fn close(&self) {
        for (e, &fd) in self.engines.iter().zip(&self.fds) {
            let _ = ops::close(e, fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netfold_core::wire::ethernet::EthernetAddress;
    use netfold_core::wire::Ipv4Addr;

    fn host(last: u8) -> StackConfig {
        StackConfig {
            addr: Ipv4Addr::new(198, 18, 0, last),
            mac: EthernetAddress([2, 0, 0, 0, 0, last]),
            ..StackConfig::default()
        }
    }

    /// The shard drivers over the in-memory link arm its wake-up and sleep until frames come
    /// (or the 100 ms safety net), instead of waking every millisecond to look: counted, not
    /// timed. Over 300 ms idle a driver polling on a 1 ms timer sleeps ~300 times; an armed
    /// one a handful (back-off sleeps after the start, then one per safety-net period).
    #[test]
    fn idle_shard_drivers_sleep_until_woken() {
        let (a, b) = Shards::pair(host(1), host(2), 2, false).unwrap();
        std::thread::sleep(StdDuration::from_millis(50));
        let sleeps = |s: &Shards| -> Vec<u64> {
            (0..s.len())
                .map(|k| s.engine(k).unwrap().driver_sleeps())
                .collect()
        };
        let (a0, b0) = (sleeps(&a), sleeps(&b));
        std::thread::sleep(StdDuration::from_millis(300));
        let (a1, b1) = (sleeps(&a), sleeps(&b));
        for (before, after) in [(a0, a1), (b0, b1)] {
            for (x, y) in before.iter().zip(&after) {
                assert!(
                    y - x <= 20,
                    "an idle shard driver slept {} times in 300 ms",
                    y - x
                );
            }
        }
    }
}
