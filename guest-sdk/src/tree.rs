//! NCCL's double binary tree (`ncclGetBtree` / `ncclGetDtree`, NCCL's
//! `src/graph/trees.cc`), on the `full_mesh` IPCQ table (a tree edge is a
//! direct queue between two ranks, routed over the machine).
//!
//! Tree 0 is the in-order binary tree of the rank numbers: a rank's level
//! is its lowest set bit, its parent is found by moving that bit up, and
//! rank 0 is the root with one child. Tree 1 is tree 0 mirrored (rank
//! `r` ↔ `p − 1 − r`) for an even `p`, shifted by one rank for an odd
//! `p`. In tree 0 the odd ranks are the leaves, in the mirror the even
//! ones: every rank is an inner node of at most one tree, so its links
//! carry about the same load in both.
//!
//! The all-reduce splits the tile in two halves, half `t` goes over tree
//! `t`: pieces are reduced up to the root (each inner node combines its
//! children's pieces into its own and sends the result on), then
//! broadcast back down, the two trees interleaved piece by piece. The
//! reduction of every piece finishes before the broadcast starts (NCCL
//! overlaps the two, which halves the time for large messages: not
//! modelled here).

use crate::helpers::Chunk;
use crate::kernel::Tl;
use crate::{Dtype, Reduction};

/// One rank's place in one tree.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeLinks {
    pub parent: Option<u32>,
    pub children: Vec<u32>,
}

/// `rank`'s parent and children in NCCL's binary tree over `p` ranks
/// (`ncclGetBtree`).
pub fn btree(p: u32, rank: u32) -> TreeLinks {
    let mut bit = 1u32;
    while bit < p && bit & rank == 0 {
        bit <<= 1;
    }
    if rank == 0 {
        return TreeLinks {
            parent: None,
            children: if p > 1 { vec![bit >> 1] } else { vec![] },
        };
    }
    let mut up = (rank ^ bit) | (bit << 1);
    if up >= p {
        up = rank ^ bit;
    }
    let lowbit = bit >> 1;
    let mut children = Vec::new();
    if lowbit > 0 {
        children.push(rank - lowbit);
        let mut l = lowbit;
        while l > 0 && rank + l >= p {
            l >>= 1;
        }
        if l > 0 {
            children.push(rank + l);
        }
    }
    TreeLinks {
        parent: Some(up),
        children,
    }
}

/// `rank`'s place in tree `t` (0 or 1) of the double binary tree over `p`
/// ranks (`ncclGetDtree`): tree 1 mirrors tree 0 for an even `p` and
/// shifts it by one rank for an odd `p`.
pub fn dtree(p: u32, rank: u32, t: u32) -> TreeLinks {
    if t == 0 || p < 2 {
        return btree(p, rank);
    }
    let (into, back): (u32, Box<dyn Fn(u32) -> u32>) = if p % 2 == 1 {
        ((rank + p - 1) % p, Box::new(move |x| (x + 1) % p))
    } else {
        (p - 1 - rank, Box::new(move |x| p - 1 - x))
    };
    let l = btree(p, into);
    TreeLinks {
        parent: l.parent.map(&back),
        children: l.children.into_iter().map(&back).collect(),
    }
}

/// The height of tree `t` over `p` ranks: the most edges from the root
/// to a leaf.
pub fn height(p: u32, t: u32) -> u32 {
    (0..p)
        .map(|mut r| {
            let mut h = 0;
            while let Some(up) = dtree(p, r, t).parent {
                r = up;
                h += 1;
            }
            h
        })
        .max()
        .unwrap_or(0)
}

/// The direction to rank `j` on the `full_mesh` table.
fn to(j: u32) -> String {
    crate::direct::to(j)
}

/// Pieces of each half a wave of [`all_reduce`] carries: a tree's root
/// holds its wave's results in TCM until it has sent them down (16 × 128
/// KiB = 2 MiB at the default piece).
pub const WAVE: usize = 16;

/// Pieces a leaf runs ahead of its inner-node work (see [`all_reduce`]).
pub const LEAF_AHEAD: usize = 1;

