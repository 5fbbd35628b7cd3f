//! The benchmark harness shared by `netfold stream` and friends: parameters, the byte pattern,
//! the clock, per-stack runners and report formats.

pub mod affinity;
pub mod clock;
pub mod kernel;

pub mod pattern;
pub mod report;
pub mod smoltcp_pipe;
pub mod units;

/// Link impairments for the in-memory pipe (fractions in [0, 1]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Impair {
    pub loss: f64,
    pub reorder: f64,
    pub duplicate: f64,
    pub corrupt: f64,
    pub seed: u64,
}

/// One TCP_STREAM configuration.
#[derive(Debug, Clone)]
pub struct StreamParams {
    /// Stop after this many bytes (`--bytes`)...
    pub bytes: Option<u64>,
    /// ...or after this many seconds (`-l`).
    pub duration: Option<f64>,
    /// Bytes per send call (`-m`).
    pub send_size: usize,
    /// Bytes per receive call (`-M`).
    pub recv_size: usize,
    pub mtu: usize,
    pub nodelay: bool,
    pub send_buffer: Option<usize>,
    pub recv_buffer: Option<usize>,
    pub impair: Impair,
    pub verify: bool,
}
