//! IBAL as a client of the bus: registered first, so it gets RESET last (after every
//! consumer has had its chance to release) and RESET_END first (so that preserved memory
//! regions are back before any consumer restarts).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hcabus::bus::Client;
use hcabus::types::*;

use crate::access::{Ibal, VerbsBus};

/// The access layer, shared by its bus client and its consumers, on any host: behind a
/// mutex, since on the threaded host they run on different threads. Lock order: a client's
/// own lock, then this one, then the device's (never the other way round).
#[derive(Debug, Clone)]
pub struct SharedIbal(Arc<Mutex<Ibal>>);

impl SharedIbal {
    pub fn new(ibal: Ibal) -> Self {
        SharedIbal(Arc::new(Mutex::new(ibal)))
    }

    /// Locks the access layer. Nothing panics while holding it on purpose; after a client
    /// panicked with it held, its tables are still whole (every method leaves them so
    /// between statements), so the lock is taken over rather than poisoning every client.
    pub fn lock(&self) -> MutexGuard<'_, Ibal> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

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

/// Implements [`ClientReport`] for a client with the usual fields (`desc`, `events`, `id`),
/// and optionally the closure that says what is wrong with it.
macro_rules! report_fields {
    ($ty:ty) => {
        $crate::ibal_client::report_fields!($ty, |_c| None);
    };
    ($ty:ty, |$c:ident| $error:expr) => {
        $crate::ibal_client::report_fields!($ty, |$c| $error, |_c| {
            hcabus::bus::ClientCounters::default()
        });
    };
    ($ty:ty, |$c:ident| $error:expr, |$k:ident| $counters:expr) => {
        $crate::ibal_client::report_fields!($ty, |$c| $error, |$k| $counters, |_s| true);
    };
    ($ty:ty, |$c:ident| $error:expr, |$k:ident| $counters:expr, |$s:ident| $serving:expr) => {
        impl hcabus::bus::ClientReport for $ty {
            fn name(&self) -> &str {
                self.desc.name.as_str()
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
            fn error(&self) -> Option<std::string::String> {
                let $c = self;
                $error
            }
            fn counters(&self) -> hcabus::bus::ClientCounters {
                let $k = self;
                $counters
            }
            fn serving(&self) -> bool {
                let $s = self;
                $serving
            }
        }
    };
}
pub(crate) use report_fields;

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

impl<B: VerbsBus + ?Sized> Client<B> for IbalClient {
    fn start(&mut self, bus: &mut B) {
        match bus.register(self.desc) {
            Ok(r) => {
                self.id = Some(r.id);
                self.ibal.lock().attach(r.epoch, r.state);
            }
            Err(e) => {
                log::error!("ibal: cannot register: {e}");
                self.refusals += 1;
            }
        }
    }

    fn on_event(&mut self, bus: &mut B, id: ClientId, event: Event) {
        self.events.push(event.kind());
        let mut ibal = self.ibal.lock();
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
            // Not CAN_VETO, so never asked; were it, silence would be consent.
            Event::ResetQuery { .. } => {}
            Event::DeviceFatal { .. } => ibal.fail(bus, true),
            // The access layer's verbs do not depend on a port's state.
            Event::PortActive { .. } | Event::PortDown { .. } => {}
        }
    }

    /// Only its own events set its cleanup.
    fn wake_is_own(&self) -> bool {
        true
    }

    fn next_wake(&self) -> Option<hcabus::Instant> {
        // Deferred work runs at once, but outside the callback (at PASSIVE_LEVEL).
        self.cleanup.then_some(hcabus::Instant::ZERO)
    }

    fn wake(&mut self, bus: &mut B) {
        if self.cleanup {
            self.cleanup = false;
            self.ibal.lock().destroy_orphans(bus);
        }
    }
}

crate::ibal_client::report_fields!(IbalClient);
