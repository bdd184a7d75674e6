//! The collective calls of `torch.distributed`: PyTorch's argument checks
//! (sizes, dtypes, `src` / `dst` in range, a known `op`) as clear errors
//! naming the call, each call turned into one [`Call`] on its input and
//! output buffers for [`Comms::run_collective`], and the list forms of
//! `all_gather` / `reduce_scatter`, which go through a staging buffer
//! with timed local copies, as PyTorch's NCCL backend flattens them.
//! Point-to-point `send` / `recv` are [`super::p2p`]'s.

use super::bindings::bench::kernbench::sim::distributed::DistError;
use super::comms::{runtime_error, Caller, CollectiveTensor, Comms};
use super::fail::DistResult;
use crate::address::Space;
use crate::ccl::collective::{Call, Collective, RedOp, Reduction};
use crate::hw::machine::HostCopy;
use crate::placement::{self, DpPolicy};

/// A `group-call` checked against its group ([`Comms::parse_group_call`]).
pub struct GroupCall {
    /// `Some(true)`: `out_of_place:<collective>`; `Some(false)`:
    /// `in_place:<collective>`; `None`: a torch call.
    form: Option<bool>,
    /// The torch call or the collective.
    pub name: String,
    /// `peer` as a group rank (0 when the call takes none).
    root: u32,
}

impl GroupCall {
    /// A send or a receive (they run on their own streams' order, see
    /// [`super::works`]).
    pub fn is_p2p(&self) -> bool {
        self.form.is_none() && matches!(self.name.as_str(), "send" | "recv")
    }
}

/// `op` as a [`Reduction`] (`premul_sum:<factor>` carries the rank's
/// factor), or the error PyTorch's users expect.
fn red_op(what: &str, op: &str) -> Result<Reduction, DistError> {
    Reduction::parse(op).map_err(|e| DistError::ValueError(format!("{what}: {e}")))
}

/// The collective `name` ("all_reduce", "all-gather", ...) names.
fn collective_named(what: &str, name: &str) -> Result<Collective, DistError> {
    Collective::from_record_name(name).ok_or_else(|| {
        DistError::ValueError(format!(
            "{what}: unknown collective {name:?} (one of {})",
            Collective::names()
        ))
    })
}

/// `src` / `dst` of a rooted collective must name a rank.
fn check_root(what: &str, arg: &str, root: u32, world_size: u32) -> Result<(), DistError> {
    if root >= world_size {
        return Err(DistError::ValueError(format!(
            "{what}: {arg}={root} is not a rank of the process group (world_size {world_size}: ranks 0..{})",
            world_size - 1
        )));
    }
    Ok(())
}

/// Output and input of one call: same dtype, same device.
fn check_pair(what: &str, out: &CollectiveTensor, inp: &CollectiveTensor) -> Result<(), DistError> {
    if out.dtype != inp.dtype {
        return Err(DistError::ValueError(format!(
            "{what}: the output tensor is {} but the input is {}: they must have the same dtype",
            out.dtype.name(),
            inp.dtype.name()
        )));
    }
    if out.sip != inp.sip {
        return Err(DistError::ValueError(format!(
            "{what}: the output tensor is on device {} but the input on device {}",
            out.sip, inp.sip
        )));
    }
    if out.shards != inp.shards {
        return Err(DistError::ValueError(format!(
            "{what}: the output tensor has {} shard(s), the input {}: place them alike",
            out.shards, inp.shards
        )));
    }
    Ok(())
}

/// `big` must hold exactly `world_size` times `small`'s elements.
fn check_times(
    what: &str,
    (big_name, big): (&str, &CollectiveTensor),
    (small_name, small): (&str, &CollectiveTensor),
    world_size: u32,
) -> Result<(), DistError> {
    if big.numel() != small.numel() * world_size as u64 {
        return Err(DistError::ValueError(format!(
            "{what}: the {big_name} tensor must have world_size ({world_size}) x the {small_name}'s \
             elements ({} x {world_size} = {}), it has {}",
            small.numel(),
            small.numel() * world_size as u64,
            big.numel()
        )));
    }
    Ok(())
}

