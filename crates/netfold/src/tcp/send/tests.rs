use super::*;
use crate::mem::CopyMode;
use crate::tcp::seq;

/// A sender whose SYN (ISS `iss`) was sent and acknowledged, with `queued` bytes queued.
fn synced(iss: u32, queued: usize) -> Sender {
    let mut s = Sender::new(
        iss,
        1000,
        SendQueue::with_capacity(1 << 16),
        1 << 16,
        1 << 16,
    );
    s.on_sent(iss.wrapping_add(1));
    s.advance_una(iss.wrapping_add(1));
    assert_eq!(s.queue(&vec![7u8; queued], CopyMode::Kernels), queued);
    s
}

/// An ACK of new data up to `a`: (data bytes acknowledged, SYN and FIN acknowledged).
fn ack(s: &mut Sender, a: u32) -> (u32, u32) {
    let acked = s.acked_by(a);
    s.on_ack(acked);
    (acked.bytes(), acked.ctl())
}

fn ordered(s: &Sender) -> bool {
    seq::le(s.una(), s.nxt()) && seq::le(s.nxt(), s.max())
}

#[test]
fn a_new_sender_starts_at_iss() {
    let s = Sender::new(5, 1000, SendQueue::with_capacity(0), 0, 0);
    assert_eq!((s.iss(), s.una(), s.nxt(), s.max()), (5, 5, 5, 5));
    assert_eq!((s.wnd(), s.max_wnd(), s.flight()), (0, 0, 0));
}

#[test]
fn una_nxt_max_stay_ordered() {
    // Across the wrap of the sequence space, through sends, retransmissions, rewinds and
    // ACKs in a fixed pseudo-random order.
    let iss = u32::MAX - 20_000;
    let mut s = synced(iss, 60_000);
    let end = iss.wrapping_add(1).wrapping_add(60_000);
    let mut x: u32 = 12345;
    for _ in 0..5_000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let len = (x >> 8) % 3000;
        match (x >> 24) % 6 {
            0 | 1 => {
                let e = seq::min(s.nxt().wrapping_add(len), end);
                s.on_sent(e);
            }
            2 => {
                let e = seq::min(s.nxt().wrapping_add(len), s.max());
                s.on_resent(e);
            }
            3 => s.rewind(),
            4 => {
                let a = s.una().wrapping_add(len.min(s.flight()));
                if seq::gt(a, s.una()) {
                    ack(&mut s, a);
                }
            }
            _ => s.skip_sacked(s.nxt().wrapping_add(len)),
        }
        assert!(
            ordered(&s),
            "una {} nxt {} max {}",
            s.una(),
            s.nxt(),
            s.max()
        );
        assert_eq!(s.flight(), s.max().wrapping_sub(s.una()));
    }
}

#[test]
fn an_ack_past_a_rewound_nxt_moves_nxt_with_it() {
    let mut s = synced(1000, 5000);
    s.on_sent(4001);
    s.rewind();
    assert_eq!(s.nxt(), 1001);
    assert_eq!(
        ack(&mut s, 3001),
        (2000, 0),
        "the acknowledged bytes leave the queue"
    );
    assert_eq!((s.una(), s.nxt(), s.max()), (3001, 3001, 4001));
    s.on_resent(3500);
    assert_eq!((s.nxt(), s.max()), (3500, 4001));
    s.on_probe_resent(3800);
    assert_eq!(s.nxt(), 3500, "a probe's retransmission leaves SND.NXT");
    s.skip_sacked(9000);
    assert_eq!(s.nxt(), 4001, "skipping SACKed data stops at SND.MAX");
}

