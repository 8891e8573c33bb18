//! IBAL as a client of the bus: registered first, so it gets RESET last (after every
//! consumer has had its chance to release) and RESET_END first (so that preserved memory
//! regions are back before any consumer restarts).

use std::cell::RefCell;
use std::rc::Rc;

use hcabus::sim::{Agent, Bus};
use hcabus::types::*;

use crate::access::Ibal;

/// The access layer, shared by its bus client and its consumers. The simulator runs one
/// callback at a time, so a `RefCell` borrow never meets another.
pub type SharedIbal = Rc<RefCell<Ibal>>;

/// Most events a client keeps for the report; reserved at creation.
pub(crate) const EVENT_LOG: usize = 256;

/// Keeps received event kinds without allocating.
#[derive(Debug, Clone)]
pub(crate) struct EventLog(Vec<EventKind>);

impl EventLog {
    pub(crate) fn new() -> Self {
        EventLog(Vec::with_capacity(EVENT_LOG))
    }
    pub(crate) fn push(&mut self, e: EventKind) {
        if self.0.len() < self.0.capacity() {
            self.0.push(e);
        }
    }
    pub(crate) fn as_slice(&self) -> &[EventKind] {
        &self.0
    }
}

/// The bus client of the access layer.
#[derive(Debug)]
pub struct IbalClient {
    ibal: SharedIbal,
    desc: ClientDesc,
    id: Option<ClientId>,
    events: EventLog,
    /// An aborted reset left hardware objects behind: destroy them as deferred work.
    cleanup: bool,
    pub refusals: u32,
}

impl IbalClient {
    pub fn new(ibal: SharedIbal) -> Self {
        IbalClient {
            ibal,
            desc: ClientDesc::new("ibal", ClientKind::Ibal, ClientFlags::BOOT_CRITICAL)
                .unwrap_or_else(|| unreachable!("a 4-byte name fits")),
            id: None,
            events: EventLog::new(),
            cleanup: false,
            refusals: 0,
        }
    }
}

impl IbalClient {
    /// The access layer itself, for consumers that are not agents (tests, tools).
    pub fn shared(&self) -> &SharedIbal {
        &self.ibal
    }
}

impl Agent for IbalClient {
    fn name(&self) -> &str {
        self.desc.name.as_str()
    }

    fn start(&mut self, bus: &mut Bus<'_>) {
        match bus.register(self.desc) {
            Ok(r) => {
                self.id = Some(r.id);
                self.ibal.borrow_mut().attach(r.epoch, r.state);
            }
            Err(e) => {
                log::error!("ibal: cannot register: {e}");
                self.refusals += 1;
            }
        }
    }

    fn on_event(&mut self, bus: &mut Bus<'_>, id: ClientId, event: Event) {
        self.events.push(event.kind());
        let mut ibal = self.ibal.borrow_mut();
        match event {
            Event::Reset { epoch, .. } => {
                ibal.release_all(bus);
                drop(ibal);
                if bus.reset_execute(id, epoch).is_err() {
                    self.refusals += 1;
                }
            }
            Event::ResetEnd { epoch, .. } => ibal.restore(bus, epoch),
            Event::ResetAborted { .. } => {
                ibal.resume();
                self.cleanup = ibal.has_orphans();
            }
            Event::ResetFailed { .. } => ibal.fail(bus, false),
            Event::DeviceFatal { .. } => ibal.fail(bus, true),
        }
    }

    fn next_wake(&self) -> Option<hcabus::Instant> {
        // Deferred work runs at once, but outside the callback (at PASSIVE_LEVEL).
        self.cleanup.then_some(hcabus::Instant::ZERO)
    }

    fn wake(&mut self, bus: &mut Bus<'_>) {
        if self.cleanup {
            self.cleanup = false;
            self.ibal.borrow_mut().destroy_orphans(bus);
        }
    }

    fn events(&self) -> &[EventKind] {
        self.events.as_slice()
    }

    fn id(&self) -> Option<ClientId> {
        self.id
    }

    fn kind(&self) -> ClientKind {
        self.desc.kind
    }
}
