//! The client side of a reset (docs/design.md §4-§5): starting or joining one, the quiesce barrier,
//! the RESET_END fan-out, and the three ways a reset ends badly (fail, abort, removal).

use super::stage::{Quiesce, QuiesceEnd, Restore, Stage, Walk};
use super::{Coordinator, Mutant, ResetResult};
use crate::errors::RequestError;
use crate::recorder::RecordKind;
use crate::types::*;

use super::Action;

impl Coordinator {
    pub(super) fn quiesce_mut(&mut self) -> Option<&mut Quiesce> {
        match &mut self.stage {
            Stage::Quiescing(q) => Some(q),
            _ => None,
        }
    }

    pub(super) fn restore_mut(&mut self) -> Option<&mut Restore> {
        match &mut self.stage {
            Stage::Restoring(r) => Some(r),
            _ => None,
        }
    }

    /// Starts a reset, or lets the request join the one under way (docs/design.md §3 coalescing).
    pub(super) fn start_or_join(&mut self, reason: ResetReason) -> Result<Epoch, RequestError> {
        match self.state() {
            State::Operational => self.start_reset(reason),
            State::Preparing => {
                self.join(reason);
                if !self.reset.planned {
                    // A forced or fatal cause: nobody may veto it now, on to the quiesce.
                    let fail = self.recovery_off(reason);
                    self.end_query(fail);
                }
                Ok(self.reset.epoch)
            }
            State::Quiescing | State::Resetting => {
                self.join(reason);
                if let (Some(off), Some(q)) = (self.recovery_off(reason), self.quiesce_mut()) {
                    q.fail.get_or_insert(off);
                }
                Ok(self.reset.epoch)
            }
            State::Restoring => {
                if reason == ResetReason::FirmwareActivate {
                    self.fw = super::FwAllowance::Requested;
                }
                self.counters.joined_requests += 1;
                if let Some(r) = self.restore_mut() {
                    r.follow_up = Some(r.follow_up.map_or(reason, |f| f.max(reason)));
                }
                self.record(RecordKind::FollowUpScheduled { reason });
                Ok(self.epoch)
            }
            State::Failed => Err(RequestError::DeviceFailed),
            State::Removed => Err(RequestError::DeviceRemoved),
        }
    }

    /// A request or fault joins the reset under way: the graver reason wins.
    fn join(&mut self, reason: ResetReason) {
        self.counters.joined_requests += 1;
        self.reset.requests += 1;
        if reason > self.reset.reason {
            self.reset.reason = reason;
        }
        if !reason.is_planned() {
            // A forced cause met a planned reset: nobody may veto or abort it now.
            self.reset.planned = false;
        }
        if reason == ResetReason::FirmwareActivate {
            // Joining after the assert: verification schedules a follow-up.
            self.fw = super::FwAllowance::Requested;
        }
        self.record(RecordKind::ResetJoined { reason });
    }

    /// With `auto_recover` off a fatal error is not reset: the device is quiesced and left
    /// Failed for the administrator.
    fn recovery_off(&self, reason: ResetReason) -> Option<FailReason> {
        (!self.policy.auto_recover && reason.is_fatal()).then_some(FailReason::AutoRecoverOff)
    }

    pub(super) fn start_reset(&mut self, reason: ResetReason) -> Result<Epoch, RequestError> {
        debug_assert_eq!(self.state(), State::Operational);
        let now = self.now;
        let storm_fail = reason.is_automatic()
            && self.storm.count_within(now, self.policy.storm_window())
                >= usize::from(self.policy.max_auto_resets);
        self.storm.push(now);
        if reason.is_automatic() {
            self.counters.auto_resets += 1;
        }
        self.counters.resets_started += 1;
        self.counters.by_reason[reason as usize] += 1;
        self.reset.begin(self.epoch, reason, now, false);
        if reason == ResetReason::FirmwareActivate {
            self.fw = super::FwAllowance::Requested;
        }
        self.record(RecordKind::ResetStarted {
            epoch: self.epoch,
            reason,
            planned: self.reset.planned,
        });
        if self.reset.planned {
            self.enter_preparing();
        } else {
            let fail = if storm_fail {
                Some(FailReason::StormLimit)
            } else {
                self.recovery_off(reason)
            };
            self.enter_quiescing(fail);
        }
        if storm_fail {
            Err(RequestError::StormLimit)
        } else {
            Ok(self.reset.epoch)
        }
    }

