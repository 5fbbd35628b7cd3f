//! A capture middleware: [`PcapWriter`] wraps any [`Device`] and writes every frame sent and
//! received through it to a `std::io::Write` in the classic libpcap file format, readable by
//! tcpdump and Wireshark. Like smoltcp's `phy::PcapWriter`, it is itself a device, so it composes
//! with the pipe's impairments or any other device.
//!
//! Format (the libpcap "savefile", draft-ietf-opsawg-pcap §4 and §5): a 24-byte file header
//! (magic 0xA1B2C3D4 = microsecond timestamps, version 2.4, zone 0, sigfigs 0, snaplen, link
//! type) and, per packet, a 16-byte record header (seconds, microseconds, captured length,
//! original length) followed by the captured bytes. All fields are written little-endian; the
//! magic number tells readers the byte order. Timestamps are the virtual `now` passed to the
//! device, so captures of tests are reproducible byte for byte.
//!
//! Bounds: a capture of a busy link grows at link speed (`serve --pcap` once wrote 7.5 GB in
//! 80 s), so besides the snapshot length a writer can be given a [`Rotation`]: a size cap per
//! file and a ring of files, like `tcpdump -C SIZE -W N`. Each file is a complete capture with
//! its own file header, records are never split across files, and the total on disk never
//! exceeds `files * max_bytes`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use netfold::buf::{Frags, PacketBuf, Pool};
use netfold::phy::{Device, DeviceCaps, Medium, RawFd};
use netfold::time::Instant;

/// Magic of a microsecond-resolution capture (draft-ietf-opsawg-pcap §4).
pub const PCAP_MAGIC_MICROS: u32 = 0xA1B2_C3D4;
pub const PCAP_VERSION_MAJOR: u16 = 2;
pub const PCAP_VERSION_MINOR: u16 = 4;
/// Length of the file header.
pub const PCAP_FILE_HEADER_LEN: usize = 24;
/// Length of each packet record header.
pub const PCAP_RECORD_HEADER_LEN: usize = 16;
/// Default snapshot length: the one modern libpcap uses, large enough for TSO super-segments.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Link types from the tcpdump.org LINKTYPE registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// LINKTYPE_ETHERNET: IEEE 802.3 Ethernet frames.
    Ethernet,
    /// LINKTYPE_RAW: bare IPv4/IPv6 packets.
    Raw,
    /// Any other value, kept when reading a capture.
    Other(u32),
}

impl LinkType {
    pub fn for_medium(medium: Medium) -> Self {
        match medium {
            Medium::Ethernet => LinkType::Ethernet,
            Medium::Ip => LinkType::Raw,
        }
    }
}

impl From<LinkType> for u32 {
    fn from(l: LinkType) -> u32 {
        match l {
            LinkType::Ethernet => 1,
            LinkType::Raw => 101,
            LinkType::Other(v) => v,
        }
    }
}

impl From<u32> for LinkType {
    fn from(v: u32) -> Self {
        match v {
            1 => LinkType::Ethernet,
            101 => LinkType::Raw,
            other => LinkType::Other(other),
        }
    }
}

/// Which directions a [`PcapWriter`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PcapMode {
    #[default]
    Both,
    RxOnly,
    TxOnly,
}

/// Serialises the 24-byte file header.
pub fn file_header(link: LinkType, snaplen: u32) -> [u8; PCAP_FILE_HEADER_LEN] {
    let mut h = [0u8; PCAP_FILE_HEADER_LEN];
    h[0..4].copy_from_slice(&PCAP_MAGIC_MICROS.to_le_bytes());
    h[4..6].copy_from_slice(&PCAP_VERSION_MAJOR.to_le_bytes());
    h[6..8].copy_from_slice(&PCAP_VERSION_MINOR.to_le_bytes());
    // thiszone (GMT offset) and sigfigs are always 0 (h[8..16]).
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&u32::from(link).to_le_bytes());
    h
}

/// Serialises one 16-byte record header for a frame of `orig_len` bytes of which `incl_len`
/// are captured, seen at `at`.
pub fn record_header(at: Instant, incl_len: u32, orig_len: u32) -> [u8; PCAP_RECORD_HEADER_LEN] {
    let micros = at.total_micros();
    // Seconds are 32 bits in the format; a capture starting at epoch 0 has ~136 years.
    let secs = u32::try_from(micros / 1_000_000).unwrap_or(u32::MAX);
    let usecs = (micros % 1_000_000) as u32;
    let mut h = [0u8; PCAP_RECORD_HEADER_LEN];
    h[0..4].copy_from_slice(&secs.to_le_bytes());
    h[4..8].copy_from_slice(&usecs.to_le_bytes());
    h[8..12].copy_from_slice(&incl_len.to_le_bytes());
    h[12..16].copy_from_slice(&orig_len.to_le_bytes());
    h
}

