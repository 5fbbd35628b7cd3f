//! What the shards of `netfold serve --shards N` share: the iperf3 test.
//!
//! Every shard runs its own stack and its own [`super::Services`] with listeners on every
//! port; the device (a multi-queue TAP) decides which shard a connection lands on. An iperf3
//! test is one control connection plus `-P` data connections, each its own flow, so RSS spreads
//! them over the shards: the data streams of one test arrive on shards that never saw its
//! control connection. This is the cross-shard accept problem every sharded server meets
//! (Linux solves it with one socket table for all CPUs). Here the shard that got the control
//! connection owns the [`super::iperf::Session`]; a data stream that lands elsewhere is served
//! by the shard it landed on (its TCP state never moves) and registered with the owner through
//! this hub: a mutex taken once per poll of a shard that has such a stream, with the stream's
//! byte count folded into the owner's session there. Only iperf3 needs this; the other
//! services are one connection each and share nothing.

use super::iperf::{Phase, Session, COOKIE_SIZE};
use netfold::time::Instant;
use std::sync::Mutex;

/// The iperf3 test as the shards share it.
#[derive(Debug, Default)]
pub struct IperfHub {
    inner: Mutex<Option<HubTest>>,
}

#[derive(Debug)]
struct HubTest {
    cookie: [u8; COOKIE_SIZE],
    owner: usize,
    /// Data streams that landed on other shards, by ticket.
    remote: Vec<RemoteStream>,
    /// The owner's session is still taking streams.
    accepting: bool,
    running: bool,
    /// Bytes the sending streams may still send (`-n`); `u64::MAX` without a limit.
    budget: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct RemoteStream {
    /// The owner registered it: its index in the session, and whether the server sends on it.
    registered: Option<(usize, bool)>,
    /// The owner refused it (too many streams).
    refused: bool,
    /// Bytes moved since the owner last folded them into its session.
    moved: u64,
}

/// What a shard should do with a connection that presented an iperf3 cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// No test anywhere: this shard owns the new test (the connection is its control).
    Owner,
    /// A data stream of the test another shard owns; the ticket names it in the hub.
    Remote(usize),
    /// Another test runs, or the cookie is wrong: ACCESS_DENIED.
    Denied,
}

/// A remote stream's view of the test, for the shard serving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteState {
    /// Not registered by the owner yet.
    Waiting,
    /// Registered: whether the server sends on it, whether the test is running, and the
    /// send budget.
    Active {
        sender: bool,
        running: bool,
        budget: u64,
    },
    /// The test is over (or the stream was refused): close the stream.
    Over,
}

impl IperfHub {
    pub fn new() -> IperfHub {
        IperfHub::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HubTest>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection on `shard` presented `cookie`.
    pub fn claim(&self, shard: usize, cookie: &[u8; COOKIE_SIZE]) -> Claim {
        let mut g = self.lock();
        match &mut *g {
            None => {
                *g = Some(HubTest {
                    cookie: *cookie,
                    owner: shard,
                    remote: Vec::new(),
                    accepting: false,
                    running: false,
                    budget: 0,
                });
                Claim::Owner
            }
            Some(t) if t.cookie == *cookie && t.accepting && t.owner != shard => {
                t.remote.push(RemoteStream::default());
                Claim::Remote(t.remote.len() - 1)
            }
            Some(_) => Claim::Denied,
        }
    }

    /// The owner's side, once per poll: registers the streams waiting with `session` (or
    /// refuses them when it takes no more), folds every registered stream's moved bytes into
    /// it, and publishes its state to the other shards.
    pub fn owner_sync(&self, shard: usize, session: &mut Session, now: Instant) {
        let mut g = self.lock();
        let Some(t) = g.as_mut().filter(|t| t.owner == shard) else {
            return;
        };
        for r in &mut t.remote {
            if r.registered.is_none() && !r.refused {
                match session.add_stream(now) {
                    Some(i) => r.registered = Some((i, session.streams()[i].sender)),
                    None => r.refused = true,
                }
            }
            if let Some((idx, _)) = r.registered {
                if r.moved > 0 {
                    session.count(now, idx, usize::try_from(r.moved).unwrap_or(usize::MAX));
                    r.moved = 0;
                }
            }
        }
        let phase = session.phase();
        t.accepting = matches!(phase, Phase::ParamExchange | Phase::CreateStreams);
        t.running = phase == Phase::Running;
        t.budget = session.send_budget();
    }

    /// The owner's test ended: the hub forgets it (remote streams then see [`RemoteState::Over`]).
    pub fn owner_done(&self, shard: usize) {
        let mut g = self.lock();
        if g.as_ref().is_some_and(|t| t.owner == shard) {
            *g = None;
        }
    }

    /// A remote stream's shard, once per poll: adds the bytes it moved and reads the state.
    pub fn remote_sync(
        &self,
        cookie: &[u8; COOKIE_SIZE],
        ticket: usize,
        moved: u64,
    ) -> RemoteState {
        let mut g = self.lock();
        let Some(t) = g.as_mut().filter(|t| t.cookie == *cookie) else {
            return RemoteState::Over;
        };
        let (running, budget) = (t.running, t.budget);
        let over = !t.accepting && !t.running;
        let Some(r) = t.remote.get_mut(ticket) else {
            return RemoteState::Over;
        };
        r.moved += moved;
        match r.registered {
            _ if r.refused => RemoteState::Over,
            Some((_, sender)) if !over => RemoteState::Active {
                sender,
                running,
                budget,
            },
            Some(_) => RemoteState::Over,
            None if over => RemoteState::Over,
            None => RemoteState::Waiting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_on_another_shard_is_registered_counted_and_ended() {
        use crate::iperf::frame_json;
        let hub = IperfHub::new();
        let (a, b) = ([b'a'; COOKIE_SIZE], [b'b'; COOKIE_SIZE]);
        let now = Instant::from_micros(1);
        assert_eq!(hub.claim(0, &a), Claim::Owner);
        let mut s = Session::new(now, a);
        // Before the owner publishes its state, nothing joins; another cookie never does.
        assert_eq!(hub.claim(1, &a), Claim::Denied);
        s.control_input(now, &frame_json(r#"{"tcp":true,"parallel":1,"time":1}"#));
        assert_eq!(s.phase(), Phase::CreateStreams);
        hub.owner_sync(0, &mut s, now);
        assert_eq!(hub.claim(1, &b), Claim::Denied);
        let Claim::Remote(t) = hub.claim(1, &a) else {
            panic!("not a remote stream")
        };
        assert_eq!(hub.remote_sync(&a, t, 0), RemoteState::Waiting);
        hub.owner_sync(0, &mut s, now);
        assert_eq!(s.phase(), Phase::Running);
        assert_eq!(
            hub.remote_sync(&a, t, 1000),
            RemoteState::Active {
                sender: false,
                running: true,
                budget: u64::MAX
            }
        );
        hub.owner_sync(0, &mut s, now);
        assert_eq!(s.streams()[0].bytes, 1000);
        // A second stream is one too many: refused.
        let Claim::Denied = hub.claim(1, &a) else {
            panic!("the test is no longer accepting")
        };
        hub.owner_done(0);
        assert_eq!(hub.remote_sync(&a, t, 5), RemoteState::Over);
        // The next test may start anywhere.
        assert_eq!(hub.claim(1, &b), Claim::Owner);
    }
}
