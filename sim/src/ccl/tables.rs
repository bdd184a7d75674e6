//! IPCQ neighbour tables: for every participating PE, the directions it
//! sends to, the peer behind each, and the direction under which the peer
//! receives it (seed ADR-0025: a table entry names both ends, so a 2-rank
//! ring, where E and W lead to the same peer, and a tree, where the
//! children of one parent are told apart, are both exact).
//!
//! The builtin tables (seed 003 §3) are laid over the participants in
//! their flat order (rank, then cube, then PE):
//!
//! | table | directions |
//! |---|---|
//! | `ring_1d` | `E` → next, `W` → previous (received as `W` / `E`) |
//! | `ring_1d_unidir` | `E` → next only (received as `W`) |
//! | `mesh_2d` / `torus_2d` | `N S E W` on the SIP grid, without / with wrap |
//! | `tree_binary` | `P` → parent (received as `C0` / `C1`, which child), `C0`, `C1` → children (received as `P`); parent of i is (i−1)/2 |
//! | `intercube_multisip` | `N S E W` between the cubes of one SIP (its cube mesh, no wrap) and `global_E`, `global_W` (+ `global_N`, `global_S` on a 2-D SIP network) to the same cube of the neighbouring SIPs: ring and torus wrap, `mesh_2d_no_wrap` does not |
//! | `full_mesh` | `R{j}` → participant `j`, for every other `j` (received as `R{i}`); `p(p − 1)` queues |
//! | `none` | nothing |

use crate::config::ccl::NeighbourTopology;
use crate::config::topology::SipTopology;
use crate::config::TopologySpec;
use crate::topology::PeCoord;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet};

/// One outgoing direction of a PE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    pub dir: String,
    pub peer: PeCoord,
    /// The direction the peer receives this PE's messages from.
    pub peer_dir: String,
}

/// Outgoing directions per participating PE.
pub type NeighbourTables = BTreeMap<PeCoord, Vec<Neighbour>>;

/// A table that cannot be laid over the participants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TableError(pub String);

/// The table `topo` over `pes` (flat order) on the machine `spec`.
pub fn for_machine(
    topo: NeighbourTopology,
    pes: &[PeCoord],
    spec: &TopologySpec,
) -> Result<NeighbourTables, TableError> {
    for_layout(
        topo,
        pes,
        (spec.system.sips.topology, spec.sip_grid()),
        spec,
    )
}

/// The table `topo` over `pes` (flat order), their SIPs laid out as the
/// `kind` network of the `grid` (w, h) — a process group's ring of its
/// ranks, or the machine's own — with `spec`'s cube mesh.
pub fn for_layout(
    topo: NeighbourTopology,
    pes: &[PeCoord],
    (kind, grid): (SipTopology, (u32, u32)),
    spec: &TopologySpec,
) -> Result<NeighbourTables, TableError> {
    match topo {
        NeighbourTopology::IntercubeMultisip => intercube_multisip(
            pes,
            kind,
            grid,
            (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h),
        ),
        _ => builtin(topo, pes, grid),
    }
}

/// `tables` with every PE replaced by the one `to` maps it to (a process
/// group's tables, laid out over [`crate::ccl::ranks::RankMap::laid_out`],
/// moved onto its PEs). Every PE of `tables` is in `to`.
pub fn moved(tables: &NeighbourTables, to: &BTreeMap<PeCoord, PeCoord>) -> NeighbourTables {
    tables
        .iter()
        .map(|(pe, row)| {
            let row = row
                .iter()
                .map(|n| Neighbour {
                    peer: to[&n.peer],
                    ..n.clone()
                })
                .collect();
            (to[pe], row)
        })
        .collect()
}

