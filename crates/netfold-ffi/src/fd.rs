//! The descriptor table: small integers naming the sockets of one stack, each with the per-fd
//! state the BSD API keeps beside the protocol state (O_NONBLOCK, timeouts, options set before
//! the connection exists, a pending SO_ERROR, shutdown flags).

use netfold_core::iface::{PmtuDisc, UdpHandle};
use netfold_core::socket::{TcpListener, TcpStream};
use netfold_core::tcp;
use netfold_core::time::Duration;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// Descriptors per stack (memory bound; EMFILE beyond).
pub(crate) const MAX_FDS: usize = 4096;
/// The first descriptor handed out, so that netfold fds look like (and are never confused with)
/// the standard streams.
pub(crate) const FIRST_FD: i32 = 3;
/// Largest UDP payload over IPv4 (65535 - IPv4 header - UDP header).
pub(crate) const MAX_DATAGRAM: usize = 65507;
/// Largest UDP payload over IPv6 (65535 of payload length - UDP header, RFC 8200 §3): the
/// receive buffer an AF_INET6 socket needs.
pub(crate) const MAX_DATAGRAM_V6: usize = 65527;

/// Linux defaults for keepalive when SO_KEEPALIVE is switched on (tcp(7)).
pub(crate) const KEEPIDLE_DEFAULT: u32 = 7200;
pub(crate) const KEEPINTVL_DEFAULT: u32 = 75;
pub(crate) const KEEPCNT_DEFAULT: u32 = 9;

/// Options as the application set them; folded into a `tcp::Config` when applied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opts {
    pub(crate) reuseaddr: bool,
    pub(crate) keepalive: bool,
    pub(crate) keepidle: u32,
    pub(crate) keepintvl: u32,
    pub(crate) keepcnt: u32,
    pub(crate) rcvtimeo: Option<Duration>,
    pub(crate) sndtimeo: Option<Duration>,
    /// nodelay, buffers, mss and linger live here directly.
    pub(crate) cfg: tcp::Config,
    /// IP_MTU_DISCOVER (applied to the UDP socket once it exists; TCP always sets DF).
    pub(crate) pmtu_disc: PmtuDisc,
    /// TCP_INQ: recvmsg adds a TCP_CM_INQ control message (bytes left to read).
    pub(crate) inq: bool,
    /// TCP_NOTSENT_LOWAT as set; 0 = unset, which means Linux's sysctl default
    /// (`tcp_notsent_lowat`, UINT_MAX: no limit).
    pub(crate) notsent_lowat: u32,
    /// The stack's `net.ipv4.tcp_notsent_lowat` when the socket was made (`nf_set_tcp_notsent_lowat`),
    /// in force while `notsent_lowat` is unset.
    pub(crate) notsent_lowat_sysctl: u32,
    /// SO_RCVLOWAT: the bytes a blocking read waits for and poll wants queued before POLLIN
    /// (at least 1).
    pub(crate) rcvlowat: usize,
    /// TCP_FASTOPEN_CONNECT: connect() opens with TCP Fast Open.
    pub(crate) fastopen_connect: bool,
    /// TCP_FASTOPEN_KEY: the socket's own Fast Open key (given to its listener).
    pub(crate) fastopen_key: Option<netfold_core::tcp::fastopen::FastOpenKey>,
    /// IP_FREEBIND / IPV6_FREEBIND (ip(7)): bind() takes an address that is not (yet) the
    /// interface's.
    pub(crate) freebind: bool,
    /// SO_ZEROCOPY (socket(7)): `send(MSG_ZEROCOPY)` lends the buffer (`zerocopy.rs`);
    /// without it the flag is ignored and the data copied, as Linux does.
    pub(crate) zerocopy: bool,
    /// SO_MARK (socket(7)): kept and reported; netfold has no policy routing or packet
    /// filter for it to select.
    pub(crate) mark: u32,
    /// SO_TIMESTAMP / SO_TIMESTAMPNS (Linux's SOCK_RCVTSTAMP, SOCK_RCVTSTAMPNS flags).
    pub(crate) rcvtstamp: bool,
    pub(crate) rcvtstampns: bool,
    /// SO_TIMESTAMPING's flags (`timestamp.rs`).
    pub(crate) tsflags: u32,
}

