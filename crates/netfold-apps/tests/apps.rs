//! The services of `netfold_apps` served by one netfold stack to a second netfold stack over
//! the in-memory pipe, in virtual time. The client side speaks each protocol by hand (including
//! a minimal iperf3 client), so these tests check the wire behaviour, not just the state
//! machines.

use netfold::iface::Stack;
use netfold::phy::pipe::{Pipe, PipeConfig};
use netfold::socket::TcpStream;
use netfold::tcp;
use netfold::time::Duration;
use netfold_apps::iperf::{self, state, COOKIE_SIZE};
use netfold_apps::{json, pattern, ServiceStats, Services, ServicesConfig};
use netfold_testkit::{config, Rng};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const STEP: Duration = Duration::from_micros(200);

/// The kit's two stacks over a pipe (`a` the client, `b` the server) and the services on `b`.
struct Net {
    stacks: netfold_testkit::Net,
    services: Services,
}

fn stack(addr: Ipv4Addr, mac: u8) -> Stack {
    Stack::new(config(addr, mac))
}

fn tcp_config() -> tcp::Config {
    tcp::Config {
        time_wait: Duration::from_secs(1),
        ..tcp::Config::default()
    }
}

impl Net {
    fn new(cfg: ServicesConfig) -> Net {
        let (dc, ds) = Pipe::new(PipeConfig::default().capacity(4096));
        let mut server = stack(SERVER, 2);
        let services = Services::bind(&mut server, cfg).expect("bind services");
        Net {
            stacks: netfold_testkit::Net::new(stack(CLIENT, 1), server, dc, ds),
            services,
        }
    }

    fn step(&mut self) {
        self.stacks.now += STEP;
        self.stacks.poll();
        self.services.poll(&mut self.stacks.b, self.stacks.now);
    }

    /// Steps until `f` returns `Some`, at most `limit` of virtual time.
    fn until<T>(&mut self, limit: Duration, mut f: impl FnMut(&mut Net) -> Option<T>) -> T {
        let end = self.stacks.now + limit;
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                self.stacks.now < end,
                "condition not reached within {limit:?}"
            );
            self.step();
        }
    }

    fn connect(&mut self, port: u16) -> TcpStream {
        let s = TcpStream::connect(
            &mut self.stacks.a,
            self.stacks.now,
            SocketAddrV4::new(SERVER, port),
            tcp_config(),
        )
        .unwrap();
        self.until(Duration::from_secs(5), |n| {
            s.is_connected(&mut n.stacks.a).unwrap().then_some(())
        });
        s
    }

    /// Writes all of `data`, stepping while the send buffer is full.
    fn write_all(&mut self, s: TcpStream, mut data: &[u8]) {
        while !data.is_empty() {
            match s.write(&mut self.stacks.a, data) {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.step(),
                Err(e) => panic!("write: {e}"),
            }
        }
    }

    /// Reads until `n` bytes arrived, EOF, or an error (returned with what was read).
    fn read_n(&mut self, s: TcpStream, n: usize, limit: Duration) -> (Vec<u8>, io::Result<()>) {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        let end = self.stacks.now + limit;
        while out.len() < n {
            match s.read(&mut self.stacks.a, &mut buf[..(n - out.len()).min(65536)]) {
                Ok(0) => return (out, Ok(())),
                Ok(k) => out.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(
                        self.stacks.now < end,
                        "read timed out with {} bytes",
                        out.len()
                    );
                    self.step();
                }
                Err(e) => return (out, Err(e)),
            }
        }
        (out, Ok(()))
    }

    /// Reads to EOF (or error).
    fn read_to_end(&mut self, s: TcpStream, limit: Duration) -> (Vec<u8>, io::Result<()>) {
        self.read_n(s, usize::MAX, limit)
    }

    fn stats(&self) -> ServiceStats {
        self.services.stats()
    }
}

