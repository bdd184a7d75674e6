//! The picture of a sweep: a chosen metric (busbw, time, ...) against one
//! column (an axis, or the message size), one line per value of another
//! column. Every other column that varies must be pinned (`--where
//! axis=value`), or the lines would mix points: the error names those
//! columns and their values. Drawn as SVG by `plotters`; the x axis is
//! log-2 when it is numeric, positive and spans a factor of 8 or more,
//! linear when numeric otherwise, and one slot per value when not numeric.

use super::table::cell_text as text;
use crate::plot::PlotError;
use plotters::prelude::*;
use serde_json::{Map, Value as Json};
use std::collections::BTreeSet;
use std::path::Path;

/// What to draw.
#[derive(Debug, Clone)]
pub struct PlotSpec {
    pub x: String,
    pub y: String,
    /// One line per value of this column (None: one line).
    pub by: Option<String>,
    /// `column=value` pins.
    pub filters: Vec<(String, String)>,
}

/// Columns that describe a row, not measure it: they may split lines.
fn is_dimension(col: &str, axes: &[String]) -> bool {
    axes.iter().any(|a| a == col)
        || matches!(
            col,
            "bench" | "algorithm" | "world_size" | "collective" | "size_bytes" | "type" | "redop"
        )
}

fn num(v: Option<&Json>) -> Option<f64> {
    match v {
        Some(Json::Number(n)) => n.as_f64(),
        Some(Json::String(s)) => s.parse().ok(),
        _ => None,
    }
}

/// A tick label: an integer as one, else three significant digits.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

/// One line: label, (x, y) points by x.
type Line = (String, Vec<(Json, f64)>);

