//! What a component says about itself, read from its bytes without
//! compiling it: its imports and exports (hence its world and the
//! `kernbench:sim` version it was built against), its metadata and its
//! producers.
//!
//! Metadata follows the WebAssembly ecosystem's convention: the custom
//! sections `version`, `description`, `authors`, `licenses`, `source`,
//! `homepage`, `revision` (what `wasm-tools metadata add` writes and
//! `wasm-tools metadata show` / `wkg` read, and what maps one to one onto
//! the OCI annotations `org.opencontainers.image.*`), plus one KernBench
//! section, `kernbench-component`: a JSON object with `name`, `kind`,
//! `sdk` and `wit`. A section of the component itself wins over the same
//! section of one of its core modules (where the Rust guest SDK, which
//! cannot touch the component its linker makes, writes them).

use super::compat::{self, Accepted, Incompatible, WIT_PACKAGE};
use super::Kind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use wasmparser::{KnownCustom, Parser, Payload};

/// The metadata sections of the ecosystem's convention.
pub const STANDARD_SECTIONS: &[&str] = &[
    "version",
    "description",
    "authors",
    "licenses",
    "source",
    "homepage",
    "revision",
];
/// KernBench's own section.
pub const KERNBENCH_SECTION: &str = "kernbench-component";

/// The `kernbench-component` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernbenchSection {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    /// The SDK (and language) that built it.
    #[serde(default)]
    pub sdk: Option<String>,
    /// `kernbench:sim@X.Y.Z` it was built against.
    #[serde(default)]
    pub wit: Option<String>,
}

/// Everything `inspect` shows of a component's bytes.
#[derive(Debug, Clone)]
pub struct ComponentInfo {
    pub bytes: u64,
    /// SHA-256 of the bytes, lowercase hex (the OCI digest without its
    /// `sha256:`).
    pub sha256: String,
    /// The world its exports make it, if either.
    pub kind: Option<Kind>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// The `kernbench:sim` versions its import and export names carry.
    pub wit_versions: Vec<String>,
    /// Whether this host runs it: None when it names no `kernbench:sim`
    /// interface at all.
    pub verdict: Result<Option<Accepted>, Incompatible>,
    /// The standard sections found (name → text).
    pub standard: BTreeMap<String, String>,
    pub kernbench: Option<KernbenchSection>,
    /// `producers` (field, tool, version), the component's then its
    /// modules', without repeats.
    pub producers: Vec<(String, String, String)>,
}

/// Why bytes are not a component this module can describe.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    #[error("a core WebAssembly module, not a component (build it for wasm32-wasip2, or componentize it with wasm-tools component new)")]
    CoreModule,
}

impl ComponentInfo {
    /// `sha256:<hex>` of its bytes.
    pub fn digest(&self) -> String {
        format!("sha256:{}", self.sha256)
    }

    /// The name it gives itself, if any.
    pub fn name(&self) -> Option<&str> {
        self.kernbench.as_ref().and_then(|k| k.name.as_deref())
    }

    /// Its version: the `version` section, else the KernBench section's.
    pub fn version(&self) -> Option<&str> {
        self.standard
            .get("version")
            .map(String::as_str)
            .or_else(|| self.kernbench.as_ref().and_then(|k| k.version.as_deref()))
    }

    /// The OCI manifest annotations of this component
    /// (`org.opencontainers.image.*` from the standard sections, as `wkg`
    /// writes them, and `dev.kernbench.*` from KernBench's).
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut a = BTreeMap::new();
        let oci = |k: &str| format!("org.opencontainers.image.{k}");
        for (section, key) in [
            ("version", "version"),
            ("description", "description"),
            ("authors", "authors"),
            ("licenses", "licenses"),
            ("source", "source"),
            ("homepage", "url"),
            ("revision", "revision"),
        ] {
            if let Some(v) = self.standard.get(section) {
                a.insert(oci(key), v.clone());
            }
        }
        if let Some(v) = self.version() {
            a.entry(oci("version")).or_insert_with(|| v.to_string());
        }
        if let Some(n) = self.name() {
            a.insert(oci("title"), n.to_string());
        }
        if let Some(k) = self.kind {
            a.insert("dev.kernbench.kind".into(), k.name().into());
        }
        if let Some(v) = self.wit_versions.first() {
            a.insert("dev.kernbench.wit".into(), compat::package_at(v));
        }
        if let Some(sdk) = self.kernbench.as_ref().and_then(|k| k.sdk.clone()) {
            a.insert("dev.kernbench.sdk".into(), sdk);
        }
        a
    }
}

