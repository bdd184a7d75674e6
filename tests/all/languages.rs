//! Guests in other languages through the real host: the Python SDK's
//! examples (algorithms/python, benches/python) built with componentize-py,
//! against the Rust ones. Timing depends only on the `tl` calls, so the
//! same algorithm gives the same bytes and the same simulated times in
//! every language.

use crate::common;
use common::guests;
use common::*;
use kernbench::config::{CclConfig, Origin};

fn ccl_yaml(text: &str) -> CclConfig {
    CclConfig::from_yaml(text, Origin::Embedded("languages"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A ccl.yaml with the Rust and Python rings and hello_sends side by side.
fn both() -> CclConfig {
    ccl_yaml(&format!(
        "defaults: {{algorithm: rust_ring}}\nalgorithms:\n  \
         rust_ring: {{module: ring_allreduce, topology: ring_1d}}\n  \
         python_ring: {{module: {}, topology: ring_1d}}\n  \
         python_ring_chunked: {{module: {}, topology: ring_1d, slot_kib: 1, chunk_size: 300}}\n  \
         rust_ring_chunked: {{module: ring_allreduce, topology: ring_1d, slot_kib: 1, chunk_size: 300}}\n  \
         hello_send: {{module: {}, topology: ring_1d}}\n",
        guests::python("algorithm", "algorithms/python/ring_allreduce/ring_allreduce.py"),
        guests::python("algorithm", "algorithms/python/ring_allreduce/ring_allreduce.py"),
        guests::python("algorithm", "algorithms/python/hello_send/hello_send.py"),
    ))
}

#[test]
fn the_python_sdk_and_its_examples_pass_their_unit_tests_natively() {
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "guest-sdk/python/tests"])
        .current_dir(guests::root())
        .output()
        .expect("python3 (3.10 or later) runs the Python SDK's unit tests");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("OK"), "{err}");
}

/// ccl_allreduce with the ccl.yaml entries `rust` and `other` of `c` on 2,
/// 3 and 5 SIPs: the same rows (times included), end time, result bytes
/// and command counts.
fn assert_same_as_rust(c: &CclConfig, rust: &str, other: &str) {
    assert_same_run_as_rust(c, rust, other, true)
}

/// [`assert_same_as_rust`]; `whole_memory`: also every byte of memory,
/// scratch included (false where the kernels drop their handles at other
/// times than Rust's scopes do, so their TCM scratch is reused
/// differently: a JavaScript handle lives until it is collected).
fn assert_same_run_as_rust(c: &CclConfig, rust: &str, other: &str, whole_memory: bool) {
    for n in [2, 3, 5] {
        let go = |algo: &str| {
            run(
                "ccl_allreduce",
                topo(n),
                c.clone(),
                Some(algo),
                &["-b", "8", "-e", "4K", "-f", "8"],
            )
            .unwrap_or_else(|e| panic!("{algo} on {n} SIPs: {e}"))
        };
        let (r, o) = (go(rust), go(other));
        assert!(r.rows.iter().all(|x| x.wrong == 0), "{:?}", r.rows);
        assert_eq!(r.rows, o.rows, "{rust} vs {other} on {n} SIPs");
        assert_eq!(r.end_time_ps, o.end_time_ps);
        if whole_memory {
            assert_eq!(r.memory_digest, o.memory_digest, "same result bytes");
        }
        let counts = |s: &kernbench::hw::machine::MachineStats| {
            (s.dma_commands, s.math_commands, s.bytes_moved)
        };
        assert_eq!(counts(&r.stats), counts(&o.stats), "same commands");
    }
}

#[test]
fn python_ring_allreduce_equals_rust_in_bytes_and_picoseconds() {
    let c = both();
    assert_same_as_rust(&c, "rust_ring", "python_ring");
    assert_same_as_rust(&c, "rust_ring_chunked", "python_ring_chunked");
}

