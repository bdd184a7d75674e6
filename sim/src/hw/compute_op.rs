//! What a compute command computes, as data: the one description of a
//! MATH or GEMM command's effect that the timed pass applies when the
//! command completes and that the op log records (so a second pass can
//! apply it again without the kernel). Values are computed in f64 and
//! rounded once to the output dtype ([`super::math_ops`],
//! [`super::gemm_ops`], [`super::dtype`]).

use super::dtype::{self, BinOp, Dtype};
use super::gemm_ops::{self, CompositeOp};
use super::math_ops::{self, ReduceOp, UnaryOp};
use super::memory::MemoryStore;
use super::tensor::Shape;
use crate::address::Space;
use crate::budget::BudgetExceeded;

/// A compute command's effect on its inputs' bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum ComputeOp {
    /// `a op b`, element-wise.
    Binary { op: BinOp, dtype: Dtype },
    /// `a * factor`, element-wise.
    Scale { factor: f64, dtype: Dtype },
    /// Every element `value` (no inputs), converted to `dtype` as a cast
    /// converts.
    Fill { value: f64, dtype: Dtype },
    /// `op(a)`, element-wise.
    Unary { op: UnaryOp, dtype: Dtype },
    /// `a` converted from one dtype to another.
    Cast { from: Dtype, to: Dtype },
    /// `op` over `axis` of `a` (of `shape`).
    Reduce {
        op: ReduceOp,
        dtype: Dtype,
        shape: Shape,
        axis: u32,
    },
    /// The GEMM of `a [m, k]` and `b [k, n]` and `op`'s epilogue with `c`;
    /// `dtypes` = (inputs, c, output).
    Composite {
        op: CompositeOp,
        dtypes: (Dtype, Dtype, Dtype),
        mnk: (u32, u32, u32),
    },
    /// Time the host charges to a unit, moving no data (`torch.ahbm.gemm`
    /// of `mnk` in `dtype` by the roofline, or `torch.ahbm.busy`: `mnk`
    /// None): compute a bench models without writing it as a kernel.
    Charge {
        mnk: Option<(u32, u32, u32)>,
        dtype: Dtype,
    },
}

impl ComputeOp {
    /// Element-wise ops can be applied piece by piece (memory pages) with
    /// the inputs and the output aligned element for element.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            ComputeOp::Binary { .. }
                | ComputeOp::Scale { .. }
                | ComputeOp::Unary { .. }
                | ComputeOp::Fill { .. }
        )
    }

    /// The op log's name of the op (seed ADR-0052's `op_name`).
    pub fn log_name(&self) -> &'static str {
        match self {
            ComputeOp::Reduce { .. } => "math_reduction",
            ComputeOp::Composite {
                op: CompositeOp::Gemm,
                ..
            } => "gemm",
            ComputeOp::Composite { .. } => "composite_gemm",
            ComputeOp::Charge { .. } => "host_charge",
            _ => "math",
        }
    }

    /// The dtype of the output.
    pub fn out_dtype(&self) -> Dtype {
        match self {
            ComputeOp::Binary { dtype, .. }
            | ComputeOp::Scale { dtype, .. }
            | ComputeOp::Fill { dtype, .. }
            | ComputeOp::Unary { dtype, .. }
            | ComputeOp::Reduce { dtype, .. } => *dtype,
            ComputeOp::Cast { to, .. } => *to,
            ComputeOp::Composite { dtypes, .. } => dtypes.2,
            ComputeOp::Charge { dtype, .. } => *dtype,
        }
    }

    /// A short description for traces and the op log.
    pub fn describe(&self) -> String {
        match self {
            ComputeOp::Binary { op, dtype } => format!("{} {}", op.name(), dtype.name()),
            ComputeOp::Scale { factor, dtype } => format!("scale {factor} {}", dtype.name()),
            ComputeOp::Fill { value, dtype } => format!("fill {value} {}", dtype.name()),
            ComputeOp::Unary { op, dtype } => format!("{} {}", op.name(), dtype.name()),
            ComputeOp::Cast { from, to } => format!("cast {}->{}", from.name(), to.name()),
            ComputeOp::Reduce {
                op, dtype, axis, ..
            } => format!("reduce {} axis {axis} {}", op.name(), dtype.name()),
            ComputeOp::Composite {
                op,
                dtypes,
                mnk: (m, n, k),
            } => format!("{} {m}x{k}x{n} {}", op.name(), dtypes.0.name()),
            ComputeOp::Charge {
                mnk: Some((m, n, k)),
                dtype,
            } => format!("host gemm {m}x{k}x{n} {}", dtype.name()),
            ComputeOp::Charge { mnk: None, .. } => "host busy".to_string(),
        }
    }

    /// Compute `out` from `inputs` (all of them, or aligned pieces of
    /// them for an element-wise op).
    pub fn apply(&self, inputs: &[&[u8]], out: &mut [u8]) {
        match self {
            ComputeOp::Binary { op, dtype } => {
                dtype::binary_into(*op, *dtype, inputs[0], inputs[1], out)
            }
            ComputeOp::Scale { factor, dtype } => {
                dtype::scale_into(*dtype, inputs[0], *factor, out)
            }
            ComputeOp::Fill { value, dtype } => dtype::fill_into(*dtype, *value, out),
            ComputeOp::Unary { op, dtype } => math_ops::unary_into(*op, *dtype, inputs[0], out),
            ComputeOp::Cast { from, to } => math_ops::cast_into(*from, *to, inputs[0], out),
            ComputeOp::Reduce {
                op,
                dtype,
                shape,
                axis,
            } => math_ops::reduce_into(*op, *dtype, shape, *axis, inputs[0], out),
            ComputeOp::Composite { op, dtypes, mnk } => {
                if *op == CompositeOp::Gemm {
                    gemm_ops::gemm_into(dtypes.0, dtypes.2, *mnk, inputs[0], inputs[1], out)
                } else {
                    gemm_ops::composite_into(*op, *dtypes, *mnk, inputs, out)
                }
            }
            ComputeOp::Charge { .. } => {
                unreachable!("a host charge has no output to compute")
            }
        }
    }
}

