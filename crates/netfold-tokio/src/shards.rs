//! Shards on tokio: N stacks of one host, one per device queue, each driven by a
//! [`Net`] on its own current-thread tokio runtime in its own thread (optionally pinned to a
//! CPU), where the application's tasks for that shard run too ([`Shards::run_on`]).
//!
//! The model is `netfold_rt::shards` (docs/SCALING.md): connections are steered to shards by
//! the RSS (Toeplitz) hash of their 4-tuple, so both directions of one stay on one shard and
//! nothing on the data path is shared. Steering, the port choice, placement and the
//! current-shard key are the core's [`netfold::shard`]; this module adds a thread and a
//! current-thread runtime per shard.
//! - One runtime per shard, not one multi-threaded runtime for all: a task of a
//!   multi-threaded runtime may be stolen by any worker, which is exactly the cross-core
//!   bouncing shards exist to avoid. A shard's driver task, its connections' tasks and their
//!   wakers then all stay on one thread (Seastar's and glommio's design).
//! - Listening: [`Shards::listen`] listens on every shard (`SO_REUSEPORT`-like); shard `k`
//!   gets the connections whose SYN its queue received: [`ShardedListener::accept_on`] in a
//!   task on shard `k`, or [`ShardedListener::accept`] for any shard's next one.
//! - Connecting: [`Shards::connect`] runs on the calling task's shard (or round-robin from
//!   elsewhere) from a local port whose 4-tuple hashes to that shard both ways
//!   ([`Rss::local_ports`]), so the replies come back to it.
//!
//! ```
//! use netfold::iface::StackConfig;
//! use netfold::phy::pipe::PipeConfig;
//! use netfold::rss::{Rss, MICROSOFT_KEY};
//! use netfold::wire::{ethernet::EthernetAddress, Ipv4Addr};
//! use netfold_tokio::shards::{mq_link, Shards};
//! use std::net::SocketAddrV4;
//! use std::sync::Arc;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let rss = Arc::new(Rss::new(MICROSOFT_KEY, 2));
//! let (a, b) = mq_link(PipeConfig::default(), Arc::clone(&rss));
//! let host = |last: u8| StackConfig {
//!     addr: Ipv4Addr::new(198, 18, 0, last),
//!     mac: EthernetAddress([2, 0, 0, 0, 0, last]),
//!     ..StackConfig::default()
//! };
//! let client = Shards::start(host(1), a, Arc::clone(&rss), &[])?;
//! let server = Shards::start(host(2), b, rss, &[])?;
//! let addr = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7);
//! // Any runtime can wait for what the shards' tasks return.
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! let listener = Arc::new(rt.block_on(server.listen(addr, 8, Default::default()))?);
//! for k in 0..server.len() {
//!     let l = Arc::clone(&listener);
//!     server.run_on(k, async move {
//!         let (mut s, _) = l.accept_on(k).await?;
//!         let mut buf = [0u8; 5];
//!         s.read_exact(&mut buf).await?;
//!         s.write_all(&buf).await
//!     })?;
//! }
//! for k in 0..client.len() {
//!     let c = client.clone();
//!     let task = client.run_on(k, async move {
//!         let (shard, mut s) = c.connect(addr, Default::default()).await?;
//!         assert_eq!(shard, k); // the task's own shard
//!         s.write_all(b"hello").await?;
//!         let mut back = [0u8; 5];
//!         s.read_exact(&mut back).await?;
//!         assert_eq!(&back, b"hello");
//!         std::io::Result::Ok(())
//!     })?;
//!     rt.block_on(task)??;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::driver::{Link, Net};
use crate::tcp::{TcpListener, TcpStream};
use netfold::buf::{PacketBuf, Pool};
use netfold::iface::{Stack, StackConfig};
use netfold::phy::mq::MqPort;
use netfold::phy::pipe::PipeConfig;
use netfold::phy::{Device, DeviceCaps};
use netfold::rss::Rss;
use netfold::shard::{current, AcceptOrder, FrontEnd, Placement, Sharding, Steering};
use netfold::tcp;
use netfold::time::Instant;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use tokio::sync::{oneshot, Notify};

