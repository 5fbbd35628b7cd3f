//! TCP header (RFC 9293 §3.1) with options: MSS (RFC 9293 §3.2), window scale and timestamps
//! (RFC 7323), SACK-permitted and SACK blocks (RFC 2018), NOP/EOL; unknown options are skipped.
//!
//! The `Repr` types below are the contract between the wire format and the TCP engine
//! (`crate::tcp`), which consumes and produces `TcpRepr` values without touching bytes.
//!
//! ```
//! use netfold::wire::tcp::{PseudoHeader, TcpFlags, TcpPacket, TcpRepr};
//! use netfold::wire::Ipv4Addr;
//!
//! let ph = PseudoHeader::new(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
//! let mut repr = TcpRepr { src_port: 40000, dst_port: 5201, ..TcpRepr::default() };
//! repr.flags = TcpFlags(TcpFlags::SYN);
//! repr.options.mss = Some(1460);
//!
//! let mut buf = [0u8; 64];
//! let len = repr.emit_with_checksum(&mut buf, b"", &ph).unwrap();
//! let packet = TcpPacket::new_checked(&buf[..len]).unwrap();
//! assert_eq!(TcpRepr::parse(&packet, &ph, true), Ok(repr));
//! assert!(packet.payload().is_empty());
//! ```
#![warn(missing_docs)]

use super::IpAddr;

/// TCP control flags (RFC 9293 §3.1, RFC 3168 for ECE/CWR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push function.
    pub const PSH: u8 = 0x08;
    /// The acknowledgment field is significant.
    pub const ACK: u8 = 0x10;
    /// The urgent pointer field is significant.
    pub const URG: u8 = 0x20;
    /// ECN-Echo (RFC 3168 §6.1).
    pub const ECE: u8 = 0x40;
    /// Congestion Window Reduced (RFC 3168 §6.1).
    pub const CWR: u8 = 0x80;

    /// FIN is set.
    pub const fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    /// SYN is set.
    pub const fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    /// RST is set.
    pub const fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    /// PSH is set.
    pub const fn psh(self) -> bool {
        self.0 & Self::PSH != 0
    }
    /// ACK is set.
    pub const fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
    /// URG is set.
    pub const fn urg(self) -> bool {
        self.0 & Self::URG != 0
    }
    /// ECE is set.
    pub const fn ece(self) -> bool {
        self.0 & Self::ECE != 0
    }
    /// CWR is set.
    pub const fn cwr(self) -> bool {
        self.0 & Self::CWR != 0
    }
    /// Every bit of `bits` is set.
    pub const fn contains(self, bits: u8) -> bool {
        self.0 & bits == bits
    }

    /// What the flags add to the one's-complement sum of a header (RFC 1071): the flags byte
    /// is the low byte of the 16-bit word that starts at the data offset, so a header summed
    /// with its flags zero (a GSO template) plus this is the header's sum with the flags set.
    pub const fn checksum_word(self) -> u16 {
        self.0 as u16
    }
}

/// One SACK block: the left (first) and right (one past last) sequence numbers, RFC 2018 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SackBlock {
    /// First sequence number of the block.
    pub left: u32,
    /// Sequence number just past the block.
    pub right: u32,
}

/// RFC 7323 §3 timestamps option: TSval and TSecr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Timestamps {
    /// The sender's timestamp clock value.
    pub tsval: u32,
    /// The echoed TSval of the peer (valid when ACK is set).
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
    /// How many entries of `sack` are valid (0..=4).
    pub sack_count: u8,
    /// Timestamps (kind 8).
    pub timestamps: Option<Timestamps>,
    /// TCP Fast Open cookie option (kind 34, or the experimental kind 254 with magic
    /// 0xF989); only meaningful on SYN segments (RFC 7413 §4.1.1).
    pub fast_open: Option<FastOpenOption>,
}

/// Longest Fast Open cookie (RFC 7413 §4.1.1: cookies are 4 to 16 bytes).
pub const FAST_OPEN_COOKIE_MAX: usize = 16;
/// Shortest non-empty Fast Open cookie.
pub const FAST_OPEN_COOKIE_MIN: usize = 4;
/// The magic number of the experimental Fast Open option (RFC 6994 ExID, RFC 7413 §4.1.1).
pub const FAST_OPEN_EXP_MAGIC: u16 = 0xF989;

/// A Fast Open cookie: empty (a cookie request, RFC 7413 §4.1.1) or 4 to 16
/// bytes, an even number of them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FastOpenCookie {
    len: u8,
    bytes: [u8; FAST_OPEN_COOKIE_MAX],
}

impl FastOpenCookie {
    /// The empty cookie of a cookie request.
    pub const REQUEST: FastOpenCookie = FastOpenCookie {
        len: 0,
        bytes: [0; FAST_OPEN_COOKIE_MAX],
    };

    /// A cookie of `bytes`: `None` unless empty or 4..=16 bytes of even length (the lengths
    /// Linux `tcp_parse_fastopen_option` takes; others it ignores).
    pub fn new(bytes: &[u8]) -> Option<FastOpenCookie> {
        let n = bytes.len();
        if n != 0
            && (!(FAST_OPEN_COOKIE_MIN..=FAST_OPEN_COOKIE_MAX).contains(&n) || !n.is_multiple_of(2))
        {
            return None;
        }
        let mut c = FastOpenCookie {
            len: n as u8,
            bytes: [0; FAST_OPEN_COOKIE_MAX],
        };
        c.bytes[..n].copy_from_slice(bytes);
        Some(c)
    }

