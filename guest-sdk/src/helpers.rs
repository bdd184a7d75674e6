//! The seed's algorithm helpers (seed 003 §5): `chunked`, `ring_step`,
//! `tree_step`, plus `pe_tile_addr`, the seed kernels' per-PE tile address,
//! and the building blocks the built-in algorithms share: the seed's ring
//! all-reduce and a reduce / broadcast along a line of ranks. The reducing
//! ones take the [`BinOp`] that combines two partial results
//! ([`crate::RedOp::combine`]), so an algorithm built on them does every op.

use crate::{BinOp, Call, Collective, Dtype, Params, Tl};

/// Directions along a line of ranks: towards position 0, and away from it.
pub type Line<'a> = (&'a str, &'a str);

/// Reduce a line of `len` ranks towards position 0: each rank combines
/// what comes from `away` into its own `acc` (`combine`, e.g.
/// [`BinOp::Add`]; `acc` already prepared, [`crate::Reduction::own`])
/// and passes the partial result `toward`. Position 0 returns the line's
/// reduction, the others their partial one.
#[track_caller]
pub fn reduce_line<T: Tl>(
    tl: &T,
    acc: T::Tensor,
    (pos, len): (u32, u32),
    (toward, away): Line,
    (shape, dtype): (&[u32], Dtype),
    combine: BinOp,
) -> T::Tensor {
    let mut acc = acc;
    if pos + 1 < len {
        let part = tl.recv(Some(away), shape, dtype);
        acc = tl.binary(combine, &acc, &part);
    }
    if pos > 0 {
        tl.send(toward, &acc);
    }
    acc
}

/// Pass position 0's `acc` along a line of `len` ranks; every rank returns
/// it.
#[track_caller]
pub fn broadcast_line<T: Tl>(
    tl: &T,
    acc: T::Tensor,
    (pos, len): (u32, u32),
    (toward, away): Line,
    (shape, dtype): (&[u32], Dtype),
) -> T::Tensor {
    let mut acc = acc;
    if pos > 0 {
        acc = tl.recv(Some(toward), shape, dtype);
    }
    if pos + 1 < len {
        tl.send(away, &acc);
    }
    acc
}

/// All-reduce along a line of `len` ranks: [`reduce_line`] towards
/// position 0, then [`broadcast_line`] back; every rank returns the
/// reduction.
#[track_caller]
pub fn allreduce_line<T: Tl>(
    tl: &T,
    acc: T::Tensor,
    at: (u32, u32),
    dirs: Line,
    tile: (&[u32], Dtype),
    combine: BinOp,
) -> T::Tensor {
    let sum = reduce_line(tl, acc, at, dirs, tile, combine);
    broadcast_line(tl, sum, at, dirs, tile)
}

/// The seed's ring all-reduce (seed 003 §2) over a ring of `len` ranks:
/// `len − 1` times send the current tile `east`, combine the one received
/// from `west` into the own (`combine`: [`BinOp::Add`] for the seed's
/// sum), and forward what was received (`current = recv`), so every
/// rank's tile travels the ring once.
#[track_caller]
pub fn ring_allreduce<T: Tl>(
    tl: &T,
    acc: T::Tensor,
    len: u32,
    (east, west): (&str, &str),
    (shape, dtype): (&[u32], Dtype),
    combine: BinOp,
) -> T::Tensor {
    let mut acc = acc;
    let mut current: Option<T::Tensor> = None;
    for _ in 1..len {
        tl.send(east, current.as_ref().unwrap_or(&acc));
        let recv = tl.recv(Some(west), shape, dtype);
        acc = tl.binary(combine, &acc, &recv);
        current = Some(recv); // forward what we received, not the sum
    }
    acc
}

/// The seed kernels' tile of this PE: `t_ptr + rank * n_elem * itemsize`,
/// with `rank = cube_id * pes_per_cube + local_pe` (ADR-0022 2-D grid).
#[track_caller]
pub fn pe_tile_addr<T: Tl>(tl: &T, t_ptr: u64, n_elem: u64, dtype: Dtype) -> u64 {
    let rank = (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)) as u64;
    t_ptr + rank * n_elem * dtype.itemsize() as u64
}

/// A contiguous view of `n_elem` elements starting at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub addr: u64,
    pub n_elem: u64,
    pub nbytes: u64,
}

/// Split a tile of `n_elem` elements at `base_addr` into `n_chunks` views.
/// The first `n_elem % n_chunks` chunks get one extra element, so every
/// element belongs to exactly one chunk.
pub fn chunked(base_addr: u64, n_chunks: u64, n_elem: u64, dtype: Dtype) -> Vec<Chunk> {
    assert!(n_chunks > 0, "chunked: n_chunks must be > 0");
    let item = dtype.itemsize() as u64;
    let (base, extra) = (n_elem / n_chunks, n_elem % n_chunks);
    let mut addr = base_addr;
    (0..n_chunks)
        .map(|i| {
            let n = base + u64::from(i < extra);
            let c = Chunk {
                addr,
                n_elem: n,
                nbytes: n * item,
            };
            addr += n * item;
            c
        })
        .collect()
}

