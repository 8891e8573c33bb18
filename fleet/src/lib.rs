//! A fleet (docs/design.md §11): many hosts on one fabric, each the real stack (coordinator,
//! host, IBAL and its clients), whose disks log in to a few SRP targets with a login capacity
//! each. The hosts run in one virtual time, deterministic for a seed.
//!
//! Hosts touch each other only through what they share (a target's admission, the SA), so
//! the fleet steps them in the order of their next due instant: whatever a host does at `t`
//! happens after everything any host did before `t`. A host with nothing due is not
//! touched: a fleet costs what its hosts do, not how many there are. On several threads
//! (`Fleet::set_workers`) the hosts are split into lanes that keep that order where hosts
//! meet (`lanes.rs`): the same run, figure for figure.

use std::string::String;
use std::sync::atomic::AtomicBool;
use std::vec::Vec;

use hcabus::verbs::Lid;
use hcabus::{Duration, Instant};

use hcabus_lab::srp_target::{CapacityError, LoginCapacity, SharedAdmission};
use hcabus_lab::stack::BuildError;
use hcabus_lab::subnet::SharedSubnet;
use ibal::retry::RetryPolicy;

mod boot;
mod check;
mod daemon;
mod fault;
mod figures;
mod lanes;
mod linux;
mod node;
mod recovery;
mod rollout;
mod sm;
mod steps;
mod strike;
mod template;
#[cfg(test)]
mod tests;
mod topology;
mod traps;

pub use boot::{FirmwareFigures, PowerOnSetup, FIRMWARE_COMMAND_TIMEOUT};
pub use daemon::{DaemonFigures, SrpDaemonSetup};
pub use fault::{DisksWaited, FleetFault};
pub use figures::{FaultFigures, FleetFigures, TargetFigures};
use lanes::{Bound, Lane, Window};
pub use linux::{LinuxFigures, LinuxSetup, LINUX_CH_COUNT, MAX_LINUX_CHANNELS, MAX_LINUX_HOSTS};
pub use node::FleetNode;
use recovery::Recovery;
pub use rollout::RolloutFigures;
pub use sm::SmSetup;
pub use template::{boot_host, multipath_host, FleetTemplate};
pub use topology::{Topology, MAX_HOSTS_PER_LEAF};
pub use traps::{TrapFigures, MAX_BOUNCES, SWEEP_INTERVAL, TRAP_AGING, TRAP_THRESHOLD};

/// The most hosts a fleet may have: what one process can hold (each host is a whole stack).
pub const MAX_HOSTS: u32 = 10_000;
/// The most targets: a fabric's storage arrays, not its hosts; each is an admission every
/// host's disks on it lock.
pub const MAX_TARGETS: usize = 64;

/// An SRP target of the fleet: its LID and what it can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetSetup {
    pub lid: Lid,
    pub capacity: LoginCapacity,
}

/// What the fleet has to do at an instant: a fault, or a step one led to. A step is the
/// fleet's own and never a setup's: it has no recovery of its own and no row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Fault(FleetFault),
    /// The operator's next look at the rollout.
    RolloutLook,
    /// A host (its index) powers on (a staged power-on, `boot.rs`)...
    PowerOn(u32),
    /// ...its firmware asks the SA for the path to its boot disk (its try `tries`)...
    FirmwareLookup {
        host: u32,
        tries: u8,
    },
    /// ...logs in with the path the SA answered the lookup made at `asked` with...
    FirmwareLogin {
        host: u32,
        tries: u8,
        asked: Instant,
    },
    /// ...and its operating system starts.
    OsStart(u32),
    /// A host's srp_daemon rescans (its try `tries`; one of its period schedules the next).
    Rescan {
        host: u32,
        tries: u8,
        period: bool,
    },
    /// A Linux initiator's next step in its login (`linux.rs`), of its login `generation`.
    Linux {
        host: u32,
        generation: u32,
        step: linux::LinuxStep,
    },
    /// A trap storm's cable goes dark (`traps.rs`); its last bounce starts the storm's row.
    Bounce {
        host: u32,
        fault: FleetFault,
        last: bool,
    },
}

impl Step {
    fn name(&self) -> &'static str {
        match self {
            Step::Fault(f) => f.name(),
            Step::RolloutLook => "rollout_look",
            Step::PowerOn(_) => "host_power_on",
            Step::FirmwareLookup { .. } => "firmware_lookup",
            Step::FirmwareLogin { .. } => "firmware_login",
            Step::OsStart(_) => "os_start",
            Step::Rescan { .. } => "srp_daemon_rescan",
            Step::Bounce { .. } => "trap_storm_bounce",
            Step::Linux { .. } => "linux_login",
        }
    }
}

