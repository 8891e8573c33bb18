//! What a reset leaves behind it: the policy's word on unresponsive clients, the health
//! poll re-armed, a follow-up's firmware allowance.

use super::*;

/// With `abort_on_unresponsive` off, a planned reset forces a client that passes its
/// deadline through: the record says it did not abort, and the reset goes ahead.
#[test]
fn a_planned_reset_without_the_abort_policy_forces_a_late_client_through() {
    let mut h = harness();
    assert!(!h.c().policy().abort_on_unresponsive);
    let a = h.reg("a");
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Planned).expect("planned");
    h.execute(a).expect("a ready");
    h.advance(1_000 + 5_000);
    assert_eq!(h.c().counters().resets_aborted, 0);
    assert_eq!(h.asserts(), 1, "the reset went ahead");
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.c().last_reset().expect("record").forced(), [wedged]);
    let aborts: Vec<bool> = h
        .c()
        .recorder()
        .iter()
        .filter_map(|r| match r.kind {
            RecordKind::Unresponsive { client, aborts } if client == wedged => Some(aborts),
            _ => None,
        })
        .collect();
    assert_eq!(aborts, [false]);
}

/// Health polling resumes one interval after a reset ends, restored or aborted.
#[test]
fn the_health_poll_is_armed_one_interval_after_a_reset_ends() {
    let interval = policy().health_poll_interval();
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    h.execute(a).expect("ready");
    let held = h.drive_to_restoring().expect("reaches Restoring");
    h.deliver_held(held);
    assert_eq!(h.c().state(), State::Operational);
    let (at, _) = h.timers().armed(TimerId::HealthPoll).expect("armed");
    assert_eq!(at, h.now() + interval, "after the restore");

    let v = h.reg_flags("v", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    let e = h.query_epoch_of(v);
    h.call(|c, now| c.reset_veto(now, v, e, busy()))
        .expect("veto");
    h.pump();
    let (at, _) = h.timers().armed(TimerId::HealthPoll).expect("armed");
    assert_eq!(at, h.now() + interval, "after the abort");
}

/// A client's request during the restore schedules a follow-up that allows no firmware
/// change: new firmware coming up in it is another device.
#[test]
fn a_follow_up_a_client_asked_for_gives_no_firmware_allowance() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    h.execute(a).expect("ready");
    let held = h.drive_to_restoring().expect("reaches Restoring");
    h.hca_mut().stage_firmware(Identity::fw_version(9, 0, 0));
    h.call(|c, now| c.reset_request(now, a)).expect("follow-up");
    h.deliver_held(held);
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    assert_eq!(
        h.c().last_reset().and_then(|r| r.result),
        Some(ResetResult::Failed(FailReason::DeviceReplaced))
    );
}

/// A planned reset called off for an unresponsive client resumes the health watch one
/// interval later, not at once.
#[test]
fn the_health_poll_is_armed_one_interval_after_an_abort_for_an_unresponsive_client() {
    let mut h = harness_with(
        Policy {
            abort_on_unresponsive: true,
            ..policy()
        },
        8,
    );
    let _wedged = h.reg("wedged");
    h.admin(AdminReset::Planned).expect("planned");
    let reads = |h: &H| {
        h.hw_steps()
            .iter()
            .filter(|s| **s == HwStep::ReadHealth)
            .count()
    };
    h.advance(policy().quiesce_deadline_ms - 1);
    let before = reads(&h);
    h.advance(1);
    assert_eq!(h.c().counters().resets_aborted, 1);
    assert_eq!(
        reads(&h),
        before + 1,
        "the read that closed the quiesce, no other"
    );
    let (at, _) = h.timers().armed(TimerId::HealthPoll).expect("armed");
    assert_eq!(at, h.now() + policy().health_poll_interval());
}
