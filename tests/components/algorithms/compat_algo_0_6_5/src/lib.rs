//! Test algorithm built against the frozen `kernbench:sim@0.6.5`
//! (`wit/history/0.6.5`, world `algorithm-full`, no guest SDK): the last
//! release whose `dtype` had four cases. Its `kernel-args-for` takes any
//! dtype it can name, and its kernel uses every kind of import whose type
//! names a dtype, so the host's adapters for them (`runtime::shapes`) run:
//! `load`, `tensor.dtype`, `cast`, `recv-async` and its future's `dtype`,
//! and a `submit` batch of `load`, `send`, `recv`, `binary`, `store`.
//! The all-reduce is a one-step exchange of two ranks (one rank keeps its
//! tile); the broadcast of two ranks, the root's tile sent to the other.
//! Without an `out-of-place` export both run in place only.

// The generated `composite` takes the WIT's parameters.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    path: "../../../../wit/history/0.6.5",
    world: "algorithm-full",
});

use kernbench::sim::ccl::RedOp;
use kernbench::sim::tl::{self, BatchCall, BatchRecv, Binop};
use kernbench::sim::types::Dtype;

struct Compat;

const DTYPES: [Dtype; 4] = [Dtype::F16, Dtype::Bf16, Dtype::F32, Dtype::I32];

impl Guest for Compat {
    fn kernel(t_ptr: u64, args: Vec<i64>) {
        let (n, dtype, world) = (args[0] as u32, DTYPES[args[1] as usize], args[2]);
        if args[3] == 1 {
            // Broadcast: n, dtype, world, 1, root, then the host's values
            // (sip-rank first).
            let (root, rank) = (args[4], args[5]);
            if world > 1 && rank == root {
                tl::send("E", &tl::load(t_ptr, &[n], dtype));
            } else if world > 1 {
                tl::store(t_ptr, &tl::recv(Some("W"), &[n], dtype));
            }
            return;
        }
        // The single calls: their types name the four-case dtype.
        let probe = tl::load(t_ptr, &[n], dtype);
        assert!(probe.dtype() == dtype, "tensor.dtype");
        let same = tl::cast(&probe, dtype);
        assert!(same.dtype() == dtype, "cast");
        drop((probe, same));
        if world < 2 {
            return;
        }
        // The exchange as one batch (the list form of 0.6.2).
        let calls = [
            BatchCall::Load((t_ptr, 0, dtype, 1)),
            BatchCall::Send((0, 1)),
            BatchCall::Recv(BatchRecv {
                dir: Some(1),
                shape: 0,
                dtype,
                into: None,
                out: 2,
            }),
            BatchCall::Binary((Binop::Add, 1, 2, 3)),
            BatchCall::Store((t_ptr, 3)),
            BatchCall::DropTensor(1),
            BatchCall::DropTensor(2),
            BatchCall::DropTensor(3),
        ];
        let dirs = ["E".to_string(), "W".to_string()];
        tl::submit(&dirs, &[vec![n]], &calls).expect("the batch");
        // A second message, received through a future.
        let mine = tl::load(t_ptr, &[n], dtype);
        tl::send("E", &mine);
        let f = tl::recv_async(Some("W"), &[n], dtype);
        assert!(f.dtype() == dtype, "recv-future.dtype");
        let theirs = tl::wait(f);
        assert!(theirs.dtype() == dtype);
    }

    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, 0, 2, 0]
    }

    fn collectives() -> Vec<Collective> {
        vec![Collective::AllReduce, Collective::Broadcast]
    }

    fn kernel_args_for(call: Call, _params: Vec<Param>) -> Result<Vec<i64>, String> {
        if call.world_size > 2 || call.op != RedOp::Sum {
            return Err("a sum of one or two ranks only".into());
        }
        let code = DTYPES.iter().position(|d| *d == call.dtype).unwrap() as i64;
        let mut args = vec![call.block as i64, code, call.world_size as i64];
        if call.collective == Collective::Broadcast {
            args.extend([1, call.root as i64]);
        } else {
            args.push(0);
        }
        Ok(args)
    }

    fn topo_name_to_kind(_name: String) -> Option<i32> {
        None
    }

    fn kernel_args_with(
        world_size: u32,
        n_elem: u64,
        cube_w: u32,
        cube_h: u32,
        _params: Vec<Param>,
    ) -> Result<Vec<i64>, String> {
        Ok(Self::kernel_args(world_size, n_elem, cube_w, cube_h))
    }

    fn entry_defaults() -> EntryDefaults {
        EntryDefaults {
            topology: None,
            mapper: None,
            buffer_kind: None,
            n_slots: None,
            slot_size: None,
            validator: None,
        }
    }

    fn neighbors(_rank: u32, _world_size: u32, _neighbor_map: Vec<Link>) -> Option<Vec<Link>> {
        None
    }
}

export!(Compat);
