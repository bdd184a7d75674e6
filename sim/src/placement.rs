//! Placement of a tensor inside one device (seed ADR-0026, ADR-0024 D4):
//! a [`DpPolicy`] splits a tensor over the cubes of a SIP and then over
//! the PEs of each cube, giving one [`ShardSpec`] per (cube, PE) with
//! structural `(sip, cube, pe)` coordinates.
//!
//! The policy has no SIP axis: which SIP a tensor lives on comes only from
//! the rank's `torch.ahbm.set_device` (the seed's breaking-API rule). This
//! module only decides *which part of the tensor goes where*; memory is
//! allocated by the caller, and the virtual address map that lets kernels
//! reach the shards is [`crate::hw::vmap`].
//!
//! ## Rules (the seed's, made precise here)
//!
//! * The tensor is seen as 2-D, `rows × cols` = (product of all but the
//!   last dimension, last dimension); a 1-D tensor is one row.
//! * Level 1 splits the whole tensor among cubes `0..num_cubes` with the
//!   policy's `cube` mode; level 2 splits each cube's part among PEs
//!   `0..num_pes` of that cube with the `pe` mode.
//! * Modes: `replicate` (every member gets the whole part), `row_wise`
//!   (consecutive row blocks; rows must divide evenly), `column_wise`
//!   (consecutive column blocks; columns must divide evenly), `tiled`
//!   (a `gr × gc` grid of blocks, `gr·gc = n`, `gr` the largest divisor of
//!   `n` not above `√n` — 4 → 2×2, 8 → 2×4, 6 → 2×3 — blocks numbered
//!   row-major; both dimensions must divide evenly).
//! * Each shard is stored contiguously, row-major within its block. On its
//!   SIP the tensor has one virtual address range: the shards one after
//!   another in (cube, pe) order, so shard `k` starts at `k · nbytes` when
//!   all shards have the same size (ADR-0050 D3: `t_ptr + cube_id ·
//!   nbytes` with one shard per cube).

use crate::config::TopologySpec;
use std::fmt;
use std::ops::Range;

/// How one level of the hierarchy (cubes, or the PEs of a cube) shares a
/// tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DpMode {
    Replicate,
    RowWise,
    ColumnWise,
    Tiled,
}

impl DpMode {
    /// The seed's spelling.
    pub fn name(self) -> &'static str {
        match self {
            DpMode::Replicate => "replicate",
            DpMode::RowWise => "row_wise",
            DpMode::ColumnWise => "column_wise",
            DpMode::Tiled => "tiled",
        }
    }

    /// Parse the seed's spelling (`tiled_2d` is accepted for `tiled`).
    pub fn parse(s: &str) -> Result<DpMode, PlacementError> {
        Ok(match s {
            "replicate" => DpMode::Replicate,
            "row_wise" => DpMode::RowWise,
            "column_wise" => DpMode::ColumnWise,
            "tiled" | "tiled_2d" => DpMode::Tiled,
            other => {
                return Err(PlacementError(format!(
                    "unknown DPPolicy mode '{other}': expected replicate, row_wise, column_wise or tiled"
                )))
            }
        })
    }
}

/// `DPPolicy(cube=..., pe=..., num_cubes=..., num_pes=...)`: the layout
/// of a tensor inside one SIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DpPolicy {
    pub cube: DpMode,
    pub pe: DpMode,
    pub num_cubes: u32,
    pub num_pes: u32,
}

impl DpPolicy {
    /// One shard on cube 0, PE 0: a tensor created without a policy.
    pub const SINGLE: DpPolicy = DpPolicy {
        cube: DpMode::Replicate,
        pe: DpMode::Replicate,
        num_cubes: 1,
        num_pes: 1,
    };
}

impl fmt::Display for DpPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DPPolicy(cube='{}', pe='{}', num_cubes={}, num_pes={})",
            self.cube.name(),
            self.pe.name(),
            self.num_cubes,
            self.num_pes
        )
    }
}

/// A policy that does not fit the tensor or the device (the seed raises
/// `ValueError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlacementError(pub String);

