//! The C API driven by arbitrary call sequences: two stacks (manual clock, no device) whose
//! frames the target carries between them with nf_take/nf_inject, and a program of socket
//! calls with descriptors, flags, option names/values and lengths chosen by the fuzzer
//! (valid, stale and invalid descriptors alike). Every descriptor is made non-blocking (with a
//! manual clock a blocking call would wait for a clock that never moves). Any return value
//! is fine; a panic, an abort or a hang is a bug.
#![no_main]

use libc::{c_int, c_void, sockaddr, sockaddr_in, socklen_t};
use libfuzzer_sys::fuzz_target;
use netfold_ffi::*;
use netfold_fuzz::Input;
use std::ffi::CStr;

const ADDR_A: &CStr = c"198.18.0.1/24";
const ADDR_B: &CStr = c"198.18.0.2/24";

/// A sockaddr_in with room behind it: the program passes lengths up to 31 bytes, and an
/// AF_INET6 socket writes (or reads) up to a sockaddr_in6 (28 bytes) within that length, so
/// every address buffer must really hold 32 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
struct Sa {
    sin: sockaddr_in,
    _room: [u8; 16],
}

fn sin(ip: [u8; 4], port: u16) -> Sa {
    Sa {
        sin: sin4(ip, port),
        _room: [0; 16],
    }
}

fn sin4(ip: [u8; 4], port: u16) -> sockaddr_in {
    sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip),
        },
        sin_zero: [0; 8],
    }
}

fn new_stack(addr: &CStr) -> *mut nf_stack {
    // SAFETY: nf_config_init writes a whole nf_config into `cfg`; the strings are static.
    unsafe {
        let mut cfg = core::mem::zeroed::<nf_config>();
        nf_config_init(&mut cfg);
        cfg.address = addr.as_ptr();
        cfg.clock = NF_CLOCK_MANUAL;
        nf_stack_new(&cfg)
    }
}

