//! Test bench: exercises `torch.distributed` error semantics (seed
//! ADR-0047). `run` takes one scenario name; a scenario that observes the
//! expected behaviour returns the error text so the test can check it.

use kernbench_guest::bench::{ahbm, dist, mp, torch};
use kernbench_guest::{Bench, Dtype};

struct Probe;

fn tensor() -> Result<torch::Tensor, String> {
    torch::zeros(&[4], Dtype::F16, "probe")
}

impl Bench for Probe {
    fn run(args: Vec<String>) -> Result<(), String> {
        let scenario = args.first().map(String::as_str).unwrap_or("");
        match scenario {
            "nccl" => dist::init_process_group("nccl").map_err(String::from),
            // torch.__version__ (kernbench:sim@0.8.4), returned as the error text.
            "version" => Err(format!("version: {}", torch::version())),
            // `hold MB`: every rank holds MB of guest memory and a tensor of
            // MB, then blocks in a receive no one answers (the host-memory
            // budget must count what blocked ranks hold).
            "hold" => {
                dist::init_process_group("ahbm")?;
                mp::spawn(ahbm::device_count(), &args)
            }
            "before-init" => {
                assert!(!dist::is_initialized());
                let rank_err = dist::get_rank().unwrap_err().to_string();
                let t = tensor()?;
                let ar = dist::all_reduce(&t, "sum").unwrap_err().to_string();
                Err(format!("{ar} | get_rank: {rank_err}"))
            }
            "twice" => {
                dist::init_process_group("ahbm")?;
                dist::init_process_group("ahbm").map_err(String::from)
            }
            "bad-op" | "avg-i32" => {
                dist::init_process_group("ahbm")?;
                let ws = dist::get_world_size()?;
                mp::spawn(ws, &[scenario.to_string()])
            }
            "single-driver" => {
                dist::init_process_group("ahbm")?;
                let t = tensor()?;
                dist::all_reduce(&t, "sum").map_err(String::from)
            }
            "rank-dies" => {
                dist::init_process_group("ahbm")?;
                let ws = dist::get_world_size()?;
                mp::spawn(ws, &["rank-dies".to_string()])
            }
            "queries" => {
                dist::init_process_group("ahbm")?;
                let ws = dist::get_world_size()?;
                let backend = dist::get_backend()?;
                let rank = dist::get_rank()?;
                if !dist::is_initialized() || backend != "ahbm" || rank != 0 {
                    return Err("unexpected query answers".into());
                }
                dist::barrier()?;
                mp::spawn(ws, &["queries".to_string()])?;
                Err(format!(
                    "ok world_size={ws} devices={}",
                    ahbm::device_count()
                ))
            }
            "pieces" => {
                // Fill and read a tensor in pieces, then step outside it.
                ahbm::set_device(0)?;
                let t = tensor()?;
                t.copy_from_f64_at(1, &[5.0, 6.0])?;
                t.copy_from_f64_at(3, &[7.0])?;
                let got = (t.to_f64_range(0, 2)?, t.to_f64_range(2, 2)?);
                if got != (vec![0.0, 5.0], vec![6.0, 7.0]) || t.to_f64() != [0.0, 5.0, 6.0, 7.0] {
                    return Err(format!("pieces read back {got:?}"));
                }
                let write = t.copy_from_f64_at(3, &[1.0, 2.0]).unwrap_err();
                let read = t.to_f64_range(u64::MAX, 2).unwrap_err();
                Err(format!("{write} | {read}"))
            }
            "placement" => {
                // Each policy: its shards, and a tensor written whole and
                // read back whole and in pieces through them.
                use torch::{DpMode::*, DpPolicy};
                ahbm::set_device(1)?;
                let mut out = Vec::new();
                for (name, dp) in [
                    ("cube-rows", DpPolicy::new(RowWise, Replicate, 4, 1)),
                    ("pe-cols", DpPolicy::new(Replicate, ColumnWise, 1, 4)),
                    ("replicas", DpPolicy::new(Replicate, RowWise, 2, 2)),
                    ("tiles", DpPolicy::new(Tiled, Replicate, 4, 1)),
                ] {
                    let t = torch::zeros_dp(&[4, 8], Dtype::F16, dp, name)?;
                    let iota: Vec<f64> = (0..32).map(f64::from).collect();
                    t.copy_from_f64(&iota)?;
                    let back = t.to_f64();
                    let piece = t.to_f64_range(5, 9)?;
                    if back != iota || piece != iota[5..14] {
                        return Err(format!("{name}: read back {back:?} / {piece:?}"));
                    }
                    let shards: Vec<String> = t
                        .shards()
                        .iter()
                        .map(|s| {
                            format!(
                                "s{}c{}p{} r{}+{} c{}+{} @{}",
                                s.sip,
                                s.cube,
                                s.pe,
                                s.row_start,
                                s.rows,
                                s.col_start,
                                s.cols,
                                s.offset_bytes
                            )
                        })
                        .collect();
                    out.push(format!("{name}: {}", shards.join(", ")));
                }
                let bad = [
                    DpPolicy::new(RowWise, Replicate, 3, 1),
                    DpPolicy::new(Replicate, ColumnWise, 1, 3),
                    DpPolicy::new(Replicate, ColumnWise, 1, 5),
                    DpPolicy::new(Replicate, Replicate, 99, 1),
                ]
                .map(|dp| {
                    torch::zeros_dp(&[4, 8], Dtype::F16, dp, "bad")
                        .err()
                        .unwrap_or_default()
                });
                Err(format!("{} | {}", out.join(" | "), bad.join(" | ")))
            }
            "validator" => {
                // The default ring checks for one shard per rank.
                use torch::{DpMode::*, DpPolicy};
                dist::init_process_group("ahbm")?;
                let dp = DpPolicy::new(RowWise, Replicate, 4, 1);
                let t = torch::zeros_dp(&[4, 8], Dtype::F16, dp, "sharded")?;
                dist::all_reduce(&t, "sum").map_err(String::from)
            }
            "legacy-driver" => {
                // Rank = flat PE index inside SIP 0 (ccl.yaml world_size
                // above the SIP count): the single driver places one tile
                // per rank, (cube, pe) order, and all_reduce launches
                // every rank's kernel at once (ADR-0047 D5).
                use torch::{DpMode::*, DpPolicy};
                dist::init_process_group("ahbm")?;
                let ws = dist::get_world_size()?;
                let pes = ws.min(4);
                let dp = DpPolicy::new(ColumnWise, ColumnWise, ws / pes, pes);
                let n = 8u32;
                let t = torch::zeros_dp(&[1, ws * n], Dtype::F16, dp, "tiles")?;
                let init: Vec<f64> = (0..ws * n).map(|i| f64::from(i / n + 1)).collect();
                t.copy_from_f64(&init)?;
                let t0 = ahbm::now_ps();
                dist::all_reduce(&t, "sum").map_err(String::from)?;
                let took = ahbm::now_ps() - t0;
                let want = f64::from(ws * (ws + 1) / 2);
                let wrong = t.to_f64().iter().filter(|&&v| v != want).count();
                Err(format!(
                    "legacy ws={ws} shards={} wrong={wrong} time={took}",
                    t.shards().len()
                ))
            }
            "all-pes-hello" => {
                dist::init_process_group_with_algorithm("ahbm", "hello_send")?;
                let ws = dist::get_world_size()?;
                mp::spawn(ws, &["all-pes-hello".to_string()])?;
                Err(format!("all-pes ok ws={ws}"))
            }
            "launch" => {
                // A 4x4 f16 tile squared by math_probe (mode 3) on the
                // matrix unit, checked here; then launches that must fail.
                let probe = args.get(1).ok_or("launch needs the kernel's path")?;
                ahbm::set_device(0)?;
                let t = torch::zeros(&[16], Dtype::F16, "tile")?;
                let a: Vec<f64> = (0..16).map(|i| f64::from(i % 5)).collect();
                t.copy_from_f64(&a)?;
                let took = torch::launch(probe, &t, &[16, 1, 3])?;
                let got = t.to_f64();
                let mut wrong = 0;
                for i in 0..4 {
                    for j in 0..4 {
                        let want: f64 = (0..4).map(|p| a[i * 4 + p] * a[p * 4 + j]).sum();
                        wrong += usize::from(got[i * 4 + j] != want);
                    }
                }
                // x + x·x in one composite (gemm-acc), then a bias of the
                // wrong shape.
                let c = torch::zeros(&[16], Dtype::F16, "composite")?;
                c.copy_from_f64(&a)?;
                let c_took = torch::launch(probe, &c, &[16, 1, 4])?;
                let got = c.to_f64();
                let mut c_wrong = 0;
                for i in 0..4 {
                    for j in 0..4 {
                        let sq: f64 = (0..4).map(|p| a[i * 4 + p] * a[p * 4 + j]).sum();
                        c_wrong += usize::from(got[i * 4 + j] != a[i * 4 + j] + sq);
                    }
                }
                let bad_bias = torch::launch(probe, &c, &[16, 1, 5]).unwrap_err();
                let missing = torch::launch("no_such_kernel", &t, &[]).unwrap_err();
                ahbm::set_device(ahbm::device_count() - 1)?;
                let elsewhere = torch::launch(probe, &t, &[16, 1, 3]).unwrap_err();
                Err(format!(
                    "launch wrong={wrong} time={took} | composite wrong={c_wrong} time={c_took} \
                     | {bad_bias} | {elsewhere} | {missing}"
                ))
            }
            "double" => {
                // A kernel that doubles its tile (args: [elements]), such
                // as the earlier snapshots' r1_binary_algorithm, checked.
                let kernel = args.get(1).ok_or("double needs the kernel's path")?;
                ahbm::set_device(0)?;
                let t = torch::zeros(&[16], Dtype::F16, "tile")?;
                let a: Vec<f64> = (0..16).map(|i| f64::from(i % 7) - 3.0).collect();
                t.copy_from_f64(&a)?;
                let took = torch::launch(kernel, &t, &[16])?;
                let got = t.to_f64();
                let wrong = (0..16).filter(|&i| got[i] != 2.0 * a[i]).count();
                Err(format!("double wrong={wrong} time={took}"))
            }
            "hier" => {
                dist::init_process_group_with_algorithm("ahbm", "lrab_hierarchical_allreduce")?;
                let ws = dist::get_world_size()?;
                mp::spawn(ws, &args)?;
                Err(format!("hier ok ws={ws} at {} ps", ahbm::now_ps()))
            }
            "arg-checks" | "mismatch" | "p2p-sizes" | "p2p-unmatched" | "lists" | "premul" => {
                dist::init_process_group("ahbm")?;
                let ws = dist::get_world_size()?;
                mp::spawn(ws, &args)?;
                Err(format!("{scenario} returned"))
            }
            "p2p-driver" => {
                dist::init_process_group("ahbm")?;
                let t = tensor()?;
                dist::send(&t, 1).map_err(String::from)
            }
            other => Err(format!("unknown scenario {other:?}")),
        }
    }