#[test]
fn tcp_echo_returns_every_byte_and_closes_after_fin() {
    let mut net = Net::new(ServicesConfig::default());
    let s = net.connect(7);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    // Write and read concurrently: echo holds nothing back, so the client must read too.
    let mut got = Vec::new();
    let mut sent = 0;
    let mut buf = vec![0u8; 65536];
    net.until(Duration::from_secs(30), |n| {
        if sent < data.len() {
            if let Ok(k) = s.write(&mut n.stacks.a, &data[sent..]) {
                sent += k;
            }
        }
        while let Ok(k) = s.read(&mut n.stacks.a, &mut buf) {
            if k == 0 {
                break;
            }
            got.extend_from_slice(&buf[..k]);
        }
        (got.len() == data.len()).then_some(())
    });
    assert_eq!(got, data);
    s.shutdown_write(&mut net.stacks.a).unwrap();
    let (rest, r) = net.read_to_end(s, Duration::from_secs(5));
    assert!(rest.is_empty() && r.is_ok(), "server closes after our FIN");
    assert_eq!(net.stats().echo_bytes, data.len() as u64);
}

#[test]
fn udp_echo_answers_the_sender() {
    let mut net = Net::new(ServicesConfig::default());
    let h = net
        .stacks
        .a
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    for i in 0..10u8 {
        net.stacks
            .a
            .udp_send_to(h, &[i; 100], SocketAddrV4::new(SERVER, 7))
            .unwrap();
    }
    let mut buf = [0u8; 2048];
    let mut seen = Vec::new();
    net.until(Duration::from_secs(2), |n| {
        while let Ok((k, from)) = n.stacks.a.udp_recv_from(h, &mut buf) {
            assert_eq!(from, SocketAddrV4::new(SERVER, 7).into());
            assert_eq!(k, 100);
            seen.push(buf[0]);
        }
        (seen.len() == 10).then_some(())
    });
    assert_eq!(seen, (0..10).collect::<Vec<u8>>());
    assert_eq!(net.stats().udp_echo_datagrams, 10);
}

#[test]
fn discard_counts_and_chargen_follows_rfc864() {
    let mut net = Net::new(ServicesConfig::default());
    let d = net.connect(9);
    net.write_all(d, &vec![0xa5; 1_000_000]);
    d.shutdown_write(&mut net.stacks.a).unwrap();
    let (back, r) = net.read_to_end(d, Duration::from_secs(10));
    assert!(back.is_empty() && r.is_ok());
    assert_eq!(net.stats().discard_bytes, 1_000_000);

    let c = net.connect(19);
    let (got, r) = net.read_n(c, 50_000, Duration::from_secs(10));
    r.unwrap();
    let mut want = vec![0u8; 50_000];
    pattern::fill_chargen(0, &mut want);
    assert_eq!(got, want);
    assert_eq!(&got[..74], &want[..74]);
    assert!(got[..74].ends_with(b"\r\n"));
    c.close(&mut net.stacks.a).unwrap();
    net.until(Duration::from_secs(5), |n| {
        (n.services.connections() == 0).then_some(())
    });
}

fn http_get(net: &mut Net, s: TcpStream, req: &str) -> (String, Vec<u8>) {
    net.write_all(s, req.as_bytes());
    read_response(net, s)
}

/// Reads one response: head, then Content-Length bytes of body (none for HEAD requests when
/// `X-Head` is in the head — the tests only use HEAD where they know to skip the body).
fn read_response(net: &mut Net, s: TcpStream) -> (String, Vec<u8>) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let (b, r) = net.read_n(s, 1, Duration::from_secs(10));
        r.unwrap();
        assert_eq!(b.len(), 1, "EOF inside a response head");
        head.extend_from_slice(&b);
    }
    let head = String::from_utf8(head).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    let (body, r) = net.read_n(s, len, Duration::from_secs(30));
    r.unwrap();
    (head, body)
}

