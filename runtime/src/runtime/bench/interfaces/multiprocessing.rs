//! `torch.multiprocessing`: `spawn`, one bench instance per rank.

use crate::runtime::bench::capabilities::SpawnCtx;
use crate::runtime::bench::*;
use crate::runtime::bindings::bench::kernbench::sim::multiprocessing;

impl multiprocessing::Host for SpawnCtx<'_> {
    async fn spawn(
        &mut self,
        nprocs: u32,
        args: Vec<String>,
    ) -> wasmtime::Result<Result<(), String>> {
        if self.rank.is_some() {
            let e = "multiprocessing.spawn called from inside a spawned worker";
            return to_wit(Err(e.to_string().into()));
        }
        let s = self.session.clone();
        Ok(s.spawn_workers(nprocs, args).await)
    }
}
