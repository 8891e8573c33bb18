//! The fleet: hosts in one virtual time sharing targets, their faults and their figures.

use std::vec::Vec;

use hcabus::{Duration, Instant};

use super::*;
use hcabus_lab::srp_target::LoginCapacity;
use hcabus_lab::stack::ClientSpec;

const LOGIN: Duration = Duration::from_ms(20);

/// `hosts` default boot hosts at a light load on two targets that take 4 logins at a time
/// and 100 a second; `faults` at their instants; 6 s.
/// How long a test fleet takes to power on before its faults: every port trains (1.5 s) and
/// is swept (500 ms, 2 ms a host further), then the disks log in. A test's fault at `ms`
/// strikes at `BOOT_MS + ms`, once the fleet is up, and its run is that much longer.
pub(super) const BOOT_MS: u64 = 3_000;

pub(super) fn setup(hosts: u32, faults: Vec<(u64, FleetFault)>, retry: RetryPolicy) -> FleetSetup {
    let mut host = boot_host(20, 10);
    for c in &mut host.clients {
        if let ClientSpec::Disk { config, .. } = c {
            config.route = config.route.with_login(LOGIN);
        }
    }
    let capacity = LoginCapacity {
        concurrent: 4,
        per_second: 100,
        queue: false,
    };
    FleetSetup {
        name: "fleet".into(),
        seed: 5,
        duration: Duration::from_ms(BOOT_MS + 6_000),
        hosts,
        host: FleetTemplate::One(host),
        targets: std::vec![
            TargetSetup {
                lid: 0x100,
                capacity
            },
            TargetSetup {
                lid: 0x101,
                capacity
            },
        ],
        faults: faults
            .into_iter()
            .map(|(ms, f)| (Instant::from_ms(BOOT_MS + ms), f))
            .collect(),
        retry,
        sm: SmSetup::default(),
        hosts_per_leaf: 20,
        naive_ipoib: false,
        power_on: PowerOnSetup::default(),
        srp_daemon: None,
        linux: None,
    }
}

pub(super) fn restart(target: usize, down_ms: u64) -> FleetFault {
    FleetFault::TargetRestart {
        target,
        down: Duration::from_ms(down_ms),
    }
}

pub(super) fn run(setup: &FleetSetup) -> FleetFigures {
    let mut fleet = Fleet::build(setup).expect("builds");
    fleet.run();
    fleet.figures()
}

/// Every host's boot disk and data LUN are on the two targets, one each: a restart of one
/// takes a path from every host. Every one is back, the target never let more in than its
/// capacity, no adapter was reset and nothing was lost.
#[test]
fn a_target_restart_takes_a_path_from_every_host_and_gives_it_back() {
    let f = run(&setup(
        30,
        std::vec![(2_000, restart(0, 500))],
        RetryPolicy::Backoff,
    ));
    assert!(f.held(), "{f:?}");
    assert_eq!((f.resets, f.io.failed, f.io.paging_failed), (0, 0, 0));
    let boot = &f.faults[0];
    assert_eq!(
        (boot.fault, boot.hosts, boot.back),
        (FleetFault::PowerOn, 30, 30)
    );
    let r = &f.faults[1];
    assert_eq!((r.hosts, r.back), (30, 30), "{r:?}");
    // 30 logins, 4 at a time for 20 ms: 7 rounds before the last, after 500 ms down. The
    // path of each disk is kept across a target's restart: no PathRecord before a login.
    assert_eq!(r.outage, Duration::from_ms(500));
    assert_eq!(r.controlled_min, Duration::from_ms(7 * 20 + 20));
    assert_eq!(r.theoretical_min, Duration::from_ms(500 + 7 * 20 + 20));
    let all = r.all_back_after.expect("every host back");
    let excess = all.as_us() as i64 - r.theoretical_min.as_us() as i64;
    assert_eq!(r.excess_us(), Some(excess));
    // The policy's part over its least excludes the 500 ms it had no say in.
    let ratio = (all.as_us() - 500_000) as f64 / 160_000.0;
    assert_eq!(r.controlled_over_min(), Some(ratio));
    // None is back before the target is: each logged in again after its 500 ms.
    assert!(r.back_after[0] >= Duration::from_ms(500), "{r:?}");
    assert!(all >= r.theoretical_min, "{r:?}");
    assert!(r.p50 <= r.p99 && r.p99 <= Some(all), "{r:?}");
    assert_eq!(r.back_after.len(), 30);
    let t = &f.targets[0].stats;
    assert_eq!(t.restarts, 1);
    assert!(t.refused_down > 0, "{t:?}");
    assert!(t.peak_per_second <= 100, "{t:?}");
    // Each host logged in twice to each target: at start, and target 0 again.
    assert_eq!((t.accepted, f.targets[1].stats.accepted), (60, 30));
    let refused =
        |t: &TargetFigures| t.stats.refused_busy + t.stats.refused_rate + t.stats.refused_down;
    assert_eq!(
        f.logins_refused(),
        f.targets.iter().map(refused).sum::<u64>()
    );
    assert!(
        f.logins_refused() > t.refused_down,
        "busy refusals too at the boot"
    );
    assert!(f.io.completed > 0);
}

