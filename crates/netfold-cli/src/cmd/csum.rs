use super::CmdResult;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {}

pub fn run(_a: Args) -> CmdResult {
    Err("not yet".into())
}
