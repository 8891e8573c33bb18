//! Health, in one place: the poll ([`Coordinator::poll_health`], on its timer), the judge of
//! each sample ([`HealthMonitor`]), what a verdict does to the bus
//! ([`Coordinator::health_sample`]) and the reporter behind QUERY_HEALTH ([`HealthReport`]).
//!
//! The reporter (in the manner of devlink health) is bookkeeping only: what the monitor
//! found, how often, and whether the device recovered. It decides nothing; it is history, so
//! the model check's fingerprint leaves it out.

use super::stage::QuiesceEnd;
use super::Coordinator;
use crate::coordinator::AbortCause;
use crate::hca::{HealthSample, HwError, HwResult, HwStep};
use crate::time::Instant;
use crate::types::{ResetReason, State, TimerId};

/// What the health monitor concluded from one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthVerdict {
    Healthy,
    Catastrophic,
    Stalled,
}

/// Judges health samples. It only runs while the device is operational: during a reset the
/// counter stops by design, and judging it then would raise a second, spurious reset.
#[derive(Debug, Clone, Copy, Default)]
pub struct HealthMonitor {
    last_counter: Option<u32>,
    unchanged_polls: u8,
}

impl HealthMonitor {
    /// Polls in a row that found the counter unchanged (what the verdict depends on; the
    /// counter's own value only has to differ from the last).
    pub fn unchanged_polls(&self) -> u8 {
        self.unchanged_polls
    }

    /// Forget history: called whenever the device (re)enters Operational.
    pub fn rearm(&mut self) {
        *self = HealthMonitor::default();
    }

    /// The verdict on `sample`: `Stalled` once `stall_polls` polls in a row found the
    /// counter where the one before left it (the policy's `health_stall_polls`).
    pub fn observe(&mut self, sample: HealthSample, stall_polls: u8) -> HealthVerdict {
        if sample.catastrophic != 0 {
            return HealthVerdict::Catastrophic;
        }
        match self.last_counter {
            Some(last) if last == sample.counter => {
                self.unchanged_polls = self.unchanged_polls.saturating_add(1);
            }
            _ => self.unchanged_polls = 0,
        }
        self.last_counter = Some(sample.counter);
        if self.unchanged_polls >= stall_polls {
            HealthVerdict::Stalled
        } else {
            HealthVerdict::Healthy
        }
    }
}

/// One fatal error the bus found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthError {
    pub at: Instant,
    /// Catastrophic, command timeout or health stall.
    pub cause: ResetReason,
    /// The catastrophic-error buffer's word for a catastrophic error read by the health
    /// poll; 0 otherwise (an interrupt, an unreadable device, a timeout, a stall).
    pub syndrome: u32,
}

/// What QUERY_HEALTH reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealthReport {
    /// Fatal errors found: each catastrophic error, command timeout or stall that started
    /// a reset or made one fatal.
    pub errors: u64,
    /// Resets that restored the device after an error.
    pub recovers: u64,
    pub last_error: Option<HealthError>,
    /// An error was found and no reset has restored the device since.
    pub open: bool,
    /// The firmware health counter as last read (`None`: never read).
    pub counter: Option<u32>,
    /// When a read last found the counter different from the read before (the first read
    /// counts as a move).
    pub counter_moved_at: Option<Instant>,
    /// The catastrophic word of the last read that had one, until an error takes it.
    syndrome: u32,
}

impl HealthReport {
    /// A health read answered.
    pub(super) fn sample(&mut self, now: Instant, s: HealthSample) {
        if self.counter != Some(s.counter) {
            self.counter_moved_at = Some(now);
        }
        self.counter = Some(s.counter);
        if s.catastrophic != 0 {
            self.syndrome = s.catastrophic;
        }
    }

