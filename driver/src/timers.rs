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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_ms(ms)
    }

    /// A fresh table has nothing armed and no deadline; one armed timer makes it non-empty
    /// and its deadline the table's; cancelling it empties the table again.
    #[test]
    fn arm_and_cancel_decide_emptiness_and_the_next_deadline() {
        let mut t = TimerTable::default();
        assert!(t.is_empty());
        assert_eq!(t.next_deadline(), None);
        t.arm(TimerId::HealthPoll, at(7), 3);
        assert!(!t.is_empty());
        assert_eq!(t.armed(TimerId::HealthPoll), Some((at(7), 3)));
        assert_eq!(t.next_deadline(), Some(at(7)));
        t.cancel(TimerId::HealthPoll);
        assert!(t.is_empty());
        assert_eq!(t.next_deadline(), None);
    }

    /// The next deadline is the earliest of all armed timers, whichever slot holds it.
    #[test]
    fn the_next_deadline_is_the_earliest_armed() {
        let mut t = TimerTable::default();
        t.arm(TimerId::QuiesceDeadline, at(50), 1);
        t.arm(TimerId::QueryDeadline, at(20), 2);
        t.arm(TimerId::HwPoll, at(30), 3);
        assert_eq!(t.next_deadline(), Some(at(20)));
    }

    /// A timer is taken when its deadline has come (at it exactly, or after) and not
    /// before; taking it disarms it and gives back its token, once.
    #[test]
    fn take_if_due_takes_a_timer_at_or_after_its_deadline_only() {
        let mut t = TimerTable::default();
        t.arm(TimerId::HwPoll, at(10), 42);
        assert_eq!(t.take_if_due(TimerId::HwPoll, at(9)), None);
        assert_eq!(t.armed(TimerId::HwPoll), Some((at(10), 42)));
        assert_eq!(t.take_if_due(TimerId::HwPoll, at(10)), Some(42));
        assert_eq!(t.armed(TimerId::HwPoll), None);
        assert_eq!(t.take_if_due(TimerId::HwPoll, at(11)), None);
        assert_eq!(t.take_if_due(TimerId::HealthPoll, at(99)), None);
    }

    /// The first due timer is taken in [`TimerId::ALL`] order, not by deadline; none is
    /// taken while none is due.
    #[test]
    fn take_first_due_goes_in_timer_order() {
        let mut t = TimerTable::default();
        t.arm(TimerId::QueryDeadline, at(1), 5);
        t.arm(TimerId::HwReadyTimeout, at(4), 2);
        assert_eq!(t.take_first_due(at(0)), None);
        assert_eq!(t.take_first_due(at(4)), Some((TimerId::HwReadyTimeout, 2)));
        assert_eq!(t.take_first_due(at(4)), Some((TimerId::QueryDeadline, 5)));
        assert_eq!(t.take_first_due(at(4)), None);
    }

    /// The earliest deadline at or before `until` is taken first, whatever its slot; a
    /// timer due after `until` stays armed.
    #[test]
    fn take_earliest_takes_by_deadline_up_to_until() {
        let mut t = TimerTable::default();
        t.arm(TimerId::QuiesceDeadline, at(30), 1);
        t.arm(TimerId::QueryDeadline, at(10), 2);
        t.arm(TimerId::HealthPoll, at(40), 3);
        assert_eq!(t.take_earliest(at(5)), None);
        assert_eq!(
            t.take_earliest(at(30)),
            Some((at(10), TimerId::QueryDeadline, 2))
        );
        assert_eq!(
            t.take_earliest(at(30)),
            Some((at(30), TimerId::QuiesceDeadline, 1))
        );
        assert_eq!(t.take_earliest(at(30)), None);
        assert_eq!(t.armed(TimerId::HealthPoll), Some((at(40), 3)));
    }

    /// `apply` carries out timer actions and refuses others, changing nothing for them.
    #[test]
    fn apply_takes_timer_actions_only() {
        let mut t = TimerTable::default();
        let arm = Action::ArmTimer {
            timer: TimerId::HwPoll,
            at: at(3),
            token: 9,
        };
        assert!(t.apply(&arm));
        assert_eq!(t.armed(TimerId::HwPoll), Some((at(3), 9)));
        assert!(t.apply(&Action::CancelTimer {
            timer: TimerId::HwPoll
        }));
        assert!(t.is_empty());
        assert!(!t.apply(&Action::Pnp(crate::types::PnpOp::ReenumerateChildren)));
        assert!(t.is_empty());
    }
}