#[test]
fn http_serves_bytes_keepalive_pipelined_and_errors() {
    let mut net = Net::new(ServicesConfig::default());
    let s = net.connect(8080);
    let (head, body) = http_get(
        &mut net,
        s,
        "GET /bytes/2000000 HTTP/1.1\r\nHost: 198.18.0.2\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let mut want = vec![0u8; 2_000_000];
    pattern::fill_bytes(0, &mut want);
    assert!(body == want, "body differs from the pattern");

    // Three pipelined requests in one segment, answered in order on the same connection.
    net.write_all(
        s,
        b"GET /bytes/10 HTTP/1.1\r\nHost: a\r\n\r\nGET /missing HTTP/1.1\r\nHost: a\r\n\r\n\
          GET /bytes/5 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    let (h1, b1) = read_response(&mut net, s);
    let (h2, _) = read_response(&mut net, s);
    let (h3, b3) = read_response(&mut net, s);
    assert!(h1.starts_with("HTTP/1.1 200") && b1 == want[..10]);
    assert!(h2.starts_with("HTTP/1.1 404"));
    assert!(h3.starts_with("HTTP/1.1 200") && h3.contains("Connection: close"));
    assert_eq!(b3, want[..5]);
    let (rest, r) = net.read_to_end(s, Duration::from_secs(5));
    assert!(
        rest.is_empty() && r.is_ok(),
        "closed after Connection: close"
    );

    // Garbage gets 400 and a close.
    let g = net.connect(8080);
    net.write_all(g, b"\x00\x01garbage\r\n\r\n");
    let (rest, _) = net.read_to_end(g, Duration::from_secs(5));
    assert!(
        rest.starts_with(b"HTTP/1.1 400 "),
        "{:?}",
        String::from_utf8_lossy(&rest)
    );
    let st = net.stats();
    assert_eq!(st.http_requests, 5);
    assert_eq!(st.http_errors, 2);
}

#[test]
fn http_slowloris_gets_408_and_idle_connections_are_reset() {
    let cfg = ServicesConfig {
        request_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(5),
        ..ServicesConfig::default()
    };
    let mut net = Net::new(cfg);
    let slow = net.connect(8080);
    let idle = net.connect(8080);
    net.write_all(slow, b"GET /bytes/1 HTTP/1.1\r\nHo");
    // Keep trickling one byte at a time: progress, but the head never completes in time.
    let (got, _) = {
        let mut got = Vec::new();
        let mut tick = 0u32;
        net.until(Duration::from_secs(4), |n| {
            // One byte every 100 ms: steady progress, far below the head size limit.
            tick += 1;
            if tick == 500 {
                tick = 0;
                let _ = slow.write(&mut n.stacks.a, b"x");
            }
            let mut b = [0u8; 512];
            while let Ok(k) = slow.read(&mut n.stacks.a, &mut b) {
                if k == 0 {
                    break;
                }
                got.extend_from_slice(&b[..k]);
            }
            got.starts_with(b"HTTP/1.1 408 ").then_some(())
        });
        (got, ())
    };
    assert!(got.starts_with(b"HTTP/1.1 408 "));
    // The silent connection is reset after the idle timeout.
    let r = net.until(Duration::from_secs(10), |n| {
        let mut b = [0u8; 16];
        match idle.read(&mut n.stacks.a, &mut b) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            other => Some(other.map(|_| ())),
        }
    });
    assert!(r.is_err(), "idle connection should be reset");
    assert!(net.stats().timeouts >= 2);
}

#[test]
fn connection_limit_resets_the_excess() {
    let cfg = ServicesConfig {
        max_conns: 2,
        ..ServicesConfig::default()
    };
    let mut net = Net::new(cfg);
    let _a = net.connect(9);
    let _b = net.connect(9);
    let c = TcpStream::connect(
        &mut net.stacks.a,
        net.stacks.now,
        SocketAddrV4::new(SERVER, 9),
        tcp_config(),
    )
    .unwrap();
    let r = net.until(Duration::from_secs(5), |n| {
        let mut b = [0u8; 4];
        match c.read(&mut n.stacks.a, &mut b) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => None,
            other => Some(other.map(|_| ())),
        }
    });
    assert!(r.is_err());
    assert_eq!(net.stats().refused_full, 1);
    assert_eq!(net.services.connections(), 2);
}

// ---- iperf3 ----

fn cookie(tag: u8) -> [u8; COOKIE_SIZE] {
    let mut c = [b'a' + tag; COOKIE_SIZE];
    c[COOKIE_SIZE - 1] = 0;
    c
}

fn expect_state(net: &mut Net, s: TcpStream, want: &[i8]) {
    let (got, r) = net.read_n(s, want.len(), Duration::from_secs(5));
    r.unwrap();
    let got: Vec<i8> = got.into_iter().map(|b| b as i8).collect();
    assert_eq!(got, want);
}

/// A minimal iperf3 client run: returns (bytes moved per stream as the client saw them, the
/// server's results JSON).
fn iperf_run(
    net: &mut Net,
    params: &str,
    streams: usize,
    reverse: bool,
) -> (Vec<u64>, json::Value) {
    iperf_run_to(net, params, streams, reverse, true)
}

