//! What a disk does with the bus's news (its port down and back, ridden or lost; a new LID;
//! another port's news; what comes after its reset) and with a login REQ nobody answers.

use hcabus::{Duration, Instant, Policy};
use hcabus_sim::Fault;

use super::{disk, host, routed, run_to, setup, with_policy};
use crate::srp_target::{Route, RoutePhase};
use crate::stack::DiskSpec;
use crate::stack::{self, LabParts};
use ibal::disk::REQ_TIMEOUT;

/// Port 1's cable is out from 100 to 700 ms (past what the transport rides: the
/// connection is given up at 570 ms), port 2's from 150 to 200 ms: port 2's PORT_ACTIVE is
/// not the disk's, which logs in again only when port 1 is back.
#[test]
fn another_ports_return_does_not_log_the_disk_in() {
    let pull = |port, ms| Fault::PortDown {
        port,
        duration: Duration::from_ms(ms),
    };
    let faults = std::vec![(100, pull(1, 600)), (150, pull(2, 50))];
    let mut h = with_policy(routed(), faults, Policy::default());
    let (d, _) = run_to(&mut h, 699);
    assert!(!disk(&h).disk().is_connected());
    assert_eq!((d.port_losses, d.logins, d.login_retries), (1, 1, 0));
    let (d, io) = run_to(&mut h, 900);
    assert!(disk(&h).disk().is_up());
    assert_eq!((d.logins, d.login_retries, io.failed), (2, 0, 0));
}

/// A data LUN and an IPoIB interface acknowledge their quiesce as deferred work (400 ms),
/// are forced past the deadline (50 ms), and the reset fails: each execute, still pending,
/// is dropped with the reset, not sent to a bus that has nothing to acknowledge (a refusal
/// counted).
#[test]
fn a_failed_reset_drops_the_execute_still_deferred_for_it() {
    let faults = std::vec![(100, Fault::ResetFails(9)), (100, Fault::AdminReset)];
    let mut h = super::late_acks(faults);
    let (_, _) = run_to(&mut h, 1_000);
    assert_eq!(h.coordinator().state(), hcabus::State::Failed);
    let resets = h.resets();
    assert_eq!(resets[0].facts.forced_count, 2, "{:?}", resets[0].facts);
    let c = disk(&h);
    assert!(!c.disk().is_up());
    assert_eq!(c.refusals, 0, "no execute after its reset");
    let ib0 = stack::nets(&h).next().expect("ib0");
    assert_eq!(ib0.refusals, 0, "the same for IPoIB");
}

/// A new master renumbers the disk's port at 200 ms and the port stays Active: the bus says
/// PORT_ACTIVE again, with the new LID. The connection addressed the old one (the target
/// answers nothing that reaches it now), so the disk drops it at once, takes back what was
/// out and logs in again: no transport error waited for, nothing failed or lost.
#[test]
fn a_port_renumbered_under_the_connection_logs_the_disk_in_again_at_once() {
    // The fabric modelled: ports trained and swept from the start, their LIDs known.
    let mut s = setup(routed(), std::vec![]);
    s.sim.hca.sm_sweep = Duration::from_ms(50);
    let mut h = stack::build(&s).expect("builds");
    run_to(&mut h, 100);
    h.renumber_ports(Instant::from_ms(200));
    let (d, _) = run_to(&mut h, 199);
    assert_eq!((d.lid_changes, d.logins), (0, 1));
    let (d, _) = run_to(&mut h, 200);
    assert_eq!((d.lid_changes, d.logins, d.taken_back), (1, 2, 2));
    let (d, io) = run_to(&mut h, 600);
    assert!(disk(&h).disk().is_up());
    assert_eq!((d.transport_errors, d.command_timeouts), (0, 0));
    assert_eq!((io.failed, io.lost, d.stale_responses), (0, 0, 0));
    // The two commands out at the change went out again after the login: no I/O waited
    // for a transport's retries (537 ms) or a command's bound.
    assert!(io.max_latency_us < 10_000, "{}", io.max_latency_us);
    let t = disk(&h).lab_target().stats();
    assert_eq!(t.logins, 2, "{t:?}");
}

/// The route swallows everything from 100 ms on: the transport gives the connection up at
/// 637 ms, and the login's REQ goes unanswered; its CM sends it again a REQ's timeout later.
/// A new master renumbers the port meanwhile (PORT_ACTIVE again, the disk logged out): the
/// REQ waits its timeout all the same, not sent again at the PORT_ACTIVE.
#[test]
fn a_renumbering_port_active_does_not_cut_a_reqs_timeout_short() {
    let mut s = dark_from_100_ms();
    s.sim.hca.sm_sweep = Duration::from_ms(50);
    let mut h = stack::build(&s).expect("builds");
    let (d, _) = run_to(&mut h, 700);
    assert_eq!((d.transport_errors, d.req_retries), (1, 0), "{d:?}");
    h.renumber_ports(Instant::from_ms(1_000));
    let first = 637 + REQ_TIMEOUT.as_ms();
    let (d, _) = run_to(&mut h, first - 1);
    assert_eq!(d.req_retries, 0, "not sent again at the PORT_ACTIVE: {d:?}");
    let (d, _) = run_to(&mut h, first);
    assert_eq!(d.req_retries, 1, "{d:?}");
}

