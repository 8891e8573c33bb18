//! hcabus-kmdf: the KMDF bus driver of one HCA PCI function.
//!
//! The bus itself is the core's one locked host (`hcabus::host::Bus`) over
//! [`wdf_platform::Platform`], the kernel as the driver uses it; the driver's own decisions are in
//! [`device`]. Both are built and tested on every host with a fake platform that records the
//! IRQL of every call. The Windows implementation of the platform, the
//! DriverEntry and the KMDF event callbacks live in `src/windows/`, compiled for Windows, and
//! on Linux under `--cfg wdk_fake` for the KMDF model (the crate `hcabus-kmdf-model`, which
//! loads this build or the linked image as Windows loads a driver): see docs/windows.md.
#![cfg_attr(all(windows, not(test), panic = "abort"), no_std)]

// The kernel cannot unwind: a driver built with an unwinding profile (dev, release, bench)
// would not link, and rustc's own message ("unwinding panics are not supported without std")
// does not say what to do. Cargo has no per-package panic setting, so the workspace's
// profiles keep unwinding for the tests and the driver has a profile of its own.
#[cfg(all(windows, not(test), panic = "unwind"))]
compile_error!(
    "hcabus-kmdf is a kernel driver and must not unwind: build it with \
     `cargo build -p hcabus-kmdf --profile driver` (panic = \"abort\"); the dev and release \
     profiles unwind"
);

// The FFI layer's pool memory (the bus, what a PnP stop keeps).
#[cfg(any(windows, wdk_fake))]
extern crate alloc;

pub mod device;
pub mod etw;
pub mod kernel;

/// The FFI layer on windows-drivers-rs: type-checked off Windows with ../shared/wdk-kit, never
/// linked or run (docs/windows.md).
#[cfg(any(windows, wdk_fake))]
mod windows;

/// What the KMDF model (the crate `hcabus-kmdf-model`) sees of the layer beyond what Windows
/// gives a kernel: only under `--cfg wdk_fake`; the driver image has none of it.
#[cfg(wdk_fake)]
pub use windows::lab;

/// Event Viewer's reading of the entries the driver logs, for the layer's tests and the KMDF
/// model's: not in the image.
#[cfg(any(test, wdk_fake))]
pub mod event_viewer;

/// A decoder's reading of the driver's ETW events, for the layer's tests and the KMDF
/// model's: not in the image.
#[cfg(any(test, wdk_fake))]
pub mod etw_reader;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