    /// Quiescing: RESET to every client registered now, idle or not (the barrier).
    pub(super) fn enter_quiescing(&mut self, fail: Option<FailReason>) {
        let now = self.now;
        self.reset.reset_sent_at = Some(now);
        self.transition(Stage::Quiescing(Quiesce::new(fail)));
        let deadline = now + self.policy.quiesce_deadline();
        let event = Event::Reset {
            epoch: self.epoch,
            reason: self.reset.reason,
            planned: self.reset.planned,
            deadline,
        };
        let skip_idle = self.planted(Mutant::SkipIdleInBarrier);
        let members = self.deliver_each(Walk::NewestFirst, event, |e| {
            if skip_idle && e.last_ack_latency.is_none() {
                return false;
            }
            e.in_barrier = true;
            e.state = ClientState::Quiescing;
            // After the hardware reset every port starts Down: PORT_ACTIVE will say when.
            e.ports = 0;
            e.reset_sent_at = now;
            true
        });
        self.reset.barrier_size = members;
        if let Some(q) = self.quiesce_mut() {
            q.pending = members;
        }
        self.arm(TimerId::QuiesceDeadline, deadline);
        if members == 0 {
            self.close_quiesce(QuiesceEnd::Proceed);
        }
    }

    /// A barrier member executed or left.
    pub(super) fn barrier_member_done(&mut self) {
        let close_at = u16::from(self.planted(Mutant::EndBeforeLastExecute));
        let Some(q) = self.quiesce_mut() else {
            return;
        };
        debug_assert!(q.pending > 0);
        q.pending = q.pending.saturating_sub(1);
        if q.pending <= close_at {
            self.close_quiesce(QuiesceEnd::Proceed);
        }
    }

    pub(super) fn deadline_passed(&mut self) {
        let mut first_forced = None;
        // What the policy does with them, as the record says it (a fatal cause found by the
        // closing health read still makes the reset go ahead; its own records follow).
        let aborts = self.reset.planned && self.policy.abort_on_unresponsive;
        self.fan_out(
            Walk::OldestFirst,
            |e| {
                let late = e.in_barrier && e.state == ClientState::Quiescing;
                if late {
                    e.state = ClientState::Unresponsive;
                }
                late.then_some(e.desc.name)
            },
            |c, id, name| {
                log::warn!("client {id} '{name}' unresponsive at the quiesce deadline");
                first_forced.get_or_insert(id);
                c.counters.unresponsive_clients += 1;
                c.reset.force(id, name);
                c.record_named(RecordKind::Unresponsive { client: id, aborts }, &name);
            },
        );
        if let Some(q) = self.quiesce_mut() {
            q.pending = 0;
        }
        match first_forced {
            Some(by) if self.reset.planned && self.policy.abort_on_unresponsive => {
                self.close_quiesce(QuiesceEnd::Abort(by))
            }
            _ => self.close_quiesce(QuiesceEnd::Proceed),
        }
    }

    /// Ends the quiesce with one last health read: a fatal cause raised since the last poll
    /// (or at the same instant as the reset's own cause) joins this reset instead of being
    /// found after it, and an abort for an unresponsive client stops if one is found.
    fn close_quiesce(&mut self, end: QuiesceEnd) {
        self.cancel(TimerId::QuiesceDeadline);
        let outstanding = self.health_outstanding;
        let first = self.quiesce_mut().is_some_and(|q| {
            let first = q.end.replace(end).is_none();
            // Which read is stale is the first close's to say: a later one changes nothing.
            if first {
                q.read_before_end = outstanding;
            }
            first
        });
        // One read out at a time: with a poll's read out, the closing read follows its answer.
        if first && !outstanding {
            self.read_health();
        }
    }

    pub(super) fn quiesce_done(&mut self) {
        let fail = self.quiesce_mut().and_then(|q| q.fail);
        self.cancel(TimerId::HealthPoll);
        self.reset.quiesce_done_at = Some(self.now);
        if let Some(reason) = fail {
            self.fail(reason);
        } else {
            // A quiesce always comes from Operational: nothing was saved yet.
            self.enter_resetting(false);
        }
    }

    /// A Failed device restarts: straight to the hardware reset, no quiesce (nobody holds
    /// hardware), restoring to the config space the failed reset saved if it did.
    pub(super) fn restart(&mut self, reason: ResetReason) {
        let config_saved = matches!(self.stage, Stage::Failed { config_saved: true });
        // The administrator has looked: the storm and every client's request budget start
        // afresh.
        self.storm = super::Window::new();
        self.requests.fill(super::Window::new());
        self.counters.resets_started += 1;
        self.counters.by_reason[0] += 1;
        self.counters.admin_resets += 1;
        self.reset.begin(self.epoch, reason, self.now, true);
        self.reset.quiesce_done_at = Some(self.now);
        self.record(RecordKind::ResetStarted {
            epoch: self.epoch,
            reason,
            planned: false,
        });
        self.enter_resetting(config_saved);
    }

