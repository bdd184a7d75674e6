//! `torch.ahbm`: the current device, its properties and the simulated clock.

use crate::runtime::bench::capabilities::DeviceCtx;
use crate::runtime::bench::*;
use crate::runtime::bindings::bench::kernbench::sim::ahbm;

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
}
