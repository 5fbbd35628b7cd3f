//! Per-socket wakers, woken by the stack's readiness.
//!
//! A task that gets `WouldBlock` registers its waker here under the stack's lock; after every
//! poll the driver asks each socket that has waiters for its [`Readiness`] and wakes the
//! waiters of a direction that became ready. Registering and checking under the same lock
//! means no wake-up is lost between a failed call and the next poll.

use netfold::iface::{Stack, UdpHandle};
use netfold::socket::{Readiness, TcpListener, TcpStream, UdpSocket};
use netfold::tcp;
use std::collections::HashMap;
use std::task::Waker;

/// Tasks waiting on one direction of one socket. Several tasks may wait (two `accept` calls
/// on one listener); a task polled again is not added twice.
#[derive(Default, Debug)]
pub(crate) struct WakerList(Vec<Waker>);

impl WakerList {
    pub(crate) fn register(&mut self, w: &Waker) {
        if !self.0.iter().any(|x| x.will_wake(w)) {
            self.0.push(w.clone());
        }
    }

    fn wake_all(&mut self) {
        for w in self.0.drain(..) {
            w.wake();
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The waiters of one socket: readers (read, accept, recv_from) and writers (write, connect,
/// send_to).
#[derive(Default, Debug)]
pub(crate) struct SocketWakers {
    pub(crate) read: WakerList,
    pub(crate) write: WakerList,
}

impl SocketWakers {
    fn wake_ready(&mut self, r: Readiness) {
        if r.readable {
            self.read.wake_all();
        }
        if r.writable {
            self.write.wake_all();
        }
    }

    fn is_empty(&self) -> bool {
        self.read.is_empty() && self.write.is_empty()
    }

    fn wake_all(&mut self) {
        self.read.wake_all();
        self.write.wake_all();
    }
}

/// Which direction a task waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// The waiters of one socket and the socket to ask for readiness.
#[derive(Debug)]
struct Entry<S> {
    sock: S,
    wakers: SocketWakers,
}

/// Sockets with waiters, keyed by handle.
#[derive(Debug)]
struct Table<K, S>(HashMap<K, Entry<S>>);

impl<K: std::hash::Hash + Eq, S> Default for Table<K, S> {
    fn default() -> Self {
        Table(HashMap::new())
    }
}

impl<K: std::hash::Hash + Eq, S> Table<K, S> {
    fn register(&mut self, key: K, sock: S, dir: Dir, w: &Waker) {
        let e = self.0.entry(key).or_insert_with(|| Entry {
            sock,
            wakers: SocketWakers::default(),
        });
        match dir {
            Dir::Read => e.wakers.read.register(w),
            Dir::Write => e.wakers.write.register(w),
        }
    }

    fn wake_ready(&mut self, mut readiness: impl FnMut(&S) -> Readiness) {
        self.0.retain(|_, e| {
            e.wakers.wake_ready(readiness(&e.sock));
            !e.wakers.is_empty()
        });
    }

    fn wake_all(&mut self) {
        for e in self.0.values_mut() {
            e.wakers.wake_all();
        }
        self.0.clear();
    }
}

/// Every socket with waiters, by kind (a stream and a listener are both TCP handles but are
/// asked for readiness differently).
#[derive(Default, Debug)]
pub(crate) struct Wakers {
    streams: Table<tcp::Handle, TcpStream>,
    listeners: Table<tcp::Handle, TcpListener>,
    udp: Table<UdpHandle, UdpSocket>,
}

impl Wakers {
    pub(crate) fn stream(&mut self, s: TcpStream, dir: Dir, w: &Waker) {
        self.streams.register(s.handle(), s, dir, w);
    }

    pub(crate) fn listener(&mut self, l: TcpListener, w: &Waker) {
        self.listeners.register(l.handle(), l, Dir::Read, w);
    }

    pub(crate) fn udp(&mut self, u: UdpSocket, dir: Dir, w: &Waker) {
        self.udp.register(u.handle(), u, dir, w);
    }

    /// After a poll: wakes the waiters of every direction that is ready now, and forgets
    /// sockets nobody waits on any more. Costs one readiness query per socket with waiters.
    pub(crate) fn wake_ready(&mut self, stack: &mut Stack) {
        self.streams.wake_ready(|s| s.readiness(stack));
        self.listeners.wake_ready(|l| l.readiness(stack));
        self.udp.wake_ready(|u| u.readiness(stack));
    }

    /// The driver stopped: every waiter runs once more and sees the error.
    pub(crate) fn wake_all(&mut self) {
        self.streams.wake_all();
        self.listeners.wake_all();
        self.udp.wake_all();
    }
}
