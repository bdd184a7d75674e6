//! The command line as a user runs it: table, JSON, CSV, list, config
//! files from disk and clear config errors.

use crate::common;
use common::{fails, kb, ok};

#[test]
fn table_has_the_nccl_tests_columns() {
    let out = ok(kb().args(["run", "ccl_allreduce", "--", "-b", "8", "-e", "1K"]));
    // nccl-tests' four header lines as its all_reduce_perf prints them,
    // each a prefix of ours (the bound and efficiency follow).
    let fixture = include_str!("../fixtures/nccl-tests/all_reduce_perf.header.txt");
    let ours: Vec<&str> = out.lines().collect();
    let at = ours
        .iter()
        .position(|l| l.contains("out-of-place"))
        .expect("the block titles")
        - 1;
    for (i, want) in fixture.lines().enumerate() {
        assert!(
            ours[at + i].starts_with(want),
            "header line {}:\n  ours: {:?}\n  nccl: {want:?}",
            i + 1,
            ours[at + i]
        );
    }
    assert!(ours[at - 1] == "# collective: all_reduce", "{out}");
    for col in ["bound", "eff"] {
        assert!(ours[at + 2].contains(col), "missing {col}:\n{out}");
    }
    // A row: size count type redop root, then the two blocks.
    let row: Vec<&str> = ours[at + 4].split_whitespace().collect();
    assert_eq!(row[..5], ["8", "4", "half", "sum", "-1"], "{out}");
    // Both blocks run (ring_allreduce reads the input and writes the
    // output): the same time, nothing wrong.
    assert_eq!(row[8], "0", "out-of-place #wrong: {out}");
    assert_eq!(row[12], "0", "in-place #wrong: {out}");
    assert_eq!(row[5..8], row[9..12], "{out}");
    assert!(out.contains("Out of bounds values : 0 OK"), "{out}");
    assert_eq!(
        out.lines().filter(|l| !l.starts_with('#')).count(),
        8,
        "8 B .. 1 KiB: {out}"
    );
}

