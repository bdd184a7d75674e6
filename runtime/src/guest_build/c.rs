//! C guests: generate the bindings of the world from the embedded WIT
//! (wit-bindgen-c), compile them with the C SDK (`guest-sdk/c`, embedded)
//! and the algorithm with clang for wasm32-wasi (a reactor, against
//! wasi-libc), then make the component with wit-component and the WASI
//! preview1 reactor adapter of our wasmtime.

use super::{io, write_wit, BuildError, Kind};
use std::path::Path;
use std::process::Command;
use wit_bindgen_core::wit_parser::Resolve;
use wit_bindgen_core::Files;

const HEADER: &str = include_str!("../../../guest-sdk/c/kernbench.h");
const LIBRARY: &str = include_str!("../../../guest-sdk/c/kernbench.c");
/// What the library and the native mock share (#included by both).
pub(crate) const COMMON: &str = include_str!("../../../guest-sdk/c/kernbench_common.c");

/// How to get a C compiler that targets wasm32-wasi.
const INSTALL: &str = "clang for wasm32-wasi with wasi-libc: on Debian/Ubuntu \
    `apt-get install clang lld wasi-libc libclang-rt-dev-wasm32` (or set $KERNBENCH_CC to \
    a clang that has them, e.g. wasi-sdk's, with $WASI_SYSROOT)";

/// Write the C bindings of `world` into `dir`; the generated sources.
fn bindings(dir: &Path, world: &str) -> Result<Vec<std::path::PathBuf>, BuildError> {
    let wit = write_wit(dir)?;
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve
        .push_path(&wit)
        .map_err(|e| BuildError::Wit(format!("{e:#}")))?;
    let world = resolve
        .select_world(&[pkg], Some(world))
        .map_err(|e| BuildError::Wit(format!("{e:#}")))?;
    let mut files = Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)
        .map_err(|e| BuildError::Wit(format!("{e:#}")))?;
    let mut out = Vec::new();
    for (name, bytes) in files.iter() {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(io(&p))?;
        if !name.ends_with(".h") {
            out.push(p);
        }
    }
    Ok(out)
}

/// Build the C algorithm `source` into the component `out`.
pub fn build(source: &Path, kind: Kind, out: &Path) -> Result<(), BuildError> {
    if kind != Kind::Algorithm {
        return Err(BuildError::Unsupported {
            lang: "C",
            kind: kind.name(),
        });
    }
    let tmp = tempfile::tempdir().map_err(io(Path::new("(temporary directory)")))?;
    let dir = tmp.path();
    let generated = bindings(dir, "algorithm-outputs")?;
    for (name, text) in [
        ("kernbench.h", HEADER),
        ("kernbench.c", LIBRARY),
        ("kernbench_common.c", COMMON),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(io(&p))?;
    }
    let core = dir.join("core.wasm");
    let cc = super::toolchains::c_compiler();
    let mut cmd = Command::new(&cc);
    cmd.args([
        "--target=wasm32-wasi",
        "-mexec-model=reactor",
        "-O2",
        "-Wall",
    ])
    .arg("-I")
    .arg(dir)
    .arg(source)
    .arg(dir.join("kernbench.c"))
    .args(&generated)
    .arg("-o")
    .arg(&core);
    if let Ok(sysroot) = std::env::var("WASI_SYSROOT") {
        cmd.arg(format!("--sysroot={sysroot}"));
    }
    let r = cmd.output().map_err(|_| BuildError::MissingToolchain {
        what: format!("the C compiler `{cc}`"),
        install: INSTALL.into(),
    })?;
    if !r.status.success() {
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        );
        // A clang without the wasm target or the libc says so in its own words.
        if output.contains("wasm32")
            && (output.contains("not found") || output.contains("unable to find"))
        {
            return Err(BuildError::MissingToolchain {
                what: format!("a wasm32-wasi C toolchain for `{cc}` ({})", output.trim()),
                install: INSTALL.into(),
            });
        }
        return Err(BuildError::ToolFailed {
            tool: cc,
            source_file: source.to_path_buf(),
            output,
        });
    }
    let module = std::fs::read(&core).map_err(io(&core))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .and_then(|e| {
            e.adapter(
                "wasi_snapshot_preview1",
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|e| e.validate(true).encode())
        .map_err(|e| BuildError::ToolFailed {
            tool: "wit-component".into(),
            source_file: source.to_path_buf(),
            output: format!("{e:#}"),
        })?;
    std::fs::write(out, component).map_err(io(out))
}
