//! `torch.launch`: a bench runs a kernel component itself (not through a
//! collective) on the PEs its tensor is placed on — one kernel per shard,
//! `t_ptr` the tensor's virtual base — and waits for them all; the
//! simulated time it took is the bench's to read (seed 003 §1: compute
//! kernels a bench launches, like `gemm_single_pe`).

use super::kernel::KernelLaunch;
use super::session::Session;
use crate::engine::{self, Event};
use crate::hw::machine::CommId;
use crate::topology::PeCoord;
use std::sync::{Arc, Mutex};

/// What `launch` needs of a bench tensor.
pub struct LaunchTarget {
    /// The tensor's SIP and virtual base.
    pub sip: u32,
    pub t_ptr: u64,
    /// The (cube, pe) of each shard, in order (duplicates run once).
    pub shard_pes: Vec<(u32, u32)>,
}

/// A launch checked and ready to run ([`Session::prepare_launch`]).
pub struct PreparedLaunch {
    /// Whose compute it is (the driver's: its device's rank).
    rank: u32,
    kernel: String,
    component: super::kernel::AlgorithmComponent,
    pes: Vec<PeCoord>,
    target_sip: u32,
    t_ptr: u64,
}

impl Session {
    /// Run the algorithm-world component `kernel` (a built-in name, a
    /// `--components-dir` name or a `.wasm` path) on every PE holding a
    /// shard of `target`, with `args` followed by (sip, 0, 0, 0) as a
    /// collective's kernels get them; the simulated picoseconds until the
    /// last one finished. `device` is the caller's current device: the
    /// tensor must be on it.
    pub async fn launch(
        &self,
        (rank, device): (Option<u32>, Option<u32>),
        kernel: &str,
        target: LaunchTarget,
        args: Vec<i64>,
    ) -> Result<u64, String> {
        let prepared = self.prepare_launch((rank, device), kernel, target)?;
        self.run_launch(prepared, args).await
    }

    /// What `launch` checks before anything runs (the device, the tensor's
    /// SIP, the kernel component): refused here, so `launch-async` returns
    /// these errors at once.
    pub fn prepare_launch(
        &self,
        (rank, device): (Option<u32>, Option<u32>),
        kernel: &str,
        target: LaunchTarget,
    ) -> Result<PreparedLaunch, String> {
        let dev = device.ok_or_else(|| {
            "torch.launch: no current device: call torch.ahbm.set_device first".to_string()
        })?;
        if dev != target.sip {
            return Err(format!(
                "torch.launch({kernel}): the tensor lives on SIP {} but the current device is {dev} \
                 (launch it after set_device({}), or place the tensor on device {dev})",
                target.sip, target.sip
            ));
        }
        let component = self
            .loader
            .load_algorithm(kernel, None)
            .map_err(|e| format!("torch.launch: {e}"))?;
        let mut pes: Vec<PeCoord> = Vec::new();
        for (cube, pe) in target.shard_pes {
            let p = PeCoord {
                sip: target.sip,
                cube,
                pe,
            };
            if !pes.contains(&p) {
                pes.push(p);
            }
        }
        Ok(PreparedLaunch {
            rank: rank.unwrap_or(dev),
            kernel: kernel.to_string(),
            component,
            pes,
            target_sip: target.sip,
            t_ptr: target.t_ptr,
        })
    }

    /// Run a prepared launch: every kernel to its end; the simulated
    /// picoseconds it took.
    pub async fn run_launch(&self, p: PreparedLaunch, args: Vec<i64>) -> Result<u64, String> {
        let PreparedLaunch {
            rank,
            kernel,
            component,
            pes,
            target_sip,
            t_ptr,
        } = p;
        let kernel = kernel.as_str();
        let started = engine::now();
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut done: Vec<Event> = Vec::new();
        for &pe in &pes {
            let mut a = args.clone();
            a.extend([target_sip as i64, 0, 0, 0]);
            let launch = KernelLaunch {
                pe,
                comm: CommId::LAUNCH,
                t_ptr,
                args: a,
            };
            let source = self.kernels.source(&component, kernel, &launch);
            let (comp, machine, limits) =
                (component.clone(), self.machine.clone(), self.limits.clone());
            let (errs, name) = (errors.clone(), kernel.to_string());
            let h = engine::spawn(async move {
                if let Err(e) = comp
                    .run_kernel(&name, machine, &limits, launch, source)
                    .await
                {
                    errs.lock().unwrap().push(e.to_string());
                }
            });
            done.push(h.finished());
        }
        for d in done {
            d.wait().await;
        }
        self.machine.note_host_sync(CommId::LAUNCH, &pes);
        let span = (started, engine::now());
        self.timelines
            .record(rank, super::timeline::Activity::Compute, span);
        if let Some(tr) = &self.machine.trace {
            let track = crate::hw::trace::Track::Rank(rank, CommId::LAUNCH);
            tr.record(track, format!("launch {kernel}"), span.0, span.1);
        }
        if let Some(e) = errors.lock().unwrap().first() {
            return Err(e.clone());
        }
        Ok(span.1 - span.0)
    }
}
