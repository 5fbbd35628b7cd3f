//! Property tests for the TCP and UDP wire formats: no input makes a parser or accessor panic,
//! and `parse(emit(x)) == x` for every valid representation (checked against smoltcp too).

use netfold::mem;
use netfold::wire::tcp::{
    PseudoHeader, SackBlock, TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr, Timestamps,
    MAX_HEADER_LEN,
};
use netfold::wire::udp::{UdpPacket, UdpRepr};
use netfold::wire::{Error, Ipv4Addr};
use proptest::prelude::*;

fn pseudo_header() -> impl Strategy<Value = PseudoHeader> {
    (any::<u32>(), any::<u32>())
        .prop_map(|(s, d)| PseudoHeader::new(Ipv4Addr::from(s), Ipv4Addr::from(d)))
}

/// Option bytes made of plausible pieces (known kinds with right and wrong lengths, NOP, EOL,
/// unknown kinds), so the iterator's edge cases are reached far more often than by noise.
fn option_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(vec![0u8]),
        Just(vec![1u8]),
        (
            prop::sample::select(vec![2u8, 3, 4, 5, 8, 30, 254]),
            0u8..44,
            prop::collection::vec(any::<u8>(), 0..42)
        )
            .prop_map(|(k, l, mut d)| {
                d.truncate(usize::from(l.saturating_sub(2)));
                let mut v = vec![k, l];
                v.extend(d);
                v
            }),
        prop::collection::vec(any::<u8>(), 1..4),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|pieces| {
        let mut v: Vec<u8> = pieces.concat();
        v.truncate(40);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    })
}

/// A TCP segment with a random fixed header whose data offset matches `options`, optionally
/// followed by payload and then optionally cut short.
fn tcp_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(any::<u8>(), 20),
        option_bytes(),
        prop::collection::vec(any::<u8>(), 0..16),
        any::<bool>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(mut header, options, payload, cut, at)| {
            header[12] = (((20 + options.len()) / 4) as u8) << 4 | (header[12] & 0x0f);
            header.extend(options);
            header.extend(payload);
            if cut {
                let n = at.index(header.len() + 1);
                header.truncate(n);
            }
            header
        })
}

/// Touches every accessor of a TCP view and parses it every way; must never panic.
fn exercise_tcp(bytes: &[u8], ph: &PseudoHeader) {
    let unchecked = TcpPacket::new_unchecked(bytes);
    let _ = TcpRepr::parse(&unchecked, ph, true);
    let _ = TcpRepr::parse(&unchecked, ph, false);
    if let Ok(p) = TcpPacket::new_checked(bytes) {
        let _ = (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number());
        let _ = (p.flags(), p.window_len(), p.checksum(), p.urgent_at());
        assert!(p.header_len() >= 20 && p.header_len() <= 60);
        assert_eq!(p.options().len() + 20, p.header_len());
        assert_eq!(p.header_len() + p.payload().len(), bytes.len());
        assert!(p.segment_len() <= p.payload().len() + 2);
        let _ = p.verify_checksum(ph);
        // The iterator ends, and after an error yields nothing more.
        let items: Vec<_> = p.option_iter().collect();
        assert!(items.len() <= 40);
        if let Some(pos) = items.iter().position(|i| i.is_err()) {
            assert_eq!(pos, items.len() - 1);
        }
        for item in items.iter().flatten() {
            if let TcpOption::Sack { count, .. } = item {
                assert!((1..=4).contains(count));
            }
        }
        match TcpRepr::parse(&p, ph, false) {
            Ok(r) => {
                assert!(r.src_port != 0 && r.dst_port != 0);
                assert!(r.options.sack_count <= 4);
            }
            Err(e) => assert!(matches!(e, Error::Malformed | Error::BadLength)),
        }
        let _ = p.into_payload();
    }
}