/// The most directions (rings) table `topo` can have over `participants`
/// PEs, known before it is made: `p(p − 1)` for a full mesh, a few a PE
/// for the others (so a run can be refused for a full mesh's size before
/// its tables take GBs).
pub fn rings_at_most(topo: NeighbourTopology, participants: usize) -> u64 {
    let p = participants as u64;
    match topo {
        NeighbourTopology::None => 0,
        NeighbourTopology::Ring1dUnidir => p,
        NeighbourTopology::Ring1d => 2 * p,
        NeighbourTopology::TreeBinary => 2 * p.saturating_sub(1),
        NeighbourTopology::Mesh2d | NeighbourTopology::Torus2d => 4 * p,
        // N S E W in the cube mesh and up to four global directions.
        NeighbourTopology::IntercubeMultisip => 8 * p,
        NeighbourTopology::FullMesh => p * p.saturating_sub(1),
    }
}

/// The four compass directions: name, grid step, and the direction a
/// message sent that way arrives from (E ↔ W, N ↔ S).
const COMPASS: [(&str, i64, i64, &str); 4] = [
    ("E", 1, 0, "W"),
    ("W", -1, 0, "E"),
    ("S", 0, 1, "N"),
    ("N", 0, -1, "S"),
];

/// The neighbour of `(x, y)` one step `(dx, dy)` away on a `w × h` grid
/// (wrapping when `wrap`), if any and not itself.
fn grid_step(
    x: u32,
    y: u32,
    (dx, dy): (i64, i64),
    (w, h): (u32, u32),
    wrap: bool,
) -> Option<(u32, u32)> {
    let (mut nx, mut ny) = (x as i64 + dx, y as i64 + dy);
    if wrap {
        nx = nx.rem_euclid(w as i64);
        ny = ny.rem_euclid(h as i64);
    }
    let inside = nx >= 0 && ny >= 0 && nx < w as i64 && ny < h as i64;
    (inside && (nx, ny) != (x as i64, y as i64)).then_some((nx as u32, ny as u32))
}

/// The hierarchical table over `pes` (ranks = SIPs, any cubes of them).
pub fn intercube_multisip(
    pes: &[PeCoord],
    sip_kind: SipTopology,
    sip_grid: (u32, u32),
    (cw, ch): (u32, u32),
) -> Result<NeighbourTables, TableError> {
    let present: BTreeSet<PeCoord> = pes.iter().copied().collect();
    let ranks = pes.iter().map(|p| p.sip).max().map_or(0, |m| m + 1);
    let (grid, wrap) = match sip_kind {
        SipTopology::Ring1d => ((ranks, 1), true),
        SipTopology::Torus2d => (sip_grid, true),
        SipTopology::Mesh2dNoWrap => (sip_grid, false),
    };
    if grid.0 * grid.1 != ranks {
        return Err(TableError(format!(
            "IPCQ topology intercube_multisip on a {} SIP network needs the ranks to fill its grid {}x{}, got {ranks}",
            sip_kind.name(),
            grid.0,
            grid.1
        )));
    }
    let mut t = NeighbourTables::new();
    for &pe in pes {
        let mut add = |dir: String, peer: PeCoord, peer_dir: String| {
            if present.contains(&peer) {
                t.entry(pe).or_default().push(Neighbour {
                    dir,
                    peer,
                    peer_dir,
                });
            }
        };
        let (cx, cy) = (pe.cube % cw, pe.cube / cw);
        let (sx, sy) = (pe.sip % grid.0, pe.sip / grid.0);
        for (d, dx, dy, back) in COMPASS {
            if let Some((nx, ny)) = grid_step(cx, cy, (dx, dy), (cw, ch), false) {
                let peer = PeCoord {
                    cube: ny * cw + nx,
                    ..pe
                };
                add(d.into(), peer, back.into());
            }
            if let Some((nx, ny)) = grid_step(sx, sy, (dx, dy), grid, wrap) {
                let peer = PeCoord {
                    sip: ny * grid.0 + nx,
                    ..pe
                };
                add(format!("global_{d}"), peer, format!("global_{back}"));
            }
        }
    }
    Ok(t)
}

