//! What an administrator reads on Windows, on the model: the driver's ETW events read back
//! against the flight record, and its System-log entries rendered as Event Viewer shows them,
//! through a reset that ends Failed; a session that listens to nothing, or to the resets only,
//! gets what it asked for; a provider ETW refuses leaves the driver untraced; and a provider
//! left registered at unload is caught.

use hcabus::ioctl::ResetMode;
use hcabus::types::State;
use hcabus_kmdf::etw::Keywords;
use hcabus_sim::Fault;

use super::admin::{self, ADMIN};
use super::etw::{self, Session};
use super::harness::{assert_caught, assert_passes, expect, started};
use super::with;
use hcabus_kmdf::lab::Defect;

/// The scenarios of this file (in the child process); `false` for another name.
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "reset_fails" => reset_fails(),
        "etw_sessions" => etw_sessions(),
        "etw_refused" => etw_refused(),
        _ => return false,
    }
    true
}

/// Another adapter answers after a forced reset: the device ends Failed and PnP is told.
/// Every record reached ETW, the failure as an error; the System log has the replacement,
/// and every entry reads in Event Viewer with its message.
fn reset_fails() {
    let mut m = started();
    with(|k| k.adapters[0].hca.inject(Fault::DeviceReplaced));
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(asked == 0, &format!("a forced reset: {asked:#x}"));
    m.advance(10_000);
    let s = admin::state(&mut m);
    expect(
        s.state == State::Failed as u32,
        &format!("after the replacement: {s:?}"),
    );
    let records = admin::flight_record(&mut m);
    // The bundle kept at the failure: its records are the flight record's up to it.
    let (status, kept) = admin::read_bundle(&mut m, hcabus::ioctl::BUNDLE_KEPT);
    let bundle = hcabus::coordinator::bundle::read_bundle(&kept);
    let holds = bundle.as_ref().is_ok_and(|b| {
        b.fail_reason() == Some(hcabus::types::FailReason::DeviceReplaced)
            && b.state() == Some(State::Failed)
            && !b.records.is_empty()
            && b.records
                .iter()
                .zip(&records)
                .all(|(x, y)| x.seq == y.seq && x.kind == y.kind)
    });
    expect(
        status == 0 && holds,
        &format!("the bundle kept at the failure: {status:#x} {bundle:?}"),
    );
    let kinds = etw::matches_flight_record(&records);
    for kind in ["reset_started", "reset_failed", "pnp", "hw", "call"] {
        expect(
            kinds.iter().any(|k| k == kind),
            &format!("no {kind} event in {kinds:?}"),
        );
    }
    let failed = with(|k| {
        k.etw
            .written
            .iter()
            .any(|w| w.level == hcabus_kmdf::etw::LEVEL_ERROR)
    });
    expect(failed, "the failure was not written as an error");
    let events = with(|k| k.events.clone());
    let table = hcabus_kmdf::event_viewer::driver_messages();
    expect(
        events.iter().any(|e| e.code == 0xE0AB_1004),
        &format!("no replacement in the System log: {events:?}"),
    );
    for e in &events {
        let shown = table.render(e.code, "\\Device\\hcabus0", &e.strings);
        expect(shown.is_ok(), &format!("{e:?} in Event Viewer: {shown:?}"));
    }
    m.surprise_remove();
    m.unload();
}

/// No session (from after the start): a reset writes no event (the driver asks
/// EtwEventEnabled first). A session for the resets only: only events with the RESET
/// keyword, a reset's start, state changes and end among them, and no hardware step.
fn etw_sessions() {
    let mut m = started();
    etw::set_session(None);
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(asked == 0, &format!("a forced reset: {asked:#x}"));
    m.advance(5_000);
    expect(
        etw::written() == 0,
        &format!("{} events with no session", etw::written()),
    );
    etw::set_session(Some(Session {
        level: 5,
        any_keyword: Keywords::RESET.bits(),
    }));
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(asked == 0, &format!("a second forced reset: {asked:#x}"));
    m.advance(5_000);
    let written = with(|k| k.etw.written.clone());
    let names: Vec<String> = written
        .iter()
        .map(|w| w.decode().map(|d| d.name).unwrap_or_default())
        .collect();
    expect(
        written
            .iter()
            .all(|w| w.keyword & Keywords::RESET.bits() != 0),
        &format!("events outside the session's keyword: {names:?}"),
    );
    for kind in ["reset_started", "transition", "reset_finished"] {
        expect(
            names.iter().any(|n| n == kind),
            &format!("no {kind} in {names:?}"),
        );
    }
    expect(
        !names.iter().any(|n| n == "hw"),
        &format!("a hardware step in {names:?}"),
    );
    m.surprise_remove();
    m.unload();
}

/// ETW refuses the provider: the driver loads and resets untraced, writes nothing, and
/// unregisters nothing it does not hold.
fn etw_refused() {
    etw::REFUSE_REGISTER.store(true, core::sync::atomic::Ordering::Relaxed);
    let mut m = started();
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(asked == 0, &format!("a forced reset: {asked:#x}"));
    m.advance(5_000);
    expect(admin::state(&mut m).epoch == 2, "the reset ran untraced");
    expect(etw::written() == 0, "events written with no provider");
    m.surprise_remove();
    m.unload();
}

#[test]
fn a_driver_whose_provider_etw_refuses_runs_untraced() {
    assert_passes("etw_refused");
}

#[test]
fn a_failed_reset_reaches_etw_and_the_system_log_as_its_flight_record_says() {
    assert_passes("reset_fails");
}

#[test]
fn a_session_gets_the_events_it_enables_and_nothing_else() {
    assert_passes("etw_sessions");
}

#[test]
fn a_provider_left_registered_at_unload_is_caught() {
    assert_caught(
        "life",
        Defect::EtwKeptAtUnload,
        &["EtwRegistration in DriverUnload", "still registered"],
    );
}
