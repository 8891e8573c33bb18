//! Assembles a host: the access layer first (so it gets RESET last and RESET_END first),
//! then the clients a scenario names, and sums up their I/O and network accounting.

use std::boxed::Box;
use std::string::String;
use std::vec::Vec;

use hcabus::{Instant, PolicyError};
use hcabus_sim::{SimHost, SimSetup};

use crate::srp_target::SharedAdmission;
use crate::subnet::SharedSubnet;
use hcabus::verbs::Lid;
use ibal::access::{Ibal, IbalConfig};
use ibal::ibal_client::{IbalClient, SharedIbal};

mod activity;
pub mod compare;
mod embedded;
mod multi;
mod spec;
mod views;

pub use embedded::{
    boot_from_san, boot_from_san_fast, boot_from_san_multipath, random_multipath, random_stack,
    REALISTIC,
};

// Every kind's configuration, and the builders: a new kind's is exported with no edit here.
pub use spec::*;
pub use views::{multipath_workload, LabParts};

pub use activity::{
    disks, io_stats, net_stats, nets, processes, scripted, Activity, MultiNode, Node, StackClient,
};
pub use multi::{
    adapter_seed, build_multi, build_multi_sharing, build_multi_unchecked, io_stats_all,
    multipath_disks, multipath_io, net_stats_all, AdapterSetup, MultiSetup, MultipathSpec,
};

/// A host to build: the run (name, seed, duration, adapter, policy, faults) and its
/// clients. `sim.clients` is ignored: clients come from `clients`.
#[derive(Debug, Clone)]
pub struct StackSetup {
    pub sim: SimSetup,
    /// The access layer; `None` only for a host of scripted clients alone.
    pub ibal: Option<IbalConfig>,
    pub clients: Vec<ClientSpec>,
}

impl StackSetup {
    /// What its clients take of the adapter and the access layer at their peak, summed
    /// ([`crate::budget`]): what an adapter sized to its clients reserves.
    pub fn needed(&self) -> crate::budget::Needs {
        self.clients
            .iter()
            .filter_map(|spec| spec.config().needs())
            .fold(crate::budget::Needs::default(), |a, (n, _)| {
                crate::budget::add(a, n)
            })
    }

    /// Whether every client fits the adapter and the access layer ([`crate::budget`]).
    pub fn budget(&self) -> Result<(), crate::budget::BudgetError> {
        crate::budget::check(
            self.sim.hca.verbs,
            self.ibal.unwrap_or_default(),
            self.clients.iter().map(|spec| spec.config().needs()),
        )
    }
}

/// Why a stack could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("policy: {0}")]
    Policy(PolicyError),
    /// A client name is empty or longer than the bus allows.
    #[error("client name {0:?} is empty or too long")]
    BadName(String),
    /// A client that uses verbs, in a host without the access layer.
    #[error("client {0:?} needs the access layer (ibal)")]
    NeedsIbal(String),
    /// A client built on the access layer whose configuration declares nothing it takes
    /// of the adapter: the budget check would pass it unseen, so it is not built.
    #[error(
        "client {0:?} uses the access layer but its configuration declares no needs \
         (ClientConfig::needs)"
    )]
    Undeclared(String),
    /// A client the adapter or the access layer cannot serve.
    #[error("{0}")]
    Budget(crate::budget::BudgetError),
    /// A disk path whose disk does not exist (or a path in a host of one adapter).
    #[error("client {0:?} is a path of no disk")]
    NoSuchDisk(String),
    /// A disk whose workload moves more blocks at once than its buffers take.
    #[error("client {client:?}: its I/O moves up to {moves} blocks, its buffers take {takes} (max_blocks)")]
    TooLarge {
        client: String,
        moves: u16,
        takes: u16,
    },
    /// The adapters could not be put in one host.
    #[error("{0}")]
    Adapters(hcabus_sim::MultiHostError),
}

/// Builds the host with IBAL and every client of `setup`.
pub fn build(setup: &StackSetup) -> Result<Node, BuildError> {
    setup.budget().map_err(BuildError::Budget)?;
    build_unchecked(setup)
}

/// Builds without the budget check: for tests that show what a stack the budget refuses
/// would do at run time (a client that cannot come up, recorded).
pub fn build_unchecked(setup: &StackSetup) -> Result<Node, BuildError> {
    build_with(setup, &[], (&[], None))
}

/// Builds one host of a fleet: its disks log in to targets whose login capacity other
/// hosts share (`targets`, by the target's LID; docs/design.md §11).
pub fn build_sharing(
    setup: &StackSetup,
    targets: &[(Lid, SharedAdmission)],
) -> Result<Node, BuildError> {
    build_fleet_host(setup, targets, None)
}

/// Builds one host of a fleet on `subnet`'s fabric too: its IPoIB interfaces join their
/// groups through the fleet's SA (docs/design.md §11).
pub fn build_fleet_host(
    setup: &StackSetup,
    targets: &[(Lid, SharedAdmission)],
    subnet: Option<&SharedSubnet>,
) -> Result<Node, BuildError> {
    setup.budget().map_err(BuildError::Budget)?;
    let agents = agents_with(setup, &[], (targets, subnet))?;
    SimHost::with_agents(&setup.sim, agents).map_err(BuildError::Policy)
}

