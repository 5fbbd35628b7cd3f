//! smoltcp on both ends of an in-memory link, one thread: TCP_STREAM.
//!
//! The two interfaces are generic over their device ([`SmolDev`]): the in-memory wire here, or
//! packet sockets over netfold's link emulator (`super::smoltcp_emu`).
//!
//! Configured to be comparable with netfold's pipe runs (documented in docs/BENCHMARKS.md):
//! Ethernet medium, the same IP MTU (device MTU = IP MTU + 14), checksums computed on transmit
//! and verified on receive (`ChecksumCapabilities::default()`, never `ignored()`), the same
//! socket buffer sizes, Nagle per `--nodelay`, smoltcp's default delayed ACK. Frame buffers are
//! recycled through a free list so the harness's allocator does not count against smoltcp.

use super::clock::Clock;
use super::memnet::{BoxErr, MemNet, Side};
use super::{Measurement, Params};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::{tcp, udp};
use smoltcp::time::Instant as SInstant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

#[derive(Default)]
struct Wire {
    a_to_b: VecDeque<Vec<u8>>,
    b_to_a: VecDeque<Vec<u8>>,
    free: Vec<Vec<u8>>,
}

/// One end of the in-memory link.
pub struct End {
    wire: Rc<RefCell<Wire>>,
    is_a: bool,
    mtu: usize,
}

pub struct RxTok {
    buf: Vec<u8>,
    wire: Rc<RefCell<Wire>>,
}
pub struct TxTok<'a> {
    end: &'a End,
}

impl phy::RxToken for RxTok {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let r = f(&self.buf);
        self.wire.borrow_mut().free.push(self.buf);
        r
    }
}

impl phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = self.end.wire.borrow_mut().free.pop().unwrap_or_default();
        buf.clear();
        buf.resize(len, 0);
        let r = f(&mut buf);
        let mut w = self.end.wire.borrow_mut();
        if self.end.is_a {
            w.a_to_b.push_back(buf);
        } else {
            w.b_to_a.push_back(buf);
        }
        r
    }
}

/// A device the two smoltcp interfaces of [`SmolNet`] run on.
pub trait SmolDev: Device {
    /// Called after each interface poll: sends what the interface queued (a device that batches
    /// its transmissions) and returns how many frames moved in either direction since the last
    /// call (smoltcp's `poll` reports only socket state changes, not frames processed).
    fn after_poll(&mut self) -> u64 {
        0
    }
    /// Frames are waiting on an in-memory wire: the next poll has work.
    fn in_flight(&self) -> bool {
        false
    }
    /// The descriptor to sleep on when both stacks are idle; `None` for an in-memory link,
    /// where the harness clock fast-forwards to the next timer instead.
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// Counters to report.
    fn details(&self) -> Option<String> {
        None
    }
}

impl SmolDev for End {
    fn in_flight(&self) -> bool {
        let w = self.wire.borrow();
        !w.a_to_b.is_empty() || !w.b_to_a.is_empty()
    }
}

impl Device for End {
    type RxToken<'a> = RxTok;
    type TxToken<'a> = TxTok<'a>;

    fn receive(&mut self, _t: SInstant) -> Option<(RxTok, TxTok<'_>)> {
        let buf = {
            let mut w = self.wire.borrow_mut();
            if self.is_a {
                w.b_to_a.pop_front()
            } else {
                w.a_to_b.pop_front()
            }
        }?;
        Some((
            RxTok {
                buf,
                wire: Rc::clone(&self.wire),
            },
            TxTok { end: self },
        ))
    }

    fn transmit(&mut self, _t: SInstant) -> Option<TxTok<'_>> {
        Some(TxTok { end: self })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.mtu + netfold::wire::ethernet::HEADER_LEN;
        caps
    }
}

fn smol_now(c: &Clock) -> SInstant {
    SInstant::from_micros(c.now().total_micros() as i64)
}

