//! What a fleet's hosts are: the default boot host or the multipath boot host, at a
//! fleet's load, and host `i` built from it with its own seed, its disks on their targets.

use std::vec::Vec;

use hcabus::verbs::Lid;
use hcabus::{Duration, Instant};

use super::{host_seed, FleetError, FleetNode, FleetSetup};
use hcabus_lab::srp_target::SharedAdmission;
use hcabus_lab::stack::{self, ClientSpec, MultiSetup, StackSetup};
use hcabus_lab::subnet::SharedSubnet;
use ibal::access::IbalConfig;

/// The host every host of a fleet is.
#[derive(Debug, Clone)]
// One per fleet: boxing the larger buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum FleetTemplate {
    /// One adapter: the default boot host.
    One(StackSetup),
    /// Several adapters: the multipath boot host (its boot disk on a path through each).
    Many(MultiSetup),
}

impl FleetTemplate {
    fn stacks(&self) -> Vec<&StackSetup> {
        match self {
            FleetTemplate::One(s) => std::vec![s],
            FleetTemplate::Many(m) => m.adapters.iter().map(|a| &a.stack).collect(),
        }
    }

    fn clients(&self) -> impl Iterator<Item = &ClientSpec> + '_ {
        self.stacks().into_iter().flat_map(|s| s.clients.iter())
    }

    /// Its disks: each single disk, and each multipath disk once.
    pub fn disks(&self) -> usize {
        let single = self
            .clients()
            .filter(|c| matches!(c, ClientSpec::Disk { .. }))
            .count();
        single
            + match self {
                FleetTemplate::One(_) => 0,
                FleetTemplate::Many(m) => m.disks.len(),
            }
    }

    /// The SA queries a host makes to join everything again: each interface's groups (the
    /// broadcast one and its extra ones) and its peer's path.
    pub(super) fn sa_queries(&self) -> u64 {
        self.clients()
            .map(|c| match c {
                ClientSpec::Ipoib { config, .. } => u64::from(config.interface.groups) + 2,
                _ => 0,
            })
            .sum()
    }

    /// The longest login of its disks.
    pub(super) fn login(&self) -> Duration {
        self.clients()
            .filter_map(|c| match c {
                ClientSpec::Disk { config, .. } => Some(config.route.login()),
                ClientSpec::DiskPath { config, .. } => Some(config.route.login()),
                _ => None,
            })
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Its fabric's time from a link back to the first Active port: training, and the
    /// subnet manager's sweep (`sweep_base`, the fleet's SM's; each host further on in it
    /// waits `SmSetup::reaches` more).
    pub(super) fn fabric(&self, sweep_base: Duration) -> Duration {
        self.stacks()[0].sim.hca.link_up + sweep_base
    }

    /// How long after its port goes dark a disk's connection rides the flap: its adapter's
    /// transport, to its last retransmission (docs/design.md §7 "A link flap ridden").
    /// `None`: nothing is ridden.
    pub(super) fn port_ride(&self) -> Option<Duration> {
        let rc = self.stacks()[0].sim.hca.transport;
        rc.retransmission(rc.retry_count)
            .filter(|d| *d > Duration::ZERO)
    }
}

