//! Calls whose answer depends on the state they arrive in, what they leave in the flight
//! recorder, and the protocol state's fingerprint.

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