/// A fleet to build.
#[derive(Debug, Clone)]
pub struct FleetSetup {
    pub name: String,
    pub seed: u64,
    pub duration: Duration,
    pub hosts: u32,
    /// Every host is this one (its own seed): disk `k` of host `i` logs in to target
    /// `(i + k) % targets`, whatever LID the template gives it (`template.rs`).
    pub host: FleetTemplate,
    pub targets: Vec<TargetSetup>,
    pub faults: Vec<(Instant, FleetFault)>,
    /// How every disk retries a refused login.
    pub retry: RetryPolicy,
    /// The subnet manager and its SA.
    pub sm: SmSetup,
    /// Hosts a leaf switch: the fleet's topology (`topology.rs`).
    pub hosts_per_leaf: u32,
    /// Every IPoIB interface takes an SA timeout for a hung adapter (the naive policy the
    /// fleet shows the reset-storm cascade with) instead of retrying.
    pub naive_ipoib: bool,
    /// How the hosts power on: all at once by default, or each after its own delay and
    /// through its boot firmware (`boot.rs`).
    pub power_on: PowerOnSetup,
    /// srp_daemon on every host (`daemon.rs`; `None`: none, as on the product's Windows hosts).
    pub srp_daemon: Option<SrpDaemonSetup>,
    /// Linux SRP initiators sharing the targets and the SA (`linux.rs`; `None`: none).
    pub linux: Option<LinuxSetup>,
}

