//! What the coordinator asks of its host: events fanned out to clients, timers armed and
//! cancelled, hardware steps, PnP operations. Each goes into the reserved action queue
//! ([`Fifo`](crate::reserve::Fifo)) in the order the host must carry them out.

use super::stage::{Entry, Walk};
use super::{Action, Coordinator};
use crate::hca::HwStep;
use crate::recorder::RecordKind;
use crate::time::Instant;
use crate::types::*;

impl Coordinator {
    /// Visits the registered clients in `walk` order; for each client `visit` returns
    /// something, `then` runs with the coordinator.
    pub(super) fn fan_out<T>(
        &mut self,
        walk: Walk,
        mut visit: impl FnMut(&mut Entry) -> Option<T>,
        mut then: impl FnMut(&mut Self, ClientId, T),
    ) {
        // The walker holds no borrow: `then` may not change the order but holds `self`.
        let mut walker = self.order.walker(walk);
        while let Some(slot) = walker.next(&self.order) {
            let Some(e) = self.slots[usize::from(slot)].entry.as_mut() else {
                continue;
            };
            if let Some(out) = visit(e) {
                let id = e.id;
                then(self, id, out);
            }
        }
    }

    /// The common fan-out: `event` to every client `visit` picks. The hottest loop of a
    /// reset (one pass per client per event), so it records with the name of the entry in
    /// hand instead of looking the client up again, and builds the record and the action
    /// from the fields, in their slots (see [`crate::recorder::FlightRecorder::record_event`]).
    pub(super) fn deliver_each(
        &mut self,
        walk: Walk,
        event: Event,
        mut visit: impl FnMut(&mut Entry) -> bool,
    ) -> u16 {
        let (kind, epoch) = (event.kind(), event.epoch().unwrap_or(self.epoch));
        let mut count = 0;
        let mut walker = self.order.walker(walk);
        while let Some(slot) = walker.next(&self.order) {
            let Some(e) = self.slots[usize::from(slot)].entry.as_mut() else {
                continue;
            };
            if !visit(e) {
                continue;
            }
            count += 1;
            let client = e.id;
            self.recorder
                .record_event(self.now, &e.desc.name, client, kind, epoch);
            self.push(Action::Deliver { client, event });
        }
        count
    }

    #[inline(always)]
    pub(super) fn push(&mut self, action: Action) {
        if let Err(action) = self.actions.push(action) {
            self.overflowed(action);
        }
    }

    #[cold]
    pub(super) fn overflowed(&mut self, action: Action) {
        // Sized for the worst case in `new`; reaching this is a sizing bug, not input.
        self.counters.actions_overflowed += 1;
        debug_assert!(
            false,
            "action queue overflow: {} dropped",
            self.counters.actions_overflowed
        );
        log::error!("action queue full: {action:?} dropped");
    }

    pub(super) fn deliver(&mut self, client: ClientId, event: Event) {
        let epoch = event.epoch().unwrap_or(self.epoch);
        self.record(RecordKind::Event {
            client,
            event: event.kind(),
            epoch,
        });
        self.push(Action::Deliver { client, event });
    }

    pub(super) fn arm(&mut self, timer: TimerId, at: Instant) {
        let token = self.next_token;
        self.next_token = self.next_token.wrapping_add(1).max(1);
        self.timers[timer as usize] = Some(token);
        self.push(Action::ArmTimer { timer, at, token });
    }

    pub(super) fn cancel(&mut self, timer: TimerId) {
        if self.timers[timer as usize].take().is_some() {
            self.push(Action::CancelTimer { timer });
        }
    }

    pub(super) fn cancel_all_timers(&mut self) {
        for t in TimerId::ALL {
            self.cancel(t);
        }
    }

    pub(super) fn hw_step(&mut self, step: HwStep) {
        self.counters.hw_steps += 1;
        self.push(Action::Hw(step));
    }

    pub(super) fn pnp(&mut self, op: PnpOp) {
        self.counters.pnp_operations += 1;
        if self.reset.is_open() {
            self.reset.pnp_operations += 1;
        }
        self.record(RecordKind::Pnp { op });
        self.push(Action::Pnp(op));
    }
}
