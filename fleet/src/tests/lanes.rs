//! A fleet on several threads (`lanes.rs`): the same run as on one, figure for figure,
//! where its hosts meet the most (logins refused at a small target, an SA that cannot keep
//! up, a reset storm, a rollout).

use std::vec::Vec;

use hcabus::Duration;

use super::super::*;
use super::{restart, setup, BOOT_MS};

fn run_on(setup: &FleetSetup, workers: usize) -> FleetFigures {
    let mut fleet = Fleet::build(setup).expect("builds");
    fleet.set_workers(workers);
    fleet.run();
    fleet.figures()
}

/// Every fault, on 1, 2 and 3 lanes (the hosts split unevenly for 3), the same figures:
/// each host's recovery to the microsecond, every target's admissions, the SA's answers,
/// the steps taken.
fn same_on_every_lane_count(s: &FleetSetup) -> FleetFigures {
    let one = run_on(s, 1);
    for workers in [2, 3] {
        assert_eq!(run_on(s, workers), one, "{workers} lanes");
    }
    one
}

/// Thirty hosts powering on and a target restart, at a target that takes 4 logins at a
/// time: most logins are refused and retried, each answer decided by the logins before.
#[test]
fn logins_refused_by_a_busy_target_are_the_same_on_several_lanes() {
    let faults = std::vec![(2_000, restart(0, 500))];
    let f = same_on_every_lane_count(&setup(30, faults, RetryPolicy::Backoff));
    assert!(f.held(), "{f:?}");
    let refused = f.targets[0].stats.refused_busy + f.targets[0].stats.refused_rate;
    assert!(
        refused > 0,
        "the target turned logins away: {:?}",
        f.targets[0]
    );
}

/// A failover with an SA of 20 queries a second under the naive interface: late answers,
/// SA timeouts and the resets they set off, each decided by the queries before.
#[test]
fn a_reset_storm_at_a_slow_sa_is_the_same_on_several_lanes() {
    let mut s = setup(
        20,
        std::vec![(5_000, FleetFault::SmFailover)],
        RetryPolicy::Backoff,
    );
    s.duration = Duration::from_ms(BOOT_MS + 90_000);
    s.sm.sa.queries_per_second = 20;
    s.naive_ipoib = true;
    let f = same_on_every_lane_count(&s);
    assert!(f.sa.late > 0 && f.resets > 0, "{:?} {}", f.sa, f.resets);
}

/// A link flap and a rollout on multipath hosts: faults the fleet applies between windows,
/// and steps it schedules itself (the rollout's looks).
#[test]
fn a_flap_and_a_rollout_are_the_same_on_several_lanes() {
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(300),
    };
    let rollout = FleetFault::Rollout { max_per_target: 2 };
    let mut s = setup(
        8,
        std::vec![(1_000, flap), (4_000, rollout)],
        RetryPolicy::Backoff,
    );
    s.host = FleetTemplate::Many(multipath_host(20, 10));
    s.duration = Duration::from_ms(BOOT_MS + 60_000);
    let f = same_on_every_lane_count(&s);
    assert!(f.held(), "{f:?}");
    let r = f.rollout.expect("a rollout");
    assert!(r.done > 0, "{r:?}");
}

/// A run in pieces on several lanes, and lanes changed in the middle, is still the run.
#[test]
fn lanes_changed_in_the_middle_of_a_run_change_nothing() {
    let s = setup(
        12,
        std::vec![(1_500, restart(1, 300))],
        RetryPolicy::Backoff,
    );
    let whole = run_on(&s, 1);
    let mut fleet = Fleet::build(&s).expect("builds");
    fleet.set_workers(2);
    fleet.run_until(Instant::from_ms(BOOT_MS + 1_600));
    fleet.set_workers(3);
    fleet.run_until(Instant::from_ms(BOOT_MS + 3_000));
    fleet.set_workers(1);
    fleet.run();
    assert_eq!(fleet.figures(), whole);
    // More lanes than hosts: a lane a host.
    let mut tiny = setup(2, Vec::new(), RetryPolicy::Backoff);
    tiny.duration = Duration::from_ms(BOOT_MS);
    assert_eq!(run_on(&tiny, 8), run_on(&tiny, 1));
}

/// A staged power-on through the firmware with srp_daemon on every port, on a Linux target
/// that queues its logins, a handover after: the fleet's own steps (power-ons, firmware
/// lookups and logins, rescans) between the lanes' windows, the same on every lane count.
#[test]
fn a_staged_power_on_with_srp_daemons_is_the_same_on_several_lanes() {
    let handover = FleetFault::SmHandover {
        reassign_lids: false,
    };
    let mut s = setup(24, std::vec![(8_000, handover)], RetryPolicy::Backoff);
    s.duration = Duration::from_ms(BOOT_MS + 30_000);
    s.targets[0].capacity = hcabus_lab::srp_target::LoginCapacity::IB_SRPT;
    s.power_on = PowerOnSetup {
        delay: (Duration::ZERO, Duration::from_ms(3_000)),
        firmware: Some(Duration::from_ms(2_000)),
    };
    s.srp_daemon = Some(SrpDaemonSetup {
        rescan: Duration::from_ms(15_000),
    });
    let f = same_on_every_lane_count(&s);
    assert!(f.held(), "{f:?}");
    let (fw, d) = (f.firmware.expect("staged"), f.srp_daemon.expect("on"));
    assert!(fw.logins == 24 && d.rescans > 0, "{fw:?} {d:?}");
}
