//! Unit tests of the boundary itself (the socket behaviour is tested from C: tests/c/).

use super::*;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let header = include_str!("../../../include/netfold.h");
    let mut names = exported_names();
    names.sort_unstable();
    for n in &names {
        assert!(
            header.contains(&format!(" {n}(")) || header.contains(&format!("*{n}(")),
            "{n} is exported but not declared in include/netfold.h"
        );
    }
    // Every `nf_xxx(` the header declares is in the export list.
    let declared = header
        .lines()
        .filter(|l| !l.trim_start().starts_with('*') && !l.trim_start().starts_with("/*"))
        .filter_map(|l| {
            let head = &l[..l.find('(')?];
            let start = head
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            Some(head[start..].to_string()).filter(|n| n.starts_with("nf_"))
        })
        .count();
    assert_eq!(declared, names.len());
}

#[test]
fn config_layout_is_the_c_layout_on_lp64() {
    let mut offs = [0usize; 11];
    // SAFETY: `offs` has room for the 11 offsets asked for.
    let size = unsafe { nf_config_layout(offs.as_mut_ptr(), offs.len()) };
    if cfg!(target_pointer_width = "64") {
        assert_eq!(offs, [0, 4, 8, 16, 24, 32, 36, 40, 48, 56, 64]);
        assert_eq!(size, 72);
        // The first version of the struct ended at `device`.
        assert_eq!(NF_CONFIG_V1_SIZE, 48);
    }
    // SAFETY: NULL is allowed: only the size is returned.
    assert_eq!(unsafe { nf_config_layout(core::ptr::null_mut(), 8) }, size);
}

#[test]
fn cidr_parsing() {
    assert_eq!(
        parse_cidr("198.18.0.2/24"),
        Ok((Ipv4Addr::new(198, 18, 0, 2), 24))
    );
    assert_eq!(parse_cidr("198.18.0.2"), Err(libc::EINVAL));
    assert_eq!(parse_cidr("198.18.0.2/33"), Err(libc::EINVAL));
    assert_eq!(parse_cidr("0.0.0.0/0"), Err(libc::EINVAL));
    assert_eq!(parse_cidr("x/24"), Err(libc::EINVAL));
}

#[test]
fn null_pointers_are_errors_not_crashes() {
    // SAFETY: every pointer passed is NULL on purpose or points at a live local of the
    // stated size; stacks are freed once.
    unsafe {
        assert!(nf_stack_new(core::ptr::null()).is_null());
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(
            nf_socket(core::ptr::null_mut(), libc::AF_INET, libc::SOCK_STREAM, 0),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(nf_clock_now(core::ptr::null_mut()), 0);
        nf_stack_free(core::ptr::null_mut());
        nf_config_init(core::ptr::null_mut());
        assert_eq!(errno(), libc::EFAULT);

        let mut c = core::mem::MaybeUninit::<nf_config>::uninit();
        nf_config_init(c.as_mut_ptr());
        // nf_config_init wrote every field.
        let mut c = c.assume_init();
        c.clock = NF_CLOCK_MANUAL;
        let s = nf_stack_new(&c);
        assert!(!s.is_null());
        assert_eq!(nf_inject(s, core::ptr::null(), 60), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(nf_inject(s, [0u8; 1].as_ptr().cast(), 0), -1);
        assert_eq!(errno(), libc::EINVAL);
        // Beyond the MTU is accepted (merged segments of a device with receive offloads);
        // beyond a whole IP datagram and its link header is not.
        let big = vec![0u8; 4000];
        assert_eq!(nf_inject(s, big.as_ptr().cast(), big.len()), 0);
        let huge = vec![0u8; 70_000];
        assert_eq!(nf_inject(s, huge.as_ptr().cast(), huge.len()), -1);
        assert_eq!(errno(), libc::EMSGSIZE);
        // Garbage frames are dropped by the stack, not a crash or an error to the injector.
        let junk = [0xffu8; 64];
        assert_eq!(nf_inject(s, junk.as_ptr().cast(), junk.len()), 0);
        let mut out = [0u8; 64];
        assert_eq!(nf_take(s, out.as_mut_ptr().cast(), out.len()), -1);
        assert_eq!(errno(), libc::EAGAIN);
        let fd = nf_socket(s, libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 3);
        assert_eq!(nf_poll(s, core::ptr::null_mut(), 1, 0), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(nf_readv(s, fd, core::ptr::null(), 2), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(nf_readv(s, fd, core::ptr::null(), -1), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(nf_recvmsg(s, fd, core::ptr::null_mut(), 0), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(
            nf_getsockopt(
                s,
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                core::ptr::null_mut(),
                core::ptr::null_mut()
            ),
            -1
        );
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(nf_ioctl(s, fd, libc::FIONREAD, core::ptr::null_mut()), -1);
        assert_eq!(errno(), libc::EFAULT);
        nf_stack_free(s);
    }
}

#[test]
fn arp_request_for_us_is_answered_in_manual_mode_before_inject_returns() {
    // SAFETY: every pointer passed is NULL on purpose or points at a live local of the
    // stated size; stacks are freed once.
    unsafe {
        let mut c = core::mem::MaybeUninit::<nf_config>::uninit();
        nf_config_init(c.as_mut_ptr());
        // nf_config_init wrote every field.
        let mut c = c.assume_init();
        c.clock = NF_CLOCK_MANUAL;
        let s = nf_stack_new(&c);
        assert!(!s.is_null());
        // Who has 198.18.0.2? Tell 198.18.0.1 (02:00:c6:12:00:01).
        let mut f: Vec<u8> = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 198, 18, 0, 1, 0x08, 0x06]);
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[2, 0, 198, 18, 0, 1, 198, 18, 0, 1]);
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 198, 18, 0, 2]);
        assert_eq!(nf_inject(s, f.as_ptr().cast(), f.len()), 0);
        let mut out = [0u8; 128];
        // Too small a buffer is refused and the frame kept for a second try.
        assert_eq!(nf_take(s, out.as_mut_ptr().cast(), 10), -1);
        assert_eq!(errno(), libc::EMSGSIZE);
        let n = nf_take(s, out.as_mut_ptr().cast(), out.len());
        assert!(n >= 42, "no ARP reply: {n} {}", errno());
        assert_eq!(&out[0..6], &[2, 0, 198, 18, 0, 1]);
        assert_eq!(&out[12..14], &[0x08, 0x06]);
        assert_eq!(&out[20..22], &[0, 2]); // reply
        assert_eq!(&out[22..28], &[2, 0, 198, 18, 0, 2]); // our MAC, derived from the address
        nf_stack_free(s);
    }
}

// ---- Errors a BSD program expects, MSG_PEEK, IP_MTU_DISCOVER ----

const HERE: [u8; 4] = [198, 18, 0, 2];
const PEER: [u8; 4] = [198, 18, 0, 1];

/// A MANUAL-clock stack at `addr` ("a.b.c.d/len").
unsafe fn manual_stack(addr: &core::ffi::CStr) -> *mut nf_stack {
    let mut c = core::mem::MaybeUninit::<nf_config>::uninit();
    // SAFETY: `c` is a live local of the right size; nf_config_init writes every field.
    let mut c = unsafe {
        nf_config_init(c.as_mut_ptr());
        c.assume_init()
    };
    c.clock = NF_CLOCK_MANUAL;
    c.address = addr.as_ptr();
    // SAFETY: `c` is a valid config whose address string outlives the call.
    let s = unsafe { nf_stack_new(&c) };
    assert!(!s.is_null());
    s
}

fn sin(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip),
        },
        sin_zero: [0; 8],
    }
}