    /// The cookie bytes (empty for a request).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len).min(FAST_OPEN_COOKIE_MAX)]
    }

    /// An empty cookie: the option asks for a cookie.
    pub fn is_request(&self) -> bool {
        self.len == 0
    }
}

impl core::fmt::Debug for FastOpenCookie {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FastOpenCookie(")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// The TCP Fast Open option of a SYN or SYN-ACK (RFC 7413 §4.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FastOpenOption {
    /// The cookie, or empty for a cookie request.
    pub cookie: FastOpenCookie,
    /// Sent in the experimental form (kind 254, ExID 0xF989) that clients older than the IANA
    /// assignment use; the answer goes back in the same form (Linux `foc->exp`).
    pub experimental: bool,
}

impl FastOpenOption {
    /// Bytes on the wire, padded with NOPs to a multiple of 4 (Linux `tcp_options_write`).
    fn emitted_len(&self) -> usize {
        let base = if self.experimental { 4 } else { 2 };
        (base + self.cookie.as_bytes().len() + 3) & !3
    }
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
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (meaningful when ACK is set).
    pub ack: u32,
    /// Control bits.
    pub flags: TcpFlags,
    /// Window field, unscaled.
    pub window: u16,
    /// Urgent pointer (meaningful when URG is set).
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
}

/// The IP endpoints a TCP/UDP checksum covers: the pseudo-header of RFC 9293 §3.1 (IPv4) or
/// RFC 8200 §8.1 (IPv6), chosen by the addresses' family (both must be of one family; see
/// [`checksum::pseudo_header_ip`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PseudoHeader {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
}

impl PseudoHeader {
    /// The pseudo-header of a packet from `src` to `dst` (two IPv4 or two IPv6 addresses).
    pub fn new(src: impl Into<IpAddr>, dst: impl Into<IpAddr>) -> PseudoHeader {
        PseudoHeader {
            src: src.into(),
            dst: dst.into(),
        }
    }

    /// Its sum for `protocol` and a transport length of `len` bytes.
    #[inline]
    pub fn sum(&self, protocol: IpProtocol, len: u32) -> u16 {
        checksum::pseudo_header_ip(self.src, self.dst, protocol, len)
    }
}

use super::checksum;
use super::{Error, IpProtocol, Result};
use crate::mem;

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
    /// RFC 7413 §4.1.1, TCP Fast Open cookie.
    pub const FAST_OPEN: u8 = 34;
    /// RFC 4727 experimental kind, used with ExID 0xF989 by pre-RFC Fast Open (RFC 6994).
    pub const EXP: u8 = 254;
}

/// Length of the fixed TCP header (data offset 5).
pub const HEADER_LEN: usize = 20;
/// Largest TCP header: the data offset is 4 bits of 32-bit words (RFC 9293 §3.1).
pub const MAX_HEADER_LEN: usize = 60;
/// Room for options: 60 - 20.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;
/// What an IPv4 MTU carries besides the MSS: the fixed IPv4 and TCP headers (RFC 9293 §3.7.1,
/// RFC 879: "MSS = MTU - 40" for IPv4 without options).
pub const IPV4_MSS_OVERHEAD: usize = super::ipv4::HEADER_LEN + HEADER_LEN;
/// The MSS to announce on an IPv4 link of IP MTU `mtu`: MTU - 40 (RFC 9293 §3.7.1), never
/// below RFC 9293's default send MSS of 536 nor above what the option's 16 bits hold.
pub fn ipv4_mss_for_mtu(mtu: usize) -> u16 {
    mtu.saturating_sub(IPV4_MSS_OVERHEAD)
        .clamp(536, usize::from(u16::MAX)) as u16
}
/// What an IPv6 MTU carries besides the MSS: the fixed IPv6 header (40 bytes) and the TCP
/// header. RFC 8200 §8.3: "the maximum TCP segment size \[is\] computed as the maximum packet
/// size minus 60 octets"; Linux `tcp_v6` the same (`mtu - sizeof(ipv6hdr) - sizeof(tcphdr)`).
pub const IPV6_MSS_OVERHEAD: usize = super::ipv6::HEADER_LEN + HEADER_LEN;
/// The MSS to announce on an IPv6 link of MTU `mtu`: MTU - 60 (RFC 8200 §8.3, RFC 9293
/// §3.7.1), never below 1220 (RFC 9293 §3.7.1 MUST-15: the IPv6 default send MSS, 1280 - 60,
/// since every IPv6 link carries 1280 bytes, RFC 8200 §5) nor above 16 bits.
pub fn ipv6_mss_for_mtu(mtu: usize) -> u16 {
    mtu.saturating_sub(IPV6_MSS_OVERHEAD)
        .clamp(IPV6_DEFAULT_MSS, usize::from(u16::MAX)) as u16
}
/// RFC 9293 §3.7.1 (MUST-15): the send MSS assumed without an MSS option, IPv4 (576 - 40).
pub const IPV4_DEFAULT_MSS: usize = 536;
/// RFC 9293 §3.7.1 (MUST-15): the send MSS assumed without an MSS option, IPv6 (1280 - 60).
pub const IPV6_DEFAULT_MSS: usize = super::ipv6::MIN_MTU - IPV6_MSS_OVERHEAD;
/// Where the checksum field lies in the header (RFC 9293 §3.1), for code that must name it by
/// position: a virtio-net header's `csum_offset` (Linux `CHECKSUM_PARTIAL`), say.
pub const CHECKSUM_FIELD: core::ops::Range<usize> = field::CHECKSUM;