/// A valid TcpRepr: nonzero ports, and only as many SACK blocks as fit beside the other options;
/// unused SACK slots zero (parse leaves them zero).
fn tcp_repr() -> impl Strategy<Value = TcpRepr> {
    (
        (
            1u16..,
            1u16..,
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
        ),
        (
            prop::option::of(any::<u16>()),
            prop::option::of(any::<u8>()),
            any::<bool>(),
            prop::option::of((any::<u32>(), any::<u32>())),
            prop::collection::vec((any::<u32>(), any::<u32>()), 0..=4),
        ),
    )
        .prop_map(
            |((sp, dp, seq, ack, flags, window, urgent), (mss, ws, sp_ok, ts, sacks))| {
                let mut options = TcpOptions {
                    mss,
                    window_scale: ws,
                    sack_permitted: sp_ok,
                    timestamps: ts.map(|(tsval, tsecr)| Timestamps { tsval, tsecr }),
                    ..TcpOptions::default()
                };
                for (slot, (left, right)) in options.sack.iter_mut().zip(sacks.iter()) {
                    *slot = SackBlock {
                        left: *left,
                        right: *right,
                    };
                }
                options.sack_count = sacks.len() as u8;
                let fit = options.emitted_sack_count();
                for slot in &mut options.sack[fit..] {
                    *slot = SackBlock::default();
                }
                options.sack_count = fit as u8;
                TcpRepr {
                    src_port: sp,
                    dst_port: dp,
                    seq,
                    ack,
                    flags: TcpFlags(flags),
                    window,
                    urgent,
                    options,
                }
            },
        )
}

