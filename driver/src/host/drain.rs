//! What the bus does with the coordinator's actions.
//!
//! * the DPC ([`Bus::dpc`], DISPATCH_LEVEL) drains the actions: it delivers each event with
//!   the lock released, arms and stops timers, hands hardware steps to the work item and PnP
//!   operations to the platform;
//! * the work item ([`Bus::work_item`], PASSIVE_LEVEL) runs hardware steps, which touch config
//!   space (not allowed at DISPATCH_LEVEL), under the hardware's wait lock, and writes the
//!   event log entries the drain left it.
//!
//! Each runs on one thread at a time: a second caller returns at once, and the first finds
//! what the second would have done before it stops (both decide under the lock).

use crate::coordinator::bundle::CONFIG_BYTES;
use crate::coordinator::Action;
use crate::hca::{execute, saved_config_after, HwStep};
use crate::host::bus::{Core, Running};
use crate::host::{Bus, EventLogEntry, Lock, Platform, ResetSpan, Scheduled};
use crate::recorder::RecordKind;
use crate::types::*;

/// An action that must run with the lock released.
enum Outside<C> {
    Deliver {
        client: ClientId,
        event: Event,
        callback: Option<C>,
    },
    Pnp(PnpOp),
}

impl<P: Platform> Bus<P> {
    /// The delivery DPC (DISPATCH_LEVEL): drains the coordinator's actions.
    pub fn dpc(&self) {
        let started = self
            .core
            .with(|c| !core::mem::replace(&mut c.draining, true));
        if !started {
            return;
        }
        let mut work = false;
        while let Some(outside) = self
            .core
            .with(|c| next_outside(c, &self.platform, &mut work))
        {
            match outside {
                Outside::Deliver {
                    client,
                    event,
                    callback,
                } => {
                    if let Some(cb) = callback {
                        // Lock released: the callback may call any bus function.
                        P::deliver(self, &cb, client, event);
                    }
                    let now = self.platform.now();
                    self.core.with(|c| {
                        c.running = None;
                        c.coord.event_delivered(now, client, event.kind());
                    });
                    self.platform.delivery_ended();
                }
                Outside::Pnp(op) => self.platform.pnp(op),
            }
        }
        if work && self.platform.queue_work_item() == Scheduled::RunHere {
            self.work_item();
        }
        self.platform.settled();
    }

    /// The work item (PASSIVE_LEVEL): hardware steps in order, each completion fed back; then
    /// the event log.
    pub fn work_item(&self) {
        let started = self
            .core
            .with(|c| !core::mem::replace(&mut c.stepping, true));
        if !started {
            return;
        }
        loop {
            let next = self.core.with(|c| {
                // In Dx the steps wait, in order, for D0Entry (power.rs).
                // A step stays queued until it has run: only this runner takes steps out,
                // and one the device was powered down for is left where it is.
                match (c.powered, c.hw_queue.is_empty()) {
                    (true, false) => c.hw_queue.front().map(Ok),
                    _ => c.log_queue.pop().map(Err).or_else(|| {
                        c.stepping = false;
                        None
                    }),
                }
            });
            match next {
                Some(Ok(step)) => {
                    // Looked at again under the wait lock, which D0Exit takes after it lowers
                    // `powered`: a step taken just before runs before D0Exit returns, or not.
                    // The config space a save kept, carried out of the device's lock into
                    // the coordinator's (the bundle holds it).
                    let mut config = [0u8; CONFIG_BYTES];
                    let done = self.hca.with(|hca| {
                        let powered = self.core.with(|c| c.powered);
                        powered.then(|| {
                            let done = execute(hca, step);
                            (done, saved_config_after(hca, &done, &mut config))
                        })
                    });
                    let now = self.platform.now();
                    self.core.with(|c| {
                        if let Some((done, saved)) = done {
                            let _ran = c.hw_queue.pop();
                            // A save that failed keeps none: no older one stands in for it.
                            if done.step == HwStep::SaveConfig {
                                c.coord.config_saved(&config[..saved]);
                            }
                            c.coord.hw_complete(now, done);
                        }
                    });
                    self.kick();
                }
                Some(Err(entry)) => self.platform.log_event(entry),
                None => break,
            }
        }
        self.platform.settled();
    }
}

