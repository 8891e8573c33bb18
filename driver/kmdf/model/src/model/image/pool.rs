//! The kernel exports only the image calls (the Linux build has Rust's allocator, its own
//! panic and the C library in their place): the pool, KeBugCheckEx, DbgPrint as the
//! Windows convention passes its variadic arguments, and the C runtime's four functions.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use wdk_sys::*;

use super::super::{enter, violation, Rule, DISPATCH, HIGH};

/// Each live pool block: its layout.
static POOL: Mutex<BTreeMap<usize, std::alloc::Layout>> = Mutex::new(BTreeMap::new());

/// The pool blocks the image holds now: (blocks, bytes).
pub(crate) fn outstanding() -> (usize, usize) {
    let pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    (pool.len(), pool.values().map(|l| l.size()).sum())
}

/// A new machine: what a previous one's driver held was reported at its unload.
pub(crate) fn forget() {
    POOL.lock().unwrap_or_else(PoisonError::into_inner).clear();
}

/// At unload: every block the image allocated is freed (Driver Verifier's pool tracking:
/// DRIVER_UNLOADED_WITHOUT_FREEING_POOL).
pub(crate) fn unload() {
    let (blocks, bytes) = outstanding();
    if blocks != 0 {
        violation(
            Rule::ObjectLeak,
            "DriverUnload",
            &format!("the image holds {blocks} pool block(s), {bytes} bytes, never freed"),
        );
    }
}

/// POOL_FLAG_NON_PAGED, POOL_FLAG_UNINITIALIZED: the flags the model takes.
const NON_PAGED: u64 = 0x40;
const UNINITIALIZED: u64 = 0x2;

extern "C" fn ex_allocate_pool2(flags: u64, bytes: SIZE_T, _tag: ULONG) -> PVOID {
    const DDI: &str = "ExAllocatePool2";
    let kernel = enter(DDI, DISPATCH);
    if flags & !(NON_PAGED | UNINITIALIZED) != 0 || flags & NON_PAGED == 0 {
        violation(
            Rule::Unmodelled,
            DDI,
            &format!("pool flags {flags:#x}: the model gives non-paged pool only"),
        );
    }
    if crate::model::heap::pool_refuses() {
        return core::ptr::null_mut();
    }
    let Ok(layout) = std::alloc::Layout::from_size_align((bytes as usize).max(1), 16) else {
        return core::ptr::null_mut();
    };
    // The driver's bytes, counted as the Linux build's heap is (`super::super::heap`).
    drop(kernel);
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if !p.is_null() {
        super::super::uncounted(|| {
            POOL.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(p as usize, layout);
        });
    }
    p.cast()
}

extern "C" fn ex_free_pool(p: PVOID) {
    const DDI: &str = "ExFreePool";
    let kernel = enter(DDI, DISPATCH);
    let layout = super::super::uncounted(|| {
        POOL.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(p as usize))
    });
    let Some(layout) = layout else {
        violation(
            Rule::BadUnmap,
            DDI,
            &format!("{p:p} is not a block of the pool's (freed twice, or never allocated)"),
        );
    };
    drop(kernel);
    // SAFETY: a block ExAllocatePool2 gave with this layout, freed once (removed above).
    unsafe { std::alloc::dealloc(p.cast(), layout) };
}

extern "C" fn ke_bug_check_ex(code: ULONG, p1: u64, p2: u64, p3: u64, p4: u64) -> ! {
    let _kernel = enter("KeBugCheckEx", HIGH);
    violation(
        Rule::DriverBugCheck,
        "KeBugCheckEx",
        &format!("the driver stopped the machine: {code:#x} ({p1:#x}, {p2:#x}, {p3:#x}, {p4:#x})"),
    )
}

/// DbgPrint as the image calls it: wdk's print passes "%s" and one string.
extern "C" fn dbg_print(format: *const core::ffi::c_char, text: *const core::ffi::c_char) -> ULONG {
    // SAFETY: the image's NUL-terminated format.
    let f = unsafe { core::ffi::CStr::from_ptr(format) };
    if f.to_bytes() != b"%s" || text.is_null() {
        violation(
            Rule::Unmodelled,
            "DbgPrint",
            &format!("a format the model does not take: {f:?}"),
        );
    }
    super::super::wdm::hcabus_model_dbg_print(text);
    0
}

/// The kernel exports here, by name, as System V functions.
pub(crate) fn exports() -> [(&'static str, usize); 8] {
    [
        ("ExAllocatePool2", ex_allocate_pool2 as *const () as usize),
        ("ExFreePool", ex_free_pool as *const () as usize),
        ("KeBugCheckEx", ke_bug_check_ex as *const () as usize),
        ("DbgPrint", dbg_print as *const () as usize),
        ("memcmp", libc::memcmp as *const () as usize),
        ("memcpy", libc::memcpy as *const () as usize),
        ("memset", libc::memset as *const () as usize),
        ("strlen", libc::strlen as *const () as usize),
    ]
}
