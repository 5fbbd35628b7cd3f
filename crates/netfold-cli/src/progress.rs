//! A progress bar on stderr for runs expected to take more than two seconds, only when stderr is
//! a terminal (so pipes and CI logs stay clean).

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// `durations`: the expected seconds of each planned run (0 when unknown).
    pub fn new(durations: &[f64]) -> Self {
        let total: f64 = durations.iter().sum();
        let show =
            std::io::stderr().is_terminal() && (total > 2.0 || durations.len() > 1 && total == 0.0);
        let bar = show.then(|| {
            let b = ProgressBar::new(durations.len() as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(200));
            b
        });
        Progress { bar }
    }

    pub fn start(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
    }

    pub fn done(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