const SIN_LEN: libc::socklen_t = core::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// Moves frames between two stacks until neither has any to send; returns the frames a sent.
unsafe fn pump(a: *mut nf_stack, b: *mut nf_stack) -> Vec<Vec<u8>> {
    let mut from_a = Vec::new();
    let mut buf = vec![0u8; 2048];
    loop {
        let mut moved = false;
        for (src, dst) in [(a, b), (b, a)] {
            // SAFETY: both stacks are live; `buf` is writable for its length.
            unsafe {
                loop {
                    let n = nf_take(src, buf.as_mut_ptr().cast(), buf.len());
                    if n < 0 {
                        break;
                    }
                    let f = &buf[..n as usize];
                    if src == a {
                        from_a.push(f.to_vec());
                    }
                    if !dst.is_null() {
                        nf_inject(dst, f.as_ptr().cast(), f.len());
                    }
                    moved = true;
                }
            }
        }
        if !moved {
            return from_a;
        }
    }
}

unsafe fn int_opt(s: *mut nf_stack, fd: i32, level: i32, name: i32) -> Result<i32, i32> {
    let mut v: i32 = -1;
    let mut l = core::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` and `l` are live locals of the stated sizes.
    let r = unsafe { nf_getsockopt(s, fd, level, name, (&mut v as *mut i32).cast(), &mut l) };
    if r == 0 {
        Ok(v)
    } else {
        Err(errno())
    }
}

unsafe fn set_int(s: *mut nf_stack, fd: i32, level: i32, name: i32, v: i32) -> Result<(), i32> {
    let l = core::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` is a live local of the stated size.
    let r = unsafe { nf_setsockopt(s, fd, level, name, (&v as *const i32).cast(), l) };
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

#[test]
fn connect_to_a_silent_neighbour_fails_with_ehostunreach_after_the_arp_retries() {
    // SAFETY: pointers are live locals of the stated sizes; the stack is freed once.
    unsafe {
        let s = manual_stack(c"198.18.0.2/24");
        let fd = nf_socket(s, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let to = sin(PEER, 80);
        assert_eq!(
            nf_connect(s, fd, (&to as *const libc::sockaddr_in).cast(), SIN_LEN),
            -1
        );
        assert_eq!(errno(), libc::EINPROGRESS);
        // Nobody answers: 3 ARP requests 1 s apart (Linux's defaults), then give up.
        for t in 1..=2u64 {
            assert_eq!(nf_clock_set(s, t * 1_000_000), 0);
            assert_eq!(int_opt(s, fd, libc::SOL_SOCKET, libc::SO_ERROR), Ok(0));
        }
        assert_eq!(nf_clock_set(s, 3_000_000), 0);
        assert_eq!(
            int_opt(s, fd, libc::SOL_SOCKET, libc::SO_ERROR),
            Ok(libc::EHOSTUNREACH)
        );
        // A blocking connect reports it itself.
        let fd2 = nf_socket(s, libc::AF_INET, libc::SOCK_STREAM, 0);
        let addr = s as usize;
        let t = std::thread::spawn(move || {
            let s = addr as *mut nf_stack;
            let to = sin(PEER, 81);
            let r = nf_connect(s, fd2, (&to as *const libc::sockaddr_in).cast(), SIN_LEN);
            (r, errno())
        });
        let mut now = 3_000_000u64;
        while !t.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(5));
            now += 250_000;
            assert!(now < 20_000_000, "connect did not give up");
            nf_clock_set(s, now);
        }
        assert_eq!(t.join().unwrap(), (-1, libc::EHOSTUNREACH));
        nf_stack_free(s);
    }
}

