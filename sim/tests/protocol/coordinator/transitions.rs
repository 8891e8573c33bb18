//! Each transition of docs/design.md §5: what moves the device from one state to the next.

use super::*;

#[test]
fn transition_table_is_exactly_spec_section_5() {
    use State::*;
    let all = [
        Operational,
        Quiescing,
        Resetting,
        Restoring,
        Failed,
        Removed,
    ];
    let allowed = [
        (Operational, Quiescing),
        (Quiescing, Resetting),
        (Quiescing, Operational),
        (Quiescing, Failed),
        (Resetting, Restoring),
        (Resetting, Failed),
        (Restoring, Operational),
        (Failed, Resetting),
        (Operational, Removed),
        (Quiescing, Removed),
        (Resetting, Removed),
        (Restoring, Removed),
        (Failed, Removed),
    ];
    for from in all {
        for to in all {
            assert_eq!(
                from.may_become(to),
                allowed.contains(&(from, to)),
                "{from} -> {to}"
            );
        }
    }
}

#[test]
fn operational_to_quiescing_on_client_request_sends_reset_to_everyone() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    assert_eq!(h.request(a), Ok(Epoch(1)));
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.events_of(a), [Reset]);
    assert_eq!(h.events_of(b), [Reset]);
    let Some((
        _,
        Event::Reset {
            epoch,
            reason,
            planned,
            deadline,
        },
    )) = h.delivered().first()
    else {
        panic!("RESET first");
    };
    assert_eq!(*epoch, Epoch(1));
    assert_eq!(*reason, ResetReason::ClientRequest);
    assert!(!planned);
    assert_eq!(*deadline, Instant::from_ms(1_000));
}

#[test]
fn full_cycle_quiescing_resetting_restoring_operational() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    h.request(a).expect("request");
    h.execute(a).expect("a ready");
    assert_eq!(h.c().state(), State::Quiescing, "b still holds hardware");
    h.execute(b).expect("b ready");
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(
        h.hw_steps()[..3],
        [HwStep::ReadHealth, HwStep::SaveConfig, HwStep::AssertReset],
        "a last health read closes the quiesce"
    );
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
    assert_eq!(h.events_of(b), [Reset, ResetEnd]);
    assert!(h.delivered().iter().any(|(_, e)| *e
        == Event::ResetEnd {
            epoch: Epoch(2),
            outcome: ResetOutcome::Restored
        }));
    assert_eq!(
        h.transitions(),
        [
            (State::Operational, State::Quiescing),
            (State::Quiescing, State::Resetting),
            (State::Resetting, State::Restoring),
            (State::Restoring, State::Operational),
        ]
    );
    // The hardware sequence of docs/design.md §5, in order.
    let seq: Vec<HwStep> = h
        .hw_steps()
        .iter()
        .copied()
        .filter(|s| *s != HwStep::ProbeReady && *s != HwStep::ReadHealth)
        .collect();
    assert_eq!(
        seq,
        [
            HwStep::SaveConfig,
            HwStep::AssertReset,
            HwStep::RestoreConfig,
            HwStep::InitCommandInterface,
            HwStep::ReadIdentity
        ]
    );
    let r = h.c().last_reset().expect("record");
    assert_eq!(
        r.result,
        Some(ResetResult::Restored(ResetOutcome::Restored))
    );
    assert_eq!(r.new_epoch, Some(Epoch(2)));
    assert!(r.hw_reset().expect("hw time") >= Duration::from_ms(200));
    assert_eq!(h.concluded(), 1);
}

