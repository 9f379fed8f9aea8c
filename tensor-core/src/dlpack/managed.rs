//! [`DlpackTensor`]: an owning handle on a managed DLPack tensor (ours or a producer's),
//! whose drop calls the deleter exactly once.

use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;

use super::ffi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::DLManagedTensor {}
    impl Sealed for super::DLManagedTensorVersioned {}
}

/// The two managed structs of DLPack: the versioned one of DLPack 1.x and the legacy one.
///
/// # Safety
///
/// Implemented only for [`DLManagedTensor`] and [`DLManagedTensorVersioned`] (sealed).
pub unsafe trait ManagedTensor: sealed::Sealed + Sized + 'static {
    /// Whether this is the versioned struct (which carries a version and flags).
    const VERSIONED: bool;
    /// The name of the Python capsule that carries it (`dltensor_versioned`, `dltensor`).
    const CAPSULE_NAME: &'static str;

    /// The version, for the versioned struct.
    fn version(&self) -> Option<DLPackVersion>;
    /// The flags (always 0 for the legacy struct).
    fn flags(&self) -> u64;
    /// The tensor. Only valid to read when the version's major number is 1.
    fn dl_tensor(&self) -> &DLTensor;
    /// The tensor, to fill in.
    fn dl_tensor_mut(&mut self) -> &mut DLTensor;
    /// Set the producer's context.
    fn set_manager_ctx(&mut self, ctx: *mut c_void);
    /// The deleter.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
    /// A struct with these fields (flags are dropped by the legacy struct).
    fn assemble(
        dl_tensor: DLTensor,
        flags: u64,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self;
}

/// The accessors of the fields both structs have, by the same names.
macro_rules! same_fields {
    () => {
        fn dl_tensor(&self) -> &DLTensor {
            &self.dl_tensor
        }
        fn dl_tensor_mut(&mut self) -> &mut DLTensor {
            &mut self.dl_tensor
        }
        fn set_manager_ctx(&mut self, ctx: *mut c_void) {
            self.manager_ctx = ctx;
        }
        fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
            self.deleter
        }
    };
}

// SAFETY: the legacy struct of `dlpack.h`.
unsafe impl ManagedTensor for DLManagedTensor {
    const VERSIONED: bool = false;
    const CAPSULE_NAME: &'static str = "dltensor";

    fn version(&self) -> Option<DLPackVersion> {
        None
    }
    fn flags(&self) -> u64 {
        0
    }
    same_fields!();
    fn assemble(
        dl_tensor: DLTensor,
        _flags: u64,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self {
        DLManagedTensor {
            dl_tensor,
            manager_ctx,
            deleter: Some(deleter),
        }
    }
}

// SAFETY: the versioned struct of `dlpack.h`.
unsafe impl ManagedTensor for DLManagedTensorVersioned {
    const VERSIONED: bool = true;
    const CAPSULE_NAME: &'static str = "dltensor_versioned";

    fn version(&self) -> Option<DLPackVersion> {
        Some(self.version)
    }
    fn flags(&self) -> u64 {
        self.flags
    }
    same_fields!();
    fn assemble(
        dl_tensor: DLTensor,
        flags: u64,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self {
        DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx,
            deleter: Some(deleter),
            flags,
            dl_tensor,
        }
    }
}

/// An owned managed DLPack tensor: the handle a producer gives and a consumer takes.
///
/// Dropping it calls the deleter (once: the handle is the one owner). [`into_raw`] gives
/// up ownership as the raw pointer a C or Python consumer takes; [`from_raw`] takes it back
/// (or takes a foreign producer's tensor).
///
/// [`into_raw`]: DlpackTensor::into_raw
/// [`from_raw`]: DlpackTensor::from_raw
pub struct DlpackTensor<M: ManagedTensor> {
    managed: NonNull<M>,
}

/// A DLPack 1.x tensor (`DLManagedTensorVersioned`).
pub type DlpackVersioned = DlpackTensor<DLManagedTensorVersioned>;
/// A legacy DLPack tensor (`DLManagedTensor`).
pub type DlpackLegacy = DlpackTensor<DLManagedTensor>;

// SAFETY: a managed tensor is a handle its owner may pass on; DLPack lets the consumer call
// the deleter from whichever thread finishes with it (polytensor's own deleter is thread
// safe, and so are NumPy's and PyTorch's, which take the GIL).
unsafe impl<M: ManagedTensor> Send for DlpackTensor<M> {}
// SAFETY: shared references only read the struct.
unsafe impl<M: ManagedTensor> Sync for DlpackTensor<M> {}

impl<M: ManagedTensor> DlpackTensor<M> {
    /// Take ownership of the managed tensor at `managed`; `None` for NULL.
    ///
    /// # Safety
    ///
    /// `managed` must be NULL or point to a live managed tensor of type `M` whose deleter
    /// nobody else will call, with valid `shape` (and `strides`, when not NULL) arrays; its
    /// `data` must be the memory the struct describes, valid until the deleter runs.
    pub unsafe fn from_raw(managed: *mut M) -> Option<Self> {
        NonNull::new(managed).map(|managed| Self { managed })
    }

