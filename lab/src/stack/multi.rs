//! A host of several adapters (docs/design.md §9 `[[hcas]]`): one stack per adapter, the paths of
//! multipath disks spread over them, all on one clock ([`MultiNode`]).

use std::string::String;
use std::vec::Vec;

use hcabus_sim::MultiHost;

use super::{
    build_with, io_stats, net_stats, BuildError, ClientSpec, LabDisk, Load, MultiNode, StackSetup,
};
use crate::srp_target::{Lun, SharedAdmission};
use crate::subnet::SharedSubnet;
use hcabus::verbs::Lid;
use ibal::disk::{DiskConfig, SrpClient};
use ibal::io::IoStats;
use ibal::ipoib::NetStats;
use ibal::multipath::{SharedMultipath, MAX_PATHS};

/// One adapter: its name and its stack (adapter, policy, faults, clients).
#[derive(Debug, Clone)]
pub struct AdapterSetup {
    pub name: String,
    pub stack: StackSetup,
}

/// A disk with paths through several adapters: its workload and LUN, and how many paths
/// (one [`ClientSpec::DiskPath`] on each adapter it names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipathSpec {
    pub name: String,
    /// The disk's request limit, hold and LUN (each path's own initiator is its
    /// [`PathConfig`](super::PathConfig)'s).
    pub config: DiskConfig,
    /// The workload above every path, and the LUN's size.
    pub load: Load,
    pub paths: usize,
}

/// A host of several adapters.
#[derive(Debug, Clone)]
pub struct MultiSetup {
    pub name: String,
    pub seed: u64,
    pub adapters: Vec<AdapterSetup>,
    pub disks: Vec<MultipathSpec>,
}

/// Adapter `i`'s seed: the run's seed for the first, a different stream for each other.
pub fn adapter_seed(seed: u64, i: usize) -> u64 {
    seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Builds every adapter's stack, checked against its budget, on one clock.
pub fn build_multi(setup: &MultiSetup) -> Result<MultiNode, BuildError> {
    for a in &setup.adapters {
        a.stack.budget().map_err(BuildError::Budget)?;
    }
    build_multi_unchecked(setup)
}

/// Builds without the budget check: for tests that show what an adapter the budget
/// refuses would do at run time (a path that cannot log in, recorded).
pub fn build_multi_unchecked(setup: &MultiSetup) -> Result<MultiNode, BuildError> {
    build_multi_on(setup, (&[], None))
}

/// Builds one multipath host of a fleet (docs/design.md §11): its disks log in to targets
/// other hosts share, its IPoIB joins through the fleet's SA; checked against its budget.
pub fn build_multi_sharing(
    setup: &MultiSetup,
    targets: &[(Lid, SharedAdmission)],
    subnet: Option<&SharedSubnet>,
) -> Result<MultiNode, BuildError> {
    for a in &setup.adapters {
        a.stack.budget().map_err(BuildError::Budget)?;
    }
    build_multi_on(setup, (targets, subnet))
}

fn build_multi_on(
    setup: &MultiSetup,
    shared: (&[(Lid, SharedAdmission)], Option<&SharedSubnet>),
) -> Result<MultiNode, BuildError> {
    for d in &setup.disks {
        super::spec::fits(&d.name, d.load.large.max_blocks(), &d.config)?;
    }
    // The host powers on when its adapters do (the first's instant).
    let start = setup
        .adapters
        .first()
        .map_or(hcabus::Instant::ZERO, |a| a.stack.sim.start);
    let disks: Vec<LabDisk> = setup
        .disks
        .iter()
        .map(|d| {
            let paths = d.paths.min(MAX_PATHS);
            let max_outstanding = SharedMultipath::capacity(&d.config, paths);
            let workload = super::workload(&d.load, d.config.lun_id, max_outstanding, start);
            LabDisk {
                queue: SharedMultipath::new(&d.name, d.config, paths, workload),
                lun: Lun::new(d.config.lun_id, d.load.n_blocks),
            }
        })
        .collect();
    // Where each path runs, for the last-path guard's reasons.
    for a in &setup.adapters {
        for c in &a.stack.clients {
            if let ClientSpec::DiskPath { config: p, .. } = c {
                if let Some(disk) = disks.get(p.disk) {
                    disk.queue
                        .lock()
                        .place_path(p.path, &a.name, p.initiator.port);
                }
            }
        }
    }
    let mut hosts = Vec::with_capacity(setup.adapters.len());
    for (i, a) in setup.adapters.iter().enumerate() {
        let mut stack = a.stack.clone();
        stack.sim.seed = adapter_seed(setup.seed, i);
        hosts.push((a.name.clone(), build_with(&stack, &disks, shared)?));
    }
    MultiHost::new(&setup.name, setup.seed, hosts).map_err(BuildError::Adapters)
}

/// The multipath disks of `world`, each with its paths' clients and their adapters.
pub fn multipath_disks(world: &MultiNode) -> Vec<(SharedMultipath, Vec<(&str, &SrpClient)>)> {
    let mut out: Vec<(SharedMultipath, Vec<(&str, &SrpClient)>)> = Vec::new();
    for (hca, host) in world.hosts() {
        for c in super::disks(host) {
            let Some((mp, _)) = c.multipath() else {
                continue;
            };
            match out.iter_mut().find(|(m, _)| m.same(mp)) {
                Some((_, paths)) => paths.push((hca.as_str(), c)),
                None => out.push((mp.clone(), std::vec![(hca.as_str(), c)])),
            }
        }
    }
    out
}

/// The I/O accounting of every disk of every adapter, multipath disks once each.
pub fn io_stats_all(world: &MultiNode) -> IoStats {
    let mut total = IoStats::default();
    for (_, host) in world.hosts() {
        total.add(&io_stats(host));
    }
    for (mp, paths) in multipath_disks(world) {
        total.add(&multipath_io(&mp, &paths));
    }
    total
}

/// The I/O accounting of one multipath disk (`paths`: its paths' clients): what its queue
/// and its paths still owe counts in flight while a path is live; commands overdue on any
/// path count once.
pub fn multipath_io(mp: &SharedMultipath, paths: &[(&str, &SrpClient)]) -> IoStats {
    let live = paths.iter().any(|(_, c)| c.is_live_path());
    let on_a_path = |id| paths.iter().any(|(_, c)| c.disk().tracks(id));
    let mut io = mp.lock().io_stats(live, on_a_path);
    io.overdue = paths.iter().map(|(_, c)| c.disk().overdue()).sum();
    io
}

/// The network accounting of every adapter.
pub fn net_stats_all(world: &MultiNode) -> NetStats {
    let mut total = NetStats::default();
    for (_, host) in world.hosts() {
        total.add(&net_stats(host));
    }
    total
}
