//! The progress line of `kernbench-host run`: a spinner with the elapsed
//! wall time, the rows reported so far and the last size, on stderr. It
//! appears only once a run has taken a second (`KERNBENCH_PROGRESS_AFTER`
//! seconds) and only when stderr is a terminal, so quick runs, pipes and CI
//! logs stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kernbench::runtime::session::ReportRecord;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a run goes before its progress line appears, unless
/// `KERNBENCH_PROGRESS_AFTER` gives another number of seconds.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// The delay before the progress line: [`SHOW_AFTER`], or the seconds in
/// `KERNBENCH_PROGRESS_AFTER` when that is a finite number ≥ 0.
fn show_after(setting: Option<&str>) -> Duration {
    setting
        .and_then(|s| s.trim().parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(SHOW_AFTER)
}

/// The progress line of one run; [`RunProgress::finish`] clears it.
pub struct RunProgress {
    bar: ProgressBar,
    done: Arc<AtomicBool>,
}

impl RunProgress {
    /// A progress line for running `bench` (hidden until [`show_after`],
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
            let delay = show_after(std::env::var("KERNBENCH_PROGRESS_AFTER").ok().as_deref());
            let (b, d) = (bar.clone(), done.clone());
            std::thread::Builder::new()
                .name("kernbench-progress".into())
                .spawn(move || {
                    std::thread::sleep(delay);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_is_a_second_unless_set_to_a_number_of_seconds() {
        assert_eq!(show_after(None), SHOW_AFTER);
        assert_eq!(show_after(Some("0")), Duration::ZERO);
        assert_eq!(show_after(Some(" 2.5 ")), Duration::from_millis(2500));
        for bad in ["", "soon", "-1", "inf", "NaN"] {
            assert_eq!(show_after(Some(bad)), SHOW_AFTER, "{bad:?}");
        }
    }
}
