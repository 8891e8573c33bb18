//! A fleet run's figures (docs/design.md §11): how long until every host had every path
//! back against the theoretical minimum, per host p50 and p99, each target's peak login
//! rate against its capacity, logins refused, adapter resets, I/O lost and paging failed.

use std::string::String;
use std::vec::Vec;

use hcabus::verbs::Lid;
use hcabus::Duration;
use hcabus::Instant;

use super::recovery::Recovery;
use super::{Fleet, FleetFault};
use hcabus_lab::srp_target::{AdmissionStats, LoginCapacity};
use hcabus_lab::subnet::{SaSetup, SaStats};
use ibal::io::IoStats;
use ibal::retry::RetryPolicy;

/// MPIO's `PDORemovePeriod` (Microsoft Learn, MPIO_TIMERS_COUNTERS: "The default is 20
/// seconds"), in ms.
pub const PDO_REMOVE_PERIOD_MS: u64 = 20_000;
/// A disk timeout as array vendors set it (docs/fleet.md), in ms.
pub const DISK_TIMEOUT_MS: u64 = 60_000;

/// The most violations a fleet's figures quote (all are counted).
const QUOTED_VIOLATIONS: usize = 8;

/// What one fleet fault cost.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultFigures {
    pub fault: FleetFault,
    pub at: Instant,
    /// Hosts it took a path from.
    pub hosts: u64,
    /// Of those, hosts with every path back by the run's end.
    pub back: u64,
    /// Until the last host had every path back (`None` while one has not).
    pub all_back_after: Option<Duration>,
    /// The least that could be: `outage` then `controlled_min`.
    pub theoretical_min: Duration,
    /// The part no retry policy controls: the target down, the links down and the fabric
    /// bringing them Active again, the standby's detection and sweep.
    pub outage: Duration,
    /// The least the part a policy controls could take: what the fault made the SA and the
    /// targets do, each at its capacity, a host's serial steps (a disk's PathRecord before
    /// its login) taken in series (`minimum`).
    pub controlled_min: Duration,
    /// The median and 99th percentile host's time to every path back, of every host it
    /// touched: `None` while the one at that rank is not back.
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
    /// How long each host that came back took, sorted: the picture of hosts over time.
    pub back_after: Vec<Duration>,
    /// Hosts whose interfaces it took (their links, or their joins at a new master), and
    /// how long until the last of them had every interface up and joined again, counted
    /// from when multicast broke (the fault; for a failover, the new master's sweep): the
    /// 99th percentile host and the last (`None` while one is not).
    pub multicast_hosts: u64,
    pub multicast_p99: Option<Duration>,
    pub multicast_max: Option<Duration>,
    /// Its blast radius: the hosts it took a path from on each leaf switch (by a host's
    /// first adapter), and those it took every path of the boot disk from (their paging
    /// I/O waited it out).
    pub per_leaf: Vec<u32>,
    pub boot_disks_cut: u64,
    /// Disks back by riding a flap with their connections kept: their ports came back
    /// while the transport still retransmitted (docs/design.md §7), no login.
    pub paths_ridden: u64,
}

impl FaultFigures {
    /// The fault took no host's path: there was nothing to recover, and no ratio.
    pub fn no_host(&self) -> bool {
        self.hosts == 0
    }

    /// The time until every host was back over the theoretical minimum.
    pub fn over_min(&self) -> Option<f64> {
        let all = self.all_back_after?;
        Some(all.as_us() as f64 / self.theoretical_min.as_us().max(1) as f64)
    }

    /// How much longer than the minimum every host took to be back, in microseconds: what
    /// the policy lost (negative only if the model beat its own bound, a bug to look at).
    pub fn excess_us(&self) -> Option<i64> {
        let all = self.all_back_after?;
        Some(all.as_us() as i64 - self.theoretical_min.as_us() as i64)
    }

    /// Leaves it took a host's path on, and the most hosts it took one from on one leaf.
    pub fn leaves_touched(&self) -> (u32, u32) {
        let touched = self.per_leaf.iter().filter(|n| **n > 0).count() as u32;
        (touched, self.per_leaf.iter().copied().max().unwrap_or(0))
    }

    /// The part the policy controls, taken over its least: the time from the end of the
    /// outage until every host was back, over `controlled_min`. The outage is in neither,
    /// so a long outage cannot make a slow recovery look close to its bound.
    pub fn controlled_over_min(&self) -> Option<f64> {
        let all = self.all_back_after?;
        let taken = Duration::from_us(all.as_us().saturating_sub(self.outage.as_us()));
        Some(taken.as_us() as f64 / self.controlled_min.as_us().max(1) as f64)
    }
}

