//! Which hosts a fleet fault took a path from, and when each had every path back.

use std::vec::Vec;

use hcabus::{Duration, Instant};

use ibal::disk::SrpClient;

use super::FleetNode;
use super::{DisksWaited, FleetFault, Topology};

/// A disk the fault does not touch.
const UNTOUCHED: u32 = u32::MAX;

/// One host a fault took a path from.
#[derive(Debug, Clone)]
struct Affected {
    host: u32,
    /// Each disk's comebacks before the fault (its logins and flaps ridden), in the order
    /// of its disks ([`UNTOUCHED`] for a disk the fault leaves alone): it is back once it
    /// logged in again or rode the flap since.
    logins_before: Vec<u32>,
    /// Each disk's flaps ridden before the fault (as `logins_before`), and, once it is
    /// back, how many of the disks the fault touched came back by riding it (no login).
    rides_before: Vec<u32>,
    ridden: u32,
    /// Whether its IPoIB interfaces lost their link too (a link flap).
    nets: bool,
    /// Its interfaces' joins through the SA so far (a subnet-manager failover): it is back
    /// once each joined again since (the SA answers none before the new master's sweep, so
    /// a join done is one after the ClientReregister).
    joins_before: Option<u32>,
    back_at: Option<Instant>,
    /// When every interface it touched was up and joined again: multicast back.
    nets_back_at: Option<Instant>,
    /// The fault took every path of its boot disk: its paging I/O waited it out.
    boot_cut: bool,
}

/// What a recovery looks at as its fault strikes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen<'a> {
    pub(super) hosts: &'a [FleetNode],
    /// Each host's target per disk, in the order of its disks.
    pub(super) disk_targets: &'a [Vec<usize>],
    pub(super) topology: Topology,
}

/// A fault and the hosts it touched, each with when it had every path back.
#[derive(Debug, Clone)]
pub(super) struct Recovery {
    pub(super) fault: FleetFault,
    pub(super) at: Instant,
    /// Sorted by host.
    hosts: Vec<Affected>,
}

/// The part of a recovery that one lane of the fleet's hosts looks at (`lanes.rs`): its
/// hosts' entries, and how many of them are not back yet.
#[derive(Debug)]
pub(super) struct Look<'a> {
    hosts: &'a mut [Affected],
    pending: usize,
}

impl Recovery {
    /// The fault at `at` touched `affected` (sorted): their disks' logins now are the mark
    /// each must pass.
    pub(super) fn new(fault: FleetFault, at: Instant, affected: Vec<u32>, seen: Seen<'_>) -> Self {
        let hosts: Vec<Affected> = affected
            .into_iter()
            .map(|h| touched(fault, h, seen))
            .filter(|a: &Affected| {
                a.nets
                    || a.joins_before.is_some()
                    || a.logins_before.iter().any(|l| *l != UNTOUCHED)
            })
            .collect();
        Recovery { fault, at, hosts }
    }

    /// Its parts for lanes whose first hosts are `firsts` (ascending, the first 0): the
    /// entries of hosts `firsts[k]..firsts[k + 1]` for lane `k`.
    pub(super) fn looks(&mut self, firsts: &[u32]) -> Vec<Look<'_>> {
        let mut parts = Vec::with_capacity(firsts.len());
        let mut rest: &mut [Affected] = &mut self.hosts;
        for next in firsts.iter().skip(1) {
            let all = std::mem::take(&mut rest);
            let (part, tail) = all.split_at_mut(all.partition_point(|a| a.host < *next));
            parts.push(Look::new(part));
            rest = tail;
        }
        parts.push(Look::new(rest));
        parts
    }
}

/// What `fault` took of host `h`: its disks' logins now (the mark each must pass, or
/// [`UNTOUCHED`]), its interfaces, its boot disk.
fn touched(fault: FleetFault, h: u32, seen: Seen<'_>) -> Affected {
    let targets = &seen.disk_targets[h as usize];
    let host = &seen.hosts[h as usize];
    // A disk that was not up when the fault struck (still logging in) lost nothing to it:
    // its login is the boot's, not the fault's recovery.
    let marks: Vec<(u32, bool)> = host
        .disks_by_adapter()
        .zip(targets)
        .map(|((a, d), t)| {
            let mark = match fault.disks_waited() {
                DisksWaited::OfTarget(target) if target != *t => UNTOUCHED,
                DisksWaited::OnLeaf(leaf) if seen.topology.leaf_of(h, a) != leaf => UNTOUCHED,
                // Every disk of a fleet powering on has its first login to make.
                DisksWaited::EveryFirstLogin => 0,
                _ if !d.disk().is_up() => UNTOUCHED,
                _ => comebacks(d),
            };
            (mark, d.disk().config().boot)
        })
        .collect();
    // A new master that keeps the LIDs takes no disk's path: none to look at.
    let sm = matches!(
        fault,
        FleetFault::SmFailover | FleetFault::SmHandover { .. }
    );
    let paths_kept = sm && !fault.renumbers();
    let boot = || marks.iter().filter(|(_, boot)| *boot);
    Affected {
        host: h,
        logins_before: if paths_kept {
            Vec::new()
        } else {
            marks.iter().map(|(m, _)| *m).collect()
        },
        nets: fault.takes_links(),
        rides_before: if paths_kept {
            Vec::new()
        } else {
            host.disks().map(rides).collect()
        },
        ridden: 0,
        joins_before: sm.then(|| joins(host)),
        back_at: None,
        nets_back_at: None,
        boot_cut: !paths_kept && boot().count() > 0 && boot().all(|(m, _)| *m != UNTOUCHED),
    }
}

