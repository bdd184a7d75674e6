//! `torch.distributed`: the process groups, every collective and send / recv, each handed to the run's [`crate::runtime::comms::Comms`].

use crate::runtime::bench::capabilities::DistCtx;
use crate::runtime::bench::*;
use crate::runtime::bindings::bench::kernbench::sim::distributed;
use crate::runtime::works::{Work, WorkState};

impl distributed::Host for DistCtx<'_> {
    fn convert_dist_error(&mut self, err: DistFail) -> wasmtime::Result<DistError> {
        err.into_wit()
    }
    async fn init_process_group(
        &mut self,
        backend: String,
        _world_size: Option<u32>,
        _rank: Option<u32>,
        options: Option<distributed::PgOptions>,
    ) -> DistResult {
        // D2: world_size / rank arguments are accepted and ignored.
        let s = self.comms.clone();
        let wanted = options.and_then(|o| o.algorithm);
        Ok(s.init_process_group(&backend, wanted.as_deref()).await?)
    }
    async fn is_initialized(&mut self) -> wasmtime::Result<bool> {
        Ok(self.comms.process_group().is_ok())
    }
    async fn get_rank(&mut self) -> DistResult<u32> {
        self.comms.process_group()?;
        Ok(self.rank.unwrap_or(0))
    }
    async fn get_world_size(&mut self) -> DistResult<u32> {
        Ok(self.comms.process_group()?.world_size)
    }
    async fn get_backend(&mut self) -> DistResult<String> {
        self.comms.process_group()?;
        Ok("ahbm".to_string())
    }
    async fn all_reduce(&mut self, t: Resource<BenchTensor>, op: String) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.all_reduce(&who, tensor, &op).await
    }
    async fn broadcast(&mut self, t: Resource<BenchTensor>, src: u32) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.broadcast(&who, tensor, src).await
    }
    async fn reduce(&mut self, t: Resource<BenchTensor>, dst: u32, op: String) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.reduce(&who, tensor, dst, &op).await
    }
    async fn all_gather_into_tensor(
        &mut self,
        output: Resource<BenchTensor>,
        input: Resource<BenchTensor>,
    ) -> DistResult {
        let (o, i) = (self.view(&output)?, self.view(&input)?);
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.all_gather_into_tensor(&who, o, i).await
    }
    async fn all_gather(
        &mut self,
        outputs: Vec<Resource<BenchTensor>>,
        input: Resource<BenchTensor>,
    ) -> DistResult {
        let (outs, i) = (self.views(&outputs)?, self.view(&input)?);
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.all_gather_list(&who, outs, i).await
    }
    async fn reduce_scatter_tensor(
        &mut self,
        output: Resource<BenchTensor>,
        input: Resource<BenchTensor>,
        op: String,
    ) -> DistResult {
        let (o, i) = (self.view(&output)?, self.view(&input)?);
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.reduce_scatter_tensor(&who, o, i, &op).await
    }
    async fn reduce_scatter(
        &mut self,
        output: Resource<BenchTensor>,
        inputs: Vec<Resource<BenchTensor>>,
        op: String,
    ) -> DistResult {
        let (o, ins) = (self.view(&output)?, self.views(&inputs)?);
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.reduce_scatter_list(&who, o, ins, &op).await
    }
    async fn all_to_all_single(
        &mut self,
        output: Resource<BenchTensor>,
        input: Resource<BenchTensor>,
    ) -> DistResult {
        let (o, i) = (self.view(&output)?, self.view(&input)?);
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.all_to_all_single(&who, o, i).await
    }
    async fn send(&mut self, t: Resource<BenchTensor>, dst: u32) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.send(&who, tensor, dst).await
    }
    async fn recv(&mut self, t: Resource<BenchTensor>, src: u32) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.recv(&who, tensor, src).await
    }
    async fn barrier(&mut self) -> DistResult {
        // D6: a no-op once initialised (all ranks share one simulator),
        // after the rank's asynchronous calls on the default group (NCCL's
        // barrier is a collective on the group's stream).
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        Ok(())
    }
    async fn shards_wanted(&mut self, collective: String) -> DistResult<Option<u32>> {
        let s = self.comms.clone();
        Ok(s.shards_wanted(&collective).await?)
    }
    async fn collective_out_of_place(
        &mut self,
        collective: String,
        output: Resource<BenchTensor>,
        input: Resource<BenchTensor>,
        op: String,
        root: u32,
    ) -> DistResult {
        let (o, i) = (self.view(&output)?, self.view(&input)?);
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.collective_out_of_place(&who, &collective, o, i, &op, root)
            .await
    }
    async fn collective_in_place(
        &mut self,
        collective: String,
        t: Resource<BenchTensor>,
        op: String,
        root: u32,
    ) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.comms.clone();
        let who = s.world_caller(self.rank)?;
        s.settle(&who).await;
        s.collective_in_place(&who, &collective, tensor, &op, root)
            .await
    }
    async fn new_group(
        &mut self,
        ranks: Vec<u32>,
        options: Option<distributed::PgOptions>,
    ) -> DistResult<u32> {
        let s = self.comms.clone();
        let wanted = options.and_then(|o| o.algorithm);
        Ok(s.new_group(self.rank, ranks, wanted.as_deref()).await?)
    }
    async fn group_ranks(&mut self, group: u32) -> DistResult<Vec<u32>> {
        let pg = self.comms.group(group)?;
        Ok((0..pg.world_size).map(|g| pg.ranks.world_rank(g)).collect())
    }
    async fn group_call(
        &mut self,
        group: u32,
        call: String,
        tensors: Vec<Resource<BenchTensor>>,
        op: String,
        peer: u32,
    ) -> DistResult {
        let tensors = self.views(&tensors)?;
        let s = self.comms.clone();
        let Some(who) = s.caller(group, self.rank)? else {
            // Not a member: PyTorch returns at once.
            return Ok(());
        };
        s.settle(&who).await;
        s.group_call(&who, &call, tensors, &op, peer).await
    }
    async fn group_call_async(
        &mut self,
        group: u32,
        call: String,
        tensors: Vec<Resource<BenchTensor>>,
        op: String,
        peer: u32,
    ) -> DistResult<Resource<Work>> {
        let (views, keep) = (self.views(&tensors)?, self.keep(&tensors)?);
        let s = self.comms.clone();
        let by = self
            .rank
            .map_or("the driver".to_string(), |r| format!("rank {r}"));
        let what = format!("{call} on group {group} by {by}");
        let state = match s.caller(group, self.rank)? {
            // Not a member: PyTorch's work of a call that did nothing.
            None => WorkState::ended(what),
            Some(who) => {
                let parsed = s.parse_group_call(&who, &call, views.len(), (&op, peer))?;
                let state = WorkState::new(what);
                s.issue_async(who, (parsed, views, op), keep, state.clone())?;
                state
            }
        };
        self.works.push(state.clone());
        Ok(self.table.push(Work(state))?)
    }
}

impl distributed::HostWork for DistCtx<'_> {
    async fn wait(&mut self, w: Resource<Work>) -> DistResult {
        let state = self.table.get(&w)?.0.clone();
        state.wait().await
    }
    async fn is_completed(&mut self, w: Resource<Work>) -> wasmtime::Result<bool> {
        let state = self.table.get(&w)?.0.clone();
        if state.is_completed() {
            return Ok(true);
        }
        crate::engine::sleep(crate::runtime::works::POLL_NS * 1000).await;
        Ok(false)
    }
    async fn drop(&mut self, w: Resource<Work>) -> wasmtime::Result<()> {
        // The call runs on; the instance's list keeps its state.
        self.table.delete(w)?;
        Ok(())
    }
}
