//! Scale and speed figures of issue 9, printed as a table: the cost of a
//! ring step, the 1024-rank 16 B and the 64-rank 1 MiB ring all-reduce,
//! a full mesh (binomial broadcast, 256 ranks), f16 add throughput and
//! host memory per rank.
//!
//! ```sh
//! cargo bench -p kernbench-host --bench scale              # all figures
//! cargo bench -p kernbench-host --bench scale -- quick     # skip the 1024-rank ring
//! cargo bench -p kernbench-host --bench scale -- repeat=5  # best of 5 (default 3)
//! ```
//!
//! Each run goes through the real host (library API, built-in components)
//! exactly as `kernbench-host run` does; wall times exclude compiling the
//! topology and include everything else (instances, simulation, checks).
//! Every run's data is checked: a figure from a wrong result is refused.
//! The table goes to stdout; guests' output goes to stderr as in the CLI
//! (the memory figures' `ccl_hello` prints a line per rank).
//!
//! Each wall-time figure is the best of `repeat` runs, the median beside
//! it: on a shared machine other work only ever adds wall time, so the
//! least is the closest to the cost of the run itself (and the spread
//! says how noisy the hour was).
//!
//! The whole-run figures also give the processor time of their best run:
//! of every thread of the process, and of the thread that called
//! `run_bench` alone. The first over the cores here bounds the wall time
//! any division of the same work could reach. On one executor the calling
//! thread is the engine thread (setup, the benches, the simulation, the
//! recordings it takes over), the run's critical path while it is never
//! idle, and the others are helpers (kernel recording, moving bytes,
//! route searches); in a split run (`N partition(s)`, N > 1) each
//! partition simulates on a thread of its own, so the calling thread's
//! share is mostly setup and the others' is the simulation.

mod support;

use kernbench::hw::dtype::{binary, BinOp, Dtype};
use kernbench::runtime::{run_bench, RunRequest, RunResult};
use std::time::Instant;

/// The CLI's heap, so that the figures are the CLI's.
#[global_allocator]
static HEAP: kernbench::heap::SplitHeap = kernbench::heap::SplitHeap;

/// Processor time (user + system) so far, in seconds: of every thread
/// the process has had (`RUSAGE_SELF`), and of the calling thread.
fn cpu_seconds() -> (f64, f64) {
    let of = |who| {
        // SAFETY: `getrusage` fills the struct it is given; a zeroed
        // `rusage` is a valid value of it.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::getrusage(who, &mut u) } == 0;
        assert!(ok, "getrusage: {}", std::io::Error::last_os_error());
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        secs(u.ru_utime) + secs(u.ru_stime)
    };
    (of(libc::RUSAGE_SELF), of(libc::RUSAGE_THREAD))
}

/// One timed run: wall time, and processor time of the whole process and
/// of the thread that calls `run_bench` (the engine thread on one
/// executor), in seconds.
#[derive(Clone, Copy)]
struct Timed {
    wall: f64,
    cpu: f64,
    engine: f64,
}

/// The timed runs of one figure.
struct Runs(Vec<Timed>);

impl Runs {
    /// The run of least wall time.
    fn best_run(&self) -> Timed {
        *self
            .0
            .iter()
            .min_by(|a, b| a.wall.total_cmp(&b.wall))
            .expect("at least one run")
    }

    /// The least wall time.
    fn best(&self) -> f64 {
        self.best_run().wall
    }

    fn median(&self) -> f64 {
        let mut w: Vec<f64> = self.0.iter().map(|t| t.wall).collect();
        w.sort_by(f64::total_cmp);
        w[w.len() / 2]
    }

    /// The best run's processor time, and the least wall time that work
    /// could take on the cores of this machine.
    fn cpu_note(&self) -> String {
        let t = self.best_run();
        let cores = kernbench::cores::count();
        format!(
            "processor time {:.2} s ({:.2} s on the calling thread, {:.2} s on others): \
             on {cores} cores no division of it ends before {:.2} s",
            t.cpu,
            t.engine,
            t.cpu - t.engine,
            t.cpu / cores as f64
        )
    }
}