impl Comms {
    /// The call of `c` on `t` by `who`'s group.
    fn call(
        who: &Caller,
        c: Collective,
        t: &CollectiveTensor,
        (op, root): (RedOp, u32),
        block: u64,
    ) -> Call {
        Call {
            collective: c,
            dtype: t.dtype,
            op,
            root,
            block,
            world_size: who.group.world_size,
        }
    }

    /// `all_reduce(tensor, op)` (ADR-0047 D5): in place.
    pub async fn all_reduce(&self, who: &Caller, t: CollectiveTensor, op: &str) -> DistResult {
        self.whole_buffer(who, Collective::AllReduce, (t.clone(), t), op, 0)
            .await
    }

    /// `broadcast(tensor, src)`: in place.
    pub async fn broadcast(&self, who: &Caller, t: CollectiveTensor, src: u32) -> DistResult {
        self.whole_buffer(who, Collective::Broadcast, (t.clone(), t), "sum", src)
            .await
    }

    /// `reduce(tensor, dst, op)`: in place, the result on `dst`.
    pub async fn reduce(
        &self,
        who: &Caller,
        t: CollectiveTensor,
        dst: u32,
        op: &str,
    ) -> DistResult {
        self.whole_buffer(who, Collective::Reduce, (t.clone(), t), op, dst)
            .await
    }

    /// All-reduce, broadcast or reduce `c` of `inp` into `out` (the same
    /// tensor in place, PyTorch's calls; two of one size out of place):
    /// PyTorch's checks of `op` (all-reduce, reduce) and the root
    /// (broadcast's `src`, reduce's `dst`), then the call.
    async fn whole_buffer(
        &self,
        who: &Caller,
        c: Collective,
        (inp, out): (CollectiveTensor, CollectiveTensor),
        op: &str,
        root: u32,
    ) -> DistResult {
        let apart = inp.t_ptr != out.t_ptr;
        let what = if apart {
            format!("{c} (out of place)")
        } else {
            c.to_string()
        };
        let checked = || -> Result<(Call, Option<f64>), DistError> {
            let ws = who.group.world_size;
            if apart {
                check_pair(&what, &out, &inp)?;
                if out.numel() != inp.numel() || out.shard_numel != inp.shard_numel {
                    return Err(DistError::ValueError(format!(
                        "{what}: the output has {} elements ({} in its first shard), the input {} \
                         ({}): they must be equal, shard by shard",
                        out.numel(),
                        out.shard_numel,
                        inp.numel(),
                        inp.shard_numel
                    )));
                }
            }
            let (red, root) = match c {
                Collective::Broadcast => {
                    check_root(&what, "src", root, ws)?;
                    (Reduction::plain(RedOp::Sum), root)
                }
                Collective::Reduce => {
                    check_root(&what, "dst", root, ws)?;
                    (red_op(&what, op)?, root)
                }
                _ => (red_op(&what, op)?, 0),
            };
            Ok((
                Self::call(who, c, &inp, (red.op, root), inp.shard_numel),
                red.factor,
            ))
        };
        match checked() {
            Ok((call, factor)) => self.run_collective(who, (call, factor), inp, out).await,
            Err(e) => Err(e.into()),
        }
    }

    /// `all_gather_into_tensor(output, input)`.
    pub async fn all_gather_into_tensor(
        &self,
        who: &Caller,
        out: CollectiveTensor,
        inp: CollectiveTensor,
    ) -> DistResult {
        let what = "all_gather_into_tensor";
        let checked = || -> Result<Call, DistError> {
            let ws = who.group.world_size;
            check_pair(what, &out, &inp)?;
            check_times(what, ("output", &out), ("input", &inp), ws)?;
            Ok(Self::call(
                who,
                Collective::AllGather,
                &inp,
                (RedOp::Sum, 0),
                inp.shard_numel,
            ))
        };
        match checked() {
            Ok(call) => self.run_collective(who, (call, None), inp, out).await,
            Err(e) => Err(e.into()),
        }
    }

