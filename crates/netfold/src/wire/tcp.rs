//! TCP header (RFC 9293 §3.1) with options: MSS (RFC 9293 §3.2), window scale and timestamps
//! (RFC 7323), SACK-permitted and SACK blocks (RFC 2018), NOP/EOL; unknown options are skipped.
//!
//! The `Repr` types below are the contract between the wire format and the TCP engine
//! (`crate::tcp`), which consumes and produces `TcpRepr` values without touching bytes.

use super::Ipv4Addr;

/// TCP control flags (RFC 9293 §3.1, RFC 3168 for ECE/CWR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;

    pub const fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    pub const fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    pub const fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    pub const fn psh(self) -> bool {
        self.0 & Self::PSH != 0
    }
    pub const fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
    pub const fn urg(self) -> bool {
        self.0 & Self::URG != 0
    }
    pub const fn ece(self) -> bool {
        self.0 & Self::ECE != 0
    }
    pub const fn cwr(self) -> bool {
        self.0 & Self::CWR != 0
    }
    pub const fn contains(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

/// One SACK block: the left (first) and right (one past last) sequence numbers, RFC 2018 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SackBlock {
    pub left: u32,
    pub right: u32,
}

/// RFC 7323 §3 timestamps option: TSval and TSecr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Timestamps {
    pub tsval: u32,
    pub tsecr: u32,
}

/// The options netfold understands. Unknown options are skipped on parse and never emitted.
/// At most 4 SACK blocks fit in 40 option bytes (3 alongside timestamps), RFC 2018 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2); only meaningful on SYN segments.
    pub mss: Option<u16>,
    /// Window scale shift count (kind 3); only meaningful on SYN segments. RFC 7323 §2.3: a value
    /// above 14 is treated as 14 by the receiver (the parser keeps the raw value).
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4); only meaningful on SYN segments.
    pub sack_permitted: bool,
    /// SACK blocks (kind 5): the first `sack_count` entries of `sack` are valid.
    pub sack: [SackBlock; 4],
    pub sack_count: u8,
    /// Timestamps (kind 8).
    pub timestamps: Option<Timestamps>,
}

impl TcpOptions {
    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[SackBlock] {
        &self.sack[..usize::from(self.sack_count.min(4))]
    }
}

/// A parsed TCP header, without payload. `seq`/`ack` are raw 32-bit sequence numbers; the
/// window is the raw 16-bit field (unscaled). Ports are host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    pub urgent: u16,
    pub options: TcpOptions,
}

/// The IPv4 endpoints a TCP/UDP checksum covers (RFC 9293 §3.1 pseudo-header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PseudoHeader {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

use super::checksum;
use super::{Error, Result};
use crate::mem;

/// IP protocol number of TCP, for the pseudo-header.
const PROTO_TCP: u8 = 6;

/// Byte ranges of the fixed header (RFC 9293 §3.1 "Header Format").
mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    /// Data offset (high nibble) and reserved bits.
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
    pub const OPTIONS_START: usize = 20;
}

/// Option kinds (IANA "TCP Option Kind Numbers").
mod kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WS: u8 = 3;
    pub const SACK_PERM: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TS: u8 = 8;
}

