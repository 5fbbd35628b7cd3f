//! Zero-copy send on the blocking API (`netfold::tcp::zerocopy`): the application lends
//! buffers ([`ZcBuf`]) to a stream instead of writing copies, and learns from the stream's
//! [`ZcCompletions`] when each one is released. A file is sent without a copy in user space by
//! mapping it (`netfold_os::mmap::map_file`) and lending the mapping.

use super::{Interest, TcpStream};
use netfold::buf::ZcBuf;
use netfold::tcp::{ZcCompletions, ZcSend};
use std::io;
use std::time::Duration as StdDuration;

/// Why a blocking zero-copy send gives up at once instead of waiting: the stream's bound on
/// unreleased buffers plus untaken completions is reached, and only the application can make
/// room by taking completions (Linux answers `MSG_ZEROCOPY` with ENOBUFS when its notification
/// memory is exhausted). The error's kind is `Other`; its inner error is this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletionsFull;

impl std::fmt::Display for CompletionsFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("zero-copy completions wait to be taken (ZcCompletions::take)")
    }
}

impl std::error::Error for CompletionsFull {}

impl TcpStream {
    /// Lends (a prefix of) `buf` to the stream, waiting (at most the write timeout) for room in
    /// the send buffer; returns its id and how many bytes were taken. Fails at once with
    /// [`CompletionsFull`] when completions must be taken first.
    pub fn send_zc(&self, buf: ZcBuf) -> io::Result<ZcSend> {
        self.send_zc_with(buf, 0)
    }

    /// [`TcpStream::send_zc`] with a value that comes back in the buffer's completion.
    pub fn send_zc_with(&self, buf: ZcBuf, user: u64) -> io::Result<ZcSend> {
        let s = self.conn.sock;
        let mut done: Option<ZcCompletions> = None;
        self.shared()
            .wait_for(self.write_timeout(), Interest::Write(s), |st, _| {
                match s.send_zc_with(st, buf.clone(), user) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        let d = match &done {
                            Some(d) => d,
                            None => done.insert(s.zc_completions(st)?),
                        };
                        if d.at_limit() {
                            return Err(io::Error::other(CompletionsFull));
                        }
                        Err(e)
                    }
                    r => r,
                }
            })
    }

    /// Lends all of `buf`, as many sends as the send buffer needs (each a separate id, in
    /// order); returns them.
    pub fn send_zc_all(&self, buf: ZcBuf) -> io::Result<Vec<ZcSend>> {
        let mut sent = Vec::new();
        let mut rest = buf;
        while !rest.is_empty() {
            let s = self.send_zc(rest.clone())?;
            rest = rest.slice(s.len..);
            sent.push(s);
        }
        Ok(sent)
    }

    /// The stream's zero-copy completions (a handle that outlives the stream).
    pub fn zc_completions(&self) -> io::Result<ZcCompletions> {
        let mut g = self.shared().lock();
        self.conn.sock.zc_completions(&mut g.stack)
    }

    /// Waits until every buffer lent to the stream has been released (its completion posted:
    /// acknowledged, or the connection ended), at most `timeout`.
    pub fn wait_zc_released(&self, timeout: Option<StdDuration>) -> io::Result<()> {
        let done = self.zc_completions()?;
        let s = self.conn.sock;
        self.shared().wait_for(timeout, Interest::Acked(s), |_, _| {
            if done.outstanding().buffers == 0 {
                Ok(())
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            }
        })
    }
}
