//! Nodes that share a target's login capacity (docs/design.md §11): each disk is the real
//! one, and a login the target has no room for is rejected and retried with the backoff.

use std::vec::Vec;

use hcabus::{Duration, Instant};

use super::{disk, routed, setup};
use crate::srp_target::{LoginCapacity, SharedAdmission};
use crate::stack::{self, DiskSpec, Node};
use ibal::disk::REQ_TIMEOUT;

/// The disk of `routed` whose login takes 20 ms: long enough for logins to overlap.
fn slow_login() -> DiskSpec {
    let routed = routed();
    DiskSpec {
        route: routed.route.with_login(Duration::from_ms(20)),
        ..routed
    }
}

/// Two hosts whose disks log in at 0 ms to one target that takes one login at a time (each
/// takes 20 ms): the second is rejected, backs off, and logs in once the first is done. The
/// hosts run in step, a millisecond at a time, as a fleet's do.
#[test]
fn a_login_the_target_has_no_room_for_is_retried_after_a_backoff() {
    let config = slow_login();
    let capacity = LoginCapacity {
        concurrent: 1,
        per_second: 1_000,
        queue: false,
    };
    let target = SharedAdmission::new(capacity).expect("a capacity that can be");
    let shared = [(config.initiator.target_lid, target.clone())];
    let mut hosts: Vec<Node> = (0..2)
        .map(|_| stack::build_sharing(&setup(config, Vec::new()), &shared).expect("builds"))
        .collect();
    for ms in 1..=200 {
        for h in &mut hosts {
            h.run_until(Instant::from_ms(ms));
        }
    }
    let s = target.lock().stats();
    let d: Vec<_> = hosts.iter().map(|h| *disk(h).disk().stats()).collect();
    assert_eq!((d[0].logins, d[0].login_retries), (1, 0));
    assert_eq!(d[1].logins, 1);
    assert!(d[1].login_retries > 0, "{:?}", d[1]);
    assert_eq!(
        (
            s.accepted,
            s.refused_busy,
            s.refused_rate,
            s.peak_per_second
        ),
        (2, u64::from(d[1].login_retries), 0, 2)
    );
    for h in &hosts {
        let c = disk(h);
        assert!(c.disk().is_up(), "{:?}", c.problem());
        assert!(h.checker().violations.is_empty());
        let io = c.io_stats();
        assert_eq!(io.unaccounted(), 0, "{io:?}");
        assert_eq!((io.failed, io.lost), (0, 0));
    }
}

/// Forty hosts on one target that takes 8 logins at a time (20 ms each) and 200 a second.
/// The target restarts at 1 s and answers nothing for half a second: every disk loses its
/// connection, takes its commands back, and logs in again. Its first REQ goes unanswered,
/// which its CM learns only at the REQ's timeout (2.3 s): the REQ sent again then is
/// answered, or refused as busy and retried under the backoff. None is ever let in past the
/// target's capacity, every one is back, and nothing is lost or failed.
#[test]
fn a_target_restart_brings_every_host_back_within_its_capacity() {
    const HOSTS: usize = 40;
    let config = slow_login();
    let capacity = LoginCapacity {
        concurrent: 8,
        per_second: 200,
        queue: false,
    };
    let target = SharedAdmission::new(capacity).expect("a capacity that can be");
    let shared = [(config.initiator.target_lid, target.clone())];
    let mut hosts: Vec<Node> = (0..HOSTS)
        .map(|i| {
            let mut s = setup(config, Vec::new());
            s.sim.seed = i as u64;
            s.sim.duration = Duration::from_ms(5_000);
            stack::build_sharing(&s, &shared).expect("builds")
        })
        .collect();
    let mut back_at = [None; HOSTS];
    for ms in 1..=5_000 {
        if ms == 1_000 {
            target
                .lock()
                .restart(Instant::from_ms(ms), Duration::from_ms(500));
        }
        for (i, h) in hosts.iter_mut().enumerate() {
            h.run_until(Instant::from_ms(ms));
            if ms > 1_000 && back_at[i].is_none() && disk(h).disk().is_up() {
                back_at[i] = Some(ms);
            }
        }
    }
    let s = target.lock().stats();
    assert_eq!((s.accepted, s.restarts), (2 * HOSTS as u64, 1));
    // Each REQ the restarting target left unanswered was sent again once, past its timeout.
    let retries: u64 = hosts
        .iter()
        .map(|h| disk(h).disk().stats().req_retries)
        .sum();
    assert_eq!(retries, s.refused_down, "{s:?}");
    assert!(s.refused_down > 0 && s.refused_busy > 0, "{s:?}");
    assert!(s.peak_per_second <= capacity.per_second, "{s:?}");
    let back: Vec<u64> = back_at
        .iter()
        .map(|t| t.expect("every host back"))
        .collect();
    // Back at 1.5 s, but no host knows before its REQ's timeout: the first is back one
    // timeout after the restart and its login's 20 ms, none before; the target lets 8 in
    // at a time: 5 rounds for 40 hosts.
    let first = back.iter().min().copied().expect("hosts");
    let last = back.iter().max().copied().expect("hosts");
    let timeout = REQ_TIMEOUT.as_ms();
    assert!(first >= 1_000 + timeout + 20, "{back:?}");
    assert!(last >= first + 4 * 20, "{back:?}");
    for h in &hosts {
        assert!(h.checker().violations.is_empty());
        let c = disk(h);
        assert_eq!(c.disk().stats().logins, 2);
        let io = c.io_stats();
        assert_eq!(io.unaccounted(), 0, "{io:?}");
        assert_eq!((io.failed, io.lost, io.duplicated), (0, 0, 0));
    }
}

