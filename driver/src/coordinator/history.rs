//! The reset history: a summary of each of the last [`HISTORY_LEN`] resets, in a ring of its
//! own. The flight recorder's ring is shared with every poll and call; this one holds only
//! concluded resets, so no amount of polling can push a reset out of the administrator's
//! view. Reserved and touched at start; writing a summary copies a fixed-size value.

use alloc::vec::Vec;

use super::reset_record::{ResetFacts, ResetRecord};
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
    pub(super) fn reserve(
        &mut self,
        pool: &impl crate::reserve::Reserve,
    ) -> Result<(), crate::reserve::OutOfMemory> {
        let blank = ResetSummary {
            ordinal: 0,
            facts: ResetFacts::begun(Epoch(0), ResetReason::AdminForced, Instant::ZERO, false),
        };
        self.ring = pool.filled("max_clients", HISTORY_LEN, blank)?;
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
        // Every slot is there from the start: written in place, never pushed.
        let at = (self.written % HISTORY_LEN as u64) as usize;
        if let Some(slot) = self.ring.get_mut(at) {
            *slot = summary;
            self.written += 1;
        }
    }

    /// Resets concluded since the bus started (the ordinal of the newest).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Oldest to newest.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &ResetSummary> + '_ {
        // Before the ring is full the summaries are its first slots, in order; once full, the
        // oldest is where the next goes.
        let kept = self.written.min(self.ring.len() as u64);
        let oldest = ((self.written - kept) % HISTORY_LEN as u64) as usize;
        let (newer, older) = self.ring[..kept as usize].split_at(oldest.min(kept as usize));
        older.iter().chain(newer.iter())
    }

    pub fn newest(&self) -> Option<&ResetSummary> {
        self.iter().next_back()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::ResetResult;
    use crate::reserve::Heap;

    /// Oldest to newest whatever the count: before the ring fills, across the fill, and
    /// many times round it; the newest is the last written.
    #[test]
    fn the_history_gives_the_last_resets_oldest_first_before_and_after_the_ring_wraps() {
        let mut h = ResetHistory::empty();
        h.reserve(&Heap).expect("room");
        assert_eq!(h.iter().count(), 0);
        assert!(h.newest().is_none());
        let mut r = ResetRecord::with_capacity(1);
        r.result = Some(ResetResult::Removed);
        for n in 1..=(3 * HISTORY_LEN as u64 + 5) {
            h.push(&r);
            let ordinals: Vec<u64> = h.iter().map(|s| s.ordinal).collect();
            let first = n.saturating_sub(HISTORY_LEN as u64) + 1;
            assert_eq!(ordinals, (first..=n).collect::<Vec<_>>(), "after {n}");
            assert_eq!(h.newest().map(|s| s.ordinal), Some(n));
            assert_eq!(h.written(), n);
        }
    }
}