/// Pops actions under the lock, doing there what needs no release (timers, the hardware
/// queue), up to the next that must run outside it. At the end, the drain is over: the
/// event log's scan runs and `draining` is cleared in the same critical section, so a caller
/// that found the drain running knows its actions will be seen.
fn next_outside<P: Platform>(
    c: &mut Core<P::Callback>,
    platform: &P,
    work: &mut bool,
) -> Option<Outside<P::Callback>> {
    loop {
        let Some(action) = c.coord.pop_action() else {
            c.draining = false;
            *work |= scan_records(c, platform);
            return None;
        };
        match action {
            Action::Deliver { client, event } => {
                // A client that unregistered after this event was queued has no callback any
                // more: the event is dropped, still reported delivered.
                let callback = match &c.callbacks[usize::from(client.index)] {
                    Some((id, cb)) if *id == client => Some(cb.clone()),
                    _ => None,
                };
                // Marked under the lock the copy is made under: an Unregister after this
                // sees the callback as running and waits for it (the rundown).
                if callback.is_some() {
                    c.running = Some(Running {
                        client,
                        context: platform.context(),
                    });
                }
                return Some(Outside::Deliver {
                    client,
                    event,
                    callback,
                });
            }
            Action::ArmTimer { timer, at, .. } => {
                c.timers.apply(&action);
                // In Dx the due time is kept and armed at D0Entry (power.rs).
                if c.powered {
                    platform.arm_timer(timer, at);
                }
            }
            Action::CancelTimer { timer } => {
                c.timers.apply(&action);
                platform.cancel_timer(timer);
            }
            Action::Hw(step) => {
                if c.hw_queue.push(step).is_err() {
                    c.overflows += 1;
                    log::error!("hardware queue full: {} dropped", step.as_str());
                }
                *work = true;
            }
            Action::Pnp(op) => return Some(Outside::Pnp(op)),
            Action::ResetConcluded { .. } => {}
        }
    }
}

/// Hands each record since the last scan to the platform's tracing, and finds what the event
/// log must hear among them; `true` when an entry was queued.
fn scan_records<P: Platform>(c: &mut Core<P::Callback>, platform: &P) -> bool {
    let Core {
        coord,
        log_queue,
        log_seq,
        traced_reset,
        overflows,
        ..
    } = c;
    let mut queued = false;
    for r in coord.recorder().since(*log_seq) {
        if r.seq > *log_seq {
            // The ring went round between two drains: neither the trace nor the event log
            // saw these.
            log::warn!(
                "records {} to {} overwritten before they were traced",
                *log_seq,
                r.seq - 1
            );
        }
        *log_seq = r.seq + 1;
        platform.trace(r, ResetSpan::follow(traced_reset, r));
        let entry = match r.kind {
            RecordKind::ResetStarted { epoch, reason, .. } => EventLogEntry::ResetStarted {
                epoch: epoch.0,
                reason: reason as u8,
            },
            RecordKind::ResetFinished { epoch, .. } => {
                EventLogEntry::ResetRestored { epoch: epoch.0 }
            }
            RecordKind::ResetFailed {
                epoch,
                error: FailReason::DeviceReplaced,
            } => EventLogEntry::DeviceReplaced { epoch: epoch.0 },
            RecordKind::ResetFailed { epoch, error } => EventLogEntry::ResetFailed {
                epoch: epoch.0,
                error: error as u8,
            },
            _ => continue,
        };
        if log_queue.push(entry).is_ok() {
            queued = true;
        } else {
            *overflows += 1;
            log::error!("event log queue full: {entry:?} dropped");
        }
    }
    queued
}