/// Builds one adapter's host whose disk paths belong to `disks`.
pub(crate) fn build_with(
    setup: &StackSetup,
    disks: &[LabDisk],
    shared: (&[(Lid, SharedAdmission)], Option<&SharedSubnet>),
) -> Result<Node, BuildError> {
    let agents = agents_with(setup, disks, shared)?;
    SimHost::with_agents(&setup.sim, agents).map_err(BuildError::Policy)
}

/// A new access layer and every client of `setup`, not yet started: what a host adds
/// again after removing its clients ([`SimHost::add_agents`]).
pub fn agents(setup: &StackSetup) -> Result<Vec<Box<dyn StackClient>>, BuildError> {
    setup.budget().map_err(BuildError::Budget)?;
    agents_with(setup, &[], (&[], None))
}

fn agents_with(
    setup: &StackSetup,
    disks: &[LabDisk],
    (targets, subnet): (&[(Lid, SharedAdmission)], Option<&SharedSubnet>),
) -> Result<Vec<Box<dyn StackClient>>, BuildError> {
    let ibal = SharedIbal::new(Ibal::new(setup.ibal.unwrap_or_default()));
    let mut agents: Vec<Box<dyn StackClient>> = Vec::with_capacity(setup.clients.len() + 1);
    if setup.ibal.is_some() {
        agents.push(Box::new(IbalClient::new(ibal.clone())));
    } else if let Some(spec) = setup.clients.iter().find(|c| c.config().needs().is_some()) {
        return Err(BuildError::NeedsIbal(spec.name().into()));
    }
    for spec in &setup.clients {
        let parts = (&ibal, disks, targets, subnet);
        agents.push(build_one(
            spec.config(),
            spec.name(),
            parts,
            setup.sim.start,
        )?);
    }
    Ok(agents)
}

type Shared<'a> = (
    &'a SharedIbal,
    &'a [LabDisk],
    &'a [(Lid, SharedAdmission)],
    Option<&'a SharedSubnet>,
);

/// The client `name` from `config`, handed the access layer only if it said what it takes
/// of the adapter.
fn build_one(
    config: &dyn ClientConfig,
    name: &str,
    (ibal, disks, targets, subnet): Shared<'_>,
    start: Instant,
) -> Result<Box<dyn StackClient>, BuildError> {
    let on = Parts {
        ibal: config.needs().is_some().then_some(ibal),
        disks,
        targets,
        subnet,
        start,
    };
    config.build(name, on)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcabus::Duration;

    /// A kind whose configuration forgets to say what it takes of the adapter.
    struct Forgetful;

    impl ClientConfig for Forgetful {
        fn needs(&self) -> Option<(crate::budget::Needs, Option<&'static str>)> {
            None
        }
        fn build(&self, name: &str, on: Parts<'_>) -> Result<Box<dyn StackClient>, BuildError> {
            let ibal = on.ibal(name)?;
            Ok(Box::new(IbalClient::new(ibal)))
        }
    }

    /// A host that powers on late runs as one that powers on at 0, every instant shifted:
    /// its driver starts then, its workloads owe nothing before, its faults come as late.
    #[test]
    fn a_host_powered_on_late_is_the_same_host_shifted() {
        let early = boot_from_san();
        let shift = Duration::from_ms(30_000);
        let mut late = early.clone();
        late.sim.start = Instant::ZERO + shift;
        late.sim.duration = early.sim.duration + shift;
        for (at, _) in &mut late.sim.faults {
            *at = *at + shift;
        }
        let run = |s: &StackSetup| {
            let mut h = build(s).expect("the default host builds");
            h.run();
            h
        };
        let (a, b) = (run(&early), run(&late));
        let (io_a, io_b) = (activity::io_stats(&a), activity::io_stats(&b));
        assert!(io_a.completed > 1_000 && io_a.lost == 0, "{io_a:?}");
        assert_eq!(io_a, io_b, "the same I/O, none owed before the power-on");
        assert_eq!(activity::net_stats(&a), activity::net_stats(&b));
        let times = |h: &Node, by: Duration| -> Vec<(Instant, Option<Instant>)> {
            let back = |t: Instant| Instant::from_us(t.as_us() - by.as_us());
            h.resets()
                .iter()
                .map(|r| (back(r.started_at), r.finished_at.map(back)))
                .collect()
        };
        assert_eq!(times(&a, Duration::ZERO).len(), 1);
        assert_eq!(times(&a, Duration::ZERO), times(&b, shift));
        let first = |h: &Node| {
            activity::disks(h)
                .map(|d| d.disk().stats().logins)
                .sum::<u32>()
        };
        assert_eq!(first(&a), first(&b));
    }

    #[test]
    fn a_client_that_declares_no_needs_gets_no_access_layer() {
        let ibal = SharedIbal::new(Ibal::new(IbalConfig::default()));
        let built = build_one(&Forgetful, "sneaky", (&ibal, &[], &[], None), Instant::ZERO);
        assert_eq!(
            built.err(),
            Some(BuildError::Undeclared("sneaky".into())),
            "refused by name, not built past the budget check"
        );
        let uverbs = crate::user_process::UverbsSpec::default();
        assert!(build_one(&uverbs, "uverbs", (&ibal, &[], &[], None), Instant::ZERO).is_ok());
    }
}