/// A stack at a fleet's load: its disks at `iops` each over a small LUN and a short queue,
/// IPoIB and the user-verbs process at `pps` (packets, calls), no fault of its own, and an
/// adapter, IBAL and a bus sized to what those clients take rather than a server's
/// defaults: under 300 KB a host, so that ten thousand fit in 3 GB (docs/fleet.md "What a
/// fleet host costs").
/// The rings are sized so that none fills at this load; a run where one did says so
/// (`FleetFigures::model_overflows`) and does not hold.
fn at_fleet_load(s: &mut StackSetup, iops: u32, pps: u32) {
    s.sim.faults.clear();
    let verbs = &mut s.sim.hca.verbs;
    // Messages in flight on the simulated wire grow with the load: 16 a second of it, from
    // 32 to the adapter's default 256 (past it a send is dropped: counted, and the run does
    // not hold).
    let per_second = u64::from(iops).saturating_add(u64::from(pps));
    verbs.wire_capacity = per_second.saturating_mul(16).clamp(32, 256) as u32;
    // The last 64 records of each host's flight recorder; the bus's tables for eight clients
    // (the boot host registers six; slots go lowest first, so ids are the same); the
    // report's first 4 resets of a host (past them counted, not kept).
    s.sim.recorder_capacity = 64;
    s.sim.max_clients = 8;
    s.sim.reported_resets = 4;
    // Room for the faults the fleet injects while it runs (a flap: one a port), not 256.
    s.sim.derived_faults = 16;
    for c in &mut s.clients {
        match c {
            ClientSpec::Disk { config, .. } => {
                config.load.iops = iops;
                config.load.n_blocks = 64;
                // Nobody draws a fleet host's I/O over time: 16 buckets, not 1,024.
                config.load.series_buckets = 16;
                config.initiator.queue_depth = 8;
                config.initiator.hold_capacity = 2;
            }
            ClientSpec::DiskPath { config, .. } => {
                // A path holds nothing: its disk's queue does (and its LUN is the disk's).
                config.initiator.queue_depth = 8;
                config.initiator.hold_capacity = 0;
            }
            ClientSpec::Ipoib { config, .. } => {
                config.pps = pps;
                config.peer_pps = pps;
                // A minute of its traffic queued while it cannot send, Linux's 1,000 at most.
                let minute = u16::try_from(pps.saturating_mul(64)).unwrap_or(u16::MAX);
                config.interface.stack_queue = minute.clamp(64, 1_000);
            }
            ClientSpec::Uverbs { config, .. } => config.ops_per_sec = pps,
            _ => {}
        }
    }
    // The adapter and the access layer hold what its clients take at their peak (the
    // budget's own sums: the check and the sizes cannot disagree), not a server's defaults:
    // its DMA memory a page rounded, its queues and completion queues, their depths.
    let needed = s.needed();
    let verbs = &mut s.sim.hca.verbs;
    verbs.dma_bytes = u32::try_from(needed.dma_bytes.next_multiple_of(4096)).unwrap_or(u32::MAX);
    let queues = |n: u32| u16::try_from(n.max(1)).unwrap_or(u16::MAX);
    verbs.max_cqs = queues(needed.cqs);
    verbs.max_qps = queues(needed.qps);
    verbs.max_cq_entries = needed.cq_entries.max(1);
    verbs.max_wr = needed.wr.max(1);
    s.ibal = Some(IbalConfig {
        max_cqs: queues(needed.cqs),
        max_qps: queues(needed.qps),
        max_mrs: 32,
        max_ahs: 16,
        max_cq_entries: needed.cq_entries.max(1),
        max_wr: needed.wr.max(1),
        ..IbalConfig::default()
    });
}

/// The default boot host (docs/design.md §9) at a fleet's load: what a fleet's hosts are
/// unless a file says otherwise.
pub fn boot_host(iops: u32, pps: u32) -> StackSetup {
    let mut s = stack::boot_from_san();
    at_fleet_load(&mut s, iops, pps);
    s
}

/// The multipath boot host (`hcasim --multipath`: a second adapter, the boot disk on a path
/// through each) at a fleet's load.
pub fn multipath_host(iops: u32, pps: u32) -> MultiSetup {
    let mut m = stack::boot_from_san_multipath();
    for a in &mut m.adapters {
        at_fleet_load(&mut a.stack, iops, pps);
    }
    for d in &mut m.disks {
        d.load.iops = iops;
        d.load.n_blocks = 64;
        d.config.queue_depth = 8;
        d.config.hold_capacity = 24;
    }
    m
}

