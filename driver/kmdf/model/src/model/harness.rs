//! How a scenario is run and judged: each in a child process of the test binary (a broken
//! rule ends the process, as a bugcheck ends the machine), on the Linux build or on the image,
//! with a defect planted or none; the parent reads how it ended.

use std::process::Command;

use super::BUGCHECK_EXIT;
use hcabus_kmdf::lab::Defect;
use hcabus_sim::fixtures::identity;
use hcabus_sim::FakeConnectX;
use wdk_sys::STATUS_SUCCESS;

use super::machine::Machine;
use super::with;

/// What the child process runs, and the defect planted in it (by name).
pub(super) const SCENARIO: &str = "HCABUS_MODEL_SCENARIO";
pub(super) const PLANT: &str = "HCABUS_MODEL_PLANT";
/// The image the child runs the scenario on (empty: the Linux build).
pub(crate) const IMAGE: &str = "HCABUS_MODEL_IMAGE";
/// The child driver's image loaded beside it (empty: none), for the two-image scenarios.
pub(crate) const CHILD_IMAGE: &str = "HCABUS_MODEL_CHILD_IMAGE";
/// A ConnectX-3's PCI function, as PnP names it.
pub(super) const HARDWARE_ID: &str = "PCI\\VEN_15B3&DEV_1003&SUBSYS_005015B3&REV_00";

