//! The layer's atomics. On Windows, the core's. Under the KMDF model each access is also a
//! point where another processor may run (`model/shared.rs`), so that the model's schedules
//! can split the layer's code between any two accesses to memory the processors share, not
//! only at its DDI calls.

#[cfg(not(all(test, wdk_fake)))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};

#[cfg(all(test, wdk_fake))]
pub(crate) use super::model::shared::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};
