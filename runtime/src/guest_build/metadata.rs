//! The metadata of a component `kernbench-host build` made, written at the
//! component's top level with `wasm-metadata` (the ecosystem's
//! `version`, `description`, `authors`, `licenses` sections, as
//! `wasm-tools metadata add` writes them) plus KernBench's
//! `kernbench-component` section (`components::metadata`), from the
//! project's manifest beside the source: `pyproject.toml` (`[project]`)
//! for Python, `package.json` for JavaScript; C has no manifest (the name
//! is the file's stem). A licence that is not an SPDX expression is left
//! out with a warning, as `wasm-tools` would refuse it.

use super::{io, BuildError, Kind, Lang};
use std::path::Path;
use wasm_encoder::{ComponentSection, CustomSection};
use wasm_metadata::{AddMetadata, AddMetadataField};

/// What a project manifest says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub name: Option<String>,
    pub version: Option<String>,
    pub description: Option<String>,
    pub authors: Vec<String>,
    pub license: Option<String>,
}

fn text(v: Option<&serde_json::Value>) -> Option<String> {
    v.and_then(|v| v.as_str())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// The manifest of the project `source` belongs to (none: empty).
pub fn manifest_for(source: &Path, lang: Lang) -> Result<Manifest, BuildError> {
    let dir = source.parent().unwrap_or(Path::new("."));
    let read = |name: &str| -> Result<Option<(std::path::PathBuf, String)>, BuildError> {
        let p = dir.join(name);
        match crate::files::read_text(&p) {
            Ok(t) => Ok(Some((p, t))),
            Err(crate::files::ReadError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(None)
            }
            Err(e) => Err(io(&p)(std::io::Error::other(e.to_string()))),
        }
    };
    let bad = |p: &Path, e: String| BuildError::BadName(format!("{}: {e}", p.display()));
    match lang {
        Lang::Python => {
            let Some((p, t)) = read("pyproject.toml")? else {
                return Ok(Manifest::default());
            };
            let v: toml::Value = toml::from_str(&t).map_err(|e| bad(&p, e.to_string()))?;
            let v = serde_json::to_value(v).map_err(|e| bad(&p, e.to_string()))?;
            let project = &v["project"];
            Ok(Manifest {
                name: text(project.get("name")),
                version: text(project.get("version")),
                description: text(project.get("description")),
                authors: project["authors"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| text(a.get("name")).or_else(|| text(a.get("email"))))
                    .collect(),
                // PEP 639 (a string) or the older table form.
                license: text(project.get("license"))
                    .or_else(|| text(project["license"].get("text"))),
            })
        }
        Lang::JavaScript => {
            let Some((p, t)) = read("package.json")? else {
                return Ok(Manifest::default());
            };
            let v: serde_json::Value =
                serde_json::from_str(&t).map_err(|e| bad(&p, e.to_string()))?;
            let author = text(v.get("author")).or_else(|| text(v["author"].get("name")));
            Ok(Manifest {
                name: text(v.get("name")),
                version: text(v.get("version")),
                description: text(v.get("description")),
                authors: author.into_iter().collect(),
                license: text(v.get("license")),
            })
        }
        Lang::C => Ok(Manifest::default()),
    }
}

/// Write the metadata into the component at `out`.
pub fn stamp(
    out: &Path,
    source: &Path,
    kind: Kind,
    lang: Lang,
    sdk: &str,
) -> Result<(), BuildError> {
    let m = manifest_for(source, lang)?;
    let wasm = std::fs::read(out).map_err(io(out))?;
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = m.name.clone().unwrap_or(stem).replace('-', "_");
    let mut add = AddMetadata::default();
    add.name = AddMetadataField::Set(name.clone());
    // The language the author wrote in: the producers of the core modules
    // name the interpreter's (componentize-py's runtime says Rust).
    let language = match lang {
        Lang::C => "C",
        Lang::Python => "Python",
        Lang::JavaScript => "JavaScript",
    };
    add.language = vec![(language.into(), String::new())];
    if let Some(v) = &m.version {
        add.version = AddMetadataField::Set(wasm_metadata::Version::new(v.clone()));
    }
    if let Some(d) = &m.description {
        add.description = AddMetadataField::Set(wasm_metadata::Description::new(d.clone()));
    }
    if !m.authors.is_empty() {
        add.authors = AddMetadataField::Set(wasm_metadata::Authors::new(m.authors.join(", ")));
    }
    if let Some(l) = &m.license {
        match wasm_metadata::Licenses::new(l) {
            Ok(l) => add.licenses = AddMetadataField::Set(l),
            Err(e) => eprintln!("warning: licence '{l}' left out: not an SPDX expression ({e})"),
        }
    }
    let mut wasm = add.to_wasm(&wasm).map_err(|e| {
        BuildError::Wit(format!("writing the metadata of {}: {e:#}", out.display()))
    })?;
    let own = serde_json::json!({
        "format": 1,
        "name": name,
        "version": m.version,
        "kind": kind.name(),
        "sdk": sdk,
        "wit": format!("{}@{}", crate::components::compat::WIT_PACKAGE, crate::components::compat::WIT_VERSION),
    });
    let data = own.to_string().into_bytes();
    CustomSection {
        name: crate::components::metadata::KERNBENCH_SECTION.into(),
        data: data.into(),
    }
    .append_to_component(&mut wasm);
    std::fs::write(out, &wasm).map_err(io(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_are_read_from_beside_the_source() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pyproject.toml"),
            "[project]\nname = \"my-algo\"\nversion = \"1.2.3\"\ndescription = \"d\"\n\
             license = \"MIT\"\nauthors = [{name = \"Ada\"}, {email = \"b@x.org\"}]\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"name": "js-algo", "version": "0.0.1", "author": {"name": "Grace"}, "license": "Apache-2.0"}"#,
        )
        .unwrap();
        let py = manifest_for(&dir.path().join("a.py"), Lang::Python).unwrap();
        assert_eq!(py.name.as_deref(), Some("my-algo"));
        assert_eq!(py.version.as_deref(), Some("1.2.3"));
        assert_eq!(py.authors, vec!["Ada", "b@x.org"]);
        assert_eq!(py.license.as_deref(), Some("MIT"));
        let js = manifest_for(&dir.path().join("a.js"), Lang::JavaScript).unwrap();
        assert_eq!(js.name.as_deref(), Some("js-algo"));
        assert_eq!(js.authors, vec!["Grace"]);
        assert_eq!(
            manifest_for(&dir.path().join("a.c"), Lang::C).unwrap(),
            Manifest::default()
        );
    }
}
