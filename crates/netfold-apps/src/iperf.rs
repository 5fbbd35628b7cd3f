//! The iperf3 server protocol (esnet/iperf, `src/iperf_api.c`, `iperf_server_api.c`), sans-IO.
//!
//! One test runs at a time, as in iperf3's own server:
//!
//! 1. The client opens the control connection and sends its cookie: 36 characters plus a NUL
//!    ([`COOKIE_SIZE`] = 37 bytes). The server answers the state byte `PARAM_EXCHANGE` (9).
//! 2. The client sends its parameters as JSON framed by a 4-byte big-endian length
//!    (`JSON_write`). The server answers `CREATE_STREAMS` (10) — or `SERVER_ERROR` (-2) followed
//!    by two 4-byte big-endian ints (iperf error number, errno) for tests it cannot run.
//! 3. The client opens `parallel` data connections to the same port, each starting with the
//!    same cookie. Stream ids follow `iperf_add_stream`: 1 for the first, then 3, 4, 5...
//!    (`i` starts at 2 and counts the streams already in the list). With `--bidir` the first
//!    `parallel` streams carry data to the server and the next `parallel` from it
//!    (`iperf_run_server`: `rec_streams_accepted` before `send_streams_accepted`).
//! 4. When all streams are in, the server sends `TEST_START` (1) then `TEST_RUNNING` (2); data
//!    flows (client to server, or server to client with `reverse`).
//! 5. The client ends the test with `TEST_END` (4). The server closes the data streams, sends
//!    `EXCHANGE_RESULTS` (13), reads the client's results (framed JSON), sends its own
//!    (`send_results`: `cpu_util_*`, `sender_has_retransmits`, and per stream `id`, `bytes`,
//!    `retransmits`, `jitter`, `errors`, `packets`, `start_time`, `end_time` — the client's
//!    `get_results` rejects the reply if any of the non-time fields is missing) and
//!    `DISPLAY_RESULTS` (14). The client answers `IPERF_DONE` (16) and closes.
//!
//! Any other connection while a test runs gets `ACCESS_DENIED` (-1) and is closed, except once
//! the results are delivered: a new client then ends that test as completed (its client has
//! gone; only its `IPERF_DONE` is late) and is served.
//! [`Session`] implements the control side as a pure state machine; the driver in
//! [`super::Services`] moves bytes between it and the sockets.

use super::json;
use netfold::time::{Duration, Instant};

/// `COOKIE_SIZE` in iperf.h: 36 characters and the terminating NUL.
pub const COOKIE_SIZE: usize = 37;

/// Control-channel state bytes (iperf_api.h).
pub mod state {
    pub const TEST_START: i8 = 1;
    pub const TEST_RUNNING: i8 = 2;
    pub const TEST_END: i8 = 4;
    pub const PARAM_EXCHANGE: i8 = 9;
    pub const CREATE_STREAMS: i8 = 10;
    pub const SERVER_TERMINATE: i8 = 11;
    pub const CLIENT_TERMINATE: i8 = 12;
    pub const EXCHANGE_RESULTS: i8 = 13;
    pub const DISPLAY_RESULTS: i8 = 14;
    pub const IPERF_DONE: i8 = 16;
    pub const ACCESS_DENIED: i8 = -1;
    pub const SERVER_ERROR: i8 = -2;
}

/// iperf_error.h numbers sent after `SERVER_ERROR`.
mod ierr {
    /// "number of parallel streams too large".
    pub const IENUMSTREAMS: i32 = 6;
    /// "unable to start stream listener", followed by the errno's text: with
    /// [`EPROTONOSUPPORT`] the client prints "unable to start stream listener: Protocol not
    /// supported", the clearest refusal of a UDP or SCTP test the protocol can carry (it has
    /// no free-text error).
    pub const IESTREAMLISTEN: i32 = 202;
    /// Linux's errno for "Protocol not supported".
    pub const EPROTONOSUPPORT: i32 = 93;
    /// "unable to receive parameters from client".
    pub const IERECVPARAMS: i32 = 114;
}

/// Why a UDP or SCTP test failed: this server runs TCP tests only.
pub const REFUSED_NOT_TCP: &str = "not a TCP test";

