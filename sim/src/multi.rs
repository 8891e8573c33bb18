//! Several adapters in one virtual-time host (docs/design.md §9 `[[hcas]]`): one bus, coordinator and
//! epoch per adapter, each a [`SimHost`], stepped in lockstep on one clock.
//!
//! Each round finds the earliest instant anything is due on any adapter and runs every
//! adapter up to it, always in the same order, so a run stays a pure function of its
//! scenario and seed. Clients that span adapters (the paths of a multipath disk) share
//! state between the hosts; what one adapter's client does at an instant can make work due
//! on another at the same instant, which the next round runs before time moves on.

use std::string::String;
use std::vec::Vec;

use crate::agent::Agent;
use crate::report::ResetReport;
use crate::sim_host::SimHost;
use hcabus::time::Instant;

/// Most rounds at one instant: adapters that keep waking each other up without time moving
/// are a livelock in a client, recorded as a violation instead of hanging the run.
const MAX_ROUNDS_AT_ONE_INSTANT: u32 = 10_000;

/// The host of several adapters.
#[derive(Debug)]
pub struct MultiHost<A: ?Sized + Agent = dyn Agent> {
    name: String,
    seed: u64,
    hosts: Vec<(String, SimHost<A>)>,
    end: Instant,
    /// Instants at which the round bound was hit (each also a violation of the first host).
    livelocks: u32,
}

/// Why the adapters could not be put together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultiHostError {
    /// No adapter at all.
    #[error("a host needs at least one adapter")]
    Empty,
    /// Two adapters of one name.
    #[error("two adapters are called {0:?}")]
    DuplicateName(String),
}

impl<A: ?Sized + Agent> MultiHost<A> {
    /// Puts `hosts` (adapter name, its host) on one clock. The run ends at the latest end.
    pub fn new(
        name: &str,
        seed: u64,
        hosts: Vec<(String, SimHost<A>)>,
    ) -> Result<Self, MultiHostError> {
        for (i, (n, _)) in hosts.iter().enumerate() {
            if hosts[..i].iter().any(|(m, _)| m == n) {
                return Err(MultiHostError::DuplicateName(n.clone()));
            }
        }
        let end = hosts
            .iter()
            .map(|(_, h)| h.end())
            .max()
            .ok_or(MultiHostError::Empty)?;
        Ok(MultiHost {
            name: name.into(),
            seed,
            hosts,
            end,
            livelocks: 0,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn end(&self) -> Instant {
        self.end
    }
    pub fn livelocks(&self) -> u32 {
        self.livelocks
    }

    /// Every adapter with its name, in the scenario's order.
    pub fn hosts(&self) -> &[(String, SimHost<A>)] {
        &self.hosts
    }

    /// Adapter `i`, to call into (an IOCTL, a fault) between runs.
    pub fn host_mut(&mut self, i: usize) -> Option<&mut SimHost<A>> {
        self.hosts.get_mut(i).map(|(_, h)| h)
    }

    /// Where the clock is: every adapter is at the same instant between runs.
    pub fn now(&self) -> Instant {
        self.hosts.first().map_or(Instant::ZERO, |(_, h)| h.now())
    }

    /// Whether any adapter is inside a reset (the allocation counters are running).
    pub fn reset_in_progress(&self) -> bool {
        self.hosts
            .iter()
            .any(|(_, h)| h.coordinator().reset_in_progress())
    }

    /// Counts allocations per reset on every adapter.
    pub fn set_alloc_probe(&mut self, probe: crate::sim_host::AllocProbe) {
        for (_, h) in &mut self.hosts {
            h.set_alloc_probe(probe);
        }
    }

    /// Runs to the end.
    pub fn run(&mut self) {
        let end = self.end;
        self.run_until(end);
    }

    /// When something is next due on any adapter: what a fleet steps the host by.
    pub fn next_due(&self) -> Option<Instant> {
        self.hosts.iter().filter_map(|(_, h)| h.next_due()).min()
    }

    /// Advances every adapter to `until` in lockstep.
    pub fn run_until(&mut self, until: Instant) {
        let mut last = None;
        let mut rounds = 0u32;
        loop {
            let next = self.hosts.iter().filter_map(|(_, h)| h.next_due()).min();
            let Some(t) = next.filter(|t| *t <= until) else {
                break;
            };
            if last == Some(t) {
                rounds += 1;
                if rounds == MAX_ROUNDS_AT_ONE_INSTANT {
                    self.livelocks += 1;
                    if let Some((_, h)) = self.hosts.first_mut() {
                        h.violate(format_args!(
                            "the adapters woke each other {rounds} times at {t} without time moving"
                        ));
                    }
                    break;
                }
            } else {
                (last, rounds) = (Some(t), 0);
            }
            for (_, h) in &mut self.hosts {
                h.run_until(t);
            }
        }
        for (_, h) in &mut self.hosts {
            h.run_until(until);
        }
    }

    /// Every finished reset of every adapter, by when it started; each names its adapter
    /// when there are several.
    pub fn resets(&self) -> Vec<ResetReport> {
        let several = self.hosts.len() > 1;
        let mut all: Vec<ResetReport> = self
            .hosts
            .iter()
            .flat_map(|(name, h)| {
                h.resets().into_iter().map(move |mut r| {
                    r.hca = several.then(|| name.clone());
                    r
                })
            })
            .collect();
        all.sort_by_key(|r| r.started_at);
        all
    }

    /// Invariant points checked on every adapter, and every violation named by adapter.
    pub fn invariants(&self) -> (u64, Vec<String>) {
        let several = self.hosts.len() > 1;
        let mut checked = 0;
        let mut violated = Vec::new();
        for (name, h) in &self.hosts {
            checked += h.checker().checked;
            violated.extend(h.checker().violations.iter().map(|v| match several {
                true => std::format!("{name}: {v}"),
                false => v.clone(),
            }));
        }
        (checked, violated)
    }
}
