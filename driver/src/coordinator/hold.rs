//! Resets held while a PnP stop is pending. Once the driver has told PnP the adapter may
//! stop (EvtDeviceQueryStop, for a resource rebalance), no reset may start before the stop
//! or its cancel: the stop releases the mapping of the registers and the config space a
//! reset saved in it, and a reset cut across it restores from nothing. Requests are refused
//! (STOP_PENDING: ask again); a fault found meanwhile (a catastrophic error, a stalled
//! counter, a command timeout) is recorded and waits: the release starts its reset, on the
//! adapter as the restart left it.

use super::Coordinator;
use crate::errors::RefusalCode;
use crate::recorder::RecordKind;
use crate::time::Instant;
use crate::types::{Call, ResetReason, State};

/// Whether resets are held, and the gravest fault that waits for the release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Hold {
    on: bool,
    deferred: Option<ResetReason>,
}

impl Coordinator {
    /// PnP may stop the adapter: no reset starts until [`Coordinator::release_resets`].
    /// Asked with none open (the driver refuses the query while one is).
    pub fn hold_resets(&mut self, now: Instant) {
        self.advance(now);
        self.record(RecordKind::Call {
            client: None,
            call: Call::HoldResets,
        });
        self.hold.on = true;
    }

    /// The stop is over, or was cancelled: resets may start again, and the gravest fault
    /// found meanwhile starts one now.
    pub fn release_resets(&mut self, now: Instant) {
        self.advance(now);
        if !self.hold.on {
            return;
        }
        self.record(RecordKind::Call {
            client: None,
            call: Call::ReleaseResets,
        });
        let deferred = core::mem::take(&mut self.hold).deferred;
        if let Some(reason) = deferred {
            log::warn!(
                "{} found while a PnP stop was pending: reset now",
                reason.as_str()
            );
            self.fault(reason);
        }
    }

    /// Whether resets are held (a PnP stop is pending).
    pub fn resets_held(&self) -> bool {
        self.hold.on
    }

    /// A reset would start now and may not: held, with none open to join.
    pub(super) fn held_now(&self) -> bool {
        self.hold.on && matches!(self.state(), State::Operational | State::Failed)
    }

    /// A fault while resets are held: kept for the release (the gravest), recorded once as a
    /// refusal of the input that found it. False when nothing holds it.
    pub(super) fn defer_fault(&mut self, reason: ResetReason) -> bool {
        if !self.held_now() {
            return false;
        }
        // Recorded once: each poll that finds the same error again is no news.
        if self.hold.deferred.is_some_and(|d| d >= reason) {
            return true;
        }
        let call = match reason {
            ResetReason::CommandTimeout => Call::CommandTimeout,
            _ => Call::Catastrophic,
        };
        log::warn!("{} while a PnP stop is pending: held", reason.as_str());
        self.record(RecordKind::Refused {
            client: None,
            call,
            code: RefusalCode::StopPending,
        });
        self.hold.deferred = Some(self.hold.deferred.map_or(reason, |d| d.max(reason)));
        true
    }
}