/// Opens the sink for file number `index` of a rotation (0 is the first).
pub type OpenSink<W> = Box<dyn FnMut(u32) -> io::Result<W> + Send>;

/// A size cap with rotation: when the next record would take the current file past
/// `max_bytes`, the writer finishes it and continues in the next of `files` sinks (after the
/// last, the first again, overwritten), like `tcpdump -C -W`.
pub struct Rotation<W> {
    max_bytes: u64,
    files: u32,
    open: OpenSink<W>,
}

impl<W> Rotation<W> {
    /// `max_bytes` per file (at least one file header plus one full-size record; checked by
    /// [`PcapWriter::with_rotation`]), `files` sinks in the ring (at least 1).
    pub fn new(max_bytes: u64, files: u32, open: OpenSink<W>) -> Self {
        Rotation {
            max_bytes,
            files: files.max(1),
            open,
        }
    }
}

impl<W> core::fmt::Debug for Rotation<W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Rotation")
            .field("max_bytes", &self.max_bytes)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

/// The name of file `index` of a rotation on `path`: `path` itself for 0, then `path` with
/// the index appended (`cap.pcap`, `cap.pcap1`, `cap.pcap2`, ...), tcpdump's `-C` naming.
pub fn rotated_path(path: &Path, index: u32) -> PathBuf {
    if index == 0 {
        return path.to_path_buf();
    }
    let mut s = path.as_os_str().to_os_string();
    s.push(index.to_string());
    PathBuf::from(s)
}

/// A [`Rotation`] over files named by [`rotated_path`], each created (truncated) when the ring
/// reaches it and written through a `BufWriter`.
pub fn file_rotation(path: &Path, max_bytes: u64, files: u32) -> Rotation<BufWriter<File>> {
    let path = path.to_path_buf();
    Rotation::new(
        max_bytes,
        files,
        Box::new(move |i| File::create(rotated_path(&path, i)).map(BufWriter::new)),
    )
}

/// A device wrapper that records traffic in pcap format.
#[derive(Debug)]
pub struct PcapWriter<D: Device, W: Write> {
    inner: D,
    sink: W,
    mode: PcapMode,
    snaplen: u32,
    link: LinkType,
    /// Bytes written to the current sink (file header included).
    written: u64,
    /// Size cap and the ring of sinks, if bounded.
    rotation: Option<Rotation<W>>,
    /// Index of the current sink in the rotation.
    file_index: u32,
    rotations: u64,
    records: u64,
    write_errors: u64,
    last_error: Option<io::Error>,
    /// Recompute IPv4/TCP/UDP/ICMP checksums in the capture copy (see `set_fill_checksums`).
    fill_checksums: bool,
    /// Reused copy of a frame whose checksums are being filled.
    scratch: Vec<u8>,
    /// Lent frames (and scatter-gather frames made linear) waiting to be recorded: their
    /// bytes back to back, and each one's length.
    held: Vec<u8>,
    held_lens: Vec<usize>,
}

impl<D: Device, W: Write> PcapWriter<D, W> {
    /// Wraps `inner`, recording both directions, and writes the file header (link type from
    /// the device's medium) to `sink`.
    pub fn new(inner: D, sink: W) -> io::Result<Self> {
        Self::with_options(inner, sink, PcapMode::Both, DEFAULT_SNAPLEN)
    }

    /// As [`new`](Self::new) with a direction filter and a snapshot length (frames longer
    /// than `snaplen` are cut, their original length kept in the record). `snaplen` 0 means
    /// the default.
    pub fn with_options(inner: D, mut sink: W, mode: PcapMode, snaplen: u32) -> io::Result<Self> {
        let snaplen = if snaplen == 0 {
            DEFAULT_SNAPLEN
        } else {
            snaplen
        };
        let caps = inner.caps();
        let link = LinkType::for_medium(caps.medium);
        sink.write_all(&file_header(link, snaplen))?;
        Ok(PcapWriter {
            inner,
            sink,
            mode,
            snaplen,
            link,
            written: PCAP_FILE_HEADER_LEN as u64,
            rotation: None,
            file_index: 0,
            rotations: 0,
            records: 0,
            write_errors: 0,
            last_error: None,
            // A device with checksum offload sees frames whose checksums are unset or partial
            // (the Linux CHECKSUM_PARTIAL convention): the wire carries correct ones, so the
            // capture must too, or every reader flags every packet.
            fill_checksums: !caps.checksum.tx || !caps.checksum.rx,
            scratch: Vec::new(),
            held: Vec::new(),
            held_lens: Vec::new(),
        })
    }

