//! Lent receive (`Device::recv_lent`): a device that hands the stack frames in its own
//! memory for the length of one call, as AF_XDP lends its UMEM chunks. Two stacks on the
//! in-memory pipe in virtual time, the receiving one behind a device that receives into
//! buffers of its own and lends them. Bulk data arrives intact, every frame the stack takes in
//! is a lent one, and none of them stays with the stack (a frame-level borrowing read falls
//! back to the ring).

use netfold::buf::{PacketBuf, Pool};
use netfold::iface::Stack;
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use netfold::phy::{Device, DeviceCaps, MAX_LENT};
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp;
use netfold::time::{Duration, Instant};
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net};
use std::io::ErrorKind;
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// A pipe end that lends: frames are received into its own buffers and lent, at most
/// `MAX_LENT` per callback, then recycled into its own pool.
struct Lender {
    end: PipeEnd,
    pool: Pool,
    held: Vec<PacketBuf>,
    /// Frames lent, and calls of `recv_batch` (the copying path, which must stay unused).
    lent: u64,
    copied: u64,
}

impl Device for Lender {
    fn caps(&self) -> DeviceCaps {
        self.end.caps()
    }
    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let n = self.end.recv_batch(now, pool, out, max);
        self.copied += n as u64;
        n
    }
    fn recv_lent(
        &mut self,
        now: Instant,
        max: usize,
        f: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<usize> {
        let n = self
            .end
            .recv_batch(now, &mut self.pool, &mut self.held, max);
        for batch in self.held.chunks(MAX_LENT) {
            let mut frames: [&[u8]; MAX_LENT] = [&[]; MAX_LENT];
            for (slot, b) in frames.iter_mut().zip(batch) {
                *slot = b.as_slice();
            }
            f(&frames[..batch.len()]);
        }
        self.lent += n as u64;
        for b in self.held.drain(..) {
            self.pool.put(b);
        }
        Some(n)
    }
    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        self.end.send_batch(now, pool, frames)
    }
    fn poll_at(&self) -> Option<Instant> {
        self.end.poll_at()
    }
}

fn lender(end: PipeEnd) -> Lender {
    Lender {
        end,
        pool: Pool::new(2048, 256),
        held: Vec::new(),
        lent: 0,
        copied: 0,
    }
}

fn tcfg() -> tcp::Config {
    tcp::Config {
        time_wait: Duration::from_secs(1),
        ..tcp::Config::default()
    }
}

/// Sends `total` bytes A -> B through lent frames at both ends; B reads with `read`, or
/// with frame reads when `frames`. Returns the network for its counters.
fn transfer(total: usize, frames: bool) -> Net<Lender> {
    let (ea, eb) = Pipe::new(PipeConfig::default());
    let mut n = Net::new(
        Stack::new(config(A, 1)),
        Stack::new(config(B, 2)),
        lender(ea),
        lender(eb),
    );
    let l = TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 80), 4, tcfg()).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 80), tcfg()).unwrap();
    n.settle();
    let s = loop {
        match l.accept(&mut n.b) {
            Ok((s, _)) => break s,
            Err(_) => n.run_for(Duration::from_millis(10)),
        }
    };
    if frames {
        s.set_borrow_frames(&mut n.b, true).unwrap();
    }
    let src: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
    let (mut sent, mut got, mut idle) = (0, Vec::with_capacity(total), 0);
    let mut buf = vec![0u8; 64 << 10];
    let mut held = Vec::new();
    while got.len() < total {
        while sent < total {
            match c.write(&mut n.a, &src[sent..]) {
                Ok(k) => sent += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        if !n.step() {
            idle += 1;
            assert!(idle < 200_000, "stuck at {} of {total}", got.len());
        }
        loop {
            let r = if frames {
                s.read_frames(&mut n.b, &mut held, 16).inspect(|_| {
                    for p in held.drain(..) {
                        got.extend_from_slice(&p);
                    }
                })
            } else {
                s.read(&mut n.b, &mut buf)
                    .inspect(|&k| got.extend_from_slice(&buf[..k]))
            };
            match r {
                Ok(0) => panic!("early end of stream at {} of {total}", got.len()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(got == src, "bytes differ");
    n
}

#[test]
fn bulk_data_arrives_through_lent_frames_only() {
    let n = transfer(4 << 20, false);
    let cb = n.b.counters();
    assert!(n.eb.lent > 0);
    assert_eq!(n.eb.copied, 0, "the copying receive path was used");
    assert_eq!(cb.frames_in, n.eb.lent, "frames in that were not lent");
    assert_eq!(n.a.counters().frames_in, n.ea.lent);
}

#[test]
fn a_frame_read_of_lent_frames_reads_from_the_ring() {
    let n = transfer(1 << 20, true);
    let pp = n.b.counters().payload_passes();
    // No lent frame was kept: every payload byte went through the receive ring.
    assert_eq!(pp.rx_frames_held, 0, "{pp:?}");
    assert!(pp.rx_copy_ring >= 1 << 20, "{pp:?}");
    assert_eq!(n.eb.copied, 0);
}
