//! Protocol bugs planted on purpose, to show that the model check (tests/tests/suites/model_check.rs)
//! catches each with a counterexample. Compiled in only with the `mutants` feature, which only
//! the test crate turns on; without it [`Coordinator::planted`] is `false` and folds away.

use super::Coordinator;

/// A planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// The barrier leaves out a client that has not been through a reset yet (an "idle"
    /// one): it hears no RESET, yet the hardware is reset under it.
    SkipIdleInBarrier,
    /// The quiesce closes when one member is still to execute: RESET_END goes out before
    /// the last `reset_execute`.
    EndBeforeLastExecute,
    /// A veto is accepted after RESET went out (while Quiescing).
    VetoAfterReset,
}

impl Mutant {
    pub const ALL: [Mutant; 3] = [
        Mutant::SkipIdleInBarrier,
        Mutant::EndBeforeLastExecute,
        Mutant::VetoAfterReset,
    ];
}

impl Coordinator {
    /// Plants `mutant` in this coordinator (feature `mutants`: tests only).
    #[cfg(feature = "mutants")]
    pub fn plant(&mut self, mutant: Mutant) {
        self.mutant = Some(mutant);
    }

    #[inline(always)]
    pub(super) fn planted(&self, mutant: Mutant) -> bool {
        #[cfg(feature = "mutants")]
        {
            self.mutant == Some(mutant)
        }
        #[cfg(not(feature = "mutants"))]
        {
            let _ = mutant;
            false
        }
    }
}
