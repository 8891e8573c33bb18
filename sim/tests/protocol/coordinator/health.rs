//! Health: the monitor's count of unchanged polls, a cause found again, health while
//! quiescing, and the device's error state (docs/design.md §5 "Health").

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

/// `health_stall_polls` is how many polls in a row must find the counter still: the one
/// after that many is the stall, for the least and the most the policy takes.
#[test]
fn the_policy_says_how_many_still_polls_make_a_hang() {
    for polls in [1, 6, hcabus::policy::HEALTH_STALL_POLLS_MAX] {
        let mut h = harness_with(
            Policy {
                health_stall_polls: polls,
                ..policy()
            },
            8,
        );
        let _a = h.reg("a");
        let now = h.now();
        h.hca_mut().set_now(now);
        h.hca_mut().stall_health();
        h.advance(u64::from(polls) * 1_000);
        assert_eq!(h.c().state(), State::Operational, "{polls} still polls");
        assert_eq!(h.c().health_unchanged_polls(), polls - 1);
        h.advance(1_000);
        assert_eq!(h.c().state(), State::Quiescing, "{polls} still polls");
        assert_eq!(
            h.c().last_reset().expect("record").reason,
            ResetReason::HealthStall
        );
    }
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
    assert_eq!(
        h.health_reads(),
        1,
        "no new read in the instant the old one was given up"
    );
    let (at, _) = h
        .timers()
        .armed(TimerId::HealthPoll)
        .expect("the watch goes on");
    assert_eq!(at, h.now() + interval);
}

fn planned_with_wedged_client(quiesce_deadline_ms: u64) -> (H, ClientId, ClientId) {
    let mut h = harness_with(
        Policy {
            abort_on_unresponsive: true,
            quiesce_deadline_ms,
            ..policy()
        },
        8,
    );
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Planned).expect("planned");
    h.consent(v).expect("consent");
    h.execute(v).expect("vetoer ready");
    (h, v, wedged)
}

#[test]
fn catastrophic_found_by_the_poll_while_quiescing_makes_a_planned_reset_fatal() {
    let (mut h, v, wedged) = planned_with_wedged_client(3_000);
    h.advance(100);
    h.hca_mut().inject_catastrophic(0xbad);
    h.advance(900);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.reason, ResetReason::Catastrophic);
    assert!(!r.planned, "the poll made it fatal before the deadline");
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, Epoch(1), busy())),
        Err(VetoError::NoQueryPending)
    );
    h.advance(2_000 + 5_000);
    assert_eq!(h.c().counters().resets_started, 1, "one reset");
    assert_eq!(h.c().counters().resets_aborted, 0, "no abort");
    assert_eq!(h.asserts(), 1);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.events_of(wedged), [Reset, ResetEnd]);
    assert_eq!(h.c().last_reset().expect("record").forced(), [wedged]);
}

#[test]
fn catastrophic_between_polls_is_found_by_the_read_that_closes_the_quiesce() {
    // The deadline comes before the next poll: only the closing read can see the error.
    let (mut h, _v, wedged) = planned_with_wedged_client(500);
    h.advance(100);
    h.hca_mut().inject_catastrophic(0xbad);
    h.advance(400 + 5_000);
    assert_eq!(h.c().counters().resets_started, 1);
    assert_eq!(h.c().counters().resets_aborted, 0);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    assert_eq!(h.events_of(wedged), [Reset, ResetEnd]);
    assert_eq!(h.c().state(), State::Operational);
}

/// The read that closes a quiesce is one issued after it ended. A poll's read still out when
/// the last client is done may have sampled the device before the clients' last acts: its
/// answer is judged but closes nothing, and the read issued after it decides.
#[test]
fn a_poll_read_outstanding_at_the_close_does_not_decide_the_quiesce() {
    let mut h = harness_with(
        Policy {
            quiesce_deadline_ms: 10_000,
            ..policy()
        },
        8,
    );
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    let a = h.reg("a");
    h.admin(AdminReset::Planned).expect("planned");
    h.consent(v).expect("consent");
    h.execute(v).expect("vetoer ready");
    assert_eq!(h.c().state(), State::Quiescing);
    h.hold_health_reads();
    h.advance(1_000);
    assert_eq!(h.held_health_reads(), 1, "a poll's read is out");
    h.execute(a).expect("the last client ready");
    assert_eq!(h.held_health_reads(), 1, "one read out at a time");
    h.answer_health_read();
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "the poll's answer closes nothing"
    );
    assert_eq!(
        h.held_health_reads(),
        1,
        "the closing read, issued after it"
    );
    h.hca_mut().inject_catastrophic(0xbad);
    h.answer_health_read();
    assert_eq!(h.c().state(), State::Resetting);
    let r = h.c().last_reset().expect("record");
    assert_eq!(
        r.reason,
        ResetReason::Catastrophic,
        "the closing read decided"
    );
    assert!(!r.planned);
}

/// The deadline closes the quiesce with a poll's read out: as when the barrier completes,
/// that read's answer closes nothing (a client leaving meanwhile changes nothing), and the
/// read after it decides.
#[test]
fn a_deadline_with_a_poll_read_out_waits_for_the_read_after_it() {
    let (mut h, _v, wedged) = planned_with_wedged_client(1_500);
    h.hold_health_reads();
    h.advance(1_000);
    assert_eq!(h.held_health_reads(), 1, "a poll's read is out");
    h.advance(500);
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "the deadline closed it; a read decides"
    );
    assert_eq!(h.held_health_reads(), 1, "one read out at a time");
    h.call(|c, now| c.unregister(now, wedged))
        .expect("unregister");
    h.pump();
    h.answer_health_read();
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "the poll's answer closes nothing"
    );
    assert_eq!(
        h.held_health_reads(),
        1,
        "the closing read, issued after it"
    );
    h.answer_health_read();
    assert_ne!(h.c().state(), State::Quiescing, "the closing read decided");
}

#[test]
fn unresponsive_abort_goes_ahead_when_the_closing_read_is_healthy() {
    let (mut h, v, wedged) = planned_with_wedged_client(500);
    h.advance(500);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.asserts(), 0);
    assert_eq!(h.events_of(v), [ResetQuery, Reset, ResetAborted]);
    assert_eq!(h.events_of(wedged), [Reset, ResetAborted]);
}

#[test]
fn two_causes_at_one_instant_make_one_reset_with_the_graver_reason() {
    let mut h = harness();
    let a = h.reg("a");
    // The command times out and the firmware writes its catastrophic word at one instant;
    // the client releases at once, so the quiesce takes no time at all.
    h.call(|c, now| c.command_timeout(now));
    h.hca_mut().inject_catastrophic(0xbad);
    h.pump();
    h.execute(a).expect("ready");
    h.advance(10_000);
    assert_eq!(
        h.c().counters().resets_started,
        1,
        "the error is not found again"
    );
    assert_eq!(h.asserts(), 1);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
}

#[test]
fn a_hardware_reset_clears_the_device_error_state() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().inject_catastrophic(0xbad);
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing);
    h.execute(a).expect("ready");
    h.advance(30_000);
    assert_eq!(h.c().counters().resets_started, 1);
    assert_eq!(h.c().state(), State::Operational);
    assert!(h.hca().is_running());
}
