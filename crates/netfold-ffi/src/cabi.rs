//! Reading and writing the C structures the API takes: sockaddr_in, sockaddr_in6, iovec,
//! option values.
//! Every function here checks what can be checked (NULL, lengths, address family) and states
//! in its SAFETY comment what the C caller must guarantee for the rest (that a non-NULL pointer
//! really points at that many bytes), which is the contract `include/netfold.h` documents.
#![allow(unsafe_code)]

use crate::errno::R;
use crate::options::{OptVal, Shape};
use core::ffi::c_void;
use core::mem::size_of;
use libc::{c_int, iovec, sockaddr, sockaddr_in, sockaddr_in6, socklen_t};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// IOV_MAX on Linux.
pub(crate) const IOV_MAX: c_int = 1024;

/// Bytes of a `sockaddr_in6` before `sin6_scope_id`: what Linux accepts as the shortest IPv6
/// address (`SIN6_LEN_RFC2133`, RFC 2133's struct without the scope id).
const SIN6_LEN_RFC2133: usize = 24;

/// Reads a `sockaddr_in` (AF_INET) or `sockaddr_in6` (AF_INET6). Whether the family suits the
/// socket is the caller's check (EAFNOSUPPORT there, as Linux's `inet_bind`/`inet6_bind`).
///
/// # Safety
/// `a`, if not NULL, must be readable for `l` bytes.
pub(crate) unsafe fn read_sockaddr(a: *const sockaddr, l: socklen_t) -> R<SocketAddr> {
    if a.is_null() {
        return Err(libc::EFAULT);
    }
    if (l as usize) < size_of::<libc::sa_family_t>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: `a` is non-NULL and readable for at least the family field (checked `l` above);
    // read_unaligned because a C caller may pass any byte buffer.
    let family = unsafe { core::ptr::read_unaligned(a.cast::<libc::sa_family_t>()) };
    match c_int::from(family) {
        libc::AF_INET => {
            if (l as usize) < size_of::<sockaddr_in>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: readable for `l` >= sizeof(sockaddr_in) bytes (checked above).
            let sin = unsafe { core::ptr::read_unaligned(a.cast::<sockaddr_in>()) };
            Ok(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            if (l as usize) < SIN6_LEN_RFC2133 {
                return Err(libc::EINVAL);
            }
            // SAFETY: the all-zero bit pattern is a valid sockaddr_in6 (plain integers).
            let mut sin6: sockaddr_in6 = unsafe { core::mem::zeroed() };
            let n = (l as usize).min(size_of::<sockaddr_in6>());
            // SAFETY: `a` is readable for `l` >= `n` bytes; `sin6` is a local of size >= `n`;
            // a short (RFC 2133) address leaves the scope id zero.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    a.cast::<u8>(),
                    (&mut sin6 as *mut sockaddr_in6).cast::<u8>(),
                    n,
                );
            }
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// Stores `v` the way accept/getsockname do: at most `*l` bytes, `*l` set to the full size, a
/// `sockaddr_in` for an IPv4 address and a `sockaddr_in6` for an IPv6 one (v4-mapped for the
/// IPv4 peers of an AF_INET6 socket: the caller passes them mapped). A NULL `a` stores
/// nothing (accept(fd, NULL, NULL) is allowed).
///
/// # Safety
/// `l`, if not NULL, must be a valid socklen_t; `a`, if not NULL, writable for `*l` bytes.
pub(crate) unsafe fn write_sockaddr(a: *mut sockaddr, l: *mut socklen_t, v: SocketAddr) -> R<()> {
    if a.is_null() {
        return Ok(());
    }
    if l.is_null() {
        return Err(libc::EFAULT);
    }
    // The largest of the two, as bytes.
    let mut bytes = [0u8; size_of::<sockaddr_in6>()];
    let full = match v {
        SocketAddr::V4(v) => {
            // SAFETY: the all-zero bit pattern is a valid sockaddr_in (plain integers).
            let mut sin: sockaddr_in = unsafe { core::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v.ip()).to_be();
            // SAFETY: `bytes` is larger than sockaddr_in; unaligned write.
            unsafe { core::ptr::write_unaligned(bytes.as_mut_ptr().cast::<sockaddr_in>(), sin) };
            size_of::<sockaddr_in>()
        }
        SocketAddr::V6(v) => {
            // SAFETY: the all-zero bit pattern is a valid sockaddr_in6 (plain integers).
            let mut sin6: sockaddr_in6 = unsafe { core::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v.port().to_be();
            sin6.sin6_flowinfo = v.flowinfo().to_be();
            sin6.sin6_addr.s6_addr = v.ip().octets();
            sin6.sin6_scope_id = v.scope_id();
            // SAFETY: `bytes` is exactly sockaddr_in6's size; unaligned write.
            unsafe { core::ptr::write_unaligned(bytes.as_mut_ptr().cast::<sockaddr_in6>(), sin6) };
            size_of::<sockaddr_in6>()
        }
    };
    // SAFETY: `l` is non-NULL and valid per the contract.
    let cap = unsafe { core::ptr::read_unaligned(l) } as usize;
    let n = cap.min(full);
    // SAFETY: `a` is writable for `cap` >= `n` bytes; `bytes` is a local of size >= `n`; the
    // regions cannot overlap (one is on our stack).
    unsafe {
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), a.cast::<u8>(), n);
        core::ptr::write_unaligned(l, full as socklen_t);
    }
    Ok(())
}

/// # Safety
/// `b`, if not NULL, must be valid for reads and writes of `n` bytes and not aliased for the
/// duration of the call.
pub(crate) unsafe fn buf_mut<'a>(b: *mut c_void, n: usize) -> R<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if b.is_null() {
        return Err(libc::EFAULT);
    }
    if n > isize::MAX as usize {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-NULL, `n` <= isize::MAX, validity and exclusivity per the contract.
    Ok(unsafe { core::slice::from_raw_parts_mut(b.cast::<u8>(), n) })
}

