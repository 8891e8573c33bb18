//! Inputs that are not client calls: the administrator's (docs/design.md §7), the hardware's
//! (errors, removal) and the host's (timer expiries, deliveries).

use super::stage::{AttemptFailure, FwAllowance, HwPhase, Stage, Walk};
use super::{Coordinator, ResetResult};
use crate::errors::*;
use crate::hca::HwStep;
use crate::policy::{Policy, PolicyError};
use crate::recorder::RecordKind;
use crate::time::Instant;
use crate::types::*;

impl Coordinator {
    // ----- administrator -------------------------------------------------------------------

    /// An administrator's reset: counted by storm control, never refused by it. On a Failed
    /// device it restarts it.
    pub fn admin_reset(
        &mut self,
        now: Instant,
        kind: AdminReset,
    ) -> Result<Epoch, AdminResetError> {
        self.admin_reset_because(now, kind, "")
    }

    /// [`Coordinator::admin_reset`] with the administrator's reason, kept (its first 32
    /// bytes) in the flight recorder and in the reset's summary.
    pub fn admin_reset_because(
        &mut self,
        now: Instant,
        kind: AdminReset,
        reason: &str,
    ) -> Result<Epoch, AdminResetError> {
        self.advance(now);
        let reason = ShortText::cut(reason);
        self.record_named(
            RecordKind::Call {
                client: None,
                call: Call::AdminReset,
            },
            &reason,
        );
        let result = self.admin_reset_inner(kind);
        if result.is_ok() && self.reset.is_open() && self.reset.admin_reason.as_str().is_empty() {
            self.reset.admin_reason = reason;
        }
        result
    }

    fn admin_reset_inner(&mut self, kind: AdminReset) -> Result<Epoch, AdminResetError> {
        if self.held_now() {
            return Err(self.refused(
                None,
                Call::AdminReset,
                AdminResetError::StopPending,
                AdminResetError::code,
            ));
        }
        match self.state() {
            State::Removed => Err(self.refused(
                None,
                Call::AdminReset,
                AdminResetError::DeviceRemoved,
                AdminResetError::code,
            )),
            // A planned reset is maintenance of a serving device: nothing to ask a Failed
            // one's clients about. RESTART (or a forced reset, or a firmware activation,
            // which restart it) is the way out.
            State::Failed if kind == AdminReset::Planned => Err(self.refused(
                None,
                Call::AdminReset,
                AdminResetError::DeviceFailed,
                AdminResetError::code,
            )),
            State::Failed => {
                if kind == AdminReset::FirmwareActivate {
                    // The restart carries the allowance: the staged firmware may come up.
                    self.fw = FwAllowance::Requested;
                }
                self.restart(kind.reason());
                Ok(self.epoch)
            }
            _ => {
                self.counters.admin_resets += 1;
                // Administrator reasons are never automatic, so storm control cannot refuse.
                Ok(self.start_or_join(kind.reason()).unwrap_or(self.epoch))
            }
        }
    }

