//! The driver's life on the KMDF model, and each misuse the layer once had planted back.
//!
//! Each scenario runs in a child process of this test binary (a broken rule ends the
//! process, as a bugcheck ends the machine); the parent test reads how it ended.

use hcabus::ioctl::ResetMode;
use hcabus::types::{EventKind, State};
use hcabus_sim::{FakeConnectX, Fault};
use wdk_sys::*;

use super::admin::{self, ADMIN};
use super::cchild::{self, CChild};
use super::harness::{booted, defect_named, expect, started, HARDWARE_ID, PLANT, SCENARIO};
use super::machine::{Machine, FILE_READ_DATA};
use super::with;
use hcabus_kmdf::device::RECORDER_RECORDS_KEY;
use hcabus_kmdf::kernel::ChildFunction;
use hcabus_kmdf::lab::plant;
use hcabus_sim::fixtures::identity;

/// The entry point of the child process (ignored in a normal run).
#[test]
#[ignore = "run by the model's tests in a child process"]
fn scenario() {
    let name = std::env::var(SCENARIO).unwrap_or_default();
    let planted = std::env::var(PLANT).unwrap_or_default();
    plant(defect_named(&planted));
    super::fault::install();
    super::image::run::load_if_asked();
    match name.as_str() {
        "life" => life(),
        "control_create_fails" => control_create_fails(),
        "lock_create_fails" => lock_create_fails(),
        "footprint" => footprint(&[]),
        "child_outlives_fdo" => child_outlives_fdo(true),
        "rebalance_with_a_child" => rebalance_with_a_child(),
        "child_keeps_interface" => child_outlives_fdo(false),
        "sleep" => sleep(),
        "handle_outlives_fdo" => handle_outlives_fdo(),
        "special_files" => special_files(),
        "sleep_during_reset" => sleep_during_reset(),
        "shutdown" => shutdown(),
        "stop_during_reset" => stop_during_reset(),
        other => match (
            other.strip_prefix("footprint:").map(str::parse),
            other.strip_prefix("pool_short:").map(str::parse),
        ) {
            (Some(Ok(depth)), _) => footprint(&[(RECORDER_RECORDS_KEY, depth)]),
            (_, Some(Ok(n))) => pool_short(n),
            _ if super::races::scenario(other) => {}
            _ if super::cchild::scenario(other) => {}
            _ if super::two::scenario(other) => {}
            _ if super::twoio::scenario(other) => {}
            _ if super::twoconc::scenario(other) => {}
            _ if super::twolife::scenario(other) => {}
            _ if super::sdv_plants::scenario(other) => {}
            _ if super::audit::scenario(other) => {}
            _ if super::image::tests::scenario(other) => {}
            _ if super::hlk::scenario(other) => {}
            _ if super::tracing::scenario(other) => {}
            _ => panic!("no scenario {other:?}"),
        },
    }
    super::image::run::report();
}