/// One shard: where it lives and which block of the 2-D tensor it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSpec {
    pub sip: u32,
    pub cube: u32,
    pub pe: u32,
    pub rows: Range<u32>,
    pub cols: Range<u32>,
    /// Offset of the shard in the tensor's virtual range on its SIP.
    pub offset_bytes: u64,
    pub nbytes: u64,
}

impl ShardSpec {
    pub fn numel(&self) -> u64 {
        self.rows.len() as u64 * self.cols.len() as u64
    }
}

/// A 2-D block: rows × cols.
type Block = (Range<u32>, Range<u32>);

/// `rows × cols` of `shape` (see the module rules).
pub fn shape_2d(shape: &[u32]) -> Result<(u32, u32), PlacementError> {
    let Some((&cols, lead)) = shape.split_last() else {
        return Ok((1, 1));
    };
    let rows = lead
        .iter()
        .try_fold(1u32, |a, &d| a.checked_mul(d))
        .ok_or_else(|| PlacementError(format!("shape {shape:?} has too many rows")))?;
    Ok((rows, cols))
}

/// `gr × gc` for `n` tiles (see the module rules).
pub fn tile_grid(n: u32) -> (u32, u32) {
    let gr = (1..=n)
        .rev()
        .find(|g| g * g <= n && n.is_multiple_of(*g))
        .unwrap_or(1);
    (gr, n / gr)
}

/// Split `block` into `n` parts with `mode`; `level` names the level in
/// errors ("cube" / "pe").
fn split(block: &Block, mode: DpMode, n: u32, level: &str) -> Result<Vec<Block>, PlacementError> {
    let (rows, cols) = block.clone();
    let even = |len: u32, parts: u32, what: &str| {
        if len.is_multiple_of(parts) {
            Ok(len / parts)
        } else {
            let members = if level == "pe" { "PEs" } else { "cubes" };
            Err(PlacementError(format!(
                "{level}='{}' over {n} {members} needs the {what} ({len}) to divide evenly by {parts}",
                mode.name()
            )))
        }
    };
    Ok(match mode {
        DpMode::Replicate => vec![block.clone(); n as usize],
        DpMode::RowWise => {
            let h = even(rows.len() as u32, n, "rows")?;
            (0..n)
                .map(|i| (rows.start + i * h..rows.start + (i + 1) * h, cols.clone()))
                .collect()
        }
        DpMode::ColumnWise => {
            let w = even(cols.len() as u32, n, "columns")?;
            (0..n)
                .map(|i| (rows.clone(), cols.start + i * w..cols.start + (i + 1) * w))
                .collect()
        }
        DpMode::Tiled => {
            let (gr, gc) = tile_grid(n);
            let h = even(rows.len() as u32, gr, "rows")?;
            let w = even(cols.len() as u32, gc, "columns")?;
            (0..n)
                .map(|i| {
                    let (r, c) = (i / gc, i % gc);
                    (
                        rows.start + r * h..rows.start + (r + 1) * h,
                        cols.start + c * w..cols.start + (c + 1) * w,
                    )
                })
                .collect()
        }
    })
}

/// `resolve_dp_policy`: the shards of a tensor of `shape` (elements of
/// `itemsize` bytes) placed with `dp` on SIP `target_sip` of `spec`.
pub fn resolve(
    dp: &DpPolicy,
    shape: &[u32],
    itemsize: u64,
    target_sip: u32,
    spec: &TopologySpec,
) -> Result<Vec<ShardSpec>, PlacementError> {
    let (cubes, pes) = (spec.cubes_per_sip(), spec.pes_per_cube());
    let fits = |n: u32, have: u32, field: &str, unit: &str| {
        if n == 0 || n > have {
            Err(PlacementError(format!(
                "{dp}: {field}={n} but this topology has {have} {unit} (1..={have})"
            )))
        } else {
            Ok(())
        }
    };
    fits(dp.num_cubes, cubes, "num_cubes", "cubes per SIP")?;
    fits(dp.num_pes, pes, "num_pes", "PEs per cube")?;
    let (rows, cols) = shape_2d(shape)?;
    let whole = (0..rows, 0..cols);
    let mut shards = Vec::with_capacity((dp.num_cubes * dp.num_pes) as usize);
    let mut offset = 0u64;
    let err = |e: PlacementError| PlacementError(format!("{dp} on shape {shape:?}: {}", e.0));
    for (cube, cube_block) in split(&whole, dp.cube, dp.num_cubes, "cube")
        .map_err(err)?
        .into_iter()
        .enumerate()
    {
        for (pe, block) in split(&cube_block, dp.pe, dp.num_pes, "pe")
            .map_err(err)?
            .into_iter()
            .enumerate()
        {
            let nbytes = block.0.len() as u64 * block.1.len() as u64 * itemsize;
            shards.push(ShardSpec {
                sip: target_sip,
                cube: cube as u32,
                pe: pe as u32,
                rows: block.0,
                cols: block.1,
                offset_bytes: offset,
                nbytes,
            });
            offset += nbytes;
        }
    }
    Ok(shards)
}

