//! One error enum per kind of verbs call, shaped by the behaviour table of docs/design.md §7.

use hcabus::verbs::VerbsError;

use crate::handle::StaleHandle;

/// Why a create, modify or allocate was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    /// A reset is under way: retry after RESET_END.
    #[error("device resetting, retry after RESET_END")]
    Resetting,
    /// The device failed or is gone (EIO).
    #[error("device failed (EIO)")]
    DeviceFailed,
    #[error("{0}")]
    StaleHandle(StaleHandle),
    /// The handle never named a live resource of this consumer (use after destroy).
    #[error("invalid handle")]
    InvalidHandle,
    /// The handle is another consumer's.
    #[error("handle belongs to another consumer")]
    NotOwner,
    #[error("unknown consumer")]
    UnknownConsumer,
    /// The access layer's own table for this kind is full.
    #[error("access-layer table full")]
    NoResources,
    /// The device refused the command.
    #[error("device refused the command: {0}")]
    Hardware(VerbsError),
    /// The remote target refused the login as busy: try again later.
    #[error("the target refused the login: busy")]
    TargetBusy,
    /// The route to the target swallowed the login (a blackholed path): try again later.
    #[error("the target did not answer the login")]
    Unreachable,
    /// The SA did not resolve the path to the target (no answer in time, or BUSY): try
    /// again later.
    #[error("the SA did not resolve the path to the target")]
    PathUnresolved,
    /// The target's answer to the login would come after the CM's last REQ timed out, or
    /// past a data LUN's hold (a target that serves logins one at a time, far behind): the
    /// CM gives the login up then. Try again later.
    #[error("the target answered the login after its CM gave up")]
    AnsweredLate,
}

impl CreateError {
    /// Whether trying again later may succeed: the device is resetting or busy, or a table
    /// is full for now. The rest (a bad argument, a bad handle) will be refused forever.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            CreateError::Resetting
                | CreateError::TargetBusy
                | CreateError::Unreachable
                | CreateError::PathUnresolved
                | CreateError::AnsweredLate
                | CreateError::NoResources
                | CreateError::Hardware(VerbsError::DeviceError | VerbsError::NoResources)
        )
    }
}

/// Why a post was refused. Nothing was queued in hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// A reset is under way: the request was not queued.
    #[error("device resetting, nothing queued")]
    Resetting,
    #[error("device failed (EIO)")]
    DeviceFailed,
    #[error("{0}")]
    StaleHandle(StaleHandle),
    #[error("invalid handle")]
    InvalidHandle,
    #[error("handle belongs to another consumer")]
    NotOwner,
    #[error("unknown consumer")]
    UnknownConsumer,
    /// More outstanding requests than the queue pair was created for.
    #[error("work queue full")]
    QueueFull,
    #[error("device refused the request: {0}")]
    Hardware(VerbsError),
}

/// Why a destroy was refused. Destroys of stale handles and destroys during a reset always
/// succeed in software; only a mistake of the caller is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DestroyError {
    #[error("handle belongs to another consumer")]
    NotOwner,
    #[error("unknown consumer")]
    UnknownConsumer,
    /// Other live resources still use it (a QP on this CQ, an MR in this PD).
    #[error("resource still in use")]
    Busy,
}

/// Why a poll was refused. Stale CQs are not an error: they return their flushed
/// completions, then nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PollError {
    #[error("invalid handle")]
    InvalidHandle,
    #[error("handle belongs to another consumer")]
    NotOwner,
    #[error("unknown consumer")]
    UnknownConsumer,
}

/// Why a consumer could not open the access layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Every consumer slot is taken.
    #[error("no consumer slot free")]
    NoResources,
}
