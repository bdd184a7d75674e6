//! How a host call fails: with the error its WIT type declares, which
//! the guest handles (PyTorch's exception of a `torch.distributed` call,
//! a message), or with a trap, which stops the guest (a kernel failed, a
//! budget ran out). Host code returns `Result<T, Fail<E>>` and uses `?`
//! for both. The `dist-error` imports get it from bindgen's
//! `trappable_error_type` (the interface's `convert_dist_error` calls
//! [`Fail::into_wit`]); the imports whose error is a plain `string` go
//! through [`to_wit`], the one place a raised error becomes the nested
//! result wasmtime's bindings want.

use super::bindings::bench::kernbench::sim::distributed::DistError;

/// A failed host call whose WIT error is `E`.
#[derive(Debug)]
pub enum Fail<E> {
    /// The WIT's error, handed to the guest.
    Raised(E),
    /// A trap: the guest stops.
    Trap(wasmtime::Error),
}

impl<E> From<wasmtime::Error> for Fail<E> {
    fn from(e: wasmtime::Error) -> Self {
        Fail::Trap(e)
    }
}

impl<E> From<wasmtime::component::ResourceTableError> for Fail<E> {
    fn from(e: wasmtime::component::ResourceTableError) -> Self {
        Fail::Trap(e.into())
    }
}

impl From<DistError> for Fail<DistError> {
    fn from(e: DistError) -> Self {
        Fail::Raised(e)
    }
}

impl From<String> for Fail<String> {
    fn from(e: String) -> Self {
        Fail::Raised(e)
    }
}

impl<E> Fail<E> {
    /// The WIT's error for the guest, or the trap.
    pub fn into_wit(self) -> wasmtime::Result<E> {
        match self {
            Fail::Raised(e) => Ok(e),
            Fail::Trap(t) => Err(t),
        }
    }
}

/// A `result<T, E>` import's answer as wasmtime's bindings take it when
/// no `trappable_error_type` applies (`E` a plain `string`): the trap
/// outside, the raised error inside.
pub fn to_wit<T, E>(r: Result<T, Fail<E>>) -> wasmtime::Result<Result<T, E>> {
    r.map_or_else(|f| f.into_wit().map(Result::Err), |v| Ok(Ok(v)))
}

/// A `torch.distributed` call's failure.
pub type DistFail = Fail<DistError>;

/// The result of a `torch.distributed` call.
pub type DistResult<T = ()> = Result<T, DistFail>;

/// The result of a host call whose WIT error is a message.
pub type MsgResult<T> = Result<T, Fail<String>>;

/// A kernel call that made no command, as the trap it is: the call's own
/// refusal stays a [`crate::error::TlCallError`] (a batch tells it to the
/// kernel by its index, [`super::batch::refusal`]).
pub fn trap(e: super::recorder::CallError) -> wasmtime::Error {
    use super::recorder::CallError as E;
    match e {
        E::Refused(e) => wasmtime::Error::new(*e),
        other => wasmtime::Error::new(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_error_reaches_the_guest_and_a_trap_stops_it() {
        let ok: MsgResult<u32> = Ok(3);
        assert_eq!(to_wit(ok).unwrap(), Ok(3));
        let raised: MsgResult<u32> = Err("no".to_string().into());
        assert_eq!(to_wit(raised).unwrap(), Err("no".to_string()));
        let trap: MsgResult<u32> = Err(wasmtime::Error::msg("boom").into());
        assert_eq!(to_wit(trap).unwrap_err().to_string(), "boom");
        let d: DistFail = DistError::ValueError("v".into()).into();
        assert!(matches!(d.into_wit(), Ok(DistError::ValueError(m)) if m == "v"));
    }
}
