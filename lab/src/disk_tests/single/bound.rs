//! Every command ends (docs/design.md §7): a route that swallows what is sent, on a disk of
//! one path. The adapter's transport rides a short blackhole through (its retransmissions get
//! through once the route heals), ends a long one at its retry budget (the queue pair in
//! error, the commands taken back, a new login once the route carries one), and with no
//! transport timer the disk's own command bound gives the command up, aborts it and, past
//! the unanswered abort, drops the connection. Nothing fails upward on the paging path.

use std::vec::Vec;

use hcabus::verbs::RcTransport;
use hcabus::{Duration, Instant};

use super::{config, disk, routed, run_to, setup};
use crate::srp_target::{Route, RoutePhase};
use crate::stack::{self, DiskSpec, LabParts, Load, Node};
use ibal::disk::{DiskConfig, MAX_BOUND_STRIKES, REQ_TIMEOUT};

/// The disk of `routed` (2.5 ms answers, four on the wire), its route swallowing everything
/// from `from` to `to` ms, on an adapter whose transport is `transport`.
fn blackholed(config: DiskSpec, (from, to): (u64, u64), transport: RcTransport) -> Node {
    let mut route = Route::constant(Duration::from_us(2_500));
    for (at, blackhole) in [(from, true), (to, false)] {
        let phase = RoutePhase {
            blackhole,
            ..RoutePhase::plain(Instant::from_ms(at), Duration::from_us(2_500))
        };
        route.push(phase).expect("in order");
    }
    let mut s = setup(DiskSpec { route, ..config }, Vec::new());
    s.sim.hca.transport = transport;
    s.sim.duration = Duration::from_ms(10_000);
    stack::build(&s).expect("builds")
}

/// 200 ms of blackhole, well within the transport's 537 ms budget: each swallowed command and
/// answer gets through on a retransmission after the route heals; no connection is lost,
/// nothing is given up, and the disk is caught up a retransmission timeout later.
#[test]
fn a_blackhole_shorter_than_the_retry_budget_is_ridden_through_by_the_transport() {
    let mut h = blackholed(routed(), (100, 300), RcTransport::DEFAULT);
    let (_, before) = run_to(&mut h, 150);
    let (_, io) = run_to(&mut h, 299);
    assert_eq!(
        io.completed, before.completed,
        "nothing while the route is dark"
    );
    assert_eq!(disk(&h).disk().in_flight(), 4, "every credit swallowed");
    let (d, io) = run_to(&mut h, 500);
    assert_eq!(
        (d.logins, d.transport_errors, d.command_timeouts),
        (1, 0, 0)
    );
    assert_eq!((io.failed, io.submitted - io.completed), (0, 3));
    let t = disk(&h).lab_target().stats();
    // The four answers out when the route went dark, each carried by a retransmission;
    // with every credit taken by them, no command was sent into the dark.
    assert_eq!(t.blackholed, 4, "{t:?}");
    assert_eq!((t.transport_failures, t.logins), (0, 1));
    // The worst: an I/O sent at 100 ms, carried by its third retransmission (301.3 ms).
    assert!(
        (200_000..240_000).contains(&io.max_latency_us),
        "{}",
        io.max_latency_us
    );
}