/// The whole life: load, add, start (D0 entry), a C child on the SRP PDO through the
/// published interface, a forced reset and a catastrophic error found by the health poll
/// (each through the DPC, the timers and the work item, each answered by the child), a
/// planned reset the child vetoes, every other IOCTL code, a rebalance, a surprise removal,
/// unload with nothing leaked.
fn life() {
    let mut m = started();
    let (status, s) = admin::query_state(&mut m, FILE_READ_DATA);
    expect(
        status == STATUS_SUCCESS,
        &format!("QUERY_STATE: {status:#x}"),
    );
    expect(
        s.is_some_and(|s| s.epoch == 1),
        &format!("after start: {s:?}"),
    );
    // KeQuerySystemTimePrecise less the bus clock: the model's time of day at time zero.
    expect(
        s.is_some_and(|s| s.time_zero_unix_ms == super::wdm::MODEL_TIME_ZERO_UNIX_MS),
        &format!("the wall clock of time zero: {s:?}"),
    );
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    expect(
        cchild::references(fdo) == 2,
        "the interface's holder holds one FDO reference (the control device the other)",
    );
    resets(&mut m, &mut child);
    admin::every_other_code(&mut m, "srp0");
    let (status, state, epoch) = child.query_state();
    expect(
        (status, state, epoch) == (0, State::Operational as u32, 3),
        &format!("the child's query_state: {status:#x} {state} e{epoch}"),
    );
    let status = child.detach();
    expect(status == 0, &format!("the child's unregister: {status:#x}"));
    expect(
        cchild::references(fdo) == 1,
        "the child let the interface go: only the control device's FDO reference left",
    );
    // Each reset's start went to the System log, and each entry reads in Event Viewer as its
    // message in the driver's table, every placeholder filled and every string shown.
    let events = with(|k| k.events.clone());
    expect(events.len() >= 2, &format!("event log: {events:?}"));
    let table = hcabus_kmdf::event_viewer::driver_messages();
    for e in &events {
        let shown = table.render(e.code, "\\Device\\hcabus0", &e.strings);
        expect(shown.is_ok(), &format!("{e:?} in Event Viewer: {shown:?}"));
    }
    // Every record of the run reached ETW once, in order, as a decoder reads it: every reset
    // stage, each client's answer, each hardware step, each administrator's act.
    let records = admin::flight_record(&mut m);
    let kinds = super::etw::matches_flight_record(&records);
    for kind in [
        "reset_started",
        "reset_finished",
        "transition",
        "hw",
        "event",
        "call",
        "vetoed",
        "policy_changed",
        "refused",
    ] {
        expect(
            kinds.iter().any(|k| k == kind),
            &format!("no {kind} event in {kinds:?}"),
        );
    }
    rebalance(&mut m);
    m.surprise_remove();
    let (status, _) = admin::query_state(&mut m, FILE_READ_DATA);
    expect(
        status == STATUS_OBJECT_NAME_NOT_FOUND,
        &format!("an IOCTL after removal: {status:#x}"),
    );
    m.unload();
}

/// A forced reset the administrator asks for (refused on a read-only handle), a
/// catastrophic error found by the health poll, and a planned reset the child vetoes.
fn resets(m: &mut Machine, child: &mut CChild) {
    // A handle opened for reading only cannot ask for a reset: the I/O manager refuses it.
    let denied = admin::request_reset(m, FILE_READ_DATA, ResetMode::Forced);
    expect(
        denied == STATUS_ACCESS_DENIED,
        &format!("a read-only reset: {denied:#x}"),
    );
    let asked = admin::request_reset(m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("an administrator's reset: {asked:#x}"),
    );
    m.advance(5_000);
    let epoch = admin::state(m).epoch;
    expect(epoch == 2, &format!("epoch {epoch} after a forced reset"));
    // The firmware's catastrophic error, found by the health timer.
    with(|k| k.adapters[0].hca.inject(Fault::Catastrophic));
    m.advance(10_000);
    let epoch = admin::state(m).epoch;
    expect(
        epoch == 3,
        &format!("epoch {epoch} after a catastrophic error"),
    );
    // A planned reset: the child is asked, and refuses.
    child.vetoes = true;
    let asked = admin::request_reset(m, ADMIN, ResetMode::Planned);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a planned reset: {asked:#x}"),
    );
    m.advance(5_000);
    child.vetoes = false;
    let (reset, end) = (EventKind::Reset as u16, EventKind::ResetEnd as u16);
    let (query, aborted) = (EventKind::ResetQuery as u16, EventKind::ResetAborted as u16);
    expect(
        child.heard() == [reset, end, reset, end, query, aborted],
        &format!("the child heard {:?}", child.heard()),
    );
    expect(
        child.restored_epoch == 3
            && child.failed.is_none()
            && child.max_irql <= cchild::CALLBACK_IRQL,
        &format!(
            "the child: restored e{}, failed {:?}, IRQL {}",
            child.restored_epoch, child.failed, child.max_irql
        ),
    );
}

/// The FDO is surprise-removed while a child still holds the interface (its own removal
/// comes later): its calls are refused DEVICE_REMOVED, never run on a freed bus, and its
/// reference keeps the FDO's context until it lets go (`lets_go`) — else unload finds it.
fn child_outlives_fdo(lets_go: bool) {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    m.surprise_remove();
    let removed = hcabus::bus_abi::status::of_refusal(hcabus::errors::RefusalCode::DeviceRemoved);
    let (status, _, _) = child.query_state();
    expect(
        status == removed,
        &format!("query_state after the FDO's removal: {status:#x}"),
    );
    let status = if lets_go {
        child.detach()
    } else {
        child.unregister_only()
    };
    expect(
        status == removed,
        &format!("unregister after the FDO's removal: {status:#x}"),
    );
    m.unload();
}