/// One seed, one run: two builds of a setup give the same figures to the microsecond.
#[test]
fn a_fleet_is_deterministic_for_a_seed() {
    let s = setup(
        12,
        std::vec![(1_500, restart(1, 300))],
        RetryPolicy::Backoff,
    );
    let a = run(&s);
    assert_eq!(a, run(&s));
    let other = run(&FleetSetup { seed: 6, ..s });
    assert_ne!(a.faults[1].back_after, other.faults[1].back_after);
}

/// A restart's REQs go unanswered while the target is down, and each CM sends its own again
/// at its timeout (2.3 s): the hosts that come back together find the target taking 4 at a
/// time, and those it refuses as busy retry under their policy. Every host lost its
/// connection at the same instant, so their REQs go out again together: under the fixed
/// 10 s of NVMe-oF the refused ones come back in lock-step, four every 10 s; under the
/// shipped backoff every host is back within 3 s of the restart.
#[test]
fn a_fixed_ten_second_retry_keeps_hosts_out_for_ten_seconds_and_more() {
    let faults = || std::vec![(25_000, restart(0, 500))];
    let fixed = hcabus_lab::baselines::fixed(Duration::from_ms(10_000));
    let mut s = setup(20, faults(), fixed);
    s.duration = Duration::from_ms(BOOT_MS + 75_000);
    let slow = run(&s);
    let fast = run(&FleetSetup {
        retry: RetryPolicy::Backoff,
        ..s
    });
    assert_eq!(slow.retry, fixed);
    let (slow_r, fast_r) = (&slow.faults[1], &fast.faults[1]);
    let slow_all = slow_r
        .all_back_after
        .unwrap_or_else(|| panic!("{slow_r:?}"));
    let fast_all = fast_r.all_back_after.expect("back");
    assert!(slow_all >= Duration::from_ms(10_000), "{slow_r:?}");
    assert!(fast_all < Duration::from_ms(3_000), "{fast_r:?}");
    // None of either is back before its CM's first timeout: the target's return is
    // learned from the REQ sent again.
    for r in [slow_r, fast_r] {
        assert!(r.back_after[0] >= ibal::disk::REQ_TIMEOUT, "{r:?}");
    }
    assert!(slow.held() && fast.held());
    assert!(slow.targets[0].stats.refused_busy > 0);
}

