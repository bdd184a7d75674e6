//! What an algorithm tells the host when a process group is set up, as plain
//! Rust (no bindings): its ccl.yaml parameters ([`Params`]), the install keys
//! it needs when ccl.yaml is silent ([`EntryDefaults`]) and the neighbour
//! rows it may rewrite ([`Link`], seed 003 §3).

use std::collections::BTreeSet;
use std::fmt;

/// The value of one ccl.yaml parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Int(i64),
    Float(f64),
    Text(String),
    Flag(bool),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::Text(v) => write!(f, "{v:?}"),
            ParamValue::Flag(v) => write!(f, "{v}"),
        }
    }
}

/// The parameters of an algorithm's ccl.yaml entry (`chunk_size`,
/// `reduce_op`, `kernel_*`), seed 004 D4's `**kernel_config`.
///
/// Read each parameter you accept with a typed getter, then call
/// [`Params::finish`]: a key you did not read is an error that names it, so a
/// misspelt parameter never passes silently.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    items: Vec<(String, ParamValue)>,
    read: std::cell::RefCell<BTreeSet<String>>,
}

impl Params {
    pub fn new(items: Vec<(String, ParamValue)>) -> Self {
        Params {
            items,
            read: Default::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The raw value of `name`; asking marks `name` as a parameter this
    /// algorithm takes (given or not).
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.read.borrow_mut().insert(name.to_string());
        self.items.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// An integer parameter, if given; an error if it is not an integer.
    pub fn int(&self, name: &str) -> Result<Option<i64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Int(v)) => Ok(Some(*v)),
            Some(v) => Err(format!("parameter {name} must be an integer, got {v}")),
        }
    }

    /// A number (integer or not), if given.
    pub fn float(&self, name: &str) -> Result<Option<f64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Int(v)) => Ok(Some(*v as f64)),
            Some(ParamValue::Float(v)) => Ok(Some(*v)),
            Some(v) => Err(format!("parameter {name} must be a number, got {v}")),
        }
    }

    /// A string parameter, if given.
    pub fn text(&self, name: &str) -> Result<Option<&str>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Text(v)) => Ok(Some(v)),
            Some(v) => Err(format!("parameter {name} must be a string, got {v}")),
        }
    }

    /// A true/false parameter, if given.
    pub fn flag(&self, name: &str) -> Result<Option<bool>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Flag(v)) => Ok(Some(*v)),
            Some(v) => Err(format!("parameter {name} must be true or false, got {v}")),
        }
    }

    /// The common case: integer parameters that go straight into kernel
    /// arguments. Each `(name, index)` given overwrites `args[index]`; then
    /// [`Params::finish`].
    pub fn place_ints(&self, args: &mut [i64], at: &[(&str, usize)]) -> Result<(), String> {
        for &(name, index) in at {
            if let Some(v) = self.int(name)? {
                args[index] = v;
            }
        }
        self.finish()
    }

    /// Fail on every given parameter not asked for: the message lists them
    /// and the ones asked for.
    pub fn finish(&self) -> Result<(), String> {
        let read = self.read.borrow();
        let unread: Vec<&str> = self
            .items
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !read.contains(*k))
            .collect();
        if unread.is_empty() {
            return Ok(());
        }
        let accepted: Vec<&str> = read.iter().map(String::as_str).collect();
        Err(format!(
            "unknown parameter{} {} (this algorithm takes {})",
            if unread.len() == 1 { "" } else { "s" },
            unread.join(", "),
            if accepted.is_empty() {
                "none".to_string()
            } else {
                accepted.join(", ")
            }
        ))
    }
}

/// Install keys an algorithm needs when its ccl.yaml entry leaves them out,
/// spelled as in ccl.yaml. ccl.yaml wins over these, these over the host's
/// defaults (`ring_1d`, `leader_only`, `tcm`, 4 slots of 1 MiB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryDefaults {
    pub topology: Option<&'static str>,
    pub mapper: Option<&'static str>,
    pub buffer_kind: Option<&'static str>,
    pub n_slots: Option<u32>,
    /// Bytes per IPCQ slot.
    pub slot_size: Option<u64>,
    /// The shard layout checked before launch: `single_shard_per_rank`,
    /// `multi_pe_sip_local` or `one_shard_per_cube`.
    pub validator: Option<&'static str>,
}

/// One outgoing IPCQ direction of a participant: what it sends to `dir`
/// reaches participant `peer` (flat participant index), which receives it
/// from `peer_dir`. In a [`crate::Algorithm::neighbors`] result, `peer_dir`
/// `None` means: the builtin row's, when it had the same `dir` to the same
/// `peer`, else the compass opposite (E ↔ W, N ↔ S).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub dir: String,
    pub peer: u32,
    pub peer_dir: Option<String>,
}

impl Link {
    /// `dir` to `peer`, received under the default direction.
    pub fn to(dir: &str, peer: u32) -> Self {
        Link {
            dir: dir.to_string(),
            peer,
            peer_dir: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params::new(vec![
            ("chunk_size".into(), ParamValue::Int(64)),
            ("kernel_mode".into(), ParamValue::Text("fast".into())),
        ])
    }

    #[test]
    fn read_parameters_pass_and_unread_ones_are_named() {
        let p = params();
        assert_eq!(p.int("chunk_size"), Ok(Some(64)));
        assert_eq!(p.int("kernel_rounds"), Ok(None));
        let e = p.finish().unwrap_err();
        assert_eq!(
            e,
            "unknown parameter kernel_mode (this algorithm takes chunk_size, kernel_rounds)"
        );
        assert_eq!(p.text("kernel_mode"), Ok(Some("fast")));
        assert_eq!(p.finish(), Ok(()));
    }

    #[test]
    fn integer_parameters_go_into_their_argument_slots() {
        let p = Params::new(vec![("kernel_mode".into(), ParamValue::Int(3))]);
        let mut args = [8, 0, 0];
        p.place_ints(&mut args, &[("kernel_mode", 1), ("kernel_rounds", 2)])
            .unwrap();
        assert_eq!(args, [8, 3, 0]);
        let p = Params::new(vec![("kernel_moda".into(), ParamValue::Int(3))]);
        assert_eq!(
            p.place_ints(&mut args, &[("kernel_mode", 1)]),
            Err("unknown parameter kernel_moda (this algorithm takes kernel_mode)".into())
        );
    }

    #[test]
    fn a_parameter_of_the_wrong_type_is_an_error() {
        let p = params();
        assert_eq!(
            p.flag("chunk_size").unwrap_err(),
            "parameter chunk_size must be true or false, got 64"
        );
        assert_eq!(p.float("chunk_size"), Ok(Some(64.0)));
        assert!(Params::default().finish().is_ok());
    }
}