/// Double-binary-tree all-reduce of two halves, half `t` over tree `t`,
/// each half in `pieces[t]`: reduce every piece to its tree's root
/// (each rank's own piece prepared, combined with `red`'s combine, the
/// root finishing it), then
/// broadcast it back down, in waves of [`WAVE`] pieces per half. Every
/// rank ends with the reduction of both halves in place.
///
/// A rank is a leaf of one tree and an inner node of the other (both
/// inner for rank 0 of an odd `p`). Its leaf work never waits for
/// anyone, its inner work waits for its children (up) or its parent
/// (down); so that the two trees do not hold each other back (a leaf's
/// next piece stuck behind its inner work on the other tree), a leaf
/// sends its pieces [`LEAF_AHEAD`] steps ahead in the reduction and
/// receives them as many steps behind in the broadcast. Within a step a
/// rank reduces its leaf trees first, then its inner trees from the last
/// to the first, and broadcasts its inner trees from the first to the
/// last, then its leaf trees: the orders both ends of every queue agree
/// on, free of waiting cycles. For `p = 3`, where rank 2 has rank 0 for
/// parent in both trees and their pieces share one queue, nothing runs
/// ahead.
///
/// The root sends down the results it holds, not what it stored: a load
/// issued after a store to the same place may read it before the store
/// lands (DMA commands are ordered at issue, not at completion).
///
/// `(tile, out)`: the pieces lie in the input tile at `tile`; each
/// result is stored at the same offset from `out` (`tile` in place).
#[track_caller]
pub fn all_reduce<T: Tl>(
    tl: &T,
    pieces: [&[Chunk]; 2],
    red: Reduction,
    dt: Dtype,
    (rank, p): (u32, u32),
    (tile, out): (u64, u64),
) {
    let out_of = |x: &Chunk| out + (x.addr - tile);
    if p < 2 {
        // One rank: its tile is the result (premul_sum: times its factor).
        for x in pieces.iter().flat_map(|ps| ps.iter()) {
            if x.n_elem > 0 && (out != tile || red.alone_computes()) {
                let t = red.load(tl, x.addr, x.n_elem, dt);
                tl.store(out_of(x), &t);
            }
        }
        return;
    }
    let trees = [dtree(p, rank, 0), dtree(p, rank, 1)];
    let ahead = if p == 3 { 0 } else { LEAF_AHEAD };
    let leaf = |t: usize| trees[t].children.is_empty();
    // Up: leaf trees first, then inner trees from the last to the first;
    // down: inner trees from the first to the last, then leaf trees.
    let up_order: Vec<usize> = (0..2)
        .filter(|&t| leaf(t))
        .chain((0..2).rev().filter(|&t| !leaf(t)))
        .collect();
    let down_order: Vec<usize> = (0..2)
        .filter(|&t| !leaf(t))
        .chain((0..2).filter(|&t| leaf(t)))
        .collect();
    let k = pieces[0].len().max(pieces[1].len());
    for first in (0..k).step_by(WAVE) {
        let wave: [Vec<&Chunk>; 2] = [0, 1].map(|t| {
            pieces[t]
                .iter()
                .skip(first)
                .take(WAVE)
                .filter(|x| x.n_elem > 0)
                .collect()
        });
        let steps = wave[0].len().max(wave[1].len());
        let shape = |x: &Chunk| [x.n_elem as u32];
        // Up: leaves send their pieces `ahead` steps early; every inner
        // node combines its children's pieces into its own and sends the
        // result to its parent; a root keeps it.
        let mut results: [Vec<T::Tensor>; 2] = [Vec::new(), Vec::new()];
        for i in 0..steps + ahead {
            for &t in &up_order {
                let tree = &trees[t];
                let j = if leaf(t) {
                    Some(i)
                } else {
                    i.checked_sub(ahead)
                };
                let Some(&x) = j.and_then(|j| wave[t].get(j)) else {
                    continue;
                };
                let mut acc = red.load(tl, x.addr, x.n_elem, dt);
                for &child in &tree.children {
                    let got = tl.recv(Some(&to(child)), &shape(x), dt);
                    acc = red.combine(tl, &acc, &got);
                }
                match tree.parent {
                    Some(up) => tl.send(&to(up), &acc),
                    None => {
                        acc = red.finished(tl, acc);
                        tl.store(out_of(x), &acc);
                        results[t].push(acc);
                    }
                }
            }
        }
        // Down: the roots' results go back along the same edges; leaves
        // take theirs `ahead` steps late.
        let mut results = results.map(Vec::into_iter);
        for i in 0..steps + ahead {
            for &t in &down_order {
                let tree = &trees[t];
                let j = if leaf(t) {
                    i.checked_sub(ahead)
                } else {
                    Some(i)
                };
                let Some(&x) = j.and_then(|j| wave[t].get(j)) else {
                    continue;
                };
                let v = match tree.parent {
                    None => results[t]
                        .next()
                        .expect("a result for every piece rooted here"),
                    Some(up) => {
                        let got = tl.recv(Some(&to(up)), &shape(x), dt);
                        tl.store(out_of(x), &got);
                        got
                    }
                };
                for &child in &tree.children {
                    tl.send(&to(child), &v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank but the root has one parent that lists it as a child,
    /// no node has more than two children, every rank reaches the root;
    /// for an even `p` no rank is an inner node of both trees.
    #[test]
    fn both_trees_span_every_rank() {
        for p in 1..=70u32 {
            for t in 0..2 {
                let links: Vec<TreeLinks> = (0..p).map(|r| dtree(p, r, t)).collect();
                let roots: Vec<u32> = (0..p)
                    .filter(|&r| links[r as usize].parent.is_none())
                    .collect();
                assert_eq!(roots.len(), 1, "p={p} tree {t}: roots {roots:?}");
                for r in 0..p {
                    let l = &links[r as usize];
                    assert!(l.children.len() <= 2, "p={p} t={t} r={r}: {l:?}");
                    for &c in &l.children {
                        assert!(c < p && c != r);
                        assert_eq!(
                            links[c as usize].parent,
                            Some(r),
                            "p={p} t={t}: {c} under {r}"
                        );
                    }
                    if let Some(up) = l.parent {
                        assert!(
                            links[up as usize].children.contains(&r),
                            "p={p} t={t} r={r}"
                        );
                    }
                }
                assert!(height(p, t) <= 2 * (32 - p.leading_zeros()), "p={p}");
            }
            if p % 2 == 0 {
                for r in 0..p {
                    let inner = (0..2)
                        .filter(|&t| !dtree(p, r, t).children.is_empty())
                        .count();
                    assert!(inner <= 1, "p={p}: rank {r} is inner in both trees");
                }
            }
        }
    }

    #[test]
    fn nccl_s_twelve_rank_picture() {
        // trees.cc: 0 -> 8 -> {4, 10}, 4 -> {2, 6}, 2 -> {1, 3}, ...
        assert_eq!(btree(12, 0).children, vec![8]);
        assert_eq!(btree(12, 8).children, vec![4, 10]);
        assert_eq!(btree(12, 10).children, vec![9, 11]);
        assert_eq!(btree(12, 4).parent, Some(8));
        // the mirror: 11 -> 3 -> {7, 1}
        assert_eq!(dtree(12, 11, 1).children, vec![3]);
        assert_eq!(dtree(12, 3, 1).children, vec![7, 1]);
    }
}
