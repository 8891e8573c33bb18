//! The coordinator's timers as a host keeps them: one slot per [`TimerId`], each armed with
//! a deadline and the token its expiry must carry back.
//!
//! The coordinator asks for timers through [`Action::ArmTimer`] and [`Action::CancelTimer`]
//! rather than keeping deadlines itself, because a kernel host has one WDFTIMER per timer
//! and must know which to set; the token lets a late expiry of a cancelled or re-armed timer
//! be recognised and ignored (docs/protocol.md). Every host (virtual time, stepper,
//! threads; the KMDF glue would mirror it with its WDFTIMERs) keeps them in this table.

use crate::coordinator::Action;
use crate::time::Instant;
use crate::types::TimerId;

/// Armed timers: deadline and token, by [`TimerId`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerTable {
    slots: [Option<(Instant, u32)>; TimerId::COUNT],
}

impl TimerTable {
    /// Carries out a timer action; `false` (and nothing done) for any other action.
    pub fn apply(&mut self, action: &Action) -> bool {
        match *action {
            Action::ArmTimer { timer, at, token } => self.arm(timer, at, token),
            Action::CancelTimer { timer } => self.cancel(timer),
            _ => return false,
        }
        true
    }

    /// Arms `timer` for `at`, replacing what it was armed with.
    pub fn arm(&mut self, timer: TimerId, at: Instant, token: u32) {
        self.slots[timer as usize] = Some((at, token));
    }

    /// Disarms `timer`.
    pub fn cancel(&mut self, timer: TimerId) {
        self.slots[timer as usize] = None;
    }

    /// The deadline and token of `timer`, if armed.
    pub fn armed(&self, timer: TimerId) -> Option<(Instant, u32)> {
        self.slots[timer as usize]
    }

    /// Whether no timer is armed.
    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    /// The earliest deadline of all, if any timer is armed.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.slots.iter().flatten().map(|(at, _)| *at).min()
    }

    /// Disarms `timer` if it is due at `now` and returns its token.
    pub fn take_if_due(&mut self, timer: TimerId, now: Instant) -> Option<u32> {
        let slot = &mut self.slots[timer as usize];
        let (at, token) = (*slot)?;
        (at <= now).then(|| {
            *slot = None;
            token
        })
    }

    /// Disarms and returns the first timer due at `now`, in [`TimerId::ALL`] order.
    pub fn take_first_due(&mut self, now: Instant) -> Option<(TimerId, u32)> {
        TimerId::ALL
            .into_iter()
            .find_map(|t| self.take_if_due(t, now).map(|token| (t, token)))
    }

    /// Disarms and returns the timer with the earliest deadline at or before `until` (ties
    /// in [`TimerId::ALL`] order), with that deadline.
    pub fn take_earliest(&mut self, until: Instant) -> Option<(Instant, TimerId, u32)> {
        let (at, t, token) = TimerId::ALL
            .into_iter()
            .filter_map(|t| self.slots[t as usize].map(|(at, token)| (at, t as usize, token)))
            .filter(|(at, _, _)| *at <= until)
            .min()?;
        self.slots[t] = None;
        Some((at, TimerId::ALL[t], token))
    }
}
