//! INJECT_FAULT's input on the wire; the faults and the check of their fields are
//! [`crate::fault`]'s.

use core::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::InputHeader;
pub use crate::fault::*;

/// Input of INJECT_FAULT (24 bytes; the first 16 before version 4).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct InjectFaultIn {
    pub header: InputHeader,
    /// `FaultCode` number.
    pub fault: u32,
    /// For `ResetFails` (1..=64) and `TargetBusy` (1..=[`MAX_BUSY_LOGINS`]): how many;
    /// otherwise 0.
    pub count: u32,
    /// For `PortDown`: the port, from 1; otherwise 0 (version 4).
    pub port: u32,
    /// For `PortDown`: how long the cable stays out, 1..=[`MAX_FAULT_DURATION_MS`];
    /// otherwise 0 (version 4).
    pub duration_ms: u32,
}
const_assert_eq!(size_of::<InjectFaultIn>(), 24);
const_assert_eq!(offset_of!(InjectFaultIn, fault), 8);
const_assert_eq!(offset_of!(InjectFaultIn, count), 12);
const_assert_eq!(offset_of!(InjectFaultIn, port), 16);
const_assert_eq!(offset_of!(InjectFaultIn, duration_ms), 20);

/// Bytes of INJECT_FAULT's input before version 4 (its first 16 bytes in version 4).
pub const INJECT_V3_BYTES: usize = 16;