/// What one target saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetFigures {
    pub lid: Lid,
    pub capacity: LoginCapacity,
    pub stats: AdmissionStats,
}

/// A fleet run's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetFigures {
    pub name: String,
    pub seed: u64,
    pub retry: RetryPolicy,
    /// IPoIB took an SA timeout for a hung adapter (the naive policy).
    pub naive_ipoib: bool,
    pub hosts: u64,
    pub now: Instant,
    /// Host steps taken: what the run cost.
    pub steps: u64,
    pub faults: Vec<FaultFigures>,
    pub targets: Vec<TargetFigures>,
    /// Adapter resets across the fleet: a fleet fault must cause none.
    pub resets: u64,
    /// A rollout's figures, and the longest any host's multipath boot disk went with no
    /// path (a rollout must keep it at 0).
    pub rollout: Option<super::RolloutFigures>,
    pub max_no_path_us: u64,
    /// What the SA answered, late, BUSY and dropped, against its setup, and the answers
    /// still to come at the run's end.
    pub sa: SaStats,
    pub sa_setup: SaSetup,
    pub sa_queued: u64,
    /// SA queries that timed out at an IPoIB interface, and the adapter resets interfaces
    /// asked for over them (the naive policy's cascade).
    pub sa_timeouts: u64,
    pub ipoib_resets_asked: u64,
    /// Join batches the SA answered (in part) BUSY at an IPoIB interface.
    pub sa_busy: u64,
    /// The PathRecords disks asked for before their logins, and those the SA did not
    /// resolve (each a failed login, retried).
    pub path_records: ibal::disk::PathRecordStats,
    /// What the boot firmware did in a power-on host by host (`None`: every host powered on
    /// at once, its operating system's login its first).
    pub firmware: Option<super::FirmwareFigures>,
    /// How the hosts powered on.
    pub power_on: super::PowerOnSetup,
    /// What the hosts' srp_daemons did (`None`: none runs).
    pub srp_daemon: Option<super::DaemonFigures>,
    /// What a trap storm made the master do (`None`: no storm).
    pub traps: Option<super::TrapFigures>,
    /// What the Linux initiators did (`None`: none).
    pub linux: Option<super::LinuxFigures>,
    /// Logins a queueing target would have answered only after the initiator's CM gave up.
    pub logins_answered_late: u64,
    /// Every host's disks, summed.
    pub io: IoStats,
    /// The longest each host's boot disk's paging I/O waited (one still waiting at the end
    /// as far as it has), across hosts: the median,
    /// the 99th percentile and the worst host; and the hosts past MPIO's PDORemovePeriod
    /// (20 s: a multipath pseudo-LUN with no path is removed) and past a disk timeout of
    /// 60 s (the array vendors' usual setting: the operating system gives the I/O up).
    pub paging_stall: [Duration; 3],
    pub paging_over_pdo_remove: u64,
    pub paging_over_disk_timeout: u64,
    /// Messages the model's rings (an adapter's wire, a target's queue) had no room for:
    /// a run with any is not the run it says (`held`).
    pub model_overflows: u64,
    pub invariants_checked: u64,
    pub violations: u64,
    /// The first few, each prefixed with its host.
    pub quoted_violations: Vec<String>,
}

impl FleetFigures {
    /// Logins the targets refused, for any reason.
    pub fn logins_refused(&self) -> u64 {
        self.targets
            .iter()
            .map(|t| t.stats.refused_busy + t.stats.refused_rate + t.stats.refused_down)
            .sum()
    }

    /// Whether the run kept every guarantee: no invariant violated, no I/O lost or
    /// duplicated, no paging I/O failed, no command out past its bound, the accounting
    /// closed.
    pub fn held(&self) -> bool {
        let io = &self.io;
        self.violations == 0
            && self.model_overflows == 0
            && io.lost == 0
            && io.duplicated == 0
            && io.read_mismatches == 0
            && io.paging_failed == 0
            && io.overdue == 0
            && io.closes()
    }
}

/// The `q`th quantile (0..=1) by nearest rank of `of` hosts, of which those in `sorted` are
/// back: `None` when the rank falls on a host that is not (it has no time yet).
fn quantile(sorted: &[Duration], of: usize, q: f64) -> Option<Duration> {
    let rank = ((q * of as f64).ceil() as usize).clamp(1, of.max(1));
    sorted.get(rank - 1).copied()
}

