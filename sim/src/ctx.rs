//! The virtual-time host's [`BusHandle`]: a client's view of the host's parts for the length
//! of one callback or wake-up.

use std::vec::Vec;

use rand_chacha::ChaCha8Rng;

use crate::hca::SimHca;
use crate::invariants::InvariantChecker;
use hcabus::bus::{BusHandle, ClientPort};
use hcabus::coordinator::*;
use hcabus::errors::*;
use hcabus::policy::Policy;
use hcabus::time::Instant;
use hcabus::types::*;

/// What a client in the simulation can do to the bus from a callback or a wake-up. Calls go
/// straight to the coordinator; what they set in motion runs when the host drains, after
/// the client returns.
#[derive(Debug)]
pub struct SimCtx<'a> {
    pub(crate) coord: &'a mut Coordinator,
    pub(crate) bindings: &'a mut [Option<(ClientId, usize)>],
    pub(crate) history: &'a mut Vec<(ClientId, usize)>,
    pub(crate) checker: &'a mut InvariantChecker,
    pub(crate) rng: &'a mut ChaCha8Rng,
    pub(crate) hca: &'a mut SimHca,
    pub(crate) agent: usize,
    pub(crate) now: Instant,
}

impl BusHandle for SimCtx<'_> {
    type Device = SimHca;
    type Rng = ChaCha8Rng;

    fn now(&self) -> Instant {
        self.now
    }
    fn state(&self) -> State {
        self.coord.state()
    }
    fn epoch(&self) -> Epoch {
        self.coord.epoch()
    }
    fn policy(&self) -> Policy {
        *self.coord.policy()
    }
    fn port(&self, port: u8) -> Option<PortView> {
        self.coord.port(port)
    }
    fn register(&mut self, desc: ClientDesc) -> Result<Registration, RegisterError> {
        let reg = self.coord.register(self.now, desc)?;
        self.checker.registered(self.coord, reg.id);
        self.bindings[usize::from(reg.id.index)] = Some((reg.id, self.agent));
        // Reserved at start; a run that registers more often than that loses only names.
        if self.history.len() < self.history.capacity() {
            self.history.push((reg.id, self.agent));
        }
        Ok(reg)
    }
    fn unregister(&mut self, id: ClientId) -> Result<(), UnregisterError> {
        self.coord.unregister(self.now, id)?;
        self.checker.unregistered(self.coord, id);
        Ok(())
    }
    fn input<R>(&mut self, f: impl FnOnce(&mut ClientPort<'_>, Instant) -> R) -> R {
        f(&mut ClientPort::new(self.coord), self.now)
    }
    /// The adapter (its verbs for the access layer, its wire and memory for remote peers)
    /// and the run's seeded generator, the only source of randomness a client may use.
    fn device_and_rng(&mut self) -> (&mut SimHca, &mut ChaCha8Rng) {
        (self.hca, self.rng)
    }
}
