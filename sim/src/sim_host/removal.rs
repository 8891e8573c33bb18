//! Resetting the Linux way, to measure the soft reset against it: every client is removed
//! (its remove callback, then unregistered), the adapter is reset with nobody on it, and a
//! new set of clients is added and starts from nothing (`ib_unregister_device`, the
//! device's reset, `ib_register_device`; mlx5's `devlink dev reload`).
//!
//! Removed agents stay in the host, never called again, so that what they failed on the way
//! out (I/O in flight, held commands) still counts in the run's accounting.

use std::boxed::Box;
use std::vec::Vec;

use super::SimHost;
use crate::agent::Agent;
use crate::ctx::SimCtx;
use hcabus::bus::BusHandle as _;
use hcabus::types::{Event, FatalReason};

impl<A: ?Sized + Agent> SimHost<A> {
    /// Removes every registered client, newest first: DEVICE_FATAL (what a client does when
    /// its device goes away, the remove callback of a Linux upper-layer driver), then
    /// unregister. With nobody left, the DMA memory they held is free again. Returns how
    /// many were removed.
    pub fn remove_clients(&mut self) -> usize {
        let now = self.now;
        let mut ids = Vec::with_capacity(self.coord.client_count());
        ids.extend(self.coord.clients().map(|c| c.id));
        let mut removed = 0;
        for id in ids.into_iter().rev() {
            let Some((_, agent)) = self.bindings[usize::from(id.index)].filter(|b| b.0 == id)
            else {
                continue;
            };
            let mut bus = bus!(self, agent, now);
            self.agents[agent].on_event(
                &mut bus,
                id,
                Event::DeviceFatal {
                    reason: FatalReason::SurpriseRemoval,
                },
            );
            // The client may have gone on its own in the callback.
            let _ = bus.unregister(id);
            self.bindings[usize::from(id.index)] = None;
            self.wakes.forget(agent);
            self.checker.sync(&self.coord);
            self.drain();
            removed += 1;
        }
        if self.coord.client_count() == 0 {
            // Every driver that held DMA memory was removed and freed it: the removed
            // agents are never called again, so nobody uses those buffers after this.
            self.hca.verbs_mut().dma_release_all();
        }
        removed
    }

    /// Adds `agents` and starts them, as at build: they register and come up from nothing.
    /// Returns the index of the first.
    pub fn add_agents(&mut self, agents: Vec<Box<A>>) -> usize {
        let first = self.agents.len();
        self.agents.extend(agents);
        self.wakes.grow(&self.agents);
        for i in first..self.agents.len() {
            let mut bus = bus!(self, i, self.now);
            self.agents[i].start(&mut bus);
            self.wakes.refresh(i, &self.agents);
        }
        self.checker.sync(&self.coord);
        self.drain();
        first
    }
}
