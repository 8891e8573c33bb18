//! An abort that goes unanswered and the write fence: when a path drops its connection.

use hcabus::Duration;

use crate::stack::LabParts;

use super::{healthy_route, path, run_to, shared, slow_from, world, Paths, WIDE};

/// Path 0's route swallows everything from 100 ms: its commands are given up as on a slow
/// route, but their aborts are never answered either; past the abort timeout (0.5 s) the
/// path drops its connection, and its REQs go unanswered while the route is dead (each
/// sent again at the CM's timeout).
#[test]
fn a_blackholed_path_drops_its_connection_when_its_aborts_go_unanswered() {
    let mut w = world(Paths {
        routes: [
            slow_from(100, Duration::from_ms(300), true),
            healthy_route(),
        ],
        n_blocks: WIDE,
        ..Paths::default()
    });
    let (_, p, d) = run_to(&mut w, 99);
    assert_eq!(p[0].ios, d[0].answers);
    let (_, p, d) = run_to(&mut w, 400);
    // What was sent before 100 ms, answered; nothing since.
    let answered = d[0].answers;
    assert_eq!(p[0].ios, answered);
    assert!(path(&w, 0).disk().is_up());
    assert_eq!(
        (p[0].given_up, d[0].abort_timeouts, d[0].aborts_answered),
        (4, 0, 0)
    );
    let (io, p, d) = run_to(&mut w, 700);
    let c = path(&w, 0);
    assert!(!c.disk().is_up() && !shared(&w).lock().path_up(0));
    assert_eq!((d[0].abort_timeouts, d[0].logins), (1, 1));
    assert!(d[0].login_retries == 0 && p[0].down_us > 0, "{d:?} {p:?}");
    assert_eq!(
        (io.failed, d[0].late_discarded, d[0].answers),
        (0, 0, answered)
    );
    // Nothing sent after 100 ms reached the target, and the abort timeout (0.5 s after
    // the first give-up) dropped the connection before the transport's budget (537 ms
    // after the first swallowed send) would have.
    assert_eq!(
        (d[0].commands_sent, c.lab_target().stats().commands),
        (answered + 4, answered)
    );
    assert_eq!(d[0].transport_errors, 0);
    let (io, p, d) = run_to(&mut w, 1_500);
    assert_eq!((io.failed, p[0].ios), (0, answered));
    // Its REQ, unanswered at the drop (about 0.6 s), not sent again before its timeout.
    assert_eq!((d[0].req_retries, d[0].login_retries), (0, 0), "{d:?}");
    // No write came to a block a given-up write holds (`WIDE`): the longest wait is a
    // give-up's, two timeouts and a round trip.
    assert!(io.max_latency_us < 20_000, "{}", io.max_latency_us);
}

/// The same blackhole on a disk of 256 blocks: soon after the give-ups a newer write comes
/// to a block whose given-up write may still run at the target, and waits behind it (the
/// write fence). The path does not give its aborts the half second's floor then: it drops
/// its connection at twice its timeout, and the waiting write goes out on the other path.
#[test]
fn a_write_held_by_a_fence_drops_the_connection_without_the_floor() {
    let mut w = world(Paths {
        routes: [
            slow_from(100, Duration::from_ms(300), true),
            healthy_route(),
        ],
        n_blocks: 256,
        ..Paths::default()
    });
    let (_, p, d) = run_to(&mut w, 120);
    assert_eq!((p[0].given_up, d[0].abort_timeouts), (3, 0));
    // Under the floor it would have been dropped at about 610 ms.
    let (_, _, d) = run_to(&mut w, 130);
    assert_eq!(d[0].abort_timeouts, 1, "{d:?}");
    assert!(!path(&w, 0).disk().is_up());
    let (io, p, d) = run_to(&mut w, 1_500);
    assert_eq!((io.failed, d[0].abort_timeouts), (0, 1));
    assert!(p[0].down_us > 0, "{p:?}");
    // The longest wait is the give-up's (two timeouts and a round trip), not the floor's.
    assert!(io.max_latency_us < 20_000, "{io:?}");
}
