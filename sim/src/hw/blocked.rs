//! Why a PE's kernel is waiting. The hot path records a small value (no
//! formatting, no search); the words — including who could unblock it —
//! are produced only when a deadlock report asks for them.

use crate::topology::PeCoord;

/// An IPCQ direction name (`"E"`, `"global_N"`, ...), shared, not copied.
pub type Dir = std::sync::Arc<str>;

/// A receive direction as a blocked receive records it: the index of the
/// direction among its PE's receive queues (installed queues are only
/// ever appended), or `None` for any. An index rather than a name: a name
/// held while the kernel waits changed a shared count twice per receive,
/// each a cache miss at a thousand ranks.
pub type RxDir = Option<u32>;

/// What a blocked kernel waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// Its PE has [`super::machine::COMMAND_QUEUE_DEPTH`] commands in flight.
    CommandQueueFull,
    /// `send(dir)`: every slot of `peer`'s receive ring is held.
    SendNoSlot { dir: Dir, peer: PeCoord },
    /// `recv(dir)`: a message from `from` was sent, its data is in flight.
    RecvInFlight { rx: RxDir, from: PeCoord },
    /// `recv(dir)`: no message has been sent to it yet.
    RecvWaiting { rx: RxDir },
    /// `wait` on a `recv_async(dir)` future whose message has not landed.
    WaitFuture { dir: Option<Dir> },
}

impl Blocked {
    /// The report line. `rx_name(rx)` names a receive direction (`None`:
    /// any); `senders(dir)` names the PEs that send to a direction (only
    /// asked for [`Blocked::RecvWaiting`] and [`Blocked::WaitFuture`]).
    pub fn describe(
        &self,
        rx_name: impl Fn(RxDir) -> Option<String>,
        senders: impl FnOnce(Option<&str>) -> String,
    ) -> String {
        let any = |d: &Option<Dir>| d.as_deref().unwrap_or("any").to_string();
        let rx_any = |rx: &RxDir| rx_name(*rx).unwrap_or_else(|| "any".into());
        match self {
            Blocked::CommandQueueFull => {
                "command queue full: waiting for the oldest command".into()
            }
            Blocked::SendNoSlot { dir, peer } => {
                format!("send(dir={dir}): no free IPCQ slot at {peer} (all slots held)")
            }
            Blocked::RecvInFlight { rx, from } => {
                format!("recv(dir={}): data from {from} in flight", rx_any(rx))
            }
            Blocked::RecvWaiting { rx } => {
                let dir = rx_name(*rx);
                format!(
                    "recv(dir={}): waiting for a message from {}",
                    dir.as_deref().unwrap_or("any"),
                    senders(dir.as_deref())
                )
            }
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
        // The PE's receive directions, by index.
        let names = |rx: RxDir| rx.map(|i| ["N", "W"][i as usize].to_string());
        assert_eq!(
            Blocked::SendNoSlot {
                dir: "E".into(),
                peer: pe
            }
            .describe(names, never),
            "send(dir=E): no free IPCQ slot at sip1.cube0.pe0 (all slots held)"
        );
        assert_eq!(
            Blocked::RecvInFlight { rx: None, from: pe }.describe(names, never),
            "recv(dir=any): data from sip1.cube0.pe0 in flight"
        );
        assert_eq!(
            Blocked::RecvInFlight {
                rx: Some(0),
                from: pe
            }
            .describe(names, never),
            "recv(dir=N): data from sip1.cube0.pe0 in flight"
        );
        let w = Blocked::RecvWaiting { rx: Some(1) };
        assert_eq!(
            w.describe(names, |d| format!("senders of {d:?}")),
            "recv(dir=W): waiting for a message from senders of Some(\"W\")"
        );
    }
}
