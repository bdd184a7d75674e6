//! The `recv_async` futures of one kernel instance, for the check at its
//! end: a future never waited for fails the kernel (its message would stay
//! in the ring), whichever way the kernel runs (in step or recorded).

use crate::error::{HwError, TlCallError};
use std::collections::BTreeMap;

/// The futures issued and not yet waited for: id → direction.
#[derive(Debug, Default)]
pub struct Unwaited {
    next: u64,
    open: BTreeMap<u64, Option<String>>,
}

impl Unwaited {
    /// A new future on `dir`; its id.
    pub fn issued(&mut self, dir: Option<String>) -> u64 {
        self.next += 1;
        self.open.insert(self.next, dir);
        self.next
    }

    pub fn waited(&mut self, id: u64) {
        self.open.remove(&id);
    }

    /// The kernel's error if it ended with futures not waited for, naming
    /// the first one's call.
    pub fn error(&self, pe: &str) -> Option<TlCallError> {
        self.open.values().next().map(|dir| TlCallError {
            call: super::commands::call::recv_async(dir.as_deref()),
            pe: pe.to_string(),
            source: HwError::FutureNotWaited {
                count: self.open.len(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_not_waited_for_is_named() {
        let mut u = Unwaited::default();
        let a = u.issued(Some("W".into()));
        let b = u.issued(None);
        u.waited(a);
        let e = u.error("sip0.cube0.pe0").unwrap();
        assert_eq!(e.call, "tl.recv_async(dir=any)");
        assert!(matches!(e.source, HwError::FutureNotWaited { count: 1 }));
        u.waited(b);
        assert!(u.error("sip0.cube0.pe0").is_none());
        assert_eq!(
            super::super::commands::call::wait(Some("N")),
            "tl.wait(recv_async(dir=\"N\"))"
        );
    }
}