/// Largest framed JSON document accepted (parameters or client results).
pub const MAX_JSON: usize = 64 * 1024;
/// iperf3's own limit (`MAX_STREAMS` in iperf.h).
pub const MAX_STREAMS: u32 = 128;
/// How long the client may take to open its streams or finish the result exchange.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Grace on top of the requested duration before a running test is abandoned.
const RUN_GRACE: Duration = Duration::from_secs(15);
/// A test with no time limit (`-n`/`-k`) is abandoned after this long.
const MAX_RUN: Duration = Duration::from_secs(3600);

/// The test parameters the server acts on (`get_parameters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Params {
    pub udp: bool,
    pub sctp: bool,
    pub reverse: bool,
    pub bidirectional: bool,
    pub parallel: u32,
    /// Block size (`len`); the server sends blocks of this size when it is the sender.
    pub len: u32,
    /// Duration in seconds (0 with `-n`/`-k`).
    pub time: u32,
    /// `-n`: bytes to send in total (0 = unlimited).
    pub num: u64,
    /// `-O`: seconds at the start that are not counted (TCP slow start).
    pub omit: u32,
    /// `--get-server-output`: the client wants the server's report in the results.
    pub get_server_output: bool,
}

impl Params {
    /// Parses the client's parameter JSON.
    pub fn parse(text: &[u8]) -> Result<Params, json::Error> {
        let v = json::parse(text)?;
        if !matches!(v, json::Value::Object(_)) {
            return Err(json::Error::Syntax);
        }
        let num = |k: &str| v.get(k).and_then(json::Value::as_u64);
        Ok(Params {
            // cJSON_GetObjectItem(j, "udp") != NULL: presence is what counts.
            udp: v.get("udp").is_some(),
            sctp: v.get("sctp").is_some(),
            reverse: v.get("reverse").is_some(),
            bidirectional: v.get("bidirectional").is_some(),
            parallel: num("parallel").unwrap_or(1).min(u64::from(u32::MAX)) as u32,
            len: num("len").unwrap_or(128 * 1024).min(u64::from(u32::MAX)) as u32,
            time: num("time").unwrap_or(10).min(u64::from(u32::MAX)) as u32,
            num: num("num").unwrap_or(0),
            omit: num("omit").unwrap_or(0).min(u64::from(u32::MAX)) as u32,
            // iperf_api.c get_parameters: `if ((j_p = cJSON_GetObjectItem(j,
            // "get_server_output")) != NULL) iperf_set_test_get_server_output(test, 1)`.
            get_server_output: v.get("get_server_output").is_some(),
        })
    }

    /// Data connections the client will open.
    pub fn stream_count(&self) -> u32 {
        if self.bidirectional {
            self.parallel.saturating_mul(2)
        } else {
            self.parallel
        }
    }
}

/// Where the control conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the parameter JSON.
    ParamExchange,
    /// Waiting for the data connections.
    CreateStreams,
    /// Data is flowing; waiting for `TEST_END`.
    Running,
    /// Waiting for the client's results JSON.
    ClientResults,
    /// Results sent; waiting for `IPERF_DONE`.
    DisplayResults,
    /// Finished normally (or the client terminated): close everything.
    Done,
    /// Protocol error or timeout: close everything.
    Failed(&'static str),
}

/// One data stream as the server sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamInfo {
    pub id: u32,
    /// The server sends on this stream (reverse, or the second half of a bidir test).
    pub sender: bool,
    pub bytes: u64,
}

/// The control side of one iperf3 test.
#[derive(Debug)]
pub struct Session {
    cookie: [u8; COOKIE_SIZE],
    phase: Phase,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    params: Params,
    streams: Vec<StreamInfo>,
    phase_since: Instant,
    start: Instant,
    end: Instant,
    /// CPU time of the serving thread when the test started running and when it ended.
    cpu_start: Option<cpu::Sample>,
    cpu_end: Option<cpu::Sample>,
}

// CPU use of the thread that runs the session, as iperf3's server reports it (`cpu_util_*`:
// user + system time of the process over the wall time of the test, in percent; iperf3 uses
// `getrusage(RUSAGE_SELF)`, here the serving thread's `RUSAGE_THREAD`, which is the work of
// this server and not of anything else the process runs). The syscall lives in
// `netfold_os::cpu`, so this crate has no unsafe code.
use netfold_os::cpu;

