//! A fleet powering on host by host: the BMCs' delays, the boot firmware's login before the
//! operating system's, the master's sweeps back to back (`boot.rs`).

use hcabus::{Duration, Instant};
use ibal::retry::RetryPolicy;

use super::{run, setup};
use crate::{FleetFault, FleetSetup, PowerOnSetup};

fn powered(mut s: FleetSetup, delay_ms: (u64, u64), firmware_ms: Option<u64>) -> FleetSetup {
    s.power_on = PowerOnSetup {
        delay: (Duration::from_ms(delay_ms.0), Duration::from_ms(delay_ms.1)),
        firmware: firmware_ms.map(Duration::from_ms),
    };
    s.duration = s.duration + Duration::from_ms(delay_ms.1 + firmware_ms.unwrap_or(0) + 10_000);
    s
}

/// Each host's firmware logs its boot disk in before its operating system does: the
/// targets take a login more a host, and the fleet is back a boot's load later, every host
/// started and nothing lost.
#[test]
fn the_firmware_logs_every_boot_disk_in_before_the_operating_system_does() {
    let at_once = run(&setup(40, std::vec![], RetryPolicy::Backoff));
    let with = run(&powered(
        setup(40, std::vec![], RetryPolicy::Backoff),
        (0, 0),
        Some(5_000),
    ));
    assert!(with.held(), "{with:?}");
    let fw = with.firmware.expect("a staged power-on");
    assert_eq!((fw.logins, fw.boot_failures), (40, 0), "{fw:?}");
    assert_eq!(at_once.firmware, None);
    let accepted =
        |f: &crate::FleetFigures| f.targets.iter().map(|t| t.stats.accepted).sum::<u64>();
    assert_eq!(accepted(&with), accepted(&at_once) + 40);
    let (a, b) = (&at_once.faults[0], &with.faults[0]);
    assert_eq!(
        (b.fault, b.hosts, b.back),
        (FleetFault::PowerOn, 40, 40),
        "{b:?}"
    );
    let (ta, tb) = (
        a.all_back_after.expect("back"),
        b.all_back_after.expect("back"),
    );
    assert!(tb >= ta + Duration::from_ms(5_000), "{ta} then {tb}");
    // The outage runs to the last host's ports Active under its operating system; what is
    // left is that host's own lookup and login.
    let last = fw.last_port_active.expect("every host started");
    assert_eq!(b.outage, last.saturating_since(Instant::ZERO));
    assert!(fw.last_os_start.expect("started") >= Instant::from_ms(5_000));
    assert!(tb >= b.theoretical_min, "{b:?}");
}

/// Hosts whose BMCs wait a random delay come up over its range: the targets see their
/// logins spread (a lower peak a second), and the last host is back after the last delay.
#[test]
fn power_restore_delays_spread_the_logins_over_their_range() {
    let at_once = run(&setup(60, std::vec![], RetryPolicy::Backoff));
    let spread = run(&powered(
        setup(60, std::vec![], RetryPolicy::Backoff),
        (1_000, 15_000),
        None,
    ));
    assert!(spread.held(), "{spread:?}");
    let peak = |f: &crate::FleetFigures| f.targets.iter().map(|t| t.stats.peak_per_second).max();
    assert!(
        peak(&spread) < peak(&at_once),
        "{:?} vs {:?}",
        peak(&spread),
        peak(&at_once)
    );
    let p = &spread.faults[0];
    assert_eq!((p.hosts, p.back), (60, 60), "{p:?}");
    let fw = spread.firmware.expect("staged");
    assert_eq!(
        fw.logins, 0,
        "no firmware of its own: the OS's login is the first"
    );
    let last = fw.last_os_start.expect("every host started");
    assert!(last > Instant::from_ms(10_000) && last <= Instant::from_ms(15_000));
    assert!(p.all_back_after.expect("back") > last.saturating_since(Instant::ZERO));
}