/// The round size (elements) of an algorithm that works its tile of
/// `n_elem` elements in rounds: the entry's `chunk_size` parameter
/// (elements, >= 1, capped at the tile), one round when absent. Refuses
/// any other parameter.
pub fn round_param(n_elem: u64, params: &Params) -> Result<i64, String> {
    round_param_or(n_elem, params, n_elem)
}

/// [`round_param`] with rounds of `default` elements when the entry
/// gives no `chunk_size` (capped at the tile).
pub fn round_param_or(n_elem: u64, params: &Params, default: u64) -> Result<i64, String> {
    let mut round = default.clamp(1, n_elem.max(1)) as i64;
    if let Some(chunk) = params.int("chunk_size")? {
        if chunk < 1 {
            return Err(format!("chunk_size must be >= 1 element, got {chunk}"));
        }
        round = chunk.min(n_elem.max(1) as i64);
    }
    params.finish()?;
    Ok(round)
}

/// Kernel args `(n_elem, world_size, round)` of a seed-ABI algorithm that
/// works its tile in rounds of [`round_param`] elements.
pub fn round_args(world_size: u32, n_elem: u64, params: &Params) -> Result<Vec<i64>, String> {
    Ok(vec![
        n_elem as i64,
        world_size as i64,
        round_param(n_elem, params)?,
    ])
}

/// The rounds of a tile of `n_elem` elements at `addr` for kernel args
/// made by [`round_args`]: `ceil(n_elem / round)` views (at least one).
pub fn rounds(addr: u64, n_elem: u64, round: u64, dtype: Dtype) -> Vec<Chunk> {
    chunked(addr, n_elem.div_ceil(round.max(1)).max(1), n_elem, dtype)
}

/// Chunk indices `(send_idx, recv_idx)` of step `step` of a ring
/// reduce-scatter / all-gather.
pub fn ring_step(rank: u32, step: u32, world_size: u32) -> (u32, u32) {
    let ws = world_size as i64;
    let (r, s) = (rank as i64, step as i64);
    let send = (r - s).rem_euclid(ws) as u32;
    let recv = (r - s - 1).rem_euclid(ws) as u32;
    (send, recv)
}

/// Parent and children of `rank` in a binary tree rooted at rank 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    pub parent: Option<u32>,
    pub children: Vec<u32>,
}

pub fn tree_step(rank: u32, world_size: u32) -> TreeNode {
    let parent = (rank > 0).then(|| (rank - 1) / 2);
    let children = [2 * rank + 1, 2 * rank + 2]
        .into_iter()
        .filter(|&c| c < world_size)
        .collect();
    TreeNode { parent, children }
}

/// Kernel args of an algorithm that implements `collective` in one piece:
/// the call ([`Call::to_args`]). Refuses other collectives and any
/// parameter.
pub fn call_args(call: &Call, params: &Params, collective: Collective) -> Result<Vec<i64>, String> {
    check_call(call, collective)?;
    params.finish()?;
    Ok(call.to_args())
}

/// What every SDK algorithm refuses: another collective than its own
/// (every dtype and op is done: [`crate::RedOp::finish`]).
fn check_call(call: &Call, collective: Collective) -> Result<(), String> {
    if call.collective != collective {
        return Err(format!(
            "implements {} only, not {}",
            collective.name(),
            call.collective.name()
        ));
    }
    Ok(())
}

/// Kernel args of an algorithm that implements `collective` and works in
/// rounds: the call ([`Call::to_args`]), then the round size
/// ([`round_param_or`] over `round_of` elements, `default` when the entry
/// gives no `chunk_size`). Refuses other collectives.
pub fn call_round_args(
    call: &Call,
    params: &Params,
    collective: Collective,
    round_of: u64,
    default: u64,
) -> Result<Vec<i64>, String> {
    check_call(call, collective)?;
    let mut args = call.to_args();
    args.push(round_param_or(round_of, params, default)?);
    Ok(args)
}

/// [`call_round_args`] with rounds of `call.block` elements by default
/// pieces ([`crate::ring::DEFAULT_PIECE`]): what an algorithm that
/// moves its blocks in slot-sized pieces gives `kernel_args_for`.
pub fn piece_args(
    call: &Call,
    params: &Params,
    collective: Collective,
) -> Result<Vec<i64>, String> {
    call_round_args(
        call,
        params,
        collective,
        call.block,
        crate::ring::DEFAULT_PIECE,
    )
}

/// What the kernel of an algorithm made with [`call_round_args`] gets:
/// the call, the round size and the host's values.
pub fn call_round_kernel_args(args: &[i64], t_ptr: u64) -> (Call, u64, crate::HostArgs) {
    let call = Call::from_args(args);
    let round = args[crate::CALL_ARGS] as u64;
    let host = crate::HostArgs::after(args, crate::CALL_ARGS + 1, t_ptr);
    (call, round, host)
}

