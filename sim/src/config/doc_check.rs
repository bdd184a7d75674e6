//! `docs/configuration.md` documents every key of topology.yaml and
//! ccl.yaml, and documents nothing that is not a key.
//!
//! How a new key is caught: the key list is not written down here, it is
//! read off the serde structs themselves. [`Tracer`] is a
//! `serde::Deserializer` that plays the document: when a struct's derived
//! `Deserialize` asks for a struct it is handed every name in the
//! struct's field list (serde passes that list, renames applied), an
//! `Option` is always `Some`, a list has one element, an enum gets its
//! first variant (and its variant list is recorded), a map gets a
//! placeholder key (`algorithms.<name>`, `defaults.algorithms.<collective>`).
//! So a field added to any struct reachable from [`TopologySpec`] or
//! [`CclConfig`], however nested and whether optional or not, becomes a
//! traced key path that the doc's tables must have a row for, and a new
//! enum variant must be named in its key's row. (An enum variant that
//! carries data makes the tracer fail loudly until it is taught one.) The one struct serde
//! cannot list ([`AlgorithmEntry`], whose `#[serde(flatten)] params` makes
//! it a map) gets its field names from its derived `Debug`; each must
//! then be recognised by the derive as a key (a renamed field would not
//! be), so that list cannot go stale either.
//!
//! Each traced key is also left out once: if the struct still
//! deserialises the key is optional, else required, and the doc's Default
//! cell must start with `required` exactly for the required ones. Every
//! documented key must be traced, or be an algorithm parameter the
//! loader accepts (`chunk_size`, `reduce_op`, `kernel_*`: those are
//! checked by name in `ccl.rs`, so a new parameter name is the one thing
//! this test cannot see). Every key the shipped configs/topology.yaml,
//! configs/ideal_ring.yaml and configs/ccl.yaml use must be documented too.

use super::ccl::{AlgorithmEntry, CclConfig};
use super::{Origin, TopologySpec, DEFAULT_CCL_YAML, DEFAULT_TOPOLOGY_YAML};
use serde::de::value::{Error, StrDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_yaml::Value;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

const IDEAL_RING_YAML: &str = include_str!("../../../configs/ideal_ring.yaml");

/// The placeholder key of the `algorithms` map (and the flattened entry).
const ENTRY: &str = "algorithms.<name>";
/// The field of [`AlgorithmEntry`] that holds the parameters (flattened:
/// its keys are the entry's other keys).
const FLATTENED: &str = "params";

/// What the tracer saw at one key path.
#[derive(Debug, Default, Clone)]
struct Node {
    /// A value (number, string, bool, enum), not a struct, map or list.
    leaf: bool,
    /// A key of a struct (so it can be left out to see if it is required).
    field: bool,
    /// Wrapped in `Option`.
    option: bool,
    /// The variants of an enum value.
    variants: Vec<&'static str>,
    /// Asked for as "any value": not a typed key of the struct.
    any: bool,
}

/// The tracer's record and its settings.
#[derive(Default)]
struct Trace {
    nodes: BTreeMap<String, Node>,
    /// Keys handed to the map at a path, and whether they are the fields
    /// of a flattened struct rather than placeholders.
    map_keys: BTreeMap<String, (Vec<String>, bool)>,
    /// A key path to leave out.
    omit: Option<String>,
}

/// A `Deserializer` standing for the value at `path` (see the module doc).
struct Tracer<'t> {
    path: String,
    trace: &'t RefCell<Trace>,
}

impl Tracer<'_> {
    fn note(&self, f: impl FnOnce(&mut Node)) {
        f(self
            .trace
            .borrow_mut()
            .nodes
            .entry(self.path.clone())
            .or_default());
    }
}

fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

macro_rules! numbers {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
            self.note(|n| n.leaf = true);
            v.visit_u64(1)
        }
    )*};
}