/// Firmware that finds its boot target refusing every try but one a second at the same
/// instants gives up after iPXE's eleven tries: those hosts never start, the power-on is
/// never all back, and the figures say how many.
#[test]
fn firmware_refused_eleven_times_gives_the_boot_up_and_the_figures_say_so() {
    let mut s = powered(
        setup(30, std::vec![], RetryPolicy::Backoff),
        (0, 0),
        Some(1_000),
    );
    // Room for every try: eleven, 5 s apart.
    s.duration = s.duration + Duration::from_ms(60_000);
    for t in &mut s.targets {
        t.capacity.concurrent = 1;
        t.capacity.per_second = 1;
    }
    let f = run(&s);
    let fw = f.firmware.expect("staged");
    // Fifteen hosts a target try within milliseconds of each other every 5 s: at most one
    // gets in each round (fewer where a started host's own logins took the second), and
    // every host that never did tried eleven times.
    assert_eq!(fw.logins + fw.boot_failures, 30, "{fw:?} at {}", f.now);
    assert!(fw.boot_failures > 0 && fw.logins <= 2 * 11, "{fw:?}");
    assert!(fw.retries >= fw.boot_failures * 10, "{fw:?}");
    let p = &f.faults[0];
    assert_eq!(p.back, fw.logins, "{p:?}");
    assert_eq!(p.all_back_after, None, "{p:?}");
    assert!(f.io.lost == 0 && f.violations == 0, "{f:?}");
}

/// Faults that strike while some hosts are still off do not reach them (nothing steps a
/// host before it starts) and every host, on or off then, comes back.
#[test]
fn faults_while_hosts_are_still_off_leave_them_alone() {
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(300),
    };
    let faults = std::vec![(2_000, flap), (6_000, super::restart(0, 500))];
    let s = powered(setup(30, faults, RetryPolicy::Backoff), (0, 12_000), None);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    assert_eq!(f.resets, 0);
    // The power-on waits for every host; the flap and the restart reached the hosts that
    // were up then (some, not all), and each of those came back.
    let power = &f.faults[0];
    assert_eq!((power.hosts, power.back), (30, 30), "{power:?}");
    for r in &f.faults[1..] {
        assert!(r.hosts > 0 && r.hosts < 30 && r.back == r.hosts, "{r:?}");
    }
    let fw = f.firmware.expect("staged");
    assert!(fw.last_os_start.expect("all started") > Instant::from_ms(3_000 + 6_000));
}

/// A rollout that starts while some hosts are still off activates the adapters of those
/// running then and no other (nothing steps a host that is off), and every one of them.
#[test]
fn a_rollout_during_a_staged_power_on_takes_only_the_hosts_that_run() {
    let rollout = FleetFault::Rollout { max_per_target: 2 };
    let mut s = powered(
        setup(10, std::vec![(3_000, rollout)], RetryPolicy::Backoff),
        (0, 20_000),
        None,
    );
    s.host = crate::FleetTemplate::Many(crate::multipath_host(20, 10));
    s.duration = s.duration + Duration::from_ms(120_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = f.rollout.expect("a rollout");
    // Two adapters a host: those of the hosts up at 6 s, fewer than the fleet's twenty.
    assert!(
        r.adapters > 0 && r.adapters < 20 && r.adapters.is_multiple_of(2),
        "{r:?}"
    );
    assert_eq!((r.done, r.failed, r.given_up), (r.adapters, 0, 0), "{r:?}");
    // Each activation is one planned reset; one the last-path guard refused (a host just
    // started, its other path not up yet) was asked again at a later look.
    assert_eq!(f.resets, u64::from(r.adapters + r.vetoed), "{r:?}");
    assert_eq!(f.max_no_path_us, 0, "a boot disk always had a path");
    assert_eq!(f.faults[0].back, 10, "every host started and came up");
}

/// The power-on's outage is the fabric's and the firmware's alone: the same under every
/// retry policy, though the policies' own logins slow the firmware's down differently.
#[test]
fn the_staged_power_on_outage_is_the_same_whatever_the_policy() {
    let outage = |retry| {
        let s = powered(setup(40, std::vec![], retry), (0, 2_000), Some(3_000));
        let f = run(&s);
        assert!(f.held(), "{f:?}");
        (f.faults[0].outage, f.faults[0].all_back_after)
    };
    let (a, back_a) = outage(RetryPolicy::Backoff);
    let fixed = hcabus_lab::baselines::fixed(Duration::from_ms(10_000));
    let (b, back_b) = outage(fixed);
    assert_eq!(a, b);
    assert!(back_a.expect("back") >= a && back_b.expect("back") >= b);
}
