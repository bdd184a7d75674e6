//! The sweep file (`sweep.yaml`) and what it expands to: the axes, each a
//! key of topology.yaml or ccl.yaml named by its path (or one of the run's
//! own settings: `bench`, `args`, `algorithm`), and the points, their
//! product or their zip, in a fixed order (the first axis varies slowest).
//!
//! ```yaml
//! bench: ccl_allreduce
//! args: -b 1K -e 1M -f 4            # the bench's arguments (nccl-tests flags)
//! topology: my_topology.yaml        # default: the embedded one
//! ccl: my_ccl.yaml                  # default: the embedded one
//! mode: product                     # or zip
//! axes:
//!   system.inter_sip_link.bandwidth_gbps: [50, 100, 200]
//!   system.sips.count: [4, 8]
//!   defaults.algorithm: [ring_allreduce, tree_allreduce]
//! ```
//!
//! A key path is dot-separated; a number indexes a list
//! (`sip.pcie.cubes.0`). It may start with `topology.` or `ccl.`; without
//! it the file is the one whose top-level keys hold its first segment.
//! The key's parent must exist in the base file (a typo is a sweep error,
//! not thousands of failed points); the key itself may be new (an optional
//! key), and the point's configuration is then checked as any other.

use serde::Deserialize;
use serde_yaml::{Mapping, Value};
use std::path::{Path, PathBuf};

/// A sweep file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{path}: axis `{axis}`: {message}")]
    Axis {
        path: String,
        axis: String,
        message: String,
    },
}

/// How the axes combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every combination (nested loops in file order).
    #[default]
    Product,
    /// The i-th value of every axis together (all axes the same length).
    Zip,
}

/// Bench arguments: a string (split as a shell would) or a list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(untagged)]
enum ArgsField {
    #[default]
    None,
    Line(String),
    List(Vec<String>),
}

/// Settings of the Slurm job array (`sweep --slurm`); the command line
/// overrides them.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlurmSettings {
    /// Points run by one array task (default: enough that the array has
    /// at most 1000 tasks, Slurm's default `MaxArraySize` being 1001).
    pub points_per_task: Option<usize>,
    /// `--partition`.
    pub partition: Option<String>,
    /// `--time` of one task (Slurm's formats, e.g. `30:00`).
    pub time: Option<String>,
    /// `--mem` of one task in MiB (default: estimated from the largest
    /// point's machine and message size).
    pub mem_mib: Option<u64>,
    /// Further `#SBATCH` options, e.g. `[--account=proj, --qos=short]`.
    #[serde(default)]
    pub sbatch: Vec<String>,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    bench: String,
    #[serde(default)]
    args: ArgsField,
    topology: Option<PathBuf>,
    ccl: Option<PathBuf>,
    algorithm: Option<String>,
    #[serde(default)]
    timing_only: bool,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    axes: Mapping,
    #[serde(default)]
    slurm: SlurmSettings,
}

/// Which document an axis changes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The bench (name or path).
    Bench,
    /// Arguments added to the bench's (a string, split as a shell would).
    Args,
    /// `--algorithm` of the run.
    Algorithm,
    /// A key of topology.yaml, by its path.
    Topology(Vec<String>),
    /// A key of ccl.yaml, by its path.
    Ccl(Vec<String>),
}

/// One axis: a name (as the file wrote it), what it changes, its values.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
pub struct Axis {
    pub name: String,
    pub target: Target,
    pub values: Vec<Value>,
}

/// A base configuration file's text and where it came from (relative
/// `module:` paths of a ccl.yaml are relative to it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
pub struct BaseFile {
    /// None: the embedded default.
    pub path: Option<PathBuf>,
    pub text: String,
}

/// The sweep, resolved: base texts read, paths absolute, axes checked.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
pub struct Sweep {
    /// The sweep file's stem (names the job and the default results dir).
    pub name: String,
    pub bench: String,
    pub args: Vec<String>,
    pub algorithm: Option<String>,
    pub timing_only: bool,
    pub topology: BaseFile,
    pub ccl: BaseFile,
    pub mode: Mode,
    pub axes: Vec<Axis>,
    pub slurm: SlurmSettings,
}

