//! The calls of docs/design.md §3: their answers, those that depend on the state they
//! arrive in, what they leave in the flight recorder, and the protocol state's fingerprint.

use std::hash::{DefaultHasher, Hasher};

use super::*;

/// A client registering on a Failed device is a zombie from the start, not a late
/// registrant waiting for a RESET_END that only a restart will send.
#[test]
fn a_client_registering_on_a_failed_device_is_failed() {
    let (mut h, _) = failed_device();
    let d = ClientDesc::new("new", ClientKind::Custom, ClientFlags::empty()).expect("name");
    let r = h.call(|c, now| c.register(now, d)).expect("register");
    assert_eq!(r.state, State::Failed);
    assert_eq!(h.c().client(r.id).expect("new").state, ClientState::Failed);
}

/// During the restore, an execute for the reset just done is stale (its RESET was
/// answered); one for an epoch no reset tore down is for no reset pending.
#[test]
fn an_execute_during_the_restore_is_stale_for_this_reset_and_not_pending_for_another() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    let epoch = h.reset_epoch_of(a);
    h.execute(a).expect("ready");
    let held = h.drive_to_restoring().expect("reaches Restoring");
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, a, epoch)),
        Err(ExecuteError::StaleEpoch)
    );
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, a, Epoch(epoch.0 + 7))),
        Err(ExecuteError::NoResetPending)
    );
    h.deliver_held(held);
}

/// Every client's execute is in the flight recorder under its name, as every other call.
#[test]
fn an_execute_is_recorded_under_the_clients_name() {
    let mut h = harness();
    let a = h.reg("storage-a");
    h.admin(AdminReset::Forced).expect("forced");
    h.execute(a).expect("ready");
    let rec = h
        .c()
        .recorder()
        .iter()
        .find(|r| {
            matches!(r.kind, RecordKind::Call { client: Some(c), call: Call::ResetExecute } if c == a)
        })
        .expect("the execute is recorded");
    assert_eq!(rec.name.as_str(), "storage-a");
}

fn fingerprint(h: &H) -> u64 {
    let mut hasher = DefaultHasher::new();
    h.c().fingerprint(&mut hasher);
    hasher.finish()
}

/// Two buses in one protocol state hash alike whatever their histories; a bus in another
/// state (another client, a reset under way) hashes otherwise.
#[test]
fn the_fingerprint_tells_protocol_states_apart_and_not_histories() {
    let mut one = harness();
    let a = one.reg("a");
    let mut other = harness();
    let _ = other.reg("a");
    other.advance(1);
    assert_eq!(fingerprint(&one), fingerprint(&other), "same state");
    let before = fingerprint(&one);
    let _ = one.reg("b");
    let with_b = fingerprint(&one);
    assert_ne!(with_b, before, "another client");
    one.request(a).expect("request");
    assert_ne!(fingerprint(&one), with_b, "a reset under way");
}

/// A second administrator's reset joining the first keeps the first one's reason: the
/// record says why the reset began.
#[test]
fn a_joining_administrators_reason_does_not_replace_the_first() {
    let mut h = harness();
    let _a = h.reg("a");
    h.call(|c, now| c.admin_reset_because(now, AdminReset::Forced, "firmware 2.43"))
        .expect("reset");
    h.pump();
    h.call(|c, now| c.admin_reset_because(now, AdminReset::Forced, "again"))
        .expect("joins");
    h.pump();
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.requests, 2);
    assert_eq!(r.admin_reason.as_str(), "firmware 2.43");
}

/// A consent or a veto to a device removed during the query is refused as such, not as
/// an answer to no query.
#[test]
fn an_answer_to_a_query_of_a_removed_device_is_refused_as_removed() {
    let mut h = harness();
    let v = h.reg_flags("v", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    let e = h.query_epoch_of(v);
    h.call(|c, now| c.surprise_removal(now));
    h.pump();
    assert_eq!(h.c().state(), State::Removed);
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, v, e)),
        Err(ConsentError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, e, busy())),
        Err(VetoError::DeviceRemoved)
    );
}

/// Before any reset there is no last reset and no concluded one; a reset under way is the
/// last and not yet concluded.
#[test]
fn no_reset_is_reported_before_the_first() {
    let mut h = harness();
    let a = h.reg("a");
    assert!(h.c().last_reset().is_none());
    assert!(h.c().concluded_reset().is_none());
    h.request(a).expect("request");
    assert!(h.c().last_reset().is_some());
    assert!(h.c().concluded_reset().is_none());
}

#[test]
fn idle_client_gets_reset_and_is_in_the_barrier() {
    let mut h = harness();
    let busy = h.reg("busy");
    let idle = h.reg("idle");
    h.request(busy).expect("request");
    assert_eq!(h.events_of(idle), [Reset]);
    let info = h.c().client(idle).expect("registered");
    assert!(info.in_barrier);
    h.execute(busy).expect("ready");
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "the idle client holds the barrier"
    );
    h.execute(idle).expect("ready");
    assert_eq!(h.c().state(), State::Resetting);
}

