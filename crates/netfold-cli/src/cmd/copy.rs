use super::CmdResult;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {}

impl Args {
    pub fn default_run() -> Self {
        Args {}
    }
}

pub fn run(_a: Args) -> CmdResult {
    Err("not yet".into())
}
