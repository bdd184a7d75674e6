//! The PE's compute units and their commands: the MATH (vector) unit —
//! element-wise ops, casts, reductions — and the matrix unit — `gemm` and
//! the GEMM + MATH composites. Each unit is an in-order queue; a command
//! keeps its unit busy for `overhead + work / throughput` (DESIGN §4) and
//! applies its [`ComputeOp`] when it completes.

use super::compute_unit::{describe, StageRecord, UnitCost};
use super::{Issuer, Machine, TensorRef};
use crate::engine::Event;
use crate::error::HwError;
use crate::hw::compute_op::ComputeOp;
use crate::hw::dtype::{BinOp, Dtype};
use crate::hw::gemm_ops::{self, CompositeOp};
use crate::hw::math_ops::{self, ReduceOp, UnaryOp};
use crate::hw::tensor::{check_same_operands, Operands, Shape};
use crate::units::{Ps, Rate};
use smallvec::smallvec;
use std::sync::Arc;

/// One stage of a compute command: the unit and its work, what it waits
/// for besides its inputs, its command's op and the output it writes
/// (`None`: the stage only takes time, e.g. a composite's product).
struct Stage {
    unit: UnitCost,
    work: u64,
    after: Option<Event>,
    op: ComputeOp,
    out: Option<TensorRef>,
    done: Event,
}

impl Machine {
    /// A one-stage command on the MATH unit: `op` of `inputs` into `out`,
    /// `overhead + work / throughput`.
    fn math_op(
        self: &Arc<Self>,
        at: Issuer,
        op: ComputeOp,
        inputs: Operands,
        out: &TensorRef,
        work: u64,
    ) -> Result<(), HwError> {
        let done = out.ready.clone();
        let stage = Stage {
            unit: UnitCost::Math,
            work,
            after: None,
            op,
            out: Some(out.clone()),
            done,
        };
        self.compute_stage(at, inputs, stage)
    }

    /// Issue a stage on `pe`'s unit: it takes its turn on the unit's
    /// in-order queue, waits for `after` (an earlier stage of the same
    /// command) and its inputs, keeps the unit busy for
    /// `overhead + work / rate`, then applies its effect and sets `done`
    /// (see [`super::compute_unit`]).
    fn compute_stage(
        self: &Arc<Self>,
        at: Issuer,
        inputs: Operands,
        stage: Stage,
    ) -> Result<(), HwError> {
        let Stage {
            unit,
            work,
            after,
            op,
            out,
            done,
        } = stage;
        let busy = unit
            .busy(self.timing_of(at.pe.sip), work)
            .map_err(|source| HwError::TimeOverflow {
                what: format!("{} of {work} units of work", describe(&op, &out)),
                source,
            })?;
        let logged = self.issue_marks(at, None);
        let record = StageRecord {
            busy,
            work,
            after,
            op,
            inputs,
            out,
            done,
            logged,
        };
        self.enqueue_stage(at, unit.kind(), record)
    }

    /// `tl.binary`: element-wise `a op b`.
    pub fn binary(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        op: BinOp,
        a: &TensorRef,
        b: &TensorRef,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        check_same_operands(op, (&a.shape, a.dtype), (&b.shape, b.dtype))?;
        let out = self.scratch(at.pe, &a.shape, a.dtype)?;
        let op = ComputeOp::Binary { op, dtype: a.dtype };
        self.math_op(at, op, smallvec![a.clone(), b.clone()], &out, out.numel())?;
        Ok(out)
    }

    /// `tl.unary`: `op(a)` element-wise.
    pub fn unary(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        op: UnaryOp,
        a: &TensorRef,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        let out = self.scratch(at.pe, &a.shape, a.dtype)?;
        let op = ComputeOp::Unary { op, dtype: a.dtype };
        self.math_op(at, op, smallvec![a.clone()], &out, out.numel())?;
        Ok(out)
    }

    /// `tl.scale`: `a * factor`.
    pub fn scale(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        a: &TensorRef,
        factor: f64,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        let out = self.scratch(at.pe, &a.shape, a.dtype)?;
        let op = ComputeOp::Scale {
            factor,
            dtype: a.dtype,
        };
        self.math_op(at, op, smallvec![a.clone()], &out, out.numel())?;
        Ok(out)
    }

