//! A Rust client's view of the bus: [`BusHandle`] over [`Bus`], for the length of one
//! callback or one piece of the client's own work.

use rand_core::RngCore;

use crate::bus::{calls_as_inputs, with_client_calls, BusHandle, ClientPort};
use crate::coordinator::{Coordinator, ExecuteOutcome, PortView, Registration};
use crate::errors::*;
use crate::host::{Bus, Platform};
use crate::policy::Policy;
use crate::time::Instant;
use crate::types::*;

/// What a client holds while it runs: the bus, its own device handle and generator, and its
/// own callback (for the ids it registers).
///
/// Each call goes to the bus at once and kicks the DPC. A host that runs the DPC on the
/// caller's thread must keep it from delivering to this client while the client runs (its
/// state is borrowed here): it defers the drain until the client returns, and then
/// [`ClientCtx::called`] says whether to kick.
pub struct ClientCtx<'a, P: Platform, D, R> {
    bus: &'a Bus<P>,
    device: &'a mut D,
    rng: &'a mut R,
    me: &'a P::Callback,
    called: bool,
}

impl<P: Platform, D, R> core::fmt::Debug for ClientCtx<'_, P, D, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ClientCtx")
            .field("called", &self.called)
            .finish_non_exhaustive()
    }
}

impl<'a, P: Platform, D, R> ClientCtx<'a, P, D, R> {
    pub fn new(bus: &'a Bus<P>, device: &'a mut D, rng: &'a mut R, me: &'a P::Callback) -> Self {
        ClientCtx {
            bus,
            device,
            rng,
            me,
            called: false,
        }
    }

    /// Whether the client called the bus: what it set in motion waits for a drain.
    pub fn called(&self) -> bool {
        self.called
    }

    fn call<T>(&mut self, f: impl FnOnce(&Bus<P>) -> T) -> T {
        self.called = true;
        f(self.bus)
    }
}

impl<P: Platform, D, R: RngCore> BusHandle for ClientCtx<'_, P, D, R> {
    type Device = D;
    type Rng = R;

    fn now(&self) -> Instant {
        self.bus.now()
    }
    fn state(&self) -> State {
        self.bus.state()
    }
    fn epoch(&self) -> Epoch {
        self.bus.epoch()
    }
    fn policy(&self) -> Policy {
        self.bus.policy()
    }
    fn port(&self, port: u8) -> Option<PortView> {
        self.bus.inspect(|c| c.port(port))
    }
    fn register(&mut self, desc: ClientDesc) -> Result<Registration, RegisterError> {
        let me = self.me.clone();
        self.call(|bus| bus.register(desc, me))
    }
    fn unregister(&mut self, id: ClientId) -> Result<(), UnregisterError> {
        self.call(|bus| bus.unregister(id))
    }
    fn input<T>(&mut self, f: impl FnOnce(&mut ClientPort<'_>, Instant) -> T) -> T {
        self.called = true;
        self.bus.input(|c, now| f(&mut ClientPort::new(c), now))
    }
    fn device_and_rng(&mut self) -> (&mut D, &mut R) {
        (self.device, self.rng)
    }
}

/// The bus as a client's event callback is given it: the client calls and what a client may
/// read, and nothing an administrator or the host does (a reset or restart, a policy, any
/// coordinator input, the device). A callback handed the host's whole [`Bus`] could reset
/// the adapter as an administrator; a C child, given nothing but its context, cannot, and
/// a Rust one must not either.
///
/// A callback makes the client calls through it:
///
/// ```
/// use hcabus::host::{ClientView, Platform};
/// use hcabus::types::{ClientId, Epoch};
/// fn a_client_executes<P: Platform>(bus: ClientView<'_, P>, id: ClientId, epoch: Epoch) {
///     let _ = bus.reset_execute(id, epoch);
/// }
/// ```
///
/// and cannot reset the adapter as its administrator:
///
/// ```compile_fail
/// use hcabus::host::{ClientView, Platform};
/// use hcabus::types::AdminReset;
/// fn a_client_tries<P: Platform>(bus: ClientView<'_, P>) {
///     let _ = bus.admin_reset(AdminReset::Forced); // no such method on a ClientView
/// }
/// ```
pub struct ClientView<'a, P: Platform>(&'a Bus<P>);

impl<P: Platform> core::fmt::Debug for ClientView<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ClientView").finish_non_exhaustive()
    }
}

impl<P: Platform> Clone for ClientView<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: Platform> Copy for ClientView<'_, P> {}

impl<'a, P: Platform> ClientView<'a, P> {
    /// The view of `bus`: only narrows what its holder may do.
    pub fn of(bus: &'a Bus<P>) -> Self {
        ClientView(bus)
    }

    pub fn now(&self) -> Instant {
        self.0.now()
    }
    pub fn state(&self) -> State {
        self.0.state()
    }
    pub fn epoch(&self) -> Epoch {
        self.0.epoch()
    }
    pub fn policy(&self) -> Policy {
        self.0.policy()
    }
    pub fn register(
        &self,
        desc: ClientDesc,
        callback: P::Callback,
    ) -> Result<Registration, RegisterError> {
        self.0.register(desc, callback)
    }
    pub fn unregister(&self, id: ClientId) -> Result<(), UnregisterError> {
        self.0.unregister(id)
    }
    with_client_calls!(calls_as_inputs pub &self;);
    /// The bus's inputs, for the client calls above only: private, so that a client cannot
    /// make an administrator's or the hardware's input through its view.
    fn input<R>(&self, f: impl FnOnce(&mut Coordinator, Instant) -> R) -> R {
        self.0.input(f)
    }

    /// Runs what the client's calls set in motion (queues the DPC), for a host that held
    /// its drain back while the client ran.
    pub fn kick(&self) {
        self.0.kick();
    }

    /// A [`BusHandle`] on this bus for a client generic over one, with its device and
    /// randomness, answering to `me`.
    pub fn ctx<D, R>(
        self,
        device: &'a mut D,
        rng: &'a mut R,
        me: &'a P::Callback,
    ) -> ClientCtx<'a, P, D, R> {
        ClientCtx::new(self.0, device, rng, me)
    }
}
