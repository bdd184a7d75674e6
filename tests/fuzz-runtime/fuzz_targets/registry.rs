//! What a registry sends on `pull`, fed to the checks it must pass: the
//! input is a manifest, a config and a blob, separated by the first two
//! 0xFF bytes (never in JSON text). The manifest and config are parsed
//! as oci-client and oci-wasm parse them; a pair the checks accept must
//! describe a component KernBench may hold, and a blob they accept must
//! be exactly the layer. Nothing may panic or allocate without bound.
#![no_main]

use kernbench::components::registry::{check_blob, check_manifest, parse_reference};
use libfuzzer_sys::fuzz_target;
use oci_client::manifest::OciImageManifest;
use oci_wasm::WasmConfig;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0xff);
    let manifest = parts.next().unwrap_or_default();
    let config = parts.next().unwrap_or_default();
    let blob = parts.next().unwrap_or_default();
    if let Ok(text) = std::str::from_utf8(manifest) {
        // References come from users and from annotations.
        let _ = parse_reference(text);
    }
    let (Ok(manifest), Ok(config)) = (
        serde_json::from_slice::<OciImageManifest>(manifest),
        serde_json::from_slice::<WasmConfig>(config),
    ) else {
        return;
    };
    let Ok(layer) = check_manifest(&manifest, &config) else {
        return;
    };
    assert_eq!(layer.media_type, oci_wasm::WASM_LAYER_MEDIA_TYPE);
    assert!(layer.size >= 0 && layer.size as u64 <= kernbench::components::MAX_COMPONENT_BYTES);
    assert!(config.layer_digests.contains(&layer.digest));
    if check_blob(blob, &layer).is_ok() {
        assert_eq!(blob.len() as i64, layer.size);
        assert_eq!(kernbench::digest::oci_digest(blob), layer.digest);
    }
});