    /// Restart a Failed device: straight to the hardware reset, no quiesce (nobody holds
    /// hardware), RESET_END to every client on success.
    pub fn admin_restart(&mut self, now: Instant) -> Result<Epoch, RestartError> {
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::AdminRestart,
        });
        match self.state() {
            State::Failed if self.held_now() => Err(self.refused(
                None,
                Call::AdminRestart,
                RestartError::StopPending,
                RestartError::code,
            )),
            State::Failed => {
                self.restart(ResetReason::AdminForced);
                Ok(self.epoch)
            }
            State::Removed => Err(self.refused(
                None,
                Call::AdminRestart,
                RestartError::DeviceRemoved,
                RestartError::code,
            )),
            _ => Err(self.refused(
                None,
                Call::AdminRestart,
                RestartError::NotFailed,
                RestartError::code,
            )),
        }
    }

    /// Validated as a change from the policy in force, so that a broken rule between two
    /// keys names the one the administrator set; takes effect from the next timer armed.
    pub fn set_policy(&mut self, now: Instant, policy: Policy) -> Result<(), PolicyError> {
        if let Err(e) = policy.validate_change(&self.policy) {
            return Err(self.refuse_policy(now, e));
        }
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::SetPolicy,
        });
        let (old, new) = (self.policy.values(), policy.values());
        for (key, (old, new)) in (0u8..).zip(old.into_iter().zip(new)) {
            if old != new {
                self.record(RecordKind::PolicyChanged { key, old, new });
            }
        }
        self.policy = policy;
        Ok(())
    }

    /// A policy refused: by [`Coordinator::set_policy`], or before it by the IOCTL for a
    /// field no policy can hold. Recorded under the key at fault (the record's name), so the
    /// log says which one, and counted as the administrator's.
    pub fn refuse_policy(&mut self, now: Instant, e: PolicyError) -> PolicyError {
        self.advance(now);
        self.counters.admin_refusals += 1;
        let kind = RecordKind::Refused {
            client: None,
            call: Call::SetPolicy,
            code: RefusalCode::InvalidPolicy,
        };
        self.record_named(kind, &ShortText::cut(e.field));
        e
    }

    /// An administrator's request refused before it could act (a policy for a device that
    /// is gone): recorded and counted as the administrator's.
    pub fn refuse_admin(&mut self, now: Instant, call: Call, code: RefusalCode) {
        self.advance(now);
        self.refused(None, call, code, |c| c);
    }

    /// Who the records written from now on are for: a host sets the administrator whose
    /// request it serves, and [`Actor::Nobody`] once it is served.
    pub fn set_actor(&mut self, actor: Actor) {
        self.recorder.set_actor(actor);
    }

    /// A fault was injected into the device (the simulator), or refused by it: an
    /// administrator's act, recorded as any other.
    pub fn fault_injected(
        &mut self,
        now: Instant,
        fault: &crate::fault::FaultRequest,
        accepted: bool,
    ) {
        self.advance(now);
        self.record(RecordKind::FaultInjected {
            fault: fault.code,
            count: fault.count,
            port: fault.port,
            duration_ms: fault.duration_ms,
            accepted,
        });
    }

    // ----- hardware and host inputs --------------------------------------------------------

    /// A firmware command never completed.
    pub fn command_timeout(&mut self, now: Instant) {
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::CommandTimeout,
        });
        self.fault(ResetReason::CommandTimeout);
    }

    /// A catastrophic error reported by interrupt rather than by the health poll.
    pub fn catastrophic_error(&mut self, now: Instant) {
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::Catastrophic,
        });
        self.fault(ResetReason::Catastrophic);
    }

    pub(super) fn fault(&mut self, reason: ResetReason) {
        if matches!(self.state(), State::Failed | State::Removed) {
            return;
        }
        if self.defer_fault(reason) {
            return;
        }
        self.health_report.error(self.now, reason);
        // A refusal here is storm control failing the device; it is recorded and acted on.
        let _ = self.start_or_join(reason);
    }

    /// The device is gone. Every wait ends now; DEVICE_FATAL to everyone; later calls fail.
    pub fn surprise_removal(&mut self, now: Instant) {
        self.advance(now);
        if self.state() == State::Removed {
            return;
        }
        self.record(RecordKind::Call {
            client: None,
            call: Call::SurpriseRemoval,
        });
        self.cancel_all_timers();
        self.transition(Stage::Removed);
        self.pnp(PnpOp::ReportChildrenMissing);
        let fatal = Event::DeviceFatal {
            reason: FatalReason::SurpriseRemoval,
        };
        self.deliver_each(Walk::NewestFirst, fatal, |e| {
            e.state = ClientState::Fatal;
            true
        });
        if self.reset.is_open() {
            self.conclude(ResetResult::Removed);
        }
    }

    pub fn timer_expired(&mut self, now: Instant, timer: TimerId, token: u32) {
        self.advance(now);
        if self.timers[timer as usize] != Some(token) {
            // Cancelled or re-armed while the expiry was on its way: not ours any more.
            log::debug!("stale expiry of timer {} ignored", timer.as_str());
            return;
        }
        self.timers[timer as usize] = None;
        let phase = self.hw_phase();
        match (timer, self.state()) {
            (TimerId::HealthPoll, State::Operational | State::Preparing | State::Quiescing) => {
                self.poll_health()
            }
            // Silence is consent.
            (TimerId::QueryDeadline, State::Preparing) => self.end_query(None),
            (TimerId::QuiesceDeadline, State::Quiescing) => self.deadline_passed(),
            (TimerId::HwPoll, State::Resetting)
                if matches!(
                    phase,
                    Some(HwPhase::WaitingReady { .. } | HwPhase::LongWait)
                ) =>
            {
                self.hw_step(HwStep::ProbeReady)
            }
            (TimerId::HwReadyTimeout, State::Resetting)
                if matches!(phase, Some(HwPhase::WaitingReady { .. })) =>
            {
                self.cancel(TimerId::HwPoll);
                self.attempt_failed(AttemptFailure::Silent);
            }
            (TimerId::AutoRestartWindow, State::Resetting) => {
                self.fail(FailReason::AutoRestartExpired)
            }
            _ => log::debug!("timer {} in {} ignored", timer.as_str(), self.state()),
        }
    }

    /// The host delivered (or, for a client gone meanwhile, dropped) an event.
    pub fn event_delivered(&mut self, now: Instant, _client: ClientId, kind: EventKind) {
        self.advance(now);
        if kind != EventKind::ResetEnd {
            return;
        }
        if let Some(restore) = self.restore_mut().filter(|r| r.pending_end > 0) {
            restore.pending_end -= 1;
            if restore.pending_end == 0 {
                self.finish_restore();
            }
        }
    }
}