fn iface<D: Device>(dev: &mut D, mac: u8, addr: Ipv4Address, now: SInstant) -> Interface {
    let cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress([
        0x02, 0, 0, 0, 0, mac,
    ])));
    let mut i = Interface::new(cfg, dev, now);
    i.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(IpAddress::Ipv4(addr), 24));
    });
    i
}

const SERVER: Ipv4Address = Ipv4Address::new(198, 18, 0, 2);
const CLIENT: Ipv4Address = Ipv4Address::new(198, 18, 0, 1);
/// Listening sockets kept ready, so a new connection (TCP_CRR) finds one while the previous
/// connection's socket is still closing.
const LISTENERS: usize = 4;

/// smoltcp on both ends of a link (the in-memory wire by default).
pub struct SmolNet<D: SmolDev = End> {
    dev_c: D,
    dev_s: D,
    if_c: Interface,
    if_s: Interface,
    set_c: SocketSet<'static>,
    set_s: SocketSet<'static>,
    listening: Vec<SocketHandle>,
    closing: Vec<(Side, SocketHandle)>,
    port: u16,
    next_port: u16,
    sbuf: usize,
    rbuf: usize,
    nagle: bool,
    clock: Clock,
    udp: Option<(SocketHandle, SocketHandle, u16)>,
    server: Ipv4Address,
}

impl SmolNet<End> {
    pub fn new(p: &Params) -> Result<SmolNet<End>, BoxErr> {
        if p.impair.any() {
            // Its wire is a plain queue between the two smoltcp interfaces, without netfold's
            // pipe model (loss, delay, rate): run it on a clean link.
            return Err(
                "the smoltcp runner has no impairments and no --delay/--rate; run it \
                        on a clean link"
                    .into(),
            );
        }
        let wire = Rc::new(RefCell::new(Wire::default()));
        let dev_c = End {
            wire: Rc::clone(&wire),
            is_a: true,
            mtu: p.mtu,
        };
        let dev_s = End {
            wire,
            is_a: false,
            mtu: p.mtu,
        };
        Ok(SmolNet::with_devices(p, dev_c, dev_s, CLIENT, SERVER))
    }
}

impl<D: SmolDev> SmolNet<D> {
    /// The client interface (`client` address) on `dev_c`, the server's on `dev_s`, with
    /// `p`'s buffers and Nagle setting; the harness clock runs in wall time.
    pub fn with_devices(
        p: &Params,
        mut dev_c: D,
        mut dev_s: D,
        client: Ipv4Address,
        server: Ipv4Address,
    ) -> SmolNet<D> {
        let clock = Clock::new();
        let if_c = iface(&mut dev_c, 1, client, smol_now(&clock));
        let if_s = iface(&mut dev_s, 2, server, smol_now(&clock));
        SmolNet {
            dev_c,
            dev_s,
            if_c,
            if_s,
            set_c: SocketSet::new(Vec::new()),
            set_s: SocketSet::new(Vec::new()),
            listening: Vec::new(),
            closing: Vec::new(),
            port: 0,
            next_port: *netfold::wire::EPHEMERAL_PORTS.start(),
            sbuf: p.send_buffer.unwrap_or(256 * 1024),
            rbuf: p.recv_buffer.unwrap_or(256 * 1024),
            nagle: !p.nodelay,
            clock,
            udp: None,
            server,
        }
    }

    fn socket(&self) -> tcp::Socket<'static> {
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; self.rbuf]),
            tcp::SocketBuffer::new(vec![0; self.sbuf]),
        );
        s.set_nagle_enabled(self.nagle);
        s
    }

    fn sock(&mut self, c: (Side, SocketHandle)) -> &mut tcp::Socket<'static> {
        match c.0 {
            Side::Client => self.set_c.get_mut::<tcp::Socket>(c.1),
            Side::Server => self.set_s.get_mut::<tcp::Socket>(c.1),
        }
    }

    fn add_listener(&mut self) -> Result<(), BoxErr> {
        let mut s = self.socket();
        s.listen(self.port)?;
        let h = self.set_s.add(s);
        self.listening.push(h);
        Ok(())
    }

    /// The earliest time either interface wants to be polled.
    fn smol_deadline(&mut self) -> Option<netfold::time::Instant> {
        let now = smol_now(&self.clock);
        [
            self.if_c.poll_at(now, &self.set_c),
            self.if_s.poll_at(now, &self.set_s),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|t| netfold::time::Instant::from_micros(t.total_micros().max(0) as u64))
    }
}

