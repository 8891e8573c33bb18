//! The bus interface as a client sees it (docs/design.md §3), as traits every host implements.
//!
//! [`BusHandle`] is what a child of the bus driver is handed: the calls of docs/design.md §3, the
//! clock, the device's state and epoch, and the adapter itself (its verbs and DMA memory).
//! The virtual-time host hands a client a handle on its parts for the length of a callback;
//! the threaded host (the model of the KMDF glue) hands it a handle whose calls are queued
//! for the thread that drains the coordinator. A client written against these traits, the
//! access layer and every client of `ibal`, runs on either, unchanged.
//!
//! [`Client`] is the other direction: what a host calls on a client. Callbacks run at
//! DISPATCH_LEVEL on the kernel host: they must not block, and on the reset path they must
//! not allocate (docs/design.md §6).

use alloc::string::String;

use rand_core::RngCore;

use crate::coordinator::{Coordinator, ExecuteOutcome, PortView, Registration};
use crate::errors::{
    ConsentError, ExecuteError, RegisterError, RequestError, UnregisterError, VetoError,
};
use crate::policy::Policy;
use crate::time::Instant;
use crate::types::State;
use crate::types::{ClientDesc, ClientId, ClientKind, Epoch, Event, EventKind, VetoReason};

/// The calls a child of the bus makes about a reset (docs/design.md §3), declared once:
/// [`ClientPort`], [`BusHandle`] and the locked host's bus and client view have each of them,
/// generated from this list by a macro of their own, given `$m` (and what it takes first).
macro_rules! with_client_calls {
    ($m:ident $($first:tt)*) => {
        $m! {
            $($first)*
            /// Asks for a reset (a client saw the hardware misbehave); the epoch it will have.
            reset_request(id: ClientId) -> Result<Epoch, RequestError>;
            /// Answers RESET: the client holds no hardware resource of `epoch` any more.
            reset_execute(id: ClientId, epoch: Epoch) -> Result<ExecuteOutcome, ExecuteError>;
            /// Answers RESET_QUERY: the planned reset may go ahead.
            reset_consent(id: ClientId, epoch: Epoch) -> Result<(), ConsentError>;
            /// Answers RESET_QUERY: refuses the planned reset (CAN_VETO clients only), saying
            /// why for the administrator.
            reset_veto(id: ClientId, epoch: Epoch, reason: VetoReason) -> Result<(), VetoError>;
        }
    };
}
pub(crate) use with_client_calls;

