//! The disk's queue on its own: the hold while no path is up, the fast fail past it, the
//! accounting, the turns and the room (the suites of tests/tests/suites/multipath.rs run it inside
//! whole hosts; these pin its rules one by one, fast enough for mutation testing).

use super::*;
use crate::disk::PathTimeout;
use crate::workload::fake::Steady;
use rand::SeedableRng;

fn at(ms: u64) -> Instant {
    Instant::from_ms(ms)
}

fn rng() -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(9)
}

/// A disk of two paths issuing `iops`, the adaptive timeout, room for `hold` held I/Os.
fn disk(iops: u32, hold: u16) -> SharedMultipath {
    let config = DiskConfig {
        queue_depth: 1,
        hold_capacity: hold,
        path_timeout: PathTimeout::DEFAULT,
        ..DiskConfig::default()
    };
    let workload = Steady::boxed(iops, SharedMultipath::capacity(&config, 2));
    SharedMultipath::new("disk", config, 2, workload)
}

fn io(id: u64) -> IoRequest {
    IoRequest::stamped(id, id, false)
}

#[test]
fn the_queue_holds_io_while_no_path_is_up_and_fails_it_past_the_hold() {
    let mp = disk(1_000, 224);
    assert!(mp.same(&mp.clone()) && !mp.same(&disk(1_000, 224)));
    let mut m = mp.lock();
    assert_eq!((m.name(), m.config().hold_capacity), ("disk", 224));
    let mut r = rng();
    m.path_is_up(0, at(0));
    m.path_is_up(1, at(0));
    assert!(m.path_up(0) && !m.path_dead(0));
    // One I/O a millisecond: 0, 1 and 2 ms.
    m.generate(at(2), &mut r);
    assert!(m.tracks(1) && m.tracks(3) && !m.tracks(4));
    assert_eq!(m.stats().max_held, 0, "paths are up: nothing is held");
    let hold = Some(Duration::from_ms(100));
    m.path_is_down(0, at(5), hold);
    m.path_is_down(1, at(5), hold);
    assert!(!m.path_up(0));
    m.generate(at(10), &mut r);
    assert_eq!(m.stats().max_held, 11, "3 from before and 8 since");
    m.see(at(50));
    assert_eq!(m.now(), at(50));
    assert_eq!(m.stats().no_path_us, 45_000, "the outage so far");
    assert_eq!(m.path_stats(0).map(|s| s.down_us), Some(45_000));
    assert_eq!(
        m.next_wake(0, true),
        Some(at(11)),
        "the workload's next tick"
    );
    m.check_hold(at(104));
    assert_eq!(m.stats().hold_timeouts, 0);
    m.check_hold(at(105));
    assert_eq!(m.stats().hold_timeouts, 1, "at the deadline itself");
    m.check_hold(at(106));
    let s = m.stats();
    assert_eq!(
        (s.hold_timeouts, s.failed_unpathed),
        (1, 11),
        "once, everything held"
    );
    assert_eq!(
        m.next_wake(0, true),
        Some(at(11)),
        "no hold deadline any more"
    );
    // Past the hold, new I/O fails at once (retryable) until a path is up.
    m.generate(at(106), &mut r);
    assert_eq!(m.stats().failed_unpathed, 107);
    assert_eq!(m.workload().stats().retryable, 107);
    m.path_is_up(0, at(200));
    assert_eq!(m.stats().no_path_us, 195_000);
    assert_eq!(m.path_stats(0).map(|s| s.down_us), Some(195_000));
    m.generate(at(202), &mut r);
    assert!(m.tracks(108), "held for the path again");
    let live = m.io_stats(true, |_| false);
    let dead = m.io_stats(false, |_| false);
    assert_eq!((live.in_flight, live.lost, live.failed), (96, 0, 107));
    assert_eq!(
        (dead.in_flight, dead.lost),
        (0, 96),
        "no live path: owed and lost"
    );
    assert_eq!(live.paging_failed, 0, "not the paging path");
}

