//! The checks a fleet's setup passes before anything is built: each refusal names its key.

use hcabus::Instant;

use super::{
    FleetError, FleetFault, FleetSetup, FleetTemplate, Topology, MAX_HOSTS, MAX_HOSTS_PER_LEAF,
    MAX_TARGETS,
};
use hcabus::Duration;

pub(super) fn check(setup: &FleetSetup) -> Result<(), FleetError> {
    if setup.sm.poll_interval == Duration::ZERO || setup.sm.polls_missed == 0 {
        return Err(FleetError::Polls);
    }
    setup.power_on.check().map_err(FleetError::PowerOn)?;
    if setup
        .srp_daemon
        .is_some_and(|d| d.rescan < super::daemon::MIN_RESCAN)
    {
        return Err(FleetError::SrpDaemon);
    }
    if let Some(l) = setup.linux {
        if l.hosts > super::MAX_LINUX_HOSTS {
            return Err(FleetError::Linux("linux_initiators must be 0..=10000"));
        }
        if l.ch_count == 0 {
            return Err(FleetError::Linux("linux_ch_count must be 1..=255"));
        }
        if u64::from(l.hosts) * u64::from(l.ch_count) > super::MAX_LINUX_CHANNELS {
            return Err(FleetError::Linux(
                "linux_initiators x linux_ch_count must be at most 100000",
            ));
        }
    }
    if setup.hosts == 0 || setup.hosts > MAX_HOSTS {
        return Err(FleetError::Hosts(setup.hosts));
    }
    if setup.hosts_per_leaf == 0 || setup.hosts_per_leaf > MAX_HOSTS_PER_LEAF {
        return Err(FleetError::HostsPerLeaf(setup.hosts_per_leaf));
    }
    let leaves = Topology::new(setup.hosts, setup.hosts_per_leaf).leaves;
    let n = setup.targets.len();
    if n == 0 || n > MAX_TARGETS {
        return Err(FleetError::Targets(n));
    }
    for (i, t) in setup.targets.iter().enumerate() {
        if let Some(j) = setup.targets[..i].iter().position(|o| o.lid == t.lid) {
            return Err(FleetError::SameLid(i, t.lid, j));
        }
    }
    let end = Instant::ZERO + setup.duration;
    // The lanes' clocks hold an instant of the run (`hcabus_lab::turns`).
    if end.as_us() > hcabus_lab::turns::LAST_US {
        return Err(FleetError::Duration);
    }
    for (i, (at, f)) in setup.faults.iter().enumerate() {
        if *at >= end {
            return Err(FleetError::AfterEnd(i));
        }
        match f {
            FleetFault::TargetRestart { target, .. } if *target >= n => {
                return Err(FleetError::NoTarget(i, *target, n));
            }
            FleetFault::LeafReboot { leaf, .. } if *leaf >= leaves => {
                return Err(FleetError::NoLeaf(i, *leaf, leaves));
            }
            FleetFault::TrapStorm {
                leaf,
                down,
                every,
                bounces,
            } => {
                if *leaf >= leaves {
                    return Err(FleetError::NoLeaf(i, *leaf, leaves));
                }
                storm(setup, i, (*at, end), (*down, *every, *bounces))?;
            }
            FleetFault::PowerOn => return Err(FleetError::Implied(i)),
            FleetFault::Rollout { max_per_target } => {
                let earlier = setup.faults[..i]
                    .iter()
                    .any(|(_, f)| matches!(f, FleetFault::Rollout { .. }));
                if *max_per_target == 0 || earlier {
                    return Err(FleetError::Rollout(i));
                }
                if matches!(setup.host, FleetTemplate::One(_)) {
                    return Err(FleetError::RolloutOnOnePath(i));
                }
            }
            _ => {}
        }
    }
    if setup.host.disks() == 0 {
        return Err(FleetError::NoDisk);
    }
    Ok(())
}

/// A trap storm's bounces: a cable that is back before its next one, all within the run,
/// one storm a run (the master's plan is one).
fn storm(
    setup: &FleetSetup,
    i: usize,
    (at, end): (Instant, Instant),
    (down, every, bounces): (Duration, Duration, u32),
) -> Result<(), FleetError> {
    let earlier = setup.faults[..i]
        .iter()
        .any(|(_, f)| matches!(f, FleetFault::TrapStorm { .. }));
    if earlier {
        return Err(FleetError::TrapStorm(i, "one trap storm a run"));
    }
    if !(1..=super::MAX_BOUNCES).contains(&bounces) {
        return Err(FleetError::TrapStorm(i, "bounces must be 1..=10000"));
    }
    if down == Duration::ZERO || down >= every {
        return Err(FleetError::TrapStorm(
            i,
            "down_ms must be at least 1 and below every_ms (the cable is back before its next bounce)",
        ));
    }
    let last = every.as_us().saturating_mul(u64::from(bounces - 1));
    if at.as_us().saturating_add(last) >= end.as_us() {
        return Err(FleetError::TrapStorm(
            i,
            "its last bounce is at or after the run's end",
        ));
    }
    Ok(())
}
