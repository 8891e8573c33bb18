//! The FFI layer: DriverEntry and the KMDF event callbacks on windows-drivers-rs.
//!
//! Type-checked and clippy-clean against windows-drivers-rs over the KMDF 1.33 headers
//! (../shared/wdk-kit, in CI), and run on Linux against the KMDF model, the crate
//! hcabus-kmdf-model (`hosttest.sh`, in CI), which enforces KMDF's rules as KMDF's own source
//! does; linked into a .sys against stand-ins of the WDK's libraries, and that image run on the
//! same model; never loaded by Windows (docs/windows.md).
//! It is kept mechanical: each callback finds the FDO's context and calls the tested logic
//! in the core host (`hcabus::host::Bus`) and [`crate::device`] under the context's rundown
//! protection; the platform's Windows side is in `wdf_platform.rs`, the C ABI's functions in
//! `interface.rs`. Every unsafe block says why it is sound.
#![allow(unsafe_code)]

mod children;
mod context;
mod defects;
mod etw;
mod interface;
mod io;
mod objects;
mod resources;
mod shared;
mod wdf_platform;

#[cfg(wdk_fake)]
pub mod lab;

use wdk_sys::{
    call_unsafe_wdf_function_binding, NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT, PWDFDEVICE_INIT,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_DEVICE_STATE, STATUS_SUCCESS, ULONG,
    WDFCMRESLIST, WDFDEVICE, WDFDRIVER, WDFQUEUE, WDFREQUEST, WDF_DRIVER_CONFIG, WDF_NO_HANDLE,
    WDF_NO_OBJECT_ATTRIBUTES, WDF_POWER_DEVICE_STATE,
};

use crate::device;
use crate::device::{prepare_in, BusConfig};
use context::{FdoContext, FDO_CONTEXT};
use defects::{planted, Defect};
use resources::Child;
use wdf_platform::WdfPlatform;

// Only in the abort build: with an unwinding profile lib.rs refuses to compile, and std's
// panic handler would clash with wdk-panic's before that message could be read.
#[cfg(all(not(test), panic = "abort"))]
extern crate wdk_panic;

#[cfg(all(not(test), panic = "abort"))]
#[global_allocator]
static GLOBAL_ALLOCATOR: wdk_alloc::WdkAllocator = wdk_alloc::WdkAllocator;

/// The FDO context of `device`.
///
/// # Safety
/// `device` is a live FDO made by `objects::create_fdo`.
unsafe fn fdo<'a>(device: WDFDEVICE) -> Option<&'a FdoContext> {
    // SAFETY: the caller's contract.
    unsafe { context::context(device.cast(), &FDO_CONTEXT) }
}

/// The FDO context of the FDO a DPC, work item or timer was created under.
///
/// # Safety
/// `object` is live and was created by `resources::Deferred::create`.
unsafe fn parent_fdo<'a>(object: Child) -> Option<&'a FdoContext> {
    // SAFETY: the caller's contract.
    let parent = unsafe { resources::parent(object) };
    // SAFETY: its parent is the FDO, which carries an FdoContext.
    unsafe { context::context(parent, &FDO_CONTEXT) }
}

