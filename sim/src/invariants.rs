//! The event guarantees of docs/design.md §4, checked on every delivery by every host.

use std::fmt;
use std::string::{String, ToString};
use std::vec::Vec;

use hcabus::coordinator::*;
use hcabus::hca::HwStep;
use hcabus::types::*;

/// Checks the event guarantees of docs/design.md §4 on every delivery, without allocating.
#[derive(Debug, Clone)]
pub struct InvariantChecker {
    /// Per slot: the client id it tracks, whether a RESET awaits its terminal event, and the
    /// registration sequence (to check fan-out order).
    slots: Vec<SlotWatch>,
    reg_seq: u64,
    last_fanout: Option<(EventKind, Epoch, u64)>,
    /// Registrations + unregistrations last seen, to sync only on change.
    membership_seen: u64,
    pub checked: u64,
    pub violations: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
struct SlotWatch {
    id: Option<ClientId>,
    awaiting_terminal: bool,
    /// Got RESET_QUERY: RESET or RESET_ABORTED must follow.
    queried: bool,
    late: bool,
    zombie: bool,
    reg_seq: u64,
}

/// At most this many violation messages are kept (the count keeps going).
const MAX_VIOLATION_TEXTS: usize = 32;

impl InvariantChecker {
    pub fn new(max_clients: usize) -> Self {
        InvariantChecker {
            slots: std::vec![SlotWatch::default(); max_clients],
            reg_seq: 0,
            last_fanout: None,
            membership_seen: 0,
            checked: 0,
            violations: Vec::with_capacity(MAX_VIOLATION_TEXTS),
        }
    }

    /// Feeds what the checker still expects of each client to `h` (not its counts): the part
    /// of its state a model checker must tell apart.
    pub fn fingerprint(&self, h: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        for s in &self.slots {
            (s.id, s.awaiting_terminal, s.queried, s.late, s.zombie).hash(h);
        }
        self.last_fanout.map(|(k, e, _)| (k, e)).hash(h);
        self.violations.len().hash(h);
    }

    /// Records a violation found by the host itself (the verifier, say).
    pub fn violate(&mut self, what: fmt::Arguments<'_>) {
        // Formatting allocates; a violating run is a failing run, so the cost is moot.
        if self.violations.len() < MAX_VIOLATION_TEXTS {
            self.violations.push(what.to_string());
        }
    }

    /// Catches up with registrations and unregistrations made on `coord` since the last
    /// call. Cheap when nothing changed, so hosts call it after every callback.
    pub fn sync(&mut self, coord: &Coordinator) {
        // Only when membership changed: scanning after every callback would make a reset
        // quadratic in the number of clients.
        let membership = Self::membership(coord);
        if membership == self.membership_seen {
            return;
        }
        self.membership_seen = membership;
        for c in coord.clients() {
            let w = self.slots[usize::from(c.id.index)];
            if w.id != Some(c.id) {
                // Outside the barrier of a reset under way means late, whatever the state
                // (a registrant during restore is already Active: its RESET_END is queued).
                // While Preparing nothing is torn down yet: a newcomer is running, and joins
                // the barrier if the reset goes ahead.
                let late =
                    coord.reset_in_progress() && !c.in_barrier && coord.state() != State::Preparing;
                self.on_register(c.id, late, c.state == ClientState::Failed);
            }
        }
        for i in 0..self.slots.len() {
            if let Some(id) = self.slots[i].id {
                if coord.client(id).is_err() {
                    self.on_unregister(id);
                }
            }
        }
    }

    /// `id` has just registered on `coord` (the host saw the call succeed): checked at once,
    /// without the rescan of [`InvariantChecker::sync`], which would make a reset where every
    /// client registers again quadratic. Only when this call is the one change since the
    /// last look; otherwise the next `sync` rescans.
    pub fn registered(&mut self, coord: &Coordinator, id: ClientId) {
        if Self::membership(coord) != self.membership_seen + 1 {
            return;
        }
        self.membership_seen += 1;
        if let Ok(c) = coord.client(id) {
            let late =
                coord.reset_in_progress() && !c.in_barrier && coord.state() != State::Preparing;
            self.on_register(id, late, c.state == ClientState::Failed);
        }
    }

    /// `id` has just unregistered from `coord`; as [`InvariantChecker::registered`].
    pub fn unregistered(&mut self, coord: &Coordinator, id: ClientId) {
        if Self::membership(coord) != self.membership_seen + 1 {
            return;
        }
        self.membership_seen += 1;
        self.on_unregister(id);
    }

    fn membership(coord: &Coordinator) -> u64 {
        let c = coord.counters();
        c.registrations + c.unregistrations
    }

    /// A client registered; `late` when it registered during a reset.
    fn on_register(&mut self, id: ClientId, late: bool, zombie: bool) {
        self.reg_seq += 1;
        if let Some(w) = self.slots.get_mut(usize::from(id.index)) {
            *w = SlotWatch {
                id: Some(id),
                awaiting_terminal: false,
                queried: false,
                late,
                zombie,
                reg_seq: self.reg_seq,
            };
        }
    }