fuzz_target!(|data: &[u8]| {
    let stacks = [new_stack(ADDR_A), new_stack(ADDR_B)];
    assert!(stacks.iter().all(|s| !s.is_null()), "nf_stack_new failed");
    let ips = [[198, 18, 0, 1], [198, 18, 0, 2]];
    let mut fds: [Vec<c_int>; 2] = [Vec::new(), Vec::new()];
    let mut clock = 0u64;
    let mut inp = Input::new(data);
    let mut buf = vec![0u8; 70_000];
    let mut ops = 0;
    while !inp.is_empty() && ops < 512 {
        ops += 1;
        let op = inp.u8();
        let side = usize::from(op >> 7);
        let s = stacks[side];
        let sel = inp.u8();
        // A descriptor: one we created, or any number (stale, invalid, negative).
        let fd = if sel & 0x80 == 0 && !fds[side].is_empty() {
            fds[side][usize::from(sel) % fds[side].len()]
        } else {
            i32::from(inp.u8() as i8)
        };
        let port = match inp.u8() % 4 {
            0 => 80,
            1 => 0,
            2 => 5000,
            _ => inp.u16(),
        };
        let peer = sin(ips[side ^ 1], port);
        let own = sin(ips[side], port);
        let n = usize::from(inp.u16()) % buf.len();
        // SAFETY: every pointer below is either NULL where the API allows it, or points to a
        // live local of at least the length passed; the stacks are live until the end.
        unsafe {
            match op & 0x1f {
                0 => {
                    let ty = if inp.u8() & 1 == 0 {
                        libc::SOCK_STREAM
                    } else {
                        libc::SOCK_DGRAM
                    };
                    let domain = if inp.u8() & 7 == 0 {
                        libc::AF_INET6
                    } else {
                        libc::AF_INET
                    };
                    let fd = nf_socket(s, domain, ty, 0);
                    if fd >= 0 {
                        nf_fcntl(s, fd, libc::F_SETFL, libc::O_NONBLOCK as libc::c_long);
                        fds[side].push(fd);
                    }
                }
                1 => {
                    let a = if inp.u8() & 1 == 0 { own } else { peer };
                    let l = (inp.u8() as socklen_t) % 32;
                    nf_bind(s, fd, (&a as *const Sa).cast::<sockaddr>(), l);
                }
                2 => {
                    nf_listen(s, fd, i32::from(inp.u8() as i8));
                }
                3 => {
                    let mut a = sin([0; 4], 0);
                    let mut l = core::mem::size_of::<sockaddr_in>() as socklen_t;
                    let r = if inp.u8() & 1 == 0 {
                        nf_accept(s, fd, (&mut a as *mut Sa).cast(), &mut l)
                    } else {
                        nf_accept(s, fd, core::ptr::null_mut(), core::ptr::null_mut())
                    };
                    if r >= 0 {
                        nf_fcntl(s, r, libc::F_SETFL, libc::O_NONBLOCK as libc::c_long);
                        fds[side].push(r);
                    }
                }
                4 => {
                    let l = core::mem::size_of::<sockaddr_in>() as socklen_t;
                    nf_connect(s, fd, (&peer as *const Sa).cast(), l);
                }
                5 => {
                    nf_send(s, fd, buf.as_ptr().cast(), n, libc::MSG_DONTWAIT);
                }
                6 => {
                    nf_recv(s, fd, buf.as_mut_ptr().cast(), n, libc::MSG_DONTWAIT);
                }
                7 => {
                    let l = core::mem::size_of::<sockaddr_in>() as socklen_t;
                    nf_sendto(
                        s,
                        fd,
                        buf.as_ptr().cast(),
                        n % 2000,
                        0,
                        (&peer as *const Sa).cast(),
                        l,
                    );
                }
                8 => {
                    let mut a = sin([0; 4], 0);
                    let mut l = (inp.u8() as socklen_t) % 32;
                    nf_recvfrom(
                        s,
                        fd,
                        buf.as_mut_ptr().cast(),
                        n,
                        libc::MSG_DONTWAIT,
                        (&mut a as *mut Sa).cast(),
                        &mut l,
                    );
                }
                9 => {
                    let (x, y) = buf.split_at_mut(n / 2);
                    let iov = [
                        libc::iovec {
                            iov_base: x.as_mut_ptr().cast::<c_void>(),
                            iov_len: x.len().min(1000),
                        },
                        libc::iovec {
                            iov_base: y.as_mut_ptr().cast::<c_void>(),
                            iov_len: y.len().min(3000),
                        },
                    ];
                    let cnt = i32::from(inp.u8() % 3);
                    if inp.u8() & 1 == 0 {
                        nf_readv(s, fd, iov.as_ptr(), cnt);
                    } else {
                        nf_writev(s, fd, iov.as_ptr(), cnt);
                    }
                }
                10 => {
                    nf_shutdown(s, fd, i32::from(inp.u8() % 4));
                }
                11 => {
                    if nf_close(s, fd) == 0 {
                        fds[side].retain(|&f| f != fd);
                    }
                }
                12 => {
                    let level = [libc::SOL_SOCKET, libc::IPPROTO_TCP, libc::IPPROTO_IP, 999]
                        [usize::from(inp.u8() % 4)];
                    let name = i32::from(inp.u8() % 64);
                    let v = inp.bytes(16).to_vec();
                    nf_setsockopt(s, fd, level, name, v.as_ptr().cast(), v.len() as socklen_t);
                }
                13 => {
                    let level = [libc::SOL_SOCKET, libc::IPPROTO_TCP, libc::IPPROTO_IP, 999]
                        [usize::from(inp.u8() % 4)];
                    let name = i32::from(inp.u8() % 64);
                    let mut v = [0u8; 32];
                    let mut l = (inp.u8() as socklen_t) % 33;
                    nf_getsockopt(s, fd, level, name, v.as_mut_ptr().cast(), &mut l);
                }
                14 => {
                    let mut a = sin([0; 4], 0);
                    let mut l = (inp.u8() as socklen_t) % 32;
                    nf_getsockname(s, fd, (&mut a as *mut Sa).cast(), &mut l);
                    let mut l = (inp.u8() as socklen_t) % 32;
                    nf_getpeername(s, fd, (&mut a as *mut Sa).cast(), &mut l);
                }
                15 => {
                    let mut v: c_int = 0;
                    let req = if inp.u8() & 1 == 0 {
                        libc::FIONREAD
                    } else {
                        libc::TIOCOUTQ
                    };
                    nf_ioctl(s, fd, req as _, (&mut v as *mut c_int).cast());
                }
                16 => {
                    let mut p: Vec<libc::pollfd> = fds[side]
                        .iter()
                        .map(|&fd| libc::pollfd {
                            fd,
                            events: libc::POLLIN | libc::POLLOUT,
                            revents: 0,
                        })
                        .collect();
                    nf_poll(s, p.as_mut_ptr(), p.len() as libc::nfds_t, 0);
                }
                17 => {
                    clock += u64::from(inp.u16()) * 1000;
                    for &st in &stacks {
                        nf_clock_set(st, clock);
                    }
                }
                18 | 19 | 20 | 21 => {
                    // Carry frames: what one stack sends, the other receives.
                    for from in 0..2 {
                        loop {
                            let r = nf_take(stacks[from], buf.as_mut_ptr().cast(), 2048);
                            if r <= 0 {
                                break;
                            }
                            nf_inject(stacks[from ^ 1], buf.as_ptr().cast(), r as usize);
                        }
                    }
                }
                22 => {
                    let f = inp.bytes(n % 1600).to_vec();
                    nf_inject(s, f.as_ptr().cast(), f.len());
                }
                23 => {
                    let cap = n % 100;
                    nf_take(s, buf.as_mut_ptr().cast(), cap);
                }
                24 => {
                    nf_fcntl(s, fd, libc::F_GETFL, 0);
                }
                _ => {
                    nf_write(s, fd, buf.as_ptr().cast(), n);
                    nf_read(s, fd, buf.as_mut_ptr().cast(), n);
                }
            }
        }
    }
    // SAFETY: both came from nf_stack_new and are freed once.
    unsafe {
        for s in stacks {
            nf_stack_free(s);
        }
    }
});
