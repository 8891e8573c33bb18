//! The take-back bugs a test may plant in a slot table ([`SlotMutant`], feature `mutants`),
//! apart: without the feature none of this can act, so mutation testing leaves this file out
//! (.cargo/mutants.toml); the failover model check in hcabus-tests proves each bug caught.

use super::{SlotMutant, SlotState, SlotTable};

impl SlotTable {
    /// Plants `mutant` in this table (feature `mutants`: tests only).
    #[cfg(feature = "mutants")]
    pub fn plant(&mut self, mutant: SlotMutant) {
        self.mutant = Some(mutant);
    }

    fn mutant_is(&self, mutant: SlotMutant) -> bool {
        self.planted(mutant)
    }

    #[inline(always)]
    pub(super) fn planted(&self, _mutant: SlotMutant) -> bool {
        #[cfg(feature = "mutants")]
        {
            self.mutant == Some(_mutant)
        }
        #[cfg(not(feature = "mutants"))]
        {
            false
        }
    }

    /// `ResendAtOnce`: slot `i`, just given up to be sent again here, is queued at once
    /// instead of waiting for its abort's answer. Whether it was.
    pub(super) fn resent_at_once(&mut self, i: u16) -> bool {
        if !(self.slots[usize::from(i)].requeue && self.mutant_is(SlotMutant::ResendAtOnce)) {
            return false;
        }
        let s = &mut self.slots[usize::from(i)];
        s.requeue = false;
        s.state = SlotState::Queued;
        self.queue.push_front(i);
        true
    }

    /// `CompleteGivenUp`: an answer to a command given up frees its slot and completes it.
    pub(super) fn complete_given_up(&mut self, i: usize) {
        self.slots[i].state = SlotState::Free;
        self.aborting -= 1;
    }
}
