//! `ccl_reduce`: the nccl-tests `reduce_perf` of KernBench. `reduce` to `-r` (default 0); only the root's result is checked (PyTorch leaves the others unspecified).
//!
//! The driver initialises the `ahbm` process group and spawns one rank
//! per SIP; every rank fills its input with exact values, runs the
//! collective for every size of the sweep, checks every element of its
//! output against the reference and reports the simulated time (the
//! shared driver: [`kernbench_guest::perf`], which lists the flags:
//! nccl-tests' `-b -e -f -n -w -c -d -o -r`).

use kernbench_guest::perf::{self, Measure};
use kernbench_guest::Bench;

const M: Measure = Measure::Collective(kernbench_guest::Collective::Reduce);

struct Perf;

impl Bench for Perf {
    fn run(args: Vec<String>) -> Result<(), String> {
        perf::driver("ccl_reduce", M, args)
    }

    fn worker(rank: u32, world_size: u32, args: Vec<String>) -> Result<(), String> {
        perf::worker("ccl_reduce", M, rank, world_size, args)
    }
}

kernbench_guest::export_bench!(Perf);
