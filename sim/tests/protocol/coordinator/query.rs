//! Preparing: the query of a planned reset (docs/design.md §5): consent, veto, silence and
//! what ends the query.

use super::*;

#[test]
fn a_veto_stops_a_planned_reset_before_anything_is_torn_down() {
    let mut h = harness();
    let a = h.reg("a");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    assert_eq!(h.c().state(), State::Preparing);
    assert!(h.c().reset_in_progress());
    assert_eq!(h.events_of(a), [], "only CAN_VETO clients are asked");
    assert_eq!(h.events_of(v), [ResetQuery]);
    assert_eq!(h.c().client(v).expect("v").state, ClientState::Queried);
    let e = h.query_epoch_of(v);
    assert_eq!(h.call(|c, now| c.reset_veto(now, v, e, busy())), Ok(()));
    h.pump();
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(a), [], "a veto disturbs nobody");
    assert_eq!(h.events_of(v), [ResetQuery, ResetAborted]);
    assert_eq!(h.asserts(), 0);
    assert_eq!(h.c().epoch(), Epoch(1));
    let r = h.c().last_reset().expect("record");
    assert_eq!(
        r.result,
        Some(ResetResult::Aborted {
            by: v,
            cause: AbortCause::Veto
        })
    );
    assert_eq!(r.barrier_size, 0, "no RESET went out");
    assert_eq!(
        r.veto_reason,
        Some(busy()),
        "the administrator can read why"
    );
    let said = h.c().recorder().iter().filter(|r| {
        r.kind
            == RecordKind::Vetoed {
                client: v,
                reason: busy(),
            }
    });
    assert_eq!(said.count(), 1, "the flight recorder keeps the reason");
    assert_eq!(h.c().counters().resets_aborted, 1);
    assert!(h.timers().is_empty() || !h.c().reset_in_progress());
    for id in [a, v] {
        assert_eq!(h.c().client(id).expect("client").state, ClientState::Active);
    }
    assert_eq!(
        h.transitions(),
        [
            (State::Operational, State::Preparing),
            (State::Preparing, State::Operational)
        ]
    );
}

#[test]
fn consent_from_every_queried_client_sends_reset_to_the_whole_barrier() {
    let mut h = harness();
    let a = h.reg("a");
    let v1 = h.reg_flags("v1", ClientFlags::CAN_VETO);
    let v2 = h.reg_flags("v2", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    assert_eq!(h.consent(v1), Ok(()));
    assert_eq!(h.consent(v1), Ok(()), "consent is idempotent");
    assert_eq!(h.c().state(), State::Preparing, "v2 has not answered");
    assert_eq!(h.consent(v2), Ok(()));
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.events_of(a), [Reset]);
    assert_eq!(h.events_of(v1), [ResetQuery, Reset]);
    assert!(h.c().last_reset().expect("record").planned);
    h.complete(&[a, v1, v2]);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.events_of(v2), [ResetQuery, Reset, ResetEnd]);
}

#[test]
fn silence_is_consent_at_the_query_deadline() {
    let mut h = harness();
    let v = h.reg_flags("silent", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.advance(999);
    assert_eq!(h.c().state(), State::Preparing);
    h.advance(1);
    assert_eq!(h.c().state(), State::Quiescing, "query_deadline_ms = 1000");
    assert_eq!(h.events_of(v), [ResetQuery, Reset]);
    let e = h.query_epoch_of(v);
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, e, busy())),
        Err(VetoError::NoQueryPending),
        "too late to veto once RESET is out"
    );
}

#[test]
fn a_planned_reset_with_nobody_to_ask_goes_straight_to_its_quiesce() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Planned).expect("planned");
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.transitions(), [(State::Operational, State::Quiescing)]);
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn a_forced_reset_asks_nobody() {
    let mut h = harness();
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Forced).expect("forced");
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.events_of(v), [Reset]);
}

#[test]
fn veto_refusals() {
    let mut h = harness();
    let plain = h.reg("plain");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, Epoch(1), busy())),
        Err(VetoError::NoResetPending)
    );
    h.admin(AdminReset::Planned).expect("planned");
    let late = h.reg_flags("late", ClientFlags::CAN_VETO);
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, plain, Epoch(1), busy())),
        Err(VetoError::NotAllowed)
    );
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, Epoch(0), busy())),
        Err(VetoError::StaleEpoch)
    );
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, late, Epoch(1), busy())),
        Err(VetoError::NotQueried),
        "registered after the query went out"
    );
    // A fatal cause ends the query: the reset cannot be vetoed any more.
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, Epoch(1), busy())),
        Err(VetoError::NoQueryPending)
    );
    h.complete(&[plain, v, late]);
    assert_eq!(
        h.c().epoch(),
        Epoch(2),
        "the refused vetoes changed nothing"
    );
    assert_eq!(
        h.events_of(late),
        [Reset, ResetEnd],
        "it joined the barrier"
    );
}