// SAFETY: "DriverEntry" is the symbol the kernel calls; nothing else in the driver exports it.
#[unsafe(export_name = "DriverEntry")]
pub extern "system" fn driver_entry(
    driver: PDRIVER_OBJECT,
    registry_path: PCUNICODE_STRING,
) -> NTSTATUS {
    wdf_platform::install_logger();
    let mut config = WDF_DRIVER_CONFIG {
        Size: core::mem::size_of::<WDF_DRIVER_CONFIG>() as ULONG,
        EvtDriverDeviceAdd: Some(evt_device_add),
        EvtDriverUnload: Some(evt_driver_unload),
        ..WDF_DRIVER_CONFIG::default()
    };
    if planted(Defect::NoDriverCreate) {
        return STATUS_SUCCESS;
    }
    // The driver object's execution level and synchronization scope are KMDF's: a driver
    // that sets them is refused (the planted violation of SDV DriverAttributeChanged).
    let mut changed = context::attributes(core::ptr::null_mut(), None);
    changed.ExecutionLevel = wdk_sys::_WDF_EXECUTION_LEVEL::WdfExecutionLevelPassive;
    let attributes = if planted(Defect::DriverLevelChanged) {
        &mut changed as *mut wdk_sys::WDF_OBJECT_ATTRIBUTES
    } else {
        WDF_NO_OBJECT_ATTRIBUTES
    };
    // Before the framework driver: no device, and so no write, can come before it.
    etw::register();
    // SAFETY: the driver object and registry path are the kernel's, valid for this call; the
    // config is initialised above and outlives the call.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDriverCreate,
            driver,
            registry_path,
            attributes,
            &mut config,
            WDF_NO_HANDLE as *mut WDFDRIVER,
        )
    };
    if status < 0 {
        // No unload callback will come for a driver whose DriverEntry fails.
        etw::unregister();
    }
    status
}

/// EvtDriverUnload (PASSIVE_LEVEL): every device is gone; the ETW provider goes last.
extern "C" fn evt_driver_unload(_driver: WDFDRIVER) {
    if planted(Defect::EtwKeptAtUnload) {
        return;
    }
    etw::unregister();
}

/// EvtDriverDeviceAdd: the FDO on the HCA's PCI function (PASSIVE_LEVEL).
extern "C" fn evt_device_add(_driver: WDFDRIVER, init: PWDFDEVICE_INIT) -> NTSTATUS {
    // SAFETY: `init` is KMDF's, valid until WdfDeviceCreate consumes it.
    let ids = match unsafe { wdf_platform::pci_ids(init) } {
        Ok(ids) => ids,
        Err(status) => {
            log::error!("the function's hardware ids could not be read: {status:#x}");
            return status;
        }
    };
    let Some(instance) = wdf_platform::claim_instance() else {
        log::error!("no control-device name left: 64 adapters have one (HcaBus0 to HcaBus63)");
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    };
    let setup = match device::device_add(ids.0, ids.1, instance) {
        Ok(s) => s,
        Err(e) => {
            wdf_platform::release_instance(instance);
            log::error!("{e}");
            return wdk_sys::STATUS_NOT_SUPPORTED;
        }
    };
    // SAFETY: `init` is KMDF's; the setup strings live until the call returns (KMDF copies).
    unsafe { wdf_platform::create_fdo(init, &setup) }
}

/// IB ports of the adapters the driver takes (ConnectX-3 to -6 have two).
const PORTS: u8 = 2;

/// EvtDevicePrepareHardware (PASSIVE_LEVEL): the bus is built here, and every byte it will
/// use is allocated here; it starts watching the device at D0 entry.
extern "C" fn evt_prepare_hardware(
    device: WDFDEVICE,
    _raw: WDFCMRESLIST,
    translated: WDFCMRESLIST,
) -> NTSTATUS {
    // SAFETY: KMDF calls this for the FDO create_fdo made.
    let Some(ctx) = (unsafe { fdo(device) }) else {
        return STATUS_INVALID_DEVICE_STATE;
    };
    // SAFETY: the translated resource list is KMDF's, valid for this callback.
    let platform = match unsafe { WdfPlatform::new(device, translated, PORTS) } {
        Ok(p) => p,
        Err(status) => return status,
    };
    let config = BusConfig {
        coordinator: platform.registry_config(),
        ports: PORTS,
    };
    // After a PnP stop (a rebalance), the bus it kept: the children stay registered.
    let parked = ctx.take_parked().map(|p| *p);
    // The bus is built where it is kept, in pool memory.
    match context::build_in_pool(|room| prepare_in(room, platform, config, parked)) {
        Ok(bus) => {
            ctx.attach(bus);
            STATUS_SUCCESS
        }
        Err(e) => {
            // What a stop parked went with the failed start: no child's call waits for it.
            ctx.stopped
                .store(false, core::sync::atomic::Ordering::Release);
            match e {
                None => log::error!("prepare hardware: no pool for the bus"),
                Some(e) => log::error!("prepare hardware: {e}"),
            }
            STATUS_INSUFFICIENT_RESOURCES
        }
    }
}

