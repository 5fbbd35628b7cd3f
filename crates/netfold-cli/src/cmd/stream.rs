//! `netfold stream|maerts|rr|crr|udp-stream`: thin wrappers over [`super::perf`].

use super::perf::{self, Args};
use super::CmdResult;
use crate::bench::Test;

pub fn stream(a: Args) -> CmdResult {
    perf::run(Test::Stream, a)
}
pub fn maerts(a: Args) -> CmdResult {
    perf::run(Test::Maerts, a)
}
pub fn rr(a: Args) -> CmdResult {
    perf::run(Test::Rr, a)
}
pub fn crr(a: Args) -> CmdResult {
    perf::run(Test::Crr, a)
}
pub fn udp_stream(a: Args) -> CmdResult {
    perf::run(Test::UdpStream, a)
}
