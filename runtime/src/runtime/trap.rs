//! Turning wasmtime errors (guest traps, host errors raised in imports)
//! into messages that point at the user's code.

use super::wasi::Output;

/// Guest backtraces are cut after this many frames (deep recursion).
const MAX_FRAMES: usize = 24;

/// Render a wasmtime error (a trap or a host error raised in an import):
/// the causes first ("tl.send(...) on sip0...: direction ..." or "wasm
/// trap: ..."), then the guest backtrace, when there is one.
pub fn describe_wasm_error(err: &wasmtime::Error) -> String {
    let backtrace = err
        .downcast_ref::<wasmtime::WasmBacktrace>()
        .map(|b| b.to_string());
    let skip = usize::from(backtrace.is_some());
    let mut causes: Vec<String> = Vec::new();
    for c in err.chain().skip(skip) {
        let c = c.to_string();
        if !causes.iter().any(|prev| prev.contains(&c)) {
            causes.push(c);
        }
    }
    if causes.is_empty() {
        causes.push(err.to_string());
    }
    // wasmtime's words for a budget that ran out inside wasm code, in ours.
    match err.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::OutOfFuel) => causes.push(
            "its fuel budget (wasm instructions per instance) ran out: a runaway loop? raise it with --fuel"
                .into(),
        ),
        Some(wasmtime::Trap::Interrupt) => causes.push(
            "the run's wall-clock deadline passed while it ran; raise it with --deadline (0 = none)"
                .into(),
        ),
        _ => {}
    }
    let mut out = causes.join(": ");
    if let Some(bt) = backtrace {
        let frames: Vec<&str> = bt
            .trim_end()
            .trim_start_matches("error while executing at wasm backtrace:")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        out.push_str("\n  guest backtrace:");
        for f in frames.iter().take(MAX_FRAMES) {
            out.push('\n');
            out.push_str(f);
        }
        if frames.len() > MAX_FRAMES {
            out.push_str(&format!(
                "\n    ... {} more frames",
                frames.len() - MAX_FRAMES
            ));
        }
    }
    out
}

/// A Rust guest's panic, as its runtime printed it to stderr:
/// (message, location).
fn rust_panic(stderr: &str) -> Option<(String, String)> {
    let mut lines = stderr.lines();
    let head = lines.by_ref().find(|l| l.contains(" panicked at "))?;
    let location = head
        .split(" panicked at ")
        .nth(1)?
        .trim_end_matches(':')
        .to_string();
    let message: Vec<&str> = lines
        .take_while(|l| !l.starts_with("note: ") && !l.starts_with("stack backtrace"))
        .collect();
    Some((message.join("\n"), location))
}

/// A Python guest's uncaught exception, as the interpreter printed it to
/// stderr before componentize-py's runtime aborted: the exception line and
/// the frames of the author's code (the SDK's and the glue's frames, under
/// componentize-py's `/0/` … search paths, are left out; paths are shown
/// without that prefix).
fn python_exception(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.starts_with("Traceback (most recent call last):"))?;
    let mut frames = Vec::new();
    let mut exception = None;
    let mut i = start + 1;
    while i < lines.len() {
        let l = lines[i];
        if let Some(rest) = l.trim_start().strip_prefix("File \"") {
            let (path, tail) = rest.split_once('"')?;
            // componentize-py names search path k `/k/`: the SDK and the
            // glue are the first, the author's directory the last.
            let shown = match path.strip_prefix('/').and_then(|p| p.split_once('/')) {
                Some((k, p)) if k.chars().all(|c| c.is_ascii_digit()) => {
                    if p.starts_with("kernbench/") || p.starts_with("kernbench_app") {
                        None
                    } else {
                        Some(p)
                    }
                }
                _ => Some(path),
            };
            if let Some(p) = shown {
                frames.push(format!("  File \"{p}\"{tail}"));
                // The source line, when the interpreter printed it.
                if let Some(src) = lines.get(i + 1).filter(|s| s.starts_with("    ")) {
                    frames.push(format!("  {}", src.trim_end()));
                    i += 1;
                }
            }
        } else if !l.starts_with(' ') && !l.trim().is_empty() {
            exception = Some(l.to_string());
            break;
        }
        i += 1;
    }
    let exception = exception?;
    let mut out = format!("the guest raised {exception}");
    if !frames.is_empty() {
        out.push_str("\n  Traceback (most recent call last), the guest's code:\n");
        out.push_str(&frames.join("\n"));
    }
    Some(out)
}

