//! TCP on the driver: [`TcpStream`] (`AsyncRead + AsyncWrite`, split halves) and
//! [`TcpListener`].

use crate::driver::{Net, Shared};
use crate::wakers::Dir;
use netfold::socket::{TcpListener as NbListener, TcpStream as NbStream};
use netfold::tcp;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection's handle and the driver it lives on. Dropping the last reference closes the
/// connection (FIN; RST if unread data is left, as close(2) does).
struct Conn {
    shared: Arc<Shared>,
    sock: NbStream,
}

impl Conn {
    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let s = self.sock;
        let n = std::task::ready!(self.shared.poll_op(
            cx,
            |st| s.read(st, buf.initialize_unfilled()),
            |w, waker| w.stream(s, Dir::Read, waker),
            // Reading frees window: the driver may owe the peer a window update.
            |&n| n > 0,
        ))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let s = self.sock;
        self.shared.poll_op(
            cx,
            |st| s.write(st, data),
            |w, waker| w.stream(s, Dir::Write, waker),
            |_| true,
        )
    }

    /// shutdown(SHUT_WR): the FIN follows the queued data.
    fn shutdown(&self) -> io::Result<()> {
        self.shared.stopped()?;
        let r = self.sock.shutdown_write(&mut self.shared.lock().stack);
        self.shared.kick();
        r
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut netfold::iface::Stack) -> io::Result<T>,
    ) -> io::Result<T> {
        f(&mut self.shared.lock().stack)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ = self.sock.close(&mut self.shared.lock().stack);
        self.shared.kick();
    }
}

/// A TCP connection on a netfold stack: `AsyncRead + AsyncWrite`, usable with everything in
/// `tokio::io` (`copy_bidirectional`, `BufReader`, ...). Dropping it closes the connection.
pub struct TcpStream {
    conn: Arc<Conn>,
}

impl TcpStream {
    /// Connects to `remote` with the default TCP configuration.
    pub async fn connect(net: &Net, remote: impl Into<SocketAddr>) -> io::Result<TcpStream> {
        TcpStream::connect_with(net, remote, tcp::Config::default()).await
    }

    /// Connects to `remote`, waiting until the handshake completes or fails (refused, reset,
    /// timed out by the stack's SYN retries).
    pub async fn connect_with(
        net: &Net,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        TcpStream::open(net, |st, now| NbStream::connect(st, now, remote, config)).await
    }

    /// [`TcpStream::connect_with`] from the explicit local port `local_port`, as `bind` before
    /// `connect` does with kernel sockets. Fails at once with `AddrInUse` if that 4-tuple is
    /// taken (also by a connection in TIME-WAIT), so a caller choosing ports (a shard,
    /// [`crate::Shards::connect_on`]) moves on to the next.
    pub async fn connect_from(
        net: &Net,
        local_port: u16,
        remote: impl Into<SocketAddr>,
        config: tcp::Config,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        TcpStream::open(net, |st, now| {
            NbStream::connect_from(st, now, local_port, remote, config)
        })
        .await
    }

    /// Opens a connection with `open` and waits until it is established or failed.
    async fn open(
        net: &Net,
        open: impl FnOnce(&mut netfold::iface::Stack, netfold::time::Instant) -> io::Result<NbStream>,
    ) -> io::Result<TcpStream> {
        let shared = Arc::clone(&net.shared);
        shared.stopped()?;
        let now = shared.now();
        let sock = open(&mut shared.lock().stack, now)?;
        shared.kick();
        // From here a dropped future (or a failed handshake) closes the handle.
        let conn = Arc::new(Conn { shared, sock });
        poll_fn(|cx| {
            conn.shared.poll_op(
                cx,
                |st| match sock.is_connected(st)? {
                    true => Ok(()),
                    false => Err(io::ErrorKind::WouldBlock.into()),
                },
                |w, waker| w.stream(sock, Dir::Write, waker),
                |_| false,
            )
        })
        .await?;
        Ok(TcpStream { conn })
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.conn.with(|st| self.conn.sock.peer_addr(st))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.conn.with(|st| self.conn.sock.local_addr(st))
    }

