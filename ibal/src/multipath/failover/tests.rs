use crate::disk::{DiskConfig, PathTimeout};
use crate::io::IoRequest;
use crate::multipath::{Multipath, SharedMultipath, PROBES_TO_SERVE, PROBE_BACKOFF_MAX};
use crate::workload::fake::Steady;
use hcabus::{Duration, Instant};
use rand::rngs::mock::StepRng;
use rand::SeedableRng;

/// Jitter at its least: a probe waits half its backoff.
fn least() -> StepRng {
    StepRng::new(0, 0)
}

fn at(ms: u64) -> Instant {
    Instant::from_ms(ms)
}

fn io(id: u64, lba: u64, write: bool) -> IoRequest {
    IoRequest::stamped(id, lba, write)
}

/// A disk of two paths, both up, with no workload of its own.
fn two_paths() -> SharedMultipath {
    let config = DiskConfig {
        path_timeout: PathTimeout::DEFAULT,
        ..DiskConfig::default()
    };
    let mp = SharedMultipath::new("disk", config, 2, Steady::boxed(0, 0));
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
    m.gave_up(1, 2, at(6), &mut least());
    assert_eq!(
        m.others_answered_at(0),
        None,
        "a probed path proves nothing"
    );
    m.path_answered(1, (u64::from(PROBES_TO_SERVE), 0), at(7), &mut least());
    assert_eq!(m.others_answered_at(0), Some(at(5)));
    m.path_is_down(1, at(9), None);
    assert_eq!(
        m.others_answered_at(0),
        None,
        "a path that is down proves nothing"
    );
}

#[test]
fn a_path_that_gave_commands_up_takes_one_probe_at_a_time_after_its_backoff() {
    let mp = two_paths();
    let mut m = mp.lock();
    let reqs = [1, 2, 3, 4, 5, 6, 7, 8].map(|id| io(id, id, false));
    queue(&mut m, &reqs);
    m.gave_up(0, 1, at(1), &mut least());
    assert!(m.path_suspect(0));
    assert_eq!(m.take(0), None, "given up: nothing before its first probe");
    assert_eq!(m.take(1).map(|r| r.id), Some(1), "the other path takes it");
    // The backoff starts at the timeout's floor, 5 ms; the least jitter waits half of it.
    assert_eq!(m.next_wake(0, true), Some(Instant::from_us(3_500)));
    m.see(Instant::from_us(3_500));
    assert_eq!(m.take(0).map(|r| r.id), Some(2), "its probe");
    assert_eq!(m.take(0), None, "one probe at a time");
    assert_eq!(m.take(1).map(|r| r.id), Some(3), "the probe took no turn");
    // A prompt answer: the next probe goes at once; a slow one doubles the backoff.
    m.path_answered(0, (1, 0), at(4), &mut least());
    assert_eq!(m.take(0).map(|r| r.id), Some(4));
    m.path_answered(0, (0, 1), at(5), &mut least());
    assert_eq!(m.take(0), None, "backing off");
    assert_eq!(m.next_wake(0, true), Some(at(10)), "10 ms, jittered to 5");
    m.gave_up(0, 1, at(6), &mut least());
    assert_eq!(m.next_wake(0, true), Some(at(16)), "20 ms, jittered to 10");
    let s = m.path_stats(0).expect("path 0");
    assert_eq!((s.slow_failovers, s.given_up, s.probes), (1, 2, 2));
    // Three prompt answers in a row: it serves again, in its turn.
    m.see(at(16));
    for id in [5, 6, 7] {
        assert_eq!(m.take(0).map(|r| r.id), Some(id));
        m.path_answered(0, (1, 0), at(16), &mut least());
    }
    assert!(!m.path_suspect(0));
    assert_eq!(m.path_stats(0).expect("path 0").restored, 1);
    assert_eq!(m.take(1).map(|r| r.id), Some(8));
}

#[test]
fn the_backoff_doubles_to_its_bound_and_its_jitter_stays_within_it() {
    let mp = two_paths();
    let mut m = mp.lock();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut now = at(0);
    let mut waits = Vec::new();
    for _ in 0..20 {
        m.gave_up(0, 1, now, &mut rng);
        let next = m.next_wake(0, true).expect("a probe is due");
        waits.push(next.saturating_since(now));
        now = next;
        m.see(now);
    }
    let most = PROBE_BACKOFF_MAX;
    assert!(
        waits.iter().all(|w| *w <= most),
        "never past the bound: {waits:?}"
    );
    let last = waits[19];
    assert!(
        last >= Duration::from_us(most.as_us() / 2),
        "at the bound, at least half of it: {last}"
    );
    assert!(
        waits.windows(2).take(6).all(|w| w[0] < w[1]),
        "growing at first: {waits:?}"
    );
    let distinct: std::collections::HashSet<_> = waits[12..].iter().collect();
    assert!(distinct.len() > 1, "jittered: {waits:?}");
}