/// The builtin table `topo` over `pes` (flat order); the 2-D tables lay
/// the participants row-major on the `grid` (w, h).
pub fn builtin(
    topo: NeighbourTopology,
    pes: &[PeCoord],
    grid: (u32, u32),
) -> Result<NeighbourTables, TableError> {
    let n = pes.len() as u32;
    let mut t = NeighbourTables::new();
    let mut link = |from: u32, dir: &str, to: u32, peer_dir: &str| {
        t.entry(pes[from as usize]).or_default().push(Neighbour {
            dir: dir.into(),
            peer: pes[to as usize],
            peer_dir: peer_dir.into(),
        });
    };
    match topo {
        NeighbourTopology::None => {}
        NeighbourTopology::Ring1d | NeighbourTopology::Ring1dUnidir => {
            for r in 0..n {
                link(r, "E", (r + 1) % n, "W");
                if topo == NeighbourTopology::Ring1d {
                    link(r, "W", (r + n - 1) % n, "E");
                }
            }
        }
        NeighbourTopology::FullMesh => {
            for i in 0..n {
                for j in (0..n).filter(|&j| j != i) {
                    link(i, &format!("R{j}"), j, &format!("R{i}"));
                }
            }
        }
        NeighbourTopology::TreeBinary => {
            for r in 1..n {
                let (parent, which) = ((r - 1) / 2, if r % 2 == 1 { "C0" } else { "C1" });
                link(r, "P", parent, which);
                link(parent, which, r, "P");
            }
        }
        NeighbourTopology::Mesh2d | NeighbourTopology::Torus2d => {
            let (w, h) = grid;
            if w * h != n {
                return Err(TableError(format!(
                    "IPCQ topology {} needs the participants to fill the SIP grid {w}x{h}, got {n}",
                    topo.name()
                )));
            }
            let wrap = topo == NeighbourTopology::Torus2d;
            for r in 0..n {
                for (d, dx, dy, back) in COMPASS {
                    if let Some((nx, ny)) = grid_step(r % w, r / w, (dx, dy), (w, h), wrap) {
                        link(r, d, ny * w + nx, back);
                    }
                }
            }
        }
        NeighbourTopology::IntercubeMultisip => {
            return Err(TableError(
                "IPCQ topology intercube_multisip needs the machine's cube mesh: use tables::for_machine".into(),
            ))
        }
    }
    Ok(t)
}

/// A row entry as an algorithm's `neighbors` hook sees it (seed 003 §3):
/// the peer is an index in the flat participant order; `peer_dir` `None`
/// in a rewritten row means the builtin row's, when it had the same
/// `dir` to the same peer, else the compass opposite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub dir: String,
    pub peer: u32,
    pub peer_dir: Option<String>,
}

/// Participant `i`'s row of `tables` as links (peers as indices in `pes`).
pub fn row_links(tables: &NeighbourTables, pes: &[PeCoord], i: usize) -> Vec<Link> {
    let index: BTreeMap<PeCoord, u32> = pes
        .iter()
        .enumerate()
        .map(|(k, &p)| (p, k as u32))
        .collect();
    tables
        .get(&pes[i])
        .into_iter()
        .flatten()
        .map(|n| Link {
            dir: n.dir.clone(),
            peer: index[&n.peer],
            peer_dir: Some(n.peer_dir.clone()),
        })
        .collect()
}

/// `tables` with the rows in `rows` (participant index → its new row)
/// replaced, then checked with [`check`]. Messages name the participant.
pub fn with_rows(
    tables: &NeighbourTables,
    pes: &[PeCoord],
    rows: BTreeMap<usize, Vec<Link>>,
) -> Result<NeighbourTables, TableError> {
    let mut t = tables.clone();
    for (i, links) in rows {
        let me = pes[i];
        let builtin = tables.get(&me).cloned().unwrap_or_default();
        let mut row = Vec::with_capacity(links.len());
        for l in links {
            let who = || format!("neighbors() of participant {i} ({me})");
            let peer = *pes.get(l.peer as usize).ok_or_else(|| {
                TableError(format!(
                    "{}: direction {:?} leads to participant {}, but there are {} (0..{})",
                    who(),
                    l.dir,
                    l.peer,
                    pes.len(),
                    pes.len()
                ))
            })?;
            let peer_dir = match l.peer_dir {
                Some(d) => d,
                None => builtin
                    .iter()
                    .find(|n| n.dir == l.dir && n.peer == peer)
                    .map(|n| n.peer_dir.clone())
                    .or_else(|| {
                        COMPASS
                            .iter()
                            .find(|c| c.0 == l.dir)
                            .map(|c| c.3.to_string())
                    })
                    .ok_or_else(|| {
                        TableError(format!(
                            "{}: direction {:?} to participant {} needs a peer_dir (only E, W, N, S default to their opposite)",
                            who(),
                            l.dir,
                            l.peer
                        ))
                    })?,
            };
            row.push(Neighbour {
                dir: l.dir,
                peer,
                peer_dir,
            });
        }
        if row.is_empty() {
            t.remove(&me);
        } else {
            t.insert(me, row);
        }
    }
    check(&t)?;
    Ok(t)
}

