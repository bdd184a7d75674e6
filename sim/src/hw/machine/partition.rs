//! The machine's engine state by partition: a group of consecutive SIPs
//! whose link calendars, command tables, counters and engine handler are
//! its own, so that in a windowed run (see [`crate::engine::windows`])
//! each partition's thread touches only its own. A command finds its
//! partition's state by the partition its executor runs
//! ([`crate::engine::partition`]); a machine that is not split has one
//! partition, and every executor runs partition 0.

use super::compute_unit::StageRecords;
use super::dma_engine::DmaCommands;
use super::engine_calls::HandlerSlot;
use super::MachineStats;
use crate::engine::lock::OneThread;
use crate::hw::link::LinkTable;
use crate::topology::Topology;
use std::sync::Arc;

/// One partition's engine state.
pub(super) struct Partition {
    /// Its number.
    pub(super) index: usize,
    /// The calendars of the links its commands book (every link its
    /// transfers cross, its own SIPs' or not).
    pub(super) links: OneThread<LinkTable>,
    /// Its DMA commands between their issue and their landing.
    pub(super) dma_commands: OneThread<DmaCommands>,
    /// Its compute records between their issue and their completion.
    pub(super) stage_records: OneThread<StageRecords>,
    pub(super) stats: OneThread<MachineStats>,
    /// The engine handler on its executor.
    pub(super) engine_handler: HandlerSlot,
}

/// The partitions of a machine and which SIPs each has.
pub(super) struct Partitions {
    /// Shared with the engine handler of each (which serves its own).
    parts: Box<[Arc<Partition>]>,
    /// Per SIP, its partition.
    of_sip: Arc<[u32]>,
}

impl Partitions {
    /// `parts` partitions of `topo`'s SIPs, each a run of consecutive
    /// SIPs, as even in size as the count allows.
    pub(super) fn new(topo: &Arc<Topology>, parts: usize) -> Self {
        let sips = topo.spec.n_sips() as usize;
        assert!(
            (1..=sips.max(1)).contains(&parts),
            "{parts} partitions of {sips} SIPs"
        );
        let of_sip: Arc<[u32]> = (0..sips).map(|s| (s * parts / sips) as u32).collect();
        let owners = |p: usize| (parts > 1).then(|| (of_sip.clone(), p as u32));
        Partitions {
            parts: (0..parts)
                .map(|index| {
                    Arc::new(Partition {
                        index,
                        links: OneThread::new(LinkTable::for_partition(
                            topo.clone(),
                            owners(index),
                        )),
                        dma_commands: OneThread::default(),
                        stage_records: OneThread::default(),
                        stats: OneThread::default(),
                        engine_handler: HandlerSlot::default(),
                    })
                })
                .collect(),
            of_sip,
        }
    }

    /// The number of partitions.
    pub(super) fn count(&self) -> usize {
        self.parts.len()
    }

    /// Per SIP, its partition.
    pub(super) fn sip_map(&self) -> Arc<[u32]> {
        self.of_sip.clone()
    }

    /// The partition SIP `sip` is in.
    pub(super) fn of_sip(&self, sip: u32) -> usize {
        self.of_sip[sip as usize] as usize
    }

    /// The state of the partition the running executor runs.
    #[inline]
    pub(super) fn current(&self) -> &Partition {
        match &*self.parts {
            [one] => one,
            parts => &parts[crate::engine::partition()],
        }
    }

