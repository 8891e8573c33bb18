//! The hardware side of a reset (docs/design.md §5 "Resetting"): save config space, assert soft
//! resets then one FLR, wait for the device, restore it, and verify it is the same adapter
//! on firmware that is allowed to run.

use super::stage::{AttemptFailure, FwAllowance, HwPhase, HwReset, Stage};
use super::{Coordinator, ResetResult};
use crate::hca::{HwCompletion, HwResult, HwStep, Identity, Readiness};
use crate::recorder::{HwOutcome, RecordKind};
use crate::time::{Duration, Instant};
use crate::types::*;

/// The poll interval once retries are exhausted but the device may still reappear.
const LONG_WAIT_POLL: Duration = Duration::from_ms(1_000);

/// Probes made early in a wait for a device that names no settle time: at 1/8, 1/4 and
/// 1/2 of the poll interval, then on the interval's own grid (1, 2, 3... intervals). A
/// device back at once is found an eighth of an interval after the assert, not a whole
/// one later; one that takes longer is found when it was before, at the cost of at most
/// three more probes per attempt.
const EARLY_LOOKS: u8 = 3;

impl Coordinator {
    /// Where the hardware reset stands; `None` outside Resetting.
    pub(super) fn hw_phase(&self) -> Option<HwPhase> {
        match &self.stage {
            Stage::Resetting(r) => Some(r.phase),
            _ => None,
        }
    }

    fn hw_reset_mut(&mut self) -> Option<&mut HwReset> {
        match &mut self.stage {
            Stage::Resetting(r) => Some(r),
            _ => None,
        }
    }

    fn set_phase(&mut self, phase: HwPhase) {
        if let Some(r) = self.hw_reset_mut() {
            r.phase = phase;
        }
    }

    pub fn hw_complete(&mut self, now: Instant, done: HwCompletion) {
        self.advance(now);
        let (outcome, detail) = HwOutcome::of(&done.result, self.health_report.counter);
        self.record(RecordKind::Hw {
            step: done.step,
            outcome,
            detail,
        });
        if done.step == HwStep::ReadHealth {
            self.health_sample(done.result);
            return;
        }
        let Some(phase) = self.hw_phase().filter(|p| p.expects(done.step)) else {
            log::debug!(
                "completion of {} in {} ignored",
                done.step.as_str(),
                self.state()
            );
            return;
        };
        match (done.step, done.result) {
            (HwStep::SaveConfig, HwResult::Done) => {
                if let Some(r) = self.hw_reset_mut() {
                    r.config_saved = true;
                }
                self.assert_next();
            }
            // Without saved config space there is nothing to restore the device to.
            (HwStep::SaveConfig, _) => self.fail(FailReason::HardwareDead),
            (HwStep::AssertReset | HwStep::FunctionLevelReset, HwResult::Done) => {
                self.wait_ready(Duration::ZERO);
            }
            (HwStep::AssertReset | HwStep::FunctionLevelReset, HwResult::Settle(settle)) => {
                self.wait_ready(settle);
            }
            (HwStep::ProbeReady, HwResult::Readiness(Readiness::Ready)) => {
                self.cancel(TimerId::HwReadyTimeout);
                self.cancel(TimerId::HwPoll);
                self.set_phase(HwPhase::RestoringConfig);
                self.hw_step(HwStep::RestoreConfig);
            }
            // Still in reset: config reads fail or return all-ones until it is back.
            (HwStep::ProbeReady, _) => {
                let wait = match phase {
                    HwPhase::WaitingReady { looks } => {
                        self.set_phase(HwPhase::WaitingReady {
                            looks: looks.saturating_add(1),
                        });
                        self.until_next_look(looks.saturating_add(1))
                    }
                    _ => LONG_WAIT_POLL,
                };
                self.arm(TimerId::HwPoll, self.now + wait);
            }
            (HwStep::RestoreConfig, HwResult::Done) => {
                self.set_phase(HwPhase::InitCommandInterface);
                self.hw_step(HwStep::InitCommandInterface);
            }
            (HwStep::InitCommandInterface, HwResult::Done) => {
                self.set_phase(HwPhase::ReadingIdentity);
                self.hw_step(HwStep::ReadIdentity);
            }
            (HwStep::ReadIdentity, HwResult::Identity(found)) => self.verify(found),
            _ => self.attempt_failed(AttemptFailure::Error),
        }
    }

    /// After an assert: nothing touches the device for `settle`, then probes every poll
    /// interval, bounded by `hw_ready_timeout` counted from the end of the settle. A device
    /// that names no settle time is also looked at early (see [`EARLY_LOOKS`]).
    fn wait_ready(&mut self, settle: Duration) {
        let probing_from = self.now + settle;
        self.arm(
            TimerId::HwReadyTimeout,
            probing_from + self.policy.hw_ready_timeout(),
        );
        let first = if settle == Duration::ZERO {
            self.set_phase(HwPhase::WaitingReady { looks: 0 });
            self.until_next_look(0)
        } else {
            self.set_phase(HwPhase::WaitingReady { looks: EARLY_LOOKS });
            settle.max(self.policy.hw_poll_interval())
        };
        self.arm(TimerId::HwPoll, self.now + first);
    }