/// A core switch reboots: every port of every host is down for 300 ms, then trains and is
/// swept. Every disk logs in again and every interface is back, with no adapter reset.
#[test]
fn a_link_flap_takes_every_path_and_every_host_gets_them_back() {
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(300),
    };
    let f = run(&setup(8, std::vec![(1_000, flap)], RetryPolicy::Backoff));
    assert!(f.held(), "{f:?}");
    assert_eq!(f.resets, 0);
    let r = &f.faults[1];
    assert_eq!((r.hosts, r.back), (8, 8), "{r:?}");
    // Down 300 ms, 1.5 s of training and the sweep's 500 ms before the first host's port
    // is Active, and 2 ms more for each host after it in the sweep: the outage.
    assert_eq!(
        r.outage,
        Duration::from_ms(300 + 1_500 + 500 + 7 * 2),
        "{r:?}"
    );
    // A link lost is a path forgotten: the logins wait for the first PathRecord answer
    // (1 us received, 10 us served), then 8 logins a target take 4 at a time for 20 ms;
    // the 14 ms of the sweep's spread, in the outage, already let them begin.
    assert_eq!(
        r.controlled_min,
        Duration::from_us(11 + 20_000 + 20_000 - 14_000)
    );
    assert!(r.all_back_after >= Some(r.theoretical_min), "{r:?}");
    assert!(r.controlled_over_min() >= Some(1.0), "{r:?}");
}

/// Hosts with nothing to do cost nearly nothing: the fleet steps a host only when it has
/// something due (here its health poll, once a second), however many there are.
#[test]
fn hosts_that_idle_cost_nothing_between_what_they_have_due() {
    let mut s = setup(50, Vec::new(), RetryPolicy::Backoff);
    let mut idle = boot_host(0, 0);
    idle.clients
        .retain(|c| matches!(c, ClientSpec::Disk { .. }));
    s.host = FleetTemplate::One(idle);
    s.duration = Duration::from_ms(BOOT_MS + 60_000);
    let f = run(&s);
    assert!(f.held());
    // Start-up (logins, the ports' sweep) and then about one step a second each.
    let per_host = f.steps / 50;
    assert!((60..200).contains(&per_host), "{} steps", f.steps);
}

#[test]
fn a_fleet_that_cannot_be_is_refused_by_key() {
    let ok = setup(2, std::vec![(1_000, restart(0, 10))], RetryPolicy::Backoff);
    let refused = |s: FleetSetup| Fleet::build(&s).expect_err("refused").to_string();
    assert!(refused(FleetSetup {
        hosts: 0,
        ..ok.clone()
    })
    .starts_with("hosts"));
    assert!(refused(FleetSetup {
        hosts: MAX_HOSTS + 1,
        ..ok.clone()
    })
    .starts_with("hosts"));
    let mut s = ok.clone();
    s.targets.clear();
    assert!(refused(s).starts_with("targets"));
    let mut s = ok.clone();
    s.targets[1].lid = 0x100;
    assert!(refused(s).starts_with("targets[1].lid"));
    let mut s = ok.clone();
    s.targets[0].capacity.concurrent = 0;
    assert!(refused(s).contains("login_concurrency"));
    let mut s = ok.clone();
    s.faults[0].1 = restart(2, 10);
    assert!(refused(s).starts_with("faults[0].target"));
    let mut s = ok.clone();
    s.faults[0].0 = Instant::from_ms(BOOT_MS + 7_000);
    assert!(refused(s).starts_with("faults[0].at_ms"));
    let mut s = ok;
    let mut diskless = boot_host(2, 1);
    diskless
        .clients
        .retain(|c| !matches!(c, ClientSpec::Disk { .. }));
    s.host = FleetTemplate::One(diskless);
    assert!(refused(s).starts_with("host"));
}

/// A fault that strikes while the disks still make their first login takes nothing from
/// them: the hosts' boot is the power-on's to count. A fault that touched no host had no
/// host to recover: it is listed, with no time back and no ratio (not "back at once", below
/// its own outage).
#[test]
fn a_fault_during_the_boot_takes_no_path_that_was_not_up() {
    let mut s = setup(6, std::vec![(0, restart(0, 100))], RetryPolicy::Backoff);
    // At 2.1 s: the ports are Active (trained and swept), the disks still logging in.
    s.faults[0].0 = Instant::from_ms(2_010);
    let f = run(&s);
    let (boot, r) = (&f.faults[0], &f.faults[1]);
    assert_eq!((boot.hosts, boot.back), (6, 6));
    assert_eq!((r.hosts, r.back, r.all_back_after), (0, 0, None));
    assert!(r.no_host() && !boot.no_host());
    assert_eq!((r.over_min(), r.p50, r.p99), (None, None, None));
    assert!(f.held());
}