/// The ring component `module` refuses ccl.yaml's `kernel_rounds`, naming
/// the parameter it does take.
fn assert_refuses_an_unknown_parameter(module: &str) {
    let text = format!("algorithms:\n  ring: {{module: {module}, kernel_rounds: 2}}\n");
    let e = run(
        "ccl_allreduce",
        topo(2),
        ccl_yaml(&text),
        None,
        &["-e", "8"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("unknown parameter kernel_rounds (this algorithm takes chunk_size)"),
        "{e}"
    );
}

#[test]
fn a_python_parameter_error_names_the_parameter() {
    assert_refuses_an_unknown_parameter(&guests::python(
        "algorithm",
        "algorithms/python/ring_allreduce/ring_allreduce.py",
    ));
}

#[test]
fn the_python_ccl_hello_bench_runs_python_and_rust_hello_send_alike() {
    let bench = guests::python("bench", "benches/python/ccl_hello/ccl_hello.py");
    let py = run(&bench, topo(4), both(), None, &[]).unwrap();
    assert_eq!(py.rows.len(), 4);
    assert!(py.rows.iter().all(|r| r.wrong == 0), "{:?}", py.rows);
    // The Rust bench with the Rust hello_send: the same rows and times.
    let rust = run("ccl_hello", topo(4), ccl(), None, &[]).unwrap();
    assert_eq!(py.rows, rust.rows);
    assert_eq!(py.end_time_ps, rust.end_time_ps);
    // The seed's ccl.yaml (world_size 8 on 4 SIPs): the single driver.
    let seed = ccl_yaml(&format!(
        "algorithms:\n  hello_send:\n    module: {}\n    topology: ring_1d\n    buffer_kind: tcm\n    world_size: 8\n",
        guests::python("algorithm", "algorithms/python/hello_send/hello_send.py")
    ));
    let res = run(&bench, topo(4), seed, None, &[]).unwrap();
    assert_eq!(res.rows.len(), 8);
    assert!(res.rows.iter().all(|r| r.wrong == 0), "{:?}", res.rows);
}

/// Every `torch.distributed` collective from a Python bench, on 4 and 3
/// SIPs, each result checked by the bench against PyTorch's definition.
#[test]
fn a_python_bench_calls_every_collective_and_gets_pytorch_s_results() {
    let bench = guests::python("bench", "benches/python/ccl_collectives/ccl_collectives.py");
    for n in [4u32, 3] {
        let every_op = Some("all_reduce=ring_rsag_allreduce");
        let res = run(&bench, topo(n), ccl(), every_op, &[]).unwrap();
        let calls: std::collections::BTreeSet<(&str, &str)> = res
            .rows
            .iter()
            .map(|r| (r.collective.as_str(), r.redop.as_str()))
            .collect();
        assert_eq!(calls.len(), 14, "{calls:?}");
        assert!(calls.contains(&("all_reduce", "premul_sum")), "{calls:?}");
        // Every row is named for the torch.distributed function it timed,
        // and the table knows each as a collective (busbw factor, bound).
        for (name, _) in &calls {
            assert!(kernbench::report::knows(name), "{name}");
        }
        // 13 collective calls on every rank, sendrecv on the pairs
        assert_eq!(res.rows.len() as u32, 13 * n + n - n % 2, "{:?}", res.rows);
        assert!(res.rows.iter().all(|r| r.wrong == 0), "{:?}", res.rows);
        // broadcast and reduce in nccl-tests' layout: root, both blocks.
        let rooted: Vec<_> = res
            .rows
            .iter()
            .filter(|r| r.collective == "broadcast" || r.collective == "reduce")
            .map(|r| {
                (
                    r.collective.as_str(),
                    r.root,
                    r.in_place.is_some(),
                    r.out_of_place.is_some(),
                )
            })
            .collect();
        assert!(
            rooted.contains(&("broadcast", Some(n - 1), true, true)),
            "{rooted:?}"
        );
        assert!(
            rooted.contains(&("reduce", Some(0), true, true)),
            "{rooted:?}"
        );
        assert_eq!(res.notes, ["all_reduce wants 1 shard(s) per SIP"]);
    }
}

/// The Python bench with a broadcast that runs in place only: its
/// out-of-place block is N/A and the header says why, the rest runs.
#[test]
fn a_python_bench_leaves_an_in_place_only_block_na_and_says_why() {
    let bench = guests::python("bench", "benches/python/ccl_collectives/ccl_collectives.py");
    let mut c = ccl();
    let compat = ccl_yaml(&format!(
        "algorithms:\n  compat: {{module: {}, topology: ring_1d}}\n",
        common::test_component("compat_algo_0_6_5")
    ));
    c.algorithms.extend(compat.algorithms);
    let res = run(&bench, topo(2), c, Some("broadcast=compat"), &[]).unwrap();
    assert!(res.rows.iter().all(|r| r.wrong == 0), "{:?}", res.rows);
    let bcast: Vec<_> = res
        .rows
        .iter()
        .filter(|r| r.collective == "broadcast")
        .collect();
    assert!(!bcast.is_empty());
    for r in bcast {
        assert!(r.out_of_place.is_none() && r.in_place.is_some(), "{r:?}");
    }
    assert!(
        res.notes.iter().any(|n| n.starts_with(
            "out-of-place block N/A: broadcast (f16, root 1) out of place: algorithm 'compat' \
             runs it in place only"
        )),
        "{:?}",
        res.notes
    );
}

#[test]
fn c_ring_allreduce_and_hello_send_equal_rust_in_bytes_and_picoseconds() {
    let c = ccl_yaml(&format!(
        "defaults: {{algorithm: rust_ring}}\nalgorithms:\n  \
         rust_ring: {{module: ring_allreduce}}\n  \
         c_ring: {{module: {ring}}}\n  \
         rust_ring_chunked: {{module: ring_allreduce, slot_kib: 1, chunk_size: 300}}\n  \
         c_ring_chunked: {{module: {ring}, slot_kib: 1, chunk_size: 300}}\n  \
         hello_send: {{module: {hello}}}\n",
        ring = guests::c("algorithms/c/ring_allreduce/ring_allreduce.c"),
        hello = guests::c("algorithms/c/hello_send/hello_send.c"),
    ));
    assert_same_as_rust(&c, "rust_ring", "c_ring");
    assert_same_as_rust(&c, "rust_ring_chunked", "c_ring_chunked");
    let hello = run("ccl_hello", topo(4), c.clone(), None, &[]).unwrap();
    let rust = run("ccl_hello", topo(4), ccl(), None, &[]).unwrap();
    assert_eq!(hello.rows, rust.rows);
    assert_refuses_an_unknown_parameter(&guests::c("algorithms/c/ring_allreduce/ring_allreduce.c"));
}

#[test]
fn kernbench_host_build_makes_components_and_names_a_missing_toolchain() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ring.wasm");
    let src = guests::root().join("algorithms/c/ring_allreduce/ring_allreduce.c");
    let said = ok(kb().arg("build").arg(&src).arg("-o").arg(&out));
    assert!(said.contains("(algorithm) ->"), "{said}");
    assert!(std::fs::metadata(&out).unwrap().len() > 1000);
    let e = fails(
        kb().env("KERNBENCH_CC", "/nonexistent/clang")
            .arg("build")
            .arg(&src)
            .arg("-o")
            .arg(&out),
    );
    assert!(
        e.contains("the C compiler `/nonexistent/clang` not found")
            && e.contains("apt-get install clang lld wasi-libc"),
        "{e}"
    );
    let py = guests::root().join("algorithms/python/hello_send/hello_send.py");
    let e = fails(
        kb().env("KERNBENCH_COMPONENTIZE_PY", "/nonexistent/componentize-py")
            .arg("build")
            .arg(&py)
            .arg("-o")
            .arg(&out),
    );
    assert!(
        e.contains("toolchains install --lang python")
            && e.contains("pip install componentize-py==0.25.1"),
        "{e}"
    );
    let js = guests::root().join("algorithms/js/hello_send/hello_send.js");
    let e = fails(
        kb().env("KERNBENCH_COMPONENTIZE_JS", "/nonexistent/cli.js")
            .arg("build")
            .arg(&js)
            .arg("-o")
            .arg(&out),
    );
    assert!(
        e.contains("toolchains install --lang js")
            && e.contains("@bytecodealliance/componentize-js@0.23.0"),
        "{e}"
    );
    let bad = dir.path().join("bad.c");
    std::fs::write(&bad, "int x(\n").unwrap();
    let e = fails(kb().arg("build").arg(&bad).arg("-o").arg(&out));
    assert!(
        e.contains("clang failed for") && e.contains("bad.c:1:"),
        "{e}"
    );
    let e = fails(kb().arg("build").arg("algo.rs").arg("-o").arg(&out));
    assert!(e.contains("don't know how to build it"), "{e}");
}