#[test]
fn bind_to_an_address_that_is_not_ours_fails_with_eaddrnotavail() {
    // SAFETY: pointers are live locals of the stated sizes; the stack is freed once.
    unsafe {
        let s = manual_stack(c"198.18.0.2/24");
        for ty in [libc::SOCK_STREAM, libc::SOCK_DGRAM] {
            let fd = nf_socket(s, libc::AF_INET, ty, 0);
            let other = sin(PEER, 80);
            assert_eq!(
                nf_bind(s, fd, (&other as *const libc::sockaddr_in).cast(), SIN_LEN),
                -1
            );
            assert_eq!(errno(), libc::EADDRNOTAVAIL);
            let any = sin([0; 4], 80);
            assert_eq!(
                nf_bind(s, fd, (&any as *const libc::sockaddr_in).cast(), SIN_LEN),
                0
            );
            let fd = nf_socket(s, libc::AF_INET, ty, 0);
            let ours = sin(HERE, 81);
            assert_eq!(
                nf_bind(s, fd, (&ours as *const libc::sockaddr_in).cast(), SIN_LEN),
                0
            );
            if ty == libc::SOCK_STREAM {
                assert_eq!(nf_listen(s, fd, 4), 0);
            }
        }
        nf_stack_free(s);
    }
}

#[test]
fn a_connected_udp_socket_gets_econnrefused_once_after_port_unreachable() {
    // SAFETY: pointers are live locals of the stated sizes; stacks are freed once.
    unsafe {
        let a = manual_stack(c"198.18.0.2/24");
        let b = manual_stack(c"198.18.0.1/24");
        let fd = nf_socket(a, libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0);
        let closed = sin(PEER, 9);
        assert_eq!(
            nf_connect(a, fd, (&closed as *const libc::sockaddr_in).cast(), SIN_LEN),
            0
        );
        let msg = b"anyone?";
        assert_eq!(
            nf_send(a, fd, msg.as_ptr().cast(), msg.len(), 0),
            msg.len() as isize
        );
        pump(a, b);
        // Reported once by the next call (here a send), then cleared (Linux semantics).
        assert_eq!(nf_send(a, fd, msg.as_ptr().cast(), msg.len(), 0), -1);
        assert_eq!(errno(), libc::ECONNREFUSED);
        assert_eq!(
            nf_send(a, fd, msg.as_ptr().cast(), msg.len(), 0),
            msg.len() as isize
        );
        pump(a, b);
        // ... or by the next receive, or SO_ERROR (and poll shows POLLERR meanwhile).
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        assert_eq!(nf_poll(a, &mut p, 1, 0), 1);
        assert_ne!(p.revents & libc::POLLERR, 0);
        let mut buf = [0u8; 16];
        assert_eq!(nf_recv(a, fd, buf.as_mut_ptr().cast(), buf.len(), 0), -1);
        assert_eq!(errno(), libc::ECONNREFUSED);
        assert_eq!(nf_recv(a, fd, buf.as_mut_ptr().cast(), buf.len(), 0), -1);
        assert_eq!(errno(), libc::EAGAIN);
        assert_eq!(
            nf_send(a, fd, msg.as_ptr().cast(), msg.len(), 0),
            msg.len() as isize
        );
        pump(a, b);
        assert_eq!(
            int_opt(a, fd, libc::SOL_SOCKET, libc::SO_ERROR),
            Ok(libc::ECONNREFUSED)
        );
        assert_eq!(int_opt(a, fd, libc::SOL_SOCKET, libc::SO_ERROR), Ok(0));
        // An unconnected socket hears nothing (Linux without IP_RECVERR).
        let u = nf_socket(a, libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0);
        let to = (&closed as *const libc::sockaddr_in).cast();
        assert_eq!(
            nf_sendto(a, u, msg.as_ptr().cast(), msg.len(), 0, to, SIN_LEN),
            7
        );
        pump(a, b);
        assert_eq!(
            nf_sendto(a, u, msg.as_ptr().cast(), msg.len(), 0, to, SIN_LEN),
            7
        );
        nf_stack_free(a);
        nf_stack_free(b);
    }
}