/// One point: its index in the sweep's order and a value per axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Point<'a> {
    pub index: usize,
    pub values: Vec<(&'a Axis, &'a Value)>,
}

impl Sweep {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<Sweep, SpecError> {
        let text = crate::files::read_text(path).map_err(|e| SpecError::File {
            path: path.display().to_string(),
            message: format!("cannot read it: {e}"),
        })?;
        Sweep::parse(&text, path)
    }

    /// Check the sweep file `text` read from `path` (its relative paths
    /// are relative to the file's directory).
    pub fn parse(text: &str, path: &Path) -> Result<Sweep, SpecError> {
        let shown = path.display().to_string();
        let file_err = |message: String| SpecError::File {
            path: shown.clone(),
            message,
        };
        let f: SweepFile = serde_yaml::from_str(text).map_err(|e| file_err(e.to_string()))?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let base = |p: &Option<PathBuf>, embedded: &str, what: &str| -> Result<_, SpecError> {
            Ok(match p {
                None => BaseFile {
                    path: None,
                    text: embedded.to_string(),
                },
                Some(p) => {
                    let p = dir.join(p);
                    let text = crate::files::read_text(&p).map_err(|e| {
                        file_err(format!("{what}: cannot read {}: {e}", p.display()))
                    })?;
                    BaseFile {
                        path: Some(p),
                        text,
                    }
                }
            })
        };
        let topology = base(
            &f.topology,
            crate::config::DEFAULT_TOPOLOGY_YAML,
            "topology",
        )?;
        let ccl = base(&f.ccl, crate::config::DEFAULT_CCL_YAML, "ccl")?;
        let topo_doc: Value =
            serde_yaml::from_str(&topology.text).map_err(|e| file_err(format!("topology: {e}")))?;
        let ccl_doc: Value =
            serde_yaml::from_str(&ccl.text).map_err(|e| file_err(format!("ccl: {e}")))?;
        let args = match f.args {
            ArgsField::None => Vec::new(),
            ArgsField::List(l) => l,
            ArgsField::Line(s) => split_args(&s).map_err(|m| file_err(format!("args: {m}")))?,
        };
        let mut axes = Vec::new();
        for (k, v) in &f.axes {
            let name = match k {
                Value::String(s) => s.clone(),
                other => {
                    return Err(file_err(format!(
                        "axes: a key must be a string, got {other:?}"
                    )))
                }
            };
            let axis_err = |message: String| SpecError::Axis {
                path: shown.clone(),
                axis: name.clone(),
                message,
            };
            let values = match v {
                Value::Sequence(s) if !s.is_empty() => s.clone(),
                Value::Sequence(_) => return Err(axis_err("has no values".into())),
                _ => return Err(axis_err("its values must be a list, e.g. [1, 2]".into())),
            };
            let target = target_of(&name, &topo_doc, &ccl_doc).map_err(axis_err)?;
            for v in &values {
                check_value(&target, v).map_err(axis_err)?;
            }
            axes.push(Axis {
                name,
                target,
                values,
            });
        }
        if f.mode == Mode::Zip {
            if let Some(first) = axes.first() {
                if let Some(odd) = axes.iter().find(|a| a.values.len() != first.values.len()) {
                    return Err(file_err(format!(
                        "mode zip needs axes of one length: `{}` has {} values, `{}` has {}",
                        first.name,
                        first.values.len(),
                        odd.name,
                        odd.values.len()
                    )));
                }
            }
        }
        let bench = if looks_like_path(&f.bench) {
            dir.join(&f.bench).display().to_string()
        } else {
            f.bench
        };
        let sweep = Sweep {
            name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "sweep".into()),
            bench,
            args,
            algorithm: f.algorithm,
            timing_only: f.timing_only,
            topology,
            ccl,
            mode: f.mode,
            axes,
            slurm: f.slurm,
        };
        if sweep.is_empty() {
            return Err(file_err("the axes give no point".into()));
        }
        Ok(sweep)
    }

    /// The number of points.
    pub fn len(&self) -> usize {
        match self.mode {
            Mode::Product => self.axes.iter().map(|a| a.values.len()).product(),
            Mode::Zip => self.axes.first().map_or(1, |a| a.values.len()),
        }
    }

    /// Never: a sweep has at least one point (checked by [`Sweep::parse`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Point `index` (< [`Sweep::len`]).
    pub fn point(&self, index: usize) -> Point<'_> {
        let mut values = Vec::with_capacity(self.axes.len());
        match self.mode {
            Mode::Zip => {
                for a in &self.axes {
                    values.push((a, &a.values[index]));
                }
            }
            Mode::Product => {
                // Mixed radix, the last axis the fastest digit.
                let mut rest = index;
                for a in self.axes.iter().rev() {
                    values.push((a, &a.values[rest % a.values.len()]));
                    rest /= a.values.len();
                }
                values.reverse();
            }
        }
        Point { index, values }
    }

    /// Every point, in order.
    pub fn points(&self) -> impl Iterator<Item = Point<'_>> {
        (0..self.len()).map(|i| self.point(i))
    }

    /// A digest of everything that decides the results: two sweeps with
    /// the same digest give the same results (resume refuses a directory
    /// of another sweep).
    pub fn digest(&self) -> String {
        let mut s = self.clone();
        // Where the results go and how the array is cut do not change them.
        s.slurm = SlurmSettings::default();
        s.name.clear();
        crate::digest::sha256_hex(
            serde_json::to_string(&s)
                .expect("a sweep serialises")
                .as_bytes(),
        )
    }
}

