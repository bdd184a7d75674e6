//! What a run remembers of splits that gave up: a run that chose to split
//! (see [`super::RunRequest::auto_partitions`]) and had to run again on
//! one partition writes down which run that was, and the next run of the
//! same bench, algorithm, arguments, machine and ccl.yaml does not try the
//! split again. A give-up can come late (a transfer that meets another
//! partition's traffic in the sweep's largest size: double_tree at 256
//! SIPs split for 48 s of a 50 s run before it gave up), so without the
//! memo every such run would cost about twice its time.
//!
//! An entry is a file `<hash>.txt` under `split-given-up/` in the
//! compiled-code cache's directory, holding why the split gave up; the
//! hash is the SHA-256 of everything the run's course depends on, and of
//! this binary's version. An entry only ever costs speed (the run it
//! names is the same on one partition), so a stale one (a bench file
//! changed under the same path) is harmless, and a missing or unreadable
//! one is a run that tries the split. `--no-cache` neither reads nor
//! writes entries.

use super::RunRequest;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// The directory of the entries.
#[derive(Debug, Clone)]
pub struct SplitMemo {
    dir: PathBuf,
}

impl SplitMemo {
    /// The memo under `cache_dir` (the compiled-code cache's directory).
    pub fn under(cache_dir: &std::path::Path) -> Self {
        SplitMemo {
            dir: cache_dir.join("split-given-up"),
        }
    }

    /// Why the split of a run like `req` gave up, if one did.
    pub fn gave_up(&self, req: &RunRequest) -> Option<String> {
        std::fs::read_to_string(self.entry(req)).ok()
    }

    /// Remember that the split of a run like `req` gave up, and why (a
    /// failure to write is a debug note: the next run tries again).
    pub fn remember(&self, req: &RunRequest, why: &str) {
        let written =
            std::fs::create_dir_all(&self.dir).and_then(|()| std::fs::write(self.entry(req), why));
        if let Err(e) = written {
            tracing::debug!(target: "kernbench::split", "cannot remember the give-up in {}: {e}", self.dir.display());
        }
    }

    /// The runs remembered.
    pub fn len(&self) -> usize {
        self.entries().count()
    }

    /// Whether no run is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forget every run; how many there were.
    pub fn clear(&self) -> std::io::Result<usize> {
        let mut n = 0;
        for path in self.entries() {
            std::fs::remove_file(path)?;
            n += 1;
        }
        Ok(n)
    }

    fn entries(&self) -> impl Iterator<Item = PathBuf> {
        std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "txt"))
    }

    fn entry(&self, req: &RunRequest) -> PathBuf {
        self.dir.join(format!("{}.txt", key(req)))
    }
}

/// The hash of what a run's course depends on: the bench, the algorithm
/// asked for, the bench's arguments, the machine, ccl.yaml, whether bytes
/// are kept, and this binary's version (whose model may split otherwise).
fn key(req: &RunRequest) -> String {
    let text = format!(
        "{}\n{}\n{:?}\n{:?}\n{:?}\n{:?}\n{}",
        env!("CARGO_PKG_VERSION"),
        req.bench,
        req.algorithm,
        req.args,
        req.topology.spec,
        req.ccl,
        req.timing_only
    );
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CclConfig, TopologySpec};
    use std::sync::Arc;

    fn request(sips: u32, args: &[&str]) -> RunRequest {
        let mut spec = TopologySpec::default_embedded();
        spec.system.sips.count = sips;
        let topo = Arc::new(crate::topology::build(&spec).unwrap());
        RunRequest {
            args: args.iter().map(|a| a.to_string()).collect(),
            ..RunRequest::new("ccl_allreduce", topo, CclConfig::default_embedded())
        }
    }

    #[test]
    fn a_remembered_give_up_is_found_for_the_same_run_only() {
        let dir = tempfile::tempdir().unwrap();
        let memo = SplitMemo::under(dir.path());
        let run = request(8, &["-b", "8"]);
        assert_eq!(memo.gave_up(&run), None);
        memo.remember(&run, "a link was busy");
        assert_eq!(memo.gave_up(&run).as_deref(), Some("a link was busy"));
        assert_eq!(memo.gave_up(&request(8, &["-b", "16"])), None, "other args");
        assert_eq!(
            memo.gave_up(&request(9, &["-b", "8"])),
            None,
            "another machine"
        );
        let other_algorithm = RunRequest {
            algorithm: Some("tree_allreduce".into()),
            ..run.clone()
        };
        assert_eq!(memo.gave_up(&other_algorithm), None);
        assert_eq!(memo.len(), 1);
        assert_eq!(memo.clear().unwrap(), 1);
        assert_eq!(memo.gave_up(&run), None, "forgotten");
        // Nowhere to write: the run goes on, and the next one tries again.
        let nowhere = SplitMemo::under(&dir.path().join("c").join("no"));
        std::fs::write(dir.path().join("c"), "a file, not a directory").unwrap();
        nowhere.remember(&run, "x");
        assert_eq!(nowhere.gave_up(&run), None);
    }
}
