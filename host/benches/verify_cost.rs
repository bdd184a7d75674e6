//! What `--verify-data` costs (issue 13): wall time and peak budgeted
//! host memory of the default bench (`kernbench-host run ccl_allreduce`
//! on the embedded configs: 4 SIPs, its default sizes) and of two larger
//! rings, without the second pass, with the op log only, and with
//! the second pass; medians of several interleaved runs.
//!
//! ```sh
//! cargo bench -p kernbench-host --bench verify_cost            # all cases
//! cargo bench -p kernbench-host --bench verify_cost -- quick   # the default bench only
//! ```

mod support;

use kernbench::budget::human_bytes;
use kernbench::runtime::{run_bench, Loader};
use kernbench::verify::Strictness;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    Logged,
    Verified,
}

/// One run: wall seconds, peak budgeted bytes, (ops logged, bytes compared).
fn once(loader: &Arc<Loader>, ranks: u32, args: &[&str], mode: Mode) -> (f64, u64, (usize, u64)) {
    let mut req = support::request(ranks, "ccl_allreduce", None, args);
    req.record_ops = mode == Mode::Logged;
    req.verify_data = (mode == Mode::Verified).then_some(Strictness::Strict);
    let start = Instant::now();
    let res = run_bench(loader, req).unwrap_or_else(|e| panic!("{ranks} ranks {args:?}: {e}"));
    let wall = start.elapsed().as_secs_f64();
    assert!(res.rows.iter().all(|r| r.wrong == 0));
    let counts = match (&res.verification, &res.oplog) {
        (Some(v), _) => {
            assert!(!v.failed(), "{}", v.report());
            (v.ops, v.bytes)
        }
        (None, Some(log)) => (log.records().len(), 0),
        _ => (0, 0),
    };
    (wall, res.memory_peak, counts)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let mut cases: Vec<(&str, u32, Vec<&str>, usize)> =
        vec![("default bench (4 ranks, 18 sizes)", 4, vec![], 5)];
    if !quick {
        cases.push(("ring 64 ranks x 1 MiB", 64, vec!["-b", "1M", "-e", "1M"], 3));
        cases.push((
            "ring 256 ranks x 16 B",
            256,
            vec!["-b", "16", "-e", "16"],
            3,
        ));
    }
    println!("| case | plain | op log only | --verify-data | ops | bytes compared | peak memory plain / verified |");
    println!("|---|---|---|---|---|---|---|");
    for (name, ranks, args, reps) in cases {
        let loader = support::loader(ranks);
        once(&loader, ranks, &args, Mode::Plain); // warm the compile cache
        let mut walls = [Vec::new(), Vec::new(), Vec::new()];
        let mut peaks = [0u64; 3];
        let mut counts = (0, 0);
        for _ in 0..reps {
            for (k, mode) in [Mode::Plain, Mode::Logged, Mode::Verified]
                .into_iter()
                .enumerate()
            {
                let (w, peak, c) = once(&loader, ranks, &args, mode);
                walls[k].push(w);
                peaks[k] = peaks[k].max(peak);
                if mode == Mode::Verified {
                    counts = c;
                }
            }
        }
        let [p, l, v] = walls.map(median);
        println!(
            "| {name} | {p:.3} s | {l:.3} s ({:+.0} %) | {v:.3} s ({:+.0} %) | {} | {} | {} / {} |",
            (l / p - 1.0) * 100.0,
            (v / p - 1.0) * 100.0,
            counts.0,
            human_bytes(counts.1),
            human_bytes(peaks[0]),
            human_bytes(peaks[2]),
        );
    }
}
