//! `kernbench-host sweep` on this machine: the tidy table of a product of
//! topology and ccl.yaml keys, identical whatever the number of workers,
//! an invalid point reported with its coordinates without stopping the
//! others, resume after an interruption, and the plot.

use crate::common;
use common::{fails, kb, ok};
use std::path::{Path, PathBuf};

/// 2 x 2 points and two invalid (no SIP), small sizes.
const SWEEP: &str = "\
bench: ccl_allreduce
args: -b 1K -e 4K -f 4
axes:
  system.inter_sip_link.bandwidth_gbps: [50, 200]
  system.sips.count: [2, 4, 0]
";

/// `kernbench-host sweep FILE -o OUT`.
fn sweep(file: &Path, out: &Path) -> std::process::Command {
    let mut c = kb();
    c.arg("sweep").arg(file).arg("-o").arg(out);
    c
}

/// `text` as the sweep file `name` in `dir`.
fn sweep_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// When point `i`'s record in `out` was last written.
fn modified(out: &Path, i: usize) -> std::time::SystemTime {
    std::fs::metadata(out.join(format!("points/{i:07}.json")))
        .unwrap()
        .modified()
        .unwrap()
}

fn csv(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("results.csv")).unwrap()
}

#[test]
fn a_sweep_is_one_table_whatever_the_workers_and_its_bad_points_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(tmp.path(), "bw.yaml", SWEEP);
    let one = tmp.path().join("one");
    let two = tmp.path().join("two");
    let err = fails(sweep(&file, &one).arg("-j1"));
    // The two points without a SIP fail, with their coordinates; the others ran.
    assert!(
        err.contains("(system.inter_sip_link.bandwidth_gbps=50, system.sips.count=0)"),
        "{err}"
    );
    assert!(
        err.contains("6 points, 4 ok, 2 failed, 0 without a record"),
        "{err}"
    );
    assert!(err.contains("must be in 1..=4096, got 0"), "{err}");
    fails(sweep(&file, &two).arg("-j2"));
    assert_eq!(csv(&one), csv(&two), "the table depends on the workers");
    let jsonl = |d: &Path| std::fs::read_to_string(d.join("results.jsonl")).unwrap();
    assert_eq!(
        jsonl(&one),
        jsonl(&two),
        "the JSON lines depend on the workers"
    );
    let table = csv(&one);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with(
        "point,system.inter_sip_link.bandwidth_gbps,system.sips.count,status,error,bench,algorithm,world_size,collective,size_bytes"
    ), "{}", lines[0]);
    // 4 good points x 2 sizes (1K, 4K) + 2 error rows.
    assert_eq!(lines.len(), 1 + 4 * 2 + 2, "{table}");
    assert!(
        lines[1].starts_with("0,50,2,ok,,ccl_allreduce,ring_allreduce,2,all_reduce,1024,"),
        "{}",
        lines[1]
    );
    assert!(
        lines.iter().any(|l| l.starts_with("2,50,0,error,")),
        "{table}"
    );
    // More bandwidth, less time: 4 SIPs at 4 KiB, 50 vs 200 GB/s.
    // (points 1 and 4: 50 and 200 GB/s, 4 SIPs.)
    let col = lines[0].split(',').position(|c| c == "time_us").unwrap();
    let time = |point: &str| -> f64 {
        let l = lines
            .iter()
            .find(|l| l.starts_with(point) && l.contains(",4096,"))
            .unwrap();
        l.split(',').nth(col).unwrap().parse().unwrap()
    };
    assert!(time("1,50,4,") > time("4,200,4,"), "{table}");
    let jsonl = std::fs::read_to_string(one.join("results.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 10);
    assert!(jsonl.contains("\"system.sips.count\":4,"), "{jsonl}");
}

#[test]
fn a_lost_record_is_run_again_and_another_sweep_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(
        tmp.path(),
        "s.yaml",
        "bench: ccl_allreduce\nargs: -b 1K -e 1K\naxes:\n  defaults.algorithm: [ring_allreduce, tree_allreduce, ring_rsag_allreduce]\n",
    );
    let out = tmp.path().join("out");
    ok(&mut sweep(&file, &out));
    let full = csv(&out);
    // Lose one point's record (as a killed run would) and resume.
    std::fs::remove_file(out.join("points/0000001.json")).unwrap();
    let stamp = |i: usize| modified(&out, i);
    let before = stamp(0);
    let err = fails(&mut sweep(&file, &out));
    assert!(err.contains("pass --resume to run the rest"), "{err}");
    ok(sweep(&file, &out).arg("--resume"));
    assert_eq!(stamp(0), before, "a done point ran again");
    assert_eq!(csv(&out), full);
    // Another sweep in the same directory is refused.
    std::fs::write(&file, "bench: ccl_allreduce\nargs: -b 2K -e 2K\n").unwrap();
    let err = fails(sweep(&file, &out).arg("--resume"));
    assert!(err.contains("holds the results of another sweep"), "{err}");
}

#[test]
fn a_sweep_draws_a_metric_against_an_axis() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(
        tmp.path(),
        "p.yaml",
        "bench: ccl_allreduce\nargs: -b 1K -e 64K -f 8\naxes:\n  system.inter_sip_link.bandwidth_gbps: [50, 100, 200]\n  defaults.algorithm: [ring_allreduce, tree_allreduce]\n",
    );
    let out = tmp.path().join("out");
    let svg = tmp.path().join("bw.svg");
    // Size varies too: unpinned, the plot is refused naming it.
    let err = fails(
        sweep(&file, &out)
            .args([
                "--x",
                "system.inter_sip_link.bandwidth_gbps",
                "--by",
                "defaults.algorithm",
                "--plot",
            ])
            .arg(&svg),
    );
    assert!(
        err.contains("size_bytes (1024, 65536, 8192)")
            || err.contains("size_bytes (1024, 8192, 65536)"),
        "{err}"
    );
    ok(kb()
        .args(["sweep", "plot"])
        .arg(&out)
        .args([
            "--x",
            "system.inter_sip_link.bandwidth_gbps",
            "--by",
            "defaults.algorithm",
            "--where",
            "size_bytes=65536",
            "--plot",
        ])
        .arg(&svg));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("defaults.algorithm=tree_allreduce"),
        "no legend"
    );
    assert!(
        text.contains("system.inter_sip_link.bandwidth_gbps"),
        "no axis label"
    );
}

