//! The health monitor's count of unchanged polls, and a cause found again.

use super::*;

/// The polls in a row that found the counter unchanged are counted one by one, as
/// QUERY_HEALTH reports them; the fourth equal sample is the stall.
#[test]
fn unchanged_polls_are_counted_up_to_the_stall() {
    let mut h = harness();
    let _a = h.reg("a");
    let now = h.now();
    h.hca_mut().set_now(now);
    h.hca_mut().stall_health();
    let mut seen = Vec::new();
    for _ in 0..3 {
        h.advance(1_000);
        seen.push(h.c().health_unchanged_polls());
    }
    assert_eq!(seen, [0, 1, 2]);
    assert_eq!(h.c().state(), State::Operational);
}

/// A stalled counter read again while its own reset quiesces is no news: it joins
/// nothing and opens no second error.
#[test]
fn a_stall_found_again_during_its_own_reset_changes_nothing() {
    let mut h = harness_with(
        Policy {
            quiesce_deadline_ms: 5_000,
            ..policy()
        },
        8,
    );
    let _wedged = h.reg("wedged");
    let now = h.now();
    h.hca_mut().set_now(now);
    h.hca_mut().stall_health();
    h.advance(4_000);
    assert_eq!(h.c().state(), State::Quiescing);
    let errors = h.c().health_report().errors;
    h.advance(3_000);
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "still waiting for the client"
    );
    assert_eq!(h.c().counters().joined_requests, 0);
    assert_eq!(h.c().health_report().errors, errors);
    assert_eq!(h.c().last_reset().expect("record").requests, 1);
}

/// A health read that never answers, found by the next poll during a quiesce, makes the
/// reset fatal and the watch goes on: the next poll is armed one interval later.
#[test]
fn an_unanswered_read_during_a_quiesce_is_fatal_and_the_watch_goes_on() {
    let mut h = harness_with(
        Policy {
            quiesce_deadline_ms: 10_000,
            ..policy()
        },
        8,
    );
    let _wedged = h.reg("wedged");
    h.admin(AdminReset::Forced).expect("forced");
    assert_eq!(h.c().state(), State::Quiescing);
    h.leave_health_reads_unanswered();
    let interval = policy().health_poll_interval();
    // One poll issues the read; the next finds it unanswered.
    h.advance(2 * interval.as_us() / 1000);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.reason, ResetReason::Catastrophic, "unreadable: fatal");
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "still waiting for the client"
    );
    let reads = h
        .hw_steps()
        .iter()
        .filter(|s| **s == HwStep::ReadHealth)
        .count();
    assert_eq!(
        reads, 1,
        "no new read in the instant the old one was given up"
    );
    let (at, _) = h
        .timers()
        .armed(TimerId::HealthPoll)
        .expect("the watch goes on");
    assert_eq!(at, h.now() + interval);
}