#[test]
fn javascript_ring_allreduce_and_hello_send_equal_rust_in_bytes_and_picoseconds() {
    let ring = guests::js("algorithms/js/ring_allreduce/ring_allreduce.js");
    let c = ccl_yaml(&format!(
        "defaults: {{algorithm: rust_ring}}\nalgorithms:\n  \
         rust_ring: {{module: ring_allreduce}}\n  \
         js_ring: {{module: {ring}}}\n  \
         rust_ring_chunked: {{module: ring_allreduce, slot_kib: 1, chunk_size: 300}}\n  \
         js_ring_chunked: {{module: {ring}, slot_kib: 1, chunk_size: 300}}\n  \
         hello_send: {{module: {hello}}}\n",
        hello = guests::js("algorithms/js/hello_send/hello_send.js"),
    ));
    assert_same_as_rust(&c, "rust_ring", "js_ring");
    assert_same_as_rust(&c, "rust_ring_chunked", "js_ring_chunked");
    let hello = run("ccl_hello", topo(4), c.clone(), None, &[]).unwrap();
    let rust = run("ccl_hello", topo(4), ccl(), None, &[]).unwrap();
    assert_eq!(hello.rows, rust.rows);
    assert_refuses_an_unknown_parameter(&ring);
}

/// `kernbench-host new algorithm NAME --lang LANG` in `dir`, then its
/// build command; the component.
fn new_project(dir: &std::path::Path, lang: &str, name: &str) -> std::path::PathBuf {
    let said = ok(kb()
        .args(["new", "algorithm", name, "--lang", lang, "--dir"])
        .arg(dir));
    assert!(said.contains("README.md says how"), "{said}");
    let root = dir.join(name);
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let out = root.join(format!("{name}.wasm"));
    // The project stands on its own: no path of this tree in its files.
    let tree = guests::root().display().to_string();
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()) {
            if e.is_dir() {
                stack.push(e);
            } else {
                files.push(e);
            }
        }
    }
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        assert!(
            !text.contains(&tree),
            "{} names the build tree {tree}",
            f.display()
        );
    }
    if lang == "rust" {
        assert!(
            readme.contains("cargo build --release --target wasm32-wasip2"),
            "{readme}"
        );
        let r = std::process::Command::new(env!("CARGO"))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
            .current_dir(&root)
            // Reuse the compiled guest SDK of this tree's guests.
            .env("CARGO_TARGET_DIR", guests::root().join("target/guests"))
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        // Its README's test step: the kernel in the SDK's mock, natively.
        assert!(readme.contains("cargo test"), "{readme}");
        let t = std::process::Command::new(env!("CARGO"))
            .args(["test", "--quiet"])
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", guests::root().join("target/guests"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&t.stdout);
        assert!(
            t.status.success()
                && said.lines().any(|l| {
                    l.starts_with("test result: ok.") && !l.starts_with("test result: ok. 0 passed")
                }),
            "{said}\n{}",
            String::from_utf8_lossy(&t.stderr)
        );
        let built = guests::root().join(format!("target/guests/wasm32-wasip2/release/{name}.wasm"));
        std::fs::copy(built, &out).unwrap();
    } else {
        let ext = match lang {
            "python" => "py",
            other => other,
        };
        assert!(
            readme.contains(&format!("kernbench-host build {name}.{ext}")),
            "{readme}"
        );
        let src = root.join(format!("{name}.{ext}"));
        let cache = tempfile::tempdir().unwrap();
        let build = || {
            ok(kb()
                .env("KERNBENCH_CACHE_DIR", cache.path())
                .arg("build")
                .arg(&src)
                .arg("-o")
                .arg(&out))
        };
        let said = build();
        assert!(!said.contains("earlier build"), "{said}");
        if lang != "c" {
            // componentize-py/-js give other bytes for the same input; the
            // builder gives back the first build while the inputs hold.
            let first = std::fs::read(&out).unwrap();
            let said = build();
            assert!(said.contains("the same inputs' earlier build"), "{said}");
            assert!(std::fs::read(&out).unwrap() == first, "{lang}: other bytes");
        }
        // Its README's test step, as written (C: compiled natively with the
        // SDK's mock; JavaScript: under Node with the SDK's mock).
        let test_step = readme
            .split("Test:\n\n    ")
            .nth(1)
            .and_then(|t| t.lines().next())
            .unwrap_or_else(|| panic!("no Test: step in\n{readme}"));
        if lang == "c" || lang == "js" {
            let t = std::process::Command::new("sh")
                .args(["-c", test_step])
                .current_dir(&root)
                .output()
                .unwrap();
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&t.stdout),
                String::from_utf8_lossy(&t.stderr)
            );
            let ran = match lang {
                "c" => said.contains("ok: 24 cases"),
                _ => said.contains("# pass 5") && said.contains("# fail 0"),
            };
            assert!(t.status.success() && ran, "{test_step}\n{said}");
            // The SDK's sources compile without a warning, as users build them.
            assert!(!said.contains("warning:"), "{test_step}\n{said}");
        }
        if lang == "python" {
            // Its README's test step: the kernel in the SDK's mock.
            assert!(readme.contains("python3 -m unittest"), "{readme}");
            let t = std::process::Command::new("python3")
                .args(["-m", "unittest"])
                .current_dir(&root)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&t.stderr);
            assert!(t.status.success() && said.contains("Ran 1 test"), "{said}");
        }
    }
    out
}