impl<'de, 't> de::Deserializer<'de> for Tracer<'t> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.note(|n| {
            n.leaf = true;
            n.any = true;
        });
        v.visit_unit()
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.note(|n| n.leaf = true);
        v.visit_bool(false)
    }

    numbers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_f32 deserialize_f64
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_str(v)
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.note(|n| n.leaf = true);
        v.visit_str("x")
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_str(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.note(|n| n.option = true);
        v.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.note(|_| {});
        let element = Tracer {
            path: format!("{}[]", self.path),
            trace: self.trace,
        };
        v.visit_seq(One(Some(element)))
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.note(|_| {});
        let (keys, fields) = self
            .trace
            .borrow()
            .map_keys
            .get(&self.path)
            .cloned()
            .ok_or_else(|| {
                de::Error::custom(format!("no placeholder key for the map at {}", self.path))
            })?;
        v.visit_map(Keys::new(self, keys, fields))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        self.note(|_| {});
        let keys = fields.iter().map(|f| f.to_string()).collect();
        v.visit_map(Keys::new(self, keys, true))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        self.note(|n| {
            n.leaf = true;
            n.variants = variants.to_vec();
        });
        let first = variants.first().copied().ok_or_else(|| {
            de::Error::custom(format!("an enum without variants at {}", self.path))
        })?;
        v.visit_enum(UnitVariant(first))
    }

    serde::forward_to_deserialize_any! {
        i128 u128 bytes byte_buf unit unit_struct newtype_struct tuple
        tuple_struct identifier ignored_any
    }
}

/// The keys of a struct or map, each value a [`Tracer`] one level down.
struct Keys<'t, I> {
    parent: String,
    keys: I,
    fields: bool,
    current: Option<String>,
    trace: &'t RefCell<Trace>,
}

impl<'t> Keys<'t, std::vec::IntoIter<String>> {
    fn new(at: Tracer<'t>, keys: Vec<String>, fields: bool) -> Self {
        Keys {
            parent: at.path,
            keys: keys.into_iter(),
            fields,
            current: None,
            trace: at.trace,
        }
    }
}

impl<'de, I: Iterator<Item = String>> MapAccess<'de> for Keys<'_, I> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let omit = self.trace.borrow().omit.clone();
        let Some(key) = self
            .keys
            .by_ref()
            .find(|k| omit.as_deref() != Some(child(&self.parent, k).as_str()))
        else {
            return Ok(None);
        };
        self.current = Some(key.clone());
        let d: StringDeserializer<Error> = key.into_deserializer();
        seed.deserialize(d).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let key = self.current.take().expect("a key before its value");
        let value = Tracer {
            path: child(&self.parent, &key),
            trace: self.trace,
        };
        if self.fields {
            value.note(|n| n.field = true);
        }
        seed.deserialize(value)
    }
}

/// A list of one element.
struct One<'t>(Option<Tracer<'t>>);

impl<'de> SeqAccess<'de> for One<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0.take().map(|t| seed.deserialize(t)).transpose()
    }
}

/// An enum value: its first variant, which must be a unit variant.
struct UnitVariant(&'static str);

impl<'de> de::EnumAccess<'de> for UnitVariant {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let d: StrDeserializer<Error> = self.0.into_deserializer();
        Ok((seed.deserialize(d)?, self))
    }
}

impl<'de> de::VariantAccess<'de> for UnitVariant {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _: T) -> Result<T::Value, Error> {
        Err(de::Error::custom(format!(
            "variant {} is not a unit variant: teach the tracer",
            self.0
        )))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _: usize, _: V) -> Result<V::Value, Error> {
        Err(de::Error::custom(format!(
            "variant {} is not a unit variant: teach the tracer",
            self.0
        )))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Error> {
        Err(de::Error::custom(format!(
            "variant {} is not a unit variant: teach the tracer",
            self.0
        )))
    }
}

/// A traced key as the doc names it.
#[derive(Debug, Clone, Default)]
struct Key {
    node: Node,
    /// Leaving it out fails (inside its parent, when the parent is given).
    required: bool,
}

impl Key {
    /// Values must be documented, and so must optional sections (what
    /// happens without them); required sections may be.
    fn must_be_documented(&self) -> bool {
        self.node.leaf || (self.node.field && !self.required)
    }
}

type MapKeys = BTreeMap<String, (Vec<String>, bool)>;

