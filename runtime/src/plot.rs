//! The picture people compare collectives by: bus bandwidth (left) and
//! time (right) against message size, log-2 size axis, one line per
//! series — a (collective, algorithm, dtype, op) of one run, or of each
//! of several runs' JSON reports (`kernbench-host plot a.json b.json`).
//! Drawn as SVG by `plotters`.

use crate::report::Row;
use plotters::prelude::*;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One line of the figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    /// (size in bytes, busbw in GB/s, time in µs), by size.
    pub points: Vec<(f64, f64, f64)>,
}

/// A plot that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("nothing to plot: {0}")]
    Empty(String),
    #[error("{path}: {why}")]
    Input { path: String, why: String },
    #[error("drawing {path}: {why}")]
    Draw { path: String, why: String },
    #[error(
        "cannot plot {series}: {what} {value:e} at {size} B is {why} (a plot takes finite \
         values from 0 to {PLOTTABLE:e}); drop that row from the report"
    )]
    Unplottable {
        series: String,
        what: &'static str,
        value: f64,
        size: f64,
        why: &'static str,
    },
}

/// The largest value a plot takes: far past any physical busbw, time or
/// size, far below where the axis arithmetic (ranges, 1-2-5 key points)
/// overflows.
pub const PLOTTABLE: f64 = 1e100;

/// Why a plot cannot take `value` (None: it can): not finite, negative, or
/// past [`PLOTTABLE`].
pub(crate) fn unplottable(value: f64) -> Option<&'static str> {
    if value.is_nan() {
        Some("not a number")
    } else if value.is_infinite() {
        Some("infinite")
    } else if value < 0.0 {
        Some("negative")
    } else if value > PLOTTABLE {
        Some("too large")
    } else {
        None
    }
}

/// Every point of `series` has finite values in `[0, PLOTTABLE]`.
fn check_plottable(series: &[Series]) -> Result<(), PlotError> {
    for s in series {
        for &(size, bw, t) in &s.points {
            for (what, value) in [
                ("the size", size),
                ("busbw (GB/s)", bw),
                ("the time (us)", t),
            ] {
                let Some(why) = unplottable(value) else {
                    continue;
                };
                return Err(PlotError::Unplottable {
                    series: s.label.clone(),
                    what,
                    value,
                    size,
                    why,
                });
            }
        }
    }
    Ok(())
}

/// (collective, dtype, op): what one line of a run plots.
type SeriesKey = (String, String, String);

/// The rows of a JSON report that a plot reads.
#[derive(Debug, Deserialize)]
struct ReportFile {
    bench: String,
    algorithm: Option<String>,
    #[serde(default)]
    algorithms: BTreeMap<String, String>,
    rows: Vec<RowFile>,
}

#[derive(Debug, Deserialize)]
struct RowFile {
    collective: String,
    size_bytes: u64,
    #[serde(rename = "type")]
    dtype: String,
    redop: String,
    time_us: f64,
    busbw_gbps: f64,
}

/// The series of one run's rows: one per (collective, dtype, op), named
/// by the algorithm that served the collective (`algorithms`, else
/// `algorithm`), prefixed by `run` when given.
pub fn series_of(
    rows: &[Row],
    algorithm: Option<&str>,
    algorithms: &BTreeMap<String, String>,
    run: Option<&str>,
) -> Vec<Series> {
    let points = rows.iter().map(|r| {
        (
            (r.collective.as_str(), r.dtype.as_str(), r.redop.as_str()),
            (r.size_bytes as f64, r.busbw_gbps, r.time_us),
        )
    });
    group(points, algorithm, algorithms, run)
}

