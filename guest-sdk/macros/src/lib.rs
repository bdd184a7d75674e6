//! `component_metadata!(algorithm|bench)`: the metadata a KernBench guest
//! carries, written from the manifest of the crate being compiled (cargo's
//! `CARGO_PKG_*`), as custom sections of its core module:
//!
//! - the WebAssembly ecosystem's metadata sections (`version`,
//!   `description`, `authors`, `licenses`, `source`, `homepage`: what
//!   `wasm-tools metadata add` writes and `wasm-tools metadata show`,
//!   `wkg` and the OCI annotations of a registry read), each only when the
//!   manifest has the field (a licence only when it can be an SPDX
//!   expression);
//! - `kernbench-component`: a JSON object with what only KernBench needs
//!   (`name`, `kind`, the SDK and the `kernbench:sim` version it was built
//!   against).
//!
//! The kernbench-guest export macros call it; a crate never needs to.

use proc_macro::TokenStream;

/// The `kernbench:sim` version of the WIT the SDK builds against (its
/// `package` line).
fn wit_package() -> String {
    let wit = include_str!("../../../wit/kernbench.wit");
    wit.lines()
        .find_map(|l| l.trim().strip_prefix("package "))
        .map(|p| p.trim_end_matches(';').trim().to_string())
        .unwrap_or_else(|| "kernbench:sim".to_string())
}

fn pkg(var: &str) -> String {
    std::env::var(format!("CARGO_PKG_{var}")).unwrap_or_default()
}

/// One custom section holding `data`, in the core module (wasm32 only).
fn section(name: &str, ident: &str, data: &[u8]) -> String {
    format!(
        "#[cfg(target_arch = \"wasm32\")]\n\
         #[link_section = {name:?}]\n\
         #[used]\n\
         #[doc(hidden)]\n\
         static {ident}: [u8; {len}] = {bytes:?};\n",
        len = data.len(),
        bytes = data,
    )
}

/// The licence when it can be an SPDX expression (`MIT OR Apache-2.0`);
/// Cargo's old `MIT/Apache-2.0` cannot, and `wasm-tools metadata show`
/// refuses a component whose `licenses` section is not one: left out.
fn spdx_like(l: String) -> String {
    let ok = l
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " .+-():".contains(c));
    if ok {
        l
    } else {
        String::new()
    }
}

#[proc_macro]
pub fn component_metadata(input: TokenStream) -> TokenStream {
    let kind = input.to_string();
    let kind = kind.trim();
    if kind != "algorithm" && kind != "bench" {
        return "compile_error!(\"component_metadata!(algorithm) or component_metadata!(bench)\");"
            .parse()
            .unwrap();
    }
    let mut out = String::new();
    // Cargo separates authors with ':'; the OCI annotation with ", ".
    let authors = pkg("AUTHORS")
        .split(':')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(", ");
    let standard = [
        ("version", pkg("VERSION")),
        ("description", pkg("DESCRIPTION")),
        ("authors", authors),
        ("licenses", spdx_like(pkg("LICENSE"))),
        ("source", pkg("REPOSITORY")),
        ("homepage", pkg("HOMEPAGE")),
    ];
    for (name, value) in &standard {
        if !value.trim().is_empty() {
            let ident = format!("__KERNBENCH_META_{}", name.to_uppercase());
            out.push_str(&section(name, &ident, value.trim().as_bytes()));
        }
    }
    let own = serde_json::json!({
        "format": 1,
        "name": pkg("NAME"),
        "version": pkg("VERSION"),
        "kind": kind,
        "sdk": format!("kernbench-guest {} (Rust)", env!("CARGO_PKG_VERSION")),
        "wit": wit_package(),
    });
    out.push_str(&section(
        "kernbench-component",
        "__KERNBENCH_META_COMPONENT",
        own.to_string().as_bytes(),
    ));
    out.parse().unwrap()
}
