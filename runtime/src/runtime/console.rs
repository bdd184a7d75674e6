//! Where the guests' captured output goes (DESIGN §7): each instance's
//! stdout and stderr, printed to the host's stderr with the instance's
//! name when the instance ends ([`FlushOnDrop`]), at once or held for a
//! run that may be discarded ([`Console::held`]).
//!
//! A Python or JavaScript guest's uncaught exception is a traceback (a
//! stack) on stderr, and every rank that runs into the same typo prints the
//! same one. The console sets these blocks aside instead of printing them:
//! each distinct one is printed once, naming the instances that printed
//! it, and none that the run's error already reports (`the guest raised
//! …` / `the guest threw …`, with the author's frames: see `trap`). What
//! the interpreters print after it (componentize-py's panic,
//! StarlingMonkey's abort notice) is dropped.

use super::wasi::Output;
use crate::budget::human_bytes;
use std::sync::{Arc, Mutex, MutexGuard};

/// The first line of a Python traceback.
const TRACEBACK: &str = "Traceback (most recent call last):";

/// Where a run's guests' output goes: to stderr at once, or held (a run
/// that may be discarded: a split that could give up and run again on one
/// partition, whose guests print the same again), to be printed if the run
/// is kept ([`Console::release`]). Clones share one console.
#[derive(Clone, Default)]
pub struct Console(Arc<Inner>);

#[derive(Default)]
struct Inner {
    held: Option<Mutex<Vec<String>>>,
    tracebacks: Mutex<Vec<Traceback>>,
}

