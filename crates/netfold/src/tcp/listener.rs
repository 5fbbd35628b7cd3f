//! A listening socket: bounded SYN queue (half-open connections) and accept queue.

use super::Config;
use crate::time::Instant;
use std::collections::VecDeque;
use std::net::SocketAddr;

#[derive(Debug)]
pub struct Listener {
    /// The bound address in wire form (an IPv6 socket bound to `::ffff:a.b.c.d` has the
    /// IPv4 address here).
    pub local: SocketAddr,
    /// An IPv6 socket: its IPv4 connections (and a v4-mapped bind) are reported as
    /// v4-mapped IPv6 addresses.
    pub mapped: bool,
    pub backlog: usize,
    pub config: Config,
    /// Connections in SYN-RECEIVED created by this listener.
    pub half_open: usize,
    /// Established connections (slot indices) waiting for accept().
    pub accept_queue: VecDeque<u32>,
    /// When the SYN queue last overflowed and a SYN was answered with a cookie (Linux
    /// `tcp_synq_overflow`): ACKs are checked as cookies only within `syncookie::VALID` of it.
    pub last_overflow: Option<Instant>,
    /// Fast Open connections in SYN-RECEIVED (Linux `fastopenq.qlen`), bounded by the
    /// Fast Open queue (`fastopen.rs`).
    pub fastopen_pending: usize,
    /// This listener's own Fast Open key (Linux `TCP_FASTOPEN_KEY`), else the layer's.
    pub fastopen_key: Option<super::fastopen::FastOpenKey>,
}

impl Listener {
    pub fn new(local: SocketAddr, backlog: usize, config: Config) -> Self {
        Listener {
            local,
            mapped: false,
            backlog,
            config,
            half_open: 0,
            accept_queue: VecDeque::with_capacity(backlog.min(1024)),
            last_overflow: None,
            fastopen_pending: 0,
            fastopen_key: None,
        }
    }

    /// No room for another half-open connection: a SYN gets a cookie (or is dropped).
    pub fn syn_queue_full(&self) -> bool {
        self.half_open >= self.backlog
    }

    /// No room for another established connection: SYNs and cookie ACKs are dropped (Linux
    /// `sk_acceptq_is_full`, counted as listen overflows).
    pub fn accept_queue_full(&self) -> bool {
        self.accept_queue.len() >= self.backlog
    }

    /// The SYN queue overflowed recently enough that an ACK may carry one of our cookies
    /// (Linux `tcp_synq_no_recent_overflow`); otherwise ACKs are not checked at all.
    pub fn recent_overflow(&self, now: Instant) -> bool {
        self.last_overflow
            .is_some_and(|t| now.saturating_since(t) < super::syncookie::VALID)
    }
}