#[test]
fn the_window_update_takes_only_the_newest_segment() {
    // RFC 9293 §3.10.7.4: SND.WL1 < SEG.SEQ, or SND.WL1 = SEG.SEQ and SND.WL2 =< SEG.ACK.
    let mut s = synced(u32::MAX - 10, 0);
    s.on_handshake_ack(1000, 7, 100);
    assert!(!s.on_window_update(5000, 6, 200), "an older segment");
    assert!(
        !s.on_window_update(5000, 7, 99),
        "same SEG.SEQ, older SEG.ACK"
    );
    assert_eq!(s.wnd(), 1000);
    assert!(s.on_window_update(2000, 7, 100), "same SEG.SEQ and SEG.ACK");
    assert!(
        s.on_window_update(3000, 7, 150),
        "same SEG.SEQ, newer SEG.ACK"
    );
    assert_eq!(s.wnd(), 3000);
    // Across the wrap: 2^32 - 5 is before 3.
    s.on_handshake_ack(3000, u32::MAX - 5, 150);
    assert!(s.on_window_update(4000, 3, 150));
    assert!(!s.on_window_update(9000, u32::MAX - 5, 150));
    assert_eq!(s.wnd(), 4000);
}

#[test]
fn max_wnd_never_shrinks() {
    let mut s = Sender::new(0, 1000, SendQueue::with_capacity(0), 0, 0);
    s.on_syn(500, 9);
    assert_eq!((s.wnd(), s.max_wnd()), (500, 500));
    s.on_handshake_ack(40_000, 10, 1);
    s.on_window_update(10, 11, 1);
    assert_eq!((s.wnd(), s.max_wnd()), (10, 40_000));
    s.on_window_update(0, 12, 1);
    assert_eq!((s.wnd(), s.max_wnd()), (0, 40_000));
    s.on_window_update(60_000, 13, 1);
    assert_eq!(s.max_wnd(), 60_000);
}

#[test]
fn a_syn_cookie_restart_rebuilds_the_space() {
    let mut s = Sender::new(0, 1000, SendQueue::with_capacity(4096), 4096, 4096);
    s.restart(u32::MAX);
    assert_eq!(
        (s.iss(), s.una(), s.nxt(), s.max()),
        (u32::MAX, u32::MAX, 0, 0)
    );
    assert_eq!(s.fin_seq(), 0, "data starts after the SYN-ACK");
    assert!(ordered(&s));
}

#[test]
fn the_mss_only_lowers_on_a_path_mtu() {
    let mut s = Sender::new(0, 1460, SendQueue::with_capacity(0), 0, 0);
    s.on_syn_options(1460, 7);
    assert!(!s.lower_mss(1500));
    assert!(s.lower_mss(1200));
    assert_eq!((s.mss(), s.wscale()), (1200, 7));
}

#[test]
fn a_fin_occupies_one_sequence_number_after_the_data() {
    let mut s = synced(u32::MAX - 50, 100);
    let data_end = (u32::MAX - 50).wrapping_add(101);
    assert_eq!(s.fin_seq(), data_end);
    assert!(!s.fin_queued());
    s.queue_fin();
    s.queue_fin();
    assert!(s.fin_queued());
    assert_eq!(
        s.fin_seq(),
        data_end,
        "queueing the FIN again moves nothing"
    );
    // Data and FIN leave in one segment: one sequence number more than the data.
    s.on_sent(data_end.wrapping_add(1));
    s.on_fin_sent(false);
    assert_eq!(s.flight(), 101);
    assert!(!s.fin_alone());
    assert_eq!(
        ack(&mut s, data_end),
        (100, 0),
        "only data leaves the queue"
    );
    assert!(
        s.pending() && !s.fin_acked(),
        "the FIN is still outstanding"
    );
    assert_eq!(s.fin_seq(), data_end);
    assert_eq!(
        ack(&mut s, data_end.wrapping_add(1)),
        (0, 1),
        "the FIN is no data, and counts once"
    );
    assert!(s.fin_acked() && !s.pending());
    assert!(s.ring().is_empty());
}