    /// `reduce_scatter_tensor(output, input, op)`.
    pub async fn reduce_scatter_tensor(
        &self,
        who: &Caller,
        out: CollectiveTensor,
        inp: CollectiveTensor,
        op: &str,
    ) -> DistResult {
        let what = "reduce_scatter_tensor";
        let checked = || -> Result<(Call, Option<f64>), DistError> {
            let ws = who.group.world_size;
            let red = red_op(what, op)?;
            check_pair(what, &out, &inp)?;
            check_times(what, ("input", &inp), ("output", &out), ws)?;
            let call = Self::call(
                who,
                Collective::ReduceScatter,
                &out,
                (red.op, 0),
                out.shard_numel,
            );
            Ok((call, red.factor))
        };
        match checked() {
            Ok((call, factor)) => self.run_collective(who, (call, factor), inp, out).await,
            Err(e) => Err(e.into()),
        }
    }

    /// `all_to_all_single(output, input)` with equal splits.
    pub async fn all_to_all_single(
        &self,
        who: &Caller,
        out: CollectiveTensor,
        inp: CollectiveTensor,
    ) -> DistResult {
        let what = "all_to_all_single";
        let checked = || -> Result<Call, DistError> {
            let ws = who.group.world_size;
            check_pair(what, &out, &inp)?;
            if out.numel() != inp.numel() {
                return Err(DistError::ValueError(format!(
                    "{what}: the output has {} elements, the input {}: with equal splits they must be equal",
                    out.numel(),
                    inp.numel()
                )));
            }
            if !inp.shard_numel.is_multiple_of(ws as u64) {
                return Err(DistError::ValueError(format!(
                    "{what}: {} elements do not split equally over world_size {ws} \
                     (only equal splits are supported)",
                    inp.shard_numel
                )));
            }
            Ok(Self::call(
                who,
                Collective::AllToAll,
                &inp,
                (RedOp::Sum, 0),
                inp.shard_numel / ws as u64,
            ))
        };
        match checked() {
            Ok(call) => self.run_collective(who, (call, None), inp, out).await,
            Err(e) => Err(e.into()),
        }
    }

    /// `distributed.collective-out-of-place`: nccl-tests' out-of-place
    /// form of `name`. All-gather, reduce-scatter and all-to-all are their
    /// torch calls; all-reduce, broadcast and reduce take an output of the
    /// input's size and need an algorithm that runs them out of place
    /// ([`Comms::run_collective`] refuses the others).
    pub async fn collective_out_of_place(
        &self,
        who: &Caller,
        name: &str,
        out: CollectiveTensor,
        inp: CollectiveTensor,
        op: &str,
        root: u32,
    ) -> DistResult {
        let c = match collective_named("collective_out_of_place", name) {
            Ok(c) => c,
            Err(e) => return Err(e.into()),
        };
        match c {
            Collective::AllGather => self.all_gather_into_tensor(who, out, inp).await,
            Collective::ReduceScatter => self.reduce_scatter_tensor(who, out, inp, op).await,
            Collective::AllToAll => self.all_to_all_single(who, out, inp).await,
            Collective::AllReduce | Collective::Broadcast | Collective::Reduce => {
                self.whole_buffer(who, c, (inp, out), op, root).await
            }
        }
    }

