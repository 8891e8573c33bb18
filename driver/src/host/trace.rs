//! What the system's tracing hears (ETW on Windows, [`Platform::trace`]): each flight record
//! once, in order, with the reset it belongs to. The record alone does not say: a hardware
//! step or a client's answer carries no epoch, so the scan that finds the records follows the
//! resets they fall in.

use crate::recorder::{Record, RecordKind};
use crate::time::Instant;
use crate::types::{Epoch, ResetReason, State};

#[cfg(doc)]
use crate::host::Platform;

/// The reset a record falls in: from its `reset_started` record to its `reset_finished` or
/// `reset_failed`, both included; a reset that ends with neither (a veto, a client past its
/// deadline, a removal) ends at the state change that leaves it, which it includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetSpan {
    /// The epoch the reset started from.
    pub epoch: Epoch,
    pub reason: ResetReason,
    /// When its `reset_started` record was written.
    pub started: Instant,
}

impl ResetSpan {
    /// How long the reset had run when `record` was written.
    pub fn elapsed_us(&self, record: &Record) -> u64 {
        record.at.saturating_since(self.started).as_us()
    }

    /// The reset `record` falls in, given `open`, the reset under way before it; `open` is left
    /// as the reset under way after it.
    pub fn follow(open: &mut Option<ResetSpan>, record: &Record) -> Option<ResetSpan> {
        match record.kind {
            RecordKind::Transition {
                to: State::Operational | State::Failed | State::Removed,
                ..
            } => open.take(),
            RecordKind::ResetStarted { epoch, reason, .. } => {
                *open = Some(ResetSpan {
                    epoch,
                    reason,
                    started: record.at,
                });
                *open
            }
            RecordKind::ResetFinished { .. } | RecordKind::ResetFailed { .. } => open.take(),
            _ => *open,
        }
    }
}
