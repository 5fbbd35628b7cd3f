//! The benchmark harness shared by `netfold stream|maerts|rr|crr|udp-stream`: parameters, the
//! byte pattern, the clock, one runner per stack, statistics and report formats.

pub mod affinity;
pub mod clock;
pub mod emu;
pub mod kernel;
pub mod latency;
pub mod machine;
pub mod memnet;
pub mod netfold_pipe;
pub mod netfold_tap;
pub mod netfold_threads;
pub mod pattern;
pub mod remote;
pub mod remote_net;
pub mod report;
pub mod shards;
pub mod smoltcp_emu;
pub mod smoltcp_pipe;
pub mod smoltcp_tap;
pub mod stats;
pub mod udp;
pub mod units;
pub mod xdp;

/// Link impairments for the in-memory pipe (fractions in [0, 1]), and its path model: a fixed
/// one-way delay and a serialisation rate (a long fat path).
#[derive(Debug, Clone, Copy, Default)]
pub struct Impair {
    pub loss: f64,
    pub reorder: f64,
    pub duplicate: f64,
    pub corrupt: f64,
    pub seed: u64,
    /// One-way delay in microseconds (`--delay`); 0 = none.
    pub delay_us: u64,
    /// Link rate in bits/s (`--rate`); 0 = unlimited.
    pub rate_bps: u64,
}

impl Impair {
    pub fn any(&self) -> bool {
        self.loss + self.reorder + self.duplicate + self.corrupt > 0.0 || self.path()
    }
    /// A delay or rate was asked for.
    pub fn path(&self) -> bool {
        self.delay_us > 0 || self.rate_bps > 0
    }
}

/// Where the client and server threads run (the OLS 2002 study's Table 1: IRQ/process affinity).
/// The IP family a run's connections use (`--family`). netfold's stacks are dual-stack
/// either way; with `V6` the connection runs between 2001:2::1 and 2001:2::2 (RFC 5180's
/// benchmarking prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    #[default]
    V4,
    V6,
}

impl Family {
    /// As the report prints it.
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Pin {
    /// Client on CPU 0, server on CPU 1.
    #[default]
    Split,
    /// Both on CPU 0.
    Same,
    /// Not pinned: the scheduler decides.
    None,
}

impl Pin {
    /// Applies the policy to the calling thread, which plays `server` or the client.
    pub fn apply(self, server: bool) {
        match self {
            Pin::Split => {
                affinity::pin_current_thread(usize::from(server));
            }
            Pin::Same => {
                affinity::pin_current_thread(0);
            }
            Pin::None => {}
        }
    }
}

/// netperf's test names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// Client sends, server receives.
    Stream,
    /// Server sends, client receives ("stream" backwards).
    Maerts,
    /// Request/response on one connection.
    Rr,
    /// Connect, request, response, close per transaction.
    Crr,
    /// UDP datagrams client to server.
    UdpStream,
}

impl Test {
    pub fn netperf_name(self) -> &'static str {
        match self {
            Test::Stream => "TCP_STREAM",
            Test::Maerts => "TCP_MAERTS",
            Test::Rr => "TCP_RR",
            Test::Crr => "TCP_CRR",
            Test::UdpStream => "UDP_STREAM",
        }
    }
    pub fn is_transactional(self) -> bool {
        matches!(self, Test::Rr | Test::Crr)
    }
}

/// How the receiving netfold application reads in TCP_STREAM/TCP_MAERTS (`--read`); the
/// other stacks always read into a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReadPath {
    /// A posted read: the receive buffer is lent to the connection and in-order bytes go from
    /// the frames straight into it, the checksum verified in that copy (single-pass receive;
    /// what a blocking recv() is in Linux 2.4's model).
    #[default]
    Posted,
    /// `read` into the buffer: the bytes are copied out of the receive ring.
    Copy,
    /// A borrowing read: the bytes are looked at where they lie in the receive ring.
    InPlace,
    /// A frame read: in-order payload stays in the received packet buffers and is handed to
    /// the application as borrowed frames, returned to the pool when dropped (no copy; the
    /// checksum verified in place unless the device did).
    Frames,
}

impl ReadPath {
    pub fn name(self) -> &'static str {
        match self {
            ReadPath::Posted => "posted",
            ReadPath::Copy => "copy",
            ReadPath::InPlace => "in-place",
            ReadPath::Frames => "frames",
        }
    }
}

