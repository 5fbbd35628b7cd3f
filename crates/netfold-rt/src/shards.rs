//! Shards: N blocking runtimes, each one stack (its own buffer pool, timers and
//! connection table) over one device queue, its driver thread optionally pinned to a CPU, and
//! the application work of its connections on threads pinned beside it.
//!
//! This is the design of Seastar, mTCP and F-Stack, and Linux's own with RSS and
//! `SO_REUSEPORT`: nothing on the data path is shared between shards, because both
//! directions of a connection are steered to one shard.
//! - Inbound, the device steers: a NIC's RSS hashes a frame's 4-tuple (Toeplitz) and an
//!   indirection table maps the hash to a queue; the in-memory [`netfold::phy::mq`] link does
//!   the same ([`netfold::rss::Rss`]). A multi-queue TAP does not hash like that: the kernel
//!   sends a flow's frames on the queue it last received the flow from, see
//!   [`Steering::FollowTx`] and [`Shards::start_tap`].
//! - Listening: [`Shards::listen`] binds the same address on every shard (Linux
//!   `SO_REUSEPORT`, where each socket of the group gets the flows the hash gives it), and a
//!   connection is accepted on the shard whose queue received its SYN.
//! - Connecting: [`Shards::connect`] runs on the calling thread's shard (one started by
//!   [`Shards::spawn_on`]) or round-robin, and picks a local port whose RSS hash lands on that
//!   shard ([`netfold::rss::Rss::local_ports`]), so the peer's replies come back to it.
//!
//! Placement: [`ShardConfig::cpus`] pins shard `k`'s driver to a CPU, and [`Shards::spawn_on`]
//! starts application threads pinned to the same one: protocol and application work of a
//! connection on one core, what `netfold stream|rr|crr --shards N --affinity same` measures
//! (`split` puts the application on another core, `none` pins nothing).
//!
//! What does not depend on threads (steering, the port choice, placement, which shard the
//! calling thread is) is the core's [`netfold::shard`], which the tokio adapter and the C API
//! use too; this module adds the threads: a [`Runtime`] per shard ([`Shards::shard`]) and
//! [`Shards::spawn_on`]. [`Shards::pick_shard`] and [`Shards::connect_on`] are the shard
//! choice and the port choice.
//!
//! ```
//! use netfold::iface::StackConfig;
//! use netfold::phy::mq::mq_link;
//! use netfold::phy::pipe::PipeConfig;
//! use netfold::phy::Device;
//! use netfold::rss::{Rss, MICROSOFT_KEY};
//! use netfold::wire::{ethernet::EthernetAddress, Ipv4Addr};
//! use netfold_rt::shards::{ShardConfig, Shards};
//! use std::io::{Read, Write};
//! use std::net::SocketAddrV4;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! // Two sharded hosts joined by a two-queue in-memory link, steered by one RSS key.
//! let rss = Arc::new(Rss::new(MICROSOFT_KEY, 2));
//! let (a, b) = mq_link(PipeConfig::default(), Arc::clone(&rss));
//! let devices = |ports: Vec<_>| -> Vec<Box<dyn Device + Send>> {
//!     ports.into_iter().map(|p| Box::new(p) as Box<dyn Device + Send>).collect()
//! };
//! let host = |last: u8| StackConfig {
//!     addr: Ipv4Addr::new(198, 18, 0, last),
//!     mac: EthernetAddress([2, 0, 0, 0, 0, last]),
//!     ..StackConfig::default()
//! };
//! let config = ShardConfig::rss(Arc::clone(&rss));
//! let client = Shards::start(host(1), devices(a), config.clone())?;
//! let server = Shards::start(host(2), devices(b), config)?;
//!
//! let addr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7);
//! let listener = Arc::new(server.listen(addr, 8, Default::default())?);
//! // One echo worker per server shard, accepting that shard's own connections.
//! let workers: Vec<_> = (0..server.len())
//!     .map(|k| {
//!         let l = Arc::clone(&listener);
//!         server.spawn_on(k, move |_rt| -> std::io::Result<usize> {
//!             let (mut s, _) = l.accept_on(k)?;
//!             let mut buf = [0u8; 5];
//!             s.read_exact(&mut buf)?;
//!             s.write_all(&buf)?;
//!             Ok(k)
//!         })
//!     })
//!     .collect::<Result<_, _>>()?;
//! // A client thread on each client shard: its connection stays on that shard end to end.
//! for k in 0..client.len() {
//!     let c = client.clone();
//!     let t = client.spawn_on(k, move |_rt| -> std::io::Result<()> {
//!         let (shard, mut s) = c.connect(addr, Default::default(), Some(Duration::from_secs(5)))?;
//!         assert_eq!(shard, k);
//!         s.write_all(b"hello")?;
//!         let mut back = [0u8; 5];
//!         s.read_exact(&mut back)?;
//!         assert_eq!(&back, b"hello");
//!         Ok(())
//!     })?;
//!     t.join().unwrap()?;
//! }
//! for (k, w) in workers.into_iter().enumerate() {
//!     assert_eq!(w.join().unwrap()?, k);
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

