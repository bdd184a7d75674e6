//! Tensors in machine memory: where they live, when their data is ready,
//! and what is given back (scratch bytes, an IPCQ slot) when the last
//! reference drops.

use super::alloc::RangeAlloc;
use super::dtype::{BinOp, Dtype};
use super::ipcq::SharedQueue;
use crate::address::Space;
use crate::engine::lock::OneThread;
use crate::engine::{self, Event};
use crate::error::HwError;
use smallvec::SmallVec;
use std::sync::Arc;

/// What is given back when the last reference to a tensor drops.
pub(super) enum Hold {
    None,
    /// Scratch memory from an allocator.
    Block {
        alloc: Arc<OneThread<RangeAlloc>>,
        offset: u64,
        len: u64,
    },
    /// An IPCQ slot.
    Slot {
        queue: SharedQueue,
        slot: u32,
    },
}

/// A tensor in machine memory. Commands that read it hold a reference, so
/// its memory (scratch or IPCQ slot) is released only after the kernel has
/// dropped its handle *and* every reader has finished.
pub struct TensorInner {
    pub space: Space,
    pub offset: u64,
    pub shape: Shape,
    pub dtype: Dtype,
    numel: u64,
    nbytes: u64,
    /// Set when the data is in place.
    pub ready: Event,
    hold: Hold,
}

pub type TensorRef = Arc<TensorInner>;

/// The tensors one command reads (at most three: a composite's `a`, `b`
/// and `c`), held inline: a command allocates nothing for them.
pub type Operands = SmallVec<[TensorRef; 3]>;

/// A tensor's shape: kernels use one to four dimensions, held inline.
pub type Shape = SmallVec<[u32; 4]>;

impl TensorInner {
    /// A tensor of `shape` at `space`+`offset`; its sizes are checked here,
    /// once, so that every later use of them is exact.
    pub(super) fn build(
        space: Space,
        offset: u64,
        shape: &[u32],
        dtype: Dtype,
        ready: Event,
        hold: Hold,
    ) -> Result<TensorRef, HwError> {
        let (numel, nbytes) = crate::units::tensor_size(shape, dtype.itemsize())?;
        Ok(Arc::new(TensorInner {
            space,
            offset,
            shape: Shape::from_slice(shape),
            dtype,
            numel,
            nbytes,
            ready,
            hold,
        }))
    }

    pub fn addr(&self) -> u64 {
        self.space.addr(self.offset)
    }
    pub fn numel(&self) -> u64 {
        self.numel
    }
    pub fn nbytes(&self) -> u64 {
        self.nbytes
    }
}

impl Drop for TensorInner {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.hold, Hold::None) {
            Hold::None => {}
            Hold::Block { alloc, offset, len } => alloc.lock().free(offset, len),
            Hold::Slot { queue, slot } => {
                queue.lock().release(slot, engine::try_now().unwrap_or(0))
            }
        }
    }
}

impl std::fmt::Debug for TensorInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({}+{:#x} {:?} {})",
            self.space,
            self.offset,
            self.shape,
            self.dtype.name()
        )
    }
}

/// An element-wise `op` needs operands of one shape and dtype.
pub fn check_same_operands(
    op: BinOp,
    a: (&[u32], Dtype),
    b: (&[u32], Dtype),
) -> Result<(), HwError> {
    if a != b {
        return Err(HwError::Mismatch {
            what: format!(
                "{} of tensors with different shapes/dtypes: {:?} {} and {:?} {}",
                op.name(),
                a.0,
                a.1.name(),
                b.0,
                b.1.name()
            ),
        });
    }
    Ok(())
}
