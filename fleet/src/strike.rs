//! What a fault does to the fleet as it strikes: the hosts it reaches (its recovery's row),
//! then its doing: a target's restart, cables pulled, a new master's sweep and
//! ClientReregister, a rollout started; and the steps the fleet schedules for itself.

use std::vec::Vec;

use hcabus::{Duration, Instant};

use super::recovery::Recovery;
use super::{daemon, rollout, Fleet, FleetFault, FleetNode, Step};

impl Fleet {
    pub(super) fn apply(&mut self, step: Step) {
        let now = self.now;
        match step {
            Step::Fault(_) | Step::RolloutLook => {
                log::warn!("[{now}] fleet {}: {}", self.name, step.name())
            }
            _ => log::debug!("[{now}] fleet {}: {}", self.name, step.name()),
        }
        let fault = match step {
            Step::Fault(f @ FleetFault::TrapStorm { .. }) => return self.start_storm(f),
            Step::Fault(fault) => fault,
            Step::RolloutLook => return self.look_at_rollout(),
            Step::Rescan {
                host,
                tries,
                period,
            } => return self.rescan(host, tries, period),
            Step::Bounce { host, fault, last } => return self.bounce(host, fault, last),
            Step::Linux {
                host,
                generation,
                step,
            } => return self.linux(host, generation, step),
            _ => return self.power_step(step),
        };
        let n = self.hosts.len() as u32;
        let everyone = || (0..n).collect::<Vec<u32>>();
        let affected: Vec<u32> = match fault {
            FleetFault::TargetRestart { target, .. } => (0..self.hosts.len() as u32)
                .filter(|h| self.disk_targets[*h as usize].contains(&target))
                .collect(),
            FleetFault::LinkFlap { .. } => {
                // Each host at the instant, with what it had due then done, before its
                // paths are marked: the fault takes them from there.
                for i in 0..n {
                    if !self.powered_off(i) {
                        self.hosts[i as usize].run_until(now);
                    }
                }
                everyone()
            }
            FleetFault::LeafReboot { leaf, .. } => {
                let adapters = self.hosts.first().map_or(1, FleetNode::adapter_count);
                let on = self.topology.hosts_on(leaf, n, adapters);
                // As a flap: each host at the instant, with what it had due then done.
                for h in &on {
                    if !self.powered_off(*h) {
                        self.hosts[*h as usize].run_until(now);
                    }
                }
                on
            }
            FleetFault::SmFailover | FleetFault::SmHandover { .. } => everyone(),
            // Its row is made at its last bounce (`traps.rs`).
            FleetFault::TrapStorm { .. } => Vec::new(),
            // Only at build (`Fleet::build`); the others take no path by themselves (a
            // rollout keeps every boot disk's path: its own figures say so).
            FleetFault::PowerOn | FleetFault::SaOverload { .. } | FleetFault::Rollout { .. } => {
                Vec::new()
            }
        };
        // A host still off is no host the fault reached (`boot.rs`).
        let affected: Vec<u32> = affected
            .into_iter()
            .filter(|h| !self.powered_off(*h))
            .collect();
        // Every fault the file names has its row, one that took no host's path too (a
        // target no disk uses, every disk already down): the report says it had no host
        // to recover rather than leave it out.
        let r = Recovery::new(fault, now, affected, self.seen());
        self.recoveries.push(r);
        self.take(fault);
    }

