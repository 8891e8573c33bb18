//! Fast path failover's escalations, a checker's ticks, a probing path's count of its
//! answers, and idle checks.

use crate::stack::LabParts;
use hcabus::{Duration, Instant, Policy};
use hcabus_sim::Fault;

use super::{healthy_route, path, run_to, shared, slow_from, world, Paths, QUICK_TRANSPORT};
use crate::srp_target::{Route, RoutePhase};
use ibal::multipath::PROBES_TO_SERVE;

/// A checker with a 50 ms interval on a route that answers in 200 ms from 100 to 400 ms:
/// commands are given up at its ticks (the first command sent after each out 50 ms too: an
/// 80 ms route answered that test before a tick), and the path is probed. Healed at 400 ms, it is
/// restored after exactly the prompt answers a probe streak needs, counted from what is new
/// since the last look.
#[test]
fn a_probing_path_counts_only_its_new_answers() {
    let mut healed = slow_from(100, Duration::from_ms(200), false);
    let fast = RoutePhase::plain(Instant::from_ms(400), Duration::from_us(200));
    healed.push(fast).expect("a third phase");
    let mut w = world(Paths {
        routes: [healed, healthy_route()],
        timeout: crate::baselines::checker(Duration::from_ms(50)),
        ..Paths::default()
    });
    let (_, p, _) = run_to(&mut w, 399);
    let (_, slow) = path(&w, 0).disk().timing().answers();
    assert_eq!((slow, p[0].restored), (0, 0), "{p:?}");
    assert!(p[0].given_up >= 1, "{p:?}");
    // Healed at 400 ms: looked at each millisecond until it serves again.
    let (prompt_399, slow_399) = path(&w, 0).disk().timing().answers();
    let mut t = 400;
    let (io, p) = loop {
        let (io, p, _) = run_to(&mut w, t);
        if p[0].restored > 0 || t >= 5_000 {
            break (io, p);
        }
        t += 1;
    };
    assert_eq!(p[0].restored, 1, "restored by 5 s: {p:?}");
    let (prompt, slow) = path(&w, 0).disk().timing().answers();
    // The streak that restored it is its new prompt answers: none from before counted.
    assert_eq!(slow, slow_399, "no slow answer since the heal");
    assert_eq!(prompt - prompt_399, u64::from(PROBES_TO_SERVE));
    assert!(p[0].probes >= u64::from(PROBES_TO_SERVE), "{p:?}");
    assert_eq!(io.failed, 0);
}

/// Path 0's adapter hangs twice; each client may ask for one reset a minute. The first
/// stall gets its reset; the second's request is refused (throttled), counted once, and
/// not asked again at every look while the reset it asked for never comes.
#[test]
fn a_stalled_path_whose_reset_is_refused_asks_once() {
    let r = Route::constant(Duration::from_us(2_500));
    let mut w = world(Paths {
        routes: [r, r],
        faults: [
            std::vec![(100, Fault::Hang), (600, Fault::Hang)],
            std::vec![],
        ],
        policy: Policy {
            client_request_limit: 1,
            ..Policy::default()
        },
        transport: QUICK_TRANSPORT,
        ..Paths::default()
    });
    let (io, p, _) = run_to(&mut w, 1_200);
    let resets = w.resets();
    assert_eq!(resets.len(), 1, "{resets:?}");
    // 100 ms after the last send, at the hang.
    assert_eq!(resets[0].facts.started_at, Instant::from_ms(200));
    assert_eq!(path(&w, 0).refusals, 1, "the second request, once");
    assert_eq!(
        p[0].slow_failovers, 2,
        "each hang's commands moved to path 1"
    );
    assert_eq!(io.failed, 0);
}

/// A healthy path of any latency up to the command bound is not shut out beside a fast one:
/// 8, 50 and 500 ms routes, steady from the start. Before its first answer a path's timeout
/// is RFC 6298's second (not the 5 ms floor, which gave every command of an 8 ms path up
/// before its answer could teach anything, for ever), so each path learns its own latency
/// from its first answers and nothing is given up. Priced at its latency beside a 200 us
/// path that is never full, it carries what the selector gives a path idle for a second.
#[test]
fn a_steady_slow_path_beside_a_fast_one_learns_its_latency_and_carries_io() {
    for ms in [8, 50, 500] {
        let slow = Route::constant(Duration::from_ms(ms));
        let mut w = world(Paths {
            routes: [slow, healthy_route()],
            ..Paths::default()
        });
        let (io, p, d) = run_to(&mut w, 4_000);
        assert_eq!(
            (io.failed, p[0].given_up, d[0].late_discarded),
            (0, 0, 0),
            "{ms} ms: {p:?}"
        );
        assert!(p[0].ios >= 3, "{ms} ms carries I/O: {p:?}");
        let srtt = path(&w, 0)
            .disk()
            .timing()
            .estimator()
            .srtt()
            .expect("measured");
        let latency = Duration::from_ms(ms);
        assert!(
            srtt >= latency && srtt < latency + Duration::from_ms(1),
            "{ms} ms: {srtt}"
        );
        assert_eq!(path(&w, 0).lab_target().stats().aborted, 0, "no abort sent");
    }
}

