//! One small error enum per bus operation (docs/design.md §3), each with a stable refusal code for the
//! flight recorder and the IOCTL layer.

wire_enum! {
    /// Why a call was refused, as recorded; stable numbers (they are encoded in records).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RefusalCode {
        CapacityFull = 1 => "capacity full",
        DeviceRemoved = 2 => "device removed",
        UnknownClient = 3 => "unknown client",
        StaleClient = 4 => "stale client id",
        NoResetPending = 5 => "no reset pending",
        StaleEpoch = 6 => "stale epoch",
        NotInBarrier = 7 => "client not in this reset's barrier",
        StormLimit = 8 => "storm limit",
        DeviceFailed = 9 => "device failed",
        NotPlanned = 10 => "reset is not planned",
        NotAllowed = 11 => "client may not veto",
        TooLate = 12 => "quiesce is over",
        NotFailed = 13 => "device is not failed",
        InvalidPolicy = 14 => "invalid policy",
        Throttled = 15 => "client request limit reached",
        NotQueried = 16 => "client was not queried for this reset",
        NoQueryPending = 17 => "no reset query is pending",
        StopPending = 18 => "a PnP stop is pending",
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
        #[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
        pub enum $name { $($(#[$vm])* #[error($msg)] $var),+ }

        impl $name {
            pub const fn code(self) -> RefusalCode {
                match self { $($name::$var => RefusalCode::$code),+ }
            }
        }

        impl From<$name> for RefusalCode {
            fn from(e: $name) -> Self {
                e.code()
            }
        }
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
        /// This client asked `client_request_limit` times within the storm window: nothing
        /// happens (the device is not failed for one noisy client).
        Throttled => (Throttled, "client request limit reached: request ignored"),
        /// Too many automatic resets in the storm window: the device is being failed.
        StormLimit => (StormLimit, "storm limit reached: the device is being failed"),
        DeviceFailed => (DeviceFailed, "device has failed; an administrator restart is needed"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
        /// PnP was told the adapter may stop (a rebalance): no reset starts until it has
        /// stopped and started again, or the stop was cancelled. Ask again after.
        StopPending => (StopPending, "a PnP stop of the adapter is pending: ask again after it"),
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
    /// `reset_consent` refused.
    ConsentError {
        UnknownClient => (UnknownClient, "unknown client id"),
        StaleClient => (StaleClient, "stale client id (already unregistered)"),
        NoQueryPending => (NoQueryPending, "no reset query is pending"),
        StaleEpoch => (StaleEpoch, "epoch is not the queried reset's"),
        NotQueried => (NotQueried, "client was not queried for this reset"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
    }
}

op_error! {
    /// `reset_veto` refused.
    VetoError {
        UnknownClient => (UnknownClient, "unknown client id"),
        StaleClient => (StaleClient, "stale client id (already unregistered)"),
        /// No reset is under way at all.
        NoResetPending => (NoResetPending, "no reset is pending"),
        /// The reset is past its query (or never had one: a forced or fatal reset).
        NoQueryPending => (NoQueryPending, "no reset query is pending: the reset can no longer be vetoed"),
        StaleEpoch => (StaleEpoch, "epoch is not the queried reset's"),
        NotQueried => (NotQueried, "client was not queried for this reset"),
        NotAllowed => (NotAllowed, "client did not register with CAN_VETO"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
    }
}

op_error! {
    /// An administrator's reset refused.
    AdminResetError {
        /// A planned reset asks the clients of a serving device; a Failed device serves none,
        /// and RESTART is the way out (docs/design.md §5).
        DeviceFailed => (DeviceFailed, "device has failed: a planned reset cannot run; restart it"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
        StopPending => (StopPending, "a PnP stop of the adapter is pending: ask again after it"),
    }
}

op_error! {
    /// An administrator's restart refused.
    RestartError {
        NotFailed => (NotFailed, "device is not failed: nothing to restart"),
        DeviceRemoved => (DeviceRemoved, "device has been removed"),
        StopPending => (StopPending, "a PnP stop of the adapter is pending: ask again after it"),
    }
}

from_lookup!(
    UnregisterError,
    RequestError,
    ExecuteError,
    ConsentError,
    VetoError
);

/// Why a port report from the hardware was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// Ports are numbered 1..=MAX_PORTS.
    #[error("ports are numbered 1 to {}", crate::MAX_PORTS)]
    NoSuchPort,
}