/// The ports `connect` searches for one on the shard (RFC 6335 §6: 49152-65535).
pub const EPHEMERAL: RangeInclusive<u16> = netfold::wire::EPHEMERAL_PORTS;

/// The tokio adapter's shards, for [`current_shard`].
const FRONT_END: FrontEnd = FrontEnd("netfold-tokio");

/// The shard index of the calling thread, if it is a shard's thread (every task of
/// [`Shards::run_on`] runs on one).
pub fn current_shard() -> Option<usize> {
    current::current_shard(FRONT_END)
}

/// An in-memory multi-queue link ([`netfold::phy::mq::mq_link`]: RSS steering at every
/// transmit) whose ports wake the driver of the peer shard they sent to, so shard drivers
/// sleep until frames come instead of polling. `rss` spreads over the number of shards.
pub fn mq_link(config: PipeConfig, rss: Arc<Rss>) -> (Vec<Link>, Vec<Link>) {
    let (a, b) = netfold::phy::mq::mq_link(config, Arc::clone(&rss));
    mq_links(a, b, rss)
}

/// [`mq_link`] over ports already made (e.g. after taking their counters,
/// [`MqPort::counters`]); `rss` must be the link's.
pub fn mq_links(a: Vec<MqPort>, b: Vec<MqPort>, rss: Arc<Rss>) -> (Vec<Link>, Vec<Link>) {
    let signals =
        |n: usize| -> Vec<Arc<Notify>> { (0..n).map(|_| Arc::new(Notify::new())).collect() };
    let (sa, sb) = (signals(a.len()), signals(b.len()));
    let side = |ports: Vec<MqPort>, own: &[Arc<Notify>], peers: &[Arc<Notify>]| -> Vec<Link> {
        ports
            .into_iter()
            .zip(own)
            .map(|(port, signal)| {
                let dev = SignallingPort {
                    port,
                    rss: Arc::clone(&rss),
                    peers: peers.to_vec(),
                    hit: vec![false; peers.len()],
                };
                Link::signalled(Box::new(dev), Arc::clone(signal))
            })
            .collect()
    };
    (side(a, &sa, &sb), side(b, &sb, &sa))
}

/// A port of the multi-queue link that signals the driver of every peer shard it sent frames
/// to. It finds them as the port steers (the RSS hash of the 4-tuple; a frame without one,
/// ARP or NDP, goes to the peer shard of the port's own index), one hash per frame more.
struct SignallingPort {
    port: MqPort,
    rss: Arc<Rss>,
    peers: Vec<Arc<Notify>>,
    /// Per peer shard: frames of this batch go there.
    hit: Vec<bool>,
}

impl Device for SignallingPort {
    fn caps(&self) -> DeviceCaps {
        self.port.caps()
    }
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        self.port.recv_batch(now, pool, out, max)
    }
    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        if frames.is_empty() {
            return;
        }
        if self.peers.len() == 1 {
            self.hit[0] = true;
        } else {
            for f in frames.iter() {
                let j = self
                    .rss
                    .shard_of_frame(f.as_slice())
                    .unwrap_or(self.port.shard());
                self.hit[j] = true;
            }
        }
        // Frames first, then the signal: a woken driver finds them.
        self.port.send_batch(now, pool, frames);
        for (hit, peer) in self.hit.iter_mut().zip(&self.peers) {
            if std::mem::take(hit) {
                peer.notify_one();
            }
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        self.port.poll_at()
    }
}