/// # Safety
/// `b`, if not NULL, must be valid for reads of `n` bytes for the duration of the call.
pub(crate) unsafe fn buf_ref<'a>(b: *const c_void, n: usize) -> R<&'a [u8]> {
    if n == 0 {
        return Ok(&[]);
    }
    if b.is_null() {
        return Err(libc::EFAULT);
    }
    if n > isize::MAX as usize {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-NULL, `n` <= isize::MAX, validity per the contract.
    Ok(unsafe { core::slice::from_raw_parts(b.cast::<u8>(), n) })
}

/// # Safety
/// `iov` must point at `cnt` iovecs whose buffers are writable and do not overlap (the header
/// says so), for the duration of the call.
pub(crate) unsafe fn iov_mut<'a>(iov: *const iovec, cnt: usize) -> R<Vec<&'a mut [u8]>> {
    if cnt > IOV_MAX as usize {
        return Err(libc::EINVAL);
    }
    if cnt > 0 && iov.is_null() {
        return Err(libc::EFAULT);
    }
    let mut v = Vec::with_capacity(cnt);
    for i in 0..cnt {
        // SAFETY: `iov` holds `cnt` elements per the contract; `i` < `cnt`.
        let e = unsafe { core::ptr::read_unaligned(iov.add(i)) };
        // SAFETY: each iovec buffer is writable for iov_len bytes, disjoint from the others.
        v.push(unsafe { buf_mut(e.iov_base, e.iov_len) }?);
    }
    Ok(v)
}

/// # Safety
/// `iov` must point at `cnt` iovecs whose buffers are readable, for the duration of the call.
pub(crate) unsafe fn iov_ref<'a>(iov: *const iovec, cnt: usize) -> R<Vec<&'a [u8]>> {
    if cnt > IOV_MAX as usize {
        return Err(libc::EINVAL);
    }
    if cnt > 0 && iov.is_null() {
        return Err(libc::EFAULT);
    }
    let mut v = Vec::with_capacity(cnt);
    for i in 0..cnt {
        // SAFETY: `iov` holds `cnt` elements per the contract; `i` < `cnt`.
        let e = unsafe { core::ptr::read_unaligned(iov.add(i)) };
        // SAFETY: each iovec buffer is readable for iov_len bytes.
        v.push(unsafe { buf_ref(e.iov_base, e.iov_len) }?);
    }
    Ok(v)
}

/// Reads an option value of the C type the option uses.
///
/// # Safety
/// `v`, if not NULL, must be readable for `l` bytes.
pub(crate) unsafe fn read_opt(shape: Shape, v: *const c_void, l: socklen_t) -> R<OptVal> {
    if v.is_null() {
        return Err(libc::EFAULT);
    }
    let l = l as usize;
    match shape {
        Shape::Int => {
            if l < size_of::<c_int>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: readable for `l` >= sizeof(int) bytes.
            Ok(OptVal::Int(unsafe {
                core::ptr::read_unaligned(v.cast::<c_int>())
            }))
        }
        Shape::IntOrByte if (1..size_of::<c_int>()).contains(&l) => {
            // SAFETY: readable for `l` >= 1 byte.
            Ok(OptVal::Int(c_int::from(unsafe { v.cast::<u8>().read() })))
        }
        Shape::IntOrByte => {
            if l < size_of::<c_int>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: readable for `l` >= sizeof(int) bytes.
            Ok(OptVal::Int(unsafe {
                core::ptr::read_unaligned(v.cast::<c_int>())
            }))
        }
        Shape::Linger => {
            if l < size_of::<libc::linger>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: readable for `l` >= sizeof(struct linger) bytes.
            let x = unsafe { core::ptr::read_unaligned(v.cast::<libc::linger>()) };
            Ok(OptVal::Linger {
                onoff: x.l_onoff,
                secs: x.l_linger,
            })
        }
        Shape::Timeval => {
            if l < size_of::<libc::timeval>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: readable for `l` >= sizeof(struct timeval) bytes.
            let x = unsafe { core::ptr::read_unaligned(v.cast::<libc::timeval>()) };
            Ok(OptVal::Timeval {
                sec: x.tv_sec as i64,
                usec: x.tv_usec as i64,
            })
        }
        Shape::Bytes => {
            // No option takes more; a larger length is not read at all.
            if l > MAX_OPT_BYTES {
                return Err(libc::EINVAL);
            }
            // SAFETY: readable for `l` bytes per the caller's contract.
            let b = unsafe { core::slice::from_raw_parts(v.cast::<u8>(), l) };
            Ok(OptVal::Bytes(b.to_vec()))
        }
    }
}

/// The longest byte-string option value read (TCP_FASTOPEN_KEY: 32 bytes).
const MAX_OPT_BYTES: usize = 256;

/// Stores an option value: at most `*l` bytes (Linux truncates), `*l` set to what was stored.
///
/// # Safety
/// `l`, if not NULL, must be a valid socklen_t; `v`, if not NULL, writable for `*l` bytes.
pub(crate) unsafe fn write_opt(val: OptVal, v: *mut c_void, l: *mut socklen_t) -> R<()> {
    if v.is_null() || l.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: `l` is non-NULL and valid per the contract.
    let cap = unsafe { core::ptr::read_unaligned(l) } as usize;
    let mut bytes = [0u8; 32];
    let mut large = Vec::new();
    let len = match val {
        OptVal::Int(i) => {
            bytes[..4].copy_from_slice(&i.to_ne_bytes());
            size_of::<c_int>()
        }
        OptVal::Linger { onoff, secs } => {
            let x = libc::linger {
                l_onoff: onoff,
                l_linger: secs,
            };
            // SAFETY: `bytes` is 32 bytes, larger than struct linger; unaligned write.
            unsafe { core::ptr::write_unaligned(bytes.as_mut_ptr().cast::<libc::linger>(), x) };
            size_of::<libc::linger>()
        }
        OptVal::Timeval { sec, usec } => {
            let x = libc::timeval {
                tv_sec: sec as libc::time_t,
                tv_usec: usec as libc::suseconds_t,
            };
            // SAFETY: `bytes` is 32 bytes, larger than struct timeval; unaligned write.
            unsafe { core::ptr::write_unaligned(bytes.as_mut_ptr().cast::<libc::timeval>(), x) };
            size_of::<libc::timeval>()
        }
        // A struct: its first `cap` bytes (Linux copies min(len, sizeof)).
        OptVal::Bytes(data) => {
            large = data;
            large.len()
        }
    };
    let src = if large.is_empty() {
        &bytes[..]
    } else {
        &large[..]
    };
    let n = cap.min(len);
    // SAFETY: `v` writable for `cap` >= `n` bytes; `src` is ours (at least `len` >= `n`
    // bytes), so no overlap.
    unsafe {
        core::ptr::copy_nonoverlapping(src.as_ptr(), v.cast::<u8>(), n);
        core::ptr::write_unaligned(l, n as socklen_t);
    }
    Ok(())
}

/// # Safety
/// `p`, if not NULL, must point at a readable C string.
pub(crate) unsafe fn opt_cstr<'a>(p: *const libc::c_char) -> R<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, NUL-terminated per the contract.
    let s = unsafe { core::ffi::CStr::from_ptr(p) };
    s.to_str().map(Some).map_err(|_| libc::EINVAL)
}