    /// A fatal cause was found.
    pub(super) fn error(&mut self, now: Instant, cause: ResetReason) {
        let syndrome = match cause {
            ResetReason::Catastrophic => core::mem::take(&mut self.syndrome),
            _ => 0,
        };
        self.errors += 1;
        self.open = true;
        self.last_error = Some(HealthError {
            at: now,
            cause,
            syndrome,
        });
    }

    /// A reset restored the device: an open error is recovered.
    pub(super) fn restored(&mut self) {
        if self.open {
            self.recovers += 1;
            self.open = false;
        }
    }
}

impl Coordinator {
    /// How the quiesce ends, when the read just answered is the one that closes it: `None`
    /// while the barrier is not done, or when this read was out before it was done (its
    /// sample may predate the clients' last acts), in which case the closing read goes out
    /// now.
    fn closing_end(&mut self) -> Option<QuiesceEnd> {
        let q = self.quiesce_mut()?;
        // Set only with the end, and cleared before the end is taken.
        if q.read_before_end {
            q.read_before_end = false;
            self.read_health();
            return None;
        }
        q.end.take()
    }

    /// A health poll: reads the device, and arms the next poll now, so that a read that never
    /// answers is found by the next one instead of silencing the monitor (or, for the read
    /// that closes a quiesce, holding the reset for ever).
    pub(super) fn poll_health(&mut self) {
        if self.health_outstanding {
            log::warn!("the last health read never answered: the device is unreadable");
            self.health_sample(HwResult::Failed(HwError::Timeout));
            // A fault held while a PnP stop is pending (hold.rs) leaves the device serving,
            // and its monitor must go on: the next poll, as a read would have armed it.
            if self.state() == State::Operational
                && self.timers[TimerId::HealthPoll as usize].is_none()
            {
                self.arm(
                    TimerId::HealthPoll,
                    self.now + self.policy.health_poll_interval(),
                );
            }
            return;
        }
        self.read_health();
    }

    pub(super) fn read_health(&mut self) {
        self.health_outstanding = true;
        self.hw_step(HwStep::ReadHealth);
        if self.timers[TimerId::HealthPoll as usize].is_none() {
            self.arm(
                TimerId::HealthPoll,
                self.now + self.policy.health_poll_interval(),
            );
        }
    }

