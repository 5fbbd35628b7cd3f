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

use crate::engine::{Engine, State};
use crate::errno::{tcp_errno, R};
use crate::fd::{Kind, Tcp};
use crate::ops::{blocking, Dir};
use netfold_core::buf::ZcBuf;
use netfold_core::phy::Device;
use netfold_core::tcp::{self, ZcCompletion, ZcCompletions};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// One socket's completion queue.
#[derive(Debug)]
struct Sink {
    fd: i32,
    handle: tcp::Handle,
    done: ZcCompletions,
    /// Completions of `nf_send_zc` buffers taken from `done` while looking for those of
    /// `MSG_ZEROCOPY` sends (`pump`): `nf_zc_completions` returns these first.
    held: VecDeque<ZcCompletion>,
    /// Buffer ids (`ZcSend::id`) lent by `MSG_ZEROCOPY` sends -> the send's number.
    linux: HashMap<u64, u32>,
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
                    held: VecDeque::new(),
                    linux: HashMap::new(),
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
    if let Some(fd) = (fd != -1).then_some(fd) {
        pump(st, fd);
    } else {
        let open: Vec<i32> = st.zc.sinks.iter().map(|s| s.fd).collect();
        for fd in open {
            pump(st, fd);
        }
    }
    for s in &mut st.zc.sinks {
        if out.len() >= max {
            break;
        }
        if handle.is_some_and(|h| s.fd != fd || s.handle != h) {
            continue;
        }
        while out.len() < max {
            let Some(c) = s.held.pop_front() else { break };
            out.push(done_of(s.fd, c));
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
        open || !s.done.is_idle() || !s.held.is_empty()
    });
    Ok(out)
}

/// One notification on a socket's error queue: the send numbers `lo..=hi` (Linux
/// `ee_info..ee_data`), all released, and whether their data was copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) lo: u32,
    pub(crate) hi: u32,
    pub(crate) copied: bool,
}

/// A `MSG_ZEROCOPY` send not yet released.
#[derive(Debug, Clone, Copy)]
struct Open {
    /// Buffers it lent that the stack still holds.
    left: u32,
    /// The send call is still lending (a blocking send waiting for room).
    lending: bool,
    copied: bool,
}

/// Linux `MSG_ZEROCOPY` state of one socket (`Documentation/networking/msg_zerocopy.rst`):
/// every send with the flag (on a socket with SO_ZEROCOPY, of at least one byte) gets the next
/// 32-bit number (`sk_zckey`); once the stack has released every buffer it lent, the number
/// goes to the error queue, where consecutive numbers merge into one range as Linux's
/// `skb_zerocopy_notify_extend` merges them; `recvmsg(MSG_ERRQUEUE)` takes one range per call.
/// Dropped with the descriptor: notifications of a closed socket are lost, as Linux drops
/// them for a dead socket.
#[derive(Debug, Default)]
pub(crate) struct MsgZc {
    next: u32,
    open: BTreeMap<u32, Open>,
    errq: VecDeque<Note>,
}

impl MsgZc {
    /// Notifications waiting.
    pub(crate) fn pending(&self) -> bool {
        !self.errq.is_empty()
    }

    /// The oldest notification (`ip_recv_error` dequeues one skb per call).
    pub(crate) fn take(&mut self) -> Option<Note> {
        self.errq.pop_front()
    }

    fn start(&mut self, copied: bool) -> u32 {
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.open.insert(
            id,
            Open {
                left: 0,
                lending: true,
                copied,
            },
        );
        id
    }

    /// The send call `id` returned having taken `bytes`: a send that took nothing gives its
    /// number back (Linux `net_zcopy_put_abort` decrements `sk_zckey`), one whose buffers are
    /// all released already is notified now.
    fn finish(&mut self, id: u32, bytes: usize) {
        let Some(o) = self.open.get_mut(&id) else {
            return;
        };
        o.lending = false;
        if o.left > 0 {
            return;
        }
        let copied = o.copied;
        self.open.remove(&id);
        if bytes == 0 {
            if self.next == id.wrapping_add(1) {
                self.next = id;
            }
        } else {
            self.post(id, copied);
        }
    }