    /// `tl.fill`: a tensor of `shape` / `dtype` in the PE's scratch with
    /// every element `value` (converted as a cast converts); one element
    /// of work per element.
    pub fn fill(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        shape: &[u32],
        dtype: Dtype,
        value: f64,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        let out = self.scratch(at.pe, shape, dtype)?;
        let op = ComputeOp::Fill { value, dtype };
        self.math_op(at, op, smallvec![], &out, out.numel())?;
        Ok(out)
    }

    /// `tl.cast`: `a` converted to `dtype` (one element per element).
    pub fn cast(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        a: &TensorRef,
        dtype: Dtype,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        let out = self.scratch(at.pe, &a.shape, dtype)?;
        let op = ComputeOp::Cast {
            from: a.dtype,
            to: dtype,
        };
        self.math_op(at, op, smallvec![a.clone()], &out, a.numel())?;
        Ok(out)
    }

    /// `tl.reduce`: `op` over `axis` of `a` (that axis dropped); the unit
    /// processes every element of `a`.
    pub fn reduce(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        op: ReduceOp,
        a: &TensorRef,
        axis: u32,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        let shape =
            math_ops::reduced_shape(&a.shape, axis).map_err(|what| HwError::Mismatch { what })?;
        let out = self.scratch(at.pe, &shape, a.dtype)?;
        let op = ComputeOp::Reduce {
            op,
            dtype: a.dtype,
            shape: Shape::from_slice(&a.shape),
            axis,
        };
        self.math_op(at, op, smallvec![a.clone()], &out, a.numel())?;
        Ok(out)
    }

    /// `tl.gemm`: `a [m, k] x b [k, n]` on the matrix unit, rounded once
    /// to `out_dtype`; `overhead + 2·m·n·k / rate(dtype)`.
    pub fn gemm(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        a: &TensorRef,
        b: &TensorRef,
        out_dtype: Dtype,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        self.composite(at, CompositeOp::Gemm, (a, b, None), out_dtype)
    }

    /// The time a `[m, k] x [k, n]` GEMM of `dt` takes on every matrix
    /// unit of SIP `sip` together, by the roofline: the unit overhead,
    /// then the longer of its FLOPs (`2·m·n·k`) at the SIP's peak (PEs ×
    /// one unit's rate) and its bytes (`(m·k + k·n + m·n) · itemsize`, each
    /// operand read or written once) at the SIP's HBM bandwidth (cubes ×
    /// stacks × a stack's). What `torch.ahbm.gemm` charges.
    pub fn roofline_gemm(
        &self,
        sip: u32,
        (m, n, k): (u32, u32, u32),
        dt: Dtype,
    ) -> Result<Ps, HwError> {
        let spec = &self.topo.spec;
        let pes = (spec.cubes_per_sip() * spec.pes_per_cube()) as f64;
        let peak = Rate::from_giga_per_s(self.gemm_rate(sip, dt).giga_per_s() * pes);
        let stack_gbps = spec
            .overrides
            .sip(sip)
            .and_then(|o| o.hbm_bandwidth_gbps)
            .unwrap_or(spec.cube.hbm.bandwidth_gbps);
        let hbm_gbps = stack_gbps * spec.cube.hbm.stacks as f64 * spec.cubes_per_sip() as f64;
        let hbm = Rate::from_giga_per_s(hbm_gbps);
        let (m, n, k) = (m as u64, n as u64, k as u64);
        let what = || format!("a {m}x{k}x{n} {} GEMM", dt.name());
        let overflow = |source| HwError::TimeOverflow {
            what: what(),
            source,
        };
        let flops = 2u64
            .checked_mul(m)
            .and_then(|v| v.checked_mul(n))
            .and_then(|v| v.checked_mul(k));
        let bytes = (m.checked_mul(k))
            .and_then(|a| Some((a, k.checked_mul(n)?, m.checked_mul(n)?)))
            .and_then(|(a, b, c)| a.checked_add(b)?.checked_add(c))
            .and_then(|e| e.checked_mul(dt.itemsize()));
        let (Some(flops), Some(bytes)) = (flops, bytes) else {
            return Err(overflow(crate::units::TimeOverflow));
        };
        let compute = peak.duration_ps(flops).map_err(overflow)?;
        let memory = hbm.duration_ps(bytes).map_err(overflow)?;
        self.timing_of(sip)
            .gemm_overhead
            .checked_add(compute.max(memory))
            .ok_or_else(|| overflow(crate::units::TimeOverflow))
    }

