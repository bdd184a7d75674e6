//! The IPCQ neighbour tables of the mock: the host's builtin tables for
//! each topology, and a rank's row after the algorithm's `neighbors`.

use super::MockConfig;
use crate::Algorithm;

/// `(direction, peer rank, direction the peer receives from)` of `rank`:
/// the host's builtin tables (`sim/src/ccl/tables.rs`, whose tests check
/// that the two agree).
pub fn table(cfg: &MockConfig, rank: u32) -> Vec<(String, u32, String)> {
    let n = cfg.world_size;
    let e = |d: &str, peer: u32, pd: &str| (d.to_string(), peer, pd.to_string());
    match cfg.topology.as_str() {
        "ring_1d" => vec![e("E", (rank + 1) % n, "W"), e("W", (rank + n - 1) % n, "E")],
        "ring_1d_unidir" => vec![e("E", (rank + 1) % n, "W")],
        "none" => Vec::new(),
        "full_mesh" => (0..n)
            .filter(|&j| j != rank)
            .map(|j| e(&format!("R{j}"), j, &format!("R{rank}")))
            .collect(),
        // The SIP ring of `intercube_multisip` on single-cube SIPs.
        "global_ring" => vec![
            e("global_E", (rank + 1) % n, "global_W"),
            e("global_W", (rank + n - 1) % n, "global_E"),
        ],
        "tree_binary" => {
            let mut v = Vec::new();
            if rank > 0 {
                v.push(e(
                    "P",
                    (rank - 1) / 2,
                    if rank % 2 == 1 { "C0" } else { "C1" },
                ));
            }
            for (c, d) in [(2 * rank + 1, "C0"), (2 * rank + 2, "C1")] {
                if c < n {
                    v.push(e(d, c, "P"));
                }
            }
            v
        }
        "mesh_2d" | "torus_2d" => {
            let (w, h) = cfg.grid();
            let (x, y) = (rank % w, rank / w);
            let wrap = cfg.topology == "torus_2d";
            let mut v = Vec::new();
            let compass = [
                ("E", 1i64, 0i64, "W"),
                ("W", -1, 0, "E"),
                ("S", 0, 1, "N"),
                ("N", 0, -1, "S"),
            ];
            for (d, dx, dy, back) in compass {
                let (mut nx, mut ny) = (x as i64 + dx, y as i64 + dy);
                if wrap {
                    nx = nx.rem_euclid(w as i64);
                    ny = ny.rem_euclid(h as i64);
                }
                if nx >= 0
                    && ny >= 0
                    && nx < w as i64
                    && ny < h as i64
                    && (nx, ny) != (x as i64, y as i64)
                {
                    v.push(e(d, ny as u32 * w + nx as u32, back));
                }
            }
            v
        }
        other => panic!("mock: unknown topology {other:?}"),
    }
}

/// `rank`'s row of [`table`] after `A`'s [`Algorithm::neighbors`] (seed
/// 003 §3), resolved as the host does: a link without `peer_dir` takes the
/// builtin row's when it had the same direction to the same peer, else the
/// compass opposite.
pub fn rows<A: Algorithm>(cfg: &MockConfig, rank: u32) -> Vec<(String, u32, String)> {
    let builtin = table(cfg, rank);
    let links = builtin
        .iter()
        .map(|(dir, peer, pd)| crate::Link {
            dir: dir.clone(),
            peer: *peer,
            peer_dir: Some(pd.clone()),
        })
        .collect();
    let Some(new) = A::neighbors(rank, cfg.world_size, links) else {
        return builtin;
    };
    new.into_iter()
        .map(|l| {
            assert!(
                l.peer < cfg.world_size,
                "mock: neighbors() of rank {rank}: direction {:?} leads to rank {} of {}",
                l.dir,
                l.peer,
                cfg.world_size
            );
            let pd = l.peer_dir.clone().unwrap_or_else(|| {
                builtin
                    .iter()
                    .find(|(d, p, _)| *d == l.dir && *p == l.peer)
                    .map(|(_, _, pd)| pd.clone())
                    .or_else(|| {
                        let opposite = match l.dir.as_str() {
                            "E" => "W",
                            "W" => "E",
                            "N" => "S",
                            "S" => "N",
                            _ => return None,
                        };
                        Some(opposite.to_string())
                    })
                    .unwrap_or_else(|| {
                        panic!(
                            "mock: neighbors() of rank {rank}: direction {:?} needs a peer_dir",
                            l.dir
                        )
                    })
            });
            (l.dir, l.peer, pd)
        })
        .collect()
}