/// The live PDOs.
fn pdos() -> usize {
    with(|k| {
        k.objects
            .iter()
            .filter(|o| {
                !o.deleted
                    && matches!(&o.kind, super::kernel::Kind::Device(d) if d.role == super::kernel::Role::Pdo)
            })
            .count()
    })
}

/// A rebalance (a PnP stop and start, with D0Exit to D3Final between) is invisible to the
/// children: their PDOs stay, they hear nothing, their ids hold, and the bus after it
/// resets with them as before.
fn rebalance_with_a_child() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    let (children, epoch) = (pdos(), admin::state(&mut m).epoch);
    // Between the stop and the start a child's call waits for the bus (the model's time
    // runs on while it sleeps), and is told to ask again when the start does not come.
    expect(m.stop() == STATUS_SUCCESS, "query stop");
    let (status, _, _) = child.query_state();
    expect(
        status == hcabus::bus_abi::status::DEVICE_BUSY,
        &format!("a child's call while the bus is stopped: {status:#x}"),
    );
    let status = m.start();
    expect(status == STATUS_SUCCESS, &format!("restart: {status:#x}"));
    m.run();
    expect(
        child.heard().is_empty(),
        &format!("across a rebalance the child heard {:?}", child.heard()),
    );
    expect(pdos() == children, "a rebalance removed a child's PDO");
    let (status, state, e) = child.query_state();
    expect(
        (status, state, e) == (0, State::Operational as u32, epoch),
        &format!("the child's query_state after a rebalance: {status:#x} {state} e{e}"),
    );
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a reset after: {asked:#x}"),
    );
    m.advance(5_000);
    let (reset, end) = (EventKind::Reset as u16, EventKind::ResetEnd as u16);
    expect(
        child.heard() == [reset, end] && child.restored_epoch == epoch + 1,
        &format!("after the rebalance the child heard {:?}", child.heard()),
    );
    child.vetoes = false;
    let status = child.detach();
    expect(status == 0, &format!("the child's unregister: {status:#x}"));
    m.surprise_remove();
    m.unload();
}

/// The pool refuses its `n`th allocation (the driver's heap, or an object KMDF creates for
/// it) during add, prepare hardware and D0 entry: the call it fails answers
/// STATUS_INSUFFICIENT_RESOURCES (never a bugcheck), the device is removed, and unload finds
/// nothing left (objects, references, mappings, inits) and the driver's bytes back where
/// they were. Prints what happened, for the parent's walk.
fn pool_short(n: u64) {
    let (mut m, status) = Machine::boot(FakeConnectX::new(identity()), &[]);
    expect(status == STATUS_SUCCESS, "DriverEntry");
    let bytes = crate::model::heap::driver_bytes();
    crate::model::heap::refuse_pool_allocation(Some(n));
    let added = m.add_device(HARDWARE_ID);
    let started = if added >= 0 { m.start_fdo() } else { added };
    let asked = crate::model::heap::pool_asked();
    crate::model::heap::refuse_pool_allocation(None);
    let refused = asked > n;
    let answer = if started >= 0 {
        STATUS_SUCCESS
    } else {
        STATUS_INSUFFICIENT_RESOURCES
    };
    expect(
        started == answer && (refused || started >= 0),
        &format!("allocation {n} of {asked}: add {added:#x}, start {started:#x}"),
    );
    if added >= 0 {
        m.remove();
    }
    m.unload();
    let left = crate::model::heap::driver_bytes() - bytes;
    expect(
        left == 0,
        &format!("allocation {n} refused: {left} bytes never freed"),
    );
    let at = if added < 0 { "add" } else { "start" };
    println!(
        "POOL n={n} asked={asked} refused={refused} failed={} at={at}",
        started < 0
    );
}

