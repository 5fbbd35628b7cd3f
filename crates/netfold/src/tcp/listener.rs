//! A listening socket: bounded SYN queue (half-open connections) and accept queue.

use super::Config;
use std::collections::VecDeque;
use std::net::SocketAddrV4;

#[derive(Debug)]
pub struct Listener {
    pub local: SocketAddrV4,
    pub backlog: usize,
    pub config: Config,
    /// Connections in SYN-RECEIVED created by this listener.
    pub half_open: usize,
    /// Established connections (slot indices) waiting for accept().
    pub accept_queue: VecDeque<u32>,
}

impl Listener {
    pub fn new(local: SocketAddrV4, backlog: usize, config: Config) -> Self {
        Listener {
            local,
            backlog,
            config,
            half_open: 0,
            accept_queue: VecDeque::with_capacity(backlog.min(1024)),
        }
    }

    /// Linux behaviour: a SYN is dropped (not answered) when either queue is full; the peer
    /// retransmits its SYN later.
    pub fn has_room(&self) -> bool {
        self.half_open < self.backlog && self.accept_queue.len() < self.backlog
    }
}