/// A stack as host `i` of the fleet: the fleet's subnet manager sweeps its ports (its
/// sweep base, not the single host's own), and they come up at power-on as that sweep
/// reaches them (`SmSetup::reaches`): down from the start until then, then trained and
/// swept. A host that powers on later (`power`: its start, and how long its ports wait for
/// the sweep that reaches them, `boot.rs`) starts then.
fn on_fleet_fabric(
    s: &mut StackSetup,
    setup: &FleetSetup,
    i: u32,
    power: Option<(Instant, Duration)>,
) {
    let hca = &mut s.sim.hca;
    hca.sm_sweep = setup.sm.sweep_base;
    let (start, reach) =
        power.unwrap_or((Instant::ZERO, Duration::from_us(1) + setup.sm.reaches(i)));
    s.sim.start = start;
    for port in 1..=hca.ports {
        let down = hcabus_sim::Fault::PortDown {
            port,
            duration: reach,
        };
        s.sim.faults.push((start, down));
    }
}

/// The target of each of a host's disk clients, in the order of [`FleetNode::disks`], and
/// the template with every disk on its target under the fleet's policies: logical disk `k`
/// of host `i` (its multipath disks first, then its single disks, in order) logs in to
/// target `(i + k) % targets`, every path of a multipath disk to its disk's.
fn place(
    setup: &FleetSetup,
    i: u32,
    stacks: &mut [&mut StackSetup],
    multipath: usize,
) -> Vec<usize> {
    let n = setup.targets.len();
    let target = |k: usize| (i as usize + k) % n;
    let mut singles = multipath;
    let mut out = Vec::new();
    for s in stacks.iter_mut() {
        for c in &mut s.clients {
            match c {
                ClientSpec::Disk { config, .. } => {
                    let t = target(singles);
                    singles += 1;
                    config.initiator.target_lid = setup.targets[t].lid;
                    config.initiator.login_retry = setup.retry;
                    out.push(t);
                }
                ClientSpec::DiskPath { config, .. } => {
                    let t = target(config.disk);
                    config.initiator.target_lid = setup.targets[t].lid;
                    config.initiator.login_retry = setup.retry;
                    out.push(t);
                }
                ClientSpec::Ipoib { config, .. } if setup.naive_ipoib => {
                    config.interface.on_sa_timeout = hcabus_lab::baselines::NAIVE_IPOIB;
                }
                _ => {}
            }
        }
    }
    out
}

/// Node `i` of the fleet: the template with its own name and seed, its disks on their
/// targets under the fleet's retry policy, its interfaces on the fleet's SA.
pub(super) fn fleet_host(
    setup: &FleetSetup,
    i: u32,
    (shared, subnet): (&[(Lid, SharedAdmission)], &SharedSubnet),
    power: Option<(Instant, Duration)>,
) -> Result<(FleetNode, Vec<usize>), FleetError> {
    // The host's view of the SM: where the sweep reaches its ports.
    let subnet = &subnet.for_port(i);
    let name = std::format!("host{i}");
    let seed = host_seed(setup.seed, i);
    match &setup.host {
        FleetTemplate::One(t) => {
            let mut s = t.clone();
            s.sim.name = name;
            s.sim.seed = seed;
            s.sim.duration = setup.duration;
            on_fleet_fabric(&mut s, setup, i, power);
            let targets = place(setup, i, &mut [&mut s], 0);
            let host = stack::build_fleet_host(&s, shared, Some(subnet))
                .map_err(|e| FleetError::Node(i, e))?;
            Ok((FleetNode::One(host), targets))
        }
        FleetTemplate::Many(t) => {
            let mut m = t.clone();
            m.name = name;
            m.seed = seed;
            for d in &mut m.disks {
                d.config.login_retry = setup.retry;
            }
            for a in &mut m.adapters {
                a.stack.sim.duration = setup.duration;
                on_fleet_fabric(&mut a.stack, setup, i, power);
            }
            let mut stacks: Vec<&mut StackSetup> =
                m.adapters.iter_mut().map(|a| &mut a.stack).collect();
            let targets = place(setup, i, &mut stacks, t.disks.len());
            for (k, d) in m.disks.iter_mut().enumerate() {
                d.config.target_lid = setup.targets[(i as usize + k) % setup.targets.len()].lid;
            }
            let world = stack::build_multi_sharing(&m, shared, Some(subnet))
                .map_err(|e| FleetError::Node(i, e))?;
            Ok((FleetNode::Many(world), targets))
        }
    }
}