/// A blackhole of a second: the oldest swallowed send runs out of its budget at 100.5 +
/// 536.9 ms, completes in error (retry exceeded) and the queue pair is in error. The disk
/// takes its commands back and logs in again, refused while the route swallows the login,
/// then served: everything completes, nothing fails (the boot disk holds).
#[test]
fn a_blackhole_past_the_retry_budget_fails_the_connection_and_the_disk_logs_in_again() {
    let boot = DiskSpec {
        initiator: DiskConfig {
            boot: true,
            ..routed().initiator
        },
        ..routed()
    };
    let mut h = blackholed(boot, (100, 1_100), RcTransport::DEFAULT);
    let (d, _) = run_to(&mut h, 636);
    assert_eq!((d.transport_errors, d.logins), (0, 1));
    let (d, io) = run_to(&mut h, 638);
    assert_eq!(d.transport_errors, 1, "{d:?}");
    assert!(!disk(&h).disk().is_up(), "logging in again");
    assert_eq!(d.taken_back, 4, "its commands taken back, to be sent again");
    assert_eq!(io.failed, 0);
    // Its REQ at 637 ms, with the transport's error, goes into the blackhole: its CM
    // learns so at the REQ's timeout and sends it again then (2.94 s), past the route's
    // healing: one login, no refusal.
    let (d, _) = run_to(&mut h, 637 + REQ_TIMEOUT.as_ms() - 1);
    assert_eq!(
        (d.logins, d.req_retries, d.login_retries),
        (1, 0, 0),
        "{d:?}"
    );
    let (d, io) = run_to(&mut h, 3_500);
    assert_eq!(
        (d.logins, d.req_retries, d.login_retries),
        (2, 1, 0),
        "{d:?}"
    );
    assert_eq!((io.failed, io.paging_failed, d.command_timeouts), (0, 0, 0));
    assert!(io.submitted - io.completed <= 4, "caught up: {io:?}");
    assert!(disk(&h).disk().is_up());
    let retries = h.hca().verbs().stats().retries_exceeded;
    assert_eq!(retries, 1, "one send ran out; the rest were flushed");
}

/// No transport timer (local ACK timeout 0: the adapter never sends again, never gives
/// up): nothing below the disk ends a swallowed command. Its bound does, at the ceiling
/// given (300 ms): the command is aborted, the abort is swallowed too, and half a second
/// later the disk drops the connection, takes everything back and logs in again once the
/// route carries its login. The paging path re-drives; nothing fails.
#[test]
fn with_no_transport_timer_the_command_bound_ends_a_swallowed_command() {
    let boot = DiskSpec {
        initiator: DiskConfig {
            boot: true,
            command_timeout: Duration::from_ms(300),
            ..routed().initiator
        },
        ..routed()
    };
    let never = RcTransport::new(0, 7).expect("valid");
    let mut h = blackholed(boot, (100, 3_000), never);
    let c = disk(&h).disk();
    assert_eq!(
        c.command_bound().bound,
        Duration::from_ms(300),
        "the ceiling"
    );
    // The four commands out when the route went dark were sent from 97 ms on.
    let (d, _) = run_to(&mut h, 396);
    assert_eq!(d.command_timeouts, 0);
    let (d, io) = run_to(&mut h, 500);
    assert_eq!(d.command_timeouts, 4, "every credit, past 300 ms: {d:?}");
    assert_eq!(
        (io.failed, io.lost),
        (0, 0),
        "given up is not failed, nor lost"
    );
    assert_eq!(disk(&h).disk().in_flight(), 0, "aborting, to be sent again");
    let (d, _) = run_to(&mut h, 950);
    assert_eq!((d.abort_timeouts, d.transport_errors), (1, 0), "{d:?}");
    let (d, io) = run_to(&mut h, 4_000);
    assert!(d.logins >= 2, "{d:?}");
    assert_eq!((io.failed, io.paging_failed), (0, 0));
    assert!(io.submitted - io.completed <= 4, "caught up: {io:?}");
}

/// A target that takes every command and answers a minute later (a route whose answers
/// take 60 s from 100 ms on): a data disk gives each command up at its bound (200 ms),
/// drops the connection when the abort's answer does not come either, and sends it again
/// after the next login; after [`MAX_BOUND_STRIKES`] of those it fails it upward as
/// retryable, as SCSI gives a command up after its retries. The paging path would re-drive
/// for ever.
#[test]
fn a_data_disk_fails_a_command_upward_after_its_re_drives_run_out() {
    let mut route = Route::constant(Duration::from_us(2_500));
    let late = RoutePhase::plain(Instant::from_ms(100), Duration::from_ms(60_000));
    route.push(late).expect("in order");
    let data = DiskSpec {
        initiator: DiskConfig {
            command_timeout: Duration::from_ms(200),
            ..routed().initiator
        },
        route,
        ..routed()
    };
    let mut s = setup(data, Vec::new());
    s.sim.duration = Duration::from_ms(10_000);
    let mut h = stack::build(&s).expect("builds");
    let (d, io) = run_to(&mut h, 9_000);
    assert!(d.bound_failures >= 1, "{d:?}");
    assert_eq!(
        (io.failed, io.retryable),
        (d.bound_failures, d.bound_failures)
    );
    assert!(
        d.command_timeouts >= u64::from(MAX_BOUND_STRIKES) * d.bound_failures,
        "{d:?}"
    );
    assert!(d.abort_timeouts >= u32::from(MAX_BOUND_STRIKES), "{d:?}");

    // The boot disk, on the same route, never fails one.
    let boot = DiskSpec {
        initiator: DiskConfig {
            boot: true,
            ..data.initiator
        },
        ..data
    };
    let mut s = setup(boot, Vec::new());
    s.sim.duration = Duration::from_ms(10_000);
    let mut h = stack::build(&s).expect("builds");
    let (d, io) = run_to(&mut h, 9_000);
    assert_eq!((io.failed, d.bound_failures), (0, 0));
    assert!(d.command_timeouts > u64::from(MAX_BOUND_STRIKES), "{d:?}");
}

