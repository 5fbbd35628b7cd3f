//! A file mapped into memory as a zero-copy buffer: the `sendfile` of netfold.
//! [`map_file`] maps a range of a file read-only (`mmap(2)`, `PROT_READ`,
//! `MAP_SHARED`) and hands it over as a [`ZcBuf`]; `TcpStream::send_zc` then lends it to the
//! connection, segments refer to the mapped pages, a scatter-gather device (the TAP) gives them
//! to the kernel in its `writev`, and the mapping is removed (`munmap`) when the last
//! reference — the application's, the send queue's, a frame's — is dropped, which is also when
//! the buffer's completion is posted.
//!
//! Mapping a file is `unsafe` for the reason every Rust mapping crate gives (memmap2's
//! `Mmap::map`): the bytes are shared with the file, so another process (or this one) that
//! truncates the file makes an access fault (`SIGBUS`), and one that writes it changes bytes
//! Rust code holds as `&[u8]`. The caller promises neither happens while the buffer lives.
//! [`map_anonymous`] needs no such promise: private zero-filled memory, written through a
//! closure before it is frozen into a shared buffer.
#![allow(unsafe_code)]

use netfold::buf::{Region, ZcBuf};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// One live mapping; unmapped on drop.
struct Mapping {
    ptr: *mut libc::c_void,
    /// Bytes mapped (from a page boundary).
    map_len: usize,
    /// Where the requested range starts inside the mapping.
    skip: usize,
    /// Bytes requested.
    len: usize,
}

// SAFETY: the mapping is read-only after construction and owned by this value alone (no
// aliasing `&mut`); the pointer is valid for `map_len` bytes until `drop`, from any thread.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for Mapping {}

impl Region for Mapping {
    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is a live mapping of `map_len >= skip + len` readable bytes until
        // `drop` (which needs `&mut self`, so not while this borrow lives); nobody writes them
        // (the `map_file` caller's promise; `map_anonymous` mappings are read-only once
        // frozen).
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>().add(self.skip), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.map_len > 0 {
            // SAFETY: `ptr`/`map_len` are exactly what mmap returned and nothing refers to the
            // pages any more (the last reference is this value, being dropped).
            unsafe { libc::munmap(self.ptr, self.map_len) };
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// Maps bytes `offset..offset + len` of `file` read-only as a [`ZcBuf`] (no byte is read or
/// copied here; pages are faulted in by whoever reads them: the kernel's `writev` on a TAP, or
/// the stack's copy into a frame on the in-memory link). `len == 0` maps nothing. Errors:
/// `InvalidInput` for a range past the end of the file, else mmap's.
///
/// # Safety
/// While the returned buffer (or any clone or slice of it, including the ones a send queue or
/// a frame holds until the send completes) lives, the file must not be truncated below
/// `offset + len` nor its bytes in that range modified, by this process or any other.
pub unsafe fn map_file(file: &File, offset: u64, len: usize) -> io::Result<ZcBuf> {
    let size = file.metadata()?.len();
    if offset.checked_add(len as u64).is_none_or(|e| e > size) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "range past end of file",
        ));
    }
    if len == 0 {
        return Ok(ZcBuf::new(Mapping {
            ptr: std::ptr::null_mut(),
            map_len: 0,
            skip: 0,
            len: 0,
        }));
    }
    let page = page_size() as u64;
    let start = offset - offset % page;
    let skip = (offset - start) as usize;
    let map_len = skip + len;
    let off = libc::off_t::try_from(start)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    // SAFETY: a fresh read-only shared mapping of an open descriptor; the kernel checks the
    // range, and the result is checked for MAP_FAILED below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ZcBuf::new(Mapping {
        ptr,
        map_len,
        skip,
        len,
    }))
}

/// `len` bytes of private anonymous memory, filled by `fill` and then made read-only
/// (`mprotect`) and shared as a [`ZcBuf`]: page-aligned buffers for zero-copy send whose
/// memory is returned to the system when the send completes. Safe: nobody else can reach
/// the pages.
pub fn map_anonymous(len: usize, fill: impl FnOnce(&mut [u8])) -> io::Result<ZcBuf> {
    if len == 0 {
        fill(&mut []);
        return Ok(ZcBuf::new(Mapping {
            ptr: std::ptr::null_mut(),
            map_len: 0,
            skip: 0,
            len: 0,
        }));
    }
    // SAFETY: a fresh private anonymous mapping; checked for MAP_FAILED below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let m = Mapping {
        ptr,
        map_len: len,
        skip: 0,
        len,
    };
    // SAFETY: `ptr` is a fresh writable mapping of `len` bytes that only `m` owns, and `m` is
    // not shared yet: this is the only reference to the bytes while `fill` runs.
    fill(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) });
    // SAFETY: the same mapping, its full length.
    if unsafe { libc::mprotect(ptr, len, libc::PROT_READ) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ZcBuf::new(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(bytes: &[u8]) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!(
            "netfold-mmap-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut f = File::create(&path).unwrap();
        f.write_all(bytes).unwrap();
        drop(f);
        (path.clone(), File::open(&path).unwrap())
    }

    #[test]
    fn file_ranges_map_at_any_offset_and_unmap_with_the_last_reference() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 253) as u8).collect();
        let (path, f) = temp_file(&data);
        for (off, len) in [
            (0, 20_000),
            (1, 100),
            (4095, 2),
            (4096, 5000),
            (19_999, 1),
            (7, 0),
        ] {
            // SAFETY: the test owns the file and neither truncates nor writes it.
            let b = unsafe { map_file(&f, off as u64, len) }.unwrap();
            assert_eq!(&b[..], &data[off..off + len], "{off} {len}");
            let s = b.slice(1..);
            drop(b);
            assert_eq!(&s[..], &data[(off + 1).min(off + len)..off + len]);
        }
        // SAFETY: as above.
        let e = unsafe { map_file(&f, 19_000, 2000) }.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        // SAFETY: as above.
        assert!(unsafe { map_file(&f, u64::MAX, 2) }.is_err());
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn anonymous_regions_are_filled_then_frozen() {
        let b = map_anonymous(10_000, |m| {
            for (i, x) in m.iter_mut().enumerate() {
                *x = i as u8;
            }
        })
        .unwrap();
        assert_eq!(b.len(), 10_000);
        assert_eq!(b[9999], (9999 % 256) as u8);
        assert!(map_anonymous(0, |m| assert!(m.is_empty()))
            .unwrap()
            .is_empty());
    }
}