/// Deserialise a `T` from the tracer; the nodes it asked for.
fn trace<T: de::DeserializeOwned>(
    map_keys: &MapKeys,
    omit: Option<&str>,
) -> Result<BTreeMap<String, Node>, Error> {
    let trace = RefCell::new(Trace {
        nodes: BTreeMap::new(),
        map_keys: map_keys.clone(),
        omit: omit.map(str::to_string),
    });
    T::deserialize(Tracer {
        path: String::new(),
        trace: &trace,
    })?;
    let mut nodes = trace.into_inner().nodes;
    nodes.remove("");
    Ok(nodes)
}

/// Every key of `T` by its documented path (a list of values under the
/// list's own key: `cube.pe_layout.corners`, not `corners[]`).
fn keys_of<T: de::DeserializeOwned>(map_keys: &MapKeys) -> BTreeMap<String, Key> {
    let nodes = trace::<T>(map_keys, None).unwrap_or_else(|e| {
        panic!(
            "the tracer cannot build a {}: {e}",
            std::any::type_name::<T>()
        )
    });
    let mut keys: BTreeMap<String, Key> = BTreeMap::new();
    for (path, n) in &nodes {
        let required = n.field && trace::<T>(map_keys, Some(path)).is_err();
        let doc_path = path.strip_suffix("[]").unwrap_or(path);
        let k = keys.entry(doc_path.to_string()).or_default();
        k.node.leaf |= n.leaf;
        k.node.field |= n.field;
        k.node.option |= n.option;
        k.node.any |= n.any;
        k.node.variants.extend(&n.variants);
        k.required |= required;
    }
    keys
}

fn topology_keys() -> BTreeMap<String, Key> {
    keys_of::<TopologySpec>(&MapKeys::new())
}

fn ccl_keys() -> BTreeMap<String, Key> {
    let map_keys = MapKeys::from([
        (
            "defaults.algorithms".into(),
            (vec!["<collective>".into()], false),
        ),
        ("algorithms".into(), (vec!["<name>".into()], false)),
        (ENTRY.into(), (entry_fields(), true)),
    ]);
    keys_of::<CclConfig>(&map_keys)
}

/// The fields of [`AlgorithmEntry`] but the flattened one, from its
/// derived `Debug` (serde does not list the fields of a struct with a
/// flattened field).
fn entry_fields() -> Vec<String> {
    let entry: AlgorithmEntry = serde_yaml::from_str("module: m").expect("a minimal entry");
    let fields = debug_fields(&format!("{entry:?}"));
    assert!(
        fields.iter().any(|f| f == FLATTENED),
        "AlgorithmEntry has no field {FLATTENED:?} any more: update FLATTENED ({fields:?})"
    );
    fields.into_iter().filter(|f| f != FLATTENED).collect()
}