    fn release(&mut self, id: u32) {
        let Some(o) = self.open.get_mut(&id) else {
            return;
        };
        o.left = o.left.saturating_sub(1);
        if o.left == 0 && !o.lending {
            let copied = o.copied;
            self.open.remove(&id);
            self.post(id, copied);
        }
    }

    /// Linux `__msg_zerocopy_callback`: extends the newest notification when `id` follows
    /// it and the range stays below 2^32 numbers (`skb_zerocopy_notify_extend`), else queues
    /// a new one. netfold also keeps copied and zero-copy ranges apart, so that ee_code
    /// describes every number of a range.
    fn post(&mut self, id: u32, copied: bool) {
        if let Some(t) = self.errq.back_mut() {
            let len = u64::from(t.hi.wrapping_sub(t.lo)) + 1;
            if t.copied == copied && id == t.hi.wrapping_add(1) && len + 1 < (1u64 << 32) {
                t.hi = id;
                return;
            }
        }
        self.errq.push_back(Note {
            lo: id,
            hi: id,
            copied,
        });
    }
}

/// Moves the released buffers of socket `fd`'s connection from the stack's completion queue:
/// those of `MSG_ZEROCOPY` sends to the socket's error queue (dropped if the socket is gone),
/// those of `nf_send_zc` aside for `nf_zc_completions`.
pub(crate) fn pump(st: &mut State, fd: i32) {
    // Only sockets that used MSG_ZEROCOPY (and closed ones, swept by `completions(-1)`) have
    // buffers to route: poll and epoll call this for every descriptor they look at.
    if st.zc.sinks.is_empty() || st.fds.get(fd).is_ok_and(|s| s.msg_zc.is_none()) {
        return;
    }
    let State { fds, zc, .. } = st;
    for sink in zc.sinks.iter_mut().filter(|k| k.fd == fd) {
        if sink.linux.is_empty() {
            continue;
        }
        let mut got = Vec::new();
        sink.done.take(&mut got, usize::MAX);
        let mut owner = fds.get_mut(fd).ok().and_then(|s| match &s.kind {
            Kind::Tcp(Tcp::Stream(ts)) if ts.handle() == sink.handle => s.msg_zc.as_deref_mut(),
            _ => None,
        });
        for c in got {
            match sink.linux.remove(&c.id) {
                Some(n) => {
                    if let Some(z) = owner.as_deref_mut() {
                        z.release(n);
                    }
                }
                None => sink.held.push_back(c),
            }
        }
    }
}