/// Every fault the file names is in the report, in order: an SA overload (which takes no
/// path) and a restart of a target no disk uses are listed with no host to recover.
#[test]
fn a_fault_with_no_host_to_recover_is_listed_with_no_ratio() {
    // One host: its two disks are on targets 0 and 1 (`(i + k) % targets`), none on 2.
    let mut s = setup(
        1,
        std::vec![
            (
                1_000,
                FleetFault::SaOverload {
                    down: Duration::from_ms(500)
                }
            ),
            (2_000, restart(2, 500)),
        ],
        RetryPolicy::Backoff,
    );
    s.targets.push(TargetSetup {
        lid: 0x102,
        capacity: s.targets[0].capacity,
    });
    let f = run(&s);
    let names: Vec<&str> = f.faults.iter().map(|r| r.fault.name()).collect();
    assert_eq!(names, ["power_on", "sa_overload", "target_restart"]);
    for r in &f.faults[1..] {
        assert_eq!(
            (r.hosts, r.back, r.all_back_after, r.over_min(), r.p50),
            (0, 0, None, None, None),
            "{r:?}"
        );
        assert!(r.no_host());
    }
    assert!(f.faults[0].over_min().is_some(), "the boot had hosts");
    assert!(f.held());
}

/// Multipath hosts (two adapters, the boot disk on a path through each, on one target):
/// a target restart takes every path of the boot disk and the data LUN's; each path logs in
/// again and every host is back, nothing lost, no adapter reset.
#[test]
fn multipath_hosts_ride_a_target_restart_on_every_path() {
    let mut s = setup(
        10,
        std::vec![(2_000, restart(0, 300))],
        RetryPolicy::Backoff,
    );
    let mut m = multipath_host(20, 10);
    for a in &mut m.adapters {
        for c in &mut a.stack.clients {
            match c {
                ClientSpec::Disk { config, .. } => config.route = config.route.with_login(LOGIN),
                ClientSpec::DiskPath { config, .. } => {
                    config.route = config.route.with_login(LOGIN)
                }
                _ => {}
            }
        }
    }
    s.host = FleetTemplate::Many(m);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    assert_eq!(f.resets, 0);
    let r = &f.faults[1];
    // Node i's boot disk is on target i % 2, its data LUN on the other: all ten lost one.
    assert_eq!((r.hosts, r.back), (10, 10), "{r:?}");
    // Target 0 holds five boot disks' two paths each and five data LUNs.
    assert_eq!(f.targets[0].stats.accepted, 2 * (5 * 2 + 5));
    assert!(f.io.completed > 0 && f.io.failed == 0);
}

/// A rolling firmware rollout across ten multipath hosts, at most two adapters in reset at
/// once among those of a target: every adapter activates its new firmware, one adapter of a
/// host at a time, and no boot disk is ever without a path.
#[test]
fn a_rollout_activates_every_adapter_within_the_limit_and_no_boot_disk_loses_its_last_path() {
    let rollout = FleetFault::Rollout { max_per_target: 2 };
    let mut s = setup(10, std::vec![(2_000, rollout)], RetryPolicy::Backoff);
    s.host = FleetTemplate::Many(multipath_host(20, 10));
    s.duration = Duration::from_ms(BOOT_MS + 120_000);
    let mut fleet = Fleet::build(&s).expect("builds");
    let fw_before: Vec<u64> = fleet.hosts()[0]
        .adapters()
        .iter()
        .map(|h| h.hca().current_identity().fw_version)
        .collect();
    fleet.run();
    let f = fleet.figures();
    assert!(f.held(), "{f:?}");
    let r = f.rollout.expect("a rollout");
    assert_eq!(
        (r.adapters, r.done, r.failed, r.given_up),
        (20, 20, 0, 0),
        "{r:?}"
    );
    assert!(r.finished_at.is_some(), "{r:?}");
    assert!((1..=2).contains(&r.peak_per_target), "{r:?}");
    assert_eq!(f.resets, 20, "one activation an adapter");
    assert_eq!(f.max_no_path_us, 0, "a boot disk always had a path");
    assert_eq!((f.io.failed, f.io.paging_failed), (0, 0));
    for host in fleet.hosts() {
        for (a, h) in host.adapters().iter().enumerate() {
            assert_eq!(h.hca().current_identity().fw_version, fw_before[a] + 1);
        }
    }
}