/// Why a fleet could not be built: named by the key of docs/design.md §11's `[fleet]`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FleetError {
    #[error("hosts must be 1..={MAX_HOSTS}, not {0}")]
    Hosts(u32),
    #[error("targets: a fleet has 1..={MAX_TARGETS} targets, not {0}")]
    Targets(usize),
    #[error("targets[{0}]: {1}")]
    Capacity(usize, CapacityError),
    #[error("targets[{0}].lid: {1:#x} is also targets[{2}]'s")]
    SameLid(usize, Lid, usize),
    #[error("faults[{0}].target: no target {1} (the fleet has {2})")]
    NoTarget(usize, usize, usize),
    #[error("faults[{0}].leaf: no leaf {1} (the fleet's hosts fill {2})")]
    NoLeaf(usize, u32, u32),
    #[error("faults[{0}]: {1}")]
    TrapStorm(usize, &'static str),
    #[error("hosts_per_leaf must be 1..={MAX_HOSTS_PER_LEAF}, not {0}")]
    HostsPerLeaf(u32),
    #[error("faults[{0}].at_ms: at or after the run's end")]
    AfterEnd(usize),
    #[error("faults[{0}]: a fleet powers on once, at its start")]
    Implied(usize),
    #[error("sm.{0}")]
    Sa(hcabus_lab::subnet::SaError),
    #[error("duration: a fleet runs at most {} us", hcabus_lab::turns::LAST_US)]
    Duration,
    #[error("sm.poll_interval_ms and sm.polls_missed must be at least 1")]
    Polls,
    #[error("faults[{0}]: one rollout a run, of at least one adapter in reset per target")]
    Rollout(usize),
    #[error(
        "faults[{0}]: a rollout needs hosts of several adapters: the boot disk's last-path \
         guard refuses every activation of a host's only adapter"
    )]
    RolloutOnOnePath(usize),
    #[error("host: the template has no disk: a fleet's hosts log in to its targets")]
    NoDisk,
    #[error("host {0}: {1}")]
    Node(u32, BuildError),
    #[error("{0}")]
    PowerOn(&'static str),
    #[error("{0}")]
    Linux(&'static str),
    #[error("srp_daemon_rescan_ms must be at least {} (a rescan's three tries)", daemon::MIN_RESCAN.as_ms())]
    SrpDaemon,
}

/// A fleet's seed for host `i`: a stream of its own for each.
pub fn host_seed(seed: u64, i: u32) -> u64 {
    hcabus_lab::stack::adapter_seed(seed, i as usize + 1)
}

/// A fleet in virtual time.
#[derive(Debug)]
pub struct Fleet {
    name: String,
    seed: u64,
    retry: RetryPolicy,
    naive_ipoib: bool,
    hosts: Vec<FleetNode>,
    /// The fabric's subnet manager as the hosts see it (its SA, its ClientReregisters).
    subnet: SharedSubnet,
    sm: SmSetup,
    /// SA queries one host makes to join everything again (each interface's groups and
    /// path).
    sa_queries_per_host: u64,
    targets: Vec<(TargetSetup, SharedAdmission)>,
    /// Each host's target per disk (the index of `targets`), in the order of its disks.
    disk_targets: Vec<Vec<usize>>,
    /// The hosts' schedule, in lanes of contiguous hosts (one unless `set_workers`).
    lanes: Vec<Lane>,
    topology: Topology,
    /// The setup's faults and the steps they led to, in order of their instants.
    faults: steps::Steps,
    recoveries: Vec<Recovery>,
    rollout: Option<rollout::Rollout>,
    /// The longest login of the template's disks, and its fabric's time from a link back
    /// to Active ports (training and sweep): what the theoretical minimums are made of.
    login: Duration,
    fabric: Duration,
    /// How long a disk's connection rides its port gone dark (`None`: not at all).
    port_ride: Option<Duration>,
    now: Instant,
    end: Instant,
    /// A power-on host by host (`None`: every host at once, from the fleet's build).
    staged: Option<std::boxed::Box<boot::Staged>>,
    /// Every host's srp_daemon, when the setup runs them.
    daemons: Option<daemon::Daemons>,
    /// The master's plan through a trap storm, if one struck (`traps.rs`).
    storm: Option<traps::Storm>,
    /// The Linux initiators, if the setup has some.
    linux: Option<linux::Linux>,
    /// A host livelocked: the run stops there (its checker holds the violation), as one
    /// host's run does, rather than step every other host through the same bug.
    stopped: bool,
}

impl Fleet {
    /// Builds every host and target; refuses, by key, what cannot be.
    pub fn build(setup: &FleetSetup) -> Result<Self, FleetError> {
        check::check(setup)?;
        let mut targets = Vec::with_capacity(setup.targets.len());
        for (i, t) in setup.targets.iter().enumerate() {
            let a = SharedAdmission::new(t.capacity).map_err(|e| FleetError::Capacity(i, e))?;
            targets.push((*t, a));
        }
        let shared: Vec<(Lid, SharedAdmission)> =
            targets.iter().map(|(t, a)| (t.lid, a.clone())).collect();
        let subnet = SharedSubnet::new(setup.sm.sa).map_err(FleetError::Sa)?;
        let n = setup.hosts as usize;
        let mut fleet = Fleet {
            name: setup.name.clone(),
            seed: setup.seed,
            retry: setup.retry,
            naive_ipoib: setup.naive_ipoib,
            hosts: Vec::with_capacity(n),
            subnet: subnet.clone(),
            sm: setup.sm,
            sa_queries_per_host: setup.host.sa_queries(),
            targets,
            disk_targets: Vec::with_capacity(n),
            lanes: Lane::split(setup.hosts, 1),
            topology: Topology::new(setup.hosts, setup.hosts_per_leaf),
            faults: steps::Steps::default(),
            recoveries: Vec::new(),
            rollout: None,
            login: setup.host.login(),
            fabric: setup.host.fabric(setup.sm.sweep_base),
            port_ride: setup.host.port_ride(),
            staged: None,
            daemons: None,
            storm: None,
            linux: None,
            now: Instant::ZERO,
            end: Instant::ZERO + setup.duration,
            stopped: false,
        };
        // The setup's faults in order of their instants, those of one instant as listed.
        let mut faults = setup.faults.clone();
        faults.sort_by_key(|(t, _)| *t);
        for (t, f) in faults {
            fleet.faults.push(t, Step::Fault(f));
        }
        for i in 0..setup.hosts {
            let (host, disk_targets) = template::fleet_host(setup, i, (&shared, &subnet), None)?;
            fleet.hosts.push(host);
            fleet.disk_targets.push(disk_targets);
            if !setup.power_on.staged() {
                fleet.schedule(i);
            }
        }
        fleet.stage(setup, &shared, &subnet);
        fleet.start_daemons(setup.srp_daemon);
        fleet.start_linux(setup.linux, &setup.power_on);
        let all = (0..setup.hosts).collect();
        let boot = Recovery::new(FleetFault::PowerOn, Instant::ZERO, all, fleet.seen());
        fleet.recoveries.push(boot);
        Ok(fleet)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }
    pub fn subnet(&self) -> &SharedSubnet {
        &self.subnet
    }
    pub fn now(&self) -> Instant {
        self.now
    }
    pub fn end(&self) -> Instant {
        self.end
    }
    pub fn hosts(&self) -> &[FleetNode] {
        &self.hosts
    }
    pub fn targets(&self) -> &[(TargetSetup, SharedAdmission)] {
        &self.targets
    }
    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// What a recovery looks at as a fault strikes: the hosts, each one's disks' targets,
    /// the leaves.
    fn seen(&self) -> recovery::Seen<'_> {
        recovery::Seen {
            hosts: &self.hosts,
            disk_targets: &self.disk_targets,
            topology: self.topology,
        }
    }
    /// Host steps taken so far.
    pub fn steps(&self) -> u64 {
        self.lanes.iter().map(Lane::steps).sum()
    }

    /// Steps the hosts on `workers` threads from now on (1: this one): the hosts split into
    /// as many lanes (`lanes.rs`). The run is the same whatever the number; only its wall
    /// time changes.
    pub fn set_workers(&mut self, workers: usize) {
        let n = self.hosts.len() as u32;
        let steps = self.steps();
        let mut lanes = Lane::split(n, workers);
        let due: Vec<(u32, Instant)> = self
            .lanes
            .iter()
            .flat_map(|l| {
                (l.first()..l.first() + l.len() as u32).filter_map(|i| Some((i, l.scheduled(i)?)))
            })
            .collect();
        lanes[0].add_steps(steps);
        self.lanes = lanes;
        for (i, t) in due {
            let k = self.lane_of(i);
            let host = &self.hosts[i as usize];
            // Scheduled before, so not livelocked; and at `t` again (already past `now`).
            let _ = self.lanes[k].schedule(i, host, t);
        }
    }

    /// Which lane host `i` is in.
    fn lane_of(&self, i: u32) -> usize {
        self.lanes.partition_point(|l| l.first() <= i) - 1
    }

    /// Runs to the end.
    pub fn run(&mut self) {
        self.run_until(self.end);
    }

    /// Advances to `until`: each fault at its instant, each host at each instant it has
    /// something due, in the order of those instants (a fault before a host at the same one).
    pub fn run_until(&mut self, until: Instant) {
        while !self.stopped {
            let fault_at = self.faults.next_at().filter(|t| *t <= until);
            // Steps of one instant one after another: no host is due between them.
            if fault_at != Some(self.now) {
                self.run_lanes(fault_at.map_or(Bound::Through(until), Bound::Before));
            }
            match fault_at {
                Some(at) if !self.stopped => {
                    self.now = self.now.max(at);
                    if let Some((_, step)) = self.faults.pop() {
                        self.apply(step);
                    }
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
    }

    /// Steps every host due within `bound`: on this thread for one lane, on a thread a
    /// lane for several, each lane looking at its own part of every recovery.
    fn run_lanes(&mut self, bound: Bound) {
        let firsts: Vec<u32> = self.lanes.iter().map(Lane::first).collect();
        let mut looks: Vec<Vec<recovery::Look<'_>>> = firsts.iter().map(|_| Vec::new()).collect();
        for r in &mut self.recoveries {
            for (k, part) in r.looks(&firsts).into_iter().enumerate() {
                looks[k].push(part);
            }
        }
        let mut parts = Vec::with_capacity(firsts.len());
        let mut rest: &mut [FleetNode] = &mut self.hosts;
        for l in &self.lanes {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(l.len());
            parts.push(part);
            rest = tail;
        }
        let stop = AtomicBool::new(false);
        let mut w = Window {
            bound,
            turns: None,
            stop: &stop,
            fleet: &self.name,
        };
        let n = self.lanes.len();
        let lanes = self.lanes.iter_mut().zip(parts).zip(looks.iter_mut());
        let last = if n == 1 {
            lanes
                .map(|((lane, hosts), looks)| lane.run(0, hosts, looks, w))
                .max()
                .flatten()
        } else {
            let turns = hcabus_lab::turns::Turns::new(n);
            let mut lanes: Vec<_> = lanes.collect();
            for (k, ((lane, _), _)) in lanes.iter_mut().enumerate() {
                turns.publish(k, lane.next_in(bound));
            }
            w.turns = Some(&turns);
            std::thread::scope(|s| {
                let runs: Vec<_> = lanes
                    .into_iter()
                    .enumerate()
                    .map(|(k, ((lane, hosts), looks))| {
                        let turns = &turns;
                        s.spawn(move || {
                            let _lane = hcabus_lab::turns::enter(turns, k);
                            lane.run(k, hosts, looks, w)
                        })
                    })
                    .collect();
                runs.into_iter()
                    .map(|r| r.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .max()
                    .flatten()
            })
        };
        self.stopped |= stop.into_inner();
        if let Some(at) = last {
            self.now = self.now.max(at);
        }
    }

    /// Queues host `i` at its next due instant; a host that livelocked stops the fleet (its
    /// checker holds the violation).
    fn schedule(&mut self, i: u32) {
        if self.powered_off(i) {
            return;
        }
        let k = self.lane_of(i);
        if !self.lanes[k].schedule(i, &self.hosts[i as usize], self.now) {
            log::error!("fleet {}: host {i} livelocked; the run stops", self.name);
            self.stopped = true;
        }
    }

    /// The rollout's figures, if one started.
    pub fn rollout(&self) -> Option<RolloutFigures> {
        self.rollout.as_ref().map(rollout::Rollout::figures)
    }

    /// The figures of the run so far.
    pub fn figures(&self) -> FleetFigures {
        figures::of(self)
    }
}
