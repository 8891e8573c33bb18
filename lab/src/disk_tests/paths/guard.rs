//! The last-path guard across both adapters: what a path's answer names, that a consent
//! lasts only as long as its query, and that a withdrawn consent is sent at once.

use std::vec::Vec;

use hcabus::{Duration, Instant};
use hcabus_sim::Fault;

use super::{path, run_to, world, Paths};

fn veto_reason(r: &hcabus_sim::ResetReport) -> &str {
    r.facts.veto_reason.as_ref().map_or("", |v| v.as_str())
}

/// Rolling maintenance: adapter 0's planned reset, then adapter 1's once path 0 serves
/// again. Both go ahead: path 0's consent ends with its query, so once back it serves for
/// path 1's guard like any path.
#[test]
fn planned_resets_one_adapter_after_the_other_both_go_ahead() {
    let mut w = world(Paths {
        faults: [
            std::vec![(100, Fault::PlannedReset)],
            std::vec![(600, Fault::PlannedReset)],
        ],
        guard: true,
        ..Paths::default()
    });
    let (io, _, d) = run_to(&mut w, 1_200);
    let resets = w.resets();
    assert_eq!(resets.len(), 2, "{resets:?}");
    for r in &resets {
        assert!(r.vetoed_by.is_none() && r.facts.hw_entered, "{r:?}");
    }
    assert_eq!((io.failed, d[0].logins, d[1].logins), (0, 2, 2));
    assert!(path(&w, 0).disk().is_up() && path(&w, 1).disk().is_up());
}

/// Path 0's cable is out from 100 to 400 ms: a planned reset of path 1's adapter at 200 ms
/// is vetoed naming path 0's port as down (not as logged out); at 600 ms it goes ahead.
/// Path 0's connection rode the flap (back within the transport's retries): no login.
#[test]
fn the_guard_names_a_path_whose_port_is_down() {
    let pulled = Fault::PortDown {
        port: 1,
        duration: Duration::from_ms(300),
    };
    let mut w = world(Paths {
        faults: [
            std::vec![(100, pulled)],
            std::vec![(200, Fault::PlannedReset), (600, Fault::PlannedReset)],
        ],
        guard: true,
        ..Paths::default()
    });
    let (io, _, d) = run_to(&mut w, 1_200);
    let resets = w.resets();
    assert_eq!(resets.len(), 2, "{resets:?}");
    assert_eq!(resets[0].vetoed_by.as_deref(), Some("disk"));
    assert_eq!(veto_reason(&resets[0]), "last path: hca0 port 1 down");
    assert!(resets[1].vetoed_by.is_none() && resets[1].facts.hw_entered);
    assert_eq!((io.failed, d[0].logins, d[1].logins), (0, 1, 2));
    assert_eq!((d[0].port_flaps_ridden, d[0].port_losses), (1, 0));
}

/// Path 1 consents to its adapter's planned reset, whose query stays open (a client that
/// never answers); then its cable is pulled. A planned reset of adapter 0 is vetoed naming
/// path 1 by what it is now, its port down, not by the consent it gave while up.
#[test]
fn a_path_consented_away_and_then_down_is_named_by_its_gap() {
    let pulled = Fault::PortDown {
        port: 1,
        duration: Duration::from_ms(2_000),
    };
    let mut w = world(Paths {
        faults: [
            std::vec![(400, Fault::PlannedReset)],
            std::vec![(300, Fault::PlannedReset), (350, pulled)],
        ],
        guard: true,
        silent_vetoer_1: true,
        ..Paths::default()
    });
    let (io, _, _) = run_to(&mut w, 1_000);
    let resets = w.resets();
    let zero: Vec<_> = resets
        .iter()
        .filter(|r| r.hca.as_deref() == Some("hca0"))
        .collect();
    assert_eq!(zero.len(), 1, "{resets:?}");
    assert_eq!(zero[0].vetoed_by.as_deref(), Some("disk"));
    assert_eq!(veto_reason(zero[0]), "last path: hca1 port 1 down");
    assert_eq!(io.failed, 0);
}

/// As in `a_consent_is_withdrawn_when_the_other_path_goes_down_before_the_query_closes`,
/// on a disk that is nearly idle (7 I/Os a second: none due at 400 ms, none on the wire):
/// the consent is withdrawn at the instant path 0 goes down, not at the disk's next I/O.
#[test]
fn a_withdrawn_consent_is_sent_at_once_on_an_idle_disk() {
    let mut w = super::consent_then_down(7);
    let (io, _, _) = run_to(&mut w, 1_000);
    let resets = w.resets();
    assert_eq!(resets.len(), 2, "{resets:?}");
    let (planned, admin) = (&resets[0].facts, &resets[1].facts);
    assert_eq!(resets[0].vetoed_by.as_deref(), Some("disk"));
    assert_eq!(admin.reset_sent_at, Some(Instant::from_ms(400)));
    assert_eq!(planned.finished_at, admin.reset_sent_at, "{planned:?}");
    // At 0, 1/7 s, ..., 1 s.
    assert_eq!((io.failed, io.submitted), (0, 8));
}
