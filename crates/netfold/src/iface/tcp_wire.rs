//! TCP header parse/emit for the stack's ingress and egress: thin wrappers over `wire::tcp`
//! that give the stack the two shapes it needs (parse from an IP payload; emit a header in
//! front of a payload whose sum is already known from the fused copy).

use crate::wire::tcp::{PseudoHeader, TcpPacket, TcpRepr};
use crate::wire::{Ipv4Addr, Result};

/// Parses the TCP header of `seg` (header + payload, bounded by the IP length). Returns the
/// header and its length; the payload is `seg[len..]`. Ports 0 are `Malformed`; with `verify`,
/// a checksum mismatch is `BadChecksum` (RFC 9293 §3.1: the sum covers the pseudo-header, the
/// header and the data).
pub fn parse(seg: &[u8], src: Ipv4Addr, dst: Ipv4Addr, verify: bool) -> Result<(TcpRepr, usize)> {
    let packet = TcpPacket::new_checked(seg)?;
    let repr = TcpRepr::parse(&packet, &PseudoHeader { src, dst }, verify)?;
    Ok((repr, packet.header_len()))
}

/// Header length `emit` will write (20 + options, a multiple of 4, at most 60).
pub fn header_len(r: &TcpRepr) -> usize {
    r.header_len()
}

/// Writes the header into the front of `b` (exactly `header_len(r)` bytes are needed) and
/// returns its length. With `csum = Some((ph, payload_len, payload_sum))` the checksum is
/// filled from the payload's already-computed sum; with `None` it is left 0 (offload).
pub fn emit(r: &TcpRepr, b: &mut [u8], csum: Option<(PseudoHeader, usize, u16)>) -> Result<usize> {
    match csum {
        Some((ph, len, sum)) => r.emit_with_payload_sum(b, len, sum, &ph),
        None => {
            let h = r.header_len();
            let hdr = b.get_mut(..h).ok_or(crate::wire::Error::Truncated)?;
            r.emit(&mut TcpPacket::new_unchecked(hdr));
            Ok(h)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tcp::{SackBlock, TcpFlags, TcpOptions, Timestamps};
    use crate::wire::Error;

    fn full() -> TcpRepr {
        let mut options = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some(Timestamps { tsval: 1, tsecr: 2 }),
            ..TcpOptions::default()
        };
        options.sack_count = 1;
        options.sack[0] = SackBlock {
            left: 10,
            right: 20,
        };
        TcpRepr {
            src_port: 1000,
            dst_port: 80,
            seq: 7,
            ack: 9,
            flags: TcpFlags(TcpFlags::ACK | TcpFlags::PSH),
            window: 512,
            urgent: 0,
            options,
        }
    }

    #[test]
    fn round_trip_with_options_and_checksum() {
        let r = full();
        let hl = header_len(&r);
        assert_eq!(hl % 4, 0);
        assert!(hl <= 60);
        let mut buf = vec![0u8; hl + 3];
        buf[hl..].copy_from_slice(b"abc");
        let (a, b) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        let sum = crate::mem::checksum(b"abc");
        let ph = PseudoHeader { src: a, dst: b };
        emit(&r, &mut buf, Some((ph, 3, sum))).unwrap();
        let (p, l) = parse(&buf, a, b, true).unwrap();
        assert_eq!(l, hl);
        assert_eq!(p, r);
        buf[hl] ^= 1;
        assert_eq!(parse(&buf, a, b, true), Err(Error::BadChecksum));
    }

    #[test]
    fn too_many_sack_blocks_are_trimmed() {
        let mut r = full();
        r.options.sack_count = 4;
        let hl = header_len(&r);
        assert!(hl <= 60);
        let mut buf = vec![0u8; hl];
        emit(&r, &mut buf, None).unwrap();
        let (p, _) = parse(&buf, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, false).unwrap();
        assert!(p.options.sack_count < 4);
    }

    #[test]
    fn bad_option_length_is_an_error() {
        let mut buf = [0u8; 24];
        buf[0..4].copy_from_slice(&[0, 1, 0, 2]);
        buf[12] = 6 << 4;
        buf[20..22].copy_from_slice(&[2, 9]);
        let e = parse(&buf, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, false);
        assert_eq!(e, Err(Error::BadLength));
    }
}