#[test]
fn late_registrant_is_not_in_barrier_gets_no_reset_and_first_event_is_reset_end() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    let d = ClientDesc::new("late", ClientKind::Ipoib, ClientFlags::empty()).expect("fits");
    let reg = h
        .call(|c, now| c.register(now, d))
        .expect("register during quiesce");
    h.pump();
    assert!(reg.late);
    assert_eq!(reg.state, State::Quiescing);
    let late = reg.id;
    assert_eq!(h.c().client(late).expect("late").state, ClientState::Late);
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, late, Epoch(1))),
        Err(ExecuteError::NotInBarrier)
    );
    h.complete(&[a]);
    assert_eq!(h.events_of(late), [ResetEnd]);
}

#[test]
fn late_registrant_during_resetting_and_restoring() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    assert_eq!(h.c().state(), State::Resetting);
    let during_reset = h.reg("during-reset");
    h.advance(1_000);
    assert_eq!(h.events_of(during_reset), [ResetEnd]);

    // Register while RESET_END deliveries are still outstanding (Restoring).
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    h.execute(during_reset).expect("ready");
    let held = h.drive_to_restoring().expect("reaches Restoring");
    let d = ClientDesc::new("in-restore", ClientKind::Srp, ClientFlags::empty()).expect("fits");
    let reg = h.call(|c, now| c.register(now, d)).expect("register");
    assert!(reg.late);
    assert_eq!(reg.state, State::Restoring);
    for (client, event) in held {
        h.deliver(client, event);
    }
    assert_eq!(
        h.c().state(),
        State::Restoring,
        "waits for the late RESET_END too"
    );
    h.pump();
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(reg.id), [ResetEnd]);
}

#[test]
fn execute_with_no_reset_pending_is_refused_and_changes_nothing() {
    let mut h = harness();
    let a = h.reg("a");
    let seq = h.c().recorder().next_seq();
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, a, Epoch(1))),
        Err(ExecuteError::NoResetPending)
    );
    assert_eq!(h.c().pending_actions(), 0);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(1));
    // Only the refusal is recorded.
    let new: Vec<_> = h.c().recorder().since(seq).collect();
    assert_eq!(new.len(), 1);
    assert!(matches!(
        new[0].kind,
        RecordKind::Refused {
            code: RefusalCode::NoResetPending,
            ..
        }
    ));
}

#[test]
fn execute_twice_is_a_no_op() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    h.request(a).expect("request");
    assert_eq!(h.execute(a), Ok(ExecuteOutcome::Accepted));
    assert_eq!(h.execute(a), Ok(ExecuteOutcome::AlreadyReady));
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "a second execute does not count twice"
    );
    assert_eq!(h.execute(b), Ok(ExecuteOutcome::Accepted));
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.execute(a), Ok(ExecuteOutcome::AlreadyReady));
}

#[test]
fn execute_with_stale_epoch_or_from_outside_the_barrier_is_refused() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
    h.request(a).expect("second reset");
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, a, Epoch(1))),
        Err(ExecuteError::StaleEpoch)
    );
    let outsider = h.reg("outsider");
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, outsider, Epoch(2))),
        Err(ExecuteError::NotInBarrier)
    );
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.execute(a), Ok(ExecuteOutcome::Accepted));
}

#[test]
fn unregister_during_quiesce_counts_as_ready() {
    let mut h = harness();
    let a = h.reg("a");
    let leaver = h.reg("leaver");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    h.call(|c, now| c.unregister(now, leaver))
        .expect("unregister");
    h.pump();
    assert_eq!(h.c().state(), State::Resetting);
    h.advance(1_000);
    assert_eq!(h.events_of(leaver), [Reset], "gone: no RESET_END");
}

#[test]
fn ids_of_the_previous_coordinator_of_a_device_are_stale_in_the_next() {
    // The KMDF driver builds a coordinator at each start: a child that kept the id the last
    // one gave it must be refused, not taken for whoever holds that slot now.
    let mut first = harness();
    let kept = first.reg("kept");
    let gone = first.reg("gone");
    first
        .call(|c, now| c.unregister(now, gone))
        .expect("unregister");
    let floor = first.c().next_generation();
    assert!(floor > kept.generation && floor > gone.generation + 1);
    let mut next = harness();
    next.call(|c, _| c.retire_ids_before(floor));
    let newcomer = next.reg("newcomer");
    assert_eq!(
        (newcomer.index, newcomer.generation),
        (kept.index, floor),
        "the slot is reused at the floor's generation"
    );
    for old in [kept, gone] {
        assert_eq!(
            next.call(|c, now| c.unregister(now, old)),
            Err(UnregisterError::StaleClient),
            "{old:?}"
        );
    }
    assert!(
        next.c().client(newcomer).is_ok(),
        "the newcomer is untouched"
    );
    // A slot in use keeps its generation: its client registered with this coordinator.
    next.call(|c, _| c.retire_ids_before(floor + 10));
    assert!(next.c().client(newcomer).is_ok());
    assert_eq!(next.c().next_generation(), floor + 11);
}

