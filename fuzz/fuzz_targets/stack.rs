//! The whole stack under hostile input: stack A holds a listener, an established connection
//! with data in flight, a connection in FIN-WAIT and a UDP socket (built deterministically by
//! `Scenario::new`); then the input is a program of operations — raw frames, well-formed TCP
//! segments on any of A's connections (fields chosen by the fuzzer, checksums right), UDP
//! datagrams, time advances, socket calls on both sides, held frames released. After every
//! operation: no panic, memory within the configured bounds, and the bytes A's application
//! read on the established connection are a prefix of what the honest peer B sent. Injected
//! segments on that connection carry B's true bytes for the sequence numbers they claim, so a
//! mix can only come from TCP placing bytes at the wrong offset.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netfold::time::Duration;
use netfold::wire::tcp::{TcpFlags, TcpRepr};
use netfold_fuzz::{
    is_tcp_fragment, parse_tcp, tcp_frame, udp_frame, Input, Scenario, IP_A, IP_B, PORT_LISTEN,
    PORT_UDP,
};
use std::net::SocketAddrV4;

fuzz_target!(|data: &[u8]| {
    let mut s = Scenario::new(true);
    let mut inp = Input::new(data);
    let mut ops = 0;
    while !inp.is_empty() && ops < 256 {
        ops += 1;
        match inp.u8() % 10 {
            0 => {
                // A raw frame, as the fuzzer wrote it. Frames that would reach the established
                // connection with a valid checksum are left to op 1 (they could carry bytes B
                // never sent, which no TCP can tell from B's).
                let len = usize::from(inp.u16() % 1600);
                let f = inp.bytes(len).to_vec();
                if let Some((_, _, r, _)) = parse_tcp(&f) {
                    if r.src_port == s.est_port && r.dst_port == PORT_LISTEN {
                        continue;
                    }
                }
                if is_tcp_fragment(&f) {
                    continue;
                }
                s.da.inbox.push_back(f);
            }
            1 => {
                // A well-formed segment from B's address. Target: 0 = the established
                // connection, 1 = the FIN-WAIT one, 2 = a fresh port to the listener, 3 = any.
                let target = inp.u8() % 4;
                let flags = TcpFlags(inp.u8());
                let mode = inp.u8();
                let (src_port, dst_port) = match target {
                    0 => (s.est_port, PORT_LISTEN),
                    1 => (
                        s.b.tcp().local_addr(s.fin_peer).map_or(1, |a| a.port()),
                        PORT_LISTEN,
                    ),
                    2 => (inp.u16(), PORT_LISTEN),
                    _ => (inp.u16(), inp.u16()),
                };
                // Sequence number: near the stream (offset from B's ISN) or anywhere.
                let off = u64::from(inp.u32() % 200_000);
                let seq = if mode & 1 == 0 {
                    s.b_seq(off)
                } else {
                    inp.u32()
                };
                let ack = if mode & 2 == 0 {
                    s.a_isn
                        .wrapping_add(1)
                        .wrapping_add(u32::from(inp.u16()))
                        .wrapping_sub(1024)
                } else {
                    inp.u32()
                };
                let len = usize::from(inp.u16() % 1461);
                let payload: Vec<u8> = if target == 0 {
                    // B's true bytes at that offset (the stream is only defined up to what B
                    // sent; beyond it a segment carries what B *will* send there).
                    let start = u64::from(seq.wrapping_sub(s.b_seq(0)));
                    let end = start + len as u64;
                    while s.sent < end && s.sent < 1 << 22 {
                        s.b_send(64 * 1024);
                        if s.b.tcp().send_space(s.est_peer).unwrap_or(0) == 0 {
                            break;
                        }
                    }
                    if end > s.sent {
                        Vec::new()
                    } else {
                        (start..end).map(netfold_fuzz::pattern).collect()
                    }
                } else {
                    inp.bytes(len).to_vec()
                };
                let repr = TcpRepr {
                    src_port,
                    dst_port,
                    seq,
                    ack,
                    flags,
                    window: inp.u16(),
                    urgent: inp.u16(),
                    options: inp.options(),
                };
                if repr.header_len() <= 60 {
                    s.da.inbox.push_back(tcp_frame(IP_B, IP_A, &repr, &payload));
                }
            }
            2 => {
                let len = usize::from(inp.u16() % 1472);
                let p = inp.bytes(len).to_vec();
                let src = SocketAddrV4::new(IP_B, inp.u16());
                s.da.inbox
                    .push_back(udp_frame(src, SocketAddrV4::new(IP_A, PORT_UDP), &p));
            }
            3 => {
                // Time passes; honest traffic flows (B's output may be held back).
                let ms = u64::from(inp.u8()) * u64::from(inp.u8() % 16 + 1);
                let hold = inp.u8() & 1 == 1;
                let end = s.now + Duration::from_millis(ms);
                let mut rounds = 0;
                while s.now < end && rounds < 64 {
                    s.exchange(hold);
                    let step =
                        s.a.poll_at(s.now)
                            .map_or(Duration::from_millis(200), |t| t.saturating_since(s.now));
                    s.now += step.max(Duration::from_millis(1));
                    rounds += 1;
                }
                s.exchange(hold);
            }
            4 => {
                let n = usize::from(inp.u16());
                s.b_send(n);
            }
            5 => {
                s.a_recv();
                let mut buf = [0u8; 2048];
                let _ = s.a.tcp_mut().recv(s.fin, &mut buf);
                let _ = s.a.udp_recv_from(s.udp, &mut buf);
                let _ = s.b.tcp_mut().recv(s.est_peer, &mut buf);
            }
            6 => {
                let _ = s.a.tcp_mut().accept(s.listener);
                let n = usize::from(inp.u16());
                let _ = s.a.tcp_mut().send(s.est, &vec![0x33; n]);
            }
            7 => {
                // Release or drop the frames held back.
                if inp.u8() & 1 == 0 {
                    s.da.inbox.extend(s.held.drain(..));
                } else {
                    s.held.clear();
                }
            }
            8 => match inp.u8() % 4 {
                0 => {
                    let _ = s.b.tcp_mut().close(s.fin_peer);
                }
                1 => {
                    let _ = s.a.tcp_mut().shutdown_write(s.est);
                }
                2 => {
                    let _ = s.a.udp_send_to(s.udp, b"x", SocketAddrV4::new(IP_B, 9));
                }
                _ => {
                    let _ = s.b.tcp_mut().shutdown_write(s.est_peer);
                }
            },
            _ => {
                // A polls what was injected.
                s.a.poll(s.now, &mut s.da);
                s.da.outbox.clear();
            }
        }
        s.check_bounds();
        assert_eq!(
            s.mixed,
            None,
            "A delivered bytes B never sent there: {:?}",
            s.states()
        );
    }
    // Let everything drain, then read: still a prefix.
    for _ in 0..32 {
        s.exchange(false);
        s.now += Duration::from_millis(5);
        s.a_recv();
    }
    s.check_bounds();
    assert_eq!(s.mixed, None, "A delivered bytes B never sent there");
});
