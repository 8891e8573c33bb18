//! The planted violations of the SDV rules the first pass checked without one (docs/sdv-
//! rules.md): each defect breaks one rule on purpose, and the model must stop naming it.

use hcabus::ioctl::ResetMode;
use hcabus_sim::FakeConnectX;
use wdk_sys::STATUS_SUCCESS;

use super::admin::{self, ADMIN};
use super::harness::{assert_caught, assert_passes, expect, run};
use super::harness::{started, HARDWARE_ID};
use super::machine::Machine;
use super::with;
use hcabus_kmdf::lab::Defect;
use hcabus_sim::fixtures::identity;

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
            [
                "DriverAttributeChanged in WdfDriverCreate",
                "reported at unload",
            ],
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

/// The scenario each planted violation docs/sdv-rules.md names runs in (the tests above and
/// in misuses.rs say what each prints; this holds the table to the rule it names).
const SCENARIO_OF: &[(&str, &str)] = &[
    ("CompletedTwice", "life"),
    ("ControlCreateOnFreedInit", "life"),
    // Without an IOCTL after the removal, which stops `life` on its expectation first.
    ("ControlDeviceKept", "child_outlives_fdo"),
    ("ControlFromPnpInit", "life"),
    ("ControlInitAfterCreate", "life"),
    ("ControlInitFreedTwice", "control_create_fails"),
    ("ControlInitNotFreed", "control_create_fails"),
    ("ControlNoCleanupCallback", "life"),
    ("ControlNotFinished", "life"),
    ("CreateAfterFailedName", "name_fails"),
    ("CreateFailureIgnored", "control_create_fails"),
    ("DriverLevelChanged", "life"),
    ("ErrorLogUnchecked", "error_log_refused"),
    ("FdoInitAfterCreate", "life"),
    ("FreeNullInit", "control_create_fails"),
    ("LeftPending", "life"),
    ("LockWithoutParent", "life"),
    ("NameFailureNotFreed", "name_fails"),
    ("NoChildListConfig", "life"),
    ("NoDriverCreate", "life"),
    ("PassiveCallAtDispatch", "life"),
    ("PdoInitAfterCreate", "life"),
    ("QueueLevelInherited", "life"),
    ("SpinLockKept", "life"),
    ("SpinLockTwice", "life"),
    ("TouchedAfterCompletion", "life"),
    ("WaitLockKept", "life"),
    ("WaitLockTwice", "life"),
    ("WrittenAfterCompletion", "life"),
];

/// docs/sdv-rules.md's claims run: each row's planted violation is planted, its scenario run,
/// and the rule the model stops on must be one the row says enforces it.
#[test]
fn each_plant_the_sdv_table_names_fires_a_rule_its_row_names() {
    use crate::catalog::{read, rows, ticked};
    let doc = read("../../../docs/sdv-rules.md");
    let mut fired: Vec<(String, String)> = Vec::new();
    let mut checked = 0;
    for row in rows(&doc) {
        let rules = ticked(&row.how, "Rule::");
        for plant in ticked(&row.planted, "Defect::") {
            let rule = match fired.iter().find(|(p, _)| p == plant) {
                Some((_, rule)) => rule.clone(),
                None => {
                    let Some(&(_, scenario)) = SCENARIO_OF.iter().find(|(p, _)| *p == plant) else {
                        panic!(
                            "{}: Defect::{plant} has no scenario in SCENARIO_OF",
                            row.rule
                        );
                    };
                    let defect = super::harness::defect_named(plant)
                        .unwrap_or_else(|| panic!("Defect::{plant} is not plantable"));
                    let o = run(scenario, Some(defect));
                    // "KMDF MODEL BUGCHECK 0x10d RuleName in DDI: ..."
                    let rule = o
                        .stderr
                        .lines()
                        .find_map(|l| l.strip_prefix("KMDF MODEL BUGCHECK "))
                        .and_then(|l| l.split_whitespace().nth(1))
                        .unwrap_or("(nothing: the scenario ran through)")
                        .to_string();
                    fired.push((plant.to_string(), rule.clone()));
                    rule
                }
            };
            assert!(
                rules.contains(&rule.as_str()),
                "{}: Defect::{plant} stopped the model on {rule}; the row names {rules:?}",
                row.rule
            );
            checked += 1;
        }
    }
    assert!(checked >= 35, "{checked} plants checked against their rows");
    println!("sdv table: {checked} planted violations, each on a rule its row names");
}