use crate::blocking::{Runtime, TcpListener, TcpStream};
use netfold::iface::{Stack, StackConfig};
use netfold::phy::Device;
use netfold::rss::Rss;
use netfold::shard::{current, AcceptOrder, FrontEnd, Placement, Sharding};
use netfold::tcp;
use std::io;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

pub use netfold::rss::own_ports;
/// How the devices steer received frames to shards ([`Steering::Rss`]: by the hash, `connect`
/// picks ports for it; [`Steering::FollowTx`]: a multi-queue TAP under the kernel's automq,
/// see [`Shards::start_tap`]).
pub use netfold::shard::Steering;

/// The ephemeral port range (RFC 6335 §6: 49152-65535) `connect` searches for a port on the
/// shard, by default.
pub const EPHEMERAL: RangeInclusive<u16> = netfold::wire::EPHEMERAL_PORTS;

/// The blocking runtime's shards, for [`current_shard`].
const FRONT_END: FrontEnd = FrontEnd("netfold-rt");

/// How [`Shards::start`] runs its shards.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// Shard `k`'s driver thread and its [`Shards::spawn_on`] threads run on CPU
    /// `cpus[k % cpus.len()]` (modulo the CPUs online); empty: nothing is pinned.
    pub cpus: Vec<usize>,
    pub steering: Steering,
    /// Where `connect` looks for a local port.
    pub ports: RangeInclusive<u16>,
    /// Each driver's longest sleep when its device cannot wake it ([`Runtime::start`]).
    pub idle_wait: StdDuration,
}

impl ShardConfig {
    /// Steered by `rss`, shard `k` pinned to CPU `k`.
    pub fn rss(rss: Arc<Rss>) -> ShardConfig {
        ShardConfig {
            cpus: (0..rss.shards()).collect(),
            steering: Steering::Rss(rss),
            ports: EPHEMERAL,
            idle_wait: StdDuration::from_millis(1),
        }
    }

    /// For the queues of a multi-queue TAP ([`Steering::FollowTx`]), shard `k` pinned to
    /// CPU `k`.
    pub fn tap(shards: usize) -> ShardConfig {
        ShardConfig {
            cpus: (0..shards).collect(),
            steering: Steering::FollowTx,
            ports: EPHEMERAL,
            idle_wait: StdDuration::from_millis(1),
        }
    }

    /// The same with nothing pinned (tests, machines shared with other work).
    pub fn unpinned(mut self) -> ShardConfig {
        self.cpus.clear();
        self
    }
}

/// The shard index of the calling thread if one of any [`Shards`]' [`Shards::spawn_on`]
/// started it ([`Shards::current`] says whether it is one of a given `Shards`).
pub fn current_shard() -> Option<usize> {
    current::current_shard(FRONT_END)
}

/// What the clones of one [`Shards`] share.
struct Inner {
    runtimes: Vec<Runtime>,
    /// The steering in force, the port search, the placement and the current-shard key.
    sharding: Sharding,
}

/// N shards: N [`Runtime`]s, one per device queue. Cheap to clone (one reference count), so
/// application threads can each hold one.
#[derive(Clone)]
pub struct Shards {
    inner: Arc<Inner>,
}