#[test]
fn a_rollout_of_hosts_of_one_adapter_is_refused() {
    let rollout = FleetFault::Rollout { max_per_target: 2 };
    let s = setup(2, std::vec![(1_000, rollout)], RetryPolicy::Backoff);
    let e = Fleet::build(&s).expect_err("the guard would refuse every activation");
    assert!(e.to_string().contains("last-path guard"), "{e}");
}

/// A fleet run in pieces is the run in one: stepping to intermediate instants changes
/// nothing, and each piece stops at its instant, no fault or host step past it.
#[test]
fn a_fleet_run_in_pieces_is_the_same_run_and_stops_where_it_is_told() {
    let s = setup(8, std::vec![(2_000, restart(0, 300))], RetryPolicy::Backoff);
    let whole = run(&s);
    let mut fleet = Fleet::build(&s).expect("builds");
    let t = |ms: u64| Instant::from_ms(BOOT_MS + ms);
    fleet.run_until(t(1_000));
    assert_eq!(fleet.now(), t(1_000));
    let early = fleet.figures();
    assert_eq!(early.faults.len(), 1, "the restart at 2 s has not happened");
    assert_eq!(early.targets[0].stats.restarts, 0);
    assert!(early.steps > 0 && early.steps < whole.steps);
    assert!(fleet
        .hosts()
        .iter()
        .all(|h| h.adapters()[0].now() <= t(1_000)));
    for ms in [1_500, 2_000, 2_001, 4_000] {
        fleet.run_until(t(ms));
    }
    fleet.run();
    assert_eq!(fleet.figures(), whole);
    assert_eq!(fleet.end(), t(6_000));
    assert_eq!((fleet.name(), fleet.seed()), ("fleet", 5));
    assert_eq!(fleet.retry(), RetryPolicy::Backoff);
    assert_eq!(fleet.targets().len(), 2);
    assert_eq!(fleet.hosts()[3].name(), "host3");
    assert_eq!(fleet.hosts()[3].adapter_count(), 1);
    assert_eq!(fleet.subnet().reregister_sweeps(), 0);
    // The figures' own arithmetic.
    let r = &whole.faults[1];
    let over = r.over_min().expect("all back");
    let want =
        r.all_back_after.expect("all back").as_us() as f64 / r.theoretical_min.as_us() as f64;
    assert!((over - want).abs() < 1e-12 && over >= 1.0, "{over} {want}");
    assert_eq!(whole.retry.name(), "backoff");
    assert_eq!(hcabus_lab::baselines::NO_JITTER.name(), "no_jitter");
    assert_eq!(
        hcabus_lab::baselines::fixed(Duration::from_ms(1)).name(),
        "fixed"
    );
    let names: Vec<&str> = whole.faults.iter().map(|f| f.fault.name()).collect();
    assert_eq!(names, ["power_on", "target_restart"]);
}

