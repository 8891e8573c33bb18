//! A Rust client's view of the bus: [`BusHandle`] over [`Bus`], for the length of one
//! callback or one piece of the client's own work.

use rand_core::RngCore;

use crate::bus::{BusHandle, ClientPort};
use crate::coordinator::{PortView, Registration};
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
