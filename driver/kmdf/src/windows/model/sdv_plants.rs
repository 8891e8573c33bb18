//! The planted violations of the SDV rules the first pass checked without one (docs/sdv-
//! rules.md): each defect breaks one rule on purpose, and the model must stop naming it.

use hcabus::ioctl::ResetMode;
use hcabus_sim::FakeConnectX;
use wdk_sys::STATUS_SUCCESS;

use super::admin::{self, ADMIN};
use super::machine::Machine;
use super::tests::{assert_caught, assert_passes, expect, started, HARDWARE_ID};
use super::with;
use crate::tests::identity;
use crate::windows::defects::Defect;

/// The scenarios of this file (in the child process); `false` for another name.
pub(super) fn scenario(name: &str) -> bool {
    match name {
        "name_fails" => name_fails(),
        "error_log_refused" => error_log_refused(),
        _ => return false,
    }
    true
}

/// KMDF cannot assign the control device its name: the add fails, the control device's init
/// is freed (it is the driver's until a create consumes it), and unload finds nothing left.
fn name_fails() {
    let (mut m, _) = Machine::boot(FakeConnectX::new(identity()), &[]);
    with(|k| k.failures.push(("WdfDeviceInitAssignName", 0)));
    let status = m.add_device(HARDWARE_ID);
    expect(
        status < 0,
        "an add whose control device has no name succeeded",
    );
    m.unload();
}

/// The pool has no packet for the event log when a forced reset starts: the reset goes on,
/// the entry is lost (and said so in the debug output), nothing is written through the NULL.
fn error_log_refused() {
    let mut m = started();
    let logged = with(|k| k.events.len());
    with(|k| k.failures.push(("IoAllocateErrorLogEntry", 0)));
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a forced reset: {asked:#x}"),
    );
    m.advance(5_000);
    let epoch = admin::state(&mut m).epoch;
    let (refused, after) = with(|k| (k.failures.iter().all(|f| f.0.is_empty()), k.events.len()));
    expect(refused, "the event log's packet was never asked for");
    expect(
        epoch == 2,
        &format!("the reset did not finish: epoch {epoch}"),
    );
    expect(after > logged, "no later entry was written");
    m.surprise_remove();
    m.unload();
}

#[test]
fn an_event_log_entry_the_pool_cannot_give_is_lost_and_the_reset_goes_on() {
    assert_passes("error_log_refused");
}

#[test]
fn a_control_device_whose_name_cannot_be_assigned_fails_the_add_and_frees_its_init() {
    assert_passes("name_fails");
}

#[test]
fn each_planted_violation_of_the_remaining_sdv_rules_is_caught() {
    let cases: [(&str, Defect, [&str; 2]); 9] = [
        (
            "error_log_refused",
            Defect::ErrorLogUnchecked,
            ["NullDereference in (driver code)", "a page fault at 0x"],
        ),
        (
            "life",
            Defect::LockWithoutParent,
            ["LockWithoutParent in WdfSpinLockCreate", "no ParentObject"],
        ),
        (
            "life",
            Defect::DriverLevelChanged,
            ["Expectation", "WdfDriverCreate"],
        ),
        (
            "life",
            Defect::WrittenAfterCompletion,
            [
                "BufferAfterCompletion in EvtIoDeviceControl",
                "written after",
            ],
        ),
        (
            "life",
            Defect::QueueLevelInherited,
            ["IrqlTooHigh", "called at IRQL 2"],
        ),
        (
            "life",
            Defect::ControlFromPnpInit,
            ["InitMisused in WdfDeviceInitAssignName", "already Consumed"],
        ),
        (
            "name_fails",
            Defect::CreateAfterFailedName,
            [
                "InitMisused in WdfDeviceCreate",
                "WdfDeviceInitAssignName failed",
            ],
        ),
        (
            "name_fails",
            Defect::NameFailureNotFreed,
            ["InitLeaked in DriverUnload", "neither consumed nor freed"],
        ),
        (
            "life",
            Defect::ControlNoCleanupCallback,
            [
                "ControlNoCleanup in WdfDeviceCreate",
                "no EvtCleanupCallback",
            ],
        ),
    ];
    for (scenario, defect, what) in cases {
        assert_caught(scenario, defect, &what);
    }
}