/// The boot LUN's storage stack, above the SRP child, puts the paging file, the crash dump,
/// the hibernation file and the boot files on the bus's path: each usage notification is
/// accepted by the SRP PDO and the FDO (KMDF asks both) and recorded by the bus; one taken
/// off again is recorded too. An IPoIB child supports none.
fn special_files() {
    use _WDF_SPECIAL_FILE_TYPE::*;
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let srp = ChildFunction::Srp.serial();
    let files = [
        WdfSpecialFilePaging,
        WdfSpecialFileDump,
        WdfSpecialFileHibernation,
        WdfSpecialFileBoot,
    ];
    for file in files {
        let status = m.usage_notification(srp, file, true);
        expect(
            status == STATUS_SUCCESS,
            &format!("special file {file} on the boot LUN's path: {status:#x}"),
        );
    }
    // What the bus recorded is read from the Linux build's context; the image's context is
    // the image's own layout, so on the image only what the driver answers is checked.
    let image = super::driver::is_image();
    let held = |fdo| {
        // SAFETY: the FDO is live.
        unsafe { hcabus_kmdf::lab::special_files_held(fdo as WDFDEVICE) }
    };
    let all = files.iter().fold(0, |bits, f| bits | 1 << f);
    expect(
        image || held(fdo) == all,
        &format!("recorded {:#x}, not {all:#x}", held(fdo)),
    );
    let status = m.usage_notification(srp, WdfSpecialFileHibernation, false);
    expect(
        status == STATUS_SUCCESS,
        &format!("hibernation off: {status:#x}"),
    );
    expect(
        image || held(fdo) == all & !(1 << WdfSpecialFileHibernation),
        "the hibernation file's removal not recorded",
    );
    // A second paging file (another volume of the boot LUN): KMDF counts usages by type, so
    // taking one off leaves the other, and the bus still holds a paging file.
    let status = m.usage_notification(srp, WdfSpecialFilePaging, true);
    expect(status == STATUS_SUCCESS, "a second paging file");
    let status = m.usage_notification(srp, WdfSpecialFilePaging, false);
    expect(status == STATUS_SUCCESS, "one paging file off");
    expect(
        image || held(fdo) & 1 << WdfSpecialFilePaging != 0,
        "one of two paging files taken off cleared the paging file still on the path",
    );
    // While the boot LUN's files are on its path, PnP may neither stop nor remove the bus.
    let status = m.query_remove();
    expect(
        status == STATUS_DEVICE_NOT_READY,
        &format!("query remove with the paging file on the path: {status:#x}"),
    );
    let ipoib = ChildFunction::Ipoib { port: 1 }.serial();
    let status = m.usage_notification(ipoib, WdfSpecialFilePaging, true);
    expect(
        status == STATUS_NOT_IMPLEMENTED,
        &format!("paging on IPoIB's path: {status:#x}"),
    );
    m.surprise_remove();
    m.unload();
}

/// hcactl keeps a handle open on the control device while the FDO is surprise-removed:
/// KMDF keeps the deleted control device, and its queue dispatching, until the handle
/// closes. Each IOCTL through it is answered STATUS_DEVICE_REMOVED from a context still
/// allocated; no new handle can be opened; once it closes, unload finds nothing left.
fn handle_outlives_fdo() {
    let mut m = started();
    let Some(handle) = m.open(admin::LINK) else {
        super::violation(
            super::Rule::Expectation,
            "scenario",
            "no control device to open",
        )
    };
    let mut input = [0u8; core::mem::size_of::<hcabus::ioctl::EmptyIn>()];
    hcabus::ioctl::encode_empty(&mut input);
    let code = hcabus::ioctl::IOCTL_HCABUS_QUERY_STATE;
    let (status, _) = m.ioctl_on(handle, FILE_READ_DATA, code, &input, 512);
    expect(
        status == STATUS_SUCCESS,
        &format!("through the kept handle: {status:#x}"),
    );
    m.surprise_remove();
    for _ in 0..2 {
        let (status, _) = m.ioctl_on(handle, FILE_READ_DATA, code, &input, 512);
        expect(
            status == STATUS_DEVICE_REMOVED,
            &format!("an IOCTL after the FDO's removal: {status:#x}"),
        );
    }
    expect(
        m.open(admin::LINK).is_none(),
        "a new handle opened on a removed device",
    );
    m.close(handle);
    m.unload();
}

