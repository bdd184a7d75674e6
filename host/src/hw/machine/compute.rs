//! The PE's compute units and their commands: the MATH (vector) unit —
//! element-wise ops, casts, reductions — and the matrix unit — `gemm` and
//! the GEMM + MATH composites. Each unit is an in-order queue; a command
//! keeps its unit busy for `overhead + work / throughput` (DESIGN §4) and
//! writes its output when it completes.

use super::{Machine, TensorRef};
use crate::engine::{self, Event};
use crate::error::HwError;
use crate::hw::dtype::{self, BinOp, Dtype};
use crate::hw::gemm_ops::{self, CompositeOp};
use crate::hw::math_ops::{self, ReduceOp, UnaryOp};
use crate::hw::tensor::check_same_operands;
use crate::hw::trace::Track;
use crate::topology::PeCoord;
use crate::units::Rate;
use std::borrow::Cow;
use std::sync::Arc;

/// A compute command's computation from all of its inputs at once.
type WholeFn = Box<dyn FnOnce(&[&[u8]], &mut [u8])>;

/// The PE engine a compute command runs on, and what its work costs.
#[derive(Clone, Copy)]
enum ComputeUnit {
    /// The vector unit: `overhead + elements / throughput`.
    Math,
    /// The matrix unit: `overhead + FLOPs / rate` (the rate of the inputs'
    /// dtype).
    Gemm(Rate),
}

/// How a compute command computes its output bytes.
enum MathData<F> {
    /// Element-wise, on page-sized pieces.
    Elementwise(F),
    /// From all of its inputs at once.
    Whole(WholeFn),
    /// Nothing: a stage that only takes the unit's time.
    TimeOnly,
}

/// The shorthand for a command without an element-wise function.
type NoElementwise<const N: usize> = fn([&[u8]; N], &mut [u8]);

impl Machine {
    /// A MATH command on `pe`: `out = f(inputs)`, element-wise (`f` is
    /// called on page-sized pieces of the inputs and of `out`). It takes
    /// `overhead + elements / throughput` of `out`'s elements.
    fn math<const N: usize>(
        self: &Arc<Self>,
        what: Cow<'static, str>,
        pe: PeCoord,
        inputs: [TensorRef; N],
        out: TensorRef,
        f: impl FnMut([&[u8]; N], &mut [u8]) + 'static,
    ) -> Result<(), HwError> {
        let work = out.numel();
        self.math_command(
            what,
            pe,
            inputs,
            None,
            (Some(out.clone()), out.ready.clone()),
            (ComputeUnit::Math, work),
            MathData::Elementwise(f),
        )
    }

    /// A MATH command whose output is not element-wise aligned with its
    /// input (a cast, a reduction): `f` sees all of `input` and all of
    /// `out`. It takes `overhead + work / throughput`, `work` the elements
    /// the unit processes.
    fn math_whole(
        self: &Arc<Self>,
        what: Cow<'static, str>,
        pe: PeCoord,
        input: TensorRef,
        out: TensorRef,
        work: u64,
        f: impl FnOnce(&[u8], &mut [u8]) + 'static,
    ) -> Result<(), HwError> {
        self.math_command::<1, NoElementwise<1>>(
            what,
            pe,
            [input],
            None,
            (Some(out.clone()), out.ready.clone()),
            (ComputeUnit::Math, work),
            MathData::Whole(Box::new(move |x: &[&[u8]], o: &mut [u8]| f(x[0], o))),
        )
    }

