//! The layer's side of TCP Fast Open (RFC 7413; the protocol itself is in `tcp/fastopen.rs`):
//! the switch and key, the client's cookie cache, a listener's Fast Open queue.

use super::*;
use crate::tcp::fastopen::FastOpenKey;
use crate::tcp::{Config, Error, Handle};
use crate::wire::IpAddr;

impl TcpLayer {
    /// A Fast Open connection `i` still counted in its listener's Fast Open queue stops
    /// counting (its handshake completed, or it is freed); an active open's SYN-ACK cookie is
    /// cached. Returns whether it was a Fast Open connection.
    pub(super) fn fastopen_release(&mut self, i: u32) -> bool {
        let Some(c) = self.table.conn_at_mut(i) else {
            return false;
        };
        if let Some(seen) = c.fastopen.peer_cookie.take() {
            // An active open's SYN-ACK (RFC 7413 §4.1.3: cache its cookie and MSS).
            let server = c.remote.get().ip();
            self.fastopen.remember(server, seen);
            return true;
        }
        let Some((li, gen)) = c.fastopen.pending_in.take() else {
            return false;
        };
        if (li as usize) < self.table.slots.len() && self.table.handle_of(li).generation == gen {
            if let Some(l) = self.table.listener_at_mut(li) {
                l.fastopen_pending = l.fastopen_pending.saturating_sub(1);
            }
        }
        true
    }

    /// TCP Fast Open (RFC 7413), Linux's `net.ipv4.tcp_fastopen` bits
    /// ([`fastopen::SERVER_ENABLE`](crate::tcp::fastopen::SERVER_ENABLE), ...; default
    /// [`fastopen::DEFAULT_FLAGS`](crate::tcp::fastopen::DEFAULT_FLAGS), client and server on: a
    /// listener takes Fast Open once its [`Config::fastopen_queue`] is set). See
    /// `tcp/fastopen.rs`.
    pub fn set_fastopen(&mut self, flags: u32) {
        self.fastopen.flags = flags;
    }
    /// The Fast Open bits ([`TcpLayer::set_fastopen`]).
    pub fn fastopen(&self) -> u32 {
        self.fastopen.flags
    }
    /// The key Fast Open cookies are made with (Linux `net.ipv4.tcp_fastopen_key`); until
    /// set, one derived from the stack's secret. Cookies made under the old key stop being
    /// valid unless it is kept as the backup ([`FastOpenKey::from_bytes`] with 32 bytes).
    pub fn set_fastopen_key(&mut self, key: FastOpenKey) {
        self.fastopen.key = key;
    }
    /// Active open with TCP Fast Open (RFC 7413 §4.1, Linux `sendto(MSG_FASTOPEN)`): as
    /// [`TcpLayer::connect`], and when a cookie from this server is cached (or
    /// [`fastopen::CLIENT_NO_COOKIE`](crate::tcp::fastopen::CLIENT_NO_COOKIE) is set) the SYN
    /// carries it and the first bytes of `data` (at most the MSS less 40); otherwise the SYN
    /// asks for a cookie, which the layer caches from the SYN-ACK for the next connection.
    /// Returns the handle and how many bytes of `data` were queued (0 without a cookie, or
    /// with the client side off: send them after the handshake). A SYN-ACK that acknowledges
    /// only the SYN, or part of the data, makes the rest go again at once.
    pub fn connect_fastopen(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        config: Config,
        data: &[u8],
    ) -> Result<(Handle, usize), Error> {
        let remote = remote.into();
        let h = self.connect(now, local, remote, config)?;
        let c = self.conn(h)?;
        let (option, room) = self.fastopen.client_plan(c.remote.get().ip(), c.config.mss);
        self.conn_mut(h)?.fastopen.syn_option = option;
        let n = if room > 0 && !data.is_empty() {
            self.send_with(
                h,
                &data[..data.len().min(room)],
                crate::tcp::SendFlags::default(),
            )
            .unwrap_or(0)
        } else {
            0
        };
        self.conn_mut(h)?.fastopen.syn_data_len = n as u32;
        Ok((h, n))
    }

    /// Whether a Fast Open cookie from `server` is cached (a [`TcpLayer::connect_fastopen`]
    /// to it would carry data in its SYN).
    pub fn fastopen_cookie_cached(&self, server: IpAddr) -> bool {
        self.fastopen
            .cookies
            .get(&server)
            .is_some_and(|e| e.cookie.is_some())
    }

    /// A listener's own Fast Open key (Linux `TCP_FASTOPEN_KEY` on the socket); `None` = the
    /// layer's ([`TcpLayer::set_fastopen_key`]).
    pub fn set_listener_fastopen_key(
        &mut self,
        listener: Handle,
        key: Option<FastOpenKey>,
    ) -> Result<(), Error> {
        self.listener_mut(listener)?.fastopen_key = key;
        Ok(())
    }
}
