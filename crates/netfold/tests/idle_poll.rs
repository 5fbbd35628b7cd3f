//! "Do nothing on a poll that finds nothing due". A poll of an established,
//! quiet connection before its next deadline sends nothing, changes no deadline and skips the
//! TCP output pass (`TcpLayer::output_idle`); the first poll at the deadline does the work
//! the deadline was for. In virtual time.

use netfold::phy::pipe::PipeConfig;
use netfold::socket::{TcpListener, TcpStream};
use netfold::tcp;
use netfold::time::Duration;
use netfold::wire::Ipv4Addr;
use netfold_testkit::{config, Net};
use std::net::SocketAddrV4;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

#[test]
fn a_poll_with_nothing_due_does_nothing_and_the_deadline_poll_does_the_work() {
    let mut n = Net::pipe(config(A, 1), config(B, 2), PipeConfig::default());
    let cfg = tcp::Config::default();
    let l = TcpListener::bind(&mut n.b, SocketAddrV4::new(B, 80), 4, cfg).unwrap();
    let c = TcpStream::connect(&mut n.a, n.now, SocketAddrV4::new(B, 80), cfg).unwrap();
    n.settle();
    let (s, _) = l.accept(&mut n.b).unwrap();
    // A request/response exchange, then quiet (the delayed ACK and every timer it leaves
    // behind have run: settle until no deadline is within a second).
    c.write(&mut n.a, b"request").unwrap();
    n.settle();
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut n.b, &mut buf).unwrap(), 7);
    s.write(&mut n.b, b"response").unwrap();
    n.settle();
    assert_eq!(c.read(&mut n.a, &mut buf).unwrap(), 8);
    n.run_for(Duration::from_millis(500));

    // Now data goes out and is not answered (the receiver is not polled), so the sender
    // has a tail-loss-probe or retransmission deadline: the polls before it must do nothing.
    c.write(&mut n.a, b"unanswered").unwrap();
    assert!(n.a.poll(n.now, &mut n.ea), "the write is sent");
    let deadline = n.a.poll_at(n.now).expect("a retransmission timer is armed");
    assert!(deadline > n.now);
    let before = n.a.counters();
    let segs = n.a.tcp().stats().segments_out;
    let mut t = n.now;
    for _ in 0..1000 {
        assert!(
            n.a.tcp_mut().output_idle(t),
            "no TCP output pass before {deadline:?}"
        );
        assert!(!n.a.poll(t, &mut n.ea), "an empty poll reports no work");
        assert_eq!(n.a.poll_at(t), Some(deadline), "and moves no deadline");
        t = (t + Duration::from_micros(97)).min(deadline - Duration::from_micros(1));
    }
    let after = n.a.counters();
    assert_eq!(after.frames_out, before.frames_out, "nothing sent");
    assert_eq!(n.a.tcp().stats().segments_out, segs);
    assert_eq!(after.polls, before.polls + 1000, "every poll was counted");

    // At the deadline the output pass runs and the segment goes again.
    assert!(!n.a.tcp_mut().output_idle(deadline));
    assert!(n.a.poll(deadline, &mut n.ea), "the deadline's poll works");
    assert!(
        n.a.counters().frames_out > before.frames_out,
        "retransmitted"
    );
}