#[test]
fn every_path_dead_fails_what_is_held_and_what_comes() {
    let mp = disk(1_000, 224);
    let mut m = mp.lock();
    let mut r = rng();
    m.path_is_up(0, at(0));
    m.path_is_up(1, at(0));
    m.path_is_down(1, at(0), None);
    m.path_is_down(0, at(0), None);
    m.generate(at(4), &mut r);
    m.path_is_dead(0, at(5), IoStatus::DeviceRemoved);
    assert!(
        m.path_dead(0) && m.tracks(1),
        "one path may still come back"
    );
    m.path_is_dead(1, at(6), IoStatus::DeviceRemoved);
    assert!(!m.tracks(1), "none can: failed");
    assert_eq!(m.stats().failed_unpathed, 5);
    m.generate(at(9), &mut r);
    assert_eq!(m.stats().failed_unpathed, 10, "failed as it comes");
    assert_eq!(m.workload().stats().retryable, 0, "removed, not retryable");
}

#[test]
fn paths_take_turns_and_a_full_path_or_a_lone_probed_one_does_not_hold_up_the_queue() {
    let mp = disk(0, 224);
    let mut m = mp.lock();
    m.path_is_up(0, at(0));
    m.path_is_up(1, at(0));
    for id in 1..=6 {
        m.enqueue(io(id)).expect("room");
    }
    assert_eq!(m.take(0).map(|r| r.id), Some(1));
    assert!(!m.may_take(0, true), "path 1's turn");
    assert!(m.may_take(1, true));
    m.note_room(1, false);
    assert!(m.may_take(0, true), "path 1 cannot send: its turn passes");
    m.note_room(1, true);
    assert_eq!(m.take(1).map(|r| r.id), Some(2));
    assert_eq!(m.path_stats(0).map(|s| s.taken), Some(1));
    assert_eq!(m.take(0).map(|r| r.id), Some(3));
    assert_eq!(m.path_stats(0).map(|s| s.taken), Some(2));
    // Path 0 given up, then path 1 gone: path 0 is all there is, and serves in full.
    m.gave_up(0, 1, at(1), &mut rand::rngs::mock::StepRng::new(0, 0));
    m.path_is_down(1, at(1), None);
    assert_eq!(m.take(0).map(|r| r.id), Some(4));
    assert_eq!(m.take(0).map(|r| r.id), Some(5), "not one probe at a time");
    assert_eq!(m.path_stats(0).map(|s| s.probes), Some(0));
}

#[test]
fn the_queue_refuses_past_its_bound_and_counts_what_moves() {
    // Room for 2 held and a request limit of 1 on each of 2 paths: 4.
    let mp = disk(0, 2);
    let mut m = mp.lock();
    for id in 1..=4 {
        m.enqueue(io(id)).expect("room");
    }
    assert_eq!(m.enqueue(io(5)).map_err(|r| r.id), Err(5));
    m.give_back(0, io(6));
    assert!(
        !m.tracks(6),
        "no room: refused (and logged), the queue never grows"
    );
    assert_eq!(m.path_stats(0).map(|s| s.moved), Some(1));
    m.failed_over(0, 1, at(3));
    assert_eq!(m.path_stats(0).map(|s| s.failovers), Some(1));
    let ok = IoCompletion {
        id: 1,
        status: IoStatus::Ok,
        checksum: 0,
    };
    m.complete(0, ok, at(4));
    m.complete(0, IoCompletion { id: 3, ..ok }, at(4));
    let failed = IoCompletion {
        id: 2,
        status: IoStatus::Retryable,
        ..ok
    };
    m.complete(0, failed, at(4));
    let s = m.path_stats(0).expect("path 0");
    assert_eq!((s.ios, s.failed), (2, 1));
}