    /// What `fault` does to the fleet.
    fn take(&mut self, fault: FleetFault) {
        let now = self.now;
        match fault {
            FleetFault::TargetRestart { target, down } => {
                self.targets[target].1.lock().restart(now, down);
                // Its Linux initiators hear of it at once (its DREQs) (`linux.rs`).
                self.linux_lost(Some(target), now, now);
            }
            FleetFault::LinkFlap { down } => {
                for i in 0..self.hosts.len() as u32 {
                    self.flap(i, down, None);
                }
                // Every switch traps the links' loss and their training (`traps.rs`).
                self.heard_elsewhere(&[now, now + down + self.link_up()], true);
                // The Linux initiators' connections ride a flap their transport outlasts;
                // a longer one errors their queue pairs at its last retransmission.
                let back = now + down + self.fabric;
                match self.port_ride {
                    Some(ride) if down + self.fabric <= ride => {}
                    ride => self.linux_lost(None, now + ride.unwrap_or(Duration::ZERO), back),
                }
            }
            FleetFault::LeafReboot { leaf, down } => {
                let adapters = self.hosts.first().map_or(1, FleetNode::adapter_count);
                let on = self
                    .topology
                    .hosts_on(leaf, self.hosts.len() as u32, adapters);
                // The leaf's ports come back as the master's sweep reaches them, in turn
                // (those of hosts still off are not there to sweep).
                let on = on.into_iter().filter(|h| !self.powered_off(*h));
                for (k, i) in on.collect::<Vec<u32>>().into_iter().enumerate() {
                    let down = down + self.sm.reaches(k as u32);
                    self.flap(i, down, Some(leaf));
                }
                // The spine above traps the leaf's loss and its return (`traps.rs`).
                self.heard_elsewhere(&[now, now + down + self.link_up()], false);
            }
            FleetFault::SmFailover | FleetFault::SmHandover { .. } => {
                let takeover = fault.new_master_at(now, &self.sm).unwrap_or(now);
                let swept = takeover + self.sm.sweep(self.hosts.len() as u32);
                // The SA ignores every query until the new master's first sweep is over; in
                // it, past its discovery (the base), each port gets ClientReregister in turn.
                self.subnet.away(now, swept.saturating_since(now));
                self.subnet
                    .reregister(takeover + self.sm.sweep_base, self.sm.sweep_per_host);
                if let Some(s) = &mut self.staged {
                    s.boot.sm_away = Some((now, swept));
                }
                // A port that trains meanwhile (a reset, a cable) has no master to sweep it.
                // One that reassigns LIDs gives each port its new one in the same PortInfo
                // as its ClientReregister.
                let renumber = fault.renumbers();
                for i in 0..self.hosts.len() as u32 {
                    if self.powered_off(i) {
                        continue;
                    }
                    let reached = takeover + self.sm.sweep_base + self.sm.reaches(i);
                    let host = &mut self.hosts[i as usize];
                    host.rewake();
                    for a in 0..host.adapter_count() {
                        if let Some(adapter) = host.adapter_mut(a) {
                            adapter.hca_mut().sm_away(now, swept);
                            if renumber {
                                adapter.renumber_ports(reached);
                            }
                        }
                    }
                    self.schedule(i);
                    // srp_daemon rescans at the ClientReregister (`daemon.rs`).
                    self.rescan_at(i, reached, daemon::Cause::Event);
                }
                if renumber {
                    // Their connections made under the old LIDs are gone (`linux.rs`).
                    self.linux_lost(None, swept, swept);
                }
            }
            FleetFault::SaOverload { down } => self.subnet.away(now, down),
            FleetFault::PowerOn | FleetFault::TrapStorm { .. } => {}
            FleetFault::Rollout { max_per_target } => {
                let running = |h| !self.powered_off(h);
                let limits = (self.targets.len(), max_per_target);
                let r = rollout::Rollout::new(&self.hosts, &running, limits, now);
                self.rollout = Some(r);
                self.look_at_rollout();
            }
        }
    }

    /// The operator's look at the rollout: the next adapters activate, and the next look is
    /// scheduled until it is done.
    pub(super) fn look_at_rollout(&mut self) {
        let now = self.now;
        let Some(r) = &mut self.rollout else {
            return;
        };
        let touched = r.look(&mut self.hosts, &self.disk_targets, now);
        let finished = r.finished();
        for h in touched {
            self.schedule(h);
        }
        if !finished {
            self.insert_step(now + rollout::LOOK_EVERY, Step::RolloutLook);
        }
    }

    /// Schedules a step a fault leads to, after those already due then.
    pub(super) fn insert_step(&mut self, at: Instant, step: Step) {
        self.faults.push(at, step);
    }

    /// Pulls every cable of host `i` (already at the instant), or those to one leaf, for
    /// `down`; with every cable its ports come back as the subnet manager's sweep of the
    /// fabric reaches them (a leaf's reboot says its own).
    fn flap(&mut self, i: u32, down: Duration, leaf: Option<u32>) {
        if self.powered_off(i) {
            return;
        }
        let down = match leaf {
            None => down + self.sm.reaches(i),
            Some(_) => down,
        };
        let topology = self.topology;
        self.pull(i, down, |a| {
            leaf.is_none_or(|l| topology.leaf_of(i, a) == l)
        });
    }

    /// Pulls the cables of host `i`'s adapters that `which` names for `down` (the host
    /// already at the instant); srp_daemon rescans once they are back.
    pub(super) fn pull(&mut self, i: u32, down: Duration, which: impl Fn(usize) -> bool) {
        let host = &mut self.hosts[i as usize];
        for a in 0..host.adapter_count() {
            if !which(a) {
                continue;
            }
            let Some(adapter) = host.adapter_mut(a) else {
                continue;
            };
            for port in 1..=adapter.hca().port_count() {
                adapter.inject(hcabus_sim::Fault::PortDown {
                    port,
                    duration: down,
                });
            }
        }
        self.schedule(i);
        // srp_daemon rescans once its port is Active again (`daemon.rs`).
        let back = self.now + down + self.fabric;
        self.rescan_at(i, back, daemon::Cause::Event);
    }
}
