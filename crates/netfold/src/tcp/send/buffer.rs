//! Send-buffer growth (Linux `tcp_sndbuf_expand`): the ceiling, whether growth is on, and
//! whether the application found the queue full since the last check (Linux
//! `SOCK_NOSPACE`: only a writer that wants more space gets it).

use super::Sender;

impl Sender {
    /// The most the send buffer may grow to.
    #[inline]
    pub fn buf_max(&self) -> usize {
        self.buf_max
    }

    /// A write took less than it was given or left the queue full (`nospace`): the buffer
    /// may grow at the next ACK (Linux sets `SOCK_NOSPACE`).
    #[inline]
    pub fn note_write(&mut self, nospace: bool) {
        self.app_blocked |= nospace;
    }

    /// The application found the queue full since the last growth check.
    #[inline]
    pub fn app_blocked(&self) -> bool {
        self.app_blocked
    }

    /// Growth may be considered: it is on, a writer wanted more space, and the queue has
    /// storage to grow.
    #[inline]
    pub fn may_grow(&self) -> bool {
        self.autotune && self.app_blocked && self.ring.capacity() != 0
    }

    /// A growth check took the writer's want of space (Linux clears `SOCK_NOSPACE` in
    /// `tcp_new_space`).
    #[inline]
    pub fn on_growth_check(&mut self) {
        self.app_blocked = false;
    }
}