impl Session {
    /// A new test whose control connection sent `cookie`; queues `PARAM_EXCHANGE`.
    pub fn new(now: Instant, cookie: [u8; COOKIE_SIZE]) -> Session {
        Session {
            cookie,
            phase: Phase::ParamExchange,
            inbuf: Vec::new(),
            out: vec![state::PARAM_EXCHANGE as u8],
            params: Params::default(),
            streams: Vec::new(),
            phase_since: now,
            start: now,
            end: now,
            cpu_start: None,
            cpu_end: None,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }
    pub fn params(&self) -> &Params {
        &self.params
    }
    pub fn streams(&self) -> &[StreamInfo] {
        &self.streams
    }
    pub fn cookie(&self) -> &[u8; COOKIE_SIZE] {
        &self.cookie
    }

    /// Bytes waiting to go out on the control connection.
    pub fn output(&self) -> &[u8] {
        &self.out
    }
    /// `n` bytes of [`Session::output`] were sent.
    pub fn consume_output(&mut self, n: usize) {
        self.out.drain(..n.min(self.out.len()));
    }

    /// How many control bytes may be read now (bounded buffer).
    pub fn input_room(&self) -> usize {
        (MAX_JSON + 4).saturating_sub(self.inbuf.len())
    }

    fn set_phase(&mut self, now: Instant, p: Phase) {
        self.phase = p;
        self.phase_since = now;
    }

    /// Feeds bytes received on the control connection.
    pub fn control_input(&mut self, now: Instant, data: &[u8]) {
        let room = self.input_room();
        self.inbuf.extend_from_slice(&data[..data.len().min(room)]);
        loop {
            let before = self.phase;
            match self.phase {
                Phase::ParamExchange => match take_json(&mut self.inbuf) {
                    Framed::Incomplete => {}
                    Framed::TooLarge => self.server_error(now, ierr::IERECVPARAMS),
                    Framed::Doc(doc) => match Params::parse(&doc) {
                        Err(_) => self.server_error(now, ierr::IERECVPARAMS),
                        // This server runs TCP tests only.
                        Ok(p) if p.udp || p.sctp => {
                            self.server_error_errno(
                                now,
                                ierr::IESTREAMLISTEN,
                                ierr::EPROTONOSUPPORT,
                            );
                            self.set_phase(now, Phase::Failed(REFUSED_NOT_TCP));
                        }
                        Ok(p) if p.parallel == 0 || p.parallel > MAX_STREAMS => {
                            self.server_error(now, ierr::IENUMSTREAMS)
                        }
                        Ok(p) => {
                            self.params = p;
                            self.out.push(state::CREATE_STREAMS as u8);
                            self.set_phase(now, Phase::CreateStreams);
                        }
                    },
                },
                Phase::CreateStreams | Phase::Running | Phase::DisplayResults => {
                    let Some((&b, _)) = self.inbuf.split_first() else {
                        break;
                    };
                    self.inbuf.remove(0);
                    self.on_state(now, b as i8);
                }
                Phase::ClientResults => match take_json(&mut self.inbuf) {
                    Framed::Incomplete => {}
                    Framed::TooLarge => self.set_phase(now, Phase::Failed("results too large")),
                    // The client's own results are not needed by the server (iperf3 only
                    // prints them with --get-server-output); they are read and dropped.
                    Framed::Doc(_) => {
                        let doc = self.results_json();
                        self.out
                            .extend_from_slice(&(doc.len() as u32).to_be_bytes());
                        self.out.extend_from_slice(doc.as_bytes());
                        self.out.push(state::DISPLAY_RESULTS as u8);
                        self.set_phase(now, Phase::DisplayResults);
                    }
                },
                Phase::Done | Phase::Failed(_) => {
                    self.inbuf.clear();
                    break;
                }
            }
            if self.phase == before {
                break;
            }
        }
    }

    fn on_state(&mut self, now: Instant, s: i8) {
        match (self.phase, s) {
            (Phase::Running, state::TEST_END) => {
                self.end = now;
                self.cpu_end = cpu::sample();
                self.out.push(state::EXCHANGE_RESULTS as u8);
                self.set_phase(now, Phase::ClientResults);
            }
            (Phase::DisplayResults, state::IPERF_DONE) => self.set_phase(now, Phase::Done),
            // The client gave up (Ctrl-C): iperf3's server ends the test ("the client has
            // terminated"); it did not complete.
            (_, state::CLIENT_TERMINATE) => self.set_phase(now, Phase::Failed("client terminated")),
            _ => self.set_phase(now, Phase::Failed("unexpected control message")),
        }
    }

    /// The control connection reached end of stream (or failed).
    pub fn control_eof(&mut self, now: Instant) {
        match self.phase {
            Phase::Done | Phase::Failed(_) => {}
            // Results were delivered; a client that closes instead of sending IPERF_DONE
            // still got its test.
            Phase::DisplayResults => self.set_phase(now, Phase::Done),
            // iperf3 (IECTRLCLOSE) also ends the test when the client vanishes.
            _ => self.set_phase(now, Phase::Failed("control connection closed")),
        }
    }

    fn server_error(&mut self, now: Instant, ierrno: i32) {
        self.server_error_errno(now, ierrno, 0);
    }

    /// `SERVER_ERROR`, the iperf error number and an errno (which the client prints after
    /// the error's text for errors that carry one).
    fn server_error_errno(&mut self, now: Instant, ierrno: i32, errno: i32) {
        self.out.push(state::SERVER_ERROR as u8);
        self.out.extend_from_slice(&ierrno.to_be_bytes());
        self.out.extend_from_slice(&errno.to_be_bytes());
        self.set_phase(now, Phase::Failed("test refused"));
    }

    /// Whether a data connection presenting `cookie` belongs to this test now.
    pub fn accepts_stream(&self, cookie: &[u8; COOKIE_SIZE]) -> bool {
        self.phase == Phase::CreateStreams
            && *cookie == self.cookie
            && (self.streams.len() as u32) < self.params.stream_count()
    }

    /// Registers the next data connection and returns its index; when the last one arrives the
    /// test starts (`TEST_START`, `TEST_RUNNING`).
    pub fn add_stream(&mut self, now: Instant) -> Option<usize> {
        if self.phase != Phase::CreateStreams
            || self.streams.len() as u32 >= self.params.stream_count()
        {
            return None;
        }
        let k = self.streams.len() as u32;
        let id = if k == 0 { 1 } else { k + 2 };
        let sender = if self.params.bidirectional {
            k >= self.params.parallel
        } else {
            self.params.reverse
        };
        self.streams.push(StreamInfo {
            id,
            sender,
            bytes: 0,
        });
        if self.streams.len() as u32 == self.params.stream_count() {
            self.out.push(state::TEST_START as u8);
            self.out.push(state::TEST_RUNNING as u8);
            self.start = now;
            self.cpu_start = cpu::sample();
            self.set_phase(now, Phase::Running);
        }
        Some(self.streams.len() - 1)
    }

    /// When counting starts: the first `omit` seconds are left out, as iperf3 resets its
    /// statistics when the omit timer fires (`iperf_reset_stats`).
    fn counting_from(&self) -> Instant {
        self.start + Duration::from_secs(u64::from(self.params.omit))
    }

    /// Counts `n` bytes moved on stream `idx` at `now` (only while the test runs, and not
    /// during the omitted seconds).
    pub fn count(&mut self, now: Instant, idx: usize, n: usize) {
        if self.phase == Phase::Running && now >= self.counting_from() {
            if let Some(s) = self.streams.get_mut(idx) {
                s.bytes += n as u64;
            }
        }
    }

    /// For a sending stream: how many bytes may still be sent (`-n` limits the total).
    pub fn send_budget(&self) -> u64 {
        if self.phase != Phase::Running {
            return 0;
        }
        if self.params.num == 0 {
            return u64::MAX;
        }
        let sent: u64 = self
            .streams
            .iter()
            .filter(|s| s.sender)
            .map(|s| s.bytes)
            .sum();
        self.params.num.saturating_sub(sent)
    }

    /// When the test is abandoned if the client does not move on.
    pub fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Running if self.params.time > 0 => {
                Some(self.start + Duration::from_secs(u64::from(self.params.time)) + RUN_GRACE)
            }
            Phase::Running => Some(self.start + MAX_RUN),
            Phase::Done | Phase::Failed(_) => None,
            _ => Some(self.phase_since + STEP_TIMEOUT),
        }
    }

    /// Checks the deadline; a test past it fails.
    pub fn check_timeout(&mut self, now: Instant) {
        if let Some(d) = self.deadline() {
            if now >= d {
                self.set_phase(now, Phase::Failed("timed out"));
            }
        }
    }

    /// The server's CPU use over the test: (total, user, system) percent, as iperf3's
    /// `cpu_util_*`; zeros when it could not be measured.
    pub fn cpu_util(&self) -> (f64, f64, f64) {
        match (self.cpu_start, self.cpu_end) {
            (Some(a), Some(b)) => cpu::util(a, b),
            _ => (0.0, 0.0, 0.0),
        }
    }

    /// The server's side of the test as text, for `--get-server-output` (iperf3 puts its
    /// server's report in `server_output_text` when the server does not print JSON).
    pub fn server_output_text(&self) -> String {
        use core::fmt::Write;
        let secs = self
            .end
            .saturating_since(self.counting_from())
            .total_micros() as f64
            / 1e6;
        let (total, user, sys) = self.cpu_util();
        let mut t = String::new();
        let _ = writeln!(
            t,
            "netfold iperf3 server: {} stream(s), {secs:.2} s counted",
            self.streams.len()
        );
        let _ = writeln!(t, "[ ID] Interval           Transfer         Bitrate");
        let line = |t: &mut String, id: &str, bytes: u64, role: &str| {
            let mbits = if secs > 0.0 {
                bytes as f64 * 8.0 / secs / 1e6
            } else {
                0.0
            };
            let _ = writeln!(
                t,
                "[{id:>3}] 0.00-{secs:<6.2} sec  {bytes:>12} bytes  {mbits:>9.1} Mbits/sec  {role}"
            );
        };
        for st in &self.streams {
            let role = if st.sender { "sender" } else { "receiver" };
            line(&mut t, &st.id.to_string(), st.bytes, role);
        }
        if self.streams.len() > 1 {
            let sum = self.streams.iter().map(|st| st.bytes).sum();
            line(&mut t, "SUM", sum, "");
        }
        let _ = writeln!(
            t,
            "CPU Utilization: server {total:.1}% ({user:.1}% user, {sys:.1}% system)"
        );
        t
    }

    /// The server's results (`send_results`): the serving thread's CPU use (`cpu_util_*`),
    /// per-stream bytes, and the server's report when the client asked for it. Retransmits
    /// are not tracked per stream (`sender_has_retransmits` 0 when we send, -1 when we only
    /// receive, as iperf3 does for a receiver).
    pub fn results_json(&self) -> String {
        use core::fmt::Write;
        let secs = self
            .end
            .saturating_since(self.counting_from())
            .total_micros() as f64
            / 1e6;
        let sending = self.streams.iter().any(|s| s.sender);
        let (total, user, sys) = self.cpu_util();
        let mut j = String::with_capacity(128 + 160 * self.streams.len());
        let _ = write!(
            j,
            "{{\"cpu_util_total\":{total:.6},\"cpu_util_user\":{user:.6},\
             \"cpu_util_system\":{sys:.6},\"sender_has_retransmits\":{},\"streams\":[",
            if sending { 0 } else { -1 }
        );
        for (i, s) in self.streams.iter().enumerate() {
            if i > 0 {
                j.push(',');
            }
            let _ = write!(
                j,
                "{{\"id\":{},\"bytes\":{},\"retransmits\":-1,\"jitter\":0,\"errors\":0,\
                 \"packets\":0,\"start_time\":0,\"end_time\":{:.6}}}",
                s.id, s.bytes, secs
            );
        }
        j.push(']');
        if self.params.get_server_output {
            j.push_str(",\"server_output_text\":\"");
            json_escape_into(&mut j, &self.server_output_text());
            j.push('"');
        }
        j.push('}');
        j
    }
}