/// What a sequence number adds to the one's-complement sum of a header (RFC 1071): the field
/// is two aligned 16-bit words, so a header summed with it zero (a GSO template) plus this is
/// the header's sum with `seq` in place.
pub fn seq_number_sum(seq: u32) -> u16 {
    checksum::add((seq >> 16) as u16, seq as u16)
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The ports of a TCP header quoted in an ICMP error (RFC 792: the quote holds the first 64
/// bits of the original datagram, enough for source and destination port): `(src, dst)`, or
/// `None` if fewer than 4 bytes were quoted.
pub fn quoted_ports(quote: &[u8]) -> Option<(u16, u16)> {
    Some((
        be16(quote.get(field::SRC_PORT)?),
        be16(quote.get(field::DST_PORT)?),
    ))
}

/// The sequence number of a TCP header quoted in an ICMP error (RFC 792: the quote holds at
/// least the first 8 bytes of the header, ports then sequence number; RFC 5927 §4.1 checks it).
pub fn quoted_seq(quote: &[u8]) -> Option<u32> {
    Some(be32(quote.get(field::SEQ_NUM)?))
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
        let sum = checksum::add(ph.sum(IpProtocol::Tcp, len), mem::checksum(data));
        // Summing a segment together with its correct checksum gives all ones (RFC 1071 §1).
        sum == 0xffff
    }

    /// Like [`TcpPacket::verify_checksum`], but the payload's folded sum is supplied by the
    /// caller, who computed it while copying the payload out (`mem::copy_with_checksum`), so
    /// the payload is read once (DESIGN: checksum where the data is touched anyway). Only the
    /// header is summed here; it is a multiple of 4 bytes long, so the payload sum starts on an
    /// even offset and adds in directly (RFC 1071 §2(B)).
    pub fn verify_checksum_with_payload_sum(&self, ph: &PseudoHeader, payload_sum: u16) -> bool {
        let data = self.buffer.as_ref();
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let header = &data[..self.header_end()];
        let sum = checksum::add(
            checksum::add(ph.sum(IpProtocol::Tcp, len), mem::checksum(header)),
            payload_sum,
        );
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

    /// The option bytes with the lifetime of the underlying buffer rather than of the view.
    pub fn into_options(self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        let end = self.header_len().min(data.len());
        data.get(field::OPTIONS_START..end).unwrap_or(&[])
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
        let sum = checksum::add(ph.sum(IpProtocol::Tcp, len), mem::checksum(data));
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
    Sack {
        /// The blocks, in the order sent (RFC 2018 §4: most recent first).
        blocks: [SackBlock; 4],
        /// How many leading entries of `blocks` are valid.
        count: u8,
    },
    /// Kind 8, RFC 7323 §3.2.
    Timestamps(Timestamps),
    /// Any other kind with a well-formed length; `data` excludes kind and length bytes.
    Unknown {
        /// The option kind.
        kind: u8,
        /// The option data after the kind and length bytes.
        data: &'a [u8],
    },
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
    #[inline]
    pub fn parse(options: &[u8]) -> Result<TcpOptions> {
        // Fast path for the layout nearly every data segment and ACK carries: NOP NOP TS,
        // exactly 12 bytes (RFC 7323 Appendix A recommends it so the receiver can do this; Linux's
        // tcp_fast_parse_options / tcp_parse_aligned_timestamp does the same).
        if let [kind::NOP, kind::NOP, kind::TS, 10, ts @ ..] = options {
            if ts.len() == 8 {
                return Ok(TcpOptions {
                    timestamps: Some(Timestamps {
                        tsval: be32(&ts[..4]),
                        tsecr: be32(&ts[4..]),
                    }),
                    ..TcpOptions::default()
                });
            }
        }
        if options.is_empty() {
            return Ok(TcpOptions::default());
        }
        Self::parse_general(options)
    }

    /// `parse` for every layout but the aligned timestamps and no options (out of line).
    #[inline(never)]
    fn parse_general(options: &[u8]) -> Result<TcpOptions> {
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
                // RFC 7413 §4.1.1. A cookie of a length no cookie has is ignored (the
                // option is absent), as Linux `tcp_parse_fastopen_option` ignores it.
                TcpOption::Unknown {
                    kind: kind::FAST_OPEN,
                    data,
                } => {
                    if let Some(cookie) = FastOpenCookie::new(data) {
                        out.fast_open = Some(FastOpenOption {
                            cookie,
                            experimental: false,
                        });
                    }
                }
                TcpOption::Unknown {
                    kind: kind::EXP,
                    data: [0xF9, 0x89, cookie @ ..],
                } => {
                    if let Some(cookie) = FastOpenCookie::new(cookie) {
                        out.fast_open = Some(FastOpenOption {
                            cookie,
                            experimental: true,
                        });
                    }
                }
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
        if let Some(fo) = &self.fast_open {
            len += fo.emitted_len();
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

    /// The timestamps, if they are the only option: the segment a synchronized connection
    /// sends nearly always (every data segment and ACK without SACK blocks), whose option area
    /// is RFC 7323 Appendix A's NOP NOP TS, 12 bytes. The emitters take this shape straight.
    #[inline(always)]
    pub fn timestamps_only(&self) -> Option<Timestamps> {
        match self.timestamps {
            Some(ts)
                if self.mss.is_none()
                    && self.window_scale.is_none()
                    && !self.sack_permitted
                    && self.sack_count == 0
                    && self.fast_open.is_none() =>
            {
                Some(ts)
            }
            _ => None,
        }
    }

    /// Bytes the options take when emitted (a multiple of 4, at most 40).
    #[inline]
    pub fn emitted_len(&self) -> usize {
        if self.timestamps_only().is_some() {
            return 12;
        }
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
        // Last, as Linux `tcp_options_write` puts it: kind 34 (or 254 with the ExID), the
        // length, the cookie, NOP NOP when that leaves 2 bytes of a word.
        if let Some(fo) = &self.fast_open {
            let cookie = fo.cookie.as_bytes();
            let len = fo.emitted_len();
            if fo.experimental {
                let m = FAST_OPEN_EXP_MAGIC.to_be_bytes();
                put(&[kind::EXP, (4 + cookie.len()) as u8, m[0], m[1]]);
            } else {
                put(&[kind::FAST_OPEN, (2 + cookie.len()) as u8]);
            }
            put(cookie);
            let used = if fo.experimental { 4 } else { 2 } + cookie.len();
            for _ in used..len {
                put(&[kind::NOP]);
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
    #[inline(always)]
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

    /// [`TcpRepr::emit`] into the front of `header` (at least [`TcpRepr::header_len`] bytes),
    /// returning, for the timestamps-only shape ([`TcpOptions::timestamps_only`]), the RFC 1071
    /// sum of the header as written (checksum field zero), the same value
    /// `mem::checksum(&header[..header_len])` gives, computed from the field values while they
    /// are stored instead of read back. `None` for every other shape: the header is written by
    /// `emit` and the caller sums it.
    #[inline(always)]
    pub fn emit_summed(&self, header: &mut [u8]) -> Option<u16> {
        let Some(ts) = self.options.timestamps_only() else {
            self.emit(&mut TcpPacket::new_unchecked(&mut *header));
            return None;
        };
        // 32 bytes: the fixed header with data offset 8 words, then NOP NOP TS(8, 10) TSval
        // TSecr (the layout `TcpOptions::emit` writes, RFC 7323 Appendix A).
        let mut h = [0u8; HEADER_LEN + 12];
        h[field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        h[field::DST_PORT].copy_from_slice(&self.dst_port.to_be_bytes());
        h[field::SEQ_NUM].copy_from_slice(&self.seq.to_be_bytes());
        h[field::ACK_NUM].copy_from_slice(&self.ack.to_be_bytes());
        h[field::DATA_OFF] = 8 << 4;
        h[field::FLAGS] = self.flags.0;
        h[field::WIN_SIZE].copy_from_slice(&self.window.to_be_bytes());
        h[field::URGENT].copy_from_slice(&self.urgent.to_be_bytes());
        h[20..24].copy_from_slice(&[kind::NOP, kind::NOP, kind::TS, 10]);
        h[24..28].copy_from_slice(&ts.tsval.to_be_bytes());
        h[28..32].copy_from_slice(&ts.tsecr.to_be_bytes());
        header[..h.len()].copy_from_slice(&h);
        // The big-endian 16-bit words of those bytes (RFC 1071 §1), summed in 32 bits (13
        // words of at most 0xffff cannot carry out) and folded twice with end-around carry.
        let words = |v: u32| (v >> 16) + (v & 0xffff);
        let sum = u32::from(self.src_port)
            + u32::from(self.dst_port)
            + words(self.seq)
            + words(self.ack)
            + ((8 << 12) | u32::from(self.flags.0))
            + u32::from(self.window)
            + u32::from(self.urgent)
            + u32::from(u16::from_be_bytes([kind::NOP, kind::NOP]))
            + u32::from(u16::from_be_bytes([kind::TS, 10]))
            + words(ts.tsval)
            + words(ts.tsecr);
        let sum = (sum & 0xffff) + (sum >> 16);
        let sum = (sum & 0xffff) + (sum >> 16);
        Some(sum as u16)
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
        let header = header_buf.get_mut(..header_len).ok_or(Error::Truncated)?;
        let mut packet = TcpPacket::new_unchecked(&mut *header);
        self.emit(&mut packet);
        let total = u32::try_from(header_len + payload_len).map_err(|_| Error::BadLength)?;
        // The header length is a multiple of 4, so the payload starts on an even offset and its
        // sum can be added as is (RFC 1071 §2(B)).
        let sum = checksum::add(
            checksum::add(ph.sum(IpProtocol::Tcp, total), mem::checksum(header)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Ipv4Addr;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire as s;

    const SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    const PH: PseudoHeader = PseudoHeader {
        src: IpAddr::V4(SRC),
        dst: IpAddr::V4(DST),
    };

    fn s_addrs() -> (s::IpAddress, s::IpAddress) {
        (s::IpAddress::Ipv4(SRC), s::IpAddress::Ipv4(DST))
    }

    #[test]
    fn field_sums_complete_a_template_summed_without_them() {
        // A header with options, summed with sequence number and flags zero (what a GSO
        // template keeps), plus what wire says they add, is the header's sum.
        let mut h = linux_syn();
        for (seq, flags) in [
            (0u32, 0u8),
            (0x0102_0304, 0x12),
            (u32::MAX, 0xff),
            (0x8000, 0x80),
        ] {
            let mut p = TcpPacket::new_unchecked(&mut h[..]);
            p.set_seq_number(0);
            p.set_flags(TcpFlags(0));
            let template = mem::checksum(&h);
            let mut p = TcpPacket::new_unchecked(&mut h[..]);
            p.set_seq_number(seq);
            p.set_flags(TcpFlags(flags));
            let whole = mem::checksum(&h);
            let parts = checksum::add(
                checksum::add(template, seq_number_sum(seq)),
                TcpFlags(flags).checksum_word(),
            );
            assert_eq!(parts, whole, "seq {seq:#x} flags {flags:#x}");
        }
        // The checksum field is where the view writes it.
        TcpPacket::new_unchecked(&mut h[..]).set_checksum(0xbeef);
        assert_eq!(&h[CHECKSUM_FIELD], &[0xbe, 0xef]);
        // Options with the buffer's lifetime are the view's options.
        let p = TcpPacket::new_checked(&h[..]).unwrap();
        assert_eq!(
            p.into_options(),
            TcpPacket::new_checked(&h[..]).unwrap().options()
        );
        assert_eq!(p.into_options().len(), p.header_len() - HEADER_LEN);
    }

    /// A Linux SYN: MSS 1460, SACK-permitted + timestamps, NOP WS 7 (the layout of
    /// `tcp_options_write`), checksum filled in below from smoltcp's independent code.
    fn linux_syn() -> Vec<u8> {
        let mut b = vec![
            0xc3, 0x50, 0x00, 0x50, // ports 50000 -> 80
            0x12, 0x34, 0x56, 0x78, // seq
            0x00, 0x00, 0x00, 0x00, // ack
            0xa0, 0x02, 0xfa, 0xf0, // data offset 10, SYN, window 64240
            0x00, 0x00, 0x00, 0x00, // checksum, urgent
            0x02, 0x04, 0x05, 0xb4, // MSS 1460
            0x04, 0x02, 0x08, 0x0a, // SACK-permitted, TS kind/len
            0x00, 0x01, 0xe2, 0x40, // TSval 123456
            0x00, 0x00, 0x00, 0x00, // TSecr 0
            0x01, 0x03, 0x03, 0x07, // NOP, WS 7
        ];
        let (sa, da) = s_addrs();
        s::TcpPacket::new_unchecked(&mut b[..]).fill_checksum(&sa, &da);
        b
    }

    fn syn_repr() -> TcpRepr {
        TcpRepr {
            src_port: 50000,
            dst_port: 80,
            seq: 0x1234_5678,
            ack: 0,
            flags: TcpFlags(TcpFlags::SYN),
            window: 64240,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                window_scale: Some(7),
                sack_permitted: true,
                timestamps: Some(Timestamps {
                    tsval: 123_456,
                    tsecr: 0,
                }),
                ..TcpOptions::default()
            },
        }
    }

    #[test]
    fn parses_linux_syn() {
        let bytes = linux_syn();
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.header_len(), 40);
        assert_eq!(packet.options().len(), 20);
        assert!(packet.payload().is_empty());
        assert!(packet.verify_checksum(&PH));
        assert_eq!(packet.segment_len(), 1);
        assert_eq!(TcpRepr::parse(&packet, &PH, true).unwrap(), syn_repr());
    }

    #[test]
    fn emits_linux_syn_byte_for_byte() {
        let repr = syn_repr();
        assert_eq!(repr.header_len(), 40);
        let mut buf = [0xaau8; 64];
        let n = repr.emit_with_checksum(&mut buf, &[], &PH).unwrap();
        assert_eq!(&buf[..n], &linux_syn()[..]);
    }

    #[test]
    fn ack_with_payload_matches_smoltcp_bytes() {
        let payload = b"hello, world!"; // odd length exercises the trailing byte
        let (sa, da) = s_addrs();
        let srepr = s::TcpRepr {
            src_port: 4242,
            dst_port: 5201,
            control: s::TcpControl::Psh,
            seq_number: s::TcpSeqNumber(0x7fff_fff0u32 as i32),
            ack_number: Some(s::TcpSeqNumber(0xdead_beefu32 as i32)),
            window_len: 1024,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload,
        };
        let mut theirs = vec![0u8; srepr.buffer_len()];
        srepr.emit(
            &mut s::TcpPacket::new_unchecked(&mut theirs[..]),
            &sa,
            &da,
            &ChecksumCapabilities::default(),
        );

        let ours_repr = TcpRepr {
            src_port: 4242,
            dst_port: 5201,
            seq: 0x7fff_fff0,
            ack: 0xdead_beef,
            flags: TcpFlags(TcpFlags::PSH | TcpFlags::ACK),
            window: 1024,
            urgent: 0,
            options: TcpOptions::default(),
        };
        let mut ours = vec![0u8; ours_repr.buffer_len(payload.len())];
        let n = ours_repr
            .emit_with_checksum(&mut ours, payload, &PH)
            .unwrap();
        assert_eq!(n, theirs.len());
        assert_eq!(ours, theirs);

        let packet = TcpPacket::new_checked(&theirs[..]).unwrap();
        assert_eq!(TcpRepr::parse(&packet, &PH, true).unwrap(), ours_repr);
        assert_eq!(packet.into_payload(), payload);
    }

    #[test]
    fn ipv4_mss_is_mtu_less_40_within_the_option_range() {
        assert_eq!(ipv4_mss_for_mtu(1500), 1460);
        assert_eq!(ipv4_mss_for_mtu(9000), 8960);
        assert_eq!(ipv4_mss_for_mtu(100), 536);
        assert_eq!(ipv4_mss_for_mtu(200_000), u16::MAX);
        assert_eq!(ipv6_mss_for_mtu(1500), 1440);
        assert_eq!(ipv6_mss_for_mtu(9000), 8940);
        assert_eq!(ipv6_mss_for_mtu(1280), 1220);
        assert_eq!(ipv6_mss_for_mtu(600), 1220);
        assert_eq!(ipv6_mss_for_mtu(200_000), u16::MAX);
    }

    #[test]
    fn mss_only_syn_matches_smoltcp_bytes() {
        let (sa, da) = s_addrs();
        let srepr = s::TcpRepr {
            src_port: 1,
            dst_port: 65535,
            control: s::TcpControl::Syn,
            seq_number: s::TcpSeqNumber(-1),
            ack_number: None,
            window_len: 65535,
            window_scale: None,
            max_seg_size: Some(536),
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &[],
        };
        let mut theirs = vec![0u8; srepr.buffer_len()];
        srepr.emit(
            &mut s::TcpPacket::new_unchecked(&mut theirs[..]),
            &sa,
            &da,
            &ChecksumCapabilities::default(),
        );
        let repr = TcpRepr {
            src_port: 1,
            dst_port: 65535,
            seq: u32::MAX,
            ack: 0,
            flags: TcpFlags(TcpFlags::SYN),
            window: 65535,
            urgent: 0,
            options: TcpOptions {
                mss: Some(536),
                ..TcpOptions::default()
            },
        };
        let mut ours = vec![0u8; repr.header_len()];
        repr.emit_with_checksum(&mut ours, &[], &PH).unwrap();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn parses_smoltcp_syn_with_every_option() {
        // smoltcp lays options out differently (MSS, WS, SACK-perm, TS, EOL padding): the
        // parser must not depend on Linux's order or alignment.
        let (sa, da) = s_addrs();
        let srepr = s::TcpRepr {
            src_port: 40000,
            dst_port: 443,
            control: s::TcpControl::Syn,
            seq_number: s::TcpSeqNumber(1000),
            ack_number: Some(s::TcpSeqNumber(77)),
            window_len: 29200,
            window_scale: Some(14),
            max_seg_size: Some(8960),
            sack_permitted: true,
            sack_ranges: [None; 3],
            timestamp: Some(s::TcpTimestampRepr::new(1, 2)),
            payload: &[],
        };
        let mut theirs = vec![0u8; srepr.buffer_len()];
        srepr.emit(
            &mut s::TcpPacket::new_unchecked(&mut theirs[..]),
            &sa,
            &da,
            &ChecksumCapabilities::default(),
        );
        let packet = TcpPacket::new_checked(&theirs[..]).unwrap();
        let repr = TcpRepr::parse(&packet, &PH, true).unwrap();
        assert_eq!(repr.flags, TcpFlags(TcpFlags::SYN | TcpFlags::ACK));
        assert_eq!(repr.ack, 77);
        assert_eq!(repr.options.mss, Some(8960));
        assert_eq!(repr.options.window_scale, Some(14));
        assert!(repr.options.sack_permitted);
        assert_eq!(
            repr.options.timestamps,
            Some(Timestamps { tsval: 1, tsecr: 2 })
        );
        assert_eq!(repr.options.sack_count, 0);
    }

    #[test]
    fn smoltcp_parses_our_sack_blocks() {
        let mut options = TcpOptions {
            timestamps: Some(Timestamps { tsval: 9, tsecr: 8 }),
            sack_count: 3,
            ..TcpOptions::default()
        };
        for i in 0..3u32 {
            options.sack[i as usize] = SackBlock {
                left: 1000 * (i + 1),
                right: 1000 * (i + 1) + 500,
            };
        }
        let repr = TcpRepr {
            src_port: 9,
            dst_port: 10,
            seq: 5,
            ack: 6,
            flags: TcpFlags(TcpFlags::ACK),
            window: 100,
            urgent: 0,
            options,
        };
        // 20 + TS 12 + NOP NOP SACK(3) 28 = 60: exactly full.
        assert_eq!(repr.header_len(), 60);
        let mut buf = vec![0u8; 60];
        repr.emit_with_checksum(&mut buf, &[], &PH).unwrap();

        let (sa, da) = s_addrs();
        let packet = s::TcpPacket::new_checked(&buf[..]).unwrap();
        let srepr = s::TcpRepr::parse(&packet, &sa, &da, &ChecksumCapabilities::default()).unwrap();
        assert_eq!(
            srepr.sack_ranges,
            [Some((1000, 1500)), Some((2000, 2500)), Some((3000, 3500))]
        );
        assert_eq!(srepr.timestamp, Some(s::TcpTimestampRepr::new(9, 8)));
        let ours = TcpRepr::parse(&TcpPacket::new_checked(&buf[..]).unwrap(), &PH, true);
        assert_eq!(ours.unwrap(), repr);
    }

    #[test]
    fn sack_blocks_that_do_not_fit_are_dropped() {
        let mut repr = syn_repr();
        repr.options.sack_count = 4;
        for (i, b) in repr.options.sack.iter_mut().enumerate() {
            *b = SackBlock {
                left: i as u32,
                right: i as u32 + 1,
            };
        }
        // MSS 4 + TS 12 + WS 4 = 20; 20 bytes left hold NOP NOP kind len + 2 blocks.
        assert_eq!(repr.options.emitted_sack_count(), 2);
        assert_eq!(repr.header_len(), MAX_HEADER_LEN);
        let mut buf = [0u8; 60];
        repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]));
        let parsed =
            TcpRepr::parse(&TcpPacket::new_checked(&buf[..]).unwrap(), &PH, false).unwrap();
        assert_eq!(parsed.options.sack_blocks(), &repr.options.sack[..2]);

        // Alone, four blocks fit (RFC 2018 §3); a bogus count above 4 is clamped.
        let only_sack = TcpOptions {
            sack_count: 200,
            ..repr.options
        };
        let only_sack = TcpOptions {
            mss: None,
            window_scale: None,
            sack_permitted: false,
            timestamps: None,
            ..only_sack
        };
        assert_eq!(only_sack.emitted_sack_count(), 4);
        assert_eq!(only_sack.emitted_len(), 36);
    }

    #[test]
    fn new_checked_rejects_bad_lengths() {
        let syn = linux_syn();
        assert_eq!(
            TcpPacket::new_checked(&syn[..19]).unwrap_err(),
            Error::Truncated
        );
        // Data offset says 40 bytes, buffer holds 39.
        assert_eq!(
            TcpPacket::new_checked(&syn[..39]).unwrap_err(),
            Error::Truncated
        );
        let mut low = syn.clone();
        low[12] = 0x40; // data offset 4
        assert_eq!(
            TcpPacket::new_checked(&low[..]).unwrap_err(),
            Error::BadLength
        );
        // An unchecked view with a bad offset is still caught by parse, never a panic.
        let view = TcpPacket::new_unchecked(&low[..]);
        assert_eq!(TcpRepr::parse(&view, &PH, false), Err(Error::BadLength));
        assert_eq!(view.options(), &[] as &[u8]);
    }

    #[test]
    fn parse_rejects_port_zero_and_bad_checksum() {
        let mut syn = linux_syn();
        let packet = TcpPacket::new_checked(&syn[..]).unwrap();
        let other = PseudoHeader::new(DST, SRC);
        // Swapping the addresses keeps the one's-complement sum; change one instead.
        let wrong = PseudoHeader::new(Ipv4Addr::new(198, 18, 0, 3), DST);
        assert!(packet.verify_checksum(&other));
        assert_eq!(
            TcpRepr::parse(&packet, &wrong, true),
            Err(Error::BadChecksum)
        );
        assert!(TcpRepr::parse(&packet, &wrong, false).is_ok());

        syn[2] = 0;
        syn[3] = 0;
        let mut packet = TcpPacket::new_checked(&mut syn[..]).unwrap();
        packet.fill_checksum(&PH);
        let packet = TcpPacket::new_checked(&syn[..]).unwrap();
        assert_eq!(TcpRepr::parse(&packet, &PH, true), Err(Error::Malformed));
    }

    fn options_of(bytes: &[u8]) -> Vec<Result<TcpOption<'_>>> {
        TcpOptionIter::new(bytes).collect()
    }

    #[test]
    fn option_iterator_edge_cases() {
        // Empty, NOP-only, and EOL followed by garbage all give nothing.
        assert!(options_of(&[]).is_empty());
        assert!(options_of(&[1, 1, 1]).is_empty());
        assert!(options_of(&[0, 2, 0, 0xff]).is_empty());
        // Length 0 and 1 would loop forever or go backwards: BadLength, then the end.
        assert_eq!(options_of(&[30, 0, 1, 1]), vec![Err(Error::BadLength)]);
        assert_eq!(options_of(&[30, 1]), vec![Err(Error::BadLength)]);
        // A kind byte with no length byte, and a length running past the end.
        assert_eq!(options_of(&[1, 2]), vec![Err(Error::BadLength)]);
        assert_eq!(options_of(&[8, 10, 0, 0]), vec![Err(Error::BadLength)]);
        // Unknown kinds are skipped by their length (RFC 9293 §3.2).
        assert_eq!(
            options_of(&[253, 4, 0xab, 0xcd, 3, 3, 9]),
            vec![
                Ok(TcpOption::Unknown {
                    kind: 253,
                    data: &[0xab, 0xcd]
                }),
                Ok(TcpOption::WindowScale(9)),
            ]
        );
        // Known kinds with the wrong length.
        assert_eq!(options_of(&[2, 3, 5]), vec![Err(Error::BadLength)]);
        assert_eq!(options_of(&[4, 3, 0]), vec![Err(Error::BadLength)]);
        assert_eq!(options_of(&[5, 2]), vec![Err(Error::BadLength)]);
        assert_eq!(
            options_of(&[5, 9, 0, 0, 0, 0, 0, 0, 0]),
            vec![Err(Error::BadLength)]
        );
        let mut five = vec![5u8, 42];
        five.resize(42, 0);
        assert_eq!(options_of(&five), vec![Err(Error::BadLength)]);
        // A good SACK option.
        let sack = [5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        let mut blocks = [SackBlock::default(); 4];
        blocks[0] = SackBlock { left: 1, right: 2 };
        assert_eq!(
            options_of(&sack),
            vec![Ok(TcpOption::Sack { blocks, count: 1 })]
        );
        assert_eq!(
            TcpOptions::parse(&[2, 4, 0x05, 0xdc, 2, 4, 0x02, 0x18])
                .unwrap()
                .mss,
            Some(536),
            "the last of a repeated option wins"
        );
    }

    /// `emit_summed` writes what `emit` writes, and its sum is the checksum of those bytes,
    /// for the timestamps-only shape it takes straight (over the edges of every field) and for
    /// the shapes it hands to `emit`.
    #[test]
    fn emit_summed_matches_emit_and_checksum() {
        let edges32 = [
            0u32,
            1,
            0xffff,
            0x1_0000,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_fffe,
            u32::MAX,
        ];
        let edges16 = [1u16, 0xff, 0x8000, u16::MAX];
        let mut shapes = Vec::new();
        for (i, &a) in edges32.iter().enumerate() {
            let b = edges32[(i * 5 + 3) % edges32.len()];
            for (j, &p) in edges16.iter().enumerate() {
                let q = edges16[(j + i) % edges16.len()];
                let mut r = TcpRepr {
                    src_port: p,
                    dst_port: q,
                    seq: a,
                    ack: b,
                    flags: TcpFlags(
                        TcpFlags::ACK | (i as u8).wrapping_mul(37).wrapping_add(j as u8),
                    ),
                    window: q.wrapping_mul(3),
                    urgent: if i % 3 == 0 { p } else { 0 },
                    options: TcpOptions {
                        timestamps: Some(Timestamps {
                            tsval: b.rotate_left(j as u32 * 7),
                            tsecr: a ^ 0xdead_beef,
                        }),
                        ..TcpOptions::default()
                    },
                };
                shapes.push(r);
                r.options.sack_count = 1;
                r.options.sack[0] = SackBlock { left: a, right: b };
                shapes.push(r);
                r.options.sack_count = 0;
                r.options.timestamps = None;
                shapes.push(r);
            }
        }
        shapes.push(syn_repr());
        for r in shapes {
            let n = r.header_len();
            let mut want = [0u8; MAX_HEADER_LEN];
            r.emit(&mut TcpPacket::new_unchecked(&mut want[..n]));
            let mut got = [0x5au8; MAX_HEADER_LEN];
            let sum = r.emit_summed(&mut got[..n]);
            assert_eq!(got[..n], want[..n], "{r:?}");
            assert_eq!(
                sum.is_some(),
                r.options.timestamps_only().is_some(),
                "{r:?}"
            );
            if let Some(sum) = sum {
                assert_eq!(n, 32);
                assert_eq!(sum, mem::checksum(&want[..n]), "{r:?}");
            }
        }
    }

    #[test]
    fn aligned_timestamps_fast_path_matches_general_parser() {
        let bytes = [1, 1, 8, 10, 0, 0, 0, 7, 0xff, 0, 0, 1];
        let fast = TcpOptions::parse(&bytes).unwrap();
        let ts = Timestamps {
            tsval: 7,
            tsecr: 0xff00_0001,
        };
        assert_eq!(fast.timestamps, Some(ts));
        assert_eq!(options_of(&bytes), vec![Ok(TcpOption::Timestamps(ts))]);
        // Longer areas with the same prefix take the general path.
        let mut longer = bytes.to_vec();
        longer.extend_from_slice(&[1, 3, 3, 5]);
        let general = TcpOptions::parse(&longer).unwrap();
        assert_eq!(
            (general.timestamps, general.window_scale),
            (Some(ts), Some(5))
        );
    }

    #[test]
    fn emit_variants_agree() {
        let repr = syn_repr();
        let payload: Vec<u8> = (0..=254u8).collect();
        let mut whole = vec![0u8; repr.buffer_len(payload.len())];
        repr.emit_with_checksum(&mut whole, &payload, &PH).unwrap();
        let mut header = vec![0u8; repr.header_len()];
        let n = repr
            .emit_with_payload_sum(&mut header, payload.len(), mem::checksum(&payload), &PH)
            .unwrap();
        assert_eq!(&header[..], &whole[..n]);
        let packet = TcpPacket::new_checked(&whole[..]).unwrap();
        assert!(packet.verify_checksum(&PH));
        let mut copy = vec![0u8; payload.len()];
        let copied_sum = mem::copy_with_checksum(&mut copy, packet.payload());
        assert!(packet.verify_checksum_with_payload_sum(&PH, copied_sum));
        assert!(!packet.verify_checksum_with_payload_sum(&PH, copied_sum ^ 1));
        // Too small a buffer is an error, not a panic.
        assert_eq!(
            repr.emit_with_checksum(&mut whole[..50], &payload, &PH),
            Err(Error::Truncated)
        );
        assert_eq!(
            repr.emit_with_payload_sum(&mut header[..39], 0, 0, &PH),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn setters_round_trip_and_reserved_bits_are_cleared() {
        let mut buf = [0xffu8; 24];
        let mut p = TcpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_seq_number(3);
        p.set_ack_number(4);
        p.set_header_len(24);
        p.set_flags(TcpFlags(TcpFlags::FIN | TcpFlags::ACK));
        p.set_window_len(5);
        p.set_checksum(6);
        p.set_urgent_at(7);
        p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        let p = TcpPacket::new_checked(p.into_inner()).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()),
            (1, 2, 3, 4)
        );
        assert_eq!(
            (p.header_len(), p.window_len(), p.checksum(), p.urgent_at()),
            (24, 5, 6, 7)
        );
        assert_eq!(p.flags(), TcpFlags(TcpFlags::FIN | TcpFlags::ACK));
        assert_eq!(buf[12], 0x60);
        assert_eq!(TcpRepr::default().segment_len(10), 10);
        let synfin = TcpRepr {
            flags: TcpFlags(TcpFlags::SYN | TcpFlags::FIN),
            ..TcpRepr::default()
        };
        assert_eq!(synfin.segment_len(10), 12);
    }
}