#[test]
fn ip_mtu_discover_as_linux() {
    // SAFETY: pointers are live locals of the stated sizes; stacks are freed once.
    unsafe {
        let a = manual_stack(c"198.18.0.2/24");
        let b = manual_stack(c"198.18.0.1/24");
        let echo = nf_socket(b, libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0);
        let at = sin(PEER, 7);
        assert_eq!(
            nf_bind(b, echo, (&at as *const libc::sockaddr_in).cast(), SIN_LEN),
            0
        );
        let fd = nf_socket(a, libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0);
        let (ip, mtu_disc) = (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER);
        assert_eq!(int_opt(a, fd, ip, mtu_disc), Ok(libc::IP_PMTUDISC_WANT));
        assert_eq!(int_opt(a, fd, ip, libc::IP_MTU), Err(libc::ENOTCONN));
        assert_eq!(set_int(a, fd, ip, mtu_disc, 6), Err(libc::EINVAL));
        let to = sin(PEER, 7);
        assert_eq!(
            nf_connect(a, fd, (&to as *const libc::sockaddr_in).cast(), SIN_LEN),
            0
        );
        assert_eq!(int_opt(a, fd, ip, libc::IP_MTU), Ok(1500));
        // The IPv4 flags byte of each UDP packet a sent (Ethernet 14 + 6); DF is 0x40.
        let df = |frames: &[Vec<u8>]| -> Vec<bool> {
            frames
                .iter()
                .filter(|f| f.len() > 23 && f[12..14] == [8, 0] && f[23] == 17)
                .map(|f| f[20] & 0x40 != 0)
                .collect()
        };
        let send = |n: usize| {
            let data = vec![7u8; n];
            let r = nf_send(a, fd, data.as_ptr().cast(), n, 0);
            (r, if r < 0 { errno() } else { 0 }, df(&pump(a, b)))
        };
        // WANT (the default): DF on what fits; 3000 bytes leave in fragments without DF.
        assert_eq!(send(100), (100, 0, vec![true]));
        assert_eq!(send(3000), (3000, 0, vec![false, false, false]));
        // DONT: no DF.
        assert_eq!(set_int(a, fd, ip, mtu_disc, libc::IP_PMTUDISC_DONT), Ok(()));
        assert_eq!(send(100), (100, 0, vec![false]));
        // DO: DF, and EMSGSIZE beyond the path MTU.
        assert_eq!(set_int(a, fd, ip, mtu_disc, libc::IP_PMTUDISC_DO), Ok(()));
        assert_eq!(int_opt(a, fd, ip, mtu_disc), Ok(libc::IP_PMTUDISC_DO));
        assert_eq!(send(1472), (1472, 0, vec![true]));
        assert_eq!(send(3000), (-1, libc::EMSGSIZE, vec![]));
        // PROBE: DF, EMSGSIZE beyond the interface MTU.
        assert_eq!(
            set_int(a, fd, ip, mtu_disc, libc::IP_PMTUDISC_PROBE),
            Ok(())
        );
        assert_eq!(send(1473), (-1, libc::EMSGSIZE, vec![]));
        // The mode chosen before the socket is bound applies once it is.
        let fd2 = nf_socket(a, libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0);
        assert_eq!(set_int(a, fd2, ip, mtu_disc, libc::IP_PMTUDISC_DO), Ok(()));
        let big = vec![0u8; 3000];
        let dst = (&to as *const libc::sockaddr_in).cast();
        assert_eq!(
            nf_sendto(a, fd2, big.as_ptr().cast(), big.len(), 0, dst, SIN_LEN),
            -1
        );
        assert_eq!(errno(), libc::EMSGSIZE);
        // TCP keeps the value for getsockopt.
        let t = nf_socket(a, libc::AF_INET, libc::SOCK_STREAM, 0);
        assert_eq!(set_int(a, t, ip, mtu_disc, libc::IP_PMTUDISC_DO), Ok(()));
        assert_eq!(int_opt(a, t, ip, mtu_disc), Ok(libc::IP_PMTUDISC_DO));
        nf_stack_free(a);
        nf_stack_free(b);
    }
}