impl<D: SmolDev> MemNet for SmolNet<D> {
    fn tolerates_lost_fin(&self) -> bool {
        // smoltcp 0.14's lost-FIN defect (see `memnet::bulk`).
        true
    }

    type Conn = (Side, SocketHandle);

    fn clock(&mut self) -> &mut Clock {
        &mut self.clock
    }

    fn poll(&mut self) -> Result<bool, BoxErr> {
        let now = smol_now(&self.clock);
        let a = self.if_c.poll(now, &mut self.dev_c, &mut self.set_c);
        let moved_c = self.dev_c.after_poll();
        let b = self.if_s.poll(now, &mut self.dev_s, &mut self.set_s);
        let moved_s = self.dev_s.after_poll();
        Ok(a != smoltcp::iface::PollResult::None
            || b != smoltcp::iface::PollResult::None
            || moved_c + moved_s > 0
            || self.dev_c.in_flight()
            || self.dev_s.in_flight())
    }

    fn next_deadline(&mut self) -> Option<netfold::time::Instant> {
        if self.dev_c.in_flight() || self.dev_s.in_flight() {
            return None;
        }
        self.smol_deadline()
    }

    fn wait_link(&mut self) -> Result<bool, BoxErr> {
        let (Some(fc), Some(fs)) = (self.dev_c.wait_fd(), self.dev_s.wait_fd()) else {
            return Ok(false);
        };
        // A real link: frames are in flight where neither interface sees them, so sleep until
        // one arrives or the next timer is due (never past 10 ms: the stall check runs here).
        let now = self.clock.now();
        let wait = self
            .smol_deadline()
            .map_or(10_000, |t| t.saturating_since(now).total_micros())
            .min(10_000);
        if wait > 0 {
            netfold_os::wait::wait_readable_any_precise(
                &[fc, fs],
                std::time::Duration::from_micros(wait),
            )?;
        }
        Ok(true)
    }

    fn details(&mut self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        for (k, d) in [("client_dev", &self.dev_c), ("server_dev", &self.dev_s)] {
            if let Some(s) = d.details() {
                m.insert(k.into(), s.into());
            }
        }
        let mut socks = Vec::new();
        for (side, set) in [("client", &self.set_c), ("server", &self.set_s)] {
            for (_, s) in set.iter() {
                if let smoltcp::socket::Socket::Tcp(t) = s {
                    if t.state() != tcp::State::Listen {
                        socks.push(format!(
                            "{side} {} send_queue {} recv_queue {}",
                            t.state(),
                            t.send_queue(),
                            t.recv_queue(),
                        ));
                    }
                }
            }
        }
        if !socks.is_empty() {
            m.insert("smoltcp_sockets".into(), socks.join("; ").into());
        }
        m
    }

    fn listen(&mut self, port: u16) -> Result<(), BoxErr> {
        self.port = port;
        while self.listening.len() < LISTENERS {
            self.add_listener()?;
        }
        Ok(())
    }

    fn connect(&mut self, port: u16) -> Result<Self::Conn, BoxErr> {
        let local = self.next_port;
        self.next_port = if self.next_port == 65535 {
            *netfold::wire::EPHEMERAL_PORTS.start()
        } else {
            self.next_port + 1
        };
        let mut s = self.socket();
        s.connect(
            self.if_c.context(),
            (IpAddress::Ipv4(self.server), port),
            local,
        )?;
        Ok((Side::Client, self.set_c.add(s)))
    }

