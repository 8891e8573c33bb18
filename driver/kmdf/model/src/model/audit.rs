//! The defects an audit of the layer against KMDF's source found (issue 61: D2 to D6), each
//! a scenario that failed on the layer before its fix and a planted defect that puts it back.

use hcabus_sim::FakeConnectX;
use wdk_sys::*;

use super::admin::{self, ADMIN};
use super::cchild::CChild;
use super::harness::{assert_caught, assert_passes, expect};
use super::harness::{enable, started};
use super::kernel::{Kind, Role};
use super::machine::Machine;
use super::with;
use hcabus_kmdf::kernel::ChildFunction;
use hcabus_kmdf::lab::Defect;
use hcabus_sim::fixtures::identity;

/// A PCI function this driver does not take (an Intel NIC).
const UNSUPPORTED_ID: &str = "PCI\\VEN_8086&DEV_1572&SUBSYS_00018086&REV_01";

/// The scenarios of this file (in the child process); `false` for another name.
pub(super) fn scenario(name: &str) -> bool {
    match name {
        "names_across_disable" => names_across_disable(),
        "stopped_wait_on_the_clock" => stopped_wait_on_the_clock(),
        "failed_restart" => failed_restart(),
        "reset_after_query_stop" => reset_after_query_stop(),
        _ => return false,
    }
    true
}

/// The names of the control devices alive now.
fn control_links() -> String {
    with(|k| {
        let links: Vec<String> = k
            .objects
            .iter()
            .filter(|o| !o.deleted)
            .filter_map(|o| match &o.kind {
                Kind::Device(d) if d.role == Role::Control => Some(d.links.join(" ")),
                _ => None,
            })
            .collect();
        format!("[{}]", links.join(", "))
    })
}

/// D5: an unsupported function offered first, then the adapter disabled and enabled three
/// times with the driver loaded (Device Manager's disable, `pnputil /restart-device`): its
/// control device is `\\.\HcaBus0` each time, where hcactl looks by default. Numbers are
/// the lowest free: a second adapter beside it is HcaBus1, and a number given back is
/// taken again.
fn names_across_disable() {
    let (mut m, status) = Machine::boot(FakeConnectX::new(identity()), &[]);
    expect(
        status == STATUS_SUCCESS,
        &format!("DriverEntry: {status:#x}"),
    );
    let refused = m.add_device(UNSUPPORTED_ID);
    expect(refused < 0, "an Intel function was taken");
    for round in 1..=3 {
        enable(&mut m, &format!("enable {round}"));
        let Some(handle) = m.open(admin::LINK) else {
            expect(
                false,
                &format!(
                    "enable {round}: no {}; the control devices are {}",
                    admin::LINK,
                    control_links()
                ),
            );
            return;
        };
        m.close(handle);
        // The instance bitmap is the Linux build's (the image has its own, not reachable).
        if round == 1 && !super::driver::is_image() {
            // Beside the first adapter, the next numbers, lowest first.
            let (a, b) = (
                hcabus_kmdf::lab::claim_instance(),
                hcabus_kmdf::lab::claim_instance(),
            );
            expect(
                a == Some(1) && b == Some(2),
                &format!("claimed {a:?} {b:?}"),
            );
            hcabus_kmdf::lab::release_instance(1);
            let again = hcabus_kmdf::lab::claim_instance();
            expect(again == Some(1), &format!("1 given back, then {again:?}"));
            hcabus_kmdf::lab::release_instance(1);
            hcabus_kmdf::lab::release_instance(2);
        }
        m.remove();
    }
    m.unload();
}

#[test]
fn control_device_names_stay_put_across_disable_and_enable() {
    assert_passes("names_across_disable");
    assert_caught(
        "names_across_disable",
        Defect::NamesDrift,
        &[
            "Expectation",
            "enable 1: no \\DosDevices\\HcaBus0",
            "HcaBus1",
        ],
    );
}

/// D4: a child's call while the bus is stopped (a PnP stop with no start after it) waits
/// STOPPED_WAIT_MS of the clock, then is told DEVICE_BUSY. Its 10 ms sleeps each last to the
/// next 15.625 ms tick: counted, 3,000 of them were 46.9 s.
fn stopped_wait_on_the_clock() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    expect(m.stop() == STATUS_SUCCESS, "query stop");
    let before_us = with(|k| k.now_us);
    let (status, _, _) = child.query_state();
    let waited_us = with(|k| k.now_us) - before_us;
    expect(
        status == hcabus::bus_abi::status::DEVICE_BUSY,
        &format!("a child's call while the bus is stopped: {status:#x}"),
    );
    let tick_us = with(|k| k.tick.0);
    expect(
        (30_000_000..=30_000_000 + 2 * tick_us).contains(&waited_us),
        &format!("the stopped wait took {waited_us} us of the clock, for 30 s"),
    );
    expect(m.start() == STATUS_SUCCESS, "restart");
    m.run();
    leave_and_unload(m, &mut child);
}

