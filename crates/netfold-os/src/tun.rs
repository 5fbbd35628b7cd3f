//! A Linux TUN device (`/dev/net/tun`, `IFF_TUN`): bare IP packets between netfold and the
//! kernel's own stack (medium [`Medium::Ip`], no link header, no ARP), with the same
//! virtio-net offloads as the [`Tap`](crate::tap::Tap): checksum offload and TSO4 when sending,
//! kernel GSO super-packets (taken whole, or cut in software) when receiving. This is the
//! device VPN clients and tun2socks-style tools run a user-space stack behind.
//!
//! Opening is the TAP's (`IFF_TUN | IFF_NO_PI | IFF_VNET_HDR`, `TUNSETVNETHDRSZ`,
//! `TUNSETOFFLOAD`), and so is the configuration ([`TapConfig`]) and the counters
//! ([`TapStats`]).
//!
//! Offloads: the vnet helpers ([`crate::vnet`]) read Ethernet frames. A packet is given a
//! 14-byte stand-in Ethernet header in its buffer's headroom for them (no copy: the stack
//! leaves headroom in front of every packet, and received packets are read in behind it), and
//! the header's offsets (`csum_start`, `hdr_len`), which the kernel counts from the IP header
//! on a TUN, are moved by those 14 bytes at the boundary. The stand-in is stripped again before
//! a packet leaves the device either way.
//!
//! The descriptor is non-blocking; [`Tun::wait`] sleeps in `poll(2)` until a packet is
//! readable. The interface is not persistent: it disappears with its last descriptor.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use crate::tap::{
    deliver_rx, interface_mtu, open_tun_tap, read_frame, wait_readable, write_frame, Io, TapConfig,
    TapStats,
};
use crate::vnet::{self, VnetHdr, VNET_HDR_LEN};
use netfold::buf::{Csum, PacketBuf, Pool};
use netfold::phy::{ChecksumCaps, Device, DeviceCaps, Medium};
use netfold::time::{Duration, Instant};
use netfold::wire::ethernet::{self, EtherType, EthernetAddress, EthernetFrame};
use netfold::wire::ip_version;
use netfold::wire::ipv4::MAX_PACKET_LEN;

/// Bytes of the stand-in Ethernet header (two MAC addresses and the EtherType, IEEE 802.3).
const ETH_LEN: usize = ethernet::HEADER_LEN;
/// Largest IPv4 packet (total length is 16 bits, RFC 791 §3.1): bounds a GSO packet.
const MAX_IP_PACKET: usize = MAX_PACKET_LEN;

/// One TUN interface. See the module documentation.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
    config: TapConfig,
    mtu: usize,
    stats: TapStats,
}

/// Writes the stand-in Ethernet header for the IP packet that follows it in `frame`: zero
/// addresses and the EtherType of the packet's IP version.
fn fill_stand_in(frame: &mut [u8]) {
    let ethertype = match frame.get(ETH_LEN..).and_then(ip_version) {
        Some(6) => EtherType::Ipv6,
        _ => EtherType::Ipv4,
    };
    let mut f = EthernetFrame::new_unchecked(frame);
    f.set_dst_addr(EthernetAddress::default());
    f.set_src_addr(EthernetAddress::default());
    f.set_ethertype(ethertype);
}

/// Removes the stand-in header from a received packet; a partial checksum's start moves with
/// it, back to the kernel's IP-relative offset.
fn strip_stand_in(p: &mut PacketBuf) {
    p.advance(ETH_LEN);
    if let Csum::Partial { start, offset } = p.csum() {
        p.set_csum(Csum::Partial {
            start: start.saturating_sub(ETH_LEN as u16),
            offset,
        });
    }
}

/// Moves the header's offsets by `delta` bytes (+14: kernel's IP-relative offsets to the
/// stand-in frame's; -14: back). `None` if an offset would leave its `u16` range.
fn shift_offsets(h: &VnetHdr, delta: i32) -> Option<VnetHdr> {
    let shift = |v: u16| u16::try_from(i32::from(v) + delta).ok();
    let mut out = *h;
    if h.flags & vnet::F_NEEDS_CSUM != 0 {
        out.csum_start = shift(h.csum_start)?;
    }
    if h.gso_kind() != vnet::GSO_NONE {
        out.hdr_len = shift(h.hdr_len)?;
    }
    Some(out)
}