/// The least time a fleet could take to log `logins` in to a target of `capacity`, each
/// login taking `login`: the last starts no sooner than its target's window lets it (a
/// second's worth at a time) nor before the logins ahead of it have freed its place
/// (`concurrent` at a time), then takes `login`.
fn logins_take(logins: u64, capacity: LoginCapacity, login: Duration) -> Duration {
    let Some(last) = logins.checked_sub(1) else {
        return Duration::ZERO;
    };
    let by_rate_us = last / u64::from(capacity.per_second) * 1_000_000;
    let by_concurrency_us = last / u64::from(capacity.concurrent) * login.as_us();
    Duration::from_us(by_rate_us.max(by_concurrency_us) + login.as_us())
}

/// How long the SA takes to answer `queries` that all arrive at once: the kernel moves
/// each off QP1 in turn and the SA serves them in turn, the two in a pipeline, so the last
/// is answered one receive and one service after the slower of the two has passed over
/// every one before it.
pub(super) fn sa_takes(queries: u64, sa: &SaSetup) -> Duration {
    let Some(before) = queries.checked_sub(1) else {
        return Duration::ZERO;
    };
    let receive_ns = sa.receive.as_us() * 1_000;
    let service_ns = sa.service_ns();
    let ns = receive_ns + service_ns + before * receive_ns.max(service_ns);
    Duration::from_us(ns.div_ceil(1_000))
}

/// The least a fault's recovery could take, as (outage, controlled): what no policy
/// changes, then the least the rest could take. The rest is what the fault made the SA
/// and the targets do, each at its capacity: every touched interface's joins and every
/// lost path's PathRecord at the SA, every touched disk's login at its target. A disk's
/// PathRecord comes before its login (in series), so a target's logins cannot start before
/// the SA has answered one; joins and logins run side by side.
fn minimum(fleet: &Fleet, r: &Recovery) -> (Duration, Duration) {
    let sa = &fleet.sm.sa;
    let rides = |h: u32| rides_out(fleet, r, h);
    let logins = |t: usize| r.logins_on(t, &fleet.disk_targets, &rides);
    let all_logins = (0..fleet.targets.len()).map(logins).sum::<u64>();
    let joins = fleet.sa_queries_per_host * r.affected() as u64;
    // A link lost is a path forgotten, and a port renumbered a path moved: every disk asks
    // for it again before its login.
    let forgets_paths = r.fault.takes_links() || r.fault.renumbers();
    let path_records = if forgets_paths { all_logins } else { 0 };
    let first_answer = if path_records > 0 {
        sa_takes(1, sa)
    } else {
        Duration::ZERO
    };
    let at_target = |t: usize| {
        let cap = fleet.targets[t].0.capacity;
        first_answer + logins_take(logins(t), cap, fleet.login)
    };
    let every_target = || {
        (0..fleet.targets.len())
            .map(at_target)
            .max()
            .unwrap_or(Duration::ZERO)
            .max(sa_takes(joins + path_records, sa))
    };
    // The sweep brings the hosts' ports back one after another: the last host's PathRecord
    // and login wait for it, the others' logins need not.
    let last_host = (fleet.hosts.len() as u32).saturating_sub(1);
    let spread = fleet.sm.reaches(last_host);
    let after_sweep = |bound: Duration| {
        // The last host back waits for its own login, or, where every connection rode
        // the flap, for its own joins.
        let last = if all_logins > 0 {
            first_answer + fleet.login
        } else {
            sa_takes(fleet.sa_queries_per_host, sa)
        };
        Duration::from_us(
            bound
                .as_us()
                .saturating_sub(spread.as_us())
                .max(last.as_us()),
        )
    };
    match r.fault {
        FleetFault::TargetRestart { target, down } => (down, at_target(target)),
        FleetFault::LinkFlap { down } => {
            (down + fleet.fabric + spread, after_sweep(every_target()))
        }
        // The leaf's ports train and are swept in turn; its hosts' joins are those of the
        // adapters on it.
        FleetFault::LeafReboot { leaf, down } | FleetFault::TrapStorm { leaf, down, .. } => {
            let targets = (0..fleet.targets.len()).map(at_target).max();
            let last = if all_logins > 0 {
                first_answer + fleet.login
            } else {
                sa_takes(fleet.sa_queries_per_host, sa)
            };
            let bounds = (targets.unwrap_or(Duration::ZERO), path_records, last);
            on_leaf(fleet, r, (leaf, down), bounds)
        }
        // Host by host: until the last host's operating system has its ports Active (its
        // firmware's and its BMC's doing), then that host's own path, login and joins.
        // The outage is what the fabric and the firmware alone make of it (`boot::Ideal`),
        // whatever the policy's logins did to the firmware's; the policy's part is the
        // last host's own lookup and login, or every login at the targets' capacity from
        // the first host's start if that ends later.
        FleetFault::PowerOn if fleet.staged.is_some() => {
            let (first, last) = fleet.ideal_active().unwrap_or((fleet.now, fleet.now));
            let outage = last.saturating_since(r.at);
            let own = (first_answer + fleet.login).max(sa_takes(fleet.sa_queries_per_host, sa));
            let all = first.saturating_since(r.at) + every_target();
            let bound = Duration::from_us(all.as_us().saturating_sub(outage.as_us()));
            (outage, own.max(bound))
        }
        // Every port trains and is swept from the start.
        FleetFault::PowerOn => (fleet.fabric + spread, after_sweep(every_target())),
        // Until the new master's sweep is done, then every host's joins at the SA.
        FleetFault::SmFailover | FleetFault::SmHandover { .. } => {
            let sm = &fleet.sm;
            let takeover = r.fault.new_master_at(r.at, sm).unwrap_or(r.at);
            let swept = takeover + sm.sweep(fleet.hosts.len() as u32);
            // Renumbered ports log every disk in again, each through a PathRecord the SA
            // answers only after the sweep; kept LIDs cost the joins alone.
            let controlled = if r.fault.renumbers() {
                every_target()
            } else {
                sa_takes(joins, sa)
            };
            (swept.saturating_since(r.at), controlled)
        }
        // No recovery of their own (`Fleet::apply`).
        FleetFault::SaOverload { .. } | FleetFault::Rollout { .. } => {
            (Duration::ZERO, Duration::ZERO)
        }
    }
}