/// IP_FREEBIND as Linux: bind() takes an address that is not the interface's, and a
/// connection from it sends from that address.
#[test]
fn ip_freebind_binds_to_an_address_that_is_not_ours() {
    // SAFETY: pointers are live locals of the stated sizes; stacks are freed once.
    unsafe {
        let a = manual_stack(c"198.18.0.2/24");
        let b = manual_stack(c"198.18.0.1/24");
        let ip = libc::IPPROTO_IP;
        let fd = nf_socket(a, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let free = sin([198, 18, 0, 9], 4000);
        assert_eq!(
            nf_bind(a, fd, (&free as *const libc::sockaddr_in).cast(), SIN_LEN),
            -1
        );
        assert_eq!(errno(), libc::EADDRNOTAVAIL);
        assert_eq!(int_opt(a, fd, ip, libc::IP_FREEBIND), Ok(0));
        assert_eq!(set_int(a, fd, ip, libc::IP_FREEBIND, 1), Ok(()));
        assert_eq!(int_opt(a, fd, ip, libc::IP_FREEBIND), Ok(1));
        assert_eq!(
            nf_bind(a, fd, (&free as *const libc::sockaddr_in).cast(), SIN_LEN),
            0
        );
        let to = sin(PEER, 80);
        let r = nf_connect(a, fd, (&to as *const libc::sockaddr_in).cast(), SIN_LEN);
        assert!(r == 0 || errno() == libc::EINPROGRESS, "errno {}", errno());
        // The SYN (IPv4 protocol 6 at 14 + 9) leaves from 198.18.0.9 (IPv4 source at 14 + 12).
        let syn = pump(a, b)
            .into_iter()
            .find(|f| f.len() > 34 && f[12..14] == [8, 0] && f[23] == 6)
            .expect("a SYN");
        assert_eq!(syn[26..30], [198, 18, 0, 9]);
        nf_stack_free(a);
        nf_stack_free(b);
    }
}

/// IP_TOS as Linux: the DSCP on every TCP packet (SYN-ACK included), the ECN bits not the
/// socket's, inherited by the accepted socket; a one-byte value is taken; UDP refuses it.
#[test]
fn ip_tos_marks_every_tcp_segment_and_is_inherited() {
    // The TOS byte of each TCP packet in `frames` (Ethernet 14 + 1; protocol at 14 + 9).
    let tos = |frames: &[Vec<u8>]| -> Vec<u8> {
        frames
            .iter()
            .filter(|f| f.len() > 23 && f[12..14] == [8, 0] && f[23] == 6)
            .map(|f| f[15])
            .collect()
    };
    let ip = libc::IPPROTO_IP;
    // SAFETY: pointers are live locals of the stated sizes; stacks are freed once.
    unsafe {
        let a = manual_stack(c"198.18.0.2/24");
        let b = manual_stack(c"198.18.0.1/24");
        let l = nf_socket(a, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        assert_eq!(int_opt(a, l, ip, libc::IP_TOS), Ok(0));
        // One byte, as Linux accepts for IPPROTO_IP options.
        let one: u8 = 0x49;
        assert_eq!(
            nf_setsockopt(a, l, ip, libc::IP_TOS, (&one as *const u8).cast(), 1),
            0
        );
        assert_eq!(
            int_opt(a, l, ip, libc::IP_TOS),
            Ok(0x48),
            "ECN bits dropped"
        );
        let at = sin([198, 18, 0, 2], 5002);
        assert_eq!(
            nf_bind(a, l, (&at as *const libc::sockaddr_in).cast(), SIN_LEN),
            0
        );
        assert_eq!(nf_listen(a, l, 8), 0);
        let c = nf_socket(b, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let r = nf_connect(b, c, (&at as *const libc::sockaddr_in).cast(), SIN_LEN);
        assert!(r == 0 || errno() == libc::EINPROGRESS);
        let hs = tos(&pump(a, b));
        assert!(!hs.is_empty() && hs.iter().all(|&t| t == 0x48), "{hs:x?}");
        let s = nf_accept(a, l, core::ptr::null_mut(), core::ptr::null_mut());
        assert!(s >= 0, "errno {}", errno());
        assert_eq!(int_opt(a, s, ip, libc::IP_TOS), Ok(0x48), "inherited");
        let msg = vec![7u8; 5000];
        assert_eq!(nf_send(a, s, msg.as_ptr().cast(), msg.len(), 0), 5000);
        let data = tos(&pump(a, b));
        assert!(
            data.len() >= 4 && data.iter().all(|&t| t == 0x48),
            "{data:x?}"
        );
        assert_eq!(set_int(a, s, ip, libc::IP_TOS, 0xb8), Ok(()));
        assert_eq!(nf_send(a, s, msg.as_ptr().cast(), 100, 0), 100);
        assert_eq!(tos(&pump(a, b)), vec![0xb8]);
        // The peer's socket was never marked.
        let mut got = vec![0u8; 8000];
        assert!(nf_recv(b, c, got.as_mut_ptr().cast(), got.len(), 0) > 0);
        assert_eq!(int_opt(b, c, ip, libc::IP_TOS), Ok(0));
        let u = nf_socket(a, libc::AF_INET, libc::SOCK_DGRAM, 0);
        assert_eq!(
            set_int(a, u, ip, libc::IP_TOS, 0x48),
            Err(libc::ENOPROTOOPT)
        );
        nf_stack_free(a);
        nf_stack_free(b);
    }
}

#[test]
fn shards_new_tap_checks_its_arguments_before_opening_anything() {
    let mut cfg = std::mem::MaybeUninit::<nf_config>::zeroed();
    // SAFETY: a writable nf_config.
    unsafe { nf_config_init(cfg.as_mut_ptr()) };
    // SAFETY: initialised by nf_config_init.
    let cfg = unsafe { cfg.assume_init() };
    let mut out: *mut nf_shards = std::ptr::null_mut();
    let name = c"nf%d";
    // SAFETY: valid or NULL pointers, as each case says.
    unsafe {
        assert_eq!(
            nf_shards_new_tap(&cfg, std::ptr::null(), 2, 0, &mut out),
            -1
        );
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(
            nf_shards_new_tap(&cfg, name.as_ptr(), 2, 0, std::ptr::null_mut()),
            -1
        );
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(nf_shards_new_tap(&cfg, name.as_ptr(), 0, 0, &mut out), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(nf_shards_new_tap(&cfg, name.as_ptr(), 2, 4, &mut out), -1);
        assert_eq!(errno(), libc::EINVAL);
    }
    assert!(out.is_null());
}

/// getsockopt(TCP_INFO) in Linux's layout: state, options, wscales, MSS, cwnd in segments,
/// bytes acknowledged and received, segments in and out, a listener as TCP_LISTEN, and a
/// short buffer getting the struct's prefix.
#[test]
fn tcp_info_reports_the_connection_in_linux_layout() {
    unsafe fn info(s: *mut nf_stack, fd: i32, cap: usize) -> Vec<u8> {
        let mut v = vec![0u8; cap];
        let mut l = cap as libc::socklen_t;
        // SAFETY: `v` is writable for `l` bytes.
        let r = unsafe {
            nf_getsockopt(
                s,
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                v.as_mut_ptr().cast(),
                &mut l,
            )
        };
        assert_eq!(r, 0, "errno {}", errno());
        v.truncate(l as usize);
        v
    }
    let u32_at = |b: &[u8], o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |b: &[u8], o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
    // SAFETY: pointers are live locals of the stated sizes; stacks are freed once.
    unsafe {
        let a = manual_stack(c"198.18.0.2/24");
        let b = manual_stack(c"198.18.0.1/24");
        let l = nf_socket(b, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let at = sin(PEER, 5001);
        assert_eq!(
            nf_bind(b, l, (&at as *const libc::sockaddr_in).cast(), SIN_LEN),
            0
        );
        assert_eq!(nf_listen(b, l, 8), 0);
        let li = info(b, l, 512);
        assert_eq!(li.len(), 280, "the whole struct, no more");
        assert_eq!(li[0], 10, "TCP_LISTEN");
        let c = nf_socket(a, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        assert_eq!(info(a, c, 280)[0], 7, "TCP_CLOSE before connect");
        let r = nf_connect(a, c, (&at as *const libc::sockaddr_in).cast(), SIN_LEN);
        assert!(r == 0 || errno() == libc::EINPROGRESS);
        pump(a, b);
        let s = nf_accept(b, l, core::ptr::null_mut(), core::ptr::null_mut());
        assert!(s >= 0, "errno {}", errno());
        let msg = vec![7u8; 10_000];
        assert_eq!(nf_send(a, c, msg.as_ptr().cast(), msg.len(), 0), 10_000);
        pump(a, b);
        let mut got = vec![0u8; 20_000];
        assert_eq!(nf_recv(b, s, got.as_mut_ptr().cast(), got.len(), 0), 10_000);
        pump(a, b);
        let ci = info(a, c, 280);
        assert_eq!(ci[0], 1, "TCP_ESTABLISHED");
        assert_eq!(ci[1], 0, "TCP_CA_Open");
        let opts = ci[5];
        assert_ne!(opts & 1, 0, "TCPI_OPT_TIMESTAMPS");
        assert_ne!(opts & 2, 0, "TCPI_OPT_SACK");
        assert_ne!(opts & 4, 0, "TCPI_OPT_WSCALE");
        assert_eq!(
            ci[6] & 0xf,
            8,
            "snd_wscale: the peer's default announcement"
        );
        assert_eq!(ci[6] >> 4, 8, "rcv_wscale");
        assert_eq!(
            u32_at(&ci, 16),
            1448,
            "snd_mss: 1460 less the timestamp option"
        );
        assert_eq!(u32_at(&ci, 24), 0, "nothing unacknowledged");
        assert_eq!(u32_at(&ci, 84), 1460, "advmss");
        assert!(u32_at(&ci, 80) >= 10, "snd_cwnd in segments (IW10 and up)");
        assert_eq!(
            u32_at(&ci, 76),
            0x7fff_ffff,
            "ssthresh infinite before any loss"
        );
        assert!(u32_at(&ci, 8) >= 200_000, "rto in microseconds");
        assert_eq!(
            u64_at(&ci, 120),
            10_001,
            "bytes_acked: the data and, as Linux counts it for an active opener, the SYN"
        );
        assert!(
            u32_at(&ci, 136) >= 8,
            "segs_out: the SYN, an ACK, 7 data segments"
        );
        assert!(u32_at(&ci, 140) >= 2, "segs_in");
        assert_eq!(
            u32_at(&ci, 156),
            7,
            "data_segs_out: 10,000 bytes in 1448-byte segments"
        );
        assert_eq!(u64_at(&ci, 200), 10_000, "bytes_sent");
        assert_eq!(u32_at(&ci, 100), 0, "no retransmissions");
        let si = info(b, s, 280);
        assert_eq!(u64_at(&si, 128), 10_000, "bytes_received");
        assert_eq!(
            u64_at(&si, 120),
            0,
            "a passive opener's SYN-ACK is not counted (Linux)"
        );
        assert_eq!(u32_at(&si, 152), 7, "data_segs_in");
        // glibc's shorter struct tcp_info gets the prefix.
        let short = info(a, c, 104);
        assert_eq!(short.len(), 104);
        assert_eq!(short[..], ci[..104]);
        // A FIN counts one in both, as in Linux.
        assert_eq!(nf_shutdown(a, c, libc::SHUT_WR), 0);
        pump(a, b);
        assert_eq!(u64_at(&info(a, c, 280), 120), 10_002);
        assert_eq!(u64_at(&info(b, s, 280), 128), 10_001);
        nf_stack_free(a);
        nf_stack_free(b);
    }
}

#[test]
fn epoll_reports_level_and_edge_triggered_readiness_as_linux() {
    const EV0: libc::epoll_event = libc::epoll_event { events: 0, u64: 0 };
    unsafe fn add(s: *mut nf_stack, ep: i32, op: i32, fd: i32, events: u32, data: u64) -> i32 {
        let ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is a live local.
        let r = unsafe { nf_epoll_ctl(s, ep, op, fd, &ev) };
        if r == 0 {
            0
        } else {
            errno()
        }
    }
    /// The (data, events) pairs one non-waiting epoll_wait returns.
    unsafe fn ready(s: *mut nf_stack, ep: i32, max: i32) -> Vec<(u64, u32)> {
        let mut out = [EV0; 8];
        // SAFETY: `out` holds 8 entries, `max` <= 8.
        let n = unsafe { nf_epoll_wait(s, ep, out.as_mut_ptr(), max, 0) };
        assert!(n >= 0, "errno {}", errno());
        out[..n as usize]
            .iter()
            .map(|e| {
                let (d, ev) = (e.u64, e.events);
                (d, ev)
            })
            .collect()
    }
    let (inn, out, rdhup) = (
        libc::EPOLLIN as u32,
        libc::EPOLLOUT as u32,
        libc::EPOLLRDHUP as u32,
    );
    let (et, oneshot) = (libc::EPOLLET as u32, libc::EPOLLONESHOT as u32);
    // SAFETY: pointers are live locals of the stated sizes; stacks are freed once.
    unsafe {
        let a = manual_stack(c"198.18.0.2/24");
        let b = manual_stack(c"198.18.0.1/24");
        let l = nf_socket(b, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let at = sin(PEER, 5001);
        assert_eq!(
            nf_bind(b, l, (&at as *const libc::sockaddr_in).cast(), SIN_LEN),
            0
        );
        assert_eq!(nf_listen(b, l, 8), 0);
        let ep = nf_epoll_create1(b, libc::EPOLL_CLOEXEC);
        assert!(ep >= 0, "errno {}", errno());
        assert_eq!(nf_epoll_create1(b, 0x4), -1, "unknown flags");
        assert_eq!(errno(), libc::EINVAL);
        // Argument errors, as Linux.
        assert_eq!(add(b, ep, libc::EPOLL_CTL_ADD, ep, inn, 0), libc::EINVAL);
        assert_eq!(add(b, l, libc::EPOLL_CTL_ADD, ep, inn, 0), libc::EINVAL);
        assert_eq!(add(b, ep, libc::EPOLL_CTL_ADD, 999, inn, 0), libc::EBADF);
        assert_eq!(add(b, ep, libc::EPOLL_CTL_MOD, l, inn, 0), libc::ENOENT);
        assert_eq!(add(b, ep, libc::EPOLL_CTL_ADD, l, inn | et, 1), 0);
        assert_eq!(add(b, ep, libc::EPOLL_CTL_ADD, l, inn, 1), libc::EEXIST);
        let mut evs = [EV0; 1];
        assert_eq!(nf_epoll_wait(b, ep, evs.as_mut_ptr(), 0, 0), -1);
        assert_eq!(errno(), libc::EINVAL, "maxevents 0");
        assert_eq!(ready(b, ep, 8), vec![], "nothing queued yet");
        // A connection queued: the edge-triggered listener reports it once.
        let c = nf_socket(a, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let r = nf_connect(a, c, (&at as *const libc::sockaddr_in).cast(), SIN_LEN);
        assert!(r == 0 || errno() == libc::EINPROGRESS);
        pump(a, b);
        assert_eq!(ready(b, ep, 8), vec![(1, inn)]);
        assert_eq!(ready(b, ep, 8), vec![], "edge-triggered: once");
        let s = nf_accept(b, l, core::ptr::null_mut(), core::ptr::null_mut());
        assert!(s >= 0, "errno {}", errno());
        // The accepted socket, level-triggered for input and output.
        assert_eq!(add(b, ep, libc::EPOLL_CTL_ADD, s, inn | out | rdhup, 2), 0);
        assert_eq!(ready(b, ep, 8), vec![(2, out)], "writable, nothing to read");
        let msg = [5u8; 100];
        assert_eq!(nf_send(a, c, msg.as_ptr().cast(), 100, 0), 100);
        pump(a, b);
        assert_eq!(ready(b, ep, 8), vec![(2, inn | out)]);
        assert_eq!(ready(b, ep, 8), vec![(2, inn | out)], "level: again");
        // Edge-triggered input: once per arrival, although still readable.
        assert_eq!(add(b, ep, libc::EPOLL_CTL_MOD, s, inn | et, 3), 0);
        assert_eq!(
            ready(b, ep, 8),
            vec![(3, inn)],
            "MOD reports what is ready now"
        );
        assert_eq!(ready(b, ep, 8), vec![]);
        assert_eq!(nf_send(a, c, msg.as_ptr().cast(), 100, 0), 100);
        pump(a, b);
        assert_eq!(ready(b, ep, 8), vec![(3, inn)], "new bytes: a new edge");
        assert_eq!(ready(b, ep, 8), vec![]);
        let mut got = [0u8; 300];
        assert_eq!(nf_recv(b, s, got.as_mut_ptr().cast(), 300, 0), 200);
        // One-shot: one report, then silent until MOD re-arms it.
        assert_eq!(add(b, ep, libc::EPOLL_CTL_MOD, s, inn | oneshot, 4), 0);
        assert_eq!(ready(b, ep, 8), vec![]);
        assert_eq!(nf_send(a, c, msg.as_ptr().cast(), 100, 0), 100);
        pump(a, b);
        assert_eq!(ready(b, ep, 8), vec![(4, inn)]);
        assert_eq!(ready(b, ep, 8), vec![], "disabled after one report");
        assert_eq!(add(b, ep, libc::EPOLL_CTL_MOD, s, inn | rdhup, 5), 0);
        assert_eq!(ready(b, ep, 8), vec![(5, inn)], "re-armed");
        // The peer's FIN: EPOLLRDHUP with EPOLLIN.
        assert_eq!(nf_shutdown(a, c, libc::SHUT_WR), 0);
        pump(a, b);
        assert_eq!(ready(b, ep, 8), vec![(5, inn | rdhup)]);
        // A blocking wait with a timeout returns what is ready at once.
        let mut evs = [EV0; 4];
        assert_eq!(nf_epoll_wait(b, ep, evs.as_mut_ptr(), 4, 1000), 1);
        // DEL, then the listener alone; a closed descriptor leaves the list, and a new
        // socket that reuses its number is not watched.
        assert_eq!(
            nf_epoll_ctl(b, ep, libc::EPOLL_CTL_DEL, s, core::ptr::null()),
            0
        );
        assert_eq!(
            nf_epoll_ctl(b, ep, libc::EPOLL_CTL_DEL, s, core::ptr::null()),
            -1
        );
        assert_eq!(errno(), libc::ENOENT);
        assert_eq!(add(b, ep, libc::EPOLL_CTL_ADD, s, out, 6), 0);
        assert_eq!(nf_close(b, s), 0);
        let reused = nf_socket(b, libc::AF_INET, libc::SOCK_STREAM, 0);
        assert_eq!(reused, s, "lowest free number");
        assert_eq!(add(b, ep, libc::EPOLL_CTL_DEL, s, 0, 0), libc::ENOENT);
        // Rotation: with maxevents 1, two ready entries are reported in turn.
        assert_eq!(add(b, ep, libc::EPOLL_CTL_ADD, reused, out, 7), 0);
        assert_eq!(add(b, ep, libc::EPOLL_CTL_MOD, l, inn, 1), 0);
        let c2 = nf_socket(a, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let r = nf_connect(a, c2, (&at as *const libc::sockaddr_in).cast(), SIN_LEN);
        assert!(r == 0 || errno() == libc::EINPROGRESS);
        pump(a, b);
        let first = ready(b, ep, 1);
        let second = ready(b, ep, 1);
        assert_eq!(first.len(), 1);
        assert_eq!(second.len(), 1);
        assert_ne!(
            first[0].0, second[0].0,
            "both ready descriptors get their turn"
        );
        // An idle unconnected socket: writable and hung up, as poll(2) says.
        assert!(first
            .iter()
            .chain(&second)
            .any(|&(d, e)| d == 7 && e == out | libc::EPOLLHUP as u32));
        assert_eq!(nf_close(b, ep), 0);
        assert_eq!(nf_epoll_wait(b, ep, evs.as_mut_ptr(), 4, 0), -1);
        assert_eq!(errno(), libc::EBADF);
        nf_stack_free(a);
        nf_stack_free(b);
    }
}
