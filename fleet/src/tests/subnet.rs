//! The subnet manager and its SA as the fleet's hosts meet them: failovers, the reset-storm
//! cascade, an SA that answers nothing, the PathRecord each login asks for.

use std::vec::Vec;

use hcabus::Duration;

use super::super::*;
use super::{restart, run, setup, BOOT_MS};

/// The master subnet manager fails at 5 s: the standby's polls at 10 to 50 s go unanswered,
/// it takes over at the tick of 60 s and sweeps (500 ms and 2 ms a host), then sets
/// ClientReregister. Every interface joins its groups again through the SA; no adapter is
/// reset, no disk loses its path.
#[test]
fn a_subnet_manager_failover_brings_every_interface_back_through_the_sa() {
    let mut s = setup(
        20,
        std::vec![(5_000, FleetFault::SmFailover)],
        RetryPolicy::Backoff,
    );
    s.duration = Duration::from_ms(BOOT_MS + 70_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = &f.faults[1];
    assert_eq!(
        (r.fault, r.hosts, r.back),
        (FleetFault::SmFailover, 20, 20),
        "{r:?}"
    );
    // Down from the failure to the sweep's end at 60.54 s (the takeover at the tick of
    // 60 s, 500 ms and 2 ms a host): the outage, which no policy changes. Then 160 joins
    // at the SA: the first received (1 us) and served (10 us), the other 159 served in
    // turn, 10 us each.
    assert_eq!(r.outage, Duration::from_ms(60_540 - (BOOT_MS + 5_000)));
    assert_eq!(r.controlled_min, Duration::from_us(1 + 160 * 10));
    assert_eq!(r.theoretical_min, r.outage + r.controlled_min);
    assert!(r.all_back_after >= Some(r.theoretical_min), "{r:?}");
    // ClientReregister reaches host i's ports in the sweep, 2 ms a host past its base, each
    // before the SA answers (it ignores every query until the first sweep is over): every
    // interface's first joins go into silence, seen at once and sent at once, and are sent
    // again after their timeout (1 s) and the backoff (1 to 1.5 s).
    assert_eq!(f.sa.dropped_away, 2 * 20 * 4, "{:?}", f.sa);
    let (early, late) = (Duration::from_ms(1_960), Duration::from_ms(2_500));
    assert!(r.back_after.iter().all(|b| *b > r.outage + early), "{r:?}");
    assert!(r.all_back_after < Some(r.outage + late), "{r:?}");
    assert_eq!((f.resets, f.ipoib_resets_asked), (0, 0));
    // Each host's two interfaces joined their broadcast group, two groups and a path: at
    // power-on and again after the reregister; and each login of a disk asked for its path
    // first, once a host's two disks at power-on and again each time a target refused it.
    let joins = 2 * 20 * 2 * 4;
    let p = f.path_records;
    assert!(p.queries >= 2 * 20 && p.failed == 0, "{p:?}");
    assert_eq!(
        (f.sa.answered, f.sa.late, f.sa_queued),
        (joins + p.queries, 0, 0)
    );
    assert_eq!(f.io.failed, 0);
}

/// The reset-storm cascade: an SA that serves 20 queries a second against 160 that the
/// reregister asks for at once. The naive interface takes its first timeout for a hung
/// adapter and has it reset; each reset makes it join again, into the same SA. The shipped
/// interface retries under its backoff, whose 16 s cap brings the fabric's demand under
/// what the SA serves: every host back (some 80 s after the failover: the SA spent most of
/// it on late answers), no reset, no paging I/O failed.
#[test]
fn an_sa_timeout_taken_for_a_hung_adapter_resets_adapters_and_the_shipped_interface_never_does() {
    let mut s = setup(
        20,
        std::vec![(5_000, FleetFault::SmFailover)],
        RetryPolicy::Backoff,
    );
    s.duration = Duration::from_ms(BOOT_MS + 180_000);
    s.sm.sa.queries_per_second = 20;
    let shipped = run(&s);
    let naive = run(&FleetSetup {
        naive_ipoib: true,
        ..s
    });
    assert!(shipped.held(), "{shipped:?}");
    assert_eq!((shipped.resets, shipped.ipoib_resets_asked), (0, 0));
    assert!(shipped.sa_timeouts > 0, "the SA fell behind");
    // Behind, it served answers nobody waited for any more: each a query's worth of its
    // time lost, until the interfaces' backoff asked less than it serves.
    assert!(shipped.sa.late > shipped.sa.answered, "{:?}", shipped.sa);
    let r = &shipped.faults[1];
    assert_eq!((r.hosts, r.back), (20, 20), "{r:?}");
    assert!(naive.naive_ipoib);
    assert!(
        naive.ipoib_resets_asked > 0 && naive.resets > 0,
        "{naive:?}"
    );
    assert!(
        naive.resets > 20,
        "more resets than hosts: a storm: {}",
        naive.resets
    );
}

/// A link flap while no master is up: the ports train, but nobody sweeps them until the
/// standby has taken over and swept, 50 s later. Every host waits, and every host is back
/// then. The boot disks hold their paging I/O throughout; the data LUNs' hold (30 s) runs out
/// first, and they fail what they hold upward as retryable.
#[test]
fn ports_that_train_while_no_master_is_up_wait_for_the_new_one() {
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(300),
    };
    let faults = std::vec![(5_000, FleetFault::SmFailover), (10_000, flap)];
    let mut s = setup(10, faults, RetryPolicy::Backoff);
    s.duration = Duration::from_ms(BOOT_MS + 70_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = f.faults.iter().find(|r| r.fault == flap).expect("the flap");
    assert_eq!((r.hosts, r.back), (10, 10), "{r:?}");
    // The sweep ends at 60.52 s (500 ms and 2 ms a host after the takeover at 60 s).
    let swept_after = Duration::from_ms(60_520 - (BOOT_MS + 10_000));
    assert!(r.all_back_after >= Some(swept_after), "{r:?}");
    assert_eq!((f.resets, f.io.paging_failed), (0, 0));
    assert!(
        f.io.failed > 0 && f.io.failed == f.io.retryable,
        "{:?}",
        f.io
    );
}

/// What one host asks of the SA is every interface's groups and path: the failover's
/// minimum counts them (two interfaces, two extra groups each: 8 queries a host).
#[test]
fn a_failovers_minimum_counts_every_interfaces_queries() {
    let mut s = setup(
        250,
        std::vec![(5_000, FleetFault::SmFailover)],
        RetryPolicy::Backoff,
    );
    s.duration = Duration::from_ms(BOOT_MS + 6_000);
    s.sm.sa.queries_per_second = 100;
    let f = run(&s);
    let r = &f.faults[1];
    // 2,000 queries at 100 a second, 10 ms each in turn after the first's receive (1 us);
    // the sweep ends at 61 s (the takeover at 60 s, 500 ms and 2 ms a host).
    let swept = Duration::from_us((60_000 - BOOT_MS - 5_000) * 1_000 + 500_000 + 250 * 2_000);
    assert_eq!(
        (r.outage, r.controlled_min),
        (swept, Duration::from_us(1 + 20_000_000))
    );
}

/// An SA overloaded from the start answers none of the power-on's joins for 3 s: every
/// interface times out and retries, and every host is back once the SA answers again, with
/// no adapter reset; the naive interface has its adapter reset instead.
#[test]
fn an_sa_that_answers_nothing_delays_the_joins_and_resets_nothing() {
    let overload = FleetFault::SaOverload {
        down: Duration::from_ms(3_000),
    };
    let mut s = setup(10, std::vec![(0, overload)], RetryPolicy::Backoff);
    // From the power-on itself.
    s.faults[0].0 = hcabus::Instant::ZERO;
    s.duration = Duration::from_ms(BOOT_MS + 12_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let boot = &f.faults[0];
    assert_eq!((boot.hosts, boot.back), (10, 10));
    assert!(
        boot.all_back_after >= Some(Duration::from_ms(3_000)),
        "{boot:?}"
    );
    assert_eq!((f.resets, f.ipoib_resets_asked), (0, 0));
    assert!(f.sa_timeouts > 0 && f.sa.dropped_away > 0, "{:?}", f.sa);
    assert_eq!(f.faults.len(), 2, "the boot, and the overload's own row");
    assert!(f.faults[1].no_host(), "an overload takes no path by itself");
    let naive = run(&FleetSetup {
        naive_ipoib: true,
        ..s
    });
    assert!(naive.resets > 0 && naive.ipoib_resets_asked > 0);
}

/// A subnet manager of higher priority comes up at 5 s: the master hands over at once, and
/// the new one sweeps (500 ms and 2 ms a host) and sets ClientReregister port by port, the
/// SA silent until its sweep is over. Every interface joins again as after a failover, but
/// the minute of the standby's polls is not there: back within three seconds, not sixty.
#[test]
fn a_priority_handover_is_a_new_masters_sweep_without_the_standbys_minute() {
    let mut s = setup(
        20,
        std::vec![(
            5_000,
            FleetFault::SmHandover {
                reassign_lids: false
            }
        )],
        RetryPolicy::Backoff,
    );
    s.duration = Duration::from_ms(BOOT_MS + 10_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = &f.faults[1];
    assert_eq!(
        (r.fault.name(), r.hosts, r.back),
        ("sm_handover", 20, 20),
        "{r:?}"
    );
    assert_eq!(r.outage, Duration::from_ms(540));
    assert!(r.all_back_after < Some(Duration::from_ms(3_100)), "{r:?}");
    // The joins the reregister set off in the sweep went into its silence, as a failover's.
    assert_eq!(f.sa.dropped_away, 2 * 20 * 4, "{:?}", f.sa);
    assert_eq!((f.resets, f.io.failed), (0, 0));
}

/// The same handover by a master that reassigns LIDs: every port gets a new LID in the
/// sweep, with its ClientReregister, and every connection made under the old one is gone.
/// Each disk logs in again at once, through a PathRecord the SA answers only after the
/// sweep: each target takes a login a host more than under the handover that keeps them,
/// every host is back, and its least counts those logins.
#[test]
fn a_handover_that_reassigns_lids_logs_every_disk_in_again() {
    let run_with = |reassign_lids| {
        let handover = FleetFault::SmHandover { reassign_lids };
        let mut s = setup(20, std::vec![(5_000, handover)], RetryPolicy::Backoff);
        s.duration = Duration::from_ms(BOOT_MS + 10_000);
        run(&s)
    };
    let (moved, kept) = (run_with(true), run_with(false));
    for f in [&moved, &kept] {
        assert!(f.held(), "{f:?}");
        assert_eq!((f.resets, f.io.failed, f.io.lost), (0, 0, 0));
        assert_eq!((f.faults[1].hosts, f.faults[1].back), (20, 20), "{f:?}");
    }
    let accepted =
        |f: &FleetFigures| -> Vec<u64> { f.targets.iter().map(|t| t.stats.accepted).collect() };
    assert_eq!(accepted(&kept), std::vec![20, 20], "the boot's logins only");
    assert_eq!(accepted(&moved), std::vec![40, 40], "every disk again");
    let (m, k) = (&moved.faults[1], &kept.faults[1]);
    assert_eq!(m.outage, k.outage, "the same sweep");
    assert!(m.controlled_min > k.controlled_min, "{m:?} {k:?}");
    assert!(m.controlled_over_min() >= Some(1.0), "{m:?}");
    assert!(m.all_back_after >= k.all_back_after, "{m:?} {k:?}");
    assert_eq!(m.boot_disks_cut, 20, "every boot disk's one path");
}

/// A link flap forgets every path while the SA answers nothing (overloaded, 2 to 42 s): the
/// disks' lookups fail and back off to the SA's 16 s (and half again). A new master (a
/// handover at 41 s) sets ClientReregister on each port in its sweep, which starts the
/// lookup at once, the backoff over; that one goes into the SA's silence, the next a second
/// and a half later is answered: every disk back within three seconds of the SA's return,
/// not the backoff's twenty-four.
#[test]
fn a_new_masters_reregister_starts_a_failed_lookup_again_at_once() {
    let overload = FleetFault::SaOverload {
        down: Duration::from_ms(40_000),
    };
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(300),
    };
    let handover = FleetFault::SmHandover {
        reassign_lids: false,
    };
    let faults = std::vec![(2_000, overload), (2_000, flap), (41_000, handover)];
    let mut s = setup(6, faults, RetryPolicy::Backoff);
    s.duration = Duration::from_ms(BOOT_MS + 75_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let sa_back = Instant::from_ms(BOOT_MS + 42_000);
    let r = f
        .faults
        .iter()
        .find(|r| r.fault == flap)
        .expect("the flap's row");
    assert_eq!((r.hosts, r.back), (6, 6), "{r:?}");
    let back = r.at + r.all_back_after.expect("every host back");
    assert!(
        back > sa_back && back < sa_back + Duration::from_ms(3_000),
        "{back}"
    );
    // Each disk of each host lost its path and failed a lookup: each rescanned once.
    assert_eq!(f.path_records.rescans, 12, "{:?}", f.path_records);
}

/// A failover between two later faults: the reregister it leads to lands among them in
/// time order, and each of the three does its work.
#[test]
fn a_failovers_reregister_lands_in_time_among_later_faults() {
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(100),
    };
    let faults = std::vec![
        (5_000, FleetFault::SmFailover),
        (10_000, restart(1, 100)),
        (65_000, flap),
    ];
    let mut s = setup(6, faults, RetryPolicy::Backoff);
    // The restart's logins wait for the SA (their PathRecords fail while no master is up),
    // then look again at the reregister: room after the flap.
    s.duration = Duration::from_ms(BOOT_MS + 90_000);
    let mut fleet = Fleet::build(&s).expect("builds");
    fleet.run();
    let f = fleet.figures();
    assert_eq!(fleet.subnet().reregister_sweeps(), 1);
    let kinds: Vec<&str> = f.faults.iter().map(|r| r.fault.name()).collect();
    assert_eq!(
        kinds,
        ["power_on", "sm_failover", "target_restart", "link_flap"]
    );
    for r in &f.faults {
        assert_eq!(r.back, r.hosts, "{r:?}");
    }
}

/// A subnet manager whose standby never polls, or takes over at no missed poll, cannot be.
#[test]
fn a_standby_that_never_notices_is_refused() {
    let ok = setup(1, Vec::new(), RetryPolicy::Backoff);
    for sm in [
        SmSetup {
            polls_missed: 0,
            ..SmSetup::default()
        },
        SmSetup {
            poll_interval: Duration::ZERO,
            ..SmSetup::default()
        },
    ] {
        let e = Fleet::build(&FleetSetup { sm, ..ok.clone() }).expect_err("refused");
        assert!(e.to_string().starts_with("sm.poll_interval_ms"), "{e}");
    }
    let fixed = hcabus_lab::baselines::fixed(Duration::from_ms(3));
    let f = Fleet::build(&FleetSetup { retry: fixed, ..ok }).expect("builds");
    assert_eq!(f.retry(), fixed);
}

/// Two failovers, one after the other: each reregister brings every interface through the
/// SA again, the second counted from the joins of the first.
#[test]
fn a_second_failover_is_recovered_from_as_the_first() {
    let faults = std::vec![
        (5_000, FleetFault::SmFailover),
        (80_000, FleetFault::SmFailover)
    ];
    let mut s = setup(4, faults, RetryPolicy::Backoff);
    s.duration = Duration::from_ms(BOOT_MS + 160_000);
    let mut fleet = Fleet::build(&s).expect("builds");
    fleet.run();
    let f = fleet.figures();
    assert_eq!(fleet.subnet().reregister_sweeps(), 2);
    for r in &f.faults[1..] {
        assert_eq!(
            (r.fault, r.hosts, r.back),
            (FleetFault::SmFailover, 4, 4),
            "{r:?}"
        );
        assert!(r.all_back_after >= Some(r.theoretical_min), "{r:?}");
    }
    assert!(f.held());
}

/// Each login asks the SA for its path first (ib_srp's PathRecord lookup) when it has none:
/// a link flap forgets every path, so a flap while the SA answers nothing lasts as long as
/// the SA's silence: the ports are back 2.3 s after the flap, but no disk logs in before
/// the SA is back at 5 s. With the SA answering, the same flap is over with its ports. A
/// target's restart keeps the path: its disks log in again through the SA's silence.
#[test]
fn a_login_waits_for_its_path_record_so_a_silent_sa_holds_a_link_flap() {
    let overload = FleetFault::SaOverload {
        down: Duration::from_ms(5_000),
    };
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(300),
    };
    let mut s = setup(
        10,
        std::vec![(2_000, flap), (2_000, overload)],
        RetryPolicy::Backoff,
    );
    s.duration = Duration::from_ms(BOOT_MS + 20_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = &f.faults[1];
    assert_eq!((r.fault, r.hosts, r.back), (flap, 10, 10), "{r:?}");
    assert!(r.all_back_after >= Some(Duration::from_ms(5_000)), "{r:?}");
    assert!(f.path_records.failed > 0, "{:?}", f.path_records);
    // The same flap with the SA answering: back with the ports and a login.
    let quiet = run(&setup(10, std::vec![(2_000, flap)], RetryPolicy::Backoff));
    let q = &quiet.faults[1];
    assert_eq!((q.hosts, q.back), (10, 10), "{q:?}");
    assert!(q.all_back_after < Some(Duration::from_ms(3_000)), "{q:?}");
    assert_eq!(quiet.path_records.failed, 0);
}

/// A target restarts while the SA answers nothing: its disks keep the paths they resolved,
/// and their CMs send the unanswered REQs again over them; every one is back one REQ
/// timeout after the restart, the SA still silent, and no lookup was made for it.
#[test]
fn a_target_restart_needs_no_path_record_and_rides_a_silent_sa() {
    let overload = FleetFault::SaOverload {
        down: Duration::from_ms(10_000),
    };
    let mut s = setup(
        10,
        std::vec![(2_000, overload), (2_000, restart(0, 300))],
        RetryPolicy::Backoff,
    );
    s.duration = Duration::from_ms(BOOT_MS + 12_000);
    let f = run(&s);
    assert!(f.held(), "{f:?}");
    let r = f
        .faults
        .iter()
        .find(|r| matches!(r.fault, FleetFault::TargetRestart { .. }))
        .expect("the restart");
    assert_eq!((r.hosts, r.back), (10, 10), "{r:?}");
    let all = r.all_back_after.expect("every host back");
    let timeout = ibal::disk::REQ_TIMEOUT;
    assert!(all >= timeout && all < Duration::from_ms(10_000), "{r:?}");
    assert_eq!(f.path_records.failed, 0, "{:?}", f.path_records);
}

/// The subnet manager brings ports back one after another as its sweep reaches them (2 ms
/// a host): after a link flap each host's joins and PathRecords reach the SA in turn. Were
/// every port Active in the same microsecond (no time a host), the same queries would
/// arrive at once and a receive queue of 64 would drop most of them, each a timeout.
#[test]
fn ports_come_back_across_the_sweep_and_their_queries_reach_the_sa_in_turn() {
    let flap = FleetFault::LinkFlap {
        down: Duration::from_ms(300),
    };
    let run_with = |per_host_us: u64| {
        let mut s = setup(20, std::vec![(1_000, flap)], RetryPolicy::Backoff);
        s.sm.sweep_per_host = Duration::from_us(per_host_us);
        s.sm.sa.receive_queue = 64;
        s.duration = Duration::from_ms(BOOT_MS + 40_000);
        let f = run(&s);
        assert!(f.held(), "{f:?}");
        f
    };
    let (spread, at_once) = (run_with(2_000), run_with(0));
    assert_eq!(spread.sa.dropped_full, 0, "{:?}", spread.sa);
    assert!(at_once.sa.dropped_full > 0, "{:?}", at_once.sa);
    assert!(at_once.sa_timeouts > spread.sa_timeouts);
    // The spread is the sweep's, in the outage: 19 hosts after the first, 2 ms each.
    let outage = |f: &FleetFigures| f.faults[1].outage;
    assert_eq!(outage(&spread), outage(&at_once) + Duration::from_ms(38));
}

/// srp_daemon on every port (a fleet of Linux initiators) rescans every period, and at once
/// at a new master's ClientReregister: three queries and one a target a port each time, into
/// the same SA as the joins. A handover's rescans meet the SA's silence through the new
/// master's sweep and are made again after srp_daemon's 5 s, answered then; every host
/// comes back, and the SA sees exactly the daemons' queries more than without them.
#[test]
fn srp_daemon_rescans_load_the_sa_at_a_handover_and_every_period() {
    let handover = FleetFault::SmHandover {
        reassign_lids: false,
    };
    let plain = {
        let mut s = super::setup(20, std::vec![(1_000, handover)], RetryPolicy::Backoff);
        s.duration = Duration::from_ms(20_000);
        s
    };
    let mut with = plain.clone();
    with.srp_daemon = Some(crate::SrpDaemonSetup {
        rescan: Duration::from_ms(15_000),
    });
    let (a, b) = (super::run(&plain), super::run(&with));
    assert!(b.held(), "{b:?}");
    assert_eq!(a.srp_daemon, None);
    let d = b.srp_daemon.expect("running");
    // Twenty hosts: a rescan each at its port's first Active (about 2 s) and one more a
    // period later (about 17 s); one at the ClientReregister in the silent sweep (4.5 s),
    // unanswered, and its second try 5 s later, answered.
    assert_eq!(
        (d.rescans, d.unanswered, d.given_up, d.merged),
        (80, 20, 0, 0),
        "{d:?}"
    );
    // Two ports a host, two targets: ten queries a rescan.
    assert_eq!(d.queries, d.rescans * 10, "{d:?}");
    // The SA saw the daemons' queries and nothing else more: answered, dropped while the
    // new master swept, or still to answer at the run's end.
    let more = |f: &crate::FleetFigures| f.sa.answered + f.sa.dropped_away + f.sa_queued;
    assert_eq!(
        more(&b) - more(&a),
        d.queries,
        "{d:?} {:?} {:?}",
        a.sa,
        b.sa
    );
    assert_eq!(
        b.sa.dropped_away - a.sa.dropped_away,
        20 * 10,
        "the silent sweep's"
    );
    let r = &b.faults[1];
    assert_eq!((r.hosts, r.back), (20, 20), "{r:?}");
    // Below a rescan's three tries, a period is refused by its key.
    let mut short = with.clone();
    short.srp_daemon = Some(crate::SrpDaemonSetup {
        rescan: Duration::from_ms(14_999),
    });
    let e = Fleet::build(&short).expect_err("refused");
    assert!(e.to_string().starts_with("srp_daemon_rescan_ms"), "{e}");
}