/// EvtDeviceReleaseHardware (PASSIVE_LEVEL): waits until nothing is inside the bus, then
/// drops it: its timers stopped, its DPC cancelled and its work item flushed (each waited
/// for), their objects and its locks deleted, BAR0 unmapped, the PCI interface given back.
extern "C" fn evt_release_hardware(device: WDFDEVICE, _translated: WDFCMRESLIST) -> NTSTATUS {
    // SAFETY: as in evt_prepare_hardware.
    if let Some(ctx) = unsafe { fdo(device) } {
        // A stop or a removal: KMDF does not say which. What the bus keeps is resumed by the
        // next prepare, or freed with the FDO.
        let order = core::sync::atomic::Ordering::Release;
        // Stopped before the rundown starts refusing callers: a child's call refused from
        // here on waits for the next start instead of taking the device for removed (a
        // removal ends that wait: `removed` is set before the FDO goes).
        let early = !planted(Defect::StoppedAfterRundown);
        if early {
            ctx.stopped.store(true, order);
        }
        match ctx.detach() {
            Some(bus) => {
                let parked = bus.park();
                match context::build_in_pool(|room| Ok::<_, ()>(room.write(parked))) {
                    Ok(parked) => {
                        ctx.park(parked);
                        ctx.stopped.store(true, order);
                    }
                    // The children's registrations go: the next start is a new bus, where
                    // their kept ids are refused as stale (generations); until then their
                    // calls are refused.
                    Err(_) => {
                        ctx.stopped.store(false, order);
                        log::error!("release hardware: no pool to keep the bus");
                    }
                }
            }
            None => ctx.stopped.store(false, order),
        }
    }
    STATUS_SUCCESS
}

/// EvtDeviceSurpriseRemoval: the device is gone. From now on a child's call that finds no bus
/// (after release hardware) is answered DEVICE_REMOVED at once, not waited on as a stop.
extern "C" fn evt_surprise_removal(device: WDFDEVICE) {
    // SAFETY: as in evt_prepare_hardware.
    if let Some(ctx) = unsafe { fdo(device) } {
        ctx.removed
            .store(true, core::sync::atomic::Ordering::Release);
        ctx.with_bus(|bus| bus.surprise_removal());
    }
}

/// EvtDeviceQueryStop (PASSIVE_LEVEL): PnP asks to stop the bus for a rebalance. Refused
/// while a reset is open: the config space it saved names the BARs a rebalance moves, so it
/// could not finish on the new resources. PnP asks again later.
extern "C" fn evt_query_stop(device: WDFDEVICE) -> NTSTATUS {
    if planted(Defect::StopDuringReset) {
        return STATUS_SUCCESS;
    }
    // SAFETY: as in evt_prepare_hardware.
    let granted = unsafe { fdo(device) }.and_then(|ctx| {
        ctx.with_bus(|bus| {
            if planted(Defect::ResetAfterQueryStop) {
                !bus.reset_open()
            } else {
                bus.query_stop()
            }
        })
    });
    if granted == Some(false) {
        log::info!("query stop refused: a reset is open");
        return wdk_sys::STATUS_DEVICE_BUSY;
    }
    STATUS_SUCCESS
}

/// The FDO entered WdfDevStatePnpQueryCanceled (PASSIVE_LEVEL): a stop EvtDeviceQueryStop
/// allowed was cancelled (IRP_MN_CANCEL_STOP_DEVICE, which KMDF answers with no EvtDevice
/// callback): the resets held since the query may start again.
extern "C" fn evt_query_canceled(
    device: WDFDEVICE,
    _data: wdk_sys::PCWDF_DEVICE_PNP_NOTIFICATION_DATA,
) {
    // SAFETY: as in evt_prepare_hardware.
    if let Some(ctx) = unsafe { fdo(device) } {
        ctx.with_bus(|bus| bus.release_resets());
    }
}