/// One configuration of one test.
#[derive(Debug, Clone)]
pub struct Params {
    pub test: Test,
    /// Streams: stop after this many bytes...
    pub bytes: Option<u64>,
    /// RR/CRR: ...or this many transactions...
    pub transactions: Option<u64>,
    /// ...or after this many seconds (`-l`).
    pub duration: Option<f64>,
    /// Bytes per send call (`-m`).
    pub send_size: usize,
    /// Bytes per receive call (`-M`).
    pub recv_size: usize,
    /// RR/CRR request and response sizes (`-r REQ,RESP`).
    pub req_size: usize,
    pub resp_size: usize,
    pub mtu: usize,
    pub nodelay: bool,
    pub send_buffer: Option<usize>,
    pub recv_buffer: Option<usize>,
    pub impair: Impair,
    pub verify: bool,
    /// netfold: 1 = both stacks on one thread; 2 = one pinned thread per stack.
    pub threads: usize,
    /// Thread placement for two-thread runs (kernel, netfold --threads 2).
    pub pin: Pin,
    /// netfold: GRO on the receive path (`--gro on|off`).
    pub gro: bool,
    /// netfold: TCP header prediction (`--header-prediction on|off`, `tcp::Config`).
    pub header_prediction: bool,
    /// netfold: the copy path of the netfold stacks (`StackConfig::copy_mode`): its copy
    /// kernels with the fused copy+checksum, or the 2002 baseline (memcpy + separate checksum
    /// pass, `--copy baseline`).
    pub copy_mode: netfold::mem::CopyMode,
    /// The user asked for this MTU (`--mtu`): a link with its own MTU (the kernel's loopback)
    /// must then be set to it, not silently keep its own.
    pub mtu_given: bool,
    /// UDP_STREAM: target sending rate in bits/s (`-b`), None = as fast as possible.
    pub rate_bps: Option<u64>,
    /// netfold: stacks per side, one thread each ([`shards`]); 0 = not sharded.
    pub shards: usize,
    /// netfold --shards: connections, spread round-robin over the shards.
    pub streams: usize,
    /// The IP family of the connections (`--family`).
    pub family: Family,
    /// netfold: how the receiver reads in stream tests (`--read`).
    pub read_path: ReadPath,
    /// netfold stream/maerts: the sender lends its messages to the stack (zero-copy send,
    /// `--zerocopy`) instead of writing copies.
    pub zerocopy: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            test: Test::Stream,
            bytes: None,
            transactions: None,
            duration: Some(1.0),
            send_size: 65536,
            recv_size: 65536,
            req_size: 1,
            resp_size: 1,
            mtu: 1500,
            nodelay: false,
            send_buffer: None,
            recv_buffer: None,
            impair: Impair::default(),
            verify: false,
            threads: 1,
            pin: Pin::Split,
            gro: true,
            header_prediction: true,
            copy_mode: netfold::mem::CopyMode::Kernels,
            mtu_given: false,
            rate_bps: None,
            shards: 0,
            streams: 1,
            family: Family::V4,
            read_path: ReadPath::Posted,
            zerocopy: false,
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct Measurement {
    /// Payload bytes that arrived (streams) or moved in both directions (RR/CRR).
    pub bytes: u64,
    pub transactions: u64,
    pub elapsed_s: f64,
    pub verified: Option<bool>,
    /// CPU seconds consumed by the threads doing the work (getrusage RUSAGE_THREAD).
    pub cpu_s: f64,
    pub details: serde_json::Map<String, serde_json::Value>,
    /// RR/CRR: the time of each transaction, from the client's send to the end of the
    /// response (CRR: from connect to the response).
    pub latency: Option<latency::Histogram>,
    /// UDP_STREAM: both sides' counts.
    pub udp: Option<udp::UdpStats>,
    /// netfold streams: the passes over payload bytes at the sending and at the receiving
    /// stack during the transfer.
    pub passes: Option<Passes>,
}

/// The passes over payload bytes of one transfer, at each end. `None` for an end that is not
/// a netfold stack: over a TAP or TUN the other end is the Linux kernel, whose passes netfold
/// cannot count (the reports show it as "n/a").
#[derive(Debug, Clone, Copy, Default)]
pub struct Passes {
    pub sender: Option<netfold::iface::counters::PayloadPasses>,
    pub receiver: Option<netfold::iface::counters::PayloadPasses>,
}

/// A netfold stack's counters as a JSON object: each layer an object of counter name ->
/// number (`{"tcp": {"segments_in": 1234, ...}, "hist": {"frames_per_poll[1]": 5, ...}}`),
/// from the counters' text form (one `layer name value` line each).
pub fn counters_json(c: &impl std::fmt::Display) -> serde_json::Value {
    let mut layers = serde_json::Map::new();
    for line in c.to_string().lines() {
        let mut w = line.split_whitespace();
        let (Some(layer), Some(name), Some(v), None) = (w.next(), w.next(), w.next(), w.next())
        else {
            continue;
        };
        let Ok(v) = v.parse::<u64>() else { continue };
        layers
            .entry(layer)
            .or_insert_with(|| serde_json::Value::Object(Default::default()))
            .as_object_mut()
            .map(|m| m.insert(name.into(), v.into()));
    }
    layers.into()
}

#[cfg(test)]
mod counters_tests {
    #[test]
    fn counters_become_objects_of_numbers() {
        let v = super::counters_json(&netfold::iface::Counters {
            polls: 7,
            ..Default::default()
        });
        assert_eq!(v["batch"]["polls"], 7);
        assert_eq!(v["tcp"]["segments_in"], 0);
        assert!(v["hist"]["frames_per_poll[1]"].is_u64(), "{v}");
    }
}