#[test]
fn reset_in_reverse_and_reset_end_in_registration_order_with_reused_slots() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    let c = h.reg("c");
    // b leaves and d takes b's slot: slot order (a, d, c) differs from registration order.
    h.call(|c, now| c.unregister(now, b)).expect("unregister");
    let d = h.reg("d");
    assert_eq!(d.index, b.index);
    h.request(a).expect("request");
    let resets: Vec<ClientId> = h
        .delivered()
        .iter()
        .filter(|(_, e)| e.kind() == Reset)
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(resets, [d, c, a]);
    h.complete(&[a, c, d]);
    let ends: Vec<ClientId> = h
        .delivered()
        .iter()
        .filter(|(_, e)| e.kind() == ResetEnd)
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(ends, [a, c, d]);
}

#[test]
fn quiescing_to_resetting_at_deadline_marks_unresponsive_and_names_it() {
    let mut h = harness();
    let good = h.reg("good");
    let wedged = h.reg("wedged");
    h.request(good).expect("request");
    h.execute(good).expect("ready");
    h.advance(999);
    assert_eq!(h.c().state(), State::Quiescing, "deadline not yet passed");
    h.advance(1);
    assert_ne!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.c().client(wedged).expect("registered").state,
        ClientState::Unresponsive
    );
    let named = h.c().recorder().iter().any(|r| {
        matches!(r.kind, RecordKind::Unresponsive { client, .. } if client == wedged && r.name.as_str() == "wedged")
    });
    assert!(named, "flight recorder names the unresponsive client");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(
        h.events_of(wedged),
        [Reset, ResetEnd],
        "still gets RESET_END"
    );
    assert_eq!(h.c().last_reset().expect("record").forced(), [wedged]);
    // Its execute after the deadline changes nothing.
    let r = h.call(|c, now| c.reset_execute(now, wedged, Epoch(1)));
    assert_eq!(r, Err(ExecuteError::NoResetPending));
}

#[test]
fn unresponsive_client_executing_after_deadline_is_too_late() {
    let mut h = harness_with(
        Policy {
            hw_ready_timeout_ms: 5_000,
            ..policy()
        },
        8,
    );
    *h.hca_mut() = SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(3_000),
        ..SimHcaConfig::default()
    });
    let slow = h.reg("slow");
    h.request(slow).expect("request");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.execute(slow), Ok(ExecuteOutcome::TooLate));
}

#[test]
fn planned_reset_with_abort_on_unresponsive_aborts_at_deadline() {
    let mut h = harness_with(
        Policy {
            abort_on_unresponsive: true,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Planned).expect("planned");
    h.execute(a).expect("a ready");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.asserts(), 0, "no hardware reset");
    assert_eq!(h.c().epoch(), Epoch(1));
    assert_eq!(h.events_of(a), [Reset, ResetAborted]);
    assert!(h.delivered().iter().any(|(_, e)| matches!(e,
        Event::ResetAborted { vetoed_by, cause: AbortCause::Unresponsive, .. } if *vetoed_by == wedged)));
    // docs/design.md §5 "An abort is not a veto": the record names no vetoer, keeps the unresponsive
    // client, and gives the quiesce it ran (to its deadline); the log says it aborted.
    let r = h.c().last_reset().expect("a record");
    assert!(r.aborted_unresponsive());
    assert_eq!(r.vetoer(), None);
    assert_eq!(r.forced(), [wedged]);
    assert_eq!(
        r.quiesce(),
        Some(Duration::from_ms(h.c().policy().quiesce_deadline_ms))
    );
    assert!(h.c().recorder().iter().any(|rec| matches!(rec.kind,
        RecordKind::Unresponsive { client, aborts: true } if client == wedged)));
}

#[test]
fn forced_reset_ignores_abort_on_unresponsive() {
    let mut h = harness_with(
        Policy {
            abort_on_unresponsive: true,
            ..policy()
        },
        8,
    );
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Forced).expect("forced");
    h.advance(3_000);
    assert_eq!(h.c().epoch(), Epoch(2), "forced reset went through");
    // The record says so even with the policy on: the late client did not abort it.
    assert!(h.c().recorder().iter().any(|r| matches!(r.kind,
        RecordKind::Unresponsive { client, aborts: false } if client == wedged)));
}