/// The minimum of a fault on one leaf (its reboot, a storm's cable): the leaf's ports train
/// and are swept in turn, its hosts' joins are those of the adapters on it, and each touched
/// disk's PathRecord and login follow (`targets`: the slowest target's logins; `last`: the
/// last host's own). A storm's port is back when the master sweeps it after the last
/// bounce, as the storm left it (`traps.rs`): no policy changes that.
fn on_leaf(
    fleet: &Fleet,
    r: &Recovery,
    (leaf, down): (u32, Duration),
    (targets, path_records, last): (Duration, u64, Duration),
) -> (Duration, Duration) {
    let sa = &fleet.sm.sa;
    let on = r.affected() as u32;
    let spread = fleet.sm.reaches(on.saturating_sub(1));
    let adapters = fleet.hosts.first().map_or(1, |h| h.adapter_count()).max(1);
    let on_leaf = r
        .hosts()
        .map(|h| {
            (0..adapters)
                .filter(|a| fleet.topology.leaf_of(h, *a) == leaf)
                .count() as u64
        })
        .sum::<u64>();
    let joins = fleet.sa_queries_per_host * on_leaf / adapters as u64;
    let bound = targets.max(sa_takes(joins + path_records, sa));
    let controlled = bound
        .as_us()
        .saturating_sub(spread.as_us())
        .max(last.as_us());
    let outage = match r.fault {
        FleetFault::TrapStorm { .. } => fleet.storm_port_back(r.at, down),
        _ => down + fleet.fabric + spread,
    };
    (outage, Duration::from_us(controlled))
}

/// Whether host `h`'s disks ride fault `r` with their connections kept: its port dark no
/// longer than its transport rides (a link flap's port is back after the outage, training
/// and its place in the sweep; a leaf's hosts are swept in their order on it). Their logins
/// and PathRecords are no part of the minimum.
fn rides_out(fleet: &Fleet, r: &Recovery, h: u32) -> bool {
    let Some(ride) = fleet.port_ride else {
        return false;
    };
    let dark = match r.fault {
        FleetFault::LinkFlap { down } => down + fleet.fabric + fleet.sm.reaches(h),
        FleetFault::LeafReboot { down, .. } => {
            let k = r.hosts().position(|x| x == h).unwrap_or(0) as u32;
            down + fleet.fabric + fleet.sm.reaches(k)
        }
        FleetFault::TrapStorm { down, .. } => fleet.storm_port_back(r.at, down),
        _ => return false,
    };
    dark <= ride
}

