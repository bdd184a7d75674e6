//! Point-to-point `send` / `recv` between ranks (PyTorch's blocking
//! `dist.send` / `dist.recv`): the posts of each (src, dst) pair are
//! matched in order, and the matched pair moves its bytes with the host's
//! transport — one DMA per shard from the sender's first PE along the
//! routed path ([`crate::hw::Machine::host_copies`]), starting when the
//! later of the two calls is made, as NCCL's P2P transport moves a
//! buffer without an algorithm. Both calls return when the bytes have
//! landed.

use super::bindings::bench::kernbench::sim::distributed::DistError;
use super::comms::{runtime_error, Caller, CollectiveTensor, Comms};
use super::fail::DistResult;
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

/// What a call found when it was posted.
enum Posted {
    /// Its partner was waiting: this (later) call moves the bytes, then
    /// tells the partner how it went.
    Matched(Post),
    /// It waits for its partner: until `done`, then the outcome.
    Waiting(Event, Arc<Mutex<Option<Result<(), String>>>>),
}

/// The unmatched posts of every (src, dst) pair: the posts of a pair are
/// matched in order, a send with the oldest recv waiting and the other
/// way round.
#[derive(Default)]
pub struct P2pQueues {
    posts: Mutex<BTreeMap<(u32, u32), VecDeque<Post>>>,
}

impl P2pQueues {
    /// Post `side` of pair `key` (src, dst) with its tensor: matched with
    /// the oldest post of the other side waiting, else queued behind the
    /// posts of its own side.
    fn post(&self, key: (u32, u32), side: Side, tensor: &CollectiveTensor) -> Posted {
        let mut posts = self.posts.lock().unwrap();
        let q = posts.entry(key).or_default();
        if q.front().is_some_and(|p| p.side != side) {
            return Posted::Matched(q.pop_front().expect("checked above"));
        }
        let post = Post {
            side,
            tensor: tensor.clone(),
            done: Event::new(),
            outcome: Arc::new(Mutex::new(None)),
        };
        let waiting = Posted::Waiting(post.done.clone(), post.outcome.clone());
        q.push_back(post);
        waiting
    }

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

impl Comms {
    /// `send(tensor, dst)`: `dst` a rank of `who`'s group.
    pub async fn send(&self, who: &Caller, t: CollectiveTensor, dst: u32) -> DistResult {
        let start = crate::engine::now();
        let r = self.p2p(who, t, dst, Side::Send).await;
        self.communicated(who, start);
        r
    }

    /// `recv(tensor, src)`: `src` a rank of `who`'s group.
    pub async fn recv(&self, who: &Caller, t: CollectiveTensor, src: u32) -> DistResult {
        let start = crate::engine::now();
        let r = self.p2p(who, t, src, Side::Recv).await;
        self.communicated(who, start);
        r
    }

    async fn p2p(&self, who: &Caller, t: CollectiveTensor, peer: u32, side: Side) -> DistResult {
        let (what, arg) = match side {
            Side::Send => ("send", "dst"),
            Side::Recv => ("recv", "src"),
        };
        let (pg, rank) = (who.group.clone(), who.rank);
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
        let partner = match pg.p2p.post(key, side, &t) {
            Posted::Matched(p) => p,
            Posted::Waiting(done, outcome) => {
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
            if let Err(e) = self.machine.host_copies((pe, pg.comm), copies).await {
                return Err(wasmtime::Error::msg(format!(
                    "send from rank {src} to rank {dst}: {e}"
                ))
                .into());
            }
            if self.machine.oplog().is_some() {
                self.machine.note_host_sync(pg.comm, &[pe]);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::Space;
    use crate::hw::dtype::Dtype;

    fn tensor(nbytes: u64) -> CollectiveTensor {
        CollectiveTensor {
            sip: 0,
            t_ptr: 0,
            dtype: Dtype::F32,
            nbytes,
            shards: 1,
            shard_numel: nbytes / 4,
            blocks: vec![(Space::Hbm { sip: 0, cube: 0 }, 0, nbytes)],
        }
    }

    fn matched(p: Posted) -> u64 {
        match p {
            Posted::Matched(post) => post.tensor.nbytes,
            Posted::Waiting(..) => panic!("expected a match"),
        }
    }

    /// The posts of one pair match in order: two sends wait, the first
    /// recv takes the first send, the next the second; a recv first
    /// waits for its send. Other pairs are apart.
    #[test]
    fn the_posts_of_a_pair_match_in_order() {
        let q = P2pQueues::default();
        assert!(matches!(
            q.post((0, 1), Side::Send, &tensor(8)),
            Posted::Waiting(..)
        ));
        assert!(matches!(
            q.post((0, 1), Side::Send, &tensor(16)),
            Posted::Waiting(..)
        ));
        assert!(matches!(
            q.post((1, 0), Side::Recv, &tensor(4)),
            Posted::Waiting(..)
        ));
        assert_eq!(matched(q.post((0, 1), Side::Recv, &tensor(8))), 8);
        assert_eq!(matched(q.post((0, 1), Side::Recv, &tensor(16))), 16);
        assert_eq!(q.waiting_report().len(), 1, "the recv of pair (1, 0) waits");
        assert!(q.waiting_report()[0].starts_with("rank 0: recv of 4 B from rank 1"));
        assert_eq!(matched(q.post((1, 0), Side::Send, &tensor(4))), 4);
        assert!(q.waiting_report().is_empty());
    }

    /// A send and its recv must agree in dtype, size and shard layout;
    /// each refusal names the pair.
    #[test]
    fn a_pair_must_agree_in_dtype_size_and_layout() {
        let (a, b) = (tensor(16), tensor(16));
        assert_eq!(match_sizes(0, 1, &a, &b), Ok(()));
        let half = CollectiveTensor {
            dtype: Dtype::F16,
            ..tensor(16)
        };
        let e = match_sizes(0, 1, &a, &half).unwrap_err();
        assert!(
            e.starts_with("send from rank 0 to rank 1: it sends f32"),
            "{e}"
        );
        let e = match_sizes(0, 1, &a, &tensor(8)).unwrap_err();
        assert!(e.contains("16 B but the recv's tensor holds 8 B"), "{e}");
        let split = CollectiveTensor {
            shards: 2,
            blocks: vec![
                (Space::Hbm { sip: 0, cube: 0 }, 0, 8),
                (Space::Hbm { sip: 0, cube: 1 }, 0, 8),
            ],
            ..tensor(16)
        };
        let e = match_sizes(0, 1, &a, &split).unwrap_err();
        assert!(e.contains("sharded differently"), "{e}");
    }
}