impl<'a> Look<'a> {
    fn new(hosts: &'a mut [Affected]) -> Self {
        let pending = hosts.iter().filter(|a| a.back_at.is_none()).count();
        Look { hosts, pending }
    }

    /// Looks at host `i` after a step at `now`: back once every disk the fault touched has
    /// logged in again and is up, and every interface whose link it took is up.
    pub(super) fn look(&mut self, i: u32, host: &FleetNode, now: Instant) {
        if self.pending == 0 {
            return;
        }
        let Ok(k) = self.hosts.binary_search_by_key(&i, |a| a.host) else {
            return;
        };
        let a = &mut self.hosts[k];
        if a.back_at.is_some() {
            return;
        }
        let nets = a.nets || a.joins_before.is_some();
        let disks_back = host.disks().zip(&a.logins_before).all(|(d, before)| {
            *before == UNTOUCHED || (d.disk().is_up() && comebacks(d) > *before)
        });
        // An interface passes traffic once its link is up and its joins are through the SA.
        let nets_back = !a.nets || host.nets().all(|n| n.link_up() && n.sa_joined());
        let n_nets = host.nets().count() as u32;
        let joined = a.joins_before.is_none_or(|before| {
            joins(host) >= before + n_nets && host.nets().all(|n| n.link_up() && n.sa_joined())
        });
        if nets && nets_back && joined && a.nets_back_at.is_none() {
            a.nets_back_at = Some(now);
        }
        if disks_back && nets_back && joined {
            a.back_at = Some(now);
            let touched = a.logins_before.iter().zip(&a.rides_before);
            a.ridden = host
                .disks()
                .zip(touched)
                .filter(|(d, (mark, before))| **mark != UNTOUCHED && rides(d) > **before)
                .count() as u32;
            self.pending -= 1;
        }
    }
}

impl Recovery {
    /// The hosts the fault touched, in order.
    pub(super) fn hosts(&self) -> impl Iterator<Item = u32> + '_ {
        self.hosts.iter().map(|a| a.host)
    }

    /// How many hosts the fault touched.
    pub(super) fn affected(&self) -> usize {
        self.hosts.len()
    }

    /// Disks back by riding the flap, their connections kept (no login).
    pub(super) fn paths_ridden(&self) -> u64 {
        self.hosts.iter().map(|a| u64::from(a.ridden)).sum()
    }

    /// How long each host that is back took, sorted.
    pub(super) fn back_after(&self) -> Vec<Duration> {
        let mut v: Vec<Duration> = self
            .hosts
            .iter()
            .filter_map(|a| a.back_at.map(|t| t.saturating_since(self.at)))
            .collect();
        v.sort_unstable();
        v
    }

    /// How long each host whose interfaces the fault touched took to have every one up and
    /// joined again, counted from `from` (when multicast broke), sorted; and how many such
    /// hosts there were.
    pub(super) fn multicast_back_after(&self, from: Instant) -> (Vec<Duration>, usize) {
        let touched = self
            .hosts
            .iter()
            .filter(|a| a.nets || a.joins_before.is_some());
        let mut v: Vec<Duration> = touched
            .clone()
            .filter_map(|a| a.nets_back_at.map(|t| t.saturating_since(from)))
            .collect();
        v.sort_unstable();
        (v, touched.count())
    }

    /// How many of its hosts are on each of `topology`'s leaves (by a host's first adapter),
    /// and how many had every path of their boot disk taken: its blast radius.
    pub(super) fn blast(&self, topology: Topology) -> (Vec<u32>, u64) {
        let mut per_leaf = std::vec![0u32; topology.leaves as usize];
        for a in &self.hosts {
            per_leaf[topology.leaf_of(a.host, 0) as usize] += 1;
        }
        let cut = self.hosts.iter().filter(|a| a.boot_cut).count() as u64;
        (per_leaf, cut)
    }

    /// Logins the fault made necessary on target `t` (every touched disk on it).
    pub(super) fn logins_on(
        &self,
        t: usize,
        disk_targets: &[Vec<usize>],
        rides: &dyn Fn(u32) -> bool,
    ) -> u64 {
        self.hosts
            .iter()
            .filter(|a| !rides(a.host))
            .flat_map(|a| {
                disk_targets[a.host as usize]
                    .iter()
                    .zip(&a.logins_before)
                    .filter(move |(dt, before)| **dt == t && **before != UNTOUCHED)
            })
            .count() as u64
    }
}

/// A disk's comebacks: its logins and the flaps it rode with its connection kept.
fn comebacks(d: &SrpClient) -> u32 {
    let s = d.disk().stats();
    s.logins + s.port_flaps_ridden
}

/// The flaps a disk rode.
fn rides(d: &SrpClient) -> u32 {
    d.disk().stats().port_flaps_ridden
}

/// Joins through the SA that `host`'s interfaces completed.
fn joins(host: &FleetNode) -> u32 {
    host.nets()
        .filter_map(|n| n.rejoin_stats())
        .map(|s| s.joins_done)
        .sum()
}
