//! Test algorithm for `--verify-data`: the seed's ring all-reduce (E → W,
//! f16), written four ways (`kernel_mode`):
//!
//! - 0: correct but reordered: every receive is posted (`recv_async`)
//!   before the send of its step, the accumulator starts as a scaled copy
//!   and the operands of each add are swapped: other commands in another
//!   order, the same bytes, no race;
//! - 1: a write–write race: the loaded tile is written back to the tensor
//!   as a "checkpoint" before the ring starts, and the sum over it at the
//!   end; nothing orders the two stores (the run's sums are right; only
//!   the second pass can tell);
//! - 2: a send that reads a released IPCQ slot: each received message is
//!   forwarded from its slot's raw address (`send_addr`) after the slot
//!   tensor was dropped, so the upstream PE may already be writing its next
//!   message there (the seed's "overwriting the send source" pitfall).

use kernbench_guest::prelude::*;

pub struct RaceProbe;

impl Algorithm for RaceProbe {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (n, ws, mode) = (args[0] as u32, args[1] as u32, args[2]);
        let shape = &[n][..];
        let mine = tl.load(t_ptr, shape, Dtype::F16);
        match mode {
            0 => {
                let mut acc = tl.scale(&mine, 1.0);
                let mut current = mine;
                for _ in 1..ws {
                    let next = tl.recv_async(Some("W"), shape, Dtype::F16);
                    tl.send("E", &current);
                    let recv = tl.wait(next);
                    acc = tl.add(&recv, &acc);
                    current = recv;
                }
                drop(current);
                tl.store(t_ptr, &acc);
            }
            1 => {
                tl.store(t_ptr, &mine);
                let mut acc = tl.scale(&mine, 1.0);
                let mut current = tl.scale(&mine, 1.0);
                for _ in 1..ws {
                    tl.send("E", &current);
                    let recv = tl.recv(Some("W"), shape, Dtype::F16);
                    acc = tl.add(&acc, &recv);
                    current = recv;
                }
                tl.store(t_ptr, &acc);
                // Held to the end, so that no later tensor reuses its
                // bytes (which would order the two stores by accident).
                drop(mine);
            }
            _ => {
                let mut acc = tl.scale(&mine, 1.0);
                tl.send("E", &mine);
                drop(mine);
                for step in 1..ws {
                    let recv = tl.recv(Some("W"), shape, Dtype::F16);
                    acc = tl.add(&acc, &recv);
                    let slot = recv.addr();
                    drop(recv);
                    if step + 1 < ws {
                        tl.send_addr("E", slot, shape, Dtype::F16);
                    }
                }
                tl.store(t_ptr, &acc);
            }
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, world_size as i64, 0]
    }

    fn kernel_args_with(
        world_size: u32,
        n_elem: u64,
        cube_w: u32,
        cube_h: u32,
        params: &Params,
    ) -> Result<Vec<i64>, String> {
        let mut args = Self::kernel_args(world_size, n_elem, cube_w, cube_h);
        params.place_ints(&mut args, &[("kernel_mode", 2)])?;
        Ok(args)
    }
}

kernbench_guest::export_algorithm!(RaceProbe);
