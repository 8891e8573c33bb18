//! A rolling firmware rollout across a fleet, driven as an operator drives one (docs/design.md
//! §11): adapter by adapter, one adapter of a host at a time, a planned firmware activation
//! each, never more than `max_per_target` adapters in reset at once among those that log in
//! to one target (each reset's paths log in again there), looked at every half second as
//! `hcactl maintain` polls. The last-path guard keeps a boot disk's last path: an adapter
//! whose activation it refuses (the host's other path is not back yet) is tried again at the
//! next look.

use std::collections::VecDeque;
use std::vec::Vec;

use hcabus::{Duration, Instant};

use super::FleetNode;
use hcabus_lab::stack;

/// How often the operator looks at the rollout.
pub const LOOK_EVERY: Duration = Duration::from_ms(500);
/// How long an adapter may take from its activation to every path back before the operator
/// gives it up (counted, its place freed, not tried again): a rollout never waits for ever.
pub const ADAPTER_DEADLINE: Duration = Duration::from_ms(120_000);

/// An adapter whose activation went ahead.
#[derive(Debug, Clone, Copy)]
struct InReset {
    host: u32,
    adapter: usize,
    /// Its resets restored before: one more is this one done.
    restored_before: u64,
    started_at: Instant,
    targets: [Option<usize>; 4],
}

/// What a rollout did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RolloutFigures {
    pub started_at: Instant,
    pub finished_at: Option<Instant>,
    /// Adapters to activate, and those done (back, its paths logged in again).
    pub adapters: u32,
    pub done: u32,
    /// Activations the last-path guard refused as they were asked for (tried again later).
    pub vetoed: u32,
    /// Activations that ended without restoring the adapter (a consent withdrawn before
    /// the reset went ahead, a reset that failed: tried again), and adapters not back within
    /// [`ADAPTER_DEADLINE`] (given up).
    pub failed: u32,
    pub given_up: u32,
    /// The most adapters in reset at once among those of one target, against the limit.
    pub peak_per_target: u32,
    pub max_per_target: u32,
}

/// A rollout in progress.
#[derive(Debug, Clone)]
pub struct Rollout {
    pending: VecDeque<(u32, usize)>,
    in_reset: Vec<InReset>,
    /// Adapters in reset now, per target.
    per_target: Vec<u32>,
    figures: RolloutFigures,
}

impl Rollout {
    /// Every adapter of every host `running` says is up (one still off, or whose boot
    /// failed, has no firmware of the old kind to replace), host by host.
    pub fn new(
        hosts: &[FleetNode],
        running: &dyn Fn(u32) -> bool,
        (targets, max_per_target): (usize, u32),
        now: Instant,
    ) -> Self {
        let pending: VecDeque<(u32, usize)> = hosts
            .iter()
            .enumerate()
            .filter(|(h, _)| running(*h as u32))
            .flat_map(|(h, host)| (0..host.adapter_count()).map(move |a| (h as u32, a)))
            .collect();
        Rollout {
            figures: RolloutFigures {
                started_at: now,
                adapters: pending.len() as u32,
                max_per_target,
                ..RolloutFigures::default()
            },
            pending,
            in_reset: Vec::new(),
            per_target: std::vec![0; targets],
        }
    }

    pub fn figures(&self) -> RolloutFigures {
        self.figures
    }

    pub fn finished(&self) -> bool {
        self.figures.finished_at.is_some()
    }

    /// A look at `now`: adapters back are done, and as many as the limit lets start.
    /// `disk_targets[h]` gives host `h`'s disks' targets in the order of its disks. Returns
    /// the hosts it touched (to be scheduled again).
    pub fn look(
        &mut self,
        hosts: &mut [FleetNode],
        disk_targets: &[Vec<usize>],
        now: Instant,
    ) -> Vec<u32> {
        self.collect_done(hosts, now);
        let mut touched = Vec::new();
        let mut waiting = VecDeque::with_capacity(self.pending.len());
        while let Some((h, a)) = self.pending.pop_front() {
            let busy_host = self.in_reset.iter().any(|r| r.host == h);
            let targets = adapter_targets(&hosts[h as usize], a, &disk_targets[h as usize]);
            let room = targets
                .iter()
                .flatten()
                .all(|t| self.per_target[*t] < self.figures.max_per_target);
            if busy_host || !room {
                waiting.push_back((h, a));
                continue;
            }
            // Stepped to now and asked, whether its reset went ahead or not.
            touched.push(h);
            if !self.start(hosts, (h, a), targets, now) {
                waiting.push_back((h, a));
            }
        }
        self.pending = waiting;
        if self.pending.is_empty() && self.in_reset.is_empty() {
            self.figures.finished_at = Some(now);
        }
        touched
    }

