//! Finished resets, kept during a run without allocating and shown after it.

use std::string::{String, ToString};
use std::vec::Vec;

use hcabus::coordinator::*;
use hcabus::time::Duration;
use hcabus::types::*;

/// What one reset did, as the report shows it (docs/hcasim.md `resets[]`): the facts of the
/// coordinator's record (read through them: `r.epoch`, `r.quiesce_us()`), with clients named
/// and what the run measured around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetReport {
    pub facts: ResetFacts,
    /// Clients the reset went ahead without, past their deadline.
    pub forced_clients: Vec<String>,
    /// Clients that passed their quiesce deadline, whether the reset went ahead (then
    /// `forced_clients` too) or aborted for them (an abort is not a veto).
    pub unresponsive_clients: Vec<String>,
    /// The CAN_VETO client that refused a planned reset; never an unresponsive one.
    pub vetoed_by: Option<String>,
    /// Allocations from the reset's first RESET to its last event; `None` without a probe.
    pub allocations: Option<u64>,
    /// The adapter, in a host of several; `None` (and not reported) with one.
    pub hca: Option<String>,
}

/// A report reads as the facts of its reset.
impl core::ops::Deref for ResetReport {
    type Target = ResetFacts;
    fn deref(&self) -> &ResetFacts {
        &self.facts
    }
}

/// Most resets a run reports unless its setup says fewer; reserved so that reporting never
/// grows a vector mid-run.
pub const REPORTED_RESETS: usize = 256;

/// The finished resets of a run, kept as the coordinator's own records in space reserved at
/// start: [`ResetRecord::copy_from`] reuses each record's forced list, so keeping one never
/// allocates. Names are looked up when someone asks for [`ResetLog::reports`], after the run.
#[derive(Debug, Clone)]
pub(crate) struct ResetLog {
    records: Vec<ResetRecord>,
    allocations: Vec<Option<u64>>,
    len: usize,
}

impl ResetLog {
    pub(crate) fn new(max_clients: usize, kept: usize) -> Self {
        ResetLog {
            records: (0..kept)
                .map(|_| ResetRecord::with_capacity(max_clients))
                .collect(),
            allocations: Vec::with_capacity(kept),
            len: 0,
        }
    }

    /// Keeps what the finished reset did; `allocations` is what a probe counted during it.
    pub(crate) fn record(&mut self, r: &ResetRecord, allocations: Option<u64>) {
        let Some(slot) = self.records.get_mut(self.len) else {
            if self.len == self.records.len() {
                log::warn!(
                    "more than {} resets: the report shows the first ones",
                    self.records.len()
                );
                self.len += 1;
            }
            return;
        };
        slot.copy_from(r);
        self.allocations.push(allocations);
        self.len += 1;
    }

    /// Every finished reset, as the report shows it, with clients named by `name`.
    pub(crate) fn reports(&self, name: impl Fn(ClientId) -> String) -> Vec<ResetReport> {
        self.records[..self.len.min(self.records.len())]
            .iter()
            .zip(&self.allocations)
            .map(|(r, &allocations)| ResetReport::new(r, allocations, &name))
            .collect()
    }
}

impl ResetReport {
    fn new(r: &ResetRecord, allocations: Option<u64>, name: impl Fn(ClientId) -> String) -> Self {
        let unresponsive_clients: Vec<String> = r.forced().iter().map(|id| name(*id)).collect();
        let forced_clients = if r.aborted_unresponsive() {
            Vec::new()
        } else {
            unresponsive_clients.clone()
        };
        ResetReport {
            facts: r.facts,
            forced_clients,
            unresponsive_clients,
            vetoed_by: r.vetoer().map(&name),
            allocations,
            hca: None,
        }
    }

    /// The reason as reports name it: a restart of a Failed device is `admin_restart`.
    pub fn reason_name(&self) -> &'static str {
        if self.restart {
            "admin_restart"
        } else {
            self.reason.as_str()
        }
    }

    pub fn quiesce_us(&self) -> Option<u64> {
        self.quiesce().map(Duration::as_us)
    }

    pub fn hw_reset_us(&self) -> Option<u64> {
        self.hw_reset().map(Duration::as_us)
    }

    pub fn restore_us(&self) -> Option<u64> {
        self.restore().map(Duration::as_us)
    }

    pub fn total_us(&self) -> Option<u64> {
        self.total().map(Duration::as_us)
    }

    /// What the vetoer said.
    pub fn veto_reason(&self) -> Option<String> {
        self.veto_reason.map(|t| t.to_string())
    }
}

/// The `resets[]` entry of the JSON report (docs/hcasim.md). The field names and their order are a
/// contract with outside tools: this is the one place they are written.
impl serde::Serialize for ResetReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("ResetReport", 16)?;
        m.serialize_field("epoch", &self.epoch.0)?;
        m.serialize_field("reason", self.reason_name())?;
        m.serialize_field("outcome", self.outcome())?;
        m.serialize_field("quiesce_us", &self.quiesce_us())?;
        m.serialize_field("hw_reset_us", &self.hw_reset_us())?;
        m.serialize_field("restore_us", &self.restore_us())?;
        m.serialize_field("total_us", &self.total_us())?;
        m.serialize_field("forced_clients", &self.forced_clients)?;
        m.serialize_field("vetoed_by", &self.vetoed_by)?;
        m.serialize_field("veto_reason", &self.veto_reason())?;
        m.serialize_field("allocations", &self.allocations)?;
        m.serialize_field("pnp_operations", &self.pnp_operations)?;
        match &self.hca {
            Some(hca) => m.serialize_field("hca", hca)?,
            None => m.skip_field("hca")?,
        }
        // Appended: soft resets asserted (retries included) and whether an FLR followed.
        m.serialize_field("soft_attempts", &self.soft_attempts)?;
        m.serialize_field("flr_used", &self.flr_used)?;
        // Appended: who passed the quiesce deadline, for an abort as for a forced reset.
        m.serialize_field("unresponsive_clients", &self.unresponsive_clients)?;
        m.end()
    }
}
