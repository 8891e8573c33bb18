//! What the driver's life on the KMDF model shows, each a test over a scenario of `tests.rs`
//! run in its own process: the life itself, a child past removal, a rebalance, a handle past
//! the FDO, the special files, the pool walk, power, the hardware ids, the footprint.

use super::harness::HARDWARE_ID;
use super::harness::*;
use super::BUGCHECK_EXIT;
use hcabus_kmdf::device::DEFAULT_RECORDER_RECORDS;
use hcabus_kmdf::lab::Defect;

#[test]
fn the_driver_lives_on_the_kmdf_model_from_driver_entry_to_unload() {
    assert_passes("life");
}

#[test]
fn a_child_holding_the_interface_past_removal_is_refused_and_its_reference_counted() {
    assert_passes("child_outlives_fdo");
    // The model's own rule, shown to hold: a reference never given back is found.
    let o = run("child_keeps_interface", None);
    assert_eq!(o.code, Some(BUGCHECK_EXIT), "{}", o.stderr);
    assert!(
        o.stderr.contains("ReferenceLeak in DriverUnload"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_query_for_the_interface_is_answered_as_kmdf_answers_it() {
    assert_passes("query_interface_as_kmdf");
}

#[test]
fn a_rebalance_is_invisible_to_the_children() {
    assert_passes("rebalance_with_a_child");
    // D3Final comes on every PnP stop: taken for removal, the rebalance fails the children.
    assert_caught(
        "rebalance_with_a_child",
        Defect::FinalExitAsRemoval,
        &["Expectation", "across a rebalance the child heard"],
    );
}

#[test]
fn a_handle_kept_past_the_fdo_is_answered_device_removed_and_reads_nothing_freed() {
    assert_passes("handle_outlives_fdo");
    assert_caught(
        "handle_outlives_fdo",
        Defect::ControlHoldsNoReference,
        &[
            "UsedAfterDelete",
            "WdfObjectGetTypedContextWorker",
            "WDFDEVICE",
        ],
    );
}

#[test]
fn the_boot_lun_can_hold_the_paging_dump_and_hibernation_files() {
    assert_passes("special_files");
    assert_caught(
        "special_files",
        Defect::NoSpecialFiles,
        &[
            "Expectation",
            "special file 1 on the boot LUN's path: 0xc0000002",
        ],
    );
}

/// Walks the refused allocation over every one that add, prepare and D0 entry ask the pool
/// for, each in its own machine: none bugchecks, each failure is
/// STATUS_INSUFFICIENT_RESOURCES, nothing leaks.
#[test]
fn every_allocation_of_add_and_start_may_fail_and_nothing_leaks() {
    let (mut failed_at_add, mut failed_at_start) = (0, 0);
    for n in 0..400 {
        let o = run(&format!("pool_short:{n}"), None);
        assert_eq!(o.code, Some(0), "allocation {n} refused:\n{}", o.stderr);
        let line = o
            .stdout
            .lines()
            .find_map(|l| l.split_once("POOL ").map(|(_, p)| p))
            .unwrap_or_default()
            .to_owned();
        if line.contains("refused=false") {
            assert!(n > 20, "only {n} allocations in add and start: {line}");
            assert!(
                failed_at_add > 0 && failed_at_start > 0,
                "{failed_at_add} {failed_at_start}"
            );
            return;
        }
        failed_at_add += usize::from(line.contains("failed=true at=add"));
        failed_at_start += usize::from(line.contains("failed=true at=start"));
    }
    panic!("add and start asked for more than 400 allocations");
}

/// The boxes `Box::new` made once, planted back: some allocation of the walk is then
/// handle_alloc_error, which aborts (on Windows: a bugcheck).
#[test]
fn an_infallible_allocation_in_prepare_is_caught_by_the_walk() {
    let aborted = (0..40).find_map(|n| {
        let o = run(
            &format!("pool_short:{n}"),
            Some(Defect::InfallibleAllocation),
        );
        (o.code != Some(0)).then_some((n, o.stderr))
    });
    let Some((n, stderr)) = aborted else {
        panic!("no refused allocation aborted with Box::new planted back");
    };
    assert!(
        stderr.contains("memory allocation of"),
        "allocation {n}: {stderr}"
    );
}

#[test]
fn nothing_touches_the_device_in_dx_and_the_watch_resumes_at_d0_entry() {
    assert_passes("sleep");
    assert_caught(
        "sleep",
        Defect::NothingInDx,
        &["DeviceInDx", "READ_REGISTER_ULONG", "in Dx"],
    );
}

#[test]
fn shutdown_and_hibernation_are_not_removal() {
    assert_passes("shutdown");
    assert_caught(
        "shutdown",
        Defect::FinalExitAsRemoval,
        &["Expectation", "the child heard"],
    );
}

#[test]
fn a_stop_is_refused_while_a_reset_is_open() {
    assert_passes("stop_during_reset");
    assert_caught(
        "stop_during_reset",
        Defect::StopDuringReset,
        &["Expectation", "a query stop in the middle of a reset: 0x0"],
    );
}

#[test]
fn a_reset_in_flight_is_over_before_d0_exit_returns() {
    assert_passes("sleep_during_reset");
    assert_caught(
        "sleep_during_reset",
        Defect::ResetRunsPastD0Exit,
        &["Expectation", "D0Exit returned with the reset open"],
    );
}

/// The model gives AddDevice every id a real PCI function reports (four hardware ids, about
/// 270 bytes): the driver asks their size first and attaches; the fixed 256-byte buffer it
/// once had gets STATUS_BUFFER_TOO_SMALL, and AddDevice refused every real adapter.
#[test]
fn add_device_reads_a_real_pci_functions_hardware_ids_whatever_their_length() {
    let (hardware, compatible) = super::table::pci_function_ids(HARDWARE_ID);
    assert_eq!(hardware.len(), 4);
    assert_eq!(hardware[3], "PCI\\VEN_15B3&DEV_1003");
    let bytes = 2 * (hardware.iter().map(|h| h.len() + 1).sum::<usize>() + 1);
    assert!(bytes > 256, "{bytes} bytes: more than the old buffer");
    assert!(compatible.contains(&"PCI\\CC_0C06".to_string()));
    assert_passes("life");
    assert_caught(
        "life",
        Defect::FixedIdBuffer,
        &["Expectation", "EvtDriverDeviceAdd: 0xc0000023"],
    );
}

#[test]
fn a_failed_control_device_create_frees_its_init() {
    assert_passes("control_create_fails");
    assert_caught(
        "control_create_fails",
        Defect::ControlInitNotFreed,
        &["InitLeaked", "DriverUnload"],
    );
}

#[test]
fn a_lock_kmdf_cannot_create_fails_prepare_hardware() {
    assert_passes("lock_create_fails");
    assert_caught(
        "lock_create_fails",
        Defect::LockStatusIgnored,
        &["NullParameter", "WdfSpinLockAcquire"],
    );
}

/// One adapter's non-paged bytes (heap and contexts) and WDF objects, as the footprint
/// scenario counted them; and what the driver wrote to the debugger.
fn measure(scenario: &str) -> (usize, usize, Vec<String>) {
    let o = run(scenario, None);
    assert_eq!(o.code, Some(0), "{scenario}:\n{}", o.stderr);
    let line = o
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("FOOTPRINT "))
        .unwrap_or_else(|| panic!("{scenario} printed no footprint:\n{}", o.stderr));
    let field = |name: &str| -> usize {
        line.split(' ')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
    };
    let debug = o
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("DBGPRINT "))
        .map(String::from)
        .collect();
    (field("heap") + field("contexts"), field("objects"), debug)
}

#[test]
fn an_adapter_costs_at_most_256_kib_of_non_paged_memory_at_defaults() {
    let (bytes, objects, debug) = measure("footprint");
    eprintln!("one adapter at defaults: {bytes} bytes, {objects} WDF objects");
    assert!(bytes <= 256 * 1024, "{bytes} bytes per adapter");
    assert!(debug.iter().all(|l| !l.contains("Parameters")), "{debug:?}");
}

#[test]
fn the_flight_recorder_depth_is_the_registry_value_and_costs_its_records() {
    let (default, _, _) = measure("footprint");
    let (deep, _, debug) = measure("footprint:4096");
    assert!(debug.iter().all(|l| !l.contains("Parameters")), "{debug:?}");
    let record = core::mem::size_of::<hcabus::recorder::Record>();
    assert_eq!(
        deep - default,
        (4096 - DEFAULT_RECORDER_RECORDS as usize) * record
    );
    // The depth the driver had before it was a policy: over the budget.
    assert!(deep > 256 * 1024, "{deep}");
}

#[test]
fn a_recorder_depth_out_of_range_is_refused_by_name_and_the_default_kept() {
    let (default, _, _) = measure("footprint");
    for bad in ["footprint:0", "footprint:63", "footprint:16385"] {
        let (bytes, _, debug) = measure(bad);
        assert_eq!(bytes, default, "{bad}");
        assert!(
            debug
                .iter()
                .any(|l| l.contains("Parameters\\flight_recorder_records") && l.contains("default")),
            "{bad}: {debug:?}"
        );
    }
}