impl Opts {
    pub(crate) fn new(mss: u16) -> Opts {
        Opts {
            reuseaddr: false,
            keepalive: false,
            keepidle: KEEPIDLE_DEFAULT,
            keepintvl: KEEPINTVL_DEFAULT,
            keepcnt: KEEPCNT_DEFAULT,
            rcvtimeo: None,
            sndtimeo: None,
            pmtu_disc: PmtuDisc::default(),
            inq: false,
            notsent_lowat: 0,
            notsent_lowat_sysctl: u32::MAX,
            rcvlowat: 1,
            fastopen_key: None,
            fastopen_connect: false,
            freebind: false,
            zerocopy: false,
            mark: 0,
            rcvtstamp: false,
            rcvtstampns: false,
            tsflags: 0,
            cfg: tcp::Config {
                mss,
                ..tcp::Config::default()
            },
        }
    }

    /// The TCP_NOTSENT_LOWAT threshold in force (Linux `tcp_notsent_lowat`).
    pub(crate) fn notsent_lowat(&self) -> u32 {
        if self.notsent_lowat == 0 {
            self.notsent_lowat_sysctl
        } else {
            self.notsent_lowat
        }
    }

    /// The TCP configuration these options describe.
    pub(crate) fn tcp_config(&self) -> tcp::Config {
        let mut c = self.cfg;
        c.keepalive = self.keepalive.then(|| {
            (
                Duration::from_secs(u64::from(self.keepidle)),
                Duration::from_secs(u64::from(self.keepintvl)),
                self.keepcnt,
            )
        });
        c
    }
}

#[derive(Debug)]
pub(crate) enum Tcp {
    /// Created (maybe bound), neither connecting nor listening.
    Idle,
    Listening {
        l: TcpListener,
        /// Connections already taken from the layer's accept queue (poll has to look at the
        /// queue, and the layer only offers "pop"); nf_accept serves these first.
        ready: VecDeque<(TcpStream, SocketAddr)>,
        /// listen()'s backlog: `ready` never holds more, so the engine's own queue (and its
        /// backlog limit) takes over once the application stops accepting.
        backlog: usize,
    },
    Stream(TcpStream),
}

#[derive(Debug, Default)]
pub(crate) struct Udp {
    pub(crate) h: Option<UdpHandle>,
    /// Default destination set by connect(), as the socket reports it (v4-mapped on an
    /// AF_INET6 socket).
    pub(crate) peer: Option<SocketAddr>,
    /// One datagram taken from the stack early (FIONREAD and poll need to see it; the stack
    /// only offers "pop"); the next receive returns it.
    pub(crate) stash: Option<(Vec<u8>, SocketAddr)>,
}

#[derive(Debug)]
pub(crate) enum Kind {
    Tcp(Tcp),
    Udp(Udp),
    /// An epoll instance (`nf_epoll_create1`): its interest list (`epoll.rs`).
    Epoll(Box<crate::epoll::EpollSet>),
}

#[derive(Debug)]
pub(crate) struct Sock {
    pub(crate) kind: Kind,
    /// AF_INET or AF_INET6 (nf_socket's domain): which sockaddr the socket takes and
    /// returns, and whether IPv4 addresses are reported v4-mapped.
    pub(crate) family: i32,
    pub(crate) nonblock: bool,
    pub(crate) opts: Opts,
    /// Address given to bind() (TCP; UDP binds in the stack at once), as given (a v4-mapped
    /// address stays mapped).
    pub(crate) bound: Option<SocketAddr>,
    /// The pending error reported by SO_ERROR (and once by the next read/write).
    pub(crate) so_error: Option<i32>,
    pub(crate) shut_rd: bool,
    pub(crate) shut_wr: bool,
    /// TCP_FASTOPEN_CONNECT: connect() to this address returned at once, with a Fast Open
    /// cookie cached for it; the SYN goes with the first write (Linux `defer_connect`).
    pub(crate) fastopen_deferred: Option<SocketAddr>,
    /// A non-blocking connect() returned EINPROGRESS and no later connect() has seen the
    /// outcome yet (Linux's `SS_CONNECTING`): the first connect() after the handshake
    /// returns 0, the ones after it EISCONN.
    pub(crate) connect_pending: bool,
    /// Linux `MSG_ZEROCOPY` state: send numbers, sends not yet released, and the error
    /// queue of their notifications (`zerocopy.rs`); made by the first such send.
    pub(crate) msg_zc: Option<Box<crate::zerocopy::MsgZc>>,
    /// Arrival samples for receive timestamps, while the socket asks for them
    /// (`timestamp.rs`).
    pub(crate) rx_stamps: Option<Box<crate::timestamp::RxStamps>>,
    /// Transmit timestamps asked for and their notifications (`timestamp.rs`).
    pub(crate) tx_stamps: Option<Box<crate::timestamp::TxStamps>>,
}