    /// Keep `at`'s matrix unit busy for `busy` with `op` (a
    /// [`ComputeOp::Charge`]): a command that moves no data, queued in
    /// order with the kernels' GEMMs there. The event it sets when done.
    pub fn charge_gemm_unit(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        busy: Ps,
        op: ComputeOp,
    ) -> Result<Event, HwError> {
        debug_assert!(matches!(op, ComputeOp::Charge { .. }));
        let done = Event::new();
        let record = StageRecord {
            busy,
            work: 0,
            after: None,
            op,
            inputs: Operands::new(),
            out: None,
            done: done.clone(),
            logged: None,
        };
        self.enqueue_stage(at.into(), super::compute_unit::UnitKind::Gemm, record)?;
        Ok(done)
    }

    /// One matrix unit's peak operations per second for inputs of `dt`
    /// (a SIP without overrides).
    pub fn gemm_peak_per_s(&self, dt: Dtype) -> f64 {
        self.gemm_rate(0, dt).giga_per_s() * 1e9
    }

    /// The matrix unit's FLOP/s on SIP `sip` for inputs of `dt`.
    fn gemm_rate(&self, sip: u32, dt: Dtype) -> Rate {
        // Dtype::ALL lists each dtype at its discriminant.
        self.timing_of(sip).gemm_rates[dt as usize]
    }

    /// `tl.composite` (and `tl.gemm`, op `Gemm`): `a [m, k] x b [k, n]` on
    /// the matrix unit, `overhead + 2·m·n·k / rate(dtype)`, then `op`'s
    /// epilogue (accumulate into `c`, add the bias row `c`, ReLU) on the
    /// MATH unit, `math overhead + (epilogue ops)·m·n / math rate`, as one
    /// command; the result is computed exactly and rounded once to
    /// `out_dtype`.
    pub fn composite(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        op: CompositeOp,
        (a, b, c): (&TensorRef, &TensorRef, Option<&TensorRef>),
        out_dtype: Dtype,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        let mnk = gemm_ops::composite_shape(
            op,
            (&a.shape, a.dtype),
            (&b.shape, b.dtype),
            c.map(|c| &c.shape[..]),
            self.timing.gemm_max,
        )
        .map_err(|what| HwError::Mismatch { what })?;
        let (m, n, k) = mnk;
        let out = self.scratch(at.pe, &[m, n], out_dtype)?;
        let dt = a.dtype;
        let compute = ComputeOp::Composite {
            op,
            dtypes: (dt, c.map_or(dt, |c| c.dtype), out_dtype),
            mnk,
        };
        let mut inputs = smallvec![a.clone(), b.clone()];
        inputs.extend(c.cloned());
        let gemm = UnitCost::Gemm(self.gemm_rate(at.pe.sip, dt));
        let flops = 2 * m as u64 * n as u64 * k as u64;
        if op == CompositeOp::Gemm {
            let stage = Stage {
                unit: gemm,
                work: flops,
                after: None,
                op: compute,
                out: Some(out.clone()),
                done: out.ready.clone(),
            };
            self.compute_stage(at, inputs, stage)?;
            return Ok(out);
        }
        let gemm_done = Event::new();
        let product = Stage {
            unit: gemm,
            work: flops,
            after: None,
            op: compute.clone(),
            out: None,
            done: gemm_done.clone(),
        };
        self.compute_stage(at, smallvec![a.clone(), b.clone()], product)?;
        let epilogue = Stage {
            unit: UnitCost::Math,
            work: op.epilogue_ops() * m as u64 * n as u64,
            after: Some(gemm_done),
            op: compute,
            out: Some(out.clone()),
            done: out.ready.clone(),
        };
        self.compute_stage(at, inputs, epilogue)?;
        Ok(out)
    }
}