/// With no I/O at all, each path checks itself once a second (a TEST UNIT READY a second
/// after its login, then a second after each check): answered, completed upward never,
/// nothing owed; the target ran each without moving data.
#[test]
fn an_idle_path_checks_itself_once_a_second_and_the_checks_are_nobodys_io() {
    let mut w = world(Paths {
        iops: 0,
        ..Paths::default()
    });
    let (io, p, d) = run_to(&mut w, 3_500);
    for i in 0..2 {
        // Logged in at 0.5 ms: checks at 1000.5, 2000.5 and 3000.5 ms.
        assert_eq!((d[i].checks_sent, d[i].checks_answered), (3, 3), "{d:?}");
        assert_eq!(d[i].answers, 3, "the checks' answers, nothing else");
        assert_eq!((p[i].ios, p[i].taken), (0, 0), "nobody's I/O: {p:?}");
        let t = path(&w, i).lab_target().stats();
        assert_eq!((t.checks, t.reads, t.writes), (3, 0, 0), "{t:?}");
        // Each check is a round trip of the path's.
        assert!(path(&w, i).disk().timing().estimator().srtt().is_some());
    }
    assert_eq!((io.submitted, io.completed, io.in_flight), (0, 0, 0));
    // Busy, a path sends none: its I/O is its check.
    let mut busy = world(Paths::default());
    let (_, _, d) = run_to(&mut busy, 3_500);
    assert_eq!((d[0].checks_sent, d[1].checks_sent), (0, 0), "{d:?}");
}

/// A dead idle path is known within one of its timeouts of the check that finds it: both
/// paths idle, path 0's route swallows everything from 1.5 s. Its check at 2000.5 ms goes
/// unanswered; half its timeout later the path tests itself (a check is nobody's I/O: it
/// waits half as long as a command of I/O), and at the timeout, path 1 having answered its
/// own check of the same instant, the check is given up and the path probed. Not a timeout
/// later, as a command of I/O would be.
#[test]
fn a_dead_idle_path_is_known_one_timeout_after_its_check() {
    let mut w = world(Paths {
        routes: [slow_from(1_500, Duration::ZERO, true), healthy_route()],
        iops: 0,
        ..Paths::default()
    });
    run_to(&mut w, 1_999);
    let timeout = path(&w, 0).disk().path_timeout().expect("adaptive");
    assert!(timeout < Duration::from_ms(10), "near the floor: {timeout}");
    let found = Instant::from_us(2_000_500) + timeout;
    let (_, p, d) = run_to(&mut w, 2_000);
    assert_eq!(
        (p[0].given_up, d[0].checks_on_demand),
        (0, 0),
        "{p:?} {d:?}"
    );
    w.run_until(found - Duration::from_us(1));
    let m = shared(&w);
    assert_eq!(m.lock().path_stats(0).expect("path 0").given_up, 0);
    assert_eq!(path(&w, 0).disk().stats().checks_on_demand, 1, "its test");
    // The check leaves a few microseconds after its timer (the adapter's post).
    w.run_until(found + Duration::from_us(20));
    let given_up = m.lock().path_stats(0).expect("path 0").given_up;
    assert!(given_up >= 1, "known at {found}");
    let (io, p, d) = run_to(&mut w, 3_000);
    assert!(
        !shared(&w).lock().path_up(0) && !path(&w, 0).disk().is_connected(),
        "its connection dropped after: {p:?} {d:?}"
    );
    // Its REQ goes into the blackhole: not sent again before the CM's timeout (2.3 s).
    assert_eq!(
        (d[0].abort_timeouts, d[0].req_retries, d[0].login_retries),
        (1, 0, 0)
    );
    assert_eq!(
        d[1].checks_on_demand, 0,
        "path 1's own check was the evidence"
    );
    assert_eq!(
        (p[0].ios, p[1].ios, io.submitted),
        (0, 0, 0),
        "nobody's I/O"
    );
}