impl Point<'_> {
    /// `axis=value, ...`: how a point is named in messages.
    pub fn label(&self) -> String {
        if self.values.is_empty() {
            return "(the base configuration)".into();
        }
        self.values
            .iter()
            .map(|(a, v)| format!("{}={}", a.name, value_text(v)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The bench the point runs (its `bench` axis, else the sweep's).
    pub fn bench(&self, sweep: &Sweep) -> String {
        self.values
            .iter()
            .rev()
            .find(|(a, _)| a.target == Target::Bench)
            .map_or_else(|| sweep.bench.clone(), |(_, v)| value_text(v))
    }

    /// The point's topology.yaml and ccl.yaml texts, bench, arguments and
    /// algorithm.
    pub fn resolve(&self, sweep: &Sweep) -> Result<Resolved, String> {
        let mut r = Resolved {
            bench: self.bench(sweep),
            args: sweep.args.clone(),
            algorithm: sweep.algorithm.clone(),
            topology: String::new(),
            ccl: String::new(),
        };
        let (mut topo, mut ccl) = (Vec::new(), Vec::new());
        for (axis, v) in &self.values {
            match &axis.target {
                Target::Bench => {}
                Target::Args => r.args.extend(split_args(&value_text(v))?),
                Target::Algorithm => r.algorithm = Some(value_text(v)),
                Target::Topology(path) => topo.push((path, *v)),
                Target::Ccl(path) => ccl.push((path, *v)),
            }
        }
        r.topology = with_keys(&sweep.topology.text, &topo)?;
        r.ccl = with_keys(&sweep.ccl.text, &ccl)?;
        Ok(r)
    }
}

/// `text` with the keys at `paths` set; unchanged (with its comments, for
/// errors), and not parsed, when there are none.
fn with_keys(text: &str, keys: &[(&Vec<String>, &Value)]) -> Result<String, String> {
    if keys.is_empty() {
        return Ok(text.to_string());
    }
    let mut doc: Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    for (path, v) in keys {
        set(&mut doc, path, (*v).clone())?;
    }
    serde_yaml::to_string(&doc).map_err(|e| e.to_string())
}

/// What one point runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub bench: String,
    pub args: Vec<String>,
    pub algorithm: Option<String>,
    pub topology: String,
    pub ccl: String,
}

/// A value as a cell of the table and in labels: strings bare, the rest
/// as YAML writes them on one line.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => serde_json::to_string(other).unwrap_or_else(|_| format!("{other:?}")),
    }
}

fn looks_like_path(s: &str) -> bool {
    s.contains('/') || s.ends_with(".wasm")
}

fn split_args(s: &str) -> Result<Vec<String>, String> {
    shlex::split(s).ok_or_else(|| format!("cannot split `{s}` into arguments (an open quote?)"))
}

