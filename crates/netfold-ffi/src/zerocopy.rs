//! Zero-copy send for C (`nf_send_zc`, `nf_sendfile_zc`, `nf_zc_completions`): the caller's
//! buffer (or a mapping of a file) is lent to the connection instead of copied
//! (`netfold::tcp::zerocopy`), and each one comes back as a completion carrying the caller's
//! cookie once the stack has released it, as Linux `MSG_ZEROCOPY` notifications do
//! (`Documentation/networking/msg_zerocopy.rst`; netfold reports one completion per buffer
//! with its cookie rather than ranges of sequence numbers).
//!
//! The engine keeps each socket's completion queue here from its first zero-copy send until
//! every buffer is released and every completion taken, also after `nf_close`: a buffer may
//! outlive its descriptor (the close sends the queued data first), and the application needs
//! its completion to know when it may reuse the memory. `nf_zc_completions(s, -1, ...)` takes
//! them from every socket, open or closed.

use crate::engine::Engine;
use crate::errno::{tcp_errno, R};
use crate::fd::{Kind, Tcp};
use crate::ops::{blocking, Dir};
use netfold_core::buf::ZcBuf;
use netfold_core::tcp::{self, ZcCompletion, ZcCompletions};

/// One socket's completion queue.
#[derive(Debug)]
struct Sink {
    fd: i32,
    handle: tcp::Handle,
    done: ZcCompletions,
}

/// The completion queues of one stack's sockets.
#[derive(Debug, Default)]
pub(crate) struct ZcRegistry {
    sinks: Vec<Sink>,
}

impl ZcRegistry {
    fn sink(
        &mut self,
        fd: i32,
        handle: tcp::Handle,
        done: impl FnOnce() -> R<ZcCompletions>,
    ) -> R<&ZcCompletions> {
        let i = match self
            .sinks
            .iter()
            .position(|s| s.fd == fd && s.handle == handle)
        {
            Some(i) => i,
            None => {
                self.sinks.push(Sink {
                    fd,
                    handle,
                    done: done()?,
                });
                self.sinks.len() - 1
            }
        };
        Ok(&self.sinks[i].done)
    }
}

/// A completion as C sees it: the socket, the cookie, the bytes, and 0 or ECONNABORTED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Done {
    pub(crate) fd: i32,
    pub(crate) cookie: u64,
    pub(crate) len: u64,
    pub(crate) status: i32,
}

fn done_of(fd: i32, c: ZcCompletion) -> Done {
    Done {
        fd,
        cookie: c.user,
        len: c.len as u64,
        status: if c.acked { 0 } else { libc::ECONNABORTED },
    }
}

/// Lends `buf` to TCP socket `fd`; the bytes taken (a prefix). Blocking sockets wait for
/// room (SO_SNDTIMEO, then EAGAIN); ENOBUFS when completions must be taken first.
pub(crate) fn send_zc(e: &Engine, fd: i32, buf: ZcBuf, cookie: u64, flags: i32) -> R<usize> {
    let known = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    if flags & !known != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    blocking(e, fd, Dir::Tx, dontwait, |st, _, progress| {
        let s = st.fds.get_mut(fd)?;
        if let Some(err) = s.so_error.take() {
            return Err(err);
        }
        if s.shut_wr {
            return Err(libc::EPIPE);
        }
        let ts = match &s.kind {
            Kind::Tcp(Tcp::Stream(ts)) => *ts,
            Kind::Tcp(_) => return Err(libc::ENOTCONN),
            Kind::Udp(_) => return Err(libc::EOPNOTSUPP),
            Kind::Epoll(_) => return Err(libc::ENOTSOCK),
        };
        let stack = &mut st.stack;
        let done = st
            .zc
            .sink(fd, ts.handle(), || {
                stack
                    .tcp_mut()
                    .zc_completions(ts.handle())
                    .map_err(tcp_errno)
            })?
            .clone();
        match stack.tcp_mut().send_zc(ts.handle(), buf.clone(), cookie) {
            Ok(sent) => {
                *progress = true;
                Ok(sent.len)
            }
            Err(tcp::Error::WouldBlock) if done.at_limit() => Err(libc::ENOBUFS),
            Err(err) => Err(tcp_errno(err)),
        }
    })
}

/// Takes up to `max` completions of socket `fd` (every socket, closed ones included, for
/// `fd == -1`), oldest first per socket; forgets the queues of closed sockets once they are
/// empty and nothing is outstanding.
pub(crate) fn completions(e: &Engine, fd: i32, max: usize) -> R<Vec<Done>> {
    let mut g = e.lock();
    let st = &mut *g;
    let handle = if fd == -1 {
        None
    } else {
        match &st.fds.get(fd)?.kind {
            Kind::Tcp(Tcp::Stream(ts)) => Some(ts.handle()),
            _ => return Ok(Vec::new()),
        }
    };
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    for s in &st.zc.sinks {
        if out.len() >= max {
            break;
        }
        if handle.is_some_and(|h| s.fd != fd || s.handle != h) {
            continue;
        }
        s.done.take(&mut scratch, max - out.len());
        out.extend(scratch.drain(..).map(|c| done_of(s.fd, c)));
    }
    // A queue whose socket is gone (closed, or its slot reused) and which holds nothing more
    // is dropped.
    let fds = &st.fds;
    st.zc.sinks.retain(|s| {
        let open = matches!(
            fds.get(s.fd).map(|k| &k.kind),
            Ok(Kind::Tcp(Tcp::Stream(ts))) if ts.handle() == s.handle
        );
        open || !s.done.is_idle()
    });
    Ok(out)
}
