//! `ccl_hello`: runs the `hello_send` algorithm (it asks for it when it
//! initialises the process group) through `all_reduce` and checks that
//! every rank now holds its west neighbour's data (seed 003 §1).
//!
//! Each rank's tile is a pattern unique to the rank whose every value is an
//! integer below 2048, so it is exact in f16 at any world size (the seed's
//! `rank + 1` stops being exact past 2048 ranks).
//!
//! Up to one rank per SIP, one worker per rank is spawned. With more ranks
//! than SIPs (ccl.yaml `world_size: 8`, as seed 003 §1's entry: rank = PE)
//! it is the seed's bench: a single driver places one tensor on SIP 0, one
//! tile per rank over the cubes and PEs (`DPPolicy(cube=column_wise,
//! pe=column_wise)`), and one `all_reduce` runs every rank's kernel.

use kernbench_guest::bench::{ahbm, dist, mp, report, torch};
use kernbench_guest::{Bench, Dtype};

const N_ELEM: u32 = 8;

/// Element `i` of rank `rank`'s tile: digit `i % 4` of the rank in base
/// 1024, plus 1, plus 1024 in the second half: 1..=2048, never zero, so a
/// sum of tiles differs from every single tile.
fn pattern(rank: u32, i: u32) -> f64 {
    let digit = (rank >> (10 * (i % 4))) & 1023;
    (digit + 1 + 1024 * (i / 4)) as f64
}

fn tile(rank: u32) -> Vec<f64> {
    (0..N_ELEM).map(|i| pattern(rank, i)).collect()
}

/// Check `got` (rank `rank`'s tile after the exchange) and report it.
fn check(rank: u32, world_size: u32, got: &[f64], time_ps: u64) {
    let west = (rank + world_size - 1) % world_size;
    let expected = tile(west);
    let wrong = got.iter().zip(&expected).filter(|(g, e)| g != e).count() as u64;
    println!("rank {rank}: got {got:?}, expected rank {west}'s {expected:?}");
    report::record(
        "sendrecv",
        &report::Row {
            size_bytes: N_ELEM as u64 * 2,
            count: N_ELEM as u64,
            dtype: Dtype::F16,
            redop: "none".into(),
            time_ps,
            wrong,
        },
    );
}

/// The seed's single driver (ADR-0047 D5): every rank is a PE of SIP 0 and
/// owns the tile at `t_ptr + rank * nbytes`.
fn single_driver(world_size: u32) -> Result<(), String> {
    use torch::DpMode::ColumnWise;
    ahbm::set_device(0)?;
    let props = ahbm::get_device_properties(0)?;
    let pes = world_size.min(props.pes_per_cube);
    if !world_size.is_multiple_of(pes) {
        return Err(format!(
            "ccl_hello: {world_size} ranks do not fill whole cubes of {} PEs",
            props.pes_per_cube
        ));
    }
    let dp = torch::DpPolicy::new(ColumnWise, ColumnWise, world_size / pes, pes);
    let t = torch::zeros_dp(&[1, world_size * N_ELEM], Dtype::F16, dp, "hello_in")?;
    let init: Vec<f64> = (0..world_size).flat_map(tile).collect();
    t.copy_from_f64(&init)?;
    let t0 = ahbm::now_ps();
    dist::all_reduce(&t, "sum")?;
    let took = ahbm::now_ps() - t0;
    let got = t.to_f64();
    for (rank, tile) in got.chunks(N_ELEM as usize).enumerate() {
        check(rank as u32, world_size, tile, took);
    }
    Ok(())
}

struct CclHello;

impl Bench for CclHello {
    fn run(args: Vec<String>) -> Result<(), String> {
        dist::init_process_group_with_algorithm("ahbm", "hello_send")?;
        let world_size = dist::get_world_size()?;
        if world_size <= ahbm::device_count() {
            return mp::spawn(world_size, &args);
        }
        single_driver(world_size)
    }

    fn worker(rank: u32, world_size: u32, _args: Vec<String>) -> Result<(), String> {
        ahbm::set_device(rank)?;
        let t = torch::zeros(&[N_ELEM], Dtype::F16, "hello_in")?;
        t.copy_from_f64(&tile(rank))?;
        let t0 = ahbm::now_ps();
        dist::all_reduce(&t, "sum")?;
        let t1 = ahbm::now_ps();
        check(rank, world_size, &t.to_f64(), t1 - t0);
        Ok(())
    }
}

kernbench_guest::export_bench!(CclHello);
