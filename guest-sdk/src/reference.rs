//! Exact inputs and expected outputs of every collective, shared by the
//! benches (which check every element the host hands back) and the mock
//! (which checks an algorithm before it meets the host).
//!
//! Rank `r`'s input element `i` is [`Values::value`]`(r, i)`: small
//! integers chosen so that every partial result of any reduction order is
//! exact in the dtype — sums of at most [`max_contributors`] values below
//! 16 (f16 < 2048, bf16 < 256), products of 1s and 2s from at most 5
//! ranks — so the check is exact equality at every world size (`avg`: the
//! exact sum divided once, rounded once). Collectives that only move data
//! use values distinct across ranks and positions, so a block delivered
//! to the wrong place is caught.

use crate::{Call, Collective, Dtype, RedOp};

/// At most this many ranks add a non-zero value (0..16) to any one
/// element: every partial sum, in any order, stays an integer within the
/// dtype's exact range (f16 2048, bf16 256, f32 2^24).
pub fn max_contributors(dtype: Dtype) -> u32 {
    match dtype {
        Dtype::F16 => 128,
        Dtype::Bf16 => 16,
        Dtype::F32 | Dtype::I32 => 1 << 20,
    }
}

/// The largest integer a dtype holds exactly, plus one (bounded for i32).
fn exact_range(dtype: Dtype) -> u64 {
    match dtype {
        Dtype::F16 => 2048,
        Dtype::Bf16 => 256,
        Dtype::F32 | Dtype::I32 => 1 << 24,
    }
}

/// The inputs of one run: `contributors` ranks, `dtype`, `op`, and
/// whether the collective reduces.
#[derive(Debug, Clone)]
pub struct Values {
    pub contributors: u32,
    pub dtype: Dtype,
    pub op: RedOp,
    reduces: bool,
    /// Ranks `r` with `(r + i) % stride == 0` contribute to element `i`.
    pub stride: u64,
    /// The exact reduction of element `i % period` (reductions only).
    table: Vec<f64>,
}

impl Values {
    /// The values of a collective that reduces with `op` (`reduces`) or
    /// only moves data.
    pub fn new(contributors: u32, dtype: Dtype, op: RedOp, reduces: bool) -> Values {
        let stride = contributors.div_ceil(max_contributors(dtype)).max(1) as u64;
        let mut v = Values {
            contributors,
            dtype,
            op,
            reduces,
            stride,
            table: Vec::new(),
        };
        if reduces {
            // The reduction is periodic in the element index (period
            // 48 × stride): tabulated once, not reduced per element.
            v.table = (0..48 * stride).map(|i| v.reduce_exact(i)).collect();
        }
        v
    }

    /// The values of `call` (its world size contributes).
    pub fn of_call(call: &Call) -> Values {
        let reduces = matches!(
            call.collective,
            Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
        );
        Values::new(call.world_size, call.dtype, call.op, reduces)
    }

    /// Rank `rank`'s input element `i`.
    pub fn value(&self, rank: u32, i: u64) -> f64 {
        if !self.reduces {
            return ((rank as u64 * 977 + i * 31 + 1) % exact_range(self.dtype)) as f64;
        }
        if self.op == RedOp::Prod {
            return if rank < 15 && (rank as u64 + i).is_multiple_of(3) {
                2.0
            } else {
                1.0
            };
        }
        if !(rank as u64 + i).is_multiple_of(self.stride) {
            return 0.0;
        }
        ((i * 7 + rank as u64 * 13) % 16) as f64
    }

    fn reduce_exact(&self, i: u64) -> f64 {
        let vals = (0..self.contributors).map(|r| self.value(r, i));
        let x = match self.op {
            RedOp::Sum => vals.sum(),
            RedOp::Avg => vals.sum::<f64>() * (1.0 / self.contributors as f64),
            RedOp::Prod => vals.product(),
            RedOp::Max => vals.fold(f64::MIN, f64::max),
            RedOp::Min => vals.fold(f64::MAX, f64::min),
        };
        self.dtype.decode(&self.dtype.encode(&[x]))[0]
    }

    /// The reduction over every contributor of element `i`, rounded once
    /// to the dtype.
    pub fn reduced(&self, i: u64) -> f64 {
        if self.table.is_empty() {
            return self.reduce_exact(i);
        }
        self.table[(i % self.table.len() as u64) as usize]
    }
}

