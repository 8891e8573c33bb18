//! The reset history: a summary of each of the last [`HISTORY_LEN`] resets, in a ring of its
//! own. The flight recorder's ring is shared with every poll and call; this one holds only
//! concluded resets, so no amount of polling can push a reset out of the administrator's
//! view. Reserved and touched at start; writing a summary copies a fixed-size value.

use alloc::vec::Vec;

use super::record::{ResetRecord, ResetResult, FORCED_NAMES};
use crate::time::{Duration, Instant};
use crate::types::*;

/// Resets the history keeps.
pub const HISTORY_LEN: usize = 16;

/// One concluded reset, as status and READ_RESETS give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetSummary {
    /// 1 for the first reset since the bus started.
    pub ordinal: u64,
    pub epoch: Epoch,
    pub new_epoch: Option<Epoch>,
    pub reason: ResetReason,
    pub planned: bool,
    /// An administrator restart of a Failed device (no quiesce).
    pub restart: bool,
    pub requests: u32,
    pub barrier_size: u16,
    pub started_at: Instant,
    pub quiesce: Option<Duration>,
    /// Always there once the hardware was reached, even when it failed there.
    pub hw_reset: Option<Duration>,
    pub restore: Option<Duration>,
    pub total: Option<Duration>,
    pub soft_attempts: u8,
    pub flr_used: bool,
    pub pnp_operations: u32,
    pub result: ResetResult,
    /// Clients forced through their deadline; the first [`FORCED_NAMES`] are named.
    pub forced: u16,
    pub forced_names: [ClientName; FORCED_NAMES],
    pub vetoer_name: ClientName,
    pub veto_reason: Option<VetoReason>,
    pub admin_reason: ShortText,
}

impl ResetSummary {
    /// `None` for a record whose reset has not concluded.
    pub fn of(r: &ResetRecord, ordinal: u64) -> Option<Self> {
        Some(ResetSummary {
            ordinal,
            epoch: r.epoch,
            new_epoch: r.new_epoch,
            reason: r.reason,
            planned: r.planned,
            restart: r.restart,
            requests: r.requests,
            barrier_size: r.barrier_size,
            started_at: r.started_at,
            quiesce: if r.restart { None } else { r.quiesce() },
            hw_reset: r.hw_reset(),
            restore: r.restore(),
            total: r.total(),
            soft_attempts: r.soft_attempts,
            flr_used: r.flr_used,
            pnp_operations: r.pnp_operations,
            result: r.result?,
            forced: u16::try_from(r.forced.len()).unwrap_or(u16::MAX),
            forced_names: r.forced_names,
            vetoer_name: r.vetoer_name,
            veto_reason: r.veto_reason,
            admin_reason: r.admin_reason,
        })
    }
}

/// The last [`HISTORY_LEN`] summaries.
#[derive(Debug, Clone)]
pub struct ResetHistory {
    ring: Vec<ResetSummary>,
    /// Summaries ever written.
    written: u64,
}

impl ResetHistory {
    pub(super) fn new() -> Self {
        let mut ring = Vec::with_capacity(HISTORY_LEN);
        // Touched now so that the first resets fault in no page of it (SPEC §6).
        let blank = ResetSummary {
            ordinal: 0,
            epoch: Epoch(0),
            new_epoch: None,
            reason: ResetReason::AdminForced,
            planned: false,
            restart: false,
            requests: 0,
            barrier_size: 0,
            started_at: Instant::ZERO,
            quiesce: None,
            hw_reset: None,
            restore: None,
            total: None,
            soft_attempts: 0,
            flr_used: false,
            pnp_operations: 0,
            result: ResetResult::Removed,
            forced: 0,
            forced_names: [ShortText::EMPTY; FORCED_NAMES],
            vetoer_name: ShortText::EMPTY,
            veto_reason: None,
            admin_reason: ShortText::EMPTY,
        };
        ring.resize(HISTORY_LEN, blank);
        ring.clear();
        ResetHistory { ring, written: 0 }
    }

    /// Keeps the summary of a concluded reset.
    pub(super) fn push(&mut self, r: &ResetRecord) {
        let Some(summary) = ResetSummary::of(r, self.written + 1) else {
            debug_assert!(false, "a reset is summarised once it concluded");
            return;
        };
        let at = (self.written % HISTORY_LEN as u64) as usize;
        if self.ring.len() < HISTORY_LEN {
            self.ring.push(summary);
        } else {
            self.ring[at] = summary;
        }
        self.written += 1;
    }

    /// Resets concluded since the bus started (the ordinal of the newest).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Oldest to newest.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &ResetSummary> + '_ {
        let split = if self.ring.len() < HISTORY_LEN {
            0
        } else {
            (self.written % HISTORY_LEN as u64) as usize
        };
        self.ring[split..].iter().chain(self.ring[..split].iter())
    }

    pub fn newest(&self) -> Option<&ResetSummary> {
        self.iter().next_back()
    }
}
