//! One error enum per kind of verbs call, shaped by the behaviour table of docs/design.md §7.

use core::fmt;

use hcabus::verbs::VerbsError;

use crate::handle::StaleHandle;

/// Why a create, modify or allocate was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateError {
    /// A reset is under way: retry after RESET_END.
    Resetting,
    /// The device failed or is gone (EIO).
    DeviceFailed,
    StaleHandle(StaleHandle),
    /// The handle never named a live resource of this consumer (use after destroy).
    InvalidHandle,
    /// The handle is another consumer's.
    NotOwner,
    UnknownConsumer,
    /// The access layer's own table for this kind is full.
    NoResources,
    /// The device refused the command.
    Hardware(VerbsError),
    /// The remote target refused the login as busy: try again later.
    TargetBusy,
}

impl CreateError {
    /// Whether trying again later may succeed: the device is resetting or busy, or a table
    /// is full for now. The rest (a bad argument, a bad handle) will be refused forever.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            CreateError::Resetting
                | CreateError::TargetBusy
                | CreateError::NoResources
                | CreateError::Hardware(VerbsError::DeviceError | VerbsError::NoResources)
        )
    }
}

impl fmt::Display for CreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CreateError::Resetting => f.write_str("device resetting, retry after RESET_END"),
            CreateError::DeviceFailed => f.write_str("device failed (EIO)"),
            CreateError::StaleHandle(s) => s.fmt(f),
            CreateError::InvalidHandle => f.write_str("invalid handle"),
            CreateError::NotOwner => f.write_str("handle belongs to another consumer"),
            CreateError::UnknownConsumer => f.write_str("unknown consumer"),
            CreateError::NoResources => f.write_str("access-layer table full"),
            CreateError::Hardware(e) => write!(f, "device refused the command: {e}"),
            CreateError::TargetBusy => f.write_str("the target refused the login: busy"),
        }
    }
}

impl core::error::Error for CreateError {}

/// Why a post was refused. Nothing was queued in hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// A reset is under way: the request was not queued.
    Resetting,
    DeviceFailed,
    StaleHandle(StaleHandle),
    InvalidHandle,
    NotOwner,
    UnknownConsumer,
    /// More outstanding requests than the queue pair was created for.
    QueueFull,
    Hardware(VerbsError),
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostError::Resetting => f.write_str("device resetting, nothing queued"),
            PostError::DeviceFailed => f.write_str("device failed (EIO)"),
            PostError::StaleHandle(s) => s.fmt(f),
            PostError::InvalidHandle => f.write_str("invalid handle"),
            PostError::NotOwner => f.write_str("handle belongs to another consumer"),
            PostError::UnknownConsumer => f.write_str("unknown consumer"),
            PostError::QueueFull => f.write_str("work queue full"),
            PostError::Hardware(e) => write!(f, "device refused the request: {e}"),
        }
    }
}

impl core::error::Error for PostError {}

/// Why a destroy was refused. Destroys of stale handles and destroys during a reset always
/// succeed in software; only a mistake of the caller is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestroyError {
    NotOwner,
    UnknownConsumer,
    /// Other live resources still use it (a QP on this CQ, an MR in this PD).
    Busy,
}

impl fmt::Display for DestroyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DestroyError::NotOwner => "handle belongs to another consumer",
            DestroyError::UnknownConsumer => "unknown consumer",
            DestroyError::Busy => "resource still in use",
        })
    }
}

impl core::error::Error for DestroyError {}

/// Why a poll was refused. Stale CQs are not an error: they return their flushed
/// completions, then nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollError {
    InvalidHandle,
    NotOwner,
    UnknownConsumer,
}

impl fmt::Display for PollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PollError::InvalidHandle => "invalid handle",
            PollError::NotOwner => "handle belongs to another consumer",
            PollError::UnknownConsumer => "unknown consumer",
        })
    }
}

impl core::error::Error for PollError {}

/// Why a consumer could not open the access layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// Every consumer slot is taken.
    NoResources,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpenError::NoResources => "no consumer slot free",
        })
    }
}

impl core::error::Error for OpenError {}