proptest! {
    #[test]
    fn tcp_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..80), ph in pseudo_header()) {
        exercise_tcp(&bytes, &ph);
    }

    #[test]
    fn tcp_structured_bytes_never_panic(bytes in tcp_like_bytes(), ph in pseudo_header()) {
        exercise_tcp(&bytes, &ph);
    }

    /// Whatever parses re-emits to the same Repr: our Linux layout may be longer than the
    /// sender's (padding), so only SACK blocks can be lost, from the end.
    #[test]
    fn tcp_parsed_bytes_re_emit_identically(bytes in tcp_like_bytes(), ph in pseudo_header()) {
        let Ok(packet) = TcpPacket::new_checked(&bytes[..]) else { return Ok(()) };
        let Ok(repr) = TcpRepr::parse(&packet, &ph, false) else { return Ok(()) };
        let mut buf = vec![0u8; repr.buffer_len(packet.payload().len())];
        repr.emit_with_checksum(&mut buf, packet.payload(), &ph).unwrap();
        let reparsed = TcpRepr::parse(&TcpPacket::new_checked(&buf[..]).unwrap(), &ph, true).unwrap();
        let kept = repr.options.emitted_sack_count();
        let mut expected = repr;
        expected.options.sack_count = kept as u8;
        for slot in &mut expected.options.sack[kept..] {
            *slot = SackBlock::default();
        }
        prop_assert_eq!(reparsed, expected);
    }

    #[test]
    fn tcp_repr_round_trips(
        repr in tcp_repr(),
        payload in prop::collection::vec(any::<u8>(), 0..64),
        ph in pseudo_header(),
    ) {
        let header_len = repr.header_len();
        prop_assert!(header_len % 4 == 0 && (20..=MAX_HEADER_LEN).contains(&header_len));
        let mut buf = vec![0u8; repr.buffer_len(payload.len())];
        prop_assert_eq!(repr.emit_with_checksum(&mut buf, &payload, &ph), Ok(buf.len()));
        let packet = TcpPacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(packet.header_len(), header_len);
        prop_assert!(packet.verify_checksum(&ph));
        prop_assert!(packet.verify_checksum_with_payload_sum(&ph, mem::checksum(&payload)));
        prop_assert_eq!(TcpRepr::parse(&packet, &ph, true), Ok(repr));
        prop_assert_eq!(packet.payload(), &payload[..]);
        prop_assert_eq!(packet.segment_len(), repr.segment_len(payload.len()));

        // The header-only path with a separately summed payload gives the same bytes.
        let mut header = vec![0u8; header_len];
        let n = repr
            .emit_with_payload_sum(&mut header, payload.len(), mem::checksum(&payload), &ph)
            .unwrap();
        prop_assert_eq!(&header[..n], &buf[..header_len]);
    }

    #[test]
    fn tcp_any_bit_flip_is_detected(
        repr in tcp_repr(),
        payload in prop::collection::vec(any::<u8>(), 0..32),
        ph in pseudo_header(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut buf = vec![0u8; repr.buffer_len(payload.len())];
        repr.emit_with_checksum(&mut buf, &payload, &ph).unwrap();
        let i = at.index(buf.len());
        buf[i] ^= 1 << bit;
        // A flip in the data offset may make the view invalid; otherwise the sum must catch it.
        if let Ok(p) = TcpPacket::new_checked(&buf[..]) {
            prop_assert!(!p.verify_checksum(&ph));
            prop_assert_eq!(TcpRepr::parse(&p, &ph, true), Err(Error::BadChecksum));
        }
    }

    #[test]
    fn tcp_any_options_emit_within_limits(
        sack_count in any::<u8>(),
        sacks in prop::array::uniform4((any::<u32>(), any::<u32>())),
        mss in prop::option::of(any::<u16>()),
        ws in prop::option::of(any::<u8>()),
        sp_ok in any::<bool>(),
        ts in prop::option::of((any::<u32>(), any::<u32>())),
    ) {
        // Even an inconsistent sack_count (> 4, or too many to fit) emits without panicking.
        let options = TcpOptions {
            mss,
            window_scale: ws,
            sack_permitted: sp_ok,
            sack: sacks.map(|(left, right)| SackBlock { left, right }),
            sack_count,
            timestamps: ts.map(|(tsval, tsecr)| Timestamps { tsval, tsecr }),
            fast_open: None,
        };
        let repr = TcpRepr { src_port: 1, dst_port: 2, options, ..TcpRepr::default() };
        prop_assert!(repr.header_len() <= MAX_HEADER_LEN);
        let mut buf = [0u8; MAX_HEADER_LEN];
        repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]));
        let parsed = TcpRepr::parse(&TcpPacket::new_checked(&buf[..repr.header_len()]).unwrap(), &PseudoHeader::new(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED), false).unwrap();
        let kept = options.emitted_sack_count();
        prop_assert_eq!(parsed.options.sack_blocks(), &options.sack_blocks()[..kept]);
        prop_assert_eq!((parsed.options.mss, parsed.options.window_scale), (mss, ws));
        prop_assert_eq!(parsed.options.timestamps, options.timestamps);
        prop_assert_eq!(parsed.options.sack_permitted, sp_ok);
    }

    /// Differential check: smoltcp reads our segments the same way (within what it models:
    /// one control flag, at most 3 SACK blocks, window scale clamped to 14).
    #[test]
    fn smoltcp_agrees_with_our_emit(
        repr in tcp_repr(),
        control in prop::sample::select(vec![0u8, TcpFlags::SYN, TcpFlags::FIN, TcpFlags::RST, TcpFlags::PSH]),
        ack in any::<bool>(),
        payload in prop::collection::vec(any::<u8>(), 0..16),
        ph in pseudo_header(),
    ) {
        use smoltcp::phy::ChecksumCapabilities;
        use smoltcp::wire as s;
        let mut repr = repr;
        repr.flags = TcpFlags(control | if ack { TcpFlags::ACK } else { 0 });
        repr.options.sack_count = repr.options.sack_count.min(3);
        repr.options.sack[3] = SackBlock::default();
        let mut buf = vec![0u8; repr.buffer_len(payload.len())];
        repr.emit_with_checksum(&mut buf, &payload, &ph).unwrap();
        let v4 = |a: std::net::IpAddr| match a {
            std::net::IpAddr::V4(v) => v,
            std::net::IpAddr::V6(_) => unreachable!("IPv4 pseudo-headers only"),
        };
        let (sa, da) = (s::IpAddress::Ipv4(v4(ph.src)), s::IpAddress::Ipv4(v4(ph.dst)));
        let sp = s::TcpPacket::new_checked(&buf[..]).unwrap();
        let sr = s::TcpRepr::parse(&sp, &sa, &da, &ChecksumCapabilities::default()).unwrap();
        prop_assert_eq!((sr.src_port, sr.dst_port), (repr.src_port, repr.dst_port));
        prop_assert_eq!(sr.seq_number.0 as u32, repr.seq);
        prop_assert_eq!(sr.ack_number.map(|a| a.0 as u32), if ack { Some(repr.ack) } else { None });
        prop_assert_eq!(sr.window_len, repr.window);
        prop_assert_eq!(sr.max_seg_size, repr.options.mss);
        prop_assert_eq!(sr.window_scale, repr.options.window_scale.map(|w| w.min(14)));
        prop_assert_eq!(sr.sack_permitted, repr.options.sack_permitted);
        prop_assert_eq!(sr.timestamp.map(|t| (t.tsval, t.tsecr)), repr.options.timestamps.map(|t| (t.tsval, t.tsecr)));
        let ours: Vec<_> = repr.options.sack_blocks().iter().map(|b| Some((b.left, b.right))).collect();
        prop_assert_eq!(&sr.sack_ranges[..ours.len()], &ours[..]);
        prop_assert_eq!(sr.payload, &payload[..]);
    }

    #[test]
    fn udp_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..40), ph in pseudo_header()) {
        let unchecked = UdpPacket::new_unchecked(&bytes[..]);
        let _ = UdpRepr::parse(&unchecked, &ph, true);
        if let Ok(p) = UdpPacket::new_checked(&bytes[..]) {
            let _ = (p.src_port(), p.dst_port(), p.checksum(), p.verify_checksum(&ph));
            prop_assert_eq!(p.payload().len() + 8, usize::from(p.len()));
            match UdpRepr::parse(&p, &ph, true) {
                Ok(r) => prop_assert!(r.dst_port != 0),
                Err(e) => prop_assert!(matches!(e, Error::BadChecksum | Error::Malformed)),
            }
            prop_assert_eq!(p.into_payload().len() + 8, usize::from(p.len()));
        }
    }

    #[test]
    fn udp_repr_round_trips(
        src_port in any::<u16>(),
        dst_port in 1u16..,
        payload in prop::collection::vec(any::<u8>(), 0..64),
        trailer in prop::collection::vec(any::<u8>(), 0..8),
        ph in pseudo_header(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let repr = UdpRepr { src_port, dst_port };
        let mut buf = vec![0u8; repr.buffer_len(payload.len())];
        prop_assert_eq!(repr.emit_with_checksum(&mut buf, &payload, &ph), Ok(buf.len()));
        let len = buf.len();
        buf.extend(&trailer); // padding past the length field is ignored
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        prop_assert!(p.checksum() != 0);
        prop_assert_eq!(UdpRepr::parse(&p, &ph, true), Ok(repr));
        prop_assert!(p.verify_checksum_with_payload_sum(&ph, mem::checksum(&payload)));
        prop_assert_eq!(p.payload(), &payload[..]);

        // Any single-bit flip inside the datagram (not the length field, which changes the
        // bounds) is caught, unless it zeroes the checksum field ("no checksum").
        let i = at.index(len);
        if !(4..6).contains(&i) {
            buf[i] ^= 1 << bit;
            let p = UdpPacket::new_checked(&buf[..]).unwrap();
            if p.checksum() != 0 {
                prop_assert!(!p.verify_checksum(&ph));
            }
        }
    }
}