/// The seed ABI's `kernel_args` of an algorithm made with
/// [`call_round_args`]: an f16 sum `collective` of `n_elem`-element
/// blocks, in rounds of `round` elements (at least 1).
pub fn seed_call_args(
    collective: Collective,
    world_size: u32,
    n_elem: u64,
    round: u64,
) -> Vec<i64> {
    let mut args = Call::of(collective, n_elem, world_size).to_args();
    args.push(round.clamp(1, n_elem.max(1)) as i64);
    args
}

/// The part of every rank's block that round `r` of a block covers: `p`
/// views of `r.n_elem` elements, rank `j`'s at `base + (j·block + off)`
/// elements, `off` being `r`'s offset in its own block at `r_base`.
pub fn rank_blocks(base: u64, p: u64, block: u64, r: Chunk, r_base: u64, dt: Dtype) -> Vec<Chunk> {
    let item = dt.itemsize() as u64;
    let off = (r.addr - r_base) / item;
    (0..p)
        .map(|j| Chunk {
            addr: base + (j * block + off) * item,
            ..r
        })
        .collect()
}

/// What the kernel of a rooted collective (broadcast, reduce) made with
/// [`call_round_args`] works on: its call, its tile in chunks of the
/// round size (input and output: the same chunks in place), and its
/// rank.
pub struct Rooted {
    pub call: Call,
    pub chunks: Vec<Chunk>,
    /// Where each chunk's result goes: `chunks` itself in place, the
    /// output's chunks out of place ([`crate::HostArgs::out_ptr`]).
    pub outputs: Vec<Chunk>,
    pub rank: u32,
    /// The host's values (the rank's premul_sum factor among them).
    pub host: crate::HostArgs,
}

impl Rooted {
    /// Each input chunk with its output chunk.
    pub fn pairs(&self) -> impl Iterator<Item = (&Chunk, &Chunk)> {
        self.chunks.iter().zip(&self.outputs)
    }

    /// This rank's reduction of every rank's values (a reduce).
    pub fn reduction(&self) -> crate::Reduction {
        crate::Reduction::of(&self.call, &self.host, self.call.world_size)
    }
}

/// The [`Rooted`] view of a kernel's arguments.
#[track_caller]
pub fn rooted<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) -> Rooted {
    let (call, chunk, host) = call_round_kernel_args(args, t_ptr);
    let tile = pe_tile_addr(tl, t_ptr, call.block, call.dtype);
    let out = pe_tile_addr(tl, host.out_ptr, call.block, call.dtype);
    Rooted {
        chunks: rounds(tile, call.block, chunk, call.dtype),
        outputs: rounds(out, call.block, chunk, call.dtype),
        call,
        rank: host.sip_rank,
        host,
    }
}

/// The kernel of an all-to-all made with [`call_round_args`]: for each
/// round, the rank blocks of its input and output handed to `phase`
/// (with the dtype and the rank).
#[track_caller]
pub fn all_to_all_rounds<T: Tl>(
    tl: &T,
    t_ptr: u64,
    args: &[i64],
    phase: impl Fn(&T, &[Chunk], &[Chunk], Dtype, u32),
) {
    let (call, round, host) = call_round_kernel_args(args, t_ptr);
    let (p, dt, b) = (call.world_size as u64, call.dtype, call.block);
    let inp = pe_tile_addr(tl, t_ptr, b * p, dt);
    let out = pe_tile_addr(tl, host.out_ptr, b * p, dt);
    // In place a phase loads a round's p pieces at once (a piece may not
    // arrive on one not sent yet): rounds p times smaller keep that to
    // the TCM one piece takes out of place.
    let round = if inp == out {
        (round / p.max(1)).max(1)
    } else {
        round
    };
    for r in rounds(inp, b, round, dt) {
        let at = |base: u64| rank_blocks(base, p, b, r, inp, dt);
        phase(tl, &at(inp), &at(out), dt, host.sip_rank);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_covers_every_element_once() {
        let c = chunked(100, 3, 10, Dtype::F16);
        assert_eq!(c.iter().map(|c| c.n_elem).sum::<u64>(), 10);
        assert_eq!(
            c[0],
            Chunk {
                addr: 100,
                n_elem: 4,
                nbytes: 8
            }
        );
        assert_eq!(c[1].addr, 108);
        assert_eq!(c[2].addr + c[2].nbytes, 120);
    }

    #[test]
    fn ring_step_walks_backwards() {
        assert_eq!(ring_step(0, 0, 4), (0, 3));
        assert_eq!(ring_step(2, 1, 4), (1, 0));
    }

    #[test]
    fn tree_step_binary() {
        assert_eq!(
            tree_step(0, 5),
            TreeNode {
                parent: None,
                children: vec![1, 2]
            }
        );
        assert_eq!(
            tree_step(2, 5),
            TreeNode {
                parent: Some(0),
                children: vec![]
            }
        );
        assert_eq!(tree_step(1, 5).children, vec![3, 4]);
    }
}
