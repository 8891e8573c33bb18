//! The running totals QUERY_STATE and every report give: each counts its event once, and
//! nothing else. One history of a bus, checked after each step against every counter.

use super::*;

/// The counters as they should be: `expected` with the hardware steps the host ran.
fn check(h: &H, mut expected: Counters, step: &str) {
    expected.hw_steps = h.hw_steps().len() as u64;
    assert_eq!(*h.c().counters(), expected, "after {step}");
}

fn by_reason(counts: &[(ResetReason, u64)], restarts: u64) -> [u64; 8] {
    let mut by = [0; 8];
    by[0] = restarts;
    for (r, n) in counts {
        by[*r as usize] = *n;
    }
    by
}

/// Clients come and go, a client's request is joined by another's, a refusal and a
/// throttled request are counted apart from the administrator's refusal.
#[test]
fn registrations_requests_joins_and_refusals_are_each_counted_once() {
    let mut h = harness_with(
        Policy {
            client_request_limit: 1,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    let b = h.reg("b");
    let mut want = Counters {
        registrations: 2,
        ..Counters::default()
    };
    check(&h, want, "two registrations");

    h.request(a).expect("request");
    h.request(b).expect("joins");
    h.complete(&[a, b]);
    want.resets_started = 1;
    want.auto_resets = 1;
    want.joined_requests = 1;
    want.resets_restored = 1;
    want.by_reason = by_reason(&[(ResetReason::ClientRequest, 1)], 0);
    check(&h, want, "a request joined by another");

    assert_eq!(h.request(a), Err(RequestError::Throttled));
    want.refusals = 1;
    want.throttled = 1;
    check(&h, want, "a throttled request");

    assert_eq!(h.execute(b), Err(ExecuteError::NoResetPending));
    want.refusals = 2;
    assert_eq!(
        h.call(|c, now| c.admin_restart(now)),
        Err(RestartError::NotFailed)
    );
    want.admin_refusals = 1;
    check(&h, want, "a client's refusal and an administrator's");

    h.call(|c, now| c.unregister(now, b)).expect("unregister");
    h.pump();
    want.unregistrations = 1;
    check(&h, want, "an unregistration");
}

/// A veto and an abort for unresponsive clients are aborted resets; each late client is
/// counted; the administrator's resets are counted as such and never as automatic.
#[test]
fn vetoes_aborts_and_unresponsive_clients_are_each_counted_once() {
    let mut h = harness_with(
        Policy {
            abort_on_unresponsive: true,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    let v = h.reg_flags("v", ClientFlags::CAN_VETO);
    let _late = h.reg("late");
    let mut want = Counters {
        registrations: 3,
        ..Counters::default()
    };
    h.admin(AdminReset::Planned).expect("planned");
    let e = h.query_epoch_of(v);
    h.call(|c, now| c.reset_veto(now, v, e, busy()))
        .expect("veto");
    h.pump();
    want.resets_started = 1;
    want.admin_resets = 1;
    want.resets_aborted = 1;
    want.by_reason = by_reason(&[(ResetReason::AdminPlanned, 1)], 0);
    check(&h, want, "a vetoed planned reset");

    h.admin(AdminReset::Planned).expect("planned");
    h.consent(v).expect("consent");
    h.execute(a).expect("a ready");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational, "aborted");
    want.resets_started = 2;
    want.admin_resets = 2;
    want.resets_aborted = 2;
    want.unresponsive_clients = 2;
    want.by_reason = by_reason(&[(ResetReason::AdminPlanned, 2)], 0);
    check(
        &h,
        want,
        "a planned reset aborted for two unresponsive clients",
    );
}

/// A failed reset, the administrator's restart (by reason 0), and a follow-up scheduled
/// by requests during the restore are each counted once.
#[test]
fn failures_restarts_and_follow_ups_are_each_counted_once() {
    let (mut h, a) = failed_device();
    let mut want = Counters {
        registrations: 1,
        resets_started: 1,
        auto_resets: 1,
        resets_failed: 1,
        by_reason: by_reason(&[(ResetReason::ClientRequest, 1)], 0),
        ..Counters::default()
    };
    check(&h, want, "a failed reset");

    h.call(|c, now| c.admin_restart(now)).expect("restart");
    h.pump();
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    want.resets_started = 2;
    want.admin_resets = 1;
    want.resets_restored = 1;
    want.by_reason = by_reason(&[(ResetReason::ClientRequest, 1)], 1);
    check(&h, want, "a restart");

    h.admin(AdminReset::Forced).expect("forced");
    h.execute(a).expect("ready");
    let held = h.drive_to_restoring().expect("reaches Restoring");
    h.call(|c, now| c.reset_request(now, a)).expect("follow-up");
    h.call(|c, now| c.command_timeout(now));
    h.deliver_held(held);
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    want.resets_started = 4;
    want.admin_resets = 2;
    want.auto_resets = 2;
    want.joined_requests = 2;
    want.follow_ups = 1;
    want.resets_restored = 3;
    want.by_reason = by_reason(
        &[
            (ResetReason::ClientRequest, 1),
            (ResetReason::AdminForced, 1),
            (ResetReason::CommandTimeout, 1),
        ],
        1,
    );
    check(&h, want, "a forced reset and its follow-up");
}
