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

/// Like [`wait_readable_any`] with a finite timeout kept to the microsecond (`ppoll(2)`), for
/// a loop whose deadlines are sub-millisecond (the link emulator's next frame release).
pub fn wait_readable_any_precise(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `p` is a live array of `p.len()` pollfd structs (ppoll writes only `revents`),
    // `ts` a live timespec read during the call, and the signal mask pointer is null (none).
    let r = unsafe {
        libc::ppoll(
            p.as_mut_ptr(),
            p.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(true);
        }
        return Err(e);
    }
    Ok(r > 0)
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`, default 50 µs): how late the
/// kernel may end its sleeps to batch wake-ups. Best effort.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes one integer by value and changes only the
    // calling thread's slack; the result is ignored (best effort).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
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