#[test]
fn a_probe_due_later_wakes_the_path_then_and_not_before() {
    let mp = disk(0, 224);
    let mut m = mp.lock();
    m.path_is_up(0, at(0));
    m.path_is_up(1, at(0));
    let mut least = rand::rngs::mock::StepRng::new(0, 0);
    let fresh = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        m.hash_state(&mut h);
        core::hash::Hasher::finish(&h)
    };
    m.gave_up(0, 1, at(0), &mut least);
    let probed = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        m.hash_state(&mut h);
        core::hash::Hasher::finish(&h)
    };
    assert_ne!(fresh, probed, "the probe is part of the queue's state");
    assert_eq!(m.next_wake(0, true), Some(Instant::from_us(2_500)));
    // Due now with nothing to send: no wake at all (a wake now would find nothing to do).
    m.see(Instant::from_us(2_500));
    assert_eq!(m.next_wake(0, true), None);
}

#[test]
fn an_outage_is_timed_from_the_last_path_down_and_only_then() {
    let mp = disk(0, 224);
    let mut m = mp.lock();
    let hold = Some(Duration::from_ms(100));
    m.path_is_up(0, at(0));
    // Path 1 never came up: it is not down since any time.
    m.path_is_down(1, at(0), hold);
    m.see(at(30));
    assert_eq!(m.path_stats(1).map(|s| s.down_us), Some(0));
    // One path of two down: no outage, no hold.
    m.path_is_up(1, at(30));
    m.path_is_down(0, at(40), hold);
    m.see(at(1_000));
    m.check_hold(at(1_000));
    assert_eq!((m.stats().no_path_us, m.stats().hold_timeouts), (0, 0));
    // Both down: the outage and its hold run from then, however often it is said again.
    m.path_is_down(1, at(1_000), hold);
    m.path_is_down(1, at(1_050), hold);
    m.path_is_down(0, at(1_050), hold);
    assert_eq!(m.next_wake(0, true), Some(at(1_100)), "the hold deadline");
    m.see(at(1_080));
    assert_eq!(m.stats().no_path_us, 80_000);
    m.check_hold(at(1_100));
    assert_eq!(m.stats().hold_timeouts, 1);
    assert_eq!(
        m.next_wake(0, true),
        None,
        "past its hold, nothing to wait for"
    );
}

#[test]
fn a_path_back_from_down_waits_for_the_turn_it_lost() {
    let mp = disk(0, 224);
    let mut m = mp.lock();
    m.path_is_up(0, at(0));
    m.path_is_up(1, at(0));
    m.enqueue(io(1)).expect("room");
    // The turn is path 0's; it goes down and comes back: the turn has passed to path 1.
    m.path_is_down(0, at(1), None);
    m.path_is_up(0, at(2));
    assert!(!m.may_take(0, true));
    assert!(m.may_take(1, true));
}

/// The path log keeps the newest 256 events and counts the ones it dropped.
#[test]
fn the_path_log_keeps_the_newest_events_and_counts_the_rest() {
    let mp = disk(1_000, 224);
    let mut m = mp.lock();
    for ms in 0..150 {
        m.path_is_up(0, at(2 * ms));
        m.path_is_down(0, at(2 * ms + 1), None);
    }
    let (events, dropped) = m.path_events();
    let events: std::vec::Vec<_> = events.collect();
    assert_eq!((events.len(), dropped), (256, 300 - 256));
    assert_eq!(events[0].at, at(300 - 256), "the oldest kept");
    assert_eq!(events[255].at, at(299), "the newest");
}

/// A disk owes at most what its queue holds and what each path has on the wire; a disk of
/// no path counts one, a disk of too many the most there may be.
#[test]
fn a_disks_capacity_is_its_hold_and_every_paths_request_limit() {
    let config = DiskConfig {
        queue_depth: 32,
        hold_capacity: 224,
        ..DiskConfig::default()
    };
    assert_eq!(SharedMultipath::capacity(&config, 2), 224 + 2 * 32);
    assert_eq!(SharedMultipath::capacity(&config, 0), 224 + 32);
    assert_eq!(
        SharedMultipath::capacity(&config, MAX_PATHS + 5),
        224 + MAX_PATHS * 32
    );
}
