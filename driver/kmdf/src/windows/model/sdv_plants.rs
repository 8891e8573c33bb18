//! The planted violations of the SDV rules the first pass checked without one (docs/sdv-
//! rules.md): each defect breaks one rule on purpose, and the model must stop naming it.

use hcabus_sim::FakeConnectX;

use super::machine::Machine;
use super::tests::{assert_caught, assert_passes, expect, HARDWARE_ID};
use super::with;
use crate::tests::identity;
use crate::windows::defects::Defect;

/// The scenarios of this file (in the child process); `false` for another name.
pub(super) fn scenario(name: &str) -> bool {
    match name {
        "name_fails" => name_fails(),
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

#[test]
fn a_control_device_whose_name_cannot_be_assigned_fails_the_add_and_frees_its_init() {
    assert_passes("name_fails");
}

#[test]
fn each_planted_violation_of_the_remaining_sdv_rules_is_caught() {
    let cases: [(&str, Defect, [&str; 2]); 8] = [
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