    /// `distributed.collective-in-place`: nccl-tests' in-place form of
    /// `name` on the one buffer `t`. All-reduce, broadcast and reduce are
    /// their torch calls; all-to-all sends from and receives into `t`;
    /// all-gather's input is the caller's block of `t` (the output),
    /// reduce-scatter's output the caller's block of `t` (the input), as
    /// nccl-tests places them.
    pub async fn collective_in_place(
        &self,
        who: &Caller,
        name: &str,
        t: CollectiveTensor,
        op: &str,
        root: u32,
    ) -> DistResult {
        let c = match collective_named("collective_in_place", name) {
            Ok(c) => c,
            Err(e) => return Err(e.into()),
        };
        match c {
            Collective::AllReduce => self.all_reduce(who, t, op).await,
            Collective::Broadcast => self.broadcast(who, t, root).await,
            Collective::Reduce => self.reduce(who, t, root, op).await,
            Collective::AllToAll => self.all_to_all_single(who, t.clone(), t).await,
            Collective::AllGather | Collective::ReduceScatter => {
                let what = format!("{c} (in place)");
                let block = || -> Result<CollectiveTensor, DistError> {
                    let ws = who.group.world_size;
                    let r = match who.rank {
                        Some(r) => r,
                        None if ws == 1 => 0,
                        None => {
                            return Err(runtime_error(format!(
                                "{what} called by the single driver with world_size {ws}: each \
                                 rank's block lies at its own place in the buffer; run one worker \
                                 per rank with torch.multiprocessing.spawn"
                            )))
                        }
                    };
                    if t.shards != 1 {
                        return Err(DistError::ValueError(format!(
                            "{what}: the tensor has {} shards; the in-place form takes a \
                             single-shard tensor",
                            t.shards
                        )));
                    }
                    if !t.numel().is_multiple_of(ws as u64) {
                        return Err(DistError::ValueError(format!(
                            "{what}: {} elements do not split into world_size ({ws}) equal blocks",
                            t.numel()
                        )));
                    }
                    Ok(t.block(r, t.numel() / ws as u64))
                };
                let part = match block() {
                    Ok(p) => p,
                    Err(e) => return Err(e.into()),
                };
                if c == Collective::AllGather {
                    self.all_gather_into_tensor(who, t, part).await
                } else {
                    self.reduce_scatter_tensor(who, part, t, op).await
                }
            }
        }
    }

    /// `distributed.group-call`: the torch call `call` on `who`'s group,
    /// its tensors as the WIT's table lays them out, `peer` (src / dst /
    /// root) a world rank of the group.
    pub async fn group_call(
        &self,
        who: &Caller,
        call: &str,
        tensors: Vec<CollectiveTensor>,
        op: &str,
        peer: u32,
    ) -> DistResult {
        let parsed = self.parse_group_call(who, call, tensors.len(), (op, peer))?;
        self.run_group_call(who, &parsed, tensors, op).await
    }

    /// What a `group-call` names, checked against the group: refused
    /// here (an unknown call, the wrong tensor count, an unknown
    /// reduction, a peer outside the group) before anything runs, so an
    /// asynchronous call raises these at once.
    pub fn parse_group_call(
        &self,
        who: &Caller,
        call: &str,
        n_tensors: usize,
        (op, peer): (&str, u32),
    ) -> Result<GroupCall, DistError> {
        let (name, form) = match call.split_once(':') {
            Some((form @ ("out_of_place" | "in_place"), name)) => (name, Some(form)),
            _ => (call, None),
        };
        // How many tensors the call takes (None: at least one), and whether
        // it reads `peer`.
        let (count, rooted) = match (form, name) {
            (Some("out_of_place"), _) => (Some(2), true),
            (Some(_), _) => (Some(1), true),
            (None, "all_reduce") => (Some(1), false),
            (None, "broadcast" | "reduce" | "send" | "recv") => (Some(1), true),
            (None, "all_gather_into_tensor" | "reduce_scatter_tensor" | "all_to_all_single") => {
                (Some(2), false)
            }
            (None, "all_gather" | "reduce_scatter") => (None, false),
            (None, "barrier") => (Some(0), false),
            (None, other) => {
                return Err(DistError::ValueError(format!(
                    "group_call: unknown call {other:?} (all_reduce, broadcast, reduce, \
                     all_gather_into_tensor, all_gather, reduce_scatter_tensor, reduce_scatter, \
                     all_to_all_single, send, recv, barrier, out_of_place:<collective>, \
                     in_place:<collective>)"
                )))
            }
        };
        let enough = match count {
            Some(n) => n_tensors == n,
            None => n_tensors >= 2,
        };
        if !enough {
            let wants = count.map_or("an input and a list".to_string(), |n| format!("{n}"));
            return Err(DistError::ValueError(format!(
                "group_call {call}: takes {wants} tensor(s), got {n_tensors}"
            )));
        }
        let reduces = match (form, name) {
            (Some(_), c) => collective_named(call, c)?.reduces(),
            (None, n) => matches!(
                n,
                "all_reduce" | "reduce" | "reduce_scatter_tensor" | "reduce_scatter"
            ),
        };
        if reduces {
            red_op(call, op)?;
        }
        let root = if rooted {
            match who.group.ranks.group_rank(peer) {
                Some(g) => g,
                None => {
                    let members: Vec<u32> = (0..who.group.world_size)
                        .map(|g| who.group.ranks.world_rank(g))
                        .collect();
                    return Err(DistError::ValueError(format!(
                        "{call}: rank {peer} is not part of the process group (its ranks: \
                         {members:?}); src and dst are world ranks, as in PyTorch"
                    )));
                }
            }
        } else {
            0
        };
        Ok(GroupCall {
            form: form.map(|f| f == "out_of_place"),
            name: name.to_string(),
            root,
        })
    }