fn group<'a>(
    points: impl Iterator<Item = ((&'a str, &'a str, &'a str), (f64, f64, f64))>,
    algorithm: Option<&str>,
    algorithms: &BTreeMap<String, String>,
    run: Option<&str>,
) -> Vec<Series> {
    let mut order: Vec<(String, String, String)> = Vec::new();
    let mut by: BTreeMap<SeriesKey, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for ((c, d, o), p) in points {
        let key = (c.to_string(), d.to_string(), o.to_string());
        if !by.contains_key(&key) {
            order.push(key.clone());
        }
        by.entry(key).or_default().push(p);
    }
    order
        .into_iter()
        .map(|key| {
            let mut pts = by.remove(&key).unwrap_or_default();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (c, d, o) = &key;
            let algo = algorithms
                .get(c)
                .map(String::as_str)
                .or(algorithm)
                .unwrap_or("-");
            let op = if o == "none" {
                String::new()
            } else {
                format!(" {o}")
            };
            let prefix = run.map(|r| format!("{r}: ")).unwrap_or_default();
            Series {
                label: format!("{prefix}{c} {algo} ({d}{op})"),
                points: pts,
            }
        })
        .collect()
}

/// The series of the JSON reports `paths` (`--format json` output), each
/// labelled by its file name.
pub fn series_of_reports(paths: &[impl AsRef<Path>]) -> Result<Vec<Series>, PlotError> {
    let mut all = Vec::new();
    for p in paths {
        let p = p.as_ref();
        let input = |why: String| PlotError::Input {
            path: p.display().to_string(),
            why,
        };
        let text = crate::files::read_text(p).map_err(|e| input(e.to_string()))?;
        let f: ReportFile = serde_json::from_str(&text)
            .map_err(|e| input(format!("not a KernBench JSON report (--format json): {e}")))?;
        let run = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| f.bench.clone());
        let points = f.rows.iter().map(|r| {
            (
                (r.collective.as_str(), r.dtype.as_str(), r.redop.as_str()),
                (r.size_bytes as f64, r.busbw_gbps, r.time_us),
            )
        });
        all.extend(group(
            points,
            f.algorithm.as_deref(),
            &f.algorithms,
            (paths.len() > 1).then_some(run.as_str()),
        ));
    }
    Ok(all)
}

/// The 1-2-5 values of every decade within `[lo, hi]`: the labels of a
/// log axis (plotters labels only whole decades of a short range).
fn one_two_five(lo: f64, hi: f64) -> Vec<f64> {
    // Whatever lo and hi are, at most the decades an f64 has.
    let first = (lo.log10().floor() as i32).clamp(-330, 310);
    let last = (hi.log10().ceil() as i32).clamp(-330, 310);
    (first..=last)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
        .filter(|v| (lo..=hi).contains(v))
        .collect()
}

/// The colour of line `i`: Palette99 without its pale yellow (index 2),
/// unreadable on white.
pub(crate) fn line_color(i: usize) -> RGBAColor {
    Palette99::pick(if i >= 2 { i + 1 } else { i }).to_rgba()
}

/// `bytes` as 8 B, 16 KiB, 4 MiB, ...
pub(crate) fn human(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", units[u])
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// Draw `series` into the SVG file `path`: busbw and time against size.
pub fn draw(path: &Path, title: &str, series: &[Series]) -> Result<(), PlotError> {
    let pts: Vec<&(f64, f64, f64)> = series.iter().flat_map(|s| &s.points).collect();
    if pts.is_empty() {
        return Err(PlotError::Empty(
            "the run reported no collective rows".into(),
        ));
    }
    check_plottable(series)?;
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        why: e.to_string(),
    };
    let x_min = pts.iter().map(|p| p.0).fold(f64::MAX, f64::min).max(1.0);
    let x_max = pts.iter().map(|p| p.0).fold(0.0, f64::max).max(x_min * 2.0);
    let bw_max = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.1;
    let t_min = pts.iter().map(|p| p.2).fold(f64::MAX, f64::min).max(1e-3);
    let t_max = pts.iter().map(|p| p.2).fold(0.0, f64::max).max(t_min * 2.0);
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| draw_err(&e))?;
    let (left, right) = root.split_horizontally(600);

    let x_range = || (x_min..x_max).log_scale().base(2.0);
    let mut bw = ChartBuilder::on(&left)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range(), 0.0..bw_max)
        .map_err(|e| draw_err(&e))?;
    lines(
        &mut bw,
        series,
        "size per rank (nccl-tests' size)",
        "busbw (GB/s)",
        |p| p.1,
    )
    .map_err(|e| draw_err(&e))?;
    bw.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| draw_err(&e))?;

    let mut time = ChartBuilder::on(&right)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            x_range(),
            (t_min * 0.8..t_max * 1.25)
                .log_scale()
                .with_key_points(one_two_five(t_min * 0.8, t_max * 1.25)),
        )
        .map_err(|e| draw_err(&e))?;
    lines(&mut time, series, "size per rank", "time (us)", |p| p.2).map_err(|e| draw_err(&e))?;
    root.present().map_err(|e| draw_err(&e))?;
    Ok(())
}

