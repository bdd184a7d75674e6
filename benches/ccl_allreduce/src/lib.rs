//! `ccl_allreduce`: the nccl-tests `all_reduce_perf` of KernBench.
//!
//! The driver initialises the `ahbm` process group (which loads the
//! algorithm named in ccl.yaml), then spawns one rank per SIP. Each rank
//! binds its device, and for every size of the sweep fills its shard with
//! exact values, all-reduces it, checks every element against the
//! reference and reports the simulated time (the shared driver:
//! [`kernbench_guest::perf`], which lists the flags: nccl-tests' `-b -e -f
//! -n -w -c -d -o -r -a`).
//!
//! `--cubes N` makes every cube a contributor, as the seed's hierarchical
//! all-reduce (`lrab_hierarchical_allreduce`, ADR-0050) defines it: each
//! rank's tensor is N tiles of the swept size placed row-wise over N cubes
//! (`DPPolicy(cube=row_wise, num_cubes=N)`), and every tile of every rank
//! ends holding the reduction of all world size × N tiles. Sizes, counts
//! and the bound then refer to one tile, as nccl-tests reports one GPU's
//! buffer. Default: what the algorithm serving the all-reduce wants
//! (`distributed.shards-wanted`: N cubes for a validator that wants one
//! shard per cube, said in the report's header), else one block in cube 0
//! per rank, reduced over the ranks.

use kernbench_guest::perf::{self, Measure};
use kernbench_guest::{Bench, Collective};

const M: Measure = Measure::Collective(Collective::AllReduce);

struct CclAllreduce;

impl Bench for CclAllreduce {
    fn run(args: Vec<String>) -> Result<(), String> {
        perf::driver("ccl_allreduce", M, args)
    }

    fn worker(rank: u32, world_size: u32, args: Vec<String>) -> Result<(), String> {
        perf::worker("ccl_allreduce", M, rank, world_size, args)
    }
}

kernbench_guest::export_bench!(CclAllreduce);
