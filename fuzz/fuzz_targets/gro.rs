//! GRO through the Stack API: two stacks, one with GRO on and one with it off, each accept
//! one connection through the same handshake; then the same batches of segments (offsets,
//! lengths, flags, timestamps, batch boundaries chosen by the fuzzer; the bytes are the
//! sender's true bytes for the sequence numbers) go to both. After every batch the two
//! applications must have read the same bytes, and those bytes must be a prefix of the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::iface::{Stack, StackConfig};
use netfold::tcp::Handle;
use netfold::time::{Duration, Instant};
use netfold::wire::tcp::{TcpFlags, TcpOptions, TcpRepr, Timestamps};
use netfold_fuzz::{
    arp_request_from_b, parse_tcp, pattern, tcp_config, tcp_frame, Input, Wire, IP_A, IP_B, MAC_A,
};
use std::net::SocketAddrV4;

const PEER_PORT: u16 = 40000;
const PEER_ISN: u32 = 0xfff0_0000; // wraps within the first MiB

struct Side {
    stack: Stack,
    dev: Wire,
    conn: Handle,
    /// A's SND.NXT after the handshake (its ISN + 1): what the peer acknowledges.
    snd_nxt: u32,
    got: Vec<u8>,
}

fn side(gro: bool, now: Instant) -> Side {
    let mut stack = Stack::new(StackConfig {
        addr: IP_A,
        mac: MAC_A,
        tcp_secret: netfold::tcp::Secret::fixed_for_tests([7; 16]),
        gro,
        ..StackConfig::default()
    });
    let mut dev = Wire::new();
    let l = stack
        .tcp_mut()
        .listen(SocketAddrV4::new(IP_A, 80), 4, tcp_config())
        .expect("listen");
    let ts = |v| Some(Timestamps { tsval: v, tsecr: 0 });
    let syn = TcpRepr {
        src_port: PEER_PORT,
        dst_port: 80,
        seq: PEER_ISN,
        ack: 0,
        flags: TcpFlags(TcpFlags::SYN),
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: ts(1),
            ..TcpOptions::default()
        },
    };
    dev.inbox.push_back(arp_request_from_b());
    dev.inbox.push_back(tcp_frame(IP_B, IP_A, &syn, &[]));
    stack.poll(now, &mut dev);
    let synack = dev
        .outbox
        .drain(..)
        .filter_map(|f| parse_tcp(&f))
        .find(|(_, _, r, _)| r.flags.syn())
        .expect("SYN-ACK")
        .2;
    let ack = TcpRepr {
        seq: PEER_ISN.wrapping_add(1),
        ack: synack.seq.wrapping_add(1),
        flags: TcpFlags(TcpFlags::ACK),
        window: 512,
        options: TcpOptions {
            timestamps: Some(Timestamps {
                tsval: 2,
                tsecr: synack.options.timestamps.map_or(0, |t| t.tsval),
            }),
            ..TcpOptions::default()
        },
        ..syn
    };
    dev.inbox.push_back(tcp_frame(IP_B, IP_A, &ack, &[]));
    stack.poll(now, &mut dev);
    dev.outbox.clear();
    let conn = stack.tcp_mut().accept(l).expect("accepted");
    Side {
        stack,
        dev,
        conn,
        snd_nxt: synack.seq.wrapping_add(1),
        got: Vec::new(),
    }
}

fn read(s: &mut Side) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = s.stack.tcp_mut().recv(s.conn, &mut buf) {
        if n == 0 {
            break;
        }
        s.got.extend_from_slice(&buf[..n]);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut now = Instant::from_millis(1);
    let mut on = side(true, now);
    let mut off = side(false, now);
    let mut inp = Input::new(data);
    let mut tsval = 10u32;
    let mut batches = 0;
    while !inp.is_empty() && batches < 64 {
        batches += 1;
        let n = usize::from(inp.u8() % 48) + 1;
        let mut frames = Vec::with_capacity(n);
        for _ in 0..n {
            let sel = inp.u8();
            let off_bytes = u64::from(inp.u16()) * 8 + u64::from(inp.u8());
            let len = usize::from(inp.u16() % 1449);
            let mut flags = TcpFlags::ACK;
            if sel & 1 != 0 {
                flags |= TcpFlags::PSH;
            }
            if sel & 2 != 0 {
                flags |= TcpFlags::FIN;
            }
            if sel & 4 != 0 {
                flags |= TcpFlags::URG;
            }
            if sel & 8 != 0 {
                tsval = tsval.wrapping_add(u32::from(inp.u8()));
            }
            if sel & 16 != 0 {
                tsval = tsval.wrapping_sub(u32::from(inp.u8()));
            }
            let payload: Vec<u8> = (off_bytes..off_bytes + len as u64).map(pattern).collect();
            let repr = TcpRepr {
                src_port: PEER_PORT,
                dst_port: 80,
                seq: PEER_ISN.wrapping_add(1).wrapping_add(off_bytes as u32),
                ack: 0,
                flags: TcpFlags(flags),
                window: inp.u16(),
                urgent: 0,
                options: TcpOptions {
                    timestamps: (sel & 32 == 0).then_some(Timestamps { tsval, tsecr: 0 }),
                    ..TcpOptions::default()
                },
            };
            frames.push((repr, payload));
        }
        for s in [&mut on, &mut off] {
            for (r, payload) in &frames {
                let mut r = *r;
                r.ack = s.snd_nxt;
                s.dev.inbox.push_back(tcp_frame(IP_B, IP_A, &r, payload));
            }
            s.stack.poll(now, &mut s.dev);
            s.dev.outbox.clear();
            read(s);
        }
        assert_eq!(
            on.got.len(),
            off.got.len(),
            "GRO on/off delivered different amounts"
        );
        assert!(on.got == off.got, "GRO on/off delivered different bytes");
        for (i, &b) in on.got.iter().enumerate() {
            assert_eq!(b, pattern(i as u64), "byte {i} is not the sender's");
        }
        now += Duration::from_millis(u64::from(inp.u8()));
    }
});