/// Appends `s` as the inside of a JSON string (RFC 8259 §7: quote, backslash and control
/// characters escaped).
fn json_escape_into(out: &mut String, s: &str) {
    use core::fmt::Write;
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

enum Framed {
    Incomplete,
    TooLarge,
    Doc(Vec<u8>),
}

/// Takes one `JSON_write` frame (4-byte big-endian length, then the text) off the front.
fn take_json(buf: &mut Vec<u8>) -> Framed {
    let Some(len) = buf.get(..4) else {
        return Framed::Incomplete;
    };
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len > MAX_JSON {
        return Framed::TooLarge;
    }
    if buf.len() < 4 + len {
        return Framed::Incomplete;
    }
    let doc = buf[4..4 + len].to_vec();
    buf.drain(..4 + len);
    Framed::Doc(doc)
}

/// Frames a JSON document the way `JSON_write` does.
pub fn frame_json(doc: &str) -> Vec<u8> {
    let mut v = (doc.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(doc.as_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookie() -> [u8; COOKIE_SIZE] {
        let mut c = [b'a'; COOKIE_SIZE];
        c[36] = 0;
        c
    }

    fn session_with(params: &str) -> Session {
        let mut s = Session::new(Instant::ZERO, cookie());
        assert_eq!(s.output(), &[9]);
        s.consume_output(1);
        s.control_input(Instant::ZERO, &frame_json(params));
        s
    }

    #[test]
    fn full_exchange_reverse_two_streams() {
        let t0 = Instant::from_secs(1);
        let mut s =
            session_with(r#"{"tcp":true,"time":2,"parallel":2,"reverse":true,"len":131072}"#);
        assert_eq!(s.phase(), Phase::CreateStreams);
        assert_eq!(s.output(), &[10]);
        s.consume_output(1);
        assert!(s.accepts_stream(&cookie()));
        let mut other = cookie();
        other[0] = b'b';
        assert!(!s.accepts_stream(&other));
        assert_eq!(s.add_stream(t0), Some(0));
        assert_eq!(s.phase(), Phase::CreateStreams);
        assert_eq!(s.add_stream(t0), Some(1));
        assert_eq!(s.phase(), Phase::Running);
        assert_eq!(s.output(), &[1, 2]);
        s.consume_output(2);
        // iperf_add_stream numbering: 1, then 3.
        let ids: Vec<u32> = s.streams().iter().map(|x| x.id).collect();
        assert_eq!(ids, [1, 3]);
        assert!(s.streams().iter().all(|x| x.sender));
        s.count(t0, 0, 1000);
        s.count(t0, 1, 500);
        // TEST_END and the client's results may arrive in one read.
        let mut msg = vec![4u8];
        msg.extend_from_slice(&frame_json(r#"{"cpu_util_total":1,"streams":[]}"#));
        s.control_input(Instant::from_secs(3), &msg);
        assert_eq!(s.phase(), Phase::DisplayResults);
        let out = s.output().to_vec();
        assert_eq!(out[0], 13);
        let len = u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize;
        assert_eq!(*out.last().unwrap(), 14);
        let doc = json::parse(&out[5..5 + len]).unwrap();
        assert_eq!(out.len(), 5 + len + 1);
        for k in [
            "cpu_util_total",
            "cpu_util_user",
            "cpu_util_system",
            "sender_has_retransmits",
        ] {
            assert!(doc.get(k).is_some(), "{k}");
        }
        let json::Value::Array(streams) = doc.get("streams").unwrap() else {
            panic!()
        };
        assert_eq!(streams.len(), 2);
        assert_eq!(streams[0].get("bytes").unwrap().as_u64(), Some(1000));
        assert_eq!(streams[1].get("id").unwrap().as_u64(), Some(3));
        assert_eq!(streams[1].get("end_time").unwrap().as_f64(), Some(2.0));
        s.control_input(Instant::from_secs(3), &[16]);
        assert_eq!(s.phase(), Phase::Done);
    }

    #[test]
    fn server_output_and_cpu_use_are_reported() {
        let mut s = session_with(r#"{"tcp":true,"time":1,"parallel":1,"get_server_output":1}"#);
        assert!(s.params().get_server_output);
        s.add_stream(Instant::ZERO).unwrap();
        s.count(Instant::ZERO, 0, 125_000);
        // Burn CPU on this (the serving) thread while the test runs.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = core::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let pending = s.output().len();
        s.consume_output(pending);
        s.control_input(Instant::from_secs(1), &[4]);
        s.control_input(Instant::from_secs(1), &frame_json("{}"));
        let out = s.output().to_vec();
        let doc = json::parse(&out[5..out.len() - 1]).unwrap();
        let total = doc.get("cpu_util_total").unwrap().as_f64().unwrap();
        let user = doc.get("cpu_util_user").unwrap().as_f64().unwrap();
        let sys = doc.get("cpu_util_system").unwrap().as_f64().unwrap();
        assert!(total > 0.0 && total <= 100.0 + 1e-6, "{total}");
        assert!((user + sys - total).abs() < 1e-3);
        let Some(json::Value::String(text)) = doc.get("server_output_text") else {
            panic!("no server_output_text")
        };
        assert!(
            text.contains("125000 bytes") && text.contains("1.0 Mbits/sec"),
            "{text}"
        );
        assert!(
            text.contains("CPU Utilization") && text.lines().count() >= 4,
            "{text}"
        );
        // Not asked for: not sent.
        let mut s = session_with(r#"{"tcp":true,"time":1,"parallel":1}"#);
        s.add_stream(Instant::ZERO).unwrap();
        let pending = s.output().len();
        s.consume_output(pending);
        s.control_input(Instant::from_secs(1), &[4]);
        s.control_input(Instant::from_secs(1), &frame_json("{}"));
        let out = s.output().to_vec();
        let doc = json::parse(&out[5..out.len() - 1]).unwrap();
        assert!(doc.get("server_output_text").is_none());
    }

    #[test]
    fn omitted_seconds_are_not_counted() {
        let mut s = session_with(r#"{"tcp":true,"time":2,"omit":1,"parallel":1}"#);
        s.add_stream(Instant::ZERO).unwrap();
        s.count(Instant::from_millis(500), 0, 100);
        s.count(Instant::from_millis(1500), 0, 7);
        assert_eq!(s.streams()[0].bytes, 7);
        let pending = s.output().len();
        s.consume_output(pending);
        s.control_input(Instant::from_secs(3), &[4]);
        s.control_input(Instant::from_secs(3), &frame_json("{}"));
        let out = s.output().to_vec();
        let doc = json::parse(&out[5..out.len() - 1]).unwrap();
        let json::Value::Array(st) = doc.get("streams").unwrap() else {
            panic!()
        };
        assert_eq!(st[0].get("end_time").unwrap().as_f64(), Some(2.0));
    }

    #[test]
    fn bidir_splits_receivers_then_senders() {
        let mut s = session_with(r#"{"tcp":true,"parallel":2,"bidirectional":true}"#);
        for _ in 0..4 {
            s.add_stream(Instant::ZERO).unwrap();
        }
        let senders: Vec<bool> = s.streams().iter().map(|x| x.sender).collect();
        assert_eq!(senders, [false, false, true, true]);
        assert_eq!(s.add_stream(Instant::ZERO), None);
    }

    #[test]
    fn refuses_udp_and_bad_params_with_server_error() {
        for p in [
            r#"{"udp":true,"parallel":1}"#,
            r#"{"tcp":true,"parallel":1000}"#,
            "nope",
        ] {
            let s = session_with(p);
            assert!(matches!(s.phase(), Phase::Failed(_)), "{p}");
            assert_eq!(s.output()[0], (-2i8) as u8);
            assert_eq!(s.output().len(), 9);
        }
        // UDP: "unable to start stream listener: Protocol not supported" at the client.
        let s = session_with(r#"{"udp":true,"parallel":1}"#);
        assert_eq!(s.phase(), Phase::Failed(REFUSED_NOT_TCP));
        assert_eq!(&s.output()[1..5], &202i32.to_be_bytes());
        assert_eq!(&s.output()[5..9], &93i32.to_be_bytes());
        // An oversized frame length is refused without buffering it.
        let mut s = Session::new(Instant::ZERO, cookie());
        s.control_input(Instant::ZERO, &u32::MAX.to_be_bytes());
        assert!(matches!(s.phase(), Phase::Failed(_)));
    }

    #[test]
    fn garbage_state_bytes_fail_and_timeouts_fire() {
        let mut s = session_with(r#"{"tcp":true,"parallel":1,"time":1}"#);
        s.control_input(Instant::ZERO, &[0x55]);
        assert!(matches!(s.phase(), Phase::Failed(_)));

        let mut s = session_with(r#"{"tcp":true,"parallel":1,"time":1}"#);
        s.check_timeout(Instant::from_secs(5));
        assert_eq!(s.phase(), Phase::CreateStreams);
        s.check_timeout(Instant::from_secs(11));
        assert!(matches!(s.phase(), Phase::Failed(_)));
    }
}