    /// Give up ownership: the consumer now calls the deleter.
    pub fn into_raw(self) -> *mut M {
        let ptr = self.managed.as_ptr();
        std::mem::forget(self);
        ptr
    }

    /// The struct, borrowed.
    pub fn as_ptr(&self) -> *const M {
        self.managed.as_ptr()
    }

    /// The managed struct.
    pub fn managed(&self) -> &M {
        // SAFETY: `from_raw`'s contract (or our own export) keeps the struct alive until the
        // deleter, which only `drop` calls.
        unsafe { self.managed.as_ref() }
    }

    /// The version (`None` for the legacy struct).
    pub fn version(&self) -> Option<DLPackVersion> {
        self.managed().version()
    }

    /// The flags (0 for the legacy struct).
    pub fn flags(&self) -> u64 {
        self.managed().flags()
    }

    /// Whether the version's major number is the one this crate reads (always true for the
    /// legacy struct); if not, nothing but the deleter may be touched.
    pub fn is_readable(&self) -> bool {
        self.version()
            .is_none_or(|v| v.major == super::ffi::DLPACK_MAJOR_VERSION)
    }

    /// The tensor, if [`is_readable`](Self::is_readable).
    pub fn dl_tensor(&self) -> Option<&DLTensor> {
        self.is_readable().then(|| self.managed().dl_tensor())
    }

    /// The dims (empty for rank 0), if readable and well-formed.
    pub fn shape(&self) -> Option<&[i64]> {
        let t = self.dl_tensor()?;
        // SAFETY: `from_raw`'s contract: `shape` holds `ndim` dims.
        unsafe { dims(t.shape, t.ndim) }
    }

    /// The strides in elements (`None` when NULL: compact row-major), if readable.
    pub fn strides(&self) -> Option<&[i64]> {
        let t = self.dl_tensor()?;
        // SAFETY: `from_raw`'s contract: `strides` is NULL or holds `ndim` strides.
        unsafe { dims(t.strides, t.ndim) }
    }
}

/// `ndim` values at `ptr`: an empty slice for rank 0, `None` for NULL or a negative rank.
///
/// # Safety
///
/// A non-NULL `ptr` points to `ndim` values that outlive `'a`.
unsafe fn dims<'a>(ptr: *const i64, ndim: i32) -> Option<&'a [i64]> {
    let ndim = usize::try_from(ndim).ok()?;
    if ndim == 0 {
        return Some(&[]);
    }
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    Some(unsafe { std::slice::from_raw_parts(ptr, ndim) })
}

impl DlpackTensor<DLManagedTensorVersioned> {
    /// Set `IS_COPIED`: the memory is a copy made for this consumer alone.
    pub fn mark_copied(&mut self) {
        // SAFETY: the handle owns the struct (see `managed`), and `&mut self` is unique.
        unsafe { self.managed.as_mut() }.flags |= super::ffi::DLPACK_FLAG_BITMASK_IS_COPIED;
    }
}

impl<M: ManagedTensor> Drop for DlpackTensor<M> {
    fn drop(&mut self) {
        if let Some(deleter) = self.managed().deleter() {
            // SAFETY: this handle is the one owner, so the deleter runs exactly once.
            unsafe { deleter(self.managed.as_ptr()) }
        }
    }
}

impl<M: ManagedTensor> fmt::Debug for DlpackTensor<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct(M::CAPSULE_NAME);
        s.field("version", &self.version())
            .field("flags", &self.flags());
        if let Some(t) = self.dl_tensor() {
            s.field("device", &t.device)
                .field("dtype", &t.dtype)
                .field("shape", &self.shape())
                .field("strides", &self.strides())
                .field("byte_offset", &t.byte_offset);
        }
        s.finish()
    }
}