/// A run holds only if every guarantee does: one lost, duplicated or mismatched I/O, one
/// paging I/O failed, one violation, or an accounting that does not close, and it does not.
#[test]
fn a_run_holds_only_if_every_guarantee_does() {
    let f = run(&setup(2, Vec::new(), RetryPolicy::Backoff));
    assert!(f.held());
    let broken = |change: &dyn Fn(&mut FleetFigures)| {
        let mut g = f.clone();
        change(&mut g);
        g.held()
    };
    assert!(!broken(&|g| g.io.lost += 1));
    assert!(!broken(&|g| g.io.duplicated += 1));
    assert!(!broken(&|g| g.io.read_mismatches += 1));
    assert!(!broken(&|g| g.io.paging_failed += 1));
    assert!(!broken(&|g| g.violations += 1));
    assert!(!broken(&|g| g.io.submitted += 1));
    let mut g = f.clone();
    g.targets[0].stats.refused_busy = 1;
    g.targets[0].stats.refused_rate = 2;
    g.targets[0].stats.refused_down = 4;
    g.targets[1].stats.refused_busy = 8;
    g.targets[1].stats.refused_rate = 0;
    g.targets[1].stats.refused_down = 0;
    assert_eq!(g.logins_refused(), 15);
    // A failed I/O, counted as such, breaks nothing: the accounting still closes.
    assert!(broken(&|g| {
        g.io.submitted += 1;
        g.io.failed += 1;
    }));
}

/// A fault due after the instant a run is told to stop at stays for later, even when no host
/// has anything due before it: idle hosts (their health poll once a second) and a fault at
/// 1.5 s, a run to 1.2 s.
#[test]
fn a_fault_past_the_instant_asked_for_waits_even_with_every_host_idle() {
    let mut s = setup(3, std::vec![(1_500, restart(0, 10))], RetryPolicy::Backoff);
    let mut idle = boot_host(0, 0);
    idle.clients
        .retain(|c| matches!(c, ClientSpec::Disk { .. }));
    s.host = FleetTemplate::One(idle);
    let mut fleet = Fleet::build(&s).expect("builds");
    fleet.run_until(Instant::from_ms(BOOT_MS + 1_200));
    assert_eq!(fleet.now(), Instant::from_ms(BOOT_MS + 1_200));
    assert_eq!(fleet.targets()[0].1.lock().restarts(), 0);
    fleet.run_until(Instant::from_ms(BOOT_MS + 1_500));
    assert_eq!(fleet.targets()[0].1.lock().restarts(), 1);
    assert_eq!(fleet.steps(), fleet.figures().steps);
}

/// Each host draws from a stream of its own, none the fleet's own seed.
#[test]
fn every_host_has_a_seed_of_its_own() {
    let seeds: std::collections::BTreeSet<u64> = (0..1_000).map(|i| host_seed(7, i)).collect();
    assert_eq!(seeds.len(), 1_000);
    assert!(!seeds.contains(&7));
}

/// The power-on, which every fleet starts with, is not a fault a setup may give (the steps
/// a fault leads to, a failover's reregister and a rollout's looks, are not faults at all),
/// and one rollout a run.
#[test]
fn faults_the_fleet_makes_itself_are_refused_from_a_setup() {
    let s = setup(
        1,
        std::vec![(1_000, FleetFault::PowerOn)],
        RetryPolicy::Backoff,
    );
    let e = Fleet::build(&s).expect_err("refused");
    assert!(e.to_string().starts_with("faults[0]"), "{e}");
    let rollout = FleetFault::Rollout { max_per_target: 1 };
    let mut s = setup(
        1,
        std::vec![(1_000, rollout), (2_000, rollout)],
        RetryPolicy::Backoff,
    );
    s.host = FleetTemplate::Many(multipath_host(2, 1));
    let e = Fleet::build(&s).expect_err("one rollout");
    assert!(e.to_string().starts_with("faults[1]"), "{e}");
    s.faults.truncate(1);
    s.faults[0].1 = FleetFault::Rollout { max_per_target: 0 };
    assert!(Fleet::build(&s).is_err());
}

