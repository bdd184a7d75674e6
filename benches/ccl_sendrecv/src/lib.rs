//! `ccl_sendrecv`: the nccl-tests `sendrecv_perf` of KernBench. Blocking `send` / `recv` from rank 2i to rank 2i + 1 (an odd last rank idles): the time of one transfer by the host's point-to-point transport.
//!
//! The driver initialises the `ahbm` process group and spawns one rank
//! per SIP; every rank fills its input with exact values, runs the
//! collective for every size of the sweep, checks every element of its
//! output against the reference and reports the simulated time (the
//! shared driver: [`kernbench_guest::perf`], which lists the flags:
//! nccl-tests' `-b -e -f -n -w -c -d -o -r`).

use kernbench_guest::perf::{self, Measure};
use kernbench_guest::Bench;

const M: Measure = Measure::SendRecv;

struct Perf;

impl Bench for Perf {
    fn run(args: Vec<String>) -> Result<(), String> {
        perf::driver("ccl_sendrecv", M, args)
    }

    fn worker(rank: u32, world_size: u32, args: Vec<String>) -> Result<(), String> {
        perf::worker("ccl_sendrecv", M, rank, world_size, args)
    }
}

kernbench_guest::export_bench!(Perf);