#[test]
fn a_new_project_in_every_language_builds_and_runs_as_it_is() {
    // The toolchain paths the builder uses.
    let _ = guests::c("algorithms/c/hello_send/hello_send.c");
    let dir = tempfile::tempdir().unwrap();
    for lang in ["rust", "python", "c", "js"] {
        let name = format!("my_{lang}_ring");
        let wasm = new_project(dir.path(), lang, &name);
        let c = ccl_yaml(&format!(
            "algorithms:\n  {name}: {{module: {}}}\n",
            wasm.display()
        ));
        let res = run(
            "ccl_allreduce",
            topo(3),
            c,
            None,
            &["-b", "8", "-e", "1K", "-f", "8"],
        )
        .unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert!(
            res.rows.iter().all(|r| r.wrong == 0),
            "{lang}: {:?}",
            res.rows
        );
        // Every language's component carries its project's metadata
        // (Cargo.toml, pyproject.toml, package.json; C: its name).
        let info = kernbench::components::metadata::read(&std::fs::read(&wasm).unwrap()).unwrap();
        assert_eq!(info.name(), Some(name.as_str()), "{lang}");
        if lang != "c" {
            assert_eq!(info.version(), Some("0.1.0"), "{lang}");
        }
        assert!(
            info.kernbench
                .as_ref()
                .and_then(|k| k.sdk.as_deref())
                .is_some(),
            "{lang}"
        );
    }
    let e = fails(
        kb().args(["new", "algorithm", "9lives", "--lang", "c", "--dir"])
            .arg(dir.path()),
    );
    assert!(e.contains("not a usable name"), "{e}");
    let e = fails(
        kb().args(["new", "algorithm", "my_c_ring", "--lang", "c", "--dir"])
            .arg(dir.path()),
    );
    assert!(e.contains("already exists"), "{e}");
}

