//! errno values for netfold's errors, and the C library's `errno` itself.

use netfold_core::iface::UdpError;
use netfold_core::tcp;
use std::io;

/// A result whose error is an errno value.
pub(crate) type R<T> = Result<T, i32>;

/// The errno a BSD socket reports for each TCP engine error.
pub(crate) fn tcp_errno(e: tcp::Error) -> i32 {
    match e {
        tcp::Error::WouldBlock => libc::EAGAIN,
        // The engine released the connection under us: there is nothing to talk to.
        tcp::Error::InvalidHandle => libc::ENOTCONN,
        tcp::Error::ConnectionRefused => libc::ECONNREFUSED,
        tcp::Error::ConnectionReset => libc::ECONNRESET,
        tcp::Error::TimedOut => libc::ETIMEDOUT,
        tcp::Error::NotConnected => libc::ENOTCONN,
        tcp::Error::BrokenPipe => libc::EPIPE,
        tcp::Error::AddrInUse => libc::EADDRINUSE,
        tcp::Error::AddrNotAvailable => libc::EADDRNOTAVAIL,
        tcp::Error::InvalidInput => libc::EINVAL,
        tcp::Error::HostUnreachable => libc::EHOSTUNREACH,
        tcp::Error::NetworkUnreachable => libc::ENETUNREACH,
    }
}

pub(crate) fn udp_errno(e: UdpError) -> i32 {
    match e {
        UdpError::WouldBlock => libc::EAGAIN,
        UdpError::InvalidHandle => libc::EBADF,
        UdpError::AddrInUse => libc::EADDRINUSE,
        UdpError::AddrNotAvailable => libc::EADDRNOTAVAIL,
        UdpError::InvalidInput => libc::EINVAL,
        UdpError::MessageTooLarge => libc::EMSGSIZE,
        UdpError::NoBufs => libc::ENOBUFS,
        UdpError::ConnectionRefused => libc::ECONNREFUSED,
        UdpError::HostUnreachable => libc::EHOSTUNREACH,
        UdpError::NetworkUnreachable => libc::ENETUNREACH,
    }
}

/// For the few library calls that return `io::Error` (built from a `tcp::Error`).
pub(crate) fn io_errno(e: &io::Error) -> i32 {
    use io::ErrorKind as K;
    match e.kind() {
        K::WouldBlock => libc::EAGAIN,
        K::ConnectionRefused => libc::ECONNREFUSED,
        K::ConnectionReset => libc::ECONNRESET,
        K::TimedOut => libc::ETIMEDOUT,
        K::NotConnected => libc::ENOTCONN,
        K::BrokenPipe => libc::EPIPE,
        K::AddrInUse => libc::EADDRINUSE,
        K::AddrNotAvailable => libc::EADDRNOTAVAIL,
        K::InvalidInput => libc::EINVAL,
        K::HostUnreachable => libc::EHOSTUNREACH,
        K::NetworkUnreachable => libc::ENETUNREACH,
        _ => libc::EIO,
    }
}

/// Sets the calling thread's C `errno`.
#[allow(unsafe_code)]
pub(crate) fn set_errno(e: i32) {
    // SAFETY: __errno_location returns a valid pointer to the calling thread's errno for the
    // lifetime of the thread (glibc and musl both guarantee it); we write one int through it.
    unsafe {
        *libc::__errno_location() = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_the_linux_errno() {
        assert_eq!(tcp_errno(tcp::Error::ConnectionRefused), libc::ECONNREFUSED);
        assert_eq!(tcp_errno(tcp::Error::BrokenPipe), libc::EPIPE);
        assert_eq!(udp_errno(UdpError::MessageTooLarge), libc::EMSGSIZE);
        assert_eq!(tcp_errno(tcp::Error::NetworkUnreachable), libc::ENETUNREACH);
        let e = netfold_core::socket::io_error(tcp::Error::NetworkUnreachable);
        assert_eq!(io_errno(&e), libc::ENETUNREACH);
        let e = netfold_core::socket::io_error(tcp::Error::AddrInUse);
        assert_eq!(io_errno(&e), libc::EADDRINUSE);
        set_errno(libc::ENOTCONN);
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOTCONN)
        );
    }
}
