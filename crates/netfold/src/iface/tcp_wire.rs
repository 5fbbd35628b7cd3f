//! TCP header parse/emit for the stack's ingress and egress, with the pseudo-header checksum.
//!
//! This is a private stand-in: `wire::tcp` (owned by the wire work) will provide the public
//! `TcpPacket` view with the same semantics; when it lands these two functions become thin
//! wrappers over it. Kept small and panic-free on any input.

use crate::wire::ipv4::{checksum_combine, pseudo_header_sum};
use crate::wire::tcp::{SackBlock, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use crate::wire::{Error, IpProtocol, Ipv4Addr, Result};

/// Fixed TCP header length (RFC 9293 §3.1).
pub const HEADER_LEN: usize = 20;
/// Option space: data offset is at most 15 words.
const MAX_OPTIONS: usize = 40;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses the TCP header of `seg` (header + payload, bounded by the IP length). Returns the
/// header and its length; the payload is `seg[len..]`. Ports 0 are `Malformed`; with `verify`,
/// a checksum mismatch is `BadChecksum` (RFC 9293 §3.1: the sum covers the pseudo-header, the
/// header and the data).
pub fn parse(seg: &[u8], src: Ipv4Addr, dst: Ipv4Addr, verify: bool) -> Result<(TcpRepr, usize)> {
    if seg.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    let hlen = usize::from(seg[12] >> 4) * 4;
    if hlen < HEADER_LEN {
        return Err(Error::BadLength);
    }
    if hlen > seg.len() {
        return Err(Error::Truncated);
    }
    if verify {
        let len = u32::try_from(seg.len()).map_err(|_| Error::BadLength)?;
        let ph = pseudo_header_sum(src, dst, IpProtocol::Tcp, len);
        if checksum_combine(ph, crate::mem::checksum(seg)) != 0xffff {
            return Err(Error::BadChecksum);
        }
    }
    let src_port = be16(seg, 0);
    let dst_port = be16(seg, 2);
    if src_port == 0 || dst_port == 0 {
        return Err(Error::Malformed);
    }
    let options = parse_options(&seg[HEADER_LEN..hlen])?;
    Ok((
        TcpRepr {
            src_port,
            dst_port,
            seq: be32(seg, 4),
            ack: be32(seg, 8),
            flags: TcpFlags(seg[13]),
            window: be16(seg, 14),
            urgent: be16(seg, 18),
            options,
        },
        hlen,
    ))
}

/// Option TLVs (RFC 9293 §3.2): EOL ends the list, NOP is one byte, everything else is
/// kind/length/value with length >= 2. Unknown kinds are skipped; a length that runs past the
/// header is `BadLength`. Known kinds with a wrong length are ignored, as Linux does.
fn parse_options(mut o: &[u8]) -> Result<TcpOptions> {
    let mut opts = TcpOptions::default();
    while let Some(&kind) = o.first() {
        match kind {
            0 => break,
            1 => {
                o = &o[1..];
                continue;
            }
            _ => {}
        }
        let len = usize::from(*o.get(1).ok_or(Error::BadLength)?);
        if len < 2 || len > o.len() {
            return Err(Error::BadLength);
        }
        let v = &o[2..len];
        match (kind, v.len()) {
            (2, 2) => opts.mss = Some(be16(v, 0)),
            (3, 1) => opts.window_scale = Some(v[0]),
            (4, 0) => opts.sack_permitted = true,
            (5, n) if n % 8 == 0 && (8..=32).contains(&n) => {
                for (i, b) in v.chunks_exact(8).enumerate() {
                    opts.sack[i] = SackBlock {
                        left: be32(b, 0),
                        right: be32(b, 4),
                    };
                }
                opts.sack_count = (n / 8) as u8;
            }
            (8, 8) => {
                opts.timestamps = Some(Timestamps {
                    tsval: be32(v, 0),
                    tsecr: be32(v, 4),
                })
            }
            _ => {}
        }
        o = &o[len..];
    }
    Ok(opts)
}

/// How many SACK blocks fit beside the other options (each block 8 bytes plus NOP NOP kind len).
fn sack_fit(o: &TcpOptions) -> usize {
    let fixed = fixed_options_len(o);
    let room = MAX_OPTIONS.saturating_sub(fixed + 4) / 8;
    usize::from(o.sack_count.min(4)).min(room)
}

fn fixed_options_len(o: &TcpOptions) -> usize {
    let mut n = 0;
    if o.mss.is_some() {
        n += 4;
    }
    if o.timestamps.is_some() || o.sack_permitted {
        // SACK-permitted shares a word with TS (or NOP NOP pads it), TS takes 12 with padding.
        n += if o.timestamps.is_some() { 12 } else { 4 };
    }
    if o.window_scale.is_some() {
        n += 4;
    }
    n
}

/// Header length `emit` will write (20 + options, a multiple of 4, at most 60).
pub fn header_len(r: &TcpRepr) -> usize {
    let sack = sack_fit(&r.options);
    let sack_len = if sack > 0 { 4 + 8 * sack } else { 0 };
    HEADER_LEN + fixed_options_len(&r.options) + sack_len
}

/// Writes the header (checksum zero) into the front of `b`; returns its length. Option order
/// follows Linux: MSS, SACK-permitted + TS (or NOP NOP TS), NOP WS, NOP NOP SACK.
pub fn emit(r: &TcpRepr, b: &mut [u8]) -> Result<usize> {
    let hlen = header_len(r);
    let b = b.get_mut(..hlen).ok_or(Error::Truncated)?;
    b[0..2].copy_from_slice(&r.src_port.to_be_bytes());
    b[2..4].copy_from_slice(&r.dst_port.to_be_bytes());
    b[4..8].copy_from_slice(&r.seq.to_be_bytes());
    b[8..12].copy_from_slice(&r.ack.to_be_bytes());
    b[12] = ((hlen / 4) as u8) << 4;
    b[13] = r.flags.0;
    b[14..16].copy_from_slice(&r.window.to_be_bytes());
    b[16..18].copy_from_slice(&[0, 0]);
    b[18..20].copy_from_slice(&r.urgent.to_be_bytes());
    let o = &r.options;
    let mut at = HEADER_LEN;
    let mut put = |bytes: &[u8]| {
        b[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    if let Some(mss) = o.mss {
        let m = mss.to_be_bytes();
        put(&[2, 4, m[0], m[1]]);
    }
    match (o.sack_permitted, o.timestamps) {
        (true, Some(_)) => put(&[4, 2]),
        (false, Some(_)) => put(&[1, 1]),
        (true, None) => put(&[1, 1, 4, 2]),
        (false, None) => {}
    }
    if let Some(ts) = o.timestamps {
        put(&[8, 10]);
        put(&ts.tsval.to_be_bytes());
        put(&ts.tsecr.to_be_bytes());
    }
    if let Some(ws) = o.window_scale {
        put(&[1, 3, 3, ws]);
    }
    let n = sack_fit(o);
    if n > 0 {
        put(&[1, 1, 5, (2 + 8 * n) as u8]);
        for s in &o.sack[..n] {
            put(&s.left.to_be_bytes());
            put(&s.right.to_be_bytes());
        }
    }
    Ok(hlen)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        emit(&r, &mut buf).unwrap();
        buf[hl..].copy_from_slice(b"abc");
        let (a, b) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        let ph = pseudo_header_sum(a, b, IpProtocol::Tcp, buf.len() as u32);
        let c = !checksum_combine(ph, crate::mem::checksum(&buf));
        buf[16..18].copy_from_slice(&c.to_be_bytes());
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
        emit(&r, &mut buf).unwrap();
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
