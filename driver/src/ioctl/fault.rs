//! INJECT_FAULT: the faults the simulator takes, and the one check of their fields that
//! both the IOCTL and scenario files apply.

use core::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::InputHeader;

wire_enum! {
    /// Faults the simulator can inject.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FaultCode {
        Catastrophic = 1 => "catastrophic",
        CommandTimeout = 2 => "command_timeout",
        HealthStall = 3 => "health_stall",
        Hang = 4 => "hang",
        /// The next `count` reset assertions fail.
        ResetFails = 5 => "reset_fails",
        DeviceReplaced = 6 => "device_replaced",
        NeverReturns = 7 => "never_returns",
        SurpriseRemoval = 8 => "surprise_removal",
        /// A cable pulled from `port` for `duration_ms`, without a reset (version 4).
        PortDown = 9 => "port_down",
        /// The remote targets refuse the next `count` logins as busy.
        TargetBusy = 10 => "target_busy",
    }
}

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
/// Longest cable pull INJECT_FAULT takes: an hour.
pub const MAX_FAULT_DURATION_MS: u32 = 3_600_000;
/// Most busy logins one INJECT_FAULT asks the targets to refuse.
pub const MAX_BUSY_LOGINS: u32 = 10_000;
/// Most hardware resets one INJECT_FAULT makes fail.
pub const MAX_RESET_FAILS: u32 = 64;

/// A fault's field out of the range the fault takes it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.range())]
pub struct FaultFieldError {
    pub field: &'static str,
    pub min: u32,
    pub max: u32,
}

impl FaultFieldError {
    /// The range only: a caller names the field its own way (a scenario key, an option).
    fn range(&self) -> RangeText {
        RangeText(self.min, self.max)
    }
}

/// "must be between MIN and MAX", or "not taken by this fault" for 0..=0.
#[derive(Debug)]
struct RangeText(u32, u32);

impl core::fmt::Display for RangeText {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.1 {
            0 => f.write_str("not taken by this fault"),
            max => write!(f, "must be between {} and {max}", self.0),
        }
    }
}

/// A fault as INJECT_FAULT asks for it, checked against every rule that needs no device:
/// each field the fault does not take is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRequest {
    pub code: FaultCode,
    pub count: u32,
    pub port: u8,
    pub duration_ms: u32,
}

impl FaultRequest {
    /// A fault that takes no argument, or `ResetFails` / `TargetBusy` with its count.
    pub const fn new(code: FaultCode, count: u32) -> Self {
        FaultRequest {
            code,
            count,
            port: 0,
            duration_ms: 0,
        }
    }

    /// A cable pulled from `port` for `duration_ms`.
    pub const fn port_down(port: u8, duration_ms: u32) -> Self {
        FaultRequest {
            code: FaultCode::PortDown,
            count: 0,
            port,
            duration_ms,
        }
    }

    /// Whether every field is one the fault takes, within its range. The device checks
    /// what only it knows (whether it has the port).
    pub fn is_valid(&self) -> bool {
        self.check().is_ok()
    }

    /// The first field out of the range the fault takes it in (0..=0: not taken). The one
    /// rule for INJECT_FAULT and for scenario files, so both refuse alike.
    pub fn check(&self) -> Result<(), FaultFieldError> {
        let (count, port, duration) = match self.code {
            FaultCode::ResetFails => ((1, MAX_RESET_FAILS), (0, 0), (0, 0)),
            FaultCode::TargetBusy => ((1, MAX_BUSY_LOGINS), (0, 0), (0, 0)),
            FaultCode::PortDown => (
                (0, 0),
                (1, u32::from(crate::types::MAX_PORTS)),
                (1, MAX_FAULT_DURATION_MS),
            ),
            _ => ((0, 0), (0, 0), (0, 0)),
        };
        for (field, value, (min, max)) in [
            ("count", self.count, count),
            ("port", u32::from(self.port), port),
            ("duration_ms", self.duration_ms, duration),
        ] {
            if !(min..=max).contains(&value) {
                return Err(FaultFieldError { field, min, max });
            }
        }
        Ok(())
    }
}