impl Shards {
    /// Starts one shard per device, each with a [`Stack`] of `stack` (the same address and
    /// MAC on every shard, as queues of one interface have).
    pub fn start(
        stack: StackConfig,
        devices: Vec<Box<dyn Device + Send>>,
        config: ShardConfig,
    ) -> io::Result<Shards> {
        let stacks = devices.iter().map(|_| Stack::new(stack.clone())).collect();
        Shards::start_stacks(stacks, devices, config)
    }

    /// Starts `n` shards over the `n` queues of multi-queue TAP `name` (`IFF_MULTI_QUEUE`;
    /// "nf%d" lets the kernel pick the number; an existing TAP must be `multi_queue`), shard
    /// `k` on queue `k` ([`netfold_os::mqtap::open_queues`]: the queues share ARP and NDP
    /// frames, since the kernel delivers those on any queue). `config` must be
    /// [`ShardConfig::tap`] ([`Steering::FollowTx`]): the queues decide the steering
    /// ([`netfold_os::mqtap::TapQueue::steering`]; [`Shards::steering`] tells which is in
    /// force):
    /// - the eBPF Toeplitz program: the kernel's frames go to the queue of their 4-tuple's
    ///   RSS hash, so the shards steer [`Steering::Rss`] with the queues' table, and
    ///   [`Shards::connect`] from shard `k` picks a port whose 4-tuple hashes to `k`;
    /// - the fallback, the kernel's automq ([`Steering::FollowTx`]): a connection the kernel
    ///   opens is accepted on the shard whose queue its SYN's flow hash picked, and
    ///   [`Shards::connect`] from shard `k` takes any of its own ports: its SYN goes out on
    ///   queue `k`, the kernel records the flow there, and its replies come back to queue `k`
    ///   (until the flow idles past 3 s, see docs/SCALING.md).
    pub fn start_tap(
        name: &str,
        n: usize,
        stack: StackConfig,
        tap: netfold_os::tap::TapConfig,
        config: ShardConfig,
    ) -> io::Result<Shards> {
        Shards::start_tap_queues(stack, netfold_os::mqtap::open_queues(name, n, tap)?, config)
    }