/// Device power down to D3 and back (idle, system sleep S3/S4): minutes in Dx touch no
/// register (the model refuses it), QUERY_STATE is answered from software state, a reset the
/// administrator asks for in Dx is taken and waits for D0, and D0Entry resumes the watch.
fn sleep() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    let epoch = admin::state(&mut m).epoch;
    m.power_down(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3);
    m.advance(600_000);
    let (status, s) = admin::query_state(&mut m, FILE_READ_DATA);
    expect(
        status == STATUS_SUCCESS && s.is_some_and(|s| s.epoch == epoch),
        &format!("QUERY_STATE in D3: {status:#x} {s:?}"),
    );
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS,
        &format!("a reset asked in D3: {asked:#x}"),
    );
    m.advance(60_000);
    expect(
        admin::state(&mut m).epoch == epoch,
        "a reset finished with the device in D3",
    );
    let status = m.power_up();
    expect(status == STATUS_SUCCESS, &format!("D0Entry: {status:#x}"));
    m.advance(10_000);
    let (reset, end) = (EventKind::Reset as u16, EventKind::ResetEnd as u16);
    expect(
        child.heard() == [reset, end] && child.restored_epoch == epoch + 1,
        &format!(
            "the child heard {:?} (e{})",
            child.heard(),
            child.restored_epoch
        ),
    );
    // The watch runs again: a catastrophic error is found.
    with(|k| k.adapters[0].hca.inject(Fault::Catastrophic));
    m.advance(10_000);
    expect(
        admin::state(&mut m).epoch == epoch + 2,
        "the health watch did not resume at D0Entry",
    );
    child.vetoes = false;
    expect(child.detach() == 0, "the child's unregister");
    m.surprise_remove();
    m.unload();
}

/// System shutdown (S5) and hibernation (S4 with the boot LUN on the hibernation path):
/// KMDF's D0Exit targets are D3Final and WdfPowerDevicePrepareForHibernation. Neither is
/// removal: the child hears nothing, and nothing touches the device once D0Exit returns.
fn shutdown() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    m.power_down(_WDF_POWER_DEVICE_STATE::WdfPowerDevicePrepareForHibernation);
    m.advance(60_000);
    expect(m.power_up() == STATUS_SUCCESS, "resume from hibernation");
    m.advance(10_000);
    m.power_down(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final);
    m.advance(60_000);
    expect(
        child.heard().is_empty(),
        &format!(
            "hibernation and shutdown: the child heard {:?}",
            child.heard()
        ),
    );
    child.vetoes = false;
    expect(
        child.detach() == 0,
        "the child's unregister after shutdown's D0Exit",
    );
}

/// PnP asks to stop the bus for a rebalance while a reset is open: refused (the config space
/// the reset saved names the BARs the rebalance moves); asked again once the reset is over,
/// the stop and start are invisible to the child, which heard only the reset.
fn stop_during_reset() {
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let mut child = CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0");
    let epoch = admin::state(&mut m).epoch;
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(asked == STATUS_SUCCESS, &format!("a reset: {asked:#x}"));
    m.advance(1);
    let status = m.stop();
    expect(
        status == STATUS_DEVICE_BUSY,
        &format!("a query stop in the middle of a reset: {status:#x}"),
    );
    m.advance(10_000);
    rebalance(&mut m);
    let (reset, end) = (EventKind::Reset as u16, EventKind::ResetEnd as u16);
    expect(
        child.heard() == [reset, end] && child.restored_epoch == epoch + 1,
        &format!("the child heard {:?}", child.heard()),
    );
    child.vetoes = false;
    expect(child.detach() == 0, "the child's unregister");
    m.surprise_remove();
    m.unload();
}

/// The machine sleeps while a reset is in flight: D0Exit waits for it (the other
/// processors run its timers, DPC and work item meanwhile), so that it is over, and the
/// device untouched, once D0Exit returns.
fn sleep_during_reset() {
    let mut m = started();
    let epoch = admin::state(&mut m).epoch;
    let asked = admin::request_reset(&mut m, ADMIN, ResetMode::Forced);
    expect(asked == STATUS_SUCCESS, &format!("a reset: {asked:#x}"));
    m.advance(1);
    m.power_down(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3);
    let s = admin::state(&mut m);
    expect(
        s.epoch == epoch + 1 && s.state == State::Operational as u32,
        &format!("D0Exit returned with the reset open: {s:?}"),
    );
    m.advance(60_000);
    expect(m.power_up() == STATUS_SUCCESS, "D0Entry");
    m.advance(10_000);
    m.surprise_remove();
    m.unload();
}