/// The kernel language beyond send / recv / add in every SDK: the
/// `math_probe` ports (C, JavaScript, Python) of the Rust test algorithm.
/// Mode 6, a ring all-reduce through reduce, exp, div, casts,
/// `send_addr` and `recv_async` / `wait`, equals Rust in bytes and
/// picoseconds; modes 3-5, launched by a bench, give the same GEMM and
/// composite results and times, and the same refusal of a bad bias.
#[test]
fn every_sdk_speaks_the_whole_kernel_language_like_rust() {
    let rust = test_component("math_probe");
    let launch = |probe: &str| {
        run(
            test_component("dist_probe"),
            topo(2),
            ccl(),
            None,
            &["launch", probe],
        )
        .unwrap_err()
        .to_string()
    };
    let want = launch(rust);
    let head = |s: &str| s.split(" | ").take(2).collect::<Vec<_>>().join(" | ");
    assert!(head(&want).contains("composite wrong=0"), "{want}");
    for (lang, probe) in [
        ("c", guests::c("tests/components/c/math_probe/math_probe.c")),
        (
            "js",
            guests::js("tests/components/js/math_probe/math_probe.js"),
        ),
        (
            "python",
            guests::python(
                "algorithm",
                "tests/components/python/math_probe/math_probe.py",
            ),
        ),
    ] {
        let c = ccl_yaml(&format!(
            "defaults: {{algorithm: rust}}\nalgorithms:\n  rust: {{module: {rust}, kernel_mode: 6}}\n  \
             other: {{module: {probe}, kernel_mode: 6}}\n"
        ));
        // The rows hold every rank's result check (#wrong) and time.
        assert_same_run_as_rust(&c, "rust", "other", false);
        if lang == "c" {
            // Each call its own host call (Rust batches them), recorded
            // ahead and in step: the same run.
            let go = |l| {
                let args = ["-b", "8", "-e", "4K", "-f", "8"];
                run_with(l, "ccl_allreduce", topo(3), c.clone(), Some("other"), &args).unwrap()
            };
            let (a, b) = (go(&loader()), go(&in_step_loader()));
            assert!(a.rows.iter().all(|r| r.wrong == 0), "{:?}", a.rows);
            assert_eq!(
                (a.rows, a.end_time_ps, a.memory_digest),
                (b.rows, b.end_time_ps, b.memory_digest)
            );
        }
        let got = launch(&probe);
        assert_eq!(head(&got), head(&want), "{lang}");
        assert!(
            got.contains("needs c of shape [4], got [4, 4]"),
            "{lang}: {got}"
        );
    }
}

