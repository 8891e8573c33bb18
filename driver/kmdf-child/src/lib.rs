//! hcabus-child-kmdf: a sample KMDF function driver for a PDO of the hcabus bus, written as an
//! IPoIB or SRP driver would be (docs/child-driver.md).
//!
//! It asks its PDO for HCABUS_BUS_INTERFACE_V1 with WdfFdoQueryForInterface, checks the size
//! and version it got, registers, and answers the bus's events from its callback at
//! DISPATCH_LEVEL: RESET stops its I/O queue, and once KMDF says every request the driver
//! owned is completed it calls ResetExecute; RESET_END starts the queue again, and what was
//! held in it runs in the new epoch. Its remove path unregisters (a rundown) and then gives
//! the interface's reference back.
//!
//! What it decides is here, portable and tested on every host: [`child`] (its state machine)
//! and [`abi`] (its IOCTLs, the interface check, the event's decoding). The KMDF calls are in
//! `src/windows/`, compiled for Windows and, on Linux under `--cfg wdk_fake`, for the KMDF
//! model.
#![cfg_attr(all(windows, not(test), panic = "abort"), no_std)]

#[cfg(all(windows, not(test), panic = "unwind"))]
compile_error!(
    "hcabus-child-kmdf is a kernel driver and must not unwind: build it with \
     `cargo build -p hcabus-child-kmdf --profile driver` (panic = \"abort\")"
);

pub mod abi;
pub mod child;
pub mod queue;

/// The FFI layer on windows-drivers-rs (docs/child-driver.md says what runs where).
#[cfg(all(any(windows, wdk_fake), feature = "driver"))]
mod windows;

#[cfg(test)]
mod tests;
