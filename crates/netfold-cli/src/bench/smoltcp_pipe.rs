//! smoltcp on both ends of an in-memory link, one thread: TCP_STREAM.
//!
//! Configured to be comparable with netfold's pipe runs (documented in docs/BENCHMARKS.md):
//! Ethernet medium, the same IP MTU (device MTU = IP MTU + 14), checksums computed on transmit
//! and verified on receive (`ChecksumCapabilities::default()`, never `ignored()`), the same
//! socket buffer sizes, Nagle per `--nodelay`, smoltcp's default delayed ACK. Frame buffers are
//! recycled through a free list so the harness's allocator does not count against smoltcp.

use super::clock::Clock;
use super::pattern::{Pattern, Verifier};
use super::report::{mbps, Row};
use super::StreamParams;
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
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
        caps.max_transmission_unit = self.mtu + 14;
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

pub fn run(p: &StreamParams) -> Result<Row, Box<dyn std::error::Error>> {
    if p.impair.loss + p.impair.reorder + p.impair.duplicate + p.impair.corrupt > 0.0 {
        return Err("the smoltcp runner has no impairments; run it on a clean link".into());
    }
    let wire = Rc::new(RefCell::new(Wire::default()));
    let mut dev_a = End {
        wire: Rc::clone(&wire),
        is_a: true,
        mtu: p.mtu,
    };
    let mut dev_b = End {
        wire: Rc::clone(&wire),
        is_a: false,
        mtu: p.mtu,
    };
    let mut clock = Clock::new();
    let a_addr = Ipv4Address::new(198, 18, 0, 1);
    let b_addr = Ipv4Address::new(198, 18, 0, 2);
    let mut ia = iface(&mut dev_a, 1, a_addr, smol_now(&clock));
    let mut ib = iface(&mut dev_b, 2, b_addr, smol_now(&clock));

    let sbuf = p.send_buffer.unwrap_or(256 * 1024);
    let rbuf = p.recv_buffer.unwrap_or(256 * 1024);
    let mut client = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; rbuf]),
        tcp::SocketBuffer::new(vec![0; sbuf]),
    );
    let mut server = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; rbuf]),
        tcp::SocketBuffer::new(vec![0; sbuf]),
    );
    client.set_nagle_enabled(!p.nodelay);
    server.set_nagle_enabled(!p.nodelay);
    server.listen(12865)?;
    let mut sa = SocketSet::new(Vec::new());
    let mut sb = SocketSet::new(Vec::new());
    let hc = sa.add(client);
    let hs = sb.add(server);
    sa.get_mut::<tcp::Socket>(hc)
        .connect(ia.context(), (IpAddress::Ipv4(b_addr), 12865), 49152)?;

    let msg = p.send_size.max(1);
    let pattern = Pattern::new(msg.max(p.recv_size));
    let mut verifier = Verifier::new(&pattern);
    let mut buf = vec![0u8; p.recv_size.max(1)];
    let total = p.bytes;
    let deadline = p.duration.map(std::time::Duration::from_secs_f64);

    // Handshake.
    let handshake_start = std::time::Instant::now();
    while !sa.get::<tcp::Socket>(hc).may_send() {
        let now = smol_now(&clock);
        ia.poll(now, &mut dev_a, &mut sa);
        ib.poll(now, &mut dev_b, &mut sb);
        if handshake_start.elapsed() > std::time::Duration::from_secs(10) {
            return Err("smoltcp handshake did not complete".into());
        }
        skip_idle(&mut clock, &wire, &mut ia, &mut ib, &sa, &sb);
    }

    let start = std::time::Instant::now();
    let mut sent: u64 = 0;
    let mut received: u64 = 0;
    let mut closed = false;
    let mut last_progress = std::time::Instant::now();
    loop {
        let time_up = deadline.is_some_and(|d| start.elapsed() >= d);
        let limit = if time_up {
            sent
        } else {
            total.unwrap_or(u64::MAX)
        };
        {
            let c = sa.get_mut::<tcp::Socket>(hc);
            while sent < limit && c.can_send() {
                let n = ((limit - sent) as usize).min(msg - (sent % msg as u64) as usize);
                let k = c.send_slice(pattern.window(sent, n))?;
                if k == 0 {
                    break;
                }
                sent += k as u64;
            }
            if sent >= limit && !closed {
                c.close();
                closed = true;
            }
        }
        let now = smol_now(&clock);
        ia.poll(now, &mut dev_a, &mut sa);
        ib.poll(now, &mut dev_b, &mut sb);
        let s = sb.get_mut::<tcp::Socket>(hs);
        let mut got = false;
        while s.can_recv() {
            let n = s.recv_slice(&mut buf)?;
            if n == 0 {
                break;
            }
            if p.verify {
                verifier.check(&buf[..n]);
            }
            received += n as u64;
            got = true;
        }
        if closed && received >= sent && !s.may_recv() {
            break;
        }
        if closed && received >= sent {
            // All data is in; the FIN may still be in flight. Nothing more to measure.
            break;
        }
        if got {
            last_progress = std::time::Instant::now();
        } else if last_progress.elapsed() > std::time::Duration::from_secs(30) {
            return Err(format!("smoltcp transfer stalled at {received} of {sent} bytes").into());
        } else {
            skip_idle(&mut clock, &wire, &mut ia, &mut ib, &sa, &sb);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut row = Row {
        test: "TCP_STREAM".into(),
        stack: "smoltcp".into(),
        link: "pipe".into(),
        mtu: p.mtu,
        msg_size: msg,
        bytes: received,
        elapsed_s: elapsed,
        throughput_mbps: Some(mbps(received, elapsed)),
        verified: p.verify.then(|| verifier.verified(sent)),
        ..Default::default()
    };
    row.details
        .insert("clock_skipped_s".into(), clock.skipped_s().into());
    Ok(row)
}

/// When no frame is in flight, jump to the earliest smoltcp deadline (delayed ACK, RTO).
fn skip_idle(
    clock: &mut Clock,
    wire: &RefCell<Wire>,
    ia: &mut Interface,
    ib: &mut Interface,
    sa: &SocketSet,
    sb: &SocketSet,
) {
    {
        let w = wire.borrow();
        if !w.a_to_b.is_empty() || !w.b_to_a.is_empty() {
            return;
        }
    }
    let now = smol_now(clock);
    let next = [ia.poll_at(now, sa), ib.poll_at(now, sb)]
        .into_iter()
        .flatten()
        .min();
    if let Some(t) = next {
        if t > now {
            clock.skip_to(netfold::time::Instant::from_micros(
                t.total_micros().max(0) as u64
            ));
        }
    }
}