/// Bytes of memory an op reads or writes: space, offset, length.
pub type Region = (Space, u64, u64);

impl ComputeOp {
    /// Apply the op to memory: read `inputs`, write `out` (`unit` = the
    /// output's element size). An element-wise op whose operands are
    /// aligned and do not overlap its output goes page by page.
    pub fn apply_to_memory(
        &self,
        mem: &mut MemoryStore,
        inputs: &[Region],
        (space, offset, len): Region,
        unit: u64,
    ) -> Result<(), BudgetExceeded> {
        if !mem.keeps_bytes() {
            return Ok(()); // timing only: nothing to compute
        }
        let dst = (space, offset);
        let at = |r: &Region| (r.0, r.1);
        match (self.is_elementwise(), inputs) {
            (true, []) => mem.apply([], dst, len, unit, |[], o| self.apply(&[], o)),
            (true, [a]) => mem.apply([at(a)], dst, len, unit, |[x], o| self.apply(&[x], o)),
            (true, [a, b]) => mem.apply([at(a), at(b)], dst, len, unit, |[x, y], o| {
                self.apply(&[x, y], o)
            }),
            _ => {
                let data: Vec<Vec<u8>> = inputs.iter().map(|r| mem.read(r.0, r.1, r.2)).collect();
                let views: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
                let mut o = vec![0u8; len as usize];
                self.apply(&views, &mut o);
                mem.write(space, offset, &o)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_applies_what_its_module_computes() {
        let a = Dtype::F32.from_f64(&[1.0, -2.0, 3.0, 4.0]);
        let run = |op: ComputeOp, inputs: &[&[u8]], out_len: usize| {
            let mut o = vec![0u8; out_len];
            op.apply(inputs, &mut o);
            Dtype::F32.to_f64(&o)
        };
        let f = Dtype::F32;
        let add = ComputeOp::Binary {
            op: BinOp::Add,
            dtype: f,
        };
        assert_eq!(run(add.clone(), &[&a, &a], 16), [2.0, -4.0, 6.0, 8.0]);
        assert!(add.is_elementwise() && add.log_name() == "math");
        let relu = ComputeOp::Unary {
            op: UnaryOp::Relu,
            dtype: f,
        };
        assert_eq!(run(relu, &[&a], 16), [1.0, 0.0, 3.0, 4.0]);
        let sum = ComputeOp::Reduce {
            op: ReduceOp::Sum,
            dtype: f,
            shape: Shape::from_slice(&[2, 2]),
            axis: 1,
        };
        assert_eq!(run(sum.clone(), &[&a], 8), [-1.0, 7.0]);
        assert_eq!(sum.log_name(), "math_reduction");
        let gemm = ComputeOp::Composite {
            op: CompositeOp::GemmRelu,
            dtypes: (f, f, f),
            mnk: (2, 2, 2),
        };
        // [[1, -2], [3, 4]]^2 = [[-5, -10], [15, 10]]
        assert_eq!(run(gemm.clone(), &[&a, &a], 16), [0.0, 0.0, 15.0, 10.0]);
        assert_eq!(gemm.log_name(), "composite_gemm");
        assert_eq!(gemm.describe(), "gemm-relu 2x2x2 f32");
        let fill = ComputeOp::Fill {
            value: -2.5,
            dtype: Dtype::I32,
        };
        let mut o = vec![0u8; 12];
        fill.apply(&[], &mut o);
        assert_eq!(
            Dtype::I32.to_f64(&o),
            [-3.0; 3],
            "rounded half away from zero"
        );
        assert!(fill.is_elementwise() && fill.log_name() == "math");
        assert_eq!(fill.describe(), "fill -2.5 i32");
    }
}
