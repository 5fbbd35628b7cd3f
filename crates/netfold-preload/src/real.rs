//! The C library's own socket calls, found with `dlsym(RTLD_NEXT, name)`: what every
//! interposed function calls for a descriptor that is the kernel's. Each address is looked up
//! once, at its first use, and kept.

use core::ffi::c_void;
use libc::{
    c_int, c_uint, c_ulong, epoll_event, fd_set, iovec, loff_t, mmsghdr, msghdr, nfds_t, off_t,
    pollfd, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The address of the next definition of `name` (NUL-terminated) after this library, i.e.
/// the C library's. Without it nothing can work: the process is told why and aborts.
fn resolve(name: &'static str) -> usize {
    // SAFETY: `name` is NUL-terminated (every caller passes a literal ending in "\0");
    // RTLD_NEXT searches the objects loaded after this one.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
    if p.is_null() {
        let msg = b"netfold-preload: the C library does not define a function this library needs\n";
        // SAFETY: a raw write(2) of a static buffer to stderr (no interposed call), then abort.
        unsafe {
            libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
            libc::abort();
        }
    }
    p as usize
}

/// Defines `pub(crate) unsafe fn NAME(..)` calling the C library's NAME.
macro_rules! real {
    ($( $name:ident ( $($a:ident : $t:ty),* ) -> $r:ty ; )*) => { $(
        pub(crate) unsafe fn $name($($a: $t),*) -> $r {
            static P: AtomicUsize = AtomicUsize::new(0);
            let mut p = P.load(Ordering::Relaxed);
            if p == 0 {
                p = resolve(concat!(stringify!($name), "\0"));
                P.store(p, Ordering::Relaxed);
            }
            // SAFETY: `p` is the address of the C library's function of this name, whose C
            // prototype is the one spelled here (glibc's, as in <sys/socket.h> etc.).
            let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { core::mem::transmute(p) };
            // SAFETY: the caller's arguments are passed on unchanged (its contract is the
            // C function's).
            unsafe { f($($a),*) }
        }
    )* };
}

/// Like `real!` for the C library's variadic functions (`fcntl`, `ioctl`): called with
/// their one optional argument, as C callers pass it.
macro_rules! real_variadic {
    ($( $name:ident ( $a:ident : $t:ty, $b:ident : $u:ty, $c:ident : $v:ty ) -> $r:ty ; )*) => { $(
        pub(crate) unsafe fn $name($a: $t, $b: $u, $c: $v) -> $r {
            static P: AtomicUsize = AtomicUsize::new(0);
            let mut p = P.load(Ordering::Relaxed);
            if p == 0 {
                p = resolve(concat!(stringify!($name), "\0"));
                P.store(p, Ordering::Relaxed);
            }
            // SAFETY: as in `real!`; the C prototype is variadic after the second argument.
            let f: unsafe extern "C" fn($t, $u, ...) -> $r = unsafe { core::mem::transmute(p) };
            // SAFETY: as in `real!`.
            unsafe { f($a, $b, $c) }
        }
    )* };
}

real! {
    socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    bind(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int;
    listen(fd: c_int, backlog: c_int) -> c_int;
    accept(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int;
    accept4(fd: c_int, a: *mut sockaddr, l: *mut socklen_t, flags: c_int) -> c_int;
    connect(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int;
    read(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t;
    write(fd: c_int, b: *const c_void, n: size_t) -> ssize_t;
    readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t;
    writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t;
    recv(fd: c_int, b: *mut c_void, n: size_t, flags: c_int) -> ssize_t;
    send(fd: c_int, b: *const c_void, n: size_t, flags: c_int) -> ssize_t;
    recvfrom(fd: c_int, b: *mut c_void, n: size_t, flags: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t;
    sendto(fd: c_int, b: *const c_void, n: size_t, flags: c_int, a: *const sockaddr, l: socklen_t) -> ssize_t;
    recvmsg(fd: c_int, m: *mut msghdr, flags: c_int) -> ssize_t;
    sendmsg(fd: c_int, m: *const msghdr, flags: c_int) -> ssize_t;
    close(fd: c_int) -> c_int;
    shutdown(fd: c_int, how: c_int) -> c_int;
    getsockopt(fd: c_int, level: c_int, name: c_int, v: *mut c_void, l: *mut socklen_t) -> c_int;
    setsockopt(fd: c_int, level: c_int, name: c_int, v: *const c_void, l: socklen_t) -> c_int;
    getsockname(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int;
    getpeername(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int;
    poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
    ppoll(fds: *mut pollfd, n: nfds_t, t: *const timespec, mask: *const sigset_t) -> c_int;
    select(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, t: *mut timeval) -> c_int;
    pselect(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, t: *const timespec, mask: *const sigset_t) -> c_int;
    epoll_create(size: c_int) -> c_int;
    epoll_create1(flags: c_int) -> c_int;
    epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int;
    epoll_wait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int) -> c_int;
    epoll_pwait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const sigset_t) -> c_int;
    dup(fd: c_int) -> c_int;
    dup2(old: c_int, new: c_int) -> c_int;
    dup3(old: c_int, new: c_int, flags: c_int) -> c_int;
    sendfile(out: c_int, inp: c_int, off: *mut off_t, n: size_t) -> ssize_t;
    sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int;
    recvmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int, t: *mut timespec) -> c_int;
    splice(fd_in: c_int, off_in: *mut loff_t, fd_out: c_int, off_out: *mut loff_t, n: size_t, flags: c_uint) -> ssize_t;
    __read_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t) -> ssize_t;
    __recv_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t;
    __recvfrom_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t, flags: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t;
    __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, fdslen: size_t) -> c_int;
}

real_variadic! {
    fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int;
}