/// What rank `rank`'s output element `j` must hold after `call`, whose
/// ranks' inputs are `values` (None: PyTorch leaves it unspecified, e.g.
/// a non-root rank of `reduce`).
pub fn expected(call: &Call, values: &Values, rank: u32, j: u64) -> Option<f64> {
    let b = call.block.max(1);
    Some(match call.collective {
        Collective::AllReduce => values.reduced(j),
        Collective::Broadcast => values.value(call.root, j),
        Collective::Reduce if rank == call.root => values.reduced(j),
        Collective::Reduce => return None,
        Collective::AllGather => values.value((j / b) as u32, j % b),
        Collective::ReduceScatter => values.reduced(rank as u64 * b + j),
        Collective::AllToAll => values.value((j / b) as u32, rank as u64 * b + j % b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partial_result_is_exact_at_every_world_size() {
        for dtype in [Dtype::F16, Dtype::Bf16, Dtype::F32, Dtype::I32] {
            for op in [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Avg] {
                for ws in [1, 2, 4, 16, 17, 128, 129, 273, 1000, 4096] {
                    let v = Values::new(ws, dtype, op, true);
                    for i in 0..v.table.len() as u64 * 2 {
                        let vals: Vec<f64> = (0..ws).map(|r| v.value(r, i)).collect();
                        // Sums and products of all of them bound every
                        // partial result, in any order.
                        if op == RedOp::Prod {
                            let prod: f64 = vals.iter().product();
                            assert!(prod <= 32.0, "ws {ws} element {i}: {prod}");
                        } else {
                            let sum: f64 = vals.iter().sum();
                            assert!(
                                sum < exact_range(dtype) as f64,
                                "{dtype:?} ws {ws} element {i}: {sum}"
                            );
                        }
                        assert_eq!(v.reduced(i), v.reduce_exact(i));
                    }
                }
            }
        }
        assert_eq!(Values::new(128, Dtype::F16, RedOp::Sum, true).stride, 1);
        // avg: the exact sum (0 + 13 + 10 at element 0 of 3 ranks),
        // divided and rounded once.
        let avg = Values::new(3, Dtype::F16, RedOp::Avg, true);
        let once = Dtype::F16.decode(&Dtype::F16.encode(&[23.0 * (1.0 / 3.0)]))[0];
        assert_eq!(avg.reduced(0), once);
        assert_ne!(once, 23.0 / 3.0, "f16 rounds it");
    }

    #[test]
    fn data_moving_values_are_exact_and_tell_ranks_apart() {
        for dtype in [Dtype::F16, Dtype::Bf16, Dtype::F32, Dtype::I32] {
            let v = Values::new(8, dtype, RedOp::Sum, false);
            for r in 0..8 {
                for i in 0..64 {
                    let x = v.value(r, i);
                    assert_eq!(dtype.decode(&dtype.encode(&[x]))[0], x);
                }
            }
            // Neighbouring ranks differ at the same position.
            assert!((0..7).all(|r| v.value(r, 5) != v.value(r + 1, 5)));
        }
    }

    #[test]
    fn expected_outputs_follow_pytorch_semantics() {
        let call = |c, block| Call {
            collective: c,
            root: 2,
            ..Call::all_reduce(block, 4)
        };
        let gather = call(Collective::AllGather, 3);
        let v = Values::of_call(&gather);
        assert_eq!(expected(&gather, &v, 0, 7), Some(v.value(2, 1)));
        let a2a = call(Collective::AllToAll, 3);
        assert_eq!(expected(&a2a, &v, 1, 7), Some(v.value(2, 4)));
        let bc = call(Collective::Broadcast, 5);
        assert_eq!(expected(&bc, &v, 3, 4), Some(v.value(2, 4)));
        let red = call(Collective::Reduce, 5);
        let rv = Values::of_call(&red);
        assert_eq!(expected(&red, &rv, 1, 0), None);
        assert_eq!(expected(&red, &rv, 2, 3), Some(rv.reduced(3)));
        let rs = call(Collective::ReduceScatter, 5);
        assert_eq!(expected(&rs, &rv, 3, 1), Some(rv.reduced(16)));
    }
}
