//! One small error enum per bus operation (SPEC §3), each with a stable refusal code for the
//! flight recorder and the IOCTL layer.

use core::fmt;

/// Why a call was refused, as recorded; stable numbers (they are encoded in records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RefusalCode {
    CapacityFull = 1,
    DeviceRemoved = 2,
    UnknownClient = 3,
    StaleClient = 4,
    NoResetPending = 5,
    StaleEpoch = 6,
    NotInBarrier = 7,
    StormLimit = 8,
    DeviceFailed = 9,
    NotPlanned = 10,
    NotAllowed = 11,
    TooLate = 12,
    NotFailed = 13,
    InvalidPolicy = 14,
}

impl RefusalCode {
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => RefusalCode::CapacityFull,
            2 => RefusalCode::DeviceRemoved,
            3 => RefusalCode::UnknownClient,
            4 => RefusalCode::StaleClient,
            5 => RefusalCode::NoResetPending,
            6 => RefusalCode::StaleEpoch,
            7 => RefusalCode::NotInBarrier,
            8 => RefusalCode::StormLimit,
            9 => RefusalCode::DeviceFailed,
            10 => RefusalCode::NotPlanned,
            11 => RefusalCode::NotAllowed,
            12 => RefusalCode::TooLate,
            13 => RefusalCode::NotFailed,
            14 => RefusalCode::InvalidPolicy,
            _ => return None,
        })
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            RefusalCode::CapacityFull => "capacity full",
            RefusalCode::DeviceRemoved => "device removed",
            RefusalCode::UnknownClient => "unknown client",
            RefusalCode::StaleClient => "stale client id",
            RefusalCode::NoResetPending => "no reset pending",
            RefusalCode::StaleEpoch => "stale epoch",
            RefusalCode::NotInBarrier => "client not in this reset's barrier",
            RefusalCode::StormLimit => "storm limit",
            RefusalCode::DeviceFailed => "device failed",
            RefusalCode::NotPlanned => "reset is not planned",
            RefusalCode::NotAllowed => "client may not veto",
            RefusalCode::TooLate => "quiesce is over",
            RefusalCode::NotFailed => "device is not failed",
            RefusalCode::InvalidPolicy => "invalid policy",
        }
    }
}

impl fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An id that does not name a registered client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupError {
    /// Never issued by this bus.
    Unknown,
    /// Issued, but its client has unregistered since (the slot may hold someone else now).
    Stale,
}

macro_rules! op_error {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident => ($code:ident, $msg:literal)),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $($(#[$vm])* $var),+ }

        impl $name {
            pub const fn code(self) -> RefusalCode {
                match self { $($name::$var => RefusalCode::$code),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $($name::$var => $msg),+ })
            }
        }

        impl core::error::Error for $name {}
    };
}

macro_rules! from_lookup {
    ($($name:ident),+) => {$(
        impl From<LookupError> for $name {
            fn from(e: LookupError) -> Self {
                match e {
                    LookupError::Unknown => $name::UnknownClient,
                    LookupError::Stale => $name::StaleClient,
                }
            }
        }
    )+};
}

op_error! {
    /// `register` refused.
    RegisterError {
        CapacityFull => (CapacityFull, "client table is full"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
    }
}

op_error! {
    /// `unregister` refused.
    UnregisterError {
        UnknownClient => (UnknownClient, "unknown client id"),
        StaleClient => (StaleClient, "stale client id (already unregistered)"),
    }
}

op_error! {
    /// `reset_request` refused.
    RequestError {
        UnknownClient => (UnknownClient, "unknown client id"),
        StaleClient => (StaleClient, "stale client id (already unregistered)"),
        /// Too many automatic resets in the storm window: the device is being failed.
        StormLimit => (StormLimit, "storm limit reached: the device is being failed"),
        DeviceFailed => (DeviceFailed, "device has failed; an administrator restart is needed"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
    }
}

op_error! {
    /// `reset_execute` refused.
    ExecuteError {
        UnknownClient => (UnknownClient, "unknown client id"),
        StaleClient => (StaleClient, "stale client id (already unregistered)"),
        NoResetPending => (NoResetPending, "no reset is pending"),
        StaleEpoch => (StaleEpoch, "epoch is not the pending reset's"),
        NotInBarrier => (NotInBarrier, "client is not in this reset's barrier"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
    }
}

op_error! {
    /// `reset_veto` refused.
    VetoError {
        UnknownClient => (UnknownClient, "unknown client id"),
        StaleClient => (StaleClient, "stale client id (already unregistered)"),
        NoResetPending => (NoResetPending, "no reset is pending"),
        StaleEpoch => (StaleEpoch, "epoch is not the pending reset's"),
        NotInBarrier => (NotInBarrier, "client is not in this reset's barrier"),
        NotAllowed => (NotAllowed, "client did not register with CAN_VETO"),
        NotPlanned => (NotPlanned, "only a planned reset can be vetoed"),
        TooLate => (TooLate, "quiesce is over: the reset can no longer be vetoed"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
    }
}

op_error! {
    /// An administrator's reset refused.
    AdminResetError {
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
    }
}

op_error! {
    /// An administrator's restart refused.
    RestartError {
        NotFailed => (NotFailed, "device is not failed: nothing to restart"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
    }
}

from_lookup!(UnregisterError, RequestError, ExecuteError, VetoError);