#[test]
fn a_bad_sweep_file_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.yaml");
    std::fs::write(
        &file,
        "bench: ccl_allreduce\naxes:\n  system.inter_sip_lnk.bandwidth_gbps: [50]\n",
    )
    .unwrap();
    let err = fails(
        kb().arg("sweep")
            .arg(&file)
            .arg("-o")
            .arg(tmp.path().join("o")),
    );
    assert!(
        err.contains("axis `system.inter_sip_link.bandwidth_gbps`")
            || err.contains("no `system.inter_sip_lnk`"),
        "{err}"
    );
    assert!(
        !tmp.path().join("o").exists(),
        "a refused sweep left a directory"
    );
}

#[test]
fn a_sweep_interrupted_by_ctrl_c_loses_only_its_running_point() {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    // Eight points, one at a time, of ~0.45 s each (the test build,
    // 2026-11-27): the interrupt below must come while points remain, so
    // the seven after the first give it ~3 s. With four, the whole
    // workspace's tests on two cores once left the 10 ms poll behind
    // until the sweep had ended.
    const POINTS: usize = 8;
    let file = sweep_file(
        tmp.path(),
        "slow.yaml",
        "bench: ccl_allreduce\nargs: -b 1M -e 1M\naxes:\n  system.sips.count: [32, 33, 34, 35, 36, 37, 38, 39]\n",
    );
    let out = tmp.path().join("out");
    let mut command = sweep(&file, &out);
    command
        .arg("-j1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    // Ctrl-C's default action, whatever this test inherited: a shell
    // runs a background job (`.ci/run &`) with SIGINT ignored, and an
    // ignored signal stays ignored across exec, so the sweep ran all its
    // points through the interrupt (the fresh-clone CI of 35f7c86 and
    // addf8ee, started so).
    // SAFETY: `signal` is async-signal-safe, as `pre_exec` requires.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut running = command.spawn().unwrap();
    let start = Instant::now();
    while !out.join("points/0000000.json").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no point done in 120 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Ctrl-C: SIGINT to the sweep's process group, its workers included.
    // SAFETY: a signal to the group of a child this test started.
    unsafe {
        libc::kill(-(running.id() as i32), libc::SIGINT);
    }
    assert!(!running.wait().unwrap().success());
    let records = || -> Vec<usize> {
        (0..POINTS)
            .filter(|i| out.join(format!("points/{i:07}.json")).exists())
            .collect()
    };
    let done = records();
    assert!(
        !done.is_empty() && done.len() < POINTS,
        "done before the interrupt: {done:?}"
    );
    let stamp = |i: usize| modified(&out, i);
    let before: Vec<_> = done.iter().map(|&i| stamp(i)).collect();
    let err = fails(&mut sweep(&file, &out));
    assert!(
        err.contains(&format!("({} of {POINTS} points)", done.len())),
        "{err}"
    );
    ok(sweep(&file, &out).arg("--resume"));
    assert_eq!(records(), (0..POINTS).collect::<Vec<_>>());
    let after: Vec<_> = done.iter().map(|&i| stamp(i)).collect();
    assert_eq!(before, after, "a point done before the interrupt ran again");
    let table = csv(&out);
    assert_eq!(
        table.lines().filter(|l| l.contains(",ok,")).count(),
        POINTS,
        "{table}"
    );
}

#[test]
fn failed_points_run_again_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(
        tmp.path(),
        "f.yaml",
        "bench: ccl_allreduce\nargs: -b 1K -e 1K\naxes:\n  system.sips.count: [2, 0]\n",
    );
    let out = tmp.path().join("out");
    fails(&mut sweep(&file, &out));
    let err = fails(sweep(&file, &out).arg("--resume"));
    assert!(err.contains("1 ok, 1 failed"), "{err}");
    let err = fails(sweep(&file, &out).args(["--resume", "--retry-failed"]));
    assert!(err.contains("# 1 failed point(s) to run again"), "{err}");
    assert!(out.join("points/failed/0000001.json").exists());
}

#[test]
fn a_compute_bench_sweeps_into_the_same_table() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(
        tmp.path(),
        "gemm.yaml",
        "bench: gemm_single_pe\nargs: --sizes 64,128 --dtype f16\naxes:\n  pe.gemm.overhead_ns: [50, 500]\n",
    );
    let out = tmp.path().join("out");
    ok(&mut sweep(&file, &out));
    let table = csv(&out);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0]
            .ends_with(",kernel,shape,pes,flops,tflops,peak_tflops,checked,max_rel_err,tolerance"),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 1 + 2 * 2, "{table}");
    assert!(
        lines[1].starts_with("0,50,ok,,gemm_single_pe,"),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains(",gemm,m=64 n=64 k=64,1,524288,"),
        "{}",
        lines[1]
    );
    // A slower matrix unit: more time for the same GEMM.
    let col = lines[0].split(',').position(|c| c == "time_us").unwrap();
    let time = |l: &str| -> f64 { l.split(',').nth(col).unwrap().parse().unwrap() };
    assert!(time(lines[3]) > time(lines[1]) + 0.4, "{table}");
}