/// A Python bench launches the built-in `gemm` kernel and fills the
/// compute table: the same time, work and peak as the Rust
/// `gemm_single_pe` for the same shape, every element within tolerance.
#[test]
fn a_python_bench_launches_a_kernel_and_reports_a_compute_row() {
    let bench = guests::python("bench", "benches/python/gemm_single_pe/gemm_single_pe.py");
    let args = ["-m", "32", "-n", "48", "-k", "16"];
    let py = run(&bench, topo(1), ccl(), None, &args).unwrap();
    let mut rust_args = args.to_vec();
    rust_args.extend(["--dtype", "f16"]);
    let rust = run("gemm_single_pe", topo(1), ccl(), None, &rust_args).unwrap();
    let (p, r) = (&py.kernel_rows[0], &rust.kernel_rows[0]);
    assert_eq!((p.wrong, p.checked), (0, 32 * 48));
    assert_eq!(
        (p.time_ps, p.flops, p.peak_tflops, &p.shape),
        (r.time_ps, r.flops, r.peak_tflops, &r.shape)
    );
}

/// A typo in a Python or JavaScript guest: the run's error is the guest's
/// own exception with the author's frames, said once, not once per rank,
/// and without the interpreters' own frames and notices.
#[test]
fn a_guest_exception_is_one_error_with_the_author_s_frames() {
    // The toolchain paths the builder uses.
    let _ = guests::c("algorithms/c/hello_send/hello_send.c");
    let dir = tempfile::tempdir().unwrap();
    let typo = |src: &str, from: &str, to: &str| {
        let text = std::fs::read_to_string(guests::root().join(src)).unwrap();
        assert!(text.contains(from), "{src}");
        let file = dir
            .path()
            .join(std::path::Path::new(src).file_name().unwrap());
        std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
        file
    };
    let build = |src: &std::path::Path, kind: &str| {
        let out = src.with_extension("wasm");
        ok(kb()
            .arg("build")
            .arg(src)
            .args(["--no-cache", "--kind", kind, "-o"])
            .arg(&out));
        out
    };
    let ccl = dir.path().join("ccl.yaml");
    let run_algo = |wasm: &std::path::Path| {
        std::fs::write(
            &ccl,
            format!("algorithms:\n  typo: {{module: {}}}\n", wasm.display()),
        )
        .unwrap();
        fails(
            kb().args(["run", "ccl_hello", "--algorithm", "typo", "--ccl"])
                .arg(&ccl),
        )
    };
    let once = |said: &str, needle: &str| {
        assert_eq!(said.matches(needle).count(), 1, "{needle}:\n{said}");
        for noise in [
            "[sip",
            "panicked",
            "mozalloc",
            "wasm backtrace",
            "kernbench.js",
        ] {
            assert!(!said.contains(noise), "{noise}:\n{said}");
        }
    };

    let py = typo(
        "algorithms/python/hello_send/hello_send.py",
        "rank = cube_id * pes_per_cube + local_pe",
        "rank = cube_id * pes_per_cube + lcal_pe",
    );
    let said = run_algo(&build(&py, "algorithm"));
    once(&said, "NameError: name 'lcal_pe' is not defined");
    assert!(said.contains("the guest raised NameError"), "{said}");
    assert!(said.contains("File \"hello_send.py\", line "), "{said}");

    let js = typo(
        "algorithms/js/hello_send/hello_send.js",
        "tl.load(peAddr",
        "tl.lod(peAddr",
    );
    let said = run_algo(&build(&js, "algorithm"));
    once(&said, "tl.lod is not a function");
    assert!(
        said.contains("the guest threw tl.lod is not a function"),
        "{said}"
    );
    assert!(said.contains("kernel at hello_send.js:"), "{said}");

    // A bench: every rank's worker raises; one error names them all.
    let bench = typo(
        "benches/python/ccl_hello/ccl_hello.py",
        "t.copy_(tile(rank))",
        "t.copy_(tiel(rank))",
    );
    let said = fails(kb().arg("run").arg(build(&bench, "bench")));
    once(&said, "NameError: name 'tiel' is not defined");
    assert!(said.contains("processes 0-3 terminated"), "{said}");
    assert!(said.contains("File \"ccl_hello.py\", line "), "{said}");
}