    /// The RESET_END every client gets when the device is back.
    fn reset_end_event(&self) -> Event {
        let outcome = match self.reset.result {
            Some(ResetResult::Restored(o)) => o,
            _ => ResetOutcome::Restored,
        };
        Event::ResetEnd {
            epoch: self.epoch,
            outcome,
        }
    }

    /// Restoring: RESET_END to every client, oldest first (the lower layers come back
    /// first); the reset is over once every one of them is delivered.
    pub(super) fn enter_restoring(&mut self, follow_up: Option<ResetReason>) {
        self.transition(Stage::Restoring(Restore {
            pending_end: 0,
            follow_up,
        }));
        let event = self.reset_end_event();
        let sent = self.deliver_each(Walk::OldestFirst, event, |e| {
            e.state = ClientState::Active;
            true
        });
        match self.restore_mut() {
            Some(r) if sent > 0 => r.pending_end = u32::from(sent),
            _ => self.finish_restore(),
        }
    }

    /// A client that registers while RESET_END goes out gets its own.
    pub(super) fn send_reset_end(&mut self, index: usize) {
        let event = self.reset_end_event();
        let Some(e) = self.slots[index].entry.as_mut() else {
            return;
        };
        e.state = ClientState::Active;
        let id = e.id;
        if let Some(r) = self.restore_mut() {
            r.pending_end += 1;
        }
        self.deliver(id, event);
    }

    pub(super) fn finish_restore(&mut self) {
        let follow_up = self.restore_mut().and_then(|r| r.follow_up.take());
        let outcome = match self.reset.result {
            Some(ResetResult::Restored(o)) => o,
            _ => ResetOutcome::Restored,
        };
        self.record(RecordKind::ResetFinished {
            epoch: self.epoch,
            outcome,
        });
        self.counters.resets_restored += 1;
        self.transition(Stage::Operational);
        for slot in self.slots.iter_mut() {
            if let Some(e) = slot.entry.as_mut() {
                e.in_barrier = false;
            }
        }
        self.conclude(ResetResult::Restored(outcome));
        self.health.rearm();
        self.arm(
            TimerId::HealthPoll,
            self.now + self.policy.health_poll_interval(),
        );
        if let Some(reason) = follow_up {
            self.counters.follow_ups += 1;
            // A storm refusal is recorded and acted on inside.
            let _ = self.start_reset(reason);
        }
    }

    pub(super) fn fail(&mut self, error: FailReason) {
        let config_saved = matches!(
            self.stage,
            Stage::Resetting(super::stage::HwReset {
                config_saved: true,
                ..
            })
        );
        self.cancel_all_timers();
        let epoch = self.reset.epoch;
        self.record(RecordKind::ResetFailed { epoch, error });
        self.counters.resets_failed += 1;
        self.transition(Stage::Failed { config_saved });
        let event = Event::ResetFailed { epoch, error };
        self.deliver_each(Walk::OldestFirst, event, |e| {
            e.state = ClientState::Failed;
            e.in_barrier = false;
            e.ports = 0;
            true
        });
        self.conclude(ResetResult::Failed(error));
        self.keep_bundle();
    }

    pub(super) fn abort(&mut self, by: ClientId, cause: AbortCause) {
        self.cancel(TimerId::QuiesceDeadline);
        // An abort after RESET went out (an unresponsive client) ends a quiesce that ran until
        // now: its time is reported, not hidden. A veto comes before RESET: no quiesce ran.
        if self.reset.reset_sent_at.is_some() {
            self.reset.quiesce_done_at = Some(self.now);
        }
        self.counters.resets_aborted += 1;
        self.transition(Stage::Operational);
        let event = Event::ResetAborted {
            epoch: self.reset.epoch,
            vetoed_by: by,
            cause,
        };
        self.deliver_each(Walk::OldestFirst, event, |e| {
            e.state = ClientState::Active;
            e.in_barrier = false;
            true
        });
        self.conclude(ResetResult::Aborted { by, cause });
        self.health.rearm();
        self.arm(
            TimerId::HealthPoll,
            self.now + self.policy.health_poll_interval(),
        );
    }

    pub(super) fn conclude(&mut self, result: ResetResult) {
        if let ResetResult::Restored(_) = result {
            self.health_report.restored();
        }
        self.reset.result = Some(result);
        self.reset.finished_at = Some(self.now);
        self.concluded.copy_from(&self.reset);
        self.history.push(&self.reset);
        self.push(Action::ResetConcluded {
            epoch: self.reset.epoch,
        });
        // Running again: PORT_ACTIVE for the ports already back (and PORT_DOWN after an
        // aborted reset for any that went down meanwhile).
        self.sync_ports();
    }
}
