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
    let mut offs = [0usize; 8];
    // SAFETY: `offs` has room for the 8 offsets asked for.
    let size = unsafe { nf_config_layout(offs.as_mut_ptr(), offs.len()) };
    if cfg!(target_pointer_width = "64") {
        assert_eq!(offs, [0, 4, 8, 16, 24, 32, 36, 40]);
        assert_eq!(size, 48);
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
        let big = vec![0u8; 4000];
        assert_eq!(nf_inject(s, big.as_ptr().cast(), big.len()), -1);
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