/// Length of the fixed TCP header (data offset 5).
pub const HEADER_LEN: usize = 20;
/// Largest TCP header: the data offset is 4 bits of 32-bit words (RFC 9293 §3.1).
pub const MAX_HEADER_LEN: usize = 60;
/// Room for options: 60 - 20.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A read/write view of a TCP segment (header, options and payload) in a byte buffer.
///
/// The buffer must be exactly the segment, i.e. the IPv4 payload as bounded by the IPv4 total
/// length: the checksum and [`TcpPacket::payload`] cover everything after the header.
///
/// After [`TcpPacket::new_checked`] succeeds no accessor can panic. Views made with
/// [`TcpPacket::new_unchecked`] (used to emit into a fresh buffer) may panic in the fixed-field
/// accessors and setters if the buffer is shorter than 20 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps `buffer` without any length check.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps `buffer` after checking that the fixed header fits, the data offset is at least 5
    /// words and the header it announces fits in the buffer (RFC 9293 §3.1 "Data Offset").
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// The checks of [`TcpPacket::new_checked`]: `Truncated` if the buffer is shorter than 20
    /// bytes or than the data offset says, `BadLength` if the data offset is below 5.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if header_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SRC_PORT])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::DST_PORT])
    }

    /// Sequence number (raw 32 bits).
    pub fn seq_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SEQ_NUM])
    }

    /// Acknowledgment number (raw 32 bits; meaningful only when ACK is set).
    pub fn ack_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::ACK_NUM])
    }

    /// Header length in bytes: the data offset field times 4 (20..=60 after `new_checked`).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFF] >> 4) * 4
    }

    /// The eight control bits CWR..FIN (RFC 9293 §3.1; the reserved bits are not included).
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS])
    }

    /// Window field (raw, unscaled).
    pub fn window_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::WIN_SIZE])
    }

    /// Checksum field as on the wire.
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// Urgent pointer (raw; meaningful only when URG is set).
    pub fn urgent_at(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::URGENT])
    }

    /// Header end clamped to the buffer, so `options`/`payload` stay in bounds even if a setter
    /// changed the data offset after the check.
    fn header_end(&self) -> usize {
        self.header_len().min(self.buffer.as_ref().len())
    }

    /// The option bytes (between the fixed header and the data offset).
    pub fn options(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        let end = self.header_end();
        data.get(field::OPTIONS_START..end).unwrap_or(&[])
    }

    /// The payload: everything after the header.
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        &data[self.header_end()..]
    }

    /// Iterates over the options (see [`TcpOptionIter`]).
    pub fn option_iter(&self) -> TcpOptionIter<'_> {
        TcpOptionIter::new(self.options())
    }

    /// Sequence space the segment occupies: payload + SYN + FIN (RFC 9293 §3.4, SEG.LEN).
    pub fn segment_len(&self) -> usize {
        let flags = self.flags();
        self.payload().len() + usize::from(flags.syn()) + usize::from(flags.fin())
    }

    /// Verifies the checksum over pseudo-header, header and payload (RFC 9293 §3.1 "Checksum").
    pub fn verify_checksum(&self, ph: &PseudoHeader) -> bool {
        let data = self.buffer.as_ref();
        // The segment length always fits in 32 bits for a slice we can hold.
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let sum = checksum::combine(
            checksum::pseudo_header(ph.src, ph.dst, PROTO_TCP, len),
            mem::checksum(data),
        );
        // Summing a segment together with its correct checksum gives all ones (RFC 1071 §1).
        sum == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// The payload with the lifetime of the underlying buffer rather than of the view.
    pub fn into_payload(self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        let end = self.header_len().min(data.len());
        &data[end..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        self.buffer.as_mut()[field::DST_PORT].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, value: u32) {
        self.buffer.as_mut()[field::SEQ_NUM].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, value: u32) {
        self.buffer.as_mut()[field::ACK_NUM].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the data offset from a header length in bytes (rounded down to 32-bit words, at most
    /// 60) and clears the reserved bits, which a sender must zero (RFC 9293 §3.1 "Rsrvd").
    pub fn set_header_len(&mut self, len: usize) {
        let words = (len.min(MAX_HEADER_LEN) / 4) as u8;
        self.buffer.as_mut()[field::DATA_OFF] = words << 4;
    }

    /// Sets the eight control bits.
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS] = flags.0;
    }

    /// Sets the window field.
    pub fn set_window_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::WIN_SIZE].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, value: u16) {
        self.buffer.as_mut()[field::URGENT].copy_from_slice(&value.to_be_bytes());
    }

    /// The option bytes, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_end();
        self.buffer
            .as_mut()
            .get_mut(field::OPTIONS_START..end)
            .unwrap_or(&mut [])
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_end();
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes and stores the checksum over pseudo-header, header and payload.
    pub fn fill_checksum(&mut self, ph: &PseudoHeader) {
        self.set_checksum(0);
        let data = self.buffer.as_ref();
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let sum = checksum::combine(
            checksum::pseudo_header(ph.src, ph.dst, PROTO_TCP, len),
            mem::checksum(data),
        );
        self.set_checksum(checksum::finish(sum));
    }
}

