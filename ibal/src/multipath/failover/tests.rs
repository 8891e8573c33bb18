use crate::block::IoRequest;
use crate::disk::DiskConfig;
use crate::multipath::{Multipath, SharedMultipath};
use hcabus::Instant;

fn at(ms: u64) -> Instant {
    Instant::from_ms(ms)
}

fn io(id: u64, lba: u64, write: bool) -> IoRequest {
    IoRequest::stamped(id, lba, write)
}

/// A disk of two paths, both up, with no workload of its own.
fn two_paths() -> SharedMultipath {
    let config = DiskConfig {
        iops: 0,
        ..DiskConfig::default()
    };
    let mp = SharedMultipath::new("disk", config, 2);
    {
        let mut m = mp.lock();
        m.path_is_up(0, at(0));
        m.path_is_up(1, at(0));
    }
    mp
}

/// Queues `reqs` in that order (give_back puts each at the front).
fn queue(m: &mut Multipath, reqs: &[IoRequest]) {
    for r in reqs.iter().rev() {
        m.give_back(0, *r);
    }
}

#[test]
fn only_the_answers_of_other_serving_paths_count() {
    let mp = two_paths();
    let mut m = mp.lock();
    assert_eq!(m.others_answered_at(0), None, "nobody answered yet");
    m.note_answer(0, at(7));
    assert_eq!(
        m.others_answered_at(0),
        None,
        "its own answers do not count"
    );
    m.note_answer(1, at(5));
    m.note_answer(1, at(3));
    assert_eq!(m.others_answered_at(0), Some(at(5)), "the latest answer");
    m.gave_up(1, 2, at(6));
    assert_eq!(
        m.others_answered_at(0),
        None,
        "a suspect path proves nothing"
    );
    m.probe_answered(1, at(7));
    assert_eq!(m.others_answered_at(0), Some(at(5)));
    m.path_is_down(1, at(9), None);
    assert_eq!(
        m.others_answered_at(0),
        None,
        "a path that is down proves nothing"
    );
}

#[test]
fn a_path_that_gave_commands_up_takes_nothing_until_it_answers_again() {
    let mp = two_paths();
    let mut m = mp.lock();
    let reqs = [1, 2, 3, 4].map(|id| io(id, id, false));
    queue(&mut m, &reqs);
    m.gave_up(0, 1, at(1));
    assert!(m.path_suspect(0));
    assert_eq!(m.take(0), None, "suspect: no new I/O");
    assert_eq!(
        m.take(1).map(|r| r.id),
        Some(1),
        "the other path takes it all"
    );
    assert_eq!(m.take(1).map(|r| r.id), Some(2));
    m.gave_up(0, 3, at(2));
    assert_eq!(
        m.path_stats(0).expect("path 0").slow_failovers,
        1,
        "already suspect"
    );
    m.probe_answered(0, at(3));
    m.gave_up(0, 1, at(1));
    m.probe_answered(0, at(3));
    // An answer came: it serves again, in its turn.
    assert_eq!(m.take(1).map(|r| r.id), Some(3));
    assert_eq!(m.take(1), None, "path 0's turn");
    assert_eq!(m.take(0).map(|r| r.id), Some(4));
    let s = m.path_stats(0).expect("path 0");
    assert_eq!((s.slow_failovers, s.given_up), (2, 5));
}

#[test]
fn an_adapter_reset_clears_suspicion_and_fences() {
    let mp = two_paths();
    let mut m = mp.lock();
    m.gave_up(0, 1, at(1));
    m.set_fences(0, [(9u64, 4u64)].into_iter());
    assert!(m.has_fences(0));
    m.path_is_down(0, at(10), None);
    m.failed_over(0, 3, at(10));
    m.path_is_up(0, at(20));
    assert!(!m.path_suspect(0));
    assert!(!m.has_fences(0), "its connection runs nothing more");
    // The path timeline the report draws: each change once, in order, with its instant.
    let (events, dropped) = m.path_events();
    let seen: Vec<_> = events.map(|e| (e.at.as_ms(), e.path, e.kind)).collect();
    use crate::multipath::PathEventKind::*;
    assert_eq!(
        seen,
        [
            (0, 0, Up),
            (0, 1, Up),
            (1, 0, GaveUp { n: 1 }),
            (10, 0, Down),
            (10, 0, Moved { n: 3 }),
            (20, 0, Up),
        ]
    );
    assert_eq!(dropped, 0);
}

#[test]
fn no_write_goes_out_to_a_block_whose_given_up_write_may_still_run() {
    let mp = two_paths();
    let mut m = mp.lock();
    // Path 0 gave a write to block 7 up; path 1 serves.
    m.gave_up(0, 1, at(1));
    m.set_fences(0, [(5u64, 7u64)].into_iter());
    queue(
        &mut m,
        &[
            io(1, 7, true),
            io(2, 7, false),
            io(3, 8, true),
            io(4, 7, true),
            io(5, 7, true),
        ],
    );
    // The write to block 7 waits; a read of it, a write elsewhere, and the re-issue of the
    // given-up write itself (the same data) go by.
    assert_eq!(m.take(1).map(|r| r.id), Some(2));
    assert_eq!(m.take(1).map(|r| r.id), Some(3));
    assert_eq!(m.take(1).map(|r| r.id), Some(5));
    assert_eq!(m.take(1), None, "only fenced writes are left");
    assert_eq!(m.next_wake(1, true), None, "and nothing wakes for them");
    m.set_fences(0, core::iter::empty());
    assert_eq!(
        m.take(1).map(|r| r.id),
        Some(1),
        "the abort answered: in order again"
    );
    assert_eq!(m.take(1).map(|r| r.id), Some(4));
}