/// A table the IPCQ can install: no PE has a direction twice, and no PE
/// receives two senders under the same direction.
pub fn check(tables: &NeighbourTables) -> Result<(), TableError> {
    // Hashed: a full mesh at 1024 ranks has a million entries, whose
    // ordered inserts (string compares) were ~15 % of its run.
    let mut receives: FxHashMap<(PeCoord, &str), PeCoord> = FxHashMap::default();
    receives.reserve(tables.values().map(Vec::len).sum());
    for (&pe, row) in tables {
        let mut dirs = FxHashSet::default();
        for n in row {
            if n.dir.is_empty() || n.peer_dir.is_empty() {
                return Err(TableError(format!(
                    "{pe}: a direction has an empty name (to {})",
                    n.peer
                )));
            }
            if !dirs.insert(n.dir.as_str()) {
                return Err(TableError(format!("{pe} has direction {:?} twice", n.dir)));
            }
            if let Some(other) = receives.insert((n.peer, n.peer_dir.as_str()), pe) {
                return Err(TableError(format!(
                    "{} would receive from both {other} and {pe} as {:?}: a receive direction names one sender",
                    n.peer, n.peer_dir
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pes(n: u32) -> Vec<PeCoord> {
        PeCoord::first_of_sips(n)
    }

    fn dirs(t: &NeighbourTables, sip: u32) -> Vec<(String, u32, String)> {
        let mut v: Vec<_> = t[&PeCoord {
            sip,
            cube: 0,
            pe: 0,
        }]
            .iter()
            .map(|n| (n.dir.clone(), n.peer.sip, n.peer_dir.clone()))
            .collect();
        v.sort();
        v
    }

    fn d(dir: &str, peer: u32, peer_dir: &str) -> (String, u32, String) {
        (dir.into(), peer, peer_dir.into())
    }

    #[test]
    fn every_builtin_table_passes_the_install_check() {
        for topo in [
            NeighbourTopology::Ring1d,
            NeighbourTopology::Ring1dUnidir,
            NeighbourTopology::Mesh2d,
            NeighbourTopology::Torus2d,
            NeighbourTopology::TreeBinary,
            NeighbourTopology::FullMesh,
            NeighbourTopology::None,
        ] {
            for (n, grid) in [(1, (1, 1)), (2, (2, 1)), (6, (3, 2)), (9, (3, 3))] {
                let t = builtin(topo, &pes(n), grid).unwrap();
                check(&t).unwrap_or_else(|e| panic!("{} on {n}: {e}", topo.name()));
                let rings = t.values().map(Vec::len).sum::<usize>() as u64;
                let bound = rings_at_most(topo, n as usize);
                assert!(rings <= bound, "{} on {n}: {rings} > {bound}", topo.name());
                if topo == NeighbourTopology::FullMesh {
                    assert_eq!(rings, bound);
                }
            }
        }
    }

    #[test]
    fn the_seed_neighbors_patterns_rewrite_rows() {
        let p = pes(4);
        let ring = builtin(NeighbourTopology::Ring1d, &p, (4, 1)).unwrap();
        assert_eq!(
            row_links(&ring, &p, 0),
            vec![
                Link {
                    dir: "E".into(),
                    peer: 1,
                    peer_dir: Some("W".into())
                },
                Link {
                    dir: "W".into(),
                    peer: 3,
                    peer_dir: Some("E".into())
                }
            ]
        );
        let strip = |l: Vec<Link>| -> Vec<Link> {
            l.into_iter()
                .map(|l| Link {
                    peer_dir: None,
                    ..l
                })
                .collect()
        };
        // Pattern A: odd ranks drop W (the row otherwise as built in).
        let rows: BTreeMap<usize, Vec<Link>> = [1, 3]
            .into_iter()
            .map(|i| {
                let mut row = strip(row_links(&ring, &p, i));
                row.retain(|l| l.dir != "W");
                (i, row)
            })
            .collect();
        let a = with_rows(&ring, &p, rows).unwrap();
        assert_eq!(dirs(&a, 1), vec![d("E", 2, "W")]);
        assert_eq!(dirs(&a, 0), dirs(&ring, 0), "untouched rows stay");
        // Pattern B: a skip-connection ring, E -> rank + 2.
        let skip = |n: usize| -> BTreeMap<usize, Vec<Link>> {
            (0..n)
                .map(|i| {
                    (
                        i,
                        vec![Link {
                            dir: "E".into(),
                            peer: ((i + 2) % n) as u32,
                            peer_dir: None,
                        }],
                    )
                })
                .collect()
        };
        let b = with_rows(&ring, &p, skip(4)).unwrap();
        assert_eq!(dirs(&b, 3), vec![d("E", 1, "W")]);
        // Pattern C (no rows) keeps the table.
        assert_eq!(with_rows(&ring, &p, BTreeMap::new()).unwrap(), ring);
    }

    #[test]
    fn a_rewritten_row_that_cannot_be_installed_is_refused_with_its_participant() {
        let p = pes(3);
        let ring = builtin(NeighbourTopology::Ring1d, &p, (3, 1)).unwrap();
        let one =
            |i: usize, links: Vec<Link>| with_rows(&ring, &p, [(i, links)].into()).unwrap_err().0;
        let e = one(
            1,
            vec![Link {
                dir: "E".into(),
                peer: 7,
                peer_dir: None,
            }],
        );
        assert_eq!(
            e,
            "neighbors() of participant 1 (sip1.cube0.pe0): direction \"E\" leads to participant 7, but there are 3 (0..3)"
        );
        let e = one(
            1,
            vec![Link {
                dir: "skip".into(),
                peer: 0,
                peer_dir: None,
            }],
        );
        assert!(
            e.contains("direction \"skip\" to participant 0 needs a peer_dir"),
            "{e}"
        );
        // sip1 sending E to sip2 collides with sip1's builtin E -> sip2 (W)?
        // No: a new row replaces the old. sip0 -> sip2 as W collides with sip1 -> sip2.
        let e = one(
            0,
            vec![Link {
                dir: "E".into(),
                peer: 2,
                peer_dir: None,
            }],
        );
        assert!(e.contains("would receive from both"), "{e}");
        let e = one(
            0,
            vec![
                Link {
                    dir: "E".into(),
                    peer: 1,
                    peer_dir: None,
                },
                Link {
                    dir: "E".into(),
                    peer: 2,
                    peer_dir: Some("X".into()),
                },
            ],
        );
        assert!(e.ends_with("has direction \"E\" twice"), "{e}");
    }

    #[test]
    fn ring_tables_point_east_and_west() {
        let t = builtin(NeighbourTopology::Ring1d, &pes(3), (3, 1)).unwrap();
        assert_eq!(dirs(&t, 0), vec![d("E", 1, "W"), d("W", 2, "E")]);
        let t = builtin(NeighbourTopology::Ring1dUnidir, &pes(3), (3, 1)).unwrap();
        assert_eq!(dirs(&t, 2), vec![d("E", 0, "W")]);
        let t = builtin(NeighbourTopology::Ring1d, &pes(2), (2, 1)).unwrap();
        assert_eq!(
            dirs(&t, 0),
            vec![d("E", 1, "W"), d("W", 1, "E")],
            "both ways to one peer"
        );
    }

    #[test]
    fn mesh_has_no_wrap_and_torus_wraps() {
        let t = builtin(NeighbourTopology::Mesh2d, &pes(4), (2, 2)).unwrap();
        assert_eq!(dirs(&t, 0), vec![d("E", 1, "W"), d("S", 2, "N")]);
        let t = builtin(NeighbourTopology::Torus2d, &pes(9), (3, 3)).unwrap();
        assert_eq!(
            dirs(&t, 0),
            vec![
                d("E", 1, "W"),
                d("N", 6, "S"),
                d("S", 3, "N"),
                d("W", 2, "E")
            ]
        );
        assert!(builtin(NeighbourTopology::Mesh2d, &pes(3), (2, 2)).is_err());
    }

    #[test]
    fn intercube_multisip_joins_cubes_in_a_sip_and_the_same_cube_across_sips() {
        // 3 SIPs on a ring, 2x2 cubes, PE 0 of every cube.
        let pes: Vec<PeCoord> = (0..3)
            .flat_map(|sip| (0..4).map(move |cube| PeCoord { sip, cube, pe: 0 }))
            .collect();
        let t = intercube_multisip(&pes, SipTopology::Ring1d, (3, 1), (2, 2)).unwrap();
        let mut got: Vec<(String, u32, u32, String)> = t[&PeCoord {
            sip: 1,
            cube: 3,
            pe: 0,
        }]
            .iter()
            .map(|n| (n.dir.clone(), n.peer.sip, n.peer.cube, n.peer_dir.clone()))
            .collect();
        got.sort();
        let want = [
            ("N", 1, 1, "S"),
            ("W", 1, 2, "E"),
            ("global_E", 2, 3, "global_W"),
            ("global_W", 0, 3, "global_E"),
        ];
        assert_eq!(
            got,
            want.map(|(d, s, c, p)| (d.to_string(), s, c, p.to_string()))
                .to_vec()
        );
        let rings = t.values().map(Vec::len).sum::<usize>() as u64;
        assert!(rings <= rings_at_most(NeighbourTopology::IntercubeMultisip, pes.len()));
        let e = intercube_multisip(&pes, SipTopology::Torus2d, (2, 2), (2, 2)).unwrap_err();
        assert!(e.0.contains("grid 2x2, got 3"), "{e}");
    }

    #[test]
    fn the_guest_sdk_mock_lays_the_same_tables() {
        use kernbench_guest::mock::{table, MockConfig};
        let cases = [
            ("ring_1d", NeighbourTopology::Ring1d),
            ("tree_binary", NeighbourTopology::TreeBinary),
            ("mesh_2d", NeighbourTopology::Mesh2d),
            ("torus_2d", NeighbourTopology::Torus2d),
            ("full_mesh", NeighbourTopology::FullMesh),
        ];
        for (name, topo) in cases {
            for (n, w) in [
                (1, 1),
                (2, 2),
                (3, 3),
                (5, 5),
                (6, 3),
                (6, 2),
                (8, 4),
                (9, 3),
            ] {
                let grid = (w, n / w);
                let host = builtin(topo, &pes(n), grid).unwrap();
                let mut cfg = MockConfig::new(name, n, kernbench_guest::Dtype::F16, vec![]);
                cfg.grid_w = w;
                for r in 0..n {
                    let mut mock = table(&cfg, r);
                    mock.sort();
                    let mut host = host
                        .get(&pes(n)[r as usize])
                        .map_or(vec![], |_| dirs(&host, r));
                    host.sort();
                    assert_eq!(mock, host, "{name}, {n} ranks ({w} wide), rank {r}");
                }
            }
        }
    }

    #[test]
    fn tree_children_are_told_apart_and_none_is_empty() {
        let t = builtin(NeighbourTopology::TreeBinary, &pes(5), (5, 1)).unwrap();
        assert_eq!(dirs(&t, 0), vec![d("C0", 1, "P"), d("C1", 2, "P")]);
        assert_eq!(
            dirs(&t, 1),
            vec![d("C0", 3, "P"), d("C1", 4, "P"), d("P", 0, "C0")]
        );
        assert_eq!(dirs(&t, 4), vec![d("P", 1, "C1")]);
        assert!(builtin(NeighbourTopology::None, &pes(5), (5, 1))
            .unwrap()
            .is_empty());
    }
}