impl Tun {
    /// Opens (creating if needed) TUN interface `name` ("nfu%d" lets the kernel pick a number).
    pub fn open(name: &str, config: TapConfig) -> io::Result<Tun> {
        let (fd, name) = open_tun_tap(name, libc::IFF_TUN, config.offloads)?;
        let mtu = match config.mtu {
            Some(m) => m,
            None => interface_mtu(&name).unwrap_or(1500),
        };
        Ok(Tun {
            fd,
            name,
            config,
            mtu: mtu.clamp(68, MAX_IP_PACKET),
            stats: TapStats::default(),
        })
    }

    /// The interface name the kernel gave (or kept).
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn config(&self) -> TapConfig {
        self.config
    }
    pub fn mtu(&self) -> usize {
        self.mtu
    }
    /// Changes the MTU reported in the caps (e.g. after `ip link set mtu` on the kernel side).
    pub fn set_mtu(&mut self, mtu: usize) {
        self.mtu = mtu.clamp(68, MAX_IP_PACKET);
    }
    pub fn stats(&self) -> TapStats {
        self.stats
    }
    /// Sleeps until a packet is readable or `timeout` passes; returns whether one is.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        wait_readable(self.fd.as_fd(), timeout)
    }

    /// Largest packet a read may return: a GSO super-packet with offloads on, else one MTU.
    fn max_packet(&self) -> usize {
        if self.config.offloads {
            MAX_IP_PACKET
        } else {
            self.mtu
        }
    }

    /// Sends one IP packet with offloads: partial checksum and TSO described in the header.
    fn send_offloaded(&mut self, f: &mut PacketBuf) -> Io {
        if f.headroom() < ETH_LEN {
            // Not from a stack's pool (which always leaves headroom): copied once into a
            // buffer that has room for the stand-in.
            let mut copy = PacketBuf::with_capacity(ETH_LEN + f.len());
            copy.append(ETH_LEN);
            copy.extend_from_slice(f.as_slice());
            copy.advance(ETH_LEN);
            *f = copy;
        }
        f.prepend(ETH_LEN);
        fill_stand_in(f.as_mut_slice());
        let h = vnet::prepare_tx(f.as_mut_slice(), self.mtu, true, &mut self.stats.offload);
        f.advance(ETH_LEN);
        match shift_offsets(&h, -(ETH_LEN as i32)) {
            Some(h) => write_frame(self.fd.as_fd(), &h.to_bytes(), f.as_slice()),
            None => Io::Failed,
        }
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Device for Tun {
    fn readable_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn caps(&self) -> DeviceCaps {
        let off = self.config.offloads;
        DeviceCaps {
            medium: Medium::Ip,
            mtu: self.mtu,
            // With offloads on, the device guarantees checksums at the boundary (vnet.rs).
            checksum: ChecksumCaps { tx: !off, rx: !off },
            tso: off,
            gro: off && self.config.gro,
            max_burst: self.config.max_burst.max(1),
        }
    }

    fn recv_batch(
        &mut self,
        _now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let max_packet = self.max_packet();
        let mut appended = 0;
        let mut reads = 0;
        while reads < max {
            let mut buf = pool.get();
            // Room for the stand-in header in front, and one byte more than the largest
            // packet behind, so a truncated read is detectable.
            buf.set_len(ETH_LEN + max_packet + 1);
            let mut hdr = [0u8; VNET_HDR_LEN];
            let n = match read_frame(
                self.fd.as_fd(),
                &mut hdr,
                &mut buf.as_mut_slice()[ETH_LEN..],
            ) {
                Io::Done(n) => n,
                Io::WouldBlock => {
                    pool.put(buf);
                    break;
                }
                Io::Failed => {
                    self.stats.rx_errors += 1;
                    pool.put(buf);
                    break;
                }
            };
            reads += 1;
            let parsed = VnetHdr::parse(&hdr).and_then(|h| shift_offsets(&h, ETH_LEN as i32));
            let (Some(h), Some(len)) = (parsed, n.checked_sub(VNET_HDR_LEN)) else {
                self.stats.rx_errors += 1;
                pool.put(buf);
                continue;
            };
            if len == 0 || len > max_packet {
                self.stats.rx_errors += 1;
                pool.put(buf);
                continue;
            }
            buf.truncate(ETH_LEN + len);
            fill_stand_in(buf.as_mut_slice());
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += len as u64;
            let first = out.len();
            let k = deliver_rx(
                &h,
                buf,
                self.config.offloads,
                self.config.gro,
                pool,
                &mut self.stats.offload,
                out,
            );
            // Every packet delivered (the read one or its software-GSO pieces, which copy the
            // stand-in header) loses the stand-in again.
            for p in &mut out[first..] {
                strip_stand_in(p);
            }
            appended += k;
        }
        appended
    }

    fn send_batch(&mut self, _now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        for mut f in frames.drain(..) {
            let r = if self.config.offloads {
                self.send_offloaded(&mut f)
            } else {
                write_frame(
                    self.fd.as_fd(),
                    &VnetHdr::default().to_bytes(),
                    f.as_slice(),
                )
            };
            match r {
                Io::Done(n) if n == VNET_HDR_LEN + f.len() => {
                    self.stats.tx_frames += 1;
                    self.stats.tx_bytes += f.len() as u64;
                }
                _ => self.stats.tx_dropped += 1,
            }
            pool.put(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_move_by_the_stand_in_and_back() {
        let h = VnetHdr {
            flags: vnet::F_NEEDS_CSUM,
            gso_type: vnet::GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        let framed = shift_offsets(&h, ETH_LEN as i32).unwrap();
        assert_eq!((framed.csum_start, framed.hdr_len), (34, 66));
        assert_eq!(shift_offsets(&framed, -(ETH_LEN as i32)), Some(h));
        // Offsets the header does not use are left alone, and none may underflow.
        assert_eq!(
            shift_offsets(&VnetHdr::default(), -14),
            Some(VnetHdr::default())
        );
        let bad = VnetHdr {
            flags: vnet::F_NEEDS_CSUM,
            csum_start: 4,
            ..VnetHdr::default()
        };
        assert_eq!(shift_offsets(&bad, -14), None);
    }

    #[test]
    fn stand_in_header_follows_the_ip_version() {
        let mut f = [0xffu8; ETH_LEN + 1];
        f[ETH_LEN] = 0x45;
        fill_stand_in(&mut f);
        assert_eq!(
            &f[..ETH_LEN],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00]
        );
        f[ETH_LEN] = 0x60;
        fill_stand_in(&mut f);
        assert_eq!(&f[12..ETH_LEN], &[0x86, 0xdd]);
    }

    #[test]
    fn a_partial_checksum_start_follows_the_stand_in_out() {
        let mut p = PacketBuf::from_slice(&[0u8; ETH_LEN + 40]);
        // What deliver_rx marks for a header shifted by +14 (kernel csum_start 20: the TCP
        // header after a 20-byte IPv4 header).
        p.set_csum(Csum::Partial {
            start: 34,
            offset: 16,
        });
        strip_stand_in(&mut p);
        assert_eq!(p.len(), 40);
        assert_eq!(
            p.csum(),
            Csum::Partial {
                start: 20,
                offset: 16
            }
        );
        let mut q = PacketBuf::from_slice(&[0u8; ETH_LEN + 40]);
        q.set_csum(Csum::Verified);
        strip_stand_in(&mut q);
        assert_eq!(q.csum(), Csum::Verified);
    }

    #[test]
    fn bad_interface_names_are_errors() {
        assert!(Tun::open("a-name-much-too-long-for-ifnamsiz", TapConfig::default()).is_err());
    }
}