/// A JavaScript guest's uncaught exception, as StarlingMonkey printed it
/// to stderr before aborting: the message, `Stack:` and frames
/// `function@file:line:col`. Only the author's frames are kept (the
/// builder copies the author's modules under `user/`; the SDK's
/// `kernbench.js` and componentize-js's initializer are left out).
fn js_exception(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let stack = lines.iter().rposition(|l| *l == "Stack:")?;
    let message = lines[..stack].last().filter(|m| !m.trim().is_empty())?;
    let frames: Vec<String> = lines[stack + 1..]
        .iter()
        .take_while(|l| l.starts_with(' '))
        .filter_map(|l| {
            let (function, at) = l.trim().split_once('@')?;
            let at = at.strip_prefix("user/")?;
            let function = if function.is_empty() {
                "(anonymous)"
            } else {
                function
            };
            Some(format!("  {function} at {at}"))
        })
        .collect();
    let mut out = format!("the guest threw {message}");
    if !frames.is_empty() {
        out.push_str("\n  Stack (innermost first), the guest's code:\n");
        out.push_str(&frames.join("\n"));
    }
    Some(out)
}

/// How the Rust SDK ends a kernel whose batched `tl` call the host refused
/// (`guest-sdk/src/batch_wasm.rs`): it panics with the host's message and
/// this, then the place of the call. That place, not the SDK's, is where
/// the kernel went wrong.
const BATCHED_CALL_AT: &str = " (the tl call at ";

/// [`describe_wasm_error`], led by the guest's own panic message when the
/// trap is a Rust guest panicking (a bare `unreachable` says nothing).
pub fn describe_guest_error(err: &wasmtime::Error, out: &Output) -> String {
    let described = describe_wasm_error(err);
    if !matches!(
        err.downcast_ref::<wasmtime::Trap>(),
        Some(wasmtime::Trap::UnreachableCodeReached)
    ) {
        return described;
    }
    let (stderr, _) = out.stderr.contents();
    let stderr = String::from_utf8_lossy(&stderr);
    // A Python exception says everything: the interpreter's own frames
    // (its runtime's panic, the wasm backtrace) say nothing to the author.
    if let Some(e) = python_exception(&stderr).or_else(|| js_exception(&stderr)) {
        return e;
    }
    match rust_panic(&stderr) {
        Some((message, _)) if message.contains(BATCHED_CALL_AT) => {
            format!("{message}\n{described}")
        }
        Some((message, location)) => {
            format!("the guest panicked at {location}: {message}\n{described}")
        }
        None => described,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_javascript_exception_is_read_from_stderr_with_the_author_s_frames() {
        let text = "tl.lod is not a function\nStack:\n  kernel@user/hello_send.js:6:18\n  \
                    kernel@kernbench.js:179:11\n  export_kernel@/tmp/x/sources/initializer.js:2594:15\n\n\
                    Redirecting call to abort() to mozalloc_abort\n";
        assert_eq!(
            super::js_exception(text).unwrap(),
            "the guest threw tl.lod is not a function\n  \
             Stack (innermost first), the guest's code:\n  kernel at hello_send.js:6:18"
        );
        assert_eq!(super::js_exception("no stack here\n"), None);
    }

    #[test]
    fn a_rust_panic_is_read_from_stderr() {
        let text = "hello\n\nthread '<unnamed>' (1) panicked at src/lib.rs:40:21:\ndeliberate failure\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            super::rust_panic(text),
            Some(("deliberate failure".into(), "src/lib.rs:40:21".into()))
        );
        assert_eq!(super::rust_panic("no panic here"), None);
    }

    #[test]
    fn a_python_exception_is_read_from_stderr_with_the_authors_frames_only() {
        let text = "Traceback (most recent call last):\n  File \"/0/kernbench/algorithm.py\", line 143, in kernel\n  \
                    File \"/0/kernbench/contract.py\", line 38, in call_kernel\n  File \"/1/bad.py\", line 12, in kernel\n    \
                    undefined_name_here()\nNameError: name 'undefined_name_here' is not defined\n\n\
                    thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1280:25:\nPython function threw an unexpected exception\n";
        assert_eq!(
            super::python_exception(text).unwrap(),
            "the guest raised NameError: name 'undefined_name_here' is not defined\n  \
             Traceback (most recent call last), the guest's code:\n  File \"bad.py\", line 12, in kernel\n      undefined_name_here()"
        );
        assert_eq!(super::python_exception("no traceback"), None);
    }
}