impl Sock {
    pub(crate) fn new(kind: Kind, family: i32, nonblock: bool, mss: u16) -> Sock {
        Sock {
            kind,
            family,
            nonblock,
            opts: Opts::new(mss),
            bound: None,
            so_error: None,
            shut_rd: false,
            shut_wr: false,
            fastopen_deferred: None,
            connect_pending: false,
            msg_zc: None,
            rx_stamps: None,
            tx_stamps: None,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct FdTable {
    slots: Vec<Option<Sock>>,
}

impl FdTable {
    pub(crate) fn new() -> FdTable {
        FdTable { slots: Vec::new() }
    }

    /// Stores `s` under the lowest free descriptor (as POSIX open/socket do).
    pub(crate) fn insert(&mut self, s: Sock) -> Result<i32, i32> {
        let i = match self.slots.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.slots.len() < MAX_FDS => {
                self.slots.push(None);
                self.slots.len() - 1
            }
            None => return Err(libc::EMFILE),
        };
        self.slots[i] = Some(s);
        Ok(i as i32 + FIRST_FD)
    }

    fn index(fd: i32) -> Option<usize> {
        fd.checked_sub(FIRST_FD)
            .and_then(|i| usize::try_from(i).ok())
    }

    pub(crate) fn get(&self, fd: i32) -> Result<&Sock, i32> {
        Self::index(fd)
            .and_then(|i| self.slots.get(i))
            .and_then(Option::as_ref)
            .ok_or(libc::EBADF)
    }

    pub(crate) fn get_mut(&mut self, fd: i32) -> Result<&mut Sock, i32> {
        Self::index(fd)
            .and_then(|i| self.slots.get_mut(i))
            .and_then(Option::as_mut)
            .ok_or(libc::EBADF)
    }

    pub(crate) fn remove(&mut self, fd: i32) -> Result<Sock, i32> {
        let s = Self::index(fd)
            .and_then(|i| self.slots.get_mut(i))
            .and_then(Option::take)
            .ok_or(libc::EBADF)?;
        // A closed descriptor leaves every epoll interest list (Linux removes it when its
        // file is released), so a later socket given the same number is not watched by
        // mistake.
        for slot in self.slots.iter_mut().flatten() {
            if let Kind::Epoll(set) = &mut slot.kind {
                set.forget(fd);
            }
        }
        while matches!(self.slots.last(), Some(None)) {
            self.slots.pop();
        }
        Ok(s)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Sock> {
        self.slots.iter().flatten()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Sock> {
        self.slots.iter_mut().flatten()
    }

    pub(crate) fn drain(&mut self) -> Vec<Sock> {
        self.slots.drain(..).flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free_descriptor_is_reused_and_table_is_bounded() {
        let mut t = FdTable::new();
        let mk = || Sock::new(Kind::Udp(Udp::default()), libc::AF_INET, false, 1460);
        assert_eq!(t.insert(mk()), Ok(3));
        assert_eq!(t.insert(mk()), Ok(4));
        assert_eq!(t.insert(mk()), Ok(5));
        assert!(t.remove(4).is_ok());
        assert_eq!(t.remove(4).err(), Some(libc::EBADF));
        assert_eq!(t.insert(mk()), Ok(4));
        assert_eq!(t.get(2).err(), Some(libc::EBADF));
        assert_eq!(t.get(-1).err(), Some(libc::EBADF));
        assert_eq!(t.get(i32::MAX).err(), Some(libc::EBADF));
        for _ in 3..MAX_FDS {
            t.insert(mk()).unwrap();
        }
        assert_eq!(t.insert(mk()), Err(libc::EMFILE));
    }

    #[test]
    fn keepalive_options_fold_into_the_tcp_config() {
        let mut o = Opts::new(1000);
        assert_eq!(o.tcp_config().keepalive, None);
        o.keepalive = true;
        o.keepidle = 10;
        o.keepintvl = 2;
        o.keepcnt = 3;
        let c = o.tcp_config();
        assert_eq!(
            c.keepalive,
            Some((Duration::from_secs(10), Duration::from_secs(2), 3))
        );
        assert_eq!(c.mss, 1000);
    }
}