    fn worker(rank: u32, _world_size: u32, args: Vec<String>) -> Result<(), String> {
        let ws = _world_size;
        let f16 = |n: u32, name: &str| torch::zeros(&[n], Dtype::F16, name);
        match args[0].as_str() {
            "arg-checks" => {
                // PyTorch's argument checks, each a clear error, none of
                // which joins a collective.
                ahbm::set_device(rank)?;
                let t = f16(4, "t")?;
                let big = f16(4 * ws, "big")?;
                let odd = f16(4 * ws + 1, "odd")?;
                let f32t = torch::zeros(&[4 * ws], Dtype::F32, "f32")?;
                let six = f16(6, "six")?;
                let three: Vec<torch::Tensor> = (0..ws - 1)
                    .map(|i| f16(4, &format!("l{i}")))
                    .collect::<Result<_, _>>()?;
                let errs = [
                    dist::broadcast(&t, ws).unwrap_err(),
                    dist::reduce(&t, 0, "band").unwrap_err(),
                    dist::all_reduce(&t, "premul_sum").unwrap_err(),
                    dist::all_reduce(&t, "premul_sum:nan").unwrap_err(),
                    dist::reduce_scatter_tensor(&t, &big, "max:2").unwrap_err(),
                    dist::all_gather_into_tensor(&odd, &t).unwrap_err(),
                    dist::all_gather_into_tensor(&f32t, &t).unwrap_err(),
                    dist::reduce_scatter_tensor(&t, &odd, "sum").unwrap_err(),
                    dist::all_to_all_single(&six, &six).unwrap_err(),
                    dist::all_to_all_single(&big, &t).unwrap_err(),
                    dist::all_gather(&three, &t).unwrap_err(),
                    dist::send(&t, rank).unwrap_err(),
                    dist::recv(&t, ws + 3).unwrap_err(),
                ];
                if rank == 0 {
                    let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                    return Err(msgs.join(" | "));
                }
                Ok(())
            }
            "mismatch" => {
                ahbm::set_device(rank)?;
                let t = tensor()?;
                if rank == 0 {
                    dist::broadcast(&t, 0).map_err(String::from)
                } else {
                    dist::all_reduce(&t, "sum").map_err(String::from)
                }
            }
            "p2p-sizes" => {
                ahbm::set_device(rank)?;
                match rank {
                    0 => dist::send(&f16(8, "eight")?, 1).map_err(String::from),
                    1 => dist::recv(&f16(4, "four")?, 0).map_err(String::from),
                    _ => Ok(()),
                }
            }
            "p2p-unmatched" => {
                ahbm::set_device(rank)?;
                match rank {
                    0 => dist::send(&f16(8, "eight")?, 1).map_err(String::from),
                    _ => Ok(()),
                }
            }
            "lists" => {
                // all_gather and reduce_scatter with tensor lists: every
                // entry checked, and the staging copies take time.
                ahbm::set_device(rank)?;
                let n = 16u32;
                let input = f16(n, "in")?;
                let mine: Vec<f64> = (0..n).map(|i| f64::from(rank * 100 + i)).collect();
                input.copy_from_f64(&mine)?;
                let outs: Vec<torch::Tensor> = (0..ws)
                    .map(|i| f16(n, &format!("out{i}")))
                    .collect::<Result<_, _>>()?;
                let t0 = ahbm::now_ps();
                dist::all_gather(&outs, &input).map_err(String::from)?;
                let gather = ahbm::now_ps() - t0;
                for (r, o) in outs.iter().enumerate() {
                    let want: Vec<f64> = (0..n).map(|i| f64::from(r as u32 * 100 + i)).collect();
                    if o.to_f64() != want {
                        return Err(format!("all_gather list entry {r}: {:?}", o.to_f64()));
                    }
                }
                let ins: Vec<torch::Tensor> = (0..ws)
                    .map(|j| {
                        let t = f16(n, &format!("in{j}"))?;
                        t.copy_from_f64(&vec![f64::from(rank + j); n as usize])?;
                        Ok::<_, String>(t)
                    })
                    .collect::<Result<_, _>>()?;
                let out = f16(n, "rs")?;
                dist::reduce_scatter(&out, &ins, "sum").map_err(String::from)?;
                let want = f64::from((0..ws).map(|r| r + rank).sum::<u32>());
                if out.to_f64() != vec![want; n as usize] {
                    return Err(format!("reduce_scatter list: {:?}", out.to_f64()));
                }
                if rank == 0 {
                    return Err(format!("lists ok all_gather={gather}"));
                }
                Ok(())
            }
            "premul" => {
                // premul_sum with a factor of each rank's own: the sum of
                // every input times its rank's factor, floats and integers
                // (the factor truncated to the dtype), and reduce-scatter.
                ahbm::set_device(rank)?;
                let x = f64::from(rank + 1);
                let f = torch::zeros(&[4], Dtype::F32, "f32")?;
                f.copy_from_f64(&[x; 4])?;
                dist::all_reduce(&f, &format!("premul_sum:{}", 0.5 * x)).map_err(String::from)?;
                let want: f64 = (1..=ws).map(|r| 0.5 * f64::from(r * r)).sum();
                if f.to_f64() != vec![want; 4] {
                    return Err(format!("rank {rank}: f32 premul_sum: {:?}", f.to_f64()));
                }
                let i = torch::zeros(&[3], Dtype::I32, "i32")?;
                i.copy_from_f64(&[x; 3])?;
                dist::all_reduce(&i, "premul_sum:2.9").map_err(String::from)?;
                let want_i = f64::from((1..=ws).map(|r| 2 * r).sum::<u32>());
                if i.to_f64() != vec![want_i; 3] {
                    return Err(format!("rank {rank}: i32 premul_sum: {:?}", i.to_f64()));
                }
                let input = torch::zeros(&[2 * ws], Dtype::F32, "rs_in")?;
                input.copy_from_f64(&vec![x; 2 * ws as usize])?;
                let out = torch::zeros(&[2], Dtype::F32, "rs_out")?;
                dist::reduce_scatter_tensor(&out, &input, &format!("premul_sum:{x}"))
                    .map_err(String::from)?;
                let want_rs: f64 = (1..=ws).map(|r| f64::from(r * r)).sum();
                if out.to_f64() != vec![want_rs; 2] {
                    return Err(format!(
                        "rank {rank}: reduce_scatter premul_sum: {:?}",
                        out.to_f64()
                    ));
                }
                if rank == 0 {
                    return Err(format!("premul ok f32={want} i32={want_i} rs={want_rs}"));
                }
                Ok(())
            }
            "bad-op" => {
                ahbm::set_device(rank)?;
                let t = tensor()?;
                dist::all_reduce(&t, "max").map_err(String::from)
            }
            "avg-i32" => {
                ahbm::set_device(rank)?;
                let t = torch::zeros(&[4], Dtype::I32, "probe")?;
                dist::all_reduce(&t, "avg").map_err(String::from)
            }
            "rank-dies" => {
                if rank == 1 {
                    return Err("rank 1 gives up before the collective".into());
                }
                ahbm::set_device(rank)?;
                let t = tensor()?;
                dist::all_reduce(&t, "sum").map_err(String::from)
            }
            "queries" => {
                if dist::get_rank()? != rank {
                    return Err(format!(
                        "get_rank() in worker {rank} returned {}",
                        dist::get_rank()?
                    ));
                }
                kernbench_guest::bench::accelerator::set_device_index(rank)?;
                if ahbm::current_device() != Some(rank) {
                    return Err("set_device_index did not bind the device".into());
                }
                Ok(())
            }
            "hold" => {
                let mb: usize = args
                    .get(1)
                    .and_then(|a| a.parse().ok())
                    .ok_or("hold needs a size in MB")?;
                ahbm::set_device(rank)?;
                let kept = vec![1u8; mb << 20];
                let t = torch::zeros(&[(mb << 19) as u32], Dtype::F16, "held")?;
                t.copy_from_bytes(&kept)?;
                dist::recv(&t, (rank + 1) % ws).map_err(String::from)?;
                Err(format!("hold: rank {rank} received {}", kept.len()))
            }
            "all-pes-hello" => {
                // Every PE of every cube runs hello_send; the ring is laid
                // over all of them, rank after rank, (cube, pe) order.
                use torch::{DpMode::*, DpPolicy};
                ahbm::set_device(rank)?;
                let (per_sip, n) = (64u32, 8u32);
                let dp = DpPolicy::new(ColumnWise, ColumnWise, 16, 4);
                let t = torch::zeros_dp(&[1, per_sip * n], Dtype::F16, dp, "tiles")?;
                let value = |g: u32| f64::from(g + 1);
                let init: Vec<f64> = (0..per_sip * n)
                    .map(|i| value(rank * per_sip + i / n))
                    .collect();
                t.copy_from_f64(&init)?;
                dist::all_reduce(&t, "sum").map_err(String::from)?;
                let total = _world_size * per_sip;
                let got = t.to_f64();
                for k in 0..per_sip {
                    let g = rank * per_sip + k;
                    let want = value((g + total - 1) % total);
                    if got[(k * n) as usize..((k + 1) * n) as usize]
                        .iter()
                        .any(|&v| v != want)
                    {
                        return Err(format!(
                            "rank {rank} tile {k}: {:?}, want {want}",
                            &got[(k * n) as usize..((k + 1) * n) as usize]
                        ));
                    }
                }
                Ok(())
            }
            "hier" => {
                // One tile per cube (row-wise over the cubes); every tile
                // of every SIP must end holding the sum of all of them.
                use torch::{DpMode::*, DpPolicy};
                ahbm::set_device(rank)?;
                let cubes: u32 = args[1].parse().map_err(|_| "hier needs the cube count")?;
                let n = 8u32;
                let dp = DpPolicy::new(RowWise, Replicate, cubes, 1);
                let t = torch::zeros_dp(&[cubes, n], Dtype::F16, dp, "tiles")?;
                let value = |r: u32, c: u32, i: u32| f64::from((r * cubes + c) % 7 + 1 + i % 3);
                let init: Vec<f64> = (0..cubes * n).map(|j| value(rank, j / n, j % n)).collect();
                t.copy_from_f64(&init)?;
                dist::all_reduce(&t, "sum").map_err(String::from)?;
                let got = t.to_f64();
                for j in 0..cubes * n {
                    let want: f64 = (0.._world_size)
                        .flat_map(|r| (0..cubes).map(move |c| (r, c)))
                        .map(|(r, c)| value(r, c, j % n))
                        .sum();
                    if got[j as usize] != want {
                        return Err(format!(
                            "rank {rank} element {j}: {} != {want}",
                            got[j as usize]
                        ));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

kernbench_guest::export_bench!(Probe);