/// One parsed TCP option. NOPs are skipped by the iterator and EOL ends it, so neither appears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 2, RFC 9293 §3.2.
    Mss(u16),
    /// Kind 3, RFC 7323 §2.2 (raw shift count).
    WindowScale(u8),
    /// Kind 4, RFC 2018 §2.
    SackPermitted,
    /// Kind 5, RFC 2018 §3: `count` (1..=4) valid blocks at the front of `blocks`.
    Sack { blocks: [SackBlock; 4], count: u8 },
    /// Kind 8, RFC 7323 §3.2.
    Timestamps(Timestamps),
    /// Any other kind with a well-formed length; `data` excludes kind and length bytes.
    Unknown { kind: u8, data: &'a [u8] },
}

/// Iterator over a TCP option area that never panics.
///
/// RFC 9293 §3.1/§3.2: EOL (kind 0) ends the list, NOP (kind 1) is one byte of padding, every
/// other option is kind, length, data; unknown kinds are skipped by their length (MUST-68).
/// A length byte below 2, an option running past the header, or a known kind with the wrong
/// length yields one `Err(Error::BadLength)` and then the iterator ends (RFC 9293 §3.2 MUST-7: an
/// illegal option length must be handled without crashing; the caller drops the segment).
#[derive(Debug, Clone)]
pub struct TcpOptionIter<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptionIter<'a> {
    /// Iterates over `options` (the bytes between the fixed header and the data offset).
    pub fn new(options: &'a [u8]) -> Self {
        TcpOptionIter { rest: options }
    }

    fn fail(&mut self) -> Option<Result<TcpOption<'a>>> {
        self.rest = &[];
        Some(Err(Error::BadLength))
    }
}

impl<'a> Iterator for TcpOptionIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (&k, after_kind) = self.rest.split_first()?;
            match k {
                kind::EOL => {
                    // Everything after EOL is padding.
                    self.rest = &[];
                    return None;
                }
                kind::NOP => {
                    self.rest = after_kind;
                    continue;
                }
                _ => {}
            }
            let Some(&len) = after_kind.first() else {
                return self.fail();
            };
            let len = usize::from(len);
            if len < 2 || len > self.rest.len() {
                return self.fail();
            }
            let data = &self.rest[2..len];
            self.rest = &self.rest[len..];
            let option = match k {
                kind::MSS if len == 4 => TcpOption::Mss(be16(data)),
                kind::WS if len == 3 => TcpOption::WindowScale(data[0]),
                kind::SACK_PERM if len == 2 => TcpOption::SackPermitted,
                kind::SACK if (len - 2) % 8 == 0 && (1..=4).contains(&((len - 2) / 8)) => {
                    let mut blocks = [SackBlock::default(); 4];
                    let mut count = 0u8;
                    for (slot, chunk) in blocks.iter_mut().zip(data.chunks_exact(8)) {
                        *slot = SackBlock {
                            left: be32(&chunk[..4]),
                            right: be32(&chunk[4..]),
                        };
                        count += 1;
                    }
                    TcpOption::Sack { blocks, count }
                }
                kind::TS if len == 10 => TcpOption::Timestamps(Timestamps {
                    tsval: be32(&data[..4]),
                    tsecr: be32(&data[4..]),
                }),
                kind::MSS | kind::WS | kind::SACK_PERM | kind::SACK | kind::TS => {
                    return self.fail();
                }
                other => TcpOption::Unknown { kind: other, data },
            };
            return Some(Ok(option));
        }
    }
}

