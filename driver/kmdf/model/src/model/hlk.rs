//! The Windows HLK's Device Fundamentals tests, the list a certified driver survives, run as
//! sequences on the model: PnP disable and enable with I/O before and after, rebalance with
//! I/O before and after (and a rebalance cancelled), surprise removal with I/O, sleep (S3)
//! and hibernation (S4) cycles with I/O, and CHAOS (`races.rs`: PnP and power transitions
//! at once on four processors, with I/O). The HLK's own harness, its verifier settings and
//! its timing are Windows'; what is run here is each test's sequence of PnP and power IRPs
//! as KMDF turns them into callbacks, with the bus's I/O (IOCTLs on the control device, a
//! child's calls through HCABUS_BUS_INTERFACE_V1) before and after each transition.

use hcabus::bus_abi::status;
use hcabus::errors::RefusalCode;
use hcabus::ioctl::ResetMode;
use hcabus::types::State;
use hcabus_sim::FakeConnectX;
use wdk_sys::*;

use super::admin::{self, ADMIN};
use super::cchild::CChild;
use super::harness::{assert_passes, expect};
use super::harness::{enable, started};
use super::machine::{Machine, FILE_READ_DATA};
use hcabus_kmdf::kernel::ChildFunction;
use hcabus_sim::fixtures::identity;

/// The scenarios of this file (in the child process); `false` for another name.
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "df_disable_enable" => disable_enable(),
        "df_rebalance" => rebalance(),
        "df_surprise_remove" => surprise_remove(),
        "df_sleep" => sleep_and_hibernate(),
        _ => return false,
    }
    true
}

/// The bus's I/O: QUERY_STATE on the control device (the state Operational, the epoch the
/// child sees) and the child's query_state through the interface. Returns the epoch.
fn io(m: &mut Machine, child: &CChild, when: &str) -> u64 {
    let (status, s) = admin::query_state(m, FILE_READ_DATA);
    let Some(s) = s.filter(|_| status == STATUS_SUCCESS) else {
        expect(false, &format!("{when}: QUERY_STATE {status:#x}"));
        return 0;
    };
    expect(
        s.state == State::Operational as u32,
        &format!("{when}: the bus is in state {}", s.state),
    );
    let (answer, state, epoch) = child.query_state();
    expect(
        answer == status::SUCCESS && state == s.state && epoch == s.epoch,
        &format!(
            "{when}: the child's query_state {answer:#x} {state} e{epoch}, the IOCTL's e{}",
            s.epoch
        ),
    );
    s.epoch
}

/// A reset through the bus, asked by the administrator: the epoch moves by one.
fn reset(m: &mut Machine, child: &CChild, when: &str) {
    let before = io(m, child, when);
    let asked = admin::request_reset(m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("{when}: a forced reset {asked:#x}"),
    );
    m.advance(10_000);
    let after = io(m, child, when);
    expect(
        after == before + 1,
        &format!("{when}: a reset took the epoch from {before} to {after}"),
    );
}

/// DF - PNP Disable and Enable with IO Before and After: three rounds of enable (add,
/// start), I/O and a reset, disable (the child's removal, a query-remove, the remove), and
/// nothing of the bus's left to open in between.
fn disable_enable() {
    let (mut m, status) = Machine::boot(FakeConnectX::new(identity()), &[]);
    expect(
        status == STATUS_SUCCESS,
        &format!("DriverEntry: {status:#x}"),
    );
    for round in 1..=3 {
        enable(&mut m, &format!("enable {round}"));
        let fdo = m.fdo.unwrap_or_default();
        let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
        reset(&mut m, &child, &format!("enable {round}"));
        child.vetoes = false;
        expect(child.detach() == 0, &format!("disable {round}: unregister"));
        let query = m.query_remove();
        expect(
            query == STATUS_SUCCESS,
            &format!("disable {round}: query-remove {query:#x}"),
        );
        m.remove();
        expect(
            m.open(admin::LINK).is_none(),
            &format!("disable {round}: the control device still opens"),
        );
    }
    m.unload();
}