    /// [`Shards::start_tap`] over queues opened beforehand (e.g. to
    /// [`record their flows`](netfold_os::mqtap::TapQueue::record_flows) first).
    pub fn start_tap_queues(
        stack: StackConfig,
        queues: Vec<netfold_os::mqtap::TapQueue>,
        config: ShardConfig,
    ) -> io::Result<Shards> {
        if !matches!(config.steering, Steering::FollowTx) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a multi-queue TAP's queues decide the steering: use ShardConfig::tap",
            ));
        }
        let mut config = config;
        // The queues decide: their eBPF Toeplitz program's table, or automq's FollowTx.
        if let Some(q) = queues.first() {
            config.steering = q.steering().for_shards();
        }
        let devices = queues
            .into_iter()
            .map(|q| Box::new(q) as Box<dyn Device + Send>)
            .collect();
        Shards::start(stack, devices, config)
    }

    /// Starts one shard per AF_XDP queue of one interface ([`netfold_os::xdpmq::open_queues`]:
    /// a socket per queue behind one XDP program, the queues sharing ARP and NDP frames),
    /// shard `k` on `queues[k]`. The queue a frame arrives on is the sender's choice, and a
    /// veth peer changes it mid-connection, so the queues steer in software: each hands a
    /// frame to the queue of its 4-tuple's Toeplitz hash, as Linux's receive packet steering
    /// does ([`netfold_os::xdpmq::XdpQueue::steering`]). `config` must be
    /// [`ShardConfig::tap`]: the queues decide the steering, [`Steering::Rss`] with their
    /// table (so [`Shards::connect`] from shard `k` picks a port whose 4-tuple hashes to `k`),
    /// or nothing to steer with one queue.
    pub fn start_xdp_queues(
        stack: StackConfig,
        queues: Vec<netfold_os::xdpmq::XdpQueue>,
        config: ShardConfig,
    ) -> io::Result<Shards> {
        if !matches!(config.steering, Steering::FollowTx) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "AF_XDP queues decide the steering: use ShardConfig::tap",
            ));
        }
        let mut config = config;
        if let Some(q) = queues.first() {
            config.steering = q.steering();
        }
        let devices = queues
            .into_iter()
            .map(|q| Box::new(q) as Box<dyn Device + Send>)
            .collect();
        Shards::start(stack, devices, config)
    }

    /// Starts one shard per (stack, device) pair, for stacks prepared beforehand (services
    /// bound, counters read later through [`Shards::shard`]).
    pub fn start_stacks(
        stacks: Vec<Stack>,
        devices: Vec<Box<dyn Device + Send>>,
        config: ShardConfig,
    ) -> io::Result<Shards> {
        if stacks.is_empty() || stacks.len() != devices.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "shards need one device per stack, at least one ({} stacks, {} devices)",
                    stacks.len(),
                    devices.len()
                ),
            ));
        }
        if let Some(why) = config.steering.mismatch(stacks.len()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        }
        let sharding = Sharding::new(
            FRONT_END,
            stacks.len(),
            config.steering.clone(),
            Placement::on(&config.cpus),
            config.ports.clone(),
        );
        let runtimes = stacks
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(k, (s, d))| Runtime::start_on(s, d, config.idle_wait, sharding.cpu(k)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Shards {
            inner: Arc::new(Inner { runtimes, sharding }),
        })
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.inner.runtimes.len()
    }

    /// Always false: there is at least one shard.
    pub fn is_empty(&self) -> bool {
        self.inner.runtimes.is_empty()
    }

    /// Shard `k`'s runtime: the whole blocking API on that shard's stack. Panics if `k` is out
    /// of range.
    pub fn shard(&self, k: usize) -> &Runtime {
        &self.inner.runtimes[k]
    }

    /// The CPU shard `k` is pinned to, if any.
    pub fn cpu(&self, k: usize) -> Option<usize> {
        self.inner.sharding.cpu(k)
    }

    /// The calling thread's shard, if [`Shards::spawn_on`] of this `Shards` (or a clone of
    /// it) started the thread.
    pub fn current(&self) -> Option<usize> {
        self.inner.sharding.current()
    }

    /// The shard a connect from the calling thread runs on: the thread's own
    /// ([`Shards::current`]), or the next one round-robin.
    pub fn pick_shard(&self) -> usize {
        self.inner.sharding.pick_shard()
    }

    /// Starts a thread for shard `k`'s application work: pinned to the shard's CPU (if it has
    /// one), with [`Shards::current`] = `k`, running `f` with the shard's runtime. Its
    /// connects stay on shard `k`; a per-shard server worker calls
    /// [`ShardedListener::accept_on`]`(k)` in it.
    pub fn spawn_on<T: Send + 'static>(
        &self,
        k: usize,
        f: impl FnOnce(&Runtime) -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        if k >= self.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no shard {k} of {}", self.len()),
            ));
        }
        let me = self.clone();
        std::thread::Builder::new()
            .name(format!("netfold-shard-{k}"))
            .spawn(move || {
                if let Some(cpu) = me.cpu(k) {
                    netfold_os::cpu::pin_current_thread(cpu);
                }
                me.inner.sharding.enter(k);
                f(me.shard(k))
            })
    }

    /// Listens on `local` on every shard (`SO_REUSEPORT`-like: each shard accepts the
    /// connections its queue receives). `local` needs a port: the stack's listeners take no
    /// port 0 (`InvalidInput`).
    pub fn listen(
        &self,
        local: impl Into<SocketAddr>,
        backlog: usize,
        config: tcp::Config,
    ) -> io::Result<ShardedListener> {
        let local = local.into();
        let listeners = self
            .inner
            .runtimes
            .iter()
            .map(|rt| rt.listen(local, backlog, config))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(ShardedListener {
            listeners,
            next: AcceptOrder::new(),
        })
    }

    /// Connects to `remote` from the calling thread's shard (or round-robin, see
    /// [`Shards::pick_shard`]); returns the shard and the stream.
    pub fn connect(
        &self,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
        timeout: Option<StdDuration>,
    ) -> io::Result<(usize, TcpStream)> {
        let k = self.pick_shard();
        Ok((k, self.connect_on(k, remote, config, timeout)?))
    }

    /// Connects to `remote` from shard `k`, blocking until established, refused or timed
    /// out. With [`Steering::Rss`] the local port is the next one of
    /// [`ShardConfig::ports`] whose 4-tuple hashes to `k` both ways and is free (a port whose
    /// 4-tuple is taken, also by TIME-WAIT, is skipped); `AddrNotAvailable` when none is.
    /// With [`Steering::FollowTx`] (a multi-queue TAP) any port steers, since the SYN leaves
    /// on shard `k`'s queue; the port is the next free one of the range with
    /// `port % shards == k`, so that no two shards (one address) open the same 4-tuple.
    pub fn connect_on(
        &self,
        k: usize,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
        timeout: Option<StdDuration>,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        let rt =
            self.inner.runtimes.get(k).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("no shard {k}"))
            })?;
        let sharding = &self.inner.sharding;
        let local = || {
            rt.with_stack(|st| st.tcp_local_for(remote))
                .map_err(netfold::socket::io_error)
        };
        for port in sharding.local_ports(k, remote, local)? {
            match rt.connect_from(port, remote, config, timeout) {
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
                r => return r,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            sharding.no_port_left(k),
        ))
    }

    /// How the shards' devices steer (for a TAP: [`Steering::Rss`] when its eBPF program
    /// is in force, [`Steering::FollowTx`] under the kernel's automq).
    pub fn steering(&self) -> &Steering {
        self.inner.sharding.steering()
    }

    /// Stops every shard and returns their stacks (e.g. to read counters), if this is the
    /// last handle (no clone held by a thread still running); otherwise hands itself back.
    pub fn shutdown(self) -> Result<Vec<Stack>, Shards> {
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => Ok(inner.runtimes.into_iter().map(Runtime::shutdown).collect()),
            Err(inner) => Err(Shards { inner }),
        }
    }
}