impl TcpOptions {
    /// Parses an option area. A repeated option keeps its last value.
    pub fn parse(options: &[u8]) -> Result<TcpOptions> {
        let mut out = TcpOptions::default();
        for option in TcpOptionIter::new(options) {
            match option? {
                TcpOption::Mss(v) => out.mss = Some(v),
                TcpOption::WindowScale(v) => out.window_scale = Some(v),
                TcpOption::SackPermitted => out.sack_permitted = true,
                TcpOption::Sack { blocks, count } => {
                    out.sack = blocks;
                    out.sack_count = count;
                }
                TcpOption::Timestamps(ts) => out.timestamps = Some(ts),
                TcpOption::Unknown { .. } => {}
            }
        }
        Ok(out)
    }

    /// Bytes of everything but SACK blocks, in the Linux layout (each piece padded to 4 bytes):
    /// MSS 4, TS 12 (SACK-permitted rides in its NOP NOP), SACK-permitted alone 4, WS 4.
    fn fixed_len(&self) -> usize {
        let mut len = 0;
        if self.mss.is_some() {
            len += 4;
        }
        if self.timestamps.is_some() {
            len += 12;
        } else if self.sack_permitted {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 4;
        }
        len
    }

    /// How many SACK blocks are emitted: the valid ones, but no more than fit beside the other
    /// options in 40 bytes (RFC 2018 §3: at most 4, or 3 alongside timestamps). The first blocks
    /// are kept, since RFC 2018 §4 puts the most recent block first.
    pub fn emitted_sack_count(&self) -> usize {
        let room = MAX_OPTIONS_LEN.saturating_sub(self.fixed_len());
        // NOP NOP kind len, then 8 bytes per block.
        let fit = room.saturating_sub(4) / 8;
        self.sack_blocks().len().min(fit)
    }

    /// Bytes the options take when emitted (a multiple of 4, at most 40).
    pub fn emitted_len(&self) -> usize {
        let sacks = self.emitted_sack_count();
        self.fixed_len() + if sacks > 0 { 4 + 8 * sacks } else { 0 }
    }

    /// Writes the options into the front of `buf` in the order Linux's `tcp_options_write` uses:
    /// MSS; SACK-permitted+TS (or NOP NOP TS); NOP NOP SACK-permitted when there are no
    /// timestamps; NOP WS; NOP NOP SACK blocks. Every piece is 4-byte aligned, so no trailing
    /// padding is needed. Returns the number of bytes written, or `Error::Truncated` (writing
    /// nothing) if `buf` is shorter than [`TcpOptions::emitted_len`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let total = self.emitted_len();
        let Some(out) = buf.get_mut(..total) else {
            return Err(Error::Truncated);
        };
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        if let Some(mss) = self.mss {
            let m = mss.to_be_bytes();
            put(&[kind::MSS, 4, m[0], m[1]]);
        }
        if let Some(ts) = self.timestamps {
            if self.sack_permitted {
                put(&[kind::SACK_PERM, 2]);
            } else {
                put(&[kind::NOP, kind::NOP]);
            }
            put(&[kind::TS, 10]);
            put(&ts.tsval.to_be_bytes());
            put(&ts.tsecr.to_be_bytes());
        } else if self.sack_permitted {
            put(&[kind::NOP, kind::NOP, kind::SACK_PERM, 2]);
        }
        if let Some(ws) = self.window_scale {
            put(&[kind::NOP, kind::WS, 3, ws]);
        }
        let sacks = self.emitted_sack_count();
        if sacks > 0 {
            put(&[kind::NOP, kind::NOP, kind::SACK, (2 + 8 * sacks) as u8]);
            for block in &self.sack_blocks()[..sacks] {
                put(&block.left.to_be_bytes());
                put(&block.right.to_be_bytes());
            }
        }
        Ok(total)
    }
}