/// The field names of a derived `Debug` of a struct, `Name { a: 1, b: None }`.
fn debug_fields(text: &str) -> Vec<String> {
    let body = text
        .split_once('{')
        .and_then(|(_, b)| b.trim_end().strip_suffix('}'))
        .unwrap_or_else(|| panic!("not a struct's Debug: {text}"));
    let (mut pieces, mut start, mut depth, mut quoted, mut escaped) =
        (Vec::new(), 0, 0, false, false);
    for (i, c) in body.char_indices() {
        if quoted {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                pieces.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(&body[start..]);
    pieces
        .iter()
        .filter_map(|p| p.split_once(':').map(|(name, _)| name.trim().to_string()))
        .collect()
}

/// One row of a key table of the doc.
struct Row {
    file: Option<&'static str>,
    key: String,
    default: String,
    text: String,
    line: usize,
}

/// The rows of every table whose header starts with `Key` (and has a
/// `Default` column), with the config file of the `##` section they are in.
fn doc_rows(doc: &str, problems: &mut Vec<String>) -> Vec<Row> {
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_start_matches('|')
            .trim_end_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let (mut rows, mut file, mut fenced) = (Vec::new(), None, false);
    let mut table: Option<(usize, usize)> = None; // (columns, Default column)
    let mut in_table = false;
    for (i, line) in doc.lines().enumerate() {
        let n = i + 1;
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            file = if h.contains("topology.yaml") {
                Some("topology.yaml")
            } else if h.contains("ccl.yaml") {
                Some("ccl.yaml")
            } else {
                None
            };
        }
        if !line.trim_start().starts_with('|') {
            (in_table, table) = (false, None);
            continue;
        }
        let c = cells(line);
        if !in_table {
            in_table = true;
            if c[0] == "Key" {
                match c.iter().position(|h| h == "Default") {
                    Some(d) => table = Some((c.len(), d)),
                    None => {
                        problems.push(format!("line {n}: a key table without a Default column"))
                    }
                }
            }
            continue;
        }
        let Some((columns, default)) = table else {
            continue;
        };
        if c.iter()
            .all(|x| x.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
        {
            continue; // the separator row
        }
        if c.len() != columns {
            problems.push(format!(
                "line {n}: {} cells, the header has {columns} (a `|` inside a cell?)",
                c.len()
            ));
            continue;
        }
        let Some(key) = c[0].strip_prefix('`').and_then(|k| k.strip_suffix('`')) else {
            problems.push(format!(
                "line {n}: the first cell is not a `key.path`: {}",
                c[0]
            ));
            continue;
        };
        if file.is_none() {
            problems.push(format!(
                "line {n}: key `{key}` is not under a `## ... topology.yaml` or `## ... ccl.yaml` heading"
            ));
        }
        rows.push(Row {
            file,
            key: key.to_string(),
            default: c[default].clone(),
            text: line.to_string(),
            line: n,
        });
    }
    rows
}

/// Whether `key` is an algorithm parameter (`algorithms.<name>.chunk_size`,
/// `kernel_*`) that ccl.yaml accepts.
fn is_accepted_parameter(key: &str) -> bool {
    let Some(p) = key.strip_prefix(&format!("{ENTRY}.")) else {
        return false;
    };
    let p = p.replace('*', "x");
    !p.contains('.')
        && CclConfig::from_yaml(
            &format!("algorithms:\n  a: {{module: m, {p}: 1}}\n"),
            Origin::Embedded("doc_check"),
        )
        .is_ok()
}

/// The key paths a config file uses (maps of entries by placeholder).
fn example_keys(text: &str) -> BTreeSet<String> {
    fn walk(v: &Value, path: &str, out: &mut BTreeSet<String>) {
        match v {
            Value::Mapping(m) => {
                for (k, v) in m {
                    let k = match path {
                        "algorithms" => "<name>",
                        "defaults.algorithms" => "<collective>",
                        _ => k.as_str().expect("string keys"),
                    };
                    walk(v, &child(path, k), out);
                }
            }
            Value::Sequence(items) => {
                out.insert(path.to_string());
                for item in items.iter().filter(|i| i.is_mapping()) {
                    walk(item, &format!("{path}[]"), out);
                }
            }
            _ => {
                out.insert(path.to_string());
            }
        }
    }
    let v: Value = serde_yaml::from_str(text).expect("the shipped configs parse");
    let mut out = BTreeSet::new();
    walk(&v, "", &mut out);
    out
}

/// What is wrong with `doc`'s tables of `file` against the structs.
fn problems(doc: &str, file: &'static str) -> Vec<String> {
    let (keys, examples) = match file {
        "topology.yaml" => (
            topology_keys(),
            vec![DEFAULT_TOPOLOGY_YAML, IDEAL_RING_YAML],
        ),
        _ => (ccl_keys(), vec![DEFAULT_CCL_YAML]),
    };
    let mut problems = Vec::new();
    let rows = doc_rows(doc, &mut problems);
    let mut documented = BTreeMap::new();
    for row in rows.iter().filter(|r| r.file == Some(file)) {
        if let Some(first) = documented.insert(row.key.as_str(), row) {
            problems.push(format!(
                "`{}` is documented twice (lines {} and {})",
                row.key, first.line, row.line
            ));
        }
        match keys.get(&row.key) {
            Some(k) => {
                let says_required = row.default.starts_with("required");
                if says_required != k.required {
                    problems.push(format!(
                        "line {}: `{}` is {}, but its Default cell {:?} {} with \"required\"",
                        row.line,
                        row.key,
                        if k.required { "required" } else { "optional" },
                        row.default,
                        if says_required {
                            "starts"
                        } else {
                            "does not start"
                        }
                    ));
                }
                for v in &k.node.variants {
                    if !row.text.contains(&format!("`{v}`")) {
                        problems.push(format!(
                            "line {}: `{}` does not name its value `{v}`",
                            row.line, row.key
                        ));
                    }
                }
            }
            None if file == "ccl.yaml" && is_accepted_parameter(&row.key) => {}
            None => problems.push(format!(
                "line {}: `{}` is not a key of {file}",
                row.line, row.key
            )),
        }
    }
    for (path, k) in &keys {
        if k.node.any {
            problems.push(format!(
                "`{path}` is not a key serde knows under that name (a renamed field of AlgorithmEntry?)"
            ));
        } else if k.must_be_documented() && !documented.contains_key(path.as_str()) {
            problems.push(format!(
                "`{path}` ({}) has no row in a key table under the {file} heading of docs/configuration.md",
                if k.required { "required" } else { "optional" }
            ));
        }
    }
    for text in examples {
        for path in example_keys(text) {
            if !documented.contains_key(path.as_str()) {
                problems.push(format!("`{path}`, used in configs/, is not documented"));
            }
        }
    }
    problems
}

const DOC_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");

fn doc() -> String {
    std::fs::read_to_string(DOC_PATH).unwrap_or_else(|e| panic!("cannot read {DOC_PATH}: {e}"))
}

fn assert_documented(file: &'static str) {
    let p = problems(&doc(), file);
    assert!(
        p.is_empty(),
        "docs/configuration.md vs {file}:\n  {}",
        p.join("\n  ")
    );
}

#[test]
fn every_topology_yaml_key_is_documented() {
    assert_documented("topology.yaml");
}

#[test]
fn every_ccl_yaml_key_is_documented() {
    assert_documented("ccl.yaml");
}

#[test]
fn the_tracer_sees_nested_optional_and_enum_keys() {
    let t = topology_keys();
    assert!(t["system.sips.count"].required);
    assert!(!t["system.sips.topology"].required);
    assert_eq!(
        t["system.sips.topology"].node.variants,
        ["ring_1d", "torus_2d", "mesh_2d_no_wrap"]
    );
    assert!(!t["cube.hbm.exclusion_zone"].required && t["cube.hbm.exclusion_zone"].node.option);
    assert!(t["cube.hbm.exclusion_zone.x"].node.leaf);
    assert!(!t["sip.pcie"].required && t["sip.pcie.endpoints"].required);
    assert_eq!(
        t["cube.pe_layout.corners"].node.variants,
        ["nw", "ne", "sw", "se"]
    );
    assert!(t["sip.pcie.cubes"].node.leaf && !t["sip.pcie.cubes"].required);
    assert!(t["pe.gemm.throughput_tflops.i32"].node.leaf);
    let c = ccl_keys();
    assert!(!c["algorithms"].required && !c["defaults"].required);
    assert!(c["algorithms.<name>.module"].required);
    assert!(!c["algorithms.<name>.slot_kib"].required);
    assert!(c["algorithms.<name>.backpressure"]
        .node
        .variants
        .contains(&"poll"));
    assert!(c["defaults.algorithms.<collective>"].node.leaf);
    assert!(
        !c.contains_key("algorithms.<name>.params"),
        "the flattened field is no key"
    );
    assert!(
        !c.contains_key("base_dir"),
        "serde(skip) fields are no keys"
    );
}

#[test]
fn a_missing_row_or_a_stale_row_is_reported() {
    let doc = doc();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `cube.hbm.stacks`"))
        .expect("a row for cube.hbm.stacks");
    let without = doc.replace(&format!("{row}\n"), "");
    let p = problems(&without, "topology.yaml");
    assert!(
        p.iter()
            .any(|m| m.contains("`cube.hbm.stacks` (optional) has no row")),
        "{p:?}"
    );
    let stale = doc.replace(
        &format!("{row}\n"),
        &format!("{row}\n| `cube.hbm.stack_count` | | | 1 | |\n"),
    );
    let p = problems(&stale, "topology.yaml");
    assert!(
        p.iter()
            .any(|m| m.contains("`cube.hbm.stack_count` is not a key")),
        "{p:?}"
    );
}