/// The client calls, each one input at the bus's time of a host that runs inputs through
/// `self.input`: a handle's (`&mut self`) or the locked host's (`pub &self`).
macro_rules! calls_as_inputs {
    (&mut self; $($(#[$doc:meta])* $name:ident($($a:ident: $t:ty),*) -> $ret:ty;)*) => {$(
        $(#[$doc])*
        fn $name(&mut self, $($a: $t),*) -> $ret {
            self.input(|c, now| c.$name(now, $($a),*))
        }
    )*};
    (pub &self; $($(#[$doc:meta])* $name:ident($($a:ident: $t:ty),*) -> $ret:ty;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, $($a: $t),*) -> $ret {
            self.input(|c, now| c.$name(now, $($a),*))
        }
    )*};
}
pub(crate) use calls_as_inputs;

/// The client calls on a [`ClientPort`]: the coordinator's own, at `now`.
macro_rules! port_calls {
    ($($(#[$doc:meta])* $name:ident($($a:ident: $t:ty),*) -> $ret:ty;)*) => {$(
        $(#[$doc])*
        pub fn $name(&mut self, now: Instant, $($a: $t),*) -> $ret {
            self.coord.$name(now, $($a),*)
        }
    )*};
}

/// What a client can do to the bus, from a callback or from its own work.
///
/// A call made from inside a callback takes effect before the callback's event counts as
/// delivered, but what it sets in motion (other clients' events, hardware steps) runs after
/// the callback returns: no host calls a client back from inside one of its own calls.
pub trait BusHandle {
    /// The adapter as the access layer drives it (verbs, DMA memory; on the simulator also
    /// the far side of the wire).
    type Device;
    /// The host's source of randomness (back-off jitter, workloads): seeded on the
    /// simulator, so that a run replays.
    type Rng: RngCore;

    fn now(&self) -> Instant;
    fn state(&self) -> State;
    fn epoch(&self) -> Epoch;
    /// The bus's policy (a client sizes its own hold timeout from it).
    fn policy(&self) -> Policy;
    /// What the bus knows of `port`; `None` when the hardware never reported it (a bus that
    /// does not model ports: take it as Active).
    fn port(&self, port: u8) -> Option<PortView>;

    /// Registers; the host routes later events for the new id to the calling client.
    fn register(&mut self, desc: ClientDesc) -> Result<Registration, RegisterError>;
    fn unregister(&mut self, id: ClientId) -> Result<(), UnregisterError>;
    /// One client call at the bus's time, as the host runs inputs: what the calls below are
    /// made of (the host implements this, a client uses the calls). The closure gets a
    /// [`ClientPort`]: the calls a child of the bus may make, and no administrator's,
    /// hardware's or PnP input.
    fn input<R>(&mut self, f: impl FnOnce(&mut ClientPort<'_>, Instant) -> R) -> R;
    with_client_calls!(calls_as_inputs &mut self;);

    /// The device and the generator at once (a simulated remote peer needs both).
    fn device_and_rng(&mut self) -> (&mut Self::Device, &mut Self::Rng);
    fn device(&mut self) -> &mut Self::Device {
        self.device_and_rng().0
    }
    fn rng(&mut self) -> &mut Self::Rng {
        self.device_and_rng().1
    }
}

/// The coordinator as a child of the bus reaches it: the client calls of docs/design.md §3
/// and nothing else. A host builds one around its coordinator for [`BusHandle::input`]; an
/// administrator's reset, a hardware completion or a PnP input is not reachable through it,
/// so a client cannot make one by way of its handle:
///
/// ```compile_fail
/// use hcabus::{bus::ClientPort, types::AdminReset, Instant};
/// fn a_client_tries(port: &mut ClientPort<'_>, now: Instant) {
///     let _ = port.admin_reset(now, AdminReset::Forced); // no such method on a ClientPort
/// }
/// ```
#[derive(Debug)]
pub struct ClientPort<'a> {
    coord: &'a mut Coordinator,
}

impl<'a> ClientPort<'a> {
    /// For hosts: the port a client's call goes through.
    pub fn new(coord: &'a mut Coordinator) -> Self {
        ClientPort { coord }
    }
    with_client_calls!(port_calls);
}

/// A client of the bus, as a host drives it.
pub trait Client<B: BusHandle + ?Sized> {
    /// Called once when the host starts the client (typically: register).
    fn start(&mut self, bus: &mut B);
    fn on_event(&mut self, bus: &mut B, id: ClientId, event: Event);
    /// When the client next wants [`Client::wake`]; `None` (the default) for never.
    fn next_wake(&self) -> Option<Instant> {
        None
    }
    /// Whether [`Client::next_wake`] depends on this client's own state alone, changed only
    /// when the host calls it ([`Client::start`], [`Client::on_event`], [`Client::wake`]):
    /// a host may then keep the answer until its next call instead of asking at every
    /// step. `false` (the default) for a client whose wake follows state it shares (a
    /// multipath device other adapters' clients also drive) or the passing of time.
    fn wake_is_own(&self) -> bool {
        false
    }
    /// The client's own work, at PASSIVE_LEVEL: it may block and, off the reset path,
    /// allocate.
    fn wake(&mut self, _bus: &mut B) {}
}

/// What a client did, for its host's counters (QUERY_COUNTERS): its I/O and, for a disk, its
/// logins and failovers. Read while the host runs: it must not allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientCounters {
    /// I/O given to the client (a disk's commands, IPoIB's frames, user verbs' calls).
    pub submitted: u64,
    pub completed: u64,
    /// Failed upward (to the file system, the network stack, the process).
    pub failed: u64,
    /// Accepted and not yet completed: waiting out a reset, a login or a path.
    pub held: u64,
    pub logins: u64,
    pub logins_refused: u64,
    /// Times a path went down with commands another path took over.
    pub failovers: u64,
    /// Commands taken off a path and re-issued on another.
    pub commands_moved: u64,
}

impl ClientCounters {
    pub fn add(&mut self, o: &ClientCounters) {
        self.submitted += o.submitted;
        self.completed += o.completed;
        self.failed += o.failed;
        self.held += o.held;
        self.logins += o.logins;
        self.logins_refused += o.logins_refused;
        self.failovers += o.failovers;
        self.commands_moved += o.commands_moved;
    }
}

/// What a client says of itself, for hosts and reports; needs no bus.
pub trait ClientReport {
    fn name(&self) -> &str;
    /// Events received, in order.
    fn events(&self) -> &[EventKind];
    /// Current id, if registered.
    fn id(&self) -> Option<ClientId>;
    /// What kind of client it registers as.
    fn kind(&self) -> ClientKind {
        ClientKind::Custom
    }
    /// Why the client is not doing its job (it could not start, its login gave up), for
    /// the report; `None` while it is fine. Called after a run, so it may allocate.
    fn error(&self) -> Option<String> {
        None
    }
    /// Its counters now (nothing for a client that carries no I/O).
    fn counters(&self) -> ClientCounters {
        ClientCounters::default()
    }
    /// Whether it is doing its job now (a disk logged in and up, a network interface with
    /// its link): what a report asks to know the stack is back, of every client alike.
    /// `true` (the default) for a client that has no such state.
    fn serving(&self) -> bool {
        true
    }
}
