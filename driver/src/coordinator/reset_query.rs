//! Preparing (docs/design.md §5): a planned reset first asks the CAN_VETO clients with RESET_QUERY.
//! Each consents, vetoes or stays silent until the query deadline (silence is consent).
//! A veto stops the reset before anything is torn down: RESET_ABORTED goes to the queried
//! clients only, nobody else hears of it, and the epoch stays.

use super::stage::{Prepare, Stage, Walk};
use super::Mutant;
use super::{Coordinator, ResetResult};
use crate::errors::{ConsentError, VetoError};
use crate::recorder::RecordKind;
use crate::time::Instant;
use crate::types::*;

impl Coordinator {
    /// Answers RESET_QUERY: the planned reset may go ahead. Idempotent.
    pub fn reset_consent(
        &mut self,
        now: Instant,
        id: ClientId,
        epoch: Epoch,
    ) -> Result<(), ConsentError> {
        self.advance(now);
        let index = self
            .check_consent(id, epoch)
            .map_err(|e| self.refused(Some(id), Call::ResetConsent, e, ConsentError::code))?;
        self.record(RecordKind::Call {
            client: Some(id),
            call: Call::ResetConsent,
        });
        if let Some(e) = self.slots[index].entry.as_mut() {
            if e.state == ClientState::Queried {
                e.state = ClientState::Active;
                self.query_answered();
            }
        }
        Ok(())
    }

    fn check_consent(&self, id: ClientId, epoch: Epoch) -> Result<usize, ConsentError> {
        let index = self.lookup(id)?;
        match self.state() {
            State::Removed => return Err(ConsentError::DeviceRemoved),
            State::Preparing => {}
            _ => return Err(ConsentError::NoQueryPending),
        }
        if epoch != self.reset.epoch {
            return Err(ConsentError::StaleEpoch);
        }
        if !self.entry(index).is_some_and(|e| e.queried) {
            return Err(ConsentError::NotQueried);
        }
        Ok(index)
    }

    /// Answers RESET_QUERY: refuses the planned reset (clients with CAN_VETO only), before
    /// anything is torn down. The reason is kept in the reset record and the flight
    /// recorder for the administrator.
    pub fn reset_veto(
        &mut self,
        now: Instant,
        id: ClientId,
        epoch: Epoch,
        reason: VetoReason,
    ) -> Result<(), VetoError> {
        self.advance(now);
        if let Err(e) = self.check_veto(id, epoch) {
            return Err(self.refused(Some(id), Call::ResetVeto, e, VetoError::code));
        }
        self.record(RecordKind::Call {
            client: Some(id),
            call: Call::ResetVeto,
        });
        log::info!("client {id} vetoed the planned reset of {epoch}: {reason}");
        self.record(RecordKind::Vetoed { client: id, reason });
        self.reset.veto_reason = Some(reason);
        self.reset.vetoer_name = self.name_of(id);
        self.vetoed(id);
        Ok(())
    }

    fn check_veto(&self, id: ClientId, epoch: Epoch) -> Result<(), VetoError> {
        let index = self.lookup(id)?;
        match self.state() {
            State::Removed => return Err(VetoError::DeviceRemoved),
            State::Preparing => {}
            State::Quiescing if self.planted(Mutant::VetoAfterReset) => {}
            // Past its query, or a forced reset that never had one.
            State::Quiescing | State::Resetting | State::Restoring => {
                return Err(VetoError::NoQueryPending)
            }
            State::Operational | State::Failed => return Err(VetoError::NoResetPending),
        }
        if epoch != self.reset.epoch {
            return Err(VetoError::StaleEpoch);
        }
        let entry = self.entry(index).ok_or(VetoError::UnknownClient)?;
        if !entry.desc.flags.contains(ClientFlags::CAN_VETO) {
            return Err(VetoError::NotAllowed);
        }
        if !entry.queried && !self.planted(Mutant::VetoAfterReset) {
            return Err(VetoError::NotQueried);
        }
        Ok(())
    }

    /// Starts the query of a planned reset whose record is begun; with no CAN_VETO client
    /// there is nobody to ask and the reset goes straight to its quiesce.
    pub(super) fn enter_preparing(&mut self) {
        let askable = self
            .clients()
            .filter(|c| c.desc.flags.contains(ClientFlags::CAN_VETO))
            .count();
        if askable == 0 {
            self.enter_quiescing(None);
            return;
        }
        self.transition(Stage::Preparing(Prepare { pending: 0 }));
        let deadline = self.now + self.policy.query_deadline();
        let query = Event::ResetQuery {
            epoch: self.reset.epoch,
            reason: self.reset.reason,
            deadline,
        };
        let asked = self.deliver_each(Walk::NewestFirst, query, |e| {
            if !e.desc.flags.contains(ClientFlags::CAN_VETO) {
                return false;
            }
            e.queried = true;
            e.state = ClientState::Queried;
            true
        });
        if let Stage::Preparing(p) = &mut self.stage {
            p.pending = asked;
        }
        self.arm(TimerId::QueryDeadline, deadline);
    }

    /// A queried client consented or left.
    pub(super) fn query_answered(&mut self) {
        let Stage::Preparing(p) = &mut self.stage else {
            return;
        };
        debug_assert!(p.pending > 0);
        p.pending = p.pending.saturating_sub(1);
        if p.pending == 0 {
            self.end_query(None);
        }
    }

    /// The query is over without a veto (every answer was consent, the deadline passed, or a
    /// fatal cause joined): RESET to the whole barrier. `fail` is what a fatal cause with
    /// `auto_recover` off leaves the device as once quiesced.
    pub(super) fn end_query(&mut self, fail: Option<FailReason>) {
        self.cancel(TimerId::QueryDeadline);
        // Silence was consent: the query is over for everyone it asked.
        self.fan_out(
            Walk::OldestFirst,
            |e| {
                if e.state == ClientState::Queried {
                    log::debug!("client {} '{}' silent: consent", e.id, e.desc.name);
                    e.state = ClientState::Active;
                }
                e.queried = false;
                None::<()>
            },
            |_, _, ()| {},
        );
        self.enter_quiescing(fail);
    }

    /// A queried client refused: RESET_ABORTED to the queried clients only.
    fn vetoed(&mut self, by: ClientId) {
        self.cancel(TimerId::QueryDeadline);
        self.counters.resets_aborted += 1;
        self.transition(Stage::Operational);
        let event = Event::ResetAborted {
            epoch: self.reset.epoch,
            vetoed_by: by,
            cause: AbortCause::Veto,
        };
        self.deliver_each(Walk::OldestFirst, event, |e| {
            let queried = core::mem::take(&mut e.queried);
            if queried {
                e.state = ClientState::Active;
            }
            queried
        });
        self.conclude(ResetResult::Aborted {
            by,
            cause: AbortCause::Veto,
        });
    }
}