#[test]
fn no_segment_crosses_an_unacknowledged_record_end() {
    let mut s = synced(0, 0);
    s.queue(&[1; 300], CopyMode::Kernels);
    s.end_record();
    s.queue(&[2; 200], CopyMode::Kernels);
    s.end_record();
    assert!(s.has_record_ends());
    assert_eq!(s.record_end_after(1), Some(301));
    assert_eq!(s.record_end_after(301), Some(501));
    assert!(s.record_ends_at(301) && !s.record_ends_at(300));
    s.on_sent(501);
    ack(&mut s, 301);
    assert_eq!(
        s.record_end_after(1),
        Some(501),
        "an acknowledged end is forgotten"
    );
    ack(&mut s, 501);
    assert!(!s.has_record_ends());
    assert!(!s.record_ends_full());
}

#[test]
fn the_queue_is_addressed_by_sequence_number() {
    let mut s = synced(99, 0);
    s.queue(b"hello world", CopyMode::Kernels);
    s.on_sent(111);
    ack(&mut s, 106);
    let g = s.gather(106, 100);
    assert_eq!(g.len(), 5);
    assert_eq!(g.to_vec(), b"world");
}

#[test]
fn msg_more_holds_until_the_next_ack_and_the_tail_keeps_no_psh() {
    let mut s = synced(0, 0);
    s.queue(&[0; 100], CopyMode::Kernels);
    s.on_queued(true);
    assert!(s.more() && s.more_tail());
    s.on_sent(51);
    ack(&mut s, 51);
    assert!(!s.more(), "an ACK ends MSG_MORE's hold");
    assert!(s.more_tail(), "the tail still gets no PSH");
    s.on_queued(false);
    assert!(!s.more_tail());
}

#[test]
fn a_push_covers_only_unsent_data_and_is_spent_by_a_pass() {
    let mut s = synced(0, 0);
    s.request_push();
    assert!(!s.push_now(), "nothing unsent");
    s.queue(&[0; 10], CopyMode::Kernels);
    s.request_push();
    assert!(s.push_now());
    s.on_output_pass();
    assert_eq!(s.burst_start(), 1);
    s.on_output_stopped();
    assert!(!s.push_now());
}

#[test]
fn the_last_psh_never_moves_back_and_a_short_segment_is_tracked() {
    let mut s = synced(0, 3000);
    s.on_pushed(2001);
    s.on_pushed(1001);
    assert_eq!(s.pushed(), 2001);
    s.on_sent(2501);
    s.on_short_sent(2501);
    assert!(s.short_in_flight());
    ack(&mut s, 2501);
    assert!(!s.short_in_flight(), "acknowledged");
}

#[test]
fn write_chunks_are_kept_only_once_asked_for() {
    let mut s = synced(0, 0);
    assert!(!s.tracks_chunks());
    s.track_chunks();
    s.on_write_chunk(700);
    assert!(s.tracks_chunks());
    assert_eq!(s.tail_chunk(), 700);
}

#[test]
fn the_send_buffer_grows_only_for_a_writer_that_wanted_room() {
    let mut s = Sender::new(0, 1000, SendQueue::with_capacity(4096), 4096, 1 << 20);
    assert_eq!(s.buf_max(), 1 << 20);
    assert!(!s.may_grow(), "no writer found the queue full");
    s.note_write(false);
    assert!(!s.app_blocked());
    s.note_write(true);
    s.note_write(false);
    assert!(
        s.app_blocked() && s.may_grow(),
        "a full queue is remembered"
    );
    s.on_growth_check();
    assert!(!s.may_grow());
    // Without a ceiling above the buffer, growth is off.
    let mut fixed = Sender::new(0, 1000, SendQueue::with_capacity(4096), 4096, 4096);
    fixed.note_write(true);
    assert!(!fixed.may_grow());
}

#[test]
fn the_ack_of_our_syn_counts_once() {
    let mut s = Sender::new(7, 1000, SendQueue::with_capacity(4096), 4096, 4096);
    s.on_sent(8);
    assert_eq!(s.acked_by(8).ctl(), 1);
    s.advance_una(8);
    assert_eq!(s.acked_by(8).ctl(), 0);
}