/// Read a component's self-description.
pub fn read(wasm: &[u8]) -> Result<ComponentInfo, MetadataError> {
    if !wasm.starts_with(b"\0asm") {
        return Err(MetadataError::NotAComponent(
            "it does not start with the WebAssembly magic bytes \\0asm".into(),
        ));
    }
    let mut depth = 0usize;
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    // (depth, section, text): the component's own sections are depth 1.
    let mut found: Vec<(usize, String, String)> = Vec::new();
    // (depth, field, tool, version)
    let mut producers: Vec<(usize, String, String, String)> = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(|e| MetadataError::NotAComponent(e.to_string()))?;
        match payload {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding == wasmparser::Encoding::Module {
                    return Err(MetadataError::CoreModule);
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(r) if depth == 1 => {
                for i in r {
                    let i = i.map_err(|e| MetadataError::NotAComponent(e.to_string()))?;
                    // Types a world `use`s are imports too; list what runs.
                    if !matches!(i.ty, wasmparser::ComponentTypeRef::Type(_)) {
                        imports.push(i.name.name.to_string());
                    }
                }
            }
            Payload::ComponentExportSection(r) if depth == 1 => {
                for e in r {
                    let e = e.map_err(|e| MetadataError::NotAComponent(e.to_string()))?;
                    if e.kind != wasmparser::ComponentExternalKind::Type {
                        exports.push(e.name.name.to_string());
                    }
                }
            }
            Payload::CustomSection(c) => {
                if let KnownCustom::Producers(r) = c.as_known() {
                    for field in r.into_iter().flatten() {
                        for v in field.values.into_iter().flatten() {
                            let row = (
                                depth,
                                field.name.to_string(),
                                v.name.to_string(),
                                v.version.to_string(),
                            );
                            if !producers
                                .iter()
                                .any(|p| p.1 == row.1 && p.2 == row.2 && p.3 == row.3)
                            {
                                producers.push(row);
                            }
                        }
                    }
                } else if c.name() == KERNBENCH_SECTION || STANDARD_SECTIONS.contains(&c.name()) {
                    if let Ok(text) = std::str::from_utf8(c.data()) {
                        found.push((depth, c.name().to_string(), text.trim().to_string()));
                    }
                }
            }
            _ => {}
        }
    }
    // The shallowest copy of each section wins (stable: first seen).
    found.sort_by_key(|(d, _, _)| *d);
    let mut standard = BTreeMap::new();
    let mut kernbench = None;
    for (_, name, text) in found {
        if text.is_empty() {
            continue;
        }
        if name == KERNBENCH_SECTION {
            if kernbench.is_none() {
                kernbench = serde_json::from_str::<KernbenchSection>(&text).ok();
            }
        } else {
            standard.entry(name).or_insert(text);
        }
    }
    let kind = [Kind::Algorithm, Kind::Bench].into_iter().find(|k| {
        k.required_exports()
            .iter()
            .all(|r| exports.iter().any(|e| e == r))
    });
    let mut wit_versions: Vec<String> = imports
        .iter()
        .chain(&exports)
        .filter_map(|n| n.strip_prefix(WIT_PACKAGE)?.strip_prefix('/'))
        .filter_map(|r| r.split_once('@').map(|(_, v)| v.to_string()))
        .collect();
    wit_versions.sort();
    wit_versions.dedup();
    let verdict = compat::check_component(imports.iter().chain(&exports).map(String::as_str));
    Ok(ComponentInfo {
        bytes: wasm.len() as u64,
        sha256: crate::digest::sha256_hex(wasm),
        kind,
        imports,
        exports,
        wit_versions,
        verdict,
        standard,
        kernbench,
        producers: own_producers_first(producers),
    })
}

/// The producers by field, in the order fields first appear; where the
/// component itself names a field (depth 1: `kernbench-host build` names
/// the language the author wrote in), its rows replace those of its core
/// modules (an interpreter's runtime names its own language).
fn own_producers_first(
    rows: Vec<(usize, String, String, String)>,
) -> Vec<(String, String, String)> {
    let mut fields: Vec<&str> = Vec::new();
    for r in &rows {
        if !fields.contains(&r.1.as_str()) {
            fields.push(&r.1);
        }
    }
    let mut out = Vec::new();
    for f in fields {
        let own = rows.iter().any(|r| r.1 == f && r.0 == 1);
        out.extend(
            rows.iter()
                .filter(|r| r.1 == f && (!own || r.0 == 1))
                .map(|r| (r.1.clone(), r.2.clone(), r.3.clone())),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_module_and_garbage_are_told_apart() {
        let module = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
        assert!(matches!(read(&module), Err(MetadataError::CoreModule)));
        assert!(matches!(
            read(b"not wasm at all"),
            Err(MetadataError::NotAComponent(_))
        ));
    }

    #[test]
    fn the_components_own_sections_win_over_its_modules() {
        // A component with a `version` section, holding a core module
        // with another `version` and a `description`.
        let custom = |name: &str, data: &str| {
            let mut s = vec![0x00];
            let body: Vec<u8> = [
                vec![name.len() as u8],
                name.as_bytes().to_vec(),
                data.as_bytes().to_vec(),
            ]
            .concat();
            s.push(body.len() as u8);
            s.extend(body);
            s
        };
        let mut module = vec![0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
        module.extend(custom("version", "9.9.9"));
        module.extend(custom("description", "inner"));
        let mut c = vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        c.extend(custom("version", "1.2.3"));
        c.push(0x01); // core module section
        c.push(module.len() as u8);
        c.extend(&module);
        let info = read(&c).unwrap();
        assert_eq!(info.standard["version"], "1.2.3");
        assert_eq!(info.standard["description"], "inner");
        assert_eq!(info.kind, None);
        assert_eq!(info.verdict, Ok(None));
        let a = info.annotations();
        assert_eq!(a["org.opencontainers.image.version"], "1.2.3");
        assert_eq!(a["org.opencontainers.image.description"], "inner");
    }
}