/// Stop and start again, as PnP rebalances resources.
fn rebalance(m: &mut Machine) {
    let status = m.stop();
    expect(
        status == STATUS_SUCCESS,
        &format!("query stop: {status:#x}"),
    );
    let (status, _) = admin::query_state(m, FILE_READ_DATA);
    expect(status != STATUS_SUCCESS, "an IOCTL served with no hardware");
    let status = m.start();
    expect(status == STATUS_SUCCESS, &format!("restart: {status:#x}"));
    m.run();
    let (status, _) = admin::query_state(m, FILE_READ_DATA);
    expect(
        status == STATUS_SUCCESS,
        &format!("QUERY_STATE after the rebalance: {status:#x}"),
    );
}

/// The driver's bytes and the contexts of its objects (counted by the model as KMDF would
/// allocate them), and how many objects are alive.
fn footprint_now() -> (isize, usize, usize) {
    let (contexts, objects) = with(|k| {
        let alive = k.objects.iter().filter(|o| !o.deleted).count();
        (k.context_bytes, alive)
    });
    let heap = match super::image::get() {
        Some(_) => super::image::pool_bytes() as isize,
        None => crate::model::heap::driver_bytes(),
    };
    (heap, contexts, objects)
}

/// What one adapter costs in non-paged memory, printed for the parent to read: the heap the
/// driver allocated and the contexts of its objects once the device is started, which a
/// reset must not grow and a removal must give back.
fn footprint(values: &[(&str, u32)]) {
    let (mut m, status) = Machine::boot(FakeConnectX::new(identity()), values);
    expect(status == STATUS_SUCCESS, "DriverEntry");
    let (heap0, contexts0, objects0) = footprint_now();
    expect(m.add_device(HARDWARE_ID) == STATUS_SUCCESS, "add");
    expect(m.start() == STATUS_SUCCESS, "start");
    m.run();
    let (heap1, contexts1, objects1) = footprint_now();
    let kinds: Vec<&str> = with(|k| {
        k.objects
            .iter()
            .filter(|o| !o.deleted && !matches!(o.kind, super::kernel::Kind::Driver { .. }))
            .map(|o| o.kind.name())
            .collect()
    });
    eprintln!("OBJECTS {}", kinds.join(", "));
    with(|k| k.adapters[0].hca.inject(Fault::Catastrophic));
    m.advance(10_000);
    let s = admin::state(&mut m);
    expect(s.epoch == 2, "the catastrophic error was reset");
    let after_reset = footprint_now();
    expect(
        after_reset == (heap1, contexts1, objects1),
        &format!(
            "a reset changed the footprint: {:?} -> {after_reset:?}",
            (heap1, contexts1, objects1)
        ),
    );
    m.remove();
    let removed = footprint_now();
    expect(
        removed == (heap0, contexts0, objects0),
        &format!(
            "removal left {:?} of {:?}",
            removed,
            (heap0, contexts0, objects0)
        ),
    );
    eprintln!(
        "FOOTPRINT heap={} contexts={} objects={}",
        heap1 - heap0,
        contexts1 - contexts0,
        objects1 - objects0
    );
    for line in with(|k| k.debug_output.clone()) {
        eprintln!("DBGPRINT {line}");
    }
    m.unload();
}

/// The control device's WdfDeviceCreate fails: the add fails, and nothing is left.
fn control_create_fails() {
    let (mut m, _) = Machine::boot(FakeConnectX::new(identity()), &[]);
    // The FDO's create succeeds; the control device's (the second) fails.
    with(|k| k.failures.push(("WdfDeviceCreate", 1)));
    let status = m.add_device(HARDWARE_ID);
    expect(status < 0, "an add whose control device failed succeeded");
    m.unload();
}

/// KMDF cannot create the bus's spin lock: prepare hardware fails, and nothing is left.
fn lock_create_fails() {
    let mut m = booted();
    with(|k| k.failures.push(("WdfSpinLockCreate", 0)));
    let status = m.start();
    // A driver that went on with the lock it did not get uses it at its first DPC.
    m.advance(1_000);
    expect(status < 0, "a prepare whose lock failed succeeded");
    m.remove();
    m.unload();
}
