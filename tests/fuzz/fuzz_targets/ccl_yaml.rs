//! Any text given as ccl.yaml: parsed and validated without a panic; a
//! valid one resolves its default algorithm and world size.
#![no_main]
use kernbench::config::{CclConfig, Origin};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = CclConfig::from_yaml(text, Origin::Embedded("fuzz-ccl.yaml")) {
        if let Ok((_, entry)) = c.resolve(None) {
            let _ = c.world_size(entry, 4);
        }
    }
});