#[test]
fn a_childs_wait_for_a_stopped_bus_is_bounded_by_the_clock_not_its_sleeps() {
    assert_passes("stopped_wait_on_the_clock");
}

/// D3: a rebalance whose start the bus driver below fails. KMDF calls no prepare and no
/// D0Entry, only EvtDeviceSelfManagedIoFlush; the PnP manager then removes the children,
/// whose drivers unregister in their remove path (at PASSIVE_LEVEL), then the FDO. Each
/// unregister is answered at once, DEVICE_REMOVED, not after the stopped wait (30 s of the
/// clock a child before).
fn failed_restart() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    expect(m.stop() == STATUS_SUCCESS, "query stop");
    m.fail_restart();
    let before_us = with(|k| k.now_us);
    let status = child.detach();
    let waited_us = with(|k| k.now_us) - before_us;
    let removed = hcabus::bus_abi::status::of_refusal(hcabus::errors::RefusalCode::DeviceRemoved);
    expect(
        status == removed && waited_us == 0,
        &format!(
            "the child's unregister after a failed restart: {status:#x} after {waited_us} us \
             (DEVICE_REMOVED at once expected)"
        ),
    );
    m.remove_failed();
    m.unload();
}

#[test]
fn a_restart_that_fails_below_the_fdo_releases_the_waiting_children_at_once() {
    assert_passes("failed_restart");
    assert_caught(
        "failed_restart",
        Defect::FailedRestartKeepsWaiting,
        &["Expectation", "0x80000011 after 30"],
    );
}

/// D2: once EvtDeviceQueryStop has allowed a stop, no reset starts before the stop and the
/// restart (the stop drops the mapping a reset saves the config space in), nor before the
/// stop's cancel: an administrator's forced reset is answered DEVICE_BUSY (ask again). After
/// the restart it is taken; after a cancelled stop (heard through the
/// WdfDevStatePnpQueryCanceled state-change callback) as well.
fn reset_after_query_stop() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    let epoch = admin::state(&mut m).epoch;
    let forced = |m: &mut Machine| admin::request_reset(m, ADMIN, hcabus::ioctl::ResetMode::Forced);
    expect(m.query_stop() == STATUS_SUCCESS, "query stop");
    let asked = forced(&mut m);
    m.advance(2_000);
    let state = admin::state(&mut m);
    let now = state.epoch;
    expect(
        asked == STATUS_DEVICE_BUSY && now == epoch,
        &format!("a forced reset between an allowed query-stop and the stop: {asked:#x}, epoch {epoch} then {now}"),
    );
    // QUERY_STATE says why, for hcactl to tell the administrator.
    let pending = hcabus::ioctl::STATE_STOP_PENDING;
    expect(state.flags & pending != 0, "QUERY_STATE: the stop pending");
    m.stop_after_query();
    expect(m.start() == STATUS_SUCCESS, "restart");
    m.run();
    let asked = forced(&mut m);
    m.advance(5_000);
    let state = admin::state(&mut m);
    let after = state.epoch;
    expect(
        state.flags & pending == 0,
        "QUERY_STATE: no stop pending after the restart",
    );
    expect(
        asked == STATUS_SUCCESS && after == epoch + 1,
        &format!("a forced reset after the restart: {asked:#x}, epoch {after}"),
    );
    expect(m.query_stop() == STATUS_SUCCESS, "a second query stop");
    expect(
        forced(&mut m) == STATUS_DEVICE_BUSY,
        "a reset while the second stop is pending",
    );
    m.cancel_stop();
    let asked = forced(&mut m);
    m.advance(5_000);
    let last = admin::state(&mut m).epoch;
    expect(
        asked == STATUS_SUCCESS && last == epoch + 2,
        &format!("a forced reset after a cancelled stop: {asked:#x}, epoch {last}"),
    );
    leave_and_unload(m, &mut child);
}

#[test]
fn no_reset_starts_between_an_allowed_query_stop_and_the_stop_or_its_cancel() {
    assert_passes("reset_after_query_stop");
    assert_caught(
        "reset_after_query_stop",
        Defect::ResetAfterQueryStop,
        &[
            "Expectation",
            "between an allowed query-stop and the stop: 0x0",
        ],
    );
}

/// The end of a scenario with a child: it unregisters and lets the interface go, the device
/// is pulled, the driver unloads (and the model finds nothing left).
fn leave_and_unload(mut m: Machine, child: &mut CChild) {
    child.vetoes = false;
    let status = child.detach();
    expect(status == 0, &format!("the child's unregister: {status:#x}"));
    m.surprise_remove();
    m.unload();
}