#[test]
fn json_output_parses_and_has_every_row() {
    let out = ok(kb().args([
        "run",
        "ccl_allreduce",
        "--format",
        "json",
        "--",
        "-b",
        "8",
        "-e",
        "64",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["algorithm"], "ring_allreduce");
    assert_eq!(v["world_size"], 4);
    assert_eq!(v["wrong_total"], 0);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0]["size_bytes"], 8);
    assert!(rows[0]["busbw_gbps"].as_f64().unwrap() > 0.0);
    // The table's fields: the root, both blocks, the aggregation.
    assert_eq!(rows[0]["root"], -1);
    assert_eq!(rows[0]["type"], "half");
    assert_eq!(rows[0]["time_aggregation"], "max");
    let (oop, ip) = (&rows[0]["out_of_place"], &rows[0]["in_place"]);
    assert_eq!((&oop["wrong"], &ip["wrong"]), (&0.into(), &0.into()));
    // The headline is the out-of-place block.
    assert_eq!(oop["busbw_gbps"], rows[0]["busbw_gbps"]);
    assert!(ip["busbw_gbps"].as_f64().unwrap() > 0.0);
    // -c 0 checks nothing: no count, and the table says N/A.
    let out = ok(kb().args([
        "run",
        "ccl_reduce",
        "--format",
        "json",
        "--",
        "-b",
        "8",
        "-e",
        "8",
        "-c",
        "0",
        "-r",
        "1",
        "-a",
        "1",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &v["rows"][0];
    assert_eq!(
        (row["root"].as_i64(), row["in_place"]["wrong"].is_null()),
        (Some(1), true)
    );
    assert_eq!(row["time_aggregation"], "mean");
}

#[test]
fn csv_output_has_a_header_and_rows() {
    let out = ok(kb().args([
        "run",
        "ccl_allreduce",
        "--format",
        "csv",
        "--",
        "-b",
        "8",
        "-e",
        "16",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "collective,size_bytes,count,type,redop,root,time_aggregation,oop_time_us,oop_algbw_gbps,\
         oop_busbw_gbps,oop_efficiency,oop_wrong,ip_time_us,ip_algbw_gbps,ip_busbw_gbps,\
         ip_efficiency,ip_wrong,bound_us"
    );
    // Both blocks: out of place, then in place.
    let fields: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(
        fields[..7],
        ["all_reduce", "8", "4", "half", "sum", "-1", "max"]
    );
    assert_eq!((fields[11], fields[16]), ("0", "0"), "{out}");
    assert_eq!(fields[7..11], fields[12..16], "{out}");
    assert_eq!(lines.len(), 3);
}

#[test]
fn list_shows_builtin_benches_and_algorithms() {
    let out = ok(kb().arg("list"));
    for name in ["ccl_allreduce", "ccl_hello", "ring_allreduce", "hello_send"] {
        assert!(out.contains(name), "{out}");
    }
    assert!(
        !out.contains("dist_probe"),
        "test components are not built in"
    );
}

#[test]
fn configs_from_files_replace_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let topo = kernbench::config::DEFAULT_TOPOLOGY_YAML.replace("count: 4", "count: 6");
    std::fs::write(dir.path().join("topo.yaml"), topo).unwrap();
    // ccl.yaml naming the algorithm by a path relative to the file.
    let wasm = kernbench::runtime::loader::BUILTIN
        .iter()
        .find(|b| b.name == "ring_allreduce")
        .unwrap()
        .path;
    std::fs::copy(wasm, dir.path().join("my_ring.wasm")).unwrap();
    std::fs::write(
        dir.path().join("ccl.yaml"),
        "defaults: {algorithm: mine}\nalgorithms:\n  mine: {module: ./my_ring.wasm, topology: ring_1d}\n",
    )
    .unwrap();
    let out = ok(kb()
        .args(["run", "ccl_allreduce", "--format", "json", "--topology"])
        .arg(dir.path().join("topo.yaml"))
        .arg("--ccl")
        .arg(dir.path().join("ccl.yaml"))
        .args(["--", "-b", "1K", "-e", "1K"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["world_size"], 6);
    assert_eq!(v["algorithm"], "mine");
    assert_eq!(v["wrong_total"], 0);
}

#[test]
fn a_malformed_yaml_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(&f, "system:\n  sips: [1, 2\n").unwrap();
    let out = kb()
        .args(["run", "ccl_allreduce", "--topology"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml") && err.contains("line"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn topology_validate_and_show() {
    assert!(ok(kb().args(["topology", "validate"])).contains("ok: 4 SIPs ring_1d"));
    let out = ok(kb().args(["topology", "show"]));
    assert!(out.contains("inter_sip") && out.contains("ucie"), "{out}");
}

#[test]
fn trace_has_engines_links_kernels_and_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.json");
    let out = ok(kb()
        .args(["run", "ccl_allreduce", "--format", "json", "--trace"])
        .arg(&f)
        .args(["--", "-b", "4K", "-e", "4K"]));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let thread = |e: &serde_json::Value| {
        events
            .iter()
            .find(|m| {
                m["ph"] == "M"
                    && m["name"] == "thread_name"
                    && m["pid"] == e["pid"]
                    && m["tid"] == e["tid"]
            })
            .map(|m| m["args"]["name"].as_str().unwrap().to_string())
            .unwrap()
    };
    let spans: Vec<(String, &serde_json::Value)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| (thread(e), e))
        .collect();
    for kind in [" DMA", " MATH", " kernel", "(inter_sip)", "(hbm)", "rank 0"] {
        assert!(
            spans.iter().any(|(t, _)| t.contains(kind)),
            "no {kind} track"
        );
    }
    // Each rank's collective spans (out of place, then in place) are the
    // times the report shows.
    let time_us = report["rows"][0]["time_us"].as_f64().unwrap();
    let ranks: Vec<f64> = spans
        .iter()
        .filter(|(t, _)| t.starts_with("rank "))
        .map(|(_, e)| e["dur"].as_f64().unwrap())
        .collect();
    assert_eq!(ranks.len(), 2 * 4);
    assert_eq!(
        report["rows"][0]["in_place"]["time_us"].as_f64(),
        Some(time_us),
        "ring_allreduce takes as long either way"
    );
    assert!(
        ranks.iter().all(|d| (d - time_us).abs() < 1e-9),
        "{ranks:?} vs {time_us}"
    );
    // No span on a link is longer than the whole run.
    assert!(spans
        .iter()
        .all(|(_, e)| e["dur"].as_f64().unwrap() <= report["sim_end_us"].as_f64().unwrap()));
}

#[test]
fn more_than_five_hundred_ranks_run_with_a_pool_sized_from_the_topology() {
    // 600 SIPs need 1202 instances: more than the old fixed pool of 1000.
    let dir = tempfile::tempdir().unwrap();
    let topo = common::topology_file(dir.path(), 600);
    let out = ok(kb()
        .args([
            "run",
            "ccl_hello",
            "--algorithm",
            "hello_send",
            "--format",
            "json",
        ])
        .arg("--topology")
        .arg(&topo));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["world_size"], 600);
    assert_eq!(report["wrong_total"], 0);
}

#[test]
fn the_progress_line_never_reaches_a_pipe() {
    // A run with stderr captured, as in CI or `2> log`, that outlasts the
    // progress line's delay (set to none, so the check does not depend on
    // how fast this machine runs a collective): the summary is there, the
    // spinner is not.
    let out = kb()
        .env("KERNBENCH_PROGRESS_AFTER", "0")
        .args(["run", "ccl_allreduce", "--", "-b", "16", "-e", "64K"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let wall = err
        .rsplit("wall ")
        .next()
        .and_then(|w| w.trim().trim_end_matches(" s").parse::<f64>().ok());
    assert!(err.contains("# simulated") && wall.is_some(), "{err}");
    assert!(
        !err.contains("rows reported") && !err.contains('\r'),
        "{err}"
    );
}

#[test]
fn every_built_in_bench_passes_with_the_default_configs_and_no_flags() {
    // ccl_hello asks for hello_send itself; the default algorithm is the ring.
    for bench in ["ccl_hello", "ccl_allreduce"] {
        let out = ok(kb().args(["run", bench]));
        assert!(
            out.contains("Out of bounds values : 0 OK"),
            "{bench}: {out}"
        );
    }
    let out = ok(kb().args(["run", "ccl_hello"]));
    assert!(out.contains("algorithm hello_send"), "{out}");
    // The compute benches launch kernels and check them within tolerance.
    for bench in ["gemm_single_pe", "gpt3_qkv", "va_offset_verify"] {
        let out = ok(kb().args(["run", bench]));
        assert!(
            out.contains("Out of tolerance values : 0 of"),
            "{bench}: {out}"
        );
    }
}

#[test]
fn the_seeds_example_ccl_yamls_run_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    // seed 003 §1 step 2: hello_send with world_size 8 on the 4-SIP default
    // machine: rank = PE, ccl_hello's single driver (ADR-0047 D5).
    let hello = dir.path().join("hello.yaml");
    std::fs::write(
        &hello,
        "algorithms:\n  hello_send:\n    module: kernbench.ccl.algorithms.hello_send\n    topology: ring_1d\n    buffer_kind: tcm\n    world_size: 8\n",
    )
    .unwrap();
    let out = ok(kb().args(["run", "ccl_hello", "--ccl", hello.to_str().unwrap()]));
    assert!(out.contains("Out of bounds values : 0 OK"), "{out}");
    assert!(out.contains("# world_size 8 "), "{out}");
    // seed 004 D4: ring_allreduce_tcm with mapper, validator and n_elem.
    let ring = dir.path().join("ring.yaml");
    std::fs::write(
        &ring,
        "algorithms:\n  ring_allreduce_tcm:\n    module: kernbench.ccl.algorithms.ring_allreduce\n    topology: ring_1d\n    mapper: leader_only\n    validator: single_shard_per_rank\n    buffer_kind: tcm\n    n_elem: 8\n",
    )
    .unwrap();
    let out = ok(kb().args(["run", "ccl_allreduce", "--ccl", ring.to_str().unwrap()]));
    assert!(out.contains("Out of bounds values : 0 OK"), "{out}");
    // seed 001 ADR-0050 D6: lrab with only its module.
    let lrab = dir.path().join("lrab.yaml");
    std::fs::write(
        &lrab,
        "defaults:\n  algorithm: lrab_hierarchical_allreduce\n  n_elem: 8\n\nalgorithms:\n  lrab_hierarchical_allreduce:\n    module: kernbench.ccl.algorithms.lrab_hierarchical_allreduce\n",
    )
    .unwrap();
    let out = ok(kb().args([
        "run",
        "ccl_allreduce",
        "--ccl",
        lrab.to_str().unwrap(),
        "--",
        "--cubes",
        "16",
    ]));
    assert!(out.contains("Out of bounds values : 0 OK"), "{out}");
}

#[test]
fn the_ccl_trace_prints_every_send_and_receive_to_stderr() {
    for (flag, env) in [(Some("--ccl-trace"), None), (None, Some("1"))] {
        let mut cmd = kb();
        cmd.args(["run", "ccl_hello"]);
        if let Some(f) = flag {
            cmd.arg(f);
        }
        if let Some(v) = env {
            cmd.env("KERNBENCH_CCL_TRACE", v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("[ccl "), "the table's stdout stays clean");
        let sends = err.lines().filter(|l| l.contains(" send] ")).count();
        let recvs = err.lines().filter(|l| l.contains(" recv] ")).count();
        assert_eq!((sends, recvs), (4, 4), "{err}");
        assert!(
            err.contains("send] sip0.cube0.pe0 dir=E nbytes=16 seq=0"),
            "{err}"
        );
        assert!(
            err.contains("recv] sip1.cube0.pe0 dir=W nbytes=16 seq=0 from=sip0.cube0.pe0 (E)"),
            "{err}"
        );
    }
    let quiet = kb()
        .args(["run", "ccl_hello"])
        .env("KERNBENCH_CCL_TRACE", "0")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("[ccl "));
}

/// A compute bench prints the compute table (time, achieved vs peak
/// TFLOP/s, efficiency, error against its reference), in JSON and CSV
/// too; a bad argument is an error naming it.
#[test]
fn the_gemm_bench_reports_achieved_and_peak_flops() {
    let args = [
        "run",
        "gemm_single_pe",
        "--format",
        "json",
        "--",
        "--sizes",
        "32,64",
    ];
    let v: serde_json::Value = serde_json::from_str(&ok(kb().args(args))).unwrap();
    let k = v["kernels"].as_array().unwrap();
    assert_eq!(k.len(), 6, "two sizes x three dtypes: {v}");
    for r in k {
        assert_eq!(r["wrong"], 0, "{r}");
        let (eff, peak) = (
            r["efficiency"].as_f64().unwrap(),
            r["peak_tflops"].as_f64().unwrap(),
        );
        assert!(eff > 0.0 && eff <= 1.0, "{r}");
        assert!([65.536, 16.384].contains(&peak), "{r}");
    }
    let csv = ok(kb().args([
        "run",
        "gemm_single_pe",
        "--format",
        "csv",
        "--",
        "--sizes",
        "16",
    ]));
    assert!(
        csv.starts_with("name,shape,type,pes,flops,time_ps"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 4, "{csv}");
    let table = ok(kb().args([
        "run",
        "gemm_single_pe",
        "--",
        "--sizes",
        "16",
        "--dtype",
        "i32",
    ]));
    assert!(
        table.contains("achieved") && table.contains("0 of 256 checked OK"),
        "{table}"
    );
    let e = common::fails(kb().args(["run", "gemm_single_pe", "--", "--dtype", "f8"]));
    assert!(e.contains("unknown dtype \"f8\""), "{e}");
}

#[test]
fn run_plot_draws_busbw_and_time_one_line_per_algorithm() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("busbw.svg");
    let svg_arg = svg.to_str().unwrap();
    ok(kb().args([
        "run",
        "ccl_allreduce",
        "--plot",
        svg_arg,
        "--",
        "-b",
        "8",
        "-e",
        "1K",
    ]));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"), "{}", &text[..100.min(text.len())]);
    for s in [
        "busbw (GB/s)",
        "time (us)",
        "all_reduce ring_allreduce (half sum)",
    ] {
        assert!(text.contains(s), "missing {s:?} in the SVG");
    }
    // one line in each of the two charts, one legend sample
    assert_eq!(coloured_lines(&text), 3);
}

#[test]
fn plot_overlays_json_reports_named_by_file_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut reports = Vec::new();
    for alg in ["ring_allreduce", "ring_rsag_allreduce"] {
        let out = ok(kb().args([
            "run",
            "ccl_allreduce",
            "--algorithm",
            alg,
            "--format",
            "json",
            "--",
            "-b",
            "64",
            "-e",
            "4K",
        ]));
        let path = dir.path().join(format!("{alg}.json"));
        std::fs::write(&path, out).unwrap();
        reports.push(path.to_str().unwrap().to_string());
    }
    let svg = dir.path().join("cmp.svg");
    let mut cmd = kb();
    cmd.arg("plot")
        .args(&reports)
        .args(["-o", svg.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 line(s) from 2 report(s)"));
    let text = std::fs::read_to_string(&svg).unwrap();
    for s in [
        "ring_allreduce: all_reduce ring_allreduce (half sum)",
        "ring_rsag_allreduce: all_reduce ring_rsag_allreduce (half sum)",
    ] {
        assert!(text.contains(s), "missing {s:?} in the SVG");
    }
    assert_eq!(coloured_lines(&text), 6);

    // a file that is not a report names itself
    let bad = dir.path().join("not_a_report.json");
    std::fs::write(&bad, "{\"rows\": 3}").unwrap();
    let out = kb()
        .args(["plot", bad.to_str().unwrap(), "-o"])
        .arg(dir.path().join("x.svg"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not_a_report.json"), "{err}");
}

/// Polylines drawn in a series colour (axes and ticks are black).
fn coloured_lines(svg: &str) -> usize {
    svg.split("<polyline")
        .skip(1)
        .filter(|l| {
            !l.split('>')
                .next()
                .unwrap_or("")
                .contains("stroke=\"#000000\"")
        })
        .count()
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    // `kernbench-host inspect ring_allreduce | head -0`: the reader is
    // gone before the first line (the command first builds an engine).
    let mut child = kb()
        .args(["inspect", "ring_allreduce"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

/// `KERNBENCH_PERF_MAP=1`: wasmtime writes `/tmp/perf-<pid>.map`, so that
/// `perf report` names the guest's functions (the kernel's helpers, the
/// SDK's calls) rather than bare addresses of compiled code.
#[test]
fn a_perf_map_names_the_guest_s_functions() {
    let mut cmd = kb();
    cmd.args(["run", "ccl_allreduce", "--", "-b", "8", "-e", "8"])
        .env("KERNBENCH_PERF_MAP", "1")
        .stdout(std::process::Stdio::null());
    let child = cmd.spawn().unwrap();
    let map = std::path::PathBuf::from(format!("/tmp/perf-{}.map", child.id()));
    let out = child.wait_with_output().unwrap();
    let text = std::fs::read_to_string(&map);
    let _ = std::fs::remove_file(&map);
    assert!(out.status.success());
    let text = text.expect("no perf map written");
    assert!(text.contains("ring_allreduce"), "{text:.2000}");
    assert!(text.contains("kernbench_guest"), "{text:.2000}");
}

#[test]
fn a_split_that_fails_prints_the_guests_output_once() {
    // 64 SIPs split by default; every rank of faulty_kernel (64 B) prints
    // a line, then waits for a message nobody sends. The split fails, and
    // the run is made again on one partition for its deadlock report: the
    // ranks' lines are that run's, once each, not the abandoned split's
    // too (they were held, see `wasi::Console`).
    let dir = tempfile::tempdir().unwrap();
    let topo = common::topology_file(dir.path(), 64);
    let ccl = dir.path().join("faulty.yaml");
    std::fs::write(
        &ccl,
        format!(
            "defaults: {{algorithm: faulty}}\nalgorithms:\n  faulty: {{module: {}, topology: ring_1d, buffer_kind: tcm, n_slots: 2, slot_kib: 64}}\n",
            common::test_component("faulty_kernel")
        ),
    )
    .unwrap();
    let out = kb()
        .args(["run", "ccl_allreduce", "--topology"])
        .arg(&topo)
        .arg("--ccl")
        .arg(&ccl)
        .args(["--", "-b", "64", "-e", "64"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("deadlock"), "{err}");
    let waits = |pe: &str| {
        err.lines()
            .filter(|l| l.starts_with(&format!("[{pe}] about to wait")))
            .count()
    };
    assert_eq!(waits("sip0.cube0.pe0"), 1, "{err}");
    assert_eq!(waits("sip63.cube0.pe0"), 1, "{err}");
}

#[test]
fn kernels_in_step_give_an_asked_for_split_up_and_are_not_split_by_default() {
    // Asked for (`--partitions 2`), the split gives up at the first kernel
    // that runs in step, says why, and the run is made on one partition:
    // every rank's line once (ccl_hello prints after its collective, so
    // the abandoned split had printed nothing yet; see
    // `a_split_that_fails_prints_the_guests_output_once` for a split that
    // had). Not asked for, a run whose kernels run in step is not split.
    let dir = tempfile::tempdir().unwrap();
    let topo = common::topology_file(dir.path(), 64);
    for asked in [true, false] {
        let mut cmd = kb();
        cmd.args(["run", "ccl_hello", "--in-step-kernels", "--topology"])
            .arg(&topo);
        if asked {
            cmd.args(["--partitions", "2"]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.contains("the split run was given up"), asked, "{err}");
        assert_eq!(err.contains("runs in step"), asked, "{err}");
        for rank in [0, 63] {
            let prefix = format!("[rank {rank}] ");
            assert_eq!(
                err.lines().filter(|l| l.starts_with(&prefix)).count(),
                1,
                "{err}"
            );
        }
        assert!(!err.contains("split in 2 partitions"), "{err}");
    }
}

/// An output file that cannot be written is refused before the run, not
/// after it (the simulation would be lost).
#[test]
fn unwritable_output_paths_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let e = fails(kb().args(["run", "ccl_allreduce", "--trace", "/nonexistent/dir/t.json"]));
    assert!(
        e.contains("--trace /nonexistent/dir/t.json: no such directory") && !e.contains("Avg bus"),
        "{e}"
    );
    let e = fails(
        kb().args(["run", "ccl_allreduce", "--oplog"])
            .arg(dir.path()),
    );
    assert!(e.contains("is a directory; give a file name"), "{e}");
    // A writable path is not left behind by the check when the run fails.
    let plot = dir.path().join("p.svg");
    fails(
        kb().args([
            "run",
            "ccl_allreduce",
            "--algorithm",
            "no_such_algorithm",
            "--plot",
        ])
        .arg(&plot),
    );
    assert!(!plot.exists());
}

/// A size that comes from outside is bounded: a device as a config,
/// plan, report or component is refused unread (`install /dev/zero` read
/// 6 GB in 11 s).
#[test]
fn devices_given_as_files_are_refused_unread() {
    for args in [
        &["run", "ccl_allreduce", "--ccl", "/dev/zero"][..],
        &["run", "ccl_allreduce", "--topology", "/dev/zero"],
        &["sweep", "/dev/zero"],
        &["plot", "/dev/zero", "-o", "/tmp/kb-never.svg"],
        &["install", "/dev/zero", "--name", "zero"],
        &["publish", "/dev/zero", "localhost:1/zero:1"],
    ] {
        let e = fails(kb().args(args));
        assert!(
            e.contains("/dev/zero is not a regular file"),
            "{args:?}: {e}"
        );
    }
}