/// `new bench NAME --lang python`: the README's build, test and run
/// commands, run as written (through `sh`, `kernbench-host` on PATH) in a
/// directory outside the clone.
#[test]
fn a_new_python_bench_runs_its_readme_commands_as_written() {
    // The toolchain paths the builder uses.
    let _ = guests::c("algorithms/c/hello_send/hello_send.c");
    let dir = tempfile::tempdir().unwrap();
    ok(kb()
        .args(["new", "bench", "my_bench", "--lang", "python", "--dir"])
        .arg(dir.path()));
    let root = dir.path().join("my_bench");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_kernbench-host"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for step in ["Build:", "Test:", "Run:"] {
        let line = readme
            .split(&format!("{step}\n\n    "))
            .nth(1)
            .and_then(|t| t.lines().next())
            .unwrap_or_else(|| panic!("no {step} step in\n{readme}"));
        // Where a user's `toolchains install` would have put them: the
        // test's own, given as a user may (the per-user directory of this
        // machine may hold none).
        let t = std::process::Command::new("sh")
            .args(["-c", line])
            .env("PATH", &path)
            .env("KERNBENCH_TOOLCHAINS", guests::toolchains())
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(
            t.status.success(),
            "{step} {line}\n{}{}",
            String::from_utf8_lossy(&t.stdout),
            String::from_utf8_lossy(&t.stderr)
        );
    }
}