    /// Run a parsed `group-call` (see [`Self::group_call`]).
    pub async fn run_group_call(
        &self,
        who: &Caller,
        parsed: &GroupCall,
        mut tensors: Vec<CollectiveTensor>,
        op: &str,
    ) -> DistResult {
        let (name, root) = (parsed.name.as_str(), parsed.root);
        let form = parsed
            .form
            .map(|out| if out { "out_of_place" } else { "in_place" });
        let mut take = || tensors.remove(0);
        match (form, name) {
            (Some("out_of_place"), c) => {
                let (out, inp) = (take(), take());
                self.collective_out_of_place(who, c, out, inp, op, root)
                    .await
            }
            (Some(_), c) => self.collective_in_place(who, c, take(), op, root).await,
            (None, "all_reduce") => self.all_reduce(who, take(), op).await,
            (None, "broadcast") => self.broadcast(who, take(), root).await,
            (None, "reduce") => self.reduce(who, take(), root, op).await,
            (None, "send") => self.send(who, take(), root).await,
            (None, "recv") => self.recv(who, take(), root).await,
            (None, "all_gather_into_tensor") => {
                let (out, inp) = (take(), take());
                self.all_gather_into_tensor(who, out, inp).await
            }
            (None, "reduce_scatter_tensor") => {
                let (out, inp) = (take(), take());
                self.reduce_scatter_tensor(who, out, inp, op).await
            }
            (None, "all_to_all_single") => {
                let (out, inp) = (take(), take());
                self.all_to_all_single(who, out, inp).await
            }
            (None, "all_gather") => {
                let inp = take();
                self.all_gather_list(who, tensors, inp).await
            }
            (None, "reduce_scatter") => {
                let out = take();
                self.reduce_scatter_list(who, out, tensors, op).await
            }
            (None, "barrier") => Ok(()),
            _ => unreachable!("every call was matched above"),
        }
    }

    /// `all_gather(tensor_list, tensor)`: into a staging buffer, then one
    /// timed copy per list entry.
    pub async fn all_gather_list(
        &self,
        who: &Caller,
        outs: Vec<CollectiveTensor>,
        inp: CollectiveTensor,
    ) -> DistResult {
        let what = "all_gather";
        let staging = match self.list_staging(what, who, &outs, &inp) {
            Ok(s) => s,
            Err(e) => return Err(e.into()),
        };
        let call = Self::call(
            who,
            Collective::AllGather,
            &inp,
            (RedOp::Sum, 0),
            inp.numel(),
        );
        self.run_collective(who, (call, None), inp.clone(), staging.view.clone())
            .await?;
        let copies = outs
            .iter()
            .enumerate()
            .map(|(i, o)| (staging.block(i, inp.nbytes), o.blocks[0]))
            .collect();
        self.staging_copies(what, who, copies).await
    }