/// A piece of a row-major element range of the whole tensor that lies in
/// one shard: `count` elements from element `tensor_elem` of the tensor
/// are elements `shard_elem..` of shard `shard`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub shard: usize,
    pub shard_elem: u64,
    pub tensor_elem: u64,
    pub count: u64,
}

/// The pieces of elements `[first, first + count)` (row-major over the
/// 2-D tensor `cols` wide) in `shards`. With `every_replica` each element
/// is listed once per shard holding it (for writes); without, only in the
/// first shard holding it, in (cube, pe) order (for reads). Pieces come in
/// tensor order.
pub fn pieces(
    shards: &[ShardSpec],
    cols: u32,
    (first, count): (u64, u64),
    every_replica: bool,
) -> Vec<Piece> {
    let mut out = Vec::new();
    if count == 0 || cols == 0 {
        return out;
    }
    let cols = cols as u64;
    let end = first + count;
    let mut row = first / cols;
    while row * cols < end {
        let (c0, c1) = (
            first.max(row * cols) - row * cols,
            end.min((row + 1) * cols) - row * cols,
        );
        // Column ranges already served in this row (reads take the first
        // replica only).
        let mut served: Vec<Range<u64>> = Vec::new();
        let mut row_pieces = Vec::new();
        for (i, s) in shards.iter().enumerate() {
            if !s.rows.contains(&(row as u32)) {
                continue;
            }
            let (a, b) = (c0.max(s.cols.start as u64), c1.min(s.cols.end as u64));
            if a >= b {
                continue;
            }
            if !every_replica {
                if served.iter().any(|r| r.start < b && a < r.end) {
                    continue;
                }
                served.push(a..b);
            }
            let width = s.cols.len() as u64;
            row_pieces.push(Piece {
                shard: i,
                shard_elem: (row - s.rows.start as u64) * width + (a - s.cols.start as u64),
                tensor_elem: row * cols + a,
                count: b - a,
            });
        }
        row_pieces.sort_by_key(|p| (p.tensor_elem, p.shard));
        out.extend(row_pieces);
        row += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TopologySpec {
        TopologySpec::default_embedded() // 4x4 cubes, 4 PEs per cube
    }

    fn dp(cube: DpMode, pe: DpMode, num_cubes: u32, num_pes: u32) -> DpPolicy {
        DpPolicy {
            cube,
            pe,
            num_cubes,
            num_pes,
        }
    }

    type Placed = (u32, u32, Range<u32>, Range<u32>, u64);

    fn blocks(s: &[ShardSpec]) -> Vec<Placed> {
        s.iter()
            .map(|s| (s.cube, s.pe, s.rows.clone(), s.cols.clone(), s.offset_bytes))
            .collect()
    }

    #[test]
    fn the_seed_hello_layout_gives_each_pe_a_column_block() {
        // ccl_hello: DPPolicy(cube="replicate", pe="column_wise",
        // num_cubes=1, num_pes=4) on (1, 4 * 8) f16.
        let s = resolve(
            &dp(DpMode::Replicate, DpMode::ColumnWise, 1, 4),
            &[1, 32],
            2,
            3,
            &spec(),
        )
        .unwrap();
        assert_eq!(
            blocks(&s),
            (0..4)
                .map(|p| (0, p, 0..1, p * 8..p * 8 + 8, p as u64 * 16))
                .collect::<Vec<_>>()
        );
        assert!(s.iter().all(|s| s.sip == 3 && s.nbytes == 16));
    }

    #[test]
    fn row_wise_over_cubes_then_replicate_gives_one_tile_per_cube() {
        let s = resolve(
            &dp(DpMode::RowWise, DpMode::Replicate, 16, 1),
            &[16, 8],
            2,
            0,
            &spec(),
        )
        .unwrap();
        assert_eq!(s.len(), 16);
        for (c, sh) in s.iter().enumerate() {
            let c = c as u32;
            assert_eq!(
                (sh.cube, sh.rows.clone(), sh.cols.clone()),
                (c, c..c + 1, 0..8)
            );
            assert_eq!(sh.offset_bytes, c as u64 * 16, "t_ptr + cube_id * nbytes");
        }
    }

    #[test]
    fn tiled_uses_the_squarest_grid_and_replicas_repeat_the_block() {
        assert_eq!(tile_grid(4), (2, 2));
        assert_eq!(tile_grid(8), (2, 4));
        assert_eq!(tile_grid(6), (2, 3));
        assert_eq!(tile_grid(7), (1, 7));
        let s = resolve(
            &dp(DpMode::Replicate, DpMode::Tiled, 2, 4),
            &[4, 4],
            4,
            0,
            &spec(),
        )
        .unwrap();
        assert_eq!(s.len(), 8);
        assert_eq!((s[1].rows.clone(), s[1].cols.clone()), (0..2, 2..4));
        assert_eq!((s[2].rows.clone(), s[2].cols.clone()), (2..4, 0..2));
        assert_eq!(
            (s[5].cube, s[5].rows.clone(), s[5].cols.clone()),
            (1, 0..2, 2..4)
        );
    }

    #[test]
    fn a_policy_that_does_not_fit_says_why() {
        let e = resolve(
            &dp(DpMode::RowWise, DpMode::Replicate, 4, 1),
            &[3, 8],
            2,
            0,
            &spec(),
        )
        .unwrap_err();
        assert!(e.0.contains("rows (3) to divide evenly by 4"), "{e}");
        let e = resolve(
            &dp(DpMode::Replicate, DpMode::Replicate, 17, 1),
            &[16],
            2,
            0,
            &spec(),
        )
        .unwrap_err();
        assert!(
            e.0.contains("num_cubes=17") && e.0.contains("16 cubes"),
            "{e}"
        );
        let e = resolve(
            &dp(DpMode::Replicate, DpMode::ColumnWise, 1, 0),
            &[16],
            2,
            0,
            &spec(),
        )
        .unwrap_err();
        assert!(e.0.contains("num_pes=0"), "{e}");
        assert!(DpMode::parse("diagonal")
            .unwrap_err()
            .0
            .contains("replicate"));
    }

    #[test]
    fn pieces_cover_a_range_once_for_reads_and_per_replica_for_writes() {
        // 2 x 4 tensor, column-wise over 2 PEs, replicated over 2 cubes.
        let s = resolve(
            &dp(DpMode::Replicate, DpMode::ColumnWise, 2, 2),
            &[2, 4],
            2,
            0,
            &spec(),
        )
        .unwrap();
        let read = pieces(&s, 4, (1, 6), false);
        assert_eq!(
            read.iter()
                .map(|p| (p.shard, p.shard_elem, p.tensor_elem, p.count))
                .collect::<Vec<_>>(),
            vec![(0, 1, 1, 1), (1, 0, 2, 2), (0, 2, 4, 2), (1, 2, 6, 1)]
        );
        assert_eq!(read.iter().map(|p| p.count).sum::<u64>(), 6);
        let write = pieces(&s, 4, (0, 8), true);
        assert_eq!(
            write.iter().map(|p| p.count).sum::<u64>(),
            16,
            "two replicas"
        );
    }
}
