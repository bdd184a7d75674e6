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
    match rust_panic(&String::from_utf8_lossy(&stderr)) {
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
    fn a_rust_panic_is_read_from_stderr() {
        let text = "hello\n\nthread '<unnamed>' (1) panicked at src/lib.rs:40:21:\ndeliberate failure\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            super::rust_panic(text),
            Some(("deliberate failure".into(), "src/lib.rs:40:21".into()))
        );
        assert_eq!(super::rust_panic("no panic here"), None);
    }
}