/// EvtDeviceD0Entry (PASSIVE_LEVEL): the device is powered: the bus re-arms its timers, runs
/// what it held and queues its DPC (which, at the first start, finds the bus it built before
/// it was reachable).
extern "C" fn evt_d0_entry(device: WDFDEVICE, _previous: WDF_POWER_DEVICE_STATE) -> NTSTATUS {
    // SAFETY: as in evt_prepare_hardware.
    match unsafe { fdo(device) }.and_then(|ctx| ctx.with_bus(|bus| bus.d0_entry())) {
        Some(()) => STATUS_SUCCESS,
        None => STATUS_INVALID_DEVICE_STATE,
    }
}

/// EvtDeviceD0Exit (PASSIVE_LEVEL), whatever the target: D3Final comes on every PnP stop (a
/// rebalance, a query-stop, shutdown) as well as on removal, so it is not removal. The bus
/// waits for a reset in flight, then touches the device no more until D0Entry.
extern "C" fn evt_d0_exit(device: WDFDEVICE, target: WDF_POWER_DEVICE_STATE) -> NTSTATUS {
    let last = target == wdk_sys::_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final;
    // SAFETY: as in evt_prepare_hardware.
    if let Some(ctx) = unsafe { fdo(device) } {
        ctx.with_bus(|bus| {
            if last && planted(Defect::FinalExitAsRemoval) {
                bus.surprise_removal();
                return;
            }
            if planted(Defect::NothingInDx) {
                return;
            }
            let down = bus.d0_exit();
            if down.reset_held {
                log::warn!("D0Exit: a reset is still open after {} ms", down.waited_ms);
            }
        });
    }
    STATUS_SUCCESS
}

/// EvtDeviceSelfManagedIoFlush (PASSIVE_LEVEL): KMDF calls it as the device is being
/// removed (PnpCleanupForRemove), and on one path where nothing else is said: a start after a
/// PnP stop that fails below the FDO (Stopped, StartDeviceFailed, Failed), after which no
/// prepare hardware comes. A bus still parked then never resumes: the children's calls
/// waiting for the start (their unregister in their own remove path among them) are told
/// at once that the device is removed, not after the stopped wait (D3).
extern "C" fn evt_self_managed_io_flush(device: WDFDEVICE) {
    // SAFETY: as in evt_prepare_hardware.
    let Some(ctx) = (unsafe { fdo(device) }) else {
        return;
    };
    let order = core::sync::atomic::Ordering::Acquire;
    if ctx.stopped.load(order) && !planted(Defect::FailedRestartKeepsWaiting) {
        log::warn!("the start after a PnP stop failed: the children's calls end as removed");
        ctx.removed
            .store(true, core::sync::atomic::Ordering::Release);
    }
}

/// EvtDeviceUsageNotificationEx of the FDO (PASSIVE_LEVEL): the storage stack above the SRP
/// child starts (`in_path`) or stops holding a special file on the bus's path. Accepted and
/// recorded: a bus that holds the paging file must never make its children page.
extern "C" fn evt_usage_notification(
    device: WDFDEVICE,
    file: wdk_sys::WDF_SPECIAL_FILE_TYPE,
    in_path: wdk_sys::BOOLEAN,
) -> NTSTATUS {
    // SAFETY: as in evt_prepare_hardware.
    let held = unsafe { fdo(device) }.map(|ctx| {
        ctx.special_file_used(file as usize, in_path != 0);
        ctx.special_files_held()
    });
    log::info!(
        "special file {file}: on the bus's path {}; types held now {held:#x?}",
        in_path != 0
    );
    STATUS_SUCCESS
}