/// A data LUN whose route swallows everything from 100 ms for good: its REQs go unanswered,
/// and its login gives up at its hold timeout (30 s) from the first of them, as after a
/// refusal, not after its CM's sixteen REQs; meanwhile it says it is retrying, and its held
/// I/O fails upward (retryable) at the hold.
#[test]
fn a_data_luns_unanswered_reqs_give_up_at_its_hold_timeout() {
    let mut s = dark_from_100_ms();
    s.sim.duration = Duration::from_ms(60_000);
    let mut h = stack::build(&s).expect("builds");
    // The transport gives the connection up at 637 ms: the first REQ goes unanswered then.
    let given_up_at = 637 + 30_000;
    run_to(&mut h, 5_000);
    let retrying = hcabus::bus::ClientReport::error(disk(&h)).expect("says so");
    assert!(retrying.contains("retrying"), "{retrying}");
    let (d, _) = run_to(&mut h, given_up_at - 1);
    assert!(d.req_retries >= 12, "{d:?}");
    let (_, io) = run_to(&mut h, given_up_at + 1);
    let gave_up = hcabus::bus::ClientReport::error(disk(&h)).expect("says so");
    assert!(gave_up.contains("gave up"), "{gave_up}");
    assert!(io.failed > 0 && io.paging_failed == 0, "{io:?}");
}

/// `routed`'s disk, its route swallowing everything from 100 ms on, for good.
fn dark_from_100_ms() -> crate::stack::StackSetup {
    let mut route = Route::constant(Duration::from_us(2_500));
    let dark = RoutePhase {
        blackhole: true,
        ..RoutePhase::plain(Instant::from_ms(100), Duration::from_us(2_500))
    };
    route.push(dark).expect("in order");
    setup(DiskSpec { route, ..routed() }, std::vec![])
}

/// The cable is out from 100 to 700 ms, past the 470 ms the transport rides (7
/// retransmissions 67.1 ms apart): the connection is kept until 570 ms, then given up, its
/// commands taken back, and the disk logs in again when the port is back.
#[test]
fn a_port_loss_past_the_transports_retries_takes_back_what_is_out_and_logs_in_again() {
    let pulled = Fault::PortDown {
        port: 1,
        duration: Duration::from_ms(600),
    };
    let mut h = host(routed(), std::vec![(100, pulled)]);
    let (d, io) = run_to(&mut h, 101);
    assert_eq!(
        h.coordinator().state(),
        hcabus::State::Operational,
        "no reset"
    );
    let c = disk(&h).disk();
    assert!(c.is_connected() && !c.is_up(), "kept, sending nothing");
    assert_eq!((d.port_losses, d.taken_back, io.in_flight), (0, 0, 4));
    let (d, _) = run_to(&mut h, 569);
    assert_eq!((d.port_losses, d.taken_back), (0, 0), "still riding");
    let (d, io) = run_to(&mut h, 571);
    assert!(!disk(&h).disk().is_connected());
    assert_eq!((d.port_losses, d.taken_back, io.in_flight), (1, 2, 16));
    let (d, io) = run_to(&mut h, 1_000);
    assert!(disk(&h).disk().is_up());
    assert_eq!(
        (d.port_losses, d.port_flaps_ridden, d.logins, io.failed),
        (1, 0, 2, 0)
    );
    assert_eq!(
        (d.stale_responses, d.late_discarded),
        (0, 0),
        "nothing flushed taken for an answer"
    );
    assert_eq!(d.commands_sent, io.completed + io.in_flight + d.taken_back);
    // The I/O of 98 ms waited for the port (700 ms), the login and its route.
    assert!(
        (600_000..610_000).contains(&io.max_latency_us),
        "{}",
        io.max_latency_us
    );
}

/// The cable is out from 100 to 150 ms: the transport carries what was out once the port
/// is back (the target's answers on their next retransmission), the connection is kept
/// and no command is taken back or sent twice.
#[test]
fn a_port_back_within_the_transports_retries_loses_nothing_and_logs_in_no_more() {
    let pulled = Fault::PortDown {
        port: 1,
        duration: Duration::from_ms(50),
    };
    let mut h = host(routed(), std::vec![(100, pulled)]);
    let (d, io) = run_to(&mut h, 400);
    assert!(disk(&h).disk().is_up());
    let t = disk(&h).lab_target().stats();
    assert_eq!(
        (d.port_losses, d.port_flaps_ridden, d.logins, d.taken_back),
        (0, 1, 1, 0)
    );
    assert_eq!((io.failed, d.stale_responses, d.late_discarded), (0, 0, 0));
    assert_eq!(d.commands_sent, io.completed + io.in_flight);
    // The two answers due while the port was dark went out on their first retransmission
    // after it (67.1 ms after the first): the worst I/O.
    assert_eq!((t.port_dark_retransmits, t.transport_failures), (2, 0));
    assert!(
        (67_100..72_000).contains(&io.max_latency_us),
        "{}",
        io.max_latency_us
    );
}
