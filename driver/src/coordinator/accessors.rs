//! What hosts and tools may read of the coordinator: its state, its records and its
//! clients. Nothing here changes anything, except taking the next action.

use super::{Coordinator, ResetHistory, ResetRecord};
use crate::coordinator::{Action, ClientInfo, Counters, HealthReport};
use crate::errors::LookupError;
use crate::hca::Identity;
use crate::policy::Policy;
use crate::recorder::FlightRecorder;
use crate::types::*;

impl Coordinator {
    pub fn state(&self) -> State {
        self.stage.state()
    }
    /// The state, and inside a reset the part of it that decides what an input does
    /// ("Resetting: probe_ready", "Quiescing: last health read"): docs/protocol.md's table
    /// is keyed by it.
    pub fn stage_name(&self) -> &'static str {
        self.stage.name()
    }
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    pub fn identity(&self) -> &Identity {
        &self.identity
    }
    pub fn recorder(&self) -> &FlightRecorder {
        &self.recorder
    }
    /// Summaries of the last [`HISTORY_LEN`](super::HISTORY_LEN) resets that concluded.
    pub fn history(&self) -> &ResetHistory {
        &self.history
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    pub fn health_report(&self) -> &HealthReport {
        &self.health_report
    }
    /// Polls in a row that found the health counter unchanged (3 is a stall).
    pub fn health_unchanged_polls(&self) -> u8 {
        self.health.unchanged_polls()
    }
    pub fn max_clients(&self) -> usize {
        self.slots.len()
    }
    /// A generation above every id this coordinator ever gave out: what a host that builds
    /// the next coordinator of the same device hands to [`Coordinator::retire_ids_before`].
    pub fn next_generation(&self) -> u32 {
        let top = self.slots.iter().map(|s| s.generation).max().unwrap_or(0);
        top.saturating_add(1)
    }
    /// True from the first RESET of a reset until its outcome is final.
    pub fn reset_in_progress(&self) -> bool {
        self.reset.is_open()
    }
    /// The current reset's record while one runs, else the last one's; `None` before any.
    pub fn last_reset(&self) -> Option<&ResetRecord> {
        (self.reset.requests > 0).then_some(&self.reset)
    }
    /// The last reset whose outcome is final (what `ResetConcluded` announced); `None`
    /// before any.
    pub fn concluded_reset(&self) -> Option<&ResetRecord> {
        (self.concluded.requests > 0).then_some(&self.concluded)
    }
    /// Registered clients in registration order.
    pub fn clients(&self) -> impl Iterator<Item = ClientInfo> + '_ {
        self.order
            .iter()
            .filter_map(|i| self.slots[usize::from(i)].entry.as_ref())
            .map(Self::info)
    }
    pub fn client(&self, id: ClientId) -> Result<ClientInfo, LookupError> {
        let i = self.lookup(id)?;
        self.entry(i).map(Self::info).ok_or(LookupError::Unknown)
    }
    pub fn client_count(&self) -> usize {
        self.order.len()
    }
    /// Actions queued and not yet taken by the host.
    pub fn pending_actions(&self) -> usize {
        self.actions.len()
    }

    pub fn pop_action(&mut self) -> Option<Action> {
        self.actions.pop()
    }
}
