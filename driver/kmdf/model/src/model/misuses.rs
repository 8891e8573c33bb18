//! The misuses the layer once had (docs/windows.md, A to R) and the SDV rules on locks,
//! requests and inits, each planted back and caught by the rule it breaks.

use super::harness::*;
use hcabus_kmdf::lab::Defect;

#[test]
fn a_null_context_type_bugchecks_in_the_first_lookup() {
    assert_caught(
        "life",
        Defect::NullContextType,
        &[
            "0x10d",
            "NullParameter",
            "WdfObjectGetTypedContextWorker",
            "TypeInfo is NULL",
        ],
    );
}

#[test]
fn a_context_size_without_its_type_fails_the_fdo() {
    assert_caught(
        "life",
        Defect::SizeWithoutType,
        &[
            "EvtDriverDeviceAdd: 0xc0200209",
            "WdfDeviceCreate",
            "ContextSizeOverride without ContextTypeInfo",
        ],
    );
}

#[test]
fn deferred_objects_with_an_invalid_execution_level_fail_prepare_hardware() {
    assert_caught(
        "life",
        Defect::InvalidExecutionLevel,
        &[
            "EvtDevicePrepareHardware",
            "WdfDpcCreate",
            "ExecutionLevel is WdfExecutionLevelInvalid",
        ],
    );
}

#[test]
fn release_hardware_without_rundown_leaves_objects_behind() {
    assert_caught(
        "life",
        Defect::ReleaseWithoutRundown,
        &[
            "CycleLeak",
            "EvtDeviceReleaseHardware",
            "WDFTIMER",
            "WDFSPINLOCK",
        ],
    );
}

#[test]
fn release_hardware_unmaps_bar0_and_dereferences_the_pci_interface() {
    assert_caught(
        "life",
        Defect::MappingKept,
        &["MappingLeak", "EvtDeviceReleaseHardware", "never unmapped"],
    );
}

#[test]
fn the_output_buffer_is_the_output_length_not_the_input_length() {
    assert_caught(
        "life",
        Defect::OutputFromInput,
        &["QUERY_STATE: 0xc0000023"],
    );
}

/// A control device kept past its FDO's removal stays reachable by name: the IOCTL after
/// removal finds it (and, since it holds its FDO, is answered DEVICE_REMOVED) where the name must be gone.
#[test]
fn the_control_device_goes_with_its_fdo() {
    assert_caught(
        "life",
        Defect::ControlDeviceKept,
        &["Expectation", "an IOCTL after removal: 0xc00002b6"],
    );
    // With no IOCTL after the removal, the rule SDV's ControlDeviceDeleted stands for.
    assert_caught(
        "child_outlives_fdo",
        Defect::ControlDeviceKept,
        &["ControlDeviceAtUnload in DriverUnload", "never deleted"],
    );
}

#[test]
fn each_pdo_answers_pnp_with_an_instance_id_and_text() {
    assert_caught(
        "life",
        Defect::BarePdo,
        &["PdoIdentity", "IRP_MN_QUERY_ID", "BusQueryInstanceID"],
    );
}

#[test]
fn rights_come_from_the_ioctl_required_access() {
    assert_caught(
        "life",
        Defect::ShareAccessAsGranted,
        &["QUERY_STATE: 0xc0000022"],
    );
}

/// Static Driver Verifier's KMDF rules that apply to this driver, each broken on purpose in
/// the layer and caught by the model (docs/sdv-rules.md): the rule, the DDI or callback
/// where it is caught, and what was wrong.
#[test]
fn each_planted_sdv_violation_is_caught_by_the_rule_it_breaks() {
    let cases: [(Defect, [&str; 3]); 8] = [
        (
            Defect::SpinLockTwice,
            ["SpinLockMisused", "WdfSpinLockAcquire", "acquired again"],
        ),
        (
            Defect::SpinLockKept,
            [
                "LockHeldOnReturn",
                "EvtTimerFunc",
                "returned holding a lock",
            ],
        ),
        (
            Defect::WaitLockTwice,
            ["WaitLockMisused", "WdfWaitLockAcquire", "acquired again"],
        ),
        // Caught at the next acquire within the same callback, before it returns: on
        // Windows, the thread would wait for itself.
        (
            Defect::WaitLockKept,
            ["WaitLockMisused", "WdfWaitLockAcquire", "acquired again"],
        ),
        (
            Defect::CompletedTwice,
            [
                "RequestCompletedTwice",
                "WdfRequestCompleteWithInformation",
                "completed again",
            ],
        ),
        (
            Defect::TouchedAfterCompletion,
            [
                "RequestUsedAfterCompletion",
                "WdfRequestRetrieveInputBuffer",
                "was completed",
            ],
        ),
        (
            Defect::LeftPending,
            [
                "RequestNotCompleted",
                "EvtIoDeviceControl",
                "without completing",
            ],
        ),
        (
            Defect::PassiveCallAtDispatch,
            [
                "IrqlTooHigh",
                "WdfDriverOpenParametersRegistryKey",
                "IRQL 2",
            ],
        ),
    ];
    for (defect, what) in cases {
        assert_caught("life", defect, &what);
    }
}

/// SDV's rules on a device's WDFDEVICE_INIT, each broken on purpose: used after its create,
/// freed twice, created from when freed, freed as NULL, a failed create taken for success,
/// no child list configured.
#[test]
fn each_planted_init_violation_is_caught_by_the_rule_it_breaks() {
    let cases: [(&str, Defect, [&str; 2]); 10] = [
        (
            "life",
            Defect::NoDriverCreate,
            ["NoDriverObject in DriverEntry", "without WdfDriverCreate"],
        ),
        (
            "life",
            Defect::ControlNotFinished,
            ["ControlNotFinished in EvtDriverDeviceAdd", "not finished"],
        ),
        (
            "life",
            Defect::FdoInitAfterCreate,
            [
                "InitMisused in WdfDeviceInitSetDeviceType",
                "already Consumed",
            ],
        ),
        (
            "life",
            Defect::PdoInitAfterCreate,
            [
                "InitMisused in WdfPdoInitSetDefaultLocale",
                "already Consumed",
            ],
        ),
        (
            "life",
            Defect::ControlInitAfterCreate,
            ["InitMisused in WdfDeviceInitAssignName", "already Consumed"],
        ),
        (
            "control_create_fails",
            Defect::ControlInitFreedTwice,
            ["InitMisused in WdfDeviceInitFree", "already Freed"],
        ),
        (
            "life",
            Defect::ControlCreateOnFreedInit,
            ["InitMisused in WdfDeviceCreate", "already Freed"],
        ),
        (
            "control_create_fails",
            Defect::FreeNullInit,
            [
                "NullParameter in WdfDeviceInitFree",
                "a NULL WDFDEVICE_INIT",
            ],
        ),
        (
            "control_create_fails",
            Defect::CreateFailureIgnored,
            [
                "Expectation in scenario",
                "an add whose control device failed succeeded",
            ],
        ),
        (
            "life",
            Defect::NoChildListConfig,
            [
                "NullParameter in WdfChildListAddOrUpdateChildDescriptionAsPresent",
                "a NULL handle",
            ],
        ),
    ];
    for (scenario, defect, what) in cases {
        assert_caught(scenario, defect, &what);
    }
}