#[test]
fn consent_refusals() {
    let mut h = harness();
    let plain = h.reg("plain");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, v, Epoch(1))),
        Err(ConsentError::NoQueryPending)
    );
    h.admin(AdminReset::Planned).expect("planned");
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, plain, Epoch(1))),
        Err(ConsentError::NotQueried)
    );
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, v, Epoch(7))),
        Err(ConsentError::StaleEpoch)
    );
    let gone = ClientId {
        index: 5,
        generation: 0,
    };
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, gone, Epoch(1))),
        Err(ConsentError::UnknownClient)
    );
    assert_eq!(h.c().state(), State::Preparing, "refusals changed nothing");
    assert_eq!(h.c().counters().refusals, 4);
}

/// The stage's name says the state, and inside a reset what it waits for.
#[test]
fn the_stage_name_follows_the_reset() {
    let mut h = harness();
    assert_eq!(h.c().stage_name(), "Operational");
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    assert_eq!(h.c().stage_name(), "Quiescing");
    h.execute(a).expect("ready");
    h.drive_to_restoring().expect("reaches Restoring");
    assert_eq!(h.c().stage_name(), "Restoring");
}

/// Clients coming and going while RESET_END goes out and the host's drain is held up (its
/// DPC waits on another processor) never fill the action queue: a client that leaves takes
/// its queued events with it, and its RESET_END counts as delivered.
#[test]
fn clients_churning_while_the_drain_is_held_up_never_overflow_the_queue() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    h.execute(a).expect("ready");
    // RESET_END queued for `a`; nothing is drained from here.
    let held = h.drive_to_restoring().expect("reaches Restoring");
    let desc = ClientDesc::new("churn", ClientKind::Custom, ClientFlags::empty()).expect("fits");
    // One that stays: its RESET_END, queued, is not another's to take.
    let stays = h.call(|c, now| c.register(now, desc)).expect("register").id;
    let room = h.c().pending_actions();
    for _ in 0..1_000 {
        let r = h.call(|c, now| c.register(now, desc)).expect("register");
        assert!(r.late, "each gets a RESET_END of its own");
        h.call(|c, now| c.unregister(now, r.id))
            .expect("unregister");
    }
    assert_eq!(h.c().counters().actions_overflowed, 0);
    assert_eq!(h.c().pending_actions(), room, "what left took its events");
    assert_eq!(
        h.c().state(),
        State::Restoring,
        "still waits for a's RESET_END"
    );
    h.deliver_held(held);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
    assert_eq!(h.events_of(stays), [ResetEnd]);
}

#[test]
fn a_queried_client_that_leaves_counts_as_consent() {
    let mut h = harness();
    let a = h.reg("a");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.call(|c, now| c.unregister(now, v)).expect("unregister");
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing);
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn catastrophic_while_preparing_makes_the_reset_fatal_and_proceeds() {
    let mut h = harness();
    let a = h.reg("a");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.events_of(v), [ResetQuery, Reset]);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.reason, ResetReason::Catastrophic);
    assert!(!r.planned);
    assert_eq!(r.requests, 2);
    h.complete(&[a, v]);
    assert_eq!(h.c().counters().resets_started, 1, "no second reset raised");
    assert_eq!(h.asserts(), 1);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn the_health_poll_watches_a_query_and_makes_the_reset_fatal() {
    let mut h = harness_with(
        Policy {
            query_deadline_ms: 5_000,
            ..policy()
        },
        8,
    );
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.hca_mut().inject_catastrophic(0xbad);
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing, "the poll found it");
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    h.complete(&[v]);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn another_planned_request_joins_the_query() {
    let mut h = harness();
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.admin(AdminReset::Planned).expect("planned again");
    assert_eq!(h.c().state(), State::Preparing);
    assert_eq!(h.events_of(v), [ResetQuery], "asked once");
    assert_eq!(h.c().last_reset().expect("record").requests, 2);
}

#[test]
fn surprise_removal_while_preparing_ends_the_query_with_device_fatal() {
    let mut h = harness();
    let a = h.reg("a");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.hca_mut().remove();
    h.call(|c, now| c.surprise_removal(now));
    h.pump();
    assert_eq!(h.c().state(), State::Removed);
    assert_eq!(h.events_of(v), [ResetQuery, DeviceFatal]);
    assert_eq!(h.events_of(a), [DeviceFatal]);
    assert_eq!(
        h.c().last_reset().expect("record").result,
        Some(ResetResult::Removed)
    );
    assert!(h.timers().is_empty());
}
