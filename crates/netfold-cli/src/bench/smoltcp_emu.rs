//! smoltcp over `--link emu`: a client and a server smoltcp interface, each on an `AF_PACKET`
//! socket bound to the emulator's TAP interface in its namespace ([`super::emu`]), both polled
//! from one thread with the same tests as over the in-memory wire ([`super::memnet`] via
//! [`SmolNet`]). The TAPs are opened without offloads, so every frame is wire-sized with
//! complete checksums, as smoltcp needs: it computes and verifies every checksum itself
//! (`ChecksumCapabilities::default()`). The harness clock runs in wall time (frames in flight
//! in the emulator are invisible to the stacks, so nothing may be fast-forwarded); an idle
//! thread sleeps on both sockets until a frame arrives or a smoltcp timer is due.
//!
//! The device ([`PacketDev`]) reads in batches from netfold-os's packet socket (one `read` per
//! frame, no ring: the ring's block timeout would add a millisecond per turn) and sends what an
//! interface poll queued with one `sendmmsg`; frame buffers are recycled through a pool, so the
//! harness's allocator does not count against smoltcp.

use super::emu::{add_stats, packet_socket_in, EmuLink, CLIENT, SERVER};
use super::memnet::BoxErr;
use super::smoltcp_pipe::{SmolDev, SmolNet};
use super::{Measurement, Params};
use netfold::buf::{PacketBuf, Pool};
use netfold::phy::Device as _;
use netfold_os::packet_socket::PacketSocket;
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::time::Instant as SInstant;
use smoltcp::wire::Ipv4Address;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// Frames read per system-call batch.
const BURST: usize = 64;

/// smoltcp's `phy::Device` over a netfold-os packet socket (offloads off).
pub struct PacketDev {
    sock: PacketSocket,
    pool: Rc<RefCell<Pool>>,
    rx: VecDeque<PacketBuf>,
    batch: Vec<PacketBuf>,
    tx: Vec<PacketBuf>,
    mtu: usize,
    /// Frames received and sent since the last [`SmolDev::after_poll`].
    moved: u64,
}

impl PacketDev {
    pub fn new(sock: PacketSocket, mtu: usize) -> PacketDev {
        let mut pool = Pool::new(mtu + netfold::wire::ethernet::VLAN_HEADER_LEN, 256);
        pool.prefill(128);
        PacketDev {
            sock,
            pool: Rc::new(RefCell::new(pool)),
            rx: VecDeque::with_capacity(BURST),
            batch: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST),
            mtu,
            moved: 0,
        }
    }

    fn flush(&mut self) {
        if self.tx.is_empty() {
            return;
        }
        self.moved += self.tx.len() as u64;
        let mut pool = self.pool.borrow_mut();
        self.sock
            .send_batch(netfold::time::Instant::ZERO, &mut pool, &mut self.tx);
    }
}

pub struct RxTok {
    buf: PacketBuf,
    pool: Rc<RefCell<Pool>>,
}

pub struct TxTok<'a> {
    tx: &'a mut Vec<PacketBuf>,
    pool: &'a Rc<RefCell<Pool>>,
}

impl phy::RxToken for RxTok {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let r = f(self.buf.as_slice());
        self.pool.borrow_mut().put(self.buf);
        r
    }
}

impl phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = self.pool.borrow_mut().get();
        buf.set_len(len);
        let r = f(buf.as_mut_slice());
        self.tx.push(buf);
        r
    }
}

impl Device for PacketDev {
    type RxToken<'a> = RxTok;
    type TxToken<'a> = TxTok<'a>;

    fn receive(&mut self, _t: SInstant) -> Option<(RxTok, TxTok<'_>)> {
        if self.rx.is_empty() {
            {
                let mut pool = self.pool.borrow_mut();
                self.sock.recv_batch(
                    netfold::time::Instant::ZERO,
                    &mut pool,
                    &mut self.batch,
                    BURST,
                );
            }
            self.moved += self.batch.len() as u64;
            self.rx.extend(self.batch.drain(..));
        }
        let buf = self.rx.pop_front()?;
        Some((
            RxTok {
                buf,
                pool: Rc::clone(&self.pool),
            },
            TxTok {
                tx: &mut self.tx,
                pool: &self.pool,
            },
        ))
    }

    fn transmit(&mut self, _t: SInstant) -> Option<TxTok<'_>> {
        if self.tx.len() >= BURST {
            self.flush();
        }
        Some(TxTok {
            tx: &mut self.tx,
            pool: &self.pool,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.mtu + netfold::wire::ethernet::HEADER_LEN;
        caps
    }
}

impl SmolDev for PacketDev {
    fn after_poll(&mut self) -> u64 {
        self.flush();
        std::mem::take(&mut self.moved)
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.sock.fd())
    }

    fn details(&self) -> Option<String> {
        let st = self.sock.stats();
        let k = self.sock.kernel_stats().unwrap_or_default();
        Some(format!(
            "rx {} frames ({} errors, {} dropped by the kernel), tx {} frames ({} dropped)",
            st.rx_frames, st.rx_errors, k.drops, st.tx_frames, st.tx_dropped
        ))
    }
}

fn v4(a: std::net::Ipv4Addr) -> Ipv4Address {
    let o = a.octets();
    Ipv4Address::new(o[0], o[1], o[2], o[3])
}

/// smoltcp client and server over the emulated link.
pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    let mut link = EmuLink::create(p, false, false)?;
    let c = packet_socket_in(link.ns(false), link.ifname(false), p.mtu, false)?;
    let s = packet_socket_in(link.ns(true), link.ifname(true), p.mtu, false)?;
    let mut net = SmolNet::with_devices(
        p,
        PacketDev::new(c, p.mtu),
        PacketDev::new(s, p.mtu),
        v4(CLIENT),
        v4(SERVER),
    );
    let mut m = super::memnet::run(&mut net, p)?;
    drop(net);
    let st = link.stop()?;
    add_stats(&mut m, &st);
    Ok(m)
}