    /// Partition `index`.
    pub(super) fn get(&self, index: usize) -> &Arc<Partition> {
        &self.parts[index]
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Partition> {
        self.parts.iter().map(|p| &**p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::Space;
    use crate::config::ccl::{BufferKind, NeighbourTopology};
    use crate::engine::{self, Executor, RunOutcome};
    use crate::hw::dtype::{BinOp, Dtype};
    use crate::hw::machine::{CommId, IpcqSettings, Machine, Shape};
    use crate::topology::PeCoord;
    use std::sync::Mutex;

    /// What a run of [`rings`] gives: each rank's result, when each
    /// rank's kernel ended, the machine's counters.
    type Rings = (Vec<Vec<f64>>, Vec<u64>, (u64, u64, u64));

    /// Rings of `size` ranks on consecutive SIPs of an 8-SIP machine split
    /// into `parts` partitions (4 SIPs each for 2), each rank summing its
    /// ring's vectors as `ring_allreduce` does (send, receive, add, `size
    /// - 1` times); with one partition on one executor, else in windows
    /// on `threads` threads.
    fn rings(size: usize, parts: usize, threads: usize, data_thread: bool) -> Rings {
        let (rings, diverged) = rings_receiving(size, parts, (threads, data_thread), false);
        assert_eq!(diverged, None);
        rings
    }

    /// A machine of 8 SIPs (the default ones otherwise) in `parts`
    /// partitions, its memory budget unlimited.
    fn eight_sips(parts: usize) -> Arc<Machine> {
        let mut spec = crate::config::TopologySpec::default_embedded();
        spec.system.sips.count = 8;
        let topo = Arc::new(crate::topology::build(&spec).unwrap());
        let budget = Arc::new(crate::budget::MemoryBudget::unlimited());
        Machine::with_partitions(topo, false, budget, parts)
    }

    /// [`rings`], receiving round robin when `round_robin`; and why the
    /// run diverged from the one-partition run, if it did.
    fn rings_receiving(
        size: usize,
        parts: usize,
        (threads, data_thread): (usize, bool),
        round_robin: bool,
    ) -> (Rings, Option<String>) {
        let m = eight_sips(parts);
        if data_thread {
            m.move_bytes_on_a_thread();
        }
        let pes = PeCoord::first_of_sips(8);
        let mut tables = crate::ccl::tables::NeighbourTables::new();
        for ring in pes.chunks(size) {
            let t = crate::ccl::tables::builtin(NeighbourTopology::Ring1d, ring, (size as u32, 1));
            tables.extend(t.unwrap());
        }
        m.install_ipcq(
            CommId::WORLD,
            &tables,
            IpcqSettings::new(BufferKind::Tcm, 2, 1 << 10),
        )
        .unwrap();
        let n = 64u32;
        let inputs: Vec<_> = pes
            .iter()
            .map(|pe| {
                let hbm = Space::Hbm {
                    sip: pe.sip,
                    cube: 0,
                };
                let t = m.alloc_tensor(hbm, &[n], Dtype::F16).unwrap();
                let values: Vec<f64> = (0..n).map(|i| (pe.sip * 10 + i) as f64).collect();
                m.host_write(hbm, t.offset, &Dtype::F16.from_f64(&values))
                    .unwrap();
                t
            })
            .collect();
        let ends = Arc::new(Mutex::new(vec![0; pes.len()]));
        let kernel = |rank: usize| {
            let (m, pe, t, ends) = (m.clone(), pes[rank], inputs[rank].clone(), ends.clone());
            engine::spawn_detached(async move {
                let mut acc = m.load(pe, t.addr(), &[n], Dtype::F16).unwrap();
                let mut current = acc.clone();
                let (east, west) = (
                    m.direction(pe, CommId::WORLD, "E"),
                    m.direction(pe, CommId::WORLD, "W"),
                );
                let shape = Shape::from_slice(&[n]);
                for _ in 1..size {
                    m.send((pe, CommId::WORLD), &east, current.clone())
                        .await
                        .unwrap();
                    let from = (!round_robin).then_some(&west);
                    let got = m.recv((pe, CommId::WORLD), from, &shape, Dtype::F16, None);
                    let got = got.await.unwrap();
                    acc = m.binary(pe, BinOp::Add, &acc, &got).unwrap();
                    current = got;
                }
                m.store(pe, t.addr(), &acc).unwrap();
                for e in m.take_outstanding(pe) {
                    e.wait().await;
                }
                ends.lock().unwrap()[rank] = engine::now();
            });
        };
        if parts == 1 {
            let ex = Executor::new();
            ex.enter(|| (0..pes.len()).for_each(kernel));
            assert_eq!(ex.run(), RunOutcome::Finished);
        } else {
            let ended = m.run_partitions(threads, |p| {
                (0..pes.len())
                    .filter(|&r| m.partition_of(pes[r].sip) == p)
                    .for_each(kernel)
            });
            assert!(ended.iter().all(|e| e.outcome == RunOutcome::Finished));
        }
        m.settle_data();
        assert_eq!(m.fault(), None);
        let results = inputs
            .iter()
            .map(|t| {
                let bytes = m.host_read(t.space, t.offset, t.nbytes());
                Dtype::F16.to_f64(&bytes)
            })
            .collect();
        let s = m.stats();
        let ends = ends.lock().unwrap().clone();
        let counts = (s.dma_commands, s.math_commands, s.bytes_moved);
        ((results, ends, counts), m.diverged())
    }

    /// Rings that stay inside their partitions run on partitions' own
    /// state, on one thread or two, with the data thread or without, to
    /// the same bytes, times and counts as on one executor.
    #[test]
    fn partitions_that_share_nothing_run_as_one_machine_does() {
        let one = rings(4, 1, 1, false);
        let sum = |sips: std::ops::Range<u32>, i: u32| sips.map(|s| (s * 10 + i) as f64).sum();
        for (rank, got) in one.0.iter().enumerate() {
            let ring = if rank < 4 { 0..4 } else { 4..8 };
            let want: Vec<f64> = (0..64).map(|i| sum(ring.clone(), i)).collect();
            assert_eq!(*got, want, "rank {rank}");
        }
        assert!(one.1.iter().all(|&t| t > 0));
        assert_eq!(one.2 .0, 8 * (3 + 2), "a load, 3 sends and a store each");
        for (threads, data_thread) in [(1, false), (2, false), (2, true)] {
            let split = rings(4, 2, threads, data_thread);
            assert_eq!(split, one, "{threads} thread(s), data thread {data_thread}");
        }
    }

    /// One ring over both partitions (SIP 3 sends to 4, 7 to 0): its
    /// messages, credits and link bookings cross as mail, and the split
    /// run gives the bytes, kernel end times and counts of one executor.
    #[test]
    fn a_ring_across_partitions_runs_as_one_machine_does() {
        let one = rings(8, 1, 1, false);
        for (rank, got) in one.0.iter().enumerate() {
            let want: Vec<f64> = (0..64)
                .map(|i| (0..8).map(|s| (s * 10 + i) as f64).sum())
                .collect();
            assert_eq!(*got, want, "rank {rank}");
        }
        assert_eq!(one.2 .0, 8 * (7 + 2));
        for (threads, data_thread) in [(1, false), (2, false), (2, true)] {
            let split = rings(8, 2, threads, data_thread);
            assert_eq!(split, one, "{threads} thread(s), data thread {data_thread}");
        }
    }

    #[test]
    fn partitions_are_runs_of_consecutive_sips_of_even_size() {
        let mut spec = crate::config::TopologySpec::default_embedded();
        spec.system.sips.count = 10;
        let topo = Arc::new(crate::topology::build(&spec).unwrap());
        let p = Partitions::new(&topo, 3);
        let of: Vec<usize> = (0..10).map(|s| p.of_sip(s)).collect();
        assert_eq!(of, [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(p.count(), 3);
        let one = Partitions::new(&topo, 1);
        assert!((0..10).all(|s| one.of_sip(s) == 0));
    }

    /// A receive that takes messages round robin from rings of both
    /// partitions could take them in another order than one executor
    /// would: the split run says it diverged (one executor never does).
    #[test]
    fn a_round_robin_receive_across_partitions_diverges() {
        let (_, one) = rings_receiving(8, 1, (1, false), true);
        assert_eq!(one, None);
        let (_, split) = rings_receiving(8, 2, (2, false), true);
        let why = split.expect("the split run diverged");
        assert!(why.contains("round robin"), "{why}");
    }

    /// A PE of partition 0 adding a tensor in SIP 4's HBM (partition 1's
    /// memory, which partition 1's thread owns) in place: the split run
    /// says it diverged (its bytes would be whichever thread's came
    /// first); one executor runs it and adds the bytes.
    #[test]
    fn a_compute_command_on_another_partition_s_memory_diverges() {
        let run = |parts: usize| {
            let m = eight_sips(parts);
            let pe = PeCoord {
                sip: 0,
                cube: 0,
                pe: 0,
            };
            let far = Space::Hbm { sip: 4, cube: 0 };
            let t = m.alloc_tensor(far, &[64], Dtype::F16).unwrap();
            m.host_write(far, t.offset, &Dtype::F16.from_f64(&[2.0; 64]))
                .unwrap();
            let (mk, t2) = (m.clone(), t.clone());
            let kernel = move || {
                let (m, t) = (mk.clone(), t2.clone());
                engine::spawn_detached(async move {
                    let sum = m.binary(pe, BinOp::Add, &t, &t).unwrap();
                    sum.ready.wait().await;
                    m.store(pe, t.addr(), &sum).unwrap();
                    for e in m.take_outstanding(pe) {
                        e.wait().await;
                    }
                })
            };
            if parts == 1 {
                let ex = Executor::new();
                ex.enter(kernel);
                assert_eq!(ex.run(), RunOutcome::Finished);
            } else {
                m.run_partitions(2, |p| {
                    if p == 0 {
                        kernel()
                    }
                });
            }
            m.settle_data();
            let bytes = m.host_read(far, t.offset, t.nbytes());
            (Dtype::F16.to_f64(&bytes)[0], m.diverged())
        };
        assert_eq!(run(1), (4.0, None));
        let why = run(2).1.expect("the split run diverged");
        assert!(
            why.contains("a MATH command of sip0.cube0.pe0 reaches sip4.cube0.hbm"),
            "{why}"
        );
        assert!(why.contains("memory of another partition"), "{why}");
    }

    /// A message of partition 0 lands on SIP 4's PE through the PE's
    /// link while that PE's own load of 1 MiB holds it: partition 0 booked
    /// the link as if free, partition 1 finds it busy, and the run says it
    /// diverged instead of giving other times than one executor.
    #[test]
    fn a_transfer_that_meets_another_partition_s_traffic_diverges() {
        let run = |parts: usize| {
            let m = eight_sips(parts);
            let pe = |sip| PeCoord {
                sip,
                cube: 0,
                pe: 0,
            };
            let (a, b) = (pe(3), pe(4));
            let neighbour = crate::ccl::tables::Neighbour {
                dir: "E".into(),
                peer: b,
                peer_dir: "W".into(),
            };
            let tables = crate::ccl::tables::NeighbourTables::from([(a, vec![neighbour])]);
            m.install_ipcq(
                CommId::WORLD,
                &tables,
                IpcqSettings::new(BufferKind::Tcm, 2, 1 << 20),
            )
            .unwrap();
            let hbm = |sip| Space::Hbm { sip, cube: 0 };
            let small = m.alloc_tensor(hbm(3), &[64 << 10], Dtype::F16).unwrap();
            let big = m.alloc_tensor(hbm(4), &[512 << 10], Dtype::F16).unwrap();
            let (ms, mr) = (m.clone(), m.clone());
            let sender = move || {
                engine::spawn_detached(async move {
                    let t = ms.load(a, small.addr(), &small.shape, Dtype::F16).unwrap();
                    let east = ms.direction(a, CommId::WORLD, "E");
                    ms.send((a, CommId::WORLD), &east, t).await.unwrap();
                })
            };
            let receiver = move || {
                engine::spawn_detached(async move {
                    engine::sleep(400_000).await;
                    let t = mr.load(b, big.addr(), &big.shape, Dtype::F16).unwrap();
                    let west = mr.direction(b, CommId::WORLD, "W");
                    let shape = Shape::from_slice(&[64 << 10]);
                    let got = mr.recv((b, CommId::WORLD), Some(&west), &shape, Dtype::F16, None);
                    got.await.unwrap();
                    t.ready.wait().await;
                })
            };
            if parts == 1 {
                let ex = Executor::new();
                ex.enter(|| {
                    sender.clone()();
                    receiver.clone()();
                });
                assert_eq!(ex.run(), RunOutcome::Finished);
            } else {
                m.run_partitions(2, |p| match p {
                    0 => sender.clone()(),
                    _ => receiver.clone()(),
                });
            }
            m.diverged()
        };
        assert_eq!(run(1), None);
        let why = run(2).expect("the split run diverged");
        assert!(why.contains("was busy"), "{why}");
    }
}