fn fault_of(fleet: &Fleet, r: &Recovery) -> FaultFigures {
    let back_after = r.back_after();
    let (outage, controlled_min) = minimum(fleet, r);
    // Multicast breaks with the links, or when the new master sweeps and reregisters.
    let broke = match r.fault {
        FleetFault::SmFailover | FleetFault::SmHandover { .. } => r.at + outage,
        _ => r.at,
    };
    let (multicast, multicast_hosts) = r.multicast_back_after(broke);
    let (per_leaf, boot_disks_cut) = r.blast(fleet.topology);
    let all_joined = multicast.len() == multicast_hosts && multicast_hosts > 0;
    // A fault that took no host's path has no recovery to time: no "all back", no ratio
    // (it is not over "at once", below its own outage).
    let all_back = r.affected() > 0 && back_after.len() == r.affected();
    FaultFigures {
        fault: r.fault,
        at: r.at,
        hosts: r.affected() as u64,
        back: back_after.len() as u64,
        all_back_after: back_after.last().copied().filter(|_| all_back),
        theoretical_min: outage + controlled_min,
        outage,
        controlled_min,
        p50: quantile(&back_after, r.affected(), 0.5),
        p99: quantile(&back_after, r.affected(), 0.99),
        back_after,
        multicast_hosts: multicast_hosts as u64,
        multicast_p99: quantile(&multicast, multicast_hosts, 0.99),
        multicast_max: multicast.last().copied().filter(|_| all_joined),
        per_leaf,
        boot_disks_cut,
        paths_ridden: r.paths_ridden(),
    }
}

