//! The record of one reset: what happened and how long each phase took. It is reused in
//! place from one reset to the next so that keeping it costs no allocation.

use alloc::vec::Vec;

use crate::time::{Duration, Instant};
use crate::types::*;

/// How a reset ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetResult {
    Restored(ResetOutcome),
    Failed(FailReason),
    Aborted {
        by: ClientId,
        cause: AbortCause,
    },
    /// The device was surprise-removed during the reset.
    Removed,
}

impl ResetResult {
    /// The name reports and tools give it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ResetResult::Restored(o) => o.as_str(),
            ResetResult::Failed(e) => e.as_str(),
            ResetResult::Aborted {
                cause: AbortCause::Veto,
                ..
            } => "Aborted",
            ResetResult::Aborted {
                cause: AbortCause::Unresponsive,
                ..
            } => "AbortedUnresponsive",
            ResetResult::Removed => "Removed",
        }
    }
}

/// What one reset did; reused in place, so keeping it costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetRecord {
    /// Epoch torn down (the one RESET carried).
    pub epoch: Epoch,
    pub reason: ResetReason,
    /// False once a forced cause joined a planned reset.
    pub planned: bool,
    /// An administrator restart of a Failed device (no quiesce).
    pub restart: bool,
    /// Requests and faults served by this reset, the first included.
    pub requests: u32,
    pub barrier_size: u16,
    pub started_at: Instant,
    /// When RESET went out: later than `started_at` by the query of a planned reset.
    pub reset_sent_at: Option<Instant>,
    pub quiesce_done_at: Option<Instant>,
    /// The hardware reset began (a fatal error with `auto_recover` off never gets there).
    pub hw_entered: bool,
    pub hw_done_at: Option<Instant>,
    pub finished_at: Option<Instant>,
    /// Barrier members that passed their quiesce deadline: forced through it when the reset
    /// went ahead, the cause when it aborted ([`ResetRecord::aborted_unresponsive`]).
    pub forced: Vec<ClientId>,
    /// Soft resets asserted, retries included.
    pub soft_attempts: u8,
    pub flr_used: bool,
    pub pnp_operations: u32,
    pub result: Option<ResetResult>,
    /// What the vetoer said, for a vetoed reset.
    pub veto_reason: Option<VetoReason>,
    /// Epoch after a successful reset.
    pub new_epoch: Option<Epoch>,
    /// The reason the administrator gave, for a reset they asked for (or joined).
    pub admin_reason: ShortText,
    /// The names of the first [`FORCED_NAMES`] clients forced through their deadline (the
    /// ids are in `forced`).
    pub forced_names: [ClientName; FORCED_NAMES],
    /// The client that vetoed, by name.
    pub vetoer_name: ClientName,
}

/// Forced clients named in a reset's record and summary; `forced` counts them all.
pub const FORCED_NAMES: usize = 4;

impl ResetRecord {
    /// Becomes a copy of `other` within its own reserved capacity: no allocation (a
    /// derived `clone_from` would allocate a new `forced` list).
    pub(crate) fn copy_from(&mut self, other: &ResetRecord) {
        let mut forced = core::mem::take(&mut self.forced);
        forced.clear();
        forced.extend_from_slice(&other.forced[..other.forced.len().min(forced.capacity())]);
        *self = ResetRecord {
            forced: Vec::new(),
            ..*other
        };
        self.forced = forced;
    }

    pub(crate) fn with_capacity(max_clients: usize) -> Self {
        ResetRecord {
            epoch: Epoch(0),
            reason: ResetReason::AdminForced,
            planned: false,
            restart: false,
            requests: 0,
            barrier_size: 0,
            started_at: Instant::ZERO,
            reset_sent_at: None,
            quiesce_done_at: None,
            hw_entered: false,
            hw_done_at: None,
            finished_at: None,
            forced: crate::reserve::touched_vec(max_clients, ClientId::from_raw(0)),
            soft_attempts: 0,
            flr_used: false,
            pnp_operations: 0,
            result: None,
            veto_reason: None,
            new_epoch: None,
            admin_reason: ShortText::EMPTY,
            forced_names: [ShortText::EMPTY; FORCED_NAMES],
            vetoer_name: ShortText::EMPTY,
        }
    }

    pub(super) fn begin(&mut self, epoch: Epoch, reason: ResetReason, now: Instant, restart: bool) {
        self.epoch = epoch;
        self.reason = reason;
        self.planned = reason.is_planned() && !restart;
        self.restart = restart;
        self.requests = 1;
        self.barrier_size = 0;
        self.started_at = now;
        self.reset_sent_at = None;
        self.quiesce_done_at = None;
        self.hw_entered = false;
        self.hw_done_at = None;
        self.finished_at = None;
        self.forced.clear();
        self.soft_attempts = 0;
        self.flr_used = false;
        self.pnp_operations = 0;
        self.result = None;
        self.veto_reason = None;
        self.new_epoch = None;
        self.admin_reason = ShortText::EMPTY;
        self.forced_names = [ShortText::EMPTY; FORCED_NAMES];
        self.vetoer_name = ShortText::EMPTY;
    }

    /// A barrier member was forced through its deadline.
    pub(super) fn force(&mut self, id: ClientId, name: ClientName) {
        if let Some(slot) = self.forced_names.get_mut(self.forced.len()) {
            *slot = name;
        }
        // Capacity is max_clients: cannot grow.
        if self.forced.len() < self.forced.capacity() {
            self.forced.push(id);
        }
    }

    /// A planned reset called off because a client passed its deadline: `forced` names the
    /// unresponsive clients, nobody vetoed, and nothing was forced through.
    pub fn aborted_unresponsive(&self) -> bool {
        matches!(
            self.result,
            Some(ResetResult::Aborted {
                cause: AbortCause::Unresponsive,
                ..
            })
        )
    }

    /// The client that vetoed, for a reset a veto called off (never for an abort).
    pub fn vetoer(&self) -> Option<ClientId> {
        match self.result {
            Some(ResetResult::Aborted {
                by,
                cause: AbortCause::Veto,
            }) => Some(by),
            _ => None,
        }
    }

    /// Quiesce duration (RESET dispatched to barrier complete, or to the abort that ended
    /// it; a restart and a vetoed reset have none).
    pub fn quiesce(&self) -> Option<Duration> {
        let from = self.reset_sent_at.unwrap_or(self.started_at);
        self.quiesce_done_at.map(|t| t.saturating_since(from))
    }

    /// Hardware reset duration (barrier complete to device verified), or, for a reset that
    /// ended in the hardware (it failed, or the device was removed), to that end: the time
    /// spent there is never hidden.
    pub fn hw_reset(&self) -> Option<Duration> {
        if !self.hw_entered {
            return None;
        }
        let end = self.hw_done_at.or(self.finished_at)?;
        Some(end.saturating_since(self.quiesce_done_at?))
    }

    /// Restore duration (device verified to last RESET_END delivered).
    pub fn restore(&self) -> Option<Duration> {
        Some(self.finished_at?.saturating_since(self.hw_done_at?))
    }

    /// From RESET (or a restart) until the outcome is final; the record is reused, so
    /// an open record is one whose reset has not concluded.
    pub fn is_open(&self) -> bool {
        self.requests > 0 && self.finished_at.is_none()
    }

    pub fn total(&self) -> Option<Duration> {
        self.finished_at
            .map(|t| t.saturating_since(self.started_at))
    }
}
