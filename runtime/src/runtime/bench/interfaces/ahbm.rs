//! `torch.ahbm`: the current device, its properties and the simulated clock.

use crate::hw::compute_op::ComputeOp;
use crate::hw::machine::CommId;
use crate::runtime::bench::capabilities::DeviceCtx;
use crate::runtime::bench::*;
use crate::runtime::bindings::bench::kernbench::sim::ahbm;
use crate::topology::PeCoord;

impl ahbm::Host for DeviceCtx<'_> {
    async fn set_device(&mut self, device: u32) -> wasmtime::Result<Result<(), String>> {
        Ok(self.set_checked(device))
    }
    async fn current_device(&mut self) -> wasmtime::Result<Option<u32>> {
        Ok(*self.device)
    }
    async fn device_count(&mut self) -> wasmtime::Result<u32> {
        Ok(self.machine.topo.spec.n_sips())
    }
    async fn get_device_properties(
        &mut self,
        device: u32,
    ) -> wasmtime::Result<Result<ahbm::DeviceProperties, String>> {
        let spec = &self.machine.topo.spec;
        if device >= spec.n_sips() {
            let e = format!(
                "invalid device {device}: this machine has {} SIPs (0..{})",
                spec.n_sips(),
                spec.n_sips()
            );
            return to_wit(Err(e.into()));
        }
        Ok(Ok(ahbm::DeviceProperties {
            name: format!("sip{device}"),
            cube_w: spec.sip.cube_mesh.w,
            cube_h: spec.sip.cube_mesh.h,
            pes_per_cube: spec.pes_per_cube(),
            hbm_bytes_per_cube: spec.hbm_stack_bytes() * spec.cube.hbm.stacks as u64,
        }))
    }
    async fn now_ps(&mut self) -> wasmtime::Result<u64> {
        Ok(crate::engine::now())
    }
    async fn gemm(
        &mut self,
        m: u32,
        n: u32,
        k: u32,
        dtype: ahbm::Dtype,
    ) -> wasmtime::Result<Result<u64, String>> {
        let dt = crate::runtime::kernel::dtype_in(dtype);
        let op = ComputeOp::Charge {
            mnk: Some((m, n, k)),
            dtype: dt,
        };
        let what = format!("torch.ahbm.gemm({m}, {n}, {k}, {})", dt.name());
        let r = self
            .charge(&what, op, |machine, sip| {
                machine.roofline_gemm(sip, (m, n, k), dt)
            })
            .await;
        Ok(r)
    }
    async fn busy(&mut self, ns: u64) -> wasmtime::Result<Result<u64, String>> {
        let op = ComputeOp::Charge {
            mnk: None,
            dtype: Dtype::Bf16,
        };
        let what = format!("torch.ahbm.busy({ns})");
        let r = self
            .charge(&what, op, |_, _| {
                ns.checked_mul(1000)
                    .ok_or(crate::error::HwError::TimeOverflow {
                        what: format!("{ns} ns"),
                        source: crate::units::TimeOverflow,
                    })
            })
            .await;
        Ok(r)
    }
}

impl DeviceCtx<'_> {
    /// Charge `op` for the time `time` gives (of the machine and the
    /// current device's SIP) to every matrix unit of the device, after
    /// the rank's compute stream; the picoseconds it took.
    async fn charge(
        &mut self,
        what: &str,
        op: ComputeOp,
        time: impl FnOnce(&Machine, u32) -> Result<crate::units::Ps, crate::error::HwError>,
    ) -> Result<u64, String> {
        let sip = self.device.ok_or_else(|| {
            format!("{what}: no current device: call torch.ahbm.set_device first")
        })?;
        let machine = self.machine.clone();
        if machine.partitions() > 1 {
            let why = format!("{what} overlaps compute with the rank's other work");
            machine.give_up_split(why.clone());
            return Err(format!("split run given up: {why}"));
        }
        let busy = time(&machine, sip).map_err(|e| format!("{what}: {e}"))?;
        if let Some(e) = self.compute.pending() {
            e.wait().await;
        }
        let start = crate::engine::now();
        let spec = &machine.topo.spec;
        let mut ends = Vec::new();
        let pes: Vec<PeCoord> = (0..spec.cubes_per_sip())
            .flat_map(|cube| (0..spec.pes_per_cube()).map(move |pe| PeCoord { sip, cube, pe }))
            .collect();
        for &pe in &pes {
            let at = (pe, CommId::LAUNCH);
            ends.push(
                machine
                    .charge_gemm_unit(at, busy, op.clone())
                    .map_err(|e| format!("{what}: {e}"))?,
            );
        }
        for e in ends {
            e.wait().await;
        }
        for &pe in &pes {
            machine.take_outstanding((pe, CommId::LAUNCH));
        }
        let end = crate::engine::now();
        let rank = self.rank.unwrap_or(sip);
        self.timelines.record(
            rank,
            crate::runtime::timeline::Activity::Compute,
            (start, end),
        );
        if let Some(tr) = &machine.trace {
            tr.record(
                crate::hw::trace::Track::Rank(rank, CommId::LAUNCH),
                what.to_string(),
                start,
                end,
            );
        }
        Ok(end - start)
    }
}