#[test]
fn stale_ids_are_refused_after_their_slot_is_reused() {
    let mut h = harness();
    let old = h.reg("old");
    h.call(|c, now| c.unregister(now, old)).expect("unregister");
    let new = h.reg("new");
    assert_eq!(new.index, old.index, "slot reused");
    assert_ne!(new, old);
    assert_eq!(
        h.call(|c, now| c.unregister(now, old)),
        Err(UnregisterError::StaleClient)
    );
    assert_eq!(
        h.call(|c, now| c.reset_request(now, old)),
        Err(RequestError::StaleClient)
    );
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, old, Epoch(1))),
        Err(ExecuteError::StaleClient)
    );
    assert_eq!(h.c().state(), State::Operational);
    assert!(h.c().client(new).is_ok(), "the new occupant is untouched");
    let never = ClientId {
        index: 7,
        generation: 0,
    };
    assert_eq!(
        h.call(|c, now| c.unregister(now, never)),
        Err(UnregisterError::UnknownClient)
    );
    let out_of_range = ClientId {
        index: 900,
        generation: 0,
    };
    assert_eq!(
        h.call(|c, now| c.reset_request(now, out_of_range)),
        Err(RequestError::UnknownClient)
    );
}

#[test]
fn registration_beyond_capacity_fails_cleanly_and_harms_nobody() {
    let mut h = harness_with(policy(), 3);
    let ids: Vec<ClientId> = ["a", "b", "c"].iter().map(|n| h.reg(n)).collect();
    let d = ClientDesc::new("d", ClientKind::Custom, ClientFlags::empty()).expect("fits");
    assert_eq!(
        h.call(|c, now| c.register(now, d)),
        Err(RegisterError::CapacityFull)
    );
    assert_eq!(h.c().client_count(), 3);
    h.request(ids[0]).expect("request");
    h.complete(&ids);
    for id in ids {
        assert_eq!(h.events_of(id), [Reset, ResetEnd]);
    }
}

#[test]
fn request_during_quiesce_and_hardware_reset_joins() {
    let mut h = harness_with(
        Policy {
            hw_ready_timeout_ms: 5_000,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    let b = h.reg("b");
    assert_eq!(h.request(a), Ok(Epoch(1)));
    assert_eq!(h.request(b), Ok(Epoch(1)), "joins during quiesce");
    h.complete(&[a, b]);
    assert_eq!(h.c().counters().resets_started, 1);
    h.request(a).expect("second");
    h.execute(a).expect("ready");
    h.execute(b).expect("ready");
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.request(b), Ok(Epoch(2)), "joins the hardware reset");
    h.advance(3_000);
    assert_eq!(h.c().counters().resets_started, 2);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.asserts(), 2);
    assert_eq!(h.c().last_reset().expect("record").requests, 2);
}

#[test]
fn requests_during_restore_cause_exactly_one_follow_up() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    h.execute(b).expect("ready");
    // Bring the hardware back but hold the RESET_END deliveries: the bus is Restoring.
    let held = h.drive_to_restoring().expect("reaches Restoring");
    assert_eq!(h.call(|c, now| c.reset_request(now, a)), Ok(Epoch(2)));
    assert_eq!(h.call(|c, now| c.reset_request(now, b)), Ok(Epoch(2)));
    h.call(|c, now| c.command_timeout(now));
    h.deliver_held(held);
    assert_eq!(h.c().state(), State::Quiescing, "the follow-up started");
    // The first reset's outcome stays readable for hosts that handle its
    // ResetConcluded after the follow-up began.
    let first = h.c().concluded_reset().expect("concluded");
    assert_eq!(
        (first.epoch, first.reason, first.result),
        (
            Epoch(1),
            ResetReason::ClientRequest,
            Some(ResetResult::Restored(ResetOutcome::Restored))
        )
    );
    assert_eq!(h.c().last_reset().map(|r| r.epoch), Some(Epoch(2)));
    h.complete(&[a, b]);
    assert_eq!(h.c().concluded_reset().map(|r| r.epoch), Some(Epoch(2)));
    assert_eq!(h.c().counters().resets_started, 2, "exactly one follow-up");
    assert_eq!(h.c().epoch(), Epoch(3));
    assert_eq!(h.events_of(a), [Reset, ResetEnd, Reset, ResetEnd]);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::CommandTimeout,
        "the follow-up carries the most severe reason"
    );
}

#[test]
fn request_and_catastrophic_at_the_same_instant_make_one_hardware_reset() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    h.call(|c, now| c.reset_request(now, a)).expect("request");
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    h.complete(&[a, b]);
    assert_eq!(h.asserts(), 1);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.reason, ResetReason::Catastrophic, "fatal reason recorded");
    assert_eq!(r.requests, 2);
    // Both the requester and everyone else see the outcome.
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
    assert_eq!(h.events_of(b), [Reset, ResetEnd]);
}