/// `bench` run `times` times; the last run's result (every run's data is
/// checked, and a run is deterministic) and every run's times.
fn run(
    times: usize,
    ranks: u32,
    bench: &str,
    algorithm: Option<&str>,
    args: &[&str],
) -> (RunResult, Runs) {
    run_split(times, ranks, (bench, algorithm, args), None)
}

/// [`run`] on a machine of `partitions` (`run --partitions`; a run that
/// gives the split up fails here instead of running again); `None`: as
/// many as the run chooses, as `run` without `--partitions` does (two
/// from 64 SIPs on, on more than one core).
fn run_split(
    times: usize,
    ranks: u32,
    (bench, algorithm, args): (&str, Option<&str>, &[&str]),
    partitions: Option<usize>,
) -> (RunResult, Runs) {
    let mut runs = Vec::new();
    let mut last = None;
    for _ in 0..times {
        let loader = support::loader(ranks);
        // Compiling the topology is outside the timed part.
        let req = RunRequest {
            partitions,
            ..support::request(ranks, bench, algorithm, args)
        };
        let (cpu0, engine0) = cpu_seconds();
        let start = Instant::now();
        let res =
            run_bench(&loader, req).unwrap_or_else(|e| panic!("{bench} on {ranks} ranks: {e}"));
        let wall = start.elapsed().as_secs_f64();
        // `RUSAGE_SELF` counts every thread, running or ended: the
        // helpers' time up to now is in it.
        let (cpu1, engine1) = cpu_seconds();
        runs.push(Timed {
            wall,
            cpu: cpu1 - cpu0,
            engine: engine1 - engine0,
        });
        let wrong: u64 = res.rows.iter().map(|r| r.wrong).sum();
        assert_eq!(wrong, 0, "{bench} on {ranks} ranks: {wrong} wrong elements");
        last = Some(res);
    }
    (last.expect("at least one run"), Runs(runs))
}

fn ring(times: usize, ranks: u32, size: &str) -> (RunResult, Runs) {
    run(
        times,
        ranks,
        "ccl_allreduce",
        None,
        &["-b", size, "-e", size],
    )
}

fn line(what: &str, figure: String, note: String) {
    println!("{what:<34} {figure:>16}   {note}");
}

/// The line of a whole-run figure: best and median wall time, the
/// simulated end, the commands, the partitions and the processor time.
fn whole_run(what: &str, r: &RunResult, runs: &Runs) {
    line(
        what,
        format!("{:.2} s", runs.best()),
        format!(
            "({:.2} s) simulated {:.3} us, {} DMA + {} MATH commands; {} partition(s); {}",
            runs.median(),
            r.end_time_ps as f64 / 1e6,
            r.stats.dma_commands,
            r.stats.math_commands,
            r.partitions,
            runs.cpu_note()
        ),
    );
}

