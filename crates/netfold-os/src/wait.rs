//! Sleeping until a descriptor is readable: how drivers of fd-backed devices (TAP, packet
//! socket) wait for frames without waking on a timer.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Blocks until any of `fds` is readable or `timeout` passes (`None`: no limit). Returns
/// whether something became readable. EINTR counts as "woke up" (the caller re-checks).
pub fn wait_readable_any(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<bool> {
    let ms = match timeout {
        // Round up so a sub-millisecond deadline does not become a busy 0 ms poll.
        Some(t) => libc::c_int::try_from(t.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX),
        None => -1,
    };
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a live, initialised array of `p.len()` pollfd structs; poll only writes
    // their `revents`. Descriptors that are not open are reported in revents (POLLNVAL), not
    // undefined behaviour.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(true);
        }
        return Err(e);
    }
    Ok(r > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn wakes_on_data_and_times_out_without() {
        let (mut a, b) = UnixStream::pair().unwrap();
        assert!(!wait_readable_any(&[b.as_raw_fd()], Some(Duration::from_millis(1))).unwrap());
        a.write_all(b"x").unwrap();
        assert!(wait_readable_any(&[b.as_raw_fd()], Some(Duration::from_secs(5))).unwrap());
    }
}
