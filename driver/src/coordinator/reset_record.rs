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

/// What one reset did, every fixed-size fact of it: the coordinator's record, and what each
/// view of a reset is made of (the history's summary, the simulator's report, READ_RESETS and
/// QUERY_STATE's last reset). The durations are derived here, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetFacts {
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
    /// went ahead, the cause when it aborted ([`ResetFacts::aborted_unresponsive`]). The
    /// first [`FORCED_NAMES`] are named in `forced_names`; [`ResetRecord::forced`] has ids.
    pub forced_count: u16,
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
    pub forced_names: [ClientName; FORCED_NAMES],
    /// The client that vetoed, by name.
    pub vetoer_name: ClientName,
}

/// Forced clients named in a reset's facts; `forced_count` counts them all.
pub const FORCED_NAMES: usize = 4;

impl ResetFacts {
    /// A reset of `epoch` for `reason` that began at `now`.
    pub const fn begun(epoch: Epoch, reason: ResetReason, now: Instant, restart: bool) -> Self {
        ResetFacts {
            epoch,
            reason,
            planned: reason.is_planned() && !restart,
            restart,
            requests: 1,
            barrier_size: 0,
            started_at: now,
            reset_sent_at: None,
            quiesce_done_at: None,
            hw_entered: false,
            hw_done_at: None,
            finished_at: None,
            forced_count: 0,
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
    /// it; a vetoed reset has none, a restart a zero one).
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

    /// The outcome's name, `Unfinished` while it has none.
    pub fn outcome(&self) -> &'static str {
        self.result.map_or("Unfinished", ResetResult::as_str)
    }
}

/// The coordinator's record of one reset: its facts and the ids of every client forced
/// through its deadline. Reused in place, so keeping it costs no allocation.
#[derive(Clone)]
pub struct ResetRecord {
    pub facts: ResetFacts,
    /// Room for every client's id, written at start: the first `facts.forced_count` are the
    /// barrier members that passed their quiesce deadline ([`ResetRecord::forced`]). Written
    /// in place, never pushed: nothing here can grow.
    ids: Vec<ClientId>,
}

impl PartialEq for ResetRecord {
    fn eq(&self, other: &Self) -> bool {
        self.facts == other.facts && self.forced() == other.forced()
    }
}

impl Eq for ResetRecord {}

/// The facts and who was forced: not the room past them, whose stale ids would make two
/// records of the same reset print (and the model check's fingerprint hash) apart.
impl core::fmt::Debug for ResetRecord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ResetRecord")
            .field("facts", &self.facts)
            .field("forced", &self.forced())
            .finish()
    }
}

/// The record reads as its facts.
impl core::ops::Deref for ResetRecord {
    type Target = ResetFacts;
    fn deref(&self) -> &ResetFacts {
        &self.facts
    }
}

impl core::ops::DerefMut for ResetRecord {
    fn deref_mut(&mut self) -> &mut ResetFacts {
        &mut self.facts
    }
}

impl ResetRecord {
    /// Becomes a copy of `other` within its own reserved capacity: no allocation (a
    /// derived `clone_from` would allocate a new `forced` list).
    pub fn copy_from(&mut self, other: &ResetRecord) {
        self.facts = other.facts;
        let n = other.forced().len().min(self.ids.len());
        self.ids[..n].copy_from_slice(&other.forced()[..n]);
        self.facts.forced_count = n as u16;
    }

    /// The barrier members that passed their quiesce deadline, by id, in that order.
    pub fn forced(&self) -> &[ClientId] {
        &self.ids[..usize::from(self.facts.forced_count).min(self.ids.len())]
    }

    /// Ids it has room for.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.ids.len()
    }

    /// A record with room for `max_clients` forced ids, on the heap (a host on std keeps
    /// finished records in these; the driver reserves through its platform instead).
    #[cfg(any(test, feature = "std"))]
    pub fn with_capacity(max_clients: usize) -> Self {
        let mut r = Self::empty();
        if let Err(e) = r.reserve(&crate::reserve::Heap, max_clients) {
            panic!("{e}");
        }
        r
    }

    /// Nothing began yet: an empty record is not an open one. No room yet (the coordinator
    /// reserves it next).
    pub(crate) fn empty() -> Self {
        let mut facts = ResetFacts::begun(Epoch(0), ResetReason::AdminForced, Instant::ZERO, false);
        facts.requests = 0;
        ResetRecord {
            facts,
            ids: Vec::new(),
        }
    }

    /// Room for `max_clients` forced members, written now, in place; a refusal names
    /// `max_clients`.
    pub(crate) fn reserve(
        &mut self,
        pool: &impl crate::reserve::Reserve,
        max_clients: usize,
    ) -> Result<(), crate::reserve::OutOfMemory> {
        self.ids = pool.filled("max_clients", max_clients, ClientId::from_raw(0))?;
        Ok(())
    }

    pub(super) fn begin(&mut self, epoch: Epoch, reason: ResetReason, now: Instant, restart: bool) {
        self.facts = ResetFacts::begun(epoch, reason, now, restart);
    }

    /// A barrier member was forced through its deadline.
    pub(super) fn force(&mut self, id: ClientId, name: ClientName) {
        let n = usize::from(self.facts.forced_count);
        if let Some(slot) = self.facts.forced_names.get_mut(n) {
            *slot = name;
        }
        // Room for max_clients, each a barrier member at most once.
        if let Some(slot) = self.ids.get_mut(n) {
            *slot = id;
            self.facts.forced_count = u16::try_from(n + 1).unwrap_or(u16::MAX);
        }
    }
}

#[cfg(test)]
mod tests;
