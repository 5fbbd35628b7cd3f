//! One module per subcommand. Each has `Args` (clap) and `run(Args) -> CmdResult`.

pub mod copy;
pub mod csum;
pub mod emulate;
pub mod paper;
pub mod perf;
pub mod remote;
pub mod run;
pub mod serve;
pub mod serve_shards;
pub mod server;
pub mod soak;
pub mod stream;
pub mod timing;

/// What a subcommand returns: its exit code, or an error message for stderr (exit 2).
pub type CmdResult = Result<std::process::ExitCode, Box<dyn std::error::Error>>;
