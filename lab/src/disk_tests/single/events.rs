//! What a disk does with the bus's news that is not its own or comes after its reset.

use hcabus::{Duration, Instant, Policy};
use hcabus_sim::Fault;

use super::{disk, routed, run_to, setup, with_policy};
use crate::stack::{self, LabParts};

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
