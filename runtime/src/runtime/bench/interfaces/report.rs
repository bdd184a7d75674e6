//! The result reporter: nccl-tests' rows, kernel rows and notes, recorded with the session.

use crate::runtime::bench::capabilities::ReportCtx;
use crate::runtime::bench::*;
use crate::runtime::bindings::bench::kernbench::sim::report;

impl report::Host for ReportCtx<'_> {
    async fn record_result(
        &mut self,
        collective: String,
        row: report::ResultRow,
    ) -> wasmtime::Result<()> {
        let what = (
            collective,
            row.size_bytes,
            row.count,
            dtype_in(row.dtype),
            row.redop,
        );
        let rec = ReportRecord::one_block(what, self.rank, row.time_ps, row.wrong);
        self.session
            .record(rec, self.who)
            .map_err(wasmtime::Error::msg)
    }

    async fn record_perf(
        &mut self,
        collective: String,
        row: report::PerfRow,
    ) -> wasmtime::Result<()> {
        let block = |b: report::PerfBlock| Measured {
            time_ps: b.time_ps,
            wrong: b.wrong,
        };
        let aggregation = match row.aggregation {
            report::TimeAggregation::Rank0 => TimeAggregation::Rank0,
            report::TimeAggregation::Mean => TimeAggregation::Mean,
            report::TimeAggregation::Min => TimeAggregation::Min,
            report::TimeAggregation::Max => TimeAggregation::Max,
        };
        let rec = ReportRecord::new(
            (
                collective,
                row.size_bytes,
                row.count,
                dtype_in(row.dtype),
                row.redop,
            ),
            row.root,
            self.rank,
            row.out_of_place.map(block),
            row.in_place.map(block),
            aggregation,
        );
        self.session
            .record(rec, self.who)
            .map_err(wasmtime::Error::msg)
    }

    async fn note(&mut self, text: String) -> wasmtime::Result<()> {
        self.session
            .note(text, self.who)
            .map_err(wasmtime::Error::msg)
    }

    async fn data_kept(&mut self) -> wasmtime::Result<bool> {
        Ok(self.session.machine.keeps_bytes())
    }

    async fn record_kernel(&mut self, row: report::KernelRow) -> wasmtime::Result<()> {
        let dtype = dtype_in(row.dtype);
        let make = |unit_peak| {
            crate::kernel_report::KernelRow::new(
                (row.name, row.shape, dtype),
                row.pes,
                row.flops,
                row.time_ps,
                (row.checked, row.wrong, row.max_rel_err, row.tolerance),
                unit_peak,
            )
        };
        self.session
            .record_kernel(make, dtype, self.who)
            .map_err(wasmtime::Error::msg)
    }
}
