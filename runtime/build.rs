//! Builds the guest components (algorithms/*, benches/*) for
//! wasm32-wasip2 with a nested cargo invocation in its own target directory
//! (as wasmtime's test-programs artifacts do) and generates
//! `builtin_components.rs`, which embeds them in the binary and exposes
//! their paths to tests.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn crates_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().join("Cargo.toml").exists())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Stops the build at once, with the command that fixes it, when the
/// toolchain in use has no standard library for wasm32-wasip2 (rustup adds
/// the `targets` of rust-toolchain.toml only when it installs the toolchain
/// itself, so a machine that already had `stable` lacks it). The nested
/// cargo would otherwise fail later with "can't find crate for `core`".
fn check_wasm_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Some(sysroot) = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    else {
        return; // let the nested cargo report what is wrong with rustc
    };
    if sysroot.join("lib/rustlib/wasm32-wasip2/lib").is_dir() {
        return;
    }
    let has_rustup = Command::new("rustup")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let fix = if has_rustup {
        let toolchain = env::var("RUSTUP_TOOLCHAIN")
            .ok()
            .or_else(|| {
                sysroot
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "stable".into());
        format!("rustup target add wasm32-wasip2 --toolchain {toolchain}")
    } else {
        "install the Rust standard library for wasm32-wasip2 that matches this rustc \
         (with rustup: rustup target add wasm32-wasip2; from a distribution: its \
         rust-std package for wasm32-wasip2), or set RUSTC to a toolchain that has it"
            .into()
    };
    eprintln!(
        "\nerror: KernBench compiles its algorithms and benches to WebAssembly, and the \
         toolchain in use has no wasm32-wasip2 target\n  (no {} )\n\n  fix: {fix}\n",
        sysroot.join("lib/rustlib/wasm32-wasip2").display()
    );
    std::process::exit(1);
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    for p in [
        "wit",
        "guest-sdk",
        "algorithms",
        "benches",
        "tests/components",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    println!("cargo:rerun-if-env-changed=KERNBENCH_GUEST_PROFILE");
    check_wasm_target();

    let target_root = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let guest_target = target_root.join("guests");
    let profile = env::var("KERNBENCH_GUEST_PROFILE").unwrap_or_else(|_| "release".into());
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());

    // (kind, crates, built in?) — test components are built but not embedded.
    let groups = [
        ("algorithm", crates_in(&root.join("algorithms")), true),
        ("bench", crates_in(&root.join("benches")), true),
        (
            "algorithm",
            crates_in(&root.join("tests/components/algorithms")),
            false,
        ),
        (
            "bench",
            crates_in(&root.join("tests/components/benches")),
            false,
        ),
    ];
    let mut entries = Vec::new();
    for (kind, crates, builtin) in &groups {
        if crates.is_empty() {
            continue;
        }
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(&root)
            .arg("build")
            .arg("--target=wasm32-wasip2")
            .arg(format!("--profile={profile}"))
            .arg("--target-dir")
            .arg(&guest_target);
        for c in crates {
            cmd.arg("-p").arg(c);
        }
        // Do not leak the outer build's settings into the guest build.
        for var in [
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "CARGO_BUILD_RUSTFLAGS",
            "RUSTC_WORKSPACE_WRAPPER",
            "RUSTC_WRAPPER",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "CARGO_PRIMARY_PACKAGE",
            "__CARGO_FIX_YOLO",
        ] {
            cmd.env_remove(var);
        }
        let status = cmd
            .status()
            .expect("failed to run cargo for the guest components");
        if !status.success() {
            panic!(
                "building the {kind} components for wasm32-wasip2 failed (see above). \
                 If the target is missing, run: rustup target add wasm32-wasip2"
            );
        }
        let dir = guest_target
            .join("wasm32-wasip2")
            .join(if profile == "dev" { "debug" } else { &profile });
        for c in crates {
            let file = dir.join(format!("{}.wasm", c.replace('-', "_")));
            assert!(
                file.exists(),
                "expected {} after the guest build",
                file.display()
            );
            entries.push((c.clone(), *kind, file, *builtin));
        }
    }

    let mut src = String::from("// @generated by runtime/build.rs\n\n/// The components built into the binary.\npub static BUILTIN: &[BuiltinComponent] = &[\n");
    for (name, kind, file, _) in entries.iter().filter(|e| e.3) {
        let kind = if *kind == "algorithm" {
            "ComponentKind::Algorithm"
        } else {
            "ComponentKind::Bench"
        };
        src.push_str(&format!(
            "    BuiltinComponent {{ name: {name:?}, kind: {kind}, wasm: include_bytes!({:?}), path: {:?} }},\n",
            file.display().to_string(),
            file.display().to_string()
        ));
    }
    src.push_str("];\n\n/// Test-only components: (name, path of the .wasm).\npub static TEST_COMPONENTS: &[(&str, &str)] = &[\n");
    for (name, _, file, _) in entries.iter().filter(|e| !e.3) {
        src.push_str(&format!(
            "    ({name:?}, {:?}),\n",
            file.display().to_string()
        ));
    }
    src.push_str("];\n");
    fs::write(out_dir.join("builtin_components.rs"), src).unwrap();
    embed_rust_sdk(&root, &out_dir);
}

/// Every file of `dir` (recursively, sorted), as paths relative to `root`.
fn files_under(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(root, &p, out);
        } else {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// `rust_sdk.rs`: the Rust guest SDK's sources (the SDK crate, its macros
/// and wire crates and the WIT), which `kernbench-host new --lang rust` writes into a
/// new project, so that the project builds wherever it is, without this
/// tree. Their manifests inherit from this workspace; the values they
/// inherit are written out here.
fn embed_rust_sdk(root: &Path, out_dir: &Path) {
    let mut files = Vec::new();
    for d in [
        "guest-sdk/src",
        "guest-sdk/macros/src",
        "guest-sdk/wire/src",
    ] {
        files_under(root, &root.join(d), &mut files);
    }
    files.push("guest-sdk/Cargo.toml".into());
    files.push("guest-sdk/macros/Cargo.toml".into());
    files.push("guest-sdk/wire/Cargo.toml".into());
    files.push("wit/kernbench.wit".into());
    let workspace = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let value = |key: &str| -> String {
        workspace
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
            })
            .unwrap_or_else(|| panic!("the workspace Cargo.toml has no `{key} = ...`"))
    };
    let mut src = String::from(
        "// @generated by runtime/build.rs\n\n/// The Rust guest SDK: (path, contents).\npub static RUST_SDK: &[(&str, &str)] = &[\n",
    );
    for f in &files {
        let rel = f.to_string_lossy().replace('\\', "/");
        src.push_str(&format!(
            "    ({rel:?}, include_str!({:?})),\n",
            root.join(f).display().to_string()
        ));
    }
    src.push_str("];\n\n");
    src.push_str(&format!(
        "/// What the SDK's manifests inherit from the workspace.\npub static RUST_SDK_INHERITED: &[(&str, &str)] = &[\n    \
         (\"version\", {:?}),\n    (\"edition\", {:?}),\n    (\"license\", {:?}),\n    (\"wit-bindgen\", {:?}),\n];\n",
        value("version"),
        value("edition"),
        value("license"),
        value("wit-bindgen"),
    ));
    fs::write(out_dir.join("rust_sdk.rs"), src).unwrap();
}