/// The Linux target refuses no login: a disk behind others waits for its turn, its CM
/// sending the REQ again at each timeout (the target drops the copies), and is up when the
/// target serves it. One behind more than its REQs can wait (the CM's sixteen, 36.9 s, or a
/// data LUN's 30 s hold) is given up then, retried under the backoff, and up once the
/// backlog has cleared.
#[test]
fn a_serial_target_answers_late_or_after_the_cm_gave_up() {
    let config = slow_login();
    let run = |backlog_ms: u64| {
        let target = SharedAdmission::new(LoginCapacity::IB_SRPT).expect("valid");
        // Other hosts' logins ahead of this one's, the last ending at `backlog_ms`.
        target
            .lock()
            .try_login(Instant::ZERO, Duration::from_ms(backlog_ms))
            .expect("queued");
        let shared = [(config.initiator.target_lid, target.clone())];
        let mut s = setup(config, Vec::new());
        s.sim.duration = Duration::from_ms(backlog_ms + 60_000);
        let mut h = stack::build_sharing(&s, &shared).expect("builds");
        h.run();
        let d = *disk(&h).disk().stats();
        assert!(disk(&h).disk().is_up(), "{:?}", disk(&h).problem());
        let io = disk(&h).io_stats();
        assert_eq!(
            (io.unaccounted(), io.lost, io.paging_failed),
            (0, 0, 0),
            "{io:?}"
        );
        let stats = target.lock().stats();
        (d, stats, io)
    };
    // Ten seconds behind: four timeouts of 2.3 s pass before the answer, no refusal.
    let (d, s, io) = run(10_000);
    assert_eq!(io.failed, 0, "{io:?}");
    assert_eq!(
        (d.logins, d.login_retries, d.logins_answered_late),
        (1, 0, 0),
        "{d:?}"
    );
    let resent = 10_000 / REQ_TIMEOUT.as_ms();
    assert_eq!(d.req_retries, resent, "{d:?}");
    assert_eq!((s.refused_busy, s.queued), (0, 1));
    assert!(s.longest_wait >= Duration::from_ms(9_990), "{s:?}");
    // Forty seconds behind: past the CM's 16 x 2.3 s, given up, then in.
    // Forty seconds behind: a data LUN's REQs end at its 30 s hold (sent again at each of
    // the CM's thirteen timeouts before it), its held I/O failed as retryable, never lost;
    // the login given up then and retried.
    let (d, s, io) = run(40_000);
    assert_eq!(d.logins_answered_late, 1, "{d:?}");
    assert_eq!(d.logins, 1, "{d:?}");
    assert!(d.login_retries >= 1 && d.req_retries >= 13, "{d:?}");
    assert!(io.failed > 0 && io.failed == io.retryable, "{io:?}");
    assert_eq!(s.refused_busy + s.refused_rate, 0, "{s:?}");
}
