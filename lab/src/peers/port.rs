//! One path's wire and target port for a peer, served as the lab's SRP target serves it
//! (lab/src/srp_target.rs): a message is carried by the first of its transmissions the
//! route does not swallow (each retransmission one local ACK timeout after the last), a
//! command is served in the phase's service time plus its load for each command waiting,
//! spikes, write slowness, pauses and losses come from the same [`Slowness::serve`], and
//! answers leave in the order they were made.

use hcabus::verbs::RcTransport;
use hcabus::{Duration, Instant};
use rand::RngCore;

use crate::srp_target::{LinkQueue, Route};

/// What became of a transmission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carried {
    /// It arrived then.
    At(Instant),
    /// Every transmission was swallowed: the sender's queue pair errs then (retry
    /// exceeded).
    Failed(Instant),
    /// Swallowed with no timer to send it again: nothing ever happens.
    Never,
}

#[derive(Debug, Clone)]
pub struct Port {
    route: Route,
    rc: RcTransport,
    /// When the last answer made leaves: answers leave in order.
    last_out: Instant,
    /// Commands at the port not yet served (each new one's load).
    waiting: usize,
    /// The data its link has carried (a route with a bandwidth).
    link: LinkQueue,
}

impl Port {
    pub fn new(route: Route, rc: RcTransport) -> Port {
        Port {
            route,
            rc,
            last_out: Instant::ZERO,
            waiting: 0,
            link: LinkQueue::default(),
        }
    }

    /// Whether the route carries anything at `now` (a login, a reconnect).
    pub fn open(&self, now: Instant) -> bool {
        !self.route.at(now).blackhole
    }

    /// A message first sent at `first`, in either direction.
    pub fn carry(&self, first: Instant) -> Carried {
        for k in 0..=self.rc.retry_count {
            let after = if k == 0 {
                Some(Duration::ZERO)
            } else {
                self.rc.retransmission(k)
            };
            let Some(after) = after else {
                return Carried::Never;
            };
            if !self.route.at(first + after).blackhole {
                return Carried::At(first + after);
            }
        }
        match self.rc.retry_budget() {
            Some(b) => Carried::Failed(first + b),
            None => Carried::Never,
        }
    }

    /// A command (a `write`, or not, moving `bytes`) arriving at `now`: when it is
    /// served, or `None` when its transmission is lost for good. It waits at the port
    /// until [`Port::served`].
    pub fn arrive(
        &mut self,
        now: Instant,
        (write, bytes): (bool, u64),
        rng: &mut dyn RngCore,
    ) -> Option<Instant> {
        let phase = *self.route.at(now);
        let due = now + phase.service_time(self.waiting, rng);
        let due = phase
            .slow
            .serve((phase.at, due, write), self.rc.retransmission(1), rng)?;
        let due = self
            .link
            .transfer(due, bytes, write, phase.slow.bandwidth_mb_s);
        self.waiting += 1;
        Some(due)
    }

    /// A command left the port (served, or dropped with its connection).
    pub fn served(&mut self) {
        self.waiting = self.waiting.saturating_sub(1);
    }

    /// An answer made at `now`: when it leaves, after every answer made before it.
    pub fn answer(&mut self, now: Instant) -> Instant {
        let out = (now + self.route.at(now).latency).max(self.last_out);
        self.last_out = out;
        out
    }
}
