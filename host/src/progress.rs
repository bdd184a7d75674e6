//! The progress line of `kernbench-host run`: a spinner with the elapsed
//! wall time, the rows reported so far and the last size, on stderr. It
//! appears only once a run has taken a second and only when stderr is a
//! terminal, so quick runs, pipes and CI logs stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kernbench::runtime::session::ReportRecord;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a run goes before its progress line appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// The progress line of one run; [`RunProgress::finish`] clears it.
pub struct RunProgress {
    bar: ProgressBar,
    done: Arc<AtomicBool>,
}

impl RunProgress {
    /// A progress line for running `bench` (hidden until [`SHOW_AFTER`],
    /// and for good when stderr is not a terminal).
    pub fn start(bench: &str) -> RunProgress {
        let bar = ProgressBar::hidden();
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {prefix}: {msg}")
                .expect("a valid template"),
        );
        bar.set_prefix(bench.to_string());
        bar.set_message("starting");
        let done = Arc::new(AtomicBool::new(false));
        if std::io::stderr().is_terminal() {
            let (b, d) = (bar.clone(), done.clone());
            std::thread::Builder::new()
                .name("kernbench-progress".into())
                .spawn(move || {
                    std::thread::sleep(SHOW_AFTER);
                    if !d.load(Ordering::Acquire) && !b.is_finished() {
                        b.set_draw_target(ProgressDrawTarget::stderr());
                        b.enable_steady_tick(Duration::from_millis(100));
                    }
                })
                .ok();
        }
        RunProgress { bar, done }
    }

    /// The observer to hand to the run: counts rows, shows the last one.
    pub fn observer(&self) -> kernbench::runtime::RowObserver {
        let bar = self.bar.clone();
        Arc::new(move |r: &ReportRecord| {
            bar.inc(1);
            bar.set_message(format!(
                "{} rows reported, last: {} of {}",
                bar.position(),
                r.collective,
                kernbench::budget::human_bytes(r.size_bytes)
            ));
        })
    }

    /// Remove the line before the results are printed.
    pub fn finish(self) {
        self.done.store(true, Ordering::Release);
        self.bar.finish_and_clear();
    }
}