pub(super) fn of(fleet: &Fleet) -> FleetFigures {
    let faults = fleet
        .recoveries
        .iter()
        .map(|r| fault_of(fleet, r))
        .collect();
    let mut io = IoStats::default();
    let (mut resets, mut checked, mut violations, mut model_overflows) = (0, 0, 0, 0);
    let (mut sa_timeouts, mut sa_busy, mut ipoib_resets_asked) = (0, 0, 0);
    let mut late = 0;
    let mut path_records = ibal::disk::PathRecordStats::default();
    let mut quoted = Vec::new();
    for h in &fleet.hosts {
        io.add(&h.io_stats());
        resets += h.resets_started();
        model_overflows += h.model_overflows();
        for s in h.nets().filter_map(|n| n.rejoin_stats()) {
            sa_timeouts += u64::from(s.sa_timeouts);
            sa_busy += u64::from(s.sa_busy);
            ipoib_resets_asked += u64::from(s.resets_asked);
        }
        for d in h.disks() {
            late += u64::from(d.disk().stats().logins_answered_late);
        }
        for p in h.disks().filter_map(|d| d.path_records()) {
            path_records.queries += p.queries;
            path_records.failed += p.failed;
            path_records.rescans += p.rescans;
        }
        let (c, v) = h.invariants();
        checked += c;
        violations += v.len() as u64;
        for v in v {
            if quoted.len() < QUOTED_VIOLATIONS {
                quoted.push(std::format!("{}: {v}", h.name()));
            }
        }
    }
    for v in fleet.not_started() {
        violations += 1;
        if quoted.len() < QUOTED_VIOLATIONS {
            quoted.push(v.clone());
        }
    }
    let (sa, sa_queued) = fleet.subnet.stats(fleet.now);
    let mut stalls: Vec<Duration> = fleet
        .hosts
        .iter()
        .map(|h| Duration::from_us(h.paging_stall_us(fleet.now)))
        .collect();
    stalls.sort_unstable();
    let n = stalls.len();
    let over = |limit_ms: u64| {
        stalls
            .iter()
            .filter(|d| **d > Duration::from_ms(limit_ms))
            .count() as u64
    };
    let at = |q: f64| quantile(&stalls, n, q).unwrap_or(Duration::ZERO);
    FleetFigures {
        name: fleet.name.clone(),
        seed: fleet.seed,
        retry: fleet.retry,
        naive_ipoib: fleet.naive_ipoib,
        hosts: fleet.hosts.len() as u64,
        now: fleet.now,
        steps: fleet.steps(),
        faults,
        targets: fleet
            .targets
            .iter()
            .map(|(t, a)| TargetFigures {
                lid: t.lid,
                capacity: t.capacity,
                stats: a.lock().stats(),
            })
            .collect(),
        resets,
        rollout: fleet.rollout(),
        max_no_path_us: fleet
            .hosts
            .iter()
            .map(|h| h.no_path_us())
            .max()
            .unwrap_or(0),
        sa,
        sa_setup: fleet.sm.sa,
        sa_queued,
        sa_timeouts,
        ipoib_resets_asked,
        sa_busy,
        path_records,
        firmware: fleet.firmware(),
        logins_answered_late: late,
        power_on: fleet.power_on(),
        srp_daemon: fleet.daemons(),
        traps: fleet.traps(),
        linux: fleet.linux_figures(),
        io,
        paging_stall: [
            at(0.5),
            at(0.99),
            stalls.last().copied().unwrap_or(Duration::ZERO),
        ],
        paging_over_pdo_remove: over(PDO_REMOVE_PERIOD_MS),
        paging_over_disk_timeout: over(DISK_TIMEOUT_MS),
        model_overflows,
        invariants_checked: checked,
        violations,
        quoted_violations: quoted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_by_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_ms).collect();
        assert_eq!(quantile(&v, 100, 0.5), Some(Duration::from_ms(50)));
        assert_eq!(quantile(&v, 100, 0.99), Some(Duration::from_ms(99)));
        assert_eq!(quantile(&v[..1], 1, 0.99), Some(Duration::from_ms(1)));
        assert_eq!(quantile(&[], 0, 0.5), None);
        // Of 200 hosts 100 are back: the median is the last of them, the p99 not yet.
        assert_eq!(quantile(&v, 200, 0.5), Some(Duration::from_ms(100)));
        assert_eq!(quantile(&v, 200, 0.99), None);
    }

    #[test]
    fn the_minimum_is_set_by_the_tighter_of_the_two_limits() {
        let cap = |concurrent, per_second| LoginCapacity {
            concurrent,
            per_second,
            queue: false,
        };
        let login = Duration::from_ms(20);
        // 16 at once for 20 ms each is 800 a second: the rate of 200 binds; the last
        // login is of the fifth second (4 s) and takes 20 ms.
        assert_eq!(
            logins_take(1_000, cap(16, 200), login),
            Duration::from_ms(4_000 + 20)
        );
        // 2 at once is 100 a second: concurrency binds (499 rounds before the last).
        assert_eq!(
            logins_take(1_000, cap(2, 200), login),
            Duration::from_ms(499 * 20 + 20)
        );
        assert_eq!(logins_take(1, cap(2, 200), login), login);
        assert_eq!(logins_take(0, cap(2, 200), login), Duration::ZERO);
    }

    #[test]
    fn the_sa_answers_in_a_pipeline_at_its_slower_stage() {
        let mut sa = SaSetup::default();
        // 100,000 a second is 10 us a query; the kernel's 1 us receive overlaps it.
        assert_eq!(sa_takes(0, &sa), Duration::ZERO);
        assert_eq!(sa_takes(1, &sa), Duration::from_us(11));
        assert_eq!(sa_takes(1_000, &sa), Duration::from_us(1 + 1_000 * 10));
        // An SA faster than the kernel's receive is held to the receive.
        sa.queries_per_second = 1_000_000;
        sa.receive = Duration::from_us(5);
        assert_eq!(sa_takes(1_000, &sa), Duration::from_us(5 + 1 + 999 * 5));
    }

    /// The same recovery against a long and a short outage: over the whole minimum the long
    /// one looks nearly perfect, the policy's own part does not.
    #[test]
    fn the_policys_part_leaves_the_outage_out() {
        let fault = |outage_ms: u64| FaultFigures {
            fault: FleetFault::PowerOn,
            at: Instant::ZERO,
            hosts: 1,
            back: 1,
            // The policy took 2 s where 1 s would have done, after the outage.
            all_back_after: Some(Duration::from_ms(outage_ms + 2_000)),
            theoretical_min: Duration::from_ms(outage_ms + 1_000),
            outage: Duration::from_ms(outage_ms),
            controlled_min: Duration::from_ms(1_000),
            p50: None,
            p99: None,
            back_after: Vec::new(),
            multicast_hosts: 0,
            multicast_p99: None,
            multicast_max: None,
            per_leaf: std::vec![1, 0],
            boot_disks_cut: 0,
            paths_ridden: 0,
        };
        let (long, short) = (fault(60_000), fault(0));
        assert!(long.over_min() < Some(1.02));
        assert_eq!(short.over_min(), Some(2.0));
        assert_eq!(long.controlled_over_min(), Some(2.0));
        assert_eq!(short.controlled_over_min(), Some(2.0));
        assert_eq!(long.excess_us(), Some(1_000_000));
    }
}