fn main() {
    kernbench::heap::keep_freed_memory();
    let quick = std::env::args().any(|a| a == "quick");
    let times = std::env::args()
        .find_map(|a| a.strip_prefix("repeat=").map(str::to_string))
        .map_or(3, |n| {
            n.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or_else(|| panic!("repeat={n}: a count of runs, at least 1"))
        });
    println!(
        "{:<34} {:>16}   detail (wall: best of {times}, median in brackets)",
        "figure", "value"
    );

    // A ring step = send + recv + add on one rank; the seed ring does
    // p(p-1) of them (one MATH command each). Its cost is the marginal
    // one: the same run with four more all-reduces, less the run with
    // one, over the steps they add (setup, instances and the first
    // recording are in both; since 8d761ff the four more launches replay
    // the kept recording, see runtime/recording_memo.rs); the whole first
    // run's wall per step, its recording included, is in the detail.
    // The longer run first: were the process's first run slower (caches
    // cold), the figure would err high, not low.
    let (r5, runs5) = run(
        times,
        256,
        "ccl_allreduce",
        None,
        &["-b", "16", "-e", "16", "-n", "5"],
    );
    let (r1, runs1) = ring(times, 256, "16");
    let (s1, s5) = (r1.stats.math_commands, r5.stats.math_commands);
    let (wall1, wall5) = (runs1.best(), runs5.best());
    line(
        "ring step (256 ranks, 16 B)",
        format!("{:.2} us", (wall5 - wall1) * 1e6 / (s5 - s1) as f64),
        format!(
            "{} more steps (recordings kept) in {:.2} s more wall ({:.2} with medians); {:.2} us a step with setup and recording ({s1} steps in {wall1:.2} s); {} partition(s)",
            s5 - s1,
            wall5 - wall1,
            runs5.median() - runs1.median(),
            wall1 * 1e6 / s1 as f64,
            r1.partitions
        ),
    );

    if !quick {
        let (r, runs) = ring(times, 1024, "16");
        line(
            "all-reduce 1024 ranks x 16 B",
            format!("{:.2} s", runs.best()),
            format!(
                "({:.2} s) simulated {:.3} us, {:.2} us wall per step; {} partition(s); {}",
                runs.median(),
                r.end_time_ps as f64 / 1e6,
                runs.best() * 1e6 / r.stats.math_commands as f64,
                r.partitions,
                runs.cpu_note()
            ),
        );
        // The same on one executor (the run above is split in two
        // partitions where the machine has two cores: see
        // docs/architecture.md).
        if r.partitions > 1 {
            let args = ["-b", "16", "-e", "16"];
            let (one, runs) = run_split(times, 1024, ("ccl_allreduce", None, &args), Some(1));
            let row_times =
                |r: &RunResult| -> Vec<_> { r.rows.iter().map(|x| x.time_ps).collect() };
            assert_eq!(one.end_time_ps, r.end_time_ps, "the split run's end");
            assert_eq!(row_times(&one), row_times(&r), "the split run's rows");
            line(
                "  the same, --partitions 1",
                format!("{:.2} s", runs.best()),
                format!(
                    "({:.2} s) the same simulated end and rows; {}",
                    runs.median(),
                    runs.cpu_note()
                ),
            );
        }
    }

    let (r, runs) = ring(times, 64, "1M");
    whole_run("all-reduce 64 ranks x 1 MiB", &r, &runs);

    // A full mesh: every rank installs a ring to every other (the
    // credit latencies of 256 x 255 rings between SIPs up to 128 apart),
    // and sends on log2(256) of them.
    let (r, runs) = run(
        times,
        256,
        "ccl_broadcast",
        Some("binomial_broadcast"),
        &["-b", "8", "-e", "8"],
    );
    whole_run("binomial broadcast 256 ranks x 8 B", &r, &runs);

    let n = 1 << 19; // 1 MiB of f16
    let a = Dtype::F16.from_f64(&(0..n).map(|i| (i % 1000) as f64).collect::<Vec<_>>());
    let b = Dtype::F16.from_f64(&(0..n).map(|i| (i % 7) as f64).collect::<Vec<_>>());
    let reps = 200;
    let start = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(binary(BinOp::Add, Dtype::F16, &a, &b));
    }
    let per = start.elapsed().as_secs_f64() / reps as f64;
    line(
        "f16 add (1 MiB + 1 MiB -> 1 MiB)",
        format!("{:.2} GB/s", (a.len() as f64) / per / 1e9),
        format!(
            "{:.0} us per MiB of result, {:.2} G elements/s",
            per * 1e6,
            n as f64 / per / 1e9
        ),
    );

    for ranks in [256u32, 1024] {
        let (r, runs) = run(1, ranks, "ccl_hello", Some("hello_send"), &[]);
        line(
            &format!("memory per rank ({ranks} ranks)"),
            format!("{} KiB", (r.memory_peak / ranks as u64) >> 10),
            format!(
                "budgeted peak {} MiB (instances, pages, output); hello_send {:.2} s",
                r.memory_peak >> 20,
                runs.best()
            ),
        );
    }
}
