//! Surprise removal in every state.

use super::*;

fn removal_in(state: State) {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    match state {
        State::Operational => {}
        State::Quiescing => {
            h.request(a).expect("request");
        }
        State::Resetting => {
            h.request(a).expect("request");
            h.execute(a).expect("ready");
            h.execute(b).expect("ready");
        }
        State::Failed => {
            h.hca_mut().fail_next_resets(10);
            h.request(a).expect("request");
            h.complete(&[a, b]);
        }
        _ => unreachable!(),
    }
    assert_eq!(h.c().state(), state);
    h.hca_mut().remove();
    h.call(|c, now| c.surprise_removal(now));
    h.pump();
    assert_eq!(h.c().state(), State::Removed);
    assert!(h.timers().is_empty(), "every wait ended at once");
    assert_eq!(h.events_of(a).last(), Some(&DeviceFatal));
    assert_eq!(h.events_of(b).last(), Some(&DeviceFatal));
    assert!(h.pnp().contains(&PnpOp::ReportChildrenMissing));
    // Later calls fail cleanly; time passing changes nothing.
    let d = ClientDesc::new("new", ClientKind::Custom, ClientFlags::empty()).expect("fits");
    assert_eq!(
        h.call(|c, now| c.register(now, d)),
        Err(RegisterError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.reset_request(now, a)),
        Err(RequestError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, a, Epoch(1))),
        Err(ExecuteError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.admin_reset(now, AdminReset::Forced)),
        Err(AdminResetError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.admin_restart(now)),
        Err(RestartError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.unregister(now, a)),
        Ok(()),
        "clients can still leave"
    );
    let before = h.delivered().len();
    h.advance(120_000);
    assert_eq!(h.delivered().len(), before);
    assert_eq!(h.c().state(), State::Removed);
}

#[test]
fn surprise_removal_while_operational() {
    removal_in(State::Operational);
}

#[test]
fn surprise_removal_during_quiesce() {
    removal_in(State::Quiescing);
}

#[test]
fn surprise_removal_during_hardware_reset() {
    removal_in(State::Resetting);
}

#[test]
fn surprise_removal_during_restore() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    let held = h.drive_to_restoring().expect("reaches Restoring");
    h.call(|c, now| c.surprise_removal(now));
    h.deliver_held(held);
    assert_eq!(h.c().state(), State::Removed);
    assert_eq!(h.events_of(a), [Reset, ResetEnd, DeviceFatal]);
    assert_eq!(
        h.c().last_reset().expect("record").result,
        Some(ResetResult::Removed)
    );
    assert!(h.timers().is_empty());
}

#[test]
fn surprise_removal_of_a_failed_device() {
    removal_in(State::Failed);
}