    /// Judges one health read. Health is watched while Operational, Preparing and
    /// Quiescing (docs/design.md §5 "Health"): a fatal cause found during a planned reset's query or
    /// any quiesce joins the reset and makes it fatal. A read that closes a quiesce
    /// ([`QuiesceEnd`]) then decides how it ends.
    pub(super) fn health_sample(&mut self, result: HwResult) {
        self.health_outstanding = false;
        let was = self.state();
        if !matches!(
            was,
            State::Operational | State::Preparing | State::Quiescing
        ) {
            // A sample taken before the hardware reset began: the reset deals with the device.
            return;
        }
        let verdict = match result {
            HwResult::Health(s) => {
                self.health_report.sample(self.now, s);
                self.health.observe(s, self.policy.health_stall_polls)
            }
            // An unreadable health buffer is a device that fell off its PCI link.
            _ => HealthVerdict::Catastrophic,
        };
        let cause = match verdict {
            HealthVerdict::Healthy => None,
            HealthVerdict::Catastrophic => Some(ResetReason::Catastrophic),
            HealthVerdict::Stalled => Some(ResetReason::HealthStall),
        };
        if was == State::Operational {
            // A healthy read was issued by a poll that armed the next one, which is still
            // armed: had it fired first, it would have failed this read as unanswered.
            debug_assert!(
                cause.is_some() || self.timers[TimerId::HealthPoll as usize].is_some(),
                "a healthy read with no poll armed"
            );
            if let Some(reason) = cause {
                self.fault(reason);
            }
            return;
        }
        if let Some(reason) = cause {
            // Join only what is news: a stalled counter read again changes nothing.
            if reason > self.reset.reason || self.reset.planned {
                log::warn!("{} found while {was}: the reset is fatal", reason.as_str());
                self.health_report.error(self.now, reason);
                let _ = self.start_or_join(reason);
            }
        }
        let end = match was {
            State::Quiescing => self.closing_end(),
            // A query's health read never closes a quiesce, even one a fatal cause just began.
            _ => None,
        };
        match end {
            Some(QuiesceEnd::Abort(by)) if self.reset.planned => {
                self.abort(by, AbortCause::Unresponsive)
            }
            Some(_) => self.quiesce_done(),
            None => {
                if self.timers[TimerId::HealthPoll as usize].is_none() {
                    self.arm(
                        TimerId::HealthPoll,
                        self.now + self.policy.health_poll_interval(),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(catastrophic: u32, counter: u32) -> HealthSample {
        HealthSample {
            catastrophic,
            counter,
        }
    }

    #[test]
    fn the_counter_moves_only_when_it_changes() {
        let mut r = HealthReport::default();
        r.sample(Instant::from_ms(1_000), sample(0, 5));
        assert_eq!(r.counter_moved_at, Some(Instant::from_ms(1_000)));
        r.sample(Instant::from_ms(2_000), sample(0, 5));
        assert_eq!(
            (r.counter, r.counter_moved_at),
            (Some(5), Some(Instant::from_ms(1_000)))
        );
        r.sample(Instant::from_ms(3_000), sample(0, 6));
        assert_eq!(r.counter_moved_at, Some(Instant::from_ms(3_000)));
    }

    #[test]
    fn a_catastrophic_error_carries_its_syndrome_once_and_a_restore_recovers_it() {
        let mut r = HealthReport::default();
        r.sample(Instant::from_ms(1), sample(0xbad, 1));
        r.error(Instant::from_ms(1), ResetReason::Catastrophic);
        assert_eq!(
            r.last_error,
            Some(HealthError {
                at: Instant::from_ms(1),
                cause: ResetReason::Catastrophic,
                syndrome: 0xbad
            })
        );
        assert!(r.open);
        r.error(Instant::from_ms(2), ResetReason::Catastrophic);
        assert_eq!(r.last_error.map(|e| e.syndrome), Some(0), "not read again");
        r.restored();
        r.restored();
        assert_eq!((r.errors, r.recovers, r.open), (2, 1, false));
        r.error(Instant::from_ms(3), ResetReason::HealthStall);
        assert_eq!(r.last_error.map(|e| e.syndrome), Some(0));
    }

    #[test]
    fn catastrophic_word_is_fatal_at_once() {
        let mut m = HealthMonitor::default();
        assert_eq!(m.observe(sample(0, 1), 3), HealthVerdict::Healthy);
        assert_eq!(m.observe(sample(0xdead, 2), 3), HealthVerdict::Catastrophic);
    }

    #[test]
    fn counter_unchanged_for_three_polls_is_a_hang() {
        let mut m = HealthMonitor::default();
        assert_eq!(m.observe(sample(0, 7), 3), HealthVerdict::Healthy);
        assert_eq!(m.observe(sample(0, 7), 3), HealthVerdict::Healthy);
        assert_eq!(m.observe(sample(0, 7), 3), HealthVerdict::Healthy);
        assert_eq!(m.observe(sample(0, 7), 3), HealthVerdict::Stalled);
    }

    #[test]
    fn an_advancing_counter_resets_the_stall_count() {
        let mut m = HealthMonitor::default();
        for c in [1, 1, 1, 2, 2, 2, 3] {
            assert_eq!(m.observe(sample(0, c), 3), HealthVerdict::Healthy);
        }
    }

    #[test]
    fn rearm_forgets_the_last_counter() {
        let mut m = HealthMonitor::default();
        m.observe(sample(0, 5), 3);
        m.observe(sample(0, 5), 3);
        m.observe(sample(0, 5), 3);
        m.rearm();
        assert_eq!(m.observe(sample(0, 5), 3), HealthVerdict::Healthy);
        assert_eq!(m.observe(sample(0, 5), 3), HealthVerdict::Healthy);
    }
}