/// A listener on every shard ([`Shards::listen`]).
pub struct ShardedListener {
    listeners: Vec<TcpListener>,
    /// Where the next [`ShardedListener::accept`] starts looking.
    next: AcceptOrder,
}

impl ShardedListener {
    /// Shard `k`'s listener.
    pub fn on(&self, k: usize) -> &TcpListener {
        &self.listeners[k]
    }

    /// Waits for the next connection on shard `k`: the connections whose SYN shard `k`'s
    /// queue received (the `SO_REUSEPORT` model, where each worker accepts from its own
    /// socket; Seastar's too). What a per-shard worker thread calls.
    pub fn accept_on(&self, k: usize) -> io::Result<(TcpStream, SocketAddr)> {
        self.on(k).accept()
    }

    /// Waits for the next connection on any shard: (the shard, the stream, the peer). Fair:
    /// each call starts looking at the shard after the one the previous call started at, so
    /// a busy shard does not hide the others. Parks, not spins ([`TcpListener::accept_any`]).
    /// The stream stays on its shard: its reads and writes go through that shard's runtime.
    pub fn accept(&self) -> io::Result<(usize, TcpStream, SocketAddr)> {
        self.accept_timeout_opt(None)
    }

    /// [`ShardedListener::accept`] for at most `timeout` (then `TimedOut`).
    pub fn accept_timeout(
        &self,
        timeout: StdDuration,
    ) -> io::Result<(usize, TcpStream, SocketAddr)> {
        self.accept_timeout_opt(Some(timeout))
    }

    fn accept_timeout_opt(
        &self,
        timeout: Option<StdDuration>,
    ) -> io::Result<(usize, TcpStream, SocketAddr)> {
        let all: Vec<&TcpListener> = self.listeners.iter().collect();
        let first = self.next.first();
        TcpListener::accept_any(&all, first, timeout)
    }

    /// The address every shard listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listeners[0].local_addr()
    }

    /// Number of shards listening.
    pub fn len(&self) -> usize {
        self.listeners.len()
    }

    /// Always false: a sharded listener listens on at least one shard.
    pub fn is_empty(&self) -> bool {
        self.listeners.is_empty()
    }
}
