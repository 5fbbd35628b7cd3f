//! `netfold stream|maerts|rr|crr|udp-stream`: thin wrappers over [`super::perf`].

use super::perf::{self, RrArgs, StreamArgs, UdpArgs};
use super::CmdResult;
use crate::bench::Test;

pub fn stream(a: StreamArgs) -> CmdResult {
    perf::run(Test::Stream, a.into())
}
pub fn maerts(a: StreamArgs) -> CmdResult {
    perf::run(Test::Maerts, a.into())
}
pub fn rr(a: RrArgs) -> CmdResult {
    perf::run(Test::Rr, a.into())
}
pub fn crr(a: RrArgs) -> CmdResult {
    perf::run(Test::Crr, a.into())
}
pub fn udp_stream(a: UdpArgs) -> CmdResult {
    perf::run(Test::UdpStream, a.into())
}