#[test]
fn an_adapter_reset_clears_suspicion_and_fences() {
    let mp = two_paths();
    let mut m = mp.lock();
    m.gave_up(0, 1, at(1), &mut least());
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

/// A path whose port went dark keeps its connection while the transport retransmits:
/// a write it gave up may still land when the port is back, so its fence holds, and so does
/// its probe; it takes no I/O meanwhile. Back with its connection, it is still probed; its
/// connection lost after all (the ride's end), both go, as at any loss.
#[test]
fn a_path_riding_a_dark_port_keeps_its_fences_and_its_probe() {
    let mp = two_paths();
    let mut m = mp.lock();
    m.gave_up(0, 1, at(1), &mut least());
    m.set_fences(0, [(9u64, 4u64)].into_iter());
    m.path_is_dark(0, at(10), None);
    assert!(!m.path_up(0), "no I/O for it");
    assert!(m.has_fences(0), "its given-up write may still run");
    assert!(m.path_suspect(0));
    queue(&mut m, &[io(1, 4, true)]);
    assert_eq!(m.take(1), None, "the write behind the fence waits");
    m.path_is_up(0, at(20));
    assert!(m.has_fences(0) && m.path_suspect(0), "the same connection");
    m.path_is_dark(0, at(30), None);
    m.path_is_down(0, at(40), None);
    assert!(!m.has_fences(0), "its connection runs nothing more");
    assert!(!m.path_suspect(0), "fresh when it logs in again");
    assert_eq!(m.take(1).map(|r| r.id), Some(1));
}

#[test]
fn no_write_goes_out_to_a_block_whose_given_up_write_may_still_run() {
    let mp = two_paths();
    let mut m = mp.lock();
    // Path 0 gave a write to block 7 up; path 1 serves.
    m.gave_up(0, 1, at(1), &mut least());
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

#[test]
fn a_probe_given_back_unsent_is_out_no_more_and_a_reset_ends_the_probing() {
    let mp = two_paths();
    let mut m = mp.lock();
    queue(&mut m, &[io(1, 1, false), io(2, 2, false)]);
    m.gave_up(0, 1, at(1), &mut least());
    m.see(at(10));
    let probe = m.take(0).expect("its probe");
    assert_eq!(m.take(0), None, "one probe out");
    // The disk could not send it (its upward queue full): it comes back, and the next may go.
    m.give_back(0, probe);
    assert_eq!(m.take(0).map(|r| r.id), Some(1));
    // Its adapter resets while it is down (it had dropped its own connection): fresh.
    m.keep_probing(0);
    m.path_is_down(0, at(11), None);
    assert!(m.path_suspect(0), "its own drop keeps it probed");
    m.path_reset(0);
    m.path_is_up(0, at(12));
    assert!(!m.path_suspect(0), "the adapter's reset makes it fresh");
}

#[test]
fn a_long_fixed_timeout_probes_within_the_backoffs_bound() {
    let config = DiskConfig {
        path_timeout: PathTimeout::Fixed(Duration::from_ms(30_000)),
        ..DiskConfig::default()
    };
    let mp = SharedMultipath::new("disk", config, 2, Steady::boxed(0, 0));
    let mut m = mp.lock();
    m.path_is_up(0, at(0));
    m.path_is_up(1, at(0));
    m.gave_up(0, 1, at(0), &mut least());
    let first = m.next_wake(0, true).expect("a probe is due");
    assert_eq!(
        first,
        Instant::from_us(PROBE_BACKOFF_MAX.as_us() / 2),
        "2 s, jittered to 1 s, not 15 s"
    );
}

#[test]
fn each_path_lifts_only_its_own_fences() {
    let mp = two_paths();
    let mut m = mp.lock();
    m.set_fences(0, [(1u64, 10u64)].into_iter());
    m.set_fences(1, [(2u64, 20u64)].into_iter());
    assert!(m.has_fences(0) && m.has_fences(1));
    m.set_fences(0, core::iter::empty());
    assert!(!m.has_fences(0));
    assert!(m.has_fences(1), "path 1's given-up write may still run");
    m.path_is_down(1, at(5), None);
    assert!(!m.has_fences(1));
    // Never more fences than every path's whole request limit (the room reserved).
    let limit = m.fence_limit;
    m.set_fences(0, (0..limit as u64 + 5).map(|i| (i, i)));
    assert_eq!(m.fences.len(), limit);
}

#[test]
fn a_prompt_answer_sends_the_next_probe_at_once_and_no_news_changes_nothing() {
    let mp = two_paths();
    let mut m = mp.lock();
    queue(&mut m, &[io(1, 1, false), io(2, 2, false)]);
    m.gave_up(0, 1, at(1), &mut least());
    m.path_answered(0, (0, 0), at(1), &mut least());
    assert_eq!(m.take(0), None, "nothing new: still backing off");
    // A command still out from before the give-up answers promptly: probe at once.
    m.path_answered(0, (1, 0), at(1), &mut least());
    assert_eq!(m.take(0).map(|r| r.id), Some(1));
}

#[test]
fn a_path_dropping_its_own_connection_stays_probed_with_its_probe_taken_back() {
    let mp = two_paths();
    let mut m = mp.lock();
    queue(&mut m, &[io(1, 1, false), io(2, 2, false)]);
    m.gave_up(0, 1, at(1), &mut least());
    m.see(at(10));
    assert!(m.take(0).is_some(), "its probe is out");
    m.keep_probing(0);
    m.path_is_down(0, at(11), None);
    m.path_is_down(0, at(12), None);
    m.path_is_up(0, at(13));
    assert!(m.path_suspect(0), "still probed after its re-login");
    assert_eq!(
        m.take(0).map(|r| r.id),
        Some(2),
        "the probe it had is out no more"
    );
}

#[test]
fn a_path_given_up_again_soon_after_serving_resumes_its_backoff() {
    let given_up_again = |after_ms: u64| {
        let mp = two_paths();
        let mut m = mp.lock();
        // Given up, then failed probes: 5, 10, 20 ms of backoff; then three prompt answers.
        m.gave_up(0, 1, at(0), &mut least());
        m.gave_up(0, 1, at(0), &mut least());
        m.gave_up(0, 1, at(0), &mut least());
        m.path_answered(0, (3, 0), at(100), &mut least());
        assert!(!m.path_suspect(0));
        let t = at(100 + after_ms);
        m.gave_up(0, 1, t, &mut least());
        m.next_wake(0, true).expect("a probe").saturating_since(t)
    };
    // Within 2 s: twice the 20 ms it had reached, jittered to half.
    assert_eq!(given_up_again(1_999), Duration::from_ms(20));
    // 2 s or more of serving: from the floor again.
    assert_eq!(given_up_again(2_000), Duration::from_us(2_500));
}

#[test]
fn the_jitter_spreads_probes_over_half_the_backoff() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let d = Duration::from_ms(2_000);
    let waits: Vec<u64> = (0..200)
        .map(|_| super::jittered(d, &mut rng).as_us())
        .collect();
    let (lo, hi) = (
        *waits.iter().min().expect("some"),
        *waits.iter().max().expect("some"),
    );
    assert!(lo >= 1_000_000 && hi <= 2_000_000, "{lo}..{hi}");
    assert!(
        hi - lo > 800_000,
        "spread over most of the half: {lo}..{hi}"
    );
}

/// A large write is fenced by any block it moves: path 0 gave up a write of blocks 20 to
/// 35 (one fence a block); a newer write of 16 blocks that ends on block 20, or of one in
/// the middle, waits, and one that ends just before it goes by; so does the given-up
/// write's own re-issue.
#[test]
fn a_large_write_is_fenced_by_any_block_it_moves() {
    let mp = two_paths();
    let mut m = mp.lock();
    m.gave_up(0, 1, at(1), &mut least());
    let given_up = IoRequest {
        blocks: 16,
        ..io(9, 20, true)
    };
    m.set_fences(0, (20..36u64).map(|b| (9u64, b)));
    let large = |id, lba| IoRequest {
        blocks: 16,
        ..io(id, lba, true)
    };
    queue(
        &mut m,
        &[large(1, 5), io(2, 27, true), large(3, 4), given_up],
    );
    assert!(m.fence_holds_io(0), "a write waits behind path 0's fences");
    assert_eq!(m.take(1).map(|r| r.id), Some(3), "blocks 4 to 19");
    assert_eq!(m.take(1).map(|r| r.id), Some(9), "its own re-issue");
    assert_eq!(m.take(1), None, "5 to 20 and 27 wait");
    m.set_fences(0, core::iter::empty());
    assert_eq!(m.take(1).map(|r| r.id), Some(1));
    assert_eq!(m.take(1).map(|r| r.id), Some(2));
}