    /// Issue a command on `pe`'s `unit`: it takes its turn on the unit's
    /// in-order queue, waits for `after` (an earlier stage of the same
    /// command) and its inputs, keeps the unit busy for
    /// `overhead + work / rate`, then writes `out` as `data` says and sets
    /// `done`. `out` is `None` for a stage that only takes time.
    #[allow(clippy::too_many_arguments)]
    fn math_command<const N: usize, F: FnMut([&[u8]; N], &mut [u8]) + 'static>(
        self: &Arc<Self>,
        what: Cow<'static, str>,
        pe: PeCoord,
        inputs: [TensorRef; N],
        after: Option<Event>,
        (out, done): (Option<TensorRef>, Event),
        (unit, work): (ComputeUnit, u64),
        data: MathData<F>,
    ) -> Result<(), HwError> {
        let (rate, overhead, unit_name) = match unit {
            ComputeUnit::Math => (self.timing.math_rate, self.timing.math_overhead, "MATH"),
            ComputeUnit::Gemm(rate) => (rate, self.timing.gemm_overhead, "GEMM"),
        };
        let busy = rate
            .duration_ps(work)
            .and_then(|d| crate::units::add(d, overhead))
            .map_err(|source| HwError::TimeOverflow {
                what: format!("{what} of {work} units of work"),
                source,
            })?;
        let st = self.pe(pe);
        let engine_q = match unit {
            ComputeUnit::Math => st.math.clone(),
            ComputeUnit::Gemm(_) => st.gemm.clone(),
        };
        let ticket = engine_q.take();
        self.track(st, &done);
        let m = self.clone();
        engine::spawn_detached(async move {
            engine_q.turn(ticket).await;
            if let Some(e) = &after {
                e.wait().await;
            }
            for t in &inputs {
                t.ready.wait().await;
            }
            let start = engine::now();
            let end = match crate::units::add(start, busy) {
                Ok(t) => t,
                Err(source) => {
                    let what = format!("{what} issued at {start} ps");
                    return m.set_fault(pe, unit_name, HwError::TimeOverflow { what, source });
                }
            };
            engine::sleep_until(end).await;
            if let Some(tr) = &m.trace {
                tr.record(
                    match unit {
                        ComputeUnit::Math => Track::Math(pe),
                        ComputeUnit::Gemm(_) => Track::Gemm(pe),
                    },
                    format!("{what} x{work}"),
                    start,
                    engine::now(),
                );
            }
            if let Some(out) = &out {
                let written = {
                    let mut mem = m.memory.lock().unwrap();
                    match data {
                        MathData::Elementwise(f) => mem.apply(
                            inputs.each_ref().map(|t| (t.space, t.offset)),
                            (out.space, out.offset),
                            out.nbytes(),
                            out.dtype.itemsize(),
                            f,
                        ),
                        MathData::Whole(f) => {
                            let data: Vec<Vec<u8>> = inputs
                                .iter()
                                .map(|t| mem.read(t.space, t.offset, t.nbytes()))
                                .collect();
                            let views: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
                            let mut o = vec![0u8; out.nbytes() as usize];
                            f(&views, &mut o);
                            mem.write(out.space, out.offset, &o)
                        }
                        MathData::TimeOnly => Ok(()),
                    }
                };
                if let Err(e) = written {
                    return m.set_fault(pe, unit_name, e.into());
                }
            }
            match unit {
                ComputeUnit::Math => m.stats.lock().unwrap().math_commands += 1,
                ComputeUnit::Gemm(_) => m.stats.lock().unwrap().gemm_commands += 1,
            }
            engine_q.done();
            drop(inputs);
            done.set();
        });
        Ok(())
    }

    /// `tl.binary`: element-wise `a op b`.
    pub fn binary(
        self: &Arc<Self>,
        pe: PeCoord,
        op: BinOp,
        a: &TensorRef,
        b: &TensorRef,
    ) -> Result<TensorRef, HwError> {
        check_same_operands(op, (&a.shape, a.dtype), (&b.shape, b.dtype))?;
        let out = self.scratch(pe, &a.shape, a.dtype)?;
        let dt = a.dtype;
        self.math(
            Cow::Borrowed(op.name()),
            pe,
            [a.clone(), b.clone()],
            out.clone(),
            move |[x, y], o| dtype::binary_into(op, dt, x, y, o),
        )?;
        Ok(out)
    }

    /// `tl.unary`: `op(a)` element-wise.
    pub fn unary(
        self: &Arc<Self>,
        pe: PeCoord,
        op: UnaryOp,
        a: &TensorRef,
    ) -> Result<TensorRef, HwError> {
        let out = self.scratch(pe, &a.shape, a.dtype)?;
        let dt = a.dtype;
        self.math(
            Cow::Borrowed(op.name()),
            pe,
            [a.clone()],
            out.clone(),
            move |[x], o| math_ops::unary_into(op, dt, x, o),
        )?;
        Ok(out)
    }

    /// `tl.cast`: `a` converted to `dtype` (one element per element).
    pub fn cast(
        self: &Arc<Self>,
        pe: PeCoord,
        a: &TensorRef,
        dtype: Dtype,
    ) -> Result<TensorRef, HwError> {
        let out = self.scratch(pe, &a.shape, dtype)?;
        let from = a.dtype;
        self.math_whole(
            Cow::Owned(format!("cast {}->{}", from.name(), dtype.name())),
            pe,
            a.clone(),
            out.clone(),
            a.numel(),
            move |x, o| math_ops::cast_into(from, dtype, x, o),
        )?;
        Ok(out)
    }

    /// `tl.reduce`: `op` over `axis` of `a` (that axis dropped); the unit
    /// processes every element of `a`.
    pub fn reduce(
        self: &Arc<Self>,
        pe: PeCoord,
        op: ReduceOp,
        a: &TensorRef,
        axis: u32,
    ) -> Result<TensorRef, HwError> {
        let shape =
            math_ops::reduced_shape(&a.shape, axis).map_err(|what| HwError::Mismatch { what })?;
        let out = self.scratch(pe, &shape, a.dtype)?;
        let (dt, in_shape) = (a.dtype, a.shape.to_vec());
        self.math_whole(
            Cow::Owned(format!("reduce {} axis {axis}", op.name())),
            pe,
            a.clone(),
            out.clone(),
            a.numel(),
            move |x, o| math_ops::reduce_into(op, dt, &in_shape, axis, x, o),
        )?;
        Ok(out)
    }

    /// `tl.gemm`: `a [m, k] x b [k, n]` on the matrix unit, rounded once
    /// to `out_dtype`; `overhead + 2·m·n·k / rate(dtype)`.
    pub fn gemm(
        self: &Arc<Self>,
        pe: PeCoord,
        a: &TensorRef,
        b: &TensorRef,
        out_dtype: Dtype,
    ) -> Result<TensorRef, HwError> {
        let (m, n, k) = gemm_ops::gemm_shape(
            (&a.shape, a.dtype),
            (&b.shape, b.dtype),
            self.timing.gemm_max,
        )
        .map_err(|what| HwError::Mismatch { what })?;
        let out = self.scratch(pe, &[m, n], out_dtype)?;
        let dt = a.dtype;
        let rate = self.gemm_rate(dt);
        let flops = 2 * m as u64 * n as u64 * k as u64;
        self.math_command::<2, NoElementwise<2>>(
            Cow::Owned(format!("gemm {m}x{k}x{n} {}", dt.name())),
            pe,
            [a.clone(), b.clone()],
            None,
            (Some(out.clone()), out.ready.clone()),
            (ComputeUnit::Gemm(rate), flops),
            MathData::Whole(Box::new(move |x: &[&[u8]], o: &mut [u8]| {
                gemm_ops::gemm_into(dt, out_dtype, (m, n, k), x[0], x[1], o)
            })),
        )?;
        Ok(out)
    }

    /// One matrix unit's peak operations per second for inputs of `dt`.
    pub fn gemm_peak_per_s(&self, dt: Dtype) -> f64 {
        self.gemm_rate(dt).giga_per_s() * 1e9
    }

    /// The matrix unit's FLOP/s for inputs of `dt`.
    fn gemm_rate(&self, dt: Dtype) -> Rate {
        self.timing.gemm_rates[match dt {
            Dtype::F16 => 0,
            Dtype::Bf16 => 1,
            Dtype::F32 => 2,
            Dtype::I32 => 3,
        }]
    }

    /// `tl.composite`: `a [m, k] x b [k, n]` on the matrix unit followed by
    /// `op`'s epilogue (accumulate into `c`, add the bias row `c`, ReLU) on
    /// the MATH unit as one command: the GEMM stage takes
    /// `overhead + 2·m·n·k / rate(dtype)`, then the epilogue
    /// `math overhead + (epilogue ops)·m·n / math rate`; the result is
    /// computed exactly and rounded once to `out_dtype`. `CompositeOp::Gemm`
    /// is `tl.gemm`.
    pub fn composite(
        self: &Arc<Self>,
        pe: PeCoord,
        op: CompositeOp,
        (a, b, c): (&TensorRef, &TensorRef, Option<&TensorRef>),
        out_dtype: Dtype,
    ) -> Result<TensorRef, HwError> {
        let (m, n, k) = gemm_ops::composite_shape(
            op,
            (&a.shape, a.dtype),
            (&b.shape, b.dtype),
            c.map(|c| &c.shape[..]),
            self.timing.gemm_max,
        )
        .map_err(|what| HwError::Mismatch { what })?;
        if op == CompositeOp::Gemm {
            return self.gemm(pe, a, b, out_dtype);
        }
        let out = self.scratch(pe, &[m, n], out_dtype)?;
        let dt = a.dtype;
        let name = format!("{} {m}x{k}x{n} {}", op.name(), dt.name());
        let gemm_done = Event::new();
        self.math_command::<2, NoElementwise<2>>(
            Cow::Owned(name.clone()),
            pe,
            [a.clone(), b.clone()],
            None,
            (None, gemm_done.clone()),
            (
                ComputeUnit::Gemm(self.gemm_rate(dt)),
                2 * m as u64 * n as u64 * k as u64,
            ),
            MathData::TimeOnly,
        )?;
        let dtypes = (dt, c.map_or(dt, |c| c.dtype), out_dtype);
        let what = Cow::Owned(format!("{name} epilogue"));
        let after = Some(gemm_done);
        let done = (Some(out.clone()), out.ready.clone());
        let work = (ComputeUnit::Math, op.epilogue_ops() * m as u64 * n as u64);
        let epilogue =
            move |x: &[&[u8]], o: &mut [u8]| gemm_ops::composite_into(op, dtypes, (m, n, k), x, o);
        match c {
            Some(c) => self.math_command::<3, NoElementwise<3>>(
                what,
                pe,
                [a.clone(), b.clone(), c.clone()],
                after,
                done,
                work,
                MathData::Whole(Box::new(epilogue)),
            )?,
            None => self.math_command::<2, NoElementwise<2>>(
                what,
                pe,
                [a.clone(), b.clone()],
                after,
                done,
                work,
                MathData::Whole(Box::new(epilogue)),
            )?,
        }
        Ok(out)
    }

    /// `tl.scale`: `a * factor`.
    pub fn scale(
        self: &Arc<Self>,
        pe: PeCoord,
        a: &TensorRef,
        factor: f64,
    ) -> Result<TensorRef, HwError> {
        let out = self.scratch(pe, &a.shape, a.dtype)?;
        let dt = a.dtype;
        self.math(
            Cow::Owned(format!("Scale {factor}")),
            pe,
            [a.clone()],
            out.clone(),
            move |[x], o| dtype::scale_into(dt, x, factor, o),
        )?;
        Ok(out)
    }
}
