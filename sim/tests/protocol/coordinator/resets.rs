//! The hardware reset on the bare coordinator (retries, the FLR, the device coming back
//! as another), and what a reset leaves behind it: the policy's word on unresponsive
//! clients, the health poll re-armed, a follow-up's firmware allowance.

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
    h.advance(policy().quiesce_deadline_ms - 1);
    let before = h.health_reads();
    h.advance(1);
    assert_eq!(h.c().counters().resets_aborted, 1);
    assert_eq!(
        h.health_reads(),
        before + 1,
        "the read that closed the quiesce, no other"
    );
    let (at, _) = h.timers().armed(TimerId::HealthPoll).expect("armed");
    assert_eq!(at, h.now() + policy().health_poll_interval());
}

#[test]
fn hardware_reset_fails_twice_then_succeeds() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().fail_next_resets(2);
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.asserts(), 3);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.soft_attempts, 3);
    assert!(!r.flr_used);
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
}

#[test]
fn hardware_reset_failing_always_tries_flr_then_fails_hardware_dead_then_admin_restart() {
    let (mut h, a) = failed_device();
    assert_eq!(
        h.hw_steps()
            .iter()
            .filter(|s| **s == HwStep::FunctionLevelReset)
            .count(),
        1
    );
    assert_eq!(h.hca().stats().soft_resets, 3);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::HardwareDead
        }
    )));
    assert_eq!(h.c().client(a).expect("a").state, ClientState::Failed);
    assert_eq!(h.request(a), Err(RequestError::DeviceFailed));
    // An administrator restart succeeds: RESET_END with no RESET before it.
    assert_eq!(h.call(|c, now| c.admin_restart(now)), Ok(Epoch(1)));
    h.pump();
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.events_of(a), [Reset, ResetFailed, ResetEnd]);
    assert!(h.c().last_reset().expect("record").restart);
    assert!(h.transitions().contains(&(State::Failed, State::Resetting)));
}

/// A planned reset of a Failed device is refused: there is no serving device to plan around,
/// and RESTART is the way out. A forced reset restarts it, as RESTART does.
#[test]
fn a_planned_reset_of_a_failed_device_is_refused_and_a_forced_one_restarts_it() {
    let (mut h, a) = failed_device();
    let refusals = h.c().counters().admin_refusals;
    assert_eq!(
        h.admin(AdminReset::Planned),
        Err(AdminResetError::DeviceFailed)
    );
    assert_eq!(h.c().state(), State::Failed, "nothing started");
    assert_eq!(h.c().counters().admin_refusals, refusals + 1, "counted");
    assert_eq!(h.admin(AdminReset::Forced), Ok(Epoch(1)));
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(a), [Reset, ResetFailed, ResetEnd]);
}

#[test]
fn admin_restart_of_a_healthy_device_is_refused() {
    let mut h = harness();
    assert_eq!(
        h.call(|c, now| c.admin_restart(now)),
        Err(RestartError::NotFailed)
    );
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn device_that_never_returns_is_failed_when_the_auto_restart_window_ends() {
    let mut h = harness_with(
        Policy {
            auto_restart_window_ms: 30_000,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    h.hca_mut().never_return();
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    // Three soft attempts and the FLR each wait hw_ready_timeout (2 s), then it keeps probing.
    h.advance(8_500);
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.asserts(), 4);
    h.advance(21_000);
    assert_eq!(h.c().state(), State::Resetting, "window not over at 29.5 s");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Failed);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::AutoRestartExpired
        }
    )));
    assert!(h.timers().is_empty(), "every wait ended");
}

#[test]
fn device_returning_late_within_the_window_is_restored() {
    let mut h = harness();
    *h.hca_mut() = SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(20_000),
        ..SimHcaConfig::default()
    });
    let a = h.reg("a");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    h.advance(30_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
}

/// A client's reset of a device that `change` makes another by the time it is back: the
/// reset fails with DeviceReplaced, and the client hears it.
fn comes_back_another(change: impl FnOnce(&mut H)) -> (H, ClientId) {
    let mut h = harness();
    let a = h.reg("a");
    change(&mut h);
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::DeviceReplaced
        }
    )));
    (h, a)
}

#[test]
fn another_node_guid_after_reset_fails_device_replaced_with_pnp() {
    let (h, a) = comes_back_another(|h| h.hca_mut().replace_on_next_reset());
    assert_eq!(
        h.pnp(),
        [PnpOp::ReportChildrenMissing, PnpOp::ReenumerateChildren]
    );
    assert_eq!(h.c().last_reset().expect("record").pnp_operations, 2);
    assert_eq!(h.c().epoch(), Epoch(1), "no restore happened");
    assert!(!h.events_of(a).contains(&ResetEnd));
}