/// One shard: its stack's [`Net`] and the runtime (on its own thread) that runs it.
struct Shard {
    net: Net,
    handle: tokio::runtime::Handle,
    /// Dropping it ends the thread's `block_on`, which drops the runtime and every task on it.
    stop: Mutex<Option<oneshot::Sender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Inner {
    shards: Vec<Shard>,
    /// How `connect` picks ports ([`Steering::Rss`]: by the hash the devices steer with;
    /// [`Steering::FollowTx`], a multi-queue TAP under the kernel's automq: `port % n == k`),
    /// the placement and the current-shard key.
    sharding: Sharding,
}

/// N shards, each a [`Net`] on its own thread's current-thread runtime. Cheap to clone (one
/// reference count), so tasks can each hold one. Dropping the last handle (or
/// [`Shards::shutdown`]) stops the drivers and the shard threads, cancelling the tasks still
/// running on them.
#[derive(Clone)]
pub struct Shards {
    inner: Arc<Inner>,
}

impl Shards {
    /// Starts one shard per link, each with a [`Stack`] of `stack` (the same address and MAC
    /// on every shard, as queues of one interface have), steered by `rss` (its table spreads
    /// over `links.len()` shards). Shard `k`'s thread (its driver and its tasks) runs on CPU
    /// `cpus[k % cpus.len()]` (modulo the CPUs online; a refused pin leaves it unpinned);
    /// `cpus` empty: nothing is pinned.
    pub fn start(
        stack: StackConfig,
        links: Vec<Link>,
        rss: Arc<Rss>,
        cpus: &[usize],
    ) -> io::Result<Shards> {
        if links.is_empty() || rss.shards() != links.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} links for an RSS table over {} shards",
                    links.len(),
                    rss.shards()
                ),
            ));
        }
        Shards::start_links(stack, links, Steering::Rss(rss), cpus)
    }

    /// Starts `n` shards over the `n` queues of multi-queue TAP `name` (`IFF_MULTI_QUEUE`;
    /// "nf%d" lets the kernel pick the number; an existing TAP must be `multi_queue`), shard
    /// `k` on queue `k` ([`netfold_os::mqtap::open_queues`]: the queues share ARP and NDP
    /// frames), each driven through its readable descriptor ([`Link::new`]). CPUs as
    /// [`Shards::start`]. The queues decide the steering, as for
    /// `netfold_rt::shards::Shards::start_tap`: with their eBPF Toeplitz program in force,
    /// `connect` picks local ports by its table; under the kernel's automq (no eBPF), any
    /// port steers (the kernel answers on the queue the SYN left by), and shard `k` takes the
    /// ports with `port % n == k` so that no two shards open the same 4-tuple.
    pub fn start_tap(
        name: &str,
        n: usize,
        stack: StackConfig,
        tap: netfold_os::tap::TapConfig,
        cpus: &[usize],
    ) -> io::Result<Shards> {
        Shards::start_tap_queues(stack, netfold_os::mqtap::open_queues(name, n, tap)?, cpus)
    }

    /// [`Shards::start_tap`] over queues opened beforehand (e.g. to
    /// [`record their flows`](netfold_os::mqtap::TapQueue::record_flows) first).
    pub fn start_tap_queues(
        stack: StackConfig,
        queues: Vec<netfold_os::mqtap::TapQueue>,
        cpus: &[usize],
    ) -> io::Result<Shards> {
        let steering = queues
            .first()
            .map_or(Steering::FollowTx, |q| q.steering().for_shards());
        if let Some(why) = steering.mismatch(queues.len()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        }
        let links = queues.into_iter().map(Link::new).collect();
        Shards::start_links(stack, links, steering, cpus)
    }

    /// Starts one shard per AF_XDP queue of one interface ([`netfold_os::xdpmq::open_queues`]:
    /// a socket per queue behind one XDP program, the queues sharing ARP and NDP frames),
    /// shard `k` on `queues[k]`, each driven through its readable descriptor. The queues
    /// steer each frame to the queue of its 4-tuple's Toeplitz hash in software (a veth peer
    /// moves a flow between queues mid-connection), so the shards steer [`Steering::Rss`]
    /// with their table ([`netfold_os::xdpmq::XdpQueue::steering`]): a connection the peer
    /// opens is accepted by the shard of its hash, and `connect` from shard `k` picks a port
    /// of its own. CPUs as [`Shards::start`].
    pub fn start_xdp_queues(
        stack: StackConfig,
        queues: Vec<netfold_os::xdpmq::XdpQueue>,
        cpus: &[usize],
    ) -> io::Result<Shards> {
        let steering = queues
            .first()
            .map_or(Steering::FollowTx, netfold_os::xdpmq::XdpQueue::steering);
        let links = queues.into_iter().map(Link::new).collect();
        Shards::start_links(stack, links, steering, cpus)
    }

    /// The TAP's steering, as [`Shards::start_tap`] found it: `Some` (the RSS table `connect`
    /// picks ports by) for [`Shards::start`] and an eBPF-steered TAP, `None` under automq.
    pub fn rss(&self) -> Option<&Arc<Rss>> {
        self.inner.sharding.steering().rss()
    }

    fn start_links(
        stack: StackConfig,
        links: Vec<Link>,
        steering: Steering,
        cpus: &[usize],
    ) -> io::Result<Shards> {
        if links.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no links"));
        }
        let n = links.len();
        let sharding = Sharding::new(FRONT_END, n, steering, Placement::on(cpus), EPHEMERAL);
        let mut shards = Vec::with_capacity(n);
        for (k, link) in links.into_iter().enumerate() {
            // On failure the shards started so far are dropped, which stops them.
            shards.push(start_shard(
                sharding.key(k),
                sharding.cpu(k),
                stack.clone(),
                link,
            )?);
        }
        Ok(Shards {
            inner: Arc::new(Inner { shards, sharding }),
        })
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.inner.shards.len()
    }

    /// Always false: there is at least one shard.
    pub fn is_empty(&self) -> bool {
        self.inner.shards.is_empty()
    }

    fn shard(&self, k: usize) -> io::Result<&Shard> {
        self.inner.shards.get(k).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no shard {k} of {}", self.len()),
            )
        })
    }

    /// Shard `k`'s [`Net`]: the whole adapter on that shard's stack. Use it from tasks on
    /// shard `k` ([`Shards::run_on`]); from elsewhere it works, at the cost of wake-ups across
    /// threads.
    pub fn net(&self, k: usize) -> io::Result<&Net> {
        Ok(&self.shard(k)?.net)
    }

    /// Shard `k`'s runtime, e.g. to `spawn_blocking` or to enter it.
    pub fn handle(&self, k: usize) -> io::Result<&tokio::runtime::Handle> {
        Ok(&self.shard(k)?.handle)
    }

    /// Spawns `future` on shard `k`'s runtime: it runs on the shard's thread, beside the
    /// shard's driver, with [`current_shard`] = `k` (its connects stay on shard `k`). The
    /// handle can be awaited from any runtime.
    pub fn run_on<F>(&self, k: usize, future: F) -> io::Result<tokio::task::JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Ok(self.shard(k)?.handle.spawn(future))
    }

    /// The calling thread's shard if it is one of these shards' threads.
    pub fn current(&self) -> Option<usize> {
        self.inner.sharding.current()
    }

    /// The shard a connect from the calling task runs on: its own ([`Shards::current`]), or
    /// the next one round-robin.
    pub fn pick_shard(&self) -> usize {
        self.inner.sharding.pick_shard()
    }

    /// Listens on `local` on every shard (`SO_REUSEPORT`-like); `local` needs a port.
    pub async fn listen(
        &self,
        local: impl Into<SocketAddr>,
        backlog: usize,
        config: tcp::Config,
    ) -> io::Result<ShardedListener> {
        let local = local.into();
        let mut listeners = Vec::with_capacity(self.len());
        for s in &self.inner.shards {
            listeners.push(TcpListener::bind_with(&s.net, local, backlog, config).await?);
        }
        Ok(ShardedListener {
            listeners,
            next: AcceptOrder::new(),
        })
    }

    /// Connects to `remote` from the calling task's shard (or round-robin, see
    /// [`Shards::pick_shard`]); returns the shard and the stream.
    pub async fn connect(
        &self,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
    ) -> io::Result<(usize, TcpStream)> {
        let k = self.pick_shard();
        Ok((k, self.connect_on(k, remote, config).await?))
    }

    /// Connects to `remote` from shard `k`, from the next local port of [`EPHEMERAL`] whose
    /// 4-tuple hashes to `k` both ways and is free (a taken 4-tuple, also in TIME-WAIT, is
    /// skipped); `AddrNotAvailable` when none is. On a TAP under the kernel's automq
    /// ([`Shards::rss`] `None`) the ports are those with `port % n == k`.
    pub async fn connect_on(
        &self,
        k: usize,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        let net = self.net(k)?;
        let local = net
            .with_stack(|st| st.tcp_local_for(remote))
            .map_err(netfold::socket::io_error)?;
        let sharding = &self.inner.sharding;
        for port in sharding.local_ports(k, remote, || io::Result::Ok(local))? {
            match TcpStream::connect_from(net, port, remote, config).await {
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
                r => return r,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            sharding.no_port_left(k),
        ))
    }

    /// Stops every shard now, whatever clones are still held: the drivers stop (waiting socket
    /// calls fail with `NotConnected`) and each shard's runtime is dropped with the tasks
    /// still on it. Waits for the shard threads, except the caller's own if it is one.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }
}