/// The lines of `rows` (only `ok` rows) for `spec`; `axes` are the sweep's
/// axis names.
pub fn lines(
    rows: &[Map<String, Json>],
    axes: &[String],
    spec: &PlotSpec,
) -> Result<Vec<Line>, PlotError> {
    let input = |why: String| PlotError::Input {
        path: "the sweep's table".into(),
        why,
    };
    let cols: Vec<&String> = rows.first().map(|r| r.keys().collect()).unwrap_or_default();
    for c in [Some(&spec.x), Some(&spec.y), spec.by.as_ref()]
        .into_iter()
        .flatten()
        .chain(spec.filters.iter().map(|(c, _)| c))
    {
        if !cols.contains(&c) {
            return Err(input(format!(
                "no column `{c}` (columns: {})",
                cols.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let kept: Vec<&Map<String, Json>> = rows
        .iter()
        .filter(|r| text(r.get("status")) == "ok")
        .filter(|r| spec.filters.iter().all(|(c, v)| text(r.get(c)) == *v))
        .collect();
    if kept.is_empty() {
        return Err(PlotError::Empty(
            "no successful row matches the --where pins".into(),
        ));
    }
    // A line has one point per x: rows that share their line and x but
    // differ in another column would be mixed. Name those columns.
    let line_of = |r: &Map<String, Json>| spec.by.as_ref().map(|b| text(r.get(b)));
    type Rows<'r> = Vec<&'r Map<String, Json>>;
    let mut groups: std::collections::BTreeMap<(Option<String>, String), Rows> = Default::default();
    for r in &kept {
        groups
            .entry((line_of(r), text(r.get(&spec.x))))
            .or_default()
            .push(r);
    }
    let mut loose: Vec<String> = Vec::new();
    for c in cols.iter().filter(|c| is_dimension(c, axes)) {
        let mut values = BTreeSet::new();
        for g in groups.values().filter(|g| g.len() > 1) {
            let here: BTreeSet<String> = g.iter().map(|r| text(r.get(*c))).collect();
            if here.len() > 1 {
                values.extend(here);
            }
        }
        if !values.is_empty() {
            loose.push(format!(
                "{c} ({})",
                values.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if !loose.is_empty() {
        return Err(input(format!(
            "these columns vary too and would mix points in one line: {}; pin each with --where COLUMN=VALUE (or choose it as --by)",
            loose.join("; ")
        )));
    }
    let mut out: Vec<Line> = Vec::new();
    for r in kept {
        let label = spec
            .by
            .as_ref()
            .map_or_else(|| spec.y.clone(), |b| format!("{b}={}", text(r.get(b))));
        let Some(y) = num(r.get(&spec.y)) else {
            return Err(input(format!(
                "`{}` is not a number: {}",
                spec.y,
                text(r.get(&spec.y))
            )));
        };
        let x = r.get(&spec.x).cloned().unwrap_or(Json::Null);
        // What the axis code cannot take (it would loop or overflow).
        for (column, v) in [(&spec.y, Some(y)), (&spec.x, num(Some(&x)))] {
            if let Some(why) = v.and_then(|v| crate::plot::unplottable(v.abs())) {
                return Err(input(format!(
                    "`{column}` is {why} in the row of {}={} ({}); a plot takes finite \
                     values up to {:e}: leave that row out with --where",
                    spec.x,
                    text(Some(&x)),
                    v.unwrap_or(f64::NAN),
                    crate::plot::PLOTTABLE
                )));
            }
        }
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push((x, y)),
            None => out.push((label, vec![(x, y)])),
        }
    }
    Ok(out)
}

/// Draw `lines` into the SVG `path`.
pub fn draw(path: &Path, title: &str, spec: &PlotSpec, lines: &[Line]) -> Result<(), PlotError> {
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        why: e.to_string(),
    };
    let xs: Vec<&Json> = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| x))
        .collect();
    let numeric: Option<Vec<f64>> = xs.iter().map(|x| num(Some(x))).collect();
    // Categories in order of first appearance.
    let mut cats: Vec<String> = Vec::new();
    for x in &xs {
        let t = text(Some(x));
        if !cats.contains(&t) {
            cats.push(t);
        }
    }
    let y_max = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.1;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| draw_err(&e))?;
    macro_rules! finish {
        ($chart:expr, $xof:expr) => {{
            let mut chart = $chart;
            for (i, (label, pts)) in lines.iter().enumerate() {
                let c = crate::plot::line_color(i);
                let mut pts: Vec<(f64, f64)> = pts.iter().map(|(x, y)| ($xof(x), *y)).collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(|e| draw_err(&e))?
                    .label(label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
                    .map_err(|e| draw_err(&e))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| draw_err(&e))?;
        }};
    }
    let builder = || {
        let mut b = ChartBuilder::on(&root);
        b.margin(14).x_label_area_size(44).y_label_area_size(64);
        b
    };
    match numeric {
        Some(v)
            if v.iter().all(|&x| x > 0.0) && {
                let (lo, hi) = (
                    v.iter().cloned().fold(f64::MAX, f64::min),
                    v.iter().cloned().fold(0.0, f64::max),
                );
                hi / lo >= 8.0
            } =>
        {
            let lo = v.iter().cloned().fold(f64::MAX, f64::min);
            let hi = v.iter().cloned().fold(0.0, f64::max);
            // Ticks at the swept values when they are few.
            let mut ticks: Vec<f64> = v.clone();
            ticks.sort_by(f64::total_cmp);
            ticks.dedup();
            if ticks.len() > 12 {
                // Else the powers of two in the range.
                ticks = (0..64)
                    .map(|e| 2f64.powi(e))
                    .filter(|t| *t >= lo && *t <= hi)
                    .collect();
            }
            let x_range = (lo / 1.2..hi * 1.2)
                .log_scale()
                .base(2.0)
                .with_key_points(ticks);
            let mut chart = builder()
                .build_cartesian_2d(x_range, 0.0..y_max)
                .map_err(|e| draw_err(&e))?;
            let bytes = spec.x == "size_bytes";
            chart
                .configure_mesh()
                .x_desc(spec.x.as_str())
                .y_desc(spec.y.as_str())
                .x_label_formatter(&|x| {
                    if bytes {
                        crate::plot::human(*x)
                    } else {
                        number(*x)
                    }
                })
                .draw()
                .map_err(|e| draw_err(&e))?;
            finish!(chart, |x: &Json| num(Some(x)).unwrap_or(0.0));
        }
        Some(v) => {
            let lo = v.iter().cloned().fold(f64::MAX, f64::min);
            let hi = v.iter().cloned().fold(f64::MIN, f64::max);
            let pad = ((hi - lo) * 0.05).max(0.5);
            let mut chart = builder()
                .build_cartesian_2d(lo - pad..hi + pad, 0.0..y_max)
                .map_err(|e| draw_err(&e))?;
            chart
                .configure_mesh()
                .x_desc(spec.x.as_str())
                .y_desc(spec.y.as_str())
                .draw()
                .map_err(|e| draw_err(&e))?;
            finish!(chart, |x: &Json| num(Some(x)).unwrap_or(0.0));
        }
        None => {
            let n = cats.len() as f64;
            let mut chart = builder()
                .build_cartesian_2d(-0.5..n - 0.5, 0.0..y_max)
                .map_err(|e| draw_err(&e))?;
            let names = cats.clone();
            chart
                .configure_mesh()
                .x_desc(spec.x.as_str())
                .y_desc(spec.y.as_str())
                .x_labels(cats.len())
                .x_label_formatter(&|x| {
                    let i = x.round();
                    if (x - i).abs() < 1e-6 && i >= 0.0 {
                        names.get(i as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .draw()
                .map_err(|e| draw_err(&e))?;
            finish!(
                chart,
                |x: &Json| cats.iter().position(|c| *c == text(Some(x))).unwrap_or(0) as f64
            );
        }
    }
    root.present().map_err(|e| draw_err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(bw: u64, algo: &str, size: u64, y: f64) -> Map<String, Json> {
        json!({"status": "ok", "bw": bw, "algorithm": algo, "size_bytes": size, "busbw_gbps": y})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn lines_need_every_other_varying_column_pinned() {
        let rows = vec![
            row(50, "ring", 1024, 1.0),
            row(100, "ring", 1024, 2.0),
            row(50, "tree", 1024, 0.5),
            row(100, "tree", 1024, 0.9),
            row(50, "ring", 2048, 1.5),
        ];
        let axes = vec!["bw".to_string()];
        let spec = PlotSpec {
            x: "bw".into(),
            y: "busbw_gbps".into(),
            by: Some("algorithm".into()),
            filters: vec![],
        };
        let e = lines(&rows, &axes, &spec).unwrap_err().to_string();
        assert!(
            e.contains("size_bytes (1024, 2048)") && e.contains("--where"),
            "{e}"
        );
        let spec = PlotSpec {
            filters: vec![("size_bytes".into(), "1024".into())],
            ..spec
        };
        let l = lines(&rows, &axes, &spec).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].0, "algorithm=ring");
        assert_eq!(l[0].1.len(), 2);
        // A value the axis code cannot take: refused, naming it.
        let mut huge = rows.clone();
        huge[0].insert("busbw_gbps".into(), json!(1.7e308));
        let e = lines(&huge, &axes, &spec).unwrap_err().to_string();
        assert!(
            e.contains("`busbw_gbps` is too large in the row of bw=50"),
            "{e}"
        );
        let svg = tempfile::NamedTempFile::new().unwrap();
        draw(svg.path(), "t", &spec, &l).unwrap();
        let text = std::fs::read_to_string(svg.path()).unwrap();
        assert!(text.contains("algorithm=tree"));
        let bad = PlotSpec {
            y: "nope".into(),
            ..spec
        };
        assert!(lines(&rows, &axes, &bad)
            .unwrap_err()
            .to_string()
            .contains("no column `nope`"));
    }
}
