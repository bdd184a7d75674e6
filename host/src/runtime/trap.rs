//! Turning wasmtime errors (guest traps, host errors raised in imports)
//! into messages that point at the user's code.

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