/// A checker (dm-multipath's path checker) gives up a command out a whole interval, at its
/// ticks only: with a 50 ms interval, path 0's first slow command (sent at 101 ms or just
/// after) is overdue at 151 ms or just after, and waits for the tick at 200 ms.
#[test]
fn a_checker_gives_up_only_at_its_ticks() {
    let mut w = world(Paths {
        routes: [
            slow_from(101, Duration::from_ms(300), false),
            healthy_route(),
        ],
        timeout: crate::baselines::checker(Duration::from_ms(50)),
        ..Paths::default()
    });
    let (_, p, _) = run_to(&mut w, 199);
    assert_eq!(p[0].given_up, 0, "no tick since the first became overdue");
    let (_, p, _) = run_to(&mut w, 200);
    assert!(p[0].given_up > 0, "{p:?}");
    let (io, _, _) = run_to(&mut w, 205);
    let worst = io.max_latency_us;
    assert!(
        (98_000..100_000).contains(&worst),
        "the first I/O on path 0 after 100 ms, moved at 200: {worst}"
    );
}

/// Path 0's adapter hangs at 100 ms: its sends are never completed. The path sees its
/// data path stalled 100 ms later (its transport would have completed any send by then)
/// and asks for its adapter's reset, long before the health poll would; the reset brings
/// the path back.
#[test]
fn a_path_whose_sends_stall_asks_for_its_adapters_reset() {
    let r = Route::constant(Duration::from_us(2_500));
    let mut w = world(Paths {
        routes: [r, r],
        faults: [std::vec![(100, Fault::Hang)], Vec::new()],
        transport: QUICK_TRANSPORT,
        ..Paths::default()
    });
    let (io, p, _) = run_to(&mut w, 800);
    let resets = w.resets();
    assert_eq!(resets.len(), 1, "{resets:?}");
    let f = &resets[0].facts;
    assert_eq!(f.reason, hcabus::types::ResetReason::ClientRequest);
    assert_eq!(
        f.started_at,
        Instant::from_ms(200),
        "100 ms after the last send, at the hang"
    );
    assert!(path(&w, 0).disk().is_up() && p[0].given_up > 0);
    assert_eq!((io.failed, path(&w, 0).refusals), (0, 0));
}

/// At 2 IOPS the next I/O on the other path is 500 ms away. Path 0 goes dead at 1 s: the
/// first command it takes after is late at its timeout, it checks itself (swallowed), and
/// a timeout later path 1, idle, checks at once; its answer overtakes the command, which
/// is given up and done on path 1 within a few milliseconds, not at the next I/O.
#[test]
fn a_late_command_gets_its_evidence_from_checks_on_demand() {
    let mut w = world(Paths {
        routes: [slow_from(1_000, Duration::ZERO, true), healthy_route()],
        iops: 2,
        ..Paths::default()
    });
    let (io, p, d) = run_to(&mut w, 4_000);
    // The I/O, and the self-check with it.
    assert!(p[0].given_up >= 1 && p[0].moved >= 1, "{p:?}");
    assert!(d[0].checks_on_demand >= 1, "path 0 checked itself: {d:?}");
    assert!(d[1].checks_on_demand >= 1, "path 1 checked for it: {d:?}");
    // The one I/O path 0 took after 1 s waited two of its timeouts and a round trip, not
    // the 500 ms to the next I/O.
    assert!(io.max_latency_us < 20_000, "{io:?}");
    assert_eq!((io.failed, io.lost), (0, 0));
}

/// A straggler is not a dead path: path 0 answers 50 ms late from 1 s on, every command.
/// Its late command's own path is asked first; with each command 50 ms late, nothing on
/// it answers within the timeout, so the others are asked and it is given up (the path is
/// slow, as the rule means). On a healthy route the self-check answers and nothing is.
#[test]
fn a_path_that_answers_its_own_check_keeps_its_late_command() {
    let mut w = world(Paths {
        iops: 2,
        ..Paths::default()
    });
    let (io, p, d) = run_to(&mut w, 4_000);
    assert_eq!((p[0].given_up, p[1].given_up), (0, 0), "{p:?}");
    assert_eq!(
        (d[0].checks_on_demand, d[1].checks_on_demand),
        (0, 0),
        "nothing late"
    );
    assert_eq!(io.failed, 0);
    let mut slow = world(Paths {
        routes: [
            slow_from(1_000, Duration::from_ms(50), false),
            healthy_route(),
        ],
        iops: 2,
        ..Paths::default()
    });
    let (_, p, d) = run_to(&mut slow, 4_000);
    assert!(p[0].given_up >= 1, "slow for good: {p:?}");
    assert!(d[0].checks_on_demand >= 1, "{d:?}");
}