/// What axis `name` changes; for a key path, check its parent exists.
fn target_of(name: &str, topo: &Value, ccl: &Value) -> Result<Target, String> {
    match name {
        "bench" => return Ok(Target::Bench),
        "args" => return Ok(Target::Args),
        "algorithm" => return Ok(Target::Algorithm),
        _ => {}
    }
    let segments: Vec<String> = name.split('.').map(str::to_string).collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err("a key path is dot-separated names, e.g. system.sips.count".into());
    }
    let top_keys = |doc: &Value| -> Vec<String> {
        doc.as_mapping()
            .map(|m| {
                m.keys()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (file, path) = match segments[0].as_str() {
        "topology" if segments.len() > 1 => ("topology", segments[1..].to_vec()),
        "ccl" if segments.len() > 1 => ("ccl", segments[1..].to_vec()),
        first => {
            let in_topo = top_keys(topo).iter().any(|k| k == first);
            let in_ccl = top_keys(ccl).iter().any(|k| k == first);
            match (in_topo, in_ccl) {
                (true, false) => ("topology", segments.clone()),
                (false, true) => ("ccl", segments.clone()),
                (true, true) => {
                    return Err(format!(
                        "`{first}` is a key of both topology.yaml and ccl.yaml: write topology.{name} or ccl.{name}"
                    ))
                }
                (false, false) => {
                    return Err(format!(
                        "`{first}` is not a key of topology.yaml ({}) nor of ccl.yaml ({}); \
                         the other axes are bench, args and algorithm",
                        top_keys(topo).join(", "),
                        top_keys(ccl).join(", ")
                    ))
                }
            }
        }
    };
    let doc = if file == "topology" { topo } else { ccl };
    // The parent must exist; the leaf may be a key the file leaves out.
    let mut at = doc;
    for (i, seg) in path[..path.len() - 1].iter().enumerate() {
        at = child(at, seg).ok_or_else(|| {
            format!(
                "{file}.yaml has no `{}` (the keys there: {})",
                path[..=i].join("."),
                keys_of(at)
            )
        })?;
    }
    if !(at.is_mapping() || at.is_sequence()) {
        return Err(format!(
            "{file}.yaml's `{}` is a value, not a section",
            path[..path.len() - 1].join(".")
        ));
    }
    Ok(if file == "topology" {
        Target::Topology(path)
    } else {
        Target::Ccl(path)
    })
}

fn check_value(target: &Target, v: &Value) -> Result<(), String> {
    match target {
        Target::Bench | Target::Args | Target::Algorithm
            if !matches!(v, Value::String(_) | Value::Number(_)) =>
        {
            Err(format!(
                "{} must be a string, got {}",
                match target {
                    Target::Bench => "a bench",
                    Target::Args => "the arguments",
                    _ => "an algorithm",
                },
                value_text(v)
            ))
        }
        _ => Ok(()),
    }
}

fn child<'a>(v: &'a Value, seg: &str) -> Option<&'a Value> {
    match v {
        Value::Mapping(m) => m.get(seg),
        Value::Sequence(s) => seg.parse::<usize>().ok().and_then(|i| s.get(i)),
        _ => None,
    }
}

fn keys_of(v: &Value) -> String {
    match v {
        Value::Mapping(m) => m
            .keys()
            .filter_map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        Value::Sequence(s) => format!("a list of {}", s.len()),
        _ => "none".into(),
    }
}