    /// Activates adapter `a` of host `h`: `false` if its reset did not go ahead (the guard
    /// refused it), to be tried at a later look.
    fn start(
        &mut self,
        hosts: &mut [FleetNode],
        (h, a): (u32, usize),
        targets: [Option<usize>; 4],
        now: Instant,
    ) -> bool {
        let host = &mut hosts[h as usize];
        host.run_until(now);
        let Some(adapter) = host.adapter_mut(a) else {
            return true;
        };
        let restored_before = adapter.coordinator().counters().resets_restored;
        adapter.inject(hcabus_sim::Fault::FwActivate);
        if !adapter.coordinator().reset_in_progress() {
            self.figures.vetoed += 1;
            return false;
        }
        for t in targets.iter().flatten() {
            self.per_target[*t] += 1;
            self.figures.peak_per_target = self.figures.peak_per_target.max(self.per_target[*t]);
        }
        self.in_reset.push(InReset {
            host: h,
            adapter: a,
            restored_before,
            started_at: now,
            targets,
        });
        true
    }

    /// Adapters whose reset is over: done once restored with every path and interface back;
    /// one that did not restore is counted and tried again; one not back by its deadline is
    /// given up. Each frees its place.
    fn collect_done(&mut self, hosts: &[FleetNode], now: Instant) {
        let mut k = 0;
        while k < self.in_reset.len() {
            let r = self.in_reset[k];
            match self.state_of(hosts, &r, now) {
                Adapter::Busy => {
                    k += 1;
                    continue;
                }
                Adapter::Done => self.figures.done += 1,
                Adapter::NotRestored => {
                    self.figures.failed += 1;
                    self.pending.push_back((r.host, r.adapter));
                }
                Adapter::Late => self.figures.given_up += 1,
            }
            for t in r.targets.iter().flatten() {
                self.per_target[*t] -= 1;
            }
            self.in_reset.swap_remove(k);
        }
    }

    fn state_of(&self, hosts: &[FleetNode], r: &InReset, now: Instant) -> Adapter {
        let adapters = hosts[r.host as usize].adapters();
        let Some(adapter) = adapters.get(r.adapter) else {
            return Adapter::Late;
        };
        let late = now.saturating_since(r.started_at) >= ADAPTER_DEADLINE;
        if adapter.coordinator().reset_in_progress() {
            return if late { Adapter::Late } else { Adapter::Busy };
        }
        if adapter.coordinator().counters().resets_restored <= r.restored_before {
            return Adapter::NotRestored;
        }
        let back = stack::disks(adapter).all(|d| d.disk().is_up())
            && stack::nets(adapter).all(|n| n.link_up() && n.sa_joined());
        match (back, late) {
            (true, _) => Adapter::Done,
            (false, true) => Adapter::Late,
            (false, false) => Adapter::Busy,
        }
    }
}

/// Where an activated adapter stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Adapter {
    Busy,
    Done,
    NotRestored,
    Late,
}

/// The targets adapter `a` of `host` logs in to (at most four distinct ones), from the
/// host's disk targets in the order of its disks.
fn adapter_targets(host: &FleetNode, a: usize, disk_targets: &[usize]) -> [Option<usize>; 4] {
    let adapters = host.adapters();
    let skip: usize = adapters
        .iter()
        .take(a)
        .map(|h| stack::disks(h).count())
        .sum();
    let count = adapters.get(a).map_or(0, |h| stack::disks(h).count());
    let mut out = [None; 4];
    for t in disk_targets.iter().skip(skip).take(count) {
        if out.contains(&Some(*t)) {
            continue;
        }
        if let Some(slot) = out.iter_mut().find(|s| s.is_none()) {
            *slot = Some(*t);
        }
    }
    out
}
