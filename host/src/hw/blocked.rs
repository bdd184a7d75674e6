//! Why a PE's kernel is waiting. The hot path records a small value (no
//! formatting, no search); the words — including who could unblock it —
//! are produced only when a deadlock report asks for them.

use crate::topology::PeCoord;

/// An IPCQ direction name (`"E"`, `"global_N"`, ...), shared, not copied.
pub type Dir = std::sync::Arc<str>;

/// What a blocked kernel waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// Its PE has [`super::machine::COMMAND_QUEUE_DEPTH`] commands in flight.
    CommandQueueFull,
    /// `send(dir)`: every slot of `peer`'s receive ring is held.
    SendNoSlot { dir: Dir, peer: PeCoord },
    /// `recv(dir)`: a message from `from` was sent, its data is in flight.
    RecvInFlight { dir: Option<Dir>, from: PeCoord },
    /// `recv(dir)`: no message has been sent to it yet.
    RecvWaiting { dir: Option<Dir> },
    /// `wait` on a `recv_async(dir)` future whose message has not landed.
    WaitFuture { dir: Option<Dir> },
}

impl Blocked {
    /// The report line. `senders(dir)` names the PEs that send to this
    /// direction (only asked for [`Blocked::RecvWaiting`]).
    pub fn describe(&self, senders: impl FnOnce(Option<&str>) -> String) -> String {
        let any = |d: &Option<Dir>| d.as_deref().unwrap_or("any").to_string();
        match self {
            Blocked::CommandQueueFull => {
                "command queue full: waiting for the oldest command".into()
            }
            Blocked::SendNoSlot { dir, peer } => {
                format!("send(dir={dir}): no free IPCQ slot at {peer} (all slots held)")
            }
            Blocked::RecvInFlight { dir, from } => {
                format!("recv(dir={}): data from {from} in flight", any(dir))
            }
            Blocked::RecvWaiting { dir } => format!(
                "recv(dir={}): waiting for a message from {}",
                any(dir),
                senders(dir.as_deref())
            ),
            Blocked::WaitFuture { dir } => format!(
                "wait(recv_async(dir={})): waiting for a message from {}",
                any(dir),
                senders(dir.as_deref())
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_waiting_recv_asks_who_sends() {
        let pe = PeCoord {
            sip: 1,
            cube: 0,
            pe: 0,
        };
        let never = |_: Option<&str>| -> String { panic!("not asked") };
        assert_eq!(
            Blocked::SendNoSlot {
                dir: "E".into(),
                peer: pe
            }
            .describe(never),
            "send(dir=E): no free IPCQ slot at sip1.cube0.pe0 (all slots held)"
        );
        assert_eq!(
            Blocked::RecvInFlight {
                dir: None,
                from: pe
            }
            .describe(never),
            "recv(dir=any): data from sip1.cube0.pe0 in flight"
        );
        let w = Blocked::RecvWaiting {
            dir: Some("W".into()),
        };
        assert_eq!(
            w.describe(|d| format!("senders of {d:?}")),
            "recv(dir=W): waiting for a message from senders of Some(\"W\")"
        );
    }
}