    /// TCP_NODELAY: send small segments at once instead of waiting for Nagle's algorithm.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.conn.with(|st| self.conn.sock.set_nodelay(st, nodelay))
    }

    /// The connection's state, options, RTT, congestion window and counters in the terms of
    /// Linux's `struct tcp_info` (getsockopt TCP_INFO).
    pub fn tcp_info(&self) -> io::Result<netfold::tcp::TcpInfo> {
        let now = self.conn.shared.now();
        self.conn.with(|st| {
            st.tcp()
                .tcp_info(self.conn.sock.handle(), now)
                .map_err(netfold::socket::io_error)
        })
    }

    pub fn nodelay(&self) -> io::Result<bool> {
        self.conn.with(|st| {
            st.tcp()
                .config(self.conn.sock.handle())
                .map(|c| c.nodelay)
                .map_err(netfold::socket::io_error)
        })
    }

    /// Borrowed halves, for a reader and a writer in one task (e.g. under `tokio::join!`).
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (
            ReadHalf { conn: &self.conn },
            WriteHalf { conn: &self.conn },
        )
    }

    /// Owned halves, for a reader and a writer in two tasks. Dropping the write half sends
    /// FIN (as tokio's does); the connection closes when both are gone.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (
            OwnedReadHalf {
                conn: Arc::clone(&self.conn),
            },
            OwnedWriteHalf { conn: self.conn },
        )
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.conn.poll_read(cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.conn.poll_write(cx, data)
    }
    /// `write` hands data to the stack; there is no buffer of ours to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    /// Sends FIN after the queued data (shutdown(SHUT_WR)); reading stays open.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.conn.shutdown())
    }
}

/// The read half of [`TcpStream::split`].
pub struct ReadHalf<'a> {
    conn: &'a Conn,
}

/// The write half of [`TcpStream::split`]; `poll_shutdown` sends FIN.
pub struct WriteHalf<'a> {
    conn: &'a Conn,
}

/// The read half of [`TcpStream::into_split`].
pub struct OwnedReadHalf {
    conn: Arc<Conn>,
}

/// The write half of [`TcpStream::into_split`]; dropping it sends FIN.
pub struct OwnedWriteHalf {
    conn: Arc<Conn>,
}

impl OwnedReadHalf {
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.conn.with(|st| self.conn.sock.peer_addr(st))
    }
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.conn.with(|st| self.conn.sock.local_addr(st))
    }
}

impl OwnedWriteHalf {
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.conn.with(|st| self.conn.sock.peer_addr(st))
    }
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.conn.with(|st| self.conn.sock.local_addr(st))
    }
}

impl Drop for OwnedWriteHalf {
    /// shutdown(SHUT_WR) is idempotent in the stack, so after `poll_shutdown` this is a no-op.
    fn drop(&mut self) {
        let _ = self.conn.shutdown();
    }
}

macro_rules! read_half {
    ($t:ty) => {
        impl AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                self.conn.poll_read(cx, buf)
            }
        }
    };
}

macro_rules! write_half {
    ($t:ty) => {
        impl AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                data: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.conn.poll_write(cx, data)
            }
            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
            fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(self.conn.shutdown())
            }
        }
    };
}

read_half!(ReadHalf<'_>);
read_half!(OwnedReadHalf);
write_half!(WriteHalf<'_>);
write_half!(OwnedWriteHalf);

/// A listening TCP socket on a netfold stack.
pub struct TcpListener {
    shared: Arc<Shared>,
    sock: NbListener,
}

impl TcpListener {
    /// Listens on `local` (0.0.0.0 = the stack's address; `[::]` dual-stack) with the default TCP configuration
    /// and the largest backlog the stack allows (as listen(2) with SOMAXCONN).
    pub async fn bind(net: &Net, local: impl Into<SocketAddr>) -> io::Result<TcpListener> {
        TcpListener::bind_with(net, local, usize::MAX, tcp::Config::default()).await
    }

    /// Listens on `local` with at most `backlog` connections waiting to be accepted (the stack
    /// caps it) and `config` for the accepted connections.
    pub async fn bind_with(
        net: &Net,
        local: impl Into<SocketAddr>,
        backlog: usize,
        config: tcp::Config,
    ) -> io::Result<TcpListener> {
        let local = local.into();
        let shared = Arc::clone(&net.shared);
        shared.stopped()?;
        let sock = NbListener::bind(&mut shared.lock().stack, local, backlog, config)?;
        Ok(TcpListener { shared, sock })
    }

    /// Waits for the next established connection.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for the next established connection: `Pending` registers the task's waker, which
    /// the driver wakes when one is ready (what waiting on several listeners at once needs,
    /// as [`crate::ShardedListener::accept`] does).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let l = self.sock;
        let (sock, peer) = std::task::ready!(self.shared.poll_op(
            cx,
            |st| l.accept(st),
            |w, waker| w.listener(l, waker),
            |_| false,
        ))?;
        let conn = Arc::new(Conn {
            shared: Arc::clone(&self.shared),
            sock,
        });
        Poll::Ready(Ok((TcpStream { conn }, peer)))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr(&self.shared.lock().stack)
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let _ = self.sock.close(&mut self.shared.lock().stack);
        self.shared.kick();
    }
}