    /// From the probe numbered `looks` (0 before any) to the next: the first look an
    /// eighth of the poll interval after the assert, each early look doubling the time
    /// waited since it, then the whole interval.
    fn until_next_look(&self, looks: u8) -> Duration {
        let interval = self.policy.hw_poll_interval().as_us();
        let shift = match looks {
            0 => EARLY_LOOKS,
            n if n <= EARLY_LOOKS => EARLY_LOOKS + 1 - n,
            _ => 0,
        };
        Duration::from_us((interval >> shift).max(1))
    }

    /// Resetting: config space is saved once per reset (a restart after a failure reuses
    /// what the failed reset saved), then the first assert.
    pub(super) fn enter_resetting(&mut self, config_saved: bool) {
        self.reset.hw_entered = true;
        self.transition(Stage::Resetting(HwReset {
            phase: HwPhase::SavingConfig,
            attempts: 0,
            config_saved,
        }));
        self.arm(
            TimerId::AutoRestartWindow,
            self.now + self.policy.auto_restart_window(),
        );
        if config_saved {
            self.assert_next();
        } else {
            self.hw_step(HwStep::SaveConfig);
        }
    }

    /// Soft resets first, `reset_retries` times after the first, then one FLR.
    fn assert_next(&mut self) {
        let Some(r) = self.hw_reset_mut() else {
            return;
        };
        r.phase = HwPhase::Asserting;
        let attempt = r.attempts;
        r.attempts += 1;
        if self.fw == FwAllowance::Requested {
            self.fw = FwAllowance::Asserted;
        }
        let step = if attempt <= self.policy.reset_retries {
            self.reset.soft_attempts += 1;
            HwStep::AssertReset
        } else {
            self.reset.flr_used = true;
            HwStep::FunctionLevelReset
        };
        self.ports_reset();
        self.hw_step(step);
    }

    pub(super) fn attempt_failed(&mut self, why: AttemptFailure) {
        let attempts = self.hw_reset_mut().map_or(0, |r| r.attempts);
        log::warn!("hardware reset attempt {attempts} failed: {why:?}");
        if attempts <= self.policy.reset_retries + 1 {
            self.assert_next();
        } else if why == AttemptFailure::Silent {
            self.set_phase(HwPhase::LongWait);
            self.arm(TimerId::HwPoll, self.now + LONG_WAIT_POLL);
        } else {
            self.fail(FailReason::HardwareDead);
        }
    }

    fn verify(&mut self, found: Identity) {
        if !self.identity.same_adapter(&found) {
            log::error!("another device answered after reset: {found:?}");
            self.device_replaced(found);
            return;
        }
        let fw = self.fw;
        let mut follow_up = None;
        if fw == FwAllowance::Requested {
            // The activation came after this reset's assert: the firmware it staged is not
            // running yet, so one more reset is owed (docs/design.md §5).
            follow_up = Some(ResetReason::FirmwareActivate);
            self.record(RecordKind::FollowUpScheduled {
                reason: ResetReason::FirmwareActivate,
            });
        } else {
            self.fw = FwAllowance::None;
        }
        if found.fw_version == self.identity.fw_version {
            self.hw_done(ResetOutcome::Restored, follow_up);
        } else if fw != FwAllowance::None {
            self.identity.fw_version = found.fw_version;
            self.hw_done(ResetOutcome::FirmwareChanged, follow_up);
        } else {
            // New firmware nobody activated: its capabilities cannot be trusted, so it is
            // treated as another device.
            log::error!("firmware changed outside a firmware activation");
            self.device_replaced(found);
        }
    }

    /// Another device answered: PnP takes over, once per replacement. A restart that finds
    /// the same replacement again fails the same way without telling PnP twice.
    fn device_replaced(&mut self, found: Identity) {
        if self.replacement != Some(found) {
            self.replacement = Some(found);
            self.pnp(PnpOp::ReportChildrenMissing);
            self.pnp(PnpOp::ReenumerateChildren);
        }
        self.fail(FailReason::DeviceReplaced);
    }

    /// The device is verified: a new epoch, and on to Restoring.
    fn hw_done(&mut self, outcome: ResetOutcome, follow_up: Option<ResetReason>) {
        self.cancel(TimerId::AutoRestartWindow);
        self.reset.hw_done_at = Some(self.now);
        self.reset.result = Some(ResetResult::Restored(outcome));
        self.epoch = self.epoch.next();
        self.reset.new_epoch = Some(self.epoch);
        self.enter_restoring(follow_up);
    }
}