/// The mesh and one line (with dots) per series on a chart whose x axis
/// is the log-2 size; `y` picks the plotted figure of a point. Each line
/// is labelled for the legend.
fn lines<'a, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, Y>>,
    series: &[Series],
    x_desc: &str,
    y_desc: &str,
    y: fn(&(f64, f64, f64)) -> f64,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>>
where
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .y_labels(12)
        .x_label_formatter(&|v| human(*v))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let c = line_color(i);
        chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|p| (p.0, y(p))),
                c.stroke_width(2),
            ))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(
            s.points
                .iter()
                .map(|p| Circle::new((p.0, y(p)), 3, c.filled())),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(c: &str, size: u64, busbw: f64, time: f64) -> Row {
        Row {
            collective: c.into(),
            size_bytes: size,
            count: size / 2,
            dtype: "f16".into(),
            redop: "sum".into(),
            root: -1,
            ranks: 4,
            time_aggregation: Default::default(),
            out_of_place: None,
            in_place: None,
            time_ps: (time * 1e6) as u64,
            time_us: time,
            algbw_gbps: busbw,
            busbw_gbps: busbw,
            bound_us: None,
            efficiency: None,
            wrong: 0,
        }
    }

    #[test]
    fn series_group_by_collective_and_name_their_algorithm() {
        let rows = [
            row("all_reduce", 1024, 1.0, 2.0),
            row("all_gather", 8, 0.1, 1.0),
            row("all_reduce", 8, 0.01, 1.5),
        ];
        let algos = BTreeMap::from([("all_gather".to_string(), "ring_allgather".to_string())]);
        let s = series_of(&rows, Some("ring_allreduce"), &algos, Some("run1"));
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label, "run1: all_reduce ring_allreduce (f16 sum)");
        assert_eq!(s[0].points, vec![(8.0, 0.01, 1.5), (1024.0, 1.0, 2.0)]);
        assert_eq!(s[1].label, "run1: all_gather ring_allgather (f16 sum)");
    }

    #[test]
    fn a_log_axis_is_labelled_one_two_five() {
        assert_eq!(one_two_five(1.6, 45.0), vec![2.0, 5.0, 10.0, 20.0]);
        assert_eq!(one_two_five(0.05, 0.3), vec![0.05, 0.1, 0.2]);
    }

    #[test]
    fn the_figure_is_an_svg_with_every_series_in_its_legend() {
        let dir = std::env::temp_dir().join(format!("kb-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("busbw.svg");
        let rows: Vec<Row> = (3..12)
            .map(|k| row("all_reduce", 1 << k, k as f64, 1.0 + k as f64))
            .collect();
        let s = series_of(&rows, Some("ring_rsag_allreduce"), &BTreeMap::new(), None);
        draw(&path, "ccl_allreduce", &s).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("all_reduce ring_rsag_allreduce (f16 sum)"));
        assert!(svg.contains("busbw (GB/s)") && svg.contains("time (us)"));
        assert!(svg.contains("1 KiB"), "log-2 size axis in bytes");
        let e = draw(&path, "x", &[]).unwrap_err();
        assert!(e.to_string().contains("nothing to plot"));
        // Values the axis code cannot take: a clear error, at once.
        for (bw, why) in [
            (1.7e308, "too large"),
            (f64::INFINITY, "infinite"),
            (f64::NAN, "not a number"),
            (-1.0, "negative"),
        ] {
            let bad = vec![
                row("all_reduce", 8, 1.0, 1.0),
                row("all_reduce", 16, bw, 1.0),
            ];
            let s = series_of(&bad, None, &BTreeMap::new(), None);
            let e = draw(&path, "x", &s).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("at 16 B"), "{e}");
        }
        // Huge but plottable: a picture.
        let big = vec![
            row("all_reduce", 8, 1e90, 1e-3),
            row("all_reduce", 16, 1.0, 1e90),
        ];
        draw(&path, "x", &series_of(&big, None, &BTreeMap::new(), None)).unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }
}
