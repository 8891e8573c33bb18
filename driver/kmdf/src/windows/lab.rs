//! The layer as the KMDF model's tests see it beyond what Windows gives a kernel: the
//! defects they plant, the statics a fresh image has, one FDO's special-file count. Built
//! only under `--cfg wdk_fake`, where the model (the crate `hcabus-kmdf-model`) links this
//! build of the layer; the driver image has none of it, and the model's scenarios that need
//! it run on this build only.

use wdk_sys::WDFDEVICE;

pub use super::defects::{plant, Defect};

/// The driver's statics as a fresh load leaves them: the model boots the driver more than
/// once in a process, where Windows would load the image again.
pub fn image_loaded() {
    super::objects::image_loaded();
}

/// The lowest free control-device number, now taken (`None` with 64 adapters named).
pub fn claim_instance() -> Option<u32> {
    super::objects::claim_instance()
}

/// Gives back a number [`claim_instance`] took.
pub fn release_instance(n: u32) {
    super::objects::release_instance(n);
}

/// How many special files (paging, hibernation, dump) the FDO `device` holds usage of.
///
/// # Safety
/// `device` is a live FDO the layer created.
pub unsafe fn special_files_held(device: WDFDEVICE) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { super::fdo(device) }.map_or(0, |c| c.special_files_held())
}