    fn accept(&mut self) -> Result<Option<Self::Conn>, BoxErr> {
        let pos = self.listening.iter().position(|h| {
            let st = self.set_s.get::<tcp::Socket>(*h).state();
            !matches!(st, tcp::State::Listen | tcp::State::SynReceived)
        });
        match pos {
            Some(i) => {
                let h = self.listening.swap_remove(i);
                self.add_listener()?;
                Ok(Some((Side::Server, h)))
            }
            None => Ok(None),
        }
    }

    fn established(&mut self, c: Self::Conn) -> Result<bool, BoxErr> {
        let st = self.sock(c).state();
        match st {
            tcp::State::SynSent | tcp::State::SynReceived => Ok(false),
            tcp::State::Closed => Err("smoltcp connection failed".into()),
            _ => Ok(true),
        }
    }

    fn write(&mut self, c: Self::Conn, data: &[u8]) -> Result<usize, BoxErr> {
        let s = self.sock(c);
        if !s.can_send() {
            return Ok(0);
        }
        Ok(s.send_slice(data)?)
    }

    fn read(&mut self, c: Self::Conn, buf: &mut [u8]) -> Result<Option<usize>, BoxErr> {
        let s = self.sock(c);
        if s.can_recv() {
            return Ok(Some(s.recv_slice(buf)?));
        }
        if !s.may_recv() {
            return Ok(Some(0));
        }
        Ok(None)
    }

    fn shutdown_write(&mut self, c: Self::Conn) -> Result<(), BoxErr> {
        self.sock(c).close();
        Ok(())
    }

    fn close(&mut self, c: Self::Conn) -> Result<(), BoxErr> {
        self.sock(c).close();
        self.closing.push(c);
        Ok(())
    }

    fn udp_open(&mut self, port: u16) -> Result<(), BoxErr> {
        let mk = |bytes: usize| {
            udp::Socket::new(
                udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 256], vec![0; bytes]),
                udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 256], vec![0; bytes]),
            )
        };
        let mut srv = mk(self.rbuf);
        srv.bind(port)?;
        let mut cli = mk(self.sbuf);
        cli.bind(49151)?;
        let hs = self.set_s.add(srv);
        let hc = self.set_c.add(cli);
        self.udp = Some((hc, hs, port));
        Ok(())
    }

    fn udp_send(&mut self, data: &[u8]) -> Result<bool, BoxErr> {
        let (hc, _, port) = self.udp.ok_or("udp not open")?;
        let s = self.set_c.get_mut::<udp::Socket>(hc);
        match s.send_slice(data, (IpAddress::Ipv4(self.server), port)) {
            Ok(()) => Ok(true),
            Err(udp::SendError::BufferFull) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn udp_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, BoxErr> {
        let (_, hs, _) = self.udp.ok_or("udp not open")?;
        let s = self.set_s.get_mut::<udp::Socket>(hs);
        match s.recv_slice(buf) {
            Ok((n, _)) => Ok(Some(n)),
            Err(udp::RecvError::Exhausted) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// smoltcp keeps a socket in TIME_WAIT for 10 s; a benchmark that opens tens of thousands of
    /// connections removes finished sockets from the set once they reach TIME_WAIT or CLOSED
    /// (the remote end has acknowledged our FIN by then).
    fn reap(&mut self) {
        let mut keep = Vec::with_capacity(self.closing.len());
        for c in std::mem::take(&mut self.closing) {
            let st = self.sock(c).state();
            if matches!(st, tcp::State::Closed | tcp::State::TimeWait) {
                match c.0 {
                    Side::Client => drop(self.set_c.remove(c.1)),
                    Side::Server => drop(self.set_s.remove(c.1)),
                }
            } else {
                keep.push(c);
            }
        }
        self.closing = keep;
    }
}

pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    let mut net = SmolNet::new(p)?;
    super::memnet::run(&mut net, p)
}