/// One command out when the route goes dark (an I/O every 100 ms): its send alone runs out
/// of the transport's budget, with nothing flushed behind it, and its error completion
/// alone tells the disk the connection is gone.
#[test]
fn a_lone_swallowed_send_fails_its_connection_at_the_budget() {
    let sparse = DiskSpec {
        initiator: DiskConfig {
            boot: true,
            queue_depth: 1,
            ..routed().initiator
        },
        load: Load {
            iops: 10,
            ..routed().load
        },
        ..routed()
    };
    let mut h = blackholed(sparse, (150, 2_000), RcTransport::DEFAULT);
    let (d, io) = run_to(&mut h, 200 + 536);
    assert_eq!((d.transport_errors, io.completed), (0, 2));
    let (d, _) = run_to(&mut h, 200 + 537);
    assert_eq!(d.transport_errors, 1, "{d:?}");
    assert_eq!((d.taken_back, d.command_timeouts), (1, 0));
    // The queue pair in error flushed its receive too: a flushed receive is no answer.
    assert_eq!(
        (d.answers, d.late_discarded, d.stale_responses),
        (2, 0, 0),
        "{d:?}"
    );
    // Its REQs go into the blackhole to 2 s, each known unanswered a timeout later.
    let (d, io) = run_to(&mut h, 4_000);
    assert!(d.logins >= 2 && d.req_retries >= 1, "{d:?}");
    assert_eq!(io.failed, 0);
    assert!(io.submitted - io.completed <= 1, "caught up: {io:?}");
}

/// A target that answers in 10 s from the start: no answer has measured the path when the
/// command bound (RFC 6298's second, four times: 4 s) gives the first commands up. Each
/// give-up before the first answer doubles the path's timeout, so the next bound is 8 s and
/// the commands sent again can be answered; the first answer then sets the bound from the
/// path's own latency.
#[test]
fn a_disk_given_up_before_its_first_answer_backs_its_bound_off() {
    let slow = DiskSpec {
        initiator: DiskConfig {
            boot: true,
            ..config().initiator
        },
        route: Route::constant(Duration::from_ms(10_000)),
        ..config()
    };
    let mut s = setup(slow, Vec::new());
    s.sim.duration = Duration::from_ms(60_000);
    let mut h = stack::build(&s).expect("builds");
    assert_eq!(
        disk(&h).disk().command_bound().bound,
        Duration::from_ms(4_000)
    );
    let (d, _) = run_to(&mut h, 3_999);
    assert_eq!(d.command_timeouts, 0);
    let (d, io) = run_to(&mut h, 4_100);
    assert!(d.command_timeouts >= 1, "{d:?}");
    assert_eq!(io.failed, 0);
    assert_eq!(
        disk(&h).disk().command_bound().bound,
        Duration::from_ms(8_000),
        "backed off"
    );
    let (_, io) = run_to(&mut h, 40_000);
    assert!(io.completed > 0, "answered once the bound let it: {io:?}");
    let srtt = disk(&h).disk().timing().estimator().srtt();
    assert!(srtt >= Some(Duration::from_ms(10_000)), "{srtt:?}");
}