/// Set the key at `path` of `doc` to `value`.
fn set(doc: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    let (leaf, parents) = path.split_last().expect("a path has a segment");
    let mut at = doc;
    for seg in parents {
        at = match at {
            Value::Mapping(m) => m.get_mut(seg.as_str()),
            Value::Sequence(s) => seg.parse::<usize>().ok().and_then(|i| s.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("no `{}`", path.join(".")))?;
    }
    match at {
        Value::Mapping(m) => {
            m.insert(Value::String(leaf.clone()), value);
            Ok(())
        }
        Value::Sequence(s) => {
            let i: usize = leaf
                .parse()
                .map_err(|_| format!("`{}`: a list is indexed by a number", path.join(".")))?;
            let len = s.len();
            let slot = s
                .get_mut(i)
                .ok_or_else(|| format!("`{}`: index {i} past the list's {len}", path.join(".")))?;
            *slot = value;
            Ok(())
        }
        _ => Err(format!("`{}`: its parent is not a section", path.join("."))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Sweep, SpecError> {
        Sweep::parse(text, Path::new("/tmp/s.yaml"))
    }

    #[test]
    fn product_is_nested_loops_in_file_order() {
        let s = parse(
            "bench: ccl_allreduce\naxes:\n  system.sips.count: [4, 8]\n  defaults.algorithm: [a, b, c]\n",
        )
        .unwrap();
        assert_eq!(s.len(), 6);
        let labels: Vec<String> = s.points().map(|p| p.label()).collect();
        assert_eq!(labels[0], "system.sips.count=4, defaults.algorithm=a");
        assert_eq!(labels[2], "system.sips.count=4, defaults.algorithm=c");
        assert_eq!(labels[3], "system.sips.count=8, defaults.algorithm=a");
        assert!(matches!(s.axes[0].target, Target::Topology(_)));
        assert!(matches!(s.axes[1].target, Target::Ccl(_)));
    }

    #[test]
    fn zip_pairs_values_and_needs_equal_lengths() {
        let s = parse(
            "bench: x\nmode: zip\naxes:\n  system.sips.count: [4, 8]\n  args: ['-b 1K', '-b 2K']\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.point(1).label(), "system.sips.count=8, args=-b 2K");
        let e =
            parse("bench: x\nmode: zip\naxes:\n  system.sips.count: [4, 8]\n  args: ['-b 1K']\n")
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("`system.sips.count` has 2 values, `args` has 1"),
            "{e}"
        );
    }

    #[test]
    fn a_point_changes_its_keys_and_nothing_else() {
        let s = parse(
            "bench: x\nargs: -b 8\naxes:\n  system.inter_sip_link.bandwidth_gbps: [50]\n  args: ['-e 1M']\n  algorithm: [tree_allreduce]\n",
        )
        .unwrap();
        let r = s.point(0).resolve(&s).unwrap();
        assert_eq!(r.args, ["-b", "8", "-e", "1M"]);
        assert_eq!(r.algorithm.as_deref(), Some("tree_allreduce"));
        let t: Value = serde_yaml::from_str(&r.topology).unwrap();
        assert_eq!(
            t["system"]["inter_sip_link"]["bandwidth_gbps"],
            Value::from(50)
        );
        assert_eq!(
            t["system"]["inter_sip_link"]["latency_ns"],
            Value::from(500)
        );
        // ccl.yaml untouched: the same text.
        assert_eq!(r.ccl, crate::config::DEFAULT_CCL_YAML);
    }

    #[test]
    fn bad_axes_are_refused_naming_them() {
        let e = parse("bench: x\naxes:\n  system.sipz.count: [4]\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("axis `system.sipz.count`") && e.contains("no `system.sipz`"),
            "{e}"
        );
        let e = parse("bench: x\naxes:\n  nothing.here: [4]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`nothing` is not a key of topology.yaml"), "{e}");
        let e = parse("bench: x\naxes:\n  system.sips.count: []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no values"), "{e}");
        let e = parse("bench: x\naxes:\n  system.sips.count.x: [1]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a value, not a section"), "{e}");
        let e = parse("bench: x\nbogus: 1\n").unwrap_err().to_string();
        assert!(e.contains("unknown field `bogus`"), "{e}");
        // A new leaf under an existing section is fine (optional keys).
        parse("bench: x\naxes:\n  system.sips.w: [2]\n").unwrap();
        parse("bench: x\naxes:\n  ccl.defaults.world_size: [2]\n").unwrap();
    }

    #[test]
    fn no_axes_is_one_point_and_the_digest_ignores_the_name() {
        let a = parse("bench: x\n").unwrap();
        assert_eq!(a.len(), 1);
        let b = Sweep::parse("bench: x\n", Path::new("/tmp/other.yaml")).unwrap();
        assert_eq!(a.digest(), b.digest());
        let c = parse("bench: y\n").unwrap();
        assert_ne!(a.digest(), c.digest());
    }
}