/// `send`/`sendmsg` with `MSG_ZEROCOPY` (Linux `tcp_sendmsg_locked` with a `ubuf_info`).
/// Without SO_ZEROCOPY, or for an empty send, the flag is ignored (Linux: "if
/// (sock_flag(sk, SOCK_ZEROCOPY))"). A connected TCP socket lends each buffer to the
/// connection (`nf_send_zc`) and the send's notification is queued once the stack has
/// released all of them; anything else (UDP, a Fast Open connect, MSG_MORE/MSG_EOR) is
/// copied and notified at once with `copied`, as Linux reports a send it had to copy.
/// A blocking socket waits until every byte is taken, as `send` does. `lent` is `data`'s
/// non-empty slices, lent (`cabi::lend`) by the caller, whose contract keeps them readable
/// and unmodified until the notification.
pub(crate) fn msg_send(
    e: &Engine,
    fd: i32,
    data: &[&[u8]],
    lent: &[ZcBuf],
    flags: i32,
    to: Option<std::net::SocketAddr>,
) -> R<usize> {
    let plain = flags & !libc::MSG_ZEROCOPY;
    let want: usize = data.iter().map(|d| d.len()).sum();
    let (on, lendable, copied) = {
        let g = e.lock();
        let s = g.fds.get(fd)?;
        let lendable = matches!(s.kind, Kind::Tcp(Tcp::Stream(_)))
            && s.fastopen_deferred.is_none()
            && to.is_none()
            && plain & !(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) == 0;
        // Linux (`tcp_sendmsg_locked`): without scatter-gather on the route the data is
        // copied and the notification says so. Here: a link whose frames cannot carry
        // fragments, or that leaves the checksum to the stack, gets one copy of the payload
        // into each frame (`iface`), so its notifications say SO_EE_CODE_ZEROCOPY_COPIED.
        // (`iface/tcp.rs` refers to the buffers only when the device does scatter-gather and
        // completes the checksums itself, `checksum.tx == false`.)
        let copied = !g.dev.scatter_gather() || g.dev.caps().checksum.tx;
        (s.opts.zerocopy && want > 0, lendable, copied)
    };
    if !on {
        return crate::ops::send(e, fd, data, plain, to);
    }
    if !lendable {
        let n = crate::ops::send(e, fd, data, plain, to)?;
        let mut g = e.lock();
        let z = g
            .fds
            .get_mut(fd)?
            .msg_zc
            .get_or_insert_with(Default::default);
        let id = z.start(true);
        z.finish(id, n);
        return Ok(n);
    }
    let id = {
        let mut g = e.lock();
        let st = &mut *g;
        pump(st, fd);
        let s = st.fds.get_mut(fd)?;
        s.msg_zc.get_or_insert_with(Default::default).start(copied)
    };
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    let nonblock = dontwait || e.lock().fds.get(fd)?.nonblock;
    let mut done = 0usize;
    let r = blocking(e, fd, Dir::Tx, dontwait, |st, _, progress| {
        let s = st.fds.get_mut(fd)?;
        if let Some(err) = s.so_error.take() {
            return Err(err);
        }
        if s.shut_wr {
            return Err(libc::EPIPE);
        }
        let Kind::Tcp(Tcp::Stream(ts)) = &s.kind else {
            return Err(libc::ENOTCONN);
        };
        let ts = *ts;
        let stack = &mut st.stack;
        let sink_done = st
            .zc
            .sink(fd, ts.handle(), || {
                stack
                    .tcp_mut()
                    .zc_completions(ts.handle())
                    .map_err(tcp_errno)
            })?
            .clone();
        let mut off = done;
        for d in lent {
            if off >= d.len() {
                off -= d.len();
                continue;
            }
            let rest = d.slice(off..);
            off = 0;
            match stack
                .tcp_mut()
                .send_zc(ts.handle(), rest.clone(), u64::from(id))
            {
                Ok(sent) => {
                    *progress = true;
                    done += sent.len;
                    if let Some(sink) = st
                        .zc
                        .sinks
                        .iter_mut()
                        .find(|k| k.fd == fd && k.handle == ts.handle())
                    {
                        sink.linux.insert(sent.id, id);
                    }
                    if let Some(o) = st
                        .fds
                        .get_mut(fd)?
                        .msg_zc
                        .as_mut()
                        .and_then(|z| z.open.get_mut(&id))
                    {
                        o.left += 1;
                    }
                    if sent.len < rest.len() {
                        break;
                    }
                }
                Err(tcp::Error::WouldBlock) if done == 0 && sink_done.at_limit() => {
                    return Err(libc::ENOBUFS)
                }
                Err(tcp::Error::WouldBlock) => break,
                Err(err) if done > 0 => {
                    // The bytes taken are reported; the error comes with the next call.
                    st.fds.get_mut(fd)?.so_error = Some(tcp_errno(err));
                    return Ok(done);
                }
                Err(err) => return Err(tcp_errno(err)),
            }
        }
        if done == want || (nonblock && done > 0) {
            Ok(done)
        } else {
            Err(libc::EAGAIN)
        }
    });
    let r = match r {
        // SO_SNDTIMEO expired after part of the data was taken: a short count, as send.
        Err(libc::EAGAIN) if done > 0 => Ok(done),
        other => other,
    };
    let mut g = e.lock();
    let st = &mut *g;
    if let Ok(s) = st.fds.get_mut(fd) {
        if let Some(z) = s.msg_zc.as_mut() {
            z.finish(id, if r.is_ok() { done } else { 0 });
        }
    }
    r
}

/// `recvmsg(MSG_ERRQUEUE)`: the oldest notification of socket `fd`, EAGAIN when none (Linux
/// `ip_recv_error` never waits).
pub(crate) fn take_note(e: &Engine, fd: i32) -> R<Note> {
    let mut g = e.lock();
    let st = &mut *g;
    if matches!(st.fds.get(fd)?.kind, Kind::Epoll(_)) {
        return Err(libc::ENOTSOCK);
    }
    pump(st, fd);
    st.fds
        .get_mut(fd)?
        .msg_zc
        .as_mut()
        .and_then(|z| z.take())
        .ok_or(libc::EAGAIN)
}