impl TcpRepr {
    /// Parses a checked segment's header and options. The payload is `packet.payload()`.
    ///
    /// With `verify_checksum` the checksum is checked over the whole buffer (`BadChecksum`);
    /// pass `false` when the device already verified it. Port 0 on either side is `Malformed`
    /// (it is reserved and never names a connection). Option errors are `BadLength`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&T>,
        ph: &PseudoHeader,
        verify_checksum: bool,
    ) -> Result<TcpRepr> {
        // A view built with new_unchecked must not make the accessors below panic.
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(ph) {
            return Err(Error::BadChecksum);
        }
        let (src_port, dst_port) = (packet.src_port(), packet.dst_port());
        if src_port == 0 || dst_port == 0 {
            return Err(Error::Malformed);
        }
        Ok(TcpRepr {
            src_port,
            dst_port,
            seq: packet.seq_number(),
            ack: packet.ack_number(),
            flags: packet.flags(),
            window: packet.window_len(),
            urgent: packet.urgent_at(),
            options: TcpOptions::parse(packet.options())?,
        })
    }

    /// Header bytes [`TcpRepr::emit`] writes: 20 + options (a multiple of 4, at most 60).
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.emitted_len()
    }

    /// Header plus `payload_len`.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Sequence space a segment with this header and `payload_len` bytes occupies:
    /// payload + SYN + FIN (RFC 9293 §3.4, SEG.LEN).
    pub fn segment_len(&self, payload_len: usize) -> usize {
        payload_len + usize::from(self.flags.syn()) + usize::from(self.flags.fin())
    }

    /// Writes the header and options into `packet`; leaves the checksum field 0 and the payload
    /// untouched. SACK blocks that do not fit beside the other options are left out.
    ///
    /// # Panics
    /// If the packet buffer is shorter than [`TcpRepr::header_len`] (a caller bug: the caller
    /// sizes its own buffer). Use [`TcpRepr::emit_with_checksum`] for a checked variant.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut TcpPacket<&mut T>) {
        let header_len = self.header_len();
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq);
        packet.set_ack_number(self.ack);
        packet.set_header_len(header_len);
        packet.set_flags(self.flags);
        packet.set_window_len(self.window);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent);
        let options = &mut packet.buffer.as_mut()[HEADER_LEN..header_len];
        // Cannot fail: the slice is exactly emitted_len() long.
        let _ = self.options.emit(options);
    }

    /// Writes header, options and checksum into the front of `header_buf` for a payload that
    /// lies elsewhere and whose folded sum (`mem::checksum` or a fused copy+checksum kernel) is
    /// already known. Returns the header length, or `Truncated` if `header_buf` is too short.
    pub fn emit_with_payload_sum(
        &self,
        header_buf: &mut [u8],
        payload_len: usize,
        payload_sum: u16,
        ph: &PseudoHeader,
    ) -> Result<usize> {
        let header_len = self.header_len();
        let header = header_buf
            .get_mut(..header_len)
            .ok_or(Error::Truncated)?;
        let mut packet = TcpPacket::new_unchecked(&mut *header);
        self.emit(&mut packet);
        let total = u32::try_from(header_len + payload_len).map_err(|_| Error::BadLength)?;
        // The header length is a multiple of 4, so the payload starts on an even offset and its
        // sum can be added as is (RFC 1071 §2(B)).
        let sum = checksum::combine(
            checksum::combine(
                checksum::pseudo_header(ph.src, ph.dst, PROTO_TCP, total),
                mem::checksum(header),
            ),
            payload_sum,
        );
        TcpPacket::new_unchecked(header).set_checksum(checksum::finish(sum));
        Ok(header_len)
    }

    /// Writes the whole segment (header, options, `payload`, checksum) into the front of `buf`,
    /// copying the payload and summing it in the same pass. Returns the segment length, or
    /// `Truncated` if `buf` is too short.
    pub fn emit_with_checksum(
        &self,
        buf: &mut [u8],
        payload: &[u8],
        ph: &PseudoHeader,
    ) -> Result<usize> {
        let header_len = self.header_len();
        let total = header_len + payload.len();
        let segment = buf.get_mut(..total).ok_or(Error::Truncated)?;
        let (header, body) = segment.split_at_mut(header_len);
        let payload_sum = mem::copy_with_checksum(body, payload);
        self.emit_with_payload_sum(header, payload.len(), payload_sum, ph)?;
        Ok(total)
    }
}
