//! `torch.accelerator`: PyTorch's device-agnostic names for `torch.ahbm`'s device.

use crate::runtime::bench::capabilities::DeviceCtx;
use crate::runtime::bindings::bench::kernbench::sim::accelerator;

impl accelerator::Host for DeviceCtx<'_> {
    async fn set_device_index(&mut self, device: u32) -> wasmtime::Result<Result<(), String>> {
        Ok(self.set_checked(device))
    }
    async fn current_device_index(&mut self) -> wasmtime::Result<Option<u32>> {
        Ok(*self.device)
    }
}