/// On Linux targets (one login at a time, none refused) a restart's logins queue: no
/// refusal, every host back once the target has served them in turn, and no sooner than
/// their count at a login's time each.
#[test]
fn a_restart_of_a_linux_target_queues_every_login_and_refuses_none() {
    let mut s = setup(
        30,
        std::vec![(2_000, restart(0, 500))],
        RetryPolicy::Backoff,
    );
    for t in &mut s.targets {
        t.capacity = LoginCapacity::IB_SRPT;
    }
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let busy: u64 = f
        .targets
        .iter()
        .map(|t| t.stats.refused_busy + t.stats.refused_rate)
        .sum();
    assert_eq!(busy, 0, "{:?}", f.targets);
    let r = &f.faults[1];
    assert_eq!((r.hosts, r.back), (30, 30), "{r:?}");
    // Thirty logins of 20 ms one after another after 500 ms down.
    assert_eq!(r.controlled_min, Duration::from_ms(30 * 20));
    assert!(r.all_back_after.expect("back") >= Duration::from_ms(500 + 30 * 20));
    let t = &f.targets[0].stats;
    assert!(t.queued > 0 && t.peak_per_second <= 50, "{t:?}");
    assert_eq!(f.logins_answered_late, 0);
}

mod lanes;
mod leaf;
mod linux;
mod power;
mod ride;
mod subnet;
mod traps;

/// The operator's question of a target restart: how long did a host's paging I/O wait? Its
/// boot disk's I/O waits out the restart (held, then answered after the login again): a
/// restart of 2 s stalls paging about that long, one of 25 s passes MPIO's PDORemovePeriod
/// on every host whose boot disk is on that target, and none past the disk timeout.
#[test]
fn a_target_restart_stalls_the_paging_io_of_the_hosts_booted_from_it_and_says_how_long() {
    let stall = |down_ms: u64| {
        let mut s = setup(
            10,
            std::vec![(2_000, restart(0, down_ms))],
            RetryPolicy::Backoff,
        );
        s.duration = Duration::from_ms(BOOT_MS + 2_000 + down_ms + 10_000);
        let f = run(&s);
        assert!(f.held(), "{f:?}");
        f
    };
    let (short, long) = (stall(2_000), stall(25_000));
    // Disk 0 of host i (its boot disk) is on target i % 2: five hosts boot from target 0.
    assert!(
        short.paging_stall[2] >= Duration::from_ms(2_000),
        "{short:?}"
    );
    assert!(
        short.paging_stall[2] < Duration::from_ms(20_000),
        "{short:?}"
    );
    assert_eq!(short.paging_over_pdo_remove, 0);
    assert!(
        long.paging_stall[2] >= Duration::from_ms(25_000),
        "{long:?}"
    );
    assert_eq!(
        (long.paging_over_pdo_remove, long.paging_over_disk_timeout),
        (5, 0)
    );
    // The hosts booted from the other target never waited that long.
    assert!(long.paging_stall[0] < Duration::from_ms(20_000), "{long:?}");
}

/// How long multicast was broken: a link flap takes every interface, and each is back only
/// once its link is up and its groups joined again through the SA; a target restart takes
/// no interface.
#[test]
fn a_link_flap_breaks_multicast_until_every_interface_joined_again() {
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(300),
    };
    let f = run(&setup(
        8,
        std::vec![(1_000, flap), (3_000, restart(1, 500))],
        RetryPolicy::Backoff,
    ));
    assert!(f.held(), "{f:?}");
    let r = &f.faults[1];
    assert_eq!(r.multicast_hosts, 8, "{r:?}");
    // Down 300 ms, trained and swept (3.5 s) before any interface can join.
    let max = r.multicast_max.expect("every interface joined again");
    assert!(max >= r.outage, "{r:?}");
    assert!(r.multicast_p99 <= Some(max));
    // Multicast is back no later than the whole host (its disks too).
    assert!(Some(max) <= r.all_back_after, "{r:?}");
    let t = &f.faults[2];
    assert_eq!((t.multicast_hosts, t.multicast_max), (0, None), "{t:?}");
}