/// EvtIoDeviceControl of the control device's queue: METHOD_BUFFERED.
extern "C" fn evt_io_device_control(
    queue: WDFQUEUE,
    request: WDFREQUEST,
    output_length: usize,
    input_length: usize,
    code: ULONG,
) {
    if planted(Defect::QueueLevelInherited) {
        // The planted violation's second half: a PASSIVE_LEVEL call (the Parameters key)
        // from a queue whose level was left inherited, so KMDF may call this at DISPATCH.
        // SAFETY: the queue KMDF called us for.
        let device = unsafe { call_unsafe_wdf_function_binding!(WdfIoQueueGetDevice, queue) };
        // SAFETY: none at DISPATCH_LEVEL: the planted violation.
        let _ = unsafe { io::open_parameters(device) };
    }
    // SAFETY: the queue and request are KMDF's for this callback; the buffers it returns are
    // the request's system buffer, valid until the request completes below.
    let status = unsafe {
        wdf_platform::with_request_buffers(
            queue,
            request,
            (code, input_length, output_length),
            |bus, i, o, r| bus.device_control(code, i, o, r),
        )
    };
    // SAFETY: the request is ours to complete, once.
    unsafe { wdf_platform::complete(request, status) };
}

/// The delivery DPC, a WDFTIMER, the hardware work item: each finds the bus and calls it.
extern "C" fn evt_dpc(dpc: wdk_sys::WDFDPC) {
    // SAFETY: KMDF calls this for a live DPC made by Deferred::create.
    if let Some(ctx) = unsafe { parent_fdo(Child::Dpc(dpc)) } {
        if planted(Defect::PassiveCallAtDispatch) {
            // SAFETY: none at DISPATCH_LEVEL: the planted violation, which the model stops at.
            let _ = unsafe { io::open_parameters(ctx.device) };
        }
        ctx.with_bus(|bus| bus.dpc());
    }
}

extern "C" fn evt_work_item(item: wdk_sys::WDFWORKITEM) {
    // SAFETY: as in evt_dpc.
    if let Some(ctx) = unsafe { parent_fdo(Child::WorkItem(item)) } {
        ctx.with_bus(|bus| bus.work_item());
    }
}

/// The planted SpinLockKept: a spin lock, parented to `parent`, acquired and never released.
///
/// # Safety
/// None: the planted violation. `parent` is a live object.
unsafe fn keep_a_spin_lock(parent: wdk_sys::WDFOBJECT) {
    let mut attributes = context::attributes(parent, None);
    let mut lock: wdk_sys::WDFSPINLOCK = core::ptr::null_mut();
    // SAFETY: the attributes and the handle live for the call.
    let s =
        unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockCreate, &mut attributes, &mut lock) };
    if s >= 0 {
        // SAFETY: the lock just created; never released: the violation.
        unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockAcquire, lock) };
    }
}

extern "C" fn evt_timer(timer: wdk_sys::WDFTIMER) {
    // SAFETY: as in evt_dpc: the timer carries its TimerId.
    let Some(id) = (unsafe { resources::timer_id(timer) }) else {
        return;
    };
    // SAFETY: as in evt_dpc.
    if let Some(ctx) = unsafe { parent_fdo(Child::Timer(timer)) } {
        ctx.with_bus(|bus| bus.timer_fired(id));
        if planted(Defect::SpinLockKept) {
            // SAFETY: none: the planted violation (a lock still held as the callback
            // returns), which the model stops at.
            unsafe { keep_a_spin_lock(timer.cast()) };
        }
    }
}

/// EvtChildListCreateDevice: the PDO of one child function, with its ids and text, and the
/// bus interface published on it.
extern "C" fn evt_child_create_device(
    list: wdk_sys::WDFCHILDLIST,
    id: wdk_sys::PWDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER,
    init: PWDFDEVICE_INIT,
) -> NTSTATUS {
    // SAFETY: the child list is the FDO's default list, live while it creates children.
    let fdo = unsafe { call_unsafe_wdf_function_binding!(WdfChildListGetDevice, list) };
    let header = core::mem::size_of::<wdk_sys::WDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER>();
    // SAFETY: the identification is the size the list was configured with: the header, then
    // the child's u32 serial.
    let serial_at = unsafe { id.cast::<u8>().add(header) }.cast::<u32>();
    // SAFETY: as above; the serial follows the header unaligned-safe.
    let serial = unsafe { serial_at.read_unaligned() };
    // SAFETY: `init` is KMDF's for this child; `fdo` is live while its children are created.
    unsafe { objects::create_pdo(init, fdo, serial) }
}
