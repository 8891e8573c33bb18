//! Resets held while a PnP stop is pending (the driver told PnP the adapter may stop): no
//! request or administrator's reset starts, a fault found meanwhile waits for the release,
//! and the release starts it.

use super::*;

/// Between the hold and its release nothing starts a reset: a client's request and an
/// administrator's are refused STOP_PENDING (recorded), and a catastrophic error the health
/// poll finds is held, then reset at the release.
#[test]
fn no_reset_starts_while_a_stop_is_pending_and_a_fault_found_meanwhile_resets_after() {
    let mut h = harness();
    let a = h.reg("a");
    let now = h.now();
    h.call(|c, now| c.hold_resets(now));
    assert!(h.c().resets_held());
    // QUERY_STATE says so, for the administrator's tool to tell why a reset is busy.
    let flags = |h: &H| hcabus::ioctl::state_out(h.c(), h.now()).flags;
    assert_ne!(flags(&h) & hcabus::ioctl::STATE_STOP_PENDING, 0);
    assert_eq!(h.request(a), Err(RequestError::StopPending));
    assert_eq!(
        h.admin(AdminReset::Forced),
        Err(AdminResetError::StopPending)
    );
    h.hca_mut().set_now(now);
    h.hca_mut().inject_catastrophic(0x77);
    h.advance(3_000);
    assert_eq!(
        h.c().state(),
        State::Operational,
        "held while the stop is pending"
    );
    assert_eq!(h.asserts(), 0);
    let refused = refusals(&h);
    assert_eq!(
        refused,
        [
            (Call::ResetRequest, RefusalCode::StopPending),
            (Call::AdminReset, RefusalCode::StopPending),
            (Call::Catastrophic, RefusalCode::StopPending),
        ]
    );
    h.call(|c, now| c.release_resets(now));
    h.pump();
    assert!(!h.c().resets_held());
    assert_eq!(flags(&h) & hcabus::ioctl::STATE_STOP_PENDING, 0);
    assert_eq!(h.c().state(), State::Quiescing, "the held fault resets now");
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.request(a), Ok(Epoch(2)), "requests are taken again");
}

/// A release with nothing held does nothing, and one with nothing found starts nothing.
#[test]
fn a_release_with_nothing_found_starts_nothing() {
    let mut h = harness();
    let _a = h.reg("a");
    h.call(|c, now| c.release_resets(now));
    h.call(|c, now| c.hold_resets(now));
    h.advance(2_000);
    h.call(|c, now| c.release_resets(now));
    h.pump();
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(1));
    let calls: Vec<_> = h
        .c()
        .recorder()
        .iter()
        .filter_map(|r| match r.kind {
            RecordKind::Call { call, .. } => Some(call),
            _ => None,
        })
        .filter(|c| matches!(c, Call::HoldResets | Call::ReleaseResets))
        .collect();
    assert_eq!(calls, [Call::HoldResets, Call::ReleaseResets]);
}

/// A command timeout while resets are held is recorded as the command timeout it is, and
/// resets for that reason at the release.
#[test]
fn a_command_timeout_while_held_is_recorded_as_one_and_resets_at_the_release() {
    let mut h = harness();
    let a = h.reg("a");
    h.call(|c, now| c.hold_resets(now));
    h.call(|c, now| c.command_timeout(now));
    h.pump();
    assert_eq!(h.c().state(), State::Operational);
    let refused = refusals(&h);
    assert_eq!(refused, [(Call::CommandTimeout, RefusalCode::StopPending)]);
    h.call(|c, now| c.release_resets(now));
    h.pump();
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::CommandTimeout
    );
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
}

/// The refusals the flight recorder holds: (call, code), in order.
fn refusals(h: &H) -> Vec<(Call, RefusalCode)> {
    h.c()
        .recorder()
        .iter()
        .filter_map(|r| match r.kind {
            RecordKind::Refused { call, code, .. } => Some((call, code)),
            _ => None,
        })
        .collect()
}
