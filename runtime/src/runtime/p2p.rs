//! Point-to-point `send` / `recv` between ranks (PyTorch's blocking
//! `dist.send` / `dist.recv`): the posts of each (src, dst) pair are
//! matched in order, and the matched pair moves its bytes with the host's
//! transport — one DMA per shard from the sender's first PE along the
//! routed path ([`crate::hw::Machine::host_copies`]), starting when the
//! later of the two calls is made, as NCCL's P2P transport moves a
//! buffer without an algorithm. Both calls return when the bytes have
//! landed.

use super::bindings::bench::kernbench::sim::distributed::DistError;
use super::fail::DistResult;
use super::session::{runtime_error, CollectiveTensor, Session};
use crate::engine::Event;
use crate::hw::machine::HostCopy;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Send,
    Recv,
}

/// One call waiting for its partner.
struct Post {
    side: Side,
    tensor: CollectiveTensor,
    done: Event,
    outcome: Arc<Mutex<Option<Result<(), String>>>>,
}

/// The unmatched posts of every (src, dst) pair.
#[derive(Default)]
pub struct P2pQueues {
    posts: Mutex<BTreeMap<(u32, u32), VecDeque<Post>>>,
}

impl P2pQueues {
    /// The calls still waiting for a partner, for the deadlock report.
    pub fn waiting_report(&self) -> Vec<String> {
        let posts = self.posts.lock().unwrap();
        posts
            .iter()
            .flat_map(|(&(src, dst), q)| {
                q.iter().map(move |p| match p.side {
                    Side::Send => format!(
                        "rank {src}: send of {} B to rank {dst} waits for rank {dst} to recv from {src}",
                        p.tensor.nbytes
                    ),
                    Side::Recv => format!(
                        "rank {dst}: recv of {} B from rank {src} waits for rank {src} to send to {dst}",
                        p.tensor.nbytes
                    ),
                })
            })
            .collect()
    }
}

impl Session {
    /// `send(tensor, dst)`.
    pub async fn send(&self, rank: Option<u32>, t: CollectiveTensor, dst: u32) -> DistResult {
        self.p2p(rank, t, dst, Side::Send).await
    }

    /// `recv(tensor, src)`.
    pub async fn recv(&self, rank: Option<u32>, t: CollectiveTensor, src: u32) -> DistResult {
        self.p2p(rank, t, src, Side::Recv).await
    }

    async fn p2p(
        &self,
        rank: Option<u32>,
        t: CollectiveTensor,
        peer: u32,
        side: Side,
    ) -> DistResult {
        let (what, arg) = match side {
            Side::Send => ("send", "dst"),
            Side::Recv => ("recv", "src"),
        };
        let pg = match self.process_group() {
            Ok(pg) => pg,
            Err(e) => return Err(e.into()),
        };
        let ws = pg.world_size;
        let me = match rank {
            Some(r) => r,
            None if ws == 1 => 0,
            None => {
                return Err(runtime_error(format!(
                "{what}: the single driver stands for every rank; point-to-point calls need one \
                     worker per rank (torch.multiprocessing.spawn)"
            ))
                .into())
            }
        };
        if peer >= ws {
            return Err(DistError::ValueError(format!(
                "{what}: {arg}={peer} is not a rank of the process group (world_size {ws}: ranks 0..{})",
                ws - 1
            )).into());
        }
        if peer == me {
            return Err(DistError::ValueError(format!(
                "{what}: Invalid {} rank: {arg}={peer} is the rank of the current process",
                if side == Side::Send {
                    "destination"
                } else {
                    "source"
                }
            ))
            .into());
        }
        if pg.ranks.sip(me) != t.sip {
            return Err(DistError::ValueError(format!(
                "{what}: {}",
                pg.ranks.misplaced(me, t.sip)
            ))
            .into());
        }
        let key = match side {
            Side::Send => (me, peer),
            Side::Recv => (peer, me),
        };
        // Either the partner already waits (this later call moves the
        // bytes), or this call waits for it.
        let matched = {
            let mut posts = pg.p2p.posts.lock().unwrap();
            let q = posts.entry(key).or_default();
            if q.front().is_some_and(|p| p.side != side) {
                Ok(q.pop_front().expect("checked above"))
            } else {
                let post = Post {
                    side,
                    tensor: t.clone(),
                    done: Event::new(),
                    outcome: Arc::new(Mutex::new(None)),
                };
                let waiting = (post.done.clone(), post.outcome.clone());
                q.push_back(post);
                Err(waiting)
            }
        };
        let partner = match matched {
            Ok(p) => p,
            Err((done, outcome)) => {
                done.wait().await;
                let outcome = outcome.lock().unwrap().take();
                return match outcome {
                    Some(Ok(())) => Ok(()),
                    Some(Err(e)) => Err(DistError::ValueError(e).into()),
                    None => Err(runtime_error(format!("{what}: its partner vanished")).into()),
                };
            }
        };
        // Matched: this (later) call moves the bytes.
        let (send_t, recv_t) = match side {
            Side::Send => (&t, &partner.tensor),
            Side::Recv => (&partner.tensor, &t),
        };
        let (src, dst) = key;
        let result = match_sizes(src, dst, send_t, recv_t);
        if let Ok(()) = result {
            let pe = pg.ranks.first_pe(src);
            let copies = send_t
                .blocks
                .iter()
                .zip(&recv_t.blocks)
                .map(|(&(ss, so, n), &(ds, doff, _))| HostCopy {
                    src: (ss, so),
                    dst: (ds, doff),
                    nbytes: n,
                })
                .collect();
            if let Err(e) = self.machine.host_copies(pe, copies).await {
                return Err(wasmtime::Error::msg(format!(
                    "send from rank {src} to rank {dst}: {e}"
                ))
                .into());
            }
            if self.machine.oplog().is_some() {
                self.machine.note_host_sync(&[pe]);
            }
        }
        *partner.outcome.lock().unwrap() = Some(result.clone());
        partner.done.set();
        Ok(result.map_err(DistError::ValueError)?)
    }
}

/// A send and its recv must agree on dtype, elements and shard layout.
fn match_sizes(
    src: u32,
    dst: u32,
    s: &CollectiveTensor,
    r: &CollectiveTensor,
) -> Result<(), String> {
    let pair = format!("send from rank {src} to rank {dst}");
    if s.dtype != r.dtype {
        return Err(format!(
            "{pair}: it sends {} but the recv's tensor is {}",
            s.dtype.name(),
            r.dtype.name()
        ));
    }
    if s.nbytes != r.nbytes {
        return Err(format!(
            "{pair}: it sends {} B but the recv's tensor holds {} B: the sizes must match",
            s.nbytes, r.nbytes
        ));
    }
    let sizes = |t: &CollectiveTensor| t.blocks.iter().map(|b| b.2).collect::<Vec<_>>();
    if sizes(s) != sizes(r) {
        return Err(format!(
            "{pair}: the tensors are sharded differently ({:?} B vs {:?} B per shard): place them alike",
            sizes(s),
            sizes(r)
        ));
    }
    Ok(())
}