    /// As [`with_options`](Self::with_options), bounded: the first sink is `rotation`'s file 0,
    /// and no sink ever grows past its `max_bytes`. A cap too small for the file header and
    /// one record of `snaplen` bytes is an `InvalidInput` error (a record is never split).
    pub fn with_rotation(
        inner: D,
        mode: PcapMode,
        snaplen: u32,
        mut rotation: Rotation<W>,
    ) -> io::Result<Self> {
        let snap = if snaplen == 0 {
            DEFAULT_SNAPLEN
        } else {
            snaplen
        };
        let least = (PCAP_FILE_HEADER_LEN + PCAP_RECORD_HEADER_LEN) as u64 + u64::from(snap);
        if rotation.max_bytes < least {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "capture file size cap {} is below {least} bytes (file header and one \
                     record of the {snap}-byte snap length)",
                    rotation.max_bytes
                ),
            ));
        }
        let first = (rotation.open)(0)?;
        let mut w = Self::with_options(inner, first, mode, snap)?;
        w.rotation = Some(rotation);
        Ok(w)
    }

    /// How many times the capture moved on to the next file of its rotation.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }
    /// Index of the file being written in the rotation (0 without one).
    pub fn file_index(&self) -> u32 {
        self.file_index
    }
    /// Bytes written to the current sink, file header included.
    pub fn current_file_bytes(&self) -> u64 {
        self.written
    }

    /// Whether capture copies get their IPv4/TCP/UDP/ICMP checksums recomputed (the frames the
    /// device moves are never touched). On by default when the wrapped device offloads
    /// checksums; Ethernet medium only.
    pub fn set_fill_checksums(&mut self, on: bool) {
        self.fill_checksums = on;
    }
    pub fn fills_checksums(&self) -> bool {
        self.fill_checksums
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }
    pub fn sink(&self) -> &W {
        &self.sink
    }
    /// Unwraps into the device and the sink (flush the sink if it buffers).
    pub fn into_parts(self) -> (D, W) {
        (self.inner, self.sink)
    }
    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }
    /// Records that could not be written. `Device` methods cannot return I/O errors, so a
    /// failing sink is counted here and the traffic itself is unaffected.
    pub fn write_errors(&self) -> u64 {
        self.write_errors
    }
    /// The most recent write error, if any (taking it clears it).
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.last_error.take()
    }
    pub fn flush(&mut self) -> io::Result<()> {
        self.sink.flush()
    }

    fn record(&mut self, now: Instant, frame: &[u8]) {
        if self.fill_checksums && self.inner.caps().medium == Medium::Ethernet {
            let mut copy = core::mem::take(&mut self.scratch);
            copy.clear();
            copy.extend_from_slice(frame);
            crate::vnet::fill_checksums(&mut copy);
            self.record_raw(now, &copy);
            self.scratch = copy;
        } else {
            self.record_raw(now, frame);
        }
    }

    /// Records the frames in `held` (see its doc) and empties it.
    fn record_held(&mut self, now: Instant) {
        let (held, lens) = (
            core::mem::take(&mut self.held),
            core::mem::take(&mut self.held_lens),
        );
        let mut at = 0;
        for &n in &lens {
            self.record(now, &held[at..at + n]);
            at += n;
        }
        (self.held, self.held_lens) = (held, lens);
        self.held.clear();
        self.held_lens.clear();
    }

    fn record_raw(&mut self, now: Instant, frame: &[u8]) {
        let orig = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = orig.min(self.snaplen);
        let header = record_header(now, incl, orig);
        let body = frame.get(..incl as usize).unwrap_or(frame);
        let need = (PCAP_RECORD_HEADER_LEN + body.len()) as u64;
        if let Err(e) = self.make_room(need) {
            // The record is dropped rather than written past the cap.
            self.write_errors += 1;
            self.last_error = Some(e);
            return;
        }
        let res = self
            .sink
            .write_all(&header)
            .and_then(|()| self.sink.write_all(body));
        // Counted even on error: a partial write may have reached the sink, and over-counting
        // only makes the next rotation come sooner.
        self.written += need;
        match res {
            Ok(()) => self.records += 1,
            Err(e) => {
                self.write_errors += 1;
                self.last_error = Some(e);
            }
        }
    }
}

