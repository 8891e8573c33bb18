//! A host of a fleet: one adapter (the default boot host) or several (a multipath boot host),
//! seen the same way by the fleet: when it next has something due, its disks and interfaces
//! across its adapters, its accounting.

use std::string::String;
use std::vec::Vec;

use hcabus::Instant;

use hcabus_lab::block::BlockWorkload;
use hcabus_lab::srp_target::SrpTarget;
use hcabus_lab::stack::{self, MultiNode, Node};
use ibal::disk::SrpClient;
use ibal::io::IoStats;
use ibal::ipoib::IpoibClient;

/// One node of a fleet: a computer of one adapter or of several.
#[derive(Debug)]
// A fleet holds thousands, of one kind each: boxing the larger would cost a pointer chase a
// step for nothing.
#[allow(clippy::large_enum_variant)]
pub enum FleetNode {
    One(Node),
    Many(MultiNode),
}

impl FleetNode {
    pub fn name(&self) -> &str {
        match self {
            FleetNode::One(h) => h.name(),
            FleetNode::Many(w) => w.name(),
        }
    }

    /// When something is next due on any of its adapters.
    pub fn next_due(&self) -> Option<Instant> {
        match self {
            FleetNode::One(h) => h.next_due(),
            FleetNode::Many(w) => w.next_due(),
        }
    }

    pub fn run_until(&mut self, t: Instant) {
        match self {
            FleetNode::One(h) => h.run_until(t),
            FleetNode::Many(w) => w.run_until(t),
        }
    }

    /// Whether a run of it stopped at a livelock (its checker holds the violation).
    pub fn livelocked(&self) -> bool {
        match self {
            FleetNode::One(h) => h.livelocked(),
            FleetNode::Many(w) => {
                w.livelocks() > 0 || w.hosts().iter().any(|(_, h)| h.livelocked())
            }
        }
    }

    /// Its adapters' hosts, in order.
    pub fn adapters(&self) -> Vec<&Node> {
        match self {
            FleetNode::One(h) => std::vec![h],
            FleetNode::Many(w) => w.hosts().iter().map(|(_, h)| h).collect(),
        }
    }

    /// Its clients are asked again what they wait for (`SimHost::rewake`): the fleet moved
    /// it from outside (a new master's ClientReregister for its ports).
    pub fn rewake(&mut self) {
        for a in 0..self.adapter_count() {
            if let Some(h) = self.adapter_mut(a) {
                h.rewake();
            }
        }
    }

    /// Adapter `i`'s host.
    pub fn adapter_mut(&mut self, i: usize) -> Option<&mut Node> {
        match self {
            FleetNode::One(h) => (i == 0).then_some(h),
            FleetNode::Many(w) => w.host_mut(i),
        }
    }

    pub fn adapter_count(&self) -> usize {
        match self {
            FleetNode::One(_) => 1,
            FleetNode::Many(w) => w.hosts().len(),
        }
    }

    /// Its adapters in order, as `adapters` gives them, with nothing allocated: what a
    /// recovery's look at every step of every host walks.
    fn each_adapter(&self) -> impl Iterator<Item = &Node> + '_ {
        let (one, many): (Option<&Node>, &[(String, Node)]) = match self {
            FleetNode::One(h) => (Some(h), &[]),
            FleetNode::Many(w) => (None, w.hosts()),
        };
        one.into_iter().chain(many.iter().map(|(_, h)| h))
    }

    /// Every disk client (a disk, or a path of a multipath disk) across its adapters, in
    /// adapter order then client order.
    pub fn disks(&self) -> impl Iterator<Item = &SrpClient> + '_ {
        self.each_adapter().flat_map(stack::disks)
    }

    /// The same disks with the index of the adapter each is on.
    pub fn disks_by_adapter(&self) -> impl Iterator<Item = (usize, &SrpClient)> + '_ {
        self.each_adapter()
            .enumerate()
            .flat_map(|(a, h)| stack::disks(h).map(move |d| (a, d)))
    }

    /// Every IPoIB interface across its adapters.
    pub fn nets(&self) -> impl Iterator<Item = &IpoibClient> + '_ {
        self.each_adapter().flat_map(stack::nets)
    }

    /// Its I/O accounting: each disk once (a multipath disk once, not per path).
    pub fn io_stats(&self) -> IoStats {
        match self {
            FleetNode::One(h) => stack::io_stats(h),
            FleetNode::Many(w) => stack::io_stats_all(w),
        }
    }

    /// Adapter resets started on any of its adapters.
    pub fn resets_started(&self) -> u64 {
        self.adapters()
            .iter()
            .map(|h| h.coordinator().counters().resets_started)
            .sum()
    }

    /// Invariant points checked, and every violation (named by adapter with several).
    pub fn invariants(&self) -> (u64, Vec<String>) {
        match self {
            FleetNode::One(h) => (h.checker().checked, h.checker().violations.clone()),
            FleetNode::Many(w) => w.invariants(),
        }
    }

    /// The longest its multipath disks went with no path (0 for a host of one adapter).
    pub fn no_path_us(&self) -> u64 {
        match self {
            FleetNode::One(_) => 0,
            FleetNode::Many(w) => stack::multipath_disks(w)
                .iter()
                .map(|(mp, _)| mp.lock().stats().no_path_us)
                .max()
                .unwrap_or(0),
        }
    }

    /// Messages its adapters' simulated wire and its targets' queues had no room for: the
    /// model's rings, sized for a fleet's load (`template.rs`), must never fill, or the run
    /// is not the one it says.
    pub fn model_overflows(&self) -> u64 {
        let wire: u64 = self
            .adapters()
            .iter()
            .map(|h| h.hca().verbs().stats().wire_drops)
            .sum();
        let targets: u64 = self
            .disks()
            .filter_map(|d| d.target().as_any().downcast_ref::<SrpTarget>())
            .map(|t| t.stats().overflowed)
            .sum();
        wire + targets
    }

    /// The longest its boot disk's paging I/O waited for its answer by `now`, in
    /// microseconds: what its operating system saw of every fault, an I/O still waiting
    /// counted as far as it has (a boot disk that never came up waits from its first I/O).
    pub fn paging_stall_us(&self, now: Instant) -> u64 {
        let waiting = |w: &dyn ibal::workload::Workload| {
            w.as_any()
                .downcast_ref::<BlockWorkload>()
                .and_then(BlockWorkload::oldest_outstanding)
                .map_or(0, |t| now.saturating_since(t).as_us())
        };
        match self {
            FleetNode::One(_) => self
                .disks()
                .filter(|d| d.disk().config().boot)
                .filter_map(|d| Some((d.io_stats().max_latency_us, waiting(d.workload()?))))
                .map(|(done, owed)| done.max(owed))
                .max()
                .unwrap_or(0),
            FleetNode::Many(w) => stack::multipath_disks(w)
                .iter()
                .filter(|(_, paths)| paths.iter().any(|(_, c)| c.disk().config().boot))
                .map(|(mp, paths)| {
                    let done = stack::multipath_io(mp, paths).max_latency_us;
                    done.max(waiting(mp.lock().workload()))
                })
                .max()
                .unwrap_or(0),
        }
    }
}