/// One distinct traceback and the instances that printed it.
struct Traceback {
    lines: Vec<String>,
    /// What a run's error says when it reports this exception.
    reported_as: String,
    who: Vec<String>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Console {
    /// Output held until [`Console::release`] (dropped if never released).
    pub fn held() -> Self {
        Console(Arc::new(Inner {
            held: Some(Mutex::default()),
            tracebacks: Mutex::default(),
        }))
    }

    fn line(&self, line: String) {
        match &self.0.held {
            Some(held) => locked(held).push(line),
            None => eprintln!("{line}"),
        }
    }

    fn set_aside(&self, who: &str, lines: Vec<String>, reported_as: String) {
        let mut tracebacks = locked(&self.0.tracebacks);
        match tracebacks.iter_mut().find(|t| t.lines == lines) {
            Some(t) => t.who.push(who.to_string()),
            None => tracebacks.push(Traceback {
                lines,
                reported_as,
                who: vec![who.to_string()],
            }),
        }
    }

    /// The tracebacks set aside, as printed lines, less those `error`
    /// reports. Drains them.
    fn traceback_lines(&self, error: Option<&str>) -> Vec<String> {
        let tracebacks = std::mem::take(&mut *locked(&self.0.tracebacks));
        let mut out = Vec::new();
        for t in tracebacks {
            if error.is_some_and(|e| e.contains(&t.reported_as)) {
                continue;
            }
            let first = &t.who[0];
            out.extend(t.lines.iter().map(|l| format!("[{first}] {l}")));
            if t.who.len() > 1 {
                const SHOWN: usize = 4;
                let others = &t.who[1..];
                let mut names = others[..others.len().min(SHOWN)].join(", ");
                if others.len() > SHOWN {
                    names.push_str(&format!(" and {} more", others.len() - SHOWN));
                }
                out.push(format!(
                    "[{first}] (the same traceback on {} other instance{}: {names})",
                    others.len(),
                    if others.len() == 1 { "" } else { "s" }
                ));
            }
        }
        out
    }

    /// Print what was held, in the order it came, then the tracebacks.
    pub fn release(&self) {
        if let Some(held) = &self.0.held {
            let lines = std::mem::take(&mut *locked(held));
            lines.iter().for_each(|l| eprintln!("{l}"));
        }
        self.traceback_lines(None)
            .iter()
            .for_each(|l| eprintln!("{l}"));
    }

    /// The run ended with `error` (None: it succeeded): print the
    /// tracebacks set aside that it does not report. (A console dropped
    /// without this prints them all; a held one drops them with the rest.)
    pub fn finish(&self, error: Option<&str>) {
        if self.0.held.is_none() {
            self.traceback_lines(error)
                .iter()
                .for_each(|l| eprintln!("{l}"));
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.held.is_none() {
            let tracebacks = std::mem::take(&mut *locked(&self.tracebacks));
            for t in tracebacks {
                t.lines.iter().for_each(|l| eprintln!("[{}] {l}", t.who[0]));
            }
        }
    }
}

/// What the interpreters print when a guest's exception escapes, after
/// its traceback: componentize-py's runtime panics (three lines),
/// StarlingMonkey says it aborts (and a blank line). They say nothing to
/// the author, whose traceback is in the error.
fn interpreter_noise(lines: &[&str], i: usize) -> bool {
    const PANIC: &str = "Python function threw an unexpected exception";
    const JS_ABORT: &str = "Redirecting call to abort() to mozalloc_abort";
    let at = |j: usize| lines.get(j).copied().unwrap_or("");
    let panic_head = |l: &str| l.starts_with("thread '") && l.contains(" panicked at runtime/src/");
    match at(i) {
        l if l == PANIC || l == JS_ABORT => true,
        l if panic_head(l) => at(i + 1) == PANIC,
        l if l.starts_with("note: run with `RUST_BACKTRACE=1`") => i > 0 && at(i - 1) == PANIC,
        "" => i > 0 && at(i - 1) == JS_ABORT,
        _ => false,
    }
}

/// The exception block starting at `lines[i]`: its end (exclusive) and
/// what a run's error says when it reports it. A Python traceback runs
/// from [`TRACEBACK`] through its exception line; a JavaScript one is the
/// message, `Stack:` and the indented frames. None if `lines[i]` starts
/// none, or a Python one is cut short (no exception line: printed as is).
fn exception_block(lines: &[&str], i: usize) -> Option<(usize, String)> {
    let indented_from = |j: usize| {
        (j..lines.len())
            .find(|&k| !lines[k].starts_with(' '))
            .unwrap_or(lines.len())
    };
    if lines[i] == TRACEBACK {
        let end = indented_from(i + 1);
        let exception = lines.get(end).filter(|l| !l.trim().is_empty())?;
        return Some((end + 1, format!("the guest raised {exception}")));
    }
    if !lines[i].trim().is_empty() && lines.get(i + 1) == Some(&"Stack:") {
        return Some((
            indented_from(i + 2),
            format!("the guest threw {}", lines[i]),
        ));
    }
    None
}

/// Print captured output to the console, each line prefixed with `[who]`,
/// and say how much was cut; Python tracebacks are set aside (see the
/// module's doc).
pub fn flush_output(who: &str, out: &Output) {
    for pipe in [&out.stdout, &out.stderr] {
        let (bytes, dropped) = pipe.contents();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            if let Some((end, reported_as)) = exception_block(&lines, i) {
                let block = lines[i..end].iter().map(|l| l.to_string()).collect();
                out.console.set_aside(who, block, reported_as);
                i = end;
                // The blank line the interpreter ends it with.
                if lines.get(i).is_some_and(|l| l.trim().is_empty()) {
                    i += 1;
                }
                continue;
            }
            if !interpreter_noise(&lines, i) {
                out.console.line(format!("[{who}] {}", lines[i]));
            }
            i += 1;
        }
        if dropped > 0 {
            out.console.line(format!(
                "[{who}] ... output truncated at {} ({} more not shown)",
                human_bytes(bytes.len() as u64),
                human_bytes(dropped)
            ));
        }
    }
}

/// Prints an instance's captured output when dropped: when the instance
/// ends, and also when a stalled run is torn down, so that what a
/// deadlocked kernel printed is not lost.
pub struct FlushOnDrop {
    who: String,
    out: Output,
}

impl FlushOnDrop {
    pub fn new(who: String, out: Output) -> Self {
        FlushOnDrop { who, out }
    }
}

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        flush_output(&self.who, &self.out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traceback(name: &str) -> Vec<String> {
        [
            TRACEBACK,
            "  File \"/1/algo.py\", line 10, in kernel",
            &format!("NameError: name '{name}' is not defined"),
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn each_distinct_traceback_is_told_once_unless_the_error_reports_it() {
        let c = Console::held();
        let raised = |n: &str| format!("the guest raised NameError: name '{n}' is not defined");
        for who in ["pe0", "pe1", "pe2"] {
            c.set_aside(who, traceback("x"), raised("x"));
        }
        c.set_aside("pe3", traceback("y"), raised("y"));
        let said = c.traceback_lines(None);
        assert_eq!(
            said,
            [
                "[pe0] Traceback (most recent call last):",
                "[pe0]   File \"/1/algo.py\", line 10, in kernel",
                "[pe0] NameError: name 'x' is not defined",
                "[pe0] (the same traceback on 2 other instances: pe1, pe2)",
                "[pe3] Traceback (most recent call last):",
                "[pe3]   File \"/1/algo.py\", line 10, in kernel",
                "[pe3] NameError: name 'y' is not defined",
            ]
        );
        assert!(c.traceback_lines(None).is_empty(), "drained");
        // The error reports x's: only y's is printed.
        c.set_aside("pe0", traceback("x"), raised("x"));
        c.set_aside("pe3", traceback("y"), raised("y"));
        let error =
            "kernel on pe0 failed: the guest raised NameError: name 'x' is not defined\n  ...";
        let said = c.traceback_lines(Some(error));
        assert_eq!(said.len(), 3);
        assert!(said[2].ends_with("name 'y' is not defined"), "{said:?}");
    }

    #[test]
    fn an_exception_block_ends_after_its_exception_or_its_frames() {
        let lines = [
            "before",
            TRACEBACK,
            "  File \"a.py\", line 1, in f",
            "    f()",
            "ValueError: bad",
            "",
            "after",
        ];
        assert_eq!(exception_block(&lines, 0), None);
        let raised = "the guest raised ValueError: bad".to_string();
        assert_eq!(exception_block(&lines, 1), Some((5, raised)));
        // Cut short (no exception line): not a block.
        assert_eq!(exception_block(&lines[..4], 1), None);
        let js = [
            "tl.lod is not a function",
            "Stack:",
            "  kernel@user/a.js:6:18",
            "  kernel@kernbench.js:179:11",
            "",
            "Redirecting call to abort() to mozalloc_abort",
            "",
        ];
        let threw = "the guest threw tl.lod is not a function".to_string();
        assert_eq!(exception_block(&js, 0), Some((4, threw)));
        assert!(interpreter_noise(&js, 5) && interpreter_noise(&js, 6));
        assert!(!interpreter_noise(&js, 4));
    }
}