impl<D: Device, W: Write> PcapWriter<D, W> {
    /// With a rotation, moves on to the next sink if `need` more bytes would take the current
    /// one past the cap. Without one, nothing to do.
    fn make_room(&mut self, need: u64) -> io::Result<()> {
        let Some(rot) = self.rotation.as_mut() else {
            return Ok(());
        };
        if self.written.saturating_add(need) <= rot.max_bytes {
            return Ok(());
        }
        // `with_rotation` checked that a fresh file holds any record of `snaplen` bytes.
        let next = (self.file_index + 1) % rot.files;
        self.sink.flush()?;
        let mut sink = (rot.open)(next)?;
        sink.write_all(&file_header(self.link, self.snaplen))?;
        // The old sink is dropped here (a BufWriter flushes; we already did).
        self.sink = sink;
        self.file_index = next;
        self.written = PCAP_FILE_HEADER_LEN as u64;
        self.rotations += 1;
        Ok(())
    }
}

/// Every capability of the wrapped device passes through (lent receive and transmit memory,
/// scatter-gather, the descriptor and wake-up a driver sleeps on), so a capture changes what
/// is recorded, not how the device moves frames.
impl<D: Device, W: Write> Device for PcapWriter<D, W> {
    fn caps(&self) -> DeviceCaps {
        self.inner.caps()
    }

    fn recv_batch(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let first = out.len();
        let n = self.inner.recv_batch(now, pool, out, max);
        if self.mode != PcapMode::TxOnly {
            // Only the frames this call appended; `out` may hold the caller's earlier ones.
            for f in out.get(first..).unwrap_or(&[]) {
                self.record(now, f.as_slice());
            }
        }
        n
    }

    /// The wrapped device's lent frames go to `f` where they lie; the capture keeps a copy
    /// of each (the frames are the device's again once `f` returns) and records it after.
    fn recv_lent(
        &mut self,
        now: Instant,
        max: usize,
        f: &mut dyn FnMut(&[&[u8]]),
    ) -> Option<usize> {
        let keep = self.mode != PcapMode::TxOnly;
        let (held, lens) = (&mut self.held, &mut self.held_lens);
        held.clear();
        lens.clear();
        let n = self.inner.recv_lent(now, max, &mut |frames: &[&[u8]]| {
            if keep {
                for fr in frames {
                    held.extend_from_slice(fr);
                    lens.push(fr.len());
                }
            }
            f(frames);
        });
        self.record_held(now);
        n
    }

    fn tx_lend(&mut self, pool: &mut Pool) {
        self.inner.tx_lend(pool)
    }

    fn send_batch(&mut self, now: Instant, pool: &mut Pool, frames: &mut Vec<PacketBuf>) {
        // Recorded as handed to the device, before the link may drop or impair them.
        if self.mode != PcapMode::RxOnly {
            for f in frames.iter() {
                self.record(now, f.as_slice());
            }
        }
        self.inner.send_batch(now, pool, frames);
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }

    fn readable_fd(&self) -> Option<RawFd> {
        self.inner.readable_fd()
    }

    fn scatter_gather(&self) -> bool {
        self.inner.scatter_gather()
    }

    /// Each frame is recorded as it goes on the wire: its linear bytes, then its fragments.
    fn send_batch_sg(
        &mut self,
        now: Instant,
        pool: &mut Pool,
        frames: &mut Vec<PacketBuf>,
        frags: &mut Frags,
    ) {
        if self.mode != PcapMode::RxOnly {
            self.held.clear();
            self.held_lens.clear();
            for (i, f) in frames.iter().enumerate() {
                let start = self.held.len();
                self.held.extend_from_slice(f.as_slice());
                for z in frags.of(i) {
                    self.held.extend_from_slice(z);
                }
                self.held_lens.push(self.held.len() - start);
            }
            self.record_held(now);
        }
        self.inner.send_batch_sg(now, pool, frames, frags);
    }

    fn wake_on_rx(&mut self, waker: Option<&core::task::Waker>) -> bool {
        self.inner.wake_on_rx(waker)
    }
}

/// Why a capture could not be read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PcapError {
    /// Shorter than the file header or than a record says.
    Truncated,
    /// Not a little-endian microsecond libpcap file.
    BadMagic,
}

/// One record read back from a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapRecord {
    pub at: Instant,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// Reads a capture written by [`PcapWriter`] (little-endian, microsecond magic): its link type,