/// [`iperf_run`]; with `send_done` false the client stops after the results, as one whose
/// IPERF_DONE is still in flight (lost, retransmitted) when it exits.
fn iperf_run_to(
    net: &mut Net,
    params: &str,
    streams: usize,
    reverse: bool,
    send_done: bool,
) -> (Vec<u64>, json::Value) {
    let ctrl = net.connect(5201);
    net.write_all(ctrl, &cookie(0));
    expect_state(net, ctrl, &[state::PARAM_EXCHANGE]);
    net.write_all(ctrl, &iperf::frame_json(params));
    expect_state(net, ctrl, &[state::CREATE_STREAMS]);
    let mut data = Vec::new();
    for _ in 0..streams {
        let s = net.connect(5201);
        net.write_all(s, &cookie(0));
        data.push(s);
    }
    expect_state(net, ctrl, &[state::TEST_START, state::TEST_RUNNING]);
    let mut moved = vec![0u64; streams];
    let block = vec![0x42u8; 16384];
    let mut buf = vec![0u8; 65536];
    let end = net.stacks.now + Duration::from_millis(300);
    while net.stacks.now < end {
        for (i, &s) in data.iter().enumerate() {
            if reverse {
                while let Ok(k) = s.read(&mut net.stacks.a, &mut buf) {
                    if k == 0 {
                        break;
                    }
                    moved[i] += k as u64;
                }
            } else if let Ok(k) = s.write(&mut net.stacks.a, &block) {
                moved[i] += k as u64;
            }
        }
        net.step();
    }
    if !reverse {
        // Let everything written reach the server before TEST_END (iperf3 does not, but then
        // its own byte counts differ by what is in flight; here we want exact equality).
        net.until(Duration::from_secs(5), |n| {
            data.iter()
                .all(|s| n.stacks.a.tcp().send_queue(s.handle()).unwrap() == 0)
                .then_some(())
        });
        for _ in 0..50 {
            net.step();
        }
    }
    net.write_all(ctrl, &[state::TEST_END as u8]);
    expect_state(net, ctrl, &[state::EXCHANGE_RESULTS]);
    net.write_all(
        ctrl,
        &iperf::frame_json(r#"{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[]}"#),
    );
    let (len, r) = net.read_n(ctrl, 4, Duration::from_secs(5));
    r.unwrap();
    let len = u32::from_be_bytes(len.try_into().unwrap()) as usize;
    let (doc, r) = net.read_n(ctrl, len, Duration::from_secs(5));
    r.unwrap();
    let results = json::parse(&doc).expect("server results are JSON");
    expect_state(net, ctrl, &[state::DISPLAY_RESULTS]);
    if reverse {
        // Drain what was in flight at TEST_END, as the client's kernel would.
        for (i, &s) in data.iter().enumerate() {
            let (rest, _) = net.read_to_end(s, Duration::from_secs(5));
            moved[i] += rest.len() as u64;
        }
    }
    for s in data {
        let _ = s.close(&mut net.stacks.a);
    }
    if !send_done {
        return (moved, results);
    }
    net.write_all(ctrl, &[state::IPERF_DONE as u8]);
    let (rest, r) = net.read_to_end(ctrl, Duration::from_secs(5));
    assert!(
        rest.is_empty() && r.is_ok(),
        "server closes the control connection"
    );
    let _ = ctrl.close(&mut net.stacks.a);
    (moved, results)
}

fn stream_bytes(results: &json::Value) -> Vec<(u64, u64)> {
    let Some(json::Value::Array(streams)) = results.get("streams") else {
        panic!("no streams in {results:?}")
    };
    for k in [
        "cpu_util_total",
        "cpu_util_user",
        "cpu_util_system",
        "sender_has_retransmits",
    ] {
        assert!(results.get(k).is_some(), "{k} missing");
    }
    streams
        .iter()
        .map(|s| {
            for k in ["id", "bytes", "retransmits", "jitter", "errors", "packets"] {
                assert!(s.get(k).is_some(), "{k} missing");
            }
            (
                s.get("id").unwrap().as_u64().unwrap(),
                s.get("bytes").unwrap().as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn iperf3_forward_two_streams_counts_exactly() {
    let mut net = Net::new(ServicesConfig::default());
    let (moved, results) = iperf_run(
        &mut net,
        r#"{"tcp":true,"omit":0,"time":1,"parallel":2,"len":131072,"client_version":"3.12"}"#,
        2,
        false,
    );
    let got = stream_bytes(&results);
    assert_eq!(got.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(got.iter().map(|x| x.1).collect::<Vec<_>>(), moved);
    assert!(moved.iter().all(|&b| b > 0));
    assert_eq!(
        results.get("sender_has_retransmits").unwrap().as_f64(),
        Some(-1.0)
    );
    let st = net.stats();
    assert_eq!((st.iperf_tests, st.iperf_completed), (1, 1));
    net.until(Duration::from_secs(10), |n| {
        (n.services.connections() == 0).then_some(())
    });
}

#[test]
fn iperf3_reverse_sends_and_reports_what_it_sent() {
    let mut net = Net::new(ServicesConfig::default());
    let (moved, results) = iperf_run(
        &mut net,
        r#"{"tcp":true,"time":1,"parallel":1,"reverse":true,"len":131072}"#,
        1,
        true,
    );
    let got = stream_bytes(&results);
    assert_eq!(got.len(), 1);
    assert!(moved[0] > 0);
    // Everything the server reports as sent arrived at the client.
    assert_eq!(got[0].1, moved[0]);
    assert_eq!(net.stats().iperf_bytes_out, moved[0]);
}

#[test]
fn iperf3_second_client_is_denied_and_server_recovers() {
    let mut net = Net::new(ServicesConfig::default());
    let ctrl = net.connect(5201);
    net.write_all(ctrl, &cookie(0));
    expect_state(&mut net, ctrl, &[state::PARAM_EXCHANGE]);
    // A second client while the first test is set up.
    let other = net.connect(5201);
    net.write_all(other, &cookie(1));
    let (got, _) = net.read_to_end(other, Duration::from_secs(5));
    assert_eq!(got, [state::ACCESS_DENIED as u8]);
    assert_eq!(net.stats().iperf_denied, 1);
    // The first client sends garbage instead of parameters: SERVER_ERROR, then close.
    net.write_all(ctrl, &[0, 0, 0, 3, b'x', b'y', b'z']);
    let (got, _) = net.read_to_end(ctrl, Duration::from_secs(5));
    assert_eq!(got.len(), 9);
    assert_eq!(got[0] as i8, state::SERVER_ERROR);
    assert_eq!(net.stats().iperf_failed, 1);
    // The server takes a new test afterwards.
    let (moved, _) = iperf_run(&mut net, r#"{"tcp":true,"time":1,"parallel":1}"#, 1, false);
    assert!(moved[0] > 0);
}

#[test]
fn iperf3_new_client_after_delivered_results_is_served() {
    // The first client has its results but its IPERF_DONE has not arrived: the next
    // client is not turned away as busy, and the first test counts as completed.
    let mut net = Net::new(ServicesConfig::default());
    let (moved, _) = iperf_run_to(
        &mut net,
        r#"{"tcp":true,"time":1,"parallel":1}"#,
        1,
        false,
        false,
    );
    assert!(moved[0] > 0);
    assert_eq!(net.stats().iperf_completed, 0);
    let next = net.connect(5201);
    net.write_all(next, &cookie(1));
    expect_state(&mut net, next, &[state::PARAM_EXCHANGE]);
    let st = net.stats();
    assert_eq!(
        (st.iperf_tests, st.iperf_completed, st.iperf_denied),
        (2, 1, 0)
    );
}

#[test]
fn garbage_on_every_port_does_not_hurt_the_server() {
    let mut net = Net::new(ServicesConfig {
        request_timeout: Duration::from_secs(1),
        ..ServicesConfig::default()
    });
    let junk = Rng::new(0x1234_5678).bytes(20_000);
    let mut conns = Vec::new();
    for port in [7, 9, 19, 8080, 5201] {
        let s = net.connect(port);
        let _ = s.write(&mut net.stacks.a, &junk);
        conns.push(s);
    }
    for _ in 0..20_000 {
        net.step();
        let mut b = [0u8; 65536];
        for &s in &conns {
            let _ = s.read(&mut net.stacks.a, &mut b);
        }
    }
    // Everything still works afterwards.
    let s = net.connect(8080);
    let (head, body) = http_get(&mut net, s, "GET /bytes/3 HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"));
    assert_eq!(body.len(), 3);
}

#[test]
fn shutdown_tells_a_running_iperf3_client_and_resets_connections() {
    let mut net = Net::new(ServicesConfig::default());
    let ctrl = net.connect(5201);
    net.write_all(ctrl, &cookie(0));
    expect_state(&mut net, ctrl, &[state::PARAM_EXCHANGE]);
    let echo = net.connect(7);
    net.services.begin_shutdown(&mut net.stacks.b);
    for _ in 0..500 {
        net.step();
    }
    // The client has the control message while the connection is still open.
    let mut b = [0u8; 4];
    assert_eq!(ctrl.read(&mut net.stacks.a, &mut b).unwrap(), 1);
    assert_eq!(b[0] as i8, state::SERVER_TERMINATE);
    assert!(ctrl.is_connected(&mut net.stacks.a).unwrap());
    net.services.shutdown(&mut net.stacks.b);
    let (got, r) = net.read_to_end(ctrl, Duration::from_secs(5));
    assert!(
        got.is_empty() && r.is_err(),
        "then the control connection is reset"
    );
    let r = net.until(Duration::from_secs(5), |n| {
        let mut b = [0u8; 4];
        match echo.read(&mut n.stacks.a, &mut b) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            other => Some(other.map(|_| ())),
        }
    });
    assert!(r.is_err(), "other connections are reset");
    assert_eq!(net.services.connections(), 0);
    // The listeners are gone: a new connection is refused.
    let c = TcpStream::connect(
        &mut net.stacks.a,
        net.stacks.now,
        SocketAddrV4::new(SERVER, 8080),
        tcp_config(),
    )
    .unwrap();
    let r = net.until(Duration::from_secs(5), |n| {
        match c.is_connected(&mut n.stacks.a) {
            Ok(false) => None,
            other => Some(other),
        }
    });
    assert!(r.is_err(), "connection to a closed port is refused");
}

/// With IPv6 addresses the services listen on `[::]`: the same echo service answers an IPv6
/// client and an IPv4 one.
#[test]
fn services_answer_both_families_when_the_stack_has_ipv6() {
    use netfold::iface::StackConfig;
    use netfold::wire::ipv6::Ipv6Cidr;
    use std::net::{IpAddr, Ipv6Addr, SocketAddr};
    let a6: Ipv6Addr = "2001:2:0:1::a".parse().unwrap();
    let b6: Ipv6Addr = "2001:2:0:1::b".parse().unwrap();
    let with6 = |v4, mac, v6| StackConfig {
        addrs6: vec![Ipv6Cidr::new(v6, 64).unwrap()],
        ..config(v4, mac)
    };
    let (dc, ds) = Pipe::new(PipeConfig::default());
    let mut server = Stack::new(with6(SERVER, 2, b6));
    let services = Services::bind(&mut server, ServicesConfig::default()).unwrap();
    let mut net = Net {
        stacks: netfold_testkit::Net::new(Stack::new(with6(CLIENT, 1, a6)), server, dc, ds),
        services,
    };
    // Duplicate Address Detection first (RFC 4862 §5.4: about a second).
    net.until(Duration::from_secs(5), |n| {
        let ready = |s: &Stack| {
            s.ipv6_addrs()
                .all(|(_, st)| st == netfold::iface::AddrState::Preferred)
        };
        (ready(&n.stacks.a) && ready(&n.stacks.b)).then_some(())
    });
    for to in [
        SocketAddr::new(IpAddr::V6(b6), 7),
        SocketAddr::new(IpAddr::V4(SERVER), 7),
    ] {
        let s = TcpStream::connect(&mut net.stacks.a, net.stacks.now, to, tcp_config()).unwrap();
        net.until(Duration::from_secs(5), |n| {
            s.is_connected(&mut n.stacks.a).unwrap().then_some(())
        });
        s.write(&mut net.stacks.a, b"ping").unwrap();
        let mut buf = [0u8; 8];
        let k = net.until(Duration::from_secs(5), |n| {
            s.read(&mut n.stacks.a, &mut buf).ok()
        });
        assert_eq!(&buf[..k], b"ping", "echo over {to}");
        // UDP echo too.
        let any: IpAddr = if to.is_ipv6() {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        let h = net.stacks.a.udp_bind(SocketAddr::new(any, 0)).unwrap();
        net.stacks.a.udp_send_to(h, b"dgram", to).unwrap();
        let (k, from) = net.until(Duration::from_secs(2), |n| {
            n.stacks.a.udp_recv_from(h, &mut buf).ok()
        });
        assert_eq!((&buf[..k], from), (&b"dgram"[..], to));
    }
    assert_eq!(net.stats().echo_bytes, 8);
    assert_eq!(net.stats().udp_echo_datagrams, 2);
}