    pub fn on_deliver(&mut self, client: ClientId, event: Event) {
        self.checked += 1;
        let kind = event.kind();
        let Some(w) = self.slots.get(usize::from(client.index)).copied() else {
            return self.violate(format_args!("{kind} to {client}: no such slot"));
        };
        if w.id != Some(client) {
            return self.violate(format_args!(
                "{kind} to {client}: not the registered client"
            ));
        }
        if kind.is_port() {
            // Fabric news goes only to a client that is running: never between its RESET and
            // that reset's outcome (after RESET every port counts as down until PORT_ACTIVE
            // follows RESET_END), never to a zombie, never to a late registrant before its end.
            // A client asked about a planned reset (RESET_QUERY) still runs: it may hear it.
            if w.awaiting_terminal || w.late || w.zombie {
                self.violate(format_args!("{client} got {kind} in the middle of a reset"));
            }
            return;
        }
        let epoch = event.epoch().unwrap_or(Epoch(0));
        // RESET in reverse registration order, RESET_END in registration order.
        match (self.last_fanout, kind) {
            (Some((EventKind::Reset, e, seq)), EventKind::Reset)
                if e == epoch && w.reg_seq > seq =>
            {
                self.violate(format_args!(
                    "RESET of {epoch} not in reverse registration order"
                ))
            }
            (Some((EventKind::ResetEnd, e, seq)), EventKind::ResetEnd)
                if e == epoch && w.reg_seq < seq =>
            {
                self.violate(format_args!(
                    "RESET_END of {epoch} not in registration order"
                ))
            }
            _ => {}
        }
        self.last_fanout = Some((kind, epoch, w.reg_seq));
        let mut next = w;
        match kind {
            EventKind::ResetQuery => {
                if w.queried || w.awaiting_terminal {
                    self.violate(format_args!(
                        "{client} got RESET_QUERY while a reset was already under way for it"
                    ));
                }
                next.queried = true;
            }
            EventKind::Reset => {
                if w.awaiting_terminal {
                    self.violate(format_args!(
                        "{client} got a second RESET before the outcome"
                    ));
                }
                next.awaiting_terminal = true;
                next.queried = false;
                next.late = false;
            }
            EventKind::ResetAborted if w.queried && !w.awaiting_terminal => {
                // A veto: the queried clients hear RESET_ABORTED, and nothing else.
                next.queried = false;
            }
            EventKind::ResetEnd | EventKind::ResetFailed | EventKind::ResetAborted => {
                // Without a RESET first, an outcome is only right for a late registrant or
                // for a zombie of a failed device (an administrator restart has no RESET).
                if !w.awaiting_terminal && !w.late && !w.zombie {
                    self.violate(format_args!("{client} got {kind} without RESET"));
                }
                if w.queried {
                    self.violate(format_args!("{client} got {kind} with its query open"));
                }
                next.awaiting_terminal = false;
                next.late = false;
                next.zombie = kind == EventKind::ResetFailed;
            }
            EventKind::DeviceFatal => {
                next.awaiting_terminal = false;
                next.queried = false;
            }
            EventKind::PortActive | EventKind::PortDown => {}
        }
        self.slots[usize::from(client.index)] = next;
    }

    fn on_unregister(&mut self, id: ClientId) {
        if let Some(w) = self.slots.get_mut(usize::from(id.index)) {
            if w.id == Some(id) {
                *w = SlotWatch::default();
            }
        }
    }

    /// Called as the host executes a hardware step: the device is reset only when no barrier
    /// member is still quiescing. Each has executed, left, or been declared unresponsive at
    /// its deadline; pulling the device from under a client that may still be using it is
    /// exactly what the barrier is for (docs/design.md §4, RESET: "release every hardware resource,
    /// then reset_execute").
    pub fn on_hw_step(&mut self, coord: &Coordinator, step: HwStep) {
        if !matches!(step, HwStep::AssertReset | HwStep::FunctionLevelReset) {
            return;
        }
        self.checked += 1;
        for c in coord.clients() {
            if c.in_barrier && c.state == ClientState::Quiescing {
                self.violate(format_args!(
                    "{step} while {} '{}' has neither executed nor reached its deadline",
                    c.id, c.desc.name
                ));
            }
        }
    }

    /// At the end of a reset every barrier member must have had its outcome, every queried
    /// client its RESET or RESET_ABORTED, and a vetoed reset must have sent no RESET.
    pub fn on_reset_concluded(&mut self, coord: &Coordinator) {
        self.checked += 1;
        for c in coord.clients() {
            let w = self.slots[usize::from(c.id.index)];
            if w.id == Some(c.id) && w.awaiting_terminal {
                self.violate(format_args!(
                    "{} '{}' got RESET but no outcome",
                    c.id, c.desc.name
                ));
            }
            if w.id == Some(c.id) && w.queried {
                self.violate(format_args!(
                    "{} '{}' got RESET_QUERY but neither RESET nor RESET_ABORTED",
                    c.id, c.desc.name
                ));
            }
        }
        if let Some(r) = coord.concluded_reset() {
            let vetoed = matches!(
                r.result,
                Some(ResetResult::Aborted {
                    cause: AbortCause::Veto,
                    ..
                })
            );
            if vetoed && r.barrier_size > 0 {
                self.violate(format_args!(
                    "the vetoed reset of {} sent RESET to {} clients",
                    r.epoch, r.barrier_size
                ));
            }
        }
    }
}