/// snaplen and records. Malformed input is an error, never a panic.
pub fn read_capture(bytes: &[u8]) -> Result<(LinkType, u32, Vec<PcapRecord>), PcapError> {
    let header = bytes
        .get(..PCAP_FILE_HEADER_LEN)
        .ok_or(PcapError::Truncated)?;
    if le32(header, 0) != Some(PCAP_MAGIC_MICROS) {
        return Err(PcapError::BadMagic);
    }
    let snaplen = le32(header, 16).ok_or(PcapError::Truncated)?;
    let link = LinkType::from(le32(header, 20).ok_or(PcapError::Truncated)?);
    let mut records = Vec::new();
    let mut rest = &bytes[PCAP_FILE_HEADER_LEN..];
    while !rest.is_empty() {
        let h = rest
            .get(..PCAP_RECORD_HEADER_LEN)
            .ok_or(PcapError::Truncated)?;
        let (secs, usecs) = (le32(h, 0), le32(h, 4));
        let (incl, orig) = (le32(h, 8), le32(h, 12));
        let (Some(secs), Some(usecs), Some(incl), Some(orig)) = (secs, usecs, incl, orig) else {
            return Err(PcapError::Truncated);
        };
        let body_end = PCAP_RECORD_HEADER_LEN.saturating_add(incl as usize);
        let data = rest
            .get(PCAP_RECORD_HEADER_LEN..body_end)
            .ok_or(PcapError::Truncated)?;
        records.push(PcapRecord {
            at: Instant::from_micros(
                u64::from(secs)
                    .saturating_mul(1_000_000)
                    .saturating_add(u64::from(usecs)),
            ),
            orig_len: orig,
            data: data.to_vec(),
        });
        rest = &rest[body_end..];
    }
    Ok((link, snaplen, records))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netfold::phy::pipe::{Pipe, PipeConfig};

    #[test]
    fn file_header_layout() {
        let h = file_header(LinkType::Raw, 65_535);
        assert_eq!(
            h,
            [
                0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 101,
                0, 0, 0
            ]
        );
        let r = record_header(Instant::from_micros(3_000_042), 60, 1514);
        assert_eq!(r, [3, 0, 0, 0, 42, 0, 0, 0, 60, 0, 0, 0, 0xea, 5, 0, 0]);
    }

    #[test]
    fn reader_rejects_malformed_input_without_panicking() {
        assert_eq!(read_capture(&[]), Err(PcapError::Truncated));
        assert_eq!(read_capture(&[0u8; 24]), Err(PcapError::BadMagic));
        let mut f = file_header(LinkType::Ethernet, 100).to_vec();
        assert_eq!(read_capture(&f).map(|c| c.2.len()), Ok(0));
        f.extend_from_slice(&record_header(Instant::ZERO, 10, 10));
        f.extend_from_slice(&[1, 2, 3]);
        assert_eq!(read_capture(&f), Err(PcapError::Truncated));
        let mut g = file_header(LinkType::Ethernet, 100).to_vec();
        g.extend_from_slice(&record_header(Instant::ZERO, u32::MAX, 1)[..16]);
        assert_eq!(read_capture(&g), Err(PcapError::Truncated));
        g.truncate(30);
        assert_eq!(read_capture(&g), Err(PcapError::Truncated));
    }

    fn frames(lens: &[usize]) -> Vec<PacketBuf> {
        lens.iter()
            .enumerate()
            .map(|(i, &n)| PacketBuf::from_slice(&vec![i as u8 + 1; n]))
            .collect()
    }

    #[test]
    fn capture_round_trips_both_directions() {
        let (a, b) =
            Pipe::new(PipeConfig::default().delay(netfold::time::Duration::from_millis(1)));
        let mut a = PcapWriter::new(a, Vec::new()).unwrap();
        let mut b = PcapWriter::new(b, Vec::new()).unwrap();
        let mut pool = Pool::new(64, 8);
        let t1 = Instant::from_micros(1_500_000);
        a.send_batch(t1, &mut pool, &mut frames(&[60, 1514, 42]));
        // The caller's `out` already holds a frame: it must not be recorded again.
        let mut out = frames(&[99]);
        let t2 = Instant::from_micros(2_000_001);
        assert_eq!(b.recv_batch(t2, &mut pool, &mut out, 8), 3);
        b.send_batch(t2, &mut pool, &mut frames(&[54]));
        assert_eq!(a.poll_at(), Some(Instant::from_micros(2_001_001)));

        let (link, snaplen, tx) = read_capture(a.sink()).unwrap();
        assert_eq!((link, snaplen), (LinkType::Ethernet, DEFAULT_SNAPLEN));
        assert_eq!(tx.len(), 3);
        for (r, (i, len)) in tx.iter().zip([60usize, 1514, 42].into_iter().enumerate()) {
            assert_eq!(r.at, t1);
            assert_eq!(r.orig_len as usize, len);
            assert_eq!(r.data, vec![i as u8 + 1; len]);
        }
        let (_, _, rx) = read_capture(b.sink()).unwrap();
        assert_eq!(rx.len(), 4);
        assert!(rx[..3].iter().all(|r| r.at == t2));
        assert_eq!(
            rx.iter().map(|r| r.data.len()).collect::<Vec<_>>(),
            [60, 1514, 42, 54]
        );
        assert_eq!((a.records(), b.records(), b.write_errors()), (3, 4, 0));
        let (_dev, bytes) = a.into_parts();
        assert_eq!(bytes.len(), 24 + 3 * 16 + 60 + 1514 + 42);
    }

    #[test]
    fn raw_link_type_snaplen_and_direction_filter() {
        let (a, b) = Pipe::new(PipeConfig::default().medium(Medium::Ip));
        let mut a = PcapWriter::with_options(a, Vec::new(), PcapMode::RxOnly, 100).unwrap();
        let mut b = PcapWriter::with_options(b, Vec::new(), PcapMode::TxOnly, 0).unwrap();
        let mut pool = Pool::new(64, 8);
        a.send_batch(Instant::ZERO, &mut pool, &mut frames(&[300]));
        let mut out = Vec::new();
        b.recv_batch(Instant::ZERO, &mut pool, &mut out, 8);
        b.send_batch(Instant::ZERO, &mut pool, &mut frames(&[300]));
        a.recv_batch(Instant::ZERO, &mut pool, &mut out, 8);
        assert_eq!(out.len(), 2);

        let (link, snaplen, recs) = read_capture(a.sink()).unwrap();
        assert_eq!((link, snaplen, recs.len()), (LinkType::Raw, 100, 1));
        assert_eq!((recs[0].orig_len, recs[0].data.len()), (300, 100));
        let (_, snaplen, recs) = read_capture(b.sink()).unwrap();
        assert_eq!(
            (snaplen, recs.len(), recs[0].data.len()),
            (DEFAULT_SNAPLEN, 1, 300)
        );
    }

    /// A device with every optional capability, recording what reaches it.
    #[derive(Default)]
    struct Capable {
        lends: Vec<Vec<u8>>,
        /// Each scatter-gather frame: its linear bytes and its fragments' length.
        sent_sg: Vec<(Vec<u8>, usize)>,
        tx_lends: usize,
        armed: bool,
    }

    impl Device for Capable {
        fn caps(&self) -> DeviceCaps {
            DeviceCaps::default()
        }
        fn recv_batch(
            &mut self,
            _: Instant,
            _: &mut Pool,
            _: &mut Vec<PacketBuf>,
            _: usize,
        ) -> usize {
            0
        }
        fn recv_lent(
            &mut self,
            _: Instant,
            max: usize,
            f: &mut dyn FnMut(&[&[u8]]),
        ) -> Option<usize> {
            let frames: Vec<&[u8]> = self.lends.iter().take(max).map(Vec::as_slice).collect();
            f(&frames);
            Some(frames.len())
        }
        fn tx_lend(&mut self, _: &mut Pool) {
            self.tx_lends += 1;
        }
        fn send_batch(&mut self, _: Instant, _: &mut Pool, frames: &mut Vec<PacketBuf>) {
            frames.clear();
        }
        fn readable_fd(&self) -> Option<RawFd> {
            Some(42)
        }
        fn scatter_gather(&self) -> bool {
            true
        }
        fn send_batch_sg(
            &mut self,
            _: Instant,
            _: &mut Pool,
            frames: &mut Vec<PacketBuf>,
            frags: &mut Frags,
        ) {
            for (i, f) in frames.drain(..).enumerate() {
                self.sent_sg.push((f.as_slice().to_vec(), frags.len_of(i)));
            }
        }
        fn wake_on_rx(&mut self, waker: Option<&core::task::Waker>) -> bool {
            self.armed = waker.is_some();
            true
        }
    }

    #[test]
    fn every_capability_of_the_wrapped_device_passes_through_and_is_recorded() {
        let dev = Capable {
            lends: vec![vec![7; 60], vec![8; 70]],
            ..Capable::default()
        };
        let mut w = PcapWriter::new(dev, Vec::new()).unwrap();
        let mut pool = Pool::new(64, 8);
        assert_eq!(w.readable_fd(), Some(42));
        assert!(w.scatter_gather());
        assert!(w.wake_on_rx(Some(core::task::Waker::noop())));
        assert!(w.inner().armed);
        w.tx_lend(&mut pool);
        assert_eq!(w.inner().tx_lends, 1);

        // Lent frames reach the caller in place and are recorded.
        let mut seen = Vec::new();
        let t = Instant::from_micros(5);
        let n = w.recv_lent(t, 8, &mut |frames: &[&[u8]]| {
            seen.extend(frames.iter().map(|f| f.to_vec()));
        });
        assert_eq!(n, Some(2));
        assert_eq!(seen, [vec![7; 60], vec![8; 70]]);

        // A scatter-gather frame is recorded as it goes on the wire: header, then fragments.
        let mut frames = vec![PacketBuf::from_slice(&[1; 54])];
        let mut frags = Frags::new();
        frags.push(0, netfold::buf::ZcBuf::from(vec![2u8; 1000]));
        frags.push(0, netfold::buf::ZcBuf::from(vec![3u8; 400]));
        w.send_batch_sg(t, &mut pool, &mut frames, &mut frags);
        assert_eq!(w.inner().sent_sg, [(vec![1; 54], 1400)]);

        let (_, _, recs) = read_capture(w.sink()).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].data, vec![7; 60]);
        assert_eq!(recs[1].data, vec![8; 70]);
        let mut wire = vec![1u8; 54];
        wire.extend_from_slice(&[2; 1000]);
        wire.extend_from_slice(&[3; 400]);
        assert_eq!(recs[2].data, wire);
        assert_eq!(recs[2].orig_len, 1454);
    }

    struct FailingSink;
    impl Write for FailingSink {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("disk full"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn failing_sink_is_an_error_not_a_panic() {
        let (a, _b) = Pipe::new(PipeConfig::default());
        assert!(PcapWriter::new(a, FailingSink).is_err());
    }

    #[test]
    fn write_errors_are_counted_and_traffic_still_flows() {
        /// Accepts the file header, then fails.
        struct OneShot(bool);
        impl Write for OneShot {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                if std::mem::replace(&mut self.0, false) {
                    Ok(b.len())
                } else {
                    Err(io::Error::other("gone"))
                }
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (a, mut b) = Pipe::new(PipeConfig::default());
        let mut w = PcapWriter::new(a, OneShot(true)).unwrap();
        let mut pool = Pool::new(64, 8);
        w.send_batch(
            Instant::ZERO,
            &mut pool,
            &mut vec![PacketBuf::from_slice(&[7; 60])],
        );
        assert_eq!((w.records(), w.write_errors()), (0, 1));
        assert!(w.take_error().is_some());
        let mut out = Vec::new();
        assert_eq!(b.recv_batch(Instant::ZERO, &mut pool, &mut out, 8), 1);
    }

    #[test]
    fn offloaded_frames_are_captured_with_checksums_filled() {
        use crate::vnet::verify_checksums;
        use netfold::phy::ChecksumCaps;
        // An Ethernet/IPv4/UDP frame whose checksums were left to the device (zeros).
        let mut f = vec![0u8; 14 + 20 + 8 + 5];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&33u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 2]);
        f[30..34].copy_from_slice(&[198, 18, 0, 1]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&2000u16.to_be_bytes());
        f[38..40].copy_from_slice(&13u16.to_be_bytes());
        f[42..].copy_from_slice(b"hello");
        assert!(!verify_checksums(&f));
        let off = ChecksumCaps {
            tx: false,
            rx: false,
        };
        let (a, mut b) = Pipe::new(PipeConfig::default().checksum(off));
        let mut w = PcapWriter::new(a, Vec::new()).unwrap();
        assert!(w.fills_checksums());
        let mut pool = Pool::new(64, 8);
        w.send_batch(
            Instant::ZERO,
            &mut pool,
            &mut vec![PacketBuf::from_slice(&f)],
        );
        let (_, _, recs) = read_capture(w.sink()).unwrap();
        assert!(verify_checksums(&recs[0].data));
        // The frame on the link itself is untouched.
        let mut out = Vec::new();
        b.recv_batch(Instant::ZERO, &mut pool, &mut out, 8);
        assert_eq!(out[0].as_slice(), &f[..]);
        // Devices that checksum in software are captured verbatim.
        let (a, _b) = Pipe::new(PipeConfig::default());
        assert!(!PcapWriter::new(a, Vec::new()).unwrap().fills_checksums());
    }

    /// An Ethernet/IPv4/UDP frame of `len` bytes (at least 42) with zero checksums (the
    /// offload convention, filled in by the writer) and a payload that tells frames apart.
    fn udp_frame(len: usize, n: u32) -> Vec<u8> {
        let mut f = vec![0u8; len.max(42)];
        f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        let ip_len = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 2]);
        f[30..34].copy_from_slice(&[198, 18, 0, 1]);
        f[34..36].copy_from_slice(&40000u16.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        for (i, b) in f[42..].iter_mut().enumerate() {
            *b = (n as usize + i) as u8;
        }
        f
    }

    /// Many frames through a bounded writer: no file ever exceeds the cap, the ring holds at
    /// most `files` files, each a complete capture (header, whole records), records longer
    /// than the snap length are cut with their original length kept, and the newest records
    /// are the ones on disk. tshark reads every file without a complaint.
    #[test]
    fn rotation_caps_every_file_and_keeps_a_ring() {
        use netfold::phy::ChecksumCaps;
        let dir = std::env::temp_dir().join(format!("netfold-pcap-rot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cap.pcap");
        const CAP: u64 = 64 * 1024;
        const FILES: u32 = 4;
        const SNAP: u32 = 200;
        let off = ChecksumCaps {
            tx: false,
            rx: false,
        };
        let (a, _b) = Pipe::new(PipeConfig::default().checksum(off).capacity(1 << 16));
        // Too small a cap for one record of the snap length: refused, not silently exceeded.
        let (t, _tb) = Pipe::new(PipeConfig::default());
        let small = file_rotation(&path, 100, FILES);
        let e = PcapWriter::with_rotation(t, PcapMode::Both, SNAP, small).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);

        let rot = file_rotation(&path, CAP, FILES);
        let mut w = PcapWriter::with_rotation(a, PcapMode::TxOnly, SNAP, rot).unwrap();
        let mut pool = Pool::new(2048, 64);
        const N: u32 = 5000;
        let lens = [60usize, 150, 199, 200, 201, 1514, 9000];
        let mut total = 0u64;
        for n in 0..N {
            let len = lens[n as usize % lens.len()];
            let mut batch = vec![PacketBuf::from_slice(&udp_frame(len, n))];
            w.send_batch(
                Instant::from_micros(u64::from(n) * 10),
                &mut pool,
                &mut batch,
            );
            total += 16 + len.min(SNAP as usize) as u64;
            assert!(w.current_file_bytes() <= CAP);
        }
        assert_eq!((w.records(), w.write_errors()), (u64::from(N), 0));
        // Far more was captured than the ring holds, so it wrapped.
        assert!(total > CAP * u64::from(FILES) * 2, "{total}");
        assert!(w.rotations() > u64::from(FILES));
        let last_file = w.file_index();
        w.flush().unwrap();
        drop(w);

        let mut on_disk = Vec::new();
        for i in 0..FILES + 2 {
            let p = rotated_path(&path, i);
            if i >= FILES {
                assert!(!p.exists(), "{} outside the ring", p.display());
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            assert!(
                bytes.len() as u64 <= CAP,
                "{}: {}",
                p.display(),
                bytes.len()
            );
            let (link, snaplen, recs) = read_capture(&bytes).unwrap();
            assert_eq!((link, snaplen), (LinkType::Ethernet, SNAP));
            assert!(!recs.is_empty());
            for r in &recs {
                assert!(r.data.len() <= SNAP as usize);
                assert_eq!(r.data.len(), (r.orig_len as usize).min(SNAP as usize));
                assert!(lens.contains(&(r.orig_len as usize)));
            }
            on_disk.push((i, recs));
        }
        // The file being written last holds the newest record.
        let newest = on_disk
            .iter()
            .find(|(i, _)| *i == last_file)
            .and_then(|(_, r)| r.last())
            .unwrap();
        assert_eq!(newest.at, Instant::from_micros(u64::from(N - 1) * 10));

        // The rotation is checked above; tshark's reading of every file needs tshark.
        if crate::netns::skip(
            crate::netns::missing_tools(&["tshark"])
                .map(|why| format!("tshark checks of the rotated captures: {why}")),
        ) {
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        for i in 0..FILES {
            let p = rotated_path(&path, i);
            let t = std::process::Command::new("tshark")
                .arg("-r")
                .arg(&p)
                .args(["-o", "ip.check_checksum:TRUE"])
                .args(["-o", "udp.check_checksum:TRUE"])
                .args([
                    "-Y",
                    "ip.checksum.status == \"Bad\" || udp.checksum.status == \"Bad\"",
                ])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&t.stderr);
            let complaints: Vec<&str> = stderr
                .lines()
                .filter(|l| !l.contains("Running as user \"root\""))
                .filter(|l| !l.trim().is_empty())
                .collect();
            assert!(t.status.success(), "tshark {}: {stderr}", p.display());
            assert!(
                complaints.is_empty(),
                "tshark {}: {complaints:?}",
                p.display()
            );
            assert!(
                t.stdout.is_empty(),
                "bad checksums in {}:\n{}",
                p.display(),
                String::from_utf8_lossy(&t.stdout)
            );
            let count = std::process::Command::new("tshark")
                .arg("-r")
                .arg(&p)
                .args(["-T", "fields", "-e", "frame.number"])
                .output()
                .unwrap();
            let frames = String::from_utf8_lossy(&count.stdout).lines().count();
            assert_eq!(frames, on_disk[i as usize].1.len(), "{}", p.display());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