/// A C caller's buffer lent to a connection by `nf_send_zc`: read in place until the stack
/// releases it (its completion), as the header's contract says.
pub(crate) struct CRegion {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the C caller promises (include/netfold.h, nf_send_zc) that the buffer stays valid and
// unmodified until its completion is reported, from any thread; the stack only reads it.
unsafe impl Send for CRegion {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for CRegion {}

impl netfold_core::buf::Region for CRegion {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is non-NULL (checked in `lend`) and readable for `len` bytes until the
        // completion (the caller's contract); the completion is posted when this region is
        // dropped, so no borrow outlives it.
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Wraps `b`/`n` for zero-copy send: EFAULT for NULL, EINVAL for an empty buffer or one larger
/// than `isize::MAX` (no Rust slice may be).
///
/// # Safety
/// `b` must stay readable for `n` bytes, unmodified, until the stack reports the buffer's
/// completion.
pub(crate) unsafe fn lend(b: *const c_void, n: usize) -> R<netfold_core::buf::ZcBuf> {
    if b.is_null() {
        return Err(libc::EFAULT);
    }
    if n == 0 || n > isize::MAX as usize {
        return Err(libc::EINVAL);
    }
    Ok(netfold_core::buf::ZcBuf::new(CRegion {
        ptr: b.cast(),
        len: n,
    }))
}