    /// `reduce_scatter(output, input_list, op)`: one timed copy per list
    /// entry into a staging buffer, then `reduce_scatter_tensor`.
    pub async fn reduce_scatter_list(
        &self,
        who: &Caller,
        out: CollectiveTensor,
        inps: Vec<CollectiveTensor>,
        op: &str,
    ) -> DistResult {
        let what = "reduce_scatter";
        let checked = || -> Result<(Reduction, Staging), DistError> {
            let red = red_op(what, op)?;
            Ok((red, self.list_staging(what, who, &inps, &out)?))
        };
        let (red, staging) = match checked() {
            Ok(x) => x,
            Err(e) => return Err(e.into()),
        };
        let copies = inps
            .iter()
            .enumerate()
            .map(|(i, t)| (t.blocks[0], staging.block(i, out.nbytes)))
            .collect();
        self.staging_copies(what, who, copies).await?;
        let call = Self::call(
            who,
            Collective::ReduceScatter,
            &out,
            (red.op, 0),
            out.numel(),
        );
        self.run_collective(who, (call, red.factor), staging.view.clone(), out)
            .await
    }

    /// Check a list form's `list` (world size entries, each like `one`,
    /// single-shard) and allocate its staging buffer on `one`'s device.
    fn list_staging(
        &self,
        what: &str,
        who: &Caller,
        list: &[CollectiveTensor],
        one: &CollectiveTensor,
    ) -> Result<Staging, DistError> {
        let ws = who.group.world_size;
        if list.len() != ws as usize {
            return Err(DistError::ValueError(format!(
                "{what}: the tensor list has {} entries, it needs world_size ({ws})",
                list.len()
            )));
        }
        for (i, t) in list.iter().enumerate() {
            check_pair(&format!("{what} (list entry {i})"), t, one)?;
            if t.numel() != one.numel() {
                return Err(DistError::ValueError(format!(
                    "{what}: list entry {i} has {} elements, the tensor {}: they must be equal",
                    t.numel(),
                    one.numel()
                )));
            }
            if t.shards != 1 {
                return Err(DistError::ValueError(format!(
                    "{what}: list entry {i} has {} shards; the list forms take single-shard tensors \
                     (use the tensor forms for sharded ones)",
                    t.shards
                )));
            }
        }
        let n = one.numel() * ws as u64;
        let spec = &self.machine.topo.spec;
        let shape = [u32::try_from(n).map_err(|_| {
            DistError::ValueError(format!("{what}: {n} elements are too many for one tensor"))
        })?];
        let specs = placement::resolve(
            &DpPolicy::SINGLE,
            &shape,
            one.dtype.itemsize(),
            one.sip,
            spec,
        )
        .map_err(|e| runtime_error(format!("{what}: staging buffer: {e}")))?;
        let placed = self
            .machine
            .place_tensor(specs, one.dtype, &format!("{what} staging"))
            .map_err(|e| runtime_error(format!("{what}: staging buffer: {e}")))?;
        let view = CollectiveTensor::of_placed(&placed, one.dtype, n);
        Ok(Staging {
            _placed: placed,
            view,
        })
    }

    /// The staging copies of a list form, issued by the calling rank's
    /// first PE.
    async fn staging_copies(
        &self,
        what: &str,
        who: &Caller,
        copies: Vec<(Block, Block)>,
    ) -> DistResult {
        let pe = who.group.ranks.first_pe(who.rank.unwrap_or(0));
        let copies = copies
            .into_iter()
            .map(|((ss, so, n), (ds, doff, _))| HostCopy {
                src: (ss, so),
                dst: (ds, doff),
                nbytes: n,
            })
            .collect();
        let comm = who.group.comm;
        if let Err(e) = self.machine.host_copies((pe, comm), copies).await {
            return Err(wasmtime::Error::msg(format!("{what}: staging copy: {e}")).into());
        }
        if self.machine.oplog().is_some() {
            self.machine.note_host_sync(comm, &[pe]);
        }
        Ok(())
    }
}

/// One shard's memory: space, offset, bytes.
pub type Block = (Space, u64, u64);

/// The staging buffer of a list form, freed when dropped.
struct Staging {
    _placed: crate::hw::vmap::PlacedTensor,
    view: CollectiveTensor,
}

impl Staging {
    /// Bytes `i * len .. (i + 1) * len` of the buffer.
    fn block(&self, i: usize, len: u64) -> Block {
        let (space, offset, _) = self.view.blocks[0];
        (space, offset + i as u64 * len, len)
    }
}
