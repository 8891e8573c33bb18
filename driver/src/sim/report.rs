//! Finished resets, kept during a run without allocating and shown after it.

use std::string::{String, ToString};
use std::vec::Vec;

use crate::coordinator::*;
use crate::time::{Duration, Instant};
use crate::types::*;

/// What one reset did, as the report shows it (SPEC §9 `resets[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetReport {
    pub epoch: Epoch,
    pub reason: ResetReason,
    pub outcome: String,
    pub restart: bool,
    pub quiesce_us: Option<u64>,
    pub hw_reset_us: Option<u64>,
    pub restore_us: Option<u64>,
    pub total_us: Option<u64>,
    pub started_at: Instant,
    pub forced_clients: Vec<String>,
    pub vetoed_by: Option<String>,
    /// Allocations from the reset's first RESET to its last event; `None` without a probe.
    pub allocations: Option<u64>,
    pub pnp_operations: u32,
    pub requests: u32,
    pub soft_attempts: u8,
    pub flr_used: bool,
}

/// A finished reset as kept during the run: no strings, nothing that allocates.
#[derive(Debug, Clone)]
struct RawReset {
    epoch: Epoch,
    reason: ResetReason,
    result: Option<ResetResult>,
    restart: bool,
    quiesce_us: Option<u64>,
    hw_reset_us: Option<u64>,
    restore_us: Option<u64>,
    total_us: Option<u64>,
    started_at: Instant,
    forced: core::ops::Range<usize>,
    allocations: Option<u64>,
    pnp_operations: u32,
    requests: u32,
    soft_attempts: u8,
    flr_used: bool,
}

/// Most resets a run reports; reserved so that reporting never grows a vector mid-run.
const MAX_REPORTED_RESETS: usize = 256;

/// The finished resets of a run, kept in space reserved at start.
#[derive(Debug, Clone)]
pub(crate) struct ResetLog {
    resets: Vec<RawReset>,
    /// Ids forced through their deadline, for every reset in `resets`.
    forced_log: Vec<ClientId>,
}

impl ResetLog {
    pub(crate) fn new(max_clients: usize) -> Self {
        ResetLog {
            resets: Vec::with_capacity(MAX_REPORTED_RESETS),
            forced_log: Vec::with_capacity(4 * max_clients),
        }
    }

    /// Keeps what the finished reset did, without allocating: names are looked up when
    /// someone asks for [`ResetLog::reports`], after the run.
    pub(crate) fn record(&mut self, r: &ResetRecord, allocations: Option<u64>) {
        if self.resets.len() >= self.resets.capacity() {
            return;
        }
        let first = self.forced_log.len();
        for id in &r.forced {
            if self.forced_log.len() < self.forced_log.capacity() {
                self.forced_log.push(*id);
            }
        }
        self.resets.push(RawReset {
            epoch: r.epoch,
            reason: r.reason,
            result: r.result,
            restart: r.restart,
            quiesce_us: r.quiesce().map(Duration::as_us),
            hw_reset_us: r.hw_reset().map(Duration::as_us),
            restore_us: r.restore().map(Duration::as_us),
            total_us: r.total().map(Duration::as_us),
            started_at: r.started_at,
            forced: first..self.forced_log.len(),
            allocations,
            pnp_operations: r.pnp_operations,
            requests: r.requests,
            soft_attempts: r.soft_attempts,
            flr_used: r.flr_used,
        });
    }

    /// Every finished reset, as the report shows it, with clients named by `name`.
    pub(crate) fn reports(&self, name: impl Fn(ClientId) -> String) -> Vec<ResetReport> {
        self.resets
            .iter()
            .map(|r| {
                let (outcome, vetoed_by) = match r.result {
                    Some(ResetResult::Restored(o)) => (o.as_str(), None),
                    Some(ResetResult::Failed(e)) => (e.as_str(), None),
                    Some(ResetResult::Aborted { by, cause }) => (
                        match cause {
                            AbortCause::Veto => "Aborted",
                            AbortCause::Unresponsive => "AbortedUnresponsive",
                        },
                        Some(name(by)),
                    ),
                    Some(ResetResult::Removed) => ("Removed", None),
                    None => ("Unfinished", None),
                };
                ResetReport {
                    epoch: r.epoch,
                    reason: r.reason,
                    outcome: outcome.to_string(),
                    restart: r.restart,
                    quiesce_us: r.quiesce_us,
                    hw_reset_us: r.hw_reset_us,
                    restore_us: r.restore_us,
                    total_us: r.total_us,
                    started_at: r.started_at,
                    forced_clients: self.forced_log[r.forced.clone()]
                        .iter()
                        .map(|id| name(*id))
                        .collect(),
                    vetoed_by,
                    allocations: r.allocations,
                    pnp_operations: r.pnp_operations,
                    requests: r.requests,
                    soft_attempts: r.soft_attempts,
                    flr_used: r.flr_used,
                }
            })
            .collect()
    }
}