impl Inner {
    fn shutdown(&self) {
        for s in &self.shards {
            s.net.stop();
            drop(s.stop.lock().unwrap_or_else(|p| p.into_inner()).take());
        }
        let me = std::thread::current().id();
        for s in &self.shards {
            let t = s.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(t) = t {
                // A shard thread cannot wait for itself; it ends once its task returns.
                if t.thread().id() != me {
                    let _ = t.join();
                }
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts shard `k`'s thread: pins it, builds its runtime, spawns its [`Net`] there and runs
/// the runtime until told to stop.
fn start_shard(
    key: current::Key,
    cpu: Option<usize>,
    stack: StackConfig,
    link: Link,
) -> io::Result<Shard> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(format!("netfold-tokio-shard-{}", key.shard()))
        .spawn(move || {
            if let Some(cpu) = cpu {
                netfold_os::cpu::pin_current_thread(cpu);
            }
            key.enter();
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let net = {
                let _entered = rt.enter();
                Net::spawn(Stack::new(stack), link)
            };
            let ok = net.is_ok();
            let _ = ready_tx.send(net.map(|net| (rt.handle().clone(), net)));
            if ok {
                // The runtime runs the driver and the shard's tasks until `stop` is dropped.
                rt.block_on(async {
                    let _ = stop_rx.await;
                });
            }
        })?;
    let started = ready_rx
        .recv()
        .map_err(|_| io::Error::other("shard thread ended before starting"));
    match started.and_then(|r| r) {
        Ok((handle, net)) => Ok(Shard {
            net,
            handle,
            stop: Mutex::new(Some(stop_tx)),
            thread: Mutex::new(Some(thread)),
        }),
        Err(e) => {
            let _ = thread.join();
            Err(e)
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
    /// Shard `k`'s listener (panics if `k` is out of range).
    pub fn on(&self, k: usize) -> &TcpListener {
        &self.listeners[k]
    }

    /// The next connection on shard `k`: those whose SYN shard `k`'s queue received. What a
    /// task on shard `k` awaits.
    pub async fn accept_on(&self, k: usize) -> io::Result<(TcpStream, SocketAddr)> {
        let l = self
            .listeners
            .get(k)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no shard {k}")))?;
        l.accept().await
    }

    /// The next connection on any shard: (the shard, the stream, the peer). Each call starts
    /// looking at the shard after the previous call's first, so a busy shard does not hide
    /// the others; the task waits on every shard's listener at once (woken by whichever
    /// driver has a connection). The stream stays on its shard (its driver runs there).
    pub async fn accept(&self) -> io::Result<(usize, TcpStream, SocketAddr)> {
        let n = self.listeners.len();
        let first = self.next.first();
        poll_fn(|cx| {
            for i in 0..n {
                let k = (first + i) % n;
                if let Poll::Ready(r) = self.listeners[k].poll_accept(cx) {
                    return Poll::Ready(r.map(|(s, peer)| (k, s, peer)));
                }
            }
            Poll::Pending
        })
        .await
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
