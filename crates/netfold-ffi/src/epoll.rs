//! epoll(7) over netfold descriptors: `nf_epoll_create1`, `nf_epoll_ctl`, `nf_epoll_wait`.
//!
//! An epoll instance is a descriptor of its own (`Kind::Epoll`) holding the interest list.
//! A wait looks at each watched descriptor's poll(2) readiness (`ops::readiness`, the same
//! rules as `nf_poll`) and sleeps on the engine like `nf_poll` until one is ready or the
//! timeout passes. Level-triggered entries are reported while ready. Edge-triggered ones
//! (EPOLLET) are reported when a condition appears or when new input arrives (bytes received,
//! a connection queued) or output space grows (bytes acknowledged) since the last look, so
//! each arrival of data wakes a reader once, as Linux's wake-up per arrival does; a socket
//! that stays readable without new data is not reported again. EPOLLONESHOT disables an
//! entry after one report until EPOLL_CTL_MOD. A closed descriptor leaves every interest
//! list (Linux removes it when its file is released). Not offered: watching an epoll
//! instance (nesting, EINVAL) and poll(2) on one (never ready); EPOLLEXCLUSIVE is accepted
//! and means nothing with one waiter per engine lock.

use crate::engine::{Engine, State};
use crate::errno::R;
use crate::fd::{Kind, Sock, Tcp};
use crate::ops::readiness;
use netfold_core::tcp::State as S;
use netfold_core::time::Instant;
use std::collections::BTreeMap;

/// Event bits: Linux's epoll values, equal to poll(2)'s for IN/PRI/OUT/ERR/HUP/RDHUP.
const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const ERR: u32 = libc::EPOLLERR as u32;
const HUP: u32 = libc::EPOLLHUP as u32;
const RDHUP: u32 = libc::EPOLLRDHUP as u32;
const ET: u32 = libc::EPOLLET as u32;
const ONESHOT: u32 = libc::EPOLLONESHOT as u32;
const EXCLUSIVE: u32 = libc::EPOLLEXCLUSIVE as u32;

#[derive(Debug, Default)]
pub(crate) struct EpollSet {
    interest: BTreeMap<i32, Interest>,
    /// Where the next scan starts (after the last descriptor reported), so that a small
    /// `maxevents` does not always return the lowest descriptors (Linux rotates its ready
    /// list the same way).
    cursor: i32,
}

#[derive(Debug, Clone, Copy)]
struct Interest {
    events: u32,
    data: u64,
    /// EPOLLONESHOT reported: silent until EPOLL_CTL_MOD.
    disabled: bool,
    last: Snapshot,
}

/// What an edge-triggered entry compares with its previous look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Snapshot {
    ready: u32,
    /// Bytes received (in order) and bytes acknowledged by the peer, ever: they only grow.
    rx: u64,
    tx: u64,
    /// Connections waiting to be accepted.
    queued: usize,
}

/// epoll_create1(2): `flags` 0 or EPOLL_CLOEXEC (there is no exec here).
pub(crate) fn create(e: &Engine, flags: i32) -> R<i32> {
    if flags & !libc::EPOLL_CLOEXEC != 0 {
        return Err(libc::EINVAL);
    }
    let mut g = e.lock();
    let mss = g.stack.tcp_mss(std::net::Ipv4Addr::UNSPECIFIED);
    let kind = Kind::Epoll(Box::default());
    g.fds.insert(Sock::new(kind, libc::AF_UNSPEC, false, mss))
}

/// epoll_ctl(2). `ev` is (events, data), required for ADD and MOD.
pub(crate) fn ctl(e: &Engine, epfd: i32, op: i32, fd: i32, ev: Option<(u32, u64)>) -> R<()> {
    let mut g = e.lock();
    let st = &mut *g;
    if !matches!(st.fds.get(epfd)?.kind, Kind::Epoll(_)) {
        return Err(libc::EINVAL);
    }
    // The target must be a netfold descriptor and not an epoll instance (no nesting).
    if matches!(st.fds.get(fd)?.kind, Kind::Epoll(_)) || fd == epfd {
        return Err(libc::EINVAL);
    }
    let Kind::Epoll(set) = &mut st.fds.get_mut(epfd)?.kind else {
        return Err(libc::EINVAL);
    };
    match op {
        libc::EPOLL_CTL_ADD => {
            let (events, data) = ev.ok_or(libc::EFAULT)?;
            if set.interest.contains_key(&fd) {
                return Err(libc::EEXIST);
            }
            set.interest.insert(fd, Interest::new(events, data));
        }
        libc::EPOLL_CTL_MOD => {
            let (events, data) = ev.ok_or(libc::EFAULT)?;
            // epoll_ctl(2): "EINVAL ... EPOLLEXCLUSIVE was specified in event and op was
            // EPOLL_CTL_MOD".
            if events & EXCLUSIVE != 0 {
                return Err(libc::EINVAL);
            }
            let slot = set.interest.get_mut(&fd).ok_or(libc::ENOENT)?;
            // A MOD re-arms (a one-shot entry, and an edge-triggered one reports what is
            // ready now, as Linux's ep_modify polls the file again).
            *slot = Interest::new(events, data);
        }
        libc::EPOLL_CTL_DEL => {
            set.interest.remove(&fd).ok_or(libc::ENOENT)?;
        }
        _ => return Err(libc::EINVAL),
    }
    e.changed(st);
    Ok(())
}

