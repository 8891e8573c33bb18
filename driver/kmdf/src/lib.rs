//! hcabus-kmdf: the KMDF bus driver of one HCA PCI function.
//!
//! The driver's logic ([`bus`], [`device`]) is written against [`platform::Platform`], the
//! kernel as the driver uses it, and is built and tested on every host with a fake platform
//! that records the IRQL of every call. The Windows implementation of the platform, the
//! DriverEntry and the KMDF event callbacks live in `src/windows/`, compiled on Windows only
//! (windows-drivers-rs cannot be built elsewhere): see docs/windows.md for what was never
//! compiled.
#![cfg_attr(all(windows, not(test)), no_std)]

extern crate alloc;

pub mod bus;
pub mod device;
pub mod platform;

/// The FFI layer on windows-drivers-rs: never compiled off Windows (docs/windows.md).
#[cfg(windows)]
mod windows;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
