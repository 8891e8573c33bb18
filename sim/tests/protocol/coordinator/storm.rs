//! Storm control and throttles (docs/design.md §5 "Storm control"), and `auto_recover`.

use super::*;

#[test]
fn a_noisy_client_is_throttled_and_the_device_stays_up() {
    let mut h = harness();
    let noisy = h.reg("noisy");
    for _ in 0..2 {
        h.request(noisy).expect("within its limit");
        h.complete(&[noisy]);
    }
    assert_eq!(h.c().epoch(), Epoch(3));
    assert_eq!(h.request(noisy), Err(RequestError::Throttled));
    assert_eq!(h.c().state(), State::Operational, "nothing happened");
    assert_eq!(h.c().counters().resets_started, 2);
    assert_eq!(h.c().counters().throttled, 1);
    let name = h.c().recorder().iter().find_map(|r| match r.kind {
        RecordKind::Throttled { client } if client == noisy => Some(r.name),
        _ => None,
    });
    assert_eq!(name.map(|n| n.to_string()), Some("noisy".to_string()));
    // Another client is not throttled for it.
    let other = h.reg("other");
    assert!(h.request(other).is_ok());
    h.complete(&[noisy, other]);
    // The window moves on.
    h.advance(60_000);
    assert!(
        h.request(noisy).is_ok(),
        "a minute later its budget is back"
    );
}

#[test]
fn an_administrator_restart_clears_the_storm_window() {
    let mut h = harness_with(
        Policy {
            max_auto_resets: 1,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    h.complete(&[a]);
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed, "storm limit");
    h.call(|c, now| c.admin_restart(now)).expect("restart");
    h.pump();
    h.advance(5_000);
    assert_eq!(h.c().state(), State::Operational);
    // Within the old window, but the restart cleared it: one more is allowed.
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn auto_recover_off_quiesces_and_leaves_the_device_failed_for_the_administrator() {
    let mut h = harness_with(
        Policy {
            auto_recover: false,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing, "clients release first");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    assert_eq!(h.asserts(), 0, "no hardware reset");
    assert_eq!(h.events_of(a), [Reset, ResetFailed]);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::AutoRecoverOff
        }
    )));
    // A client's own request still resets: auto_recover is about errors the device raised.
    h.call(|c, now| c.admin_restart(now)).expect("restart");
    h.pump();
    h.advance(5_000);
    assert_eq!(h.c().state(), State::Operational);
    assert!(h.request(a).is_ok());
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn health_catastrophic_word_starts_a_fatal_reset() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().inject_catastrophic(0xdead);
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    // The reset cleared the error: no second reset at the next polls.
    h.advance(5_000);
    assert_eq!(h.c().counters().resets_started, 1);
}

#[test]
fn health_counter_stalled_for_three_polls_starts_a_hang_reset() {
    let mut h = harness();
    let _a = h.reg("a");
    let now = h.now();
    h.hca_mut().set_now(now);
    h.hca_mut().stall_health();
    h.advance(3_000);
    assert_eq!(
        h.c().state(),
        State::Operational,
        "three equal samples are not yet a hang"
    );
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::HealthStall
    );
}

#[test]
fn command_timeout_starts_a_reset() {
    let mut h = harness();
    let _a = h.reg("a");
    h.call(|c, now| c.command_timeout(now));
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::CommandTimeout
    );
}

#[test]
fn health_is_polled_while_quiescing_and_not_during_the_hardware_reset() {
    let mut h = harness_with(
        Policy {
            quiesce_deadline_ms: 5_000,
            ..policy()
        },
        8,
    );
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Planned).expect("planned");
    let before = h.health_reads();
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.health_reads(),
        before + 1,
        "the 1 s poll runs on while quiescing"
    );
    h.execute(wedged).expect("ready");
    assert_eq!(h.health_reads(), before + 2, "one read closes the quiesce");
    assert_eq!(h.c().state(), State::Resetting);
    let at_assert = h.health_reads();
    h.advance(150);
    assert_eq!(
        h.health_reads(),
        at_assert,
        "no poll while the device is in reset"
    );
    h.advance(5_000);
    assert_eq!(h.c().counters().resets_started, 1);
}

/// Storm control alone: the per-client request limit out of the way.
fn unthrottled() -> H {
    harness_with(
        Policy {
            client_request_limit: 16,
            ..policy()
        },
        8,
    )
}

#[test]
fn fourth_automatic_reset_in_the_storm_window_fails_storm_limit() {
    let mut h = unthrottled();
    let a = h.reg("a");
    for i in 0..3 {
        assert!(h.request(a).is_ok(), "reset {i} allowed");
        h.complete(&[a]);
        assert_eq!(h.c().state(), State::Operational);
    }
    assert_eq!(h.request(a), Err(RequestError::StormLimit));
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "clients still release first"
    );
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    assert_eq!(h.asserts(), 3, "no hardware reset for the refused one");
    assert_eq!(
        h.delivered().last(),
        Some(&(
            a,
            Event::ResetFailed {
                epoch: Epoch(4),
                error: FailReason::StormLimit
            }
        ))
    );
    // An administrator reset is still accepted (here it restarts the failed device).
    assert_eq!(h.admin(AdminReset::Forced), Ok(Epoch(4)));
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn administrator_reset_is_never_refused_by_storm_control() {
    let mut h = unthrottled();
    let a = h.reg("a");
    for _ in 0..3 {
        h.request(a).expect("automatic");
        h.complete(&[a]);
    }
    assert_eq!(h.admin(AdminReset::Forced), Ok(Epoch(4)));
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(5));
    assert_eq!(h.c().counters().admin_resets, 1);
}

#[test]
fn storm_window_forgets_old_resets() {
    let mut h = harness_with(
        Policy {
            storm_window_ms: 10_000,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    for _ in 0..6 {
        h.request(a).expect("spaced resets are not a storm");
        h.complete(&[a]);
        h.advance(6_000);
    }
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(7));
}