/// How a scenario's process ended.
pub(crate) struct Outcome {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `scenario` in a child process, with `defect` planted.
pub(super) fn run(scenario: &str, defect: Option<Defect>) -> Outcome {
    run_on(scenario, defect, None)
}

/// Runs `scenario` in a child process on `image` (a .sys), or on the Linux build.
pub(crate) fn run_on(scenario: &str, defect: Option<Defect>, image: Option<&str>) -> Outcome {
    run_with(scenario, defect, image, None)
}

/// Runs `scenario` in a child process on the bus's `image` with the child driver's image
/// `child` loaded beside it.
pub(crate) fn run_with(
    scenario: &str,
    defect: Option<Defect>,
    image: Option<&str>,
    child: Option<&str>,
) -> Outcome {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .env(IMAGE, image.unwrap_or_default())
        .env(CHILD_IMAGE, child.unwrap_or_default())
        .args([
            "--exact",
            "model::tests::scenario",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SCENARIO, scenario)
        .env(PLANT, defect.map_or(String::new(), |d| format!("{d:?}")))
        .output()
        .expect("the scenario runs");
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) fn assert_passes(scenario: &str) {
    let o = run(scenario, None);
    assert_eq!(o.code, Some(0), "scenario {scenario} failed:\n{}", o.stderr);
}

/// A planted defect: the scenario must stop on the model with a line naming each of `what`
/// (the rule, the DDI, the reason).
pub(super) fn assert_caught(scenario: &str, defect: Defect, what: &[&str]) {
    caught(scenario, Some(defect), what);
}

/// The scenario, nothing planted, must stop on the model with a line naming each of `what`.
pub(crate) fn assert_caught_bare(scenario: &str, what: &[&str]) {
    caught(scenario, None, what);
}

fn caught(scenario: &str, defect: Option<Defect>, what: &[&str]) {
    let o = run(scenario, defect);
    assert_eq!(
        o.code,
        Some(BUGCHECK_EXIT),
        "{defect:?} was not caught by {scenario}:\n{}",
        o.stderr
    );
    let line = o
        .stderr
        .lines()
        .find(|l| l.starts_with("KMDF MODEL BUGCHECK"))
        .unwrap_or_default();
    for w in what {
        assert!(line.contains(w), "{defect:?}: expected {w:?} in: {line}");
    }
}

/// Every defect that can be planted back (`windows/defects.rs`).
const PLANTABLE: &[Defect] = &[
    Defect::NullContextType,
    Defect::SizeWithoutType,
    Defect::ControlInitNotFreed,
    Defect::InvalidExecutionLevel,
    Defect::ReleaseWithoutRundown,
    Defect::MappingKept,
    Defect::OutputFromInput,
    Defect::ControlDeviceKept,
    Defect::LockStatusIgnored,
    Defect::BarePdo,
    Defect::ShareAccessAsGranted,
    Defect::FixedIdBuffer,
    Defect::FinalExitAsRemoval,
    Defect::NothingInDx,
    Defect::ResetRunsPastD0Exit,
    Defect::ControlHoldsNoReference,
    Defect::NoSpecialFiles,
    Defect::InfallibleAllocation,
    Defect::StopDuringReset,
    Defect::SpinLockTwice,
    Defect::SpinLockKept,
    Defect::WaitLockTwice,
    Defect::WaitLockKept,
    Defect::CompletedTwice,
    Defect::TouchedAfterCompletion,
    Defect::LeftPending,
    Defect::PassiveCallAtDispatch,
    Defect::FdoInitAfterCreate,
    Defect::PdoInitAfterCreate,
    Defect::ControlInitAfterCreate,
    Defect::ControlInitFreedTwice,
    Defect::ControlCreateOnFreedInit,
    Defect::FreeNullInit,
    Defect::CreateFailureIgnored,
    Defect::NoChildListConfig,
    Defect::NoDriverCreate,
    Defect::ControlNotFinished,
    Defect::RundownReleasedEarly,
    Defect::DriverLevelChanged,
    Defect::LockWithoutParent,
    Defect::ErrorLogUnchecked,
    Defect::WrittenAfterCompletion,
    Defect::QueueLevelInherited,
    Defect::ControlFromPnpInit,
    Defect::CreateAfterFailedName,
    Defect::NameFailureNotFreed,
    Defect::ControlNoCleanupCallback,
    Defect::SharedContext,
    Defect::StoppedAfterRundown,
    Defect::NamesDrift,
    Defect::StartMissedAfterRefusal,
    Defect::FailedRestartKeepsWaiting,
    Defect::ResetAfterQueryStop,
    Defect::EtwKeptAtUnload,
];

/// The defect of that name (its `Debug`), if there is one.
pub(crate) fn defect_named(name: &str) -> Option<Defect> {
    PLANTABLE.iter().copied().find(|d| format!("{d:?}") == name)
}

/// Fails the scenario (in the child) as a rule the model enforces would.
pub(crate) fn expect(ok: bool, what: &str) {
    if !ok {
        super::violation(super::Rule::Expectation, "scenario", what);
    }
}

/// PnP's enable of the adapter on a loaded driver: AddDevice, the start, the deferred work
/// it queued run; `what` names it in a failure.
pub(crate) fn enable(m: &mut Machine, what: &str) {
    let added = m.add_device(HARDWARE_ID);
    expect(added == STATUS_SUCCESS, &format!("{what}: add {added:#x}"));
    let started = m.start();
    expect(
        started == STATUS_SUCCESS,
        &format!("{what}: start {started:#x}"),
    );
    m.run();
}

pub(super) fn booted() -> Machine {
    let (mut m, status) = Machine::boot(FakeConnectX::new(identity()), &[]);
    let refusals = with(|k| format!("{:?}", k.refusals));
    expect(
        status == STATUS_SUCCESS,
        &format!("DriverEntry: {status:#x}; refused: {refusals}"),
    );
    let status = m.add_device(HARDWARE_ID);
    let refusals = with(|k| format!("{:?}", k.refusals));
    expect(
        status == STATUS_SUCCESS,
        &format!("EvtDriverDeviceAdd: {status:#x}; refused: {refusals}"),
    );
    m
}

pub(crate) fn started() -> Machine {
    let mut m = booted();
    let status = m.start();
    let refusals = with(|k| format!("{:?}", k.refusals));
    expect(
        status == STATUS_SUCCESS,
        &format!("EvtDevicePrepareHardware: {status:#x}; refused: {refusals}"),
    );
    m.run();
    // Watching the device from D0 entry on, before anyone asks anything of it.
    let armed = with(|k| {
        k.objects.iter().any(|o| {
            !o.deleted
                && matches!(
                    o.kind,
                    super::kernel::Kind::Timer {
                        due_us: Some(_),
                        ..
                    }
                )
        })
    });
    expect(armed, "no health poll armed once the device is in D0");
    m
}
