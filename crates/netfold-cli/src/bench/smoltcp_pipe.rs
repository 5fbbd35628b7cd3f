//! smoltcp on both ends of an in-memory link, one thread: TCP_STREAM.
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
struct End {
    wire: Rc<RefCell<Wire>>,
    is_a: bool,
    mtu: usize,
}

struct RxTok {
    buf: Vec<u8>,
    wire: Rc<RefCell<Wire>>,
}
struct TxTok<'a> {
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

fn iface(dev: &mut End, mac: u8, addr: Ipv4Address, now: SInstant) -> Interface {
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

/// smoltcp on both ends of the in-memory link.
pub struct SmolNet {
    wire: Rc<RefCell<Wire>>,
    dev_c: End,
    dev_s: End,
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
}

impl SmolNet {
    pub fn new(p: &Params) -> Result<SmolNet, BoxErr> {
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
        let mut dev_c = End {
            wire: Rc::clone(&wire),
            is_a: true,
            mtu: p.mtu,
        };
        let mut dev_s = End {
            wire: Rc::clone(&wire),
            is_a: false,
            mtu: p.mtu,
        };
        let clock = Clock::new();
        let if_c = iface(&mut dev_c, 1, CLIENT, smol_now(&clock));
        let if_s = iface(&mut dev_s, 2, SERVER, smol_now(&clock));
        Ok(SmolNet {
            wire,
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
        })
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
}

impl MemNet for SmolNet {
    type Conn = (Side, SocketHandle);

    fn clock(&mut self) -> &mut Clock {
        &mut self.clock
    }

    fn poll(&mut self) -> Result<bool, BoxErr> {
        let now = smol_now(&self.clock);
        let a = self.if_c.poll(now, &mut self.dev_c, &mut self.set_c);
        let b = self.if_s.poll(now, &mut self.dev_s, &mut self.set_s);
        let w = self.wire.borrow();
        Ok(a != smoltcp::iface::PollResult::None
            || b != smoltcp::iface::PollResult::None
            || !w.a_to_b.is_empty()
            || !w.b_to_a.is_empty())
    }

    fn next_deadline(&mut self) -> Option<netfold::time::Instant> {
        {
            let w = self.wire.borrow();
            if !w.a_to_b.is_empty() || !w.b_to_a.is_empty() {
                return None;
            }
        }
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
        s.connect(self.if_c.context(), (IpAddress::Ipv4(SERVER), port), local)?;
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
        match s.send_slice(data, (IpAddress::Ipv4(SERVER), port)) {
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