#[test]
fn firmware_change_on_activation_is_firmware_changed() {
    let mut h = harness();
    let a = h.reg("a");
    let new_fw = Identity::fw_version(2, 43, 0);
    h.hca_mut().stage_firmware(new_fw);
    h.admin(AdminReset::FirmwareActivate).expect("fw activate");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetEnd {
            epoch: Epoch(2),
            outcome: ResetOutcome::FirmwareChanged
        }
    )));
    assert_eq!(h.c().identity().fw_version, new_fw);
    assert!(h.pnp().is_empty());
    // The record and the history say it as the event does.
    assert_eq!(
        h.c().last_reset().and_then(|r| r.result),
        Some(ResetResult::Restored(ResetOutcome::FirmwareChanged))
    );
    assert!(h.c().recorder().iter().any(|r| matches!(
        r.kind,
        RecordKind::ResetFinished {
            outcome: ResetOutcome::FirmwareChanged,
            ..
        }
    )));
}

#[test]
fn firmware_change_without_activation_is_treated_as_another_device() {
    comes_back_another(|h| h.hca_mut().stage_firmware(Identity::fw_version(9, 0, 0)));
}

/// Runs `h` until the reset's assert is done and the device is in reset.
fn into_hardware_reset(h: &mut H, ids: &[ClientId]) {
    for id in ids {
        h.execute(*id).expect("ready");
    }
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.asserts(), 1);
    h.advance(100);
}

#[test]
fn firmware_activation_joining_after_the_assert_schedules_one_follow_up() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    into_hardware_reset(&mut h, &[a]);
    let new_fw = Identity::fw_version(2, 43, 0);
    h.hca_mut().stage_firmware(new_fw);
    h.admin(AdminReset::FirmwareActivate).expect("joins");
    // The running reset ends on the old firmware, the follow-up activates the new one.
    h.advance(200);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.c().state(), State::Quiescing, "follow-up started");
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::FirmwareActivate
    );
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(3));
    assert_eq!(h.c().identity().fw_version, new_fw);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetEnd {
            epoch: Epoch(3),
            outcome: ResetOutcome::FirmwareChanged
        }
    )));
    // The allowance is spent: an ordinary reset later is just a reset.
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(4));
    assert!(h.pnp().is_empty(), "never taken for a replaced device");
    assert_eq!(h.c().counters().resets_started, 3);
}

#[test]
fn firmware_activation_before_the_assert_needs_no_follow_up() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    h.hca_mut().stage_firmware(Identity::fw_version(2, 43, 0));
    h.admin(AdminReset::FirmwareActivate)
        .expect("joins while quiescing");
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().counters().resets_started, 1);
    assert_eq!(h.c().identity().fw_version, Identity::fw_version(2, 43, 0));
}

#[test]
fn firmware_activation_on_a_failed_device_restarts_it_with_the_allowance() {
    let mut h = harness_with(
        Policy {
            reset_retries: 0,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    h.hca_mut().fail_next_resets(2);
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    let new_fw = Identity::fw_version(3, 0, 0);
    h.hca_mut().stage_firmware(new_fw);
    h.admin(AdminReset::FirmwareActivate).expect("restart");
    h.advance(5_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().identity().fw_version, new_fw);
    assert!(h.pnp().is_empty());
    assert!(h.delivered().contains(&(
        a,
        Event::ResetEnd {
            epoch: Epoch(2),
            outcome: ResetOutcome::FirmwareChanged
        }
    )));
}

#[test]
fn a_replacement_is_reported_to_pnp_once_however_often_it_is_restarted() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().replace_on_next_reset();
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.pnp().len(), 2);
    for _ in 0..3 {
        h.call(|c, now| c.admin_restart(now)).expect("restart");
        h.pump();
        h.advance(5_000);
        assert_eq!(h.c().state(), State::Failed);
    }
    assert_eq!(
        h.pnp(),
        [PnpOp::ReportChildrenMissing, PnpOp::ReenumerateChildren]
    );
    assert_eq!(h.c().counters().pnp_operations, 2);
    assert_eq!(h.c().last_reset().expect("record").pnp_operations, 0);
}

#[test]
fn soft_reset_performs_zero_pnp_operations() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert!(h.pnp().is_empty());
    assert_eq!(h.c().counters().pnp_operations, 0);
    assert_eq!(h.c().last_reset().expect("record").pnp_operations, 0);
}