impl EpollSet {
    /// `fd` was closed.
    pub(crate) fn forget(&mut self, fd: i32) {
        self.interest.remove(&fd);
    }
}

impl Interest {
    fn new(events: u32, data: u64) -> Interest {
        Interest {
            events,
            data,
            disabled: false,
            last: Snapshot::default(),
        }
    }
}

/// A watched descriptor now, or `None` if it was closed.
fn probe(st: &mut State, fd: i32, now: Instant) -> Option<Snapshot> {
    st.fds.get(fd).ok()?;
    let mut ready = u32::from(readiness(st, fd) as u16);
    let s = st.fds.get(fd).ok()?;
    let mut snap = Snapshot::default();
    match &s.kind {
        Kind::Tcp(Tcp::Stream(ts)) => {
            let tcp = st.stack.tcp();
            if let Ok(info) = tcp.tcp_info(ts.handle(), now) {
                snap.rx = info.bytes_received;
                snap.tx = info.bytes_acked;
            }
            // EPOLLRDHUP: the peer shut its side (its FIN is in).
            let peer_done = matches!(
                tcp.state(ts.handle()),
                Ok(S::CloseWait | S::LastAck | S::Closing | S::TimeWait | S::Closed) | Err(_)
            );
            if peer_done {
                ready |= RDHUP;
            }
        }
        Kind::Tcp(Tcp::Listening { ready: q, .. }) => snap.queued = q.len(),
        _ => {}
    }
    snap.ready = ready;
    Some(snap)
}

/// One scan of `epfd`'s interest list into `out`; the number of events written.
fn scan(st: &mut State, epfd: i32, out: &mut [libc::epoll_event], now: Instant) -> R<usize> {
    // The set is taken out while the watched descriptors are probed (they live in the same
    // table), and put back after.
    let mut set = match &mut st.fds.get_mut(epfd)?.kind {
        Kind::Epoll(set) => std::mem::take(&mut **set),
        _ => return Err(libc::EINVAL),
    };
    let fds: Vec<i32> = set
        .interest
        .range(set.cursor.saturating_add(1)..)
        .chain(set.interest.range(..=set.cursor))
        .map(|(&fd, _)| fd)
        .collect();
    let mut n = 0;
    let mut gone = Vec::new();
    for fd in fds {
        if n == out.len() {
            break;
        }
        let Some(snap) = probe(st, fd, now) else {
            gone.push(fd);
            continue;
        };
        let Some(it) = set.interest.get_mut(&fd) else {
            continue;
        };
        if it.disabled {
            continue;
        }
        // EPOLLERR and EPOLLHUP are always reported (epoll_ctl(2)).
        let r = snap.ready & (it.events | ERR | HUP);
        let fire = if it.events & ET != 0 {
            let last = it.last;
            it.last = snap;
            r != 0
                && (r & !last.ready != 0
                    || (r & IN != 0 && (snap.rx > last.rx || snap.queued > last.queued))
                    || (r & OUT != 0 && snap.tx > last.tx))
        } else {
            r != 0
        };
        if !fire {
            continue;
        }
        if it.events & ONESHOT != 0 {
            it.disabled = true;
        }
        out[n] = libc::epoll_event {
            events: r,
            u64: it.data,
        };
        n += 1;
        set.cursor = fd;
    }
    for fd in gone {
        set.interest.remove(&fd);
    }
    // Probing closes no descriptor: the instance is still there to take its set back.
    if let Ok(Sock {
        kind: Kind::Epoll(slot),
        ..
    }) = st.fds.get_mut(epfd)
    {
        **slot = set;
    }
    Ok(n)
}

/// epoll_wait(2): up to `out.len()` events; `timeout_ms` < 0 waits without limit, 0 not
/// at all.
pub(crate) fn wait(
    e: &Engine,
    epfd: i32,
    out: &mut [libc::epoll_event],
    timeout_ms: i32,
) -> R<usize> {
    if out.is_empty() {
        return Err(libc::EINVAL);
    }
    crate::ops::wait_ready(e, timeout_ms, |st, now| scan(st, epfd, out, now))
}
