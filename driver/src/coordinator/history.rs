//! The reset history: a summary of each of the last [`HISTORY_LEN`] resets, in a ring of its
//! own. The flight recorder's ring is shared with every poll and call; this one holds only
//! concluded resets, so no amount of polling can push a reset out of the administrator's
//! view. Reserved and touched at start; writing a summary copies a fixed-size value.

use alloc::vec::Vec;

use super::record::{ResetFacts, ResetRecord};
use crate::time::Instant;
use crate::types::*;

/// Resets the history keeps.
pub const HISTORY_LEN: usize = 16;

/// One concluded reset, as READ_RESETS gives it: its ordinal and the facts of its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetSummary {
    /// 1 for the first reset since the bus started.
    pub ordinal: u64,
    pub facts: ResetFacts,
}

/// A summary reads as its facts.
impl core::ops::Deref for ResetSummary {
    type Target = ResetFacts;
    fn deref(&self) -> &ResetFacts {
        &self.facts
    }
}

impl ResetSummary {
    /// `None` for a record whose reset has not concluded.
    pub fn of(r: &ResetRecord, ordinal: u64) -> Option<Self> {
        r.result.map(|_| ResetSummary {
            ordinal,
            facts: r.facts,
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
    /// No ring yet (the coordinator reserves it next).
    pub(super) const fn empty() -> Self {
        ResetHistory {
            ring: Vec::new(),
            written: 0,
        }
    }

    /// Its room, reserved in place and touched now so that the first resets fault in no
    /// page of it (docs/design.md §6). Its size is fixed; a refusal is the client table's
    /// (`max_clients`), the key that sizes the rest of the coordinator.
    pub(super) fn reserve(&mut self) -> Result<(), crate::reserve::OutOfMemory> {
        let blank = ResetSummary {
            ordinal: 0,
            facts: ResetFacts::begun(Epoch(0), ResetReason::AdminForced, Instant::ZERO, false),
        };
        self.ring = crate::reserve::try_touched_vec("max_clients", HISTORY_LEN, blank)?;
        Ok(())
    }

    /// The room reserved.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.ring.capacity()
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
        // The oldest is where the next goes; before the ring is full that is its end.
        let split = (self.written % HISTORY_LEN as u64) as usize;
        self.ring[split..].iter().chain(self.ring[..split].iter())
    }

    pub fn newest(&self) -> Option<&ResetSummary> {
        self.iter().next_back()
    }
}
