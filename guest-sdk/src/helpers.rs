//! The seed's algorithm helpers (seed 003 §5): `chunked`, `ring_step`,
//! `tree_step`, plus `pe_tile_addr`, the seed kernels' per-PE tile address,
//! and the building blocks the built-in algorithms share: the seed's ring
//! all-reduce and a reduce / broadcast along a line of ranks.

use crate::{Dtype, Params, Tl};

/// Directions along a line of ranks: towards position 0, and away from it.
pub type Line<'a> = (&'a str, &'a str);

/// Sum a line of `len` ranks towards position 0: each rank adds what comes
/// from `away` and passes the partial sum `toward`. Position 0 returns the
/// line's sum, the others their partial sum.
pub fn reduce_line<T: Tl>(
    tl: &T,
    acc: T::Tensor,
    (pos, len): (u32, u32),
    (toward, away): Line,
    (shape, dtype): (&[u32], Dtype),
) -> T::Tensor {
    let mut acc = acc;
    if pos + 1 < len {
        let part = tl.recv(Some(away), shape, dtype);
        acc = tl.add(&acc, &part);
    }
    if pos > 0 {
        tl.send(toward, &acc);
    }
    acc
}

/// Pass position 0's `acc` along a line of `len` ranks; every rank returns
/// it.
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
/// position 0, then [`broadcast_line`] back; every rank returns the sum.
pub fn allreduce_line<T: Tl>(
    tl: &T,
    acc: T::Tensor,
    at: (u32, u32),
    dirs: Line,
    tile: (&[u32], Dtype),
) -> T::Tensor {
    let sum = reduce_line(tl, acc, at, dirs, tile);
    broadcast_line(tl, sum, at, dirs, tile)
}

/// The seed's ring all-reduce (seed 003 §2) over a ring of `len` ranks:
/// `len − 1` times send the current tile `east`, add the one received from
/// `west`, and forward what was received (`current = recv`), so every
/// rank's tile travels the ring once.
pub fn ring_allreduce<T: Tl>(
    tl: &T,
    acc: T::Tensor,
    len: u32,
    (east, west): (&str, &str),
    (shape, dtype): (&[u32], Dtype),
) -> T::Tensor {
    let mut acc = acc;
    let mut current: Option<T::Tensor> = None;
    for _ in 1..len {
        tl.send(east, current.as_ref().unwrap_or(&acc));
        let recv = tl.recv(Some(west), shape, dtype);
        acc = tl.add(&acc, &recv);
        current = Some(recv); // forward what we received, not the sum
    }
    acc
}

/// The seed kernels' tile of this PE: `t_ptr + rank * n_elem * itemsize`,
/// with `rank = cube_id * pes_per_cube + local_pe` (ADR-0022 2-D grid).
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
    let mut round = n_elem as i64;
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
