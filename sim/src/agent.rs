//! The client side of the virtual-time host: the [`Agent`] trait every simulated client
//! implements, and the scripted client of the scenario files.

use std::fmt;
use std::vec::Vec;

use rand::Rng;

use crate::ctx::SimCtx;
use hcabus::bus::{BusHandle, Client, ClientReport};
use hcabus::time::{Duration, Instant};
use hcabus::types::*;

/// A client living in the simulation: a [`Client`] on the virtual-time host's [`SimCtx`] that
/// can also report on itself. Every client generic over [`BusHandle`] is one.
///
/// Reports ask a client what it did through traits ([`ClientReport`], and a layer's own
/// trait over this one); `as_any` is for a test that plays the part of its own client's
/// user ([`crate::SimHost::with_agent`]) and must reach the type it built.
pub trait Agent: ClientReport + for<'a> Client<SimCtx<'a>> + fmt::Debug {
    fn as_any(&self) -> &dyn core::any::Any;
    fn as_any_mut(&mut self) -> &mut dyn core::any::Any;
}

impl<T> Agent for T
where
    T: ClientReport + for<'a> Client<SimCtx<'a>> + core::any::Any + fmt::Debug,
{
    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn core::any::Any {
        self
    }
}

/// How a scripted client behaves (the `[[clients]]` keys of docs/design.md §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Behavior {
    /// Execute this long after RESET (zero: from inside the callback).
    pub ack_delay: Duration,
    pub never_ack: bool,
    pub veto_planned: bool,
    pub unregister_on_reset: bool,
    pub reregister_on_reset: bool,
    pub request_reset_at: Option<Instant>,
    pub request_every: Option<Duration>,
    /// Asks for another reset from inside its first RESET_END callback (during Restoring).
    pub request_on_reset_end: bool,
}

/// Events a scripted client keeps; reserved at creation so receiving never allocates.
pub const AGENT_EVENT_CAPACITY: usize = 512;

/// A client driven by a [`Behavior`].
#[derive(Debug, Clone)]
pub struct ScriptedAgent {
    desc: ClientDesc,
    behavior: Behavior,
    id: Option<ClientId>,
    pending_ack: Option<(Instant, Epoch)>,
    next_request: Option<Instant>,
    events: Vec<EventKind>,
    requested_on_end: bool,
    pub refusals: u32,
}

impl ScriptedAgent {
    pub fn new(desc: ClientDesc, behavior: Behavior) -> Self {
        let next_request = match (behavior.request_reset_at, behavior.request_every) {
            (Some(at), _) => Some(at),
            (None, Some(every)) => Some(Instant::ZERO + every),
            (None, None) => None,
        };
        ScriptedAgent {
            desc,
            behavior,
            id: None,
            pending_ack: None,
            next_request,
            events: hcabus::reserve::touched_vec(AGENT_EVENT_CAPACITY, EventKind::Reset),
            requested_on_end: false,
            refusals: 0,
        }
    }

    pub fn desc(&self) -> &ClientDesc {
        &self.desc
    }

    /// RESET_QUERY: a vetoer vetoes, a client that never answers stays silent (silence is
    /// consent at the deadline), everyone else consents at once.
    fn answer_query<B: BusHandle + ?Sized>(&mut self, bus: &mut B, epoch: Epoch) {
        let Some(id) = self.id else {
            return;
        };
        let answered = if self.behavior.veto_planned {
            let reason = VetoReason::cut("scenario: veto_planned");
            bus.reset_veto(id, epoch, reason).is_ok()
        } else if self.behavior.never_ack {
            return;
        } else {
            bus.reset_consent(id, epoch).is_ok()
        };
        if !answered {
            self.refusals += 1;
        }
    }

    fn execute<B: BusHandle + ?Sized>(&mut self, bus: &mut B, epoch: Epoch) {
        if let Some(id) = self.id {
            if bus.reset_execute(id, epoch).is_err() {
                self.refusals += 1;
            }
        }
    }
}

impl<B: BusHandle + ?Sized> Client<B> for ScriptedAgent {
    fn start(&mut self, bus: &mut B) {
        // A period counts from the client's start: a host that powers on late asks no
        // sooner than a period in.
        if let (None, Some(every)) = (self.behavior.request_reset_at, self.behavior.request_every) {
            self.next_request = Some(bus.now() + every);
        }
        match bus.register(self.desc) {
            Ok(r) => self.id = Some(r.id),
            Err(_) => self.refusals += 1,
        }
    }

    fn on_event(&mut self, bus: &mut B, _id: ClientId, event: Event) {
        // Within the reserved capacity only: receiving must never allocate.
        if self.events.len() < self.events.capacity() {
            self.events.push(event.kind());
        }
        let wants = self.behavior.request_on_reset_end && !self.requested_on_end;
        if let (Event::ResetEnd { .. }, true, Some(id)) = (event, wants, self.id) {
            self.requested_on_end = true;
            if bus.reset_request(id).is_err() {
                self.refusals += 1;
            }
        }
        if let Event::ResetQuery { epoch, .. } = event {
            return self.answer_query(bus, epoch);
        }
        let Event::Reset { epoch, .. } = event else {
            return;
        };
        let b = self.behavior;
        if b.never_ack {
            return;
        }
        if b.unregister_on_reset || b.reregister_on_reset {
            if let Some(id) = self.id.take() {
                if bus.unregister(id).is_err() {
                    self.refusals += 1;
                }
            }
            if b.reregister_on_reset {
                match bus.register(self.desc) {
                    Ok(r) => self.id = Some(r.id),
                    Err(_) => self.refusals += 1,
                }
            }
            return;
        }
        if b.ack_delay == Duration::ZERO {
            self.execute(bus, epoch);
        } else {
            // Up to half again as long: real quiesce work varies, and the seed decides how.
            let jitter_us = bus.rng().gen_range(0..=b.ack_delay.as_us() / 2);
            self.pending_ack = Some((
                bus.now() + b.ack_delay + Duration::from_us(jitter_us),
                epoch,
            ));
        }
    }

    fn wake_is_own(&self) -> bool {
        // Its pending execute and its request schedule, both set only from its callbacks.
        true
    }

    fn next_wake(&self) -> Option<Instant> {
        match (self.pending_ack.map(|(t, _)| t), self.next_request) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn wake(&mut self, bus: &mut B) {
        let now = bus.now();
        if let Some((at, epoch)) = self.pending_ack {
            if at <= now {
                self.pending_ack = None;
                self.execute(bus, epoch);
            }
        }
        if let Some(at) = self.next_request {
            if at <= now {
                self.next_request = self.behavior.request_every.map(|every| now + every);
                if let Some(id) = self.id {
                    if bus.reset_request(id).is_err() {
                        self.refusals += 1;
                    }
                }
            }
        }
    }
}

impl ClientReport for ScriptedAgent {
    fn name(&self) -> &str {
        self.desc.name.as_str()
    }

    fn events(&self) -> &[EventKind] {
        &self.events
    }

    fn id(&self) -> Option<ClientId> {
        self.id
    }

    fn kind(&self) -> ClientKind {
        self.desc.kind
    }
}