/// DF - PNP Rebalance with IO Before and After: three stops and restarts for a rebalance,
/// one the PnP manager cancels, the I/O answered before and after each with the epoch
/// unchanged (a rebalance is not a reset: the children hear nothing).
fn rebalance() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    let epoch = io(&mut m, &child, "before");
    for round in 1..=3 {
        let query = m.query_stop();
        expect(
            query == STATUS_SUCCESS,
            &format!("rebalance {round}: query-stop {query:#x}"),
        );
        m.stop_after_query();
        let restarted = m.start();
        expect(
            restarted == STATUS_SUCCESS,
            &format!("rebalance {round}: restart {restarted:#x}"),
        );
        m.run();
        let now = io(&mut m, &child, &format!("after rebalance {round}"));
        expect(
            now == epoch,
            &format!("rebalance {round}: epoch {epoch} became {now}"),
        );
    }
    let query = m.query_stop();
    expect(query == STATUS_SUCCESS, &format!("query-stop: {query:#x}"));
    m.cancel_stop();
    reset(&mut m, &child, "after a cancelled stop");
    expect(
        child.heard().len() == 2,
        &format!(
            "the child heard {:?}: one reset's two events",
            child.heard()
        ),
    );
    child.vetoes = false;
    expect(child.detach() == 0, "unregister");
    m.surprise_remove();
    m.unload();
}

/// DF - PNP Surprise Remove Device Test: I/O, then the device pulled: the control device
/// is gone, the child's calls through the interface it still holds are answered
/// DEVICE_REMOVED, its unregister too, and the driver unloads with nothing left.
fn surprise_remove() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    reset(&mut m, &child, "before");
    m.surprise_remove();
    let (status, _) = admin::query_state(&mut m, FILE_READ_DATA);
    expect(
        status == STATUS_OBJECT_NAME_NOT_FOUND,
        &format!("an IOCTL after the removal: {status:#x}"),
    );
    let removed = status::of_refusal(RefusalCode::DeviceRemoved);
    let (answer, _, _) = child.query_state();
    expect(
        answer == removed,
        &format!("the child's call after the removal: {answer:#x}"),
    );
    let answer = child.detach();
    expect(
        answer == removed,
        &format!("the child's unregister after the removal: {answer:#x}"),
    );
    m.unload();
}

/// DF - Sleep and PnP with IO Before and After, and the hibernation cycle: S3 twice and S4
/// once (D0Exit to D3, or to PrepareForHibernation with the boot LUN on the hibernation
/// path), a minute asleep each, the I/O before and after; then a disable and enable.
fn sleep_and_hibernate() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    for (round, target) in [
        _WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3,
        _WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3,
        _WDF_POWER_DEVICE_STATE::WdfPowerDevicePrepareForHibernation,
    ]
    .into_iter()
    .enumerate()
    {
        let before = io(&mut m, &child, &format!("before sleep {round}"));
        m.power_down(target);
        m.advance(60_000);
        let woke = m.power_up();
        expect(
            woke == STATUS_SUCCESS,
            &format!("wake {round}: D0Entry {woke:#x}"),
        );
        m.advance(10_000);
        let after = io(&mut m, &child, &format!("after sleep {round}"));
        expect(
            after == before,
            &format!("sleep {round}: epoch {before} became {after} with no reset asked"),
        );
    }
    reset(&mut m, &child, "after the sleeps");
    child.vetoes = false;
    expect(child.detach() == 0, "unregister");
    let query = m.query_remove();
    expect(
        query == STATUS_SUCCESS,
        &format!("query-remove: {query:#x}"),
    );
    m.remove();
    enable(&mut m, "enable after the sleeps");
    let (status, s) = admin::query_state(&mut m, FILE_READ_DATA);
    expect(
        status == STATUS_SUCCESS && s.is_some(),
        &format!("after the enable: QUERY_STATE {status:#x}"),
    );
    m.surprise_remove();
    m.unload();
}

#[test]
fn pnp_disable_and_enable_with_io_before_and_after() {
    assert_passes("df_disable_enable");
}

#[test]
fn pnp_rebalance_with_io_before_and_after_and_a_cancelled_stop() {
    assert_passes("df_rebalance");
}

#[test]
fn surprise_removal_with_io() {
    assert_passes("df_surprise_remove");
}

#[test]
fn sleep_and_hibernation_cycles_with_io_then_disable_and_enable() {
    assert_passes("df_sleep");
}
