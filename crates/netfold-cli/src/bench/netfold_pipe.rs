//! netfold on both ends of the in-memory pipe, driven from one thread.

use super::clock::Clock;
use super::memnet::{BoxErr, MemNet, Side};
use super::{Family, Measurement, Params};
use netfold::iface::{Stack, StackConfig};
use netfold::phy::pipe::{Pipe, PipeConfig, PipeEnd};
use netfold::socket::{TcpListener, TcpStream, UdpSocket};
use netfold::tcp;
use netfold::time::Duration;
use netfold::wire::ethernet::EthernetAddress;
use netfold::wire::ipv6::Ipv6Cidr;
use netfold::wire::Ipv4Addr;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The IPv6 addresses of `--family 6` (RFC 5180's benchmarking prefix 2001:2::/48).
pub const CLIENT_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
pub const SERVER_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

/// The client's and the server's address in `family`.
pub fn endpoints(family: Family) -> (IpAddr, IpAddr) {
    match family {
        Family::V4 => (CLIENT_ADDR.into(), SERVER_ADDR.into()),
        Family::V6 => (CLIENT_ADDR6.into(), SERVER_ADDR6.into()),
    }
}

/// [`stack_config`] for a stack at `ip` of either family. An IPv6 stack keeps its IPv4
/// address (the client's or the server's by `mac_last`, 1 or 2) and gets `ip/64` with
/// Duplicate Address Detection off: both ends of the pipe are ours, and DAD's second of
/// tentative address would only delay the first connect.
pub fn stack_config_ip(
    ip: IpAddr,
    mac_last: u8,
    mtu: usize,
    copy_mode: netfold::mem::CopyMode,
) -> StackConfig {
    match ip {
        IpAddr::V4(a) => stack_config(a, mac_last, mtu, copy_mode),
        IpAddr::V6(a) => {
            let v4 = if mac_last == 1 {
                CLIENT_ADDR
            } else {
                SERVER_ADDR
            };
            StackConfig {
                addrs6: Ipv6Cidr::new(a, 64).into_iter().collect(),
                dad_transmits: 0,
                ..stack_config(v4, mac_last, mtu, copy_mode)
            }
        }
    }
}

/// A netfold stack's configuration for a run: address, MTU and the copy path (`--copy`).
pub fn stack_config(
    addr: Ipv4Addr,
    mac_last: u8,
    mtu: usize,
    copy_mode: netfold::mem::CopyMode,
) -> StackConfig {
    StackConfig {
        copy_mode,
        addr,
        prefix_len: 24,
        mac: EthernetAddress([0x02, 0, 0, 0, 0, mac_last]),
        mtu,
        ..StackConfig::default()
    }
}

/// [`tcp_config`] for the in-memory link: with no delay configured, TIME-WAIT lasts 10 ms.
/// The 100 ms TIME-WAIT caps TCP_CRR at 16384 ports / 0.1 s = ~164k connections/s, which
/// netfold reached on this link once a connection's rings were recycled (the run then fails
/// with AddrNotAvailable); 10 ms is still thousands of the link's microsecond RTTs. The
/// smoltcp harness removes its sockets as soon as they reach TIME-WAIT.
fn pipe_tcp_config(p: &Params) -> tcp::Config {
    let mut c = tcp_config(p);
    if p.impair.delay_us == 0 {
        c.time_wait = Duration::from_millis(10);
    }
    c
}

/// The TCP settings a run uses: MSS from the MTU, buffers from -s/-S, and a 100 ms TIME_WAIT.
/// TCP_CRR opens tens of thousands of connections per second from one address; with the 16384
/// ephemeral ports a 1 s TIME_WAIT caps it at ~16k connections/s (Linux gets around the same
/// limit with tcp_tw_reuse). The in-memory link's RTT is microseconds, so 100 ms is still
/// thousands of RTTs of protection against old duplicates.
pub fn tcp_config(p: &Params) -> tcp::Config {
    let mut c = tcp::Config {
        mss: (p.mtu.saturating_sub(netfold::wire::tcp::IPV4_MSS_OVERHEAD)).min(65495) as u16,
        nodelay: p.nodelay,
        time_wait: Duration::from_millis(100),
        header_prediction: p.header_prediction,
        ..tcp::Config::default()
    };
    if let Some(s) = p.send_buffer {
        c.send_buffer = s;
    }
    if let Some(r) = p.recv_buffer {
        c.recv_buffer = r;
    }
    c
}

pub fn pipe_config(p: &Params) -> PipeConfig {
    let base = PipeConfig::default();
    // Frames in flight per direction: what the modelled wire holds (rate x delay / frame
    // size) plus a bottleneck queue of rate x RTT (the classic router-buffer rule B = RTT x C,
    // Villamizar & Song 1994; RTT = twice the one-way delay), at least the default queue. Without the
    // wire share a 10 ms, 1 Gbit/s path (~1 700 full frames on the wire) would drop at a
    // limit no real link of that kind has.
    let frame_bits = (p.mtu + netfold::wire::ethernet::HEADER_LEN) as u64 * 8;
    let on_wire = (p.impair.rate_bps as u128 * p.impair.delay_us as u128 / 1_000_000)
        .div_ceil(frame_bits as u128);
    let on_wire = usize::try_from(on_wire).unwrap_or(usize::MAX / 2);
    let capacity = on_wire.saturating_add(base.capacity.max(on_wire.saturating_mul(2)));
    base.mtu(p.mtu)
        .capacity(capacity)
        .loss(p.impair.loss)
        .reorder(p.impair.reorder)
        .duplicate(p.impair.duplicate)
        .corrupt(p.impair.corrupt)
        .delay(Duration::from_micros(p.impair.delay_us))
        .rate(p.impair.rate_bps)
        .seed(p.impair.seed)
}

/// Two netfold stacks joined by a pipe.
pub struct NetfoldNet {
    client: Stack,
    server: Stack,
    end_c: PipeEnd,
    end_s: PipeEnd,
    listener: Option<TcpListener>,
    udp: Option<(UdpSocket, UdpSocket, u16)>,
    tcfg: tcp::Config,
    /// The client's and the server's address (`--family`).
    client_ip: IpAddr,
    server_ip: IpAddr,
    clock: Clock,
    /// Per-side TCP state captured when a connection is closed (see `close`).
    /// The last closed connection's diagnostics per side (client, server), formatted only by
    /// `details`: formatting them at every close cost TCP_CRR ~5,000 instructions per
    /// transaction.
    final_info: [Option<tcp::ConnInfo>; 2],
    /// Zero-copy sends (`--zerocopy`): the sending connection's completions, taken as they
    /// come (the stack bounds the untaken ones).
    zc: ZcTally,
    /// Scratch for frame reads (`--read frames`), kept so a read allocates nothing.
    frames: Vec<netfold::buf::BorrowedPayload>,
}

/// The completions of one zero-copy sender, counted as they are taken.
#[derive(Default)]
pub struct ZcTally {
    done: Option<(tcp::Handle, tcp::ZcCompletions)>,
    scratch: Vec<tcp::ZcCompletion>,
    calls: u64,
    /// Buffers completed acknowledged, and completed without (the connection ended first).
    pub acked: u64,
    pub unacked: u64,
}

impl ZcTally {
    /// Takes `s`'s completions (the first call fetches its queue), every 32nd call: an
    /// application takes them in batches (Linux's reads the error queue now and then), far
    /// below the stack's bound on untaken ones.
    pub fn collect(&mut self, stack: &mut Stack, s: TcpStream) -> std::io::Result<()> {
        self.calls += 1;
        if self.calls % 32 != 1 && self.done.as_ref().is_some_and(|(h, _)| *h == s.handle()) {
            return Ok(());
        }
        let done = match &self.done {
            Some((h, d)) if *h == s.handle() => d,
            _ => &self.done.insert((s.handle(), s.zc_completions(stack)?)).1,
        };
        done.take(&mut self.scratch, usize::MAX);
        for c in self.scratch.drain(..) {
            if c.acked {
                self.acked += 1;
            } else {
                self.unacked += 1;
            }
        }
        Ok(())
    }

    /// Takes what the queue still holds (after the run).
    pub fn finish(&mut self) {
        if let Some((_, d)) = &self.done {
            d.take(&mut self.scratch, usize::MAX);
            for c in self.scratch.drain(..) {
                if c.acked {
                    self.acked += 1;
                } else {
                    self.unacked += 1;
                }
            }
        }
    }

    /// For a run's details.
    pub fn describe(&mut self) -> Option<String> {
        self.done.as_ref()?;
        self.finish();
        let out = self
            .done
            .as_ref()
            .map(|(_, d)| d.outstanding())
            .unwrap_or_default();
        Some(format!(
            "completed_acked={} completed_unacked={} outstanding_buffers={}",
            self.acked, self.unacked, out.buffers
        ))
    }
}

impl NetfoldNet {
    pub fn new(p: &Params) -> NetfoldNet {
        // Both ends are polled by this one thread, which never sleeps on the link: no
        // wake-ups, hence no fence per send (smoltcp's harness link is a `RefCell`ed queue).
        let (end_c, end_s) = Pipe::new(PipeConfig {
            wakeups: false,
            ..pipe_config(p)
        });
        let (client_ip, server_ip) = endpoints(p.family);
        NetfoldNet {
            client: Stack::new(StackConfig {
                gro: p.gro,
                ..stack_config_ip(client_ip, 1, p.mtu, p.copy_mode)
            }),
            server: Stack::new(StackConfig {
                gro: p.gro,
                ..stack_config_ip(server_ip, 2, p.mtu, p.copy_mode)
            }),
            client_ip,
            server_ip,
            end_c,
            end_s,
            listener: None,
            udp: None,
            tcfg: pipe_tcp_config(p),
            // A modelled path runs in pure virtual time (see `Clock::virtual_time`).
            clock: if p.impair.path() {
                Clock::virtual_time()
            } else {
                Clock::new()
            },
            final_info: [None; 2],
            zc: ZcTally::default(),
            frames: Vec::new(),
        }
    }

    fn stack(&mut self, side: Side) -> &mut Stack {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }
}

fn would_block<T>(r: std::io::Result<T>) -> Result<Option<T>, BoxErr> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl MemNet for NetfoldNet {
    type Conn = (Side, TcpStream);

    fn clock(&mut self) -> &mut Clock {
        &mut self.clock
    }

    fn poll(&mut self) -> Result<bool, BoxErr> {
        let now = self.clock.now();
        let a = self.client.poll(now, &mut self.end_c);
        let b = self.server.poll(now, &mut self.end_s);
        Ok(a | b)
    }

    fn next_deadline(&mut self) -> Option<netfold::time::Instant> {
        let now = self.clock.now();
        [self.client.poll_at(now), self.server.poll_at(now)]
            .into_iter()
            .flatten()
            .min()
    }

    fn listen(&mut self, port: u16) -> Result<(), BoxErr> {
        let l = TcpListener::bind(
            &mut self.server,
            SocketAddr::new(self.server_ip, port),
            64,
            self.tcfg,
        )?;
        self.listener = Some(l);
        Ok(())
    }

    fn connect(&mut self, port: u16) -> Result<Self::Conn, BoxErr> {
        let now = self.clock.now();
        let s = TcpStream::connect(
            &mut self.client,
            now,
            SocketAddr::new(self.server_ip, port),
            self.tcfg,
        )?;
        Ok((Side::Client, s))
    }

    fn accept(&mut self) -> Result<Option<Self::Conn>, BoxErr> {
        let l = self.listener.ok_or("not listening")?;
        Ok(would_block(l.accept(&mut self.server))?.map(|(s, _)| (Side::Server, s)))
    }

    fn established(&mut self, c: Self::Conn) -> Result<bool, BoxErr> {
        Ok(c.1.is_connected(self.stack(c.0))?)
    }

    fn write(&mut self, c: Self::Conn, data: &[u8]) -> Result<usize, BoxErr> {
        Ok(would_block(c.1.write(self.stack(c.0), data))?.unwrap_or(0))
    }

    fn write_zc(&mut self, c: Self::Conn, data: netfold::buf::ZcBuf) -> Result<usize, BoxErr> {
        let stack = match c.0 {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        };
        let n = would_block(c.1.send_zc(stack, data))?.map_or(0, |s| s.len);
        self.zc.collect(stack, c.1)?;
        Ok(n)
    }

    fn read(&mut self, c: Self::Conn, buf: &mut [u8]) -> Result<Option<usize>, BoxErr> {
        would_block(c.1.read(self.stack(c.0), buf))
    }

    fn post_read(&mut self, c: Self::Conn, buf: Vec<u8>) -> Result<(), BoxErr> {
        c.1.post_read(self.stack(c.0), buf)
            .map_err(|(e, _)| e.into())
    }

    fn take_read(&mut self, c: Self::Conn) -> Result<(Vec<u8>, Option<usize>), BoxErr> {
        let (buf, r) = c.1.take_read(self.stack(c.0))?;
        Ok((buf, would_block(r)?))
    }

    fn read_in_place(
        &mut self,
        c: Self::Conn,
        f: &mut dyn FnMut(&[u8], &[u8]) -> usize,
    ) -> Result<Option<usize>, BoxErr> {
        would_block(c.1.read_in_place(self.stack(c.0), f))
    }

    fn set_borrow_frames(&mut self, c: Self::Conn) -> Result<(), BoxErr> {
        Ok(c.1.set_borrow_frames(self.stack(c.0), true)?)
    }

    fn read_frames(
        &mut self,
        c: Self::Conn,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<Option<usize>, BoxErr> {
        // The frames are looked at and dropped at once: each buffer goes back to the pool
        // (through the stack's recycler, taken in at its next poll).
        let mut frames = std::mem::take(&mut self.frames);
        let r = would_block(c.1.read_frames(self.stack(c.0), &mut frames, 64));
        for fr in frames.drain(..) {
            f(&fr);
        }
        self.frames = frames;
        r
    }

    fn read_paths(&self) -> bool {
        true
    }

    fn payload_passes(&mut self, side: Side) -> Option<netfold::iface::counters::PayloadPasses> {
        Some(self.stack(side).counters().payload_passes())
    }

    fn shutdown_write(&mut self, c: Self::Conn) -> Result<(), BoxErr> {
        Ok(c.1.shutdown_write(self.stack(c.0))?)
    }

    fn close(&mut self, c: Self::Conn) -> Result<(), BoxErr> {
        // The connection's final buffer sizes, window scale and cwnd, for the report.
        if let Ok(i) = self.stack(c.0).tcp().conn_info(c.1.handle()) {
            self.final_info[c.0 as usize] = Some(i);
        }
        Ok(c.1.close(self.stack(c.0))?)
    }

    fn udp_open(&mut self, port: u16) -> Result<(), BoxErr> {
        let srv = UdpSocket::bind(&mut self.server, SocketAddr::new(self.server_ip, port))?;
        let cli = UdpSocket::bind(&mut self.client, SocketAddr::new(self.client_ip, 0))?;
        self.udp = Some((cli, srv, port));
        Ok(())
    }

    fn udp_send(&mut self, data: &[u8]) -> Result<bool, BoxErr> {
        let (cli, _, port) = self.udp.ok_or("udp not open")?;
        Ok(would_block(cli.send_to(
            &mut self.client,
            data,
            SocketAddr::new(self.server_ip, port),
        ))?
        .is_some())
    }

    fn udp_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, BoxErr> {
        let (_, srv, _) = self.udp.ok_or("udp not open")?;
        Ok(would_block(srv.recv_from(&mut self.server, buf))?.map(|(n, _)| n))
    }

    fn details(&mut self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        for (side, i) in ["client", "server"].into_iter().zip(self.final_info) {
            if let Some(i) = i {
                m.insert(
                    format!("{side}_tcp_final"),
                    format!(
                        "recv_buffer={} send_buffer={} rcv_wscale={} snd_wnd={} cwnd={} srtt_us={}",
                        i.recv_buffer,
                        i.send_buffer,
                        i.rcv_wscale,
                        i.snd_wnd,
                        i.cwnd,
                        i.srtt.map_or(0, |d| d.total_micros())
                    )
                    .into(),
                );
            }
        }
        for (k, e) in [
            ("pipe_client_tx", &self.end_c),
            ("pipe_server_tx", &self.end_s),
        ] {
            let st = e.stats();
            m.insert(
                k.into(),
                format!(
                    "sent={} dropped_full={} dropped_loss={}",
                    st.sent, st.dropped_full, st.dropped_loss
                )
                .into(),
            );
        }
        if let Some(z) = self.zc.describe() {
            m.insert("zerocopy".into(), z.into());
        }
        m.insert(
            "client_counters".into(),
            super::counters_json(&self.client.counters()),
        );
        m.insert(
            "server_counters".into(),
            super::counters_json(&self.server.counters()),
        );
        m
    }
}

pub fn run(p: &Params) -> Result<Measurement, BoxErr> {
    if p.threads > 1 {
        return super::netfold_threads::run(p);
    }
    let mut net = NetfoldNet::new(p);
    super::memnet::run(&mut net, p)
}
